// Files in and out of a sandbox: exact round trips, and paths that try to reach
// the host (.., symlinks, magic links) never do, in either direction.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import crypto from 'node:crypto';
import { startDaemon, stopDaemon, token } from './lib.mjs';

let d, sb, secretFile, openSecretFile, secret, evilTarget, openEvilTarget;
before(async () => {
  d = await startDaemon();
  sb = await d.create({ name: 'files-box' });
  // A host file with a marker only this test knows: it must never come back.
  secret = token('host-secret');
  secretFile = `/root/runtime-test-secret-${crypto.randomBytes(4).toString('hex')}`;
  fs.writeFileSync(secretFile, secret + '\n', { mode: 0o644 });
  // /root is 0700; this copy is readable by any host uid, so only the sandbox's
  // walls (not host permissions) keep it out.
  openSecretFile = path.join(d.dir, `open-secret-${crypto.randomBytes(4).toString('hex')}`);
  fs.writeFileSync(openSecretFile, secret + '\n', { mode: 0o644 });
  evilTarget = `/root/runtime-test-written-${crypto.randomBytes(4).toString('hex')}`;
  const openDir = path.join(d.dir, 'open-dir');
  fs.mkdirSync(openDir);
  fs.chmodSync(openDir, 0o777); // any host uid may write here
  openEvilTarget = path.join(openDir, 'written-from-sandbox');
});
after(async () => {
  fs.rmSync(secretFile, { force: true });
  fs.rmSync(evilTarget, { force: true });
  await stopDaemon(d);
});

function allBytes() {
  const b = Buffer.alloc(256 * 64 + 4096);
  for (let i = 0; i < 256 * 64; i++) b[i] = i & 0xff;
  crypto.randomFillSync(b, 256 * 64);
  return b;
}

test('cp in and out round-trips binary content with every byte value', async () => {
  const data = allBytes();
  const local = path.join(d.dir, 'bytes.bin');
  fs.writeFileSync(local, data);
  const up = await d.cli(['sandbox', 'cp', local, `${sb.id}:/workspace/bytes.bin`]);
  assert.equal(up.code, 0, up.stderr);
  const sum = await d.exec(sb.id, ['sha256sum', '/workspace/bytes.bin']);
  assert.equal(sum.stdout.split(' ')[0], crypto.createHash('sha256').update(data).digest('hex'));

  const back = path.join(d.dir, 'bytes.back');
  const down = await d.cli(['sandbox', 'cp', `${sb.id}:/workspace/bytes.bin`, back]);
  assert.equal(down.code, 0, down.stderr);
  assert.ok(fs.readFileSync(back).equals(data), 'identical bytes after the round trip');

  // stdin/stdout as LOCAL, a relative PATH (under /workspace), and a LOCAL directory.
  const viaStdin = await d.cli(['sandbox', 'cp', '-', `${sb.id}:rel.bin`], { input: data });
  assert.equal(viaStdin.code, 0, viaStdin.stderr);
  const viaStdout = await d.cli(['sandbox', 'cp', `${sb.id}:/workspace/rel.bin`, '-'], { encoding: 'buffer' });
  assert.equal(viaStdout.code, 0, viaStdout.stderr);
  assert.ok(viaStdout.stdout.equals(data));
  const outDir = path.join(d.dir, 'outdir');
  fs.mkdirSync(outDir);
  const toDir = await d.cli(['sandbox', 'cp', `${sb.id}:/workspace/rel.bin`, outDir]);
  assert.equal(toDir.code, 0, toDir.stderr);
  assert.ok(fs.readFileSync(path.join(outDir, 'rel.bin')).equals(data));

  // Overwrite.
  await d.cli(['sandbox', 'cp', '-', `${sb.id}:/workspace/rel.bin`], { input: 'short' });
  const over = await d.exec(sb.id, ['cat', '/workspace/rel.bin']);
  assert.equal(over.stdout, 'short', 'PUT truncates what was there');
});

