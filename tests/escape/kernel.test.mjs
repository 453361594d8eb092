// From inside a sandbox: the kernel interfaces that lead out — mounts, new user
// namespaces, modules, bpf, keyrings, perf, raw sockets, other syscall ABIs.
// Each attack is one run of tests/escape/probe.c; exit 0 would be an escape.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startDaemon, stopDaemon, probe, assertRefused, GVISOR } from '../e2e/lib.mjs';

let d, sb;
before(async () => {
  d = await startDaemon();
  sb = await d.create({ name: 'kernel' });
  await d.installProbe(sb.id);
});
after(async () => {
  await stopDaemon(d);
});

const EPERM = /Operation not permitted/;

test('mount: tmpfs, bind, proc and remount all fail', async () => {
  for (const kind of ['tmpfs', 'bind', 'proc', 'remount']) {
    assertRefused(await probe(d, sb.id, ['mount', kind, '/tmp']), `mount ${kind}`, EPERM);
  }
  for (const cmd of ['mount -t tmpfs none /tmp', 'mount --bind / /tmp', 'mount -t proc proc /tmp', 'umount /proc']) {
    const r = await d.sh(sb.id, `${cmd} 2>&1; echo "rc=$?"`);
    assert.match(r.stdout, /rc=[1-9]/, `${cmd}: ${r.stdout}`);
  }
  assertRefused(await probe(d, sb.id, ['chroot']), 'chroot', EPERM);
});

test('a new user namespace cannot be made: unshare -U, clone, unshare()', async () => {
  for (const cmd of ['unshare -U true', 'unshare -Ur id', 'unshare -m true', 'unshare -n true', 'unshare -p -f true']) {
    const r = await d.sh(sb.id, `${cmd} 2>&1; echo "rc=$?"`);
    assert.match(r.stdout, /rc=[1-9]/, `${cmd}: ${r.stdout}`);
    assert.doesNotMatch(r.stdout, /uid=0/);
  }
  assertRefused(await probe(d, sb.id, ['userns']), 'unshare(CLONE_NEWUSER)', EPERM);
  assertRefused(await probe(d, sb.id, ['clone-userns']), 'clone(CLONE_NEWUSER)', EPERM);
  assertRefused(await probe(d, sb.id, ['unshare']), 'unshare of other namespaces');
});

test('clone3 cannot make a user namespace either', async () => {
  assertRefused(await probe(d, sb.id, ['clone3-userns']), 'clone3(CLONE_NEWUSER)');
});

test('other syscall ABIs (x32, i386 int 0x80) do not bypass the filter', async () => {
  assertRefused(await probe(d, sb.id, ['x32-userns']), 'x32 unshare(CLONE_NEWUSER)');
  assertRefused(await probe(d, sb.id, ['i386-userns']), 'i386 unshare(CLONE_NEWUSER)');
});

test('kernel modules cannot be loaded or removed', async () => {
  assertRefused(await probe(d, sb.id, ['module']), 'init_module/finit_module/delete_module', EPERM);
  const r = await d.sh(sb.id, 'modprobe dummy 2>&1; insmod /dev/null 2>&1; echo "rc=$?"');
  assert.match(r.stdout, /rc=[1-9]/);
});

test('bpf, keyctl, perf_event_open, raw sockets, mknod, setuid(0) fail', async () => {
  assertRefused(await probe(d, sb.id, ['bpf']), 'bpf', EPERM);
  assertRefused(await probe(d, sb.id, ['keyctl']), 'keyctl', EPERM);
  assertRefused(await probe(d, sb.id, ['perf']), 'perf_event_open');
  assertRefused(await probe(d, sb.id, ['raw-socket']), 'raw sockets');
  assertRefused(await probe(d, sb.id, ['mknod']), 'mknod');
  assertRefused(await probe(d, sb.id, ['setuid']), 'setuid(0)', EPERM);
});

test('after all the attacks the sandbox and the daemon still work', async () => {
  const r = await d.exec(sb.id, ['echo', 'alive']);
  assert.equal(r.stdout, 'alive\n');
  const other = await d.create({});
  assert.equal((await d.exec(other.id, ['true'])).exitCode, 0);
});
