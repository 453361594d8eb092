/* The server's client of the signer (signer.c), on the server's event loop:
 * signing a leaf is a round trip to another process that may be slow, stuck
 * or gone, and the loop serves every sandbox meanwhile, so nothing here waits.
 * Requests are sent in order, answered by id; the signer is serial, yet an
 * answer that comes late (its request timed out) must never be taken for a
 * later request's, hence the ids rather than the order. */
#include <errno.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "mitm.h"

struct request {
    struct request *next; /* in the order asked: the sent ones first */
    uint64_t deadline;
    bool sent;
    mitm_signed_fn *done;
    void *arg;
    struct mitm_sign_req rq;
};

struct mitm_signer_client {
    int sock;
    unsigned timeout_ms;
    struct event *rd;    /* an answer, or the signer's hang-up */
    struct event *timer; /* the oldest request's deadline */
    struct request *head, **tail;
    size_t pending, inflight;
    uint32_t last_id;
    err_t gone; /* code < 0: every request fails at once, with this */
};

static int gone_err(err_t *err)
{
    return err_set(err, -EPIPE,
                   "the signer process has exited, so TLS interception of new hosts fails "
                   "until runtimed restarts (the daemon's log says why it stopped)");
}

/* Takes r off the list; the caller ends it. */
static void unlink_request(struct mitm_signer_client *sc, struct request *r)
{
    struct request **pp = &sc->head;
    while (*pp != r)
        pp = &(*pp)->next;
    *pp = r->next;
    if (sc->tail == &r->next) sc->tail = pp;
    sc->pending--;
    if (r->sent) sc->inflight--;
}

static void finish(struct request *r, int code, const uint8_t *der, size_t len, const err_t *err)
{
    r->done(code, der, len, err, r->arg);
    free(r);
}

static void fail(struct mitm_signer_client *sc, struct request *r, const err_t *err)
{
    unlink_request(sc, r);
    finish(r, err->code, NULL, 0, err);
}

static void rearm(struct mitm_signer_client *sc)
{
    if (!sc->head) {
        evtimer_del(sc->timer);
        return;
    }
    uint64_t now = now_ms(), left = sc->head->deadline > now ? sc->head->deadline - now : 0;
    struct timeval tv = {(time_t)(left / 1000), (suseconds_t)(left % 1000) * 1000};
    evtimer_add(sc->timer, &tv);
}

/* 0, -EAGAIN (the socket is full: it goes later), or another negative errno.
 * A signer that is gone is noticed by the read side, which fails everything. */
static int send_request(struct mitm_signer_client *sc, struct request *r, err_t *err)
{
    ssize_t w;
    do
        w = send(sc->sock, &r->rq, sizeof r->rq, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (w < 0 && errno == EINTR);
    if (w < 0 && (errno == EPIPE || errno == ECONNRESET)) return gone_err(err);
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return -EAGAIN;
    if (w < 0) return err_set(err, errno, "cannot reach the signer: %m");
    r->sent = true;
    sc->inflight++;
    return 0;
}

/* Sends what waits, in order, while there is room. */
static void pump(struct mitm_signer_client *sc)
{
    for (struct request *r = sc->head; r && sc->inflight < MITM_SIGNER_INFLIGHT; r = r->next)
        if (!r->sent && send_request(sc, r, NULL) < 0) return;
}

static void fail_all(struct mitm_signer_client *sc, const err_t *err)
{
    while (sc->head)
        fail(sc, sc->head, err);
}

static void hang_up(struct mitm_signer_client *sc)
{
    gone_err(&sc->gone);
    log_warn("%s", sc->gone.msg);
    event_del(sc->rd);
    fail_all(sc, &sc->gone);
    rearm(sc);
}

static int take_answer(const uint8_t *buf, size_t n, const uint8_t **der, size_t *der_len,
                       err_t *err)
{
    struct mitm_sign_ans h;
    memcpy(&h, buf, sizeof h);
    const uint8_t *body = buf + sizeof h;
    if (n > MITM_ANSWER_MAX || h.len != n - sizeof h || h.status > 0 || (h.status == 0 && !h.len))
        return err_set(err, -EPROTO, "a malformed answer from the signer");
    if (h.status < 0) return err_set(err, h.status, "%.*s", (int)h.len, (const char *)body);
    *der = body;
    *der_len = h.len;
    return 0;
}

/* One answer record: to the request with its id, if one still waits (a
 * request that timed out has gone; its answer is dropped). */
static void on_answer(struct mitm_signer_client *sc, const uint8_t *buf, size_t n)
{
    struct mitm_sign_ans h;
    if (n < sizeof h) {
        log_warn("the signer sent a record of %zu bytes, too short for an answer; dropped", n);
        return;
    }
    memcpy(&h, buf, sizeof h);
    struct request *r = sc->head;
    while (r && r->sent && r->rq.id != h.id)
        r = r->next;
    if (!r || !r->sent) return;
    err_t err = {0};
    const uint8_t *der = NULL;
    size_t len = 0;
    int code = take_answer(buf, n, &der, &len, &err);
    unlink_request(sc, r);
    finish(r, code, der, len, &err);
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
    struct mitm_signer_client *sc = arg;
    /* One byte more than an answer, so that a longer record reads as malformed. */
    uint8_t buf[MITM_ANSWER_MAX + 1];
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (n <= 0) return hang_up(sc); /* EOF, reset, or a socket that is broken */
        on_answer(sc, buf, (size_t)n);
    }
    pump(sc);
    rearm(sc);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
    struct mitm_signer_client *sc = arg;
    err_t err = {0};
    err_set(&err, -ETIMEDOUT, "the signer did not answer within %u ms", sc->timeout_ms);
    /* Every request has the same timeout, so the oldest is the first due. */
    uint64_t now = now_ms();
    while (sc->head && sc->head->deadline <= now)
        fail(sc, sc->head, &err);
    pump(sc);
    rearm(sc);
}

