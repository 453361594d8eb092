// One sandbox must never starve the others (issue 11, finding 2): a sandbox that
// opens connections to the DNS stub and the proxy by the thousand and holds them,
// and floods queries and refused hosts, meets its own limits (limit.reached events
// say which); the daemon's descriptors stay bounded, its log does not run away,
// and a second sandbox, the API and exec keep working meanwhile.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';

import { startDaemon, stopDaemon, waitFor, GVISOR } from '../e2e/lib.mjs';

// The daemon's per-sandbox limits (src/egress/egress.h).
const MAX_CONNS = 256;
const MAX_DNS_TCP = 16;

// Runs in the noisy sandbox: opens `conns` connections to a name's synthetic address
// on 443 (the proxy holds each while it waits for a ClientHello) and `dns` to the DNS
// stub over TCP, `perSecond` a second (0: all at once), sends nothing, and holds them
// until /workspace/release appears (at most 60 s). Prints how many were opened and
// how many the far end closed.
const FLOOD = `
const net = require('node:net'), dns = require('node:dns'), fs = require('node:fs');
const [conns, dnsConns, perSecond] = process.argv.slice(2).map(Number);
const stub = fs.readFileSync('/etc/resolv.conf', 'utf8').match(/^nameserver\\s+(\\S+)/m)[1];
let opened = 0, closed = 0;
function one(host, port) {
  const s = net.connect({ host, port });
  s.on('connect', () => opened++);
  s.on('error', () => {});
  s.on('close', () => closed++);
}
function hold(host, port, n) {
  if (!perSecond) for (let i = 0; i < n; i++) one(host, port);
  else for (let i = 0; i < n; i++) setTimeout(() => one(host, port), (i * 1000) / perSecond);
}
dns.lookup('flood.example', { family: 4 }, (err, addr) => {
  if (err) { console.log(JSON.stringify({ error: err.message })); process.exit(1); }
  hold(addr, 443, conns);
  hold(stub, 53, dnsConns);
  const until = Date.now() + 60000;
  const t = setInterval(() => {
    if (fs.existsSync('/workspace/release') || Date.now() > until) {
      clearInterval(t);
      // After this turn's I/O: connections established while the loop was busy opening
      // the rest (under gVisor, seconds) are counted before the answer.
      setImmediate(() => {
        console.log(JSON.stringify({ opened, closed }));
        process.exit(0);
      });
    }
  }, 50);
});
`;

// Runs in the noisy sandbox: keeps `inFlight` connections to a name's synthetic address on
// 443 being opened, each closed as soon as it is open (or refused), until
// /workspace/stop-churn appears (at most 60 s): new connections far faster than the rate
// allows while holding few. Prints how many it opened.
const CHURN = `
const net = require('node:net'), dns = require('node:dns'), fs = require('node:fs');
const inFlight = Number(process.argv[2]);
let opened = 0, stop = false;
dns.lookup('churn.example', { family: 4 }, (err, addr) => {
  if (err) { console.log(JSON.stringify({ error: err.message })); process.exit(1); }
  function one() {
    if (stop) return;
    const s = net.connect({ host: addr, port: 443 });
    s.on('connect', () => { opened++; s.destroy(); });
    s.on('error', () => {});
    s.on('close', () => setImmediate(one));
  }
  for (let i = 0; i < inFlight; i++) one();
  const until = Date.now() + 60000;
  const t = setInterval(() => {
    if (fs.existsSync('/workspace/stop-churn') || Date.now() > until) {
      stop = true;
      clearInterval(t);
      console.log(JSON.stringify({ opened }));
      process.exit(0);
    }
  }, 50);
});
`;

// UDP queries for names of its own, as fast as the socket takes them, for N seconds.
const QUERY_FLOOD = `
const dgram = require('node:dgram'), fs = require('node:fs');
const stub = fs.readFileSync('/etc/resolv.conf', 'utf8').match(/^nameserver\\s+(\\S+)/m)[1];
const s = dgram.createSocket('udp4');
const until = Date.now() + 1000 * Number(process.argv[2]);
let sent = 0;
function query(i) {
  const name = Buffer.from('q' + i + '.flood.example');
  const labels = [];
  for (const l of name.toString().split('.')) labels.push(Buffer.from([l.length]), Buffer.from(l));
  return Buffer.concat([Buffer.from([i >> 8 & 255, i & 255, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0]),
    ...labels, Buffer.from([0, 0, 1, 0, 1])]);
}
(function next() {
  if (Date.now() > until) return s.close(() => console.log(JSON.stringify({ sent })));
  s.send(query(sent++), 53, stub, next);
})();
`;

