/* cgroup: the public interface. Everything that only walks directories (create,
 * attach, list, destroy, cgroup.procs) lives here and works the same on v1 and
 * v2; limits, freezing, counters and killing are per version (v1.c, v2.c). */
#include "cgroup_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CG_DESTROY_TIMEOUT_MS 500
#define CG_KILL_TIMEOUT_MS 1000

const char *const cg1_ctrl_names[CG_NCTRL] = {
    [CG_MEMORY] = "memory", [CG_CPU] = "cpu",         [CG_CPUACCT] = "cpuacct",
    [CG_PIDS] = "pids",     [CG_FREEZER] = "freezer",
};

/* Defaults; only tests change them (cgi_set_root). */
static char cg_root[CG_ROOT_MAX] = "/sys/fs/cgroup";
static int cg_forced_version;
static unsigned cg_v2_ctrls = CG2_ALL;
static int cg_detected; /* 0 until detected; read and written atomically */

void cgi_set_root(const char *root, int version, unsigned v2_ctrls)
{
    if (!root || str_copy(cg_root, sizeof cg_root, root) < 0) {
        str_copy(cg_root, sizeof cg_root, "/sys/fs/cgroup");
        cg_forced_version = 0;
        cg_v2_ctrls = CG2_ALL;
        return;
    }
    cg_forced_version = version;
    cg_v2_ctrls = v2_ctrls;
}

const char *cgi_root(void)
{
    return cg_root;
}

unsigned cgi_v2_ctrls(void)
{
    return cg_v2_ctrls;
}

/* ---- small file helpers ------------------------------------------------ */

int cgi_path(char *out, const char *dir, const char *file)
{
    int n = snprintf(out, CG_PATH_MAX, "%s/%s", dir, file);
    return n < 0 || n >= CG_PATH_MAX ? -ENAMETOOLONG : 0;
}

int cgi_write(const char *dir, const char *file, const char *text)
{
    char path[CG_PATH_MAX];
    int r = cgi_path(path, dir, file);
    if (r < 0) return r;
    /* No O_CREAT: on cgroupfs a missing file means a missing controller. */
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    /* cgroup files take the whole value in one write() and report errors there. */
    ssize_t w;
    do {
        w = write(fd, text, strlen(text));
    } while (w < 0 && errno == EINTR);
    r = w < 0 ? -errno : 0;
    close(fd);
    return r;
}

static const char *write_hint(int r)
{
    switch (-r) {
    case ENOENT:
        return "the file is missing: is that controller mounted (v1) or enabled in the parent's "
               "cgroup.subtree_control (v2)?";
    case EACCES:
    case EPERM:
        return "this needs root with write access to the cgroup filesystem";
    case EBUSY:
        return "the kernel refused while the cgroup is in use (v2: the parent must hold no "
               "processes)";
    case EINVAL:
        return "the kernel rejected the value (out of range, or below current usage)";
    case ESRCH:
        return "the process is gone";
    default:
        return "check the cgroup filesystem";
    }
}

int cgi_write_err(const char *dir, const char *file, const char *text, err_t *err)
{
    int r = cgi_write(dir, file, text);
    if (r < 0)
        return err_set(err, r, "writing \"%s\" to %s/%s: %s; %s", text, dir, file, strerror(-r),
                       write_hint(r));
    return 0;
}

int cgi_read(const char *dir, const char *file, char *buf, size_t size)
{
    char path[CG_PATH_MAX];
    int r = cgi_path(path, dir, file);
    if (r < 0) return r;
    return read_file_small(path, buf, size);
}

int cgi_read_u64(const char *dir, const char *file, uint64_t *v)
{
    char buf[64], *end;
    int r = cgi_read(dir, file, buf, sizeof buf);
    if (r < 0) return r;
    errno = 0;
    unsigned long long x = strtoull(buf, &end, 10);
    if (errno || end == buf) return -EPROTO;
    *v = x;
    return 0;
}

int cgi_read_key_u64(const char *dir, const char *file, const char *key, uint64_t *v)
{
    char buf[2048];
    int r = cgi_read(dir, file, buf, sizeof buf);
    if (r < 0) return r;
    size_t klen = strlen(key);
    for (char *line = buf, *next; *line; line = next) {
        char *nl = strchr(line, '\n');
        next = nl ? nl + 1 : line + strlen(line);
        if (strncmp(line, key, klen) != 0 || line[klen] != ' ') continue;
        char *end;
        errno = 0;
        unsigned long long x = strtoull(line + klen + 1, &end, 10);
        if (errno || end == line + klen + 1) return -EPROTO;
        *v = x;
        return 0;
    }
    return -ENODATA;
}

