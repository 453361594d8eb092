/* The gateway's side of the servers' table (struct mcp_clients): what src/mcp tells
 * the clients of a server, routed to its sessions, requests and listen streams. */
#include "gateway_impl.h"

/* A request a session sent is answered or given up: one fewer in flight, and the
 * process's held requests may be routable now. */
static void request_done(struct mcp_backend *be, struct mcp_session *s)
{
    if (s->pending) s->pending--;
    mcp_held_recheck(be);
}

static void server_halted(struct mcp_server *ms)
{
    mcp_listen_close_all(ms);
    while (ms->contexts)
        mcp_modern_free(ms->contexts);
    while (ms->sessions)
        mcp_session_free(ms->sessions);
}

const struct mcp_clients gateway_clients = {
    .from_server = mcp_route_from_server,
    .request_done = request_done,
    .process_lost = mcp_backend_lost,
    .resubscribe = mcp_resubscribe,
    .server_halted = server_halted,
    .broadcast = mcp_broadcast,
    .keepalive = mcp_keepalive,
};
