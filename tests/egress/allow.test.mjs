// allow: [] means no host (issue 23, finding 5). The seeds' narrowing pattern,
// network.set({internet: true, allow: entry.egress}), gets [] for half the catalog,
// and [] used to mean "any public host": a sandbox "narrowed" to the memory server's
// hosts reached an arbitrary one. Now:
//   {internet: true, allow: []}   no host (but its catalog MCP servers' hosts, which
//                                 tests/catalog/allow.test.mjs shows)
//   {internet: true}              (no allow field) any public host
//   {internet: false}             none
// The difference is kept in the answers and through a restart. Upstreams are fake
// servers in network namespaces this file makes (lib.mjs).

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { UP_V4, World, showEvents, isRoot } from './lib.mjs';

const PINS = ['example.test:0:198.51.100.1', 'other.test:0:198.51.100.2'];
const TARGETS = [{ host: 'example.test' }, { host: 'other.test' }, { host: UP_V4, hostHeader: 'example.test' }];

let w, d;

const ok200 = (r) => r.response.startsWith('HTTP/1.1 200');

/** Probes TARGETS from the sandbox: the results, its new events and the upstream connections made. */
async function probe(id) {
  const old = await d.events(id);
  const mark = old.length ? old[old.length - 1].seq : 0;
  const conns = w.upstream.find({ ev: 'conn' }).length;
  const result = await d.inside(id, 'probe', { targets: TARGETS });
  return { result, events: await d.events(id, mark), upstreamConns: w.upstream.find({ ev: 'conn' }).slice(conns) };
}

/** Every target refused: names unresolved, the address refused at connect, nothing reached. */
async function assertNoHost(id, reason = 'not_allowed') {
  const { result, events, upstreamConns } = await probe(id);
  assert.equal(result[0].error, 'ENOTFOUND', JSON.stringify(result[0]));
  assert.equal(result[1].error, 'ENOTFOUND', JSON.stringify(result[1]));
  assert.ok(!result[2].response, JSON.stringify(result[2]));
  const shown = showEvents(events).join('\n  ');
  for (const host of ['example.test', 'other.test']) {
    assert.ok(events.some((e) => e.kind === 'egress.refused' && e.host === host && e.reason === reason),
      `egress.refused ${host} ${reason} in:\n  ${shown}`);
  }
  assert.deepEqual(upstreamConns, [], 'nothing may reach an upstream');
}

/** Every target reached. */
async function assertAnyHost(id) {
  const { result } = await probe(id);
  for (const r of result) assert.ok(ok200(r), JSON.stringify(r));
  assert.match(result[1].response, /hello other\.test/);
}

async function networkOf(id) {
  const r = await d.api('GET', `/v1/sandboxes/${id}`);
  assert.equal(r.status, 200, r.text);
  return r.body.network;
}

describe('allow: [] is no host, no allow is any public host', { skip: !isRoot() && 'must run as root (runtimed and ip netns need it)' }, () => {
  let none, any, off;
  before(async () => {
    w = await new World({ pins: PINS }).setup();
    d = w.daemon;
    none = await d.sandbox({ internet: true, allow: [] });
    any = await d.sandbox({ internet: true });
    off = await d.sandbox({ internet: false });
  });
  after(async () => {
    await w?.teardown();
  });

  test('created with allow: [] no host is reached; without allow every public one is', async () => {
    assert.deepEqual(none.network, { internet: true, allow: [] });
    assert.deepEqual(any.network, { internet: true });
    assert.deepEqual(off.network, { internet: false });
    await assertNoHost(none.id);
    await assertAnyHost(any.id);
    await assertNoHost(off.id, 'internet_off');
  });

  test('PUT network: [] closes a sandbox, leaving allow out (or null) opens it again', async () => {
    const closed = await d.setNetwork(any.id, { internet: true, allow: [] });
    assert.deepEqual(closed, { internet: true, allow: [], openPorts: true });
    await assertNoHost(any.id);
    assert.deepEqual(await d.setNetwork(any.id, { internet: true }), { internet: true, openPorts: true });
    await assertAnyHost(any.id);
    await d.setNetwork(any.id, { internet: true, allow: [] });
    assert.deepEqual(await d.setNetwork(any.id, { internet: true, allow: null }), { internet: true, openPorts: true });
    await assertAnyHost(any.id);
    assert.deepEqual(await d.setNetwork(any.id, {}), { internet: true, openPorts: true }, 'an empty body: every default');
  });

  test('a restart keeps the difference', { timeout: 120000 }, async () => {
    await d.stop();
    await d.start();
    assert.deepEqual(await networkOf(none.id), { internet: true, allow: [] });
    assert.deepEqual(await networkOf(any.id), { internet: true });
    await assertNoHost(none.id);
    await assertAnyHost(any.id);
  });
});
