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

/* Builds the answer to one query; returns its length, or DNS_DROP to stay silent. */
static int answer(struct egress_sandbox *es, const uint8_t *msg, size_t len, uint8_t *out,
                  size_t size)
{
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
    bool added;
    /* Each new name is written to the store: new names have a rate of their own. */
    if (!names_has(&es->names, name) && !rate_allow(&es->name_rate, now_ms())) {
        egress_limited(es, LIMIT_NAME_RATE);
        return dns_build_error(msg, len, &q, DNS_RCODE_SERVFAIL, out, size);
    }
    uint32_t ip = names_lookup_or_add(&es->names, name, &added);
    if (!ip) return dns_build_error(msg, len, &q, DNS_RCODE_SERVFAIL, out, size);
    if (added && es->eg->on_name)
        es->eg->on_name(es->eg->event_arg, es->id, ip - SYNTH_BASE, es->names.next - 1, name);
    struct in_addr a = {.s_addr = htonl(ip)};
    return dns_build_answer(msg, &q, &a, 1, DNS_TTL, out, size);
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
        int m = answer(es, in, (size_t)n, out, sizeof out);
        if (m > 0) sendto(fd, out, (size_t)m, 0, (struct sockaddr *)&from, flen);
    }
}

/* An open DNS-over-TCP connection, tracked so a removed sandbox closes it. */
struct dns_tcp {
    struct egress_sandbox *es;
    struct bufferevent *bev;
    struct dns_tcp *prev, *next;
};

void dnsstub_tcp_close(struct dns_tcp *t)
{
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
    for (;;) {
        size_t have = evbuffer_get_length(in);
        uint8_t *buf = evbuffer_pullup(in, have < 2 + 65535 ? (ssize_t)have : 2 + 65535);
        if (have >= 2 && buf[0] == 0 && buf[1] == 0) {
            dnsstub_tcp_close(t); /* a zero-length frame never completes */
            return;
        }
        size_t mlen = dns_tcp_frame(buf, have);
        if (mlen == 0) return;
        uint8_t out[2 + 512];
        int m =
            query_allowed(t->es) ? answer(t->es, buf + 2, mlen, out + 2, sizeof out - 2) : DNS_DROP;
        evbuffer_drain(in, 2 + mlen);
        if (m <= 0) continue;
        out[0] = (uint8_t)(m >> 8);
        out[1] = (uint8_t)m;
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
