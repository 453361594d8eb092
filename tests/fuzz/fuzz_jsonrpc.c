/* Fuzz target: what a sandboxed MCP server writes to the gateway on its stdout
 * (untrusted: the server is the sandbox's code), through the pure parts of the
 * gateway's reading of it (src/mcp): the request-id table (mcp_backend_request,
 * mcp_pending_find, mcp_pending_clear: how an answer finds the request it answers), the
 * message check (mcp_valid_message) and the tools/list pages, parsed and fingerprinted
 * by mcp_toolset_from_pages() as backend.c's listed() does, then gated.
 *
 * Found and fixed: an empty tool list overflowed a heap buffer by one byte (gate.c);
 * its input is in the corpus.
 *
 * The input is the server's stdout: lines (split at '\n', as handle_lines does). The
 * gateway has sent `initialize` (id 1) when the session starts. A line that jansson reads
 * as an object is a message (others are log lines, skipped as handle_line skips them);
 * one with an id and no method is a response; a response whose integer id is pending
 * answers that request, which is cleared, and its line is kept as a tools/list page (the
 * raw line, as on_page keeps it; the answer to initialize, id 1, is not a page); each answer makes
 * the gateway send one more request (the next page). Checks:
 *   - the id table: mcp_pending_find(id) finds a slot exactly when id is one the gateway
 *     sent and is still unanswered (never for 0, negatives, ids that share its slot, or
 *     an id answered already), and that slot has that id; the count of pending requests
 *     is right;
 *   - mcp_valid_message agrees with a model of a JSON-RPC 2.0 message as MCP allows it
 *     (jsonrpc "2.0"; string or integer id; a string method, or an id and exactly one of
 *     result and error);
 *   - the pages: mcp_toolset_from_pages() works exactly when every page is a tools
 *     array, a result {"tools": [...]} or a response {"result": {"tools": [...]}} (not an
 *     error) of objects with a string name (model here); then its fingerprint is the one
 *     of the same tools given whole (one array, fingerprint_tools); the list's canonical
 *     text is "[" + the tools' canonical texts, sorted by name, joined by "," + "]", its
 *     sha256 is the fingerprint, and read again (mcp_toolset_from_canon, what an approval
 *     stored in the database goes through) it gives the same fingerprint, tools and
 *     texts; the pages in reverse order give the same fingerprint when the names are
 *     distinct; a failure has a message;
 *   - no crash, no leak (LeakSanitizer), on any bytes. */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_NAME "fuzz_jsonrpc"
#include "fingerprint/fingerprint.h"
#include "fuzz.h"
#include "mcp/mcp_impl.h"

#define MAX_LINES 64
#define MAX_PAGES 100 /* backend.c's own limit */

/* The catalog's texts are assembled from src/catalog/data.S, which the fuzz archive (C
 * only) lacks; the mcp objects this target pulls in reference it, and never read it here. */
const char catalog_json_text[] = "{}";
const char catalog_tools_text[] = "{}";

static struct mcp_backend g_be;

/* ---- the request table ---------------------------------------------------- */

static int64_t g_out[MCP_PENDING_SLOTS]; /* ids sent and unanswered (model) */
static size_t g_nout;

static bool model_pending(int64_t id)
{
    for (size_t i = 0; i < g_nout; i++)
        if (g_out[i] == id) return true;
    return false;
}

static void send_request(void)
{
    json_t *msg = json_pack("{s:s,s:s,s:{}}", "jsonrpc", "2.0", "method", "tools/list", "params");
    struct mcp_pending *p;
    int r = mcp_backend_request(&g_be, msg, &p);
    if (r == 0) {
        int64_t id = json_integer_value(json_object_get(msg, "id"));
        if (id <= 0 || p->id != id)
            fail("request id %lld, slot id %lld", (long long)id, (long long)p->id);
        if (model_pending(id)) fail("id %lld given twice", (long long)id);
        if (mcp_pending_find(&g_be, id) != p) fail("a fresh request is not found");
        g_out[g_nout++] = id;
    } else if (r != -EAGAIN || g_nout < MCP_PENDING_SLOTS / 2) {
        fail("mcp_backend_request: %d with %zu pending", r, g_nout);
    }
    if (g_be.n_pending != g_nout) fail("%zu pending, model %zu", g_be.n_pending, g_nout);
    json_decref(msg);
}

static void check_ids(int64_t id)
{
    /* Ids of the same slot, and the neighbours, find nothing unless pending. */
    uint64_t u = (uint64_t)id; /* wrapping, as the slot index does */
    const int64_t probes[] = {id, (int64_t)(u + MCP_PENDING_SLOTS),
                              (int64_t)(u - MCP_PENDING_SLOTS), (int64_t)(0 - u), 0};
    for (size_t i = 0; i < sizeof probes / sizeof *probes; i++) {
        struct mcp_pending *p = mcp_pending_find(&g_be, probes[i]);
        if ((p != NULL) != model_pending(probes[i]))
            fail("id %lld %s", (long long)probes[i],
                 p ? "found, not pending" : "pending, not found");
        if (p && p->id != probes[i])
            fail("id %lld finds slot of %lld", (long long)probes[i], (long long)p->id);
    }
}

