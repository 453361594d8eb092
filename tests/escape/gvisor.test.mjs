// Issue 26: what the gvisor driver promises beyond the ns driver's, seen from the host.
//   - A gvisor sandbox's programs run on gVisor's kernel: uname -r and /proc/version inside
//     answer gVisor's, an ns sandbox's the host's.
//   - Its programs are no host processes: a command line run in it never appears in the
//     host's process table; the sandbox's cgroup holds only runsc's processes (gofer,
//     sentry and its systrap stubs) and the holder (runtime-init).
//   - Nothing is left behind (cgroups of every controller, runsc-* ones included; mounts
//     naming the state dir or runsc's null-netns; processes; loop devices; sandbox
//     directories) by a failed create, by kill -9 of runsc's sentry, or by kill -9 of the
//     daemon's process group mid-create followed by a restart on the same state dir.
//   - A restarted daemon re-adopts a running gvisor sandbox (the same processes) and a
//     paused one, which survives frozen and wakes.
// Each sandbox here names its driver, so this file runs once, in the ns pass of make check;
// without runsc it is skipped, and fails under RUNTIME_REQUIRE_ALL (CI).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import {
  DRIVER, RUNTIMED, RUNSC, cgroupDirs, delay, gvisorSkip, hostProcesses, insideProcesses, instanceName, isRoot,
  loopDevicesInto, mountsOf, pidAlive, processesMatching, readOr, runscProcesses, sandboxHostProcesses,
  sandboxInit, startDaemon, stopDaemon, token, waitFor,
} from '../e2e/lib.mjs';
import { Client, StreamableHTTPClientTransport } from '../mcp/lib.mjs';

const skip = !isRoot() ? 'needs root (runtimed does)'
  : DRIVER === 'gvisor' ? "each sandbox here names its driver: the file runs in make check's ns pass"
    : gvisorSkip(); // under RUNTIME_REQUIRE_ALL a missing runsc throws: the file fails

let d;
before(async () => {
  if (skip) return;
  d = await startDaemon({ prefix: 'runtime-gvisor-' });
});
after(async () => {
  await stopDaemon(d);
});

const gvisor = (spec = {}) => d.create({ isolation: 'gvisor', ...spec });
const unique = () => `1234.${Math.floor(Math.random() * 900000) + 100000}`;

async function status(id) {
  const r = await d.api('GET', `/v1/sandboxes/${id}`);
  assert.equal(r.status, 200, r.text);
  return r.body.status;
}

/** Whether sandbox id is down and done with it: status stopped or failed, and its state no
 * longer "stopping" (an rm meanwhile is refused with 409). */
async function ended(id) {
  const r = await d.api('GET', `/v1/sandboxes/${id}`);
  assert.equal(r.status, 200, r.text);
  return ['stopped', 'failed'].includes(r.body.status) && ['stopped', 'failed'].includes(r.body.state);
}

// ---------------------------------------------------------------- the kernel

/** A process's niceness: field 19 of /proc/PID/stat (after the command's parentheses). */
function niceness(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
}

test("uname -r and /proc/version answer gVisor's kernel in a gvisor sandbox, the host's in an ns one", { skip }, async () => {
  const hostVersion = fs.readFileSync('/proc/version', 'utf8').trim();
  const ask = async (sb) => {
    const r = await d.sh(sb.id, 'uname -r; cat /proc/version; python3 -c "import os; print(os.uname().release)"');
    assert.equal(r.exitCode, 0, r.stderr);
    const [release, version, syscall] = r.stdout.trim().split('\n');
    return { release, version, syscall };
  };
  const g = await ask(await gvisor());
  assert.notEqual(g.release, os.release(), "gvisor: uname -r is the host's");
  assert.match(g.release, /gvisor/i, `gvisor: uname -r is ${g.release}`);
  assert.equal(g.syscall, g.release, 'uname(2) from python says the same');
  assert.match(g.version, /gvisor/i, `gvisor: /proc/version is ${g.version}`);
  assert.notEqual(g.version, hostVersion);
  assert.ok(!g.version.includes(os.release()), `gvisor: /proc/version names the host's release: ${g.version}`);
  const n = await ask(await d.create({ isolation: 'ns' }));
  assert.equal(n.release, os.release(), "ns: uname -r is the host's");
  assert.equal(n.syscall, os.release());
  assert.equal(n.version, hostVersion, "ns: /proc/version is the host's");
});

