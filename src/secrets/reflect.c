/* Reflection: an upstream that echoes what it received (a debug endpoint, an
 * error message quoting the bad token, an introspection answer) would hand a
 * swapped value back to the sandbox. The proxy knows the exact values it put
 * into a connection, so it looks for them in what comes back and overwrites
 * each, in place and at the same length, before the sandbox reads it.
 *
 * What is looked for, per value, as "needles" (decoded text):
 *   - the value itself;
 *   - its base64, standard and URL-safe, at each of the three alignments it
 *     can have inside a longer base64 text (Basic base64(user:value)): the
 *     whole groups that hold only value bytes. The one or two value bytes that
 *     share a group with their neighbours, before and after, are checked and
 *     overwritten too when those groups are written plainly.
 * Each needle is matched through the escapes a server writes when it puts the
 * text into a URL or a JSON string: every byte may come as itself, as %XX (any
 * case; '+' for a space), or as a JSON escape (\" \\ \/ \b \f \n \r \t,
 * \uXXXX, a surrogate pair for characters beyond U+FFFF), in any mix.
 *
 * What a match becomes: the same number of bytes, so that no framing
 * (Content-Length, chunk sizes) changes. Written plainly, the value becomes
 * its placeholder cut or padded with 'x' to the value's length, and a base64
 * form the base64 of that text at the same alignment (it still decodes, to the
 * placeholder). A match with escapes in it becomes as many characters of the
 * placeholder (padded with 'x'), which reveal nothing of where the escapes
 * were. */
#include <errno.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "secrets.h"

enum form { FORM_VERBATIM, FORM_B64, FORM_B64URL };
#define NEEDLES_PER_VALUE 7 /* the value, and 3 alignments x 2 base64 alphabets */
#define B64_NEEDLE_MIN 6    /* value bytes in a base64 needle: 48 bits, never met by chance */

