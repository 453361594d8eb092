// From inside a sandbox: the host's loopback services, the daemon's API, the
// host's own addresses, abstract unix sockets and outside addresses stay out of
// reach. All traffic here is loopback or inside the sandboxes' namespaces; the one
// outside address (198.51.100.1, TEST-NET-2) is only tried from a sandbox without
// internet or while the daemon is down, so nothing is ever dialled.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import dgram from 'node:dgram';
import os from 'node:os';
import fs from 'node:fs';
import { startDaemon, stopDaemon, probe, assertRefused, token, waitFor, processesMatching, GVISOR, insideProcesses,
  sandboxRootOnHost } from '../e2e/lib.mjs';

let d, sb, offline, tcp, tcpPort, udp, udpPort, abstractSrv, abstractName;
const accepted = [];
const datagrams = [];
const banner = token('host-banner');

function hostAddrs() {
  return Object.values(os.networkInterfaces()).flat()
    .filter((i) => i.family === 'IPv4' && !i.internal).map((i) => i.address);
}

before(async () => {
  // Host services the sandbox must never reach: TCP and UDP on all host addresses
  // (loopback included), and an abstract unix socket in the host's namespace.
  tcp = net.createServer((s) => {
    accepted.push(s.remoteAddress);
    s.end(banner + '\n');
  });
  await new Promise((r) => tcp.listen(0, '0.0.0.0', r));
  tcpPort = tcp.address().port;
  udp = dgram.createSocket('udp4');
  udp.on('message', (m, rinfo) => datagrams.push(`${rinfo.address}: ${m}`));
  await new Promise((r) => udp.bind(0, '0.0.0.0', r));
  udpPort = udp.address().port;
  abstractName = token('abstract');
  abstractSrv = net.createServer((s) => {
    accepted.push('abstract');
    s.end(banner + '\n');
  });
  await new Promise((r) => abstractSrv.listen('\0' + abstractName, r));

  d = await startDaemon();
  sb = await d.create({ name: 'net' });
  offline = await d.create({ name: 'net-offline', network: { internet: false } });
  await d.installProbe(sb.id);
  await d.installProbe(offline.id);
});

after(async () => {
  await stopDaemon(d);
  tcp?.close();
  udp?.close();
  abstractSrv?.close();
});

function assertNoContact(what) {
  assert.deepEqual(accepted, [], `${what}: the host service accepted connections from ${accepted}`);
  assert.deepEqual(datagrams, [], `${what}: the host received datagrams: ${datagrams}`);
}

test('the control: the host listeners answer from the host', async () => {
  const got = await new Promise((resolve, reject) => {
    const c = net.connect(tcpPort, '127.0.0.1');
    let buf = '';
    c.on('data', (x) => { buf += x; });
    c.on('end', () => resolve(buf));
    c.on('error', reject);
  });
  assert.equal(got.trim(), banner);
  accepted.length = 0;
});

test("the host's loopback TCP services are unreachable (probe, node, bash /dev/tcp)", async () => {
  for (const box of [sb, offline]) {
    for (const port of [tcpPort, d.port]) {
      // Loopback stays inside the sandbox's own namespace: nothing listens there.
      for (const addr of ['127.0.0.1', '127.0.0.2', '0.0.0.0']) {
        const r = await probe(d, box.id, ['connect', addr, port]);
        assertRefused(r, `connect ${addr}:${port} from ${box.name}`);
        assert.ok(!r.stdout.includes(banner));
      }
    }
    const js = `const s=require('net').connect(${tcpPort},'127.0.0.1');s.on('connect',()=>{console.log('CONNECTED');process.exit(0)});` +
      `s.on('error',e=>{console.log(e.code);process.exit(1)});setTimeout(()=>{console.log('TIMEOUT');process.exit(1)},3000)`;
    const n = await d.exec(box.id, ['node', '-e', js]);
    assert.notEqual(n.exitCode, 0, `node connect: ${n.stdout}`);
    assert.match(n.stdout, /ECONNREFUSED|ENETUNREACH|EHOSTUNREACH|TIMEOUT/);
    for (const host of ['127.0.0.1', 'localhost', '0x7f.1', '2130706433']) {
      const b = await d.exec(box.id, ['bash', '-c', `exec 3<>/dev/tcp/${host}/${tcpPort} && head -c 200 <&3`],
        { timeoutMs: 10000 });
      assert.notEqual(b.exitCode, 0, `bash /dev/tcp/${host}: ${b.stdout}`);
      assert.ok(!b.stdout.includes(banner));
    }
    const v6 = await d.exec(box.id, ['node', '-e', js.replace("'127.0.0.1'", "'::1'")]);
    assert.notEqual(v6.exitCode, 0, `node connect ::1: ${v6.stdout}`);
  }
  assertNoContact('loopback');
});

