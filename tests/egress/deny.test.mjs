// Runtime Cloud's deny (issue 25): a host a sandbox may otherwise reach is refused
// once denied, by name, by wildcard, by a CIDR that covers the address a name resolves
// to, or on one port only; an open connection to it is closed when the rule comes.
// Before, {"deny": [...]} was dropped with a 200 and the host stayed reachable.
// Upstreams are fake servers in network namespaces this file makes (lib.mjs).

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { World, showEvents, isRoot } from './lib.mjs';

const PINS = [
  'ok.example.test:0:198.51.100.1',
  'bad.example.test:0:198.51.100.1',
  'other.test:0:198.51.100.2',
];

let w, d;

const ok200 = (r) => r.response?.startsWith('HTTP/1.1 200');

async function probe(id, targets) {
  const old = await d.events(id);
  const mark = old.length ? old[old.length - 1].seq : 0;
  const conns = w.upstream.find({ ev: 'conn' }).length;
  const result = await d.inside(id, 'probe', { targets });
  return { result, events: await d.events(id, mark), reached: w.upstream.find({ ev: 'conn' }).slice(conns) };
}

function refused(events, host, reason = 'denied') {
  assert.ok(events.some((e) => e.kind === 'egress.refused' && e.host === host && e.reason === reason),
    `egress.refused ${host} ${reason} in:\n  ${showEvents(events).join('\n  ')}`);
}

describe('network.deny is enforced, never dropped', { skip: !isRoot() && 'must run as root (runtimed and ip netns need it)' }, () => {
  before(async () => {
    w = await new World({ pins: PINS }).setup();
    d = w.daemon;
  });
  after(async () => {
    await w?.teardown();
  });

  test('a denied name inside an allowed wildcard, and any host without a list', async () => {
    const sb = await d.sandbox({ internet: true, allow: ['*.example.test', 'other.test'], deny: ['bad.example.test'] });
    const { result, events, reached } = await probe(sb.id, [{ host: 'ok.example.test' }, { host: 'bad.example.test' }]);
    assert.ok(ok200(result[0]), JSON.stringify(result[0]));
    assert.equal(result[1].error, 'ENOTFOUND', JSON.stringify(result[1]));
    refused(events, 'bad.example.test');
    assert.equal(reached.length, 1, 'only ok.example.test reached an upstream');

    const open = await d.sandbox({ internet: true, deny: ['other.test'] });
    const again = await probe(open.id, [{ host: 'ok.example.test' }, { host: 'other.test' }]);
    assert.ok(ok200(again.result[0]), JSON.stringify(again.result[0]));
    assert.equal(again.result[1].error, 'ENOTFOUND', JSON.stringify(again.result[1]));
    refused(again.events, 'other.test');
  });

  test('a CIDR covers the address an allowed name resolves to; a port rule only its port', async () => {
    const sb = await d.sandbox({ internet: true, allow: ['ok.example.test', 'other.test'], deny: ['198.51.100.2/32'] });
    const { result, events, reached } = await probe(sb.id, [{ host: 'ok.example.test' }, { host: 'other.test' }]);
    assert.ok(ok200(result[0]), JSON.stringify(result[0]));
    assert.ok(!ok200(result[1]), `other.test resolves to a denied address: ${JSON.stringify(result[1])}`);
    refused(events, 'other.test');
    assert.equal(reached.length, 1, 'nothing reached 198.51.100.2');

    const port = await d.sandbox({ internet: true, deny: ['ok.example.test:443'] });
    const p = await probe(port.id, [{ host: 'ok.example.test', port: 80 }]);
    assert.ok(ok200(p.result[0]), `port 80 is not denied: ${JSON.stringify(p.result[0])}`);
  });

  test('a deny set later refuses the host from then on (live.test.mjs shows open connections closed by a change)', async () => {
    const sb = await d.sandbox({ internet: true });
    const { result } = await probe(sb.id, [{ host: 'other.test' }]);
    assert.ok(ok200(result[0]), JSON.stringify(result[0]));
    const set = await d.setNetwork(sb.id, { internet: true, deny: ['other.test'] });
    assert.deepEqual(set, { internet: true, deny: ['other.test'], openPorts: true });
    const after_ = await probe(sb.id, [{ host: 'other.test' }]);
    assert.equal(after_.result[0].error, 'ENOTFOUND', JSON.stringify(after_.result[0]));
    refused(after_.events, 'other.test');
  });
});
