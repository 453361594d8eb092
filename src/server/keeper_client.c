/* The server's side of the keeper's socket. The keeper is serial and answers in
 * order. On the loop, every request is sent with server_keeper_send and answered
 * later, on the loop, while every other sandbox's traffic moves: create and its
 * listeners, destroy, exec starts (the API's and the gateway's), open file,
 * freeze and thaw, the usage checkpoints' stats and the TLS files of a SIGHUP
 * reload; server_keeper_after runs a callback once everything sent before it is
 * answered. server_keeper_call waits: it is for the startup, before the loop
 * runs (hello, restore's adopts, net sockets and stats, the sweep, the first TLS
 * files); a call made while serving is a bug, counted in /metrics. A call that
 * waits may read answers of requests sent before it (restore sends its MCP
 * servers' starts): those are kept and handed to their callers from the loop
 * afterwards, never from inside the call. */
#include <errno.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server_impl.h"

struct keeper_pending {
    uint32_t id;
    unsigned maxfds;
    server_keeper_done_fn *done;
    void *arg;
    bool answered; /* res and fds hold the answer, read by a waiting call */
    struct proto_result res;
    int fds[PROTO_MAX_FDS];
    unsigned nfds;
    struct keeper_pending *next;
};

static void keeper_lost(struct server *srv, const char *why)
{
    log_error("%s; stopping", why);
    event_base_loopbreak(srv->base); /* the supervisor restarts the pair */
}

static int send_request(struct server *srv, uint16_t type, uint32_t id, const void *payload,
                        size_t len, err_t *err)
{
    metrics_keeper(srv, type);
    int r = proto_send(srv->keeper, type, id, payload, len, NULL, 0);
    if (r == 0) return 0;
    keeper_lost(srv, "the keeper is gone");
    return err_set(err, -EIO, "the keeper is gone (%s); restart runtimed", strerror(-r));
}

/* Reads the answer to request id. -EIO when the keeper is gone or broke the
 * protocol (the loop is stopped). */
static int read_answer(struct server *srv, uint32_t id, struct proto_result *res, int *fds,
                       unsigned maxfds)
{
    struct proto_hdr hdr;
    for (unsigned i = 0; i < maxfds; i++)
        fds[i] = -1;
    int r = proto_recv(srv->keeper, &hdr, res, sizeof *res, fds, maxfds);
    if (r != (int)sizeof *res || hdr.type != PROTO_RESULT || hdr.id != id) {
        for (unsigned i = 0; r >= 0 && i < maxfds; i++)
            if (fds[i] >= 0) close(fds[i]);
        keeper_lost(srv, r == -ECONNRESET ? "the keeper hung up" : "bad answer from the keeper");
        return -EIO;
    }
    res->msg[sizeof res->msg - 1] = '\0';
    return 0;
}

static unsigned count_fds(const int *fds, unsigned maxfds)
{
    unsigned n = 0;
    while (n < maxfds && fds[n] >= 0)
        n++;
    return n;
}

/* Hands answered requests at the FIFO's head to their callers, in order. */
static void run_answered(evutil_socket_t fd, short what, void *arg)
{
    struct server *srv = arg;
    while (srv->keeper_fifo && srv->keeper_fifo->answered) {
        struct keeper_pending *p = srv->keeper_fifo;
        srv->keeper_fifo = p->next;
        if (!srv->keeper_fifo) srv->keeper_fifo_tail = &srv->keeper_fifo;
        p->done(srv, &p->res, p->fds, p->nfds, p->arg);
        free(p);
    }
}

/* The keeper's socket is readable: the answer to the oldest request sent. */
static void on_readable(evutil_socket_t fd, short what, void *arg)
{
    struct server *srv = arg;
    struct keeper_pending *p = srv->keeper_fifo;
    while (p && p->answered)
        p = p->next;
    if (!p) {
        keeper_lost(srv, "the keeper hung up"); /* nothing asked: EOF, or a protocol break */
        return;
    }
    if (read_answer(srv, p->id, &p->res, p->fds, p->maxfds) < 0) return;
    p->nfds = count_fds(p->fds, p->maxfds);
    p->answered = true;
    run_answered(-1, 0, srv);
}

