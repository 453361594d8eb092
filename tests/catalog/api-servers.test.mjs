// The catalog's API servers each do one real task through the gateway, with the
// official MCP SDK client, against fakes of their real API hosts:
//
//   github        search_repositories  GET  api.github.com/search/repositories
//   notion        API-post-search      POST api.notion.com/v1/search
//   context7      resolve-library-id   GET  context7.com/api/v2/libs/search
//   brave-search  brave_web_search     GET  api.search.brave.com/res/v1/web/search
//   exa           web_search_exa       POST api.exa.ai/search
//   firecrawl     firecrawl_scrape     POST api.firecrawl.dev/v2/scrape
//   supabase      list_projects        GET  api.supabase.com/v1/projects
//
// Each server's key is a runtime secret for its catalog host only, given to the
// server as `secrets: {ENV: SECRET}`; the sandbox has no Internet (the daemon opens
// the catalog hosts of the servers it runs). The fakes (fake-apis.mjs, in a network
// namespace made here; see lib.mjs) sit at the real host names through --resolve,
// with certificates from a test CA given by --upstream-ca. They answer only the real
// key, in the header the real API reads, with a response shaped like the real API's
// holding a marker; so a tool result that shows the marker proves the server parsed
// a real-looking answer that the real key bought. Then: secret.used for each, no
// secret.misdirected, and nothing in the sandbox (exec env, the servers' own
// environments, files under /workspace and /tmp) ever held a key, only placeholders.
//
// All seven servers run in ONE sandbox, installed by the daemon from the npm
// registry (the Internet, hence the daemon in the host's network namespace, as in
// tests/mcp/catalog.test.mjs). RUNTIME_E2E_OFFLINE=1 skips the file; so does not
// being root.
//
// Nothing here sleeps for synchronisation: waits poll with deadlines.

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { ROOT, isRoot, waitFor } from '../e2e/lib.mjs';
// tests/mcp/lib.mjs imports the SDK from tests/mcp/node_modules (pinned there).
import { closeClient, connectClient, resultText } from '../mcp/lib.mjs';
import { allEvents, header, lastSeq, showSecretEvents } from '../secrets/lib.mjs';
import { FakeApis, mcpSettled, showServer, startApiDaemon } from './lib.mjs';

const CATALOG = JSON.parse(fs.readFileSync(path.join(ROOT, 'catalog', 'servers.json'), 'utf8'));
const PLACEHOLDER = /^RUNTIME_PH_[0-9a-f]{32}$/;

const needs = (!isRoot() && 'must run as root (runtimed needs it)') ||
  (process.env.RUNTIME_E2E_OFFLINE && 'RUNTIME_E2E_OFFLINE is set (the installs need the npm registry)');

const hex = (n) => crypto.randomBytes(n).toString('hex');
const alnum = (n) => crypto.randomBytes(n * 2).toString('base64').replace(/[^A-Za-z0-9]/g, '').slice(0, n);
const q = (req, name) => new URL(req.target, 'https://x').searchParams.get(name);
const jsonBody = (req) => JSON.parse(req.body);

/**
 * One task per server: the tool and its arguments; what the fake must have seen
 * (method, path, and the header that carries the key, as the server's code sends
 * it); `check` adds what else the real API requires of that request.
 */
