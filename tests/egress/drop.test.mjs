// What is not a TCP connection never leaves a sandbox: DNS to any server, over
// UDP or TCP, is answered by the daemon's stub (and never reaches that server);
// other UDP (QUIC included), ICMP and IPv6 are dropped, also for a sender with
// every privilege inside the sandbox's network namespace.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { after, before, describe, test } from 'node:test';

import { processesMatching, token, GVISOR, runscProcesses, sandboxInit } from '../e2e/lib.mjs';
import { DNS_V4, UP_V4, World, delay, showEvents, isRoot, waitFor } from './lib.mjs';

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
    for (const r of [udp, tcp, noServer, ...(GVISOR ? [] : [loop])]) {
      assert.ok(r.rcode === 0 && r.answers.length === 1 && SYNTH.test(r.answers[0]), JSON.stringify(r));
    }
    // Under gvisor a loopback address is gVisor's own loopback: a query to 127.0.0.1 never
    // leaves gVisor's network stack, so no one answers it (nor sees it); the stub is the
    // nameserver of /etc/resolv.conf, on the holder's end of the veth.
    if (GVISOR) assert.equal(loop.error, 'ECONNREFUSED', JSON.stringify(loop));
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
    // Under ns the output filter refuses them in the sender's namespace (EPERM). Under gvisor
    // they leave gVisor's stack as frames and the holder's namespace drops them (nothing is
    // forwarded there): the send succeeds and nothing arrives, which is what counts.
    for (const r of results) assert.deepEqual(r.errors, GVISOR ? [] : ['EPERM', 'EPERM', 'EPERM'], JSON.stringify(r));
    const dns = await d.inside(sb.id, 'dns', { queries: [{ server: DNS_V4, port: 5353, name: 'example.test' }] });
    assert.equal(dns[0].error, GVISOR ? 'timeout' : 'EPERM', JSON.stringify(dns[0]));
    assert.deepEqual(w.upstream.find({ ev: 'udp' }), [], 'a datagram reached the upstream');
  });

  test('ICMP cannot be sent, not even by root in the sandbox namespace', async () => {
    const user = await d.exec(sb.id, ['perl', '-e', 'use Socket; ' +
      'socket(my $r, PF_INET, SOCK_RAW, 1) ? print "raw: ok\\n" : print "raw: $!\\n"; ' +
      'socket(my $g, PF_INET, SOCK_DGRAM, 1) ? print "ping socket: ok\\n" : print "ping socket: $!\\n";']);
    // gVisor lets any user open an ICMP datagram (ping) socket; what it sends goes the way of
    // every packet under gvisor, down the veth into the holder's namespace, which drops it
    // (icmpFromGvisorNamespaces counts what reaches the upstream: nothing).
    assert.match(user.stdout, GVISOR ? /^raw: Operation not permitted\nping socket: ok\n$/
      : /^raw: Operation not permitted\nping socket: Permission denied\n$/, user.stdout + user.stderr);

    if (GVISOR) return icmpFromGvisorNamespaces();
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

  /** Under gvisor the sandbox's programs have no host network namespace; on the host there
   * are two: the inner one, where runsc's sentry holds the veth that gVisor's frames go down
   * (runsc took its address and routes into gVisor), and the holder's, where they arrive and
   * the redirect sits. Root with CAP_NET_RAW in either has no route out; and frames written
   * straight onto the veth, as a sentry gone rogue could (ICMP, UDP and a TCP SYN to the
   * upstream), stop in the holder's namespace: nothing is forwarded there, and a SYN goes
   * to the proxy, which refuses an address not allowed. The upstream's namespace counts
   * what arrives: nothing. */
  async function icmpFromGvisorNamespaces() {
    const nft = (args, input) => spawnSync('ip', ['netns', 'exec', w.uns, 'nft', ...args], { input, encoding: 'utf8' });
    const add = nft(['-f', '-'], `table inet rt_arrivals {
  counter pings {}
  counter datagrams {}
  counter syns {}
  chain pre { type filter hook prerouting priority -400; policy accept;
    icmp type echo-request counter name pings
    icmpv6 type echo-request counter name pings
    meta l4proto udp counter name datagrams
    tcp flags & (syn | ack) == syn counter name syns
  }
}`);
    assert.equal(add.status, 0, add.stderr);
    try {
      const ping = await d.exec(sb.id, ['ping', '-c', '2', '-W', '1', UP_V4], { timeoutMs: 10000 });
      assert.notEqual(ping.exitCode, 0, ping.stdout);
      assert.doesNotMatch(ping.stdout, /bytes from/);
      const [sentry] = runscProcesses(d.stateDir, sb.id).filter((p) => p.cmdline.startsWith('runsc-sandbox'));
      const holder = sandboxInit(d.stateDir, sb.id);
      assert.ok(sentry && holder, 'the sentry and the holder on the host');
      const ns = (p) => fs.readlinkSync(`/proc/${p}/ns/net`);
      for (const p of [sentry.pid, holder.pid]) assert.notEqual(ns(p), ns(process.pid));
      const script = `
        use Socket qw(:all);
        sub cksum { my $s = 0; $s += $_ for unpack("n*", $_[0] . (length($_[0]) % 2 ? "\\0" : "")); $s = ($s >> 16) + ($s & 0xffff); $s += $s >> 16; return ~$s & 0xffff; }
        my $echo = pack("CCnnn", 8, 0, 0, 0x5254, 1) . "runtime";
        substr($echo, 2, 2) = pack("n", cksum($echo));
        socket(my $r, PF_INET, SOCK_RAW, IPPROTO_ICMP) or die "socket: $!";
        print defined(send($r, $echo, 0, pack_sockaddr_in(0, inet_aton("${UP_V4}")))) ? "icmp: sent\\n" : "icmp: $!\\n";
        socket(my $u, PF_INET, SOCK_DGRAM, IPPROTO_UDP) or die "socket: $!";
        print defined(send($u, "x", 0, pack_sockaddr_in(9999, inet_aton("${UP_V4}")))) ? "udp: sent\\n" : "udp: $!\\n";
      `;
      for (const [p, where] of [[sentry.pid, 'the inner namespace'], [holder.pid, "the holder's namespace"]]) {
        const r = spawnSync('nsenter', ['-t', String(p), '-n', 'perl', '-e', script], { encoding: 'utf8', timeout: 10000 });
        assert.equal(r.status, 0, r.stderr);
        assert.equal(r.stdout, 'icmp: Network is unreachable\nudp: Network is unreachable\n', `no route out of ${where}`);
      }
      // Frames onto the veth from the inner namespace, addressed to the holder's end; a table
      // of the test's own in the holder's namespace counts that they arrive there.
      const inHolder = (args, input) => spawnSync('nsenter', ['-t', String(holder.pid), '-n', 'nft', ...args], { input, encoding: 'utf8' });
      const seen = inHolder(['-f', '-'], `table inet rt_test_seen {
  counter pings {}
  counter datagrams {}
  counter syns {}
  chain pre { type filter hook prerouting priority -500; policy accept;
    iifname "rt-host" icmp type echo-request counter name pings
    iifname "rt-host" udp dport 9999 counter name datagrams
    iifname "rt-host" tcp dport 5432 tcp flags & (syn | ack) == syn counter name syns
  }
}`);
      assert.equal(seen.status, 0, seen.stderr);
      const mac = (pid, dev) => JSON.parse(spawnSync('nsenter', ['-t', String(pid), '-n', 'ip', '-j', 'link', 'show', dev],
        { encoding: 'utf8' }).stdout)[0].address;
      const outerMac = mac(holder.pid, 'rt-host');
      const innerMac = mac(sentry.pid, 'eth0');
      const frames = spawnSync('nsenter', ['-t', String(sentry.pid), '-n', 'python3', '-c', `
import socket, struct
def csum(b):
    if len(b) % 2: b += b"\\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b)); s = (s >> 16) + (s & 0xffff); s += s >> 16
    return ~s & 0xffff
src, dst = socket.inet_aton("10.200.0.2"), socket.inet_aton("${UP_V4}")
def ip(proto, payload):
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), 1, 0, 64, proto, 0, src, dst)
    return h[:10] + struct.pack("!H", csum(h)) + h[12:] + payload
def l4(proto, seg):
    pseudo = src + dst + struct.pack("!BBH", 0, proto, len(seg))
    c = csum(pseudo + seg)
    return seg[:(6 if proto == 17 else 16)] + struct.pack("!H", c) + seg[(8 if proto == 17 else 18):]
icmp = struct.pack("!BBHHH", 8, 0, 0, 0x5254, 1) + b"runtime"
icmp = icmp[:2] + struct.pack("!H", csum(icmp)) + icmp[4:]
udp = l4(17, struct.pack("!HHHH", 40000, 9999, 9, 0) + b"x")
syn = l4(6, struct.pack("!HHIIBBHHH", 40001, 5432, 1, 0, 5 << 4, 0x02, 64240, 0, 0))
eth = bytes.fromhex("${outerMac}".replace(":", "")) + bytes.fromhex("${innerMac}".replace(":", "")) + b"\\x08\\x00"
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("eth0", 0))
for p in (ip(1, icmp), ip(17, udp), ip(6, syn)):
    for _ in range(3): s.send(eth + p)
print("sent")
`], { encoding: 'utf8', timeout: 10000 });
      assert.equal(frames.stdout, 'sent\n', frames.stderr);
      const arrived = () => JSON.parse(inHolder(['-j', 'list', 'counters', 'table', 'inet', 'rt_test_seen']).stdout).nftables
        .filter((o) => o.counter).map((o) => `${o.counter.name} ${o.counter.packets}`).sort();
      await waitFor(() => arrived().join() === 'datagrams 3,pings 3,syns 3',
        { timeoutMs: 3000, what: `the frames in the holder's namespace (${arrived()})` });
      inHolder(['delete', 'table', 'inet', 'rt_test_seen']);
      // The control: one of each from the daemon's namespace, which does reach the upstream.
      const control = spawnSync('ip', ['netns', 'exec', w.dns, 'bash', '-c', `ping -c 1 -W 1 ${UP_V4} >/dev/null; ` +
        `echo x > /dev/udp/${UP_V4}/9; timeout 2 bash -c '</dev/tcp/${UP_V4}/9' 2>/dev/null; true`], { encoding: 'utf8' });
      assert.equal(control.status, 0, control.stderr);
      await delay(500); // what would arrive has arrived: one veth and a namespace away
      const got = JSON.parse(nft(['-j', 'list', 'counters', 'table', 'inet', 'rt_arrivals']).stdout).nftables
        .filter((o) => o.counter).map((o) => `${o.counter.name} ${o.counter.packets}`);
      assert.deepEqual(got.sort(), ['datagrams 1', 'pings 1', 'syns 1'], 'only the control reached the upstream');
      assert.deepEqual(w.upstream.find({ ev: 'udp' }), []);
    } finally {
      nft(['delete', 'table', 'inet', 'rt_arrivals']);
    }
  }

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