static const char B64_STD[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char B64_URL[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

struct needle {
    unsigned char *text; /* decoded: what the stream must decode to */
    size_t len;
    unsigned char *repl; /* what it becomes when written plainly (len bytes) */
    unsigned value;
    enum form form;
    unsigned k;  /* base64: value bytes before the first whole group (0..2) */
    size_t tail; /* base64: value bytes after the last whole group (0..2) */
};

struct rvalue {
    unsigned char *bytes;
    size_t len;
    unsigned char *pad; /* the placeholder cut, or padded with 'x', to len */
    char placeholder[PLACEHOLDER_LEN + 1];
};

struct reflect {
    struct rvalue values[REFLECT_VALUES_MAX];
    unsigned n_values;
    struct needle needles[REFLECT_VALUES_MAX * NEEDLES_PER_VALUE];
    unsigned n_needles;
    bool start[256];          /* bytes a match can begin with */
    bool first[256];          /* the needles' first bytes, decoded */
    uint8_t pairs[65536 / 8]; /* and the pairs of bytes: most bytes are passed over on one test */
    unsigned n_starts;        /* bytes in start[] */
    unsigned n_firsts;        /* pairs below; past 16 the scan tests each byte alone */
#ifdef __SSE2__
    __m128i firsts[16], seconds[16]; /* a needle's first two bytes, each sixteen times */
#endif
};

static const char *const ENCODINGS[REFLECT_ENCODINGS] = {
    "verbatim",  "percent",           "json",           "percent+json",
    "base64",    "base64+percent",    "base64+json",    "base64+percent+json",
    "base64url", "base64url+percent", "base64url+json", "base64url+percent+json",
};

const char *reflect_encoding_name(unsigned encoding)
{
    return encoding < REFLECT_ENCODINGS ? ENCODINGS[encoding] : "?";
}

struct reflect *reflect_new(void)
{
    return calloc(1, sizeof(struct reflect));
}

static void wipe_free(void *p, size_t n)
{
    if (!p) return;
    explicit_bzero(p, n);
    free(p);
}

void reflect_free(struct reflect *r)
{
    if (!r) return;
    for (unsigned i = 0; i < r->n_needles; i++) {
        struct needle *nd = &r->needles[i];
        if (nd->form == FORM_VERBATIM) continue; /* the value's own buffers, below */
        wipe_free(nd->text, nd->len);
        wipe_free(nd->repl, nd->len);
    }
    for (unsigned i = 0; i < r->n_values; i++) {
        wipe_free(r->values[i].bytes, r->values[i].len);
        wipe_free(r->values[i].pad, r->values[i].len);
    }
    explicit_bzero(r, sizeof *r);
    free(r);
}

bool reflect_empty(const struct reflect *r)
{
    return !r || r->n_needles == 0;
}

/* ---- base64 ---- */

static int b64_value(const char *alpha, unsigned char c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == (unsigned char)alpha[62]) return 62;
    if (c == (unsigned char)alpha[63]) return 63;
    return -1;
}

static bool b64_any(unsigned char c)
{
    return b64_value(B64_STD, c) >= 0 || c == '-' || c == '_';
}

/* n bytes (n a multiple of 3) as 4n/3 characters. */
static void b64_groups(const unsigned char *in, size_t n, const char *alpha, unsigned char *out)
{
    for (size_t i = 0; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        *out++ = (unsigned char)alpha[v >> 18];
        *out++ = (unsigned char)alpha[(v >> 12) & 63];
        *out++ = (unsigned char)alpha[(v >> 6) & 63];
        *out++ = (unsigned char)alpha[v & 63];
    }
}

/* c (2..4) characters of one group, all of the alphabet, as c-1 bytes (3 for 4). */
static void b64_group_decode(const unsigned char *s, size_t c, const char *alpha,
                             unsigned char out[3])
{
    uint32_t v = 0;
    for (size_t i = 0; i < 4; i++)
        v = v << 6 | (uint32_t)(i < c ? b64_value(alpha, s[i]) : 0);
    out[0] = (unsigned char)(v >> 16);
    out[1] = (unsigned char)(v >> 8);
    out[2] = (unsigned char)v;
}

/* The inverse: c characters for the first c-1 bytes (3 for c 4); spare bits zero. */
static void b64_group_encode(const unsigned char in[3], size_t c, const char *alpha,
                             unsigned char *out)
{
    uint32_t v =
        (uint32_t)in[0] << 16 | (c > 2 ? (uint32_t)in[1] << 8 : 0) | (c > 3 ? (uint32_t)in[2] : 0);
    for (size_t i = 0; i < c; i++)
        out[i] = (unsigned char)alpha[(v >> (18 - 6 * i)) & 63];
}

static const char *alphabet(enum form f)
{
    return f == FORM_B64URL ? B64_URL : B64_STD;
}

/* ---- adding values ---- */

static bool needle_known(const struct reflect *r, const unsigned char *text, size_t len)
{
    for (unsigned i = 0; i < r->n_needles; i++)
        if (r->needles[i].len == len && memcmp(r->needles[i].text, text, len) == 0) return true;
    return false;
}

static void set_pair(struct reflect *r, unsigned char a, unsigned char b)
{
    unsigned i = (unsigned)a << 8 | b;
    r->pairs[i >> 3] |= (uint8_t)(1u << (i & 7));
}

static bool has_pair(const struct reflect *r, unsigned char a, unsigned char b)
{
    unsigned i = (unsigned)a << 8 | b;
    return r->pairs[i >> 3] >> (i & 7) & 1;
}

/* The first byte as itself ('+' too for a space), and the second as itself or
 * the start of an escape. Escapes first are found by their own byte. */
static void set_start(struct reflect *r, unsigned char c)
{
    if (r->start[c]) return;
    r->start[c] = true;
    r->n_starts++;
}

static void add_needle(struct reflect *r, struct needle nd)
{
    r->needles[r->n_needles++] = nd;
    unsigned char a = nd.text[0], b = nd.text[1];
    r->first[a] = true;
    for (int plus = 0; plus < 2; plus++) {
        unsigned char first = plus ? '+' : a;
        if (plus && a != ' ') break;
        set_start(r, first);
        set_pair(r, first, b);
#ifdef __SSE2__
        if (r->n_firsts < 16) {
            r->firsts[r->n_firsts] = _mm_set1_epi8((char)first);
            r->seconds[r->n_firsts] = _mm_set1_epi8((char)b);
        }
#endif
        r->n_firsts++; /* a second byte of ' ' may be '+': found by the escapes' test */
        set_pair(r, first, '%');
        set_pair(r, first, '\\');
        if (b == ' ') set_pair(r, first, '+');
    }
    for (unsigned c = 0; c < 256; c++) {
        set_pair(r, '%', (unsigned char)c);
        set_pair(r, '\\', (unsigned char)c);
    }
}

/* The base64 needle of v for alignment k in one alphabet; 0, or -ENOMEM. */
static int add_b64(struct reflect *r, unsigned value, enum form form, unsigned k)
{
    const struct rvalue *v = &r->values[value];
    size_t groups = (v->len - k) / 3;
    if (groups * 3 < B64_NEEDLE_MIN) return 0;
    struct needle nd = {.len = groups * 4, .value = value, .form = form, .k = k};
    nd.tail = v->len - k - groups * 3;
    nd.text = malloc(nd.len);
    nd.repl = malloc(nd.len);
    if (!nd.text || !nd.repl) {
        free(nd.text);
        free(nd.repl);
        return -ENOMEM;
    }
    b64_groups(v->bytes + k, groups * 3, alphabet(form), nd.text);
    b64_groups(v->pad + k, groups * 3, alphabet(form), nd.repl);
    if (needle_known(r, nd.text, nd.len)) { /* no '+' or '/' in it: both alphabets agree */
        wipe_free(nd.text, nd.len);
        free(nd.repl);
        return 0;
    }
    add_needle(r, nd);
    return 0;
}

int reflect_add(struct reflect *r, const char *value, size_t len, const char *placeholder)
{
    if (len < REFLECT_VALUE_MIN) return 0;
    for (unsigned i = 0; i < r->n_values; i++)
        if (r->values[i].len == len && memcmp(r->values[i].bytes, value, len) == 0) return 0;
    if (r->n_values == REFLECT_VALUES_MAX) return -ENOSPC;
    unsigned idx = r->n_values;
    struct rvalue *v = &r->values[idx];
    v->bytes = malloc(len);
    v->pad = malloc(len);
    if (!v->bytes || !v->pad) {
        free(v->bytes);
        free(v->pad);
        v->bytes = v->pad = NULL;
        return -ENOMEM;
    }
    memcpy(v->bytes, value, len);
    v->len = len;
    snprintf(v->placeholder, sizeof v->placeholder, "%s", placeholder);
    size_t plen = strlen(v->placeholder);
    for (size_t i = 0; i < len; i++)
        v->pad[i] = i < plen ? (unsigned char)v->placeholder[i] : 'x';
    r->n_values++;
    add_needle(r, (struct needle){.text = v->bytes, .len = len, .repl = v->pad, .value = idx});
    set_start(r, '%');
    set_start(r, '\\');
    for (enum form f = FORM_B64; f <= FORM_B64URL; f++)
        for (unsigned k = 0; k < 3; k++)
            if (add_b64(r, idx, f, k) < 0) return -ENOMEM; /* what was added still works */
    return 1;
}

/* ---- matching through escapes ---- */

enum verdict { V_NO, V_YES, V_MORE };

static int hex_value(unsigned char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Four hex digits at b[p..): 1 and *v, 0 when cut short by the end, -1 when not hex. */
static int hex4(const unsigned char *b, size_t len, size_t p, unsigned *v)
{
    *v = 0;
    for (size_t i = 0; i < 4; i++) {
        if (p + i >= len) return 0;
        int h = hex_value(b[p + i]);
        if (h < 0) return -1;
        *v = *v << 4 | (unsigned)h;
    }
    return 1;
}

static size_t utf8_encode(unsigned cp, unsigned char u[4])
{
    if (cp < 0x80) {
        u[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        u[0] = (unsigned char)(0xC0 | cp >> 6);
        u[1] = (unsigned char)(0x80 | (cp & 63));
        return 2;
    }
    if (cp < 0x10000) {
        u[0] = (unsigned char)(0xE0 | cp >> 12);
        u[1] = (unsigned char)(0x80 | ((cp >> 6) & 63));
        u[2] = (unsigned char)(0x80 | (cp & 63));
        return 3;
    }
    u[0] = (unsigned char)(0xF0 | cp >> 18);
    u[1] = (unsigned char)(0x80 | ((cp >> 12) & 63));
    u[2] = (unsigned char)(0x80 | ((cp >> 6) & 63));
    u[3] = (unsigned char)(0x80 | (cp & 63));
    return 4;
}

/* A JSON escape at b[p] ('\\') that decodes to a prefix of want[0..n): 1 with
 * *used stream bytes and *dec decoded bytes; 0 when the stream ends inside a
 * well-formed beginning; -1 when it is no escape, or another text's. */
static int json_unit(const unsigned char *b, size_t len, size_t p, const unsigned char *want,
                     size_t n, size_t *used, size_t *dec)
{
    static const char SHORT[] = "\"\"\\\\//b\bf\fn\nr\rt\t";
    if (p + 1 >= len) return 0;
    unsigned char e = b[p + 1];
    for (size_t i = 0; SHORT[i]; i += 2)
        if (e == (unsigned char)SHORT[i]) {
            *used = 2;
            *dec = 1;
            return want[0] == (unsigned char)SHORT[i + 1] ? 1 : -1;
        }
    if (e != 'u') return -1;
    unsigned cp, lo;
    int r = hex4(b, len, p + 2, &cp);
    if (r <= 0) return r;
    *used = 6;
    if (cp >= 0xDC00 && cp < 0xE000) return -1; /* a lone low surrogate */
    if (cp >= 0xD800 && cp < 0xDC00) {
        if (p + 6 >= len) return 0;
        if (b[p + 6] != '\\') return -1;
        if (p + 7 >= len) return 0;
        if (b[p + 7] != 'u') return -1;
        r = hex4(b, len, p + 8, &lo);
        if (r <= 0) return r;
        if (lo < 0xDC00 || lo >= 0xE000) return -1;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        *used = 12;
    }
    unsigned char u[4];
    *dec = utf8_encode(cp, u);
    return *dec <= n && memcmp(u, want, *dec) == 0 ? 1 : -1;
}

struct found {
    size_t from, to; /* the bytes overwritten, base64 edge groups included */
    size_t end;      /* where the needle itself ends */
    bool pct, json;  /* escapes met */
    bool plain;      /* no escape anywhere in from..to */
    bool before;     /* the group before holds value bytes: from is its start */
    size_t after;    /* characters of the group after that hold value bytes (0, 2, 3) */
    size_t after_c;  /* ... of that group in all (2..4), decoded to find them */
};

/* The needle at b[s..) with one preference where a byte could be itself or
 * begin an escape ('%' or '\\' equal to the needle's byte): raw_first takes
 * it as itself, else as an escape. *branched: such a choice was met. */
static enum verdict match_from(const struct needle *nd, const unsigned char *b, size_t len,
                               size_t s, bool final, bool raw_first, struct found *f,
                               bool *branched)
{
    size_t i = 0, p = s;
    f->pct = f->json = false;
    while (i < nd->len) {
        if (p >= len) return final ? V_NO : V_MORE;
        unsigned char c = b[p], want = nd->text[i];
        bool raw = c == want || (c == '+' && want == ' ');
        if (raw && raw_first) {
            *branched = *branched || c == '%' || c == '\\';
            p++;
            i++;
            continue;
        }
        if (c == '%') {
            int h1 = p + 1 < len ? hex_value(b[p + 1]) : -2;
            int h2 = p + 2 < len ? hex_value(b[p + 2]) : -2;
            if (h1 >= 0 && h2 >= 0 && (h1 << 4 | h2) == want) {
                p += 3;
                i++;
                f->pct = true;
                continue;
            }
            if (!final && (h1 == -2 || (h1 >= 0 && h2 == -2))) return V_MORE;
        } else if (c == '\\') {
            size_t used = 0, dec = 0;
            int r = json_unit(b, len, p, nd->text + i, nd->len - i, &used, &dec);
            if (r > 0) {
                p += used;
                i += dec;
                f->json = true;
                continue;
            }
            if (r == 0 && !final) return V_MORE;
        }
        if (!raw) return V_NO;
        p++;
        i++;
    }
    f->end = p;
    return V_YES;
}

/* One character written plainly or escaped (%XX, a JSON \\c or \\u00XX) at
 * b[p..): 1 with *c and *used; 0 when cut short by the end; -1 when not one
 * (an escape of something else). */
static int unit_fwd(const unsigned char *b, size_t len, size_t p, unsigned char *c, size_t *used)
{
    static const char SHORT[] = "\"\"\\\\//";
    if (p >= len) return 0;
    *used = 1;
    *c = b[p];
    if (b[p] == '%') {
        if (p + 2 >= len) return 0;
        int h1 = hex_value(b[p + 1]), h2 = hex_value(b[p + 2]);
        if (h1 < 0 || h2 < 0) return -1;
        *c = (unsigned char)(h1 << 4 | h2);
        *used = 3;
    } else if (b[p] == '\\') {
        if (p + 1 >= len) return 0;
        for (size_t i = 0; SHORT[i]; i += 2)
            if (b[p + 1] == (unsigned char)SHORT[i]) {
                *c = (unsigned char)SHORT[i + 1];
                *used = 2;
                return 1;
            }
        unsigned cp;
        int r = b[p + 1] == 'u' ? hex4(b, len, p + 2, &cp) : -1;
        if (r <= 0 || cp > 0x7f) return r <= 0 ? r : -1;
        *c = (unsigned char)cp;
        *used = 6;
    }
    return 1;
}

/* The character that ends at b[q] (exclusive), after from: its start. In a
 * base64 text no character is '%' or '\\' itself, so reading backwards is
 * unambiguous there. */
static size_t unit_back(const unsigned char *b, size_t from, size_t q, unsigned char *c)
{
    unsigned char d;
    size_t used;
    if (q >= from + 3 && b[q - 3] == '%' && unit_fwd(b, q, q - 3, &d, &used) == 1 && used == 3) {
        *c = d;
        return q - 3;
    }
    if (q >= from + 6 && b[q - 6] == '\\' && unit_fwd(b, q, q - 6, &d, &used) == 1 && used == 6) {
        *c = d;
        return q - 6;
    }
    if (q >= from + 2 && b[q - 2] == '\\' && unit_fwd(b, q, q - 2, &d, &used) == 1 && used == 2) {
        *c = d;
        return q - 2;
    }
    *c = b[q - 1];
    return q - 1;
}

/* The one or two value bytes that share base64 groups with their neighbours:
 * the group before (its last k bytes, after floor: what an earlier match
 * overwrote is not read again) and the group after (its first tail bytes),
 * when they hold exactly those bytes; plainly written or escaped like the
 * rest. V_MORE when the group after may still be growing. */
static enum verdict edges(const struct reflect *r, const struct needle *nd, const unsigned char *b,
                          size_t len, size_t floor, size_t s, bool final, struct found *f)
{
    const struct rvalue *v = &r->values[nd->value];
    const char *alpha = alphabet(nd->form);
    unsigned char g[4], d[3];
    size_t q = s, n = 0, used;
    while (nd->k && n < 4 && q > floor) {
        q = unit_back(b, floor, q, &g[3 - n]);
        if (b64_value(alpha, g[3 - n]) < 0) break;
        n++;
    }
    if (n == 4) {
        b64_group_decode(g, 4, alpha, d);
        if (memcmp(d + 3 - nd->k, v->bytes, nd->k) == 0) {
            f->before = true;
            f->from = q;
            f->plain = f->plain && s - q == 4;
        }
    }
    if (!nd->tail) return V_YES;
    /* The group after: up to 4 characters (at[i]: where the i-th begins), then
     * its padding. Only its first tail+1 characters hold value bits. */
    size_t c = 0, pads = 0, at[5] = {f->end};
    int u = 1;
    while (c < 4 && (u = unit_fwd(b, len, at[c], &g[c], &used)) == 1 &&
           b64_value(alpha, g[c]) >= 0) {
        at[c + 1] = at[c] + used;
        c++;
    }
    q = at[c];
    unsigned char pad;
    while (c >= 2 && c + pads < 4 && (u = unit_fwd(b, len, q, &pad, &used)) == 1 && pad == '=') {
        q += used;
        pads++;
    }
    if (c + pads < 4 && u == 0 && !final) return V_MORE;
    if (c < 2) return V_YES;
    b64_group_decode(g, c, alpha, d);
    if (c - 1 < nd->tail || memcmp(d, v->bytes + v->len - nd->tail, nd->tail) != 0) return V_YES;
    f->after = nd->tail + 1;
    f->after_c = c;
    f->plain = f->plain && at[f->after] - f->end == f->after;
    f->to = at[f->after];
    return V_YES;
}

static enum verdict match_at(const struct reflect *r, const struct needle *nd,
                             const unsigned char *b, size_t len, size_t floor, size_t s, bool final,
                             struct found *f)
{
    bool branched = false, ignored = false;
    enum verdict a = match_from(nd, b, len, s, final, true, f, &branched);
    if (a != V_YES && branched) {
        struct found g;
        enum verdict e = match_from(nd, b, len, s, final, false, &g, &ignored);
        if (e == V_YES) *f = g;
        a = e == V_YES ? V_YES : (a == V_MORE || e == V_MORE ? V_MORE : V_NO);
    }
    if (a != V_YES) return a;
    f->plain = f->end - s == nd->len;
    f->before = false;
    f->after = 0;
    f->from = s;
    f->to = f->end;
    if (nd->form != FORM_VERBATIM && edges(r, nd, b, len, floor, s, final, f) == V_MORE)
        return V_MORE;
    return V_YES;
}

/* Whether some needle matches at a position in [from, to) (floor: as in edges). */
static enum verdict begins_within(const struct reflect *r, const unsigned char *b, size_t len,
                                  size_t floor, size_t from, size_t to, bool final)
{
    enum verdict any = V_NO;
    struct found f;
    for (size_t p = from; p < to; p++)
        for (unsigned i = 0; i < r->n_needles; i++) {
            enum verdict v = match_at(r, &r->needles[i], b, len, floor, p, final, &f);
            if (v == V_YES) return V_YES;
            if (v == V_MORE) any = V_MORE;
        }
    return any;
}

/* ---- overwriting ---- */

static void overwrite(const struct reflect *r, const struct needle *nd, unsigned char *b, size_t s,
                      const struct found *f)
{
    const struct rvalue *v = &r->values[nd->value];
    const char *alpha = alphabet(nd->form);
    unsigned char d[3];
    if (!f->plain) { /* escapes: as many characters of the placeholder */
        size_t plen = strlen(v->placeholder);
        for (size_t i = f->from; i < f->to; i++)
            b[i] = i - f->from < plen ? (unsigned char)v->placeholder[i - f->from] : 'x';
        return;
    }
    memcpy(b + s, nd->repl, nd->len);
    if (f->before) {
        b64_group_decode(b + s - 4, 4, alpha, d);
        memcpy(d + 3 - nd->k, v->pad, nd->k);
        b64_group_encode(d, 4, alpha, b + s - 4);
    }
    if (f->after) { /* the group decoded whole, its first characters written again */
        unsigned char group[4];
        b64_group_decode(b + f->end, f->after_c, alpha, d);
        memcpy(d, v->pad + v->len - nd->tail, nd->tail);
        b64_group_encode(d, f->after_c, alpha, group);
        memcpy(b + f->end, group, f->after);
    }
}

static unsigned encoding_of(const struct needle *nd, const struct found *f)
{
    return (unsigned)nd->form * 4 + (f->pct ? 1 : 0) + (f->json ? 2 : 0);
}

/* Whether an escape at b[s] ('%' or '\\') could begin some needle: false when
 * it is whole and decodes to a byte no needle begins with (most "\\/" and
 * "\\"" of a JSON text). */
static bool escape_may_start(const struct reflect *r, const unsigned char *b, size_t len, size_t s)
{
    unsigned char c;
    size_t used;
    if (unit_fwd(b, len, s, &c, &used) != 1) return true;
    if (used != 6 || b[s + 1] != 'u') return r->first[c];
    unsigned cp; /* \\uXXXX beyond ASCII: its first UTF-8 byte */
    unsigned char u[4];
    hex4(b, len, s + 2, &cp);
    utf8_encode(cp >= 0xD800 && cp < 0xDC00 ? 0x10000 : cp, u);
    return r->first[u[0]];
}

/* Where the unsettled bytes begin when a match may start at s: also up to
 * four base64 characters before it (plainly written or escaped), the group a
 * base64 needle's first value bytes may share with what precedes them; never
 * before floor (what a match overwrote is not scanned again: with what
 * follows it could spell another match, which one scan of the whole answer
 * would not find). */
static size_t hold_from(const unsigned char *b, size_t floor, size_t s)
{
    size_t t = s;
    for (int n = 0; n < 4 && t > floor; n++) {
        unsigned char c;
        size_t q = unit_back(b, floor, t, &c);
        if (!b64_any(c)) break;
        t = q;
    }
    return t;
}

/* The same at the end of what was read, where an escape may be cut short. */
static size_t hold_end(const unsigned char *b, size_t floor, size_t len)
{
    size_t t = len;
    for (size_t back = 1; back <= 5 && back <= len - floor; back++) {
        unsigned char c;
        size_t used;
        size_t p = len - back;
        if ((b[p] == '%' || b[p] == '\\') && unit_fwd(b, len, p, &c, &used) == 0) {
            t = p;
            break;
        }
    }
    return hold_from(b, floor, t);
}

/* The next position from s where a match may begin: its byte may begin a
 * needle, and so may the pair it makes with the next. Sixteen bytes at a time
 * where the CPU can (SSE2: every x86-64), most of an answer being passed over. */
static size_t next_candidate(const struct reflect *r, const unsigned char *b, size_t s, size_t len)
{
#ifdef __SSE2__
    if (r->n_firsts <= 16) {
        const __m128i pct = _mm_set1_epi8('%'), bsl = _mm_set1_epi8('\\'),
                      plus = _mm_set1_epi8('+');
        for (; s + 17 <= len; s += 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(b + s));
            __m128i w = _mm_loadu_si128((const __m128i *)(const void *)(b + s + 1));
            /* an escape here, or next (it may stand for a needle's second byte) */
            __m128i m = _mm_or_si128(_mm_cmpeq_epi8(v, pct), _mm_cmpeq_epi8(v, bsl));
            __m128i next =
                _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(w, pct), _mm_cmpeq_epi8(w, bsl)),
                             _mm_cmpeq_epi8(w, plus));
            for (unsigned i = 0; i < r->n_firsts; i++)
                m = _mm_or_si128(
                    m, _mm_and_si128(_mm_cmpeq_epi8(v, r->firsts[i]),
                                     _mm_or_si128(next, _mm_cmpeq_epi8(w, r->seconds[i]))));
            for (unsigned bits = (unsigned)_mm_movemask_epi8(m); bits; bits &= bits - 1) {
                size_t p = s + (size_t)__builtin_ctz(bits);
                if (p + 1 == len || has_pair(r, b[p], b[p + 1])) return p;
            }
        }
    }
#endif
    for (; s < len; s++)
        if (r->start[b[s]] && (s + 1 == len || has_pair(r, b[s], b[s + 1]))) return s;
    return len;
}

