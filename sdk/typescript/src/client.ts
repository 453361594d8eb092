/**
 * The client, with Runtime Cloud's names: a {@link Runtime} (one daemon, one key), the
 * {@link Sandbox} handles it returns, and their `files`, `network` and `mcp`. Every
 * method is one API call or a short sequence of them. What only runtimed has
 * (`runtime.accounts`, `runtime.usage()`, `sbx.events()`, `sbx.mcp.logs()`, ...) is
 * marked "runtimed's".
 */
import { apiKeyFromEnv, apiUrlFromEnv } from './config.js';
import { CommandError, ConnectionError, InvalidRequestError, McpServerError, NotFoundError, RuntimeError, TimeoutError } from './errors.js';
import { Page } from './page.js';
import { Transport, type Call, type FetchLike, type RequestOptions } from './transport.js';
import type {
  AccountCreated, AccountInfo, AccountKey, AccountOptions, CommandResult, CreateSandbox, DeletedSandbox, DeletedSecret,
  FileEntry, FileStat, McpCatalogEntry, McpGateway, McpServerRequest, NetworkPolicy, NetworkRules, OutputEvent,
  Secret, SandboxEvent, SandboxInfo, SandboxState, SetSecret, Usage,
} from './types.js';

export interface RuntimeOptions {
  /**
   * Default RUNTIME_API_KEY, else the key `withruntime login` (or `runtime login`) saved
   * for this daemon's origin, else STATE/admin.key (RUNTIME_STATE_DIR or /var/lib/runtime).
   */
  apiKey?: string;
  /** The daemon's HTTP API; default RUNTIME_API_URL, else http://127.0.0.1:7070. */
  baseUrl?: string;
  /** @deprecated withruntime 0.1's name of `baseUrl`. */
  apiUrl?: string;
  /** The fetch to call (tests, proxies, instrumentation); default the global one. */
  fetch?: FetchLike;
  /** Time-out of each call, retries included, unless the call gives its own; default 300 000 ms. */
  timeoutMs?: number;
  /** Retries of a broken connection and of 429, 502, 503 and 504; default 4. */
  maxRetries?: number;
}

/** What `exec` and `execStream` take (Runtime Cloud's `ExecOptions`). */
export interface ExecOptions extends RequestOptions {
  /** Default /workspace. */
  cwd?: string;
  /** Added to the sandbox's environment. Put secrets here, never in the command. */
  env?: Record<string, string>;
  /** Given to standard input, then closed: text, or bytes. */
  stdin?: string | Uint8Array;
  /**
   * The command's own time-out: default 60 000, or 24 hours when the output streams. A
   * time-out is a result (`timedOut: true`, the output so far), never an error.
   * Over 60 000 the command streams, as Runtime Cloud's SDK does.
   */
  timeoutMs?: number;
  /** Called with each piece of standard output as it comes (the command then streams). */
  onStdout?: (text: string) => unknown;
  onStderr?: (text: string) => unknown;
  /** Throw a {@link CommandError} unless the command exits 0. */
  check?: boolean;
}

/** What `mcp.ready()` takes. */
export interface ReadyOptions {
  /** How long to wait in all; default 600 000 ms. At the end it returns the gateway as it is. */
  timeoutMs?: number;
  /** Between two looks, at most; default 2 000 ms (runtimed answers as soon as none is installing). */
  intervalMs?: number;
  /**
   * runtimed's: throw {@link McpServerError} for a server that ended `failed`, and a
   * `TimeoutError` past `timeoutMs`, instead of returning (default false).
   */
  throwOnFailure?: boolean;
  signal?: AbortSignal;
}

/** What `sandboxes.list()` filters by (every label must match). */
export interface ListSandboxes {
  state?: SandboxState[];
  labels?: Record<string, string>;
  name?: string;
  /** At most this many a page (1 to 100). */
  limit?: number;
}

/** The longest single call of mcp.ready(); it asks again until its own deadline. */
const POLL_SECONDS = 60;
/** What a streamed exec (and one with onStdout) may run without a timeoutMs: 24 hours. */
const STREAMED_EXEC_MS = 86_400_000;
/** A file of at most this many bytes is one PUT; a larger one goes in chunks. */
const CHUNK = 1_048_576;
/** Chunks of a large write in flight at once. */
const PARALLEL = 8;

const enc = encodeURIComponent;

/** One daemon and one API key. Make it once and reuse it. */
export class Runtime {
  readonly sandboxes: Sandboxes;
  /** Secrets that sandboxes use without seeing them (`/v1/egress-secrets`). */
  readonly secrets: Secrets;
  /** The catalog of MCP servers (`runtime.mcp.catalog()`). */
  readonly mcp: McpCatalog;
  /** runtimed's: accounts, each with its own API key and limits (admin key only). */
  readonly accounts: Accounts;
  readonly transport: Transport;

  private static shared: Runtime | undefined;

