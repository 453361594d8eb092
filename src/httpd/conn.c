/* Listeners and connections: accepting within the limits, reading heads and
 * bodies, deadlines, keep-alive and closing. */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/bufferevent_ssl.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "httpd_impl.h"

void httpd_limits_default(struct httpd_limits *l)
{
    *l = (struct httpd_limits){
        .max_local = 256,
        .max_head = 64 * 1024,
        .head_ms = 10 * 1000,
        .idle_ms = 120 * 1000,
        .body_idle_ms = 30 * 1000,
    };
}

/* The limits in force: those given, or those the descriptors allow now. */
static size_t max_conns(struct httpd *h)
{
    if (h->lim.max_conns) return h->lim.max_conns;
    uint64_t now = now_ms();
    if (!h->nofile || now - h->nofile_ms >= 1000) {
        struct rlimit rl;
        h->nofile = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? (uint64_t)rl.rlim_cur : 1024;
        h->nofile_ms = now;
    }
    uint64_t n = h->nofile / 4;
    return n < 16 ? 16 : n > 4096 ? 4096 : (size_t)n;
}

static size_t max_per_client(struct httpd *h)
{
    if (h->lim.max_per_client) return h->lim.max_per_client;
    size_t n = max_conns(h) / 8;
    return n < 8 ? 8 : n;
}

/* ---- clients ---- */

static void client_key(const struct sockaddr_storage *sa, char *out, size_t size)
{
    const struct sockaddr_in6 *s6 = (const void *)sa;
    if (sa->ss_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, out, (socklen_t)size);
    } else if (sa->ss_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
        inet_ntop(AF_INET, s6->sin6_addr.s6_addr + 12, out, (socklen_t)size);
    } else if (sa->ss_family == AF_INET6) {
        /* One host has a /64 to itself: its addresses are one client. */
        struct in6_addr prefix = s6->sin6_addr;
        memset(prefix.s6_addr + 8, 0, 8);
        inet_ntop(AF_INET6, &prefix, out, (socklen_t)size);
    } else {
        snprintf(out, size, "?");
    }
}

static unsigned bucket(const char *key)
{
    unsigned hash = 5381;
    for (; *key; key++)
        hash = hash * 33 + (unsigned char)*key;
    return hash % HTTPD_CLIENT_BUCKETS;
}

static struct httpd_client *client_find(struct httpd *h, const char *key, bool add)
{
    struct httpd_client **head = &h->clients[bucket(key)];
    for (struct httpd_client *c = *head; c; c = c->next)
        if (strcmp(c->key, key) == 0) return c;
    if (!add) return NULL;
    struct httpd_client *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    snprintf(c->key, sizeof c->key, "%s", key);
    c->next = *head;
    *head = c;
    return c;
}

static void client_release(struct httpd *h, struct httpd_client *cl)
{
    if (--cl->conns > 0) return;
    for (struct httpd_client **p = &h->clients[bucket(cl->key)]; *p; p = &(*p)->next)
        if (*p == cl) {
            *p = cl->next;
            break;
        }
    free(cl);
}

/* ---- connections ---- */

static void list_add(struct httpd *h, struct httpd_conn *c)
{
    struct httpd_conn **first = c->local ? &h->local_first : &h->tcp_first;
    if (!c->local && h->tcp_last) { /* TCP: the newest at the end */
        c->prev = h->tcp_last;
        h->tcp_last->next = c;
        h->tcp_last = c;
        return;
    }
    c->next = *first;
    if (*first) (*first)->prev = c;
    *first = c;
    if (!c->local) h->tcp_last = c;
}

static void list_remove(struct httpd *h, struct httpd_conn *c)
{
    struct httpd_conn **first = c->local ? &h->local_first : &h->tcp_first;
    if (c->prev)
        c->prev->next = c->next;
    else
        *first = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else if (!c->local)
        h->tcp_last = c->prev;
    c->prev = c->next = NULL;
}

static void conn_free(struct httpd_conn *c)
{
    struct httpd *h = c->h;
    if (c->req) {
        struct httpd_req *r = c->req;
        c->req = NULL;
        /* A request the application holds stays until it answers; one it never
         * got (a head or a body still coming) ends here. */
        r->budget_spent = c->budget_spent;
        r->backlog_left = evbuffer_get_length(bufferevent_get_output(c->bev));
        if (c->state == CONN_ADMIT || c->state == CONN_SERVING)
            req_client_gone(r);
        else
            req_free(r);
    }
    conn_charge_output(c, NULL);
    list_remove(h, c);
    if (c->local)
        h->n_local--;
    else
        h->n_tcp--;
    if (c->client) client_release(h, c->client);
    event_free(c->timer);
    event_free(c->later);
    bufferevent_free(c->bev);
    free(c);
}

