// `runtime sandbox mcp` against the real daemon, as a user runs it: start your own stdio
// server (tests/mcp/fixtures/hello-server.mjs) in a sandbox, read its status, URL, token and
// the `claude mcp add` line, reach it with exactly those, pin its fingerprint, stop it; and
// the usage errors, help texts and API errors of the command.
//
//   node --test tests/mcp/cli.test.mjs        (as root: runtimed needs it; `make` first)
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startDaemon, stopDaemon, run, isRoot, waitFor, RUNTIME } from '../e2e/lib.mjs';

const FIXTURE = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures', 'hello-server.mjs');
const SERVER = '/workspace/hello.mjs';
const START_OPTS = { timeoutMs: 120000 }; // --wait 60 plus the call itself

/** The human output of `runtime sandbox mcp ID` (and of start): rows, header, claude lines. */
function parseShow(stdout) {
  const lines = stdout.split('\n');
  const rows = [];
  for (const l of lines) {
    const m = /^(\S+)\s+(installing|starting|ready|failed|refused|stopped)\s+(\S+)$/.exec(l);
    if (m) rows.push({ name: m[1], status: m[2], url: m[3] });
  }
  const auth = lines.filter((l) => l.startsWith('Authorization: '));
  const claude = lines.filter((l) => l.startsWith('claude mcp add '));
  return { rows, auth, claude };
}

/** The daemon's own view: GET /v1/sandboxes/{id}/mcp. */
async function state(d, id) {
  const r = await d.api('GET', `/v1/sandboxes/${encodeURIComponent(id)}/mcp`);
  assert.equal(r.status, 200, r.text);
  return r.body;
}

function find(st, name) {
  return st.servers.find((s) => s.name === name);
}

/** The fingerprint `runtime mcp fingerprint` gives the fixture's tools. */
async function fixtureFingerprint() {
  const tools = await run(process.execPath, [FIXTURE, '--print-tools']);
  assert.equal(tools.code, 0, tools.stderr);
  const fp = await run(RUNTIME, ['mcp', 'fingerprint', '-'], { input: tools.stdout });
  assert.equal(fp.code, 0, fp.stderr);
  return fp.stdout.trim();
}

/** An MCP client on the URL and header as printed, the way Claude Code would use them. */
async function connect(url, authorization) {
  const client = new Client({ name: 'cli-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: authorization } },
  });
  await client.connect(transport);
  return client;
}

