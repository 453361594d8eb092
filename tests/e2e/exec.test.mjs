// exec through the CLI and the API: exit status, streams, stdin, env, cwd,
// timeout, output limits, missing programs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startDaemon, stopDaemon } from './lib.mjs';

let d, sb;
before(async () => {
  d = await startDaemon();
  sb = await d.create({ name: 'exec-box', env: { FROM_CREATE: 'created', SHARED: 'create' } });
});
after(async () => {
  await stopDaemon(d);
});

test('exit codes propagate through `runtime sandbox exec`', async () => {
  for (const code of [0, 1, 7, 42, 255]) {
    const r = await d.cli(['sandbox', 'exec', sb.id, '--', 'sh', '-c', `exit ${code}`]);
    assert.equal(r.code, code, `exit ${code}: ${r.stderr}`);
  }
  const api = await d.exec(sb.id, ['sh', '-c', 'exit 3']);
  assert.equal(api.exitCode, 3);
  assert.equal(api.timedOut, false);
  assert.equal(typeof api.durationMs, 'number');
  // Death by a signal: no exit status, as Runtime Cloud says it (state killed, and
  // runtimed's signal); the CLI exits 128 + its number, like a shell.
  const sig = await d.exec(sb.id, ['sh', '-c', 'kill -TERM $$']);
  assert.deepEqual([sig.exitCode, sig.state, sig.signal], [null, 'killed', 'SIGTERM']);
  const cliSig = await d.cli(['sandbox', 'exec', sb.id, '--', 'sh', '-c', 'kill -KILL $$']);
  assert.equal(cliSig.code, 128 + 9);
  // By name, too.
  const byName = await d.cli(['sandbox', 'exec', 'exec-box', '--', 'true']);
  assert.equal(byName.code, 0, byName.stderr);
});

test('stdout and stderr stay separate', async () => {
  const r = await d.cli(['sandbox', 'exec', sb.id, '--', 'sh', '-c', 'echo to-out; echo to-err >&2; echo more-out']);
  assert.equal(r.code, 0);
  assert.equal(r.stdout, 'to-out\nmore-out\n');
  assert.equal(r.stderr, 'to-err\n');
  const api = await d.exec(sb.id, ['sh', '-c', 'printf a; printf b >&2']);
  assert.equal(api.stdout, 'a');
  assert.equal(api.stderr, 'b');
});

test('stdin is passed to the program', async () => {
  const r = await d.cli(['sandbox', 'exec', sb.id, '--', 'cat'], { input: 'hi\n' });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, 'hi\n');
  const big = 'x'.repeat(300000) + '\nend\n';
  const wc = await d.cli(['sandbox', 'exec', sb.id, '--', 'wc', '-c'], { input: big });
  assert.equal(wc.stdout.trim(), String(big.length));
  const api = await d.exec(sb.id, ['cat'], { stdin: 'from api' });
  assert.equal(api.stdout, 'from api');
  // No stdin: the program sees EOF at once rather than hanging.
  const eof = await d.exec(sb.id, ['cat'], { timeoutMs: 5000 });
  assert.equal(eof.timedOut, false);
  assert.equal(eof.stdout, '');
});

test('env from create and from exec; exec wins', async () => {
  const r = await d.cli(['sandbox', 'exec', sb.id, '--env', 'FROM_EXEC=execd', '--env', 'SHARED=exec', '--',
    'sh', '-c', 'echo "$FROM_CREATE|$FROM_EXEC|$SHARED|$HOME|$USER"']);
  assert.equal(r.code, 0, r.stderr);
  const [create, exec, shared] = r.stdout.trim().split('|');
  assert.equal(create, 'created');
  assert.equal(exec, 'execd');
  assert.equal(shared, 'exec');
  const api = await d.exec(sb.id, ['sh', '-c', 'echo "$FROM_CREATE $X"'], { env: { X: 'y z' } });
  assert.equal(api.stdout, 'created y z\n');
  // The daemon's own environment does not leak in.
  const env = await d.exec(sb.id, ['env']);
  assert.ok(!/RUNTIME_API_KEY|INVOCATION_ID|NODE_TEST/.test(env.stdout), env.stdout);
  assert.ok(!env.stdout.includes(d.key), 'the admin key is not in the environment');
});

test('cwd defaults to /workspace and can be set', async () => {
  const def = await d.cli(['sandbox', 'exec', sb.id, '--', 'pwd']);
  assert.equal(def.stdout, '/workspace\n');
  const tmp = await d.cli(['sandbox', 'exec', sb.id, '--cwd', '/tmp', '--', 'pwd']);
  assert.equal(tmp.stdout, '/tmp\n');
  const api = await d.exec(sb.id, ['pwd'], { cwd: '/usr/bin' });
  assert.equal(api.stdout, '/usr/bin\n');
  const bad = await d.api('POST', `/v1/sandboxes/${sb.id}/exec`, { argv: ['pwd'], cwd: '/no/such/dir' });
  assert.ok(bad.status >= 400 || bad.body.exitCode !== 0, `a missing cwd fails: ${bad.text}`);
  if (bad.status >= 400) assert.match(bad.body.error.message, /no\/such\/dir|directory|cwd/i, bad.text);
});

