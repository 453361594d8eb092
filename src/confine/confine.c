#include "confine.h"

#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <sched.h>
#include <seccomp.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Calls no sandboxed program needs and that have been the door to kernel bugs or
 * escapes (Docker's and Flatpak's default profiles, narrowed to a deny-list so
 * ordinary programs keep working). */
static const char *const sandbox_denied[] = {
    "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen",
    "fsconfig", "fsmount", "fspick", "mount_setattr", "ptrace", "process_vm_readv",
    "process_vm_writev", "kexec_load", "kexec_file_load", "init_module", "finit_module",
    "delete_module", "bpf", "keyctl", "add_key", "request_key", "userfaultfd",
    "perf_event_open", "setns", "swapon", "swapoff", "reboot", "acct", "quotactl",
    "quotactl_fd", "open_by_handle_at", "name_to_handle_at", "iopl", "ioperm", "syslog",
    "lookup_dcookie", "vhangup", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "fanotify_init", "nfsservctl",
    "uselib", "sysfs", "_sysctl", "personality", "kcmp", "pidfd_getfd", "create_module",
    "get_kernel_syms", "query_module", "vm86", "vm86old", "lsm_set_self_attr",
};

/* Beyond the sandbox list, the server never starts programs or changes identity. */
static const char *const server_denied[] = {
    "execve", "execveat", "setuid", "setgid", "setreuid", "setregid", "setresuid",
    "setresgid", "setgroups", "capset",
};

static int deny_list(scmp_filter_ctx ctx, const char *const *names, size_t n, err_t *err)
{
    for (size_t i = 0; i < n; i++) {
        int nr = seccomp_syscall_resolve_name(names[i]);
        if (nr == __NR_SCMP_ERROR) continue; /* not on this architecture */
        int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
        if (r < 0 && r != -EDOM)
            return err_set(err, r, "seccomp: cannot deny %s: %s", names[i], strerror(-r));
    }
    return 0;
}

/* New namespaces (a new user namespace above all) through clone and unshare: a
 * rule per flag, since one masked compare cannot say "any of these bits". */
static int deny_new_namespaces(scmp_filter_ctx ctx, err_t *err)
{
    static const uint64_t flags[] = {CLONE_NEWUSER, CLONE_NEWNS,  CLONE_NEWNET,
                                     CLONE_NEWPID,  CLONE_NEWIPC, CLONE_NEWUTS,
                                     CLONE_NEWCGROUP, CLONE_NEWTIME};
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

static int load_filter(bool server, err_t *err)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx) return err_set(err, -ENOMEM, "seccomp: cannot allocate a filter");
    int r = deny_list(ctx, sandbox_denied, ARRAY_LEN(sandbox_denied), err);
    if (r == 0 && server) r = deny_list(ctx, server_denied, ARRAY_LEN(server_denied), err);
    if (r == 0) r = deny_new_namespaces(ctx, err);
    if (r == 0) {
        r = seccomp_load(ctx);
        if (r < 0) r = err_set(err, r, "seccomp: cannot load the filter: %s", strerror(-r));
    }
    seccomp_release(ctx);
    return r;
}

int confine_sandbox_seccomp(err_t *err)
{
    return load_filter(false, err);
}

int confine_server_seccomp(err_t *err)
{
    return load_filter(true, err);
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
