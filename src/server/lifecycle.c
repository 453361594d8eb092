/* A sandbox's activity (what holds off idle pause, src/idle) and pause and resume:
 * a paused sandbox is frozen with its memory and servers kept, and its open
 * connections closed; the next request thaws it before it is served. The loop
 * does not wait for the keeper: requests that arrive during a wake wait for it
 * (server_sandbox_resume's done), everything else goes on. */
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server_impl.h"

void server_sandbox_touch(struct sbx *sb)
{
    sb->last_active_ms = now_ms();
}

void server_sandbox_hold(struct sbx *sb, int delta)
{
    sb->holds += delta;
    if (sb->holds < 0) sb->holds = 0;
    server_sandbox_touch(sb);
}

/* A pause or a resume under way: the keeper freezes or thaws the sandbox while
 * the loop goes on, then its status is written, then everyone waiting hears.
 * What asks meanwhile waits with them: a resume during a pause waits for the
 * pause and then resumes, a removal runs once the change is over. */
struct sbx_change {
    bool pausing; /* else resuming */
    char reason[32];
    struct timespec started;
    struct sbx_waiter *waiters;     /* hear how this change went */
    struct sbx_waiter *then_resume; /* asked for a resume during a pause */
    char resume_reason[32];
    server_deleted_fn *then_delete; /* a removal asked for meanwhile */
    void *delete_arg;
};

/* At shutdown (sbx_free): the requests waiting end with the loop. */
void server_sandbox_change_free(struct sbx *sb)
{
    if (!sb->change) return;
    sbx_waiters_free(sb->change->waiters);
    sbx_waiters_free(sb->change->then_resume);
    free(sb->change);
    sb->change = NULL;
}

bool server_sandbox_changing(const struct sbx *sb)
{
    return sb->change != NULL;
}

static int start_change(struct server *srv, struct sbx *sb, bool pausing, const char *reason,
                        struct sbx_waiter *waiters, err_t *err);

/* The resumes asked for during a pause that is now over. */
static void resume_after(struct server *srv, struct sbx *sb, const char *reason,
                         struct sbx_waiter *waiters)
{
    err_t err = {0};
    struct sbx_change *c = sb->change; /* one a waiter of the pause started */
    if (c) return sbx_waiters_append(c->pausing ? &c->then_resume : &c->waiters, waiters);
    if (sb->removing) {
        err_set(&err, -EBUSY, "sandbox %s is being removed", sb->id);
        return sbx_waiters_tell(srv, sb, waiters, &err);
    }
    /* Not paused (the pause failed, or it died): nothing to resume; they see its status. */
    if (sb->status != SBX_PAUSED) return sbx_waiters_tell(srv, sb, waiters, NULL);
    if (start_change(srv, sb, false, reason, waiters, &err) < 0)
        sbx_waiters_tell(srv, sb, waiters, &err);
}

/* The change is over (err: it failed, and the status is what it was): the
 * waiters hear, then what was asked for meanwhile runs. */
static void end_change(struct server *srv, struct sbx *sb, const err_t *err)
{
    struct sbx_change *c = sb->change;
    sb->change = NULL;
    struct sbx_waiter *waiters = c->waiters, *resume = c->then_resume;
    server_deleted_fn *del = c->then_delete;
    void *del_arg = c->delete_arg;
    char reason[sizeof c->resume_reason];
    memcpy(reason, c->resume_reason, sizeof reason);
    free(c);
    sbx_waiters_tell(srv, sb, waiters, err);
    if (resume) resume_after(srv, sb, reason, resume);
    err_t e = {0};
    if (del && server_sandbox_delete(srv, sb, del, del_arg, &e) < 0) del(srv, &e, del_arg);
}

static void on_status_written(int r, const err_t *err, void *arg)
{
    struct sbx *sb = arg;
    if (r == -ECANCELED) return; /* stopping: sb went with the registry */
    end_change(sb->owner, sb, r < 0 ? err : NULL);
}

static double ms_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

/* The keeper froze or thawed it (or could not): the status goes to the store,
 * and the waiters hear once it is on disk. */
static void on_frozen(struct server *srv, const struct proto_result *res, int *fds, unsigned nfds,
                      void *arg)
{
    struct sbx *sb = arg;
    struct sbx_change *c = sb->change;
    err_t err = {0};
    if (res->status < 0) {
        err_set(&err, res->status, "cannot %s sandbox %s: %s", c->pausing ? "pause" : "resume",
                sb->id, res->msg);
        return end_change(srv, sb, &err);
    }
    /* Its init died meanwhile (the death watch marked it): that status stands. */
    if (sb->status != (c->pausing ? SBX_RUNNING : SBX_PAUSED)) {
        err_set(&err, -EIO, "sandbox %s is %s now", sb->id, sbx_status_name(sb->status));
        return end_change(srv, sb, &err);
    }
    json_t *f;
    if (c->pausing) {
        if (sb->egress) egress_sandbox_close_all(sb->egress);
        sb->status = SBX_PAUSED;
        metrics_pause(srv);
        f = json_pack("{s:s}", "reason", c->reason);
        server_event(srv, sb->id, "sandbox.paused", f);
    } else {
        double ms = ms_since(&c->started);
        sb->status = SBX_RUNNING;
        server_sandbox_touch(sb);
        metrics_wake(srv, ms / 1000.0);
        f = json_pack("{s:s,s:f}", "reason", c->reason, "wakeMs", ms);
        server_event(srv, sb->id, "sandbox.resumed", f);
    }
    json_decref(f);
    store_writer_sandbox_status(srv->writer, sb->id, sbx_status_name(sb->status), on_status_written,
                                sb);
}