test('an empty file round-trips (cp in, cp out, GET)', async () => {
  const empty = await d.cli(['sandbox', 'cp', '-', `${sb.id}:/workspace/empty`], { input: '' });
  assert.equal(empty.code, 0, empty.stderr);
  const size = await d.exec(sb.id, ['stat', '-c', '%s', '/workspace/empty']);
  assert.equal(size.stdout.trim(), '0');
  const emptyBack = await d.api('GET', `/v1/sandboxes/${sb.id}/files?path=/workspace/empty`);
  assert.equal(emptyBack.status, 200, `GET of an empty file: ${emptyBack.text}`);
  assert.equal(emptyBack.buf.length, 0);
  const out = path.join(d.dir, 'empty.back');
  fs.writeFileSync(out, 'old content');
  const cp = await d.cli(['sandbox', 'cp', `${sb.id}:/workspace/empty`, out]);
  assert.equal(cp.code, 0, cp.stderr);
  assert.equal(fs.readFileSync(out).length, 0);
});

test('files API: PUT raw bytes 204, GET returns them, the sandbox user owns them', async () => {
  const data = allBytes();
  const put = await d.api('PUT', `/v1/sandboxes/${sb.id}/files?path=/workspace/api.bin`, undefined, { raw: data });
  assert.equal(put.status, 204, put.text);
  const get = await d.api('GET', `/v1/sandboxes/${sb.id}/files?path=/workspace/api.bin`);
  assert.equal(get.status, 200);
  assert.ok(get.buf.equals(data));
  const owner = await d.exec(sb.id, ['stat', '-c', '%u', '/workspace/api.bin']);
  assert.equal(owner.stdout.trim(), '1000');
  const tmp = await d.api('PUT', `/v1/sandboxes/${sb.id}/files?path=/tmp/t.txt`, undefined, { raw: 'in tmp' });
  assert.equal(tmp.status, 204, tmp.text);
  assert.equal((await d.exec(sb.id, ['cat', '/tmp/t.txt'])).stdout, 'in tmp');
  const missing = await d.api('GET', `/v1/sandboxes/${sb.id}/files?path=/workspace/none`);
  assert.equal(missing.status, 404);
  assert.equal(missing.body.error.code, 'file_not_found');
  const dir = await d.api('GET', `/v1/sandboxes/${sb.id}/files?path=/workspace`);
  assert.equal(dir.status, 409, dir.text);
  assert.equal(dir.body.error.code, 'is_a_directory');
  const noPath = await d.api('GET', `/v1/sandboxes/${sb.id}/files`);
  assert.equal(noPath.status, 400, noPath.text);
});

test('files API: PUT and GET are answered while other sandboxes are created and removed', async () => {
  // The keeper opens the file while it also builds and destroys other sandboxes:
  // each answer still goes to its own request, with its own bytes.
  const gone = await d.create({ name: 'files-gone' });
  const creating = d.api('POST', '/v1/sandboxes', { name: 'files-other' });
  const removing = d.remove(gone.id);
  const datas = [0, 1, 2, 3].map(() => crypto.randomBytes(4096 + crypto.randomInt(4096)));
  const puts = await Promise.all(datas.map((data, i) =>
    d.api('PUT', `/v1/sandboxes/${sb.id}/files?path=/workspace/busy-${i}.bin`, undefined, { raw: data })));
  for (const put of puts) assert.equal(put.status, 204, put.text);
  const [gets, missing] = await Promise.all([
    Promise.all(datas.map((_, i) => d.api('GET', `/v1/sandboxes/${sb.id}/files?path=/workspace/busy-${i}.bin`))),
    d.api('GET', `/v1/sandboxes/${sb.id}/files?path=/workspace/busy-none`),
  ]);
  gets.forEach((get, i) => {
    assert.equal(get.status, 200, get.text);
    assert.ok(get.buf.equals(datas[i]), `busy-${i}.bin came back as it was written`);
  });
  assert.equal(missing.status, 404, missing.text);
  const other = await creating;
  assert.equal(other.status, 201, other.text);
  d.track(other.body.id);
  assert.equal((await removing).status, 200);
  // A client that leaves before its answer costs nothing: the daemon goes on.
  await new Promise((resolve) => {
    const req = http.request({
      host: '127.0.0.1', port: d.port, method: 'PUT', path: `/v1/sandboxes/${sb.id}/files?path=/workspace/left.bin`,
      headers: { Authorization: `Bearer ${d.key}`, 'Content-Length': 3 },
    });
    req.on('error', resolve);
    req.end('abc', () => { req.destroy(); resolve(); });
  });
  const still = await d.api('GET', `/v1/sandboxes/${sb.id}/files?path=/workspace/busy-0.bin`);
  assert.equal(still.status, 200, still.text);
  assert.equal((await d.remove(other.body.id)).status, 200);
});

