// Runs inside a sandbox for the secrets suite: `node inside.mjs MODE 'JSON-ARG'`,
// prints one JSON result. Node built-ins only.
//
// In every string sent, {{NAME}} is replaced by process.env.NAME: the
// placeholder the sandbox holds for secret NAME (the sandbox never sees more).
//
// Modes:
//   conn       one connection (TLS unless tls:false), then steps in order; each
//              step may wait for a file to appear (the test changes policy
//              meanwhile), sends bytes (whole, or `piece` bytes per write, each
//              its own TLS record), and waits for `expect` complete responses
//              (or the connection's end), and with waitClose for the end
//              itself. Results also go, step by step, to
//              arg.log (JSON lines) when given, for runs in the background;
//              every byte received, as it comes, to arg.rxLog when given.
//              Responses framed by Content-Length or chunked (decoded).
//   handshakes TLS handshakes with many distinct names, `concurrency` at a time
//              (see there); counts successes and errors; serial numbers of chosen names.
//   dnsflood   DNS queries for refused names, as fast as they go (see there).

import crypto from 'node:crypto';
import dns from 'node:dns';
import fs from 'node:fs';
import net from 'node:net';
import { Duplex } from 'node:stream';
import tls from 'node:tls';

const [mode, argText] = process.argv.slice(2);
const arg = argText ? JSON.parse(argText) : {};
const out = (v) => process.stdout.write(JSON.stringify(v) + '\n');
const BUNDLE = '/etc/ssl/certs/ca-certificates.crt';

const fill = (s) => s.replace(/\{\{(\w+)\}\}/g, (_, n) => process.env[n] ?? `{{${n}}}`);

// One context for all connections: parsing the bundle's ~140 roots costs more
// than a handshake, so a context per connection would measure the client.
function trust(extra = []) {
  return tls.createSecureContext({ ca: [fs.readFileSync(BUNDLE, 'latin1'), ...extra.map((f) => fs.readFileSync(f, 'latin1'))] });
}

// A passthrough over the TCP socket that counts the TLS records the client
// sends, by content type (0x17: application data), for the split test.
class RecordCounter extends Duplex {
  constructor(sock) {
    super();
    this.sock = sock;
    this.records = { handshake: 0, app: 0, other: 0 };
    this.pending = Buffer.alloc(0);
    sock.on('data', (d) => this.push(d));
    sock.on('end', () => this.push(null));
    sock.on('error', (e) => this.destroy(e));
    sock.on('close', () => this.destroy());
  }

  _read() {}

  _write(chunk, enc, cb) {
    this.pending = Buffer.concat([this.pending, chunk]);
    while (this.pending.length >= 5) {
      const len = this.pending.readUInt16BE(3);
      if (this.pending.length < 5 + len) break;
      const type = this.pending[0];
      if (type === 0x17) this.records.app++;
      else if (type === 0x16) this.records.handshake++;
      else this.records.other++;
      this.pending = this.pending.subarray(5 + len);
    }
    this.sock.write(chunk, cb);
  }

  _final(cb) {
    this.sock.end();
    cb();
  }
}

// A chunked body at the start of text: [body, bytes used], or null when incomplete.
function dechunk(text) {
  let off = 0;
  let body = '';
  for (;;) {
    const le = text.indexOf('\r\n', off);
    if (le < 0) return null;
    const size = parseInt(text.slice(off, le).split(';')[0], 16);
    off = le + 2;
    if (size === 0) {
      const end = text.indexOf('\r\n\r\n', off - 2);
      return end < 0 ? null : [body, end + 4];
    }
    if (text.length < off + size + 2) return null;
    body += text.slice(off, off + size);
    off += size + 2;
  }
}

