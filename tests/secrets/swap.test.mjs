// Secrets: the placeholder becomes the value only in HTTPS requests to the
// secret's own hosts, methods and paths. Fake upstreams (upstream.mjs) record
// exactly what reached them; runtimed runs in its own network namespace with
// --resolve pins and --upstream-ca for the test CA (see lib.mjs).
//
// Secrets here:
//   GH     hosts [api.github.test], methods [GET], paths [/repos/acme/*]
//   OTHER  hosts [api.other.test]
// spliced.test is a host no secret names: its TLS is spliced, never opened.

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';

import {
  SecretsWorld, allEvents, header, isRoot, lastSeq, request, showSecretEvents,
} from './lib.mjs';

// '+', '/' and '=' must be percent-encoded when the value goes into a target.
const V_GH = `ghp_${crypto.randomBytes(16).toString('hex')}+/=`;
const V_OTHER = `oth_${crypto.randomBytes(16).toString('hex')}`;
const GH_HOST = 'api.github.test';
/** A value as the proxy puts it in a target: every byte but A-Z a-z 0-9 - . _ ~ as %XX. */
const pct = (v) => [...Buffer.from(v)].map((b) => (/[A-Za-z0-9._~-]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, '0')}`)).join('');
const OTHER_HOST = 'api.other.test';

let w, d, sb, sb2;
const ph = {}; // placeholders of sb
let phB; // GH's placeholder in sb2

/** Runs a connection in sb (inside.mjs conn); returns its result, the upstream
 * requests and connections it caused, and the sandbox's events it raised. */
async function send(arg, id = sb.id) {
  const mark = w.upstream.mark();
  const seq = await lastSeq(d, id);
  const result = await d.inside(id, 'conn', arg);
  const events = await allEvents(d, id, seq);
  return { result, reqs: w.upstream.since(mark, 'req'), conns: w.upstream.since(mark, 'conn'), rx: w.upstream.since(mark, 'rx'), events };
}

function hasEvent(events, want) {
  const found = events.find((e) => Object.entries(want).every(([k, v]) => e[k] === v));
  assert.ok(found, `no event like ${JSON.stringify(want)} in:\n  ${showSecretEvents(events).join('\n  ')}`);
}

function noEvent(events, want) {
  const found = events.find((e) => Object.entries(want).every(([k, v]) => e[k] === v));
  assert.ok(!found, `unexpected event ${JSON.stringify(found)}`);
}

const statuses = (r) => r.result.steps.flatMap((s) => s.responses.map((x) => x.status));

describe('secrets: substitution', { skip: !isRoot() && 'must run as root (runtimed and ip netns need it)' }, () => {
  before(async () => {
    w = await new SecretsWorld().setup();
    d = w.daemon;
    await d.putSecret('GH', { value: V_GH, hosts: [GH_HOST], methods: ['GET'], paths: ['/repos/acme/*'] });
    await d.putSecret('OTHER', { value: V_OTHER, hosts: [OTHER_HOST] });
    sb = await d.secretsSandbox();
    sb2 = await d.secretsSandbox();
    ph.GH = await d.envOf(sb.id, 'GH');
    ph.OTHER = await d.envOf(sb.id, 'OTHER');
    phB = await d.envOf(sb2.id, 'GH');
    for (const p of [ph.GH, ph.OTHER, phB]) assert.match(p, /^RUNTIME_PH_[0-9a-f]{32}$/);
    assert.notEqual(ph.GH, phB, 'a placeholder is unique per sandbox');
    assert.equal(await d.envOf(sb.id, 'GH'), ph.GH, 'and stable across execs');
  });
  after(async () => {
    await w?.teardown();
  });

  test('the right host gets the value: in the target (percent-encoded), in any header, inside Basic credentials', async () => {
    const basic = (user) => Buffer.from(`${user}:${ph.GH}`).toString('base64');
    const r = await send({
      host: GH_HOST,
      steps: [
        { send: request('GET', '/repos/acme/x?token={{GH}}&n=1', GH_HOST, [
          ['Authorization', 'Bearer {{GH}}'], ['X-Api-Key', 'pre-{{GH}}-post'], ['X-Two', '{{GH}},{{GH}}']]) },
        { send: request('GET', '/repos/acme/y', GH_HOST, [['Authorization', `Basic ${basic('x-access-token')}`]]) },
      ],
    });
    assert.deepEqual(statuses(r), [200, 200], JSON.stringify(r.result));
    assert.equal(r.result.authorized, true, 'the minted leaf verifies against the sandbox bundle');
    assert.match(r.result.peer.issuer.CN, /^runtimed interception CA/);
    assert.equal(r.reqs.length, 2);
    assert.equal(new Set(r.reqs.map((q) => q.id)).size, 1, 'both on one upstream connection');
    const [a, b] = r.reqs;
    assert.equal(a.target, `/repos/acme/x?token=${pct(V_GH)}&n=1`);
    assert.ok(pct(V_GH).endsWith('%2B%2F%3D'));
    assert.equal(header(a, 'Authorization'), `Bearer ${V_GH}`);
    assert.equal(header(a, 'X-Api-Key'), `pre-${V_GH}-post`);
    assert.equal(header(a, 'X-Two'), `${V_GH},${V_GH}`);
    assert.equal(header(a, 'Host'), GH_HOST);
    assert.equal(header(b, 'Authorization'), `Basic ${Buffer.from(`x-access-token:${V_GH}`).toString('base64')}`);
    hasEvent(r.events, { kind: 'secret.used', secret: 'GH', host: GH_HOST, method: 'GET', path: '/repos/acme/x' });
    hasEvent(r.events, { kind: 'secret.used', secret: 'GH', host: GH_HOST, method: 'GET', path: '/repos/acme/y' });
    noEvent(r.events, { kind: 'secret.misdirected' });
    // Which sandboxes a secret went to, as the dashboard lists it: this one, not the other.
    const listed = await d.api('GET', '/v1/egress-secrets');
    const gh = listed.body.secrets.find((x) => x.name === 'GH');
    assert.deepEqual(gh.usedBy.map((u) => u.sandbox), [sb.id], JSON.stringify(gh));
    assert.ok(Date.now() - Date.parse(gh.usedBy[0].at) < 60000);
  });

  test('no value for a host no secret names, another secret\'s host, or plain HTTP', async () => {
    // A host no secret names: spliced, the sandbox talks TLS to the real upstream.
    const spliced = await send({
      host: 'spliced.test', extraCa: ['/workspace/testca.pem'],
      steps: [{ send: request('GET', '/repos/acme/x?t={{GH}}', 'spliced.test', [['Authorization', 'Bearer {{GH}}'], ['X-O', '{{OTHER}}']]) }],
    });
    assert.deepEqual(statuses(spliced), [200]);
    assert.equal(spliced.result.peer.issuer.CN, 'runtime secrets test CA', 'spliced: the upstream\'s own certificate');
    assert.equal(spliced.reqs[0].target, `/repos/acme/x?t=${ph.GH}`);
    assert.equal(header(spliced.reqs[0], 'Authorization'), `Bearer ${ph.GH}`);
    assert.equal(header(spliced.reqs[0], 'X-O'), ph.OTHER);

    // Another secret's host: OTHER's placeholder is swapped there, GH's is not.
    const other = await send({
      host: OTHER_HOST,
      steps: [{ send: request('GET', '/repos/acme/x', OTHER_HOST, [['Authorization', 'Bearer {{GH}}'], ['X-Other', '{{OTHER}}']]) }],
    });
    assert.deepEqual(statuses(other), [200]);
    assert.equal(header(other.reqs[0], 'Authorization'), `Bearer ${ph.GH}`);
    assert.equal(header(other.reqs[0], 'X-Other'), V_OTHER);
    hasEvent(other.events, { kind: 'secret.misdirected', secret: 'GH', host: OTHER_HOST, reason: 'host not allowed' });
    hasEvent(other.events, { kind: 'secret.used', secret: 'OTHER', host: OTHER_HOST });

    // The secret's own host, in plain HTTP: nothing is swapped on port 80.
    const plain = await send({
      host: GH_HOST, tls: false,
      steps: [{ send: request('GET', '/repos/acme/x?t={{GH}}', GH_HOST, [['Authorization', 'Bearer {{GH}}']]) }],
    });
    assert.deepEqual(statuses(plain), [200]);
    assert.equal(plain.conns[0].tls, false);
    assert.equal(plain.reqs[0].target, `/repos/acme/x?t=${ph.GH}`);
    assert.equal(header(plain.reqs[0], 'Authorization'), `Bearer ${ph.GH}`);
    noEvent(plain.events, { kind: 'secret.used' });
  });

  // docs/secrets.md: "A placeholder sent anywhere else stays a placeholder
  // and is reported as secret.misdirected." Spliced TLS cannot be reported
  // (the proxy never sees inside it); plain HTTP can.
  test('a placeholder sent in plain HTTP is reported as secret.misdirected', async () => {
    const plain = await send({
      host: GH_HOST, tls: false,
      steps: [{ send: request('GET', '/repos/acme/x', GH_HOST, [['Authorization', 'Bearer {{GH}}']]) }],
    });
    assert.equal(header(plain.reqs[0], 'Authorization'), `Bearer ${ph.GH}`);
    hasEvent(plain.events, { kind: 'secret.misdirected', secret: 'GH', host: GH_HOST, reason: 'plain HTTP' });
  });

  test('every plain-HTTP request of a keep-alive connection is reported, not only the first', async () => {
    const plain = await send({
      host: GH_HOST, tls: false,
      steps: [
        { send: request('GET', '/first', GH_HOST, []) },
        { send: request('GET', '/second', GH_HOST, [['Authorization', 'Bearer {{GH}}']]) },
      ],
    });
    assert.deepEqual(plain.reqs.map((q) => header(q, 'Authorization')), [undefined, `Bearer ${ph.GH}`]);
    hasEvent(plain.events, { kind: 'secret.misdirected', secret: 'GH', host: GH_HOST, reason: 'plain HTTP' });
  });

  test('another sandbox\'s placeholder and an unknown one stay as they are', async () => {
    const unknown = `RUNTIME_PH_${crypto.randomBytes(16).toString('hex')}`;
    const r = await send({
      host: GH_HOST,
      steps: [{ send: request('GET', '/repos/acme/x', GH_HOST, [['X-B', phB], ['X-U', unknown], ['X-Mine', '{{GH}}']]) }],
    });
    assert.deepEqual(statuses(r), [200]);
    assert.equal(header(r.reqs[0], 'X-B'), phB);
    assert.equal(header(r.reqs[0], 'X-U'), unknown);
    assert.equal(header(r.reqs[0], 'X-Mine'), V_GH, 'its own placeholder in the same request is swapped');
    hasEvent(r.events, { kind: 'secret.misdirected', host: GH_HOST, reason: 'placeholder of another sandbox' });
    hasEvent(r.events, { kind: 'secret.misdirected', host: GH_HOST, reason: 'unknown placeholder' });
    for (const e of r.events.filter((x) => x.kind === 'secret.misdirected')) {
      assert.equal(e.secret ?? null, null, 'the other sandbox\'s secret is not named');
    }
    // And the same placeholder works in its own sandbox.
    const own = await send({ host: GH_HOST, steps: [{ send: request('GET', '/repos/acme/x', GH_HOST, [['X-B', phB]]) }] }, sb2.id);
    assert.equal(header(own.reqs[0], 'X-B'), V_GH);
  });

  test('methods and paths: only GET and /repos/acme/* get the value; path tricks are refused', async () => {
    // [method, target, outcome]: 'swap', 'keep' (forwarded, placeholder kept, misdirected), or a 400 reason.
    const cases = [
      ['GET', '/repos/acme/x', 'swap'],
      ['GET', '/repos/acme/', 'swap'], // the prefix itself
      ['GET', '/repos/%61cme/x', 'swap'], // an encoded unreserved character is the same path
      ['GET', '/repos/acme/x?next=/repos/acmeevil', 'swap'], // the query is not the path
      ['POST', '/repos/acme/x', 'keep:method not allowed'],
      ['PUT', '/repos/acme/x', 'keep:method not allowed'],
      ['GET', '/repos/acmeevil', 'keep:path not allowed'],
      ['GET', '/repos/acme', 'keep:path not allowed'],
      ['GET', '/repos/acme/x/y', 'swap'], // a path ending in /* is a prefix (Runtime Cloud's rules)
      ['GET', '/REPOS/acme/x', 'keep:path not allowed'],
      ['GET', '/repos/acme%2Dx', 'keep:path not allowed'], // %2D is '-': /repos/acme-x
      ['GET', '/repos/acme/../admin', 'dot segment in path'],
      ['GET', '/repos/acme/%2e%2e/admin', 'dot segment in path'],
      ['GET', '/repos/acme/%2E%2e/admin', 'dot segment in path'],
      ['GET', '/repos/acme/./x', 'dot segment in path'],
      ['GET', '/repos/acme/..;/admin', 'dot segment in path'],
      ['GET', '/repos/acme%2fx', 'encoded slash in path'],
      ['GET', '/repos/acme/x%2F..%2Fadmin', 'encoded slash in path'],
      ['GET', '//repos/acme/x', 'empty segment in path'],
      ['GET', '/repos//acme/x', 'empty segment in path'],
      ['GET', '/repos/acme//x', 'empty segment in path'],
      ['GET', '/repos/acme/x\\..\\..\\admin', 'backslash in path'],
      ['GET', '/repos/acme/x%5c..%5cadmin', 'backslash in path'],
      ['get', '/repos/acme/x', 'bad method'],
    ];
    for (const [method, target, want] of cases) {
      const r = await send({
        host: GH_HOST,
        steps: [{
          send: request(method, target, GH_HOST, [['Authorization', 'Bearer {{GH}}']], method === 'GET' || method === 'get' ? '' : 'x'),
          waitClose: !want.startsWith('keep') && want !== 'swap',
        }],
      });
      const what = `${method} ${target} (${want})`;
      const [res] = r.result.steps[0]?.responses ?? [];
      if (want === 'swap' || want.startsWith('keep:')) {
        assert.equal(res?.status, 200, `${what}: ${JSON.stringify(r.result)}`);
        assert.equal(r.reqs.length, 1, what);
        assert.equal(r.reqs[0].target, target, `${what}: the target is forwarded as sent`);
        const auth = header(r.reqs[0], 'Authorization');
        if (want === 'swap') {
          assert.equal(auth, `Bearer ${V_GH}`, what);
          noEvent(r.events, { kind: 'secret.misdirected' });
        } else {
          assert.equal(auth, `Bearer ${ph.GH}`, what);
          hasEvent(r.events, { kind: 'secret.misdirected', secret: 'GH', method, reason: want.slice(5) });
          noEvent(r.events, { kind: 'secret.used' });
        }
      } else {
        assert.equal(res?.status, 400, `${what}: ${JSON.stringify(r.result)}`);
        assert.equal(res.body.trim(), want, what);
        assert.deepEqual(r.reqs, [], `${what}: nothing forwarded`);
        assert.deepEqual(r.rx, [], `${what}: not one byte reached the upstream`);
        assert.equal(r.result.closed, true, `${what}: the connection is closed after the 400`);
        noEvent(r.events, { kind: 'secret.used' });
      }
    }
  });

  test('pipelined requests are judged one by one', async () => {
    const seq = [
      request('GET', '/repos/acme/a', GH_HOST, [['X-T', '{{GH}}']]),
      request('GET', '/repos/other/b', GH_HOST, [['X-T', '{{GH}}']]),
      request('POST', '/repos/acme/c', GH_HOST, [['X-T', '{{GH}}']], `body ${ph.GH} stays`),
      request('GET', '/repos/acme/d', GH_HOST, [['X-T', '{{GH}}'], ['X-O', '{{OTHER}}']]),
    ];
    const r = await send({ host: GH_HOST, steps: [{ send: seq.join(''), expect: 4 }] });
    assert.deepEqual(statuses(r), [200, 200, 200, 200], JSON.stringify(r.result));
    assert.equal(r.rx.length >= 1, true);
    assert.deepEqual(r.reqs.map((q) => [q.method, q.target, header(q, 'X-T')]), [
      ['GET', '/repos/acme/a', V_GH],
      ['GET', '/repos/other/b', ph.GH],
      ['POST', '/repos/acme/c', ph.GH],
      ['GET', '/repos/acme/d', V_GH],
    ]);
    assert.equal(r.reqs[2].body, `body ${ph.GH} stays`, 'bodies are never rewritten');
    assert.equal(header(r.reqs[3], 'X-O'), ph.OTHER);
    assert.equal(new Set(r.reqs.map((q) => q.id)).size, 1, 'one upstream connection');
    assert.deepEqual(r.result.steps[0].responses.map((x) => JSON.parse(x.body).req), [1, 2, 3, 4], 'answers in order');
  });

  test('keep-alive requests are judged one by one', async () => {
    const r = await send({
      host: GH_HOST,
      steps: [
        { send: request('GET', '/repos/acme/1', GH_HOST, [['X-T', '{{GH}}']]) },
        { send: request('DELETE', '/repos/acme/2', GH_HOST, [['X-T', '{{GH}}']]) },
        { send: request('GET', '/repos/acme/3', GH_HOST, [['X-T', '{{GH}}']]) },
        { send: request('GET', '/user', GH_HOST, [['X-T', '{{GH}}']]) },
        { send: request('GET', '/repos/acme/5', GH_HOST, [['X-T', '{{GH}}']]) },
      ],
    });
    assert.deepEqual(statuses(r), [200, 200, 200, 200, 200], JSON.stringify(r.result));
    assert.deepEqual(r.reqs.map((q) => header(q, 'X-T')), [V_GH, ph.GH, V_GH, ph.GH, V_GH]);
    assert.equal(new Set(r.reqs.map((q) => q.id)).size, 1, 'one upstream connection');
    hasEvent(r.events, { kind: 'secret.misdirected', secret: 'GH', method: 'DELETE', reason: 'method not allowed' });
    hasEvent(r.events, { kind: 'secret.misdirected', secret: 'GH', path: '/user', reason: 'path not allowed' });
  });

  test('a Host that disagrees with the SNI gets 421 and nothing is forwarded', async () => {
    for (const host of [OTHER_HOST, 'spliced.test', 'API.GITHUB.TEST.evil', '198.51.100.1']) {
      const r = await send({ host: GH_HOST, steps: [{ send: request('GET', '/repos/acme/x', host, [['X-T', '{{GH}}']]) }] });
      const [res] = r.result.steps[0].responses;
      assert.equal(res?.status, 421, `Host ${host}: ${JSON.stringify(r.result)}`);
      assert.deepEqual(r.rx, [], `Host ${host}: not one byte reached the upstream`);
    }
    // Upper case and a port are the same host.
    const same = await send({ host: GH_HOST, steps: [{ send: request('GET', '/repos/acme/x', 'API.GitHub.test:443', [['X-T', '{{GH}}']]) }] });
    assert.equal(same.result.steps[0].responses[0]?.status, 200, JSON.stringify(same.result));
    assert.equal(header(same.reqs[0], 'X-T'), V_GH);
    // Later on a keep-alive connection: the first request goes, the second is refused.
    const r = await send({
      host: GH_HOST,
      steps: [
        { send: request('GET', '/repos/acme/1', GH_HOST, [['X-T', '{{GH}}']]) },
        { send: request('GET', '/repos/acme/2', OTHER_HOST, [['X-T', '{{GH}}'], ['X-O', '{{OTHER}}']]), waitClose: true },
      ],
    });
    assert.deepEqual(statuses(r), [200, 421]);
    assert.deepEqual(r.reqs.map((q) => q.target), ['/repos/acme/1']);
    assert.equal(r.result.closed, true);
    // SNI and the name the sandbox resolved must agree too (no way to get the
    // leaf of one host on a connection to another).
    const sni = await send({ host: 'spliced.test', servername: GH_HOST, steps: [{ send: request('GET', '/repos/acme/x', GH_HOST, [['X-T', '{{GH}}']]) }] });
    assert.equal(sni.result.connected, false, JSON.stringify(sni.result));
    assert.deepEqual(sni.conns, []);
    hasEvent(sni.events, { kind: 'egress.refused', host: 'spliced.test', reason: 'sni_mismatch' });
  });

  test('a placeholder split across TLS records (3 bytes a record) is swapped', async () => {
    const req = request('GET', '/repos/acme/split?t={{GH}}', GH_HOST, [['Authorization', 'Bearer {{GH}}']]);
    const r = await send({ host: GH_HOST, steps: [{ send: req, piece: 3 }], timeoutMs: 20000 });
    assert.deepEqual(statuses(r), [200], JSON.stringify(r.result));
    const bytes = req.replace(/\{\{GH\}\}/g, ph.GH).length;
    assert.ok(r.result.records.app >= Math.ceil(bytes / 3), `${r.result.records.app} records for ${bytes} bytes`);
    assert.equal(header(r.reqs[0], 'Authorization'), `Bearer ${V_GH}`);
    assert.equal(r.reqs[0].target, `/repos/acme/split?t=${pct(V_GH)}`);
    assert.ok(r.rx.length >= 1);
  });

  // Python is not installed system-wide on these machines (nor in sandboxes,
  // which get the host's /usr), so Python's ssl/requests are not checked here.
  test('the forged certificate verifies in curl, Node (https and fetch) and OpenSSL with the sandbox\'s own settings', async () => {
    const mark = w.upstream.mark();
    const curl = await d.sh(sb.id,
      `curl -sS --fail https://${GH_HOST}/repos/acme/curl -H "Authorization: Bearer $GH" -w ' verify=%{ssl_verify_result}'`);
    assert.equal(curl.exitCode, 0, curl.stderr);
    assert.match(curl.stdout, / verify=0$/);

    const js = `
      import https from 'node:https';
      const viaHttps = () => new Promise((ok, ko) => https.get('https://${GH_HOST}/repos/acme/https',
        { headers: { authorization: 'Bearer ' + process.env.GH } }, (res) => { res.resume(); res.on('end', () => ok(res.statusCode)); }).on('error', ko));
      const viaFetch = async () => (await fetch('https://${GH_HOST}/repos/acme/fetch', { headers: { authorization: 'Bearer ' + process.env.GH } })).status;
      console.log(JSON.stringify([await viaHttps(), await viaFetch()]));`;
    await d.putFile(sb.id, '/workspace/clients.mjs', js);
    const node = await d.exec(sb.id, ['node', '/workspace/clients.mjs']);
    assert.equal(node.exitCode, 0, node.stderr);
    assert.deepEqual(JSON.parse(node.stdout), [200, 200]);

    // OpenSSL with its default verify paths (SSL_CERT_FILE in the sandbox's environment).
    const ossl = await d.sh(sb.id, `openssl s_client -connect ${GH_HOST}:443 -servername ${GH_HOST} ` +
      `-verify_return_error -verify_hostname ${GH_HOST} </dev/null 2>&1`);
    assert.equal(ossl.exitCode, 0, ossl.stdout);
    assert.match(ossl.stdout, /Verify return code: 0 \(ok\)/);
    assert.match(ossl.stdout, /issuer=.*CN = runtimed interception CA/);
    // The same check fails for a name the leaf is not for (the check is real).
    const wrong = await d.sh(sb.id, `openssl s_client -connect ${GH_HOST}:443 -servername ${GH_HOST} ` +
      `-verify_return_error -verify_hostname ${OTHER_HOST} </dev/null 2>&1`);
    assert.notEqual(wrong.exitCode, 0);
    assert.match(wrong.stdout, /hostname mismatch/);

    const reqs = w.upstream.since(mark, 'req');
    for (const p of ['/repos/acme/curl', '/repos/acme/https', '/repos/acme/fetch']) {
      const q = reqs.find((x) => x.target === p);
      assert.ok(q, `${p} reached the upstream`);
      assert.equal(header(q, 'Authorization'), `Bearer ${V_GH}`, p);
    }
  });
});
