// withruntime login and logout against the real daemon (docs/login.md): the device
// login, approved through the API with an account's key as a person would on /connect;
// the saved file (path, mode, content) shared with the C CLI's `runtime login`; the
// SDK finding the key for its own origin; logout revoking it. Every wait polls; all
// traffic stays on loopback; no browser is opened (no terminal, --no-browser).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { startDaemon, stopDaemon, isRoot, run, waitFor, PKG, REPO, sdk } from './helpers.mjs';

const skip = isRoot() ? false : 'needs root (runtimed does)';
const BIN = path.join(PKG, 'bin', 'withruntime.js');
const C_CLI = path.join(REPO, 'build', 'runtime');
const KEY_RE = /^rtcloud_[a-f0-9-]{36}_[A-Za-z0-9_-]{43}$/;
const OFFICIAL_AUTH = 'https://withruntime.com';

let d, keyA, keyB, emptyState;
const tmpDirs = [];

function tempDir(prefix) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  tmpDirs.push(dir);
  return dir;
}

before(async () => {
  if (skip) return;
  d = await startDaemon({ prefix: 'runtime-sdk-ts-login-' });
  for (const name of ['acme', 'other']) {
    const r = await d.api('POST', '/v1/accounts', { name });
    assert.equal(r.status, 201, r.text);
    if (name === 'acme') keyA = r.body.apiKey;
    else keyB = r.body.apiKey;
  }
  emptyState = tempDir('withruntime-login-state-');
});

after(async () => {
  if (d) await stopDaemon(d);
  for (const dir of tmpDirs) fs.rmSync(dir, { recursive: true, force: true });
});

/** No key, this daemon's URL, a private config dir; no admin.key to fall back on. */
function loginEnv(config, extra = {}) {
  const env = { ...process.env, RUNTIME_API_URL: d.url, XDG_CONFIG_HOME: config, RUNTIME_STATE_DIR: emptyState, ...extra };
  delete env.RUNTIME_API_KEY;
  delete env.RUNTIME_AUTH_URL;
  return env;
}

const cli = (args, env) => run(process.execPath, [BIN, ...args], { env, timeoutMs: 120_000 });

