/* Private to the drivers: the pieces their files share. Not part of the
 * subsystem's interface (that is sandbox.h). The gvisor driver (gvisor.c) builds on
 * the ns driver's pieces: the same root, workspace, network namespace, cgroup and
 * file helpers, with runsc running the programs. */
#ifndef RUNTIME_SANDBOX_NS_IMPL_H
#define RUNTIME_SANDBOX_NS_IMPL_H

#include "sandbox.h"
#include <jansson.h>

struct sandbox {
    struct sandbox_spec spec;
    const struct sandbox_host *host; /* borrowed; lives as long as the keeper */
    char dir[640];                   /* STATE/sandboxes/<id> */
    pid_t init_pid; /* ns: the sandbox's pid 1; gvisor: the holder of its namespaces */
    int init_pidfd;
    struct cgroup *cg;
    bool gvisor;    /* built by the gvisor driver: runsc runs its programs */
    int boot_pidfd; /* gvisor: runsc's sandbox process (the sentry); -1 for ns */
};

/* The keeper holds a descriptor or two for each sandbox (its init's pidfd, gVisor's
 * sentry's) for as long as it lives: those go above SANDBOX_FD_FLOOR, so that the few a
 * call opens and closes (netlink sockets: libnftables waits on its socket with select(),
 * which aborts on a descriptor past FD_SETSIZE) keep the low numbers however many
 * sandboxes there are. Returns the moved descriptor (fd is closed), or fd as it was. */
#define SANDBOX_FD_FLOOR 1024
int sandbox_fd_high(int fd);

/* The host uid of uid `inside` of sandbox sb: in its slot's range of the daemon's block. */
static inline uid_t ns_host_uid(const struct sandbox *sb, uint32_t inside)
{
    return sb->host->uid_base + sb->spec.slot * SANDBOX_UID_RANGE + inside;
}

/* ns.c: the pieces of the ns driver that the gvisor driver uses too. ns_build makes
 * the sandbox's directory, workspace, cgroup and first process (with gvisor, the
 * holder: gvisor.c); the others are the ns driver's calls. */
struct sandbox *ns_sandbox_alloc(const struct sandbox_host *host, const struct sandbox_spec *spec,
                                 bool gvisor);
int ns_build(const struct sandbox_host *host, const struct sandbox_spec *spec, bool reuse_workspace,
             bool gvisor, struct sandbox **out, err_t *err);
/* The cgroup limits of a sandbox of this spec (with gvisor: room for runsc's own). */
struct cgroup_limits ns_limits(const struct sandbox_spec *spec, bool gvisor);
int ns_stop(struct sandbox *sb, err_t *err);
int ns_sweep(const struct sandbox_host *host, const char *id);
/* Removes what the gvisor driver keeps in dir beside the root and the workspace: the
 * bundle, runsc's state, a hibernated sandbox's image, the shim's socket, the inner
 * netns's pin (ns_sweep calls it; a stop too, so that a start finds no container of the
 * same id). */
void gvisor_remove_state(const char *dir);
/* rm -r of path, never leaving its file system. */
void ns_remove_tree(const char *path);
/* Where a hibernated gvisor sandbox's checkpoint lies, in its directory. */
#define GVISOR_IMAGE "image"

/* gvisor.c: the pieces templates (template.c) are made of. */
/* Runs runsc with words (global flags may come before the command) in the sandbox, with
 * in_fd and out_fd as its stdin and stdout (-1: /dev/null), and waits for it. */
int gvisor_runsc(struct sandbox *sb, const char *const *words, int in_fd, int out_fd, err_t *err);
#define RUNSC_TIMEOUT_MS 30000 /* what any runsc command may take */
/* The same in two steps, for runs that must overlap (a restore's containers). */
struct runsc_job {
    pid_t pid;
    int errfd;           /* runsc's stderr when the caller gave none, for the error message */
    const char *command; /* for the message */
};
int gvisor_runsc_start(struct sandbox *sb, const char *const *words, const int stdio[3],
                       struct runsc_job *job, err_t *err);
int gvisor_runsc_wait(struct runsc_job *job, err_t *err);
/* The last line runsc wrote on stderr (fd: a file, read from its start, or a pipe,
 * non-blocking), for an error message; "" when it wrote none. */
void gvisor_runsc_said(int fd, bool from_start, char *out, size_t n);
/* The sandbox's bundle (config.json), and its agent's capabilities. */
json_t *gvisor_bundle_json(const struct sandbox *sb);
json_t *gvisor_agent_capabilities(void);
/* Asks the shim kind (enum shim_request) with payload and nfds descriptors (at most 4),
 * and takes its answer, with nanswer descriptors when it is 0: the answer, or -errno. */
