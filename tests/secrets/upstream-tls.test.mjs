// Secrets: the proxy re-encrypts to the real host with full verification. An
// upstream whose certificate is expired, for another name, or from a CA the
// daemon does not trust (not the system bundle, not --upstream-ca) is refused:
// the sandbox's connection fails, not one byte of the request (nor the
// value) reaches that upstream, and the sandbox gets an egress.refused event
// with reason upstream_tls_failed. The certificates are made with the
// openssl CLI (lib.mjs makeCerts); the expired one with `openssl ca
// -startdate/-enddate`, as OpenSSL 3.0's x509 command cannot backdate.

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';

import { BAD_NAMES, SecretsWorld, allEvents, header, isRoot, lastSeq, request, waitFor } from './lib.mjs';

const VALUE = `tls_${crypto.randomBytes(20).toString('hex')}`;

let w, d, sb;

describe('secrets: upstream certificates are verified', { skip: !isRoot() && 'must run as root (runtimed and ip netns need it)' }, () => {
  before(async () => {
    w = await new SecretsWorld().setup();
    d = w.daemon;
    await d.putSecret('KEY', { value: VALUE, hosts: ['api.github.test', ...BAD_NAMES] });
    sb = await d.secretsSandbox();
  });
  after(async () => {
    await w?.teardown();
  });

  test('a good upstream (signed by --upstream-ca) gets the value', async () => {
    const mark = w.upstream.mark();
    const r = await d.inside(sb.id, 'conn', { host: 'api.github.test', steps: [{ send: request('GET', '/ok', 'api.github.test', [['X-Key', '{{KEY}}']]) }] });
    assert.equal(r.steps[0].responses[0]?.status, 200, JSON.stringify(r));
    assert.equal(header(w.upstream.since(mark, 'req')[0], 'X-Key'), VALUE);
  });

  for (const host of BAD_NAMES) {
    test(`an upstream with a bad certificate is refused: ${host}`, async () => {
      const mark = w.upstream.mark();
      const seq = await lastSeq(d, sb.id);
      const r = await d.inside(sb.id, 'conn', {
        host, steps: [{ send: request('GET', '/x', host, [['X-Key', '{{KEY}}']]), waitClose: true }],
      });
      // The sandbox's side of the handshake (the minted leaf) may complete; the request never gets an answer.
      assert.deepEqual(r.steps.flatMap((s) => s.responses), [], JSON.stringify(r));
      assert.ok(r.closed || r.error, `the connection fails: ${JSON.stringify(r)}`);
      // The proxy did reach the upstream (so the refusal is the certificate's doing) ...
      assert.ok(w.upstream.since(mark, 'conn').some((c) => c.sni === host), `the proxy dialled ${host}`);
      // ... and sent it nothing but its handshake.
      assert.deepEqual(w.upstream.since(mark, 'rx'), []);
      assert.deepEqual(w.upstream.since(mark, 'req'), []);
      const curl = await d.sh(sb.id, `curl -sS --max-time 10 https://${host}/x -H "X-Key: $KEY"`);
      assert.notEqual(curl.exitCode, 0, `curl must fail: ${curl.stdout}`);
      assert.deepEqual(w.upstream.since(mark, 'rx'), []);
      const events = await waitFor(async () => {
        const evs = await allEvents(d, sb.id, seq);
        // The reason names the verification error, e.g. "upstream_tls_failed: certificate has expired".
        return evs.some((e) => e.kind === 'egress.refused' && e.host === host && e.reason.startsWith('upstream_tls_failed')) && evs;
      }, { timeoutMs: 5000, what: `an egress.refused event for ${host} with reason upstream_tls_failed` });
      assert.ok(!events.some((e) => e.kind === 'secret.used'), 'no secret used');
    });
  }
});
