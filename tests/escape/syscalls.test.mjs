// From inside a sandbox: every call on the seccomp deny-list (src/confine/confine.c,
// reviewed in docs/seccomp.md) fails with EPERM, modify_ldt above all; calls through
// the x32 and i386 ABIs kill the process; and ordinary programs still run after.
// Calls are made raw by tests/escape/sysprobe.c, with arguments that do nothing if
// a call got through (zero lengths, bad fds, reads of the caller's own state).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { startDaemon, stopDaemon, ROOT, GVISOR } from '../e2e/lib.mjs';

const x64 = process.arch === 'x64';
const EPERM = 1, ENOSYS = 38;

// name, x86_64 number, arguments. Where the comment names another errno, that is
// what an unfiltered kernel answers, so EPERM proves the filter refused the call.
const DENIED = [
  ['mount', 165, '0,0,0,0,0'],
  ['umount2', 166, 'buf,0'],
  ['pivot_root', 155, 'buf,buf'],
  ['chroot', 161, 'buf'], // ENOENT
  ['move_mount', 429, '-1,buf,-1,buf,0'],
  ['open_tree', 428, '-1,buf,0'], // ENOENT
  ['fsopen', 430, 'buf,0'],
  ['fsconfig', 431, '-1,0,0,0,0'], // EBADF
  ['fsmount', 432, '-1,0,0'],
  ['fspick', 433, '-1,buf,0'],
  ['mount_setattr', 442, '-1,buf,0,0,0'],
  ['open_tree_attr', 467, '-1,buf,0,0,0'], // ENOENT; denied by number
  ['ptrace', 101, '3,self,0,0'], // PTRACE_PEEKUSER of an untraced self: ESRCH
  ['process_vm_readv', 310, 'self,0,0,0,0,0'], // 0
  ['process_vm_writev', 311, 'self,0,0,0,0,0'], // 0
  ['process_madvise', 440, '-1,0,0,0,0'], // EBADF
  ['kcmp', 312, 'self,self,0,0,0'], // 0
  ['pidfd_getfd', 438, '-1,0,0'], // EBADF
  ['kexec_load', 246, '0,0,0,0'],
  ['kexec_file_load', 320, '-1,-1,0,0,0'],
  ['init_module', 175, '0,0,0'],
  ['finit_module', 313, '-1,0,0'],
  ['delete_module', 176, 'buf,0x800'],
  ['create_module', 174, ''], // ENOSYS
  ['get_kernel_syms', 177, ''], // ENOSYS
  ['query_module', 178, ''], // ENOSYS
  ['bpf', 321, '0,0,0'],
  ['perf_event_open', 298, '0,0,-1,-1,0'], // EFAULT
  ['keyctl', 250, '0,-1,0'], // KEYCTL_GET_KEYRING_ID of no thread keyring: ENOKEY
  ['add_key', 248, '0,0,0,0,0'], // EFAULT
  ['request_key', 249, '0,0,0,0'], // EFAULT
  ['lsm_get_self_attr', 459, '0,0,0,0'], // denied by number
  ['lsm_set_self_attr', 460, '0,0,0,0'],
  ['lsm_list_modules', 461, '0,0,0'],
  ['userfaultfd', 323, '1'], // UFFD_USER_MODE_ONLY: a new fd
  ['swapon', 167, 'buf,0'],
  ['swapoff', 168, 'buf'],
  ['reboot', 169, '0,0,0,0'], // no magic numbers: EINVAL even with the capability
  ['acct', 163, '0'],
  ['quotactl', 179, '0,0,0,0'],
  ['quotactl_fd', 443, '-1,0,0,0'], // EBADF
  ['iopl', 172, '0'], // level 0: 0 (or ENOSYS)
  ['ioperm', 173, '0,0,0'], // turning nothing off: 0
  ['settimeofday', 164, '1,0'], // EFAULT
  ['clock_settime', 227, '0,1'], // EFAULT
  ['clock_adjtime', 305, '0,0'], // EFAULT
  ['adjtimex', 159, '0'], // EFAULT
  ['sethostname', 170, 'buf,-1'],
  ['setdomainname', 171, 'buf,-1'],
  ['vhangup', 153, ''],
  ['syslog', 103, '10,0,0'], // SYSLOG_ACTION_SIZE_BUFFER
  ['open_by_handle_at', 304, '-1,0,0'],
  ['name_to_handle_at', 303, '-1,buf,0,0,0'], // ENOENT
  ['fanotify_init', 300, '0x200,0'],
  ['io_uring_setup', 425, '1,0'], // EFAULT
  ['io_uring_enter', 426, '-1,0,0,0,0,0'], // EBADF
  ['io_uring_register', 427, '-1,0,0,0'], // EBADF
  ['modify_ldt', 154, '0,buf,16'], // reading the LDT: 0
  ['get_mempolicy', 239, '0,0,0,0,0'], // 0
  ['set_mempolicy', 238, '0,0,0'], // MPOL_DEFAULT: 0
  ['set_mempolicy_home_node', 450, '0,0,0,0'],
  ['mbind', 237, '0,0,0,0,0,0'], // 0
  ['migrate_pages', 256, 'self,0,0,0'],
  ['move_pages', 279, 'self,0,0,0,0,0'], // 0
  ['uselib', 134, 'buf'], // ENOENT or ENOSYS
  ['ustat', 136, '0,buf'], // EINVAL
  ['sysfs', 139, '3'], // the number of filesystem types
  ['_sysctl', 156, '0'], // ENOSYS
  ['nfsservctl', 180, ''], // ENOSYS
  ['lookup_dcookie', 212, '0,0,0'], // ENOSYS
  ['setns', 308, '-1,0'], // EBADF
];
// On the list, but not in the x86_64 table.
const NOT_X86_64 = new Set(['vm86', 'vm86old']);

