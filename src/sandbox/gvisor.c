/* The `gvisor` driver: the sandbox's programs run on gVisor's kernel (runsc's
 * sentry, systrap platform), not on the host's.
 *
 * It is built on the ns driver's pieces. A holder process, in new mount, pid, net,
 * ipc and uts namespaces and the sandbox's cgroup, builds the same root as the ns
 * driver at STATE/sandboxes/<id>/root (without pivoting into it) and stays as the
 * reaper of its pid namespace. The keeper then runs `runsc run --detach`
 * inside the holder's namespaces on an OCI bundle whose root is that directory, so
 * runsc's gofer serves the same /usr, /etc, /tmp and /workspace, and its sentry and
 * gofer live in the sandbox's cgroup (--ignore-cgroups): the limits, the freezer and
 * the meter act on them unchanged. The sentry uses the holder's network namespace
 * (--network=host: its sockets are the host kernel's, in a namespace whose only way
 * out is the same nft redirect to the egress proxy as the ns driver's).
 *
 * Killing the holder ends its pid namespace and so every runsc process; the mounts
 * go with its mount namespace. runsc's own state lives under the sandbox's
 * directory (STATE/sandboxes/<id>/runsc), which the sweep removes.
 *
 * Programs are children of the container's pid 1, the agent (agent/agent.c), asked for
 * through the shim beside it (agent/shim.c; frame.h says why: a restore keeps them, and
 * no argv reaches a host command line). File calls run the ns driver's helpers on the
 * host side of the gofer's directories (exec.c: the root is dir/root in the holder's
 * mount namespace), as the sandbox user's host uid, which is what gVisor's user
 * namespace maps its uid 1000 to. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <linux/if_alg.h>
#include <linux/openat2.h>
#include <linux/vm_sockets.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../confine/confine.h"
#include "agent/frame.h"
#include "ns_impl.h"

#define GVISOR_ENTER (CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS)
#define RUNSC_MAX_ARGS 16

int sandbox_gvisor_available(err_t *err)
{
    struct stat st;
    if (stat(RUNSC_PATH, &st) < 0)
        return err_set(err, -ENOENT, "runsc not found at %s; scripts/install-runsc builds it",
                       RUNSC_PATH);
    if (st.st_uid != 0 || (st.st_mode & 022) || !(st.st_mode & S_IXUSR))
        return err_set(err, -EPERM,
                       "%s must be an executable owned by root and writable by root only "
                       "(the keeper runs it as root)",
                       RUNSC_PATH);
    char version[128] = "";
    read_file_small(RUNSC_PATH ".version", version, sizeof version);
    version[strcspn(version, "\n")] = '\0';
    if (strcmp(version, RUNSC_MODULE_VERSION) != 0)
        return err_set(err, -ENOEXEC,
                       "%s is version '%s', not the %s this runtimed is built for; run "
                       "scripts/install-runsc",
                       RUNSC_PATH, version, RUNSC_MODULE_VERSION);
    return 0;
}

/* ---- runsc's command lines ---- */

struct runsc_argv {
    const char *v[RUNSC_MAX_ARGS + 8];
    char root[700];
    int n;
};

/* runsc's global flags, then the command's words (NULL-terminated). */
static void runsc_argv(struct runsc_argv *a, const struct sandbox *sb, const char *const *words)
{
    snprintf(a->root, sizeof a->root, "--root=%s/runsc", sb->dir);
    static const char *const flags[] = {
        "runsc",           "--platform=systrap", "--network=sandbox", "--ignore-cgroups",
        "--overlay2=none", "--host-uds=none",    "--oci-seccomp"};
    a->n = 0;
    for (size_t i = 0; i < ARRAY_LEN(flags); i++)
        a->v[a->n++] = flags[i];
    a->v[a->n++] = a->root;
    for (; *words && a->n < RUNSC_MAX_ARGS + 7; words++)
        a->v[a->n++] = *words;
    a->v[a->n] = NULL;
}

/* The last line runsc wrote on stderr (read from fd: a file from its start, a pipe what
 * it holds), for an error message; "" when it wrote none. */
void gvisor_runsc_said(int fd, bool from_start, char *out, size_t n)
{
    char buf[4096];
    ssize_t got = from_start ? pread(fd, buf, sizeof buf - 1, 0) : read(fd, buf, sizeof buf - 1);
    buf[got > 0 ? got : 0] = '\0';
    char *end = buf + strlen(buf);
    while (end > buf && (end[-1] == '\n' || end[-1] == ' '))
        *--end = '\0';
    char *line = strrchr(buf, '\n');
    snprintf(out, n, "%s", line ? line + 1 : buf);
}

/* Starts runsc with words inside the holder's namespaces and the sandbox's cgroup (what
 * it starts stays there): the keeper's forked child joins them and forks again, since
 * only a child enters a pid namespace. stdio are runsc's stdin, stdout and stderr (the
 * container's, for run and restore; -1: /dev/null, and for stderr an unlinked file that
 * gvisor_runsc_wait reads for an error message: the processes runsc leaves running
 * inherit it, so it cannot be a pipe). */
