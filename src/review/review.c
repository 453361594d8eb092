/* The review of a tool list against the one reviewed before: both fingerprints, tools and
 * parameters added or removed, changed descriptions and fields, then the scan of every
 * string of the new list (scan.c). */
#include "review_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A parsed list: the document and its tools sorted by name. */
struct side {
    struct fp_doc *doc;
    const struct fp_value **tools;
    size_t n;
};

static int load(const char *json, size_t len, const char *which, struct side *s, char hex[65],
                err_t *err)
{
    int r = fp_parse(json, len, &s->doc, err);
    if (!r) r = fingerprint_doc(fp_doc_root(s->doc), NULL, NULL, hex, NULL, err);
    if (!r) r = fp_tools_sorted(fp_doc_root(s->doc), &s->tools, &s->n, err);
    if (r) err_wrap(err, "%s", which);
    return r;
}

static const struct fp_value *tool_name(const struct fp_value *tool)
{
    return fp_get(tool, "name"); /* fp_tools_sorted checked it is a string */
}

static void name_put(struct sbuf *b, const struct fp_value *tool)
{
    const struct fp_value *n = tool_name(tool);
    path_put(b, n->text, n->len, true);
}

static int add_tool(struct review_list *l, const struct fp_value *tool)
{
    struct sbuf b = {0};
    name_put(&b, tool);
    int r = list_add(l, &b);
    free(b.p);
    return r;
}

/* ---- parameters ---- */

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The parameter paths of a schema: properties, nested ones, those of array items and of
 * anyOf/oneOf/allOf variants. */
static int collect_params(const struct fp_value *schema, struct sbuf *path, struct review_list *out,
                          int depth)
{
    static const char *const variants[] = {"anyOf", "oneOf", "allOf"};
    if (!schema || schema->type != FP_OBJECT || depth > FP_MAX_DEPTH) return 0;
    size_t mark = path->len;
    int r = 0;
    const struct fp_value *props = fp_get(schema, "properties");
    for (size_t i = 0; !r && props && props->type == FP_OBJECT && i < props->len; i++) {
        const struct fp_member *m = &props->members[i];
        path_put(path, m->key, m->key_len, false);
        r = list_add(out, path);
        if (!r) r = collect_params(m->val, path, out, depth + 1);
        sb_cut(path, mark);
    }
    const struct fp_value *items = fp_get(schema, "items");
    if (!r && items && items->type == FP_OBJECT) {
        sb_puts(path, "[]");
        r = collect_params(items, path, out, depth + 1);
        sb_cut(path, mark);
    }
    for (size_t v = 0; !r && v < ARRAY_LEN(variants); v++) {
        const struct fp_value *list = fp_get(schema, variants[v]);
        for (size_t i = 0; !r && list && list->type == FP_ARRAY && i < list->len; i++)
            r = collect_params(list->items[i], path, out, depth + 1);
    }
    return r;
}

static void list_free(struct review_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    *l = (struct review_list){0};
}

/* Sorted, each path once. */
static int params_of(const struct fp_value *tool, struct review_list *out)
{
    struct sbuf path = {0};
    name_put(&path, tool);
    int r = collect_params(fp_get(tool, "inputSchema"), &path, out, 0);
    free(path.p);
    if (r) return r;
    if (out->n) qsort(out->v, out->n, sizeof *out->v, str_cmp);
    size_t k = 0;
    for (size_t i = 0; i < out->n; i++) {
        if (k && strcmp(out->v[k - 1], out->v[i]) == 0)
            free(out->v[i]);
        else
            out->v[k++] = out->v[i];
    }
    out->n = k;
    return 0;
}

static int take_str(struct review_list *to, char *s)
{
    char **nv = realloc(to->v, (to->n + 1) * sizeof *nv);
    if (!nv) return -ENOMEM;
    to->v = nv;
    to->v[to->n++] = s;
    return 0;
}

/* Paths in only one of a (old) and b (new), moved into the review's lists. */
static int diff_params(struct review *r, struct review_list *a, struct review_list *b)
{
    size_t i = 0, j = 0;
    int rc = 0;
    while (!rc && (i < a->n || j < b->n)) {
        int c = i >= a->n ? 1 : j >= b->n ? -1 : strcmp(a->v[i], b->v[j]);
        if (c < 0) {
            if (!(rc = take_str(&r->params_removed, a->v[i]))) a->v[i] = NULL;
            i++;
        } else if (c > 0) {
            if (!(rc = take_str(&r->params_added, b->v[j]))) b->v[j] = NULL;
            j++;
        } else {
            i++, j++;
        }
    }
    return rc;
}

/* ---- fields ---- */

static bool same_value(const struct fp_value *a, const struct fp_value *b, int *rc)
{
    char *ca = NULL, *cb = NULL;
    size_t la = 0, lb = 0;
    if (fp_canonical(a, &ca, &la, NULL) || fp_canonical(b, &cb, &lb, NULL)) *rc = -ENOMEM;
    bool same = ca && cb && la == lb && memcmp(ca, cb, la) == 0;
    free(ca);
    free(cb);
    return same;
}

static char *desc_text(const struct fp_value *v)
{
    if (!v) return NULL;
    struct sbuf b = {0};
    if (v->type == FP_STRING) {
        display_put(&b, v->text, v->len, false);
    } else { /* not a string: show its JSON */
        char *c = NULL;
        size_t n = 0;
        if (!fp_canonical(v, &c, &n, NULL)) display_put(&b, c, n, false);
        free(c);
    }
    return sb_take(&b);
}

