// Issue 23, finding 3: a tenant grew the daemon through its own gateway. An unread
// subscriptions/listen stream had no backlog cap (one took the server from 12 to
// 316 MiB in 8 s), and each request its server never answered kept about 8 MiB.
// The server process holds every tenant's API, gateway and egress: its memory is
// everyone's. Here, with --held-per-sandbox 8, the stream is cut with an event,
// the pending calls keep nothing of their bodies, and a neighbour sandbox's
// gateway answers throughout.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';

import { McpDaemon, RawSession, httpCall, skipReason, waitFor } from '../mcp/lib.mjs';
import { parseMetrics, startDaemon, stopDaemon } from '../e2e/lib.mjs';
import { MiB, assertBounded, serverRss } from './lib.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const STRESS = fs.readFileSync(path.join(HERE, 'stress-server.mjs'));
const V = '2026-07-28';
const META = (extra = {}) => ({ 'io.modelcontextprotocol/protocolVersion': V,
  'io.modelcontextprotocol/clientCapabilities': {},
  'io.modelcontextprotocol/clientInfo': { name: 'attack', version: '1' }, ...extra });


/** A 2026-07-28 request's headers and body. */
function modern(auth, method, params, id) {
  const body = JSON.stringify({ jsonrpc: '2.0', id, method, params: { ...params, _meta: META() } });
  const headers = { Authorization: auth, Accept: 'application/json, text/event-stream',
    'Content-Type': 'application/json', 'MCP-Protocol-Version': V, 'Mcp-Method': method };
  if (method === 'tools/call') headers['Mcp-Name'] = params.name;
  return { headers, body };
}

/**
 * A client that sends one request and never reads the answer: python with a 4 KiB
 * receive buffer, so that what the daemon writes stays on the daemon's side.
 * Returns the child (kill it to close the connection).
 */
