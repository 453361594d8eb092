/* mcp: the MCP servers of a sandbox and the gateway to them (docs/gateway.md).
 *
 * A server is installed in its sandbox (catalog entries: npm with scripts off, exact
 * version, egress narrowed to the registry), started as one long-running stdio process,
 * initialized once by the gateway, and fingerprinted: its tool list must match the
 * approved one or it is refused. Agents reach it at {publicUrl}/mcp/{link}/{server}
 * over MCP Streamable HTTP with the sandbox's bearer token; the gateway answers each
 * client's initialize itself, remaps request ids and progress tokens per session and
 * routes the server's own requests (sampling, elicitation) back to a client. */
#ifndef RUNTIME_MCP_H
#define RUNTIME_MCP_H

#include <jansson.h>
#include <stdio.h>

#include "../common/common.h"
#include "../model/model.h"
#include "../policy/policy.h"

/* Limits, each with a default (docs/architecture.md, "Limits (defaults)"). */
#define MCP_MAX_MESSAGE (4u << 20) /* one JSON-RPC message, either way */
#define MCP_MAX_SERVERS 16         /* per sandbox */
#define MCP_MAX_SESSIONS 256       /* client sessions per server */
#define MCP_MAX_PENDING 256        /* unanswered requests per session */
/* Per sandbox, processes of isolation "session" (4 descriptors each). */
#define MCP_MAX_SESSION_PROCESSES 64
#define MCP_SESSION_IDLE_MS (3600 * 1000) /* a session nobody used for an hour ends */
#define MCP_INSTALL_TIMEOUT_MS (15 * 60 * 1000)
#define MCP_START_TIMEOUT_MS (60 * 1000) /* from spawn to a fingerprinted tool list */
#define MCP_KEEPALIVE_MS (15 * 1000)
/* A server's output is read at most this fast, after a burst: the daemon's loop is
 * every sandbox's, and a server that floods its stdout (notifications by the
 * thousand) would spend it; past the rate it waits, and so do its own clients. */
#define MCP_OUTPUT_RATE (8u << 20)   /* bytes a second */
#define MCP_OUTPUT_BURST (32u << 20) /* bytes */
/* 2026-07-28 (modern.c, mrtr.c, listen.c) */
#define MCP_MAX_PARKS 256               /* calls waiting on their clients' input, per server */
#define MCP_MAX_INPUTS 16               /* input requests in one input_required result */
#define MCP_PARK_TTL_MS (5 * 60 * 1000) /* how long a parked call waits for its retry */
#define MCP_INPUT_GATHER_MS 20          /* requests this close go into one result... */
#define MCP_INPUT_GATHER_MAX_MS 200     /* ... for at most this long */
#define MCP_MAX_LISTENS 256             /* subscriptions/listen streams per server */
#define MCP_MAX_LISTEN_URIS 64          /* resources one listen stream subscribes to */
/* A server request while several clients wait is held this long for one to be left. */
#define MCP_HOLD_MS 3000
#define MCP_MAX_HELD 64         /* ... at most this many per process */
#define MCP_MAX_INPUT_ROUNDS 10 /* a 2026 process asking a 2025 client, per request */

struct server;
struct sbx;
struct mcp_box;
struct httpd_req;

/* Loads the sandbox's servers from the store and starts the ones that were running
 * (after a daemon restart). Nothing to do when it never had any. */
int mcp_box_restore(struct server *srv, struct sbx *sb, err_t *err);
/* Stops every server of the sandbox and ends its client sessions. */
void mcp_box_free(struct mcp_box *box);
/* The sandbox's MCP servers (its gateway slot), or NULL when it has none. */
struct mcp_box *mcp_box_of(const struct sbx *sb);

/* The gateway's hooks into a sandbox's life (struct server_hooks, filled in by the
 * daemon): mcp_box_restore above, mcp_policy and mcp_metrics_write below, and: */
void mcp_sandbox_halted(struct sbx *sb); /* frees its box (its stored state stays) */
bool mcp_sandbox_busy(struct sbx *sb);   /* installing, starting */
void mcp_sandbox_egress_event(struct sbx *sb, const char *kind, json_t *fields);

/* POST /v1/sandboxes/{id}/mcp: validates body {servers:[...]} and starts them; *out is
 * the status answer. -EINVAL/-ENOENT/-EEXIST with a message for the user. */
int mcp_start(struct server *srv, struct sbx *sb, json_t *body, json_t **out, err_t *err);
/* DELETE /v1/sandboxes/{id}/mcp/{name}. */
int mcp_stop(struct server *srv, struct sbx *sb, const char *name, err_t *err);
/* GET /v1/sandboxes/{id}/mcp[?wait=S]: answers now, or once no server is installing or
 * starting, or after wait_ms. */
void mcp_status_reply(struct server *srv, struct sbx *sb, struct httpd_req *req, uint32_t wait_ms);
/* GET /v1/sandboxes/{id}/mcp/{name}/logs[?follow=1]: the server's output as text/plain;
 * with follow, the answer stays open and gets what the server writes next. -ENOENT
 * (nothing sent) when there is no such server. */
int mcp_logs_reply(struct server *srv, struct sbx *sb, const char *name, struct httpd_req *req,
                   bool follow, err_t *err);
/* The servers' part of the status answer ({servers:[...]}, no token), for the
 * sandbox object's `mcp`. */
json_t *mcp_servers_json(struct mcp_box *box);
/* The catalog (borrowed), for GET /v1/mcp/catalog. */
json_t *mcp_catalog(struct server *srv);

/* The gateway: every request under /mcp/, once its head is in. It checks the
 * Host, the Origin and the sandbox's token before it reads the body. */
void mcp_gateway_head(struct server *srv, struct httpd_req *req);
/* An error of the HTTP server's own, as the gateway answers errors. */
void mcp_gateway_fail(struct httpd_req *req, int status, const char *message);

/* DNS rebinding and cross-site calls: whether a Host header names this gateway (the
 * public URL's authority, the listen address, and loopback names when it listens on
 * loopback), and whether an Origin header (NULL: none) may call (the public URL's
 * origin and loopback origins, such as the MCP Inspector's). */
bool mcp_host_allowed(const char *public_url, const char *listen, const char *host);
bool mcp_origin_allowed(const char *public_url, const char *origin);

/* The policy the sandbox's egress applies: its own network settings, narrowed to the
 * package registry while a server installs, and widened by the catalog hosts of its
 * running servers. */
int mcp_policy(struct sbx *sb, const struct model_network *network, struct policy *out, err_t *err);
/* Writes the gateway's request counters and latencies of sb's servers (Prometheus). */
void mcp_metrics_write(struct sbx *sb, FILE *f);

#endif
