// Fake upstreams for the secrets suite, run inside the upstream network
// namespace (`ip netns exec NS node upstream.mjs CONFIG.json`).
//
// It records exactly what it received and tells the test on stdout, one JSON
// line per event:
//   {ev:"listening"}
//   {ev:"conn", id, tls, port, remote}         a TCP connection arrived
//   {ev:"secure", id, sni}                     its TLS handshake finished
//   {ev:"rx", id, bytes}                       application bytes arrived (count)
//   {ev:"req", id, n, method, target, version, headers:[[name, value]...], body}
//                                              one parsed request (body as latin1)
//   {ev:"released", id, n}                     a held answer (hold=NAME) was sent
//   {ev:"junk", id, why, head}                 bytes this lenient parser could not read
//   {ev:"close", id, rx}                       the connection ended; rx = all its bytes
//   {ev:"many", count}                         every 500th handshake for *.many.test
//   {ev:"dns", name, type, answer}             a query to the fake DNS server
// Connections whose SNI ends in .many.test are only counted (the cache test
// makes thousands of them).
//
// The answer to each request never repeats what it received (a forwarded
// secret would otherwise travel back into the sandbox): it is
// `{"conn":ID,"req":N}`, with keep-alive, so the test looks the request up
// in the event log. Except on purpose: GET /echo?... reflects the value of the
// request's "Authorization: Bearer VALUE" (see echo() below), for the
// reflection tests; and GET /close?... answers and then closes the TCP
// connection without a TLS close_notify (see closeAnswer()).
//
// Certificates are picked by SNI (see lib.mjs for what each one is), so one
// TLS port serves the good, expired, wrong-host and untrusted upstreams.
//
// Config: {bind, holdDir, https:[ports], http:[ports], certs:{default:{cert,key}, bySni:{name:{cert,key}}},
//          sink:{bind, port}, dns:{bind, suffixes:{".many.test":ADDR}, names:{name:addr}}}

import dgram from 'node:dgram';
import fs from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';

import { echoParts } from './echo.mjs';

const cfg = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const emit = (o) => process.stdout.write(JSON.stringify(o) + '\n');

let nextId = 1;
let many = 0;

// ---------------------------------------------------------------- HTTP/1.1, lenient

