/* The canonical text (Python's json.dumps(v, sort_keys=True, separators=(",", ":"))), the
 * tools array of a tools/list answer sorted by name, and the SHA-256 over them. */
#include "fingerprint_impl.h"

#include <errno.h>
#include <math.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- output buffer ---- */

struct out {
    char *p;
    size_t len, cap;
    bool oom;
};

static void put(struct out *o, const char *s, size_t n)
{
    if (o->oom) return;
    if (o->cap - o->len <= n) {
        size_t cap = o->cap ? o->cap : 4096;
        while (cap - o->len <= n) {
            if (cap > SIZE_MAX / 2) {
                o->oom = true;
                return;
            }
            cap *= 2;
        }
        char *np = realloc(o->p, cap);
        if (!np) {
            o->oom = true;
            return;
        }
        o->p = np, o->cap = cap;
    }
    memcpy(o->p + o->len, s, n);
    o->len += n;
    o->p[o->len] = '\0';
}

static void put_str(struct out *o, const char *s)
{
    put(o, s, strlen(s));
}

/* ---- numbers ---- */

/* The decimal digits and exponent of a "%.*e" text: "-1.2500e+07" -> neg, "125", 7. */
static void split_e(const char *s, bool *neg, char *dig, int *nd, int *exp)
{
    *neg = *s == '-';
    if (*neg) s++;
    *nd = 0;
    for (; *s && *s != 'e'; s++)
        if (*s != '.') dig[(*nd)++] = *s;
    *exp = *s == 'e' ? atoi(s + 1) : 0;
    dig[*nd] = '\0';
}

/* dig (nd digits) plus or minus one in its last place, renormalized; false when it is 0. */
static bool step_last(char *dig, int *nd, int *exp, int delta)
{
    int i = *nd - 1;
    if (delta > 0) {
        while (i >= 0 && dig[i] == '9')
            dig[i--] = '0';
        if (i < 0) { /* 9.99 -> 10.00: one digit more at the front */
            memmove(dig + 1, dig, (size_t)*nd);
            dig[0] = '1';
            (*nd)++, (*exp)++;
        } else {
            dig[i]++;
        }
    } else {
        while (i >= 0 && dig[i] == '0')
            dig[i--] = '9';
        if (i < 0) return false;
        dig[i]--;
        if (dig[0] == '0') {
            if (*nd == 1) return false;
            memmove(dig, dig + 1, (size_t)--(*nd));
            (*exp)--;
        }
    }
    dig[*nd] = '\0';
    return true;
}

static bool round_trips(bool neg, const char *dig, int nd, int exp, double d)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%s%c.%se%d", neg ? "-" : "", dig[0], nd > 1 ? dig + 1 : "0", exp);
    return strtod(buf, NULL) == d;
}

/* Python's repr layout of digits dig times 10^exp (the first digit before the point):
 * exponent form below 1e-4 and from 1e16 on, at least two exponent digits, ".0" on whole
 * numbers. */
