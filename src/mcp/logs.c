/* What each MCP server printed, for `runtime sandbox mcp ID logs SERVER`: the stderr of
 * its processes and the output of its install steps, in arrival order, in one ring of
 * MCP_LOG_RING bytes per server (the oldest bytes go first), in memory only: a daemon
 * restart starts it empty. A follower (?follow=1) gets what is kept, then each new byte
 * as it comes; one that does not read is cut off rather than buffered without end. */
#include <errno.h>
#include <event2/buffer.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp_impl.h"

struct mcp_log_follower {
    struct mcp_server *server;
    struct httpd_req *req;
    struct mcp_log_follower *next;
};

static void unlink_follower(struct mcp_log_follower *f)
{
    struct mcp_log_follower **pp = &f->server->log_followers;
    while (*pp && *pp != f)
        pp = &(*pp)->next;
    if (*pp) *pp = f->next;
}

/* Ends the follower's answer (its client still there) and frees it. */
static void end_follower(struct mcp_log_follower *f)
{
    unlink_follower(f);
    httpd_on_gone(f->req, NULL, NULL);
    httpd_stream_end(f->req);
    free(f);
}

static void on_follower_gone(struct httpd_req *req, void *arg)
{
    struct mcp_log_follower *f = arg;
    unlink_follower(f);
    httpd_abandon(f->req);
    free(f);
}

/* A client that stopped reading: its connection goes, not the daemon's memory. */
static bool backlogged(struct mcp_log_follower *f)
{
    if (httpd_backlog(f->req) <= MCP_LOG_FOLLOW_BACKLOG) return false;
    unlink_follower(f);
    httpd_on_gone(f->req, NULL, NULL);
    httpd_abandon(f->req);
    free(f);
    return true;
}

void mcp_log_write(struct mcp_server *ms, const void *data, size_t len)
{
    if (len == 0) return;
    if (!ms->log && !(ms->log = evbuffer_new())) return;
    evbuffer_add(ms->log, data, len);
    ms->log_total += len;
    size_t kept = evbuffer_get_length(ms->log);
    if (kept > MCP_LOG_RING) evbuffer_drain(ms->log, kept - MCP_LOG_RING);
    for (struct mcp_log_follower *f = ms->log_followers, *next; f; f = next) {
        next = f->next;
        if (backlogged(f)) continue;
        struct evbuffer *out = evbuffer_new();
        if (!out) continue;
        evbuffer_add(out, data, len);
        httpd_stream_send_buffer(f->req, out);
        evbuffer_free(out);
    }
}

void mcp_log_printf(struct mcp_server *ms, const char *fmt, ...)
{
    char line[1200];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n > 0) mcp_log_write(ms, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

void mcp_log_free(struct mcp_server *ms)
{
    while (ms->log_followers)
        end_follower(ms->log_followers);
    if (ms->log) evbuffer_free(ms->log);
    ms->log = NULL;
}

/* What is kept, as the answer's start: when older bytes were dropped, a line that says
 * so instead of the first line's remains. */
static struct evbuffer *kept_text(struct mcp_server *ms)
{
    struct evbuffer *out = evbuffer_new();
    size_t kept = ms->log ? evbuffer_get_length(ms->log) : 0;
    if (!out || kept == 0) return out;
    const char *text = (const char *)evbuffer_pullup(ms->log, -1);
    size_t from = 0;
    if (ms->log_total > kept) {
        const char *nl = memchr(text, '\n', kept);
        from = nl ? (size_t)(nl + 1 - text) : 0;
        evbuffer_add_printf(out,
                            "[runtime: %llu earlier bytes were dropped; each server keeps the "
                            "last %u]\n",
                            (unsigned long long)(ms->log_total - kept + from), MCP_LOG_RING);
    }
    evbuffer_add(out, text + from, kept - from);
    return out;
}

int mcp_logs_reply(struct server *srv, struct sbx *sb, const char *name, struct httpd_req *req,
                   bool follow, err_t *err)
{
    struct mcp_server *ms = mcp_server_find(mcp_box_of(sb), name);
    if (!ms)
        return err_set(err, -ENOENT,
                       "sandbox %s has no MCP server %s; `runtime sandbox mcp %s` lists them",
                       sbx_id(sb), name, sbx_id(sb));
    struct mcp_log_follower *f = follow ? calloc(1, sizeof *f) : NULL;
    if (follow && !f) return err_set(err, -ENOMEM, "out of memory");
    struct evbuffer *out = kept_text(ms);
    if (!out) {
        free(f);
        return err_set(err, -ENOMEM, "out of memory");
    }
    httpd_add_header(req, "Content-Type", "text/plain; charset=utf-8");
    if (!follow) {
        httpd_reply(req, 200, out);
        evbuffer_free(out);
        return 0;
    }
    httpd_add_header(req, "Cache-Control", "no-cache");
    httpd_add_header(req, "X-Accel-Buffering", "no");
    httpd_stream_start(req, 200);
    if (evbuffer_get_length(out)) httpd_stream_send_buffer(req, out);
    evbuffer_free(out);
    f->server = ms;
    f->req = req;
    f->next = ms->log_followers;
    ms->log_followers = f;
    httpd_on_gone(req, on_follower_gone, f);
    return 0;
}
