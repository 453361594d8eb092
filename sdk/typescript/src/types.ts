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

/**
 * A sandbox's egress policy: `internet` on or off, the hosts allowed, `deny` (never
 * reached, whatever else says) and `connect` (host:port pairs beyond the list). No
 * `allow`: any public host; `allow: []`: no host; a list: only those. The hosts of the sandbox's
 * catalog MCP servers are reachable in every case (even with `internet: false`).
 * Closed, unlike the wire type (an answer, so open): `network.set()` takes
 * `Partial<NetworkPolicy>`, and there a misspelt key must not pass.
 */
export type NetworkPolicy = Closed<api.Network>;
/** The policy as `network.get()` and `network.set()` answer it: with Runtime Cloud's
 * `openPorts` (true: a runtimed sandbox reaches every port of a host it may reach). */
export type NetworkAnswer = api.NetworkAnswer;

/**
 * What `sandboxes.create()` takes; every field is optional and takes the daemon's default.
 * Not `getOrCreate`: the SDK sets it in `sandboxes.getOrCreate(name)`.
 */
export type SandboxOptions = Omit<api.SandboxCreate, 'getOrCreate'>;

/** A sandbox as the API returns it. */
export type SandboxInfo = api.Sandbox;

/** What a command did: `POST /v1/sandboxes/{id}/exec`. */
export type ExecResult = api.ExecResult;

/** An event of a sandbox: `egress.refused`, `secret.used`, `mcp.exited`, ...; `kind` tells which fields it has. */
export type SandboxEvent = api.Event;

/** A catalog server to start: its id, and secrets under the names it expects. */
export type McpCatalogServer = api.McpCatalogServerStart;

/** Your own stdio server: a name and the command that runs it in /workspace. */
export type McpCustomServer = api.McpCustomServerStart;

export type McpServerSpec = McpCatalogServer | McpCustomServer;

/** A server's status. (The document calls this McpServerStatus, and the server McpServer.) */
export type McpStatus = api.McpServerStatus;

/** One MCP server of a sandbox and its Streamable HTTP URL on the gateway. */
export type McpServerStatus = api.McpServer;

/** `GET /v1/sandboxes/{id}/mcp`: the servers and the header every gateway request needs. */
export type McpGateway = api.McpStatus;

export type CatalogSetting = api.CatalogSetting;

/** An entry of `GET /v1/mcp/catalog` (docs/catalog.md). */
export type CatalogEntry = api.CatalogEntry;

/** What `secrets.set(name, ...)` takes. */
export type SecretOptions = api.SecretInput;

/** A secret as listed: never its value. */
export type SecretInfo = api.Secret;

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
