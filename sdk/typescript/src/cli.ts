/**
 * The `withruntime` command: the handful of `runtime` CLI commands that matter
 * from a machine without the C client, over the same API and environment.
 */
import * as os from 'node:os';
import { Runtime, type Sandbox } from './client.js';
import { apiUrlFromEnv } from './config.js';
import { CommandError, RuntimeError } from './errors.js';
import { LoginError, login, logout } from './login.js';
import type { CommandResult, CreateSandbox, Isolation, McpGateway, McpServerRequest } from './types.js';
import { VERSION } from './version.js';

/** A command's end as a shell says it: 124 timed out, 128+N killed by signal N. */
function exitStatus(r: CommandResult): number {
  if (r.timedOut) return 124;
  if (r.exitCode !== null) return r.exitCode;
  return 128 + ((r.signal && os.constants.signals[r.signal as keyof typeof os.constants.signals]) || 9);
}

const HELP = `withruntime ${VERSION}: the client of a self-hosted runtimed

Usage:
  withruntime sandbox run [--keep] [OPTIONS] -- CMD [ARG...]   create, run CMD, delete unless --keep
  withruntime sandbox create [OPTIONS]                          prints the id
  withruntime sandbox exec ID -- CMD [ARG...]                   exit status is the command's
  withruntime sandbox list [--json]
  withruntime sandbox rm ID
  withruntime sandbox mcp ID start SERVER... [--secret SERVER.ENV=SECRET]...
                          [--fingerprint SERVER=HASH]... [--wait SECONDS]
  withruntime sandbox mcp ID [--json]                           URLs, header, claude mcp add lines
  withruntime sandbox mcp catalog [--json]
  withruntime login [--no-browser] [--wait] [--agent-name N]   connect this machine: a person approves
                          the printed code; the key is saved for RUNTIME_API_URL's daemon
  withruntime logout                                            revoke the saved key, remove its file

OPTIONS of create and run:
  --name N  --memory MiB  --cpus N  --disk MiB  --idle-pause SECONDS
  --label K=V  --env K=V  --allow HOST (repeatable)  --no-internet
  --isolation ns|gvisor (fixed once created; default: the daemon's --driver)

SERVER is a catalog id (fetch, github, ...) or NAME=CMD for your own stdio
server, e.g. tickets='node /workspace/tickets.mjs' (split at blanks, quotes
group words; no shell).

Global options:
  --api-url URL   default $RUNTIME_API_URL, else http://127.0.0.1:7070
  --api-key KEY   default $RUNTIME_API_KEY, else the key login saved for the
                  daemon, else STATE/admin.key (STATE: $RUNTIME_STATE_DIR or
                  /var/lib/runtime). With a key given, login only checks it.
  --trial         there is no trial: runtime is self-hosted (also: login --trial)
  --help, --version
`;

const TRIAL = 'withruntime: there is no trial: runtime is self-hosted. Run runtimed on your own ' +
  'machine (see its README) and point RUNTIME_API_URL and RUNTIME_API_KEY at it.\n';

/** Where the command writes; tests pass their own. */
export interface Io {
  out(text: string): void;
  err(text: string): void;
}

const processIo: Io = {
  out: (t) => process.stdout.write(t),
  err: (t) => process.stderr.write(t),
};

/** A wrong command line: exit status 2, like `runtime`. */
class UsageError extends Error {}

/** Options taken out of an argument list: flags, repeatable values, the rest. */
interface Parsed {
  flags: Set<string>;
  values: Map<string, string[]>;
  rest: string[];
  /** Everything after `--`, when there was one. */
  command: string[] | null;
}

const WITH_VALUE = new Set(['--name', '--memory', '--cpus', '--disk', '--idle-pause', '--label', '--env',
  '--allow', '--isolation', '--secret', '--fingerprint', '--wait', '--api-url', '--api-key', '--agent-name']);
/** After `login`, --wait is a flag (wait the request's whole life), not SECONDS. */
const LOGIN_FLAGS = new Set(['--no-browser', '--wait', '--trial']);

function parse(args: string[]): Parsed {
  const p: Parsed = { flags: new Set(), values: new Map(), rest: [], command: null };
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === '--') {
      p.command = args.slice(i + 1);
      break;
    }
    const eq = a.startsWith('--') ? a.indexOf('=') : -1;
    const key = eq > 0 ? a.slice(0, eq) : a;
    if (WITH_VALUE.has(key) && !(key === '--wait' && p.rest[0] === 'login' && eq < 0)) {
      const v = eq > 0 ? a.slice(eq + 1) : args[++i];
      if (v === undefined) throw new UsageError(`${key} needs a value`);
      p.values.set(key, [...(p.values.get(key) ?? []), v]);
    } else if (a.startsWith('--') && a.length > 2) {
      p.flags.add(a);
    } else {
      p.rest.push(a);
    }
  }
  return p;
}

