#include "confine.h"

#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Calls no sandboxed program needs and that have been the door to kernel bugs or
 * escapes: what Docker's default profile leaves out or gates on a capability the
 * sandbox lacks, narrowed to a deny-list so ordinary programs keep working.
 * docs/seccomp.md reviews each call against Docker and gVisor. */
static const char *const sandbox_denied[] = {
    /* Mounts and the root (the mount namespace is the host's, but say no first). */
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    /* Other processes: their memory, fds and pages (Docker: CAP_SYS_PTRACE). */
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "process_madvise",
    "kcmp",
    "pidfd_getfd",
    /* Code into the kernel, and its event and key stores. */
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "create_module",
    "get_kernel_syms",
    "query_module",
    "bpf",
    "perf_event_open",
    "keyctl",
    "add_key",
    "request_key",
    /* Page faults handled in user space: the classic way to win kernel races. */
    "userfaultfd",
    /* The machine: swap, reboot, accounting, quotas, ports, clock, names, ttys. */
    "swapon",
    "swapoff",
    "reboot",
    "acct",
    "quotactl",
    "quotactl_fd",
    "iopl",
    "ioperm",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "sethostname",
    "setdomainname",
    "vhangup",
    "syslog",
    /* Files by handle, which skips path checks, and whole-filesystem watches. */
    "open_by_handle_at",
    "name_to_handle_at",
    "fanotify_init",
    /* io_uring: a second syscall interface with its own long list of bugs. */
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    /* The x86 LDT and vm86: only DOS and 16-bit emulators use them (Docker and
     * gVisor differ; see the doc). */
    "modify_ldt",
    "vm86",
    "vm86old",
    /* NUMA placement (Docker: CAP_SYS_NICE); move_pages has leaked other processes'
     * memory layout, and mempolicy code has had use-after-frees. */
    "get_mempolicy",
    "set_mempolicy",
    "set_mempolicy_home_node",
    "mbind",
    "migrate_pages",
    "move_pages",
    /* Obsolete: removed from Linux or only ever a leak. */
    "uselib",
    "ustat",
    "sysfs",
    "_sysctl",
    "nfsservctl",
    "lookup_dcookie",
    /* Joining namespaces; making them is filtered by flag below. */
    "setns",
};

/* Calls newer than the libseccomp we build with may know (2.5.4 skipped them
 * silently), so by number where it does not: from 424 on the numbers are the same
 * on x86_64, arm64 and riscv64. LSM labels (Docker: CAP_SYS_ADMIN) and the mount
 * API's open_tree_attr. */
static const struct {
    const char *name;
    int nr;
} sandbox_denied_new[] = {
    {"lsm_get_self_attr", 459},
    {"lsm_set_self_attr", 460},
    {"lsm_list_modules", 461},
    {"open_tree_attr", 467},
};

const char *const *confine_sandbox_denied_names(size_t *n)
{
    *n = ARRAY_LEN(sandbox_denied);
    return sandbox_denied;
}

/* Beyond the sandbox list, the server never starts programs or changes identity. */
static const char *const server_denied[] = {
    "execve",   "execveat",  "setuid",    "setgid",    "setreuid",
    "setregid", "setresuid", "setresgid", "setgroups", "capset",
};

enum filter { FILTER_SANDBOX, FILTER_SERVER };

static int deny(scmp_filter_ctx ctx, const char *name, int nr, err_t *err)
{
    int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
    if (r < 0 && r != -EDOM)
        return err_set(err, r, "seccomp: cannot deny %s: %s", name, strerror(-r));
    return 0;
}

/* AddressSanitizer's leak check stops the process's threads with ptrace from a
 * helper task at exit, and reads /proc/self/maps. Sanitized test builds leave
 * ptrace to the server and the signer (their own tasks: they are not dumpable
 * to anyone else), and opening files to the signer; release builds never do. */
#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED_BUILD 1
#else
#define SANITIZED_BUILD 0
#endif

static bool kept_for_sanitizers(const char *name, enum filter f)
{
    return SANITIZED_BUILD && f == FILTER_SERVER && strcmp(name, "ptrace") == 0;
}

static int deny_list(scmp_filter_ctx ctx, const char *const *names, size_t n, enum filter f,
                     err_t *err)
{
    for (size_t i = 0; i < n; i++) {
        if (kept_for_sanitizers(names[i], f)) continue;
        int nr = seccomp_syscall_resolve_name(names[i]);
        if (nr == __NR_SCMP_ERROR) continue; /* not on this architecture, or too new */
        int r = deny(ctx, names[i], nr, err);
        if (r < 0) return r;
    }
    return 0;
}

