// A stdio server that speaks only 2026-07-28 (fixtures/only-2026-server.mjs: the official
// TypeScript server SDK 2.4.0 with legacy "reject") behind the gateway: it refuses the
// 2025 initialize, so the gateway discovers it and speaks 2026-07-28 on its stdio. Both
// eras of clients reach it: a 2026-07-28 client gets its input_required results as they
// are; a 2025 client (the SDK 1.x client) is asked the same input as ordinary sampling
// and elicitation requests, and the gateway retries the call with the answers. The
// fingerprint gate covers it as any server: a tool added while running stays hidden.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';

import {
  FIXTURES, HERE, closeClient, connectClient, copyTreeTar, dependencyClosure, resultText, skipReason,
  startMcpDaemon, waitFor,
} from './lib.mjs';

const DIR = '/workspace/modern';
const skip = skipReason();

async function modernClient(url, auth, { elicit, sample } = {}) {
  const client = new ClientV2({ name: 'modern-test', version: '1.0.0' }, {
    capabilities: { ...(elicit ? { elicitation: {} } : {}), ...(sample ? { sampling: {} } : {}) },
    versionNegotiation: { mode: { pin: '2026-07-28' } },
  });
  if (elicit) client.setRequestHandler('elicitation/create', elicit);
  if (sample) client.setRequestHandler('sampling/createMessage', sample);
  await client.connect(new TransportV2(new URL(url), { requestInit: { headers: { Authorization: auth } } }));
  return client;
}

describe('a 2026-07-28-only stdio server behind the gateway', { skip }, () => {
  let d, sb, server, auth;
  before(async () => {
    d = await startMcpDaemon({ prefix: 'runtime-mcp-modern-' });
    sb = await d.create({ name: 'modern-stdio' });
    const closure = [...new Set([...dependencyClosure('@modelcontextprotocol/server'), 'node_modules/zod'])];
    await copyTreeTar(d, sb.id, HERE, closure, DIR);
    await d.putFile(sb.id, `${DIR}/server.mjs`, fs.readFileSync(path.join(FIXTURES, 'only-2026-server.mjs')));
    const got = await d.mcpReady(sb.id, [{ name: 'modern', command: ['node', `${DIR}/server.mjs`] }]);
    server = got.servers.modern;
    auth = got.status.headers.Authorization;
  });
  after(async () => {
    if (d) await d.close();
  });

  test('it is ready and fingerprinted like any server', () => {
    assert.equal(server.status, 'ready', server.error);
    assert.deepEqual([...server.tools].sort(), ['count', 'echo', 'greet', 'grow', 'summarize']);
    assert.match(server.fingerprint, /^[0-9a-f]{16}$/);
  });

  test('a 2025 client: initialize, tools, elicitation and sampling asked as requests', async () => {
    const asked = [];
    const c = await connectClient(server.url, auth, {
      elicitation: async (req) => {
        asked.push(req.params);
        return { action: 'accept', content: { name: 'Ada' } };
      },
      sampling: async (req) => {
        asked.push(req.params);
        return { model: 'm', role: 'assistant', content: { type: 'text', text: 'short' } };
      },
    });
    try {
      assert.equal(c.getServerVersion().name, 'modern-only', 'serverInfo comes from server/discover');
      const tools = (await c.listTools()).tools.map((t) => t.name).sort();
      assert.deepEqual(tools, ['count', 'echo', 'greet', 'grow', 'summarize']);
      const echo = await c.callTool({ name: 'echo', arguments: { text: 'hi' } });
      assert.equal(resultText(echo), 'echo: hi');
      assert.equal(echo.resultType, undefined, 'a 2025 client gets no 2026-only fields');
      const greet = await c.callTool({ name: 'greet', arguments: {} });
      assert.equal(resultText(greet), 'Hello, Ada!');
      assert.equal(asked[0].message, 'What is your name?', JSON.stringify(asked[0]));
      const sum = await c.callTool({ name: 'summarize', arguments: { text: 'a long text' } });
      assert.equal(resultText(sum), 'summary: short');
      assert.match(JSON.stringify(asked[1].messages), /Summarize: a long text/);
      assert.equal(asked.length, 2);
      const progress = [];
      const counted = await c.callTool({ name: 'count', arguments: { n: 3 } }, undefined,
        { onprogress: (p) => progress.push(p.progress) });
      assert.equal(resultText(counted), 'counted 3');
      assert.deepEqual(progress, [1, 2, 3]);
    } finally {
      await closeClient(c);
    }
  });

  test('a 2025 client that does not offer elicitation gets a clear error, not a hang', async () => {
    // The envelope tells the process what the session declared (nothing), so the
    // server itself refuses to ask (-32021) rather than ask a client that cannot answer.
    const c = await connectClient(server.url, auth, { capabilities: {} });
    try {
      await assert.rejects(c.callTool({ name: 'greet', arguments: {} }), /-32021.*capabilit/);
      assert.equal(resultText(await c.callTool({ name: 'echo', arguments: { text: 'still' } })), 'echo: still');
    } finally {
      await closeClient(c);
    }
  });

  test('a 2026-07-28 client: input_required rounds pass through, answered by its handlers', async () => {
    const asked = [];
    const c = await modernClient(server.url, auth, {
      elicit: async (req) => {
        asked.push(req.params);
        return { action: 'accept', content: { name: 'Grace' } };
      },
      sample: async () => ({ model: 'm', role: 'assistant', content: { type: 'text', text: 'brief' } }),
    });
    try {
      assert.equal(c.getProtocolEra(), 'modern');
      assert.equal(resultText(await c.callTool({ name: 'echo', arguments: { text: 'x' } })), 'echo: x');
      assert.equal(resultText(await c.callTool({ name: 'greet', arguments: {} })), 'Hello, Grace!');
      assert.equal(asked.length, 1);
      assert.equal(resultText(await c.callTool({ name: 'summarize', arguments: { text: 't' } })), 'summary: brief');
    } finally {
      await c.close();
    }
  });

  test('a tool added while running stays hidden from both eras and cannot be called', async () => {
    const legacy = await connectClient(server.url, auth);
    const modern = await modernClient(server.url, auth);
    try {
      const before = await d.eventMark(sb.id);
      assert.equal(resultText(await legacy.callTool({ name: 'grow', arguments: {} })), 'grown');
      // The process announced the change on the gateway's listen on its stdio; the
      // gateway relisted and reported the unapproved tool.
      const ev = await d.waitEvent(sb.id, (e) => e.kind === 'mcp.refused' && e.server === 'modern',
        { after: before, what: 'mcp.refused after the server grew a tool' });
      assert.deepEqual(ev.hidden, ['extra']);
      for (const c of [legacy, modern]) {
        const names = (await c.listTools()).tools.map((t) => t.name);
        assert.ok(!names.includes('extra'), `the unapproved tool is not listed: ${names}`);
        await assert.rejects(c.callTool({ name: 'extra', arguments: {} }), /not available/);
      }
    } finally {
      await closeClient(legacy);
      await modern.close();
    }
  });
});
