// What a user asks for is never silently widened (issue 23, finding 6): every body
// the API takes refuses a field it does not know, with a 400 that names every wrong
// field in one answer and the fields it knows, and nothing changes. Before, exec,
// network, secrets and MCP start dropped them: {"deny": [...]} answered 200 and left
// the host reachable, a secret sent with `rules` was stored with no limit, and
// {"user": "root"} ran as uid 1000.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { startDaemon, stopDaemon, isRoot } from './lib.mjs';

const skip = !isRoot() && 'needs root';
let d;
let box; // a running sandbox with a narrowed network

before(async () => {
  if (!isRoot()) return;
  d = await startDaemon({ prefix: 'runtime-fields-' });
  box = await d.create({ name: 'fields', network: { internet: true, allow: ['api.example.com'] } });
});

after(async () => {
  if (!d) return;
  await d.api('DELETE', '/v1/accounts/fieldtest').catch(() => {});
  await stopDaemon(d);
});

/** A 400 invalid_request whose message names every one of fields as unknown, and `known`. */
function assertUnknown(r, fields, known) {
  assert.equal(r.status, 400, r.text);
  assert.equal(r.body.error.code, 'invalid_request', r.text);
  const msg = r.body.error.message;
  const list = new RegExp(`unknown fields?: ([^;]*); known: (.*)$`).exec(msg);
  assert.ok(list, `the message lists the unknown and the known fields: ${msg}`);
  assert.deepEqual(list[1].split(', ').sort(), [...fields].sort(), msg);
  for (const k of known) assert.ok(list[2].split(', ').includes(k), `${k} is among the known: ${msg}`);
}

test('create: unknown fields, at the top and in network, are refused and nothing is made', { skip }, async () => {
  const top = await d.api('POST', '/v1/sandboxes', { name: 'widened', cpuCount: 2, memory: 256, region: 'x' });
  assertUnknown(top, ['cpuCount', 'memory'], ['name', 'cpus', 'vcpu', 'memoryMiB', 'network']);
  // Runtime Cloud's fields that runtimed cannot honour: refused by name, never dropped.
  const cloud = await d.api('POST', '/v1/sandboxes', { name: 'widened', cpu: 'reserved', region: 'x' });
  assert.equal(cloud.status, 501, cloud.text);
  assert.deepEqual(cloud.body.error.details.fields, ['region', 'cpu']);
  const nested = await d.api('POST', '/v1/sandboxes',
    { name: 'widened', network: { internet: true, block: ['example.com'], ports: [] } });
  assertUnknown(nested, ['block', 'ports'], ['internet', 'allow', 'deny', 'connect']);
  assert.match(nested.body.error.message, /^network: /);
  const list = await d.api('GET', '/v1/sandboxes');
  assert.deepEqual(list.body.data.map((s) => s.name), ['fields']);
});

test('network: an unknown field is refused and the policy is as before; deny is kept', { skip }, async () => {
  const before_ = (await d.api('GET', `/v1/sandboxes/${box.id}`)).body.network;
  const r = await d.api('PUT', `/v1/sandboxes/${box.id}/network`,
    { internet: true, deny: ['example.com'], foo: 1 });
  assertUnknown(r, ['foo'], ['internet', 'allow', 'deny', 'connect']);
  const after_ = (await d.api('GET', `/v1/sandboxes/${box.id}`)).body.network;
  assert.deepEqual(after_, before_);
  assert.deepEqual(after_.allow, ['api.example.com']);
  // Runtime Cloud's deny is a rule now, kept and in force (tests/egress/deny.test.mjs
  // shows a denied host unreachable).
  const kept = await d.api('PUT', `/v1/sandboxes/${box.id}/network`,
    { internet: true, allow: ['api.example.com'], deny: ['example.com'] });
  assert.equal(kept.status, 200, kept.text);
  assert.deepEqual((await d.api('GET', `/v1/sandboxes/${box.id}`)).body.network.deny, ['example.com']);
});

test('exec: {user: "root"} is refused and nothing runs', { skip }, async () => {
  const r = await d.api('POST', `/v1/sandboxes/${box.id}/exec`,
    { argv: ['sh', '-c', 'echo ran > /workspace/ran'], user: 'root', shell: true });
  assertUnknown(r, ['shell'], ['argv', 'env', 'cwd', 'stdin', 'timeoutMs', 'user']);
  // Runtime Cloud's user field: "sandbox" is what runtimed does; root is refused by name.
  const root = await d.api('POST', `/v1/sandboxes/${box.id}/exec`,
    { argv: ['sh', '-c', 'echo ran > /workspace/ran'], user: 'root' });
  assert.equal(root.status, 501, root.text);
  assert.equal(root.body.error.code, 'feature_unavailable');
  assert.deepEqual(root.body.error.details.fields, ['user']);
  const f = await d.api('GET', `/v1/sandboxes/${box.id}/files?path=/workspace/ran`);
  assert.equal(f.status, 404, `the program must not have run: ${f.text}`);
  const ok = await d.exec(box.id, ['id', '-u']);
  assert.equal(ok.stdout.trim(), '1000');
});

test('secret put: unknown fields are refused and no secret is stored', { skip }, async () => {
  const r = await d.api('PUT', '/v1/egress-secrets/RULED',
    { value: 'sk-unlimited', hosts: ['api.example.com'], rules: [{ methods: ['GET'], paths: ['/a'] }], colour: 'red', tint: 1 });
  assertUnknown(r, ['colour', 'tint'], ['value', 'hosts', 'rules', 'header', 'format', 'only', 'env']);
  assert.ok(!r.text.includes('sk-unlimited'), 'the value is not echoed');
  const list = await d.api('GET', '/v1/egress-secrets');
  assert.equal(list.status, 200, list.text);
  assert.equal(list.body.secrets.some((s) => s.name === 'RULED'), false, list.text);
});

test('MCP start: unknown fields of the body and of a server entry are refused, nothing starts', { skip }, async () => {
  const top = await d.api('POST', `/v1/sandboxes/${box.id}/mcp`,
    { servers: [{ name: 'mine', command: ['node', '/workspace/s.mjs'] }], wait: 60 });
  assertUnknown(top, ['wait'], ['servers']);
  const entry = await d.api('POST', `/v1/sandboxes/${box.id}/mcp`,
    { servers: [{ name: 'mine', command: ['node', '/workspace/s.mjs'], user: 'root', tool: ['x'] }] });
  assertUnknown(entry, ['user', 'tool'], ['name', 'command', 'tools', 'env']);
  assert.match(entry.body.error.message, /^servers\[0\]: /);
  // A catalog server runs its catalog command: a command beside an id is not dropped.
  const both = await d.api('POST', `/v1/sandboxes/${box.id}/mcp`,
    { servers: [{ id: 'memory', command: ['sh', '-c', 'id'] }] });
  assert.equal(both.status, 400, both.text);
  assert.match(both.body.error.message, /command/);
  const st = await d.api('GET', `/v1/sandboxes/${box.id}/mcp`);
  assert.deepEqual(st.body.servers ?? [], [], st.text);
});

test('account create: every unknown field is named, and no account is made', { skip }, async () => {
  const r = await d.api('POST', '/v1/accounts', { name: 'fieldtest', maxSandbox: 1, maxMemory: 512 });
  assertUnknown(r, ['maxSandbox', 'maxMemory'], ['name', 'maxSandboxes', 'maxMemoryMiB']);
  const list = await d.api('GET', '/v1/accounts');
  assert.equal(list.body.some((a) => a.name === 'fieldtest'), false, list.text);
});
