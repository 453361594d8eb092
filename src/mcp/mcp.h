/* mcp: the MCP servers of a sandbox (docs/gateway.md): their lives as processes.
 *
 * A server is installed in its sandbox (catalog entries: npm with scripts off, exact
 * version, egress narrowed to the registry), started as one long-running stdio process,
 * initialized once, and fingerprinted: its tool list must match the approved one or it
 * is refused; it is restarted when it exits and stopped with its sandbox. Its clients
 * are the gateway's (src/gateway), which works on the objects declared below and hears
 * from this folder only through struct mcp_clients. */
#ifndef RUNTIME_MCP_H
#define RUNTIME_MCP_H

#include <jansson.h>
#include <stdio.h>

#include "../common/common.h"
#include "../fingerprint/fingerprint.h"
#include "../httpd/httpd.h"
#include "../meter/meter.h"
#include "../model/model.h"
#include "../policy/policy.h"
#include "../proto/proto.h"
#include "../server/server.h"

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
/* Runtime Cloud's DELETE .../mcp: every server stops; whether one was running. */
bool mcp_stop_all(struct server *srv, struct sbx *sb);
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

/* The policy the sandbox's egress applies: its own network settings, narrowed to the
 * package registry while a server installs, and widened by the catalog hosts of its
 * running servers. */
int mcp_policy(struct sbx *sb, const struct model_network *network, struct policy *out, err_t *err);
/* Writes the gateway's request counters and latencies of sb's servers (Prometheus). */
void mcp_metrics_write(struct sbx *sb, FILE *f);

/* ---- the servers' objects, which the gateway works on ---- */

#define MCP_PENDING_SLOTS 4096         /* per process; a power of two */
#define MCP_SERVER_BACKLOG (16u << 20) /* unsent bytes to a process before requests fail */
#define MCP_NAME_MAX MODEL_MCP_NAME_MAX
#define MCP_VERSION_LATEST "2025-11-25"
#define MCP_VERSION_MODERN "2026-07-28"     /* stateless: no initialize, _meta per request */
#define MCP_META "io.modelcontextprotocol/" /* the prefix of the revision's _meta keys */

/* The gateway's objects, which these only point to (src/gateway). */
struct mcp_session;
struct mcp_stream;
struct mcp_listen;

enum mcp_status { MCP_INSTALLING, MCP_STARTING, MCP_READY, MCP_FAILED, MCP_REFUSED, MCP_STOPPED };

/* A fingerprinted tool list: each tool's canonical text, sorted by name. */
struct mcp_tool {
    char *name;
    char *canon;
};
struct mcp_toolset {
    struct mcp_tool *v;
    size_t n;
    char sha256[65];
    char *canon; /* the whole list's canonical text: what was hashed */
};

struct mcp_box {
    struct server *srv;
    struct sbx *sb;
    char link[33];  /* 128 random bits */
    char token[65]; /* 256 random bits */
    struct mcp_server *servers;
    struct mcp_waiter *waiters;
    int installing;        /* installs running now */
    uint8_t state_key[32]; /* signs requestState (mrtr.c); memory only */
    char registry[256];    /* host of the package registry, once known */
    char pip_index[512];   /* URL of pip's index, once known */
    struct event *keepalive;
    struct budget *history; /* what the sessions keep for resumption (transport.c) */
};

struct mcp_server {
    struct mcp_box *box;
    char name[MCP_NAME_MAX];
    struct model_mcp_server config; /* as started */
    json_t *entry;                  /* catalog entry (borrowed from the catalog) or NULL */
    bool installed;
    bool per_session; /* isolation "session" */
    enum mcp_status status;
    uint64_t status_ms; /* when it entered its status: the phase's seconds, statusSeconds */
    char error[1024];
    json_t *warnings;
    bool has_approved;
    struct mcp_toolset approved;
    /* The list the gate refused at a start, or held back while the server ran: what a
     * review shows and an approval takes (approve.c). Empty when there is none. */
    struct mcp_toolset pending;
    json_t *approvals;          /* [{by, at, old, new}], oldest first: who approved which list */
    char seen[65];              /* sha256 of the list the process showed last */
    char *served;               /* canonical tools array clients see */
    json_t *served_json;        /* the same, parsed once for answers */
    json_t *served_names;       /* names in served */
    struct mcp_backend *shared; /* the one process (isolation "shared") */
    struct mcp_session *sessions;
    size_t n_sessions;
    struct mcp_session *contexts; /* 2026-07-28 requests in flight (modern.c) */
    size_t n_parks;               /* ... of them waiting on the client for input */
    struct mcp_listen *listens;   /* subscriptions/listen streams (listen.c) */
    size_t n_listens;
    struct server_run *install;
    server_run_done step_done; /* what the install step running now goes on to */
    struct evbuffer *log;      /* logs.c: its output, the last MCP_LOG_RING bytes */
    uint64_t log_total;        /* ... of this many written */
    struct mcp_log_follower *log_followers;
    struct event *restart_timer;
    struct mcp_template_call *template_call; /* a template being saved or restored */
    unsigned restarts;
    uint64_t started_ms;
    uint64_t requests;                 /* POSTs served, for /metrics */
    uint64_t notifications_dropped;    /* methods MCP does not define for clients, for /metrics */
    struct mcp_calls *calls;           /* calls.c: the latest tools/calls, made at the first */
    struct rate_limit dropped_reports; /* their events and log lines */
    struct meter_histogram latency;
    struct mcp_server *next;
};

