// The package as users get it: npm pack, then install of the tarball into an
// empty project, offline (it has no dependencies), and both module systems.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { run, PKG } from './helpers.mjs';

const npm = (args, cwd) => run('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], { cwd, timeoutMs: 120_000 });

test('npm pack; npm install --offline of the tarball; import, require, types and the bin work', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'withruntime-pack-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const pack = await npm(['pack', '--pack-destination', dir], PKG);
  assert.equal(pack.code, 0, pack.stderr);
  const { version } = JSON.parse(fs.readFileSync(path.join(PKG, 'package.json'), 'utf8'));
  const tgz = path.join(dir, `withruntime-${version}.tgz`);
  assert.ok(fs.existsSync(tgz), pack.stdout);

  const app = path.join(dir, 'app');
  fs.mkdirSync(app);
  fs.writeFileSync(path.join(app, 'package.json'), '{"name":"app","version":"1.0.0","private":true}\n');
  const inst = await npm(['install', '--offline', tgz], app);
  assert.equal(inst.code, 0, inst.stderr);
  const installed = path.join(app, 'node_modules', 'withruntime');
  assert.ok(!fs.existsSync(path.join(installed, 'node_modules')), 'no runtime dependencies');

  const cjs = await run(process.execPath, ['-e', `const w = require('withruntime');
    const r = new w.Runtime({ baseUrl: 'http://x', apiKey: 'k' });
    console.log(typeof w.Sandbox.create, r.baseUrl, new w.NotFoundError({ message: 'm', code: 'not_found', status: 404 }) instanceof w.RuntimeError)`], { cwd: app });
  assert.equal(cjs.stdout, 'function http://x true\n', cjs.stderr);
  const esm = await run(process.execPath, ['--input-type=module', '-e', `import { Runtime, CommandError, VERSION } from 'withruntime';
    console.log(typeof Runtime, typeof CommandError, VERSION)`], { cwd: app });
  assert.equal(esm.stdout, `function function ${version}\n`, esm.stderr);

  // Types, seen from the user's project under both resolutions.
  fs.writeFileSync(path.join(app, 'use.mts'), `import { Runtime, Sandbox, type CommandResult, type McpGateway } from 'withruntime';
    const r: CommandResult = await (await new Runtime().sandboxes.create({ memoryMiB: 256 })).exec('true');
    const n: number | null = r.exitCode; void n; // null: a signal or the timeout ended it
    await using tmp = await Sandbox.create({ memoryMiB: 256 });
    const g: McpGateway = await tmp.mcp.ready(); void g.servers[0]?.url;\n`);
  fs.writeFileSync(path.join(app, 'use.cts'), `import w = require('withruntime');
    const e: w.RuntimeError = new w.ConflictError({ message: 'taken', code: 'name_taken', status: 409 }); void e.requestId;\n`);
  const tsc = path.join(PKG, 'node_modules', 'typescript', 'bin', 'tsc');
  const types = await run(process.execPath, [tsc, '--noEmit', '--strict', '--module', 'nodenext', '--target', 'es2022',
    '--lib', 'es2023,esnext.disposable',
    '--typeRoots', path.join(PKG, 'node_modules', '@types'), '--types', 'node', 'use.mts', 'use.cts'], { cwd: app });
  assert.equal(types.code, 0, types.stdout + types.stderr);

  const bin = await run(path.join(app, 'node_modules', '.bin', 'withruntime'), ['--trial'], { cwd: app });
  assert.equal(bin.code, 0, bin.stderr);
  assert.match(bin.stderr, /no trial/);
});
