// A catalog server's install, phase by phase, as its user sees it: the sandbox's npm
// is pointed (NPM_CONFIG_REGISTRY) at a registry this test runs, which serves the
// catalog's memory package at its pinned version, but with other tools (the hello
// fixture), so the install succeeds and the fingerprint gate refuses the server.
//
//   CLI      `runtime sandbox mcp ID start memory` says it installs (npm, the
//            package and version), that it starts, that it was refused; no
//            `claude mcp add` line for it, a comment with its status instead
//   events   mcp.installing (manager, package, version), mcp.installed (seconds),
//            mcp.starting, mcp.refused, in that order
//   logs     `runtime sandbox mcp ID logs memory`: each install step's command and
//            output, and what the server wrote on stderr
//   log      the daemon's log has the install's start and end (with its seconds) and
//            the refusal, naming the sandbox, its name and account
//
// The registry lives in a namespace of its own linked to the host's (HostLink, on
// TEST-NET-2); the daemon pins registry.acme.test to it with --resolve. Nothing here
// sleeps for synchronisation: waits poll with deadlines.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { ROOT, isRoot } from '../e2e/lib.mjs';
import { EgressDaemon, HostLink } from '../egress/lib.mjs';
import { Upstream } from '../secrets/lib.mjs';

const REGISTRY_JS = path.join(ROOT, 'tests', 'mcp', 'fixtures', 'npm-registry.mjs');
const HELLO_JS = path.join(ROOT, 'tests', 'mcp', 'fixtures', 'hello-server.mjs');
const CATALOG = JSON.parse(fs.readFileSync(path.join(ROOT, 'catalog', 'servers.json'), 'utf8'));
const REGISTRY_V4 = '198.51.100.242';
const HOST_V4 = '198.51.100.241';
const REGISTRY_HOST = 'registry.acme.test';
const MARKER = 'fake memory server: starting';

const skip = !isRoot() && 'must run as root (runtimed needs it)';

/** The catalog's memory package as a directory: its name and version, our server. */
function fakePackage(dir, entry) {
  const pkg = path.join(dir, 'pkg');
  fs.mkdirSync(pkg);
  fs.writeFileSync(path.join(pkg, 'package.json'), JSON.stringify({
    name: entry.package, version: entry.version, bin: { [entry.command[0]]: 'server.mjs' },
  }));
  const server = `#!/usr/bin/env node\nprocess.stderr.write(${JSON.stringify(`${MARKER}\n`)});\n` +
    fs.readFileSync(HELLO_JS, 'utf8');
  fs.writeFileSync(path.join(pkg, 'server.mjs'), server, { mode: 0o755 });
  return pkg;
}

