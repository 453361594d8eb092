/* Client sessions and the routing of messages between them and a server's process.
 *
 * Ids: every request a client sends gets a fresh id toward the process (its progress
 * token too), so two clients that both use id 1 never meet; answers go back under the
 * client's own id. Requests from the process (sampling, elicitation) go to the client
 * session it is working for: the session's own process under isolation "session",
 * otherwise the session with the most recent unanswered request (stdio says nothing
 * about which request a server-side request belongs to). */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway_impl.h"

json_t *mcp_error_msg(json_t *id, int code, const char *message)
{
    return json_pack("{s:s,s:O,s:{s:i,s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null(),
                     "error", "code", code, "message", message);
}

json_t *mcp_result_msg(json_t *id, json_t *result)
{
    return json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id", id, "result", result);
}

struct mcp_backend *mcp_session_backend(struct mcp_session *s)
{
    return s->server->per_session ? s->be : s->server->shared;
}

struct mcp_session *mcp_session_find(struct mcp_server *ms, const char *id)
{
    struct mcp_session *found = NULL;
    for (struct mcp_session *s = ms->sessions; s; s = s->next)
        if (str_equal_ct(s->id, id)) found = s;
    return found;
}

/* Forgets the session's requests still pending in be. */
static void drop_pending(struct mcp_backend *be, struct mcp_session *s)
{
    for (size_t i = 0; be && i < MCP_PENDING_SLOTS && s->pending; i++)
        if (be->pend[i].id && be->pend[i].session == s) mcp_pending_clear(be, &be->pend[i]);
}

void mcp_session_free(struct mcp_session *s)
{
    struct mcp_server *ms = s->server;
    struct mcp_session **pp = &ms->sessions;
    while (*pp && *pp != s)
        pp = &(*pp)->next;
    if (*pp) *pp = s->next;
    ms->n_sessions--;
    while (s->streams) /* first: their answers name the requests still pending */
        mcp_stream_free(s->streams);
    drop_pending(mcp_session_backend(s), s);
    if (s->be) mcp_backend_reap(s->be);
    if (s->init_req) mcp_http_error(s->init_req, 503, s->init_id, -32000, "the session ended");
    mcp_history_free(s);
    json_decref(s->init_id);
    json_decref(s->client_info);
    json_decref(s->subscriptions);
    json_decref(s->asks);
    free(s);
}

void mcp_sessions_expire(struct mcp_server *ms)
{
    uint64_t now = now_ms();
    for (struct mcp_session *s = ms->sessions, *next; s; s = next) {
        next = s->next;
        if (!s->get && !s->pending && !s->init_req && now - s->last_used_ms > MCP_SESSION_IDLE_MS)
            mcp_session_free(s);
    }
}

/* ---- initialize ---- */

json_t *mcp_client_capabilities(json_t *server_result)
{
    json_t *caps = json_deep_copy(json_object_get(server_result, "capabilities"));
    if (!json_is_object(caps)) {
        json_decref(caps);
        caps = json_object();
    }
    /* The gateway tells clients when the tools it serves change (a blocked tool). */
    if (json_object_get(caps, "tools"))
        json_object_set_new(caps, "tools", json_pack("{s:b}", "listChanged", 1));
    return caps;
}

static json_t *init_result(struct mcp_session *s, json_t *server_result)
{
    json_t *caps = mcp_client_capabilities(server_result);
    json_t *r =
        json_pack("{s:s,s:o,s:O}", "protocolVersion", s->version, "capabilities", caps,
                  "serverInfo", json_object_get(server_result, "serverInfo") ?: json_null());
    json_t *instr = json_object_get(server_result, "instructions");
    if (json_is_string(instr)) json_object_set(r, "instructions", instr);
    return r;
}

static void answer_initialize(struct mcp_session *s, struct httpd_req *req, json_t *id)
{
    struct mcp_backend *be = mcp_session_backend(s);
    json_t *msg = mcp_result_msg(id, init_result(s, be->init_result));
    mcp_http_json(req, 200, s->id, msg);
}

