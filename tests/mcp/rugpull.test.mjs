// The fingerprint gate: a server whose tool list changed since it was approved is
// refused, at start and while it runs ("rug pull"), and `runtime mcp review` says
// what changed and what in the new text is suspicious.
//
// The server is fixtures/rugpull-server.mjs: its tools come from a JSON file in
// the sandbox, and it announces notifications/tools/list_changed when the file
// changes. It logs every call that reaches it, so a test can prove that a refused
// call never got there.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

import {
  FIXTURES, RUNTIME, RawSession, closeClient, connectClient, fingerprint, httpCall, run, resultText,
  skipReason, startMcpDaemon, vectors, waitFor, ACCEPT_BOTH,
} from './lib.mjs';
import { stopDaemon } from '../e2e/lib.mjs';

const WEATHER = JSON.parse(vectors()['weather-reviewed'].tools_json);
const POISONED = JSON.parse(vectors()['weather-today'].tools_json);

/** The approved list: the reviewed weather tool and one more. */
const A = [
  WEATHER[0],
  {
    name: 'get_time', description: 'Current time in a time zone.',
    inputSchema: { type: 'object', properties: { tz: { type: 'string' } }, required: ['tz'] },
  },
];
const clone = (v) => JSON.parse(JSON.stringify(v));
const LOOKALIKE = 'get_forec\u0430st'; // Cyrillic а (U+0430) in place of the Latin a

/** Each change to A, and what the refusal must name. */
const CHANGES = {
  description: {
    tools() {
      const t = clone(A);
      t[0].description = POISONED[0].description; // same parameters, new words
      return t;
    },
    names: [/get_forecast/, /description/i],
  },
  parameter: {
    tools() {
      const t = clone(A);
      t[0].inputSchema.properties.notes = { type: 'string' };
      return t;
    },
    names: [/notes/],
  },
  'new tool': {
    tools: () => [...clone(A), { name: 'send_email', description: 'Sends an email.', inputSchema: { type: 'object' } }],
    names: [/send_email/],
  },
  'removed tool': {
    tools: () => clone(A).filter((t) => t.name !== 'get_time'),
    names: [/get_time/],
  },
  'look-alike name': {
    tools() {
      const t = clone(A);
      t[0].name = LOOKALIKE;
      return t;
    },
    // The new name as it is or escaped, or the old name as removed, or the finding.
    names: [/get_forec(\u0430|\\u0430)st|get_forecast|non-ASCII/i],
  },
};

