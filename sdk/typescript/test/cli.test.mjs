// The withruntime command against the real daemon.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { startDaemon, stopDaemon, isRoot, run, PKG, HELLO_SERVER, runtimeFor, initializeRequest } from './helpers.mjs';

const skip = isRoot() ? false : 'needs root (runtimed does)';
const BIN = path.join(PKG, 'bin', 'withruntime.js');
let d;

before(async () => {
  if (!skip) d = await startDaemon({ prefix: 'runtime-sdk-ts-cli-' });
});
after(() => stopDaemon(d));

const cli = (args, env) => run(process.execPath, [BIN, ...args], { env: env ?? d.env(), timeoutMs: 120_000 });

test('sandbox run --keep -- echo ready: prints ready, and the id on stderr; the sandbox stays', { skip }, async () => {
  const r = await cli(['sandbox', 'run', '--keep', '--', 'echo', 'ready']);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, 'ready\n');
  const id = r.stderr.trim();
  assert.match(id, /^\S+$/);
  d.track(id);
  assert.equal((await d.api('GET', `/v1/sandboxes/${id}`)).status, 200);
  await d.remove(id);
});

test('sandbox run without --keep deletes the sandbox and exits with the command status', { skip }, async () => {
  const before_ = (await d.api('GET', '/v1/sandboxes')).body.data.length;
  const r = await cli(['sandbox', 'run', '--label', 'k=v', '--', 'sh', '-c', 'echo out; echo err >&2; exit 4']);
  assert.equal(r.code, 4);
  assert.equal(r.stdout, 'out\n');
  assert.equal(r.stderr, 'err\n');
  assert.equal((await d.api('GET', '/v1/sandboxes')).body.data.length, before_);
});

test('sandbox mcp ID start NAME=CMD: waits, prints URL, header and the claude line', { skip }, async () => {
  const rt = runtimeFor(d);
  const sbx = await rt.sandboxes.create({ name: 'cli-mcp' });
  d.track(sbx.id);
  await sbx.files.write('/workspace/hello-server.mjs', fs.readFileSync(HELLO_SERVER));
  const r = await cli(['sandbox', 'mcp', 'cli-mcp', 'start', "hello=node '/workspace/hello-server.mjs'"]);
  assert.equal(r.code, 0, r.stderr + r.stdout);
  const url = /^hello\tready\t(http\S+)$/m.exec(r.stdout)?.[1];
  assert.ok(url, r.stdout);
  const auth = /^Authorization: (Bearer \S+)$/m.exec(r.stdout)?.[1];
  assert.ok(auth, r.stdout);
  assert.ok(r.stdout.includes(`claude mcp add --transport http hello ${url} --header "Authorization: ${auth}"`), r.stdout);
  const init = await fetch(url, initializeRequest(auth));
  assert.equal(init.status, 200);

  const st = await cli(['sandbox', 'mcp', 'cli-mcp', '--json']);
  assert.equal(JSON.parse(st.stdout).servers[0].status, 'ready');
  await sbx.delete();
});

test('sandbox mcp start: a failed server exits 1; --secret for an unknown server is a usage error', { skip }, async () => {
  const rt = runtimeFor(d);
  const sbx = await rt.sandboxes.create();
  d.track(sbx.id);
  const r = await cli(['sandbox', 'mcp', sbx.id, 'start', 'bad=/nonexistent/server']);
  assert.equal(r.code, 1);
  assert.match(r.stdout, /^bad\tfailed\t/m);
  const u = await cli(['sandbox', 'mcp', sbx.id, 'start', 'fetch', '--secret', 'other.X=Y']);
  assert.equal(u.code, 2);
  assert.match(u.stderr, /--secret takes SERVER\.ENV=SECRET/);
  await sbx.delete();
});

test('--help, --trial, usage errors and API errors', async () => {
  const env = { ...process.env, RUNTIME_API_URL: 'http://127.0.0.1:1', RUNTIME_API_KEY: 'x' };
  const h = await cli(['--help'], env);
  assert.equal(h.code, 0);
  assert.match(h.stdout, /withruntime sandbox run \[--keep\]/);
  const t = await cli(['--trial'], env);
  assert.equal(t.code, 0);
  assert.match(t.stderr, /there is no trial: runtime is self-hosted/);
  const u = await cli(['sandbox', 'run', 'echo'], env);
  assert.equal(u.code, 2);
  assert.match(u.stderr, /needs a command after --/);
  const b = await cli(['bogus'], env);
  assert.equal(b.code, 2);
});

test('an API error is one line on stderr and exit 1', { skip }, async () => {
  const r = await cli(['sandbox', 'rm', 'no-such-box']);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /^withruntime: no sandbox no-such-box.*\n$/);
  const w = await cli(['sandbox', 'list'], d.env({ RUNTIME_API_KEY: 'wrong' }));
  assert.equal(w.code, 1);
  assert.match(w.stderr, /missing or wrong API key/);
});

test('login with a key given (RUNTIME_API_KEY) only checks the daemon and the key and says where they come from; login --trial says there is no trial', { skip }, async () => {
  const r = await cli(['login']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, new RegExp(`^connected to runtimed at ${d.url.replace(/[.]/g, '\\.')} \\(from RUNTIME_API_URL\\), key from RUNTIME_API_KEY: \\d+\\+? sandbox`));
  assert.match(r.stdout, /there is no device login; unset RUNTIME_API_KEY/);
  const w = await cli(['login'], d.env({ RUNTIME_API_KEY: 'wrong' }));
  assert.equal(w.code, 1);
  assert.match(w.stderr, /missing or wrong API key/);
  const t = await cli(['login', '--trial'], d.env({ RUNTIME_API_KEY: 'wrong' }));
  assert.equal(t.code, 0);
  assert.match(t.stderr, /there is no trial: runtime is self-hosted/);
});
