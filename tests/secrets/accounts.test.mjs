// Secrets and accounts (issue 14): a secret is seen only in its own account's
// sandboxes. Accounts acme and globex each hold a secret named GH for the same
// host with different values; the fake upstream (upstream.mjs) records what
// reached it. Account A's value never reaches B's sandbox nor B's upstream
// requests, not even with B's secret of the same name, and not when B sends A's
// placeholder, learned somehow, to the secret's own host.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';

import { SecretsWorld, allEvents, header, isRoot, lastSeq, request } from './lib.mjs';

const GH_HOST = 'api.github.test';
const V_A = `ghp_a_${crypto.randomBytes(16).toString('hex')}`;
const V_B = `ghp_b_${crypto.randomBytes(16).toString('hex')}`;

let w, d;
const keys = {};
const boxes = {};
const ph = {};

/** Runs fn with the daemon's calls made with key: an own property shadows the
 * admin key's getter (Daemon.key) until it is deleted. */
async function as(key, fn) {
  Object.defineProperty(d, 'key', { configurable: true, get: () => key });
  try {
    return await fn();
  } finally {
    delete d.key;
  }
}

/** Everything the upstream recorded on the connections that carried the requests made
 * since mark, from their first byte (a connection the proxy reused would bring what
 * it carried before). Not simply since(mark): a connection of an earlier request
 * reports its close, with all its bytes, whenever the proxy lets it go. */
function trafficOf(mark) {
  const ids = new Set(w.upstream.since(mark, 'req').map((r) => r.id));
  return JSON.stringify(w.upstream.events.filter((e) => ids.has(e.id)));
}

/** A GET to GH_HOST from the sandbox with this Authorization: what reached the upstream. */
async function sendFrom(account, authorization) {
  return as(keys[account], async () => {
    const id = boxes[account].id;
    const mark = w.upstream.mark();
    const seq = await lastSeq(d, id);
    const result = await d.inside(id, 'conn', {
      host: GH_HOST,
      steps: [{ send: request('GET', '/user', GH_HOST, [['Authorization', authorization]]) }],
    });
    return { result, reqs: w.upstream.since(mark, 'req'), everything: trafficOf(mark),
      events: await allEvents(d, id, seq) };
  });
}

describe('secrets: each account\'s only', { skip: !isRoot() && 'must run as root (runtimed and ip netns need it)' }, () => {
  before(async () => {
    w = await new SecretsWorld().setup();
    d = w.daemon;
    for (const name of ['acme', 'globex']) {
      const r = await d.api('POST', '/v1/accounts', { name });
      assert.equal(r.status, 201, r.text);
      keys[name] = r.body.apiKey;
    }
    for (const [name, value] of [['acme', V_A], ['globex', V_B]]) {
      await as(keys[name], async () => {
        await d.putSecret('GH', { value, hosts: [GH_HOST] });
        boxes[name] = await d.secretsSandbox();
        ph[name] = await d.envOf(boxes[name].id, 'GH');
      });
    }
    assert.match(ph.acme, /^RUNTIME_PH_[0-9a-f]{32}$/);
    assert.match(ph.globex, /^RUNTIME_PH_[0-9a-f]{32}$/);
    assert.notEqual(ph.acme, ph.globex);
  });
  after(async () => {
    for (const name of Object.keys(keys)) {
      await d?.api('DELETE', `/v1/accounts/${name}`, undefined, { timeoutMs: 60000 }).catch(() => {});
    }
    await w?.teardown();
  });

  test('each sandbox\'s placeholder becomes its own account\'s value, never the other\'s', async () => {
    const a = await sendFrom('acme', `Bearer ${ph.acme}`);
    assert.equal(a.reqs.length, 1, JSON.stringify(a.result));
    assert.equal(header(a.reqs[0], 'Authorization'), `Bearer ${V_A}`);
    const b = await sendFrom('globex', `Bearer ${ph.globex}`);
    assert.equal(b.reqs.length, 1, JSON.stringify(b.result));
    assert.equal(header(b.reqs[0], 'Authorization'), `Bearer ${V_B}`);
    assert.ok(!b.everything.includes(V_A), 'A\'s value reached B\'s upstream');
  });

  test('A\'s placeholder sent from B\'s sandbox stays a placeholder and is reported', async () => {
    const b = await sendFrom('globex', `Bearer ${ph.acme}`);
    assert.equal(b.reqs.length, 1, JSON.stringify(b.result));
    assert.equal(header(b.reqs[0], 'Authorization'), `Bearer ${ph.acme}`);
    assert.ok(!b.everything.includes(V_A) && !b.everything.includes(V_B), b.everything.slice(0, 400));
    const misdirected = b.events.find((e) => e.kind === 'secret.misdirected');
    assert.ok(misdirected, JSON.stringify(b.events));
    assert.equal(misdirected.reason, 'placeholder of another sandbox');
    assert.equal(misdirected.secret ?? null, null, 'B is not told the name of A\'s secret');
  });

  test('a sandbox of an account without the secret sees no placeholder and swaps nothing', async () => {
    const mine = await d.secretsSandbox(); // the admin's: account default, no GH
    assert.equal(await d.envOf(mine.id, 'GH'), null);
    const mark = w.upstream.mark();
    await d.inside(mine.id, 'conn', {
      host: GH_HOST, extraCa: ['/workspace/testca.pem'],
      steps: [{ send: request('GET', '/user', GH_HOST, [['Authorization', `Bearer ${ph.acme}`]]) }],
    });
    const everything = trafficOf(mark);
    assert.ok(everything.includes(ph.acme), 'the placeholder went as it was');
    assert.ok(!everything.includes(V_A) && !everything.includes(V_B));
  });
});
