/* runtime-init: pid 1 of every sandbox. Once the keeper's fork has built the
 * sandbox and confined itself, it execs this (from a memfd, see
 * src/sandbox/init.c), so that pid 1 no longer holds a copy-on-write image of
 * the keeper: the keeper rewrites its heap at every create, and each older
 * init then kept its own copy of those pages, about 1 MiB a sandbox. This
 * program is a few pages.
 *
 * It reaps whatever is reparented to it, forever. Signals stay blocked (the
 * mask survives execve), so nothing inside can stop it.
 *
 * Freestanding: no libc, one system call wrapper, built static (see the
 * Makefile). */
#include <asm/unistd.h>
#include <linux/prctl.h>
#include <linux/wait.h>

#if !defined(__x86_64__)
#error "runtime-init: only the x86_64 system call convention is written"
#endif

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

void __attribute__((noreturn)) _start(void)
{
    /* Blocked already when the keeper's fork execs this; under gVisor, runsc starts it
     * with none blocked, and SIGCHLD must be blocked for rt_sigtimedwait to wait for it. */
    unsigned long all = ~0UL;
    sys4(__NR_rt_sigprocmask, 0 /* SIG_BLOCK */, (long)&all, 0, sizeof all);
    sys4(__NR_close_range, 0, ~0U, 0, 0);
    sys4(__NR_prctl, PR_SET_NAME, (long)"runtime-init", 0, 0);
    unsigned long sigchld = 1UL << (17 - 1); /* the kernel's sigset: bit SIGCHLD - 1 */
    for (;;) {
        while (sys4(__NR_wait4, -1, 0, WNOHANG, 0) > 0) {
        }
        sys4(__NR_rt_sigtimedwait, (long)&sigchld, 0, 0, sizeof sigchld);
    }
}