// Denied for some arguments only.
const BY_ARGUMENT = [
  ['personality-no-aslr', 135, '0x40000'],
  ['personality-read-implies-exec', 135, '0x400000'],
  ['personality-linux', 135, '0'],
  ['personality-high-bits', 135, '0x1ffffffff'],
  ['socket-vsock', 41, '40,1,0'], // AF_VSOCK: a new socket to the hypervisor
  ['socket-alg', 41, '38,5,0'], // AF_ALG
  ['unshare-user', 272, '0x10000000'],
  ['unshare-mount', 272, '0x20000'],
  ['unshare-net', 272, '0x40000000'],
  ['unshare-time', 272, '0x80'],
  ['clone-user', 56, '0x10000011,0,0,0,0'], // CLONE_NEWUSER|SIGCHLD
];

// What ordinary programs do; each must succeed.
const ALLOWED = [
  ['getpid', 39, ''],
  ['uname', 63, 'buf'],
  ['personality-query', 135, '0xffffffff'],
  ['socket-unix', 41, '1,1,0'],
  ['socket-inet', 41, '2,2,0'],
  ['socket-netlink', 41, '16,3,0'], // getifaddrs, chromium
  ['arch_prctl', 158, '0x1003,buf'], // ARCH_GET_FS
  ['memfd_create', 319, 'buf,1'],
  ['unshare-files', 272, '0x400'], // CLONE_FILES: no namespace
  ['sched_getaffinity', 204, '0,128,buf'],
  ['membarrier', 324, '0,0'], // MEMBARRIER_CMD_QUERY
  ['prctl', 157, '39'], // PR_GET_NO_NEW_PRIVS: 1
];

let d, sb, chromium;
before(async () => {
  d = await startDaemon();
  sb = await d.create({ name: 'syscalls' });
  const bin = path.join(d.dir, 'sysprobe');
  const cc = spawnSync('cc', ['-O2', '-Wall', '-o', bin, path.join(ROOT, 'tests', 'escape', 'sysprobe.c')],
    { encoding: 'utf8' });
  if (cc.status !== 0) throw new Error(`cannot compile sysprobe.c: ${cc.stderr}`);
  const cp = await d.cli(['sandbox', 'cp', bin, `${sb.id}:/workspace/sysprobe`]);
  if (cp.code !== 0) throw new Error(`cp sysprobe: ${cp.stderr}`);
  assert.equal((await d.exec(sb.id, ['chmod', '755', '/workspace/sysprobe'])).exitCode, 0);
  chromium = (await d.sh(sb.id, 'test -x /usr/lib/chromium/chromium')).exitCode === 0;
});
after(async () => {
  await stopDaemon(d);
});