test('cp keeps the file mode both ways (an executable stays executable), like docker cp', async () => {
  const script = path.join(d.dir, 'hello.sh');
  fs.writeFileSync(script, '#!/bin/sh\necho hello from a copied script\n');
  fs.chmodSync(script, 0o750);
  const up = await d.cli(['sandbox', 'cp', script, `${sb.id}:/workspace/hello.sh`]);
  assert.equal(up.code, 0, up.stderr);
  const mode = await d.exec(sb.id, ['stat', '-c', '%a', '/workspace/hello.sh']);
  assert.equal(mode.stdout.trim(), '750');
  const run = await d.exec(sb.id, ['/workspace/hello.sh']);
  assert.equal(run.exitCode, 0, run.stderr);
  assert.equal(run.stdout, 'hello from a copied script\n');
  // Copying over an existing file gives it the new file's mode.
  fs.chmodSync(script, 0o600);
  await d.cli(['sandbox', 'cp', script, `${sb.id}:/workspace/hello.sh`]);
  assert.equal((await d.exec(sb.id, ['stat', '-c', '%a', '/workspace/hello.sh'])).stdout.trim(), '600');

  // Out: the local copy gets the sandbox file's mode.
  await d.exec(sb.id, ['sh', '-c', 'printf x > /workspace/tool && chmod 0711 /workspace/tool']);
  const back = path.join(d.dir, 'tool.back');
  const down = await d.cli(['sandbox', 'cp', `${sb.id}:/workspace/tool`, back]);
  assert.equal(down.code, 0, down.stderr);
  assert.equal(fs.statSync(back).mode & 0o777, 0o711);
  // stdin has no mode: a new file gets the default 0644.
  await d.cli(['sandbox', 'cp', '-', `${sb.id}:/workspace/from-stdin`], { input: 'x' });
  assert.equal((await d.exec(sb.id, ['stat', '-c', '%a', '/workspace/from-stdin'])).stdout.trim(), '644');
});

test('files API: PUT takes ?mode= (octal permission bits), GET tells it in X-File-Mode', async () => {
  const put = await d.api('PUT', `/v1/sandboxes/${sb.id}/files?path=/workspace/m.sh&mode=0755`, undefined, { raw: '#!/bin/sh\necho m\n' });
  assert.equal(put.status, 204, put.text);
  assert.equal((await d.exec(sb.id, ['/workspace/m.sh'])).stdout, 'm\n');
  const get = await d.api('GET', `/v1/sandboxes/${sb.id}/files?path=/workspace/m.sh`);
  assert.equal(get.status, 200);
  assert.equal(get.headers.get('x-file-mode'), '0755');
  const short = await d.api('PUT', `/v1/sandboxes/${sb.id}/files?path=/workspace/m.sh&mode=700`, undefined, { raw: 'x' });
  assert.equal(short.status, 204, short.text);
  assert.equal((await d.exec(sb.id, ['stat', '-c', '%a', '/workspace/m.sh'])).stdout.trim(), '700');
  for (const bad of ['4755', '0800', 'rwx', '-1', '77777', '']) {
    const r = await d.api('PUT', `/v1/sandboxes/${sb.id}/files?path=/workspace/bad&mode=${encodeURIComponent(bad)}`, undefined, { raw: 'x' });
    assert.equal(r.status, 400, `mode ${bad}: ${r.text}`);
    assert.match(r.body.error.message, /octal/);
  }
  const notThere = await d.exec(sb.id, ['test', '-e', '/workspace/bad']);
  assert.notEqual(notThere.exitCode, 0, 'a refused PUT writes nothing');
  const getMode = await d.api('GET', `/v1/sandboxes/${sb.id}/files?path=/workspace/m.sh&mode=0755`);
  assert.equal(getMode.status, 400, getMode.text);
});

