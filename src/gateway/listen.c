/* subscriptions/listen (2026-07-28): the stream on which a client hears that a list
 * changed or a resource it named was updated, instead of the 2025 GET stream and
 * resources/subscribe.
 *
 * The stream opens with notifications/subscriptions/acknowledged (what the gateway
 * honours of the filter asked for), and every notification on it carries the listen
 * request's id as io.modelcontextprotocol/subscriptionId. The gateway asks the process
 * for updates of a resource (resources/subscribe) while some listen stream or session
 * wants them, and tells clients tools/list_changed only when the list it serves changed
 * (the gate: a tool that appeared unapproved stays invisible). */
#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway_impl.h"

struct mcp_listen {
    struct mcp_server *server;
    struct httpd_req *req;
    json_t *id;
    bool tools, prompts, resources;
    json_t *uris; /* resources whose updates it gets */
    struct mcp_listen *next;
};

static void on_listener_gone(struct httpd_req *req, void *arg);

/* A client that does not read its stream while notifications come is dropped,
 * not buffered without end (as a 2025 stream is): its request stays with the
 * listen until the next sweep. */
static bool dropped(struct mcp_listen *l)
{
    if (!l->req) return true;
    size_t backlog = httpd_backlog(l->req);
    if (backlog <= MCP_CLIENT_BACKLOG) return false;
    mcp_event(l->server, "mcp.client_dropped",
              json_pack("{s:s,s:I}", "why", "the client did not read its listen stream",
                        "backlogBytes", (json_int_t)backlog));
    httpd_on_gone(l->req, NULL, NULL);
    httpd_abandon(l->req);
    l->req = NULL;
    return true;
}

static void write_message(struct mcp_listen *l, json_t *msg)
{
    if (dropped(l)) return;
    size_t len;
    char *text = json_text(msg, &len);
    if (!text) return;
    struct evbuffer *out = evbuffer_new();
    mcp_sse_message(out, text, len);
    httpd_stream_send_buffer(l->req, out);
    evbuffer_free(out);
    free(text);
}

static json_t *subscription_meta(struct mcp_listen *l)
{
    return json_pack("{s:O}", MCP_META "subscriptionId", l->id);
}

static bool uri_in(json_t *uris, json_t *uri)
{
    size_t i;
    json_t *v;
    json_array_foreach(uris, i, v) if (json_equal(v, uri)) return true;
    return false;
}

bool mcp_resource_wanted(struct mcp_server *ms, json_t *uri)
{
    for (struct mcp_listen *l = ms->listens; l; l = l->next)
        if (uri_in(l->uris, uri)) return true;
    for (struct mcp_session *s = ms->sessions; s; s = s->next)
        if (uri_in(s->subscriptions, uri)) return true;
    return false;
}

static void ignore_answer(struct mcp_backend *be, json_t *msg, const char *line, size_t len) {}

/* resources/subscribe or unsubscribe to the process, as the gateway's own request. */
static void tell_process(struct mcp_server *ms, const char *method, json_t *uri)
{
    struct mcp_backend *be = ms->shared;
    if (!be || be->state != BE_READY) return;
    json_t *req =
        json_pack("{s:s,s:s,s:{s:O}}", "jsonrpc", "2.0", "method", method, "params", "uri", uri);
    struct mcp_pending *p;
    if (mcp_backend_request(be, req, &p) < 0) return json_decref(req);
    p->internal = ignore_answer;
    mcp_backend_send(be, req);
}

void mcp_resubscribe(struct mcp_server *ms)
{
    json_t *done = json_array();
    size_t i;
    json_t *uri;
    for (struct mcp_listen *l = ms->listens; l; l = l->next)
        json_array_extend(done, l->uris);
    for (struct mcp_session *s = ms->sessions; s; s = s->next)
        json_array_extend(done, s->subscriptions);
    json_t *sent = json_array();
    json_array_foreach(done, i, uri) if (!uri_in(sent, uri))
    {
        tell_process(ms, "resources/subscribe", uri);
        json_array_append(sent, uri);
    }
    json_decref(sent);
    json_decref(done);
}

static void unlink_listen(struct mcp_listen *l)
{
    struct mcp_server *ms = l->server;
    struct mcp_listen **pp = &ms->listens;
    while (*pp && *pp != l)
        pp = &(*pp)->next;
    if (*pp) {
        *pp = l->next;
        ms->n_listens--;
    }
}

static void listen_free(struct mcp_listen *l)
{
    unlink_listen(l);
    size_t i;
    json_t *uri;
    json_array_foreach(l->uris, i, uri) if (!mcp_resource_wanted(l->server, uri))
        tell_process(l->server, "resources/unsubscribe", uri);
    json_decref(l->uris);
    json_decref(l->id);
    free(l);
}

static void on_listener_gone(struct httpd_req *req, void *arg)
{
    struct mcp_listen *l = arg;
    if (httpd_budget_spent(req))
        mcp_event(l->server, "mcp.client_dropped",
                  json_pack("{s:s,s:I}", "why",
                            "the sandbox holds as much unsent as it may (--held-per-sandbox)",
                            "backlogBytes", (json_int_t)httpd_backlog(req)));
    if (l->req) httpd_abandon(l->req);
    l->req = NULL;
    listen_free(l);
}

/* Frees the listens whose clients were dropped (not while walking the list). */
static void sweep(struct mcp_server *ms)
{
    for (struct mcp_listen *l = ms->listens, *next; l; l = next) {
        next = l->next;
        if (!l->req) listen_free(l);
    }
}

static bool flag(json_t *filter, const char *name)
{
    return json_is_true(json_object_get(filter, name));
}

static bool offers(json_t *caps, const char *what, const char *feature)
{
    return json_is_true(json_object_get(json_object_get(caps, what), feature));
}

