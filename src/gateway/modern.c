/* MCP 2026-07-28 at the gateway: the stateless revision, in front of a stdio server that
 * speaks its own (2025) revision and was initialized once by the gateway.
 *
 * Every request carries in params._meta what a session used to hold (the protocol
 * version, the client's capabilities and name, the log level it wants), so each one is
 * checked on its own (mcp_modern_classify) and served by a context that lives until its
 * answer is out: nothing per client outlives a request, and any request may arrive on any
 * connection. The gateway answers server/discover and tools/list itself (the approved
 * list, exactly as for sessions), forwards the rest with the revision's _meta keys
 * stripped, and decorates the answers (resultType, cache hints, serverInfo). Sampling
 * and elicitation requests of the process become input_required results (mrtr.c);
 * change notifications go to subscriptions/listen streams (listen.c). See
 * docs/gateway.md "2026-07-28 clients" and docs/protocol-2026-07-28.md. */
#include <errno.h>
#include <event2/http.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gateway_impl.h"

static const char *const log_levels[] = {"debug", "info",     "notice", "warning",
                                         "error", "critical", "alert",  "emergency"};

#define TTL_MS 60000 /* discover and tools/list: the gate refuses a blocked tool anyway */

json_t *mcp_modern_error(json_t *id, int code, const char *message, json_t *data)
{
    json_t *m = mcp_error_msg(id, code, message);
    if (data) json_object_set(json_object_get(m, "error"), "data", data);
    return m;
}

/* ---- classifying a POST ---- */

int mcp_log_level(const char *name)
{
    for (size_t i = 0; name && i < ARRAY_LEN(log_levels); i++)
        if (strcmp(name, log_levels[i]) == 0) return (int)i;
    return -1;
}

/* A stateless revision's header, or one the gateway does not know that sorts at or
 * after 2026-07-28: the TypeScript SDK's rule, so "v999.0.0" is modern too (every
 * older revision, 2024-11-05 included, sorts before it). */
static bool modern_header(const char *v)
{
    if (!v) return false;
    const struct mcp_revision *r = mcp_revision(v);
    return r ? r->stateless : strcmp(v, MCP_VERSION_MODERN) >= 0;
}

static json_t *meta_of(json_t *msg)
{
    return json_object_get(json_object_get(msg, "params"), "_meta");
}

static bool has_claim(json_t *msg)
{
    json_t *meta = meta_of(msg);
    return json_is_object(meta) && json_object_get(meta, MCP_META "protocolVersion");
}

static void reject(struct mcp_verdict *v, int status, int code, json_t *data, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void reject(struct mcp_verdict *v, int status, int code, json_t *data, const char *fmt, ...)
{
    v->era = MCP_ERA_REJECT;
    v->status = status;
    v->code = code;
    v->data = data;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->message, sizeof v->message, fmt, ap);
    va_end(ap);
}

/* The per-request fields: -32602 names the one that is missing or wrong. */
static bool envelope_ok(json_t *meta, struct mcp_verdict *v)
{
    json_t *caps = json_object_get(meta, MCP_META "clientCapabilities");
    json_t *info = json_object_get(meta, MCP_META "clientInfo");
    json_t *level = json_object_get(meta, MCP_META "logLevel");
    json_t *token = json_object_get(meta, "progressToken");
    const char *bad = NULL;
    if (!json_is_string(json_object_get(meta, MCP_META "protocolVersion")))
        bad = MCP_META "protocolVersion must be a string";
    else if (!json_is_object(caps))
        bad = MCP_META "clientCapabilities is required (an object; {} for none)";
    else if (info && (!json_is_string(json_object_get(info, "name")) ||
                      !json_is_string(json_object_get(info, "version"))))
        bad = MCP_META "clientInfo must have string name and version";
    else if (level && mcp_log_level(json_string_value(level)) < 0)
        bad = MCP_META "logLevel must be a logging level (debug ... emergency)";
    else if (token && !json_is_string(token) && !json_is_integer(token))
        bad = "progressToken must be a string or an integer";
    if (bad) reject(v, 400, -32602, NULL, "Invalid params: _meta: %s", bad);
    return !bad;
}

/* The value Mcp-Name must repeat: params.name, or params.uri for resources/read. */
static const char *name_in_body(json_t *msg, const char *method)
{
    json_t *params = json_object_get(msg, "params");
    if (strcmp(method, "tools/call") == 0 || strcmp(method, "prompts/get") == 0)
        return json_string_value(json_object_get(params, "name"));
    if (strcmp(method, "resources/read") == 0)
        return json_string_value(json_object_get(params, "uri"));
    return NULL;
}

