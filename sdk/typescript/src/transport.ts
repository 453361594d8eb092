/**
 * HTTP to runtimed: the key, time-outs, typed errors and the few retries that
 * are safe. Nothing here knows the API's paths.
 */
import { ConnectionError, errorFromAnswer, RuntimeError, TimeoutError } from './errors.js';
import { VERSION } from './version.js';

/** The fetch this package calls: the global one or one the user injects. */
export type FetchLike = (input: string, init: RequestInit) => Promise<Response>;

/** Per-call options every method accepts. */
export interface CallOptions {
  /** Give up after this many milliseconds (all attempts together). */
  timeoutMs?: number;
  /** Cancels the call; the promise rejects with the signal's reason. */
  signal?: AbortSignal;
}

export interface TransportConfig {
  apiUrl: string;
  apiKey: string | null;
  /** Why there is no key, for the error of the first call. */
  keyProblem: string;
  fetch: FetchLike;
  timeoutMs: number;
  maxRetries: number;
}

export interface Request extends CallOptions {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: string;
  query?: Record<string, string | number | undefined>;
  /** Sent as JSON. */
  json?: unknown;
  /** Sent as is (file contents). */
  bytes?: Uint8Array | string;
}

/** A successful answer: the status, the headers and the whole body. */
export interface Answer {
  status: number;
  headers: Headers;
  body: Uint8Array;
}

const IDEMPOTENT = new Set(['GET', 'PUT', 'DELETE']);
/** The longest Retry-After we honour; a longer one is the daemon telling us to give up. */
const MAX_RETRY_AFTER_MS = 10_000;

export class Transport {
  constructor(readonly config: TransportConfig) {}

  /** The call, retried only where that cannot do anything twice. */
  async send(req: Request): Promise<Answer> {
    const timeoutMs = req.timeoutMs ?? this.config.timeoutMs;
    const deadline = Date.now() + timeoutMs;
    for (let attempt = 0; ; attempt++) {
      let answer: Answer | undefined;
      let failure: unknown;
      try {
        answer = await this.once(req, deadline, timeoutMs);
      } catch (e) {
        failure = e;
      }
      const wait = attempt < this.config.maxRetries ? retryDelay(req.method, answer, failure, attempt) : null;
      if (wait === null || Date.now() + wait >= deadline) {
        if (failure !== undefined) throw failure;
        return checked(answer!);
      }
      await pause(wait, req.signal);
    }
  }

  /** send() for a JSON answer. */
  async json<T>(req: Request): Promise<T> {
    const a = await this.send(req);
    const text = new TextDecoder().decode(a.body);
    if (!text) return undefined as T;
    try {
      return JSON.parse(text) as T;
    } catch (e) {
      throw new RuntimeError(`the daemon answered ${req.method} ${req.path} with something that is not JSON`,
        { status: a.status, code: 'bad_answer', cause: e });
    }
  }

  /**
   * One attempt whose body is read as it comes (a followed log): the body's chunks.
   * `timeoutMs` bounds the connection and the answer's head; the body then flows until
   * the daemon ends it or `signal` aborts. An error answer throws before the first chunk.
   */
  async *stream(req: Request): AsyncGenerator<Uint8Array> {
    if (!this.config.apiKey) throw new RuntimeError(this.config.keyProblem, { code: 'no_api_key' });
    req.signal?.throwIfAborted();
    const timeoutMs = req.timeoutMs ?? this.config.timeoutMs;
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), timeoutMs);
    const onAbort = () => ctl.abort();
    req.signal?.addEventListener('abort', onAbort, { once: true });
    let res: Response;
    try {
      res = await this.config.fetch(this.url(req), { ...this.init(req), signal: ctl.signal });
    } catch (e) {
      req.signal?.removeEventListener('abort', onAbort);
      if (req.signal?.aborted) throw req.signal.reason;
      if (ctl.signal.aborted) {
        throw new TimeoutError(`${req.method} ${req.path} took longer than ${timeoutMs} ms`, { code: 'timeout', cause: e });
      }
      throw connectionError(this.config.apiUrl, req, e);
    } finally {
      clearTimeout(timer);
    }
    try {
      if (res.status >= 400 || !res.body) {
        checked({ status: res.status, headers: res.headers, body: new Uint8Array(await res.arrayBuffer()) });
        return;
      }
      const reader = res.body.getReader();
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) return;
          yield value;
        }
      } catch (e) {
        if (req.signal?.aborted) return; // the caller's way out
        throw connectionError(this.config.apiUrl, req, e);
      } finally {
        reader.releaseLock();
        ctl.abort(); // closes the connection when the caller stops early
      }
    } finally {
      req.signal?.removeEventListener('abort', onAbort);
    }
  }

  /** One attempt; an error answer is returned, not thrown, so that send() can decide. */
  private async once(req: Request, deadline: number, timeoutMs: number): Promise<Answer> {
    if (!this.config.apiKey) throw new RuntimeError(this.config.keyProblem, { code: 'no_api_key' });
    req.signal?.throwIfAborted();
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), Math.max(0, deadline - Date.now()));
    const onAbort = () => ctl.abort();
    req.signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const res = await this.config.fetch(this.url(req), { ...this.init(req), signal: ctl.signal });
      // The body is read under the same signal: a daemon that stalls mid-answer times out too.
      const body = new Uint8Array(await res.arrayBuffer());
      return { status: res.status, headers: res.headers, body };
    } catch (e) {
      if (req.signal?.aborted) throw req.signal.reason;
      if (ctl.signal.aborted) {
        throw new TimeoutError(`${req.method} ${req.path} took longer than ${timeoutMs} ms`,
          { code: 'timeout', cause: e });
      }
      throw connectionError(this.config.apiUrl, req, e);
    } finally {
      clearTimeout(timer);
      req.signal?.removeEventListener('abort', onAbort);
    }
  }

  private url(req: Request): string {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(req.query ?? {})) if (v !== undefined) q.append(k, String(v));
    const qs = q.toString();
    return this.config.apiUrl + req.path + (qs ? `?${qs}` : '');
  }

  private init(req: Request): RequestInit {
    const headers: Record<string, string> = {
      Authorization: `Bearer ${this.config.apiKey}`,
      Accept: 'application/json',
      'User-Agent': `withruntime-js/${VERSION}`,
    };
    let body: RequestInit['body'];
    if (req.json !== undefined) {
      headers['Content-Type'] = 'application/json';
      body = JSON.stringify(req.json);
    } else if (req.bytes !== undefined) {
      headers['Content-Type'] = 'application/octet-stream';
      body = req.bytes as RequestInit['body']; // Uint8Array of any buffer: fetch sends its bytes
    }
    return { method: req.method, headers, body };
  }
}

