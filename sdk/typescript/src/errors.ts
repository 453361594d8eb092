/**
 * Typed errors, as Runtime Cloud's SDK has them. Every error this package throws for an
 * API call is a {@link RuntimeError}: `code` (the API's, e.g. `not_found`, `name_taken`,
 * or this package's own), `status` (HTTP; 0 when no answer came), `requestId` (quote it
 * in a report), and where the API gave them `hint`, `details` and `retryAfterMs`. The
 * subclasses say what kind of failure it was.
 */

/** What a {@link RuntimeError} is made of. */
export interface RuntimeErrorInit {
  message: string;
  /** The API's error code (`not_found`, `name_taken`, ...), or this package's own. */
  code: string;
  /** The HTTP status; 0 when no answer came (connection failure, time-out, a local check). */
  status: number;
  /** The answer's request id (`error.requestId`, also its x-request-id header). */
  requestId?: string;
  /** What to do next. */
  hint?: string;
  /** More about the error: a refused body's `issues`, the `field` at fault, ... */
  details?: Record<string, unknown>;
  /** The Idempotency-Key the call was sent with: a retry with it never repeats the effect. */
  idempotencyKey?: string;
  retryAfterMs?: number;
  cause?: unknown;
}

/**
 * Codes that a retry cannot change: what this daemon does not serve
 * (`unavailable`, 501), or refuses on purpose.
 */
export const DELIBERATE: ReadonlySet<string> = new Set(['unavailable', 'unsupported']);

/** The base class: an HTTP status, the API's error code and its message. */
export class RuntimeError extends Error {
  readonly code: string;
  readonly status: number;
  readonly requestId?: string;
  readonly hint?: string;
  readonly details?: Record<string, unknown>;
  readonly idempotencyKey?: string;
  readonly retryAfterMs?: number;

  constructor(init: RuntimeErrorInit);
  /** @deprecated the form of withruntime 0.1: pass one object, `{ message, code, status }`. */
  constructor(message: string, init?: Partial<Omit<RuntimeErrorInit, 'message'>>);
  constructor(first: RuntimeErrorInit | string, legacy: Partial<Omit<RuntimeErrorInit, 'message'>> = {}) {
    const init: RuntimeErrorInit = typeof first === 'string'
      ? { code: 'error', status: 0, ...legacy, message: first }
      : first;
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = new.target.name;
    this.code = init.code;
    this.status = init.status;
    if (init.requestId !== undefined) this.requestId = init.requestId;
    if (init.hint !== undefined) this.hint = init.hint;
    if (init.details !== undefined) this.details = init.details;
    if (init.idempotencyKey !== undefined) this.idempotencyKey = init.idempotencyKey;
    if (init.retryAfterMs !== undefined) this.retryAfterMs = init.retryAfterMs;
  }

  /** Sending this exact call again (the same Idempotency-Key) is safe and may work. */
  get retryable(): boolean {
    if (DELIBERATE.has(this.code)) return false;
    return [0, 429, 502, 503, 504].includes(this.status);
  }

  override toString(): string {
    return `${this.name} [${this.code}${this.status ? ` ${this.status}` : ''}]: ${this.message}` +
      `${this.hint ? `\nHint: ${this.hint}` : ''}${this.requestId ? `\nRequest: ${this.requestId}` : ''}`;
  }
}

/** 401: missing or wrong API key. */
export class AuthenticationError extends RuntimeError {}
/** 403: the key may not make this call (an account's key on an admin call: accounts, metrics). */
export class PermissionDeniedError extends RuntimeError {}
/** 404: no such sandbox, secret, server or path (or not the caller's account). */
export class NotFoundError extends RuntimeError {}
/** 409: the name is taken, or the sandbox is not in a state that allows the call. */
export class ConflictError extends RuntimeError {}
/** 400, 413, 422: the request was wrong (a bad option or body, too large, a key reused). */
export class InvalidRequestError extends RuntimeError {}
/** 429: a limit was reached (the account's sandboxes or memory, 50 secrets); the message names it. */
export class RateLimitError extends RuntimeError {}
/** 500 and above: the daemon failed, cannot serve the call now, or does not serve it (501). */
export class ServiceUnavailableError extends RuntimeError {}
/** `account_blocked` (Runtime Cloud's; runtimed never answers it). */
export class AccountBlockedError extends RuntimeError {}
/**
 * No answer arrived: the daemon could not be reached, or the connection broke. A change
 * may or may not have happened; the SDK already retried it with the same Idempotency-Key.
 */
export class ConnectionError extends RuntimeError {}
/** A call (or `mcp.ready({ throwOnFailure })`'s wait) passed its time-out: code `timeout`. */
export class TimeoutError extends ConnectionError {}

/** @deprecated withruntime 0.1's name of {@link InvalidRequestError}. */
export const BadRequestError = InvalidRequestError;
/** @deprecated withruntime 0.1's name of {@link AuthenticationError}. */
export const UnauthorizedError = AuthenticationError;
/** @deprecated withruntime 0.1's name of {@link PermissionDeniedError}. */
export const ForbiddenError = PermissionDeniedError;
/** @deprecated withruntime 0.1's name of {@link RateLimitError}. */
export const LimitError = RateLimitError;
/** @deprecated withruntime 0.1's name of {@link ServiceUnavailableError}. */
export const UnavailableError = ServiceUnavailableError;

const NOTICE = /^(npm (notice|WARN|warn)\b|\[notice\]|WARNING:|DEPRECATION:)/;
const NPM_ERROR = /^npm (ERR!|error)(?= |$) */;
const NPM_META = /^(code|errno|syscall|path|dest|signal|command|cwd|A complete log of this run|Log files were not written)\b|^\/|^$/;

