// npm's `prepare`: runs on `npm install ./sdk/typescript` (npm links the folder and runs
// it there), on `npm pack` and `npm publish`, and on `npm ci` in this folder. It builds
// dist/, first installing the build's own tools (TypeScript and Node's types, pinned in
// package-lock.json; nothing the package needs at run time) when a clean clone has none.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
if (!fs.existsSync(path.join(root, 'node_modules', 'typescript', 'bin', 'tsc'))) {
  const npm = process.env.npm_execpath;
  const [cmd, pre] = npm && npm.endsWith('.js') ? [process.execPath, [npm]] : ['npm', []];
  // Only the devDependencies, as the lock file pins them; their own scripts stay off.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_(config|package|lifecycle)_/i.test(k)));
  execFileSync(cmd, [...pre, 'ci', '--ignore-scripts', '--no-audit', '--no-fund', '--include=dev'],
    { cwd: root, stdio: ['ignore', 'inherit', 'inherit'], env });
}
await import('./build.mjs');
