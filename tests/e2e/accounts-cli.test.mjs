// `runtime account ...` against a real daemon: an account's key is printed once and works as
// RUNTIME_API_KEY, the account sees only its own sandboxes, a rotation keeps the previous key
// until the next one, removal takes its sandboxes and key, its limits answer 429, an account's
// key cannot manage accounts (403), and usage errors exit 2.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startDaemon, stopDaemon, cgroupDirs, waitFor, token } from './lib.mjs';

let d;
const made = new Set(); // accounts to remove at the end (their sandboxes are not the admin's)
before(async () => {
  d = await startDaemon();
});
after(async () => {
  for (const name of made) await d.api('DELETE', `/v1/accounts/${name}`).catch(() => {});
  await stopDaemon(d);
});

const KEY_RE = /^rtk_[0-9a-f]{64}$/;
const accountName = (prefix) => token(prefix).slice(0, 20).toLowerCase();

/** The CLI with an account's key in place of the admin's. */
const as = (key, args) => d.cli(args, { env: { RUNTIME_API_KEY: key } });

/** `runtime account create NAME ...`: checks the output's shape, returns the key. */
async function createAccount(name, extra = []) {
  const r = await d.cli(['account', 'create', name, ...extra]);
  assert.equal(r.code, 0, r.stderr);
  made.add(name);
  const lines = r.stdout.split('\n').filter(Boolean);
  assert.equal(lines.length, 1, `the key alone on stdout: ${r.stdout}`);
  assert.match(lines[0], KEY_RE);
  assert.match(r.stderr, /shown only this once/);
  assert.match(r.stderr, /RUNTIME_API_KEY=/);
  assert.ok(!r.stderr.includes(lines[0]), 'the key is not repeated on stderr');
  assert.equal(r.stderr.trim().split('\n').length, 1, `one line on stderr: ${r.stderr}`);
  return lines[0];
}

/** Fails unless the command ended with exit 2, a one-line message pointing at --help. */
function assertUsage(r, re, what) {
  assert.equal(r.code, 2, `${what}: exit ${r.code}; stderr: ${r.stderr}`);
  assert.equal(r.stdout, '', `${what}: nothing on stdout`);
  assert.match(r.stderr, re, what);
  assert.match(r.stderr, /see 'runtime account.*--help'/, what);
}

let acme, acmeKey, acmeSandbox;

test('create: the key is printed once and works as RUNTIME_API_KEY; the account sees only its own', async () => {
  acme = accountName('acme');
  acmeKey = await createAccount(acme, ['--max-sandboxes', '3', '--max-memory', '2048']);
  const admins = await d.create({ name: 'admins-own', memoryMiB: 256 });

  const c = await as(acmeKey, ['sandbox', 'create', '--name', 'customer-42', '--memory', '256']);
  assert.equal(c.code, 0, c.stderr);
  acmeSandbox = c.stdout.trim();
  assert.match(acmeSandbox, /^[0-9a-z]+$/);

  const mine = await as(acmeKey, ['sandbox', 'list', '--json']);
  assert.equal(mine.code, 0, mine.stderr);
  assert.deepEqual(JSON.parse(mine.stdout).map((s) => s.id), [acmeSandbox]);
  const table = await as(acmeKey, ['sandbox', 'list']);
  assert.equal(table.code, 0, table.stderr);
  assert.match(table.stdout, /customer-42/);
  assert.ok(!table.stdout.includes('admins-own') && !table.stdout.includes(admins.id),
    `the admin's sandbox is not the account's: ${table.stdout}`);
  const other = await as(acmeKey, ['sandbox', 'get', admins.id]);
  assert.equal(other.code, 1, 'another account\'s sandbox is not found');
  assert.match(other.stderr, /HTTP 404/);

  // The admin acts as the account default: the account's sandbox is not in its list.
  const adminList = await d.cli(['sandbox', 'list', '--json']);
  assert.deepEqual(JSON.parse(adminList.stdout).map((s) => s.id), [admins.id]);
  await d.remove(admins.id);
});

test('list: the table and the API\'s JSON, without keys', async () => {
  const j = await d.cli(['account', 'list', '--json']);
  assert.equal(j.code, 0, j.stderr);
  assert.ok(!/rtk_/.test(j.stdout), 'no key in the listing');
  const row = JSON.parse(j.stdout).find((a) => a.name === acme);
  assert.ok(row, j.stdout);
  assert.equal(row.sandboxes, 1);
  assert.equal(row.memoryMiB, 256);
  assert.equal(row.maxSandboxes, 3);
  assert.equal(row.maxMemoryMiB, 2048);
  assert.equal(row.removing, false);
  assert.equal(row.apiKey, undefined);

  const t = await d.cli(['account', 'list']);
  assert.equal(t.code, 0, t.stderr);
  const [head, ...rows] = t.stdout.trimEnd().split('\n');
  assert.match(head, /^NAME\s+SANDBOXES\s+MEMORY\s+LIMITS\s+CREATED$/);
  const line = rows.find((l) => l.startsWith(`${acme} `));
  assert.ok(line, t.stdout);
  assert.match(line, /\s1\s+256MiB\s+3 sandboxes, 2048MiB\s+(just now|\d+ seconds? ago)$/);
  assert.ok(!/rtk_/.test(t.stdout));
});

