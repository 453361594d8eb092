/* Entering a running sandbox: exec of a program and opening a file. Both fork a
 * short-lived helper so the keeper itself never changes namespace or identity. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/close_range.h>
#include <linux/openat2.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../confine/confine.h"
#include "../proto/proto.h"
#include "agent/exec_path.h"
#include "ns_impl.h"

#define ENTER_NS                                                                                   \
    (CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWCGROUP)

/* The program itself: joins the user namespace, drops everything, execs. Any
 * errno before exec goes to errfd; a successful exec closes it empty. */
static void __attribute__((noreturn))
run_program(struct sandbox *sb, const struct sandbox_exec *ex, int stdio[3], int go, int errfd)
{
    char b;
    err_t err = {0};
    int e = 0;
    if (read(go, &b, 1) != 1) _exit(126);
    /* Programs go first when the sandbox runs out of memory, so pid 1 survives even
     * where the host refuses a negative adjustment for it. */
    write_file("/proc/self/oom_score_adj", "500");
    if (setns(sb->init_pidfd, CLONE_NEWUSER) < 0) e = errno;
    for (int i = 0; e == 0 && i < 3; i++)
        if (dup2(stdio[i], i) < 0) e = errno;
    if (e == 0 && setsid() < 0) e = errno;
    if (e == 0 && confine_drop_to(SANDBOX_USER_UID, SANDBOX_USER_UID, &err) < 0) e = -err.code;
    if (e == 0 && confine_sandbox_seccomp(&err) < 0) e = -err.code;
    if (e == 0 && chdir(ex->cwd) < 0) e = errno;
    if (e == 0) {
        /* Everything else closes at exec; errfd stays usable until then. */
        close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
        signal(SIGPIPE, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        e = exec_in_path((char *const *)ex->argv, (char *const *)ex->envp);
    }
    write_all(errfd, &e, sizeof e);
    _exit(127);
}

/* Waits for the program; stops it (stop_group) at the timeout or when the status
 * pipe's reader is gone: the daemon closes it to stop a program it no longer wants,
 * such as an MCP server being stopped. */
static void stop_group(pid_t child);

static int wait_exit(pid_t child, uint32_t timeout_ms, int status_fd, bool *timed_out, int *signal)
{
    int pidfd = (int)syscall(SYS_pidfd_open, child, 0);
    struct pollfd p[2] = {{.fd = pidfd, .events = POLLIN}, {.fd = status_fd, .events = 0}};
    int n;
    do
        n = poll(p, 2, timeout_ms ? (int)timeout_ms : -1);
    while (n < 0 && errno == EINTR);
    bool abandoned = n > 0 && !(p[0].revents & POLLIN) && (p[1].revents & (POLLERR | POLLHUP));
    if (n == 0 || abandoned) {
        *timed_out = n == 0;
        stop_group(child);
    }
    if (pidfd >= 0) close(pidfd);
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    *signal = WTERMSIG(status);
    return 128 + WTERMSIG(status);
}

/* The program's process group, then itself. */
static void stop_group(pid_t child)
{
    kill(-child, SIGKILL);
    kill(child, SIGKILL);
}

/* The monitor: enters the sandbox's namespaces, starts the program in its cgroup,
 * enforces the timeout and reports how it ended on the status pipe. */
static void __attribute__((noreturn))
monitor(struct sandbox *sb, const struct sandbox_exec *ex, int stdio[3], int status_fd,
        const int *cg_fds, int ncg)
{
    struct proto_exec_status st = {.exit_code = -1};
    uint64_t start = now_ms();
    /* The keeper's own work runs niced (keeper.h); what runs in a sandbox does not. */
    setpriority(PRIO_PROCESS, 0, 0);
    int keep[12] = {stdio[0], stdio[1], stdio[2], status_fd, sb->init_pidfd};
    for (int i = 0; i < ncg && i < 7; i++)
        keep[5 + i] = cg_fds[i];
    close_fds_except(keep, 5 + (size_t)(ncg < 7 ? ncg : 7));
    int go[2], errp[2];
    if (setns(sb->init_pidfd, ENTER_NS) < 0 || pipe2(go, O_CLOEXEC) < 0 ||
        pipe2(errp, O_CLOEXEC) < 0) {
        st.start_errno = errno;
        goto report;
    }
    pid_t child = fork();
    if (child < 0) {
        st.start_errno = errno;
        goto report;
    }
    if (child == 0) {
        close(go[1]);
        close(errp[0]);
        run_program(sb, ex, stdio, go[0], errp[1]);
    }
    close(go[0]);
    close(errp[1]);
    for (int i = 0; i < 3; i++)
        close(stdio[i]);
    cgroup_attach_fds(cg_fds, ncg, child);
    write_all(go[1], "g", 1);
    close(go[1]);
    int e = 0;
    ssize_t got = read(errp[0], &e, sizeof e);
    bool timed_out = false;
    int signal = 0;
    int code = wait_exit(child, ex->timeout_ms, status_fd, &timed_out, &signal);
    if (got == (ssize_t)sizeof e) {
        st.start_errno = e;
    } else {
        st.exit_code = code;
        st.timed_out = timed_out;
        st.signal = signal;
    }
report:
    st.duration_ms = now_ms() - start;
    write_all(status_fd, &st, sizeof st);
    _exit(0);
}

int ns_exec(struct sandbox *sb, const struct sandbox_exec *ex, int fds[4], err_t *err)
{
    int in[2] = {-1, -1}, out[2] = {-1, -1}, er[2] = {-1, -1}, stp[2] = {-1, -1};
    int cg_fds[8], ncg = cgroup_procs_fds(sb->cg, cg_fds, 8);
    if (ncg < 0) return err_set(err, ncg, "cannot open the sandbox's cgroup: %s", strerror(-ncg));
    int r = 0;
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(er, O_CLOEXEC) < 0 ||
        pipe2(stp, O_CLOEXEC) < 0) {
        r = err_set(err, errno, "cannot make pipes: %s", strerror(errno));
        goto out;
    }
    pid_t pid = fork();
    if (pid < 0) {
        r = err_set(err, errno, "cannot fork: %s", strerror(errno));
        goto out;
    }
    if (pid == 0) {
        close(in[1]);
        close(out[0]);
        close(er[0]);
        close(stp[0]);
        int stdio[3] = {in[0], out[1], er[1]};
        monitor(sb, ex, stdio, stp[1], cg_fds, ncg);
    }
    fds[0] = steal_fd(&in[1]);
    fds[1] = steal_fd(&out[0]);
    fds[2] = steal_fd(&er[0]);
    fds[3] = steal_fd(&stp[0]);
out:
    for (int i = 0; i < 2; i++) {
        int *all[] = {&in[i], &out[i], &er[i], &stp[i]};
        for (size_t j = 0; j < ARRAY_LEN(all); j++)
            if (*all[j] >= 0) close(*all[j]);
    }
    for (int i = 0; i < ncg; i++)
        close(cg_fds[i]);
    return r;
}