/* What of the filter the server can honour; *l gets it. */
static json_t *honoured(struct mcp_listen *l, json_t *filter, json_t *caps)
{
    json_t *h = json_object();
    l->tools = flag(filter, "toolsListChanged") && json_object_get(caps, "tools");
    l->prompts = flag(filter, "promptsListChanged") && offers(caps, "prompts", "listChanged");
    l->resources = flag(filter, "resourcesListChanged") && offers(caps, "resources", "listChanged");
    if (l->tools) json_object_set_new(h, "toolsListChanged", json_true());
    if (l->prompts) json_object_set_new(h, "promptsListChanged", json_true());
    if (l->resources) json_object_set_new(h, "resourcesListChanged", json_true());
    json_t *uris = json_object_get(filter, "resourceSubscriptions");
    l->uris = json_array();
    size_t i;
    json_t *uri;
    /* A process that speaks 2026-07-28 itself would need a listen of its own per URI set;
     * the gateway does not open those, so it does not promise the updates. */
    bool can = offers(caps, "resources", "subscribe") && !l->server->shared->modern;
    if (can && json_is_array(uris))
        json_array_foreach(uris, i, uri) if (json_is_string(uri) &&
                                             json_array_size(l->uris) < MCP_MAX_LISTEN_URIS &&
                                             !uri_in(l->uris, uri)) json_array_append(l->uris, uri);
    if (json_array_size(l->uris)) json_object_set(h, "resourceSubscriptions", l->uris);
    return h;
}

void mcp_listen_open(struct mcp_server *ms, struct httpd_req *req, json_t *msg)
{
    json_t *id = json_object_get(msg, "id");
    json_t *filter = json_object_get(json_object_get(msg, "params"), "notifications");
    if (!json_is_object(filter))
        return mcp_http_json(req, 200, NULL,
                             mcp_error_msg(id, -32602,
                                           "Invalid params: subscriptions/listen needs "
                                           "params.notifications, an object"));
    if (ms->n_listens >= MCP_MAX_LISTENS)
        return mcp_http_json(req, 503, NULL,
                             mcp_error_msg(id, -32000,
                                           "this server has the most listen streams it keeps "
                                           "open; close some first"));
    struct mcp_listen *l = calloc(1, sizeof *l);
    if (!l) return mcp_http_json(req, 503, NULL, mcp_error_msg(id, -32603, "out of memory"));
    l->server = ms;
    l->req = req;
    l->id = json_incref(id);
    json_t *caps = mcp_client_capabilities(ms->shared->init_result);
    json_t *h = honoured(l, filter, caps);
    json_decref(caps);
    size_t i;
    json_t *uri;
    json_array_foreach(l->uris, i, uri) if (!mcp_resource_wanted(ms, uri))
        tell_process(ms, "resources/subscribe", uri);
    l->next = ms->listens;
    ms->listens = l;
    ms->n_listens++;
    httpd_add_header(req, "Content-Type", "text/event-stream");
    httpd_add_header(req, "Cache-Control", "no-cache");
    httpd_add_header(req, "X-Accel-Buffering", "no");
    httpd_stream_start(req, 200);
    httpd_on_gone(req, on_listener_gone, l);
    json_t *ack = json_pack("{s:s,s:s,s:{s:o,s:o}}", "jsonrpc", "2.0", "method",
                            "notifications/subscriptions/acknowledged", "params", "notifications",
                            h, "_meta", subscription_meta(l));
    write_message(l, ack);
    json_decref(ack);
}

static bool wants(struct mcp_listen *l, const char *method, json_t *msg)
{
    if (strcmp(method, "notifications/tools/list_changed") == 0) return l->tools;
    if (strcmp(method, "notifications/prompts/list_changed") == 0) return l->prompts;
    if (strcmp(method, "notifications/resources/list_changed") == 0) return l->resources;
    if (strcmp(method, "notifications/resources/updated") == 0)
        return uri_in(l->uris, json_object_get(json_object_get(msg, "params"), "uri"));
    return false; /* progress and logs belong to the request they came for */
}

void mcp_listen_notify(struct mcp_server *ms, json_t *msg)
{
    const char *method = json_string_value(json_object_get(msg, "method"));
    for (struct mcp_listen *l = ms->listens; method && l; l = l->next) {
        if (!l->req || !wants(l, method, msg)) continue;
        json_t *copy = json_deep_copy(msg);
        json_t *params = json_object_get(copy, "params");
        if (!json_is_object(params)) json_object_set_new(copy, "params", params = json_object());
        json_t *meta = json_object_get(params, "_meta");
        if (!json_is_object(meta)) json_object_set_new(params, "_meta", meta = json_object());
        json_object_set(meta, MCP_META "subscriptionId", l->id);
        write_message(l, copy);
        json_decref(copy);
    }
    sweep(ms);
}

void mcp_listen_keepalive(struct mcp_server *ms)
{
    for (struct mcp_listen *l = ms->listens; l; l = l->next)
        if (!dropped(l)) mcp_sse_comment(l->req, "keep-alive");
    sweep(ms);
}

/* The server stops: each stream gets the listen request's answer, then ends. */
void mcp_listen_close_all(struct mcp_server *ms)
{
    while (ms->listens) {
        struct mcp_listen *l = ms->listens;
        if (l->req) {
            json_t *r =
                json_pack("{s:s,s:o}", "resultType", "complete", "_meta", subscription_meta(l));
            json_t *msg = mcp_result_msg(l->id, r);
            write_message(l, msg);
            json_decref(msg);
            if (l->req) {
                httpd_on_gone(l->req, NULL, NULL);
                httpd_stream_end(l->req);
                l->req = NULL;
            }
        }
        listen_free(l);
    }
}
