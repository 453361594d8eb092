// Helpers for the MCP gateway suite, on top of ../e2e/lib.mjs (a real runtimed in a
// temp dir): sandboxes with files and whole package trees in them, MCP servers
// started through the API, official SDK clients connected through the gateway,
// raw Streamable HTTP requests (node:http, so that every header is ours, Host
// included) with an SSE reader, and the fingerprint as docs/gateway.md defines it.
//
// Nothing here sleeps for synchronisation: every wait polls a condition with a
// deadline and fails with a message naming what it waited for.

import { spawn, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// Resolved from tests/mcp/node_modules (pinned in tests/mcp/package.json), whatever
// the working directory of `node --test`.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CreateMessageRequestSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

import { Daemon, ROOT, RUNTIME, isRoot, run, startDaemon, token, waitFor } from '../e2e/lib.mjs';

export { ROOT, RUNTIME, isRoot, run, token, waitFor, Client, StreamableHTTPClientTransport };

export const HERE = path.dirname(fileURLToPath(import.meta.url));
export const NODE_MODULES = path.join(HERE, 'node_modules');
export const FIXTURES = path.join(HERE, 'fixtures');
export const VECTORS = path.join(ROOT, 'tests', 'fixtures', 'fingerprint', 'vectors.jsonl');

/** The protocol versions the gateway speaks (docs/gateway.md), oldest first. */
export const VERSIONS = ['2025-03-26', '2025-06-18', '2025-11-25'];

/** Why a daemon test cannot run here, or false. `online` tests reach the npm registry. */
export function skipReason({ online = false } = {}) {
  if (!isRoot()) return 'must run as root (runtimed needs it)';
  if (online && process.env.RUNTIME_E2E_OFFLINE) return 'RUNTIME_E2E_OFFLINE is set';
  return false;
}

// ---------------------------------------------------------------- the daemon

/**
 * A runtimed for MCP tests. With online: true it resolves names for real (the base
 * class points the daemon at a dead loopback nameserver so that no test asks the
 * host's resolver anything), which catalog installs need to reach the registry.
 */
export class McpDaemon extends Daemon {
  constructor(dir, { online = false } = {}) {
    super(dir);
    this.online = online;
  }

  args() {
    const a = super.args();
    if (this.online) a.splice(a.indexOf('--nameserver'), 2);
    return a;
  }

  /** PUT one file into a sandbox (parent directory must exist); throws unless 204. */
  async putFile(id, p, data) {
    const r = await this.api('PUT', `/v1/sandboxes/${enc(id)}/files?path=${encodeURIComponent(p)}`, undefined,
      { raw: typeof data === 'string' ? Buffer.from(data) : data });
    if (r.status !== 204) throw new Error(`PUT ${p} into ${id}: HTTP ${r.status} ${r.text}`);
  }

  async getFile(id, p) {
    const r = await this.api('GET', `/v1/sandboxes/${enc(id)}/files?path=${encodeURIComponent(p)}`);
    if (r.status !== 200) throw new Error(`GET ${p} from ${id}: HTTP ${r.status} ${r.text}`);
    return r.buf;
  }

  /** Replaces a file in one step (PUT a temp file, then mv), so a program that
   * watches it never reads it half written. */
  async replaceFile(id, p, data) {
    const tmp = `${p}.tmp-${crypto.randomBytes(4).toString('hex')}`;
    await this.putFile(id, tmp, data);
    await this.mustExec(id, ['mv', '-f', tmp, p]);
  }

  /** exec that must exit 0; returns the result. */
  async mustExec(id, argv, opts = {}) {
    const r = await this.exec(id, argv, opts);
    if (r.exitCode !== 0 || r.timedOut) {
      throw new Error(`${JSON.stringify(argv)} in ${id}: exit ${r.exitCode}${r.timedOut ? ' (timed out)' : ''}\n` +
        `${r.stdout}\n${r.stderr}`);
    }
    return r;
  }

  // ------------------------------------------------------------ MCP servers

  /** POST /v1/sandboxes/{id}/mcp; returns {status, body}. */
  mcpStartRaw(id, servers) {
    return this.api('POST', `/v1/sandboxes/${enc(id)}/mcp`, { servers });
  }

  /** Starts servers; throws unless 202. Returns the answer (GET's shape). */
  async mcpStart(id, servers) {
    const r = await this.mcpStartRaw(id, servers);
    if (r.status !== 202) throw new Error(`start ${JSON.stringify(servers)}: HTTP ${r.status} ${r.text}`);
    return r.body;
  }

  /** GET /v1/sandboxes/{id}/mcp[?wait=S]; throws unless 200. */
  async mcpStatus(id, { wait } = {}) {
    const q = wait === undefined ? '' : `?wait=${wait}`;
    const r = await this.api('GET', `/v1/sandboxes/${enc(id)}/mcp${q}`, undefined,
      { timeoutMs: ((wait ?? 0) + 30) * 1000 });
    if (r.status !== 200) throw new Error(`GET mcp of ${id}: HTTP ${r.status} ${r.text}`);
    return r.body;
  }

  /**
   * Waits (with ?wait=) until none of `names` is installing or starting; returns
   * {status (the whole GET answer), servers: {name: server}}. Throws with the last
   * answer when the deadline passes or a name is missing.
   */
  async mcpSettle(id, names, { timeoutMs = 60000 } = {}) {
    const deadline = Date.now() + timeoutMs;
    let last;
    for (;;) {
      const left = Math.max(1, Math.min(30, Math.ceil((deadline - Date.now()) / 1000)));
      last = await this.mcpStatus(id, { wait: left });
      const servers = Object.fromEntries((last.servers ?? []).map((s) => [s.name, s]));
      const missing = names.filter((n) => !servers[n]);
      if (missing.length) throw new Error(`no server ${missing.join(', ')} in ${JSON.stringify(last)}`);
      if (names.every((n) => !['installing', 'starting'].includes(servers[n].status))) {
        return { status: last, servers };
      }
      if (Date.now() > deadline) {
        throw new Error(`timed out after ${timeoutMs} ms waiting for ${names.join(', ')} to settle: ` +
          JSON.stringify(last));
      }
    }
  }

  /** Starts servers and waits until they are ready; throws with status and error otherwise. */
  async mcpReady(id, servers, { timeoutMs = 60000 } = {}) {
    await this.mcpStart(id, servers);
    const names = servers.map((s) => s.name ?? s.id);
    const got = await this.mcpSettle(id, names, { timeoutMs });
    for (const n of names) {
      const s = got.servers[n];
      if (s.status !== 'ready') {
        throw new Error(`server ${n} is ${s.status}, not ready: ${s.error ?? ''} ${JSON.stringify(s)}`);
      }
    }
    return got;
  }

  /** DELETE /v1/sandboxes/{id}/mcp/{name}; then waits until it is stopped or gone. */
  async mcpStop(id, name, { timeoutMs = 15000 } = {}) {
    const r = await this.api('DELETE', `/v1/sandboxes/${enc(id)}/mcp/${enc(name)}`);
    if (r.status !== 204) throw new Error(`stop ${name}: HTTP ${r.status} ${r.text}`);
    await waitFor(async () => {
      const st = await this.mcpStatus(id);
      const s = (st.servers ?? []).find((x) => x.name === name);
      return !s || s.phase === 'stopped';
    }, { timeoutMs, what: `server ${name} to stop` });
  }

  /** The sandbox's events after seq. */
  async events(id, after = 0) {
    const r = await this.api('GET', `/v1/sandboxes/${enc(id)}/events?after=${after}`);
    if (r.status !== 200) throw new Error(`events of ${id}: HTTP ${r.status} ${r.text}`);
    return r.body;
  }

  /** The highest event seq so far (0 when none): a mark to look for new events after. */
  async eventMark(id) {
    const ev = await this.events(id);
    return ev.reduce((m, e) => Math.max(m, e.seq ?? 0), 0);
  }

  /** Waits for an event after `after` that pred accepts; returns it. */
  async waitEvent(id, pred, { after = 0, timeoutMs = 15000, what = 'an event' } = {}) {
    let seen = [];
    try {
      return await waitFor(async () => {
        seen = await this.events(id, after);
        return seen.find(pred);
      }, { timeoutMs, what });
    } catch (e) {
      e.message += `\nevents: ${seen.map((x) => JSON.stringify(x)).join('\n  ')}`;
      throw e;
    }
  }
}

const enc = encodeURIComponent;

/** A started McpDaemon in a fresh temp dir. */
export function startMcpDaemon({ online = false, prefix = 'runtime-mcp-' } = {}) {
  return startDaemon({ prefix, make: (dir) => new McpDaemon(dir, { online }) });
}

/** The host npm's registry and its host name (installs go there, nowhere else). */
export function npmRegistry() {
  const r = spawnSync('npm', ['config', 'get', 'registry'], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`npm config get registry: ${r.stderr}`);
  const url = r.stdout.trim();
  return { url, host: new URL(url).hostname };
}

/** Env for a sandbox that installs from the registry: on a machine whose outbound TLS
 * is inspected, node trusts what the host's node trusts (see tests/egress/npm.test.mjs). */
export function registryEnv() {
  const extra = process.env.NODE_EXTRA_CA_CERTS;
  return extra && fs.existsSync(extra) ? { NODE_EXTRA_CA_CERTS: extra } : {};
}

// ---------------------------------------------------------------- files and package trees

function listTree(hostDir) {
  const dirs = [], files = [];
  const walk = (rel) => {
    for (const e of fs.readdirSync(path.join(hostDir, rel), { withFileTypes: true })) {
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) {
        dirs.push(r);
        walk(r);
      } else if (e.isFile()) {
        files.push(r);
      } else if (e.isSymbolicLink()) {
        const st = fs.statSync(path.join(hostDir, r)); // follow: copy what it points at
        if (st.isFile()) files.push(r);
      }
    }
  };
  walk('');
  return { dirs, files };
}

