// The SDK against the real daemon: every API call once, and the typed errors.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { startDaemon, stopDaemon, isRoot, token, sdk, runtimeFor, countingFetch, HELLO_SERVER, initializeRequest } from './helpers.mjs';

const { Sandbox, CommandError, NotFoundError, ConflictError, AuthenticationError, InvalidRequestError, RuntimeError } = sdk;
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
  assert.equal(sbx.info.name, name);
  assert.equal(sbx.state, 'running');
  assert.equal(sbx.info.memoryMiB, 256);
  assert.equal((await rt.sandboxes.get(name)).id, sbx.id);
  assert.equal((await rt.sandboxes.get(sbx.id)).name, name);

  const again = await rt.sandboxes.getOrCreate(name, { memoryMiB: 512 });
  assert.equal(again.id, sbx.id, 'getOrCreate finds the existing sandbox');
  assert.equal(again.info.reused, true);
  const listed = await rt.sandboxes.list({ labels: { team: 'sdk' } });
  assert.deepEqual(listed.data.map((s) => s.id), [sbx.id]);
  assert.equal(listed.nextCursor, null);
  assert.deepEqual((await rt.sandboxes.list({ labels: { team: 'nobody' } })).data, []);
  assert.deepEqual((await rt.sandboxes.list({ name })).data.map((s) => s.id), [sbx.id]);

  const gone = await sbx.delete();
  assert.deepEqual([gone.id, gone.status, gone.name], [sbx.id, 'deleted', name]);
  await assert.rejects(rt.sandboxes.get(sbx.id), NotFoundError);
  await assert.rejects(sbx.delete(), NotFoundError, 'a second delete is a 404 in runtimed');
  await sbx.delete({ missingOk: true });
});

test('exec: argv or a command line, output, env, cwd, stdin (text or bytes), streamed; check throws CommandError', { skip }, async () => {
  const sbx = await rt.sandboxes.create();
  d.track(sbx.id);
  const r = await sbx.exec(['sh', '-c', 'echo "$GREETING from $(pwd)"; cat; echo oops >&2'],
    { env: { GREETING: 'hi' }, cwd: '/tmp', stdin: 'in\n', check: true });
  assert.equal(r.exitCode, 0);
  assert.equal(r.stdout, 'hi from /tmp\nin\n');
  assert.equal(r.stderr, 'oops\n');
  assert.equal(typeof r.durationMs, 'number');
  assert.equal((await sbx.exec('echo $((6 * 7)) | tr 4 x')).stdout, 'x2\n', 'a string runs under bash -c');
  assert.equal((await sbx.exec(['od', '-An', '-tx1'], { stdin: Uint8Array.of(0, 255) })).stdout.trim(), '00 ff');

  const chunks = [];
  const streamed = await sbx.exec('echo one; echo two >&2; echo three', { onStdout: (t) => chunks.push(t), timeoutMs: 90_000 });
  assert.deepEqual([streamed.exitCode, streamed.stdout, streamed.stderr], [0, 'one\nthree\n', 'two\n']);
  assert.equal(chunks.join(''), 'one\nthree\n');
  assert.match(streamed.processId, /\S/);
  const kinds = [];
  for await (const ev of sbx.execStream(['sh', '-c', 'echo hi; exit 4'])) kinds.push(ev.type === 'exit' ? `exit ${ev.exitCode}` : ev.type);
  assert.deepEqual(kinds, ['start', 'stdout', 'exit 4']);

  const soft = await sbx.exec(['sh', '-c', 'exit 3']);
  assert.equal(soft.exitCode, 3, 'without check a failure is returned');
  const e = await sbx.exec(['sh', '-c', 'echo out; echo bad >&2; exit 7'], { check: true }).catch((x) => x);
  assert.ok(e instanceof CommandError && e instanceof RuntimeError);
  assert.equal(e.exitCode, 7);
  assert.equal(e.stdout, 'out\n');
  assert.equal(e.stderr, 'bad\n');
  assert.equal(e.message, 'Command exited with 7. bad');
  assert.equal(e.code, 'command_failed');

  const slow = await sbx.exec(['sleep', '30'], { timeoutMs: 300, check: true }).catch((x) => x);
  assert.ok(slow instanceof CommandError && slow.timedOut, 'a command past its timeoutMs is a CommandError');
  assert.equal(slow.code, 'command_timeout');
  assert.equal((await sbx.exec(['sleep', '30'], { timeoutMs: 300 })).timedOut, true, 'without check a time-out is a result');
  await sbx.delete();
});