const SERVERS = [
  {
    id: 'github', env: 'GITHUB_PERSONAL_ACCESS_TOKEN', value: `ghp_${alnum(36)}`,
    tool: 'search_repositories', args: { query: 'sandbox language:c' },
    method: 'GET', path: '/search/repositories', keyHeader: 'Authorization', keyValue: (v) => `Bearer ${v}`,
    check(req) {
      assert.equal(q(req, 'q'), 'sandbox language:c');
      assert.match(header(req, 'Accept') ?? '', /application\/vnd\.github/);
      assert.ok(header(req, 'User-Agent'), 'GitHub refuses requests without a User-Agent');
    },
  },
  {
    id: 'notion', env: 'NOTION_TOKEN', value: `ntn_${alnum(46)}`,
    tool: 'API-post-search', args: { query: 'Runtime test' },
    method: 'POST', path: '/v1/search', keyHeader: 'Authorization', keyValue: (v) => `Bearer ${v}`,
    check(req) {
      // The version comes from the server's OpenAPI spec (2025-09-03 in 2.5.2).
      assert.match(header(req, 'Notion-Version') ?? '', /^\d{4}-\d{2}-\d{2}$/);
      assert.match(header(req, 'Content-Type') ?? '', /^application\/json/);
      assert.equal(jsonBody(req).query, 'Runtime test');
    },
  },
  {
    id: 'context7', env: 'CONTEXT7_API_KEY', value: `ctx7sk-${crypto.randomUUID()}`,
    tool: 'resolve-library-id', args: { query: 'How do I run an MCP server in a sandbox?', libraryName: 'runtime' },
    method: 'GET', path: '/api/v2/libs/search', keyHeader: 'Authorization', keyValue: (v) => `Bearer ${v}`,
    check(req) {
      assert.equal(q(req, 'libraryName'), 'runtime');
      assert.equal(q(req, 'query'), 'How do I run an MCP server in a sandbox?');
      assert.equal(header(req, 'X-Context7-Source'), 'mcp-server');
    },
  },
  {
    id: 'brave-search', env: 'BRAVE_API_KEY', value: `BSA${alnum(28)}`,
    tool: 'brave_web_search', args: { query: 'runtime mcp sandbox' },
    method: 'GET', path: '/res/v1/web/search', keyHeader: 'X-Subscription-Token', keyValue: (v) => v,
    check(req) {
      assert.equal(q(req, 'q'), 'runtime mcp sandbox');
      assert.match(header(req, 'Accept') ?? '', /application\/json/);
    },
  },
  {
    id: 'exa', env: 'EXA_API_KEY', value: crypto.randomUUID(),
    tool: 'web_search_exa', args: { query: 'blog post about running MCP servers in sandboxes', numResults: 3 },
    method: 'POST', path: '/search', keyHeader: 'x-api-key', keyValue: (v) => v,
    check(req) {
      const b = jsonBody(req);
      assert.equal(b.query, 'blog post about running MCP servers in sandboxes');
      assert.equal(b.numResults, 3);
      assert.match(header(req, 'Content-Type') ?? '', /^application\/json/);
    },
  },
  {
    id: 'firecrawl', env: 'FIRECRAWL_API_KEY', value: `fc-${hex(16)}`,
    tool: 'firecrawl_scrape', args: { url: 'https://docs.example.com/runtime', formats: ['markdown'] },
    method: 'POST', path: '/v2/scrape', keyHeader: 'Authorization', keyValue: (v) => `Bearer ${v}`,
    check(req) {
      const b = jsonBody(req);
      assert.equal(b.url, 'https://docs.example.com/runtime');
      assert.deepEqual(b.formats, ['markdown']);
    },
  },
  {
    id: 'supabase', env: 'SUPABASE_ACCESS_TOKEN', value: `sbp_${hex(20)}`,
    tool: 'list_projects', args: {},
    method: 'GET', path: '/v1/projects', keyHeader: 'Authorization', keyValue: (v) => `Bearer ${v}`,
    check() {},
  },
];
for (const s of SERVERS) {
  const e = CATALOG.find((x) => x.id === s.id);
  s.host = e.egress[0]; // each of these servers calls exactly one fixed API host
  s.secret = `CATA_${s.id.toUpperCase().replace(/-/g, '_')}`;
  s.marker = `rtmark${hex(8)}`; // letters and digits only: safe in any field of any answer
}
const HOSTS = SERVERS.map((s) => s.host);

