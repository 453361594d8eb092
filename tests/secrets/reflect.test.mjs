// Reflection (issue 23, finding 4): an upstream that echoes what it received
// would hand the swapped value back into the sandbox. The proxy overwrites the
// value wherever an answer from that connection holds it, before the sandbox
// reads it, and reports secret.reflected (host and encoding, never the value).
//
// The fake upstream (upstream.mjs, GET /echo) reflects the value of
// "Authorization: Bearer" in each encoding a server writes (as sent, base64,
// base64url, base64 of "user:VALUE" at both unaligned offsets, percent-encoded,
// JSON-escaped, base64 inside JSON with "\/"), in a body framed by chunks or by
// Content-Length, split in the middle of the written value: the first half in
// one TLS record (and chunk), the second in another, sent only once the test
// has seen what the sandbox received of the first. So the test also sees that
// the proxy held back the half it had, rather than passing it on.
//
// The value is as long as a placeholder, so what the sandbox gets is exactly
// the echo of the placeholder: written plainly, the value's place holds the
// placeholder (base64 of it for base64); with escapes in the match, as many
// characters of the placeholder (then 'x') as the match had bytes.

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';

import { echoParts } from './echo.mjs';
import { SecretsWorld, allEvents, isRoot, lastSeq, request, waitFor } from './lib.mjs';

const H = 'api.github.test';
const PH_LEN = 'RUNTIME_PH_'.length + 32;

// 43 bytes with '/', '+', '&', '<', '?', ' ' and '~' in it, whose base64 holds
// both '+' and '/' (so base64url differs, and "\/" appears in JSON).
function makeValue() {
  const chars = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789~?>_';
  for (let i = 0; i < 10000; i++) {
    const rest = [...crypto.randomBytes(PH_LEN - 10)].map((b) => chars[b % chars.length]).join('');
    const v = `rfl/+&<?~ ${rest}`;
    const b = Buffer.from(v).toString('base64');
    if (b.includes('+') && b.includes('/')) return v;
  }
  throw new Error('no value with both + and / in its base64');
}
const V = makeValue();

let w, d, sb, ph, n = 0;

/** What the sandbox must get for an echo of the value as enc: the same text
 * with the value's place overwritten (see the top of this file). */
function expected(enc) {
  const [pre, mid, post] = echoParts(V, enc);
  const [, phMid] = echoParts(ph, enc);
  if (mid.length === phMid.length) return pre + phMid + post; // written plainly
  const pads = /^base64|json-base64/.test(enc) ? mid.match(/=*$/)[0] : ''; // they hold nothing: kept
  const n = mid.length - pads.length;
  return pre + (ph + 'x'.repeat(n)).slice(0, n) + pads + post;
}

const ENCODING = {
  verbatim: 'verbatim', base64: 'base64', base64url: 'base64url', basic1: 'base64', basic2: 'base64',
  percent: 'percent', json: 'json', 'json-base64': 'base64+json',
};

/** Runs an echo in the background, waits for the sandbox to have the first
 * half, releases the second; returns what the sandbox had before, its answer
 * and the events. */
async function echo(enc, frame, { inHeader = false } = {}) {
  const name = `e${++n}`;
  const rx = `/workspace/${name}.rx`;
  const log = `/workspace/${name}.log`;
  const seq = await lastSeq(d, sb.id);
  const target = `/echo?enc=${enc}&frame=${frame}&hold=${name}${inHeader ? '&in=header' : ''}`;
  await d.insideBackground(sb.id, 'conn', {
    host: H, log, rxLog: rx, timeoutMs: 20000,
    steps: [{ send: request('GET', target, H, [['Authorization', 'Bearer {{RFL}}']]) }],
  }, `/workspace/${name}.out`);
  const [pre] = echoParts(V, enc);
  const seen = inHeader ? '\r\n\r\n' : pre;
  const before = await waitFor(async () => {
    const t = await d.getFile(sb.id, rx);
    return t && t.includes(seen) ? t : null;
  }, { what: `the sandbox to receive the first half of ${enc}/${frame}` });
  w.release(name);
  const lines = await waitFor(async () => {
    const t = await d.getFile(sb.id, log);
    return t && t.includes('"done":true') ? t.trim().split('\n').map((l) => JSON.parse(l)) : null;
  }, { timeoutMs: 20000, what: `the answer to ${enc}/${frame}` });
  const step = lines.find((l) => l.responses);
  if (step?.responses.length !== 1) {
    assert.fail(`no answer to ${enc}/${frame}: ${JSON.stringify(lines)}; received: ${JSON.stringify(await d.getFile(sb.id, rx))}`);
  }
  return { before, res: step.responses[0], events: await allEvents(d, sb.id, seq) };
}