/** A login in the background, without a terminal: its output as it comes, and its exit. */
function inBackground(cmd, args, env) {
  const child = spawn(cmd, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const out = { stderr: '', stdout: '', exit: null };
  child.stdout.on('data', (b) => { out.stdout += b; });
  child.stderr.on('data', (b) => { out.stderr += b; });
  child.on('exit', (code, signal) => { out.exit = { code, signal }; });
  return out;
}

const tsLogin = (args, env) => inBackground(process.execPath, [BIN, 'login', ...args], env);

/** The code the login printed, once it did (and the link, checked). */
async function codeFrom(out) {
  const m = await waitFor(() => /Check that the browser shows code ([A-F0-9-]{14}), then choose Connect agent\./.exec(out.stderr),
    { timeoutMs: 20000, what: `the login's code on its stderr (so far: ${out.stderr})` });
  assert.match(out.stderr, new RegExp(`^Connect your agent: http://127\\.0\\.0\\.1:${d.port}/connect\\?code=${m[1]}\\n`));
  return m[1];
}

/** Approves the login's request as an account would, then waits for the login to end. */
async function approve(out, key) {
  const code = await codeFrom(out);
  const a = await d.api('POST', `/v1/connect/requests/${code}:approve`, {}, { key });
  assert.equal(a.status, 200, a.text);
  await waitFor(() => out.exit, { timeoutMs: 30000, what: 'the login to exit' });
  return a.body.connectionId;
}

function savedFile(config) {
  const name = crypto.createHash('sha256').update(`${OFFICIAL_AUTH}\n${d.url}`).digest('hex');
  return path.join(config, 'runtime-cloud', `${name}.json`);
}

/** Runs fn with process.env changed as given (undefined: unset), for the in-process SDK. */
async function withEnv(changes, fn) {
  const old = Object.fromEntries(Object.keys(changes).map((k) => [k, process.env[k]]));
  for (const [k, v] of Object.entries(changes)) if (v === undefined) delete process.env[k]; else process.env[k] = v;
  try {
    return await fn();
  } finally {
    for (const [k, v] of Object.entries(old)) if (v === undefined) delete process.env[k]; else process.env[k] = v;
  }
}

const sdkEnv = (config) => ({ RUNTIME_API_KEY: undefined, RUNTIME_AUTH_URL: undefined, RUNTIME_API_URL: d.url,
  XDG_CONFIG_HOME: config, RUNTIME_STATE_DIR: emptyState });

test('login --no-browser: approved, the key is saved as the official SDKs save it; sandbox run, the SDK, logout', { skip, timeout: 180000 }, async () => {
  const config = tempDir('withruntime-login-cfg-');
  const env = loginEnv(config);
  // another account's sandbox, which the login's key must not see
  const theirs = await d.api('POST', '/v1/sandboxes', { name: 'ts-login-theirs' }, { key: keyB });
  assert.equal(theirs.status, 201, theirs.text);
  d.track(theirs.body.id);

  const out = tsLogin(['--no-browser', '--agent-name', 'ts agent'], env);
  const connectionId = await approve(out, keyA);
  assert.deepEqual(out.exit, { code: 0, signal: null }, out.stderr);
  assert.match(out.stderr, /\nConnected as ts agent to acme\.\n$/);
  assert.equal(out.stdout, '');

  const file = savedFile(config);
  assert.equal(fs.statSync(file).mode & 0o777, 0o600);
  assert.equal(fs.statSync(path.dirname(file)).mode & 0o777, 0o700);
  assert.deepEqual(fs.readdirSync(path.dirname(file)), [path.basename(file)], 'no temporary file left');
  const text = fs.readFileSync(file, 'utf8');
  const saved = JSON.parse(text);
  assert.equal(text, JSON.stringify(saved), 'compact JSON');
  assert.deepEqual(Object.keys(saved), ['version', 'apiOrigin', 'authOrigin', 'key', 'connectionId', 'orgId', 'agentName']);
  assert.deepEqual({ ...saved, key: 'k' }, { version: 1, apiOrigin: d.url, authOrigin: OFFICIAL_AUTH, key: 'k', connectionId,
    orgId: 'acme', agentName: 'ts agent' });
  assert.match(saved.key, KEY_RE);
  const me = await d.api('GET', '/v1/me', undefined, { key: saved.key });
  assert.equal(me.body.credentialId, connectionId, 'the request was confirmed with the new key');
  assert.equal((await d.api('GET', `/v1/connect/requests/${/code=([A-F0-9-]+)/.exec(out.stderr)[1]}`, undefined, { key: keyA })).body.confirmed, true);

  // The seed's promise: one approval, then `npx withruntime sandbox run --keep -- echo ready`.
  const r = await cli(['sandbox', 'run', '--keep', '--', 'echo', 'ready'], env);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, 'ready\n');
  const kept = r.stderr.trim();
  d.track(kept);
  assert.equal((await d.api('GET', `/v1/sandboxes/${kept}`, undefined, { key: keyA })).status, 200, 'the sandbox is acme\'s');

  // The SDK with no key finds the saved one for its own origin, and sees acme's sandboxes only.
  await withEnv(sdkEnv(config), async () => {
    const rt = new sdk.Runtime();
    const made = await rt.sandboxes.create({ name: 'ts-login-sdk' });
    d.track(made.id);
    const ids = (await (await rt.sandboxes.list()).toArray()).map((s) => s.id);
    assert.ok(ids.includes(kept) && ids.includes(made.id), ids.join(','));
    assert.ok(!ids.includes(theirs.body.id), 'another account\'s sandbox is listed');
    assert.equal((await d.api('GET', `/v1/sandboxes/${made.id}`, undefined, { key: keyA })).status, 200);
    // An explicit key and RUNTIME_API_KEY come first.
    const asB = await (await new sdk.Runtime({ apiKey: keyB }).sandboxes.list()).toArray();
    assert.ok(asB.some((s) => s.id === theirs.body.id));
    await withEnv({ RUNTIME_API_KEY: keyB }, async () => {
      assert.ok((await (await new sdk.Runtime().sandboxes.list()).toArray()).some((s) => s.id === theirs.body.id));
    });
    // Another origin of the same daemon has no saved login: the key is not sent there.
    const other = await new sdk.Runtime({ baseUrl: `http://localhost:${d.port}` }).sandboxes.list().catch((e) => e);
    assert.ok(other instanceof sdk.RuntimeError, String(other));
    assert.equal(other.code, 'missing_api_key');
    assert.match(other.message, /npx withruntime login/);
    await made.delete();
  });

  // A file others may read is ignored (by the CLI and the SDK), and so is a link to it.
  fs.chmodSync(file, 0o644);
  const open = await cli(['sandbox', 'list'], env);
  assert.equal(open.code, 1, 'a group-readable saved file was used');
  assert.match(open.stderr, /must be private to your user.*npx withruntime login/);
  await withEnv(sdkEnv(config), async () => {
    const e = await new sdk.Runtime().sandboxes.list().catch((x) => x);
    assert.equal(e.code, 'missing_api_key', String(e));
  });
  fs.chmodSync(file, 0o600);
  const linked = tempDir('withruntime-login-link-');
  fs.mkdirSync(path.join(linked, 'runtime-cloud'), { mode: 0o700 });
  fs.symlinkSync(file, savedFile(linked));
  const viaLink = await cli(['sandbox', 'list'], loginEnv(linked));
  assert.equal(viaLink.code, 1, 'a link to a saved file was used');
  assert.match(viaLink.stderr, /a link is not taken/);

  // logout refuses while RUNTIME_API_KEY is set; then revokes the key and removes the file.
  const refused = await cli(['logout'], { ...env, RUNTIME_API_KEY: keyA });
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /RUNTIME_API_KEY/);
  assert.ok(fs.existsSync(file));
  const lo = await cli(['logout'], env);
  assert.equal(lo.code, 0, lo.stderr);
  assert.match(lo.stderr, /^Logged out/);
  assert.ok(!fs.existsSync(file));
  assert.equal((await d.api('GET', '/v1/sandboxes', undefined, { key: saved.key })).status, 401);
  const again = await cli(['logout'], env);
  assert.equal(again.code, 1);
  assert.match(again.stderr, /no saved connection/);
  assert.equal((await d.api('DELETE', `/v1/sandboxes/${kept}`, undefined, { key: keyA })).status, 200);
  assert.equal((await d.api('DELETE', `/v1/sandboxes/${theirs.body.id}`, undefined, { key: keyB })).status, 200);
});