function assertNoHostContent(r, label) {
  const text = (r.stdout ?? r.text ?? '').toString() + (r.stderr ?? '');
  assert.ok(!text.includes(secret), `${label}: host content came back: ${text.slice(0, 200)}`);
  assert.ok(!text.includes(d.key), `${label}: the admin key came back`);
  assert.ok(!/^root:[^:]*:\d+:\d+:/m.test(text) || !/\$[0-9a-z]+\$/.test(text), `${label}: a shadow file came back`);
}

test('.. paths and symlinks pointing outside never return host files', async () => {
  for (const f of [secretFile, openSecretFile]) await outsidePaths(f);
  // A symlink that stays inside resolves inside: the sandbox's own /etc/passwd.
  await d.sh(sb.id, 'ln -sf /etc/passwd /workspace/passwd-link');
  const inside = await d.cli(['sandbox', 'cp', `${sb.id}:/workspace/passwd-link`, '-']);
  assert.equal(inside.code, 0, inside.stderr);
  assert.equal(inside.stdout, (await d.exec(sb.id, ['cat', '/etc/passwd'])).stdout);
  assert.notEqual(inside.stdout, fs.readFileSync('/etc/passwd', 'utf8'), "the sandbox's /etc, not the host's");
});

async function outsidePaths(secretFile) {
  const rel = '../'.repeat(12) + secretFile.slice(1);
  const setup = await d.sh(sb.id, [
    `ln -sf ${secretFile} /workspace/abs-link`,
    `ln -sf ${rel} /workspace/rel-link`,
    'ln -sfn / /workspace/root-link',
    'ln -sfn ../../../../../.. /workspace/up-link',
    'ln -sf /etc/shadow /workspace/shadow-link',
    `ln -sf ${d.stateDir}/admin.key /workspace/key-link`,
    `ln -sf /tmp/chain2 /workspace/chain1; ln -sf ${secretFile} /tmp/chain2`,
  ].join('; '));
  assert.equal(setup.exitCode, 0, setup.stderr);
  const paths = [
    '/workspace/abs-link', '/workspace/rel-link', `/workspace/root-link${secretFile}`,
    `/workspace/up-link${secretFile}`, '/workspace/shadow-link', '/workspace/key-link', '/workspace/chain1',
    `/workspace/../../../..${secretFile}`, `/../../..${secretFile}`, secretFile, '/etc/shadow',
    `${d.stateDir}/admin.key`, `/workspace/../../../../${d.stateDir}/admin.key`,
    `/workspace/up-link${d.stateDir}/admin.key`,
  ];
  for (const p of paths) {
    const r = await d.cli(['sandbox', 'cp', `${sb.id}:${p}`, '-']);
    assert.notEqual(r.code, 0, `cp out of ${p} must fail, got: ${r.stdout.slice(0, 100)}`);
    assertNoHostContent(r, p);
    const a = await d.api('GET', `/v1/sandboxes/${sb.id}/files?path=${encodeURIComponent(p)}`);
    assert.ok(a.status >= 400, `GET ${p}: ${a.status}`);
    assertNoHostContent(a, `GET ${p}`);
  }
}

