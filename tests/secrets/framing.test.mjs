// Secrets: request framing on intercepted hosts is strict. Anything two HTTP
// parsers could read differently (CL.TE, TE.CL, duplicate Content-Length,
// obs-fold, bare LF or CR) gets 400 and not one byte reaches the upstream;
// TRACE, CONNECT and Upgrade are refused; hop-by-hop and Proxy-* fields are
// dropped. The fake upstream (upstream.mjs) counts every byte it receives.

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';

import { SecretsWorld, allEvents, header, isRoot, lastSeq, request, waitFor } from './lib.mjs';

const VALUE = `fr_${crypto.randomBytes(20).toString('hex')}`;
const H = 'api.github.test';

let w, d, sb, ph;

async function send(arg) {
  const mark = w.upstream.mark();
  const seq = await lastSeq(d, sb.id);
  const result = await d.inside(sb.id, 'conn', { host: H, ...arg });
  return {
    result,
    reqs: w.upstream.since(mark, 'req'),
    rx: w.upstream.since(mark, 'rx'),
    events: await allEvents(d, sb.id, seq),
  };
}

const head = (lines) => `${lines.join('\r\n')}\r\n\r\n`;

/** A CL.TE request whose chunked reading hides a second request with the placeholder. */
const smuggle = (target) => head([`POST ${target} HTTP/1.1`, `Host: ${H}`, 'Content-Length: 40', 'Transfer-Encoding: chunked']) +
  `0\r\n\r\n${request('GET', '/smuggled', H, [['X-Token', '{{GH}}']])}`;

