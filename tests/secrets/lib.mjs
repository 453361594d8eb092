// Helpers for the secrets suite: a private network world (two namespaces and
// a veth pair, as in tests/egress/lib.mjs), fake HTTPS upstreams that record
// exactly what reached them (upstream.mjs), a test CA made with the openssl
// CLI, and a runtimed in its own namespace started with --resolve,
// --nameserver and --upstream-ca.
//
//   "daemon" namespace    198.51.100.254/24 on the veth; runtimed lives here
//                         (its API over its unix socket) and dials from here.
//   "upstream" namespace  198.51.100.1 (HTTPS on 443, HTTP on 80),
//                         198.51.100.2 (a sink on 443: accepts, never answers;
//                         where the fake DNS sends every *.many.test name) and
//                         198.51.100.53 (the fake DNS server for --nameserver).
// Upstream certificates, chosen by SNI at 198.51.100.1:443:
//   default         testca -> api.github.test, api.other.test, spliced.test,
//                   *.many.test (a good upstream)
//   expired.test    testca, but valid only in January 2020
//   wronghost.test  testca, for somewhere-else.test only
//   untrusted.test  another CA, one the daemon was not told to trust
//
// Nothing here sleeps for synchronisation: waits poll with deadlines.

import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { EgressDaemon, NamespacePair, isRoot } from '../egress/lib.mjs';
import { hostProcesses, waitFor } from '../e2e/lib.mjs';

export { isRoot, waitFor };

const HERE = path.dirname(fileURLToPath(import.meta.url));
const UPSTREAM_JS = path.join(HERE, 'upstream.mjs');
const INSIDE_JS = path.join(HERE, 'inside.mjs');

export const DAEMON_V4 = '198.51.100.254';
export const UP_V4 = '198.51.100.1';
export const SINK_V4 = '198.51.100.2';
export const DNS_V4 = '198.51.100.53';

/** Names the default upstream certificate is good for. */
export const GOOD_NAMES = ['api.github.test', 'api.other.test', 'spliced.test', '*.many.test'];
/** Upstreams whose certificate the daemon must refuse. */
export const BAD_NAMES = ['expired.test', 'wronghost.test', 'untrusted.test'];
const PINNED = ['api.github.test', 'api.other.test', 'spliced.test', ...BAD_NAMES];

// ---------------------------------------------------------------- certificates

