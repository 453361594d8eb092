// A sandbox's life: run (and --keep), rm with its processes, a daemon crash
// (SIGKILL) and restart, and nothing left on the host at the end.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { startDaemon, stopDaemon, parseMetrics, processesMatching, pidAlive, waitFor, cgroupDirs, loopDevicesInto,
  mountsOf, token, hostProcesses } from './lib.mjs';

const readProcFile = (pid, f) => { try { return fs.readFileSync(`/proc/${pid}/${f}`, 'utf8'); } catch { return ''; } };
const cgroupOf = (pid) => readProcFile(pid, 'cgroup');

let d;
before(async () => {
  d = await startDaemon();
});
after(async () => {
  await stopDaemon(d);
});

async function listIds() {
  const r = await d.api('GET', '/v1/sandboxes');
  assert.equal(r.status, 200);
  return r.body.data.map((s) => s.id);
}

// A unique sleep duration makes its process findable on the host: `sleep 1000.NNN`.
function uniqueSleep() {
  return `1000.${Math.floor(Math.random() * 900000) + 100000}`;
}

test('sandbox run -- /bin/echo ready prints ready and leaves no sandbox', async () => {
  const before_ = await listIds();
  const r = await d.cli(['sandbox', 'run', '--', '/bin/echo', 'ready']);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, 'ready\n');
  assert.deepEqual((await listIds()).sort(), before_.sort(), 'no sandbox left');

  const fail = await d.cli(['sandbox', 'run', '--', 'sh', '-c', 'echo oops >&2; exit 5']);
  assert.equal(fail.code, 5, 'run exits with the command status');
  assert.match(fail.stderr, /oops/);
  assert.deepEqual((await listIds()).sort(), before_.sort(), 'no sandbox left after a failure');

  const stdin = await d.cli(['sandbox', 'run', '--', 'cat'], { input: 'piped' });
  assert.equal(stdin.stdout, 'piped');

  const to = await d.cli(['sandbox', 'run', '--timeout', '1', '--', 'sleep', '30']);
  assert.equal(to.code, 124);
  assert.deepEqual((await listIds()).sort(), before_.sort(), 'no sandbox left after a timeout');
});

test('sandbox run --keep keeps the sandbox and prints its id on stderr', async () => {
  const name = token('keep').slice(0, 24);
  const r = await d.cli(['sandbox', 'run', '--keep', '--name', name, '--label', 'kept=yes', '--',
    'sh', '-c', 'echo kept > /workspace/k; echo done']);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, 'done\n');
  const g = await d.api('GET', `/v1/sandboxes/${name}`);
  assert.equal(g.status, 200, g.text);
  d.track(g.body.id);
  assert.ok(r.stderr.includes(g.body.id), `the id is on stderr: ${r.stderr}`);
  assert.deepEqual(g.body.labels, { kept: 'yes' });
  const cat = await d.exec(name, ['cat', '/workspace/k']);
  assert.equal(cat.stdout, 'kept\n');
});

test('rm removes the sandbox and kills its processes on the host', async () => {
  const s = await d.create({});
  const arg = uniqueSleep();
  const bg = await d.sh(s.id, `sleep ${arg} </dev/null >/dev/null 2>&1 & setsid sleep ${arg} </dev/null >/dev/null 2>&1 & echo started`);
  assert.equal(bg.stdout, 'started\n');
  const procs = await waitFor(() => {
    const p = processesMatching(`sleep ${arg}`);
    return p.length === 2 && p;
  }, { what: `two "sleep ${arg}" processes on the host` });
  const rm = await d.cli(['sandbox', 'rm', s.id]);
  assert.equal(rm.code, 0, rm.stderr);
  assert.match(rm.stdout, new RegExp(s.id));
  d.sandboxes.delete(s.id);
  // rm has returned: the processes must be gone already (allow the reaper a moment).
  await waitFor(() => procs.every((p) => !pidAlive(p.pid)), { timeoutMs: 2000, what: 'the sleeps to be gone' });
  assert.deepEqual(processesMatching(`sleep ${arg}`), []);
  assert.equal((await d.api('GET', `/v1/sandboxes/${s.id}`)).status, 404);
  assert.deepEqual(cgroupDirs(d.stateDir).filter((c) => c.endsWith(s.id)), [], 'its cgroups are gone');
  assert.deepEqual(loopDevicesInto(d.stateDir).filter((l) => l.includes(s.id)), [], 'its loop device is detached');
});

