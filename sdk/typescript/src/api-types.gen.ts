// Generated from api/openapi.yaml (components.schemas) by sdk/scripts/gen-types.mjs: do not edit.
// Regenerate with `node sdk/scripts/gen-types.mjs` (sdk/typescript/test/types-gen.test.mjs checks it is current).
//
// These are the wire types, exactly as the document gives them: `?` marks a property that
// is not required, `| null` one that may be null. Objects that answers carry are open
// (`[more: string]: unknown`): the daemon may add fields, never rename them. The SDK's
// public names are in types.ts.

export interface FileWritten {
  path: string;
  size: number;
  [more: string]: unknown;
}

export interface UploadBegin {
  /** a file under /workspace */
  path: string;
  size: number;
  /** the whole file's */
  sha256: string;
  /** its permission bits (644 when left out) */
  mode?: string;
}

export interface Upload {
  uploadId: string;
  /** the size of every chunk but the last (1 MiB) */
  chunkBytes: number;
  path: string;
  size: number;
  /** the mode asked for: no chmod is needed after the commit */
  mode?: string;
  [more: string]: unknown;
}

export interface Error {
  error: ErrorError;
  [more: string]: unknown;
}

export interface ErrorError {
  code: ErrorCode;
  /** the answer's HTTP status */
  status: number;
  /** what is wrong and what to do */
  message: string;
  /** the answer's x-request-id; quote it when you report a problem */
  requestId: string;
  /**
   * more about the error: `issues` of a refused body, one {field, message} per
   * wrong field
   */
  details?: ErrorErrorDetails;
  [more: string]: unknown;
}

/**
 * more about the error: `issues` of a refused body, one {field, message} per
 * wrong field
 */
export interface ErrorErrorDetails {
  issues?: ErrorErrorDetailsIssuesItem[];
  /** feature_unavailable's: the fields runtimed cannot honour */
  fields?: string[];
  [more: string]: unknown;
}

export interface ErrorErrorDetailsIssuesItem {
  field: string;
  /** the unknown fields, when field is empty */
  fields?: string;
  message: string;
  [more: string]: unknown;
}

/**
 * Runtime Cloud's codes where it has one: 400 invalid_request (a body, query or field
 * that is wrong: the message names each), exec_failed; 401 unauthorized; 403
 * forbidden, read_only, permission_denied; 404 not_found, route_not_found,
 * file_not_found; 405 method_not_allowed; 409 name_taken, sandbox_stopped (a request
 * that needs it running), sandbox_not_ready (being created or started), conflict,
 * busy (a sandbox being created or removed, or the first request with an
 * Idempotency-Key still under way), is_a_directory, not_a_directory, file_exists,
 * not_empty, upload_incomplete (a commit before every chunk came); 413 too_large;
 * 501 feature_unavailable (a field of Runtime Cloud's runtimed cannot honour, named);
 * 422 idempotency_key_reused (the key came with another request); 429 limit_reached,
 * rate_limited (too many tries a moment ago: failed dashboard sign-ins, Retry-After says when; login requests waiting for approval);
 * 500 internal_error; 501 unavailable (what Runtime Cloud serves and a self-hosted
 * daemon does not); 503 unavailable (the daemon is stopping); 507 disk_full.
 */
export type ErrorCode =
  | 'invalid_request'
  | 'exec_failed'
  | 'unauthorized'
  | 'forbidden'
  | 'read_only'
  | 'permission_denied'
  | 'not_found'
  | 'route_not_found'
  | 'file_not_found'
  | 'method_not_allowed'
  | 'name_taken'
  | 'sandbox_stopped'
  | 'sandbox_not_ready'
  | 'conflict'
  | 'busy'
  | 'is_a_directory'
  | 'not_a_directory'
  | 'file_exists'
  | 'not_empty'
  | 'upload_incomplete'
  | 'too_large'
  | 'idempotency_key_reused'
  | 'limit_reached'
  | 'rate_limited'
  | 'internal_error'
  | 'unavailable'
  | 'feature_unavailable'
  | 'disk_full';

export interface FileEntry {
  name: string;
  /** absolute */
  path: string;
  type: 'file' | 'directory' | 'symlink' | 'other';
  size: number;
  /** permission bits in octal, e.g. "644" */
  mode: string;
  /** UTC, to the millisecond */
  modifiedAt: string;
  /** as the sandbox sees it (65534 for a host owner) */
  uid: number;
  gid: number;
  /** root, user, nobody, or the uid */
  owner: string;
  /** root, user, nogroup, or the gid */
  group: string;
  /** the target a symlink names */
  symlinkTarget?: string;
  [more: string]: unknown;
}

export interface FileList {
  data: FileEntry[];
  /** there were more than limit (or too many to look at) */
  truncated: boolean;
  [more: string]: unknown;
}

