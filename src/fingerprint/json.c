/* The JSON reader of the fingerprint. It accepts what Python's json.loads accepts (the
 * fingerprint is defined by Python) and keeps what jansson would lose: numbers as their
 * source text, lone surrogate escapes, NaN and Infinity. Values live in an arena that is
 * freed at once; the children of open containers wait on two stacks of the parser. */
#include "fingerprint_impl.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- arena ---- */

enum { CHUNK = 64 * 1024 };

struct chunk {
    struct chunk *next;
    size_t used, cap;
    max_align_t data[];
};

struct fp_doc {
    struct chunk *chunks;
    struct fp_value *root;
};

static void *arena_alloc(struct fp_doc *d, size_t n)
{
    const size_t align = _Alignof(max_align_t);
    if (n > SIZE_MAX / 2) return NULL;
    n = (n + align - 1) & ~(align - 1);
    struct chunk *c = d->chunks;
    if (c && c->cap - c->used >= n) {
        void *p = (unsigned char *)c->data + c->used;
        c->used += n;
        return p;
    }
    size_t cap = n > CHUNK ? n : CHUNK;
    struct chunk *nc = malloc(sizeof *nc + cap);
    if (!nc) return NULL;
    nc->used = n;
    nc->cap = cap;
    if (c && n > CHUNK / 4) {
        /* A big block gets its own chunk behind the current one, whose room stays in use. */
        nc->next = c->next;
        c->next = nc;
    } else {
        nc->next = c;
        d->chunks = nc;
    }
    return nc->data;
}

void fp_doc_free(struct fp_doc *doc)
{
    if (!doc) return;
    for (struct chunk *c = doc->chunks, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(doc);
}

const struct fp_value *fp_doc_root(const struct fp_doc *doc)
{
    return doc ? doc->root : NULL;
}

/* ---- helpers shared with the other files ---- */

int fp_text_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    if (c) return c;
    return alen < blen ? -1 : alen > blen;
}

const char *fp_string(const struct fp_value *v)
{
    return v && v->type == FP_STRING ? v->text : NULL;
}

const struct fp_value *fp_get(const struct fp_value *obj, const char *key)
{
    if (!obj || obj->type != FP_OBJECT) return NULL;
    size_t klen = strlen(key), lo = 0, hi = obj->len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct fp_member *m = &obj->members[mid];
        int c = fp_text_cmp(m->key, m->key_len, key, klen);
        if (c == 0) return m->val;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

int fp_stable_sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
    if (n < 2) return 0;
    if (n > SIZE_MAX / size) return -ENOMEM;
    unsigned char *a = base, *tmp = malloc(n * size);
    if (!tmp) return -ENOMEM;
    for (size_t width = 1; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n;
            size_t hi = mid + width < n ? mid + width : n;
            size_t i = lo, j = mid, k = lo;
            /* Ties take the left (earlier) one: that is what makes it stable. */
            while (i < mid && j < hi) {
                if (cmp(a + j * size, a + i * size) < 0)
                    memcpy(tmp + k++ * size, a + j++ * size, size);
                else
                    memcpy(tmp + k++ * size, a + i++ * size, size);
            }
            memcpy(tmp + k * size, a + i * size, (mid - i) * size);
            k += mid - i;
            memcpy(tmp + k * size, a + j * size, (hi - j) * size);
        }
        memcpy(a, tmp, n * size);
    }
    free(tmp);
    return 0;
}

/* ---- the parser ---- */

struct parser {
    const unsigned char *s; /* the text, after a BOM */
    size_t pos, end;
    struct fp_doc *doc;
    err_t *err;
    int depth;
    struct fp_value **vals; /* items of the open arrays */
    size_t nvals, capvals;
    struct fp_member *mems; /* members of the open objects */
    size_t nmems, capmems;
};

static int bad(struct parser *ps, size_t at, const char *what)
{
    int line = 1, col = 1;
    for (size_t i = 0; i < at && i < ps->end; i++) {
        if (ps->s[i] == '\n')
            line++, col = 1;
        else if ((ps->s[i] & 0xC0) != 0x80)
            col++;
    }
    return err_set(ps->err, -EINVAL, "the JSON is not valid at line %d, column %d: %s", line, col,
                   what);
}

static int oom(struct parser *ps)
{
    return err_set(ps->err, -ENOMEM, "out of memory reading the JSON");
}

