/* The sandbox's root filesystem, built as an ordered list of steps (nsjail's
 * style), each returning on failure. Runs as host root inside the sandbox's new
 * mount namespace, which is owned by the host's user namespace: the sandbox's own
 * user namespace is made afterwards, so nothing inside can ever unmount or
 * remount what is built here. */
#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ns_impl.h"

struct build {
    const struct sandbox_host *host;
    const struct sandbox *sb;
    int loop_fd;
    char root[700];
    err_t *err;
};

static int do_mount(struct build *b, const char *src, const char *rel, const char *type,
                    unsigned long flags, const char *data)
{
    char target[800];
    snprintf(target, sizeof target, "%s%s", b->root, rel);
    if (mount(src, target, type, flags, data) < 0)
        return err_set(b->err, errno, "cannot mount %s on %s: %s", src ? src : "(none)", rel,
                       strerror(errno));
    return 0;
}

/* Read-only, nosuid, nodev on a whole mount tree: mount_setattr reaches submounts. */
static int lock_down(struct build *b, const char *rel, bool noexec)
{
    char target[800];
    snprintf(target, sizeof target, "%s%s", b->root, rel);
    struct mount_attr attr = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                          (noexec ? MOUNT_ATTR_NOEXEC : 0)};
    if (syscall(SYS_mount_setattr, AT_FDCWD, target, AT_RECURSIVE, &attr, sizeof attr) < 0)
        return err_set(b->err, errno, "cannot make %s read-only: %s", rel, strerror(errno));
    return 0;
}

static int bind_ro(struct build *b, const char *src, const char *rel)
{
    int r = do_mount(b, src, rel, NULL, MS_BIND | MS_REC, NULL);
    return r < 0 ? r : lock_down(b, rel, false);
}

static int make_dir(struct build *b, const char *rel, unsigned mode)
{
    char path[800];
    snprintf(path, sizeof path, "%s%s", b->root, rel);
    if (mkdir(path, mode) < 0 && errno != EEXIST)
        return err_set(b->err, errno, "cannot create %s: %s", rel, strerror(errno));
    chmod(path, mode); /* mkdir's mode is cut by the umask */
    return 0;
}

static int make_file(struct build *b, const char *rel, const char *text, unsigned mode)
{
    char path[800];
    snprintf(path, sizeof path, "%s%s", b->root, rel);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0) return err_set(b->err, errno, "cannot create %s: %s", rel, strerror(errno));
    int r = write_all(fd, text, strlen(text));
    close(fd);
    return r < 0 ? err_set(b->err, r, "cannot write %s", rel) : 0;
}

static int copy_in(struct build *b, const char *src, const char *rel)
{
    char path[800], buf[65536];
    snprintf(path, sizeof path, "%s%s", b->root, rel);
    int in = open(src, O_RDONLY | O_CLOEXEC);
    int out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ssize_t n = 0;
    int r = in < 0 || out < 0 ? -errno : 0;
    while (r == 0 && (n = read(in, buf, sizeof buf)) > 0)
        r = write_all(out, buf, (size_t)n);
    if (r == 0 && n < 0) r = -errno;
    if (in >= 0) close(in);
    if (out >= 0) close(out);
    return r < 0 ? err_set(b->err, r, "cannot copy %s into the sandbox: %s", src, strerror(-r)) : 0;
}

static int make_link(struct build *b, const char *target, const char *rel)
{
    char path[800];
    snprintf(path, sizeof path, "%s%s", b->root, rel);
    if (symlink(target, path) < 0 && errno != EEXIST)
        return err_set(b->err, errno, "cannot link %s: %s", rel, strerror(errno));
    return 0;
}