// Complete HTTP/1.1 responses at the start of text: [{status, headers, body, chunked}], rest.
function parseResponses(text) {
  const list = [];
  for (;;) {
    const end = text.indexOf('\r\n\r\n');
    if (end < 0) break;
    const lines = text.slice(0, end).split('\r\n');
    const m = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0]);
    if (!m) break;
    const headers = {};
    for (const l of lines.slice(1)) {
      const i = l.indexOf(':');
      if (i > 0) headers[l.slice(0, i).toLowerCase()] = l.slice(i + 1).trim();
    }
    if (headers['transfer-encoding'] === 'chunked') {
      const c = dechunk(text.slice(end + 4));
      if (!c) break;
      list.push({ status: Number(m[1]), headers, body: c[0], chunked: true });
      text = text.slice(end + 4 + c[1]);
      continue;
    }
    const len = Number(headers['content-length'] ?? 0);
    if (text.length < end + 4 + len) break;
    list.push({ status: Number(m[1]), headers, body: text.slice(end + 4, end + 4 + len) });
    text = text.slice(end + 4 + len);
  }
  return list;
}

async function waitFile(file, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (!fs.existsSync(file)) {
    if (Date.now() > deadline) throw new Error(`no ${file} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
  return fs.readFileSync(file, 'latin1');
}

async function conn() {
  const { host, port = arg.tls === false ? 80 : 443, servername = host, extraCa = [], steps, timeoutMs = 8000 } = arg;
  const log = (o) => arg.log && fs.appendFileSync(arg.log, JSON.stringify(o) + '\n');
  const r = { connected: false, authorized: null, error: null, closed: false, steps: [], records: null };
  let text = '';
  let wake = () => {};
  let sock;
  let readyNow = () => {};
  const ready = new Promise((resolve) => {
    readyNow = resolve;
    const raw = net.connect({ host, port });
    raw.setNoDelay(true);
    raw.on('error', (e) => {
      r.error = r.error ?? (e.code || e.message);
      resolve();
    });
    const onData = (d) => {
      text += d.toString('latin1');
      if (arg.rxLog) fs.appendFileSync(arg.rxLog, d);
      wake();
    };
    const onClose = () => {
      r.closed = true;
      wake();
      resolve();
    };
    raw.on('connect', () => {
      if (arg.tls === false) {
        sock = raw;
        r.connected = true;
        raw.on('data', onData);
        raw.on('close', onClose);
        return resolve();
      }
      const counter = new RecordCounter(raw);
      r.records = counter.records;
      sock = tls.connect({ socket: counter, servername, secureContext: trust(extraCa), ALPNProtocols: ['http/1.1'] });
      sock.on('secureConnect', () => {
        r.connected = true;
        r.authorized = sock.authorized;
        const cert = sock.getPeerCertificate();
        r.peer = { subject: cert.subject, issuer: cert.issuer, san: cert.subjectaltname, serial: cert.serialNumber };
        resolve();
      });
      sock.on('data', onData);
      sock.on('error', (e) => {
        r.error = r.error ?? (e.code || e.message);
        resolve();
      });
      sock.on('close', onClose);
    });
  });
  const timer = setTimeout(() => {
    r.error = r.error ?? 'timeout';
    wake();
    readyNow();
  }, timeoutMs);
  await ready;
  let seen = 0;
  for (const [i, step] of (r.connected ? steps : []).entries()) {
    if (step.waitFile) await waitFile(step.waitFile, step.waitMs ?? 20000);
    const payload = Buffer.from(fill(step.send ?? ''), 'latin1');
    const piece = step.piece ?? payload.length;
    for (let off = 0; off < payload.length && !r.closed; off += piece) {
      await new Promise((res) => sock.write(payload.subarray(off, off + piece), res));
      if (piece < payload.length) await new Promise((res) => setImmediate(res));
    }
    const want = seen + (step.expect ?? 1);
    // Poll-free: woken by data, close or the deadline.
    while (parseResponses(text).length < want && !r.closed && r.error !== 'timeout') {
      await new Promise((res) => {
        wake = res;
      });
    }
    // waitClose: the peer should end the connection now (after a refusal).
    while (step.waitClose && !r.closed && r.error !== 'timeout') {
      await new Promise((res) => {
        wake = res;
      });
    }
    const all = parseResponses(text);
    const got = all.slice(seen, want);
    seen = all.length;
    const res = { step: i, responses: got, closed: r.closed };
    r.steps.push(res);
    log(res);
    if (r.closed || r.error === 'timeout') break;
  }
  clearTimeout(timer);
  r.tail = text.length > 4000 ? text.slice(-4000) : text;
  sock?.destroy();
  log({ done: true, error: r.error });
  out(r);
}

// A TLS 1.2 ClientHello for name: ECDHE with P-256, AES-GCM suites, SNI.
function clientHello(name) {
  const u16 = (n) => Buffer.from([n >> 8, n & 0xff]);
  const u24 = (n) => Buffer.from([n >> 16, (n >> 8) & 0xff, n & 0xff]);
  const ext = (type, body) => Buffer.concat([u16(type), u16(body.length), body]);
  const host = Buffer.from(name, 'latin1');
  const sni = Buffer.concat([u16(host.length + 3), Buffer.from([0]), u16(host.length), host]);
  const exts = Buffer.concat([
    ext(0x0000, sni),
    ext(0x000a, Buffer.from([0, 2, 0x00, 0x17])), // supported groups: secp256r1
    ext(0x000b, Buffer.from([1, 0])), // point formats: uncompressed
    ext(0x000d, Buffer.from([0, 6, 0x04, 0x03, 0x08, 0x04, 0x04, 0x01])), // signature algorithms
  ]);
  const suites = Buffer.from([0xc0, 0x2b, 0xc0, 0x2c, 0xc0, 0x2f, 0xc0, 0x30]);
  const body = Buffer.concat([Buffer.from([3, 3]), crypto.randomBytes(32), Buffer.from([0]),
    u16(suites.length), suites, Buffer.from([1, 0]), u16(exts.length), exts]);
  const hs = Buffer.concat([Buffer.from([1]), u24(body.length), body]);
  return Buffer.concat([Buffer.from([0x16, 3, 1]), u16(hs.length), hs]);
}

// The first certificate of the server's Certificate message, after a raw
// ClientHello: the handshake stops there, so the client pays for no key
// exchange (the proxy has minted and sent its leaf by then, which is what the
// cache test is about). Resolves to the DER, or rejects.
function leafOf(addr, name, timeoutMs) {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: addr, port: 443 });
    const timer = setTimeout(() => fail(new Error('timeout')), timeoutMs);
    let rec = Buffer.alloc(0);
    let hs = Buffer.alloc(0);
    const fail = (e) => {
      clearTimeout(timer);
      s.destroy();
      reject(e);
    };
    s.on('connect', () => s.write(clientHello(name)));
    s.on('error', (e) => fail(e));
    s.on('close', () => fail(new Error('closed before the certificate')));
    s.on('data', (d) => {
      rec = Buffer.concat([rec, d]);
      while (rec.length >= 5 && rec.length >= 5 + rec.readUInt16BE(3)) {
        const len = rec.readUInt16BE(3);
        if (rec[0] === 0x15) return fail(new Error(`alert ${rec[6]}`));
        if (rec[0] === 0x16) hs = Buffer.concat([hs, rec.subarray(5, 5 + len)]);
        rec = rec.subarray(5 + len);
      }
      while (hs.length >= 4) {
        const len = hs.readUIntBE(1, 3);
        if (hs.length < 4 + len) break;
        if (hs[0] === 11) {
          const first = hs.readUIntBE(7, 3);
          clearTimeout(timer);
          s.removeAllListeners('close');
          s.destroy();
          return resolve(hs.subarray(10, 10 + first));
        }
        hs = hs.subarray(4 + len);
      }
    });
  });
}

// The interception CA among the bundle's certificates: the one that issued leaf.
let interceptionCa = null;
function issuerIn(leaf) {
  if (interceptionCa) return interceptionCa;
  const pems = fs.readFileSync(BUNDLE, 'latin1').match(/-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g) ?? [];
  for (const pem of pems) {
    const ca = new crypto.X509Certificate(pem);
    if (leaf.checkIssued(ca) && leaf.verify(ca.publicKey)) return (interceptionCa = ca);
  }
  return null;
}

// Names n{from}..n{to-1}{suffix} (or n{from}{suffix} to-from times, with `same`:
// the serial of each leaf is then in `leaves`), `concurrency` at a time: resolve through the
// sandbox's resolver, then get the leaf with a raw ClientHello (above) and
// check it: issued for that name by a CA of the bundle, in its validity. For
// the names in fullFor, a whole handshake with node's TLS client as well, with
// the bundle as trust store: serial numbers of both are reported.
async function handshakes() {
  const { from, to, suffix, concurrency = 50, fullFor = [], timeoutMs = 5000, same = false } = arg;
  const secureContext = trust();
  const resolver = new dns.promises.Resolver({ timeout: 2000, tries: 2 });
  const r = { ok: 0, errors: {}, serials: {}, full: {}, leaves: [], ms: 0 };
  const t0 = Date.now();
  const one = async (i) => {
    const name = same ? `n${from}${suffix}` : `n${i}${suffix}`;
    try {
      const [addr] = await resolver.resolve4(name);
      const leaf = new crypto.X509Certificate(await leafOf(addr, name, timeoutMs));
      const ca = issuerIn(leaf);
      const now = Date.now();
      if (!ca || !leaf.verify(ca.publicKey)) throw new Error('leaf not issued by a CA of the bundle');
      if (leaf.subjectAltName !== `DNS:${name}`) throw new Error(`leaf for ${leaf.subjectAltName}`);
      if (Date.parse(leaf.validFrom) > now || Date.parse(leaf.validTo) < now) throw new Error('leaf not valid now');
      if (same) r.leaves.push(leaf.serialNumber);
      if (fullFor.includes(i)) {
        r.serials[i] = leaf.serialNumber;
        r.full[i] = await new Promise((resolve, reject) => {
          const s = tls.connect({ host: addr, port: 443, servername: name, secureContext });
          const timer = setTimeout(() => s.destroy(new Error('timeout')), timeoutMs);
          s.on('secureConnect', () => {
            clearTimeout(timer);
            const serial = s.getPeerCertificate().serialNumber;
            s.destroy();
            resolve(serial);
          });
          s.on('error', (e) => {
            clearTimeout(timer);
            reject(e);
          });
        });
      }
      r.ok++;
    } catch (e) {
      const k = e.code || e.message;
      r.errors[k] = (r.errors[k] ?? 0) + 1;
    }
  };
  let next = from;
  const worker = async () => {
    while (next < to) await one(next++);
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  r.ms = Date.now() - t0;
  r.cpuMs = Math.round((process.cpuUsage().user + process.cpuUsage().system) / 1000);
  out(r);
}

// DNS queries for names the policy refuses (each an egress.refused event), as
// fast as the socket takes them, until the file arg.stop appears (or 30 s, or
// arg.max queries): a flood of routine events. Writes arg.started once the
// first went out, and arg.done with the count at the end.
async function dnsflood() {
  const { seconds = 30, max = 1000000, started, done, stop, suffix = 'nope.test' } = arg;
  const dgram = await import('node:dgram');
  const sock = dgram.createSocket('udp4');
  sock.on('message', () => {});
  const query = (i) => {
    const labels = [`e${i}`, ...suffix.split('.')];
    const parts = [Buffer.from([i >> 8 & 0xff, i & 0xff, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0])];
    for (const l of labels) parts.push(Buffer.from([l.length]), Buffer.from(l, 'latin1'));
    parts.push(Buffer.from([0, 0, 1, 0, 1]));
    return Buffer.concat(parts);
  };
  const end = Date.now() + Math.min(seconds, 30) * 1000;
  let n = 0;
  while (Date.now() < end && n < max && !(stop && n % 200 === 0 && fs.existsSync(stop))) {
    await new Promise((res) => sock.send(query(n), 53, '127.0.0.1', res));
    if (n++ === 0 && started) fs.writeFileSync(started, '1');
    if (n % 50 === 0) await new Promise((res) => setImmediate(res));
  }
  sock.close();
  if (done) fs.writeFileSync(done, String(n));
  out({ sent: n });
}

const modes = { conn, handshakes, dnsflood };
if (!modes[mode]) {
  out({ error: `unknown mode ${mode}` });
  process.exit(2);
}
await modes[mode]();
// Sockets a step left half-open must not keep the process (and the exec) alive.
process.exit(0);
