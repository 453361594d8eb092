/* Private to the mcp folder: the objects of the gateway and how its files share them.
 *
 *   mcp_box (one per sandbox: link, token)
 *     mcp_server (a configured server: status, approved tools)
 *       mcp_backend (a running stdio process: the JSON-RPC link, pending requests)
 *       mcp_session (a client session: its streams and the requests it sent)
 *         mcp_stream (an HTTP answer in progress: a POST's answers or the GET stream) */
#ifndef RUNTIME_MCP_IMPL_H
#define RUNTIME_MCP_IMPL_H

#include <stdint.h>

#include "../fingerprint/fingerprint.h"
#include "../httpd/httpd.h"
#include "../meter/meter.h"
#include "../proto/proto.h"
#include "../server/server.h"
#include "mcp.h"

#define MCP_PENDING_SLOTS 4096              /* per process; a power of two */
#define MCP_HISTORY 256                     /* SSE events kept per session for Last-Event-ID */
#define MCP_HISTORY_BYTES (8u << 20)        /* ... and at most this many bytes of them */
#define MCP_CLIENT_BACKLOG (16u << 20)      /* unsent bytes to a client before it is dropped */
#define MCP_SERVER_BACKLOG (16u << 20)      /* unsent bytes to a process before requests fail */
#define MCP_LOG_RING (64u << 10)            /* a server's output kept for `logs` */
#define MCP_LOG_FOLLOW_BACKLOG (256u << 10) /* unsent bytes to a follower before it is cut */
#define MCP_NAME_MAX MODEL_MCP_NAME_MAX
#define MCP_VERSION_LATEST "2025-11-25"
#define MCP_VERSION_MODERN "2026-07-28"     /* stateless: no initialize, _meta per request */
#define MCP_META "io.modelcontextprotocol/" /* the prefix of the revision's _meta keys */

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
    unsigned restarts;
    uint64_t started_ms;
    uint64_t requests;                 /* POSTs served, for /metrics */
    uint64_t notifications_dropped;    /* methods MCP does not define for clients, for /metrics */
    struct rate_limit dropped_reports; /* their events and log lines */
    struct meter_histogram latency;
    struct mcp_server *next;
};

/* Lines a process wrote on stdout, to be parsed and routed in order (parse.c). */
struct mcp_line {
    char *text;
    size_t len;
    json_t *msg; /* once parsed: the message, or NULL when the line is not JSON */
};
struct mcp_batch {
    struct mcp_backend *be; /* the loop's: NULL once the backend is gone */
    struct mcp_line *lines;
    size_t n, bytes;
    bool parsed;
    void (*done)(struct mcp_batch *b); /* on the loop, once parsed */
    struct mcp_batch *next;
};
#define MCP_PARSE_INLINE 4096 /* bytes of lines the loop parses itself (~45 us) */

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

/* An HTTP answer in progress. A POST's stream ends when its last answer is out; the
 * GET stream lives until the client leaves. */
struct mcp_stream {
    struct mcp_session *session;
    struct httpd_req *req; /* NULL while no client is attached */
    unsigned number;
    unsigned seq;
    bool is_get;
    bool gone;           /* the client left; answers go to the history only */
    bool sse;            /* answering with text/event-stream */
    int waiting;         /* answers still due (POST) */
    bool batch;          /* the client sent an array (2025-03-26) */
    int status;          /* JSON mode: the HTTP status of the answer (0: 200) */
    json_t *answers;     /* JSON mode: answers collected */
    uint64_t started_ns; /* for the latency metric */
    struct mcp_stream *next;
};

struct mcp_event {
    unsigned stream, seq;
    char *data;
};

/* What a 2026-07-28 request declared: each request says it all, nothing carries over. */
struct mcp_modern {
    char method[32];
    json_t *caps;          /* clientCapabilities */
    int log_level;         /* the lowest level of notifications/message it wants; -1: none */
    json_t *preanswers;    /* inputResponses of a call that carried no requestState */
    char digest[65];       /* what a requestState must be for: method, name or uri, arguments */
    json_t *uri;           /* resources/read: the resource, for a not-found error's data */
    struct mcp_park *park; /* while the process waits on the client for input (mrtr.c) */
};

/* A client session (2025 revisions), or the context of one 2026-07-28 request (modern
 * set: not in ms->sessions, no id, no history; freed with its answer). */
