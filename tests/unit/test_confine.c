/* The sandbox's seccomp filter, compiled in each call and compiled once by
 * confine_sandbox_prepare: both must deny the same calls the same way. Each check
 * runs in a child, which the filter stays with. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "confine/confine.h"
#include "unit.h"

/* Exit codes of the child: 0 when every call was answered as the filter says. */
enum { OK, LOAD_FAILED, MOUNT_ALLOWED, CLONE3_ALLOWED, USERNS_ALLOWED, GETPID_DENIED };

static int denied_calls(void)
{
    errno = 0;
    if (mount("none", "/nonexistent-unit", "tmpfs", 0, NULL) == 0 || errno != EPERM)
        return MOUNT_ALLOWED;
    if (syscall(SYS_clone3, NULL, 0) == 0 || errno != ENOSYS) return CLONE3_ALLOWED;
    if (unshare(CLONE_NEWUSER) == 0 || errno != EPERM) return USERNS_ALLOWED;
    if (syscall(SYS_getpid) != getpid()) return GETPID_DENIED;
    return OK;
}

/* Forks a child that installs the filter and tries the calls; returns its exit code. */
static int filtered_child(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        err_t err = {0};
        _exit(confine_sandbox_seccomp(&err) < 0 ? LOAD_FAILED : denied_calls());
    }
    int st = -1;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
}

TEST(confine_sandbox_filter_compiled_per_call)
{
    CHECK(filtered_child() == OK);
}

TEST(confine_sandbox_filter_prepared_once)
{
    /* As in the keeper: prepared in one process (a child here, so that the
     * runner's own state stays unprepared), installed by its forks. */
    pid_t pid = fork();
    if (pid == 0) {
        err_t err = {0};
        if (confine_sandbox_prepare(&err) < 0) _exit(LOAD_FAILED);
        int first = filtered_child(), second = filtered_child();
        _exit(first != OK ? first : second);
    }
    int st = -1;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == OK);
}

TEST(confine_unfiltered_child_is_not_denied)
{
    /* The checks above mean something: without a filter, the same calls are not
     * refused with the filter's errors (clone3 with no arguments is EINVAL or
     * EFAULT, not ENOSYS). */
    pid_t pid = fork();
    if (pid == 0) _exit(syscall(SYS_clone3, NULL, 0) < 0 && errno == ENOSYS);
    int st = -1;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* The signer's allow-list (confine_signer_seccomp): each call a signer made to run code
 * would want kills it (SIGSYS), where the sandbox's and the server's deny-lists would
 * answer EPERM or let it through; opening a file fails with EACCES (libc's localtime
 * tries) and a call on the list goes through. Sanitized builds fail calls outside the
 * list with EPERM instead, and allow what their leak check needs (clone, ptrace, kill,
 * files, executable memory): those are checked in release builds only. */
enum signer_call {
    SOCKET,
    CONNECT,
    EXECVE,
    FORK,
    CLONE,
    PTRACE,
    MMAP_EXEC,
    MPROTECT_EXEC,
    SETUID,
    KILL_OTHER,
    UNLINK,
    MEMFD,
    OPEN_FILE,
    GETPID,
    N_SIGNER_CALLS
};
static const char *const signer_call_names[] = {
    "socket", "connect", "execve",          "fork",
    "clone",  "ptrace",  "mmap(PROT_EXEC)", "mprotect(PROT_EXEC)",
    "setuid", "kill(1)", "unlink",          "memfd_create",
    "openat", "getpid"};

/* The call's result in the child: 0 when it was allowed, else its errno. */
static int signer_try(enum signer_call c)
{
    static char page[4096] __attribute__((aligned(4096)));
    long r = 0;
    switch (c) {
    case SOCKET:
        r = syscall(SYS_socket, AF_INET, SOCK_STREAM, 0);
        break;
    case CONNECT:
        r = syscall(SYS_connect, 0, NULL, 0);
        break;
    case EXECVE:
        r = syscall(SYS_execve, "/bin/true", (char *[]){"true", NULL}, NULL);
        break;
    case FORK:
        r = syscall(SYS_fork);
        break;
    case CLONE:
        r = syscall(SYS_clone, SIGCHLD, 0, NULL, NULL, 0);
        break;
    case PTRACE:
        r = syscall(SYS_ptrace, PTRACE_TRACEME, 0, NULL, NULL);
        break;
    case MMAP_EXEC:
        r = (long)syscall(SYS_mmap, NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS,
                          -1, 0);
        break;
    case MPROTECT_EXEC:
        r = syscall(SYS_mprotect, page, 4096, PROT_READ | PROT_EXEC);
        break;
    case SETUID:
        r = syscall(SYS_setuid, 0);
        break;
    case KILL_OTHER:
        r = syscall(SYS_kill, 1, 0);
        break;
    case UNLINK:
        r = syscall(SYS_unlink, "/nonexistent-unit");
        break;
    case MEMFD:
        r = syscall(SYS_memfd_create, "x", 0);
        break;
    case OPEN_FILE:
        r = syscall(SYS_openat, AT_FDCWD, "/etc/hostname", O_RDONLY);
        break;
    case GETPID:
        r = syscall(SYS_getpid);
        break;
    case N_SIGNER_CALLS:
        break;
    }
    if (r == -1) return errno;
    if (c == FORK || c == CLONE) {
        if (r == 0) _exit(0);
        waitpid((pid_t)r, NULL, 0);
    }
    return 0;
}

/* Forks a child that installs the signer's filter and makes call c: its exit code (the
 * call's errno, 0 when allowed) or 1000 + the signal that killed it. */
static int signer_child(enum signer_call c)
{
    pid_t pid = fork();
    if (pid == 0) {
        err_t err = {0};
        if (confine_signer_seccomp(&err) < 0) _exit(255);
        _exit(signer_try(c));
    }
    int st = -1;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1000 + WTERMSIG(st);
}

TEST(confine_signer_kills_every_call_off_its_list)
{
#if defined(__SANITIZE_ADDRESS__)
    const bool sanitized = true;
#else
    const bool sanitized = false;
#endif
    for (int c = 0; c < N_SIGNER_CALLS; c++) {
        int got = signer_child((enum signer_call)c), want;
        if (c == GETPID)
            want = 0;
        else if (c == OPEN_FILE)
            want = sanitized ? -1 : EACCES;
        else if (sanitized)
            want =
                c == CLONE || c == PTRACE || c == MMAP_EXEC || c == MPROTECT_EXEC || c == KILL_OTHER
                    ? -1
                    : EPERM;
        else
            want = 1000 + SIGSYS;
        if (want < 0) continue; /* the sanitizer's own needs */
        if (got != want)
            fprintf(stderr, "  %s: got %d, want %d\n", signer_call_names[c], got, want);
        CHECK(got == want);
    }
}