  constructor(options: RuntimeOptions = {}) {
    const apiUrl = apiUrlFromEnv(options.baseUrl ?? options.apiUrl);
    const { key, problem } = apiKeyFromEnv(options.apiKey, apiUrl);
    const fetchFn = options.fetch ?? globalThis.fetch?.bind(globalThis);
    if (!fetchFn) throw new RuntimeError({ message: 'no fetch: use Node 20 or later, or pass { fetch }', code: 'no_fetch', status: 0 });
    this.transport = new Transport({
      apiUrl, apiKey: key, keyProblem: problem, fetch: fetchFn,
      timeoutMs: options.timeoutMs ?? 300_000, maxRetries: options.maxRetries ?? 4,
    });
    this.sandboxes = new Sandboxes(this);
    this.secrets = new Secrets(this.transport);
    this.mcp = new McpCatalog(this.transport);
    this.accounts = new Accounts(this.transport);
  }

  /** The daemon's URL. */
  get baseUrl(): string {
    return this.transport.baseUrl;
  }

  /** @deprecated withruntime 0.1's name of `baseUrl`. */
  get apiUrl(): string {
    return this.transport.baseUrl;
  }

  /** The Runtime the static `Sandbox.*` methods use: made from the environment on first use. */
  static default(): Runtime {
    Runtime.shared ??= new Runtime();
    return Runtime.shared;
  }

  /** runtimed's: what each sandbox used and cost (`GET /v1/usage`; not Runtime Cloud's shape). */
  usage(options: RequestOptions = {}): Promise<Usage> {
    return this.transport.json({ method: 'GET', path: '/v1/usage', ...options });
  }
}

/** `runtime.sandboxes`: create, find, list and delete sandboxes. */
export class Sandboxes {
  constructor(private readonly runtime: Runtime) {}

  /**
   * Creates a sandbox and returns once it runs (`wait: false`: at once). A taken name
   * throws ConflictError. `await using` on the answer deletes it at the end of the scope.
   */
  async create(input: CreateSandbox & { wait?: boolean } = {}, options: RequestOptions = {}): Promise<Sandbox> {
    const { wait, ...body } = input;
    const info = await this.runtime.transport.json<SandboxInfo>({
      method: 'POST', path: '/v1/sandboxes', json: body, wait: wait === false ? 0 : 60, ...options,
    });
    const sbx = new Sandbox(this.runtime, info, { created: !info.reused });
    if (wait !== false && info.state !== 'running') {
      await sbx.waitFor('running', { timeoutSeconds: 60 });
      if (sbx.state !== 'running') {
        throw new RuntimeError({
          message: `Sandbox ${info.id} is ${sbx.state}, not running.`, code: 'start_failed', status: 0,
          hint: 'Read it with runtime.sandboxes.get(id).',
        });
      }
    }
    return sbx;
  }

  /**
   * The sandbox named `name`, ready to use: running as it is, woken if paused, started
   * again if stopped, or created with `input` when no sandbox has the name.
   * `sbx.info.reused` says which; the other fields apply only when it is created.
   */
  getOrCreate(name: string, input: Omit<CreateSandbox, 'name' | 'getOrCreate'> & { wait?: boolean } = {},
    options: RequestOptions = {}): Promise<Sandbox> {
    return this.create({ ...input, name, getOrCreate: true }, options);
  }

  /** A sandbox by id (or, in runtimed, by name); NotFoundError when there is none. */
  async get(id: string, options: RequestOptions = {}): Promise<Sandbox> {
    const info = await this.runtime.transport.json<SandboxInfo>({ method: 'GET', path: `/v1/sandboxes/${enc(id)}`, ...options });
    return new Sandbox(this.runtime, info);
  }

  /**
   * Sandboxes, oldest first, a page at a time: `(await list()).data` is the first page,
   * `for await (const sbx of await list())` every one, `(await list()).toArray()` all.
   */
  async list(filter: ListSandboxes = {}, options: RequestOptions = {}): Promise<Page<Sandbox>> {
    const query = {
      state: filter.state,
      label: filter.labels ? Object.entries(filter.labels).map(([k, v]) => `${k}:${v}`) : undefined,
      name: filter.name,
      limit: filter.limit,
    };
    const page = async (cursor?: string): Promise<Page<Sandbox>> => {
      const p = await this.runtime.transport.json<{ data: SandboxInfo[]; nextCursor: string | null }>(
        { method: 'GET', path: '/v1/sandboxes', query: { ...query, cursor }, ...options });
      return new Page(p.data.map((i) => new Sandbox(this.runtime, i)), p.nextCursor ?? null, page);
    };
    return page();
  }

  /**
   * Deletes a sandbox for good: its processes, MCP servers and workspace. runtimed
   * answers a second delete with NotFoundError; `missingOk` (runtimed's) makes that done.
   */
  async delete(id: string, options: RequestOptions & { missingOk?: boolean } = {}): Promise<DeletedSandbox> {
    const { missingOk, ...call } = options;
    const done: DeletedSandbox = {
      id, name: null, labels: {}, status: 'deleted', state: 'stopped', deletedAt: new Date().toISOString(),
    };
    try {
      const body = await this.runtime.transport.json<Partial<DeletedSandbox> | undefined>({
        method: 'DELETE', path: `/v1/sandboxes/${enc(id)}`, ...call,
        timeoutMs: call.timeoutMs ?? Math.max(this.runtime.transport.config.timeoutMs, 120_000),
      });
      return { ...done, ...(body ?? {}) };
    } catch (e) {
      if (!(missingOk && e instanceof NotFoundError)) throw e;
      return done;
    }
  }
}

