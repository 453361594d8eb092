// Fake upstream servers for the egress suite, run inside a network namespace
// that the test made (`ip netns exec NS node upstream.mjs CONFIG.json`).
//
// Everything that happens is written to stdout as one JSON line per event,
// stamped with process.hrtime.bigint() (CLOCK_MONOTONIC, the same clock in
// every process on the host), so the test can time what it sees here against
// what it did (e.g. a policy change) without trusting anything in between:
//   {ev:"listening"}                              all servers are up
//   {ev:"conn", id, proto, local, localPort, remote}   a TCP connection arrived
//   {ev:"req", id, method, url, host}            an HTTP request head
//   {ev:"upgraded", id, host}                    a websocket handshake done
//   {ev:"streaming", id}                         a slow body / stream is flowing
//   {ev:"rx", id, bytes}                         bytes from the client after an upgrade / on a stream
//   {ev:"close", id, how}                        first sign of the end: end, error or close
//   {ev:"udp", port, from, bytes}                a datagram arrived (must never happen)
//   {ev:"dns", name, type, from, answer}         a query to the fake DNS server
//
// Servers are bound to the wildcard address, so every address of the namespace
// is also a trap: a connection to an address that the daemon must never dial
// shows up as a "conn" with that local address.
//
// Config: {tcp: {http:[ports], https:[ports], stream:[ports]}, tls:{cert,key},
//          udp:[ports], dns:{bind, answers:{name:[{A:[...], AAAA:[...], rcode?}...]}}}
// Each DNS name has a list of steps; the n-th question of a type gets step n
// (the last step repeats). TTL is 0, so nothing upstream caches a step.

import crypto from 'node:crypto';
import dgram from 'node:dgram';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';

const cfg = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const now = () => process.hrtime.bigint().toString();
const emit = (o) => process.stdout.write(JSON.stringify({ t: now(), ...o }) + '\n');

let nextId = 1;
const byPeer = new Map(); // "remoteAddr:remotePort" -> id, so a request finds its connection

function track(sock, proto) {
  const id = nextId++;
  const key = `${sock.remoteAddress}:${sock.remotePort}`;
  byPeer.set(key, id);
  emit({ ev: 'conn', id, proto, local: sock.localAddress, localPort: sock.localPort, remote: sock.remoteAddress });
  let done = false;
  const fin = (how) => {
    if (done) return;
    done = true;
    emit({ ev: 'close', id, how });
  };
  sock.on('end', () => fin('end'));
  sock.on('error', (e) => fin(`error:${e.code || e.message}`));
  sock.on('close', () => {
    fin('close');
    byPeer.delete(key);
  });
  return id;
}

const idOf = (sock) => byPeer.get(`${sock.remoteAddress}:${sock.remotePort}`) ?? 0;

// ---------------------------------------------------------------- HTTP(S)

