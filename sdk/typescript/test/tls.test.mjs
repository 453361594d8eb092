// The SDK against a daemon that serves TLS with a certificate from a test CA: a
// program that trusts the CA (NODE_EXTRA_CA_CERTS) works, one that does not gets a
// ConnectionError that says what to do.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { startDaemon, stopDaemon, isRoot, run, PKG } from './helpers.mjs';
import { Daemon, testCa } from '../../../tests/e2e/lib.mjs';

const skip = isRoot() ? false : 'needs root (runtimed does)';
const PROGRAM = path.join(PKG, 'test', 'programs', 'tls-client.mjs');
let d;

before(async () => {
  if (skip) return;
  d = await startDaemon({
    prefix: 'runtime-sdk-ts-tls-',
    make: (dir) => {
      const daemon = new Daemon(dir);
      const pki = testCa(dir);
      pki.issue('7007', path.join(dir, 'server.crt'), path.join(dir, 'server.key'));
      daemon.extraArgs = ['--tls-cert', path.join(dir, 'server.crt'), '--tls-key', path.join(dir, 'server.key')];
      daemon.tls = { ca: pki.ca };
      daemon.caFile = pki.caFile;
      return daemon;
    },
  });
});
after(() => stopDaemon(d));

function program(extraEnv) {
  const env = { ...process.env, RUNTIME_API_URL: d.url, RUNTIME_API_KEY: d.key, ...extraEnv };
  for (const [k, v] of Object.entries(env)) if (v === undefined) delete env[k];
  return run(process.execPath, [PROGRAM], { env, timeoutMs: 60000 });
}

test('over https, trusting the test CA: create, exec, list, delete', { skip }, async () => {
  assert.ok(d.url.startsWith('https://'));
  const r = await program({ NODE_EXTRA_CA_CERTS: d.caFile });
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  assert.equal(out.stdout, 'over tls\n');
  assert.ok(out.listed.includes(out.id));
});

test('a program that does not trust the CA gets a ConnectionError saying so', { skip }, async () => {
  const r = await program({ NODE_EXTRA_CA_CERTS: undefined });
  assert.equal(r.code, 1);
  assert.match(r.stderr, /^ConnectionError: POST https:\/\/127\.0\.0\.1:\d+\/v1\/sandboxes: /);
  assert.match(r.stderr, /does not trust the daemon's TLS certificate: set NODE_EXTRA_CA_CERTS/);
});
