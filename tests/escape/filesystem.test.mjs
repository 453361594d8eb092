// From inside a sandbox: host files, the daemon's state, another sandbox's files,
// writable system directories, device nodes, /proc/sys and /sys stay out of reach.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { startDaemon, stopDaemon, token, probe, assertRefused, GVISOR, sandboxRootOnHost } from '../e2e/lib.mjs';

let d, a, b, hostSecret, rootSecretFile, openSecretFile, otherMarker;

before(async () => {
  d = await startDaemon();
  hostSecret = token('host-secret');
  rootSecretFile = `/root/runtime-test-secret-${crypto.randomBytes(4).toString('hex')}`;
  fs.writeFileSync(rootSecretFile, hostSecret + '\n', { mode: 0o644 });
  // Readable by any host uid (its dir is 0711): only the sandbox's walls keep it out.
  openSecretFile = path.join(d.dir, `open-secret-${crypto.randomBytes(4).toString('hex')}`);
  fs.writeFileSync(openSecretFile, hostSecret + '\n', { mode: 0o644 });
  a = await d.create({ name: 'fs-a', diskMiB: 64 });
  b = await d.create({ name: 'fs-b', diskMiB: 64 });
  otherMarker = token('other-sandbox');
  const w = await d.sh(b.id, `echo ${otherMarker} > /workspace/marker.txt; echo ${otherMarker} > /tmp/marker.txt; ` +
    `echo ${otherMarker} > /dev/shm/marker.txt`);
  assert.equal(w.exitCode, 0, w.stderr);
  await d.installProbe(a.id);
});

after(async () => {
  fs.rmSync(rootSecretFile, { force: true });
  await stopDaemon(d);
});

test('host files are not readable: /root, /etc/shadow, the state dir, admin.key', async () => {
  const paths = [rootSecretFile, openSecretFile, '/etc/shadow', path.join(d.stateDir, 'admin.key'),
    d.stateDir, path.join(d.stateDir, 'db'), d.dir, '/root'];
  for (const p of paths) {
    const r = await d.exec(a.id, ['cat', p]);
    assert.notEqual(r.exitCode, 0, `cat ${p} inside succeeded: ${r.stdout.slice(0, 100)}`);
    assert.ok(!r.stdout.includes(hostSecret) && !r.stdout.includes(d.key), `cat ${p} leaked`);
    const pr = await probe(d, a.id, ['read', p]);
    assertRefused(pr, `read ${p}`);
  }
  // The sandbox's /etc is its own: no host password hashes, no host accounts.
  const shadow = await d.sh(a.id, 'cat /etc/shadow 2>/dev/null; cat /etc/passwd');
  assert.ok(!/\$[0-9a-z]+\$[^:]{8,}/.test(shadow.stdout), 'no password hashes');
  const hostUsers = fs.readFileSync('/etc/passwd', 'utf8').split('\n').map((l) => l.split(':')[0])
    .filter((u) => u && !['root', 'nobody', 'user'].includes(u));
  for (const u of hostUsers) assert.ok(!new RegExp(`^${u}:`, 'm').test(shadow.stdout), `host user ${u} is visible`);
});

test('a search of the whole sandbox filesystem finds no host or other-sandbox marker', async () => {
  // /proc and /sys are virtual; /usr is the host's read-only /usr (8 GB, and its own
  // content is no secret); everything else is searched.
  const needles = [hostSecret, otherMarker, d.key];
  const script = `for n in ${needles.join(' ')}; do grep -rlsF --exclude-dir=proc --exclude-dir=sys ` +
    `--exclude-dir=usr "$n" / ; done; echo searched`;
  const r = await d.sh(a.id, script, { timeoutMs: 60000 });
  assert.equal(r.timedOut, false);
  assert.equal(r.stdout.trim(), 'searched', `found a marker in: ${r.stdout}`);
  // The control: the same search in b finds b's own marker, so the search works.
  const control = await d.sh(b.id, `grep -rlsF --exclude-dir=proc --exclude-dir=sys --exclude-dir=usr ${otherMarker} /`);
  assert.match(control.stdout, /\/workspace\/marker\.txt/);
  assert.match(control.stdout, /\/tmp\/marker\.txt/);
});