int gvisor_runsc_start(struct sandbox *sb, const char *const *words, const int stdio[3],
                       struct runsc_job *job, err_t *err)
{
    struct runsc_argv a;
    runsc_argv(&a, sb, words);
    while (words[1] && strncmp(words[0], "--", 2) == 0) /* a global flag: not the command */
        words++;
    *job = (struct runsc_job){.pid = -1, .errfd = -1, .command = words[0]};
    if (stdio[2] < 0 && (job->errfd = open(sb->dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600)) < 0)
        return err_set(err, errno, "cannot make a file in %s: %s", sb->dir, strerror(errno));
    int errfd = stdio[2] >= 0 ? stdio[2] : job->errfd;
    int cg_fds[8], ncg = cgroup_procs_fds(sb->cg, cg_fds, 8);
    pid_t pid = ncg < 0 ? -1 : fork();
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (setns(sb->init_pidfd, GVISOR_ENTER) < 0) _exit(125);
        pid_t child = fork();
        if (child == 0) {
            cgroup_attach_fds(cg_fds, ncg, 0);
            /* Not the keeper's niceness: the sentry and gofer that `run` and `restore`
             * leave running are the sandbox's, and run its programs as an ns sandbox's
             * run (at 0). Niced, each wakeup of theirs waited behind the callers'. */
            setpriority(PRIO_PROCESS, 0, 0);
            dup2(stdio[0] >= 0 ? stdio[0] : null, 0);
            dup2(stdio[1] >= 0 ? stdio[1] : null, 1);
            dup2(errfd, 2);
            execve(RUNSC_PATH, (char *const *)a.v, (char *const[]){"PATH=/usr/bin:/bin", NULL});
            _exit(127);
        }
        int st = 0;
        while (child > 0 && waitpid(child, &st, 0) < 0 && errno == EINTR) {
        }
        _exit(child < 0 ? 126 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    }
    for (int i = 0; i < ncg; i++)
        close(cg_fds[i]);
    if (pid < 0) {
        if (job->errfd >= 0) close(job->errfd);
        job->errfd = -1;
        return ncg < 0 ? err_set(err, ncg, "cannot open the sandbox's cgroup")
                       : err_set(err, errno, "fork: %s", strerror(errno));
    }
    job->pid = pid;
    return 0;
}

/* Waits for a runsc that gvisor_runsc_start started (at most RUNSC_TIMEOUT_MS: then it is
 * killed; what it left running dies with the holder). */
int gvisor_runsc_wait(struct runsc_job *job, err_t *err)
{
    if (job->pid < 0) return -ECHILD;
    int pidfd = (int)syscall(SYS_pidfd_open, job->pid, 0);
    struct pollfd p = {.fd = pidfd, .events = POLLIN};
    int n = pidfd >= 0 ? poll(&p, 1, RUNSC_TIMEOUT_MS) : 1;
    if (n == 0) kill(job->pid, SIGKILL);
    if (pidfd >= 0) close(pidfd);
    int st = 0;
    while (waitpid(job->pid, &st, 0) < 0 && errno == EINTR) {
    }
    job->pid = -1;
    char why[512] = "";
    if (job->errfd >= 0) {
        gvisor_runsc_said(job->errfd, true, why, sizeof why);
        close(job->errfd);
        job->errfd = -1;
    }
    if (n == 0) return err_set(err, -ETIMEDOUT, "runsc %s timed out", job->command);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return err_set(err, -EIO, "runsc %s failed: %s", job->command, why[0] ? why : "no message");
    return 0;
}

int gvisor_runsc(struct sandbox *sb, const char *const *words, int in_fd, int out_fd, err_t *err)
{
    struct runsc_job job;
    int r = gvisor_runsc_start(sb, words, (const int[3]){in_fd, out_fd, -1}, &job, err);
    return r < 0 ? r : gvisor_runsc_wait(&job, err);
}

/* ---- the OCI bundle ---- */

static json_t *mount_json(const char *dest, const char *type, const char *source,
                          const char *options)
{
    json_t *opts = json_array();
    char buf[256];
    snprintf(buf, sizeof buf, "%s", options);
    for (char *save = NULL, *o = strtok_r(buf, ",", &save); o; o = strtok_r(NULL, ",", &save))
        json_array_append_new(opts, json_string(o));
    return json_pack("{s:s,s:s,s:s,s:o}", "destination", dest, "type", type, "source", source,
                     "options", opts);
}

static json_t *bind_json(const struct sandbox *sb, const char *dest, const char *options)
{
    char source[800];
    snprintf(source, sizeof source, "%s/root%s", sb->dir, dest);
    return mount_json(dest, "bind", source, options);
}

/* The agent's four (agent/agent.c): to make each program the sandbox user with no
 * capability (SETUID, SETGID, SETPCAP) and to signal its programs (KILL). */
json_t *gvisor_agent_capabilities(void)
{
    const char *caps[] = {"CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", "CAP_KILL"};
    json_t *set[3];
    for (int i = 0; i < 3; i++) {
        set[i] = json_array();
        for (size_t c = 0; c < ARRAY_LEN(caps); c++)
            json_array_append_new(set[i], json_string(caps[c]));
    }
    return json_pack("{s:o,s:o,s:[],s:o,s:[]}", "bounding", set[0], "effective", set[1],
                     "inheritable", "permitted", set[2], "ambient");
}

static json_t *id_map(const struct sandbox *sb)
{
    return json_pack("[{s:I,s:I,s:I}]", "containerID", (json_int_t)0, "hostID",
                     (json_int_t)ns_host_uid(sb, 0), "size", (json_int_t)SANDBOX_UID_RANGE);
}

/* A call that fails with EPERM (for the calls that match args, when given). */
static json_t *seccomp_rule(const char *name, json_t *args)
{
    json_t *rule = json_pack("{s:[s],s:s}", "names", name, "action", "SCMP_ACT_ERRNO");
    if (args) json_object_set_new(rule, "args", args);
    return rule;
}