test('a denied request exits 1 and saves nothing', { skip, timeout: 60000 }, async () => {
  const config = tempDir('withruntime-login-cfg-');
  const out = tsLogin(['--no-browser'], loginEnv(config));
  const code = await codeFrom(out);
  assert.equal((await d.api('POST', `/v1/connect/requests/${code}:deny`, undefined, { key: keyA })).status, 200);
  await waitFor(() => out.exit, { timeoutMs: 30000, what: 'the login to exit' });
  assert.equal(out.exit.code, 1, out.stderr);
  assert.match(out.stderr, /withruntime: the connection was declined\n$/);
  assert.ok(!fs.existsSync(savedFile(config)));
});

test('the C CLI\'s saved login is the TS SDK\'s and the TS CLI\'s, and the other way round', { skip, timeout: 180000 }, async () => {
  // runtime login (C) -> the TS SDK and withruntime use it -> withruntime logout revokes it.
  const config = tempDir('withruntime-login-cfg-');
  const env = loginEnv(config);
  const c = inBackground(C_CLI, ['login', '--no-browser'], env);
  await approve(c, keyB);
  assert.equal(c.exit.code, 0, c.stderr);
  const fromC = JSON.parse(fs.readFileSync(savedFile(config), 'utf8'));
  await withEnv(sdkEnv(config), async () => {
    const sbx = await new sdk.Runtime().sandboxes.create({ name: 'from-c-login' });
    d.track(sbx.id);
    assert.equal((await d.api('GET', `/v1/sandboxes/${sbx.id}`, undefined, { key: keyB })).status, 200, 'the sandbox is other\'s');
    await sbx.delete();
  });
  const ls = await cli(['sandbox', 'list'], env);
  assert.equal(ls.code, 0, ls.stderr);
  const lo = await cli(['logout'], env);
  assert.equal(lo.code, 0, lo.stderr);
  assert.ok(!fs.existsSync(savedFile(config)));
  assert.equal((await d.api('GET', '/v1/sandboxes', undefined, { key: fromC.key })).status, 401);

  // withruntime login -> runtime (C) uses it -> runtime logout revokes it.
  const ts = tsLogin(['--no-browser'], env);
  await approve(ts, keyA);
  assert.equal(ts.exit.code, 0, ts.stderr);
  const fromTs = JSON.parse(fs.readFileSync(savedFile(config), 'utf8'));
  const made = await run(C_CLI, ['sandbox', 'create', '--name', 'from-ts-login'], { env });
  assert.equal(made.code, 0, made.stderr);
  const id = made.stdout.trim();
  d.track(id);
  assert.equal((await d.api('GET', `/v1/sandboxes/${id}`, undefined, { key: keyA })).status, 200, 'the sandbox is acme\'s');
  assert.equal((await d.api('DELETE', `/v1/sandboxes/${id}`, undefined, { key: keyA })).status, 200);
  const clo = await run(C_CLI, ['logout'], { env });
  assert.equal(clo.code, 0, clo.stderr);
  assert.ok(!fs.existsSync(savedFile(config)));
  assert.equal((await d.api('GET', '/v1/sandboxes', undefined, { key: fromTs.key })).status, 401);
});

