// The MCP server catalog (catalog/servers.json, served at GET /v1/mcp/catalog):
//
//   the file       14 entries of exactly the docs/catalog.md entry shape, pinned to
//                  exact versions, MIT or Apache-2.0; no daemon needed.
//   the API        GET /v1/mcp/catalog (and `runtime sandbox mcp catalog --json`) serve
//                  that file.
//   installs       every server of the catalog installs and becomes ready in ONE
//                  sandbox without Internet (network {internet:false, allow:[]}): the
//                  daemon itself opens the package registries for the installs, and the
//                  sandbox's events show that the npm registry and PyPI are the only
//                  hosts allowed.
//                  Each server's tool list must match the catalog's fingerprint.
//
// Each server doing its real task, with its key as a secret, is tests/catalog/.
// The installs reach the registries (the Internet) through the daemon, so their
// daemon lives in the host's network namespace, as in tests/egress/npm.test.mjs.
// RUNTIME_E2E_OFFLINE=1 skips them. Everything but the file checks needs root.
//
// Nothing here sleeps for synchronisation: waits poll with deadlines.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { ROOT, isRoot, startDaemon, stopDaemon } from '../e2e/lib.mjs';
import { EgressDaemon } from '../egress/lib.mjs';
import { allEvents } from '../secrets/lib.mjs';
import { mcpSettled, showServer } from '../catalog/lib.mjs';

const CATALOG = JSON.parse(fs.readFileSync(path.join(ROOT, 'catalog', 'servers.json'), 'utf8'));

const IDS = ['github', 'postgres', 'playwright', 'filesystem', 'fetch', 'git', 'time', 'memory',
  'notion', 'context7', 'brave-search', 'exa', 'firecrawl', 'supabase'];
const KEYS = ['id', 'name', 'description', 'package', 'version', 'runtime', 'license', 'command',
  'egress', 'settings', 'fingerprint'];
const SETTING_KEYS = ['env', 'secret', 'required', 'description'];
const SEMVER = /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$/; // exact: no range, no tag
const HEX16 = /^[0-9a-f]{16}$/;
const ENV_ARG = /^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$/;

const GITHUB = 'api.github.com';

const root = isRoot();
const offline = !!process.env.RUNTIME_E2E_OFFLINE;
const needRoot = !root && 'must run as root (runtimed needs it)';
const needNet = needRoot || (offline && 'RUNTIME_E2E_OFFLINE is set (the installs need the npm registry)');

// pip's index in a sandbox with no pip configuration, and where PyPI keeps its files.
const PYPI_HOSTS = ['pypi.org', 'files.pythonhosted.org'];

/** The registry that npm (and so the daemon's installs) uses: its host name. */
function registryHost() {
  const r = spawnSync('npm', ['config', 'get', 'registry'], { encoding: 'utf8' });
  const url = r.status === 0 && r.stdout.trim() ? r.stdout.trim() : 'https://registry.npmjs.org/';
  return new URL(url).hostname;
}

/** A dummy value for a required setting that is not a secret (given as env). */
function dummyEnv(setting) {
  if (/POSTGRES|DATABASE/.test(setting.env)) return 'postgresql://dummy:dummy@127.0.0.1:5432/dummy';
  return `dummy-${setting.env.toLowerCase()}`;
}


// ---------------------------------------------------------------- the file