/** The test CAs and upstream certificates, made with the openssl CLI in dir. */
export function makeCerts(dir) {
  const o = (args) => {
    const r = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`openssl ${args.join(' ')}: ${r.stderr}`);
  };
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  const ca = (name, cn) => o(['req', '-x509', ...ec, '-days', '2', '-subj', `/CN=${cn}`,
    '-keyout', `${name}.key`, '-out', `${name}.pem`,
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign']);
  const csr = (name, cn) => o(['req', ...ec, '-subj', `/CN=${cn}`, '-keyout', `${name}.key`, '-out', `${name}.csr`]);
  const ext = (name, sans) => {
    fs.writeFileSync(path.join(dir, `${name}.ext`),
      `subjectAltName=${sans.map((n) => `DNS:${n}`).join(',')}\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n`);
  };
  const sign = (name, caName, sans) => {
    csr(name, sans[0]);
    ext(name, sans);
    o(['x509', '-req', '-in', `${name}.csr`, '-CA', `${caName}.pem`, '-CAkey', `${caName}.key`, '-CAcreateserial',
      '-days', '2', '-extfile', `${name}.ext`, '-out', `${name}.pem`]);
  };
  ca('testca', 'runtime secrets test CA');
  ca('otherca', 'a CA nobody trusts');
  sign('good', 'testca', GOOD_NAMES);
  sign('wronghost', 'testca', ['somewhere-else.test']);
  sign('untrusted', 'otherca', ['untrusted.test']);
  // Expired: OpenSSL 3.0's x509 has no -not_before/-not_after, but `openssl ca`
  // takes -startdate/-enddate, so the validity can lie wholly in the past.
  csr('expired', 'expired.test');
  ext('expired', ['expired.test']);
  fs.mkdirSync(path.join(dir, 'ca-db'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'ca-db', 'index.txt'), '');
  fs.writeFileSync(path.join(dir, 'ca-db', 'serial'), '1000\n');
  fs.writeFileSync(path.join(dir, 'ca.cnf'), [
    '[ca]', 'default_ca = test', '[test]', 'dir = ca-db', 'database = ca-db/index.txt',
    'new_certs_dir = ca-db', 'serial = ca-db/serial', 'default_md = sha256', 'policy = any',
    'unique_subject = no', '[any]', 'commonName = supplied', '',
  ].join('\n'));
  o(['ca', '-batch', '-notext', '-config', 'ca.cnf', '-cert', 'testca.pem', '-keyfile', 'testca.key',
    '-in', 'expired.csr', '-out', 'expired.pem', '-startdate', '20200101000000Z', '-enddate', '20200201000000Z',
    '-extfile', 'expired.ext']);
  const p = (f) => path.join(dir, f);
  for (const f of fs.readdirSync(dir)) if (f.endsWith('.pem')) fs.chmodSync(p(f), 0o644);
  return {
    ca: p('testca.pem'),
    good: { cert: p('good.pem'), key: p('good.key') },
    bySni: {
      'expired.test': { cert: p('expired.pem'), key: p('expired.key') },
      'wronghost.test': { cert: p('wronghost.pem'), key: p('wronghost.key') },
      'untrusted.test': { cert: p('untrusted.pem'), key: p('untrusted.key') },
    },
  };
}

// ---------------------------------------------------------------- the upstream's log

/** upstream.mjs as a child; its JSON lines are collected in .events. */
export class Upstream {
  constructor(args) {
    this.events = [];
    this.stderr = '';
    this.exited = null;
    this.proc = spawn('ip', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let buf = '';
    this.proc.stdout.on('data', (d) => {
      buf += d.toString('utf8');
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        try {
          this.events.push(JSON.parse(line));
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
      if (this.exited) throw Object.assign(new Error(`upstream exited: ${this.stderr}`), { fatal: true });
      if (this.events.some((e) => e.ev === 'failed')) throw Object.assign(new Error(`upstream failed: ${JSON.stringify(this.events)}`), { fatal: true });
      return this.events.some((e) => e.ev === 'listening');
    }, { timeoutMs: 10000, what: 'the upstream to listen' });
  }

  /** A position in the log; since(mark) gives what came after it. */
  mark() {
    return this.events.length;
  }

  since(mark, ev) {
    return this.events.slice(mark).filter((e) => !ev || e.ev === ev);
  }

  stop() {
    if (!this.exited) try { this.proc.kill('SIGKILL'); } catch {}
  }
}

// ---------------------------------------------------------------- the daemon

/** EgressDaemon with --upstream-ca, a transcript of every API answer (for the
 * leak test), and helpers for secrets and the in-sandbox client. */
export class SecretsDaemon extends EgressDaemon {
  constructor(dir, opts) {
    super(dir, opts);
    this.upstreamCa = opts.upstreamCa;
    this.extraArgs = opts.extraArgs ?? [];
    this.transcript = []; // every API answer's bytes, as received
  }

  args() {
    return [...super.args(), '--upstream-ca', this.upstreamCa, ...this.extraArgs];
  }

  async api(method, p, body, opts = {}) {
    const r = await super.api(method, p, body, opts);
    this.transcript.push(`${method} ${p} -> ${r.status}\n${r.text}`);
    return r;
  }

  async putSecret(name, spec) {
    const r = await this.api('PUT', `/v1/egress-secrets/${name}`, spec);
    if (r.status !== 200 && r.status !== 201) throw new Error(`PUT secret ${name}: HTTP ${r.status} ${r.text}`);
    return r;
  }

  async deleteSecret(name) {
    const r = await this.api('DELETE', `/v1/egress-secrets/${name}`);
    if (r.status !== 204 && r.status !== 200) throw new Error(`DELETE secret ${name}: HTTP ${r.status} ${r.text}`);
    return r;
  }

  /** A sandbox with inside.mjs and the test CA (for spliced hosts) in /workspace. */
  async secretsSandbox(spec = {}) {
    const sb = await this.create({ network: { internet: true }, ...spec }); // no allow list: any public host
    await this.putFile(sb.id, '/workspace/inside.mjs', fs.readFileSync(INSIDE_JS));
    await this.putFile(sb.id, '/workspace/testca.pem', fs.readFileSync(this.upstreamCa));
    return sb;
  }

  /** The value of variable name in a fresh exec: the placeholder the sandbox sees. */
  async envOf(id, name) {
    const r = await this.exec(id, ['printenv', name]);
    return r.exitCode === 0 ? r.stdout.trim() : null;
  }

  /** Runs inside.mjs MODE ARG in the sandbox; returns its parsed JSON output. */
  async inside(id, mode, arg, { timeoutMs = 60000 } = {}) {
    const r = await this.exec(id, ['node', '/workspace/inside.mjs', mode, JSON.stringify(arg)], { timeoutMs });
    if (r.exitCode !== 0) throw new Error(`inside.mjs ${mode}: exit ${r.exitCode}: ${r.stderr}${r.stdout}`);
    try {
      return JSON.parse(r.stdout);
    } catch {
      throw new Error(`inside.mjs ${mode}: not JSON: ${r.stdout} ${r.stderr}`);
    }
  }

  /** Starts inside.mjs MODE ARG in the background (it outlives the exec); output to outFile. */
  async insideBackground(id, mode, arg, outFile) {
    const r = await this.exec(id, ['sh', '-c', 'node /workspace/inside.mjs "$0" "$1" >"$2" 2>&1 </dev/null &',
      mode, JSON.stringify(arg), outFile]);
    if (r.exitCode !== 0) throw new Error(`background ${mode}: ${r.stderr}`);
  }

  /** The server process (the keeper's child that is not a sandbox). */
  serverPid() {
    const pids = this.daemonPids();
    return pids.find((p) => p !== this.proc.pid);
  }
}

// ---------------------------------------------------------------- the world

export class SecretsWorld extends NamespacePair {
  /** daemonArgs: more runtimed options (e.g. --tls-inspect allowed-hosts). */
  constructor({ daemonArgs = [] } = {}) {
    super('sc', 'runtime-secrets-');
    this.daemonArgs = daemonArgs;
  }

  async setup() {
    const { d, u } = this.makeNamespaces();
    d(['addr', 'add', `${DAEMON_V4}/24`, 'dev', this.vethD]);
    for (const a of [UP_V4, SINK_V4, DNS_V4]) u(['addr', 'add', `${a}/24`, 'dev', this.vethU]);
    d(['link', 'set', this.vethD, 'up']);
    u(['link', 'set', this.vethU, 'up']);
    this.certs = makeCerts(this.dir);
    this.holdDir = path.join(this.dir, 'hold');
    fs.mkdirSync(this.holdDir);
    const cfg = path.join(this.dir, 'upstream.json');
    fs.writeFileSync(cfg, JSON.stringify({
      bind: UP_V4,
      holdDir: this.holdDir,
      https: [443],
      http: [80],
      certs: { default: this.certs.good, bySni: this.certs.bySni },
      sink: { bind: SINK_V4, port: 443 },
      dns: { bind: DNS_V4, suffixes: { '.many.test': SINK_V4 } },
    }));
    this.upstream = new Upstream(['netns', 'exec', this.uns, process.execPath, UPSTREAM_JS, cfg]);
    await this.upstream.ready();
    this.daemon = new SecretsDaemon(this.dir, {
      netns: this.dns,
      pins: PINNED.map((n) => `${n}:0:${UP_V4}`),
      nameserver: `${DNS_V4}:53`,
      upstreamCa: this.certs.ca,
      extraArgs: this.daemonArgs,
    });
    await this.daemon.start();
    return this;
  }

  /** Lets the upstream answer the requests that carry hold=name. */
  release(name) {
    fs.writeFileSync(path.join(this.holdDir, name), '');
  }
}

// ---------------------------------------------------------------- requests and assertions

/** An HTTP/1.1 request head (and body) as bytes to send. */
export function request(method, target, host, headers = [], body = '') {
  const lines = [`${method} ${target} HTTP/1.1`, `Host: ${host}`];
  for (const [k, v] of headers) lines.push(`${k}: ${v}`);
  if (body && !headers.some(([k]) => /^(content-length|transfer-encoding)$/i.test(k))) {
    lines.push(`Content-Length: ${Buffer.byteLength(body, 'latin1')}`);
  }
  return `${lines.join('\r\n')}\r\n\r\n${body}`;
}

/** The value of header name (case-insensitive) in an upstream "req" event, or undefined. */
export function header(req, name) {
  const all = req.headers.filter(([k]) => k.toLowerCase() === name.toLowerCase()).map(([, v]) => v);
  return all.length ? all.join(', ') : undefined;
}

/** Processes of a sandbox, from the host: those in the pid namespace of the
 * process with the given host pid (one of the sandbox's). Not by uid: two
 * daemons on one host (other test runs) hand out the same uid ranges. */
export function sandboxProcesses(somePid) {
  const ns = fs.readlinkSync(`/proc/${somePid}/ns/pid`);
  return hostProcesses().filter((p) => {
    try {
      return p.state !== 'Z' && fs.readlinkSync(`/proc/${p.pid}/ns/pid`) === ns;
    } catch {
      return false;
    }
  });
}

/** Searches the writable memory of pid for each needle; returns the needles
 * found, the bytes searched and the mappings skipped (see there). skipMemfd leaves out
 * shared mappings of memfds (gVisor's sentry maps its memory file, a sandbox's memory, so):
 * a read through /proc/PID/mem allocates a hole of a shared file, charged to pid's cgroup,
 * and would OOM a sandbox; searchMemfds reads those files instead. */
export function searchMemory(pid, needles, { skipMemfd = false } = {}) {
  const found = new Set();
  let maps;
  try {
    maps = fs.readFileSync(`/proc/${pid}/maps`, 'utf8');
  } catch {
    return { found: [], bytes: 0, error: 'no maps' };
  }
  const fd = fs.openSync(`/proc/${pid}/mem`, 'r');
  const bufs = needles.map((n) => Buffer.from(n, 'latin1'));
  const overlap = Math.max(...bufs.map((b) => b.length));
  let bytes = 0;
  const skipped = [];
  try {
    for (const line of maps.split('\n')) {
      const m = /^([0-9a-f]+)-([0-9a-f]+) (\S+)/.exec(line);
      if (!m || m[3][0] !== 'r' || m[3][1] !== 'w') continue; // a value can only have been written to rw memory
      if (/\[(vvar|vsyscall|vdso)\]/.test(line)) continue;
      if (skipMemfd && m[3][3] === 's' && / \/memfd:/.test(line)) continue;
      const start = parseInt(m[1], 16);
      const end = parseInt(m[2], 16);
      // AddressSanitizer's shadow (a sandbox's init is the daemon's binary, so
      // under make check it is sanitized) is terabytes of reserved rw memory
      // that holds only metadata; no heap or stack region comes near 1 GiB here.
      if (end - start > 1 << 30) {
        skipped.push(line.trim());
        continue;
      }
      const CHUNK = 8 << 20;
      let carry = Buffer.alloc(0);
      for (let off = start; off < end; off += CHUNK) {
        const len = Math.min(CHUNK, end - off);
        const buf = Buffer.alloc(len);
        let got = 0;
        try {
          got = fs.readSync(fd, buf, 0, len, off);
        } catch {
          break; // an unreadable range (guard pages and the like)
        }
        bytes += got;
        const hay = Buffer.concat([carry, buf.subarray(0, got)]);
        bufs.forEach((b, i) => {
          if (hay.indexOf(b) >= 0) found.add(needles[i]);
        });
        carry = hay.subarray(Math.max(0, hay.length - overlap));
      }
    }
  } finally {
    fs.closeSync(fd);
  }
  return { found: [...found], bytes, skipped };
}

/** Searches every memfd pid holds open (gVisor's sentry: its memory file, the sandbox's
 * memory) for each needle, by read(2): a hole reads as zeros and allocates nothing. A file
 * in `seen` (dev:inode) is not read again. Returns {found, bytes, files}. */
export function searchMemfds(pid, needles, seen = new Set()) {
  const found = new Set();
  const bufs = needles.map((n) => Buffer.from(n, 'latin1'));
  const overlap = Math.max(...bufs.map((b) => b.length));
  let bytes = 0;
  const files = [];
  let fds = [];
  try {
    fds = fs.readdirSync(`/proc/${pid}/fd`);
  } catch {
    return { found: [], bytes: 0, files };
  }
  for (const fd of fds) {
    const link = `/proc/${pid}/fd/${fd}`;
    let target, st;
    try {
      target = fs.readlinkSync(link);
      if (!target.startsWith('/memfd:')) continue;
      st = fs.statSync(link);
    } catch {
      continue;
    }
    const key = `${st.dev}:${st.ino}`;
    if (seen.has(key)) continue;
    seen.add(key);
    files.push(target);
    let f;
    try {
      f = fs.openSync(link, 'r');
    } catch {
      continue;
    }
    try {
      const CHUNK = 8 << 20;
      const buf = Buffer.alloc(CHUNK);
      let carry = Buffer.alloc(0);
      for (let off = 0; off < st.size; off += CHUNK) {
        const got = fs.readSync(f, buf, 0, Math.min(CHUNK, st.size - off), off);
        if (got <= 0) break;
        bytes += got;
        const hay = Buffer.concat([carry, buf.subarray(0, got)]);
        bufs.forEach((b, i) => {
          if (hay.indexOf(b) >= 0) found.add(needles[i]);
        });
        carry = Buffer.from(hay.subarray(Math.max(0, hay.length - overlap)));
      }
    } finally {
      fs.closeSync(f);
    }
  }
  return { found: [...found], bytes, files };
}

/** Regular files under root (not following symlinks), skipping the top-level
 * directories named in skip; returns the paths whose content holds a needle. */
export function searchTree(root, needles, skip = []) {
  const hits = [];
  const bufs = needles.map((n) => Buffer.from(n, 'latin1'));
  let files = 0;
  const walk = (dir, depth) => {
    if (depth > 40) return;
    let names;
    try {
      names = fs.readdirSync(dir);
    } catch {
      return;
    }
    for (const name of names) {
      const p = path.join(dir, name);
      if (dir === root && skip.includes(name)) continue;
      let st;
      try {
        st = fs.lstatSync(p);
      } catch {
        continue;
      }
      if (st.isDirectory()) walk(p, depth + 1);
      else if (st.isFile()) {
        files++;
        let data;
        try {
          data = fs.readFileSync(p);
        } catch {
          continue;
        }
        if (bufs.some((b) => data.indexOf(b) >= 0)) hits.push(p);
      }
    }
  };
  walk(root, 0);
  return { hits, files };
}

/** Every event of a sandbox after seq `after` (the API pages by 1000). */
export async function allEvents(d, id, after = 0) {
  const all = [];
  for (let guard = 0; guard < 100; guard++) {
    const page = await d.events(id, after);
    all.push(...page);
    if (page.length < 1000) return all;
    after = page[page.length - 1].seq;
  }
  throw new Error('more than 100 pages of events');
}

/** The last event seq of a sandbox (0 when none), to read only what follows. */
export async function lastSeq(d, id) {
  const evs = await allEvents(d, id);
  return evs.length ? evs[evs.length - 1].seq : 0;
}

/** Secret events as "kind secret host method path reason", for readable assertions. */
export function showSecretEvents(events) {
  return events.filter((e) => e.kind.startsWith('secret.'))
    .map((e) => `${e.kind} ${e.secret ?? '-'} ${e.host} ${e.method} ${e.path}${e.reason ? ` (${e.reason})` : ''}`);
}
