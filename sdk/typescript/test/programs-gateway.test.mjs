// The programs users already have (issue 12), in test/programs/, each run as a child
// process with only RUNTIME_API_URL, RUNTIME_API_KEY, PATH and HOME in its
// environment, against the real daemon; the checks are what a user would look at:
//
//   gateway.mjs         a secret, a named sandbox with GitHub and Fetch from the catalog
//                       (installed from the real registries) and a stdio server of one's
//                       own; all ready, URLs on the daemon's public URL, a bearer header;
//                       the GitHub server holds a placeholder, never the token; the own
//                       server answers a tools/call over its URL
//   first-request.mjs   Sandbox.getOrCreate twice (the same sandbox), the initialize POST
//                       and what follows, by hand with fetch
//   catalog-narrow.ts   a catalog entry's hosts as the network of an `await using`
//                       sandbox; another host is refused; the sandbox is gone after the
//                       scope, also when the scope throws
//   mcp-client.mjs      the official MCP client (@modelcontextprotocol/sdk, as pinned in
//                       tests/mcp) lists and calls the tools of a gateway URL
//
// The programs run from a scratch project dir whose node_modules holds this package
// and the MCP SDK, as a user's project would. The tickets server they
// upload is tests/cloud/programs/tickets_server.py (the Python programs use it
// too). The catalog installs need the registries: RUNTIME_E2E_OFFLINE=1 skips that
// one test. Nothing here sleeps for synchronisation.
import { test, before, after, describe } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startDaemon, stopDaemon, isRoot, run, PKG, REPO } from './helpers.mjs';
import { RawSession, resultText, skipReason, startMcpDaemon } from '../../../tests/mcp/lib.mjs';

const PROGRAMS = path.join(PKG, 'test', 'programs');
const TICKETS = path.join(REPO, 'tests', 'cloud', 'programs', 'tickets_server.py');
const MCP_SDK = path.join(REPO, 'tests', 'mcp', 'node_modules', '@modelcontextprotocol', 'sdk');
const PLACEHOLDER = /^RUNTIME_PH_[0-9a-f]{32}$/;

const needRoot = skipReason();
const needNet = skipReason({ online: true });
let project; // the scratch project the programs run from

before(async () => {
  if (!needRoot) project = await stageProject();
});
after(() => {
  if (project) fs.rmSync(project, { recursive: true, force: true });
});

/**
 * A user's project: package.json, node_modules/withruntime (this package's dist) and
 * node_modules/@modelcontextprotocol/sdk (a symlink to tests/mcp's), the .mjs programs
 * copied in and the .ts one compiled by the package's tsc (type-checked against the
 * package's types).
 */
async function stageProject() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'runtime-programs-ts-'));
  fs.writeFileSync(path.join(dir, 'package.json'), '{ "private": true, "type": "module" }\n');
  fs.mkdirSync(path.join(dir, 'node_modules', '@modelcontextprotocol'), { recursive: true });
  // This package as npm would install it (a copy: a rebuild of dist/ meanwhile cannot touch it).
  const installed = path.join(dir, 'node_modules', 'withruntime');
  fs.mkdirSync(installed);
  fs.copyFileSync(path.join(PKG, 'package.json'), path.join(installed, 'package.json'));
  fs.cpSync(path.join(PKG, 'dist'), path.join(installed, 'dist'), { recursive: true });
  fs.symlinkSync(MCP_SDK, path.join(dir, 'node_modules', '@modelcontextprotocol', 'sdk'));
  fs.mkdirSync(path.join(dir, 'home'));
  for (const f of ['gateway.mjs', 'first-request.mjs', 'mcp-client.mjs']) {
    fs.copyFileSync(path.join(PROGRAMS, f), path.join(dir, f));
  }
  const tsc = path.join(PKG, 'node_modules', 'typescript', 'bin', 'tsc');
  const r = await run(process.execPath, [tsc, '--target', 'ES2022', '--lib', 'ES2023,ESNext.Disposable',
    '--module', 'NodeNext', '--moduleResolution', 'NodeNext', '--strict', '--skipLibCheck', '--types', 'node',
    '--rootDir', PROGRAMS, '--outDir', dir, path.join(PROGRAMS, 'catalog-narrow.ts')], { cwd: PKG });
  if (r.code !== 0) {
    fs.rmSync(dir, { recursive: true, force: true });
    throw new Error(`tsc catalog-narrow.ts:\n${r.stdout}${r.stderr}`);
  }
  return dir;
}