int ns_enter_as_user(const struct sandbox *sb)
{
    uid_t uid = ns_host_uid(sb, SANDBOX_USER_UID);
    if (setns(sb->init_pidfd, CLONE_NEWNS) < 0) return -errno;
    /* The ns driver's init pivoted into the root; the gvisor driver's holder built it
     * at dir/root in its own mount namespace, where runsc's gofer serves it from. Opened
     * before the identity changes: the sandbox user may not enter dir (ns.c). */
    char gvisor_root[700];
    snprintf(gvisor_root, sizeof gvisor_root, "%s/root", sb->dir);
    int root = open(sb->gvisor ? gvisor_root : "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root < 0) return -errno;
    if (setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 || setresuid(uid, uid, uid) < 0) {
        int e = -errno;
        close(root);
        return e;
    }
    /* Changing identity cleared it: a helper does not outlive the keeper. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    umask(022);
    return root;
}

int ns_open_in_root(int root, const char *path, uint64_t flags, unsigned mode)
{
    struct open_how how = {.flags = flags | O_CLOEXEC,
                           .mode = mode,
                           .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
    int fd = (int)syscall(SYS_openat2, root, path, &how, sizeof how);
    return fd < 0 ? -errno : fd;
}

/* The directory of path's file, made if missing (mkdir -p, mode 0755), as the sandbox
 * user: each step is resolved within the root, so a symlink among them cannot lead
 * out. A write makes its parents, as Runtime Cloud's does. */
static int make_parents(int root, const char *path)
{
    char dir[PROTO_PATH_LEN];
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path) return 0; /* a file in / */
    snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    int parent = fcntl(root, F_DUPFD_CLOEXEC, 0);
    if (parent < 0) return -errno;
    for (char *name = dir + 1;;) {
        char *end = strchr(name, '/');
        if (end) *end = '\0';
        if (*name) { /* "//" names no step */
            int fd = ns_open_in_root(root, dir, O_PATH | O_DIRECTORY, 0);
            if (fd == -ENOENT && (mkdirat(parent, name, 0755) == 0 || errno == EEXIST))
                fd = ns_open_in_root(root, dir, O_PATH | O_DIRECTORY, 0);
            close(parent);
            if (fd < 0) return fd;
            parent = fd;
        }
        if (!end) break;
        *end = '/';
        name = end + 1;
    }
    close(parent);
    return 0;
}

static int open_inside(struct sandbox *sb, const char *path, unsigned write, unsigned mode)
{
    int root = ns_enter_as_user(sb);
    if (root < 0) return root;
    if (write) {
        int r = make_parents(root, path);
        if (r < 0) return r;
    }
    uint64_t flags = write == 2   ? O_RDWR | O_CREAT | O_EXCL /* uploads read it back */
                     : write == 1 ? O_WRONLY | O_CREAT | O_TRUNC
                                  : O_RDONLY;
    int fd = ns_open_in_root(root, path, flags | O_NONBLOCK | O_NOCTTY, write ? 0644 : 0);
    if (fd < 0) return fd;
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
    }
    /* As the sandbox user, so only a file of its own changes mode. */
    if (write && mode && fchmod(fd, mode & 0777) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

/* Runs fn in a forked child that holds only the init's pidfd, and takes back
 * the descriptors it made (SCM_RIGHTS): how the keeper acts inside a sandbox
 * without ever changing namespace or identity itself. */
int ns_helper(struct sandbox *sb, int (*fn)(struct sandbox *sb, const void *arg, int *fds),
              const void *arg, int *fds, unsigned nfds)
{
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) return -errno;
    pid_t pid = fork();
    if (pid < 0) {
        int e = -errno;
        close(sp[0]);
        close(sp[1]);
        return e;
    }
    if (pid == 0) {
        int keep[] = {sp[1], sb->init_pidfd};
        close_fds_except(keep, ARRAY_LEN(keep));
        int made[PROTO_MAX_FDS];
        struct proto_result res = {.status = fn(sb, arg, made)};
        proto_send(sp[1], PROTO_RESULT, 0, &res, sizeof res, res.status == 0 ? made : NULL,
                   res.status == 0 ? nfds : 0);
        _exit(0);
    }
    close(sp[1]);
    struct proto_hdr hdr;
    struct proto_result res = {.status = -EIO};
    for (unsigned i = 0; i < nfds; i++)
        fds[i] = -1;
    int n = proto_recv(sp[0], &hdr, &res, sizeof res, fds, nfds);
    close(sp[0]);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
    if (n != (int)sizeof res || (res.status == 0 && hdr.nfds != nfds)) res.status = -EIO;
    if (res.status < 0)
        for (unsigned i = 0; i < nfds; i++)
            if (fds[i] >= 0) close(fds[i]);
    return res.status;
}

struct open_args {
    const char *path;
    unsigned write;
    unsigned mode;
};

static int open_helper(struct sandbox *sb, const void *arg, int *fds)
{
    const struct open_args *a = arg;
    fds[0] = open_inside(sb, a->path, a->write, a->mode);
    return fds[0] < 0 ? fds[0] : 0;
}

int ns_open_file(struct sandbox *sb, const char *path, unsigned write, unsigned mode, int *fd,
                 err_t *err)
{
    if (path[0] != '/') return err_set(err, -EINVAL, "path must be absolute: %s", path);
    struct open_args a = {path, write, mode};
    int r = ns_helper(sb, open_helper, &a, fd, 1);
    if (r < 0) return err_set(err, r, "cannot open %s in the sandbox: %s", path, strerror(-r));
    return 0;
}

int ns_parent_of(int root, const char *path, const char **name)
{
    const char *slash = strrchr(path, '/');
    if (!slash || !slash[1] || strcmp(slash + 1, ".") == 0 || strcmp(slash + 1, "..") == 0)
        return -EINVAL;
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    *name = slash + 1;
    return ns_open_in_root(root, dir, O_PATH | O_DIRECTORY, 0);
}

struct rename_args {
    const char *from, *to;
    bool keep_mode;
};

static int rename_helper(struct sandbox *sb, const void *arg, int *fds)
{
    const struct rename_args *a = arg;
    int root = ns_enter_as_user(sb);
    if (root < 0) return root;
    const char *from_name, *to_name;
    int from_dir = ns_parent_of(root, a->from, &from_name);
    if (from_dir < 0) return from_dir;
    if (!a->to) return unlinkat(from_dir, from_name, 0) < 0 ? -errno : 0;
    int to_dir = ns_parent_of(root, a->to, &to_name);
    if (to_dir < 0) return to_dir;
    /* A regular file is replaced; anything else (a FIFO, a device, a directory, a
     * symlink) is refused, as opening it for writing was. */
    struct stat old;
    if (fstatat(to_dir, to_name, &old, AT_SYMLINK_NOFOLLOW) == 0) {
        if (!S_ISREG(old.st_mode)) return S_ISDIR(old.st_mode) ? -EISDIR : -EINVAL;
        if (a->keep_mode && fchmodat(from_dir, from_name, old.st_mode & 07777, 0) < 0)
            return -errno;
    }
    return renameat(from_dir, from_name, to_dir, to_name) < 0 ? -errno : 0;
}

int ns_rename_file(struct sandbox *sb, const char *from, const char *to, bool keep_mode, err_t *err)
{
    if (from[0] != '/' || (to && to[0] != '/'))
        return err_set(err, -EINVAL, "paths must be absolute: %s", from);
    struct rename_args a = {from, to, keep_mode};
    int r = ns_helper(sb, rename_helper, &a, NULL, 0);
    if (r == -EINVAL && to)
        return err_set(err, r,
                       "%s is not a regular file (a FIFO, a device or a symlink): an upload "
                       "replaces only regular files",
                       to);
    if (r < 0 && to)
        return err_set(err, r, "cannot put %s in place of %s: %s", from, to, strerror(-r));
    if (r < 0) return err_set(err, r, "cannot remove %s: %s", from, strerror(-r));
    return 0;
}
