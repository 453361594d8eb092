// The daemon's log, as an operator reads it: one line for each sandbox created or
// removed, each refusal (an account's limit, the MCP fingerprint gate, the servers of a
// sandbox) and each MCP server that failed, naming the sandbox, its name and account.
//
//   node --test tests/e2e/daemon-log.test.mjs   (as root; `make` first)
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { ROOT, isRoot, startDaemon, stopDaemon, waitFor } from './lib.mjs';

const HELLO = path.join(ROOT, 'tests', 'mcp', 'fixtures', 'hello-server.mjs');

/** Waits until the daemon's log has a line matching re (it is written as things happen). */
function logLine(d, re, what) {
  return waitFor(() => d.log().split('\n').find((l) => re.test(l)), { what: `${what} in the daemon's log` })
    .catch((e) => {
      e.message += `\nlog:\n${d.log()}`;
      throw e;
    });
}

const esc = (s) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

describe('the daemon log', { skip: !isRoot() && 'must run as root (runtimed needs it)' }, () => {
  let d;

  before(async () => {
    d = await startDaemon({ prefix: 'runtime-daemon-log-' });
  });
  after(async () => {
    await stopDaemon(d);
  });

  test('a create and a removal: one line each, with the id, name and account', async () => {
    const sb = await d.create({ name: 'logged', memoryMiB: 256, cpus: 0.5, diskMiB: 256 });
    const who = `sandbox ${sb.id} (name logged, account default)`;
    await logLine(d, new RegExp(`info server: ${esc(who)} created in \\d+ ms: 256 MiB, 0\\.5 CPUs, ` +
      '256 MiB disk, internet on$'), 'the create');
    const unnamed = await d.create({});
    await logLine(d, new RegExp(`${esc(`sandbox ${unnamed.id} (account default)`)} created`), 'an unnamed create');
    assert.equal((await d.remove(sb.id)).status, 200);
    await logLine(d, new RegExp(`info server: ${esc(who)} removed$`), 'the removal');
    await d.remove(unnamed.id);
  });

  test("an account's limit: the refusal is logged with the account and the limit", async () => {
    const a = await d.api('POST', '/v1/accounts', { name: 'capped', maxSandboxes: 1 });
    assert.equal(a.status, 201, a.text);
    const key = a.body.apiKey;
    const first = await d.api('POST', '/v1/sandboxes', {}, { key });
    assert.equal(first.status, 201, first.text);
    d.track(first.body.id);
    const second = await d.api('POST', '/v1/sandboxes', {}, { key });
    assert.equal(second.status, 429, second.text);
    await logLine(d, /warn server: refused a sandbox of account capped: account capped has 1 sandboxes, its limit maxSandboxes=1/,
      'the refusal');
    assert.equal((await d.api('DELETE', '/v1/accounts/capped')).status, 204);
  });

  test('MCP servers: a refusal by the fingerprint gate and a failure, one line each', async () => {
    const sb = await d.create({ name: 'gated' });
    const put = await d.api('PUT', `/v1/sandboxes/${sb.id}/files?path=hello.mjs`, undefined,
      { raw: fs.readFileSync(HELLO) });
    assert.equal(put.status, 204, put.text);
    const start = await d.api('POST', `/v1/sandboxes/${sb.id}/mcp`, { servers: [
      { name: 'pinned', command: ['node', '/workspace/hello.mjs'], fingerprint: '0'.repeat(16) },
      { name: 'crashing', command: ['sh', '-c', 'echo "missing config" >&2; exit 7'] },
    ] });
    assert.equal(start.status, 202, start.text);
    const who = `sandbox ${sb.id} (name gated, account default): MCP server`;
    await logLine(d, new RegExp(`warn server: ${esc(who)} pinned refused: .*0000000000000000`), 'the refusal');
    await logLine(d, new RegExp(`warn server: ${esc(who)} crashing failed while starting \\(after [\\d.]+ s\\): ` +
      'it exited with status 7: missing config$'), 'the failure');
    await d.remove(sb.id);
  });
});

describe('the keeper logs how the server ended', { skip: !isRoot() && 'must run as root (runtimed needs it)' }, () => {
  let d;

  before(async () => {
    d = await startDaemon({ prefix: 'runtime-daemon-end-' });
  });
  after(async () => {
    await stopDaemon(d);
  });

  test('kill -9 of the server process: the log says it was killed, and by which signal', async () => {
    const [keeper, server] = d.daemonPids();
    assert.ok(server, `the server process of keeper ${keeper} was found`);
    process.kill(server, 'SIGKILL');
    await waitFor(() => d.exited, { what: 'runtimed to exit once its server is gone' });
    const line = await logLine(d, /error keeper: the server process/, 'the line about the server');
    assert.match(line, new RegExp(`error keeper: the server process \\(pid ${server}\\) was killed by signal 9 \\(SIGKILL\\)$`));
  });

  test('a clean stop says the server exited', async () => {
    await d.start();
    const [, server] = d.daemonPids();
    await d.stop();
    await logLine(d, new RegExp(`info keeper: the server process \\(pid ${server}\\) exited$`), 'the clean end');
  });
});
