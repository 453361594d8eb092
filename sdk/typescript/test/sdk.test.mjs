// The SDK against the real daemon: every API call once, and the typed errors.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { startDaemon, stopDaemon, isRoot, token, sdk, runtimeFor, countingFetch, HELLO_SERVER, initializeRequest } from './helpers.mjs';

const { Sandbox, CommandError, NotFoundError, ConflictError, UnauthorizedError, BadRequestError, RuntimeError } = sdk;
const skip = isRoot() ? false : 'needs root (runtimed does)';
let d, rt;

before(async () => {
  if (skip) return;
  d = await startDaemon({ prefix: 'runtime-sdk-ts-' });
  rt = runtimeFor(d);
});
after(() => stopDaemon(d));

test('create, get, list with labels, getOrCreate, delete', { skip }, async () => {
  const name = token('box');
  const sbx = await rt.sandboxes.create({ name, memoryMiB: 256, labels: { team: 'sdk' } });
  d.track(sbx.id);
  assert.equal(sbx.name, name);
  assert.equal(sbx.status, 'running');
  assert.equal(sbx.info.memoryMiB, 256);
  assert.equal((await rt.sandboxes.get(name)).id, sbx.id);
  assert.equal((await rt.sandboxes.get(sbx.id)).name, name);

  const again = await rt.sandboxes.getOrCreate(name, { memoryMiB: 512 });
  assert.equal(again.id, sbx.id, 'getOrCreate finds the existing sandbox');
  const listed = await rt.sandboxes.list({ labels: { team: 'sdk' } });
  assert.deepEqual(listed.map((s) => s.id), [sbx.id]);
  assert.deepEqual(await rt.sandboxes.list({ labels: { team: 'nobody' } }), []);

  await sbx.delete();
  await assert.rejects(rt.sandboxes.get(sbx.id), NotFoundError);
  await assert.rejects(sbx.delete(), NotFoundError, 'a second delete is a 404');
  await sbx.delete({ missingOk: true });
});

test('exec: output, env, cwd, stdin; check throws CommandError', { skip }, async () => {
  const sbx = await rt.sandboxes.create();
  d.track(sbx.id);
  const r = await sbx.exec(['sh', '-c', 'echo "$GREETING from $(pwd)"; cat; echo oops >&2'],
    { env: { GREETING: 'hi' }, cwd: '/tmp', stdin: 'in\n', check: true });
  assert.equal(r.exitCode, 0);
  assert.equal(r.stdout, 'hi from /tmp\nin\n');
  assert.equal(r.stderr, 'oops\n');
  assert.equal(typeof r.durationMs, 'number');

  const soft = await sbx.exec(['sh', '-c', 'exit 3']);
  assert.equal(soft.exitCode, 3, 'without check a failure is returned');
  const e = await sbx.exec(['sh', '-c', 'echo out; echo bad >&2; exit 7'], { check: true }).catch((x) => x);
  assert.ok(e instanceof CommandError && e instanceof RuntimeError);
  assert.equal(e.exitCode, 7);
  assert.equal(e.stdout, 'out\n');
  assert.equal(e.stderr, 'bad\n');
  assert.match(e.message, /status 7.*bad/s);

  const slow = await sbx.exec(['sleep', '30'], { timeoutMs: 300, check: true }).catch((x) => x);
  assert.ok(slow instanceof CommandError && slow.timedOut, 'a command past its timeoutMs is a CommandError');
  await sbx.delete();
});

test('files: write with mode, read back bytes, text and mode', { skip }, async () => {
  const sbx = await rt.sandboxes.create();
  d.track(sbx.id);
  await sbx.files.write('/workspace/run.sh', '#!/bin/sh\necho ran\n', { mode: 0o755 });
  assert.equal((await sbx.exec(['/workspace/run.sh'], { check: true })).stdout, 'ran\n');
  assert.equal((await sbx.exec(['stat', '-c', '%a', '/workspace/run.sh'])).stdout.trim(), '755');
  await sbx.files.write('notes.txt', 'plain', { mode: '0600' }); // relative: under /workspace
  const { data, mode } = await sbx.files.readWithMode('/workspace/notes.txt');
  assert.equal(new TextDecoder().decode(data), 'plain');
  assert.equal(mode, 0o600);

  const bytes = Uint8Array.from({ length: 256 }, (_, i) => i);
  await sbx.files.write('bin.dat', bytes);
  assert.deepEqual(await sbx.files.read('bin.dat'), bytes);
  assert.equal(await sbx.files.readText('run.sh'), '#!/bin/sh\necho ran\n');
  await assert.rejects(sbx.files.read('missing.txt'), NotFoundError);
  await assert.rejects(sbx.files.write('x', 'y', { mode: '999' }), BadRequestError);
  await sbx.delete();
});

