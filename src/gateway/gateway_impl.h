/* Private to the gateway folder: its objects and how its files share them.
 *
 *   mcp_server (src/mcp)
 *     mcp_session (a client session: its streams and the requests it sent)
 *       mcp_stream (an HTTP answer in progress: a POST's answers or the GET stream) */
#ifndef RUNTIME_GATEWAY_IMPL_H
#define RUNTIME_GATEWAY_IMPL_H

#include <stdint.h>

#include "gateway.h"

#define MCP_HISTORY 256                /* SSE events kept per session for Last-Event-ID */
#define MCP_HISTORY_BYTES (8u << 20)   /* ... and at most this many bytes of them */
#define MCP_CLIENT_BACKLOG (16u << 20) /* unsent bytes to a client before it is dropped */

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

/* session.c */
/* The process serving a session now (NULL while it is restarting). */
struct mcp_backend *mcp_session_backend(struct mcp_session *s);
struct mcp_session *mcp_session_find(struct mcp_server *ms, const char *id);
void mcp_session_free(struct mcp_session *s);
void mcp_sessions_expire(struct mcp_server *ms);
/* A message from the process for a client (response, request or notification). */
void mcp_route_from_server(struct mcp_backend *be, json_t *msg);
void mcp_backend_lost(struct mcp_backend *be, const char *why);
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

/* inputs.c: a 2026-07-28-only process asking a 2025 session for input. */
/* The process's answer for a 2025 session: input_required is asked of the client and
 * retried (true: taken care of); a complete result loses the 2026 fields. */
bool mcp_stdio_answer(struct mcp_backend *be, struct mcp_pending *p, json_t *msg);
/* A 2025 client's answer to one of those asks (ask: the gateway's record of it). */
void mcp_stdio_input(struct mcp_backend *be, json_t *ask, json_t *msg);
/* The envelope of what session s declared at initialize. */
void mcp_session_envelope(struct mcp_session *s, json_t *msg);
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

/* revision.c: the protocol revisions, one row each. */
struct mcp_revision {
    const char *version;
    bool stateless; /* no initialize, no sessions, _meta on every request (2026-07-28) */
    bool batches;   /* a POST may carry an array of messages (2025-03-26) */
};
const struct mcp_revision *mcp_revision(const char *version); /* NULL: not spoken here */
/* The revision when it is one with sessions (the 2025 ones), else NULL. */
const struct mcp_revision *mcp_revision_with_sessions(const char *version);
json_t *mcp_revisions_json(void); /* every version, newest first */
/* "2025-11-25, 2025-06-18 and 2025-03-26" (with_stateless: 2026-07-28 first). */
const char *mcp_revisions_text(bool with_stateless);

/* JSON-RPC messages */
json_t *mcp_error_msg(json_t *id, int code, const char *message);
json_t *mcp_result_msg(json_t *id, json_t *result); /* result taken */

#endif
