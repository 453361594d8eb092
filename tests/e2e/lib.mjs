// Helpers for the end-to-end and escape suites: a real runtimed in a fresh temp dir
// on a free loopback port, the real CLI, the HTTP API over TCP, and host-side
// inspection (processes, cgroups, loop devices, mounts) to prove what is left.
//
// Nothing here sleeps for synchronisation: every wait polls a condition with a
// deadline and fails with a message naming what it waited for.

import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import crypto from 'node:crypto';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
// RUNTIME_BUILD picks another build tree, e.g. build/asan (make check runs both).
const BUILD = process.env.RUNTIME_BUILD ? path.resolve(ROOT, process.env.RUNTIME_BUILD) : path.join(ROOT, 'build');
export const RUNTIMED = path.join(BUILD, 'runtimed');
export const RUNTIME = path.join(BUILD, 'runtime');
/** The isolation driver the tests' daemons default to (RUNTIME_DRIVER, else ns). */
export const DRIVER = process.env.RUNTIME_DRIVER || 'ns';
/** Where gVisor's runsc is (scripts/install-runsc). */
export const RUNSC = '/opt/runtime/bin/runsc';

/** Why gvisor sandboxes cannot be tested here, or false: for a test's skip. Under
 * RUNTIME_REQUIRE_ALL (CI) a missing runsc is a failure, not a skip. */
export function gvisorSkip() {
  if (fs.existsSync(RUNSC)) return false;
  if (process.env.RUNTIME_REQUIRE_ALL) {
    throw new Error(`${RUNSC} is missing and RUNTIME_REQUIRE_ALL is set (scripts/install-deps installs it)`);
  }
  return `no gVisor: ${RUNSC} is missing (scripts/install-runsc builds it)`;
}

export const PROBE_SRC = path.join(ROOT, 'tests', 'escape', 'probe.c');

// Host uids: each daemon holds a uid block of its own (src/sandbox/sandbox.h); its
// sandboxes' ranges, its server's and its signer's uids are in STATE/uid-block
// (Daemon.uids()). Every block lies at or above this floor.
export const SANDBOX_UID_FLOOR = 1000000000;

export const delay = (ms) => new Promise((r) => setTimeout(r, ms));

/** Prometheus text -> Map of "name{labels}" -> value. */
export function parseMetrics(text) {
  const m = new Map();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    m.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return m;
}