describe('catalog/servers.json', () => {
  test('14 entries, the issue\'s ids, each exactly the SPEC shape', () => {
    assert.ok(Array.isArray(CATALOG));
    assert.deepEqual(CATALOG.map((e) => e.id), IDS);
    for (const e of CATALOG) {
      // Python entries also carry their lock (docs/catalog.md).
      // and an entry may fix environment variables of its server (env).
      const keys = [...KEYS, ...(e.runtime === 'python' ? ['lock'] : []), ...(e.env ? ['env'] : [])];
      if (e.env) for (const v of Object.values(e.env)) assert.equal(typeof v, 'string', `${e.id}: env`);
      assert.deepEqual(Object.keys(e).sort(), [...keys].sort(), `${e.id}: keys`);
      for (const k of ['id', 'name', 'description', 'package']) {
        assert.ok(typeof e[k] === 'string' && e[k].length > 0, `${e.id}: ${k}`);
      }
      assert.match(e.version, SEMVER, `${e.id}: an exact version`);
      assert.ok(['MIT', 'Apache-2.0'].includes(e.license), `${e.id}: license ${e.license}`);
      assert.ok(['node', 'python'].includes(e.runtime), `${e.id}: runtime ${e.runtime}`);
      assert.ok(Array.isArray(e.command) && e.command.length > 0, `${e.id}: command`);
      for (const a of e.command) assert.ok(typeof a === 'string' && a.length > 0, `${e.id}: command ${JSON.stringify(e.command)}`);
      assert.ok(Array.isArray(e.egress), `${e.id}: egress`);
      for (const h of e.egress) assert.match(h, /^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$/, `${e.id}: egress host ${h}`);
      assert.ok(e.fingerprint === null || HEX16.test(e.fingerprint), `${e.id}: fingerprint ${e.fingerprint}`);
      assert.ok(Array.isArray(e.settings), `${e.id}: settings`);
      const envs = new Set();
      for (const s of e.settings) {
        assert.deepEqual(Object.keys(s).sort(), [...SETTING_KEYS].sort(), `${e.id}: setting keys`);
        assert.match(s.env, /^[A-Z][A-Z0-9_]*$/, `${e.id}: setting name`);
        assert.equal(typeof s.secret, 'boolean');
        assert.equal(typeof s.required, 'boolean');
        assert.ok(typeof s.description === 'string' && s.description.length > 0, `${e.id}.${s.env}: description`);
        assert.ok(!envs.has(s.env), `${e.id}: ${s.env} twice`);
        envs.add(s.env);
      }
    }
  });

  test('commands follow the daemon\'s conventions (see docs/catalog.md)', () => {
    for (const e of CATALOG) {
      if (e.runtime === 'node') {
        // A bin of the package, found on PATH under /workspace/mcp/<id>/node_modules/.bin.
        assert.ok(!['node', 'npx', 'npm', 'sh'].includes(e.command[0]) && !e.command[0].includes('/'),
          `${e.id}: command[0] is the package's bin name, not ${e.command[0]}`);
      } else {
        assert.deepEqual(e.command.slice(0, 2), ['python3', '-m'], `${e.id}: python3 -m MODULE`);
        assert.match(e.command[2], /^[a-z_][a-z0-9_]*$/);
        // The lock: every package pinned to one version with the sha256 of its wheel,
        // the server's own package among them at the catalog's version.
        assert.ok(Array.isArray(e.lock) && e.lock.length > 0, `${e.id}: lock`);
        // A package may name the extras others ask of it ("httpx[socks]"): pip
        // with --require-hashes refuses an extra that no lock line pins.
        for (const l of e.lock) assert.match(l, /^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\[[a-z0-9-]+(,[a-z0-9-]+)*\])?==[^\s=]+ --hash=sha256:[0-9a-f]{64}$/, `${e.id}: lock line ${l}`);
        assert.ok(e.lock.some((l) => l.startsWith(`${e.package}==${e.version} `)), `${e.id}: the lock pins ${e.package}==${e.version}`);
        const names = e.lock.map((l) => l.split('==')[0].replace(/\[.*\]$/, ''));
        assert.equal(new Set(names).size, names.length, `${e.id}: one version per package`);
      }
      // "${ENV}" arguments take a setting's value as given: only settings that are not secrets.
      for (const a of e.command) {
        const m = ENV_ARG.exec(a);
        if (!m) continue;
        const s = e.settings.find((x) => x.env === m[1]);
        assert.ok(s, `${e.id}: ${a} names no setting`);
        assert.equal(s.secret, false, `${e.id}: ${a} would put a secret's value on a command line`);
        assert.equal(s.required, true, `${e.id}: ${a} must be required`);
      }
    }
    const byId = Object.fromEntries(CATALOG.map((e) => [e.id, e]));
    assert.deepEqual(byId.filesystem.command, ['mcp-server-filesystem', '/workspace']);
    assert.deepEqual(byId.memory.command, ['mcp-server-memory']);
    // Postgres: the connection string is the one setting passed as given (a database
    // password cannot be swapped by an HTTPS proxy).
    const pg = byId.postgres.settings;
    assert.equal(pg.length, 1);
    assert.equal(pg[0].secret, false);
    assert.equal(pg[0].required, true);
    assert.deepEqual(byId.postgres.command, ['mcp-server-postgres', `\${${pg[0].env}}`]);
    for (const e of CATALOG) {
      if (e.id === 'postgres') continue;
      for (const s of e.settings) {
        if (/TOKEN|API_KEY/.test(s.env)) assert.equal(s.secret, true, `${e.id}.${s.env} is a secret`);
      }
    }
    assert.ok(byId.playwright.command.includes('--headless'), 'the browser runs headless');
    assert.deepEqual(byId.github.egress, [GITHUB]);
    assert.deepEqual(byId.github.settings.map((s) => [s.env, s.secret, s.required]),
      [['GITHUB_PERSONAL_ACCESS_TOKEN', true, true]]);
  });
});

// ---------------------------------------------------------------- the API

describe('GET /v1/mcp/catalog', { skip: needRoot }, () => {
  let d;
  before(async () => {
    d = await startDaemon({ prefix: 'runtime-catalog-' });
  });
  after(async () => {
    await stopDaemon(d);
  });

  test('serves the 14 entries of catalog/servers.json', async () => {
    const r = await d.api('GET', '/v1/mcp/catalog');
    assert.equal(r.status, 200, r.text);
    assert.ok(Array.isArray(r.body.data), r.text);
    assert.equal(r.body.data.length, 14);
    assert.deepEqual(r.body.data.map((e) => e.id).sort(), [...IDS].sort());
    for (const e of r.body.data) {
      assert.match(e.version, SEMVER, `${e.id}: exact version`);
      assert.ok(['MIT', 'Apache-2.0'].includes(e.license), `${e.id}: license ${e.license}`);
      assert.ok(Array.isArray(e.command) && e.command.length > 0, `${e.id}: command`);
      const want = CATALOG.find((x) => x.id === e.id);
      for (const k of KEYS) assert.deepEqual(e[k], want[k], `${e.id}.${k} as in catalog/servers.json`);
    }
  });

  test('without the API key: 401', async () => {
    const r = await d.api('GET', '/v1/mcp/catalog', undefined, { key: null });
    assert.equal(r.status, 401, r.text);
  });

  test('runtime sandbox mcp catalog --json prints the same', async () => {
    const r = await d.cli(['sandbox', 'mcp', 'catalog', '--json']);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout).data.map((e) => e.id).sort(), [...IDS].sort());
  });
});