test('key: after a rotation the previous key still works; after the next it is refused', async () => {
  const r1 = await d.cli(['account', 'key', acme]);
  assert.equal(r1.code, 0, r1.stderr);
  const k2 = r1.stdout.trim();
  assert.match(k2, KEY_RE);
  assert.notEqual(k2, acmeKey);
  assert.match(r1.stderr, /shown only this once/);
  assert.match(r1.stderr, /previous key keeps working until the next rotation/);
  for (const k of [acmeKey, k2]) {
    const l = await as(k, ['sandbox', 'list', '--json']);
    assert.equal(l.code, 0, l.stderr);
    assert.deepEqual(JSON.parse(l.stdout).map((s) => s.id), [acmeSandbox]);
  }

  const r2 = await d.cli(['account', 'key', acme, '--json']);
  assert.equal(r2.code, 0, r2.stderr);
  const k3 = JSON.parse(r2.stdout);
  assert.equal(k3.name, acme);
  assert.match(k3.apiKey, KEY_RE);
  const old = await as(acmeKey, ['sandbox', 'list']);
  assert.equal(old.code, 1);
  assert.match(old.stderr, /HTTP 401/);
  assert.match(old.stderr, /RUNTIME_API_KEY/, 'it says where the key came from');
  for (const k of [k2, k3.apiKey]) assert.equal((await as(k, ['sandbox', 'list'])).code, 0);
  acmeKey = k3.apiKey;

  const none = await d.cli(['account', 'key', 'no-such-account']);
  assert.equal(none.code, 1);
  assert.match(none.stderr, /no account no-such-account.*HTTP 404/);
});

test('an account\'s key cannot manage accounts or read /metrics: 403', async () => {
  for (const args of [['account', 'list'], ['account', 'create', 'sneaky'], ['account', 'key', acme],
    ['account', 'rm', acme]]) {
    const r = await as(acmeKey, args);
    assert.equal(r.code, 1, `${args.join(' ')}: ${r.stderr}`);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /^runtime: accounts are managed with the admin key \(STATE\/admin\.key\) \(forbidden, HTTP 403\); the key used came from RUNTIME_API_KEY\n$/);
  }
  const m = await d.api('GET', '/metrics', undefined, { key: acmeKey });
  assert.equal(m.status, 403);
  assert.equal(m.body.error.code, 'forbidden');
});

test('limits: a create past maxSandboxes is refused with 429, naming the limit', async () => {
  const one = accountName('one');
  const key = await createAccount(one, ['--max-sandboxes', '1']);
  const first = await as(key, ['sandbox', 'create', '--memory', '256']);
  assert.equal(first.code, 0, first.stderr);
  const second = await as(key, ['sandbox', 'create', '--memory', '256']);
  assert.equal(second.code, 1);
  assert.match(second.stderr, /maxSandboxes=1.*\(limit_reached, HTTP 429\)/);
  const dup = await d.cli(['account', 'create', one]);
  assert.equal(dup.code, 1);
  assert.match(dup.stderr, /exists.*HTTP 409/);
  assert.equal((await d.cli(['account', 'rm', one])).code, 0);
  made.delete(one);
});

test('rm: its sandbox is gone and its key is refused', async () => {
  const r = await d.cli(['account', 'rm', acme]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, new RegExp(`^account ${acme} removed`));
  made.delete(acme);
  await waitFor(() => cgroupDirs(d.stateDir).filter((c) => c.endsWith(acmeSandbox)).length === 0,
    { what: `the cgroups of ${acmeSandbox} to go` });
  const l = await as(acmeKey, ['sandbox', 'list']);
  assert.equal(l.code, 1);
  assert.match(l.stderr, /HTTP 401/);
  const list = await d.cli(['account', 'list', '--json']);
  assert.ok(!JSON.parse(list.stdout).some((a) => a.name === acme));
  const again = await d.cli(['account', 'rm', acme]);
  assert.equal(again.code, 1);
  assert.match(again.stderr, /no account.*HTTP 404/);
});

test('usage errors exit 2 with one line naming the fix; --help exits 0', async () => {
  const cases = [
    [['account'], null],
    [['account', 'frob'], /unknown command 'account frob'/],
    [['account', 'create'], /missing the account NAME/],
    [['account', 'create', 'a', 'b'], /unexpected argument 'b'/],
    [['account', 'create', 'a', '--max-sandboxes', 'many'], /bad value 'many' for --max-sandboxes/],
    [['account', 'create', 'a', '--max-memory', '0'], /bad value '0' for --max-memory: at least 1/],
    [['account', 'create', 'a', '--max-cpus', '2'], /unknown option '--max-cpus'/],
    [['account', 'list', 'x'], /unexpected argument 'x'/],
    [['account', 'key'], /missing the account NAME/],
    [['account', 'rm'], /missing the account NAME/],
    [['account', 'rm', 'a', '--json'], /unknown option '--json'/],
    [['account', 'rm', 'default'], /the account default is the admin's own/],
  ];
  for (const [args, re] of cases) {
    const r = await d.cli(args);
    if (re) assertUsage(r, re, args.join(' '));
    else {
      assert.equal(r.code, 2, args.join(' '));
      assert.match(r.stderr, /^Usage: runtime account COMMAND/);
    }
  }
  for (const sub of ['create', 'list', 'key', 'rm']) {
    const h = await d.cli(['account', sub, '--help']);
    assert.equal(h.code, 0);
    assert.match(h.stdout, new RegExp(`^Usage: runtime account ${sub} `));
  }
  const top = await d.cli(['--help']);
  assert.match(top.stdout, /account create NAME/);
});
