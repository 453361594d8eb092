// Putting runtime on a machine, as a newcomer does it:
//
//   make install      runtimed and runtime into PREFIX/bin, the systemd unit (naming that
//                     runtimed) into /etc/systemd/system, under DESTDIR; make uninstall
//                     takes them away again
//   install-deps      --runtime installs only what runtime builds and runs with: not the
//                     tests' clients (npm ci in tests/mcp, tests/api, sdk/typescript)
//   scripts/demo      (online: it installs the memory and filesystem servers from npm)
//                     its last line names the address the daemon really serves, whatever
//                     RUNTIME_LISTEN says
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';

import { Daemon, ROOT, freePort, isRoot, pidAlive, run, waitFor } from './lib.mjs';

// The plain build, whatever RUNTIME_BUILD the suite runs (a sanitized tree is made with
// flags `make install` does not give, and is not what one installs).
const BUILD = path.join(ROOT, 'build');
// So a sanitized pass of the suite (make check runs it against build/asan too) would
// only do again what the plain pass did: it skips this file.
const skip = (!isRoot() && 'must run as root (make install writes as root; the demo starts runtimed)') ||
  (/asan/.test(process.env.RUNTIME_BUILD ?? '') && 'installs and runs the plain build, as the plain pass did');

function tempDir(prefix) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  fs.chmodSync(dir, 0o711);
  return dir;
}