test("the daemon's API is not reachable from inside, with or without a key", async () => {
  const curl = await d.exec(sb.id, ['node', '-e',
    `fetch('http://127.0.0.1:${d.port}/v1/sandboxes').then(r=>{console.log('STATUS',r.status);process.exit(0)},` +
    `e=>{console.log('ERR',e.cause&&e.cause.code);process.exit(1)})`], { timeoutMs: 15000 });
  assert.notEqual(curl.exitCode, 0, curl.stdout);
  assert.doesNotMatch(curl.stdout, /STATUS/);
  // The unix socket is not in the sandbox's filesystem either.
  const sock = await d.exec(sb.id, ['ls', '-l', d.socket]);
  assert.notEqual(sock.exitCode, 0);
});

test("the host's own interface addresses (and the sandbox's 10.200.0.2) are refused", async () => {
  // These go through the egress proxy, which may complete the TCP handshake
  // itself; what matters is that the host service never sees the connection.
  const addrs = [...hostAddrs(), '10.200.0.2'];
  for (const box of [sb, offline]) {
    for (const addr of addrs) {
      for (const port of [tcpPort, d.port]) {
        const r = await probe(d, box.id, ['connect', addr, port]);
        assert.ok(!r.stdout.includes(banner), `reached the host service at ${addr}:${port}: ${r.stdout}`);
        // Through the proxy the TCP handshake may complete, but nothing answers.
        if (r.exitCode === 0) assert.doesNotMatch(r.stdout, /banner:/, r.stdout);
      }
    }
  }
  assertNoContact('host addresses');
});

test('UDP to the host (loopback and its addresses) is not delivered', async () => {
  for (const box of [sb, offline]) {
    for (const addr of ['127.0.0.1', ...hostAddrs()]) {
      await d.exec(box.id, ['bash', '-c', `echo ${token('dgram')} > /dev/udp/${addr}/${udpPort}; true`]);
    }
  }
  // A datagram on the host's loopback is queued before sendto returns; let the
  // event loop take whatever arrived, then look.
  await new Promise((r) => setImmediate(r));
  await waitFor(async () => {
    const probeMsg = token('ctl');
    const c = dgram.createSocket('udp4');
    await new Promise((r) => c.send(probeMsg, udpPort, '127.0.0.1', r));
    c.close();
    const got = await waitFor(() => datagrams.find((x) => x.includes(probeMsg)), { timeoutMs: 2000, what: 'the control datagram' });
    datagrams.splice(datagrams.indexOf(got), 1);
    return true;
  }, { what: 'the control datagram' });
  assertNoContact('UDP');
});

test("abstract unix sockets: the host's and another sandbox's are out of reach", async () => {
  assertRefused(await probe(d, sb.id, ['abstract-connect', abstractName]), 'abstract socket of the host', /Connection refused|No such file/);
  // b listens; a control connect from b itself works, from a it does not.
  const name = token('abs');
  const bg = await d.exec(offline.id, ['sh', '-c', `/workspace/probe abstract-listen ${name} 20 </dev/null >/dev/null 2>&1 & echo ok`]);
  assert.equal(bg.stdout, 'ok\n');
  await waitFor(async () => (await probe(d, offline.id, ['abstract-connect', name])).exitCode === 0,
    { what: 'the abstract listener in the other sandbox' });
  assertRefused(await probe(d, sb.id, ['abstract-connect', name]), "abstract socket of another sandbox", /Connection refused/);
  await d.sh(offline.id, `pkill -f 'abstract-listen ${name}'; true`);
  assertNoContact('abstract');
});