// ---------------------------------------------------------------- the host's process table

/** Host processes whose command line contains needle, read straight from /proc/PID/cmdline. */
function hostCmdlinesWith(needle) {
  const found = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const c = readOr(`/proc/${name}/cmdline`, null, null);
    if (c && c.includes(needle)) found.push(`${name}: ${c.toString().replaceAll('\0', ' ')}`);
  }
  return found;
}

test("a gvisor sandbox's program never appears in the host's process table; its cgroup holds only runsc's processes and the shim",
  { skip }, async () => {
    const sb = await gvisor();
    const arg = unique();
    await d.sh(sb.id, `sleep ${arg} </dev/null >/dev/null 2>&1 &`);
    const inside = await waitFor(async () => {
      const p = await insideProcesses(d, sb.id, `sleep ${arg}`);
      return p.length === 1 && p;
    }, { what: `"sleep ${arg}" in the sandbox` });
    assert.ok(inside[0].pid < 100, `a pid of gVisor's: ${inside[0].pid}`);
    // Its host side: the holder and runsc's processes, nothing else.
    const procs = sandboxHostProcesses(d.stateDir, sb.id);
    const holder = procs.filter((p) => p.cmdline === 'runtime-init');
    assert.equal(holder.length, 1, `one holder: ${procs.map((p) => p.cmdline.slice(0, 30))}`);
    assert.equal(holder[0].ppid, d.proc.pid, "the holder is the keeper's child");
    const sentry = procs.filter((p) => p.cmdline.startsWith('runsc-sandbox '));
    const gofer = procs.filter((p) => p.cmdline.startsWith('runsc-gofer '));
    assert.equal(sentry.length, 1, 'one sentry');
    assert.equal(gofer.length, 1, 'one gofer');
    // They run the sandbox's programs: at an ns sandbox's programs' niceness, not the keeper's.
    for (const p of [...sentry, ...gofer]) assert.equal(niceness(p.pid), 0, `${p.cmdline.slice(0, 40)}'s niceness`);
    const byPid = new Map(hostProcesses().map((p) => [p.pid, p]));
    const underSentry = (p) => {
      for (let q = p; q; q = byPid.get(q.ppid)) if (q.pid === sentry[0].pid) return true;
      return false;
    };
    // Beside them the shim, which carries the programs' stdio from the agent (docs/gvisor.md).
    const shim = procs.filter((p) => p.cmdline === 'runtime-shim');
    assert.equal(shim.length, 1, 'one shim');
    assert.equal(fs.readlinkSync(`/proc/${shim[0].pid}/exe`), '/memfd:runtime-shim (deleted)');
    for (const p of procs) {
      if (p === holder[0] || p === shim[0]) continue;
      assert.equal(fs.readlinkSync(`/proc/${p.pid}/exe`), RUNSC, `${p.pid} (${p.cmdline.slice(0, 40)}) is runsc`);
      // The sentry's systrap stubs: runsc, with no command line of their own, under the sentry.
      assert.ok(p === gofer[0] || p === sentry[0] || (p.cmdline === '' && underSentry(p)),
        `${p.pid} "${p.cmdline.slice(0, 60)}" (parent ${p.ppid}) is neither runsc's gofer, sentry nor a stub of it`);
      for (const a of [arg, 'sleep']) assert.ok(!p.cmdline.includes(a), `${p.pid}: ${p.cmdline}`);
    }
    // A program run by exec, its command line scanned while it runs (the agent is given it
    // in a frame, never on a host command line).
    const arg2 = unique();
    const running = d.exec(sb.id, ['sh', '-c', `sleep ${arg2} & wait; true`], { timeoutMs: 20000 }).catch((e) => e);
    await waitFor(async () => (await insideProcesses(d, sb.id, `sleep ${arg2}`)).some((p) => p.cmdline.startsWith('sleep ')),
      { what: `"sleep ${arg2}" in the sandbox` });
    for (let i = 0; i < 20; i++) {
      assert.deepEqual(hostCmdlinesWith(arg), [], 'the background sleep is on the host');
      assert.deepEqual(hostCmdlinesWith(arg2), [], "the exec's program is on the host");
      await delay(25); // scans spread over half a second, not a synchronisation
    }
    // The exec adds nothing on the host: the agent inside starts it (docs/gvisor.md).
    const added = sandboxHostProcesses(d.stateDir, sb.id).filter((p) => !procs.some((q) => q.pid === p.pid));
    // Processes with no command line are the sentry's systrap stubs: a new address space
    // inside may bring one. Anything else would be the program itself on the host.
    assert.deepEqual(added.filter((p) => p.cmdline !== ''), [], 'the exec added a host process');
    // The control: the same program in an ns sandbox is a host process under its command line.
    const ns = await d.create({ isolation: 'ns' });
    const arg3 = unique();
    await d.sh(ns.id, `sleep ${arg3} </dev/null >/dev/null 2>&1 &`);
    await waitFor(() => hostCmdlinesWith(arg3).length === 1, { what: 'the ns sandbox\'s sleep on the host' });
    await d.sh(sb.id, `pkill -f 'sleep ${arg2}'; true`);
    await running;
  });