/**
 * A sandbox. `info` is what the API last said about it; `refresh()` asks again.
 * `await using sbx = await Sandbox.create()` deletes it when the scope ends; a sandbox
 * got by `get`, `connect`, `list` or a `getOrCreate` that found it is stopped instead.
 */
export class Sandbox implements AsyncDisposable {
  readonly files: Files;
  readonly network: Network;
  readonly mcp: SandboxMcp;
  readonly runtime: Runtime;
  #info: SandboxInfo;
  /** Made by this client's create (not found by getOrCreate): disposal deletes it. */
  #created: boolean;

  constructor(runtime: Runtime, info: SandboxInfo, origin: { created?: boolean } = {}) {
    this.runtime = runtime;
    this.#info = info;
    this.#created = origin.created ?? false;
    this.files = new Files(this);
    this.network = new Network(this);
    this.mcp = new SandboxMcp(this);
  }

  /** Creates a sandbox on the default Runtime (from the environment), or on `options.client`. */
  static create(input: CreateSandbox & { wait?: boolean } = {},
    options: RequestOptions & { client?: Runtime } = {}): Promise<Sandbox> {
    const { client, ...rest } = options;
    return (client ?? Runtime.default()).sandboxes.create(input, rest);
  }

  /** The sandbox named `name` (woken or started again as needed), created when there is none. */
  static getOrCreate(name: string, input: Omit<CreateSandbox, 'name' | 'getOrCreate'> & { wait?: boolean } = {},
    options: RequestOptions & { client?: Runtime } = {}): Promise<Sandbox> {
    const { client, ...rest } = options;
    return (client ?? Runtime.default()).sandboxes.getOrCreate(name, input, rest);
  }

  /** An existing sandbox by id (or, in runtimed, by name). */
  static connect(id: string, options: RequestOptions & { client?: Runtime } = {}): Promise<Sandbox> {
    const { client, ...rest } = options;
    return (client ?? Runtime.default()).sandboxes.get(id, rest);
  }

  /** @deprecated withruntime 0.1's name of {@link Sandbox.connect}. */
  static get(id: string, options: RequestOptions & { client?: Runtime } = {}): Promise<Sandbox> {
    return Sandbox.connect(id, options);
  }

  static list(filter: ListSandboxes = {}, options: { client?: Runtime } = {}): Promise<Page<Sandbox>> {
    return (options.client ?? Runtime.default()).sandboxes.list(filter);
  }

  get id(): string {
    return this.#info.id;
  }

  /** What the API last said about this sandbox. */
  get info(): SandboxInfo {
    return this.#info;
  }

  /** @internal */
  set info(info: SandboxInfo) {
    this.#info = info;
  }

  get state(): SandboxState {
    return this.#info.state;
  }

  /** @deprecated runtimed's: `info.name`. */
  get name(): string | undefined {
    return this.#info.name ?? undefined;
  }

  /** @deprecated runtimed's own word (`creating`, `running`, ...); Runtime Cloud's is `state`. */
  get status(): SandboxInfo['status'] {
    return this.#info.status;
  }

  /** @internal The API path of this sandbox, plus `sub`. */
  path(sub = ''): string {
    return `/v1/sandboxes/${enc(this.#info.id)}${sub}`;
  }

  /** @internal */
  call<T>(call: Call): Promise<T> {
    return this.runtime.transport.json<T>(call);
  }

  /** Asks the API for this sandbox again. */
  async refresh(options: RequestOptions = {}): Promise<this> {
    this.#info = await this.call<SandboxInfo>({ method: 'GET', path: this.path(), ...options });
    return this;
  }