function handler(req, res) {
  const id = idOf(req.socket);
  const host = req.headers.host ?? '';
  emit({ ev: 'req', id, method: req.method, url: req.url, host });
  if (req.url.startsWith('/slow')) {
    // A download that takes 30 s: 1 KiB every 20 ms, until the peer goes away.
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    let n = 0;
    const chunk = Buffer.alloc(1024, 0x61);
    const timer = setInterval(() => {
      if (res.destroyed || n >= 1500) {
        clearInterval(timer);
        if (!res.destroyed) res.end();
        return;
      }
      res.write(chunk);
      if (++n === 5) emit({ ev: 'streaming', id });
    }, 20);
    res.on('close', () => clearInterval(timer));
    return;
  }
  const body = `hello ${host} via ${req.socket.localAddress}\n`;
  res.writeHead(200, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

// A websocket server side, enough for a long-lived upgraded connection: the
// 101 answer, then a text frame every 50 ms; whatever the client sends is
// counted as "rx".
function onUpgrade(req, sock) {
  const id = idOf(sock);
  const host = req.headers.host ?? '';
  emit({ ev: 'req', id, method: req.method, url: req.url, host });
  const accept = crypto.createHash('sha1')
    .update(String(req.headers['sec-websocket-key']) + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11')
    .digest('base64');
  sock.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
    `Sec-WebSocket-Accept: ${accept}\r\n\r\n`);
  emit({ ev: 'upgraded', id, host });
  let n = 0;
  const timer = setInterval(() => {
    if (sock.destroyed) return clearInterval(timer);
    const text = Buffer.from(`tick ${n++}`);
    sock.write(Buffer.concat([Buffer.from([0x81, text.length]), text]));
  }, 50);
  sock.on('data', (d) => emit({ ev: 'rx', id, bytes: d.length }));
  sock.on('close', () => clearInterval(timer));
  sock.on('error', () => {});
}

function setupHttp(server) {
  server.keepAliveTimeout = 120000; // idle keep-alive connections stay open: the daemon must close them
  server.headersTimeout = 120000;
  server.requestTimeout = 0;
  server.on('upgrade', onUpgrade);
  server.on('clientError', (e, sock) => sock.destroy());
  return server;
}

// ---------------------------------------------------------------- raw stream

// A server-speaks-first stream (like SSH or a database): a greeting, then
// "tick" every 50 ms; client bytes are counted.
function streamConn(sock) {
  const id = track(sock, 'stream');
  sock.write(`hello stream via ${sock.localAddress}\n`);
  let n = 0;
  const timer = setInterval(() => {
    if (sock.destroyed) return clearInterval(timer);
    sock.write(`tick ${n}\n`);
    if (++n === 3) emit({ ev: 'streaming', id });
  }, 50);
  sock.on('data', (d) => emit({ ev: 'rx', id, bytes: d.length }));
  sock.on('close', () => clearInterval(timer));
  sock.on('error', () => {});
}

// ---------------------------------------------------------------- DNS

function readName(buf, off) {
  const labels = [];
  for (let guard = 0; guard < 128; guard++) {
    const len = buf[off];
    if (len === undefined) throw new Error('short');
    if (len === 0) return { name: labels.join('.'), end: off + 1 };
    if (len >= 0xc0) throw new Error('compressed question');
    labels.push(buf.subarray(off + 1, off + 1 + len).toString('latin1'));
    off += 1 + len;
  }
  throw new Error('too many labels');
}

function v6bytes(text) {
  let s = text;
  let tail = [];
  const m = /(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (m) {
    const q = m[1].split('.').map(Number);
    tail = [((q[0] << 8) | q[1]).toString(16), ((q[2] << 8) | q[3]).toString(16)];
    s = s.slice(0, -m[1].length) + tail.join(':');
  }
  const [head, rest] = s.split('::');
  const h = head ? head.split(':') : [];
  const r = rest !== undefined && rest !== '' ? rest.split(':') : [];
  const groups = rest === undefined ? h : [...h, ...Array(8 - h.length - r.length).fill('0'), ...r];
  const b = Buffer.alloc(16);
  groups.forEach((g, i) => b.writeUInt16BE(parseInt(g, 16), i * 2));
  return b;
}

const dnsCount = new Map();
const TYPES = { 1: 'A', 28: 'AAAA' };

function dnsAnswer(msg, from) {
  const id = msg.readUInt16BE(0);
  const { name: rawName, end } = readName(msg, 12);
  const qtype = msg.readUInt16BE(end);
  const question = msg.subarray(12, end + 4);
  const name = rawName.toLowerCase();
  const type = TYPES[qtype] ?? String(qtype);
  const steps = cfg.dns.answers[name];
  let rcode = 0;
  let addrs = [];
  if (!steps) {
    rcode = 3;
  } else {
    const key = `${name}/${type}`;
    const n = dnsCount.get(key) ?? 0;
    dnsCount.set(key, n + 1);
    const step = steps[Math.min(n, steps.length - 1)];
    rcode = step.rcode ?? 0;
    addrs = step[type] ?? [];
  }
  emit({ ev: 'dns', name, type, from, answer: rcode ? `rcode ${rcode}` : addrs });
  const rrs = addrs.map((a) => {
    const rdata = type === 'A' ? Buffer.from(a.split('.').map(Number)) : v6bytes(a);
    const rr = Buffer.alloc(12);
    rr.writeUInt16BE(0xc00c, 0);
    rr.writeUInt16BE(qtype, 2);
    rr.writeUInt16BE(1, 4);
    rr.writeUInt32BE(0, 6);
    rr.writeUInt16BE(rdata.length, 10);
    return Buffer.concat([rr, rdata]);
  });
  const hdr = Buffer.alloc(12);
  hdr.writeUInt16BE(id, 0);
  hdr.writeUInt16BE(0x8180 | rcode, 2);
  hdr.writeUInt16BE(1, 4);
  hdr.writeUInt16BE(rrs.length, 6);
  return Buffer.concat([hdr, question, ...rrs]);
}

// ---------------------------------------------------------------- start

const pending = [];
const listen = (server, port, host) => new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen({ port, host, ipv6Only: false }, resolve);
});
const tcp = cfg.tcp ?? {};
for (const port of tcp.http ?? []) {
  const s = setupHttp(http.createServer(handler));
  s.on('connection', (sock) => track(sock, 'http'));
  pending.push(listen(s, port, '::'));
}
if (tcp.https?.length) {
  const opts = { cert: fs.readFileSync(cfg.tls.cert), key: fs.readFileSync(cfg.tls.key) };
  for (const port of tcp.https) {
    const s = setupHttp(https.createServer(opts, handler));
    s.on('connection', (sock) => track(sock, 'https'));
    s.on('tlsClientError', () => {});
    pending.push(listen(s, port, '::'));
  }
}
for (const port of tcp.stream ?? []) {
  pending.push(listen(net.createServer(streamConn), port, '::'));
}
for (const port of cfg.udp ?? []) {
  const s = dgram.createSocket({ type: 'udp6', ipv6Only: false });
  s.on('message', (m, r) => emit({ ev: 'udp', port, from: r.address, bytes: m.length }));
  pending.push(new Promise((resolve, reject) => {
    s.once('error', reject);
    s.bind(port, '::', resolve);
  }));
}
if (cfg.dns) {
  const u = dgram.createSocket('udp4');
  u.on('message', (m, r) => {
    try {
      u.send(dnsAnswer(m, r.address), r.port, r.address);
    } catch (e) {
      emit({ ev: 'dns-bad', from: r.address, error: e.message });
    }
  });
  pending.push(new Promise((resolve, reject) => {
    u.once('error', reject);
    u.bind(53, cfg.dns.bind, resolve);
  }));
  const t = net.createServer((sock) => {
    track(sock, 'dns-tcp');
    let buf = Buffer.alloc(0);
    sock.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      while (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) {
        const msg = buf.subarray(2, 2 + buf.readUInt16BE(0));
        buf = buf.subarray(2 + msg.length);
        try {
          const out = dnsAnswer(msg, sock.remoteAddress);
          const len = Buffer.alloc(2);
          len.writeUInt16BE(out.length);
          sock.write(Buffer.concat([len, out]));
        } catch {
          sock.destroy();
        }
      }
    });
    sock.on('error', () => {});
  });
  pending.push(listen(t, 53, cfg.dns.bind));
}
Promise.all(pending).then(() => emit({ ev: 'listening' }), (e) => {
  emit({ ev: 'failed', error: e.message });
  process.exit(1);
});
