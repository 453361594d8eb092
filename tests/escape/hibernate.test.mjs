// Hibernation (docs/hibernation.md): a gvisor sandbox's memory goes to an image on disk and
// its processes end; the next request (an MCP call through the gateway, an exec, a file
// read) restores it with its processes and their memory: a background program goes on
// counting, an MCP server keeps what it was told, the client's session goes on. Across a
// kill -9 of the daemon it stays hibernated; an image that cannot be restored starts it
// cold, with an event that says why.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import {
  DRIVER, Daemon, gvisorSkip, isRoot, runscProcesses, sandboxHostProcesses, startDaemon, stopDaemon, waitFor,
} from '../e2e/lib.mjs';
import { count, countAfterRestart, sandboxWithCounter } from './counter.mjs';

const skip = !isRoot() ? 'needs root (runtimed does)'
  : DRIVER === 'gvisor' ? "each sandbox here names its driver: the file runs in make check's ns pass"
    : gvisorSkip();

let d;
before(async () => {
  if (skip) return;
  // Sandboxes created without hibernateAfterSeconds get the daemon's --hibernate-after.
  d = await startDaemon({
    prefix: 'runtime-hibernate-',
    make: (dir) => Object.assign(new Daemon(dir), { extraArgs: ['--hibernate-after', '2'] }),
  });
});
after(async () => {
  await stopDaemon(d);
});

// A counter sandbox that answered once, a file in its workspace, then hibernated.
async function hibernatedWithNote() {
  const sb = await sandboxWithCounter(d, { isolation: 'gvisor' });
  assert.equal(await count(sb.client), 1);
  await sb.client.close();
  await d.exec(sb.id, ['sh', '-c', 'echo kept > /workspace/note.txt']);
  await hibernate(sb.id);
  return sb;
}

async function hibernate(id) {
  const r = await d.api('POST', `/v1/sandboxes/${id}:hibernate`);
  assert.equal(r.status, 200, r.text);
  assert.equal(r.body.status, 'hibernated');
  assert.equal(r.body.state, 'paused', "Runtime Cloud's word: a paused sandbox costs storage only");
  assert.deepEqual(runscProcesses(d.stateDir, id).filter((p) => p.cmdline.startsWith('runsc')), [],
    'no runsc process is left: its memory is on disk');
  const image = path.join(d.stateDir, 'sandboxes', id, 'image');
  assert.ok(fs.readdirSync(image).length > 0, 'its image is in its directory');
}

async function events(id, kind) {
  return (await d.api('GET', `/v1/sandboxes/${id}/events`)).body.filter((e) => e.kind === kind);
}

async function statusOf(id) {
  return (await d.api('GET', `/v1/sandboxes/${id}`)).body.status;
}

// The pid inside of a background loop that writes a growing number to /tmp/ticks.
async function startTicker(id) {
  const r = await d.exec(id, ['sh', '-c',
    'nohup sh -c \'i=0; while :; do i=$((i+1)); echo $i > /tmp/ticks; sleep 0.1; done\' >/dev/null 2>&1 & echo $!']);
  assert.equal(r.exitCode, 0, r.stderr);
  await waitFor(async () => Number((await d.exec(id, ['cat', '/tmp/ticks'])).stdout) > 2, { what: 'the ticker to tick' });
  return Number(r.stdout);
}

