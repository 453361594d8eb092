/* Sandbox events (egress.refused, egress.allowed, ...): kept in memory for a
 * moment and handed to the store's writer thread in batches, one transaction per
 * sandbox per batch. The event loop never waits for the disk. */
#include <errno.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>

#include "server_impl.h"

void events_flush(struct server *srv)
{
    /* Group runs of the same sandbox; order within a sandbox is kept. */
    size_t from = 0;
    for (size_t i = 1; i <= srv->n_pending; i++) {
        if (i < srv->n_pending && strcmp(srv->pending[i].sandbox, srv->pending[from].sandbox) == 0)
            continue;
        struct store_event evs[EVENTS_PENDING_MAX];
        for (size_t k = from; k < i; k++)
            evs[k - from] = srv->pending[k].ev;
        store_writer_events_add(srv->writer, srv->pending[from].sandbox, evs, i - from);
        from = i;
    }
    srv->n_pending = 0;
}

static void on_flush(evutil_socket_t fd, short what, void *arg)
{
    events_flush(arg);
}

/* Writes someone waits for are on disk: their callbacks run here, on the loop. */
static void on_written(evutil_socket_t fd, short what, void *arg)
{
    struct server *srv = arg;
    store_writer_run_done(srv->writer);
}

int events_start(struct server *srv, err_t *err)
{
    int r = store_writer_start(srv->cfg.db_path, &srv->writer, err);
    if (r < 0) return r;
    srv->flush_timer = evtimer_new(srv->base, on_flush, srv);
    srv->writer_done = event_new(srv->base, store_writer_done_fd(srv->writer), EV_READ | EV_PERSIST,
                                 on_written, srv);
    if (!srv->flush_timer || !srv->writer_done || event_add(srv->writer_done, NULL) < 0)
        return err_set(err, -ENOMEM, "out of memory");
    return 0;
}

void events_stop(struct server *srv)
{
    if (srv->writer) events_flush(srv);
    if (srv->flush_timer) event_free(srv->flush_timer);
    if (srv->writer_done) event_free(srv->writer_done); /* before the writer closes its fd */
    srv->flush_timer = srv->writer_done = NULL;
    store_writer_stop(srv->writer);
    srv->writer = NULL;
}

static void record(struct server *srv, const char *sandbox_id, const char *kind, json_t *fields,
                   bool security);

/* Security events: what says a secret, or the fingerprint gate, was at stake
 * (a placeholder sent where it may not go, a value echoed back, a server or
 * tool refused by the gate or a changed list approved by a person, a request refused for trying to
 * get round a secret's limits). Everything else (egress.allowed and .refused, limits, MCP servers'
 * lives, pauses) is routine: it comes in floods, which must not push the few that matter out of
 * sight. Each class has its own budget a second here and its own cap in the store
 * (STORE_SECURITY_EVENTS_KEPT). */
bool event_is_security(const char *kind, json_t *fields)
{
    static const char *const kinds[] = {"secret.misdirected", "secret.reflected", "mcp.refused",
                                        "mcp.approved"};
    static const char *const refusals[] = {"override_header_with_limited_secret",
                                           "too_many_placeholders",
                                           "too_many_secrets_on_connection"};
    for (size_t i = 0; i < ARRAY_LEN(kinds); i++)
        if (strcmp(kind, kinds[i]) == 0) return true;
    if (strcmp(kind, "egress.refused") != 0) return false;
    const char *reason = json_string_value(json_object_get(fields, "reason"));
    for (size_t i = 0; reason && i < ARRAY_LEN(refusals); i++)
        if (strcmp(reason, refusals[i]) == 0) return true;
    return false;
}

/* A sandbox records at most EVENTS_PER_S routine events a second (bursts of 5x)
 * and EVENTS_SECURITY_PER_S security events, each from a budget of its own: a
 * flood costs store writes that every sandbox waits for. What was dropped is
 * said in an events.dropped event (of the same class) before the next one that
 * is kept. */