/** a FileEntry with exists true, or only exists false and the path asked about */
export interface FileStat {
  exists: boolean;
  name?: string;
  path: string;
  type?: 'file' | 'directory' | 'symlink' | 'other';
  size?: number;
  mode?: string;
  modifiedAt?: string;
  uid?: number;
  gid?: number;
  owner?: string;
  group?: string;
  symlinkTarget?: string;
  [more: string]: unknown;
}

export interface ConnectRequest {
  userCode: string;
  agentName: string;
  machine: string;
  /** the requesting client (IPv4, or the /64 of IPv6) */
  address: string;
  createdAt: Time;
  expiresAt: Time;
  status: 'pending' | 'approved' | 'denied' | 'expired';
  /** the machine has received and saved its key */
  confirmed: boolean;
  account?: string;
  connectionId?: string;
  [more: string]: unknown;
}

export interface Connection {
  id: string;
  agentName: string;
  machine: string;
  createdAt: Time;
  lastUsedAt: Time | null;
  [more: string]: unknown;
}

/** RFC 3339, UTC */
export type Time = string;

export type StringMap = Record<string, string>;

export interface Network {
  /** whether public addresses may be reached at all (private and metadata addresses never are) */
  internet: boolean;
  /**
   * the hosts allowed (names, *.suffix, addresses or CIDR ranges), besides those of the
   * sandbox's catalog MCP servers; empty: no host but those; absent: any public host
   */
  allow?: string[];
  /** hosts (names, *.suffix, addresses or CIDR ranges, with an optional :port) never reached */
  deny?: string[];
  /** host:port pairs reached beyond the allow list */
  connect?: string[];
  [more: string]: unknown;
}

/** the Network, and Runtime Cloud's openPorts */
export interface NetworkAnswer {
  internet: boolean;
  allow?: string[];
  deny?: string[];
  connect?: string[];
  /** Runtime Cloud's: true, as a runtimed sandbox reaches every port of a host it may reach */
  openPorts: boolean;
  [more: string]: unknown;
}

export interface NetworkInput {
  /** @default true */
  internet?: boolean;
  /**
   * absent or null: any public host; []: no host (but the sandbox's catalog MCP
   * servers' own); a list: only those hosts (and the catalog servers')
   */
  allow?: string[] | null;
  /** never reached, whatever allow says */
  deny?: string[] | null;
  /** host:port pairs reached beyond the allow list */
  connect?: string[] | null;
}

export interface SandboxCreate {
  /** unique; usable wherever an id is */
  name?: string | null;
  /** @default 1024 */
  memoryMiB?: number;
  /**
   * at most the host's online CPUs (more is refused with 400 naming both)
   * @default 1
   */
  cpus?: number;
  /** Runtime Cloud's name for cpus (both given, they must agree) */
  vcpu?: number;
  /** @default 2048 */
  diskMiB?: number;
  /**
   * pause it after this long without use; 0 never
   * @default 300
   */
  idlePauseSeconds?: number;
  /** a sandbox paused this long hibernates (gvisor: its memory to an image on disk, its processes ended; ns: its memory to the host's swap, where there is any), restored by the next request; 0 never; default the daemon's --hibernate-after (300) */
  hibernateAfterSeconds?: number;
  /** Runtime Cloud's lease: each run (created, woken, started again) may last this long, busy or not, then onLeaseEnd; null or absent: no lease. POST .../{id}:extend moves it later; endsAt in the answers says when it ends */
  timeoutSeconds?: number | null;
  /** @default "pause" */
  onLeaseEnd?: 'pause' | 'stop' | 'delete' | null;
  /**
   * keys are names (letters, digits, _ . -) or contain a '/' (under 128 bytes)
   * @default {}
   */
  labels?: Record<string, string>;
  /**
   * environment variables of every exec
   * @default {}
   */
  env?: Record<string, string>;
  /** @default {"internet":true} */
  network?: NetworkInput;
  /** runtimed's own (Runtime Cloud always gives a microVM): the isolation driver that builds and runs it, fixed at its create. Absent or null: the daemon's --driver. A driver this daemon lacks (runsc not installed) is refused with 501 feature_unavailable saying why */
  isolation?: Isolation | null;
  /**
   * when a sandbox of this name exists, answer it (200, reused: true), woken if paused and started again if stopped, instead of 409
   * @default false
   */
  getOrCreate?: boolean;
}

export interface SandboxUpdate {
  name?: string | null;
  labels?: Record<string, string> | null;
  /** a value sets a variable, null removes it; the others stay */
  env?: Record<string, string | null> | null;
  idlePauseSeconds?: number | null;
  hibernateAfterSeconds?: number | null;
  /** fixed at create: only the sandbox's own is accepted (another is 400 invalid_request); to change it, create a new sandbox */
  isolation?: Isolation | null;
  /** true (or null) only */
  autoWake?: boolean | null;
  /** true (or null) only */
  persistent?: boolean | null;
  maxTotalCostMicros?: null;
  tailscale?: null;
  user?: null;
}

