// Builds dist/esm (ES modules) and dist/cjs (CommonJS), each with .d.ts types:
// tsc twice, and a package.json in dist/cjs that tells Node those files are
// CommonJS (the package itself is "type": "module").
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');
const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
const version = /VERSION = '([^']+)'/.exec(fs.readFileSync(path.join(root, 'src', 'version.ts'), 'utf8'))?.[1];
if (version !== pkg.version) {
  console.error(`build: src/version.ts says ${version}, package.json says ${pkg.version}`);
  process.exit(1);
}
fs.rmSync(path.join(root, 'dist'), { recursive: true, force: true });
for (const project of ['tsconfig.json', 'tsconfig.cjs.json']) {
  execFileSync(process.execPath, [tsc, '-p', path.join(root, project)], { stdio: 'inherit' });
}
fs.writeFileSync(path.join(root, 'dist', 'cjs', 'package.json'), '{ "type": "commonjs" }\n');