const spec = ([name, nr, args]) => `${name}=${nr}${args ? `:${args}` : ''}`;

/** Runs the calls in one sysprobe; returns {name: {rc, errno, line}}. */
async function calls(table) {
  const r = await d.exec(sb.id, ['/workspace/sysprobe', ...table.map(spec)], { timeoutMs: 20000 });
  assert.equal(r.exitCode, 0, `sysprobe: exit ${r.exitCode}\n${r.stdout}${r.stderr}`);
  const out = {};
  for (const line of r.stdout.trim().split('\n')) {
    const m = /^(\S+) nr=\d+ rc=(-?\d+) errno=(\d+)/.exec(line);
    if (m) out[m[1]] = { rc: Number(m[2]), errno: Number(m[3]), line };
  }
  for (const [name] of table) assert.ok(out[name], `no answer for ${name}:\n${r.stdout}`);
  return out;
}

function assertAll(out, table, want, what) {
  const bad = table.filter(([name]) => !want(out[name])).map(([name]) => out[name].line);
  assert.ok(bad.length === 0, `${what}:\n${bad.join("\n")}`);
}

const denied = (o) => o.rc === -1 && o.errno === EPERM;
// Under gvisor a call on the list that gVisor's kernel does not implement (mount_setattr,
// process_madvise, quotactl_fd, the lsm_* calls, ...) answers ENOSYS: runsc drops a rule for
// a name its syscall table lacks, and the call does nothing, which is what the rule is for.
const deniedOrAbsent = GVISOR ? (o) => denied(o) || (o.rc === -1 && o.errno === ENOSYS) : denied;