test("another sandbox's /workspace, /tmp and /dev/shm are separate", async () => {
  for (const p of ['/workspace/marker.txt', '/tmp/marker.txt', '/dev/shm/marker.txt']) {
    const r = await d.exec(a.id, ['cat', p]);
    assert.notEqual(r.exitCode, 0, `${p} of b is visible in a`);
  }
  const mi = await d.exec(a.id, ['cat', '/proc/self/mountinfo']);
  assert.ok(!mi.stdout.includes(d.stateDir), `mountinfo reveals the state dir:\n${mi.stdout}`);
  assert.ok(!mi.stdout.includes(b.id), "mountinfo names the other sandbox");
});

test('/ /usr /etc /bin are read-only; /workspace and /tmp are writable', async () => {
  for (const p of ['/x', '/usr/x', '/usr/bin/x', '/etc/x', '/bin/x', '/lib/x', '/etc/passwd', '/proc/x']) {
    const r = await d.exec(a.id, ['touch', p]);
    assert.notEqual(r.exitCode, 0, `touch ${p} succeeded`);
    assert.match(r.stderr, /Read-only file system|Permission denied|No such file/, r.stderr);
  }
  const ro = await d.exec(a.id, ['touch', '/usr/runtime-probe']);
  // gVisor answers a write to a read-only mount of its gofer with EACCES, not EROFS; the
  // write fails all the same (and the loop above shows it for every path).
  assert.match(ro.stderr, GVISOR ? /Permission denied/ : /Read-only file system/);
  assertRefused(await probe(d, a.id, ['mount', 'remount']), 'remount / rw');
  const ok = await d.sh(a.id, 'touch /workspace/w /tmp/w && echo writable');
  assert.equal(ok.stdout, 'writable\n');
  // Mount flags: nothing executable-setuid or device-bearing is writable.
  const mi = (await d.exec(a.id, ['cat', '/proc/self/mountinfo'])).stdout.trim().split('\n');
  for (const line of mi) {
    const [, , , , target, opts] = line.split(' ');
    if (['/', '/usr', '/etc/ld.so.cache'].includes(target)) assert.match(opts, /\bro\b/, line);
    // gVisor's mounts do not carry nodev (its devices are its own: a host device node never
    // opens there, shown below), nor its root nosuid (an OCI root takes no options; it is
    // read-only, and every program runs with no_new_privs, see the setuid test).
    if (GVISOR && target === '/') continue;
    if (['/workspace', '/tmp', '/dev/shm', '/run', '/usr', '/'].includes(target)) {
      assert.match(opts, /\bnosuid\b/, `${target} is nosuid: ${line}`);
      if (!GVISOR) assert.match(opts, /\bnodev\b/, `${target} is nodev: ${line}`);
    }
  }
  if (GVISOR) {
    // What nodev stands for: a device node put into the sandbox's writable dirs (here by the
    // host's root, since mknod inside is refused) opens no host device.
    const root = sandboxRootOnHost(d.stateDir, a.id);
    const nodes = [['mem', 'c', 1, 1], ['kmsg', 'c', 1, 11], ['tty1', 'c', 4, 1], ['loop0', 'b', 7, 0], ['vda', 'b', 254, 0]];
    try {
      for (const [n, t, ma, mi_] of nodes) {
        for (const dir of ['workspace', 'tmp']) {
          const r = spawnSync('mknod', ['-m', '666', `${root}/${dir}/dev-${n}`, t, String(ma), String(mi_)], { encoding: 'utf8' });
          assert.equal(r.status, 0, `mknod ${dir}/dev-${n} on the host: ${r.stderr}`);
        }
      }
      for (const [n] of nodes) {
        for (const dir of ['/workspace', '/tmp']) {
          const r = await d.exec(a.id, ['head', '-c', '16', `${dir}/dev-${n}`]);
          assert.notEqual(r.exitCode, 0, `${dir}/dev-${n} opened: ${JSON.stringify(r.stdout)}`);
          assert.match(r.stderr, /No such device or address|Operation not permitted/, r.stderr);
        }
      }
    } finally {
      for (const [n] of nodes) for (const dir of ['workspace', 'tmp']) fs.rmSync(`${root}/${dir}/dev-${n}`, { force: true });
    }
  }
});