/** Runs argv in chunks so no single exec gets an over-long argument list. */
async function execChunked(d, id, head, args, size = 200) {
  for (let i = 0; i < args.length; i += size) await d.mustExec(id, [...head, ...args.slice(i, i + size)]);
}

/**
 * Copies a host directory tree into the sandbox file by file: one exec makes the
 * directories, then one PUT per file (a few at a time), then executable bits.
 * Slow for big trees (a request per file); copyTreeTar is one request.
 */
export async function copyTree(d, id, hostDir, sandboxDir, { concurrency = 8 } = {}) {
  const { dirs, files } = listTree(hostDir);
  await execChunked(d, id, ['mkdir', '-p', '--'], [sandboxDir, ...dirs.map((x) => `${sandboxDir}/${x}`)]);
  let next = 0;
  const worker = async () => {
    while (next < files.length) {
      const f = files[next++];
      await d.putFile(id, `${sandboxDir}/${f}`, fs.readFileSync(path.join(hostDir, f)));
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const exe = files.filter((f) => fs.statSync(path.join(hostDir, f)).mode & 0o111);
  await execChunked(d, id, ['chmod', '+x', '--'], exe.map((f) => `${sandboxDir}/${f}`));
  return files.length;
}

/**
 * Copies the given paths (relative to hostRoot) into sandboxDir as one tar archive:
 * tar on the host, one PUT, tar -x inside (the sandbox has the host's /usr/bin/tar).
 */
export async function copyTreeTar(d, id, hostRoot, relPaths, sandboxDir) {
  const t = spawnSync('tar', ['-C', hostRoot, '--dereference', '-cf', '-', '--', ...relPaths],
    { maxBuffer: 1 << 30 });
  if (t.status !== 0) throw new Error(`tar on the host: ${t.stderr}`);
  const archive = `/workspace/.upload-${crypto.randomBytes(4).toString('hex')}.tar`;
  await d.mustExec(id, ['mkdir', '-p', '--', sandboxDir]);
  await d.putFile(id, archive, t.stdout);
  await d.mustExec(id, ['tar', '-C', sandboxDir, '--no-same-owner', '-xf', archive], { timeoutMs: 120000 });
  await d.mustExec(id, ['rm', '-f', '--', archive]);
  return t.stdout.length;
}

/**
 * The lock-file paths (node_modules/...) of a package in tests/mcp and everything
 * it needs at run time, resolved as node resolves them (nested copies first).
 */
export function dependencyClosure(pkg) {
  const lock = JSON.parse(fs.readFileSync(path.join(HERE, 'package-lock.json'), 'utf8')).packages;
  const resolve = (from, name) => {
    for (let dir = from; ;) {
      const k = `${dir ? `${dir}/` : ''}node_modules/${name}`;
      if (lock[k]) return k;
      if (!dir) return null;
      const i = dir.lastIndexOf('/node_modules/');
      dir = i < 0 ? '' : dir.slice(0, i);
    }
  };
  const seen = new Set();
  const walk = (k) => {
    if (seen.has(k)) return;
    seen.add(k);
    const p = lock[k];
    for (const dep of Object.keys({ ...p.dependencies, ...p.optionalDependencies })) {
      const r = resolve(k, dep);
      if (r) walk(r);
      else if (!(p.optionalDependencies ?? {})[dep]) throw new Error(`${dep} (needed by ${k}) is not installed`);
    }
  };
  const start = `node_modules/${pkg}`;
  if (!lock[start]) throw new Error(`${pkg} is not in tests/mcp/package-lock.json`);
  walk(start);
  // Nested copies travel with their parent directory.
  return [...seen].filter((k) => ![...seen].some((o) => o !== k && k.startsWith(`${o}/`))).sort();
}

/**
 * Puts @modelcontextprotocol/server-everything (as pinned in tests/mcp) with its
 * dependencies into the sandbox under dir; no network needed. Returns the command
 * that runs it over stdio (its bin is dist/index.js; the first argument picks the
 * transport).
 */
export async function installEverything(d, id, dir = '/workspace/everything') {
  const closure = dependencyClosure('@modelcontextprotocol/server-everything');
  await copyTreeTar(d, id, HERE, closure, dir);
  const main = `${dir}/node_modules/@modelcontextprotocol/server-everything/dist/index.js`;
  await d.mustExec(id, ['test', '-r', main]);
  return ['node', main, 'stdio'];
}

/** The other way: npm install inside the sandbox, through its proxy (the sandbox must
 * allow the registry's host). */
export async function npmInstallInSandbox(d, id, spec, prefix) {
  const { url } = npmRegistry();
  const r = await d.exec(id, ['npm', 'install', '--ignore-scripts', '--no-audit', '--no-fund',
    '--fetch-retries', '1', '--registry', url, '--prefix', prefix, spec],
  { env: registryEnv(), timeoutMs: 180000 });
  if (r.exitCode !== 0) throw new Error(`npm install ${spec}: ${r.stdout}\n${r.stderr}`);
}

/**
 * What a stdio server offers when asked directly (on the host, no gateway):
 * initialize with `capabilities`, then every page of tools/list, exactly as sent.
 */
export function listToolsDirect(argv, { capabilities = {}, cwd, timeoutMs = 20000 } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0], argv.slice(1), { cwd, stdio: ['pipe', 'pipe', 'ignore'] });
    const tools = [];
    let out = '';
    const timer = setTimeout(() => finish(new Error(`${argv.join(' ')}: no tool list in ${timeoutMs} ms`)),
      timeoutMs);
    const send = (m) => child.stdin.write(JSON.stringify(m) + '\n');
    function finish(err, value) {
      clearTimeout(timer);
      child.kill('SIGKILL');
      if (err) reject(err);
      else resolve(value);
    }
    child.on('error', (e) => finish(e));
    child.stdin.on('error', () => {});
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (d) => {
      out += d;
      let i;
      while ((i = out.indexOf('\n')) >= 0) {
        const line = out.slice(0, i);
        out = out.slice(i + 1);
        let m;
        try {
          m = JSON.parse(line);
        } catch {
          return finish(new Error(`${argv.join(' ')} wrote a line that is not JSON: ${line.slice(0, 200)}`));
        }
        if (m.id === 1) {
          send({ jsonrpc: '2.0', method: 'notifications/initialized' });
          send({ jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} });
        } else if (typeof m.id === 'number' && m.id >= 2 && !m.method) {
          if (m.error) return finish(new Error(`tools/list: ${JSON.stringify(m.error)}`));
          tools.push(...m.result.tools);
          if (!m.result.nextCursor) return finish(null, tools);
          send({ jsonrpc: '2.0', id: m.id + 1, method: 'tools/list', params: { cursor: m.result.nextCursor } });
        } else if (m.method && m.id !== undefined) {
          send({ jsonrpc: '2.0', id: m.id, result: m.method === 'roots/list' ? { roots: [] } : {} });
        }
      }
    });
    send({
      jsonrpc: '2.0', id: 1, method: 'initialize',
      params: {
        protocolVersion: '2025-06-18', capabilities, clientInfo: { name: 'runtime-direct', version: '1.0.0' },
      },
    });
  });
}

