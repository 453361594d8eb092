/* sandbox: isolation drivers. A driver turns a sandbox spec into an isolated
 * process tree and acts on it (exec, files, freeze, destroy). Runs only in the
 * keeper (root). The `ns` driver uses Linux namespaces; stronger drivers (gVisor,
 * microVMs) implement the same table without touching egress, secrets or the
 * gateway. */
#ifndef RUNTIME_SANDBOX_H
#define RUNTIME_SANDBOX_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../cgroup/cgroup.h"
#include "../common/common.h"

/* Host uid ranges: sandbox slot s maps its uids 0..65535 to base + s*65536.
 * Far above any uid a distribution hands out. */
#define SANDBOX_UID_BASE 1000000000u
#define SANDBOX_UID_RANGE 65536u
#define SANDBOX_MAX_SLOTS 16384u
#define SANDBOX_USER_UID 1000u /* the uid programs run as inside */

struct sandbox_spec {
    char id[32];
    uint32_t slot;
    uint32_t memory_mib;
    uint32_t cpu_milli;
    uint32_t disk_mib;
    uint32_t pids_max;
};

struct sandbox_exec {
    const char *const *argv; /* argv[0] is looked up in PATH when it has no '/' */
    const char *const *envp;
    const char *cwd;
    uint32_t timeout_ms;
};

/* Host-side paths shared by every sandbox. */
struct sandbox_host {
    char state_dir[512]; /* sandboxes live under STATE/sandboxes/<id> */
    char ca_bundle[512]; /* file bind-mounted as the sandbox's CA bundle */
    char instance[12];   /* 8 hex digits naming this daemon's cgroups (from its state dir),
                          * so daemons with different state dirs never touch each other's */
    char *title;         /* the daemon's argv area, rewritten by each sandbox's pid 1 so it */
    size_t title_len;    /* shows as runtime-init, not as the daemon's command line */
};

/* Copies the sandbox's pid 1 program (src/sandbox/init/runtime-init.c) into a
 * memfd once, for every sandbox's first process to exec when it is set up (the
 * keeper calls it at start). Without it, the first process stays pid 1 itself,
 * a copy-on-write image of the keeper. */
int sandbox_init_prepare(err_t *err);

/* The cgroup name of sandbox id: "<instance>-<id>". */
void sandbox_cgroup_name(const struct sandbox_host *host, const char *id, char *out, size_t n);
/* The sandbox id of a cgroup name of this instance, or NULL. */
const char *sandbox_id_of_cgroup(const struct sandbox_host *host, const char *name);

struct sandbox; /* one live sandbox, owned by the keeper */

/* Counters of a running sandbox: its cgroup's, and the host bytes its /workspace holds. */
struct sandbox_stats {
    struct cgroup_stats cg;
    uint64_t disk_bytes;
};

struct sandbox_driver {
    const char *name;
    /* Builds a new sandbox, or with `reuse_workspace` one whose workspace exists. */
    int (*create)(const struct sandbox_host *host, const struct sandbox_spec *spec,
                  bool reuse_workspace, struct sandbox **out, err_t *err);
    /* Finds a sandbox left running by an earlier keeper; -ENOENT when gone. */
    int (*adopt)(const struct sandbox_host *host, const struct sandbox_spec *spec,
                 struct sandbox **out, err_t *err);
    /* Kills everything in it and removes its resources, workspace included. */
    int (*destroy)(struct sandbox *sb, err_t *err);
    /* Starts a process; returns pipes stdin (write end), stdout, stderr (read ends)
     * and a status pipe that carries one struct proto_exec_status when it ends. */
    int (*exec)(struct sandbox *sb, const struct sandbox_exec *ex, int fds[4], err_t *err);
    /* Opens a path inside the sandbox's root as its user, never leaving the root. */
    /* mode (writing only): permission bits to give the file, 0 to leave them (0644 when new). */
    /* write: 0 read, 1 create or truncate, 2 create a new file (fails if it exists). */
    int (*open_file)(struct sandbox *sb, const char *path, unsigned write, unsigned mode, int *fd,
                     err_t *err);
    /* Renames from to to (to NULL: removes from), as the sandbox's user; keep_mode gives
     * from the mode of the file it replaces. */
    int (*rename_file)(struct sandbox *sb, const char *from, const char *to, bool keep_mode,
                       err_t *err);
    /* Listening sockets made inside the sandbox's network namespace for the
     * egress proxy and DNS stub: fds[0] TCP proxy, fds[1] UDP 53, fds[2] TCP 53. */
    int (*net_sockets)(struct sandbox *sb, int fds[3], err_t *err);
    /* A descriptor that becomes readable when the sandbox dies (its init's
     * pidfd, duplicated; harmless in unprivileged hands: it cannot signal). */
    int (*watch_fd)(struct sandbox *sb);
    int (*freeze)(struct sandbox *sb, bool frozen, err_t *err);
    int (*stats)(struct sandbox *sb, struct sandbox_stats *st);
    /* Removes what a sandbox that no longer exists may have left (cgroups, files). */
    int (*sweep)(const struct sandbox_host *host, const char *id);
    void (*free)(struct sandbox *sb);
};

extern const struct sandbox_driver sandbox_ns_driver;

/* Drivers by name ("ns"); NULL if unknown. */
const struct sandbox_driver *sandbox_driver_find(const char *name);

#endif
