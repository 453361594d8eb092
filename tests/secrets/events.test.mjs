// Security events are not pushed out of sight by routine ones (issue 23): a
// sandbox records at most 100 events a second, and kept the last 10,000; so a
// flood of egress (refused DNS names here, each an egress.refused event) used
// the whole budget, and a secret.misdirected raised meanwhile was dropped, or
// 100 s later pushed out of the list. Security events (secret.misdirected,
// secret.reflected, mcp.refused, refusals of a request that tried to get round
// a secret's limits) now have a budget and a cap of their own
// (src/server/events.c; the cap: tests/unit/test_store.c).

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';

import { SecretsWorld, allEvents, isRoot, lastSeq, request, waitFor } from './lib.mjs';

const H = 'api.github.test';
const V = `evt_${crypto.randomBytes(16).toString('hex')}`;
const MISDIRECTED = 10;

let w, d, sb;

describe('secrets: security events outlive a flood of routine ones', { skip: !isRoot() && 'must run as root (runtimed and ip netns need it)' }, () => {
  before(async () => {
    w = await new SecretsWorld().setup();
    d = w.daemon;
    await d.putSecret('EVT', { value: V, hosts: [H] });
    sb = await d.secretsSandbox({ network: { internet: true, allow: [H] } });
  });
  after(async () => {
    await w?.teardown();
  });

  test(`${MISDIRECTED} placeholders sent over plain HTTP during a DNS flood are each reported`, async () => {
    // The flood takes the sandbox's whole DNS budget too: the name is resolved before.
    const looked = await d.exec(sb.id, ['getent', 'hosts', H]);
    const addr = looked.stdout.trim().split(/\s+/)[0];
    assert.match(addr, /^198\.1[89]\./, `getent hosts ${H}: ${looked.stdout}${looked.stderr}`);
    const seq = await lastSeq(d, sb.id);
    await d.insideBackground(sb.id, 'dnsflood', {
      started: '/workspace/flood.started', stop: '/workspace/flood.stop', done: '/workspace/flood.done',
    }, '/workspace/flood.out');
    await waitFor(() => d.getFile(sb.id, '/workspace/flood.started'), { what: 'the flood to start' });
    for (let i = 0; i < MISDIRECTED; i++) {
      const r = await d.inside(sb.id, 'conn', {
        host: addr, tls: false, steps: [{ send: request('GET', `/m${i}`, H, [['X-Key', '{{EVT}}']]) }],
      });
      assert.equal(r.steps[0].responses[0]?.status, 200, JSON.stringify(r));
    }
    const flooding = !(await d.getFile(sb.id, '/workspace/flood.done'));
    await d.putFile(sb.id, '/workspace/flood.stop', '1');
    await waitFor(() => d.getFile(sb.id, '/workspace/flood.done'), { timeoutMs: 40000, what: 'the flood to end' });
    const events = await allEvents(d, sb.id, seq);
    const count = (kind) => events.filter((e) => e.kind === kind).length;
    // The flood did what it is for: more routine events than a sandbox may record.
    assert.ok(flooding, `the flood ended before the requests did: ${await d.getFile(sb.id, '/workspace/flood.out')}`);
    assert.ok(count('events.dropped') > 0, `no routine event was dropped: ${count('egress.refused')} egress.refused`);
    const mis = events.filter((e) => e.kind === 'secret.misdirected');
    assert.equal(mis.length, MISDIRECTED, `secret.misdirected events: ${JSON.stringify(mis)}`);
    for (const e of mis) assert.deepEqual([e.secret, e.host, e.reason], ['EVT', H, 'plain HTTP']);
  });
});