test('/workspace and running processes survive kill -9 of the daemon and a restart', async () => {
  const s = await d.create({ name: 'survivor', labels: { keep: 'me' } });
  const marker = token('persist');
  const arg = uniqueSleep();
  const w = await d.sh(s.id, `echo ${marker} > /workspace/persist.txt; sleep ${arg} </dev/null >/dev/null 2>&1 & echo ok`);
  assert.equal(w.stdout, 'ok\n');
  const [sleeper] = await waitFor(() => {
    const p = processesMatching(`sleep ${arg}`);
    return p.length === 1 && p;
  }, { what: 'the background sleep' });

  const killed = await d.kill9();
  assert.ok(killed.length >= 2, `killed keeper and server: ${killed}`);
  const down = await d.api('GET', '/v1/sandboxes').catch((e) => e);
  assert.ok(down instanceof Error, 'the API is down');

  await d.start();
  const list = await d.api('GET', '/v1/sandboxes');
  const again = list.body.data.find((x) => x.id === s.id);
  assert.ok(again, 'the sandbox is still listed');
  assert.equal(again.name, 'survivor');
  assert.deepEqual(again.labels, { keep: 'me' });
  assert.equal(again.status, 'running');
  const cat = await d.cli(['sandbox', 'exec', 'survivor', '--', 'cat', '/workspace/persist.txt']);
  assert.equal(cat.code, 0, cat.stderr);
  assert.equal(cat.stdout, `${marker}\n`);

  // What happens to a process started before the crash: it is re-adopted (still
  // running, visible inside, and killed by rm like any other).
  assert.ok(pidAlive(sleeper.pid), 'the background process is still running after the restart');
  const ps = await d.exec(s.id, ['ps', '-eo', 'args']);
  assert.ok(ps.stdout.includes(`sleep ${arg}`), `visible inside after the restart:\n${ps.stdout}`);
  assert.match(d.log(), /re-adopt/i, 'the daemon says it re-adopted the sandbox');

  const rm = await d.remove(s.id);
  assert.equal(rm.status, 200);
  await waitFor(() => !pidAlive(sleeper.pid), { timeoutMs: 2000, what: 'the re-adopted sleep to die on rm' });
});

test('SIGTERM stops the daemon cleanly; sandboxes keep running and are re-adopted', async () => {
  const s = await d.create({ diskMiB: 64 });
  const arg = uniqueSleep();
  await d.sh(s.id, `sleep ${arg} </dev/null >/dev/null 2>&1 &`);
  const [sleeper] = await waitFor(() => {
    const p = processesMatching(`sleep ${arg}`);
    return p.length === 1 && p;
  }, { what: 'the background sleep' });
  const exited = await d.stop();
  assert.equal(exited.code, 0, `runtimed exits 0 on SIGTERM: ${JSON.stringify(exited)}\n${d.log()}`);
  assert.ok(pidAlive(sleeper.pid), 'the sandbox process survives a clean stop');
  await d.start();
  const ps = await d.exec(s.id, ['ps', '-eo', 'args']);
  assert.ok(ps.stdout.includes(`sleep ${arg}`), ps.stdout);
  assert.equal((await d.remove(s.id)).status, 200);
  await waitFor(() => !pidAlive(sleeper.pid), { timeoutMs: 2000, what: 'the sleep to die on rm' });
});

test('kill -9 of the whole process group (sandboxes too) and a restart: the sandbox comes back with its /workspace', async () => {
  const s = await d.create({ name: 'pgroup', diskMiB: 64 });
  const marker = token('pg');
  await d.sh(s.id, `echo ${marker} > /workspace/f`);
  // Like `systemctl kill -s KILL`: the keeper's process group, sandbox inits included;
  // the restart comes once all of them are gone.
  const killed = await d.killGroup();
  assert.ok(killed.length >= 3, `keeper, server and the sandbox's init: ${killed}`);
  await d.start();
  const g = await d.api('GET', `/v1/sandboxes/${s.id}`);
  assert.equal(g.status, 200, 'still listed');
  assert.ok(['running', 'stopped', 'failed'].includes(g.body.status), g.body.status);
  const cat = await d.api('POST', `/v1/sandboxes/${s.id}/exec`, { argv: ['cat', '/workspace/f'] });
  assert.equal(cat.status, 200, `exec works after the restart: ${cat.text}`);
  assert.equal(cat.body.stdout, `${marker}\n`);
  assert.equal((await d.remove(s.id)).status, 200);
  assert.deepEqual(cgroupDirs(d.stateDir).filter((c) => c.endsWith(s.id)), []);
  assert.deepEqual(loopDevicesInto(d.stateDir).filter((l) => l.includes(s.id)), []);
});