test('a hibernated gvisor sandbox comes back with its processes and their memory: by an MCP call, an exec, a file read', { skip }, async () => {
  const sb = await sandboxWithCounter(d, { isolation: 'gvisor' });
  assert.equal(await count(sb.client), 1);
  assert.equal(await count(sb.client), 2);
  const ticker = await startTicker(sb.id);

  await hibernate(sb.id);
  const [hib] = await events(sb.id, 'sandbox.hibernated');
  assert.ok(hib.imageBytes > 0, JSON.stringify(hib));
  assert.equal(hib.to, 'image');
  // The same client and session: the call wakes it, and the server still counts on.
  assert.equal(await count(sb.client), 3);
  const woke = await events(sb.id, 'sandbox.resumed');
  assert.equal(woke.at(-1).from, 'image', JSON.stringify(woke));
  assert.equal(woke.at(-1).reason, 'gateway');
  assert.equal(await statusOf(sb.id), 'running');

  await hibernate(sb.id);
  const ps = await d.exec(sb.id, ['ps', '-o', 'pid=', '-p', String(ticker)]);
  assert.equal(Number(ps.stdout), ticker, 'the exec woke it, and the same ticker runs');
  const t1 = Number((await d.exec(sb.id, ['cat', '/tmp/ticks'])).stdout);
  await waitFor(async () => Number((await d.exec(sb.id, ['cat', '/tmp/ticks'])).stdout) > t1, { what: 'the ticker to go on' });

  await d.exec(sb.id, ['sh', '-c', 'echo kept > /workspace/note.txt']);
  await hibernate(sb.id);
  const file = await d.api('GET', `/v1/sandboxes/${sb.id}/files/content?path=/workspace/note.txt`);
  assert.equal(file.status, 200, file.text);
  assert.equal(file.text, 'kept\n');
  assert.equal(await count(sb.client), 4);
  await sb.client.close();
  assert.equal((await d.remove(sb.id)).status, 200);
});

test('hibernated, the daemon killed with -9 and started again: it is still hibernated and wakes on the next request', { skip }, async () => {
  const sb = await sandboxWithCounter(d, { isolation: 'gvisor' });
  assert.equal(await count(sb.client), 1);
  await sb.client.close();
  const ticker = await startTicker(sb.id);
  await hibernate(sb.id);

  await d.kill9();
  await d.start();
  assert.equal(await statusOf(sb.id), 'hibernated', 'the restart did not wake it');
  assert.deepEqual(runscProcesses(d.stateDir, sb.id).filter((p) => p.cmdline.startsWith('runsc')), []);

  const ps = await d.exec(sb.id, ['ps', '-o', 'pid=', '-p', String(ticker)]);
  const woke = (await events(sb.id, 'sandbox.resumed')).at(-1);
  assert.equal(woke?.from, 'image', `restored from its image, not cold: ${JSON.stringify(woke)}`);
  assert.equal(Number(ps.stdout), ticker, 'restored from its image: the same ticker runs');
  // Its MCP servers start again after a restart (docs/hibernation.md): a new client, a new count.
  assert.equal(await countAfterRestart(d, sb), 1);
  assert.equal((await d.remove(sb.id)).status, 200);
});

test('a host restart while hibernated (its processes gone): nothing boots at the daemon\'s start; the next request starts it cold', { skip }, async () => {
  const sb = await hibernatedWithNote();
  await d.kill9();
  // What a host restart ends: every process of the sandbox (its holder and shim).
  for (const p of sandboxHostProcesses(d.stateDir, sb.id)) process.kill(p.pid, 'SIGKILL');
  await waitFor(() => sandboxHostProcesses(d.stateDir, sb.id).length === 0, { what: "the sandbox's processes to end" });
  await d.start();
  const got = (await d.api('GET', `/v1/sandboxes/${sb.id}`)).body;
  assert.deepEqual([got.status, got.stopReason], ['stopped', 'host restarted, hibernated']);
  assert.deepEqual(sandboxHostProcesses(d.stateDir, sb.id), [], 'nothing of it was built at the start');
  const ev = (await events(sb.id, 'sandbox.stopped')).at(-1);
  assert.equal(ev.reason, 'host restarted, hibernated');

  const cat = await d.exec(sb.id, ['cat', '/workspace/note.txt']);
  assert.equal(cat.stdout, 'kept\n', 'the exec started it, its workspace kept');
  assert.equal(await statusOf(sb.id), 'running');
  assert.equal(await countAfterRestart(d, sb), 1, 'started cold: a new count');
  assert.equal((await d.remove(sb.id)).status, 200);
});