/** Polls fn() until it returns a truthy value; throws after timeoutMs. */
export async function waitFor(fn, { timeoutMs = 10000, intervalMs = 25, what = 'condition' } = {}) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      if (e && e.fatal) throw e; // no point in waiting any longer
      last = e;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}` +
        (last ? `; last error: ${last.message}` : ''));
    }
    await delay(intervalMs);
  }
}

export async function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** A unique token, for markers that must never be seen where they do not belong. */
export function token(prefix = 'rt') {
  return `${prefix}-${crypto.randomBytes(12).toString('hex')}`;
}

export function isRoot() {
  return typeof process.getuid === 'function' && process.getuid() === 0;
}

/** Runs a program to its end (bounded); returns {code, signal, stdout, stderr}. */
export function run(cmd, args, { input, env, timeoutMs = 60000, encoding = 'utf8', cwd } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env: env ?? process.env, cwd, stdio: ['pipe', 'pipe', 'pipe'] });
    const out = [], err = [];
    child.stdout.on('data', (d) => out.push(d));
    child.stderr.on('data', (d) => err.push(d));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', (e) => { clearTimeout(timer); reject(e); });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const stdout = Buffer.concat(out), stderr = Buffer.concat(err);
      resolve({
        code, signal,
        stdout: encoding === 'buffer' ? stdout : stdout.toString(encoding),
        stderr: stderr.toString('utf8'),
      });
    });
    child.stdin.on('error', () => {}); // the program may exit without reading
    if (input !== undefined) child.stdin.end(input);
    else child.stdin.end();
  });
}

// ---------------------------------------------------------------- host inspection

export function readOr(file, dflt = null, enc = 'utf8') {
  try {
    return fs.readFileSync(file, enc);
  } catch {
    return dflt;
  }
}

/** Host processes as {pid, ppid, uid, cmdline}. */
export function hostProcesses() {
  const procs = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const status = readOr(`/proc/${name}/status`);
    const cmd = readOr(`/proc/${name}/cmdline`, null, null);
    if (status === null || cmd === null) continue;
    const uid = Number((/^Uid:\s+(\d+)/m.exec(status) || [])[1]);
    const ppid = Number((/^PPid:\s+(\d+)/m.exec(status) || [])[1]);
    const state = (/^State:\s+(\S)/m.exec(status) || [])[1];
    const stat = readOr(`/proc/${name}/stat`, '');
    const pgid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
    const cmdline = cmd.toString('utf8').split('\0').filter((s, i, a) => i < a.length - 1 || s).join(' ');
    procs.push({ pid: Number(name), ppid, pgid, uid, state, cmdline, status });
  }
  return procs;
}

/** Live (non-zombie) host processes whose command line contains needle. */
export function processesMatching(needle) {
  return hostProcesses().filter((p) => p.state !== 'Z' && p.cmdline.includes(needle));
}

export function pidAlive(pid) {
  const status = readOr(`/proc/${pid}/status`);
  return status !== null && !/^State:\s+Z/m.test(status);
}

/** The daemon's instance tag: FNV-1a of the state dir's real path (src/daemon/main.c). */
export function instanceName(stateDir) {
  let h = 2166136261;
  for (const b of Buffer.from(fs.realpathSync(stateDir))) {
    h = Math.imul(h ^ b, 16777619) >>> 0;
  }
  return h.toString(16).padStart(8, '0');
}

/** Cgroup dirs under /sys/fs/cgroup/<any>/runtime/ that belong to the daemon of stateDir. */
export function cgroupDirs(stateDir) {
  const tag = instanceName(stateDir) + '-';
  const found = [];
  let hier = [];
  try {
    hier = fs.readdirSync('/sys/fs/cgroup');
  } catch {
    return found;
  }
  // v1 hierarchies and v2 (unified, or the root itself when it is v2).
  const bases = hier.map((h) => path.join('/sys/fs/cgroup', h, 'runtime')).concat(['/sys/fs/cgroup/runtime']);
  for (const base of bases) {
    let names = [];
    try {
      names = fs.readdirSync(base);
    } catch {
      continue;
    }
    for (const n of names) if (n.startsWith(tag)) found.push(path.join(base, n));
  }
  return found;
}

/** Loop devices whose backing file lies in dir. */
export function loopDevicesInto(dir) {
  const real = fs.realpathSync(dir);
  const found = [];
  for (const name of fs.readdirSync('/sys/block')) {
    if (!name.startsWith('loop')) continue;
    const backing = readOr(`/sys/block/${name}/loop/backing_file`);
    if (backing && (backing.startsWith(real + '/') || backing.startsWith(dir + '/'))) {
      found.push(`/dev/${name} -> ${backing.trim()}`);
    }
  }
  return found;
}

/** Mounts (in our mount namespace) whose source or target lies in dir. */
export function mountsOf(dir) {
  const real = fs.realpathSync(dir);
  return readOr('/proc/self/mountinfo', '').split('\n')
    .filter((l) => l.includes(real) || l.includes(dir));
}

// ---------------------------------------------------------------- a sandbox seen from the host

/** The tests' daemons run gvisor sandboxes (RUNTIME_DRIVER=gvisor). Their programs run on
 * gVisor's kernel and are no host processes: on the host a gvisor sandbox is its holder
 * (runtime-init) and runsc's processes (runsc-gofer, runsc-sandbox and its systrap stubs),
 * all in the sandbox's cgroup. A test that looks at a sandbox's programs from the host
 * asks its own ps instead (insideProcesses), or these helpers. */
export const GVISOR = DRIVER === 'gvisor';

/** Host pids in sandbox id's cgroup (every controller's cgroup.procs, together). */
export function sandboxPids(stateDir, id) {
  const pids = new Set();
  for (const dir of cgroupDirs(stateDir).filter((x) => x.endsWith(`-${id}`))) {
    for (const l of readOr(path.join(dir, 'cgroup.procs'), '').split('\n')) if (l) pids.add(Number(l));
  }
  return [...pids].sort((a, b) => a - b);
}

/** The live host processes of sandbox id (those in its cgroup), as hostProcesses() gives them. */
export function sandboxHostProcesses(stateDir, id) {
  const pids = new Set(sandboxPids(stateDir, id));
  return hostProcesses().filter((p) => pids.has(p.pid) && p.state !== 'Z');
}

/** Sandbox id's runtime-init on the host: the ns driver's pid 1, the gvisor driver's holder. */
export function sandboxInit(stateDir, id) {
  return sandboxHostProcesses(stateDir, id).find((p) => p.cmdline === 'runtime-init') ?? null;
}

/** runsc's processes of sandbox id on the host (runsc-gofer, runsc-sandbox, the stubs):
 * everything in its cgroup but the holder. */
export function runscProcesses(stateDir, id) {
  return sandboxHostProcesses(stateDir, id).filter((p) => p.cmdline !== 'runtime-init');
}

/** Where the host reaches the files sandbox id sees at "/": the ns driver's init has
 * pivoted into them; the gvisor driver's holder keeps the host's root and builds them at
 * STATE/sandboxes/ID/root in its mount namespace, where runsc's gofer serves them. */
export function sandboxRootOnHost(stateDir, id) {
  const init = sandboxInit(stateDir, id);
  if (!init) throw new Error(`sandbox ${id} has no runtime-init on the host`);
  if (!GVISOR) return `/proc/${init.pid}/root`;
  return `/proc/${init.pid}/root${fs.realpathSync(stateDir)}/sandboxes/${id}/root`;
}

/** Processes inside sandbox id whose command line contains needle, from its own ps:
 * [{pid (its pid inside), cmdline}]. */
export async function insideProcesses(d, id, needle) {
  const r = await d.exec(id, ['ps', '-eo', 'pid=,args=']);
  if (r.exitCode !== 0) throw new Error(`ps in ${id}: exit ${r.exitCode} ${r.stderr}`);
  return r.stdout.split('\n').map((l) => /^\s*(\d+)\s+(.*)$/.exec(l)).filter(Boolean)
    .map(([, pid, cmdline]) => ({ pid: Number(pid), cmdline })).filter((p) => p.cmdline.includes(needle));
}

// ---------------------------------------------------------------- the daemon

let probeCache = null;

/** Compiles tests/escape/probe.c once per test process; returns the binary's path. */
export function buildProbe(dir) {
  if (probeCache && fs.existsSync(probeCache)) return probeCache;
  const out = path.join(dir, 'probe');
  const r = spawnSync('cc', ['-O2', '-Wall', '-o', out, PROBE_SRC], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`cannot compile probe.c: ${r.stderr}`);
  probeCache = out;
  return out;
}

/** An API answer: {status, body (parsed JSON or null), text, buf, headers}. */
export function apiAnswer(status, buf, headers) {
  const text = buf.toString('utf8');
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {}
  return { status, body: json, text, buf, headers };
}

export class Daemon {
  constructor(dir) {
    this.dir = dir;
    this.stateDir = path.join(dir, 'state');
    this.socket = path.join(dir, 'api.sock');
    this.logFile = path.join(dir, 'runtimed.log');
    this.port = 0;
    this.proc = null;
    this.exited = null; // {code, signal} once the keeper has exited
    this.sandboxes = new Set(); // ids created by tests, removed at the end
    this.extraArgs = []; // more options for runtimed (a later --listen wins over ours)
    this.tls = null; // {ca: PEM}: the daemon serves https, and api() trusts only this CA
  }

  get url() {
    return `${this.tls ? 'https' : 'http'}://127.0.0.1:${this.port}`;
  }

  get key() {
    return fs.readFileSync(path.join(this.stateDir, 'admin.key'), 'utf8').trim();
  }

  log() {
    return readOr(this.logFile, '');
  }

  args() {
    // A dead loopback port as the nameserver: no test ever makes the daemon ask
    // the host's resolver (an address off this machine) about anything.
    // RUNTIME_DRIVER runs a suite under another isolation driver (make check runs the
    // sandbox suites under gvisor too); ns otherwise, whatever the host has.
    return ['--state-dir', this.stateDir, '--listen', `127.0.0.1:${this.port}`, '--socket', this.socket,
      '--nameserver', '127.0.0.1:9', '--driver', DRIVER, ...this.extraArgs];
  }

  /** Spawns the daemon; resolves once the API answers an authorised request. */
  async start({ port } = {}) {
    if (!this.port) this.port = port ?? (await freePort());
    const logFd = fs.openSync(this.logFile, 'a');
    // Own process group, so a test can tell the daemon's processes from node's.
    this.proc = spawn(RUNTIMED, this.args(), { stdio: ['ignore', logFd, logFd], detached: true });
    fs.closeSync(logFd);
    this.exited = null;
    const proc = this.proc;
    proc.on('exit', (code, signal) => {
      if (this.proc === proc) this.exited = { code, signal };
    });
    await waitFor(async () => {
      if (this.exited) {
        throw Object.assign(new Error(`runtimed exited (${JSON.stringify(this.exited)}):\n${this.log()}`),
          { fatal: true });
      }
      if (!fs.existsSync(path.join(this.stateDir, 'admin.key'))) return false;
      const r = await this.api('GET', '/v1/sandboxes', undefined, { timeoutMs: 1000 });
      return r.status === 200;
    }, { timeoutMs: 15000, what: `runtimed on port ${this.port} to answer` }).catch((e) => {
      if (this.exited) throw new Error(`runtimed exited (${JSON.stringify(this.exited)}):\n${this.log()}`);
      throw e;
    });
    return this;
  }

  /** This daemon's host uids, from the uid block it recorded in STATE/uid-block:
   * {block, first, last} (its sandboxes' uids: first..last), server, signer. */
  uids() {
    const text = fs.readFileSync(path.join(this.stateDir, 'uid-block'), 'utf8');
    const m = /^(\d+)\n# runtimed's uid block: sandbox host uids (\d+)\.\.(\d+), server (\d+), signer (\d+)\n/.exec(text);
    if (!m) throw new Error(`${this.stateDir}/uid-block is not what runtimed writes: ${JSON.stringify(text)}`);
    const [block, first, last, server, signer] = m.slice(1).map(Number);
    return { block, first, last, server, signer };
  }

  /** The keeper and the server (the keeper's child that runs as the server's uid,
   * just below the sandbox uids; its other children are short-lived exec monitors). */
  daemonPids() {
    if (!this.proc) return [];
    const keeper = this.proc.pid;
    let server; // no uid-block yet: the daemon stopped before it claimed one, so no server
    try {
      ({ server } = this.uids());
    } catch {
      return [keeper];
    }
    const kids = hostProcesses().filter((p) => p.ppid === keeper && p.uid === server);
    return [keeper, ...new Set(kids.map((p) => p.pid))];
  }

  /** SIGKILL the keeper's whole process group (server and sandbox inits too), as
   * `systemctl kill -s KILL` would, and wait until every one of them is gone. */
  async killGroup() {
    const pgid = this.proc.pid;
    const pids = hostProcesses().filter((p) => p.pgid === pgid).map((p) => p.pid);
    process.kill(-pgid, 'SIGKILL');
    await waitFor(() => this.exited && pids.every((p) => !pidAlive(p)),
      { timeoutMs: 10000, what: 'the process group to die after SIGKILL' });
    return pids;
  }

  /** SIGTERM, then wait for the keeper and server to exit. */
  async stop({ timeoutMs = 10000 } = {}) {
    if (!this.proc || this.exited) return this.exited;
    const pids = this.daemonPids();
    this.proc.kill('SIGTERM');
    try {
      await waitFor(() => this.exited && pids.every((p) => !pidAlive(p)),
        { timeoutMs, what: 'runtimed to exit after SIGTERM' });
    } catch (e) {
      for (const p of pids) try { process.kill(p, 'SIGKILL'); } catch {}
      throw e;
    }
    return this.exited;
  }

  /** SIGKILL the keeper and the server at once (a crash); sandboxes are left alone. */
  async kill9() {
    const pids = this.daemonPids();
    for (const p of pids) try { process.kill(p, 'SIGKILL'); } catch {}
    await waitFor(() => this.exited && pids.every((p) => !pidAlive(p)),
      { timeoutMs: 10000, what: 'runtimed to die after SIGKILL' });
    return pids;
  }

  env(extra = {}) {
    const env = { ...process.env, RUNTIME_API_URL: this.url, RUNTIME_API_KEY: this.key, ...extra };
    for (const [k, v] of Object.entries(env)) if (v === undefined) delete env[k];
    return env;
  }

  /** The CLI with this daemon's URL and key: {code, stdout, stderr}. */
  cli(args, { input, env, timeoutMs = 60000, encoding } = {}) {
    return run(RUNTIME, args, { input, env: this.env(env), timeoutMs, encoding });
  }

  /** The headers and payload of an API call: the key (null: none) as bearer, a body
   * (not raw) as JSON. */
  apiRequest(body, { key, raw, headers = {} } = {}) {
    const h = { ...headers };
    const k = key === undefined ? this.key : key;
    if (k !== null) h.Authorization = `Bearer ${k}`;
    let payload;
    if (raw !== undefined) payload = raw;
    else if (body !== undefined) {
      payload = typeof body === 'string' ? body : JSON.stringify(body);
      h['Content-Type'] = 'application/json';
    }
    return { headers: h, payload };
  }

  /** The HTTP API over TCP: {status, body (parsed JSON or null), text, headers}. */
  async api(method, p, body, { key, raw, headers = {}, timeoutMs = 120000 } = {}) {
    const req = this.apiRequest(body, { key, raw, headers });
    if (this.tls) {
      return httpsCall(this.url + p, { method, headers: req.headers, body: req.payload, ca: this.tls.ca, timeoutMs });
    }
    const res = await fetch(this.url + p, {
      method, headers: req.headers, body: req.payload, signal: AbortSignal.timeout(timeoutMs),
    });
    return apiAnswer(res.status, Buffer.from(await res.arrayBuffer()), res.headers);
  }

  /** Creates a sandbox through the API (remembered for cleanup); returns it. */
  async create(spec = {}) {
    const r = await this.api('POST', '/v1/sandboxes', spec);
    if (r.status !== 201 && r.status !== 200) {
      throw new Error(`create failed: HTTP ${r.status} ${r.text}`);
    }
    this.sandboxes.add(r.body.id);
    return r.body;
  }

  track(id) {
    this.sandboxes.add(id);
  }

  /** exec through the API; throws unless HTTP 200. */
  async exec(id, argv, opts = {}) {
    const r = await this.api('POST', `/v1/sandboxes/${encodeURIComponent(id)}/exec`, { argv, ...opts });
    if (r.status !== 200) throw new Error(`exec ${JSON.stringify(argv)} failed: HTTP ${r.status} ${r.text}`);
    return r.body;
  }

  /** exec of `sh -c SCRIPT`. */
  sh(id, script, opts = {}) {
    return this.exec(id, ['sh', '-c', script], opts);
  }

  async remove(id) {
    const r = await this.api('DELETE', `/v1/sandboxes/${encodeURIComponent(id)}`);
    if (r.status === 200 || r.status === 404) this.sandboxes.delete(id);
    return r;
  }

  /** Copies the probe into a sandbox with `runtime sandbox cp`; returns its path inside. */
  async installProbe(id) {
    const bin = buildProbe(this.dir);
    const r = await this.cli(['sandbox', 'cp', bin, `${id}:/workspace/probe`]);
    if (r.code !== 0) throw new Error(`cp probe: ${r.stderr}`);
    const c = await this.exec(id, ['chmod', '755', '/workspace/probe']);
    if (c.exitCode !== 0) throw new Error(`chmod probe: ${c.stderr}`);
    return '/workspace/probe';
  }

  /** Removes every sandbox the daemon knows, while it runs. */
  async removeAll() {
    if (!this.proc || this.exited) return;
    const r = await this.api('GET', '/v1/sandboxes').catch(() => null);
    const ids = new Set(this.sandboxes);
    if (r && r.status === 200) for (const s of r.body.data) ids.add(s.id);
    for (const id of ids) await this.remove(id).catch(() => {});
  }

  /** What the daemon left on the host. */
  leftovers() {
    return {
      processes: processesMatching(this.stateDir).map((p) => `${p.pid} uid=${p.uid} ${p.cmdline}`),
      cgroups: cgroupDirs(this.stateDir),
      loops: loopDevicesInto(this.stateDir),
      mounts: mountsOf(this.stateDir),
    };
  }

  /** Last resort after a test failed: stop everything this daemon left, so the host
   * stays clean. Returns what it had to clean (empty when the daemon did its job). */
  forceCleanup() {
    const left = this.leftovers();
    const victims = new Set(processesMatching(this.stateDir).map((p) => p.pid));
    for (const d of left.cgroups) {
      for (const l of readOr(path.join(d, 'cgroup.procs'), '').split('\n')) if (l) victims.add(Number(l));
    }
    for (const p of victims) try { process.kill(p, 'SIGKILL'); } catch {}
    for (const m of left.mounts) {
      const target = m.split(' ')[4];
      if (target) spawnSync('umount', ['-l', target]);
    }
    for (const l of left.loops) spawnSync('losetup', ['-d', l.split(' ')[0]]);
    // A cgroup can be removed once its processes are gone; poll a little, bounded.
    const deadline = Date.now() + 3000;
    let cgs = left.cgroups;
    while (cgs.length && Date.now() < deadline) {
      cgs = cgs.filter((d) => {
        try { fs.rmdirSync(d); return false; } catch { return true; }
      });
      if (cgs.length) spawnSync('sleep', ['0.05']); // bounded back-off in a sync cleanup path
    }
    return left;
  }

  /** The whole teardown for after(): remove sandboxes, stop, clean what is left, rm dir. */
  async close({ keepDir = false } = {}) {
    try {
      await this.removeAll();
    } catch {}
    try {
      await this.stop();
    } catch {}
    const leaks = leakReport(this.log());
    const left = this.forceCleanup();
    const dirty = Object.entries(left).filter(([, v]) => v.length);
    if (dirty.length) process.stderr.write(`# cleanup of ${this.dir} removed: ${JSON.stringify(left)}\n`);
    if (!keepDir && !process.env.RUNTIME_E2E_KEEP) fs.rmSync(this.dir, { recursive: true, force: true });
    if (leaks) throw new Error(`runtimed leaked memory (LeakSanitizer):\n${leaks}`);
  }
}

