// Shared setup for tests/catalog/api-servers.test.mjs: the real API hosts of the
// catalog's API servers, faked in a network namespace this test makes.
//
//   host namespace    runtimed (it must reach the npm registry for the installs)
//                     and 198.51.100.162 on the host end of a veth pair
//   rt-cata-PID-...   198.51.100.161 (its peer): fake-apis.mjs on :443, one
//                     certificate per API host name (chosen by SNI), all signed by
//                     a test CA
//
// The daemon is started with `--resolve HOST:443:198.51.100.161` for every API host
// and `--upstream-ca` of the test CA, so the sandbox's requests to the real names
// (api.github.com, ...) reach the fake and nothing else. TEST-NET-2 (198.51.100.0/24)
// is never routed on the Internet; the link is point to point (HostLink), so it
// captures no other address.
//
// Nothing here sleeps for synchronisation: waits poll with deadlines.

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { HostLink } from '../egress/lib.mjs';
import { SecretsDaemon, Upstream } from '../secrets/lib.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const FAKE_JS = path.join(HERE, 'fake-apis.mjs');

export const FAKE_V4 = '198.51.100.161';
export const HOST_V4 = '198.51.100.162';

/** A test CA and one certificate per host name (SAN = that name), with the openssl CLI. */
export function makeCerts(dir, hosts) {
  const o = (args) => {
    const r = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`openssl ${args.join(' ')}: ${r.stderr}`);
  };
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  o(['req', '-x509', ...ec, '-days', '2', '-subj', '/CN=runtime catalog API test CA', '-keyout', 'ca.key', '-out', 'ca.pem',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign']);
  fs.chmodSync(path.join(dir, 'ca.pem'), 0o644); // the unprivileged server reads --upstream-ca
  const certs = {};
  for (const host of hosts) {
    o(['req', ...ec, '-subj', `/CN=${host}`, '-keyout', `${host}.key`, '-out', `${host}.csr`]);
    fs.writeFileSync(path.join(dir, `${host}.ext`),
      `subjectAltName=DNS:${host}\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n`);
    o(['x509', '-req', '-in', `${host}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2',
      '-extfile', `${host}.ext`, '-out', `${host}.pem`]);
    certs[host] = { cert: path.join(dir, `${host}.pem`), key: path.join(dir, `${host}.key`) };
  }
  return { ca: path.join(dir, 'ca.pem'), certs };
}

/**
 * The fake APIs: a namespace joined to the host's by a veth pair, fake-apis.mjs in it,
 * its request log in `.upstream.events`. `hosts` is {NAME: {apiKey, marker}}.
 * Removed by teardown() (after(), and on process exit in any case).
 */
export class FakeApis {
  constructor(dir, hosts) {
    this.link = new HostLink('rt-cata', { hostAddr: HOST_V4, nsAddr: FAKE_V4 });
    this.dir = dir;
    this.hosts = hosts;
    this.upstream = null;
  }

  async setup() {
    this.link.setup();
    const { ca, certs } = makeCerts(this.dir, Object.keys(this.hosts));
    this.ca = ca;
    const cfg = path.join(this.dir, 'fake-apis.json');
    const hosts = Object.fromEntries(Object.entries(this.hosts).map(([h, v]) => [h, { ...v, ...certs[h] }]));
    // The real keys are in it: root only.
    fs.writeFileSync(cfg, JSON.stringify({ bind: FAKE_V4, port: 443, hosts }), { mode: 0o600 });
    this.upstream = new Upstream(this.link.node(FAKE_JS, cfg));
    await this.upstream.ready();
    return this;
  }

  /** The requests the fake received, after log position `mark`. */
  requests(mark = 0) {
    return this.upstream.events.slice(mark).filter((e) => e.ev === 'req');
  }

  teardown() {
    this.upstream?.stop();
    this.link.teardown();
  }
}

/**
 * runtimed in the host's network namespace (real DNS, for the registry), every API
 * host pinned to the fake and the test CA trusted upstream. Its API is on loopback.
 */
export async function startApiDaemon(dir, fake) {
  const d = new SecretsDaemon(dir, {
    pins: Object.keys(fake.hosts).map((h) => `${h}:443:${FAKE_V4}`),
    upstreamCa: fake.ca,
  });
  await d.start();
  return d;
}

/** GET .../mcp?wait= until no server is installing or starting (or the deadline). */
export async function mcpSettled(d, id, totalMs) {
  const deadline = Date.now() + totalMs;
  for (;;) {
    const left = Math.max(1, Math.min(600, Math.ceil((deadline - Date.now()) / 1000)));
    const r = await d.api('GET', `/v1/sandboxes/${encodeURIComponent(id)}/mcp?wait=${left}`, undefined,
      { timeoutMs: (left + 60) * 1000 });
    if (r.status !== 200) throw new Error(`GET mcp: HTTP ${r.status} ${r.text}`);
    const pending = r.body.servers.filter((s) => s.status === 'installing' || s.status === 'starting');
    if (!pending.length) return r.body;
    if (Date.now() >= deadline) {
      throw new Error(`still pending after ${totalMs} ms: ${pending.map((s) => `${s.name} ${s.status}`).join(', ')}`);
    }
  }
}

/** A server's state in one line, for messages. */
export const showServer = (s) => s && `${s.name} ${s.status}${s.error ? `: ${s.error}` : ''}` +
  `${s.warnings?.length ? ` warnings: ${JSON.stringify(s.warnings)}` : ''}`;
