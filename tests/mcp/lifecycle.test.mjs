// The life of a server in a sandbox, as a user of the API sees it: clear errors for
// bad settings, idempotent starts, a crash restarted with an event, failures at start
// with the reason, warnings for hosts refused while starting, a daemon SIGKILL that
// brings every server back on the same URL, a sandbox stopped and started again with
// its servers at the same URL, and nothing left after stop and rm.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { processesMatching, stopDaemon } from '../e2e/lib.mjs';
import { Client, StreamableHTTPClientTransport, skipReason, startMcpDaemon, waitFor } from './lib.mjs';

// A server with no dependencies: tools "echo" and "crash" (exits with status 3), and at
// start a DNS lookup of the name in its first argument (to see the egress refuse it): it
// reads its first request only once the lookup is answered, so the refusal is recorded
// while it is still starting, however slow the daemon is (a sanitized one).
const SERVER = String.raw`
import readline from 'node:readline';
import dns from 'node:dns';
const tools = [
  { name: 'echo', description: 'Echoes text.', inputSchema: { type: 'object', properties: { text: { type: 'string' } } } },
  { name: 'crash', description: 'Exits the server.', inputSchema: { type: 'object' } },
];
const send = (m) => process.stdout.write(JSON.stringify({ jsonrpc: '2.0', ...m }) + '\n');
const serve = () => readline.createInterface({ input: process.stdin }).on('line', (line) => {
  const m = JSON.parse(line);
  if (m.id === undefined) return;
  if (m.method === 'initialize') return send({ id: m.id, result: { protocolVersion: m.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'life', version: '1' } } });
  if (m.method === 'tools/list') return send({ id: m.id, result: { tools } });
  if (m.method === 'tools/call' && m.params.name === 'crash') process.exit(3);
  if (m.method === 'tools/call') return send({ id: m.id, result: { content: [{ type: 'text', text: m.params.arguments.text }] } });
  send({ id: m.id, error: { code: -32601, message: 'no ' + m.method } });
});
if (process.argv[2]) dns.lookup(process.argv[2], serve); else serve();
`;

const life = (name, extra = []) => ({ name, command: ['node', '/workspace/life.mjs', ...extra] });

async function connect(status, name) {
  const s = status.servers.find((x) => x.name === name);
  const c = new Client({ name: 'lifecycle', version: '1' });
  await c.connect(new StreamableHTTPClientTransport(new URL(s.url), { requestInit: { headers: status.headers } }));
  return c;
}

