// The daemon going away: a call in flight ends with ConnectionError (never a
// hang), the in-flight POST is not sent again, and later calls fail fast.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startDaemon, stopDaemon, isRoot, waitFor, processesMatching, sdk, runtimeFor, countingFetch } from './helpers.mjs';

const { ConnectionError } = sdk;
const skip = isRoot() ? false : 'needs root (runtimed does)';
let d;

before(async () => {
  if (!skip) d = await startDaemon({ prefix: 'runtime-sdk-ts-fail-' });
});
after(() => stopDaemon(d));

test('the daemon killed mid-exec: ConnectionError, the exec retried only with its own key; then refused, bounded', { skip }, async () => {
  const f = countingFetch();
  const rt = runtimeFor(d, { fetch: f, maxRetries: 2 });
  const sbx = await rt.sandboxes.create();
  d.track(sbx.id);
  const marker = `${Date.now() % 1000}.4242`; // a sleep no other process on the host runs
  const t0 = Date.now();
  const call = sbx.exec(['sleep', marker], { timeoutMs: 120_000 }).catch((e) => e);
  await waitFor(() => processesMatching(`sleep ${marker}`).length > 0, { what: 'the exec to run in the sandbox' });
  await d.kill9();
  const e = await call;
  assert.ok(e instanceof ConnectionError, `expected ConnectionError, got ${e}`);
  assert.ok(Date.now() - t0 < 60_000, 'well before any time-out');
  const execs = f.inits.filter((i, n) => f.calls[n].endsWith(':exec'));
  assert.ok(execs.length >= 1 && execs.length <= 3, `sent ${execs.length} times`);
  assert.equal(new Set(execs.map((i) => i.headers['Idempotency-Key'])).size, 1, 'every attempt with the same key');

  f.calls.length = 0;
  const t1 = Date.now();
  const again = await rt.sandboxes.get(sbx.id).catch((x) => x);
  assert.ok(again instanceof ConnectionError);
  assert.match(again.message, /connection refused/);
  assert.equal(f.calls.length, 3, 'refused: retried twice, then given up');
  assert.ok(Date.now() - t1 < 10_000);

  // Back up on the same port: the sandbox is still there, and the same client works again.
  await d.start();
  assert.equal((await rt.sandboxes.get(sbx.id)).id, sbx.id);
  await sbx.delete();
});
