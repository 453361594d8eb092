/* The request head: found whole first (line ends checked as bytes arrive),
 * then read line by line, then judged as a whole (Host, framing, Connection).
 * Every rule refuses rather than guesses: whatever this reader accepts, an
 * RFC 9112 server reads the same way, so the body the proxy forwards is the
 * body the server expects and no second request hides in it. */
#include <arpa/inet.h>
#include <string.h>
#include <strings.h>

#include "../sniff/sniff.h"
#include "http_impl.h"

#define METHOD_LEN_MAX 20
#define CONTENT_LENGTH_DIGITS_MAX 18 /* below 2^63: no overflow anywhere downstream */

/* ---- characters ---- */

bool http_unreserved(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~';
}

int http_hex(unsigned char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return HTTP_NOT_HEX;
}

unsigned char http_lower(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? (unsigned char)(c - 'A' + 'a') : c;
}

bool http_name_is(const unsigned char *p, size_t n, const char *s)
{
    if (strlen(s) != n) return false;
    for (size_t i = 0; i < n; i++) {
        if (http_lower(p[i]) != (unsigned char)s[i]) return false;
    }
    return true;
}

static bool span_eq_ci(const unsigned char *a, size_t an, const unsigned char *b, size_t bn)
{
    if (an != bn) return false;
    for (size_t i = 0; i < an; i++) {
        if (http_lower(a[i]) != http_lower(b[i])) return false;
    }
    return true;
}

static bool ows(unsigned char c)
{
    return c == ' ' || c == '\t';
}

static enum http_result refuse(const char **why, const char *what)
{
    *why = what;
    return HTTP_BAD;
}

/* ---- host names: sniff_authority, so a Host compares with the SNI ---- */

_Static_assert(HTTP_HOST_MAX == SNIFF_NAME_MAX, "Host and SNI buffers must agree");

/* ---- the end of the head ---- */

/* Finds CRLF CRLF within the first max bytes. Line ends are checked as they
 * arrive: a bare LF, a CR not followed by LF, or a NUL is BAD at once. */
static enum http_result head_end(const unsigned char *b, size_t len, size_t max, size_t *end,
                                 const char **why)
{
    size_t lim = len < max ? len : max, line = 0;
    for (size_t i = 0; i < lim; i++) {
        if (b[i] == '\n') return refuse(why, "bare LF");
        if (b[i] == '\0') return refuse(why, "NUL in head");
        if (b[i] != '\r') continue;
        if (i + 1 == lim) break;
        if (b[i + 1] != '\n') return refuse(why, "bare CR");
        if (i == line) {
            *end = i + 2;
            return HTTP_OK;
        }
        i++;
        line = i + 1;
    }
    if (len >= max) return refuse(why, "head too large");
    return HTTP_MORE;
}

/* ---- request line ---- */

/* The path part (up to '?') of p[0..n), which starts with '/', normalised. */
static enum http_result target_path(const unsigned char *p, size_t n, struct http_request *req,
                                    const char **why)
{
    const unsigned char *q = memchr(p, '?', n);
    if (q) n = (size_t)(q - p);
    return http_path_normalize(p, n, req->path, why) ? HTTP_OK : HTTP_BAD;
}

struct target_host {
    bool named; /* absolute-form: the target names its host */
    char host[HTTP_HOST_MAX];
    unsigned port; /* with the scheme's default filled in */
    unsigned dflt; /* the scheme's default port */
};

/* "http[s]://authority[/path][?query]": the authority must agree with Host. */
static enum http_result absolute_form(const unsigned char *b, struct http_request *req,
                                      struct target_host *th, const char **why)
{
    const unsigned char *t = b + req->target.off;
    size_t n = req->target.len, skip = 0;
    unsigned dflt = 0;
    if (n >= 7 && !strncasecmp((const char *)t, "http://", 7)) skip = 7, dflt = 80;
    if (n >= 8 && !strncasecmp((const char *)t, "https://", 8)) skip = 8, dflt = 443;
    if (!skip) return refuse(why, "bad request target");
    size_t end = skip;
    while (end < n && t[end] != '/' && t[end] != '?')
        end++;
    if (memchr(t + skip, '@', end - skip)) return refuse(why, "userinfo in target");
    if (!sniff_authority(t + skip, end - skip, th->host, &th->port))
        return refuse(why, "bad request target");
    th->dflt = dflt;
    if (!th->port) th->port = dflt;
    th->named = true;
    req->origin = (struct http_span){req->target.off + end, n - end};
    if (end < n && t[end] == '/') return target_path(t + end, n - end, req, why);
    memcpy(req->path, "/", 2);
    return HTTP_OK;
}

static enum http_result request_target(const unsigned char *b, struct http_request *req,
                                       struct target_host *th, const char **why)
{
    const unsigned char *t = b + req->target.off;
    size_t n = req->target.len;
    if (memchr(t, '#', n)) return refuse(why, "fragment in target");
    if (memchr(t, '\\', n)) return refuse(why, "backslash in path");
    if (t[0] == '/') {
        req->origin = req->target;
        return target_path(t, n, req, why);
    }
    if (n == 1 && t[0] == '*' && !strcmp(req->method, "OPTIONS")) {
        req->origin = req->target;
        memcpy(req->path, "*", 2);
        return HTTP_OK;
    }
    return absolute_form(b, req, th, why);
}

