// The official Python SDK clients through the gateway (docs/protocol-2026-07-28.md
// §5.5): mcp 2.x's Client in mode "2026-07-28" (adopts the modern revision, no
// handshake), "auto" (its default: probes server/discover, and must land modern
// against our gateway) and "legacy" (the 2025 initialize handshake), and the 1.x
// ClientSession (legacy only). Each runs tests/mcp/fixtures/py-client.py, which
// prints one JSON line per step: the era, the tool list, echo and get-sum, a
// sampling and an elicitation request answered by the client's callbacks (in the
// modern era they arrive as input_required results the client fulfils), progress,
// log messages, a listen stream's honoured filter (modern), and the HTTP exchanges
// it made (recorded by httpx event hooks).
//
// Servers: server-everything (copied in from tests/mcp), the catalog's memory server
// (installed from the npm registry, in a daemon of its own), the conformance fixture
// (tests/mcp/fixtures/conformance-server.mjs, for its deterministic log tool) and a
// stdio server that speaks only 2026-07-28 (fixtures/only-2026-server.mjs), in one
// sandbox, shared by all clients.
//
// The SDKs come from PyPI (wheels only) into venvs made with /usr/bin/python3 -m venv,
// cached under build/py-clients/mcp-<version> (reused when complete); skipped offline
// (RUNTIME_E2E_OFFLINE) or where python3 cannot make a venv (a failure instead under
// RUNTIME_REQUIRE_ALL, as in CI).

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import {
  FIXTURES, ROOT, copyTreeTar, dependencyClosure, HERE, installEverything, run, skipReason, startMcpDaemon, token,
} from './lib.mjs';
import { stopDaemon } from '../e2e/lib.mjs';

const PYTHON = '/usr/bin/python3';
const MODERN = '2026-07-28';
const V2 = '2.3.0';
// The newest 1.x on PyPI when this was written (pip index versions mcp).
const V1 = process.env.RUNTIME_PY_MCP_V1 ?? '1.30.0';
const CLIENT = path.join(FIXTURES, 'py-client.py');
const VENVS = path.join(ROOT, 'build', 'py-clients');

/** What this host lacks to make the venvs, or null. */
function pythonMissing() {
  if (!fs.existsSync(PYTHON)) return `${PYTHON} is missing`;
  const v = spawnSync(PYTHON, ['-c', 'import sys, venv, ensurepip; print(sys.version_info >= (3, 10))'],
    { encoding: 'utf8' });
  if (v.status !== 0) return `${PYTHON} cannot make a venv (python3 -m venv / ensurepip missing): ${v.stderr.trim()}`;
  if (v.stdout.trim() !== 'True') return `${PYTHON} is older than 3.10, which the MCP SDK needs`;
  return null;
}

/** Why the Python clients cannot run here, or false. Under RUNTIME_REQUIRE_ALL (CI) a
 * missing python3-venv is a failure (in before()), not a skip. */
function pythonSkip() {
  const base = skipReason({ online: true });
  if (base) return base;
  const missing = pythonMissing();
  if (missing && !process.env.RUNTIME_REQUIRE_ALL) return missing;
  return false;
}

/**
 * A venv with mcp==version, made once and kept under build/py-clients (a venv is
 * complete when its marker names the version pip installed). Returns its python.
 */
