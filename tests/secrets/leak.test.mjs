// Secrets, the first promise (docs/secrets.md): a secret's value never enters a sandbox.
// A sandbox uses a secret in 200 HTTPS requests (Bearer, Basic, query, some
// refused for method or path, some to an upstream with a bad certificate,
// malformed ones), then the value, its middle and its base64 forms are
// searched for, and must be found nowhere:
//   - in the sandbox, seen from the host: every process's environment and
//     command line, and the writable memory of every process (/proc/PID/mem,
//     ranges from /proc/PID/maps), and every file reachable from its root
//     (/proc/PID/root; /proc, /sys and /dev are virtual, /usr is the host's,
//     mounted read-only);
//   - in the sandbox, seen from inside: what its programs can read of /proc;
//   - at the daemon: its log, every event, every API answer this test
//     received (kept by lib.mjs), error messages of the API and the CLI (bad
//     hosts, bad names, bad values, bad JSON), and its state directory (the
//     value is sealed at rest).
// Controls show the searches work: the placeholder is found in the sandbox's
// memory and environment, a marker in its files, and the value at the upstream.

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { after, before, describe, test } from 'node:test';

import { processesMatching, GVISOR, insideProcesses, readOr, sandboxHostProcesses, sandboxRootOnHost } from '../e2e/lib.mjs';
import {
  SecretsWorld, allEvents, header, isRoot, request, sandboxProcesses, searchMemfds, searchMemory, searchTree, waitFor,
} from './lib.mjs';

const H = 'api.github.test';
const VALUE = `leak_${crypto.randomBytes(32).toString('hex')}`;
const b64mid = (s) => s.slice(4, -4); // the part of a base64 form that does not depend on its neighbours
const NEEDLES = [
  VALUE,
  VALUE.slice(20, 44),
  b64mid(Buffer.from(VALUE).toString('base64')),
  b64mid(Buffer.from(`x${VALUE}`).toString('base64')),
  b64mid(Buffer.from(`xx${VALUE}`).toString('base64')),
];
const MARKER = `marker_${crypto.randomBytes(16).toString('hex')}`;
const RUN = crypto.randomBytes(8).toString('hex');

let w, d, sb, ph;

/** The needles found in text (or a Buffer). */
const found = (text) => NEEDLES.filter((n) => (Buffer.isBuffer(text) ? text.indexOf(n) >= 0 : String(text).includes(n)));

// The sandbox's program: 200 requests over keep-alive connections with the
// placeholder from its environment, answers logged to a file; then it stays
// alive (its memory is searched) until /workspace/quit appears (or 120 s).
const USER_JS = `
import fs from 'node:fs';
import https from 'node:https';
const ph = process.env.LEAK;
const agent = new https.Agent({ keepAlive: true, maxSockets: 4 });
const get = (method, path, headers) => new Promise((resolve) => {
  const req = https.request({ host: '${H}', method, path, agent, headers }, (res) => {
    let body = '';
    res.on('data', (d) => { body += d; });
    res.on('end', () => resolve(res.statusCode + ' ' + body));
  });
  req.on('error', (e) => resolve('error ' + e.message));
  req.end();
});
const out = [];
for (let i = 0; i < 200; i++) {
  const k = i % 10;
  let r;
  if (k < 5) r = await get('GET', '/repos/acme/r' + i, { authorization: 'Bearer ' + ph });
  else if (k === 5) r = await get('GET', '/repos/acme/b' + i, { authorization: 'Basic ' + Buffer.from('x-access-token:' + ph).toString('base64') });
  else if (k === 6) r = await get('GET', '/repos/acme/q' + i + '?access_token=' + ph, {});
  else if (k === 7) r = await get('POST', '/repos/acme/p' + i, { authorization: 'Bearer ' + ph });
  else if (k === 8) r = await get('GET', '/admin/' + i, { authorization: 'Bearer ' + ph });
  else r = await get('GET', '/repos/acme/h' + i, { 'x-api-key': ph, cookie: 'session=' + ph });
  out.push(r);
}
fs.writeFileSync('/workspace/responses.log', out.join('\\n') + '\\n');
fs.writeFileSync('/workspace/done', String(out.length));
const t0 = Date.now();
const timer = setInterval(() => {
  if (fs.existsSync('/workspace/quit') || Date.now() - t0 > 120000) { clearInterval(timer); process.exit(0); }
}, 50);
`;

