/* The sandbox's seccomp filter, compiled in each call and compiled once by
 * confine_sandbox_prepare: both must deny the same calls the same way. Each check
 * runs in a child, which the filter stays with. */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mount.h>
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
