// Helpers of the attack suite: what the daemon's server process holds.
import assert from 'node:assert/strict';
import fs from 'node:fs';

import { parseMetrics } from '../e2e/lib.mjs';

export const MiB = 1 << 20;

// Under AddressSanitizer freed memory sits in its quarantine (256 MiB by default) and
// counts in Rss: growth says nothing there. The plain run of the same tests measures it;
// the sanitized run checks the daemon's own account of what it holds instead.
export const SANITIZED = /asan/.test(process.env.RUNTIME_BUILD ?? '');

/** The server process's resident memory, in bytes. */
export function serverRss(d) {
  const pid = d.daemonPids()[1];
  const line = fs.readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith('VmRSS:'));
  return Number(line.split(/\s+/)[1]) * 1024;
}

/** Asserts that the server grew by less than bound since rss0 (plain builds), and that
 * what it held for requests at its peak stayed under bound (both builds). */
export async function assertBounded(d, rss0, bound, what) {
  const m = parseMetrics((await d.api('GET', '/metrics')).text);
  const peak = m.get('runtime_held_bytes_peak');
  assert.ok(peak < bound, `${what}: the server held up to ${(peak / MiB).toFixed(1)} MiB for requests`);
  if (SANITIZED) return;
  const grown = serverRss(d) - rss0;
  assert.ok(grown < bound, `${what}: the server grew by ${(grown / MiB).toFixed(1)} MiB`);
}