static json_t *seccomp_arg(unsigned index, uint64_t value, uint64_t mask, const char *op)
{
    return json_pack("[{s:i,s:I,s:I,s:s}]", "index", index, "value", (json_int_t)value, "valueTwo",
                     (json_int_t)mask, "op", op);
}

/* The ns driver's seccomp deny-list (confine.c), as an OCI profile that gVisor applies
 * to the programs it runs (--oci-seccomp): the calls are gVisor's own code here, not the
 * host's, but a program sees the same sandbox under both drivers. */
static json_t *seccomp_json(void)
{
    size_t n;
    const char *const *names = confine_sandbox_denied_names(&n);
    json_t *rules = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(rules, seccomp_rule(names[i], NULL));
    static const uint64_t flags[] = {CLONE_NEWUSER, CLONE_NEWNS,  CLONE_NEWNET,    CLONE_NEWPID,
                                     CLONE_NEWIPC,  CLONE_NEWUTS, CLONE_NEWCGROUP, CLONE_NEWTIME};
    for (size_t i = 0; i < ARRAY_LEN(flags); i++) {
        json_t *arg = seccomp_arg(0, flags[i], flags[i], "SCMP_CMP_MASKED_EQ");
        json_array_append_new(rules, seccomp_rule("unshare", json_copy(arg)));
        json_array_append_new(rules, seccomp_rule("clone", arg));
    }
    /* clone3 passes its flags in memory a filter cannot read: it must answer ENOSYS, so
     * that libc falls back to clone and its rules above. runsc answers every denied call
     * EPERM (it ignores errnoRet), on which libc's threads fail; a trace action with no
     * tracer answers ENOSYS (and ptrace, which could attach one, is denied). */
    json_t *clone3 = seccomp_rule("clone3", NULL);
    json_object_set_new(clone3, "action", json_string("SCMP_ACT_TRACE"));
    json_array_append_new(rules, clone3);
    json_array_append_new(rules,
                          seccomp_rule("socket", seccomp_arg(0, AF_VSOCK, 0, "SCMP_CMP_EQ")));
    json_array_append_new(rules, seccomp_rule("socket", seccomp_arg(0, AF_ALG, 0, "SCMP_CMP_EQ")));
    json_array_append_new(
        rules, seccomp_rule("personality", seccomp_arg(0, 0xffffffffu, 0, "SCMP_CMP_NE")));
    return json_pack("{s:s,s:[s],s:o}", "defaultAction", "SCMP_ACT_ALLOW", "architectures",
                     "SCMP_ARCH_X86_64", "syscalls", rules);
}

/* /usr, /tmp, /run and /workspace are bind mounts of the holder's directories, served
 * by the gofer as they change on the host (file calls write there); /proc, /dev and
 * /dev/shm are gVisor's own. The root is read-only, as the ns driver's. */
json_t *gvisor_bundle_json(const struct sandbox *sb)
{
    char root[700], shm[64];
    snprintf(root, sizeof root, "%s/root", sb->dir);
    snprintf(shm, sizeof shm, "nosuid,nodev,noexec,mode=1777,size=%um",
             sb->spec.memory_mib / 4 + 1);
    json_t *mounts = json_array();
    json_array_append_new(mounts, mount_json("/proc", "proc", "proc", "nosuid,nodev,noexec"));
    json_array_append_new(mounts, mount_json("/dev", "tmpfs", "tmpfs", "nosuid,mode=755"));
    json_array_append_new(mounts, mount_json("/dev/pts", "devpts", "devpts",
                                             "nosuid,noexec,newinstance,ptmxmode=0666,mode=0620"));
    json_array_append_new(mounts, mount_json("/dev/shm", "tmpfs", "shm", shm));
    json_array_append_new(mounts, bind_json(sb, "/usr", "rbind,ro,nosuid,nodev"));
    json_array_append_new(mounts, bind_json(sb, "/tmp", "rbind,rw,nosuid,nodev"));
    json_array_append_new(mounts, bind_json(sb, "/run", "rbind,rw,nosuid,nodev"));
    json_array_append_new(mounts, bind_json(sb, "/workspace", "rbind,rw,nosuid,nodev"));
    /* gVisor's own cgroups (v1), where the init sets pids.max: their files are root's. */
    json_array_append_new(mounts,
                          mount_json("/sys/fs/cgroup", "cgroup", "cgroup", "nosuid,nodev,noexec"));
    char pids[16];
    snprintf(pids, sizeof pids, "%u", sb->spec.pids_max);
    json_t *process =
        json_pack("{s:{s:i,s:i},s:[s,s],s:[s],s:s,s:o,s:b}", "user", "uid", 0, "gid", 0, "args",
                  GVISOR_AGENT_PATH, pids, "env", "PATH=/usr/local/bin:/usr/bin:/bin", "cwd", "/",
                  "capabilities", gvisor_agent_capabilities(), "noNewPrivileges", 1);
    char netns[700];
    snprintf(netns, sizeof netns, "%s/netns", sb->dir);
    json_t *namespaces = json_pack(
        "{s:[{s:s},{s:s},{s:s},{s:s},{s:s},{s:s,s:s}],s:o,s:o,s:o}", "namespaces", "type", "pid",
        "type", "ipc", "type", "uts", "type", "mount", "type", "user", "type", "network", "path",
        netns, "uidMappings", id_map(sb), "gidMappings", id_map(sb), "seccomp", seccomp_json());
    return json_pack("{s:s,s:o,s:{s:s,s:b},s:s,s:o,s:o}", "ociVersion", "1.0.2", "process", process,
                     "root", "path", root, "readonly", 1, "hostname", sb->spec.id, "mounts", mounts,
                     "linux", namespaces);
}