/**
 * How a sandbox is isolated from the host and from the others:
 * - `ns`: Linux namespaces (user, mount, pid, network, ipc, uts, cgroup), a seccomp
 *   deny-list and cgroup limits. It shares the host's kernel and starts in
 *   milliseconds.
 * - `gvisor`: gVisor's runsc, a kernel of its own in user space between the
 *   sandbox's programs and the host's kernel, which they never call directly. It
 *   starts in about 100-200 ms and costs about 20 MiB more when idle.
 */
export type Isolation = 'ns' | 'gvisor';

/** hibernated: its memory is an image on disk and nothing runs (its state is paused, Runtime Cloud's word); the next request restores it (docs/hibernation.md) */
export type SandboxStatus = 'creating' | 'running' | 'paused' | 'stopped' | 'failed' | 'hibernated';

export interface Sandbox {
  id: string;
  /** whose it is (the admin reaches every account's by id) */
  account?: string;
  name: string | null;
  status: SandboxStatus;
  /** Runtime Cloud's word for where it is (what its SDKs read and wait on); a sandbox that failed is stopped */
  state: 'starting' | 'running' | 'pausing' | 'paused' | 'resuming' | 'stopping' | 'stopped';
  createdAt: Time;
  /** why a stopping or stopped sandbox stopped, as its sandbox.stopped event says: api (a stop asked for), lease (its lease ended with onLeaseEnd stop), init process exited, out of memory (it then starts again by itself); null while it runs, and for one stopped before the daemon last started */
  stopReason?: string | null;
  /** this is the answer to an earlier request with the same Idempotency-Key */
  replayed?: boolean;
  /** only in getOrCreate's answer when the name was taken: that sandbox, woken if it was paused and started again if it was stopped */
  reused?: boolean;
  memoryMiB: number;
  cpus: number;
  /** cpus, under Runtime Cloud's name */
  vcpu?: number;
  diskMiB: number;
  idlePauseSeconds: number;
  /** a sandbox paused this long hibernates; 0 never */
  hibernateAfterSeconds?: number;
  /** the lease of each run; null: none */
  timeoutSeconds?: number | null;
  onLeaseEnd?: 'pause' | 'stop' | 'delete';
  endsAt?: Time;
  labels: StringMap;
  env: StringMap;
  network: Network;
  /** the isolation driver it was created with: the one asked for, or the daemon's --driver then; a sandbox made before there was a choice is ns */
  isolation: Isolation;
  /** present once MCP servers were started in it */
  mcp?: SandboxMcp;
  [more: string]: unknown;
}

/** present once MCP servers were started in it */
export interface SandboxMcp {
  servers: McpServer[];
  [more: string]: unknown;
}

/** argv or command, one of them */
export interface ExecRequest {
  /** the program and its arguments (no shell) */
  argv?: string[];
  /** a command line, run by bash -c (Runtime Cloud's form); not with argv */
  command?: string;
  /**
   * added to the sandbox's env
   * @default {}
   */
  env?: Record<string, string>;
  /** @default "/workspace" */
  cwd?: string;
  /** given to the program on its standard input */
  stdin?: string | null;
  /** its standard input as base64 (not with stdin) */
  stdinBase64?: string;
  /** @default 60000 */
  timeoutMs?: number;
  /**
   * true: the answer is application/x-ndjson, one event a line while it runs: {type: start, processId}, {type: stdout|stderr, offset, data, base64?} (offset counts the bytes of both streams together; base64 when data is not the bytes as UTF-8), then {type: exit, exitCode, state, timedOut, durationMs} or {type: error, error}. No output limit; a reader that leaves (or leaves 16 MiB unread) ends the program.
   * @default false
   */
  stream?: boolean;
}

export interface ExecResult {
  /** the answer to an earlier request with the same Idempotency-Key */
  replayed?: boolean;
  /** its exit status; null when a signal or the timeout ended it (Runtime Cloud's) */
  exitCode: number | null;
  state: 'exited' | 'killed' | 'timed_out';
  /** runtimed's: the signal that ended it (SIGKILL), when one did */
  signal?: string;
  /** at most 1 MiB, then a note of what was dropped; invalid UTF-8 becomes U+FFFD */
  stdout: string;
  stderr: string;
  /** output was dropped past 1 MiB */
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
  timedOut: boolean;
  durationMs: number;
  [more: string]: unknown;
}

/** a tool-list fingerprint (docs/gateway.md, "The fingerprint"), 16 to 64 hex digits */
export type Fingerprint = string;

/**
 * one process for all clients, or one per client session
 * @default "shared"
 */