test('files: write with mode (small and chunked), read back bytes, text and mode; list, stat, mkdir, rename, remove', { skip }, async () => {
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
  await assert.rejects(sbx.files.write('x', 'y', { mode: '999' }), InvalidRequestError);
  assert.deepEqual(await sbx.files.write('/workspace/w.txt', 'abc'), { path: '/workspace/w.txt', size: 3 });

  const big = Uint8Array.from({ length: 3 * 1_048_576 + 5 }, (_, i) => (i * 7) % 251);
  await sbx.files.write('/workspace/big.bin', big, { mode: 0o700 });
  assert.deepEqual(await sbx.files.read('/workspace/big.bin'), big);
  assert.equal((await sbx.exec(['stat', '-c', '%a %s', '/workspace/big.bin'])).stdout.trim(), `700 ${big.length}`);

  await sbx.files.mkdir('/workspace/d/e');
  await sbx.files.rename('/workspace/w.txt', '/workspace/d/e/w.txt');
  assert.equal(await sbx.files.exists('/workspace/w.txt'), false);
  assert.equal((await sbx.files.stat('/workspace/d/e/w.txt')).size, 3);
  assert.deepEqual((await sbx.files.glob('**/*.txt')).map((f) => f.path).sort(), ['/workspace/d/e/w.txt', '/workspace/notes.txt']);
  assert.ok((await sbx.files.list('/workspace')).some((f) => f.name === 'big.bin' && f.type === 'file'));
  assert.equal(await sbx.files.remove('/workspace/d', { recursive: true }), true);
  await sbx.delete();
});

test('network get/set/on/off, pause/wake/stop/restart, events', { skip }, async () => {
  const sbx = await rt.sandboxes.create({ network: { internet: false } });
  d.track(sbx.id);
  assert.deepEqual(await sbx.network.get(), { internet: false, openPorts: true });
  assert.deepEqual(await sbx.network.set({ internet: true, allow: [] }), { internet: true, allow: [], openPorts: true },
    'an empty list is kept: no host');
  assert.deepEqual(await sbx.network.set({ internet: true }), { internet: true, openPorts: true }, 'no list: any public host');
  const net = await sbx.network.set({ internet: true, allow: ['example.com'], deny: ['bad.example.com'] });
  assert.deepEqual(net, { internet: true, allow: ['example.com'], deny: ['bad.example.com'], openPorts: true });
  assert.deepEqual((await sbx.refresh()).info.network, { internet: true, allow: ['example.com'], deny: ['bad.example.com'] });

  assert.equal((await sbx.pause()).state, 'paused');
  assert.equal(sbx.info.status, 'paused');
  assert.equal((await sbx.wake()).state, 'running');
  assert.equal((await sbx.wake()).state, 'running', 'waking an awake sandbox is done');
  // Hibernation is gvisor's: an ns sandbox says it has no such feature, and stays paused.
  if (sbx.info.isolation === 'ns') {
    await assert.rejects(sbx.hibernate(), (e) => e instanceof RuntimeError && e.code === 'feature_unavailable');
  } else {
    const h = await sbx.hibernate();
    assert.deepEqual([h.info.status, h.state], ['hibernated', 'paused']);
    assert.equal((await sbx.exec(['echo', 'back'])).stdout, 'back\n', 'an exec restores it');
  }
  assert.equal((await sbx.stop()).state, 'stopped');
  assert.equal((await sbx.restart()).state, 'running');
  assert.deepEqual(await sbx.network.off(), { internet: false, openPorts: true });
  assert.deepEqual(await sbx.network.on(), { internet: true, openPorts: true });

  const all = await sbx.events();
  assert.ok(Array.isArray(all) && all.length > 0, 'pause and resume are events');
  for (const e of all) assert.ok(typeof e.seq === 'number' && typeof e.kind === 'string');
  const last = all.at(-1).seq;
  assert.deepEqual(await sbx.events({ after: last }), []);
  assert.deepEqual((await sbx.events({ after: all[0].seq })).map((e) => e.seq), all.slice(1).map((e) => e.seq));
  await assert.rejects(sbx.network.set({ internet: 'yes' }), InvalidRequestError);
  await sbx.delete();
});

