// Shared by the tests: a fresh build of the package, and the real daemon
// started by the end-to-end suite's own helper.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const PKG = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const REPO = path.resolve(PKG, '..', '..');
export const HELLO_SERVER = path.join(REPO, 'tests', 'mcp', 'fixtures', 'hello-server.mjs');
export { startDaemon, stopDaemon, isRoot, run, waitFor, token, processesMatching } from '../../../tests/e2e/lib.mjs';

function newest(dir) {
  let t = 0;
  for (const f of fs.readdirSync(dir, { recursive: true })) t = Math.max(t, fs.statSync(path.join(dir, f)).mtimeMs);
  return t;
}

/** Builds dist/ when src/ is newer, so the tests never run stale code. */
export function ensureBuilt() {
  const out = path.join(PKG, 'dist', 'cjs', 'package.json');
  if (fs.existsSync(out) && fs.statSync(out).mtimeMs >= newest(path.join(PKG, 'src'))) return;
  const r = spawnSync(process.execPath, [path.join(PKG, 'scripts', 'build.mjs')], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`build failed:\n${r.stdout}${r.stderr}`);
}

ensureBuilt();

/** The package as users import it (the name resolves to this package through "exports"). */
export const sdk = await import('withruntime');

/** A Runtime for daemon d, optionally with its own options. */
export function runtimeFor(d, options = {}) {
  return new sdk.Runtime({ baseUrl: d.url, apiKey: d.key, ...options });
}

/** A fetch that counts what it is asked for (method and path), then calls the real one. */
export function countingFetch(inner = globalThis.fetch) {
  const calls = [], inits = [];
  const f = (url, init) => {
    calls.push(`${init.method} ${new URL(url).pathname}`);
    inits.push(init);
    return inner(url, init);
  };
  Object.assign(f, { calls, inits });
  return f;
}

/** The MCP initialize request a Streamable HTTP client sends first. */
export function initializeRequest(auth) {
  return {
    method: 'POST',
    headers: {
      Accept: 'application/json, text/event-stream',
      'Content-Type': 'application/json',
      Authorization: auth,
    },
    body: JSON.stringify({
      jsonrpc: '2.0', id: 1, method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'withruntime-test', version: '1' } },
    }),
  };
}