test('outside addresses: refused without internet, and nothing is dialled', async () => {
  const t0 = Date.now();
  const r = await probe(d, offline.id, ['connect', '198.51.100.1', 80]);
  assert.ok(!/banner:/.test(r.stdout), `something answered from 198.51.100.1: ${r.stdout}`);
  assert.ok(Date.now() - t0 < 8000, 'refused quickly');
  for (const port of [22, 443, 8080]) {
    const p = await probe(d, offline.id, ['connect', '198.51.100.1', port]);
    assert.ok(!/banner:/.test(p.stdout), `198.51.100.1:${port}: ${p.stdout}`);
  }
  // The daemon refused by policy before dialling: refusals, and no connect_failed or
  // connect_timeout (those would mean it tried).
  const ev = await d.api('GET', `/v1/sandboxes/${offline.id}/events`);
  if (ev.status === 200) {
    const refused = ev.body.filter((e) => e.kind === 'egress.refused' && JSON.stringify(e).includes('198.51.100.1'));
    assert.ok(refused.length >= 1, `egress.refused events: ${ev.text}`);
    for (const e of refused) assert.doesNotMatch(JSON.stringify(e), /connect_failed|connect_timeout/, JSON.stringify(e));
    assert.ok(!ev.body.some((e) => e.kind === 'egress.allowed'), `something was allowed: ${ev.text}`);
  }
  // UDP (other than DNS) and ICMP have no way out at all.
  const u = await d.exec(offline.id, ['bash', '-c', 'echo x > /dev/udp/198.51.100.1/9 && echo sent; ping -c1 -W1 198.51.100.1 2>&1; true']);
  assert.doesNotMatch(u.stdout, /bytes from/);
});

test('with the daemon down, a sandbox has no network at all', async () => {
  // exec needs the daemon, so a script started before the crash waits for a go
  // file (written from the host through /proc/PID/root) and then tries to connect.
  const mark = token('down');
  const targets = [['198.51.100.1', 80], ['198.51.100.1', 443], ['198.51.100.1', 5432],
    [hostAddrs()[0] ?? '192.0.2.2', tcpPort], ['127.0.0.1', tcpPort]];
  const tries = targets.map(([h, p]) => `/workspace/probe connect ${h} ${p}`).join('; ');
  const script = `: ${mark}; i=0; while [ ! -e /workspace/go ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; ` +
    `{ ${tries}; } > /workspace/result 2>&1; touch /workspace/done`;
  // An anchor process outlives the script, so the host can reach /workspace.
  const anchor = `1000.${Math.floor(Math.random() * 900000) + 100000}`;
  await d.exec(sb.id, ['sh', '-c', `sleep ${anchor} </dev/null >/dev/null 2>&1 & sh -c '${script}' </dev/null >/dev/null 2>&1 &`]);
  let ws;
  if (GVISOR) {
    // A gvisor sandbox's programs are no host processes: its own ps shows the script, and
    // the host reaches its /workspace through the holder, where runsc's gofer serves it.
    await waitFor(async () => (await insideProcesses(d, sb.id, mark)).length >= 1, { what: 'the waiting script' });
    ws = `${sandboxRootOnHost(d.stateDir, sb.id)}/workspace`;
  } else {
    const [anchorProc] = await waitFor(() => {
      const p = processesMatching(`sleep ${anchor}`);
      return p.length === 1 && processesMatching(mark).length >= 1 && p;
    }, { what: 'the waiting script' });
    ws = `/proc/${anchorProc.pid}/root/workspace`;
  }
  await d.kill9();
  let result;
  try {
    fs.writeFileSync(`${ws}/go`, '');
    await waitFor(() => fs.existsSync(`${ws}/done`), { timeoutMs: 30000, what: 'the connects to finish' });
    result = fs.readFileSync(`${ws}/result`, 'utf8');
  } finally {
    await d.start();
  }
  await d.sh(sb.id, `pkill -f 'sleep ${anchor}'; true`);
  assert.doesNotMatch(result, /SUCCEEDED/, `a connection was made with the daemon down:\n${result}`);
  assert.equal((result.match(/refused at/g) || []).length, targets.length, result);
  assertNoContact('daemon down');
});