/** Runs a program of the project with d's URL and key and nothing else in its environment. */
async function program(d, file, args = [], { input, timeoutMs = 180_000 } = {}) {
  const dir = project;
  const env = { RUNTIME_API_URL: d.url, RUNTIME_API_KEY: d.key, PATH: process.env.PATH, HOME: path.join(dir, 'home') };
  const r = await run(process.execPath, [path.join(dir, file), ...args], { env, input, timeoutMs });
  r.show = `${file} ${args.join(' ')}: exit ${r.code}${r.signal ? ` (${r.signal})` : ''}\n` +
    `--- stdout\n${r.stdout}--- stderr\n${r.stderr}`;
  return r;
}

/** The match of re in the program's output, or a failure that shows the output. */
function line(r, re) {
  const m = re.exec(r.stdout);
  assert.ok(m, `no line ${re} in the output of ${r.show}`);
  return m;
}

describe('gateway.mjs: catalog servers with a secret and an own server, on a named sandbox', { skip: needNet }, () => {
  let d;
  before(async () => {
    d = await startMcpDaemon({ online: true, prefix: 'runtime-programs-ts-gw-' });
  });
  after(() => stopDaemon(d));

  test('all three ready on the public URL; the GitHub server holds a placeholder; tickets answers over its URL',
    { timeout: 15 * 60_000 }, async (t) => {
      const value = `ghp_${crypto.randomBytes(18).toString('hex')}`; // fake: nothing calls GitHub
      const started = Date.now();
      const r = await program(d, 'gateway.mjs', [TICKETS], { input: `${value}\n`, timeoutMs: 12 * 60_000 });
      t.diagnostic(`gateway.mjs took ${Math.round((Date.now() - started) / 1000)} s`);
      assert.equal(r.code, 0, r.show);
      assert.ok(!r.stdout.includes(value) && !r.stderr.includes(value), 'the program never shows the token');

      const [, name, id] = line(r, /^sandbox (gateway-[0-9a-f]{12}) (\S+)$/m);
      const info = (await d.api('GET', `/v1/sandboxes/${name}`)).body;
      assert.equal(info.id, id);
      assert.equal(info.idlePauseSeconds, 900);
      assert.deepEqual(info.labels, { role: 'mcp', customer: name });

      const servers = {};
      for (const s of ['github', 'fetch', 'tickets']) {
        const [, status, url] = line(r, new RegExp(`^${s} (\\S+) (\\S+)$`, 'm'));
        assert.equal(status, 'ready', r.show);
        assert.ok(url.startsWith(`${d.url}/mcp/`) && url.endsWith(`/${s}`), `${s}: ${url} is a gateway URL of ${d.url}`);
        servers[s] = url;
      }
      const [, auth] = line(r, /^Authorization: (Bearer \S+)$/m);
      line(r, /^catalog github,fetch$/m);
      assert.equal(line(r, /^again (\S+) reused=(\S+)$/m).slice(1).join(' '), `${id} true`, 'getOrCreate finds the same sandbox');

      const secret = (await d.api('GET', '/v1/egress-secrets')).body.secrets.find((s) => s.name === 'GITHUB_TOKEN');
      assert.deepEqual(secret?.hosts, ['api.github.com']);

      // Inside: GITHUB_TOKEN is a placeholder, and the GitHub server was given that
      // same placeholder under the name it reads; the token is in no environment.
      const env = await d.exec(id, ['printenv', 'GITHUB_TOKEN']);
      const placeholder = env.stdout.trim();
      assert.match(placeholder, PLACEHOLDER);
      const procs = await d.exec(id, ['sh', '-c',
        'for f in /proc/[0-9]*/environ; do tr "\\000" "\\n" < "$f" 2>/dev/null; echo; done']);
      assert.ok(!procs.stdout.includes(value), 'the token is in no process environment in the sandbox');
      const seen = procs.stdout.split('\n').filter((l) => l.startsWith('GITHUB_PERSONAL_ACCESS_TOKEN='));
      assert.ok(seen.length >= 1, 'the GitHub server runs with GITHUB_PERSONAL_ACCESS_TOKEN set');
      for (const l of seen) assert.equal(l, `GITHUB_PERSONAL_ACCESS_TOKEN=${placeholder}`);

      // The own server, over its URL with the header the program printed.
      const session = new RawSession(servers.tickets, auth);
      const init = await session.initialize();
      assert.equal(init.serverInfo.name, 'tickets');
      const call = await session.request('tools/call', { name: 'create_ticket', arguments: { title: 'Disk full' } });
      assert.equal(resultText(call), 'T-1 created: Disk full (normal)');
      await session.close();
    });
});

