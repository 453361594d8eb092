/* Private to the httpd folder: connections (conn.c) and requests (req.c). */
#ifndef RUNTIME_HTTPD_IMPL_H
#define RUNTIME_HTTPD_IMPL_H

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "../http/http.h"
#include "httpd.h"

#define HTTPD_CLIENT_BUCKETS 256
/* Connections taken per wakeup of a listener: few, so that a flood of them (each
 * an accept, and maybe an eviction) interleaves with everyone's requests. */
#define HTTPD_ACCEPT_BATCH 4
/* An answer before a close may take this long to leave; what the client sends
 * meanwhile is read and dropped, up to an upload refused (a client that proved its
 * key) or a little (one that did not: then reading stops, so that no flood of its
 * is read, and it can still read its answer). */
#define HTTPD_CLOSE_LINGER_MS 5000
#define HTTPD_LINGER_MAX_BYTES (80u << 20)
#define HTTPD_LINGER_MAX_UNTRUSTED (256u << 10)
#define HTTPD_FD_LOG_EVERY_MS 10000 /* "out of descriptors" at most this often */
#define HTTPD_MAX_OUT_FIELDS 4096   /* bytes of fields an answer may add */

/* One client address and its TCP connections. */
struct httpd_client {
    char key[48]; /* IPv4 address, or the /64 of an IPv6 one */
    size_t conns;
    struct httpd_client *next;
};

enum conn_state {
    CONN_IDLE,    /* waiting for a request (kept alive, or just accepted) */
    CONN_HEAD,    /* some of a head is in */
    CONN_ADMIT,   /* the head callback runs, or the application answers without a body */
    CONN_BODY,    /* reading a body the application asked for */
    CONN_SERVING, /* the application has the request */
    CONN_CLOSING, /* the last answer leaves, then the connection closes */
};

struct httpd_conn {
    struct httpd *h;
    struct bufferevent *bev;
    struct httpd_client *client; /* NULL on the unix socket */
    bool local;
    bool tls;
    bool lingering; /* the answer is out; reading what comes until the client's EOF */
    size_t discarded;
    bool trusted; /* made a request the application admitted (httpd_trust) */
    enum conn_state state;
    struct httpd_req *req;     /* the request being read or served */
    struct event *timer;       /* the deadline of the state */
    struct event *later;       /* runs the next step outside libevent's callbacks */
    bool cut;                  /* close at the next step (budget spent, httpd_cut) */
    bool must_close;           /* close after the answer (httpd refused the request) */
    bool budget_spent;         /* cut because its stream's budget was spent */
    size_t scanned;            /* bytes of the head searched for its end so far */
    struct budget *out_budget; /* charged for the unsent bytes of a stream */
    size_t out_charged;
    struct httpd_conn *prev, *next; /* the TCP list (oldest first), or the local one */
};

struct httpd_req {
    struct httpd *h;
    struct httpd_conn *conn; /* NULL once the client left */
    struct http_request head;
    char *head_buf; /* the head's bytes: head's spans point here */
    const char *query;
    enum httpd_method method;
    char id[24]; /* "req_" and 16 hex digits: the x-request-id of its answer */
    bool keep_alive;
    struct evbuffer *out_fields; /* "Name: value\r\n" */
    bool streaming;
    bool budget_spent;   /* its client was dropped because the budget was spent */
    size_t backlog_left; /* ... with this much unsent */
    /* The body */
    uint64_t body_left; /* bytes of the body still to come */
    size_t body_max;
    struct evbuffer *body;
    httpd_body_fn *body_done;
    void *body_arg;
    struct budget *budget;
    size_t body_charged;
    /* The application's */
    void *data;
    httpd_gone_fn *gone;
    void *gone_arg;
};

struct httpd_listener {
    struct httpd *h;
    int fd;
    bool local;
    httpd_tls_fn *tls;
    void *tls_arg;
    struct event *ev, *retry;
    struct httpd_listener *next;
};

struct httpd {
    struct event_base *base;
    struct httpd_limits lim;
    struct httpd_handlers hd;
    struct httpd_listener *listeners;
    struct httpd_conn *tcp_first, *tcp_last, *local_first;
    size_t n_tcp, n_local;
    struct httpd_client *clients[HTTPD_CLIENT_BUCKETS];
    int spare_fd; /* given up to accept and close a connection when out of descriptors */
    uint64_t nofile, nofile_ms; /* RLIMIT_NOFILE, and when it was looked at */
    uint64_t fd_logged_ms;
    struct httpd_stats st;
};

/* conn.c */
/* The request is done with (answered): the connection reads the next, or closes. */
void conn_request_done(struct httpd_conn *c, bool close_after);
/* Reads the body the head callback asked for. */
void conn_start_body(struct httpd_conn *c);
/* Closes now, dropping what is queued (the request, if any, stays the
 * application's: it learns through on_gone). */
void conn_cut(struct httpd_conn *c);
/* Charges the unsent bytes of a stream to b. */
void conn_charge_output(struct httpd_conn *c, struct budget *b);

/* req.c */
struct httpd_req *req_new(struct httpd *h, struct httpd_conn *c);
/* Takes the parsed head (its bytes are copied). */
int req_set_head(struct httpd_req *r, const char *buf, const struct http_request *head);
/* The client left: on_gone runs, answers go nowhere. */
void req_client_gone(struct httpd_req *r);
/* Bytes of the body, as they arrive; false when the budget is spent. */
bool req_body_add(struct httpd_req *r, struct evbuffer *from, size_t n);
void req_free(struct httpd_req *r);
/* httpd's own error answer, formatted by the application. */
void req_fail(struct httpd_req *r, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
