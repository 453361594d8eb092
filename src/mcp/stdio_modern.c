/* A stdio server that speaks only 2026-07-28 (the TypeScript SDK's serveStdio with
 * legacy "reject", and servers like it).
 *
 * The gateway opens every process with the 2025 initialize, which every server of the
 * 2025 era and every dual-era server accepts. A modern-only server answers it with
 * -32022 naming only modern versions and keeps the connection open for a modern
 * opening, so the gateway then discovers (server/discover), takes what the discover
 * result says as the initialize result it serves clients from, and speaks 2026-07-28 on
 * that stdio from then on:
 *   - every request carries the per-request _meta: a 2026-07-28 client's own, or for a
 *     2025 session what it declared at initialize (capabilities, name) and the level it
 *     set with logging/setLevel;
 *   - its list changes come on a subscriptions/listen the gateway opens once the gate
 *     passed (so a tool that changes while running is relisted and gated as before);
 *   - input_required results go through to 2026-07-28 clients as they are; for a 2025
 *     session the gateway asks its client (src/gateway/inputs.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp_impl.h"

static json_t *gateway_capabilities(void)
{
    return json_pack("{s:{},s:{},s:{}}", "sampling", "elicitation", "roots");
}

static json_t *envelope(json_t *caps, json_t *client_info, int log_level)
{
    static const char *const levels[] = {"debug", "info",     "notice", "warning",
                                         "error", "critical", "alert",  "emergency"};
    json_t *meta =
        json_pack("{s:s,s:o,s:O}", MCP_META "protocolVersion", MCP_VERSION_MODERN,
                  MCP_META "clientCapabilities", caps, MCP_META "clientInfo", client_info);
    if (log_level >= 0 && log_level < (int)ARRAY_LEN(levels))
        json_object_set_new(meta, MCP_META "logLevel", json_string(levels[log_level]));
    return meta;
}

static json_t *runtime_info(void)
{
    return json_pack("{s:s,s:s}", "name", "runtime", "version", "0.1");
}

void mcp_stdio_envelope(json_t *msg, const struct mcp_declared *d)
{
    json_t *params = json_object_get(msg, "params");
    if (!json_is_object(params)) json_object_set_new(msg, "params", params = json_object());
    json_t *meta = json_object_get(params, "_meta");
    if (!json_is_object(meta)) json_object_set_new(params, "_meta", meta = json_object());
    if (json_object_get(meta, MCP_META "protocolVersion")) return; /* a 2026-07-28 client's */
    json_t *caps = json_object(), *info = runtime_info();
    if (!d) {
        json_decref(caps);
        caps = gateway_capabilities();
    } else {
        if (d->sampling) json_object_set_new(caps, "sampling", json_object());
        if (d->elicitation) json_object_set_new(caps, "elicitation", json_object());
        json_object_set_new(caps, "roots", json_object()); /* answered by the gateway */
        if (json_is_object(d->client_info)) {
            json_decref(info);
            info = json_incref(d->client_info);
        }
    }
    json_t *env = envelope(caps, info, d ? d->log_level : -1);
    json_decref(info);
    json_object_update(meta, env);
    json_decref(env);
}

/* ---- the opening ---- */

static bool names_a_2025_version(json_t *supported)
{
    size_t i;
    json_t *v;
    json_array_foreach(supported, i, v)
    {
        const char *s = json_string_value(v);
        if (s && strcmp(s, MCP_VERSION_MODERN) < 0) return true;
    }
    return false;
}

static void on_discovered(struct mcp_backend *be, json_t *msg, const char *line, size_t len)
{
    json_t *r = json_object_get(msg, "result");
    if (json_is_object(r)) {
        /* What clients are served from, in the shape of an initialize result. */
        json_t *info = json_object_get(json_object_get(r, "_meta"), MCP_META "serverInfo");
        json_t *init = json_pack("{s:s,s:O,s:O}", "protocolVersion", MCP_VERSION_MODERN,
                                 "capabilities", json_object_get(r, "capabilities") ?: json_null(),
                                 "serverInfo", info ? info : json_object());
        json_t *instr = json_object_get(r, "instructions");
        if (json_is_string(instr)) json_object_set(init, "instructions", instr);
        json_t *as_init = json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id",
                                    json_object_get(msg, "id"), "result", init);
        be->opened(be, as_init, line, len);
        json_decref(as_init);
        return;
    }
    be->opened(be, msg, line, len); /* its error, as initialize's */
}

bool mcp_stdio_refused_2025(struct mcp_backend *be, json_t *msg, mcp_internal_fn done)
{
    json_t *error = json_object_get(msg, "error");
    json_t *supported = json_object_get(json_object_get(error, "data"), "supported");
    if (json_integer_value(json_object_get(error, "code")) != -32022 || !json_is_array(supported) ||
        names_a_2025_version(supported))
        return false;
    be->modern = true;
    be->opened = done;
    json_t *discover =
        json_pack("{s:s,s:s,s:{}}", "jsonrpc", "2.0", "method", "server/discover", "params");
    struct mcp_pending *p;
    if (mcp_backend_request(be, discover, &p) < 0) {
        json_decref(discover);
        return false;
    }
    p->internal = on_discovered;
    mcp_backend_send(be, discover);
    return true;
}

static void on_listen_end(struct mcp_backend *be, json_t *msg, const char *line, size_t len) {}

void mcp_stdio_listen(struct mcp_backend *be)
{
    json_t *listen =
        json_pack("{s:s,s:s,s:{s:{s:b,s:b,s:b}}}", "jsonrpc", "2.0", "method",
                  "subscriptions/listen", "params", "notifications", "toolsListChanged", 1,
                  "promptsListChanged", 1, "resourcesListChanged", 1);
    struct mcp_pending *p;
    if (mcp_backend_request(be, listen, &p) < 0) return json_decref(listen);
    p->internal = on_listen_end; /* it ends with the process */
    mcp_backend_send(be, listen);
}