// ---------------------------------------------------------------- installs and the GitHub secret

describe('catalog servers in sandboxes', { skip: needNet }, () => {
  let dir, d, registry;
  const token = crypto.randomBytes(8).toString('hex');

  before(async () => {
    registry = registryHost();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'runtime-catalog-net-'));
    fs.chmodSync(dir, 0o711); // the unprivileged server must reach --upstream-ca
    // The host's own network namespace: the installs need the registries on the Internet.
    d = new EgressDaemon(dir);
    await d.start();
  });
  after(async () => {
    try {
      await d?.close({ keepDir: true });
    } finally {
      if (dir && !process.env.RUNTIME_E2E_KEEP) fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('every catalog server installs and is ready in one sandbox without Internet; installs reach only the registries',
    { timeout: 40 * 60 * 1000 }, async (t) => {
      const servers = [];
      for (const e of CATALOG) {
        const spec = { id: e.id, secrets: {}, env: {} };
        for (const s of e.settings.filter((x) => x.required)) {
          if (s.secret) {
            const name = `CAT_${s.env}`;
            const put = await d.api('PUT', `/v1/egress-secrets/${name}`, { value: `dummy-${e.id}-${token}`, hosts: e.egress.length ? e.egress : ['dummy.invalid'] });
            assert.equal(put.status, 201, put.text);
            spec.secrets[s.env] = name;
          } else {
            spec.env[s.env] = dummyEnv(s);
          }
        }
        servers.push(spec);
      }
      const sb = await d.create({ memoryMiB: 4096, cpus: 2, diskMiB: 4096, network: { internet: false, allow: [] } });
      assert.deepEqual(sb.network, { internet: false, allow: [] });
      // The registry the daemon opens is the one npm in the sandbox is configured with.
      const cfg = await d.exec(sb.id, ['npm', 'config', 'get', 'registry']);
      if (cfg.exitCode === 0 && /^https?:\/\//.test(cfg.stdout.trim())) registry = new URL(cfg.stdout.trim()).hostname;
      const started = Date.now();
      const post = await d.api('POST', `/v1/sandboxes/${sb.id}/mcp`, { servers });
      assert.equal(post.status, 202, post.text);
      t.diagnostic(`registry ${registry}; ${CATALOG.length} servers: ${CATALOG.map((e) => e.id).join(' ')}`);
      const st = await mcpSettled(d, sb.id, 30 * 60 * 1000);
      t.diagnostic(`all settled after ${Math.round((Date.now() - started) / 1000)} s`);

      const problems = [];
      for (const e of CATALOG) {
        const s = st.servers.find((x) => x.id === e.id || x.name === e.id);
        if (!s) {
          problems.push(`${e.id}: not listed`);
          continue;
        }
        t.diagnostic(`${showServer(s)}: ${s.tools?.length ?? 0} tools, fingerprint ${s.fingerprint}`);
        if (s.status !== 'ready') problems.push(showServer(s));
        else if (!Array.isArray(s.tools) || s.tools.length === 0) problems.push(`${e.id}: ready with no tools`);
        else if (e.fingerprint && s.fingerprint !== e.fingerprint) {
          problems.push(`${e.id}: fingerprint ${s.fingerprint}, catalog has ${e.fingerprint}`);
        }
        if (!s.url) problems.push(`${e.id}: no url`);
      }
      assert.deepEqual(problems, [], `servers not ready:\n  ${problems.join('\n  ')}`);
      assert.match(st.headers?.Authorization ?? '', /^Bearer \S+$/);

      // The sandbox never had Internet: whatever was allowed out was the daemon's
      // installs, and they reached the registry only.
      const events = await allEvents(d, sb.id);
      const allowed = events.filter((e) => e.kind === 'egress.allowed');
      const show = allowed.map((e) => `${e.host}:${e.port}`);
      assert.ok(allowed.some((e) => e.host === registry), `no egress.allowed to ${registry}: ${JSON.stringify(events.slice(0, 50))}`);
      assert.deepEqual([...new Set(allowed.map((e) => e.host))].sort(), [registry, ...PYPI_HOSTS].sort(), show.join('\n'));
      const installed = await d.exec(sb.id, ['sh', '-c', 'ls /workspace/mcp']);
      assert.deepEqual(installed.stdout.split('\n').filter(Boolean).sort(), CATALOG.map((e) => e.id).sort());
      await d.remove(sb.id);
    });

});

