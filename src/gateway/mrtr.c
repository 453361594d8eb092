/* Multi round-trip requests (2026-07-28): a stdio server's sampling, elicitation (and
 * other) requests to the client, for a client that cannot be sent requests.
 *
 * The process is a 2025 server: its request is a suspended continuation inside it, which
 * no requestState could rebuild. So the gateway parks the call: it answers the client's
 * POST with an input_required result listing what the process asked, keeps the call
 * pending at the process, and when the client retries the original request with
 * inputResponses (and the requestState it got), answers the process's requests with
 * them and lets the call go on; the final answer goes to the retry. A requestState is
 * HMAC-SHA256 over the park, its round, its expiry and the request it belongs to (the
 * sandbox's key, in memory only), good for one round.
 *
 * Keys of inputRequests: a stdio server names its input by sending its request with a
 * string id ([A-Za-z0-9_.-]{1,64}, optionally followed by "#" and anything that keeps its
 * ids unique, e.g. "user_name#7"); otherwise the key is the method and a digest of the
 * params, the same when a call is run again, so that a fresh call that already carries
 * the answers (inputResponses, no requestState) is answered without a round. */
#include <ctype.h>
#include <errno.h>
#include <event2/event.h>
#include <event2/http.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway_impl.h"

struct mcp_ask {
    char key[72];
    json_t *process_id;
    char method[40];
    json_t *params;
    bool done;
};

struct mcp_park {
    char id[33];
    uint32_t round;      /* bumped at each input_required: a state is good for one round */
    uint64_t expires_ms; /* --mcp-input-wait after the last input_required */
    uint64_t first_ask_ms;
    struct mcp_ask asks[MCP_MAX_INPUTS];
    size_t n_asks;
    json_t *final;       /* the process answered while no retry held the call */
    struct event *timer; /* gathering asks, then the expiry */
    bool gathering;
};

static const char *const answerable[] = {"sampling/createMessage", "elicitation/create"};

/* ---- requestState ---- */

void mcp_mrtr_digest(json_t *msg, char out[65])
{
    json_t *params = json_object_get(msg, "params");
    json_t *what = json_object_get(params, "name") ?: json_object_get(params, "uri");
    json_t *args = json_object_get(params, "arguments");
    char *a = args ? json_dumps(args, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY) : NULL;
    char *text = NULL;
    if (asprintf(&text, "%s\n%s\n%s", json_string_value(json_object_get(msg, "method")) ?: "",
                 json_string_value(what) ?: "", a ?: "") < 0)
        text = NULL;
    fingerprint_sha256_hex(text ? text : "", text ? strlen(text) : 0, out);
    free(text);
    free(a);
}

