// Runs inside a sandbox (node 20 built-ins only): `node inside.mjs MODE JSON`.
// Short modes print one JSON result on stdout; the background modes ("hold",
// "loop") append JSON lines to a log file under /workspace while they run.
// No proxy settings anywhere: every connection here is redirected to the
// daemon's proxy by the sandbox's own network namespace.

import crypto from 'node:crypto';
import dgram from 'node:dgram';
import dns from 'node:dns';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { Duplex } from 'node:stream';
import tls from 'node:tls';

const [mode, argText] = process.argv.slice(2);
const arg = argText ? JSON.parse(argText) : {};
const delay = (ms) => new Promise((r) => setTimeout(r, ms));
const out = (v) => process.stdout.write(JSON.stringify(v) + '\n');

// ---------------------------------------------------------------- probe

// One TCP connection: connect (a name goes through the sandbox's resolver),
// send `send` (an HTTP request unless told otherwise), read what comes back
// until the peer closes or timeoutMs. Never throws: the result says it all.
function probeOne({ host, port = 80, send, hostHeader, timeoutMs = 4000 }) {
  return new Promise((resolve) => {
    const r = { host, port, connected: false, response: '', error: null, end: null };
    let done = false;
    const finish = (how) => {
      if (done) return;
      done = true;
      r.end = how;
      clearTimeout(timer);
      sock.destroy();
      resolve(r);
    };
    const sock = net.connect({ host, port });
    const timer = setTimeout(() => finish('timeout'), timeoutMs);
    sock.on('connect', () => {
      r.connected = true;
      r.address = sock.remoteAddress;
      const payload = send ?? `GET /hello HTTP/1.1\r\nHost: ${hostHeader ?? host}\r\nConnection: close\r\n\r\n`;
      if (payload) sock.write(payload);
    });
    sock.on('data', (d) => {
      if (r.response.length < 4096) r.response += d.toString('latin1');
    });
    sock.on('end', () => finish('end'));
    sock.on('error', (e) => {
      r.error = e.code || e.message;
      finish('error');
    });
  });
}

async function probe() {
  out(await Promise.all(arg.targets.map(probeOne)));
}

// ---------------------------------------------------------------- TLS, split

// A Duplex over a TCP socket that re-cuts the first thing TLS writes (the
// ClientHello record): "tcp" sends it in small pieces with pauses (several TCP
// segments), "record" re-frames the handshake message into two TLS records
// cut in the middle of the server name, sent in two writes with a pause.
class Splitter extends Duplex {
  constructor(sock, how, pieces) {
    super();
    this.sock = sock;
    this.how = how;
    this.pieces = pieces;
    this.first = true;
    this.sent = []; // [bytes, starts a TLS record] of each piece of the ClientHello
    sock.on('data', (d) => this.push(d));
    sock.on('end', () => this.push(null));
    sock.on('error', (e) => this.destroy(e));
    sock.on('close', () => this.destroy());
  }

  _read() {}

  async _write(chunk, enc, cb) {
    try {
      if (!this.first) {
        this.sock.write(chunk, cb);
        return;
      }
      this.first = false;
      for (const part of this.cut(chunk)) {
        this.sent.push([part.length, part[0] === 0x16 && part.length > 5]);
        await new Promise((r) => this.sock.write(part, r));
        await delay(40); // Nagle aside, a pause makes each piece its own segment
      }
      cb();
    } catch (e) {
      cb(e);
    }
  }

  cut(buf) {
    if (buf[0] !== 0x16) return [buf];
    const len = buf.readUInt16BE(3);
    const body = buf.subarray(5, 5 + len);
    const rest = buf.subarray(5 + len);
    if (this.how === 'tcp') {
      const parts = [buf.subarray(0, 1), buf.subarray(1, 5)]; // even the record header split
      const step = Math.ceil(body.length / this.pieces);
      for (let i = 0; i < body.length; i += step) parts.push(body.subarray(i, i + step));
      if (rest.length) parts.push(rest);
      return parts;
    }
    // "record": cut the handshake message in the middle of the server name.
    const sni = Buffer.from(arg.servername, 'latin1');
    const at = body.indexOf(sni);
    const cutAt = at > 0 ? at + Math.floor(sni.length / 2) : Math.floor(body.length / 2);
    const rec = (b) => Buffer.concat([Buffer.from([0x16, buf[1], buf[2], b.length >> 8, b.length & 0xff]), b]);
    return [rec(body.subarray(0, cutAt)), rec(body.subarray(cutAt)), ...(rest.length ? [rest] : [])];
  }
}

