// From inside a sandbox: host processes and other sandboxes' processes are
// invisible and out of reach; the sandbox's own processes have no privilege.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import { startDaemon, stopDaemon, probe, assertRefused, processesMatching, pidAlive, waitFor, GVISOR,
  insideProcesses, runscProcesses, sandboxInit,
} from '../e2e/lib.mjs';

// Under gvisor a sandbox's programs run on gVisor's kernel and are no host processes (b's
// sleep is found by b's own ps); on the host a sandbox is its holder (runtime-init) and
// runsc's processes. tests/escape/gvisor.test.mjs shows what the host sees of them.
let d, a, b, bSleep, bSleepHost;

before(async () => {
  d = await startDaemon();
  a = await d.create({ name: 'proc-a' });
  b = await d.create({ name: 'proc-b' });
  await d.installProbe(a.id);
  bSleep = `1000.${Math.floor(Math.random() * 900000) + 100000}`;
  await d.sh(b.id, `sleep ${bSleep} </dev/null >/dev/null 2>&1 &`);
  if (GVISOR) {
    await waitFor(async () => (await insideProcesses(d, b.id, `sleep ${bSleep}`)).length === 1, { what: "b's sleep in b" });
    return;
  }
  [bSleepHost] = await waitFor(() => {
    const p = processesMatching(`sleep ${bSleep}`);
    return p.length === 1 && p;
  }, { what: "b's sleep on the host" });
});

/** b's sleep still runs: on the host (ns), or in b (gvisor). */
async function bSleepRuns() {
  if (GVISOR) return (await insideProcesses(d, b.id, `sleep ${bSleep}`)).length === 1;
  return pidAlive(bSleepHost.pid);
}

after(async () => {
  await stopDaemon(d);
});

async function innerPids(id) {
  const r = await d.sh(id, 'for p in /proc/[0-9]*; do echo ${p#/proc/}; done');
  return r.stdout.trim().split('\n').map(Number);
}

test('ps and /proc show only the sandbox\'s own processes', async () => {
  const ps = await d.exec(a.id, ['ps', '-eo', 'pid,user,args']);
  const lines = ps.stdout.trim().split('\n').slice(1);
  assert.ok(lines.length <= 4, `a handful of processes (init, ps): ${ps.stdout}`);
  assert.ok(!ps.stdout.includes('runtimed'), `the daemon is visible:\n${ps.stdout}`);
  assert.ok(!ps.stdout.includes(bSleep), `b's process is visible:\n${ps.stdout}`);
  assert.ok(!ps.stdout.includes(d.stateDir), `the state dir shows:\n${ps.stdout}`);
  const host = fs.readdirSync('/proc').filter((n) => /^\d+$/.test(n)).length;
  const inner = await innerPids(a.id);
  assert.ok(inner.length < 10 && inner.length < host, `pids inside: ${inner}`);
  assert.ok(!inner.includes(d.proc.pid) || d.proc.pid < 10, 'the keeper\'s host pid is not listed');
});

test('/proc/1 is the sandbox\'s init and reveals nothing of the host', async () => {
  const r = await d.sh(a.id, "tr '\\0' ' ' < /proc/1/cmdline; echo; cat /proc/1/comm; readlink /proc/1/exe; true");
  assert.ok(!r.stdout.includes(d.stateDir), `/proc/1 shows the state dir: ${r.stdout}`);
  assert.ok(!r.stdout.includes('--listen') && !r.stdout.includes(String(d.port)), `/proc/1 shows the daemon's options: ${r.stdout}`);
  const hostInit = fs.readFileSync('/proc/1/cmdline', 'utf8').split('\0')[0];
  assert.ok(!r.stdout.split('\n')[0].startsWith(hostInit) || hostInit === '', 'not the host\'s init');
  // Its environment, fds, root and memory belong to another (namespace-root) user.
  for (const p of ['/proc/1/fd', '/proc/1/root/', '/proc/1/cwd/', '/proc/1/map_files']) {
    const c = await d.exec(a.id, ['ls', p]);
    assert.notEqual(c.exitCode, 0, `${p} is listable: ${c.stdout}`);
  }
  for (const p of ['/proc/1/environ', '/proc/1/mem', '/proc/1/maps']) {
    const c = await d.exec(a.id, ['cat', p]);
    assert.notEqual(c.exitCode, 0, `${p} is readable`);
  }
});