// ---------------------------------------------------------------- leftovers

/** Ids of sandboxes this daemon made or tried to: created by the tests, named in its state
 * dir (now or seen earlier: `seen`), or in its log. */
function knownIds(seen = new Set()) {
  for (const id of d.sandboxes) seen.add(id);
  for (const n of readdirOr(path.join(d.stateDir, 'sandboxes'))) seen.add(n);
  for (const m of d.log().matchAll(/\bsandbox ([0-9a-f]{12})\b/g)) seen.add(m[1]);
  return seen;
}

function readdirOr(dir) {
  try {
    return fs.readdirSync(dir);
  } catch {
    return [];
  }
}

/** What this daemon's sandboxes hold on the host, as text, for comparison: its cgroups in
 * every controller, runsc-* cgroups naming one of its ids (top level and under runtime/),
 * mounts naming its state dir or a null-netns of runsc's, processes naming its state dir or
 * in one of its cgroups (the daemon's own aside), loop devices onto its files, and sandbox
 * directories in its state dir. */
function leftovers(ids) {
  const tag = `${instanceName(d.stateDir)}-`;
  const real = fs.realpathSync(d.stateDir);
  const runscCgroups = [];
  for (const ctrl of readdirOr('/sys/fs/cgroup')) {
    for (const base of [path.join('/sys/fs/cgroup', ctrl), path.join('/sys/fs/cgroup', ctrl, 'runtime')]) {
      for (const n of readdirOr(base)) {
        if (n.startsWith('runsc') && [...ids].some((id) => n.includes(id))) runscCgroups.push(path.join(base, n));
      }
    }
  }
  const keeper = d.proc && !d.exited ? d.proc.pid : -1;
  const daemon = new Set(d.proc && !d.exited ? d.daemonPids() : []);
  const processes = hostProcesses().filter((p) => p.state !== 'Z' && !daemon.has(p.pid) &&
    !(p.ppid === keeper && p.cmdline.startsWith(RUNTIMED)) &&
    (p.cmdline.includes(real) || p.cmdline.includes(d.stateDir) || readOr(`/proc/${p.pid}/cgroup`, '').includes(tag)))
    .map((p) => `${p.pid} ${p.cmdline.slice(0, 100)}`);
  const mountinfo = readOr('/proc/self/mountinfo', '').split('\n');
  return {
    cgroups: [...cgroupDirs(d.stateDir), ...runscCgroups].sort(),
    mounts: [...new Set([...mountsOf(d.stateDir),
      ...mountinfo.filter((l) => l.includes('null-netns') && [...ids].some((id) => l.includes(id)))])],
    processes,
    loops: loopDevicesInto(d.stateDir),
    dirs: readdirOr(path.join(d.stateDir, 'sandboxes')),
  };
}

const NOTHING = { cgroups: [], mounts: [], processes: [], loops: [], dirs: [] };

/** Waits until nothing of the daemon's sandboxes is left (bounded), and says what is. */
async function assertNothingLeft(ids, what) {
  let left;
  try {
    await waitFor(() => {
      left = leftovers(knownIds(ids));
      return Object.values(left).every((v) => v.length === 0);
    }, { timeoutMs: 5000, what });
  } catch {
    assert.deepEqual(left, NOTHING, `${what}: left behind`);
  }
}

/** The live runsc-sandbox (sentry) process of this daemon that `before` did not hold. */
function newSentry(before) {
  return hostProcesses().find((p) => p.state !== 'Z' && !before.has(p.pid) && p.cmdline.startsWith('runsc-sandbox ') &&
    p.cmdline.includes(fs.realpathSync(d.stateDir)));
}

