// Python catalog servers are installed from binary wheels only, from the catalog's
// lock, while the sandbox reaches only the index pip in it is configured with.
//
//   sdist only    the sandbox names (PIP_INDEX_URL) an index that has only source
//                 distributions of every package of the time server's lock. The
//                 install fails with an error that says so; no package code ran (the
//                 sdists' setup.py would write /workspace/SDIST_RAN, and none was even
//                 downloaded); the index is the only host the sandbox reached.
//
// The index lives in a namespace of its own linked to the host's (HostLink, on
// TEST-NET-2); the daemon pins pypi.test to it with --resolve.
// The real PyPI installs are in catalog.test.mjs. Nothing here sleeps for
// synchronisation: waits poll with deadlines.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { ROOT, isRoot } from '../e2e/lib.mjs';
import { EgressDaemon, HostLink } from '../egress/lib.mjs';
import { Upstream } from '../secrets/lib.mjs';

const INDEX_JS = path.join(ROOT, 'tests', 'mcp', 'fixtures', 'sdist-index.mjs');
const CATALOG = JSON.parse(fs.readFileSync(path.join(ROOT, 'catalog', 'servers.json'), 'utf8'));
const INDEX_V4 = '198.51.100.222';
const HOST_V4 = '198.51.100.221';
const INDEX_HOST = 'pypi.test';

const skip = !isRoot() && 'must run as root (runtimed needs it)';

/** The sdist-only index on INDEX_V4:80, in a namespace linked to the host's. */
class SdistIndex {
  constructor(dir, versions) {
    this.link = new HostLink('rt-pyix', { hostAddr: HOST_V4, nsAddr: INDEX_V4 });
    this.dir = dir;
    this.versions = versions;
  }

  async setup() {
    this.link.setup();
    const cfg = path.join(this.dir, 'index.json');
    fs.writeFileSync(cfg, JSON.stringify({ bind: INDEX_V4, port: 80, versions: this.versions }));
    this.server = new Upstream(this.link.node(INDEX_JS, cfg));
    await this.server.ready();
    return this;
  }

  requests() {
    return this.server.events.filter((e) => e.ev === 'req');
  }

  teardown() {
    this.server?.stop();
    this.link.teardown();
  }
}

describe('Python servers: wheels only', { skip }, () => {
  const entry = CATALOG.find((e) => e.id === 'time');
  // name -> version, from the lock ("name==version --hash=...").
  const versions = Object.fromEntries(entry.lock.map((l) => l.split(' ')[0].split('==')));
  let dir, index, d;

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'runtime-python-'));
    fs.chmodSync(dir, 0o711);
    index = await new SdistIndex(dir, versions).setup();
    d = new EgressDaemon(dir, { pins: [`${INDEX_HOST}:80:${INDEX_V4}`] });
    await d.start();
  });
  after(async () => {
    try {
      await d?.close({ keepDir: true });
    } finally {
      index?.teardown();
      if (dir && !process.env.RUNTIME_E2E_KEEP) fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('an index with only sdists: the install fails saying so, nothing ran, only the index was reached',
    { timeout: 5 * 60 * 1000 }, async () => {
      const sb = await d.create({
        network: { internet: false, allow: [] },
        env: { PIP_INDEX_URL: `http://${INDEX_HOST}/simple`, PIP_TRUSTED_HOST: INDEX_HOST },
      });
      const post = await d.api('POST', `/v1/sandboxes/${sb.id}/mcp`, { servers: [{ id: 'time' }] });
      assert.equal(post.status, 202, post.text);
      const st = await d.api('GET', `/v1/sandboxes/${sb.id}/mcp?wait=240`, undefined, { timeoutMs: 300000 });
      assert.equal(st.status, 200, st.text);
      const s = st.body.servers.find((x) => x.name === 'time');
      assert.equal(s.status, 'failed', JSON.stringify(s));
      assert.match(s.error, /no binary wheel/, s.error);
      assert.match(s.error, /wheels only/, s.error);
      assert.ok(s.error.includes(`http://${INDEX_HOST}/simple`), `the error names the index: ${s.error}`);
      assert.deepEqual(s.tools ?? [], []);

      // pip asked the index for project pages and downloaded nothing.
      const reqs = index.requests();
      assert.ok(reqs.some((r) => r.path.startsWith('/simple/')), `the index was asked: ${JSON.stringify(reqs)}`);
      assert.deepEqual(reqs.filter((r) => r.path.startsWith('/files/')), [], 'no sdist was downloaded');
      // No package code ran, and no server runs.
      const ran = await d.exec(sb.id, ['sh', '-c', 'test -e /workspace/SDIST_RAN && echo ran; ps -eo args']);
      assert.ok(!ran.stdout.includes('ran\n'), 'an sdist setup.py ran');
      assert.ok(!/mcp_server_time/.test(ran.stdout), `a server process runs: ${ran.stdout}`);
      // The venv was made (the one step before the index) and the lock is beside it.
      const lock = await d.getFile(sb.id, '/workspace/mcp/time/requirements.txt');
      assert.equal(lock, `${entry.lock.join('\n')}\n`);

      const events = await d.events(sb.id);
      const reached = [...new Set(events.filter((e) => e.kind === 'egress.allowed').map((e) => e.host))];
      assert.deepEqual(reached, [INDEX_HOST], JSON.stringify(events));
      await d.remove(sb.id);
    });
});
