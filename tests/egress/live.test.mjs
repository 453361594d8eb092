// A network policy change applies at once, to open connections too: an idle
// keep-alive connection, a download in progress and an upgraded websocket to
// names taken off the allow list are closed within 100 ms of the PUT's answer,
// measured where it matters, at the upstream (host monotonic clock on both
// sides); a connection to a name still allowed keeps flowing, and so does
// another sandbox's connection to a removed name; internet off then closes the
// remaining one as well.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { World, showEvents, isRoot, msSince, waitFor } from './lib.mjs';

const LIMIT_MS = 100;
const TARGETS = [
  { name: 'keepalive', host: 'ka.test', kind: 'keepalive' },
  { name: 'download', host: 'dl.test', kind: 'download' },
  { name: 'websocket', host: 'ws.test', kind: 'ws' },
  { name: 'stay', host: 'stay.test', kind: 'ws' },
];
// Another sandbox, same names, policy unchanged.
const NEIGHBOUR = [
  { name: 'n-keepalive', host: 'ka.test', kind: 'keepalive' },
  { name: 'n-websocket', host: 'ws.test', kind: 'ws' },
];
const PINS = ['ka.test', 'dl.test', 'ws.test', 'stay.test'].map((h) => `${h}:0:198.51.100.1`);
const LOG = '/workspace/hold.log';

let w, d;

async function holdLog(id) {
  return ((await d.getFile(id, LOG)) ?? '').split('\n').filter(Boolean).map((l) => JSON.parse(l));
}

/** Starts the long-lived connections; returns the upstream connection id of each, by name. */
async function hold(id, targets) {
  await d.insideBackground(id, 'hold', { targets, log: LOG, maxMs: 25000 });
  await waitFor(async () => {
    const lines = await holdLog(id);
    const bad = lines.find((l) => l.ev === 'close');
    if (bad) throw Object.assign(new Error(`closed before the change: ${JSON.stringify(bad)}`), { fatal: true });
    return targets.every((x) => lines.some((l) => l.name === x.name && l.ev === 'ready'));
  }, { timeoutMs: 10000, what: 'every long-lived connection to be set up in the sandbox' });
  const conn = {};
  for (const x of targets) {
    const req = await w.upstream.waitFor((e) => e.ev === 'req' && e.host === x.host && e.url.endsWith(`?n=${x.name}`),
      `the request of ${x.name}`);
    conn[x.name] = req.id;
    if (x.kind === 'download') await w.upstream.waitFor({ ev: 'streaming', id: req.id }, `${x.name} to flow`);
    if (x.kind === 'ws') await w.upstream.waitFor({ ev: 'rx', id: req.id }, `bytes from the sandbox on ${x.name}`);
  }
  return conn;
}

const closeOf = (id) => w.upstream.find({ ev: 'close', id })[0];

