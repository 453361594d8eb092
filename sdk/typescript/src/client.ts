/**
 * The client: a {@link Runtime} (one daemon, one key) and the {@link Sandbox}
 * handles it returns. Every method is one API call, except `mcp.ready()`,
 * which long-polls until the servers have settled.
 */
import { apiKeyFromEnv, apiUrlFromEnv } from './config.js';
import { CommandError, McpServerError, NotFoundError, RuntimeError, TimeoutError } from './errors.js';
import { Transport, type CallOptions, type FetchLike, type Request } from './transport.js';
import type {
  AccountCreated, AccountInfo, AccountKey, AccountOptions, CatalogEntry, ExecResult, McpGateway, McpServerSpec, NetworkAnswer, NetworkPolicy,
  SandboxEvent, SandboxInfo, SandboxOptions, SecretInfo, SecretOptions, Usage,
} from './types.js';

export interface RuntimeOptions {
  /** The daemon's HTTP API; default RUNTIME_API_URL, else http://127.0.0.1:7070. */
  apiUrl?: string;
  /** Default RUNTIME_API_KEY, else STATE/admin.key (RUNTIME_STATE_DIR or /var/lib/runtime). */
  apiKey?: string;
  /** The fetch to call (tests, proxies, instrumentation); default the global one. */
  fetch?: FetchLike;
  /** Time-out of each call unless the call gives its own; default 60 000 ms. */
  timeoutMs?: number;
  /** Retries of a safe call (refused connection; 429/503 on GET, PUT, DELETE); default 2. */
  maxRetries?: number;
}

export interface ExecOptions extends CallOptions {
  /** Throw a {@link CommandError} unless the command exits 0 (default false). */
  check?: boolean;
  env?: Record<string, string>;
  /** Default /workspace. */
  cwd?: string;
  /** Text written to the command's standard input. */
  stdin?: string;
}

export interface ReadyOptions extends CallOptions {
  /** Throw {@link McpServerError} when a server ends `failed` or `refused` (default true). */
  throwOnFailure?: boolean;
}

const DEFAULT_TIMEOUT_MS = 60_000;
/** Extra time an HTTP call gets beyond the work the daemon was told to bound itself. */
const SLACK_MS = 15_000;
/** The longest single long poll of mcp.ready(); it asks again until its own deadline. */
const POLL_SECONDS = 60;
const DEFAULT_READY_MS = 300_000;

const enc = encodeURIComponent;

/** One daemon and one API key. */
export class Runtime {
  readonly apiUrl: string;
  readonly sandboxes: Sandboxes;
  readonly secrets: Secrets;
  readonly mcp: Catalog;
  readonly accounts: Accounts;
  /** @internal */
  readonly transport: Transport;

  private static shared: Runtime | undefined;

  constructor(options: RuntimeOptions = {}) {
    const { key, problem } = apiKeyFromEnv(options.apiKey);
    const fetchFn = options.fetch ?? globalThis.fetch?.bind(globalThis);
    if (!fetchFn) throw new RuntimeError('no fetch: use Node 20 or later, or pass { fetch }', { code: 'no_fetch' });
    this.apiUrl = apiUrlFromEnv(options.apiUrl);
    this.transport = new Transport({
      apiUrl: this.apiUrl, apiKey: key, keyProblem: problem, fetch: fetchFn,
      timeoutMs: options.timeoutMs ?? DEFAULT_TIMEOUT_MS, maxRetries: options.maxRetries ?? 2,
    });
    this.sandboxes = new Sandboxes(this);
    this.secrets = new Secrets(this.transport);
    this.mcp = new Catalog(this.transport);
    this.accounts = new Accounts(this.transport);
  }

  /** The Runtime the static `Sandbox.*` methods use: made from the environment on first use. */
  static default(): Runtime {
    Runtime.shared ??= new Runtime();
    return Runtime.shared;
  }

  /** What each sandbox used and cost (`GET /v1/usage`). */
  usage(options: CallOptions = {}): Promise<Usage> {
    return this.transport.json({ method: 'GET', path: '/v1/usage', ...options });
  }
}

/** `runtime.sandboxes`: create, find and remove sandboxes. */
export class Sandboxes {
  constructor(private readonly runtime: Runtime) {}

