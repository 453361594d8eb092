// Idle pause and wake (issue 6), as a user of the API and an MCP agent see it, and as the
// host sees it (cgroup v1 freezer and cpuacct):
//
//   idle        a sandbox with idlePauseSeconds 2 pauses about 2 s after its last activity
//               (event sandbox.paused {reason:"idle"}) and not before; with 0 it never does.
//   activity    an exec that runs longer than the idle time, and an MCP tools/call whose
//               answer takes longer, keep it awake until they end.
//   cache       a paused sandbox's page cache goes back to the host, its limit stays.
//   frozen      a paused sandbox's busy loop gets no CPU (cpuacct.usage and the process's
//               utime+stime stand still) and freezer.state is FROZEN; resumed, it runs again.
//   calls       an exec or a file call wakes it (reason "exec" / "files"); reading its
//               status, events or MCP status does not; removing a paused sandbox is as quick
//               as a running one and does not hold up the daemon.
//   wake        8 SDK clients call a tool of a paused sandbox at once: all are served, one
//               sandbox.resumed {reason:"gateway"}; the SDK's GET stream lives through a pause
//               (no reconnect) and does not keep the sandbox awake.
//   metrics     GET /metrics agrees with what the tests saw.
//   usage       GET /v1/usage agrees with the cgroup's CPU counter and with the test's own
//               clock, and survives a daemon SIGKILL (the downtime counts in the state the
//               sandbox was in: running, or paused and still frozen).
//
// Synchronisation is by polling with deadlines. Where a test must let time pass to show
// that something did NOT happen before a moment (passTime below), it measures the time
// and asserts on timestamps (event times are the daemon's wall clock, the same clock as
// Date.now() here).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { cgroupDirs, delay, parseMetrics, stopDaemon } from '../e2e/lib.mjs';
import {
  Client, FIXTURES, StreamableHTTPClientTransport, skipReason, startMcpDaemon, waitFor,
} from '../mcp/lib.mjs';

const IDLE_S = 2;
const TICK_MS = 1000; // the daemon's idle check runs every second
// How late a pause may come on a busy machine, past idle time + one tick.
const LATE_MS = 2000;

// A stdio MCP server with no dependencies: "slow" answers after arguments.ms milliseconds.
const SLOW_SERVER = String.raw`
import readline from 'node:readline';
const tools = [{ name: 'slow', description: 'Answers after ms milliseconds.',
  inputSchema: { type: 'object', properties: { ms: { type: 'number' } } } }];
const send = (m) => process.stdout.write(JSON.stringify({ jsonrpc: '2.0', ...m }) + '\n');
readline.createInterface({ input: process.stdin }).on('line', (line) => {
  const m = JSON.parse(line);
  if (m.id === undefined) return;
  if (m.method === 'initialize') return send({ id: m.id, result: { protocolVersion: m.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'slow', version: '1' } } });
  if (m.method === 'ping') return send({ id: m.id, result: {} });
  if (m.method === 'tools/list') return send({ id: m.id, result: { tools } });
  if (m.method === 'tools/call') {
    const ms = Number(m.params.arguments?.ms ?? 0);
    return setTimeout(() => send({ id: m.id, result: { content: [{ type: 'text', text: 'slept ' + ms }] } }), ms);
  }
  send({ id: m.id, error: { code: -32601, message: 'no ' + m.method } });
});
process.stdin.on('end', () => process.exit(0));
`;
const HELLO_SERVER = fs.readFileSync(path.join(FIXTURES, 'hello-server.mjs'), 'utf8');

const enc = encodeURIComponent;
const evTime = (e) => Date.parse(e.time);

/** Lets wall-clock time pass on purpose (to show that something did not happen in it);
 * never used to wait for something to happen: that is waitFor's job. */
const passTime = (ms) => delay(ms);

/** Runs fn, noting the wall clock before and after: {v, t0, t1, mid}. */
async function timed(fn) {
  const t0 = Date.now();
  const v = await fn();
  const t1 = Date.now();
  return { v, t0, t1, mid: (t0 + t1) / 2 };
}

async function sandbox(d, id) {
  const r = await d.api('GET', `/v1/sandboxes/${enc(id)}`);
  if (r.status !== 200) throw new Error(`GET sandbox ${id}: HTTP ${r.status} ${r.text}`);
  return r.body;
}

async function statusOf(d, id) {
  return (await sandbox(d, id)).status;
}

