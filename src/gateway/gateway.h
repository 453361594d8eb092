/* gateway: the front door of the MCP servers (docs/gateway.md). Agents reach a server
 * at {publicUrl}/mcp/{link}/{server} over MCP Streamable HTTP with the sandbox's bearer
 * token, in every revision the gateway speaks (revision.c), whatever the server speaks
 * on stdio: the 2025 revisions with sessions (the gateway answers each client's
 * initialize itself, remaps request ids and progress tokens per session, routes the
 * server's own requests back to a client), and 2026-07-28 without. The servers are
 * src/mcp's; what they tell their clients comes through gateway_clients. */
#ifndef RUNTIME_GATEWAY_H
#define RUNTIME_GATEWAY_H

#include "../mcp/mcp.h"

/* The gateway: every request under /mcp/, once its head is in. It checks the
 * Host, the Origin and the sandbox's token before it reads the body. */
void gateway_head(struct server *srv, struct httpd_req *req);
/* An error of the HTTP server's own, as the gateway answers errors. */
void gateway_fail(struct httpd_req *req, int status, const char *message);

/* DNS rebinding and cross-site calls: whether a Host header names this gateway (the
 * public URL's authority, the listen address, and loopback names when it listens on
 * loopback), and whether an Origin header (NULL: none) may call (the public URL's
 * origin and loopback origins, such as the MCP Inspector's). */
bool gateway_host_allowed(const char *public_url, const char *listen, const char *host);
bool gateway_origin_allowed(const char *public_url, const char *origin);

/* The gateway's side of the servers' table (mcp_set_clients takes it). */
extern const struct mcp_clients gateway_clients;

#endif
