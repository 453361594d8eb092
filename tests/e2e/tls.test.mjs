// The API listener over TLS (--tls-cert/--tls-key) against a test CA made here:
// curl with and without the CA, HTTP/1.1 keep-alive, the official MCP client through
// an https:// gateway URL, a certificate swapped on SIGHUP (open connections keep
// the old one, new ones get the new one), a bad one on SIGHUP (the old one stays),
// bad files at start, and the refusal to listen off loopback without TLS.

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { McpDaemon } from '../mcp/lib.mjs';
import {
  RUNTIMED, freePort, httpsCall, isRoot, run, startDaemon, stopDaemon, testCa, waitFor,
} from './lib.mjs';

const skip = isRoot() ? false : 'must run as root (runtimed needs it)';
const HELLO_SERVER = fs.readFileSync(new URL('../mcp/fixtures/hello-server.mjs', import.meta.url), 'utf8');
const TLS_CLIENT = new URL('../mcp/fixtures/tls-client.mjs', import.meta.url).pathname;

/** A daemon serving TLS with a certificate of serial 1001 from a fresh test CA. */
function tlsDaemon(dir) {
  const d = new McpDaemon(dir);
  d.pki = testCa(dir);
  d.certFile = path.join(dir, 'server.crt');
  d.keyFile = path.join(dir, 'server.key');
  d.pki.issue('1001', d.certFile, d.keyFile);
  d.extraArgs = ['--tls-cert', d.certFile, '--tls-key', d.keyFile];
  d.tls = { ca: d.pki.ca };
  return d;
}

/** Puts a certificate and key in place of the served ones, as an operator's renewal would. */
function replaceFiles(d, certFile, keyFile) {
  fs.copyFileSync(certFile, d.certFile);
  fs.copyFileSync(keyFile, d.keyFile);
}

/** SIGHUP to runtimed's pid (the keeper's), then the log line that says how it went. */
async function reload(d, re) {
  const seen = d.log().length;
  process.kill(d.proc.pid, 'SIGHUP');
  return waitFor(() => re.exec(d.log().slice(seen)), { what: `the log to say ${re}` });
}

/** Runs runtimed with these options until it exits (it must not start): {code, stderr}. */
async function mustNotStart(dir, args) {
  const state = path.join(dir, `state-${Math.random().toString(16).slice(2)}`);
  const r = await run(RUNTIMED, ['--state-dir', state, '--socket', path.join(dir, 'x.sock'),
    '--nameserver', '127.0.0.1:9', ...args], { timeoutMs: 20000 });
  assert.notEqual(r.signal, 'SIGKILL', `runtimed ${args.join(' ')} did not exit by itself`);
  return r;
}

