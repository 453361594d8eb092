/* A sandbox's activity (what holds off idle pause, src/idle) and pause and resume:
 * a paused sandbox is frozen with its memory and servers kept, and its open
 * connections closed; the next request thaws it before it is served. The keeper
 * call is synchronous, so requests that arrive during a wake simply queue behind it. */
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
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

static int freeze(struct server *srv, struct sbx *sb, bool frozen, err_t *err)
{
    struct proto_ref ref = {.flag = frozen ? 1 : 0};
    struct proto_result res;
    memcpy(ref.id, sb->id, sizeof ref.id);
    return server_keeper_call(srv, PROTO_FREEZE, &ref, sizeof ref, &res, NULL, 0, err);
}

int server_sandbox_pause(struct server *srv, struct sbx *sb, const char *reason, err_t *err)
{
    if (sb->status == SBX_PAUSED) return 0;
    if (sb->status != SBX_RUNNING)
        return err_set(err, -EINVAL, "sandbox %s is %s; only a running sandbox can be paused",
                       sb->id, sbx_status_name(sb->status));
    usage_checkpoint(srv, sb);
    int r = freeze(srv, sb, true, err);
    if (r < 0) return err_wrap(err, "cannot pause sandbox %s", sb->id);
    if (sb->egress) egress_sandbox_close_all(sb->egress);
    server_sandbox_set_status(srv, sb, SBX_PAUSED);
    metrics_pause(srv);
    json_t *f = json_pack("{s:s}", "reason", reason);
    server_event(srv, sb->id, "sandbox.paused", f);
    json_decref(f);
    return 0;
}

int server_sandbox_resume(struct server *srv, struct sbx *sb, const char *reason, err_t *err)
{
    if (sb->status != SBX_PAUSED) return 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    usage_checkpoint(srv, sb);
    int r = freeze(srv, sb, false, err);
    if (r < 0) return err_wrap(err, "cannot resume sandbox %s", sb->id);
    server_sandbox_set_status(srv, sb, SBX_RUNNING);
    server_sandbox_touch(sb);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    metrics_wake(srv, ms / 1000.0);
    json_t *f = json_pack("{s:s,s:f}", "reason", reason, "wakeMs", ms);
    server_event(srv, sb->id, "sandbox.resumed", f);
    json_decref(f);
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
