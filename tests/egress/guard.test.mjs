// The address guard: whatever the policy says, the proxy never dials a
// loopback, private, shared, link-local, metadata, reserved, multicast,
// unspecified or host-local address. Checked on each path by which an address
// reaches the proxy, in every spelling:
//   - a --resolve pin (the table below: IPv4 short, hex, octal and decimal
//     forms, IPv4-mapped and IPv4-embedding IPv6 forms),
//   - an answer of the daemon's DNS server (--nameserver, a fake one here),
//     including DNS rebinding: the first answer public, the next one blocked,
//   - an IP literal that a program in the sandbox dials.
// Every blocked address used here is reachable in the test's namespaces (see
// lib.mjs), so a dial would not just fail: the trap servers would log it.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';

import { DAEMON_V4, UP_V4, World, showEvents, isRoot } from './lib.mjs';
import { GVISOR } from '../e2e/lib.mjs';

// [spelling of the pinned address, expected class]
const TABLE = [
  ['127.0.0.1', 'loopback'], ['127.1', 'loopback'], ['0x7f.1', 'loopback'], ['0177.0.0.1', 'loopback'],
  ['2130706433', 'loopback'], ['[::1]', 'loopback'], ['[::ffff:127.0.0.1]', 'loopback'],
  ['[::ffff:7f00:1]', 'loopback'],
  ['10.0.0.1', 'private'], ['10.1', 'private'], ['0xa000001', 'private'], ['172.16.0.1', 'private'],
  ['172.31.255.254', 'private'], ['192.168.1.1', 'private'], ['3232235777', 'private'],
  ['[fd00:ec2::254]', 'private'], ['[fc00::1]', 'private'], ['[fd12:3456::1]', 'private'],
  ['[::ffff:10.0.0.1]', 'private'],
  ['100.64.0.1', 'shared'], ['100.100.100.200', 'shared'], ['100.127.255.254', 'shared'],
  ['169.254.169.254', 'link_local'], ['0xa9fea9fe', 'link_local'], ['2852039166', 'link_local'],
  ['0251.0376.0251.0376', 'link_local'], ['169.254.43518', 'link_local'], ['[fe80::a9fe:a9fe]', 'link_local'],
  ['[::ffff:169.254.169.254]', 'link_local'],
  ['168.63.129.16', 'metadata'], ['[::ffff:a83f:8110]', 'metadata'],
  ['192.0.0.1', 'reserved'], ['192.0.0.170', 'reserved'], ['192.88.99.1', 'reserved'],
  ['198.18.0.1', 'reserved'], ['198.19.255.254', 'reserved'], ['240.0.0.1', 'reserved'],
  ['255.255.255.255', 'reserved'], ['[2001:db8::1]', 'reserved'], ['[100::1]', 'reserved'],
  ['[64:ff9b::7f00:1]', 'reserved'], ['[64:ff9b::a9fe:a9fe]', 'reserved'], ['[64:ff9b:1::1]', 'reserved'],
  ['[2002:a9fe:a9fe::1]', 'reserved'], ['[2002:7f00:1::1]', 'reserved'],
  ['[2001:0:4136:e378:8000:63bf:80ff:fffe]', 'reserved'], // Teredo, client 127.0.0.1
  ['[::7f00:1]', 'reserved'], ['[::ffff:0:a9fe:a9fe]', 'reserved'], ['[3fff::1]', 'reserved'],
  ['[2001:2::1]', 'reserved'], ['[fec0::1]', 'reserved'],
  ['224.0.0.1', 'multicast'], ['239.255.255.250', 'multicast'], ['[ff02::1]', 'multicast'],
  ['0.0.0.0', 'unspecified'], ['0', 'unspecified'], ['0.1.2.3', 'unspecified'], ['[::]', 'unspecified'],
  [DAEMON_V4, 'host_local'], [`[::ffff:${DAEMON_V4}]`, 'host_local'],
];
// Public (test-net) addresses in odd spellings: these must work.
const CONTROLS = [['0xc6.0x33.0x64.0x01', UP_V4], ['[::ffff:198.51.100.1]', UP_V4], ['3325256706', '198.51.100.2']];

const pinName = (i) => `g${String(i).padStart(2, '0')}.guard.test`;
const PINS = [
  ...TABLE.map(([spelling], i) => `${pinName(i)}:0:${spelling}`),
  ...CONTROLS.map(([spelling], i) => `ok${i}.guard.test:0:${spelling}`),
];

