// Program (a), the weather-server start (test/programs/weather-server.mjs), run as
// a user runs it: a child process whose environment holds only PATH, HOME, the
// daemon's address and key (RUNTIME_API_URL, RUNTIME_API_KEY) and the reviewed
// fingerprint. It installs @acme/weather-mcp@1.4.2 from the team's npm registry
// with scripts off, narrows the network to the weather API, starts the server and
// checks its fingerprint over plain fetch before using it.
//
//   matching fingerprint  exit 0; the forecast text is the fake API's (its token);
//                         the registry served the packument and the tarball; the
//                         install scripts did not run (while running one by hand does
//                         leave the marker); after narrowing, the registry is refused
//                         and never asked again; the daemon's fingerprint of the
//                         server is the reviewed one; the printed URL is the gateway's
//   wrong fingerprint     exit 1, the message names both fingerprints, the sandbox is
//                         gone (GET 404)
//
// The registry and the weather API run in a namespace of their own on a TEST-NET-2
// point-to-point link (tests/fixtures/weather-registry/up.mjs); the daemon pins
// registry.acme.test and api.weather.test to it with --resolve. The expected
// fingerprint comes from the fixture's tool list through `runtime mcp fingerprint`
// (the daemon's canonical form, vector-tested), checked against this file's own
// canonical form, itself checked against a shared vector.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Daemon, RUNTIME } from '../../../tests/e2e/lib.mjs';
import { REPO, isRoot, run, startDaemon, stopDaemon, waitFor } from './helpers.mjs';

const skip = isRoot() ? false : 'needs root (runtimed and network namespaces do)';
const PROGRAM = path.join(REPO, 'sdk', 'typescript', 'test', 'programs', 'weather-server.mjs');
const WORLD = path.join(REPO, 'tests', 'fixtures', 'weather-registry');
const TOOLS = path.join(WORLD, 'weather-mcp', 'tools.json');
const VECTORS = path.join(REPO, 'tests', 'fixtures', 'fingerprint', 'vectors.jsonl');
// This file's link; the Python test has its own, so the two can run side by side.
const NS_V4 = '198.51.100.141';
const HOST_V4 = '198.51.100.142';
const PROGRAM_MS = 4 * 60_000;

let world, d, reviewed;

