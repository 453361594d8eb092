/** Finding the daemon and its key the way the `runtime` command line does. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export const DEFAULT_API_URL = 'http://127.0.0.1:7070';
export const DEFAULT_STATE_DIR = '/var/lib/runtime';

function env(name: string): string | undefined {
  const v = process.env[name];
  return v ? v : undefined;
}

/** RUNTIME_API_URL, else the daemon's default listen address; no trailing slash. */
export function apiUrlFromEnv(given?: string): string {
  return (given ?? env('RUNTIME_API_URL') ?? DEFAULT_API_URL).replace(/\/+$/, '');
}

/**
 * RUNTIME_API_KEY, else STATE/admin.key (STATE is RUNTIME_STATE_DIR or
 * /var/lib/runtime) when this process may read it. Never throws: a missing key
 * is reported by the first call, so that constructing a client stays cheap.
 */
export function apiKeyFromEnv(given?: string): { key: string | null; problem: string } {
  const key = given ?? env('RUNTIME_API_KEY');
  if (key) return { key, problem: '' };
  const file = join(env('RUNTIME_STATE_DIR') ?? DEFAULT_STATE_DIR, 'admin.key');
  try {
    const k = readFileSync(file, 'utf8').trim();
    if (k) return { key: k, problem: '' };
    return { key: null, problem: `no API key: ${file} is empty; set RUNTIME_API_KEY` };
  } catch (e) {
    const why = (e as NodeJS.ErrnoException).code ?? String(e);
    return {
      key: null,
      problem: `no API key: RUNTIME_API_KEY is not set and ${file} cannot be read (${why}); ` +
        'set RUNTIME_API_KEY, pass new Runtime({ apiKey }), or point RUNTIME_STATE_DIR at the ' +
        'directory where runtimed wrote admin.key',
    };
  }
}