static int write_bundle(const struct sandbox *sb, err_t *err)
{
    char dir[700], path[720];
    snprintf(dir, sizeof dir, "%s/bundle", sb->dir);
    snprintf(path, sizeof path, "%s/config.json", dir);
    json_t *spec = gvisor_bundle_json(sb);
    int r = mkdir(dir, 0700) < 0 && errno != EEXIST ? -errno : 0;
    if (r == 0 && (!spec || json_dump_file(spec, path, JSON_COMPACT) < 0)) r = -EIO;
    json_decref(spec);
    return r < 0 ? err_set(err, r, "cannot write the OCI bundle %s", path) : 0;
}

/* ---- finding runsc's processes ---- */

static bool cmdline_starts(pid_t pid, const char *word)
{
    char path[64], buf[64];
    snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
    return read_file_small(path, buf, sizeof buf) >= 0 && strcmp(buf, word) == 0;
}

static pid_t parent_of(pid_t pid)
{
    char path[64], buf[2048];
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    if (read_file_small(path, buf, sizeof buf) < 0) return -1;
    const char *line = strstr(buf, "\nPPid:");
    return line ? (pid_t)strtol(line + 6, NULL, 10) : -1;
}

/* A pidfd of pid unless it is exiting (then readable already); -1 otherwise. Kept for
 * the sandbox's life: above SANDBOX_FD_FLOOR. */
static int live_pidfd(pid_t pid)
{
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (fd >= 0 && poll(&p, 1, 0) != 0) {
        close(fd);
        fd = -1;
    }
    return sandbox_fd_high(fd);
}

/* The holder (runtime-init) and runsc's sandbox process, from the sandbox's cgroup:
 * how a created sandbox and an adopted one are found. The sandbox process is the
 * holder's child named runsc-sandbox (its systrap stubs are its own children, with the
 * same name). Reading /proc works on a frozen sandbox, where runsc's commands hang. */
static int find_processes(struct sandbox *sb)
{
    pid_t pids[512];
    int n = cgroup_pids(sb->cg, pids, (int)ARRAY_LEN(pids));
    for (int i = 0; i < n && sb->init_pidfd < 0; i++)
        if (cmdline_starts(pids[i], "runtime-init") && (sb->init_pidfd = live_pidfd(pids[i])) >= 0)
            sb->init_pid = pids[i];
    for (int i = 0; i < n && sb->init_pidfd >= 0 && sb->boot_pidfd < 0; i++)
        if (cmdline_starts(pids[i], "runsc-sandbox") && parent_of(pids[i]) == sb->init_pid)
            sb->boot_pidfd = live_pidfd(pids[i]);
    return sb->init_pidfd >= 0 && sb->boot_pidfd >= 0 ? 0 : -ENOENT;
}

/* ---- the driver's calls ---- */

static void gvisor_free(struct sandbox *sb)
{
    if (sb && sb->boot_pidfd >= 0) close(sb->boot_pidfd);
    ns_free(sb);
}

/* The agent's first words on its stdout: AGENT_READY once gVisor's pids.max holds the
 * sandbox's limit, or why not (src/sandbox/agent/agent.c). No program runs before this. */
static int read_agent_outcome(int fd, err_t *err)
{
    char said[32];
    size_t got = 0, want = strlen(AGENT_READY);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (got < want && poll(&p, 1, RUNSC_TIMEOUT_MS) == 1) {
        ssize_t n = read(fd, said + got, want - got);
        if (n <= 0) break;
        got += (size_t)n;
    }
    said[got] = '\0';
    if (strcmp(said, AGENT_READY) == 0) return 0;
    if (got < sizeof said - 1) { /* the rest of why not */
        ssize_t n = p.revents ? read(fd, said + got, sizeof said - 1 - got) : 0;
        said[got + (n > 0 ? (size_t)n : 0)] = '\0';
    }
    return err_set(err, -EIO, "the sandbox's agent could not set gVisor's pids limit: %s",
                   got ? said : "it said nothing");
}

/* The shim's socket, STATE/sandboxes/<id>/shim.sock; false when the path is too long. */
static bool shim_address(const struct sandbox *sb, struct sockaddr_un *a)
{
    *a = (struct sockaddr_un){.sun_family = AF_UNIX};
    return snprintf(a->sun_path, sizeof a->sun_path, "%s/shim.sock", sb->dir) <
           (int)sizeof a->sun_path;
}

/* The image of a hibernated sandbox (suffix "" or ".new", while it is written). */
static void image_path(const struct sandbox *sb, const char *suffix, char *out, size_t n)
{
    snprintf(out, n, "%s/%s%s", sb->dir, GVISOR_IMAGE, suffix);
}

/* The shim's listening socket (root's only). */
static int shim_listen(const struct sandbox *sb, err_t *err)
{
    struct sockaddr_un a;
    if (!shim_address(sb, &a))
        return err_set(err, -ENAMETOOLONG, "the state dir's path is too long for a socket");
    unlink(a.sun_path);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    int r = fd < 0 ? -errno : 0;
    mode_t old = umask(077);
    if (r == 0 && (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 64) < 0)) r = -errno;
    umask(old);
    if (r < 0) {
        if (fd >= 0) close(fd);
        return err_set(err, r, "cannot listen on %s: %s", a.sun_path, strerror(-r));
    }
    return fd;
}

