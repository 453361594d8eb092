/**
 * `withruntime login` and `withruntime logout` (docs/login.md): Runtime Cloud's device
 * login against the daemon itself, as this repository's `runtime login` does it
 * (src/cli/login.c). A key pair is made for this request alone; a person approves the
 * printed code in a browser (or through the API); the key comes back sealed to the
 * pair, is saved where the official SDKs look, and confirmed.
 */
import { spawn } from 'node:child_process';
import { generateKeyPairSync, privateDecrypt } from 'node:crypto';
import * as os from 'node:os';
import { LOGIN_KEY_RE, readSaved, removeSaved, savedPlace, writeSaved, type SavedPlace } from './saved.js';

/** Between two polls; the daemon answers "pending" to polls less than 2 s apart. */
const POLL_MS = 3_000;
/** Without a terminal or --wait: an agent's budget, then exit 124 (as `runtime login`). */
const WAIT_AGENT_MS = 50_000;
/** A request lives 15 minutes. */
const WAIT_FULL_MS = 15 * 60_000;
/** Each /api/connect call. */
const CALL_MS = 20_000;
export const DEFAULT_AGENT_NAME = 'My coding agent';
/** `login` not approved in time: the exit status of a time-out, as `runtime login`. */
export const EXIT_PENDING = 124;

/** Where login and logout write their messages. */
export interface LoginIo {
  err(text: string): void;
}

/** A failure of login or logout: its message (one line) and exit status. */
export class LoginError extends Error {
  constructor(message: string, readonly exitCode = 1) {
    super(message);
    this.name = 'LoginError';
  }
}

export interface LoginOptions {
  /** The daemon's URL (its origin is both the auth and the API origin). */
  apiUrl: string;
  agentName?: string;
  noBrowser?: boolean;
  /** Wait the request's whole life (15 minutes) even without a terminal. */
  wait?: boolean;
  /** Whether stdin and stderr are terminals; default: asked of the process. */
  interactive?: boolean;
  io: LoginIo;
}

interface Answer {
  status: number;
  body: Record<string, unknown> | null;
}

