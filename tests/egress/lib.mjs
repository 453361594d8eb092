// Helpers for the egress suite: a private network world for each test file,
// fake upstream servers in it, and a runtimed that lives in it.
//
// The world is two network namespaces joined by a veth pair:
//   "daemon" namespace  198.51.100.254/24, 2001:db8:100::254/64 (veth), loopback
//       runtimed runs here (nsenter --net), so the proxy dials from here; its API
//       is reached through its unix socket. The only routes lead to the upstream
//       namespace, so even a broken proxy could reach nothing real. (The IPv6
//       address is there so that the daemon's resolver asks for AAAA records too.)
//   "upstream" namespace  198.51.100.1, .2, .53 /24 and 2001:db8:100::1/64 (veth),
//       plus every blocked address the guard tests name (10.0.0.1,
//       169.254.169.254, fd00:ec2::254, ...) on its loopback, routed to from the
//       daemon namespace. Its servers listen on the wildcard address, so if the
//       proxy ever dialled one of those addresses the upstream would log it.
// A trap server in the daemon namespace listens on [::]:80/443 and catches dials
// to loopback, the unspecified address and the daemon's own address.
//
// Nothing here sleeps for synchronisation: waits poll with deadlines.

import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { Daemon, RUNTIMED, apiAnswer, delay, pidAlive, waitFor } from '../e2e/lib.mjs';

export { delay, waitFor };

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const UPSTREAM_JS = path.join(HERE, 'upstream.mjs');
export const INSIDE_JS = path.join(HERE, 'inside.mjs');

export const DAEMON_V4 = '198.51.100.254';
export const UP_V4 = '198.51.100.1';
export const UP2_V4 = '198.51.100.2';
export const DNS_V4 = '198.51.100.53';
const DAEMON_V6 = '2001:db8:100::254';
const UP_V6 = '2001:db8:100::1';

/** Blocked addresses made reachable in the upstream namespace (a dial shows up there). */
export const TRAP_V4 = [
  '10.0.0.1', '172.16.0.1', '172.31.255.254', '192.168.1.1', '100.64.0.1', '100.100.100.200',
  '100.127.255.254', '169.254.169.254', '168.63.129.16', '192.0.0.1', '192.0.0.170',
  '192.88.99.1', '198.18.0.1', '198.19.255.254', '240.0.0.1',
];
export const TRAP_V6 = [
  'fd00:ec2::254', 'fc00::1', 'fd12:3456::1', 'fe80::a9fe:a9fe', '2001:db8::1', '100::1',
  '64:ff9b::7f00:1', '64:ff9b::a9fe:a9fe', '64:ff9b:1::1', '2002:a9fe:a9fe::1', '2002:7f00:1::1',
  '2001:0:4136:e378:8000:63bf:80ff:fffe', '::7f00:1', '::ffff:0:a9fe:a9fe', '3fff::1',
  '2001:2::1', '2001:10::1', 'fec0::1',
];

export function ip(args) {
  const r = spawnSync('ip', args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`ip ${args.join(' ')}: ${r.stderr.trim()}`);
  return r.stdout;
}

/** Removes namespaces named `<prefix>-<pid>-...` whose test process died before its cleanup. */
export function sweepStale(prefix = 'rt-eg[du]') {
  let list = '';
  try {
    list = ip(['netns', 'list']);
  } catch {
    return;
  }
  for (const line of list.split('\n')) {
    const m = new RegExp(`^(${prefix}-(\\d+)-\\w+)`).exec(line);
    if (!m || pidAlive(Number(m[2]))) continue;
    // Its fake servers and daemon, started by that test process, die with it.
    const pids = spawnSync('ip', ['netns', 'pids', m[1]], { encoding: 'utf8' }).stdout ?? '';
    for (const p of pids.split('\n').filter(Boolean)) try { process.kill(Number(p), 'SIGKILL'); } catch {}
    spawnSync('ip', ['netns', 'del', m[1]]);
  }
}

/**
 * A network namespace joined to the host's by a veth pair with point-to-point
 * addresses (hostAddr on the host end, nsAddr inside): a /32 route each way, so
 * no other address of the range is captured (the package registries may live at
 * other addresses of a TEST-NET on this machine). Test hosts run inside with
 * `ip netns exec NS ...`. Namespaces named PREFIX-PID-... whose test process died
 * are swept first; teardown() (or process exit) kills what runs inside and removes
 * the namespace, which takes the veth pair with it.
 */