/* Starts the shim (agent/shim.c) in the holder's namespaces and the sandbox's cgroup,
 * with its descriptors at 3 (listening), 4 to 7 (the agent's pipes: agent_fds) and 8
 * (the sentry's pidfd), as the sandbox's root's host uid with no capability, no_new_privs
 * and the sandbox's seccomp filter: it needs no privilege. */
static int start_shim(struct sandbox *sb, const int agent_fds[4], err_t *err)
{
    int listen_fd = shim_listen(sb, err);
    if (listen_fd < 0) return listen_fd;
    int cg_fds[8], ncg = cgroup_procs_fds(sb->cg, cg_fds, 8);
    pid_t pid = ncg < 0 ? -1 : fork();
    if (pid == 0) {
        if (setns(sb->init_pidfd, GVISOR_ENTER) < 0) _exit(125);
        /* The keeper's child, not this one's: an orphan is reparented to the reaper of its
         * parent's pid namespace, the host's init, and a holder's end (its namespace's)
         * waits until every task in it is reaped, by whoever that is. */
        pid_t child = (pid_t)syscall(SYS_clone, CLONE_PARENT | SIGCHLD, 0, NULL, NULL, 0);
        if (child != 0) _exit(child < 0 ? 126 : 0);
        cgroup_attach_fds(cg_fds, ncg, 0);
        setpriority(PRIO_PROCESS, 0, 0); /* the keeper's niceness is not the sandbox's */
        int null = open("/dev/null", O_RDWR);
        for (int i = 0; i < 3; i++)
            dup2(null, i);
        uid_t uid = ns_host_uid(sb, 0);
        err_t ignored = {0};
        for (int cap = 0; cap < 64; cap++)
            if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL) _exit(124);
        if (setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 ||
            setresuid(uid, uid, uid) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
            confine_sandbox_seccomp(&ignored) < 0)
            _exit(124);
        gvisor_exec_shim((int[GVISOR_SHIM_FDS]){listen_fd, agent_fds[0], agent_fds[1], agent_fds[2],
                                                agent_fds[3], sb->boot_pidfd});
        _exit(127);
    }
    for (int i = 0; i < ncg; i++)
        close(cg_fds[i]);
    close(listen_fd);
    if (pid < 0) return err_set(err, -EIO, "cannot start the sandbox's shim");
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return err_set(err, -EIO, "cannot start the sandbox's shim (status %d)", st);
    return 0;
}

static void close_all(int *fds, int n)
{
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0) close(fds[i]);
}

/* The sandbox's cgroup limits; while booting, with no CPU quota. gVisor's boot is
 * runtime's work, done before any program of the sandbox's runs (the agent starts none
 * until it is ready): throttled to a sandbox's one CPU, runsc's start took 10 to 30 ms
 * longer (docs/gvisor.md). Its CPU time is the sandbox's all the same. */
static int set_limits(struct sandbox *sb, bool booting, err_t *err)
{
    struct cgroup_limits lim = ns_limits(&sb->spec, true);
    if (booting) lim.cpu_milli = 0;
    return cgroup_set_limits(sb->cg, &lim, err);
}

/* `runsc run` with the agent's stdin and stdout on two pipes whose other ends go to the
 * shim (it keeps the agent's ends too, for a restore). */
static int start_runsc(struct sandbox *sb, err_t *err)
{
    char bundle[700];
    snprintf(bundle, sizeof bundle, "--bundle=%s/bundle", sb->dir);
    int in[2] = {-1, -1}, out[2] = {-1, -1};
    int r = write_bundle(sb, err);
    if (r == 0) r = set_limits(sb, true, err);
    if (r == 0 && (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0))
        r = err_set(err, errno, "pipe: %s", strerror(errno));
    /* run --detach: create and start in one runsc, which returns once it has started. */
    if (r == 0)
        r = gvisor_runsc(sb, (const char *[]){"run", "--detach", bundle, sb->spec.id, NULL}, in[0],
                         out[1], err);
    if (r == 0) r = read_agent_outcome(out[0], err);
    if (r == 0) r = set_limits(sb, false, err);
    if (r == 0 && find_processes(sb) < 0)
        r = err_set(err, -ESRCH, "runsc started, but its sandbox process is not running");
    if (r == 0) r = start_shim(sb, (int[4]){in[1], out[0], in[0], out[1]}, err);
    close_all(in, 2);
    close_all(out, 2);
    return r;
}

static int gvisor_create(const struct sandbox_host *host, const struct sandbox_spec *spec,
                         bool reuse_workspace, struct sandbox **out, err_t *err)
{
    err_t why = {0};
    if (sandbox_gvisor_available(&why) < 0) return err_set(err, why.code, "%s", why.msg);
    struct sandbox *sb = NULL;
    int r = ns_build(host, spec, reuse_workspace, true, &sb, err);
    if (r < 0) return r;
    /* What a sandbox killed whole (a host restart, systemctl kill) left: runsc's record of
     * its container, which would refuse the id, and an image, which a new build has
     * nothing to restore into. */
    static const char *const leftovers[] = {"runsc", GVISOR_IMAGE, GVISOR_SERVERS};
    for (size_t i = 0; i < ARRAY_LEN(leftovers); i++) {
        char path[700];
        snprintf(path, sizeof path, "%s/%s", sb->dir, leftovers[i]);
        ns_remove_tree(path);
    }
    r = start_runsc(sb, err);
    if (r < 0) {
        err_t ignored = {0};
        ns_stop(sb, &ignored);
        if (!reuse_workspace) ns_sweep(host, spec->id);
        gvisor_free(sb);
        return r;
    }
    *out = sb;
    return 0;
}