  /** Creates a sandbox (`POST /v1/sandboxes`); a taken name throws ConflictError. */
  async create(options: SandboxOptions = {}, call: CallOptions = {}): Promise<Sandbox> {
    return this.post({ ...options }, call);
  }

  /** The sandbox of that name, created with `options` when there is none. */
  async getOrCreate(name: string, options: SandboxOptions = {}, call: CallOptions = {}): Promise<Sandbox> {
    return this.post({ ...options, name, getOrCreate: true }, call);
  }

  /** A sandbox by id or name; NotFoundError when there is none. */
  async get(idOrName: string, call: CallOptions = {}): Promise<Sandbox> {
    const info = await this.runtime.transport.json<SandboxInfo>(
      { method: 'GET', path: `/v1/sandboxes/${enc(idOrName)}`, ...call });
    return new Sandbox(this.runtime, info);
  }

  /** Every sandbox, oldest first (every page); `labels` keeps those with all of these labels. */
  async list(filter: { labels?: Record<string, string> } = {}, call: CallOptions = {}): Promise<Sandbox[]> {
    const labels = Object.entries(filter.labels ?? {}).map(([k, v]) => `${k}:${v}`);
    const qs = labels.map((l) => `label=${enc(l)}`).join('&');
    const all: Sandbox[] = [];
    for (let cursor: string | null = null, first = true; first || cursor; first = false) {
      const page: { data: SandboxInfo[]; nextCursor: string | null } = await this.runtime.transport.json(
        { method: 'GET', path: `/v1/sandboxes?${[qs, cursor ? `cursor=${enc(cursor)}` : ''].filter(Boolean).join('&')}`, ...call });
      all.push(...page.data.map((i) => new Sandbox(this.runtime, i)));
      cursor = page.nextCursor;
    }
    return all;
  }

  /** Removes a sandbox and its workspace; `missingOk` makes a 404 count as done. */
  async delete(idOrName: string, options: CallOptions & { missingOk?: boolean } = {}): Promise<void> {
    const { missingOk, ...call } = options;
    try {
      await this.runtime.transport.send({ method: 'DELETE', path: `/v1/sandboxes/${enc(idOrName)}`, ...call });
    } catch (e) {
      if (!(missingOk && e instanceof NotFoundError)) throw e;
    }
  }

  private async post(body: Record<string, unknown>, call: CallOptions): Promise<Sandbox> {
    // Creating builds a root filesystem and a disk image: allow more than a plain call.
    const info = await this.runtime.transport.json<SandboxInfo>({
      method: 'POST', path: '/v1/sandboxes', json: body,
      ...call, timeoutMs: call.timeoutMs ?? Math.max(this.runtime.transport.config.timeoutMs, 120_000),
    });
    return new Sandbox(this.runtime, info);
  }
}

/**
 * A sandbox. `info` is what the API last said about it; `refresh()` asks again.
 * `await using sbx = await Sandbox.create()` deletes it when the scope ends.
 */
export class Sandbox implements AsyncDisposable {
  readonly files: Files;
  readonly network: Network;
  readonly mcp: Mcp;
  info: SandboxInfo;

  constructor(readonly runtime: Runtime, info: SandboxInfo) {
    this.info = info;
    this.files = new Files(this);
    this.network = new Network(this);
    this.mcp = new Mcp(this);
  }

  /** Creates a sandbox on the default Runtime (from the environment). */
  static create(options: SandboxOptions = {}, call: CallOptions = {}): Promise<Sandbox> {
    return Runtime.default().sandboxes.create(options, call);
  }

  /** The sandbox of that name on the default Runtime, created when there is none. */
  static getOrCreate(name: string, options: SandboxOptions = {}, call: CallOptions = {}): Promise<Sandbox> {
    return Runtime.default().sandboxes.getOrCreate(name, options, call);
  }

  /** A sandbox by id or name on the default Runtime. */
  static get(idOrName: string, call: CallOptions = {}): Promise<Sandbox> {
    return Runtime.default().sandboxes.get(idOrName, call);
  }

  get id(): string {
    return this.info.id;
  }

  get name(): string | undefined {
    return this.info.name ?? undefined;
  }

