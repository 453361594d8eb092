/* The Streamable HTTP transport of MCP at {publicUrl}/mcp/{link}/{server}: checks, JSON
 * and SSE answers, keep-alives. Both eras on one URL, chosen per POST by its body
 * (mcp_modern_classify): 2025-03-26, 2025-06-18 and 2025-11-25 with sessions, event ids
 * and resumption by Last-Event-ID; 2026-07-28 stateless (modern.c). */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "gateway_impl.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void observe(struct mcp_server *ms, uint64_t started_ns)
{
    ms->requests++;
    meter_observe(&ms->latency, (double)(now_ns() - started_ns) / 1e9);
}

static const char *header(struct httpd_req *req, const char *name)
{
    return httpd_header(req, name);
}

static void set_header(struct httpd_req *req, const char *name, const char *value)
{
    httpd_add_header(req, name, value);
}

void mcp_http_json(struct httpd_req *req, int status, const char *session_id, json_t *v)
{
    size_t len = 0;
    char *text = json_text(v, &len);
    json_decref(v);
    struct evbuffer *out = evbuffer_new();
    if (text) evbuffer_add(out, text, len);
    free(text);
    set_header(req, "Content-Type", "application/json");
    if (session_id) set_header(req, "Mcp-Session-Id", session_id);
    httpd_reply(req, status, out);
    evbuffer_free(out);
}

void mcp_http_error(struct httpd_req *req, int status, json_t *id, int code, const char *fmt, ...)
{
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (status == 401) set_header(req, "WWW-Authenticate", "Bearer");
    mcp_http_json(req, status, NULL, mcp_error_msg(id, code, msg));
}

/* ---- streams ---- */

static void on_client_gone(struct httpd_req *req, void *arg);

static void detach(struct mcp_stream *st)
{
    if (st->req) httpd_on_gone(st->req, NULL, NULL);
}

struct mcp_stream *mcp_stream_new(struct mcp_session *s, struct httpd_req *req, bool get)
{
    struct mcp_stream *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    st->session = s;
    st->req = req;
    st->is_get = get;
    st->number = ++s->next_stream;
    st->answers = json_array();
    st->started_ns = now_ns();
    st->next = s->streams;
    s->streams = st;
    httpd_on_gone(req, on_client_gone, st);
    return st;
}

static void unlink_stream(struct mcp_stream *st)
{
    struct mcp_session *s = st->session;
    struct mcp_stream **pp = &s->streams;
    while (*pp && *pp != st)
        pp = &(*pp)->next;
    if (*pp) *pp = st->next;
    if (s->get == st) s->get = NULL;
    /* Answers still due point at it; once all came (the common case), none does. */
    struct mcp_backend *be = st->waiting > 0 ? mcp_session_backend(s) : NULL;
    for (size_t i = 0; be && i < MCP_PENDING_SLOTS; i++)
        if (be->pend[i].stream == st) be->pend[i].stream = NULL;
}

/* Ends the HTTP answer (if a client still has it) and frees the stream. */
/* What a POST still waiting gets when its session (or the server) ends first: an error
 * for its request, as JSON-RPC has it. An HTTP error instead would fail the client's
 * whole connection (the Python SDK's task group) for a request it may have given up. */
static json_t *ended_answer(struct mcp_stream *st)
{
    struct mcp_backend *be = st->waiting > 0 ? mcp_session_backend(st->session) : NULL;
    json_t *id = NULL;
    for (size_t i = 0; be && !id && i < MCP_PENDING_SLOTS; i++)
        if (be->pend[i].id && be->pend[i].stream == st) id = be->pend[i].client_id;
    return mcp_error_msg(id, -32000, "the session or the server ended before the answer");
}

void mcp_stream_free(struct mcp_stream *st)
{
    json_t *ended = st->req && !st->sse ? ended_answer(st) : NULL;
    unlink_stream(st);
    if (st->req) {
        detach(st);
        if (st->sse)
            httpd_stream_end(st->req);
        else
            mcp_http_json(st->req, 200, NULL, ended);
    }
    json_decref(st->answers);
    free(st);
}

static void start_sse(struct mcp_stream *st)
{
    st->sse = true;
    if (!st->req) return;
    set_header(st->req, "Content-Type", "text/event-stream");
    set_header(st->req, "Cache-Control", "no-cache");
    if (st->session->modern)
        set_header(st->req, "X-Accel-Buffering", "no");
    else
        set_header(st->req, "Mcp-Session-Id", st->session->id);
    httpd_stream_start(st->req, 200);
}

