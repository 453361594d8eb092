// Hibernation of ns sandboxes (docs/hibernation.md): a paused ns sandbox's memory goes to
// the host's swap, where there is any, and comes back as its processes touch it. Without
// swap the answer says so. The file turns a swap file of its own on (and off again at the
// end): these machines have none by default.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { DRIVER, Daemon, instanceName, isRoot, run, startDaemon, stopDaemon, waitFor } from '../e2e/lib.mjs';
import { count, countAfterRestart, sandboxWithCounter } from './counter.mjs';

const skip = !isRoot() ? 'needs root (runtimed and swapon do)'
  : DRIVER === 'gvisor' ? "each sandbox here names its driver: the file runs in make check's ns pass"
    : false;

const SWAP_MIB = 512;
let d, swapFile, hostHadSwap;

const swapTotal = () => Number(/SwapTotal:\s+(\d+)/.exec(fs.readFileSync('/proc/meminfo', 'utf8'))[1]) * 1024;

before(async () => {
  if (skip) return;
  hostHadSwap = swapTotal() > 0;
  d = await startDaemon({
    prefix: 'runtime-hibernate-swap-',
    make: (dir) => Object.assign(new Daemon(dir), { extraArgs: ['--hibernate-after', '2'] }),
  });
});
after(async () => {
  await stopDaemon(d);
  if (swapFile) {
    await run('swapoff', [swapFile], { timeoutMs: 120000 });
    fs.rmSync(path.dirname(swapFile), { recursive: true, force: true });
  }
});

async function swapOn() {
  if (swapFile) return;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'runtime-swap-'));
  const file = path.join(dir, 'swap');
  for (const [cmd, args] of [['fallocate', ['-l', `${SWAP_MIB}M`, file]], ['chmod', ['600', file]],
    ['mkswap', [file]], ['swapon', [file]]]) {
    const r = await run(cmd, args);
    assert.equal(r.code, 0, `${cmd}: ${r.stderr}`);
    swapFile = file; // from here on, after() cleans up
  }
}

// A background program holding 64 MiB of random bytes, that checks them once a second and
// writes "<round> <intact> <sha256>" to /tmp/mem.
const HOLDER = `
import hashlib, os, time
b = bytearray(os.urandom(1 << 20)) * 64
h = hashlib.sha256(b).hexdigest()
i = 0
while True:
    i += 1
    with open('/tmp/mem.new', 'w') as f:
        f.write(f"{i} {hashlib.sha256(b).hexdigest() == h} {h}")
    os.rename('/tmp/mem.new', '/tmp/mem')
    time.sleep(1)
`;

async function memoryRound(id) {
  const r = await d.exec(id, ['cat', '/tmp/mem']);
  const [round, intact] = r.stdout.split(' ');
  return r.exitCode === 0 ? { round: Number(round), intact: intact === 'True' } : null;
}

async function startHolder(id) {
  await d.exec(id, ['sh', '-c', 'cat > /tmp/holder.py'], { stdin: HOLDER });
  const r = await d.exec(id, ['sh', '-c', 'nohup python3 /tmp/holder.py >/dev/null 2>&1 &']);
  assert.equal(r.exitCode, 0, r.stderr);
  return waitFor(async () => (await memoryRound(id))?.intact && memoryRound(id),
    { timeoutMs: 30000, what: 'the holder to fill its 64 MiB' });
}

async function events(id, kind) {
  return (await d.api('GET', `/v1/sandboxes/${id}/events`)).body.filter((e) => e.kind === kind);
}

async function statusOf(id) {
  return (await d.api('GET', `/v1/sandboxes/${id}`)).body.status;
}

// What the sandbox's cgroup holds in RAM now (v1 or v2).
function ramBytes(id) {
  const name = `${instanceName(d.stateDir)}-${id}`;
  for (const f of [path.join('/sys/fs/cgroup/memory/runtime', name, 'memory.usage_in_bytes'),
    path.join('/sys/fs/cgroup/runtime', name, 'memory.current')]) {
    if (fs.existsSync(f)) return Number(fs.readFileSync(f, 'utf8'));
  }
  throw new Error(`no memory counter for sandbox ${id}`);
}

async function metric(name) {
  const r = await d.api('GET', '/metrics');
  const m = new RegExp(`^${name} (\\d+)$`, 'm').exec(r.text);
  assert.ok(m, `${name} in /metrics`);
  return Number(m[1]);
}

test('without swap an ns sandbox cannot hibernate: the answer says so, /metrics shows no swap, the sandbox stays paused', { skip }, async (t) => {
  if (hostHadSwap) return t.skip('this host has swap of its own');
  assert.equal(await metric('runtime_host_swap_bytes'), 0);
  assert.match(fs.readFileSync(d.logFile, 'utf8'), /no swap: ns sandboxes cannot hibernate/);
  const sb = await d.create({ isolation: 'ns' });
  const r = await d.api('POST', `/v1/sandboxes/${sb.id}:hibernate`);
  assert.equal(r.status, 501, r.text);
  assert.match(r.body.error.message, /no swap.*add swap .*or use isolation gvisor/);
  assert.equal(await statusOf(sb.id), 'paused', 'paused on the way, as a hibernation starts');
  assert.equal((await d.exec(sb.id, ['echo', 'back'])).stdout, 'back\n');
  assert.equal((await d.remove(sb.id)).status, 200);
});

