/* The fingerprint gate: a server serves only a tool list that
 * was approved, byte for byte. The approval is the start option's fingerprint, the
 * catalog's, or the list the server showed at its first start; what clients see is
 * the approved list's canonical text itself, never the process's own words. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../review/review.h"
#include "mcp_impl.h"

void mcp_toolset_clear(struct mcp_toolset *t)
{
    for (size_t i = 0; i < t->n; i++) {
        free(t->v[i].name);
        free(t->v[i].canon);
    }
    free(t->v);
    free(t->canon);
    memset(t, 0, sizeof *t);
}

/* Fills t from tools sorted by name: each one's canonical text and the whole list's. */
static int from_sorted(const struct fp_value **tools, size_t n, struct mcp_toolset *t, err_t *err)
{
    t->v = calloc(n ? n : 1, sizeof *t->v);
    size_t total = 3; /* "[", "]" and the NUL; each tool adds its text and a comma */
    int r = t->v ? 0 : err_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; r == 0 && i < n; i++, t->n++) {
        const struct fp_value *name = fp_get(tools[i], "name");
        t->v[i].name = strndup(name->text, name->len);
        size_t len = 0;
        r = fp_canonical(tools[i], &t->v[i].canon, &len, err);
        total += len + 1;
    }
    if (r == 0) t->canon = malloc(total);
    if (r == 0 && !t->canon) r = err_set(err, -ENOMEM, "out of memory");
    if (r == 0) {
        char *p = t->canon;
        *p++ = '[';
        for (size_t i = 0; i < n; i++) {
            if (i) *p++ = ',';
            p = stpcpy(p, t->v[i].canon);
        }
        *p++ = ']';
        *p = '\0';
        fingerprint_sha256_hex(t->canon, strlen(t->canon), t->sha256);
    }
    if (r < 0) mcp_toolset_clear(t);
    return r;
}

int mcp_toolset_from_pages(char **pages, const size_t *lens, size_t n, struct mcp_toolset *out,
                           err_t *err)
{
    struct fp_doc **docs = calloc(n ? n : 1, sizeof *docs);
    const struct fp_value **roots = calloc(n ? n : 1, sizeof *roots);
    const struct fp_value **tools = NULL;
    size_t ntools = 0;
    int r = docs && roots ? 0 : err_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; r == 0 && i < n; i++) {
        r = fp_parse(pages[i], lens[i], &docs[i], err);
        if (r == 0) roots[i] = fp_doc_root(docs[i]);
    }
    if (r == 0) r = fp_tools_sorted_pages(roots, n, &tools, &ntools, err);
    if (r == 0) r = from_sorted(tools, ntools, out, err);
    free(tools);
    for (size_t i = 0; docs && i < n; i++)
        fp_doc_free(docs[i]);
    free(docs);
    free(roots);
    return r;
}

int mcp_toolset_from_canon(const char *canon, struct mcp_toolset *out, err_t *err)
{
    char *page = (char *)canon;
    size_t len = strlen(canon);
    return mcp_toolset_from_pages(&page, &len, 1, out, err);
}

static const struct mcp_tool *find(const struct mcp_toolset *t, const char *name)
{
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->v[i].name, name) == 0) return &t->v[i];
    return NULL;
}

bool mcp_tool_exposed(const struct mcp_server *ms, const char *tool)
{
    const struct model_strings *only = &ms->config.tools;
    for (size_t i = 0; i < only->n; i++)
        if (strcmp(only->v[i], tool) == 0) return true;
    return only->n == 0;
}

/* A tools option naming a tool the approved list does not have: said once. */
static void warn_missing(struct mcp_server *ms)
{
    const struct model_strings *only = &ms->config.tools;
    for (size_t i = 0; i < only->n; i++) {
        if (find(&ms->approved, only->v[i])) continue;
        char text[300];
        snprintf(text, sizeof text, "tools lists %.128s, which the server does not offer",
                 only->v[i]);
        size_t j;
        json_t *w;
        bool dup = false;
        json_array_foreach(ms->warnings, j, w) dup = dup || strcmp(json_string_value(w), text) == 0;
        if (!dup) json_array_append_new(ms->warnings, json_string(text));
    }
}

