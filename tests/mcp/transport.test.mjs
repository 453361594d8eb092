// The gateway's Streamable HTTP transport, by hand (node:http, no SDK), against the
// rules of the MCP specification's transport section (2025-03-26, 2025-06-18,
// 2025-11-25): sessions, the status codes for what a client gets wrong, Origin and
// Host checks, batches by protocol version, SSE event ids and resumption, the size
// limit, and the token and link of one sandbox not opening another's servers.
// The server behind the gateway is a tiny stdio program written below.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import {
  ACCEPT_BOTH, RawSession, VERSIONS, httpCall, httpSend, isType, readBody, SseReader, skipReason,
  startMcpDaemon, token, waitFor,
} from './lib.mjs';
import { stopDaemon } from '../e2e/lib.mjs';

// A minimal MCP server over stdio (newline-delimited JSON-RPC), no dependencies.
// Tools: echo {message} -> message; big {bytes} -> that much text; bye {bytes} -> that
// much text, then the process exits; flood {count, bytes | sizes, spaced} -> count progress
// notifications of bytes each (or of the sizes in turn; spaced: each written once the one
// before is in the pipe), then the answer; slow {count,
// delayMs} -> count progress notifications (when the call has a progressToken),
// delayMs apart, then the answer.
const TINY = String.raw`
import { writeFileSync } from 'node:fs';
const SUPPORTED = ['2024-11-05', '2025-03-26', '2025-06-18', '2025-11-25'];
const TOOLS = [
  { name: 'echo', description: 'Echoes the message.',
    inputSchema: { type: 'object', properties: { message: { type: 'string' } }, required: ['message'] } },
  { name: 'big', description: 'Answers with that many bytes of text.',
    inputSchema: { type: 'object', properties: { bytes: { type: 'number' } }, required: ['bytes'] } },
  { name: 'bye', description: 'Answers with that many bytes of text, then exits.',
    inputSchema: { type: 'object', properties: { bytes: { type: 'number' } }, required: ['bytes'] } },
  { name: 'flood', description: 'Sends count progress messages of bytes each, then answers.',
    inputSchema: { type: 'object', properties: { count: { type: 'number' }, bytes: { type: 'number' },
      sizes: { type: 'array', items: { type: 'number' } }, spaced: { type: 'boolean' } } } },
  { name: 'slow', description: 'Reports progress, then answers.',
    inputSchema: { type: 'object', properties: { count: { type: 'number' }, delayMs: { type: 'number' } } } },
];
const send = (m) => process.stdout.write(JSON.stringify(m) + '\n');
const ok = (id, result) => send({ jsonrpc: '2.0', id, result });
const fail = (id, code, message) => send({ jsonrpc: '2.0', id, error: { code, message } });
function call(msg) {
  const { name, arguments: args = {}, _meta = {} } = msg.params || {};
  if (name === 'echo') return ok(msg.id, { content: [{ type: 'text', text: String(args.message) }] });
  if (name === 'big') return ok(msg.id, { content: [{ type: 'text', text: 'z'.repeat(args.bytes) }] });
  if (name === 'bye') {
    process.stdout.write(JSON.stringify({ jsonrpc: '2.0', id: msg.id,
      result: { content: [{ type: 'text', text: 'b'.repeat(args.bytes) }] } }) + '\n', () => process.exit(0));
    return;
  }
  if (name === 'flood') {
    const note = (i) => JSON.stringify({ jsonrpc: '2.0', method: 'notifications/progress', params: {
      progressToken: _meta.progressToken, progress: i + 1,
      message: 'f'.repeat(args.sizes ? args.sizes[i % args.sizes.length] : args.bytes) } }) + '\n';
    if (args.spaced) { // each line once the one before is in the pipe: lines come one by one
      const next = (i) => i === args.count ? ok(msg.id, { content: [{ type: 'text', text: 'flooded' }] })
        : process.stdout.write(note(i), () => next(i + 1));
      return next(0);
    }
    for (let i = 0; i < args.count; i++) process.stdout.write(note(i));
    // The marker appears once every byte is in the pipe to the gateway.
    process.stdout.write(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: { content: [{ type: 'text', text: 'flooded' }] } }) + '\n',
      () => writeFileSync('/workspace/flooded', '1'));
    return;
  }
  if (name !== 'slow') return fail(msg.id, -32602, 'Unknown tool: ' + name);
  const count = args.count ?? 3, delay = args.delayMs ?? 200;
  let i = 0;
  const step = () => {
    if (i === count) return ok(msg.id, { content: [{ type: 'text', text: 'slow done after ' + count }] });
    i++;
    if (_meta.progressToken !== undefined) {
      send({ jsonrpc: '2.0', method: 'notifications/progress',
        params: { progressToken: _meta.progressToken, progress: i, total: count } });
    }
    setTimeout(step, delay);
  };
  setTimeout(step, delay);
}
function handle(msg) {
  if (typeof msg.method !== 'string') return;
  const req = msg.id !== undefined && msg.id !== null;
  if (msg.method === 'initialize') {
    const v = msg.params && msg.params.protocolVersion;
    return ok(msg.id, { protocolVersion: SUPPORTED.includes(v) ? v : '2025-06-18',
      capabilities: { tools: {} }, serverInfo: { name: 'tiny', version: '1.0.0' } });
  }
  if (msg.method === 'ping') return req && ok(msg.id, {});
  if (msg.method === 'tools/list') return ok(msg.id, { tools: TOOLS });
  if (msg.method === 'tools/call') return call(msg);
  if (req) fail(msg.id, -32601, 'Method not found: ' + msg.method);
}
let buf = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (c) => {
  buf += c;
  let i;
  while ((i = buf.indexOf('\n')) >= 0) {
    const line = buf.slice(0, i);
    buf = buf.slice(i + 1);
    if (!line.trim()) continue;
    let m;
    try { m = JSON.parse(line); } catch { fail(null, -32700, 'Parse error'); continue; }
    for (const x of Array.isArray(m) ? m : [m]) handle(x);
  }
});
process.stdin.on('end', () => process.exit(0));
`;