  /** Waits (on the daemon, no polling) until the sandbox is in `state`. */
  async waitFor(state: 'running' | 'paused' | 'stopped',
    options: RequestOptions & { timeoutSeconds?: number } = {}): Promise<this> {
    const { timeoutSeconds = 60, ...call } = options;
    this.#info = await this.call<SandboxInfo>({
      method: 'GET', path: this.path(), query: { waitFor: state, timeoutSeconds }, ...call,
    });
    return this;
  }

  /**
   * Runs a command and returns its exit code and output. A string runs under `bash -c`;
   * an array runs without a shell. With onStdout/onStderr, or a `timeoutMs` over 60 s, the
   * output streams as it happens. A time-out is a result (`timedOut: true`), never an
   * error; `check: true` throws {@link CommandError} on a non-zero exit or a time-out.
   */
  async exec(command: string | readonly string[], options: ExecOptions = {}): Promise<CommandResult> {
    const streaming = options.onStdout || options.onStderr || (options.timeoutMs ?? 0) > 60_000;
    let result: CommandResult;
    if (!streaming) {
      result = await this.call<CommandResult>({
        method: 'POST', path: this.path(':exec'), json: commandBody(command, options), ...callOf(options),
        timeoutMs: Math.max(this.runtime.transport.config.timeoutMs, (options.timeoutMs ?? 60_000) + 60_000),
      });
    } else {
      const out = { stdout: '', stderr: '' };
      let exit: Extract<OutputEvent, { type: 'exit' }> | undefined;
      let processId: string | undefined;
      let dropped = false;
      for await (const event of this.execStream(command, options)) {
        if (event.type === 'start') processId = event.processId;
        else if (event.type === 'stdout' || event.type === 'stderr') {
          out[event.type] += event.data;
          await (event.type === 'stdout' ? options.onStdout : options.onStderr)?.(event.data);
        } else if (event.type === 'truncated') dropped = true;
        else if (event.type === 'exit') exit = event;
      }
      result = {
        exitCode: exit ? exit.exitCode : -1, state: exit?.state ?? 'exited', ...out,
        ...(exit?.signal ? { signal: exit.signal } : {}), timedOut: exit?.timedOut ?? false,
        durationMs: exit?.durationMs ?? 0, stdoutTruncated: dropped, stderrTruncated: dropped,
        ...(processId ? { processId } : {}),
      };
    }
    if (options.check && (result.exitCode !== 0 || result.timedOut)) throw new CommandError(result, command);
    return result;
  }

  /**
   * The command's events as they happen: `start`, `stdout`/`stderr` (with `offset`, in
   * bytes of both together), then `exit`. Output not received becomes a `truncated`
   * event. runtimed ends the command when its reader leaves, and keeps no output to
   * follow again (Runtime Cloud's `/processes`): a broken stream is a ConnectionError.
   */
  async *execStream(command: string | readonly string[], options: ExecOptions = {}): AsyncGenerator<OutputEvent> {
    let processId: string | undefined;
    let cursor = 0;
    const utf8 = new TextEncoder();
    const events = this.runtime.transport.events<OutputEvent>({
      method: 'POST', path: this.path(':exec'),
      json: { ...commandBody(command, { timeoutMs: STREAMED_EXEC_MS, ...options }), stream: true },
      ...callOf(options),
      timeoutMs: (options.timeoutMs ?? STREAMED_EXEC_MS) + 60_000,
    });
    try {
      for await (const event of events) {
        if (event.type === 'start') processId = event.processId;
        if (event.type === 'error') {
          throw new RuntimeError({
            message: event.error.message, code: event.error.code ?? 'stream_failed', status: event.error.status ?? 0,
            ...(event.error.requestId ? { requestId: event.error.requestId } : {}),
          });
        }
        if (event.type === 'truncated') cursor = Math.max(cursor, event.resumeAt);
        if (event.type === 'stdout' || event.type === 'stderr') {
          if (event.offset > cursor) yield { type: 'truncated', droppedBytes: event.offset - cursor, resumeAt: event.offset };
          const bytes = event.base64 === undefined ? utf8.encode(event.data).length : atob(event.base64).length;
          cursor = Math.max(cursor, event.offset + bytes);
        }
        yield event;
        if (event.type === 'exit') return;
      }
    } catch (e) {
      if (!processId || !(e instanceof ConnectionError) || options.signal?.aborted) throw e;
      throw new ConnectionError({
        message: `Lost the output of process ${processId}: the stream broke, and runtimed ends a command whose reader left.`,
        code: 'connection_error', status: 0, details: { sandboxId: this.id, processId }, cause: e,
      });
    }
    if (!processId) {
      throw new ConnectionError({
        message: 'The exec stream closed before the command started.', code: 'connection_error', status: 0,
        hint: 'Run it again; to be sure it runs once, pass the same idempotencyKey.',
      });
    }
    throw new ConnectionError({
      message: `The exec stream of process ${processId} ended before its exit.`, code: 'connection_error', status: 0,
      details: { sandboxId: this.id, processId },
    });
  }

  /** Ends every process and MCP server; /workspace and the settings are kept (`restart()` starts it again). */
  stop(options: RequestOptions & { wait?: boolean } = {}): Promise<this> {
    return this.#lifecycle('stop', options);
  }

  /** Freezes the sandbox; it wakes on the next exec, file or gateway request. */
  pause(options: RequestOptions & { wait?: boolean } = {}): Promise<this> {
    return this.#lifecycle('pause', options);
  }

  /**
   * Writes its memory to disk and ends its processes (a running one is paused first): it
   * then costs storage only, and the next exec, file or gateway request restores it, its
   * processes and their memory with it. gvisor sandboxes only: another is a
   * `feature_unavailable` error. `info.status` is then `'hibernated'`, `state` `'paused'`.
   */
  hibernate(options: RequestOptions & { wait?: boolean } = {}): Promise<this> {
    return this.#lifecycle('hibernate', options);
  }

  /** Thaws a paused sandbox (or restores a hibernated one); waking one that is awake is done, not a mistake. */
  async wake(options: RequestOptions & { wait?: boolean; timeoutSeconds?: number } = {}): Promise<this> {
    const { timeoutSeconds, ...rest } = options;
    try {
      return await this.#lifecycle('wake', rest, timeoutSeconds === undefined ? {} : { timeoutSeconds });
    } catch (e) {
      if (!(e instanceof RuntimeError) || e.code !== 'not_paused' || timeoutSeconds) throw e;
      await this.refresh(callOf(rest));
      if (this.state !== 'running' && this.state !== 'starting') throw e;
      return this;
    }
  }

  /** @deprecated withruntime 0.1's name of {@link Sandbox.wake}. */
  resume(options: RequestOptions = {}): Promise<this> {
    return this.wake(options);
  }

  /** Starts a stopped sandbox again on its files (memory is not kept). */
  restart(options: RequestOptions & { wait?: boolean } = {}): Promise<this> {
    return this.#lifecycle('restart', options);
  }

  /** Deletes it for good: its processes, MCP servers and workspace. */
  delete(options: RequestOptions & { missingOk?: boolean } = {}): Promise<DeletedSandbox> {
    return this.runtime.sandboxes.delete(this.id, options).then((d) => ({
      ...d, name: d.name ?? this.#info.name, labels: Object.keys(d.labels).length ? d.labels : this.#info.labels,
    }));
  }

  /** runtimed's: the sandbox's events after seq `after` (0: from the start), oldest first. */
  events(options: RequestOptions & { after?: number } = {}): Promise<SandboxEvent[]> {
    const { after, ...call } = options;
    return this.call({ method: 'GET', path: this.path('/events'), query: { after }, ...call });
  }

  async #lifecycle(verb: string, options: RequestOptions & { wait?: boolean }, body: Record<string, unknown> = {}): Promise<this> {
    const { wait, ...call } = options;
    this.#info = await this.call<SandboxInfo>({
      method: 'POST', path: this.path(`:${verb}`), json: body, wait: wait === false ? 0 : 60, ...call,
      timeoutMs: call.timeoutMs ?? Math.max(this.runtime.transport.config.timeoutMs, 120_000),
    });
    return this;
  }

  /**
   * `await using`: at the end of the scope a sandbox this client created is deleted, any
   * other (got, listed, or found by getOrCreate) is stopped unless it is stopped. Errors
   * are passed over, as the scope may be ending because of one.
   */
  async [Symbol.asyncDispose](): Promise<void> {
    if (this.#created) {
      await this.delete({ missingOk: true }).catch(() => undefined);
      return;
    }
    if (this.#info.state === 'stopped') return;
    await this.stop({ wait: false }).catch(() => undefined);
  }

  toJSON(): SandboxInfo {
    return this.#info;
  }
}

