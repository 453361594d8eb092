// The CLI's `usage` (the fleet estimate, worked out without the daemon, and the report of
// GET /v1/usage) and `sandbox pause` / `sandbox resume` against a real daemon.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startDaemon, stopDaemon, run, token, RUNTIME } from './lib.mjs';

let d;
before(async () => {
  d = await startDaemon();
});
after(async () => {
  await stopDaemon(d);
});

// The estimate must not need a daemon: point the client at a dead loopback port, without a key.
function estimate(args, env = {}) {
  const e = { ...process.env, RUNTIME_API_URL: 'http://127.0.0.1:9', ...env };
  for (const k of ['RUNTIME_API_KEY', 'RUNTIME_PRICE_VCPU_HOUR', 'RUNTIME_PRICE_GIB_HOUR',
    'RUNTIME_PRICE_GB_MONTH']) if (!(k in env)) delete e[k];
  return run(RUNTIME, ['usage', '--estimate', ...args], { env: e });
}

async function estimateJson(args, env) {
  const r = await estimate([...args, '--json'], env);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout);
}

const near = (got, want, what) =>
  assert.ok(Math.abs(got - want) < 0.005, `${what}: ${got}, expected about ${want}`);

test('estimate: one sandbox of 1 vCPU and 2 GiB costs $0.01625 an hour running', async () => {
  const args = ['--count', '1', '--vcpu', '1', '--gib', '2', '--busy-hours', '24', '--avg-cpu', '0'];
  const r = await estimate(args);
  assert.equal(r.code, 0, r.stderr);
  assert.ok(r.stdout.includes('$0.01625 an hour'), r.stdout);
  assert.ok(r.stdout.includes('$11.70'), `a month of 720 hours: ${r.stdout}`);
  const j = await estimateJson(args);
  near(j.month.total, 0.01625 * 720, 'month.total');
  near(j.month.vcpuHours, 0.05 * 720, 'the floor of 0.05 vCPU is billed');
  assert.deepEqual(j.rates, { vcpuHour: 0.025, gibHour: 0.0075, gbMonth: 0.08 });
  assert.equal(j.fleet.count, 1);
});

test('estimate: 5 sandboxes busy 2 hours a day cost about $2.63 a month', async () => {
  const args = ['--count', '5', '--gib', '1', '--busy-hours', '2'];
  const r = await estimate(args);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /total\s+\$2\.63 a month/);
  const j = await estimateJson(args);
  near(j.month.total, 2.625, 'month.total');
  assert.equal(j.fleet.avgCpu, 0.05, 'the default average CPU is the floor');
});

test('estimate: 100 sandboxes come to $108.67 (CPU $15.00, memory $90.00, paused $3.67)', async () => {
  const args = ['--count', '100', '--vcpu', '1', '--gib', '2', '--busy-hours', '2', '--avg-cpu', '0.1',
    '--stored-gb', '0.5'];
  const r = await estimate(args);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /CPU\s+\$15\.00/);
  assert.match(r.stdout, /memory\s+\$90\.00/);
  assert.match(r.stdout, /paused storage\s+\$3\.67/);
  assert.match(r.stdout, /total\s+\$108\.67 a month/);
  assert.match(r.stdout, /rates: \$0\.025 per vCPU-hour, \$0\.0075 per GiB-hour/);
  const j = await estimateJson(args);
  near(j.month.cpu, 15, 'month.cpu');
  near(j.month.memory, 90, 'month.memory');
  near(j.month.paused, 3.67, 'month.paused');
  near(j.month.total, 108.67, 'month.total');
  assert.deepEqual(j.fleet, { count: 100, vcpu: 1, gib: 2, busyHoursPerDay: 2, avgCpu: 0.1, storedGB: 0.5 });
});