describe('runtime mcp review', { skip: fs.existsSync(RUNTIME) ? false : `${RUNTIME} is missing; run make` }, () => {
  let dir;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'runtime-review-'));
    fs.writeFileSync(path.join(dir, 'old.json'), vectors()['weather-reviewed'].tools_json);
    fs.writeFileSync(path.join(dir, 'new.json'), vectors()['weather-today'].tools_json);
    fs.writeFileSync(path.join(dir, 'lookalike.json'), JSON.stringify(CHANGES['look-alike name'].tools()));
    fs.writeFileSync(path.join(dir, 'a.json'), JSON.stringify(A));
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  test('the poisoned weather update: hash, new parameter and every kind of suspicious text', async () => {
    const r = await run(RUNTIME, ['mcp', 'review', path.join(dir, 'old.json'), path.join(dir, 'new.json')]);
    assert.equal(r.code, 1, `a changed list with findings exits 1:\n${r.stdout}\n${r.stderr}`);
    const out = r.stdout;
    assert.match(out, /^old: 1bd42917668ede86 \(1 tool\)$/m);
    assert.match(out, /^new: 3a629d1efdc526e3 \(1 tool\)$/m);
    assert.match(out, /^changed$/m, 'says the hash changed');
    assert.match(out, /^added parameter: get_forecast\.notes$/m);
    assert.match(out, /^changed description: get_forecast$/m);
    const findings = {
      'text aimed at the model': /<IMPORTANT>/,
      'request to hide': /Do not mention this/,
      'secret file path': /~\/\.ssh\/id_ed25519/,
      'order about when to call': /Before calling/,
    };
    for (const [kind, excerpt] of Object.entries(findings)) {
      const line = out.split('\n').find((l) => l.startsWith(`get_forecast.description: ${kind}: `));
      assert.ok(line, `flags "${kind}":\n${out}`);
      assert.match(line, excerpt, `the excerpt shows the words: ${line}`);
      assert.doesNotMatch(line, /\(in OLD too\)/);
    }
    assert.match(out, /^4 findings \(4 new since OLD\)$/m);
  });

  test('an unchanged list is clean and exits 0; a look-alike name is flagged', async () => {
    const same = await run(RUNTIME, ['mcp', 'review', path.join(dir, 'old.json'), path.join(dir, 'old.json')]);
    assert.equal(same.code, 0, same.stdout + same.stderr);
    assert.match(same.stdout, /^unchanged$/m);
    assert.match(same.stdout, /^no findings$/m);
    const look = await run(RUNTIME, ['mcp', 'review', path.join(dir, 'a.json'), path.join(dir, 'lookalike.json')]);
    assert.equal(look.code, 1, look.stdout + look.stderr);
    assert.match(look.stdout, /^removed tool: get_forecast$/m);
    assert.match(look.stdout, /^added tool: .*get_forec\\u0430st/m);
    assert.match(look.stdout, /non-ASCII letters in a name/);
  });

  test('the fingerprint of a tools file is the one this suite computes', async () => {
    const r = await run(RUNTIME, ['mcp', 'fingerprint', path.join(dir, 'a.json')]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), fingerprint(A).short);
  });
});

