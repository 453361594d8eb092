/* Reflection redaction (src/secrets/reflect.c): a value swapped into a
 * connection, echoed back in each encoding a server uses, is overwritten at the
 * same length, also when the answer arrives in pieces split anywhere. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "secrets/secrets.h"
#include "unit.h"

/* '/', '+', '=', '?', '&', ' ' and '~' in it: every escape has work to do, and
 * its base64 holds '+' and '/' (the two alphabets differ). */
static const char VALUE[] = "sk-live_a?b>c~d/e+f=g&h >>?? 0123456789";
static const char PH[] = "RUNTIME_PH_0123456789abcdef0123456789abcdef";

static const char B64S[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char B64U[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static char *b64(const char *in, size_t n, const char *alpha, bool pad)
{
    char *out = calloc(1, n * 2 + 8), *o = out;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned char)in[i] << 16;
        size_t k = n - i < 3 ? n - i : 3;
        if (k > 1) v |= (unsigned char)in[i + 1] << 8;
        if (k > 2) v |= (unsigned char)in[i + 2];
        for (size_t j = 0; j < k + 1; j++)
            *o++ = alpha[(v >> (18 - 6 * j)) & 63];
        for (size_t j = k + 1; pad && j < 4; j++)
            *o++ = '=';
    }
    return out;
}

static int b64v(const char *alpha, char c)
{
    const char *p = c ? strchr(alpha, c) : NULL;
    return p ? (int)(p - alpha) : -1;
}

/* Decodes a base64 text (padding optional); NULL when it does not decode. */
static char *unb64(const char *in, const char *alpha, size_t *n)
{
    char *out = calloc(1, strlen(in) + 1);
    unsigned acc = 0, bits = 0;
    *n = 0;
    for (const char *p = in; *p && *p != '='; p++) {
        int v = b64v(alpha, *p);
        if (v < 0) {
            free(out);
            return NULL;
        }
        acc = acc << 6 | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[(*n)++] = (char)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    return out;
}

/* encodeURIComponent, with lower-case hex when lower. */
static char *pct(const char *in, bool lower)
{
    char *out = calloc(1, strlen(in) * 3 + 1), *o = out;
    const char *hex = lower ? "0123456789abcdef" : "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
        if (strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.!~*'()", *p)) {
            *o++ = (char)*p;
        } else {
            *o++ = '%';
            *o++ = hex[*p >> 4];
            *o++ = hex[*p & 15];
        }
    }
    return out;
}

/* A JSON string's inside: '/' as "\/" (PHP's json_encode), and every other
 * character of escape_u as \u00XX (Go's HTML-safe encoder writes < > & so). */
static char *json(const char *in, const char *escape_u)
{
    char *out = calloc(1, strlen(in) * 6 + 1), *o = out;
    for (const char *p = in; *p; p++) {
        if (*p == '/') {
            *o++ = '\\';
            *o++ = '/';
        } else if (strchr(escape_u, *p)) {
            o += sprintf(o, "\\u%04X", (unsigned char)*p);
        } else {
            *o++ = *p;
        }
    }
    return out;
}

static char *cat3(const char *a, const char *b, const char *c)
{
    char *out = malloc(strlen(a) + strlen(b) + strlen(c) + 1);
    strcpy(out, a);
    strcat(out, b);
    strcat(out, c);
    return out;
}

struct hits {
    int n;
    unsigned last_encoding;
};

static void on_hit(void *arg, const struct reflect_hit *h)
{
    struct hits *hs = arg;
    hs->n++;
    hs->last_encoding = h->encoding;
}

static struct reflect *one_value(const char *value)
{
    struct reflect *r = reflect_new();
    if (r && reflect_add(r, value, strlen(value), PH) != 1) {
        reflect_free(r);
        return NULL;
    }
    return r;
}

/* What the sandbox would get: text fed in pieces cut at the given offsets
 * (ascending), the unsettled bytes of each scan kept and fed again in front
 * of the next piece, as the proxy does. */
static char *stream(const struct reflect *r, const char *text, const size_t *cuts, size_t ncuts,
                    struct hits *hs)
{
    size_t n = strlen(text), held = 0, out_len = 0, from = 0;
    char *out = calloc(1, n + 1);
    unsigned char *buf = malloc(n + 1);
    for (size_t i = 0; i <= ncuts; i++) {
        size_t to = i < ncuts ? cuts[i] : n;
        memcpy(buf + held, text + from, to - from);
        size_t have = held + to - from;
        size_t settled = reflect_scan(r, buf, have, i == ncuts, on_hit, hs);
        memcpy(out + out_len, buf, settled);
        out_len += settled;
        memmove(buf, buf + settled, have - settled);
        held = have - settled;
        from = to;
    }
    free(buf);
    return out;
}