int gvisor_shim_call(struct sandbox *sb, uint32_t kind, const void *payload, size_t len,
                     const int *fds, int nfds, int *answer, int nanswer);

/* serve.c: MCP servers in containers of their own (docs/gvisor.md). */
#define GVISOR_SERVERS "servers" /* their bundles, in the sandbox's directory */
/* Starts ex in a container of its own: fds as the driver's exec answers. -EILSEQ (nothing
 * done) when ex cannot be put in a bundle: the agent starts it instead. */
int gvisor_serve(struct sandbox *sb, const struct sandbox_exec *ex, int fds[4], err_t *err);
/* Deletes the containers of servers no longer running; returns how many are left. */
int gvisor_servers_prune(struct sandbox *sb);
/* runsc's record of every server's container goes, their bundles stay (for a restore). */
void gvisor_servers_delete(struct sandbox *sb);
/* Forgets every server's container: the sentry they ran in is gone. */
void gvisor_servers_forget(struct sandbox *sb);
/* While the root's `runsc restore` (root, started) runs, restores each server's
 * container from the same image with the pipes the shim kept, then waits for all. */
int gvisor_servers_restore(struct sandbox *sb, const char *image_flag, bool any_spec,
                           struct runsc_job *root, err_t *err);
/* Templates (template.c): the one server running in a container of its own, its name and
 * its container's process (a new reference): 0, -ENOENT when none runs, -EBUSY when more
 * than one does. */
int gvisor_server_of_template(struct sandbox *sb, char name[64], json_t **process);
/* Before a template's image is restored into sb: its server's bundle (name, process)
 * and pipes, given to the shim; fds as gvisor_serve's. The restore then gives the
 * container the shim's ends. */
int gvisor_server_from_template(struct sandbox *sb, const char *name, json_t *process, int fds[4],
                                err_t *err);
/* Ends what runs (a sentry a restore left, the shim) and starts it cold, as at create. */
int gvisor_start_again(struct sandbox *sb, err_t *err);
/* Restores image into the sandbox; any_spec: an image another sandbox's spec made. */
int gvisor_restore_image(struct sandbox *sb, const char *image, bool any_spec, err_t *err);
void gvisor_forget_container(struct sandbox *sb);
/* A request to the shim (agent/frame.h) with no descriptors in its answer: its status. */
int gvisor_shim_tell(struct sandbox *sb, uint32_t kind, int fd);
/* SHIM_ADOPT: the four pipes of program id, which the restored agent runs. */
int gvisor_shim_adopt(struct sandbox *sb, uint32_t id, int fds[4], err_t *err);
uint64_t gvisor_dir_bytes(const char *dir);

/* template.c */
int gvisor_template_save(struct sandbox *sb, const char *key, const char *server,
                         uint64_t *image_bytes, err_t *err);
int gvisor_template_restore(struct sandbox *sb, const char *key, const char *server, int fds[5],
                            err_t *err);
int ns_freeze(struct sandbox *sb, bool frozen, err_t *err);
int ns_stats(struct sandbox *sb, struct sandbox_stats *st);
void ns_free(struct sandbox *sb);

/* workspace.c: the size-capped /workspace as an ext4 image on a loop device. */
int workspace_create(const struct sandbox_host *host, const char *image, uint32_t disk_mib,
                     err_t *err);
/* Attaches image to a free loop device that detaches itself on last close. */
int workspace_attach(const char *image, int *loop_fd, err_t *err);
/* Waits until no loop device holds the image whose resolved path is real: the kernel
 * detaches a sandbox's device when its last mount goes, which can lag behind the end of
 * its processes (a kill -9 of all of them: seen once in CI). A restart must not mount the
 * image a second time while the first mount is still going away. -EBUSY after
 * timeout_ms. */
#define WORKSPACE_RELEASE_POLL_MS 5
#define WORKSPACE_RELEASE_MS 5000
int workspace_wait_released(const char *real, int timeout_ms, err_t *err);

/* rootfs.c: runs in the new sandbox's first process, as host root in fresh
 * mount/pid/net/ipc/uts namespaces; builds the root and pivots into it. */
int rootfs_build(const struct sandbox_host *host, const struct sandbox *sb, int loop_fd,
                 err_t *err);
/* The gvisor driver's: the same root at sb->dir/root, in its holder's own mount
 * namespace, without /proc, /dev or the pivot (gVisor makes its own) and with the
 * sandbox's agent at GVISOR_AGENT_PATH. */
