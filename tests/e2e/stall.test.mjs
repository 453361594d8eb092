// One request must never stall the daemon (issue 11, finding 1): every exec the API
// accepts is one the keeper accepts, and when either of the daemon's two processes
// ends the other follows at once, so a supervisor (systemd's Restart=) can bring
// the daemon back, with its sandboxes re-adopted.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { hostProcesses, pidAlive, readOr, startDaemon, stopDaemon, waitFor } from './lib.mjs';

let d, sb;
before(async () => {
  d = await startDaemon({ prefix: 'runtime-stall-' });
  sb = await d.create({ name: 'stall-box' });
});
after(async () => {
  await stopDaemon(d);
});

const manyEnv = (n) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`K${i}`, 'v']));

/** The daemon still answers, quickly: the API and an exec in the sandbox. */
async function stillServing() {
  const list = await d.api('GET', '/v1/sandboxes', undefined, { timeoutMs: 5000 });
  assert.equal(list.status, 200, list.text);
  const r = await d.exec(sb.id, ['echo', 'alive'], { timeoutMs: 5000 });
  assert.equal(r.stdout, 'alive\n');
}

test('an exec with more env entries than the keeper takes is refused with 413, and the daemon keeps serving', async () => {
  for (const n of [4096, 5000, 20000]) {
    const r = await d.api('POST', `/v1/sandboxes/${sb.id}/exec`, { argv: ['true'], env: manyEnv(n) }, { timeoutMs: 10000 });
    assert.equal(r.status, 413, `${n} env entries: ${r.status} ${r.text}`);
    assert.equal(r.body.error.code, 'too_large');
    assert.match(r.body.error.message, /environment variables/, r.text);
    await stillServing();
  }
  // Just under the limit, with room for the sandbox's own variables: it runs.
  const ok = await d.api('POST', `/v1/sandboxes/${sb.id}/exec`,
    { argv: ['sh', '-c', 'echo $K4000'], env: manyEnv(4001) }, { timeoutMs: 10000 });
  assert.equal(ok.status, 200, ok.text);
  assert.equal(ok.body.stdout, 'v\n');
});

test('argv past the keeper\'s limits is refused too: too many entries, too many bytes', async () => {
  const many = await d.api('POST', `/v1/sandboxes/${sb.id}/exec`, { argv: ['echo', ...Array(5000).fill('x')] });
  assert.equal(many.status, 400, many.text);
  const big = await d.api('POST', `/v1/sandboxes/${sb.id}/exec`, { argv: ['echo', 'x'.repeat(70000)] });
  assert.equal(big.status, 413, big.text);
  await stillServing();
});

/** The daemon's server process (the keeper's child that is not a sandbox). */
function serverPid() {
  const [, server] = d.daemonPids();
  assert.ok(server, 'the server process is running');
  return server;
}

test('when the server dies the keeper ends at once, and a restart re-adopts the sandbox', async () => {
  const keeper = d.proc.pid;
  process.kill(serverPid(), 'SIGKILL');
  await waitFor(() => d.exited, { timeoutMs: 5000, what: 'the keeper to end after the server died' });
  assert.ok(!pidAlive(keeper));
  await d.start();
  const got = await d.api('GET', `/v1/sandboxes/${sb.id}`);
  assert.equal(got.status, 200, got.text);
  assert.equal(got.body.status, 'running');
  await stillServing();
});

test('when the keeper dies the server ends at once; the sandboxes keep running and are re-adopted', async () => {
  const server = serverPid();
  // This daemon's sandbox only (its cgroups are named INSTANCE-ID): other daemons'
  // sandboxes on the machine may come and go meanwhile.
  const { first, last } = d.uids();
  const init = hostProcesses().find((p) => p.ppid !== d.proc.pid && p.uid >= first && p.uid <= last &&
    (readOr(`/proc/${p.pid}/cgroup`) ?? '').includes(`-${sb.id}\n`));
  assert.ok(init, 'a process of the sandbox is running');
  process.kill(d.proc.pid, 'SIGKILL');
  await waitFor(() => !pidAlive(server), { timeoutMs: 5000, what: 'the server to end after the keeper died' });
  assert.ok(pidAlive(init.pid), 'sandbox processes outlive the daemon');
  await waitFor(() => d.exited, { timeoutMs: 5000, what: 'the keeper to be reaped' });
  await d.start();
  const got = await d.api('GET', `/v1/sandboxes/${sb.id}`);
  assert.equal(got.body.status, 'running', got.text);
  await stillServing();
});

