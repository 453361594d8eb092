/**
 * The API's JSON under the SDK's names (camelCase throughout, as api/openapi.yaml).
 * Each is defined from the wire types that sdk/scripts/gen-types.mjs writes from
 * api/openapi.yaml into api-types.gen.ts; only the names differ, except where a comment
 * says why the SDK's type is not the wire type.
 */
import type * as api from './api-types.gen.js';

/** T without its index signature (`[more: string]: unknown`): only the named keys. */
type Closed<T> = { [K in keyof T as string extends K ? never : number extends K ? never : K]: T[K] };

export type SandboxStatus = api.SandboxStatus;

/** Runtime Cloud's word for where a sandbox is, which its SDKs read and wait on. */
export type SandboxState = api.Sandbox['state'];

/**
 * A sandbox's own network rules, as `network.set()` and a create's `network` take them
 * (Runtime Cloud's `NetworkRules`): `internet` on or off, the hosts allowed, `deny`
 * (never reached, whatever else says) and `connect` (host:port pairs beyond the list).
 * No `allow`: any public host; `allow: []`: no host; a list: only those. The hosts of
 * the sandbox's catalog MCP servers are reachable in every case (even with
 * `internet: false`). Closed, unlike the wire type (an answer, so open): a misspelt key
 * must not pass.
 */
export type NetworkRules = Closed<api.Network>;

/**
 * The rules in force, as `network.get()` and `network.set()` answer them (Runtime Cloud's
 * `NetworkPolicy`): the rules and `openPorts` (true: a runtimed sandbox reaches every
 * port of a host it may reach).
 */
export type NetworkPolicy = api.NetworkAnswer;
/** @deprecated withruntime 0.1's name of {@link NetworkPolicy}. */
export type NetworkAnswer = api.NetworkAnswer;

/**
 * How a sandbox is isolated (`isolation`, runtimed's own: Runtime Cloud always gives a
 * microVM): `ns`, Linux namespaces, seccomp and cgroups on the host's kernel, started in
 * milliseconds; `gvisor`, gVisor's runsc, a kernel of its own in user space, started in
 * about 100-200 ms and about 20 MiB more when idle. Fixed at create: `info.isolation`
 * says which a sandbox has.
 */
export type Isolation = api.Isolation;

/**
 * What `sandboxes.create()` takes (Runtime Cloud's `CreateSandbox`, the fields runtimed
 * has); every field is optional and takes the daemon's default (`isolation`: the daemon's
 * --driver; one the daemon lacks is refused with 501 `feature_unavailable`). Runtime Cloud's
 * `vcpu`, `region`, `funding`, `timeoutSeconds`, `image` and the rest are refused by
 * runtimed as unknown fields.
 */
export type CreateSandbox = Omit<api.SandboxCreate, 'name'> & { name?: string };
/** @deprecated withruntime 0.1's name of {@link CreateSandbox}. */
export type SandboxOptions = CreateSandbox;

/** A sandbox as the API answers it (Runtime Cloud's `SandboxInfo`, with runtimed's fields). */
export type SandboxInfo = api.Sandbox;

/**
 * What `delete()` answers: runtimed's `{id, name, status: "deleted", deletedAt}`, with
 * what the SDK knew filling in the rest (a `missingOk` delete of a sandbox already gone
 * is made of that alone).
 */
export interface DeletedSandbox {
  id: string;
  name: string | null;
  labels: Record<string, string>;
  status: 'deleted';
  state: 'stopped';
  deletedAt: string;
  [more: string]: unknown;
}

/** What a command did (Runtime Cloud's `CommandResult`): its exit code, output and time. */
export type CommandResult = api.ExecResult & {
  /** Some output was lost before it was read (a streamed exec); never for runtimed's plain exec. */
  stdoutTruncated?: boolean;
  stderrTruncated?: boolean;
  /** The streamed exec's process. */
  processId?: string;
};
/** @deprecated withruntime 0.1's name of {@link CommandResult}. */
export type ExecResult = CommandResult;

