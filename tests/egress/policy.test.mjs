// Egress by policy: allowed and refused names (the stub resolver and the proxy),
// SNI and Host that disagree with the name the sandbox resolved, ClientHellos
// split over TCP segments and over TLS records, and plain curl and Node fetch
// working with no proxy settings at all. Upstreams are fake servers in a network
// namespace this file makes (see lib.mjs); runtimed runs in a namespace of its own.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { UP_V4, World, showEvents, isRoot } from './lib.mjs';

const PINS = [
  'example.test:0:198.51.100.1',
  'a.example.test:0:198.51.100.1',
  'other.test:0:198.51.100.2',
  'forbidden.test:0:198.51.100.1', // if a check let it through, the upstream would log its Host
  'port80.test:0:198.51.100.1',
];
const ALLOW = ['example.test', '*.example.test', 'other.test:443', 'port80.test:80'];

let w, d, sb;

const ok200 = (r) => r.response.startsWith('HTTP/1.1 200');

/** Runs fn; returns the sandbox's events that it raised and the upstream connections it made. */
async function observe(fn, id = sb.id) {
  const before = await d.events(id);
  const mark = before.length ? before[before.length - 1].seq : 0;
  const conns = w.upstream.find({ ev: 'conn' }).length;
  const result = await fn();
  const events = await d.events(id, mark);
  return { result, events, upstreamConns: w.upstream.find({ ev: 'conn' }).slice(conns) };
}

function hasEvent(events, want) {
  const found = events.find((e) => Object.entries(want).every(([k, v]) => e[k] === v));
  assert.ok(found, `no event like ${JSON.stringify(want)} in:\n  ${showEvents(events).join('\n  ')}`);
}

