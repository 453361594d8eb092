/* Moving bytes of an allowed connection in the kernel: each direction splices
 * src -> pipe -> dst, so payload never enters user space. Half-close is passed
 * on (EOF from one side becomes shutdown(SHUT_WR) of the other); the
 * connection ends when both directions are done or either side fails. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "egress_impl.h"

#define PUMP_CHUNK (1 << 16)

static void on_pump(evutil_socket_t fd, short what, void *arg);

/* Moves what it can; returns 0, or splice's negative errno when the
 * connection must end. */
static int pump_run(struct pump *p)
{
    for (;;) {
        if (p->in_pipe == 0 && !p->eof) {
            ssize_t n = splice(p->src, NULL, p->pipe[1], NULL, PUMP_CHUNK,
                               SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
            if (n > 0)
                p->in_pipe += (size_t)n;
            else if (n == 0)
                p->eof = true;
            else if (errno == EAGAIN) {
                event_add(p->rd, NULL);
                return 0;
            } else if (errno != EINTR) {
                return -errno;
            }
        }
        if (p->in_pipe > 0) {
            ssize_t m = splice(p->pipe[0], NULL, p->dst, NULL, p->in_pipe,
                               SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
            if (m > 0)
                p->in_pipe -= (size_t)m;
            else if (m < 0 && errno == EAGAIN) {
                event_add(p->wr, NULL);
                return 0;
            } else if (m < 0 && errno != EINTR) {
                return -errno;
            }
        }
        if (p->eof && p->in_pipe == 0) {
            shutdown(p->dst, SHUT_WR);
            p->done = true;
            return 0;
        }
    }
}

static void on_pump(evutil_socket_t fd, short what, void *arg)
{
    struct pump *p = arg;
    struct conn *c = p->owner;
    if (pump_run(p) < 0 || (c->up.done && c->down.done)) conn_close(c);
}

/* Returns 0, pipe2's negative errno, or -ENOMEM. */
static int pump_init(struct pump *p, struct conn *c, int src, int dst)
{
    struct event_base *base = c->es->eg->base;
    p->owner = c;
    p->src = src;
    p->dst = dst;
    if (pipe2(p->pipe, O_NONBLOCK | O_CLOEXEC) < 0) return -errno;
    fcntl(p->pipe[1], F_SETPIPE_SZ, PUMP_CHUNK);
    p->rd = event_new(base, src, EV_READ, on_pump, p);
    p->wr = event_new(base, dst, EV_WRITE, on_pump, p);
    return p->rd && p->wr ? 0 : -ENOMEM;
}

int pump_start(struct conn *c)
{
    int r = pump_init(&c->up, c, c->client, c->upstream);
    if (r == 0) r = pump_init(&c->down, c, c->upstream, c->client);
    if (r == 0) r = pump_run(&c->up);
    if (r == 0) r = pump_run(&c->down);
    return r;
}

void pump_stop(struct pump *p)
{
    if (p->rd) event_free(p->rd);
    if (p->wr) event_free(p->wr);
    for (int i = 0; i < 2; i++)
        if (p->pipe[i] >= 0) close(p->pipe[i]);
    p->rd = p->wr = NULL;
    p->pipe[0] = p->pipe[1] = -1;
}
