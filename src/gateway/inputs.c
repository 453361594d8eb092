/* A 2026-07-28-only process (src/mcp/stdio_modern.c) asking a 2025 session for input:
 * input_required results go through to 2026-07-28 clients as they are; for a 2025
 * session the gateway asks the session's client each input request as a request of its
 * own (sampling, elicitation; roots are the sandbox's), and when all are answered sends
 * the process the request again with inputResponses and the requestState it gave, at
 * most MCP_MAX_INPUT_ROUNDS times. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway_impl.h"

void mcp_session_envelope(struct mcp_session *s, json_t *msg)
{
    struct mcp_declared d = {s->sampling, s->elicitation, s->client_info, s->log_level};
    mcp_stdio_envelope(msg, &d);
}

static void client_error(struct mcp_backend *be, struct mcp_pending *p, const char *text)
{
    json_t *err = mcp_error_msg(p->client_id, -32603, text);
    struct mcp_stream *st = p->stream;
    mcp_pending_clear(be, p);
    if (st)
        mcp_stream_send(st, err, true);
    else
        json_decref(err);
}

/* Sends the process the request again with what the client answered. */
static void retry(struct mcp_backend *be, struct mcp_pending *p, json_t *state)
{
    json_t *again = json_deep_copy(p->request);
    json_t *params = json_object_get(again, "params");
    json_object_set(params, "inputResponses", p->inputs);
    if (json_is_string(state))
        json_object_set(params, "requestState", state);
    else
        json_object_del(params, "requestState");
    json_decref(p->inputs);
    p->inputs = NULL;
    mcp_backend_send(be, again);
}

static bool session_offers(struct mcp_session *s, const char *method)
{
    return (strcmp(method, "sampling/createMessage") == 0 && s->sampling) ||
           (strcmp(method, "elicitation/create") == 0 && s->elicitation);
}

/* Asks the client one input request; the answer comes to mcp_stdio_input. */
static bool ask_client(struct mcp_backend *be, struct mcp_pending *p, const char *key, json_t *req,
                       json_t *state)
{
    struct mcp_session *s = p->session;
    const char *method = json_string_value(json_object_get(req, "method"));
    if (method && strcmp(method, "roots/list") == 0) { /* the server's files are the sandbox's */
        json_object_set_new(
            p->inputs, key,
            json_pack("{s:[{s:s,s:s}]}", "roots", "uri", "file:///workspace", "name", "workspace"));
        return true;
    }
    if (!method || !session_offers(s, method) || json_object_size(s->asks) >= MCP_MAX_PENDING)
        return false;
    char id[32];
    snprintf(id, sizeof id, "rt-%lld", (long long)++s->next_ask);
    json_object_set_new(s->asks, id,
                        json_pack("{s:I,s:s,s:s,s:O}", "pending", (json_int_t)p->id, "key", key,
                                  "method", method, "state", state ? state : json_null()));
    json_t *out = json_pack("{s:s,s:s,s:s,s:O}", "jsonrpc", "2.0", "id", id, "method", method,
                            "params", json_object_get(req, "params") ?: json_object());
    p->awaiting++;
    if (p->stream)
        mcp_stream_send(p->stream, out, false);
    else
        json_decref(out);
    return true;
}

static void strip_2026(json_t *result)
{
    if (!json_is_object(result)) return;
    json_object_del(result, "resultType");
    json_object_del(result, "ttlMs");
    json_object_del(result, "cacheScope");
}

bool mcp_stdio_answer(struct mcp_backend *be, struct mcp_pending *p, json_t *msg)
{
    json_t *result = json_object_get(msg, "result");
    const char *type = json_string_value(json_object_get(result, "resultType"));
    if (!type || strcmp(type, "input_required") != 0) {
        strip_2026(result);
        return false;
    }
    if (++p->rounds > MCP_MAX_INPUT_ROUNDS) {
        client_error(be, p, "the server asked for input more than 10 times for one request");
        return true;
    }
    json_t *asks = json_object_get(result, "inputRequests");
    json_t *state = json_object_get(result, "requestState");
    json_decref(p->inputs);
    p->inputs = json_object();
    const char *key;
    json_t *req;
    json_object_foreach(asks, key, req) if (!ask_client(be, p, key, req, state))
    {
        client_error(be, p,
                     "the server needs input this client did not offer at initialize "
                     "(sampling or elicitation capability)");
        return true;
    }
    if (p->awaiting == 0) retry(be, p, state); /* nothing to ask a person (roots only) */
    return true;
}

void mcp_stdio_input(struct mcp_backend *be, json_t *ask, json_t *msg)
{
    struct mcp_pending *p =
        mcp_pending_find(be, json_integer_value(json_object_get(ask, "pending")));
    const char *key = json_string_value(json_object_get(ask, "key"));
    if (!p || !p->inputs || !key || p->awaiting == 0) return; /* the call ended meanwhile */
    json_t *result = json_object_get(msg, "result");
    const char *method = json_string_value(json_object_get(ask, "method"));
    if (json_is_object(result))
        json_incref(result);
    else if (method && strcmp(method, "elicitation/create") == 0)
        result = json_pack("{s:s}", "action", "decline"); /* the client refused to ask */
    else
        return client_error(be, p, "the client refused the server's sampling request");
    json_object_set_new(p->inputs, key, result);
    if (--p->awaiting == 0) retry(be, p, json_object_get(ask, "state"));
}