static int deny_new(scmp_filter_ctx ctx, err_t *err)
{
    for (size_t i = 0; i < ARRAY_LEN(sandbox_denied_new); i++) {
        int nr = seccomp_syscall_resolve_name(sandbox_denied_new[i].name);
#if defined(__x86_64__) || defined(__aarch64__) || (defined(__riscv) && __riscv_xlen == 64)
        if (nr == __NR_SCMP_ERROR) nr = sandbox_denied_new[i].nr;
#endif
        if (nr == __NR_SCMP_ERROR) continue;
        int r = deny(ctx, sandbox_denied_new[i].name, nr, err);
        if (r < 0) return r;
    }
    return 0;
}

/* Calls denied for some arguments only. personality: only the query (0xffffffff);
 * setting it could turn off ASLR or make data executable (Docker also allows a few
 * uname-only values, which one compare per rule cannot express and nothing needs).
 * socket: AF_VSOCK reaches the hypervisor's host past the network namespace, and
 * AF_ALG is the kernel's crypto API (both denied by Docker). */
static int deny_by_argument(scmp_filter_ctx ctx, err_t *err)
{
    int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 1,
                             SCMP_A0(SCMP_CMP_NE, 0xffffffffu, 0));
    if (r == 0)
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1,
                             SCMP_A0(SCMP_CMP_EQ, AF_VSOCK, 0));
    if (r == 0)
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1,
                             SCMP_A0(SCMP_CMP_EQ, AF_ALG, 0));
    if (r < 0) return err_set(err, r, "seccomp: cannot filter by argument: %s", strerror(-r));
    return 0;
}

/* New namespaces (a new user namespace above all) through clone and unshare: a
 * rule per flag, since one masked compare cannot say "any of these bits". */
static int deny_new_namespaces(scmp_filter_ctx ctx, err_t *err)
{
    static const uint64_t flags[] = {CLONE_NEWUSER, CLONE_NEWNS,  CLONE_NEWNET,    CLONE_NEWPID,
                                     CLONE_NEWIPC,  CLONE_NEWUTS, CLONE_NEWCGROUP, CLONE_NEWTIME};
    int r = 0;
    for (size_t i = 0; i < ARRAY_LEN(flags) && r == 0; i++) {
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 1,
                             SCMP_A0(SCMP_CMP_MASKED_EQ, flags[i], flags[i]));
        if (r == 0)
            r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                                 SCMP_A0(SCMP_CMP_MASKED_EQ, flags[i], flags[i]));
    }
    /* clone3 passes flags in memory a filter cannot read: make libc fall back to clone. */
    if (r == 0) r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
    if (r < 0) return err_set(err, r, "seccomp: cannot filter clone/unshare: %s", strerror(-r));
    return 0;
}

/* Builds the filter f in a new libseccomp context (*out), which the caller releases. */
static int build_filter(enum filter f, scmp_filter_ctx *out, err_t *err)
{
    /* A deny-list: everything else is allowed. The filter holds the native table
     * only; a call through another (x32, i386 int 0x80) kills the whole process,
     * not just the thread, so nothing is left half alive. */
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx) return err_set(err, -ENOMEM, "seccomp: cannot allocate a filter");
    int r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    if (r < 0) r = err_set(err, r, "seccomp: cannot set the other-ABI action: %s", strerror(-r));
    if (r == 0) r = deny_list(ctx, sandbox_denied, ARRAY_LEN(sandbox_denied), f, err);
    if (r == 0) r = deny_new(ctx, err);
    if (r == 0) r = deny_by_argument(ctx, err);
    if (r == 0 && f != FILTER_SANDBOX)
        r = deny_list(ctx, server_denied, ARRAY_LEN(server_denied), f, err);
    if (r == 0) r = deny_new_namespaces(ctx, err);
    if (r < 0) {
        seccomp_release(ctx);
        return r;
    }
    *out = ctx;
    return 0;
}

static int load_filter(enum filter f, err_t *err)
{
    scmp_filter_ctx ctx;
    int r = build_filter(f, &ctx, err);
    if (r < 0) return r;
    r = seccomp_load(ctx);
    if (r < 0) r = err_set(err, r, "seccomp: cannot load the filter: %s", strerror(-r));
    seccomp_release(ctx);
    return r;
}

/* The sandbox filter as BPF, compiled once by confine_sandbox_prepare in the keeper:
 * every sandbox's init and every program exec'd into a sandbox is a fork of the
 * keeper and installs this copy, where compiling it with libseccomp cost each of
 * them 0.7 ms of CPU. */