test('an image that cannot be restored starts the sandbox cold, with an event that says why', { skip }, async () => {
  const sb = await hibernatedWithNote();
  const image = path.join(d.stateDir, 'sandboxes', sb.id, 'image');
  for (const f of fs.readdirSync(image)) fs.writeFileSync(path.join(image, f), 'not an image');

  const cat = await d.exec(sb.id, ['cat', '/workspace/note.txt']);
  assert.equal(cat.stdout, 'kept\n', 'its workspace is kept');
  const woke = (await events(sb.id, 'sandbox.resumed')).at(-1);
  assert.equal(woke.from, 'cold', JSON.stringify(woke));
  assert.ok(woke.why && woke.why.length > 0, 'the event says why');
  // Its MCP server starts again by itself, at the same URL.
  assert.equal(await countAfterRestart(d, sb), 1);
  assert.equal((await d.remove(sb.id)).status, 200);
});

test('idle: paused after its idlePauseSeconds, hibernated after its hibernateAfterSeconds (the daemon\'s --hibernate-after), restored by the next exec', { skip }, async () => {
  const sb = await d.create({ isolation: 'gvisor', idlePauseSeconds: 1 });
  assert.equal(sb.hibernateAfterSeconds, 2, 'the daemon\'s --hibernate-after');
  await waitFor(async () => (await statusOf(sb.id)) === 'hibernated', { timeoutMs: 30000, what: 'idle hibernation' });
  const [paused] = await events(sb.id, 'sandbox.paused');
  const [hib] = await events(sb.id, 'sandbox.hibernated');
  assert.equal(paused.reason, 'idle');
  assert.equal(hib.reason, 'idle');
  assert.ok(Date.parse(hib.time) - Date.parse(paused.time) >= 2000, `${paused.time} then ${hib.time}`);
  assert.equal((await d.exec(sb.id, ['echo', 'back'])).stdout, 'back\n');
  assert.equal((await events(sb.id, 'sandbox.resumed')).at(-1).from, 'image');
  // 0 is never: paused, it stays paused.
  const up = await d.api('POST', `/v1/sandboxes/${sb.id}:update`, { hibernateAfterSeconds: 0 });
  assert.equal(up.status, 200, up.text);
  assert.equal(up.body.hibernateAfterSeconds, 0);
  assert.equal((await d.api('POST', `/v1/sandboxes/${sb.id}:pause`)).status, 200);
  const t0 = Date.now();
  await waitFor(() => Date.now() - t0 > 4000, { intervalMs: 250, what: 'two waits of --hibernate-after' });
  assert.equal(await statusOf(sb.id), 'paused');
  assert.equal((await d.remove(sb.id)).status, 200);
});

async function usageOf(id) {
  const r = await d.api('GET', '/v1/usage');
  assert.equal(r.status, 200, r.text);
  const row = r.body.sandboxes.find((x) => x.sandbox === id);
  assert.ok(row, `a usage row for ${id}`);
  return row;
}

test('usage: a hibernated sandbox is billed for storage (its workspace and its image), not memory', { skip }, async () => {
  const sb = await d.create({ isolation: 'gvisor', memoryMiB: 512 });
  await hibernate(sb.id);
  const [hib] = await events(sb.id, 'sandbox.hibernated');
  // The checkpoint after the landing asks the keeper for the stored bytes: the image's too.
  const u1 = await waitFor(async () => {
    const row = await usageOf(sb.id);
    return row.storedGB * 1e9 >= hib.imageBytes && row;
  }, { what: 'the stored bytes to include the image' });
  assert.equal(u1.status, 'hibernated');
  const t0 = Date.now();
  // A stretch to bill (an interval measured, not a synchronisation).
  await waitFor(() => Date.now() - t0 >= 3000, { intervalMs: 100, what: 'three seconds hibernated' });
  assert.equal((await d.exec(sb.id, ['true'])).exitCode, 0); // the wake counts the stretch
  const u2 = await usageOf(sb.id);
  const hours = u2.pausedHours - u1.pausedHours;
  assert.ok(hours * 3600 >= 2.9, `paused (hibernated) seconds: ${hours * 3600}`);
  assert.ok(u2.pausedGBHours - u1.pausedGBHours >= hours * (hib.imageBytes / 1e9) * 0.99,
    `pausedGBHours grew by ${u2.pausedGBHours - u1.pausedGBHours} over ${hours} h of an image of ${hib.imageBytes} B`);
  // Memory is billed for the running time only (the wake and the exec), not the stretch.
  const running = u2.runningHours - u1.runningHours;
  assert.ok(running < hours, `running seconds ${running * 3600} against ${hours * 3600} hibernated`);
  // (0.5 GiB over the 3 s stretch would be 4.2e-4 GiB-hours: the tolerance is a quarter of it.)
  const memory = u2.memoryGiBHours - u1.memoryGiBHours;
  assert.ok(Math.abs(memory - running * 0.5) < 1e-4, `memoryGiBHours grew ${memory}, running ${running} h`);
  assert.equal((await d.remove(sb.id)).status, 200);
});

