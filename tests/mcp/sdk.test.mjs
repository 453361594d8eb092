// The official TypeScript SDK client (tests/mcp/node_modules, pinned) through the
// gateway to real MCP servers from npm: server-everything as the sandbox's own
// server (copied in from tests/mcp, no network), and the catalog servers memory and
// filesystem (installed by the daemon from the registry; skipped with
// RUNTIME_E2E_OFFLINE=1). Tool lists, calls, sampling and elicitation (requests
// from the server to the client), progress, cancellation, many clients at once, and
// the gateway's own 401/404 answers.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import {
  HERE, closeClient, connectClient, fingerprint, httpCall, installEverything, listToolsDirect,
  npmRegistry, registryEnv, resultText, skipReason, startMcpDaemon, token, vectors, waitFor, withLink,
  withServer, randomHex, ACCEPT_BOTH, RawSession,
} from './lib.mjs';
import { stopDaemon } from '../e2e/lib.mjs';

const EVERYTHING_JS = `${HERE}/node_modules/@modelcontextprotocol/server-everything/dist/index.js`;
// Tools server-everything registers only for clients that announce a capability.
const CONDITIONAL = new Set(['get-roots-list', 'trigger-elicitation-request', 'trigger-url-elicitation',
  'trigger-sampling-request', 'trigger-sampling-request-async', 'trigger-elicitation-request-async',
  'simulate-research-query']);

const initBody = (id = 1) => JSON.stringify({
  jsonrpc: '2.0', id, method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
});
/** A raw initialize POST with this Authorization (null: none). */
const postInit = (url, authorization) => httpCall(url, {
  method: 'POST', body: initBody(),
  headers: {
    Accept: ACCEPT_BOTH, 'Content-Type': 'application/json', ...(authorization ? { Authorization: authorization } : {}),
  },
});

/** A tool of the list whose name fits, preferring the exact expected one. */
function pickTool(tools, exact, re) {
  const names = tools.map((t) => t.name);
  return names.includes(exact) ? exact : names.find((n) => re.test(n) && !/async/.test(n));
}