let d, noisy, victim, closed;
before(async () => {
  d = await startDaemon({ prefix: 'runtime-neighbour-' });
  // Internet on and no allow list: any public name resolves (to the stub's
  // synthetic addresses); nothing here ever reaches a real host.
  noisy = await d.create({ name: 'noisy', network: { internet: true } });
  victim = await d.create({ name: 'victim', network: { internet: true } });
  // No Internet: every name it asks for is refused, each with an event.
  closed = await d.create({ name: 'closed', network: { internet: false, allow: [] } });
  for (const sb of [noisy, victim, closed]) {
    await d.api('PUT', `/v1/sandboxes/${sb.id}/files?path=/workspace/flood.js`, undefined, { raw: FLOOD });
    await d.api('PUT', `/v1/sandboxes/${sb.id}/files?path=/workspace/queries.js`, undefined, { raw: QUERY_FLOOD });
    await d.api('PUT', `/v1/sandboxes/${sb.id}/files?path=/workspace/churn.js`, undefined, { raw: CHURN });
  }
});
after(async () => {
  await stopDaemon(d);
});

function serverFds() {
  const [, server] = d.daemonPids();
  return fs.readdirSync(`/proc/${server}/fd`).length;
}

async function events(id, after = 0) {
  return (await d.api('GET', `/v1/sandboxes/${id}/events?after=${after}`)).body;
}

async function limitsReached(id, after = 0) {
  return (await events(id, after)).filter((e) => e.kind === 'limit.reached').map((e) => e.resource);
}

test('a sandbox opening connections faster than its rate is refused past it, and only it', async () => {
  // Few held, many made: the rate, not the count, is what stops this sandbox. (A flood that
  // holds its connections meets the count first, and the count is checked first.)
  const churn = d.exec(noisy.id, ['node', '/workspace/churn.js', '32'], { timeoutMs: 90000 });
  await waitFor(async () => (await limitsReached(noisy.id)).includes('connections_per_second'),
    { timeoutMs: 30000, what: 'limit.reached for connections_per_second' });
  await d.exec(noisy.id, ['touch', '/workspace/stop-churn']);
  const out = await churn;
  assert.equal(out.exitCode, 0, out.stdout + out.stderr);
  assert.ok(JSON.parse(out.stdout).opened > 0, out.stdout);
  assert.deepEqual(await limitsReached(victim.id), [], 'the victim reached no limit');
});

test('a sandbox holding thousands of connections meets its own limits; its neighbour, the API and exec are unharmed', async () => {
  const fdsBefore = serverFds();
  const logBefore = fs.statSync(d.logFile).size;
  const seqBefore = Math.max(0, ...(await events(noisy.id)).map((e) => e.seq));
  // Two processes, as in the attack, each far past the per-sandbox limits: one opens
  // 3000 at once, one 400 at 90 a second; each holds them, and DNS-over-TCP connections.
  const floods = [
    d.exec(noisy.id, ['node', '/workspace/flood.js', '3000', '500', '0'], { timeoutMs: 90000 }),
    d.exec(noisy.id, ['node', '/workspace/flood.js', '400', '40', '90'], { timeoutMs: 90000 }),
  ];
  let hit = [];
  const wanted = ['connections', 'dns_tcp_connections'];
  await waitFor(async () => {
    hit = await limitsReached(noisy.id, seqBefore);
    return wanted.every((x) => hit.includes(x));
  }, { timeoutMs: 30000, what: { toString: () => `limit.reached for ${wanted.join(', ')} (reached: ${[...new Set(hit)].join(', ') || 'none'})` } });

  // The daemon holds at most the limits' worth of descriptors for the noisy sandbox.
  const fds = serverFds() - fdsBefore;
  assert.ok(fds <= MAX_CONNS * 6 + MAX_DNS_TCP + 64, `the server holds ${fds} more descriptors than before`);
  // Meanwhile the API, exec and the other sandbox's egress work.
  const t0 = Date.now();
  const list = await d.api('GET', '/v1/sandboxes', undefined, { timeoutMs: 5000 });
  assert.equal(list.status, 200);
  const r = await d.exec(victim.id, ['node', '-e', `
    const dns = require('node:dns'), net = require('node:net');
    dns.lookup('victim.example', { family: 4 }, (err, a) => {
      if (err) { console.log('dns ' + err.message); process.exit(1); }
      const s = net.connect({ host: a, port: 443 }, () => { console.log('connected ' + a); s.destroy(); });
      s.on('error', (e) => { console.log('connect ' + e.message); process.exit(1); });
    });`], { timeoutMs: 10000 });
  assert.equal(r.exitCode, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /^connected 198\.1[89]\./);
  assert.ok(Date.now() - t0 < 5000, `the victim waited ${Date.now() - t0} ms`);
  assert.deepEqual(await limitsReached(victim.id), [], 'the victim reached no limit');

  // gVisor's network stack opens a burst of thousands of connections far more slowly than
  // the host's (once none of the 3000 had opened 2 s in): before the release, wait until the
  // noisy sandbox holds its share, counted inside (established to port 443, 0x01BB). The
  // server's descriptors are no count of it: they hold the DNS connections and the execs'
  // pipes too (a run released at 145 connections once). The floods count what they hold
  // after the I/O of the turn that saw the release (FLOOD).
  if (GVISOR) {
    // Every 200 ms: within the sandbox's exec rate.
    await waitFor(async () => {
      const c = await d.sh(noisy.id, 'awk \'$3 ~ /:01BB$/ && $4 == "01"\' /proc/net/tcp | wc -l');
      return Number(c.stdout.trim()) >= MAX_CONNS;
    }, { timeoutMs: 30000, intervalMs: 200, what: `the noisy sandbox to hold ${MAX_CONNS} connections` });
  }
  await d.exec(noisy.id, ['touch', '/workspace/release']);
  const outs = (await Promise.all(floods)).map((x) => JSON.parse(x.stdout));
  const opened = outs.reduce((n, o) => n + o.opened, 0);
  assert.ok(opened >= MAX_CONNS, `the noisy sandbox got its own share: ${JSON.stringify(outs)}`);
  // Limit events are few (one a second per limit), and the log stayed small.
  const reached = await limitsReached(noisy.id, seqBefore);
  assert.ok(reached.length < 40, `limit.reached is rate-limited: ${reached.length}`);
  const grew = fs.statSync(d.logFile).size - logBefore;
  assert.ok(grew < 64 * 1024, `the daemon log grew by ${grew} bytes`);
});

