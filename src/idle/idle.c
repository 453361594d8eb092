/* Idle pause and leases: the policy. What counts as activity is the server's
 * (server_sandbox_touch, _hold, _busy); pausing, stopping and removing are too. A lease
 * (Runtime Cloud's timeoutSeconds) ends a run when its time is up, busy or not, with its
 * onLeaseEnd: pause, stop or delete. */
#include "idle.h"

#include <stdlib.h>
#include <string.h>

#include "../server/server.h"

#define IDLE_PRESSURE_PER_TICK 4 /* hibernations asked for a second while memory is short */

static bool idle(struct sbx *sb, uint64_t now)
{
    uint32_t secs = sbx_settings(sb)->idle_pause_s;
    return secs > 0 && sbx_state(sb) == SBX_RUNNING && !server_sandbox_busy(sb) &&
           now - sbx_last_active_ms(sb) >= (uint64_t)secs * 1000;
}

/* A paused sandbox that nothing is changing, and that has somewhere to put its memory: a
 * gvisor one its image, an ns one the host's swap (has_swap). */
static bool could_hibernate(struct sbx *sb, bool has_swap)
{
    enum model_driver driver = sbx_settings(sb)->isolation;
    return (driver == MODEL_DRIVER_GVISOR || (driver == MODEL_DRIVER_NS && has_swap)) &&
           sbx_state(sb) == SBX_PAUSED && !server_sandbox_changing(sb) && sbx_paused_ms(sb);
}

/* Paused for its hibernateAfterSeconds: its memory goes to disk. */
static bool sleepy(struct sbx *sb, uint64_t now, bool has_swap)
{
    uint32_t after = sbx_settings(sb)->hibernate_after_s;
    return after > 0 && could_hibernate(sb, has_swap) &&
           now - sbx_paused_ms(sb) >= (uint64_t)after * 1000;
}

/* A hibernation that failed (it is paused still) is tried again a whole wait later. */
static void hibernated(struct server *srv, struct sbx *sb, const err_t *err, void *arg)
{
    if (!err) return;
    log_warn("idle hibernation: %s", err->msg);
    sbx_set_paused_ms(sb, now_ms());
}

static void lease_removed(struct server *srv, const err_t *err, void *arg)
{
    if (err) log_warn("the end of a lease: %s", err->msg);
}

/* Its lease is up: its onLeaseEnd. */
static int end_lease(struct server *srv, struct sbx *sb, err_t *err)
{
    switch (sbx_settings(sb)->lease_end) {
    case MODEL_LEASE_PAUSE:
        return server_sandbox_pause(srv, sb, "lease", NULL, NULL, err);
    case MODEL_LEASE_STOP:
        return server_sandbox_stop(srv, sb, "lease", NULL, NULL, err);
    case MODEL_LEASE_DELETE:
        return server_sandbox_delete(srv, sb, lease_removed, NULL, err);
    }
    return 0;
}

/* Memory is short (MemAvailable under --hibernate-below): the longest-paused sandboxes
 * that can hibernate do, a few a tick until it is not, so that a burst of wakes cannot
 * leave the kernel's OOM killer to choose. Whatever their hibernateAfterSeconds. */
static void relieve_memory(struct server *srv, bool has_swap)
{
    int64_t avail_bytes = meminfo_bytes("MemAvailable");
    long avail = avail_bytes < 0 ? -1 : (long)(avail_bytes >> 20);
    long below = (long)server_hibernate_below_mib(srv);
    if (avail < 0 || avail >= below) return;
    for (int n = 0; n < IDLE_PRESSURE_PER_TICK; n++) {
        struct sbx *oldest = NULL;
        for (struct sbx *sb = server_sandbox_first(srv); sb; sb = server_sandbox_next(sb))
            if (could_hibernate(sb, has_swap) &&
                (!oldest || sbx_paused_ms(sb) < sbx_paused_ms(oldest)))
                oldest = sb;
        if (!oldest) return;
        err_t err = {0};
        log_info("memory is short (%ld MiB available, under %ld): hibernating sandbox %s", avail,
                 below, sbx_id(oldest));
        if (server_sandbox_hibernate(srv, oldest, "memory", hibernated, NULL, &err) < 0) {
            log_warn("hibernation for memory: %s", err.msg);
            sbx_set_paused_ms(oldest, now_ms());
        }
    }
}

void idle_tick(struct server *srv)
{
    bool has_swap = meminfo_bytes("SwapTotal") > 0; /* swapon may come at any time */
    relieve_memory(srv, has_swap);
    uint64_t now = now_ms();
    int64_t wall = now_unix_ms();
    struct sbx *sb = server_sandbox_first(srv), *next;
    for (; sb; sb = next) {
        next = server_sandbox_next(sb); /* a delete takes sb off the list */
        err_t err = {0};
        int64_t ends = sbx_lease_ends_ms(sb);
        if (ends && wall >= ends && !server_sandbox_changing(sb)) {
            if (end_lease(srv, sb, &err) < 0) log_warn("the end of a lease: %s", err.msg);
        } else if (idle(sb, now) && server_sandbox_pause(srv, sb, "idle", NULL, NULL, &err) < 0) {
            log_warn("idle pause: %s", err.msg);
        } else if (sleepy(sb, now, has_swap) &&
                   server_sandbox_hibernate(srv, sb, "idle", hibernated, NULL, &err) < 0) {
            log_warn("idle hibernation: %s", err.msg);
            sbx_set_paused_ms(sb, now);
        }
    }
}
