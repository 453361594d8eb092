// The sandbox API and CLI as a user sees them: create, get, list, labels, names,
// errors, authentication, help texts.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { startDaemon, stopDaemon, run, RUNTIME, RUNTIMED, token, Daemon, freePort, waitFor } from './lib.mjs';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

let d;
before(async () => {
  d = await startDaemon();
});
after(async () => {
  await stopDaemon(d);
});

function assertErrorShape(r, status, code) {
  assert.equal(r.status, status, `HTTP status; body: ${r.text}`);
  assert.ok(r.body && typeof r.body === 'object' && r.body.error, `an error object: ${r.text}`);
  assert.equal(typeof r.body.error.message, 'string');
  assert.ok(r.body.error.message.length > 0);
  if (code) assert.equal(r.body.error.code, code, r.text);
}

test('create with name, labels, env and limits; get and list show them', async () => {
  const name = token('api').slice(0, 30);
  const r = await d.cli(['sandbox', 'create', '--name', name, '--memory', '256', '--cpus', '0.5',
    '--disk', '128', '--idle-pause', '60', '--label', 'team=blue', '--label', 'tier=test',
    '--env', 'GREETING=hello world', '--no-internet']);
  assert.equal(r.code, 0, r.stderr);
  const id = r.stdout.trim();
  assert.match(id, /^[0-9a-z]+$/, 'create prints only the id');
  d.track(id);

  for (const ref of [id, name]) {
    const g = await d.api('GET', `/v1/sandboxes/${ref}`);
    assert.equal(g.status, 200, g.text);
    const s = g.body;
    assert.equal(s.id, id);
    assert.equal(s.name, name);
    assert.equal(s.memoryMiB, 256);
    assert.equal(s.cpus, 0.5);
    assert.equal(s.diskMiB, 128);
    assert.equal(s.idlePauseSeconds, 60);
    assert.deepEqual(s.labels, { team: 'blue', tier: 'test' });
    assert.deepEqual(s.env, { GREETING: 'hello world' });
    assert.equal(s.network.internet, false);
    assert.equal(s.status, 'running');
    assert.ok(!Number.isNaN(Date.parse(s.createdAt)), `createdAt is a date: ${s.createdAt}`);
    assert.match(s.createdAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/);
  }

  const gj = await d.cli(['sandbox', 'get', name, '--json']);
  assert.equal(gj.code, 0, gj.stderr);
  const parsed = JSON.parse(gj.stdout);
  assert.equal(parsed.id, id);
  assert.deepEqual(parsed.labels, { team: 'blue', tier: 'test' });

  const gt = await d.cli(['sandbox', 'get', id]);
  assert.equal(gt.code, 0, gt.stderr);
  for (const want of [id, name, '256', 'team=blue', 'GREETING=hello world']) {
    assert.ok(gt.stdout.includes(want), `get shows ${want}:\n${gt.stdout}`);
  }

  const lj = await d.cli(['sandbox', 'list', '--json']);
  assert.equal(lj.code, 0, lj.stderr);
  const list = JSON.parse(lj.stdout);
  assert.ok(Array.isArray(list));
  assert.ok(list.some((s) => s.id === id && s.name === name));

  const lt = await d.cli(['sandbox', 'list']);
  assert.equal(lt.code, 0, lt.stderr);
  const lines = lt.stdout.trim().split('\n');
  assert.match(lines[0], /ID\s+NAME\s+STATUS/);
  const row = lines.find((l) => l.startsWith(id));
  assert.ok(row, `a row for ${id}:\n${lt.stdout}`);
  assert.ok(row.includes(name) && row.includes('running') && row.includes('team=blue'), row);
});