/* isolation "session": the session's own process came up (or did not). */
static void own_ready(struct mcp_backend *be, int r, const char *error)
{
    struct mcp_session *s = be->owner;
    struct httpd_req *req = s->init_req;
    s->init_req = NULL;
    if (r == 0) {
        answer_initialize(s, req, s->init_id);
        return;
    }
    if (r == -EPERM) {
        mcp_event(s->server, "mcp.refused",
                  json_pack("{s:s#,s:s}", "fingerprint", s->server->seen, FINGERPRINT_SHORT,
                            "error", error));
        mcp_log(s->server, true, "refused a session's process: %s", error);
    }
    mcp_http_error(req, 503, s->init_id, -32000, "server %s did not start: %s", s->server->name,
                   error);
    mcp_session_free(s);
}

static void negotiate(struct mcp_session *s, json_t *params)
{
    const char *want = json_string_value(json_object_get(params, "protocolVersion"));
    const struct mcp_revision *r = mcp_revision_with_sessions(want);
    snprintf(s->version, sizeof s->version, "%s", r ? r->version : MCP_VERSION_LATEST);
    json_t *caps = json_object_get(params, "capabilities");
    s->sampling = json_object_get(caps, "sampling") != NULL;
    s->elicitation = json_object_get(caps, "elicitation") != NULL;
    s->roots = json_object_get(caps, "roots") != NULL;
    s->client_info = json_incref(json_object_get(params, "clientInfo"));
    s->log_level = -1;
}

/* Processes of isolation "session" servers running in the sandbox now. */
static size_t session_processes(const struct mcp_box *box)
{
    size_t n = 0;
    for (const struct mcp_server *o = box->servers; o; o = o->next)
        if (o->per_session) n += o->n_sessions;
    return n;
}

void mcp_session_initialize(struct mcp_server *ms, struct httpd_req *req, json_t *msg)
{
    json_t *id = json_object_get(msg, "id");
    mcp_sessions_expire(ms);
    if (ms->n_sessions >= MCP_MAX_SESSIONS)
        return mcp_http_error(req, 503, id, -32000,
                              "server %s has %d client sessions, the "
                              "limit; end some (HTTP DELETE) or wait an hour for idle ones to "
                              "expire",
                              ms->name, MCP_MAX_SESSIONS);
    if (ms->per_session && session_processes(ms->box) >= MCP_MAX_SESSION_PROCESSES)
        return mcp_http_error(req, 503, id, -32000,
                              "the sandbox already runs %d server processes "
                              "for sessions, the limit; end some sessions (HTTP DELETE) first",
                              MCP_MAX_SESSION_PROCESSES);
    struct mcp_session *s = calloc(1, sizeof *s);
    if (!s) return mcp_http_error(req, 503, id, -32603, "out of memory");
    s->history = calloc(MCP_HISTORY, sizeof *s->history);
    if (!s->history) {
        free(s);
        return mcp_http_error(req, 503, id, -32603, "out of memory");
    }
    s->server = ms;
    random_hex(s->id, 16);
    s->subscriptions = json_array();
    s->asks = json_object();
    s->last_used_ms = now_ms();
    negotiate(s, json_object_get(msg, "params"));
    s->next = ms->sessions;
    ms->sessions = s;
    ms->n_sessions++;
    if (!ms->per_session) return answer_initialize(s, req, id);
    err_t err = {0};
    s->init_req = req;
    s->init_id = json_incref(id);
    if (mcp_backend_spawn(ms, s, own_ready, &s->be, &err) < 0) {
        s->init_req = NULL;
        mcp_http_error(req, 503, id, -32000, "cannot start server %s: %s", ms->name, err.msg);
        mcp_session_free(s);
    }
}

/* ---- from a client ---- */

static void answer(struct mcp_stream *st, json_t *msg)
{
    mcp_stream_send(st, msg, true);
}