  get status(): SandboxInfo['status'] {
    return this.info.status;
  }

  /** @internal The API path of this sandbox, plus `sub`. */
  path(sub = ''): string {
    return `/v1/sandboxes/${enc(this.info.id)}${sub}`;
  }

  /** @internal */
  call<T>(req: Request): Promise<T> {
    return this.runtime.transport.json<T>(req);
  }

  /** Asks the API for this sandbox again and updates `info`. */
  async refresh(call: CallOptions = {}): Promise<SandboxInfo> {
    this.info = await this.call<SandboxInfo>({ method: 'GET', path: this.path(), ...call });
    return this.info;
  }

  /**
   * Runs argv (no shell) and returns its output. The command's own time-out is
   * `timeoutMs` (the daemon kills it and says `timedOut`); the HTTP call waits
   * that long plus a margin.
   */
  async exec(argv: string[], options: ExecOptions = {}): Promise<ExecResult> {
    const { check, env, cwd, stdin, timeoutMs, signal } = options;
    const r = await this.call<ExecResult>({
      method: 'POST', path: this.path('/exec'), json: { argv, env, cwd, stdin, timeoutMs }, signal,
      timeoutMs: Math.max(this.runtime.transport.config.timeoutMs, (timeoutMs ?? DEFAULT_TIMEOUT_MS) + SLACK_MS),
    });
    if (check && (r.exitCode !== 0 || r.timedOut)) throw new CommandError(argv, r);
    return r;
  }

  /** Freezes the sandbox; it wakes on the next exec, file or gateway request. */
  async pause(call: CallOptions = {}): Promise<SandboxInfo> {
    this.info = await this.call<SandboxInfo>({ method: 'POST', path: this.path('/pause'), ...call });
    return this.info;
  }

  async resume(call: CallOptions = {}): Promise<SandboxInfo> {
    this.info = await this.call<SandboxInfo>({ method: 'POST', path: this.path('/resume'), ...call });
    return this.info;
  }

  /** Events after seq `after` (0: from the start), oldest first. */
  events(options: CallOptions & { after?: number } = {}): Promise<SandboxEvent[]> {
    const { after, ...call } = options;
    return this.call({ method: 'GET', path: this.path('/events'), query: { after }, ...call });
  }

  /** Removes the sandbox and its workspace; `missingOk` makes a 404 count as done. */
  delete(options: CallOptions & { missingOk?: boolean } = {}): Promise<void> {
    return this.runtime.sandboxes.delete(this.info.id, options);
  }

  /** `await using`: delete at the end of the scope; already gone is fine. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.delete({ missingOk: true });
  }

  toJSON(): SandboxInfo {
    return this.info;
  }
}

/** `sbx.files`: whole files in and out (relative paths are under /workspace). */
export class Files {
  constructor(private readonly sbx: Sandbox) {}

  /** The file's bytes. */
  async read(path: string, call: CallOptions = {}): Promise<Uint8Array> {
    return (await this.readWithMode(path, call)).data;
  }

  /** The file as UTF-8 text. */
  async readText(path: string, call: CallOptions = {}): Promise<string> {
    return new TextDecoder().decode(await this.read(path, call));
  }

  /** The file's bytes and permission bits (e.g. 0o755). */
  async readWithMode(path: string, call: CallOptions = {}): Promise<{ data: Uint8Array; mode: number }> {
    const a = await this.sbx.runtime.transport.send(
      { method: 'GET', path: this.sbx.path('/files'), query: { path }, ...call });
    return { data: a.body, mode: parseInt(a.headers.get('x-file-mode') ?? '644', 8) };
  }

  /** Writes (creates or replaces) a file; `mode` is permission bits, e.g. 0o755 or "0755". */
  async write(path: string, data: string | Uint8Array, options: CallOptions & { mode?: number | string } = {}): Promise<void> {
    const { mode, ...call } = options;
    const m = typeof mode === 'number' ? mode.toString(8).padStart(4, '0') : mode;
    await this.sbx.runtime.transport.send(
      { method: 'PUT', path: this.sbx.path('/files'), query: { path, mode: m }, bytes: data, ...call });
  }
}

/** `sbx.network`: the sandbox's egress policy. */
export class Network {
  constructor(private readonly sbx: Sandbox) {}

