/**
 * HTTP to runtimed, as Runtime Cloud's SDK speaks it: the key, an Idempotency-Key on
 * every change (kept across retries, so a retried change happens once), time-outs,
 * typed errors and retries. Nothing here knows the API's paths.
 */
import { ConnectionError, DELIBERATE, errorFor, RuntimeError, TimeoutError } from './errors.js';
import { VERSION } from './version.js';

/** The fetch this package calls: the global one or one the user injects. */
export type FetchLike = (input: string, init: RequestInit) => Promise<Response>;

/** Per-call options every method accepts (Runtime Cloud's `RequestOptions`). */
export interface RequestOptions {
  /**
   * Sent as Idempotency-Key. Leave it out: the SDK makes one per call and keeps it across
   * its own retries. Pass your own only to retry a call yourself (runtimed keeps keys
   * 24 hours, in memory: a restart of runtimed forgets them).
   */
  idempotencyKey?: string;
  /** Cancels the call; the promise rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Give up after this many milliseconds, retries included. */
  timeoutMs?: number;
}

/** @deprecated withruntime 0.1's name of {@link RequestOptions}. */
export type CallOptions = RequestOptions;

export type Query = Record<string, string | number | boolean | readonly string[] | undefined>;

export interface TransportConfig {
  apiUrl: string;
  apiKey: string | null;
  /** Why there is no key, for the error of the first call. */
  keyProblem: string;
  fetch: FetchLike;
  timeoutMs: number;
  maxRetries: number;
}

export interface Call extends RequestOptions {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: string;
  query?: Query;
  /** Sent as JSON. */
  json?: unknown;
  /** Sent as is (file contents). */
  bytes?: Uint8Array | string;
  accept?: string;
  /** `Prefer: wait=N`: seconds the server may hold the answer of a change of state. */
  wait?: number;
  /** Whether sending the call again after a broken connection is safe (default true). */
  retry?: boolean;
}

/** @deprecated the name in withruntime 0.1. */
export type Request = Call;

/** A successful answer: the status, the headers and the whole body. */
export interface Answer {
  status: number;
  headers: Headers;
  body: Uint8Array;
}

/** The longest wait between two attempts. */
const MAX_PAUSE_MS = 30_000;

export class Transport {
  // Private, so that printing a client (a test's failure, a log line) never shows the key.
  readonly #config: TransportConfig;

  constructor(config: TransportConfig) {
    this.#config = config;
  }

  get config(): TransportConfig {
    return this.#config;
  }

  get baseUrl(): string {
    return this.config.apiUrl;
  }

  /**
   * The call, sent again on a broken connection and on 429, 502, 503 and 504 (with the
   * same Idempotency-Key, after Retry-After), at most `maxRetries` times within its time-out.
   */
  async send(call: Call): Promise<Answer> {
    const key = this.keyOf(call);
    const timeoutMs = call.timeoutMs ?? this.config.timeoutMs;
    const deadline = Date.now() + timeoutMs;
    for (let attempt = 0; ; attempt++) {
      let answer: Answer | undefined;
      let failure: unknown;
      try {
        answer = await this.once(call, key, deadline, timeoutMs);
      } catch (e) {
        failure = e;
      }
      if (answer && answer.status < 400) return answer;
      const error = failure ?? answerError(answer!, key);
      const wait = attempt < this.config.maxRetries ? retryDelay(call, answer, error, attempt) : null;
      if (wait === null || Date.now() + wait >= deadline) throw error;
      await pause(wait, call.signal);
    }
  }

  /** send() for a JSON answer (undefined for an empty one). */
  async json<T>(call: Call): Promise<T> {
    const a = await this.send(call);
    const text = new TextDecoder().decode(a.body);
    if (!text) return undefined as T;
    try {
      return JSON.parse(text) as T;
    } catch (e) {
      throw new RuntimeError({
        message: `the daemon answered ${call.method} ${call.path} with something that is not JSON`,
        status: a.status, code: 'bad_answer', cause: e,
      });
    }
  }

