/* review: what changed between two tool lists of an MCP server, and which strings of the new
 * one look like an attack on the model (`runtime mcp review`, docs/catalog.md). The patterns are a
 * tripwire for the person reviewing; the fingerprint is the guarantee. Used by the CLI and,
 * for the warnings of a server, by the gateway. */
#ifndef RUNTIME_REVIEW_H
#define RUNTIME_REVIEW_H

#include <stdbool.h>
#include <stddef.h>

#include "../common/common.h"

enum review_kind {
    REVIEW_MODEL_TEXT,  /* text aimed at the model: <IMPORTANT>, "ignore previous" */
    REVIEW_HIDE,        /* a request to hide something from the user */
    REVIEW_SECRET_PATH, /* a local secret file: ~/, .ssh, .env, mcp.json */
    REVIEW_URL,         /* http://, https://, data: ... */
    REVIEW_CALL_ORDER,  /* when, or instead of what, to call tools */
    REVIEW_INVISIBLE,   /* zero-width, tag, control characters */
    REVIEW_BIDI,        /* characters that change the text's direction */
    REVIEW_TAG_TEXT,    /* text spelled in invisible tag characters, decoded */
    REVIEW_NAME_CHARS,  /* non-ASCII letters (look-alikes) in a tool or parameter name */
    REVIEW_DUP_TOOL,    /* two tools of one name: a client may call either */
    REVIEW_DUP_KEY,     /* a key twice in an object: clients disagree on which one counts */
    REVIEW_KIND_COUNT
};
/* "text aimed at the model", "request to hide", ... */
const char *review_kind_text(enum review_kind k);

/* Every text in a review is safe to print: valid UTF-8, with control, invisible and
 * direction-changing characters written as \uXXXX (non-ASCII too in names and paths). */
struct review_finding {
    char *path; /* get_forecast.inputSchema.properties.city.enum[2] */
    enum review_kind kind;
    char *excerpt; /* the text around the match */
    bool in_old;   /* OLD had the same text at the same path: reviewed before */
};

struct review_desc {
    char *tool;
    char *old_text, *new_text; /* NULL when the tool had no description */
};

struct review_list {
    char **v;
    size_t n;
};

struct review {
    bool has_old; /* false when only NEW was scanned */
    char old_sha256[65], new_sha256[65];
    size_t old_tools, new_tools;
    bool changed; /* the hashes differ */
    struct review_list tools_added, tools_removed;
    struct review_list params_added, params_removed; /* "tool.param", "tool.a.b", "tool.l[].x" */
    struct review_list fields_changed; /* "tool.inputSchema": other changed top-level fields */
    struct review_desc *descs;         /* changed descriptions */
    size_t n_descs;
    struct review_finding *findings; /* of every string and key in NEW, in path order */
    size_t n_findings;
};

/* Compares the tool lists OLD and NEW (each a tools array, a tools/list result or a
 * JSON-RPC response, as for the fingerprint) and scans every string of NEW. old_json may
 * be NULL: then only NEW is fingerprinted and scanned. 0, or -EINVAL naming the list that
 * is bad, -ENOMEM. r is filled and must be freed in both cases. */
int review_tools(const char *old_json, size_t old_len, const char *new_json, size_t new_len,
                 struct review *r, err_t *err);
void review_free(struct review *r);
/* Nothing to look at: same hash and no findings. */
bool review_clean(const struct review *r);

#endif
