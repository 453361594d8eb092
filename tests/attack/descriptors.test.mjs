// Issue 23, finding 1: unauthenticated connections used to run the daemon out of
// descriptors, and then crash it (the accept error callback took libevent's evhttp
// for the server). Here the server process is limited to 1,024 descriptors, as
// the campaign's was, and 1,100 then 3,000 idle connections come from eight
// loopback addresses that are not the clients'. Throughout, the daemon stays up
// and answers an authenticated client over TCP on the API and on a sandbox's
// gateway, and that sandbox's egress still reaches its upstream.
//
// The daemon runs in its own network namespace (tests/egress/lib.mjs's World), so
// the flood and the clients run there too (ip netns exec).

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';

import { World, isRoot, waitFor } from '../egress/lib.mjs';
import { parseMetrics, pidAlive } from '../e2e/lib.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const FLOOD = path.join(HERE, 'flood.mjs');
const HELLO = path.join(HERE, '..', 'mcp', 'fixtures', 'hello-server.mjs');
const SOURCES = ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5', '127.0.0.6', '127.0.0.7', '127.0.0.8',
  '127.0.0.9'];

let w, d, sb, gateway, nofile;

/** One JSON line from flood.mjs MODE ARG, run in the daemon's namespace. */
function inNamespace(mode, arg) {
  const r = spawnSync('ip', ['netns', 'exec', w.dns, process.execPath, FLOOD, mode, JSON.stringify(arg)],
    { encoding: 'utf8', timeout: 30000 });
  if (r.status !== 0) throw new Error(`flood.mjs ${mode}: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').at(-1));
}

/** An idle flood held open until stop(); report() asks it for its counts. */
class Flood {
  constructor(count) {
    this.lines = [];
    this.proc = spawn('ip', ['netns', 'exec', w.dns, process.execPath, FLOOD, 'idle',
      JSON.stringify({ port: d.port, count, sources: SOURCES })], { stdio: ['pipe', 'pipe', 'inherit'] });
    let buf = '';
    this.proc.stdout.on('data', (c) => {
      buf += c;
      for (let i; (i = buf.indexOf('\n')) >= 0; buf = buf.slice(i + 1)) this.lines.push(JSON.parse(buf.slice(0, i)));
    });
  }

  async settled() {
    await waitFor(() => this.lines.length > 0, { timeoutMs: 60000, what: 'every flood connection to settle' });
    return this.lines.at(-1);
  }

  stop() {
    this.proc.stdin.end();
  }
}

function serverPid() {
  const pids = d.daemonPids();
  assert.equal(pids.length, 2, `keeper and server: ${pids}`);
  return pids[1];
}

/** The server's soft RLIMIT_NOFILE. */
function descriptorLimit(pid) {
  const line = fs.readFileSync(`/proc/${pid}/limits`, 'utf8').split('\n').find((l) => l.startsWith('Max open files'));
  return Number(line.split(/\s+/)[3]);
}

/** Sockets of the daemon's port left closing in its namespace (FIN-WAIT, TIME-WAIT): what
 * connections it ended still cost the kernel. */
function closingSockets(port) {
  const r = spawnSync('ip', ['netns', 'exec', w.dns, 'ss', '-Htan', 'state', 'fin-wait-1', 'state', 'fin-wait-2',
    'state', 'time-wait', 'sport', '=', `:${port}`], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout.split('\n').filter(Boolean).length;
}

function openDescriptors(pid) {
  return fs.readdirSync(`/proc/${pid}/fd`).length;
}

/** What an authenticated client gets from the API, the gateway and the sandbox's egress. */
async function victimCalls() {
  const auth = { Authorization: `Bearer ${d.key}` };
  const api = inNamespace('call', { port: d.port, path: '/v1/sandboxes', headers: auth });
  const ping = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {
    protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'victim', version: '1' } } });
  const gw = inNamespace('call', { port: d.port, path: new URL(gateway.url).pathname, method: 'POST', body: ping,
    headers: { Authorization: gateway.auth, 'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream', Host: `127.0.0.1:${d.port}` } });
  const [egress] = await d.inside(sb.id, 'probe', { targets: [{ host: 'example.test' }] });
  return { api, gw, egress };
}

function assertServed({ api, gw, egress }, when) {
  assert.equal(api.status, 200, `${when}: the API: ${JSON.stringify(api)}`);
  assert.equal(JSON.parse(api.body).data.length >= 1, true, `${when}: the sandbox is listed`);
  assert.equal(gw.status, 200, `${when}: the gateway: ${JSON.stringify(gw)}`);
  assert.match(gw.body, /"serverInfo"/, `${when}: the gateway's initialize answer`);
  assert.equal(egress.connected, true, `${when}: egress: ${JSON.stringify(egress)}`);
  assert.match(egress.response, /^HTTP\/1\.1 200/, `${when}: the upstream answered: ${JSON.stringify(egress)}`);
}

describe('descriptor exhaustion by unauthenticated clients', { skip: !isRoot() && 'must run as root' }, () => {
  before(async () => {
    // The campaign's daemon had 1,024 descriptors. runtimed raises its limit at
    // start where it may (root with CAP_SYS_RESOURCE); it is started under 1,024
    // here, and the floods are sized from what the server really has.
    w = await new World({ pins: ['example.test:0:198.51.100.1'], traps: false,
      wrap: ['prlimit', '--nofile=1024:1024'] }).setup();
    d = w.daemon;
    sb = await d.sandbox({ internet: true, allow: ['example.test'] });
    await d.putFile(sb.id, '/workspace/hello.mjs', fs.readFileSync(HELLO));
    const start = await d.api('POST', `/v1/sandboxes/${sb.id}/mcp`,
      { servers: [{ name: 'hello', command: ['node', '/workspace/hello.mjs'] }] });
    assert.equal(start.status, 202, start.text);
    const st = await waitFor(async () => {
      const r = await d.api('GET', `/v1/sandboxes/${sb.id}/mcp?wait=20`, undefined, { timeoutMs: 30000 });
      return r.body.servers?.[0]?.status === 'ready' && r.body;
    }, { timeoutMs: 60000, what: 'the hello server to be ready' });
    gateway = { url: st.servers[0].url, auth: st.headers.Authorization };
    nofile = descriptorLimit(serverPid());
  });
  after(async () => {
    await w?.teardown();
  });

  test('baseline: the victim is served', async () => {
    assertServed(await victimCalls(), 'before the flood');
  });

  // Past the limit, then well past it.
  for (const over of [76, 2000]) {
    test(`the descriptor limit + ${over} idle connections from other addresses: nothing stops, the victim is served`, async (t) => {
      if (nofile > 20000) return t.skip(`the server could raise its limit to ${nofile}: no flood here can reach it`);
      const count = nofile + over;
      const pid = serverPid();
      const flood = new Flood(count);
      try {
        const got = await flood.settled();
        assert.equal(got.opened + got.failed, count, JSON.stringify(got));
        assertServed(await victimCalls(), `with ${count} idle connections`);
        assert.ok(pidAlive(pid), 'the server process is alive');
        assert.equal(d.exited, null, `the daemon is running: ${d.log().slice(-2000)}`);
        // The flood holds at most a quarter of the descriptors: the rest are the
        // sandboxes' (egress, processes) and the store's.
        const held = openDescriptors(pid);
        assert.ok(held < nofile - nofile / 4, `the server holds ${held} of ${nofile} descriptors`);
        const m = parseMetrics((await d.api('GET', '/metrics')).text);
        assert.ok(m.get('runtime_http_connections{listener="tcp"}') <= Math.max(16, nofile / 4),
          `open TCP connections ${m.get('runtime_http_connections{listener="tcp"}')}`);
        const evicted = m.get('runtime_http_connections_total{result="evicted"}');
        assert.ok(evicted + m.get('runtime_http_connections_total{result="refused"}') > 0, 'the flood was shed');
        // An evicted connection is reset, not closed with a FIN: nothing of it stays in
        // the kernel for a minute (a flood evicts thousands a second).
        const closing = closingSockets(d.port);
        assert.ok(closing < 50, `${closing} sockets of the daemon's port still closing after ${evicted} evictions`);
      } finally {
        flood.stop();
      }
    });
  }

  test('after the floods the daemon is whole and its log says what happened', async () => {
    assertServed(await victimCalls(), 'after the floods');
    assert.doesNotMatch(d.log(), /segfault|SIGSEGV|server process .*ended/i);
  });
});