test('list --label filters, in the CLI and the API', async () => {
  const tag = token('lbl').slice(0, 20);
  const a = await d.create({ labels: { filt: tag, color: 'red' } });
  const b = await d.create({ labels: { filt: tag, color: 'green' } });
  const c = await d.create({ labels: { other: 'x' } });

  const both = await d.api('GET', `/v1/sandboxes?label=${encodeURIComponent(`filt=${tag}`)}`);
  assert.equal(both.status, 200, both.text);
  assert.deepEqual(both.body.data.map((s) => s.id).sort(), [a.id, b.id].sort());

  const red = await d.cli(['sandbox', 'list', '--label', 'color=red', '--json']);
  assert.equal(red.code, 0, red.stderr);
  assert.deepEqual(JSON.parse(red.stdout).map((s) => s.id), [a.id]);

  const redTable = await d.cli(['sandbox', 'list', '--label', 'color=red']);
  assert.ok(redTable.stdout.includes(a.id) && !redTable.stdout.includes(b.id) &&
    !redTable.stdout.includes(c.id), redTable.stdout);

  const two = await d.cli(['sandbox', 'list', '--label', `filt=${tag}`, '--label', 'color=green', '--json']);
  assert.deepEqual(JSON.parse(two.stdout).map((s) => s.id), [b.id]);

  const none = await d.api('GET', '/v1/sandboxes?label=color=purple');
  assert.equal(none.status, 200);
  assert.deepEqual(none.body, { data: [], nextCursor: null });
});

test('getOrCreate returns 200 and the same sandbox; a duplicate name is 409 name_taken', async () => {
  const name = token('goc').slice(0, 30);
  const first = await d.api('POST', '/v1/sandboxes', { name });
  assert.equal(first.status, 201, first.text);
  d.track(first.body.id);

  const again = await d.api('POST', '/v1/sandboxes', { name, getOrCreate: true });
  assert.equal(again.status, 200, again.text);
  assert.equal(again.body.id, first.body.id);

  const dup = await d.api('POST', '/v1/sandboxes', { name });
  assertErrorShape(dup, 409, 'name_taken');
  assert.ok(dup.body.error.message.includes(name), `the message names the sandbox: ${dup.text}`);

  const dup2 = await d.api('POST', '/v1/sandboxes', { name, memoryMiB: 128 });
  assertErrorShape(dup2, 409, 'name_taken');
  assert.ok(dup2.body.error.message.includes(name), `the message names the sandbox: ${dup2.text}`);

  const cli = await d.cli(['sandbox', 'create', '--name', name]);
  assert.notEqual(cli.code, 0);
  assert.match(cli.stderr, /name_taken|exists|taken/);
  assert.equal(cli.stderr.trim().split('\n').length, 1, `one line on stderr: ${cli.stderr}`);

  const list = await d.api('GET', '/v1/sandboxes');
  assert.equal(list.body.data.filter((s) => s.name === name).length, 1);
});

test('bad input is a 400 whose message names the field', async () => {
  const cases = [
    [{ bogusField: 1 }, /bogusField/],
    [{ memoryMiB: 1 }, /memoryMiB/],
    [{ memoryMiB: 1 << 30 }, /memoryMiB/],
    [{ memoryMiB: 'lots' }, /memoryMiB/],
    [{ diskMiB: 0 }, /diskMiB/],
    [{ cpus: -1 }, /cpus/],
    [{ name: 'bad name!' }, /name/],
    [{ name: '-leading-dash' }, /name/],
    [{ name: 'x'.repeat(200) }, /name/],
    [{ labels: { 'bad key!': 'v' } }, /label/],
    [{ labels: 'notanobject' }, /labels/],
    [{ env: { 'A=B': 'v' } }, /env|environment/],
    [{ name: 'x', getOrCreate: 'yes' }, /getOrCreate/],
    [{ network: { allow: ['*'] } }, /network\.allow/],
  ];
  for (const [body, re] of cases) {
    const r = await d.api('POST', '/v1/sandboxes', body);
    assertErrorShape(r, 400);
    assert.match(r.body.error.message, re, `for ${JSON.stringify(body).slice(0, 80)}: ${r.text}`);
    if (r.status === 201) d.track(r.body.id);
  }
  for (const raw of ['{"name":', 'not json', '[1,2', '{"a":1}}']) {
    const r = await d.api('POST', '/v1/sandboxes', undefined, { raw, headers: { 'Content-Type': 'application/json' } });
    assertErrorShape(r, 400);
    assert.match(r.body.error.message, /JSON/i, r.text);
  }
  const notObj = await d.api('POST', '/v1/sandboxes', [1, 2]);
  assertErrorShape(notObj, 400);

  const cli = await d.cli(['sandbox', 'create', '--memory', '1']);
  assert.notEqual(cli.code, 0);
  assert.match(cli.stderr, /memory/i);
  const usage = await d.cli(['sandbox', 'create', '--no-such-option']);
  assert.equal(usage.code, 2, `usage errors exit 2: ${usage.stderr}`);
});

