/* cgroup tests against the real kernel (they need root). On a v1 host that also
 * mounts an empty cgroup2 tree at /sys/fs/cgroup/unified, the v2 code runs there
 * too, minus the controllers (limits) that tree does not have. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/magic.h>

#include "cgroup/cgroup.h"
#include "cgroup/cgroup_impl.h"
#include "unit.h"

#define MiB (1024ull * 1024)
#define UNIFIED "/sys/fs/cgroup/unified"

static void unit_name(char *out, size_t size, const char *tag)
{
    snprintf(out, size, "unit-%d-%s", (int)getpid(), tag);
}

static bool dir_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool any_dir_exists(const struct cgroup *cg)
{
    for (int i = 0; i < cg->ndirs; i++)
        if (dir_exists(cg->dirs[i])) return true;
    return false;
}

/* Reads one controller file, without the trailing newline. */
static const char *read_str(const struct cgroup *cg, enum cg_ctrl c, const char *file)
{
    static char buf[256];
    if (cgi_read(cgi_dir(cg, c), file, buf, sizeof buf) < 0) return "(unreadable)";
    buf[strcspn(buf, "\n")] = '\0';
    return buf;
}

static uint64_t read_num(const struct cgroup *cg, enum cg_ctrl c, const char *file)
{
    uint64_t v = UINT64_MAX;
    cgi_read_u64(cgi_dir(cg, c), file, &v);
    return v;
}

