/* The head the proxy forwards: the parsed head written again with each
 * placeholder the caller allows swapped for its value and the fields meant
 * for this hop only left out. The result is parsed again before it is handed
 * back, so whatever the values are, what leaves is a head this reader would
 * itself accept, for the same method, host and framing. */
#include <stdlib.h>
#include <string.h>

#include "http_impl.h"

static const char HEX[] = "0123456789ABCDEF";
static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* An output buffer: the caller's (fixed) or a scratch one that grows. */
struct sink {
    unsigned char *p;
    size_t len, cap;
    bool grow, full, nomem;
};

static void put(struct sink *s, const void *d, size_t n)
{
    if (s->full || n == 0) return;
    if (n > s->cap - s->len) {
        size_t cap = s->cap ? s->cap : 256;
        while (s->grow && cap - s->len < n && cap < SIZE_MAX / 2)
            cap *= 2;
        if (!s->grow || cap - s->len < n) {
            s->full = true;
            return;
        }
        /* Not realloc: the old block holds secret values and is wiped first. */
        unsigned char *np = malloc(cap);
        if (!np) {
            s->full = s->nomem = true;
            return;
        }
        if (s->len) memcpy(np, s->p, s->len);
        if (s->p) explicit_bzero(s->p, s->cap);
        free(s->p);
        s->p = np;
        s->cap = cap;
    }
    memcpy(s->p + s->len, d, n);
    s->len += n;
}

static void puts_(struct sink *s, const char *str)
{
    put(s, str, strlen(str));
}

/* Every byte but the unreserved ones as %XX, as a client that had the value
 * itself would have written it into a path segment or a query parameter. */
static void put_pct(struct sink *s, const unsigned char *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char e[3] = {'%', HEX[v[i] >> 4], HEX[v[i] & 15]};
        if (http_unreserved(v[i]))
            put(s, v + i, 1);
        else
            put(s, e, 3);
    }
}

struct rewriter {
    const unsigned char *b;
    const struct http_request *req;
    const char *prefix;
    size_t plen;
    http_decide_fn decide;
    void *arg;
    const char *why; /* the first failure */
};

static bool alnum(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static bool random_part(const unsigned char *s, size_t n)
{
    if (n < HTTP_PLACEHOLDER_RANDOM) return false;
    for (size_t i = 0; i < HTTP_PLACEHOLDER_RANDOM; i++) {
        if (!alnum(s[i])) return false;
    }
    return true;
}

/* Secret values go into a head as they are: a byte that ends or splits a
 * line, or that no field value may hold, would let the value inject one. */
static bool value_ok(const unsigned char *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if ((v[i] < 0x20 && v[i] != '\t') || v[i] == 0x7f) return false;
    }
    return true;
}

/* Copies s[0..n) to out with the placeholders swapped; false on a refused value. */
static bool swap(struct rewriter *rw, struct sink *out, const unsigned char *s, size_t n,
                 enum http_where where, const struct http_field *f)
{
    size_t i = 0, done = 0, tl = rw->plen + HTTP_PLACEHOLDER_RANDOM;
    while (i < n && n - i >= tl) {
        const unsigned char *hit = memmem(s + i, n - i, rw->prefix, rw->plen);
        if (!hit) break;
        size_t at = (size_t)(hit - s);
        if (!random_part(hit + rw->plen, n - at - rw->plen)) {
            i = at + 1;
            continue;
        }
        char token[HTTP_PREFIX_MAX + HTTP_PLACEHOLDER_RANDOM + 1];
        memcpy(token, hit, tl);
        token[tl] = '\0';
        struct http_placeholder ph = {
            .token = token,
            .where = where,
            .field = f ? (const char *)rw->b + f->name.off : NULL,
            .field_len = f ? f->name.len : 0,
        };
        size_t vn = 0;
        const unsigned char *v = (const unsigned char *)rw->decide(rw->arg, rw->req, &ph, &vn);
        put(out, s + done, at - done);
        if (!v) {
            put(out, token, tl);
        } else if (!value_ok(v, vn)) {
            rw->why = "control character in secret value";
            return false;
        } else if (where == HTTP_IN_TARGET) {
            put_pct(out, v, vn);
        } else {
            put(out, v, vn);
        }
        i = done = at + tl;
    }
    put(out, s + done, n - done);
    return true;
}

/* ---- Authorization: Basic ---- */

static int b64_value(unsigned char c)
{
    const char *p = c ? strchr(B64, c) : NULL;
    return p ? (int)(p - B64) : -1;
}

/* Standard alphabet, padded or not. Spare bits must be zero, so that
 * encoding the result again gives back the same text. */
static bool b64_decode(const unsigned char *s, size_t n, unsigned char *out, size_t *out_len,
                       bool *padded)
{
    size_t pad = 0;
    while (pad < 2 && pad < n && s[n - 1 - pad] == '=')
        pad++;
    size_t d = n - pad;
    if (d % 4 == 1 || (pad && (n % 4 || (4 - d % 4) != pad))) return false;
    uint32_t acc = 0;
    unsigned bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < d; i++) {
        int v = b64_value(s[i]);
        if (v < 0) return false;
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    if (acc) return false;
    *out_len = o;
    *padded = pad > 0;
    return true;
}