static char *whole(const struct reflect *r, const char *text, struct hits *hs)
{
    return stream(r, text, NULL, 0, hs);
}

TEST(reflect_verbatim_becomes_the_placeholder_at_the_same_length)
{
    struct reflect *r = one_value(VALUE);
    CHECK(r != NULL);
    struct hits hs = {0};
    char *in = cat3("{\"echo\":\"Bearer ", VALUE, "\"} and again ");
    char *in2 = cat3(in, VALUE, "");
    char *out = whole(r, in2, &hs);
    CHECK(strlen(out) == strlen(in2));
    CHECK(strstr(out, VALUE) == NULL);
    CHECK(hs.n == 2);
    CHECK_STR(reflect_encoding_name(hs.last_encoding), "verbatim");
    /* the value is shorter than the placeholder: its first strlen(VALUE) characters */
    char want[sizeof VALUE];
    memcpy(want, PH, sizeof VALUE - 1);
    want[sizeof VALUE - 1] = '\0';
    CHECK(strstr(out, want) != NULL);
    CHECK(strncmp(out, "{\"echo\":\"Bearer RUNTIME_PH_", 26) == 0);
    free(out);
    free(in);
    free(in2);
    reflect_free(r);
}

TEST(reflect_longer_value_is_padded_and_text_around_is_kept)
{
    const char *v = "ghp_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"; /* 50 > 43 */
    struct reflect *r = one_value(v);
    struct hits hs = {0};
    char *in = cat3("a<", v, ">z");
    char *out = whole(r, in, &hs);
    char *want = cat3("a<", PH, "xxxxxxx>z");
    CHECK_STR(out, want);
    free(in);
    free(out);
    free(want);
    reflect_free(r);
}

/* base64 of prefix+VALUE (Basic credentials are base64(user:token)) for each
 * length of prefix mod 3, padded or not, in both alphabets: the sandbox decodes
 * the prefix and the placeholder, and no byte of the value. */
TEST(reflect_base64_inside_a_longer_text_every_alignment)
{
    struct reflect *r = one_value(VALUE);
    const char *prefixes[] = {"", "u:", "us:", "user:", "x-access-token:", "ab"};
    const char *suffixes[] = {"", "!", "?>"};
    for (size_t a = 0; a < 2; a++) {
        const char *alpha = a ? B64U : B64S;
        for (size_t p = 0; p < sizeof prefixes / sizeof *prefixes; p++) {
            for (size_t q = 0; q < 3; q++) {
                for (int pad = 0; pad < 2; pad++) {
                    char *plain = cat3(prefixes[p], VALUE, suffixes[q]);
                    char *enc = b64(plain, strlen(plain), alpha, pad);
                    char *in = cat3("Authorization: Basic ", enc, "\r\n");
                    struct hits hs = {0};
                    char *out = whole(r, in, &hs);
                    CHECK(strlen(out) == strlen(in));
                    CHECK(hs.n == 1);
                    CHECK_STR(reflect_encoding_name(hs.last_encoding), a ? "base64url" : "base64");
                    size_t n;
                    out[strlen(out) - 2] = '\0';
                    char *dec = unb64(out + 21, alpha, &n);
                    CHECK(dec != NULL);
                    char want[sizeof VALUE];
                    memcpy(want, PH, sizeof VALUE - 1);
                    want[sizeof VALUE - 1] = '\0';
                    char *expect = cat3(prefixes[p], want, suffixes[q]);
                    if (!dec || n != strlen(expect) || memcmp(dec, expect, n) != 0) {
                        fprintf(stderr, "  %s %s|%s: decodes to %.*s\n", a ? "url" : "std",
                                prefixes[p], suffixes[q], (int)n, dec ? dec : "");
                        *failed_ = 1;
                    }
                    free(dec);
                    free(expect);
                    free(out);
                    free(in);
                    free(enc);
                    free(plain);
                }
            }
        }
    }
    reflect_free(r);
}