test('every namespace differs from the host\'s and from the other sandbox\'s', async () => {
  const kinds = ['user', 'mnt', 'pid', 'net', 'ipc', 'uts', 'cgroup'];
  const script = kinds.map((k) => `readlink /proc/self/ns/${k}`).join('; ');
  const inA = (await d.sh(a.id, script)).stdout.trim().split('\n');
  const inB = (await d.sh(b.id, script)).stdout.trim().split('\n');
  kinds.forEach((k, i) => {
    const host = fs.readlinkSync(`/proc/self/ns/${k}`);
    assert.notEqual(inA[i], host, `${k} namespace is the host's`);
    // Each gvisor sandbox is a kernel of its own (its own sentry), which numbers its
    // namespaces from 1 as the other does: the same names, never the same namespaces.
    if (!GVISOR) assert.notEqual(inA[i], inB[i], `${k} namespace is shared between sandboxes`);
  });
  if (GVISOR) {
    const sentry = (sb) => runscProcesses(d.stateDir, sb.id).filter((p) => p.cmdline.startsWith('runsc-sandbox'));
    const [sa, sb_] = [sentry(a), sentry(b)];
    assert.ok(sa.length === 1 && sb_.length === 1 && sa[0].pid !== sb_[0].pid, `one sentry each: ${sa.map((p) => p.pid)} / ${sb_.map((p) => p.pid)}`);
    const boot = async (sb) => (await d.exec(sb.id, ['cat', '/proc/sys/kernel/random/boot_id'])).stdout.trim();
    const [ba, bb] = [await boot(a), await boot(b)];
    assert.match(ba, /^[0-9a-f-]{36}$/);
    assert.notEqual(ba, bb, 'two kernels, two boot ids');
    assert.notEqual(ba, fs.readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim(), "the host's boot id");
  }
  const hn = await d.exec(a.id, ['hostname']);
  assert.notEqual(hn.stdout.trim(), os.hostname(), 'the host name is not visible');
});

test('the daemon cannot be signalled: kill -9 of its host pids fails', async () => {
  const pids = d.daemonPids();
  assert.ok(pids.length >= 2);
  for (const pid of pids) {
    const sh = await d.sh(a.id, `kill -9 ${pid}; echo "rc=$?"`);
    assert.match(sh.stdout, /rc=[1-9]/, `kill -9 ${pid}: ${sh.stdout}${sh.stderr}`);
    assertRefused(await probe(d, a.id, ['kill', pid, 9]), `kill ${pid}`, /No such process|Operation not permitted/);
    assertRefused(await probe(d, a.id, ['ptrace', pid]), `ptrace ${pid}`);
  }
  for (const pid of pids) assert.ok(pidAlive(pid), `daemon process ${pid} died`);
  assert.equal((await d.api('GET', '/v1/sandboxes')).status, 200);
  // Signals to every process it can see (kill -1) only reach its own.
  await d.sh(a.id, 'kill -9 -1; echo after', { timeoutMs: 5000 });
  for (const pid of pids) assert.ok(pidAlive(pid), `daemon process ${pid} died after kill -1`);
  assert.ok(await bSleepRuns(), "b's process died after kill -1 in a");
});

test("a pid seen in another sandbox cannot be signalled", async () => {
  const ps = await d.exec(b.id, ['ps', '-eo', 'pid,args']);
  const line = ps.stdout.split('\n').find((l) => l.includes(`sleep ${bSleep}`));
  assert.ok(line, ps.stdout);
  const innerPid = Number(line.trim().split(/\s+/)[0]);
  // If that number is taken in a by one of a's own processes, pick b's host pid too
  // (under gvisor, b's host processes: its holder, gofer and sentry).
  const mine = await innerPids(a.id);
  const hostPids = GVISOR ? [sandboxInit(d.stateDir, b.id).pid, ...runscProcesses(d.stateDir, b.id).map((p) => p.pid)]
    : [bSleepHost.pid];
  for (const pid of [innerPid, ...hostPids]) {
    if (mine.includes(pid)) continue;
    assertRefused(await probe(d, a.id, ['kill', pid, 9]), `kill ${pid} of b`, /No such process/);
    assertRefused(await probe(d, a.id, ['ptrace', pid]), `ptrace ${pid} of b`);
  }
  assert.ok(await bSleepRuns(), "b's sleep is still running");
});

test('ptrace: pid 1 and other processes refused', async () => {
  assertRefused(await probe(d, a.id, ['ptrace', 1]), 'ptrace 1');
  const sib = await d.sh(a.id, 'sleep 30 </dev/null >/dev/null 2>&1 & echo $!');
  assertRefused(await probe(d, a.id, ['ptrace', sib.stdout.trim()]), 'ptrace of a sibling');
  await d.sh(a.id, `kill ${sib.stdout.trim()}`);
  // Own child: allowed or not, it must not crash anything; seccomp denies ptrace outright here.
  const child = await probe(d, a.id, ['ptrace-child']);
  assert.ok([0, 1].includes(child.exitCode), child.stdout);
  const pv = await d.sh(a.id, 'cat /proc/1/stack 2>&1; cat /proc/1/syscall 2>&1; true');
  assert.doesNotMatch(pv.stdout, /^\[<[0-9a-f]+>\]/m, 'no kernel stack of init');
});