test('secrets set/list/delete; catalog; usage', { skip }, async () => {
  const name = `SDK_${Date.now()}`;
  const s = await rt.secrets.set(name, { value: 'sekrit-value', hosts: ['api.example.com'], rules: [{ methods: ['GET'], paths: ['/v1/*'] }] });
  assert.equal(s.name, name);
  const listed = (await rt.secrets.list()).find((x) => x.name === name);
  assert.deepEqual(listed.hosts, ['api.example.com']);
  assert.deepEqual(listed.rules, [{ methods: ['GET'], paths: ['/v1/*'] }]);
  assert.ok(!JSON.stringify(await rt.secrets.list()).includes('sekrit-value'), 'listing never shows values');
  assert.deepEqual(await rt.secrets.delete(name), { name, deleted: true, enforced: true, from: ['sandboxes'] });
  assert.ok(!(await rt.secrets.list()).some((x) => x.name === name));
  await assert.rejects(rt.secrets.delete(name), NotFoundError);
  await assert.rejects(rt.secrets.set('X', { value: 'v', hosts: [] }), InvalidRequestError);
  await assert.rejects(rt.secrets.set('X', { value: 'v', hosts: ['h.example.com'], rules: [] }), InvalidRequestError);

  const cat = await rt.mcp.catalog();
  const fetchEntry = cat.find((e) => e.id === 'fetch');
  assert.ok(fetchEntry, 'the catalog has fetch');
  for (const k of ['id', 'title', 'description', 'license', 'source', 'version', 'env', 'options', 'egress', 'checked',
    'package', 'settings']) assert.ok(k in fetchEntry, k);

  const u = await rt.usage();
  assert.ok(Array.isArray(u.sandboxes) && typeof u.total === 'object');
});

test('mcp: start a custom stdio server, ready(), get(), initialize and tools/list over its URL, stop()', { skip }, async () => {
  const sbx = await rt.sandboxes.create({ name: token('mcp') });
  d.track(sbx.id);
  await sbx.files.write('/workspace/hello-server.mjs', fs.readFileSync(HELLO_SERVER));
  const started = await sbx.mcp.start([{ name: 'hello', command: ['node', '/workspace/hello-server.mjs'] }]);
  assert.equal(started.running, true);
  assert.equal(started.servers[0].status, 'installing');
  const g = await sbx.mcp.ready({ timeoutMs: 60_000 });
  assert.equal(g.running, true);
  assert.equal(g.headers.Authorization, `Bearer ${g.token}`);
  const hello = g.servers.find((s) => s.name === 'hello');
  assert.equal(hello.status, 'ready');
  assert.deepEqual(hello.tools, ['hello']);
  assert.match(g.headers.Authorization, /^Bearer \S+$/);
  assert.deepEqual((await sbx.mcp.get()).servers.map((s) => s.name), ['hello']);

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
  assert.equal((await sbx.mcp.get()).servers.find((s) => s.name === 'hello')?.phase ?? 'stopped', 'stopped');
  await assert.rejects(sbx.mcp.stop('nobody'), NotFoundError);
  await sbx.mcp.start([{ name: 'hello', command: ['node', '/workspace/hello-server.mjs'] }]);
  await sbx.mcp.ready();
  assert.deepEqual(await sbx.mcp.stop(), { stopped: true });
  assert.equal((await sbx.mcp.get()).running, false);
  await sbx.delete();
});