async function post(d, id, action) {
  const r = await d.api('POST', `/v1/sandboxes/${enc(id)}/${action}`);
  if (r.status !== 200) throw new Error(`POST ${action} ${id}: HTTP ${r.status} ${r.text}`);
  return r.body;
}

/** Polls a sandbox's status (GET, which is not activity) every intervalMs until stop():
 * returns [{t0, t1, status}]. */
function watchStatus(d, id, intervalMs = 100) {
  const seen = [];
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const t0 = Date.now();
      const status = await statusOf(d, id);
      seen.push({ t0, t1: Date.now(), status });
      await delay(intervalMs); // the poll interval
    }
  })();
  return {
    seen,
    async stop() {
      stopped = true;
      await loop;
      return seen;
    },
  };
}

/** The sandbox's cgroup directory of one v1 controller. */
function cgroupDir(d, id, ctrl) {
  const dirs = cgroupDirs(d.stateDir);
  const dir = dirs.find((p) => p.split('/').includes(ctrl) && p.endsWith(`-${id}`));
  if (!dir) throw new Error(`no ${ctrl} cgroup for sandbox ${id} in ${JSON.stringify(dirs)}`);
  return dir;
}

const readText = (f) => fs.readFileSync(f, 'utf8').trim();
const cpuNs = (d, id) => Number(readText(path.join(cgroupDir(d, id, 'cpuacct'), 'cpuacct.usage')));
const freezerState = (d, id) => readText(path.join(cgroupDir(d, id, 'freezer'), 'freezer.state'));

/** utime + stime of a host process, in clock ticks. */
function procTicks(pid) {
  const stat = readText(`/proc/${pid}/stat`);
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(f[11]) + Number(f[12]);
}

/** Host pids in the sandbox's cgroup whose command line contains needle. */
function cgroupPids(d, id, needle) {
  const procs = readText(path.join(cgroupDir(d, id, 'cpuacct'), 'cgroup.procs')).split('\n').filter(Boolean);
  return procs.map(Number).filter((pid) => {
    try {
      return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(needle);
    } catch {
      return false;
    }
  });
}

/**
 * A fetch for the SDK transport that counts its GET requests and watches each GET
 * stream from the side (a tee of the body): info = {gets, streams: [{end}]}, where end
 * stays null while the stream is open.
 */