export type McpIsolation = 'shared' | 'session';

export interface McpCatalogServerStart {
  /** a catalog entry's id */
  id: string;
  /** defaults to the id */
  name?: string;
  /**
   * {ENV: SECRET}: the secret SECRET as variable ENV
   * @default {}
   */
  secrets?: Record<string, string>;
  /** @default {} */
  env?: Record<string, string>;
  /** @default [] */
  args?: string[];
  fingerprint?: Fingerprint | null;
  isolation?: McpIsolation;
  tools?: McpTools;
}

/**
 * the only tools of the server that clients see (tools/list) and may call; a call
 * to any other is refused (mcp.refused). Absent: all of them. The fingerprint
 * gate judges the whole list the server offers either way.
 */
export type McpTools = string[];

export interface McpCustomServerStart {
  name: string;
  /** the stdio server's argv */
  command: string[];
  /** @default {} */
  secrets?: Record<string, string>;
  /** @default {} */
  env?: Record<string, string>;
  /** @default [] */
  args?: string[];
  fingerprint?: Fingerprint | null;
  isolation?: McpIsolation;
  tools?: McpTools;
}

export interface McpStartRequest {
  servers: (McpCatalogServerStart | McpCustomServerStart)[];
  /** the servers not listed stop; listed ones running with other settings start again with these */
  replace?: boolean;
  /** Runtime Cloud's URLs that never expire and are guarded by the headers alone: runtimed's always are */
  public?: boolean;
  /** Runtime Cloud's in-sandbox gateway port: runtimed's gateway is its own listener; leave it out */
  port?: null;
}

/** Runtime Cloud's word (its SDKs' ready() waits while one is installing) */
export type McpServerStatus = 'installing' | 'ready' | 'failed';

/**
 * runtimed's finer word: installing and starting are both Runtime Cloud's
 * installing; failed, refused (its tools are not the reviewed ones) and stopped
 * are its failed
 */
export type McpServerPhase = 'installing' | 'starting' | 'ready' | 'failed' | 'refused' | 'stopped';

export interface McpServer {
  name: string;
  /** the catalog id, for a catalog server */
  id?: string;
  status: McpServerStatus;
  phase: McpServerPhase;
  /** why it is not serving (its error, or that it was stopped); null when it is */
  message: string | null;
  /** its gateway URL: {publicUrl}/mcp/{link}/{name} */
  url: string;
  /** of the tool list it serves (null before it was seen) */
  fingerprint: string | null;
  /** the fingerprint approved for it (given, from the catalog, or first seen) */
  approved?: string;
  /** the names of the tools clients see (none from a failed or refused server) */
  tools: string[];
  warnings: string[];
  /** why it failed or was refused, or what it is doing */
  error?: string;
  /** how long it has been in its phase, in whole seconds */
  statusSeconds: number;
  /** a catalog server's package, as its install names it */
  package?: McpServerPackage;
  [more: string]: unknown;
}

/** a catalog server's package, as its install names it */
export interface McpServerPackage {
  manager: 'npm' | 'pip';
  name: string;
  version: string;
  [more: string]: unknown;
}

/** Runtime Cloud's gateway answer, with runtimed's fields on each server */
export interface McpStatus {
  /** a server is installing, starting or ready */
  running: boolean;
  /** Runtime Cloud's in-sandbox gateway port; runtimed's gateway is its own listener */
  port: null;
  /** the gateway token (the bearer of headers.Authorization) */
  token?: string;
  servers: McpServer[];
  /** the headers a gateway client sends, names to values (empty before the first start) */
  headers: McpStatusHeaders;
  /** every server's warnings, each as "NAME: warning" */
  warnings: string[];
  [more: string]: unknown;
}

/** the headers a gateway client sends, names to values (empty before the first start) */
export type McpStatusHeaders = {
  Authorization?: string;
} & Record<string, string>;

export interface McpStopAll {
  /** a server was running */
  stopped: boolean;
  [more: string]: unknown;
}

export interface CatalogSetting {
  /** the variable */
  env: string;
  /** whether to pass it as a secret */
  secret?: boolean;
  required?: boolean;
  description?: string;
  [more: string]: unknown;
}

export interface CatalogEntry {
  id: string;
  name: string;
  /** Runtime Cloud's name for name */
  title: string;
  /** the package's page at its version */
  source: string;
  /** the day the pinned versions were last reviewed */
  checked: string;
  /** Runtime Cloud's server options: no catalog server here takes one */
  options: Record<string, unknown>[];
  description: string;
  /** the npm or PyPI package */
  package: string;
  /** its exact version */
  version: string;
  runtime: 'node' | 'python';
  license: string;
  command: string[];
  /** the hosts it needs; allowed while it runs, whatever the sandbox's allow list or internet say */
  egress: string[];
  settings: CatalogSetting[];
  /** of the reviewed tool list, or null */
  fingerprint: string | null;
  /** Python servers: pinned requirement lines with hashes ("pkg==1.0 --hash=sha256:...") */
  lock?: string[];
  /** the settings in Runtime Cloud's form: a secret one lists the hosts its value may reach */
  env: CatalogEntryEnvItem[];
  /** variables set for the server's process (e.g. PATH); catalog/servers.json's env */
  serverEnv?: Record<string, string>;
  [more: string]: unknown;
}