test('timeout: sleep 30 with --timeout 1 stops quickly with 124 and timedOut', async () => {
  const t0 = Date.now();
  const r = await d.cli(['sandbox', 'exec', sb.id, '--timeout', '1', '--', 'sleep', '30']);
  const took = Date.now() - t0;
  assert.equal(r.code, 124, r.stderr);
  assert.match(r.stderr, /timed out/i);
  assert.ok(took < 5000, `returned after ${took} ms`);

  const t1 = Date.now();
  const api = await d.exec(sb.id, ['sh', '-c', 'echo started; sleep 30'], { timeoutMs: 700 });
  assert.deepEqual([api.timedOut, api.state, api.exitCode], [true, 'timed_out', null]);
  assert.equal(api.stdout, 'started\n', 'output before the timeout is kept');
  assert.ok(Date.now() - t1 < 5000);
  // Children of the timed-out command die with it.
  const ps = await d.exec(sb.id, ['ps', '-eo', 'args']);
  assert.ok(!/sleep 30/.test(ps.stdout), ps.stdout);
});

test('output beyond 1 MiB is cut and ends with the marker', async () => {
  const r = await d.exec(sb.id, ['sh', '-c', 'head -c 3000000 /dev/zero | tr "\\0" x; head -c 2000000 /dev/zero | tr "\\0" y >&2']);
  assert.equal(r.exitCode, 0);
  for (const [s, ch] of [[r.stdout, 'x'], [r.stderr, 'y']]) {
    assert.ok(s.length < 1048576 + 200, `length ${s.length}`);
    assert.ok(s.length >= 1048576, `keeps the first MiB: ${s.length}`);
    assert.match(s, /\[runtime: output truncated[^\]]*\]\n?$/);
    assert.ok(s.startsWith(ch.repeat(1000)));
  }
  const cli = await d.cli(['sandbox', 'exec', sb.id, '--', 'sh', '-c', 'head -c 2000000 /dev/zero | tr "\\0" z']);
  assert.equal(cli.code, 0);
  assert.match(cli.stdout, /\[runtime: output truncated/);
  // Exactly 1 MiB is not cut.
  const exact = await d.exec(sb.id, ['sh', '-c', 'head -c 1048576 /dev/zero | tr "\\0" q']);
  assert.equal(exact.stdout.length, 1048576);
  assert.ok(!exact.stdout.includes('truncated'));
});

test('a program that does not exist gives a clear error', async () => {
  const r = await d.cli(['sandbox', 'exec', sb.id, '--', 'no-such-program-xyz']);
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /No such file|not found|cannot start/i);
  assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
  const api = await d.api('POST', `/v1/sandboxes/${sb.id}/exec`, { argv: ['/workspace/nope'] });
  assert.ok(api.status === 400 || api.status === 422 || (api.status === 200 && api.body.exitCode === 127), api.text);
  if (api.status !== 200) assert.match(api.body.error.message, /No such file|not found/i);
  const empty = await d.api('POST', `/v1/sandboxes/${sb.id}/exec`, { argv: [] });
  assert.equal(empty.status, 400, empty.text);
  assert.match(empty.body.error.message, /argv/);
  const notExec = await d.exec(sb.id, ['sh', '-c', 'echo x > /tmp/plain; chmod 644 /tmp/plain']);
  assert.equal(notExec.exitCode, 0);
  const perm = await d.cli(['sandbox', 'exec', sb.id, '--', '/tmp/plain']);
  assert.notEqual(perm.code, 0);
  assert.match(perm.stderr, /Permission denied|cannot start/i);
});

test('the command runs as uid 1000, and every exec sees the same /workspace', async () => {
  const id = await d.exec(sb.id, ['id', '-u']);
  assert.equal(id.stdout.trim(), '1000');
  await d.exec(sb.id, ['sh', '-c', 'echo kept > /workspace/note']);
  const again = await d.exec(sb.id, ['cat', '/workspace/note']);
  assert.equal(again.stdout, 'kept\n');
});

test('a command running when its sandbox stops is answered killed, not with an error', async () => {
  const own = await d.create({ name: 'exec-stopped' });
  const running = d.exec(own.id, ['sh', '-c', 'echo started > /workspace/started; exec sleep 60'],
    { timeoutMs: 90000 });
  for (let i = 0; i < 200; i++) { // it has started once its file is there (bounded: 20 s)
    if ((await d.exec(own.id, ['cat', '/workspace/started'])).exitCode === 0) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const st = await d.api('POST', `/v1/sandboxes/${own.id}:stop`);
  assert.equal(st.status, 200, st.text);
  const r = await running;
  assert.deepEqual([r.exitCode, r.state, r.signal], [null, 'killed', 'SIGKILL']);
  assert.ok(r.durationMs < 60000, `answered in ${r.durationMs} ms, not once sleep ended`);
  await d.remove(own.id);
});
