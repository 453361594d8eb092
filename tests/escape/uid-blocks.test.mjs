// Two daemons on one host never share host uids (issue 23): each claims a uid block of its
// own (src/keeper/uidblock.c), registered host-wide, and keeps it across restarts, since its
// sandboxes' workspace files are owned by those uids. Their sandboxes' processes, servers
// and signers run under disjoint uids.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';

import { startDaemon, stopDaemon, processesMatching, waitFor, hostProcesses, SANDBOX_UID_FLOOR, GVISOR, insideProcesses,
  runscProcesses } from '../e2e/lib.mjs';

const REGISTER = '/var/lib/runtime-uid-blocks';
let a, b;
before(async () => {
  a = await startDaemon({ prefix: 'runtime-uid-a-' });
  b = await startDaemon({ prefix: 'runtime-uid-b-' });
});
after(async () => {
  await stopDaemon(a);
  await stopDaemon(b);
});

/** Under gvisor the host process that runs sandbox sb's programs: runsc's sentry. */
function sentryOf(d, sb) {
  const [p] = runscProcesses(d.stateDir, sb.id).filter((x) => x.cmdline.startsWith('runsc-sandbox'));
  assert.ok(p, `the sentry of ${sb.id} on the host`);
  return p;
}

// A sleep in sandbox sb of daemon d, and its host process: {pid, uid, status}. Under gvisor
// the sleep is gVisor's, no host process: the host process that runs it is the sentry.
async function sleeper(d, sb) {
  const marker = `1000.${Math.floor(Math.random() * 900000) + 100000}`;
  await d.sh(sb.id, `sleep ${marker} </dev/null >/dev/null 2>&1 &`);
  if (GVISOR) {
    await waitFor(async () => (await insideProcesses(d, sb.id, `sleep ${marker}`)).length === 1,
      { what: `the sleep of ${sb.id} in it` });
    return { ...sentryOf(d, sb), marker };
  }
  const [p] = await waitFor(() => {
    const ps = processesMatching(`sleep ${marker}`);
    return ps.length === 1 && ps;
  }, { what: `the sleep of ${sb.id} on the host` });
  return { ...p, marker };
}

const within = (u, r) => u >= r.first && u <= r.last;
const idsOf = (status, field) => new RegExp(`^${field}:\\s+(.*)$`, 'm').exec(status)[1].split(/\s+/).map(Number);

test('two daemons hold disjoint uid blocks, registered host-wide', () => {
  const ua = a.uids(), ub = b.uids();
  assert.notEqual(ua.block, ub.block);
  assert.ok(ua.last < ub.first || ub.last < ua.first, `ranges overlap: ${JSON.stringify([ua, ub])}`);
  for (const u of [ua, ub]) {
    assert.ok(u.first >= SANDBOX_UID_FLOOR && u.last < 2 ** 31, JSON.stringify(u));
    assert.deepEqual([u.server, u.signer], [u.first - 1, u.first - 2]);
  }
  // Each server and signer is its daemon's own.
  assert.notEqual(ua.server, ub.server);
  assert.notEqual(ua.signer, ub.signer);
  for (const [d, u] of [[a, ua], [b, ub]]) {
    const kids = hostProcesses().filter((p) => p.ppid === d.proc.pid && p.state !== 'Z');
    assert.ok(kids.some((p) => p.uid === u.server), `a child of ${d.proc.pid} runs as the server's uid ${u.server}`);
    assert.ok(kids.some((p) => p.uid === u.signer), `a child of ${d.proc.pid} runs as the signer's uid ${u.signer}`);
    // The register names the daemon's state directory at its block.
    assert.equal(fs.readFileSync(`${REGISTER}/${u.block}`, 'utf8'), `${fs.realpathSync(d.stateDir)}\n`);
  }
});

test("each daemon's sandbox processes run under its own block's uids", async () => {
  const ua = a.uids(), ub = b.uids();
  const sa = await a.create({ name: 'one' });
  const sb = await b.create({ name: 'one' }); // the same slot (0) in each daemon
  const pa = await sleeper(a, sa), pb = await sleeper(b, sb);
  for (const [p, mine, other] of [[pa, ua, ub], [pb, ub, ua]]) {
    for (const u of [...idsOf(p.status, 'Uid'), ...idsOf(p.status, 'Gid')]) {
      assert.ok(within(u, mine), `uid/gid ${u} of pid ${p.pid} in its daemon's ${mine.first}..${mine.last}`);
      assert.ok(!within(u, other), `uid/gid ${u} of pid ${p.pid} not in the other daemon's block`);
    }
  }
  assert.notEqual(pa.uid, pb.uid, 'slot 0 of two daemons: different host uids');
  // Under gvisor /proc/self/uid_map inside is gVisor's own (0 0 4294967295); the map onto the
  // host's uids is the sentry's user namespace's.
  const map = async (d, s) => (GVISOR ? fs.readFileSync(`/proc/${sentryOf(d, s).pid}/uid_map`, 'utf8')
    : (await d.exec(s.id, ['cat', '/proc/self/uid_map'])).stdout).trim().split(/\s+/).map(Number);
  const [ma, mb] = [await map(a, sa), await map(b, sb)];
  assert.ok(within(ma[1], ua) && within(ma[1] + ma[2] - 1, ua), `a's map ${ma} in ${ua.first}..${ua.last}`);
  assert.ok(within(mb[1], ub) && within(mb[1] + mb[2] - 1, ub), `b's map ${mb} in ${ub.first}..${ub.last}`);
  await a.sh(sa.id, `pkill -f 'sleep ${pa.marker}'; true`);
  await b.sh(sb.id, `pkill -f 'sleep ${pb.marker}'; true`);
});

test('a restarted daemon keeps its block, and its sandbox its files', async () => {
  const before = a.uids();
  const s = await a.create({ name: 'keeps' });
  await a.sh(s.id, 'echo kept > /workspace/f');
  await a.stop();
  await a.start();
  assert.deepEqual(a.uids(), before);
  // Written before the restart, still the sandbox user's (not nobody's) after it.
  const st = await a.exec(s.id, ['stat', '-c', '%u %g', '/workspace/f']);
  assert.equal(st.exitCode, 0, st.stderr);
  assert.equal(st.stdout.trim(), '1000 1000');
  const p = await sleeper(a, s);
  assert.ok(within(p.uid, before), `after the restart, uid ${p.uid} in ${before.first}..${before.last}`);
  await a.sh(s.id, `pkill -f 'sleep ${p.marker}'; true`);
});