/* A request the gateway sent to a process, waiting for its answer. */
struct mcp_backend;
typedef void (*mcp_internal_fn)(struct mcp_backend *be, json_t *msg, const char *line, size_t len);
struct mcp_pending {
    int64_t id;                  /* 0: free */
    struct mcp_session *session; /* NULL for the gateway's own requests */
    json_t *client_id;
    json_t *client_token; /* the client's progress token, or NULL */
    struct mcp_stream *stream;
    mcp_internal_fn internal;
    /* A 2026-07-28 process asking a 2025 session for input (stdio_modern.c): the
     * request, for its retry, and the answers gathered so far. */
    json_t *request;
    json_t *inputs;
    unsigned awaiting, rounds;
    json_t *tool;        /* a tools/call's tool name (calls.c), or NULL */
    uint64_t started_ms; /* ... when it was sent */
};

struct mcp_backend {
    struct mcp_server *server;
    struct mcp_session *owner; /* isolation "session": the session it serves */
    int in_fd, out_fd, err_fd, status_fd;
    struct event *in_ev, *out_ev, *err_ev, *status_ev, *deadline;
    struct evbuffer *to_server, *from_server;
    double out_tokens;      /* bytes of its output that may be read now (MCP_OUTPUT_RATE) */
    uint64_t out_ms;        /* ... as of then */
    struct event *out_rest; /* reading its output again once the rate allows */
    struct budget *budget;  /* its sandbox's: what waits in to_server is charged to it */
    size_t charged;
    char errtail[2048];
    size_t errtail_len;
    enum { BE_INIT, BE_LISTING, BE_READY, BE_DEAD } state;
    bool spoke;   /* a first line came on stdout (it must be JSON-RPC) */
    json_t *held; /* its requests while several clients wait (session.c) */
    struct event *held_ev;
    bool modern;            /* the process speaks only 2026-07-28 (stdio_modern.c) */
    mcp_internal_fn opened; /* ... what its discover answer goes on to */
    int64_t next_id;
    struct mcp_pending pend[MCP_PENDING_SLOTS];
    size_t n_pending;
    char **pages; /* tools/list pages while listing */
    size_t *page_len, n_pages;
    bool relisting;
    json_t *init_result; /* the process's initialize result */
    int exit_code;
    void (*on_ready)(struct mcp_backend *be, int r, const char *error);
    struct mcp_start *start;   /* the keeper's answer to its exec, while not in */
    struct mcp_batch *parsing; /* its lines at the parser: what it wrote next waits */
    bool exit_due;             /* it exited while they were: its end waits for them */
    struct proto_exec_status exit_status;
    ssize_t exit_status_len;
};

