/* httpd: the daemon's HTTP/1.1 server, for the API and the gateway.
 *
 * It exists because what an unauthenticated client may cost has to be decided
 * before that client gets anything: libevent's evhttp reads a whole body before
 * any callback runs and has no notion of who a connection belongs to. Here:
 *
 *  - a request's head is read with the strict parser of src/http (anything two
 *    parsers could read differently is refused), within head_ms of the
 *    connection being ready for it (a TLS handshake counts);
 *  - the application's `head` callback sees the head before a byte of the body
 *    is read: it authenticates and either answers (the body is never read; the
 *    connection closes after the answer) or asks for the body with the most
 *    bytes that route may take (httpd_read_body); a Content-Length past it is a
 *    413 at once, and "Expect: 100-continue" is honoured only then;
 *  - connections are counted per client address and in total; at either limit
 *    a new connection takes the place of the oldest one that never made an
 *    admitted request and is not being served, or is refused. A connection that
 *    made an admitted request (httpd_trust) is never evicted, so a flood of
 *    unauthenticated connections cannot push out the clients that hold keys;
 *  - running out of descriptors refuses new connections and nothing else (a
 *    spare descriptor is kept to accept and close them, so they do not queue);
 *  - what the server holds for a request (its body, its unsent answer) can be
 *    charged to a byte budget (struct budget, common.h): past it, the body is
 *    refused and a stream is cut, which fails that budget's owner only.
 *
 * A request lives until it is answered (httpd_reply, or httpd_stream_end after
 * httpd_stream_start), even when its client leaves first: answering it then
 * only frees it. Everything runs on the caller's event loop. */
#ifndef RUNTIME_HTTPD_H
#define RUNTIME_HTTPD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/common.h"

struct event_base;
struct evbuffer;
struct ssl_ctx_st;
struct httpd;
struct httpd_req;

enum httpd_method {
    HTTPD_GET,
    HTTPD_POST,
    HTTPD_PUT,
    HTTPD_DELETE,
    HTTPD_OPTIONS,
    HTTPD_HEAD,
    HTTPD_OTHER, /* parsed, never served: the application answers 405 */
};

struct httpd_limits {
    /* TCP connections open at once (the unix socket has its own). 0: a quarter
     * of the descriptors the process may hold now (the rest are egress,
     * processes, files), at least 16 and at most 4096, looked at every second,
     * so that a lower limit set later is followed. */
    size_t max_conns;
    /* TCP connections of one address (IPv4, or an IPv6 /64). 0: an eighth of
     * max_conns, at least 8. */
    size_t max_per_client;
    size_t max_local;      /* unix socket connections (root only, never evicted) */
    size_t max_head;       /* bytes of a request line and its fields */
    uint32_t head_ms;      /* from ready-for-a-request (accept, TLS included) to a whole head */
    uint32_t idle_ms;      /* a kept-alive connection with no request coming */
    uint32_t body_idle_ms; /* no byte of a body being read for this long: 408 */
};

/* The defaults: connections as above, heads of 64 KiB within 10 s, 120 s idle. */
void httpd_limits_default(struct httpd_limits *l);

struct httpd_handlers {
    /* The head is in, nothing of the body is read: answer now, or call
     * httpd_read_body. Called again for no other reason. */
    void (*head)(struct httpd_req *req, void *arg);
    /* An error of httpd's own (a head that does not parse, a body too large or
     * too slow, a budget spent): the application formats it and answers. */
    void (*fail)(struct httpd_req *req, int status, const char *code, const char *message,
                 void *arg);
    void *arg;
};

struct httpd *httpd_new(struct event_base *base, const struct httpd_limits *limits,
                        const struct httpd_handlers *handlers);
/* Frees the listeners and every connection; requests not answered are freed
 * with them, without their callbacks (at shutdown). */
void httpd_free(struct httpd *h);
/* Serves a listening socket (taken). tls: the context for new connections of a
 * TCP listener, looked up at each accept (so a reload applies to the next), or
 * NULL for plain. local: the unix socket (its own limit, never evicted). */
typedef struct ssl_ctx_st *httpd_tls_fn(void *arg);
int httpd_listen(struct httpd *h, int fd, bool local, httpd_tls_fn *tls, void *tls_arg, err_t *err);

