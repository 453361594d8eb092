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
#include "../proto/proto.h"

/* Host uids. Each daemon on a host holds one uid block of its own (the keeper claims it
 * at start and keeps it across restarts: keeper_uid_block_claim). In block b, sandbox slot
 * s maps its uids 0..65535 to sandbox_uid_base(b) + s*65536, and the daemon's server and
 * signer run as the two uids just below sandbox_uid_base(b), in a 65536-uid range of the
 * block's own. The blocks lie end to end from 1,000,000,000 (far above any uid a
 * distribution hands out) and all below 2^31, since some programs keep a uid in a
 * signed int; 65534 (nobody), 65535 and (uid_t)-1 are far outside. Block 0 is the layout
 * of the daemons from before blocks. Why 1024 slots a block: docs/architecture.md. */
#define SANDBOX_UID_FLOOR 1000000000u /* block 0's first sandbox uid */
#define SANDBOX_UID_RANGE 65536u
#define SANDBOX_MAX_SLOTS 1024u /* a block's slots: the sandboxes a daemon holds at once */
#define SANDBOX_UID_STRIDE ((SANDBOX_MAX_SLOTS + 1u) * SANDBOX_UID_RANGE)
#define SANDBOX_UID_LIMIT 0x80000000u /* 2^31: no block reaches it */
#define SANDBOX_UID_BLOCKS                                                                         \
    ((SANDBOX_UID_LIMIT - SANDBOX_UID_FLOOR - SANDBOX_MAX_SLOTS * SANDBOX_UID_RANGE) /             \
         SANDBOX_UID_STRIDE +                                                                      \
     1u)
#define SANDBOX_USER_UID 1000u /* the uid programs run as inside */
/* Where the sandbox's egress is caught, on its 127.0.0.1: nft sends every TCP connection
 * to the proxy port and every DNS query to the DNS port, whose sockets go to the egress
 * proxy outside. The proxy's port is privileged: no one inside can squat it. */
#define SANDBOX_PROXY_PORT 900
#define SANDBOX_DNS_PORT 53

/* Block b's first sandbox uid; its server runs as this - 1, its signer as this - 2. */
static inline uid_t sandbox_uid_base(uint32_t block)
{
    return SANDBOX_UID_FLOOR + block * SANDBOX_UID_STRIDE;
}
_Static_assert(SANDBOX_UID_BLOCKS == 17, "the uid blocks are 17 (docs/architecture.md)");
_Static_assert((uint64_t)SANDBOX_UID_FLOOR +
                       (SANDBOX_UID_BLOCKS - 1) * (uint64_t)SANDBOX_UID_STRIDE +
                       (uint64_t)SANDBOX_MAX_SLOTS * SANDBOX_UID_RANGE <=
                   SANDBOX_UID_LIMIT,
               "the last uid block ends below 2^31");
_Static_assert(SANDBOX_UID_FLOOR - SANDBOX_UID_RANGE > 65535u,
               "block 0's own range stays above nobody (65534) and 65535");

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
    /* An MCP server, whose stdin and stdout carry every call: the gvisor driver gives it a
     * container of its own with host pipes (docs/gvisor.md); the ns driver, as any. */
    bool serve;
};

/* Host-side paths shared by every sandbox. */
struct sandbox_host {
    char state_dir[512]; /* sandboxes live under STATE/sandboxes/<id> */
    char ca_bundle[512]; /* file bind-mounted as the sandbox's CA bundle */
    char instance[12];   /* 8 hex digits naming this daemon's cgroups (from its state dir),
                          * so daemons with different state dirs never touch each other's */
    uid_t uid_base;      /* sandbox_uid_base() of this daemon's uid block */
    char *title;         /* the daemon's argv area, rewritten by each sandbox's pid 1 so it */
    size_t title_len;    /* shows as runtime-init, not as the daemon's command line */
};

/* Copies the sandbox's pid 1 program (src/sandbox/init/runtime-init.c) into a
 * memfd once, for every sandbox's first process to exec when it is set up (the
 * keeper calls it at start). Without it, the first process stays pid 1 itself,
 * a copy-on-write image of the keeper. */
int sandbox_init_prepare(err_t *err);
/* Writes the gvisor driver's agent once, to STATE/runtime-agent, which each gvisor
 * sandbox's root binds read-only: one copy in the page cache for them all, not 0.7 MiB
 * of tmpfs each (the keeper calls it at start; without it each root gets a copy). */