TEST(reflect_percent_encoded_upper_lower_and_plus_for_space)
{
    struct reflect *r = one_value(VALUE);
    for (int lower = 0; lower < 2; lower++) {
        char *e = pct(VALUE, lower);
        char *in = cat3("https://x/cb?token=", e, "&state=1");
        struct hits hs = {0};
        char *out = whole(r, in, &hs);
        CHECK(strlen(out) == strlen(in));
        CHECK(strstr(out, e) == NULL);
        CHECK(hs.n == 1);
        CHECK_STR(reflect_encoding_name(hs.last_encoding), "percent");
        CHECK(strstr(out, "token=RUNTIME_PH_") != NULL);
        CHECK(strstr(out, "&state=1") != NULL);
        free(e);
        free(in);
        free(out);
    }
    /* form encoding: a space as '+' */
    struct reflect *r2 = one_value("form value with spaces 12");
    struct hits hs = {0};
    char *out = whole(r2, "q=form+value+with+spaces+12&x", &hs);
    CHECK(hs.n == 1);
    CHECK(strncmp(out, "q=RUNTIME_PH_", 13) == 0);
    free(out);
    reflect_free(r2);
    reflect_free(r);
}

TEST(reflect_json_escaped_and_base64_inside_json)
{
    struct reflect *r = one_value(VALUE);
    char *e = json(VALUE, "<>&");
    char *in = cat3("{\"token\":\"", e, "\"}");
    struct hits hs = {0};
    char *out = whole(r, in, &hs);
    CHECK(strlen(out) == strlen(in));
    CHECK(hs.n == 1);
    CHECK_STR(reflect_encoding_name(hs.last_encoding), "json");
    CHECK(strncmp(out, "{\"token\":\"RUNTIME_PH_", 20) == 0);
    CHECK(strchr(out + 10, '\\') == NULL); /* nothing shows where the escapes were */
    free(in);
    free(out);
    free(e);
    /* every character as \u00XX */
    char all[6 * sizeof VALUE] = "", *o = all;
    for (const char *p = VALUE; *p; p++)
        o += sprintf(o, "\\u%04x", (unsigned char)*p);
    hs.n = 0;
    out = whole(r, all, &hs);
    CHECK(hs.n == 1);
    CHECK(strncmp(out, PH, strlen(PH)) == 0);
    free(out);
    /* base64 (which holds '/') with "\/" inside a JSON string */
    char *enc = b64(VALUE, strlen(VALUE), B64S, true);
    CHECK(strchr(enc, '/') != NULL);
    char *je = json(enc, "");
    in = cat3("{\"b\":\"", je, "\"}");
    hs.n = 0;
    out = whole(r, in, &hs);
    CHECK(hs.n == 1);
    CHECK_STR(reflect_encoding_name(hs.last_encoding), "base64+json");
    CHECK(strstr(out, "\\/") == NULL || strstr(out, "\\/") > out + strlen(in) - 4);
    free(je);
    free(enc);
    free(in);
    free(out);
    reflect_free(r);
}

TEST(reflect_non_ascii_value_as_json_unicode_escapes)
{
    const char *v = "tok\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80-12345"; /* é € 😀 */
    struct reflect *r = one_value(v);
    const char *in = "[\"tok\\u00e9\\u20AC\\ud83d\\ude00-12345\"]";
    struct hits hs = {0};
    char *out = whole(r, in, &hs);
    CHECK(hs.n == 1);
    CHECK(strlen(out) == strlen(in));
    CHECK(strncmp(out, "[\"RUNTIME_PH_", 13) == 0);
    free(out);
    reflect_free(r);
}

TEST(reflect_value_that_looks_like_escapes_echoed_raw_or_encoded)
{
    const char *v = "pre%41fix\\u0041-abc"; /* a value that holds "%41" and "\u0041" */
    struct reflect *r = one_value(v);
    struct hits hs = {0};
    char *out = whole(r, v, &hs); /* echoed as it is */
    CHECK(hs.n == 1);
    CHECK(strncmp(out, PH, strlen(v)) == 0);
    free(out);
    char *e = pct(v, false); /* "pre%2541fix%5Cu0041-abc" */
    hs.n = 0;
    out = whole(r, e, &hs);
    CHECK(hs.n == 1);
    CHECK(strncmp(out, PH, strlen(e) < strlen(PH) ? strlen(e) : strlen(PH)) == 0);
    free(out);
    free(e);
    reflect_free(r);
}

/* Whatever the split, the same bytes come out: across chunk and TLS-record
 * boundaries the scan sees a stream. */
