/* Idle pause: a sandbox nobody used for idlePauseSeconds (no gateway request, no exec,
 * no file call, nothing under way) is frozen with its memory and servers kept, and its
 * open connections closed; the next request thaws it before it is served. The keeper
 * call is synchronous, so requests that arrive during a wake simply queue behind it. */
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "server_impl.h"

#define IDLE_TICK_MS 1000

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

static bool idle(struct sbx *sb, uint64_t now)
{
    uint32_t secs = sb->settings.idle_pause_s;
    return secs > 0 && sb->holds == 0 && sb->status == SBX_RUNNING && !sb->removing &&
           !(sb->owner->hooks.busy && sb->owner->hooks.busy(sb)) &&
           now - sb->last_active_ms >= (uint64_t)secs * 1000;
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct server *srv = arg;
    uint64_t now = now_ms();
    for (struct sbx *sb = srv->sandboxes; sb; sb = sb->next) {
        err_t err = {0};
        if (idle(sb, now) && server_sandbox_pause(srv, sb, "idle", &err) < 0)
            log_warn("idle pause: %s", err.msg);
    }
    usage_tick(srv);
}

int idle_start(struct server *srv)
{
    srv->idle_timer = event_new(srv->base, -1, EV_PERSIST, on_tick, srv);
    struct timeval tv = {IDLE_TICK_MS / 1000, (IDLE_TICK_MS % 1000) * 1000};
    return srv->idle_timer ? event_add(srv->idle_timer, &tv) : -ENOMEM;
}

void idle_stop(struct server *srv)
{
    if (srv->idle_timer) event_free(srv->idle_timer);
    srv->idle_timer = NULL;
}