  /** The policy in force (`GET .../network`); no `allow`: any public host. */
  get(call: CallOptions = {}): Promise<NetworkAnswer> {
    return this.sbx.call<NetworkAnswer>({ method: 'GET', path: this.sbx.path('/network'), ...call });
  }

  /**
   * Replaces the policy; it takes effect at once, also on open connections.
   * `allow` left out: any public host; `allow: []`: no host; a list: only those hosts.
   * The hosts of the sandbox's catalog MCP servers are reachable in every case, and
   * `internet: false` leaves only them.
   */
  async set(policy: Partial<NetworkPolicy>, call: CallOptions = {}): Promise<NetworkAnswer> {
    const net = await this.sbx.call<NetworkAnswer>(
      { method: 'PUT', path: this.sbx.path('/network'), json: policy, ...call });
    const { openPorts: _, ...settings } = net;
    this.sbx.info = { ...this.sbx.info, network: settings };
    return net;
  }
}

/** `sbx.mcp`: the sandbox's MCP servers and their gateway URLs. */
export class Mcp {
  constructor(private readonly sbx: Sandbox) {}

  /** Starts servers (catalog ids or your own commands); they install in the background. */
  start(servers: McpServerSpec | McpServerSpec[], call: CallOptions = {}): Promise<unknown> {
    const list = Array.isArray(servers) ? servers : [servers];
    return this.sbx.call({ method: 'POST', path: this.sbx.path('/mcp'), json: { servers: list }, ...call });
  }

  /** Each server's status and URL, and the Authorization header, now. */
  status(call: CallOptions = {}): Promise<McpGateway> {
    return this.sbx.call({ method: 'GET', path: this.sbx.path('/mcp'), ...call });
  }

  /**
   * Waits while servers install or start (a long poll, asked again until the
   * deadline, default 5 minutes), then returns what `status()` returns. A server
   * that ends `failed` or `refused` throws {@link McpServerError} unless
   * `throwOnFailure: false`; then check each server's `status` yourself.
   */
  async ready(options: ReadyOptions = {}): Promise<McpGateway> {
    const { throwOnFailure = true, signal } = options;
    const total = options.timeoutMs ?? DEFAULT_READY_MS;
    const deadline = Date.now() + total;
    for (;;) {
      const left = deadline - Date.now();
      const wait = Math.max(0, Math.min(POLL_SECONDS, Math.floor(left / 1000)));
      const g = await this.sbx.call<McpGateway>({
        method: 'GET', path: this.sbx.path('/mcp'), query: { wait }, signal, timeoutMs: wait * 1000 + SLACK_MS,
      });
      const pending = g.servers.filter((s) => s.status === 'installing');
      if (pending.length === 0) return throwOnFailure ? settled(g) : g;
      if (Date.now() >= deadline || wait === 0) {
        throw new TimeoutError(`MCP servers still not ready after ${total} ms: ` +
          pending.map((s) => `${s.name} is ${s.phase}`).join(', '), { code: 'timeout' });
      }
    }
  }

  /**
   * What the server wrote on stderr, and its install's output, oldest first. The daemon
   * keeps the last 64 KiB of each server, in memory; when older bytes were dropped, the
   * first line says how many.
   */
  async logs(name: string, call: CallOptions = {}): Promise<string> {
    const a = await this.sbx.runtime.transport.send(
      { method: 'GET', path: this.sbx.path(`/mcp/${enc(name)}/logs`), ...call });
    return new TextDecoder().decode(a.body);
  }

  /**
   * `logs()`, then what the server writes next, as it comes: text chunks (not lines),
   * until the server is removed, `signal` aborts or the loop stops (`break`).
   * `timeoutMs` bounds the start only.
   */
  async *followLogs(name: string, call: CallOptions = {}): AsyncGenerator<string> {
    const decoder = new TextDecoder();
    for await (const chunk of this.sbx.runtime.transport.stream(
      { method: 'GET', path: this.sbx.path(`/mcp/${enc(name)}/logs`), query: { follow: 1 }, ...call })) {
      const text = decoder.decode(chunk, { stream: true });
      if (text) yield text;
    }
  }

