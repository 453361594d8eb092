// The notification bypass (issue 23): a tools/call sent as a JSON-RPC notification (no
// id) reached the server process even for a tool outside the `tools` option or not in
// the approved list, since the gateway checks only requests. Now only the notifications
// MCP defines for clients pass (notifications/initialized, cancelled, progress,
// roots/list_changed, tasks/status); any other method without an id is answered 202, as
// the transport requires, dropped, counted and reported (mcp.refused). hello-server.mjs
// records every line the process receives; a request answered after the notifications
// proves that everything sent before it has been read. Both protocol eras: 2025 sessions
// (a single message and a 2025-03-26 batch) and the stateless 2026-07-28 path.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { ACCEPT_BOTH, FIXTURES, RawSession, skipReason, startMcpDaemon, waitFor } from './lib.mjs';
import { parseMetrics } from '../e2e/lib.mjs';

const HELLO = path.join(FIXTURES, 'hello-server.mjs');
const SERVER = '/workspace/hello.mjs';
const LINES = '/workspace/lines.jsonl';
const skip = skipReason();

let d, sb, gated, authorization;

before(async () => {
  if (skip) return;
  d = await startMcpDaemon({ prefix: 'runtime-mcp-notify-' });
  sb = await d.create({ name: 'notify-box' });
  await d.putFile(sb.id, SERVER, fs.readFileSync(HELLO));
  const got = await d.mcpReady(sb.id, [{
    name: 'gated', command: ['node', SERVER, '--extra', 'read_file,delete_repo', '--lines', LINES],
    tools: ['hello', 'read_file'],
  }]);
  gated = got.servers.gated;
  authorization = got.status.headers.Authorization;
});

after(async () => {
  if (d) await d.close();
});

/** The messages the process received, parsed. */
async function received() {
  const text = (await d.getFile(sb.id, LINES)).toString("utf8");
  return text.split('\n').filter(Boolean).map((l) => JSON.parse(l));
}

/** Notifications a client must not get past the gateway: tools/call of a tool outside the
 * tools option, of one outside the approved list, of an exposed one, and other methods. */
function forbidden(tag) {
  return [
    { method: 'tools/call', params: { name: 'delete_repo', arguments: { tag } } },
    { method: 'tools/call', params: { name: 'wipe_disk', arguments: { tag } } },
    { method: 'tools/call', params: { name: 'hello', arguments: { name: tag } } },
    { method: 'resources/read', params: { uri: `file:///${tag}` } },
    { method: 'notifications/made_up', params: { tag } },
  ].map((m) => ({ jsonrpc: '2.0', ...m }));
}

/** No message of tag reached the process; the marker (a request after them) did. */
async function assertDropped(tag, marker) {
  const got = await received();
  const leaked = got.filter((m) => JSON.stringify(m).includes(tag));
  assert.deepEqual(leaked, [], 'a forbidden notification reached the process');
  assert.ok(got.some((m) => m.method === 'tools/call' && m.params?.arguments?.name === marker),
    `the marker request ${marker} reached the process: ${JSON.stringify(got.slice(-3))}`);
}

const V = '2026-07-28';
const meta = { 'io.modelcontextprotocol/protocolVersion': V, 'io.modelcontextprotocol/clientCapabilities': {},
  'io.modelcontextprotocol/clientInfo': { name: 'runtime-notify-test', version: '1' } };

/** One 2026-07-28 POST with the headers a well-behaved client sends. */
async function send(body) {
  const h = { Authorization: authorization, Accept: ACCEPT_BOTH, 'Content-Type': 'application/json',
    'MCP-Protocol-Version': V, 'Mcp-Method': String(body.method) };
  const name = body.params?.name;
  if (typeof name === 'string' && !/[\r\n]/.test(name)) h['Mcp-Name'] = name;
  const res = await fetch(gated.url, { method: 'POST', headers: h, body: JSON.stringify(body) });
  return { status: res.status, text: await res.text() };
}