static int step_root(struct build *b)
{
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return err_set(b->err, errno, "cannot make mounts private: %s", strerror(errno));
    int r = do_mount(b, "tmpfs", "", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=4m");
    static const char *const dirs[] = {"/usr",       "/etc", "/proc", "/dev",     "/tmp",
                                       "/workspace", "/run", "/home", "/etc/ssl", "/etc/ssl/certs"};
    for (size_t i = 0; r == 0 && i < ARRAY_LEN(dirs); i++)
        r = make_dir(b, dirs[i], 0755);
    return r;
}

static int step_usr(struct build *b)
{
    int r = bind_ro(b, "/usr", "/usr");
    static const char *const links[][2] = {
        {"usr/bin", "/bin"}, {"usr/sbin", "/sbin"}, {"usr/lib", "/lib"}, {"usr/lib64", "/lib64"}};
    for (size_t i = 0; r == 0 && i < ARRAY_LEN(links); i++)
        r = make_link(b, links[i][0], links[i][1]);
    return r;
}

static int step_etc(struct build *b)
{
    char hosts[256];
    snprintf(hosts, sizeof hosts, "127.0.0.1\tlocalhost\n::1\tlocalhost\n127.0.1.1\t%s\n",
             b->sb->spec.id);
    const char *passwd = "root:x:0:0:root:/root:/usr/sbin/nologin\n"
                         "user:x:1000:1000:user:/workspace:/bin/sh\n"
                         "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
    const char *group = "root:x:0:\ntty:x:5:\nuser:x:1000:\nnogroup:x:65534:\n";
    int r = make_file(b, "/etc/passwd", passwd, 0644);
    if (r == 0) r = make_file(b, "/etc/group", group, 0644);
    if (r == 0) r = make_file(b, "/etc/hosts", hosts, 0644);
    if (r == 0) r = make_file(b, "/etc/hostname", b->sb->spec.id, 0644);
    /* gVisor's stack keeps its loopback to itself: its queries go to the veth's far end. */
    if (r == 0)
        r = make_file(
            b, "/etc/resolv.conf",
            b->sb->gvisor ? "nameserver " GVISOR_OUTER_ADDR "\n" : "nameserver 127.0.0.53\n", 0644);
    if (r == 0)
        r = make_file(b, "/etc/nsswitch.conf",
                      "passwd: files\ngroup: files\n"
                      "hosts: files dns\n",
                      0644);
    /* The dynamic loader finds multiarch libraries through its cache. */
    if (r == 0 && access("/etc/ld.so.cache", R_OK) == 0) {
        r = make_file(b, "/etc/ld.so.cache", "", 0644);
        if (r == 0) r = bind_ro(b, "/etc/ld.so.cache", "/etc/ld.so.cache");
    }
    /* /usr/bin/awk and friends are links through /etc/alternatives. */
    if (r == 0 && access("/etc/alternatives", R_OK) == 0) {
        r = make_dir(b, "/etc/alternatives", 0755);
        if (r == 0) r = bind_ro(b, "/etc/alternatives", "/etc/alternatives");
    }
    /* Copied, not bound: a bind would show the state dir's path in mountinfo. */
    if (r == 0 && b->host->ca_bundle[0])
        r = copy_in(b, b->host->ca_bundle, "/etc/ssl/certs/ca-certificates.crt");
    return r;
}

/* A fresh /proc for the new pid namespace, with the kernel's global knobs and
 * information leaks covered (as container runtimes do). */
static int step_proc(struct build *b)
{
    int r = do_mount(b, "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
    static const char *const ro[] = {"/proc/sys", "/proc/irq", "/proc/bus", "/proc/fs"};
    static const char *const masked[] = {
        "/proc/kcore",    "/proc/keys",        "/proc/timer_list",   "/proc/sysrq-trigger",
        "/proc/kallsyms", "/proc/sched_debug", "/proc/latency_stats"};
    char path[800];
    for (size_t i = 0; r == 0 && i < ARRAY_LEN(ro); i++) {
        snprintf(path, sizeof path, "%s%s", b->root, ro[i]);
        if (access(path, F_OK) == 0) r = bind_ro(b, path, ro[i]);
    }
    for (size_t i = 0; r == 0 && i < ARRAY_LEN(masked); i++) {
        snprintf(path, sizeof path, "%s%s", b->root, masked[i]);
        if (access(path, F_OK) == 0) r = do_mount(b, "/dev/null", masked[i], NULL, MS_BIND, NULL);
    }
    return r;
}

static int step_dev(struct build *b)
{
    int r = do_mount(b, "tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k");
    static const char *const nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};
    char src[64], rel[64];
    for (size_t i = 0; r == 0 && i < ARRAY_LEN(nodes); i++) {
        snprintf(src, sizeof src, "/dev/%s", nodes[i]);
        snprintf(rel, sizeof rel, "/dev/%s", nodes[i]);
        r = make_file(b, rel, "", 0666);
        if (r == 0) r = do_mount(b, src, rel, NULL, MS_BIND, NULL);
    }
    if (r == 0) r = make_dir(b, "/dev/pts", 0755);
    if (r == 0) r = make_dir(b, "/dev/shm", 01777);
    if (r == 0)
        r = do_mount(b, "devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
                     "newinstance,ptmxmode=0666,mode=0620");
    /* tmpfs pages count against the memory limit: cap them below it, so filling
     * them ends in ENOSPC rather than the OOM killer. */
    char shm[64];
    snprintf(shm, sizeof shm, "mode=1777,size=%um", b->sb->spec.memory_mib / 4 + 1);
    if (r == 0) r = do_mount(b, "tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, shm);
    static const char *const links[][2] = {{"pts/ptmx", "/dev/ptmx"},
                                           {"/proc/self/fd", "/dev/fd"},
                                           {"/proc/self/fd/0", "/dev/stdin"},
                                           {"/proc/self/fd/1", "/dev/stdout"},
                                           {"/proc/self/fd/2", "/dev/stderr"}};
    for (size_t i = 0; r == 0 && i < ARRAY_LEN(links); i++)
        r = make_link(b, links[i][0], links[i][1]);
    return r;
}

static int step_tmp(struct build *b)
{
    char opts[64];
    snprintf(opts, sizeof opts, "mode=1777,size=%um", b->sb->spec.memory_mib / 2 + 1);
    int r = do_mount(b, "tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, opts);
    if (r == 0)
        r = do_mount(b, "tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m");
    return r;
}

static int step_workspace(struct build *b)
{
    char link[64], dev[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", b->loop_fd);
    ssize_t n = readlink(link, dev, sizeof dev - 1);
    if (n < 0) return err_set(b->err, errno, "cannot find the workspace loop device");
    dev[n] = '\0';
    int r = do_mount(b, dev, "/workspace", "ext4", MS_NOSUID | MS_NODEV, NULL);
    if (r < 0) return r;
    char path[800];
    snprintf(path, sizeof path, "%s/workspace", b->root);
    uid_t uid = ns_host_uid(b->sb, SANDBOX_USER_UID);
    struct stat st;
    if (stat(path, &st) == 0 && st.st_uid != uid) {
        if (chown(path, uid, uid) < 0 || chmod(path, 0755) < 0)
            return err_set(b->err, errno, "cannot hand /workspace to the sandbox user: %s",
                           strerror(errno));
    }
    return 0;
}

static int step_pivot(struct build *b)
{
    if (chdir(b->root) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 ||
        umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
        return err_set(b->err, errno, "cannot switch to the sandbox root: %s", strerror(errno));
    if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
        return err_set(b->err, errno, "cannot make / read-only: %s", strerror(errno));
    return 0;
}

static int step_uts(struct build *b)
{
    if (sethostname(b->sb->spec.id, strlen(b->sb->spec.id)) < 0)
        return err_set(b->err, errno, "cannot set the hostname: %s", strerror(errno));
    return 0;
}

/* gVisor's pid 1 is a file in the root it serves: the agent (src/sandbox/agent/agent.c),
 * the keeper's one copy bound read-only (a copy of its own where there is none). */
static int step_agent_file(struct build *b)
{
    char path[800], shared[600];
    snprintf(path, sizeof path, "%s%s", b->root, GVISOR_AGENT_PATH);
    snprintf(shared, sizeof shared, "%s/" AGENT_SHARED_NAME, b->host->state_dir);
    if (access(shared, R_OK) == 0) {
        int r = make_file(b, GVISOR_AGENT_PATH, "", 0555);
        if (r == 0) r = do_mount(b, shared, GVISOR_AGENT_PATH, NULL, MS_BIND, NULL);
        return r == 0 ? lock_down(b, GVISOR_AGENT_PATH, false) : r;
    }
    int r = agent_image_write(path);
    return r < 0 ? err_set(b->err, r, "cannot write %s: %s", GVISOR_AGENT_PATH, strerror(-r)) : 0;
}

int rootfs_build_for_gvisor(const struct sandbox_host *host, const struct sandbox *sb, int loop_fd,
                            err_t *err)
{
    struct build b = {.host = host, .sb = sb, .loop_fd = loop_fd, .err = err};
    snprintf(b.root, sizeof b.root, "%s/root", sb->dir);
    int (*const steps[])(struct build *) = {step_root, step_usr,       step_etc,
                                            step_tmp,  step_workspace, step_agent_file};
    for (size_t i = 0; i < ARRAY_LEN(steps); i++) {
        int r = steps[i](&b);
        if (r < 0) return r;
    }
    return 0;
}

int rootfs_build(const struct sandbox_host *host, const struct sandbox *sb, int loop_fd, err_t *err)
{
    struct build b = {.host = host, .sb = sb, .loop_fd = loop_fd, .err = err};
    snprintf(b.root, sizeof b.root, "%s/root", sb->dir);
    int (*const steps[])(struct build *) = {step_root, step_usr,   step_etc,
                                            step_dev,  step_tmp,   step_workspace,
                                            step_proc, step_pivot, step_uts};
    for (size_t i = 0; i < ARRAY_LEN(steps); i++) {
        int r = steps[i](&b);
        if (r < 0) return r;
    }
    return 0;
}