async function split() {
  const { host, port = 443, servername, how, pieces = 6, ca, timeoutMs = 5000 } = arg;
  const r = { host, servername, how, ok: false, response: '', error: null };
  await new Promise((resolve) => {
    const timer = setTimeout(() => {
      r.error = r.error ?? 'timeout';
      resolve();
    }, timeoutMs);
    const raw = net.connect({ host, port });
    raw.setNoDelay(true);
    raw.on('error', (e) => {
      r.error = r.error ?? (e.code || e.message);
    });
    raw.on('connect', () => {
      const splitter = new Splitter(raw, how, pieces);
      r.pieces = splitter.sent;
      const t = tls.connect({ socket: splitter, servername, ca: fs.readFileSync(ca) });
      t.on('secureConnect', () => {
        r.ok = true;
        t.write(`GET /hello HTTP/1.1\r\nHost: ${servername}\r\nConnection: close\r\n\r\n`);
      });
      t.on('data', (d) => {
        r.response += d.toString('latin1');
      });
      t.on('error', (e) => {
        r.error = r.error ?? (e.code || e.message);
        clearTimeout(timer);
        resolve();
      });
      t.on('close', () => {
        clearTimeout(timer);
        resolve();
      });
    });
    raw.on('close', () => setTimeout(() => {
      clearTimeout(timer);
      resolve();
    }, 50));
  });
  out(r);
}

// ---------------------------------------------------------------- DNS

function query(name, type) {
  const id = crypto.randomInt(65536);
  const hdr = Buffer.alloc(12);
  hdr.writeUInt16BE(id, 0);
  hdr.writeUInt16BE(0x0100, 2); // RD
  hdr.writeUInt16BE(1, 4);
  const labels = name.split('.').map((l) => Buffer.concat([Buffer.from([l.length]), Buffer.from(l)]));
  const tail = Buffer.alloc(5);
  tail.writeUInt16BE(type === 'AAAA' ? 28 : 1, 1);
  tail.writeUInt16BE(1, 3);
  return Buffer.concat([hdr, ...labels, tail]);
}

function parseAnswer(msg) {
  const rcode = msg.readUInt16BE(2) & 0xf;
  const an = msg.readUInt16BE(6);
  let off = 12;
  while (msg[off] !== 0) off += msg[off] + 1;
  off += 5;
  const answers = [];
  for (let i = 0; i < an; i++) {
    if (msg[off] >= 0xc0) off += 2;
    else {
      while (msg[off] !== 0) off += msg[off] + 1;
      off += 1;
    }
    const type = msg.readUInt16BE(off);
    const rdlen = msg.readUInt16BE(off + 8);
    const rd = msg.subarray(off + 10, off + 10 + rdlen);
    if (type === 1) answers.push([...rd].join('.'));
    if (type === 28) answers.push(rd.toString('hex'));
    off += 10 + rdlen;
  }
  return { rcode, answers };
}

// Raw DNS over UDP or TCP to the server and port the test names.
function rawDns({ server, port = 53, name, type = 'A', transport = 'udp', timeoutMs = 2000 }) {
  return new Promise((resolve) => {
    const q = query(name, type);
    const r = { server, port, name, type, transport };
    const timer = setTimeout(() => done({ error: 'timeout' }), timeoutMs);
    let sock;
    function done(v) {
      clearTimeout(timer);
      try {
        if (transport === 'udp') sock.close();
        else sock.destroy();
      } catch {}
      resolve({ ...r, ...v });
    }
    if (transport === 'udp') {
      sock = dgram.createSocket(server.includes(':') ? 'udp6' : 'udp4');
      sock.on('message', (m) => done(parseAnswer(m)));
      sock.on('error', (e) => done({ error: e.code || e.message }));
      sock.send(q, port, server, (e) => e && done({ error: e.code || e.message }));
    } else {
      sock = net.connect({ host: server, port });
      let buf = Buffer.alloc(0);
      sock.on('connect', () => {
        const len = Buffer.alloc(2);
        len.writeUInt16BE(q.length);
        sock.write(Buffer.concat([len, q]));
      });
      sock.on('data', (d) => {
        buf = Buffer.concat([buf, d]);
        if (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) done(parseAnswer(buf.subarray(2)));
      });
      sock.on('error', (e) => done({ error: e.code || e.message }));
      sock.on('end', () => done({ error: 'closed' }));
    }
  });
}