test('/dev has only the minimal nodes', async () => {
  const allowed = new Set(['null', 'zero', 'full', 'random', 'urandom', 'tty', 'fd', 'stdin', 'stdout',
    'stderr', 'ptmx', 'pts', 'shm', 'console', 'core', 'mqueue']);
  // gVisor's /dev is its own and always has these (devices of gVisor's kernel, not the
  // host's): fuse, net/tun, and char/ (symlinks to the nodes by number). What they could
  // lead to is refused below.
  if (GVISOR) for (const n of ['fuse', 'net', 'char']) allowed.add(n);
  const ls = await d.exec(a.id, ['ls', '-A', '/dev']);
  const extra = ls.stdout.trim().split('\n').filter((n) => n && !allowed.has(n));
  assert.deepEqual(extra, [], `unexpected /dev entries: ${extra}`);
  const blk = await d.sh(a.id, 'find /dev -type b 2>/dev/null; ls /dev/kvm /dev/mem /dev/kmsg /dev/vda /dev/loop0 /dev/loop-control 2>/dev/null; true');
  assert.equal(blk.stdout, '', `block or sensitive devices: ${blk.stdout}`);
  const chars = await d.sh(a.id, "find /dev -type c -exec stat -c '%t:%T %n' {} + 2>/dev/null");
  for (const line of chars.stdout.trim().split('\n').filter(Boolean)) {
    // 1:3 null, 1:5 zero, 1:7 full, 1:8 random, 1:9 urandom, 5:0 tty, 5:2 ptmx, 88:* pts;
    // under gVisor also 10:229 /dev/fuse and 10:200 /dev/net/tun.
    const re = GVISOR ? /^(1:[35789]|5:[02]|88:[0-9a-f]+) |^a:e5 \/dev\/fuse$|^a:c8 \/dev\/net\/tun$/
      : /^(1:[35789]|5:[02]|88:[0-9a-f]+) /;
    assert.match(line, re, `unexpected device ${line}`);
  }
  if (GVISOR) {
    // /dev/fuse and /dev/net/tun open (as on Linux, they are 0666), but what they are for
    // is refused: mounting a FUSE filesystem, and making a tun device (CAP_NET_ADMIN).
    const fuse = await d.sh(a.id, 'mount -t fuse -o fd=3,rootmode=40000,user_id=1000,group_id=1000 fuse /tmp 3<>/dev/fuse 2>&1; echo "rc=$?"');
    assert.match(fuse.stdout, /rc=[1-9]/, fuse.stdout);
    const tun = await d.exec(a.id, ['python3', '-c', `import fcntl, os, struct
fd = os.open('/dev/net/tun', os.O_RDWR)
try:
    fcntl.ioctl(fd, 0x400454ca, struct.pack('16sH', b'rt0', 0x1001))  # TUNSETIFF, IFF_TUN|IFF_NO_PI
    print('SUCCEEDED')
except OSError as e:
    print('refused', e.strerror)`]);
    assert.equal(tun.stdout, 'refused Operation not permitted\n', tun.stdout + tun.stderr);
  }
  assertRefused(await probe(d, a.id, ['mknod']), 'mknod a block device');
});