static void set_timer(struct httpd_conn *c, uint32_t ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    evtimer_add(c->timer, &tv);
}

static void run_later(struct httpd_conn *c)
{
    event_active(c->later, EV_TIMEOUT, 0);
}

/* Closing: the answer goes out first. What the client still sends meanwhile
 * (a body that was refused) is read and dropped: closing with unread bytes
 * makes the kernel reset the connection, and the client would lose the answer. */
static void conn_close_after_output(struct httpd_conn *c)
{
    c->state = CONN_CLOSING;
    bufferevent_setwatermark(c->bev, EV_READ, 0, 0);
    bufferevent_enable(c->bev, EV_READ);
    set_timer(c, HTTPD_CLOSE_LINGER_MS);
    run_later(c); /* nothing queued: lingers at once */
}

/* The answer is out: no more is written; the connection ends at the client's
 * EOF, after HTTPD_CLOSE_LINGER_MS, or past what it may send meanwhile. */
static void linger(struct httpd_conn *c)
{
    if (c->lingering) return;
    c->lingering = true;
    if (!c->tls) shutdown(bufferevent_getfd(c->bev), SHUT_WR);
    set_timer(c, HTTPD_CLOSE_LINGER_MS);
}

static void discard(struct httpd_conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->bev);
    c->discarded += evbuffer_get_length(in);
    evbuffer_drain(in, evbuffer_get_length(in));
    /* A client that never proved its key gets no more reads: its bytes wait in the
     * kernel (not here) while it reads its answer, until the linger ends. */
    if (!c->trusted && c->discarded > HTTPD_LINGER_MAX_UNTRUSTED)
        bufferevent_disable(c->bev, EV_READ);
    else if (c->discarded > HTTPD_LINGER_MAX_BYTES)
        conn_free(c);
}

void conn_cut(struct httpd_conn *c)
{
    if (!c->cut) c->h->st.cut++;
    c->cut = true;
    run_later(c);
}

/* Whether the head's end (an empty line) is in, or max_head bytes are: only
 * then is it parsed, so a head sent a byte at a time costs one parse. */
static bool head_in(struct httpd_conn *c, struct evbuffer *in, size_t len)
{
    if (len >= c->h->lim.max_head) return true;
    struct evbuffer_ptr from;
    evbuffer_ptr_set(in, &from, c->scanned > 3 ? c->scanned - 3 : 0, EVBUFFER_PTR_SET);
    c->scanned = len;
    /* CRLF CRLF, or an empty line ended by a bare LF, which the parser refuses. */
    if (evbuffer_search(in, "\n\r\n", 3, &from).pos >= 0) return true;
    return evbuffer_search(in, "\n\n", 2, &from).pos >= 0;
}

/* A request whose head is in: the application decides before any body is read. */
static void admit(struct httpd_conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->bev);
    size_t n = evbuffer_get_length(in);
    if (!head_in(c, in, n)) return;
    if (n > c->h->lim.max_head) n = c->h->lim.max_head;
    const char *buf = (const char *)evbuffer_pullup(in, (ssize_t)n);
    struct httpd_req *r = req_new(c->h, c);
    if (!r) return conn_cut(c);
    const char *why = NULL;
    enum http_result res = http_request_parse(buf, n, c->h->lim.max_head, &r->head, &why);
    if (res == HTTP_MORE) {
        req_free(r);
        return;
    }
    c->scanned = 0;
    evtimer_del(c->timer);
    c->req = r;
    c->state = CONN_ADMIT;
    if (res == HTTP_BAD) {
        c->h->st.bad_heads++;
        bool big = why && strcmp(why, "head too large") == 0;
        return req_fail(r, big ? 431 : 400, "invalid_request", "the request cannot be read: %s",
                        why ? why : "malformed");
    }
    if (req_set_head(r, buf, &r->head) < 0)
        return req_fail(r, 500, "internal_error", "out of memory");
    evbuffer_drain(in, r->head.head_len);
    c->h->hd.head(r, c->h->hd.arg);
}

static void read_head(struct httpd_conn *c)
{
    if (evbuffer_get_length(bufferevent_get_input(c->bev)) == 0) return;
    if (c->state == CONN_IDLE) {
        c->state = CONN_HEAD;
        /* A proven client had idle_ms to start; the head itself gets head_ms.
         * A new one has head_ms from its accept for all of it. */
        if (c->trusted) set_timer(c, c->h->lim.head_ms);
    }
    admit(c);
}