test("the agent is one file for every gvisor sandbox: each root binds the daemon's copy read-only, no tmpfs copy each", { skip }, async () => {
  const [a, b] = [await gvisor(), await gvisor()];
  const shared = fs.readFileSync(path.join(d.stateDir, 'runtime-agent'));
  for (const sb of [a, b]) {
    const holder = sandboxInit(d.stateDir, sb.id);
    const line = readOr(`/proc/${holder.pid}/mountinfo`, '').split('\n')
      .find((l) => l.split(' ')[4]?.endsWith(`/sandboxes/${sb.id}/root/.runtime-agent`));
    assert.ok(line, `a mount at ${sb.id}'s root/.runtime-agent`);
    assert.match(line.split(' ')[5], /^ro,/, `read-only: ${line}`);
    assert.doesNotMatch(line.split(' - ')[1], /^tmpfs /, `not the root's tmpfs: ${line}`);
    // The same bytes as the daemon's copy, seen from inside; and it cannot be written.
    const sum = await d.exec(sb.id, ['sha256sum', '/.runtime-agent']);
    assert.equal(sum.stdout.split(' ')[0], createHash('sha256').update(shared).digest('hex'));
    const w = await d.exec(sb.id, ['sh', '-c', 'echo x >> /.runtime-agent']);
    assert.notEqual(w.exitCode, 0, 'the agent cannot be written from inside');
  }
  for (const sb of [a, b]) assert.equal((await d.remove(sb.id)).status, 200);
});

test('a failed create leaves nothing behind (its sentry killed while it is created)', { skip }, async (t) => {
  await d.removeAll();
  const ids = knownIds();
  assert.deepEqual(leftovers(ids), NOTHING, 'before');
  // runsc create starts the sentry; kill it the moment it appears, so that the create's
  // runsc start (or the check after it) fails. If the create still won the race, the
  // sandbox is removed instead: either way nothing may stay.
  const before_ = new Set(hostProcesses().map((p) => p.pid));
  let answer = null;
  const req = d.api('POST', '/v1/sandboxes', { isolation: 'gvisor' }).then((r) => { answer = r; }, (e) => { answer = e; });
  let killed = null;
  const deadline = Date.now() + 20000;
  while (!killed && !answer && Date.now() < deadline) {
    const s = newSentry(before_);
    if (s) {
      process.kill(s.pid, 'SIGKILL');
      killed = s;
    } else {
      await delay(2); // a poll of /proc while the create runs
    }
  }
  await req;
  assert.ok(killed, `no sentry appeared during the create: ${answer?.status} ${answer?.text ?? answer}`);
  knownIds(ids);
  if (answer.status === 201 || answer.status === 200) {
    t.diagnostic(`the create finished before its sentry was killed; the sandbox is ${await status(answer.body.id)}`);
    d.track(answer.body.id);
    await waitFor(() => ended(answer.body.id),
      { what: 'the sandbox whose sentry was killed to be reported stopped' });
    assert.equal((await d.remove(answer.body.id)).status, 200);
  } else {
    t.diagnostic(`the create failed: ${answer.status} ${answer.text}`);
    assert.ok(answer.status >= 500, `a failed create answers an error: ${answer.status} ${answer.text}`);
    // Whatever it made is gone, and the daemon lists no such sandbox (or lists it failed).
    const list = (await d.api('GET', '/v1/sandboxes')).body.data;
    for (const s of list) {
      assert.notEqual(s.status, 'running', `a sandbox is listed running after the failed create: ${JSON.stringify(s)}`);
      await d.remove(s.id);
    }
  }
  await assertNothingLeft(ids, 'after the failed create');
  // The daemon still creates gvisor sandboxes.
  const ok = await gvisor();
  assert.equal((await d.exec(ok.id, ['echo', 'ok'])).stdout, 'ok\n');
  await d.remove(ok.id);
  await assertNothingLeft(ids, 'after the next sandbox');
});