TEST(reflect_same_result_at_every_split)
{
    struct reflect *r = one_value(VALUE);
    char *user = cat3("user:", VALUE, "");
    char *b = b64(user, strlen(user), B64S, true);
    free(user);
    char *p = pct(VALUE, false);
    char *j = json(VALUE, "<>&");
    char *jb = json(b, ""), *pb = pct(b, true);
    char *texts[] = {
        cat3("x ", VALUE, " y"),       cat3("Basic ", b, "\r\n"), cat3("a=", p, "&"),
        cat3("{\"t\":\"", j, "\"}"),   cat3("Basic ", b, ""),     cat3("{\"b\":\"", jb, "\"}"),
        cat3("?auth=Basic%20", pb, "")};
    for (size_t t = 0; t < sizeof texts / sizeof *texts; t++) {
        struct hits h0 = {0};
        char *ref = whole(r, texts[t], &h0);
        CHECK(h0.n == 1);
        size_t n = strlen(texts[t]);
        for (size_t c1 = 1; c1 < n; c1++) {
            for (size_t c2 = c1; c2 < n; c2 += 7) {
                size_t cuts[2] = {c1, c2};
                struct hits hs = {0};
                char *out = stream(r, texts[t], cuts, 2, &hs);
                if (strcmp(out, ref) != 0 || hs.n != 1) {
                    fprintf(stderr, "  text %zu cut at %zu,%zu: %s (%d hits)\n", t, c1, c2, out,
                            hs.n);
                    *failed_ = 1;
                    c1 = n;
                }
                free(out);
                if (*failed_) break;
            }
        }
        free(ref);
        free(texts[t]);
    }
    free(b);
    free(p);
    free(j);
    free(jb);
    free(pb);
    reflect_free(r);
}

TEST(reflect_unsettled_bytes_are_few_and_only_where_a_match_may_be)
{
    struct reflect *r = one_value(VALUE);
    unsigned char buf[64];
    /* text that cannot begin a match is all settled */
    memcpy(buf, "{\"a\": 1}\n\n", 10);
    CHECK(reflect_scan(r, buf, 10, false, NULL, NULL) == 10);
    /* the beginning of the value is held, with the base64 characters before it */
    memcpy(buf, "data: x sk-live_a?", 18);
    CHECK(reflect_scan(r, buf, 18, false, NULL, NULL) == 8);
    memcpy(buf, "data: xsk-live_a?", 17);
    CHECK(reflect_scan(r, buf, 17, false, NULL, NULL) == 6);
    /* a trailing word: its last four characters */
    memcpy(buf, "hello world", 11);
    CHECK(reflect_scan(r, buf, 11, false, NULL, NULL) == 7);
    CHECK(reflect_scan(r, buf, 11, true, NULL, NULL) == 11);
    reflect_free(r);
}

TEST(reflect_short_values_and_near_misses_are_left_alone)
{
    struct reflect *r = reflect_new();
    CHECK(reflect_add(r, "short", 5, PH) == 0);
    CHECK(reflect_empty(r));
    CHECK(reflect_add(r, VALUE, strlen(VALUE), PH) == 1);
    CHECK(reflect_add(r, VALUE, strlen(VALUE), PH) == 0); /* once */
    CHECK(!reflect_empty(r));
    const char *in = "sk-live_a?b>c~d/e+f=g&h >>?? 012345678 sk-live_a%3Fb%3Ec~d%2Fe%2B 50%";
    struct hits hs = {0};
    char *out = whole(r, in, &hs);
    CHECK_STR(out, in);
    CHECK(hs.n == 0);
    free(out);
    reflect_free(r);
    reflect_free(NULL);
}

TEST(reflect_several_values_each_with_its_placeholder)
{
    struct reflect *r = reflect_new();
    const char *ph2 = "RUNTIME_PH_ffffffffffffffffffffffffffffffff";
    CHECK(reflect_add(r, "first-value-0123", 16, PH) == 1);
    CHECK(reflect_add(r, "second-value-4567", 17, ph2) == 1);
    struct hits hs = {0};
    char *out = whole(r, "[first-value-0123,second-value-4567]", &hs);
    CHECK_STR(out, "[RUNTIME_PH_01234,RUNTIME_PH_ffffff]");
    CHECK(hs.n == 2);
    free(out);
    for (int i = 0; i < REFLECT_VALUES_MAX - 2; i++) {
        char v[32];
        snprintf(v, sizeof v, "another-value-%04d", i);
        CHECK(reflect_add(r, v, strlen(v), PH) == 1);
    }
    CHECK(reflect_add(r, "one-too-many-values", 19, PH) == -ENOSPC);
    reflect_free(r);
}

/* Escapes inside a base64 text (a JSON encoder's "\/", a URL's %2B and %2F):
 * the groups the value shares with its neighbours are overwritten too. */