describe('MCP server lifecycle', { skip: skipReason() }, () => {
  let d, id;
  before(async () => {
    d = await startMcpDaemon({ prefix: 'runtime-mcp-life-' });
    const r = await d.api('POST', '/v1/sandboxes', { name: 'life', network: { internet: true, allow: ['allowed.test'] } });
    id = r.body.id;
    await d.putFile(id, '/workspace/life.mjs', SERVER);
  });
  after(async () => { if (d) await stopDaemon(d); });

  test('bad settings are refused with a message that says what to do', async () => {
    const cases = [
      [[{ id: 'no-such-server' }], 400, /catalog/],
      [[{ name: 'Bad Name', command: ['node'] }], 400, /a-z/],
      [[{ name: 'x' }], 400, /command/],
      [[{ id: 'github' }], 400, /GITHUB_PERSONAL_ACCESS_TOKEN/],
      [[{ id: 'memory', secrets: { X: 'NO_SUCH_SECRET' } }], 400, /runtime secret set/],
      [[{ name: 'a', command: ['node'], isolation: 'weird' }], 400, /isolation/],
      [[{ name: 'a', command: ['node'], fingerprint: 'xyz' }], 400, /hex/],
      [[life('twice'), life('twice')], 400, /twice/],
      [[], 400, /servers/],
    ];
    for (const [servers, status, re] of cases) {
      const r = await d.mcpStartRaw(id, servers);
      assert.equal(r.status, status, `${JSON.stringify(servers)}: ${r.text}`);
      assert.match(r.body.error.message, re, JSON.stringify(servers));
    }
    const st = await d.mcpStatus(id);
    assert.deepEqual(st.servers, [], 'nothing was started by a refused call');
  });

  test('a start of the same server is a no-op; other settings under its name are a conflict', async () => {
    await d.mcpReady(id, [life('same')]);
    const mark = await d.eventMark(id);
    const sandbox = (await d.api('GET', `/v1/sandboxes/${id}`)).body;
    assert.equal(sandbox.mcp.servers.find((s) => s.name === 'same').status, 'ready', 'the sandbox shows its servers');
    assert.equal(JSON.stringify(sandbox).includes((await d.mcpStatus(id)).headers.Authorization.slice(7)), false,
      'the sandbox object does not carry the gateway token');
    const again = await d.mcpStartRaw(id, [life('same')]);
    assert.equal(again.status, 202, again.text);
    assert.equal(again.body.servers.find((s) => s.name === 'same').status, 'ready');
    const other = await d.mcpStartRaw(id, [life('same', ['other-arg'])]);
    assert.equal(other.status, 409, other.text);
    assert.match(other.body.error.message, /stop it first/);
    const ev = await d.events(id, mark);
    assert.equal(ev.filter((e) => e.kind === 'mcp.ready').length, 0, 'no restart happened');
  });

  test('a server that exits is restarted, with an event, and serves again', async () => {
    const st = (await d.mcpReady(id, [life('crashy')])).status;
    const mark = await d.eventMark(id);
    const c = await connect(st, 'crashy');
    await assert.rejects(c.callTool({ name: 'crash', arguments: {} }), /ended before answering|exited/);
    const exited = await d.waitEvent(id, (e) => e.kind === 'mcp.exited' && e.server === 'crashy', { after: mark });
    assert.equal(exited.exitCode, 3);
    await d.waitEvent(id, (e) => e.kind === 'mcp.ready' && e.server === 'crashy', { after: exited.seq });
    const r = await c.callTool({ name: 'echo', arguments: { text: 'back' } });
    assert.equal(r.content[0].text, 'back', 'the same client session is served by the new process');
    await c.close();
  });

  test('a server that cannot start fails with the reason', async () => {
    await d.mcpStart(id, [{ name: 'missing', command: ['/workspace/no-such-program'] },
      { name: 'quits', command: ['node', '-e', 'console.error("bad config"); process.exit(2)'] }]);
    const { servers } = await d.mcpSettle(id, ['missing', 'quits']);
    assert.equal(servers.missing.status, 'failed');
    assert.match(servers.missing.error, /No such file or directory/);
    assert.equal(servers.quits.status, 'failed');
    assert.match(servers.quits.error, /exited with status 2: bad config/);
    const gw = await fetch(servers.quits.url, { method: 'POST', headers: { Authorization: (await d.mcpStatus(id)).headers.Authorization, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' }, body: '{}' });
    assert.equal(gw.status, 503, 'a failed server is not served');
  });

  test('a host refused while a server starts is a warning on it', async () => {
    const { servers } = await d.mcpReady(id, [life('curious', ['blocked.test'])]);
    assert.ok(servers.curious.warnings.some((w) => /blocked\.test.*refused/.test(w)), JSON.stringify(servers.curious));
  });

  test('after SIGKILL of the daemon every running server is back on the same URL and token', async () => {
    const before = await d.mcpStatus(id);
    const ready = before.servers.filter((s) => s.status === 'ready').map((s) => s.name).sort();
    await d.kill9();
    await d.start();
    const { status } = await d.mcpSettle(id, ready);
    assert.equal(status.headers.Authorization, before.headers.Authorization);
    for (const name of ready) {
      const s = status.servers.find((x) => x.name === name);
      assert.equal(s.status, 'ready', `${name}: ${s.error}`);
      assert.equal(s.url, before.servers.find((x) => x.name === name).url);
    }
    const c = await connect(status, 'same');
    assert.equal((await c.callTool({ name: 'echo', arguments: { text: 'again' } })).content[0].text, 'again');
    await c.close();
  });

  test('a server stopped, or its sandbox removed, right after its start leaves no process', async () => {
    // The keeper starts the process while the gateway goes on: a stop or an rm that
    // comes before (or just after) that answer still ends it.
    const r = await d.api('POST', '/v1/sandboxes', { name: 'life-hasty' });
    assert.equal(r.status, 201, r.text);
    const hasty = r.body.id;
    d.track(hasty);
    await d.putFile(hasty, '/workspace/life.mjs', SERVER);
    const marker = `hasty-${Date.now()}.test`; // in its argv, so its processes can be counted
    const server = life('hasty', [marker]);
    // Another sandbox's create first keeps the keeper busy, so the start's answer is
    // still to come when the stop or the rm arrives.
    const others = [];
    const busy = () => others.push(d.api('POST', '/v1/sandboxes', {}));
    for (let i = 0; i < 3; i++) {
      busy();
      await d.mcpStart(hasty, [server]);
      const stop = await d.api('DELETE', `/v1/sandboxes/${hasty}/mcp/hasty`);
      assert.equal(stop.status, 204, stop.text);
    }
    const { servers } = await d.mcpReady(hasty, [server]);
    assert.equal(servers.hasty.status, 'ready', servers.hasty.error);
    await waitFor(() => processesMatching(marker).length === 1,
      { what: 'one process of the server: the stopped starts left none' });
    busy();
    const again = await d.mcpStartRaw(hasty, [life('second', [marker])]);
    assert.equal(again.status, 202, again.text);
    assert.equal((await d.api('DELETE', `/v1/sandboxes/${hasty}`)).status, 200);
    await waitFor(() => processesMatching(marker).length === 0, { what: 'the removed sandbox\'s server processes to end' });
    for (const made of await Promise.all(others)) {
      assert.equal(made.status, 201, made.text);
      assert.equal((await d.api('DELETE', `/v1/sandboxes/${made.body.id}`)).status, 200);
    }
  });

  test('a sandbox stopped and started again keeps its workspace, name, MCP URL and token', async () => {
    const r = await d.api('POST', '/v1/sandboxes', { name: 'life-sleeper' });
    assert.equal(r.status, 201, r.text);
    const sid = r.body.id;
    d.track(sid);
    const marker = `sleeper-${Date.now()}.test`;
    await d.putFile(sid, '/workspace/life.mjs', SERVER);
    const { status: before } = await d.mcpReady(sid, [life('keep', [marker])]);
    const url = before.servers.find((x) => x.name === 'keep').url;
    const nap = `sleep ${3600 + (Date.now() % 997)}`; // a background process of its own
    await d.mustExec(sid, ['sh', '-c', `echo kept > /workspace/note; ${nap} </dev/null >/dev/null 2>&1 &`]);
    await waitFor(() => processesMatching(marker).length === 1 && processesMatching(nap).length === 1,
      { what: 'the server and the sleep' });

    const stop = await d.api('POST', `/v1/sandboxes/${sid}/stop`);
    assert.equal(stop.status, 200, stop.text);
    assert.equal(stop.body.status, 'stopped');
    assert.deepEqual([...processesMatching(marker), ...processesMatching(nap)], [],
      'no process of the sandbox is left');
    const again = await d.api('POST', `/v1/sandboxes/${sid}/stop`);
    assert.equal(again.status, 200, 'a second stop is no error');
    const exec = await d.api('POST', `/v1/sandboxes/${sid}/exec`, { argv: ['true'] });
    assert.equal(exec.status, 409, exec.text);
    assert.match(exec.body.error.message, /stopped; start it with `runtime sandbox start/);
    const pause = await d.api('POST', `/v1/sandboxes/${sid}/pause`);
    assert.equal(pause.status, 400, `a stopped sandbox cannot be paused: ${pause.text}`);
    const gw = await fetch(url, { method: 'POST', headers: { Authorization: before.headers.Authorization, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' }, body: '{}' });
    assert.notEqual(gw.status, 200, 'nothing answers at its URL while it is stopped');
    const events = (await d.events(sid)).filter((e) => e.kind.startsWith('sandbox.'));
    assert.deepEqual(events.map((e) => [e.kind, e.reason]), [['sandbox.stopped', 'api']]);

    // A restart of the daemon keeps it stopped: nothing is built behind the user's back.
    await d.stop();
    await d.start();
    assert.equal((await d.api('GET', `/v1/sandboxes/${sid}`)).body.status, 'stopped');
    assert.deepEqual([...processesMatching(marker), ...processesMatching(nap)], [],
      'still nothing runs after a restart');

    const start = await d.api('POST', `/v1/sandboxes/${sid}/start`);
    assert.equal(start.status, 200, start.text);
    assert.equal(start.body.status, 'running');
    assert.equal(start.body.name, 'life-sleeper');
    const { status: after } = await d.mcpSettle(sid, ['keep']);
    const keep = after.servers.find((x) => x.name === 'keep');
    assert.equal(keep.status, 'ready', keep.error);
    assert.equal(keep.url, url, 'the same URL');
    assert.equal(after.headers.Authorization, before.headers.Authorization, 'the same token');
    const c = await connect(after, 'keep');
    assert.equal((await c.callTool({ name: 'echo', arguments: { text: 'back' } })).content[0].text, 'back');
    await c.close();
    const note = await d.mustExec(sid, ['cat', '/workspace/note']);
    assert.equal(note.stdout, 'kept\n');
    const kinds = (await d.events(sid)).filter((e) => e.kind.startsWith('sandbox.')).map((e) => e.kind);
    assert.deepEqual(kinds, ['sandbox.stopped', 'sandbox.started']);

    // Stopped again, then removed: its files go with it.
    assert.equal((await d.api('POST', `/v1/sandboxes/${sid}/stop`)).status, 200);
    const dir = path.join(d.stateDir, 'sandboxes', sid);
    assert.ok(fs.existsSync(dir), 'a stopped sandbox keeps its directory');
    assert.equal((await d.api('DELETE', `/v1/sandboxes/${sid}`)).status, 200);
    assert.ok(!fs.existsSync(dir), 'removed, its directory is gone');
    assert.deepEqual(d.leftovers().cgroups.filter((c2) => c2.endsWith(sid)), []);
  });

  test('stop ends the process and the URL; rm leaves no server process', async () => {
    const st = await d.mcpStatus(id);
    await d.mcpStop(id, 'same');
    const s = (await d.mcpStatus(id)).servers.find((x) => x.name === 'same');
    assert.equal(s.phase, 'stopped');
    assert.equal(s.status, 'failed', 'not serving: Runtime Cloud\'s word');
    const gw = await fetch(s.url, { method: 'POST', headers: { Authorization: st.headers.Authorization, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' }, body: '{}' });
    assert.equal(gw.status, 503);
    assert.equal((await d.api('DELETE', `/v1/sandboxes/${id}`)).status, 200);
    await waitFor(() => processesMatching('/workspace/life.mjs').length === 0, { what: 'server processes to end' });
  });
});
