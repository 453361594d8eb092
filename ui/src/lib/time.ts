/* Times as a person reads them: "3 min ago", "in 2 h", and the exact UTC time for a title. */

const UNITS: [number, string][] = [
  [86400 * 365, 'y'],
  [86400 * 30, 'mo'],
  [86400, 'd'],
  [3600, 'h'],
  [60, 'min'],
  [1, 's'],
];

/** Milliseconds since the epoch of an RFC 3339 time, or NaN. */
export function parseTime(t: unknown): number {
  if (typeof t !== 'string' || t.length > 64) return NaN;
  return Date.parse(t);
}

/** "just now", "42 s ago", "3 min ago", "in 2 h"; "-" for a missing or bad time. */
export function relativeTime(t: unknown, now: number = Date.now()): string {
  const ms = parseTime(t);
  if (!Number.isFinite(ms)) return '-';
  const diff = Math.round((now - ms) / 1000);
  const abs = Math.abs(diff);
  if (abs < 5) return 'just now';
  for (const [size, unit] of UNITS) {
    if (abs >= size) {
      const n = Math.floor(abs / size);
      return diff >= 0 ? `${n} ${unit} ago` : `in ${n} ${unit}`;
    }
  }
  return 'just now';
}

/** "2026-11-06 08:21:05 UTC", or "" for a bad time. */
export function absoluteTime(t: unknown): string {
  const ms = parseTime(t);
  if (!Number.isFinite(ms)) return '';
  return new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC').replace(/Z$/, ' UTC');
}

/** Seconds as "45 s", "5 min", "1 h 30 min", "2 d 3 h"; "never" for 0 when zeroIsNever. */
export function duration(seconds: unknown, zeroIsNever = false): string {
  if (typeof seconds !== 'number' || !Number.isFinite(seconds) || seconds < 0) return '-';
  if (seconds === 0 && zeroIsNever) return 'never';
  const s = Math.round(seconds);
  if (s < 60) return `${s} s`;
  if (s < 3600) {
    const m = Math.floor(s / 60), r = s % 60;
    return r ? `${m} min ${r} s` : `${m} min`;
  }
  if (s < 86400) {
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
    return m ? `${h} h ${m} min` : `${h} h`;
  }
  const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600);
  return h ? `${d} d ${h} h` : `${d} d`;
}
