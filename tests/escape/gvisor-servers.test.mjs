// MCP servers under the gvisor driver, each in a container of its own in the sandbox
// (docs/gvisor.md, "MCP servers in containers of their own"; src/sandbox/serve.c): its
// stdin and stdout are host pipes the daemon holds, its supervisor reports its stderr and
// its exit, and it keeps the sandbox's limits and user. Seen from inside (what the server
// reads of itself) and from the host (runsc's gofers in the sandbox's cgroup: one for the
// sandbox, one for each running server's container).
// Each sandbox here names its driver, so this file runs once, in the ns pass of make check.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { DRIVER, gvisorSkip, isRoot, runscProcesses, startDaemon, stopDaemon, waitFor } from '../e2e/lib.mjs';
import { Client, StreamableHTTPClientTransport } from '../mcp/lib.mjs';

const skip = !isRoot() ? 'needs root (runtimed does)'
  : DRIVER === 'gvisor' ? "each sandbox here names its driver: the file runs in make check's ns pass"
    : gvisorSkip();

// A stdio MCP server with no dependencies. inside: what it sees of itself; say: a line on
// its stderr; exit: it answers, then exits with that code.
const PROBE = `
import fs from 'node:fs';
import readline from 'node:readline';
const read = (p) => { try { return fs.readFileSync(p, 'utf8').trim(); } catch (e) { return 'error: ' + e.code; } };
const send = (m) => process.stdout.write(JSON.stringify({ jsonrpc: '2.0', ...m }) + '\\n');
const tool = (name) => ({ name, description: name, inputSchema: { type: 'object', properties: {} } });
readline.createInterface({ input: process.stdin }).on('line', (line) => {
  const m = JSON.parse(line);
  if (m.id === undefined) return;
  if (m.method === 'initialize') return send({ id: m.id, result: { protocolVersion: m.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'probe', version: '1' } } });
  if (m.method === 'tools/list') return send({ id: m.id, result: { tools: ['inside', 'say', 'exit'].map(tool) } });
  if (m.method !== 'tools/call') return send({ id: m.id, error: { code: -32601, message: 'no ' + m.method } });
  const args = m.params.arguments ?? {};
  const answer = (text) => send({ id: m.id, result: { content: [{ type: 'text', text }] } });
  if (m.params.name === 'inside') {
    return answer(JSON.stringify({
      uid: process.getuid(), pidsMax: read('/sys/fs/cgroup/pids/pids.max'), cgroup: read('/proc/self/cgroup'),
      parent: read('/proc/' + process.ppid + '/comm'), stdin: fs.readlinkSync('/proc/self/fd/0'),
    }));
  }
  if (m.params.name === 'say') { process.stderr.write(args.text + '\\n'); return answer('said'); }
  answer('bye');
  setTimeout(() => process.exit(args.code), 50);
});
`;

// Every sandbox's limit of processes (src/server/server_impl.h, DEFAULT_PIDS_MAX).
const PIDS_MAX = 1024;

let d, sb;
before(async () => {
  if (skip) return;
  d = await startDaemon({ prefix: 'runtime-gvisor-servers-' });
  sb = await d.create({ isolation: 'gvisor' });
  const put = await d.api('PUT', `/v1/sandboxes/${sb.id}/files?path=/workspace/probe.mjs`, undefined, { raw: PROBE });
  assert.ok(put.status < 300, put.text);
});
after(async () => {
  await stopDaemon(d);
});

const gofers = () => runscProcesses(d.stateDir, sb.id).filter((p) => p.cmdline.startsWith('runsc-gofer')).length;

async function startProbe(name) {
  const st = await d.api('POST', `/v1/sandboxes/${sb.id}/mcp`, { servers: [{ name, command: ['node', '/workspace/probe.mjs'] }] });
  assert.ok([200, 201, 202].includes(st.status), st.text);
  const r = await d.api('GET', `/v1/sandboxes/${sb.id}/mcp?wait=60`, undefined, { timeoutMs: 90000 });
  const s = r.body.servers.find((x) => x.name === name);
  assert.equal(s?.status, 'ready', JSON.stringify(r.body.servers));
  const client = new Client({ name: 'gvisor-servers-test', version: '1' });
  await client.connect(new StreamableHTTPClientTransport(new URL(s.url), { requestInit: { headers: r.body.headers } }));
  return client;
}

const call = async (client, name, args = {}) => (await client.callTool({ name, arguments: args })).content[0].text;

async function serverStatus(name) {
  const r = await d.api('GET', `/v1/sandboxes/${sb.id}/mcp`);
  return r.body.servers.find((x) => x.name === name);
}