test('/proc/sys, /proc/sysrq-trigger and other kernel knobs are not writable', async () => {
  const knobs = ['/proc/sys/kernel/core_pattern', '/proc/sys/kernel/hostname', '/proc/sys/vm/drop_caches',
    '/proc/sys/kernel/modprobe', '/proc/sys/net/ipv4/ip_forward', '/proc/sysrq-trigger', '/proc/1/oom_score_adj',
    '/proc/kmsg', '/proc/sys/kernel/unprivileged_bpf_disabled', '/proc/sys/user/max_user_namespaces'];
  for (const k of knobs) {
    assertRefused(await probe(d, a.id, ['open-write', k]), `open ${k} for writing`);
  }
  const sh = await d.sh(a.id, 'echo x > /proc/sys/kernel/hostname; echo c > /proc/sysrq-trigger; echo done');
  assert.match(sh.stderr, /Read-only file system|Permission denied/);
  assert.notEqual(fs.readFileSync('/proc/sys/kernel/hostname', 'utf8').trim(), 'x');
  // Kernel memory and logs stay unreadable.
  for (const p of ['/proc/kcore', '/proc/kmsg', '/proc/1/environ', '/proc/1/mem', '/proc/1/fd/0']) {
    assertRefused(await probe(d, a.id, ['read', p]), `read ${p}`);
  }
  const syms = await d.sh(a.id, 'head -c 4096 /proc/kallsyms 2>/dev/null');
  assert.ok(!/^[0-9a-f]{16} [tT] /m.test(syms.stdout) || /^0{16} /m.test(syms.stdout),
    'kernel symbol addresses are not shown');
});

test('/sys is absent or read-only', async () => {
  const r = await d.sh(a.id, 'if [ -e /sys ]; then echo present; else echo absent; fi');
  if (r.stdout.trim() === 'present') {
    for (const p of ['/sys/kernel/uevent_helper', '/sys/fs/cgroup/cgroup.procs', '/sys/power/state']) {
      assertRefused(await probe(d, a.id, ['open-write', p]), `open ${p} for writing`);
    }
    const t = await d.exec(a.id, ['touch', '/sys/x']);
    assert.notEqual(t.exitCode, 0);
  } else {
    assert.equal(r.stdout.trim(), 'absent');
  }
  const cg = await d.sh(a.id, 'grep -c cgroup /proc/self/mountinfo; true');
  if (!GVISOR) {
    // No cgroup filesystem either, so no way to move out of the sandbox's cgroup.
    assert.equal(cg.stdout.trim(), '0', 'no cgroup mount inside');
    return;
  }
  // gVisor's own cgroups are mounted (the init writes the pids limit there); they are the
  // sentry's, not the host's, and the programs can change nothing in them: no move, no
  // limit raised, no cgroup of their own.
  assert.notEqual(cg.stdout.trim(), '0', 'gVisor mounts its own cgroups');
  for (const f of ['cgroup.procs', 'tasks', 'pids.max']) {
    assertRefused(await probe(d, a.id, ['open-write', `/sys/fs/cgroup/pids/${f}`]), `open pids/${f} for writing`);
  }
  assertRefused(await probe(d, a.id, ['open-write', '/sys/fs/cgroup/memory/memory.limit_in_bytes']),
    'open memory.limit_in_bytes for writing');
  const mk = await d.exec(a.id, ['mkdir', '/sys/fs/cgroup/pids/mine']);
  assert.notEqual(mk.exitCode, 0, 'a cgroup of its own');
});

test('setuid binaries do not elevate (nosuid + no_new_privs)', async () => {
  const su = await d.sh(a.id, 'su -c id root </dev/null; echo "su=$?"; ' +
    'mount -t tmpfs none /tmp 2>&1; echo "mount=$?"; id -u');
  assert.doesNotMatch(su.stdout, /uid=0/);
  assert.match(su.stdout, /su=[1-9]/);
  assert.match(su.stdout, /mount=[1-9]/);
  assert.equal(su.stdout.trim().split('\n').pop(), '1000');
  // The setuid bits exist on the host's /usr, but the mount is nosuid and the
  // process has no_new_privs, so exec never raises privileges.
  const found = await d.sh(a.id, 'find /usr/bin -perm -4000 -user root 2>/dev/null | wc -l');
  const st = await d.sh(a.id, "grep NoNewPrivs /proc/self/status; awk '$5 == \"/usr\" {print $6}' /proc/self/mountinfo");
  assert.match(st.stdout, /NoNewPrivs:\s+1/);
  if (Number(found.stdout.trim()) > 0) assert.match(st.stdout, /nosuid/, '/usr is nosuid');
  assertRefused(await probe(d, a.id, ['setuid']), 'setuid(0)');
});