// First, while the server's reports are not yet limited (a few a second).
test('odd ones: a method that would forge a log line, a method that is no string', { skip }, async () => {
  const s = new RawSession(gated.url, authorization, { version: '2025-06-18' });
  await s.initialize();
  const forging = await s.post({ jsonrpc: '2.0', method: 'leak-odd\nforged line',
    params: { name: 'leak-odd\nforged tool' } });
  assert.equal(forging.status, 202, forging.text);
  const odd = await send({ jsonrpc: '2.0', method: 42, params: { name: 'leak-odd', _meta: meta } });
  assert.equal(odd.status, 202, odd.text);
  const r = await s.request('tools/call', { name: 'hello', arguments: { name: 'marker-odd' } });
  assert.equal(r.content[0].text, 'hello, marker-odd', 'the daemon goes on');
  await assertDropped('leak-odd', 'marker-odd');
  const ev = await d.waitEvent(sb.id, (e) => e.kind === 'mcp.refused' && e.method === 'leak-odd?forged line',
    { what: 'mcp.refused naming the method, its newline shown as ?' });
  assert.equal(ev.tool, undefined, 'a tool is named for a tools/call only');
  await waitFor(() => /dropped a leak-odd\?forged line sent as a notification/.test(d.log()),
    { what: 'the log line of the drop' });
  assert.ok(!/^forged line/m.test(d.log()), 'a client\'s string never starts a log line of its own');
  await s.close();
});

test('2025 session: a tools/call notification never reaches the process; MCP\'s own do', { skip }, async () => {
  const s = new RawSession(gated.url, authorization, { version: '2025-06-18' });
  await s.initialize();
  for (const m of forbidden('leak-2025')) {
    const r = await s.post(m);
    assert.equal(r.status, 202, `${m.method} ${JSON.stringify(m.params)}: ${r.text}`);
  }
  const progress = { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 'tok-2025', progress: 1 } };
  assert.equal((await s.post(progress)).status, 202);
  const r = await s.request('tools/call', { name: 'hello', arguments: { name: 'marker-2025' } });
  assert.equal(r.content[0].text, 'hello, marker-2025');
  await assertDropped('leak-2025', 'marker-2025');
  const got = await received();
  assert.ok(got.some((m) => m.method === 'notifications/progress' && m.params?.progressToken === 'tok-2025'),
    'a notification MCP defines still passes');
  await s.close();
});

test('2025-03-26 batch: the notifications in a batch are dropped, its request served', { skip }, async () => {
  const s = new RawSession(gated.url, authorization, { version: '2025-03-26' });
  await s.initialize();
  const marker = { jsonrpc: '2.0', id: 77, method: 'tools/call', params: { name: 'hello', arguments: { name: 'marker-batch' } } };
  const r = await s.post([...forbidden('leak-batch'), marker]);
  assert.equal(r.status, 200, r.text);
  assert.equal(r.messages.find((m) => m.id === 77)?.result?.content?.[0]?.text, 'hello, marker-batch');
  await assertDropped('leak-batch', 'marker-batch');
  await s.close();
});

test('2026-07-28: a tools/call notification is answered 202 and never reaches the process', { skip }, async () => {
  for (const m of forbidden('leak-2026')) {
    const r = await send({ ...m, params: { ...m.params, _meta: meta } });
    assert.equal(r.status, 202, `${m.method}: ${r.text}`);
  }
  const r = await send({ jsonrpc: '2.0', id: 'mark', method: 'tools/call',
    params: { name: 'hello', arguments: { name: 'marker-2026' }, _meta: meta } });
  assert.equal(r.status, 200, r.text);
  assert.match(r.text, /hello, marker-2026/);
  await assertDropped('leak-2026', 'marker-2026');
});

test('the dropped notifications are counted and reported', { skip }, async () => {
  const m = await d.api('GET', '/metrics');
  const metrics = parseMetrics(m.text);
  const key = `runtime_gateway_notifications_dropped_total{account="default",sandbox="${sb.id}",server="gated"}`;
  // Two odd ones, five from the 2025 session, five from the batch, five from 2026-07-28.
  assert.ok(metrics.get(key) >= 17, `${key} = ${metrics.get(key)}`);
  const events = await d.events(sb.id);
  const refused = events.filter((e) => e.kind === 'mcp.refused' && e.method === 'tools/call');
  assert.ok(refused.length > 0, JSON.stringify(events.slice(-5)));
  assert.match(refused[0].reason, /notification/);
});
