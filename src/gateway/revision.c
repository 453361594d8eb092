/* The protocol revisions the gateway speaks, as rows: what differs between them
 * is a column here, never a version string compared where it matters. */
#include <string.h>

#include "gateway_impl.h"

/* Newest first: the order clients are told them in. */
static const struct mcp_revision revisions[] = {
    /* version             stateless  batches */
    {MCP_VERSION_MODERN, true, false},
    {"2025-11-25", false, false},
    {"2025-06-18", false, false},
    {"2025-03-26", false, true},
};

const struct mcp_revision *mcp_revision(const char *version)
{
    for (size_t i = 0; version && i < ARRAY_LEN(revisions); i++)
        if (strcmp(version, revisions[i].version) == 0) return &revisions[i];
    return NULL;
}

const struct mcp_revision *mcp_revision_with_sessions(const char *version)
{
    const struct mcp_revision *r = mcp_revision(version);
    return r && !r->stateless ? r : NULL;
}

json_t *mcp_revisions_json(void)
{
    json_t *a = json_array();
    for (size_t i = 0; i < ARRAY_LEN(revisions); i++)
        json_array_append_new(a, json_string(revisions[i].version));
    return a;
}

const char *mcp_revisions_text(bool with_stateless)
{
    static char text[2][160];
    char *out = text[with_stateless];
    if (out[0]) return out;
    size_t n = 0, len = 0;
    for (size_t i = 0; i < ARRAY_LEN(revisions); i++)
        n += with_stateless || !revisions[i].stateless;
    for (size_t i = 0, k = 0; i < ARRAY_LEN(revisions); i++) {
        if (!with_stateless && revisions[i].stateless) continue;
        const char *sep = k == 0 ? "" : k + 1 == n ? " and " : ", ";
        len += (size_t)snprintf(out + len, sizeof text[0] - len, "%s%s", sep, revisions[i].version);
        k++;
    }
    return out;
}