describe('egress policy', { skip: !isRoot() && 'must run as root (runtimed and ip netns need it)' }, () => {
  before(async () => {
    w = await new World({ pins: PINS }).setup();
    d = w.daemon;
    sb = await d.sandbox({ internet: true, allow: ALLOW }, { ca: w.certs.ca });
  });
  after(async () => {
    await w?.teardown();
  });

  test('allowed names reach their upstream; others get NXDOMAIN and an event', async () => {
    const { result, events, upstreamConns } = await observe(() => d.inside(sb.id, 'probe', {
      targets: [
        { host: 'example.test' },
        { host: 'EXAMPLE.Test.', hostHeader: 'example.test' }, // other spellings of the same name
        { host: 'a.example.test' }, // *.example.test
        { host: 'port80.test' }, // port80.test:80
        { host: 'example.test', port: 7000, send: '', timeoutMs: 1000 }, // a server-speaks-first protocol
      ],
    }));
    const [plain, spelled, wild, port80, stream] = result;
    for (const r of [plain, spelled, wild, port80]) {
      assert.ok(ok200(r), `${r.host}: ${JSON.stringify(r)}`);
      assert.match(r.address, /^198\.1[89]\./, 'the stub answers with a synthetic address');
    }
    assert.match(plain.response, /hello example\.test via ::ffff:198\.51\.100\.1/);
    assert.match(wild.response, /hello a\.example\.test/);
    assert.match(stream.response, /^hello stream via ::ffff:198\.51\.100\.1\ntick/, JSON.stringify(stream));
    assert.equal(upstreamConns.length, 5);
    for (const c of upstreamConns) assert.equal(c.remote, '::ffff:198.51.100.254', 'the proxy dials from the daemon');
    hasEvent(events, { kind: 'egress.allowed', host: 'example.test', port: 80, address: UP_V4 });
    hasEvent(events, { kind: 'egress.allowed', host: 'a.example.test', port: 80 });
    hasEvent(events, { kind: 'egress.allowed', host: 'example.test', port: 7000 });

    const refused = await observe(() => d.inside(sb.id, 'probe', {
      targets: [
        { host: 'forbidden.test' },
        { host: 'example.test.evil' },
        { host: 'xexample.test' },
        { host: 'example.test.forbidden.test' },
      ],
    }));
    for (const r of refused.result) assert.equal(r.error, 'ENOTFOUND', JSON.stringify(r));
    for (const host of ['forbidden.test', 'example.test.evil', 'xexample.test', 'example.test.forbidden.test']) {
      hasEvent(refused.events, { kind: 'egress.refused', host, reason: 'not_allowed', stage: 'dns' });
    }
    assert.deepEqual(refused.upstreamConns, []);
  });

  test('a port rule and an IP literal are judged at connect time', async () => {
    const { result, events, upstreamConns } = await observe(() => d.inside(sb.id, 'probe', {
      targets: [
        { host: 'other.test', port: 80 }, // allowed on 443 only
        { host: 'port80.test', port: 7000, send: '' }, // allowed on 80 only
        { host: UP_V4, hostHeader: 'example.test' }, // the allowed upstream's address, dialled directly
        { host: '3325256705', hostHeader: 'example.test' }, // the same address, as one decimal number
      ],
    }));
    for (const r of result) assert.ok(!ok200(r) && !r.response, `should be refused: ${JSON.stringify(r)}`);
    hasEvent(events, { kind: 'egress.refused', host: 'other.test', port: 80, reason: 'not_allowed', stage: 'connect' });
    hasEvent(events, { kind: 'egress.refused', host: 'port80.test', port: 7000, reason: 'not_allowed', stage: 'connect' });
    hasEvent(events, { kind: 'egress.refused', host: UP_V4, port: 80, reason: 'not_allowed', stage: 'connect' });
    assert.deepEqual(upstreamConns, [], 'nothing refused may reach an upstream');
  });

  test('internet off refuses everything; no allow list allows any public name', async () => {
    // (internet: false with a list is that list, as Runtime Cloud reads it: openapi.test.mjs)
    const off = await d.sandbox({ internet: false });
    const r1 = await observe(() => d.inside(off.id, 'probe', {
      targets: [{ host: 'example.test' }, { host: UP_V4, hostHeader: 'example.test' }],
    }), off.id);
    assert.equal(r1.result[0].error, 'ENOTFOUND');
    assert.ok(!r1.result[1].response, JSON.stringify(r1.result[1]));
    hasEvent(r1.events, { kind: 'egress.refused', host: 'example.test', reason: 'internet_off', stage: 'dns' });
    hasEvent(r1.events, { kind: 'egress.refused', host: UP_V4, reason: 'internet_off', stage: 'connect' });
    assert.deepEqual(r1.upstreamConns, []);

    const any = await d.sandbox({ internet: true }); // allow: [] would be no host (allow.test.mjs)
    const r2 = await observe(() => d.inside(any.id, 'probe', {
      targets: [{ host: 'forbidden.test' }, { host: UP_V4, hostHeader: 'whatever.test' }],
    }), any.id);
    assert.ok(ok200(r2.result[0]) && /hello forbidden\.test/.test(r2.result[0].response), JSON.stringify(r2.result[0]));
    assert.ok(ok200(r2.result[1]), JSON.stringify(r2.result[1]));
    await d.remove(off.id);
    await d.remove(any.id);
  });

  test('HTTP Host must be the name the sandbox resolved', async () => {
    const req = (host) => `GET /hello HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`;
    const cases = [
      [{ hostHeader: 'forbidden.test' }, 'host_mismatch'],
      [{ hostHeader: 'a.example.test' }, 'host_mismatch'], // allowed too, but not where it connected
      [{ hostHeader: UP_V4 }, 'host_mismatch'],
      [{ send: 'GET /hello HTTP/1.1\r\nHOST: forbidden.test\r\n\r\n' }, 'host_mismatch'],
      [{ send: 'GET /hello HTTP/1.1\r\nX: y\r\nHost:forbidden.test\r\n\r\n' }, 'host_mismatch'],
      [{ hostHeader: '0xc6.0x33.0x64.1' }, 'malformed_request'], // an address in disguise
      [{ send: 'GET /hello HTTP/1.1\r\nHost: example.test\r\nHost: forbidden.test\r\n\r\n' }, 'malformed_request'],
      [{ send: 'GET http://forbidden.test/hello HTTP/1.1\r\nHost: example.test\r\n\r\n' }, 'malformed_request'],
      [{ send: 'GET /hello HTTP/1.0\r\n\r\n' }, 'malformed_request'], // no Host, no absolute target
    ];
    const { result, events, upstreamConns } = await observe(() => d.inside(sb.id, 'probe', {
      targets: cases.map(([t]) => ({ host: 'example.test', ...t })),
    }));
    for (const r of result) assert.ok(!r.response, `should be refused: ${JSON.stringify(r)}`);
    assert.deepEqual(upstreamConns, [], 'a refused request must never reach the upstream');
    const count = (list, reason) => list.filter((x) => x === reason).length;
    const got = events.filter((e) => e.kind === 'egress.refused').map((e) => e.reason);
    for (const reason of ['host_mismatch', 'malformed_request']) {
      assert.equal(count(got, reason), count(cases.map(([, r]) => r), reason), `${reason}:\n  ${showEvents(events).join('\n  ')}`);
    }
    for (const e of events) assert.equal(e.host, 'example.test');

    const fine = await observe(() => d.inside(sb.id, 'probe', {
      targets: [
        { host: 'example.test', send: req('EXAMPLE.test.:80') },
        { host: 'example.test', send: 'GET http://example.test/hello HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n' },
      ],
    }));
    for (const r of fine.result) assert.ok(ok200(r), JSON.stringify(r));
  });

  // Servers skip empty lines before a request line (RFC 9112 2.2; node and nginx do),
  // so such a request must be judged by its Host like any other, or refused.
  test('empty lines before the request line do not hide its Host', async () => {
    const { result, events, upstreamConns } = await observe(() => d.inside(sb.id, 'probe', {
      targets: ['\r\n', '\n', '\r\n\r\n'].map((lead) => ({
        host: 'example.test', send: `${lead}GET /hello HTTP/1.1\r\nHost: forbidden.test\r\nConnection: close\r\n\r\n`,
      })),
    }));
    const reached = w.upstream.find((e) => e.ev === 'req' && upstreamConns.some((c) => c.id === e.id));
    assert.deepEqual(reached.map((e) => `${e.method} ${e.url} Host: ${e.host}`), [],
      `requests for forbidden.test reached the upstream of example.test: ${JSON.stringify(result.map((r) => r.response.split('\r\n')[0]))}; ` +
      `events: ${showEvents(events).join('; ')}`);
  });

  test('TLS SNI must be the name the sandbox resolved', async () => {
    const good = await d.exec(sb.id, ['curl', '-sS', '-m', '5', '--cacert', '/workspace/ca.pem', 'https://example.test/hello']);
    assert.equal(good.exitCode, 0, good.stderr);
    assert.match(good.stdout, /^hello example\.test/);

    const { result, events, upstreamConns } = await observe(() => d.exec(sb.id, ['curl', '-sS', '-m', '5',
      '--cacert', '/workspace/ca.pem', '--connect-to', 'forbidden.test:443:example.test:443', 'https://forbidden.test/hello']));
    assert.notEqual(result.exitCode, 0, result.stdout);
    hasEvent(events, { kind: 'egress.refused', host: 'example.test', port: 443, reason: 'sni_mismatch', stage: 'connect' });
    assert.deepEqual(upstreamConns, []);

    // An allowed name as SNI while connected to another allowed name: still refused.
    const fronted = await observe(() => d.exec(sb.id, ['curl', '-sS', '-m', '5', '--cacert', '/workspace/ca.pem',
      '--connect-to', 'a.example.test:443:example.test:443', 'https://a.example.test/hello']));
    assert.notEqual(fronted.result.exitCode, 0);
    hasEvent(fronted.events, { host: 'example.test', port: 443, reason: 'sni_mismatch' });
    assert.deepEqual(fronted.upstreamConns, []);

    // An IP literal with an allowed SNI is judged by its address, which is not on the list.
    const literal = await observe(() => d.exec(sb.id, ['curl', '-sS', '-m', '5', '--cacert', '/workspace/ca.pem',
      '--connect-to', `example.test:443:${UP_V4}:443`, 'https://example.test/hello']));
    assert.notEqual(literal.result.exitCode, 0);
    hasEvent(literal.events, { host: UP_V4, port: 443, reason: 'not_allowed', stage: 'connect' });
    assert.deepEqual(literal.upstreamConns, []);
  });

  test('a ClientHello split over TCP segments or TLS records is read whole', async () => {
    const split = (servername, how) => d.inside(sb.id, 'split',
      { host: 'example.test', servername, how, pieces: 8, ca: '/workspace/ca.pem' });
    for (const how of ['tcp', 'record']) {
      const r = await split('example.test', how);
      assert.ok(r.ok, `${how}: ${JSON.stringify(r)}`);
      // It really was split: many segments, or two records each in its own segment.
      const records = r.pieces.filter(([, rec]) => rec).length;
      if (how === 'tcp') assert.ok(r.pieces.length >= 8, JSON.stringify(r.pieces));
      else assert.ok(r.pieces.length >= 2 && records === 2, JSON.stringify(r.pieces));
      assert.match(r.response, /hello example\.test/, `${how}: ${JSON.stringify(r)}`);
    }
    for (const how of ['tcp', 'record']) {
      const { result, events, upstreamConns } = await observe(() => split('forbidden.test', how));
      assert.ok(!result.ok && !result.response, `${how} with a foreign SNI got through: ${JSON.stringify(result)}`);
      hasEvent(events, { host: 'example.test', port: 443, reason: 'sni_mismatch', stage: 'connect' });
      assert.deepEqual(upstreamConns, [], `${how}: the upstream must see nothing`);
    }
  });

  test('curl and Node fetch work with no proxy settings', async () => {
    const env = await d.exec(sb.id, ['env']);
    assert.doesNotMatch(env.stdout, /proxy/i, 'the sandbox has no proxy variables');
    const curl = await d.exec(sb.id, ['sh', '-c', 'curl -sS -m 5 http://example.test/hello && ' +
      'curl -sS -m 5 --cacert /workspace/ca.pem https://example.test/hello && ' +
      'curl -sS -m 5 --cacert /workspace/ca.pem https://other.test/hello']);
    assert.equal(curl.exitCode, 0, curl.stderr);
    assert.match(curl.stdout, /^hello example\.test via .*\nhello example\.test via .*\nhello other\.test via ::ffff:198\.51\.100\.2\n$/);
    const fetched = await d.inside(sb.id, 'fetch', {
      urls: ['http://example.test/hello', 'https://example.test/hello', 'https://a.example.test/hello', 'http://forbidden.test/'],
    }, { env: { NODE_EXTRA_CA_CERTS: '/workspace/ca.pem' } });
    assert.deepEqual(fetched.slice(0, 3).map((r) => [r.status, r.body.split(' via')[0]]),
      [[200, 'hello example.test'], [200, 'hello example.test'], [200, 'hello a.example.test']]);
    assert.equal(fetched[3].error, 'ENOTFOUND');
  });

  test('no connection ever reached a blocked or unexpected address', () => {
    assert.deepEqual(w.strayConnections(), []);
  });
});