const MiB = 1 << 20;
const LIMIT = 4 * MiB; // one JSON-RPC message, either way (docs/gateway.md)

describe('Streamable HTTP transport of the gateway', { skip: skipReason() }, () => {
  let d, sb, sb2, url, url2, otherUrl, auth, otherAuth;

  before(async () => {
    d = await startMcpDaemon();
    sb = await d.create({ name: 'mcp-transport' });
    sb2 = await d.create({ name: 'mcp-transport-other' });
    for (const s of [sb, sb2]) await d.putFile(s.id, '/workspace/tiny.mjs', TINY);
    const cmd = ['node', '/workspace/tiny.mjs'];
    const got = await d.mcpReady(sb.id, [{ name: 'tiny', command: cmd }, { name: 'tiny2', command: cmd }]);
    url = got.servers.tiny.url;
    url2 = got.servers.tiny2.url;
    auth = got.status.headers.Authorization;
    const other = await d.mcpReady(sb2.id, [{ name: 'tiny', command: cmd }]);
    otherUrl = other.servers.tiny.url;
    otherAuth = other.status.headers.Authorization;
  });
  after(async () => {
    await stopDaemon(d);
  });

  /** A fresh, initialized raw session on the first server. */
  async function session(version = '2025-06-18', u = url) {
    const s = new RawSession(u, auth, { version });
    await s.initialize();
    return s;
  }

  const ping = (id = 1) => JSON.stringify({ jsonrpc: '2.0', id, method: 'ping' });
  /** A POST with the session's headers, some replaced (undefined removes one). */
  const post = (s, body, extra = {}, u = url) => httpCall(u, { method: 'POST', headers: s.headers(extra), body });
  /** A GET on the session's stream; an SSE answer is closed at once (see httpCall). */
  const get = (s, extra = {}) => httpCall(url, {
    method: 'GET', headers: s.headers({ Accept: 'text/event-stream', 'Content-Type': undefined, ...extra }),
  });

  test('initialize answers each version with that version and a new Mcp-Session-Id', async () => {
    const ids = new Set();
    for (const v of VERSIONS) {
      const s = new RawSession(url, auth, { version: v });
      const init = await s.initialize();
      assert.equal(init.protocolVersion, v, `asked for ${v}`);
      assert.equal(init.serverInfo?.name, 'tiny', JSON.stringify(init));
      assert.ok(init.capabilities?.tools, 'the server\'s capabilities come through');
      assert.match(s.sessionId, /^[\x21-\x7e]{16,}$/, 'visible ASCII, long enough to be unguessable');
      ids.add(s.sessionId);
      assert.deepEqual(await s.request('ping', {}), {});
      const tools = await s.listTools();
      assert.deepEqual(tools.map((t) => t.name), ['big', 'bye', 'echo', 'flood', 'slow']);
      await s.close();
    }
    assert.equal(ids.size, VERSIONS.length, 'every session has its own id');
    // A version the gateway does not know: it answers with one it supports.
    const s = new RawSession(url, auth, { version: '2025-06-18' });
    const init = await s.initialize({ protocolVersion: '2099-01-01' });
    assert.ok(VERSIONS.includes(init.protocolVersion), `answered ${init.protocolVersion}`);
    await s.close();
  });

  test('responses keep the client\'s request ids (numbers, strings, zero, big)', async () => {
    const s = await session();
    for (const id of [0, 1, 2 ** 53 - 1, -5, 'abc', 'ü-ñ-✓', '']) {
      const r = await s.post({ jsonrpc: '2.0', id, method: 'ping' });
      assert.equal(r.status, 200, r.text);
      const res = r.messages.filter((m) => !m.method);
      assert.equal(res.length, 1, JSON.stringify(r.messages));
      assert.deepEqual(res[0], { jsonrpc: '2.0', id, result: {} });
    }
    await s.close();
  });

  test('a request without a session id is 400; an unknown session 404', async () => {
    const s = await session();
    const none = await post(s, ping(), { 'Mcp-Session-Id': undefined });
    assert.equal(none.status, 400, none.text);
    const unknown = await post(s, ping(), { 'Mcp-Session-Id': `x${token('nosuch')}` });
    assert.equal(unknown.status, 404, unknown.text);
    const getUnknown = await get(s, { 'Mcp-Session-Id': `x${token('nosuch')}` });
    assert.equal(getUnknown.status, 404, getUnknown.text);
    // A session belongs to its server: on another server of the sandbox it is unknown.
    const elsewhere = await post(s, ping(), {}, url2);
    assert.equal(elsewhere.status, 404, elsewhere.text);
    assert.deepEqual(await s.request('ping', {}), {}, 'the session itself still works');
    await s.close();
  });

  test('POST needs Accept with both application/json and text/event-stream (406)', async () => {
    const s = await session();
    for (const accept of ['application/json', 'text/event-stream', 'text/html', undefined]) {
      const r = await post(s, ping(), { Accept: accept });
      assert.equal(r.status, 406, `Accept ${accept}: ${r.status} ${r.text}`);
    }
    const both = await post(s, ping(9), { Accept: 'text/event-stream, application/json' });
    assert.equal(both.status, 200, both.text);
    await s.close();
  });

  test('POST needs Content-Type application/json (415)', async () => {
    const s = await session();
    for (const ct of ['text/plain', 'application/x-www-form-urlencoded', undefined]) {
      const r = await post(s, ping(), { 'Content-Type': ct });
      assert.equal(r.status, 415, `Content-Type ${ct}: ${r.status} ${r.text}`);
    }
    const r = await post(s, ping(3), { 'Content-Type': 'application/json; charset=utf-8' });
    assert.equal(r.status, 200, r.text);
    await s.close();
  });

  test('bad JSON is 400 with a JSON-RPC parse error; JSON that is no JSON-RPC message is 400', async () => {
    const s = await session();
    for (const body of ['{"jsonrpc":"2.0","id":1,"method":', 'not json at all', '']) {
      const r = await post(s, body);
      assert.equal(r.status, 400, `${JSON.stringify(body)}: ${r.status} ${r.text}`);
      if (body) {
        assert.ok(r.json, `a JSON-RPC error body: ${r.text}`);
        assert.equal(r.json.error?.code, -32700, r.text);
        assert.equal(r.json.id ?? null, null);
      }
    }
    for (const body of ['{"hello":"world"}', '42', '"x"', '{"jsonrpc":"1.0","id":1,"method":"ping"}']) {
      const r = await post(s, body);
      assert.equal(r.status, 400, `${body}: ${r.status} ${r.text}`);
    }
    assert.deepEqual(await s.request('ping', {}), {});
    await s.close();
  });

  test('a notification is 202 with no body', async () => {
    const s = await session();
    const r = await post(s, JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
    assert.equal(r.status, 202, r.text);
    assert.equal(r.buf.length, 0, `no body: ${r.text}`);
    await s.close();
  });

  test('GET with Accept text/event-stream opens an SSE stream', async () => {
    const s = await session();
    const g = await s.openGet();
    assert.equal(g.status, 200, g.text);
    assert.ok(isType(g.headers['content-type'], 'text/event-stream'), g.headers['content-type']);
    g.sse.close();
    // Without a session it is 405: 2026-07-28 has no GET stream (its clients listen with
    // subscriptions/listen), and a 2025 GET needs a session.
    const none = await get(s, { 'Mcp-Session-Id': undefined, 'MCP-Protocol-Version': undefined });
    assert.equal(none.status, 405, none.text);
    assert.equal(none.headers.allow, 'POST');
    await s.close();
  });

  test('DELETE ends the session; requests on it are 404 from then on', async () => {
    const s = await session();
    const st = await s.close();
    assert.ok([200, 202, 204].includes(st), `DELETE answered ${st}`);
    const again = await post(s, ping());
    assert.equal(again.status, 404, again.text);
    const stream = await get(s);
    assert.equal(stream.status, 404, stream.text);
    assert.equal(await s.close(), 404, 'a second DELETE');
    // Other sessions are untouched.
    const t = await session();
    assert.deepEqual(await t.request('ping', {}), {});
    await t.close();
  });

  test('an unsupported MCP-Protocol-Version is 400', async () => {
    const s = await session('2025-06-18');
    for (const v of ['1999-01-01', 'banana']) {
      const r = await post(s, ping(), { 'MCP-Protocol-Version': v });
      assert.equal(r.status, 400, `${v}: ${r.status} ${r.text}`);
    }
    assert.deepEqual(await s.request('ping', {}), {}, 'with the negotiated version it works');
    await s.close();
  });

  test('an Origin of another site is 403; the gateway\'s own origin is fine', async () => {
    const evil = 'https://evil.example';
    const init = JSON.stringify({
      jsonrpc: '2.0', id: 1, method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'o', version: '1' } },
    });
    const h = { Authorization: auth, Accept: ACCEPT_BOTH, 'Content-Type': 'application/json' };
    const r = await httpCall(url, { method: 'POST', headers: { ...h, Origin: evil }, body: init });
    assert.equal(r.status, 403, r.text);
    assert.equal(r.headers['mcp-session-id'], undefined, 'no session for a refused origin');
    const s = await session();
    for (const o of [evil, 'http://127.0.0.1.evil.example', 'null']) {
      const inSession = await post(s, ping(), { Origin: o });
      assert.equal(inSession.status, 403, `Origin ${o}: ${inSession.text}`);
    }
    const own = await post(s, ping(), { Origin: new URL(url).origin });
    assert.equal(own.status, 200, own.text);
    await s.close();
  });

  test('a browser on a local origin (the MCP Inspector) gets CORS; another origin does not', async () => {
    const local = 'http://localhost:6274';
    const pre = await httpCall(url, { method: 'OPTIONS', headers: {
      Origin: local, 'Access-Control-Request-Method': 'POST',
      'Access-Control-Request-Headers': 'authorization, content-type, mcp-session-id' } });
    assert.equal(pre.status, 204, pre.text);
    assert.equal(pre.headers['access-control-allow-origin'], local);
    assert.match(pre.headers['access-control-allow-headers'], /Authorization/);
    assert.match(pre.headers['access-control-allow-headers'], /Mcp-Session-Id/);
    const evil = await httpCall(url, { method: 'OPTIONS', headers: { Origin: 'https://evil.example' } });
    assert.equal(evil.status, 403);
    assert.equal(evil.headers['access-control-allow-origin'], undefined);
    const init = JSON.stringify({
      jsonrpc: '2.0', id: 1, method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'cors', version: '1' } },
    });
    const r = await httpCall(url, { method: 'POST', body: init, headers: {
      Origin: local, Authorization: auth, Accept: ACCEPT_BOTH, 'Content-Type': 'application/json' } });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.headers['access-control-allow-origin'], local);
    assert.match(r.headers['access-control-expose-headers'], /Mcp-Session-Id/, 'the browser may read the session id');
  });

  test('a Host header naming another host is 403 (DNS rebinding)', async () => {
    const s = await session();
    const port = new URL(url).port;
    for (const host of ['evil.example', `evil.example:${port}`, `attacker.test:${port}`]) {
      const r = await post(s, ping(), { Host: host });
      assert.equal(r.status, 403, `Host ${host}: ${r.status} ${r.text}`);
    }
    const own = await post(s, ping(), { Host: new URL(url).host });
    assert.equal(own.status, 200, own.text);
    await s.close();
  });

  test('batches: accepted on 2025-03-26, refused (400) on 2025-06-18 and 2025-11-25', async () => {
    const old = await session('2025-03-26');
    const batch = [
      { jsonrpc: '2.0', id: 'b1', method: 'ping' },
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      { jsonrpc: '2.0', id: 'b2', method: 'tools/call',
        params: { name: 'echo', arguments: { message: 'in a batch' } } },
    ];
    const r = await old.post(batch);
    assert.equal(r.status, 200, r.text);
    const b1 = r.messages.find((m) => m.id === 'b1'), b2 = r.messages.find((m) => m.id === 'b2');
    assert.deepEqual(b1?.result, {}, JSON.stringify(r.messages));
    assert.equal(b2?.result?.content?.[0]?.text, 'in a batch', JSON.stringify(r.messages));
    if (r.json !== undefined) assert.ok(Array.isArray(r.json), 'a JSON answer to a batch is an array');
    const notes = await old.post([{ jsonrpc: '2.0', method: 'notifications/initialized' }]);
    assert.equal(notes.status, 202, `a batch of notifications only: ${notes.text}`);
    await old.close();
    for (const v of ['2025-06-18', '2025-11-25']) {
      const s = await session(v);
      const refused = await s.post([{ jsonrpc: '2.0', id: 1, method: 'ping' }]);
      assert.equal(refused.status, 400, `${v}: ${refused.text}`);
      assert.deepEqual(await s.request('ping', {}), {});
      await s.close();
    }
  });

  test('SSE events carry ids, and a GET with Last-Event-ID resumes without duplicates', async (t) => {
    const s = await session('2025-11-25');
    const count = 6, delayMs = 250;
    const call = (id, progressToken) => JSON.stringify({
      jsonrpc: '2.0', id, method: 'tools/call',
      params: { name: 'slow', arguments: { count, delayMs }, _meta: { progressToken } },
    });
    // Where do the call's progress notifications go: its own POST stream, or (if the
    // POST is answered with plain JSON) the session's GET stream?
    let stream, via;
    const answer = await httpSend(url, { method: 'POST', headers: s.headers(), body: call(77, 'tok-a') });
    assert.equal(answer.status, 200);
    if (isType(answer.headers['content-type'], 'text/event-stream')) {
      stream = new SseReader(answer.res);
      via = 'POST';
    } else {
      const body = JSON.parse((await readBody(answer.res)).toString('utf8'));
      assert.equal(body.id, 77);
      t.diagnostic('tools/call answered with JSON; progress must come on the GET stream');
      const g = await s.openGet();
      assert.equal(g.status, 200);
      stream = g.sse;
      via = 'GET';
      const again = await httpSend(url, { method: 'POST', headers: s.headers(), body: call(78, 'tok-b') });
      assert.equal(again.status, 200);
      again.res.resume();
    }
    const first = await stream.next((e) => e.message?.method === 'notifications/progress',
      { timeoutMs: 15000, what: `a progress notification on the ${via} stream` });
    assert.ok(first, `the ${via} stream ended before any progress`);
    const seen = stream.events.slice();
    for (const e of seen) {
      if (e.data) assert.ok(e.id, `an SSE event with data has an id: ${JSON.stringify(e)}`);
    }
    const seenIds = seen.filter((e) => e.id).map((e) => e.id);
    assert.equal(new Set(seenIds).size, seenIds.length, `event ids are unique: ${seenIds}`);
    const lastId = seenIds[seenIds.length - 1];
    const seenProgress = new Set(seen.filter((e) => e.message?.method === 'notifications/progress')
      .map((e) => `${e.message.params.progressToken}/${e.message.params.progress}`));
    stream.close(); // the connection drops mid-call

    const resumed = await s.openGet({ 'Last-Event-ID': lastId });
    assert.equal(resumed.status, 200, `GET with Last-Event-ID: ${resumed.status} ${resumed.text}`);
    assert.ok(resumed.sse, 'the resumed stream is an SSE stream');
    const reqId = via === 'POST' ? 77 : 78;
    // Collect until the call's response arrives (replayed) or well past its end.
    await resumed.sse.next((e) => e.message?.id === reqId && !e.message.method,
      { timeoutMs: count * delayMs + 3000 }).catch(() => null);
    const later = await resumed.sse.settle(300);
    resumed.sse.close();
    for (const e of later) {
      if (e.id) assert.ok(!seenIds.includes(e.id), `event ${e.id} delivered twice`);
      if (e.data) assert.ok(e.id, `an SSE event with data has an id: ${JSON.stringify(e)}`);
      const p = e.message?.params;
      if (e.message?.method === 'notifications/progress') {
        assert.ok(!seenProgress.has(`${p.progressToken}/${p.progress}`), `progress ${p.progress} delivered twice`);
      }
    }
    const responses = later.filter((e) => e.message?.id === reqId && !e.message.method);
    assert.ok(responses.length <= 1, 'the response at most once');
    t.diagnostic(`resumed on GET after ${lastId}: ${later.length} events, ` +
      `response ${responses.length ? 'replayed' : 'not replayed'}`);
    assert.deepEqual(await s.request('ping', {}), {}, 'the session works after the resumption');
    await s.close();
  });

  test('a message over the size limit is 413; one under it goes through both ways', async () => {
    const s = await session();
    const big = 'x'.repeat(MiB);
    const echoed = await s.request('tools/call', { name: 'echo', arguments: { message: big } }, { timeoutMs: 60000 });
    assert.equal(echoed.content[0].text, big);
    // Just over the gateway's limit (4 MiB, docs/gateway.md), and far over anything
    // (the daemon caps every request body at 64 MiB): refused before the server sees it.
    for (const size of [LIMIT + 1024, 64 * MiB + 4096]) {
      const huge = Buffer.from(JSON.stringify({
        jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'echo', arguments: { message: 'y'.repeat(size) } },
      }));
      const r = await httpSend(url, {
        method: 'POST', headers: s.headers(), body: huge, expectContinue: true, timeoutMs: 60000,
      });
      const text = (await readBody(r.res).catch(() => Buffer.alloc(0))).toString('utf8');
      assert.equal(r.status, 413, `${huge.length} bytes: ${text.slice(0, 300)}`);
    }
    assert.deepEqual(await s.request('ping', {}), {}, 'the session works after a refused message');
    await s.close();
  });

  test('a server message over the limit fails that call, not the gateway; the server comes back', async () => {
    const s = await session();
    const under = await s.request('tools/call', { name: 'big', arguments: { bytes: 3 * MiB } }, { timeoutMs: 60000 });
    assert.equal(under.content[0].text.length, 3 * MiB);
    const over = s.request('tools/call', { name: 'big', arguments: { bytes: LIMIT + MiB } }, { timeoutMs: 30000 });
    await assert.rejects(over, (e) => e.rpc !== undefined, 'the caller gets a JSON-RPC error, not a hang');
    await waitFor(async () => {
      const r = await s.request('tools/call', { name: 'echo', arguments: { message: 'back' } });
      return r.content[0].text === 'back';
    }, { timeoutMs: 30000, intervalMs: 200, what: 'the server to answer again' });
    await s.close();
  });

  // Lines over 4 KiB are parsed on a thread of their own (src/mcp/parse.c) and short ones on
  // the loop: what a server writes still reaches its client in the order written.
  test('long and short messages from a server reach the client in the order it wrote them', async () => {
    const s = await session();
    // At once (lines share reads), and one by one (a short line comes alone while the long
    // one before it is still being parsed).
    for (const [spaced, sizes] of [[false, [10, 9000, 40, 70000, 5, 300000, 20, 5000]],
      [true, [400000, 10, 10, 10, 9000, 10]]]) {
      const count = 24;
      const r = await s.post({ jsonrpc: '2.0', id: 77, method: 'tools/call',
        params: { name: 'flood', arguments: { count, sizes, spaced }, _meta: { progressToken: 'order' } } },
      { timeoutMs: 60000 });
      assert.equal(r.status, 200);
      const progress = r.messages.filter((m) => m.method === 'notifications/progress');
      assert.deepEqual(progress.map((m) => m.params.progress), Array.from({ length: count }, (_, i) => i + 1),
        `spaced: ${spaced}`);
      assert.deepEqual(progress.map((m) => m.params.message.length),
        Array.from({ length: count }, (_, i) => sizes[i % sizes.length]));
      const last = r.messages.at(-1);
      assert.equal(last.id, 77, 'the answer comes after every notification');
      assert.equal(last.result.content[0].text, 'flooded');
    }
    await s.close();
  });

  // The exit comes while the answer's line may still be at the parser: it must not end the
  // call before the answer is routed.
  test('a server that answers at length and exits at once: the client gets the answer', async () => {
    const s = await session();
    for (const bytes of [200000, 3 * MiB]) {
      const res = await s.request('tools/call', { name: 'bye', arguments: { bytes } }, { timeoutMs: 60000 });
      assert.equal(res.content[0].text.length, bytes);
      await waitFor(async () => {
        const r = await s.request('tools/call', { name: 'echo', arguments: { message: 'back' } }).catch(() => null);
        return r?.content[0].text === 'back';
      }, { timeoutMs: 30000, intervalMs: 200, what: 'the server to answer again after its exit' });
    }
    await s.close();
  });

  test('a client that does not read while the server floods it is dropped, not buffered without end', async () => {
    const s = await session();
    await d.exec(sb.id, ['rm', '-f', '/workspace/flooded']); // an earlier flood's marker
    const body = JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/call',
      params: { name: 'flood', arguments: { count: 48, bytes: MiB }, _meta: { progressToken: 'fl' } } });
    const r = await httpSend(url, { method: 'POST', headers: s.headers(), body, timeoutMs: 60000 });
    assert.equal(r.status, 200);
    r.res.pause(); // read nothing: 48 MiB of progress piles up in the gateway until its cap
    await waitFor(async () => (await d.exec(sb.id, ['test', '-f', '/workspace/flooded'])).exitCode === 0,
      { timeoutMs: 30000, what: 'the server to have written its flood and answer' });
    // Now read: the gateway dropped the connection at its cap, so the stream ends early,
    // without the answer (which waits in the session's history for a resumption).
    const got = await new Promise((resolve) => {
      let bytes = 0, tail = '';
      const done = (ended) => resolve({ ended, bytes, tail });
      r.res.on('data', (c) => { bytes += c.length; tail = (tail + c.toString('latin1')).slice(-4096); });
      r.res.on('end', () => done(true));
      r.res.on('aborted', () => done(false));
      r.res.on('error', () => done(false));
      r.res.resume();
    });
    assert.equal(got.ended, false, `the stream ended normally after ${got.bytes} bytes: nothing was dropped`);
    assert.ok(got.bytes < 40 * MiB, `the client got ${got.bytes} bytes`);
    assert.ok(!got.tail.includes('"flooded"'), 'the answer came on the dropped connection');
    assert.deepEqual(await s.request('ping', {}), {}, 'the session and the gateway work on');
    await s.close();
  });

  test('one sandbox\'s token opens none of another sandbox\'s servers', async () => {
    const h = (a) => ({ Authorization: a, Accept: ACCEPT_BOTH, 'Content-Type': 'application/json' });
    const init = JSON.stringify({
      jsonrpc: '2.0', id: 1, method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } },
    });
    assert.notEqual(auth, otherAuth, 'each sandbox has its own token');
    const link = (u) => new URL(u).pathname.split('/')[2];
    assert.notEqual(link(url), link(otherUrl), 'and its own link');
    const cross1 = await httpCall(url, { method: 'POST', headers: h(otherAuth), body: init });
    assert.equal(cross1.status, 401, cross1.text);
    const cross2 = await httpCall(otherUrl, { method: 'POST', headers: h(auth), body: init });
    assert.equal(cross2.status, 401, cross2.text);
    const own = await httpCall(otherUrl, { method: 'POST', headers: h(otherAuth), body: init });
    assert.equal(own.status, 200, own.text);
    // The admin API key is no gateway token either.
    const admin = await httpCall(url, { method: 'POST', headers: h(`Bearer ${d.key}`), body: init });
    assert.equal(admin.status, 401, admin.text);
  });

  // Last on purpose: a gateway that crashes here takes the daemon with it.
  test('malformed JSON-RPC messages are 400, and the gateway survives them', async () => {
    const bad = [
      ['2025-06-18', { jsonrpc: '2.0', method: 5 }], // method not a string, no id
      ['2025-06-18', { jsonrpc: '2.0', method: 5, id: 1 }],
      ['2025-06-18', { jsonrpc: '2.0', method: null }],
      ['2025-06-18', { jsonrpc: '2.0', method: 'ping', id: {} }], // ids are strings, numbers or null
      ['2025-06-18', { jsonrpc: '2.0', method: 'ping', id: [1] }],
      ['2025-03-26', [{ jsonrpc: '2.0', method: 7 }]],
      ['2025-03-26', [{ jsonrpc: '2.0', id: 1, method: 'ping' }, { jsonrpc: '2.0', method: {} }]],
    ];
    for (const [version, body] of bad) {
      const s = await session(version);
      const r = await post(s, JSON.stringify(body)).catch((e) => ({ status: e.code, text: e.message }));
      assert.equal(r.status, 400, `${JSON.stringify(body)} (${version}): ${r.status} ${r.text}`);
      const api = await d.api('GET', '/v1/sandboxes', undefined, { timeoutMs: 5000 })
        .catch((e) => ({ status: e.message }));
      assert.equal(api.status, 200, `the daemon still answers after ${JSON.stringify(body)}`);
      assert.deepEqual(await s.request('ping', {}), {}, `the session works after ${JSON.stringify(body)}`);
      await s.close();
    }
  });
});