test('estimate: prices from the environment, and the options over them', async () => {
  const base = ['--count', '1', '--busy-hours', '24'];
  const env = { RUNTIME_PRICE_VCPU_HOUR: '0.05', RUNTIME_PRICE_GIB_HOUR: '0.01', RUNTIME_PRICE_GB_MONTH: '1' };
  const j = await estimateJson(base, env);
  assert.deepEqual(j.rates, { vcpuHour: 0.05, gibHour: 0.01, gbMonth: 1 });
  near(j.month.cpu, 0.05 * 0.05 * 720, 'month.cpu at the price from the environment');
  const o = await estimateJson([...base, '--price-vcpu-hour', '1', '--price-gb-month', '0.5'], env);
  assert.deepEqual(o.rates, { vcpuHour: 1, gibHour: 0.01, gbMonth: 0.5 });
  near(o.month.cpu, 0.05 * 720, 'month.cpu at the price of the option');
});

test('estimate: bad input is a usage error (exit 2) with one line saying what is wrong', async () => {
  const cases = [
    [['--busy-hours', '25'], {}, /at most 24/],
    [['--vcpu', '1', '--avg-cpu', '2'], {}, /cannot exceed the vCPUs/],
    [['--count', '-1'], {}, /--count/],
    [['--gib', 'lots'], {}, /--gib/],
    [['--price-gib-hour', 'free'], {}, /--price-gib-hour/],
    [[], { RUNTIME_PRICE_VCPU_HOUR: 'abc' }, /RUNTIME_PRICE_VCPU_HOUR/],
  ];
  for (const [args, env, re] of cases) {
    const r = await estimate(args, env);
    const what = `usage --estimate ${args.join(' ')} ${JSON.stringify(env)}`;
    assert.equal(r.code, 2, `${what}: ${r.stdout}${r.stderr}`);
    assert.equal(r.stdout, '', what);
    assert.match(r.stderr, re, what);
    assert.equal(r.stderr.trimEnd().split('\n').length, 1, `${what}: one line: ${r.stderr}`);
  }
  const stray = await d.cli(['usage', '--count', '3']);
  assert.equal(stray.code, 2);
  assert.match(stray.stderr, /--count goes only with --estimate/);
});

test('sandbox pause and resume: the line, the status, --json and an unknown sandbox', async () => {
  const name = token('pause').slice(0, 24);
  const sb = await d.create({ name });
  const pause = await d.cli(['sandbox', 'pause', name]);
  assert.equal(pause.code, 0, pause.stderr);
  assert.equal(pause.stdout, `sandbox ${name} (${sb.id}) paused\n`);
  const got = await d.cli(['sandbox', 'get', name, '--json']);
  assert.equal(got.code, 0, got.stderr);
  assert.equal(JSON.parse(got.stdout).status, 'paused');
  assert.match((await d.cli(['sandbox', 'get', name])).stdout, /^Status:\s+paused$/m);

  const resume = await d.cli(['sandbox', 'resume', sb.id]);
  assert.equal(resume.code, 0, resume.stderr);
  assert.equal(resume.stdout, `sandbox ${name} (${sb.id}) resumed\n`);
  assert.equal(JSON.parse((await d.cli(['sandbox', 'get', sb.id, '--json'])).stdout).status, 'running');
  assert.equal((await d.exec(sb.id, ['true'])).exitCode, 0, 'it runs commands again');

  const pj = await d.cli(['sandbox', 'pause', sb.id, '--json']);
  assert.equal(pj.code, 0, pj.stderr);
  assert.deepEqual([JSON.parse(pj.stdout).id, JSON.parse(pj.stdout).status], [sb.id, 'paused']);
  const rj = await d.cli(['sandbox', 'resume', name, '--json']);
  assert.equal(JSON.parse(rj.stdout).status, 'running');

  const unknown = await d.cli(['sandbox', 'pause', 'no-such-sandbox']);
  assert.equal(unknown.code, 1);
  assert.match(unknown.stderr, /HTTP 404/);
  const missing = await d.cli(['sandbox', 'resume']);
  assert.equal(missing.code, 2);
  const help = await d.cli(['sandbox', 'pause', '--help']);
  assert.equal(help.code, 0);
  assert.match(help.stdout, /^Usage: runtime sandbox pause ID/);
});