test('magic links (/proc/self/root, /proc/1/root, /proc/N/cwd, fd links) are refused', async () => {
  await d.sh(sb.id, 'echo inside-file > /workspace/plain');
  const bg = await d.sh(sb.id, 'sleep 60.321 </dev/null >/dev/null 2>&1 & echo $!');
  const bgPid = bg.stdout.trim();
  const paths = [
    `/proc/self/root${secretFile}`, `/proc/1/root${secretFile}`, `/proc/thread-self/root${secretFile}`,
    `/proc/self/root${openSecretFile}`, `/proc/1/root${openSecretFile}`,
    '/proc/1/root/workspace/plain', `/proc/${bgPid}/root/workspace/plain`, `/proc/${bgPid}/cwd/plain`,
    '/proc/self/cwd/plain', '/proc/1/cwd/plain', '/proc/self/fd/0', '/proc/1/environ', '/proc/1/exe',
    `/proc/${bgPid}/exe`,
  ];
  for (const p of paths) {
    const r = await d.cli(['sandbox', 'cp', `${sb.id}:${p}`, '-']);
    assert.notEqual(r.code, 0, `cp out of ${p} must fail, got: ${r.stdout.slice(0, 100)}`);
    assertNoHostContent(r, p);
  }
  // A symlink inside the sandbox that points at a magic link is refused too.
  await d.sh(sb.id, `ln -sf /proc/1/root${secretFile} /workspace/magic; ln -sf /proc/self/root/ /workspace/magicdir`);
  for (const p of ['/workspace/magic', `/workspace/magicdir${secretFile}`]) {
    const r = await d.cli(['sandbox', 'cp', `${sb.id}:${p}`, '-']);
    assert.notEqual(r.code, 0, p);
    assertNoHostContent(r, p);
  }
  // Writing through a magic link is refused as well.
  const w = await d.cli(['sandbox', 'cp', '-', `${sb.id}:/proc/1/root/workspace/via-magic`], { input: 'x' });
  assert.notEqual(w.code, 0);
  await d.sh(sb.id, 'pkill -f "sleep 60.321"; true');
});

test('cp in through symlinks or .. never writes a host file, and read-only places stay so', async () => {
  for (const t of [evilTarget, openEvilTarget]) await writesOutside(t);
  const hostPasswd = fs.readFileSync('/etc/passwd');
  for (const t of ['/etc/passwd', '/usr/bin/runtime-test-x', '/bin/sh']) {
    const r = await d.cli(['sandbox', 'cp', '-', `${sb.id}:${t}`], { input: 'x' });
    assert.notEqual(r.code, 0, `cp in to ${t} must fail`);
  }
  assert.ok(fs.readFileSync('/etc/passwd').equals(hostPasswd));
  assert.ok(!fs.existsSync('/usr/bin/runtime-test-x'));
});

async function writesOutside(target) {
  const dir = path.dirname(target);
  await d.sh(sb.id, `ln -sf ${target} /workspace/evil-link; ln -sfn ${dir} /workspace/outdir`);
  const attempts = [
    '/workspace/evil-link', `/workspace/outdir/${path.basename(target)}`,
    `/workspace/../../../..${target}`, target, `/proc/1/root${target}`,
  ];
  for (const t of attempts) {
    await d.cli(['sandbox', 'cp', '-', `${sb.id}:${t}`], { input: 'written from a sandbox' });
    assert.ok(!fs.existsSync(target), `cp in to ${t} created ${target} on the host`);
  }
}

