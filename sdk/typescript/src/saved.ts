/**
 * The saved connection of a login (docs/login.md), where Runtime Cloud's official SDKs
 * and this repository's `runtime login` look for it:
 * `${XDG_CONFIG_HOME:-$HOME/.config}/runtime-cloud/<sha256hex(authOrigin "\n" apiOrigin)>.json`,
 * a private directory (0700) and file (0600). Node only.
 */
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import { isAbsolute, join } from 'node:path';

/** The auth origin when RUNTIME_AUTH_URL is unset: the official SDKs' default. */
export const DEFAULT_AUTH_ORIGIN = 'https://withruntime.com';
/** The only shape of key a login saves; the official SDKs ignore any other. */
export const LOGIN_KEY_RE = /^rtcloud_[a-f0-9-]{36}_[A-Za-z0-9_-]{43}$/;
/** What the official readers take. */
const SAVED_MAX = 4096;

/** The file's content, in this key order. */
export interface SavedConnection {
  version: 1;
  apiOrigin: string;
  authOrigin: string;
  key: string;
  connectionId: string;
  orgId: string;
  agentName: string;
}

/** Where the connection of one pair of origins is saved. */
export interface SavedPlace {
  apiOrigin: string;
  authOrigin: string;
  dir: string;
  /** `<hash>.json` */
  name: string;
  /** dir/name */
  file: string;
}

/**
 * An http(s) URL's origin as the official SDKs normalise it: lower case, no path, no
 * trailing slash, the scheme's default port dropped. Null for anything else, or with
 * a user name or password in it.
 */
export function originOf(url: string): string | null {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return null;
  }
  if ((u.protocol !== 'http:' && u.protocol !== 'https:') || u.username || u.password) return null;
  return u.origin;
}

/** `$XDG_CONFIG_HOME/runtime-cloud` (when absolute), else `$HOME/.config/runtime-cloud`. */
export function savedDir(): string | null {
  const xdg = process.env.XDG_CONFIG_HOME;
  if (xdg && isAbsolute(xdg)) return join(xdg, 'runtime-cloud');
  const home = process.env.HOME && isAbsolute(process.env.HOME) ? process.env.HOME : os.homedir();
  return home && isAbsolute(home) ? join(home, '.config', 'runtime-cloud') : null;
}

/** The place of the connection to the daemon at apiUrl; a string says why there is none. */
export function savedPlace(apiUrl: string): SavedPlace | string {
  const apiOrigin = originOf(apiUrl);
  if (!apiOrigin) return `the API URL ${apiUrl} is not an http(s) origin`;
  const auth = process.env.RUNTIME_AUTH_URL || DEFAULT_AUTH_ORIGIN;
  const authOrigin = originOf(auth);
  if (!authOrigin) return `RUNTIME_AUTH_URL (${auth}) is not an http(s) origin`;
  const dir = savedDir();
  if (!dir) return 'neither XDG_CONFIG_HOME nor HOME is an absolute path';
  const name = `${createHash('sha256').update(`${authOrigin}\n${apiOrigin}`).digest('hex')}.json`;
  return { apiOrigin, authOrigin, dir, name, file: join(dir, name) };
}

/** Owned by this user and nobody else may read or write it (not checked where there are no uids). */
function privateToUs(st: fs.Stats): boolean {
  const uid = process.getuid?.();
  return uid === undefined || (st.uid === uid && (st.mode & 0o077) === 0);
}

/** Why the directory may not hold a key, or null when it may. */
function dirProblem(dir: string): string | null {
  let st: fs.Stats;
  try {
    st = fs.lstatSync(dir);
  } catch (e) {
    return (e as NodeJS.ErrnoException).code ?? String(e);
  }
  if (!st.isDirectory()) return `${dir} is not a directory (a link is not taken)`;
  if (!privateToUs(st)) return `the directory ${dir} must be private to your user (mode 0700)`;
  return null;
}

/** The outcome of reading: the key, or why none (`absent` when there is simply no file). */
export type SavedRead =
  | { key: string; connection: Partial<SavedConnection>; place: SavedPlace }
  | { key: null; absent: boolean; problem: string; place: SavedPlace | null };

/**
 * The key saved for the daemon at apiUrl, as the official readers take it: a private
 * directory that is not a link, a private regular file (O_NOFOLLOW) of at most 4096
 * bytes, owned by this user, whose `apiOrigin` is this daemon's and whose `key` has a
 * login's shape. Never throws.
 */
