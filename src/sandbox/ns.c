/* The `ns` driver: a sandbox is a process tree in its own user, mount, pid, net,
 * ipc, uts and cgroup namespaces, under its own cgroup and host uid range.
 *
 * Its first process (pid 1 inside) builds the root as host root in fresh mount,
 * pid, net, ipc and uts namespaces, then makes the sandbox's user namespace,
 * drops every capability and stays as a reaper. Everything else enters through
 * its pidfd. Namespaces other than the user one are owned by the host's user
 * namespace, so even root inside the sandbox could not change mounts or routes. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../confine/confine.h"
#include "ns_impl.h"

#define SYNC_TIMEOUT_MS 15000

static int sync_send(int fd, const char *word)
{
    return send(fd, word, strlen(word), MSG_NOSIGNAL) < 0 ? -errno : 0;
}

/* Waits for one word from the other side; "err:..." carries the child's error. */
static int sync_expect(int fd, const char *word, err_t *err)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int n = poll(&p, 1, SYNC_TIMEOUT_MS);
    if (n <= 0) return err_set(err, n == 0 ? -ETIMEDOUT : -errno, "sandbox setup timed out");
    char buf[600];
    ssize_t r = recv(fd, buf, sizeof buf - 1, 0);
    if (r <= 0) return err_set(err, -ECHILD, "sandbox setup process died");
    buf[r] = '\0';
    if (strncmp(buf, "err:", 4) == 0) return err_set(err, -EIO, "%s", buf + 4);
    if (strcmp(buf, word) != 0) return err_set(err, -EPROTO, "sandbox setup out of step");
    return 0;
}

/* pid 1 of the sandbox: reaps whatever is reparented to it, forever. Signals
 * stay blocked, so nothing inside can stop it. It becomes runtime-init when it
 * can (a few pages, where this process holds its copy of the keeper), and only
 * otherwise loops here. */
static void __attribute__((noreturn)) init_loop(const struct sandbox_host *host)
{
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, NULL);
    ns_exec_init();
    if (host->title && host->title_len > 0) {
        memset(host->title, 0, host->title_len);
        snprintf(host->title, host->title_len, "runtime-init");
    }
    prctl(PR_SET_NAME, "runtime-init");
    close_range(0, ~0U, 0);
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    for (;;) {
        while (waitpid(-1, NULL, WNOHANG) > 0) {
        }
        sigwaitinfo(&chld, NULL);
    }
}

static void __attribute__((noreturn)) report_failure(int sync, const err_t *err)
{
    char msg[600];
    snprintf(msg, sizeof msg, "err:%s", err->msg);
    sync_send(sync, msg);
    _exit(1);
}

/* The network namespace gVisor's stack runs in, made here and pinned on dir/netns in
 * the holder's mount namespace (runsc's spec names it there); the holder stays in its
 * own, the veth's other side (net.c). */