test('a link that is not the daemon\'s own /connect page is refused; a bad --agent-name is a usage error', { skip }, async () => {
  // A loopback stand-in for a daemon whose start answers a link elsewhere.
  const code = 'ABCD-EF01-2345';
  const fake = http.createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ verificationUri: `http://evil.example/connect?code=${code}`, deviceCode: 'A'.repeat(43),
      userCode: code, expiresAt: Date.now() + 900000 }));
  });
  await new Promise((r) => fake.listen(0, '127.0.0.1', r));
  try {
    const config = tempDir('withruntime-login-cfg-');
    const r = await cli(['login', '--no-browser'], loginEnv(config, { RUNTIME_API_URL: `http://127.0.0.1:${fake.address().port}` }));
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /not a connection request \(or its link is not this daemon's \/connect page\)/);
    assert.doesNotMatch(r.stderr, /Connect your agent/);
  } finally {
    fake.close();
  }
  const bad = await cli(['login', '--agent-name', 'a\nb'], loginEnv(tempDir('withruntime-login-cfg-')));
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /--agent-name is 1 to 80 characters/);
});

// 50 s of the CLI's own waiting, nothing of the daemon's: once, not again under the
// sanitized daemon (make check runs these files against both builds).
const sanitized = /asan/.test(process.env.RUNTIME_BUILD ?? '') && 'the CLI waits the same against any build';
test('without a terminal or --wait, login gives up after 50 s: exit 124 with the link and code', { skip: skip || sanitized, timeout: 120000 }, async () => {
  const config = tempDir('withruntime-login-cfg-');
  const out = tsLogin([], loginEnv(config));
  const code = await codeFrom(out);
  await waitFor(() => out.exit, { timeoutMs: 80000, intervalMs: 500, what: 'the login to give up' });
  assert.equal(out.exit.code, 124, out.stderr);
  assert.match(out.stderr, new RegExp(`not connected yet: open http://127\\.0\\.0\\.1:${d.port}/connect\\?code=${code}, check the code ${code}`));
  assert.ok(!fs.existsSync(savedFile(config)));
});