static void forget(struct mcp_session *s, struct mcp_event *e)
{
    if (e->data) {
        s->history_bytes -= strlen(e->data);
        budget_give(s->server->box->history, strlen(e->data));
    }
    free(e->data);
    e->data = NULL;
}

/* Keeps the event for resumption: the last MCP_HISTORY, and no more than
 * MCP_HISTORY_BYTES of them, nor more than the sandbox's sessions may keep together (the
 * oldest go first: resumption is best effort, the daemon's memory is everyone's). */
static void remember(struct mcp_session *s, unsigned stream, unsigned seq, const char *data)
{
    struct budget *b = s->server->box->history;
    struct mcp_event *e = &s->history[s->history_next++ % MCP_HISTORY];
    forget(s, e);
    e->stream = stream;
    e->seq = seq;
    e->data = strdup(data);
    if (e->data) {
        s->history_bytes += strlen(data);
        budget_force(b, strlen(data));
    }
    for (size_t i = 0;
         i < MCP_HISTORY && (s->history_bytes > MCP_HISTORY_BYTES || (b && b->used > b->limit));
         i++)
        forget(s, &s->history[(s->history_next + i) % MCP_HISTORY]);
}

void mcp_history_free(struct mcp_session *s)
{
    for (size_t i = 0; s->history && i < MCP_HISTORY; i++)
        forget(s, &s->history[i]);
    free(s->history);
    s->history = NULL;
}

/* A client that does not read its stream while the server writes: its connection is
 * dropped rather than buffered without end (it may resume with Last-Event-ID). */
static bool backlogged(struct mcp_stream *st)
{
    if (httpd_backlog(st->req) <= MCP_CLIENT_BACKLOG) return false;
    mcp_event(st->session->server, "mcp.client_dropped",
              json_pack("{s:s,s:I}", "why", "the client did not read its stream", "backlogBytes",
                        (json_int_t)httpd_backlog(st->req)));
    detach(st);
    httpd_abandon(st->req);
    st->req = NULL;
    st->gone = true;
    return true;
}

static void write_event(struct mcp_stream *st, unsigned seq, const char *data, size_t len)
{
    if (!st->req || backlogged(st)) return;
    struct evbuffer *out = evbuffer_new();
    if (!st->session->modern) /* 2026-07-28 has no resumption: no event ids */
        evbuffer_add_printf(out, "id: %u-%u\n", st->number, seq);
    mcp_sse_message(out, data, len);
    httpd_stream_send_buffer(st->req, out);
    evbuffer_free(out);
}

static void send_event(struct mcp_stream *st, json_t *msg)
{
    size_t len;
    char *text = json_text(msg, &len);
    json_decref(msg);
    if (!text) return;
    unsigned seq = ++st->seq;
    if (!st->session->modern) remember(st->session, st->number, seq, text);
    write_event(st, seq, text, len);
    free(text);
}

static void finish(struct mcp_stream *st)
{
    observe(st->session->server, st->started_ns);
    if (st->req && !st->sse) {
        json_t *v =
            st->batch ? json_incref(st->answers) : json_incref(json_array_get(st->answers, 0));
        detach(st);
        if (v)
            mcp_http_json(st->req, st->status ? st->status : 200,
                          st->session->modern ? NULL : st->session->id, v);
        else
            httpd_reply(st->req, 202, NULL);
        st->req = NULL;
    }
    mcp_stream_free(st);
}

void mcp_stream_send(struct mcp_stream *st, json_t *msg, bool is_answer)
{
    if (!st->sse && !is_answer) {
        /* Something comes before the answers: switch to SSE, answers so far first. */
        start_sse(st);
        size_t i;
        json_t *a;
        json_array_foreach(st->answers, i, a) send_event(st, json_incref(a));
        json_array_clear(st->answers);
    }
    if (msg && st->sse)
        send_event(st, msg);
    else if (msg)
        json_array_append_new(st->answers, msg);
    if (is_answer && --st->waiting <= 0 && !st->is_get) finish(st);
}

static void on_client_gone(struct httpd_req *gone, void *arg)
{
    struct mcp_stream *st = arg;
    if (httpd_budget_spent(gone))
        mcp_event(st->session->server, "mcp.client_dropped",
                  json_pack("{s:s,s:I}", "why",
                            "the sandbox holds as much unsent as it may (--held-per-sandbox)",
                            "backlogBytes", (json_int_t)httpd_backlog(gone)));
    struct httpd_req *req = st->req;
    st->req = NULL;
    st->gone = true;
    if (req) httpd_abandon(req); /* nobody to answer any more */
    if (st->is_get)
        mcp_stream_free(st);
    else if (st->session->modern)
        mcp_modern_gone(st->session); /* in 2026-07-28, closing is cancelling */
}