/* Reaps pid; SIGKILLs it if it has not ended within 5 s so a test cannot hang. */
static int reap(pid_t pid)
{
    int status = 0;
    uint64_t deadline = now_ms() + 5000;
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (now_ms() >= deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return status;
}

static bool killed_by_sigkill(int status)
{
    return status != -1 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

static pid_t fork_pause(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        for (;;)
            pause();
    }
    return pid;
}

/* A child that joins cg through cgroup_procs_fds/cgroup_attach_fds, says so on
 * a pipe, then spins. Returns its pid once it is in, or -1. */
static pid_t fork_busy_in(struct cgroup *cg)
{
    int fds[CGROUP_MAX_FDS], p[2];
    int n = cgroup_procs_fds(cg, fds, CGROUP_MAX_FDS);
    if (n <= 0 || pipe(p) < 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        char ok = cgroup_attach_fds(fds, n, 0) == 0 ? 'y' : 'n';
        if (write(p[1], &ok, 1) != 1) _exit(1);
        volatile unsigned long spin = 0;
        for (;;)
            spin++;
    }
    close(p[1]);
    for (int i = 0; i < n; i++)
        close(fds[i]);
    char ok = 'n';
    if (pid > 0 && read(p[0], &ok, 1) != 1) ok = 'n';
    close(p[0]);
    if (pid > 0 && ok != 'y') {
        kill(pid, SIGKILL);
        reap(pid);
        return -1;
    }
    return pid;
}

static uint64_t cpu_ns(struct cgroup *cg)
{
    struct cgroup_stats st;
    return cgroup_stats(cg, &st) == 0 ? st.cpu_ns : 0;
}

/* Polls until the cgroup's CPU time has grown by at least delta_ns. */
static bool cpu_advances(struct cgroup *cg, uint64_t delta_ns, unsigned timeout_ms)
{
    uint64_t start = cpu_ns(cg), deadline = now_ms() + timeout_ms;
    while (now_ms() < deadline) {
        if (cpu_ns(cg) >= start + delta_ns) return true;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return false;
}

static bool has_pid(struct cgroup *cg, pid_t pid)
{
    pid_t pids[64];
    int n = cgroup_pids(cg, pids, 64);
    for (int i = 0; i < n; i++)
        if (pids[i] == pid) return true;
    return false;
}

struct find {
    const char *name;
    int seen;
};

static void find_cb(const char *name, void *arg)
{
    struct find *f = arg;
    if (strcmp(name, f->name) == 0) f->seen++;
}

static int listed(const char *name)
{
    struct find f = {name, 0};
    return cgroup_list(find_cb, &f) < 0 ? -1 : f.seen;
}

/* kill_all + destroy + free, whatever state the test left. */
static void cleanup(struct cgroup *cg)
{
    if (!cg) return;
    cgroup_kill_all(cg);
    err_t err = {0};
    if (cgroup_destroy(cg, &err) < 0) fprintf(stderr, "  cleanup: %s\n", err.msg);
    cgroup_free(cg);
}

static struct cgroup *make(const char *tag, uint64_t mem, uint32_t milli, uint32_t pids,
                           int *failed_)
{
    char name[32];
    unit_name(name, sizeof name, tag);
    struct cgroup_limits lim = {mem, milli, pids};
    struct cgroup *cg = NULL;
    err_t err = {0};
    int r = cgroup_create(name, &lim, &cg, &err);
    if (r < 0) fprintf(stderr, "  cgroup_create %s: %s\n", name, err.msg);
    CHECK(r == 0 && cg);
    return cg;
}

/* ---- no kernel needed ------------------------------------------------------- */

TEST(cgroup_names_validated)
{
    const char *bad[] = {"",    "Abc", "a/b", "..",
                         "a.b", "a b", "a_b", "x123456789012345678901234567890a" /* 32 */};
    struct cgroup_limits lim = {64 * MiB, 1000, 16};
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        struct cgroup *cg = (struct cgroup *)1;
        err_t err = {0};
        CHECK(cgroup_create(bad[i], &lim, &cg, &err) == -EINVAL);
        CHECK(cg == NULL);
        CHECK(strstr(err.msg, "invalid cgroup name") != NULL);
        CHECK(cgroup_open(bad[i], &cg, &err) == -EINVAL);
    }
    struct cgroup *cg = NULL;
    CHECK(cgroup_create(NULL, &lim, &cg, NULL) == -EINVAL);
    /* 31 characters is fine: not found, rather than invalid. */
    CHECK(cgroup_open("x12345678901234567890123456789a", &cg, NULL) == -ENOENT);
}

TEST(cgroup_cpu_max_text)
{
    char buf[48];
    cg2_cpu_max_text(buf, sizeof buf, 1000);
    CHECK_STR(buf, "100000 100000");
    cg2_cpu_max_text(buf, sizeof buf, 1500);
    CHECK_STR(buf, "150000 100000");
    cg2_cpu_max_text(buf, sizeof buf, 250);
    CHECK_STR(buf, "25000 100000");
    cg2_cpu_max_text(buf, sizeof buf, 0);
    CHECK_STR(buf, "max 100000");
}

TEST(cgroup_version_detected)
{
    int v = cgroup_version();
    CHECK(v == 1 || v == 2);
    struct statfs sf;
    CHECK(statfs("/sys/fs/cgroup", &sf) == 0);
    CHECK((v == 2) == (sf.f_type == CGROUP2_SUPER_MAGIC));
}

/* ---- against the host's hierarchy (v1 here, v2 on production hosts) ----------- */

static void check_limits(struct cgroup *cg, uint64_t mem, const char *quota, const char *pids,
                         int *failed_)
{
    if (cg->version == 1) {
        CHECK(read_num(cg, CG_MEMORY, "memory.limit_in_bytes") == mem);
        if (cgi_exists(cgi_dir(cg, CG_MEMORY), "memory.memsw.limit_in_bytes"))
            CHECK(read_num(cg, CG_MEMORY, "memory.memsw.limit_in_bytes") == mem);
        CHECK(read_num(cg, CG_CPU, "cpu.cfs_period_us") == 100000);
        CHECK_STR(read_str(cg, CG_CPU, "cpu.cfs_quota_us"), quota);
    } else {
        CHECK(read_num(cg, CG_MEMORY, "memory.max") == mem);
        if (cgi_exists(cgi_dir(cg, CG_MEMORY), "memory.swap.max"))
            CHECK_STR(read_str(cg, CG_MEMORY, "memory.swap.max"), "0");
        char want[48];
        snprintf(want, sizeof want, "%s 100000", quota);
        CHECK_STR(read_str(cg, CG_CPU, "cpu.max"), want);
    }
    CHECK_STR(read_str(cg, CG_PIDS, "pids.max"), pids);
}

TEST(cgroup_create_limits_reuse_list_destroy)
{
    struct cgroup *cg = make("lim", 64 * MiB, 1500, 32, failed_);
    if (!cg) return;
    check_limits(cg, 64 * MiB, "150000", "32", failed_);

    /* Reuse, raising the limits (memsw must go first on v1), then lowering. */
    struct cgroup_limits lim = {128 * MiB, 500, 7};
    struct cgroup *again = NULL;
    err_t err = {0};
    CHECK(cgroup_create(cg->name, &lim, &again, &err) == 0);
    if (again) check_limits(again, 128 * MiB, "50000", "7", failed_);
    cgroup_free(again);
    lim = (struct cgroup_limits){32 * MiB, 2000, 9};
    CHECK(cgroup_create(cg->name, &lim, &again, &err) == 0);
    if (again) check_limits(again, 32 * MiB, "200000", "9", failed_);
    cgroup_free(again);

    struct cgroup *opened = NULL;
    CHECK(cgroup_open(cg->name, &opened, &err) == 0);
    CHECK(opened && strcmp(opened->dirs[0], cg->dirs[0]) == 0);
    cgroup_free(opened);
    CHECK(listed(cg->name) == 1); /* once, though it is in every hierarchy */

    CHECK(cgroup_destroy(cg, &err) == 0);
    CHECK(!any_dir_exists(cg));
    CHECK(listed(cg->name) == 0);
    CHECK(cgroup_open(cg->name, &opened, &err) == -ENOENT);
    CHECK(cgroup_destroy(cg, &err) == 0); /* already gone is fine */
    cgroup_free(cg);
}

TEST(cgroup_zero_means_unlimited)
{
    struct cgroup *cg = make("unl", 0, 0, 0, failed_);
    if (!cg) return;
    if (cg->version == 1) {
        CHECK(read_num(cg, CG_MEMORY, "memory.limit_in_bytes") > (1ull << 60));
        CHECK_STR(read_str(cg, CG_CPU, "cpu.cfs_quota_us"), "-1");
    } else {
        CHECK_STR(read_str(cg, CG_MEMORY, "memory.max"), "max");
        CHECK_STR(read_str(cg, CG_CPU, "cpu.max"), "max 100000");
    }
    CHECK_STR(read_str(cg, CG_PIDS, "pids.max"), "max");
    cleanup(cg);
}

/* Attach, list, kill_all, destroy; shared by the host and the v2 test. */
static void attach_kill_destroy(struct cgroup *cg, int *failed_)
{
    pid_t pid = fork_pause();
    CHECK(pid > 0);
    if (pid <= 0) return;
    err_t err = {0};
    CHECK(cgroup_attach(cg, pid, &err) == 0);
    CHECK(has_pid(cg, pid));
    pid_t pids[4];
    CHECK(cgroup_pids(cg, pids, 4) == 1);
    struct cgroup_stats st;
    CHECK(cgroup_stats(cg, &st) == 0);
    if (cgi_v2_ctrls() & CG2_PIDS) CHECK(st.pids == 1);
    CHECK(!st.frozen);

    CHECK(cgroup_destroy(cg, &err) == -EBUSY); /* still has a task */
    CHECK(strstr(err.msg, "cgroup_kill_all") != NULL);
    for (int i = 0; i < cg->ndirs; i++)
        CHECK(dir_exists(cg->dirs[i])); /* none removed */

    CHECK(cgroup_kill_all(cg) == 0);
    CHECK(cgroup_pids(cg, pids, 4) == 0); /* even before we reap the zombie */
    CHECK(killed_by_sigkill(reap(pid)));
    CHECK(cgroup_destroy(cg, &err) == 0);
    CHECK(!any_dir_exists(cg));
}

TEST(cgroup_attach_pids_kill_destroy)
{
    struct cgroup *cg = make("att", 64 * MiB, 1000, 16, failed_);
    if (!cg) return;
    attach_kill_destroy(cg, failed_);
    cleanup(cg);
}

static void freeze_thaw(struct cgroup *cg, int *failed_)
{
    pid_t pid = fork_busy_in(cg);
    CHECK(pid > 0);
    if (pid <= 0) return;
    CHECK(has_pid(cg, pid));
    CHECK(cpu_advances(cg, 10 * 1000000ull, 2000));

    err_t err = {0};
    CHECK(cgroup_freeze(cg, true, &err) == 0);
    struct cgroup_stats st;
    CHECK(cgroup_stats(cg, &st) == 0 && st.frozen);
    uint64_t before = cpu_ns(cg);
    struct timespec window = {0, 50 * 1000000}; /* a measurement window, not a wait */
    nanosleep(&window, NULL);
    uint64_t after = cpu_ns(cg);
    CHECK(after - before < 3 * 1000000ull);
    CHECK(cgroup_freeze(cg, true, &err) == 0); /* idempotent */

    CHECK(cgroup_freeze(cg, false, &err) == 0);
    CHECK(cgroup_stats(cg, &st) == 0 && !st.frozen);
    CHECK(cpu_advances(cg, 20 * 1000000ull, 2000));

    /* kill_all on a frozen cgroup still kills. */
    CHECK(cgroup_freeze(cg, true, &err) == 0);
    CHECK(cgroup_kill_all(cg) == 0);
    CHECK(killed_by_sigkill(reap(pid)));
    CHECK(cgroup_stats(cg, &st) == 0 && !st.frozen); /* left thawed */
}

TEST(cgroup_freeze_stops_cpu)
{
    struct cgroup *cg = make("frz", 64 * MiB, 1000, 16, failed_);
    if (!cg) return;
    freeze_thaw(cg, failed_);
    cleanup(cg);
}

TEST(cgroup_memory_limit_ooms)
{
    struct cgroup *cg = make("mem", 16 * MiB, 1000, 16, failed_);
    if (!cg) return;
    pid_t pid = fork();
    if (pid == 0) {
        if (cgroup_attach(cg, getpid(), NULL) < 0) _exit(2);
        size_t size = 64 * MiB;
        char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) _exit(3);
        for (size_t i = 0; i < size; i += 4096)
            p[i] = 1;
        _exit(0); /* the limit did not hold */
    }
    CHECK(pid > 0);
    int status = reap(pid);
    if (!killed_by_sigkill(status)) fprintf(stderr, "  child status 0x%x\n", status);
    CHECK(killed_by_sigkill(status));
    struct cgroup_stats st; /* the keeper tells a sandbox's death by the OOM killer by it */
    CHECK(cgroup_stats(cg, &st) == 0 && st.oom_kills == 1);
    cleanup(cg);
}

