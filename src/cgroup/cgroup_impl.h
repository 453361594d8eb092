/* cgroup internals shared by cgroup.c (the public interface and everything that
 * only walks directories), v1.c and v2.c (limits, freezing, counters, killing).
 * Nothing outside src/cgroup/ and its unit test includes this. */
#ifndef RUNTIME_CGROUP_IMPL_H
#define RUNTIME_CGROUP_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cgroup.h"

#define CG_NAME_MAX 31  /* same as PROTO_ID_LEN - 1 */
#define CG_ROOT_MAX 128 /* room for the mount root, e.g. /sys/fs/cgroup */
#define CG_PATH_MAX 256 /* root + "/freezer/runtime/" + name + "/" + file */
#define CG_PARENT "runtime"
#define CG_CPU_PERIOD_US 100000
#define CG_FREEZE_TIMEOUT_MS 1000

/* The v1 hierarchies we use; on v2 every role maps to the one directory. */
enum cg_ctrl { CG_MEMORY, CG_CPU, CG_CPUACCT, CG_PIDS, CG_FREEZER, CG_NCTRL };
_Static_assert(CG_NCTRL == CGROUP_MAX_FDS, "one cgroup.procs fd per v1 hierarchy");

struct cgroup {
    int version;
    char name[CG_NAME_MAX + 1];
    int ndirs; /* v1: CG_NCTRL, v2: 1 */
    char dirs[CG_NCTRL][CG_PATH_MAX];
};

/* v2 controllers cgroup_create enables and limits (bit mask). */
enum { CG2_MEMORY = 1, CG2_CPU = 2, CG2_PIDS = 4, CG2_ALL = 7 };

/* Tests only (not thread-safe): point the code at another mount root and force
 * the version, e.g. ("/sys/fs/cgroup/unified", 2, 0) to run the v2 code on a v2
 * mount that has no controllers; v2_ctrls says which controllers to require.
 * root NULL restores the defaults (detect under /sys/fs/cgroup, CG2_ALL). */
void cgi_set_root(const char *root, int version, unsigned v2_ctrls);
const char *cgi_root(void);
unsigned cgi_v2_ctrls(void);

/* v1 controller directory names, indexed by enum cg_ctrl. */
extern const char *const cg1_ctrl_names[CG_NCTRL];

/* The directory that holds controller c's files for cg. */
const char *cgi_dir(const struct cgroup *cg, enum cg_ctrl c);
/* Builds dir/file into out (CG_PATH_MAX). */
int cgi_path(char *out, const char *dir, const char *file);
/* One write() of text to dir/file, no O_CREAT: a missing file is -ENOENT. */
int cgi_write(const char *dir, const char *file, const char *text);
/* Same, filling err with the path, the value and what to check. */
int cgi_write_err(const char *dir, const char *file, const char *text, err_t *err);
/* Reads dir/file into buf (NUL-terminated); returns length or -errno. */
int cgi_read(const char *dir, const char *file, char *buf, size_t size);
/* Reads a file holding one decimal number. */
int cgi_read_u64(const char *dir, const char *file, uint64_t *v);
/* Finds "key <number>" lines (cpu.stat, cgroup.events). */
int cgi_read_key_u64(const char *dir, const char *file, const char *key, uint64_t *v);
bool cgi_exists(const char *dir, const char *file);
/* Calls cond(cg) every millisecond until it returns > 0 (-> 0), < 0 (-> that
 * error) or timeout_ms passes (-> -ETIMEDOUT). */
int cgi_poll(int (*cond)(struct cgroup *cg), struct cgroup *cg, unsigned timeout_ms);
/* SIGKILLs, once, every task listed in any of cg's cgroup.procs files (pinned
 * with a pidfd so a reused pid is never hit); returns how many were listed. */
int cgi_kill_listed(struct cgroup *cg);
/* Freeze, SIGKILL everything listed, thaw: the v1 way, and v2 without cgroup.kill. */
int cgi_kill_frozen(struct cgroup *cg);

/* Per-version operations (v1.c / v2.c). */
int cg1_set_limits(struct cgroup *cg, const struct cgroup_limits *lim, err_t *err);
int cg1_freeze(struct cgroup *cg, bool frozen, err_t *err);
int cg1_stats(struct cgroup *cg, struct cgroup_stats *st);
void cg1_reclaim(struct cgroup *cg);
void cg1_swap_out(struct cgroup *cg);

/* v2: the runtime/ parent needs the controllers in its subtree_control first. */
int cg2_prepare_parent(err_t *err);
int cg2_set_limits(struct cgroup *cg, const struct cgroup_limits *lim, err_t *err);
int cg2_freeze(struct cgroup *cg, bool frozen, err_t *err);
int cg2_stats(struct cgroup *cg, struct cgroup_stats *st);
int cg2_kill_all(struct cgroup *cg);
void cg2_reclaim(struct cgroup *cg);
void cg2_swap_out(struct cgroup *cg);
/* The text for cpu.max: "quota period", or "max period" when milli is 0. */
void cg2_cpu_max_text(char *out, size_t size, uint32_t milli);

#endif