/* A GET with Last-Event-ID "STREAM-SEQ": the events of that stream after SEQ, then the
 * stream itself if it is still open. */
void mcp_stream_resume(struct mcp_session *s, struct httpd_req *req, const char *last_id)
{
    unsigned stream = 0, seq = 0;
    if (sscanf(last_id, "%u-%u", &stream, &seq) != 2)
        return mcp_http_error(req, 400, NULL, -32600,
                              "Last-Event-ID %.40s is not one of this "
                              "server's event ids",
                              last_id);
    struct mcp_stream *live = NULL;
    for (struct mcp_stream *st = s->streams; st; st = st->next)
        if (st->number == stream && !st->req) live = st;
    struct mcp_stream *st = live;
    if (!st) { /* replay only, then end */
        st = mcp_stream_new(s, req, true);
        st->is_get = false;
        st->waiting = 0;
    } else {
        st->req = req;
        st->gone = false;
        httpd_on_gone(req, on_client_gone, st);
    }
    st->sse = false; /* this client gets the stream's headers afresh */
    start_sse(st);
    for (size_t i = 0; i < MCP_HISTORY; i++) {
        struct mcp_event *e = &s->history[(s->history_next + i) % MCP_HISTORY];
        if (e->data && e->stream == stream && e->seq > seq)
            write_event(st, e->seq, e->data, strlen(e->data));
    }
    if (!live || (!st->is_get && st->waiting <= 0)) {
        detach(st);
        httpd_stream_end(st->req);
        st->req = NULL;
        mcp_stream_free(st);
    } else if (st->is_get) {
        s->get = st;
    }
}

void mcp_sse_message(struct evbuffer *out, const char *data, size_t len)
{
    evbuffer_add(out, "event: message\ndata: ", 21);
    evbuffer_add(out, data, len);
    evbuffer_add(out, "\n\n", 2);
}

void mcp_sse_comment(struct httpd_req *req, const char *text)
{
    struct evbuffer *out = evbuffer_new();
    evbuffer_add_printf(out, ": %s\n\n", text);
    httpd_stream_send_buffer(req, out);
    evbuffer_free(out);
}

static void keepalive(struct httpd_req *req)
{
    mcp_sse_comment(req, "keep-alive");
}

void mcp_keepalive(struct mcp_box *box)
{
    for (struct mcp_server *ms = box->servers; ms; ms = ms->next) {
        for (struct mcp_session *s = ms->sessions; s; s = s->next)
            for (struct mcp_stream *st = s->streams; st; st = st->next)
                if (st->req && st->sse) keepalive(st->req);
        for (struct mcp_session *s = ms->contexts; s; s = s->next)
            for (struct mcp_stream *st = s->streams; st; st = st->next)
                if (st->req && st->sse) keepalive(st->req);
        mcp_listen_keepalive(ms);
        mcp_sessions_expire(ms);
    }
}

/* ---- checks ---- */

static bool accepts(const char *accept, const char *type)
{
    if (!accept) return false;
    return strcasestr(accept, type) != NULL || strstr(accept, "*/*") != NULL;
}

static bool is_loopback_host(const char *host, size_t len)
{
    return (len == 9 && strncasecmp(host, "localhost", 9) == 0) ||
           (len == 9 && strncmp(host, "127.0.0.1", 9) == 0) ||
           (len == 5 && strncmp(host, "[::1]", 5) == 0);
}

/* host[:port] of a URL such as the public URL */
static void url_authority(const char *url, char *out, size_t size)
{
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    snprintf(out, size, "%.*s", (int)strcspn(p, "/"), p);
}

/* DNS rebinding: a page in a browser that got a name pointed at us sends its own name
 * as Host. The public URL's authority and, on loopback, the loopback names are ours. */
bool gateway_host_allowed(const char *public_url, const char *listen, const char *host)
{
    if (!host) return false;
    char pub[256];
    url_authority(public_url, pub, sizeof pub);
    if (strcasecmp(host, pub) == 0 || strcasecmp(host, listen) == 0) return true;
    const char *colon = strrchr(listen, ':');
    const char *hcolon = strrchr(host, ':');
    size_t hlen = hcolon && hcolon > strrchr(host, ']') ? (size_t)(hcolon - host) : strlen(host);
    bool listen_loopback = strncmp(listen, "127.", 4) == 0 || strncmp(listen, "[::1]", 5) == 0 ||
                           strncmp(listen, "localhost", 9) == 0;
    return listen_loopback && is_loopback_host(host, hlen) && colon && hcolon &&
           strcmp(colon, hcolon) == 0;
}