// DNS rebinding: the first resolution public, the second blocked.
const PUBLIC = { A: [UP_V4] };
const REBIND = [
  ['lo', { A: ['127.0.0.1'] }, 'loopback'],
  ['priv', { A: ['10.0.0.1'] }, 'private'],
  ['shared', { A: ['100.100.100.200'] }, 'shared'],
  ['ll', { A: ['169.254.169.254'] }, 'link_local'],
  ['md', { A: ['168.63.129.16'] }, 'metadata'],
  ['res', { A: ['192.0.0.1'] }, 'reserved'],
  ['synth', { A: ['198.18.0.1'] }, 'reserved'],
  ['mc', { A: ['224.0.0.1'] }, 'multicast'],
  ['unspec', { A: ['0.0.0.0'] }, 'unspecified'],
  ['self', { A: [DAEMON_V4] }, 'host_local'],
  ['lo6', { AAAA: ['::1'] }, 'loopback'],
  ['mapped', { AAAA: ['::ffff:127.0.0.1'] }, 'loopback'],
  ['mappedll', { AAAA: ['::ffff:169.254.169.254'] }, 'link_local'],
  ['ula', { AAAA: ['fd00:ec2::254'] }, 'private'],
  ['ll6', { AAAA: ['fe80::a9fe:a9fe'] }, 'link_local'],
  ['nat64', { AAAA: ['64:ff9b::a9fe:a9fe'] }, 'reserved'],
  ['sixtofour', { AAAA: ['2002:a9fe:a9fe::1'] }, 'reserved'],
  ['mc6', { AAAA: ['ff02::1'] }, 'multicast'],
  ['unspec6', { AAAA: ['::'] }, 'unspecified'],
];
const DNS = {
  ...Object.fromEntries(REBIND.map(([n, bad]) => [`${n}.rebind.test`, [PUBLIC, bad]])),
  // One answer with blocked and public addresses: only the public one may be dialled.
  'mixed.rebind.test': [{ A: ['10.0.0.1', '169.254.169.254', UP_V4], AAAA: ['::1', 'fd00:ec2::254'] }],
  'allbad.rebind.test': [{ A: ['10.0.0.1', '127.0.0.1'], AAAA: ['::ffff:169.254.169.254'] }],
  'nx.rebind.test': [{ rcode: 3 }],
};

let w, d;

const refusals = (events) => new Map(events.filter((e) => e.kind === 'egress.refused' && e.stage === 'connect')
  .map((e) => [e.host, e.reason]));

