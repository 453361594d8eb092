// The page's estimate against the CLI's: each vector was printed by `runtime usage
// --estimate`'s own code (src/meter/meter.c meter_estimate and usage_cmd.c's dollars and
// hourly figure, compiled with a small driver), so the page and the CLI agree to the cent.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { load } from './load.mjs';

const m = await load('src/lib/estimate.ts');

// count vcpu gib busy avg stored | vcpuHour gibHour gbMonth => cpu memory paused total hourly vcpuHours
const vectors = [
  ['1 1 1 24 0.05 0', '0.025 0.0075 0.08', '$0.90 $5.40 $0.00 $6.30 $0.00875 36'],
  ['10 2 4 8 0.5 3', '0.025 0.0075 0.08', '$30.00 $72.00 $1.60 $103.60 $0.04250 1200'],
  ['3 0.5 0.5 12.5 0.01 1.25', '0.03 0.01 0.1', '$1.69 $5.63 $0.18 $7.49 $0.00650 56.25'],
  ['100 4 16 0 0 20', '0.025 0.0075 0.08', '$0.00 $0.00 $160.00 $160.00 $0.12125 0'],
  ['7 1.5 3 6 1.2 0.7', '0.0333 0.00777 0.123', '$50.35 $29.37 $0.45 $80.17 $0.06327 1512'],
];

test('estimate matches runtime usage --estimate', () => {
  for (const [fleet, rates, want] of vectors) {
    const [count, vcpu, gib, busyHoursPerDay, avgCpu, storedGB] = fleet.split(' ').map(Number);
    const [vcpuHour, gibHour, gbMonth] = rates.split(' ').map(Number);
    const r = m.estimate({ count, vcpu, gib, busyHoursPerDay, avgCpu, storedGB }, { vcpuHour, gibHour, gbMonth });
    assert.equal(r.ok, true, fleet);
    const got = [m.dollars(r.month.cpu, 2), m.dollars(r.month.memory, 2), m.dollars(r.month.paused, 2), m.dollars(r.month.total, 2), m.dollars(r.hourly, 5), String(Number(r.month.vcpuHours.toPrecision(12)))].join(' ');
    assert.equal(got, want, fleet);
  }
});

test('estimate refuses what the CLI refuses, with its words', () => {
  const base = { ...m.DEFAULT_FLEET };
  assert.deepEqual(m.estimate({ ...base, busyHoursPerDay: 25 }, m.DEFAULT_RATES), { ok: false, error: 'busy hours are per day: at most 24' });
  assert.deepEqual(m.estimate({ ...base, avgCpu: 2 }, m.DEFAULT_RATES), { ok: false, error: 'the average CPU (2 vCPU) cannot exceed the vCPUs (1)' });
  assert.deepEqual(m.estimate({ ...base, count: -1 }, m.DEFAULT_RATES), { ok: false, error: 'every figure of the fleet must be a number >= 0' });
  assert.equal(m.estimate({ ...base, gib: NaN }, m.DEFAULT_RATES).ok, false);
});

test('defaults are the CLI\'s and the daemon\'s', () => {
  assert.deepEqual(m.DEFAULT_RATES, { vcpuHour: 0.025, gibHour: 0.0075, gbMonth: 0.08 });
  assert.deepEqual(m.DEFAULT_FLEET, { count: 1, vcpu: 1, gib: 1, busyHoursPerDay: 24, avgCpu: 0.05, storedGB: 0 });
});

test('dollars rounds half up as a bill does', () => {
  assert.equal(m.dollars(2.625, 2), '$2.63');
  assert.equal(m.dollars(0.00875, 5), '$0.00875');
  assert.equal(m.dollars(1.005, 2), '$1.01');
  assert.equal(m.dollars(0, 2), '$0.00');
  assert.equal(m.dollars(undefined, 2), '-');
  assert.equal(m.dollars(NaN, 2), '-');
});

test('parseFigure takes plain decimals only', () => {
  assert.equal(m.parseFigure(' 1.5 '), 1.5);
  assert.equal(m.parseFigure('.5'), 0.5);
  assert.equal(m.parseFigure('2e3'), 2000);
  assert.ok(Number.isNaN(m.parseFigure('')));
  assert.ok(Number.isNaN(m.parseFigure('0x10')));
  assert.ok(Number.isNaN(m.parseFigure('-1')));
  assert.ok(Number.isNaN(m.parseFigure('1,5')));
});
