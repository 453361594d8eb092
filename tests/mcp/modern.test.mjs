// The gateway's 2026-07-28 (stateless) front end, on the wire: fetch with every header
// explicit, no SDK (docs/protocol-2026-07-28.md §5.3). The classifier ladder (§4.2) case by
// case, each asserting HTTP status, JSON-RPC error code and the echoed id; server/discover
// against the legacy initialize of the same URL; tools/list and tools/call with their
// result decoration; per-request logging and progress on the request's own stream;
// cancellation by closing the connection; MRTR (an elicitation round trip, tampered,
// replayed and misapplied requestState, -32021, pre-answers, wrong keys); the one-waiter
// rule between a legacy session and modern calls, parked ones included; resources and
// prompts (cache hints, -32002 as -32602); subscriptions/listen (resources, prompts, and the
// fingerprint gate with the rug-pull fixture); GET/DELETE without a session; a legacy session
// beside it all; and a server with isolation "session", which does not speak 2026-07-28.
//
// The servers behind the gateway are legacy stdio servers: fixtures/modern-server.mjs (SDK
// 1.32.2 server code, records what reaches the process), fixtures/rugpull-server.mjs and
// fixtures/hello-server.mjs. Gateway decisions this file assumes, besides the design
// document: discover's supportedVersions is SUPPORTED below; an inputRequests key is the
// process's request id when that is a string matching ^[A-Za-z0-9_.-]{1,64}$; a server with
// isolation "session" answers every modern request 404 / -32601 with a message that says to
// connect in legacy mode. The park expiry runs in a daemon of its own with --mcp-input-wait 1.
// Not covered: MCP_MAX_PARKS (a parked call counts as waiting, so one shared process holds at
// most one park at a time).

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import {
  ACCEPT_BOTH, FIXTURES, HERE, McpDaemon, RawSession, SseReader, httpSend, isType, readBody, skipReason, startMcpDaemon,
  vectors, waitFor,
} from './lib.mjs';
import { startDaemon, stopDaemon } from '../e2e/lib.mjs';

const V = '2026-07-28';
const SUPPORTED = ['2026-07-28', '2025-11-25', '2025-06-18', '2025-03-26'];
const K = {
  version: 'io.modelcontextprotocol/protocolVersion',
  caps: 'io.modelcontextprotocol/clientCapabilities',
  info: 'io.modelcontextprotocol/clientInfo',
  level: 'io.modelcontextprotocol/logLevel',
  serverInfo: 'io.modelcontextprotocol/serverInfo',
  sub: 'io.modelcontextprotocol/subscriptionId',
};
const CLIENT_INFO = { name: 'runtime-modern-test', version: '1.0.0' };
const LEVELS = ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'];
const NAME_SCHEMA = {
  type: 'object', properties: { name: { type: 'string', description: 'Your name' } }, required: ['name'],
};
// What modern-server.mjs imports, with its dependencies (the conformance fixture's closure).
const PACKAGES = ['@modelcontextprotocol/sdk', 'zod', 'zod-to-json-schema', 'ajv', 'ajv-formats',
  'fast-deep-equal', 'fast-uri', 'json-schema-traverse', 'require-from-string'];
const RECORD = '/workspace/modern.record';

// The rug pull (as in rugpull.test.mjs): the approved list, and the change.
const WEATHER = JSON.parse(vectors()['weather-reviewed'].tools_json);
const POISONED = JSON.parse(vectors()['weather-today'].tools_json);
const A = [
  WEATHER[0],
  {
    name: 'get_time', description: 'Current time in a time zone.',
    inputSchema: { type: 'object', properties: { tz: { type: 'string' } }, required: ['tz'] },
  },
];
const clone = (v) => JSON.parse(JSON.stringify(v));

// ---------------------------------------------------------------- the modern wire

let seq = 0;
/** A fresh JSON-RPC id: strings and numbers alternate, so both kinds are echoed. */
const newId = (p = 'm') => (++seq % 2 ? `${p}-${seq}` : 100000 + seq);

/** The per-request _meta envelope (W-5); extra keys are laid over it, undefined removes one. */
function envelope(extra = {}) {
  const m = { [K.version]: V, [K.caps]: {}, [K.info]: CLIENT_INFO };
  for (const [k, v] of Object.entries(extra)) {
    if (v === undefined) delete m[k];
    else m[k] = v;
  }
  return m;
}

/** A modern request body. meta: laid over the envelope; caps: clientCapabilities. */
function rpc(method, params = {}, { id = newId(), meta = {}, caps } = {}) {
  const m = caps === undefined ? meta : { [K.caps]: caps, ...meta };
  return { jsonrpc: '2.0', id, method, params: { ...params, _meta: { ...envelope(m), ...(params._meta ?? {}) } } };
}

/** A modern tools/call body. */
const call = (name, args = {}, opts = {}) => rpc('tools/call', { name, arguments: args }, opts);

const NAMED = { 'tools/call': 'name', 'prompts/get': 'name', 'resources/read': 'uri' };

/** The headers of a well-behaved 2026-07-28 client for this body (W-21, W-22). */
function modernHeaders(auth, body, extra = {}) {
  const h = { Authorization: auth, Accept: ACCEPT_BOTH, 'Content-Type': 'application/json' };
  if (body && !Array.isArray(body) && typeof body.method === 'string') {
    h['MCP-Protocol-Version'] = body.params?._meta?.[K.version] ?? V;
    h['Mcp-Method'] = body.method;
    const field = NAMED[body.method];
    if (field && typeof body.params?.[field] === 'string') h['Mcp-Name'] = body.params[field];
  }
  for (const [k, v] of Object.entries(extra)) {
    for (const o of Object.keys(h)) if (o.toLowerCase() === k.toLowerCase()) delete h[o];
    if (v !== undefined) h[k] = v;
  }
  return h;
}

/**
 * One POST with fetch. Returns {status, headers (a Headers), contentType, text, json,
 * sse (an SseReader when the answer is SSE), messages, response}. For an SSE answer it reads
 * until the response to the body's id arrives (or the stream ends), then gives the server
 * 3 s to end the stream (ended tells), and closes it. stream: true returns at the head with
 * the SSE reader open (the caller closes it).
 */
async function post(url, auth, body, { headers = {}, raw, timeoutMs = 30000, stream = false } = {}) {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new Error(`no answer in ${timeoutMs} ms`)), timeoutMs);
  let res;
  try {
    res = await fetch(url, {
      method: 'POST', headers: modernHeaders(auth, body, headers), body: raw ?? JSON.stringify(body),
      signal: controller.signal,
    });
  } catch (e) {
    clearTimeout(timer);
    throw new Error(`POST ${JSON.stringify(body).slice(0, 200)}: ${e.message}`);
  }
  const out = { status: res.status, headers: res.headers, contentType: res.headers.get('content-type') };
  if (isType(out.contentType, 'text/event-stream')) {
    const sse = new SseReader(res, { controller });
    out.sse = sse;
    if (stream) {
      clearTimeout(timer);
      return out;
    }
    const id = body && !Array.isArray(body) ? body.id : undefined;
    try {
      await sse.next((e) => e.message && e.message.id === id && !e.message.method,
        { timeoutMs, what: `the response to ${JSON.stringify(id)}` });
      out.ended = await sse.end(3000);
    } finally {
      clearTimeout(timer);
      sse.close();
    }
    out.messages = sse.messages();
    out.response = out.messages.find((m) => m.id === id && !m.method) ?? null;
    const ev = sse.events.find((e) => e.message === out.response);
    out.text = ev ? ev.data : '';
    return out;
  }
  try {
    out.text = await res.text();
  } finally {
    clearTimeout(timer);
  }
  try {
    out.json = out.text ? JSON.parse(out.text) : null;
  } catch {
    out.json = null;
  }
  out.messages = out.json && !Array.isArray(out.json) ? [out.json] : out.json ?? [];
  out.response = out.json && !Array.isArray(out.json) ? out.json : null;
  return out;
}

/** What a failed assertion should show of an answer. */
const show = (r) => `HTTP ${r.status} ${r.contentType ?? ''} ${(r.text ?? '').slice(0, 800)}` +
  (r.sse ? ` events ${JSON.stringify(r.sse.events).slice(0, 800)}` : '');

/** The answer is a JSON-RPC error with this HTTP status and code, under the request's id. */
function assertError(r, status, code, id, what) {
  assert.equal(r.status, status, `${what}: HTTP status; ${show(r)}`);
  assert.ok(r.response, `${what}: a JSON-RPC response body; ${show(r)}`);
  assert.equal(r.response.jsonrpc, '2.0', `${what}: jsonrpc; ${show(r)}`);
  assert.equal(r.response.error?.code, code, `${what}: error code; ${show(r)}`);
  assert.equal(typeof r.response.error?.message, 'string', `${what}: error message; ${show(r)}`);
  assert.deepEqual(r.response.id, id, `${what}: the request's id echoed (W-10); ${show(r)}`);
  assert.equal(r.response.result, undefined, `${what}: no result beside the error; ${show(r)}`);
  assert.equal(r.headers.get('mcp-session-id'), null, `${what}: no Mcp-Session-Id; ${show(r)}`);
  return r.response.error;
}

/** The answer is a result (HTTP 200) under the request's id; returns the result. */
function assertResult(r, id, what) {
  assert.equal(r.status, 200, `${what}: HTTP status; ${show(r)}`);
  assert.ok(r.response, `${what}: a JSON-RPC response; ${show(r)}`);
  assert.deepEqual(r.response.id, id, `${what}: the request's id echoed; ${show(r)}`);
  assert.equal(r.response.error, undefined, `${what}: no error; ${show(r)}`);
  assert.ok(r.response.result && typeof r.response.result === 'object', `${what}: a result; ${show(r)}`);
  assert.equal(r.headers.get('mcp-session-id'), null, `${what}: a modern answer sets no Mcp-Session-Id; ${show(r)}`);
  return r.response.result;
}

/** A complete result: resultType "complete" (W-11) and serverInfo in _meta (W-12). */
function assertComplete(r, id, what, serverInfo) {
  const res = assertResult(r, id, what);
  assert.equal(res.resultType, 'complete', `${what}: resultType; ${show(r)}`);
  if (serverInfo) assert.deepEqual(res._meta?.[K.serverInfo], serverInfo, `${what}: _meta serverInfo; ${show(r)}`);
  return res;
}