static void skip_ws(struct parser *ps)
{
    while (ps->pos < ps->end) {
        unsigned char c = ps->s[ps->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        ps->pos++;
    }
}

static bool at_word(const struct parser *ps, const char *w)
{
    size_t n = strlen(w);
    return ps->end - ps->pos >= n && memcmp(ps->s + ps->pos, w, n) == 0;
}

static struct fp_value *new_value(struct parser *ps, enum fp_type type)
{
    struct fp_value *v = arena_alloc(ps->doc, sizeof *v);
    if (v) *v = (struct fp_value){.type = type};
    return v;
}

/* Length of the valid UTF-8 sequence at s[0..n), or 0 (overlong forms, surrogates and
 * values above U+10FFFF are not valid). */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2;
    else if (c >= 0xE0 && c <= 0xEF)
        len = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4)
        len = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else
        return 0;
    if (n < len || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    return len;
}

/* Writes code point cp (a surrogate too) as UTF-8; returns the bytes written. */
static size_t put_utf8(char *out, uint32_t cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Whether s starts with four hex digits; their value goes to *out. */
static bool hex4(const unsigned char *s, uint32_t *out)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = s[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return false;
        v = v << 4 | (uint32_t)d;
    }
    *out = v;
    return true;
}

/* A \uXXXX escape at s[q] (q + 6 <= e); a high surrogate followed by a low one makes one
 * code point, as in Python. Advances *q. */
static int unicode_escape(struct parser *ps, size_t *q, size_t e, uint32_t *cp)
{
    const unsigned char *s = ps->s;
    if (e - *q < 6 || !hex4(s + *q + 2, cp)) return bad(ps, *q, "\\u needs four hex digits");
    *q += 6;
    uint32_t lo;
    if (*cp >= 0xD800 && *cp <= 0xDBFF && e - *q >= 6 && s[*q] == '\\' && s[*q + 1] == 'u' &&
        hex4(s + *q + 2, &lo) && lo >= 0xDC00 && lo <= 0xDFFF) {
        *cp = 0x10000 + ((*cp - 0xD800) << 10) + (lo - 0xDC00);
        *q += 6;
    }
    return 0;
}

static int escape(struct parser *ps, size_t *q, size_t e, char *out, size_t *n)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    unsigned char c = ps->s[*q + 1];
    if (c == 'u') {
        uint32_t cp;
        int r = unicode_escape(ps, q, e, &cp);
        if (r) return r;
        *n += put_utf8(out + *n, cp);
        return 0;
    }
    const char *f = c ? strchr(from, c) : NULL;
    if (!f)
        return bad(ps, *q,
                   "a backslash in a string must start an escape (\\n, \\\", \\u00e9, ...)");
    out[(*n)++] = to[f - from];
    *q += 2;
    return 0;
}

/* The string at ps->pos (on its opening quote) into the arena. */
static int parse_string(struct parser *ps, const char **text, size_t *len)
{
    const unsigned char *s = ps->s;
    size_t q = ps->pos + 1, e = q;
    while (e < ps->end && s[e] != '"')
        e += s[e] == '\\' ? 2 : 1;
    if (e >= ps->end) return bad(ps, ps->pos, "a string is not closed with '\"'");
    /* Decoding never makes text longer: an escape of 6 bytes gives at most 3 or, paired, 4. */
    char *out = arena_alloc(ps->doc, e - q + 1);
    if (!out) return oom(ps);
    size_t n = 0;
    while (q < e) {
        unsigned char c = s[q];
        if (c == '\\') {
            int r = escape(ps, &q, e, out, &n);
            if (r) return r;
        } else if (c < 0x20) {
            return bad(ps, q, "a control character in a string must be escaped (\\n, \\u0001)");
        } else if (c < 0x80) {
            out[n++] = (char)c;
            q++;
        } else {
            size_t k = utf8_seq(s + q, e - q);
            if (!k) return bad(ps, q, "the text is not valid UTF-8");
            memcpy(out + n, s + q, k);
            n += k, q += k;
        }
    }
    out[n] = '\0';
    *text = out;
    *len = n;
    ps->pos = e + 1;
    return 0;
}

static bool is_digit(const struct parser *ps, size_t i)
{
    return i < ps->end && ps->s[i] >= '0' && ps->s[i] <= '9';
}

static size_t skip_digits(const struct parser *ps, size_t i)
{
    while (is_digit(ps, i))
        i++;
    return i;
}

static int number_text(struct parser *ps, size_t start, size_t end, struct fp_value **out)
{
    struct fp_value *v = new_value(ps, FP_NUMBER);
    char *t = arena_alloc(ps->doc, end - start + 1);
    if (!v || !t) return oom(ps);
    memcpy(t, ps->s + start, end - start);
    t[end - start] = '\0';
    v->text = t;
    v->len = end - start;
    ps->pos = end;
    *out = v;
    return 0;
}

