// Secrets: a change to a secret (its hosts, methods, paths, value) or its
// removal takes effect on the very next request, also on a connection that
// was already open and intercepted. One keep-alive connection, held by a
// client in the background (inside.mjs conn with gates: it sends its next
// request once the test has made the change and created the gate file).

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';

import { SecretsWorld, allEvents, header, isRoot, request, showSecretEvents, waitFor } from './lib.mjs';

const H = 'api.github.test';
const V1 = `pol1_${crypto.randomBytes(20).toString('hex')}`;
const V2 = `pol2_${crypto.randomBytes(20).toString('hex')}`;
const BASE = { hosts: [H], methods: ['GET'], paths: ['/repos/acme/*'] };

let w, d, sb;

describe('secrets: policy changes on an open connection', { skip: !isRoot() && 'must run as root (runtimed and ip netns need it)' }, () => {
  before(async () => {
    w = await new SecretsWorld().setup();
    d = w.daemon;
    await d.putSecret('GH', { value: V1, ...BASE });
    sb = await d.secretsSandbox();
  });
  after(async () => {
    await w?.teardown();
  });

  test('hosts, methods, paths, value and removal apply to the next request of the same connection', async () => {
    const ph = await d.envOf(sb.id, 'GH');
    // [change before this request, expected X-T at the upstream, expected secret event]
    const plan = [
      [null, V1, { kind: 'secret.used' }],
      [() => d.putSecret('GH', { value: V1, ...BASE, paths: ['/repos/other/*'] }), ph, { kind: 'secret.misdirected', reason: 'path not allowed' }],
      [() => d.putSecret('GH', { value: V1, ...BASE, methods: ['POST'] }), ph, { kind: 'secret.misdirected', reason: 'method not allowed' }],
      [() => d.putSecret('GH', { value: V1, ...BASE, hosts: ['api.other.test'] }), ph, { kind: 'secret.misdirected', reason: 'host not allowed' }],
      [() => d.putSecret('GH', { value: V1, ...BASE }), V1, { kind: 'secret.used' }],
      [() => d.putSecret('GH', { value: V2, ...BASE }), V2, { kind: 'secret.used' }],
      [() => d.deleteSecret('GH'), ph, { kind: 'secret.misdirected' }],
    ];
    const log = '/workspace/policy.log';
    const mark = w.upstream.mark();
    await d.insideBackground(sb.id, 'conn', {
      host: H, log, timeoutMs: 60000,
      steps: plan.map((_, i) => ({
        ...(i ? { waitFile: `/workspace/gate-${i}` } : {}),
        send: request('GET', `/repos/acme/x?step=${i}`, H, [['X-T', '{{GH}}']]),
      })),
    }, '/workspace/policy.out');
    const stepResult = (i) => waitFor(async () => {
      const text = (await d.getFile(sb.id, log)) ?? '';
      const lines = text.split('\n').filter(Boolean).map((l) => JSON.parse(l));
      const done = lines.find((l) => l.done);
      if (done && !lines.some((l) => l.step === i)) {
        throw Object.assign(new Error(`the client ended before step ${i}: ${text} ${await d.getFile(sb.id, '/workspace/policy.out')}`), { fatal: true });
      }
      return lines.find((l) => l.step === i);
    }, { timeoutMs: 15000, what: `step ${i} of the client` });

    let seen = 0;
    for (const [i, [change, want, event]] of plan.entries()) {
      if (change) {
        await change();
        await d.putFile(sb.id, `/workspace/gate-${i}`, '');
      }
      const res = await stepResult(i);
      assert.equal(res.responses[0]?.status, 200, `step ${i}: ${JSON.stringify(res)}`);
      const reqs = w.upstream.since(mark, 'req');
      const q = reqs.find((x) => x.target === `/repos/acme/x?step=${i}`);
      assert.ok(q, `step ${i} reached the upstream`);
      assert.equal(header(q, 'X-T'), want, `step ${i}`);
      const events = (await allEvents(d, sb.id)).filter((e) => e.kind.startsWith('secret.'));
      const fresh = events.slice(seen);
      seen = events.length;
      assert.ok(fresh.some((e) => Object.entries(event).every(([k, v]) => e[k] === v) && e.path === '/repos/acme/x'),
        `step ${i}: no ${JSON.stringify(event)} in ${showSecretEvents(fresh).join('; ')}`);
    }
    const reqs = w.upstream.since(mark, 'req');
    assert.equal(reqs.length, plan.length);
    assert.equal(new Set(reqs.map((q) => q.id)).size, 1, 'every request went over the one connection');
    assert.equal(w.upstream.since(mark, 'conn').length, 1, 'one upstream connection, never a new one');
  });
});
