// The event loop never waits (issue 13): every keeper request after startup is
// answered while the loop goes on, and every store write is made by the store's
// writer thread. The daemon counts the keeper requests its loop stopped for
// (runtime_keeper_loop_waits_total in /metrics) and, once serving, keeps its own
// SQLite connection read-only, so a write left on the loop fails its request.
//
// This file drives every API call and gateway path that reaches the keeper or
// the store (create, exec, files, MCP start and calls, pause, wake by the
// gateway and by exec, resume, events, usage, network, secrets, accounts,
// removal), checks each does what a user expects, and then that the loop
// waited for none of them. It also covers what asynchronous pause and resume
// change: requests that arrive during a pause or a wake wait for it, and a
// removal asked for during a pause runs after it.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { parseMetrics, stopDaemon } from './lib.mjs';
import { Client, FIXTURES, StreamableHTTPClientTransport, skipReason, startMcpDaemon } from '../mcp/lib.mjs';

const HELLO_SERVER = fs.readFileSync(path.join(FIXTURES, 'hello-server.mjs'), 'utf8');
const enc = encodeURIComponent;

describe('the event loop never waits', { skip: skipReason() }, () => {
  let d;
  before(async () => {
    d = await startMcpDaemon({ prefix: 'runtime-loop-' });
  });
  after(async () => {
    await stopDaemon(d);
  });

  const call = async (method, p, body, opts) => {
    const r = await d.api(method, p, body, opts);
    return r;
  };
  const ok = async (method, p, body, status = 200) => {
    const r = await call(method, p, body);
    assert.equal(r.status, status, `${method} ${p}: ${r.text}`);
    return r.body;
  };
  const create = async (spec) => {
    const sb = await ok('POST', '/v1/sandboxes', { idlePauseSeconds: 0, ...spec }, 201);
    d.sandboxes.add(sb.id);
    return sb;
  };
  const statusOf = async (id) => (await ok('GET', `/v1/sandboxes/${enc(id)}`)).status;
  const kinds = async (id, prefix) =>
    (await d.events(id)).filter((e) => e.kind.startsWith(prefix)).map((e) => `${e.kind}:${e.reason}`);

  test('requests during a pause wait for it, then wake the sandbox once', async () => {
    const sb = await create({ name: 'loop-wake' });
    await d.mustExec(sb.id, ['true']);
    const paused = ok('POST', `/v1/sandboxes/${sb.id}/pause`);
    // Sent before the pause is answered: each waits for the pause, then for one wake.
    const execs = [1, 2, 3].map((i) =>
      call('POST', `/v1/sandboxes/${sb.id}/exec`, { argv: ['echo', `e${i}`] }));
    assert.equal((await paused).status, 'paused');
    const answers = await Promise.all(execs);
    answers.forEach((r, i) => {
      assert.equal(r.status, 200, r.text);
      assert.equal(r.body.exitCode, 0);
      assert.equal(r.body.stdout, `e${i + 1}\n`);
    });
    assert.equal(await statusOf(sb.id), 'running');
    assert.deepEqual(await kinds(sb.id, 'sandbox.'), ['sandbox.paused:api', 'sandbox.resumed:exec']);
    // Resuming a running sandbox and pausing a paused one answer at once.
    assert.equal((await ok('POST', `/v1/sandboxes/${sb.id}/resume`)).status, 'running');
    assert.equal((await ok('POST', `/v1/sandboxes/${sb.id}/pause`)).status, 'paused');
    assert.equal((await ok('POST', `/v1/sandboxes/${sb.id}/pause`)).status, 'paused');
    assert.equal((await ok('POST', `/v1/sandboxes/${sb.id}/resume`)).status, 'running');
  });

  test('a removal asked for during a pause runs after it', async () => {
    const sb = await create({ name: 'loop-rm' });
    const [paused, removed] = await Promise.all([
      call('POST', `/v1/sandboxes/${sb.id}/pause`),
      call('DELETE', `/v1/sandboxes/${sb.id}`),
    ]);
    assert.equal(paused.status, 200, paused.text);
    assert.equal(removed.status, 200, removed.text);
    assert.equal((await call('GET', `/v1/sandboxes/${sb.id}`)).status, 404);
    d.sandboxes.delete(sb.id);
  });

  test('a gateway call wakes a paused sandbox; every other call works; the loop waited for none', async () => {
    const sb = await create({ name: 'loop-all' });
    await d.putFile(sb.id, '/workspace/hello.mjs', HELLO_SERVER);
    assert.equal((await d.getFile(sb.id, '/workspace/hello.mjs')).toString(), HELLO_SERVER);
    const { status } = await d.mcpReady(sb.id, [{ name: 'hello', command: ['node', '/workspace/hello.mjs'] }]);
    const s = status.servers.find((x) => x.name === 'hello');
    const client = new Client({ name: 'loop-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(s.url), {
      requestInit: { headers: status.headers },
    }));
    try {
      assert.equal((await ok('POST', `/v1/sandboxes/${sb.id}/pause`)).status, 'paused');
      const r = await client.callTool({ name: 'hello', arguments: { name: 'loop' } });
      assert.equal(r.content[0].text, 'hello, loop');
      assert.equal(await statusOf(sb.id), 'running');
      assert.deepEqual(await kinds(sb.id, 'sandbox.'), ['sandbox.paused:api', 'sandbox.resumed:gateway']);
    } finally {
      await client.close();
    }

    const net = await ok('PUT', `/v1/sandboxes/${sb.id}/network`, { internet: false });
    assert.equal(net.internet, false);
    const usage = await ok('GET', '/v1/usage');
    const row = usage.sandboxes.find((u) => u.sandbox === sb.id);
    assert.ok(row && row.status === 'running' && row.runningHours > 0, JSON.stringify(row));
    await ok('PUT', '/v1/egress-secrets/LOOP_TOKEN', { value: 'loop-secret-value', hosts: ['api.example.com'] }, 201);
    assert.ok((await ok('GET', '/v1/egress-secrets')).secrets.some((x) => x.name === 'LOOP_TOKEN'));
    await ok('DELETE', '/v1/egress-secrets/LOOP_TOKEN', undefined, 200);
    const acct = await ok('POST', '/v1/accounts', { name: 'loop-customer' }, 201);
    assert.match(acct.apiKey, /^rtk_[0-9a-f]{64}$/, 'a new account gets its key');
    await ok('DELETE', '/v1/accounts/loop-customer', undefined, 204);
    await ok('DELETE', `/v1/sandboxes/${sb.id}`, undefined, 200);
    d.sandboxes.delete(sb.id);

    const m = await call('GET', '/metrics');
    assert.equal(m.status, 200, m.text);
    assert.match(m.text, /^# TYPE runtime_keeper_loop_waits_total counter$/m);
    const waits = [...parseMetrics(m.text)].filter(([k]) => k.startsWith('runtime_keeper_loop_waits_total'));
    assert.deepEqual(waits, [], 'keeper requests the loop stopped for');
    assert.ok(parseMetrics(m.text).get('runtime_keeper_calls_total{type="freeze"}') >= 2);
    assert.doesNotMatch(d.log(), /the loop waits for|readonly database/);
  });
});