/** An event of a streamed exec (`sbx.execStream()`), in order: start, stdout/stderr, then exit. */
export type OutputEvent =
  | { type: 'start'; processId: string; replayed?: boolean }
  | { type: 'stdout' | 'stderr'; data: string; offset: number; base64?: string }
  | { type: 'exit'; exitCode: number | null; state: CommandResult['state']; signal?: string; timedOut: boolean; durationMs?: number }
  | { type: 'truncated'; droppedBytes: number; resumeAt: number }
  | { type: 'continue'; processId: string; cursor: number }
  | { type: 'error'; error: { code: string; message: string; status?: number; requestId?: string } };

/** A file or directory as `files.list()` answers it. */
export type FileEntry = api.FileEntry;

/** `files.stat()`: a FileEntry with `exists: true`, or `exists: false` and the path. */
export type FileStat = api.FileStat;

/** An event of a sandbox: `egress.refused`, `secret.used`, `mcp.exited`, ...; `kind` tells which fields it has. */
export type SandboxEvent = api.Event;

/** A catalog server to start: its id, and secrets under the names it expects. */
export type McpCatalogServer = api.McpCatalogServerStart;

/** Your own stdio server: a name and the command that runs it in /workspace. */
export type McpCustomServer = api.McpCustomServerStart;

/**
 * A server for `mcp.start()` (Runtime Cloud's `McpServerRequest`): a catalog id, or a
 * name and a command; with runtimed's extras (`fingerprint`, `tools`, `isolation`, `args`).
 */
export type McpServerRequest = McpCatalogServer | McpCustomServer;
/** @deprecated withruntime 0.1's name of {@link McpServerRequest}. */
export type McpServerSpec = McpServerRequest;

/** A server's status: `installing`, `ready` or `failed` (runtimed's finer word is its `phase`). */
export type McpStatus = api.McpServerStatus;

/** One MCP server of a sandbox and its Streamable HTTP URL on the gateway. */
export type McpServerStatus = api.McpServer;

/**
 * The gateway (Runtime Cloud's `McpGateway`), as `mcp.start()`, `mcp.get()` and
 * `mcp.ready()` answer it: `running`, each server's `name`, `status` and `url`, the
 * `token` and the `headers` every gateway request carries, and `warnings`.
 */
export type McpGateway = api.McpStatus;

export type CatalogSetting = api.CatalogSetting;

/** An entry of `runtime.mcp.catalog()` (Runtime Cloud's `McpCatalogEntry`, with runtimed's fields; docs/catalog.md). */
export type McpCatalogEntry = api.CatalogEntry;
/** @deprecated withruntime 0.1's name of {@link McpCatalogEntry}. */
export type CatalogEntry = api.CatalogEntry;

/** Which requests to a secret's hosts carry it: `methods` (all when absent) and `paths`. */
export type SecretRule = api.SecretRule;

/** What `secrets.set(name, ...)` takes (Runtime Cloud's `SetSecret`, with runtimed's `only` and `env`). */
export type SetSecret = api.SecretInput;
/** @deprecated withruntime 0.1's name of {@link SetSecret}. */
export type SecretOptions = api.SecretInput;

/** A secret as listed: never its value. */
export type Secret = api.Secret;
/** @deprecated withruntime 0.1's name of {@link Secret}. */
export type SecretInfo = api.Secret;

/** What `secrets.delete(name)` answers (Runtime Cloud's shape). */
export interface DeletedSecret {
  name: string;
  deleted: true;
  enforced: boolean;
  /** Where it was deleted from: runtimed keeps only the sandboxes' copy. */
  from: 'sandboxes'[];
}

/** A sandbox's row of `GET /v1/usage` (removed sandboxes included). */
export type UsageEntry = api.UsageRow;

/** `GET /v1/usage`. */
export type Usage = api.Usage;

/** An account's totals in `usage().accounts`. */
export type AccountUsage = api.AccountUsage;

/**
 * What `accounts.create()` takes: a name and optional limits (left out: none).
 * Closed, as the daemon refuses unknown fields.
 */
export type AccountOptions = api.AccountOptions;

/** An account as listed: its limits (`null`: none) and what its sandboxes hold now; never a key. */
export type AccountInfo = api.Account;

/** The answer of `accounts.create()`: the account and its `apiKey`, shown only this once. */
export type AccountCreated = api.AccountCreated;

/** The answer of `accounts.rotateKey()`: the new `apiKey`, shown only this once. */
export type AccountKey = api.AccountKey;
