/* cgroup v2: one tree; runtime/ holds no processes and hands the memory, cpu and
 * pids controllers down to each runtime/<name>. Freezing (cgroup.freeze) and
 * cgroup.kill are core features and need no controller. */
#include "cgroup_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static const struct {
    unsigned bit;
    const char *name;
} ctrls[] = {{CG2_MEMORY, "memory"}, {CG2_CPU, "cpu"}, {CG2_PIDS, "pids"}};

/* Whether the space-separated list in dir/file has word. */
static int has_word(const char *dir, const char *file, const char *word)
{
    char buf[512];
    int r = cgi_read(dir, file, buf, sizeof buf);
    if (r < 0) return r;
    size_t n = strlen(word);
    for (char *p = buf; (p = strstr(p, word)); p += n) {
        bool starts = p == buf || p[-1] == ' ';
        bool ends = p[n] == '\0' || p[n] == ' ' || p[n] == '\n';
        if (starts && ends) return 1;
    }
    return 0;
}

/* Makes controller c available in runtime/ (the root's subtree_control) and
 * enabled for runtime/'s children (runtime/'s subtree_control). */
static int enable_ctrl(const char *root, const char *parent, const char *c, err_t *err)
{
    char plus[16];
    snprintf(plus, sizeof plus, "+%s", c);
    int r = has_word(parent, "cgroup.controllers", c);
    if (r == 0) r = cgi_write(root, "cgroup.subtree_control", plus);
    if (r < 0)
        return err_set(err, r,
                       "enabling the %s controller for %s (writing \"%s\" to "
                       "%s/cgroup.subtree_control): %s; the kernel or the cgroup above "
                       "does not offer it, or %s holds processes",
                       c, parent, plus, root, strerror(-r), root);
    r = has_word(parent, "cgroup.subtree_control", c);
    if (r == 0) r = cgi_write(parent, "cgroup.subtree_control", plus);
    if (r < 0)
        return err_set(err, r,
                       "writing \"%s\" to %s/cgroup.subtree_control: %s; %s must hold "
                       "no processes (move them to a leaf cgroup)",
                       plus, parent, strerror(-r), parent);
    return 0;
}

int cg2_prepare_parent(err_t *err)
{
    const char *root = cgi_root();
    char parent[CG_PATH_MAX];
    snprintf(parent, sizeof parent, "%s/" CG_PARENT, root);
    if (mkdir(parent, 0755) < 0 && errno != EEXIST)
        return err_set(err, -errno,
                       "creating %s: %s; is cgroup2 mounted read-write at %s, and "
                       "are we root?",
                       parent, strerror(errno), root);
    unsigned want = cgi_v2_ctrls();
    for (size_t i = 0; i < ARRAY_LEN(ctrls); i++) {
        if (!(want & ctrls[i].bit)) continue;
        int r = enable_ctrl(root, parent, ctrls[i].name, err);
        if (r < 0) return r;
    }
    return 0;
}

void cg2_cpu_max_text(char *out, size_t size, uint32_t milli)
{
    if (milli)
        snprintf(out, size, "%" PRIu64 " %d", (uint64_t)milli * (CG_CPU_PERIOD_US / 1000),
                 CG_CPU_PERIOD_US);
    else
        snprintf(out, size, "max %d", CG_CPU_PERIOD_US);
}

static void max_or_number(char *out, size_t size, uint64_t v)
{
    if (v)
        snprintf(out, size, "%" PRIu64, v);
    else
        str_copy(out, size, "max");
}

int cg2_set_limits(struct cgroup *cg, const struct cgroup_limits *lim, err_t *err)
{
    const char *dir = cg->dirs[0];
    unsigned want = cgi_v2_ctrls();
    char v[48];
    int r = 0;
    if (want & CG2_MEMORY) {
        max_or_number(v, sizeof v, lim->memory_bytes);
        r = cgi_write_err(dir, "memory.max", v, err);
        /* memory.swap.max is absent when swap accounting is off (then there is
         * no per-cgroup swap to limit). */
        if (r == 0 && cgi_exists(dir, "memory.swap.max"))
            r = cgi_write_err(dir, "memory.swap.max", "0", err);
    }
    if (r == 0 && (want & CG2_CPU)) {
        cg2_cpu_max_text(v, sizeof v, lim->cpu_milli);
        r = cgi_write_err(dir, "cpu.max", v, err);
    }
    if (r == 0 && (want & CG2_PIDS)) {
        max_or_number(v, sizeof v, lim->pids_max);
        r = cgi_write_err(dir, "pids.max", v, err);
    }
    return r;
}

