// The official MCP conformance suite (server side, its active scenarios) against the
// gateway: a stdio fixture with the suite's test_* tools runs in a sandbox, and
// conformance.sh runs every scenario through a loopback proxy that adds the bearer
// token (the suite cannot). The score is written to build/conformance.json.
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
  let d, id, tmp;
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
  });
  after(async () => {
    if (d) await stopDaemon(d);
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  test('every active server scenario passes', { timeout: 700000 }, async () => {
    const { status } = await d.mcpReady(id, [{ name: 'conformance', command: ['node', '/workspace/conf/conformance-server.mjs'] }]);
    const server = status.servers.find((s) => s.name === 'conformance');
    const out = path.join(ROOT, 'build', 'conformance.json');
    fs.mkdirSync(path.dirname(out), { recursive: true });
    const token = status.headers.Authorization.replace(/^Bearer /, '');
    const r = await run(path.join(HERE, 'conformance.sh'), ['--url', server.url, '--token', token, '--out', out],
      { timeoutMs: 650000 });
    const score = r.stdout.split('\n').filter((l) => /conformance: \d+\/\d+/.test(l)).join('');
    console.log(score);
    assert.equal(r.code, 0, `conformance failed:\n${r.stdout}\n${r.stderr}`);
  });
});