export function readSaved(apiUrl: string): SavedRead {
  const place = savedPlace(apiUrl);
  if (typeof place === 'string') return { key: null, absent: true, problem: place, place: null };
  const fail = (problem: string, absent = false): SavedRead => ({ key: null, absent, problem, place });
  const dp = dirProblem(place.dir);
  if (dp === 'ENOENT') return fail(`no saved login in ${place.file}`, true);
  if (dp) return fail(dp);
  let fd: number;
  try {
    fd = fs.openSync(place.file, fs.constants.O_RDONLY | (fs.constants.O_NOFOLLOW ?? 0) | (fs.constants.O_NONBLOCK ?? 0));
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return fail(`no saved login in ${place.file}`, true);
    return fail(`${place.file} cannot be opened (${code === 'ELOOP' ? 'a link is not taken' : code ?? String(e)})`);
  }
  let text: string;
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) return fail(`${place.file} is not a regular file`);
    if (!privateToUs(st)) return fail(`the saved login ${place.file} must be private to your user (mode 0600); it is ignored`);
    if (st.size > SAVED_MAX) return fail(`${place.file} is larger than ${SAVED_MAX} bytes`);
    const buf = Buffer.alloc(SAVED_MAX + 1);
    const n = fs.readSync(fd, buf, 0, buf.length, 0);
    if (n > SAVED_MAX) return fail(`${place.file} is larger than ${SAVED_MAX} bytes`);
    text = buf.subarray(0, n).toString('utf8');
    buf.fill(0);
  } catch (e) {
    return fail(`${place.file} cannot be read (${(e as NodeJS.ErrnoException).code ?? String(e)})`);
  } finally {
    fs.closeSync(fd);
  }
  let saved: unknown;
  try {
    saved = JSON.parse(text);
  } catch {
    return fail(`${place.file} is not JSON`);
  }
  const s = (saved && typeof saved === 'object' ? saved : {}) as Partial<Record<keyof SavedConnection, unknown>>;
  if (s.apiOrigin !== place.apiOrigin) return fail(`${place.file} was saved for another API origin`);
  if (typeof s.key !== 'string' || !LOGIN_KEY_RE.test(s.key)) return fail(`${place.file} holds no login key`);
  return { key: s.key, connection: s as Partial<SavedConnection>, place };
}

/**
 * Saves the connection: the directory made 0700 (and checked private, not a link),
 * the compact JSON written to a temporary file (exclusive, 0600), fsynced and renamed
 * into place. Throws an Error that says what went wrong.
 */
export function writeSaved(place: SavedPlace, c: SavedConnection): void {
  fs.mkdirSync(place.dir, { recursive: true, mode: 0o700 });
  const dp = dirProblem(place.dir);
  if (dp) throw new Error(`cannot save the connection: ${dp}`);
  // The key order the official SDKs write.
  const text = JSON.stringify({
    version: c.version, apiOrigin: c.apiOrigin, authOrigin: c.authOrigin, key: c.key,
    connectionId: c.connectionId, orgId: c.orgId, agentName: c.agentName,
  });
  const tmp = join(place.dir, `.${place.name}.${process.pid}.tmp`);
  let fd: number | null = null;
  try {
    fd = fs.openSync(tmp, 'wx', 0o600);
    fs.writeFileSync(fd, text);
    fs.fsyncSync(fd);
    fs.closeSync(fd);
    fd = null;
    fs.renameSync(tmp, place.file);
  } catch (e) {
    if (fd !== null) fs.closeSync(fd);
    fs.rmSync(tmp, { force: true });
    throw new Error(`cannot save the connection in ${place.file}: ${(e as Error).message}`);
  }
  // The rename itself, durable (where a directory can be fsynced).
  try {
    const dfd = fs.openSync(place.dir, 'r');
    try {
      fs.fsyncSync(dfd);
    } finally {
      fs.closeSync(dfd);
    }
  } catch {
    // not on this platform
  }
}

/** Removes the saved file; true when it was there. */
export function removeSaved(place: SavedPlace): boolean {
  const dp = dirProblem(place.dir);
  if (dp === 'ENOENT') return false;
  if (dp) throw new Error(`cannot remove ${place.file}: ${dp}`);
  try {
    fs.unlinkSync(place.file);
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw new Error(`cannot remove ${place.file}: ${(e as Error).message}`);
  }
}