function noValue(text, what) {
  const b64 = Buffer.from(V).toString('base64');
  for (const needle of [V, V.slice(10, 30), encodeURIComponent(V).slice(10, 30), b64.slice(8, 28)]) {
    assert.ok(!text.includes(needle), `${what} holds the value (or a part of it): ${JSON.stringify(text)}`);
  }
}

describe('secrets: values an upstream reflects are overwritten before the sandbox sees them', { skip: !isRoot() && 'must run as root (runtimed and ip netns need it)' }, () => {
  before(async () => {
    w = await new SecretsWorld().setup();
    d = w.daemon;
    await d.putSecret('RFL', { value: V, hosts: [H] });
    sb = await d.secretsSandbox();
    ph = await d.envOf(sb.id, 'RFL');
    assert.equal(ph.length, V.length);
  });
  after(async () => {
    await w?.teardown();
  });

  for (const frame of ['chunked', 'cl']) {
    for (const enc of Object.keys(ENCODING)) {
      test(`${enc}, ${frame}, split across two TLS records${frame === 'chunked' ? ' and two chunks' : ''}`, async () => {
        const { before, res, events } = await echo(enc, frame);
        const [, mid] = echoParts(V, enc);
        const half = Math.floor(mid.length / 2);
        // The upstream had sent the first half of the written value: the proxy held it.
        assert.ok(!before.includes(mid.slice(half - 6, half)), `the sandbox got the first half early: ${JSON.stringify(before)}`);
        assert.equal(res.status, 200);
        assert.equal(res.body, expected(enc));
        noValue(res.body, 'the body');
        const ev = events.filter((e) => e.kind === 'secret.reflected');
        assert.deepEqual(ev.map((e) => [e.secret, e.host, e.encoding]), [['RFL', H, ENCODING[enc]]]);
        noValue(JSON.stringify(events), 'the events');
      });
    }
  }

  test('base64 of the value decodes, in the sandbox, to the placeholder', async () => {
    const { res } = await echo('basic1', 'chunked');
    const [pre] = echoParts(V, 'basic1');
    const decoded = Buffer.from(res.body.slice(pre.length, -1), 'base64').toString('latin1');
    assert.equal(decoded, `user:${ph}`);
  });

  test('a value reflected in a header of the answer', async () => {
    const { res, events } = await echo('verbatim', 'cl', { inHeader: true });
    assert.equal(res.headers['x-echo'], `you sent [${ph}]`);
    assert.equal(res.body, 'see X-Echo');
    assert.deepEqual(events.filter((e) => e.kind === 'secret.reflected').map((e) => e.encoding), ['verbatim']);
  });

  test('the upstream is asked for answers it does not compress (a compressed echo would hide the value)', async () => {
    const mark = w.upstream.mark();
    const r = await d.inside(sb.id, 'conn', {
      host: H,
      steps: [{ send: request('GET', '/plain', H, [['Authorization', 'Bearer {{RFL}}'], ['Accept-Encoding', 'gzip, br'], ['Accept-encoding', 'deflate']]) }],
    });
    assert.equal(r.steps[0].responses[0].status, 200);
    const [req] = w.upstream.since(mark, 'req');
    assert.deepEqual(req.headers.filter(([k]) => /^accept-encoding$/i.test(k)), [['Accept-Encoding', 'identity']]);
  });

  test('answers that hold no value pass unchanged, and report nothing', async () => {
    const seq = await lastSeq(d, sb.id);
    const r = await d.inside(sb.id, 'conn', {
      host: H, steps: [{ send: request('GET', '/plain', H, [['Authorization', 'Bearer {{RFL}}']]) }],
    });
    assert.match(r.steps[0].responses[0].body, /^\{"conn":\d+,"req":1\}$/);
    const events = await allEvents(d, sb.id, seq);
    assert.deepEqual(events.filter((e) => e.kind === 'secret.reflected'), []);
  });
});