test('special files are refused instead of hanging: FIFO, /dev/zero, a directory', async () => {
  await d.sh(sb.id, 'mkfifo /workspace/fifo');
  for (const p of ['/workspace/fifo', '/dev/zero', '/dev/urandom', '/workspace']) {
    const t0 = Date.now();
    const r = await d.cli(['sandbox', 'cp', `${sb.id}:${p}`, '-'], { timeoutMs: 15000, encoding: 'buffer' });
    assert.equal(r.signal, null, `${p}: cp did not finish`);
    assert.notEqual(r.code, 0, `${p}: refused`);
    assert.ok(Date.now() - t0 < 5000, `${p}: answered quickly`);
  }
  const w = await d.cli(['sandbox', 'cp', '-', `${sb.id}:/workspace/fifo`], { input: 'x', timeoutMs: 15000 });
  assert.equal(w.signal, null, 'cp into a FIFO did not finish');
  assert.notEqual(w.code, 0);
});

test('the files API cannot write kernel knobs or read what the sandbox user may not', async () => {
  // The files API opens paths with its own helper (not through exec), so its
  // identity and view are checked separately.
  for (const p of ['/proc/sys/kernel/core_pattern', '/proc/sysrq-trigger', '/proc/1/oom_score_adj',
    '/proc/sys/kernel/hostname', '/proc/1/attr/current', '/etc/passwd', '/usr/bin/env']) {
    const before_ = p.startsWith('/proc/sys/') ? fs.readFileSync(p, 'utf8').slice(0, 200) : null;
    const r = await d.api('PUT', `/v1/sandboxes/${sb.id}/files?path=${encodeURIComponent(p)}`, undefined, { raw: '|/tmp/x' });
    assert.ok(r.status >= 400, `PUT ${p}: ${r.status} ${r.text}`);
    if (before_ !== null) assert.equal(fs.readFileSync(p, 'utf8').slice(0, 200), before_);
  }
  for (const p of ['/proc/kcore', '/proc/1/environ', '/proc/1/mem', '/proc/kmsg', '/proc/1/maps']) {
    const r = await d.api('GET', `/v1/sandboxes/${sb.id}/files?path=${encodeURIComponent(p)}`, undefined, { timeoutMs: 10000 });
    assert.ok(r.status >= 400, `GET ${p}: ${r.status} ${r.text.slice(0, 100)}`);
  }
});

// Issue 23: a full disk used to leave half an upload in place of the file. An upload
// now goes to a new file beside its path and takes the path's place only once it is
// all on disk: the old file stays whole, and nothing is left behind.
test('an upload that fills the disk leaves the old file whole and no part of the new one', async () => {
  const small = await d.create({ name: 'files-full', diskMiB: 64 });
  const put = (p, raw, q = '') => d.api('PUT', `/v1/sandboxes/${small.id}/files?path=${encodeURIComponent(p)}${q}`,
    undefined, { raw });
  assert.equal((await put('/workspace/keep.txt', Buffer.from('version one\n'), '&mode=0600')).status, 204);
  const big = await put('/workspace/keep.txt', Buffer.alloc(63 * 1024 * 1024, 'y'));
  assert.equal(big.status, 507, big.text);
  assert.equal(big.body.error.code, 'disk_full');
  const got = await d.api('GET', `/v1/sandboxes/${small.id}/files?path=/workspace/keep.txt`);
  assert.equal(got.buf.toString(), 'version one\n', 'the old file is whole');
  const ls = await d.exec(small.id, ['ls', '-a', '/workspace']);
  assert.deepEqual(ls.stdout.split('\n').filter((n) => n && !['.', '..', 'lost+found'].includes(n)), ['keep.txt'],
    'no partial or temporary file is left');
  // A replacement without a mode keeps the file's own; one with a mode sets it.
  assert.equal((await put('/workspace/keep.txt', Buffer.from('version two\n'))).status, 204);
  let st = await d.exec(small.id, ['stat', '-c', '%a %s', '/workspace/keep.txt']);
  assert.equal(st.stdout.trim(), '600 12');
  assert.equal((await put('/workspace/keep.txt', Buffer.from('v3\n'), '&mode=0644')).status, 204);
  st = await d.exec(small.id, ['stat', '-c', '%a', '/workspace/keep.txt']);
  assert.equal(st.stdout.trim(), '644');
  await d.remove(small.id);
});
