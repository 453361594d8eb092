/* The sandbox's DNS server: every query it sends, to whatever server it names,
 * arrives here. Allowed names get a synthetic address that the proxy maps back
 * to the name; refused names get NXDOMAIN and an event; AAAA and other types an
 * empty answer (the sandbox has no IPv6 route). Nothing is forwarded. */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../dns/dns.h"
#include "egress_impl.h"

#define DNS_TTL 30
#define DNS_TCP_IDLE_S 10

/* An answer that waits for its name to be written (egress_name_fn), so that no
 * address outlives its meaning: sent once the write is done, to where its query
 * came from. The first for a new name waits for its own write; queries for the
 * same name meanwhile follow it (sent with it). */
struct dns_wait {
    struct egress_sandbox *es; /* NULL once the sandbox is gone */
    struct dns_tcp *tcp;       /* a TCP query's connection; NULL for UDP, or once closed */
    bool udp;
    struct sockaddr_storage from;
    socklen_t flen;
    uint32_t slot;
    bool writing; /* its own write: the caller of on_name holds it until saved */
    bool in_call; /* on_name has not returned yet */
    bool saved;   /* ... and already called saved (out of memory) */
    size_t len;
    uint8_t out[2 + 512]; /* for TCP, with its length in front */
    struct dns_wait *prev, *next;
};

/* An open DNS-over-TCP connection, tracked so a removed sandbox closes it. It
 * reads no further query while its answer waits (answers stay in order). */
struct dns_tcp {
    struct egress_sandbox *es;
    struct bufferevent *bev;
    bool waiting;
    struct dns_tcp *prev, *next;
};

/* Builds the answer to one query; returns its length, or DNS_DROP to stay silent.
 * *slot: the address of a name, for an A answer (0 for any other); *added: the
 * name is new (on_name is to be told). */
static int answer(struct egress_sandbox *es, const uint8_t *msg, size_t len, uint8_t *out,
                  size_t size, uint32_t *slot, bool *added)
{
    *slot = 0;
    *added = false;
    struct dns_question q;
    int r = dns_parse_query(msg, len, &q);
    if (r == DNS_DROP) return DNS_DROP;
    if (r > 0) return dns_build_error(msg, len, NULL, r, out, size);
    char name[POLICY_NAME_MAX];
    if (q.qclass != DNS_CLASS_IN || policy_canon_name(q.name, name, NULL) < 0)
        return dns_build_error(msg, len, &q, DNS_RCODE_NXDOMAIN, out, size);
    enum policy_verdict v = policy_check(&es->pol, name, NULL, 0);
    if (v != POLICY_ALLOW) {
        if (q.qtype == DNS_TYPE_A || q.qtype == DNS_TYPE_AAAA)
            egress_refused(es, name, 0, policy_verdict_name(v), "dns");
        return dns_build_error(msg, len, &q, DNS_RCODE_NXDOMAIN, out, size);
    }
    if (q.qtype != DNS_TYPE_A) return dns_build_answer(msg, &q, NULL, 0, DNS_TTL, out, size);
    /* Each new name is written to the store: new names have a rate of their own. */
    if (!names_has(&es->names, name) && !rate_allow(&es->name_rate, now_ms())) {
        egress_limited(es, LIMIT_NAME_RATE);
        return dns_build_error(msg, len, &q, DNS_RCODE_SERVFAIL, out, size);
    }
    uint32_t ip = names_lookup_or_add(&es->names, name, added);
    if (!ip) return dns_build_error(msg, len, &q, DNS_RCODE_SERVFAIL, out, size);
    *slot = ip - SYNTH_BASE;
    struct in_addr a = {.s_addr = htonl(ip)};
    return dns_build_answer(msg, &q, &a, 1, DNS_TTL, out, size);
}

static void wait_unlink(struct dns_wait *w)
{
    if (w->prev)
        w->prev->next = w->next;
    else if (w->es)
        w->es->dns_waits = w->next;
    if (w->next) w->next->prev = w->prev;
    w->prev = w->next = NULL;
}

static void tcp_read(struct bufferevent *bev, void *arg);