int mitm_signer_client_new(struct event_base *base, int sock, unsigned timeout_ms,
                           struct mitm_signer_client **out, err_t *err)
{
    struct mitm_signer_client *sc = calloc(1, sizeof *sc);
    *out = NULL;
    if (!sc) return err_set(err, -ENOMEM, "out of memory");
    sc->sock = sock;
    sc->timeout_ms = timeout_ms;
    sc->tail = &sc->head;
    sc->timer = evtimer_new(base, on_timeout, sc);
    sc->rd = sock >= 0 ? event_new(base, sock, EV_READ | EV_PERSIST, on_readable, sc) : NULL;
    if (!sc->timer || (sock >= 0 && !sc->rd)) {
        mitm_signer_client_free(sc);
        return err_set(err, -ENOMEM, "out of memory");
    }
    if (sock < 0)
        err_set(&sc->gone, -ENOTSUP, "interception is not set up");
    else
        event_add(sc->rd, NULL);
    *out = sc;
    return 0;
}

void mitm_signer_client_free(struct mitm_signer_client *sc)
{
    if (!sc) return;
    if (sc->rd) event_free(sc->rd);
    if (sc->timer) event_free(sc->timer);
    sc->rd = sc->timer = NULL;
    err_t err = {0};
    err_set(&err, -ECANCELED, "the daemon is stopping");
    fail_all(sc, &err);
    free(sc);
}

size_t mitm_signer_client_pending(const struct mitm_signer_client *sc)
{
    return sc->pending;
}

static int check_request(struct mitm_signer_client *sc, const char *name, size_t spki_len,
                         err_t *err)
{
    if (sc->gone.code < 0) return err_set(err, sc->gone.code, "%s", sc->gone.msg);
    if (spki_len == 0 || spki_len > MITM_SPKI_MAX || strlen(name) >= sizeof sc->head->rq.name)
        return err_set(err, -EINVAL, "name or key too long");
    if (sc->pending >= MITM_SIGNER_PENDING_MAX)
        return err_set(err, -EBUSY, "%d leaf certificates are waiting for the signer already",
                       MITM_SIGNER_PENDING_MAX);
    return 0;
}

int mitm_signer_client_sign(struct mitm_signer_client *sc, const char *name, const uint8_t *spki,
                            size_t spki_len, mitm_signed_fn *done, void *arg, err_t *err)
{
    int r = check_request(sc, name, spki_len, err);
    struct request *rq = r == 0 ? calloc(1, sizeof *rq) : NULL;
    if (r < 0) return r;
    if (!rq) return err_set(err, -ENOMEM, "out of memory");
    /* One socket, used from the loop only: a counter tells answers apart. */
    rq->rq.id = ++sc->last_id;
    rq->rq.spki_len = (uint32_t)spki_len;
    str_copy(rq->rq.name, sizeof rq->rq.name, name);
    memcpy(rq->rq.spki, spki, spki_len);
    rq->deadline = now_ms() + sc->timeout_ms;
    rq->done = done;
    rq->arg = arg;
    /* Sent now unless others wait before it; a full socket keeps it for later. */
    bool queued = sc->pending > sc->inflight || sc->inflight >= MITM_SIGNER_INFLIGHT;
    r = queued ? 0 : send_request(sc, rq, err);
    if (r < 0 && r != -EAGAIN) {
        free(rq);
        return r;
    }
    *sc->tail = rq;
    sc->tail = &rq->next;
    sc->pending++;
    rearm(sc);
    return 0;
}