static struct sock_fprog sandbox_program;

/* libseccomp 2.5 exports BPF only to a descriptor: a memfd, read back. */
static int export_filter(scmp_filter_ctx ctx, struct sock_fprog *out, err_t *err)
{
    int fd = memfd_create("seccomp-bpf", MFD_CLOEXEC);
    if (fd < 0) return err_set(err, errno, "seccomp: memfd_create: %s", strerror(errno));
    struct sock_filter *code = NULL;
    struct stat st;
    int r = seccomp_export_bpf(ctx, fd);
    if (r < 0) r = err_set(err, r, "seccomp: cannot export the filter: %s", strerror(-r));
    if (r == 0 && fstat(fd, &st) < 0)
        r = err_set(err, errno, "seccomp: fstat: %s", strerror(errno));
    size_t n = r == 0 ? (size_t)st.st_size / sizeof *code : 0;
    if (r == 0 && (n == 0 || n > BPF_MAXINSNS || (size_t)st.st_size % sizeof *code))
        r = err_set(err, -EINVAL, "seccomp: the exported filter has %lld bytes",
                    (long long)st.st_size);
    if (r == 0 && !(code = malloc(n * sizeof *code))) r = err_set(err, -ENOMEM, "out of memory");
    if (r == 0 && pread(fd, code, n * sizeof *code, 0) != (ssize_t)(n * sizeof *code))
        r = err_set(err, -EIO, "seccomp: cannot read the exported filter back");
    close(fd);
    if (r < 0) {
        free(code);
        return r;
    }
    *out = (struct sock_fprog){.len = (unsigned short)n, .filter = code};
    return 0;
}

int confine_sandbox_prepare(err_t *err)
{
    if (sandbox_program.filter) return 0;
    scmp_filter_ctx ctx;
    int r = build_filter(FILTER_SANDBOX, &ctx, err);
    if (r < 0) return r;
    r = export_filter(ctx, &sandbox_program, err);
    seccomp_release(ctx);
    return r;
}

int confine_sandbox_seccomp(err_t *err)
{
    if (!sandbox_program.filter) return load_filter(FILTER_SANDBOX, err);
    /* What seccomp_load does: no_new_privs (needed without CAP_SYS_ADMIN), then
     * the filter, with no flags. */
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return err_set(err, errno, "cannot set no_new_privs: %s", strerror(errno));
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &sandbox_program) < 0)
        return err_set(err, errno, "seccomp: cannot load the filter: %s", strerror(errno));
    return 0;
}

int confine_server_seccomp(err_t *err)
{
    return load_filter(FILTER_SERVER, err);
}

/* The signer (the CA key's process) on an allow-list, as OpenSSH's privilege-separated
 * child is: what mitm_signer_serve and OpenSSL's signing need, and nothing else. A call
 * outside it kills the process: a signer made to run code could neither reach out, nor
 * start anything, nor leave the key anywhere. */
static const char *const signer_allowed[] = {
    /* its socket and the standard descriptors (the log) */
    "read",
    "write",
    "readv",
    "writev",
    "recvmsg",
    "recvfrom",
    "sendmsg",
    "sendto",
    "close",
    "fstat",
    "newfstatat",
    "lseek",
    /* memory (mmap and mprotect: never executable, below) */
    "brk",
    "munmap",
    "mremap",
    "madvise",
    /* what OpenSSL and libc ask of the kernel while signing */
    "getrandom",
    "futex",
    "getpid",
    "gettid",
    "clock_gettime",
    "clock_getres",
    "gettimeofday",
    "time",
    "sched_yield",
    "rt_sigreturn",
    "rt_sigprocmask",
    "restart_syscall",
    "exit",
    "exit_group",
};

/* What a sanitized test build's leak check needs at exit (a tracer task that stops the
 * process, /proc/self/maps); release builds allow none of it. */
static const char *const signer_allowed_for_sanitizers[] = {
    "openat",
    "open",
    "readlink",
    "readlinkat",
    "ptrace",
    "clone",
    "wait4",
    "waitid",
    "prctl",
    "sched_getaffinity",
    "sigaltstack",
    "rt_sigaction",
    "prlimit64",
    "getrlimit",
    "tgkill",
    "kill",
    "getppid",
    "pipe",
    "pipe2",
    "dup",
    "dup2",
    "dup3",
    "fcntl",
    "ioctl",
    "mprotect",
    "mmap",
    "getdents64",
    "statfs",
    "fstatfs",
    "uname",
    "set_robust_list",
    "rseq",
    "poll",
    "ppoll",
    "nanosleep",
    "clock_nanosleep",
};