static void repr_layout(bool neg, const char *dig, int nd, int exp, char *out, size_t size)
{
    static const char zeros[] = "0000000000000000";
    const char *sign = neg ? "-" : "";
    if (exp < -4 || exp >= 16)
        snprintf(out, size, "%s%c%s%se%c%02d", sign, dig[0], nd > 1 ? "." : "",
                 nd > 1 ? dig + 1 : "", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    else if (exp < 0)
        snprintf(out, size, "%s0.%.*s%s", sign, -exp - 1, zeros, dig);
    else if (nd <= exp + 1)
        snprintf(out, size, "%s%s%.*s.0", sign, dig, exp + 1 - nd, zeros);
    else
        snprintf(out, size, "%s%.*s.%s", sign, exp + 1, dig, dig + exp + 1);
}

/* The shortest digits that read back as d, the nearest of them when several are as short:
 * what Python's repr (David Gay's dtoa, mode 0) gives. "%.17g" and trimming is not that
 * (0.1 would be 0.10000000000000001); the correctly rounded string at each length is the
 * nearest one, and at a power of two, where the gap below is half the gap above, the one
 * above it may read back when the nearest does not. snprintf and strtod need the C locale
 * (a decimal point, not a comma): no program of runtime calls setlocale. */
void fp_format_double(double d, char *out, size_t size)
{
    if (isnan(d)) {
        snprintf(out, size, "NaN");
        return;
    }
    if (isinf(d)) {
        snprintf(out, size, d > 0 ? "Infinity" : "-Infinity");
        return;
    }
    char buf[64], dig[40], alt[40];
    bool neg;
    int nd, exp;
    for (int prec = 0; prec < 17; prec++) {
        snprintf(buf, sizeof buf, "%.*e", prec, d);
        split_e(buf, &neg, dig, &nd, &exp);
        if (round_trips(neg, dig, nd, exp, d)) goto found;
        for (int delta = 1; delta >= -1; delta -= 2) {
            int and = nd, aexp = exp;
            memcpy(alt, dig, (size_t)nd + 1);
            if (step_last(alt, &and, &aexp, delta) && round_trips(neg, alt, and, aexp, d)) {
                memcpy(dig, alt, (size_t) and +1);
                nd = and, exp = aexp;
                goto found;
            }
        }
    }
    snprintf(buf, sizeof buf, "%.16e", d); /* 17 digits always read back */
    split_e(buf, &neg, dig, &nd, &exp);
found:
    while (nd > 1 && dig[nd - 1] == '0')
        dig[--nd] = '\0';
    repr_layout(neg, dig, nd, exp, out, size);
}

static bool is_float_text(const char *t)
{
    return strpbrk(t, ".eEIN") != NULL;
}

static void put_number(struct out *o, const struct fp_value *v)
{
    if (!is_float_text(v->text)) {
        /* Python's int: exact however long; -0 is 0. */
        put_str(o, strcmp(v->text, "-0") == 0 ? "0" : v->text);
        return;
    }
    char buf[64];
    fp_format_double(strtod(v->text, NULL), buf, sizeof buf);
    put_str(o, buf);
}

/* ---- strings: ensure_ascii ---- */

/* Decodes the code point at s (the reader's UTF-8, surrogates included). */
static uint32_t next_cp(const unsigned char *s, size_t n, size_t *len)
{
    unsigned char c = s[0];
    size_t k = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (k > n) k = 1; /* not from the reader: stay in bounds */
    uint32_t cp = k == 1 ? c : k == 2 ? c & 0x1Fu : k == 3 ? c & 0x0Fu : c & 0x07u;
    for (size_t i = 1; i < k; i++)
        cp = cp << 6 | (s[i] & 0x3Fu);
    *len = k;
    return cp;
}

static void put_escape(struct out *o, uint32_t cp)
{
    char buf[16];
    if (cp >= 0x10000) {
        cp -= 0x10000;
        snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
    } else {
        snprintf(buf, sizeof buf, "\\u%04x", cp);
    }
    put_str(o, buf);
}

static void put_string(struct out *o, const char *text, size_t n)
{
    const unsigned char *s = (const unsigned char *)text;
    put(o, "\"", 1);
    size_t i = 0;
    while (i < n) {
        /* Runs of plain ASCII go out in one piece. */
        size_t j = i;
        while (j < n && s[j] >= 0x20 && s[j] < 0x7F && s[j] != '"' && s[j] != '\\')
            j++;
        put(o, text + i, j - i);
        if ((i = j) >= n) break;
        size_t len;
        uint32_t cp = next_cp(s + i, n - i, &len);
        i += len;
        const char *short_form = cp == '"'    ? "\\\""
                                 : cp == '\\' ? "\\\\"
                                 : cp == '\n' ? "\\n"
                                 : cp == '\r' ? "\\r"
                                 : cp == '\t' ? "\\t"
                                 : cp == '\b' ? "\\b"
                                 : cp == '\f' ? "\\f"
                                              : NULL;
        if (short_form)
            put_str(o, short_form);
        else
            put_escape(o, cp);
    }
    put(o, "\"", 1);
}

/* ---- values ---- */

static void put_value(struct out *o, const struct fp_value *v)
{
    switch (v->type) {
    case FP_NULL:
        put_str(o, "null");
        break;
    case FP_FALSE:
        put_str(o, "false");
        break;
    case FP_TRUE:
        put_str(o, "true");
        break;
    case FP_NUMBER:
        put_number(o, v);
        break;
    case FP_STRING:
        put_string(o, v->text, v->len);
        break;
    case FP_ARRAY:
        put(o, "[", 1);
        for (size_t i = 0; i < v->len; i++) {
            if (i) put(o, ",", 1);
            put_value(o, v->items[i]);
        }
        put(o, "]", 1);
        break;
    case FP_OBJECT:
        /* The reader sorted the members and dropped earlier duplicates. */
        put(o, "{", 1);
        for (size_t i = 0; i < v->len; i++) {
            if (i) put(o, ",", 1);
            put_string(o, v->members[i].key, v->members[i].key_len);
            put(o, ":", 1);
            put_value(o, v->members[i].val);
        }
        put(o, "}", 1);
        break;
    }
}

static int finish(struct out *o, char **text, size_t *len, err_t *err)
{
    if (!o->oom && !o->p) put(o, "", 0);
    if (o->oom) {
        free(o->p);
        return err_set(err, -ENOMEM, "out of memory writing the canonical JSON");
    }
    *text = o->p;
    if (len) *len = o->len;
    return 0;
}

int fp_canonical(const struct fp_value *v, char **text, size_t *len, err_t *err)
{
    struct out o = {0};
    put_value(&o, v);
    return finish(&o, text, len, err);
}

/* ---- tools ---- */

static int find_tools(const struct fp_value *root, const struct fp_value **tools, bool paged,
                      err_t *err)
{
    const struct fp_value *list = root, *page = NULL;
    if (root->type == FP_OBJECT) {
        const struct fp_value *e = fp_get(root, "error");
        if (e && !fp_get(root, "result")) {
            const char *msg = fp_string(fp_get(e, "message"));
            return err_set(err, -EINVAL, "the input is a JSON-RPC error, not a tools list: %.200s",
                           msg ? msg : "(no message)");
        }
        page = fp_get(root, "result") ? fp_get(root, "result") : root;
        list = fp_get(page, "tools");
    }
    if (!list || list->type != FP_ARRAY)
        return err_set(err, -EINVAL,
                       "the input is not a tools list: expected the tools array, a tools/list "
                       "result {\"tools\": [...]} or a JSON-RPC response {\"result\": {\"tools\": "
                       "[...]}}");
    const struct fp_value *cursor = fp_get(page, "nextCursor");
    if (!paged && cursor && cursor->type != FP_NULL)
        return err_set(err, -EINVAL,
                       "the input is one page of a tools/list answer (nextCursor is set); the "
                       "fingerprint covers every page: join the tools arrays of all pages first");
    *tools = list;
    return 0;
}

static int name_cmp(const void *a, const void *b)
{
    const struct fp_value *x = fp_get(*(const struct fp_value *const *)a, "name");
    const struct fp_value *y = fp_get(*(const struct fp_value *const *)b, "name");
    return fp_text_cmp(x->text, x->len, y->text, y->len);
}

int fp_tools_sorted(const struct fp_value *root, const struct fp_value ***tools, size_t *n,
                    err_t *err)
{
    const struct fp_value *list = NULL;
    int r = find_tools(root, &list, false, err);
    if (r) return r;
    for (size_t i = 0; i < list->len; i++) {
        const struct fp_value *t = list->items[i];
        if (t->type != FP_OBJECT || !fp_string(fp_get(t, "name")))
            return err_set(err, -EINVAL,
                           "tool %zu of the list is not an object with a \"name\" string; tools "
                           "are sorted by name, so a list without names has no fingerprint",
                           i + 1);
    }
    const struct fp_value **v = malloc((list->len ? list->len : 1) * sizeof *v);
    if (!v) return err_set(err, -ENOMEM, "out of memory sorting the tools");
    if (list->len) memcpy(v, list->items, list->len * sizeof *v);
    if (fp_stable_sort(v, list->len, sizeof *v, name_cmp)) {
        free(v);
        return err_set(err, -ENOMEM, "out of memory sorting the tools");
    }
    *tools = v;
    *n = list->len;
    return 0;
}

int fp_tools_sorted_pages(const struct fp_value *const *pages, size_t npages,
                          const struct fp_value ***tools, size_t *n, err_t *err)
{
    size_t total = 0;
    for (size_t p = 0; p < npages; p++) {
        const struct fp_value *list = NULL;
        int r = find_tools(pages[p], &list, true, err);
        if (r) return r;
        total += list->len;
    }
    const struct fp_value **v = malloc((total ? total : 1) * sizeof *v);
    if (!v) return err_set(err, -ENOMEM, "out of memory sorting the tools");
    size_t k = 0;
    for (size_t p = 0; p < npages; p++) {
        const struct fp_value *list = NULL;
        find_tools(pages[p], &list, true, err);
        for (size_t i = 0; i < list->len; i++) {
            const struct fp_value *t = list->items[i];
            if (t->type != FP_OBJECT || !fp_string(fp_get(t, "name"))) {
                free(v);
                return err_set(err, -EINVAL,
                               "tool %zu of page %zu is not an object with a "
                               "\"name\" string",
                               i + 1, p + 1);
            }
            v[k++] = t;
        }
    }
    if (fp_stable_sort(v, total, sizeof *v, name_cmp)) {
        free(v);
        return err_set(err, -ENOMEM, "out of memory sorting the tools");
    }
    *tools = v;
    *n = total;
    return 0;
}

void fingerprint_sha256_hex(const void *data, size_t len, char hex[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (!EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL) || mdlen != 32) {
        /* Only a broken libcrypto fails here; an all-zero hash would match nothing. */
        memset(hex, 'x', 64);
        hex[64] = '\0';
        return;
    }
    hex_encode(hex, md, 32);
    hex[64] = '\0';
}

int fingerprint_doc(const struct fp_value *root, char **canonical, size_t *canonical_len,
                    char hex[65], size_t *ntools, err_t *err)
{
    const struct fp_value **tools;
    size_t n;
    int r = fp_tools_sorted(root, &tools, &n, err);
    if (r) return r;
    struct out o = {0};
    put(&o, "[", 1);
    for (size_t i = 0; i < n; i++) {
        if (i) put(&o, ",", 1);
        put_value(&o, tools[i]);
    }
    put(&o, "]", 1);
    free(tools);
    char *text = NULL;
    size_t len = 0;
    if ((r = finish(&o, &text, &len, err))) return r;
    fingerprint_sha256_hex(text, len, hex);
    if (ntools) *ntools = n;
    if (canonical_len) *canonical_len = len;
    if (canonical)
        *canonical = text;
    else
        free(text);
    return 0;
}

int fingerprint_tools(const char *json, size_t len, char **canonical, char hex[65], err_t *err)
{
    struct fp_doc *doc;
    int r = fp_parse(json, len, &doc, err);
    if (r) return r;
    r = fingerprint_doc(fp_doc_root(doc), canonical, NULL, hex, NULL, err);
    fp_doc_free(doc);
    return r;
}

bool fingerprint_matches(const char *given, const char *sha256_hex)
{
    size_t n = strlen(given);
    if (n < FINGERPRINT_SHORT || n > 64 || strspn(given, "0123456789abcdefABCDEF") != n)
        return false;
    return strncasecmp(given, sha256_hex, n) == 0;
}
