// What is not a TCP connection never leaves a sandbox: DNS to any server, over
// UDP or TCP, is answered by the daemon's stub (and never reaches that server);
// other UDP (QUIC included), ICMP and IPv6 are dropped, also for a sender with
// every privilege inside the sandbox's network namespace.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { after, before, describe, test } from 'node:test';

import { processesMatching, token } from '../e2e/lib.mjs';
import { DNS_V4, UP_V4, World, showEvents, isRoot, waitFor } from './lib.mjs';

let w, d, sb;

const SYNTH = /^198\.1[89]\.\d+\.\d+$/;

describe('egress drops all but TCP and DNS', { skip: !isRoot() && 'must run as root (runtimed and ip netns need it)' }, () => {
  before(async () => {
    // The fake name server answers example.test with the upstream's address: if a
    // query from the sandbox ever reached it, the answer would not be synthetic.
    w = await new World({ pins: ['example.test:0:198.51.100.1'], dns: { 'example.test': [{ A: [UP_V4] }] }, traps: false }).setup();
    d = w.daemon;
    sb = await d.sandbox({ internet: true, allow: ['example.test'] });
    const [control] = await d.inside(sb.id, 'probe', { targets: [{ host: 'example.test' }] });
    assert.ok(control.response.startsWith('HTTP/1.1 200'), `the sandbox's TCP egress works: ${JSON.stringify(control)}`);
  });
  after(async () => {
    await w?.teardown();
  });

  test('DNS to any server, over UDP or TCP, is answered by the stub', async () => {
    const refusedName = `${token('probe')}.test`;
    const queries = [
      { resolver: 'node', server: DNS_V4, name: 'example.test' },
      { resolver: 'node', server: DNS_V4, name: refusedName },
      { server: DNS_V4, name: 'example.test' },
      { server: DNS_V4, name: 'example.test', transport: 'tcp' },
      { server: DNS_V4, name: refusedName, transport: 'tcp' },
      { server: UP_V4, name: 'example.test' }, // a host with no name server at all
      { server: '127.0.0.1', name: 'example.test', transport: 'tcp' },
      { server: DNS_V4, name: 'example.test', type: 'AAAA' },
    ];
    const before = w.upstream.find({ ev: 'dns' }).length;
    const [nodeOk, nodeRefused, udp, tcp, tcpRefused, noServer, loop, aaaa] = await d.inside(sb.id, 'dns', { queries });
    assert.ok(nodeOk.addresses?.length === 1 && SYNTH.test(nodeOk.addresses[0]), JSON.stringify(nodeOk));
    assert.equal(nodeRefused.error, 'ENOTFOUND', JSON.stringify(nodeRefused));
    for (const r of [udp, tcp, noServer, loop]) {
      assert.ok(r.rcode === 0 && r.answers.length === 1 && SYNTH.test(r.answers[0]), JSON.stringify(r));
    }
    assert.equal(tcpRefused.rcode, 3, `NXDOMAIN: ${JSON.stringify(tcpRefused)}`);
    assert.deepEqual([aaaa.rcode, aaaa.answers], [0, []], 'no AAAA: the sandbox has no IPv6');
    assert.equal(w.upstream.find({ ev: 'dns' }).length, before, 'a query left the sandbox');
    assert.deepEqual(w.upstream.find({ ev: 'conn', proto: 'dns-tcp' }), []);
    const events = await d.events(sb.id);
    assert.ok(events.filter((e) => e.host === refusedName && e.reason === 'not_allowed' && e.stage === 'dns').length >= 2,
      showEvents(events).join('\n'));
  });

  test('UDP (QUIC too) and DNS on other ports are dropped', async () => {
    const quic = 'c3000000010800000000000000000000' + '00'.repeat(1184); // a QUIC v1 Initial's first bytes, padded
    const results = await d.inside(sb.id, 'udp', {
      targets: [
        { host: UP_V4, port: 9999, hex: '68656c6c6f' },
        { host: UP_V4, port: 443, hex: quic },
        { host: 'example.test', port: 443, hex: quic }, // the allowed name's (synthetic) address
        { host: DNS_V4, port: 5353, hex: '0000' },
      ],
    });
    for (const r of results) assert.deepEqual(r.errors, ['EPERM', 'EPERM', 'EPERM'], JSON.stringify(r));
    const dns = await d.inside(sb.id, 'dns', { queries: [{ server: DNS_V4, port: 5353, name: 'example.test' }] });
    assert.equal(dns[0].error, 'EPERM');
    assert.deepEqual(w.upstream.find({ ev: 'udp' }), [], 'a datagram reached the upstream');
  });

  test('ICMP cannot be sent, not even by root in the sandbox namespace', async () => {
    const user = await d.exec(sb.id, ['perl', '-e', 'use Socket; ' +
      'socket(my $r, PF_INET, SOCK_RAW, 1) ? print "raw: ok\\n" : print "raw: $!\\n"; ' +
      'socket(my $g, PF_INET, SOCK_DGRAM, 1) ? print "ping socket: ok\\n" : print "ping socket: $!\\n";']);
    assert.match(user.stdout, /^raw: Operation not permitted\nping socket: Permission denied\n$/, user.stdout + user.stderr);

    // Root with CAP_NET_RAW in the sandbox's network namespace: the nft rules drop it.
    const marker = token('egress-icmp');
    await d.exec(sb.id, ['sh', '-c', `node -e 'setTimeout(() => {}, 15000)' ${marker} >/dev/null 2>&1 </dev/null &`]);
    const pid = await waitFor(() => processesMatching(marker).find((p) => p.cmdline.startsWith('node'))?.pid,
      { what: 'the marker process in the sandbox' });
    const ns = (p) => fs.readlinkSync(`/proc/${p}/ns/net`);
    assert.notEqual(ns(pid), ns(process.pid));
    const script = `
      use Socket qw(:all);
      sub cksum { my $s = 0; $s += $_ for unpack("n*", $_[0] . (length($_[0]) % 2 ? "\\0" : "")); $s = ($s >> 16) + ($s & 0xffff); $s += $s >> 16; return ~$s & 0xffff; }
      my $echo = pack("CCnnn", 8, 0, 0, 0x5254, 1) . "runtime";
      substr($echo, 2, 2) = pack("n", cksum($echo));
      socket(my $r, PF_INET, SOCK_RAW, IPPROTO_ICMP) or die "socket: $!";
      print defined(send($r, $echo, 0, pack_sockaddr_in(0, inet_aton("${UP_V4}")))) ? "icmp: sent\\n" : "icmp: $!\\n";
      socket(my $u, PF_INET, SOCK_DGRAM, IPPROTO_UDP) or die "socket: $!";
      print defined(send($u, "x", 0, pack_sockaddr_in(9999, inet_aton("${UP_V4}")))) ? "udp: sent\\n" : "udp: $!\\n";
      socket(my $s6, PF_INET6, SOCK_RAW, 58) or die "socket6: $!";
      print defined(send($s6, pack("CCnnn", 128, 0, 0, 1, 1), 0, pack_sockaddr_in6(0, inet_pton(AF_INET6, "2001:db8::1")))) ? "icmp6: sent\\n" : "icmp6: $!\\n";
    `;
    const r = spawnSync('nsenter', ['-t', String(pid), '-n', 'perl', '-e', script], { encoding: 'utf8', timeout: 10000 });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, 'icmp: Operation not permitted\nudp: Operation not permitted\nicmp6: Network is unreachable\n');
    assert.deepEqual(w.upstream.find({ ev: 'udp' }), []);
  });

  test('IPv6 goes nowhere: no route, no AAAA, nothing reaches the upstream', async () => {
    const conns = w.upstream.find({ ev: 'conn' }).length;
    const [probe] = await d.inside(sb.id, 'probe', { targets: [{ host: '2001:db8::1', hostHeader: 'example.test' }] });
    assert.equal(probe.error, 'ENETUNREACH', JSON.stringify(probe));
    const udp = await d.inside(sb.id, 'udp', { targets: [{ host: '2001:db8::1', port: 9999, hex: '00' }] });
    assert.deepEqual(udp[0].errors, ['ENETUNREACH', 'ENETUNREACH', 'ENETUNREACH']);
    const curl = await d.exec(sb.id, ['curl', '-sS', '-m', '3', '-6', 'http://[2001:db8::1]/hello']);
    assert.notEqual(curl.exitCode, 0);
    const fetched = await d.inside(sb.id, 'fetch', { urls: ['http://[2001:db8::1]/hello'] });
    assert.ok(fetched[0].error, JSON.stringify(fetched));
    const curl6 = await d.exec(sb.id, ['curl', '-sS', '-m', '3', '-6', 'http://example.test/hello']);
    assert.notEqual(curl6.exitCode, 0, 'an allowed name has no IPv6 address in the sandbox');
    assert.equal(w.upstream.find({ ev: 'conn' }).length, conns);
  });
});