void mcp_forward(struct mcp_session *s, struct mcp_stream *st, json_t *msg)
{
    json_t *id = json_object_get(msg, "id");
    struct mcp_backend *be = mcp_session_backend(s);
    if (!be || be->state != BE_READY)
        return answer(st, mcp_error_msg(id, -32000, "the server is restarting; try again"));
    if (s->pending >= MCP_MAX_PENDING)
        return answer(st, mcp_error_msg(id, -32000,
                                        "this session has too many unanswered "
                                        "requests; wait for some answers first"));
    if (evbuffer_get_length(be->to_server) > MCP_SERVER_BACKLOG)
        return answer(st, mcp_error_msg(id, -32000,
                                        "the server is not reading its input; "
                                        "try again later"));
    if (budget_over(be->budget))
        return answer(st, mcp_error_msg(id, -32000,
                                        "this sandbox holds as much in the daemon as it may "
                                        "(--held-per-sandbox); try again once answers came"));
    if (be->modern) mcp_session_envelope(s, msg);
    json_t *client_id = json_incref(id);
    struct mcp_pending *p;
    if (mcp_backend_request(be, msg, &p) < 0) {
        answer(st, mcp_error_msg(client_id, -32000, "the server has too many unanswered requests"));
        json_decref(client_id);
        return;
    }
    p->session = s;
    p->client_id = client_id;
    p->stream = st;
    mcp_call_sent(p, msg);
    if (be->modern && !s->modern) p->request = json_incref(msg); /* for its input rounds */
    s->pending++;
    server_sandbox_hold(s->server->box->sb, +1); /* no idle pause while it works */
    json_t *meta = json_object_get(json_object_get(msg, "params"), "_meta");
    json_t *token = json_object_get(meta, "progressToken");
    if (token) {
        p->client_token = json_incref(token);
        json_object_set_new(meta, "progressToken", json_integer(p->id));
    }
    mcp_backend_send(be, json_incref(msg));
}

static void subscription(struct mcp_session *s, json_t *msg, bool add)
{
    json_t *uri = json_object_get(json_object_get(msg, "params"), "uri");
    if (!json_is_string(uri)) return;
    size_t i;
    json_t *v;
    json_array_foreach(s->subscriptions, i, v) if (json_equal(v, uri))
    {
        if (!add) json_array_remove(s->subscriptions, i);
        return;
    }
    if (add && json_array_size(s->subscriptions) < 1024) json_array_append(s->subscriptions, uri);
}

json_t *mcp_call_refusal(struct mcp_server *ms, json_t *msg)
{
    json_t *id = json_object_get(msg, "id");
    const char *tool = json_string_value(json_object_get(json_object_get(msg, "params"), "name"));
    char text[300];
    if (tool && !mcp_tool_exposed(ms, tool)) {
        snprintf(text, sizeof text,
                 "tool %.100s is not available here: this server's gateway exposes only "
                 "the tools its tools option lists",
                 tool);
        mcp_event(ms, "mcp.refused",
                  json_pack("{s:s,s:s}", "tool", tool, "reason", "not in the tools option"));
        return mcp_error_msg(id, -32602, text);
    }
    if (tool && mcp_gate_allows(ms, tool)) return NULL;
    snprintf(text, sizeof text,
             "tool %.100s is not available: it is not in the tool list "
             "approved for this server (runtime blocks tools that changed since review)",
             tool ? tool : "(no name)");
    return mcp_error_msg(id, -32602, text);
}

static void client_request(struct mcp_session *s, struct mcp_stream *st, json_t *msg)
{
    struct mcp_server *ms = s->server;
    json_t *id = json_object_get(msg, "id");
    const char *method = json_string_value(json_object_get(msg, "method"));
    if (strcmp(method, "initialize") == 0)
        return answer(st, mcp_error_msg(id, -32600, "this session is initialized already"));
    if (strcmp(method, "ping") == 0) return answer(st, mcp_result_msg(id, json_object()));
    struct mcp_backend *be = mcp_session_backend(s);
    if (be && be->modern && strcmp(method, "logging/setLevel") == 0) {
        /* A 2026-07-28 process takes the level per request: the session's goes on each. */
        json_t *level = json_object_get(json_object_get(msg, "params"), "level");
        int l = mcp_log_level(json_string_value(level));
        if (l < 0) return answer(st, mcp_error_msg(id, -32602, "Invalid params: not a log level"));
        s->log_level = l;
        return answer(st, mcp_result_msg(id, json_object()));
    }
    if (strcmp(method, "tools/list") == 0 && !ms->served_json)
        return answer(st,
                      mcp_error_msg(id, -32603, "the approved tool list cannot be sent as JSON"));
    if (strcmp(method, "tools/list") == 0)
        return answer(st, mcp_result_msg(id, json_pack("{s:O}", "tools", ms->served_json)));
    json_t *refusal = strcmp(method, "tools/call") == 0 ? mcp_call_refusal(ms, msg) : NULL;
    if (refusal) mcp_call_refused(ms, msg, refusal);
    if (refusal) return answer(st, refusal);
    if (strcmp(method, "resources/subscribe") == 0) subscription(s, msg, true);
    if (strcmp(method, "resources/unsubscribe") == 0) {
        subscription(s, msg, false);
        /* Another session or a listen stream still wants its updates. */
        if (mcp_resource_wanted(ms, json_object_get(json_object_get(msg, "params"), "uri")))
            return answer(st, mcp_result_msg(id, json_object()));
    }
    mcp_forward(s, st, msg);
}