struct mcp_session {
    struct mcp_server *server;
    struct mcp_modern *modern;
    struct mcp_backend *be; /* the shared process, or its own */
    char id[33];
    char version[16];
    bool sampling, elicitation, roots;
    json_t *client_info;
    struct mcp_stream *streams;
    struct mcp_stream *get; /* the standalone GET stream, or NULL */
    unsigned next_stream;
    struct mcp_event *history; /* MCP_HISTORY of them; NULL for modern contexts */
    int log_level;             /* logging/setLevel, for a 2026-07-28 process; -1: none */
    size_t history_next, history_bytes;
    json_t *subscriptions; /* resource uris */
    json_t *asks;          /* our id (string) -> the process's id for its requests to us */
    int64_t next_ask;
    size_t pending;
    uint64_t last_used_ms;
    struct httpd_req *init_req; /* initialize waiting for its own process */
    json_t *init_id;
    struct mcp_session *next;
};

/* box.c */
const char *mcp_status_name(enum mcp_status s);
void mcp_server_set_status(struct mcp_server *ms, enum mcp_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void mcp_box_save(struct mcp_box *box);
void mcp_box_changed(struct mcp_box *box);
/* Records an event of the server's sandbox; fields (taken) get "server". */
void mcp_event(struct mcp_server *ms, const char *kind, json_t *fields);
/* A catalog server's package manager ("npm" or "pip"); NULL for one's own server. */
const char *mcp_manager(const struct mcp_server *ms);
/* Seconds since the server entered its status (to the millisecond). */
double mcp_status_seconds(const struct mcp_server *ms);
/* The daemon's log line about a server: its sandbox (id, name), account and server. */
void mcp_log(const struct mcp_server *ms, bool warn, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
struct mcp_box *mcp_box_find_link(struct server *srv, const char *link);
struct mcp_server *mcp_server_find(struct mcp_box *box, const char *name);

/* logs.c */
/* Adds bytes to the server's log (and sends them to its followers). */
void mcp_log_write(struct mcp_server *ms, const void *data, size_t len);
void mcp_log_printf(struct mcp_server *ms, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Ends the followers and frees the log. */
void mcp_log_free(struct mcp_server *ms);

/* install.c */
void mcp_install(struct mcp_server *ms);
/* The index URL in `pip config list` output, or PyPI's (exposed for tests). */
void mcp_pip_index(const char *config, char *url, size_t size);
void mcp_install_cancel(struct mcp_server *ms);
void mcp_apply_policy(struct mcp_box *box);

/* backend.c: a process and its JSON-RPC link. */
int mcp_backend_spawn(struct mcp_server *ms, struct mcp_session *owner,
                      void (*on_ready)(struct mcp_backend *be, int r, const char *error),
                      struct mcp_backend **out, err_t *err);
void mcp_backend_free(struct mcp_backend *be);
/* Frees be on the next loop turn: for callers below be's own callbacks. */
void mcp_backend_reap(struct mcp_backend *be);
/* The process serving a session now (NULL while it is restarting). */
struct mcp_backend *mcp_session_backend(struct mcp_session *s);
/* Sends a message (taken) to the process. */
void mcp_backend_send(struct mcp_backend *be, json_t *msg);
/* Registers a request; its id is set in msg. -EAGAIN when too many are pending. */
int mcp_backend_request(struct mcp_backend *be, json_t *msg, struct mcp_pending **out);
void mcp_pending_clear(struct mcp_backend *be, struct mcp_pending *p);
struct mcp_pending *mcp_pending_find(struct mcp_backend *be, int64_t id);
void mcp_server_start(struct mcp_server *ms);
void mcp_server_halt(struct mcp_server *ms);
void mcp_server_process_lost(struct mcp_backend *be, const char *why);

/* parse.c: the parser thread. */
/* Queues b to be parsed off the loop; b->done gets it back on the loop. <0 when the
 * thread cannot run (the caller parses it itself). */
int mcp_parser_submit(struct event_base *base, struct mcp_batch *b);
void mcp_batch_parse(struct mcp_batch *b);
void mcp_batch_free(struct mcp_batch *b);

/* gate.c */
/* Whether the server's tools option lets clients see and call tool (no option: all). */
bool mcp_tool_exposed(const struct mcp_server *ms, const char *tool);
int mcp_toolset_from_pages(char **pages, const size_t *lens, size_t n, struct mcp_toolset *out,
                           err_t *err);
int mcp_toolset_from_canon(const char *canon, struct mcp_toolset *out, err_t *err);
void mcp_toolset_clear(struct mcp_toolset *t);
/* Checks a fresh list against the approval; 0 when it may serve (approving it when there
 * was no approval), -EPERM with what changed in err. */
int mcp_gate_check(struct mcp_server *ms, struct mcp_toolset *fresh, err_t *err);
/* A list that came while running: serves the approved tools it still has unchanged. */
void mcp_gate_relist(struct mcp_server *ms, struct mcp_toolset *fresh);
void mcp_gate_serve_all(struct mcp_server *ms);
bool mcp_gate_allows(struct mcp_server *ms, const char *tool);

/* session.c */
struct mcp_session *mcp_session_find(struct mcp_server *ms, const char *id);
void mcp_session_free(struct mcp_session *s);
void mcp_sessions_expire(struct mcp_server *ms);
/* A message from the process for a client (response, request or notification). */
void mcp_route_from_server(struct mcp_backend *be, json_t *msg);
void mcp_backend_lost(struct mcp_backend *be, const char *why);
bool mcp_valid_message(json_t *m);
/* Whether method (of a message without an id) is a notification MCP lets a client send a
 * server. Any other is dropped with mcp_notification_dropped: a tools/call sent as a
 * notification would reach the process past the tools option and the fingerprint gate. */
bool mcp_client_notification(const char *method);
/* Counts a notification the gateway dropped, and reports it (an mcp.refused event and a
 * log line, at most a few a second). */
void mcp_notification_dropped(struct mcp_server *ms, json_t *msg);
/* Messages from a client on a POST: 0, or an HTTP status to reply with. */
int mcp_session_post(struct mcp_session *s, struct httpd_req *req, json_t *body);
void mcp_session_initialize(struct mcp_server *ms, struct httpd_req *req, json_t *msg);
void mcp_broadcast(struct mcp_server *ms, json_t *msg); /* taken */
/* A request that waited on the process is done: held requests may be routable now. */
void mcp_held_recheck(struct mcp_backend *be);

/* transport.c: HTTP and SSE. */
struct mcp_stream *mcp_stream_new(struct mcp_session *s, struct httpd_req *req, bool get);
void mcp_stream_send(struct mcp_stream *st, json_t *msg, bool is_answer);
void mcp_stream_free(struct mcp_stream *st);
void mcp_stream_resume(struct mcp_session *s, struct httpd_req *req, const char *last_id);
void mcp_http_json(struct httpd_req *req, int status, const char *session_id, json_t *v);
void mcp_http_error(struct httpd_req *req, int status, json_t *id, int code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
void mcp_keepalive(struct mcp_box *box);
void mcp_sse_comment(struct httpd_req *req, const char *text); /* ": text" */
/* Adds an SSE "message" event carrying data (JSON text on one line) to out. */
void mcp_sse_message(struct evbuffer *out, const char *data, size_t len);
/* Frees a session's events kept for resumption (given back to its sandbox's budget). */
void mcp_history_free(struct mcp_session *s);

/* session.c, shared with the 2026-07-28 path */
/* The capabilities clients are told, from the process's initialize result. */
json_t *mcp_client_capabilities(json_t *server_result);
/* The gate's answer to a tools/call that may not run (a JSON-RPC error), or NULL. */
json_t *mcp_call_refusal(struct mcp_server *ms, json_t *msg);
/* Sends a client's request to the session's process; the answer goes to st. */
void mcp_forward(struct mcp_session *s, struct mcp_stream *st, json_t *msg);
/* The pending request of s at its process (a modern context has at most one). */
struct mcp_pending *mcp_session_pending(struct mcp_session *s);

/* modern.c: 2026-07-28 requests. */
enum mcp_era { MCP_ERA_LEGACY, MCP_ERA_MODERN, MCP_ERA_NOTIFICATION, MCP_ERA_REJECT };
struct mcp_headers {
    const char *version, *method, *name; /* MCP-Protocol-Version, Mcp-Method, Mcp-Name */
};
struct mcp_verdict {
    enum mcp_era era;
    int status, code; /* MCP_ERA_REJECT: HTTP status and JSON-RPC error */
    char message[300];
    json_t *data; /* error data, or NULL (owned) */
};
/* Which revision a POST body speaks, and whether its envelope and headers hold
 * (pure: no I/O). The caller frees v->data. */
void mcp_modern_classify(json_t *body, const struct mcp_headers *h, struct mcp_verdict *v);
/* Mcp-Name's value as compared: OWS trimmed, =?base64?...?= decoded; -EINVAL if bad. */
int mcp_name_decode(const char *raw, char *out, size_t size);
void mcp_modern_post(struct mcp_server *ms, struct httpd_req *req, json_t *msg);
/* The process answered a modern context's request (msg taken, its id the client's). */
void mcp_modern_answered(struct mcp_session *ctx, struct mcp_stream *st, json_t *msg);
/* The client of a modern request left before its answer: the call is cancelled. */
void mcp_modern_gone(struct mcp_session *ctx);
void mcp_modern_free(struct mcp_session *ctx);
/* Tells the process the context's call is off (its answer would have nowhere to go). */
void mcp_modern_cancel(struct mcp_session *ctx, const char *reason);
/* Whether a notifications/message of level (its name) goes to ctx. */
bool mcp_modern_wants_log(struct mcp_session *ctx, const char *level);
json_t *mcp_modern_error(json_t *id, int code, const char *message, json_t *data);

/* mrtr.c: the process's sampling and elicitation requests as input_required results. */
void mcp_mrtr_ask(struct mcp_session *ctx, json_t *msg);
/* A retry carrying requestState: resumes the parked call. */
void mcp_mrtr_resume(struct mcp_server *ms, struct httpd_req *req, json_t *msg, const char *state);
/* The digest a requestState is bound to, of a tools/call, prompts/get or resources/read. */
void mcp_mrtr_digest(json_t *msg, char out[65]);
void mcp_park_free(struct mcp_session *ctx);
/* The process cancelled its request process_id: if a park held it, it is asked no more. */
bool mcp_mrtr_withdrawn(struct mcp_server *ms, json_t *process_id);
/* The parked call's final answer came while no retry held it. */
void mcp_park_keep_final(struct mcp_session *ctx, json_t *msg);

/* stdio_modern.c: a stdio server that speaks only 2026-07-28. The gateway finds out from
 * its answer to initialize, opens with server/discover instead, puts the envelope on
 * every request, and for 2025 sessions turns its input_required results into requests
 * to the client and the answers into the retry. */
/* Whether an initialize error is a 2026-07-28-only server's (-32022 naming no 2025
 * version); then discovers, and calls done as initialize's answer would. */
bool mcp_stdio_refused_2025(struct mcp_backend *be, json_t *msg, mcp_internal_fn done);
/* The per-request _meta for a request to a modern process (what the session declared;
 * s NULL: the gateway's own request). */
void mcp_stdio_envelope(struct mcp_backend *be, struct mcp_session *s, json_t *msg);
/* After the gate: asks the process for its list changes (subscriptions/listen). */
void mcp_stdio_listen(struct mcp_backend *be);
/* The process's answer for a 2025 session: input_required is asked of the client and
 * retried (true: taken care of); a complete result loses the 2026 fields. */
bool mcp_stdio_answer(struct mcp_backend *be, struct mcp_pending *p, json_t *msg);
/* A 2025 client's answer to one of those asks (ask: the gateway's record of it). */
void mcp_stdio_input(struct mcp_backend *be, json_t *ask, json_t *msg);
int mcp_log_level(const char *name); /* 0 (debug) ... 7 (emergency); -1: not a level */

/* listen.c: subscriptions/listen streams. */
void mcp_listen_open(struct mcp_server *ms, struct httpd_req *req, json_t *msg);
/* A list_changed or resources/updated notification for the streams that asked for it. */
void mcp_listen_notify(struct mcp_server *ms, json_t *msg);
void mcp_listen_close_all(struct mcp_server *ms);
void mcp_listen_keepalive(struct mcp_server *ms);
/* Whether any session or listen stream still wants updates of uri. */
bool mcp_resource_wanted(struct mcp_server *ms, json_t *uri);
/* Asks a new process for the updates sessions and listen streams want. */
void mcp_resubscribe(struct mcp_server *ms);

/* jsonrpc helpers */
json_t *mcp_error_msg(json_t *id, int code, const char *message);
json_t *mcp_result_msg(json_t *id, json_t *result); /* result taken */

#endif