test('network get/set, pause/resume, events', { skip }, async () => {
  const sbx = await rt.sandboxes.create({ network: { internet: false } });
  d.track(sbx.id);
  assert.deepEqual(await sbx.network.get(), { internet: false, openPorts: true });
  assert.deepEqual(await sbx.network.set({ internet: true, allow: [] }), { internet: true, allow: [], openPorts: true },
    'an empty list is kept: no host');
  assert.deepEqual(await sbx.network.set({ internet: true }), { internet: true, openPorts: true }, 'no list: any public host');
  const net = await sbx.network.set({ internet: true, allow: ['example.com'], deny: ['bad.example.com'] });
  assert.deepEqual(net, { internet: true, allow: ['example.com'], deny: ['bad.example.com'], openPorts: true });
  assert.deepEqual((await sbx.refresh()).network, { internet: true, allow: ['example.com'], deny: ['bad.example.com'] });

  assert.equal((await sbx.pause()).status, 'paused');
  assert.equal(sbx.status, 'paused');
  assert.equal((await sbx.resume()).status, 'running');

  const all = await sbx.events();
  assert.ok(Array.isArray(all) && all.length > 0, 'pause and resume are events');
  for (const e of all) assert.ok(typeof e.seq === 'number' && typeof e.kind === 'string');
  const last = all.at(-1).seq;
  assert.deepEqual(await sbx.events({ after: last }), []);
  assert.deepEqual((await sbx.events({ after: all[0].seq })).map((e) => e.seq), all.slice(1).map((e) => e.seq));
  await assert.rejects(sbx.network.set({ internet: 'yes' }), BadRequestError);
  await sbx.delete();
});

test('secrets set/list/delete; catalog; usage', { skip }, async () => {
  const name = `SDK_${Date.now()}`;
  const s = await rt.secrets.set(name, { value: 'sekrit-value', hosts: ['api.example.com'], methods: ['GET'] });
  assert.equal(s.name, name);
  const listed = (await rt.secrets.list()).find((x) => x.name === name);
  assert.deepEqual(listed.hosts, ['api.example.com']);
  assert.ok(!JSON.stringify(await rt.secrets.list()).includes('sekrit-value'), 'listing never shows values');
  await rt.secrets.delete(name);
  assert.ok(!(await rt.secrets.list()).some((x) => x.name === name));
  await assert.rejects(rt.secrets.delete(name), NotFoundError);
  await assert.rejects(rt.secrets.set('X', { value: 'v', hosts: [] }), BadRequestError);

  const cat = await rt.mcp.catalog();
  const fetchEntry = cat.find((e) => e.id === 'fetch');
  assert.ok(fetchEntry, 'the catalog has fetch');
  for (const k of ['name', 'package', 'version', 'runtime', 'command', 'egress', 'settings']) assert.ok(k in fetchEntry, k);

  const u = await rt.usage();
  assert.ok(Array.isArray(u.sandboxes) && typeof u.total === 'object');
});