export interface CatalogEntryEnvItem {
  name: string;
  description?: string;
  required: boolean;
  secret: boolean;
  hosts?: string[];
  [more: string]: unknown;
}

export interface SecretRule {
  /** absent, every method */
  methods?: string[];
  /** each exact (/issues) or a prefix ending in /* (/repos/acme/*) */
  paths: string[];
}

export interface SecretScope {
  /** a sandbox whose labels hold every pair of one of these maps */
  labels?: Record<string, string>[];
  /** sandbox ids */
  sandboxes?: string[];
}

export interface SecretInput {
  /** never shown again; visible ASCII and spaces, at most 8 KiB */
  value: string;
  /** the hosts (names, *.domain, or one address each) it may be sent to */
  hosts: string[];
  /** a field the proxy sets on every request the secret may go into, replacing the sandbox's */
  header?: string;
  /** the field's text, `{value}` where the value goes (needs header; default `{value}`) */
  format?: string;
  /** a request carries the value if any rule allows it; absent, every request */
  rules?: SecretRule[];
  only?: SecretScope;
  /** the variable sandboxes see the placeholder in (default the secret's name) */
  env?: string;
  /** runtimed's earlier form, one rule with paths; not with rules */
  methods?: string[];
  /** runtimed's earlier form, one rule with methods; not with rules */
  paths?: string[];
}

export interface Secret {
  name: string;
  hosts: string[];
  header?: string;
  format?: string;
  rules?: SecretRule[];
  only?: SecretScope;
  env: string;
  /**
   * the secret's own placeholder, kept when it is replaced; it becomes the value in
   * requests from the account's sandboxes (each sandbox also has its own, in env)
   */
  placeholder: string;
  createdAt: Time;
  updatedAt: Time;
  /**
   * the sandboxes that had its value swapped in, the latest first (at most 8; in the
   * daemon's memory, so empty after a restart until the next use)
   */
  usedBy?: SecretUsedByItem[];
  [more: string]: unknown;
}

export interface SecretUsedByItem {
  sandbox: string;
  at: Time;
  [more: string]: unknown;
}

export interface Cost {
  cpu: number;
  memory: number;
  paused: number;
  total: number;
  [more: string]: unknown;
}

export interface UsageRow {
  /** the sandbox's id */
  sandbox: string;
  /** the account it belongs to (default for the admin's) */
  account: string;
  name: string | null;
  status: 'creating' | 'running' | 'paused' | 'stopped' | 'failed' | 'removed' | 'hibernated';
  cpuSeconds: number;
  vcpuHours: number;
  runningHours: number;
  memoryGiBHours: number;
  pausedHours: number;
  pausedGBHours: number;
  storedGB: number;
  cost: Cost;
  [more: string]: unknown;
}

export interface Usage {
  sandboxes: UsageRow[];
  /** the totals of each account that has rows (the admin sees all, an account its own) */
  accounts: AccountUsage[];
  total: UsageTotal;
  rates: UsageRates;
  [more: string]: unknown;
}

export interface UsageRates {
  vcpuHour: number;
  gibHour: number;
  gbMonth: number;
  [more: string]: unknown;
}

export interface UsageTotal {
  cpuSeconds: number;
  vcpuHours: number;
  memoryGiBHours: number;
  pausedHours: number;
  pausedGBHours: number;
  cost: Cost;
  [more: string]: unknown;
}

export interface AccountUsage {
  account: string;
  total: UsageTotal;
  [more: string]: unknown;
}

export interface AccountOptions {
  /** 1-63 of a-z, 0-9, '-', '_', '.', starting with a letter or digit; not default */
  name: string;
  /** at most this many sandboxes at a time; left out or null, no limit but the daemon's */
  maxSandboxes?: number | null;
  /** at most this much memoryMiB over all its sandboxes; left out or null, no limit */
  maxMemoryMiB?: number | null;
}

export interface Account {
  name: string;
  createdAt: Time;
  /** its removal is under way (or was cut short; remove it again) */
  removing: boolean;
  /** its limit; null: none */
  maxSandboxes: number | null;
  /** its limit; null: none */
  maxMemoryMiB: number | null;
  /** how many sandboxes it has now */
  sandboxes: number;
  /** the memoryMiB of its sandboxes together */
  memoryMiB: number;
  [more: string]: unknown;
}

