/* Private to the ns driver: the pieces its files share. Not part of the
 * subsystem's interface (that is sandbox.h). */
#ifndef RUNTIME_SANDBOX_NS_IMPL_H
#define RUNTIME_SANDBOX_NS_IMPL_H

#include "sandbox.h"

struct sandbox {
    struct sandbox_spec spec;
    const struct sandbox_host *host; /* borrowed; lives as long as the keeper */
    char dir[640];                   /* STATE/sandboxes/<id> */
    pid_t init_pid;
    int init_pidfd;
    struct cgroup *cg;
};

/* The host uid of uid `inside` of sandbox sb: in its slot's range of the daemon's block. */
static inline uid_t ns_host_uid(const struct sandbox *sb, uint32_t inside)
{
    return sb->host->uid_base + sb->spec.slot * SANDBOX_UID_RANGE + inside;
}

/* workspace.c: the size-capped /workspace as an ext4 image on a loop device. */
int workspace_create(const struct sandbox_host *host, const char *image, uint32_t disk_mib,
                     err_t *err);
/* Attaches image to a free loop device that detaches itself on last close. */
int workspace_attach(const char *image, int *loop_fd, err_t *err);

/* rootfs.c: runs in the new sandbox's first process, as host root in fresh
 * mount/pid/net/ipc/uts namespaces; builds the root and pivots into it. */
int rootfs_build(const struct sandbox_host *host, const struct sandbox *sb, int loop_fd,
                 err_t *err);

/* net.c, from a keeper thread that enters the sandbox's network namespace:
 * loopback, the route and the nft rules (before the sandbox's first process is let
 * go), and the daemon's listening sockets made inside it. */
int ns_net_setup(struct sandbox *sb, err_t *err);
int ns_net_sockets(struct sandbox *sb, int fds[3], err_t *err);

/* init.c: execs the sandbox's pid 1 program (from sandbox_init_prepare's memfd).
 * Returns only when it cannot (no memfd, or the exec was refused); the caller
 * then stays pid 1 itself. */
void ns_exec_init(void);

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
int ns_exec(struct sandbox *sb, const struct sandbox_exec *ex, int fds[4], err_t *err);
int ns_rename_file(struct sandbox *sb, const char *from, const char *to, bool keep_mode,
                   err_t *err);
int ns_open_file(struct sandbox *sb, const char *path, unsigned write, unsigned mode, int *fd,
                 err_t *err);

/* files.c: the file-tree operations (FILE_OP), each in a helper of its own that the
 * keeper does not wait for (its SIGCHLD reaps it). */
int ns_file_op(struct sandbox *sb, const struct proto_file_op *op, int *fd, err_t *err);

#endif