static int events_frozen(struct cgroup *cg)
{
    uint64_t v;
    int r = cgi_read_key_u64(cg->dirs[0], "cgroup.events", "frozen", &v);
    return r < 0 ? r : v == 1;
}

static int events_thawed(struct cgroup *cg)
{
    int r = events_frozen(cg);
    return r < 0 ? r : !r;
}

int cg2_freeze(struct cgroup *cg, bool frozen, err_t *err)
{
    const char *dir = cg->dirs[0];
    int r = cgi_write_err(dir, "cgroup.freeze", frozen ? "1" : "0", err);
    if (r < 0) return r;
    /* cgroup.freeze only asks; cgroup.events says "frozen 1" once every task
     * has stopped. */
    r = cgi_poll(frozen ? events_frozen : events_thawed, cg, CG_FREEZE_TIMEOUT_MS);
    if (r == 0) return 0;
    if (frozen) cgi_write(dir, "cgroup.freeze", "0"); /* don't leave it half frozen */
    if (r == -ETIMEDOUT)
        return err_set(err, r, "%s/cgroup.events did not read \"frozen %d\" within %d ms%s", dir,
                       frozen, CG_FREEZE_TIMEOUT_MS, frozen ? "; thawed it again, try later" : "");
    return err_set(err, r, "reading %s/cgroup.events: %s", dir, strerror(-r));
}

/* A counter of a controller we did not require (tests on a bare v2 mount) may be
 * missing; one we did require may not. */
static int read_counter(const char *dir, const char *file, unsigned bit, uint64_t *v)
{
    int r = cgi_read_u64(dir, file, v);
    if (r == -ENOENT && !(cgi_v2_ctrls() & bit)) r = 0;
    return r;
}

int cg2_stats(struct cgroup *cg, struct cgroup_stats *st)
{
    const char *dir = cg->dirs[0];
    uint64_t usec = 0;
    /* cpu.stat's usage_usec is there even without the cpu controller. */
    int r = cgi_read_key_u64(dir, "cpu.stat", "usage_usec", &usec);
    st->cpu_ns = usec * 1000;
    if (r == 0) r = read_counter(dir, "memory.current", CG2_MEMORY, &st->memory_bytes);
    if (r == 0) r = read_counter(dir, "pids.current", CG2_PIDS, &st->pids);
    if (r == 0 && cgi_read_key_u64(dir, "memory.events", "oom_kill", &st->oom_kills) < 0)
        st->oom_kills = 0; /* no memory controller here */
    if (r == 0 && cgi_read_u64(dir, "memory.swap.current", &st->swap_bytes) < 0)
        st->swap_bytes = 0; /* no swap accounting */
    if (r == 0) {
        r = events_frozen(cg);
        st->frozen = r > 0;
    }
    return r < 0 ? r : 0;
}

int cg2_kill_all(struct cgroup *cg)
{
    const char *dir = cg->dirs[0];
    /* cgroup.kill (5.14+) kills frozen tasks too and races no fork. */
    if (!cgi_exists(dir, "cgroup.kill")) return cgi_kill_frozen(cg);
    int r = cgi_write(dir, "cgroup.kill", "1");
    /* Leave it thawed so a reused cgroup does not start frozen. */
    int t = cgi_write(dir, "cgroup.freeze", "0");
    return r < 0 ? r : t;
}

/* memory.reclaim takes a byte count; asking for all it holds reclaims what it can
 * (the write reports EAGAIN for the rest, which is fine here). */
void cg2_reclaim(struct cgroup *cg)
{
    const char *dir = cg->dirs[0];
    uint64_t current = 0;
    if (cgi_read_u64(dir, "memory.current", &current) < 0 || current == 0) return;
    char v[32];
    snprintf(v, sizeof v, "%llu", (unsigned long long)current);
    cgi_write(dir, "memory.reclaim", v);
}

/* A running sandbox may not swap (memory.swap.max 0: its memory limit is all it has);
 * a hibernating one may, for the time of the reclaim. Lowering swap.max again leaves what
 * was swapped where it is. */
void cg2_swap_out(struct cgroup *cg)
{
    const char *dir = cg->dirs[0];
    if (!cgi_exists(dir, "memory.swap.max")) return;
    if (cgi_write(dir, "memory.swap.max", "max") < 0) return;
    cg2_reclaim(cg);
    cgi_write(dir, "memory.swap.max", "0");
}