struct mcp_pending *mcp_session_pending(struct mcp_session *s)
{
    struct mcp_backend *be = mcp_session_backend(s);
    for (size_t i = 0; be && s->pending && i < MCP_PENDING_SLOTS; i++)
        if (be->pend[i].id && be->pend[i].session == s) return &be->pend[i];
    return NULL;
}

static struct mcp_pending *pending_of(struct mcp_backend *be, struct mcp_session *s, json_t *id)
{
    for (size_t i = 0; be && id && i < MCP_PENDING_SLOTS; i++)
        if (be->pend[i].id && be->pend[i].session == s && json_equal(be->pend[i].client_id, id))
            return &be->pend[i];
    return NULL;
}

/* MCP's ClientNotification (2025-03-26 to 2025-11-25). */
bool mcp_client_notification(const char *method)
{
    static const char *const defined[] = {
        "notifications/initialized",        "notifications/cancelled",    "notifications/progress",
        "notifications/roots/list_changed", "notifications/tasks/status",
    };
    for (size_t i = 0; method && i < ARRAY_LEN(defined); i++)
        if (strcmp(method, defined[i]) == 0) return true;
    return false;
}

/* A client's string as logs and events show it: at most size-1 bytes, cut between UTF-8
 * characters, control characters as '?' (a newline would forge a log line). */
static const char *shown(const char *in, char *out, size_t size)
{
    size_t n = 0;
    for (; in && in[n] && n + 1 < size; n++)
        out[n] = (unsigned char)in[n] < 0x20 || in[n] == 0x7f ? '?' : in[n];
    if (in && in[n]) /* cut short: not inside a UTF-8 character */
        while (n > 0 && ((unsigned char)in[n] & 0xc0) == 0x80)
            n--;
    out[n] = '\0';
    return out;
}

void mcp_notification_dropped(struct mcp_server *ms, json_t *msg)
{
    const char *method = json_string_value(json_object_get(msg, "method"));
    const char *tool = json_string_value(json_object_get(json_object_get(msg, "params"), "name"));
    ms->notifications_dropped++;
    if (!ms->dropped_reports.rate) ms->dropped_reports = RATE_LIMIT(1, 5);
    if (!rate_allow(&ms->dropped_reports, now_ms())) return;
    char m[81], t[129];
    shown(method, m, sizeof m);
    log_warn("sandbox %s, MCP server %s: dropped a %s sent as a notification (no id): only "
             "the notifications MCP defines reach the server",
             sbx_id(ms->box->sb), ms->name, m[0] ? m : "(no method)");
    json_t *fields = json_pack("{s:s,s:s}", "method", m, "reason",
                               "sent as a notification, which MCP does not define: dropped");
    if (tool && method && strcmp(method, "tools/call") == 0)
        json_object_set_new(fields, "tool", json_string(shown(tool, t, sizeof t)));
    mcp_event(ms, "mcp.refused", fields);
}

static void client_notification(struct mcp_session *s, json_t *msg)
{
    const char *method = json_string_value(json_object_get(msg, "method"));
    if (!mcp_client_notification(method)) return mcp_notification_dropped(s->server, msg);
    struct mcp_backend *be = mcp_session_backend(s);
    if (!be || be->state != BE_READY) return;
    if (strcmp(method, "notifications/initialized") == 0 ||
        strcmp(method, "notifications/roots/list_changed") == 0)
        return; /* the gateway initialized the process itself and answers roots itself */
    if (strcmp(method, "notifications/cancelled") == 0) {
        json_t *params = json_object_get(msg, "params");
        struct mcp_pending *p = pending_of(be, s, json_object_get(params, "requestId"));
        if (!p) return;
        json_object_set_new(params, "requestId", json_integer(p->id));
        struct mcp_stream *st = p->stream;
        mcp_pending_clear(be, p);
        if (st) mcp_stream_send(st, NULL, true); /* nothing more comes for it */
    }
    mcp_backend_send(be, json_incref(msg));
}