async function venvWith(version) {
  const dir = path.join(VENVS, `mcp-${version}`);
  const py = path.join(dir, 'bin', 'python');
  const marker = path.join(dir, '.runtime-complete');
  if (fs.existsSync(marker) && fs.readFileSync(marker, 'utf8').trim() === version && fs.existsSync(py)) return py;
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(VENVS, { recursive: true });
  const mk = await run(PYTHON, ['-m', 'venv', dir], { timeoutMs: 120000 });
  if (mk.code !== 0) throw new Error(`python3 -m venv ${dir}: ${mk.stdout}\n${mk.stderr}`);
  // Wheels only, as the catalog's Python installs: no package's build code runs here.
  const pip = await run(py, ['-m', 'pip', 'install', '--disable-pip-version-check', '--no-input', '-q',
    '--only-binary=:all:', `mcp==${version}`], { timeoutMs: 480000 });
  if (pip.code !== 0) throw new Error(`pip install mcp==${version}: ${pip.stdout}\n${pip.stderr}`);
  const got = await run(py, ['-c', 'import importlib.metadata as m; print(m.version("mcp"))']);
  if (got.stdout.trim() !== version) throw new Error(`the venv has mcp ${got.stdout.trim()}, not ${version}`);
  fs.writeFileSync(marker, `${version}\n`);
  return py;
}

/**
 * Runs py-client.py; returns {steps: {name: line}, lines, out, err}. Fails with the
 * whole output when it exits non-zero or reports an error step.
 */
async function pyClient(py, args, { timeoutMs = 180000, allowErrors = false } = {}) {
  const r = await run(py, [CLIENT, ...args], { timeoutMs });
  const lines = r.stdout.split('\n').filter(Boolean).map((l) => {
    try {
      return JSON.parse(l);
    } catch {
      return { step: 'unparsed', line: l };
    }
  });
  const steps = Object.fromEntries(lines.map((l) => [l.step, l]));
  const dump = `exit ${r.code} ${r.signal ?? ''}\nstdout:\n${r.stdout.slice(0, 12000)}\nstderr:\n${r.stderr.slice(-6000)}`;
  const errors = lines.filter((l) => l.step === 'error');
  if (!allowErrors) {
    assert.deepEqual(errors, [], `py-client.py reported errors:\n${dump}`);
    assert.equal(r.code, 0, `py-client.py failed:\n${dump}`);
  }
  assert.ok(steps.done, `py-client.py did not finish:\n${dump}`);
  return { steps, lines, errors, dump };
}

const sorted = (a) => [...a].sort();

/** What a modern client's exchanges must look like: POSTs only, no session id
 * either way, MCP-Protocol-Version 2026-07-28 and Mcp-Method on every POST, and
 * no initialize (docs/protocol-2026-07-28.md W-1, W-21, W-22, W-27). */
function assertModernWire(wire, dump) {
  assert.ok(wire?.exchanges?.length, `no exchanges recorded\n${dump}`);
  for (const x of wire.exchanges) {
    const t = `${JSON.stringify(x)}\n${dump}`;
    assert.equal(x.method, 'POST', `a modern client sends only POSTs: ${t}`);
    assert.equal(x.headers['mcp-session-id'], undefined, `no request carries Mcp-Session-Id: ${t}`);
    assert.equal(x.response_session_id ?? undefined, undefined, `no answer sets Mcp-Session-Id: ${t}`);
    assert.notEqual(x.body_method, 'initialize', `no initialize: ${t}`);
    assert.equal(x.headers['mcp-protocol-version'], MODERN, `MCP-Protocol-Version: ${t}`);
    if (x.body_method) assert.equal(x.headers['mcp-method'], x.body_method, `Mcp-Method: ${t}`);
    if (x.body_method === 'tools/call') assert.ok(x.headers['mcp-name'], `Mcp-Name on tools/call: ${t}`);
    // The call the client gave up (the cancel step) has no answer to record.
    const givenUp = x.headers['mcp-name'] === 'trigger-long-running-operation' && x.status == null;
    if (givenUp) continue;
    if (x.body_id !== null && x.body_id !== undefined) assert.equal(x.status, 200, `a request is answered 200: ${t}`);
    // The client's notifications/cancelled for the given-up call may still be in flight
    // when it exits.
    else if (x.body_method && !(x.body_method === 'notifications/cancelled' && x.status == null)) {
      assert.equal(x.status, 202, `a notification is answered 202: ${t}`);
    }
  }
}

/** A legacy client: initialize first (after auto's probe), a session id handed out
 * and carried on every later request. */