static bool headers_ok(json_t *msg, const char *claim, const struct mcp_headers *h,
                       struct mcp_verdict *v)
{
    const char *method = json_string_value(json_object_get(msg, "method"));
    if (h->version && strcmp(h->version, claim) != 0) {
        reject(v, 400, -32020, NULL,
               "Header mismatch: MCP-Protocol-Version %.40s differs from _meta's %.40s", h->version,
               claim);
        return false;
    }
    if (h->method && strcmp(h->method, method) != 0) {
        reject(v, 400, -32020, NULL, "Header mismatch: Mcp-Method %.60s differs from %.60s",
               h->method, method);
        return false;
    }
    const struct mcp_revision *r = mcp_revision(claim);
    if (!r || !r->stateless) {
        reject(v, 400, -32022,
               json_pack("{s:o,s:s}", "supported", mcp_revisions_json(), "requested", claim),
               "Unsupported protocol version %.40s: this gateway speaks %s", claim,
               mcp_revisions_text(true));
        return false;
    }
    if (!h->version || !h->method) {
        reject(v, 400, -32020, NULL, "Header mismatch: a 2026-07-28 request needs the %s header",
               h->version ? "Mcp-Method" : "MCP-Protocol-Version");
        return false;
    }
    const char *name = name_in_body(msg, method);
    char decoded[1024];
    if (name && (!h->name || mcp_name_decode(h->name, decoded, sizeof decoded) < 0 ||
                 strcmp(decoded, name) != 0)) {
        reject(v, 400, -32020, NULL, "Header mismatch: %s needs an Mcp-Name header equal to its %s",
               method, strcmp(method, "resources/read") == 0 ? "params.uri" : "params.name");
        return false;
    }
    return true;
}

/* _meta that passes the envelope checks and names a 2026-07-28-or-later version. */
static bool valid_modern_claim(json_t *msg)
{
    struct mcp_verdict scratch;
    json_t *meta = meta_of(msg);
    const char *version = json_string_value(json_object_get(meta, MCP_META "protocolVersion"));
    return has_claim(msg) && envelope_ok(meta, &scratch) && modern_header(version);
}

void mcp_modern_classify(json_t *body, const struct mcp_headers *h, struct mcp_verdict *v)
{
    memset(v, 0, sizeof *v);
    v->era = MCP_ERA_LEGACY;
    if (json_is_array(body)) {
        size_t i;
        json_t *m;
        json_array_foreach(body, i, m) if (has_claim(m)) return reject(
            v, 400, -32600, NULL, "Invalid Request: batches are not allowed in 2026-07-28");
        return;
    }
    json_t *id = json_object_get(body, "id");
    const char *method = json_string_value(json_object_get(body, "method"));
    bool claim = has_claim(body), modern = modern_header(h->version);
    if (!json_is_object(body) || !json_object_get(body, "method")) return; /* a response */
    if (!id) {
        if (claim || modern) v->era = MCP_ERA_NOTIFICATION;
        return;
    }
    if (method && strcmp(method, "initialize") == 0 && !valid_modern_claim(body)) {
        /* The 2025 handshake, unless the request says it is a 2026-07-28 one. */
        if (modern)
            reject(v, 400, -32020, NULL,
                   "Header mismatch: initialize is the 2025 handshake, and MCP-Protocol-Version "
                   "says %.40s; 2026-07-28 clients start with server/discover",
                   h->version);
        return;
    }
    if (!claim && modern)
        return reject(v, 400, -32602, NULL,
                      "Invalid params: a %.40s request needs params._meta with " MCP_META
                      "protocolVersion and " MCP_META "clientCapabilities",
                      h->version);
    if (!claim) return; /* 2025: initialize, or a request of a session */
    if (!mcp_valid_message(body) || !method)
        return reject(v, 400, -32600, NULL,
                      "Invalid Request: not a JSON-RPC 2.0 request (a string method, a "
                      "string or integer id)");
    if (!envelope_ok(meta_of(body), v)) return;
    const char *version =
        json_string_value(json_object_get(meta_of(body), MCP_META "protocolVersion"));
    if (!headers_ok(body, version, h, v)) return;
    v->era = MCP_ERA_MODERN;
}