int keeper_client_start(struct server *srv)
{
    srv->keeper_fifo_tail = &srv->keeper_fifo;
    srv->keeper_ev = event_new(srv->base, srv->keeper, EV_READ | EV_PERSIST, on_readable, srv);
    srv->keeper_answered = event_new(srv->base, -1, 0, run_answered, srv);
    if (!srv->keeper_ev || !srv->keeper_answered) return -ENOMEM;
    return event_add(srv->keeper_ev, NULL);
}

/* At the end: requests still waiting are dropped (their callers go with the loop). */
void keeper_client_stop(struct server *srv)
{
    while (srv->keeper_fifo) {
        struct keeper_pending *p = srv->keeper_fifo;
        srv->keeper_fifo = p->next;
        for (unsigned i = 0; p->answered && i < p->nfds; i++)
            close(p->fds[i]);
        free(p);
    }
    if (srv->keeper_ev) event_free(srv->keeper_ev);
    if (srv->keeper_answered) event_free(srv->keeper_answered);
    srv->keeper_ev = srv->keeper_answered = NULL;
}

int server_keeper_send(struct server *srv, uint16_t type, const void *payload, size_t len,
                       unsigned maxfds, server_keeper_done_fn *done, void *arg, err_t *err)
{
    struct keeper_pending *p = calloc(1, sizeof *p);
    if (!p) return err_set(err, -ENOMEM, "out of memory");
    *p = (struct keeper_pending){.id = ++srv->next_req, .maxfds = maxfds, .done = done, .arg = arg};
    int r = send_request(srv, type, p->id, payload, len, err);
    if (r < 0) {
        free(p);
        return r;
    }
    *srv->keeper_fifo_tail = p;
    srv->keeper_fifo_tail = &p->next;
    return 0;
}

/* No request: done runs, from the loop, once every request sent before it has
 * been answered and handed back (the keeper is serial). */
int server_keeper_after(struct server *srv, server_keeper_done_fn *done, void *arg, err_t *err)
{
    struct keeper_pending *p = calloc(1, sizeof *p);
    if (!p) return err_set(err, -ENOMEM, "out of memory");
    *p = (struct keeper_pending){.answered = true, .done = done, .arg = arg};
    *srv->keeper_fifo_tail = p;
    srv->keeper_fifo_tail = &p->next;
    if (srv->keeper_fifo == p) event_active(srv->keeper_answered, 0, 0);
    return 0;
}

/* Waits for its own answer. Answers to requests sent before it come first (the
 * keeper is serial): each is kept for run_answered, which the loop runs next. */
int server_keeper_call(struct server *srv, uint16_t type, const void *payload, size_t len,
                       struct proto_result *res, int *fds, unsigned maxfds, err_t *err)
{
    uint32_t id = ++srv->next_req;
    if (srv->serving) { /* a bug: counted in /metrics, and tests look */
        metrics_keeper_wait(srv, type);
        log_warn("the loop waits for the keeper's %s", proto_type_name(type));
    }
    int r = send_request(srv, type, id, payload, len, err);
    if (r < 0) return r;
    for (struct keeper_pending *p = srv->keeper_fifo; p; p = p->next) {
        if (p->answered) continue;
        if (read_answer(srv, p->id, &p->res, p->fds, p->maxfds) < 0)
            return err_set(err, -EIO, "internal error talking to the keeper; restart runtimed");
        p->nfds = count_fds(p->fds, p->maxfds);
        p->answered = true;
        event_active(srv->keeper_answered, 0, 0);
    }
    int fd_slots[PROTO_MAX_FDS];
    if (read_answer(srv, id, res, fds ? fds : fd_slots, fds ? maxfds : 0) < 0)
        return err_set(err, -EIO, "internal error talking to the keeper; restart runtimed");
    if (res->status < 0) return err_set(err, res->status, "%s", res->msg);
    return 0;
}

int server_keeper_fds(const struct proto_result *res, int *fds, unsigned nfds, unsigned want,
                      const char *what, err_t *err)
{
    if (res->status >= 0 && nfds == want) return 0;
    for (unsigned i = 0; i < nfds; i++)
        close(fds[i]);
    if (res->status < 0) return err_set(err, res->status, "%s", res->msg);
    return err_set(err, -EIO, "the keeper passed no %s", what);
}