/** Cache hints on a cacheable result (W-13; Q-5: always "private" here). */
function assertHints(res, what) {
  assert.ok(Number.isInteger(res.ttlMs) && res.ttlMs >= 0, `${what}: ttlMs an integer >= 0: ${JSON.stringify(res.ttlMs)}`);
  assert.equal(res.cacheScope, 'private', `${what}: cacheScope (the link and token are an authorization context)`);
}

/**
 * The raw text of the value at path (object keys) in a JSON text: to compare what two
 * answers carry byte for byte, not after a parse.
 */
function rawMember(text, keys) {
  let i = 0;
  const ws = () => { while (i < text.length && ' \t\r\n'.includes(text[i])) i++; };
  const fail = (why) => { throw new Error(`rawMember ${keys.join('.')}: ${why} at ${i} of ${text.slice(0, 200)}`); };
  const str = () => {
    if (text[i] !== '"') fail('string expected');
    for (i++; text[i] !== '"'; i++) {
      if (i >= text.length) fail('unterminated string');
      if (text[i] === '\\') i++;
    }
    i++;
  };
  const value = () => {
    ws();
    const c = text[i];
    if (c === '"') return str();
    if (c === '{' || c === '[') {
      const close = c === '{' ? '}' : ']';
      i++;
      ws();
      if (text[i] === close) { i++; return undefined; }
      for (;;) {
        if (c === '{') { ws(); str(); ws(); if (text[i++] !== ':') fail('colon expected'); }
        value();
        ws();
        if (text[i] === ',') { i++; continue; }
        if (text[i] === close) { i++; return undefined; }
        fail('comma or close expected');
      }
    }
    while (i < text.length && !',}] \t\r\n'.includes(text[i])) i++;
    return undefined;
  };
  for (const key of keys) {
    ws();
    if (text[i] !== '{') fail('object expected');
    i++;
    let found = false;
    for (;;) {
      ws();
      if (text[i] === '}') break;
      const ks = i;
      str();
      const k = JSON.parse(text.slice(ks, i));
      ws();
      if (text[i++] !== ':') fail('colon expected');
      ws();
      if (k === key) { found = true; break; }
      value();
      ws();
      if (text[i] === ',') i++;
    }
    if (!found) return undefined;
  }
  ws();
  const start = i;
  value();
  return text.slice(start, i);
}

/** One legacy request on a RawSession; returns {message, text} (the raw JSON of its answer). */
async function legacyRaw(s, method, params) {
  const id = s.nextId++;
  const r = await s.post({ jsonrpc: '2.0', id, method, params });
  assert.equal(r.status, 200, `legacy ${method}: ${r.status} ${r.text}`);
  if (r.text) return { message: JSON.parse(r.text), text: r.text };
  const ev = r.events.find((e) => e.message?.id === id && !e.message.method);
  assert.ok(ev, `legacy ${method}: no response in ${JSON.stringify(r.events)}`);
  return { message: ev.message, text: ev.data };
}

/** A sandbox holding the fixtures and the SDK closure modern-server.mjs imports. */
async function sandboxWithFixtures(d, tmp) {
  const tgz = path.join(tmp, 'modules.tgz');
  const tar = spawnSync('tar', ['czf', tgz, '-C', HERE, ...PACKAGES.map((p) => `node_modules/${p}`)]);
  assert.equal(tar.status, 0, String(tar.stderr));
  const sb = await d.create({ name: 'mcp-modern', memoryMiB: 1024 });
  await d.mustExec(sb.id, ['mkdir', '-p', '/workspace/modern']);
  await d.putFile(sb.id, '/workspace/modern/modules.tgz', fs.readFileSync(tgz));
  await d.mustExec(sb.id, ['tar', 'xzf', '/workspace/modern/modules.tgz', '-C', '/workspace/modern'],
    { timeoutMs: 120000 });
  for (const f of ['modern-server.mjs', 'rugpull-server.mjs', 'hello-server.mjs']) {
    const dir = f === 'modern-server.mjs' ? '/workspace/modern' : '/workspace';
    await d.putFile(sb.id, `${dir}/${f}`, fs.readFileSync(path.join(FIXTURES, f)));
  }
  return sb;
}

/** What modern-server.mjs recorded at the process so far. */
async function recordsOf(d, sb) {
  const r = await d.api('GET', `/v1/sandboxes/${sb.id}/files?path=${encodeURIComponent(RECORD)}`);
  if (r.status === 404) return [];
  assert.equal(r.status, 200, r.text);
  return r.text.split('\n').filter(Boolean).map((l) => JSON.parse(l));
}

// ---------------------------------------------------------------- the suite

