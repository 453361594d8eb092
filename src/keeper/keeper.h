/* keeper: the root half of runtimed. It does only privileged work, on typed
 * requests from the server (proto.h), and never touches the network or parses
 * JSON. Requests are gated by state: exec, files, freeze and destroy only for a
 * sandbox this keeper created or adopted. A malformed request ends the session.
 * It reads only the files it was told of at start (keeper_files), for TLS. */
#ifndef RUNTIME_KEEPER_H
#define RUNTIME_KEEPER_H

#include "../sandbox/sandbox.h"

/* The keeper's nice value: its create and destroy work yields the CPU to the
 * server and to sandboxes (whose programs run at 0). */
#define KEEPER_NICE 10

/* The files the keeper reads for the server, as given at start: root-only files
 * the server could not open. The keeper copies their bytes and never parses them. */
struct keeper_files {
    const char *tls_cert; /* --tls-cert, NULL or "" for none */
    const char *tls_key;  /* --tls-key */
};

/* The server's pid (watch), and how it ended if the keeper reaped it (a wait
 * status; -1 while the keeper has not reaped it). */
void keeper_watch(pid_t pid);
int keeper_watched_status(void);

/* The host-wide register of uid blocks (sandbox.h): REGISTRY/<b> holds the real path of
 * the state directory whose daemon holds block b. */
#define KEEPER_UID_REGISTRY "/var/lib/runtime-uid-blocks"

/* This daemon's uid block, into *block: the one STATE/uid-block names (kept across
 * restarts, since the workspaces' files are owned by its uids), else the lowest block no
 * other daemon holds, then recorded there. A block is held while its register entry names
 * a state directory whose uid-block names it; an entry whose directory is gone or names
 * another block is taken over. A state directory from before blocks (a database and no
 * uid-block) takes block 0, its old layout, or fails. Under an exclusive lock of
 * REGISTRY/.lock, so that daemons starting at once take different blocks. */
int keeper_uid_block_claim(const char *registry, const char *state_dir, uint32_t *block,
                           err_t *err);

/* Serves requests on sock until the server hangs up; returns the exit status. drivers:
 * by enum proto_driver, NULL where that driver cannot run here. */
int keeper_main(int sock, const struct sandbox_host *host,
                const struct sandbox_driver *const drivers[PROTO_DRIVER_COUNT],
                const struct keeper_files *files);

#endif