// No allow list (any public host) and an empty one (no host) are different settings:
// the CLI shows them apart and never turns one into the other unasked.
test('sandbox network: no list and an empty list stay apart in the CLI', async () => {
  const sb = await d.create({});
  const net = async (...args) => {
    const r = await d.cli(['sandbox', 'network', sb.id, ...args]);
    assert.equal(r.code, 0, r.stderr);
    return r.stdout;
  };
  const api = async () => (await d.api('GET', `/v1/sandboxes/${sb.id}`)).body.network;
  assert.match(await net(), /^internet: on\nallow: \(any public host\)$/m);
  await net('--internet', 'off');
  assert.deepEqual(await api(), { internet: false }, 'turning internet off makes no list');
  await net('--internet', 'on', '--allow', 'api.example.com');
  assert.deepEqual(await api(), { internet: true, allow: ['api.example.com'] });
  await net('--clear');
  assert.deepEqual(await api(), { internet: true }, '--clear alone: no list, any public host');
  const put = await d.api('PUT', `/v1/sandboxes/${sb.id}/network`, { internet: true, allow: [] });
  assert.equal(put.status, 200, put.text);
  assert.match(await net(), /^allow: \(no host: the list is empty\)$/m);
  await net('--internet', 'off');
  await net('--internet', 'on');
  assert.deepEqual(await api(), { internet: true, allow: [] }, 'the empty list is kept');
  const show = await d.cli(['sandbox', 'get', sb.id]);
  assert.match(show.stdout, /^Allow:\s+\(no host\)$/m, show.stdout);
  // Off with hosts listed would be those hosts (Runtime Cloud's reading): the CLI empties
  // the list, so that on again reaches no host rather than any. --deny adds to its list.
  await net('--allow', 'api.example.com', '--deny', 'bad.example.com');
  assert.deepEqual(await api(), { internet: true, allow: ['api.example.com'], deny: ['bad.example.com'] });
  assert.match(await net(), /^deny: bad\.example\.com$/m);
  await net('--internet', 'off');
  assert.deepEqual(await api(), { internet: false, allow: [], deny: ['bad.example.com'] });
  await net('--clear');
  assert.deepEqual(await api(), { internet: false }, '--clear drops both lists');
  await d.remove(sb.id);
});

// --cpus 64 was accepted on a 2-core host (issue 23): a limit that never limits.
test("cpus above the host's online CPUs is refused naming both numbers; the host's own count is not", async () => {
  const online = Number((await run('getconf', ['_NPROCESSORS_ONLN'])).stdout.trim());
  assert.ok(online >= 1, 'getconf _NPROCESSORS_ONLN');
  const over = await d.api('POST', '/v1/sandboxes', { name: 'too-many-cpus', cpus: online + 0.5 });
  assertErrorShape(over, 400, 'invalid_request');
  assert.match(over.body.error.message, new RegExp(`cpus ${online + 0.5} is more than this host's ${online} online CPUs`));
  const cli = await d.cli(['sandbox', 'create', '--name', 'too-many-cpus', '--cpus', String(online * 32)]);
  assert.notEqual(cli.code, 0, cli.stdout);
  assert.match(cli.stderr, new RegExp(`cpus ${online * 32} .*${online} online CPUs`));
  const list = await d.api('GET', '/v1/sandboxes');
  assert.equal(list.body.data.some((s) => s.name === 'too-many-cpus'), false, 'nothing was made');
  const all = await d.create({ cpus: online });
  assert.equal(all.cpus, online);
  await d.remove(all.id);
});