describe('SDK client through the gateway to server-everything', { skip: skipReason() }, () => {
  let d, sb, everything, solo, auth;

  before(async () => {
    d = await startMcpDaemon();
    sb = await d.create({ name: 'mcp-sdk' });
    const cmd = await installEverything(d, sb.id);
    // The same program twice: one process shared by every session, and one process
    // per session (the extra argument only tells their processes apart).
    const got = await d.mcpReady(sb.id, [
      { name: 'everything', command: cmd },
      { name: 'everything-solo', command: [...cmd, 'solo'], isolation: 'session' },
    ], { timeoutMs: 90000 });
    everything = got.servers.everything;
    solo = got.servers['everything-solo'];
    auth = got.status.headers.Authorization;
  });
  after(async () => {
    await stopDaemon(d);
  });

  test('the status gives each server a gateway URL, a fingerprint, its tools and the header', async () => {
    assert.match(auth, /^Bearer \S{16,}$/);
    for (const s of [everything, solo]) {
      const u = new URL(s.url);
      assert.equal(u.origin, d.url, `the URL is on the daemon's public URL: ${s.url}`);
      const m = /^\/mcp\/([^/]+)\/([^/]+)$/.exec(u.pathname);
      assert.ok(m, `URL is {publicUrl}/mcp/{link}/{server}: ${s.url}`);
      assert.equal(decodeURIComponent(m[2]), s.name);
      // At least 128 random bits: 32 hex digits, or 22 base64url characters.
      assert.ok(m[1].length >= 22, `link ${m[1]} is too short to hold 128 random bits`);
      assert.match(s.fingerprint, /^[0-9a-f]{16}$/);
      assert.ok(s.tools.includes('echo'), JSON.stringify(s.tools));
      assert.ok(Array.isArray(s.warnings), `warnings is an array: ${JSON.stringify(s)}`);
    }
    assert.equal(new URL(everything.url).pathname.split('/')[2], new URL(solo.url).pathname.split('/')[2],
      'one link per sandbox');
  });

  test('listTools matches what the server offers, the status and its fingerprint', async () => {
    const c = await connectClient(everything.url, auth);
    const raw = new RawSession(everything.url, auth);
    try {
      const viaSdk = (await c.listTools()).tools;
      const names = viaSdk.map((t) => t.name);
      assert.deepEqual([...names].sort(), [...everything.tools].sort(), 'the status lists the same tools');
      assert.equal(new Set(names).size, names.length, 'no tool twice');
      // Announcing what the SDK client announced: with one process per session the
      // list may depend on it; with a shared one it must not.
      await raw.initialize({ capabilities: { sampling: {}, elicitation: {} } });
      const exact = await raw.listTools(); // as sent, no SDK schema in between
      assert.deepEqual(exact.map((t) => t.name), names);
      // The fingerprint in the status is docs/gateway.md's, over exactly the list clients get.
      assert.equal(fingerprint(exact).short, everything.fingerprint,
        'status fingerprint = sha256(canonical(tools sorted by name)) of the listed tools');

      // What the server itself offers a client that announces nothing: every one of
      // those tools, unchanged (the gateway rewrites nothing), plus at most the tools
      // it adds for clients with capabilities (the gateway's own initialize decides).
      const base = await listToolsDirect(['node', EVERYTHING_JS, 'stdio']);
      assert.equal(fingerprint(base).short, vectors()['server-everything'].fingerprint,
        'the pinned server-everything offers the tools of the test vector');
      for (const t of base) {
        const mine = exact.find((x) => x.name === t.name);
        assert.ok(mine, `tool ${t.name} is missing through the gateway`);
        assert.deepEqual(mine, t, `tool ${t.name} differs through the gateway`);
      }
      const extra = names.filter((n) => !base.some((t) => t.name === n));
      assert.deepEqual(extra.filter((n) => !CONDITIONAL.has(n)), [], 'tools the server never offers');

      // Asked directly with the capabilities those extra tools imply, the server
      // offers exactly the gateway's list (tasks capabilities are not inferred).
      if (!extra.some((n) => /-async$/.test(n))) {
        const caps = {};
        if (names.includes('trigger-sampling-request')) caps.sampling = {};
        if (names.includes('trigger-elicitation-request')) caps.elicitation = {};
        if (names.includes('trigger-url-elicitation')) caps.elicitation = { ...caps.elicitation, form: {}, url: {} };
        if (names.includes('get-roots-list')) caps.roots = {};
        const direct = await listToolsDirect(['node', EVERYTHING_JS, 'stdio'], { capabilities: caps });
        assert.equal(fingerprint(direct).short, everything.fingerprint,
          `the server's own list for a client with ${JSON.stringify(caps)}`);
      }
    } finally {
      await raw.close().catch(() => {});
      await closeClient(c);
    }
  });

  test('callTool: echo and get-sum', async () => {
    const c = await connectClient(everything.url, auth);
    try {
      const msg = token('echo');
      assert.equal(resultText(await c.callTool({ name: 'echo', arguments: { message: msg } })), `Echo: ${msg}`);
      const sum = await c.callTool({ name: 'get-sum', arguments: { a: 19, b: 23 } });
      assert.match(resultText(sum), /\b42\b/);
      // Unicode both ways, and a tool error comes back as a tool error.
      const u = `héllo ✓ 𝄞 ${msg}`;
      assert.equal(resultText(await c.callTool({ name: 'echo', arguments: { message: u } })), `Echo: ${u}`);
      const bad = await c.callTool({ name: 'echo', arguments: {} }).catch((e) => ({ thrown: e }));
      assert.ok(bad.thrown || bad.isError, `a call with missing arguments fails: ${JSON.stringify(bad)}`);
    } finally {
      await closeClient(c);
    }
  });

  test('sampling: the server asks the client for a completion and gets its answer', async () => {
    const answer = token('sampled');
    const asked = [];
    const c = await connectClient(everything.url, auth, {
      sampling: async (req) => {
        asked.push(req.params);
        return { model: 'test-model', role: 'assistant', content: { type: 'text', text: answer } };
      },
    });
    try {
      const tools = (await c.listTools()).tools;
      const name = pickTool(tools, 'trigger-sampling-request', /sampl/i);
      assert.ok(name, 'server-everything offers its sampling tool only to a client that announces sampling: ' +
        `the gateway's initialize must announce it (tools: ${tools.map((t) => t.name).join(', ')})`);
      const prompt = token('prompt');
      const r = await c.callTool({ name, arguments: { prompt, maxTokens: 20 } });
      assert.equal(asked.length, 1, 'exactly one sampling request reached the client');
      assert.ok(JSON.stringify(asked[0].messages).includes(prompt), JSON.stringify(asked[0]));
      assert.ok(resultText(r).includes(answer), `the tool result carries the client's answer: ${resultText(r)}`);
    } finally {
      await closeClient(c);
    }
  });

  test('elicitation: the server asks the client for input and gets it', async () => {
    const name = token('name');
    const asked = [];
    const c = await connectClient(everything.url, auth, {
      elicitation: async (req) => {
        asked.push(req.params);
        return { action: 'accept', content: { name, check: true } };
      },
    });
    try {
      const tools = (await c.listTools()).tools;
      const tool = pickTool(tools, 'trigger-elicitation-request', /elicit/i);
      assert.ok(tool, 'server-everything offers its elicitation tool only to a client that announces ' +
        `elicitation: the gateway's initialize must announce it (tools: ${tools.map((t) => t.name).join(', ')})`);
      const r = await c.callTool({ name: tool, arguments: {} });
      assert.equal(asked.length, 1);
      assert.ok(asked[0].requestedSchema?.properties?.name, JSON.stringify(asked[0]));
      assert.ok(resultText(r).includes(name), `the result carries what the client entered: ${resultText(r)}`);
      assert.match(resultText(r), /accept/);
    } finally {
      await closeClient(c);
    }
  });

  // docs/gateway.md: with one shared process a server's request names no session;
  // while several sessions wait the gateway refuses it rather than guess.
  test('server requests never reach another session (two clients sampling at once)', async () => {
    // With one process for all sessions, a request from the server carries nothing
    // that names the session it is for; the gateway must either route it right or
    // refuse it, never hand session A's prompt to client B.
    const clients = [], seen = [[], []];
    try {
      for (const i of [0, 1]) {
        clients.push(await connectClient(everything.url, auth, {
          name: `sampler-${i}`,
          sampling: async (req) => {
            seen[i].push(JSON.stringify(req.params.messages));
            return { model: 'm', role: 'assistant', content: { type: 'text', text: `answer-of-${i}` } };
          },
        }));
      }
      const tools = (await clients[0].listTools()).tools;
      const name = pickTool(tools, 'trigger-sampling-request', /sampl/i);
      assert.ok(name, 'no sampling tool (see the sampling test)');
      const prompts = [token('prompt-0'), token('prompt-1')];
      const results = await Promise.allSettled(clients.map((c, i) =>
        c.callTool({ name, arguments: { prompt: prompts[i], maxTokens: 5 } })));
      for (const i of [0, 1]) {
        const other = 1 - i;
        assert.ok(!seen[i].some((m) => m.includes(prompts[other])), `client ${i} was sent client ${other}'s prompt`);
        const r = results[i];
        if (r.status === 'fulfilled' && !r.value.isError) {
          assert.ok(resultText(r.value).includes(`answer-of-${i}`), `client ${i} got: ${resultText(r.value)}`);
          assert.ok(!resultText(r.value).includes(`answer-of-${other}`));
        }
      }
    } finally {
      for (const c of clients) await closeClient(c);
    }
  });

  test('isolation "session": each session has its own process, so sampling at once works for both', async () => {
    const clients = [];
    try {
      for (const i of [0, 1]) {
        clients.push(await connectClient(solo.url, auth, {
          name: `solo-${i}`,
          sampling: async () => ({
            model: 'm', role: 'assistant', content: { type: 'text', text: `solo-answer-${i}` },
          }),
        }));
      }
      const procs = await d.exec(sb.id, ['sh', '-c',
        'for f in /proc/[0-9]*/cmdline; do tr "\\0" " " < $f; echo; done']);
      const running = procs.stdout.split('\n').filter((l) => l.includes('server-everything') && /\bsolo\b/.test(l));
      assert.ok(running.length >= 2, `two sessions, two processes:\n${procs.stdout}`);
      const tools = (await clients[0].listTools()).tools;
      const name = pickTool(tools, 'trigger-sampling-request', /sampl/i);
      assert.ok(name, `no sampling tool: ${tools.map((t) => t.name).join(', ')}`);
      const results = await Promise.all(clients.map((c) =>
        c.callTool({ name, arguments: { prompt: token('p'), maxTokens: 5 } })));
      results.forEach((r, i) => assert.ok(resultText(r).includes(`solo-answer-${i}`), resultText(r)));
    } finally {
      for (const c of clients) await closeClient(c);
    }
  });

  test('progress: a long-running tool reports progress to the caller', async () => {
    const c = await connectClient(everything.url, auth);
    try {
      const progress = [];
      const r = await c.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 4 } },
        undefined, { onprogress: (p) => progress.push(p), timeout: 30000 });
      assert.match(resultText(r), /completed/i);
      assert.deepEqual(progress.map((p) => p.progress), [1, 2, 3, 4]);
      assert.ok(progress.every((p) => p.total === 4));
    } finally {
      await closeClient(c);
    }
  });

  test('cancellation: an aborted call ends at once, and the gateway serves on', async () => {
    const c = await connectClient(everything.url, auth);
    const other = await connectClient(everything.url, auth);
    try {
      const ac = new AbortController();
      const progress = [];
      const started = Date.now();
      const durationMs = 3000;
      const args = { duration: durationMs / 1000, steps: 6 };
      const call = c.callTool({ name: 'trigger-long-running-operation', arguments: args }, undefined, {
        signal: ac.signal, timeout: 30000,
        onprogress: (p) => {
          progress.push(p);
          if (p.progress === 1) ac.abort(new Error('cancelled by the test'));
        },
      });
      await assert.rejects(call, 'the aborted call rejects');
      assert.ok(Date.now() - started < durationMs, 'it ends when aborted, not when the operation would have');
      // Until well past the operation's natural end, both clients keep getting answers;
      // had the cancel not reached the server with the server's own request id, its
      // late response would reach the client as a response to an unknown id.
      let n = 0;
      await waitFor(async () => {
        const who = n++ % 2 ? other : c;
        const msg = token('after-cancel');
        try {
          const r = await who.callTool({ name: 'echo', arguments: { message: msg } });
          assert.equal(resultText(r), `Echo: ${msg}`);
        } catch (e) {
          throw Object.assign(e, { fatal: true }); // every call must work, not just a later one
        }
        return Date.now() - started > durationMs + 1000;
      }, { timeoutMs: durationMs + 10000, intervalMs: 100, what: 'calls after the cancel' });
      const stray = c.errors.filter((e) => /unknown message ID/i.test(String(e?.message ?? e)));
      assert.deepEqual(stray.map(String), [], 'no response to the cancelled request reached the client');
    } finally {
      await closeClient(c);
      await closeClient(other);
    }
  });

  test('8 clients at once each get their own answers (request ids mapped per session)', async () => {
    const clients = await Promise.all(Array.from({ length: 8 }, (_, i) =>
      connectClient(everything.url, auth, { name: `client-${i}` })));
    try {
      // Every client numbers its requests from the same start, so the gateway sees
      // the same ids from all of them at once.
      const jobs = [];
      clients.forEach((c, i) => {
        for (let k = 0; k < 3; k++) {
          const msg = `client-${i}-call-${k}-${token('m')}`;
          jobs.push(c.callTool({ name: 'echo', arguments: { message: msg } }).then((r) => [msg, resultText(r)]));
        }
      });
      for (const [msg, got] of await Promise.all(jobs)) assert.equal(got, `Echo: ${msg}`);
    } finally {
      await Promise.all(clients.map(closeClient));
    }
  });

  test('the gateway: no token or a wrong one is 401, a wrong link or server 404', async () => {
    const none = await postInit(everything.url, null);
    assert.equal(none.status, 401, none.text);
    const wrong = await postInit(everything.url, `Bearer ${randomHex(24)}`);
    assert.equal(wrong.status, 401, wrong.text);
    const notBearer = await postInit(everything.url, auth.replace(/^Bearer /, 'Basic '));
    assert.equal(notBearer.status, 401, notBearer.text);
    const badLink = await postInit(withLink(everything.url, randomHex(16)), auth);
    assert.equal(badLink.status, 404, badLink.text);
    const badServer = await postInit(withServer(everything.url, 'no-such-server'), auth);
    assert.equal(badServer.status, 404, badServer.text);
    for (const r of [none, wrong, badLink]) {
      assert.ok(!r.text.includes(auth.replace(/^Bearer /, '')), 'no answer shows the token');
    }
    // The SDK client without the token cannot connect.
    await assert.rejects(connectClient(everything.url, null),
      (e) => e.code === 401 || /401|Unauthorized/i.test(e.message));
    // And with it, it can (the checks above did not break the server).
    const ok = await postInit(everything.url, auth);
    assert.equal(ok.status, 200, ok.text);
  });
});