/* "METHOD SP target SP HTTP/1.x", eol at the CR. */
static enum http_result request_line(const unsigned char *b, size_t eol, struct http_request *req,
                                     struct target_host *th, const char **why)
{
    size_t i = 0;
    while (i < eol && b[i] >= 'A' && b[i] <= 'Z')
        i++;
    if (i == 0 || i > METHOD_LEN_MAX) return refuse(why, "bad method");
    if (i == eol || b[i] != ' ') return refuse(why, "bad request line");
    memcpy(req->method, b, i);
    req->method[i] = '\0';

    size_t start = ++i;
    while (i < eol && b[i] >= 0x21 && b[i] <= 0x7e)
        i++;
    if (i == start || i == eol || b[i] != ' ') return refuse(why, "bad request line");
    req->target = (struct http_span){start, i - start};

    const unsigned char *v = b + i + 1;
    size_t vn = eol - i - 1;
    if (vn == 8 && !memcmp(v, "HTTP/1.", 7) && (v[7] == '0' || v[7] == '1'))
        req->minor = v[7] - '0';
    else if (vn >= 5 && !memcmp(v, "HTTP/", 5))
        return refuse(why, "unsupported HTTP version");
    else
        return refuse(why, "bad request line");

    if (!strcmp(req->method, "TRACE")) return refuse(why, "TRACE refused");
    if (!strcmp(req->method, "CONNECT")) return refuse(why, "CONNECT refused");
    return request_target(b, req, th, why);
}

/* ---- field lines ---- */

/* "name:" OWS value OWS, the line being b[ls..le). */
static enum http_result field_line(const unsigned char *b, size_t ls, size_t le,
                                   struct http_request *req, const char **why)
{
    if (ows(b[ls])) return refuse(why, "obs-fold");
    size_t i = ls;
    while (i < le && sniff_tchar(b[i]))
        i++;
    if (i > ls && i < le && ows(b[i])) return refuse(why, "space before colon");
    if (i == ls || i == le || b[i] != ':') return refuse(why, "bad header name");
    size_t name_end = i++;
    for (size_t j = i; j < le; j++) {
        if (!sniff_field_char(b[j])) return refuse(why, "control character in header");
    }
    size_t vs = i, ve = le;
    while (vs < ve && ows(b[vs]))
        vs++;
    while (ve > vs && ows(b[ve - 1]))
        ve--;
    if (req->nfields == HTTP_FIELDS_MAX) return refuse(why, "too many header fields");
    req->fields[req->nfields++] = (struct http_field){
        .name = {ls, name_end - ls},
        .value = {vs, ve - vs},
    };
    return HTTP_OK;
}

static enum http_result field_lines(const unsigned char *b, size_t pos, struct http_request *req,
                                    const char **why)
{
    while (pos < req->head_len - 2) {
        const unsigned char *cr = memchr(b + pos, '\r', req->head_len - pos);
        size_t le = (size_t)(cr - b);
        enum http_result r = field_line(b, pos, le, req, why);
        if (r != HTTP_OK) return r;
        pos = le + 2;
    }
    return HTTP_OK;
}

/* ---- the head as a whole ---- */

/* The next element of a comma-separated list (RFC 9110 5.6.1), which may be
 * empty; false at the end. *bad is set for an element that is not a token. */
static bool list_next(const unsigned char *v, size_t n, size_t *pos, struct http_span *tok,
                      bool *bad)
{
    size_t i = *pos;
    if (i > n) return false;
    while (i < n && ows(v[i]))
        i++;
    size_t ts = i;
    while (i < n && sniff_tchar(v[i]))
        i++;
    *tok = (struct http_span){ts, i - ts};
    while (i < n && ows(v[i]))
        i++;
    if (i < n && v[i] != ',') *bad = true;
    *pos = i + 1;
    return true;
}

struct conn_opts {
    bool close, keep_alive;
};

static enum http_result connection(const unsigned char *v, size_t n, struct conn_opts *co,
                                   const char **why)
{
    size_t pos = 0;
    struct http_span t;
    bool bad = false;
    while (list_next(v, n, &pos, &t, &bad)) {
        if (bad) return refuse(why, "bad Connection header");
        const unsigned char *s = v + t.off;
        if (http_name_is(s, t.len, "upgrade")) return refuse(why, "Upgrade refused");
        if (http_name_is(s, t.len, "host") || http_name_is(s, t.len, "content-length") ||
            http_name_is(s, t.len, "transfer-encoding"))
            return refuse(why, "Connection lists a framing header");
        if (http_name_is(s, t.len, "close")) co->close = true;
        if (http_name_is(s, t.len, "keep-alive")) co->keep_alive = true;
    }
    return HTTP_OK;
}