/* Sends a waiting answer where its query came from; a TCP connection reads on. */
static void wait_send(struct egress_sandbox *es, struct dns_wait *w)
{
    if (w->udp) {
        sendto(es->fds[1], w->out, w->len, 0, (struct sockaddr *)&w->from, w->flen);
        return;
    }
    struct dns_tcp *t = w->tcp;
    if (!t) return; /* closed meanwhile */
    bufferevent_write(t->bev, w->out, w->len);
    t->waiting = false;
    bufferevent_enable(t->bev, EV_READ);
    tcp_read(t->bev, t); /* the queries that arrived while it waited */
}

/* The name of slot is saved: its answer and those that followed it go out. */
static void on_saved(int r, const err_t *err, void *arg)
{
    struct dns_wait *w = arg, *ready = NULL;
    if (w->in_call) { /* before on_name returned: its caller sends the answer */
        w->saved = true;
        return;
    }
    struct egress_sandbox *es = r == -ECANCELED ? NULL : w->es; /* at a stop, it is gone */
    if (r < 0 && r != -ECANCELED && es)
        log_warn("sandbox %s: a name not saved (answered anyway): %s", es->id, err->msg);
    if (!es) {
        free(w);
        return;
    }
    /* Out of the list first: sending may read more queries, which may wait too. */
    for (struct dns_wait *o = es->dns_waits, *next; o; o = next) {
        next = o->next;
        if (o->slot != w->slot || (o->writing && o != w)) continue;
        wait_unlink(o);
        o->next = ready;
        ready = o;
    }
    while (ready) {
        struct dns_wait *o = ready;
        ready = o->next;
        wait_send(es, o);
        free(o);
    }
}

static bool slot_being_saved(const struct egress_sandbox *es, uint32_t slot)
{
    for (const struct dns_wait *w = es->dns_waits; w; w = w->next)
        if (w->writing && w->slot == slot) return true;
    return false;
}

/* Whether the answer (out, len) must wait for its name's write: then it is kept,
 * and sent later. A new name is handed to on_name here. */
static bool wait_for_name(struct egress_sandbox *es, uint32_t slot, bool added, const uint8_t *out,
                          size_t len, struct dns_wait *where)
{
    struct egress *eg = es->eg;
    if (!slot || (added ? !eg->on_name : !slot_being_saved(es, slot))) return false;
    struct dns_wait *w = malloc(sizeof *w);
    if (!w) { /* the write is still due: made without its answer waiting */
        if (added)
            eg->on_name(eg->event_arg, es->id, slot, es->names.next - 1,
                        names_by_addr(&es->names, SYNTH_BASE + slot), NULL, NULL);
        return false;
    }
    *w = *where;
    w->es = es;
    w->slot = slot;
    w->writing = added;
    w->len = len;
    memcpy(w->out, out, len);
    w->prev = NULL;
    w->next = es->dns_waits;
    if (w->next) w->next->prev = w;
    es->dns_waits = w;
    if (!added) return true;
    w->in_call = true;
    eg->on_name(eg->event_arg, es->id, slot, es->names.next - 1,
                names_by_addr(&es->names, SYNTH_BASE + slot), on_saved, w);
    w->in_call = false;
    if (!w->saved) return true;
    wait_unlink(w); /* saved at once (out of memory): the answer goes now */
    free(w);
    return false;
}

void dnsstub_drop_waits(struct egress_sandbox *es)
{
    while (es->dns_waits) {
        struct dns_wait *w = es->dns_waits;
        wait_unlink(w);
        w->es = NULL;
        w->tcp = NULL;
        if (!w->writing) free(w); /* a writing one is freed by its on_saved */
    }
}

/* Over the sandbox's query rate a query gets no answer (the resolver retries). */
static bool query_allowed(struct egress_sandbox *es)
{
    if (rate_allow(&es->dns_rate, now_ms())) return true;
    egress_limited(es, LIMIT_DNS_RATE);
    return false;
}

void dnsstub_udp_resume(evutil_socket_t fd, short what, void *arg)
{
    struct egress_sandbox *es = arg;
    event_add(es->udp_ev, NULL);
}