/* Browsers send Origin: only the public URL's own origin and local tools (loopback
 * origins, such as the MCP Inspector) may call. */
bool gateway_origin_allowed(const char *pub, const char *origin)
{
    if (!origin) return true;
    const char *sep = strstr(pub, "://");
    size_t origin_len = sep ? (size_t)(sep + 3 - pub) + strcspn(sep + 3, "/") : strlen(pub);
    if (strlen(origin) == origin_len && strncasecmp(origin, pub, origin_len) == 0) return true;
    char auth[256];
    url_authority(origin, auth, sizeof auth);
    const char *colon = strrchr(auth, ':');
    size_t len = colon && colon > strrchr(auth, ']') ? (size_t)(colon - auth) : strlen(auth);
    return (strncmp(origin, "http://", 7) == 0 || strncmp(origin, "https://", 8) == 0) &&
           is_loopback_host(auth, len);
}

/* A 2025 request's MCP-Protocol-Version: absent, or a revision with sessions. */
static bool version_ok(const char *v)
{
    return !v || mcp_revision_with_sessions(v);
}

/* The session a request names: 400 without one, 404 for an unknown one. */
static struct mcp_session *session_of(struct mcp_server *ms, struct httpd_req *req)
{
    const char *sid = header(req, "Mcp-Session-Id");
    if (!sid) {
        mcp_http_error(req, 400, NULL, -32000,
                       "Bad Request: Mcp-Session-Id header is required "
                       "(send initialize first)");
        return NULL;
    }
    struct mcp_session *s = mcp_session_find(ms, sid);
    if (!s)
        mcp_http_error(req, 404, NULL, -32001,
                       "Session not found: it ended or never "
                       "existed; initialize a new one");
    return s;
}

static bool is_initialize(json_t *body)
{
    const char *m = json_string_value(json_object_get(body, "method"));
    return mcp_valid_message(body) && m && strcmp(m, "initialize") == 0 &&
           json_object_get(body, "id");
}

static void post(struct mcp_server *ms, struct httpd_req *req)
{
    const char *accept = header(req, "Accept"), *ctype = header(req, "Content-Type");
    if (!accepts(accept, "application/json") || !accepts(accept, "text/event-stream"))
        return mcp_http_error(req, 406, NULL, -32000,
                              "Not Acceptable: the client must accept "
                              "both application/json and text/event-stream");
    if (!ctype || strncasecmp(ctype, "application/json", 16) != 0)
        return mcp_http_error(req, 415, NULL, -32000,
                              "Unsupported Media Type: send "
                              "Content-Type: application/json");
    struct evbuffer *in = httpd_body(req);
    size_t n = evbuffer_get_length(in);
    if (n > MCP_MAX_MESSAGE)
        return mcp_http_error(req, 413, NULL, -32000, "the message is %zu bytes; the limit is %u",
                              n, MCP_MAX_MESSAGE);
    json_error_t jerr;
    json_t *body = json_loadb((const char *)evbuffer_pullup(in, -1), n, 0, &jerr);
    httpd_drop_body(req); /* a request its server never answers keeps none of it */
    if (!body) return mcp_http_error(req, 400, NULL, -32700, "Parse error: %s", jerr.text);
    struct mcp_headers h = {header(req, "MCP-Protocol-Version"), header(req, "Mcp-Method"),
                            header(req, "Mcp-Name")};
    struct mcp_verdict v = {0};
    mcp_modern_classify(body, &h, &v);
    if (v.era == MCP_ERA_REJECT) {
        mcp_http_json(req, v.status, NULL,
                      mcp_modern_error(json_object_get(body, "id"), v.code, v.message, v.data));
    } else if (v.era == MCP_ERA_NOTIFICATION) {
        ms->requests++; /* none is defined over HTTP in 2026-07-28: accepted, dropped */
        const char *method = json_string_value(json_object_get(body, "method"));
        if (!mcp_client_notification(method)) mcp_notification_dropped(ms, body);
        httpd_reply(req, 202, NULL);
    } else if (v.era == MCP_ERA_MODERN) {
        mcp_modern_post(ms, req, body);
    } else if (is_initialize(body)) {
        mcp_session_initialize(ms, req, body);
    } else if (!version_ok(header(req, "MCP-Protocol-Version"))) {
        mcp_http_error(req, 400, NULL, -32000,
                       "Bad Request: unsupported MCP-Protocol-Version "
                       "%.40s; this gateway speaks %s",
                       header(req, "MCP-Protocol-Version"), mcp_revisions_text(false));
    } else {
        struct mcp_session *s = session_of(ms, req);
        int status = s ? mcp_session_post(s, req, body) : 0;
        if (status == 400)
            mcp_http_error(req, 400, NULL, -32600, "Invalid Request: %s",
                           json_is_array(body)
                               ? "batches need protocol version 2025-03-26, at "
                                 "least one message, and JSON-RPC 2.0 messages"
                               : "not a JSON-RPC 2.0 request, notification or response");
    }
    json_decref(v.data);
    json_decref(body);
}