test('a restart does not mount a workspace image that a loop device still holds: it waits, then says which device', async () => {
  const s = await d.create({ name: 'held', diskMiB: 64 });
  const marker = token('held');
  await d.sh(s.id, `echo ${marker} > /workspace/f`);
  await d.killGroup();
  // What the kernel can leave for a moment after a kill -9 of everything: the image still
  // on a loop device while its last mount goes away. Here it stays until the test lets go.
  const image = path.join(d.stateDir, 'sandboxes', s.id, 'workspace.img');
  const held = spawnSync('losetup', ['--find', '--show', image], { encoding: 'utf8' });
  assert.equal(held.status, 0, held.stderr);
  const dev = held.stdout.trim();
  try {
    await d.start();
    const got = await d.api('GET', `/v1/sandboxes/${s.id}`);
    assert.equal(got.body.status, 'failed', 'it did not start on an image mounted elsewhere');
    assert.match(fs.readFileSync(d.logFile, 'utf8'),
      new RegExp(`sandbox ${s.id} could not be restored: ${dev} still holds the workspace image`));
  } finally {
    spawnSync('losetup', ['--detach', dev]);
  }
  const again = await d.api('POST', `/v1/sandboxes/${s.id}/start`);
  assert.equal(again.status, 200, `once the device let go, it starts: ${again.text}`);
  const cat = await d.api('POST', `/v1/sandboxes/${s.id}/exec`, { argv: ['cat', '/workspace/f'] });
  assert.equal(cat.status, 200, cat.text);
  assert.equal(cat.body.stdout, `${marker}\n`);
  assert.equal((await d.remove(s.id)).status, 200);
  assert.deepEqual(loopDevicesInto(d.stateDir).filter((l) => l.includes(s.id)), []);
});

test('a sandbox whose init is killed on the host is not left "running" with a dead exec', async () => {
  const s = await d.create({ diskMiB: 64 });
  const marker = token('init');
  await d.sh(s.id, `echo ${marker} > /workspace/f`);
  // The sandbox's init: a child of the keeper running as the sandbox's host root.
  const { first, last } = d.uids();
  const init = hostProcesses().find((p) => p.ppid === d.proc.pid && p.uid >= first && p.uid <= last &&
    readProcFile(p.pid, 'status').match(/^NSpid:.*\t1$/m) && cgroupOf(p.pid).includes(s.id));
  assert.ok(init, 'found the init of the sandbox on the host');
  process.kill(init.pid, 'SIGKILL'); // as the OOM killer or an admin would
  await waitFor(() => !pidAlive(init.pid), { what: 'the init to die' });

  // Either the daemon brings the sandbox back (exec works, /workspace intact) or it
  // says the sandbox is not running; never "running" with every exec failing.
  const r = await d.api('POST', `/v1/sandboxes/${s.id}/exec`, { argv: ['cat', '/workspace/f'] });
  const g = await d.api('GET', `/v1/sandboxes/${s.id}`);
  if (r.status === 200) {
    assert.equal(r.body.stdout, `${marker}\n`);
  } else {
    assert.notEqual(g.body.status, 'running', `status is "running" but exec fails: ${r.text}`);
    assert.ok(!/check argv\[0\]/.test(r.text), `the error blames the program, not the dead sandbox: ${r.text}`);
  }
  if (r.status !== 200) {
    await waitFor(async () => (await d.api('GET', `/v1/sandboxes/${s.id}`)).body.state === 'stopped',
      { what: 'it to be stopped' });
    const stopped = await d.api('GET', `/v1/sandboxes/${s.id}`);
    assert.equal(stopped.body.stopReason, 'init process exited', stopped.text);
  }
  assert.equal((await d.remove(s.id)).status, 200);
  await waitFor(() => cgroupDirs(d.stateDir).filter((c) => c.endsWith(s.id)).length === 0,
    { timeoutMs: 3000, what: 'its cgroups to go' });
  assert.deepEqual(loopDevicesInto(d.stateDir).filter((l) => l.includes(s.id)), []);
});

// Runtime Cloud's stopReason: why a stopped sandbox stopped (the SDK's start_failed hint
// points at it), null while it runs.
test('stopReason says why a sandbox stopped, and is null once it runs again', async () => {
  const s = await d.create({});
  assert.equal((await d.api('GET', `/v1/sandboxes/${s.id}`)).body.stopReason, null);
  const st = await d.api('POST', `/v1/sandboxes/${s.id}:stop`);
  assert.equal(st.status, 200, st.text);
  await waitFor(async () => (await d.api('GET', `/v1/sandboxes/${s.id}`)).body.state === 'stopped',
    { what: 'it to be stopped' });
  const got = await d.api('GET', `/v1/sandboxes/${s.id}`);
  assert.equal(got.body.stopReason, 'api', got.text);
  const listed = (await d.api('GET', '/v1/sandboxes?includeStopped=true')).body.data.find((x) => x.id === s.id);
  assert.equal(listed?.stopReason, 'api', 'the list says it too');
  const again = await d.api('POST', `/v1/sandboxes/${s.id}/start`);
  assert.equal(again.status, 200, again.text);
  assert.equal(again.body.stopReason, null, again.text);
  assert.equal((await d.remove(s.id)).status, 200);
});