static int shim_connect(const struct sandbox *sb);
static int gvisor_stop(struct sandbox *sb, err_t *err);

static int gvisor_adopt(const struct sandbox_host *host, const struct sandbox_spec *spec,
                        struct sandbox **out, err_t *err)
{
    struct sandbox *sb = ns_sandbox_alloc(host, spec, true);
    if (!sb) return err_set(err, -ENOMEM, "out of memory");
    char cgname[64];
    sandbox_cgroup_name(host, spec->id, cgname, sizeof cgname);
    int r = cgroup_open(cgname, &sb->cg, err);
    bool hibernated = false;
    if (r == 0 && find_processes(sb) < 0) {
        /* Hibernated: only the holder and the shim run, and its image is there. */
        char image[700];
        image_path(sb, "", image, sizeof image);
        hibernated = sb->init_pidfd >= 0 && sb->boot_pidfd < 0 && access(image, F_OK) == 0;
        if (!hibernated) r = err_set(err, -ENOENT, "sandbox %s is no longer running", spec->id);
    }
    /* A keeper that ended between a start's boot and its quota left none: best effort,
     * as a cgroup that will not take it keeps the sandbox running all the same. */
    err_t ignored = {0};
    if (r == 0) set_limits(sb, false, &ignored);
    int shim = r == 0 ? shim_connect(sb) : -1;
    if (r == 0 && shim < 0) { /* no way in: what runs is ended, and it is built again */
        gvisor_stop(sb, &ignored);
        r = err_set(err, -ENOENT, "sandbox %s's shim is gone", spec->id);
    }
    if (shim >= 0) close(shim);
    if (r < 0) {
        gvisor_free(sb);
        return r;
    }
    *out = sb;
    return hibernated;
}

static int gvisor_watch_fd(struct sandbox *sb)
{
    return sb->boot_pidfd < 0 ? -1 : fcntl(sb->boot_pidfd, F_DUPFD_CLOEXEC, 3);
}

/* ---- exec: through the shim, to the agent ---- */

/* The exec request the shim forwards to the agent as is (agent/frame.h). */
static int spawn_request(const struct sandbox_exec *ex, char *buf, size_t cap, size_t *len)
{
    struct frame_spawn s = {.timeout_ms = ex->timeout_ms};
    size_t off = sizeof s;
    const char *const *lists[] = {ex->argv, ex->envp};
    uint32_t *counts[] = {&s.argc, &s.envc};
    size_t n = strlen(ex->cwd) + 1;
    if (off + n > cap) return -E2BIG;
    memcpy(buf + off, ex->cwd, n);
    off += n;
    for (int l = 0; l < 2; l++)
        for (const char *const *v = lists[l]; v && *v; v++, (*counts[l])++) {
            n = strlen(*v) + 1;
            if (off + n > cap) return -E2BIG;
            memcpy(buf + off, *v, n);
            off += n;
        }
    memcpy(buf, &s, sizeof s);
    *len = off;
    return 0;
}

/* A connection to the sandbox's shim, which answers within SHIM_ANSWER_MS. */
#define SHIM_ANSWER_MS 10000
static int shim_connect(const struct sandbox *sb)
{
    struct sockaddr_un a;
    if (!shim_address(sb, &a)) return -ENAMETOOLONG;
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    struct timeval tv = {.tv_sec = SHIM_ANSWER_MS / 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    return fd;
}

/* The shim's answer: an int32 (0 or -errno) and, on 0, nfds descriptors. */
static int shim_answer(int fd, int *fds, int nfds)
{
    int32_t status = -EIO;
    struct iovec iov = {.iov_base = &status, .iov_len = sizeof status};
    char ctl[CMSG_SPACE(4 * sizeof(int))];
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
    ssize_t n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0) return errno == EAGAIN ? -ETIMEDOUT : -errno;
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    int got =
        c && c->cmsg_type == SCM_RIGHTS ? (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int)) : 0;
    int *passed = got ? (int *)CMSG_DATA(c) : NULL;
    if (n != (ssize_t)sizeof status || (status == 0 && got != nfds)) status = -EPROTO;
    for (int i = 0; i < got; i++)
        if (status == 0)
            fds[i] = passed[i];
        else
            close(passed[i]);
    return status;
}

/* Asks the shim kind (enum shim_request) with payload and nfds descriptors, and takes
 * its answer, with nanswer descriptors when it is 0: the answer, or -errno. */
int gvisor_shim_call(struct sandbox *sb, uint32_t kind, const void *payload, size_t len,
                     const int *fds, int nfds, int *answer, int nanswer)
{
    int conn = shim_connect(sb);
    if (conn < 0) return conn;
    struct iovec iov[2] = {{.iov_base = &kind, .iov_len = sizeof kind},
                           {.iov_base = (void *)payload, .iov_len = len}};
    char ctl[CMSG_SPACE(4 * sizeof(int))] = {0};
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = len ? 2 : 1};
    if (nfds > 0 && nfds <= 4) {
        msg.msg_control = ctl;
        msg.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        *c = (struct cmsghdr){.cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int)),
                              .cmsg_level = SOL_SOCKET,
                              .cmsg_type = SCM_RIGHTS};
        memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
    }
    int r = sendmsg(conn, &msg, MSG_NOSIGNAL) < 0 ? -errno : shim_answer(conn, answer, nanswer);
    close(conn);
    return r;
}

