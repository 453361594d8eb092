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
 * Programs start with `runsc exec` given a process spec (never their argv on runsc's
 * command line: the host's process table shows runsc only), and file calls run the
 * ns driver's helpers on the host side of the gofer's directories (exec.c: the root
 * is dir/root in the holder's mount namespace), as the sandbox user's host uid,
 * which is what gVisor's user namespace maps its uid 1000 to. */
#include <errno.h>
#include <fcntl.h>
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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../confine/confine.h"
#include "ns_impl.h"

#define GVISOR_ENTER (CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS)
#define RUNSC_TIMEOUT_MS 30000
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

/* The last line runsc wrote on stderr, for an error message. */
static void last_line(int fd, char *out, size_t n)
{
    char buf[4096];
    ssize_t got = pread(fd, buf, sizeof buf - 1, 0);
    buf[got > 0 ? got : 0] = '\0';
    char *end = buf + strlen(buf);
    while (end > buf && (end[-1] == '\n' || end[-1] == ' '))
        *--end = '\0';
    char *line = strrchr(buf, '\n');
    snprintf(out, n, "%s", line ? line + 1 : buf);
}

/* Runs runsc with words inside the holder's namespaces and the sandbox's cgroup (what
 * it starts stays there) and waits for it: the keeper's forked child joins them and
 * forks again, since only a child enters a pid namespace. runsc's stdout is out_fd (the
 * container's, for run); its stderr goes to an unlinked file, not a pipe: the processes
 * it leaves running inherit it. */
static int runsc_in_sandbox(struct sandbox *sb, const char *const *words, int out_fd, err_t *err)
{
    struct runsc_argv a;
    runsc_argv(&a, sb, words);
    int errfd = open(sb->dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (errfd < 0)
        return err_set(err, errno, "cannot make a file in %s: %s", sb->dir, strerror(errno));
    int cg_fds[8], ncg = cgroup_procs_fds(sb->cg, cg_fds, 8);
    if (ncg < 0) {
        close(errfd);
        return err_set(err, ncg, "cannot open the sandbox's cgroup");
    }
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (setns(sb->init_pidfd, GVISOR_ENTER) < 0) _exit(125);
        pid_t child = fork();
        if (child == 0) {
            cgroup_attach_fds(cg_fds, ncg, 0);
            dup2(null, 0);
            dup2(out_fd >= 0 ? out_fd : null, 1);
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
        close(errfd);
        return err_set(err, errno, "fork: %s", strerror(errno));
    }
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    struct pollfd p = {.fd = pidfd, .events = POLLIN};
    int n = pidfd >= 0 ? poll(&p, 1, RUNSC_TIMEOUT_MS) : 1;
    if (n == 0) kill(pid, SIGKILL); /* runsc's own children die with the holder */
    if (pidfd >= 0) close(pidfd);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    char why[512];
    last_line(errfd, why, sizeof why);
    close(errfd);
    if (n == 0) return err_set(err, -ETIMEDOUT, "runsc %s timed out", words[0]);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return err_set(err, -EIO, "runsc %s failed: %s", words[0], why[0] ? why : "no message");
    return 0;
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

/* No capability at all, for the init and every program. */
static json_t *no_capabilities(void)
{
    return json_pack("{s:[],s:[],s:[],s:[],s:[]}", "bounding", "effective", "inheritable",
                     "permitted", "ambient");
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
static json_t *bundle_json(const struct sandbox *sb)
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
                  GVISOR_INIT_PATH, pids, "env", "PATH=/usr/local/bin:/usr/bin:/bin", "cwd", "/",
                  "capabilities", no_capabilities(), "noNewPrivileges", 1);
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
    json_t *spec = bundle_json(sb);
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

/* A pidfd of pid unless it is exiting (then readable already); -1 otherwise. */
static int live_pidfd(pid_t pid)
{
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (fd >= 0 && poll(&p, 1, 0) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
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

/* The init's first words on its stdout: "ok" once gVisor's pids.max holds the sandbox's
 * limit, or why not (src/sandbox/init/runtime-init.c). No program runs before this. */
static int read_init_outcome(int fd, err_t *err)
{
    char said[32];
    size_t got = 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (got < 2 && poll(&p, 1, RUNSC_TIMEOUT_MS) == 1) {
        ssize_t n = read(fd, said + got, sizeof said - 1 - got);
        if (n <= 0) break;
        got += (size_t)n;
    }
    said[got] = '\0';
    if (strcmp(said, "ok") == 0) return 0;
    return err_set(err, -EIO, "the sandbox's init could not set gVisor's pids limit: %s",
                   got ? said : "it said nothing");
}

static int start_runsc(struct sandbox *sb, err_t *err)
{
    char bundle[700];
    snprintf(bundle, sizeof bundle, "--bundle=%s/bundle", sb->dir);
    int out[2] = {-1, -1};
    int r = write_bundle(sb, err);
    if (r == 0 && pipe2(out, O_CLOEXEC) < 0) r = err_set(err, errno, "pipe: %s", strerror(errno));
    /* run --detach: create and start in one runsc, which returns once it has started. */
    if (r == 0)
        r = runsc_in_sandbox(sb, (const char *[]){"run", "--detach", bundle, sb->spec.id, NULL},
                             out[1], err);
    if (out[1] >= 0) close(out[1]);
    if (r == 0) r = read_init_outcome(out[0], err);
    if (out[0] >= 0) close(out[0]);
    if (r == 0 && find_processes(sb) < 0)
        r = err_set(err, -ESRCH, "runsc started, but its sandbox process is not running");
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

static int gvisor_adopt(const struct sandbox_host *host, const struct sandbox_spec *spec,
                        struct sandbox **out, err_t *err)
{
    struct sandbox *sb = ns_sandbox_alloc(host, spec, true);
    if (!sb) return err_set(err, -ENOMEM, "out of memory");
    char cgname[64];
    sandbox_cgroup_name(host, spec->id, cgname, sizeof cgname);
    int r = cgroup_open(cgname, &sb->cg, err);
    if (r == 0 && find_processes(sb) < 0)
        r = err_set(err, -ENOENT, "sandbox %s is no longer running", spec->id);
    if (r < 0) {
        gvisor_free(sb);
        return r;
    }
    *out = sb;
    return 0;
}

static int gvisor_watch_fd(struct sandbox *sb)
{
    return fcntl(sb->boot_pidfd, F_DUPFD_CLOEXEC, 3);
}

/* ---- exec: `runsc exec` with a process spec ---- */

struct exec_ctx {
    char pid_file[700]; /* where runsc exec writes the program's pid inside */
};

static void exec_prepare(struct sandbox *sb, void *ctx)
{
    struct exec_ctx *c = ctx;
    _Static_assert(sizeof *c <= EXEC_CTX_SIZE, "exec_ctx fits the monitor's scratch");
    snprintf(c->pid_file, sizeof c->pid_file, "%s/exec-%d.pid", sb->dir, (int)getpid());
}

/* Is path (inside the sandbox) an executable regular file? Resolved within the root,
 * as exec'ing it inside would. */
static bool executable_in(int root, const char *path)
{
    int fd = ns_open_in_root(root, path, O_PATH, 0);
    struct stat st;
    bool ok = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111);
    if (fd >= 0) close(fd);
    return ok;
}

/* argv[0] as runsc needs it (a path inside), looked up in the sandbox's PATH as
 * exec.c's exec_search does for the ns driver; 0 or an errno. */
static int resolve_program(int root, const struct sandbox_exec *ex, char *out, size_t n)
{
    const char *file = ex->argv[0];
    if (strchr(file, '/')) {
        if (file[0] == '/')
            snprintf(out, n, "%s", file);
        else
            snprintf(out, n, "%s/%s", ex->cwd, file);
        return executable_in(root, out) ? 0 : ENOENT;
    }
    const char *path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *const *e = ex->envp; e && *e; e++)
        if (strncmp(*e, "PATH=", 5) == 0) path = *e + 5;
    while (*path) {
        size_t len = strcspn(path, ":");
        snprintf(out, n, "%.*s/%s", (int)len, path, file);
        if (out[0] == '/' && executable_in(root, out)) return 0;
        path += len + (path[len] == ':');
    }
    return ENOENT;
}

static json_t *strings_json(const char *const *v, const char *first)
{
    json_t *a = json_array();
    if (first) json_array_append_new(a, json_string(first));
    for (; v && *v; v++)
        json_array_append_new(a, json_string(*v));
    return a;
}

/* The process spec for runsc exec, in a memfd the child passes by its /proc path. */
static int process_spec(const struct sandbox_exec *ex, const char *program)
{
    json_t *spec = json_pack("{s:{s:i,s:i},s:o,s:o,s:s,s:o,s:b}", "user", "uid", SANDBOX_USER_UID,
                             "gid", SANDBOX_USER_UID, "args", strings_json(ex->argv + 1, program),
                             "env", strings_json(ex->envp, NULL), "cwd", ex->cwd, "capabilities",
                             no_capabilities(), "noNewPrivileges", 1);
    char *text = spec ? json_dumps(spec, JSON_COMPACT) : NULL;
    json_decref(spec);
    int fd = text ? memfd_create("process.json", 0) : -1;
    int r = fd < 0 ? -ENOMEM : write_all(fd, text, strlen(text));
    free(text);
    if (r < 0 && fd >= 0) close(fd);
    return r < 0 ? r : fd;
}

static int check_cwd(int root, const char *cwd)
{
    int fd = ns_open_in_root(root, cwd, O_PATH | O_DIRECTORY, 0);
    if (fd < 0) return -fd;
    close(fd);
    return 0;
}

/* In the monitor's child, inside the holder's namespaces: checks what `runsc exec`
 * would only report on the program's stderr (no such program or directory), then
 * becomes `runsc exec`. */
static void __attribute__((noreturn)) exec_run(struct sandbox *sb, const struct sandbox_exec *ex,
                                               void *ctx, int stdio[3], int go, int errfd)
{
    const struct exec_ctx *c = ctx;
    char b, program[4096], root_path[700], process[64];
    if (read(go, &b, 1) != 1) _exit(126);
    snprintf(root_path, sizeof root_path, "%s/root", sb->dir);
    int root = open(root_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    int e = root < 0 ? errno : check_cwd(root, ex->cwd);
    if (e == 0) e = resolve_program(root, ex, program, sizeof program);
    int spec = e == 0 ? process_spec(ex, program) : -1;
    if (e == 0 && spec < 0) e = -spec;
    for (int i = 0; e == 0 && i < 3; i++)
        if (dup2(stdio[i], i) < 0) e = errno;
    if (e == 0 && setsid() < 0) e = errno;
    if (e == 0) {
        snprintf(process, sizeof process, "--process=/proc/self/fd/%d", spec);
        char pid_file[720];
        snprintf(pid_file, sizeof pid_file, "--internal-pid-file=%s", c->pid_file);
        struct runsc_argv a;
        runsc_argv(&a, sb, (const char *[]){"exec", process, pid_file, sb->spec.id, NULL});
        signal(SIGPIPE, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execve(RUNSC_PATH, (char *const *)a.v, (char *const[]){"PATH=/usr/bin:/bin", NULL});
        e = errno;
    }
    write_all(errfd, &e, sizeof e);
    _exit(127);
}

/* Runs runsc with words from the monitor (already in the holder's namespaces) and
 * waits: only at a timeout or a stop, so its few tens of milliseconds are no one's. */
static void runsc_from_monitor(struct sandbox *sb, const char *const *words)
{
    struct runsc_argv a;
    runsc_argv(&a, sb, words);
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        for (int i = 0; i < 3; i++)
            dup2(null, i);
        execve(RUNSC_PATH, (char *const *)a.v, (char *const[]){"PATH=/usr/bin:/bin", NULL});
        _exit(127);
    }
    while (pid > 0 && waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
}

/* Killing `runsc exec` would leave the program running inside: it is killed there,
 * its process group first (it leads one: runsc exec makes it a session leader), then
 * itself, and then runsc exec. */
static void exec_stop(struct sandbox *sb, void *ctx, pid_t child)
{
    const struct exec_ctx *c = ctx;
    char buf[32] = "";
    long inner = read_file_small(c->pid_file, buf, sizeof buf) >= 0 ? strtol(buf, NULL, 10) : 0;
    if (inner > 1) {
        char group[64], pid[32];
        snprintf(group, sizeof group, "-%ld", inner);
        snprintf(pid, sizeof pid, "--pid=%ld", inner);
        const char *kill_argv[] = {"kill", "-KILL", "--", group, NULL};
        struct sandbox_exec kill_ex = {
            .argv = kill_argv, .envp = (const char *[]){NULL}, .cwd = "/"};
        int spec = process_spec(&kill_ex, "/usr/bin/kill");
        if (spec >= 0) {
            char process[64];
            snprintf(process, sizeof process, "--process=/proc/self/fd/%d", spec);
            runsc_from_monitor(sb, (const char *[]){"exec", process, sb->spec.id, NULL});
            close(spec);
        }
        runsc_from_monitor(sb, (const char *[]){"kill", pid, sb->spec.id, "KILL", NULL});
    }
    kill(child, SIGKILL);
}

static void exec_ended(struct sandbox *sb, void *ctx)
{
    const struct exec_ctx *c = ctx;
    unlink(c->pid_file);
}

static int gvisor_exec(struct sandbox *sb, const struct sandbox_exec *ex, int fds[4], err_t *err)
{
    static const struct exec_way way = {.enter = GVISOR_ENTER,
                                        .run_while_moved = true,
                                        .prepare = exec_prepare,
                                        .run = exec_run,
                                        .stop = exec_stop,
                                        .ended = exec_ended};
    return sandbox_exec_with(sb, ex, &way, fds, err);
}

/* ---- stop, destroy, sweep ---- */

static int gvisor_stop(struct sandbox *sb, err_t *err)
{
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
    .stats = ns_stats,
    .sweep = ns_sweep,
    .free = gvisor_free,
};