/** Notices, warnings, and npm's lines about its run (its error code, where its log is). */
function noise(line: string): boolean {
  if (NOTICE.test(line)) return true;
  const m = NPM_ERROR.exec(line);
  return m !== null && NPM_META.test(line.slice(m[0].length));
}

/**
 * The line of a failed command's stderr that says what went wrong: the first line
 * that names an error ("error" in any case, or npm's "ERR!") and is not a notice (npm's
 * "notice" and "WARN" lines, pip's "[notice]", "WARNING:", "DEPRECATION:") nor npm's
 * bookkeeping ("code", "errno", "syscall", "path", where its log is); else the first
 * line that is neither; else the last line; '' for none. The daemon and the Python
 * SDK pick it the same way.
 */
export function errorLine(stderr: string): string {
  const lines = stderr.split('\n').map((l) => l.replace(/[\r \t]+$/, '')).filter((l) => l);
  const plain = lines.filter((l) => !noise(l));
  return plain.find((l) => /error/i.test(l) || l.includes('ERR!')) ?? plain[0] ?? lines.at(-1) ?? '';
}

/** What a command did, as {@link CommandError} takes it. */
export interface CommandOutcome {
  exitCode: number | null;
  stdout: string;
  stderr: string;
  timedOut?: boolean;
}

/**
 * `exec(command, { check: true })` ran the command and it failed (code `command_failed`)
 * or timed out (`command_timeout`). The message is Runtime Cloud's ("Command exited with
 * 3.") followed by the line of stderr that names the error ({@link errorLine}; npm
 * prints its notices after it), not stderr's last characters.
 */
export class CommandError extends RuntimeError {
  readonly exitCode: number | null;
  readonly stdout: string;
  readonly stderr: string;
  /** runtimed's: whether the command ran past its `timeoutMs`. */
  readonly timedOut: boolean;
  /** runtimed's: the command as given to exec (argv, or the command line in one element). */
  readonly argv: readonly string[];

  constructor(result: CommandOutcome, command?: string | readonly string[]);
  /** @deprecated withruntime 0.1's order. */
  constructor(argv: readonly string[], result: CommandOutcome);
  constructor(a: CommandOutcome | readonly string[], b?: CommandOutcome | string | readonly string[]) {
    const legacy = Array.isArray(a);
    const result = (legacy ? b : a) as CommandOutcome;
    const command = (legacy ? a : b) as string | readonly string[] | undefined;
    const line = errorLine(result.stderr);
    super({
      message: result.timedOut ? 'Command timed out.'
        : `Command exited with ${result.exitCode}.${line ? ` ${line}` : ''}`,
      code: result.timedOut ? 'command_timeout' : 'command_failed',
      status: 0,
    });
    this.exitCode = result.exitCode;
    this.stdout = result.stdout;
    this.stderr = result.stderr;
    this.timedOut = result.timedOut ?? false;
    this.argv = command === undefined ? [] : typeof command === 'string' ? [command] : [...command];
  }
}

/**
 * runtimed's: `mcp.ready({ throwOnFailure: true })` found a server that is not serving
 * (its status `failed`: runtimed's phase `failed` or `refused`); `gateway` is the answer.
 */
export class McpServerError extends RuntimeError {
  /** The server that failed (the first one, when several did). */
  readonly server: string;
  /** runtimed's phase of it: `failed` or `refused`. */
  readonly serverStatus: string;
  /** The daemon's account of what went wrong. */
  readonly serverError: string;
  readonly gateway: unknown;

  constructor(server: string, serverStatus: string, serverError: string, gateway: unknown) {
    super({
      message: `MCP server ${server} is ${serverStatus}${serverError ? `: ${serverError}` : ''}`,
      code: `mcp_${serverStatus}`, status: 0,
    });
    this.server = server;
    this.serverStatus = serverStatus;
    this.serverError = serverError;
    this.gateway = gateway;
  }
}

/** The typed error for an API error answer (`{"error": {code, status, message, requestId, details}}`). */
export function errorFor(status: number, body: unknown, idempotencyKey?: string, fallbackText = ''): RuntimeError {
  const error = ((body as { error?: Record<string, unknown> } | null)?.error ?? {}) as Record<string, unknown>;
  const init: RuntimeErrorInit = {
    message: typeof error.message === 'string' ? error.message
      : `Runtime request failed (${status})${fallbackText ? `: ${fallbackText.slice(0, 300)}` : '.'}`,
    code: typeof error.code === 'string' ? error.code : 'request_failed',
    status,
    ...(typeof error.requestId === 'string' ? { requestId: error.requestId } : {}),
    ...(typeof error.hint === 'string' ? { hint: error.hint } : {}),
    ...(error.details && typeof error.details === 'object' ? { details: error.details as Record<string, unknown> } : {}),
    ...(typeof error.retryAfterMs === 'number' ? { retryAfterMs: error.retryAfterMs } : {}),
    ...(idempotencyKey ? { idempotencyKey } : {}),
  };
  if (init.code === 'account_blocked') return new AccountBlockedError(init);
  if (status === 401) return new AuthenticationError(init);
  if (status === 403) return new PermissionDeniedError(init);
  if (status === 404) return new NotFoundError(init);
  if (status === 409) return new ConflictError(init);
  if (status === 400 || status === 413 || status === 422) return new InvalidRequestError(init);
  if (status === 429) return new RateLimitError(init);
  if (status >= 500) return new ServiceUnavailableError(init);
  return new RuntimeError(init);
}