/* Takes waiters (on success). The usage checkpoint's stats go first: the
 * keeper answers in order, so they count the time before the change. */
static int start_change(struct server *srv, struct sbx *sb, bool pausing, const char *reason,
                        struct sbx_waiter *waiters, err_t *err)
{
    struct sbx_change *c = calloc(1, sizeof *c);
    if (!c) return err_set(err, -ENOMEM, "out of memory");
    *c = (struct sbx_change){.pausing = pausing, .waiters = waiters};
    str_copy(c->reason, sizeof c->reason, reason);
    clock_gettime(CLOCK_MONOTONIC, &c->started);
    usage_checkpoint(srv, sb);
    struct proto_ref ref = {.flag = pausing ? 1 : 0};
    memcpy(ref.id, sb->id, sizeof ref.id);
    int r = server_keeper_send(srv, PROTO_FREEZE, &ref, sizeof ref, 0, on_frozen, sb, err);
    if (r < 0) {
        free(c);
        return err_wrap(err, "cannot %s sandbox %s", pausing ? "pause" : "resume", sb->id);
    }
    sb->change = c;
    return 0;
}

static int begin_change(struct server *srv, struct sbx *sb, bool pausing, const char *reason,
                        server_sandbox_done_fn *done, void *arg, err_t *err)
{
    struct sbx_waiter *w = NULL;
    int r = sbx_waiters_add(&w, done, arg, err);
    if (r == 0 && (r = start_change(srv, sb, pausing, reason, w, err)) < 0) sbx_waiters_free(w);
    return r;
}

int server_sandbox_pause(struct server *srv, struct sbx *sb, const char *reason,
                         server_sandbox_done_fn *done, void *arg, err_t *err)
{
    if (sb->removing) return err_set(err, -EBUSY, "sandbox %s is being removed", sb->id);
    if (sb->change && sb->change->pausing)
        return sbx_waiters_add(&sb->change->waiters, done, arg, err);
    if (sb->change)
        return err_set(err, -EBUSY, "sandbox %s is being resumed; try again in a moment", sb->id);
    if (sb->status == SBX_PAUSED) {
        if (done) done(srv, sb, NULL, arg);
        return 0;
    }
    if (sb->status != SBX_RUNNING)
        return err_set(err, -EINVAL, "sandbox %s is %s; only a running sandbox can be paused",
                       sb->id, sbx_status_name(sb->status));
    return begin_change(srv, sb, true, reason, done, arg, err);
}

int server_sandbox_resume(struct server *srv, struct sbx *sb, const char *reason,
                          server_sandbox_done_fn *done, void *arg, err_t *err)
{
    if (sb->removing) return err_set(err, -EBUSY, "sandbox %s is being removed", sb->id);
    struct sbx_change *c = sb->change;
    if (c && c->pausing && !c->then_resume)
        str_copy(c->resume_reason, sizeof c->resume_reason, reason);
    if (c) return sbx_waiters_add(c->pausing ? &c->then_resume : &c->waiters, done, arg, err);
    if (sb->status != SBX_PAUSED) {
        if (done) done(srv, sb, NULL, arg);
        return 0;
    }
    return begin_change(srv, sb, false, reason, done, arg, err);
}

int server_sandbox_admit(struct server *srv, struct sbx *sb, const char *why,
                         server_sandbox_done_fn *done, void *arg, err_t *err)
{
    server_sandbox_touch(sb);
    if (sb->removing) return err_set(err, -EBUSY, "sandbox %s is being removed", sb->id);
    if (sb->status != SBX_PAUSED && !sb->change) return 0;
    int r = server_sandbox_resume(srv, sb, why, done, arg, err);
    return r < 0 ? r : 1;
}

/* server_sandbox_delete during a change: it runs when the change is over. */
int server_sandbox_delete_after_change(struct sbx *sb, server_deleted_fn *done, void *arg,
                                       err_t *err)
{
    if (sb->change->then_delete)
        return err_set(err, -EBUSY, "sandbox %s is already being removed", sb->id);
    sb->change->then_delete = done;
    sb->change->delete_arg = arg;
    return 0;
}

bool server_sandbox_busy(struct sbx *sb)
{
    return sb->holds > 0 || (sb->owner->hooks.busy && sb->owner->hooks.busy(sb));
}

/* Once a second: usage checkpoints and the daemon's own tick (idle pause). */
static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct server *srv = arg;
    if (srv->hooks.tick) srv->hooks.tick(srv);
    usage_tick(srv);
}

int server_tick_start(struct server *srv)
{
    srv->tick_timer = event_new(srv->base, -1, EV_PERSIST, on_tick, srv);
    struct timeval tv = {SERVER_TICK_MS / 1000, (SERVER_TICK_MS % 1000) * 1000};
    return srv->tick_timer ? event_add(srv->tick_timer, &tv) : -ENOMEM;
}

void server_tick_stop(struct server *srv)
{
    if (srv->tick_timer) event_free(srv->tick_timer);
    srv->tick_timer = NULL;
}