test('a sandbox created after a restart works, and ids stay unique', async () => {
  const a = await d.create({});
  const r = await d.exec(a.id, ['echo', 'fresh']);
  assert.equal(r.stdout, 'fresh\n');
  const ids = await listIds();
  assert.equal(new Set(ids).size, ids.length);
});

test('after the sandboxes are removed and the daemon stopped, nothing of it is left', async () => {
  // Some sandboxes with processes, files and limits, then the user's teardown.
  const arg = uniqueSleep();
  for (let i = 0; i < 3; i++) {
    const s = await d.create({ memoryMiB: 128, diskMiB: 64 });
    await d.sh(s.id, `echo x > /workspace/f; sleep ${arg} </dev/null >/dev/null 2>&1 &`);
  }
  await waitFor(() => processesMatching(`sleep ${arg}`).length === 3, { what: 'three sleeps' });
  const mid = d.leftovers();
  assert.ok(mid.cgroups.length > 0 && mid.loops.length > 0, 'the probes see live sandboxes (sanity)');

  for (const id of await listIds()) {
    const r = await d.cli(['sandbox', 'rm', id]);
    assert.equal(r.code, 0, r.stderr);
    d.sandboxes.delete(id);
  }
  await d.stop();
  assert.deepEqual(processesMatching(`sleep ${arg}`), [], 'no sandbox process');
  assert.deepEqual(processesMatching(d.stateDir), [], 'no daemon or sandbox process');
  assert.deepEqual(cgroupDirs(d.stateDir), [], 'no cgroup dirs under /sys/fs/cgroup/*/runtime/');
  assert.deepEqual(loopDevicesInto(d.stateDir), [], 'no loop device backed by the state dir');
  assert.deepEqual(mountsOf(d.stateDir), [], 'no mount of the state dir');
  // Start again for after() and any later test.
  await d.start();
});

/** Runs SQL on the daemon's database (python3's sqlite3: no other client is installed). */
function sql(stateDir, statement, ...params) {
  const r = spawnSync('python3', ['-c', `import sqlite3, sys, json
db = sqlite3.connect(sys.argv[1])
rows = db.execute(sys.argv[2], json.loads(sys.argv[3])).fetchall()
db.commit()
print(json.dumps(rows))`, path.join(stateDir, 'db', 'runtime.db'), statement, JSON.stringify(params)],
  { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

// A row the daemon cannot read at a restart (issue 24) is an error in its log naming
// the sandbox, a count in /metrics, and kept as it is: never read as a bill of zero,
// never written over by the next checkpoint.
test('a usage or MCP-state row that cannot be read at restart is reported and kept, not read as zero', async () => {
  const s = await d.create({ name: 'unreadable-rows' });
  const stopped = await d.stop();
  assert.equal(stopped.code, 0, d.log());
  const badUsage = '{"cpuSeconds":"lots","runningHours":1}';
  sql(d.stateDir, 'INSERT OR REPLACE INTO usage (sandbox, created_ms, state) VALUES (?, ?, ?)', s.id, Date.now(),
    badUsage);
  sql(d.stateDir, 'INSERT OR REPLACE INTO mcp (sandbox, state) VALUES (?, ?)', s.id, '{"link": 5}');
  await d.start();

  assert.match(d.log(), new RegExp(`sandbox ${s.id}: its usage row in the store cannot be read ` +
    '\\(cpuSeconds is not a number >= 0\\)'));
  assert.match(d.log(), new RegExp(`sandbox ${s.id}: its mcp row in the store cannot be read`));
  const m = parseMetrics((await d.api('GET', '/metrics')).text);
  assert.equal(m.get('runtime_store_unreadable_rows_total{table="usage"}'), 1);
  assert.equal(m.get('runtime_store_unreadable_rows_total{table="mcp"}'), 1);
  const usage = await d.api('GET', '/v1/usage');
  assert.equal(usage.status, 200, usage.text);
  assert.equal(usage.body.unreadableRows, 1, 'the listing says a row is left out');
  assert.ok(!usage.body.sandboxes.some((x) => x.sandbox === s.id), 'not listed as zero');
  assert.equal((await d.exec(s.id, ['true'])).exitCode, 0, 'the sandbox itself is back');

  assert.equal((await d.remove(s.id)).status, 200);
  assert.deepEqual(sql(d.stateDir, 'SELECT state FROM usage WHERE sandbox = ?', s.id), [[badUsage]],
    'the removal wrote nothing over the row');
});