function commandBody(command: string | readonly string[], options: ExecOptions): Record<string, unknown> {
  if (typeof command !== 'string' && !Array.isArray(command)) {
    throw new InvalidRequestError({ message: 'exec takes a command line (a string) or argv (an array of strings)',
      code: 'invalid_request', status: 0 });
  }
  const { cwd, env, stdin, timeoutMs } = options;
  return {
    ...(typeof command === 'string' ? { command } : { argv: [...command] }),
    ...(cwd === undefined ? {} : { cwd }),
    ...(env === undefined ? {} : { env }),
    ...(stdin === undefined ? {} : typeof stdin === 'string' ? { stdin } : { stdinBase64: base64(stdin) }),
    ...(timeoutMs === undefined ? {} : { timeoutMs }),
  };
}

/** The per-call options of an options object (the rest is the call's own). */
function callOf(o: RequestOptions): RequestOptions {
  return {
    ...(o.idempotencyKey ? { idempotencyKey: o.idempotencyKey } : {}),
    ...(o.signal ? { signal: o.signal } : {}),
  };
}

function base64(bytes: Uint8Array): string {
  let text = '';
  for (let i = 0; i < bytes.length; i += 0x8000) text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(text);
}

async function sha256Hex(bytes: Uint8Array): Promise<string> {
  const digest = await globalThis.crypto.subtle.digest('SHA-256', bytes as Uint8Array<ArrayBuffer>);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, '0')).join('');
}

/** `sbx.files`: files in the sandbox (absolute paths; runtimed takes a relative one as under /workspace). */
export class Files {
  constructor(private readonly sbx: Sandbox) {}

  /** A file's bytes, checked against the length the daemon sends first (read again if short). */
  async read(path: string, options: RequestOptions = {}): Promise<Uint8Array> {
    return (await this.readWithMode(path, options)).data;
  }

  /** The file as UTF-8 text. */
  async readText(path: string, options: RequestOptions = {}): Promise<string> {
    return new TextDecoder().decode(await this.read(path, options));
  }

  /** runtimed's: the file's bytes and its permission bits (e.g. 0o755). */
  async readWithMode(path: string, options: RequestOptions = {}): Promise<{ data: Uint8Array; mode: number }> {
    for (let attempt = 0; ; attempt++) {
      const a = await this.sbx.runtime.transport.send({
        method: 'GET', path: this.sbx.path('/files/content'), query: { path }, accept: 'application/octet-stream', ...options,
      });
      const length = a.headers.get('x-content-length');
      if (length === null || Number(length) === a.body.length || attempt >= 2) {
        if (length !== null && Number(length) !== a.body.length) {
          throw new RuntimeError({
            message: `${path}: ${a.body.length} of its ${length} bytes arrived`, code: 'download_incomplete', status: 0,
          });
        }
        return { data: a.body, mode: parseInt(a.headers.get('x-file-mode') ?? '644', 8) };
      }
    }
  }

