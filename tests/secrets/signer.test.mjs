// The signer: the interception CA key lives in a process of its own
// (src/mitm/signer.c, started by src/daemon/main.c), as a security reviewer
// would check it from the host:
//   - it runs as its own uid (not root, not the server's, no sandbox's), with no
//     capabilities, no_new_privs and a seccomp filter;
//   - it holds no descriptor but stdio (its log) and one socket;
//   - the CA's private key is in its memory and in neither the keeper's nor the
//     server's (the keeper never loads it, so it cannot sign for anyone);
//   - the server never waits for it: connections to a new host wait for its
//     leaf (one request however many they are) while the API answers; a
//     signer that hangs costs them its 5 s timeout;
//   - when it dies, the server neither stalls nor crashes: requests pending
//     fail at once, leaves it already minted still serve, a new host's TLS is
//     refused at once, the log says why, and the API keeps answering.
// Names under *.many.test resolve to the sink (tests/secrets/lib.mjs), so a
// handshake costs no upstream TLS; inside.mjs `handshakes` reads the leaf.

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { hostProcesses, pidAlive } from '../e2e/lib.mjs';
import { SecretsWorld, isRoot, searchMemory, waitFor } from './lib.mjs';


let w, d, sb;

const statusOf = (pid) => fs.readFileSync(`/proc/${pid}/status`, 'utf8');
const field = (status, name) => (new RegExp(`^${name}:[ \\t]*(.*)$`, 'm').exec(status) || [])[1];

function signerPid() {
  const { signer } = d.uids(); // the daemon's own, from its uid block
  const kids = hostProcesses().filter((p) => p.ppid === d.proc.pid && p.state !== 'Z' && p.uid === signer);
  assert.equal(kids.length, 1, `one signer among the keeper's children: ${JSON.stringify(kids.map((p) => [p.pid, p.uid]))}`);
  return kids[0].pid;
}

/** The CA's private scalar, as bytes in both orders: OpenSSL's BIGNUM keeps
 * it in little-endian words, the key file in big-endian. */
function caKeyNeedles() {
  const pem = fs.readFileSync(path.join(d.stateDir, 'ca', 'ca.key'));
  const dBytes = Buffer.from(crypto.createPrivateKey(pem).export({ format: 'jwk' }).d, 'base64url');
  assert.equal(dBytes.length, 32, 'a P-256 private scalar');
  return [dBytes.toString('latin1'), Buffer.from(dBytes).reverse().toString('latin1')];
}

/** Resolves once n connections to one of names have reached the proxy (each is
 * allowed, then waits for its leaf). */
async function connected(names, n) {
  await waitFor(async () => (await d.events(sb.id)).filter((e) => e.kind === 'egress.allowed' && names.includes(e.host)).length >= n,
    { timeoutMs: 4000, what: `${n} connections to ${names.join(' ')}` });
}

const handshakes = (from, to, fullFor = []) =>
  d.inside(sb.id, 'handshakes', { from, to, suffix: '.many.test', concurrency: 4, fullFor, timeoutMs: 5000 },
    { timeoutMs: 60000 });

