// What a newcomer meets starting their own MCP servers, as they would check it:
//
//   progress   `runtime sandbox mcp ID start` says what happens while it waits
//              (starting hello..., hello ready) and the sandbox's events have each
//              phase (mcp.starting, mcp.ready with its seconds)
//   logs       `runtime sandbox mcp ID logs SERVER` prints what the server wrote on
//              stderr; the daemon keeps the last 64 KiB of it (the oldest bytes go,
//              and the answer says so); --follow (CLI and API) prints what comes next
//   stdout     a server that prints something other than JSON-RPC on stdout fails at
//              once (not after the 60 s start deadline), and the error and the event
//              show what it printed
//   paste      `claude mcp add` lines only for ready servers; the others get a
//              comment with their status and error
//
// One daemon, one sandbox, servers of our own (no network). Nothing here sleeps for
// synchronisation: waits poll with deadlines.
//
//   node --test tests/mcp/newcomer.test.mjs   (as root; `make` first)
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { FIXTURES, RUNTIME, skipReason, startMcpDaemon, token, waitFor } from './lib.mjs';

const HELLO = '/workspace/hello.mjs';
const RING = 64 * 1024;
const START_OPTS = { timeoutMs: 120000 };

describe('a newcomer\'s own MCP servers', { skip: skipReason() }, () => {
  let d, sb;

  before(async () => {
    d = await startMcpDaemon({ prefix: 'runtime-newcomer-' });
    sb = await d.create({ name: 'newcomer' });
    const cp = await d.cli(['sandbox', 'cp', path.join(FIXTURES, 'hello-server.mjs'), `${sb.id}:${HELLO}`]);
    assert.equal(cp.code, 0, cp.stderr);
  });
  after(async () => {
    await d?.close();
  });

  test('start prints each phase while it waits; the events have them', async () => {
    const mark = await d.eventMark(sb.id);
    const r = await d.cli(['sandbox', 'mcp', sb.id, 'start', `hello=node ${HELLO}`, '--wait', '60'], START_OPTS);
    assert.equal(r.code, 0, `stdout:\n${r.stdout}\nstderr:\n${r.stderr}`);
    const lines = r.stderr.split('\n').filter(Boolean);
    assert.deepEqual(lines, ['starting hello...', 'hello ready'], r.stderr);

    const events = (await d.events(sb.id, mark)).filter((e) => e.server === 'hello');
    assert.deepEqual(events.map((e) => e.kind), ['mcp.starting', 'mcp.ready'], JSON.stringify(events));
    const ready = events[1];
    assert.equal(typeof ready.seconds, 'number', JSON.stringify(ready));
    assert.ok(ready.seconds >= 0 && ready.seconds < 60, JSON.stringify(ready));
    const st = (await d.mcpStatus(sb.id)).servers.find((s) => s.name === 'hello');
    assert.equal(typeof st.statusSeconds, 'number', JSON.stringify(st));
  });

  test('logs: what the server wrote on stderr; the oldest bytes go past 64 KiB', async () => {
    // 2000 numbered lines of 50 bytes (100,000 bytes) on stderr, then the server.
    const script = 'i=10000; while [ $i -lt 12000 ]; do ' +
      'echo "line-$i ......................................" >&2; i=$((i+1)); done; ' +
      `exec node ${HELLO}`;
    await d.mcpReady(sb.id, [{ name: 'chatty', command: ['sh', '-c', script] }]);
    const api = await d.api('GET', `/v1/sandboxes/${sb.id}/mcp/chatty/logs`);
    assert.equal(api.status, 200, api.text);
    assert.match(api.headers.get('content-type'), /^text\/plain/);
    const text = api.text;
    const lines = text.split('\n');
    assert.match(lines[0], /^\[runtime: \d+ earlier bytes were dropped; each server keeps the last 65536\]$/, lines[0]);
    assert.ok(Buffer.byteLength(text) <= RING + lines[0].length + 1, `${Buffer.byteLength(text)} bytes kept`);
    assert.ok(!text.includes('line-10000 '), 'the oldest line was dropped');
    assert.ok(text.includes('line-11999 '), 'the newest line is kept');
    // Whole lines from the first kept one to the last, in order.
    const numbers = lines.slice(1).filter((l) => l.startsWith('line-')).map((l) => Number(l.slice(5, 10)));
    assert.equal(numbers.at(-1), 11999);
    assert.deepEqual(numbers, numbers.map((_, i) => numbers[0] + i), 'the kept lines are in order, none missing');
    assert.ok(numbers.length > 1200 && numbers.length < 1320, `${numbers.length} lines kept`);
    const dropped = Number(/^\[runtime: (\d+)/.exec(lines[0])[1]);
    assert.equal(dropped, (numbers[0] - 10000) * 50, 'the dropped count is the bytes before the first kept line');

    // The CLI prints the same.
    const cli = await d.cli(['sandbox', 'mcp', 'newcomer', 'logs', 'chatty']);
    assert.equal(cli.code, 0, cli.stderr);
    assert.equal(cli.stdout, text);
  });

  test('logs of a server that does not exist: 404, and the CLI says so', async () => {
    const api = await d.api('GET', `/v1/sandboxes/${sb.id}/mcp/nosuch/logs`);
    assert.equal(api.status, 404, api.text);
    assert.match(api.body.error.message, /no MCP server nosuch/);
    const cli = await d.cli(['sandbox', 'mcp', sb.id, 'logs', 'nosuch']);
    assert.equal(cli.code, 1);
    assert.match(cli.stderr, /no MCP server nosuch/);
    const usage = await d.cli(['sandbox', 'mcp', sb.id, 'logs']);
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /missing the SERVER/);
  });

  test('logs --follow prints what the server writes afterwards (API and CLI)', async () => {
    // The server copies /workspace/say to its stderr whenever the file appears.
    const script = '(while :; do if [ -f /workspace/say ]; then cat /workspace/say >&2; ' +
      `rm -f /workspace/say; fi; sleep 0.05; done) & exec node ${HELLO}`;
    await d.mcpReady(sb.id, [{ name: 'echoer', command: ['sh', '-c', script] }]);

    const first = token('said');
    const ctl = new AbortController();
    const res = await fetch(`${d.url}/v1/sandboxes/${sb.id}/mcp/echoer/logs?follow=1`,
      { headers: { Authorization: `Bearer ${d.key}` }, signal: ctl.signal });
    assert.equal(res.status, 200);
    const reader = res.body.getReader();
    let got = '';
    const readUntil = (needle) => waitFor(async () => {
      const { value, done } = await reader.read();
      if (done) throw Object.assign(new Error(`the stream ended: ${got}`), { fatal: true });
      got += Buffer.from(value).toString('utf8');
      return got.includes(needle);
    }, { timeoutMs: 15000, what: `${needle} in the followed log` });
    await d.putFile(sb.id, '/workspace/say', `${first}\n`);
    await readUntil(first);
    ctl.abort();

    // The CLI: runs until interrupted.
    const second = token('said');
    const child = spawn(RUNTIME, ['sandbox', 'mcp', sb.id, 'logs', 'echoer', '--follow'],
      { env: d.env(), stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c) => { out += c; });
    try {
      await waitFor(() => out.includes(first), { what: 'the kept log on the CLI' });
      await d.putFile(sb.id, '/workspace/say', `${second}\n`);
      await waitFor(() => out.includes(second), { timeoutMs: 15000, what: `${second} on the CLI` });
    } finally {
      child.kill('SIGINT');
    }
  });

  test('a server that prints something else on stdout fails at once, showing it', async () => {
    const mark = await d.eventMark(sb.id);
    const started = Date.now();
    const banner = 'Welcome to "tickets" v2\tready\u0001';
    const script = `printf '%s\\n' '${banner}'; exec node ${HELLO}`;
    await d.mcpStart(sb.id, [{ name: 'banner', command: ['sh', '-c', script] }]);
    await d.mcpSettle(sb.id, ['banner'], { timeoutMs: 70000 });
    const seconds = (Date.now() - started) / 1000;
    assert.ok(seconds < 20, `it took ${seconds} s to fail`);
    const shown = 'Welcome to \\"tickets\\" v2\\tready\\x01';
    const st = (await d.mcpStatus(sb.id)).servers.find((s) => s.name === 'banner');
    assert.equal(st.status, 'failed', JSON.stringify(st));
    assert.ok(st.error.includes(`its first line on stdout is not JSON-RPC: "${shown}"`), st.error);
    assert.match(st.error, /logs to stderr/);
    const r = await d.cli(['sandbox', 'mcp', sb.id]);
    assert.ok(r.stdout.includes(shown), r.stdout);
    const failed = (await d.events(sb.id, mark)).find((e) => e.kind === 'mcp.failed' && e.server === 'banner');
    assert.ok(failed, 'an mcp.failed event');
    assert.ok(failed.error.includes(shown), JSON.stringify(failed));
    assert.equal(failed.phase, 'starting', JSON.stringify(failed));
  });

  test('a wrong gateway token: 401, and every OAuth discovery path 404 (JSON), so no client starts OAuth', async () => {
    const st = await d.mcpStatus(sb.id);
    const url = new URL(st.servers.find((s) => s.name === 'hello').url);
    const wrong = await fetch(url, { method: 'POST', headers: { Authorization: `Bearer ${'0'.repeat(64)}`,
      'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }) });
    assert.equal(wrong.status, 401);
    assert.equal(wrong.headers.get('www-authenticate'), 'Bearer');
    const gw = url.pathname; // /mcp/LINK/hello
    const link = gw.split('/').slice(0, 3).join('/');
    const paths = [];
    for (const doc of ['oauth-protected-resource', 'oauth-authorization-server', 'openid-configuration']) {
      paths.push(`/.well-known/${doc}`, `/.well-known/${doc}${gw}`, `${gw}/.well-known/${doc}`,
        `${link}/.well-known/${doc}`, `/mcp/.well-known/${doc}`);
    }
    const origin = 'http://localhost:6274'; // the Inspector's, in direct mode
    for (const p of paths) {
      for (const auth of [undefined, `Bearer ${'0'.repeat(64)}`]) {
        const headers = { Origin: origin, 'MCP-Protocol-Version': '2025-06-18', ...(auth ? { Authorization: auth } : {}) };
        const r = await fetch(`${d.url}${p}`, { headers });
        const text = await r.text();
        assert.equal(r.status, 404, `${p}: ${text}`);
        assert.match(r.headers.get('content-type'), /^application\/json/, p);
        assert.match(JSON.parse(text).error.message, /no OAuth/, p);
        assert.equal(r.headers.get('access-control-allow-origin'), origin, `${p}: a browser client can read the 404`);
      }
      const pre = await fetch(`${d.url}${p}`, { method: 'OPTIONS', headers: { Origin: origin,
        'Access-Control-Request-Method': 'GET', 'Access-Control-Request-Headers': 'mcp-protocol-version' } });
      assert.equal(pre.status, 204, `preflight of ${p}`);
    }
  });

  test('claude mcp add lines only for ready servers; the others say what they are', async () => {
    await d.mcpStart(sb.id, [{ name: 'broken', command: ['sh', '-c', 'echo "no config file" >&2; exit 3'] }]);
    await d.mcpSettle(sb.id, ['broken']);
    const r = await d.cli(['sandbox', 'mcp', sb.id]);
    assert.equal(r.code, 0, r.stderr);
    const claude = r.stdout.split('\n').filter((l) => l.startsWith('claude mcp add'));
    const named = claude.map((l) => l.split(' ')[5]).sort();
    assert.deepEqual(named, ['chatty', 'echoer', 'hello'], r.stdout);
    const comments = r.stdout.split('\n').filter((l) => l.startsWith('# '));
    assert.deepEqual(comments.map((l) => l.split(' ')[1]).sort(), ['banner', 'broken'], r.stdout);
    const broken = comments.find((l) => l.startsWith('# broken '));
    assert.match(broken, /^# broken is failed, so it has no line to paste: it exited with status 3: no config file$/);
  });
});