// What the proxy forwards must be well-formed; this reads it without judging
// (the test does that from the log), and answers each request in turn.
function httpConn(sock, id, quiet, raw = sock) {
  let buf = Buffer.alloc(0);
  let all = '';
  let n = 0;
  let answered = Promise.resolve();
  sock.on('data', (d) => {
    if (quiet) return;
    emit({ ev: 'rx', id, bytes: d.length });
    all += d.toString('latin1');
    buf = Buffer.concat([buf, d]);
    for (;;) {
      const r = parseOne(buf);
      if (!r) break;
      if (r.junk) {
        emit({ ev: 'junk', id, why: r.junk, head: buf.subarray(0, 200).toString('latin1') });
        sock.destroy();
        return;
      }
      buf = buf.subarray(r.used);
      const k = ++n;
      emit({ ev: 'req', id, n: k, ...r.req });
      const hold = /[?&]hold=(\w+)/.exec(r.req.target);
      if (r.req.target.startsWith('/echo?')) {
        answered = answered.then(() => echo(sock, r.req, hold?.[1], () => emit({ ev: 'released', id, n: k })));
        continue;
      }
      if (r.req.target.startsWith('/close?')) {
        answered = answered.then(() => closeAnswer(sock, raw, r.req));
        continue;
      }
      const body = JSON.stringify({ conn: id, req: k });
      // Answers go in order; a request with hold=NAME in its target is
      // answered once the test creates the file NAME in cfg.holdDir.
      answered = answered.then(() => (hold ? released(hold[1]) : null)).then(() => {
        if (!sock.destroyed) {
          sock.write(`HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
          if (hold) emit({ ev: 'released', id, n: k });
        }
      });
    }
  });
  let done = false;
  const fin = () => {
    if (done) return;
    done = true;
    if (!quiet) emit({ ev: 'close', id, rx: all });
  };
  sock.on('end', () => {
    fin();
    sock.end();
  });
  sock.on('close', fin);
  sock.on('error', fin);
}

// ---------------------------------------------------------------- echoes

// GET /echo?enc=E&frame=cl|chunked[&hold=NAME][&in=header]: the value written
// as E in the body (or, with in=header, in an X-Echo field of the head and a
// short body), framed by Content-Length or chunked. With hold, the body goes
// in two writes split in the middle of the written value (two TLS records;
// chunked: two chunks, the boundary there too), the second once the test
// releases NAME.
async function echo(sock, req, hold, onReleased) {
  const q = new URLSearchParams(req.target.slice(req.target.indexOf('?') + 1));
  const auth = req.headers.find(([k]) => k.toLowerCase() === 'authorization')?.[1] ?? '';
  const value = auth.replace(/^Bearer /, '');
  const [pre, enc, post] = echoParts(value, q.get('enc'));
  const inHeader = q.get('in') === 'header';
  const body = inHeader ? 'see X-Echo' : pre + enc + post;
  const cut = inHeader ? 4 : pre.length + Math.floor(enc.length / 2);
  const chunked = q.get('frame') === 'chunked';
  const head = `HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n${inHeader ? `X-Echo: ${pre}${enc}${post}\r\n` : ''}` +
    (chunked ? 'Transfer-Encoding: chunked\r\n\r\n' : `Content-Length: ${Buffer.byteLength(body, 'latin1')}\r\n\r\n`);
  const piece = (s) => (chunked ? `${Buffer.byteLength(s, 'latin1').toString(16)}\r\n${s}\r\n` : s);
  const write = (s) => new Promise((resolve) => (sock.destroyed ? resolve() : sock.write(s, 'latin1', resolve)));
  await write(head + piece(body.slice(0, cut)));
  if (hold) {
    await released(hold);
    onReleased();
  }
  await write(piece(body.slice(cut)) + (chunked ? '0\r\n\r\n' : ''));
}

// GET /close?frame=cl|chunked|eof[&cut=N]: answers, then ends the TCP connection
// without a TLS close_notify (the socket is destroyed under the TLS layer once
// the answer is written). cut=N: only the first N bytes of the body are sent,
// so the answer is incomplete (never for frame=eof, where EOF ends it).
async function closeAnswer(sock, raw, req) {
  const q = new URLSearchParams(req.target.slice(req.target.indexOf('?') + 1));
  const body = 'the whole answer, delivered\n';
  const frame = q.get('frame');
  const framing = frame === 'chunked' ? 'Transfer-Encoding: chunked\r\n'
    : frame === 'cl' ? `Content-Length: ${body.length}\r\n` : 'Connection: close\r\n';
  let payload = frame === 'chunked' ? `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n` : body;
  if (q.has('cut')) payload = payload.slice(0, Number(q.get('cut')));
  await new Promise((resolve) => sock.write(`HTTP/1.1 200 OK\r\n${framing}\r\n${payload}`, 'latin1', resolve));
  raw.end(); // FIN on the TCP socket under the TLS one: no close_notify before it

}

// Resolves once cfg.holdDir/name exists (polled, at most 20 s).
async function released(name) {
  const file = `${cfg.holdDir}/${name}`;
  for (let i = 0; i < 2000 && !fs.existsSync(file); i++) await new Promise((r) => setTimeout(r, 10));
}

// One request from the start of buf: null (need more), {junk}, or {req, used}.
function parseOne(buf) {
  const end = buf.indexOf('\r\n\r\n');
  if (end < 0) return buf.length > 1 << 20 ? { junk: 'head too large' } : null;
  const lines = buf.subarray(0, end).toString('latin1').split('\r\n');
  const m = /^(\S+) (\S+) (HTTP\/1\.[01])$/.exec(lines[0]);
  if (!m) return { junk: 'request line' };
  const headers = [];
  for (const l of lines.slice(1)) {
    const i = l.indexOf(':');
    if (i <= 0) return { junk: 'field' };
    headers.push([l.slice(0, i), l.slice(i + 1).trim()]);
  }
  const get = (name) => headers.filter(([k]) => k.toLowerCase() === name).map(([, v]) => v);
  let off = end + 4;
  let body = '';
  if (get('transfer-encoding').length) {
    // chunked: size CRLF data CRLF ... 0 CRLF [trailers] CRLF
    for (;;) {
      const le = buf.indexOf('\r\n', off);
      if (le < 0) return null;
      const size = parseInt(buf.subarray(off, le).toString('latin1').split(';')[0], 16);
      if (Number.isNaN(size)) return { junk: 'chunk size' };
      off = le + 2;
      if (size === 0) {
        const te = buf.indexOf('\r\n\r\n', off - 2);
        if (te < 0) return null;
        off = te + 4;
        break;
      }
      if (buf.length < off + size + 2) return null;
      body += buf.subarray(off, off + size).toString('latin1');
      off += size + 2;
    }
  } else if (get('content-length').length) {
    const len = Number(get('content-length')[0]);
    if (buf.length < off + len) return null;
    body = buf.subarray(off, off + len).toString('latin1');
    off += len;
  }
  return { req: { method: m[1], target: m[2], version: m[3], headers, body }, used: off };
}

// ---------------------------------------------------------------- TLS and plain servers

function contexts() {
  const mk = ({ cert, key }) => tls.createSecureContext({ cert: fs.readFileSync(cert), key: fs.readFileSync(key) });
  const byName = new Map(Object.entries(cfg.certs.bySni ?? {}).map(([n, c]) => [n, mk(c)]));
  return { def: mk(cfg.certs.default), byName };
}

const listening = [];
const listen = (server, port) => new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen({ port, host: cfg.bind, backlog: 1024 }, resolve);
});

const ctx = contexts();
for (const port of cfg.https ?? []) {
  const server = net.createServer((raw) => {
    const id = nextId++;
    raw.on('error', () => {});
    let announced = false;
    const t = new tls.TLSSocket(raw, {
      isServer: true,
      secureContext: ctx.def,
      ALPNProtocols: ['http/1.1'],
      SNICallback: (name, cb) => {
        const quiet = name.endsWith('.many.test');
        if (!quiet) {
          emit({ ev: 'conn', id, tls: true, port, remote: raw.remoteAddress, sni: name });
          announced = true;
        }
        cb(null, ctx.byName.get(name) ?? ctx.def);
      },
    });
    t.on('error', () => {});
    t.on('secure', () => {
      const sni = t.servername || '';
      const quiet = sni.endsWith('.many.test');
      if (quiet) {
        if (++many % 500 === 0) emit({ ev: 'many', count: many });
      } else {
        if (!announced) emit({ ev: 'conn', id, tls: true, port, remote: raw.remoteAddress, sni });
        emit({ ev: 'secure', id, sni });
      }
      httpConn(t, id, quiet, raw);
    });
  });
  listening.push(listen(server, port));
}
for (const port of cfg.http ?? []) {
  const server = net.createServer((sock) => {
    const id = nextId++;
    emit({ ev: 'conn', id, tls: false, port, remote: sock.remoteAddress });
    httpConn(sock, id, false);
  });
  listening.push(listen(server, port));
}

// A sink: accepts TCP and never answers. The cache test's names lead here, so
// that the proxy's side toward them costs no TLS work (it only mints a leaf
// and sends a ClientHello) and the machine's CPUs go to what is measured.
if (cfg.sink) {
  let sunk = 0;
  const server = net.createServer((sock) => {
    sock.on('error', () => {});
    sock.resume();
    if (++sunk % 1000 === 0) emit({ ev: 'sunk', count: sunk });
  });
  listening.push(new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port: cfg.sink.port, host: cfg.sink.bind, backlog: 1024 }, resolve);
  }));
}

// ---------------------------------------------------------------- DNS (A only)

function dnsServer() {
  const s = dgram.createSocket('udp4');
  s.on('message', (msg, rinfo) => {
    try {
      const labels = [];
      let off = 12;
      while (msg[off] !== 0 && labels.length < 128) {
        labels.push(msg.subarray(off + 1, off + 1 + msg[off]).toString('latin1'));
        off += msg[off] + 1;
      }
      off += 1;
      const qtype = msg.readUInt16BE(off);
      const name = labels.join('.').toLowerCase();
      let addr = cfg.dns.names?.[name] ?? null;
      for (const [suffix, a] of Object.entries(cfg.dns.suffixes ?? {})) if (!addr && name.endsWith(suffix)) addr = a;
      const hdr = Buffer.alloc(12);
      hdr.writeUInt16BE(msg.readUInt16BE(0), 0);
      hdr.writeUInt16BE(0x8180 | (addr ? 0 : 3), 2);
      hdr.writeUInt16BE(1, 4);
      const answers = [];
      if (addr && qtype === 1) {
        const rr = Buffer.alloc(16);
        rr.writeUInt16BE(0xc00c, 0);
        rr.writeUInt16BE(1, 2);
        rr.writeUInt16BE(1, 4);
        rr.writeUInt32BE(0, 6);
        rr.writeUInt16BE(4, 10);
        Buffer.from(addr.split('.').map(Number)).copy(rr, 12);
        answers.push(rr);
      }
      hdr.writeUInt16BE(answers.length, 6);
      if (!name.endsWith('.many.test')) emit({ ev: 'dns', name, type: qtype, answer: addr });
      s.send(Buffer.concat([hdr, msg.subarray(12, off + 4), ...answers]), rinfo.port, rinfo.address);
    } catch {}
  });
  return new Promise((resolve, reject) => {
    s.once('error', reject);
    s.bind(53, cfg.dns.bind, resolve);
  });
}
if (cfg.dns) listening.push(dnsServer());

Promise.all(listening).then(() => emit({ ev: 'listening' }), (e) => {
  emit({ ev: 'failed', error: String(e) });
  process.exit(1);
});