static int pin_inner_netns(const struct sandbox *sb, err_t *err)
{
    char pin[700];
    snprintf(pin, sizeof pin, "%s/netns", sb->dir);
    int own = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    int file = open(pin, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    int r = own < 0 || file < 0 ? -errno : 0;
    if (r == 0 &&
        (unshare(CLONE_NEWNET) < 0 || mount("/proc/self/ns/net", pin, NULL, MS_BIND, NULL) < 0 ||
         setns(own, CLONE_NEWNET) < 0))
        r = -errno;
    if (own >= 0) close(own);
    if (file >= 0) close(file);
    return r < 0 ? err_set(err, r, "cannot make the inner network namespace: %s", strerror(-r)) : 0;
}

/* The gvisor driver's holder: pid 1 of new mount, pid, net, ipc and uts namespaces
 * that runsc runs in. It builds the root at dir/root without entering it, with a
 * /proc of its pid namespace (runsc re-executes itself through /proc/self/exe), and
 * stays as that namespace's reaper, unprivileged. runsc itself runs as root (it builds
 * its sandbox), started by the keeper inside these namespaces. */
static void __attribute__((noreturn))
holder_main(const struct sandbox_host *host, struct sandbox *sb, int sync, int loop_fd)
{
    err_t err = {0};
    int r = sync_expect(sync, "go", &err);
    if (r == 0 && (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
                   mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0))
        r = err_set(&err, errno, "cannot mount the holder's /proc: %s", strerror(errno));
    if (r == 0) r = pin_inner_netns(sb, &err);
    if (r == 0) r = rootfs_build_for_gvisor(host, sb, loop_fd, &err);
    close(loop_fd);
    /* Its work as root is done: it reaps from now on, as the sandbox's host root uid
     * (what runsc's processes run as) with no capability and the sandbox's filter. */
    if (r == 0) r = confine_drop_to(ns_host_uid(sb, 0), ns_host_uid(sb, 0), &err);
    if (r == 0) r = confine_sandbox_seccomp(&err);
    if (r < 0) report_failure(sync, &err);
    sync_send(sync, "ready");
    init_loop(host);
}

static void __attribute__((noreturn))
child_main(const struct sandbox_host *host, struct sandbox *sb, int sync, int loop_fd)
{
    if (sb->gvisor) holder_main(host, sb, sync, loop_fd);
    err_t err = {0};
    int r = sync_expect(sync, "go", &err);
    if (r == 0 && unshare(CLONE_NEWCGROUP) < 0)
        r = err_set(&err, errno, "cannot make a cgroup namespace: %s", strerror(errno));
    if (r == 0) r = rootfs_build(host, sb, loop_fd, &err);
    close(loop_fd);
    if (r == 0 && unshare(CLONE_NEWUSER) < 0)
        r = err_set(&err, errno, "cannot make a user namespace: %s", strerror(errno));
    if (r == 0) r = sync_send(sync, "user");
    if (r == 0) r = sync_expect(sync, "maps", &err);
    if (r == 0) r = confine_drop_to(0, 0, &err);
    if (r == 0) r = confine_sandbox_seccomp(&err);
    if (r < 0) report_failure(sync, &err);
    sync_send(sync, "ready");
    init_loop(host);
}

static int write_id_maps(pid_t pid, const struct sandbox *sb, err_t *err)
{
    char path[64], map[64];
    snprintf(map, sizeof map, "0 %u %u\n", ns_host_uid(sb, 0), SANDBOX_UID_RANGE);
    static const char *const files[] = {"uid_map", "gid_map"};
    for (size_t i = 0; i < ARRAY_LEN(files); i++) {
        snprintf(path, sizeof path, "/proc/%d/%s", pid, files[i]);
        int r = write_file(path, map);
        if (r < 0) return err_set(err, r, "cannot write %s: %s", path, strerror(-r));
    }
    return 0;
}

static void sandbox_paths(const struct sandbox_host *host, const char *id, char *dir, size_t n)
{
    snprintf(dir, n, "%s/sandboxes/%s", host->state_dir, id);
}

static int make_dirs(struct sandbox *sb, err_t *err)
{
    char root[700];
    snprintf(root, sizeof root, "%s/root", sb->dir);
    int r = mkdir_p(sb->dir, 0700);
    /* runsc's gofer runs as the sandbox's host root (its user namespace's 0) and must
     * reach dir/root: that group alone may enter the directory. */
    gid_t gid = ns_host_uid(sb, 0);
    if (r == 0 && sb->gvisor && (chown(sb->dir, 0, gid) < 0 || chmod(sb->dir, 0710) < 0))
        r = -errno;
    if (r == 0 && mkdir(root, 0755) < 0 && errno != EEXIST) r = -errno;
    return r < 0 ? err_set(err, r, "cannot create %s: %s", sb->dir, strerror(-r)) : 0;
}

/* Starts pid 1 in new namespaces and walks it through setup. */
static int start_init(const struct sandbox_host *host, struct sandbox *sb, int loop_fd, err_t *err)
{
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
        return err_set(err, errno, "socketpair: %s", strerror(errno));
    int pidfd = -1;
    struct clone_args args = {
        .flags =
            CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_PIDFD,
        .pidfd = (uint64_t)(uintptr_t)&pidfd,
        .exit_signal = SIGCHLD,
    };
    long pid = syscall(SYS_clone3, &args, sizeof args);
    if (pid < 0) {
        int e = errno;
        close(sp[0]);
        close(sp[1]);
        return err_set(err, e, "cannot create the sandbox namespaces: %s", strerror(e));
    }
    if (pid == 0) {
        close(sp[0]);
        child_main(host, sb, sp[1], loop_fd);
    }
    close(sp[1]);
    sb->init_pid = (pid_t)pid;
    sb->init_pidfd = sandbox_fd_high(pidfd);
    int r = cgroup_attach(sb->cg, sb->init_pid, err);
    /* The OOM killer must never pick pid 1: the sandbox would die with it. */
    char oom[64];
    snprintf(oom, sizeof oom, "/proc/%d/oom_score_adj", sb->init_pid);
    if (r == 0 && write_file(oom, "-1000") < 0)
        log_debug("%s: -1000 refused; exec'd programs get +500 instead", oom);
    if (r == 0 && !sb->gvisor) r = ns_net_setup(sb, err);
    if (r == 0) r = sync_send(sp[0], "go");
    if (r == 0 && !sb->gvisor) { /* gVisor maps its own user namespace (gvisor.c) */
        r = sync_expect(sp[0], "user", err);
        if (r == 0) r = write_id_maps(sb->init_pid, sb, err);
        if (r == 0) r = sync_send(sp[0], "maps");
    }
    if (r == 0) r = sync_expect(sp[0], "ready", err);
    if (r == 0 && sb->gvisor) r = ns_net_setup(sb, err); /* the holder made the inner netns */
    close(sp[0]);
    return r;
}

struct sandbox *ns_sandbox_alloc(const struct sandbox_host *host, const struct sandbox_spec *spec,
                                 bool gvisor)
{
    struct sandbox *sb = calloc(1, sizeof *sb);
    if (!sb) return NULL;
    sb->spec = *spec;
    sb->host = host;
    sb->init_pid = -1;
    sb->init_pidfd = -1;
    sb->gvisor = gvisor;
    sb->boot_pidfd = -1;
    sandbox_paths(host, spec->id, sb->dir, sizeof sb->dir);
    return sb;
}

void ns_free(struct sandbox *sb)
{
    if (!sb) return;
    if (sb->init_pidfd >= 0) close(sb->init_pidfd);
    cgroup_free(sb->cg);
    free(sb);
}

void sandbox_cgroup_name(const struct sandbox_host *host, const char *id, char *out, size_t n)
{
    snprintf(out, n, "%s-%s", host->instance, id);
}

const char *sandbox_id_of_cgroup(const struct sandbox_host *host, const char *name)
{
    size_t n = strlen(host->instance);
    return strncmp(name, host->instance, n) == 0 && name[n] == '-' ? name + n + 1 : NULL;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return (flag == FTW_DP ? rmdir(path) : unlink(path)) < 0 && errno != ENOENT ? -1 : 0;
}

/* ns_impl.h says what; nftw never leaves the file system it starts on. */
void ns_remove_tree(const char *path)
{
    nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

void gvisor_remove_state(const char *dir)
{
    static const char *const trees[] = {"bundle", "runsc", GVISOR_SERVERS, GVISOR_IMAGE,
                                        GVISOR_IMAGE ".new"};
    char path[700];
    for (size_t i = 0; i < ARRAY_LEN(trees); i++) {
        snprintf(path, sizeof path, "%s/%s", dir, trees[i]);
        ns_remove_tree(path);
    }
    DIR *d = opendir(dir);
    for (struct dirent *de; d && (de = readdir(d));)
        if (strncmp(de->d_name, "exec-", 5) == 0 || strcmp(de->d_name, "netns") == 0 ||
            strcmp(de->d_name, "shim.sock") == 0)
            unlinkat(dirfd(d), de->d_name, 0);
    if (d) closedir(d);
}

/* One sweep for both drivers: it removes what either may have left. */
int ns_sweep(const struct sandbox_host *host, const char *id)
{
    struct cgroup *cg = NULL;
    char cgname[64];
    sandbox_cgroup_name(host, id, cgname, sizeof cgname);
    if (cgroup_open(cgname, &cg, NULL) == 0) {
        cgroup_kill_all(cg);
        cgroup_destroy(cg, NULL);
        cgroup_free(cg);
    }
    char dir[640], path[700];
    sandbox_paths(host, id, dir, sizeof dir);
    gvisor_remove_state(dir);
    snprintf(path, sizeof path, "%s/workspace.img", dir);
    char real[PATH_MAX];
    bool attached = realpath(path, real) != NULL;
    unlink(path);
    /* A removal answers once its loop device is gone too (what a removal leaves behind is
     * nothing); past the bound the device still detaches itself, so it is not an error. */
    if (attached) workspace_wait_released(real, WORKSPACE_RELEASE_MS, NULL);
    snprintf(path, sizeof path, "%s/root", dir);
    rmdir(path);
    if (rmdir(dir) < 0 && errno != ENOENT) return -errno;
    return 0;
}

struct cgroup_limits ns_limits(const struct sandbox_spec *spec, bool gvisor)
{
    struct cgroup_limits lim = {.memory_bytes = (uint64_t)spec->memory_mib << 20,
                                .cpu_milli = spec->cpu_milli,
                                .pids_max = spec->pids_max};
    if (gvisor) { /* room for runsc's own, beside the limits gVisor enforces inside */
        lim.memory_bytes += (uint64_t)GVISOR_MEMORY_EXTRA_MIB << 20;
        lim.pids_max = spec->pids_max * GVISOR_HOST_PIDS_PER_TASK + GVISOR_PIDS_EXTRA;
    }
    return lim;
}

int ns_build(const struct sandbox_host *host, const struct sandbox_spec *spec, bool reuse_workspace,
             bool gvisor, struct sandbox **out, err_t *err)
{
    if (spec->slot >= SANDBOX_MAX_SLOTS)
        return err_set(err, -EINVAL, "sandbox slot %u out of range", spec->slot);
    struct sandbox *sb = ns_sandbox_alloc(host, spec, gvisor);
    if (!sb) return err_set(err, -ENOMEM, "out of memory");
    char image[700];
    snprintf(image, sizeof image, "%s/workspace.img", sb->dir);
    int loop_fd = -1;
    struct cgroup_limits lim = ns_limits(spec, gvisor);
    int r = make_dirs(sb, err);
    char real[PATH_MAX];
    if (r == 0 && !(reuse_workspace && realpath(image, real)))
        r = workspace_create(host, image, spec->disk_mib, err);
    else if (r == 0) /* its last run's mount may still be going away */
        r = workspace_wait_released(real, WORKSPACE_RELEASE_MS, err);
    char cgname[64];
    sandbox_cgroup_name(host, spec->id, cgname, sizeof cgname);
    if (r == 0) r = cgroup_create(cgname, &lim, &sb->cg, err);
    if (r == 0) r = workspace_attach(image, &loop_fd, err);
    if (r == 0) r = start_init(host, sb, loop_fd, err);
    if (loop_fd >= 0) close(loop_fd);
    if (r < 0) {
        if (sb->init_pidfd >= 0) syscall(SYS_pidfd_send_signal, sb->init_pidfd, SIGKILL, NULL, 0);
        if (!reuse_workspace) ns_sweep(host, spec->id);
        ns_free(sb);
        return r;
    }
    *out = sb;
    return 0;
}

int sandbox_sweep(const struct sandbox_host *host, const char *id)
{
    return ns_sweep(host, id);
}

static int ns_create(const struct sandbox_host *host, const struct sandbox_spec *spec,
                     bool reuse_workspace, struct sandbox **out, err_t *err)
{
    return ns_build(host, spec, reuse_workspace, false, out, err);
}

/* Reads the innermost pid of `pid` from /proc; 1 marks a namespace's init.
 * Returns it, or read_file_small's negative errno, or -ENOENT when the status
 * has no NSpid line. */
static long inner_pid(pid_t pid)
{
    char path[64], buf[2048];
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    int r = read_file_small(path, buf, sizeof buf);
    if (r < 0) return r;
    char *line = strstr(buf, "\nNSpid:");
    if (!line) return -ENOENT;
    char *end = strchr(line + 1, '\n');
    if (end) *end = '\0';
    char *last = strrchr(line, '\t');
    return last ? strtol(last + 1, NULL, 10) : -ENOENT;
}

static int ns_adopt(const struct sandbox_host *host, const struct sandbox_spec *spec,
                    struct sandbox **out, err_t *err)
{
    struct sandbox *sb = ns_sandbox_alloc(host, spec, false);
    if (!sb) return err_set(err, -ENOMEM, "out of memory");
    char cgname[64];
    sandbox_cgroup_name(host, spec->id, cgname, sizeof cgname);
    int r = cgroup_open(cgname, &sb->cg, err);
    pid_t pids[256];
    int n = r == 0 ? cgroup_pids(sb->cg, pids, (int)ARRAY_LEN(pids)) : 0;
    for (int i = 0; i < n && sb->init_pidfd < 0; i++) {
        if (inner_pid(pids[i]) != 1) continue;
        int fd = (int)syscall(SYS_pidfd_open, pids[i], 0);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (fd >= 0 && poll(&p, 1, 0) == 0) { /* readable means it is exiting */
            sb->init_pidfd = sandbox_fd_high(fd);
            sb->init_pid = pids[i];
        } else if (fd >= 0) {
            close(fd);
        }
    }
    if (sb->init_pidfd < 0) {
        ns_free(sb);
        return err_set(err, -ENOENT, "sandbox %s is no longer running", spec->id);
    }
    *out = sb;
    return 0;
}

static void wait_gone(int pidfd, int timeout_ms)
{
    struct pollfd p = {.fd = pidfd, .events = POLLIN};
    while (poll(&p, 1, timeout_ms) < 0 && errno == EINTR) {
    }
}

int sandbox_fd_high(int fd)
{
    int high = fd >= 0 && fd < SANDBOX_FD_FLOOR ? fcntl(fd, F_DUPFD_CLOEXEC, SANDBOX_FD_FLOOR) : -1;
    if (high < 0) return fd;
    close(fd);
    return high;
}

int ns_stop(struct sandbox *sb, err_t *err)
{
    if (sb->init_pidfd >= 0) {
        /* A frozen (paused) task takes its SIGKILL only once thawed. */
        cgroup_freeze(sb->cg, false, NULL);
        syscall(SYS_pidfd_send_signal, sb->init_pidfd, SIGKILL, NULL, 0);
        wait_gone(sb->init_pidfd, 5000);
    }
    cgroup_kill_all(sb->cg);
    return cgroup_destroy(sb->cg, err);
}

static int ns_destroy(struct sandbox *sb, err_t *err)
{
    int r = ns_stop(sb, err);
    int s = ns_sweep(sb->host, sb->spec.id);
    if (r == 0 && s < 0) r = err_set(err, s, "cannot remove %s: %s", sb->dir, strerror(-s));
    return r;
}

static int ns_watch_fd(struct sandbox *sb)
{
    return fcntl(sb->init_pidfd, F_DUPFD_CLOEXEC, 3);
}

/* A paused sandbox keeps its processes and their memory, but not its page cache:
 * that is the host's to reuse while nobody calls it. */
int ns_freeze(struct sandbox *sb, bool frozen, err_t *err)
{
    int r = cgroup_freeze(sb->cg, frozen, err);
    if (r == 0 && frozen) cgroup_reclaim(sb->cg);
    return r;
}

/* Hibernation without an image: its memory goes to the host's swap, where the kernel
 * takes it (a frozen cgroup's pages, cgroup_swap_out), and comes back as it is touched. */
static int ns_hibernate(struct sandbox *sb, uint64_t *swapped, err_t *err)
{
    if (meminfo_bytes("SwapTotal") <= 0)
        return err_set(err, -ENOTSUP,
                       "this host has no swap, where an ns sandbox's memory goes when it "
                       "hibernates; add swap (docs/hibernation.md) or use isolation gvisor");
    int r = cgroup_freeze(sb->cg, true, err);
    if (r < 0) return r;
    cgroup_swap_out(sb->cg);
    struct cgroup_stats st = {0};
    r = cgroup_stats(sb->cg, &st);
    *swapped = st.swap_bytes;
    return r < 0 ? err_set(err, r, "cannot read sandbox %s's memory: %s", sb->spec.id, strerror(-r))
                 : 0;
}

static int ns_restore(struct sandbox *sb, enum proto_from *from, err_t *err)
{
    *from = PROTO_FROM_SWAP;
    return cgroup_freeze(sb->cg, false, err);
}

/* Stored: its workspace, and what of its memory is in swap (a hibernated one's). */
int ns_stats(struct sandbox *sb, struct sandbox_stats *st)
{
    char image[700];
    struct stat s;
    snprintf(image, sizeof image, "%s/workspace.img", sb->dir);
    /* The image is sparse: its allocated blocks are what the host stores. */
    if (stat(image, &s) == 0) st->disk_bytes = (uint64_t)s.st_blocks * 512;
    int r = cgroup_stats(sb->cg, &st->cg);
    st->disk_bytes += st->cg.swap_bytes;
    return r;
}

const struct sandbox_driver sandbox_ns_driver = {
    .name = "ns",
    .create = ns_create,
    .adopt = ns_adopt,
    .destroy = ns_destroy,
    .stop = ns_stop,
    .exec = ns_exec,
    .open_file = ns_open_file,
    .rename_file = ns_rename_file,
    .file_op = ns_file_op,
    .net_sockets = ns_net_sockets,
    .watch_fd = ns_watch_fd,
    .freeze = ns_freeze,
    .hibernate = ns_hibernate,
    .restore = ns_restore,
    .stats = ns_stats,
    .sweep = ns_sweep,
    .free = ns_free,
};

const struct sandbox_driver *sandbox_driver_find(const char *name)
{
    if (!name || strcmp(name, "ns") == 0) return &sandbox_ns_driver;
    if (strcmp(name, "gvisor") == 0) return &sandbox_gvisor_driver;
    return NULL;
}