bool cgi_exists(const char *dir, const char *file)
{
    char path[CG_PATH_MAX];
    return cgi_path(path, dir, file) == 0 && access(path, F_OK) == 0;
}

int cgi_poll(int (*cond)(struct cgroup *cg), struct cgroup *cg, unsigned timeout_ms)
{
    uint64_t deadline = now_ms() + timeout_ms;
    for (;;) {
        int r = cond(cg);
        if (r != 0) return r > 0 ? 0 : r;
        if (now_ms() >= deadline) return -ETIMEDOUT;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

/* ---- names and paths ---------------------------------------------------- */

static bool name_ok(const char *name)
{
    if (!name) return false;
    size_t n = strlen(name);
    if (n < 1 || n > CG_NAME_MAX) return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
    }
    return true;
}

const char *cgi_dir(const struct cgroup *cg, enum cg_ctrl c)
{
    return cg->version == 1 ? cg->dirs[c] : cg->dirs[0];
}

/* The runtime/ parent that holds controller i's cgroups ("" on v2). */
static int parent_dir(char *out, int version, int i)
{
    int n = version == 1
                ? snprintf(out, CG_PATH_MAX, "%s/%s/" CG_PARENT, cg_root, cg1_ctrl_names[i])
                : snprintf(out, CG_PATH_MAX, "%s/" CG_PARENT, cg_root);
    return n < 0 || n >= CG_PATH_MAX ? -ENAMETOOLONG : 0;
}

static int cg_init(struct cgroup *cg, const char *name, err_t *err)
{
    if (!name_ok(name))
        return err_set(err, -EINVAL,
                       "invalid cgroup name \"%.40s\": use 1 to %d characters from a-z, 0-9 "
                       "and -",
                       name ? name : "(null)", CG_NAME_MAX);
    int v = cgroup_version();
    if (v < 0)
        return err_set(err, v,
                       "no cgroup hierarchy found under %s: mount cgroup2 there, or the "
                       "v1 memory, cpu, cpuacct, pids and freezer hierarchies",
                       cg_root);
    memset(cg, 0, sizeof *cg);
    cg->version = v;
    str_copy(cg->name, sizeof cg->name, name);
    cg->ndirs = v == 1 ? CG_NCTRL : 1;
    for (int i = 0; i < cg->ndirs; i++) {
        char parent[CG_PATH_MAX];
        int r = parent_dir(parent, v, i);
        if (r == 0 && snprintf(cg->dirs[i], CG_PATH_MAX, "%s/%s", parent, name) >= CG_PATH_MAX)
            r = -ENAMETOOLONG;
        if (r < 0) return err_set(err, r, "cgroup path under %s is too long", cg_root);
    }
    return 0;
}

/* ---- version detection -------------------------------------------------- */

static int detect_version(void)
{
    struct statfs sf;
    if (statfs(cg_root, &sf) < 0) return -errno;
    /* v2 only when the mount root itself is cgroup2: a v1 host may also mount an
     * empty v2 tree at /sys/fs/cgroup/unified, which has no controllers. */
    if (sf.f_type == CGROUP2_SUPER_MAGIC) return 2;
    char path[CG_PATH_MAX];
    snprintf(path, sizeof path, "%s/memory", cg_root);
    if (statfs(path, &sf) == 0 && sf.f_type == CGROUP_SUPER_MAGIC) return 1;
    return -ENOENT;
}

int cgroup_version(void)
{
    if (cg_forced_version) return cg_forced_version;
    int v = __atomic_load_n(&cg_detected, __ATOMIC_ACQUIRE);
    if (v) return v;
    v = detect_version();
    if (v > 0) __atomic_store_n(&cg_detected, v, __ATOMIC_RELEASE);
    return v;
}

/* ---- create / open / free ---------------------------------------------- */

static void remove_created(struct cgroup *cg, const bool *created)
{
    for (int i = 0; i < cg->ndirs; i++)
        if (created[i]) rmdir(cg->dirs[i]);
}

static int make_dirs(struct cgroup *cg, bool *created, err_t *err)
{
    for (int i = 0; i < cg->ndirs; i++) {
        char parent[CG_PATH_MAX];
        parent_dir(parent, cg->version, i); /* fits: cg_init built a longer path */
        if (mkdir(parent, 0755) < 0 && errno != EEXIST)
            return err_set(err, -errno,
                           "creating %s: %s; is the cgroup hierarchy mounted "
                           "read-write, and are we root?",
                           parent, strerror(errno));
        if (mkdir(cg->dirs[i], 0755) == 0) {
            created[i] = true;
        } else if (errno != EEXIST) {
            return err_set(err, -errno, "creating %s: %s", cg->dirs[i], strerror(errno));
        }
    }
    return 0;
}

int cgroup_create(const char *name, const struct cgroup_limits *lim, struct cgroup **out,
                  err_t *err)
{
    *out = NULL;
    if (!lim) return err_set(err, -EINVAL, "creating cgroup: no limits given");
    auto_free struct cgroup *cg = calloc(1, sizeof *cg);
    if (!cg) return err_set(err, -ENOMEM, "creating cgroup: out of memory");
    int r = cg_init(cg, name, err);
    if (r < 0) return r;
    if (cg->version == 2 && (r = cg2_prepare_parent(err)) < 0)
        return err_wrap(err, "creating cgroup %s", name);
    bool created[CG_NCTRL] = {false};
    r = make_dirs(cg, created, err);
    if (r == 0) r = cgroup_set_limits(cg, lim, err);
    if (r < 0) {
        /* Never leave a fresh cgroup without its limits behind. */
        remove_created(cg, created);
        return err_wrap(err, "creating cgroup %s", name);
    }
    *out = steal_pointer(&cg);
    return 0;
}

int cgroup_set_limits(struct cgroup *cg, const struct cgroup_limits *lim, err_t *err)
{
    return cg->version == 1 ? cg1_set_limits(cg, lim, err) : cg2_set_limits(cg, lim, err);
}

int cgroup_open(const char *name, struct cgroup **out, err_t *err)
{
    *out = NULL;
    auto_free struct cgroup *cg = calloc(1, sizeof *cg);
    if (!cg) return err_set(err, -ENOMEM, "opening cgroup: out of memory");
    int r = cg_init(cg, name, err);
    if (r < 0) return r;
    /* Present in any controller is enough, so a half-made cgroup can still be
     * killed and destroyed; cgroup_create repairs one that should be kept. */
    for (int i = 0; i < cg->ndirs; i++) {
        struct stat st;
        if (stat(cg->dirs[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            *out = steal_pointer(&cg);
            return 0;
        }
    }
    return err_set(err, -ENOENT, "no cgroup %s (looked for %s): create it with cgroup_create", name,
                   cg->dirs[0]);
}

void cgroup_free(struct cgroup *cg)
{
    free(cg);
}

/* ---- attaching ----------------------------------------------------------- */

int cgroup_attach(struct cgroup *cg, pid_t pid, err_t *err)
{
    char text[24];
    snprintf(text, sizeof text, "%d", (int)pid);
    for (int i = 0; i < cg->ndirs; i++) {
        int r = cgi_write_err(cg->dirs[i], "cgroup.procs", text, err);
        if (r < 0) return err_wrap(err, "moving pid %d into cgroup %s", (int)pid, cg->name);
    }
    return 0;
}

int cgroup_procs_fds(struct cgroup *cg, int *fds, int max)
{
    if (max < cg->ndirs) return -ENOBUFS;
    for (int i = 0; i < cg->ndirs; i++) {
        char path[CG_PATH_MAX];
        int r = cgi_path(path, cg->dirs[i], "cgroup.procs");
        fds[i] = r < 0 ? -1 : open(path, O_WRONLY | O_CLOEXEC);
        if (fds[i] < 0) {
            r = r < 0 ? r : -errno;
            while (i-- > 0)
                close(fds[i]);
            return r;
        }
    }
    return cg->ndirs;
}

/* Runs in a freshly forked child of a possibly multithreaded process: only
 * async-signal-safe calls, so the number is formatted by hand. */
int cgroup_attach_fds(const int *fds, int n, pid_t pid)
{
    char text[24], *p = text + sizeof text;
    unsigned long v = pid > 0 ? (unsigned long)pid : 0;
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    size_t len = (size_t)(text + sizeof text - p);
    for (int i = 0; i < n; i++) {
        ssize_t w;
        do {
            w = write(fds[i], p, len);
        } while (w < 0 && errno == EINTR);
        if (w < 0) return -errno;
    }
    return 0;
}

/* ---- listing pids, killing ------------------------------------------------ */

static int read_pids(const char *dir, pid_t *pids, int max)
{
    char path[CG_PATH_MAX];
    int r = cgi_path(path, dir, "cgroup.procs");
    if (r < 0) return r;
    auto_close int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    char buf[4096];
    long cur = -1; /* digits of the current line, -1 before the first */
    int n = 0;
    for (;;) {
        ssize_t got = read(fd, buf, sizeof buf);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return -errno;
        if (got == 0) break;
        for (ssize_t i = 0; i < got; i++) {
            if (buf[i] >= '0' && buf[i] <= '9') {
                cur = (cur < 0 ? 0 : cur) * 10 + (buf[i] - '0');
                if (cur > 0x7fffffff) return -EPROTO;
            } else {
                if (cur > 0 && n < max) pids[n++] = (pid_t)cur;
                cur = -1;
            }
        }
    }
    if (cur > 0 && n < max) pids[n++] = (pid_t)cur;
    return n;
}

int cgroup_pids(struct cgroup *cg, pid_t *pids, int max)
{
    return read_pids(cgi_dir(cg, CG_PIDS), pids, max);
}

static int cmp_pid(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    return (x > y) - (x < y);
}

/* SIGKILLs the tasks listed in dir; returns how many were listed. We are root,
 * and a pid read from cgroup.procs may be reused by an unrelated process before
 * we signal it, so each is first pinned with a pidfd and signalled only if a
 * second listing, read after pinning, still has that pid. */
static int kill_dir(const char *dir, pid_t self)
{
    pid_t pids[1024], again[1024];
    int pfds[1024];
    int n = read_pids(dir, pids, (int)ARRAY_LEN(pids));
    if (n <= 0) return n;
    for (int i = 0; i < n; i++) {
        /* Paranoia: never signal init or ourselves, should either end up here. */
        bool ok = pids[i] > 1 && pids[i] != self;
        pfds[i] = ok ? (int)syscall(SYS_pidfd_open, pids[i], 0) : -1;
        if (ok && pfds[i] < 0 && errno == ENOSYS) pfds[i] = -2; /* before 5.3: plain kill */
    }
    int m = read_pids(dir, again, (int)ARRAY_LEN(again));
    if (m > 0) qsort(again, (size_t)m, sizeof again[0], cmp_pid);
    for (int i = 0; i < n; i++) {
        bool still = m > 0 && bsearch(&pids[i], again, (size_t)m, sizeof again[0], cmp_pid);
        if (still && pfds[i] >= 0) syscall(SYS_pidfd_send_signal, pfds[i], SIGKILL, NULL, 0);
        if (still && pfds[i] == -2) kill(pids[i], SIGKILL);
        if (pfds[i] >= 0) close(pfds[i]);
    }
    return n;
}

int cgi_kill_listed(struct cgroup *cg)
{
    pid_t self = getpid();
    int total = 0, missing = 0;
    /* Every hierarchy, not just pids: a half-finished attach may have left a
     * task in some of them only. */
    for (int d = 0; d < cg->ndirs; d++) {
        int n = kill_dir(cg->dirs[d], self);
        if (n == -ENOENT)
            missing++;
        else if (n < 0)
            return n;
        else
            total += n;
    }
    return missing == cg->ndirs ? -ENOENT : total;
}

int cgi_kill_frozen(struct cgroup *cg)
{
    /* Frozen, nothing can fork while we read the list. If freezing fails we kill
     * anyway; cgroup_kill_all keeps killing until the cgroup is empty. */
    if (cg->version == 1)
        cg1_freeze(cg, true, NULL);
    else
        cg2_freeze(cg, true, NULL);
    int r = cgi_kill_listed(cg);
    /* A frozen task only dies once thawed (v1). */
    int t = cg->version == 1 ? cg1_freeze(cg, false, NULL) : cg2_freeze(cg, false, NULL);
    return r < 0 ? r : t;
}

static int killed_all(struct cgroup *cg)
{
    int n = cgi_kill_listed(cg); /* again: catches anything attached meanwhile */
    return n < 0 ? n : n == 0;
}

int cgroup_kill_all(struct cgroup *cg)
{
    int r = cg->version == 1 ? cgi_kill_frozen(cg) : cg2_kill_all(cg);
    if (r < 0 && r != -ENOENT)
        log_debug("cgroup %s: first kill pass: %s; killing one by one", cg->name, strerror(-r));
    /* Whatever that pass managed, what counts is that the cgroup ends up empty. */
    r = cgi_poll(killed_all, cg, CG_KILL_TIMEOUT_MS);
    if (r == -ENOENT) return 0; /* already destroyed */
    return r == -ETIMEDOUT ? -EBUSY : r;
}

/* ---- freezing and counters -------------------------------------------------- */

uint64_t cgroup_reclaim(struct cgroup *cg)
{
    if (cg->version == 1)
        cg1_reclaim(cg);
    else
        cg2_reclaim(cg);
    struct cgroup_stats st = {0};
    cgroup_stats(cg, &st);
    return st.memory_bytes;
}

void cgroup_swap_out(struct cgroup *cg)
{
    if (cg->version == 1)
        cg1_swap_out(cg);
    else
        cg2_swap_out(cg);
}

int cgroup_freeze(struct cgroup *cg, bool frozen, err_t *err)
{
    int r = cg->version == 1 ? cg1_freeze(cg, frozen, err) : cg2_freeze(cg, frozen, err);
    if (r < 0) return err_wrap(err, "%s cgroup %s", frozen ? "freezing" : "thawing", cg->name);
    return 0;
}

int cgroup_stats(struct cgroup *cg, struct cgroup_stats *st)
{
    memset(st, 0, sizeof *st);
    return cg->version == 1 ? cg1_stats(cg, st) : cg2_stats(cg, st);
}

/* ---- destroy ------------------------------------------------------------------ */

static bool dir_has_tasks(const char *dir)
{
    char buf[16];
    return cgi_read(dir, "cgroup.procs", buf, sizeof buf) > 0;
}

static int rmdir_retry(const char *dir)
{
    uint64_t deadline = now_ms() + CG_DESTROY_TIMEOUT_MS;
    for (;;) {
        if (rmdir(dir) == 0 || errno == ENOENT) return 0;
        int r = -errno;
        /* EBUSY lingers for a few ms after the last task has exited; while tasks
         * are still listed, waiting will not help. */
        if (r != -EBUSY || now_ms() >= deadline || dir_has_tasks(dir)) return r;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

int cgroup_destroy(struct cgroup *cg, err_t *err)
{
    /* All or nothing while tasks remain: a cgroup that lost some hierarchies but
     * still runs tasks would be neither usable nor gone. */
    for (int i = 0; i < cg->ndirs; i++)
        if (dir_has_tasks(cg->dirs[i]))
            return err_set(err, -EBUSY,
                           "removing cgroup %s: %s still lists tasks; kill them "
                           "first with cgroup_kill_all",
                           cg->name, cg->dirs[i]);
    int first = 0;
    for (int i = 0; i < cg->ndirs; i++) {
        int r = rmdir_retry(cg->dirs[i]);
        if (r == 0 || first) continue;
        first = r;
        if (r == -EBUSY)
            err_set(err, r, "removing %s: still busy %d ms after its last task left; try again",
                    cg->dirs[i], CG_DESTROY_TIMEOUT_MS);
        else
            err_set(err, r, "removing %s: %s", cg->dirs[i], strerror(-r));
    }
    return first;
}

/* ---- list ------------------------------------------------------------------------ */

struct name_set {
    char (*names)[CG_NAME_MAX + 1];
    size_t n, cap;
};

static int name_set_add(struct name_set *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->names[i], name) == 0) return 0;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        void *p = realloc(s->names, cap * sizeof *s->names);
        if (!p) return -ENOMEM;
        s->names = p;
        s->cap = cap;
    }
    str_copy(s->names[s->n++], CG_NAME_MAX + 1, name);
    return 0;
}

static int scan_parent(const char *parent, struct name_set *s)
{
    DIR *d = opendir(parent);
    if (!d) return errno == ENOENT ? 0 : -errno;
    int r = 0;
    struct dirent *e;
    while (r == 0 && (e = readdir(d)))
        if (e->d_type == DT_DIR && name_ok(e->d_name)) r = name_set_add(s, e->d_name);
    closedir(d);
    return r;
}

int cgroup_list(void (*fn)(const char *name, void *arg), void *arg)
{
    int v = cgroup_version();
    if (v < 0) return v;
    struct name_set s = {0};
    int r = 0;
    for (int i = 0; r == 0 && i < (v == 1 ? CG_NCTRL : 1); i++) {
        char parent[CG_PATH_MAX];
        r = parent_dir(parent, v, i);
        if (r == 0) r = scan_parent(parent, &s);
    }
    if (r == 0) {
        for (size_t i = 0; i < s.n; i++)
            fn(s.names[i], arg);
        r = (int)s.n;
    }
    free(s.names);
    return r;
}