  /**
   * Writes a file, atomically, making parent directories; `mode` sets its permissions
   * (0o755 for a program; 0o644 when left out). Over 1 MiB it goes in parallel 1 MiB
   * chunks checked against the whole file's SHA-256 (under /workspace only).
   */
  async write(path: string, data: string | Uint8Array,
    options: RequestOptions & { mode?: number | string } = {}): Promise<{ path: string; size: number }> {
    const { mode, ...call } = options;
    const octal = mode === undefined ? undefined
      : typeof mode === 'number' ? (mode & 0o777).toString(8).padStart(3, '0') : mode;
    const bytes = typeof data === 'string' ? new TextEncoder().encode(data) : data;
    if (bytes.length <= CHUNK) {
      await this.sbx.runtime.transport.send({
        method: 'PUT', path: this.sbx.path('/files/content'), query: { path, mode: octal }, bytes, ...call,
      });
      return { path, size: bytes.length };
    }
    const begin = await this.sbx.call<{ uploadId: string; chunkBytes: number; mode?: string }>({
      method: 'POST', path: this.sbx.path('/uploads'),
      json: { path, size: bytes.length, sha256: await sha256Hex(bytes), ...(octal ? { mode: octal } : {}) },
      ...callOf(call),
    });
    const upload = this.sbx.path(`/uploads/${enc(begin.uploadId)}`);
    try {
      const offsets: number[] = [];
      for (let o = 0; o < bytes.length; o += begin.chunkBytes) offsets.push(o);
      const next = async (): Promise<void> => {
        for (let o = offsets.shift(); o !== undefined; o = offsets.shift()) {
          await this.sbx.runtime.transport.send({
            method: 'PUT', path: upload, query: { offset: o }, bytes: bytes.subarray(o, o + begin.chunkBytes),
            ...(call.signal ? { signal: call.signal } : {}),
          });
        }
      };
      await Promise.all(Array.from({ length: Math.min(PARALLEL, offsets.length) }, next));
      await this.sbx.call({ method: 'POST', path: `${upload}:commit`, json: {}, ...(call.signal ? { signal: call.signal } : {}) });
    } catch (e) {
      await this.sbx.call({ method: 'POST', path: `${upload}:abort`, json: {}, timeoutMs: 10_000, retry: false })
        .catch(() => undefined);
      throw e;
    }
    if (octal && begin.mode !== octal) {
      await this.sbx.call({ method: 'POST', path: this.sbx.path('/files:chmod'), json: { path, mode: octal } });
    }
    return { path, size: bytes.length };
  }

  /** A directory's entries, sorted by path (`depth` levels; `glob` matches below `path`). */
  async list(path = '/workspace', options: RequestOptions & { depth?: number; glob?: string; hidden?: boolean; limit?: number } = {}): Promise<FileEntry[]> {
    const { depth, glob, hidden, limit, ...call } = options;
    const page = await this.sbx.call<{ data: FileEntry[] }>({
      method: 'GET', path: this.sbx.path('/files/list'), query: { path, depth, glob, hidden, limit }, ...call,
    });
    return page.data;
  }

  /** The entries below `root` whose path matches `pattern` (`*` within a step, `**` any steps). */
  glob(pattern: string, root = '/workspace', options: RequestOptions = {}): Promise<FileEntry[]> {
    return this.list(root, { ...options, glob: pattern });
  }

  /** What is at `path`: `exists: false` when nothing is. */
  stat(path: string, options: RequestOptions = {}): Promise<FileStat> {
    return this.sbx.call({ method: 'GET', path: this.sbx.path('/files/stat'), query: { path }, ...options });
  }

  async exists(path: string, options: RequestOptions = {}): Promise<boolean> {
    return (await this.stat(path, options)).exists;
  }

  async mkdir(path: string, options: RequestOptions & { parents?: boolean } = {}): Promise<void> {
    const { parents = true, ...call } = options;
    await this.sbx.call({ method: 'POST', path: this.sbx.path('/files:mkdir'), json: { path, parents }, ...call });
  }

  /** Removes a file (a directory with `recursive`); whether something was there. */
  async remove(path: string, options: RequestOptions & { recursive?: boolean } = {}): Promise<boolean> {
    const { recursive = false, ...call } = options;
    const a = await this.sbx.call<{ removed: boolean }>({
      method: 'POST', path: this.sbx.path('/files:remove'), json: { path, recursive }, ...call,
    });
    return a.removed;
  }

  async rename(from: string, to: string, options: RequestOptions & { overwrite?: boolean } = {}): Promise<void> {
    const { overwrite = false, ...call } = options;
    await this.sbx.call({ method: 'POST', path: this.sbx.path('/files:rename'), json: { from, to, overwrite }, ...call });
  }
}

/**
 * `sbx.network`: the sandbox's egress rules. A change takes effect at once, also on open
 * connections. `allow` left out: any public host; `allow: []`: no host; a list: only
 * those. The hosts of the sandbox's catalog MCP servers are reachable in every case.
 */
export class Network {
  constructor(private readonly sbx: Sandbox) {}

  /** The rules in force. */
  get(options: RequestOptions = {}): Promise<NetworkPolicy> {
    return this.sbx.call<NetworkPolicy>({ method: 'GET', path: this.sbx.path('/network'), ...options });
  }

