/* One proxied connection: learn where it wants to go (original destination,
 * the name behind a synthetic address, SNI or Host), judge it, resolve the
 * name ourselves, refuse blocked address classes on the address we dial,
 * connect, then hand over to the pump. Every refusal is an event. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter_ipv4.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../sniff/sniff.h"
#include "egress_impl.h"

static void conn_unlink(struct conn *c)
{
    struct egress_sandbox *es = c->es;
    if (c->prev)
        c->prev->next = c->next;
    else
        es->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    es->n_conns--;
    es->eg->n_conns--;
}

void conn_close(struct conn *c)
{
    if (c->dns_req) evdns_getaddrinfo_cancel(c->dns_req); /* its callback frees nothing */
    intercept_stop(c);
    pump_stop(&c->up);
    pump_stop(&c->down);
    if (c->ev) event_free(c->ev);
    if (c->client >= 0) close(c->client);
    if (c->upstream >= 0) close(c->upstream);
    conn_unlink(c);
    free(c);
}

static const char *conn_host(const struct conn *c, char *buf, size_t n)
{
    if (c->name[0]) return c->name;
    policy_addr_str(&c->literal, buf, n);
    return buf;
}

static void refuse_at(struct conn *c, const char *reason, const char *stage)
{
    char buf[64];
    egress_refused(c->es, conn_host(c, buf, sizeof buf), c->port, reason, stage);
    conn_close(c);
}

static void refuse(struct conn *c, const char *reason)
{
    refuse_at(c, reason, "connect");
}

static enum policy_verdict judge(const struct conn *c)
{
    return policy_check(&c->es->pol, c->name[0] ? c->name : NULL, c->name[0] ? NULL : &c->literal,
                        c->port);
}

void conn_recheck(struct conn *c)
{
    enum policy_verdict v = judge(c);
    /* A deny CIDR added since covers the address a name was dialled at. */
    if (v == POLICY_ALLOW && c->dialled.family &&
        policy_denied(&c->es->pol, NULL, &c->dialled, c->port))
        v = POLICY_DENY_DENIED;
    /* An open connection the new policy refuses: closed, with its own stage. */
    if (v != POLICY_ALLOW) refuse_at(c, policy_verdict_name(v), "policy");
}

/* The guard, on the exact address about to be dialled. */
static enum policy_addr_class guard(const struct conn *c, const struct policy_addr *a)
{
    size_t n;
    const struct policy_addr *host = egress_host_addrs(c->es->eg, &n);
    return policy_classify(a, host, n);
}

static void on_connected(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    int soerr = 0;
    socklen_t len = sizeof soerr;
    if (what & EV_TIMEOUT) return refuse(c, "connect_timeout");
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0 || soerr != 0)
        return refuse(c, "connect_failed");
    event_free(c->ev);
    c->ev = NULL;
    char buf[64];
    egress_allowed(c->es, conn_host(c, buf, sizeof buf), c->port, &c->dialled);
    c->state = CONN_SPLICING;
    if ((c->intercept ? intercept_start(c) : pump_start(c)) < 0) conn_close(c);
}

/* Small writes (TLS records, answer heads) go out at once: Nagle's wait for
 * the peer's delayed ACK cost ~40 ms per keep-alive request. */
static void no_delay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static void dial(struct conn *c, const struct policy_addr *a)
{
    c->dialled = *a;
    struct sockaddr_storage ss = {0};
    socklen_t len;
    if (a->family == AF_INET) {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        s4->sin_family = AF_INET;
        s4->sin_addr = a->v4;
        s4->sin_port = htons(c->port);
        len = sizeof *s4;
    } else {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
        s6->sin6_family = AF_INET6;
        s6->sin6_addr = a->v6;
        s6->sin6_port = htons(c->port);
        len = sizeof *s6;
    }
    c->upstream = socket(a->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->upstream < 0) return refuse(c, "no_socket");
    no_delay(c->upstream);
    if (connect(c->upstream, (struct sockaddr *)&ss, len) < 0 && errno != EINPROGRESS)
        return refuse(c, "connect_failed");
    c->state = CONN_CONNECTING;
    c->ev = event_new(c->es->eg->base, c->upstream, EV_WRITE, on_connected, c);
    struct timeval tv = {EGRESS_CONNECT_TIMEOUT_MS / 1000, 0};
    event_add(c->ev, &tv);
}