function one(p: Parsed, key: string): string | undefined {
  return p.values.get(key)?.at(-1);
}

function num(p: Parsed, key: string): number | undefined {
  const v = one(p, key);
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v)) throw new UsageError(`${key} takes a whole number, not '${v}'`);
  return Number(v);
}

/** K=V options into an object. */
function pairs(p: Parsed, key: string): Record<string, string> | undefined {
  const list = p.values.get(key);
  if (!list) return undefined;
  return Object.fromEntries(list.map((kv) => {
    const eq = kv.indexOf('=');
    if (eq <= 0) throw new UsageError(`${key} takes K=V, not '${kv}'`);
    return [kv.slice(0, eq), kv.slice(eq + 1)];
  }));
}

function isolation(p: Parsed): Isolation | undefined {
  const v = one(p, '--isolation');
  if (v === undefined || v === 'ns' || v === 'gvisor') return v;
  throw new UsageError(`--isolation takes ns or gvisor, not '${v}'`);
}

function sandboxOptions(p: Parsed): CreateSandbox {
  const o: CreateSandbox = {
    name: one(p, '--name'), memoryMiB: num(p, '--memory'), cpus: num(p, '--cpus'), diskMiB: num(p, '--disk'),
    idlePauseSeconds: num(p, '--idle-pause'), labels: pairs(p, '--label'), env: pairs(p, '--env'),
    isolation: isolation(p),
  };
  const allow = p.values.get('--allow');
  // No --allow: no list (any public host); an empty one would be no host at all.
  if (allow || p.flags.has('--no-internet')) o.network = { internet: !p.flags.has('--no-internet'), ...(allow ? { allow } : {}) };
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as CreateSandbox;
}

/** Splits CMD of NAME=CMD like `runtime` does: blanks split, quotes group, backslash escapes. */
export function splitCommand(cmd: string): string[] {
  const words: string[] = [];
  let word = '', inWord = false, quote = '';
  for (let i = 0; i < cmd.length; i++) {
    const c = cmd[i]!;
    const next = cmd[i + 1];
    const escapes = c === '\\' && quote !== "'" && next !== undefined && (!quote || next === '"' || next === '\\');
    if (escapes) {
      word += next;
      inWord = true;
      i++;
    } else if (quote) {
      if (c === quote) quote = '';
      else word += c;
    } else if (c === ' ' || c === '\t' || c === '\n') {
      if (inWord) words.push(word);
      word = '';
      inWord = false;
    } else if (c === '"' || c === "'") {
      quote = c;
      inWord = true;
    } else {
      word += c;
      inWord = true;
    }
  }
  if (quote) throw new UsageError(`unbalanced ${quote} in '${cmd}'`);
  if (inWord) words.push(word);
  return words;
}

/** SERVER arguments and --secret/--fingerprint options into the API's server list. */
export function serverSpecs(servers: string[], secrets: string[] = [], fingerprints: string[] = []): McpServerRequest[] {
  const specs = new Map<string, McpServerRequest>();
  for (const s of servers) {
    const eq = s.indexOf('=');
    if (eq === 0) throw new UsageError(`bad SERVER '${s}': expected a catalog id or NAME=CMD`);
    if (eq < 0) {
      specs.set(s, { id: s });
      continue;
    }
    const command = splitCommand(s.slice(eq + 1));
    if (command.length === 0) throw new UsageError(`bad SERVER '${s}': no command after '='`);
    specs.set(s.slice(0, eq), { name: s.slice(0, eq), command });
  }
  for (const sec of secrets) {
    const m = /^([^.=]+)\.([^=]+)=(.+)$/.exec(sec);
    const spec = m && specs.get(m[1]!);
    if (!m || !spec) throw new UsageError(`--secret takes SERVER.ENV=SECRET for a SERVER being started, not '${sec}'`);
    spec.secrets = { ...spec.secrets, [m[2]!]: m[3]! };
  }
  for (const fp of fingerprints) {
    const m = /^([^=]+)=(.+)$/.exec(fp);
    const spec = m && specs.get(m[1]!);
    if (!m || !spec) throw new UsageError(`--fingerprint takes SERVER=HASH for a SERVER being started, not '${fp}'`);
    spec.fingerprint = m[2]!;
  }
  return [...specs.values()];
}