/* A client's answer to a request of the process: back under the process's own id. */
static void client_response(struct mcp_session *s, json_t *msg)
{
    json_t *id = json_object_get(msg, "id");
    const char *key = json_string_value(id);
    json_t *orig = key ? json_object_get(s->asks, key) : NULL;
    struct mcp_backend *be = mcp_session_backend(s);
    if (!orig || !be) return;
    if (json_is_object(orig)) { /* an input request of a 2026-07-28 process */
        mcp_stdio_input(be, orig, msg);
        json_object_del(s->asks, key);
        return;
    }
    json_t *out = json_copy(msg);
    json_object_set(out, "id", orig);
    json_object_del(s->asks, key);
    mcp_backend_send(be, out);
}

static bool is_request(json_t *m)
{
    return json_is_string(json_object_get(m, "method")) && json_object_get(m, "id");
}

int mcp_session_post(struct mcp_session *s, struct httpd_req *req, json_t *body)
{
    bool batch = json_is_array(body);
    const struct mcp_revision *r = mcp_revision(s->version);
    if (batch && !(r && r->batches)) return 400;
    size_t n = batch ? json_array_size(body) : 1, requests = 0;
    if (n == 0) return 400;
    for (size_t i = 0; i < n; i++) {
        json_t *m = batch ? json_array_get(body, i) : body;
        if (!mcp_valid_message(m)) return 400;
        if (is_request(m)) requests++;
    }
    s->last_used_ms = now_ms();
    struct mcp_stream *st = NULL;
    if (requests) {
        st = mcp_stream_new(s, req, false);
        st->waiting = (int)requests;
        st->batch = batch;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *m = batch ? json_array_get(body, i) : body;
        if (is_request(m))
            client_request(s, st, m);
        else if (json_object_get(m, "method"))
            client_notification(s, m);
        else
            client_response(s, m);
    }
    if (!requests) {
        s->server->requests++;
        httpd_reply(req, 202, NULL);
    }
    return 0;
}

/* ---- from the process ---- */

/* Where a message that is not an answer goes for a session: the stream of its newest
 * unanswered request, else its GET stream; NULL when it has neither. */
static struct mcp_stream *stream_for(struct mcp_session *s)
{
    for (struct mcp_stream *st = s->streams; st; st = st->next)
        if (!st->is_get && st->waiting > 0) return st;
    return s->get;
}

static void deliver(struct mcp_session *s, json_t *msg)
{
    const char *level = json_string_value(json_object_get(json_object_get(msg, "params"), "level"));
    if (s->modern && !mcp_modern_wants_log(s, level)) return json_decref(msg);
    struct mcp_stream *st = stream_for(s);
    if (st)
        mcp_stream_send(st, msg, false);
    else
        json_decref(msg);
}

void mcp_broadcast(struct mcp_server *ms, json_t *msg)
{
    for (struct mcp_session *s = ms->sessions; s; s = s->next)
        if (s->get) mcp_stream_send(s->get, json_incref(msg), false);
    mcp_listen_notify(ms, msg);
    json_decref(msg);
}

/* The one session waiting on the process; NULL when none or several do (*several set):
 * a guess could hand one client's data to another. */
static struct mcp_session *session_for_request(struct mcp_backend *be, bool *several)
{
    *several = false;
    if (be->owner) return be->owner;
    struct mcp_session *found = NULL;
    struct mcp_session *lists[] = {be->server->sessions, be->server->contexts};
    for (size_t i = 0; i < ARRAY_LEN(lists); i++)
        for (struct mcp_session *s = lists[i]; s; s = s->next) {
            if (!s->pending) continue; /* a parked call waits too: its process may ask again */
            if (found) {
                *several = true;
                return NULL;
            }
            found = s;
        }
    return found;
}

static void route_request(struct mcp_backend *be, struct mcp_session *s, json_t *msg);

static void refuse_ambiguous(struct mcp_backend *be, json_t *msg)
{
    mcp_backend_send(be, mcp_error_msg(json_object_get(msg, "id"), -32000,
                                       "several clients are waiting on this server and stdio "
                                       "does not say which one this request is for; run the "
                                       "server with isolation \"session\""));
}

static void on_held(evutil_socket_t fd, short what, void *arg);

/* While several clients wait on the process, its request waits too (a guess could hand
 * one client's prompt to another) until one waiter is left, or MCP_HOLD_MS passed. */
