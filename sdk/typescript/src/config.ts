/** Finding the daemon and its key the way the `runtime` command line does (docs/login.md). */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { readSaved } from './saved.js';

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

/** Where a client's key came from. */
export type KeySource = 'option' | 'RUNTIME_API_KEY' | 'saved login' | 'admin.key' | 'none';

/**
 * The key, in this order: the one given, RUNTIME_API_KEY, the key a login saved for
 * this daemon's origin (`withruntime login`, `runtime login`: docs/login.md), else
 * STATE/admin.key (STATE is RUNTIME_STATE_DIR or /var/lib/runtime) when this process
 * may read it. Never throws: a missing key is reported by the first call, so that
 * constructing a client stays cheap.
 */
export function apiKeyFromEnv(given?: string, apiUrl: string = apiUrlFromEnv()): {
  key: string | null; problem: string; source: KeySource; file?: string;
} {
  if (given) return { key: given, problem: '', source: 'option' };
  const envKey = env('RUNTIME_API_KEY');
  if (envKey) return { key: envKey, problem: '', source: 'RUNTIME_API_KEY' };
  const saved = readSaved(apiUrl);
  if (saved.key !== null) return { key: saved.key, problem: '', source: 'saved login', file: saved.place.file };
  const file = join(env('RUNTIME_STATE_DIR') ?? DEFAULT_STATE_DIR, 'admin.key');
  let why: string;
  try {
    const k = readFileSync(file, 'utf8').trim();
    if (k) return { key: k, problem: '', source: 'admin.key', file };
    why = 'is empty';
  } catch (e) {
    why = `cannot be read (${(e as NodeJS.ErrnoException).code ?? String(e)})`;
  }
  return {
    key: null, source: 'none',
    problem: `no API key for ${apiUrl}: RUNTIME_API_KEY is not set, ${saved.problem}, and ${file} ${why}; ` +
      'run `npx withruntime login` to connect this machine, or set RUNTIME_API_KEY, or pass new Runtime({ apiKey })',
  };
}