  /**
   * One attempt whose body is read as it comes: its chunks. `timeoutMs` bounds the
   * connection and the answer's head; the body then flows until the daemon ends it or
   * `signal` aborts. An error answer throws before the first chunk. Sent once (a refused
   * connection aside): what streams is not replayed.
   */
  async *stream(call: Call): AsyncGenerator<Uint8Array> {
    const key = this.keyOf(call);
    const timeoutMs = call.timeoutMs ?? this.config.timeoutMs;
    let res: Response | undefined;
    const ctl = new AbortController();
    const onAbort = () => ctl.abort();
    call.signal?.addEventListener('abort', onAbort, { once: true });
    try {
      for (let attempt = 0; !res; attempt++) {
        this.checkKey();
        call.signal?.throwIfAborted();
        const timer = setTimeout(() => ctl.abort(), timeoutMs);
        try {
          res = await this.config.fetch(this.url(call), { ...this.init(call, key), signal: ctl.signal });
        } catch (e) {
          if (call.signal?.aborted) throw call.signal.reason;
          if (ctl.signal.aborted) throw timeoutError(call, timeoutMs, e, key);
          const err = connectionError(this.config.apiUrl, call, e, key);
          if (!refused(e) || attempt >= this.config.maxRetries) throw err;
          await pause(200 * 2 ** attempt, call.signal);
        } finally {
          clearTimeout(timer);
        }
      }
      if (res.status >= 400 || !res.body) {
        const a = { status: res.status, headers: res.headers, body: new Uint8Array(await res.arrayBuffer()) };
        if (a.status >= 400) throw answerError(a, key);
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
        if (call.signal?.aborted) return; // the caller's way out
        throw connectionError(this.config.apiUrl, call, e, key);
      } finally {
        reader.releaseLock();
        ctl.abort(); // closes the connection when the caller stops early
      }
    } finally {
      call.signal?.removeEventListener('abort', onAbort);
    }
  }

  /** stream() read as NDJSON: one parsed object per line, blank lines skipped. */
  async *events<T>(call: Call): AsyncGenerator<T> {
    const decoder = new TextDecoder();
    let buffered = '';
    for await (const chunk of this.stream({ accept: 'application/x-ndjson', ...call })) {
      buffered += decoder.decode(chunk, { stream: true });
      let nl: number;
      while ((nl = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, nl).trim();
        buffered = buffered.slice(nl + 1);
        if (line) yield parseLine<T>(line, call);
      }
    }
    buffered += decoder.decode();
    if (buffered.trim()) yield parseLine<T>(buffered.trim(), call);
  }

  private keyOf(call: Call): string | undefined {
    return call.method === 'GET' ? undefined : (call.idempotencyKey ?? globalThis.crypto.randomUUID());
  }

  private checkKey(): void {
    if (!this.config.apiKey) {
      throw new RuntimeError({
        message: this.config.keyProblem, code: 'missing_api_key', status: 0,
        hint: 'Run `npx withruntime login`, set RUNTIME_API_KEY, or pass new Runtime({ apiKey }).',
      });
    }
  }