/* Python's grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?, and -Infinity. */
static int parse_number(struct parser *ps, struct fp_value **out)
{
    size_t start = ps->pos, i = start;
    if (ps->s[i] == '-') i++;
    if (i < ps->end && ps->s[i] == 'I') {
        ps->pos = i;
        if (!at_word(ps, "Infinity")) return bad(ps, start, "expected a value");
        return number_text(ps, start, i + 8, out);
    }
    if (!is_digit(ps, i)) return bad(ps, i, "a number needs a digit after '-'");
    size_t digits = i;
    i = ps->s[i] == '0' ? i + 1 : skip_digits(ps, i);
    bool is_float = false;
    if (i < ps->end && ps->s[i] == '.') {
        if (!is_digit(ps, i + 1)) return bad(ps, i + 1, "a number needs a digit after '.'");
        i = skip_digits(ps, i + 1);
        is_float = true;
    }
    if (i < ps->end && (ps->s[i] == 'e' || ps->s[i] == 'E')) {
        size_t j = i + 1;
        if (j < ps->end && (ps->s[j] == '+' || ps->s[j] == '-')) j++;
        if (!is_digit(ps, j)) return bad(ps, j, "a number needs a digit in its exponent");
        i = skip_digits(ps, j);
        is_float = true;
    }
    if (!is_float && i - digits > FP_MAX_INT_DIGITS)
        return bad(ps, start, "an integer has more than 4300 digits (Python refuses them)");
    return number_text(ps, start, i, out);
}

static int parse_value(struct parser *ps, struct fp_value **out);

static int enter(struct parser *ps)
{
    if (++ps->depth > FP_MAX_DEPTH) return bad(ps, ps->pos, "nested deeper than 512 levels");
    ps->pos++;
    skip_ws(ps);
    return 0;
}

static int push_value(struct parser *ps, struct fp_value *v)
{
    if (ps->nvals == ps->capvals) {
        size_t cap = ps->capvals ? ps->capvals * 2 : 64;
        struct fp_value **nv = realloc(ps->vals, cap * sizeof *nv);
        if (!nv) return oom(ps);
        ps->vals = nv, ps->capvals = cap;
    }
    ps->vals[ps->nvals++] = v;
    return 0;
}

static int push_member(struct parser *ps, const struct fp_member *m)
{
    if (ps->nmems == ps->capmems) {
        size_t cap = ps->capmems ? ps->capmems * 2 : 64;
        struct fp_member *nm = realloc(ps->mems, cap * sizeof *nm);
        if (!nm) return oom(ps);
        ps->mems = nm, ps->capmems = cap;
    }
    ps->mems[ps->nmems++] = *m;
    return 0;
}

/* After an item or member: ',' goes on (1), the closer ends (0). */
static int next_or_close(struct parser *ps, char close)
{
    skip_ws(ps);
    if (ps->pos < ps->end && ps->s[ps->pos] == ',') {
        ps->pos++;
        return 1;
    }
    if (ps->pos < ps->end && ps->s[ps->pos] == close) {
        ps->pos++;
        return 0;
    }
    return bad(ps, ps->pos, close == ']' ? "expected ',' or ']'" : "expected ',' or '}'");
}

static int parse_array(struct parser *ps, struct fp_value **out)
{
    size_t base = ps->nvals;
    int r = enter(ps);
    if (r) return r;
    if (ps->pos < ps->end && ps->s[ps->pos] == ']') {
        ps->pos++;
    } else {
        do {
            struct fp_value *item;
            if ((r = parse_value(ps, &item)) || (r = push_value(ps, item))) return r;
        } while ((r = next_or_close(ps, ']')) == 1);
        if (r) return r;
    }
    struct fp_value *v = new_value(ps, FP_ARRAY);
    size_t n = ps->nvals - base;
    if (!v || (n && !(v->items = arena_alloc(ps->doc, n * sizeof *v->items)))) return oom(ps);
    if (n) memcpy(v->items, ps->vals + base, n * sizeof *v->items);
    v->len = n;
    ps->nvals = base;
    ps->depth--;
    *out = v;
    return 0;
}

static int member_cmp(const void *a, const void *b)
{
    const struct fp_member *x = a, *y = b;
    return fp_text_cmp(x->key, x->key_len, y->key, y->key_len);
}

