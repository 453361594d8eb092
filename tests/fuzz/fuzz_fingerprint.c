/* Fuzz target: the fingerprint's JSON reader and canonical writer, and the review's scan,
 * on a tool list from an MCP server (untrusted: the server wrote it).
 *
 * The input is JSON text. Checks:
 *   - what jansson reads, the reader reads too (unless it is nested deeper than 512 or has
 *     an integer of more than 4300 digits, which Python refuses as well, or a NUL byte after
 *     the value, which jansson ignores and Python does not);
 *   - the canonical text is printable ASCII; read again and written again it is the same
 *     text (the canonical form is a fixed point);
 *   - a fingerprint read back from its own canonical text is the same fingerprint;
 *   - reviewing the list against itself works exactly when the fingerprint does, finds no
 *     change, and every text it gives is valid UTF-8 without control characters (it goes to
 *     a terminal); findings all say the text was in OLD too. */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_NAME "fuzz_fingerprint"
#include "fingerprint/fingerprint.h"
#include "fuzz.h"
#include "review/review.h"

/* Whether jansson's acceptance must imply ours: not too deep, no huge integers, no NUL
 * byte (jansson takes one after the value as the end of the text; Python does not). */
static bool in_common_ground(const uint8_t *d, size_t n)
{
    size_t open = 0, run = 0;
    if (memchr(d, 0, n)) return false;
    for (size_t i = 0; i < n; i++) {
        open += d[i] == '[' || d[i] == '{';
        run = d[i] >= '0' && d[i] <= '9' ? run + 1 : 0;
        if (open > FP_MAX_DEPTH || run > FP_MAX_INT_DIGITS) return false;
    }
    return true;
}

static void check_canonical(const struct fp_value *root)
{
    char *c1 = NULL, *c2 = NULL;
    size_t n1 = 0, n2 = 0;
    err_t err = {0};
    if (fp_canonical(root, &c1, &n1, &err)) fail("no canonical text: %s", err.msg);
    if (strlen(c1) != n1) fail("the canonical text has a NUL");
    for (size_t i = 0; i < n1; i++)
        if (c1[i] < 0x20 || c1[i] > 0x7e) fail("canonical byte %zu is 0x%02x", i, c1[i] & 0xff);
    struct fp_doc *again = NULL;
    if (fp_parse(c1, n1, &again, &err)) fail("the canonical text does not read: %s", err.msg);
    if (fp_canonical(fp_doc_root(again), &c2, &n2, &err)) fail("no second canonical text");
    if (n1 != n2 || memcmp(c1, c2, n1) != 0) fail("canonical is not a fixed point: %s", c1);
    fp_doc_free(again);
    free(c1);
    free(c2);
}

static void check_fingerprint(const struct fp_value *root, bool *ok)
{
    char *canon = NULL, hex[65], hex2[65];
    size_t len = 0, ntools = 0;
    err_t err = {0};
    *ok = fingerprint_doc(root, &canon, &len, hex, &ntools, &err) == 0;
    if (!*ok) {
        if (err.code >= 0 || !err.msg[0]) fail("refused without an error");
        return;
    }
    if (fingerprint_tools(canon, len, NULL, hex2, &err)) fail("canonical tools: %s", err.msg);
    if (strcmp(hex, hex2) != 0) fail("the fingerprint of the canonical text differs");
    if (!fingerprint_matches(hex, hex)) fail("a fingerprint does not match itself");
    free(canon);
}

static bool utf8_clean(const char *s)
{
    const unsigned char *u = (const unsigned char *)s;
    while (*u) {
        if (*u < 0x20 || *u == 0x7f) return false;
        if (*u < 0x80) {
            u++;
            continue;
        }
        size_t k = *u >= 0xF0 ? 4 : *u >= 0xE0 ? 3 : *u >= 0xC2 ? 2 : 0;
        if (!k || *u > 0xF4) return false;
        for (size_t i = 1; i < k; i++)
            if ((u[i] & 0xC0) != 0x80) return false;
        /* No surrogates and no C1 controls: those are shown escaped. */
        if (k == 3 && u[0] == 0xED && u[1] >= 0xA0) return false;
        if (k == 2 && u[0] == 0xC2 && u[1] < 0xA0) return false;
        u += k;
    }
    return true;
}

static void check_list(const struct review_list *l, const char *what)
{
    for (size_t i = 0; i < l->n; i++)
        if (!utf8_clean(l->v[i])) fail("%s %zu is not clean text", what, i);
}

static void check_review(const uint8_t *data, size_t size, bool fp_ok)
{
    struct review r;
    err_t err = {0};
    int rc = review_tools((const char *)data, size, (const char *)data, size, &r, &err);
    if ((rc == 0) != fp_ok)
        fail("review %s where the fingerprint %s", rc ? "fails" : "works",
             fp_ok ? "works" : "fails");
    if (rc == 0) {
        if (r.changed || strcmp(r.old_sha256, r.new_sha256) != 0) fail("a list changed itself");
        if (r.tools_added.n || r.tools_removed.n || r.params_added.n || r.n_descs)
            fail("a list differs from itself");
        for (size_t i = 0; i < r.n_findings; i++) {
            const struct review_finding *f = &r.findings[i];
            if (!utf8_clean(f->path) || !utf8_clean(f->excerpt))
                fail("finding %zu is not clean text", i);
            if (!f->in_old && f->kind != REVIEW_DUP_KEY && f->kind != REVIEW_DUP_TOOL)
                fail("finding %zu at %s is not in OLD, which is the same list", i, f->path);
        }
        check_list(&r.fields_changed, "a changed field");
    }
    review_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fp_doc *doc = NULL;
    err_t err = {0};
    int rc = fp_parse((const char *)data, size, &doc, &err);
    json_t *j = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    if (j && rc && in_common_ground(data, size)) fail("refused what jansson reads: %s", err.msg);
    json_decref(j);
    if (rc) {
        if (rc != -EINVAL && rc != -ENOMEM) fail("unexpected code %d", rc);
        if (!err.msg[0]) fail("refused without a message");
        check_review(data, size, false);
        return 0;
    }
    bool fp_ok;
    check_canonical(fp_doc_root(doc));
    check_fingerprint(fp_doc_root(doc), &fp_ok);
    fp_doc_free(doc);
    check_review(data, size, fp_ok);
    return 0;
}