// node's own resolver (c-ares), pointed at a server of the test's choosing.
async function nodeResolver({ server, name }) {
  const res = new dns.promises.Resolver({ timeout: 1500, tries: 1 });
  res.setServers([server]);
  try {
    return { server, name, addresses: await res.resolve4(name) };
  } catch (e) {
    return { server, name, error: e.code };
  }
}

async function dnsMode() {
  const results = [];
  for (const q of arg.queries) results.push(q.resolver === 'node' ? await nodeResolver(q) : await rawDns(q));
  out(results);
}

// ---------------------------------------------------------------- UDP

async function udp() {
  const results = [];
  for (const { host, port, hex } of arg.targets) {
    const payload = Buffer.from(hex, 'hex');
    const family = net.isIPv6(host) ? 'udp6' : 'udp4';
    const s = dgram.createSocket(family);
    const r = await new Promise((resolve) => {
      const errs = [];
      s.on('error', (e) => errs.push(e.code));
      let sent = 0;
      const next = () => {
        if (sent === 3) return resolve({ host, port, errors: errs });
        sent++;
        s.send(payload, port, host, (e) => {
          if (e) errs.push(e.code || e.message);
          setTimeout(next, 20);
        });
      };
      next();
    });
    s.close();
    results.push(r);
  }
  out(results);
}

// ---------------------------------------------------------------- fetch

async function fetchMode() {
  const results = [];
  for (const url of arg.urls) {
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(5000) });
      results.push({ url, status: res.status, body: await res.text() });
    } catch (e) {
      results.push({ url, error: e.cause?.code || e.cause?.message || e.message });
    }
  }
  out(results);
}

// ---------------------------------------------------------------- hold

// Long-lived connections for the policy-change test (each request's path ends
// in ?n=NAME, so the upstream can tell them apart), logged as JSON lines to
// arg.log: {t, name, ev} with ev "ready" (the connection is set up: an idle
// keep-alive socket, a download under way, an upgraded websocket), "close"
// (the sandbox saw it end), "data" (websocket frames after ready, counted).
// Each websocket also sends a small frame every 100 ms so the upstream can
// tell that the connection still carries bytes. Exits once every connection
// has closed, or after arg.maxMs.
function hold() {
  const log = (o) => fs.appendFileSync(arg.log, JSON.stringify({ t: Date.now(), ...o }) + '\n');
  const open = new Set();
  const closed = (name, why) => {
    if (!open.has(name)) return;
    open.delete(name);
    log({ name, ev: 'close', why });
    if (open.size === 0) setTimeout(() => process.exit(0), 50);
  };
  for (const { name, host, kind } of arg.targets) {
    open.add(name);
    if (kind === 'keepalive') {
      const agent = new http.Agent({ keepAlive: true, keepAliveMsecs: 60000, maxSockets: 1 });
      const req = http.get({ host, path: `/hello?n=${name}`, agent, headers: { host } }, (res) => {
        res.resume();
        res.on('end', () => log({ name, ev: 'ready' }));
      });
      req.on('socket', (s) => {
        s.on('close', () => closed(name, 'socket closed'));
        s.on('error', () => {});
      });
      req.on('error', (e) => closed(name, e.code));
    } else if (kind === 'download') {
      const req = http.get({ host, path: `/slow?n=${name}`, headers: { host } }, (res) => {
        let bytes = 0;
        res.on('data', (d) => {
          bytes += d.length;
          if (bytes >= 4096 && bytes - d.length < 4096) log({ name, ev: 'ready' });
        });
        res.on('close', () => closed(name, `response closed after ${bytes} bytes`));
        res.on('error', () => {});
      });
      req.on('error', (e) => closed(name, e.code));
    } else if (kind === 'ws') {
      const req = http.request({
        host, path: `/ws?n=${name}`,
        headers: {
          host, Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Version': '13',
          'Sec-WebSocket-Key': crypto.randomBytes(16).toString('base64'),
        },
      });
      req.on('upgrade', (res, sock) => {
        log({ name, ev: 'ready' });
        let frames = 0;
        sock.on('data', () => {
          frames++;
          if (frames % 10 === 0) log({ name, ev: 'data', frames });
        });
        // A masked, empty-ish client frame, as a websocket client would send.
        const ping = setInterval(() => {
          if (!sock.destroyed) sock.write(Buffer.from([0x89, 0x80, 1, 2, 3, 4]));
        }, 100);
        sock.on('close', () => {
          clearInterval(ping);
          closed(name, `websocket closed after ${frames} frames`);
        });
        sock.on('error', () => {});
      });
      req.on('error', (e) => closed(name, e.code));
      req.end();
    }
  }
  setTimeout(() => {
    log({ ev: 'deadline', open: [...open] });
    process.exit(0);
  }, arg.maxMs ?? 20000);
}