test("kill -9 of a running sandbox's sentry: it is reported stopped, and rm leaves nothing", { skip }, async () => {
  await d.removeAll();
  const ids = knownIds();
  const sb = await gvisor();
  ids.add(sb.id);
  await d.sh(sb.id, `sleep ${unique()} </dev/null >/dev/null 2>&1 &`);
  const [sentry] = runscProcesses(d.stateDir, sb.id).filter((p) => p.cmdline.startsWith('runsc-sandbox '));
  assert.ok(sentry, 'the sentry on the host');
  // The control: what leftovers() looks for, a running sandbox has.
  const has = leftovers(ids);
  for (const k of ['cgroups', 'processes', 'loops', 'dirs']) assert.ok(has[k].some((x) => x.includes(sb.id) || k === 'processes'), `${k} of a running sandbox: ${has[k]}`);
  assert.ok(has.processes.length >= 3, `holder, gofer and sentry: ${has.processes}`);
  process.kill(sentry.pid, 'SIGKILL');
  await waitFor(() => ended(sb.id),
    { what: 'the sandbox to be reported stopped after its sentry was killed' });
  // Never "running" with a dead exec: exec fails, or brings the sandbox back working.
  const r = await d.api('POST', `/v1/sandboxes/${sb.id}/exec`, { argv: ['echo', 'ok'] });
  if (r.status === 200) assert.equal(r.body.stdout, 'ok\n', `exec after the kill: ${r.text}`);
  else assert.notEqual(await status(sb.id), 'running', r.text);
  // What it ran is gone from the host too (a stopped sandbox keeps its files only).
  await waitFor(() => sandboxHostProcesses(d.stateDir, sb.id).length === 0 || r.status === 200,
    { what: "the stopped sandbox's processes to be gone" });
  const rm = await d.remove(sb.id);
  assert.equal(rm.status, 200, `rm: ${rm.text} (exec after the kill: ${r.status} ${r.text})`);
  await assertNothingLeft(ids, 'after rm of the sandbox whose sentry was killed');
});

test("kill -9 of the daemon's process group mid-create, then a restart on the same state dir: nothing unknown stays, and rm leaves nothing",
  { skip }, async (t) => {
    await d.removeAll();
    const ids = knownIds();
    const running = await gvisor(); // one that exists before the crash, to be re-adopted or cleaned
    ids.add(running.id);
    const before_ = new Set(hostProcesses().map((p) => p.pid));
    const req = d.api('POST', '/v1/sandboxes', { isolation: 'gvisor' }).catch((e) => e);
    // Mid-create: runsc create has started the new sandbox's sentry.
    await waitFor(() => newSentry(before_), { timeoutMs: 20000, intervalMs: 2, what: "the new sandbox's sentry" });
    knownIds(ids);
    const killed = await d.killGroup();
    t.diagnostic(`killed ${killed.length} processes of the daemon's group`);
    await req;
    knownIds(ids);
    await d.start();
    knownIds(ids);
    // The restarted daemon swept what no sandbox of its owns: all that is left belongs to a
    // sandbox it lists (re-adopted, or stopped with its files).
    const list = (await d.api('GET', '/v1/sandboxes')).body.data;
    const listed = new Set(list.map((s) => s.id));
    t.diagnostic(`listed after the restart: ${list.map((s) => `${s.id} ${s.status}`).join(', ')}`);
    assert.ok(listed.has(running.id), 'the sandbox made before the crash is still listed');
    const left = leftovers(ids);
    const unknown = Object.entries(left).flatMap(([k, v]) => v.filter((x) => ![...listed].some((id) => x.includes(id) ||
      (k === 'processes' && belongsTo(x, listed)))).map((x) => `${k}: ${x}`));
    assert.deepEqual(unknown, [], 'left behind by no sandbox the daemon knows');
    for (const id of listed) {
      const s = await status(id);
      if (s === 'running') {
        const r = await d.exec(id, ['echo', 'ok']);
        assert.equal(r.stdout, 'ok\n', `a sandbox listed running execs after the restart: ${id}`);
      }
    }
    for (const id of listed) assert.equal((await d.remove(id)).status, 200);
    await assertNothingLeft(ids, 'after rm of everything the restarted daemon lists');
  });

/** Whether a leftover process line ("PID cmdline") is in the cgroup of a listed sandbox. */
function belongsTo(line, listed) {
  const pid = Number(line.split(' ')[0]);
  const cg = readOr(`/proc/${pid}/cgroup`, '');
  return [...listed].some((id) => cg.includes(`-${id}`));
}

// ---------------------------------------------------------------- restarts