test('sandbox wake, stop and start: the lines, the status, and what a stopped sandbox says', async () => {
  const name = token('stop').slice(0, 24);
  const sb = await d.create({ name });
  await d.sh(sb.id, 'echo kept > /workspace/f');
  assert.equal((await d.cli(['sandbox', 'pause', name])).code, 0);
  const wake = await d.cli(['sandbox', 'wake', name]);
  assert.equal(wake.code, 0, wake.stderr);
  assert.equal(wake.stdout, `sandbox ${name} (${sb.id}) woken\n`);

  const stop = await d.cli(['sandbox', 'stop', name]);
  assert.equal(stop.code, 0, stop.stderr);
  assert.equal(stop.stdout, `sandbox ${name} (${sb.id}) stopped\n`);
  assert.match((await d.cli(['sandbox', 'get', name])).stdout, /^Status:\s+stopped$/m);
  const refused = await d.cli(['sandbox', 'exec', name, '--', 'true']);
  assert.notEqual(refused.code, 0);
  assert.match(refused.stderr, new RegExp(`start it with \`runtime sandbox start ${sb.id}\``));

  const start = await d.cli(['sandbox', 'start', name, '--json']);
  assert.equal(start.code, 0, start.stderr);
  assert.deepEqual([JSON.parse(start.stdout).id, JSON.parse(start.stdout).status], [sb.id, 'running']);
  assert.equal((await d.exec(sb.id, ['cat', '/workspace/f'])).stdout, 'kept\n');
  const again = await d.cli(['sandbox', 'start', sb.id]);
  assert.equal(again.stdout, `sandbox ${name} (${sb.id}) started\n`, 'starting a running sandbox is no error');
  const help = await d.cli(['sandbox', 'stop', '--help']);
  assert.equal(help.code, 0);
  assert.match(help.stdout, /keeps its \/workspace/);
});

test('usage lists the sandbox with what it used, a TOTAL line and the rates', async () => {
  const name = token('used').slice(0, 24);
  const sb = await d.create({ name });
  assert.equal((await d.sh(sb.id, 'i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done')).exitCode, 0);
  const pause = await d.cli(['sandbox', 'pause', sb.id]);
  assert.equal(pause.code, 0, pause.stderr);

  const j = await d.cli(['usage', '--json']);
  assert.equal(j.code, 0, j.stderr);
  const report = JSON.parse(j.stdout);
  const row = report.sandboxes.find((s) => s.sandbox === sb.id);
  assert.ok(row, `the sandbox is listed: ${j.stdout}`);
  assert.equal(row.name, name);
  assert.equal(row.status, 'paused');
  assert.ok(row.cpuSeconds >= 0, `cpuSeconds ${row.cpuSeconds}`);
  assert.ok(row.cost.total >= 0, `cost.total ${row.cost.total}`);
  assert.ok(report.total.cost.total >= 0);

  const h = await d.cli(['usage']);
  assert.equal(h.code, 0, h.stderr);
  const lines = h.stdout.split('\n');
  assert.match(lines[0], /^NAME\s+STATUS\s+CPU s\s+vCPU-h\s+GiB-h\s+PAUSED GB-h\s+COST \$$/);
  assert.ok(lines.some((l) => l.startsWith(`${name} `) && /\bpaused\b/.test(l) && /\$\d+\.\d{5}$/.test(l)),
    h.stdout);
  assert.ok(lines.some((l) => /^TOTAL\s+\d+\.\d{3}\s.*\$\d+\.\d{5}$/.test(l)), h.stdout);
  assert.match(h.stdout, /^rates: \$0\.025 per vCPU-hour/m);

  const help = await d.cli(['usage', '--help']);
  assert.equal(help.code, 0);
  assert.match(help.stdout, /--estimate/);
});
