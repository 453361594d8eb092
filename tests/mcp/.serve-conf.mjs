// scratch: a daemon with the conformance fixture, prints URL and token, stays up until killed
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { FIXTURES, HERE, startMcpDaemon } from './lib.mjs';
import { stopDaemon } from '../e2e/lib.mjs';
const PACKAGES = ['@modelcontextprotocol/sdk', 'zod', 'zod-to-json-schema', 'ajv', 'ajv-formats',
  'fast-deep-equal', 'fast-uri', 'json-schema-traverse', 'require-from-string'];
const fixture = process.argv[2] || path.join(FIXTURES, 'conformance-server.mjs');
const d = await startMcpDaemon({ prefix: 'runtime-c26-' });
const tgz = '/tmp/c26/modules.tgz';
spawnSync('tar', ['czf', tgz, '-C', HERE, ...PACKAGES.map((p) => `node_modules/${p}`)]);
const r = await d.api('POST', '/v1/sandboxes', { name: 'conformance', memoryMiB: 1024 });
const id = r.body.id;
await d.mustExec(id, ['mkdir', '-p', '/workspace/conf']);
await d.putFile(id, '/workspace/conf/modules.tgz', fs.readFileSync(tgz));
await d.putFile(id, '/workspace/conf/conformance-server.mjs', fs.readFileSync(fixture));
await d.mustExec(id, ['tar', 'xzf', '/workspace/conf/modules.tgz', '-C', '/workspace/conf'], { timeoutMs: 120000 });
const { status } = await d.mcpReady(id, [{ name: 'conformance', command: ['node', '/workspace/conf/conformance-server.mjs'] }]);
const server = status.servers.find((s) => s.name === 'conformance');
fs.writeFileSync('/tmp/c26/endpoint', JSON.stringify({ url: server.url, token: status.headers.Authorization.replace(/^Bearer /, '') }));
console.log('READY', server.url);
process.on('SIGTERM', async () => { await stopDaemon(d); process.exit(0); });
setInterval(() => {}, 1 << 30);
