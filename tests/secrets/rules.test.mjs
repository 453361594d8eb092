// Secrets in Runtime Cloud's shape (PUT /v1/egress-secrets/NAME): several rules,
// each {methods?, paths}, any of which lets a request carry the value; header and
// format, which make the proxy set that field on every request the secret may go
// into, whatever the sandbox sent; env, the variable the placeholder is in; and
// only, which sandboxes get it. Fake upstreams record what reached them (lib.mjs).
//
// Secrets here:
//   RULED   hosts [api.github.test], rules [GET /repos/*] [POST /issues]
//   HDR     hosts [api.other.test], header Authorization, format "token {value}",
//           rules [GET /user], env OTHER_TOKEN
//   SCOPED  hosts [api.other.test], only {labels: [{team: a}]}

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';

import { SecretsWorld, allEvents, header, isRoot, lastSeq, request, showSecretEvents } from './lib.mjs';

const V_RULED = `ghp_${crypto.randomBytes(16).toString('hex')}`;
const V_HDR = `oth_${crypto.randomBytes(16).toString('hex')}`;
const V_SCOPED = `sco_${crypto.randomBytes(16).toString('hex')}`;
const GH_HOST = 'api.github.test';
const OTHER_HOST = 'api.other.test';

let w, d, sb, other;
const ph = {};

async function send(arg, id = sb.id) {
  const mark = w.upstream.mark();
  const seq = await lastSeq(d, id);
  const result = await d.inside(id, 'conn', arg);
  const events = await allEvents(d, id, seq);
  return { result, reqs: w.upstream.since(mark, 'req'), events };
}

function hasEvent(events, want) {
  const found = events.find((e) => Object.entries(want).every(([k, v]) => e[k] === v));
  assert.ok(found, `no event like ${JSON.stringify(want)} in:\n  ${showSecretEvents(events).join('\n  ')}`);
}

const statuses = (r) => r.result.steps.flatMap((s) => s.responses.map((x) => x.status));