static void hold(struct mcp_backend *be, json_t *msg)
{
    if (!be->held) be->held = json_array();
    if (!be->held_ev) be->held_ev = evtimer_new(server_base(be->server->box->srv), on_held, be);
    if (!be->held || !be->held_ev || json_array_size(be->held) >= MCP_MAX_HELD)
        return refuse_ambiguous(be, msg);
    json_array_append_new(be->held, json_pack("{s:O,s:I}", "msg", msg, "until",
                                              (json_int_t)(now_ms() + MCP_HOLD_MS)));
    struct timeval tv = {MCP_HOLD_MS / 1000, (MCP_HOLD_MS % 1000) * 1000};
    if (!evtimer_pending(be->held_ev, NULL)) evtimer_add(be->held_ev, &tv);
}

/* A waiter went away, or a hold ran out: what can be routed now is, the rest waits. */
static void on_held(evutil_socket_t fd, short what, void *arg)
{
    struct mcp_backend *be = arg;
    uint64_t now = now_ms(), next = 0;
    for (size_t i = 0; be->state == BE_READY && i < json_array_size(be->held);) {
        json_t *h = json_array_get(be->held, i), *msg = json_object_get(h, "msg");
        uint64_t until = (uint64_t)json_integer_value(json_object_get(h, "until"));
        bool several;
        struct mcp_session *s = session_for_request(be, &several);
        if (several && now < until) {
            next = next && next < until ? next : until;
            i++;
            continue;
        }
        json_incref(msg);
        json_array_remove(be->held, i);
        if (several)
            refuse_ambiguous(be, msg);
        else
            route_request(be, s, msg);
        json_decref(msg);
    }
    if (!next) return;
    uint64_t wait = next - now;
    struct timeval tv = {(time_t)(wait / 1000), (suseconds_t)(wait % 1000) * 1000};
    evtimer_add(be->held_ev, &tv);
}

void mcp_held_recheck(struct mcp_backend *be)
{
    if (be->held_ev && json_array_size(be->held)) event_active(be->held_ev, EV_TIMEOUT, 0);
}

/* The process gave up a request of its own: if it is held, it is dropped. */
static bool unhold(struct mcp_backend *be, json_t *request_id)
{
    size_t i;
    json_t *h;
    json_array_foreach(
        be->held, i,
        h) if (json_equal(json_object_get(json_object_get(h, "msg"), "id"), request_id))
    {
        json_array_remove(be->held, i);
        return true;
    }
    return false;
}

static void server_request(struct mcp_backend *be, json_t *msg)
{
    json_t *id = json_object_get(msg, "id");
    const char *method = json_string_value(json_object_get(msg, "method"));
    if (strcmp(method, "ping") == 0) return mcp_backend_send(be, mcp_result_msg(id, json_object()));
    if (strcmp(method, "roots/list") == 0) /* the server's files are the sandbox's */
        return mcp_backend_send(
            be, mcp_result_msg(id, json_pack("{s:[{s:s,s:s}]}", "roots", "uri", "file:///workspace",
                                             "name", "workspace")));
    bool several;
    struct mcp_session *s = session_for_request(be, &several);
    if (several) return hold(be, msg);
    route_request(be, s, msg);
}

/* A request of the process for the one client waiting on it (s), or for nobody. */
static void route_request(struct mcp_backend *be, struct mcp_session *s, json_t *msg)
{
    json_t *id = json_object_get(msg, "id");
    const char *method = json_string_value(json_object_get(msg, "method"));
    if (s && s->modern) return mcp_mrtr_ask(s, msg);
    bool able =
        s && ((strcmp(method, "sampling/createMessage") == 0 && s->sampling) ||
              (strcmp(method, "elicitation/create") == 0 && s->elicitation) ||
              (strncmp(method, "sampling/", 9) != 0 && strncmp(method, "elicitation/", 12) != 0));
    if (!able)
        return mcp_backend_send(be, mcp_error_msg(id, -32601,
                                                  s ? "the client does not offer "
                                                      "this capability"
                                                    : "no client is waiting on "
                                                      "this server to answer the request"));
    char key[32];
    snprintf(key, sizeof key, "rt-%lld", (long long)++s->next_ask);
    if (json_object_size(s->asks) >= MCP_MAX_PENDING)
        return mcp_backend_send(be, mcp_error_msg(id, -32000, "too many requests to the client"));
    json_object_set(s->asks, key, id);
    json_t *out = json_copy(msg);
    json_object_set_new(out, "id", json_string(key));
    deliver(s, out);
}