export class HostLink {
  constructor(prefix, { hostAddr, nsAddr }) {
    sweepStale(prefix);
    const tag = `${process.pid}-${Math.random().toString(36).slice(2, 6)}`;
    this.ns = `${prefix}-${tag}`;
    const short = prefix.replace(/^rt-/, '').slice(0, 4);
    this.vethHost = `v${short}${process.pid % 1e6}h${tag.slice(-2)}`.slice(0, 15);
    this.vethNs = `v${short}${process.pid % 1e6}n${tag.slice(-2)}`.slice(0, 15);
    this.hostAddr = hostAddr;
    this.nsAddr = nsAddr;
    this.onExit = () => this.teardown();
    process.on('exit', this.onExit);
  }

  setup() {
    ip(['netns', 'add', this.ns]);
    ip(['link', 'add', this.vethHost, 'type', 'veth', 'peer', 'name', this.vethNs, 'netns', this.ns]);
    ip(['addr', 'add', this.hostAddr, 'peer', this.nsAddr, 'dev', this.vethHost]);
    ip(['link', 'set', this.vethHost, 'up']);
    ip(['-n', this.ns, 'link', 'set', 'lo', 'up']);
    ip(['-n', this.ns, 'addr', 'add', this.nsAddr, 'peer', this.hostAddr, 'dev', this.vethNs]);
    ip(['-n', this.ns, 'link', 'set', this.vethNs, 'up']);
    return this;
  }

  /** `ip` arguments that run a node script inside (for Upstream in tests/secrets/lib.mjs). */
  node(script, ...args) {
    return ['netns', 'exec', this.ns, process.execPath, script, ...args];
  }

  teardown() {
    if (this.done) return;
    this.done = true;
    process.off('exit', this.onExit);
    const pids = spawnSync('ip', ['netns', 'pids', this.ns], { encoding: 'utf8' }).stdout ?? '';
    for (const p of pids.split('\n').filter(Boolean)) try { process.kill(Number(p), 'SIGKILL'); } catch {}
    spawnSync('ip', ['netns', 'del', this.ns]);
  }
}

/** A line-oriented JSON event reader over a child process's stdout. */
class EventProc {
  constructor(name, cmd, args) {
    this.name = name;
    this.events = [];
    this.stderr = '';
    this.exited = null;
    this.proc = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let buf = '';
    this.proc.stdout.on('data', (d) => {
      buf += d.toString('utf8');
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        try {
          const e = JSON.parse(line);
          e.t = BigInt(e.t);
          this.events.push(e);
        } catch {
          this.stderr += `unparsed: ${line}\n`;
        }
      }
    });
    this.proc.stderr.on('data', (d) => {
      this.stderr += d.toString('utf8');
    });
    this.proc.on('exit', (code, signal) => {
      this.exited = { code, signal };
    });
  }

  async ready() {
    await waitFor(() => {
      if (this.exited) throw Object.assign(new Error(`${this.name} exited: ${this.stderr}`), { fatal: true });
      if (this.events.some((e) => e.ev === 'failed')) throw new Error(`${this.name} failed: ${JSON.stringify(this.events)}`);
      return this.events.some((e) => e.ev === 'listening');
    }, { timeoutMs: 10000, what: `${this.name} to listen` });
  }

  /** Events matching pred (an object of fields, or a function). */
  find(pred) {
    const f = typeof pred === 'function' ? pred : (e) => Object.entries(pred).every(([k, v]) => e[k] === v);
    return this.events.filter(f);
  }

  waitFor(pred, what, timeoutMs = 10000) {
    return waitFor(() => this.find(pred)[0], { timeoutMs, what: `${this.name}: ${what}` });
  }

  /** TCP connections as {conn, req?, close?}, for inspection. */
  conns() {
    return this.find({ ev: 'conn' }).map((c) => ({
      ...c,
      req: this.find({ ev: 'req', id: c.id })[0],
      close: this.find({ ev: 'close', id: c.id })[0],
    }));
  }

  stop() {
    if (!this.exited) try { this.proc.kill('SIGKILL'); } catch {}
  }
}