describe('secrets: strict framing', { skip: !isRoot() && 'must run as root (runtimed and ip netns need it)' }, () => {
  before(async () => {
    w = await new SecretsWorld().setup();
    d = w.daemon;
    await d.putSecret('GH', { value: VALUE, hosts: [H] });
    sb = await d.secretsSandbox();
    ph = await d.envOf(sb.id, 'GH');
  });
  after(async () => {
    await w?.teardown();
  });

  test('smuggling shapes, folding and bare line ends get 400; nothing is forwarded', async () => {
    const t = 'X-Token: {{GH}}';
    // [name, bytes, the reason in the 400 answer]
    const cases = [
      ['CL.TE', head(['POST /x HTTP/1.1', `Host: ${H}`, t, 'Content-Length: 6', 'Transfer-Encoding: chunked']) + '0\r\n\r\nG', 'CL and TE together'],
      ['TE.CL', head(['POST /x HTTP/1.1', `Host: ${H}`, t, 'Transfer-Encoding: chunked', 'Content-Length: 3']) + '8\r\nSMUGGLED\r\n0\r\n\r\n', 'CL and TE together'],
      ['TE.TE (obfuscated)', head(['POST /x HTTP/1.1', `Host: ${H}`, t, 'Transfer-Encoding: chunked', 'Transfer-Encoding: identity']) + '0\r\n\r\n', 'duplicate Transfer-Encoding'],
      ['TE not chunked', head(['POST /x HTTP/1.1', `Host: ${H}`, t, 'Transfer-Encoding: xchunked']) + '0\r\n\r\n', 'unsupported Transfer-Encoding'],
      ['TE list', head(['POST /x HTTP/1.1', `Host: ${H}`, t, 'Transfer-Encoding: identity, chunked']) + '0\r\n\r\n', 'unsupported Transfer-Encoding'],
      ['TE with space before colon', head(['POST /x HTTP/1.1', `Host: ${H}`, t, 'Transfer-Encoding : chunked']) + '0\r\n\r\n', 'space before colon'],
      ['TE in HTTP/1.0', head(['POST /x HTTP/1.0', `Host: ${H}`, t, 'Transfer-Encoding: chunked']) + '0\r\n\r\n', 'Transfer-Encoding in HTTP/1.0'],
      ['duplicate Content-Length', head(['POST /x HTTP/1.1', `Host: ${H}`, t, 'Content-Length: 5', 'Content-Length: 5']) + 'hello', 'duplicate Content-Length'],
      ['Content-Length list', head(['POST /x HTTP/1.1', `Host: ${H}`, t, 'Content-Length: 5, 5']) + 'hello', 'bad Content-Length'],
      ['Content-Length sign', head(['POST /x HTTP/1.1', `Host: ${H}`, t, 'Content-Length: +5']) + 'hello', 'bad Content-Length'],
      ['obs-fold', head(['GET /x HTTP/1.1', `Host: ${H}`, 'X-Token: a', ' {{GH}}']), 'obs-fold'],
      ['obs-fold with a tab', head(['GET /x HTTP/1.1', `Host: ${H}`, t, '\tTransfer-Encoding: chunked']), 'obs-fold'],
      ['bare LF everywhere', `GET /x HTTP/1.1\nHost: ${H}\nX-Token: {{GH}}\n\n`, 'bare LF'],
      ['bare LF in one field', `GET /x HTTP/1.1\r\nHost: ${H}\r\nX-Token: {{GH}}\nX-B: 1\r\n\r\n`, 'bare LF'],
      ['bare CR', `GET /x HTTP/1.1\r\nHost: ${H}\r\nX-Token: {{GH}}\rX-B: 1\r\n\r\n`, 'bare CR'],
      ['NUL', `GET /x HTTP/1.1\r\nHost: ${H}\r\nX-Token: {{GH}}\0\r\n\r\n`, 'NUL in head'],
      ['duplicate Host', head(['GET /x HTTP/1.1', `Host: ${H}`, `Host: ${H}`, t]), 'duplicate Host'],
      ['TRACE', head(['TRACE /x HTTP/1.1', `Host: ${H}`, t]), 'TRACE refused'],
      ['CONNECT', head([`CONNECT ${H}:443 HTTP/1.1`, `Host: ${H}:443`, t]), 'CONNECT refused'],
      ['Upgrade: websocket', head(['GET /ws HTTP/1.1', `Host: ${H}`, t, 'Connection: Upgrade', 'Upgrade: websocket',
        'Sec-WebSocket-Version: 13', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==']), 'Upgrade refused'],
      ['Upgrade: h2c', head(['GET /x HTTP/1.1', `Host: ${H}`, t, 'Upgrade: h2c', 'HTTP2-Settings: AAMAAABkAAQAAP__']), 'Upgrade refused'],
      ['Connection: upgrade alone', head(['GET /x HTTP/1.1', `Host: ${H}`, t, 'Connection: keep-alive, Upgrade']), 'Upgrade refused'],
      ['Connection names Content-Length', head(['POST /x HTTP/1.1', `Host: ${H}`, t, 'Connection: Content-Length', 'Content-Length: 5']) + 'hello', 'Connection lists a framing header'],
    ];
    for (const [name, bytes, why] of cases) {
      const r = await send({ steps: [{ send: bytes, waitClose: true }] });
      const [res] = r.result.steps[0]?.responses ?? [];
      assert.equal(res?.status, 400, `${name}: ${JSON.stringify(r.result)}`);
      assert.equal(res.body.trim(), why, name);
      assert.equal(r.result.closed, true, `${name}: the connection ends after the 400`);
      assert.deepEqual(r.rx, [], `${name}: not one byte may reach the upstream`);
      assert.deepEqual(r.events.filter((e) => e.kind === 'secret.used'), [], `${name}: no secret used`);
      assert.ok(r.events.some((e) => e.kind === 'egress.refused' && e.reason === why && e.host === H),
        `${name}: an egress.refused event with reason "${why}": ${JSON.stringify(r.events)}`);
    }
  });

  test('a smuggled request pipelined after a good one is never forwarded', async () => {
    const good = request('GET', '/first', H, [['X-Token', '{{GH}}']]);
    const r = await send({ steps: [{ send: good + smuggle('/second'), expect: 2, waitClose: true }] });
    const statuses = r.result.steps[0].responses.map((x) => x.status);
    assert.ok(!r.reqs.some((q) => q.target !== '/first'), `only /first may be forwarded: ${JSON.stringify(r.reqs)}`);
    // Refusing the whole connection before /first went out is fine (one 400 for
    // both); if /first went out, its answer must come before the 400.
    if (r.reqs.length) assert.deepEqual(statuses, [200, 400], JSON.stringify(r.result));
    else assert.deepEqual(statuses, [400], JSON.stringify(r.result));
    assert.equal(r.result.closed, true);
  });

  // Each request gets exactly one answer, in order: when a refused request
  // follows one that the upstream has received but not yet answered, the 400
  // must not take the place of that answer (the client would think its first
  // request failed, though the upstream carried it out).
  test('a refusal after a forwarded request waits for that request\'s answer', async () => {
    const good = request('GET', '/first?hold=desync', H, [['X-Token', '{{GH}}']]);
    const mark = w.upstream.mark();
    const seq = await lastSeq(d, sb.id);
    await d.insideBackground(sb.id, 'conn', {
      host: H, timeoutMs: 20000,
      steps: [
        { send: good, expect: 0 },
        { waitFile: '/workspace/gate-desync', send: smuggle('/second'), expect: 2, waitClose: true },
      ],
    }, '/workspace/desync.out');
    await waitFor(() => w.upstream.since(mark, 'req').some((q) => q.target === '/first?hold=desync'),
      { timeoutMs: 10000, what: 'the upstream to receive /first' });
    await d.putFile(sb.id, '/workspace/gate-desync', '');
    await waitFor(async () => (await allEvents(d, sb.id, seq)).some((e) => e.reason === 'CL and TE together'),
      { timeoutMs: 10000, what: 'the proxy to refuse the second request' });
    w.release('desync');
    const out = await waitFor(async () => {
      const text = await d.getFile(sb.id, '/workspace/desync.out');
      return text && text.trim() ? JSON.parse(text) : null;
    }, { timeoutMs: 20000, what: 'the client to finish' });
    const statuses = out.steps.flatMap((s) => s.responses.map((x) => x.status));
    assert.deepEqual(w.upstream.since(mark, 'req').map((q) => q.target), ['/first?hold=desync']);
    assert.deepEqual(statuses, [200, 400],
      `the client sent /first (carried out upstream) and a refused request; it got: ${JSON.stringify(out.steps)}`);
  });

  test('a chunked body is followed exactly: a request inside it is data, the next one is judged', async () => {
    const inner = request('GET', '/inner', H, [['X-Token', '{{GH}}']]).replace('{{GH}}', ph);
    const chunked = head(['POST /upload HTTP/1.1', `Host: ${H}`, 'X-Token: {{GH}}', 'Transfer-Encoding: chunked']) +
      `${inner.length.toString(16)}\r\n${inner}\r\n0\r\n\r\n`;
    const next = request('GET', '/next', H, [['X-Token', '{{GH}}']]);
    const r = await send({ steps: [{ send: chunked + next, expect: 2 }] });
    assert.deepEqual(r.result.steps[0].responses.map((x) => x.status), [200, 200], JSON.stringify(r.result));
    assert.deepEqual(r.reqs.map((q) => q.target), ['/upload', '/next']);
    assert.equal(r.reqs[0].body, inner, 'the body is forwarded as sent, placeholder and all');
    assert.equal(header(r.reqs[0], 'X-Token'), VALUE);
    assert.equal(header(r.reqs[0], 'Transfer-Encoding'), 'chunked');
    assert.equal(header(r.reqs[1], 'X-Token'), VALUE);
  });

  test('hop-by-hop and Proxy-* fields are dropped, the rest forwarded in order, then Accept-Encoding: identity', async () => {
    const r = await send({
      steps: [{
        send: head([
          'GET /hop HTTP/1.1', `Host: ${H}`, 'X-First: 1', 'Connection: keep-alive, X-Hop, x-other-hop',
          'Keep-Alive: timeout=5', 'X-Hop: drop me', 'X-Other-Hop: me too', 'Proxy-Authorization: Bearer {{GH}}',
          'Proxy-Connection: keep-alive', 'Proxy-Anything: x', 'TE: trailers', 'Trailer: X-Sum', 'X-Keep: {{GH}}',
          'Accept: */*',
        ]),
      }],
    });
    assert.equal(r.result.steps[0].responses[0]?.status, 200, JSON.stringify(r.result));
    // Accept-Encoding last: the proxy asks for answers it can scan (reflect.test.mjs).
    assert.deepEqual(r.reqs[0].headers, [['Host', H], ['X-First', '1'], ['X-Keep', VALUE], ['Accept', '*/*'],
      ['Accept-Encoding', 'identity']]);
  });
});