static void state_mac(struct mcp_session *ctx, const char *park, uint32_t round, uint64_t expires,
                      const char *digest, char hex[65])
{
    struct mcp_box *box = ctx->server->box;
    char text[512];
    int n = snprintf(text, sizeof text, "rt1|%s|%s|%s|%u|%llu|%s", box->link, ctx->server->name,
                     park, round, (unsigned long long)expires, digest);
    unsigned char mac[32];
    unsigned len = 0;
    HMAC(EVP_sha256(), box->state_key, sizeof box->state_key, (unsigned char *)text, (size_t)n, mac,
         &len);
    for (unsigned i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", mac[i]);
}

static json_t *state_mint(struct mcp_session *ctx)
{
    struct mcp_park *park = ctx->modern->park;
    char mac[65], text[200];
    state_mac(ctx, park->id, park->round, park->expires_ms, ctx->modern->digest, mac);
    snprintf(text, sizeof text, "rt1.%s.%u.%llu.%s", park->id, park->round,
             (unsigned long long)park->expires_ms, mac);
    return json_string(text);
}

/* The context a state names, if the state is the one its park last gave out for this
 * very request (digest); why in *why otherwise. */
static struct mcp_session *state_verify(struct mcp_server *ms, const char *state,
                                        const char *digest, const char **why)
{
    char park_id[33], mac[65], want[65];
    unsigned round;
    unsigned long long expires;
    *why = "requestState failed verification, or expired: call again without it";
    if (sscanf(state, "rt1.%32[0-9a-f].%u.%llu.%64[0-9a-f]", park_id, &round, &expires, mac) != 4 ||
        strlen(mac) != 64)
        return NULL;
    char canonical[200];
    snprintf(canonical, sizeof canonical, "rt1.%s.%u.%llu.%s", park_id, round, expires, mac);
    if (strcmp(canonical, state) != 0) return NULL;
    struct mcp_session *found = NULL;
    for (struct mcp_session *c = ms->contexts; c; c = c->next)
        if (c->modern->park && strcmp(c->modern->park->id, park_id) == 0) found = c;
    if (!found) return NULL;
    state_mac(found, park_id, round, expires, digest, want);
    if (CRYPTO_memcmp(want, mac, 64) != 0) return NULL;
    if (expires < now_ms()) return NULL;
    struct mcp_park *park = found->modern->park;
    if (round != park->round || expires != park->expires_ms) {
        *why = "this requestState was used already: retry with the newest one";
        return NULL;
    }
    if (found->streams) {
        *why = "a retry of this request is in progress already";
        return NULL;
    }
    return found;
}

/* ---- the park ---- */

static void on_timer(evutil_socket_t fd, short what, void *arg);

static struct mcp_park *park_of(struct mcp_session *ctx)
{
    if (ctx->modern->park) return ctx->modern->park;
    struct mcp_server *ms = ctx->server;
    if (ms->n_parks >= MCP_MAX_PARKS) return NULL;
    struct mcp_park *park = calloc(1, sizeof *park);
    if (!park) return NULL;
    random_hex(park->id, 16);
    park->timer = evtimer_new(server_base(ms->box->srv), on_timer, ctx);
    ctx->modern->park = park;
    ms->n_parks++;
    return park;
}

static void clear_asks(struct mcp_park *park)
{
    for (size_t i = 0; i < park->n_asks; i++) {
        json_decref(park->asks[i].process_id);
        json_decref(park->asks[i].params);
    }
    park->n_asks = 0;
}

void mcp_park_free(struct mcp_session *ctx)
{
    struct mcp_park *park = ctx->modern->park;
    if (!park) return;
    clear_asks(park);
    json_decref(park->final);
    if (park->timer) event_free(park->timer);
    ctx->server->n_parks--;
    free(park);
    ctx->modern->park = NULL;
}

bool mcp_mrtr_withdrawn(struct mcp_server *ms, json_t *process_id)
{
    for (struct mcp_session *c = ms->contexts; c; c = c->next) {
        struct mcp_park *park = c->modern->park;
        for (size_t i = 0; park && i < park->n_asks; i++)
            if (!park->asks[i].done && json_equal(park->asks[i].process_id, process_id)) {
                park->asks[i].done = true; /* the process stopped waiting for it */
                return true;
            }
    }
    return false;
}

void mcp_park_keep_final(struct mcp_session *ctx, json_t *msg)
{
    struct mcp_park *park = ctx->modern->park;
    json_decref(park->final);
    park->final = msg;
}

/* --mcp-input-wait, else MCP_PARK_TTL_MS. */
static uint64_t park_ttl_ms(struct mcp_session *ctx)
{
    uint32_t ms = server_config(ctx->server->box->srv)->mcp_input_wait_ms;
    return ms ? ms : MCP_PARK_TTL_MS;
}

static void arm(struct mcp_park *park, uint64_t ms)
{
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
    evtimer_add(park->timer, &tv);
}

static void to_process(struct mcp_session *ctx, json_t *msg)
{
    struct mcp_backend *be = mcp_session_backend(ctx);
    if (be)
        mcp_backend_send(be, msg);
    else
        json_decref(msg);
}

static void process_error(struct mcp_session *ctx, json_t *id, int code, const char *text)
{
    to_process(ctx, mcp_error_msg(id, code, text));
}

/* The input_required result for the asks not answered yet; the call stays pending at
 * the process, the POST that carried it ends. */
static void send_input_required(struct mcp_session *ctx)
{
    struct mcp_park *park = ctx->modern->park;
    struct mcp_pending *p = mcp_session_pending(ctx);
    struct mcp_stream *st = p ? p->stream : NULL;
    if (!st) return; /* no retry holds it: the asks wait for one */
    park->round++;
    park->expires_ms = now_ms() + park_ttl_ms(ctx);
    json_t *inputs = json_object();
    for (size_t i = 0; i < park->n_asks; i++)
        if (!park->asks[i].done)
            json_object_set_new(inputs, park->asks[i].key,
                                json_pack("{s:s,s:O}", "method", park->asks[i].method, "params",
                                          park->asks[i].params));
    json_t *r = json_pack("{s:s,s:o,s:o}", "resultType", "input_required", "inputRequests", inputs,
                          "requestState", state_mint(ctx));
    json_t *msg = mcp_result_msg(p->client_id, r);
    p->stream = NULL; /* parked: the final answer waits for a retry */
    mcp_stream_send(st, msg, true);
    park->gathering = false;
    arm(park, park_ttl_ms(ctx));
}

/* Nobody retried in time: the process's requests are answered as declined, the call
 * is cancelled. */
static void expire(struct mcp_session *ctx)
{
    struct mcp_park *park = ctx->modern->park;
    for (size_t i = 0; i < park->n_asks; i++) {
        struct mcp_ask *a = &park->asks[i];
        if (a->done) continue;
        if (strcmp(a->method, "elicitation/create") == 0)
            to_process(ctx, mcp_result_msg(a->process_id, json_pack("{s:s}", "action", "cancel")));
        else
            process_error(ctx, a->process_id, -32000, "the client did not answer in time");
    }
    struct mcp_pending *p = mcp_session_pending(ctx);
    if (p)
        to_process(ctx, json_pack("{s:s,s:s,s:{s:I,s:s}}", "jsonrpc", "2.0", "method",
                                  "notifications/cancelled", "params", "requestId",
                                  (json_int_t)p->id, "reason", "the client did not retry in time"));
    mcp_modern_free(ctx);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct mcp_session *ctx = arg;
    struct mcp_park *park = ctx->modern->park;
    if (park->gathering)
        send_input_required(ctx);
    else
        expire(ctx);
}

static bool declared(json_t *caps, const char *method)
{
    if (strcmp(method, "sampling/createMessage") == 0) return json_object_get(caps, "sampling");
    if (strcmp(method, "elicitation/create") == 0) return json_object_get(caps, "elicitation");
    return false;
}

/* The capability object -32021 names for a request the client did not declare. */
static json_t *required_capability(const char *method)
{
    return json_pack("{s:{}}",
                     strcmp(method, "sampling/createMessage") == 0 ? "sampling" : "elicitation");
}

static bool key_ok(const char *k)
{
    size_t n = strlen(k);
    if (n == 0 || n > 64) return false;
    for (size_t i = 0; i < n; i++)
        if (!(isalnum((unsigned char)k[i]) || k[i] == '_' || k[i] == '.' || k[i] == '-'))
            return false;
    return true;
}

static bool key_used(struct mcp_park *park, const char *key)
{
    for (size_t i = 0; i < park->n_asks; i++)
        if (strcmp(park->asks[i].key, key) == 0) return true;
    return false;
}

/* The process's own string id (before a "#"), else the method and a digest of the params. */
static void key_for(struct mcp_park *park, json_t *msg, char *key, size_t size)
{
    const char *sid = json_string_value(json_object_get(msg, "id"));
    /* "KEY#TAG": the key, with a tag that keeps the server's ids unique (JSON-RPC). */
    char named[72] = "";
    if (sid) snprintf(named, sizeof named, "%.*s", (int)strcspn(sid, "#"), sid);
    if (sid && strlen(sid) < 200 && key_ok(named) && !key_used(park, named)) {
        snprintf(key, size, "%s", named);
        return;
    }
    const char *method = json_string_value(json_object_get(msg, "method"));
    const char *slash = strchr(method, '/');
    char *params = json_dumps(json_object_get(msg, "params") ?: json_null(),
                              JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    char hex[65];
    fingerprint_sha256_hex(params ? params : "", params ? strlen(params) : 0, hex);
    free(params);
    snprintf(key, size, "%.*s-%.16s", (int)(slash ? slash - method : 20), method, hex);
    for (unsigned n = 2; key_used(park, key) && n < 100; n++)
        snprintf(key, size, "%.*s-%.16s-%u", (int)(slash ? slash - method : 20), method, hex, n);
}

/* A client's answer of the shape the process's request wants (W-37). */
static bool answer_ok(const char *method, json_t *v)
{
    if (!json_is_object(v)) return false;
    if (strcmp(method, "elicitation/create") == 0) {
        const char *action = json_string_value(json_object_get(v, "action"));
        json_t *content = json_object_get(v, "content");
        return action &&
               (!strcmp(action, "accept") || !strcmp(action, "decline") ||
                !strcmp(action, "cancel")) &&
               (!content || json_is_object(content));
    }
    return json_object_get(v, "role") && json_object_get(v, "content");
}

static void answer_process(struct mcp_session *ctx, json_t *process_id, json_t *value)
{
    json_t *result = json_deep_copy(value);
    json_object_del(result, "resultType");
    to_process(ctx, mcp_result_msg(process_id, result));
}

/* The process asks the client something while working on a modern request. */
void mcp_mrtr_ask(struct mcp_session *ctx, json_t *msg)
{
    json_t *id = json_object_get(msg, "id");
    const char *method = json_string_value(json_object_get(msg, "method"));
    const char *origin = ctx->modern->method;
    bool known = false;
    for (size_t i = 0; i < ARRAY_LEN(answerable); i++)
        known |= strcmp(method, answerable[i]) == 0;
    if (!known) return process_error(ctx, id, -32601, "the client cannot answer this request");
    if (strcmp(origin, "tools/call") != 0 && strcmp(origin, "prompts/get") != 0 &&
        strcmp(origin, "resources/read") != 0) {
        /* 2026-07-28 allows input only for calls, prompts and reads: nobody was asked. */
        if (strcmp(method, "elicitation/create") == 0)
            return to_process(ctx, mcp_result_msg(id, json_pack("{s:s}", "action", "decline")));
        return process_error(ctx, id, -32601, "the client cannot answer requests here");
    }
    struct mcp_pending *p = mcp_session_pending(ctx);
    if (!declared(ctx->modern->caps, method)) {
        process_error(ctx, id, -32601, "the client does not offer this capability");
        mcp_modern_cancel(ctx, "the client lacks a capability the server asked for");
        struct mcp_stream *st = p ? p->stream : NULL;
        json_t *err = mcp_modern_error(p ? p->client_id : NULL, -32021,
                                       "Missing required client capability: the server asked "
                                       "for it, and this request did not declare it",
                                       NULL);
        json_object_set_new(
            json_object_get(err, "error"), "data",
            json_pack("{s:o}", "requiredCapabilities", required_capability(method)));
        if (p) p->stream = NULL;
        if (st && !st->sse) st->status = 400;
        if (st)
            mcp_stream_send(st, err, true);
        else
            json_decref(err);
        return mcp_modern_free(ctx);
    }
    struct mcp_park *park = park_of(ctx);
    if (!park)
        return process_error(ctx, id, -32000, "too many calls wait for input from their clients");
    char key[72];
    key_for(park, msg, key, sizeof key);
    json_t *pre = json_object_get(ctx->modern->preanswers, key);
    if (pre && answer_ok(method, pre)) return answer_process(ctx, id, pre);
    if (park->n_asks >= MCP_MAX_INPUTS)
        return process_error(ctx, id, -32000, "too many requests to the client at once");
    struct mcp_ask *a = &park->asks[park->n_asks++];
    snprintf(a->key, sizeof a->key, "%s", key);
    snprintf(a->method, sizeof a->method, "%s", method);
    a->process_id = json_incref(id);
    a->params = json_deep_copy(json_object_get(msg, "params") ?: json_object());
    json_object_del(a->params, "elicitationId");
    a->done = false;
    /* A server that asks several things at once gets them into one result. */
    uint64_t now = now_ms();
    if (!park->gathering) park->first_ask_ms = now;
    park->gathering = true;
    uint64_t left = park->first_ask_ms + MCP_INPUT_GATHER_MAX_MS - now;
    arm(park, left < MCP_INPUT_GATHER_MS ? left : MCP_INPUT_GATHER_MS);
}

static void reply(struct httpd_req *req, json_t *msg)
{
    mcp_http_json(req, 200, NULL, msg);
}

/* The retry: answers what it answers, then the call goes on or asks again. */
void mcp_mrtr_resume(struct mcp_server *ms, struct httpd_req *req, json_t *msg, const char *state)
{
    json_t *id = json_object_get(msg, "id"), *params = json_object_get(msg, "params");
    char digest[65];
    mcp_mrtr_digest(msg, digest);
    const char *why;
    struct mcp_session *ctx = state_verify(ms, state, digest, &why);
    if (!ctx) return reply(req, mcp_error_msg(id, -32602, why));
    struct mcp_park *park = ctx->modern->park;
    json_t *inputs = json_object_get(params, "inputResponses");
    if (inputs && !json_is_object(inputs))
        return reply(req, mcp_error_msg(id, -32602, "inputResponses must be an object"));
    if (park->final) {
        json_t *out = park->final;
        park->final = NULL;
        json_object_set(out, "id", id);
        reply(req, out);
        return mcp_modern_free(ctx);
    }
    struct mcp_pending *p = mcp_session_pending(ctx);
    struct mcp_stream *st = p ? mcp_stream_new(ctx, req, false) : NULL;
    if (!st) return reply(req, mcp_error_msg(id, -32602, why));
    st->waiting = 1;
    p->stream = st;
    json_decref(p->client_id);
    p->client_id = json_incref(id);
    json_t *meta = json_object_get(params, "_meta");
    json_decref(ctx->modern->caps);
    ctx->modern->caps = json_incref(json_object_get(meta, MCP_META "clientCapabilities"));
    size_t outstanding = 0;
    for (size_t i = 0; i < park->n_asks; i++) {
        struct mcp_ask *a = &park->asks[i];
        json_t *v = json_object_get(inputs, a->key);
        if (!a->done && v && answer_ok(a->method, v)) {
            answer_process(ctx, a->process_id, v);
            a->done = true;
        }
        outstanding += !a->done;
    }
    if (outstanding) return send_input_required(ctx); /* re-requests what is missing */
    clear_asks(park);
    park->round++; /* the state just used is spent */
    evtimer_del(park->timer);
}