/** an Account and its API key, shown only in this answer */
export interface AccountCreated {
  name: string;
  createdAt: Time;
  removing: boolean;
  maxSandboxes: number | null;
  maxMemoryMiB: number | null;
  sandboxes: number;
  memoryMiB: number;
  /** the account's API key; the daemon keeps only its hash */
  apiKey: string;
  [more: string]: unknown;
}

export interface AccountKey {
  name: string;
  /** the new key, shown only in this answer */
  apiKey: string;
  [more: string]: unknown;
}

export interface McpToolList2 {
  fingerprint: string;
  tools: Record<string, unknown>[];
  [more: string]: unknown;
}

export type McpToolList = null | McpToolList2;

export interface McpReview {
  name: string;
  status: string;
  approved: McpToolList;
  current: McpToolList;
  /** current is a list not yet approved */
  pending: boolean;
  /** from approved to current; null when there is nothing to compare */
  changes: null | McpReviewChanges2;
  findings: McpReviewFindingsItem[];
  approvals: McpApproval[];
  [more: string]: unknown;
}

export interface McpReviewChanges2 {
  toolsAdded: string[];
  toolsRemoved: string[];
  paramsAdded: string[];
  paramsRemoved: string[];
  fieldsChanged: string[];
  descriptions: McpReviewChanges2DescriptionsItem[];
  [more: string]: unknown;
}

export interface McpReviewChanges2DescriptionsItem {
  tool: string;
  old?: string;
  new?: string;
  [more: string]: unknown;
}

export interface McpReviewFindingsItem {
  tool: string;
  /** e.g. get_forecast.inputSchema.properties.city.description */
  path: string;
  rule: 'speaks-to-model' | 'asks-to-hide' | 'names-secret-file' | 'url' | 'orders-calls' | 'invisible-characters' | 'direction-characters' | 'tag-text' | 'look-alike-name' | 'duplicate-tool' | 'duplicate-key';
  message: string;
  excerpt: string;
  /** the approved list had the same text there */
  reviewedBefore: boolean;
  [more: string]: unknown;
}

export interface McpApproval {
  /** admin or the account, and how: "(dashboard)" or "(API key)" */
  by: string;
  at: Time;
  /** the fingerprint approved before, if any */
  old: string | null;
  new: string;
  [more: string]: unknown;
}

export interface UsageSeries {
  stepSeconds: 60;
  /** how far back the series goes */
  minutes: number;
  points: UsageSeriesPointsItem[];
  [more: string]: unknown;
}

export interface UsageSeriesPointsItem {
  t: Time;
  vcpu: number;
  memoryMiB: number;
  pausedStorageMiB: number;
  costUsd: number;
  [more: string]: unknown;
}

export type EventSeq = number;

export type EventKind =
  | 'egress.refused'
  | 'egress.allowed'
  | 'egress.truncated'
  | 'limit.reached'
  | 'secret.used'
  | 'secret.misdirected'
  | 'secret.reflected'
  | 'mcp.installing'
  | 'mcp.installed'
  | 'mcp.starting'
  | 'mcp.template_saved'
  | 'mcp.template_restored'
  | 'mcp.template_failed'
  | 'mcp.ready'
  | 'mcp.failed'
  | 'mcp.refused'
  | 'mcp.approved'
  | 'mcp.exited'
  | 'mcp.stopped'
  | 'mcp.client_dropped'
  | 'sandbox.paused'
  | 'sandbox.resumed'
  | 'sandbox.exited'
  | 'sandbox.stopped'
  | 'sandbox.started'
  | 'sandbox.hibernated'
  | 'events.dropped';

/** one event; `kind` tells which fields it has */
export type Event =
  | EgressRefusedEvent
  | EgressAllowedEvent
  | EgressTruncatedEvent
  | LimitReachedEvent
  | SecretUsedEvent
  | SecretMisdirectedEvent
  | McpInstallingEvent
  | McpInstalledEvent
  | McpStartingEvent
  | McpTemplateSavedEvent
  | McpTemplateRestoredEvent
  | McpTemplateFailedEvent
  | SecretReflectedEvent
  | McpReadyEvent
  | McpFailedEvent
  | McpRefusedEvent
  | McpApprovedEvent
  | McpExitedEvent
  | McpStoppedEvent
  | McpClientDroppedEvent
  | SandboxPausedEvent
  | SandboxResumedEvent
  | SandboxExitedEvent
  | SandboxStoppedEvent
  | SandboxStartedEvent
  | SandboxHibernatedEvent
  | EventsDroppedEvent;

/** a connection or DNS query of the sandbox was refused */
export interface EgressRefusedEvent {
  seq: EventSeq;
  time: Time;
  kind: 'egress.refused';
  host: string;
  /** 0 for a DNS query */
  port: number;
  reason: string;
  /** where: dns, connect, request, ... */
  stage: string;
  [more: string]: unknown;
}

