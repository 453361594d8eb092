/* libFuzzer target for src/http: the bytes are what a sandbox sends on an
 * intercepted connection (plaintext after TLS), up to 4 pipelined requests.
 * Besides memory safety (ASan, UBSan) it checks what the proxy relies on:
 *  - a verdict other than MORE on a prefix is the whole input's, with the
 *    same head; a smaller max_head only turns verdicts into BAD; every BAD
 *    has a reason;
 *  - an accepted head has a method of A-Z, a lower-case host, a path that is
 *    "*" or starts with '/' with no "//", no dot segment, no %2F, and the
 *    path is matched by the glob "/" "**" and by itself as a glob (when it
 *    is one); the target text as a glob never crashes and, without '*',
 *    matches exactly itself;
 *  - the body scanner gives the same verdict and length however the bytes
 *    are split (one cut at a point chosen from the input);
 *  - the rewritten head parses again with the same method, host, port and
 *    framing; it holds the kept fields in order, none hop-by-hop, each value
 *    equal to the original with placeholders swapped (recomputed here
 *    independently; Authorization's Basic payload excepted); its target is
 *    the original origin with the values percent-encoded; a value with a
 *    control character always refuses the whole head; "does not parse" only
 *    follows a value put in the target.
 * Build (from the repository root; or `make fuzz`, then tests/fuzz/run 300 http):
 *   clang -std=gnu17 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined \
 *     -fno-sanitize-recover=undefined -Isrc \
 *     tests/fuzz/fuzz_http.c src/http/body.c src/http/parse.c src/http/path.c \
 *     src/http/rewrite.c -o build/fuzz_http
 *   build/fuzz_http -dict=tests/fuzz/http.dict -max_len=4096 tests/fuzz/corpus/http */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define FUZZ_NAME "fuzz_http"
#include "fuzz.h"
#include "http/http.h"

#define BIG_MAX (1u << 20)
#define PFX "RUNTIME_PH_"
#define PFX_LEN 11
#define TOKEN_LEN (PFX_LEN + 32)

static struct http_request full_, part_, again_;

/* ---- values the decide callback hands out ---- */

static const struct value {
    const char *s;
    size_t n; /* 0: strlen(s) */
    int bad;  /* a control character: the rewrite must refuse */
} values[] = {
    {NULL, 0, 0},
    {"ghp_0123456789abcdefABCDEF", 0, 0},
    {"", 0, 0},
    {"va lue+/=:@;,\"'", 0, 0},
    {"\xc3\xa9t\xc3\xa9\tx", 0, 0},
    {"bad\r\nX-Injected: 1", 0, 1},
    {"nul\0x", 5, 1},
    {"..", 0, 0},
};

struct decider {
    uint32_t salt;
    int bad, in_target;
};

static size_t value_len(const struct value *v)
{
    return v->n ? v->n : v->s ? strlen(v->s) : 0;
}

static const struct value *pick(uint32_t salt, const char *token)
{
    uint32_t h = salt;
    for (size_t i = 0; i < TOKEN_LEN; i++)
        h = (h ^ (unsigned char)token[i]) * 16777619u;
    return &values[(h >> 8) % (sizeof values / sizeof values[0])];
}

static const char *decide(void *arg, const struct http_request *req,
                          const struct http_placeholder *ph, size_t *len)
{
    struct decider *d = arg;
    REQUIRE(strlen(ph->token) == TOKEN_LEN && !memcmp(ph->token, PFX, PFX_LEN));
    REQUIRE((ph->where == HTTP_IN_TARGET) == (ph->field == NULL));
    const struct value *v = pick(d->salt, ph->token);
    if (v->s && v->bad) d->bad = 1;
    if (v->s && ph->where == HTTP_IN_TARGET) d->in_target = 1;
    *len = value_len(v);
    return v->s;
}

/* ---- an independent placeholder substitution ---- */

