// A real install through the proxy: `npm install --ignore-scripts` of a real
// package from the npm registry that the host's npm is configured with, inside
// a sandbox whose allow list holds only that registry's host. Any other host is
// refused in the same sandbox. This is the one egress test that talks to the
// Internet (the registry only); set RUNTIME_E2E_OFFLINE=1 to skip it.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { EgressDaemon, showEvents, isRoot } from './lib.mjs';

let d;
const skip = !isRoot() ? 'must run as root (runtimed needs it)'
  : process.env.RUNTIME_E2E_OFFLINE ? 'RUNTIME_E2E_OFFLINE is set' : false;

describe('npm install through the egress proxy', { skip }, () => {
  before(async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'runtime-egress-npm-'));
    fs.chmodSync(dir, 0o711);
    // The host's own network namespace this time: the registry is on the Internet.
    // example.test is pinned to a test-net address only to be refused.
    d = new EgressDaemon(dir, { pins: ['example.test:80:198.51.100.1'] });
    await d.start();
  });
  after(async () => {
    await d?.close();
  });

  test('installs is-number@7.0.0 with only the registry allowed; other hosts refused', async (t) => {
    const r = spawnSync('npm', ['config', 'get', 'registry'], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const registry = r.stdout.trim();
    const host = new URL(registry).hostname;
    t.diagnostic(`registry ${registry}`);
    const sb = await d.create({ network: { internet: true, allow: [host] } });

    // Trust what the host's npm trusts: on a machine whose outbound TLS is inspected,
    // the host's npm works through NODE_EXTRA_CA_CERTS pointing at the system bundle
    // (the sandbox has its own copy at the same path). npm 11 does not apply the global
    // npmrc's cafile by itself here, so mirror the variable, if the file is there.
    const env = {};
    const extra = process.env.NODE_EXTRA_CA_CERTS;
    if (extra && (await d.exec(sb.id, ['test', '-r', extra])).exitCode === 0) env.NODE_EXTRA_CA_CERTS = extra;
    t.diagnostic(`extra CA certificates: ${env.NODE_EXTRA_CA_CERTS ?? 'none'}`);
    const started = Date.now();
    const npm = await d.exec(sb.id, ['npm', 'install', '--ignore-scripts', '--no-audit', '--no-fund',
      '--fetch-retries', '1', '--fetch-retry-mintimeout', '1000', '--fetch-retry-maxtimeout', '2000',
      '--registry', registry, '--prefix', '/workspace/t', 'is-number@7.0.0'], { env, timeoutMs: 90000 });
    t.diagnostic(`npm install took ${Date.now() - started} ms`);
    assert.equal(npm.exitCode, 0, `npm failed:\n${npm.stdout}\n${npm.stderr}`);
    const pkg = await d.exec(sb.id, ['cat', '/workspace/t/node_modules/is-number/package.json']);
    assert.equal(pkg.exitCode, 0, pkg.stderr);
    const json = JSON.parse(pkg.stdout);
    assert.equal(json.name, 'is-number');
    assert.equal(json.version, '7.0.0');

    const other = await d.exec(sb.id, ['curl', '-sS', '-m', '5', 'http://example.test/']);
    assert.notEqual(other.exitCode, 0, other.stdout);
    assert.match(other.stderr, /Could not resolve host/);

    const events = await d.api('GET', `/v1/sandboxes/${sb.id}/events`).then((x) => x.body);
    const allowed = events.filter((e) => e.kind === 'egress.allowed');
    assert.ok(allowed.length >= 1, 'npm went through the proxy');
    assert.deepEqual([...new Set(allowed.map((e) => e.host))], [host], showEvents(allowed).join('\n'));
    assert.ok(events.some((e) => e.kind === 'egress.refused' && e.host === 'example.test' &&
      e.reason === 'not_allowed' && e.stage === 'dns'), showEvents(events).join('\n'));
    await d.remove(sb.id);
  });
});