  /** Replaces the rules. */
  async set(rules: NetworkRules, options: RequestOptions = {}): Promise<NetworkPolicy> {
    const net = await this.sbx.call<NetworkPolicy>({ method: 'PUT', path: this.sbx.path('/network'), json: rules, ...options });
    const { openPorts: _, ...settings } = net;
    this.sbx.info = { ...this.sbx.info, network: settings as SandboxInfo['network'] };
    return net;
  }

  /** No outbound connections (but the catalog MCP servers' hosts). */
  off(options: RequestOptions = {}): Promise<NetworkPolicy> {
    return this.set({ internet: false }, options);
  }

  /** Any public host. */
  on(options: RequestOptions = {}): Promise<NetworkPolicy> {
    return this.set({ internet: true }, options);
  }
}

/** `sbx.mcp`: MCP servers in the sandbox, at gateway URLs any MCP client can use. */
export class SandboxMcp {
  constructor(private readonly sbx: Sandbox) {}

  /**
   * Starts servers: catalog ids (`{ id: 'github', secrets: { GITHUB_PERSONAL_ACCESS_TOKEN:
   * 'GITHUB_TOKEN' } }`) or your own stdio commands (`{ name, command }`). They install
   * in the background; `ready()` waits for them.
   */
  start(servers: McpServerRequest[] | McpServerRequest, input: { port?: null; replace?: boolean; public?: boolean } = {},
    options: RequestOptions = {}): Promise<McpGateway> {
    const list = Array.isArray(servers) ? servers : [servers];
    return this.sbx.call({ method: 'POST', path: this.sbx.path('/mcp'), json: { servers: list, ...input }, ...options });
  }

  /** Each server's status and URL, and the headers, now. */
  get(options: RequestOptions = {}): Promise<McpGateway> {
    return this.sbx.call({ method: 'GET', path: this.sbx.path('/mcp'), ...options });
  }

  /** @deprecated withruntime 0.1's name of {@link SandboxMcp.get}. */
  status(options: RequestOptions = {}): Promise<McpGateway> {
    return this.get(options);
  }

  /**
   * Waits until no server is `installing` (every one `ready`, or `failed`), or nothing
   * runs, then returns the gateway. Past `timeoutMs` (default 10 minutes) it returns it
   * as it is: check each server's `status`. (runtimed holds each look until the servers
   * settle, so it answers at once when they do.)
   */
  async ready(options: ReadyOptions = {}): Promise<McpGateway> {
    const { throwOnFailure = false, signal, intervalMs = 2_000 } = options;
    const total = options.timeoutMs ?? 600_000;
    const deadline = Date.now() + total;
    for (;;) {
      const left = deadline - Date.now();
      const wait = Math.max(0, Math.min(POLL_SECONDS, Math.floor(left / 1000)));
      const g = await this.sbx.call<McpGateway>({
        method: 'GET', path: this.sbx.path('/mcp'), query: { wait }, timeoutMs: wait * 1000 + 30_000,
        ...(signal ? { signal } : {}),
      });
      const pending = g.servers.filter((s) => s.status === 'installing');
      if (!g.running || pending.length === 0) return throwOnFailure ? settled(g) : g;
      if (Date.now() >= deadline) {
        if (!throwOnFailure) return g;
        throw new TimeoutError({
          message: `MCP servers still not ready after ${total} ms: ` + pending.map((s) => `${s.name} is ${s.phase}`).join(', '),
          code: 'timeout', status: 0,
        });
      }
      if (wait === 0) await new Promise((r) => setTimeout(r, Math.min(intervalMs, Math.max(0, deadline - Date.now()))));
    }
  }

  /**
   * Stops every server (`{ stopped }`: whether one was running); they stay listed, as
   * stopped. runtimed's: `stop(name)` stops that one server.
   */
  stop(options?: RequestOptions): Promise<{ stopped: boolean }>;
  stop(name: string, options?: RequestOptions): Promise<{ stopped: boolean }>;
  async stop(a?: string | RequestOptions, b: RequestOptions = {}): Promise<{ stopped: boolean }> {
    if (typeof a === 'string') {
      await this.sbx.runtime.transport.send({ method: 'DELETE', path: this.sbx.path(`/mcp/${enc(a)}`), ...b });
      return { stopped: true };
    }
    return this.sbx.call({ method: 'DELETE', path: this.sbx.path('/mcp'), ...(a ?? {}) });
  }

  /**
   * runtimed's: what the server wrote on stderr, and its install's output, oldest first.
   * The daemon keeps the last 64 KiB of each server, in memory; when older bytes were
   * dropped, the first line says how many.
   */
  async logs(name: string, options: RequestOptions = {}): Promise<string> {
    const a = await this.sbx.runtime.transport.send({ method: 'GET', path: this.sbx.path(`/mcp/${enc(name)}/logs`), ...options });
    return new TextDecoder().decode(a.body);
  }