/* Tells the shim kind (SHIM_HIBERNATE, SHIM_WATCH with fd): 0 or -errno. */
int gvisor_shim_tell(struct sandbox *sb, uint32_t kind, int fd)
{
    return gvisor_shim_call(sb, kind, NULL, 0, &fd, fd >= 0, NULL, 0);
}

static int gvisor_exec(struct sandbox *sb, const struct sandbox_exec *ex, int fds[4], err_t *err)
{
    int r = ex->serve ? gvisor_serve(sb, ex, fds, err) : -EILSEQ;
    if (r != -EILSEQ) return r;
    static char req[FRAME_MAX];
    size_t len = 0;
    r = spawn_request(ex, req, sizeof req, &len);
    if (r < 0) return err_set(err, r, "the command and its environment are too long");
    r = gvisor_shim_call(sb, SHIM_EXEC, req, len, NULL, 0, fds, 4);
    if (r < 0) return err_set(err, r, "the sandbox's shim could not start it: %s", strerror(-r));
    return 0;
}

/* ---- hibernation: runsc checkpoint and restore ---- */

/* The bytes the files of dir take on disk. */
uint64_t gvisor_dir_bytes(const char *dir)
{
    uint64_t total = 0;
    DIR *d = opendir(dir);
    struct stat st;
    for (struct dirent *de; d && (de = readdir(d));)
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
            total += (uint64_t)st.st_blocks * 512;
    if (d) closedir(d);
    return total;
}

static bool pidfd_ended(int pidfd, int wait_ms)
{
    struct pollfd p = {.fd = pidfd, .events = POLLIN};
    int n;
    while ((n = poll(&p, 1, wait_ms)) < 0 && errno == EINTR) {
    }
    return n != 0;
}

/* runsc's containers of a sandbox whose sentry has ended: their state goes, so that a
 * restore or a run can take the ids again (runsc restores no container it knows). */
void gvisor_forget_container(struct sandbox *sb)
{
    err_t ignored = {0};
    gvisor_servers_delete(sb);
    gvisor_runsc(sb, (const char *[]){"delete", "--force", sb->spec.id, NULL}, -1, -1, &ignored);
    if (sb->boot_pidfd >= 0) close(sb->boot_pidfd);
    sb->boot_pidfd = -1;
}

/* The agent and its programs are checkpointed with gVisor's whole kernel; the shim keeps
 * their pipes meanwhile, and what the daemon writes to them waits there. */
static int gvisor_hibernate(struct sandbox *sb, uint64_t *image_bytes, err_t *err)
{
    char tmp[700], image[700], flag[720];
    image_path(sb, ".new", tmp, sizeof tmp);
    image_path(sb, "", image, sizeof image);
    snprintf(flag, sizeof flag, "--image-path=%s", tmp);
    ns_remove_tree(tmp);
    ns_remove_tree(image);
    *image_bytes = 0;
    if (mkdir(tmp, 0700) < 0)
        return err_set(err, errno, "cannot make %s: %s", tmp, strerror(errno));
    int r = ns_freeze(sb, false, err);    /* a frozen sentry cannot write its image */
    if (r == 0) gvisor_servers_prune(sb); /* a restore would wait for those that ended */
    int told = r == 0 ? gvisor_shim_tell(sb, SHIM_HIBERNATE, -1) : 0;
    if (told < 0) r = err_set(err, told, "cannot reach the sandbox's shim: %s", strerror(-told));
    if (r == 0)
        r = gvisor_runsc(sb,
                         (const char *[]){"checkpoint", flag, "--compression=flate-best-speed",
                                          sb->spec.id, NULL},
                         -1, -1, err);
    /* The sentry ends after a checkpoint, and after most failed ones too. */
    bool ended = pidfd_ended(sb->boot_pidfd, r == 0 ? RUNSC_TIMEOUT_MS : 1000);
    if (r < 0 && !ended) { /* nothing lost: it stays paused */
        err_t ignored = {0};
        ns_remove_tree(tmp);
        if (told == 0) gvisor_shim_tell(sb, SHIM_WATCH, sb->boot_pidfd);
        ns_freeze(sb, true, &ignored);
        return r;
    }
    gvisor_forget_container(sb);
    if (r == 0 && rename(tmp, image) < 0)
        r = err_set(err, errno, "cannot keep the image: %s", strerror(errno));
    if (r < 0) { /* it ended without an image: the next wake starts it cold */
        ns_remove_tree(tmp);
        return 0;
    }
    *image_bytes = gvisor_dir_bytes(image);
    return 0;
}

int gvisor_shim_adopt(struct sandbox *sb, uint32_t id, int fds[4], err_t *err)
{
    int r = gvisor_shim_call(sb, SHIM_ADOPT, &id, sizeof id, NULL, 0, fds, 4);
    return r < 0 ? err_set(err, r, "the sandbox's shim cannot take the program: %s", strerror(-r))
                 : 0;
}

/* The agent's ends of its stdin and stdout, which the shim kept. */
static int shim_agent_ends(struct sandbox *sb, int fds[2], err_t *err)
{
    int r = gvisor_shim_call(sb, SHIM_AGENT_ENDS, NULL, 0, NULL, 0, fds, 2);
    return r < 0 ? err_set(err, r, "the sandbox's shim kept no pipes: %s", strerror(-r)) : 0;
}