function assertLegacyWire(wire, dump, { probed = false } = {}) {
  const posts = wire.exchanges.filter((x) => x.method === 'POST');
  let i = 0;
  if (probed) {
    assert.equal(posts[0]?.body_method, 'server/discover', `auto probes first\n${dump}`);
    i = 1;
  }
  const init = posts[i];
  assert.equal(init?.body_method, 'initialize', `initialize: ${dump}`);
  const sid = init.response_session_id;
  assert.ok(sid, `initialize hands out Mcp-Session-Id\n${dump}`);
  for (const x of wire.exchanges.slice(wire.exchanges.indexOf(init) + 1)) {
    assert.equal(x.headers['mcp-session-id'], sid, `every later request carries the session: ${JSON.stringify(x)}\n${dump}`);
  }
}

describe('Python SDK clients through the gateway', { skip: pythonSkip() }, () => {
  let d, sb, everything, fixture, only2026, solo, auth, py2, py1;

  before(async () => {
    const missing = pythonMissing();
    if (missing) throw new Error(`${missing}; RUNTIME_REQUIRE_ALL is set (scripts/install-deps installs python3-venv)`);
    // The venvs first (slow only the first time), then the daemon.
    py2 = await venvWith(V2);
    py1 = await venvWith(V1);
    d = await startMcpDaemon({ prefix: 'runtime-pysdk-' });
    sb = await d.create({ name: 'mcp-python-sdk', memoryMiB: 1024 });
    const cmd = await installEverything(d, sb.id);
    await copyTreeTar(d, sb.id, HERE, dependencyClosure('@modelcontextprotocol/sdk'), '/workspace/conf');
    await d.putFile(sb.id, '/workspace/conf/conformance-server.mjs',
      fs.readFileSync(path.join(FIXTURES, 'conformance-server.mjs')));
    const closure = [...new Set([...dependencyClosure('@modelcontextprotocol/server'), 'node_modules/zod'])];
    await copyTreeTar(d, sb.id, HERE, closure, '/workspace/modern');
    await d.putFile(sb.id, '/workspace/modern/server.mjs', fs.readFileSync(path.join(FIXTURES, 'only-2026-server.mjs')));
    const got = await d.mcpReady(sb.id, [
      { name: 'everything', command: cmd },
      { name: 'fixture', command: ['node', '/workspace/conf/conformance-server.mjs'] },
      { name: 'only2026', command: ['node', '/workspace/modern/server.mjs'] },
      { name: 'solo', command: [...cmd, 'solo'], isolation: 'session' },
    ], { timeoutMs: 90000 });
    solo = got.servers.solo;
    everything = got.servers.everything;
    fixture = got.servers.fixture;
    only2026 = got.servers.only2026;
    auth = got.status.headers.Authorization;
  }, { timeout: 900000 });
  after(async () => {
    await stopDaemon(d);
  });

  const cases = [
    { sdk: 2, mode: MODERN, era: 'modern' },
    { sdk: 2, mode: 'auto', era: 'modern' },
    { sdk: 2, mode: 'legacy', era: 'legacy' },
    { sdk: 1, mode: 'legacy', era: 'legacy' },
  ];
  for (const { sdk, mode, era } of cases) {
    test(`mcp ${sdk === 2 ? V2 : V1} mode ${mode}: lands ${era}; list, call, sampling, elicitation, progress, logs`,
      { timeout: 240000 }, async () => {
        const prompt = token('prompt'), answer = token('answer'), who = token('name'), msg = token('echo');
        const { steps, dump } = await pyClient(sdk === 2 ? py2 : py1, [
          '--url', everything.url, '--log-url', fixture.url, '--token', auth.replace(/^Bearer /, ''),
          '--sdk', String(sdk), '--mode', mode, '--prompt', prompt, '--answer', answer, '--name', who, '--message', msg,
          // mcp 1.x keeps the HTTP request of a call it gave up open, and fails at exit
          // when the answer comes after its session closed (the SDK's own doing, whatever
          // the answer): the cancel step is for 2.x.
          ...(sdk === 1 ? ['--steps', 'tools,echo,sum,sampling,elicitation,progress,parallel,listen'] : []),
        ]);
        const s = (k) => {
          assert.ok(steps[k], `no step ${k}:\n${dump}`);
          return steps[k];
        };

        assert.equal(s('connect').era, era, `mode ${mode} lands ${era}:\n${dump}`);
        if (era === 'modern') assert.equal(s('connect').protocolVersion, MODERN, dump);
        assert.deepEqual(sorted(s('tools').names), sorted(everything.tools), `the approved list:\n${dump}`);
        assert.equal(s('echo').text, `Echo: ${msg}`, dump);
        assert.match(s('sum').text, /\b42\b/, dump);

        assert.equal(s('sampling').asked.length, 1, `one sampling request reached the callback:\n${dump}`);
        assert.ok(JSON.stringify(s('sampling').asked[0].messages).includes(prompt),
          `the callback got the server's params:\n${dump}`);
        assert.ok(s('sampling').text.includes(answer), `the tool result carries the callback's answer:\n${dump}`);

        assert.equal(s('elicitation').asked.length, 1, `one elicitation reached the callback:\n${dump}`);
        assert.ok(s('elicitation').asked[0].requestedSchema?.properties?.name, `the server's schema:\n${dump}`);
        assert.ok(s('elicitation').text.includes(who), `the result carries what the callback entered:\n${dump}`);

        assert.deepEqual(s('progress').progress.map((p) => p[0]), [1, 2, 3, 4], `progress:\n${dump}`);
        assert.match(s('progress').text, /completed/i, dump);

        // Eight calls at once on one client: each gets its own answer (ids mapped per request).
        const par = s('parallel');
        assert.deepEqual(par.texts, par.sent.map((x) => `Echo: ${x.message}`), `each call its own answer:\n${dump}`);
        // A 4 s call given up after 1 s ends then, and the gateway serves the next call.
        if (sdk === 2) {
          assert.equal(s('cancel').outcome, 'cancelled', dump);
          assert.ok(s('cancel').seconds < 3, `the abandoned call ended when given up:\n${dump}`);
          assert.equal(s('cancel').after, `Echo: ${msg}`, dump);
        }

        // The fixture's test_tool_with_logging sends three info lines while it runs.
        const logs = s('logs');
        assert.equal(logs.text, 'Tool with logging executed successfully', dump);
        assert.deepEqual(logs.messages.map((m) => [m.level, m.data]), [
          ['info', 'Tool execution started'], ['info', 'Tool processing data'], ['info', 'Tool execution completed'],
        ], `the three log lines, in order, to the logging callback:\n${dump}`);
        if (era === 'modern') {
          // Without a per-request logLevel a modern client gets no log lines (W-29).
          const quiet = s('logs-unrequested');
          assert.equal(quiet.text, 'Tool with logging executed successfully', dump);
          assert.deepEqual(quiet.messages, [], `no log line without logLevel (W-29):\n${dump}`);
        }

        const wire = s('wire');
        if (era === 'modern') {
          // server-everything announces both list changes: both are honoured (W-41).
          assert.deepEqual(s('listen').honored, { toolsListChanged: true, promptsListChanged: true }, dump);
          assertModernWire(wire, dump);
          assertModernWire(s('wire-logs'), dump);
          // The per-request opt-in went out on the logged call, and only there.
          const calls = s('wire-logs').exchanges.filter((x) => x.body_method === 'tools/call');
          assert.deepEqual(calls.map((x) => x.log_level ?? null), ['info', null], `the opt-in on the first call only:\n${dump}`);
          const methods = wire.exchanges.map((x) => x.body_method);
          if (mode === 'auto') assert.equal(methods[0], 'server/discover', `auto probes first:\n${dump}`);
          // Sampling and elicitation were input_required rounds: the same call
          // retried with inputResponses (recorded by the client script).
          assert.ok(wire.exchanges.some((x) => x.body_method === 'tools/call' && x.input_responses),
            `a tools/call retried with inputResponses:\n${dump}`);
        } else {
          assertLegacyWire(wire, dump, { probed: mode === 'auto' });
        }
      });

    // The same clients against a stdio server that speaks only 2026-07-28: its
    // input_required results pass through to a modern client and become ordinary
    // requests for a legacy one (docs/gateway.md).
    test(`mcp ${sdk === 2 ? V2 : V1} mode ${mode} against a 2026-07-28-only server: lands ${era}; list, call, ` +
      'elicitation, sampling, progress', { timeout: 240000 }, async () => {
      const prompt = token('prompt'), answer = token('answer'), who = token('name'), msg = token('echo');
      const { steps, dump } = await pyClient(sdk === 2 ? py2 : py1, [
        '--url', only2026.url, '--profile', 'only2026', '--token', auth.replace(/^Bearer /, ''),
        '--sdk', String(sdk), '--mode', mode, '--prompt', prompt, '--answer', answer, '--name', who, '--message', msg,
      ]);
      const s = (k) => {
        assert.ok(steps[k], `no step ${k}:\n${dump}`);
        return steps[k];
      };
      assert.equal(s('connect').era, era, `mode ${mode} lands ${era}:\n${dump}`);
      if (mode !== MODERN) assert.equal(s('connect').serverInfo?.name, 'modern-only', `the server's own identity:\n${dump}`);
      assert.deepEqual(sorted(s('tools').names), sorted(only2026.tools), `the approved list:\n${dump}`);
      assert.equal(s('echo').text, `echo: ${msg}`, dump);
      assert.equal(s('elicitation').asked.length, 1, dump);
      assert.equal(s('elicitation').asked[0].message, 'What is your name?', dump);
      assert.equal(s('elicitation').text, `Hello, ${who}!`, dump);
      assert.equal(s('sampling').asked.length, 1, dump);
      assert.ok(JSON.stringify(s('sampling').asked[0].messages).includes(`Summarize: ${prompt}`), dump);
      assert.equal(s('sampling').text, `summary: ${answer}`, dump);
      assert.deepEqual(s('progress').progress.map((p) => p[0]), [1, 2, 3, 4], `progress:\n${dump}`);
      assert.equal(s('progress').text, 'counted 4', dump);
      if (era === 'modern') {
        // It has tools and no prompts: the gateway honours tools changes (it relists and
        // gates on the server's own) and leaves out prompts (design §4.6, W-41).
        assert.deepEqual(s('listen').honored, { toolsListChanged: true }, dump);
        assertModernWire(s('wire'), dump);
        assert.ok(s('wire').exchanges.some((x) => x.body_method === 'tools/call' && x.input_responses),
          `a tools/call retried with inputResponses:\n${dump}`);
      } else {
        assertLegacyWire(s('wire'), dump, { probed: mode === 'auto' });
      }
    });

  }

  test('several Python clients at once, of both eras and both SDKs, each get their own answers',
    { timeout: 240000 }, async () => {
      const runs = cases.map(({ sdk, mode }, i) => {
        const msg = token(`many-${i}`);
        return pyClient(sdk === 2 ? py2 : py1, ['--url', everything.url, '--token', auth.replace(/^Bearer /, ''),
          '--sdk', String(sdk), '--mode', mode, '--steps', 'echo,parallel', '--prompt', 'p', '--answer', 'a',
          '--name', 'n', '--message', msg]).then((r) => ({ ...r, msg }));
      });
      for (const { steps, dump, msg } of await Promise.all(runs)) {
        assert.equal(steps.echo.text, `Echo: ${msg}`, dump);
        assert.deepEqual(steps.parallel.texts, steps.parallel.sent.map((x) => `Echo: ${x.message}`), dump);
      }
    });

  // isolation "session" servers speak 2025 only (404 -32601 to modern requests, naming
  // the reason): auto falls back to initialize there; a client that adopts
  // 2026-07-28 without a probe is told why its first request fails.
  test(`mcp ${V2} against a server with isolation "session": auto falls back to legacy; mode 2026-07-28 is told why not`,
    { timeout: 240000 }, async () => {
      const args = (mode) => ['--url', solo.url, '--token', auth.replace(/^Bearer /, ''), '--sdk', '2', '--mode', mode,
        '--steps', 'tools,echo', '--prompt', 'p', '--answer', 'a', '--name', 'n', '--message', 'solo-echo'];
      const auto = await pyClient(py2, args('auto'));
      assert.equal(auto.steps.connect.era, 'legacy', auto.dump);
      assert.deepEqual(sorted(auto.steps.tools.names), sorted(solo.tools), auto.dump);
      assert.equal(auto.steps.echo.text, 'Echo: solo-echo', auto.dump);
      assertLegacyWire(auto.steps.wire, auto.dump, { probed: true });
      const [probe] = auto.steps.wire.exchanges;
      assert.equal(probe.status, 404, auto.dump);

      const pinned = await pyClient(py2, args(MODERN), { allowErrors: true });
      const failed = pinned.errors.find((e) => e.where === 'tools');
      assert.ok(failed, `tools/list must fail on a legacy-only server:\n${pinned.dump}`);
      assert.match(failed.error, /isolation "session"/, pinned.dump);
      assert.match(failed.error, /2025-11-25/, pinned.dump);
      assert.ok(pinned.steps.wire.exchanges.every((x) => x.status === 404 && !x.response_session_id), pinned.dump);
    });
});