/* Serves the approved tools that fresh (NULL: all of them) still has unchanged,
 * and of those only the ones the server's tools option exposes. The gate judges
 * the whole list the server offers all the same. */
static size_t serve(struct mcp_server *ms, const struct mcp_toolset *fresh)
{
    const struct mcp_toolset *a = &ms->approved;
    size_t total = 3, kept = 0;
    for (size_t i = 0; i < a->n; i++)
        total += strlen(a->v[i].canon) + 1;
    free(ms->served);
    json_decref(ms->served_names);
    ms->served = malloc(total);
    ms->served_names = json_array();
    char *p = ms->served;
    *p++ = '[';
    for (size_t i = 0; i < a->n; i++) {
        const struct mcp_tool *now = fresh ? find(fresh, a->v[i].name) : &a->v[i];
        if (!now || strcmp(now->canon, a->v[i].canon) != 0) continue;
        if (!mcp_tool_exposed(ms, a->v[i].name)) continue;
        if (kept++) *p++ = ',';
        p = stpcpy(p, a->v[i].canon);
        json_array_append_new(ms->served_names, json_string(a->v[i].name));
    }
    *p++ = ']';
    *p = '\0';
    json_decref(ms->served_json);
    ms->served_json = json_loads(ms->served, JSON_DECODE_ANY, NULL);
    warn_missing(ms);
    return kept;
}

void mcp_gate_serve_all(struct mcp_server *ms)
{
    serve(ms, NULL);
}

bool mcp_gate_allows(struct mcp_server *ms, const char *tool)
{
    size_t i;
    json_t *v;
    json_array_foreach(ms->served_names, i,
                       v) if (strcmp(json_string_value(v), tool) == 0) return true;
    return false;
}

static void add_list(char *out, size_t size, const char *label, const struct review_list *l)
{
    if (l->n == 0) return;
    size_t len = strlen(out);
    snprintf(out + len, size - len, "%s%s: ", len ? "; " : "", label);
    for (size_t i = 0; i < l->n && i < 8; i++) {
        len = strlen(out);
        snprintf(out + len, size - len, "%s%s", i ? ", " : "", l->v[i]);
    }
}

/* What changed from the approved list to fresh, in one line. */
static void describe(const struct mcp_server *ms, const struct mcp_toolset *fresh, char *out,
                     size_t size)
{
    out[0] = '\0';
    if (!ms->approved.canon) return;
    struct review rv;
    err_t err = {0};
    if (review_tools(ms->approved.canon, strlen(ms->approved.canon), fresh->canon,
                     strlen(fresh->canon), &rv, &err) == 0) {
        add_list(out, size, "tools added", &rv.tools_added);
        add_list(out, size, "tools removed", &rv.tools_removed);
        add_list(out, size, "parameters added", &rv.params_added);
        add_list(out, size, "parameters removed", &rv.params_removed);
        add_list(out, size, "fields changed", &rv.fields_changed);
        for (size_t i = 0; i < rv.n_descs && i < 8; i++) {
            size_t len = strlen(out);
            snprintf(out + len, size - len, "%sdescription of %s changed", len ? "; " : "",
                     rv.descs[i].tool);
        }
    }
    review_free(&rv);
}

/* A list not served (taken: *fresh is left empty), for a person to review (approve.c). */
static void keep_pending(struct mcp_server *ms, struct mcp_toolset *fresh)
{
    mcp_toolset_clear(&ms->pending);
    ms->pending = *fresh;
    memset(fresh, 0, sizeof *fresh);
}