test('with swap: a hibernated ns sandbox gives its RAM back, is billed its swap as storage, and the next MCP call on the same session wakes it with its state', { skip }, async (t) => {
  await swapOn();
  assert.ok(await metric('runtime_host_swap_bytes') >= (SWAP_MIB - 1) * 1024 * 1024, 'the swap shows in /metrics');
  const sb = await sandboxWithCounter(d, { isolation: 'ns' });
  assert.equal(await count(sb.client), 1);
  await startHolder(sb.id);
  const before = ramBytes(sb.id);
  assert.ok(before > 64 << 20, `the holder's 64 MiB are in RAM: ${before}`);

  const r = await d.api('POST', `/v1/sandboxes/${sb.id}:hibernate`);
  assert.equal(r.status, 200, r.text);
  assert.equal(r.body.status, 'hibernated');
  const [hib] = await events(sb.id, 'sandbox.hibernated');
  assert.equal(hib.to, 'swap', JSON.stringify(hib));
  assert.ok(hib.imageBytes > 48 << 20, `swapped ${hib.imageBytes} bytes`);
  const after = ramBytes(sb.id);
  assert.ok(after < before / 4, `RAM from ${before} to ${after} bytes`);
  t.diagnostic(`RAM ${(before / 2 ** 20).toFixed(1)} MiB, hibernated ${(after / 2 ** 20).toFixed(1)} MiB, swapped ${(hib.imageBytes / 2 ** 20).toFixed(1)} MiB`);
  // Storage, not memory: the stored bytes count what is in swap.
  const u = await waitFor(async () => {
    const row = (await d.api('GET', '/v1/usage')).body.sandboxes.find((x) => x.sandbox === sb.id);
    return row?.status === 'hibernated' && row.storedGB * 1e9 >= hib.imageBytes && row;
  }, { what: 'the stored bytes to include the swapped memory' });
  assert.equal(u.status, 'hibernated');

  // The same client and session: the call wakes it, and the server still counts on.
  assert.equal(await count(sb.client), 2);
  const woke = (await events(sb.id, 'sandbox.resumed')).at(-1);
  assert.deepEqual([woke.from, woke.reason], ['swap', 'gateway'], JSON.stringify(woke));
  assert.equal(await statusOf(sb.id), 'running');
  // The holder goes on, its 64 MiB back from swap as it reads them, every byte as it was.
  const was = await memoryRound(sb.id);
  const now = await waitFor(async () => {
    const m = await memoryRound(sb.id);
    return m && m.round > was.round + 1 && m;
  }, { timeoutMs: 30000, what: 'the holder to check its memory again' });
  assert.ok(now.intact, 'the 64 MiB came back from swap as they were');
  await sb.client.close();
  assert.equal((await d.remove(sb.id)).status, 200);
});

test('with swap: hibernated, the daemon killed with -9 and started again: still hibernated, and the next request wakes it', { skip }, async () => {
  await swapOn();
  const sb = await sandboxWithCounter(d, { isolation: 'ns' });
  assert.equal(await count(sb.client), 1);
  await sb.client.close();
  await d.exec(sb.id, ['sh', '-c', 'echo kept > /tmp/note']);
  assert.equal((await d.api('POST', `/v1/sandboxes/${sb.id}:hibernate`)).status, 200);

  await d.kill9();
  await d.start();
  assert.equal(await statusOf(sb.id), 'hibernated', 'the restart did not wake it');
  assert.match(fs.readFileSync(d.logFile, 'utf8'), /swap: \d+ MiB; a hibernating ns sandbox's memory goes there/);
  // Its processes and their memory outlived the daemon: /tmp (memory) still has the note.
  assert.equal((await d.exec(sb.id, ['cat', '/tmp/note'])).stdout, 'kept\n');
  assert.equal((await events(sb.id, 'sandbox.resumed')).at(-1).from, 'swap');
  // Its MCP servers start again at the wake (docs/hibernation.md): a new client, a new count.
  assert.equal(await countAfterRestart(d, sb), 1);
  assert.equal((await d.remove(sb.id)).status, 200);
});

test('with swap: idle, an ns sandbox pauses, then hibernates after its hibernateAfterSeconds; an exec wakes it', { skip }, async () => {
  await swapOn();
  const sb = await d.create({ isolation: 'ns', idlePauseSeconds: 1 });
  assert.equal(sb.hibernateAfterSeconds, 2, "the daemon's --hibernate-after");
  await waitFor(async () => (await statusOf(sb.id)) === 'hibernated', { timeoutMs: 30000, what: 'idle hibernation' });
  assert.equal((await events(sb.id, 'sandbox.hibernated')).at(-1).reason, 'idle');
  assert.equal((await d.exec(sb.id, ['echo', 'back'])).stdout, 'back\n');
  assert.equal((await events(sb.id, 'sandbox.resumed')).at(-1).from, 'swap');
  assert.equal((await d.remove(sb.id)).status, 200);
});
