/**
 * Typed errors. Every error this package throws for an API call is a
 * {@link RuntimeError}, so one `instanceof` check catches them all; the
 * subclasses say what kind of failure it was.
 */

/** What every error of this package carries. */
export interface RuntimeErrorInit {
  /** The HTTP status; 0 when no answer came (connection failure, time-out). */
  status?: number;
  /** The API's error code (`not_found`, `name_taken`, ...), or this package's own. */
  code?: string;
  cause?: unknown;
}

/** The base class: an HTTP status, the API's error code and its message. */
export class RuntimeError extends Error {
  readonly status: number;
  readonly code: string;

  constructor(message: string, init: RuntimeErrorInit = {}) {
    super(message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = new.target.name;
    this.status = init.status ?? 0;
    this.code = init.code ?? 'error';
  }
}

/** 400, 413, 422: the request was wrong (bad option, bad JSON, too large). */
export class BadRequestError extends RuntimeError {}
/** 401: missing or wrong API key. */
export class UnauthorizedError extends RuntimeError {}
/** 403: the key may not make this call (an account's key on an admin call: accounts, metrics). */
export class ForbiddenError extends RuntimeError {}
/** 404: no such sandbox, secret, server or path (or not the caller's account). */
export class NotFoundError extends RuntimeError {}
/** 409: the name is taken, or the sandbox is not in a state that allows the call. */
export class ConflictError extends RuntimeError {}
/** 429: a limit was reached (sandboxes, memory, running execs); the message names it. */
export class LimitError extends RuntimeError {}
/** 503: the daemon cannot serve the call now. */
export class UnavailableError extends RuntimeError {}
/** The daemon could not be reached, or the connection broke before an answer. */
export class ConnectionError extends RuntimeError {}
/** The call did not finish within its time-out. */
export class TimeoutError extends RuntimeError {}

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

/** `exec(argv, { check: true })` ran the command and it failed (or timed out). */
export class CommandError extends RuntimeError {
  readonly argv: readonly string[];
  readonly exitCode: number;
  readonly stdout: string;
  readonly stderr: string;
  readonly timedOut: boolean;

  constructor(argv: readonly string[], r: { exitCode: number; stdout: string; stderr: string; timedOut?: boolean }) {
    const why = r.timedOut ? 'timed out' : `exited with status ${r.exitCode}`;
    const line = errorLine(r.stderr);
    super(`command ${JSON.stringify(argv)} ${why}${line ? `: ${line}` : ''}`, { code: 'command_failed' });
    this.argv = argv;
    this.exitCode = r.exitCode;
    this.stdout = r.stdout;
    this.stderr = r.stderr;
    this.timedOut = r.timedOut ?? false;
  }
}

/** `mcp.ready()` found a server `failed` or `refused`; `gateway` is the whole answer. */
export class McpServerError extends RuntimeError {
  /** The server that failed (the first one, when several did). */
  readonly server: string;
  /** Its status: `failed` or `refused`. */
  readonly serverStatus: string;
  /** The daemon's account of what went wrong. */
  readonly serverError: string;
  readonly gateway: unknown;

  constructor(server: string, serverStatus: string, serverError: string, gateway: unknown) {
    super(`MCP server ${server} is ${serverStatus}${serverError ? `: ${serverError}` : ''}`,
      { code: `mcp_${serverStatus}` });
    this.server = server;
    this.serverStatus = serverStatus;
    this.serverError = serverError;
    this.gateway = gateway;
  }
}

const byStatus: Record<number, typeof RuntimeError> = {
  400: BadRequestError, 401: UnauthorizedError, 403: ForbiddenError, 404: NotFoundError, 409: ConflictError,
  413: BadRequestError, 422: BadRequestError, 429: LimitError, 503: UnavailableError,
};

/** The typed error for an API error answer (`{"error": {"code", "message"}}`). */
export function errorFromAnswer(status: number, body: unknown, fallbackText: string): RuntimeError {
  const err = (body as { error?: { code?: unknown; message?: unknown } } | null)?.error;
  const code = typeof err?.code === 'string' ? err.code : `http_${status}`;
  const message = typeof err?.message === 'string' ? err.message
    : `HTTP ${status}${fallbackText ? `: ${fallbackText.slice(0, 300)}` : ''}`;
  const Kind = byStatus[status] ?? RuntimeError;
  return new Kind(message, { status, code });
}