static int allow(scmp_filter_ctx ctx, const char *const *names, size_t n, err_t *err)
{
    for (size_t i = 0; i < n; i++) {
        int nr = seccomp_syscall_resolve_name(names[i]);
        if (nr == __NR_SCMP_ERROR) continue; /* not on this architecture */
        int r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
        if (r < 0 && r != -EEXIST)
            return err_set(err, r, "seccomp: cannot allow %s: %s", names[i], strerror(-r));
    }
    return 0;
}

/* mmap and mprotect without PROT_EXEC: no new code in the signer's memory. libc's
 * localtime opens /etc/localtime for a log line's time: open fails (EACCES) rather than
 * kill. */
static int signer_memory_and_files(scmp_filter_ctx ctx, err_t *err)
{
    int r = 0;
    if (!SANITIZED_BUILD) {
        r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mmap), 1,
                             SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
        if (r == 0)
            r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mprotect), 1,
                                 SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
        if (r == 0) r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(openat), 0);
        if (r == 0) r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(open), 0);
    }
    if (r < 0)
        return err_set(err, r, "seccomp: cannot limit the signer's memory: %s", strerror(-r));
    return 0;
}

int confine_signer_seccomp(err_t *err)
{
    /* Sanitized builds fail a call outside the list with EPERM rather than kill, so that a
     * need of the sanitizer's runtime not named above shows as an error, not a dead signer. */
    scmp_filter_ctx ctx =
        seccomp_init(SANITIZED_BUILD ? SCMP_ACT_ERRNO(EPERM) : SCMP_ACT_KILL_PROCESS);
    if (!ctx) return err_set(err, -ENOMEM, "seccomp: cannot allocate a filter");
    int r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    if (r < 0) r = err_set(err, r, "seccomp: cannot set the other-ABI action: %s", strerror(-r));
    if (r == 0) r = allow(ctx, signer_allowed, ARRAY_LEN(signer_allowed), err);
    if (r == 0 && SANITIZED_BUILD)
        r = allow(ctx, signer_allowed_for_sanitizers, ARRAY_LEN(signer_allowed_for_sanitizers),
                  err);
    if (r == 0) r = signer_memory_and_files(ctx, err);
    if (r == 0) {
        r = seccomp_load(ctx);
        if (r < 0) r = err_set(err, r, "seccomp: cannot load the filter: %s", strerror(-r));
    }
    seccomp_release(ctx);
    return r;
}

int confine_signer_limits(err_t *err)
{
    /* No core dumps (they would hold the key); its socket, its ready pipe and the three
     * standard descriptors; no new process of its uid (the filter refuses clone too).
     * Not RLIMIT_FSIZE: it makes no file (the filter refuses open), and its log, stderr,
     * may be the daemon's log file, which a file size limit would stop it writing to. */
    struct rlimit none = {0, 0}, fds = {8, 8};
    if (setrlimit(RLIMIT_CORE, &none) < 0 || setrlimit(RLIMIT_NOFILE, &fds) < 0 ||
        (!SANITIZED_BUILD && setrlimit(RLIMIT_NPROC, &none) < 0))
        return err_set(err, -errno, "cannot limit the signer: %s", strerror(errno));
    return 0;
}

static int drop_bounding_set(err_t *err)
{
    for (int cap = 0; cap <= CAP_LAST_CAP; cap++) {
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
            return err_set(err, errno, "cannot drop capability %d: %s", cap, strerror(errno));
    }
    return 0;
}

int confine_drop_to(uid_t uid, gid_t gid, err_t *err)
{
    int r = drop_bounding_set(err);
    if (r < 0) return r;
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
        return err_set(err, errno, "cannot clear ambient capabilities: %s", strerror(errno));
    if (setgroups(0, NULL) < 0)
        return err_set(err, errno, "cannot clear supplementary groups: %s", strerror(errno));
    if (setresgid(gid, gid, gid) < 0)
        return err_set(err, errno, "cannot switch to gid %u: %s", gid, strerror(errno));
    if (setresuid(uid, uid, uid) < 0)
        return err_set(err, errno, "cannot switch to uid %u: %s", uid, strerror(errno));
    /* A uid change from 0 clears permitted and effective sets; clear the rest too. */
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof data);
    if (syscall(SYS_capset, &hdr, data) < 0)
        return err_set(err, errno, "cannot clear capabilities: %s", strerror(errno));
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return err_set(err, errno, "cannot set no_new_privs: %s", strerror(errno));
    return 0;
}