TEST(reflect_base64_edges_through_escapes)
{
    struct reflect *r = one_value(VALUE);
    const char *prefixes[] = {"", "u:", "us:", "user:"};
    for (size_t p = 0; p < 4; p++) {
        char *plain = cat3(prefixes[p], VALUE, "");
        char *enc = b64(plain, strlen(plain), B64S, true);
        size_t pl = strlen(prefixes[p]), n = strlen(plain);
        /* the groups that hold value bytes and neighbours' */
        char head[5] = "", tail[5] = "";
        if (pl % 3) memcpy(head, enc + pl / 3 * 4, 4);
        if (n % 3) memcpy(tail, enc + strlen(enc) - 4, 4);
        for (int style = 0; style < 2; style++) {
            char *esc = style ? pct(enc, false) : json(enc, "");
            struct hits hs = {0};
            char *out = whole(r, esc, &hs);
            CHECK(hs.n == 1);
            CHECK(strlen(out) == strlen(esc));
            char *back = style ? pct(head, false) : json(head, "");
            char *back2 = style ? pct(tail, false) : json(tail, "");
            if ((head[0] && strstr(out, back)) || (tail[0] && strstr(out, back2))) {
                fprintf(stderr, "  prefix \"%s\" %s: an edge group survived: %s\n", prefixes[p],
                        style ? "percent" : "json", out);
                *failed_ = 1;
            }
            free(back);
            free(back2);
            free(out);
            free(esc);
        }
        free(enc);
        free(plain);
    }
    reflect_free(r);
}

/* A long answer (the scan passes over sixteen bytes at a time): the value at
 * every offset modulo 16, plainly and percent-encoded, among text full of the
 * value's first bytes and of escapes, is found each time and nothing else is
 * touched. */
TEST(reflect_long_text_every_offset)
{
    struct reflect *r = one_value(VALUE);
    char *e = pct(VALUE, false);
    size_t cap = 64 * 1024, n = 0;
    char *in = malloc(cap), *want = malloc(cap);
    unsigned x = 12345;
    int placed = 0;
    for (int k = 0; n + 400 < cap; k++) {
        size_t filler = 16 + (size_t)(k % 16);
        for (size_t i = 0; i < filler; i++) { /* the value's first bytes, escapes, text */
            x = x * 1103515245 + 12345;
            const char *alpha = "sk-li%\\u+/= abcXYZ09\"";
            in[n] = want[n] = alpha[(x >> 16) % strlen(alpha)];
            n++;
        }
        const char *v = k % 2 ? e : VALUE;
        size_t vl = strlen(v);
        memcpy(in + n, v, vl);
        for (size_t i = 0; i < vl; i++)
            want[n + i] = i < strlen(PH) ? PH[i] : 'x';
        n += vl;
        in[n] = want[n] = ' ';
        n++;
        placed++;
    }
    in[n] = want[n] = '\0';
    struct hits hs = {0};
    char *out = whole(r, in, &hs);
    CHECK(hs.n == placed);
    CHECK(strcmp(out, want) == 0);
    free(out);
    free(in);
    free(want);
    free(e);
    reflect_free(r);
}

/* The end of an answer inside what could have been a match: the final scan
 * settles everything (the proxy would otherwise wait for bytes that never come). */
TEST(reflect_final_scan_settles_a_match_cut_by_the_end)
{
    struct reflect *r = one_value(VALUE);
    char text[64];
    snprintf(text, sizeof text, "x=%.20s", VALUE);
    size_t n = strlen(text);
    CHECK(reflect_scan(r, (unsigned char *)text, n, false, NULL, NULL) < n);
    CHECK(reflect_scan(r, (unsigned char *)text, n, true, NULL, NULL) == n);
    reflect_free(r);
}

/* Unpadded base64url of the value and then the value itself, with nothing
 * between: the group after the base64 takes only the characters that hold
 * value bits, and the value that follows is found too. */
TEST(reflect_value_right_after_its_unpadded_base64)
{
    const char *v = "sk-0123456789abcdefghijkl"; /* 25 bytes: the last group holds 1 value byte */
    struct reflect *r = one_value(v);
    char *enc = b64(v, strlen(v), B64U, false);
    char *in = cat3(enc, v, "");
    struct hits hs = {0};
    char *out = whole(r, in, &hs);
    CHECK(hs.n == 2);
    CHECK(strstr(out, v) == NULL && strstr(out, v + 2) == NULL);
    CHECK(strstr(out, enc) == NULL);
    free(out);
    free(in);
    free(enc);
    reflect_free(r);
}