test('no capabilities, no_new_privs, seccomp filter; uid 1000 inside, unprivileged host uid outside', async () => {
  const aSleep = `1000.${Math.floor(Math.random() * 900000) + 100000}`;
  const st = await d.sh(a.id, `cat /proc/self/status; sleep ${aSleep} </dev/null >/dev/null 2>&1 &`);
  const s = st.stdout;
  for (const cap of ['CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb']) {
    assert.match(s, new RegExp(`^${cap}:\\s+0{16}$`, 'm'), `${cap} is empty`);
  }
  assert.match(s, /^NoNewPrivs:\s+1$/m);
  assert.match(s, /^Seccomp:\s+2$/m);
  assert.match(s, /^Uid:\s+1000\s+1000\s+1000\s+1000$/m);
  assert.match(s, /^Gid:\s+1000\s+1000\s+1000\s+1000$/m);
  assert.match(s, /^Groups:\s*$/m, 'no supplementary groups');

  // From the host: the sandbox's processes run as a high, unprivileged uid of the daemon's block.
  const { first, last } = d.uids();
  if (GVISOR) {
    await assertRunscUnprivileged(first, last);
    await d.sh(a.id, `pkill -f 'sleep ${aSleep}'; true`);
    return;
  }
  const aSleepHost = await waitFor(() => {
    const p = processesMatching(`sleep ${aSleep}`);
    return p.length === 1 && p;
  }, { what: "a's sleep on the host" });
  for (const p of [bSleepHost, ...aSleepHost]) {
    const status = fs.readFileSync(`/proc/${p.pid}/status`, 'utf8');
    const uids = /^Uid:\s+(.*)$/m.exec(status)[1].split(/\s+/).map(Number);
    const gids = /^Gid:\s+(.*)$/m.exec(status)[1].split(/\s+/).map(Number);
    for (const u of [...uids, ...gids]) assert.ok(u >= first && u <= last, `host uid/gid ${u} of pid ${p.pid} (the daemon's: ${first}..${last})`);
    assert.match(status, /^CapEff:\s+0{16}$/m);
  }
  // And two sandboxes never share a host uid.
  assert.ok(aSleepHost.every((p) => p.uid !== bSleepHost.uid), `a and b share host uid ${bSleepHost.uid}`);
  const mapA = (await d.exec(a.id, ['cat', '/proc/self/uid_map'])).stdout.trim().split(/\s+/).map(Number);
  const mapB = (await d.exec(b.id, ['cat', '/proc/self/uid_map'])).stdout.trim().split(/\s+/).map(Number);
  assert.ok(mapA[1] >= first && mapA[1] + mapA[2] - 1 <= last && mapB[1] >= first && mapB[1] + mapB[2] - 1 <= last,
    `uid ranges ${mapA} / ${mapB} in the daemon's block ${first}..${last}`);
  assert.ok(mapA[1] + mapA[2] <= mapB[1] || mapB[1] + mapB[2] <= mapA[1], `uid ranges overlap: ${mapA} / ${mapB}`);
  await d.sh(a.id, `pkill -f 'sleep ${aSleep}'; true`);
});

/** Under gvisor the host processes that run a sandbox's programs are runsc's: gofer, sentry
 * and its systrap stubs. They hold a few capabilities (the gofer's file access, the
 * sentry's ptrace of its stubs), but only in a user namespace of their own that maps
 * nothing but the sandbox's own uids of the daemon's block: over the host they are
 * unprivileged. And they run with no_new_privs under seccomp. */