test('a UDP query flood is held to the sandbox\'s query rate; its events are rate-limited and counted', async () => {
  const logBefore = fs.statSync(d.logFile).size;
  const r = await d.exec(noisy.id, ['node', '/workspace/queries.js', '3'], { timeoutMs: 60000 });
  assert.equal(r.exitCode, 0, r.stderr);
  await waitFor(async () => (await limitsReached(noisy.id)).includes('dns_queries_per_second'),
    { timeoutMs: 10000, what: 'limit.reached for DNS queries per second' });
  const victimDns = await d.exec(victim.id, ['getent', 'hosts', 'still-works.example'], { timeoutMs: 5000 });
  assert.equal(victimDns.exitCode, 0, victimDns.stderr);
  const grew = fs.statSync(d.logFile).size - logBefore;
  assert.ok(grew < 64 * 1024, `the daemon log grew by ${grew} bytes`);
});

test('a flood of events is cut to the sandbox\'s rate, and what was dropped is counted', async () => {
  // Every query of this sandbox is refused with an egress.refused event: more a second
  // than a sandbox may record, for longer than its burst lasts.
  const r = await d.exec(closed.id, ['node', '/workspace/queries.js', '8'], { timeoutMs: 60000 });
  assert.equal(r.exitCode, 0, r.stderr);
  // The next event after the flood carries the count of those dropped before it.
  await waitFor(async () => {
    await d.exec(closed.id, ['getent', 'hosts', 'one-more.example']);
    const ev = (await d.api('GET', `/v1/sandboxes/${closed.id}/events?after=0`)).body;
    return ev.some((e) => e.kind === 'events.dropped' && e.count > 0);
  }, { timeoutMs: 20000, what: 'an events.dropped event' });
  const ev = (await d.api('GET', `/v1/sandboxes/${closed.id}/events`)).body;
  const refused = ev.filter((e) => e.kind === 'egress.refused').length;
  const dropped = ev.filter((e) => e.kind === 'events.dropped').reduce((n, e) => n + e.count, 0);
  assert.ok(refused < 600 + 100 * 12, `${refused} refusals recorded`);
  assert.ok(dropped > 0);
  // The victim's events were never cut.
  assert.deepEqual((await d.api('GET', `/v1/sandboxes/${victim.id}/events`)).body.filter((e) => e.kind === 'events.dropped'), []);
});

test('an exec storm is held to the sandbox\'s exec rate (429 with Retry-After), and the neighbour\'s exec still runs', async () => {
  // Waves of 100 at once: past the running cap at once, and past the start rate
  // (100 a second, bursts of 300) once the waves outrun it; at most 40 waves.
  // Under gvisor each exec is a `runsc exec` (tens of ms of CPU): on a small host the
  // execs the running cap lets through cannot start 100 a second, so the start rate is
  // never met there; the running cap is, and the neighbour is unharmed. The rate is the
  // server's, the same for either driver, and the ns run shows it refusing. Three waves
  // show the cap (40 would take a minute).
  const storm = [];
  const rateRefused = () => storm.some((r) => r.status === 429 && /execs a second/.test(r.body.error.message));
  for (let wave = 0; wave < (GVISOR ? 3 : 40) && !rateRefused(); wave++) {
    storm.push(...await Promise.all(Array.from({ length: 100 }, () =>
      d.api('POST', `/v1/sandboxes/${noisy.id}/exec`, { argv: ['true'] }, { timeoutMs: 30000 }))));
  }
  const limited = storm.filter((r) => r.status === 429);
  assert.ok(storm.every((r) => r.status === 200 || r.status === 429), storm.map((r) => r.status).join(' '));
  if (!GVISOR) assert.ok(limited.some((r) => /execs a second/.test(r.body.error.message)), 'the start rate refused some');
  assert.ok(limited.some((r) => /execs, the most it may at once/.test(r.body.error.message)), 'the running cap refused some');
  const t0 = Date.now();
  const r = await d.exec(victim.id, ['echo', 'fine'], { timeoutMs: 5000 });
  assert.equal(r.stdout, 'fine\n');
  assert.ok(Date.now() - t0 < 3000, `the victim's exec took ${Date.now() - t0} ms`);
});
