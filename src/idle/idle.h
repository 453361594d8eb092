/* idle: idle pause. A sandbox nobody used for its idlePauseSeconds (no gateway
 * request, no exec, no file call, nothing under way) is paused: frozen with its
 * memory and servers kept (server_sandbox_pause). The next request resumes it. A
 * gvisor sandbox paused for its hibernateAfterSeconds then hibernates: its memory
 * goes to disk (server_sandbox_hibernate, docs/hibernation.md). */
#ifndef RUNTIME_IDLE_H
#define RUNTIME_IDLE_H

struct server;

/* Pauses every sandbox idle for long enough: the server's once-a-second hook. */
void idle_tick(struct server *srv);

#endif