/** Throws the typed error of an error answer. */
function checked(a: Answer): Answer {
  if (a.status < 400) return a;
  const text = new TextDecoder().decode(a.body);
  let body: unknown = null;
  try {
    body = JSON.parse(text);
  } catch {
    // Not JSON (a proxy's page): the text goes into the message.
  }
  throw errorFromAnswer(a.status, body, text);
}

/**
 * How long to wait before trying again, or null to stop. Only two cases are
 * safe: the connection was refused (nothing reached the daemon, so even a POST
 * cannot happen twice), and 429/503 on a call that may be repeated anyway.
 */
function retryDelay(method: string, answer: Answer | undefined, failure: unknown, attempt: number): number | null {
  const backoff = 200 * 2 ** attempt;
  if (failure !== undefined) return failure instanceof ConnectionError && refused(failure.cause) ? backoff : null;
  if (!answer || (answer.status !== 429 && answer.status !== 503) || !IDEMPOTENT.has(method)) return null;
  const after = retryAfterMs(answer.headers.get('retry-after'));
  if (after === null) return backoff;
  return after > MAX_RETRY_AFTER_MS ? null : after;
}

/** Retry-After as seconds or an HTTP date, in milliseconds from now. */
function retryAfterMs(v: string | null): number | null {
  if (v === null || v.trim() === '') return null;
  if (/^\d+$/.test(v.trim())) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? null : Math.max(0, at - Date.now());
}

/** ECONNREFUSED anywhere in the cause chain (undici nests it, Happy Eyeballs aggregates it). */
function refused(e: unknown, depth = 0): boolean {
  if (!e || typeof e !== 'object' || depth > 5) return false;
  const o = e as { code?: unknown; cause?: unknown; errors?: unknown };
  if (o.code === 'ECONNREFUSED') return true;
  if (Array.isArray(o.errors) && o.errors.some((x) => refused(x, depth + 1))) return true;
  return refused(o.cause, depth + 1);
}

/** A certificate Node did not trust, anywhere in the cause chain (codes as OpenSSL's). */
function untrusted(e: unknown, depth = 0): boolean {
  if (!e || typeof e !== 'object' || depth > 5) return false;
  const o = e as { code?: unknown; cause?: unknown };
  if (typeof o.code === 'string' && /CERT|UNABLE_TO_VERIFY|SELF_SIGNED/.test(o.code)) return true;
  return untrusted(o.cause, depth + 1);
}

function connectionError(apiUrl: string, req: Request, e: unknown): ConnectionError {
  if (e instanceof RuntimeError && !(e instanceof ConnectionError)) return e as ConnectionError;
  const why = refused(e) ? 'connection refused (is runtimed running? RUNTIME_API_URL names it)'
    : untrusted(e) ? `${describe(e)}; this process does not trust the daemon's TLS certificate: ` +
      'set NODE_EXTRA_CA_CERTS to the CA that issued it, or pass { fetch } with one that trusts it'
    : describe(e);
  return new ConnectionError(`${req.method} ${apiUrl}${req.path}: ${why}`, { code: 'connection_failed', cause: e });
}

function describe(e: unknown): string {
  const parts: string[] = [];
  for (let c: unknown = e, i = 0; c && i < 4; c = (c as { cause?: unknown }).cause, i++) {
    const m = (c as { message?: unknown }).message;
    if (typeof m === 'string' && m && !parts.includes(m)) parts.push(m);
  }
  return parts.join(': ') || String(e);
}

/** Waits between attempts; an abort ends the wait at once. */
function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const done = () => {
      clearTimeout(t);
      signal?.removeEventListener('abort', onAbort);
    };
    const onAbort = () => {
      done();
      reject(signal!.reason);
    };
    const t = setTimeout(() => {
      done();
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
