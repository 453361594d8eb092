// The private network and the daemon of the local catalog tests
// (local-servers.test.mjs):
//
//   host namespace   runtimed (it reaches the package registries for the installs)
//                    and 198.51.100.182 on the host end of a veth pair
//   rt-catl-PID-...  198.51.100.181 (its peer): the test's web host (HTTP :80) and
//                    PostgreSQL (:5432), which the daemon reaches through --resolve pins
//
// 198.51.100.0/24 is TEST-NET-2: never routed on the Internet, and the egress guard
// lets it through on purpose (src/policy/addr.c), so it stands in for public hosts.
// The link is point to point (HostLink): it captures no other address. Not
// 203.0.113.0/24: this machine's package registries answer from there.

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { EgressDaemon, HostLink } from '../egress/lib.mjs';
import { Client, StreamableHTTPClientTransport } from '../mcp/lib.mjs';

export const UP_V4 = '198.51.100.181';
export const HOST_V4 = '198.51.100.182';
export const PLACEHOLDER = /^RUNTIME_PH_[0-9a-f]{32}$/;

/** One namespace joined to the host's (HostLink), and a temp dir; everything goes
 * in teardown(), or at exit if the test process ends first. */
export class TestNet {
  constructor() {
    this.link = new HostLink('rt-catl', { hostAddr: HOST_V4, nsAddr: UP_V4 });
    this.ns = this.link.ns;
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'runtime-catl-'));
    fs.chmodSync(this.dir, 0o711); // the unprivileged server and postgres traverse it
    this.cleanups = []; // sync kills of what runs in the namespace
    this.onExit = () => this.teardown();
    process.on('exit', this.onExit);
  }

  setup() {
    this.link.setup();
    return this;
  }

  teardown() {
    if (this.done) return;
    this.done = true;
    process.off('exit', this.onExit);
    for (const f of this.cleanups) try { f(); } catch {}
    this.link.teardown(); // whatever still runs inside (a postgres backend) dies with it
    if (!process.env.RUNTIME_E2E_KEEP) fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

/** runtimed in the host's namespace (real DNS for the registries) with --resolve
 * pins for the test hosts; secrets through the API. */
export class LocalDaemon extends EgressDaemon {
  async putSecret(name, spec) {
    const r = await this.api('PUT', `/v1/egress-secrets/${name}`, spec);
    if (r.status !== 200 && r.status !== 201) throw new Error(`PUT secret ${name}: HTTP ${r.status} ${r.text}`);
  }

  /** For the exit hook (no waiting there): SIGKILL the daemon and what it left. */
  killSync() {
    if (!this.proc || this.exited) return;
    for (const p of this.daemonPids()) try { process.kill(p, 'SIGKILL'); } catch {}
    try { this.forceCleanup(); } catch {}
  }

  /** exec that must exit 0. */
  async mustExec(id, argv, opts) {
    const r = await this.exec(id, argv, opts);
    if (r.exitCode !== 0) throw new Error(`${JSON.stringify(argv)}: exit ${r.exitCode}\n${r.stdout}\n${r.stderr}`);
    return r;
  }

  /** GET .../mcp?wait= until no server is installing or starting; the answer. */
  async mcpSettled(id, totalMs) {
    const deadline = Date.now() + totalMs;
    for (;;) {
      const left = Math.max(1, Math.min(600, Math.ceil((deadline - Date.now()) / 1000)));
      const r = await this.api('GET', `/v1/sandboxes/${id}/mcp?wait=${left}`, undefined, { timeoutMs: (left + 60) * 1000 });
      if (r.status !== 200) throw new Error(`GET mcp: HTTP ${r.status} ${r.text}`);
      const pending = r.body.servers.filter((s) => s.status === 'installing' || s.status === 'starting');
      if (!pending.length) return r.body;
      if (Date.now() >= deadline) {
        throw new Error(`still pending after ${totalMs} ms: ${pending.map((s) => `${s.name} ${s.status}`).join(', ')}`);
      }
    }
  }
}

/** An official SDK client connected to a server's gateway URL. */
export async function connect(url, authorization) {
  const client = new Client({ name: 'runtime-catalog-local-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: authorization } },
  }));
  return client;
}

/** The text parts of a tools/call result, joined. */
export function textOf(result) {
  return (result.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

/** "name status: error" for assertion messages. */
export const showServer = (s) => s && `${s.name} ${s.status}${s.error ? `: ${s.error}` : ''}` +
  `${s.warnings?.length ? ` warnings: ${JSON.stringify(s.warnings)}` : ''}`;
