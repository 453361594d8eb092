/* The latest tools/calls of a server, as a person reading the dashboard wants them:
 * which tool, when, how long it took, and how it ended. A ring per server, made at its
 * first call; nothing of a call's arguments or results is kept (they may hold anything). */
#include <stdlib.h>
#include <string.h>

#include "mcp_impl.h"

struct mcp_call {
    char tool[64];
    int64_t at_ms; /* wall clock, when it was sent */
    uint32_t ms;   /* until its answer */
    const char *outcome;
    char error[160];
};

struct mcp_calls {
    struct mcp_call ring[MCP_CALLS_KEPT];
    unsigned next, n;
    uint64_t total, failed;
};

/* Copies text (valid UTF-8: it came out of JSON) cut to size between characters. */
static void copy_text(char *dst, size_t size, const char *src)
{
    size_t n = strlen(src);
    if (n >= size) {
        n = size - 1;
        while (n > 0 && ((unsigned char)src[n] & 0xc0) == 0x80)
            n--;
    }
    memcpy(dst, src, n);
    dst[n] = '\0';
}

void mcp_call_sent(struct mcp_pending *p, json_t *msg)
{
    const char *method = json_string_value(json_object_get(msg, "method"));
    json_t *name = json_object_get(json_object_get(msg, "params"), "name");
    if (!method || strcmp(method, "tools/call") != 0 || !json_is_string(name)) return;
    p->tool = json_incref(name);
    p->started_ms = now_ms();
}

static void keep(struct mcp_server *ms, const char *tool, uint64_t started_ms, const char *outcome,
                 const char *error)
{
    if (!ms->calls && !(ms->calls = calloc(1, sizeof *ms->calls))) return;
    struct mcp_calls *c = ms->calls;
    struct mcp_call *k = &c->ring[c->next];
    c->next = (c->next + 1) % MCP_CALLS_KEPT;
    c->n += c->n < MCP_CALLS_KEPT;
    c->total++;
    c->failed += strcmp(outcome, "ok") != 0;
    uint64_t now = now_ms();
    *k = (struct mcp_call){.at_ms = now_unix_ms() - (int64_t)(now - started_ms),
                           .ms = (uint32_t)(now - started_ms),
                           .outcome = outcome};
    copy_text(k->tool, sizeof k->tool, tool);
    if (error) copy_text(k->error, sizeof k->error, error);
}

/* The text of a tool's error result: its first text content. */
static const char *result_error(json_t *result)
{
    json_t *first = json_array_get(json_object_get(result, "content"), 0);
    const char *text = json_string_value(json_object_get(first, "text"));
    return text ? text : "the tool answered isError";
}

void mcp_call_answered(struct mcp_server *ms, struct mcp_pending *p, json_t *msg, const char *why)
{
    if (!p->tool) return;
    const char *tool = json_string_value(p->tool);
    json_t *error = msg ? json_object_get(msg, "error") : NULL;
    json_t *result = msg ? json_object_get(msg, "result") : NULL;
    if (!msg)
        keep(ms, tool, p->started_ms, "lost", why);
    else if (error)
        keep(ms, tool, p->started_ms, "error",
             json_string_value(json_object_get(error, "message")) ?: "a JSON-RPC error");
    else if (json_is_true(json_object_get(result, "isError")))
        keep(ms, tool, p->started_ms, "error", result_error(result));
    else
        keep(ms, tool, p->started_ms, "ok", NULL);
}

void mcp_call_refused(struct mcp_server *ms, json_t *msg, json_t *refusal)
{
    const char *tool = json_string_value(json_object_get(json_object_get(msg, "params"), "name"));
    const char *why =
        json_string_value(json_object_get(json_object_get(refusal, "error"), "message"));
    keep(ms, tool ? tool : "(no name)", now_ms(), "refused", why ? why : "refused by the gateway");
}

json_t *mcp_calls_json(const struct mcp_server *ms)
{
    const struct mcp_calls *c = ms->calls;
    json_t *recent = json_array();
    for (unsigned i = 0; c && i < c->n; i++) {
        const struct mcp_call *k = &c->ring[(c->next + MCP_CALLS_KEPT - 1 - i) % MCP_CALLS_KEPT];
        char at[40];
        time_rfc3339(at, sizeof at, k->at_ms);
        json_t *row = json_pack("{s:s,s:s,s:i,s:s}", "tool", k->tool, "at", at, "ms", (int)k->ms,
                                "outcome", k->outcome);
        if (k->error[0]) json_object_set_new(row, "error", json_string(k->error));
        json_array_append_new(recent, row);
    }
    return json_pack("{s:s,s:I,s:I,s:o}", "name", ms->name, "total", (json_int_t)(c ? c->total : 0),
                     "failed", (json_int_t)(c ? c->failed : 0), "recent", recent);
}

void mcp_calls_free(struct mcp_server *ms)
{
    free(ms->calls);
    ms->calls = NULL;
}
