/* A person's review of a server's tool list, and the approval that follows it (the
 * dashboard's review page; docs/dashboard.md). What the gate refused at a start, or held
 * back while the server ran, is kept as the server's pending list: the review shows it
 * beside the approved one, with what changed and the tripwire's findings on every text
 * (src/review); approving takes exactly that list, by its fingerprint, and is recorded:
 * who, when, the old and the new hash, in the server's saved state and as an
 * mcp.approved event. The fingerprint stays the guarantee: what is approved is what was
 * shown. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../catalog/catalog.h"
#include "../review/review.h"
#include "mcp_impl.h"

#define APPROVALS_KEPT 50

static json_t *strings(const struct review_list *l)
{
    json_t *a = json_array();
    for (size_t i = 0; i < l->n; i++)
        json_array_append_new(a, json_string(l->v[i]));
    return a;
}

static const char *rule_of(enum review_kind k)
{
    static const char *const rules[REVIEW_KIND_COUNT] = {
        [REVIEW_MODEL_TEXT] = "speaks-to-model",    [REVIEW_HIDE] = "asks-to-hide",
        [REVIEW_SECRET_PATH] = "names-secret-file", [REVIEW_URL] = "url",
        [REVIEW_CALL_ORDER] = "orders-calls",       [REVIEW_INVISIBLE] = "invisible-characters",
        [REVIEW_BIDI] = "direction-characters",     [REVIEW_TAG_TEXT] = "tag-text",
        [REVIEW_NAME_CHARS] = "look-alike-name",    [REVIEW_DUP_TOOL] = "duplicate-tool",
        [REVIEW_DUP_KEY] = "duplicate-key",
    };
    return (unsigned)k < REVIEW_KIND_COUNT ? rules[k] : "other";
}

/* A finding's path starts with its tool's name ("get_forecast.inputSchema..."). */
static json_t *finding_json(const struct review_finding *f)
{
    const char *dot = strchr(f->path, '.');
    json_t *tool = dot ? json_stringn(f->path, (size_t)(dot - f->path)) : json_string(f->path);
    return json_pack("{s:o,s:s,s:s,s:s,s:s,s:b}", "tool", tool, "path", f->path, "rule",
                     rule_of(f->kind), "message", review_kind_text(f->kind), "excerpt", f->excerpt,
                     "reviewedBefore", f->in_old);
}

static json_t *changes_json(const struct review *rv)
{
    json_t *descs = json_array();
    for (size_t i = 0; i < rv->n_descs; i++)
        json_array_append_new(descs,
                              json_pack("{s:s,s:s?,s:s?}", "tool", rv->descs[i].tool, "old",
                                        rv->descs[i].old_text, "new", rv->descs[i].new_text));
    return json_pack("{s:o,s:o,s:o,s:o,s:o,s:o}", "toolsAdded", strings(&rv->tools_added),
                     "toolsRemoved", strings(&rv->tools_removed), "paramsAdded",
                     strings(&rv->params_added), "paramsRemoved", strings(&rv->params_removed),
                     "fieldsChanged", strings(&rv->fields_changed), "descriptions", descs);
}

static json_t *list_json(const struct mcp_toolset *t)
{
    json_t *tools = t->canon ? json_loads(t->canon, 0, NULL) : NULL;
    return tools ? json_pack("{s:s,s:o}", "fingerprint", t->sha256, "tools", tools) : json_null();
}

/* The review of what the server would now serve (its pending list, else its approved
 * one) against what was approved. */
static int review_json(struct mcp_server *ms, json_t **out, err_t *err)
{
    const struct mcp_toolset *now = ms->pending.canon ? &ms->pending : &ms->approved;
    const char *old = ms->has_approved && now != &ms->approved ? ms->approved.canon : NULL;
    struct review rv;
    int r = now->canon
                ? review_tools(old, old ? strlen(old) : 0, now->canon, strlen(now->canon), &rv, err)
                : (memset(&rv, 0, sizeof rv), 0);
    if (r < 0) {
        review_free(&rv);
        return r;
    }
    json_t *findings = json_array();
    for (size_t i = 0; i < rv.n_findings; i++)
        json_array_append_new(findings, finding_json(&rv.findings[i]));
    *out = json_pack("{s:s,s:s,s:o,s:o,s:b,s:o,s:o,s:O}", "name", ms->name, "status",
                     mcp_status_name(ms->status), "approved",
                     ms->has_approved ? list_json(&ms->approved) : json_null(), "current",
                     list_json(now), "pending", now == &ms->pending, "changes",
                     old ? changes_json(&rv) : json_null(), "findings", findings, "approvals",
                     ms->approvals);
    review_free(&rv);
    return 0;
}