test('401 without a key and with a wrong key; nothing leaks', async () => {
  for (const key of [null, 'wrong', d.key + 'x', d.key.slice(0, -1), '']) {
    for (const [m, p] of [['GET', '/v1/sandboxes'], ['POST', '/v1/sandboxes'], ['GET', '/v1/sandboxes/x']]) {
      const r = await d.api(m, p, m === 'POST' ? {} : undefined, { key });
      assertErrorShape(r, 401);
      assert.ok(!r.text.includes(d.key), 'the error does not echo the key');
    }
  }
  const lowerScheme = await d.api('GET', '/v1/sandboxes', undefined, {
    key: null, headers: { Authorization: `Basic ${Buffer.from('admin:' + d.key).toString('base64')}` },
  });
  assert.equal(lowerScheme.status, 401);
  const cli = await d.cli(['sandbox', 'list'], { env: { RUNTIME_API_KEY: 'wrong' } });
  assert.notEqual(cli.code, 0);
  assert.match(cli.stderr, /key|401|unauthori/i);
});

test('404 for an unknown sandbox in every call', async () => {
  const calls = [
    ['GET', '/v1/sandboxes/nosuchbox'],
    ['DELETE', '/v1/sandboxes/nosuchbox'],
    ['POST', '/v1/sandboxes/nosuchbox/exec', { argv: ['true'] }],
    ['GET', '/v1/sandboxes/nosuchbox/files?path=/workspace/x'],
  ];
  for (const [m, p, b] of calls) {
    const r = await d.api(m, p, b);
    assertErrorShape(r, 404, 'not_found');
  }
  for (const args of [['sandbox', 'get', 'nosuchbox'], ['sandbox', 'exec', 'nosuchbox', '--', 'true'],
    ['sandbox', 'rm', 'nosuchbox']]) {
    const r = await d.cli(args);
    assert.notEqual(r.code, 0, args.join(' '));
    assert.match(r.stderr, /nosuchbox|not.found|no sandbox/i, r.stderr);
  }
});

test("DELETE answers Runtime Cloud's {id, status: deleted, deletedAt} and the sandbox is gone", async () => {
  const s = await d.create({ name: 'to-delete' });
  const r = await d.api('DELETE', `/v1/sandboxes/${s.id}`);
  assert.equal(r.status, 200, r.text);
  assert.deepEqual({ ...r.body, deletedAt: undefined }, { id: s.id, name: 'to-delete', status: 'deleted', deletedAt: undefined });
  assert.ok(Date.parse(r.body.deletedAt) <= Date.now());
  assert.equal((await d.api('GET', `/v1/sandboxes/${s.id}`)).status, 404);
  const list = await d.api('GET', '/v1/sandboxes');
  assert.ok(!list.body.data.some((x) => x.id === s.id));
});

test('the unix socket answers the CLI with the key from the state dir', async () => {
  const r = await d.cli(['sandbox', 'list', '--json'], {
    env: { RUNTIME_API_URL: undefined, RUNTIME_API_KEY: undefined, RUNTIME_SOCKET: d.socket, RUNTIME_STATE_DIR: d.stateDir },
  });
  assert.equal(r.code, 0, r.stderr);
  assert.ok(Array.isArray(JSON.parse(r.stdout)));
  const mode = fs.statSync(path.join(d.stateDir, 'admin.key')).mode & 0o777;
  assert.equal(mode, 0o600, 'admin.key is mode 0600');
});

