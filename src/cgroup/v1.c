/* cgroup v1: one hierarchy per controller (memory, cpu, cpuacct, pids, freezer),
 * each holding runtime/<name>. */
#include "cgroup_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int set_memory(struct cgroup *cg, uint64_t bytes, err_t *err)
{
    const char *dir = cgi_dir(cg, CG_MEMORY);
    char v[32];
    if (bytes)
        snprintf(v, sizeof v, "%" PRIu64, bytes);
    else
        str_copy(v, sizeof v, "-1");
    /* memsw (memory+swap) exists only with swap accounting; it must stay >=
     * limit_in_bytes, so it goes second. Raising the limit of a reused cgroup
     * fails that way round (EINVAL), so then memsw goes first as well. */
    bool memsw = cgi_exists(dir, "memory.memsw.limit_in_bytes");
    int r = cgi_write(dir, "memory.limit_in_bytes", v);
    if (r == -EINVAL && memsw) {
        r = cgi_write_err(dir, "memory.memsw.limit_in_bytes", v, err);
        if (r < 0) return r;
        r = cgi_write(dir, "memory.limit_in_bytes", v);
    }
    if (r < 0)
        return err_set(err, r,
                       "writing \"%s\" to %s/memory.limit_in_bytes: %s; is the memory "
                       "in use above the new limit?",
                       v, dir, strerror(-r));
    return memsw ? cgi_write_err(dir, "memory.memsw.limit_in_bytes", v, err) : 0;
}

static int set_cpu(struct cgroup *cg, uint32_t milli, err_t *err)
{
    const char *dir = cgi_dir(cg, CG_CPU);
    char v[32];
    snprintf(v, sizeof v, "%d", CG_CPU_PERIOD_US);
    int r = cgi_write_err(dir, "cpu.cfs_period_us", v, err);
    if (r < 0) return r;
    if (milli)
        snprintf(v, sizeof v, "%" PRIu64, (uint64_t)milli * (CG_CPU_PERIOD_US / 1000));
    else
        str_copy(v, sizeof v, "-1");
    return cgi_write_err(dir, "cpu.cfs_quota_us", v, err);
}

int cg1_set_limits(struct cgroup *cg, const struct cgroup_limits *lim, err_t *err)
{
    int r = set_memory(cg, lim->memory_bytes, err);
    if (r == 0) r = set_cpu(cg, lim->cpu_milli, err);
    if (r == 0) {
        char v[32];
        if (lim->pids_max)
            snprintf(v, sizeof v, "%" PRIu32, lim->pids_max);
        else
            str_copy(v, sizeof v, "max");
        r = cgi_write_err(cgi_dir(cg, CG_PIDS), "pids.max", v, err);
    }
    return r;
}

static int freezer_is(struct cgroup *cg, const char *want)
{
    char buf[32];
    int r = cgi_read(cgi_dir(cg, CG_FREEZER), "freezer.state", buf, sizeof buf);
    if (r < 0) return r;
    buf[strcspn(buf, "\n")] = '\0';
    return strcmp(buf, want) == 0;
}

static int is_frozen(struct cgroup *cg)
{
    return freezer_is(cg, "FROZEN");
}

static int is_thawed(struct cgroup *cg)
{
    return freezer_is(cg, "THAWED");
}

int cg1_freeze(struct cgroup *cg, bool frozen, err_t *err)
{
    const char *dir = cgi_dir(cg, CG_FREEZER);
    const char *state = frozen ? "FROZEN" : "THAWED";
    int r = cgi_write_err(dir, "freezer.state", state, err);
    if (r < 0) return r;
    /* The write only starts freezing; FREEZING turns FROZEN once every task has
     * stopped (reading freezer.state is what rechecks). */
    r = cgi_poll(frozen ? is_frozen : is_thawed, cg, CG_FREEZE_TIMEOUT_MS);
    if (r == 0) return 0;
    if (frozen) cgi_write(dir, "freezer.state", "THAWED"); /* don't leave it half frozen */
    if (r == -ETIMEDOUT)
        return err_set(err, r, "%s/freezer.state did not read %s within %d ms%s", dir, state,
                       CG_FREEZE_TIMEOUT_MS, frozen ? "; thawed it again, try later" : "");
    return err_set(err, r, "reading %s/freezer.state: %s", dir, strerror(-r));
}

int cg1_stats(struct cgroup *cg, struct cgroup_stats *st)
{
    int r = cgi_read_u64(cgi_dir(cg, CG_CPUACCT), "cpuacct.usage", &st->cpu_ns);
    if (r == 0)
        r = cgi_read_u64(cgi_dir(cg, CG_MEMORY), "memory.usage_in_bytes", &st->memory_bytes);
    if (r == 0) r = cgi_read_u64(cgi_dir(cg, CG_PIDS), "pids.current", &st->pids);
    /* oom_kill is there since Linux 4.13; before, no count. */
    if (r == 0 && cgi_read_key_u64(cgi_dir(cg, CG_MEMORY), "memory.oom_control", "oom_kill",
                                   &st->oom_kills) < 0)
        st->oom_kills = 0;
    /* total_swap is there with swap accounting only. */
    if (r == 0 &&
        cgi_read_key_u64(cgi_dir(cg, CG_MEMORY), "memory.stat", "total_swap", &st->swap_bytes) < 0)
        st->swap_bytes = 0;
    if (r == 0) {
        r = is_frozen(cg);
        st->frozen = r > 0;
    }
    return r < 0 ? r : 0;
}

/* v1 has no memory.reclaim: lowering the limit to what is not page cache makes the
 * kernel reclaim the cache synchronously (a write it cannot satisfy fails with EBUSY
 * and changes nothing), then the limit goes back. */
void cg1_reclaim(struct cgroup *cg)
{
    const char *dir = cgi_dir(cg, CG_MEMORY);
    uint64_t limit = 0, usage = 0, cache = 0;
    if (cgi_read_u64(dir, "memory.limit_in_bytes", &limit) < 0 ||
        cgi_read_u64(dir, "memory.usage_in_bytes", &usage) < 0 ||
        cgi_read_key_u64(dir, "memory.stat", "total_cache", &cache) < 0 || cache == 0 ||
        cache >= usage)
        return;
    char v[32];
    snprintf(v, sizeof v, "%llu", (unsigned long long)(usage - cache + (1u << 20)));
    cgi_write(dir, "memory.limit_in_bytes", v);
    snprintf(v, sizeof v, "%llu", (unsigned long long)limit);
    cgi_write(dir, "memory.limit_in_bytes", v);
}

/* The same way down, to a limit of a page or so: the kernel reclaims all it can,
 * anonymous memory to swap (memsw, memory and swap together, is unchanged by it), and
 * the write fails with EBUSY for the rest; the limit goes back at once (a frozen task
 * touches nothing meanwhile). */
void cg1_swap_out(struct cgroup *cg)
{
    const char *dir = cgi_dir(cg, CG_MEMORY);
    char limit[32];
    if (cgi_read(dir, "memory.limit_in_bytes", limit, sizeof limit) < 0) return;
    cgi_write(dir, "memory.limit_in_bytes", "4096");
    cgi_write(dir, "memory.limit_in_bytes", limit);
}