/* 2026-07-28 has no GET stream and no session to delete; the 2025 revisions need a
 * session for either. */
static bool sessionless(struct httpd_req *req)
{
    if (header(req, "Mcp-Session-Id")) return false;
    set_header(req, "Allow", "POST");
    mcp_http_error(req, 405, NULL, -32000,
                   "Method Not Allowed: GET and DELETE need an Mcp-Session-Id (2025 "
                   "revisions); 2026-07-28 clients POST, and listen with "
                   "subscriptions/listen");
    return true;
}

static void get(struct mcp_server *ms, struct httpd_req *req)
{
    if (sessionless(req)) return;
    if (!accepts(header(req, "Accept"), "text/event-stream"))
        return mcp_http_error(req, 406, NULL, -32000,
                              "Not Acceptable: the GET stream is "
                              "text/event-stream");
    struct mcp_session *s = session_of(ms, req);
    if (!s) return;
    s->last_used_ms = now_ms();
    const char *last = header(req, "Last-Event-ID");
    if (last) return mcp_stream_resume(s, req, last);
    if (s->get && !s->get->req) mcp_stream_free(s->get); /* its client was dropped */
    if (s->get)
        return mcp_http_error(req, 409, NULL, -32000,
                              "Conflict: this session already has a "
                              "GET stream open");
    struct mcp_stream *st = mcp_stream_new(s, req, true);
    s->get = st;
    start_sse(st);
}

static void delete_session(struct mcp_server *ms, struct httpd_req *req)
{
    if (sessionless(req)) return;
    struct mcp_session *s = session_of(ms, req);
    if (!s) return;
    mcp_session_free(s);
    httpd_reply(req, 200, NULL);
}

/* Splits "/mcp/LINK/SERVER" in place; -EINVAL for any other shape. */
static int split(char *path, char **link, char **name)
{
    char *seg[4];
    int n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(path, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
        if (n == 4) return -EINVAL;
        seg[n++] = tok;
    }
    if (n != 3) return -EINVAL;
    *link = seg[1];
    *name = seg[2];
    return 0;
}

/* A browser client (the MCP Inspector in direct mode) reads answers only with CORS
 * headers; they go to origins that may call at all (gateway_origin_allowed). */
static void cors(struct httpd_req *req)
{
    const char *origin = header(req, "Origin");
    if (!origin) return;
    set_header(req, "Access-Control-Allow-Origin", origin);
    set_header(req, "Vary", "Origin");
    set_header(req, "Access-Control-Expose-Headers", "Mcp-Session-Id, WWW-Authenticate");
}

static void preflight(struct httpd_req *req)
{
    set_header(req, "Access-Control-Allow-Methods", "GET, POST, DELETE");
    set_header(req, "Access-Control-Allow-Headers",
               "Authorization, Content-Type, Accept, Mcp-Session-Id, MCP-Protocol-Version, "
               "Last-Event-ID, Mcp-Method, Mcp-Name");
    set_header(req, "Access-Control-Max-Age", "600");
    httpd_reply(req, 204, NULL);
}

static void serve(struct server *srv, struct httpd_req *req);

/* An OAuth discovery path (RFC 8414, RFC 9728, OpenID): a segment .well-known anywhere,
 * as clients put it before the gateway path or after it. */
static bool well_known(const char *path)
{
    for (const char *p = path; (p = strstr(p, "/.well-known")); p++)
        if (p[12] == '/' || p[12] == '\0') return true;
    return false;
}

/* The sandbox was woken for this request: it is served as if it had just come
 * (its box may have gone meanwhile: it is looked up again). */
