/* The API's shapes the page reads (api/openapi.yaml). Every field may be missing or of another
 * type in a hostile answer: the page reads them through str() and checks, never trusts. */

export interface Session {
  account: string;
  admin: boolean;
  csrfToken: string;
  expiresAt: string;
}

export interface McpServer {
  name: string;
  id?: string;
  status: string;
  phase: string;
  message?: string | null;
  url: string;
  fingerprint: string | null;
  approved?: string;
  tools: string[];
  warnings: string[];
  error?: string;
  statusSeconds?: number;
  package?: { manager: string; name: string; version: string };
}

export interface Sandbox {
  id: string;
  account?: string;
  name: string | null;
  status: string;
  state: string;
  createdAt: string;
  stopReason?: string | null;
  memoryMiB: number;
  cpus: number;
  diskMiB: number;
  idlePauseSeconds: number;
  hibernateAfterSeconds?: number;
  timeoutSeconds?: number | null;
  onLeaseEnd?: string;
  endsAt?: string;
  labels: Record<string, string>;
  env?: Record<string, string>;
  network?: NetworkPolicy;
  isolation: string;
  mcp?: { servers: McpServer[] };
}

export interface NetworkPolicy {
  internet: boolean;
  allow?: string[];
  deny?: string[];
  connect?: string[];
  openPorts?: boolean;
}

export interface SandboxEvent {
  seq: number;
  time: string;
  kind: string;
  [field: string]: unknown;
}

export interface McpStatus {
  running: boolean;
  servers: McpServer[];
  headers: Record<string, string>;
  token?: string;
  warnings: string[];
}

export interface CatalogEntry {
  id: string;
  name: string;
  title: string;
  description: string;
  package: string;
  version: string;
  runtime: string;
  license: string;
  source: string;
  egress: string[];
  settings: { env: string; secret?: boolean; required?: boolean; description?: string }[];
  fingerprint: string | null;
}

export interface Secret {
  name: string;
  hosts: string[];
  header?: string;
  format?: string;
  rules?: { methods?: string[]; paths: string[] }[];
  only?: { labels?: Record<string, string>[]; sandboxes?: string[] };
  env: string;
  placeholder: string;
  createdAt: string;
  updatedAt: string;
  usedBy?: { sandbox: string; at: string }[]; /* the latest first */
}

export interface CostT {
  cpu: number;
  memory: number;
  paused: number;
  total: number;
}
export interface UsageTotal {
  cpuSeconds: number;
  vcpuHours: number;
  memoryGiBHours: number;
  pausedHours: number;
  pausedGBHours: number;
  cost: CostT;
}
export interface UsageRow extends UsageTotal {
  sandbox: string;
  account: string;
  name: string | null;
  status: string;
  runningHours: number;
  storedGB: number;
}
export interface Usage {
  sandboxes: UsageRow[];
  accounts: { account: string; total: UsageTotal }[];
  total: UsageTotal;
  rates: { vcpuHour: number; gibHour: number; gbMonth: number };
}
export interface UsageSeries {
  stepSeconds: number;
  /* each minute's peaks, summed over the sandboxes, and their cost so far (cumulative) */
  points: { t: string; vcpu: number; memoryMiB: number; pausedStorageMiB: number; costUsd: number }[];
}

export interface Account {
  name: string;
  createdAt: string;
  removing: boolean;
  maxSandboxes: number | null;
  maxMemoryMiB: number | null;
  sandboxes: number;
  memoryMiB: number;
}

export interface ReviewAnswer {
  name: string;
  status: string;
  approved: { fingerprint: string; tools: unknown[] } | null;
  current: { fingerprint: string; tools: unknown[] } | null;
  findings: unknown[];
  approvals: { by: string; at: string; old: string; new: string }[];
}

export interface ConnectRequest {
  userCode: string;
  agentName: string;
  machine: string;
  address: string;
  createdAt: string;
  expiresAt: string;
  status: string;
}

export interface Connection {
  id: string; /* the connection's id (connectionId in the login's answers) */
  agentName: string;
  machine: string;
  createdAt: string;
}
