// runtime.accounts against the real daemon: an account's key is a Runtime of its own that
// sees only its own sandboxes; the admin lists, rotates and removes; limits and admin calls
// with an account's key are typed errors.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startDaemon, stopDaemon, isRoot, token, sdk, runtimeFor } from './helpers.mjs';

const { Runtime, PermissionDeniedError: ForbiddenError, RateLimitError: LimitError, NotFoundError, ConflictError, AuthenticationError: UnauthorizedError, RuntimeError } = sdk;
const skip = isRoot() ? false : 'needs root (runtimed does)';
const KEY = /^rtk_[0-9a-f]{64}$/;
let d, admin;
const made = new Set();

before(async () => {
  if (skip) return;
  d = await startDaemon({ prefix: 'runtime-sdk-ts-acct-' });
  admin = runtimeFor(d);
});
after(async () => {
  for (const name of made) await admin.accounts.delete(name, { missingOk: true }).catch(() => {});
  await stopDaemon(d);
});

async function newAccount(options = {}) {
  const name = token('ts').slice(0, 20);
  made.add(name);
  return admin.accounts.create({ name, ...options });
}

const customer = (apiKey) => new Runtime({ baseUrl: d.url, apiKey });

test('an account\'s key sees only its own sandboxes; the admin sees the account', { skip }, async () => {
  const acct = await newAccount({ maxSandboxes: 2, maxMemoryMiB: 1024 });
  assert.match(acct.apiKey, KEY);
  assert.equal(acct.maxSandboxes, 2);
  assert.equal(acct.maxMemoryMiB, 1024);
  const admins = await admin.sandboxes.create({ memoryMiB: 256 });
  d.track(admins.id);

  const rt = customer(acct.apiKey);
  const sbx = await rt.sandboxes.getOrCreate('customer-42', { memoryMiB: 256 });
  assert.equal((await rt.sandboxes.getOrCreate('customer-42')).id, sbx.id);
  assert.deepEqual((await rt.sandboxes.list()).data.map((s) => s.id), [sbx.id]);
  await assert.rejects(rt.sandboxes.get(admins.id), NotFoundError);
  assert.ok(!(await admin.sandboxes.list()).data.some((s) => s.id === sbx.id), 'not among the admin\'s');
  const usage = await rt.usage();
  assert.deepEqual(usage.sandboxes.map((r) => r.account), [acct.name]);
  assert.deepEqual(usage.accounts.map((a) => a.account), [acct.name]);

  const row = (await admin.accounts.list()).find((a) => a.name === acct.name);
  assert.deepEqual({ sandboxes: row.sandboxes, memoryMiB: row.memoryMiB, removing: row.removing, apiKey: row.apiKey },
    { sandboxes: 1, memoryMiB: 256, removing: false, apiKey: undefined });

  const e = await rt.accounts.list().catch((x) => x);
  assert.ok(e instanceof ForbiddenError && e instanceof RuntimeError, `ForbiddenError: ${e}`);
  assert.equal(e.status, 403);
  assert.equal(e.code, 'forbidden');
  await assert.rejects(rt.accounts.create({ name: 'sneaky' }), ForbiddenError);
  await admins.delete();
});

test('rotateKey keeps the previous key until the next rotation; delete takes key and sandboxes', { skip }, async () => {
  const acct = await newAccount();
  const second = await admin.accounts.rotateKey(acct.name);
  assert.equal(second.name, acct.name);
  assert.match(second.apiKey, KEY);
  assert.notEqual(second.apiKey, acct.apiKey);
  assert.deepEqual((await customer(acct.apiKey).sandboxes.list()).data, [], 'the first key still works once');
  const third = await admin.accounts.rotateKey(acct.name);
  await assert.rejects(customer(acct.apiKey).sandboxes.list(), UnauthorizedError);
  assert.deepEqual((await customer(second.apiKey).sandboxes.list()).data, []);
  const sbx = await customer(third.apiKey).sandboxes.getOrCreate('customer-42', { memoryMiB: 256 });

  await admin.accounts.delete(acct.name);
  assert.ok(!(await admin.accounts.list()).some((a) => a.name === acct.name));
  await assert.rejects(customer(third.apiKey).sandboxes.list(), UnauthorizedError);
  assert.ok(!(await admin.usage()).sandboxes.some((r) => r.sandbox === sbx.id), 'its usage went with it');
  await assert.rejects(admin.accounts.delete(acct.name), NotFoundError);
  await admin.accounts.delete(acct.name, { missingOk: true });
  await assert.rejects(admin.accounts.rotateKey(acct.name), NotFoundError);
});

test('maxSandboxes: 1 refuses the second create with LimitError naming the limit', { skip }, async () => {
  const acct = await newAccount({ maxSandboxes: 1 });
  await assert.rejects(admin.accounts.create({ name: acct.name }), ConflictError);
  const rt = customer(acct.apiKey);
  await rt.sandboxes.create({ memoryMiB: 256 });
  const e = await rt.sandboxes.create({ memoryMiB: 256 }).catch((x) => x);
  assert.ok(e instanceof LimitError, `LimitError: ${e}`);
  assert.equal(e.status, 429);
  assert.equal(e.code, 'limit_reached');
  assert.match(e.message, /maxSandboxes=1/);
});
