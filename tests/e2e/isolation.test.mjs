// A sandbox's `isolation` (the driver that builds and runs it: ns or gvisor), through the
// HTTP API and the CLI, against a real daemon started with --driver ns: a create without
// it gets the daemon's default, a wrong value is a 400 naming the field, :update cannot
// change it, a stored sandbox from before the field is ns, and a driver the daemon lacks
// is a 501 saying why. The gvisor driver's own behaviour is tested where it runs
// (RUNTIME_DRIVER=gvisor, docs/gvisor-plan.md); here gvisor is only the missing case.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import { startDaemon, stopDaemon, isRoot, Daemon } from './lib.mjs';

const skip = !isRoot() && 'needs root';
// Where scripts/install-runsc puts it; without it the daemon reports gvisor missing.
const RUNSC = '/opt/runtime/bin/runsc';
const hasRunsc = fs.existsSync(RUNSC);
let d;

before(async () => {
  if (!isRoot()) return;
  // --driver ns whatever the suite's default (RUNTIME_DRIVER): this file tests the default.
  d = await startDaemon({
    prefix: 'runtime-isolation-',
    make: (dir) => Object.assign(new Daemon(dir), { extraArgs: ['--driver', 'ns'] }),
  });
});

after(() => stopDaemon(d));

/** A 400 invalid_request whose message names isolation and what it may be. */
function assertIsolationRefused(r, what) {
  assert.equal(r.status, 400, `${what}: ${r.text}`);
  assert.equal(r.body.error.code, 'invalid_request', r.text);
  assert.match(r.body.error.message, /isolation must be ns or gvisor/, r.text);
}

