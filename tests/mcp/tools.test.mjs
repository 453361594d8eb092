// Per-tool allow lists (issue 15): a server's `tools` option exposes only those
// tools. tools/list shows only them, a call to any other is refused with a clear
// error and an mcp.refused event, and the fingerprint gate still judges the
// whole list the server offers. Through the official MCP client, the API and
// the CLI, against hello-server.mjs with two extra tools.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import {
  FIXTURES, closeClient, connectClient, fingerprint, resultText, run, skipReason, startMcpDaemon,
} from './lib.mjs';

const HELLO = path.join(FIXTURES, 'hello-server.mjs');
const SERVER = '/workspace/hello.mjs';
const EXTRA = ['read_file', 'delete_repo'];
const command = ['node', SERVER, '--extra', EXTRA.join(',')];
const skip = skipReason();

let d, sb;

before(async () => {
  if (skip) return;
  d = await startMcpDaemon({ prefix: 'runtime-mcp-tools-' });
  sb = await d.create({ name: 'tools-box' });
  await d.putFile(sb.id, SERVER, fs.readFileSync(HELLO));
});

after(async () => {
  if (d) await d.close();
});

test('only the listed tools are seen and called; the others are refused and reported', { skip }, async () => {
  const got = await d.mcpReady(sb.id, [{ name: 'multi', command, tools: ['hello', 'read_file'] }]);
  const multi = got.servers.multi;
  assert.deepEqual([...multi.tools].sort(), ['hello', 'read_file']);
  // The gate judged the whole list the server offers, not the exposed part.
  const all = JSON.parse((await run(process.execPath, [HELLO, '--extra', EXTRA.join(','), '--print-tools'])).stdout);
  assert.equal(all.length, 3);
  assert.equal(multi.fingerprint, fingerprint(all).short);

  const client = await connectClient(multi.url, got.status.headers.Authorization);
  try {
    const listed = await client.listTools();
    assert.deepEqual(listed.tools.map((t) => t.name).sort(), ['hello', 'read_file']);
    const ok = await client.callTool({ name: 'read_file', arguments: { path: 'a' } });
    assert.equal(resultText(ok), 'read_file: {"path":"a"}');
    const mark = await d.eventMark(sb.id);
    await assert.rejects(client.callTool({ name: 'delete_repo', arguments: {} }),
      /delete_repo is not available here.*tools option/);
    const ev = await d.waitEvent(sb.id, (e) => e.kind === 'mcp.refused' && e.tool === 'delete_repo',
      { after: mark, what: 'mcp.refused for delete_repo' });
    assert.equal(ev.server, 'multi');
    assert.equal(ev.reason, 'not in the tools option');
  } finally {
    await closeClient(client);
  }
  await d.mcpStop(sb.id, 'multi');
});

test('a listed tool the server does not offer is a warning; bad tools options are 400s', { skip }, async () => {
  const got = await d.mcpReady(sb.id, [{ name: 'warned', command, tools: ['hello', 'no_such_tool'] }]);
  assert.deepEqual(got.servers.warned.tools, ['hello']);
  assert.ok(got.servers.warned.warnings.some((w) => /tools lists no_such_tool, which the server does not offer/.test(w)),
    JSON.stringify(got.servers.warned.warnings));
  await d.mcpStop(sb.id, 'warned');
  for (const tools of [[], ['a', 'a'], [''], 'hello', [1]]) {
    const r = await d.mcpStartRaw(sb.id, [{ name: 'bad', command, tools }]);
    assert.equal(r.status, 400, `${JSON.stringify(tools)}: ${r.text}`);
    assert.match(r.body.error.message, /tools must list/);
  }
});

test('the CLI takes --tools SERVER=a,b', { skip }, async () => {
  const r = await d.cli(['sandbox', 'mcp', sb.id, 'start', `cli=${command.join(' ')}`, '--tools', 'cli=read_file',
    '--wait', '60']);
  assert.equal(r.code, 0, r.stderr);
  const st = await d.mcpStatus(sb.id);
  const cli = st.servers.find((s) => s.name === 'cli');
  assert.deepEqual(cli.tools, ['read_file']);
  const bad = await d.cli(['sandbox', 'mcp', sb.id, 'start', 'x=node /workspace/hello.mjs', '--tools', 'y=a']);
  assert.equal(bad.code, 2, bad.stderr);
  assert.match(bad.stderr, /--tools/);
});