test('mcp: start a custom stdio server, ready(), initialize and tools/list over its URL', { skip }, async () => {
  const sbx = await rt.sandboxes.create({ name: token('mcp') });
  d.track(sbx.id);
  await sbx.files.write('/workspace/hello-server.mjs', fs.readFileSync(HELLO_SERVER));
  await sbx.mcp.start([{ name: 'hello', command: ['node', '/workspace/hello-server.mjs'] }]);
  const g = await sbx.mcp.ready({ timeoutMs: 60_000 });
  const hello = g.servers.find((s) => s.name === 'hello');
  assert.equal(hello.status, 'ready');
  assert.deepEqual(hello.tools, ['hello']);
  assert.match(g.headers.Authorization, /^Bearer \S+$/);
  assert.deepEqual((await sbx.mcp.status()).servers.map((s) => s.name), ['hello']);

  const init = await fetch(hello.url, initializeRequest(g.headers.Authorization));
  assert.equal(init.status, 200);
  assert.match(init.headers.get('content-type'), /application\/json|text\/event-stream/);
  const initAnswer = rpcResult(await init.text());
  assert.equal(initAnswer.result.serverInfo.name, 'hello');
  const headers = { ...initializeRequest(g.headers.Authorization).headers, 'MCP-Protocol-Version': initAnswer.result.protocolVersion };
  const session = init.headers.get('mcp-session-id');
  if (session) headers['Mcp-Session-Id'] = session;
  const list = await fetch(hello.url, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }) });
  assert.equal(list.status, 200);
  assert.deepEqual(rpcResult(await list.text()).result.tools.map((t) => t.name), ['hello']);

  const noToken = await fetch(hello.url, { ...initializeRequest('Bearer wrong') });
  assert.equal(noToken.status, 401);

  await sbx.mcp.stop('hello');
  assert.equal((await sbx.mcp.status()).servers.find((s) => s.name === 'hello')?.phase ?? 'stopped', 'stopped');
  await assert.rejects(sbx.mcp.stop('nobody'), NotFoundError);
  await sbx.delete();
});

test('mcp.ready() throws McpServerError for a failed server, unless throwOnFailure is false', { skip }, async () => {
  const sbx = await rt.sandboxes.create();
  d.track(sbx.id);
  await sbx.mcp.start({ name: 'broken', command: ['/workspace/does-not-exist'] });
  const e = await sbx.mcp.ready({ timeoutMs: 60_000 }).catch((x) => x);
  assert.ok(e instanceof sdk.McpServerError, `expected McpServerError, got ${e}`);
  assert.equal(e.server, 'broken');
  assert.equal(e.serverStatus, 'failed');
  assert.match(e.message, /broken is failed/);
  const g = await sbx.mcp.ready({ throwOnFailure: false });
  assert.equal(g.servers[0].status, 'failed');
  assert.ok(g.servers[0].error);
  await sbx.delete();
});

test('mcp.logs() and mcp.followLogs(): what a server wrote on stderr, and what comes next', { skip }, async () => {
  const sbx = await rt.sandboxes.create();
  d.track(sbx.id);
  await sbx.files.write('/workspace/hello-server.mjs', fs.readFileSync(HELLO_SERVER));
  // The server copies /workspace/say to its stderr whenever the file appears.
  const script = "echo 'chatty: starting up' >&2; (while :; do if [ -f /workspace/say ]; then " +
    'cat /workspace/say >&2; rm -f /workspace/say; fi; sleep 0.05; done) & exec node /workspace/hello-server.mjs';
  await sbx.mcp.start({ name: 'chatty', command: ['sh', '-c', script] });
  await sbx.mcp.ready({ timeoutMs: 60_000 });
  assert.equal(await sbx.mcp.logs('chatty'), 'chatty: starting up\n');
  await assert.rejects(sbx.mcp.logs('nosuch'), NotFoundError);
  await assert.rejects(async () => {
    for await (const _ of sbx.mcp.followLogs('nosuch')) assert.fail('a chunk of a server that does not exist');
  }, NotFoundError);

  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(new Error('nothing came within 15 s')), 15_000);
  let seen = '';
  try {
    for await (const text of sbx.mcp.followLogs('chatty', { signal: ctl.signal })) {
      if (!seen) await sbx.files.write('/workspace/say', 'said after the follow began\n');
      seen += text;
      if (seen.includes('said after the follow began\n')) break;
    }
  } finally {
    clearTimeout(timer);
  }
  assert.ok(seen.startsWith('chatty: starting up\n'), seen);
  assert.ok(seen.includes('said after the follow began\n'), seen);
  await sbx.delete();
});