static void body_done(struct httpd_conn *c)
{
    struct httpd_req *r = c->req;
    evtimer_del(c->timer);
    c->state = CONN_SERVING;
    bufferevent_setwatermark(c->bev, EV_READ, 0, c->h->lim.max_head);
    r->body_done(r, r->body_arg);
}

static void read_body(struct httpd_conn *c)
{
    struct httpd_req *r = c->req;
    struct evbuffer *in = bufferevent_get_input(c->bev);
    size_t n = evbuffer_get_length(in);
    if (n > r->body_left) n = (size_t)r->body_left;
    if (n > 0) {
        if (!req_body_add(r, in, n)) {
            c->h->st.body_refused++;
            return req_fail(r, 503, "busy",
                            "the sandbox this request is for holds as much in the daemon as it "
                            "may; try again once its other requests are done");
        }
        r->body_left -= n;
        set_timer(c, c->h->lim.body_idle_ms);
    }
    if (r->body_left == 0) body_done(c);
}

void conn_start_body(struct httpd_conn *c)
{
    struct httpd_req *r = c->req;
    const struct http_request *hd = &r->head;
    if (hd->framing == HTTP_BODY_NONE) return body_done(c);
    if (hd->framing == HTTP_BODY_CHUNKED)
        return req_fail(r, 411, "length_required",
                        "send the body with a Content-Length (chunked request bodies are not "
                        "taken)");
    if (hd->content_length > r->body_max) {
        c->h->st.body_refused++;
        return req_fail(r, 413, "too_large",
                        "the body is %llu bytes; this request may send at most %zu",
                        (unsigned long long)hd->content_length, r->body_max);
    }
    r->body_left = hd->content_length;
    const char *expect = httpd_header(r, "Expect");
    if (expect && strcasecmp(expect, "100-continue") == 0 && hd->minor == 1 &&
        evbuffer_get_length(bufferevent_get_input(c->bev)) == 0) {
        evbuffer_add_printf(bufferevent_get_output(c->bev), "HTTP/1.1 100 Continue\r\n\r\n");
    }
    c->state = CONN_BODY;
    bufferevent_setwatermark(c->bev, EV_READ, 0, 0);
    set_timer(c, c->h->lim.body_idle_ms);
    read_body(c);
}

void conn_request_done(struct httpd_conn *c, bool close_after)
{
    c->req = NULL;
    if (close_after || c->cut) return conn_close_after_output(c);
    c->state = CONN_IDLE;
    bufferevent_setwatermark(c->bev, EV_READ, 0, c->h->lim.max_head);
    bufferevent_enable(c->bev, EV_READ);
    set_timer(c, c->h->lim.idle_ms);
    run_later(c); /* a pipelined request already in */
}

static void on_later(evutil_socket_t fd, short what, void *arg)
{
    struct httpd_conn *c = arg;
    if (c->cut) return conn_free(c);
    if (c->state == CONN_CLOSING) {
        if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0) linger(c);
    } else if (c->state == CONN_IDLE) {
        read_head(c);
    }
}

static void on_read(struct bufferevent *bev, void *arg)
{
    struct httpd_conn *c = arg;
    if (c->state == CONN_IDLE || c->state == CONN_HEAD)
        read_head(c);
    else if (c->state == CONN_BODY)
        read_body(c);
    else if (c->state == CONN_CLOSING)
        discard(c);
    /* Otherwise what comes waits (up to max_head) for the answer to go out. */
}

static void on_write(struct bufferevent *bev, void *arg)
{
    struct httpd_conn *c = arg;
    if (c->state == CONN_CLOSING) linger(c);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    struct httpd_conn *c = arg;
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
        ERR_clear_error(); /* a failed handshake leaves its reason in OpenSSL's queue */
        conn_free(c);
    }
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct httpd_conn *c = arg;
    if (c->state == CONN_BODY) {
        return req_fail(c->req, 408, "timeout",
                        "no byte of the body came for %u s; send it in one go",
                        c->h->lim.body_idle_ms / 1000);
    }
    if (c->state == CONN_HEAD || (c->state == CONN_IDLE && !c->trusted)) c->h->st.head_timeouts++;
    conn_free(c); /* idle, a head too slow, or an answer that does not leave */
}

