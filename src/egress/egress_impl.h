/* Private to the egress folder. */
#ifndef RUNTIME_EGRESS_IMPL_H
#define RUNTIME_EGRESS_IMPL_H

#include <event2/dns.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include "../secrets/secrets.h"
#include "egress.h"

/* Synthetic addresses the stub hands out: 198.18.0.0/15, reserved for
 * benchmarking, never a real destination, and refused as a literal anyway. */
#define SYNTH_BASE 0xC6120000u /* 198.18.0.0 */
#define SYNTH_COUNT 131072u

struct names {
    char **by_index; /* SYNTH_COUNT slots, allocated on first use */
    uint64_t next;   /* allocations so far: the next slot is 1 + next % (SYNTH_COUNT-1) */
};

/* One direction of a spliced connection: src -> pipe -> dst. */
struct pump {
    struct conn *owner;
    int src, dst;
    int pipe[2];
    size_t in_pipe;
    bool eof, done;
    struct event *rd, *wr;
};

enum conn_state {
    CONN_SNIFFING,
    CONN_RESOLVING,
    CONN_CONNECTING,
    CONN_SPLICING,
    CONN_SIGNING, /* connected; waits for its host's leaf (intercept.c) */
    CONN_INTERCEPTING
};

struct intercept; /* intercept.c: the TLS-terminated half of a connection */
struct signing;   /* intercept.c: a leaf being signed, and the connections it is for */

struct conn {
    struct egress_sandbox *es;
    enum conn_state state;
    int client, upstream;
    uint16_t port;
    char name[POLICY_NAME_MAX]; /* "" when the sandbox dialled an IP literal */
    struct policy_addr literal; /* the literal it dialled, when name is "" */
    struct policy_addr dialled;
    struct event *ev;
    struct evdns_getaddrinfo_request *dns_req;
    struct pump up, down;
    bool intercept;          /* a secret may go to this host: terminate TLS */
    bool plain_http;         /* intercept as plain HTTP: report placeholders, swap none */
    struct intercept *tls;   /* set once intercepting */
    struct signing *signing; /* CONN_SIGNING: what it waits for */
    struct conn *wait_prev, *wait_next; /* the other connections waiting for it */
    struct conn *prev, *next;
};

enum egress_limit {
    LIMIT_CONNS,
    LIMIT_CONN_RATE,
    LIMIT_DNS_TCP,
    LIMIT_DNS_RATE,
    LIMIT_NAME_RATE,
    LIMIT_DAEMON_CONNS,
    LIMIT_COUNT
};

struct egress {
    struct event_base *base;
    size_t n_conns;   /* proxied and DNS-over-TCP connections of all sandboxes */
    size_t max_conns; /* ... at most: what the descriptor limit leaves, over 6 */
    int spare_fd;     /* given up to shed a connection when out of descriptors */
    bool inspect_allowed_tls;
    struct egress_rates rates; /* in force: the defaults filled in */
    struct evdns_base *dns;
    struct egress_pin *pins;
    size_t n_pins;
    egress_event_fn on_event;
    egress_name_fn on_name;
    egress_sign_fn sign;
    void *event_arg;
    struct policy_addr *host_addrs;
    size_t n_host_addrs;
    int nl_fd; /* rtnetlink address notices, -1 if unavailable */
    struct egress_sandbox *sandboxes;
    const struct egress_secrets *secrets;
    void *secrets_arg;
    struct mitm_leaves *leaves; /* leaf key and certificates, when intercepting */
    SSL_CTX *tls_down;          /* toward sandboxes: minted certificates, ALPN http/1.1 */
    SSL_CTX *tls_up;            /* toward real hosts: full verification */
    struct signing *signings;   /* leaves being signed, one per name */
    unsigned char *scratch;     /* redact.c: answer bytes being scanned (one at a time) */
    size_t scratch_cap;
};

struct egress_sandbox {
    struct egress *eg;
    char id[32];
    struct policy pol;
    int fds[3];
    struct event *proxy_ev, *udp_ev, *tcp_ev;
    struct event *udp_resume;    /* re-arms udp_ev after the query budget ran out */
    struct event *accept_resume; /* re-arms proxy_ev after a connection limit was hit */
    struct names names;
    struct conn *conns;
    size_t n_conns;
    struct dns_tcp *dns_conns;
    size_t n_dns_conns;
    struct dns_wait *dns_waits; /* answers waiting for their name to be saved */
    struct rate_limit conn_rate, dns_rate, name_rate;
    uint64_t limit_said_ms[LIMIT_COUNT]; /* when each limit's event last went out */
    struct egress_stats stats;
    struct egress_sandbox *prev, *next;
};

