/** The API's JSON, as SPEC.md "HTTP API" describes it (camelCase throughout). */

export type SandboxStatus = 'creating' | 'running' | 'paused' | 'stopped' | 'failed';

export interface NetworkPolicy {
  /** Whether the sandbox may reach the internet at all (through the egress proxy). */
  internet: boolean;
  /** Hosts it may reach; empty with internet on means any public host. */
  allow: string[];
}

/** What `POST /v1/sandboxes` takes; every field is optional. */
export interface SandboxOptions {
  name?: string;
  memoryMiB?: number;
  cpus?: number;
  diskMiB?: number;
  /** Freeze the sandbox after this many idle seconds (0: never). */
  idlePauseSeconds?: number;
  labels?: Record<string, string>;
  env?: Record<string, string>;
  network?: Partial<NetworkPolicy>;
}

/** A sandbox as the API returns it. */
export interface SandboxInfo {
  id: string;
  name?: string | null;
  status: SandboxStatus;
  createdAt: string;
  memoryMiB: number;
  cpus: number;
  diskMiB: number;
  idlePauseSeconds: number;
  labels: Record<string, string>;
  env?: Record<string, string>;
  network: NetworkPolicy;
  mcp?: { servers: McpServerStatus[] };
  [more: string]: unknown;
}

export interface ExecResult {
  exitCode: number;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  durationMs: number;
}

/** An event of a sandbox: `egress.refused`, `secret.used`, `mcp.exited`, ... */
export interface SandboxEvent {
  seq: number;
  time: string;
  kind: string;
  [field: string]: unknown;
}

/** A catalog server to start: its id, and secrets under the names it expects. */
export interface McpCatalogServer {
  id: string;
  /** ENV (the variable the server reads) -> SECRET (a secret's name). */
  secrets?: Record<string, string>;
  env?: Record<string, string>;
  args?: string[];
  /** The reviewed tool list's fingerprint; the server is refused if its tools differ. */
  fingerprint?: string;
}

/** Your own stdio server: a name and the command that runs it in /workspace. */
export interface McpCustomServer {
  name: string;
  command: string[];
  env?: Record<string, string>;
  secrets?: Record<string, string>;
  fingerprint?: string;
}

export type McpServerSpec = McpCatalogServer | McpCustomServer;

export type McpStatus = 'installing' | 'starting' | 'ready' | 'failed' | 'refused' | 'stopped';

export interface McpServerStatus {
  name: string;
  id?: string;
  status: McpStatus;
  /** The server's Streamable HTTP URL on the gateway. */
  url: string;
  fingerprint: string | null;
  /** The names of the tools clients see. */
  tools: string[];
  warnings: string[];
  approved?: string;
  error?: string;
  [more: string]: unknown;
}

/** `GET /v1/sandboxes/{id}/mcp`: the servers and the header every gateway request needs. */
export interface McpGateway {
  servers: McpServerStatus[];
  headers: { Authorization?: string };
}

export interface CatalogSetting {
  env: string;
  secret?: boolean;
  required?: boolean;
  description?: string;
  [more: string]: unknown;
}

/** An entry of `GET /v1/mcp/catalog` (SPEC "Catalog entry"). */
export interface CatalogEntry {
  id: string;
  name: string;
  description: string;
  package: string;
  version: string;
  runtime: string;
  license: string;
  command: string[];
  egress: string[];
  settings: CatalogSetting[];
  fingerprint: string | null;
  [more: string]: unknown;
}

export interface SecretOptions {
  value: string;
  /** The hosts the real value may be sent to (HTTPS only). */
  hosts: string[];
  methods?: string[];
  /** Path globs such as `/repos/acme/*`. */
  paths?: string[];
}

/** A secret as listed: never its value. */
export interface SecretInfo {
  name: string;
  hosts: string[];
  methods: string[];
  paths: string[];
  createdAt?: string;
  updatedAt?: string;
  [more: string]: unknown;
}

export interface UsageEntry {
  sandbox: string;
  name: string | null;
  status: string;
  cpuSeconds: number;
  memoryGiBHours: number;
  pausedGBHours: number;
  cost: Record<string, number> | number;
  [more: string]: unknown;
}

/** `GET /v1/usage`. */
export interface Usage {
  sandboxes: UsageEntry[];
  total: Record<string, unknown>;
  [more: string]: unknown;
}

export interface AccountOptions {
  name: string;
  maxSandboxes?: number;
  maxMemoryMiB?: number;
}

export interface AccountInfo {
  name: string;
  /** Only in the answer of create: the key is shown once. */
  apiKey?: string;
  maxSandboxes?: number;
  maxMemoryMiB?: number;
  [more: string]: unknown;
}