static int is_alnum(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static int token_at(const unsigned char *s, size_t n)
{
    if (n < TOKEN_LEN || memcmp(s, PFX, PFX_LEN)) return 0;
    for (size_t i = PFX_LEN; i < TOKEN_LEN; i++) {
        if (!is_alnum(s[i])) return 0;
    }
    return 1;
}

struct buf {
    unsigned char *p;
    size_t n, cap;
};

static void add(struct buf *b, const void *d, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        REQUIRE(b->p);
    }
    if (n) memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void subst(struct buf *out, const unsigned char *s, size_t n, uint32_t salt, int pct)
{
    for (size_t i = 0; i < n;) {
        if (!token_at(s + i, n - i)) {
            add(out, s + i, 1);
            i++;
            continue;
        }
        char token[TOKEN_LEN + 1];
        memcpy(token, s + i, TOKEN_LEN);
        token[TOKEN_LEN] = '\0';
        const struct value *v = pick(salt, token);
        if (!v->s) {
            add(out, token, TOKEN_LEN);
        } else {
            for (size_t k = 0; k < value_len(v); k++) {
                unsigned char c = (unsigned char)v->s[k];
                char e[4];
                int keep = !pct || is_alnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
                snprintf(e, sizeof e, "%%%02X", c);
                add(out, keep ? (const char *)&c : e, keep ? 1 : 3);
            }
        }
        i += TOKEN_LEN;
    }
}

static int ows(unsigned char c)
{
    return c == ' ' || c == '\t';
}

static int span_is(const char *b, struct http_span s, const char *lower)
{
    return s.len == strlen(lower) && !strncasecmp(b + s.off, lower, s.len);
}

static int hop_name(const char *b, struct http_span s)
{
    static const char *const hop[] = {"connection", "keep-alive", "proxy-connection",
                                      "te",         "trailer",    "upgrade"};
    for (size_t i = 0; i < sizeof hop / sizeof hop[0]; i++) {
        if (span_is(b, s, hop[i])) return 1;
    }
    return s.len >= 6 && !strncasecmp(b + s.off, "proxy-", 6);
}

/* ---- checks ---- */

/* The target's text as a glob against the path: no crash, and a glob
 * without '*' matches only its own text. */
static void check_glob(const char *b, const struct http_request *r)
{
    char *t = malloc(r->target.len + 1);
    REQUIRE(t);
    memcpy(t, b + r->target.off, r->target.len);
    t[r->target.len] = '\0';
    int valid = http_glob_valid(t, NULL), match = http_glob_match(t, r->path);
    if (!valid) REQUIRE(!match);
    if (valid && !strchr(t, '*')) REQUIRE(match == !strcmp(t, r->path));
    free(t);
}

/* A glob made from the path by replacing segments with '*' or "**" (or
 * their tails with '*') must match it; without "**", a glob with another
 * number of segments must not. */
static void check_derived_glob(const char *path, uint32_t h)
{
    size_t n = strlen(path), o = 0;
    char *g = malloc(2 * n + 8);
    REQUIRE(g);
    int dstar = 0;
    for (const char *s = path + 1;;) {
        size_t len = strcspn(s, "/");
        unsigned how = h & 3;
        h = h >> 2 | h << 30;
        g[o++] = '/';
        if (how == 1) {
            g[o++] = '*';
        } else if (how == 2) {
            memcpy(g + o, "**", 2), o += 2, dstar = 1;
        } else if (how == 3 && len > 0) {
            g[o++] = s[0];
            g[o++] = '*';
        } else {
            memcpy(g + o, s, len), o += len;
        }
        if (!s[len]) break;
        s += len + 1;
    }
    g[o] = '\0';
    if (http_glob_valid(g, NULL)) REQUIRE(http_glob_match(g, path));
    if (!dstar) {
        memcpy(g + o, "/x", 3);
        if (http_glob_valid(g, NULL)) REQUIRE(!http_glob_match(g, path));
    }
    free(g);
}

static void check_head(const char *b, const struct http_request *r, size_t len)
{
    size_t m = strlen(r->method);
    REQUIRE(m >= 1 && m <= 20 && strspn(r->method, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") == m);
    REQUIRE(strcmp(r->method, "TRACE") && strcmp(r->method, "CONNECT"));
    REQUIRE(r->host[0] && strlen(r->host) < HTTP_HOST_MAX);
    for (const char *p = r->host; *p; p++)
        REQUIRE(!(*p >= 'A' && *p <= 'Z'));
    REQUIRE(r->head_len >= 4 && r->head_len <= len);
    REQUIRE(!memcmp(b + r->head_len - 4, "\r\n\r\n", 4));
    REQUIRE(r->minor == 0 || r->minor == 1);
    REQUIRE(r->nfields <= HTTP_FIELDS_MAX);
    for (size_t i = 0; i < r->nfields; i++) {
        const struct http_field *f = &r->fields[i];
        REQUIRE(f->name.len > 0 && f->name.off + f->name.len < r->head_len);
        REQUIRE(f->value.off + f->value.len <= r->head_len);
        if (f->value.len)
            REQUIRE(!ows(b[f->value.off]) && !ows(b[f->value.off + f->value.len - 1]));
        REQUIRE(!memchr(b + f->value.off, '\r', f->value.len));
        if (hop_name(b, f->name)) REQUIRE(f->hop);
    }
    REQUIRE(r->framing != HTTP_BODY_CHUNKED || r->minor == 1);
    const char *p = r->path;
    if (strcmp(p, "*") == 0) {
        REQUIRE(!strcmp(r->method, "OPTIONS"));
        return;
    }
    REQUIRE(p[0] == '/' && strlen(p) < HTTP_PATH_MAX);
    REQUIRE(!strstr(p, "//") && !strstr(p, "/./") && !strstr(p, "/../"));
    REQUIRE(!strcasestr(p, "%2F") && !strcasestr(p, "%5C") && !strcasestr(p, "%2E"));
    REQUIRE(!strchr(p, '\\') && !strchr(p, '?') && !strchr(p, '#'));
    size_t pl = strlen(p);
    REQUIRE(!(pl >= 2 && !strcmp(p + pl - 2, "/.")) && !(pl >= 3 && !strcmp(p + pl - 3, "/..")));
    REQUIRE(http_glob_match("/**", p));
    if (!strchr(p, '*') && http_glob_valid(p, NULL)) REQUIRE(http_glob_match(p, p));
    check_glob(b, r);
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < r->head_len; i++)
        h = (h ^ (unsigned char)b[i]) * 16777619u;
    check_derived_glob(p, h);
}

/* The verdict on a prefix, or under a smaller max, never contradicts the whole's. */
static void check_prefix(const char *b, size_t k, size_t max, enum http_result full)
{
    const char *why = NULL;
    enum http_result r = http_request_parse(b, k, max, &part_, &why);
    REQUIRE((r == HTTP_BAD) == (why != NULL));
    if (r == HTTP_BAD && max < BIG_MAX) return;
    REQUIRE(r == HTTP_MORE || r == full);
    if (r == HTTP_OK) {
        REQUIRE(part_.head_len == full_.head_len && !strcmp(part_.path, full_.path) &&
                !strcmp(part_.host, full_.host) && part_.framing == full_.framing &&
                part_.content_length == full_.content_length);
    }
}

static size_t check_body(const char *b, size_t n, uint32_t h, enum http_result *res)
{
    struct http_body whole, split;
    size_t used = 0, u1 = 0, u2 = 0, k = n ? h % (n + 1) : 0;
    const char *why = NULL;
    http_body_init(&whole, &full_);
    enum http_result r = http_body_feed(&whole, b, n, &used, &why);
    REQUIRE(used <= n && (r == HTTP_BAD) == (why != NULL));
    if (r == HTTP_MORE) REQUIRE(used == n);
    if (full_.framing == HTTP_BODY_LENGTH && r == HTTP_OK) REQUIRE(used == full_.content_length);
    if (full_.framing == HTTP_BODY_NONE) REQUIRE(r == HTTP_OK && used == 0);

    http_body_init(&split, &full_);
    enum http_result r1 = http_body_feed(&split, b, k, &u1, &why);
    if (r1 != HTTP_MORE) {
        REQUIRE(r1 == r && u1 == used);
    } else {
        REQUIRE(u1 == k);
        enum http_result r2 = http_body_feed(&split, b + k, n - k, &u2, &why);
        REQUIRE(r2 == r && u1 + u2 == used);
    }
    *res = r;
    return used;
}

static void check_rewrite(const char *b, uint32_t salt)
{
    size_t cap = 4 * full_.head_len + 4096, n = 0;
    char *out = malloc(cap);
    REQUIRE(out);
    struct decider d = {.salt = salt};
    const char *why = NULL;
    enum http_result r = http_request_rewrite(b, &full_, PFX, decide, &d, out, cap, &n, &why);
    if (d.bad) {
        REQUIRE(r == HTTP_BAD && !strcmp(why, "control character in secret value"));
        goto out;
    }
    if (r == HTTP_BAD) {
        if (getenv("FUZZ_TRACE")) fprintf(stderr, "rewrite refused: %s\n", why);
        REQUIRE(!strcmp(why, "rewritten head does not parse") && d.in_target);
        goto out;
    }
    REQUIRE(r == HTTP_OK && n > 0 && n <= cap);
    REQUIRE(http_request_parse(out, n, n, &again_, &why) == HTTP_OK && again_.head_len == n);
    REQUIRE(!strcmp(again_.method, full_.method) && !strcmp(again_.host, full_.host) &&
            again_.port == full_.port && again_.framing == full_.framing &&
            again_.content_length == full_.content_length && again_.minor == full_.minor);

    /* The target: origin-form, placeholders swapped and percent-encoded. */
    struct buf want = {0};
    const unsigned char *origin = (const unsigned char *)b + full_.origin.off;
    if (full_.origin.len == 0 || origin[0] == '?') add(&want, "/", 1);
    subst(&want, origin, full_.origin.len, salt, 1);
    REQUIRE(again_.target.len == want.n && !memcmp(out + again_.target.off, want.p, want.n));

    /* The fields: the kept ones in order, values swapped. */
    size_t j = 0;
    for (size_t i = 0; i < full_.nfields; i++) {
        const struct http_field *f = &full_.fields[i];
        if (f->hop) continue;
        REQUIRE(j < again_.nfields);
        const struct http_field *g = &again_.fields[j++];
        REQUIRE(g->name.len == f->name.len &&
                !memcmp(out + g->name.off, b + f->name.off, f->name.len));
        REQUIRE(!g->hop && !hop_name(out, g->name));
        if (span_is(b, f->name, "authorization")) continue;
        want.n = 0;
        if (span_is(b, f->name, "host"))
            add(&want, b + f->value.off, f->value.len);
        else
            subst(&want, (const unsigned char *)b + f->value.off, f->value.len, salt, 0);
        size_t s = 0, e = want.n;
        while (s < e && ows(want.p[s]))
            s++;
        while (e > s && ows(want.p[e - 1]))
            e--;
        REQUIRE(g->value.len == e - s && !memcmp(out + g->value.off, want.p + s, e - s));
    }
    REQUIRE(j == again_.nfields);
    free(want.p);
out:
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *b = (const char *)data;
    size_t pos = 0;
    for (int req = 0; req < 4 && pos <= size; req++) {
        const char *p = b + pos;
        size_t n = size - pos;
        uint32_t h = 2166136261u;
        for (size_t i = 0; i < n; i++)
            h = (h ^ data[pos + i]) * 16777619u;

        const char *why = NULL;
        enum http_result full = http_request_parse(p, n, BIG_MAX, &full_, &why);
        REQUIRE(full <= HTTP_BAD && (full == HTTP_BAD) == (why != NULL));
        if (n > 0) {
            check_prefix(p, n - 1, BIG_MAX, full);
            check_prefix(p, n / 2, BIG_MAX, full);
            check_prefix(p, h % n, BIG_MAX, full);
            check_prefix(p, n, (h >> 8) % (n + 1), full);
        }
        if (full == HTTP_OK) {
            REQUIRE(http_request_parse(p, n, full_.head_len, &part_, &why) == HTTP_OK);
            check_prefix(p, n, full_.head_len, full);
            REQUIRE(http_request_parse(p, n, full_.head_len - 1, &part_, &why) == HTTP_BAD);
        }
        if (full != HTTP_OK) return 0;
        check_head(p, &full_, n);
        check_rewrite(p, h);
        enum http_result body;
        size_t used = check_body(p + full_.head_len, n - full_.head_len, h >> 4, &body);
        if (body != HTTP_OK) return 0;
        pos += full_.head_len + used;
    }
    return 0;
}