size_t reflect_scan(const struct reflect *r, unsigned char *b, size_t len, bool final,
                    reflect_hit_fn *hit, void *arg)
{
    if (reflect_empty(r)) return len;
    size_t s = 0, floor = 0; /* floor: the end of the last match overwritten */
    while ((s = next_candidate(r, b, s, len)) < len) {
        unsigned char c = b[s];
        if (!r->start[c] ||
            ((c == '%' || c == '\\') && !r->first[c] && !escape_may_start(r, b, len, s))) {
            s++;
            continue;
        }
        const struct needle *best = NULL;
        struct found bf = {0}, f;
        bool more = false;
        for (unsigned i = 0; i < r->n_needles; i++) {
            const struct needle *nd = &r->needles[i];
            if (c != nd->text[0] && c != '%' && c != '\\' && !(c == '+' && nd->text[0] == ' '))
                continue;
            enum verdict v = match_at(r, nd, b, len, floor, s, final, &f);
            if (v == V_MORE) more = true;
            if (v == V_YES && (!best || f.to - f.from > bf.to - bf.from)) {
                best = nd;
                bf = f;
            }
        }
        /* The group after a base64 match is not taken when another match
         * begins inside it (a text that is both cannot be base64): that one
         * then hides more of a value. */
        if (best && bf.after) {
            enum verdict o = begins_within(r, b, len, bf.end, bf.end + 1, bf.to, final);
            if (o == V_MORE) more = true;
            if (o == V_YES) {
                bf.after = 0;
                bf.to = bf.end;
            }
        }
        /* A longer match may still be under way: decide when more bytes come. */
        if (more) return hold_from(b, floor, s);
        if (!best) {
            s++;
            continue;
        }
        overwrite(r, best, b, s, &bf);
        if (hit) {
            struct reflect_hit h = {.value = best->value,
                                    .placeholder = r->values[best->value].placeholder,
                                    .encoding = encoding_of(best, &bf)};
            hit(arg, &h);
        }
        s = floor = bf.to;
    }
    return final ? len : hold_end(b, floor, len);
}