static void on_resolved(int result, struct evutil_addrinfo *res, void *arg)
{
    struct conn *c = arg;
    if (result == EVUTIL_EAI_CANCEL) return; /* conn_close cancelled us */
    c->dns_req = NULL;
    enum policy_addr_class why = POLICY_ADDR_OK;
    struct policy_addr pick = {0};
    bool found = false, denied = false;
    for (struct evutil_addrinfo *ai = result == 0 ? res : NULL; ai && !found; ai = ai->ai_next) {
        struct policy_addr a = {.family = ai->ai_family};
        if (ai->ai_family == AF_INET)
            a.v4 = ((struct sockaddr_in *)ai->ai_addr)->sin_addr;
        else if (ai->ai_family == AF_INET6)
            a.v6 = ((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr;
        else
            continue;
        enum policy_addr_class k = guard(c, &a);
        if (k == POLICY_ADDR_OK && policy_denied(&c->es->pol, NULL, &a, c->port)) {
            denied = true; /* a deny CIDR covers this address of the name */
            continue;
        }
        if (k == POLICY_ADDR_OK) {
            pick = a;
            found = true;
        } else {
            why = k;
        }
    }
    if (res) evutil_freeaddrinfo(res);
    if (found) return dial(c, &pick);
    char reason[64];
    if (why != POLICY_ADDR_OK)
        snprintf(reason, sizeof reason, "address_blocked:%s", policy_addr_class_name(why));
    else if (denied)
        snprintf(reason, sizeof reason, "%s", policy_verdict_name(POLICY_DENY_DENIED));
    else
        snprintf(reason, sizeof reason, "resolve_failed");
    refuse(c, reason);
}

static const struct egress_pin *find_pin(const struct egress *eg, const char *name, uint16_t port)
{
    for (size_t i = 0; i < eg->n_pins; i++)
        if (strcmp(eg->pins[i].host, name) == 0 && (!eg->pins[i].port || eg->pins[i].port == port))
            return &eg->pins[i];
    return NULL;
}

/* After the policy: a pinned address, a lookup, or the literal itself. Each
 * is judged by the guard; the address checked is the address dialled. */
static void resolve(struct conn *c)
{
    const struct egress *eg = c->es->eg;
    if (!c->name[0]) {
        enum policy_addr_class k = guard(c, &c->literal);
        if (k != POLICY_ADDR_OK) {
            char reason[64];
            snprintf(reason, sizeof reason, "address_blocked:%s", policy_addr_class_name(k));
            return refuse(c, reason);
        }
        return dial(c, &c->literal);
    }
    const struct egress_pin *pin = find_pin(eg, c->name, c->port);
    if (pin) {
        enum policy_addr_class k = guard(c, &pin->addr);
        if (k != POLICY_ADDR_OK) {
            char reason[64];
            snprintf(reason, sizeof reason, "address_blocked:%s", policy_addr_class_name(k));
            return refuse(c, reason);
        }
        if (policy_denied(&c->es->pol, NULL, &pin->addr, c->port))
            return refuse(c, policy_verdict_name(POLICY_DENY_DENIED));
        return dial(c, &pin->addr);
    }
    if (!eg->dns) return refuse(c, "resolve_failed");
    struct evutil_addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = EVUTIL_AI_ADDRCONFIG};
    c->state = CONN_RESOLVING;
    /* evdns may answer at once, and then c may be gone and req is NULL. */
    struct evdns_getaddrinfo_request *req =
        evdns_getaddrinfo(eg->dns, c->name, NULL, &hints, on_resolved, c);
    if (req) c->dns_req = req;
}

/* The first bytes the client sends, peeked (they stay in the socket for the
 * splice): a TLS SNI or HTTP Host must agree with the name it resolved. */
static void on_first_bytes(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    unsigned char buf[EGRESS_SNIFF_MAX];
    char seen[SNIFF_NAME_MAX] = "";
    enum sniff_result r = SNIFF_OTHER;
    if (what & EV_READ) {
        ssize_t n = recv(fd, buf, sizeof buf, MSG_PEEK);
        if (n <= 0) return conn_close(c); /* left before saying anything */
        r = sniff_peek(buf, (size_t)n, sizeof buf, seen);
        if (r == SNIFF_MORE) return; /* the event stays armed */
    } else if (c->port == 80 || c->port == 443) {
        return refuse(c, "no_request"); /* web clients speak first; silence is odd */
    }
    event_free(c->ev);
    c->ev = NULL;
    if (r == SNIFF_BAD) return refuse(c, "malformed_request");
    if ((r == SNIFF_TLS || r == SNIFF_HTTP) && seen[0] && c->name[0] && strcmp(seen, c->name) != 0)
        return refuse(c, r == SNIFF_TLS ? "sni_mismatch" : "host_mismatch");
    const struct egress *eg = c->es->eg;
    c->intercept = r == SNIFF_TLS && c->name[0] && eg->secrets &&
                   (eg->secrets->wants(eg->secrets_arg, c->es->id, c->name, c->port) ||
                    (eg->inspect_allowed_tls && c->port == 443 &&
                     eg->secrets->any(eg->secrets_arg, c->es->id)));
    /* Plain HTTP is read request by request when a placeholder could be in it. */
    c->plain_http = r == SNIFF_HTTP && eg->secrets && eg->secrets->any(eg->secrets_arg, c->es->id);
    c->intercept = c->intercept || c->plain_http;
    resolve(c);
}

/* Where the sandbox meant to go, from the NAT table. */
static int original_dst(int fd, struct sockaddr_in *dst)
{
    socklen_t len = sizeof *dst;
    return getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, dst, &len);
}