/** POST /api/connect/WHAT: the status and the JSON answer, or null when the daemon is unreachable. */
async function connectPost(origin: string, what: string, body: unknown, key?: string): Promise<Answer | null> {
  let res: Response;
  try {
    res = await fetch(`${origin}/api/connect/${what}`, {
      method: 'POST', redirect: 'error', signal: AbortSignal.timeout(CALL_MS),
      headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
      body: JSON.stringify(body ?? {}),
    });
  } catch {
    return null;
  }
  let parsed: unknown = null;
  try {
    parsed = await res.json();
  } catch {
    parsed = null;
  }
  return { status: res.status, body: parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? parsed as Record<string, unknown> : null };
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

/** Text from the daemon, printed without control characters. */
function clean(s: string): string {
  return s.replace(/[\x00-\x1f\x7f]/g, '?').slice(0, 200);
}

function place(apiUrl: string): SavedPlace {
  const p = savedPlace(apiUrl);
  if (typeof p === 'string') throw new LoginError(p);
  return p;
}

/** The agent name's rule: 1 to 80 characters, none a control one. */
export function agentNameOk(name: string): boolean {
  const n = [...name].length;
  return n >= 1 && n <= 80 && !/[\x00-\x1f\x7f]/.test(name);
}

interface Request {
  deviceCode: string;
  userCode: string;
  url: string;
}

/** The answer of start, checked: the link must be this daemon's own page for this code. */
function request(p: SavedPlace, a: Answer | null): Request {
  if (!a) throw new LoginError(`cannot reach the daemon at ${p.apiOrigin}`);
  const deviceCode = str(a.body?.deviceCode), userCode = str(a.body?.userCode), url = str(a.body?.verificationUri);
  const ok = a.status === 200 && deviceCode !== undefined && /^[A-Za-z0-9_-]{43}$/.test(deviceCode) &&
    userCode !== undefined && /^[A-F0-9]{4}(-[A-F0-9]{4}){2}$/.test(userCode) &&
    url === `${p.apiOrigin}/connect?code=${userCode}`;
  if (ok) return { deviceCode, userCode, url };
  const error = a.body?.error as Record<string, unknown> | undefined;
  const msg = str(error?.message);
  throw new LoginError(`the daemon refused the connection request (HTTP ${a.status})` +
    (msg ? `: ${clean(msg)}` : a.status === 200 ? ': its answer is not a connection request (or its link is not this daemon\'s /connect page)' : ''));
}

/** Opens the link with xdg-open (open on macOS); not waited for, errors ignored. */
function openBrowser(url: string): void {
  const cmd = process.platform === 'darwin' ? 'open' : 'xdg-open';
  try {
    const child = spawn(cmd, [url], { stdio: 'ignore', detached: true });
    child.on('error', () => {});
    child.unref();
  } catch {
    // no opener: the link is printed
  }
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** The settled answer of token (connected, denied, expired, canceled), or null when the budget ran out. */
async function waitForApproval(p: SavedPlace, rq: Request, budgetMs: number): Promise<Record<string, unknown> | null> {
  const until = Date.now() + budgetMs;
  while (Date.now() < until) {
    await sleep(POLL_MS);
    const a = await connectPost(p.apiOrigin, 'token', { deviceCode: rq.deviceCode });
    if (!a || a.status >= 500) continue; // the daemon restarting: try again
    const status = str(a.body?.status);
    if (a.status !== 200 || !status) {
      throw new LoginError(`the daemon no longer knows this request (HTTP ${a.status}); run \`withruntime login\` again`);
    }
    if (status !== 'pending') return a.body;
  }
  return null;
}

/** Connected: unseal, check, save, confirm; the account's name. */
async function connected(p: SavedPlace, privateKey: string, ans: Record<string, unknown>, agentName: string): Promise<string> {
  const sealed = str(ans.encryptedKey), orgId = str(ans.orgId), connectionId = str(ans.connectionId);
  let key = '';
  try {
    if (sealed) key = privateDecrypt({ key: privateKey, oaepHash: 'sha256' }, Buffer.from(sealed, 'base64')).toString('utf8');
  } catch {
    key = '';
  }
  if (!orgId || connectionId === undefined || !LOGIN_KEY_RE.test(key)) {
    throw new LoginError('the daemon returned an invalid credential');
  }
  try {
    writeSaved(p, { version: 1, apiOrigin: p.apiOrigin, authOrigin: p.authOrigin, key, connectionId, orgId, agentName });
  } catch (e) {
    throw new LoginError(`${(e as Error).message} (the directory must be yours and private)`);
  }
  const ok = await connectPost(p.apiOrigin, 'confirm', {}, key);
  if (ok?.status !== 200) throw new LoginError(`the daemon did not confirm the connection (HTTP ${ok?.status ?? 'none: unreachable'})`);
  return orgId;
}

/** `withruntime login`: resolves to 0 once connected; throws a {@link LoginError} otherwise. */
export async function login(o: LoginOptions): Promise<number> {
  const agentName = o.agentName ?? DEFAULT_AGENT_NAME;
  if (!agentNameOk(agentName)) throw new LoginError('--agent-name is 1 to 80 characters, none a control one', 2);
  const p = place(o.apiUrl);
  const { publicKey, privateKey } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  const rq = request(p, await connectPost(p.apiOrigin, 'start', { agentName, publicKey, machine: os.hostname() || 'unknown' }));
  const terminal = o.interactive ?? (Boolean(process.stdin.isTTY) && Boolean(process.stderr.isTTY));
  o.io.err(`Connect your agent: ${rq.url}\nCheck that the browser shows code ${rq.userCode}, then choose Connect agent.\n`);
  if (terminal && !o.noBrowser) openBrowser(rq.url);
  const ans = await waitForApproval(p, rq, o.wait || terminal ? WAIT_FULL_MS : WAIT_AGENT_MS);
  if (!ans) {
    throw new LoginError(`not connected yet: open ${rq.url}, check the code ${rq.userCode} and choose Connect agent; ` +
      'then run `withruntime login` again (or `withruntime login --wait`)', EXIT_PENDING);
  }
  const status = str(ans.status);
  if (status === 'denied') throw new LoginError('the connection was declined');
  if (status !== 'connected') throw new LoginError('the connection request expired; run `withruntime login` again');
  const orgId = await connected(p, privateKey, ans, agentName);
  o.io.err(`Connected as ${clean(agentName)} to ${clean(orgId)}.\n`);
  return 0;
}

/**
 * `withruntime logout`: revokes the key saved for this daemon and removes the file. It
 * refuses while RUNTIME_API_KEY is set (that key is not this machine's login to revoke).
 */
export async function logout(apiUrl: string, io: LoginIo): Promise<number> {
  if (process.env.RUNTIME_API_KEY) {
    throw new LoginError('this shell uses RUNTIME_API_KEY, which logout cannot revoke; unset it to log out of the saved connection');
  }
  const p = place(apiUrl);
  const saved = readSaved(apiUrl);
  if (saved.key === null) throw new LoginError(`no saved connection for ${p.apiOrigin}: ${saved.problem}`);
  const a = await connectPost(p.apiOrigin, 'disconnect', {}, saved.key);
  // 401: revoked already; the file goes all the same.
  if (a?.status !== 200 && a?.status !== 401) {
    throw new LoginError(`the daemon did not revoke the connection (HTTP ${a?.status ?? 'none: unreachable'}); ` +
      `the saved one stays in ${p.file}`);
  }
  try {
    removeSaved(p);
  } catch (e) {
    throw new LoginError(`revoked, but ${(e as Error).message}`);
  }
  io.err(`Logged out: this machine's connection to ${p.apiOrigin} is revoked.\n`);
  return 0;
}