TEST(cgroup_stats_count_memory_and_pids)
{
    struct cgroup *cg = make("sta", 64 * MiB, 1000, 16, failed_);
    if (!cg) return;
    int p[2];
    CHECK(pipe(p) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        if (cgroup_attach(cg, getpid(), NULL) < 0) _exit(1);
        size_t size = 8 * MiB;
        char *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) _exit(2);
        for (size_t i = 0; i < size; i += 4096)
            m[i] = 1; /* charged to the new cgroup */
        if (write(p[1], "y", 1) != 1) _exit(3);
        for (;;)
            pause();
    }
    close(p[1]);
    char ok = 'n';
    CHECK(pid > 0 && read(p[0], &ok, 1) == 1 && ok == 'y');
    close(p[0]);
    struct cgroup_stats st;
    CHECK(cgroup_stats(cg, &st) == 0);
    CHECK(st.memory_bytes >= 8 * MiB && st.memory_bytes < 64 * MiB);
    CHECK(st.pids == 1);
    CHECK(!st.frozen);
    CHECK(cgroup_kill_all(cg) == 0);
    CHECK(killed_by_sigkill(reap(pid)));
    cleanup(cg);
}

TEST(cgroup_pids_limit)
{
    enum { MAX = 4 };
    struct cgroup *cg = make("pid", 64 * MiB, 1000, MAX, failed_);
    if (!cg) return;
    pid_t pid = fork();
    if (pid == 0) {
        if (cgroup_attach(cg, getpid(), NULL) < 0) _exit(100);
        for (int n = 0; n < 2 * MAX; n++) {
            pid_t g = fork();
            if (g == 0) {
                for (;;)
                    pause();
            }
            if (g < 0) _exit(errno == EAGAIN ? n : 101);
        }
        _exit(102);
    }
    CHECK(pid > 0);
    int status = reap(pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == MAX - 1); /* itself + MAX-1 children */
    pid_t pids[16];
    CHECK(cgroup_pids(cg, pids, 16) == MAX - 1); /* the orphaned grandchildren */
    CHECK(cgroup_kill_all(cg) == 0);
    CHECK(cgroup_pids(cg, pids, 16) == 0);
    cleanup(cg);
}