static void start_conn(struct egress_sandbox *es, int fd)
{
    struct sockaddr_in dst;
    struct conn *c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        return;
    }
    c->es = es;
    c->client = fd;
    no_delay(fd);
    c->upstream = -1;
    c->up.pipe[0] = c->up.pipe[1] = c->down.pipe[0] = c->down.pipe[1] = -1;
    c->next = es->conns;
    if (es->conns) es->conns->prev = c;
    es->conns = c;
    es->n_conns++;
    es->eg->n_conns++;
    if (original_dst(fd, &dst) < 0) return refuse(c, "no_destination");
    c->port = ntohs(dst.sin_port);
    uint32_t ip = ntohl(dst.sin_addr.s_addr);
    const char *name = names_by_addr(&es->names, ip);
    if (name) snprintf(c->name, sizeof c->name, "%s", name);
    c->literal = (struct policy_addr){.family = AF_INET, .v4 = dst.sin_addr};
    if (!name && ip >= SYNTH_BASE && ip < SYNTH_BASE + SYNTH_COUNT)
        return refuse(c, "stale_address"); /* a synthetic address we no longer know */
    enum policy_verdict v = judge(c);
    if (v != POLICY_ALLOW) return refuse(c, policy_verdict_name(v));
    /* Edge-triggered: peeked bytes stay readable, so wake only when more arrive. */
    c->ev = event_new(es->eg->base, fd, EV_READ | EV_PERSIST | EV_ET, on_first_bytes, c);
    /* Ports where the server speaks first (SSH banners aside, SMTP...) get a
     * short wait; web ports must say where they are going. */
    int ms = (c->port == 80 || c->port == 443) ? EGRESS_SNIFF_TIMEOUT_MS : 300;
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    event_add(c->ev, &tv);
}

void proxy_accept_resume(evutil_socket_t fd, short what, void *arg)
{
    struct egress_sandbox *es = arg;
    event_add(es->proxy_ev, NULL);
}

/* Over a limit: the connection just accepted is closed, and the listener is not
 * read for 50 ms; what the sandbox opens meanwhile waits in its own backlog (or
 * is dropped by the kernel once that is full), so that a flood costs the loop,
 * which every sandbox shares, what the limit allows, not what the flood sends.
 * The limit.reached event says which limit. */
void proxy_on_accept(evutil_socket_t lfd, short what, void *arg)
{
    struct egress_sandbox *es = arg;
    for (int i = 0; i < 64; i++) {
        int fd = egress_accept(es->eg, lfd);
        if (fd < 0) return;
        if (!egress_conn_allowed(es, LIMIT_CONNS, es->n_conns)) {
            close(fd);
            event_del(es->proxy_ev);
            struct timeval tv = {0, 50 * 1000};
            evtimer_add(es->accept_resume, &tv);
            return;
        }
        start_conn(es, fd);
    }
}