/* names.c */
/* Host-order IPv4 of name, adding it if new (*added), 0 when out of memory. */
uint32_t names_lookup_or_add(struct names *n, const char *name, bool *added);
bool names_has(const struct names *n, const char *name);
void names_restore(struct names *n, uint32_t slot, uint64_t seq, const char *name);
const char *names_by_addr(const struct names *n, uint32_t addr);
void names_clear(struct names *n);

/* proxy.c */
void proxy_on_accept(evutil_socket_t fd, short what, void *arg);
void proxy_accept_resume(evutil_socket_t fd, short what, void *arg);
void conn_close(struct conn *c);
/* Re-judges an open connection after a policy change; closes it if refused. */
void conn_recheck(struct conn *c);

/* pump.c: kernel splicing of both directions once the upstream is connected.
 * Returns 0, or a negative errno when the connection must be closed. */
int pump_start(struct conn *c);
void pump_stop(struct pump *p);

/* intercept.c */
int intercept_init(struct egress *eg, const char *upstream_ca, err_t *err);
void intercept_fini(struct egress *eg);
/* Returns 0, or a negative errno when the connection must be closed. A host
 * whose leaf is not cached parks the connection (CONN_SIGNING) until it is
 * signed; the connection goes on, or is closed, from the loop then. */
int intercept_start(struct conn *c);
/* Frees what interception holds for c, and takes it off the waiters of a leaf. */
void intercept_stop(struct conn *c);

struct evbuffer;
/* redact.c: an intercepted connection's answers through the reflection scan. */
typedef void redactor_report_fn(void *arg, const char *placeholder, const char *encoding);
struct redactor {
    struct egress *eg;
    struct reflect *reflect; /* the values swapped into the connection; NULL before the first */
    unsigned char *held;     /* answer content the scan has not settled */
    size_t held_len, held_cap;
    uint16_t said[REFLECT_VALUES_MAX]; /* encodings reported in this answer, per value */
    redactor_report_fn *report;
    void *arg;
};
void redactor_init(struct redactor *rd, struct egress *eg, redactor_report_fn *report, void *arg);
/* Wipes the values and what is held. */
void redactor_fini(struct redactor *rd);
/* A value swapped into the connection (copied): looked for from now on. */
int redactor_add(struct redactor *rd, const char *value, size_t len, const char *placeholder);
/* A new answer: each value and encoding found in it is reported once. */
void redactor_answer_start(struct redactor *rd);
/* A whole head (or an answer's trailers), scanned in place. */
void redactor_head(struct redactor *rd, char *head, size_t len);
/* Moves n bytes of an answer's content from in to out, scanned; the last few may
 * be kept for the next call. chunked: written to out as a chunk. */
int redactor_content(struct redactor *rd, struct evbuffer *in, size_t n, struct evbuffer *out,
                     bool chunked);
/* The answer's content ended (or the upstream did): what was kept, settled now. */
int redactor_flush(struct redactor *rd, struct evbuffer *out, bool chunked);

/* dnsstub.c */
struct dns_tcp;
struct dns_wait;
void dnsstub_tcp_close(struct dns_tcp *t);
/* The sandbox is going: its waiting answers are never sent. */
void dnsstub_drop_waits(struct egress_sandbox *es);
void dnsstub_on_udp(evutil_socket_t fd, short what, void *arg);
void dnsstub_udp_resume(evutil_socket_t fd, short what, void *arg);
void dnsstub_on_tcp_accept(evutil_socket_t fd, short what, void *arg);

/* egress.c */
/* The host's own addresses, reloaded first if they changed. */
const struct policy_addr *egress_host_addrs(struct egress *eg, size_t *n);
void egress_refused(struct egress_sandbox *es, const char *host, uint16_t port, const char *reason,
                    const char *stage);
/* An intercepted upstream ended in the middle of an answer (or before it):
 * what came was passed on, and this says it was not all. */
void egress_truncated(struct egress_sandbox *es, const char *host, uint16_t port,
                      const char *reason, bool close_notify);
/* Whether es may open one more connection of its kind (LIMIT_CONNS or LIMIT_DNS_TCP):
 * its own count and rate, then the daemon's. Says which limit refused it. */
bool egress_conn_allowed(struct egress_sandbox *es, enum egress_limit kind, size_t open);
/* A limit refused something: a limit.reached event, at most one a second per limit. */
void egress_limited(struct egress_sandbox *es, enum egress_limit which);
/* accept4 of a pending connection: its fd, or accept4's negative errno. When out
 * of descriptors, the connection is accepted with the spare descriptor and closed,
 * so a full backlog cannot spin. */
int egress_accept(struct egress *eg, int lfd);
void egress_allowed(struct egress_sandbox *es, const char *host, uint16_t port,
                    const struct policy_addr *addr);

#endif