/* A task that made it into one v1 hierarchy only (an attach cut short) is still
 * found and killed. */
TEST(cgroup_kill_all_finds_half_attached)
{
    struct cgroup *cg = make("half", 64 * MiB, 1000, 16, failed_);
    if (!cg) return;
    pid_t pid = fork_pause();
    CHECK(pid > 0);
    char text[24];
    snprintf(text, sizeof text, "%d", (int)pid);
    enum cg_ctrl c = cg->version == 1 ? CG_FREEZER : CG_MEMORY;
    CHECK(cgi_write(cgi_dir(cg, c), "cgroup.procs", text) == 0);
    err_t err = {0};
    CHECK(cgroup_destroy(cg, &err) == -EBUSY);
    CHECK(cgroup_kill_all(cg) == 0);
    CHECK(killed_by_sigkill(reap(pid)));
    CHECK(cgroup_destroy(cg, &err) == 0);
    cgroup_free(cg);
}

TEST(cgroup_procs_fds_too_few)
{
    struct cgroup *cg = make("fds", 64 * MiB, 1000, 16, failed_);
    if (!cg) return;
    int fds[CGROUP_MAX_FDS];
    if (cg->ndirs > 1) CHECK(cgroup_procs_fds(cg, fds, cg->ndirs - 1) == -ENOBUFS);
    int n = cgroup_procs_fds(cg, fds, CGROUP_MAX_FDS);
    CHECK(n == cg->ndirs);
    for (int i = 0; i < n; i++)
        close(fds[i]);
    cleanup(cg);
}

