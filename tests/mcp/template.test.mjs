// Templates (docs/templates.md): the catalog's memory server, installed from npm and
// started once in a gvisor sandbox, is checkpointed as a template; the next sandbox of
// the account with the same server restores it instead of installing, its tools go
// through the fingerprint gate as any start's, and its memory is its own. A template
// that will not restore gives an install and an event; a sandbox in which an exec ran is
// neither replaced nor saved; another account never gets the template (it saves its own).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { gvisorSkip, runscProcesses, stopDaemon, waitFor } from '../e2e/lib.mjs';
import { Client, StreamableHTTPClientTransport, skipReason, startMcpDaemon } from './lib.mjs';

const skip = skipReason({ online: true }) || gvisorSkip();
const MEMORY = { id: 'memory' };
const GVISOR = { isolation: 'gvisor', memoryMiB: 512 };
const INSTALL_MS = 4 * 60 * 1000;

async function connect(status) {
  const s = status.servers.find((x) => x.name === 'memory');
  const c = new Client({ name: 'template-test', version: '1' });
  await c.connect(new StreamableHTTPClientTransport(new URL(s.url), { requestInit: { headers: status.headers } }));
  return c;
}

const kinds = (events) => events.map((e) => e.kind ?? e.type);

describe('templates of catalog servers (gvisor)', { skip, timeout: 15 * 60 * 1000 }, () => {
  let d, first, firstTools, firstKey;
  before(async () => {
    d = await startMcpDaemon({ online: true, prefix: 'runtime-template-' });
    first = (await d.api('POST', '/v1/sandboxes', GVISOR)).body;
    await d.mcpReady(first.id, [MEMORY], { timeoutMs: INSTALL_MS });
  });
  after(async () => { if (d) await stopDaemon(d); });

  const templatesDir = () => path.join(d.dir, 'state', 'server-templates');

  test('the first start installs and saves a template; the next sandbox restores it', async () => {
    const ev = kinds(await d.events(first.id));
    assert.ok(ev.includes('mcp.installed') && ev.includes('mcp.template_saved'), ev.join(' '));
    [firstKey] = fs.readdirSync(templatesDir());
    // Its server ran in a container of its own (docs/gvisor.md, "MCP servers"), and the
    // template keeps that container's name and process.
    const saved = JSON.parse(fs.readFileSync(path.join(templatesDir(), firstKey, 'server.json'), 'utf8'));
    assert.match(saved.name, /^mcp-[0-9a-f]{16}$/);
    const status = await d.mcpStatus(first.id);
    const a = await connect(status);
    firstTools = (await a.listTools()).tools.map((t) => t.name).sort();
    await a.callTool({ name: 'create_entities', arguments: { entities: [{ name: 'only-in-first', entityType: 'marker', observations: ['a'] }] } });
    await a.close();

    const second = (await d.api('POST', '/v1/sandboxes', GVISOR)).body;
    const got = await d.mcpReady(second.id, [MEMORY], { timeoutMs: 60000 });
    const ev2 = kinds(await d.events(second.id));
    assert.ok(ev2.includes('mcp.template_restored'), ev2.join(' '));
    assert.ok(!ev2.includes('mcp.installing'), `no install: ${ev2.join(' ')}`);
    assert.equal(got.servers.memory.fingerprint, status.servers.find((s) => s.name === 'memory').fingerprint);
    const b = await connect(got.status);
    assert.deepEqual((await b.listTools()).tools.map((t) => t.name).sort(), firstTools);
    const gofers = runscProcesses(d.stateDir, second.id).filter((p) => p.cmdline.startsWith('runsc-gofer'));
    assert.equal(gofers.length, 2, 'restored in a container of its own: its gofer beside the sandbox\'s');
    const graph = JSON.parse((await b.callTool({ name: 'read_graph', arguments: {} })).content[0].text);
    assert.deepEqual(graph.entities, [], 'the first sandbox\'s memory is not in the second');
    await b.callTool({ name: 'create_entities', arguments: { entities: [{ name: 'only-in-second', entityType: 'marker', observations: ['b'] }] } });
    const again = JSON.parse((await b.callTool({ name: 'read_graph', arguments: {} })).content[0].text);
    assert.deepEqual(again.entities.map((e) => e.name), ['only-in-second']);
    await b.close();
    // Its install is its own, owned by its user, and its hostname its own.
    const ls = await d.mustExec(second.id, ['sh', '-c', 'stat -c %U /workspace/mcp/memory/package.json; hostname']);
    assert.deepEqual(ls.stdout.trim().split('\n'), ['user', second.id]);
  });

  test('a restored server still goes through the fingerprint gate', async () => {
    const sb = (await d.api('POST', '/v1/sandboxes', GVISOR)).body;
    await d.mcpStart(sb.id, [{ ...MEMORY, fingerprint: '0'.repeat(64) }]);
    const got = await d.mcpSettle(sb.id, ['memory']);
    assert.equal(got.servers.memory.phase, 'refused', JSON.stringify(got.servers.memory));
    assert.ok(kinds(await d.events(sb.id)).includes('mcp.template_restored'));
  });

  test('another account never gets the template: its sandbox installs', async () => {
    const made = await d.api('POST', '/v1/accounts', { name: 'other' });
    assert.equal(made.status, 201, made.text);
    const key = made.body.apiKey;
    const sb = (await d.api('POST', '/v1/sandboxes', GVISOR, { key })).body;
    assert.equal((await d.api('POST', `/v1/sandboxes/${sb.id}/mcp`, { servers: [MEMORY] }, { key })).status, 202);
    const st = await d.api('GET', `/v1/sandboxes/${sb.id}/mcp?wait=240`, undefined, { key, timeoutMs: INSTALL_MS });
    assert.equal(st.body.servers[0].status, 'ready', st.text);
    const ev = await d.api('GET', `/v1/sandboxes/${sb.id}/events`, undefined, { key });
    assert.ok(kinds(ev.body).includes('mcp.installed') && !kinds(ev.body).includes('mcp.template_restored'),
      kinds(ev.body).join(' '));
  });

  test('a sandbox in which an exec ran neither takes nor gives a template: what it left running runs on', async () => {
    const sb = (await d.api('POST', '/v1/sandboxes', GVISOR)).body;
    // The exec ends at once; the program it left in the background does not.
    await d.mustExec(sb.id, ['sh', '-c', 'setsid sleep 600 </dev/null >/dev/null 2>&1 &']);
    const sleeping = async () => (await d.mustExec(sb.id, ['sh', '-c', 'ps -e -o comm= | grep -c "^sleep$" || true'])).stdout.trim();
    await waitFor(async () => (await sleeping()) === '1', { what: 'the background sleep to run' });
    await d.mcpReady(sb.id, [MEMORY], { timeoutMs: INSTALL_MS });
    const ev = kinds(await d.events(sb.id));
    assert.ok(ev.includes('mcp.installed') && !ev.includes('mcp.template_restored'), ev.join(' '));
    assert.ok(!ev.includes('mcp.template_saved'), 'nor is its server saved as a template');
    assert.equal(await sleeping(), '1', 'the program it left running was not ended');
  });

  test('a template that will not restore: an event, an install, and the template goes', async () => {
    const key = firstKey;
    const image = path.join(templatesDir(), key, 'image');
    for (const f of fs.readdirSync(image)) fs.writeFileSync(path.join(image, f), 'not an image');
    const sb = (await d.api('POST', '/v1/sandboxes', GVISOR)).body;
    await d.mcpReady(sb.id, [MEMORY], { timeoutMs: INSTALL_MS });
    const events = await d.events(sb.id);
    const failed = events.find((e) => (e.kind ?? e.type) === 'mcp.template_failed');
    assert.ok(failed, kinds(events).join(' '));
    assert.match(JSON.stringify(failed), /would not restore/);
    assert.ok(kinds(events).includes('mcp.installed'));
    assert.ok(!fs.existsSync(path.join(templatesDir(), key, 'program')), 'the broken template was removed');
    const c = await connect(await d.mcpStatus(sb.id));
    assert.deepEqual((await c.listTools()).tools.map((t) => t.name).sort(), firstTools);
    await c.close();
  });
});