/** up.mjs, running until its stdin closes: {ready (its JSON line), proc}. */
async function startWorld() {
  const proc = spawn(process.execPath, [path.join(WORLD, 'up.mjs'), NS_V4, HOST_V4], { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '', err = '';
  proc.stdout.on('data', (b) => { out += b; });
  proc.stderr.on('data', (b) => { err += b; });
  const exited = new Promise((resolve) => proc.on('exit', resolve));
  const line = await waitFor(() => {
    if (proc.exitCode !== null) throw Object.assign(new Error(`up.mjs exited: ${out}${err}`), { fatal: true });
    return out.includes('\n') && out.slice(0, out.indexOf('\n'));
  }, { timeoutMs: 20_000, what: 'up.mjs to bring the weather world up' });
  const ready = JSON.parse(line);
  if (ready.ev !== 'ready') throw new Error(`up.mjs: ${line}`);
  return {
    ...ready,
    requests: () => fs.readFileSync(ready.log, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l)),
    async stop() {
      proc.stdin.end();
      const timer = setTimeout(() => proc.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** runtimed with the weather world's --resolve pins (and the usual dead nameserver). */
class PinnedDaemon extends Daemon {
  constructor(dir, pins) {
    super(dir);
    this.pins = pins;
  }

  args() {
    return [...super.args(), ...this.pins.flatMap((p) => ['--resolve', p])];
  }
}

// The fingerprint's canonical form (docs/gateway.md), written again here (not the program's) to check the
// daemon's fingerprint of the fixture's tools independently.
const byCodePoint = (a, b) => {
  const x = Array.from(a), y = Array.from(b);
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const diff = x[i].codePointAt(0) - y[i].codePointAt(0);
    if (diff) return diff;
  }
  return x.length - y.length;
};
function canonical(v) {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    return `{${Object.keys(v).sort(byCodePoint).map((k) => `${canonical(k)}:${canonical(v[k])}`).join(',')}}`;
  }
  if (typeof v === 'string') {
    return JSON.stringify(v).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  }
  return JSON.stringify(v);
}
const sha256 = (tools) => crypto.createHash('sha256')
  .update(canonical([...tools].sort((a, b) => byCodePoint(a.name, b.name)))).digest('hex');

/** A case of tests/fixtures/fingerprint/vectors.jsonl by name. */
function vector(name) {
  const found = fs.readFileSync(VECTORS, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l))
    .find((v) => v.name === name);
  assert.ok(found, `no vector ${name} in ${VECTORS}`);
  return found;
}

/** The fixture's fingerprint as the daemon's CLI computes it, cross-checked here. */
async function reviewedFingerprint() {
  const reviewedVector = vector('weather-reviewed');
  assert.equal(canonical(JSON.parse(reviewedVector.tools_json)), reviewedVector.canonical);
  assert.equal(sha256(JSON.parse(reviewedVector.tools_json)), reviewedVector.sha256, 'the canonical form fits');
  const r = await run(RUNTIME, ['mcp', 'fingerprint', TOOLS, '--json']);
  assert.equal(r.code, 0, r.stderr);
  const cli = JSON.parse(r.stdout);
  assert.equal(cli.tools, 2);
  assert.equal(cli.sha256, sha256(JSON.parse(fs.readFileSync(TOOLS, 'utf8'))), 'the CLI and this test agree');
  return cli;
}

/** The program with nothing but PATH, HOME, the daemon's URL and key, and the fingerprint. */
function weatherServer(fingerprint) {
  const env = {
    PATH: process.env.PATH, HOME: process.env.HOME ?? '/root',
    RUNTIME_API_URL: d.url, RUNTIME_API_KEY: d.key, WEATHER_FINGERPRINT: fingerprint,
  };
  return run(process.execPath, [PROGRAM], { env, timeoutMs: PROGRAM_MS });
}

/** `KEY value` lines of the program's stdout, as {KEY: value}. */
const printed = (stdout) => Object.fromEntries(stdout.split('\n').filter(Boolean)
  .map((l) => [l.slice(0, l.indexOf(' ')), l.slice(l.indexOf(' ') + 1)]));

before(async () => {
  if (skip) return;
  reviewed = await reviewedFingerprint();
  world = await startWorld();
  d = await startDaemon({ prefix: 'runtime-sdk-ts-weather-', make: (dir) => new PinnedDaemon(dir, world.pins) });
});
after(async () => {
  try {
    await stopDaemon(d);
  } finally {
    await world?.stop();
  }
});

test('the weather-server program: installs with scripts off, narrows, checks the fingerprint, serves the forecast',
  { skip, timeout: PROGRAM_MS + 60_000 }, async (t) => {
    const r = await weatherServer(reviewed.fingerprint);
    for (const line of r.stdout.trim().split('\n')) t.diagnostic(line);
    assert.equal(r.code, 0, `the program failed:\n${r.stdout}\n${r.stderr}`);
    const out = printed(r.stdout);
    const id = out.sandbox;
    d.track(id);
    assert.equal(out.fingerprint, reviewed.sha256, 'the program saw the reviewed tools');
    assert.match(out.forecast, new RegExp(`^Forecast for Lisbon: .*\\(weather API ${world.token}\\)$`));

    // The registry served the package: the packument, then the tarball npm verified.
    const reqs = world.requests();
    const fromRegistry = reqs.filter((q) => q.host === 'registry.acme.test').map((q) => `${q.method} ${q.path}`);
    assert.ok(fromRegistry.some((q) => /^GET \/@acme(%2f|\/)weather-mcp$/i.test(q)), fromRegistry.join('\n'));
    assert.ok(fromRegistry.includes('GET /@acme/weather-mcp/-/weather-mcp-1.4.2.tgz'), fromRegistry.join('\n'));
    assert.ok(reqs.some((q) => q.host === 'api.weather.test' && q.path === '/forecast?city=Lisbon'), JSON.stringify(reqs));

    // Installed, and none of its install scripts ran; one run by hand leaves the
    // marker, so its absence means something.
    const pkg = await d.exec(id, ['cat', '/workspace/srv/node_modules/@acme/weather-mcp/package.json']);
    assert.equal(JSON.parse(pkg.stdout).version, '1.4.2');
    assert.equal((await d.exec(id, ['test', '-e', '/workspace/WEATHER_SCRIPTS_RAN'])).exitCode, 1, 'an install script ran');
    const byHand = await d.exec(id, ['npm', 'run', 'postinstall'], { cwd: '/workspace/srv/node_modules/@acme/weather-mcp' });
    assert.equal(byHand.exitCode, 0, byHand.stderr);
    assert.match((await d.exec(id, ['cat', '/workspace/WEATHER_SCRIPTS_RAN'])).stdout, /^postinstall ran/);

    // Narrowed: only the weather API now; the registry is refused by name (the two
    // share an address) and hears nothing more.
    const sb = await d.api('GET', `/v1/sandboxes/${id}`);
    assert.deepEqual(sb.body.network.allow, ['api.weather.test']);
    const before = world.requests().length;
    const curl = await d.exec(id, ['curl', '-sS', '-m', '10', 'http://registry.acme.test/@acme%2fweather-mcp']);
    assert.notEqual(curl.exitCode, 0, `the registry answered after narrowing: ${curl.stdout}`);
    assert.equal(world.requests().length, before, 'the registry was reached after narrowing');
    const events = (await d.api('GET', `/v1/sandboxes/${id}/events`)).body;
    assert.ok(events.some((e) => e.kind === 'egress.refused' && e.host === 'registry.acme.test'), JSON.stringify(events));
    assert.ok(events.some((e) => e.kind === 'egress.allowed' && e.host === 'api.weather.test'), JSON.stringify(events));

    // The daemon's gate fingerprinted the same tools; the URL printed is the gateway's.
    const mcp = (await d.api('GET', `/v1/sandboxes/${id}/mcp`)).body;
    const weather = mcp.servers.find((s) => s.name === 'weather');
    assert.equal(weather.status, 'ready');
    assert.ok(reviewed.sha256.startsWith(weather.fingerprint), `daemon ${weather.fingerprint}, reviewed ${reviewed.sha256}`);
    assert.deepEqual([...weather.tools].sort(), ['get_alerts', 'get_forecast']);
    assert.equal(out.url, weather.url);
    assert.equal((await d.remove(id)).status, 200);
  });

test('the weather-server program with a wrong fingerprint: exit 1 naming both, the sandbox deleted',
  { skip, timeout: PROGRAM_MS + 60_000 }, async () => {
    // A fingerprint a reviewer could have approved: the weather tool alone.
    const wrong = vector('weather-reviewed').fingerprint;
    assert.notEqual(wrong, reviewed.fingerprint);
    const labelled = async () => (await d.api('GET', '/v1/sandboxes?label=app=weather-server')).body.data.map((s) => s.id);
    const earlier = await labelled();
    const r = await weatherServer(wrong);
    assert.equal(r.code, 1, `${r.stdout}\n${r.stderr}`);
    assert.ok(r.stderr.includes(wrong), `the expected fingerprint is named: ${r.stderr}`);
    assert.ok(r.stderr.includes(reviewed.fingerprint), `the server's fingerprint is named: ${r.stderr}`);
    const id = printed(r.stdout).sandbox;
    assert.ok(id, r.stdout);
    d.track(id);
    assert.equal((await d.api('GET', `/v1/sandboxes/${id}`)).status, 404, 'the sandbox was deleted');
    assert.deepEqual(await labelled(), earlier, 'the program left no sandbox');
  });