/* ---- the v2 code on this host's empty cgroup2 tree -------------------------------- */

static bool hybrid_host(void)
{
    struct statfs sf;
    return cgroup_version() == 1 && statfs(UNIFIED, &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC;
}

static void v2_done(void)
{
    cgi_set_root(NULL, 0, 0);
    rmdir(UNIFIED "/" CG_PARENT); /* only if empty: ours, or left alone */
}

TEST(cgroup_v2_on_unified)
{
    if (!hybrid_host()) {
        fprintf(stderr, "  (skipped: no v1 host with an empty cgroup2 tree at %s)\n", UNIFIED);
        return;
    }
    cgi_set_root(UNIFIED, 2, 0);
    CHECK(cgroup_version() == 2);
    struct cgroup *cg = make("v2", 64 * MiB, 1000, 16, failed_);
    if (cg) {
        CHECK(cg->ndirs == 1);
        CHECK(dir_exists(UNIFIED "/runtime/") && dir_exists(cg->dirs[0]));
        CHECK(listed(cg->name) == 1);
        struct cgroup *again = NULL;
        struct cgroup_limits lim = {0};
        CHECK(cgroup_create(cg->name, &lim, &again, NULL) == 0); /* reuse */
        cgroup_free(again);
        attach_kill_destroy(cg, failed_);
        CHECK(listed(cg->name) == 0);
        cleanup(cg);
    }
    cg = make("v2f", 64 * MiB, 1000, 16, failed_);
    if (cg) {
        freeze_thaw(cg, failed_); /* kill_all via cgroup.kill */
        cleanup(cg);
    }
    v2_done();
}

TEST(cgroup_v2_kill_paths)
{
    if (!hybrid_host()) return;
    cgi_set_root(UNIFIED, 2, 0);
    struct cgroup *cg = make("v2k", 64 * MiB, 1000, 16, failed_);
    if (cg) {
        pid_t pid = fork_pause();
        CHECK(pid > 0 && cgroup_attach(cg, pid, NULL) == 0);
        CHECK(cgi_kill_frozen(cg) == 0); /* the path for kernels before 5.14 */
        CHECK(killed_by_sigkill(reap(pid)));
        struct cgroup_stats st;
        CHECK(cgroup_stats(cg, &st) == 0 && !st.frozen);
        /* And cgroup.kill alone, without cgroup_kill_all's follow-up kill loop. */
        pid = fork_pause();
        CHECK(pid > 0 && cgroup_attach(cg, pid, NULL) == 0);
        CHECK(cgroup_freeze(cg, true, NULL) == 0);
        CHECK(cg2_kill_all(cg) == 0);
        CHECK(killed_by_sigkill(reap(pid)));
        CHECK(cgroup_stats(cg, &st) == 0 && !st.frozen);
        cleanup(cg);
    }
    v2_done();
}

TEST(cgroup_v2_missing_controllers_fail_cleanly)
{
    if (!hybrid_host()) return;
    cgi_set_root(UNIFIED, 2, CG2_ALL); /* as in production; this tree has none */
    char name[32];
    unit_name(name, sizeof name, "v2c");
    struct cgroup_limits lim = {64 * MiB, 1000, 16};
    struct cgroup *cg = NULL;
    err_t err = {0};
    CHECK(cgroup_create(name, &lim, &cg, &err) < 0);
    CHECK(cg == NULL);
    CHECK(strstr(err.msg, "memory controller") != NULL);
    char path[CG_PATH_MAX];
    snprintf(path, sizeof path, UNIFIED "/runtime/%s", name);
    CHECK(!dir_exists(path));
    v2_done();
}