export interface EgressAllowedEvent {
  seq: EventSeq;
  time: Time;
  kind: 'egress.allowed';
  host: string;
  port: number;
  address: string;
  [more: string]: unknown;
}

/**
 * an intercepted upstream ended its connection in the middle of an answer (or before
 * answering a request it was sent): what it sent reached the sandbox, which saw the
 * connection end without a close_notify. A whole answer followed by the end of the
 * connection, with or without the upstream's close_notify, raises nothing.
 */
export interface EgressTruncatedEvent {
  seq: EventSeq;
  time: Time;
  kind: 'egress.truncated';
  host: string;
  port: number;
  reason: string;
  /** whether the upstream ended its TLS with a close_notify */
  closeNotify: boolean;
  [more: string]: unknown;
}

export interface LimitReachedEvent {
  seq: EventSeq;
  time: Time;
  kind: 'limit.reached';
  /** connections, connections_per_second, dns_tcp_connections, dns_queries_per_second, new_names_per_second, daemon_connections */
  resource: string;
  limit: number;
  [more: string]: unknown;
}

export interface SecretUsedEvent {
  seq: EventSeq;
  time: Time;
  kind: 'secret.used';
  secret: string;
  host: string;
  method: string;
  path: string;
  [more: string]: unknown;
}

/** a placeholder was sent where its secret may not go; it stayed a placeholder */
export interface SecretMisdirectedEvent {
  seq: EventSeq;
  time: Time;
  kind: 'secret.misdirected';
  /** null when the placeholder is not this sandbox's */
  secret: string | null;
  host: string;
  method?: string;
  path?: string;
  reason: string;
  [more: string]: unknown;
}

/** a catalog server's install began */
export interface McpInstallingEvent {
  seq: EventSeq;
  time: Time;
  kind: 'mcp.installing';
  server: string;
  manager: 'npm' | 'pip';
  package: string;
  version: string;
  [more: string]: unknown;
}

/** a catalog server's install ended well (it starts next) */
export interface McpInstalledEvent {
  seq: EventSeq;
  time: Time;
  kind: 'mcp.installed';
  server: string;
  manager: 'npm' | 'pip';
  package: string;
  version: string;
  /** how long the install took */
  seconds: number;
  [more: string]: unknown;
}

/** a process of the server is being started (restarts counts those after it ended) */
export interface McpStartingEvent {
  seq: EventSeq;
  time: Time;
  kind: 'mcp.starting';
  server: string;
  restarts: number;
  /** true: it is being restored from its template (docs/templates.md), not installed */
  template?: boolean;
  [more: string]: unknown;
}

/**
 * the server's first process, just initialized and gated, was checkpointed as the
 * template later sandboxes of the account with the same server start from
 * (docs/templates.md; gvisor sandboxes, the daemon's --templates on); it runs on
 */
export interface McpTemplateSavedEvent {
  seq: EventSeq;
  time: Time;
  kind: 'mcp.template_saved';
  server: string;
  /** the checkpoint's bytes on disk */
  imageBytes: number;
  seconds: number;
  [more: string]: unknown;
}

/** the server was restored from its template instead of installed and booted; its tools go through the gate next, as any start's */
export interface McpTemplateRestoredEvent {
  seq: EventSeq;
  time: Time;
  kind: 'mcp.template_restored';
  server: string;
  seconds: number;
  [more: string]: unknown;
}

/**
 * a template could not be saved, or would not restore (the sandbox was then started
 * again as it was, the template removed, and the server is installed instead)
 */
export interface McpTemplateFailedEvent {
  seq: EventSeq;
  time: Time;
  kind: 'mcp.template_failed';
  server: string;
  error: string;
  [more: string]: unknown;
}

/**
 * an answer from host held the value of a secret swapped into that connection, written
 * as encoding; it was overwritten with the placeholder before the sandbox read it. Once
 * per answer, secret and encoding; a security event (kept apart from routine ones).
 */
export interface SecretReflectedEvent {
  seq: EventSeq;
  time: Time;
  kind: 'secret.reflected';
  secret: string | null;
  host: string;
  /** verbatim, base64, base64url, percent, json, or a base64 form with its escapes: base64+json, base64url+percent, ... */
  encoding: string;
  [more: string]: unknown;
}

export interface McpReadyEvent {
  seq: EventSeq;
  time: Time;
  kind: 'mcp.ready';
  server: string;
  /** from its start to a fingerprinted tool list */
  seconds: number;
  [more: string]: unknown;
}

export interface McpFailedEvent {
  seq: EventSeq;
  time: Time;
  kind: 'mcp.failed';
  server: string;
  error: string;
  /** what it was doing when it failed */
  phase: 'installing' | 'starting' | 'running' | 'stopped' | 'failed' | 'refused';
  /** how long it had been doing it */
  seconds: number;
  [more: string]: unknown;
}