describe('egress policy changes reach open connections', { skip: !isRoot() && 'must run as root (runtimed and ip netns need it)' }, () => {
  before(async () => {
    w = await new World({ pins: PINS, traps: false }).setup();
    d = w.daemon;
  });
  after(async () => {
    await w?.teardown();
  });

  test(`refused open connections close within ${LIMIT_MS} ms; allowed ones keep flowing`, async (t) => {
    const allow = ['ka.test', 'dl.test', 'ws.test', 'stay.test'];
    const sb = await d.sandbox({ internet: true, allow });
    const other = await d.sandbox({ internet: true, allow });
    const conn = { ...(await hold(sb.id, TARGETS)), ...(await hold(other.id, NEIGHBOUR)) };
    assert.deepEqual(Object.values(conn).map(closeOf).filter(Boolean), [], 'nothing closed before the policy change');
    const seqBefore = (await d.events(sb.id)).at(-1).seq;

    // Take three names off the list.
    const tSent = process.hrtime.bigint();
    const wallSent = Date.now();
    await d.setNetwork(sb.id, { internet: true, allow: ['stay.test'] });
    const tAnswered = process.hrtime.bigint();
    const latency = {};
    for (const n of ['keepalive', 'download', 'websocket']) {
      const c = await w.upstream.waitFor({ ev: 'close', id: conn[n] }, `the upstream to see ${n} close`, 5000);
      assert.ok(c.t > tSent, `${n} closed before the change`);
      latency[n] = { fromAnswer: msSince(tAnswered, c.t), fromRequest: msSince(tSent, c.t), how: c.how };
    }
    t.diagnostic(`PUT took ${msSince(tSent, tAnswered).toFixed(2)} ms; upstream saw the close, ms after the answer ` +
      `(after the request): ${Object.entries(latency).map(([n, l]) =>
        `${n} ${l.fromAnswer.toFixed(2)} (${l.fromRequest.toFixed(2)}, ${l.how})`).join('; ')}`);
    for (const [n, l] of Object.entries(latency)) {
      assert.ok(l.fromAnswer <= LIMIT_MS, `${n} closed ${l.fromAnswer.toFixed(1)} ms after the PUT's answer (limit ${LIMIT_MS})`);
    }

    // Still allowed here, or another sandbox: open, and carrying bytes after the change.
    for (const n of ['stay', 'n-websocket']) {
      await w.upstream.waitFor((e) => e.ev === 'rx' && e.id === conn[n] && e.t > tAnswered + 150_000_000n,
        `bytes on ${n} after the change`, 3000);
    }
    for (const n of ['stay', 'n-keepalive', 'n-websocket']) assert.equal(closeOf(conn[n]), undefined, `${n} was closed`);
    const events = await d.events(sb.id, seqBefore);
    for (const host of ['ka.test', 'dl.test', 'ws.test']) {
      assert.ok(events.some((e) => e.kind === 'egress.refused' && e.host === host && e.reason === 'not_allowed'),
        `no refusal event for ${host}:\n  ${showEvents(events).join('\n  ')}`);
    }
    assert.ok(!events.some((e) => e.host === 'stay.test'), showEvents(events).join('\n'));
    // New connections follow the new list at once.
    const [again] = await d.inside(sb.id, 'probe', { targets: [{ host: 'ka.test' }] });
    assert.equal(again.error, 'ENOTFOUND', JSON.stringify(again));

    // Internet off: the last one goes too.
    const tOff = process.hrtime.bigint();
    await d.setNetwork(sb.id, { internet: false }); // (with a list it would be that list)
    const tOffAnswered = process.hrtime.bigint();
    const c = await w.upstream.waitFor({ ev: 'close', id: conn.stay }, 'the upstream to see stay close', 5000);
    const offLatency = msSince(tOffAnswered, c.t);
    t.diagnostic(`internet off: upstream saw the close ${offLatency.toFixed(2)} ms after the answer ` +
      `(${msSince(tOff, c.t).toFixed(2)} after the request, ${c.how})`);
    assert.ok(offLatency <= LIMIT_MS, `stay closed ${offLatency.toFixed(1)} ms after the PUT's answer`);
    const off = await d.events(sb.id, seqBefore);
    assert.ok(off.some((e) => e.host === 'stay.test' && e.reason === 'internet_off'), showEvents(off).join('\n'));
    for (const n of ['n-keepalive', 'n-websocket']) assert.equal(closeOf(conn[n]), undefined, `${n} was closed`);

    // The sandbox saw every connection end (nothing left hanging on its side).
    const lines = await waitFor(async () => {
      const l = await holdLog(sb.id);
      return TARGETS.every((x) => l.some((e) => e.name === x.name && e.ev === 'close')) && l;
    }, { timeoutMs: 5000, what: 'the sandbox to see every connection close' });
    const inside = Object.fromEntries(TARGETS.map((x) => {
      const e = lines.find((l) => l.name === x.name && l.ev === 'close');
      return [x.name, `${e.t - wallSent} ms (${e.why})`];
    }));
    t.diagnostic(`the sandbox saw the closes, wall-clock ms after the first PUT was sent: ${JSON.stringify(inside)}`);
    await d.remove(sb.id);
    await d.remove(other.id);
  });
  // Creates and removes are answered later, on the loop, while proxied bytes move:
  // a descriptor closed at the wrong moment once cut other sandboxes' connections
  // (libevent dropped the registration of the socket that reused its number). A
  // race: against that build this failed two runs in three; it never fails when right.
  test('sandboxes created and removed beside it do not cut another sandbox\'s connections', async (t) => {
    const sb = await d.sandbox({ internet: true, allow: ['stay.test'] });
    let stop = false;
    let cycles = 0;
    const loop = async () => {
      while (!stop && cycles < 120) {
        const x = await d.create({ memoryMiB: 256 });
        await d.remove(x.id);
        cycles++;
      }
    };
    const churn = Promise.all([loop(), loop()]);
    const results = [];
    try {
      for (let round = 0; round < 16; round++) {
        const batch = Array.from({ length: 20 }, (_, i) => ({ host: 'stay.test', hostHeader: 'stay.test', send: `GET /?n=churn-${round}-${i} HTTP/1.1\r\nHost: stay.test\r\nConnection: close\r\n\r\n` }));
        results.push(...await d.inside(sb.id, 'probe', { targets: batch }));
      }
    } finally {
      stop = true;
      await churn;
    }
    t.diagnostic(`${results.length} connections during ${cycles} create/remove cycles`);
    const bad = results.filter((r) => !r.response.startsWith('HTTP/1.1 200'));
    assert.deepEqual(bad.map((r) => `${r.end} ${r.error} ${r.response.slice(0, 40)}`), []);
    assert.ok(cycles >= 5, `only ${cycles} create/remove cycles ran beside the connections`);
    await d.remove(sb.id);
  });
});
