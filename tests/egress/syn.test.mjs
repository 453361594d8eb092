// Issue 26: with gVisor's own network stack (the gvisor driver's --network=sandbox),
// a connection to a refused address never leaves the host. The upstream's network
// namespace counts every TCP SYN and every UDP packet that reaches it (nft counters
// in prerouting, before anything can answer): a refused connection adds none, an
// allowed one adds the proxy's own. The same under the ns driver, side by side.
// Upstreams are fake servers in network namespaces this file makes (lib.mjs).

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';

import { gvisorSkip } from '../e2e/lib.mjs';
import { World, UP_V4, UP2_V4, isRoot } from './lib.mjs';

let w, d;

/** nft in the upstream's namespace: `syns` counts TCP SYNs, `datagrams` UDP packets. */
function countArrivals(ns) {
  const rules = `table inet arrivals {
  counter syns {}
  counter datagrams {}
  chain pre { type filter hook prerouting priority -400; policy accept;
    tcp flags & (syn | ack) == syn counter name syns
    meta l4proto udp counter name datagrams
  }
}`;
  const r = spawnSync('ip', ['netns', 'exec', ns, 'nft', '-f', '-'], { input: rules, encoding: 'utf8' });
  assert.equal(r.status, 0, `nft in ${ns}: ${r.stderr}`);
}

function arrivals(ns) {
  const r = spawnSync('ip', ['netns', 'exec', ns, 'nft', '-j', 'list', 'counters', 'table', 'inet', 'arrivals'],
    { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const counters = JSON.parse(r.stdout).nftables.filter((o) => o.counter).map((o) => o.counter);
  const get = (name) => counters.find((c) => c.name === name).packets;
  return { syns: get('syns'), datagrams: get('datagrams') };
}

const PINS = ['ok.example.test:0:198.51.100.1', 'refused.example.test:0:198.51.100.2'];

for (const isolation of ['ns', 'gvisor']) {
  const skip = !isRoot() ? 'must run as root (runtimed and ip netns need it)' : isolation === 'gvisor' && gvisorSkip();
  describe(`${isolation}: a refused connection sends nothing out`, { skip }, () => {
    before(async () => {
      w = await new World({ pins: PINS }).setup();
      d = w.daemon;
      countArrivals(w.uns);
    });
    after(async () => {
      await w?.teardown();
    });

    test('refused by name, by address and with no internet: no SYN and no datagram reach the upstream', async () => {
      const limited = await d.sandbox({ internet: true, allow: ['ok.example.test'] }, { isolation });
      const offline = await d.sandbox({ internet: false }, { isolation });
      const before_ = arrivals(w.uns);
      const refusedTargets = [{ host: 'refused.example.test' }, { host: UP2_V4 }, { host: UP2_V4, port: 443 },
        { host: UP_V4, port: 5432 }];
      const a = await d.inside(limited.id, 'probe', { targets: refusedTargets });
      const b = await d.inside(offline.id, 'probe', { targets: [{ host: UP_V4 }, { host: 'ok.example.test' }] });
      for (const r of [...a, ...b]) assert.ok(!r.response.startsWith('HTTP/'), `answered: ${JSON.stringify(r)}`);
      await d.inside(limited.id, 'udp', { targets: [{ host: UP_V4, port: 9999, hex: '00' }] });
      await d.inside(offline.id, 'udp', { targets: [{ host: UP_V4, port: 5353, hex: '00' }] });
      assert.deepEqual(arrivals(w.uns), before_, 'packets reached the upstream for refused connections');
    });

    test('the control: an allowed connection reaches the upstream, as the proxy', async () => {
      const sb = await d.sandbox({ internet: true, allow: ['ok.example.test'] }, { isolation });
      const before_ = arrivals(w.uns);
      const [r] = await d.inside(sb.id, 'probe', { targets: [{ host: 'ok.example.test' }] });
      assert.match(r.response, /^HTTP\/1\.1 200/, JSON.stringify(r));
      assert.ok(arrivals(w.uns).syns > before_.syns, 'the counter saw the allowed connection');
    });
  });
}
