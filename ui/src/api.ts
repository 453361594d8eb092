/* Every call of the page to the daemon: same origin, the session cookie, the CSRF token in a
 * header (kept in memory only, never in storage or a URL). A 401 from any call ends the
 * session in the page: the login form comes back, saying why. */
import type { Session } from './types';

export class ApiError extends Error {
  status: number;
  code: string;
  details: unknown;
  constructor(status: number, code: string, message: string, details?: unknown) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
  }
  /** "field: message" lines of a refused body (details.issues). */
  issues(): string[] {
    const d = this.details as { issues?: unknown } | undefined;
    if (!d || !Array.isArray(d.issues)) return [];
    return d.issues
      .filter((i): i is { field?: unknown; message?: unknown } => typeof i === 'object' && i !== null)
      .map((i) => (typeof i.field === 'string' && i.field ? i.field + ': ' : '') + (typeof i.message === 'string' ? i.message : ''))
      .slice(0, 50);
  }
}

let csrfToken = '';
let onUnauthorized: (message: string) => void = () => {};

export function setCsrfToken(t: string): void {
  csrfToken = t;
}
export function setUnauthorizedHandler(f: (message: string) => void): void {
  onUnauthorized = f;
}

async function errorOf(r: Response): Promise<ApiError> {
  let code = 'http_' + r.status, message = `${r.status} ${r.statusText || 'error'}`, details: unknown;
  try {
    const j = await r.json();
    const e = j && typeof j === 'object' ? (j as { error?: unknown }).error : null;
    if (e && typeof e === 'object') {
      const o = e as Record<string, unknown>;
      if (typeof o.code === 'string') code = o.code;
      if (typeof o.message === 'string' && o.message) message = o.message.slice(0, 2000);
      details = o.details;
    }
  } catch {
    /* not JSON: keep the status line */
  }
  return new ApiError(r.status, code, message, details);
}

export interface CallOptions {
  text?: boolean; /* the answer is text/plain */
  signal?: AbortSignal;
}

/** A /v1 call: JSON in and out; throws ApiError (after ending the session on 401). */
export async function api<T>(method: string, path: string, body?: unknown, opts: CallOptions = {}): Promise<T> {
  const headers: Record<string, string> = { 'X-CSRF-Token': csrfToken };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let r: Response;
  try {
    r = await fetch(path, {
      method,
      credentials: 'same-origin',
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: opts.signal,
      cache: 'no-store',
      redirect: 'error',
    });
  } catch (e) {
    if ((e as Error).name === 'AbortError') throw e;
    throw new ApiError(0, 'network', 'The daemon did not answer: ' + String((e as Error).message || e));
  }
  if (r.status === 401) {
    const err = await errorOf(r);
    onUnauthorized('Your session has expired. Sign in again.');
    throw err;
  }
  if (!r.ok) throw await errorOf(r);
  if (opts.text) return (await r.text()) as T;
  if (r.status === 204) return undefined as T;
  const t = await r.text();
  if (t === '') return undefined as T;
  try {
    return JSON.parse(t) as T;
  } catch {
    throw new ApiError(r.status, 'bad_answer', 'The daemon answered something that is not JSON.');
  }
}

/** The path segment of an id or name, encoded. */
export const seg = encodeURIComponent;

function isSession(j: unknown): j is Session {
  const s = j as Session;
  return !!s && typeof s === 'object' && typeof s.account === 'string' && typeof s.csrfToken === 'string';
}

/** GET /dashboard/session: the session of the cookie, or null when there is none. */
export async function getSession(): Promise<Session | null> {
  const r = await fetch('/dashboard/session', { credentials: 'same-origin', cache: 'no-store' });
  if (r.status === 401) return null;
  if (!r.ok) throw await errorOf(r);
  const j = await r.json();
  if (!isSession(j)) throw new ApiError(r.status, 'bad_answer', 'The session answer has no account.');
  return { ...j, admin: j.admin === true };
}

/** POST /dashboard/session with the API key; the key goes in the body only. */
export async function signIn(apiKey: string): Promise<Session> {
  let r: Response;
  try {
    r = await fetch('/dashboard/session', {
      method: 'POST',
      credentials: 'same-origin',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ apiKey }),
      cache: 'no-store',
    });
  } catch (e) {
    throw new ApiError(0, 'network', 'The daemon did not answer: ' + String((e as Error).message || e));
  }
  if (!r.ok) throw await errorOf(r);
  const j = await r.json();
  if (!isSession(j)) throw new ApiError(r.status, 'bad_answer', 'The session answer has no account.');
  return { ...j, admin: j.admin === true };
}

/** DELETE /dashboard/session. */
export async function signOut(): Promise<void> {
  await fetch('/dashboard/session', { method: 'DELETE', credentials: 'same-origin', headers: { 'X-CSRF-Token': csrfToken } }).catch(() => {});
  csrfToken = '';
}

/** A message for a person from whatever was thrown. */
export function messageOf(e: unknown): string {
  if (e instanceof ApiError) return e.message;
  if (e instanceof Error) return e.message;
  return String(e);
}