static int b64_value(char c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

static int b64_decode(const char *in, size_t len, char *out, size_t size)
{
    size_t n = 0;
    unsigned acc = 0, bits = 0;
    while (len > 0 && in[len - 1] == '=')
        len--;
    for (size_t i = 0; i < len; i++) {
        int d = b64_value(in[i]);
        if (d < 0) return -EINVAL;
        acc = (acc << 6) | (unsigned)d;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (n + 1 >= size) return -EINVAL;
            out[n++] = (char)((acc >> bits) & 0xff);
        }
    }
    if (memchr(out, 0, n)) return -EINVAL;
    out[n] = 0;
    return 0;
}

int mcp_name_decode(const char *raw, char *out, size_t size)
{
    while (*raw == ' ' || *raw == '\t')
        raw++;
    size_t len = strlen(raw);
    while (len > 0 && (raw[len - 1] == ' ' || raw[len - 1] == '\t'))
        len--;
    if (len >= 11 && strncasecmp(raw, "=?base64?", 9) == 0 && strncmp(raw + len - 2, "?=", 2) == 0)
        return b64_decode(raw + 9, len - 11, out, size);
    if (len >= size) return -EINVAL;
    memcpy(out, raw, len);
    out[len] = 0;
    return 0;
}

/* ---- answering ---- */

static json_t *server_info(struct mcp_server *ms)
{
    json_t *info = ms->shared ? json_object_get(ms->shared->init_result, "serverInfo") : NULL;
    return json_pack("{s:O}", MCP_META "serverInfo", info ? info : json_object());
}

static json_t *server_capabilities(struct mcp_server *ms)
{
    json_t *caps = mcp_client_capabilities(ms->shared ? ms->shared->init_result : NULL);
    json_object_del(caps, "experimental"); /* not spoken by the gateway in 2026-07-28 */
    json_object_del(caps, "tasks");
    return caps;
}

static bool server_has(struct mcp_server *ms, const char *capability)
{
    json_t *caps = json_object_get(ms->shared ? ms->shared->init_result : NULL, "capabilities");
    return json_object_get(caps, capability) != NULL;
}

static void reply(struct httpd_req *req, int status, json_t *msg)
{
    mcp_http_json(req, status, NULL, msg);
}

static void answer_discover(struct mcp_server *ms, struct httpd_req *req, json_t *id)
{
    json_t *r =
        json_pack("{s:s,s:o,s:o,s:i,s:s,s:o}", "resultType", "complete", "supportedVersions",
                  mcp_revisions_json(), "capabilities", server_capabilities(ms), "ttlMs", TTL_MS,
                  "cacheScope", "private", "_meta", server_info(ms));
    json_t *instr = json_object_get(ms->shared->init_result, "instructions");
    if (json_is_string(instr)) json_object_set(r, "instructions", instr);
    reply(req, 200, mcp_result_msg(id, r));
}

static void answer_tools_list(struct mcp_server *ms, struct httpd_req *req, json_t *id)
{
    if (!ms->served_json)
        return reply(req, 200,
                     mcp_error_msg(id, -32603, "the approved tool list cannot be sent as JSON"));
    json_t *r =
        json_pack("{s:s,s:O,s:i,s:s,s:o}", "resultType", "complete", "tools", ms->served_json,
                  "ttlMs", TTL_MS, "cacheScope", "private", "_meta", server_info(ms));
    reply(req, 200, mcp_result_msg(id, r));
}

static bool cacheable(const char *method)
{
    return strcmp(method, "prompts/list") == 0 || strcmp(method, "resources/list") == 0 ||
           strcmp(method, "resources/templates/list") == 0 || strcmp(method, "resources/read") == 0;
}

/* A process's answer as 2026-07-28 has it: resultType on every result, cache hints on
 * the cacheable ones, serverInfo in _meta; resource-not-found is -32602 now. */
