// GET /v1/events/stream: what the dashboard shows live. A sandbox made through the API
// appears on the stream with no poll, its events follow, its removal is told; an
// account's stream carries nothing of another account's; the admin's carries all.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { startDaemon, stopDaemon, isRoot, waitFor } from '../e2e/lib.mjs';

const skip = !isRoot() && 'needs root';
let d;
const open = [];

before(async () => {
  if (!skip) d = await startDaemon({ prefix: 'runtime-dash-stream-' });
});
after(async () => {
  for (const s of open) s.close();
  await stopDaemon(d);
});

/** Opens the stream with these headers: {messages: [{event, data}], status, close()}. */
async function listen(headers) {
  const ctl = new AbortController();
  const res = await fetch(`${d.url}/v1/events/stream`, { headers, signal: ctl.signal });
  const s = { status: res.status, messages: [], close: () => ctl.abort(), type: res.headers.get('content-type') };
  open.push(s);
  if (res.status !== 200) return s;
  (async () => {
    let buf = '';
    const dec = new TextDecoder();
    try {
      for await (const chunk of res.body) {
        buf += dec.decode(chunk, { stream: true });
        let at;
        while ((at = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, at);
          buf = buf.slice(at + 2);
          const event = /^event: (.*)$/m.exec(block)?.[1];
          const data = /^data: (.*)$/m.exec(block)?.[1];
          if (event) s.messages.push({ event, data: JSON.parse(data) });
        }
      }
    } catch {}
  })();
  return s;
}

const bearer = (key) => ({ Authorization: `Bearer ${key}` });
const seen = (s, fn) => s.messages.some(fn);

test('a sandbox made through the API appears on the stream, its stop and removal follow', { skip }, async () => {
  const s = await listen(bearer(d.key));
  assert.equal(s.status, 200);
  assert.equal(s.type, 'text/event-stream');
  const box = await d.create({ name: 'streamed', labels: { team: 'blue' } });
  await waitFor(() => seen(s, (m) => m.event === 'sandbox' && m.data.id === box.id && m.data.state === 'running'),
    { what: 'the sandbox running on the stream' });
  const first = s.messages.find((m) => m.event === 'sandbox' && m.data.id === box.id);
  assert.deepEqual(first.data.labels, { team: 'blue' });
  assert.equal((await d.api('POST', `/v1/sandboxes/${box.id}:stop`)).status, 200);
  await waitFor(() => seen(s, (m) => m.event === 'event' && m.data.sandboxId === box.id && m.data.kind === 'sandbox.stopped'),
    { what: 'sandbox.stopped on the stream' });
  assert.equal((await d.api('DELETE', `/v1/sandboxes/${box.id}`)).status, 200);
  d.sandboxes.delete(box.id);
  await waitFor(() => seen(s, (m) => m.event === 'sandbox.deleted' && m.data.id === box.id),
    { what: 'sandbox.deleted on the stream' });
});

test('an account\'s stream carries only its own sandboxes; the admin\'s carries every account\'s', { skip }, async () => {
  const made = await d.api('POST', '/v1/accounts', { name: 'stream-acme' });
  assert.equal(made.status, 201, made.text);
  const acme = await listen(bearer(made.body.apiKey));
  const admin = await listen(bearer(d.key));
  const adminsBox = await d.create({ name: 'admins' });
  const r = await d.api('POST', '/v1/sandboxes', { name: 'acmes' }, { key: made.body.apiKey });
  assert.equal(r.status, 201, r.text);
  const acmesBox = r.body;
  await waitFor(() => seen(acme, (m) => m.data.id === acmesBox.id) && seen(admin, (m) => m.data.id === acmesBox.id),
    { what: 'acme\'s sandbox on both streams' });
  await waitFor(() => seen(admin, (m) => m.data.id === adminsBox.id && m.data.state === 'running'));
  assert.ok(!seen(acme, (m) => m.data.id === adminsBox.id || m.data.sandboxId === adminsBox.id),
    'acme saw nothing of the admin\'s sandbox');
  assert.equal(s(admin, acmesBox.id).account, 'stream-acme');
  await d.api('DELETE', `/v1/sandboxes/${acmesBox.id}`, undefined, { key: made.body.apiKey });
});

const s = (stream, id) => stream.messages.find((m) => m.event === 'sandbox' && m.data.id === id).data;

test('a dashboard session opens the stream with its cookie alone, from its own pages only', { skip }, async () => {
  const r = await d.api('POST', '/dashboard/session', { apiKey: d.key }, { key: null });
  const cookie = r.headers.get('set-cookie').split(';')[0];
  const own = await listen({ Cookie: cookie, 'Sec-Fetch-Site': 'same-origin' });
  assert.equal(own.status, 200);
  const other = await listen({ Cookie: cookie, Origin: 'http://evil.example', 'Sec-Fetch-Site': 'cross-site' });
  assert.equal(other.status, 403);
  const none = await listen({});
  assert.equal(none.status, 401);
});

test('streams are limited per account', { skip }, async () => {
  const made = await d.api('POST', '/v1/accounts', { name: 'stream-many' });
  const key = made.body.apiKey;
  const got = [];
  for (let i = 0; i < 17; i++) got.push((await listen(bearer(key))).status);
  assert.deepEqual(got.slice(0, 16), Array(16).fill(200));
  assert.equal(got[16], 429);
});