describe('secrets: the signer holds the CA key alone', { skip: !isRoot() && 'must run as root (runtimed and ip netns need it)' }, () => {
  before(async () => {
    w = await new SecretsWorld().setup();
    d = w.daemon;
    await d.putSecret('MANY', { value: 'many-value', hosts: ['*.many.test'] });
    sb = await d.secretsSandbox();
  });
  after(async () => {
    await w?.teardown();
  });

  test('it runs as its own unprivileged uid, confined', () => {
    const s = statusOf(signerPid());
    const { signer, server } = d.uids();
    assert.equal(field(s, 'Uid'), `${signer}\t${signer}\t${signer}\t${signer}`);
    assert.equal(field(s, 'Gid'), `${signer}\t${signer}\t${signer}\t${signer}`);
    assert.notEqual(signer, server);
    assert.equal(field(s, 'Groups'), '', 'no supplementary groups');
    for (const cap of ['CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb']) {
      assert.equal(field(s, cap), '0000000000000000', `${cap} is empty`);
    }
    assert.equal(field(s, 'NoNewPrivs'), '1');
    assert.equal(field(s, 'Seccomp'), '2');
  });

  test('it holds stdio and one socket, nothing else', () => {
    const pid = signerPid();
    const fds = fs.readdirSync(`/proc/${pid}/fd`).map(Number).sort((a, b) => a - b);
    const others = fds.filter((fd) => fd > 2);
    const what = fds.map((fd) => `${fd} -> ${fs.readlinkSync(`/proc/${pid}/fd/${fd}`)}`).join(', ');
    assert.equal(others.length, 1, `descriptors beyond stdio: ${what}`);
    assert.match(fs.readlinkSync(`/proc/${pid}/fd/${others[0]}`), /^socket:\[\d+\]$/, what);
    // Not the state directory, not the listeners, not the lock: nothing of the keeper's.
    for (const fd of [0, 1, 2]) {
      const t = fs.readlinkSync(`/proc/${pid}/fd/${fd}`);
      assert.ok(!t.startsWith('socket:') && !t.includes(`${d.stateDir}/`), `stdio ${fd} -> ${t}`);
    }
    assert.equal(fs.readlinkSync(`/proc/${pid}/cwd`), '/', 'it works from /');
  });

  test('the CA key is in the signer\'s memory only: neither the keeper nor the server has it', async () => {
    const ok = await handshakes(0, 1); // one leaf signed: the key has been used
    assert.deepEqual(ok.errors, {});
    const needles = caKeyNeedles();
    const server = d.daemonPids().find((p) => p !== d.proc.pid);
    const inSigner = searchMemory(signerPid(), needles);
    assert.ok(inSigner.found.length > 0, `the search finds the key where it is (${inSigner.bytes} bytes searched)`);
    for (const [who, pid] of [['keeper', d.proc.pid], ['server', server]]) {
      const r = searchMemory(pid, needles);
      assert.ok(r.bytes > 0, `${who}: memory searched`);
      assert.deepEqual(r.found, [], `the ${who} (pid ${pid}) holds the CA's private key`);
    }
  });

  test('connections to one new host at once wait for one leaf, and the loop does not wait', async () => {
    const N = 8;
    const pid = signerPid();
    process.kill(pid, 'SIGSTOP'); // a signer that is slow: every connection to the host waits
    let run;
    try {
      run = d.inside(sb.id, 'handshakes', { from: 300, to: 300 + N, same: true, suffix: '.many.test', concurrency: N,
        timeoutMs: 20000 }, { timeoutMs: 60000 });
      await connected(['n300.many.test'], N);
      const t0 = Date.now();
      assert.equal((await d.api('GET', '/v1/sandboxes')).status, 200);
      assert.ok(Date.now() - t0 < 500, `the API took ${Date.now() - t0} ms while the signer was stopped`);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    const r = await run;
    assert.deepEqual(r.errors, {});
    assert.equal(r.ok, N);
    // A request per connection would have minted N leaves (random serials), each replacing the last.
    assert.equal(new Set(r.leaves).size, 1, `one leaf for all: ${r.leaves.join(' ')}`);
    const again = await handshakes(300, 301, [300]);
    assert.equal(again.serials[300], r.leaves[0], 'and it is the cached one');
  });

  test('a signer that hangs costs a new host its connections after the timeout, and its late answer is dropped', async () => {
    const pid = signerPid();
    process.kill(pid, 'SIGSTOP');
    let stuck;
    try {
      stuck = await d.inside(sb.id, 'handshakes', { from: 200, to: 202, suffix: '.many.test', concurrency: 2, timeoutMs: 15000 },
        { timeoutMs: 60000 });
    } finally {
      process.kill(pid, 'SIGCONT'); // it answers now, for requests that have failed
    }
    assert.equal(stuck.ok, 0, JSON.stringify(stuck));
    assert.ok(stuck.ms >= 4500 && stuck.ms < 12000, `the stuck requests failed after ${stuck.ms} ms (timeout 5 s)`);
    const later = await handshakes(202, 204, [202]);
    assert.deepEqual(later.errors, {}, 'the signer serves again, each answer to its own request');
    assert.equal(later.full[202], later.serials[202]);
  });

  test('when it dies, requests pending and new hosts fail at once and the server carries on', async () => {
    const first = await handshakes(10, 11, [10]);
    assert.deepEqual(first.errors, {});
    const server = d.daemonPids().find((p) => p !== d.proc.pid);
    const pid = signerPid();
    const logAt = d.log().length;
    // Killed while requests wait for it: they fail at its hang-up, not after the 5 s timeout.
    process.kill(pid, 'SIGSTOP');
    const pending = handshakes(100, 104);
    try {
      await connected(['n100.many.test', 'n101.many.test', 'n102.many.test', 'n103.many.test'], 4);
    } finally {
      process.kill(pid, 'SIGKILL');
    }
    const killedAt = Date.now();
    await waitFor(() => !pidAlive(pid), { what: 'the signer to die' });
    const cut = await pending;
    assert.equal(cut.ok, 0, `hosts got leaves from a dead signer: ${JSON.stringify(cut)}`);
    assert.ok(Date.now() - killedAt < 3000, `pending requests ended ${Date.now() - killedAt} ms after the kill`);

    const fresh = await handshakes(104, 108);
    assert.equal(fresh.ok, 0, `new hosts got leaves without a signer: ${JSON.stringify(fresh)}`);
    // Each refusal is the signer's EOF, not its 5 s timeout.
    assert.ok(fresh.ms < 4000, `4 refusals took ${fresh.ms} ms`);
    await waitFor(() => /the signer process has exited/.test(d.log().slice(logAt)),
      { what: 'a log line that names the dead signer' });

    const cached = await handshakes(10, 11, [10]);
    assert.deepEqual(cached.errors, {}, 'a leaf minted before still serves');
    assert.equal(cached.serials[10], first.serials[10]);
    assert.ok(pidAlive(server) && pidAlive(d.proc.pid), 'server and keeper still run');
    assert.equal((await d.api('GET', '/v1/sandboxes')).status, 200);
  });
});