static int conn_new(struct httpd_listener *l, int fd, struct httpd_client *client)
{
    struct httpd *h = l->h;
    struct httpd_conn *c = calloc(1, sizeof *c);
    SSL_CTX *ctx = l->tls ? l->tls(l->tls_arg) : NULL;
    SSL *ssl = ctx ? SSL_new(ctx) : NULL;
    if (!c || (ctx && !ssl)) goto fail;
    c->bev = ssl ? bufferevent_openssl_socket_new(h->base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                                  BEV_OPT_CLOSE_ON_FREE)
                 : bufferevent_socket_new(h->base, fd, BEV_OPT_CLOSE_ON_FREE);
    if (!c->bev) goto fail;
    ssl = NULL; /* the bufferevent's now */
    /* Clients that close without close_notify (most, after an answer) are not errors. */
    if (l->tls) bufferevent_openssl_set_allow_dirty_shutdown(c->bev, 1);
    c->timer = evtimer_new(h->base, on_timer, c);
    c->later = event_new(h->base, -1, 0, on_later, c);
    if (!c->timer || !c->later) goto fail_bev;
    c->h = h;
    c->local = l->local;
    c->tls = l->tls != NULL;
    c->client = client;
    if (client) client->conns++;
    c->state = CONN_IDLE;
    bufferevent_setcb(c->bev, on_read, on_write, on_event, c);
    bufferevent_setwatermark(c->bev, EV_READ, 0, h->lim.max_head);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    set_timer(c, h->lim.head_ms);
    list_add(h, c);
    if (c->local)
        h->n_local++;
    else
        h->n_tcp++;
    h->st.accepted++;
    return 0;
fail_bev:
    if (c->timer) event_free(c->timer);
    if (c->later) event_free(c->later);
    bufferevent_free(c->bev); /* closes fd */
    free(c);
    ERR_clear_error();
    return -ENOMEM;
fail:
    SSL_free(ssl);
    free(c);
    close(fd);
    ERR_clear_error();
    return -ENOMEM;
}

/* The oldest connection that never made an admitted request and is not being
 * served, of client (NULL: of anyone). */
static struct httpd_conn *evictable(struct httpd *h, struct httpd_client *client)
{
    for (struct httpd_conn *c = h->tcp_first; c; c = c->next)
        if (!c->trusted &&
            (c->state == CONN_IDLE || c->state == CONN_HEAD || c->state == CONN_CLOSING) &&
            (!client || c->client == client))
            return c;
    return NULL;
}

/* An evicted connection ends with a reset, not a FIN: no FIN_WAIT and TIME_WAIT left
 * behind (a flood's 2000 a second would keep a minute's worth of them). */
static void reset_on_close(struct httpd_conn *c)
{
    struct linger now = {.l_onoff = 1, .l_linger = 0};
    setsockopt(bufferevent_getfd(c->bev), SOL_SOCKET, SO_LINGER, &now, sizeof now);
}

/* Room for one more TCP connection of client: true, having evicted one if needed. */
static bool make_room(struct httpd *h, struct httpd_client *client)
{
    if (client->conns >= max_per_client(h)) {
        struct httpd_conn *old = evictable(h, client);
        if (!old) return false;
        h->st.evicted++;
        reset_on_close(old);
        conn_free(old);
    }
    if (h->n_tcp >= max_conns(h)) {
        struct httpd_conn *old = evictable(h, NULL);
        if (!old) return false;
        h->st.evicted++;
        conn_free(old);
    }
    return true;
}

static void accepted(struct httpd_listener *l, int fd, const struct sockaddr_storage *sa)
{
    struct httpd *h = l->h;
    if (l->local) {
        if (h->n_local >= h->lim.max_local) {
            h->st.refused++;
            close(fd);
            return;
        }
        conn_new(l, fd, NULL);
        return;
    }
    char key[48];
    client_key(sa, key, sizeof key);
    struct httpd_client *client = client_find(h, key, true);
    if (!client || !make_room(h, client)) {
        h->st.refused++;
        if (client && client->conns == 0) { /* made for this one only */
            client->conns = 1;
            client_release(h, client);
        }
        close(fd);
        return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    conn_new(l, fd, client);
}

/* Out of descriptors: the oldest connection that never authenticated makes
 * room (true: accept again). Without one, the spare descriptor makes room to
 * accept and close what waits, so that clients hear at once and the listener
 * does not spin. */
static bool shed_one(struct httpd_listener *l)
{
    struct httpd *h = l->h;
    h->st.fd_exhausted++;
    struct httpd_conn *old = evictable(h, NULL);
    if (old) {
        h->st.evicted++;
        conn_free(old);
        return true;
    }
    uint64_t now = now_ms();
    if (now - h->fd_logged_ms >= HTTPD_FD_LOG_EVERY_MS || !h->fd_logged_ms) {
        h->fd_logged_ms = now;
        log_warn("out of descriptors (%s): refusing new connections (%llu so far); %zu open, "
                 "limit --max-connections %zu",
                 strerror(errno), (unsigned long long)h->st.fd_exhausted, h->n_tcp, max_conns(h));
    }
    if (h->spare_fd < 0) return false;
    close(h->spare_fd);
    int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd >= 0) close(fd);
    h->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    return fd >= 0;
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
    struct httpd_listener *l = arg;
    event_add(l->ev, NULL);
}