void dnsstub_on_udp(evutil_socket_t fd, short what, void *arg)
{
    struct egress_sandbox *es = arg;
    for (int i = 0; i < 64; i++) {
        uint8_t in[1500], out[512];
        struct sockaddr_storage from;
        socklen_t flen = sizeof from;
        ssize_t n = recvfrom(fd, in, sizeof in, 0, (struct sockaddr *)&from, &flen);
        if (n < 0) return;
        if (!query_allowed(es)) {
            /* Budget spent: stop reading for a moment and let the kernel drop what
             * the socket cannot hold, instead of reading each query to drop it. */
            event_del(es->udp_ev);
            struct timeval tv = {0, 50 * 1000};
            evtimer_add(es->udp_resume, &tv);
            return;
        }
        uint32_t slot;
        bool added;
        int m = answer(es, in, (size_t)n, out, sizeof out, &slot, &added);
        if (m <= 0) continue;
        struct dns_wait where = {.udp = true, .from = from, .flen = flen};
        if (!wait_for_name(es, slot, added, out, (size_t)m, &where))
            sendto(fd, out, (size_t)m, 0, (struct sockaddr *)&from, flen);
    }
}

void dnsstub_tcp_close(struct dns_tcp *t)
{
    for (struct dns_wait *w = t->es->dns_waits; t->waiting && w; w = w->next)
        if (w->tcp == t) w->tcp = NULL;
    t->es->n_dns_conns--;
    t->es->eg->n_conns--;
    if (t->prev)
        t->prev->next = t->next;
    else
        t->es->dns_conns = t->next;
    if (t->next) t->next->prev = t->prev;
    bufferevent_free(t->bev);
    free(t);
}

static void tcp_read(struct bufferevent *bev, void *arg)
{
    struct dns_tcp *t = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    while (!t->waiting) {
        size_t have = evbuffer_get_length(in);
        uint8_t *buf = evbuffer_pullup(in, have < 2 + 65535 ? (ssize_t)have : 2 + 65535);
        if (have >= 2 && buf[0] == 0 && buf[1] == 0) {
            dnsstub_tcp_close(t); /* a zero-length frame never completes */
            return;
        }
        size_t mlen = dns_tcp_frame(buf, have);
        if (mlen == 0) return;
        uint8_t out[2 + 512];
        uint32_t slot = 0;
        bool added = false;
        int m = query_allowed(t->es)
                    ? answer(t->es, buf + 2, mlen, out + 2, sizeof out - 2, &slot, &added)
                    : DNS_DROP;
        evbuffer_drain(in, 2 + mlen);
        if (m <= 0) continue;
        out[0] = (uint8_t)(m >> 8);
        out[1] = (uint8_t)m;
        struct dns_wait where = {.tcp = t};
        if (wait_for_name(t->es, slot, added, out, (size_t)m + 2, &where)) {
            t->waiting = true; /* the rest of the input is read once it is sent */
            bufferevent_disable(bev, EV_READ);
            return;
        }
        bufferevent_write(bev, out, (size_t)m + 2);
    }
}

static void tcp_event(struct bufferevent *bev, short what, void *arg)
{
    dnsstub_tcp_close(arg); /* EOF, error or idle: the connection is done */
}

void dnsstub_on_tcp_accept(evutil_socket_t lfd, short what, void *arg)
{
    struct egress_sandbox *es = arg;
    int fd = egress_accept(es->eg, lfd);
    if (fd < 0) return;
    if (!egress_conn_allowed(es, LIMIT_DNS_TCP, es->n_dns_conns)) {
        close(fd);
        return;
    }
    struct dns_tcp *t = calloc(1, sizeof *t);
    struct bufferevent *bev =
        t ? bufferevent_socket_new(es->eg->base, fd, BEV_OPT_CLOSE_ON_FREE) : NULL;
    if (!bev) {
        free(t);
        close(fd);
        return;
    }
    t->es = es;
    t->bev = bev;
    es->n_dns_conns++;
    es->eg->n_conns++;
    t->next = es->dns_conns;
    if (es->dns_conns) es->dns_conns->prev = t;
    es->dns_conns = t;
    struct timeval idle = {DNS_TCP_IDLE_S, 0};
    bufferevent_setcb(bev, tcp_read, NULL, tcp_event, t);
    bufferevent_set_timeouts(bev, &idle, &idle);
    bufferevent_setwatermark(bev, EV_READ, 0, 2 + 65535);
    bufferevent_enable(bev, EV_READ | EV_WRITE);
}
