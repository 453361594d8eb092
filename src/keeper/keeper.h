/* keeper: the root half of runtimed. It does only privileged work, on typed
 * requests from the server (proto.h), and never touches the network or parses
 * JSON. Requests are gated by state: exec, files, freeze and destroy only for a
 * sandbox this keeper created or adopted. A malformed request ends the session. */
#ifndef RUNTIME_KEEPER_H
#define RUNTIME_KEEPER_H

#include "../sandbox/sandbox.h"

/* The keeper's nice value: its create and destroy work yields the CPU to the
 * server and to sandboxes (whose programs run at 0). */
#define KEEPER_NICE 10

/* Serves requests on sock until the server hangs up; returns the exit status. */
int keeper_main(int sock, const struct sandbox_host *host, const struct sandbox_driver *drv);

#endif