test('typed errors: wrong key, unknown sandbox, name taken, bad option', { skip }, async () => {
  const wrong = runtimeFor(d, { apiKey: 'not-the-key' });
  const e = await wrong.sandboxes.list().catch((x) => x);
  assert.ok(e instanceof UnauthorizedError && e instanceof RuntimeError);
  assert.equal(e.status, 401);
  assert.equal(e.code, 'unauthorized');

  const nf = await rt.sandboxes.get('no-such-sandbox').catch((x) => x);
  assert.ok(nf instanceof NotFoundError);
  assert.equal(nf.status, 404);
  assert.equal(nf.code, 'not_found');
  assert.match(nf.message, /no-such-sandbox/);

  const name = token('taken');
  const first = await rt.sandboxes.create({ name });
  d.track(first.id);
  const c = await rt.sandboxes.create({ name }).catch((x) => x);
  assert.ok(c instanceof ConflictError);
  assert.equal(c.status, 409);
  assert.equal(c.code, 'name_taken');

  const bad = await rt.sandboxes.create({ memoryMiB: -5 }).catch((x) => x);
  assert.ok(bad instanceof BadRequestError, `got ${bad}`);
  assert.equal(bad.status, 400);
  await first.delete();
});

test('a POST that fails is sent once; a GET 404 is not retried either', { skip }, async () => {
  const f = countingFetch();
  const counted = runtimeFor(d, { fetch: f });
  const name = token('once');
  const sbx = await counted.sandboxes.create({ name });
  d.track(sbx.id);
  await assert.rejects(counted.sandboxes.create({ name }), ConflictError);
  await assert.rejects(counted.sandboxes.get('nope'), NotFoundError);
  assert.deepEqual(f.calls, ['POST /v1/sandboxes', 'POST /v1/sandboxes', 'GET /v1/sandboxes/nope']);
  await sbx.delete();
});

test('await using deletes the sandbox at the end of the scope (disposer)', { skip }, async () => {
  // Node 20 cannot parse `await using`; examples/quickstart.ts uses it for real
  // (compiled by tsc, run in examples.test.mjs). Here: the disposer itself.
  const sbx = await rt.sandboxes.create();
  d.track(sbx.id);
  assert.equal(typeof sbx[Symbol.asyncDispose], 'function');
  await sbx[Symbol.asyncDispose]();
  await assert.rejects(rt.sandboxes.get(sbx.id), NotFoundError);
  await sbx[Symbol.asyncDispose](); // already gone: still fine
});

test('static Sandbox.create/get/getOrCreate use the environment', { skip }, async () => {
  const saved = { url: process.env.RUNTIME_API_URL, key: process.env.RUNTIME_API_KEY };
  process.env.RUNTIME_API_URL = d.url;
  process.env.RUNTIME_API_KEY = d.key;
  try {
    const name = token('static');
    const a = await Sandbox.getOrCreate(name);
    d.track(a.id);
    assert.equal((await Sandbox.get(name)).id, a.id);
    assert.equal((await Sandbox.getOrCreate(name)).id, a.id);
    const b = await Sandbox.create({ memoryMiB: 256 });
    d.track(b.id);
    assert.notEqual(b.id, a.id);
    await a.delete();
    await b.delete();
  } finally {
    for (const [k, v] of [['RUNTIME_API_URL', saved.url], ['RUNTIME_API_KEY', saved.key]]) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
});

test('the key comes from RUNTIME_STATE_DIR/admin.key when RUNTIME_API_KEY is unset', { skip }, async () => {
  const saved = { key: process.env.RUNTIME_API_KEY, dir: process.env.RUNTIME_STATE_DIR };
  delete process.env.RUNTIME_API_KEY;
  process.env.RUNTIME_STATE_DIR = d.stateDir;
  try {
    const viaFile = new sdk.Runtime({ apiUrl: d.url });
    assert.ok(Array.isArray(await viaFile.sandboxes.list()));
    process.env.RUNTIME_STATE_DIR = '/nonexistent-state';
    const none = await new sdk.Runtime({ apiUrl: d.url }).sandboxes.list().catch((x) => x);
    assert.ok(none instanceof RuntimeError);
    assert.equal(none.code, 'no_api_key');
    assert.match(none.message, /RUNTIME_API_KEY.*\/nonexistent-state\/admin\.key/);
  } finally {
    if (saved.key === undefined) delete process.env.RUNTIME_API_KEY; else process.env.RUNTIME_API_KEY = saved.key;
    if (saved.dir === undefined) delete process.env.RUNTIME_STATE_DIR; else process.env.RUNTIME_STATE_DIR = saved.dir;
  }
});

/** The JSON-RPC answer in a JSON or text/event-stream body. */
function rpcResult(text) {
  const t = text.trim();
  if (t.startsWith('{')) return JSON.parse(t);
  const data = t.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim());
  return JSON.parse(data.find((x) => x.includes('"id"')));
}