static bool content_length(const unsigned char *v, size_t n, uint64_t *out)
{
    if (n == 0 || n > CONTENT_LENGTH_DIGITS_MAX || (v[0] == '0' && n > 1)) return false;
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9') return false;
        x = x * 10 + (uint64_t)(v[i] - '0');
    }
    *out = x;
    return true;
}

/* Whether some Connection field of req names the field called name[0..n). */
static bool named_by_connection(const unsigned char *b, const struct http_request *req,
                                const unsigned char *name, size_t n)
{
    for (size_t i = 0; i < req->nfields; i++) {
        const struct http_field *f = &req->fields[i];
        if (!http_name_is(b + f->name.off, f->name.len, "connection")) continue;
        size_t pos = 0;
        struct http_span t;
        bool bad = false;
        while (list_next(b + f->value.off, f->value.len, &pos, &t, &bad)) {
            if (span_eq_ci(b + f->value.off + t.off, t.len, name, n)) return true;
        }
    }
    return false;
}

static bool hop_name(const unsigned char *p, size_t n)
{
    static const char *const hop[] = {"connection", "keep-alive", "proxy-connection",
                                      "te",         "trailer",    "upgrade"};
    for (size_t i = 0; i < sizeof hop / sizeof hop[0]; i++) {
        if (http_name_is(p, n, hop[i])) return true;
    }
    return n >= 6 && http_name_is(p, 6, "proxy-");
}

static void mark_hops(const unsigned char *b, struct http_request *req)
{
    for (size_t i = 0; i < req->nfields; i++) {
        struct http_field *f = &req->fields[i];
        const unsigned char *name = b + f->name.off;
        f->hop = hop_name(name, f->name.len) || named_by_connection(b, req, name, f->name.len);
    }
}

struct counts {
    int hosts, cls, tes;
};

static enum http_result one_field(const unsigned char *b, struct http_request *req,
                                  const struct http_field *f, struct counts *c,
                                  struct conn_opts *co, const char **why)
{
    const unsigned char *name = b + f->name.off, *v = b + f->value.off;
    size_t n = f->name.len, vn = f->value.len;
    if (http_name_is(name, n, "host")) {
        if (c->hosts++) return refuse(why, "duplicate Host");
        if (!sniff_authority(v, vn, req->host, &req->port)) return refuse(why, "bad Host");
    } else if (http_name_is(name, n, "content-length")) {
        if (c->cls++) return refuse(why, "duplicate Content-Length");
        if (!content_length(v, vn, &req->content_length)) return refuse(why, "bad Content-Length");
    } else if (http_name_is(name, n, "transfer-encoding")) {
        if (c->tes++) return refuse(why, "duplicate Transfer-Encoding");
        if (!http_name_is(v, vn, "chunked")) return refuse(why, "unsupported Transfer-Encoding");
    } else if (http_name_is(name, n, "upgrade")) {
        return refuse(why, "Upgrade refused");
    } else if (http_name_is(name, n, "connection")) {
        return connection(v, vn, co, why);
    }
    return HTTP_OK;
}

static enum http_result judge(const unsigned char *b, struct http_request *req,
                              const struct target_host *th, const char **why)
{
    struct counts c = {0};
    struct conn_opts co = {0};
    for (size_t i = 0; i < req->nfields; i++) {
        enum http_result r = one_field(b, req, &req->fields[i], &c, &co, why);
        if (r != HTTP_OK) return r;
    }
    if (!c.hosts) return refuse(why, "missing Host");
    if (th->named) {
        unsigned port = req->port ? req->port : th->dflt;
        if (strcmp(th->host, req->host) || port != th->port)
            return refuse(why, "Host disagrees with target");
    }
    if (c.cls && c.tes) return refuse(why, "CL and TE together");
    if (c.tes && req->minor == 0) return refuse(why, "Transfer-Encoding in HTTP/1.0");
    req->framing = c.tes ? HTTP_BODY_CHUNKED : c.cls ? HTTP_BODY_LENGTH : HTTP_BODY_NONE;
    req->keep_alive = !co.close && (req->minor == 1 || co.keep_alive);
    mark_hops(b, req);
    return HTTP_OK;
}

enum http_result http_request_parse(const char *buf, size_t len, size_t max_head,
                                    struct http_request *req, const char **why)
{
    const unsigned char *b = (const unsigned char *)buf;
    const char *ignored;
    if (!why) why = &ignored;
    *why = NULL;
    size_t end = 0;
    enum http_result r = head_end(b, len, max_head, &end, why);
    if (r != HTTP_OK) return r;

    memset(req, 0, sizeof *req);
    req->head_len = end;
    struct target_host th = {0};
    size_t eol = (size_t)((const unsigned char *)memchr(b, '\r', end) - b);
    r = request_line(b, eol, req, &th, why);
    if (r == HTTP_OK) r = field_lines(b, eol + 2, req, why);
    if (r == HTTP_OK) r = judge(b, req, &th, why);
    return r;
}
