// The official MCP conformance suite (server side, its active scenarios) against the
// gateway: a stdio fixture with the suite's test_* tools runs in a sandbox, and
// conformance.sh runs every scenario through a loopback proxy that adds the bearer
// token (the suite cannot). Two runs against the same daemon, server and URL, which
// also shows that one URL serves both eras: 2025-11-25 (suite 0.1.16, stateful
// sessions; score in build/conformance.json) and 2026-07-28 (suite 0.2.0-alpha.12,
// stateless, conformance-2026-baseline.yml excepted; build/conformance-2026.json).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { stopDaemon } from '../e2e/lib.mjs';
import { FIXTURES, HERE, ROOT, run, skipReason, startMcpDaemon } from './lib.mjs';

// What conformance-server.mjs imports, with its dependencies (see docs/conformance.md).
const PACKAGES = ['@modelcontextprotocol/sdk', 'zod', 'zod-to-json-schema', 'ajv', 'ajv-formats',
  'fast-deep-equal', 'fast-uri', 'json-schema-traverse', 'require-from-string'];

describe('MCP conformance suite through the gateway', { skip: skipReason() }, () => {
  let d, id, tmp, url, token;
  before(async () => {
    d = await startMcpDaemon({ prefix: 'runtime-mcp-conf-' });
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'runtime-conf-'));
    const tgz = path.join(tmp, 'modules.tgz');
    const tar = spawnSync('tar', ['czf', tgz, '-C', HERE, ...PACKAGES.map((p) => `node_modules/${p}`)]);
    assert.equal(tar.status, 0, String(tar.stderr));
    const r = await d.api('POST', '/v1/sandboxes', { name: 'conformance', memoryMiB: 1024 });
    id = r.body.id;
    await d.mustExec(id, ['mkdir', '-p', '/workspace/conf']);
    await d.putFile(id, '/workspace/conf/modules.tgz', fs.readFileSync(tgz));
    await d.putFile(id, '/workspace/conf/conformance-server.mjs',
      fs.readFileSync(path.join(FIXTURES, 'conformance-server.mjs')));
    await d.mustExec(id, ['tar', 'xzf', '/workspace/conf/modules.tgz', '-C', '/workspace/conf'], { timeoutMs: 120000 });
    const { status } = await d.mcpReady(id, [{ name: 'conformance', command: ['node', '/workspace/conf/conformance-server.mjs'] }]);
    url = status.servers.find((s) => s.name === 'conformance').url;
    token = status.headers.Authorization.replace(/^Bearer /, '');
  });
  after(async () => {
    if (d) await stopDaemon(d);
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  // Runs conformance.sh against the server (extra: e.g. --revision), prints the score line
  // and fails unless it exits 0.
  async function conformance(out, extra = []) {
    fs.mkdirSync(path.dirname(out), { recursive: true });
    const r = await run(path.join(HERE, 'conformance.sh'), ['--url', url, '--token', token, '--out', out, ...extra],
      { timeoutMs: 650000 });
    const score = r.stdout.split('\n').filter((l) => /conformance: \d+\/\d+/.test(l)).join('');
    console.log(score);
    assert.equal(r.code, 0, `conformance failed:\n${r.stdout}\n${r.stderr}`);
  }

  test('every active server scenario passes', { timeout: 700000 }, async () => {
    await conformance(path.join(ROOT, 'build', 'conformance.json'));
  });

  test('every 2026-07-28 requirement passes (baseline excepted)', { timeout: 700000 }, async () => {
    await conformance(path.join(ROOT, 'build', 'conformance-2026.json'), ['--revision', '2026-07-28']);
  });
});