test('kill -9 of the whole process group (its holder and shim too) and a restart: the gvisor sandbox is built again on its workspace', { skip }, async () => {
  const sb = await gvisor({ diskMiB: 64 });
  const marker = unique();
  await d.sh(sb.id, `echo ${marker} > /workspace/f`);
  await d.killGroup(); // as systemctl kill -s KILL: runsc's record of the container stays behind
  await d.start();
  const cat = await d.api('POST', `/v1/sandboxes/${sb.id}/exec`, { argv: ['cat', '/workspace/f'] });
  assert.equal(cat.status, 200, `exec works after the restart: ${cat.text}`);
  assert.equal(cat.body.stdout, `${marker}\n`);
  assert.equal((await d.remove(sb.id)).status, 200);
});

test('a restarted daemon re-adopts a running gvisor sandbox: exec works, the same processes', { skip }, async () => {
  const sb = await gvisor();
  const marker = token('kept');
  const arg = unique();
  await d.sh(sb.id, `echo ${marker} > /workspace/f; sleep ${arg} </dev/null >/dev/null 2>&1 &`);
  const [sleep] = await waitFor(async () => {
    const p = await insideProcesses(d, sb.id, `sleep ${arg}`);
    return p.length === 1 && p;
  }, { what: 'the sleep in the sandbox' });
  const host = sandboxHostProcesses(d.stateDir, sb.id).map((p) => p.pid).sort();
  for (const how of ['SIGTERM', 'SIGKILL']) {
    if (how === 'SIGTERM') await d.stop();
    else await d.kill9();
    assert.ok(host.every((p) => pidAlive(p)), `the sandbox runs on without the daemon (${how})`);
    await d.start();
    assert.equal(await status(sb.id), 'running', `after ${how} and a restart`);
    assert.match(d.log(), /re-adopt/i, 'the daemon says it re-adopted the sandbox');
    const cat = await d.exec(sb.id, ['cat', '/workspace/f']);
    assert.equal(cat.stdout, `${marker}\n`, `exec after ${how} and a restart: ${cat.stderr}`);
    assert.deepEqual(await insideProcesses(d, sb.id, `sleep ${arg}`), [sleep], 'the same sleep, not a new sandbox');
    assert.deepEqual(sandboxHostProcesses(d.stateDir, sb.id).map((p) => p.pid).filter((p) => host.includes(p)).sort(), host,
      `the same holder, gofer and sentry after ${how} and a restart`);
  }
  assert.equal((await d.remove(sb.id)).status, 200);
  await waitFor(() => host.every((p) => !pidAlive(p)), { timeoutMs: 5000, what: "the sandbox's processes to go with rm" });
});

test('a paused (frozen) gvisor sandbox survives a restart of the daemon, paused, and wakes', { skip }, async () => {
  const sb = await gvisor();
  const arg = unique();
  await d.sh(sb.id, `sleep ${arg} </dev/null >/dev/null 2>&1 &`);
  const [sleep] = await waitFor(async () => {
    const p = await insideProcesses(d, sb.id, `sleep ${arg}`);
    return p.length === 1 && p;
  }, { what: 'the sleep in the sandbox' });
  const host = sandboxHostProcesses(d.stateDir, sb.id).map((p) => p.pid).sort();
  const p = await d.api('POST', `/v1/sandboxes/${sb.id}/pause`);
  assert.equal(p.status, 200, p.text);
  assert.equal(p.body.status, 'paused', p.text);
  const freezer = cgroupDirs(d.stateDir).find((c) => c.includes('/freezer/') && c.endsWith(`-${sb.id}`));
  const frozen = () => (freezer ? readOr(path.join(freezer, 'freezer.state'), '').trim()
    : readOr(path.join(cgroupDirs(d.stateDir).find((c) => c.endsWith(`-${sb.id}`)), 'cgroup.freeze'), '').trim());
  await waitFor(() => ['FROZEN', '1'].includes(frozen()), { what: "the sandbox's cgroup to freeze" });
  for (const how of ['SIGTERM', 'SIGKILL']) {
    if (how === 'SIGTERM') await d.stop();
    else await d.kill9();
    await d.start();
    assert.equal(await status(sb.id), 'paused', `still paused after ${how} and a restart`);
    assert.ok(['FROZEN', '1'].includes(frozen()), `still frozen after ${how} and a restart: ${frozen()}`);
    assert.ok(host.every((x) => pidAlive(x)), `its processes survive ${how} and a restart`);
  }
  const w = await d.api('POST', `/v1/sandboxes/${sb.id}/wake`);
  assert.equal(w.status, 200, w.text);
  assert.equal(w.body.status, 'running', w.text);
  assert.equal((await d.exec(sb.id, ['echo', 'awake'])).stdout, 'awake\n');
  assert.deepEqual(await insideProcesses(d, sb.id, `sleep ${arg}`), [sleep], 'the same sleep after the wake');
  assert.deepEqual(sandboxHostProcesses(d.stateDir, sb.id).map((x) => x.pid).filter((x) => host.includes(x)).sort(), host);
  assert.equal((await d.remove(sb.id)).status, 200);
});

