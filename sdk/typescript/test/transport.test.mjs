// Retries, time-outs and aborts, with an injected fetch that plays the daemon:
// what is retried (and how often) must be exact, which a real daemon cannot
// be made to show on demand. No daemon needed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sdk } from './helpers.mjs';

const { Runtime, UnavailableError, LimitError, ConnectionError, TimeoutError, RuntimeError } = sdk;

/** A fetch that answers from `script(n)` for the n-th call and records each call. */
function fake(script) {
  const calls = [];
  const f = async (url, init) => {
    calls.push(`${init.method} ${new URL(url).pathname}`);
    return script(calls.length, init);
  };
  f.calls = calls;
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
  const e = await rt(f).sandboxes.list().catch((x) => x);
  assert.ok(e instanceof UnavailableError && e instanceof RuntimeError);
  assert.equal(e.status, 503);
  assert.equal(e.code, 'busy');
  assert.equal(f.calls.length, 3, 'one call and two retries');
});

test('429 then success on PUT and DELETE', async () => {
  const f = fake((n) => (n === 1 ? busy(429, { 'Retry-After': '0' }) : answer(200, { name: 'S', hosts: ['h'] })));
  assert.equal((await rt(f).secrets.set('S', { value: 'v', hosts: ['h'] })).name, 'S');
  assert.deepEqual(f.calls, ['PUT /v1/egress-secrets/S', 'PUT /v1/egress-secrets/S']);
  const g = fake((n) => (n === 1 ? busy(429, { 'Retry-After': '0' }) : new Response(null, { status: 204 })));
  await rt(g).secrets.delete('S');
  assert.equal(g.calls.length, 2);
});

test('429/503 on a POST is never retried: exec, create, mcp start, pause', async () => {
  for (const status of [429, 503]) {
    const f = fake(() => busy(status, { 'Retry-After': '0' }));
    const r = rt(f);
    await assert.rejects(r.sandboxes.create(), status === 429 ? LimitError : UnavailableError);
    const sbx = new sdk.Sandbox(r, { id: 'sbx-1' });
    await assert.rejects(sbx.exec(['true']));
    await assert.rejects(sbx.mcp.start({ id: 'fetch' }));
    await assert.rejects(sbx.pause());
    assert.deepEqual(f.calls, ['POST /v1/sandboxes', 'POST /v1/sandboxes/sbx-1/exec',
      'POST /v1/sandboxes/sbx-1/mcp', 'POST /v1/sandboxes/sbx-1/pause']);
  }
});

test('a long Retry-After is not waited for', async () => {
  const f = fake(() => busy(503, { 'Retry-After': '3600' }));
  await assert.rejects(rt(f).sandboxes.list(), UnavailableError);
  assert.equal(f.calls.length, 1);
});

test('a refused connection is retried even for POST (nothing was sent); a reset one is not', async () => {
  const f = fake(() => { throw refused(); });
  const e = await rt(f).sandboxes.create().catch((x) => x);
  assert.ok(e instanceof ConnectionError);
  assert.match(e.message, /connection refused/);
  assert.equal(f.calls.length, 3);

  const g = fake(() => { throw reset(); });
  const e2 = await rt(g).sandboxes.create().catch((x) => x);
  assert.ok(e2 instanceof ConnectionError);
  assert.match(e2.message, /other side closed/);
  assert.equal(g.calls.length, 1, 'the request may have reached the daemon: not sent again');

  const h = fake(() => { throw reset(); });
  await assert.rejects(rt(h).sandboxes.list(), ConnectionError);
  assert.equal(h.calls.length, 1, 'only refused connections are retried');
});

test('a call that never answers ends with TimeoutError at its timeoutMs', async () => {
  const hang = (url, init) => new Promise((_, reject) => init.signal.addEventListener('abort', () => reject(init.signal.reason)));
  const t0 = Date.now();
  const e = await rt(hang, { timeoutMs: 150 }).sandboxes.list().catch((x) => x);
  assert.ok(e instanceof TimeoutError, `got ${e}`);
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

test('requests carry the key and JSON; error answers that are not JSON still get a message', async () => {
  let seen;
  const f = async (url, init) => {
    seen = init;
    return new Response('<html>bad gateway</html>', { status: 502 });
  };
  const e = await rt(f).sandboxes.create({ name: 'x' }).catch((x) => x);
  assert.equal(seen.headers.Authorization, 'Bearer k');
  assert.equal(seen.headers['Content-Type'], 'application/json');
  assert.deepEqual(JSON.parse(seen.body), { name: 'x' });
  assert.ok(e instanceof RuntimeError);
  assert.equal(e.status, 502);
  assert.match(e.message, /bad gateway/);
});

test('mcp.ready() long-polls with wait= until no server is installing, then returns', async () => {
  const waits = [];
  const f = fake((n, init) => answer(200, {
    servers: [{ name: 'a', status: n < 3 ? 'installing' : 'ready', phase: n < 3 ? 'starting' : 'ready', url: 'u', tools: [], warnings: [] }],
    headers: { Authorization: 'Bearer t' },
  }));
  const spy = (url, init) => (waits.push(new URL(url).searchParams.get('wait')), f(url, init));
  const g = await new sdk.Sandbox(rt(spy), { id: 's' }).mcp.ready({ timeoutMs: 120_000 });
  assert.equal(g.servers[0].status, 'ready');
  assert.deepEqual(f.calls, Array(3).fill('GET /v1/sandboxes/s/mcp'));
  assert.ok(waits.every((w) => Number(w) > 0 && Number(w) <= 60), `long polls of at most 60 s: ${waits}`);
});

test('mcp.ready() gives up at its own deadline with TimeoutError naming the servers', async () => {
  const f = fake(() => answer(200, { servers: [{ name: 'slow', status: 'installing', phase: 'starting', url: 'u' }], headers: {} }));
  const sbx = new sdk.Sandbox(rt(f), { id: 's' });
  const e = await sbx.mcp.ready({ timeoutMs: 500 }).catch((x) => x);
  assert.ok(e instanceof TimeoutError);
  assert.match(e.message, /slow is starting/);
});
