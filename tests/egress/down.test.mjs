// No route bypasses the proxy: with the daemon killed (SIGKILL of keeper and
// server; sandboxes keep running), a program in a sandbox that keeps trying to
// reach an allowed upstream gets nowhere, and the upstream sees nothing. When
// the daemon comes back on the same state dir it re-adopts the sandbox and its
// egress works again, and the addresses its stub gave out still mean what
// they meant.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { pidAlive, processesMatching, token, GVISOR, insideProcesses, sandboxHostProcesses } from '../e2e/lib.mjs';
import { World, delay, isRoot, waitFor } from './lib.mjs';

const DOWN_MS = 1500; // how long the daemon stays dead: the window the sandbox must get nothing through

let w, d;

describe('egress with the daemon stopped', { skip: !isRoot() && 'must run as root (runtimed and ip netns need it)' }, () => {
  before(async () => {
    w = await new World({ pins: ['example.test:0:198.51.100.1', 'a.test:0:198.51.100.1', 'b.test:0:198.51.100.2'], traps: false }).setup();
    d = w.daemon;
  });
  after(async () => {
    await w?.teardown();
  });

  test('nothing leaves while the daemon is down; the sandbox is re-adopted after', async (t) => {
    const sb = await d.sandbox({ internet: true, allow: ['example.test'] });
    const tag = token('egress-loop');
    const log = '/workspace/loop.log';
    await d.insideBackground(sb.id, 'loop', { name: 'example.test', port: 80, everyMs: 100, maxMs: 20000, log, tag });
    // Under gvisor the loop is gVisor's process, no host one: its pid is the one inside (ps
    // in the sandbox, which needs the daemon), and while the daemon is down the sandbox's
    // host processes (holder, gofer, sentry) stand for it; the log shows it kept trying.
    const loopInside = async () => (await insideProcesses(d, sb.id, tag)).find((p) => p.cmdline.startsWith('node'))?.pid;
    const loopPid = await waitFor(GVISOR ? loopInside : () => processesMatching(tag).find((p) => p.cmdline.startsWith('node'))?.pid,
      { what: 'the loop process in the sandbox' });
    const hostPids = GVISOR ? sandboxHostProcesses(d.stateDir, sb.id).map((p) => p.pid) : [loopPid];
    const running = () => hostPids.every((p) => pidAlive(p));
    const loopReqs = () => w.upstream.find((e) => e.ev === 'req' && e.url.startsWith('/hello?loop='));
    await waitFor(() => loopReqs().length >= 4, { what: 'the loop to reach the upstream through the daemon' });

    const pids = await d.kill9();
    const tDead = process.hrtime.bigint();
    const wallDead = Date.now();
    assert.ok(pids.length >= 2, `keeper and server: ${pids}`);
    assert.ok(running(), 'the sandbox keeps running without the daemon');
    const seenBefore = w.upstream.events.length;
    await delay(DOWN_MS); // the window under test, not a synchronisation
    assert.ok(running(), 'the sandbox keeps running without the daemon');
    const duringDown = w.upstream.events.slice(seenBefore).filter((e) => e.ev !== 'close');
    const wallRestart = Date.now();
    const tRestart = process.hrtime.bigint();
    assert.deepEqual(duringDown, [], 'the upstream heard from the sandbox while the daemon was down');

    await d.start();
    const s = await d.api('GET', `/v1/sandboxes/${sb.id}`);
    assert.equal(s.status, 200);
    assert.equal(s.body.status, 'running');
    assert.ok(running(), 're-adopted, not restarted: the program in it still runs');
    if (GVISOR) assert.equal(await loopInside(), loopPid, 're-adopted, not restarted: the same loop process inside');

    const lines = await waitFor(async () => {
      const text = await d.getFile(sb.id, log);
      const l = (text ?? '').split('\n').filter(Boolean).map((x) => JSON.parse(x));
      return l.some((x) => x.ev === 'done') && l;
    }, { timeoutMs: 25000, what: 'the loop in the sandbox to finish' });
    const attempts = lines.filter((l) => l.i !== undefined);
    const down = attempts.filter((a) => a.t0 > wallDead && a.t < wallRestart);
    const leaked = down.filter((a) => a.old === 'ok' || a.now === 'ok' || !a.dns.startsWith('fail'));
    t.diagnostic(`${down.length} attempts while the daemon was down; e.g. ${JSON.stringify(down[0])}`);
    assert.ok(down.length >= 5, `too few attempts in the window: ${JSON.stringify(attempts)}`);
    assert.deepEqual(leaked, [], 'something got through with the daemon down');
    assert.ok(w.upstream.find((e) => e.ev === 'conn' && e.t > tDead && e.t < tRestart).length === 0);

    // After the restart, the same running program gets through again.
    const done = lines.find((l) => l.ev === 'done');
    assert.equal(done.phase, 3, `the loop never got through after the restart: ${JSON.stringify(attempts.slice(-5))}`);
    assert.ok(loopReqs().some((e) => e.t > tRestart), 'the upstream heard nothing after the restart');
    // And its policy came back with it: what was refused still is.
    const [refused] = await d.inside(sb.id, 'probe', { targets: [{ host: 'a.test' }] });
    assert.equal(refused.error, 'ENOTFOUND', JSON.stringify(refused));
    await d.remove(sb.id);
  });

  // A program may hold a DNS answer for its TTL (30 s) across a daemon restart:
  // the address must still mean the name it was given for, or be refused.
  test('after a restart, an address the stub gave out earlier never leads to another name', async () => {
    const sb = await d.sandbox({ internet: true, allow: ['a.test', 'b.test'] });
    // The sandbox's own nameserver (/etc/resolv.conf): 127.0.0.53 under ns; under gvisor the
    // holder's end of the veth, since loopback stays in gVisor's network stack.
    const server = (await d.exec(sb.id, ['sh', '-c', "awk '/^nameserver/ { print $2; exit }' /etc/resolv.conf"])).stdout.trim();
    assert.ok(server, 'a nameserver in /etc/resolv.conf');
    const resolve = async (names) => Object.fromEntries((await d.inside(sb.id, 'dns', {
      queries: names.map((name) => ({ server, name })),
    })).map((r) => [r.name, r.answers?.[0]]));
    // The stream server greets with the address it was reached on: .1 is a.test, .2 is b.test.
    const greet = async (addr) => (await d.inside(sb.id, 'probe', {
      targets: [{ host: addr, port: 7000, send: '', timeoutMs: 700 }],
    }))[0].response.split('\n')[0];
    const before = await resolve(['a.test', 'b.test']);
    assert.equal(await greet(before['a.test']), 'hello stream via ::ffff:198.51.100.1');
    assert.equal(await greet(before['b.test']), 'hello stream via ::ffff:198.51.100.2');

    await d.kill9();
    await d.start();
    const after = await resolve(['b.test', 'a.test']); // in the other order this time
    const wrong = [];
    for (const [name, want] of [['a.test', '198.51.100.1'], ['b.test', '198.51.100.2']]) {
      const got = await greet(before[name]);
      if (got && got !== `hello stream via ::ffff:${want}`) {
        wrong.push(`${before[name]} was ${name} before the restart, now reaches "${got}"`);
      }
    }
    assert.deepEqual(wrong, [], `synthetic addresses were handed to other names after the restart ` +
      `(before ${JSON.stringify(before)}, after ${JSON.stringify(after)})`);
    await d.remove(sb.id);
  });
});