test('a destroy that fails keeps the sandbox: rm says why, the daemon keeps serving, and rm again removes it', async () => {
  const victim = await d.create({ name: 'stuck-box' });
  // Something the keeper will not remove: a file an operator left in the sandbox's
  // directory, so that its last rmdir fails (ENOTEMPTY) after the processes are gone.
  const dir = path.join(d.stateDir, 'sandboxes', victim.id);
  const left = path.join(dir, 'left-by-an-operator');
  fs.writeFileSync(left, 'x');
  try {
    const first = await d.api('DELETE', `/v1/sandboxes/${victim.id}`, undefined, { timeoutMs: 15000 });
    assert.ok(first.status >= 500, `${first.status} ${first.text}`);
    assert.match(first.body.error.message, /cannot remove sandbox .*not empty.*remove it again/i, first.text);
    await stillServing();
    const kept = await d.api('GET', `/v1/sandboxes/${victim.id}`);
    assert.equal(kept.status, 200, kept.text);
    assert.equal(kept.body.status, 'failed', kept.text);

    // Still stuck: a second rm fails the same way, and the daemon is still up.
    const second = await d.api('DELETE', `/v1/sandboxes/${victim.id}`, undefined, { timeoutMs: 15000 });
    assert.ok(second.status >= 500, `${second.status} ${second.text}`);
    await stillServing();
  } finally {
    fs.rmSync(left, { force: true });
  }
  const third = await d.api('DELETE', `/v1/sandboxes/${victim.id}`, undefined, { timeoutMs: 15000 });
  assert.equal(third.status, 200, third.text);
  assert.equal((await d.api('GET', `/v1/sandboxes/${victim.id}`)).status, 404);
  assert.ok(!fs.existsSync(dir), `${dir} is gone`);
  await stillServing();
});

/** Creates NAME and lists sandboxes until its create is answered: the statuses seen. */
async function createWatched(name) {
  const started = d.api('POST', '/v1/sandboxes', { name }, { timeoutMs: 30000 });
  let done = false;
  started.then(() => { done = true; }, () => { done = true; });
  const seen = [];
  for (let i = 0; i < 2000 && !done; i++) {
    const list = await d.api('GET', '/v1/sandboxes', undefined, { timeoutMs: 5000 });
    assert.equal(list.status, 200, list.text);
    const box = list.body.data.find((s) => s.name === name);
    if (box && !done) seen.push(box.status);
  }
  const made = await started;
  assert.equal(made.status, 201, made.text);
  assert.equal(made.body.status, 'running');
  return seen;
}

test('a create does not hold up the daemon: while the keeper builds it, the API answers and lists it as creating', async () => {
  // On a loop that waited for the keeper, no listing could be answered during a
  // create. A busy machine can delay this client past a whole create: a few tries.
  const tries = [];
  for (let i = 0; i < 3 && !tries.flat().includes('creating'); i++) tries.push(await createWatched(`slow-box-t${i}`));
  assert.ok(tries.flat().includes('creating'), `listings during the creates saw ${JSON.stringify(tries)}`);
  for (let i = 0; i < tries.length; i++)
    assert.equal((await d.api('DELETE', `/v1/sandboxes/slow-box-t${i}`)).status, 200);

  // getOrCreate of a sandbox being created waits for it and gets the same one.
  const second = d.api('POST', '/v1/sandboxes', { name: 'slow-box-2' }, { timeoutMs: 30000 });
  const again = await d.api('POST', '/v1/sandboxes', { name: 'slow-box-2', getOrCreate: true }, { timeoutMs: 30000 });
  const first = await second;
  assert.equal(first.status, 201, first.text);
  assert.ok([200, 201].includes(again.status), again.text);
  assert.equal(again.body.id, first.body.id);
  assert.equal(again.body.status, 'running');

  // Removing one that is being created is refused with a clear 409, never a stall.
  const third = d.api('POST', '/v1/sandboxes', { name: 'slow-box-3' }, { timeoutMs: 30000 });
  let early = null;
  for (let i = 0; i < 2000 && !early; i++) {
    const list = await d.api('GET', '/v1/sandboxes');
    const box = list.body.data.find((s) => s.name === 'slow-box-3');
    if (box) early = await d.api('DELETE', `/v1/sandboxes/${box.id}`);
  }
  const made3 = await third;
  assert.ok(early, 'the sandbox was listed');
  if (early.status !== 200) { // 200: the create had already finished
    assert.equal(early.status, 409, early.text);
    assert.match(early.body.error.message, /being created/);
    assert.equal((await d.api('DELETE', `/v1/sandboxes/${made3.body.id}`)).status, 200);
  }
  assert.equal((await d.api('DELETE', '/v1/sandboxes/slow-box-2')).status, 200);
  await stillServing();
});