/** Runs SQL on the daemon's database (python3's sqlite3, as tests/e2e/lifecycle.test.mjs). */
function sql(stateDir, statement, ...params) {
  const r = spawnSync('python3', ['-c', `import sqlite3, sys, json
db = sqlite3.connect(sys.argv[1])
rows = db.execute(sys.argv[2], json.loads(sys.argv[3])).fetchall()
db.commit()
print(json.dumps(rows))`, path.join(stateDir, 'db', 'runtime.db'), statement, JSON.stringify(params)],
  { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

test('a create without isolation gets the daemon default (ns); ns asked for is ns', { skip }, async () => {
  const plain = await d.create({ name: 'iso-default' });
  assert.equal(plain.isolation, 'ns');
  const asked = await d.create({ name: 'iso-ns', isolation: 'ns' });
  assert.equal(asked.isolation, 'ns');
  const nulled = await d.create({ name: 'iso-null', isolation: null });
  assert.equal(nulled.isolation, 'ns', 'null is the default, as absent');
  for (const s of [plain, asked, nulled]) {
    const got = await d.api('GET', `/v1/sandboxes/${s.id}`);
    assert.equal(got.body.isolation, 'ns', got.text);
  }
  const list = await d.api('GET', '/v1/sandboxes');
  for (const s of list.body.data) assert.equal(s.isolation, 'ns', JSON.stringify(s));
  const r = await d.exec(asked.id, ['true']);
  assert.equal(r.exitCode, 0, 'an ns sandbox runs');
});

test('a wrong isolation is a 400 naming the field, with every other wrong field; nothing is made', { skip }, async () => {
  const count = (await d.api('GET', '/v1/sandboxes')).body.data.length;
  for (const v of ['vm', 5, 'NS', '', true, ['ns'], { driver: 'ns' }]) {
    assertIsolationRefused(await d.api('POST', '/v1/sandboxes', { name: 'iso-bad', isolation: v }),
      JSON.stringify(v));
  }
  const both = await d.api('POST', '/v1/sandboxes', { memoryMiB: 1, isolation: 'vm' });
  assertIsolationRefused(both, 'with memoryMiB');
  assert.match(both.body.error.message, /memoryMiB/, both.text);
  const fields = both.body.error.details?.issues?.map((i) => i.field) ?? [];
  if (fields.length) assert.ok(fields.includes('isolation'), both.text);
  assert.equal((await d.api('GET', '/v1/sandboxes')).body.data.length, count, 'no sandbox made');
});

test(':update keeps isolation: the same value is accepted, another is refused', { skip }, async () => {
  const s = await d.create({ name: 'iso-update', labels: { a: '1' } });
  const same = await d.api('POST', `/v1/sandboxes/${s.id}:update`, { isolation: 'ns', labels: { a: '2' } });
  assert.equal(same.status, 200, same.text);
  assert.equal(same.body.isolation, 'ns');
  assert.deepEqual(same.body.labels, { a: '2' });
  const nulled = await d.api('POST', `/v1/sandboxes/${s.id}:update`, { isolation: null });
  assert.equal(nulled.status, 200, `null leaves it as it is: ${nulled.text}`);

  const change = await d.api('POST', `/v1/sandboxes/${s.id}:update`, { isolation: 'gvisor', labels: { a: '3' } });
  assert.equal(change.status, 400, change.text);
  assert.equal(change.body.error.code, 'invalid_request');
  assert.match(change.body.error.message, /isolation is fixed at create: this sandbox's is ns/, change.text);
  assert.match(change.body.error.message, /create a new sandbox/, change.text);
  assertIsolationRefused(await d.api('POST', `/v1/sandboxes/${s.id}:update`, { isolation: 'vm' }), ':update vm');

  const now = (await d.api('GET', `/v1/sandboxes/${s.id}`)).body;
  assert.equal(now.isolation, 'ns');
  assert.deepEqual(now.labels, { a: '2' }, 'a refused update changes nothing');
});

test('gvisor on a daemon without runsc: 501 feature_unavailable saying why, nothing made',
  { skip: skip || (hasRunsc && `${RUNSC} is installed: the gvisor driver's own tests cover it`) }, async () => {
    const count = (await d.api('GET', '/v1/sandboxes')).body.data.length;
    const r = await d.api('POST', '/v1/sandboxes', { name: 'iso-gvisor', isolation: 'gvisor' });
    assert.equal(r.status, 501, r.text);
    assert.equal(r.body.error.code, 'feature_unavailable', r.text);
    assert.match(r.body.error.message, /^isolation gvisor is not available on this daemon: \S/, r.text);
    assert.match(r.body.error.message, /runsc/, `the reason names runsc: ${r.text}`);
    assert.equal((await d.api('GET', '/v1/sandboxes')).body.data.length, count, 'no sandbox made');
    assert.equal((await d.api('GET', '/v1/sandboxes/iso-gvisor')).status, 404);

    const cli = await d.cli(['sandbox', 'create', '--isolation', 'gvisor']);
    assert.equal(cli.code, 1, cli.stderr);
    assert.match(cli.stderr, /isolation gvisor is not available on this daemon/, cli.stderr);
  });

test('the CLI: create --isolation, and get and list show it', { skip }, async () => {
  const c = await d.cli(['sandbox', 'create', '--name', 'iso-cli', '--isolation', 'ns']);
  assert.equal(c.code, 0, c.stderr);
  const id = c.stdout.trim();
  d.track(id);
  assert.equal((await d.api('GET', `/v1/sandboxes/${id}`)).body.isolation, 'ns');

  const got = await d.cli(['sandbox', 'get', 'iso-cli']);
  assert.equal(got.code, 0, got.stderr);
  assert.match(got.stdout, /^Isolation:\s+ns$/m, got.stdout);

  const list = await d.cli(['sandbox', 'list']);
  assert.equal(list.code, 0, list.stderr);
  const [head, ...rows] = list.stdout.trim().split('\n');
  const cols = head.split(/\s{2,}/);
  assert.ok(cols.includes('ISOLATION'), head);
  const row = rows.find((l) => l.startsWith(id));
  assert.ok(row, list.stdout);
  // The cells before LABELS are single words or fixed phrases; ISOLATION starts at its head's column.
  assert.equal(row.slice(head.indexOf('ISOLATION')).split(/\s+/)[0], 'ns', list.stdout);

  for (const bad of ['vm', 'NS', '']) {
    const r = await d.cli(['sandbox', 'create', '--isolation', bad]);
    assert.equal(r.code, 2, `--isolation '${bad}': ${r.stderr}`);
    assert.match(r.stderr, /--isolation.*expected ns or gvisor/, r.stderr);
  }
  const help = await d.cli(['sandbox', 'create', '--help']);
  assert.match(help.stdout, /--isolation DRIVER/, help.stdout);
  const runHelp = await d.cli(['sandbox', 'run', '--help']);
  assert.match(runHelp.stdout, /--isolation DRIVER/, runHelp.stdout);
});

// Rows saved before the field existed have no isolation: they were built with ns, and are
// read as ns whatever --driver says at the restart (with runsc, the restart makes gvisor
// the default to show it).
test('a stored sandbox without isolation is ns after a restart, running or stopped', { skip }, async () => {
  const running = await d.create({ name: 'iso-old-running' });
  const stopped = await d.create({ name: 'iso-old-stopped' });
  await d.sh(running.id, 'echo kept > /workspace/f');
  const st = await d.api('POST', `/v1/sandboxes/${stopped.id}:stop`);
  assert.equal(st.status, 200, st.text);
  const halted = await d.stop();
  assert.equal(halted.code, 0, d.log());
  for (const s of [running, stopped]) {
    sql(d.stateDir, "UPDATE sandboxes SET spec = json_remove(spec, '$.isolation') WHERE id = ?", s.id);
    const [[spec]] = sql(d.stateDir, 'SELECT spec FROM sandboxes WHERE id = ?', s.id);
    assert.equal(JSON.parse(spec).isolation, undefined, spec);
  }
  d.extraArgs = ['--driver', hasRunsc ? 'gvisor' : 'ns'];
  try {
    await d.start();
    for (const s of [running, stopped]) {
      const got = await d.api('GET', `/v1/sandboxes/${s.id}`);
      assert.equal(got.status, 200, got.text);
      assert.equal(got.body.isolation, 'ns', `${s.name}: ${got.text}`);
    }
    assert.equal((await d.api('GET', `/v1/sandboxes/${running.id}`)).body.status, 'running', d.log());
    const r = await d.exec(running.id, ['cat', '/workspace/f']);
    assert.equal(r.stdout, 'kept\n', 'the running one was adopted as it was');
    const started = await d.api('POST', `/v1/sandboxes/${stopped.id}:restart`);
    assert.equal(started.status, 200, started.text);
    assert.equal(started.body.isolation, 'ns');
    assert.equal((await d.exec(stopped.id, ['true'])).exitCode, 0, 'the stopped one starts again as ns');
  } finally {
    if (d.extraArgs[1] !== 'ns') {
      await d.stop();
      d.extraArgs = ['--driver', 'ns'];
      await d.start();
    }
  }
});