function trackingFetch(info) {
  return async (url, init = {}) => {
    const res = await fetch(url, init);
    if ((init.method ?? 'GET').toUpperCase() !== 'GET') return res;
    info.gets++;
    if (!res.ok || !res.body) {
      info.getStatus = res.status;
      return res;
    }
    const [mine, theirs] = res.body.tee();
    const stream = { end: null };
    info.streams.push(stream);
    (async () => {
      const reader = mine.getReader();
      try {
        for (;;) if ((await reader.read()).done) break;
        stream.end = 'ended';
      } catch (e) {
        stream.end = `error: ${e.message}`;
      }
    })();
    return new Response(theirs, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

/** An official SDK client through the gateway, with its GET requests tracked (client.info). */
async function connect(status, name, label = 'idle-test') {
  const s = status.servers.find((x) => x.name === name);
  const info = { gets: 0, streams: [] };
  const client = new Client({ name: label, version: '1.0.0' });
  client.info = info;
  client.errors = [];
  client.onerror = (e) => client.errors.push(e);
  const transport = new StreamableHTTPClientTransport(new URL(s.url), {
    requestInit: { headers: status.headers }, fetch: trackingFetch(info),
  });
  await client.connect(transport);
  // The SDK opens its GET stream after notifications/initialized, in the background.
  await waitFor(() => info.streams.length === 1, { what: `${label}'s GET stream to open` });
  return client;
}

async function closeAll(clients) {
  for (const c of clients) {
    try {
      await c.transport?.terminateSession?.();
    } catch {}
    try {
      await c.close();
    } catch {}
  }
}

const usageRow = (u, id) => {
  const row = u.sandboxes.find((s) => s.sandbox === id);
  if (!row) throw new Error(`no usage row for ${id}: ${JSON.stringify(u)}`);
  return row;
};

async function usage(d) {
  const r = await d.api('GET', '/v1/usage');
  if (r.status !== 200) throw new Error(`GET /v1/usage: HTTP ${r.status} ${r.text}`);
  return r.body;
}

/** Burns about `seconds` of CPU in the sandbox (one busy shell, stopped by timeout). */
function burn(d, id, seconds) {
  return d.exec(id, ['timeout', String(seconds), 'sh', '-c', 'while :; do :; done'], { timeoutMs: 30000 });
}

describe('idle pause and wake', { skip: skipReason() }, () => {
  let d;
  const seen = { paused: 0, resumed: 0 }; // counted for the /metrics test
  const ids = [];

  before(async () => {
    d = await startMcpDaemon({ prefix: 'runtime-idle-' });
  });
  after(async () => {
    if (d) await stopDaemon(d);
  });

  async function create(spec) {
    const sb = await d.create(spec);
    ids.push(sb.id);
    return sb;
  }

  async function withServer(spec, file, text, server) {
    const sb = await create(spec);
    await d.putFile(sb.id, file, text);
    const { status } = await d.mcpReady(sb.id, [server]);
    return { sb, status };
  }

  test('idlePauseSeconds 2 pauses about 2 s after the last activity and not before; 0 never pauses',
    async () => {
      const a = await create({ name: 'idle-two', idlePauseSeconds: IDLE_S });
      const b = await create({ name: 'idle-never', idlePauseSeconds: 0 });
      assert.equal(a.idlePauseSeconds, IDLE_S);
      assert.equal(b.idlePauseSeconds, 0);
      const ea = await timed(() => d.mustExec(a.id, ['true']));
      const eb = await timed(() => d.mustExec(b.id, ['true']));
      const wa = watchStatus(d, a.id, 50);
      const wb = watchStatus(d, b.id, 100);
      try {
        await waitFor(() => wa.seen.some((o) => o.status === 'paused'),
          { timeoutMs: IDLE_S * 1000 + TICK_MS + LATE_MS + 5000, what: 'idle-two to pause' });
        // idle-never: watch on until more than 3 s have passed since its last exec.
        await passTime(Math.max(0, eb.t1 + 3500 - Date.now()));
      } finally {
        await wa.stop();
        await wb.stop();
      }
      const ev = await d.waitEvent(a.id, (e) => e.kind === 'sandbox.paused', { what: 'sandbox.paused' });
      assert.equal(ev.reason, 'idle');
      const pausedAt = evTime(ev);
      // The last activity was the exec, which ended between ea.t0 and ea.t1.
      assert.ok(pausedAt >= ea.t0 + IDLE_S * 1000,
        `paused ${pausedAt - ea.t0} ms after the exec was sent: before ${IDLE_S} s`);
      assert.ok(pausedAt <= ea.t1 + IDLE_S * 1000 + TICK_MS + LATE_MS,
        `paused only ${pausedAt - ea.t1} ms after the exec ended`);
      const early = wa.seen.filter((o) => o.t1 < ea.t0 + IDLE_S * 1000 && o.status !== 'running');
      assert.deepEqual(early, [], 'running throughout the first 2 s');
      assert.ok(wa.seen.filter((o) => o.t1 < ea.t0 + IDLE_S * 1000).length >= 10, 'watched during the 2 s');
      assert.equal(await statusOf(d, a.id), 'paused');
      process.stderr.write(`# idle pause came ${pausedAt - ea.t1}..${pausedAt - ea.t0} ms after the last exec\n`);

      const quiet = Date.now() - eb.t1;
      assert.ok(quiet > 3000, `idle-never watched for ${quiet} ms`);
      assert.deepEqual(wb.seen.filter((o) => o.status !== 'running'), [], 'idle-never stays running');
      assert.equal(await statusOf(d, b.id), 'running');
      const evb = await d.events(b.id);
      assert.deepEqual(evb.filter((e) => e.kind.startsWith('sandbox.')), [], 'no pause event for idle-never');
    });

  test('an exec that runs longer than the idle time keeps the sandbox awake until it ends', async () => {
    const c = await create({ name: 'idle-exec', idlePauseSeconds: IDLE_S });
    const w = watchStatus(d, c.id);
    let run;
    try {
      run = await timed(() => d.exec(c.id, ['sleep', '4'], { timeoutMs: 20000 }));
    } finally {
      await w.stop();
    }
    assert.equal(run.v.exitCode, 0);
    assert.ok(run.t1 - run.t0 >= 4000, `the exec took ${run.t1 - run.t0} ms`);
    assert.deepEqual(w.seen.filter((o) => o.status !== 'running'), [], 'running while the exec ran');
    const during = (await d.events(c.id)).filter((e) => e.kind === 'sandbox.paused');
    assert.deepEqual(during, [], 'no pause while the exec ran');
    // And once it ended, the idle time counts from its end.
    const ev = await d.waitEvent(c.id, (e) => e.kind === 'sandbox.paused',
      { timeoutMs: IDLE_S * 1000 + TICK_MS + LATE_MS + 5000, what: 'the pause after the exec' });
    assert.equal(ev.reason, 'idle');
    assert.ok(evTime(ev) >= run.t0 + 4000 + IDLE_S * 1000,
      `paused ${evTime(ev) - run.t0} ms after the exec started, before its end + ${IDLE_S} s`);
  });

  test('a tools/call in progress keeps the sandbox awake until it is answered', async () => {
    const { sb, status } = await withServer({ name: 'idle-mcp', idlePauseSeconds: IDLE_S },
      '/workspace/slow.mjs', SLOW_SERVER, { name: 'slow', command: ['node', '/workspace/slow.mjs'] });
    const client = await connect(status, 'slow');
    try {
      const mark = await d.eventMark(sb.id);
      const w = watchStatus(d, sb.id);
      let call;
      try {
        call = await timed(() => client.callTool({ name: 'slow', arguments: { ms: 4000 } }));
      } finally {
        await w.stop();
      }
      assert.equal(call.v.content[0].text, 'slept 4000');
      assert.ok(call.t1 - call.t0 >= 4000, `the call took ${call.t1 - call.t0} ms`);
      assert.deepEqual(w.seen.filter((o) => o.status !== 'running'), [], 'running while the call ran');
      const ev = await d.waitEvent(sb.id, (e) => e.kind === 'sandbox.paused',
        { after: mark, timeoutMs: IDLE_S * 1000 + TICK_MS + LATE_MS + 5000, what: 'the pause after the call' });
      assert.equal(ev.reason, 'idle');
      assert.ok(evTime(ev) >= call.t0 + 4000 + IDLE_S * 1000,
        `paused ${evTime(ev) - call.t0} ms after the call was sent: before its answer + ${IDLE_S} s`);
    } finally {
      await closeAll([client]);
    }
  });

  test('a paused sandbox gets no CPU: cpuacct and the process stand still, freezer FROZEN', async () => {
    const e = await create({ name: 'idle-frozen', idlePauseSeconds: 0 });
    const start = await d.mustExec(e.id, ['sh', '-c',
      '(while :; do :; done) </dev/null >/dev/null 2>&1 & echo $!']);
    const innerPid = start.stdout.trim();
    try {
      const base = cpuNs(d, e.id);
      await waitFor(() => cpuNs(d, e.id) - base > 2e8, { what: 'the busy loop to use 0.2 s of CPU' });
      const pids = cgroupPids(d, e.id, 'while :');
      assert.equal(pids.length, 1, `the loop's host pid: ${pids}`);
      const [pid] = pids;

      const paused = await post(d, e.id, 'pause');
      assert.equal(paused.status, 'paused');
      assert.equal(freezerState(d, e.id), 'FROZEN');
      const c0 = cpuNs(d, e.id), p0 = procTicks(pid), t0 = Date.now();
      await passTime(1000);
      const c1 = cpuNs(d, e.id), p1 = procTicks(pid), t1 = Date.now();
      assert.ok(t1 - t0 >= 1000);
      assert.equal(c1, c0, `cpuacct.usage moved by ${(c1 - c0) / 1e6} ms in ${t1 - t0} ms while paused`);
      assert.equal(p1, p0, `the loop's utime+stime moved by ${p1 - p0} ticks while paused`);
      assert.equal(freezerState(d, e.id), 'FROZEN');
      assert.equal(await statusOf(d, e.id), 'paused');

      const resumed = await post(d, e.id, 'resume');
      assert.equal(resumed.status, 'running');
      assert.equal(freezerState(d, e.id), 'THAWED');
      // The same measurement sees the loop run again.
      await waitFor(() => cpuNs(d, e.id) - c1 > 2e8, { what: 'the loop to run again after resume' });
      assert.ok(procTicks(pid) > p1, 'the loop has CPU time again');
      const ev = (await d.events(e.id)).filter((x) => x.kind.startsWith('sandbox.'));
      assert.deepEqual(ev.map((x) => [x.kind, x.reason]), [['sandbox.paused', 'api'], ['sandbox.resumed', 'api']]);
      assert.equal(typeof ev[1].wakeMs, 'number');
    } finally {
      await d.exec(e.id, ['kill', '-9', innerPid]).catch(() => {});
    }
  });

  test('a paused sandbox gives its page cache back; the memory limit is as configured after', async () => {
    const e = await create({ name: 'idle-cache', idlePauseSeconds: 0, memoryMiB: 512 });
    // 64 MB written and read back: page cache charged to the sandbox's cgroup.
    await d.mustExec(e.id, ['sh', '-c', 'head -c 64000000 /dev/zero > /workspace/big && cat /workspace/big > /dev/null']);
    const mem = (f) => Number(readText(path.join(cgroupDir(d, e.id, 'memory'), f)));
    const before = mem('memory.usage_in_bytes');
    assert.ok(before > 60e6, `the file is in the cgroup's page cache: ${before} bytes`);
    assert.equal((await post(d, e.id, 'pause')).status, 'paused');
    const after = mem('memory.usage_in_bytes');
    assert.ok(after < before - 50e6, `paused, the cgroup still holds ${after} of ${before} bytes`);
    assert.equal(mem('memory.limit_in_bytes'), 512 * 1024 * 1024, 'the limit is back to the configured one');
    assert.equal((await post(d, e.id, 'resume')).status, 'running');
    const r = await d.mustExec(e.id, ['sh', '-c', 'wc -c < /workspace/big']);
    assert.equal(r.stdout.trim(), '64000000', 'the files are all there after the resume');
  });

  test('an exec or a file call wakes a paused sandbox, with the reason', async () => {
    const f = await create({ name: 'idle-calls', idlePauseSeconds: 0 });
    const wakes = [
      ['exec', () => d.mustExec(f.id, ['true'])],
      ['files', () => d.putFile(f.id, '/workspace/a.txt', 'a')],
      ['files', async () => assert.equal((await d.getFile(f.id, '/workspace/a.txt')).toString(), 'a')],
    ];
    for (const [reason, call] of wakes) {
      assert.equal((await post(d, f.id, 'pause')).status, 'paused');
      const mark = await d.eventMark(f.id);
      await call();
      assert.equal(await statusOf(d, f.id), 'running');
      const ev = (await d.events(f.id, mark)).filter((e) => e.kind.startsWith('sandbox.'));
      assert.deepEqual(ev.map((e) => [e.kind, e.reason]), [['sandbox.resumed', reason]]);
    }
    // Reading its status or events is no activity: it stays paused.
    assert.equal((await post(d, f.id, 'pause')).status, 'paused');
    await d.events(f.id);
    await d.mcpStatus(f.id);
    assert.equal(await statusOf(d, f.id), 'paused');
  });

  test('a paused sandbox is removed as quickly as a running one, without stalling the daemon', async () => {
    const other = await create({ name: 'idle-bystander', idlePauseSeconds: 0 });
    const g = await create({ name: 'idle-removed', idlePauseSeconds: 0 });
    await d.mustExec(g.id, ['sh', '-c', '(sleep 600) </dev/null >/dev/null 2>&1 &']);
    assert.equal((await post(d, g.id, 'pause')).status, 'paused');
    let removed = false;
    const removal = timed(() => d.remove(g.id)).finally(() => { removed = true; });
    // Meanwhile the daemon serves other requests: GETs of another sandbox, one after
    // another until the removal is answered; the slowest counts.
    let slowest = 0;
    for (let i = 0; i < 1000 && !removed; i++) {
      const t = await timed(() => statusOf(d, other.id));
      slowest = Math.max(slowest, t.t1 - t.t0);
    }
    const r = await removal;
    ids.splice(ids.indexOf(g.id), 1);
    assert.equal(r.v.status, 200, r.v.text);
    assert.ok(r.t1 - r.t0 < 2000 && slowest < 1000,
      `removing a paused sandbox took ${r.t1 - r.t0} ms; GETs of another sandbox meanwhile up to ${slowest} ms`);
    await waitFor(() => cgroupDirs(d.stateDir).every((p) => !p.endsWith(`-${g.id}`)), { what: `the cgroups of ${g.id} to go` });
  });

  test('8 SDK clients wake a paused sandbox at once: all served, one wake; GET streams survive',
    async () => {
      const { sb, status } = await withServer({ name: 'idle-wake', idlePauseSeconds: 0 },
        '/workspace/hello.mjs', HELLO_SERVER, { name: 'hello', command: ['node', '/workspace/hello.mjs'] });
      const clients = [];
      try {
        for (let i = 0; i < 8; i++) clients.push(await connect(status, 'hello', `waker-${i}`));
        assert.equal((await post(d, sb.id, 'pause')).status, 'paused');
        const mark = await d.eventMark(sb.id);
        // Eight open GET streams do not wake it.
        const quiet = await timed(() => passTime(1500));
        assert.equal(await statusOf(d, sb.id), 'paused', `still paused ${quiet.t1 - quiet.t0} ms later`);

        const calls = await timed(() => Promise.all(clients.map((c, i) =>
          c.callTool({ name: 'hello', arguments: { name: `c${i}` } }))));
        calls.v.forEach((r, i) => assert.equal(r.content[0].text, `hello, c${i}`));
        assert.equal(await statusOf(d, sb.id), 'running');
        const ev = (await d.events(sb.id, mark)).filter((e) => e.kind.startsWith('sandbox.'));
        assert.equal(ev.length, 1, `one event after the pause: ${JSON.stringify(ev)}`);
        assert.equal(ev[0].kind, 'sandbox.resumed');
        assert.equal(ev[0].reason, 'gateway');
        assert.ok(ev[0].wakeMs >= 0 && ev[0].wakeMs < 5000, `wakeMs ${ev[0].wakeMs}`);
        process.stderr.write(`# 8 calls into a paused sandbox took ${calls.t1 - calls.t0} ms; ` +
          `the daemon's wakeMs ${ev[0].wakeMs}\n`);

        // The same clients, the same GET streams, no reconnect.
        for (const [i, c] of clients.entries()) {
          assert.equal(c.info.gets, 1, `client ${i} opened ${c.info.gets} GET streams`);
          assert.equal(c.info.streams[0].end, null, `client ${i}'s GET stream ended: ${c.info.streams[0].end}`);
          assert.equal((await c.callTool({ name: 'hello', arguments: { name: 'again' } })).content[0].text, 'hello, again');
          assert.deepEqual(c.errors.map(String), [], `client ${i} saw no errors`);
        }
      } finally {
        await closeAll(clients);
      }
    });

  // API and gateway requests are admitted the same way (server_sandbox_admit): however many
  // of each arrive together at a paused sandbox, it is woken once and every one is served.
  test('execs, file calls and gateway calls at once wake a paused sandbox once, and all are served',
    async () => {
      const { sb, status } = await withServer({ name: 'idle-mixed', idlePauseSeconds: 0 },
        '/workspace/hello.mjs', HELLO_SERVER, { name: 'hello', command: ['node', '/workspace/hello.mjs'] });
      const clients = [];
      try {
        for (let i = 0; i < 3; i++) clients.push(await connect(status, 'hello', `mixed-${i}`));
        assert.equal((await post(d, sb.id, 'pause')).status, 'paused');
        const mark = await d.eventMark(sb.id);
        const results = await Promise.all([
          ...clients.map((c, i) => c.callTool({ name: 'hello', arguments: { name: `g${i}` } })
            .then((r) => r.content[0].text)),
          ...[0, 1, 2].map((i) => d.mustExec(sb.id, ['echo', `e${i}`]).then((r) => r.stdout.trim())),
          ...[0, 1].map((i) => d.putFile(sb.id, `/workspace/m${i}.txt`, `f${i}`).then(() => `f${i}`)),
        ]);
        assert.deepEqual(results, ['hello, g0', 'hello, g1', 'hello, g2', 'e0', 'e1', 'e2', 'f0', 'f1']);
        assert.equal(await statusOf(d, sb.id), 'running');
        const ev = (await d.events(sb.id, mark)).filter((e) => e.kind.startsWith('sandbox.'));
        assert.equal(ev.length, 1, `one event after the pause: ${JSON.stringify(ev)}`);
        assert.equal(ev[0].kind, 'sandbox.resumed');
        assert.ok(['gateway', 'exec', 'files'].includes(ev[0].reason), ev[0].reason);
      } finally {
        await closeAll(clients);
      }
    });

  test('an open GET stream alone does not keep a sandbox awake, and survives its idle pause', async () => {
    const { sb, status } = await withServer({ name: 'idle-stream', idlePauseSeconds: IDLE_S },
      '/workspace/hello.mjs', HELLO_SERVER, { name: 'hello', command: ['node', '/workspace/hello.mjs'] });
    const client = await connect(status, 'hello', 'listener');
    try {
      // Connecting may have woken it (it may have paused while the client connected):
      // the idle time counts from now.
      const mark = await d.eventMark(sb.id);
      const t0 = Date.now();
      const ev = await d.waitEvent(sb.id, (e) => e.kind === 'sandbox.paused',
        { after: mark, timeoutMs: IDLE_S * 1000 + TICK_MS + LATE_MS + 5000, what: 'the idle pause with a client connected' });
      assert.equal(ev.reason, 'idle');
      assert.ok(evTime(ev) - t0 <= IDLE_S * 1000 + TICK_MS + LATE_MS, `paused ${evTime(ev) - t0} ms after the mark`);
      assert.equal(client.info.streams[0].end, null, 'the GET stream is open while the sandbox is paused');
      assert.equal(await statusOf(d, sb.id), 'paused');

      const r = await client.callTool({ name: 'hello', arguments: { name: 'listener' } });
      assert.equal(r.content[0].text, 'hello, listener');
      const woke = await d.waitEvent(sb.id, (e) => e.kind === 'sandbox.resumed', { after: ev.seq, what: 'the wake' });
      assert.equal(woke.reason, 'gateway');
      assert.equal(client.info.gets, 1, 'no reconnect');
      assert.equal(client.info.streams[0].end, null, 'the GET stream is still open');
      assert.deepEqual(client.errors.map(String), []);
    } finally {
      await closeAll([client]);
    }
  });

  test('/metrics counts the pauses and wakes seen, the paused sandboxes and gateway requests', async () => {
    // Counted first: the daemon's counters can only have grown since.
    for (const id of ids) {
      const ev = await d.events(id);
      seen.paused += ev.filter((e) => e.kind === 'sandbox.paused').length;
      seen.resumed += ev.filter((e) => e.kind === 'sandbox.resumed').length;
    }
    assert.ok(seen.paused >= 6 && seen.resumed >= 2, JSON.stringify(seen));
    const wake = (await sandbox(d, 'idle-wake')).id;
    let extra = 0; // a pause this test makes itself
    if ((await statusOf(d, wake)) !== 'paused') {
      await post(d, wake, 'pause');
      extra = 1;
    }

    // Paused sandboxes by the list, stable across the read of /metrics.
    const pausedNow = async () => (await d.api('GET', '/v1/sandboxes')).body.data
      .filter((s) => s.status === 'paused').map((s) => s.id).sort().join(',');
    let m, before, afterList;
    for (let i = 0; i < 5; i++) {
      before = await pausedNow();
      const r = await d.api('GET', '/metrics');
      assert.equal(r.status, 200, r.text);
      assert.match(r.headers.get('content-type') ?? '', /^text\/plain/);
      m = parseMetrics(r.text);
      afterList = await pausedNow();
      if (before === afterList) break;
    }
    assert.equal(before, afterList, 'the paused set settled');
    const nPaused = before.split(',').filter(Boolean).length;
    assert.ok(nPaused >= 1);
    assert.equal(m.get('runtime_sandboxes{status="paused"}'), nPaused);
    assert.equal(m.get('runtime_sandboxes{status="running"}') + nPaused, ids.length);
    assert.ok(m.get('runtime_pauses_total') >= seen.paused + extra,
      `pauses ${m.get('runtime_pauses_total')} vs ${seen.paused} seen`);
    assert.ok(m.get('runtime_wakes_total') >= seen.resumed, `wakes ${m.get('runtime_wakes_total')} vs ${seen.resumed} seen`);
    assert.ok([...m.keys()].some((k) => k.startsWith('runtime_wake_seconds_bucket{')), 'a wake histogram bucket');
    assert.ok(m.get('runtime_wake_seconds_bucket{le="+Inf"}') >= seen.resumed);
    assert.equal(m.get('runtime_wake_seconds_count'), m.get('runtime_wakes_total'));
    for (const [name, server] of [['idle-wake', 'hello'], ['idle-mcp', 'slow']]) {
      const id = (await sandbox(d, name)).id;
      const v = m.get(`runtime_gateway_requests_total{account="default",sandbox="${id}",server="${server}"}`);
      assert.ok(v > 0, `gateway requests of ${name}/${server}: ${v}`);
    }
    const noKey = await d.api('GET', '/metrics', undefined, { key: null });
    assert.equal(noKey.status, 401, 'metrics need the API key');
  });
});

describe('usage metering', { skip: skipReason() }, () => {
  let d;
  before(async () => {
    d = await startMcpDaemon({ prefix: 'runtime-usage-' });
  });
  after(async () => {
    if (d) await stopDaemon(d);
  });

  test('usage matches the cgroup and the clock, and survives a daemon SIGKILL', async () => {
    const MIB = 512;
    const made = await timed(() => d.create({ name: 'metered', memoryMiB: MIB, idlePauseSeconds: 0 }));
    const id = made.v.id;
    await burn(d, id, 1);
    const paused = await timed(() => post(d, id, 'pause'));
    assert.equal(paused.v.status, 'paused');
    await passTime(2000); // the paused stretch the meter must count
    const resumed = await timed(() => post(d, id, 'resume'));
    assert.equal(resumed.v.status, 'running');
    await burn(d, id, 0.5);
    const cg0 = cpuNs(d, id) / 1e9;
    const u1 = await timed(() => usage(d));
    const cg1 = cpuNs(d, id) / 1e9;
    const row = usageRow(u1.v, id);
    process.stderr.write(`# usage ${JSON.stringify(row)}; cgroup ${cg0}..${cg1} s\n`);

    assert.equal(row.name, 'metered');
    assert.equal(row.status, 'running');
    const near = (got, want, tol, what) =>
      assert.ok(Math.abs(got - want) <= tol, `${what}: ${got} against ${want} (tolerance ${tol})`);
    const cpuTol = (v) => Math.max(0.15 * v, 0.2);
    assert.ok(row.cpuSeconds >= 0.5, `cpuSeconds ${row.cpuSeconds} after ~1.5 s of burning`);
    near(row.cpuSeconds, cg0, cpuTol(cg0), 'cpuSeconds vs cpuacct.usage');
    const running = (paused.mid - made.mid) + (u1.mid - resumed.mid);
    const pausedS = resumed.mid - paused.mid;
    near(row.runningHours * 3600, running / 1000, 0.5, 'running seconds');
    near(row.pausedHours * 3600, pausedS / 1000, 0.5, 'paused seconds');
    near(row.memoryGiBHours, row.runningHours * MIB / 1024, 2e-6, 'memoryGiBHours');
    assert.ok(row.pausedGBHours >= 0 && row.storedGB > 0, `stored ${row.storedGB} GB`);
    for (const k of ['cpu', 'memory', 'paused', 'total']) assert.equal(typeof row.cost[k], 'number', `cost.${k}`);
    assert.equal(typeof u1.v.total.cpuSeconds, 'number');
    assert.ok(u1.v.rates.vcpuHour > 0 && u1.v.rates.gibHour > 0 && u1.v.rates.gbMonth > 0);

    // SIGKILL the daemon (the sandbox runs on) and start it again.
    await d.kill9();
    await d.start();
    await waitFor(async () => (await statusOf(d, id)) === 'running', { what: 'the sandbox back after restart' });
    const u2 = await timed(() => usage(d));
    const row2 = usageRow(u2.v, id);
    for (const k of ['cpuSeconds', 'runningHours', 'memoryGiBHours', 'pausedHours', 'pausedGBHours']) {
      assert.ok(row2[k] >= row[k], `${k} fell across the restart: ${row[k]} -> ${row2[k]}`);
    }
    // Down or not, the sandbox ran all along: the restart's downtime counts as running.
    near((row2.runningHours - row.runningHours) * 3600, (u2.mid - u1.mid) / 1000, 0.5, 'running seconds across the restart');
    near(row2.pausedHours, row.pausedHours, 2e-6, 'paused hours across the restart');

    // And it keeps counting.
    const cgA = cpuNs(d, id) / 1e9;
    await burn(d, id, 0.5);
    const cgB = cpuNs(d, id) / 1e9;
    const u3 = await timed(() => usage(d));
    const row3 = usageRow(u3.v, id);
    near((row3.runningHours - row2.runningHours) * 3600, (u3.mid - u2.mid) / 1000, 0.5, 'running seconds after the restart');
    near(row3.cpuSeconds - row2.cpuSeconds, cgB - cgA, cpuTol(cgB - cgA), 'CPU seconds after the restart vs cpuacct');
    assert.ok(row3.cpuSeconds > row2.cpuSeconds);

    // Paused when the daemon dies: it stays frozen, and the downtime counts as paused.
    assert.equal((await post(d, id, 'pause')).status, 'paused');
    const u4 = await timed(() => usage(d));
    const row4 = usageRow(u4.v, id);
    await d.kill9();
    await d.start();
    assert.equal(await statusOf(d, id), 'paused');
    assert.equal(freezerState(d, id), 'FROZEN');
    const u5 = await timed(() => usage(d));
    const row5 = usageRow(u5.v, id);
    assert.equal(row5.status, 'paused');
    near((row5.pausedHours - row4.pausedHours) * 3600, (u5.mid - u4.mid) / 1000, 0.5, 'paused seconds across the restart');
    near(row5.runningHours, row4.runningHours, 2e-6, 'running hours while paused across the restart');
    near(row5.cpuSeconds, row4.cpuSeconds, 0.002, 'no CPU while paused across the restart');
    assert.ok(row5.pausedGBHours >= row4.pausedGBHours);
  });
});