static void b64_encode(struct sink *s, const unsigned char *in, size_t n, bool pad)
{
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        size_t k = n - i < 3 ? n - i : 3;
        if (k > 1) v |= (uint32_t)in[i + 1] << 8;
        if (k > 2) v |= in[i + 2];
        char q[4] = {B64[v >> 18], B64[(v >> 12) & 63], B64[(v >> 6) & 63], B64[v & 63]};
        put(s, q, k + 1);
        if (k < 3 && pad) put(s, "==", 3 - k);
    }
}

/* "Basic" 1*SP token68: where the token starts. */
static bool basic_token(const unsigned char *v, size_t n, size_t *tok)
{
    if (n < 7 || !http_name_is(v, 5, "basic") || v[5] != ' ') return false;
    size_t i = 5;
    while (i < n && v[i] == ' ')
        i++;
    if (i == n || memchr(v + i, ' ', n - i) || memchr(v + i, '\t', n - i)) return false;
    *tok = i;
    return true;
}

/* The credentials decoded, swapped and encoded again; false when they are not
 * Basic credentials (then the value is searched as it is). */
static bool basic_swap(struct rewriter *rw, struct sink *out, const struct http_field *f, bool *ok)
{
    const unsigned char *v = rw->b + f->value.off;
    size_t n = f->value.len, tok, dn = 0;
    bool padded = false;
    if (!basic_token(v, n, &tok)) return false;
    unsigned char *dec = malloc(n);
    if (!dec) {
        rw->why = "out of memory";
        *ok = false;
        return true;
    }
    if (!b64_decode(v + tok, n - tok, dec, &dn, &padded)) {
        free(dec);
        return false;
    }
    struct sink s = {.grow = true};
    *ok = swap(rw, &s, dec, dn, HTTP_IN_BASIC, f);
    if (*ok && s.nomem) {
        rw->why = "out of memory";
        *ok = false;
    }
    if (*ok) {
        put(out, v, tok);
        if (s.len == dn && (dn == 0 || !memcmp(s.p, dec, dn)))
            put(out, v + tok, n - tok);
        else
            b64_encode(out, s.p, s.len, padded || (n - tok) % 4 == 0);
    }
    /* Both hold credentials, the swapped one a secret's value. */
    if (s.p) explicit_bzero(s.p, s.cap);
    explicit_bzero(dec, n);
    free(s.p);
    free(dec);
    return true;
}

/* ---- the head ---- */

static bool write_field(struct rewriter *rw, struct sink *out, const struct http_field *f)
{
    const unsigned char *name = rw->b + f->name.off, *v = rw->b + f->value.off;
    put(out, name, f->name.len);
    put(out, ": ", 2);
    bool ok = true;
    if (http_name_is(name, f->name.len, "host"))
        put(out, v, f->value.len);
    else if (!http_name_is(name, f->name.len, "authorization") || !basic_swap(rw, out, f, &ok))
        ok = swap(rw, out, v, f->value.len, HTTP_IN_HEADER, f);
    put(out, "\r\n", 2);
    return ok;
}

static bool write_head(struct rewriter *rw, struct sink *out)
{
    const struct http_request *req = rw->req;
    const unsigned char *origin = rw->b + req->origin.off;
    puts_(out, req->method);
    put(out, " ", 1);
    if (req->origin.len == 0 || origin[0] == '?') put(out, "/", 1);
    if (!swap(rw, out, origin, req->origin.len, HTTP_IN_TARGET, NULL)) return false;
    puts_(out, req->minor ? " HTTP/1.1\r\n" : " HTTP/1.0\r\n");
    for (size_t i = 0; i < req->nfields && !out->full; i++) {
        if (!req->fields[i].hop && !write_field(rw, out, &req->fields[i])) return false;
    }
    put(out, "\r\n", 2);
    return true;
}

/* The rewritten head must read as the same request to this reader. */
static const char *check(const char *out, size_t n, const struct http_request *req)
{
    struct http_request *again = malloc(sizeof *again);
    if (!again) return "out of memory";
    const char *why = NULL;
    bool same = http_request_parse(out, n, n, again, &why) == HTTP_OK && again->head_len == n &&
                !strcmp(again->method, req->method) && !strcmp(again->host, req->host) &&
                again->port == req->port && again->framing == req->framing &&
                again->content_length == req->content_length;
    explicit_bzero(again->path, sizeof again->path); /* may hold a value put in the target */
    free(again);
    return same ? NULL : "rewritten head does not parse";
}

enum http_result http_request_rewrite(const char *buf, const struct http_request *req,
                                      const char *prefix, http_decide_fn decide, void *arg,
                                      char *out, size_t out_size, size_t *out_len, const char **why)
{
    const char *ignored;
    if (!why) why = &ignored;
    *why = NULL;
    *out_len = 0;
    size_t plen = prefix ? strlen(prefix) : 0;
    if (plen == 0 || plen > HTTP_PREFIX_MAX) {
        *why = "bad placeholder prefix";
        return HTTP_BAD;
    }
    struct rewriter rw = {(const unsigned char *)buf, req, prefix, plen, decide, arg, NULL};
    struct sink o = {.p = (unsigned char *)out, .cap = out_size};
    if (!write_head(&rw, &o))
        *why = rw.why;
    else if (o.full)
        *why = "rewritten head too large";
    else
        *why = check(out, o.len, req);
    if (*why) {
        explicit_bzero(out, o.len); /* a part may hold values; none of it is sent */
        return HTTP_BAD;
    }
    *out_len = o.len;
    return HTTP_OK;
}