/** A word the shell reads back as itself. */
function shellWord(s: string): string {
  return /^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

/** What `runtime sandbox mcp ID` prints: a line per server, the header, a claude line each. */
export function formatGateway(g: McpGateway): string {
  const lines = g.servers.map((s) => `${s.name}\t${s.phase}\t${s.url}${s.error ? `\t${s.error}` : ''}`);
  const auth = g.headers.Authorization;
  if (auth) lines.push('', `Authorization: ${auth}`, '');
  for (const s of g.servers) {
    if (s.status !== 'ready' || !auth) continue;
    lines.push(`claude mcp add --transport http ${shellWord(s.name)} ${shellWord(s.url)} --header "Authorization: ${auth}"`);
  }
  return lines.join('\n') + '\n';
}

async function run(rt: Runtime, p: Parsed, io: Io): Promise<number> {
  if (!p.command?.length) throw new UsageError('sandbox run needs a command after --, e.g. -- echo ready');
  const keep = p.flags.has('--keep');
  const sbx = await rt.sandboxes.create(sandboxOptions(p));
  try {
    const r = await sbx.exec(p.command);
    io.out(r.stdout);
    io.err(r.stderr);
    return exitStatus(r);
  } finally {
    // Same as `runtime sandbox run`: the id goes to stderr, so stdout is the command's own.
    if (keep) io.err(`${sbx.id}\n`);
    else await sbx.delete({ missingOk: true });
  }
}

async function mcp(rt: Runtime, p: Parsed, io: Io): Promise<number> {
  const [, , target, verb, ...servers] = p.rest;
  const json = p.flags.has('--json');
  if (target === 'catalog') {
    const cat = await rt.mcp.catalog();
    io.out(json ? JSON.stringify(cat, null, 2) + '\n' : cat.map((e) => `${e.id}\t${e.version}\t${e.description}`).join('\n') + '\n');
    return 0;
  }
  if (!target) throw new UsageError('sandbox mcp needs a sandbox ID (or catalog)');
  const sbx = await rt.sandboxes.get(target);
  if (verb === 'stop') {
    for (const s of servers) await sbx.mcp.stop(s);
    return 0;
  }
  if (verb === 'start') return mcpStart(sbx, p, servers, io);
  if (verb) throw new UsageError(`unknown command '${verb}' after the sandbox ID: expected start or stop`);
  const g = await sbx.mcp.get();
  io.out(json ? JSON.stringify(g, null, 2) + '\n' : formatGateway(g));
  return 0;
}

async function mcpStart(sbx: Sandbox, p: Parsed, servers: string[], io: Io): Promise<number> {
  if (servers.length === 0) throw new UsageError('sandbox mcp ID start needs at least one SERVER');
  await sbx.mcp.start(serverSpecs(servers, p.values.get('--secret'), p.values.get('--fingerprint')));
  const waitS = num(p, '--wait') ?? 300;
  const g = waitS === 0 ? await sbx.mcp.get() : await sbx.mcp.ready({ timeoutMs: waitS * 1000 });
  io.out(p.flags.has('--json') ? JSON.stringify(g, null, 2) + '\n' : formatGateway(g));
  return waitS === 0 || g.servers.every((s) => s.status === 'ready' || s.phase === 'stopped') ? 0 : 1;
}

async function sandbox(rt: Runtime, p: Parsed, io: Io): Promise<number> {
  const verb = p.rest[1];
  switch (verb) {
  case 'run':
    return run(rt, p, io);
  case 'create':
    io.out(`${(await rt.sandboxes.create(sandboxOptions(p))).id}\n`);
    return 0;
  case 'exec': {
    const id = p.rest[2];
    if (!id || !p.command?.length) throw new UsageError('usage: withruntime sandbox exec ID -- CMD [ARG...]');
    const r = await (await rt.sandboxes.get(id)).exec(p.command);
    io.out(r.stdout);
    io.err(r.stderr);
    return exitStatus(r);
  }
  case 'list': {
    const all = await (await rt.sandboxes.list({ labels: pairs(p, '--label') })).toArray();
    io.out(p.flags.has('--json') ? JSON.stringify(all, null, 2) + '\n'
      : all.map((s) => `${s.id}\t${s.info.name ?? '-'}\t${s.state}`).join('\n') + (all.length ? '\n' : ''));
    return 0;
  }
  case 'rm':
    if (!p.rest[2]) throw new UsageError('usage: withruntime sandbox rm ID');
    await rt.sandboxes.delete(p.rest[2]);
    return 0;
  case 'mcp':
    return mcp(rt, p, io);
  default:
    throw new UsageError(verb ? `unknown sandbox command '${verb}'` : 'sandbox needs a command');
  }
}

/**
 * `login` with a key already given (--api-key or RUNTIME_API_KEY), as Runtime Cloud's
 * CLI: no device login; it checks that the daemon answers to the key and says where
 * each came from.
 */
async function checkKey(rt: Runtime, p: Parsed, io: Io): Promise<number> {
  const url = one(p, '--api-url') ? '--api-url' : process.env.RUNTIME_API_URL ? 'RUNTIME_API_URL' : 'the default';
  const key = one(p, '--api-key') ? '--api-key' : process.env.RUNTIME_API_KEY ? 'RUNTIME_API_KEY'
    : `${process.env.RUNTIME_STATE_DIR || '/var/lib/runtime'}/admin.key`;
  const page = await rt.sandboxes.list({ limit: 100 });
  io.out(`connected to runtimed at ${rt.baseUrl} (from ${url}), key from ${key}: ` +
    `${page.data.length}${page.hasMore ? '+' : ''} sandbox${page.data.length === 1 ? '' : 'es'}\n` +
    'a key is given, so there is no device login; unset RUNTIME_API_KEY (and leave out --api-key) to ' +
    'connect this machine with a key of its own\n');
  return 0;
}

/** Runs the command line `args` (without node and the script); resolves to the exit status. */
export async function main(args: string[], io: Io = processIo): Promise<number> {
  try {
    const p = parse(args);
    if (p.flags.has('--help') || p.rest[0] === 'help' || p.rest.includes('-h')) {
      io.out(HELP);
      return 0;
    }
    if (p.flags.has('--version')) {
      io.out(`${VERSION}\n`);
      return 0;
    }
    if (p.flags.has('--trial')) {
      io.err(TRIAL);
      if (p.rest.length === 0) return 0;
    }
    if (p.rest[0] === 'login' || p.rest[0] === 'logout') return await loginCommand(p, io);
    if (p.rest[0] !== 'sandbox') {
      throw new UsageError(p.rest[0] ? `unknown command '${p.rest[0]}'` : 'no command given');
    }
    const rt = new Runtime({ baseUrl: one(p, '--api-url'), apiKey: one(p, '--api-key') });
    return await sandbox(rt, p, io);
  } catch (e) {
    return report(e, io);
  }
}

/** `login` and `logout` (docs/login.md). */
async function loginCommand(p: Parsed, io: Io): Promise<number> {
  const verb = p.rest[0]!;
  if (p.rest.length > 1) throw new UsageError(`unexpected argument '${p.rest[1]}' after ${verb}`);
  if (verb === 'login' && p.flags.has('--trial')) return 0;
  const allowed = verb === 'login' ? LOGIN_FLAGS : new Set<string>();
  for (const f of p.flags) if (!allowed.has(f)) throw new UsageError(`${verb} takes no ${f}`);
  for (const k of p.values.keys()) {
    if (k !== '--api-url' && k !== '--api-key' && !(verb === 'login' && k === '--agent-name')) throw new UsageError(`${verb} takes no ${k}`);
  }
  const apiUrl = apiUrlFromEnv(one(p, '--api-url'));
  if (verb === 'logout') {
    if (one(p, '--api-key')) throw new UsageError('logout takes no --api-key: it revokes the key login saved');
    return await logout(apiUrl, io);
  }
  const key = one(p, '--api-key');
  if (key || process.env.RUNTIME_API_KEY) return await checkKey(new Runtime({ baseUrl: apiUrl, apiKey: key }), p, io);
  return await login({
    apiUrl, agentName: one(p, '--agent-name'), noBrowser: p.flags.has('--no-browser'), wait: p.flags.has('--wait'), io,
  });
}

function report(e: unknown, io: Io): number {
  if (e instanceof LoginError && e.exitCode === 2) {
    io.err(`withruntime: ${e.message}; see withruntime --help\n`);
    return 2;
  }
  if (e instanceof LoginError) {
    io.err(`withruntime: ${e.message}\n`);
    return e.exitCode;
  }
  if (e instanceof UsageError) {
    io.err(`withruntime: ${e.message}; see withruntime --help\n`);
    return 2;
  }
  if (e instanceof CommandError || e instanceof RuntimeError) {
    io.err(`withruntime: ${e.message}\n`);
    return 1;
  }
  throw e;
}