static void on_accept(evutil_socket_t lfd, short what, void *arg)
{
    struct httpd_listener *l = arg;
    for (int i = 0; i < HTTPD_ACCEPT_BATCH; i++) {
        struct sockaddr_storage sa;
        socklen_t len = sizeof sa;
        int fd = accept4(l->fd, (struct sockaddr *)&sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            accepted(l, fd, &sa);
            continue;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
        if ((errno == EMFILE || errno == ENFILE) && shed_one(l)) continue;
        /* Anything else (or no spare): the listener rests 100 ms, not a spin. */
        event_del(l->ev);
        struct timeval tv = {0, 100 * 1000};
        evtimer_add(l->retry, &tv);
        return;
    }
}

struct httpd *httpd_new(struct event_base *base, const struct httpd_limits *limits,
                        const struct httpd_handlers *handlers)
{
    struct httpd *h = calloc(1, sizeof *h);
    if (!h) return NULL;
    h->base = base;
    h->lim = *limits;
    h->hd = *handlers;
    h->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    return h;
}

int httpd_listen(struct httpd *h, int fd, bool local, httpd_tls_fn *tls, void *tls_arg, err_t *err)
{
    struct httpd_listener *l = calloc(1, sizeof *l);
    if (!l) return err_set(err, -ENOMEM, "out of memory");
    *l = (struct httpd_listener){.h = h, .fd = fd, .local = local, .tls = tls, .tls_arg = tls_arg};
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
        free(l);
        return err_set(err, -errno, "listening socket: %s", strerror(errno));
    }
    l->ev = event_new(h->base, fd, EV_READ | EV_PERSIST, on_accept, l);
    l->retry = evtimer_new(h->base, on_retry, l);
    if (!l->ev || !l->retry || event_add(l->ev, NULL) < 0) {
        if (l->ev) event_free(l->ev);
        if (l->retry) event_free(l->retry);
        free(l);
        return err_set(err, -ENOMEM, "cannot watch the listening socket");
    }
    l->next = h->listeners;
    h->listeners = l;
    return 0;
}

void httpd_free(struct httpd *h)
{
    if (!h) return;
    while (h->tcp_first)
        conn_free(h->tcp_first);
    while (h->local_first)
        conn_free(h->local_first);
    for (struct httpd_listener *l = h->listeners, *next; l; l = next) {
        next = l->next;
        event_free(l->ev);
        event_free(l->retry);
        close(l->fd);
        free(l);
    }
    if (h->spare_fd >= 0) close(h->spare_fd);
    free(h);
}

void httpd_get_stats(const struct httpd *h, struct httpd_stats *out)
{
    *out = h->st;
    out->open = h->n_tcp;
    out->local_open = h->n_local;
}

/* ---- what a stream holds, charged ---- */

static void on_output_change(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
    struct httpd_conn *c = arg;
    if (!c->out_budget) return;
    if (info->n_deleted) {
        size_t n = info->n_deleted < c->out_charged ? info->n_deleted : c->out_charged;
        budget_give(c->out_budget, n);
        c->out_charged -= n;
    }
    if (info->n_added) {
        c->out_charged += info->n_added;
        /* The client does not read what its budget allows: it is dropped, its
         * owner's other requests go on. Not here: this runs inside evbuffer_add. */
        if (!budget_force(c->out_budget, info->n_added) && !c->cut) {
            c->budget_spent = true;
            conn_cut(c);
        }
    }
}

void conn_charge_output(struct httpd_conn *c, struct budget *b)
{
    struct evbuffer *out = bufferevent_get_output(c->bev);
    if (c->out_budget) {
        budget_give(c->out_budget, c->out_charged);
        budget_unref(c->out_budget);
        c->out_budget = NULL;
        c->out_charged = 0;
        evbuffer_remove_cb(out, on_output_change, c);
    }
    if (!b) return;
    c->out_budget = budget_ref(b);
    c->out_charged = evbuffer_get_length(out);
    budget_force(b, c->out_charged);
    evbuffer_add_cb(out, on_output_change, c);
}