/** Makes a self-signed test CA and a server certificate for names, with openssl. */
function makeCerts(dir, names) {
  const o = (args) => {
    const r = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`openssl ${args.join(' ')}: ${r.stderr}`);
  };
  o(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2',
    '-subj', '/CN=runtime egress test CA', '-keyout', 'ca.key', '-out', 'ca.pem',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign']);
  o(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-subj', `/CN=${names[0]}`,
    '-keyout', 'server.key', '-out', 'server.csr']);
  fs.writeFileSync(path.join(dir, 'ext.cnf'),
    `subjectAltName=${names.map((n) => `DNS:${n}`).join(',')}\nextendedKeyUsage=serverAuth\n`);
  o(['x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2',
    '-extfile', 'ext.cnf', '-out', 'server.pem']);
  return { ca: path.join(dir, 'ca.pem'), cert: path.join(dir, 'server.pem'), key: path.join(dir, 'server.key') };
}

/** runtimed in a given network namespace (or the host's), with --resolve pins and
 * --nameserver, spoken to over its unix socket. */
export class EgressDaemon extends Daemon {
  constructor(dir, { netns = null, pins = [], nameserver = null, wrap = [] } = {}) {
    super(dir);
    this.netns = netns;
    this.pins = pins;
    this.nameserver = nameserver;
    this.wrap = wrap; // a command that execs the rest, e.g. prlimit --nofile=1024:1024
  }

  args() {
    const a = super.args();
    // In the host's namespace without a fake nameserver (the npm test), resolve
    // for real: drop the base class's dead nameserver.
    if (!this.netns && !this.nameserver) a.splice(a.indexOf('--nameserver'), 2);
    for (const p of this.pins) a.push('--resolve', p);
    if (this.nameserver) a.push('--nameserver', this.nameserver);
    return a;
  }

  async start(opts) {
    if (!this.netns) return super.start(opts);
    this.port = 7070; // inside its own namespace: nothing else listens there
    const logFd = fs.openSync(this.logFile, 'a');
    // nsenter enters only the network namespace and execs runtimed in place,
    // so the pid we hold is the keeper's, as with a plain spawn.
    const argv = [...this.wrap, 'nsenter', `--net=/run/netns/${this.netns}`, RUNTIMED, ...this.args()];
    this.proc = spawn(argv[0], argv.slice(1), { stdio: ['ignore', logFd, logFd], detached: true });
    fs.closeSync(logFd);
    this.exited = null;
    const proc = this.proc;
    proc.on('exit', (code, signal) => {
      if (this.proc === proc) this.exited = { code, signal };
    });
    await waitFor(async () => {
      if (this.exited) throw new Error(`runtimed exited (${JSON.stringify(this.exited)}):\n${this.log()}`);
      if (!fs.existsSync(path.join(this.stateDir, 'admin.key')) || !fs.existsSync(this.socket)) return false;
      const r = await this.api('GET', '/v1/sandboxes', undefined, { timeoutMs: 1000 });
      return r.status === 200;
    }, { timeoutMs: 15000, what: `runtimed in ${this.netns} to answer on ${this.socket}` });
    return this;
  }

  /** The API over the unix socket when the daemon lives in its own namespace. */
  api(method, p, body, { key, raw, headers = {}, timeoutMs = 120000 } = {}) {
    if (!this.netns) return super.api(method, p, body, { key, raw, headers, timeoutMs });
    const { headers: h, payload } = this.apiRequest(body, { key, raw, headers });
    if (payload !== undefined) h['Content-Length'] = Buffer.byteLength(payload);
    return new Promise((resolve, reject) => {
      const req = http.request({ socketPath: this.socket, method, path: p, headers: h, timeout: timeoutMs }, (res) => {
        const chunks = [];
        res.on('data', (d) => chunks.push(d));
        res.on('end', () => resolve(apiAnswer(res.statusCode, Buffer.concat(chunks), res.headers)));
        res.on('error', reject);
      });
      req.on('timeout', () => req.destroy(new Error(`${method} ${p}: no answer in ${timeoutMs} ms`)));
      req.on('error', reject);
      req.end(payload);
    });
  }

  async putFile(id, file, data) {
    const r = await this.api('PUT', `/v1/sandboxes/${id}/files?path=${encodeURIComponent(file)}`, undefined, { raw: data });
    if (r.status !== 204) throw new Error(`PUT file ${file}: HTTP ${r.status} ${r.text}`);
  }

  async getFile(id, file) {
    const r = await this.api('GET', `/v1/sandboxes/${id}/files?path=${encodeURIComponent(file)}`);
    return r.status === 200 ? r.buf.toString('utf8') : null;
  }

