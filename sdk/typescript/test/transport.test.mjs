// Retries, time-outs and aborts, with an injected fetch that plays the daemon:
// what is retried (and how often) must be exact, which a real daemon cannot
// be made to show on demand. No daemon needed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { sdk } from './helpers.mjs';

const {
  Runtime, UnavailableError, ServiceUnavailableError, RateLimitError, ConnectionError, TimeoutError, RuntimeError,
  ConflictError, InvalidRequestError, CommandError,
} = sdk;

/** A fetch that answers from `script(n)` for the n-th call and records each call. */
function fake(script) {
  const calls = [], inits = [], urls = [];
  const f = async (url, init) => {
    calls.push(`${init.method} ${new URL(url).pathname}`);
    inits.push(init);
    urls.push(url);
    return script(calls.length, init, url);
  };
  Object.assign(f, { calls, inits, urls });
  return f;
}

const answer = (status, body = {}, headers = {}) =>
  new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json', ...headers } });
const busy = (status, extra) => answer(status, { error: { code: 'busy', message: 'try later' } }, extra);
const refused = () => Object.assign(new TypeError('fetch failed'), { cause: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }) });
const reset = () => Object.assign(new TypeError('fetch failed'), { cause: Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' }) });
const rt = (f, o = {}) => new Runtime({ apiUrl: 'http://daemon.test', apiKey: 'k', fetch: f, ...o });

test('503 on a GET is retried (Retry-After honoured), bounded by maxRetries', async () => {
  const f = fake(() => busy(503, { 'Retry-After': '0' }));
  const e = await rt(f, { maxRetries: 2 }).sandboxes.list().catch((x) => x);
  assert.ok(e instanceof ServiceUnavailableError && e instanceof RuntimeError);
  assert.ok(e instanceof UnavailableError, 'the old name is the same class');
  assert.equal(e.status, 503);
  assert.equal(e.code, 'busy');
  assert.equal(f.calls.length, 3, 'one call and two retries');
});

test('429 then success on PUT and DELETE', async () => {
  const f = fake((n) => (n === 1 ? busy(429, { 'Retry-After': '0' }) : answer(200, { name: 'S', hosts: ['h'] })));
  assert.equal((await rt(f).secrets.set('S', { value: 'v', hosts: ['h'] })).name, 'S');
  assert.deepEqual(f.calls, ['PUT /v1/egress-secrets/S', 'PUT /v1/egress-secrets/S']);
  const g = fake((n) => (n === 1 ? busy(429, { 'Retry-After': '0' }) : answer(200, { name: 'S', deleted: true })));
  assert.deepEqual(await rt(g).secrets.delete('S'), { name: 'S', deleted: true, enforced: true, from: ['sandboxes'] });
  assert.equal(g.calls.length, 2);
});

test('every change carries an Idempotency-Key, the same one on each retry; a GET none', async () => {
  for (const status of [429, 503]) {
    const f = fake(() => busy(status, { 'Retry-After': '0' }));
    const r = rt(f, { maxRetries: 2 });
    await assert.rejects(r.sandboxes.create(), status === 429 ? RateLimitError : ServiceUnavailableError);
    const sbx = new sdk.Sandbox(r, { id: 'sbx-1' });
    await assert.rejects(sbx.exec(['true']));
    await assert.rejects(sbx.mcp.start([{ id: 'fetch' }]));
    await assert.rejects(sbx.pause());
    await assert.rejects(r.sandboxes.get('sbx-1'));
    const paths = ['POST /v1/sandboxes', 'POST /v1/sandboxes/sbx-1:exec', 'POST /v1/sandboxes/sbx-1/mcp',
      'POST /v1/sandboxes/sbx-1:pause', 'GET /v1/sandboxes/sbx-1'];
    assert.deepEqual(f.calls, paths.flatMap((p) => [p, p, p]));
    const keys = f.inits.map((i) => i.headers['Idempotency-Key']);
    for (let c = 0; c < 4; c++) {
      const mine = keys.slice(3 * c, 3 * c + 3);
      assert.match(mine[0], /^[0-9a-f-]{36}$/);
      assert.deepEqual(mine, [mine[0], mine[0], mine[0]], 'the same key on every attempt of a call');
    }
    assert.equal(new Set(keys.slice(0, 12)).size, 4, 'a key per call');
    assert.deepEqual(keys.slice(12), [undefined, undefined, undefined]);
  }
  const mine = fake(() => answer(200, { id: 'sbx-1', state: 'running' }));
  await rt(mine).sandboxes.create({}, { idempotencyKey: 'my-key-1' });
  assert.equal(mine.inits[0].headers['Idempotency-Key'], 'my-key-1');
  assert.equal(mine.inits[0].headers.Prefer, 'wait=60');
});

test('a Retry-After past the call\'s deadline is not waited for', async () => {
  const f = fake(() => busy(503, { 'Retry-After': '3600' }));
  await assert.rejects(rt(f, { timeoutMs: 2000 }).sandboxes.list(), ServiceUnavailableError);
  assert.equal(f.calls.length, 1);
});

test('a broken connection is retried with the same key; a refused one too', async () => {
  const f = fake(() => { throw refused(); });
  const e = await rt(f, { maxRetries: 2 }).sandboxes.create().catch((x) => x);
  assert.ok(e instanceof ConnectionError);
  assert.match(e.message, /connection refused/);
  assert.equal(f.calls.length, 3);

  const g = fake((n) => { if (n < 3) throw reset(); return answer(201, { id: 'a', state: 'running' }); });
  const made = await rt(g, { maxRetries: 2 }).sandboxes.create({ name: 'a' });
  assert.equal(made.id, 'a');
  assert.equal(g.calls.length, 3);
  const keys = g.inits.map((i) => i.headers['Idempotency-Key']);
  assert.deepEqual(keys, [keys[0], keys[0], keys[0]], 'the daemon answers a repeat once');

  const h = fake(() => { throw reset(); });
  const e2 = await rt(h, { maxRetries: 1 }).sandboxes.list().catch((x) => x);
  assert.ok(e2 instanceof ConnectionError);
  assert.match(e2.message, /other side closed/);
  assert.equal(e2.code, 'connection_error');
  assert.equal(h.calls.length, 2);
});

test('a call that never answers ends with TimeoutError (a ConnectionError, code timeout) at its timeoutMs', async () => {
  const hang = (url, init) => new Promise((_, reject) => init.signal.addEventListener('abort', () => reject(init.signal.reason)));
  const t0 = Date.now();
  const e = await rt(hang, { timeoutMs: 150 }).sandboxes.list().catch((x) => x);
  assert.ok(e instanceof TimeoutError && e instanceof ConnectionError, `got ${e}`);
  assert.equal(e.code, 'timeout');
  assert.ok(Date.now() - t0 < 5000);
  const e2 = await rt(hang).sandboxes.list({}, { timeoutMs: 100 }).catch((x) => x);
  assert.ok(e2 instanceof TimeoutError, 'per-call timeoutMs');
});

test('an AbortSignal cancels the call with its own reason', async () => {
  const hang = (url, init) => new Promise((_, reject) => init.signal.addEventListener('abort', () => reject(init.signal.reason)));
  const ctl = new AbortController();
  const p = rt(hang).sandboxes.list({}, { signal: ctl.signal });
  ctl.abort(new Error('user gave up'));
  await assert.rejects(p, /user gave up/);
});

test('requests carry the key and JSON; errors carry code, status, requestId, details; text answers still get a message', async () => {
  let seen;
  const f = async (url, init) => {
    seen = init;
    return new Response('<html>bad gateway</html>', { status: 502 });
  };
  const e = await rt(f, { maxRetries: 0 }).sandboxes.create({ name: 'x' }).catch((x) => x);
  assert.equal(seen.headers.Authorization, 'Bearer k');
  assert.equal(seen.headers['Content-Type'], 'application/json');
  assert.match(seen.headers['X-Runtime-Client'], /^sdk-js\//);
  assert.deepEqual(JSON.parse(seen.body), { name: 'x' });
  assert.ok(e instanceof ServiceUnavailableError);
  assert.equal(e.status, 502);
  assert.equal(e.code, 'request_failed');
  assert.match(e.message, /bad gateway/);

  const g = fake(() => answer(409, { error: { code: 'name_taken', status: 409, message: 'taken', requestId: 'req_1',
    details: { sandboxId: 's' } } }));
  const c = await rt(g).sandboxes.create({ name: 'x' }).catch((x) => x);
  assert.ok(c instanceof ConflictError);
  assert.deepEqual([c.code, c.status, c.requestId, c.details, c.retryable], ['name_taken', 409, 'req_1', { sandboxId: 's' }, false]);
  assert.match(c.idempotencyKey, /^[0-9a-f-]{36}$/);
  assert.equal(String(c), 'ConflictError [name_taken 409]: taken\nRequest: req_1');
});

test('mcp.ready() asks until no server is installing, then returns the gateway', async () => {
  const waits = [];
  const f = fake((n) => answer(200, {
    running: true, port: null,
    servers: [{ name: 'a', status: n < 3 ? 'installing' : 'ready', phase: n < 3 ? 'starting' : 'ready', url: 'u', tools: [], warnings: [] }],
    headers: { Authorization: 'Bearer t' }, warnings: [],
  }));
  const spy = (url, init) => (waits.push(new URL(url).searchParams.get('wait')), f(url, init));
  const g = await new sdk.Sandbox(rt(spy), { id: 's' }).mcp.ready({ timeoutMs: 120_000 });
  assert.equal(g.servers[0].status, 'ready');
  assert.deepEqual(f.calls, Array(3).fill('GET /v1/sandboxes/s/mcp'));
  assert.ok(waits.every((w) => Number(w) > 0 && Number(w) <= 60), `long polls of at most 60 s: ${waits}`);
});

test('mcp.ready() returns the gateway as it is at its deadline; throwOnFailure makes that a TimeoutError', async () => {
  const f = fake(() => answer(200, { running: true, servers: [{ name: 'slow', status: 'installing', phase: 'starting', url: 'u' }], headers: {} }));
  const sbx = new sdk.Sandbox(rt(f), { id: 's' });
  const g = await sbx.mcp.ready({ timeoutMs: 300, intervalMs: 50 });
  assert.equal(g.servers[0].status, 'installing');
  const e = await sbx.mcp.ready({ timeoutMs: 300, intervalMs: 50, throwOnFailure: true }).catch((x) => x);
  assert.ok(e instanceof TimeoutError);
  assert.match(e.message, /slow is starting/);
  const none = fake(() => answer(200, { running: false, port: null, servers: [], headers: {}, warnings: [] }));
  assert.equal((await new sdk.Sandbox(rt(none), { id: 's' }).mcp.ready()).running, false, 'nothing runs: at once');
  assert.equal(none.calls.length, 1);
});

test('exec streams NDJSON when timeoutMs is over 60 s or onStdout is given; offsets past the cursor are truncation', async () => {
  const lines = [
    { type: 'start', processId: 'p1' },
    { type: 'stdout', offset: 0, data: 'hé\n' },
    { type: 'stderr', offset: 4, data: 'err\n' },
    { type: 'stdout', offset: 12, data: 'late\n' },
    { type: 'exit', exitCode: 3, state: 'exited', timedOut: false, durationMs: 5 },
  ];
  const f = fake(() => new Response(lines.map((l) => JSON.stringify(l)).join('\n') + '\n',
    { status: 200, headers: { 'Content-Type': 'application/x-ndjson' } }));
  const sbx = new sdk.Sandbox(rt(f), { id: 's' });
  const seen = [];
  const r = await sbx.exec('echo hi', { timeoutMs: 120_000, onStdout: (t) => seen.push(t) });
  assert.deepEqual(JSON.parse(f.inits[0].body), { command: 'echo hi', timeoutMs: 120_000, stream: true });
  assert.equal(f.inits[0].headers.Accept, 'application/x-ndjson');
  assert.deepEqual(seen, ['hé\n', 'late\n']);
  assert.deepEqual({ ...r }, { exitCode: 3, state: 'exited', stdout: 'hé\nlate\n', stderr: 'err\n', timedOut: false, durationMs: 5,
    stdoutTruncated: true, stderrTruncated: true, processId: 'p1' });
  const e = await sbx.exec(['false'], { onStdout: () => {}, check: true }).catch((x) => x);
  assert.ok(e instanceof CommandError);
  assert.equal(e.exitCode, 3);
  assert.match(e.message, /^Command exited with 3\. err$/);
  const types = [];
  for await (const ev of sbx.execStream(['x'])) types.push(ev.type);
  assert.deepEqual(types, ['start', 'stdout', 'stderr', 'truncated', 'stdout', 'exit']);
});

test('files.write over 1 MiB: begin, chunks in parallel with their own keys, commit; a mode not echoed is a chmod', async () => {
  const bodies = [];
  const f = fake((n, init, url) => {
    const u = new URL(url);
    if (u.pathname.endsWith('/uploads')) return answer(201, { uploadId: 'u1', chunkBytes: 1_048_576, path: '/workspace/big', size: 0 });
    if (u.pathname.endsWith('/u1')) { bodies.push([Number(u.searchParams.get('offset')), init.body.length]); return answer(200, {}); }
    return answer(200, {});
  });
  const sbx = new sdk.Sandbox(rt(f), { id: 's' });
  const data = new Uint8Array(2 * 1_048_576 + 10).fill(7);
  assert.deepEqual(await sbx.files.write('/workspace/big', data, { mode: 0o755 }), { path: '/workspace/big', size: data.length });
  const begin = JSON.parse(f.inits[0].body);
  assert.equal(begin.size, data.length);
  assert.equal(begin.mode, '755');
  assert.equal(begin.sha256, crypto.createHash('sha256').update(data).digest('hex'));
  assert.deepEqual(bodies.sort((a, b) => a[0] - b[0]), [[0, 1_048_576], [1_048_576, 1_048_576], [2_097_152, 10]]);
  assert.deepEqual(f.calls.slice(-2), ['POST /v1/sandboxes/s/uploads/u1:commit', 'POST /v1/sandboxes/s/files:chmod']);
  const keys = f.inits.map((i) => i.headers['Idempotency-Key']);
  assert.equal(new Set(keys).size, keys.length, 'every chunk its own key');

  const small = fake(() => answer(200, { path: '/workspace/a', size: 2 }));
  await new sdk.Sandbox(rt(small), { id: 's' }).files.write('/workspace/a', 'hi', { mode: 0o644 });
  assert.deepEqual(small.calls, ['PUT /v1/sandboxes/s/files/content']);
  assert.equal(new URL(small.urls[0]).search, '?path=%2Fworkspace%2Fa&mode=644');
});

test('sandboxes.list() is a Page: data, nextCursor, for await over every page, toArray', async () => {
  const f = fake((n, init, url) => {
    const cursor = new URL(url).searchParams.get('cursor');
    return answer(200, cursor ? { data: [{ id: 'c' }], nextCursor: null } : { data: [{ id: 'a' }, { id: 'b' }], nextCursor: 'n1' });
  });
  const page = await rt(f).sandboxes.list({ labels: { team: 'x' }, state: ['running', 'paused'] });
  assert.deepEqual(page.data.map((s) => s.id), ['a', 'b']);
  assert.equal(page.hasMore, true);
  assert.equal(new URL(f.urls[0]).search, '?state=running&state=paused&label=team%3Ax');
  const ids = [];
  for await (const s of page) ids.push(s.id);
  assert.deepEqual(ids, ['a', 'b', 'c']);
  assert.deepEqual((await page.toArray()).map((s) => s.id), ['a', 'b', 'c']);
});

test('await using: a sandbox this client created is deleted; one it found is stopped', async () => {
  const f = fake((n, init, url) => (init.method === 'POST' && new URL(url).pathname === '/v1/sandboxes'
    ? answer(201, { id: 'made', state: 'running', reused: JSON.parse(init.body).getOrCreate === true })
    : answer(200, { id: 'x', state: 'stopped' })));
  const r = rt(f);
  await (await r.sandboxes.create())[Symbol.asyncDispose]();
  await (await r.sandboxes.getOrCreate('n'))[Symbol.asyncDispose]();
  await (await r.sandboxes.get('got'))[Symbol.asyncDispose]();
  assert.deepEqual(f.calls, ['POST /v1/sandboxes', 'DELETE /v1/sandboxes/made', 'POST /v1/sandboxes', 'POST /v1/sandboxes/made:stop',
    'GET /v1/sandboxes/got']);
  assert.equal(f.inits[3].headers.Prefer, undefined, 'the stop at the end of a scope does not wait');
});

test('secrets.set needs hosts (checked before any call), as Runtime Cloud\'s does', async () => {
  const f = fake(() => answer(200, {}));
  const e = await rt(f).secrets.set('X', { value: 'v', hosts: [] }).catch((x) => x);
  assert.ok(e instanceof InvalidRequestError);
  assert.deepEqual([e.status, e.details], [0, { field: 'hosts' }]);
  assert.equal(f.calls.length, 0);
});