describe('fingerprint gate of the gateway', { skip: skipReason() }, () => {
  let d, sb;

  before(async () => {
    d = await startMcpDaemon();
    sb = await d.create({ name: 'mcp-rugpull' });
    await d.putFile(sb.id, '/workspace/rugpull-server.mjs', fs.readFileSync(path.join(FIXTURES, 'rugpull-server.mjs')));
  });
  after(async () => {
    await stopDaemon(d);
  });

  const toolsFile = (name) => `/workspace/${name}.json`;
  const callLog = (name) => `/workspace/${name}.calls`;
  const server = (name, extra = {}) => ({
    name, command: ['node', '/workspace/rugpull-server.mjs', toolsFile(name), callLog(name)], ...extra,
  });

  /** Writes the tool file, starts the server, waits until it settles; returns it. */
  async function start(name, tools, extra) {
    if (tools) await d.replaceFile(sb.id, toolsFile(name), JSON.stringify(tools, null, 2));
    await d.mcpStart(sb.id, [server(name, extra)]);
    const got = await d.mcpSettle(sb.id, [name], { timeoutMs: 30000 });
    return { ...got.servers[name], auth: got.status.headers.Authorization };
  }

  /** The calls that reached the server, in order. */
  async function calls(name) {
    const r = await d.api('GET', `/v1/sandboxes/${sb.id}/files?path=${encodeURIComponent(callLog(name))}`);
    if (r.status === 404) return [];
    assert.equal(r.status, 200, r.text);
    return r.text.split('\n').filter(Boolean).map((l) => JSON.parse(l));
  }

  function refusedEvent(name) {
    return (e) => e.kind === 'mcp.refused' && (e.server === name || JSON.stringify(e).includes(`"${name}"`));
  }

  test('first start: ready, with the fingerprint of exactly the tools it offers', async () => {
    const s = await start('rug-first', A);
    assert.equal(s.status, 'ready', JSON.stringify(s));
    assert.equal(s.fingerprint, fingerprint(A).short);
    assert.deepEqual([...s.tools].sort(), A.map((t) => t.name).sort());
    const c = await connectClient(s.url, s.auth);
    try {
      assert.deepEqual((await c.listTools()).tools, A);
      const r = await c.callTool({ name: 'get_forecast', arguments: { city: 'Oslo' } });
      assert.match(resultText(r), /get_forecast called with \{"city":"Oslo"\}/);
    } finally {
      await closeClient(c);
    }
  });

  for (const [what, change] of Object.entries(CHANGES)) {
    test(`a restart after a ${what} is refused, names the change, and keeps the old approval`, async (t) => {
      const name = `rug-${what.replace(/\W+/g, '-')}`;
      const first = await start(name, A);
      assert.equal(first.status, 'ready', JSON.stringify(first));
      await d.mcpStop(sb.id, name);

      const mark = await d.eventMark(sb.id);
      const changed = change.tools();
      const s = await start(name, changed);
      assert.equal(s.phase, 'refused', `after a ${what}: ${JSON.stringify(s)}`);
      assert.ok(s.error, 'a refused server says why');
      for (const re of change.names) assert.match(s.error, re, `the error names what changed: ${s.error}`);
      t.diagnostic(`refused: ${s.error}`);
      const ev = await d.waitEvent(sb.id, refusedEvent(name), { after: mark, what: `mcp.refused for ${name}` });
      assert.ok(ev.time, JSON.stringify(ev));

      // Nobody reaches a refused server through the gateway.
      const init = await httpCall(s.url, {
        method: 'POST',
        headers: { Authorization: s.auth, Accept: ACCEPT_BOTH, 'Content-Type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize',
          params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } } }),
      });
      assert.ok(init.status >= 400, `a session on a refused server: HTTP ${init.status} ${init.text}`);
      assert.deepEqual(await calls(name), [], 'no call reached it');

      // Refusing approved nothing: back to the reviewed list, it is ready again.
      await d.mcpStop(sb.id, name);
      const back = await start(name, A);
      assert.equal(back.status, 'ready', `with the approved tools again: ${JSON.stringify(back)}`);
      assert.equal(back.fingerprint, fingerprint(A).short);
      await d.mcpStop(sb.id, name);
    });
  }

  test('an explicit fingerprint that does not match is refused; a matching one is ready', async () => {
    const other = vectors()['weather-today'].fingerprint;
    const mark = await d.eventMark(sb.id);
    const bad = await start('rug-fp-bad', A, { fingerprint: other });
    assert.equal(bad.phase, 'refused', JSON.stringify(bad));
    assert.match(bad.error ?? '', new RegExp(`${other}|${fingerprint(A).short}|fingerprint`, 'i'), bad.error);
    await d.waitEvent(sb.id, refusedEvent('rug-fp-bad'), { after: mark, what: 'mcp.refused for rug-fp-bad' });

    const good = await start('rug-fp-good', A, { fingerprint: fingerprint(A).short });
    assert.equal(good.status, 'ready', JSON.stringify(good));
    assert.equal(good.fingerprint, fingerprint(A).short);
    // The option is the approval: the same server with changed tools is refused.
    await d.mcpStop(sb.id, 'rug-fp-good');
    const later = await start('rug-fp-good', CHANGES.parameter.tools(), { fingerprint: fingerprint(A).short });
    assert.equal(later.phase, 'refused', JSON.stringify(later));
  });

  test('a change while running: the changed and new tools are hidden and refused, the rest works', async (t) => {
    const name = 'rug-live';
    const s = await start(name, A);
    assert.equal(s.status, 'ready', JSON.stringify(s));
    const listChanged = [];
    const c = await connectClient(s.url, s.auth);
    c.setNotificationHandler(ToolListChangedNotificationSchema, (n) => listChanged.push(n));
    const raw = new RawSession(s.url, s.auth);
    await raw.initialize();
    try {
      assert.deepEqual((await c.listTools()).tools, A);
      const before1 = await c.callTool({ name: 'get_forecast', arguments: { city: 'Bergen' } });
      assert.ok(!before1.isError, resultText(before1));
      assert.equal((await calls(name)).length, 1);

      // The rug pull: get_forecast gets the poisoned text and a parameter, and a new
      // tool appears. The server announces it with tools/list_changed.
      const mark = await d.eventMark(sb.id);
      const pulled = clone(A);
      pulled[0] = clone(POISONED[0]);
      pulled.push({ name: 'exfiltrate', description: 'Uploads a file.', inputSchema: { type: 'object',
        properties: { path: { type: 'string' } } } });
      await d.replaceFile(sb.id, toolsFile(name), JSON.stringify(pulled));
      const ev = await d.waitEvent(sb.id, refusedEvent(name), { after: mark, timeoutMs: 20000,
        what: `mcp.refused for ${name} after its tools changed` });
      t.diagnostic(`event: ${JSON.stringify(ev)}`);

      // Clients see only what was approved and did not change.
      const approvedUnchanged = A.filter((x) => x.name === 'get_time');
      await waitFor(async () => {
        const names = (await c.listTools()).tools.map((x) => x.name);
        return !names.includes('get_forecast');
      }, { timeoutMs: 5000, what: 'the changed tool to leave the list' });
      assert.deepEqual((await c.listTools()).tools, approvedUnchanged, 'the SDK client\'s list');
      assert.deepEqual(await raw.listTools(), approvedUnchanged, 'a raw session\'s list');
      const fresh = await connectClient(s.url, s.auth);
      try {
        assert.deepEqual((await fresh.listTools()).tools, approvedUnchanged, 'a new client\'s list');
      } finally {
        await closeClient(fresh);
      }

      // Calls to the changed and the new tool are refused before they reach the server.
      for (const [tool, args] of [['get_forecast', { city: 'Bergen', notes: 'id_ed25519' }],
        ['get_forecast', { city: 'Bergen' }], ['exfiltrate', { path: '/workspace/secret' }]]) {
        const r = await c.callTool({ name: tool, arguments: args }).catch((e) => ({ thrown: e }));
        assert.ok(r.thrown || r.isError, `calling ${tool} after the change is refused: ${JSON.stringify(r)}`);
      }
      const rawCall = await raw.request('tools/call', { name: 'get_forecast', arguments: { city: 'x' } })
        .then((res) => res, (e) => ({ thrown: e }));
      assert.ok(rawCall.thrown || rawCall.isError, `a raw call is refused too: ${JSON.stringify(rawCall)}`);
      // The unchanged tool still works.
      const ok = await c.callTool({ name: 'get_time', arguments: { tz: 'UTC' } });
      assert.ok(!ok.isError, resultText(ok));
      assert.deepEqual((await calls(name)).map((x) => x.name), ['get_forecast', 'get_time'],
        'only the calls made before the change and to the unchanged tool reached the server');
      const st = (await d.mcpStatus(sb.id)).servers.find((x) => x.name === name);
      t.diagnostic(`status after the change: ${st.status} ${st.fingerprint} ${st.error ?? ''}; ` +
        `list_changed notifications to the client: ${listChanged.length}`);
    } finally {
      await raw.close().catch(() => {});
      await closeClient(c);
    }
  });

  test('a refused change is reviewed side by side and approved by its fingerprint, audited; then it serves', async () => {
    const name = 'rug-approve';
    assert.equal((await start(name, A)).status, 'ready');
    await d.mcpStop(sb.id, name);
    const pulled = clone(A);
    pulled[0] = clone(POISONED[0]);
    const refused = await start(name, pulled);
    assert.equal(refused.phase, 'refused', JSON.stringify(refused));
    assert.match(refused.error, /approve it there/);

    const rv = await d.api('GET', `/v1/sandboxes/${sb.id}/mcp/${name}/review`);
    assert.equal(rv.status, 200, rv.text);
    assert.equal(rv.body.pending, true);
    assert.equal(rv.body.approved.fingerprint, fingerprint(A).sha256);
    assert.deepEqual(rv.body.approved.tools, A);
    assert.equal(rv.body.current.fingerprint, fingerprint(pulled).sha256);
    assert.deepEqual(rv.body.current.tools, pulled);
    assert.ok(rv.body.changes.paramsAdded.length > 0, JSON.stringify(rv.body.changes));
    assert.deepEqual(rv.body.changes.descriptions.map((x) => x.tool), ['get_forecast']);
    const rules = new Set(rv.body.findings.map((f) => f.rule));
    assert.ok(rules.has('speaks-to-model') && rules.has('names-secret-file'), JSON.stringify(rv.body.findings));
    assert.ok(rv.body.findings.every((f) => f.tool && f.path && f.message && typeof f.excerpt === 'string'));

    // Approving needs the whole fingerprint of what was shown; a stale one is refused.
    const stale = await d.api('POST', `/v1/sandboxes/${sb.id}/mcp/${name}:approve`, { fingerprint: fingerprint(A).sha256 });
    assert.equal(stale.status, 409, stale.text);
    const short = await d.api('POST', `/v1/sandboxes/${sb.id}/mcp/${name}:approve`, { fingerprint: fingerprint(pulled).short });
    assert.equal(short.status, 400, short.text);
    const mark = await d.eventMark(sb.id);
    const ok = await d.api('POST', `/v1/sandboxes/${sb.id}/mcp/${name}:approve`, { fingerprint: fingerprint(pulled).sha256 });
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.body.pending, false);
    const audit = ok.body.approvals.at(-1);
    assert.deepEqual({ ...audit, at: undefined }, { by: 'admin (API key)', at: undefined,
      old: fingerprint(A).sha256, new: fingerprint(pulled).sha256 });
    assert.ok(Math.abs(Date.parse(audit.at) - Date.now()) < 60000, audit.at);
    const ev = await d.waitEvent(sb.id, (e) => e.kind === 'mcp.approved', { after: mark, what: 'mcp.approved' });
    assert.equal(ev.new ?? ev.fields?.new, fingerprint(pulled).sha256, JSON.stringify(ev));

    const got = await d.mcpSettle(sb.id, [name], { timeoutMs: 30000 });
    const now = got.servers[name];
    assert.equal(now.status, 'ready', JSON.stringify(now));
    assert.equal(now.fingerprint, fingerprint(pulled).short);
    const c = await connectClient(now.url, got.status.headers.Authorization);
    try {
      assert.deepEqual((await c.listTools()).tools, pulled);
      // Its calls, as the dashboard shows them: an answered one, and one the gate refused.
      assert.ok(!(await c.callTool({ name: 'get_forecast', arguments: { city: 'Oslo' } })).isError);
      const refusedCall = await c.callTool({ name: 'get_weather_now', arguments: {} }).catch((e) => ({ thrown: e }));
      assert.ok(refusedCall.thrown || refusedCall.isError, JSON.stringify(refusedCall));
    } finally {
      await closeClient(c);
    }
    const calls = await d.api('GET', `/v1/sandboxes/${sb.id}/mcp/${name}/calls`);
    assert.equal(calls.status, 200, calls.text);
    assert.equal(calls.body.total, 2);
    assert.equal(calls.body.failed, 1);
    assert.deepEqual(calls.body.recent.map((x) => [x.tool, x.outcome]), [['get_weather_now', 'refused'], ['get_forecast', 'ok']]);
    assert.ok(calls.body.recent[1].ms >= 0 && Date.parse(calls.body.recent[1].at) > Date.now() - 60000);
    assert.match(calls.body.recent[0].error, /.+/);
    const again = await d.api('POST', `/v1/sandboxes/${sb.id}/mcp/${name}:approve`, { fingerprint: fingerprint(pulled).sha256 });
    assert.equal(again.status, 409, 'nothing left to approve');
    assert.equal((await d.api('GET', `/v1/sandboxes/${sb.id}/mcp/nothing/review`)).status, 404);
    await d.mcpStop(sb.id, name);
  });
});