describe('runtime sandbox mcp', { skip: !isRoot() && 'must run as root (runtimed needs it)' }, () => {
  let d, sb;
  const name = 'mcp-cli-box';

  before(async () => {
    d = await startDaemon({ prefix: 'runtime-mcp-cli-' });
    sb = await d.create({ name });
    const cp = await d.cli(['sandbox', 'cp', FIXTURE, `${sb.id}:${SERVER}`]);
    assert.equal(cp.code, 0, cp.stderr);
  });
  after(async () => {
    await stopDaemon(d);
  });

  test('start prints the status, URL, Authorization header and the claude mcp add line', async () => {
    const r = await d.cli(['sandbox', 'mcp', sb.id, 'start', `hello=node ${SERVER}`, '--wait', '60'], START_OPTS);
    assert.equal(r.code, 0, `stdout:\n${r.stdout}\nstderr:\n${r.stderr}`);
    assert.equal(r.stderr, 'starting hello...\nhello ready\n', 'progress lines, on stderr');

    const st = await state(d, sb.id);
    const hello = find(st, 'hello');
    assert.ok(hello, `hello is listed: ${JSON.stringify(st)}`);
    assert.equal(hello.status, 'ready', JSON.stringify(hello));
    assert.match(hello.url, new RegExp(`^http://127\\.0\\.0\\.1:${d.port}/mcp/[^/]+/hello$`));
    const auth = st.headers.Authorization;
    assert.match(auth, /^Bearer \S+$/);

    const out = parseShow(r.stdout);
    assert.deepEqual(out.rows, [{ name: 'hello', status: 'ready', url: hello.url }], r.stdout);
    assert.deepEqual(out.auth, [`Authorization: ${auth}`], r.stdout);
    assert.deepEqual(out.claude,
      [`claude mcp add --transport http hello ${hello.url} --header "Authorization: ${auth}"`], r.stdout);
    assert.match(r.stdout, /^ {2}tools: hello\b/m, 'the tools are listed under the server');

    // The fingerprint shown is the one `runtime mcp fingerprint` takes of the tools.
    const fp = await fixtureFingerprint();
    assert.equal(hello.fingerprint, fp);
    assert.ok(r.stdout.includes(`(fingerprint ${fp})`), r.stdout);
  });

  test('the printed URL and header reach the server', async () => {
    const out = parseShow((await d.cli(['sandbox', 'mcp', sb.id])).stdout);
    const [row] = out.rows;
    assert.ok(row, 'a server row');
    const client = await connect(row.url, out.auth[0].slice('Authorization: '.length));
    try {
      const { tools } = await client.listTools();
      assert.deepEqual(tools.map((t) => t.name), ['hello']);
      const res = await client.callTool({ name: 'hello', arguments: { name: 'runtime' } });
      assert.deepEqual(res.content, [{ type: 'text', text: 'hello, runtime' }]);
    } finally {
      await client.close();
    }
  });

  test('showing by id and by name; --json prints the API JSON', async () => {
    const api = await state(d, sb.id);
    const byId = await d.cli(['sandbox', 'mcp', sb.id]);
    const byName = await d.cli(['sandbox', 'mcp', name]);
    assert.equal(byId.code, 0, byId.stderr);
    assert.equal(byName.code, 0, byName.stderr);
    assert.equal(byName.stdout, byId.stdout);
    assert.deepEqual(parseShow(byId.stdout).rows, [{ name: 'hello', status: 'ready', url: find(api, 'hello').url }]);

    const j = await d.cli(['sandbox', 'mcp', name, '--json']);
    assert.equal(j.code, 0, j.stderr);
    const parsed = JSON.parse(j.stdout);
    assert.deepEqual(parsed.headers, api.headers);
    const hello = find(parsed, 'hello');
    assert.equal(hello.status, 'ready');
    assert.equal(hello.url, find(api, 'hello').url);
    assert.deepEqual(hello.tools, ['hello']);
    assert.ok(Array.isArray(hello.warnings));
  });

  test('starting the same server again is a no-op, also with --wait 0', async () => {
    for (const wait of ['60', '0']) {
      const r = await d.cli(['sandbox', 'mcp', sb.id, 'start', `hello=node ${SERVER}`, '--wait', wait], START_OPTS);
      assert.equal(r.code, 0, `--wait ${wait}: ${r.stdout}\n${r.stderr}`);
      assert.deepEqual(parseShow(r.stdout).rows.map((x) => [x.name, x.status]), [['hello', 'ready']]);
    }
  });

  test('CMD is split at blanks, with quotes keeping an argument whole', async () => {
    const rec = '/workspace/split args.json';
    const r = await d.cli(['sandbox', 'mcp', sb.id, 'start',
      `split=node ${SERVER} --record "${rec}" 'two words' plain`, '--wait', '60'], START_OPTS);
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    const cat = await d.exec(sb.id, ['cat', rec]);
    assert.equal(cat.exitCode, 0, cat.stderr);
    assert.deepEqual(JSON.parse(cat.stdout), ['--record', rec, 'two words', 'plain']);
    const stop = await d.cli(['sandbox', 'mcp', sb.id, 'stop', 'split']);
    assert.equal(stop.code, 0, stop.stderr);
  });

  test('--fingerprint: the right one starts, another one is refused (exit 1)', async () => {
    const fp = await fixtureFingerprint();
    const ok = await d.cli(['sandbox', 'mcp', sb.id, 'start', `pinned=node ${SERVER}`,
      '--fingerprint', `pinned=${fp}`, '--wait', '60'], START_OPTS);
    assert.equal(ok.code, 0, `${ok.stdout}\n${ok.stderr}`);
    assert.equal(find(await state(d, sb.id), 'pinned').status, 'ready');

    const bad = await d.cli(['sandbox', 'mcp', sb.id, 'start', `wrongpin=node ${SERVER}`,
      '--fingerprint', 'wrongpin=0000000000000000', '--wait', '60'], START_OPTS);
    assert.equal(bad.code, 1, `${bad.stdout}\n${bad.stderr}`);
    assert.match(bad.stderr, /^runtime: MCP server wrongpin was refused/m);
    assert.deepEqual(parseShow(bad.stdout).rows.find((x) => x.name === 'wrongpin')?.status, 'refused');
    assert.match(bad.stdout, /^ {2}error: /m, 'the error is shown under the server');
    for (const s of ['pinned', 'wrongpin']) await d.cli(['sandbox', 'mcp', sb.id, 'stop', s]);
  });

  test('a server that cannot start ends failed: exit 1 with its error', async () => {
    const r = await d.cli(['sandbox', 'mcp', sb.id, 'start', 'broken=node /workspace/no-such-file.mjs',
      '--wait', '60'], START_OPTS);
    assert.equal(r.code, 1, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stderr, /^runtime: MCP server broken failed/m);
    assert.equal(find(await state(d, sb.id), 'broken').status, 'failed');
    await d.cli(['sandbox', 'mcp', sb.id, 'stop', 'broken']);
  });

  test('stop stops the server', async () => {
    const r = await d.cli(['sandbox', 'mcp', sb.id, 'stop', 'hello']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, 'MCP server hello stopped\n');
    await waitFor(async () => {
      const s = find(await state(d, sb.id), 'hello');
      return !s || s.phase === 'stopped';
    }, { timeoutMs: 10000, what: 'hello to be stopped or gone' });
  });

  test('catalog: a table, or the API JSON with --json', async () => {
    const j = await d.cli(['sandbox', 'mcp', 'catalog', '--json']);
    assert.equal(j.code, 0, j.stderr);
    const entries = JSON.parse(j.stdout).data; // the API's JSON: Runtime Cloud's {data}
    assert.ok(Array.isArray(entries));
    const t = await d.cli(['sandbox', 'mcp', 'catalog']);
    assert.equal(t.code, 0, t.stderr);
    const lines = t.stdout.trimEnd().split('\n');
    assert.match(lines[0], /^ID\s+VERSION\s+LICENSE\s+SECRETS$/);
    assert.deepEqual(lines.slice(1).map((l) => l.split(/\s+/)[0]), entries.map((e) => e.id));
  });

  test('usage errors exit 2 with one line, and start nothing', async () => {
    const before = (await state(d, sb.id)).servers.length;
    const cases = [
      [[], /^Usage: runtime sandbox mcp/],
      [['--json'], /missing the sandbox ID/],
      [[sb.id, 'frob'], /unknown command 'frob'/],
      [[sb.id, 'start'], /missing the SERVER to start/],
      [[sb.id, 'start', 'node /workspace/x.mjs'], /bad SERVER 'node \/workspace\/x\.mjs'.*NAME=CMD/],
      [[sb.id, 'start', 'x='], /no command after '='/],
      [[sb.id, 'start', 'x=node "unclosed'], /quote is not closed/],
      [[sb.id, 'start', 'x=node a', 'x=node b'], /server 'x' is given twice/],
      [[sb.id, 'start', 'x=node a', '--secret', 'other.ENV=S'], /--secret.*SERVER\.ENV=SECRET/],
      [[sb.id, 'start', 'x=node a', '--secret', 'x.ENV'], /--secret.*SERVER\.ENV=SECRET/],
      [[sb.id, 'start', 'x=node a', '--fingerprint', 'x=xyz'], /--fingerprint/],
      [[sb.id, 'start', 'x=node a', '--fingerprint', 'y=0123456789abcdef'], /--fingerprint/],
      [[sb.id, 'start', 'x=node a', '--wait', 'soon'], /--wait/],
      [[sb.id, 'start', 'x=node a', '--json'], /--json goes only with/],
      [[sb.id, 'stop'], /missing the SERVER to stop/],
      [[sb.id, 'stop', 'a', 'b'], /unexpected argument 'b'/],
      [[sb.id, '--wait', '5'], /--wait goes only with 'sandbox mcp ID start'/],
      [['catalog', 'extra'], /unexpected argument 'extra'/],
      [[sb.id, 'start', 'x=node a', '--bogus'], /unknown option '--bogus'/],
    ];
    for (const [args, re] of cases) {
      const r = await d.cli(['sandbox', 'mcp', ...args]);
      const what = `runtime sandbox mcp ${args.join(' ')}: ${r.stderr}`;
      assert.equal(r.code, 2, what);
      assert.equal(r.stdout, '', what);
      assert.match(r.stderr, re, what);
      if (args.length) {
        assert.equal(r.stderr.split('\n').length, 2, `one line: ${what}`);
        assert.match(r.stderr, /^runtime: .*; see 'runtime sandbox mcp[^']*--help'\n$/, what);
      }
    }
    assert.equal((await state(d, sb.id)).servers.length, before, 'nothing was started');
  });

  test('--help for each form', async () => {
    const forms = [
      [['sandbox', 'mcp', '--help'], /^Usage: runtime sandbox mcp catalog/],
      [['sandbox', 'mcp', sb.id, '--help'], /claude mcp add --transport http/],
      [['sandbox', 'mcp', 'catalog', '--help'], /^Usage: runtime sandbox mcp catalog \[--json\]\n/],
      [['sandbox', 'mcp', sb.id, 'start', '--help'], /^Usage: runtime sandbox mcp ID start SERVER\.\.\.[^]*without a shell[^]*quotes/],
      [['sandbox', 'mcp', sb.id, 'stop', '-h'], /^Usage: runtime sandbox mcp ID stop SERVER\n/],
      [['help', 'sandbox', 'mcp', 'ID', 'start'], /^Usage: runtime sandbox mcp ID start/],
    ];
    for (const [args, re] of forms) {
      const r = await d.cli(args);
      assert.equal(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stdout, re, args.join(' '));
    }
  });

  test('API errors print the API message and exit 1', async () => {
    const r = await d.cli(['sandbox', 'mcp', 'no-such-box']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /^runtime: .*\(not_found, HTTP 404\)\n$/);
    const s = await d.cli(['sandbox', 'mcp', 'no-such-box', 'start', `hello=node ${SERVER}`]);
    assert.equal(s.code, 1);
    assert.match(s.stderr, /\(not_found, HTTP 404\)/);
  });
});
