// Secrets: 10,000 distinct intercepted names keep the server's leaf
// certificate cache bounded (src/mitm MITM_CACHE_MAX = 1024, least recently
// used evicted). A secret for *.many.test; the fake DNS server (--nameserver)
// answers every such name with the sink address (upstream.mjs: accepts TCP,
// never answers), so the proxy's side toward it costs no TLS work. A client
// in the sandbox resolves each name through the sandbox's resolver and sends
// a raw TLS 1.2 ClientHello; it reads the minted leaf from the Certificate
// message, checks it (issued for that name by the CA in the sandbox's bundle,
// valid now) and hangs up: a shorter handshake, so that the machine's two CPUs
// go to the daemon. For a few names it also makes a whole handshake with
// node's TLS client and reports the serial numbers.
//
// What bounds the run time: the stub resolver makes each new name durable
// before answering (about 2 ms each here), and the daemon signs a leaf per
// new name through the keeper: about 25 s for the 10,000 names on 2 CPUs.
//
// Bounded is shown three ways: the server's RSS grows by little between 2,000
// and 10,000 names (an unbounded cache would hold 8,000 more certificates,
// each well over 1 KiB); the first name's leaf was evicted (a new serial)
// while the last one's is still cached (the same serial); and the server's
// open descriptors come back to where they were.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, test } from 'node:test';

import { SecretsWorld, isRoot, waitFor } from './lib.mjs';

// Under AddressSanitizer (make check: RUNTIME_BUILD=build/asan) freed memory
// sits in a quarantine, so RSS says nothing about the cache; the eviction
// check below still does.
const SANITIZED = /asan|san/.test(process.env.RUNTIME_BUILD ?? '');
const N = 10000;
const FIRST = 2000;
const MAX_GROWTH_KIB = 6 * 1024;

let w, d, sb;

const status = (pid, field) => Number(new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);
const fds = (pid) => fs.readdirSync(`/proc/${pid}/fd`).length;

describe('secrets: the leaf cache stays bounded', { skip: !isRoot() && 'must run as root (runtimed and ip netns need it)' }, () => {
  before(async () => {
    // 10,000 new names and connections in about 25 s: past a sandbox's default rates.
    w = await new SecretsWorld({ daemonArgs: ['--rate', 'dns-queries=100000', '--rate', 'dns-names=100000',
      '--rate', 'connections=100000'] }).setup();
    d = w.daemon;
    await d.putSecret('MANY', { value: 'many-value', hosts: ['*.many.test'] });
    sb = await d.secretsSandbox({ cpus: 2 });
  });
  after(async () => {
    await w?.teardown();
  });

  test(`${N} distinct names: bounded memory, least recently used leaves evicted`, { timeout: 170000 }, async () => {
    const server = d.serverPid();
    const fds0 = fds(server);
    const run = (from, to, fullFor) => d.inside(sb.id, 'handshakes', { from, to, suffix: '.many.test', concurrency: 50, fullFor },
      { timeoutMs: 150000 });

    const a = await run(0, FIRST, [0, FIRST - 1]);
    assert.deepEqual(a.errors, {});
    assert.equal(a.ok, FIRST);
    assert.equal(a.full[0], a.serials[0], 'the second connection to a name gets the cached leaf');
    const rss1 = status(server, 'VmRSS');

    const b = await run(FIRST, N, [N - 1]);
    assert.deepEqual(b.errors, {});
    assert.equal(b.ok, N - FIRST);
    const rss2 = status(server, 'VmRSS');

    const again = await run(N - 1, N, [N - 1]);
    const first = await run(0, 1, [0]);
    assert.equal(again.serials[N - 1], b.serials[N - 1], 'a recent name is still cached');
    assert.notEqual(first.serials[0], a.serials[0], 'the first name was evicted: its leaf is minted anew');

    const growth = rss2 - rss1;
    assert.ok(SANITIZED || growth < MAX_GROWTH_KIB,
      `server RSS grew by ${growth} KiB from ${FIRST} to ${N} names (${rss1} -> ${rss2} KiB; limit ${MAX_GROWTH_KIB})`);
    await waitFor(() => fds(server) <= fds0 + 8, { timeoutMs: 10000, what: `the server's descriptors to come back to ${fds0}` });
    process.stderr.write(`# cache: ${FIRST} names in ${a.ms} ms, ${N - FIRST} in ${b.ms} ms; RSS ${rss1} -> ${rss2} KiB\n`);
  });
});