// ---------------------------------------------------------------- loop

// For "no egress with the daemon stopped": every arg.everyMs, (1) ask the
// sandbox's resolver for arg.name, (2) connect to the address it gave at the
// start and send a request, (3) connect by the fresh answer, if any. Each
// attempt is one JSON line in arg.log. Ends after arg.maxMs, or once it has
// seen success, then failures, then success again (the daemon came back).
async function loop() {
  const log = (o) => fs.appendFileSync(arg.log, JSON.stringify({ t: Date.now(), ...o }) + '\n');
  const resolver = new dns.promises.Resolver({ timeout: 300, tries: 1 });
  // The sandbox's nameserver: the ns driver's stub at 127.0.0.53, the gvisor driver's on
  // the holder's end of its veth (loopback never leaves gVisor's own network stack).
  const conf = fs.readFileSync('/etc/resolv.conf', 'utf8');
  resolver.setServers([(/^nameserver\s+(\S+)/m.exec(conf) ?? [])[1] ?? '127.0.0.53']);
  const lookup = async () => {
    try {
      return { addr: (await resolver.resolve4(arg.name))[0] };
    } catch (e) {
      return { error: e.code };
    }
  };
  const attempt = async (addr, i) => {
    const r = await probeOne({
      host: addr, port: arg.port, timeoutMs: 800,
      send: `GET /hello?loop=${i} HTTP/1.1\r\nHost: ${arg.name}\r\nConnection: close\r\n\r\n`,
    });
    return r.response.startsWith('HTTP/1.1 200') ? 'ok' : `fail:${r.error ?? r.end}`;
  };
  const first = await lookup();
  log({ ev: 'start', first });
  const start = Date.now();
  let phase = 0; // 0: waiting for success, 1: success seen, 2: failures seen, 3: back
  let after = 0;
  for (let i = 0; Date.now() - start < arg.maxMs; i++) {
    const t0 = Date.now();
    const fresh = await lookup();
    const old = first.addr ? await attempt(first.addr, `${i}a`) : 'no-address';
    const now = fresh.addr ? await attempt(fresh.addr, `${i}b`) : `fail:dns:${fresh.error}`;
    log({ i, t0, dns: fresh.addr ?? `fail:${fresh.error}`, old, now });
    const ok = now === 'ok';
    if (phase === 0 && ok) phase = 1;
    else if (phase === 1 && !ok) phase = 2;
    else if (phase === 2 && ok) phase = 3;
    if (phase === 3 && ++after >= 3) break;
    await delay(arg.everyMs);
  }
  log({ ev: 'done', phase });
}

const modes = { probe, split, dns: dnsMode, udp, fetch: fetchMode, hold, loop };
if (!modes[mode]) {
  out({ error: `unknown mode ${mode}` });
  process.exit(2);
}
await modes[mode]();