test('a server runs in a container of its own: the sandbox user, its pids limit, its supervisor; its stderr reaches its logs', { skip }, async () => {
  assert.equal(gofers(), 1, 'the sandbox alone: one gofer');
  const client = await startProbe('probe');
  const seen = JSON.parse(await call(client, 'inside'));
  assert.equal(seen.uid, 1000);
  assert.equal(seen.pidsMax, String(PIDS_MAX), 'its container holds the sandbox\'s pids limit');
  assert.match(seen.cgroup, /pids:\/mcp-[0-9a-f]{16}$/m, 'gVisor\'s cgroup of its own container');
  assert.equal(seen.parent, 'runtime-serve');
  // Its stdin is the host's pipe, as a bare runsc's program's is; a program the agent
  // starts reads gVisor's own pipe, which the agent fills.
  assert.match(seen.stdin, /^host:/);
  const viaAgent = await d.exec(sb.id, ['readlink', '/proc/self/fd/0']);
  assert.match(viaAgent.stdout, /^pipe:/);
  assert.equal(gofers(), 2, 'its container has a gofer of its own');

  const mark = `said-${Date.now()}`;
  assert.equal(await call(client, 'say', { text: mark }), 'said');
  await waitFor(async () => (await d.api('GET', `/v1/sandboxes/${sb.id}/mcp/probe/logs`)).text.includes(mark),
    { what: 'its stderr in its logs' });
  await client.close();
});

test('a server that exits is reported with its status and started again; the container it left goes', { skip }, async () => {
  const client = await startProbe('probe');
  const mark = (await d.api('GET', `/v1/sandboxes/${sb.id}/events`)).body.at(-1)?.seq ?? 0;
  assert.equal(await call(client, 'exit', { code: 7 }), 'bye');
  const exited = await waitFor(async () => (await d.api('GET', `/v1/sandboxes/${sb.id}/events?after=${mark}`)).body
    .find((e) => e.kind === 'mcp.exited' && e.server === 'probe'), { timeoutMs: 20000, what: 'mcp.exited' });
  assert.equal(exited.exitCode, 7);
  await waitFor(async () => (await serverStatus('probe'))?.status === 'ready', { timeoutMs: 60000, what: 'its restart' });
  const seen = JSON.parse(await call(client, 'inside'));
  assert.equal(seen.parent, 'runtime-serve', 'the same client is served by the new process');
  // Its new container was started after the old one was deleted: one gofer for each.
  assert.equal(gofers(), 2);
  await client.close();
});

test('a server that cannot start fails with the reason, as under the ns driver', { skip }, async () => {
  await d.api('POST', `/v1/sandboxes/${sb.id}/mcp`, { servers: [{ name: 'missing', command: ['/workspace/no-such-program'] }] });
  const s = await waitFor(async () => {
    const x = await serverStatus('missing');
    return x?.status === 'failed' && x;
  }, { timeoutMs: 60000, what: 'the missing server to fail' });
  assert.match(s.error, /cannot start it: No such file or directory/);
});

test('removing a server ends its container: its supervisor kills it, its gofer is gone', { skip }, async () => {
  const r = await d.api('DELETE', `/v1/sandboxes/${sb.id}/mcp/probe`);
  assert.ok(r.status < 300, r.text);
  await waitFor(() => gofers() === 1, { timeoutMs: 20000, what: 'one gofer again' });
  const ps = await d.exec(sb.id, ['sh', '-c', 'ps -eo args | grep -c "[p]robe.mjs" || true']);
  assert.equal(ps.stdout.trim(), '0', 'no probe process is left in the sandbox');
});

test('hibernated and restored: a server is back in its container with its host pipes; one removed before is not', { skip }, async () => {
  const client = await startProbe('kept');
  const before = JSON.parse(await call(client, 'inside'));
  await startProbe('dropped').then((c) => c.close());
  assert.equal(gofers(), 3);
  const r = await d.api('DELETE', `/v1/sandboxes/${sb.id}/mcp/dropped`);
  assert.ok(r.status < 300, r.text);
  // At once, before a start deletes its container: the checkpoint must not keep it.
  const h = await d.api('POST', `/v1/sandboxes/${sb.id}:hibernate`);
  assert.equal(h.status, 200, h.text);
  assert.equal(gofers(), 0, 'hibernated: no runsc process');

  const after = JSON.parse(await call(client, 'inside')); // the call wakes it
  assert.deepEqual(after, before, 'the same process, in the same container, reading the same host pipe');
  const resumed = (await d.api('GET', `/v1/sandboxes/${sb.id}/events`)).body.filter((e) => e.kind === 'sandbox.resumed');
  assert.equal(resumed.at(-1).from, 'image', JSON.stringify(resumed.at(-1)));
  assert.equal(gofers(), 2, 'the sandbox\'s and the kept server\'s');
  assert.equal((await serverStatus('kept')).status, 'ready');
  await client.close();
});