static void answered(int64_t id)
{
    struct mcp_pending *p = mcp_pending_find(&g_be, id);
    mcp_pending_clear(&g_be, p);
    for (size_t i = 0; i < g_nout; i++)
        if (g_out[i] == id) g_out[i] = g_out[--g_nout];
    if (mcp_pending_find(&g_be, id)) fail("id %lld still found once answered", (long long)id);
    if (g_be.n_pending != g_nout) fail("%zu pending, model %zu", g_be.n_pending, g_nout);
}

/* ---- messages --------------------------------------------------------------- */

static bool model_valid(json_t *m)
{
    if (!json_is_object(m)) return false;
    json_t *v = json_object_get(m, "jsonrpc"), *id = json_object_get(m, "id"),
           *method = json_object_get(m, "method");
    if (!json_is_string(v) || strcmp(json_string_value(v), "2.0") != 0) return false;
    if (id && !json_is_string(id) && !json_is_integer(id)) return false;
    if (method) return json_is_string(method);
    bool has_result = json_object_get(m, "result") != NULL;
    bool has_error = json_object_get(m, "error") != NULL;
    return id && has_result != has_error;
}

/* ---- pages ------------------------------------------------------------------ */

/* The tools array of a page (model of what a page may be), or NULL. */
static const struct fp_value *model_tools(const struct fp_value *root)
{
    const struct fp_value *list = root;
    if (root->type == FP_OBJECT) {
        const struct fp_value *res = fp_get(root, "result");
        if (fp_get(root, "error") && !res) return NULL;
        list = fp_get(res ? res : root, "tools");
    }
    if (!list || list->type != FP_ARRAY) return NULL;
    for (size_t i = 0; i < list->len; i++)
        if (list->items[i]->type != FP_OBJECT || !fp_string(fp_get(list->items[i], "name")))
            return NULL;
    return list;
}

struct text {
    char *s;
    size_t n, cap;
};

static void add(struct text *t, const char *s, size_t n)
{
    if (t->n + n + 1 > t->cap) {
        t->cap = (t->n + n + 1) * 2;
        t->s = realloc(t->s, t->cap);
        if (!t->s) abort();
    }
    memcpy(t->s + t->n, s, n);
    t->n += n;
    t->s[t->n] = '\0';
}

static void same_set(const struct mcp_toolset *a, const struct mcp_toolset *b, const char *what)
{
    if (strcmp(a->sha256, b->sha256) != 0) fail("%s: another fingerprint", what);
    if (a->n != b->n) fail("%s: %zu tools, not %zu", what, b->n, a->n);
    if (strcmp(a->canon, b->canon) != 0) fail("%s: another canonical text", what);
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->v[i].name, b->v[i].name) != 0 || strcmp(a->v[i].canon, b->v[i].canon) != 0)
            fail("%s: tool %zu differs", what, i);
}