/* Sorts the members by key and keeps the last of equal keys, as a Python dict does. */
static int finish_object(struct parser *ps, struct fp_value *v)
{
    if (fp_stable_sort(v->members, v->len, sizeof *v->members, member_cmp)) return oom(ps);
    size_t k = 0;
    for (size_t i = 0; i < v->len; i++) {
        if (i + 1 < v->len && member_cmp(&v->members[i], &v->members[i + 1]) == 0) {
            if (!v->dups++) {
                v->dup_key = v->members[i].key;
                v->dup_key_len = v->members[i].key_len;
            }
            continue;
        }
        v->members[k++] = v->members[i];
    }
    v->len = k;
    return 0;
}

static int parse_member(struct parser *ps)
{
    struct fp_member m;
    int r;
    skip_ws(ps);
    if (ps->pos >= ps->end || ps->s[ps->pos] != '"')
        return bad(ps, ps->pos, "expected a key (a string in double quotes)");
    if ((r = parse_string(ps, &m.key, &m.key_len))) return r;
    skip_ws(ps);
    if (ps->pos >= ps->end || ps->s[ps->pos] != ':')
        return bad(ps, ps->pos, "expected ':' after a key");
    ps->pos++;
    if ((r = parse_value(ps, &m.val))) return r;
    return push_member(ps, &m);
}

static int parse_object(struct parser *ps, struct fp_value **out)
{
    size_t base = ps->nmems;
    int r = enter(ps);
    if (r) return r;
    if (ps->pos < ps->end && ps->s[ps->pos] == '}') {
        ps->pos++;
    } else {
        do {
            if ((r = parse_member(ps))) return r;
        } while ((r = next_or_close(ps, '}')) == 1);
        if (r) return r;
    }
    struct fp_value *v = new_value(ps, FP_OBJECT);
    size_t n = ps->nmems - base;
    if (!v || (n && !(v->members = arena_alloc(ps->doc, n * sizeof *v->members)))) return oom(ps);
    if (n) memcpy(v->members, ps->mems + base, n * sizeof *v->members);
    v->len = n;
    ps->nmems = base;
    ps->depth--;
    if ((r = finish_object(ps, v))) return r;
    *out = v;
    return 0;
}

static int parse_word(struct parser *ps, struct fp_value **out)
{
    static const struct {
        const char *word;
        enum fp_type type;
    } words[] = {{"null", FP_NULL},
                 {"true", FP_TRUE},
                 {"false", FP_FALSE},
                 {"NaN", FP_NUMBER},
                 {"Infinity", FP_NUMBER}};
    for (size_t i = 0; i < ARRAY_LEN(words); i++) {
        if (!at_word(ps, words[i].word)) continue;
        size_t n = strlen(words[i].word);
        if (words[i].type == FP_NUMBER) return number_text(ps, ps->pos, ps->pos + n, out);
        if (!(*out = new_value(ps, words[i].type))) return oom(ps);
        ps->pos += n;
        return 0;
    }
    return bad(ps, ps->pos, "expected a value");
}

static int parse_value(struct parser *ps, struct fp_value **out)
{
    skip_ws(ps);
    if (ps->pos >= ps->end) return bad(ps, ps->pos, "the text ends where a value should be");
    unsigned char c = ps->s[ps->pos];
    if (c == '{') return parse_object(ps, out);
    if (c == '[') return parse_array(ps, out);
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(ps, out);
    if (c != '"') return parse_word(ps, out);
    struct fp_value *v = new_value(ps, FP_STRING);
    if (!v) return oom(ps);
    int r = parse_string(ps, &v->text, &v->len);
    if (r) return r;
    *out = v;
    return 0;
}

int fp_parse(const char *json, size_t len, struct fp_doc **out, err_t *err)
{
    *out = NULL;
    struct fp_doc *doc = calloc(1, sizeof *doc);
    if (!doc) return err_set(err, -ENOMEM, "out of memory reading the JSON");
    struct parser ps = {.s = (const unsigned char *)json, .end = len, .doc = doc, .err = err};
    /* A UTF-8 byte order mark is allowed, as json.loads allows it on bytes. */
    if (len >= 3 && memcmp(json, "\xEF\xBB\xBF", 3) == 0) ps.s += 3, ps.end -= 3;
    int r = parse_value(&ps, &doc->root);
    if (!r) {
        skip_ws(&ps);
        if (ps.pos < ps.end) r = bad(&ps, ps.pos, "there is more text after the JSON value");
    }
    free(ps.vals);
    free(ps.mems);
    if (r) {
        fp_doc_free(doc);
        return r;
    }
    *out = doc;
    return 0;
}