int mcp_catalog_review(json_t *catalog, const char *id, json_t **out, err_t *err)
{
    json_t *entry = catalog_find(catalog, id);
    if (!entry)
        return err_set(err, -ENOENT, "no catalog entry %s; GET /v1/mcp/catalog lists them", id);
    json_t *tools = catalog_reviewed_tools(id);
    char *text = tools ? json_dumps(tools, JSON_COMPACT) : NULL;
    if (!text) {
        json_decref(tools);
        return err_set(err, -ENOENT,
                       "catalog entry %s has no reviewed tool list (its review kept no "
                       "fingerprint); start it and review what it lists",
                       id);
    }
    struct review rv;
    int r = review_tools(NULL, 0, text, strlen(text), &rv, err);
    free(text);
    json_t *findings = json_array();
    for (size_t i = 0; r == 0 && i < rv.n_findings; i++)
        json_array_append_new(findings, finding_json(&rv.findings[i]));
    const char *pinned = json_string_value(json_object_get(entry, "fingerprint"));
    /* catalog/tools.json and servers.json disagree: the build's fault, not the caller's */
    if (r == 0 && !(pinned && strncmp(rv.new_sha256, pinned, strlen(pinned)) == 0))
        r = err_set(err, -EIO, "catalog entry %s: its reviewed list is not its fingerprint %s", id,
                    pinned ? pinned : "(none)");
    if (r == 0) {
        json_t *list = json_pack("{s:s,s:O}", "fingerprint", rv.new_sha256, "tools", tools);
        *out = json_pack("{s:s,s:s,s:O,s:o,s:b,s:n,s:o,s:[]}", "name", id, "status", "catalog",
                         "approved", list, "current", list, "pending", false, "changes", "findings",
                         findings, "approvals");
    } else {
        json_decref(findings);
    }
    json_decref(tools);
    review_free(&rv);
    return r;
}

int mcp_review(struct sbx *sb, const char *name, json_t **out, err_t *err)
{
    struct mcp_server *ms = mcp_server_of(sb, name, err);
    return ms ? review_json(ms, out, err) : -ENOENT;
}

/* Who approved what, when: kept with the server (the newest APPROVALS_KEPT), an event. */
static void record_approval(struct mcp_server *ms, const char *by, const char *old_sha)
{
    char at[40];
    time_rfc3339(at, sizeof at, now_unix_ms());
    json_t *row = json_pack("{s:s,s:s,s:s?,s:s}", "by", by, "at", at, "old", old_sha, "new",
                            ms->pending.sha256);
    while (json_array_size(ms->approvals) >= APPROVALS_KEPT)
        json_array_remove(ms->approvals, 0);
    json_array_append_new(ms->approvals, row);
    log_info("sandbox %s: MCP server %s: tool list %.12s approved by %s (was %.12s)",
             sbx_id(ms->box->sb), ms->name, ms->pending.sha256, by, old_sha ? old_sha : "none");
    mcp_event(ms, "mcp.approved", json_deep_copy(row));
}

int mcp_approve(struct sbx *sb, const char *name, const char *fingerprint, const char *by,
                json_t **out, err_t *err)
{
    struct mcp_server *ms = mcp_server_of(sb, name, err);
    if (!ms) return -ENOENT;
    if (!ms->pending.canon)
        return err_set(err, -EEXIST,
                       "MCP server %s has no changed tool list to approve: it serves what was "
                       "approved",
                       name);
    if (strcmp(fingerprint, ms->pending.sha256) != 0)
        return err_set(err, -EEXIST,
                       "the tool list of %s is now %.12s, not the %.12s given: review it again "
                       "(GET .../mcp/%s/review), then approve what it shows",
                       name, ms->pending.sha256, fingerprint, name);
    const char *pinned =
        ms->entry ? json_string_value(json_object_get(ms->entry, "fingerprint")) : NULL;
    const char *old = ms->has_approved            ? ms->approved.sha256
                      : ms->config.fingerprint[0] ? ms->config.fingerprint
                                                  : pinned;
    record_approval(ms, by, old);
    mcp_toolset_clear(&ms->approved);
    ms->approved = ms->pending;
    memset(&ms->pending, 0, sizeof ms->pending);
    ms->has_approved = true;
    ms->config.fingerprint[0] = '\0'; /* an option given at start would outrank it */
    mcp_server_take_approval(ms);
    mcp_box_save(ms->box);
    return review_json(ms, out, err);
}