int gvisor_restore_image(struct sandbox *sb, const char *image, bool any_spec, err_t *err)
{
    char bundle[700], flag[720];
    snprintf(bundle, sizeof bundle, "--bundle=%s/bundle", sb->dir);
    snprintf(flag, sizeof flag, "--image-path=%s", image);
    /* Another sandbox's image (a template) was checkpointed under other uid mappings. */
    const char *words[] = {"--restore-spec-validation=warning",
                           "restore",
                           "--detach",
                           bundle,
                           flag,
                           sb->spec.id,
                           NULL};
    struct stat st;
    if (stat(image, &st) < 0) return err_set(err, -ENOENT, "it has no image");
    int ends[2] = {-1, -1};
    struct runsc_job root;
    int r = gvisor_net_readdress(sb, err);
    if (r == 0) r = shim_agent_ends(sb, ends, err);
    if (r == 0)
        r = gvisor_runsc_start(sb, any_spec ? words : words + 1,
                               (const int[3]){ends[0], ends[1], -1}, &root, err);
    if (r == 0) r = gvisor_servers_restore(sb, flag, any_spec, &root, err);
    close_all(ends, 2);
    if (r == 0 && find_processes(sb) < 0)
        r = err_set(err, -ESRCH, "runsc restored it, but its sandbox process is not running");
    int told = r == 0 ? gvisor_shim_tell(sb, SHIM_WATCH, sb->boot_pidfd) : 0;
    if (told < 0) r = err_set(err, told, "cannot reach the sandbox's shim: %s", strerror(-told));
    return r;
}

/* The shim's grace after SIGTERM, in which it reports each program still running as
 * killed (agent/shim.c); it needs a few milliseconds. */
#define SHIM_STOP_MS 1000

/* Ends the sandbox's shim and reaps it when it is the keeper's child (start_shim); one
 * an earlier keeper started is its orphan, the host init's to reap. */
static void kill_shim(struct sandbox *sb)
{
    pid_t pids[512];
    int n = cgroup_pids(sb->cg, pids, (int)ARRAY_LEN(pids));
    for (int i = 0; i < n; i++) {
        if (!cmdline_starts(pids[i], "runtime-shim")) continue;
        int pidfd = (int)syscall(SYS_pidfd_open, pids[i], 0);
        if (pidfd >= 0 && kill(pids[i], SIGTERM) == 0) pidfd_ended(pidfd, SHIM_STOP_MS);
        if (pidfd >= 0) close(pidfd);
        if (kill(pids[i], SIGKILL) == 0 || errno == ESRCH)
            while (waitpid(pids[i], NULL, 0) < 0 && errno == EINTR) {
            }
    }
}

int gvisor_start_again(struct sandbox *sb, err_t *err)
{
    if (sb->boot_pidfd >= 0) pidfd_ended(sb->boot_pidfd, 0);
    gvisor_forget_container(sb);
    gvisor_servers_forget(sb);
    kill_shim(sb);
    /* A failed restore may have taken the inner veth's address and route already. */
    int r = gvisor_net_readdress(sb, err);
    return r < 0 ? r : start_runsc(sb, err);
}

static int gvisor_restore(struct sandbox *sb, enum proto_from *from, err_t *err)
{
    char image[700];
    image_path(sb, "", image, sizeof image);
    err_t why = {0};
    *from = PROTO_FROM_IMAGE;
    int r = gvisor_restore_image(sb, image, false, &why);
    ns_remove_tree(image);
    if (r == 0) return 0;
    /* Cold: what its memory held is lost; its workspace and /tmp are not. */
    *from = PROTO_FROM_COLD;
    r = gvisor_start_again(sb, err);
    if (r == 0) err_set(err, 0, "%s", why.msg);
    return r;
}

/* Its stored bytes are its image's too, while it is hibernated: what it costs then. */
static int gvisor_stats(struct sandbox *sb, struct sandbox_stats *st)
{
    char image[700];
    image_path(sb, "", image, sizeof image);
    int r = ns_stats(sb, st);
    st->disk_bytes += gvisor_dir_bytes(image);
    return r;
}

/* ---- stop, destroy, sweep ---- */

static int gvisor_stop(struct sandbox *sb, err_t *err)
{
    cgroup_freeze(sb->cg, false, NULL); /* a frozen task takes its SIGKILL once thawed */
    kill_shim(sb);            /* and reaped first: the holder's end waits for it (start_shim) */
    int r = ns_stop(sb, err); /* the holder's end is its pid namespace's: runsc's too */
    if (sb->boot_pidfd >= 0) {
        struct pollfd p = {.fd = sb->boot_pidfd, .events = POLLIN};
        while (poll(&p, 1, 5000) < 0 && errno == EINTR) {
        }
    }
    gvisor_remove_state(sb->dir);
    return r;
}

static int gvisor_destroy(struct sandbox *sb, err_t *err)
{
    int r = gvisor_stop(sb, err);
    int s = ns_sweep(sb->host, sb->spec.id);
    if (r == 0 && s < 0) r = err_set(err, s, "cannot remove %s: %s", sb->dir, strerror(-s));
    return r;
}

const struct sandbox_driver sandbox_gvisor_driver = {
    .name = "gvisor",
    .create = gvisor_create,
    .adopt = gvisor_adopt,
    .destroy = gvisor_destroy,
    .stop = gvisor_stop,
    .exec = gvisor_exec,
    .open_file = ns_open_file,
    .rename_file = ns_rename_file,
    .file_op = ns_file_op,
    .net_sockets = ns_net_sockets,
    .watch_fd = gvisor_watch_fd,
    .freeze = ns_freeze,
    .hibernate = gvisor_hibernate,
    .restore = gvisor_restore,
    .template_save = gvisor_template_save,
    .template_restore = gvisor_template_restore,
    .stats = gvisor_stats,
    .sweep = ns_sweep,
    .free = gvisor_free,
};