describe('secrets: the value never enters the sandbox', { skip: !isRoot() && 'must run as root (runtimed and ip netns need it)' }, () => {
  before(async () => {
    w = await new SecretsWorld().setup();
    d = w.daemon;
    await d.putSecret('LEAK', { value: VALUE, hosts: [H, 'untrusted.test'], methods: ['GET'], paths: ['/repos/acme/*'] });
    sb = await d.secretsSandbox();
    ph = await d.envOf(sb.id, 'LEAK');
  });
  after(async () => {
    if (sb) await d.putFile(sb.id, '/workspace/quit', '').catch(() => {});
    await w?.teardown();
  });

  test('after 200 requests with the secret, its value is nowhere in the sandbox or the daemon\'s output', { timeout: 120000 }, async () => {
    const mark = w.upstream.mark();
    await d.putFile(sb.id, '/workspace/user.mjs', USER_JS);
    await d.putFile(sb.id, '/workspace/marker.txt', MARKER);
    // RUN tells this program from any other test run's on the host.
    await d.exec(sb.id, ['sh', '-c', `node /workspace/user.mjs ${RUN} >/workspace/user.out 2>&1 </dev/null &`]);
    await waitFor(async () => (await d.getFile(sb.id, '/workspace/done')) === '200',
      { timeoutMs: 60000, intervalMs: 100, what: 'the 200 requests' });

    // Failing paths, with their error messages kept in the sandbox's files:
    // curl, an upstream with a bad certificate, malformed and misdirected requests.
    const sh = await d.sh(sb.id, [
      `curl -sS https://${H}/repos/acme/curl -H "Authorization: Bearer $LEAK" -o /workspace/curl-ok.txt`,
      `curl -sS -v https://untrusted.test/repos/acme/x -H "Authorization: Bearer $LEAK" >/workspace/curl-bad.txt 2>&1`,
      `curl -sS -v https://${H}/repos/acme/x -H "Host: api.other.test" -H "Authorization: Bearer $LEAK" >/workspace/curl-421.txt 2>&1`,
      `curl -sS -v -X TRACE https://${H}/repos/acme/x -H "Authorization: Bearer $LEAK" >/workspace/curl-trace.txt 2>&1`,
      `curl -sS -v http://${H}/repos/acme/x -H "Authorization: Bearer $LEAK" >/workspace/curl-plain.txt 2>&1`,
      'true',
    ].join('; '));
    assert.equal(sh.exitCode, 0, sh.stderr);
    const bad = await d.inside(sb.id, 'conn', {
      host: H, steps: [{ send: `GET /repos/acme/x HTTP/1.1\r\nHost: ${H}\r\nAuthorization: Bearer {{LEAK}}\nX: y\r\n\r\n`, waitClose: true }],
    });
    assert.equal(bad.steps[0].responses[0]?.status, 400);

    // Control: the value did reach the upstream, in most requests.
    const reqs = w.upstream.since(mark, 'req');
    const basic = Buffer.from(`x-access-token:${VALUE}`).toString('base64');
    const carried = reqs.filter((q) => q.target.includes(VALUE) || q.headers.some(([, v]) => v.includes(VALUE) || v.includes(basic)));
    assert.ok(carried.length >= 141, `the upstream got the value in ${carried.length} requests`);
    assert.ok(reqs.some((q) => q.method === 'POST' && header(q, 'authorization') === `Bearer ${ph}`), 'a POST kept the placeholder');

    // The sandbox, from the host.
    if (GVISOR) await searchGvisorSandbox();
    else await searchSandboxProcesses();

    // The sandbox, from inside: whatever its programs can read of /proc.
    const inside = await d.sh(sb.id, 'for p in /proc/[0-9]*; do cat $p/environ $p/cmdline; echo; done 2>/dev/null; env; cat /workspace/*.txt /workspace/*.log');
    assert.ok(inside.stdout.includes(ph), 'control: the placeholder is visible inside');
    assert.deepEqual(found(inside.stdout + inside.stderr), []);

    await d.putFile(sb.id, '/workspace/quit', '');
  });

  /** Under gvisor the sandbox's programs are gVisor's, no host processes: their memory is
   * runsc's memory file, a memfd the sentry and its systrap stubs map, and they with the
   * gofer and the holder are what the host has of the sandbox (its cgroup). Every one of
   * those is searched: its environment, command line and writable memory, and the memfds it
   * holds (read as files: a read of their mappings through /proc/PID/mem would allocate
   * their holes in the sandbox's cgroup, and OOM it). The placeholder, in the program's
   * memory, is found in the memory file (the control that the search reaches it). The files
   * are searched where the holder builds them and the gofer serves them. */
  async function searchGvisorSandbox() {
    await waitFor(async () => (await insideProcesses(d, sb.id, `/workspace/user.mjs ${RUN}`))
      .filter((x) => x.cmdline.startsWith('node ')).length === 1, { what: 'the sandbox program in the sandbox' });
    const procs = sandboxHostProcesses(d.stateDir, sb.id);
    assert.ok(procs.some((p) => p.cmdline.startsWith('runsc-sandbox')) && procs.some((p) => p.cmdline === 'runtime-init'),
      `the sandbox's host processes: ${procs.map((p) => p.cmdline.slice(0, 30))}`);
    const withPh = [];
    const seen = new Set();
    let memfdBytes = 0;
    for (const p of procs) {
      const environ = readOr(`/proc/${p.pid}/environ`, Buffer.alloc(0), null);
      const cmdline = readOr(`/proc/${p.pid}/cmdline`, Buffer.alloc(0), null);
      assert.deepEqual(found(environ), [], `environment of ${p.pid} (${p.cmdline.slice(0, 40)})`);
      assert.deepEqual(found(cmdline), [], `command line of ${p.pid} (${p.cmdline.slice(0, 40)})`);
      const mem = searchMemory(p.pid, [...NEEDLES, ph], { skipMemfd: true });
      assert.deepEqual(mem.found.filter((n) => n !== ph), [], `memory of ${p.pid} (${p.cmdline.slice(0, 40)}), ${mem.bytes} bytes searched`);
      const files = searchMemfds(p.pid, [...NEEDLES, ph], seen);
      assert.deepEqual(files.found.filter((n) => n !== ph), [], `memfds ${files.files} of ${p.pid} (${p.cmdline.slice(0, 40)})`);
      memfdBytes += files.bytes;
      if (mem.found.includes(ph) || files.found.includes(ph)) withPh.push(p);
      if (p.cmdline.startsWith('runsc-sandbox')) {
        assert.deepEqual(mem.skipped, [], 'every writable mapping of the sentry was searched');
        assert.ok(mem.bytes > 1 << 20, `control: ${mem.bytes} bytes of the sentry's memory searched`);
        assert.ok(files.files.some((f) => f.startsWith('/memfd:runsc-memory')), `the sentry's memory file: ${files.files}`);
      }
    }
    assert.ok(memfdBytes > 1 << 20, `control: ${memfdBytes} bytes of memfds searched`);
    assert.ok(withPh.some((p) => p.cmdline.startsWith('runsc-sandbox')), "control: the placeholder is in the sandbox's memory");
    const st = await d.api('GET', `/v1/sandboxes/${sb.id}`);
    assert.equal(st.body.status, 'running', `the search left the sandbox running: ${st.text}`);
    const root = sandboxRootOnHost(d.stateDir, sb.id);
    const files = searchTree(root, [...NEEDLES, MARKER], ['proc', 'sys', 'dev', 'usr']);
    const hits = files.hits.filter((f) => !f.endsWith('/workspace/marker.txt'));
    assert.deepEqual(hits, [], `files of the sandbox (${files.files} searched)`);
    assert.ok(files.hits.some((f) => f.endsWith('/workspace/marker.txt')), 'control: the file search finds the marker');
    for (const f of ['responses.log', 'curl-ok.txt', 'curl-bad.txt', 'curl-421.txt', 'curl-trace.txt', 'curl-plain.txt']) {
      assert.ok(fs.existsSync(`${root}/workspace/${f}`), `${f} was written (and searched)`);
    }
  }

  async function searchSandboxProcesses() {
    const [user] = await waitFor(() => {
      const p = processesMatching(`/workspace/user.mjs ${RUN}`).filter((x) => x.cmdline.startsWith('node '));
      return p.length === 1 && p;
    }, { what: 'the sandbox program on the host' });
    const procs = sandboxProcesses(user.pid);
    assert.ok(procs.length >= 2 && procs.some((p) => p.pid === user.pid), `sandbox processes: ${procs.map((p) => p.cmdline)}`);
    for (const p of procs) {
      const environ = fs.readFileSync(`/proc/${p.pid}/environ`);
      const cmdline = fs.readFileSync(`/proc/${p.pid}/cmdline`);
      assert.deepEqual(found(environ), [], `environment of ${p.pid} (${p.cmdline})`);
      assert.deepEqual(found(cmdline), [], `command line of ${p.pid} (${p.cmdline})`);
      const mem = searchMemory(p.pid, [...NEEDLES, ph]);
      assert.deepEqual(mem.found.filter((n) => n !== ph), [], `memory of ${p.pid} (${p.cmdline}), ${mem.bytes} bytes searched`);
      if (p.pid === user.pid) {
        assert.deepEqual(mem.skipped, [], 'every writable mapping of the program was searched');
        assert.ok(environ.includes(ph), 'control: the placeholder is in the program\'s environment');
        assert.ok(mem.found.includes(ph), 'control: the placeholder is in the program\'s memory');
        assert.ok(mem.bytes > 1 << 20, `control: ${mem.bytes} bytes of memory searched`);
      }
    }
    const files = searchTree(`/proc/${user.pid}/root`, [...NEEDLES, MARKER], ['proc', 'sys', 'dev', 'usr']);
    const hits = files.hits.filter((f) => !f.endsWith('/workspace/marker.txt'));
    assert.deepEqual(hits, [], `files of the sandbox (${files.files} searched)`);
    assert.ok(files.hits.some((f) => f.endsWith('/workspace/marker.txt')), 'control: the file search finds the marker');
    for (const f of ['responses.log', 'curl-ok.txt', 'curl-bad.txt', 'curl-421.txt', 'curl-trace.txt', 'curl-plain.txt']) {
      assert.ok(fs.existsSync(`/proc/${user.pid}/root/workspace/${f}`), `${f} was written (and searched)`);
    }
  }

  test('error messages of the API and the CLI never repeat the value', async () => {
    const tries = [
      ['PUT', '/v1/egress-secrets/LEAK2', { value: VALUE, hosts: ['bad host!'] }],
      ['PUT', '/v1/egress-secrets/LEAK2', { value: VALUE, hosts: ['10.0.0.0/8'] }],
      ['PUT', '/v1/egress-secrets/LEAK2', { value: VALUE, hosts: [H], methods: ['get'] }],
      ['PUT', '/v1/egress-secrets/LEAK2', { value: VALUE, hosts: [H], paths: ['no-slash'] }],
      ['PUT', '/v1/egress-secrets/LEAK2', { value: `${VALUE}\r\nX-Injected: 1`, hosts: [H] }],
      ['PUT', '/v1/egress-secrets/LEAK2', { value: VALUE.repeat(300), hosts: [H] }],
      ['PUT', '/v1/egress-secrets/LEAK2', { value: VALUE }],
      ['PUT', '/v1/egress-secrets/LEAK2', { value: [VALUE], hosts: [H] }],
      ['PUT', '/v1/egress-secrets/bad-name!', { value: VALUE, hosts: [H] }],
      ['PUT', '/v1/egress-secrets/LEAK2', `{"value": "${VALUE}", "hosts": [`],
      ['PUT', '/v1/egress-secrets/LEAK2', `{"value": "${VALUE}\u0001", "hosts": ["${H}"]}`],
      ['POST', '/v1/egress-secrets/LEAK', { value: VALUE, hosts: [H] }],
      ['GET', '/v1/egress-secrets/LEAK'],
      ['GET', '/v1/egress-secrets'],
      ['GET', `/v1/sandboxes/${sb.id}`],
      ['GET', '/v1/sandboxes'],
    ];
    for (const [method, p, body] of tries) {
      const r = await d.api(method, p, body);
      const what = `${method} ${p} ${typeof body === 'string' ? body.replace(VALUE, '<value>') : JSON.stringify(body ?? '').replaceAll(VALUE, '<value>')}`;
      if (method === 'PUT') assert.ok(r.status >= 400, `${what} must be refused: ${r.status}`);
      assert.deepEqual(found(r.text), [], `${what} -> ${r.status}: the answer repeats the value`);
    }
    const list = await d.api('GET', '/v1/egress-secrets');
    assert.ok(list.body.secrets.some((s) => s.name === 'LEAK'), 'control: the secret is listed');

    const cli = (args, input) => d.cli(args, { input, env: { RUNTIME_API_URL: undefined, RUNTIME_SOCKET: d.socket } });
    const runs = [
      [['secret', 'set', 'LEAK3', '--host', 'bad host!'], VALUE],
      [['secret', 'set', 'LEAK3', '--host', H, '--path', 'no-slash'], VALUE],
      [['secret', 'set', 'LEAK3', '--host', H, '--method', 'G3T!'], VALUE],
      [['secret', 'set', 'bad-name!', '--host', H], VALUE],
      [['secret', 'set', 'LEAK3', '--host', H], `${VALUE}\r\ninjected`],
      [['secret', 'set', 'LEAK3'], VALUE],
      [['secret', 'list', '--json'], ''],
      [['secret', 'list'], ''],
    ];
    for (const [args, input] of runs) {
      const r = await cli(args, input);
      if (args[1] === 'set') assert.notEqual(r.code, 0, `runtime ${args.join(' ')} must fail: ${r.stdout}${r.stderr}`);
      else assert.equal(r.code, 0, `runtime ${args.join(' ')}: ${r.stderr}`);
      assert.deepEqual(found(r.stdout + r.stderr), [], `runtime ${args.join(' ')}: ${r.stdout}${r.stderr}`);
    }
  });

  test('the daemon\'s log, events, API answers and state directory hold no trace of the value', async () => {
    const events = await allEvents(d, sb.id);
    assert.ok(events.filter((e) => e.kind === 'secret.used').length >= 141, 'control: secret.used events');
    assert.ok(events.some((e) => e.kind === 'secret.misdirected'), 'control: secret.misdirected events');
    assert.deepEqual(found(JSON.stringify(events)), [], 'events');
    assert.deepEqual(found(d.log()), [], 'the daemon\'s log');
    assert.ok(d.transcript.length > 20, 'control: API answers were recorded');
    assert.deepEqual(found(d.transcript.join('\n')), [], 'API answers');
    // Everything under the test's directory: state (database, WAL, sealed secrets, CA), log, certificates.
    const tree = searchTree(w.dir, NEEDLES);
    assert.deepEqual(tree.hits, [], `files of the daemon (${tree.files} searched)`);
    assert.ok(tree.files > 5, 'control: the state directory was searched');
  });
});