int mcp_gate_check(struct mcp_server *ms, struct mcp_toolset *fresh, err_t *err)
{
    const char *given = ms->config.fingerprint[0] ? ms->config.fingerprint : NULL;
    const char *pinned =
        ms->entry ? json_string_value(json_object_get(ms->entry, "fingerprint")) : NULL;
    const char *want = given ? given : NULL;
    /* An explicit option replaces an earlier approval; the catalog's pin counts only when
     * nobody approved anything for this server yet. */
    if (!want && !ms->has_approved) want = pinned;
    bool ok = want ? fingerprint_matches(want, fresh->sha256)
                   : !ms->has_approved || strcmp(ms->approved.sha256, fresh->sha256) == 0;
    memcpy(ms->seen, fresh->sha256, sizeof ms->seen);
    mcp_toolset_clear(&ms->pending);
    if (ok) {
        mcp_toolset_clear(&ms->approved);
        ms->approved = *fresh;
        memset(fresh, 0, sizeof *fresh);
        ms->has_approved = true;
        mcp_gate_serve_all(ms);
        mcp_box_save(ms->box);
        return 0;
    }
    char changes[700];
    describe(ms, fresh, changes, sizeof changes);
    char approved[FINGERPRINT_SHORT + 1];
    snprintf(approved, sizeof approved, "%.*s", FINGERPRINT_SHORT,
             want ? want : ms->approved.sha256);
    err_set(err, -EPERM,
            "its tools changed since they were approved: fingerprint %.*s, "
            "approved %s%s%s; review it in the dashboard or with `runtime mcp review`, then "
            "approve it there or start it with --fingerprint %s=%.*s",
            FINGERPRINT_SHORT, fresh->sha256, approved, changes[0] ? "; " : "", changes, ms->name,
            FINGERPRINT_SHORT, fresh->sha256);
    keep_pending(ms, fresh);
    return -EPERM;
}

void mcp_gate_relist(struct mcp_server *ms, struct mcp_toolset *fresh)
{
    memcpy(ms->seen, fresh->sha256, sizeof ms->seen);
    mcp_toolset_clear(&ms->pending);
    size_t before = json_array_size(ms->served_names);
    size_t kept = serve(ms, fresh);
    if (strcmp(fresh->sha256, ms->approved.sha256) != 0) {
        char changes[700];
        describe(ms, fresh, changes, sizeof changes);
        json_t *blocked = json_array(), *hidden = json_array();
        for (size_t i = 0; i < ms->approved.n; i++)
            if (!mcp_gate_allows(ms, ms->approved.v[i].name))
                json_array_append_new(blocked, json_string(ms->approved.v[i].name));
        for (size_t i = 0; i < fresh->n; i++)
            if (!find(&ms->approved, fresh->v[i].name))
                json_array_append_new(hidden, json_string(fresh->v[i].name));
        char warning[900];
        snprintf(warning, sizeof warning,
                 "its tools changed while it ran (fingerprint %.*s, "
                 "approved %.*s): %s; only the unchanged approved tools are served",
                 FINGERPRINT_SHORT, fresh->sha256, FINGERPRINT_SHORT, ms->approved.sha256,
                 changes[0] ? changes : "changed");
        if (json_array_size(ms->warnings) < 20)
            json_array_append_new(ms->warnings, json_string(warning));
        mcp_log(ms, true, "refused a changed tool list: %s", warning);
        mcp_event(ms, "mcp.refused",
                  json_pack("{s:s#,s:s#,s:o,s:o,s:s}", "fingerprint", fresh->sha256,
                            FINGERPRINT_SHORT, "approved", ms->approved.sha256, FINGERPRINT_SHORT,
                            "blocked", blocked, "hidden", hidden, "changes", changes));
    }
    if (strcmp(fresh->sha256, ms->approved.sha256) != 0) keep_pending(ms, fresh);
    if (kept != before)
        mcp_clients()->broadcast(ms, json_pack("{s:s,s:s}", "jsonrpc", "2.0", "method",
                                               "notifications/tools/list_changed"));
}
