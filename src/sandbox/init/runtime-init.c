/* runtime-init: pid 1 of every sandbox. Once the keeper's fork has built the
 * sandbox and confined itself, it execs this (from a memfd, see
 * src/sandbox/init.c), so that pid 1 no longer holds a copy-on-write image of
 * the keeper: the keeper rewrites its heap at every create, and each older
 * init then kept its own copy of those pages, about 1 MiB a sandbox. This
 * program is a few pages.
 *
 * Under gVisor it is also the container's pid 1 inside (src/sandbox/gvisor.c),
 * started with one argument, the sandbox's pids limit: gVisor enforces pids.max
 * in its own cgroup hierarchy, which only root inside may write, and the programs
 * are uid 1000. It writes the limit there first and reports the outcome on its
 * stdout, a pipe the keeper reads before it calls the sandbox started.
 *
 * It reaps whatever is reparented to it, forever. Signals stay blocked (the
 * mask survives execve), so nothing inside can stop it.
 *
 * Freestanding: no libc, one system call wrapper, built static (see the
 * Makefile). */
#include <asm/unistd.h>
#include <linux/fcntl.h>
#include <linux/prctl.h>
#include <linux/wait.h>

#if !defined(__x86_64__)
#error "runtime-init: only the x86_64 system call convention is written"
#endif

#define PIDS_MAX_FILE "/sys/fs/cgroup/pids/pids.max"

static inline long sys4(long nr, long a, long b, long c, long d)
{
    long r;
    register long r10 __asm__("r10") = d;
    __asm__ volatile("syscall"
                     : "=a"(r)
                     : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10)
                     : "rcx", "r11", "memory");
    return r;
}

static unsigned long length(const char *s)
{
    unsigned long n = 0;
    while (s[n])
        n++;
    return n;
}

/* Writes limit (decimal text) to gVisor's pids.max; answers "ok" or why not. */
static const char *set_pids_max(const char *limit)
{
    for (const char *c = limit; *c; c++)
        if (*c < '0' || *c > '9') return "bad-limit";
    long fd = sys4(__NR_openat, AT_FDCWD, (long)PIDS_MAX_FILE, O_WRONLY | O_CLOEXEC, 0);
    if (fd < 0) return "no-pids-cgroup";
    unsigned long n = length(limit);
    long wrote = sys4(__NR_write, fd, (long)limit, (long)n, 0);
    sys4(__NR_close, fd, 0, 0, 0);
    return wrote == (long)n ? "ok" : "pids-max-refused";
}

static void __attribute__((noreturn, used)) init_main(long *stack)
{
    /* Blocked already when the keeper's fork execs this; under gVisor, runsc starts it
     * with none blocked, and SIGCHLD must be blocked for rt_sigtimedwait to wait for it. */
    unsigned long all = ~0UL;
    sys4(__NR_rt_sigprocmask, 0 /* SIG_BLOCK */, (long)&all, 0, sizeof all);
    long argc = stack[0];
    char **argv = (char **)(stack + 1);
    if (argc == 2) {
        const char *outcome = set_pids_max(argv[1]);
        sys4(__NR_write, 1, (long)outcome, (long)length(outcome), 0);
    }
    sys4(__NR_close_range, 0, ~0U, 0, 0);
    sys4(__NR_prctl, PR_SET_NAME, (long)"runtime-init", 0, 0);
    unsigned long sigchld = 1UL << (17 - 1); /* the kernel's sigset: bit SIGCHLD - 1 */
    for (;;) {
        while (sys4(__NR_wait4, -1, 0, WNOHANG, 0) > 0) {
        }
        sys4(__NR_rt_sigtimedwait, (long)&sigchld, 0, 0, sizeof sigchld);
    }
}

/* The kernel enters with argc, argv and envp on the stack: hand its address to C, on
 * the 16-byte alignment the ABI expects at a call. */
__asm__(".globl _start\n"
        "_start:\n"
        "    mov %rsp, %rdi\n"
        "    and $-16, %rsp\n"
        "    call init_main\n");