describe('a catalog install, phase by phase', { skip }, () => {
  const entry = CATALOG.find((e) => e.id === 'memory');
  let dir, link, registry, d;

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'runtime-install-phases-'));
    fs.chmodSync(dir, 0o711);
    const cfg = path.join(dir, 'registry.json');
    fs.writeFileSync(cfg, JSON.stringify({ bind: REGISTRY_V4, port: 80, dir: fakePackage(dir, entry) }));
    link = new HostLink('rt-npmrg', { hostAddr: HOST_V4, nsAddr: REGISTRY_V4 }).setup();
    registry = new Upstream(link.node(REGISTRY_JS, cfg));
    await registry.ready();
    d = new EgressDaemon(dir, { pins: [`${REGISTRY_HOST}:80:${REGISTRY_V4}`] });
    await d.start();
  });
  after(async () => {
    try {
      await d?.close({ keepDir: true });
    } finally {
      registry?.stop();
      link?.teardown();
      if (dir && !process.env.RUNTIME_E2E_KEEP) fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('installing, installed, starting, refused: on the CLI, as events, in the logs and the daemon log',
    { timeout: 5 * 60 * 1000 }, async () => {
      const sb = await d.create({
        name: 'phases',
        network: { internet: false },
        env: { NPM_CONFIG_REGISTRY: `http://${REGISTRY_HOST}/` },
      });
      const r = await d.cli(['sandbox', 'mcp', sb.id, 'start', 'memory', '--wait', '240'], { timeoutMs: 270000 });
      assert.equal(r.code, 1, `stdout:\n${r.stdout}\nstderr:\n${r.stderr}`);
      const progress = r.stderr.split('\n').filter((l) => !l.startsWith('runtime: ') && l);
      const pkg = `${entry.package} ${entry.version}`;
      assert.equal(progress[0], `installing memory (npm ${pkg})...`, r.stderr);
      // Every 10 s of the install (none when it is quick), then one line a phase.
      for (const l of progress.slice(1, -3)) assert.match(l, /^installing memory \(npm, \d+0 s\)\.\.\.$/, r.stderr);
      assert.match(progress.at(-3), /^installed memory \(npm, \d+\.\d s\)$/, r.stderr);
      assert.deepEqual(progress.slice(-2), ['starting memory...', 'memory refused'], r.stderr);
      assert.match(r.stderr, /^runtime: MCP server memory was refused/m);

      // The paste lines: none for a refused server; its status and error instead.
      assert.ok(!r.stdout.includes('claude mcp add'), r.stdout);
      assert.match(r.stdout, /^# memory is refused, so it has no line to paste: \S/m, r.stdout);

      const events = (await d.events(sb.id)).filter((e) => e.kind.startsWith('mcp.'));
      assert.deepEqual(events.map((e) => e.kind), ['mcp.installing', 'mcp.installed', 'mcp.starting', 'mcp.refused'],
        JSON.stringify(events));
      const [installing, installed] = events;
      assert.equal(installing.server, 'memory');
      assert.equal(installing.manager, 'npm');
      assert.equal(installing.package, entry.package);
      assert.equal(installing.version, entry.version);
      assert.equal(typeof installed.seconds, 'number', JSON.stringify(installed));
      assert.ok(installed.seconds > 0 && installed.seconds < 240, JSON.stringify(installed));

      // The install's output and the server's stderr, in `logs`.
      const logs = await d.cli(['sandbox', 'mcp', sb.id, 'logs', 'memory']);
      assert.equal(logs.code, 0, logs.stderr);
      assert.match(logs.stdout, /^\$ npm config get registry\nhttp:\/\/registry\.acme\.test\/\n/, logs.stdout);
      assert.match(logs.stdout, /^\$ npm install --ignore-scripts .* @modelcontextprotocol\/server-memory@/m, logs.stdout);
      assert.match(logs.stdout, /^\[runtime: the step exited with status 0\]$/m, logs.stdout);
      assert.ok(logs.stdout.includes(`${MARKER}\n`), logs.stdout);

      // The daemon's log: one line each, naming the sandbox, its name and account.
      const who = `sandbox ${sb.id} (name phases, account default): MCP server memory`;
      const log = d.log();
      assert.ok(log.includes(`${who} installing ${pkg} with npm`), log);
      assert.match(log, new RegExp(`${esc(who)} installed ${esc(pkg)} with npm in \\d+\\.\\d s`), log);
      assert.ok(log.includes(`${who} refused: `), log);
      await d.remove(sb.id);
    });

  test('an install that fails says npm\'s error line first, not its last lines', { timeout: 5 * 60 * 1000 }, async () => {
    const sb = await d.create({ network: { internet: false }, env: { NPM_CONFIG_REGISTRY: `http://${REGISTRY_HOST}/` } });
    // The registry has only the memory package: npm's answer for filesystem is a 404.
    const r = await d.cli(['sandbox', 'mcp', sb.id, 'start', 'filesystem', '--wait', '240'], { timeoutMs: 270000 });
    assert.equal(r.code, 1, `stdout:\n${r.stdout}\nstderr:\n${r.stderr}`);
    const st = (await d.api('GET', `/v1/sandboxes/${sb.id}/mcp`)).body.servers.find((s) => s.name === 'filesystem');
    assert.equal(st.status, 'failed', JSON.stringify(st));
    assert.match(st.error, /: npm exited with status 1: npm error 404 Not Found - GET http:\/\/registry\.acme\.test\/\S+( - [^(]*)? \(all its output: runtime sandbox mcp \S+ logs filesystem\)$/,
      st.error);
    assert.match(r.stderr, /^runtime: MCP server filesystem failed: .*npm error 404 Not Found/m, r.stderr);
    const failed = (await d.events(sb.id)).find((e) => e.kind === 'mcp.failed');
    assert.equal(failed.phase, 'installing', JSON.stringify(failed));
    await d.remove(sb.id);
  });
});

function esc(s) {
  return s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
}
