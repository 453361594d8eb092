/* cgroup: resource limits, freezing and counters for one sandbox, on cgroup v1
 * (separate memory, cpu, cpuacct, pids, freezer hierarchies) or v2 (one unified
 * tree), behind one small interface. Used only by the keeper (root). */
#ifndef RUNTIME_CGROUP_H
#define RUNTIME_CGROUP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common/common.h"

struct cgroup_limits {
    uint64_t memory_bytes; /* hard cap, swap included where the kernel allows */
    uint32_t cpu_milli;    /* 1000 = one CPU of quota per period */
    uint32_t pids_max;
};

struct cgroup_stats {
    uint64_t cpu_ns;       /* cumulative CPU time */
    uint64_t memory_bytes; /* current usage */
    uint64_t pids;         /* current tasks */
    uint64_t oom_kills;    /* processes the kernel's OOM killer ended in it, ever */
    uint64_t swap_bytes;   /* of its memory, what is in swap (0 without swap accounting) */
    bool frozen;
};

struct cgroup;

/* Detects the layout once; returns 1 or 2, or a negative error. */
int cgroup_version(void);

/* Creates the cgroup runtime/<name> in every controller (reusing any that
 * exist) and sets the limits; a 0 field means no limit. cgroup_open opens one
 * that exists in at least one controller. */
int cgroup_create(const char *name, const struct cgroup_limits *lim, struct cgroup **out,
                  err_t *err);
int cgroup_open(const char *name, struct cgroup **out, err_t *err);
void cgroup_free(struct cgroup *cg);
/* Sets the limits of a cgroup that exists (a 0 field: no limit), as cgroup_create does. */
int cgroup_set_limits(struct cgroup *cg, const struct cgroup_limits *lim, err_t *err);

/* Moves pid (host pid namespace) into the cgroup in every controller. */
int cgroup_attach(struct cgroup *cg, pid_t pid, err_t *err);
/* Opens the cgroup.procs files (O_WRONLY|O_CLOEXEC) so a forked child can attach
 * a process after it has left the host mount namespace. Returns count (at most
 * CGROUP_MAX_FDS: one per v1 hierarchy, 1 on v2) or -errno; -ENOBUFS if max is
 * too small. */
#define CGROUP_MAX_FDS 5
int cgroup_procs_fds(struct cgroup *cg, int *fds, int max);
/* Writes pid to each fd from cgroup_procs_fds (0 means the caller itself). Only
 * async-signal-safe calls, so it may run between fork and exec. */
int cgroup_attach_fds(const int *fds, int n, pid_t pid);

int cgroup_freeze(struct cgroup *cg, bool frozen, err_t *err);
/* Asks the kernel to drop what it can of the cgroup's memory now (page cache, and
 * anonymous memory where there is swap), e.g. for a paused sandbox. Best effort:
 * returns the bytes it holds afterwards. */
uint64_t cgroup_reclaim(struct cgroup *cg);
/* Pushes what its (frozen) processes hold in memory to swap, as far as the host's swap
 * takes it: a hibernated ns sandbox (docs/hibernation.md). Its limits stay as they were,
 * and nothing comes back until a process touches it. Best effort: what stays in memory
 * (kernel memory, what swap had no room for) stays. */
void cgroup_swap_out(struct cgroup *cg);
int cgroup_stats(struct cgroup *cg, struct cgroup_stats *st);
/* Host pids in the cgroup; returns count (at most max) or -errno. */
int cgroup_pids(struct cgroup *cg, pid_t *pids, int max);
/* SIGKILLs everything in it (freezing first so nothing forks meanwhile, thawing
 * so the kill is delivered) and waits up to 1 s until it is empty: 0, or -EBUSY
 * if tasks remain. */
int cgroup_kill_all(struct cgroup *cg);
/* Removes the cgroup directories; -EBUSY while tasks remain. */
int cgroup_destroy(struct cgroup *cg, err_t *err);

/* Calls fn once for each existing runtime/<name> (union over controllers);
 * returns how many or -errno. */
int cgroup_list(void (*fn)(const char *name, void *arg), void *arg);

#endif