static void decorate(struct mcp_session *ctx, struct mcp_stream *st, json_t *msg)
{
    struct mcp_server *ms = ctx->server;
    json_t *result = json_object_get(msg, "result"), *error = json_object_get(msg, "error");
    if (json_is_object(result)) {
        if (!json_object_get(result, "resultType"))
            json_object_set_new(result, "resultType", json_string("complete"));
        if (cacheable(ctx->modern->method) && !json_object_get(result, "ttlMs")) {
            json_object_set_new(result, "ttlMs", json_integer(0));
            json_object_set_new(result, "cacheScope", json_string("private"));
        }
        json_t *meta = json_object_get(result, "_meta");
        if (!json_is_object(meta)) json_object_set_new(result, "_meta", meta = json_object());
        json_t *info = server_info(ms);
        json_object_update(meta, info);
        json_decref(info);
    }
    json_t *code = json_object_get(error, "code");
    if (json_integer_value(code) == -32002 && strcmp(ctx->modern->method, "resources/read") == 0) {
        json_object_set_new(error, "code", json_integer(-32602));
        json_t *data = json_object_get(error, "data");
        if (!data) json_object_set_new(error, "data", data = json_object());
        if (json_is_object(data) && !json_object_get(data, "uri") && ctx->modern->uri)
            json_object_set(data, "uri", ctx->modern->uri);
    }
    if (st && json_integer_value(code) == -32601) st->status = 404;
    if (st && json_integer_value(code) == -32021) st->status = 400;
}

void mcp_modern_answered(struct mcp_session *ctx, struct mcp_stream *st, json_t *msg)
{
    decorate(ctx, st, msg);
    if (st)
        mcp_stream_send(st, msg, true);
    else if (ctx->modern->park)
        return mcp_park_keep_final(ctx, msg);
    else
        json_decref(msg);
    if (!ctx->pending) mcp_modern_free(ctx);
}

bool mcp_modern_wants_log(struct mcp_session *ctx, const char *level)
{
    int l = mcp_log_level(level);
    return ctx->modern->log_level >= 0 && l >= ctx->modern->log_level;
}

/* ---- contexts ---- */

void mcp_modern_free(struct mcp_session *ctx)
{
    struct mcp_server *ms = ctx->server;
    struct mcp_session **pp = &ms->contexts;
    while (*pp && *pp != ctx)
        pp = &(*pp)->next;
    if (*pp) *pp = ctx->next;
    struct mcp_backend *be = mcp_session_backend(ctx);
    while (ctx->streams) /* first: their answers name the requests still pending */
        mcp_stream_free(ctx->streams);
    for (struct mcp_pending *p; (p = mcp_session_pending(ctx));)
        mcp_pending_clear(be, p);
    mcp_park_free(ctx);
    json_decref(ctx->modern->caps);
    json_decref(ctx->modern->preanswers);
    json_decref(ctx->modern->uri);
    json_decref(ctx->asks);
    free(ctx->modern);
    free(ctx);
}

void mcp_modern_cancel(struct mcp_session *ctx, const char *reason)
{
    struct mcp_pending *p = mcp_session_pending(ctx);
    struct mcp_backend *be = mcp_session_backend(ctx);
    if (!p || !be) return;
    mcp_backend_send(be, json_pack("{s:s,s:s,s:{s:I,s:s}}", "jsonrpc", "2.0", "method",
                                   "notifications/cancelled", "params", "requestId",
                                   (json_int_t)p->id, "reason", reason));
}

void mcp_modern_gone(struct mcp_session *ctx)
{
    mcp_modern_cancel(ctx, "the client closed its request");
    mcp_modern_free(ctx);
}

static bool takes_input(const char *method)
{
    return strcmp(method, "tools/call") == 0 || strcmp(method, "prompts/get") == 0 ||
           strcmp(method, "resources/read") == 0;
}

static struct mcp_session *context_new(struct mcp_server *ms, json_t *msg)
{
    struct mcp_session *ctx = calloc(1, sizeof *ctx);
    struct mcp_modern *m = calloc(1, sizeof *m);
    if (!ctx || !m) {
        free(ctx);
        free(m);
        return NULL;
    }
    json_t *meta = meta_of(msg);
    ctx->server = ms;
    ctx->modern = m;
    ctx->asks = json_object();
    ctx->last_used_ms = now_ms();
    snprintf(m->method, sizeof m->method, "%s", json_string_value(json_object_get(msg, "method")));
    m->caps = json_incref(json_object_get(meta, MCP_META "clientCapabilities"));
    json_t *level = json_object_get(meta, MCP_META "logLevel");
    m->log_level = level ? mcp_log_level(json_string_value(level)) : -1;
    /* What a requestState will be bound to, should the call be parked: worked
     * out now, so that a call its server sits on keeps nothing of its body. */
    if (takes_input(m->method)) mcp_mrtr_digest(msg, m->digest);
    if (strcmp(m->method, "resources/read") == 0)
        m->uri = json_incref(json_object_get(json_object_get(msg, "params"), "uri"));
    ctx->next = ms->contexts;
    ms->contexts = ctx;
    return ctx;
}