static void answer_from_server(struct mcp_backend *be, json_t *msg)
{
    struct mcp_pending *p = mcp_pending_find(be, json_integer_value(json_object_get(msg, "id")));
    if (!p || !p->session) return;
    if (be->modern && !p->session->modern && mcp_stdio_answer(be, p, msg)) return;
    json_t *out = json_copy(msg);
    json_object_set(out, "id", p->client_id);
    struct mcp_stream *st = p->stream;
    struct mcp_session *s = p->session;
    s->last_used_ms = now_ms();
    mcp_call_answered(be->server, p, msg, NULL);
    mcp_pending_clear(be, p);
    if (s->modern) return mcp_modern_answered(s, st, out);
    if (st)
        mcp_stream_send(st, out, true);
    else
        json_decref(out);
}

static void progress(struct mcp_backend *be, json_t *msg)
{
    json_t *params = json_object_get(msg, "params");
    json_t *token = json_object_get(params, "progressToken");
    struct mcp_pending *p =
        json_is_integer(token) ? mcp_pending_find(be, json_integer_value(token)) : NULL;
    if (!p || !p->session || !p->client_token) return;
    json_t *out = json_deep_copy(msg);
    json_object_set(json_object_get(out, "params"), "progressToken", p->client_token);
    if (p->stream)
        mcp_stream_send(p->stream, out, false);
    else
        json_decref(out);
}

static void resource_updated(struct mcp_backend *be, json_t *msg)
{
    json_t *uri = json_object_get(json_object_get(msg, "params"), "uri");
    for (struct mcp_session *s = be->server->sessions; s; s = s->next) {
        if (be->owner && s != be->owner) continue;
        size_t i;
        json_t *v;
        json_array_foreach(s->subscriptions, i, v) if (json_equal(v, uri))
        {
            if (s->get) mcp_stream_send(s->get, json_incref(msg), false);
            break;
        }
    }
    mcp_listen_notify(be->server, msg);
}

void mcp_route_from_server(struct mcp_backend *be, json_t *msg)
{
    const char *method = json_string_value(json_object_get(msg, "method"));
    if (!method) return answer_from_server(be, msg);
    if (json_object_get(msg, "id")) return server_request(be, msg);
    if (strcmp(method, "notifications/subscriptions/acknowledged") == 0) return; /* our listen */
    json_t *meta = json_object_get(json_object_get(msg, "params"), "_meta");
    json_object_del(meta, MCP_META "subscriptionId"); /* the gateway's listen on stdio */
    if (strcmp(method, "notifications/progress") == 0) return progress(be, msg);
    json_t *cancelled = json_object_get(json_object_get(msg, "params"), "requestId");
    if (strcmp(method, "notifications/cancelled") == 0 &&
        (unhold(be, cancelled) || mcp_mrtr_withdrawn(be->server, cancelled)))
        return;
    if (strcmp(method, "notifications/resources/updated") == 0) return resource_updated(be, msg);
    if (be->owner) return deliver(be->owner, json_incref(msg));
    /* A log line while one client waits belongs, as far as stdio can tell, to its request;
     * while several wait it could belong to any, and is dropped rather than guessed. */
    if (strcmp(method, "notifications/message") == 0) {
        bool several;
        struct mcp_session *s = session_for_request(be, &several);
        if (s) return deliver(s, json_incref(msg));
        if (several) return;
    }
    mcp_broadcast(be->server, json_incref(msg));
}

/* A ready process ended: every request it owed gets an error answer. */
void mcp_backend_lost(struct mcp_backend *be, const char *why)
{
    char text[700];
    snprintf(text, sizeof text, "the server ended before answering: %s", why);
    for (size_t i = 0; i < MCP_PENDING_SLOTS; i++) {
        struct mcp_pending *p = &be->pend[i];
        if (!p->id || !p->session) continue;
        struct mcp_stream *st = p->stream;
        json_t *err = mcp_error_msg(p->client_id, -32000, text);
        mcp_call_answered(be->server, p, NULL, why);
        mcp_pending_clear(be, p);
        if (st)
            mcp_stream_send(st, err, true);
        else
            json_decref(err);
    }
    /* Parked calls died with the process: their retries find no park. */
    while (!be->owner && be->server->contexts)
        mcp_modern_free(be->server->contexts);
    if (be->owner) {
        struct mcp_session *s = be->owner;
        mcp_event(be->server, "mcp.exited",
                  json_pack("{s:i,s:s}", "exitCode", be->exit_code, "error", why));
        mcp_session_free(s); /* reaps be */
        return;
    }
    mcp_server_process_lost(be, why);
}
