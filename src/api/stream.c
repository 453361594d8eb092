/* GET /v1/events/stream: Server-Sent Events of the caller's sandboxes, for the dashboard
 * (and any client): `sandbox` with a sandbox's JSON when it appears or changes state or
 * settings or one of its MCP servers moves, `sandbox.deleted` {id} when it is gone, and `event`
 * {sandboxId, kind, time, fields} for each event recorded (after the per-sandbox rate limits: a
 * flood costs the stream no more than the store). The admin's stream covers every account's.
 *
 * A stream is a notice, not a record: a client that was away reads what it missed from
 * GET /v1/sandboxes and .../events?after=. One that does not read is cut past
 * STREAM_BACKLOG_MAX; streams are counted per account and in total. */
#include <event2/buffer.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>

#include "api_impl.h"

#define STREAMS_MAX 256
#define STREAMS_PER_ACCOUNT 16
#define STREAM_BACKLOG_MAX (1u << 20)
#define STREAM_PING_S 20 /* a comment line, so that proxies and browsers keep it open */

struct stream {
    struct httpd_req *req;
    char account[ACCOUNT_NAME_MAX];
    bool admin;
    struct stream *next;
};

static struct stream *streams;
static size_t n_streams;
static struct event *ping_timer;

static void unlink_stream(struct stream *st)
{
    for (struct stream **p = &streams; *p; p = &(*p)->next)
        if (*p == st) {
            *p = st->next;
            n_streams--;
            break;
        }
}

/* Its client left (or was cut): nobody reads an answer any more. */
static void on_gone(struct httpd_req *req, void *arg)
{
    struct stream *st = arg;
    unlink_stream(st);
    httpd_abandon(req);
    free(st);
}

/* Sends text to one stream; a client that does not read is cut (on_gone follows). */
static void send_to(struct stream *st, const char *text, size_t len)
{
    if (httpd_backlog(st->req) > STREAM_BACKLOG_MAX) return httpd_cut(st->req);
    httpd_stream_send(st->req, text, len);
}

/* `event: name` with data (taken) to every stream that may see account's things. */
static void broadcast(const char *account, const char *name, json_t *data)
{
    char *text = json_dumps(data, JSON_COMPACT | JSON_REAL_PRECISION(12));
    json_decref(data);
    if (!text) return;
    struct evbuffer *msg = evbuffer_new();
    if (msg) evbuffer_add_printf(msg, "event: %s\ndata: %s\n\n", name, text);
    free(text);
    if (!msg) return;
    size_t len = evbuffer_get_length(msg);
    const char *bytes = (const char *)evbuffer_pullup(msg, -1);
    for (struct stream *st = streams, *next; st; st = next) {
        next = st->next; /* a cut may free st */
        if (st->admin || strcmp(st->account, account) == 0) send_to(st, bytes, len);
    }
    evbuffer_free(msg);
}

void api_stream_sandbox_changed(struct server *srv, struct sbx *sb, bool gone)
{
    if (!streams) return;
    if (gone)
        return broadcast(sbx_account(sb), "sandbox.deleted", json_pack("{s:s}", "id", sbx_id(sb)));
    broadcast(sbx_account(sb), "sandbox", api_sandbox_json(sb));
}

void api_stream_event(struct server *srv, struct sbx *sb, const char *kind, json_t *fields,
                      int64_t time_ms)
{
    if (!streams) return;
    char when[40];
    time_rfc3339(when, sizeof when, time_ms);
    broadcast(sbx_account(sb), "event",
              json_pack("{s:s,s:s,s:s,s:O}", "sandboxId", sbx_id(sb), "kind", kind, "time", when,
                        "fields", fields ? fields : json_null()));
}

static void on_ping(evutil_socket_t fd, short what, void *arg)
{
    static const char ping[] = ": ping\n\n";
    for (struct stream *st = streams, *next; st; st = next) {
        next = st->next;
        send_to(st, ping, sizeof ping - 1);
    }
}

static size_t streams_of(const char *account)
{
    size_t n = 0;
    for (struct stream *st = streams; st; st = st->next)
        n += strcmp(st->account, account) == 0;
    return n;
}

void api_events_stream(struct httpd_req *req, struct server *srv, const struct api_caller *who)
{
    if (n_streams >= STREAMS_MAX || streams_of(who->account) >= STREAMS_PER_ACCOUNT)
        return api_error(req, 429, "limit_reached",
                         "too many event streams open (%d an account, %d in all); close one",
                         STREAMS_PER_ACCOUNT, STREAMS_MAX);
    if (!ping_timer) {
        ping_timer = event_new(server_base(srv), -1, EV_PERSIST, on_ping, NULL);
        struct timeval every = {STREAM_PING_S, 0};
        if (!ping_timer || event_add(ping_timer, &every) < 0)
            return api_error(req, 500, "internal_error", "out of memory");
    }
    struct stream *st = calloc(1, sizeof *st);
    if (!st) return api_error(req, 500, "internal_error", "out of memory");
    st->req = req;
    st->admin = who->admin;
    str_copy(st->account, sizeof st->account, who->account);
    st->next = streams;
    streams = st;
    n_streams++;
    api_idempotency_forget(req);
    httpd_add_header(req, "Content-Type", "text/event-stream");
    httpd_add_header(req, "Cache-Control", "no-store");
    httpd_add_header(req, "X-Accel-Buffering", "no"); /* nginx in front: pass each as it comes */
    httpd_stream_start(req, 200);
    httpd_on_gone(req, on_gone, st);
    static const char hello[] = "retry: 3000\n\n";
    httpd_stream_send(req, hello, sizeof hello - 1);
}