describe('2026-07-28 (stateless) clients at the gateway', { skip: skipReason() }, () => {
  let d, sb, tmp, url, rugUrl, soloUrl, stopUrl, auth, legacyInit;

  before(async () => {
    d = await startMcpDaemon({ prefix: 'runtime-mcp-modern-' });
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'runtime-modern-'));
    sb = await sandboxWithFixtures(d, tmp);
    await d.replaceFile(sb.id, '/workspace/rug.json', JSON.stringify(A, null, 2));
    const got = await d.mcpReady(sb.id, [
      { name: 'modern', command: ['node', '/workspace/modern/modern-server.mjs', '--record', RECORD] },
      { name: 'rug', command: ['node', '/workspace/rugpull-server.mjs', '/workspace/rug.json', '/workspace/rug.calls'] },
      { name: 'solo', command: ['node', '/workspace/hello-server.mjs'], isolation: 'session' },
      { name: 'stopme', command: ['node', '/workspace/hello-server.mjs'] },
    ], { timeoutMs: 90000 });
    url = got.servers.modern.url;
    rugUrl = got.servers.rug.url;
    soloUrl = got.servers.solo.url;
    stopUrl = got.servers.stopme.url;
    auth = got.status.headers.Authorization;
    const s = new RawSession(url, auth, { version: '2025-11-25' });
    legacyInit = await s.initialize();
    await s.close();
  });
  after(async () => {
    if (d) await stopDaemon(d);
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  /** What the fixture recorded at the process so far (see modern-server.mjs). */
  const records = () => recordsOf(d, sb);

  // ------------------------------------------------------------ the ladder (§4.2, §5.3)

  describe('the classifier ladder: status, code and id of every rung', () => {
    const cases = [];
    const rung = (what, status, code, make, headers = {}) => cases.push({ what, status, code, make, headers });
    const toolsList = (params = {}, opts) => rpc('tools/list', params, opts);

    // Envelope (W-5, W-6): a missing required field is -32602 and HTTP 400.
    rung('no params at all, modern header', 400, -32602, () => ({ jsonrpc: '2.0', id: newId(), method: 'tools/list' }));
    rung('params without _meta, modern header', 400, -32602,
      () => ({ jsonrpc: '2.0', id: newId(), method: 'tools/list', params: {} }));
    rung('_meta without protocolVersion, modern header', 400, -32602,
      () => toolsList({}, { meta: { [K.version]: undefined } }));
    rung('_meta without clientCapabilities', 400, -32602, () => toolsList({}, { meta: { [K.caps]: undefined } }));
    rung('clientCapabilities not an object', 400, -32602, () => toolsList({}, { meta: { [K.caps]: 'all' } }));
    rung('logLevel not a level', 400, -32602, () => toolsList({}, { meta: { [K.level]: 'loud' } }));
    // Headers against the body (W-21): the mismatch comes before the version check.
    rung('MCP-Protocol-Version 2026-07-28, _meta claims v999.0.0', 400, -32020,
      () => toolsList({}, { meta: { [K.version]: 'v999.0.0' } }), { 'MCP-Protocol-Version': V });
    rung('MCP-Protocol-Version 2025-11-25, _meta claims 2026-07-28', 400, -32020,
      () => toolsList(), { 'MCP-Protocol-Version': '2025-11-25' });
    rung('no MCP-Protocol-Version header', 400, -32020, () => toolsList(), { 'MCP-Protocol-Version': undefined });
    rung('no Mcp-Method header', 400, -32020, () => toolsList(), { 'Mcp-Method': undefined });
    rung('Mcp-Method TOOLS/LIST (values are case-sensitive)', 400, -32020, () => toolsList(),
      { 'Mcp-Method': 'TOOLS/LIST' });
    rung('Mcp-Method tools/call on a tools/list body', 400, -32020, () => toolsList(), { 'Mcp-Method': 'tools/call' });
    rung('tools/call without Mcp-Name', 400, -32020, () => call('echo', { message: 'ladder-no-name' }),
      { 'Mcp-Name': undefined });
    rung('tools/call with an Mcp-Name of another tool', 400, -32020, () => call('echo', { message: 'ladder-wrong-name' }),
      { 'Mcp-Name': 'echo_meta' });
    rung('tools/call with an invalid base64 sentinel in Mcp-Name', 400, -32020,
      () => call('echo', { message: 'ladder-bad-sentinel' }), { 'Mcp-Name': '=?base64?!!not-base64!!?=' });
    // Versions (W-17): unknown, or known and not served statelessly.
    rung('_meta and header claim v999.0.0', 400, -32022, () => toolsList({}, { meta: { [K.version]: 'v999.0.0' } }));
    rung('_meta and header claim 2025-11-25', 400, -32022, () => toolsList({}, { meta: { [K.version]: '2025-11-25' } }));
    // Methods (W-20, W-25, W-26): 404 and -32601.
    rung('initialize with a valid modern claim', 404, -32601, () => rpc('initialize', {
      protocolVersion: '2025-11-25', capabilities: {}, clientInfo: CLIENT_INFO }));
    for (const m of ['ping', 'logging/setLevel', 'resources/subscribe', 'resources/unsubscribe', 'unknown/method']) {
      const params = m === 'logging/setLevel' ? { level: 'info' } : m.startsWith('resources/') ? { uri: 'test://x' } : {};
      rung(`${m} with a valid modern claim`, 404, -32601, () => rpc(m, params));
    }
    // initialize naming 2026 in the header but not in the body (row 4).
    rung('legacy initialize with MCP-Protocol-Version 2026-07-28', 400, -32020, () => ({
      jsonrpc: '2.0', id: newId(), method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: CLIENT_INFO },
    }), { 'MCP-Protocol-Version': V, 'Mcp-Method': 'initialize' });

    for (const c of cases) {
      test(`${c.what}: HTTP ${c.status}, ${c.code}`, async () => {
        const body = c.make();
        const r = await post(url, auth, body, { headers: c.headers });
        const err = assertError(r, c.status, c.code, body.id, c.what);
        if (c.code === -32022) {
          // W-17: data.supported (a subset of discover's list) and data.requested as sent.
          assert.deepEqual(err.data?.supported, SUPPORTED, `data.supported: ${show(r)}`);
          assert.equal(err.data?.requested, body.params._meta[K.version], `data.requested: ${show(r)}`);
        }
      });
    }

    test('a batch holding a modern request: HTTP 400, -32600', async () => {
      const body = [rpc('tools/list'), rpc('tools/call', { name: 'echo', arguments: { message: 'ladder-batch' } })];
      const r = await post(url, auth, body, { headers: { 'MCP-Protocol-Version': V, 'Mcp-Method': 'tools/list' } });
      assert.equal(r.status, 400, show(r));
      assert.ok(r.json && !Array.isArray(r.json), `one error object: ${show(r)}`);
      assert.equal(r.json.error?.code, -32600, show(r));
      assert.equal(r.json.id ?? null, null, `no single id to echo for a batch: ${show(r)}`);
    });

    test('a modern notification: 202 with no body', async () => {
      const body = { jsonrpc: '2.0', method: 'notifications/roots/list_changed', params: { _meta: envelope() } };
      const r = await post(url, auth, body);
      assert.equal(r.status, 202, show(r));
      assert.equal(r.text, '', `no body: ${show(r)}`);
    });

    test('initialize without a valid modern claim and no modern header is the legacy handshake (§4.2 row 4)', async () => {
      // A claim that is not valid (no clientCapabilities), and a claim naming a 2025 revision:
      // neither makes initialize a modern request; both get today's answer and a session.
      const wrong = [];
      for (const [what, meta] of [['an invalid claim', { [K.version]: V }], ['a 2025-11-25 claim', envelope({ [K.version]: '2025-11-25' })]]) {
        const body = { jsonrpc: '2.0', id: newId('init'), method: 'initialize',
          params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: CLIENT_INFO, _meta: meta } };
        const r = await post(url, auth, body, { headers: { 'MCP-Protocol-Version': undefined, 'Mcp-Method': undefined } });
        const sid = r.headers.get('mcp-session-id');
        if (r.status !== 200 || r.response?.result?.protocolVersion !== '2025-11-25' || !sid ||
            JSON.stringify(r.response?.id) !== JSON.stringify(body.id)) {
          wrong.push(`initialize with ${what} (${JSON.stringify(meta)}): wanted 200, the legacy result and a session; got ${show(r)}`);
        }
        if (sid) {
          await fetch(url, { method: 'DELETE', signal: AbortSignal.timeout(10000),
            headers: { Authorization: auth, 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '2025-11-25' } });
        }
      }
      assert.deepEqual(wrong, []);
    });

    test('without clientInfo the request is served (W-7)', async () => {
      const body = rpc('tools/list', {}, { meta: { [K.info]: undefined } });
      const res = assertComplete(await post(url, auth, body), body.id, 'no clientInfo');
      assert.ok(Array.isArray(res.tools), JSON.stringify(res));
    });

    test('Mcp-Name: surrounding whitespace is stripped, a base64 sentinel decoded (W-22)', async () => {
      // fetch strips OWS from header values itself, so this one goes out with node:http.
      const body = call('echo', { message: 'ows' });
      const h = modernHeaders(auth, body, { 'Mcp-Name': ' \techo \t' });
      const r = await httpSend(url, { method: 'POST', headers: h, body: JSON.stringify(body) });
      const text = (await readBody(r.res)).toString('utf8');
      assert.equal(r.status, 200, `OWS around Mcp-Name: ${r.status} ${text}`);
      const ok = isType(r.headers['content-type'], 'application/json') ? JSON.parse(text)
        : JSON.parse(text.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).pop());
      assert.deepEqual(ok.id, body.id);
      assert.equal(ok.result?.content?.[0]?.text, 'ows', text);

      const b64 = call('echo', { message: 'sentinel' });
      const r2 = await post(url, auth, b64, { headers: { 'Mcp-Name': `=?base64?${Buffer.from('echo').toString('base64')}?=` } });
      assert.equal(assertComplete(r2, b64.id, 'base64 sentinel').content?.[0]?.text, 'sentinel');
    });

    test('an Mcp-Session-Id on a modern request is ignored, and none is handed out', async () => {
      const body = rpc('tools/list');
      const r = await post(url, auth, body, { headers: { 'Mcp-Session-Id': 'no-such-session-0123456789abcdef' } });
      assertComplete(r, body.id, 'modern tools/list with a stray Mcp-Session-Id');
    });

    test('no rung forwarded its tools/call to the process', async () => {
      const reached = (await records()).filter((e) => e.event === 'call' && /^ladder-/.test(e.arguments?.message ?? ''));
      assert.deepEqual(reached, [], 'refused on the ladder means never forwarded');
    });
  });

  // ------------------------------------------------------------ discover, list, call

  test('server/discover: versions, the legacy capabilities, serverInfo in _meta, cache hints, no session', async () => {
    const body = rpc('server/discover');
    const r = await post(url, auth, body);
    const res = assertComplete(r, body.id, 'server/discover', legacyInit.serverInfo);
    assert.ok(res.supportedVersions.includes(V), JSON.stringify(res));
    assert.deepEqual(res.supportedVersions, SUPPORTED);
    assert.deepEqual(res.capabilities, legacyInit.capabilities, 'the capabilities a legacy initialize gets');
    assert.equal(res.instructions, legacyInit.instructions, 'the server\'s instructions');
    assert.equal(res.serverInfo, undefined, 'serverInfo moved into _meta (W-12)');
    assert.equal(res.protocolVersion, undefined, 'no negotiated version: there is no handshake');
    assertHints(res, 'server/discover');
    assert.equal(r.headers.get('mcp-session-id'), null);
    assert.deepEqual(legacyInit.serverInfo, { name: 'modern-fixture', version: '1.2.3' }, 'the fixture as legacy sees it');
  });

  test('tools/list: decorated, and the same tools text a legacy session gets', async () => {
    const body = rpc('tools/list');
    const r = await post(url, auth, body);
    const res = assertComplete(r, body.id, 'tools/list', legacyInit.serverInfo);
    assertHints(res, 'tools/list');
    assert.equal(res.nextCursor, undefined, 'one page');
    const s = new RawSession(url, auth, { version: '2025-11-25' });
    await s.initialize();
    try {
      const legacy = await legacyRaw(s, 'tools/list', {});
      assert.deepEqual(res.tools, legacy.message.result.tools);
      assert.equal(rawMember(r.text, ['result', 'tools']), rawMember(legacy.text, ['result', 'tools']),
        'byte for byte the same tools text');
      const names = res.tools.map((t) => t.name);
      assert.deepEqual(names, [...names].sort(), 'sorted by name (W-14)');
      assert.ok(names.includes('elicit_name') && names.includes('echo'), names.join());
    } finally {
      await s.close();
    }
  });

  test('tools/call: forwarded, resultType added, io.modelcontextprotocol/* stripped before the process', async () => {
    const body = call('echo', { message: 'hi from 2026' });
    const res = assertComplete(await post(url, auth, body), body.id, 'tools/call echo', legacyInit.serverInfo);
    assert.deepEqual(res.content, [{ type: 'text', text: 'hi from 2026' }]);
    const s = new RawSession(url, auth, { version: '2025-11-25' });
    await s.initialize();
    try {
      const legacy = await s.request('tools/call', { name: 'echo', arguments: { message: 'hi from 2026' } });
      assert.deepEqual(res.content, legacy.content, 'the same content as a legacy session\'s call');
    } finally {
      await s.close();
    }
    // What the process saw: no modern keys (a dual-era stdio server would take them for a claim).
    const m = call('echo_meta', {}, { meta: { progressToken: 'meta-tok', [K.level]: 'info' } });
    const seen = assertComplete(await post(url, auth, m), m.id, 'tools/call echo_meta');
    const params = JSON.parse(seen.content[0].text);
    assert.ok(params, `the process saw the call: ${seen.content[0].text}`);
    assert.equal(params.name, 'echo_meta');
    const keys = Object.keys(params._meta ?? {});
    assert.deepEqual(keys.filter((k) => k.startsWith('io.modelcontextprotocol/')), [],
      `stripped before forwarding: ${JSON.stringify(params)}`);
    assert.ok(keys.includes('progressToken'), `the progress token is forwarded (mapped): ${JSON.stringify(params)}`);
    assert.equal(params.inputResponses, undefined);
    assert.equal(params.requestState, undefined);
  });

  // ------------------------------------------------------------ request-scoped notifications

  test('logging: only with _meta logLevel, and only at or above it (W-29)', async () => {
    const levels = (r) => r.messages.filter((m) => m.method === 'notifications/message').map((m) => m.params.level);
    const none = call('log_levels');
    const r0 = await post(url, auth, none);
    assert.equal(assertComplete(r0, none.id, 'no logLevel').content[0].text, 'logged');
    assert.deepEqual(levels(r0), [], `no logLevel, no notifications/message: ${show(r0)}`);

    const warn = call('log_levels', {}, { meta: { [K.level]: 'warning' } });
    const r1 = await post(url, auth, warn);
    assertComplete(r1, warn.id, 'logLevel warning');
    assert.deepEqual(levels(r1), LEVELS.slice(LEVELS.indexOf('warning')), `warning and above: ${show(r1)}`);

    const all = call('log_levels', {}, { meta: { [K.level]: 'debug' } });
    const r2 = await post(url, auth, all);
    assertComplete(r2, all.id, 'logLevel debug');
    assert.deepEqual(levels(r2), LEVELS, `every level: ${show(r2)}`);
    for (const m of r2.messages.filter((x) => x.method)) assert.equal(m.id, undefined, 'no requests on the stream (W-3)');
  });

  test('progress: on the request\'s own SSE stream, before the answer, with no "id:" lines (W-28)', async (t) => {
    const body = call('progress', { count: 3 }, { meta: { progressToken: 'p-tok' } });
    const r = await post(url, auth, body);
    assert.ok(isType(r.contentType, 'text/event-stream'), `progress turns the answer into SSE: ${show(r)}`);
    assertComplete(r, body.id, 'progress');
    const prog = r.messages.filter((m) => m.method === 'notifications/progress');
    assert.deepEqual(prog.map((m) => [m.params.progressToken, m.params.progress]), [['p-tok', 1], ['p-tok', 2], ['p-tok', 3]],
      'the client\'s own token, in order');
    const last = r.messages.findIndex((m) => m.id === body.id);
    assert.equal(last, r.messages.length - 1, 'the answer comes last');
    assert.deepEqual(r.sse.lines.filter((l) => /^id:/.test(l)), [], 'no event ids: nothing to resume');
    assert.deepEqual(r.sse.events.filter((e) => e.id !== undefined), []);
    assert.equal(r.headers.get('x-accel-buffering'), 'no', 'SSE answers say X-Accel-Buffering: no (W-44)');
    assert.equal(r.headers.get('mcp-session-id'), null);
    t.diagnostic(`stream ended by the server after the answer: ${r.ended}`);
    // Numeric tokens come back as numbers.
    const num = call('progress', { count: 1 }, { meta: { progressToken: 4242 } });
    const rn = await post(url, auth, num);
    assertComplete(rn, num.id, 'numeric progress token');
    assert.deepEqual(rn.messages.filter((m) => m.method === 'notifications/progress').map((m) => m.params.progressToken), [4242]);
  });

  test('closing the connection mid-call cancels it at the process (W-4)', async () => {
    const body = call('wait_for_cancel', {}, { meta: { progressToken: 'cancel-tok' } });
    const r = await post(url, auth, body, { stream: true });
    assert.equal(r.status, 200);
    assert.ok(r.sse, `the call's progress makes an SSE answer: ${r.contentType}`);
    const started = await r.sse.next((e) => e.message?.method === 'notifications/progress',
      { timeoutMs: 15000, what: 'the "started" progress of wait_for_cancel' });
    assert.ok(started, `the stream ended before the call started: ${JSON.stringify(r.sse.events)}`);
    assert.equal(started.message.params.progressToken, 'cancel-tok');
    const processId = JSON.parse(started.message.params.message.replace(/^started /, ''));
    r.sse.close(); // the client goes away: on HTTP that is the cancellation
    const seen = await waitFor(async () => {
      const ev = await records();
      const c = ev.find((e) => e.event === 'cancelled' && JSON.stringify(e.params?.requestId) === JSON.stringify(processId));
      return c && ev.some((e) => e.event === 'aborted' && JSON.stringify(e.id) === JSON.stringify(processId)) ? ev : null;
    }, { timeoutMs: 10000, intervalMs: 100,
      what: `notifications/cancelled for process request ${JSON.stringify(processId)}` });
    assert.ok(seen);
    // The server works on.
    const after1 = call('echo', { message: 'after cancel' });
    assert.equal(assertComplete(await post(url, auth, after1), after1.id, 'after cancel').content[0].text, 'after cancel');
  });

  // ------------------------------------------------------------ MRTR (§4.5)

  describe('MRTR: the process\'s elicitation becomes input_required', () => {
    const ELICIT = { elicitation: {} };

    /** Round 1 of an eliciting call: asserts the input_required shape; returns {body, res}. */
    async function round1(name, args = {}, key = 'user_name') {
      const body = call(name, args, { caps: ELICIT });
      const r = await post(url, auth, body);
      const res = assertResult(r, body.id, `${name} round 1`);
      assert.equal(res.resultType, 'input_required', `${name} round 1: ${show(r)}`);
      assert.ok(res.inputRequests && typeof res.inputRequests === 'object', show(r));
      assert.deepEqual(Object.keys(res.inputRequests), [key], `the key is the process's string id: ${show(r)}`);
      assert.equal(res.inputRequests[key].method, 'elicitation/create', show(r));
      assert.equal(res.inputRequests[key].jsonrpc, undefined, 'an input request has no jsonrpc');
      assert.equal(res.inputRequests[key].id, undefined, 'and no id');
      assert.equal(typeof res.requestState, 'string', show(r));
      assert.ok(res.requestState.length > 0);
      assert.equal(res.ttlMs, undefined, 'no cache hints on input_required (W-13)');
      assert.equal(res.cacheScope, undefined);
      return { body, res };
    }

    /** The retry (W-31): the original params, a new id, inputResponses and requestState. */
    function retry(body, inputResponses, requestState, caps = ELICIT) {
      const params = { ...body.params, inputResponses, _meta: envelope({ [K.caps]: caps }) };
      if (requestState !== undefined) params.requestState = requestState;
      return { jsonrpc: '2.0', id: newId('retry'), method: body.method, params };
    }

    const accept = (content) => ({ action: 'accept', content });

    test('an elicitation round trip: input_required, then a retry under a new id gets the answer', async () => {
      const { body, res } = await round1('elicit_name');
      assert.deepEqual(res.inputRequests.user_name.params,
        { message: 'What is your name?', requestedSchema: NAME_SCHEMA }, 'the process\'s params, as it sent them');
      const again = retry(body, { user_name: accept({ name: 'Ada' }) }, res.requestState);
      assert.notDeepEqual(again.id, body.id);
      const r = await post(url, auth, again);
      const done = assertComplete(r, again.id, 'retry', legacyInit.serverInfo);
      assert.deepEqual(done.content, [{ type: 'text', text: 'Hello, Ada!' }]);
      const ans = (await records()).filter((e) => e.event === 'answer' && e.key === 'user_name').pop();
      assert.deepEqual(ans?.result, accept({ name: 'Ada' }), 'the process got the client\'s answer as its result');
    });

    test('a tampered requestState is a JSON-RPC error -32602; the untouched one still works (W-34)', async () => {
      const { body, res } = await round1('elicit_name');
      const bad = retry(body, { user_name: accept({ name: 'Mallory' }) }, `${res.requestState}-TAMPERED`);
      const r = await post(url, auth, bad);
      assertError(r, 200, -32602, bad.id, 'tampered requestState');
      // One character changed for another of its kind (a digit for a digit, a letter for a
      // letter), so the state keeps its shape and only its integrity check can catch it.
      const st = res.requestState;
      const other = (c) => (/[0-8]/.test(c) ? String(Number(c) + 1) : c === '9' ? '0'
        : /[a-y]/.test(c) ? String.fromCharCode(c.charCodeAt(0) + 1) : c === 'z' ? 'a'
          : /[A-Y]/.test(c) ? String.fromCharCode(c.charCodeAt(0) + 1) : c === 'Z' ? 'A' : null);
      const spots = [...new Set([0.25, 0.5, 0.75, 1].map((f) => Math.min(st.length - 1, Math.floor(f * st.length))))];
      for (const i of spots) {
        let j = i;
        while (j > 0 && other(st[j]) === null) j--;
        if (other(st[j]) === null) continue;
        const flipped = st.slice(0, j) + other(st[j]) + st.slice(j + 1);
        const bad2 = retry(body, { user_name: accept({ name: 'Mallory' }) }, flipped);
        assertError(await post(url, auth, bad2), 200, -32602, bad2.id, `requestState with character ${j} changed`);
      }
      const good = retry(body, { user_name: accept({ name: 'Grace' }) }, res.requestState);
      const done = assertComplete(await post(url, auth, good), good.id, 'retry with the real state');
      assert.deepEqual(done.content, [{ type: 'text', text: 'Hello, Grace!' }]);
    });

    test('a requestState is single use: replayed after it was used it is -32602', async () => {
      const { body, res } = await round1('elicit_name');
      const first = retry(body, { user_name: accept({ name: 'Lin' }) }, res.requestState);
      assertComplete(await post(url, auth, first), first.id, 'first use');
      const replay = retry(body, { user_name: accept({ name: 'Eve' }) }, res.requestState);
      assertError(await post(url, auth, replay), 200, -32602, replay.id, 'replayed requestState');
    });

    test('multi-round: a new state each round; the round-1 state replayed in round 2 is -32602 (W-38)', async () => {
      const { body, res } = await round1('two_step', {}, 'step1');
      const r2 = retry(body, { step1: accept({ answer: 'one' }) }, res.requestState);
      const mid = assertResult(await post(url, auth, r2), r2.id, 'two_step round 2');
      assert.equal(mid.resultType, 'input_required', JSON.stringify(mid));
      assert.deepEqual(Object.keys(mid.inputRequests ?? {}), ['step2'], JSON.stringify(mid));
      assert.notEqual(mid.requestState, res.requestState, 'a different requestState for the new round');
      const stale = retry(body, { step1: accept({ answer: 'again' }) }, res.requestState);
      assertError(await post(url, auth, stale), 200, -32602, stale.id, 'round-1 state in round 2');
      const r3 = retry(body, { step2: accept({ answer: 'two' }) }, mid.requestState);
      const done = assertComplete(await post(url, auth, r3), r3.id, 'two_step final');
      assert.deepEqual(done.content, [{ type: 'text', text: 'steps: one, two' }]);
      const replay = retry(body, { step2: accept({ answer: 'three' }) }, mid.requestState);
      assertError(await post(url, auth, replay), 200, -32602, replay.id, 'round-2 state after the end');
    });

    test('a requestState presented for another tool call is -32602', async () => {
      const { body, res } = await round1('elicit_name');
      const other = call('elicit_color', {}, { caps: ELICIT });
      other.params.inputResponses = { user_name: accept({ name: 'Ada' }) };
      other.params.requestState = res.requestState;
      const r = await post(url, auth, other);
      assertError(r, 200, -32602, other.id, 'state of elicit_name on elicit_color');
      // Same tool, other arguments: another request as well (the state binds the digest).
      const otherArgs = retry({ ...body, params: { ...body.params, arguments: { greeting: 'Hi' } } },
        { user_name: accept({ name: 'Ada' }) }, res.requestState);
      assertError(await post(url, auth, otherArgs), 200, -32602, otherArgs.id, 'state of elicit_name {} on {greeting}');
      assert.ok(!(await records()).some((e) => e.event === 'call' && e.name === 'elicit_color'),
        'the misapplied state forwarded nothing');
      // The park is untouched: its own retry completes it (and frees the process for the next test).
      const good = retry(body, { user_name: accept({ name: 'Ada' }) }, res.requestState);
      assert.deepEqual(assertComplete(await post(url, auth, good), good.id, 'own retry').content,
        [{ type: 'text', text: 'Hello, Ada!' }]);
    });

    test('a call that needs elicitation from a client that did not declare it: 400, -32021 (W-9)', async () => {
      const body = call('elicit_name', {}, { caps: {} });
      const r = await post(url, auth, body);
      const err = assertError(r, 400, -32021, body.id, 'undeclared elicitation');
      assert.deepEqual(err.data?.requiredCapabilities, { elicitation: {} }, show(r));
      await waitFor(async () => (await records()).some((e) => e.event === 'answer' && e.key === 'user_name' && e.error),
        { timeoutMs: 10000, intervalMs: 100, what: 'the process to get an error for its elicitation' });
    });

    test('sampling: input_required with the process\'s createMessage, then the model\'s answer; undeclared, -32021', async () => {
      const body = call('sample_capital', {}, { caps: { sampling: {} } });
      const r = await post(url, auth, body);
      const res = assertResult(r, body.id, 'sample_capital round 1');
      assert.equal(res.resultType, 'input_required', show(r));
      assert.deepEqual(res.inputRequests, { capital_question: { method: 'sampling/createMessage', params: {
        messages: [{ role: 'user', content: { type: 'text', text: 'What is the capital of France?' } }], maxTokens: 50 } } },
      show(r));
      const sample = { role: 'assistant', content: { type: 'text', text: 'Paris' }, model: 'test-model', stopReason: 'endTurn' };
      const again = retry(body, { capital_question: sample }, res.requestState, { sampling: {} });
      assert.deepEqual(assertComplete(await post(url, auth, again), again.id, 'sample_capital retry').content,
        [{ type: 'text', text: 'model said: Paris' }]);
      // Declaring elicitation only is not declaring sampling (W-33: this request's capabilities).
      const none = call('sample_capital', {}, { caps: { elicitation: {} } });
      const e = assertError(await post(url, auth, none), 400, -32021, none.id, 'sampling not declared');
      assert.deepEqual(e.data?.requiredCapabilities, { sampling: {} });
      // The process hears of it after the client does: wait, so that the next test's
      // records do not catch this late answer.
      await waitFor(async () => (await records()).some((x) => x.event === 'answer' && x.key === 'capital_question' &&
        x.error), { timeoutMs: 10000, intervalMs: 100, what: 'the process to get an error for its sampling' });
    });

    test('a process request id KEY#TAG gives the key KEY, and the answer goes back under the whole id (068757e)', async () => {
      const mark = (await records()).length;
      const { body, res } = await round1('elicit_tagged');
      const again = retry(body, { user_name: accept({ name: 'Tag' }) }, res.requestState);
      const done = assertComplete(await post(url, auth, again), again.id, 'elicit_tagged retry');
      assert.match(done.content?.[0]?.text ?? '', /^Hello, Tag! \(tag \d+\)$/, JSON.stringify(done));
      const ans = (await records()).slice(mark).filter((e) => e.event === 'answer');
      assert.equal(ans.length, 1, JSON.stringify(ans));
      assert.match(ans[0].key, /^user_name#\d+$/, 'the process got its answer under the id it used');
      assert.deepEqual(ans[0].result, accept({ name: 'Tag' }));
    });

    test('a fresh call that already carries the answer completes in one round; extra keys are ignored (W-36)', async () => {
      const body = call('elicit_name', {}, { caps: ELICIT });
      body.params.inputResponses = { user_name: accept({ name: 'Quick' }), unknown_extra_key: accept({ x: 1 }) };
      const r = await post(url, auth, body);
      const done = assertComplete(r, body.id, 'pre-answered call');
      assert.deepEqual(done.content, [{ type: 'text', text: 'Hello, Quick!' }]);
      const ans = (await records()).filter((e) => e.event === 'answer' && e.key === 'user_name').pop();
      assert.deepEqual(ans?.result, accept({ name: 'Quick' }), 'the pre-answer reached the process');
    });

    test('a fresh call answering the wrong key is asked again, not failed (W-35)', async () => {
      const body = call('elicit_name', {}, { caps: ELICIT });
      body.params.inputResponses = { wrong_key: accept({ name: 'Nope' }) };
      const r = await post(url, auth, body);
      const res = assertResult(r, body.id, 'wrong key');
      assert.equal(res.resultType, 'input_required', show(r));
      assert.deepEqual(Object.keys(res.inputRequests ?? {}), ['user_name'], show(r));
      const again = retry(body, { user_name: accept({ name: 'Right' }) }, res.requestState);
      assert.deepEqual(assertComplete(await post(url, auth, again), again.id, 'retry').content,
        [{ type: 'text', text: 'Hello, Right!' }]);
    });
  });

  // ------------------------------------------------------------ one waiter, both eras (§4.5)

  describe('one process, a legacy session and modern calls: the "one waiter" rule', () => {
    const ELICIT = { elicitation: {} };

    /** Starts a legacy tools/call on session s without waiting for its end: {id, sse}. */
    async function legacyStart(s, name, args, progressToken) {
      const id = s.nextId++;
      const params = { name, arguments: args };
      if (progressToken !== undefined) params._meta = { progressToken };
      const r = await httpSend(url, { method: 'POST', headers: s.headers(),
        body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params }) });
      assert.equal(r.status, 200, `legacy ${name}: HTTP ${r.status}`);
      assert.ok(isType(r.headers['content-type'], 'text/event-stream'),
        `legacy ${name} answers SSE (something comes before the answer): ${r.headers['content-type']}`);
      return { id, sse: new SseReader(r.res) };
    }

    test('alone, a legacy session gets its process\'s elicitation (the control)', async () => {
      const s = new RawSession(url, auth, { version: '2025-11-25' });
      await s.initialize({ capabilities: { elicitation: {} } });
      try {
        const { id, sse } = await legacyStart(s, 'elicit_color', {});
        const ask = await sse.next((e) => e.message?.method === 'elicitation/create',
          { timeoutMs: 10000, what: 'elicitation/create on the legacy stream' });
        assert.ok(ask, `the stream ended first: ${JSON.stringify(sse.events)}`);
        const a = await s.post({ jsonrpc: '2.0', id: ask.message.id, result: { action: 'accept', content: { color: 'teal' } } });
        assert.equal(a.status, 202, a.text);
        const done = await sse.next((e) => e.message?.id === id && !e.message.method, { timeoutMs: 10000, what: 'the answer' });
        assert.equal(done?.message?.result?.content?.[0]?.text, 'Colour: teal', JSON.stringify(sse.events));
        sse.close();
      } finally {
        await s.close();
      }
    });

    test('while a legacy call waits, a modern call\'s elicitation is refused at the process; the legacy client sees no prompt', async () => {
      const s = new RawSession(url, auth, { version: '2025-11-25' });
      await s.initialize({ capabilities: { elicitation: {} } });
      try {
        const { id, sse } = await legacyStart(s, 'wait_for_cancel', {}, 'legacy-wait');
        const started = await sse.next((e) => e.message?.method === 'notifications/progress',
          { timeoutMs: 10000, what: 'the legacy call to start' });
        assert.ok(started, JSON.stringify(sse.events));
        const processId = JSON.parse(started.message.params.message.replace(/^started /, ''));
        const before = (await records()).length;

        const body = call('elicit_name', {}, { caps: ELICIT });
        const r = await post(url, auth, body);
        assert.equal(r.status, 200, show(r));
        assert.deepEqual(r.response?.id, body.id, show(r));
        assert.notEqual(r.response?.result?.resultType, 'input_required', `no input_required while two wait: ${show(r)}`);
        assert.ok(r.response?.error || r.response?.result?.isError, `the call fails: ${show(r)}`);
        const mine = (await records()).slice(before).filter((e) => e.event === 'answer' && e.key === 'user_name');
        assert.equal(mine.length, 1, JSON.stringify(mine));
        assert.ok(mine[0].error, `the process's elicitation got an error: ${JSON.stringify(mine)}`);
        assert.deepEqual(sse.messages().filter((m) => m.method && m.id !== undefined), [],
          'the legacy session got no request of the modern call');

        const c = await s.post({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: 'done' } });
        assert.equal(c.status, 202, c.text);
        await waitFor(async () => (await records()).some((e) => e.event === 'aborted' && JSON.stringify(e.id) === JSON.stringify(processId)),
          { timeoutMs: 10000, intervalMs: 100, what: 'the legacy call to be cancelled at the process' });
        sse.close();
      } finally {
        await s.close();
      }
    });

    test('while a modern call is parked, a legacy call\'s elicitation is refused; the park still completes', async () => {
      const body = call('elicit_name', {}, { caps: ELICIT });
      const r1 = await post(url, auth, body);
      const res = assertResult(r1, body.id, 'round 1');
      assert.equal(res.resultType, 'input_required', show(r1));
      const s = new RawSession(url, auth, { version: '2025-11-25' });
      await s.initialize({ capabilities: { elicitation: {} } });
      let asked = null, answer = null, parkedDone;
      const again = {
        jsonrpc: '2.0', id: newId('retry'), method: 'tools/call',
        params: { ...body.params, _meta: envelope({ [K.caps]: ELICIT }),
          inputResponses: { user_name: { action: 'accept', content: { name: 'Parked' } } }, requestState: res.requestState },
      };
      try {
        // The legacy call; its answer is JSON when nothing comes first, SSE otherwise.
        const id = s.nextId++;
        const h = await httpSend(url, { method: 'POST', headers: s.headers(),
          body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'elicit_color', arguments: {} } }) });
        assert.equal(h.status, 200);
        if (isType(h.headers['content-type'], 'text/event-stream')) {
          const sse = new SseReader(h.res);
          const first = await sse.next((e) => e.message?.method === 'elicitation/create' || (e.message?.id === id && !e.message.method),
            { timeoutMs: 15000, what: 'a request or the answer on the legacy stream' });
          if (first?.message?.method) {
            asked = first.message; // answered, so that nothing is left waiting, then reported below
            await s.post({ jsonrpc: '2.0', id: asked.id, result: { action: 'decline' } });
          }
          answer = (await sse.next((e) => e.message?.id === id && !e.message.method, { timeoutMs: 15000, what: 'the answer' }))?.message;
          sse.close();
        } else {
          answer = JSON.parse((await readBody(h.res)).toString('utf8'));
        }
      } finally {
        await s.close();
        parkedDone = await post(url, auth, again); // completes the park whatever happened above
      }
      assert.equal(asked, null, `a parked modern call counts as waiting (§4.5), so the process's elicitation/create ` +
        `must be refused, not handed to the legacy session: it got ${JSON.stringify(asked)}`);
      assert.ok(answer?.error || answer?.result?.isError, `the legacy call fails: ${JSON.stringify(answer)}`);
      assert.deepEqual(assertComplete(parkedDone, again.id, 'the parked call\'s retry').content,
        [{ type: 'text', text: 'Hello, Parked!' }]);
    });
  });

  describe('a parked call\'s later request and a legacy session', () => {
    const ELICIT = { elicitation: {} };

    test('a parked call asks again (its first ask timed out at the server): not handed to the waiting legacy session', async () => {
      // Order: the modern call parks on "first_try"; then a legacy call starts waiting; then the
      // process, still inside the parked call, asks "second_try" (the fixture's stand-in for an
      // SDK request timeout). Two calls wait on the process, so the rule is to refuse (§4.5:
      // "A parked call counts as waiting"); handing it to the legacy session shows one client
      // another client's prompt.
      const s = new RawSession(url, auth, { version: '2025-11-25' });
      await s.initialize({ capabilities: { elicitation: {} } });
      const body = call('impatient', { afterMs: 2000 }, { caps: ELICIT });
      const before = (await records()).length;
      let legacy = null, leaked = null, res = null, done = null, order = [];
      try {
        const r1 = await post(url, auth, body);
        res = assertResult(r1, body.id, 'impatient, round 1');
        assert.equal(res.resultType, 'input_required', show(r1));
        assert.deepEqual(Object.keys(res.inputRequests ?? {}), ['first_try'], show(r1));

        const id = s.nextId++;
        const h = await httpSend(url, { method: 'POST', headers: s.headers(), body: JSON.stringify({
          jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'wait_for_cancel', arguments: {}, _meta: { progressToken: 'lw' } } }) });
        assert.ok(isType(h.headers['content-type'], 'text/event-stream'), h.headers['content-type']);
        legacy = { id, sse: new SseReader(h.res) };
        assert.ok(await legacy.sse.next((e) => e.message?.method === 'notifications/progress',
          { timeoutMs: 10000, what: 'the legacy call to start' }));

        await waitFor(async () => {
          if (legacy.sse.messages().some((m) => m.method === 'elicitation/create')) return true;
          return (await records()).slice(before).some((e) => e.event === 'answer' && e.key === 'second_try');
        }, { timeoutMs: 15000, intervalMs: 100, what: 'second_try to be routed to a client or refused' });
        leaked = legacy.sse.messages().find((m) => m.method === 'elicitation/create') ?? null;
        order = (await records()).slice(before).filter((e) => e.event === 'started' || e.event === 'ask')
          .map((e) => (e.event === 'ask' ? e.key : 'legacy started'));
        if (leaked) await s.post({ jsonrpc: '2.0', id: leaked.id, result: { action: 'decline' } });
      } finally {
        if (legacy) {
          await s.post({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: legacy.id, reason: 'done' } });
          legacy.sse.close();
        }
        if (res?.requestState) {
          const again = {
            jsonrpc: '2.0', id: newId('retry'), method: 'tools/call',
            params: { ...body.params, _meta: envelope({ [K.caps]: ELICIT }),
              inputResponses: { first_try: { action: 'accept', content: { secret: 's3cret' } } }, requestState: res.requestState },
          };
          done = { r: await post(url, auth, again), id: again.id };
        }
        await s.close();
      }
      assert.deepEqual(order, ['first_try', 'legacy started', 'second_try'], 'the scenario happened in this order');
      assert.equal(leaked, null, 'a request from inside the parked modern call went to the legacy session: ' +
        JSON.stringify(leaked));
      assert.equal(assertComplete(done.r, done.id, 'the parked call\'s retry').content?.[0]?.text, 'secret: s3cret');
    });
  });

  describe('a request held while two wait goes to the one left (docs/gateway.md: up to 3 s)', () => {
    const ELICIT = { elicitation: {} };
    const askedSince = async (mark, key) => (await records()).slice(mark).some((e) => e.event === 'ask' && e.key === key);

    /** A legacy wait_for_file call on s, by fetch (its answer comes at the end): {id, done, abort}. */
    async function legacyWait(s, file) {
      const id = s.nextId++;
      const mark = (await records()).length;
      const controller = new AbortController();
      const done = fetch(url, { method: 'POST', headers: s.headers(), signal: controller.signal,
        body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'wait_for_file', arguments: { path: file } } }) })
        .then(async (r) => ({ status: r.status, contentType: r.headers.get('content-type'), text: await r.text() }),
          (e) => ({ error: e }));
      await waitFor(async () => (await records()).slice(mark).some((e) => e.event === 'call' && e.name === 'wait_for_file'),
        { timeoutMs: 10000, intervalMs: 100, what: 'the legacy wait_for_file call at the process' });
      return { id, done, abort: () => controller.abort() };
    }

    for (const how of ['its call ends', 'its client cancels']) {
      test(`a modern call's elicitation, held while a legacy call waits, is its own once the legacy one goes (${how})`, async () => {
        const s = new RawSession(url, auth, { version: '2025-11-25' });
        await s.initialize({ capabilities: { elicitation: {} } });
        const file = `/workspace/release-${how.includes('cancel') ? 'cancel' : 'end'}`;
        let modern, res;
        try {
          const legacy = await legacyWait(s, file);
          const mark = (await records()).length;
          const body = call('elicit_name', {}, { caps: ELICIT });
          modern = { body, answer: post(url, auth, body) };
          await waitFor(() => askedSince(mark, 'user_name'),
            { timeoutMs: 2500, intervalMs: 50, what: 'the process to ask (the gateway then holds it)' });
          if (how.includes('cancel')) {
            const c = await s.post({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: legacy.id, reason: 'done' } });
            assert.equal(c.status, 202, c.text);
          } else {
            await d.putFile(sb.id, file, 'go');
          }
          const r = await modern.answer;
          res = assertResult(r, body.id, 'the held call');
          assert.equal(res.resultType, 'input_required', `the held request became the modern call's input_required: ${show(r)}`);
          assert.deepEqual(Object.keys(res.inputRequests ?? {}), ['user_name'], show(r));
          if (how.includes('cancel')) {
            legacy.abort();
          } else {
            const l = await legacy.done;
            assert.equal(l.status, 200, JSON.stringify(l));
            assert.match(l.text, /file appeared/, l.text);
            assert.doesNotMatch(l.text, /elicitation\/create/, 'the legacy session saw no prompt');
          }
        } finally {
          await s.close();
        }
        const again = {
          jsonrpc: '2.0', id: newId('retry'), method: 'tools/call',
          params: { ...modern.body.params, _meta: envelope({ [K.caps]: ELICIT }),
            inputResponses: { user_name: { action: 'accept', content: { name: 'Held' } } }, requestState: res.requestState },
        };
        assert.deepEqual(assertComplete(await post(url, auth, again), again.id, 'its retry').content,
          [{ type: 'text', text: 'Hello, Held!' }]);
      });
    }

    test('a parked input the process cancels is asked no more; the call completes with its next input', async () => {
      const body = call('impatient', { afterMs: 300, cancelFirst: true }, { caps: ELICIT });
      const mark = (await records()).length;
      const r1 = await post(url, auth, body);
      const res1 = assertResult(r1, body.id, 'round 1');
      assert.equal(res1.resultType, 'input_required', show(r1));
      assert.deepEqual(Object.keys(res1.inputRequests ?? {}), ['first_try'], show(r1));
      await waitFor(() => askedSince(mark, 'second_try'), { timeoutMs: 10000, intervalMs: 100, what: 'the process to give up and ask again' });
      // The client answers what it was asked; the process has withdrawn it and asked something else.
      let state = res1.requestState, inputs = { first_try: { action: 'accept', content: { secret: 'one' } } }, last;
      for (let round = 0; round < 3; round++) {
        const again = {
          jsonrpc: '2.0', id: newId('retry'), method: 'tools/call',
          params: { ...body.params, _meta: envelope({ [K.caps]: ELICIT }), inputResponses: inputs, requestState: state },
        };
        const r = await post(url, auth, again);
        last = assertResult(r, again.id, `retry ${round + 1}`);
        if (last.resultType !== 'input_required') break;
        assert.ok(!('first_try' in (last.inputRequests ?? {})), `the withdrawn input is not asked again: ${show(r)}`);
        assert.ok('second_try' in (last.inputRequests ?? {}), show(r));
        state = last.requestState;
        inputs = { second_try: { action: 'accept', content: { secret: 'two' } } };
      }
      assert.equal(last.resultType, 'complete', JSON.stringify(last));
      assert.deepEqual(last.content, [{ type: 'text', text: 'secret: two' }]);
      const got = (await records()).slice(mark).filter((e) => e.event === 'answer').map((e) => e.key);
      assert.deepEqual(got, ['second_try'], 'the process got no answer for the request it cancelled');
    });
  });

  // ------------------------------------------------------------ resources and prompts

  test('resources and prompts: decorated, cache hints on the cacheable ones, -32002 becomes -32602 (W-13, W-15)', async () => {
    for (const [method, params, field] of [['resources/list', {}, 'resources'], ['resources/templates/list', {}, 'resourceTemplates'],
      ['prompts/list', {}, 'prompts'], ['resources/read', { uri: 'test://watched' }, 'contents']]) {
      const body = rpc(method, params);
      const res = assertComplete(await post(url, auth, body), body.id, method, legacyInit.serverInfo);
      assertHints(res, method);
      assert.ok(Array.isArray(res[field]) && res[field].length > 0, `${method}: ${JSON.stringify(res)}`);
    }
    const get = rpc('prompts/get', { name: 'greeting_prompt' });
    const p = assertComplete(await post(url, auth, get), get.id, 'prompts/get', legacyInit.serverInfo);
    assert.equal(p.messages?.[0]?.content?.text, 'Say hello.', JSON.stringify(p));

    const missing = rpc('resources/read', { uri: 'test://missing/nothing' });
    const r = await post(url, auth, missing);
    assertError(r, 200, -32602, missing.id, 'resources/read of a missing resource (the process said -32002)');
    // The legacy path is unchanged.
    const s = new RawSession(url, auth, { version: '2025-11-25' });
    await s.initialize();
    try {
      const legacy = await legacyRaw(s, 'resources/read', { uri: 'test://missing/nothing' });
      assert.equal(legacy.message.error?.code, -32002, legacy.text);
    } finally {
      await s.close();
    }
  });

  // ------------------------------------------------------------ listen: resources and prompts

  test('subscriptions/listen: resource subscriptions reach the process, updates only their stream, request-scoped notifications never (W-42, W-43)', async () => {
    const streams = [];
    const s = new RawSession(url, auth, { version: '2025-11-25' });
    try {
      const open = async (id, notifications) => {
        const body = { jsonrpc: '2.0', id, method: 'subscriptions/listen', params: { notifications, _meta: envelope() } };
        const r = await post(url, auth, body, { stream: true });
        assert.equal(r.status, 200, `listen ${id}: ${show(r)}`);
        assert.ok(r.sse, `listen ${id}: ${show(r)}`);
        streams.push(r.sse);
        const first = await r.sse.next((e) => e.message !== undefined, { timeoutMs: 10000, what: `the ack of ${id}` });
        assert.equal(first?.message?.method, 'notifications/subscriptions/acknowledged', JSON.stringify(first));
        return { sse: r.sse, ack: first.message };
      };
      const subs = async (event, uri) => (await records()).filter((e) => e.event === event && e.uri === uri).length;

      const a = await open('listen-watched', { resourceSubscriptions: ['test://watched'] });
      assert.deepEqual(a.ack.params.notifications?.resourceSubscriptions, ['test://watched'], JSON.stringify(a.ack));
      const b = await open('listen-other', { resourceSubscriptions: ['test://other'] });
      const c = await open('listen-prompts', { promptsListChanged: true });
      assert.equal(c.ack.params.notifications?.promptsListChanged, true, JSON.stringify(c.ack));
      await waitFor(async () => (await subs('subscribe', 'test://watched')) >= 1 && (await subs('subscribe', 'test://other')) >= 1,
        { timeoutMs: 10000, intervalMs: 100, what: 'resources/subscribe for both URIs at the process' });

      // An update goes to the stream that named the URI, and no other.
      const t1 = call('touch', { uri: 'test://watched' });
      assertComplete(await post(url, auth, t1), t1.id, 'touch');
      const upd = await a.sse.next((e) => e.message?.method === 'notifications/resources/updated',
        { timeoutMs: 10000, what: 'resources/updated on the watched stream' });
      assert.equal(upd?.message?.params?.uri, 'test://watched', JSON.stringify(upd));
      assert.deepEqual(upd.message.params._meta?.[K.sub], 'listen-watched', JSON.stringify(upd));
      // A prompt list change goes to the stream that asked for it, and no other.
      const t2 = call('add_prompt');
      assertComplete(await post(url, auth, t2), t2.id, 'add_prompt');
      const pc = await c.sse.next((e) => e.message?.method === 'notifications/prompts/list_changed',
        { timeoutMs: 10000, what: 'prompts/list_changed on the prompts stream' });
      assert.deepEqual(pc?.message?.params?._meta?.[K.sub], 'listen-prompts', JSON.stringify(pc));
      // Request-scoped notifications stay on their request's stream (W-43).
      const logs = call('log_levels', {}, { meta: { [K.level]: 'debug' } });
      assertComplete(await post(url, auth, logs), logs.id, 'log_levels');
      const prog = call('progress', { count: 2 }, { meta: { progressToken: 'listen-p' } });
      assertComplete(await post(url, auth, prog), prog.id, 'progress');
      const methods = (x) => x.sse.messages().map((m) => m.method);
      assert.deepEqual(methods(a), ['notifications/subscriptions/acknowledged', 'notifications/resources/updated']);
      assert.deepEqual(methods(b), ['notifications/subscriptions/acknowledged'], 'the other URI\'s stream got nothing');
      assert.deepEqual(methods(c), ['notifications/subscriptions/acknowledged', 'notifications/prompts/list_changed']);

      // A legacy session subscribed to the same URI: the listen stream's close does not unsubscribe it.
      await s.initialize();
      await s.request('resources/subscribe', { uri: 'test://watched' });
      const unsubBefore = await subs('unsubscribe', 'test://watched');
      // Closed one after the other: by the time b's unsubscribe shows, the gateway has seen a go.
      a.sse.close();
      await a.sse.done;
      b.sse.close();
      await waitFor(async () => (await subs('unsubscribe', 'test://other')) >= 1,
        { timeoutMs: 10000, intervalMs: 100, what: 'resources/unsubscribe for test://other once its stream closed' });
      // The watched URI's stream closed at the same moment; a call through the process's stdin after
      // that (FIFO) shows no unsubscribe of it before it.
      const t3 = call('echo', { message: 'after the close' });
      assertComplete(await post(url, auth, t3), t3.id, 'echo');
      assert.equal(await subs('unsubscribe', 'test://watched'), unsubBefore,
        'the legacy session still holds test://watched: no unsubscribe');
      await s.request('resources/unsubscribe', { uri: 'test://watched' });
      await waitFor(async () => (await subs('unsubscribe', 'test://watched')) > unsubBefore,
        { timeoutMs: 10000, intervalMs: 100, what: 'resources/unsubscribe once nobody holds test://watched' });
    } finally {
      for (const x of streams) x.close();
      await s.close().catch(() => {});
    }
  });

  // ------------------------------------------------------------ listen and the gate (rug pull)

  test('subscriptions/listen and the gate across a rug pull: ack, list_changed, the approved list only', async (t) => {
    const s = new RawSession(rugUrl, auth, { version: '2025-11-25' });
    await s.initialize();
    const streams = [];
    try {
      const rugCalls = async () => {
        const r = await d.api('GET', `/v1/sandboxes/${sb.id}/files?path=${encodeURIComponent('/workspace/rug.calls')}`);
        return r.status === 404 ? [] : r.text.split('\n').filter(Boolean).map((l) => JSON.parse(l));
      };
      // Before: the approved list, byte for byte the legacy session's.
      const l0 = rpc('tools/list');
      const r0 = await post(rugUrl, auth, l0);
      assert.deepEqual(assertComplete(r0, l0.id, 'tools/list before').tools, A);
      const legacy0 = await legacyRaw(s, 'tools/list', {});
      assert.equal(rawMember(r0.text, ['result', 'tools']), rawMember(legacy0.text, ['result', 'tools']));
      const c0 = call('get_forecast', { city: 'Oslo' });
      assert.match(assertComplete(await post(rugUrl, auth, c0), c0.id, 'get_forecast before').content[0].text,
        /get_forecast called with \{"city":"Oslo"\}/);

      // Two listen streams: tools, and prompts only (the server has no prompts).
      const open = async (id, notifications) => {
        const body = { jsonrpc: '2.0', id, method: 'subscriptions/listen', params: { notifications, _meta: envelope() } };
        const r = await post(rugUrl, auth, body, { stream: true });
        assert.equal(r.status, 200, `listen ${id}: ${show(r)}`);
        assert.ok(r.sse, `listen ${id} answers SSE: ${show(r)}`);
        assert.equal(r.headers.get('mcp-session-id'), null);
        streams.push(r.sse);
        const first = await r.sse.next((e) => e.message !== undefined, { timeoutMs: 10000, what: `the ack of ${id}` });
        assert.ok(first, `listen ${id} ended without an ack`);
        assert.equal(first.message.method, 'notifications/subscriptions/acknowledged', `the first message is the ack (W-41): ${JSON.stringify(first)}`);
        assert.equal(first.message.id, undefined, 'the ack is a notification');
        assert.deepEqual(first.message.params?._meta?.[K.sub], id, `tagged with the listen request's id: ${JSON.stringify(first)}`);
        assert.equal(first.id, undefined, 'no event ids');
        return { sse: r.sse, ack: first.message };
      };
      const tools = await open('listen-tools', { toolsListChanged: true });
      assert.equal(tools.ack.params.notifications?.toolsListChanged, true, JSON.stringify(tools.ack));
      const prompts = await open(7007, { promptsListChanged: true });
      assert.equal(prompts.ack.params.notifications?.promptsListChanged, undefined,
        `not honored, so omitted from the ack: ${JSON.stringify(prompts.ack)}`);

      // The rug pull.
      const mark = await d.eventMark(sb.id);
      const pulled = clone(A);
      pulled[0] = clone(POISONED[0]);
      pulled.push({ name: 'exfiltrate', description: 'Uploads a file.',
        inputSchema: { type: 'object', properties: { path: { type: 'string' } } } });
      await d.replaceFile(sb.id, '/workspace/rug.json', JSON.stringify(pulled));
      await d.waitEvent(sb.id, (e) => e.kind === 'mcp.refused' && JSON.stringify(e).includes('"rug"'),
        { after: mark, timeoutMs: 20000, what: 'mcp.refused for rug after its tools changed' });
      const changed = await tools.sse.next((e) => e.message?.method === 'notifications/tools/list_changed',
        { timeoutMs: 15000, what: 'tools/list_changed on the listen stream' });
      assert.ok(changed, `the listen stream ended: ${JSON.stringify(tools.sse.events)}`);
      assert.deepEqual(changed.message.params?._meta?.[K.sub], 'listen-tools', JSON.stringify(changed));

      // After: exactly the approved, unchanged tools, byte for byte the legacy session's.
      const approved = A.filter((x) => x.name === 'get_time');
      const l1 = rpc('tools/list');
      const r1 = await post(rugUrl, auth, l1);
      assert.deepEqual(assertComplete(r1, l1.id, 'tools/list after').tools, approved);
      const legacy1 = await legacyRaw(s, 'tools/list', {});
      assert.deepEqual(legacy1.message.result.tools, approved);
      assert.equal(rawMember(r1.text, ['result', 'tools']), rawMember(legacy1.text, ['result', 'tools']),
        'byte for byte the same tools text as the legacy session');
      // The blocked and the new tool are refused, before the process.
      for (const [tool, args] of [['get_forecast', { city: 'Bergen' }], ['exfiltrate', { path: '/workspace/x' }]]) {
        const b = call(tool, args);
        assertError(await post(rugUrl, auth, b), 200, -32602, b.id, `modern tools/call of ${tool} after the rug pull`);
      }
      const ok = call('get_time', { tz: 'UTC' });
      assertComplete(await post(rugUrl, auth, ok), ok.id, 'get_time after');
      assert.deepEqual((await rugCalls()).map((x) => x.name), ['get_forecast', 'get_time'],
        'only the call before the change and the unchanged tool reached the server');

      // Every frame on the tools stream is tagged; the prompts stream got nothing but its ack
      // (checked after two more round trips through the gateway).
      for (const m of tools.sse.messages()) assert.deepEqual(m.params?._meta?.[K.sub], 'listen-tools', JSON.stringify(m));
      for (const m of tools.sse.messages()) assert.equal(m.id, undefined, `no requests or responses on a listen stream: ${JSON.stringify(m)}`);
      assert.deepEqual(prompts.sse.messages().map((m) => m.method), ['notifications/subscriptions/acknowledged'],
        'a stream that asked for prompts only gets no tools/list_changed (W-40)');
      t.diagnostic(`tools stream: ${tools.sse.messages().map((m) => m.method).join(', ')}`);
    } finally {
      for (const x of streams) x.close();
      await s.close().catch(() => {});
    }
  });

  // ------------------------------------------------------------ the rest of the transport

  test('GET and DELETE without Mcp-Session-Id: 405 with Allow (W-27, D-1)', async () => {
    for (const method of ['GET', 'DELETE']) {
      const headers = { Authorization: auth, Accept: method === 'GET' ? 'text/event-stream' : ACCEPT_BOTH,
        'MCP-Protocol-Version': V };
      const r = await fetch(url, { method, headers, signal: AbortSignal.timeout(10000) });
      const text = await r.text();
      assert.equal(r.status, 405, `${method}: ${r.status} ${text}`);
      assert.match(r.headers.get('allow') ?? '', /\bPOST\b/, `${method}: a 405 names what is allowed`);
    }
    const g = await fetch(url, { method: 'GET', signal: AbortSignal.timeout(10000),
      headers: { Authorization: auth, Accept: 'text/event-stream', 'Last-Event-ID': '1-1' } });
    assert.equal(g.status, 405, `GET with Last-Event-ID and no session: ${g.status} ${await g.text()}`);
  });

  test('a legacy initialize on the same URL still gets a session, and it works', async () => {
    const s = new RawSession(url, auth, { version: '2025-06-18' });
    const init = await s.initialize();
    assert.equal(init.protocolVersion, '2025-06-18');
    assert.match(s.sessionId, /^[\x21-\x7e]{16,}$/);
    assert.deepEqual(init.serverInfo, legacyInit.serverInfo);
    assert.equal(init.resultType, undefined, 'a legacy answer is not decorated');
    assert.deepEqual(await s.request('ping', {}), {});
    const res = await s.request('tools/call', { name: 'echo', arguments: { message: 'legacy' } });
    assert.deepEqual(res.content, [{ type: 'text', text: 'legacy' }]);
    assert.equal(res.resultType, undefined, 'a legacy answer is not decorated');
    const g = await s.openGet();
    assert.equal(g.status, 200, 'the legacy GET stream with a session');
    g.sse.close();
    assert.ok([200, 202, 204].includes(await s.close()));
  });

  test('isolation "session": every modern request is 404 -32601 saying to connect in legacy mode', async () => {
    for (const body of [rpc('server/discover'), rpc('tools/list'), call('hello', { name: 'x' })]) {
      const r = await post(soloUrl, auth, body);
      const err = assertError(r, 404, -32601, body.id, `${body.method} to an isolation "session" server`);
      assert.match(err.message, /legacy/i, `the message says to connect in legacy mode: ${err.message}`);
    }
    const s = new RawSession(soloUrl, auth, { version: '2025-11-25' });
    await s.initialize();
    const res = await s.request('tools/call', { name: 'hello', arguments: { name: 'solo' } });
    assert.equal(res.content[0].text, 'hello, solo', 'legacy sessions are served as before');
    await s.close();
  });

  test('a listen stream gets keep-alive comments (W-44)', { timeout: 40000 }, async () => {
    const body = { jsonrpc: '2.0', id: 'listen-quiet', method: 'subscriptions/listen',
      params: { notifications: { toolsListChanged: true }, _meta: envelope() } };
    const r = await post(stopUrl, auth, body, { stream: true });
    assert.ok(r.sse, show(r));
    try {
      // The gateway's keep-alive period is 15 s (docs/gateway.md): wait for one comment, 30 s at most.
      await waitFor(() => r.sse.lines.some((l) => l.startsWith(':')) || r.sse.ended,
        { timeoutMs: 30000, intervalMs: 250, what: 'an SSE comment on a quiet listen stream' });
      assert.ok(!r.sse.ended, `the stream ended: ${JSON.stringify(r.sse.lines)}`);
    } finally {
      r.sse.close();
    }
  });

  // Last: it stops a server.
  test('stopping the server ends a listen stream with the closing response (W-44)', async () => {
    const body = { jsonrpc: '2.0', id: 'listen-to-stop', method: 'subscriptions/listen',
      params: { notifications: { toolsListChanged: true }, _meta: envelope() } };
    const r = await post(stopUrl, auth, body, { stream: true });
    assert.ok(r.sse, show(r));
    try {
      assert.ok(await r.sse.next((e) => e.message?.method === 'notifications/subscriptions/acknowledged',
        { timeoutMs: 10000, what: 'the ack' }));
      await d.mcpStop(sb.id, 'stopme');
      const bye = await r.sse.next((e) => e.message?.id !== undefined && !e.message.method,
        { timeoutMs: 15000, what: 'the response to the listen request' });
      assert.ok(bye, `the stream ended without the closing response: ${JSON.stringify(r.sse.events)}`);
      assert.deepEqual(bye.message, { jsonrpc: '2.0', id: 'listen-to-stop',
        result: { resultType: 'complete', _meta: { [K.sub]: 'listen-to-stop' } } });
      assert.ok(await r.sse.end(10000), 'and then the stream ends');
    } finally {
      r.sse.close();
    }
  });
});

