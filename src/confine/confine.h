/* confine: what a process does to itself to give up power — seccomp filters,
 * capability and uid drops. Used for sandboxed processes and for the daemon's
 * own unprivileged server and signer. */
#ifndef RUNTIME_CONFINE_H
#define RUNTIME_CONFINE_H

#include <sys/types.h>

#include "../common/common.h"

/* The deny-list for code inside a sandbox: mount, ptrace, kexec, modules, bpf,
 * keyrings, userfaultfd, perf events, new namespaces, io_uring, clock changes,
 * modify_ldt, NUMA, vsock sockets... (docs/seccomp.md). Denied calls fail with
 * EPERM; a call through another ABI (x32, i386) kills the process. */
int confine_sandbox_seccomp(err_t *err);

/* The same deny-list's call names (n of them), for filters made elsewhere: the gvisor
 * driver gives gVisor an OCI seccomp profile of them for the programs it runs. */
const char *const *confine_sandbox_denied_names(size_t *n);

/* Compiles the sandbox filter once, for the forks of this process to install
 * (the keeper calls it at start). Without it, confine_sandbox_seccomp compiles the
 * filter in each call. */
int confine_sandbox_prepare(err_t *err);

/* The server's filter: the sandbox list plus execve, setns and the calls a
 * network daemon never needs. */
int confine_server_seccomp(err_t *err);

/* The signer's filter: an allow-list (its socket, memory that is never executable,
 * what OpenSSL's signing asks of the kernel); any other call kills it. Sanitized builds
 * also allow what their leak check needs, and fail other calls with EPERM. */
int confine_signer_seccomp(err_t *err);
/* The signer's rlimits: no core, 8 descriptors, no new process of its uid (sanitized
 * builds: no process limit, their leak check starts one). */
int confine_signer_limits(err_t *err);

/* Drops every capability (bounding, ambient, inheritable) then becomes uid/gid,
 * with no supplementary groups and no_new_privs. */
int confine_drop_to(uid_t uid, gid_t gid, err_t *err);

#endif