describe('programs on a gateway of the daemon', { skip: needRoot }, () => {
  let d;
  before(async () => {
    d = await startDaemon({ prefix: 'runtime-programs-ts-' });
  });
  after(() => stopDaemon(d));

  test('first-request.mjs: getOrCreate finds the same sandbox; the initialize POST by hand is answered',
    { timeout: 5 * 60_000 }, async () => {
      const first = await program(d, 'first-request.mjs', [TICKETS]);
      assert.equal(first.code, 0, first.show);
      const [, id] = line(first, /^sandbox (\S+)$/m);
      line(first, /^tickets started$/m);
      const count = (await d.api('GET', '/v1/sandboxes')).body.data.length;
      const second = await program(d, 'first-request.mjs', [TICKETS]);
      assert.equal(second.code, 0, second.show);
      assert.equal(line(second, /^sandbox (\S+)$/m)[1], id, 'the second run gets the same sandbox');
      line(second, /^tickets already there$/m);
      assert.equal((await d.api('GET', '/v1/sandboxes')).body.data.length, count, 'and makes no other');

      for (const r of [first, second]) {
        const [, status, type] = line(r, /^initialize (\d+) (.*)$/m);
        assert.equal(status, '200');
        assert.match(type, /^(application\/json|text\/event-stream)\b/);
        const result = JSON.parse(line(r, /^result (.*)$/m)[1]);
        assert.equal(result.protocolVersion, '2025-06-18');
        assert.equal(result.serverInfo.name, 'tickets');
        assert.equal(line(r, /^initialized (\d+)$/m)[1], '202');
        assert.deepEqual(line(r, /^tools\/list (\d+) (.*)$/m).slice(1), ['200', 'create_ticket,list_tickets']);
      }
      await d.remove(id);
    });

  test('catalog-narrow.ts: the entry\'s hosts only, another host refused; await using deletes the sandbox, also on a throw',
    { timeout: 5 * 60_000 }, async () => {
      const github = (await d.api('GET', '/v1/mcp/catalog')).body.data.find((e) => e.id === 'github');
      for (const args of [[], ['--throw']]) {
        const r = await program(d, 'catalog-narrow.js', args);
        const [, id] = line(r, /^sandbox (\S+)$/m);
        d.track(id);
        assert.ok(r.stdout.includes(`catalog github ${github.title} ${github.version} egress=api.github.com\n`), r.show);
        line(r, /^network internet=true allow=api\.github\.com$/m);
        line(r, /^curl example\.com exit=[1-9]\d* curl: \(6\) Could not resolve host: example\.com$/m);
        if (args.length) {
          assert.equal(r.code, 1, r.show);
          assert.match(r.stderr, /thrown on purpose inside the scope/);
          assert.doesNotMatch(r.stdout, /scope left/);
        } else {
          assert.equal(r.code, 0, r.show);
          line(r, /^scope left$/m);
        }
        const gone = await d.api('GET', `/v1/sandboxes/${id}`);
        assert.equal(gone.status, 404, `after ${r.show}\nthe sandbox is still there: ${gone.text}`);
      }
    });

  test('mcp-client.mjs: the official MCP client lists and calls the tools on the URL and header of mcp.ready()',
    { timeout: 5 * 60_000 }, async () => {
      const r = await program(d, 'mcp-client.mjs', [TICKETS]);
      assert.equal(r.code, 0, r.show);
      line(r, /^server tickets protocol \S+$/m);
      line(r, /^tools create_ticket,list_tickets$/m);
      line(r, /^create_ticket T-1 created: Printer on fire \(high\)$/m);
      line(r, /^list_tickets T-1 \[high\] Printer on fire$/m);
      assert.deepEqual((await d.api('GET', '/v1/sandboxes?label=role=mcp-client')).body.data, [], 'the program deleted its sandbox');
    });
});