// ---------------------------------------------------------------- out of memory

// gVisor keeps no memory limit of its own: a program that exhausts the sandbox's memory
// ends the whole sandbox (the host's OOM killer takes runsc's sentry). It comes back by
// itself, as an ns sandbox is still running after the kernel killed such a program, and
// its MCP servers with it, at the same URL; its stopped event says why.
const ECHO_SERVER = String.raw`
import readline from 'node:readline';
const send = (m) => process.stdout.write(JSON.stringify({ jsonrpc: '2.0', ...m }) + '\n');
readline.createInterface({ input: process.stdin }).on('line', (line) => {
  const m = JSON.parse(line);
  if (m.id === undefined) return;
  if (m.method === 'initialize') return send({ id: m.id, result: { protocolVersion: m.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'echo', version: '1' } } });
  if (m.method === 'tools/list') return send({ id: m.id, result: { tools: [{ name: 'echo', description: 'Echoes text.', inputSchema: { type: 'object', properties: { text: { type: 'string' } } } }] } });
  if (m.method === 'tools/call') return send({ id: m.id, result: { content: [{ type: 'text', text: m.params.arguments.text }] } });
  send({ id: m.id, error: { code: -32601, message: 'no ' + m.method } });
});
`;

async function mcpReady(id) {
  const r = await d.api('GET', `/v1/sandboxes/${id}/mcp?wait=60`, undefined, { timeoutMs: 90000 });
  assert.equal(r.status, 200, r.text);
  const s = r.body.servers.find((x) => x.name === 'echo');
  assert.equal(s?.status, 'ready', JSON.stringify(r.body.servers));
  return { url: s.url, headers: r.body.headers };
}

async function echoThrough({ url, headers }, text) {
  const c = new Client({ name: 'gvisor-oom', version: '1' });
  await c.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  try {
    const r = await c.callTool({ name: 'echo', arguments: { text } });
    return r.content[0].text;
  } finally {
    await c.close();
  }
}

test('a gvisor sandbox the OOM killer ended starts again by itself, its MCP server at the same URL', { skip }, async () => {
  const sb = await gvisor({ memoryMiB: 128 });
  const put = await d.exec(sb.id, ['sh', '-c', 'cat > /workspace/echo.mjs'], { stdin: ECHO_SERVER });
  assert.equal(put.exitCode, 0, put.stderr);
  const st = await d.api('POST', `/v1/sandboxes/${sb.id}/mcp`, { servers: [{ name: 'echo', command: ['node', '/workspace/echo.mjs'] }] });
  assert.ok([200, 201, 202].includes(st.status), st.text);
  const before = await mcpReady(sb.id);
  assert.equal(await echoThrough(before, 'before'), 'before');

  const oom = await d.exec(sb.id, ['perl', '-e', '$x = "x" x (512*1024*1024); print "ALLOCATED\n"'], { timeoutMs: 60000 });
  assert.doesNotMatch(oom.stdout, /ALLOCATED/);
  let events = [];
  await waitFor(async () => {
    events = (await d.api('GET', `/v1/sandboxes/${sb.id}/events`)).body;
    return events.some((e) => e.kind === 'sandbox.stopped' && e.reason === 'out of memory');
  }, { timeoutMs: 15000, what: 'a stopped event saying "out of memory"' });
  await waitFor(async () => (await status(sb.id)) === 'running', { timeoutMs: 20000, what: 'the sandbox to start again by itself' });
  const after_ = await mcpReady(sb.id);
  assert.equal(after_.url, before.url, 'the same URL');
  assert.equal(await echoThrough(after_, 'after'), 'after');
  assert.equal((await d.remove(sb.id)).status, 200);
});

test('after all of it: nothing of any sandbox is left once they are removed', { skip }, async () => {
  await d.removeAll();
  await assertNothingLeft(knownIds(), 'after every sandbox was removed');
  assert.deepEqual(processesMatching(`sandboxes/`).filter((p) => p.cmdline.includes(d.stateDir)), []);
});