/* Counters for /metrics. */
struct httpd_stats {
    uint64_t open, local_open;
    uint64_t accepted, refused, evicted, fd_exhausted;
    uint64_t head_timeouts, bad_heads, body_refused, cut;
};
void httpd_get_stats(const struct httpd *h, struct httpd_stats *out);

/* ---- a request ---- */

enum httpd_method httpd_method(const struct httpd_req *req);
/* The path as the parser normalised it (unreserved escapes decoded, no dot or
 * empty segment, no encoded '/', control or backslash), without the query. */
const char *httpd_path(const struct httpd_req *req);
/* Its id, sent as x-request-id with its answer ("req_" and 16 hex digits). */
const char *httpd_request_id(const struct httpd_req *req);
/* The query without its '?', "" when none. */
const char *httpd_query(const struct httpd_req *req);
/* The first field of that name (case-insensitive), or NULL. Valid with req. */
const char *httpd_header(const struct httpd_req *req, const char *name);
/* The client's address as connections are counted (IPv4, or the /64 of an IPv6
 * one); "local" for the unix socket, "" once the client left. */
const char *httpd_client_address(const struct httpd_req *req);
/* Whether the client reached the unix socket (local root) rather than TCP. */
bool httpd_is_local(const struct httpd_req *req);
/* The application's pointer, kept with the request. */
void httpd_set_data(struct httpd_req *req, void *data);
void *httpd_data(const struct httpd_req *req);

/* The client proved who it is: its connection is never evicted, and it is kept
 * alive after the answer (an unproven connection closes after each answer). */
void httpd_trust(struct httpd_req *req);
/* Charges what the server holds for this request from now on (the body being
 * read, the answer not yet sent) to b (referenced until the request ends). */
void httpd_charge(struct httpd_req *req, struct budget *b);

/* From the head callback: reads the body (at most max bytes; more is a 413),
 * then calls done. A method without a body calls done at once. */
typedef void httpd_body_fn(struct httpd_req *req, void *arg);
void httpd_read_body(struct httpd_req *req, size_t max, httpd_body_fn *done, void *arg);
/* The body read (possibly empty), until the request ends. */
struct evbuffer *httpd_body(struct httpd_req *req);
/* Frees the body early, once parsed: a long-lived request keeps nothing of it. */
void httpd_drop_body(struct httpd_req *req);

/* ---- answers ---- */

/* Adds a field to the answer (before the reply or the stream's start). */
void httpd_add_header(struct httpd_req *req, const char *name, const char *value);
/* Answers with status and body (NULL: none; its bytes are moved), and ends the
 * request: req is freed. */
void httpd_reply(struct httpd_req *req, int status, struct evbuffer *body);
void httpd_reply_bytes(struct httpd_req *req, int status, const char *content_type,
                       const void *data, size_t len);

/* A streamed answer (chunked; text/event-stream and NDJSON): start, send, end. */
void httpd_stream_start(struct httpd_req *req, int status);
/* 0, or -EPIPE when the client is gone (the bytes are dropped). */
int httpd_stream_send(struct httpd_req *req, const void *data, size_t len);
/* The same with an evbuffer's bytes (moved). */
int httpd_stream_send_buffer(struct httpd_req *req, struct evbuffer *buf);
void httpd_stream_end(struct httpd_req *req); /* frees req */
/* Ends a request nobody will answer any more (its client left): frees it. */
void httpd_abandon(struct httpd_req *req);
/* Bytes written and not yet taken by the client (once it is gone: those left). */
size_t httpd_backlog(const struct httpd_req *req);
/* Drops the client now (one that does not read): on_gone runs, the request
 * stays until it is answered as any other whose client left. */
void httpd_cut(struct httpd_req *req);
/* Whether the client is still there. */
bool httpd_connected(const struct httpd_req *req);
/* Whether it was dropped because its budget was spent (not because it left). */
bool httpd_budget_spent(const struct httpd_req *req);
/* Called once if the client leaves (or is cut) before the request is answered. */
typedef void httpd_gone_fn(struct httpd_req *req, void *arg);
void httpd_on_gone(struct httpd_req *req, httpd_gone_fn *fn, void *arg);

#endif