  async events(id, after = 0) {
    const r = await this.api('GET', `/v1/sandboxes/${id}/events?after=${after}`);
    if (r.status !== 200) throw new Error(`events: HTTP ${r.status} ${r.text}`);
    return r.body;
  }

  async setNetwork(id, network) {
    const r = await this.api('PUT', `/v1/sandboxes/${id}/network`, network);
    if (r.status !== 200) throw new Error(`PUT network: HTTP ${r.status} ${r.text}`);
    return r.body;
  }

  /** A sandbox with the inside.mjs helper (and the test CA) in /workspace; isolation:
   * its driver (else the daemon's, RUNTIME_DRIVER's). */
  async sandbox(network, { ca, isolation } = {}) {
    const sb = await this.create({ network, ...(isolation && { isolation }) });
    await this.putFile(sb.id, '/workspace/inside.mjs', fs.readFileSync(INSIDE_JS));
    if (ca) await this.putFile(sb.id, '/workspace/ca.pem', fs.readFileSync(ca));
    return sb;
  }

  /** Runs inside.mjs MODE ARG in the sandbox; returns its parsed JSON output. */
  async inside(id, mode, arg, { env, timeoutMs = 30000 } = {}) {
    const r = await this.exec(id, ['node', '/workspace/inside.mjs', mode, JSON.stringify(arg)], { env, timeoutMs });
    if (r.exitCode !== 0) throw new Error(`inside.mjs ${mode}: exit ${r.exitCode}: ${r.stderr}${r.stdout}`);
    try {
      return JSON.parse(r.stdout);
    } catch {
      throw new Error(`inside.mjs ${mode}: not JSON: ${r.stdout} ${r.stderr}`);
    }
  }

  /** Starts inside.mjs MODE ARG in the background (it outlives the exec). */
  async insideBackground(id, mode, arg) {
    const r = await this.exec(id, ['sh', '-c', 'node /workspace/inside.mjs "$0" "$1" >"$2" 2>&1 </dev/null &',
      mode, JSON.stringify(arg), `/workspace/${mode}.out`]);
    if (r.exitCode !== 0) throw new Error(`background ${mode}: ${r.stderr}`);
  }
}

/** The network world of one test file; see the top of this file. */
/**
 * Two network namespaces joined by a veth pair, made by a test and removed with
 * everything in them: the daemon's (`dns`) and the fake upstream servers' (`uns`),
 * and a temp dir. `kind` names them (rt-<kind>d-PID-...; a stale pair of a dead
 * test process is swept first).
 */