  /** One attempt; an error answer is returned, not thrown, so that send() can decide. */
  private async once(call: Call, key: string | undefined, deadline: number, timeoutMs: number): Promise<Answer> {
    this.checkKey();
    call.signal?.throwIfAborted();
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), Math.max(0, deadline - Date.now()));
    const onAbort = () => ctl.abort();
    call.signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const res = await this.config.fetch(this.url(call), { ...this.init(call, key), signal: ctl.signal });
      // The body is read under the same signal: a daemon that stalls mid-answer times out too.
      const body = new Uint8Array(await res.arrayBuffer());
      return { status: res.status, headers: res.headers, body };
    } catch (e) {
      if (call.signal?.aborted) throw call.signal.reason;
      if (ctl.signal.aborted) throw timeoutError(call, timeoutMs, e, key);
      throw connectionError(this.config.apiUrl, call, e, key);
    } finally {
      clearTimeout(timer);
      call.signal?.removeEventListener('abort', onAbort);
    }
  }

  private url(call: Call): string {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(call.query ?? {})) {
      if (v === undefined) continue;
      if (Array.isArray(v)) for (const item of v as readonly string[]) q.append(k, item);
      else q.append(k, String(v));
    }
    const qs = q.toString();
    return this.config.apiUrl + call.path + (qs ? `?${qs}` : '');
  }

  private init(call: Call, key: string | undefined): RequestInit {
    const headers: Record<string, string> = {
      Authorization: `Bearer ${this.config.apiKey}`,
      Accept: call.accept ?? 'application/json',
      'User-Agent': `withruntime-js/${VERSION}`,
      'X-Runtime-Client': `sdk-js/${VERSION}`,
    };
    if (key) headers['Idempotency-Key'] = key;
    if (call.wait) headers.Prefer = `wait=${Math.min(120, Math.ceil(call.wait))}`;
    let body: RequestInit['body'];
    if (call.json !== undefined) {
      headers['Content-Type'] = 'application/json';
      body = JSON.stringify(call.json);
    } else if (call.bytes !== undefined) {
      headers['Content-Type'] = 'application/octet-stream';
      body = call.bytes as RequestInit['body']; // Uint8Array of any buffer: fetch sends its bytes
    }
    return { method: call.method, headers, body };
  }
}

function parseLine<T>(line: string, call: Call): T {
  try {
    return JSON.parse(line) as T;
  } catch (e) {
    throw new RuntimeError({
      message: `the daemon's stream of ${call.method} ${call.path} has a line that is not JSON`,
      code: 'bad_answer', status: 0, cause: e,
    });
  }
}

/** The typed error of an error answer. */
function answerError(a: Answer, key: string | undefined): RuntimeError {
  const text = new TextDecoder().decode(a.body);
  let body: unknown = null;
  try {
    body = JSON.parse(text);
  } catch {
    // Not JSON (a proxy's page): the text goes into the message.
  }
  return errorFor(a.status, body, key, text);
}

/**
 * How long to wait before trying again, or null to stop. A refused connection (nothing
 * reached the daemon) is always tried again; a broken one, and 429, 502, 503 and 504,
 * when the call may be sent twice: every GET, and every change, which carries its
 * Idempotency-Key (the daemon answers a repeat with the first answer).
 */
function retryDelay(call: Call, answer: Answer | undefined, error: unknown, attempt: number): number | null {
  const backoff = 200 * 2 ** attempt;
  if (!answer) {
    if (!(error instanceof ConnectionError) || error instanceof TimeoutError) return null;
    return refused(error.cause) || call.retry !== false ? backoff : null;
  }
  if (call.retry === false || ![429, 502, 503, 504].includes(answer.status)) return null;
  if (error instanceof RuntimeError && DELIBERATE.has(error.code)) return null;
  const after = error instanceof RuntimeError && error.retryAfterMs !== undefined
    ? error.retryAfterMs : retryAfterMs(answer.headers.get('retry-after'));
  return Math.min(MAX_PAUSE_MS, after ?? backoff);
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

function timeoutError(call: Call, timeoutMs: number, cause: unknown, key: string | undefined): TimeoutError {
  return new TimeoutError({
    message: `${call.method} ${call.path} took longer than ${timeoutMs} ms`,
    code: 'timeout', status: 0, cause,
    hint: 'Raise timeoutMs for a long call, or retry with the same idempotencyKey.',
    ...(key ? { idempotencyKey: key } : {}),
  });
}

function connectionError(apiUrl: string, call: Call, e: unknown, key: string | undefined): ConnectionError {
  if (e instanceof RuntimeError) return e as ConnectionError;
  const why = refused(e) ? 'connection refused (is runtimed running? RUNTIME_API_URL names it)'
    : untrusted(e) ? `${describe(e)}; this process does not trust the daemon's TLS certificate: ` +
      'set NODE_EXTRA_CA_CERTS to the CA that issued it, or pass { fetch } with one that trusts it'
    : describe(e);
  return new ConnectionError({
    message: `${call.method} ${apiUrl}${call.path}: ${why}`, code: 'connection_error', status: 0, cause: e,
    ...(key ? { idempotencyKey: key } : {}),
  });
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