describe('SDK client through the gateway to catalog servers', { skip: skipReason({ online: true }) }, () => {
  let d, sb, servers, auth, catalog;

  before(async () => {
    d = await startMcpDaemon({ online: true });
    const { host } = npmRegistry();
    // The daemon installs catalog servers with npm inside the sandbox: let it reach
    // the registry (and trust what the host's node trusts, see registryEnv).
    sb = await d.create({ name: 'mcp-catalog', network: { internet: true, allow: [host] }, env: registryEnv() });
    const c = await d.api('GET', '/v1/mcp/catalog');
    assert.equal(c.status, 200, c.text);
    catalog = Object.fromEntries(c.body.data.map((e) => [e.id, e]));
    const got = await d.mcpReady(sb.id, [{ id: 'memory' }, { id: 'filesystem' }], { timeoutMs: 300000 });
    servers = got.servers;
    auth = got.status.headers.Authorization;
  });
  after(async () => {
    await stopDaemon(d);
  });

  test('the catalog describes memory and filesystem; their fingerprints are the approved ones', async () => {
    for (const id of ['memory', 'filesystem']) {
      const e = catalog[id];
      assert.ok(e, `catalog has ${id}`);
      for (const k of ['id', 'name', 'description', 'package', 'version', 'runtime', 'command']) {
        assert.ok(e[k] !== undefined, `catalog entry ${id} has ${k}: ${JSON.stringify(e)}`);
      }
      assert.equal(e.package, `@modelcontextprotocol/server-${id}`);
      const s = servers[id];
      assert.equal(s.id, id);
      assert.match(s.fingerprint, /^[0-9a-f]{16}$/);
      if (e.fingerprint) assert.equal(s.fingerprint, e.fingerprint, `${id} runs the reviewed tool list`);
      const v = vectors()[`server-${id}`];
      if (e.version === '2026.8.31' && id === 'memory') assert.equal(s.fingerprint, v.fingerprint);
    }
    const inside = await d.exec(sb.id, ['test', '-d', '/workspace/mcp/memory']);
    assert.equal(inside.exitCode, 0, 'catalog servers are installed under /workspace/mcp/<id>');
  });

  test('memory: create_entities, then read_graph returns them', async () => {
    const c = await connectClient(servers.memory.url, auth);
    try {
      const names = (await c.listTools()).tools.map((t) => t.name);
      for (const n of ['create_entities', 'read_graph']) assert.ok(names.includes(n), names.join(', '));
      const who = token('entity');
      const entities = [
        { name: who, entityType: 'person', observations: ['writes tests'] },
        { name: `${who}-pet`, entityType: 'cat', observations: ['sleeps'] },
      ];
      const made = await c.callTool({ name: 'create_entities', arguments: { entities } });
      assert.ok(!made.isError, resultText(made));
      const graph = await c.callTool({ name: 'read_graph', arguments: {} });
      assert.ok(!graph.isError, resultText(graph));
      const g = graph.structuredContent ?? JSON.parse(resultText(graph));
      for (const e of entities) {
        const found = g.entities.find((x) => x.name === e.name);
        assert.deepEqual(found, e, `read_graph returns ${e.name}`);
      }
    } finally {
      await closeClient(c);
    }
  });

  test('filesystem: write and read inside its directory; outside paths are refused', async () => {
    const c = await connectClient(servers.filesystem.url, auth);
    try {
      const dirs = resultText(await c.callTool({ name: 'list_allowed_directories', arguments: {} }));
      const base = (/\/workspace[^\s]*/.exec(dirs) || [])[0];
      assert.ok(base, `the filesystem server works in /workspace: ${dirs}`);
      const content = `${token('content')}\nline two ✓\n`;
      const file = `${base.replace(/\/$/, '')}/fs-test-${token('f')}.txt`;
      const w = await c.callTool({ name: 'write_file', arguments: { path: file, content } });
      assert.ok(!w.isError, resultText(w));
      const r = await c.callTool({ name: 'read_text_file', arguments: { path: file } });
      assert.ok(!r.isError, resultText(r));
      assert.equal(resultText(r), content);
      assert.equal((await d.getFile(sb.id, file)).toString('utf8'), content, 'the file is in the sandbox');
      for (const outside of ['/etc/shadow', '/etc/passwd', `${base}/../../etc/passwd`, '../etc/passwd',
        `${base}/../..`]) {
        const res = await c.callTool({ name: 'read_text_file', arguments: { path: outside } })
          .catch((e) => ({ isError: true, content: [{ type: 'text', text: `thrown: ${e.message}` }] }));
        assert.equal(res.isError, true, `reading ${outside} is refused: ${resultText(res)}`);
        assert.match(resultText(res), /denied|outside|not allowed|thrown/i, outside);
        assert.doesNotMatch(resultText(res), /root:[^:]*:0:0:/, `${outside}: content came back`);
      }
    } finally {
      await closeClient(c);
    }
  });
});
