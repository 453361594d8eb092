/* Idle pause: the policy. What counts as activity is the server's
 * (server_sandbox_touch, _hold, _busy); pausing is too (server_sandbox_pause). */
#include "idle.h"

#include "../server/server.h"

static bool idle(struct sbx *sb, uint64_t now)
{
    uint32_t secs = sbx_settings(sb)->idle_pause_s;
    return secs > 0 && sbx_state(sb) == SBX_RUNNING && !server_sandbox_busy(sb) &&
           now - sbx_last_active_ms(sb) >= (uint64_t)secs * 1000;
}

void idle_tick(struct server *srv)
{
    uint64_t now = now_ms();
    for (struct sbx *sb = server_sandbox_first(srv); sb; sb = server_sandbox_next(sb)) {
        err_t err = {0};
        if (idle(sb, now) && server_sandbox_pause(srv, sb, "idle", NULL, NULL, &err) < 0)
            log_warn("idle pause: %s", err.msg);
    }
}