async function assertRunscUnprivileged(first, last) {
  const hostNs = fs.readlinkSync('/proc/self/ns/user');
  const maps = [];
  for (const sb of [a, b]) {
    const procs = runscProcesses(d.stateDir, sb.id);
    assert.ok(procs.some((p) => p.cmdline.startsWith('runsc-sandbox')) && procs.some((p) => p.cmdline.startsWith('runsc-gofer')),
      `runsc's processes of ${sb.id}: ${procs.map((p) => p.cmdline.slice(0, 30))}`);
    for (const p of procs) {
      const uids = /^Uid:\s+(.*)$/m.exec(p.status)[1].split(/\s+/).map(Number);
      const gids = /^Gid:\s+(.*)$/m.exec(p.status)[1].split(/\s+/).map(Number);
      for (const u of [...uids, ...gids]) assert.ok(u >= first && u <= last, `host uid/gid ${u} of ${p.pid} (the daemon's: ${first}..${last})`);
      assert.match(p.status, /^NoNewPrivs:\s+1$/m, `${p.pid} ${p.cmdline.slice(0, 30)}`);
      assert.match(p.status, /^Seccomp:\s+2$/m, `${p.pid} ${p.cmdline.slice(0, 30)}`);
      // The shim (docs/gvisor.md) is the sandbox root's host uid with no capability at all,
      // under the sandbox's seccomp filter, in the host's user namespace.
      if (p.cmdline === 'runtime-shim') {
        for (const c of ['CapPrm', 'CapEff', 'CapBnd', 'CapAmb']) assert.match(p.status, new RegExp(`^${c}:\\s+0{16}$`, 'm'), `the shim's ${c}`);
        continue;
      }
      assert.notEqual(fs.readlinkSync(`/proc/${p.pid}/ns/user`), hostNs, `${p.pid} is in the host's user namespace`);
      const map = fs.readFileSync(`/proc/${p.pid}/uid_map`, 'utf8').trim().split('\n').map((l) => l.trim().split(/\s+/).map(Number));
      for (const [, out, n] of map) assert.ok(out >= first && out + n - 1 <= last, `${p.pid} maps ${out}+${n}, outside ${first}..${last}`);
      if (p.cmdline.startsWith('runsc-sandbox')) maps.push(map);
    }
  }
  // And two sandboxes never share a host uid.
  const [[[, ma, na]], [[, mb, nb]]] = maps;
  assert.ok(ma + na <= mb || mb + nb <= ma, `uid ranges overlap: ${ma}+${na} / ${mb}+${nb}`);
}

test('the init of the sandbox is unprivileged on the host too', async () => {
  const inits = processesMatching('runtime-init').filter((p) => p.ppid === d.proc.pid);
  const { first, last } = d.uids();
  assert.ok(inits.length >= 2, 'one init per sandbox');
  for (const p of inits) {
    assert.ok(p.uid >= first && p.uid <= last, `init ${p.pid} runs as host uid ${p.uid} (the daemon's: ${first}..${last})`);
    assert.match(p.status, /^CapEff:\s+0{16}$/m);
    assert.match(p.status, /^NoNewPrivs:\s+1$/m);
  }
});

// pid 1 execs runtime-init (src/sandbox/init/runtime-init.c) once the sandbox is set up: a
// fork of the keeper that stayed pid 1 kept its own copy of every keeper page rewritten
// after the fork, about 1 MiB a sandbox (2-3 MiB Rss). More creates must not grow it.
test('each sandbox\'s init is the few-page runtime-init, not a copy of the keeper', async () => {
  const more = [];
  for (let i = 0; i < 3; i++) more.push((await d.api('POST', '/v1/sandboxes', {})).body.id);
  try {
    const inits = processesMatching('runtime-init').filter((p) => p.ppid === d.proc.pid);
    assert.ok(inits.length >= 5, `one init per sandbox, found ${inits.length}`);
    for (const p of inits) {
      assert.equal(fs.readFileSync(`/proc/${p.pid}/comm`, 'utf8').trim(), 'runtime-init');
      const rss = Number(/^Rss:\s+(\d+) kB$/m.exec(fs.readFileSync(`/proc/${p.pid}/smaps_rollup`, 'utf8'))[1]);
      assert.ok(rss <= 128, `init ${p.pid} has ${rss} KiB resident: it is not runtime-init`);
    }
    // Still pid 1's work: an orphan that exits is reaped, not left a zombie.
    const r = await d.sh(a.id, '(true &); (sleep 0.1 &); sleep 0.6; grep -l "^State:.*Z" /proc/[0-9]*/status; true');
    assert.equal(r.stdout.trim(), '', `zombies left in the sandbox: ${r.stdout}`);
  } finally {
    for (const id of more) await d.api('DELETE', `/v1/sandboxes/${id}`);
  }
});

test('exec gets only stdin, stdout and stderr: no inherited descriptors', async () => {
  const r = await d.sh(a.id, 'ls /proc/$/fd');
  const fds = r.stdout.trim().split(/\s+/).map(Number);
  assert.deepEqual(fds.filter((fd) => fd > 2), [], `descriptors beyond 0-2 leaked into the sandbox: ${fds}`);
  const links = await d.sh(a.id, 'for f in /proc/$$/fd/*; do readlink $f; done');
  assert.ok(!links.stdout.includes(d.stateDir) && !/socket:/.test(links.stdout.replace(/pipe:\[\d+\]/g, '')),
    `descriptors: ${links.stdout}`);
});