/* box.c */
const char *mcp_status_name(enum mcp_status s);
/* Records an event of the server's sandbox; fields (taken) get "server". */
void mcp_event(struct mcp_server *ms, const char *kind, json_t *fields);
/* The daemon's log line about a server: its sandbox (id, name), account and server. */
void mcp_log(const struct mcp_server *ms, bool warn, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
struct mcp_box *mcp_box_find_link(struct server *srv, const char *link);
struct mcp_server *mcp_server_find(struct mcp_box *box, const char *name);

/* calls.c: the latest tools/calls a server got through the gateway, for the dashboard
 * (GET .../mcp/{name}/calls): a tool, when, how long, and its outcome (ok, error,
 * refused by the gate, lost when the process ended). In memory, the newest
 * MCP_CALLS_KEPT a server. */
#define MCP_CALLS_KEPT 32
/* A tools/call was sent for p (its name kept, its clock started). */
void mcp_call_sent(struct mcp_pending *p, json_t *msg);
/* p's answer came (msg; NULL: the process ended first, why says so). */
void mcp_call_answered(struct mcp_server *ms, struct mcp_pending *p, json_t *msg, const char *why);
/* The gateway refused a call (its answer, refusal) before it reached the process. */
void mcp_call_refused(struct mcp_server *ms, json_t *msg, json_t *refusal);
/* {total, failed, recent: [{tool, at, ms, outcome, error?}], newest first}. */
json_t *mcp_calls_json(const struct mcp_server *ms);
void mcp_calls_free(struct mcp_server *ms);
/* The server of that name in the sandbox, or NULL with -ENOENT in err. */
struct mcp_server *mcp_server_of(struct sbx *sb, const char *name, err_t *err);

/* approve.c: the review of a server's tool list, {name, status, approved, current,
 * pending, changes, findings, approvals} (api/openapi.yaml McpReview); -ENOENT when the
 * sandbox has no such server. */
int mcp_review(struct sbx *sb, const char *name, json_t **out, err_t *err);
/* The same for a catalog entry before any start: its reviewed list (catalog/tools.json),
 * as both approved and current, with its findings. -ENOENT: no such entry, or no list. */
int mcp_catalog_review(json_t *catalog, const char *id, json_t **out, err_t *err);
/* Approves the server's pending list, which must have this fingerprint (64 hex digits;
 * -EEXIST when it has another, or there is none), recorded as by's; the server then
 * serves it (started again when it was refused). *out: the review after it. */
int mcp_approve(struct sbx *sb, const char *name, const char *fingerprint, const char *by,
                json_t **out, err_t *err);

/* backend.c: a process and its JSON-RPC link. owner: the session of isolation
 * "session" it serves, or NULL (the shared one). */
int mcp_backend_spawn(struct mcp_server *ms, struct mcp_session *owner,
                      void (*on_ready)(struct mcp_backend *be, int r, const char *error),
                      struct mcp_backend **out, err_t *err);
void mcp_backend_free(struct mcp_backend *be);
/* Frees be on the next loop turn: for callers below be's own callbacks. */
void mcp_backend_reap(struct mcp_backend *be);
/* Sends a message (taken) to the process. */
void mcp_backend_send(struct mcp_backend *be, json_t *msg);
/* Registers a request; its id is set in msg. -EAGAIN when too many are pending. */
int mcp_backend_request(struct mcp_backend *be, json_t *msg, struct mcp_pending **out);
/* Frees a pending request; one a session made is counted off by clients->request_done. */
void mcp_pending_clear(struct mcp_backend *be, struct mcp_pending *p);
struct mcp_pending *mcp_pending_find(struct mcp_backend *be, int64_t id);
void mcp_server_process_lost(struct mcp_backend *be, const char *why);
/* Whether m is a JSON-RPC 2.0 message: a request, a notification or a response. */
bool mcp_valid_message(json_t *m);

/* gate.c */
/* Whether the server's tools option lets clients see and call tool (no option: all). */
bool mcp_tool_exposed(const struct mcp_server *ms, const char *tool);
bool mcp_gate_allows(struct mcp_server *ms, const char *tool);

/* stdio_modern.c: a stdio server that speaks only 2026-07-28. The servers' side finds
 * out from its answer to initialize and opens it with server/discover instead; every
 * request to it carries the per-request _meta of what its client declared. */
struct mcp_declared {
    bool sampling, elicitation; /* the client's capabilities (roots: the gateway's) */
    json_t *client_info;        /* borrowed, or NULL */
    int log_level;              /* -1: none */
};
/* Puts the envelope on msg, for a client that declared d (NULL: the gateway's own
 * requests); a 2026-07-28 client's own envelope is left as it is. */
void mcp_stdio_envelope(json_t *msg, const struct mcp_declared *d);

/* What the servers' side tells the gateway, its clients' side: set once at start
 * (the daemon), and the only way the code of this folder reaches the gateway's. */
struct mcp_clients {
    /* A message from a process for its clients: an answer, a request or a
     * notification (borrowed). */
    void (*from_server)(struct mcp_backend *be, json_t *msg);
    /* A request a session sent to be is answered or given up. */
    void (*request_done)(struct mcp_backend *be, struct mcp_session *s);
    /* The process is gone (it exited, or was stopped): its clients hear why. */
    void (*process_lost)(struct mcp_backend *be, const char *why);
    /* A new process after a restart: the updates clients still want are asked again. */
    void (*resubscribe)(struct mcp_server *ms);
    /* The server halts: its sessions, 2026-07-28 requests and listen streams end. */
    void (*server_halted)(struct mcp_server *ms);
    /* A notification (taken) for every client of the server. */
    void (*broadcast)(struct mcp_server *ms, json_t *msg);
    /* Every MCP_KEEPALIVE_MS: the box's open streams hear a comment. */
    void (*keepalive)(struct mcp_box *box);
};
void mcp_set_clients(const struct mcp_clients *clients);

#endif