static void serve_when_awake(struct server *srv, struct sbx *sb, const err_t *err, void *arg)
{
    struct httpd_req *req = arg;
    if (err) return mcp_http_error(req, 503, NULL, -32000, "%s", err->msg);
    serve(srv, req);
}

/* The box of the URL, or NULL after answering 404. */
static struct mcp_box *box_of(struct server *srv, struct httpd_req *req, char **path, char **name)
{
    char *link = NULL;
    *path = evhttp_uridecode(httpd_path(req), 0, NULL);
    struct mcp_box *box =
        *path && split(*path, &link, name) == 0 ? mcp_box_find_link(srv, link) : NULL;
    if (!box)
        mcp_http_error(req, 404, NULL, -32000,
                       "Not Found: no MCP server at this URL; "
                       "`runtime sandbox mcp ID` prints the right one");
    return box;
}

static void on_body(struct httpd_req *req, void *arg)
{
    serve(arg, req);
}

void gateway_head(struct server *srv, struct httpd_req *req)
{
    const struct server_config *cfg = server_config(srv);
    if (!gateway_host_allowed(cfg->public_url, cfg->listen, header(req, "Host")) ||
        !gateway_origin_allowed(cfg->public_url, header(req, "Origin")))
        return mcp_http_error(req, 403, NULL, -32000,
                              "Forbidden: the Host or Origin header is not "
                              "this gateway's (start runtimed with --public-url to name it)");
    cors(req);
    /* A preflight carries no token; it only learns what the browser may send. */
    if (httpd_method(req) == HTTPD_OPTIONS) return preflight(req);
    /* A client told 401 looks for OAuth metadata: a 404 says there is none (a 401 here
     * would send it on into an OAuth flow the daemon does not have). */
    if (well_known(httpd_path(req)))
        return mcp_http_error(req, 404, NULL, -32000,
                              "Not Found: this gateway has no OAuth; send the sandbox's gateway "
                              "token as Authorization: Bearer TOKEN (`runtime sandbox mcp ID` "
                              "prints it)");
    char *path = NULL, *name = NULL;
    struct mcp_box *box = box_of(srv, req, &path, &name);
    free(path);
    if (!box) return;
    const char *auth = header(req, "Authorization");
    if (!auth || strncasecmp(auth, "Bearer ", 7) != 0 || !str_equal_ct(auth + 7, box->token))
        return mcp_http_error(req, 401, NULL, -32000,
                              "Unauthorized: send the sandbox's gateway token "
                              "as Authorization: Bearer TOKEN");
    httpd_trust(req);
    httpd_charge(req, sbx_budget(box->sb));
    httpd_read_body(req, httpd_method(req) == HTTPD_POST ? MCP_MAX_MESSAGE : 0, on_body, srv);
}

void gateway_fail(struct httpd_req *req, int status, const char *message)
{
    mcp_http_error(req, status, NULL, -32000, "%s", message);
}

/* With the body in, or after a wake. */
static void serve(struct server *srv, struct httpd_req *req)
{
    char *path = NULL, *name = NULL;
    struct mcp_box *box = box_of(srv, req, &path, &name);
    if (!box) goto out;
    struct mcp_server *ms = mcp_server_find(box, name);
    err_t err = {0};
    int admitted = server_sandbox_admit(srv, box->sb, "gateway", serve_when_awake, req, &err);
    if (admitted < 0) mcp_http_error(req, 503, NULL, -32000, "%s", err.msg);
    if (admitted != 0) goto out; /* or served once it is awake */
    if (!ms) {
        mcp_http_error(req, 404, NULL, -32000, "Not Found: sandbox %s has no MCP server %.64s",
                       sbx_id(box->sb), name);
        goto out;
    }
    if (ms->status != MCP_READY) {
        if (ms->status == MCP_STARTING || ms->status == MCP_INSTALLING)
            set_header(req, "Retry-After", "2");
        mcp_http_error(req, 503, NULL, -32000, "server %s is %s%s%s", ms->name,
                       mcp_status_name(ms->status), ms->error[0] ? ": " : "", ms->error);
        goto out;
    }
    enum httpd_method method = httpd_method(req);
    if (method == HTTPD_POST) {
        post(ms, req);
    } else if (method == HTTPD_GET) {
        get(ms, req);
    } else if (method == HTTPD_DELETE) {
        delete_session(ms, req);
    } else {
        set_header(req, "Allow", "GET, POST, DELETE");
        mcp_http_error(req, 405, NULL, -32000, "Method Not Allowed");
    }
out:
    free(path);
}