static void check_pages(char **pages, size_t *lens, size_t n)
{
    /* The model: every page a tools list; the tools given whole. */
    struct fp_doc *docs[MAX_PAGES] = {0};
    bool model_ok = true, distinct = true;
    size_t ntools = 0;
    struct text whole = {0};
    add(&whole, "[", 1);
    for (size_t i = 0; i < n; i++) {
        err_t e = {0};
        const struct fp_value *list = NULL;
        if (fp_parse(pages[i], lens[i], &docs[i], &e) == 0)
            list = model_tools(fp_doc_root(docs[i]));
        if (!list) {
            model_ok = false;
            continue;
        }
        for (size_t k = 0; k < list->len; k++) {
            char *c = NULL;
            size_t cl = 0;
            if (fp_canonical(list->items[k], &c, &cl, &e)) fail("no canonical text: %s", e.msg);
            if (ntools++) add(&whole, ",", 1);
            add(&whole, c, cl);
            free(c);
        }
    }
    add(&whole, "]", 1);

    struct mcp_toolset t = {0};
    err_t err = {0};
    /* Known bug: from_sorted() (gate.c) allocates one byte too few for an empty list
     * ("[]" and its NUL in 2 bytes): a heap overflow by one byte. */
    int r = mcp_toolset_from_pages(pages, lens, n, &t, &err);
    if ((r == 0) != model_ok)
        fail("mcp_toolset_from_pages %s %zu pages the model %s (%s)", r ? "refused" : "took", n,
             model_ok ? "takes" : "refuses", err.msg);
    if (r < 0) {
        if (!err.msg[0]) fail("refused without a message");
        if (t.v || t.canon || t.n) fail("a refusal left a tool set");
        goto out;
    }
    if (t.n != ntools) fail("%zu tools, the pages hold %zu", t.n, ntools);

    /* The canonical text: the tools' own, sorted, joined; hashed. */
    struct text joined = {0};
    add(&joined, "[", 1);
    for (size_t i = 0; i < t.n; i++) {
        if (i) add(&joined, ",", 1);
        add(&joined, t.v[i].canon, strlen(t.v[i].canon));
        if (i && strcmp(t.v[i - 1].name, t.v[i].name) >= 0 &&
            fp_text_cmp(t.v[i - 1].name, strlen(t.v[i - 1].name), t.v[i].name,
                        strlen(t.v[i].name)) > 0)
            fail("tools %zu and %zu are not sorted by name", i - 1, i);
        if (i && strcmp(t.v[i - 1].name, t.v[i].name) == 0) distinct = false;
    }
    add(&joined, "]", 1);
    if (strcmp(joined.s, t.canon) != 0) fail("the list's text is not its tools' texts joined");
    free(joined.s);
    char hex[65];
    fingerprint_sha256_hex(t.canon, strlen(t.canon), hex);
    if (strcmp(hex, t.sha256) != 0) fail("the fingerprint is not the sha256 of the text");

    /* The same tools given whole. */
    char whole_hex[65];
    char *wc = NULL;
    if (fingerprint_tools(whole.s, whole.n, &wc, whole_hex, &err))
        fail("the tools given whole have no fingerprint: %s", err.msg);
    if (strcmp(whole_hex, t.sha256) != 0)
        fail("%zu pages give %.16s, the tools given whole %.16s", n, t.sha256, whole_hex);
    if (strcmp(wc, t.canon) != 0) fail("the whole list's canonical text differs");
    free(wc);
    struct mcp_toolset w = {0};
    char *one = whole.s;
    if (mcp_toolset_from_pages(&one, &whole.n, 1, &w, &err)) fail("whole: %s", err.msg);
    same_set(&t, &w, "the tools given whole");
    mcp_toolset_clear(&w);

    /* Read again from its own canonical text (a stored approval). */
    struct mcp_toolset again = {0};
    if (mcp_toolset_from_canon(t.canon, &again, &err))
        fail("the canonical text does not read again: %s", err.msg);
    same_set(&t, &again, "the canonical text read again");
    mcp_toolset_clear(&again);

    /* Page order does not matter when no two tools share a name. */
    if (distinct && n > 1) {
        char *rp[MAX_PAGES];
        size_t rl[MAX_PAGES];
        for (size_t i = 0; i < n; i++) {
            rp[i] = pages[n - 1 - i];
            rl[i] = lens[n - 1 - i];
        }
        struct mcp_toolset rev = {0};
        if (mcp_toolset_from_pages(rp, rl, n, &rev, &err)) fail("reversed: %s", err.msg);
        same_set(&t, &rev, "the pages reversed");
        mcp_toolset_clear(&rev);
    }
out:
    mcp_toolset_clear(&t);
    if (t.v || t.canon || t.n) fail("mcp_toolset_clear left something");
    free(whole.s);
    for (size_t i = 0; i < n; i++)
        fp_doc_free(docs[i]);
}

/* ---- one session ------------------------------------------------------------ */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A fresh table: the gateway has sent initialize (id 1). */
    memset(&g_be, 0, sizeof g_be);
    g_be.next_id = 1;
    g_nout = 0;
    send_request();

    char *pages[MAX_PAGES];
    size_t lens[MAX_PAGES], npages = 0;
    const char *p = (const char *)data, *end = p + size;
    for (int nl = 0; p < end && nl < MAX_LINES; nl++) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        size_t len = eol ? (size_t)(eol - p) : (size_t)(end - p);
        const char *line = p;
        p += len + (eol != NULL);
        json_error_t jerr;
        json_t *msg = json_loadb(line, len, 0, &jerr);
        if (!json_is_object(msg)) {
            json_decref(msg);
            continue;
        }
        if (mcp_valid_message(msg) != model_valid(msg))
            fail("mcp_valid_message says %d on line %d", mcp_valid_message(msg), nl);
        json_t *id = json_object_get(msg, "id");
        bool response = id && !json_object_get(msg, "method");
        if (response && json_is_integer(id)) {
            int64_t v = json_integer_value(id);
            check_ids(v);
            if (mcp_pending_find(&g_be, v)) {
                answered(v);
                if (v != 1 && npages < MAX_PAGES) { /* 1 is initialize's answer */
                    pages[npages] = strndup(line, len);
                    lens[npages++] = len;
                }
                send_request(); /* the next page */
            }
        }
        json_decref(msg);
    }
    if (npages) check_pages(pages, lens, npages);
    for (size_t i = 0; i < npages; i++)
        free(pages[i]);
    for (size_t i = 0; i < MCP_PENDING_SLOTS; i++)
        if (g_be.pend[i].id) mcp_pending_clear(&g_be, &g_be.pend[i]);
    if (g_be.n_pending) fail("%zu pending after clearing all", g_be.n_pending);
    return 0;
}
