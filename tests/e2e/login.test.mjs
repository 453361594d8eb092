// Device login (docs/login.md): Runtime Cloud's /api/connect/* on a real daemon, the
// person's /v1/connect/* approval, the key it mints (rtcloud_..., a connection of one
// account, revocable alone), and the CLIs' login: this repository's `runtime login`,
// the TypeScript `withruntime login`, and Runtime Cloud's official Python SDK finding
// the saved key. Every wait polls; traffic stays on loopback.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';

import { startDaemon, stopDaemon, isRoot, waitFor, run, ROOT, RUNTIME } from './lib.mjs';

const skip = isRoot() ? false : 'must run as root (runtimed needs it)';
const KEY_RE = /^rtcloud_[a-f0-9-]{36}_[A-Za-z0-9_-]{43}$/;
const PY = '/opt/runtime-test/venv-cloud/bin/python';
const TS_CLI = path.join(ROOT, 'sdk', 'typescript', 'bin', 'withruntime.js');
const OFFICIAL_AUTH = 'https://withruntime.com';

let d;
let keyA, keyB;
const tmpDirs = [];

function tempDir(prefix) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  tmpDirs.push(dir);
  return dir;
}

function keyPair(bits = 2048) {
  return crypto.generateKeyPairSync('rsa', {
    modulusLength: bits,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
}

const post = (p, body, opts = {}) => d.api('POST', p, body, { key: null, ...opts });

async function startRequest(extra = {}) {
  const pair = keyPair();
  const r = await post('/api/connect/start', { agentName: 'test agent', publicKey: pair.publicKey,
    machine: 'test-box', ...extra });
  assert.equal(r.status, 200, r.text);
  return { ...r.body, pair };
}

/** Polls token (no faster than the daemon answers truly) until it is not pending. */
async function settled(deviceCode) {
  return waitFor(async () => {
    const r = await post('/api/connect/token', { deviceCode });
    assert.equal(r.status, 200, r.text);
    return r.body.status === 'pending' ? false : r.body;
  }, { timeoutMs: 20000, intervalMs: 2100, what: 'the token poll to settle' });
}

function decrypt(pair, encryptedKey) {
  return crypto.privateDecrypt({ key: pair.privateKey, oaepHash: 'sha256' },
    Buffer.from(encryptedKey, 'base64')).toString('utf8');
}

before(async () => {
  if (skip) return;
  d = await startDaemon({ prefix: 'runtime-e2e-login-' });
  for (const name of ['acme', 'other']) {
    const r = await d.api('POST', '/v1/accounts', { name });
    assert.equal(r.status, 201, r.text);
    if (name === 'acme') keyA = r.body.apiKey;
    else keyB = r.body.apiKey;
  }
});

after(async () => {
  if (d) await stopDaemon(d);
  for (const dir of tmpDirs) fs.rmSync(dir, { recursive: true, force: true });
});

test('start answers Runtime Cloud\'s shapes; token is pending', { skip }, async () => {
  const s = await startRequest();
  assert.match(s.deviceCode, /^[A-Za-z0-9_-]{43}$/);
  assert.match(s.userCode, /^[A-F0-9]{4}(-[A-F0-9]{4}){2}$/);
  assert.equal(s.verificationUri, `http://127.0.0.1:${d.port}/connect?code=${s.userCode}`);
  assert.ok(s.expiresAt > Date.now() + 14 * 60000 && s.expiresAt <= Date.now() + 15 * 60000, String(s.expiresAt));
  const t = await post('/api/connect/token', { deviceCode: s.deviceCode });
  assert.equal(t.status, 200, t.text);
  assert.deepEqual(t.body, { status: 'pending' });
  const g = await d.api('GET', `/v1/connect/requests/${s.userCode}`, undefined, { key: keyA });
  assert.equal(g.status, 200, g.text);
  assert.equal(g.body.status, 'pending');
  assert.equal(g.body.machine, 'test-box');
  assert.equal(g.body.agentName, 'test agent');
  assert.equal(g.body.address, '127.0.0.1');
  assert.ok(Date.parse(g.body.expiresAt) > Date.now());
  const unauth = await d.api('GET', `/v1/connect/requests/${s.userCode}`, undefined, { key: null });
  assert.equal(unauth.status, 401);
});

test('approve: the sealed key decrypts, is the account\'s alone, confirm and disconnect', { skip }, async () => {
  const s = await startRequest();
  const a = await d.api('POST', `/v1/connect/requests/${s.userCode}:approve`, {}, { key: keyA });
  assert.equal(a.status, 200, a.text);
  assert.equal(a.body.status, 'approved');
  assert.equal(a.body.account, 'acme');
  const again = await d.api('POST', `/v1/connect/requests/${s.userCode}:approve`, {}, { key: keyA });
  assert.equal(again.status, 409, again.text);
  const t = await settled(s.deviceCode);
  assert.equal(t.status, 'connected');
  assert.equal(t.connectionId, a.body.connectionId);
  assert.equal(t.orgId, 'acme');
  const key = decrypt(s.pair, t.encryptedKey);
  assert.match(key, KEY_RE);
  // The key works for acme's sandboxes, and not for another account's.
  const mine = await d.api('POST', '/v1/sandboxes', { name: 'login-a' }, { key });
  assert.equal(mine.status, 201, mine.text);
  d.track(mine.body.id);
  const theirs = await d.api('POST', '/v1/sandboxes', { name: 'login-b' }, { key: keyB });
  assert.equal(theirs.status, 201, theirs.text);
  d.track(theirs.body.id);
  assert.equal((await d.api('GET', `/v1/sandboxes/${theirs.body.id}`, undefined, { key })).status, 404);
  assert.equal((await d.api('GET', `/v1/sandboxes/${mine.body.id}`, undefined, { key: keyA })).status, 200);
  const me = await d.api('GET', '/v1/me', undefined, { key });
  assert.deepEqual(me.body, { orgId: 'acme', orgName: 'acme', principalId: 'acme', credentialId: t.connectionId, role: 'owner' });
  // The sealed copy stays until confirm, then goes.
  const t2 = await settled(s.deviceCode);
  assert.equal(t2.encryptedKey, t.encryptedKey);
  const c = await post('/api/connect/confirm', {}, { key });
  assert.equal(c.status, 200, c.text);
  assert.deepEqual(c.body, { connected: true });
  assert.equal((await settled(s.deviceCode)).status, 'expired');
  const g = await d.api('GET', `/v1/connect/requests/${s.userCode}`, undefined, { key: keyA });
  assert.equal(g.body.confirmed, true);
  // Listed for its account only.
  const list = await d.api('GET', '/v1/connect/connections', undefined, { key: keyA });
  assert.ok(list.body.data.some((x) => x.id === t.connectionId && x.machine === 'test-box'), list.text);
  const listB = await d.api('GET', '/v1/connect/connections', undefined, { key: keyB });
  assert.ok(!listB.body.data.some((x) => x.id === t.connectionId));
  assert.equal((await d.api('DELETE', `/v1/connect/connections/${t.connectionId}`, undefined, { key: keyB })).status, 404);
  // Disconnect revokes that key alone.
  const dc = await post('/api/connect/disconnect', {}, { key });
  assert.equal(dc.status, 200, dc.text);
  assert.deepEqual(dc.body, { disconnected: true });
  assert.equal((await d.api('GET', '/v1/sandboxes', undefined, { key })).status, 401);
  assert.equal((await post('/api/connect/confirm', {}, { key })).status, 401);
  assert.equal((await d.api('GET', '/v1/sandboxes', undefined, { key: keyA })).status, 200);
  assert.match(d.log(), /connect: request \S+ approved by acme for account acme: connection/);
  // Their owners remove them (the admin key, which cleans up after the file, is neither's).
  assert.equal((await d.api('DELETE', `/v1/sandboxes/${mine.body.id}`, undefined, { key: keyA })).status, 200);
  assert.equal((await d.api('DELETE', `/v1/sandboxes/${theirs.body.id}`, undefined, { key: keyB })).status, 200);
  d.sandboxes.delete(mine.body.id);
  d.sandboxes.delete(theirs.body.id);
});

test('deny, cancel, an account approving for another, unknown codes', { skip }, async () => {
  const s = await startRequest();
  const no = await d.api('POST', `/v1/connect/requests/${s.userCode}:approve`, { account: 'acme' }, { key: keyB });
  assert.equal(no.status, 403, no.text);
  const dn = await d.api('POST', `/v1/connect/requests/${s.userCode}:deny`, undefined, { key: keyB });
  assert.equal(dn.status, 200, dn.text);
  assert.deepEqual(dn.body, { status: 'denied' });
  assert.equal((await settled(s.deviceCode)).status, 'denied');
  // The admin approves for a named account.
  const s2 = await startRequest();
  const ok = await d.api('POST', `/v1/connect/requests/${s2.userCode}:approve`, { account: 'other' });
  assert.equal(ok.status, 200, ok.text);
  assert.equal(ok.body.account, 'other');
  const c = await startRequest();
  const cancel = await post('/api/connect/token', { deviceCode: c.deviceCode, action: 'cancel' });
  assert.deepEqual(cancel.body, { status: 'canceled' });
  for (const code of ['0000-0000-0000', 'nope']) {
    const r = await d.api('GET', `/v1/connect/requests/${code}`, undefined, { key: keyA });
    assert.equal(r.status, 404, r.text);
    assert.equal(r.body.error.code, 'not_found');
    const a = await d.api('POST', `/v1/connect/requests/${code}:approve`, {}, { key: keyA });
    assert.equal(a.status, 404, a.text);
  }
  const unknown = await post('/api/connect/token', { deviceCode: 'A'.repeat(43) });
  assert.equal(unknown.status, 404, unknown.text);
  assert.equal((await post('/api/connect/token', { deviceCode: 'short' })).status, 400);
  assert.equal((await post('/api/connect/confirm', {}, { key: keyA })).status, 401, 'an account key is no connection');
  assert.equal((await post('/api/connect/disconnect', {})).status, 401);
});

test('start refuses junk and stays cheap: bad keys, unknown fields, big bodies', { skip }, async () => {
  const pair = keyPair();
  const small = crypto.generateKeyPairSync('rsa', { modulusLength: 1024, publicKeyEncoding: { type: 'spki', format: 'pem' } });
  const ec = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256', publicKeyEncoding: { type: 'spki', format: 'pem' } });
  const good = { agentName: 'a', publicKey: pair.publicKey, machine: 'm' };
  for (const [what, body] of [
    ['junk publicKey', { ...good, publicKey: 'not a key' }],
    ['a 1024-bit key', { ...good, publicKey: small.publicKey }],
    ['an EC key', { ...good, publicKey: ec.publicKey }],
    ['an unknown field', { ...good, extra: 1 }],
    ['a control character', { ...good, agentName: 'a\nb' }],
    ['a long agent name', { ...good, agentName: 'x'.repeat(81) }],
    ['no machine', { agentName: 'a', publicKey: pair.publicKey }],
    ['not an object', [1]],
  ]) {
    const r = await post('/api/connect/start', body);
    assert.equal(r.status, 400, `${what}: ${r.text}`);
    assert.equal(r.body.error.code, 'invalid_request', what);
  }
  const big = await post('/api/connect/start', { ...good, machine: 'x'.repeat(20000) });
  assert.equal(big.status, 413, big.text);
  assert.equal((await d.api('GET', '/api/connect/start', undefined, { key: null })).status, 405);
  assert.equal((await post('/api/connect/nothing', {})).status, 404);
});


/** A login CLI in the background: resolves its code once its stderr shows it. */
function loginInBackground(cmd, args, env) {
  const child = spawn(cmd, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const out = { stderr: '', stdout: '', exit: null };
  child.stdout.on('data', (b) => { out.stdout += b; });
  child.stderr.on('data', (b) => { out.stderr += b; });
  child.on('exit', (code, signal) => { out.exit = { code, signal }; });
  return { child, out };
}

/** A clean environment for a login: no key, this daemon's URL, a private config dir. */
function loginEnv(config) {
  const env = { ...process.env, RUNTIME_API_URL: d.url, XDG_CONFIG_HOME: config };
  delete env.RUNTIME_API_KEY;
  delete env.RUNTIME_AUTH_URL;
  return env;
}

async function approveFromStderr(out) {
  const m = await waitFor(() => /Check that the browser shows code ([A-F0-9-]{14}), then choose Connect agent\./.exec(out.stderr),
    { timeoutMs: 20000, what: `the login's code on its stderr (so far: ${out.stderr})` });
  assert.match(out.stderr, new RegExp(`Connect your agent: http://127\\.0\\.0\\.1:${d.port}/connect\\?code=${m[1]}`));
  const a = await d.api('POST', `/v1/connect/requests/${m[1]}:approve`, {}, { key: keyA });
  assert.equal(a.status, 200, a.text);
  await waitFor(() => out.exit, { timeoutMs: 30000, what: 'the login to exit' });
  return a.body.connectionId;
}

function savedFile(config) {
  const name = crypto.createHash('sha256').update(`${OFFICIAL_AUTH}\n${d.url}`).digest('hex');
  return path.join(config, 'runtime-cloud', `${name}.json`);
}

test('runtime login saves the key where the official SDKs look; CLI and Python SDK use it', { skip, timeout: 180000 }, async () => {
  const config = tempDir('runtime-login-cfg-');
  const env = loginEnv(config);
  const { out } = loginInBackground(RUNTIME, ['login', '--no-browser', '--agent-name', 'ci agent'], env);
  const connectionId = await approveFromStderr(out);
  assert.deepEqual(out.exit, { code: 0, signal: null }, out.stderr);
  assert.match(out.stderr, /Connected as ci agent to acme\./);
  const file = savedFile(config);
  const st = fs.statSync(file);
  assert.equal(st.mode & 0o777, 0o600);
  assert.equal(fs.statSync(path.dirname(file)).mode & 0o777, 0o700);
  const text = fs.readFileSync(file, 'utf8');
  const saved = JSON.parse(text);
  assert.equal(text, JSON.stringify(saved), 'compact JSON');
  assert.deepEqual(Object.keys(saved), ['version', 'apiOrigin', 'authOrigin', 'key', 'connectionId', 'orgId', 'agentName']);
  assert.equal(saved.version, 1);
  assert.equal(saved.apiOrigin, d.url);
  assert.equal(saved.authOrigin, OFFICIAL_AUTH);
  assert.match(saved.key, KEY_RE);
  assert.equal(saved.connectionId, connectionId);
  assert.equal(saved.orgId, 'acme');
  // The CLI finds it with no RUNTIME_API_KEY; the sandbox is acme's.
  const made = await run(RUNTIME, ['sandbox', 'create', '--name', 'cli-login'], { env });
  assert.equal(made.code, 0, made.stderr);
  const id = made.stdout.trim();
  const seen = await d.api('GET', `/v1/sandboxes/${id}`, undefined, { key: keyA });
  assert.equal(seen.status, 200, seen.text);
  // Runtime Cloud's official Python SDK finds the same file for the same origin.
  if (fs.existsSync(PY)) {
    const py = await run(PY, ['-c', [
      'import withruntime',
      'rt = withruntime.Runtime()',
      'sb = rt.sandboxes.create(name="py-login")',
      'print(sb.id)',
      'print(",".join(s.id for s in rt.sandboxes.list()))',
    ].join('\n')], { env, timeoutMs: 120000 });
    assert.equal(py.code, 0, py.stderr);
    const [pyId, listed] = py.stdout.trim().split('\n');
    assert.ok(listed.split(',').includes(id) && listed.split(',').includes(pyId), py.stdout);
    assert.equal((await d.api('DELETE', `/v1/sandboxes/${pyId}`, undefined, { key: keyA })).status, 200);
  }
  assert.equal((await d.api('DELETE', `/v1/sandboxes/${id}`, undefined, { key: keyA })).status, 200);
  // A file others may read is not used.
  fs.chmodSync(file, 0o644);
  const open = await run(RUNTIME, ['sandbox', 'list'], { env: { ...env, RUNTIME_STATE_DIR: config } });
  assert.notEqual(open.code, 0, 'a group-readable saved file was used');
  fs.chmodSync(file, 0o600);
  // logout revokes it and removes the file.
  const lo = await run(RUNTIME, ['logout'], { env });
  assert.equal(lo.code, 0, lo.stderr);
  assert.ok(!fs.existsSync(file));
  assert.equal((await d.api('GET', '/v1/sandboxes', undefined, { key: saved.key })).status, 401);
});

test('runtime login without a terminal: a denial exits non-zero', { skip, timeout: 60000 }, async () => {
  const config = tempDir('runtime-login-cfg-');
  const { out } = loginInBackground(RUNTIME, ['login', '--no-browser'], loginEnv(config));
  const m = await waitFor(() => /shows code ([A-F0-9-]{14})/.exec(out.stderr), { timeoutMs: 20000, what: 'the code' });
  assert.equal((await d.api('POST', `/v1/connect/requests/${m[1]}:deny`, undefined, { key: keyA })).status, 200);
  await waitFor(() => out.exit, { timeoutMs: 30000, what: 'the login to exit' });
  assert.equal(out.exit.code, 1, out.stderr);
  assert.match(out.stderr, /declined/);
  assert.ok(!fs.existsSync(savedFile(config)));
});

// Last: it leaves the table of pending requests full.
/** POST /api/connect/start from a loopback address of the test's choosing. */
function startFrom(source, agentName) {
  const body = JSON.stringify({ agentName, publicKey: floodPair.publicKey, machine: 'm' });
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: d.port, path: '/api/connect/start', method: 'POST',
      localAddress: source, agent: false, headers: { 'content-type': 'application/json' } }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

test('a poll storm is answered pending; one address gets 8 pending requests, everyone 64', { skip }, async () => {
  const s = await startRequest();
  const a = await d.api('POST', `/v1/connect/requests/${s.userCode}:approve`, {}, { key: keyA });
  assert.equal(a.status, 200, a.text);
  const storm = await Promise.all(Array.from({ length: 20 }, () => post('/api/connect/token', { deviceCode: s.deviceCode })));
  assert.ok(storm.filter((r) => r.body.status === 'pending').length >= 19, JSON.stringify(storm.map((r) => r.body.status)));
  assert.equal((await settled(s.deviceCode)).status, 'connected');
  // One address: whatever it has pending now, up to 8, then 429 naming the limit.
  let refused = null;
  for (let i = 0; i < 10 && !refused; i++) {
    const r = await startFrom('127.0.0.1', `flood ${i}`);
    if (r.status === 429) refused = r;
    else assert.equal(r.status, 200, JSON.stringify(r.body));
  }
  assert.ok(refused, 'no 429 after 10 starts from one address');
  assert.equal(refused.body.error.code, 'rate_limited');
  assert.match(refused.body.error.message, /8 connection requests from 127\.0\.0\.1 are waiting/);
  // Another address still starts one: the first could not lock it out.
  assert.equal((await startFrom('127.0.0.2', 'neighbour')).status, 200);
  // Many addresses fill the whole table: 64 pending, then 429 for anyone.
  refused = null;
  for (let i = 0; i < 80 && !refused; i++) {
    const r = await startFrom(`127.0.1.${1 + Math.floor(i / 8)}`, `crowd ${i}`);
    if (r.status === 429) refused = r;
    else assert.equal(r.status, 200, JSON.stringify(r.body));
  }
  assert.ok(refused, 'no 429 after 80 starts from 10 addresses');
  assert.match(refused.body.error.message, /64 connection requests are waiting/);
});
const floodPair = keyPair();