int sandbox_agent_install(const struct sandbox_host *host, err_t *err);

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
    /* Finds a sandbox left running by an earlier keeper: 0, or 1 when it is hibernated
     * (nothing runs in it: no watch fd); -ENOENT when gone. */
    int (*adopt)(const struct sandbox_host *host, const struct sandbox_spec *spec,
                 struct sandbox **out, err_t *err);
    /* Kills everything in it and removes its resources, workspace included. */
    int (*destroy)(struct sandbox *sb, err_t *err);
    /* Kills everything in it and frees its resources but its workspace, which
     * create with reuse_workspace (or sweep) takes up later. */
    int (*stop)(struct sandbox *sb, err_t *err);
    /* Starts a process; returns pipes stdin (write end), stdout, stderr (read ends)
     * and a status pipe that carries one struct proto_exec_status when it ends. */
    int (*exec)(struct sandbox *sb, const struct sandbox_exec *ex, int fds[4], err_t *err);
    /* Opens a path inside the sandbox's root as its user, never leaving the root. */
    /* mode (writing only): permission bits to give the file, 0 to leave them (0644 when new). */
    /* write: 0 read, 1 create or truncate, 2 create a new file (fails if it exists) to
     * read and write. Writing makes the missing parent directories (0755). */
    int (*open_file)(struct sandbox *sb, const char *path, unsigned write, unsigned mode, int *fd,
                     err_t *err);
    /* Renames from to to (to NULL: removes from), as the sandbox's user; keep_mode gives
     * from the mode of the file it replaces. */
    int (*rename_file)(struct sandbox *sb, const char *from, const char *to, bool keep_mode,
                       err_t *err);
    /* Starts one of Runtime Cloud's file-tree operations (op is checked: terminated
     * paths, a known op, flags, mode, depth and limit in range) as the sandbox's user
     * inside its root, and returns at once with *fd: a socket on which the operation's
     * PROTO_RESULT arrives when it is done (proto.h, FILE_OP). */
    int (*file_op)(struct sandbox *sb, const struct proto_file_op *op, int *fd, err_t *err);
    /* Listening sockets made inside the sandbox's network namespace for the
     * egress proxy and DNS stub: fds[0] TCP proxy, fds[1] UDP 53, fds[2] TCP 53. */
    int (*net_sockets)(struct sandbox *sb, int fds[3], err_t *err);
    /* A descriptor that becomes readable when the sandbox dies (its init's
     * pidfd, duplicated; harmless in unprivileged hands: it cannot signal). */
    int (*watch_fd)(struct sandbox *sb);
    int (*freeze)(struct sandbox *sb, bool frozen, err_t *err);
    /* Hibernation (docs/hibernation.md) of a frozen sandbox. gvisor: hibernate writes its
     * processes, memory included, to an image in its directory and ends them (the
     * sandbox's namespaces, workspace and exec channel stay), answering the image's bytes;
     * when that fails after gVisor ended them, it answers 0 bytes and why in err->msg
     * (no image: the next restore starts it cold). restore brings them back from the
     * image; when it cannot, it starts the sandbox cold (*from PROTO_FROM_COLD) and
     * says why in err->msg, and fails only when that cannot either. ns: hibernate pushes
     * its memory to the host's swap (-ENOTSUP without swap), answering the bytes swapped;
     * restore thaws it (PROTO_FROM_SWAP). */
    int (*hibernate)(struct sandbox *sb, uint64_t *image_bytes, err_t *err);
    int (*restore)(struct sandbox *sb, enum proto_from *from, err_t *err);
    /* Templates (docs/templates.md), gvisor only. template_save checkpoints the running
     * sandbox, whose one program is MCP server `server`, without stopping it, into
     * STATE/templates/<key> with its /workspace/mcp/<server>. template_restore gives a
     * sandbox in which nothing runs that template's image and files: fds are the
     * program's four pipes and the new sentry's death fd (watch_fd's). When the image
     * fails after its sentry was replaced, the sandbox is started again as it was and
     * the answer is 1, with fds[4] only and why in err->msg; -errno changes nothing. */
    int (*template_save)(struct sandbox *sb, const char *key, const char *server,
                         uint64_t *image_bytes, err_t *err);
    int (*template_restore)(struct sandbox *sb, const char *key, const char *server, int fds[5],
                            err_t *err);
    int (*stats)(struct sandbox *sb, struct sandbox_stats *st);
    /* Removes what a sandbox that no longer exists may have left (cgroups, files). */
    int (*sweep)(const struct sandbox_host *host, const char *id);
    void (*free)(struct sandbox *sb);
};

extern const struct sandbox_driver sandbox_ns_driver;
extern const struct sandbox_driver sandbox_gvisor_driver;

/* gVisor's runsc, as scripts/install-runsc builds it (which reads these two lines): the
 * Go module's version and its go.sum hash. The driver runs RUNSC_PATH only when
 * RUNSC_PATH.version holds this version. */
#define RUNSC_MODULE_VERSION "v0.0.0-20260905035102-160fafc42237"
#define RUNSC_MODULE_SUM "h1:AU5+CtCvnBnxdZRNcZt1NfSLqgkXZVT3N/u6u1aXg44="
#define RUNSC_PATH "/opt/runtime/bin/runsc"
/* Whether the gvisor driver can run here: 0, or a negative errno with why in err
 * (runsc missing, the wrong version, not root-owned). */
int sandbox_gvisor_available(err_t *err);

/* Removes what a sandbox id that no longer exists may have left, whichever driver
 * built it (every driver's sweep is this one). */
int sandbox_sweep(const struct sandbox_host *host, const char *id);

/* Drivers by name ("ns", "gvisor"); NULL if unknown. */
const struct sandbox_driver *sandbox_driver_find(const char *name);

#endif