describe('make install and make uninstall', { skip }, () => {
  const dirs = [];
  after(() => {
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  for (const prefix of ['/usr/local', '/opt/runtime']) {
    test(`PREFIX=${prefix}: the binaries, the unit naming them, the README; then gone again`, async () => {
      const dest = tempDir('runtime-install-');
      dirs.push(dest);
      const args = ['-s', '-C', ROOT, `BUILD=${BUILD}`, `DESTDIR=${dest}`, `PREFIX=${prefix}`];
      const inst = await run('make', [...args, 'install'], { timeoutMs: 600000 });
      assert.equal(inst.code, 0, `${inst.stdout}\n${inst.stderr}`);
      assert.match(inst.stdout, /systemctl daemon-reload && systemctl enable --now runtimed/);
      for (const bin of ['runtimed', 'runtime']) {
        const f = path.join(dest, prefix, 'bin', bin);
        assert.equal(fs.statSync(f).mode & 0o777, 0o755, f);
        assert.deepEqual(fs.readFileSync(f), fs.readFileSync(path.join(BUILD, bin)), `${f} is the build's`);
      }
      const version = await run(path.join(dest, prefix, 'bin', 'runtime'), ['--version']);
      assert.match(version.stdout, /^runtime \S+\n$/);
      const unit = fs.readFileSync(path.join(dest, 'etc/systemd/system/runtimed.service'), 'utf8');
      assert.match(unit, new RegExp(`^ExecStart=${prefix}/bin/runtimed --state-dir /var/lib/runtime `, 'm'));
      assert.match(unit, new RegExp(`^Documentation=file://${prefix}/share/doc/runtime/README.md$`, 'm'));
      assert.ok(fs.existsSync(path.join(dest, prefix, 'share/doc/runtime/README.md')));

      const un = await run('make', [...args, 'uninstall']);
      assert.equal(un.code, 0, `${un.stdout}\n${un.stderr}`);
      const left = fs.readdirSync(dest, { recursive: true })
        .filter((f) => fs.statSync(path.join(dest, f)).isFile());
      assert.deepEqual(left, [], 'make uninstall leaves no file');
    });
  }
});

test('install-deps --runtime installs none of the test clients', { skip }, async () => {
  // A tree with the lock files the full run installs from, and none of their modules.
  const tree = tempDir('runtime-deps-');
  try {
    fs.mkdirSync(path.join(tree, 'scripts'));
    fs.copyFileSync(path.join(ROOT, 'scripts/install-deps'), path.join(tree, 'scripts/install-deps'));
    fs.chmodSync(path.join(tree, 'scripts/install-deps'), 0o755);
    for (const dir of ['tests/mcp', 'tests/api', 'sdk/typescript']) {
      fs.mkdirSync(path.join(tree, dir), { recursive: true });
      fs.copyFileSync(path.join(ROOT, dir, 'package-lock.json'), path.join(tree, dir, 'package-lock.json'));
    }
    const r = await run(path.join(tree, 'scripts/install-deps'), ['--runtime'], { timeoutMs: 600000 });
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.doesNotMatch(r.stdout + r.stderr, /npm ci|test clients|validator|build tools|Python MCP client/);
    for (const dir of ['tests/mcp', 'tests/api', 'sdk/typescript']) {
      assert.ok(!fs.existsSync(path.join(tree, dir, 'node_modules')), `${dir}/node_modules was made`);
    }
    const bad = await run(path.join(tree, 'scripts/install-deps'), ['--everything']);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /unknown option --everything/);
  } finally {
    fs.rmSync(tree, { recursive: true, force: true });
  }
});

describe('scripts/demo', { skip: skip || (process.env.RUNTIME_E2E_OFFLINE && 'RUNTIME_E2E_OFFLINE is set') }, () => {
  let dir, d;
  after(async () => {
    // The demo leaves its runtimed running: stop it like a user would, and clean up.
    if (!d) return;
    // (removeAll() is for daemons the helper started itself.)
    const list = await d.api('GET', '/v1/sandboxes').catch(() => null);
    for (const s of list?.body?.data ?? []) await d.remove(s.id).catch(() => {});
    const keeper = Number(fs.readFileSync(path.join(d.stateDir, 'lock'), 'utf8'));
    if (keeper && pidAlive(keeper)) {
      process.kill(keeper, 'SIGTERM');
      await waitFor(() => !pidAlive(keeper), { timeoutMs: 20000, what: 'the demo\'s runtimed to stop' });
    }
    // A workspace's loop device detaches once its mount namespace is gone: soon after.
    const gone = await waitFor(() => Object.values(d.leftovers()).flat().length === 0,
      { timeoutMs: 15000, what: 'the demo\'s sandboxes to be gone' }).catch(() => false);
    const left = d.forceCleanup();
    if (!process.env.RUNTIME_E2E_KEEP) fs.rmSync(dir, { recursive: true, force: true });
    assert.ok(gone, `the demo's runtimed left ${JSON.stringify(left)}`);
  });

  test('its last line names the address the daemon serves, not 7070', { timeout: 15 * 60 * 1000 }, async () => {
    dir = tempDir('runtime-demo-');
    d = new Daemon(dir);
    d.port = await freePort();
    const env = { ...process.env, RUNTIME_STATE_DIR: d.stateDir, RUNTIME_SOCKET: d.socket,
      RUNTIME_LISTEN: `127.0.0.1:${d.port}`, RUNTIME_LOG: d.logFile, RUNTIME_API_URL: 'http://127.0.0.1:9' };
    const r = await run(path.join(ROOT, 'scripts/demo'), [], { env, timeoutMs: 14 * 60 * 1000 });
    assert.equal(r.code, 0, `stdout:\n${r.stdout}\nstderr:\n${r.stderr}\nlog:\n${d.log()}`);
    const lines = r.stdout.trimEnd().split('\n');
    assert.equal(lines.at(-1), `The API and the MCP gateway are at http://127.0.0.1:${d.port} and on ` +
      `${d.socket}; the admin key is in ${d.stateDir}/admin.key.`, r.stdout);
    assert.ok(!r.stdout.includes(':7070'), r.stdout);
    // It answers there, with that key.
    const list = await d.api('GET', '/v1/sandboxes');
    assert.equal(list.status, 200, list.text);
    assert.deepEqual(list.body.data.map((s) => s.name), ['demo']);
    // Both servers ready, each with its line to paste.
    const claude = lines.filter((l) => l.startsWith('claude mcp add '));
    assert.deepEqual(claude.map((l) => l.split(' ')[5]).sort(), ['filesystem', 'memory'], r.stdout);
  });
});
