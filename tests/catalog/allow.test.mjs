// allow: [] with a catalog server (issue 23, finding 5): the sandbox reaches no host
// but what its catalog MCP servers' entries need, which the gateway adds. The github
// server does its task against a fake api.github.com while the sandbox's allow list is
// empty; another API host (api.notion.com, faked beside it, a catalog host of a server
// this sandbox does not run) is refused until allow is left out (any public host).
//
// The install reaches the npm registry through the daemon, so the daemon lives in the
// host's network namespace (as tests/catalog/api-servers.test.mjs; see lib.mjs).
// RUNTIME_E2E_OFFLINE=1 skips the file; so does not being root.
//
// Nothing here sleeps for synchronisation: waits poll with deadlines.

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { isRoot } from '../e2e/lib.mjs';
import { closeClient, connectClient, resultText } from '../mcp/lib.mjs';
import { FakeApis, mcpSettled, showServer, startApiDaemon } from './lib.mjs';

const needs = (!isRoot() && 'must run as root (runtimed needs it)') ||
  (process.env.RUNTIME_E2E_OFFLINE && 'RUNTIME_E2E_OFFLINE is set (the install needs the npm registry)');

const hex = (n) => crypto.randomBytes(n).toString('hex');
const GITHUB = 'api.github.com';
const OTHER = 'api.notion.com';

describe('allow: [] keeps the catalog servers\' hosts and nothing else', { skip: needs }, () => {
  let dir, fake, d, sb, github, authorization;
  const key = `ghp_${hex(18)}`;
  const marker = `rtmark${hex(8)}`;

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'runtime-catalog-allow-'));
    fs.chmodSync(dir, 0o711); // the unprivileged server must reach --upstream-ca and STATE
    fake = await new FakeApis(dir, {
      [GITHUB]: { apiKey: key, marker },
      [OTHER]: { apiKey: `ntn_${hex(20)}`, marker: `rtmark${hex(8)}` },
    }).setup();
    d = await startApiDaemon(dir, fake);
    await d.putSecret('GH', { value: key, hosts: [GITHUB] });
    sb = await d.create({ memoryMiB: 2048, cpus: 2, diskMiB: 4096, network: { internet: true, allow: [] } });
    const post = await d.api('POST', `/v1/sandboxes/${sb.id}/mcp`,
      { servers: [{ id: 'github', secrets: { GITHUB_PERSONAL_ACCESS_TOKEN: 'GH' } }] });
    assert.equal(post.status, 202, post.text);
    const st = await mcpSettled(d, sb.id, 10 * 60 * 1000);
    github = st.servers.find((s) => s.name === 'github');
    assert.equal(github?.status, 'ready', showServer(github));
    authorization = st.headers.Authorization;
  }, { timeout: 12 * 60 * 1000 });
  after(async () => {
    try {
      await d?.close({ keepDir: true });
    } finally {
      fake?.teardown();
      if (dir && !process.env.RUNTIME_E2E_KEEP) fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  /** What the sandbox's resolver says of host: "ok" or the error code. */
  async function resolves(host) {
    const r = await d.exec(sb.id, ['node', '-e',
      'require("dns").lookup(process.argv[1], (e) => console.log(e ? e.code : "ok"))', host]);
    assert.equal(r.exitCode, 0, r.stderr);
    return r.stdout.trim();
  }

  /** search_repositories through the gateway: whether the fake api.github.com answered it. */
  async function githubWorks() {
    const mark = fake.upstream.events.length;
    const client = await connectClient(github.url, authorization, { name: 'runtime-allow-test', capabilities: {} });
    let result;
    try {
      result = await client.callTool({ name: 'search_repositories', arguments: { query: 'sandbox' } },
        undefined, { timeout: 90000 });
    } finally {
      await closeClient(client);
    }
    const reached = fake.requests(mark).some((r) => r.sni === GITHUB && r.target.startsWith('/search/repositories'));
    return reached && resultText(result).includes(marker);
  }

  test('with allow [] the github server reaches its host; another host is refused', { timeout: 180000 }, async () => {
    assert.deepEqual((await d.api('GET', `/v1/sandboxes/${sb.id}`)).body.network, { internet: true, allow: [] });
    assert.ok(await githubWorks(), 'the github server did its task through its catalog host');
    assert.equal(await resolves(GITHUB), 'ok');
    assert.equal(await resolves(OTHER), 'ENOTFOUND');
    const events = (await d.api('GET', `/v1/sandboxes/${sb.id}/events`)).body;
    assert.ok(events.some((e) => e.kind === 'egress.refused' && e.host === OTHER && e.reason === 'not_allowed'),
      JSON.stringify(events.filter((e) => e.kind.startsWith('egress')).slice(-5)));
  });

  test('without allow any public host is reached; allow [] again closes it', { timeout: 180000 }, async () => {
    await d.setNetwork(sb.id, { internet: true });
    assert.equal(await resolves(OTHER), 'ok');
    await d.setNetwork(sb.id, { internet: true, allow: [] });
    assert.equal(await resolves(OTHER), 'ENOTFOUND');
    assert.ok(await githubWorks(), 'the github server still reaches its host');
  });
});