describe('secrets: rules, header, env, only', { skip: !isRoot() && 'must run as root (runtimed and ip netns need it)' }, () => {
  before(async () => {
    w = await new SecretsWorld().setup();
    d = w.daemon;
    await d.putSecret('RULED', {
      value: V_RULED, hosts: [GH_HOST],
      rules: [{ methods: ['GET'], paths: ['/repos/*'] }, { methods: ['POST'], paths: ['/issues'] }],
    });
    await d.putSecret('HDR', {
      value: V_HDR, hosts: [OTHER_HOST], header: 'Authorization', format: 'token {value}',
      rules: [{ methods: ['GET'], paths: ['/user'] }], env: 'OTHER_TOKEN',
    });
    await d.putSecret('SCOPED', { value: V_SCOPED, hosts: [OTHER_HOST], only: { labels: [{ team: 'a' }] } });
    sb = await d.secretsSandbox({ labels: { team: 'a' } });
    other = await d.secretsSandbox({ labels: { team: 'b' } });
    ph.RULED = await d.envOf(sb.id, 'RULED');
    ph.HDR = await d.envOf(sb.id, 'OTHER_TOKEN');
    ph.SCOPED = await d.envOf(sb.id, 'SCOPED');
    for (const p of Object.values(ph)) assert.match(p, /^RUNTIME_PH_[0-9a-f]{32}$/);
  });
  after(async () => {
    await w?.teardown();
  });

  test('two rules: GET under /repos/ and POST /issues carry the value, nothing else does', async () => {
    const cases = [
      ['GET', '/repos/acme/widgets', 'swap'],
      ['POST', '/issues', 'swap'],
      ['PUT', '/repos/acme/widgets', 'method not allowed'], // no rule has PUT
      ['POST', '/repos/acme/widgets', 'path not allowed'], // the POST rule's paths hold no /repos
      ['GET', '/issues', 'path not allowed'],
      ['POST', '/issues/1', 'path not allowed'],
      ['GET', '/repository', 'path not allowed'],
    ];
    for (const [method, target, want] of cases) {
      const r = await send({
        host: GH_HOST,
        steps: [{ send: request(method, target, GH_HOST, [['Authorization', 'Bearer {{RULED}}']], method === 'GET' ? '' : 'x') }],
      });
      const what = `${method} ${target}`;
      assert.deepEqual(statuses(r), [200], `${what}: ${JSON.stringify(r.result)}`);
      if (want === 'swap') {
        assert.equal(header(r.reqs[0], 'Authorization'), `Bearer ${V_RULED}`, what);
        hasEvent(r.events, { kind: 'secret.used', secret: 'RULED', method, path: target });
      } else {
        assert.equal(header(r.reqs[0], 'Authorization'), `Bearer ${ph.RULED}`, what);
        hasEvent(r.events, { kind: 'secret.misdirected', secret: 'RULED', reason: want });
      }
    }
  });

  test('header and format: the upstream gets "Authorization: token <value>", with or without one sent', async () => {
    const none = await send({ host: OTHER_HOST, steps: [{ send: request('GET', '/user', OTHER_HOST) }] });
    assert.deepEqual(statuses(none), [200], JSON.stringify(none.result));
    assert.equal(header(none.reqs[0], 'Authorization'), `token ${V_HDR}`);
    hasEvent(none.events, { kind: 'secret.used', secret: 'HDR', method: 'GET', path: '/user' });

    // The sandbox's own field of that name is replaced, not sent beside it.
    const own = await send({
      host: OTHER_HOST,
      steps: [{ send: request('GET', '/user', OTHER_HOST, [['authorization', 'Bearer forged'], ['X-Keep', '1']]) }],
    });
    assert.equal(header(own.reqs[0], 'Authorization'), `token ${V_HDR}`);
    assert.equal(header(own.reqs[0], 'X-Keep'), '1');

    // Where the rules do not let the value go, no field is set and the sandbox's stays.
    const elsewhere = await send({
      host: OTHER_HOST, steps: [{ send: request('GET', '/admin', OTHER_HOST, [['Authorization', 'Bearer mine']]) }],
    });
    assert.equal(header(elsewhere.reqs[0], 'Authorization'), 'Bearer mine');
    assert.ok(!JSON.stringify(elsewhere.reqs).includes(V_HDR), 'the value went nowhere else');
  });

  test('env: the placeholder is in the variable env names, not the secret\'s name', async () => {
    const r = await d.exec(sb.id, ['sh', '-c', 'printf "%s|%s" "$OTHER_TOKEN" "${HDR-unset}"']);
    assert.equal(r.stdout, `${ph.HDR}|unset`);
    // inside.mjs fills {{OTHER_TOKEN}} from the program's environment.
    const r2 = await send({
      host: OTHER_HOST, steps: [{ send: request('GET', '/user', OTHER_HOST, [['X-Api-Key', '{{OTHER_TOKEN}}']]) }],
    });
    assert.equal(header(r2.reqs[0], 'X-Api-Key'), V_HDR);
  });

  test('only: a sandbox without the labels gets no variable, and the value does not go from it', async () => {
    const r = await d.exec(other.id, ['sh', '-c', 'printf "%s" "${SCOPED-unset}"']);
    assert.equal(r.stdout, 'unset');
    // Its placeholder of the scoped secret, used from the sandbox that is not in scope.
    const misused = await send({
      host: OTHER_HOST, steps: [{ send: request('GET', '/x', OTHER_HOST, [['X-Api-Key', ph.SCOPED]]) }],
    }, other.id);
    assert.equal(header(misused.reqs[0], 'X-Api-Key'), ph.SCOPED);
    const ok = await send({
      host: OTHER_HOST, steps: [{ send: request('GET', '/x', OTHER_HOST, [['X-Api-Key', ph.SCOPED]]) }],
    });
    assert.equal(header(ok.reqs[0], 'X-Api-Key'), V_SCOPED);
  });
});
