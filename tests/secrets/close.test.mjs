// An upstream that ends its TLS connection without close_notify (it closes the
// TCP socket under it: many servers and load balancers do) after a complete
// answer (issue 23): the sandbox gets the answer, and nothing is reported, for
// a complete answer is complete however the connection ended. Only an answer
// that was cut short (its Content-Length or its chunks not all there) is
// reported, as egress.truncated, and reaches the sandbox as cut short.
//
// The fake upstream: GET /close?frame=cl|chunked|eof[&cut=N] (upstream.mjs)
// answers (Content-Length, chunked, or until the connection ends), then FINs
// the TCP socket with no TLS close_notify before it; cut=N sends only the
// first N bytes of the body's framing.

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';

import { SecretsWorld, allEvents, isRoot, lastSeq, request } from './lib.mjs';

const H = 'api.github.test';
const V = `cls_${crypto.randomBytes(16).toString('hex')}`;
const BODY = 'the whole answer, delivered\n';

let w, d, sb;

async function close(query) {
  const seq = await lastSeq(d, sb.id);
  const mark = w.upstream.mark();
  const r = await d.inside(sb.id, 'conn', {
    host: H, timeoutMs: 10000,
    steps: [{ send: request('GET', `/close?${query}`, H, [['Authorization', 'Bearer {{CLS}}']]), waitClose: true }],
  });
  const events = await allEvents(d, sb.id, seq);
  return { r, events, reqs: w.upstream.since(mark, 'req') };
}

const kinds = (events) => events.filter((e) => e.kind.startsWith('egress.') && e.kind !== 'egress.allowed')
  .map((e) => `${e.kind} ${e.reason}`);

describe('secrets: an upstream that closes without close_notify', { skip: !isRoot() && 'must run as root (runtimed and ip netns need it)' }, () => {
  before(async () => {
    w = await new SecretsWorld().setup();
    d = w.daemon;
    await d.putSecret('CLS', { value: V, hosts: [H] });
    sb = await d.secretsSandbox();
  });
  after(async () => {
    await w?.teardown();
  });

  for (const frame of ['cl', 'chunked']) {
    test(`a complete answer framed by ${frame} is delivered, and nothing is reported`, async () => {
      const { r, events, reqs } = await close(`frame=${frame}`);
      assert.equal(reqs.length, 1, 'the request was delivered');
      assert.equal(r.error, null, JSON.stringify(r));
      assert.deepEqual(r.steps[0].responses.map((x) => [x.status, x.body]), [[200, BODY]], JSON.stringify(r));
      assert.ok(r.closed, 'the connection ended after it');
      assert.deepEqual(kinds(events), []);
    });
  }

  test('an answer that ends at the end of the connection is delivered whole', async () => {
    const { r, events } = await close('frame=eof');
    assert.equal(r.error, null, JSON.stringify(r));
    assert.ok(r.closed);
    assert.match(r.tail, /^HTTP\/1\.1 200 OK\r\n/);
    assert.ok(r.tail.endsWith(`\r\n\r\n${BODY}`), JSON.stringify(r.tail));
    assert.deepEqual(kinds(events), []);
  });

  for (const [frame, cut] of [['cl', 10], ['chunked', 12]]) {
    test(`an answer framed by ${frame} cut short is reported, and reaches the sandbox cut short`, async () => {
      const { r, events, reqs } = await close(`frame=${frame}&cut=${cut}`);
      assert.equal(reqs.length, 1);
      assert.deepEqual(r.steps[0].responses, [], 'no complete answer');
      assert.ok(r.closed);
      assert.match(r.tail, /^HTTP\/1\.1 200 OK\r\n/, 'what came did come');
      assert.deepEqual(kinds(events), ['egress.truncated the upstream closed in the middle of an answer']);
      const ev = events.find((e) => e.kind === 'egress.truncated');
      assert.equal(ev.host, H);
      assert.equal(ev.closeNotify, false);
    });
  }
});