describe('egress address guard', { skip: !isRoot() && 'must run as root (runtimed and ip netns need it)' }, () => {
  before(async () => {
    w = await new World({ pins: PINS, dns: DNS }).setup();
    d = w.daemon;
  });
  after(async () => {
    await w?.teardown();
  });

  test(`pinned addresses: ${TABLE.length} blocked spellings refused, public ones dialled`, async () => {
    const sb = await d.sandbox({ internet: true, allow: ['*.guard.test'] });
    const results = await d.inside(sb.id, 'probe', {
      targets: [...TABLE.map((_, i) => ({ host: pinName(i) })), ...CONTROLS.map((_, i) => ({ host: `ok${i}.guard.test` }))],
    });
    const events = await d.events(sb.id);
    const got = refusals(events);
    const wrong = [];
    TABLE.forEach(([spelling, cls], i) => {
      const want = `address_blocked:${cls}`;
      const r = results[i];
      if (got.get(pinName(i)) !== want || r.response) {
        wrong.push(`${spelling}: want ${want}, got ${got.get(pinName(i)) ?? 'no refusal'}` +
          (r.response ? ` and a response: ${r.response.split('\r\n')[0]}` : ''));
      }
    });
    assert.deepEqual(wrong, [], `guard table mismatches:\n  ${wrong.join('\n  ')}`);
    CONTROLS.forEach(([spelling, addr], i) => {
      const r = results[TABLE.length + i];
      assert.ok(r.response.startsWith('HTTP/1.1 200'), `${spelling}: ${JSON.stringify(r)}`);
      assert.ok(events.some((e) => e.kind === 'egress.allowed' && e.host === `ok${i}.guard.test` &&
        e.address.replace(/^::ffff:/, '') === addr), `${spelling}: no egress.allowed to ${addr}`);
    });
    assert.deepEqual(w.strayConnections(), [], 'the proxy dialled a blocked address');
    await d.remove(sb.id);
  });

  test('DNS rebinding: a blocked answer after a public one is refused, never dialled', async () => {
    const sb = await d.sandbox({ internet: true, allow: ['*.rebind.test'] });
    const names = REBIND.map(([n]) => `${n}.rebind.test`);
    const first = await d.inside(sb.id, 'probe', { targets: names.map((host) => ({ host })) });
    for (const r of first) assert.ok(r.response.startsWith('HTTP/1.1 200'), `first answer is public: ${JSON.stringify(r)}`);
    const mark = (await d.events(sb.id)).at(-1).seq;
    const second = await d.inside(sb.id, 'probe', { targets: names.map((host) => ({ host })) });
    const events = await d.events(sb.id, mark);
    const got = refusals(events);
    const wrong = [];
    REBIND.forEach(([n, bad, cls], i) => {
      const want = `address_blocked:${cls}`;
      if (got.get(`${n}.rebind.test`) !== want || second[i].response) {
        wrong.push(`${n} -> ${JSON.stringify(bad)}: want ${want}, got ${got.get(`${n}.rebind.test`) ?? 'no refusal'}` +
          (second[i].response ? ` and a response: ${second[i].response.split('\r\n')[0]}` : ''));
      }
    });
    assert.deepEqual(wrong, [], `rebinding not refused:\n  ${wrong.join('\n  ')}`);
    assert.deepEqual(events.filter((e) => e.kind === 'egress.allowed'), []);
    // The daemon itself asked the name server both times (no cached first answer hid the rebinding).
    for (const [n, bad] of REBIND) {
      const type = bad.A ? 'A' : 'AAAA';
      const asked = w.upstream.find((e) => e.ev === 'dns' && e.name === `${n}.rebind.test` && e.type === type);
      assert.ok(asked.length >= 2, `${n}: ${type} asked ${asked.length} times`);
      assert.ok(asked.every((e) => e.from === DAEMON_V4), 'only the daemon asks the real name server');
    }
    assert.deepEqual(w.strayConnections(), [], 'the proxy dialled a blocked address');
    await d.remove(sb.id);
  });

  test('one answer with blocked and public addresses: only the public one is dialled', async () => {
    const sb = await d.sandbox({ internet: true, allow: ['*.rebind.test'] });
    const [mixed, allbad, nx] = await d.inside(sb.id, 'probe', {
      targets: [{ host: 'mixed.rebind.test' }, { host: 'allbad.rebind.test' }, { host: 'nx.rebind.test' }],
    });
    const events = await d.events(sb.id);
    assert.ok(mixed.response.startsWith('HTTP/1.1 200'), JSON.stringify(mixed));
    const allowed = events.filter((e) => e.kind === 'egress.allowed');
    assert.deepEqual(allowed.map((e) => [e.host, e.address]), [['mixed.rebind.test', UP_V4]]);
    assert.ok(!allbad.response && !nx.response);
    const got = refusals(events);
    assert.match(got.get('allbad.rebind.test') ?? '', /^address_blocked:(private|loopback|link_local)$/);
    assert.equal(got.get('nx.rebind.test'), 'resolve_failed');
    assert.deepEqual(w.strayConnections(), []);
    await d.remove(sb.id);
  });

  test('IP literals dialled from the sandbox are refused, whatever the allow list', async () => {
    // [what the program dials, the address the proxy sees, expected reason]
    const literals = [
      ['10.0.0.1', '10.0.0.1', 'address_blocked:private'],
      ['0xa.1', '10.0.0.1', 'address_blocked:private'],
      ['3232235777', '192.168.1.1', 'address_blocked:private'],
      ['::ffff:172.16.0.1', '172.16.0.1', 'address_blocked:private'],
      ['100.100.100.200', '100.100.100.200', 'address_blocked:shared'],
      ['2852039166', '169.254.169.254', 'address_blocked:link_local'],
      ['0251.0376.0251.0376', '169.254.169.254', 'address_blocked:link_local'],
      ['::ffff:169.254.169.254', '169.254.169.254', 'address_blocked:link_local'],
      ['168.63.129.16', '168.63.129.16', 'address_blocked:metadata'],
      ['192.0.0.1', '192.0.0.1', 'address_blocked:reserved'],
      ['240.0.0.1', '240.0.0.1', 'address_blocked:reserved'],
      [DAEMON_V4, DAEMON_V4, 'address_blocked:host_local'],
      ['198.19.255.254', '198.19.255.254', 'stale_address'], // synthetic range, never handed out
    ];
    // Never leave the sandbox at all (its own loopback, or refused by its kernel).
    const local = ['127.0.0.1', '0x7f.1', '0.0.0.0', '224.0.0.1', '255.255.255.255'];
    // No list (any public host), and a list naming every one of them.
    for (const allow of [undefined, ['10.0.0.0/8', '192.168.0.0/16', '172.16.0.0/12', '169.254.169.254', '100.64.0.0/10',
      '168.63.129.16', '192.0.0.0/24', '240.0.0.0/4', `${DAEMON_V4}`, '198.18.0.0/15']]) {
      const sb = await d.sandbox(allow ? { internet: true, allow } : { internet: true });
      const results = await d.inside(sb.id, 'probe', {
        targets: [...literals.map(([host]) => ({ host, hostHeader: 'example.test', timeoutMs: 2000 })),
          ...local.map((host) => ({ host, hostHeader: 'example.test', timeoutMs: 2000 }))],
      });
      const events = await d.events(sb.id);
      const got = refusals(events);
      const wrong = [];
      literals.forEach(([spelling, seen, want], i) => {
        if (got.get(seen) !== want || results[i].response) {
          wrong.push(`${spelling}: want ${want} for ${seen}, got ${got.get(seen) ?? 'no refusal'}`);
        }
      });
      assert.deepEqual(wrong, [], `allow ${JSON.stringify(allow)}:\n  ${wrong.join('\n  ')}\n  ${showEvents(events).join('\n  ')}`);
      results.slice(literals.length).forEach((r, i) => assert.ok(!r.response, `${local[i]}: ${JSON.stringify(r)}`));
      assert.deepEqual(events.filter((e) => e.kind === 'egress.allowed'), []);
      assert.deepEqual(w.strayConnections(), [], 'the proxy dialled a blocked address');
      await d.remove(sb.id);
    }
  });

  test("the proxy's own port, dialled directly from the sandbox, leads nowhere", async () => {
    const sb = await d.sandbox({ internet: true });
    if (GVISOR) return proxyPortUnderGvisor(sb);
    const results = await d.inside(sb.id, 'probe', {
      targets: [{ host: '127.0.0.1', port: 900, hostHeader: 'example.test' }, { host: '127.0.0.1', port: 900, send: '' }],
    });
    for (const r of results) assert.ok(!r.response, JSON.stringify(r));
    const events = await d.events(sb.id);
    assert.deepEqual(events.map((e) => `${e.kind} ${e.host}:${e.port} ${e.reason}`),
      ['egress.refused 127.0.0.1:900 address_blocked:loopback', 'egress.refused 127.0.0.1:900 address_blocked:loopback']);
    await d.remove(sb.id);
  });

  /** Under gvisor 127.0.0.1 is gVisor's own loopback, where nothing listens: the connection
   * never leaves gVisor's stack (refused there, no event). The proxy's port is on the holder's
   * end of the veth, the sandbox's nameserver address: a connection to it there is redirected
   * onto itself, which conntrack does not count as a NAT, so the holder's input filter drops
   * it (it times out). Nothing reaches the proxy, nor anything else. */
  async function proxyPortUnderGvisor(sb) {
    const outer = (await d.exec(sb.id, ['sh', '-c', "awk '/^nameserver/ { print $2; exit }' /etc/resolv.conf"])).stdout.trim();
    assert.match(outer, /^\d+\.\d+\.\d+\.\d+$/);
    const results = await d.inside(sb.id, 'probe', {
      targets: [{ host: '127.0.0.1', port: 900, hostHeader: 'example.test' }, { host: '127.0.0.1', port: 900, send: '' },
        { host: outer, port: 900, hostHeader: 'example.test', timeoutMs: 2000 }, { host: outer, port: 900, send: '', timeoutMs: 2000 }],
    });
    for (const r of results) assert.ok(!r.response && !r.connected, JSON.stringify(r));
    assert.deepEqual(results.map((r) => r.error ?? r.end), ['ECONNREFUSED', 'ECONNREFUSED', 'timeout', 'timeout'], JSON.stringify(results));
    assert.deepEqual(await d.events(sb.id), []);
    assert.deepEqual(w.strayConnections(), []);
    await d.remove(sb.id);
  }

  // Last: on failure it leaves a trapped connection behind.
  test('host_local covers an address the host gained after the daemon started', async () => {
    const late = '198.51.100.77';
    const ip = (args) => spawnSync('ip', ['-n', w.dns, ...args], { encoding: 'utf8' });
    const add = ip(['addr', 'add', `${late}/32`, 'dev', w.vethD]);
    assert.equal(add.status, 0, add.stderr);
    try {
      const sb = await d.sandbox({ internet: true });
      const [r] = await d.inside(sb.id, 'probe', { targets: [{ host: late, hostHeader: 'example.test' }] });
      const events = await d.events(sb.id);
      const trapped = w.trap.find({ ev: 'conn' }).map((c) => `${c.local}:${c.localPort}`);
      assert.deepEqual(trapped, [], `the proxy connected to the host's own address ${late} (a service of the ` +
        `host answered: ${JSON.stringify(r.response.split('\r\n')[0])}); events: ${showEvents(events).join('; ')}`);
      assert.equal(refusals(events).get(late), 'address_blocked:host_local', showEvents(events).join('\n'));
      await d.remove(sb.id);
    } finally {
      ip(['addr', 'del', `${late}/32`, 'dev', w.vethD]);
    }
  });
});