/* The request as the process gets it, in place: without what only the gateway reads (a
 * process that speaks 2026-07-28 itself gets it whole). */
static void for_process(struct mcp_server *ms, json_t *out)
{
    if (ms->shared->modern) return;
    json_t *params = json_object_get(out, "params"), *meta = json_object_get(params, "_meta");
    json_object_del(params, "inputResponses");
    json_object_del(params, "requestState");
    const char *key;
    json_t *v;
    void *tmp;
    json_object_foreach_safe(meta, tmp, key, v) if (strncmp(key, MCP_META, strlen(MCP_META)) == 0)
        json_object_del(meta, key);
    if (meta && json_object_size(meta) == 0) json_object_del(params, "_meta");
}

static void forward(struct mcp_server *ms, struct httpd_req *req, json_t *msg)
{
    json_t *id = json_object_get(msg, "id");
    struct mcp_session *ctx = context_new(ms, msg);
    struct mcp_stream *st = ctx ? mcp_stream_new(ctx, req, false) : NULL;
    if (!st) {
        if (ctx) mcp_modern_free(ctx);
        return reply(req, 503, mcp_error_msg(id, -32603, "out of memory"));
    }
    st->waiting = 1;
    json_t *inputs = json_object_get(json_object_get(msg, "params"), "inputResponses");
    if (json_is_object(inputs)) ctx->modern->preanswers = json_incref(inputs);
    for_process(ms, msg);
    mcp_forward(ctx, st, msg);
    if (!ctx->pending && !ctx->modern->park) mcp_modern_free(ctx); /* answered at once */
}

/* The capability of the server a forwarded method needs (NULL: none), or "" when the
 * method is not served in 2026-07-28. */
static const char *capability_for(const char *method)
{
    static const struct {
        const char *method, *capability;
    } table[] = {
        {"tools/call", "tools"},
        {"tools/list", "tools"},
        {"prompts/get", "prompts"},
        {"prompts/list", "prompts"},
        {"resources/read", "resources"},
        {"resources/list", "resources"},
        {"resources/templates/list", "resources"},
        {"completion/complete", "completions"},
    };
    for (size_t i = 0; i < ARRAY_LEN(table); i++)
        if (strcmp(method, table[i].method) == 0) return table[i].capability;
    return "";
}

static void not_found(struct httpd_req *req, json_t *id, const char *method, const char *why)
{
    char text[300];
    snprintf(text, sizeof text, "Method not found: %.80s %s", method, why);
    reply(req, 404, mcp_error_msg(id, -32601, text));
}

void mcp_modern_post(struct mcp_server *ms, struct httpd_req *req, json_t *msg)
{
    json_t *id = json_object_get(msg, "id");
    const char *method = json_string_value(json_object_get(msg, "method"));
    ms->requests++;
    if (ms->per_session)
        return not_found(req, id, method,
                         "(isolation \"session\" gives each client session a process of its "
                         "own, and 2026-07-28 has no sessions: connect with a 2025-11-25 "
                         "client, such as the SDKs' legacy mode)");
    if (!ms->shared || ms->shared->state != BE_READY)
        return reply(req, 503, mcp_error_msg(id, -32000, "the server is restarting; try again"));
    if (strcmp(method, "server/discover") == 0) return answer_discover(ms, req, id);
    if (strcmp(method, "subscriptions/listen") == 0) return mcp_listen_open(ms, req, msg);
    if (strcmp(method, "tools/list") == 0 && server_has(ms, "tools"))
        return answer_tools_list(ms, req, id);
    const char *capability = capability_for(method);
    if (!*capability || !server_has(ms, capability))
        return not_found(req, id, method,
                         *capability ? "(the server does not offer it)"
                                     : "(not a method of MCP 2026-07-28 here)");
    if (strcmp(method, "tools/call") == 0) {
        json_t *refusal = mcp_call_refusal(ms, msg);
        if (refusal) return reply(req, 200, refusal);
    }
    json_t *params = json_object_get(msg, "params");
    json_t *state = json_object_get(params, "requestState");
    if (state && takes_input(method) && !ms->shared->modern)
        return mcp_mrtr_resume(ms, req, msg, json_string_value(state) ?: "");
    forward(ms, req, msg);
}