// ---------------------------------------------------------------- SDK clients

/**
 * An official SDK client connected through the gateway. handlers: {sampling,
 * elicitation} answer the server's requests (the client announces both
 * capabilities either way, as the brief's clients do).
 */
export async function connectClient(url, authorization, {
  name = 'runtime-test', capabilities = { sampling: {}, elicitation: {} }, sampling, elicitation,
} = {}) {
  const client = new Client({ name, version: '1.0.0' }, { capabilities });
  if (sampling) client.setRequestHandler(CreateMessageRequestSchema, sampling);
  if (elicitation) client.setRequestHandler(ElicitRequestSchema, elicitation);
  client.errors = [];
  client.onerror = (e) => client.errors.push(e);
  const headers = authorization ? { Authorization: authorization } : {};
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  await client.connect(transport);
  return client;
}

/** Ends the session (DELETE) and closes the client; never throws. */
export async function closeClient(client) {
  if (!client) return;
  try {
    await client.transport?.terminateSession?.();
  } catch {}
  try {
    await client.close();
  } catch {}
}

/** The text parts of a tool result, joined. */
export function resultText(r) {
  return (r?.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

// ---------------------------------------------------------------- raw HTTP and SSE

/**
 * One HTTP request on a fresh connection; resolves at the response head with
 * {status, headers, res, req}. Set expectContinue for big bodies: the body goes out
 * only after "100 Continue", so an early refusal (413) arrives as a response, not
 * as a reset while we still write.
 */
export function httpSend(url, {
  method = 'GET', headers = {}, body, timeoutMs = 30000, expectContinue = false,
} = {}) {
  const u = new URL(url);
  const h = { ...headers };
  const payload = body === undefined ? undefined : Buffer.isBuffer(body) ? body : Buffer.from(body);
  if (payload !== undefined) h['Content-Length'] = String(payload.length);
  if (expectContinue) h.Expect = '100-continue';
  return new Promise((resolve, reject) => {
    // A Host in headers replaces node's own (the Host checks need that).
    const req = http.request({
      host: u.hostname, port: u.port, path: u.pathname + u.search, method, headers: h, agent: false,
    });
    let answered = false;
    const timer = setTimeout(() => {
      req.destroy(new Error(`no answer to ${method} ${u.pathname} in ${timeoutMs} ms`));
    }, timeoutMs);
    req.on('response', (res) => {
      answered = true;
      clearTimeout(timer);
      resolve({ status: res.statusCode, headers: res.headers, res, req });
    });
    req.on('error', (e) => {
      clearTimeout(timer);
      if (!answered) reject(e);
    });
    if (payload === undefined) req.end();
    else if (expectContinue) req.on('continue', () => req.end(payload));
    else req.end(payload);
  });
}

/** Reads a whole response body (bounded by a deadline). */
export function readBody(res, timeoutMs = 30000) {
  return new Promise((resolve, reject) => {
    const parts = [];
    const timer = setTimeout(() => {
      res.destroy();
      reject(new Error(`body not complete in ${timeoutMs} ms`));
    }, timeoutMs);
    res.on('data', (c) => parts.push(c));
    res.on('end', () => {
      clearTimeout(timer);
      resolve(Buffer.concat(parts));
    });
    res.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
  });
}

/** httpSend + readBody: {status, headers, buf, text, json}. An SSE stream is not read
 * (it may never end): it is closed at once, with text '(SSE stream)'. */
export async function httpCall(url, opts = {}) {
  const r = await httpSend(url, opts);
  if (isType(r.headers['content-type'], 'text/event-stream')) {
    r.res.destroy();
    return { status: r.status, headers: r.headers, buf: Buffer.alloc(0), text: '(SSE stream)', json: null };
  }
  const buf = await readBody(r.res, opts.timeoutMs);
  const text = buf.toString('utf8');
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {}
  return { status: r.status, headers: r.headers, buf, text, json };
}

/**
 * Server-Sent Events from a response stream, parsed as the HTML standard says:
 * events are {id, event, data, retry}; an event with only an id (the "priming"
 * event of 2025-11-25) is kept with data ''. `next(pred)` waits for one.
 */
export class SseReader {
  /** res: a node:http response, or a fetch Response (then controller, its AbortController,
   * is what close() aborts). Every raw line is kept in lines. */
  constructor(res, { controller } = {}) {
    this.res = res;
    this.controller = controller;
    this.events = [];
    this.lines = [];
    this.ended = false;
    this.error = null;
    this.waiters = new Set();
    this.buf = '';
    this.cur = { data: [] };
    this.done = new Promise((resolve) => { this.resolveDone = resolve; });
    if (typeof res.body?.getReader === 'function') {
      this.pump(res.body);
      return;
    }
    res.setEncoding('utf8');
    res.on('data', (chunk) => this.feed(chunk));
    res.on('end', () => this.finish());
    res.on('close', () => this.finish());
    res.on('error', (e) => {
      this.error = e;
      this.finish();
    });
  }

  async pump(body) {
    const dec = new TextDecoder();
    try {
      for await (const chunk of body) this.feed(dec.decode(chunk, { stream: true }));
    } catch (e) {
      this.error = e;
    }
    this.finish();
  }

  feed(chunk) {
    this.buf += chunk;
    for (;;) {
      const m = /\r\n|\r|\n/.exec(this.buf);
      if (!m) break;
      // A lone \r at the very end may be the first half of \r\n: wait for more.
      if (m[0] === '\r' && m.index === this.buf.length - 1) break;
      const line = this.buf.slice(0, m.index);
      this.buf = this.buf.slice(m.index + m[0].length);
      this.line(line);
    }
  }

  line(line) {
    this.lines.push(line);
    if (line === '') return this.dispatch();
    if (line.startsWith(':')) return; // comment (keep-alive)
    const i = line.indexOf(':');
    const field = i < 0 ? line : line.slice(0, i);
    let value = i < 0 ? '' : line.slice(i + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') this.cur.data.push(value);
    else if (field === 'id' && !value.includes('\0')) this.cur.id = value;
    else if (field === 'event') this.cur.event = value;
    else if (field === 'retry' && /^\d+$/.test(value)) this.cur.retry = Number(value);
  }

  dispatch() {
    const c = this.cur;
    this.cur = { data: [] };
    if (!c.data.length && c.id === undefined && c.retry === undefined && c.event === undefined) return;
    const ev = { id: c.id, event: c.event, retry: c.retry, data: c.data.join('\n') };
    try {
      ev.message = ev.data ? JSON.parse(ev.data) : undefined;
    } catch {
      ev.message = undefined;
    }
    this.events.push(ev);
    this.wake();
  }

  finish() {
    if (this.ended) return;
    this.ended = true;
    this.resolveDone();
    this.wake();
  }

  wake() {
    for (const w of [...this.waiters]) w();
  }

  /** JSON-RPC messages received so far (events with data). */
  messages() {
    return this.events.filter((e) => e.message !== undefined).map((e) => e.message);
  }

  /** Waits for an event that pred accepts (searching from the start); null when the
   * stream ended first; throws at the deadline. */
  next(pred, { timeoutMs = 15000, what = 'an SSE event' } = {}) {
    return new Promise((resolve, reject) => {
      const check = () => {
        const ev = this.events.find(pred);
        if (ev || this.ended) {
          this.waiters.delete(check);
          clearTimeout(timer);
          resolve(ev ?? null);
        }
      };
      const timer = setTimeout(() => {
        this.waiters.delete(check);
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}; got ` +
          JSON.stringify(this.events).slice(0, 2000)));
      }, timeoutMs);
      this.waiters.add(check);
      check();
    });
  }

  /** Collects for ms milliseconds (or until the stream ends), then returns all events. */
  async settle(ms) {
    await new Promise((resolve) => {
      const check = () => this.ended && done();
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(check);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.waiters.add(check);
      check();
    });
    return this.events;
  }

  /** Waits (timeoutMs at most) for the server to end the stream; true when it did. */
  async end(timeoutMs) {
    let timer;
    await Promise.race([this.done, new Promise((r) => { timer = setTimeout(r, timeoutMs); })]);
    clearTimeout(timer);
    return this.ended;
  }

  close() {
    if (this.controller) this.controller.abort(); /* undici destroys the socket mid-body */
    else this.res.destroy();
    this.finish();
  }
}

/** True when a Content-Type header names this media type (parameters ignored). */
export function isType(ct, type) {
  return typeof ct === 'string' && ct.split(';')[0].trim().toLowerCase() === type;
}

export const ACCEPT_BOTH = 'application/json, text/event-stream';

/** base with extra laid over it; names compared without case; undefined removes. */
export function mergeHeaders(base, extra) {
  const out = { ...base };
  for (const [k, v] of Object.entries(extra)) {
    for (const o of Object.keys(out)) if (o.toLowerCase() === k.toLowerCase()) delete out[o];
    if (v !== undefined) out[k] = v;
  }
  return out;
}

/**
 * A Streamable HTTP client session done by hand: initialize (which must hand out a
 * session id), then requests with Mcp-Session-Id and, from 2025-06-18 on,
 * MCP-Protocol-Version. Answers may come as JSON or as an SSE stream; both are read.
 */
export class RawSession {
  constructor(url, authorization, { version = '2025-06-18' } = {}) {
    this.url = url;
    this.authorization = authorization;
    this.version = version;
    this.sessionId = null;
    this.nextId = 1;
  }

  /** The headers a well-behaved client sends; extra replaces any of them (names
   * compared without case), and a value of undefined removes it. */
  headers(extra = {}) {
    const h = { Accept: ACCEPT_BOTH, 'Content-Type': 'application/json' };
    if (this.authorization) h.Authorization = this.authorization;
    if (this.sessionId) h['Mcp-Session-Id'] = this.sessionId;
    if (this.sessionId && this.version !== '2025-03-26') h['MCP-Protocol-Version'] = this.version;
    return mergeHeaders(h, extra);
  }

  /**
   * POSTs one message (or a batch); returns {status, headers, contentType, messages,
   * events, text}. For an SSE answer it reads until every request id in the body has
   * its response, or the stream ends, then closes the stream.
   */
  async post(body, { headers = {}, timeoutMs = 30000, raw } = {}) {
    const text = raw ?? JSON.stringify(body);
    const r = await httpSend(this.url, { method: 'POST', headers: this.headers(headers), body: text, timeoutMs });
    const ct = r.headers['content-type'];
    const out = { status: r.status, headers: r.headers, contentType: ct, messages: [], events: [], text: '' };
    if (isType(ct, 'text/event-stream')) {
      const sse = new SseReader(r.res);
      const ids = (Array.isArray(body) ? body : [body]).filter((m) => m && m.method && m.id !== undefined)
        .map((m) => m.id);
      const done = () => ids.every((id) => sse.messages().some((m) => m.id === id && !m.method));
      try {
        await sse.next(() => done(), { timeoutMs, what: `responses to ${JSON.stringify(ids)}` });
        // The server should end the stream after the last response; give it a moment
        // rather than cutting it off (a cut may look like a client gone away).
        await sse.settle(500);
      } finally {
        sse.close();
      }
      out.events = sse.events;
      out.messages = sse.messages();
    } else {
      const buf = await readBody(r.res, timeoutMs);
      out.text = buf.toString('utf8');
      if (out.text) {
        try {
          const j = JSON.parse(out.text);
          out.json = j;
          out.messages = Array.isArray(j) ? j : [j];
        } catch {}
      }
    }
    return out;
  }

  /** initialize + notifications/initialized; returns the InitializeResult. */
  async initialize({ capabilities = {}, protocolVersion = this.version } = {}) {
    const id = this.nextId++;
    const r = await this.post({
      jsonrpc: '2.0', id, method: 'initialize',
      params: { protocolVersion, capabilities, clientInfo: { name: 'runtime-raw', version: '1.0.0' } },
    });
    if (r.status !== 200) throw new Error(`initialize: HTTP ${r.status} ${r.text}`);
    const sid = r.headers['mcp-session-id'];
    if (!sid) throw new Error(`initialize gave no Mcp-Session-Id: ${JSON.stringify(r.headers)}`);
    this.sessionId = sid;
    const res = r.messages.find((m) => m.id === id);
    if (!res || !res.result) throw new Error(`initialize failed: ${JSON.stringify(r.messages)} ${r.text}`);
    this.initResult = res.result;
    this.version = res.result.protocolVersion; // what later requests name, as SDK clients do
    const n = await this.post({ jsonrpc: '2.0', method: 'notifications/initialized' });
    if (n.status !== 202) throw new Error(`notifications/initialized: HTTP ${n.status} ${n.text}`);
    return res.result;
  }

  /** One request; returns its result or throws with the JSON-RPC error. */
  async request(method, params, opts) {
    const id = this.nextId++;
    const msg = { jsonrpc: '2.0', id, method };
    if (params !== undefined) msg.params = params;
    const r = await this.post(msg, opts);
    const res = r.messages.find((m) => m.id === id && !m.method);
    if (r.status !== 200 || !res) {
      throw new Error(`${method}: HTTP ${r.status} ${r.text} ${JSON.stringify(r.messages)}`);
    }
    if (res.error) throw Object.assign(new Error(`${method}: ${JSON.stringify(res.error)}`), { rpc: res.error });
    return res.result;
  }

  /** Every tool over all pages, exactly as sent (no SDK schema in between). */
  async listTools() {
    const tools = [];
    let cursor;
    for (let page = 0; page < 100; page++) {
      const res = await this.request('tools/list', cursor ? { cursor } : {});
      tools.push(...res.tools);
      if (!res.nextCursor) return tools;
      cursor = res.nextCursor;
    }
    throw new Error('tools/list: more than 100 pages');
  }

  /** Opens the GET stream: {status, headers, sse (when it is one)}. */
  async openGet(extra = {}) {
    const headers = this.headers({ Accept: 'text/event-stream', 'Content-Type': undefined, ...extra });
    const r = await httpSend(this.url, { method: 'GET', headers });
    const out = { status: r.status, headers: r.headers, res: r.res };
    if (isType(r.headers['content-type'], 'text/event-stream')) out.sse = new SseReader(r.res);
    else out.text = (await readBody(r.res)).toString('utf8');
    return out;
  }

  /** DELETE the session; returns the status. */
  async close() {
    if (!this.sessionId) return null;
    const r = await httpCall(this.url, { method: 'DELETE', headers: this.headers({ 'Content-Type': undefined }) });
    return r.status;
  }
}

// ---------------------------------------------------------------- fingerprints

function cmpCodePoints(a, b) {
  const x = Array.from(a), y = Array.from(b);
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const d = x[i].codePointAt(0) - y[i].codePointAt(0);
    if (d) return d;
  }
  return x.length - y.length;
}

/** Python's json.dumps(v, sort_keys=True, separators=(",", ":")) (ensure_ascii) for
 * values parsed by JSON.parse; numbers as JavaScript writes them, which is Python's
 * form for the integers real tool lists hold (not for floats like 1e2). */
export function canonical(v) {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    return `{${Object.keys(v).sort(cmpCodePoints).map((k) => `${canonical(k)}:${canonical(v[k])}`).join(',')}}`;
  }
  if (typeof v === 'string') {
    // Python escapes everything outside space..~ (DEL too); UTF-16 units, lower-case hex.
    return JSON.stringify(v)
      .replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  }
  return JSON.stringify(v);
}

/** The fingerprint (docs/gateway.md) of a tools array: {sha256 (64 hex), short (16 hex)}. */
export function fingerprint(tools) {
  const sorted = [...tools].sort((a, b) => cmpCodePoints(a.name, b.name)); // stable
  const sha256 = crypto.createHash('sha256').update(canonical(sorted)).digest('hex');
  return { sha256, short: sha256.slice(0, 16) };
}

/** The fingerprint test vectors (tests/fixtures/fingerprint), by name. */
export function vectors() {
  const out = {};
  for (const l of fs.readFileSync(VECTORS, 'utf8').split('\n').filter(Boolean)) {
    const v = JSON.parse(l);
    out[v.name] = v;
  }
  return out;
}

/** A random link-looking path segment (for wrong-link checks). */
export function randomHex(bytes = 16) {
  return crypto.randomBytes(bytes).toString('hex');
}

/** The same URL with another link segment: {publicUrl}/mcp/{link}/{server}. */
export function withLink(url, link) {
  const u = new URL(url);
  const parts = u.pathname.split('/');
  const i = parts.indexOf('mcp');
  if (i < 0 || parts.length < i + 3) throw new Error(`not a gateway URL: ${url}`);
  parts[i + 1] = link;
  u.pathname = parts.join('/');
  return u.toString();
}

/** The same URL with another server name. */
export function withServer(url, server) {
  const u = new URL(url);
  const parts = u.pathname.split('/');
  parts[parts.length - 1] = server;
  u.pathname = parts.join('/');
  return u.toString();
}