static int add_desc(struct review *r, const struct fp_value *tool, const struct fp_value *a,
                    const struct fp_value *b)
{
    struct sbuf name = {0};
    name_put(&name, tool);
    struct review_desc d = {sb_take(&name), desc_text(a), desc_text(b)};
    struct review_desc *nd = NULL;
    if (d.tool && (!a || d.old_text) && (!b || d.new_text))
        nd = realloc(r->descs, (r->n_descs + 1) * sizeof *nd);
    if (!nd) {
        free(d.tool), free(d.old_text), free(d.new_text);
        return -ENOMEM;
    }
    r->descs = nd;
    r->descs[r->n_descs++] = d;
    return 0;
}

/* One changed top-level field of a tool in both lists. */
static int field_changed(struct review *r, const struct fp_value *tool, const struct fp_member *a,
                         const struct fp_member *b)
{
    const struct fp_member *m = a ? a : b;
    if (m->key_len == 11 && memcmp(m->key, "description", 11) == 0)
        return add_desc(r, tool, a ? a->val : NULL, b ? b->val : NULL);
    struct sbuf path = {0};
    name_put(&path, tool);
    path_put(&path, m->key, m->key_len, false);
    int rc = list_add(&r->fields_changed, &path);
    free(path.p);
    return rc;
}

static int compare_fields(struct review *r, const struct fp_value *a, const struct fp_value *b)
{
    size_t i = 0, j = 0;
    int rc = 0;
    while (!rc && (i < a->len || j < b->len)) {
        const struct fp_member *x = i < a->len ? &a->members[i] : NULL;
        const struct fp_member *y = j < b->len ? &b->members[j] : NULL;
        int c = !x ? 1 : !y ? -1 : fp_text_cmp(x->key, x->key_len, y->key, y->key_len);
        if (c < 0)
            rc = field_changed(r, b, x, NULL), i++;
        else if (c > 0)
            rc = field_changed(r, b, NULL, y), j++;
        else {
            if (!same_value(x->val, y->val, &rc) && !rc) rc = field_changed(r, b, x, y);
            i++, j++;
        }
    }
    return rc;
}

static int compare_tool(struct review *r, const struct fp_value *a, const struct fp_value *b)
{
    struct review_list pa = {0}, pb = {0};
    int rc = params_of(a, &pa);
    if (!rc) rc = params_of(b, &pb);
    if (!rc) rc = diff_params(r, &pa, &pb);
    list_free(&pa);
    list_free(&pb);
    if (!rc) rc = compare_fields(r, a, b);
    return rc;
}

/* Both lists are sorted by name; equal names pair up in order. */
static int compare(struct review *r, const struct side *o, const struct side *n)
{
    size_t i = 0, j = 0;
    int rc = 0;
    while (!rc && (i < o->n || j < n->n)) {
        int c;
        if (i >= o->n || j >= n->n) {
            c = i >= o->n ? 1 : -1;
        } else {
            const struct fp_value *x = tool_name(o->tools[i]), *y = tool_name(n->tools[j]);
            c = fp_text_cmp(x->text, x->len, y->text, y->len);
        }
        if (c < 0)
            rc = add_tool(&r->tools_removed, o->tools[i++]);
        else if (c > 0)
            rc = add_tool(&r->tools_added, n->tools[j++]);
        else
            rc = compare_tool(r, o->tools[i++], n->tools[j++]);
    }
    return rc;
}

int review_tools(const char *old_json, size_t old_len, const char *new_json, size_t new_len,
                 struct review *r, err_t *err)
{
    struct side o = {0}, n = {0};
    *r = (struct review){.has_old = old_json != NULL};
    int rc = load(new_json, new_len, "the new list", &n, r->new_sha256, err);
    if (!rc && old_json) rc = load(old_json, old_len, "the old list", &o, r->old_sha256, err);
    if (rc) goto out;
    r->new_tools = n.n;
    r->old_tools = o.n;
    if (old_json) {
        r->changed = strcmp(r->old_sha256, r->new_sha256) != 0;
        if (r->changed) rc = compare(r, &o, &n);
    }
    if (!rc) rc = review_scan(r, n.tools, n.n, o.tools, o.n);
    if (rc) rc = err_set(err, rc, "out of memory reviewing the tools");
out:
    free(o.tools);
    free(n.tools);
    fp_doc_free(o.doc);
    fp_doc_free(n.doc);
    return rc;
}

bool review_clean(const struct review *r)
{
    return !r->changed && r->n_findings == 0;
}

void review_free(struct review *r)
{
    list_free(&r->tools_added);
    list_free(&r->tools_removed);
    list_free(&r->params_added);
    list_free(&r->params_removed);
    list_free(&r->fields_changed);
    for (size_t i = 0; i < r->n_descs; i++) {
        free(r->descs[i].tool);
        free(r->descs[i].old_text);
        free(r->descs[i].new_text);
    }
    free(r->descs);
    for (size_t i = 0; i < r->n_findings; i++) {
        free(r->findings[i].path);
        free(r->findings[i].excerpt);
    }
    free(r->findings);
    *r = (struct review){0};
}