export class NamespacePair {
  constructor(kind, dirPrefix) {
    sweepStale(`rt-${kind}[du]`);
    const tag = `${process.pid}-${Math.random().toString(36).slice(2, 6)}`;
    this.dns = `rt-${kind}d-${tag}`;
    this.uns = `rt-${kind}u-${tag}`;
    this.vethD = `v${kind}${process.pid % 1e6}d${tag.slice(-2)}`.slice(0, 15);
    this.vethU = `v${kind}${process.pid % 1e6}u${tag.slice(-2)}`.slice(0, 15);
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), dirPrefix));
    fs.chmodSync(this.dir, 0o711); // the unprivileged server must traverse it
    this.daemon = null;
    this.upstream = null;
    this.onExit = () => this.teardownSync();
    process.on('exit', this.onExit);
  }

  /** Makes both namespaces and the veth pair, loopback up; returns `ip -n` runners
   * for each side (the caller adds addresses and sets the veth ends up). */
  makeNamespaces() {
    ip(['netns', 'add', this.dns]);
    ip(['netns', 'add', this.uns]);
    ip(['link', 'add', this.vethD, 'netns', this.dns, 'type', 'veth', 'peer', 'name', this.vethU, 'netns', this.uns]);
    const d = (args) => ip(['-n', this.dns, ...args]);
    const u = (args) => ip(['-n', this.uns, ...args]);
    d(['link', 'set', 'lo', 'up']);
    u(['link', 'set', 'lo', 'up']);
    return { d, u };
  }

  async teardown() {
    try {
      if (this.daemon) await this.daemon.close({ keepDir: true });
    } finally {
      this.teardownSync();
    }
  }

  teardownSync() {
    if (this.done) return;
    this.done = true;
    process.off('exit', this.onExit);
    if (this.daemon?.proc && !this.daemon.exited) {
      for (const p of this.daemon.daemonPids()) try { process.kill(p, 'SIGKILL'); } catch {}
      try { this.daemon.forceCleanup(); } catch {}
    }
    this.upstream?.stop();
    this.trap?.stop();
    spawnSync('ip', ['netns', 'del', this.dns]);
    spawnSync('ip', ['netns', 'del', this.uns]);
    if (!process.env.RUNTIME_E2E_KEEP) fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

export class World extends NamespacePair {
  constructor({ pins = [], dns = null, traps = true, wrap = [] } = {}) {
    super('eg', 'runtime-egress-');
    this.wrap = wrap;
    this.pins = pins;
    this.dnsAnswers = dns;
    this.traps = traps;
    this.trap = null;
  }

  async setup() {
    const { d, u } = this.makeNamespaces();
    d(['addr', 'add', `${DAEMON_V4}/24`, 'dev', this.vethD]);
    d(['addr', 'add', `${DAEMON_V6}/64`, 'dev', this.vethD, 'nodad']);
    for (const a of [UP_V4, UP2_V4, DNS_V4]) u(['addr', 'add', `${a}/24`, 'dev', this.vethU]);
    u(['addr', 'add', `${UP_V6}/64`, 'dev', this.vethU, 'nodad']);
    d(['link', 'set', this.vethD, 'up']);
    u(['link', 'set', this.vethU, 'up']);
    if (this.traps) {
      for (const a of TRAP_V4) {
        u(['addr', 'add', `${a}/32`, 'dev', 'lo']);
        d(['route', 'add', `${a}/32`, 'via', UP_V4]);
      }
      for (const a of TRAP_V6) {
        u(['addr', 'add', `${a}/128`, 'dev', 'lo', 'nodad']);
        if (a.startsWith('fe80:')) d(['-6', 'route', 'add', `${a}/128`, 'via', UP_V6, 'dev', this.vethD]);
        else d(['-6', 'route', 'add', `${a}/128`, 'via', UP_V6]);
      }
    }
    this.certs = makeCerts(this.dir, ['example.test', '*.example.test', 'other.test', 'forbidden.test']);
    const upCfg = path.join(this.dir, 'upstream.json');
    fs.writeFileSync(upCfg, JSON.stringify({
      tcp: { http: [80], https: [443], stream: [7000] },
      tls: { cert: this.certs.cert, key: this.certs.key },
      udp: [443, 9999, 5353],
      dns: this.dnsAnswers ? { bind: DNS_V4, answers: this.dnsAnswers } : { bind: DNS_V4, answers: {} },
    }));
    this.upstream = new EventProc('upstream', 'ip', ['netns', 'exec', this.uns, process.execPath, UPSTREAM_JS, upCfg]);
    const trapCfg = path.join(this.dir, 'trap.json');
    fs.writeFileSync(trapCfg, JSON.stringify({
      tcp: { http: [80, 8080], https: [443], stream: [7000] },
      tls: { cert: this.certs.cert, key: this.certs.key },
    }));
    this.trap = new EventProc('daemon-namespace trap', 'ip', ['netns', 'exec', this.dns, process.execPath, UPSTREAM_JS, trapCfg]);
    await this.upstream.ready();
    await this.trap.ready();
    this.daemon = new EgressDaemon(this.dir, { netns: this.dns, pins: this.pins, nameserver: `${DNS_V4}:53`,
      wrap: this.wrap });
    await this.daemon.start();
    return this;
  }

  /** Connections the proxy made to anything but the given upstream addresses. */
  strayConnections(allowedLocal = [UP_V4, UP2_V4]) {
    const norm = (a) => String(a).replace(/^::ffff:/, '');
    const up = this.upstream.find({ ev: 'conn' }).filter((c) => !allowedLocal.includes(norm(c.local)));
    const trapped = this.trap.find({ ev: 'conn' });
    return [...up.map((c) => `upstream ${c.local}:${c.localPort}`), ...trapped.map((c) => `daemon namespace ${c.local}:${c.localPort}`)];
  }
}

/** Refusal events as "host:port reason stage", for readable assertions. */
export function showEvents(events) {
  return events.map((e) => `${e.kind} ${e.host}:${e.port} ${e.reason ?? e.address} ${e.stage ?? ''}`.trim());
}

export function msSince(t0, t1) {
  return Number(t1 - t0) / 1e6;
}

export function isRoot() {
  return typeof process.getuid === 'function' && process.getuid() === 0;
}