/**
 * the server's tool list is not the approved one: at start (fingerprint, error), or
 * while it ran (fingerprint, approved, blocked, hidden, changes); or a client called
 * a tool its tools option does not expose (tool, reason); or a client sent a method
 * as a notification (no id) that MCP does not define, which was dropped (method,
 * tool for a tools/call, reason; at most a few a second, all counted in /metrics)
 */
export interface McpRefusedEvent {
  seq: EventSeq;
  time: Time;
  kind: 'mcp.refused';
  server: string;
  fingerprint?: string;
  error?: string;
  approved?: string;
  blocked?: string[];
  hidden?: string[];
  changes?: string;
  tool?: string;
  method?: string;
  reason?: string;
  [more: string]: unknown;
}

/** a person approved the server's changed tool list (POST .../mcp/{name}:approve) */
export interface McpApprovedEvent {
  seq: EventSeq;
  time: Time;
  kind: 'mcp.approved';
  server: string;
  by: string;
  at: Time;
  old: string | null;
  new: string;
  [more: string]: unknown;
}

export interface McpExitedEvent {
  seq: EventSeq;
  time: Time;
  kind: 'mcp.exited';
  server: string;
  exitCode: number;
  error: string;
  [more: string]: unknown;
}

export interface McpStoppedEvent {
  seq: EventSeq;
  time: Time;
  kind: 'mcp.stopped';
  server: string;
  [more: string]: unknown;
}

/**
 * a gateway client did not read its stream while answers or notifications came:
 * past 16 MiB unsent (or the sandbox's --held-per-sandbox) it is disconnected, not
 * buffered without end (a 2025 client may resume with Last-Event-ID)
 */
export interface McpClientDroppedEvent {
  seq: EventSeq;
  time: Time;
  kind: 'mcp.client_dropped';
  server: string;
  why: string;
  backlogBytes: number;
  [more: string]: unknown;
}

export interface SandboxPausedEvent {
  seq: EventSeq;
  time: Time;
  kind: 'sandbox.paused';
  /** api or idle */
  reason: string;
  [more: string]: unknown;
}

export interface SandboxResumedEvent {
  seq: EventSeq;
  time: Time;
  kind: 'sandbox.resumed';
  /** api, gateway, exec, files, mcp, ... */
  reason: string;
  wakeMs: number;
  /** a hibernated sandbox's only: restored from its image (gvisor), thawed with its memory in swap (ns), or started cold when the image could not be restored (why says why) */
  from?: 'image' | 'swap' | 'cold';
  why?: string;
  [more: string]: unknown;
}

/** its memory is an image on disk and its processes ended (gvisor), or its frozen processes' memory is in the host's swap (ns) (docs/hibernation.md) */
export interface SandboxHibernatedEvent {
  seq: EventSeq;
  time: Time;
  kind: 'sandbox.hibernated';
  /** api, idle or memory */
  reason: string;
  to: 'image' | 'swap';
  /** the image on disk, or what went to swap; 0 when gVisor ended it without an image */
  imageBytes: number;
  /** why it has no image: its next wake starts it cold */
  note?: string;
  [more: string]: unknown;
}

export interface SandboxExitedEvent {
  seq: EventSeq;
  time: Time;
  kind: 'sandbox.exited';
  reason: string;
  [more: string]: unknown;
}

export interface SandboxStoppedEvent {
  seq: EventSeq;
  time: Time;
  kind: 'sandbox.stopped';
  /** api, or init process exited */
  reason: string;
  [more: string]: unknown;
}

export interface SandboxStartedEvent {
  seq: EventSeq;
  time: Time;
  kind: 'sandbox.started';
  [more: string]: unknown;
}

/**
 * events beyond the rate limit were dropped before the next one kept; routine and
 * security events (docs/egress.md, "Events") have limits of their own
 */
export interface EventsDroppedEvent {
  seq: EventSeq;
  time: Time;
  kind: 'events.dropped';
  count: number;
  limitPerSecond: number;
  /** the dropped events were security events */
  security: boolean;
  [more: string]: unknown;
}

export interface JsonRpcMessage {
  jsonrpc: '2.0';
  id?: string | number | null;
  method?: string;
  params?: Record<string, unknown>;
  result?: unknown;
  error?: Record<string, unknown>;
  [more: string]: unknown;
}

export type JsonRpcMessages = JsonRpcMessage | JsonRpcMessage[];

export interface JsonRpcError {
  jsonrpc: '2.0';
  id: string | number | null;
  error: JsonRpcErrorError;
  [more: string]: unknown;
}

export interface JsonRpcErrorError {
  code: number;
  message: string;
  data?: unknown;
  [more: string]: unknown;
}