test('--help texts exist', async () => {
  const top = await run(RUNTIME, ['--help']);
  assert.equal(top.code, 0);
  assert.match(top.stdout, /sandbox create/);
  for (const cmd of ['create', 'run', 'exec', 'list', 'get', 'rm', 'cp']) {
    const r = await run(RUNTIME, ['sandbox', cmd, '--help']);
    assert.equal(r.code, 0, `sandbox ${cmd} --help: ${r.stderr}`);
    assert.match(r.stdout, new RegExp(`runtime sandbox ${cmd}`), `sandbox ${cmd} --help`);
  }
  const dh = await run(RUNTIMED, ['--help']);
  assert.equal(dh.code, 0);
  for (const opt of ['--state-dir', '--listen', '--socket']) assert.ok(dh.stdout.includes(opt), opt);
});

test('a second runtimed on the same port fails with a clear error and leaves the first alone', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'runtime-e2e-dup-'));
  fs.chmodSync(dir, 0o711);
  const other = new Daemon(dir);
  other.port = d.port;
  try {
    const r = await run(RUNTIMED, other.args(), { timeoutMs: 15000 });
    assert.notEqual(r.code, 0, 'the second daemon exits non-zero');
    assert.equal(r.signal, null, 'it exits by itself, not by our timeout');
    const msg = r.stderr + r.stdout;
    assert.match(msg, new RegExp(`${d.port}`), `names the port: ${msg}`);
    assert.match(msg, /in use|address already|EADDRINUSE|listen/i, msg);
  } finally {
    other.forceCleanup();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const still = await d.api('GET', '/v1/sandboxes');
  assert.equal(still.status, 200, 'the first daemon still answers');
});

test('a second runtimed on the same state dir refuses to start and leaves the first alone', async () => {
  const s = await d.create({ name: 'state-owner' });
  await d.sh(s.id, 'echo mine > /workspace/f');
  const port = await freePort();
  const sock = path.join(d.dir, 'second.sock');
  const second = spawn(RUNTIMED, ['--state-dir', d.stateDir, '--listen', `127.0.0.1:${port}`, '--socket', sock],
    { detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  second.stdout.on('data', (x) => { out += x; });
  second.stderr.on('data', (x) => { out += x; });
  let exited = null;
  second.on('exit', (code, signal) => { exited = { code, signal }; });
  try {
    // It must give up by itself; serving the API means it took the state dir over.
    const serving = () => fetch(`http://127.0.0.1:${port}/v1/sandboxes`, { headers: { Authorization: `Bearer ${d.key}` } })
      .then((r) => r.status === 200, () => false);
    await waitFor(async () => exited || (await serving()), { timeoutMs: 10000, what: 'the second runtimed to exit or serve' });
    assert.ok(exited, `a second runtimed started on ${d.stateDir} (in use by pid ${d.proc.pid}) and serves it:\n${out}`);
    assert.notEqual(exited.code, 0);
    assert.ok(out.includes(d.stateDir) || /state/i.test(out), `the error names the state dir: ${out}`);
  } finally {
    if (!exited) {
      try { process.kill(-second.pid, 'SIGTERM'); } catch {}
      await waitFor(() => exited, { timeoutMs: 10000, what: 'the second runtimed to stop' }).catch(() => {
        try { process.kill(-second.pid, 'SIGKILL'); } catch {}
      });
    }
    fs.rmSync(sock, { force: true });
  }
  const g = await d.api('GET', `/v1/sandboxes/${s.id}`);
  assert.equal(g.body.status, 'running', 'the first daemon still sees its sandbox running');
  const cat = await d.exec(s.id, ['cat', '/workspace/f']);
  assert.equal(cat.stdout, 'mine\n');
});
