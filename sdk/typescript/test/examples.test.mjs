// The README's examples are the files in examples/: this checks the README
// shows them verbatim, type-checks them against the package's types, and runs
// them against the real daemon.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { startDaemon, stopDaemon, isRoot, run, PKG, HELLO_SERVER } from './helpers.mjs';

const skip = isRoot() ? false : 'needs root (runtimed does)';
const OUT = path.join(PKG, 'build', 'examples');
let d;

before(async () => {
  if (!skip) d = await startDaemon({ prefix: 'runtime-sdk-ts-ex-' });
});
after(() => stopDaemon(d));

/** Runs a compiled example with the daemon's URL and key in the environment. */
async function example(name, args = []) {
  const r = await run(process.execPath, [path.join(OUT, name), ...args], { env: d.env(), timeoutMs: 120_000 });
  assert.equal(r.code, 0, `${name} failed:\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

test('the README shows each example file as it is', () => {
  const readme = fs.readFileSync(path.join(PKG, 'README.md'), 'utf8');
  const blocks = [...readme.matchAll(/<!-- example: (\S+) -->\n```ts\n([\s\S]*?)```/g)];
  assert.ok(blocks.length >= 3, 'the README has the examples');
  for (const [, file, code] of blocks) assert.equal(code, fs.readFileSync(path.join(PKG, file), 'utf8'), file);
});

test('the examples type-check and compile', async () => {
  const r = await run(process.execPath, [path.join(PKG, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', path.join(PKG, 'examples')]);
  assert.equal(r.code, 0, r.stdout + r.stderr);
});

test('examples/quickstart.ts (await using)', { skip }, async () => {
  const out = await example('quickstart.js');
  assert.equal(out, 'hello from Linux\nallowed: api.example.com\nexit 3: nope\n');
  const left = await d.api('GET', '/v1/sandboxes?label=role=demo');
  assert.deepEqual(left.body.data, [], 'await using deleted the sandbox');
});

test('examples/mcp-gateway.ts', { skip }, async () => {
  const out = await example('mcp-gateway.js', [HELLO_SERVER]);
  assert.match(out, /^hello ready tools=hello$/m);
  assert.match(out, /^claude mcp add --transport http hello http:\/\/127\.0\.0\.1:\d+\/mcp\/\S+\/hello --header "Authorization: Bearer \S+"$/m);
  assert.match(out, /^initialize: 200$/m);
  assert.match(out, /^server\/discover: 200 2026-07-28 2025-11-25 2025-06-18 2025-03-26$/m);
  assert.equal((await d.api('GET', '/v1/sandboxes/mcp-gateway-example')).status, 404);
});

test('examples/errors.ts', { skip }, async () => {
  assert.equal(await example('errors.js'), 'not found (404 not_found)\ntaken (name_taken)\nunauthorized\n');
});

test('examples/accounts.ts', { skip }, async () => {
  assert.equal(await example('accounts.js'), 'acme sees: customer-42\nrefused: limit_reached (429)\n' +
    'acme-example: 1 sandbox, 256 MiB, limit 1\nsame sandbox: true\n');
  const left = await d.api('GET', '/v1/accounts');
  assert.deepEqual(left.body, [], 'the example removed its account');
});