test('memory short (--hibernate-below): paused gvisor sandboxes hibernate, whatever their hibernateAfterSeconds; running ones run on', { skip }, async () => {
  // Every MiB is "short" here: MemAvailable is always under 2^30 MiB.
  const d2 = await startDaemon({
    prefix: 'runtime-hibernate-pressure-',
    make: (dir) => Object.assign(new Daemon(dir), { extraArgs: ['--hibernate-below', String(2 ** 30), '--hibernate-after', '0'] }),
  });
  try {
    const a = await d2.create({ isolation: 'gvisor' });
    const b = await d2.create({ isolation: 'gvisor' });
    const c = await d2.create({ isolation: 'gvisor' });
    assert.equal(a.hibernateAfterSeconds, 0, 'never by time');
    for (const x of [a, b]) assert.equal((await d2.api('POST', `/v1/sandboxes/${x.id}:pause`)).status, 200);
    for (const x of [a, b]) {
      await waitFor(async () => (await d2.api('GET', `/v1/sandboxes/${x.id}`)).body.status === 'hibernated',
        { timeoutMs: 30000, what: `sandbox ${x.id} hibernated for memory` });
      const ev = (await d2.api('GET', `/v1/sandboxes/${x.id}/events`)).body.filter((e) => e.kind === 'sandbox.hibernated');
      assert.equal(ev.at(-1).reason, 'memory');
    }
    assert.equal((await d2.api('GET', `/v1/sandboxes/${c.id}`)).body.status, 'running', 'a running one is not touched');
    assert.match(fs.readFileSync(d2.logFile, 'utf8'), /memory is short .*hibernating sandbox/);
    assert.equal((await d2.exec(a.id, ['echo', 'back'])).stdout, 'back\n');
  } finally {
    await d2.removeAll();
    await stopDaemon(d2);
  }
});

// CPU ticks (utime + stime) a host process has used.
function cpuTicks(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(f[11]) + Number(f[12]);
}

test('a program let go while its sandbox is hibernated: the shim waits out its grace without spinning, and a removal ends it at once', { skip }, async (t) => {
  const sb = await d.create({ isolation: 'gvisor' });
  // An exec whose caller goes away (its HTTP request aborted) once the sandbox is hibernated.
  const aborted = new AbortController();
  const req = d.apiRequest({ argv: ['sleep', '1000'], stream: true });
  const running = fetch(`${d.url}/v1/sandboxes/${sb.id}/exec`, {
    method: 'POST', signal: aborted.signal, headers: req.headers, body: req.payload,
  }).catch((e) => e);
  await waitFor(async () => (await d.exec(sb.id, ['pgrep', '-x', 'sleep'])).exitCode === 0, { what: 'sleep to run' });
  await hibernate(sb.id);
  const shim = sandboxHostProcesses(d.stateDir, sb.id).find((p) => p.cmdline === 'runtime-shim');
  assert.ok(shim, 'the shim stays while hibernated');
  const before = cpuTicks(shim.pid);
  aborted.abort();
  await running;
  const t0 = Date.now(); // the shim's grace for a program stopped (2 s), measured, not waited on
  await waitFor(() => Date.now() - t0 >= 2500, { intervalMs: 100, what: 'the grace to pass' });
  const used = cpuTicks(shim.pid) - before;
  t.diagnostic(`the shim used ${used} ticks; sandbox ${await statusOf(sb.id)}`);
  assert.ok(used < 25, `the shim used ${used} ticks of CPU in 2.5 s (a spin uses ~250)`);
  const r = await d.remove(sb.id);
  assert.equal(r.status, 200, r.text);
  assert.equal(sandboxHostProcesses(d.stateDir, sb.id).length, 0, 'nothing of it is left');
});