/**
 * One request over https trusting only `ca` (global fetch cannot be given a CA):
 * the API answer, plus the socket's local port and the server certificate's serial
 * (to tell connections and certificates apart). `agent` keeps a connection open
 * across calls.
 */
export function httpsCall(url, { method = 'GET', headers = {}, body, ca, agent, timeoutMs = 120000 } = {}) {
  return new Promise((resolve, reject) => {
    const req = https.request(url, { method, headers, ca, agent, timeout: timeoutMs }, (res) => {
      const chunks = [];
      const serial = res.socket.getPeerCertificate?.()?.serialNumber ?? null;
      const localPort = res.socket.localPort;
      res.on('data', (c) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const h = new Headers();
        for (const [k, v] of Object.entries(res.headers)) h.set(k, Array.isArray(v) ? v.join(', ') : v);
        resolve({ ...apiAnswer(res.statusCode, Buffer.concat(chunks), h), serial, localPort,
          reused: req.reusedSocket });
      });
    });
    req.on('timeout', () => req.destroy(new Error(`no answer from ${url} within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * A test CA in dir (openssl) and a way to issue server certificates for 127.0.0.1
 * and localhost from it: {caFile, ca (PEM), issue(serial, certFile, keyFile)}. Each
 * issue makes a new key; serial is hex (it names the certificate in tests).
 */
export function testCa(dir, name = 'ca') {
  const caKey = path.join(dir, `${name}.key`), caFile = path.join(dir, `${name}.crt`);
  const openssl = (args) => {
    const r = spawnSync('openssl', args, { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`openssl ${args.join(' ')}: ${r.stderr}`);
  };
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  openssl(['req', '-x509', ...ec, '-keyout', caKey, '-out', caFile, '-days', '2', '-subj', `/CN=runtime test ${name}`]);
  const ext = path.join(dir, `${name}-server.ext`);
  fs.writeFileSync(ext, 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n' +
    'keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n');
  const issue = (serial, certFile, keyFile) => {
    const csr = `${certFile}.csr`;
    openssl(['req', ...ec, '-keyout', keyFile, '-out', csr, '-subj', '/CN=localhost']);
    openssl(['x509', '-req', '-in', csr, '-CA', caFile, '-CAkey', caKey, '-set_serial', `0x${serial}`,
      '-days', '1', '-extfile', ext, '-out', certFile]);
    fs.chmodSync(keyFile, 0o600); // root only: the keeper reads it, the server cannot
    fs.rmSync(csr);
  };
  return { caFile, ca: fs.readFileSync(caFile, 'utf8'), issue };
}

/** LeakSanitizer's reports in a daemon log (a sanitized build run with
 * ASAN_OPTIONS=detect_leaks=1), or null. */
function leakReport(log) {
  const at = log.indexOf('ERROR: LeakSanitizer');
  return at < 0 ? null : log.slice(at, at + 8000);
}

/** A daemon in a fresh temp dir, started and answering. */
export async function startDaemon({ prefix = 'runtime-e2e-', make = (dir) => new Daemon(dir) } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  // mkdtemp makes 0700; the unprivileged server process must traverse it to reach
  // STATE/db, so open it up for search (not listing).
  fs.chmodSync(dir, 0o711);
  const d = make(dir);
  try {
    await d.start();
  } catch (e) {
    d.forceCleanup();
    if (!process.env.RUNTIME_E2E_KEEP) fs.rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  return d;
}

/** Stops the daemon and removes its dir; use in after(). */
export async function stopDaemon(d) {
  if (d) await d.close();
}

// ---------------------------------------------------------------- escape helpers

/** Runs the probe (see installProbe) in a sandbox: the exec result. */
export function probe(d, id, args, opts = {}) {
  return d.exec(id, ['/workspace/probe', ...args.map(String)], { timeoutMs: 20000, ...opts });
}

/** The attack failed: non-zero exit, no SUCCEEDED line; either the probe says it
 * was refused (matching `re` when given) or the kernel killed it (a signal: exitCode
 * null, state killed). */
export function assertRefused(r, what, re) {
  const text = `${what}: exit ${r.exitCode} ${r.signal ?? ''}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`;
  if (r.exitCode === 0 || /SUCCEEDED/.test(r.stdout)) throw new Error(`ESCAPE: ${text}`);
  if (r.exitCode === 2) throw new Error(`probe usage error: ${text}`);
  if (r.state !== 'killed') {
    if (!/refused/.test(r.stdout)) throw new Error(`no refusal reported: ${text}`);
    if (re && !re.test(r.stdout)) throw new Error(`refused, but not as expected (${re}): ${text}`);
  }
}
