// GET /v1/usage/series: the dashboard's charts draw from real metering. A sandbox that
// burned CPU and holds memory shows both in its minute; paused, its stored workspace; an
// account sees its own sandboxes' minutes and no one else's.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { startDaemon, stopDaemon, isRoot } from '../e2e/lib.mjs';

const skip = !isRoot() && 'needs root';
let d;

before(async () => {
  if (!skip) d = await startDaemon({ prefix: 'runtime-dash-usage-' });
});
after(() => stopDaemon(d));

const last = (r) => r.body.points.at(-1);

test('a sandbox\'s CPU, memory and paused storage appear in its minute, with its cost', { skip }, async () => {
  const box = await d.create({ name: 'metered', memoryMiB: 256 });
  // A second of CPU, and 64 MiB held while the checkpoint looks.
  await d.exec(box.id, ['sh', '-c', 'end=$(($(date +%s)+1)); while [ $(date +%s) -lt $end ]; do :; done']);
  // Synced: the stored figure is the image's blocks on the host, which the kernel's
  // writeback reaches within about 30 s (docs/usage.md); the test does not wait for it.
  await d.exec(box.id, ['sh', '-c', 'head -c 8000000 /dev/urandom > /workspace/blob && sync']);
  assert.equal((await d.api('GET', '/v1/usage')).status, 200); // counts every sandbox up to now
  let r = await d.api('GET', `/v1/usage/series?sandbox=${box.id}`);
  assert.equal(r.status, 200, r.text);
  assert.equal(r.body.stepSeconds, 60);
  const run = last(r);
  assert.ok(run.vcpu > 0, JSON.stringify(run));
  assert.ok(run.memoryMiB > 0, JSON.stringify(run));
  assert.ok(run.costUsd > 0, JSON.stringify(run));
  assert.ok(Math.abs(Date.parse(run.t) - Date.now()) < 120000, run.t);

  assert.equal((await d.api('POST', `/v1/sandboxes/${box.id}:pause`)).status, 200);
  assert.equal((await d.api('GET', '/v1/usage')).status, 200);
  r = await d.api('GET', `/v1/usage/series?sandbox=${box.id}`);
  assert.ok(last(r).pausedStorageMiB >= 7, JSON.stringify(last(r)));
  assert.ok(last(r).costUsd >= run.costUsd);
  const account = await d.api('GET', '/v1/usage/series?account=default');
  assert.ok(last(account).costUsd >= last(r).costUsd, JSON.stringify(last(account)));
});

test('an account\'s key sees its own minutes; another account\'s sandbox is not found', { skip }, async () => {
  const made = await d.api('POST', '/v1/accounts', { name: 'usage-acme' });
  const key = made.body.apiKey;
  const mine = await d.create({ name: 'admins-metered' });
  assert.equal((await d.api('GET', `/v1/usage/series?sandbox=${mine.id}`, undefined, { key })).status, 404);
  assert.equal((await d.api('GET', '/v1/usage/series?account=default', undefined, { key })).status, 403);
  const own = await d.api('GET', '/v1/usage/series', undefined, { key });
  assert.equal(own.status, 200);
  assert.deepEqual(own.body.points, [], 'an account with no sandboxes has no minutes');
  assert.equal((await d.api('GET', '/v1/usage/series?account=usage-acme')).status, 200, 'the admin names any');
});