describe('2026-07-28: a parked call nobody retries (runtimed --mcp-input-wait 1)', { skip: skipReason() }, () => {
  let d, sb, tmp, url, auth;

  before(async () => {
    d = await startDaemon({ prefix: 'runtime-mcp-modern-wait-', make: (dir) => {
      const x = new McpDaemon(dir);
      x.extraArgs.push('--mcp-input-wait', '1');
      return x;
    } });
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'runtime-modern-wait-'));
    sb = await sandboxWithFixtures(d, tmp);
    const got = await d.mcpReady(sb.id, [
      { name: 'modern', command: ['node', '/workspace/modern/modern-server.mjs', '--record', RECORD] },
    ], { timeoutMs: 90000 });
    url = got.servers.modern.url;
    auth = got.status.headers.Authorization;
  });
  after(async () => {
    if (d) await stopDaemon(d);
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  test('expiry: the process gets {"action":"cancel"} and notifications/cancelled; the late retry is -32602', async () => {
    const body = call('elicit_name', {}, { caps: { elicitation: {} } });
    const r = await post(url, auth, body);
    const res = assertResult(r, body.id, 'round 1');
    assert.equal(res.resultType, 'input_required', show(r));
    const processId = (await recordsOf(d, sb)).filter((e) => e.event === 'call' && e.name === 'elicit_name').pop()?.id;
    assert.ok(processId !== undefined, 'the call reached the process');
    const seen = await waitFor(async () => {
      const ev = await recordsOf(d, sb);
      const answer = ev.find((e) => e.event === 'answer' && e.key === 'user_name');
      const cancelled = ev.find((e) => e.event === 'cancelled' && JSON.stringify(e.params?.requestId) === JSON.stringify(processId));
      return answer && cancelled ? { answer, cancelled } : null;
    }, { timeoutMs: 15000, intervalMs: 200, what: 'the park to expire at the process (cancel answer, notifications/cancelled)' });
    assert.deepEqual(seen.answer.result, { action: 'cancel' }, `an expired elicitation is answered cancel: ${JSON.stringify(seen.answer)}`);
    const late = {
      jsonrpc: '2.0', id: newId('late'), method: 'tools/call',
      params: { ...body.params, _meta: envelope({ [K.caps]: { elicitation: {} } }),
        inputResponses: { user_name: { action: 'accept', content: { name: 'Late' } } }, requestState: res.requestState },
    };
    assertError(await post(url, auth, late), 200, -32602, late.id, 'a retry after the park expired');
    // The process is free again: a new call parks and completes.
    const again = call('elicit_name', {}, { caps: { elicitation: {} } });
    const r2 = await post(url, auth, again);
    const res2 = assertResult(r2, again.id, 'a new round 1');
    assert.equal(res2.resultType, 'input_required', show(r2));
    const retry2 = {
      jsonrpc: '2.0', id: newId('retry'), method: 'tools/call',
      params: { ...again.params, _meta: envelope({ [K.caps]: { elicitation: {} } }),
        inputResponses: { user_name: { action: 'accept', content: { name: 'Prompt' } } }, requestState: res2.requestState },
    };
    assert.deepEqual(assertComplete(await post(url, auth, retry2), retry2.id, 'its retry, in time').content,
      [{ type: 'text', text: 'Hello, Prompt!' }]);
  });
});