int rootfs_build_for_gvisor(const struct sandbox_host *host, const struct sandbox *sb, int loop_fd,
                            err_t *err);

/* net.c, from a keeper thread that enters the sandbox's network namespace:
 * loopback, the route and the nft rules (before the sandbox's first process is let
 * go), and the daemon's listening sockets made inside it. */
int ns_net_setup(struct sandbox *sb, err_t *err);
/* The gvisor driver's (ns_net_setup calls it): the veth between the holder's namespace
 * and the inner one the holder pinned at dir/netns, which runsc gives gVisor's stack. */
int gvisor_net_setup(struct sandbox *sb, err_t *err);
/* Before a restore: the inner veth's address and route again (runsc took them). */
int gvisor_net_readdress(struct sandbox *sb, err_t *err);
#define GVISOR_VETH_OUTER "rt-host"
#define GVISOR_VETH_INNER "eth0"
#define GVISOR_OUTER_ADDR "10.200.0.1" /* also the sandbox's nameserver */
#define GVISOR_INNER_ADDR "10.200.0.2"
int ns_net_sockets(struct sandbox *sb, int fds[3], err_t *err);

/* init.c: execs the sandbox's pid 1 program (from sandbox_init_prepare's memfd).
 * Returns only when it cannot (no memfd, or the exec was refused); the caller
 * then stays pid 1 itself. */
void ns_exec_init(void);
/* The gvisor driver's agent (src/sandbox/agent/agent.c), written to a new file (mode
 * 0555); runsc starts it as the container's pid 1 from GVISOR_AGENT_PATH in its root,
 * a read-only bind of the one copy at STATE/AGENT_SHARED_NAME (sandbox_agent_install). */
int agent_image_write(const char *path);
#define GVISOR_AGENT_PATH "/.runtime-agent"
#define AGENT_SHARED_NAME "runtime-agent"
/* Execs the gvisor driver's shim (src/sandbox/agent/shim.c) from its memfd with fds as its
 * descriptors 3 to 8 (and every other above 2 closed); returns only when it cannot. */
#define GVISOR_SHIM_FDS 6
void gvisor_exec_shim(const int fds[GVISOR_SHIM_FDS]);
/* What a gvisor sandbox's cgroup allows beyond its limits, for runsc's sentry and gofer.
 * gVisor counts the programs' tasks against the sandbox's pids limit in its own cgroup
 * (the init sets it); under systrap each task also costs the host stub processes and
 * threads (about 2.4 a task, docs/gvisor.md), so the host's limit is four per task and
 * room for the sentry's own, never the one met first. Memory has no such limit inside:
 * a sandbox whose programs exceed it is ended whole by the host's cgroup. */
#define GVISOR_MEMORY_EXTRA_MIB 64
#define GVISOR_HOST_PIDS_PER_TASK 4
#define GVISOR_PIDS_EXTRA 256

/* exec.c */
/* In a forked helper (ns_helper, files.c's): the sandbox's mount namespace and so its
 * root, the sandbox user's identity (no other groups, dies with the keeper, umask
 * 022); the root to resolve paths in. */
int ns_enter_as_user(const struct sandbox *sb);
/* openat2 within root: no step may leave it (RESOLVE_IN_ROOT) or follow a magic link. */
int ns_open_in_root(int root, const char *path, uint64_t flags, unsigned mode);
/* The directory path's last step is in (resolved within root, O_PATH) and that step's
 * name: "/a/b/c" gives /a/b and "c"; -EINVAL for "/", "." or "..". */
int ns_parent_of(int root, const char *path, const char **name);
int ns_helper(struct sandbox *sb, int (*fn)(struct sandbox *sb, const void *arg, int *fds),
              const void *arg, int *fds, unsigned nfds);
/* The ns driver's exec: a monitor (a forked helper) forks the program into the sandbox,
 * enforces its timeout and reports how it ended on the status pipe. */
int ns_exec(struct sandbox *sb, const struct sandbox_exec *ex, int fds[4], err_t *err);

int ns_rename_file(struct sandbox *sb, const char *from, const char *to, bool keep_mode,
                   err_t *err);
int ns_open_file(struct sandbox *sb, const char *path, unsigned write, unsigned mode, int *fd,
                 err_t *err);

/* files.c: the file-tree operations (FILE_OP), each in a helper of its own that the
 * keeper does not wait for (its SIGCHLD reaps it). */
int ns_file_op(struct sandbox *sb, const struct proto_file_op *op, int *fd, err_t *err);

#endif
