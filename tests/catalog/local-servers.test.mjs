// Seven catalog servers each doing one real task through the gateway, with the
// official MCP SDK client, against hosts this test runs itself:
//
//   postgres    query: rows of a real PostgreSQL 15 (initdb'd here) at db.test:5432;
//               the role is read-only and an INSERT fails
//   playwright  the host's Chromium (/usr/lib/chromium/chromium, headless, no
//               download) opens http://web.test/ and its snapshot has the marker
//   memory      create_entities, then read_graph and search_nodes return them
//   filesystem  write_file, read_text_file, list_directory; the file is in /workspace
//   fetch       fetches http://web.test/article.html (robots.txt allows it): the marker
//               (the catalog runs it with --allow-private-ips and node hidden: see
//               docs/catalog.md)
//   git         git_log of a repository made in /workspace: the commit message
//   time        get_current_time and convert_time: the zone, the year, the offset
//
// Every server runs beside a secret: each of its processes holds the placeholder in
// its environment, never the value, and no file of /workspace holds the value. Once
// the installs are done, each sandbox reaches only its test hosts.
//
// One daemon in the host's network namespace (installs reach npm and PyPI through
// it); the test hosts live in a namespace of their own at 198.51.100.181 (local-net.mjs),
// pinned with --resolve. Two sandboxes: the node servers, the Python servers, each
// started in one POST at the beginning so the installs overlap.
//
// Nothing here sleeps for synchronisation: waits poll with deadlines.

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { isRoot } from '../e2e/lib.mjs';
import { allEvents } from '../secrets/lib.mjs';
import { HOST_V4, LocalDaemon, PLACEHOLDER, TestNet, UP_V4, connect, showServer, textOf } from './local-net.mjs';
import { LocalPostgres, PG_ROWS } from './local-postgres.mjs';
import { startWeb } from './local-web.mjs';

const CHROMIUM = '/usr/lib/chromium/chromium';
const WEB = 'web.test';
const DB = 'db.test';
const SECRET = 'CATL_API_KEY';
const TASK = { timeout: 3 * 60 * 1000 }; // a hung tool call fails its test

const skip = (!isRoot() && 'must run as root (runtimed needs it)') ||
  (process.env.RUNTIME_E2E_OFFLINE && 'RUNTIME_E2E_OFFLINE is set (the installs need npm and PyPI)');

const marker = `catl-${crypto.randomBytes(6).toString('hex')}`;
const secretValue = `sk-catl-${crypto.randomBytes(16).toString('hex')}`;

const PAGES = {
  '/robots.txt': { type: 'text/plain', body: 'User-agent: *\nAllow: /\n' },
  '/': {
    type: 'text/html',
    body: `<!doctype html><html><head><title>catl page</title></head><body><h1>Hello ${marker}</h1></body></html>`,
  },
  '/article.html': {
    type: 'text/html',
    body: '<!doctype html><html><head><title>catl article</title></head><body><article>' +
      `<h1>An article</h1><p>The fetch marker is ${marker}, in a paragraph long enough to be kept as the ` +
      'main content of the page by a readability pass.</p></article></body></html>',
  },
};