// The catalog's memory server (installed from the npm registry into the sandbox, so
// online only): the approved list, then a real task, an entity written and read back,
// from each client.
describe('Python SDK clients through the gateway to the catalog memory server',
  { skip: pythonSkip() }, () => {
    let d, memory, auth, py2, py1;
    before(async () => {
      py2 = await venvWith(V2);
      py1 = await venvWith(V1);
      d = await startMcpDaemon({ online: true, prefix: 'runtime-pysdk-memory-' });
      const sb = await d.create({ name: 'mcp-python-memory' });
      const got = await d.mcpReady(sb.id, [{ id: 'memory' }], { timeoutMs: 300000 });
      memory = got.servers.memory;
      auth = got.status.headers.Authorization;
    }, { timeout: 900000 });
    after(async () => {
      await stopDaemon(d);
    });

    for (const { sdk, mode, era } of [
      { sdk: 2, mode: MODERN, era: 'modern' },
      { sdk: 2, mode: 'auto', era: 'modern' },
      { sdk: 2, mode: 'legacy', era: 'legacy' },
      { sdk: 1, mode: 'legacy', era: 'legacy' },
    ]) {
      test(`mcp ${sdk === 2 ? V2 : V1} mode ${mode}: lands ${era}; the approved tools, an entity written and read back`,
        { timeout: 240000 }, async () => {
          const who = token('person'), fact = token('fact');
          const { steps, dump } = await pyClient(sdk === 2 ? py2 : py1, [
            '--url', memory.url, '--profile', 'memory', '--token', auth.replace(/^Bearer /, ''),
            '--sdk', String(sdk), '--mode', mode, '--steps', 'tools,create,read',
            '--prompt', fact, '--answer', 'unused', '--name', 'unused', '--message', who,
          ]);
          assert.equal(steps.connect.era, era, dump);
          assert.deepEqual(sorted(steps.tools.names), sorted(memory.tools), `the approved list:\n${dump}`);
          assert.equal(steps.create.is_error, false, dump);
          assert.ok(steps.read.text.includes(who) && steps.read.text.includes(fact),
            `read_graph returns the entity and its observation:\n${dump}`);
          if (era === 'modern') assertModernWire(steps.wire, dump);
          else assertLegacyWire(steps.wire, dump, { probed: mode === 'auto' });
        });
    }
  });