describe('TLS on the API listener', { skip }, () => {
  let d;
  before(async () => {
    d = await startDaemon({ prefix: 'runtime-tls-', make: tlsDaemon });
  });
  after(async () => {
    await stopDaemon(d);
  });

  test('the dashboard over TLS: its session cookie is __Host- and Secure, and works only so', async () => {
    const page = await d.api('GET', '/dashboard/', undefined, { key: null });
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-security-policy'), /default-src 'none'/);
    const r = await d.api('POST', '/dashboard/session', { apiKey: d.key }, { key: null });
    assert.equal(r.status, 200, r.text);
    const setCookie = r.headers.get('set-cookie');
    assert.match(setCookie, /^__Host-rt_session=[A-Za-z0-9_-]{43}; Path=\/; Max-Age=\d+; HttpOnly; SameSite=Strict; Secure$/);
    const cookie = setCookie.split(';')[0];
    const headers = { Cookie: cookie, 'X-CSRF-Token': r.body.csrfToken };
    assert.equal((await d.api('GET', '/v1/sandboxes', undefined, { key: null, headers })).status, 200);
    // The plain name a page over http would have set is not this session.
    const plain = { ...headers, Cookie: cookie.replace('__Host-rt_session', 'rt_session') };
    assert.equal((await d.api('GET', '/v1/sandboxes', undefined, { key: null, headers: plain })).status, 401);
  });

  test('the runtime CLI trusts the CA given as RUNTIME_CA_FILE, and says what to do without it', async () => {
    const env = { RUNTIME_API_URL: d.url, RUNTIME_API_KEY: d.key };
    const ok = await d.cli(['sandbox', 'list', '--json'], { env: { ...env, RUNTIME_CA_FILE: d.pki.caFile } });
    assert.equal(ok.code, 0, ok.stderr);
    assert.ok(Array.isArray(JSON.parse(ok.stdout)));
    const refused = await d.cli(['sandbox', 'list'], { env: { ...env, RUNTIME_CA_FILE: undefined } });
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /does not trust.*RUNTIME_CA_FILE/, refused.stderr);
    // Files bigger than the sockets' buffers, both ways, over TLS; and an upload over the
    // daemon's limit, which it answers before reading it: the CLI reads that answer.
    const trusted = { env: { ...env, RUNTIME_CA_FILE: d.pki.caFile } };
    const sb = await d.create({ name: 'tls-cp' });
    const data = crypto.randomBytes(24 * 1024 * 1024);
    const up = await d.cli(['sandbox', 'cp', '-', `${sb.id}:/workspace/big.bin`], { ...trusted, input: data });
    assert.equal(up.code, 0, up.stderr);
    const down = await d.cli(['sandbox', 'cp', `${sb.id}:/workspace/big.bin`, '-'], { ...trusted, encoding: 'buffer' });
    assert.equal(down.code, 0, String(down.stderr));
    assert.ok(down.stdout.equals(data), 'the same 24 MiB back');
    const over = await d.cli(['sandbox', 'cp', '-', `${sb.id}:/workspace/over.bin`],
      { ...trusted, input: Buffer.alloc(64 * 1024 * 1024 + 1) });
    assert.notEqual(over.code, 0);
    assert.match(over.stderr, /at most 67108864/, over.stderr);
  });

  test('curl trusting the test CA is answered; curl that does not is refused', async () => {
    const auth = `Authorization: Bearer ${d.key}`;
    const ok = await run('curl', ['-sS', '--cacert', d.pki.caFile, '-H', auth, `${d.url}/v1/sandboxes`,
      '-w', '\n%{http_code} %{scheme}']);
    assert.equal(ok.code, 0, ok.stderr);
    assert.match(ok.stdout, /^\{"data":\[.*\],"nextCursor":null\}\n+200 HTTPS$/s);
    const refused = await run('curl', ['-sS', '-H', auth, `${d.url}/v1/sandboxes`]);
    assert.equal(refused.code, 60, `curl without the CA must fail verification: ${refused.stderr}`);
    assert.match(refused.stderr, /certificate/i);
    // Clear text on the TLS port gets no answer from the API.
    const plain = await run('curl', ['-sS', '-m', '5', '-H', auth, `http://127.0.0.1:${d.port}/v1/sandboxes`]);
    assert.notEqual(plain.code, 0);
    assert.doesNotMatch(plain.stdout, /^\{"data"/);
    // The unix socket stays plain HTTP (local, root only).
    const local = await run('curl', ['-sS', '--unix-socket', d.socket, '-H', auth, 'http://local/v1/sandboxes']);
    assert.equal(local.code, 0, local.stderr);
    assert.match(local.stdout, /^\{"data":\[/);
  });

  test('HTTP/1.1 keep-alive: two requests, one TLS connection (node and curl)', async () => {
    const agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const headers = { Authorization: `Bearer ${d.key}` };
      const a = await httpsCall(`${d.url}/v1/sandboxes`, { headers, ca: d.pki.ca, agent });
      const b = await httpsCall(`${d.url}/v1/sandboxes`, { headers, ca: d.pki.ca, agent });
      assert.equal(a.status, 200);
      assert.equal(b.status, 200);
      assert.equal(b.reused, true, 'the second request went over the first connection');
      assert.equal(a.localPort, b.localPort);
    } finally {
      agent.destroy();
    }
    const url = `${d.url}/v1/sandboxes`;
    const c = await run('curl', ['-sv', '--cacert', d.pki.caFile, '-H', `Authorization: Bearer ${d.key}`, url, url]);
    assert.equal(c.code, 0, c.stderr);
    assert.match(c.stderr, /Re-using existing connection/);
    assert.equal(c.stderr.match(/< HTTP\/1\.1 200/g)?.length, 2);
  });

  test('files up and down over TLS (evbuffer_add_file through the TLS bufferevent)', async () => {
    const sb = await d.create({ name: 'tls-files' });
    const data = Buffer.alloc(300 * 1024, 'x');
    await d.putFile(sb.id, '/workspace/big', data);
    assert.deepEqual(await d.getFile(sb.id, '/workspace/big'), data);
    await d.remove(sb.id);
  });

  test('the official MCP client lists and calls a tool through an https:// gateway URL', async () => {
    const sb = await d.create({ name: 'tls-mcp' });
    await d.putFile(sb.id, '/workspace/hello.mjs', HELLO_SERVER);
    const { status, servers } = await d.mcpReady(sb.id, [{ name: 'hello', command: ['node', '/workspace/hello.mjs'] }]);
    const url = servers.hello.url;
    assert.ok(url.startsWith(`https://127.0.0.1:${d.port}/mcp/`), `the gateway URL is https: ${url}`);
    const auth = status.headers.Authorization;
    const env = { ...process.env, NODE_EXTRA_CA_CERTS: d.pki.caFile };
    const r = await run(process.execPath, [TLS_CLIENT, url, auth], { env, timeoutMs: 30000 });
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), { tools: ['hello'], text: 'hello, tls' });
    const untrusted = { ...process.env };
    delete untrusted.NODE_EXTRA_CA_CERTS;
    const no = await run(process.execPath, [TLS_CLIENT, url, auth], { env: untrusted, timeoutMs: 30000 });
    assert.equal(no.code, 1, `a client that does not trust the CA must fail: ${no.stdout}`);
    assert.match(no.stderr, /certificate|UNABLE_TO_VERIFY|SELF_SIGNED/i);
    await d.remove(sb.id);
  });

  test('SIGHUP: the next connection gets the new certificate, an open one keeps working', async () => {
    const agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
    const headers = { Authorization: `Bearer ${d.key}` };
    const call = (a) => httpsCall(`${d.url}/v1/sandboxes`, { headers, ca: d.pki.ca, agent: a });
    try {
      const before = await call(agent);
      assert.equal(before.status, 200);
      const oldSerial = before.serial;
      const next = path.join(d.dir, 'next');
      d.pki.issue('2002', `${next}.crt`, `${next}.key`);
      replaceFiles(d, `${next}.crt`, `${next}.key`);
      await reload(d, /TLS: serving .* \(serial 2002,/);

      const fresh = new https.Agent({ keepAlive: false });
      const after = await call(fresh);
      fresh.destroy();
      assert.equal(after.status, 200);
      assert.equal(after.serial, '2002', 'a new connection is served the new certificate');

      const again = await call(agent);
      assert.equal(again.status, 200, 'the connection opened before the reload still answers');
      assert.equal(again.reused, true);
      assert.equal(again.localPort, before.localPort, 'on the same connection');
      assert.equal(again.serial, oldSerial, 'which still has the old certificate');
      assert.notEqual(oldSerial, '2002');
    } finally {
      agent.destroy();
    }
  });

  test('SIGHUP with a bad certificate or a key that does not match keeps the old one', async () => {
    const headers = { Authorization: `Bearer ${d.key}` };
    const serial = async () => {
      const r = await httpsCall(`${d.url}/v1/sandboxes`, { headers, ca: d.pki.ca, agent: false });
      assert.equal(r.status, 200);
      return r.serial;
    };
    const served = await serial();
    const good = path.join(d.dir, 'good');
    fs.copyFileSync(d.certFile, `${good}.crt`);
    fs.copyFileSync(d.keyFile, `${good}.key`);

    fs.writeFileSync(d.certFile, 'not a certificate\n');
    const m = await reload(d, /TLS: kept the certificate served so far: (.*)/);
    assert.match(m[1], new RegExp(`--tls-cert ${d.certFile}: .*PEM`));
    assert.equal(await serial(), served);

    const other = path.join(d.dir, 'other');
    d.pki.issue('3003', `${other}.crt`, `${other}.key`);
    fs.copyFileSync(`${good}.crt`, d.certFile);
    fs.copyFileSync(`${other}.key`, d.keyFile);
    const k = await reload(d, /TLS: kept the certificate served so far: (.*)/);
    assert.match(k[1], /is not the key of the certificate/);
    assert.equal(await serial(), served);

    fs.rmSync(d.keyFile);
    const gone = await reload(d, /TLS: kept the certificate served so far: (.*)/);
    assert.match(gone[1], new RegExp(`--tls-key ${d.keyFile}: No such file`));
    assert.equal(await serial(), served);
    replaceFiles(d, `${good}.crt`, `${good}.key`);
  });

  test('SIGHUP while a sandbox is created and a file written: the reload and both go through', async () => {
    const sb = await d.create({ name: 'tls-busy' });
    const next = path.join(d.dir, 'busy');
    d.pki.issue('5005', `${next}.crt`, `${next}.key`);
    replaceFiles(d, `${next}.crt`, `${next}.key`);
    const creating = d.api('POST', '/v1/sandboxes', { name: 'tls-busy-2' });
    const reloaded = reload(d, /TLS: serving .* \(serial 5005,/);
    const put = await d.api('PUT', `/v1/sandboxes/${sb.id}/files?path=/workspace/f`, undefined, { raw: 'during' });
    assert.equal(put.status, 204, put.text);
    await reloaded;
    const other = await creating;
    assert.equal(other.status, 201, other.text);
    d.track(other.body.id);
    const fresh = await httpsCall(`${d.url}/v1/sandboxes/${sb.id}/files?path=/workspace/f`,
      { headers: { Authorization: `Bearer ${d.key}` }, ca: d.pki.ca, agent: false });
    assert.equal(fresh.status, 200);
    assert.equal(fresh.serial, '5005', 'a new connection is served the reloaded certificate');
    assert.equal(fresh.text, 'during');
    await d.remove(other.body.id);
    await d.remove(sb.id);
  });
});

describe('starting with TLS options, and without them off loopback', { skip }, () => {
  let dir, pki;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'runtime-tls-start-'));
    fs.chmodSync(dir, 0o711);
    pki = testCa(dir);
    pki.issue('4004', path.join(dir, 'ok.crt'), path.join(dir, 'ok.key'));
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  test('--listen off loopback without TLS refuses to start and says what to do', async () => {
    const port = await freePort();
    const r = await mustNotStart(dir, ['--listen', `0.0.0.0:${port}`]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /--listen 0\.0\.0\.0:\d+ is not a loopback address/);
    assert.match(r.stderr, /--tls-cert FILE and --tls-key FILE, or --insecure-listen/);
  });

  test('--insecure-listen lets it start off loopback', async () => {
    const port = await freePort();
    const sdir = fs.mkdtempSync(path.join(os.tmpdir(), 'runtime-tls-any-'));
    fs.chmodSync(sdir, 0o711);
    const any = Object.assign(new McpDaemon(sdir), { port });
    any.extraArgs = ['--listen', `0.0.0.0:${port}`, '--insecure-listen'];
    try {
      await any.start();
      assert.match(any.log(), new RegExp(`API on 0\\.0\\.0\\.0:${port} and`));
    } finally {
      await any.close(); // at once: it listened on every address
    }
  });

  test('bad files at start stop it with a message naming the file', async () => {
    const ok = ['--tls-cert', path.join(dir, 'ok.crt'), '--tls-key', path.join(dir, 'ok.key')];
    const listen = ['--listen', `127.0.0.1:${await freePort()}`];
    let r = await mustNotStart(dir, [...listen, '--tls-cert', path.join(dir, 'ok.crt')]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /give --tls-cert and --tls-key together/);

    r = await mustNotStart(dir, [...listen, '--tls-cert', path.join(dir, 'missing.crt'), '--tls-key', ok[3]]);
    assert.match(r.stderr, new RegExp(`--tls-cert ${dir}/missing.crt: No such file`));

    const junk = path.join(dir, 'junk.crt');
    fs.writeFileSync(junk, 'junk\n');
    r = await mustNotStart(dir, [...listen, '--tls-cert', junk, '--tls-key', ok[3]]);
    assert.match(r.stderr, new RegExp(`--tls-cert ${junk}: .*PEM.*\\(want a PEM certificate`));
    assert.notEqual(r.code, 0, 'a supervisor sees the failed start in the exit status');

    pki.issue('5005', path.join(dir, 'b.crt'), path.join(dir, 'b.key'));
    r = await mustNotStart(dir, [...listen, '--tls-cert', ok[1], '--tls-key', path.join(dir, 'b.key')]);
    assert.match(r.stderr, /--tls-key .*b\.key is not the key of the certificate in --tls-cert .*ok\.crt/);
    assert.notEqual(r.code, 0);
  });
});