test('mcp.ready() returns a failed server as failed; throwOnFailure makes it McpServerError', { skip }, async () => {
  const sbx = await rt.sandboxes.create();
  d.track(sbx.id);
  await sbx.mcp.start([{ name: 'broken', command: ['/workspace/does-not-exist'] }]);
  const e = await sbx.mcp.ready({ timeoutMs: 60_000, throwOnFailure: true }).catch((x) => x);
  assert.ok(e instanceof sdk.McpServerError, `expected McpServerError, got ${e}`);
  assert.equal(e.server, 'broken');
  assert.equal(e.serverStatus, 'failed');
  assert.match(e.message, /broken is failed/);
  const g = await sbx.mcp.ready();
  assert.equal(g.servers[0].status, 'failed');
  assert.ok(g.servers[0].message);
  await sbx.delete();
});

test('mcp.logs() and mcp.followLogs(): what a server wrote on stderr, and what comes next', { skip }, async () => {
  const sbx = await rt.sandboxes.create();
  d.track(sbx.id);
  await sbx.files.write('/workspace/hello-server.mjs', fs.readFileSync(HELLO_SERVER));
  // The server copies /workspace/say to its stderr whenever the file appears.
  const script = "echo 'chatty: starting up' >&2; (while :; do if [ -f /workspace/say ]; then " +
    'cat /workspace/say >&2; rm -f /workspace/say; fi; sleep 0.05; done) & exec node /workspace/hello-server.mjs';
  await sbx.mcp.start([{ name: 'chatty', command: ['sh', '-c', script] }]);
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
  assert.ok(e instanceof AuthenticationError && e instanceof RuntimeError);
  assert.ok(e instanceof sdk.UnauthorizedError, 'the old name is the same class');
  assert.match(e.requestId, /\S/);
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
  assert.ok(bad instanceof InvalidRequestError, `got ${bad}`);
  assert.equal(bad.status, 400);
  await first.delete();
});

test('a change refused is sent once; a GET 404 is not retried either', { skip }, async () => {
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

test('await using deletes a sandbox create made at the end of the scope, and stops one it found (disposer)', { skip }, async () => {
  // Node 20 cannot parse `await using`; examples/quickstart.ts uses it for real
  // (compiled by tsc, run in examples.test.mjs). Here: the disposer itself.
  const sbx = await rt.sandboxes.create();
  d.track(sbx.id);
  assert.equal(typeof sbx[Symbol.asyncDispose], 'function');
  await sbx[Symbol.asyncDispose]();
  await assert.rejects(rt.sandboxes.get(sbx.id), NotFoundError);
  await sbx[Symbol.asyncDispose](); // already gone: still fine
  const kept = await rt.sandboxes.create({ name: token('kept') });
  d.track(kept.id);
  const found = await rt.sandboxes.getOrCreate(kept.info.name);
  await found[Symbol.asyncDispose]();
  assert.equal((await rt.sandboxes.get(kept.id)).state, 'stopped', 'found, not made: stopped, not deleted');
  await kept.delete();
});

test('static Sandbox.create/connect/getOrCreate/list use the environment', { skip }, async () => {
  const saved = { url: process.env.RUNTIME_API_URL, key: process.env.RUNTIME_API_KEY };
  process.env.RUNTIME_API_URL = d.url;
  process.env.RUNTIME_API_KEY = d.key;
  try {
    const name = token('static');
    const a = await Sandbox.getOrCreate(name);
    d.track(a.id);
    assert.equal((await Sandbox.connect(a.id)).id, a.id);
    assert.equal((await Sandbox.get(name)).id, a.id, 'the old name, and a name, work too');
    assert.ok((await (await Sandbox.list()).toArray()).some((s) => s.id === a.id));
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
    const viaFile = new sdk.Runtime({ baseUrl: d.url });
    assert.ok(Array.isArray((await viaFile.sandboxes.list()).data));
    process.env.RUNTIME_STATE_DIR = '/nonexistent-state';
    const none = await new sdk.Runtime({ baseUrl: d.url }).sandboxes.list().catch((x) => x);
    assert.ok(none instanceof RuntimeError);
    assert.equal(none.code, 'missing_api_key');
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