describe('catalog API servers: one real task each through the gateway', { skip: needs }, () => {
  let dir, fake, d, sb, st;
  const ready = {}; // id -> server as GET .../mcp shows it, once ready

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'runtime-catalog-api-'));
    fs.chmodSync(dir, 0o711); // the unprivileged server must reach --upstream-ca and STATE
    fake = await new FakeApis(dir, Object.fromEntries(SERVERS.map((s) =>
      [s.host, { apiKey: s.value, marker: s.marker }]))).setup();
    d = await startApiDaemon(dir, fake);
    for (const s of SERVERS) await d.putSecret(s.secret, { value: s.value, hosts: [s.host] });
    // No Internet: the daemon opens the registry for the installs, then each
    // catalog server's own hosts, and nothing else.
    sb = await d.create({ memoryMiB: 4096, cpus: 2, diskMiB: 4096, network: { internet: false, allow: [] } });
  });
  after(async () => {
    try {
      await d?.close({ keepDir: true });
    } finally {
      fake?.teardown();
      if (dir && !process.env.RUNTIME_E2E_KEEP) fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('all seven install in one sandbox and are ready with the catalog\'s fingerprints',
    { timeout: 15 * 60 * 1000 }, async (t) => {
      const started = Date.now();
      const post = await d.api('POST', `/v1/sandboxes/${sb.id}/mcp`,
        { servers: SERVERS.map((s) => ({ id: s.id, secrets: { [s.env]: s.secret } })) });
      assert.equal(post.status, 202, post.text);
      st = await mcpSettled(d, sb.id, 12 * 60 * 1000);
      t.diagnostic(`settled after ${Math.round((Date.now() - started) / 1000)} s`);
      const problems = [];
      for (const s of SERVERS) {
        const e = CATALOG.find((x) => x.id === s.id);
        const got = st.servers.find((x) => x.id === s.id || x.name === s.id);
        if (got?.status !== 'ready') {
          problems.push(showServer(got) ?? `${s.id}: not listed`);
          continue;
        }
        if (got.fingerprint !== e.fingerprint) problems.push(`${s.id}: fingerprint ${got.fingerprint}, catalog ${e.fingerprint}`);
        if (!got.tools.includes(s.tool)) problems.push(`${s.id}: no tool ${s.tool} in ${JSON.stringify(got.tools)}`);
        ready[s.id] = got;
      }
      assert.deepEqual(problems, [], problems.join('\n'));
      assert.match(st.headers?.Authorization ?? '', /^Bearer \S+$/);
    });

  for (const s of SERVERS) {
    test(`${s.id}: ${s.tool} through the gateway; ${s.host} gets the real key in ${s.keyHeader}`,
      { timeout: 120 * 1000 }, async (t) => {
        const server = ready[s.id];
        assert.ok(server, `${s.id} is not ready (see the first test)`);
        const mark = fake.upstream.events.length;
        const seq = await lastSeq(d, sb.id);
        const client = await connectClient(server.url, st.headers.Authorization,
          { name: 'runtime-catalog-api-test', capabilities: {} });
        let result, callError;
        try {
          const listed = await client.listTools();
          assert.ok(listed.tools.some((x) => x.name === s.tool), `${s.tool} is listed`);
          try {
            result = await client.callTool({ name: s.tool, arguments: s.args }, undefined, { timeout: 90000 });
          } catch (e) {
            callError = e; // thrown after the checks of what the fake saw, which say more
          }
        } finally {
          await closeClient(client);
        }
        const text = resultText(result);
        t.diagnostic(`${s.tool}: ${callError ? `threw ${callError.message}` : text.replace(/\s+/g, ' ').slice(0, 240)}`);

        // What reached the fake: the request the real API expects, with the real key.
        const reqs = fake.requests(mark).filter((r) => r.sni === s.host);
        const req = reqs.find((r) => r.method === s.method && r.target.split('?')[0] === s.path);
        assert.ok(req, `no ${s.method} ${s.path} at ${s.host}; it got: ` +
          JSON.stringify(fake.requests(mark).map((r) => `${r.sni} ${r.method} ${r.target} -> ${r.status} ${r.why ?? ''}`)));
        assert.equal(header(req, s.keyHeader), s.keyValue(s.value), `the real key in ${s.keyHeader}`);
        assert.equal(header(req, 'Host'), s.host);
        s.check(req);
        for (const r of reqs) {
          assert.equal(r.status, 200, `${r.method} ${r.target} was answered ${r.status} (${r.why})`);
          assert.ok(!JSON.stringify(r.headers).includes('RUNTIME_PH_'), 'no placeholder left in what reached the API');
        }

        // What the client got: the server parsed the answer and showed its marker.
        if (callError) throw callError;
        assert.notEqual(result.isError, true, `tool error: ${text}`);
        assert.ok(text.includes(s.marker), `the marker ${s.marker} is in the tool result: ${text.slice(0, 500)}`);

        // The proxy says so too.
        const events = await waitFor(async () => {
          const ev = await allEvents(d, sb.id, seq);
          return ev.some((e) => e.kind === 'secret.used' && e.secret === s.secret && e.host === s.host) && ev;
        }, { timeoutMs: 10000, what: `secret.used for ${s.secret} at ${s.host}` });
        assert.ok(!events.some((e) => e.kind === 'secret.misdirected'), showSecretEvents(events).join('\n'));
      });
  }

  test('the sandbox held only placeholders; no secret was misdirected; egress went only to the registry and the API hosts',
    { timeout: 5 * 60 * 1000 }, async () => {
      assert.ok(Object.keys(ready).length > 0, 'no server was ready (see the first test)');
      const values = SERVERS.map((s) => s.value);
      const events = await allEvents(d, sb.id);
      assert.ok(!events.some((e) => e.kind === 'secret.misdirected'), showSecretEvents(events).join('\n'));
      const allowed = new Set(events.filter((e) => e.kind === 'egress.allowed').map((e) => e.host));
      const registry = (await d.exec(sb.id, ['npm', 'config', 'get', 'registry'])).stdout.trim();
      const expected = new Set([new URL(registry).hostname, ...HOSTS]);
      assert.deepEqual([...allowed].filter((h) => !expected.has(h)), [], `allowed out: ${[...allowed].join(' ')}`);
      for (const h of HOSTS) assert.ok(allowed.has(h), `egress.allowed to ${h}: ${[...allowed].join(' ')}`);
      // Only the pinned names reached the fake: no handshake for a name it does not serve.
      assert.deepEqual(fake.upstream.events.filter((e) => e.ev === 'tls-refused'), []);

      // An exec's environment: each secret under its own name, as a placeholder.
      const env = await d.exec(sb.id, ['env']);
      assert.equal(env.exitCode, 0, env.stderr);
      const ph = {};
      for (const s of SERVERS) {
        ph[s.id] = new RegExp(`^${s.secret}=(.*)$`, 'm').exec(env.stdout)?.[1];
        assert.match(ph[s.id] ?? '', PLACEHOLDER, `${s.secret} in the sandbox env`);
      }
      for (const v of values) assert.ok(!env.stdout.includes(v), 'no key in the sandbox env');

      // Every process's environment, the servers' own included.
      const procs = await d.exec(sb.id, ['sh', '-c',
        'for f in /proc/[0-9]*/environ; do tr "\\000" "\\n" < "$f" 2>/dev/null; echo; done']);
      for (const v of values) assert.ok(!procs.stdout.includes(v), 'no key in any process environment in the sandbox');
      for (const s of SERVERS) {
        const seen = procs.stdout.split('\n').filter((l) => l.startsWith(`${s.env}=`));
        assert.ok(seen.length >= 1, `the ${s.id} server runs with ${s.env} set`);
        for (const l of seen) assert.equal(l, `${s.env}=${ph[s.id]}`, `${s.id} holds the placeholder`);
      }

      // Files: nothing the servers wrote or cached holds a key. -s: /workspace/lost+found
      // is not readable by the sandbox user (exit 2 with no match).
      const grep = await d.exec(sb.id, ['grep', '-rlsF', ...values.flatMap((v) => ['-e', v]), '--', '/workspace', '/tmp'],
        { timeoutMs: 180000 });
      assert.equal(grep.stdout, '', `files in the sandbox hold a key: ${grep.stdout}`);
      assert.notEqual(grep.exitCode, 0, 'grep found a key');
    });
});
