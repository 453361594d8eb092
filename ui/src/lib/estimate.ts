/* `runtime usage --estimate`, worked out in the page: the same arithmetic as
 * src/meter/meter.c (meter_estimate, meter_cost) and src/cli/usage_cmd.c (the hourly figure,
 * the rounding of dollars), so that the page, the CLI and the bill agree. Pure: no DOM. */

export const VCPU_FLOOR = 0.05; /* METER_VCPU_FLOOR: vCPU billed at least, while running */
export const HOURS_PER_MONTH = 720; /* METER_HOURS_PER_MONTH: 30 days */

export interface Rates {
  vcpuHour: number; /* $ per vCPU-hour */
  gibHour: number; /* $ per GiB-hour of memory */
  gbMonth: number; /* $ per GB-month stored while paused */
}
/** meter_default_rates */
export const DEFAULT_RATES: Rates = { vcpuHour: 0.025, gibHour: 0.0075, gbMonth: 0.08 };

export interface Fleet {
  count: number;
  vcpu: number;
  gib: number;
  busyHoursPerDay: number;
  avgCpu: number;
  storedGB: number;
}
/** The CLI's defaults: one sandbox of 1 vCPU and 1 GiB, busy all day at the floor. */
export const DEFAULT_FLEET: Fleet = { count: 1, vcpu: 1, gib: 1, busyHoursPerDay: 24, avgCpu: VCPU_FLOOR, storedGB: 0 };

export interface Cost {
  vcpuHours: number;
  cpu: number;
  memory: number;
  paused: number;
  total: number;
}

export interface Usage {
  cpuSeconds: number;
  runningHours: number;
  memoryGiBHours: number;
  pausedHours: number;
  pausedGBHours: number;
}

/** meter_cost */
export function cost(u: Usage, r: Rates): Cost {
  const used = u.cpuSeconds / 3600.0, floor = VCPU_FLOOR * u.runningHours;
  const vcpuHours = used > floor ? used : floor;
  const cpu = vcpuHours * r.vcpuHour;
  const memory = u.memoryGiBHours * r.gibHour;
  const paused = (u.pausedGBHours / HOURS_PER_MONTH) * r.gbMonth;
  return { vcpuHours, cpu, memory, paused, total: cpu + memory + paused };
}

export type EstimateResult = { ok: true; month: Cost; hourly: number } | { ok: false; error: string };

/* %g of C's printf, enough for the figures of the error message. */
function g(v: number): string {
  return String(Number(v.toPrecision(6)));
}

/** meter_estimate of the fleet, and what one running sandbox costs an hour (the CLI's
 * last line: one sandbox busy 24 hours, never paused, its day's total over 720). */
export function estimate(f: Fleet, r: Rates): EstimateResult {
  const month = meterEstimate(f, r);
  if (typeof month === 'string') return { ok: false, error: month };
  const day = meterEstimate({ count: 1, vcpu: f.vcpu, gib: f.gib, busyHoursPerDay: 24, avgCpu: f.avgCpu, storedGB: 0 }, r);
  if (typeof day === 'string') return { ok: false, error: day };
  return { ok: true, month, hourly: day.total / HOURS_PER_MONTH };
}

function meterEstimate(f: Fleet, r: Rates): Cost | string {
  const v = [f.count, f.vcpu, f.gib, f.busyHoursPerDay, f.avgCpu, f.storedGB];
  for (const x of v) if (typeof x !== 'number' || !Number.isFinite(x) || x < 0) return 'every figure of the fleet must be a number >= 0';
  if (f.busyHoursPerDay > 24) return 'busy hours are per day: at most 24';
  if (f.avgCpu > f.vcpu) return `the average CPU (${g(f.avgCpu)} vCPU) cannot exceed the vCPUs (${g(f.vcpu)})`;
  const busy = f.busyHoursPerDay * 30.0, idle = HOURS_PER_MONTH - busy;
  const one: Usage = {
    cpuSeconds: f.avgCpu * busy * 3600.0,
    runningHours: busy,
    memoryGiBHours: f.gib * busy,
    pausedHours: idle,
    pausedGBHours: f.storedGB * idle,
  };
  const c = cost(one, r);
  const cpu = c.cpu * f.count, memory = c.memory * f.count, paused = c.paused * f.count;
  return { vcpuHours: c.vcpuHours * f.count, cpu, memory, paused, total: cpu + memory + paused };
}

/** The CLI's dollars(): to `decimals` places, half up as a bill rounds, with its nudge for
 * the float error of sums of products ("$2.63" for 2.625). */
export function dollars(v: unknown, decimals: number): string {
  if (typeof v !== 'number' || !Number.isFinite(v)) return '-';
  const scale = Math.pow(10, decimals);
  /* C's round(): half away from zero (Math.round alone rounds -2.5 to -2). */
  const x = v * scale + 1e-9;
  const r = Math.sign(x) * Math.round(Math.abs(x));
  return '$' + (r / scale).toFixed(decimals);
}

/** A number field of a form: a finite number, or NaN (which estimate() refuses). */
export function parseFigure(s: string): number {
  const t = s.trim();
  if (!/^[+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(t)) return NaN;
  return Number(t);
}