test('the table covers every call on the deny-list in confine.c', () => {
  const src = fs.readFileSync(path.join(ROOT, 'src', 'confine', 'confine.c'), 'utf8');
  const list = /sandbox_denied\[\] = \{([\s\S]*?)\n\};/.exec(src)[1].replace(/\/\*[\s\S]*?\*\//g, '');
  const news = /sandbox_denied_new\[\] = \{([\s\S]*?)\n\};/.exec(src)[1];
  const names = [...list.matchAll(/"(\w+)"/g), ...news.matchAll(/\{"(\w+)"/g)].map((m) => m[1]);
  assert.ok(names.length > 60, `parsed the list: ${names}`);
  const tested = new Set(DENIED.map(([n]) => n));
  const missing = names.filter((n) => !tested.has(n) && !NOT_X86_64.has(n));
  assert.deepEqual(missing, [], 'calls on the deny-list with no test');
});

test('every call on the deny-list fails with EPERM', { skip: !x64 && 'x86_64 numbers' }, async () => {
  assertAll(await calls(DENIED), DENIED, deniedOrAbsent, GVISOR ? 'not refused with EPERM (nor absent: ENOSYS)' : 'not refused with EPERM');
});

test('modify_ldt fails, from 64-bit code and through x32 and int 0x80', { skip: !x64 && 'x86 only' }, async () => {
  const out = await calls([['modify_ldt', 154, '0,buf,16'], ['modify_ldt-write', 154, '1,buf,16']]);
  assert.ok(denied(out.modify_ldt), out.modify_ldt.line);
  assert.ok(denied(out['modify_ldt-write']), out['modify_ldt-write'].line);
  // Another ABI is not in the filter at all: the whole process is killed by SIGSYS.
  for (const argv of [['x32', '154', '0', 'buf', '16'], ['i386', '123', '0', '0', '0'], ['i386', '20']]) {
    const r = await d.exec(sb.id, ['/workspace/sysprobe', ...argv], { timeoutMs: 20000 });
    if (GVISOR) {
      // gVisor's kernel has no x32 or i386 entry at all: the call is not made, it returns
      // ENOSYS (the host kernel never sees it; gVisor's systrap traps every syscall).
      assert.equal(r.exitCode, 0, `${argv.join(' ')}: exit ${r.exitCode} ${r.signal} ${r.stdout}`);
      assert.match(r.stdout, new RegExp(`^${argv[0]} nr=${argv[1]} rc=-(1|38) errno=38 `), `${argv.join(' ')}: ${r.stdout}`);
      continue;
    }
    assert.deepEqual([r.exitCode, r.signal], [null, 'SIGSYS'], `${argv.join(' ')}: exit ${r.exitCode} ${r.stdout}`);
    assert.equal(r.stdout, '', `${argv.join(' ')} returned`);
  }
});

test('calls denied by argument: personality, vsock and AF_ALG sockets, namespaces',
  { skip: !x64 && 'x86_64 numbers' }, async () => {
    assertAll(await calls(BY_ARGUMENT), BY_ARGUMENT, denied, 'not refused with EPERM');
  });

test('clone3 answers ENOSYS, so that libc falls back to clone, whose flags the filter reads', {
  skip: !x64 && 'x86_64 numbers',
}, async () => {
  const c3 = await calls([['clone3-user', 435, 'buf,88']]);
  assert.equal(c3['clone3-user'].errno, ENOSYS, `clone3 falls back to clone: ${c3['clone3-user'].line}`);
});

test('the calls ordinary programs make still work', { skip: !x64 && 'x86_64 numbers' }, async () => {
  const out = await calls(ALLOWED);
  assertAll(out, ALLOWED, (o) => o.rc >= 0, 'refused');
  assert.equal(out.prctl.rc, 1, 'no_new_privs is set');
  const st = await d.exec(sb.id, ['grep', '-E', '^(Seccomp|NoNewPrivs):', '/proc/self/status']);
  assert.match(st.stdout, /NoNewPrivs:\s+1/);
  assert.match(st.stdout, /Seccomp:\s+2/);
});

test('after all of it: node, python3, a pipeline and git in /workspace still run', async () => {
  const node = await d.exec(sb.id, ['node', '-e',
    'const { Worker } = require("worker_threads"); new Worker("require(\'worker_threads\').parentPort.postMessage(6*7)", { eval: true })' +
    '.on("message", (m) => { require("fs").promises.readFile("/etc/hostname").then(() => console.log("node", m, require("crypto").randomBytes(4).length)) })']);
  assert.equal(node.stdout, 'node 42 4\n', `node: ${node.stderr}`);
  const py = await d.exec(sb.id, ['python3', '-c',
    'import multiprocessing as m, subprocess, socket\n' +
    'socket.socket().bind(("127.0.0.1", 0))\n' +
    'with m.Pool(2) as p: print("python", sum(p.map(abs, [-1, 2])), subprocess.run(["true"]).returncode)']);
  assert.equal(py.stdout, 'python 3 0\n', `python3: ${py.stderr}`);
  const sh = await d.sh(sb.id, 'seq 1 1000 | grep 7 | sort -r | head -n 2 | tr "\\n" " "');
  assert.equal(sh.stdout, '997 987 ');
  const git = await d.sh(sb.id, 'set -e; cd /workspace; rm -rf repo; git init -q repo; cd repo; echo hi > a; ' +
    'git add a; git -c user.email=t@e -c user.name=t commit -qm first; git log --format=%s');
  assert.equal(git.stdout, 'first\n', `git: ${git.stderr}`);
});

test('chromium headless (--no-sandbox) renders a page', async (t) => {
  if (!chromium) return t.skip('no chromium in the sandbox');
  const page = 'data:text/html,<p id=x></p><script>document.getElementById("x").textContent=6*7</script>';
  const r = await d.exec(sb.id, ['/usr/lib/chromium/chromium', '--headless', '--no-sandbox', '--disable-gpu',
    '--no-first-run', '--disable-dev-shm-usage', '--disable-background-networking', '--disable-component-update',
    '--disable-sync', '--no-pings', '--user-data-dir=/tmp/chromium', '--dump-dom', page], { timeoutMs: 60000 });
  assert.match(r.stdout, /<p id="x">42<\/p>/, `chromium: exit ${r.exitCode}\n${r.stderr.slice(-2000)}`);
});