void server_event(struct server *srv, const char *sandbox_id, const char *kind, json_t *fields)
{
    metrics_event(srv, kind, fields);
    bool security = event_is_security(kind, fields);
    struct sbx *sb = server_sandbox_find(srv, NULL, sandbox_id);
    if (sb) {
        struct rate_limit *rl = security ? &sb->security_events_rate : &sb->events_rate;
        unsigned per_s = security ? EVENTS_SECURITY_PER_S : EVENTS_PER_S;
        if (!rl->rate) *rl = RATE_LIMIT(per_s, 5 * per_s);
        if (!rate_allow(rl, now_ms())) return;
        uint64_t dropped = rate_take_dropped(rl);
        json_t *f = dropped ? json_pack("{s:I,s:i,s:b}", "count", (json_int_t)dropped,
                                        "limitPerSecond", per_s, "security", security)
                            : NULL;
        if (f) record(srv, sandbox_id, "events.dropped", f, security);
        json_decref(f);
    }
    record(srv, sandbox_id, kind, fields, security);
}

static void record(struct server *srv, const char *sandbox_id, const char *kind, json_t *fields,
                   bool security)
{
    if (srv->n_pending == EVENTS_PENDING_MAX) events_flush(srv);
    struct pending_event *p = &srv->pending[srv->n_pending];
    snprintf(p->sandbox, sizeof p->sandbox, "%s", sandbox_id);
    p->ev = (struct store_event){.time_ms = now_unix_ms(),
                                 .kind = strdup(kind),
                                 .fields_json = json_dumps(fields, JSON_COMPACT),
                                 .security = security};
    if (!p->ev.kind || !p->ev.fields_json) {
        free((char *)p->ev.kind);
        free((char *)p->ev.fields_json);
        return;
    }
    srv->n_pending++;
    struct sbx *sb = srv->hooks.event_recorded ? server_sandbox_find(srv, NULL, sandbox_id) : NULL;
    if (sb) srv->hooks.event_recorded(srv, sb, kind, fields, p->ev.time_ms);
    if (!evtimer_pending(srv->flush_timer, NULL)) {
        struct timeval tv = {0, EVENTS_FLUSH_MS * 1000};
        evtimer_add(srv->flush_timer, &tv);
    }
}

static int append_event(const struct store_event *ev, void *arg)
{
    json_t *arr = arg;
    json_error_t jerr;
    json_t *e = json_loads(ev->fields_json ? ev->fields_json : "{}", 0, &jerr);
    if (!json_is_object(e)) {
        json_decref(e);
        e = json_object();
    }
    char when[40];
    time_rfc3339(when, sizeof when, ev->time_ms);
    json_object_set_new(e, "seq", json_integer(ev->seq));
    json_object_set_new(e, "time", json_string(when));
    json_object_set_new(e, "kind", json_string(ev->kind ? ev->kind : ""));
    json_array_append_new(arr, e);
    return 0;
}

struct events_query {
    struct server *srv;
    char id[PROTO_ID_LEN];
    int64_t after;
    server_events_fn *done;
    void *arg;
};

static void on_events_written(int r, const err_t *werr, void *arg)
{
    struct events_query *q = arg;
    if (r == -ECANCELED) { /* stopping: its request ends with the loop */
        free(q);
        return;
    }
    err_t err = {0};
    json_t *arr = json_array();
    if (store_events_each(q->srv->store, q->id, q->after, 1000, append_event, arr, &err) < 0) {
        json_decref(arr);
        arr = NULL;
    }
    q->done(q->srv, arr, &err, q->arg);
    json_decref(arr);
    free(q);
}

/* A reader expects to see the events of what it just did: they are read once
 * the writer has written what was queued before (the loop does not wait). */
int server_events(struct server *srv, struct sbx *sb, int64_t after, server_events_fn *done,
                  void *arg, err_t *err)
{
    struct events_query *q = malloc(sizeof *q);
    if (!q) return err_set(err, -ENOMEM, "out of memory");
    *q = (struct events_query){.srv = srv, .after = after, .done = done, .arg = arg};
    memcpy(q->id, sb->id, sizeof q->id);
    events_flush(srv);
    store_writer_flush(srv->writer, on_events_written, q);
    return 0;
}