describe('catalog servers doing real work through the gateway', { skip }, () => {
  let net, web, pg, d, nodeBox, pyBox;

  before(async () => {
    net = new TestNet().setup();
    web = await startWeb(net.ns, net.dir, { bind: UP_V4, pages: PAGES });
    net.cleanups.push(() => web.stop());
    // PostgreSQL and Chromium come from scripts/install-deps: a missing one fails here.
    pg = await new LocalPostgres(net.ns, UP_V4, HOST_V4, net.dir).start();
    net.cleanups.push(() => pg.killSync());
    assert.ok(fs.existsSync(CHROMIUM), `${CHROMIUM} is missing: run scripts/install-deps`);
    const dir = path.join(net.dir, 'daemon');
    fs.mkdirSync(dir, { mode: 0o711 });
    d = new LocalDaemon(dir, { pins: [`${WEB}:80:${UP_V4}`, `${DB}:5432:${UP_V4}`] });
    net.cleanups.unshift(() => d.killSync()); // when the process exits before after()
    await d.start();
    // A secret of the account is in every sandbox under its own name (as a placeholder).
    await d.putSecret(SECRET, { value: secretValue, hosts: ['api.catl.test'] });

    // Both sandboxes start installing now; each describe below waits for its own.
    const node = await d.create({ memoryMiB: 4096, cpus: 2, diskMiB: 4096,
      network: { internet: true, allow: [`${WEB}:80`, `${DB}:5432`] } });
    // Each server exactly as the catalog starts it: nothing added.
    const servers = [
      { id: 'playwright' },
      { id: 'memory', env: { MEMORY_FILE_PATH: '/workspace/memory.jsonl' } },
      // One server also gets the secret under a name of its own.
      { id: 'filesystem', secrets: { CATL_TOKEN: SECRET } },
    ];
    servers.push({ id: 'postgres', env: { POSTGRES_URL: pg.url(DB) } });
    nodeBox = { id: node.id, post: await d.api('POST', `/v1/sandboxes/${node.id}/mcp`, { servers }) };

    const py = await d.create({ memoryMiB: 2048, cpus: 2, diskMiB: 2048, network: { internet: true, allow: [`${WEB}:80`] } });
    pyBox = {
      id: py.id,
      post: await d.api('POST', `/v1/sandboxes/${py.id}/mcp`,
        { servers: [{ id: 'fetch' }, { id: 'git' }, { id: 'time' }] }),
    };
  });

  after(async () => {
    try {
      await d?.close({ keepDir: true });
      await pg?.stop();
    } finally {
      net?.teardown();
    }
  });

  /** Waits for a sandbox's servers; each must be ready. Returns {servers by name, auth}. */
  async function ready(box, names) {
    assert.equal(box.post.status, 202, box.post.text);
    const t0 = Date.now();
    const st = await d.mcpSettled(box.id, 10 * 60 * 1000);
    process.stderr.write(`sandbox ${box.id} settled in ${Math.round((Date.now() - t0) / 1000)} s: ` +
      `${st.servers.map(showServer).join('; ')}\n`);
    const byName = Object.fromEntries(st.servers.map((s) => [s.name, s]));
    for (const n of names) assert.equal(byName[n]?.status, 'ready', showServer(byName[n]) ?? `${n} not listed`);
    return { servers: byName, auth: st.headers.Authorization };
  }

  /** Calls one tool through the gateway with a fresh SDK client session. */
  async function call(gw, server, name, args, opts) {
    const client = await connect(gw.servers[server].url, gw.auth);
    try {
      return await client.callTool({ name, arguments: args }, undefined, opts);
    } finally {
      await client.close().catch(() => {});
    }
  }

  /** Every process of the sandbox: {pid, cmd, env} (read inside, as the sandbox user). */
  async function processes(id) {
    const r = await d.mustExec(id, ['node', '-e', `
      const fs = require('fs'), out = [];
      for (const p of fs.readdirSync('/proc').filter((x) => /^\\d+$/.test(x))) {
        try {
          const cmd = fs.readFileSync('/proc/' + p + '/cmdline', 'utf8').split('\\0').join(' ').trim();
          const env = fs.readFileSync('/proc/' + p + '/environ', 'utf8');
          out.push({ pid: +p, cmd, env });
        } catch {}
      }
      console.log(JSON.stringify(out));`]);
    return JSON.parse(r.stdout);
  }

  /** The sandbox holds only the placeholder: in the env of every process whose command
   * line matches `re` (the server, and what it started), and of no process the value;
   * no file under /workspace holds the value. `also`: more variables that must hold it. */
  async function onlyPlaceholder(id, re, { also = [] } = {}) {
    const ph = (await d.mustExec(id, ['printenv', SECRET])).stdout.trim();
    assert.match(ph, PLACEHOLDER, `${SECRET} in the sandbox`);
    const procs = await processes(id);
    const mine = procs.filter((p) => re.test(p.cmd));
    assert.ok(mine.length > 0, `a process matching ${re} runs: ${procs.map((p) => p.cmd).join('\n')}`);
    for (const p of mine) {
      const env = p.env.split('\0');
      for (const v of [SECRET, ...also]) assert.ok(env.includes(`${v}=${ph}`), `${p.cmd}: ${v} is the placeholder`);
    }
    for (const p of procs) assert.ok(!p.env.includes(secretValue), `the value is in the env of ${p.cmd}`);
    // -s: lost+found is not readable by the sandbox user.
    const g = await d.exec(id, ['grep', '-rlsF', '--', secretValue, '/workspace'], { timeoutMs: 120000 });
    assert.equal(g.stdout, '', 'no file in /workspace holds the value');
    assert.notEqual(g.exitCode, 0);
    return mine;
  }

  const webRequests = (p) => web.events.filter((e) => e.ev === 'req' && e.path === p);

  /** Once its servers were ready (installs done), the sandbox reached only `hosts`. */
  async function onlyTestHostsAfterReady(id, hosts) {
    const ev = await allEvents(d, id);
    const lastReady = ev.filter((e) => e.kind === 'mcp.ready').at(-1);
    assert.ok(lastReady, `an mcp.ready event: ${ev.map((e) => e.kind).join(' ')}`);
    const out = ev.filter((e) => e.seq > lastReady.seq && e.kind === 'egress.allowed');
    assert.ok(out.length > 0, 'the tasks reached their test hosts');
    assert.deepEqual([...new Set(out.map((e) => `${e.host}:${e.port}`))].sort(), [...hosts].sort());
  }

  describe('node servers (one sandbox)', () => {
    let gw;
    before(async () => {
      gw = await ready(nodeBox, ['playwright', 'memory', 'filesystem', ...(pg ? ['postgres'] : [])]);
    });

    test('postgres: query returns the rows of a real database; the role cannot write', TASK, async () => {
      const r = await call(gw, 'postgres', 'query', { sql: 'SELECT name, moons FROM planets ORDER BY name' });
      assert.ok(!r.isError, textOf(r));
      assert.deepEqual(JSON.parse(textOf(r)), PG_ROWS);
      // The server wraps queries in READ ONLY transactions, and the role may only SELECT.
      await assert.rejects(call(gw, 'postgres', 'query', { sql: "INSERT INTO planets VALUES ('Pluto', 5)" }),
        /read-only transaction/);
      assert.equal(pg.psql('catl', 'SELECT count(*) FROM planets').trim(), String(PG_ROWS.length));
      // The sandbox reached the database as the name the daemon pins, through the proxy.
      const ev = await allEvents(d, nodeBox.id);
      assert.ok(ev.some((e) => e.kind === 'egress.allowed' && e.host === DB && e.port === 5432),
        JSON.stringify(ev.filter((e) => e.kind.startsWith('egress')).slice(-10)));
      await onlyPlaceholder(nodeBox.id, /mcp-server-postgres/);
    });

    test('playwright: the host\'s Chromium opens a page and its snapshot has the marker', TASK, async () => {
      const client = await connect(gw.servers.playwright.url, gw.auth);
      try {
        const nav = await client.callTool({ name: 'browser_navigate', arguments: { url: `http://${WEB}/` } });
        assert.ok(!nav.isError, textOf(nav));
        assert.match(textOf(nav), /Page URL: http:\/\/web\.test\//);
        const snap = await client.callTool({ name: 'browser_snapshot', arguments: {} });
        assert.ok(!snap.isError, textOf(snap));
        assert.ok(textOf(snap).includes(`heading "Hello ${marker}"`), textOf(snap));
        const req = webRequests('/').at(-1);
        assert.match(req?.ua ?? '', /HeadlessChrome/, JSON.stringify(req));
        assert.equal(req.host, WEB);
        // Chromium runs in the sandbox, its profile in /workspace, and it too holds
        // only the placeholder. Only the browser process is asked: its children (--type=
        // zygote, renderer, ...) write their title over their environ area, so /proc shows
        // no variables there (on the host as well).
        const chromium = await onlyPlaceholder(nodeBox.id, /^\/usr\/lib\/chromium\/chromium (?!--type=)/);
        assert.ok(chromium.some((p) => p.cmd.includes('--user-data-dir=/workspace/mcp/playwright/profile')),
          chromium.map((p) => p.cmd).join('\n'));
        const profile = await d.mustExec(nodeBox.id, ['test', '-d', '/workspace/mcp/playwright/profile/Default']);
        assert.equal(profile.exitCode, 0, 'the profile persists in /workspace');
        await onlyPlaceholder(nodeBox.id, /playwright-mcp/);
        const closed = await client.callTool({ name: 'browser_close', arguments: {} });
        assert.ok(!closed.isError, textOf(closed));
      } finally {
        await client.close().catch(() => {});
      }
    });

    test('memory: create_entities, then read_graph and search_nodes return them', TASK, async () => {
      const entities = [
        { name: `${marker}-alice`, entityType: 'person', observations: ['writes C'] },
        { name: `${marker}-runtime`, entityType: 'project', observations: ['hosts MCP servers'] },
      ];
      const made = await call(gw, 'memory', 'create_entities', { entities });
      assert.ok(!made.isError, textOf(made));
      const graph = JSON.parse(textOf(await call(gw, 'memory', 'read_graph', {})));
      for (const e of entities) assert.deepEqual(graph.entities.find((x) => x.name === e.name), e);
      const found = JSON.parse(textOf(await call(gw, 'memory', 'search_nodes', { query: `${marker}-alice` })));
      assert.deepEqual(found.entities.map((e) => e.name), [`${marker}-alice`]);
      // Kept where MEMORY_FILE_PATH says, in the sandbox.
      const file = await d.mustExec(nodeBox.id, ['cat', '/workspace/memory.jsonl']);
      assert.ok(file.stdout.includes(`${marker}-runtime`), file.stdout);
      await onlyPlaceholder(nodeBox.id, /mcp-server-memory/);
    });

    test('filesystem: write_file, read_text_file and list_directory; the file is in the sandbox', TASK, async () => {
      const p = `/workspace/notes-${marker}/hello.txt`;
      const content = `hello from ${marker}\n`;
      const mk = await call(gw, 'filesystem', 'create_directory', { path: path.dirname(p) });
      assert.ok(!mk.isError, textOf(mk));
      const w = await call(gw, 'filesystem', 'write_file', { path: p, content });
      assert.ok(!w.isError, textOf(w));
      assert.equal(textOf(await call(gw, 'filesystem', 'read_text_file', { path: p })), content);
      const ls = await call(gw, 'filesystem', 'list_directory', { path: path.dirname(p) });
      assert.equal(textOf(ls).trim(), '[FILE] hello.txt');
      // Outside its allowed directory the server refuses.
      const out = await call(gw, 'filesystem', 'read_text_file', { path: '/etc/passwd' });
      assert.ok(out.isError, textOf(out));
      const cat = await d.mustExec(nodeBox.id, ['stat', '-c', '%U %s', p]);
      assert.equal(cat.stdout.trim(), `user ${Buffer.byteLength(content)}`);
      assert.equal((await d.mustExec(nodeBox.id, ['cat', p])).stdout, content);
      await onlyPlaceholder(nodeBox.id, /mcp-server-filesystem/, { also: ['CATL_TOKEN'] });
    });

    test('egress: after the installs only web.test and db.test were reached', async () => {
      await onlyTestHostsAfterReady(nodeBox.id, [`${WEB}:80`, ...(pg ? [`${DB}:5432`] : [])]);
    });
  });

  describe('python servers (one sandbox)', () => {
    let gw;
    before(async () => {
      gw = await ready(pyBox, ['fetch', 'git', 'time']);
    });

    test('fetch: a page of the test host comes back as text with the marker', TASK, async () => {
      const r = await call(gw, 'fetch', 'fetch', { url: `http://${WEB}/article.html` });
      assert.ok(!r.isError, textOf(r));
      assert.ok(textOf(r).includes(`The fetch marker is ${marker}`), textOf(r));
      // It asked robots.txt first, as an autonomous fetcher.
      const robots = webRequests('/robots.txt').at(-1);
      assert.match(robots?.ua ?? '', /ModelContextProtocol/, JSON.stringify(web.events));
      assert.equal(webRequests('/article.html').at(-1)?.host, WEB);
      await onlyPlaceholder(pyBox.id, /mcp_server_fetch/);
    });

    test('git: git_log of a repository made in /workspace shows its commit', TASK, async () => {
      const repo = '/workspace/repo';
      const message = `first commit ${marker}`;
      await d.mustExec(pyBox.id, ['sh', '-c', 'git init -q "$1" && cd "$1" && echo hi > README && git add README && ' +
        'git -c user.name=catl -c user.email=catl@example.invalid commit -q -m "$2"', 'sh', repo, message]);
      const r = await call(gw, 'git', 'git_log', { repo_path: repo });
      assert.ok(!r.isError, textOf(r));
      assert.ok(textOf(r).includes(message), textOf(r));
      assert.match(textOf(r), /catl/);
      await onlyPlaceholder(pyBox.id, /mcp_server_git/);
    });

    test('time: get_current_time and convert_time give the zone, this year and the offset', TASK, async () => {
      const now = JSON.parse(textOf(await call(gw, 'time', 'get_current_time', { timezone: 'Asia/Tokyo' })));
      assert.equal(now.timezone, 'Asia/Tokyo');
      assert.match(now.datetime, /\+09:00$/);
      const year = new Intl.DateTimeFormat('en', { timeZone: 'Asia/Tokyo', year: 'numeric' }).format(new Date());
      assert.equal(now.datetime.slice(0, 4), year, now.datetime);
      assert.ok(Math.abs(Date.parse(now.datetime) - Date.now()) < 5 * 60 * 1000, `${now.datetime} is now`);
      const conv = JSON.parse(textOf(await call(gw, 'time', 'convert_time',
        { source_timezone: 'UTC', time: '12:00', target_timezone: 'Asia/Kolkata' })));
      assert.equal(conv.source.timezone, 'UTC');
      assert.equal(conv.target.timezone, 'Asia/Kolkata');
      assert.match(conv.target.datetime, /T17:30:00\+05:30$/);
      assert.equal(conv.time_difference, '+5.5h');
      await onlyPlaceholder(pyBox.id, /mcp_server_time/);
    });

    test('egress: after the installs only web.test was reached', async () => {
      await onlyTestHostsAfterReady(pyBox.id, [`${WEB}:80`]);
    });
  });
});