  /** Stops a server; its URL answers 503 until it is started again. */
  async stop(name: string, call: CallOptions = {}): Promise<void> {
    await this.sbx.runtime.transport.send({ method: 'DELETE', path: this.sbx.path(`/mcp/${enc(name)}`), ...call });
  }
}

/** The gateway answer, or McpServerError for its first failed or refused server. */
function settled(g: McpGateway): McpGateway {
  const bad = g.servers.find((s) => s.status === 'failed' && s.phase !== 'stopped');
  if (bad) throw new McpServerError(bad.name, bad.phase, bad.error ?? '', g);
  return g;
}

/** `runtime.mcp`: the catalog of pinned servers. */
export class Catalog {
  constructor(private readonly transport: Transport) {}

  async catalog(call: CallOptions = {}): Promise<CatalogEntry[]> {
    const page = await this.transport.json<{ data: CatalogEntry[] }>({ method: 'GET', path: '/v1/mcp/catalog', ...call });
    return page.data;
  }
}

/** `runtime.secrets`: sealed values that only reach their own hosts. */
export class Secrets {
  constructor(private readonly transport: Transport) {}

  /** Creates or replaces a secret. */
  set(name: string, secret: SecretOptions, call: CallOptions = {}): Promise<SecretInfo> {
    return this.transport.json({ method: 'PUT', path: `/v1/egress-secrets/${enc(name)}`, json: secret, ...call });
  }

  /** Every secret of the account, without values: each page's `next` followed. */
  async list(call: CallOptions = {}): Promise<SecretInfo[]> {
    const all: SecretInfo[] = [];
    let after: string | null = null;
    do {
      const query: string = after === null ? '' : `?after=${encodeURIComponent(after)}`;
      const page: { secrets: SecretInfo[]; next: string | null } =
        await this.transport.json({ method: 'GET', path: `/v1/egress-secrets${query}`, ...call });
      all.push(...page.secrets);
      after = page.next;
    } while (after);
    return all;
  }

  async delete(name: string, call: CallOptions = {}): Promise<void> {
    await this.transport.send({ method: 'DELETE', path: `/v1/egress-secrets/${enc(name)}`, ...call });
  }
}

/**
 * `runtime.accounts` (admin key only; an account's key gets ForbiddenError): accounts,
 * each with its own API key and limits. A Runtime made with an account's key
 * (`new Runtime({ apiKey })`) sees and changes only that account's sandboxes and secrets.
 */
export class Accounts {
  constructor(private readonly transport: Transport) {}

  /**
   * Creates an account; the answer's `apiKey` is shown only this once. A taken name
   * throws ConflictError. Limits left out are none.
   */
  create(account: AccountOptions, call: CallOptions = {}): Promise<AccountCreated> {
    return this.transport.json({ method: 'POST', path: '/v1/accounts', json: account, ...call });
  }

  /** Every account (the admin's own, default, aside), oldest first; never a key. */
  list(call: CallOptions = {}): Promise<AccountInfo[]> {
    return this.transport.json({ method: 'GET', path: '/v1/accounts', ...call });
  }

  /**
   * A new API key for the account, shown only this once. The key before it keeps working
   * until the next rotation; older ones stop now.
   */
  rotateKey(name: string, call: CallOptions = {}): Promise<AccountKey> {
    return this.transport.json({ method: 'POST', path: `/v1/accounts/${enc(name)}/keys`, ...call });
  }

  /**
   * Removes the account with its sandboxes, secrets and usage, then its keys; resolves
   * once they are gone. `missingOk` makes a 404 count as done.
   */
  async delete(name: string, options: CallOptions & { missingOk?: boolean } = {}): Promise<void> {
    const { missingOk, ...call } = options;
    try {
      // Removal waits for every sandbox of the account: allow what a create may take.
      await this.transport.send({
        method: 'DELETE', path: `/v1/accounts/${enc(name)}`,
        ...call, timeoutMs: call.timeoutMs ?? Math.max(this.transport.config.timeoutMs, 120_000),
      });
    } catch (e) {
      if (!(missingOk && e instanceof NotFoundError)) throw e;
    }
  }
}