  /**
   * runtimed's: `logs()`, then what the server writes next, as it comes: text chunks (not
   * lines), until the server is removed, `signal` aborts or the loop stops (`break`).
   * `timeoutMs` bounds the start only.
   */
  async *followLogs(name: string, options: RequestOptions = {}): AsyncGenerator<string> {
    const decoder = new TextDecoder();
    for await (const chunk of this.sbx.runtime.transport.stream(
      { method: 'GET', path: this.sbx.path(`/mcp/${enc(name)}/logs`), query: { follow: 1 }, ...options })) {
      const text = decoder.decode(chunk, { stream: true });
      if (text) yield text;
    }
  }
}

/** @deprecated withruntime 0.1's name of {@link SandboxMcp}. */
export const Mcp = SandboxMcp;

/** The gateway answer, or McpServerError for its first server that is not serving. */
function settled(g: McpGateway): McpGateway {
  const bad = g.servers.find((s) => s.status === 'failed' && s.phase !== 'stopped');
  if (bad) throw new McpServerError(bad.name, bad.phase, bad.error ?? bad.message ?? '', g);
  return g;
}

/** `runtime.mcp`: the catalog of MCP servers a sandbox can run. */
export class McpCatalog {
  constructor(private readonly transport: Transport) {}

  async catalog(options: RequestOptions = {}): Promise<McpCatalogEntry[]> {
    return (await this.transport.json<{ data: McpCatalogEntry[] }>({ method: 'GET', path: '/v1/mcp/catalog', ...options })).data;
  }
}

/** @deprecated withruntime 0.1's name of {@link McpCatalog}. */
export const Catalog = McpCatalog;

/**
 * `runtime.secrets`: values sandboxes use without seeing them. Every sandbox has an
 * environment variable of the secret's name (or `env`) holding a placeholder; the egress
 * proxy puts the value into HTTPS requests to `hosts`.
 */
export class Secrets {
  constructor(private readonly transport: Transport) {}

  /** Stores or replaces a secret (replacing keeps its placeholder). */
  async set(name: string, input: SetSecret, options: RequestOptions = {}): Promise<Secret & { enforced?: boolean }> {
    if (!input.hosts?.length) {
      throw new InvalidRequestError({
        message: 'Say where the value may go: hosts, e.g. ["api.github.com"].', code: 'invalid_request', status: 0,
        details: { field: 'hosts' },
      });
    }
    return this.transport.json({ method: 'PUT', path: `/v1/egress-secrets/${enc(name)}`, json: input, ...options });
  }

  /** Names, hosts and placeholders, never values: every page (or the one `limit`/`after` name). */
  async list(query: { limit?: number; after?: string } = {}, options: RequestOptions = {}): Promise<Secret[]> {
    const all: Secret[] = [];
    let after = query.after;
    for (;;) {
      const page = await this.transport.json<{ secrets: Secret[]; next?: string | null }>(
        { method: 'GET', path: '/v1/egress-secrets', query: { limit: query.limit, after }, ...options });
      all.push(...page.secrets);
      if (query.limit !== undefined || query.after !== undefined || !page.next) return all;
      after = page.next;
    }
  }

  /**
   * Deletes a secret: its value is erased and its placeholder stops working. A secret
   * that does not exist is a NotFoundError. (runtimed has no jobs copies of secrets.)
   */
  async delete(name: string, options: RequestOptions = {}): Promise<DeletedSecret> {
    const removed = await this.transport.json<{ enforced?: boolean } | undefined>(
      { method: 'DELETE', path: `/v1/egress-secrets/${enc(name)}`, ...options });
    return { name, deleted: true, enforced: removed?.enforced ?? true, from: ['sandboxes'] };
  }
}

/**
 * runtimed's `runtime.accounts` (admin key only; an account's key gets
 * PermissionDeniedError): accounts, each with its own API key and limits. A Runtime made
 * with an account's key sees and changes only that account's sandboxes and secrets.
 */
export class Accounts {
  constructor(private readonly transport: Transport) {}

  /** Creates an account; the answer's `apiKey` is shown only this once. Limits left out are none. */
  create(account: AccountOptions, options: RequestOptions = {}): Promise<AccountCreated> {
    return this.transport.json({ method: 'POST', path: '/v1/accounts', json: account, ...options });
  }

  /** Every account (the admin's own, default, aside), oldest first; never a key. */
  list(options: RequestOptions = {}): Promise<AccountInfo[]> {
    return this.transport.json({ method: 'GET', path: '/v1/accounts', ...options });
  }

  /** A new API key, shown only this once; the one before keeps working until the next rotation. */
  rotateKey(name: string, options: RequestOptions = {}): Promise<AccountKey> {
    return this.transport.json({ method: 'POST', path: `/v1/accounts/${enc(name)}/keys`, ...options });
  }

  /** Removes the account with its sandboxes, secrets and usage, then its keys. `missingOk` makes a 404 done. */
  async delete(name: string, options: RequestOptions & { missingOk?: boolean } = {}): Promise<void> {
    const { missingOk, ...call } = options;
    try {
      await this.transport.send({
        method: 'DELETE', path: `/v1/accounts/${enc(name)}`,
        ...call, timeoutMs: call.timeoutMs ?? Math.max(this.transport.config.timeoutMs, 120_000),
      });
    } catch (e) {
      if (!(missingOk && e instanceof NotFoundError)) throw e;
    }
  }
}