function neverReads(url, { headers, body }) {
  const u = new URL(url);
  const head = [`POST ${u.pathname} HTTP/1.1`, `Host: ${u.host}`,
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`), `Content-Length: ${Buffer.byteLength(body)}`, '', ''].join('\r\n');
  const py = `
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect((${JSON.stringify(u.hostname)}, ${u.port}))
s.sendall(sys.stdin.buffer.read())
print("sent", flush=True)
import time
while True: time.sleep(3600)
`;
  const child = spawn('/usr/bin/python3', ['-c', py], { stdio: ['pipe', 'pipe', 'inherit'] });
  child.stdin.end(head + body);
  child.sent = new Promise((resolve) => child.stdout.once('data', resolve));
  return child;
}

describe('a tenant cannot grow the daemon through its gateway', { skip: skipReason() }, () => {
  let d, url, auth, neighbour;
  before(async () => {
    d = await startDaemon({ prefix: 'runtime-attack-gw-', make: (dir) => {
      const x = new McpDaemon(dir);
      x.extraArgs = ['--held-per-sandbox', '8'];
      return x;
    } });
    const sb = await d.create({ name: 'tenant' });
    await d.putFile(sb.id, '/workspace/stress.mjs', STRESS);
    const got = await d.mcpReady(sb.id, [{ name: 'stress', command: ['node', '/workspace/stress.mjs'] }]);
    url = got.servers.stress.url;
    auth = got.status.headers.Authorization;
    const other = await d.create({ name: 'neighbour' });
    await d.putFile(other.id, '/workspace/stress.mjs', STRESS);
    const n = await d.mcpReady(other.id, [{ name: 'stress', command: ['node', '/workspace/stress.mjs'] }]);
    neighbour = { id: other.id, url: n.servers.stress.url, auth: n.status.headers.Authorization };
  });
  after(async () => {
    await stopDaemon(d);
  });

  /** The neighbour's tools/call answers. */
  async function neighbourServed() {
    const { headers, body } = modern(neighbour.auth, 'tools/call', { name: 'hello', arguments: {} }, 'n-1');
    const r = await httpCall(neighbour.url, { method: 'POST', headers, body });
    assert.equal(r.status, 200, r.text);
    assert.match(r.text, /hello/);
  }

  test('an unread listen stream is cut at the sandbox\'s budget, with an event; the daemon does not grow', async () => {
    const sb = (await d.api('GET', '/v1/sandboxes/tenant')).body;
    const mark = await d.eventMark(sb.id);
    const rss0 = serverRss(d);
    const listener = neverReads(url, modern(auth, 'subscriptions/listen',
      { notifications: { resourceSubscriptions: ['test://flood'] } }, 'listen-1'));
    try {
      await listener.sent;
      // 3,000 updates of 64 KiB: 192 MiB for a client that reads none of it.
      const { headers, body } = modern(auth, 'tools/call', { name: 'flood', arguments: { count: 3000, size: 65536 } }, 'f-1');
      const flood = httpCall(url, { method: 'POST', headers, body, timeoutMs: 120000 });
      const dropped = await d.waitEvent(sb.id, (e) => e.kind === 'mcp.client_dropped',
        { after: mark, timeoutMs: 60000, what: 'the listen stream to be dropped' });
      assert.equal(dropped.server, 'stress');
      assert.ok(dropped.backlogBytes > 0);
      await neighbourServed();
      const r = await flood;
      assert.equal(r.status, 200, r.text);
      assert.match(r.text, /done/, 'the call itself was answered');
      await assertBounded(d, rss0, 48 * MiB, '192 MiB of unread updates');
    } finally {
      listener.kill();
    }
  });


});

describe('a tenant at the default budget: unanswered calls, many sessions', { skip: skipReason() }, () => {
  let d, sb, url, auth;
  before(async () => {
    d = await startDaemon({ prefix: 'runtime-attack-never-', make: (dir) => new McpDaemon(dir) });
    sb = await d.create({ name: 'never' });
    await d.putFile(sb.id, '/workspace/stress.mjs', STRESS);
    const got = await d.mcpReady(sb.id, [{ name: 'stress', command: ['node', '/workspace/stress.mjs'] }]);
    url = got.servers.stress.url;
    auth = got.status.headers.Authorization;
  });
  after(async () => {
    await stopDaemon(d);
  });

  test('120 calls of 4 MiB that the server never answers keep nothing of their bodies', async () => {
    const rss0 = serverRss(d);
    const pad = 'x'.repeat(4 * MiB - 4096);
    const clients = [];
    try {
      // Four at a time, each four read by the server before the next: more at once
      // would find its stdin pipe full (16 MiB unsent to a process fails a request).
      let seen = 0;
      for (let i = 0; i < 120; i++) {
        const c = neverReads(url, modern(auth, 'tools/call', { name: 'never', arguments: { pad } }, `never-${i}`));
        clients.push(c);
        await c.sent;
        if (i % 4 !== 3) continue;
        await waitFor(async () => {
          const r = await d.exec(sb.id, ['sh', '-c', 'cat /workspace/never.log 2>/dev/null | wc -l']);
          seen = Number(r.stdout.trim());
          return seen === i + 1;
        }, { timeoutMs: 30000, what: `call ${i + 1} to reach the server` }).catch((e) => {
          throw new Error(`${e.message} (${seen} did)`);
        });
      }
      await assertBounded(d, rss0, 64 * MiB, '120 pending calls of 4 MiB');
    } finally {
      for (const c of clients) c.kill();
    }
  });

  test('thirty sessions\' resumption histories keep at most a quarter of the sandbox\'s budget', async () => {
    // Each 2025 session keeps its last 256 events (8 MiB) for Last-Event-ID: thirty
    // sessions subscribed to updates would keep 240 MiB. A sandbox's sessions keep at
    // most a quarter of --held-per-sandbox (128 MiB) together.
    const rss0 = serverRss(d);
    const sessions = [];
    try {
      for (let i = 0; i < 30; i++) {
        const s = new RawSession(url, auth);
        await s.initialize();
        await s.request('resources/subscribe', { uri: 'test://flood' });
        const get = await s.openGet();
        assert.ok(get.sse, `session ${i}: its GET stream`);
        get.res.on('data', () => {});
        sessions.push({ s, get });
      }
      const { headers, body } = modern(auth, 'tools/call', { name: 'flood', arguments: { count: 256, size: 32768 } }, 'f-2');
      const r = await httpCall(url, { method: 'POST', headers, body, timeoutMs: 120000 });
      assert.equal(r.status, 200, r.text);
      const m = parseMetrics((await d.api('GET', '/metrics')).text);
      const history = m.get(`runtime_gateway_history_bytes{account="default",sandbox="${sb.id}"}`);
      assert.ok(history > 16 * MiB && history <= 32 * MiB, `the sessions keep ${(history / MiB).toFixed(1)} MiB`);
      // Readers slower than the flood leave answers unsent: the sandbox may hold its
      // 128 MiB, not the 240 MiB of histories and more that it held before.
      await assertBounded(d, rss0, 160 * MiB, 'thirty sessions with 8 MiB of updates each');
    } finally {
      for (const { s, get } of sessions) {
        get.res.destroy();
        await s.close().catch(() => {});
      }
    }
  });
});
