/* sniff: reads the SNI of a TLS ClientHello or the Host of an HTTP/1.x head
 * from the first bytes of a connection. Everything here is a forward-only
 * parse over bytes already received: each step either consumes bytes that are
 * present, asks for more (the prefix so far is still valid), or refuses (no
 * continuation can make it valid). So a valid prefix is never BAD, and once a
 * verdict other than MORE is given, more bytes cannot change it. */
#include "sniff.h"

#include <arpa/inet.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "../dns/dns.h"

/* The outcome of one parsing step. */
enum step { STEP_OK, STEP_MORE, STEP_BAD };

/* TLSPlaintext.length may not exceed 2^14; TLSCompressed (old versions) adds
 * 1024 and TLSCiphertext 2048, so be as lenient as the largest. */
#define TLS_RECORD_MAX (16384 + 2048)
#define TLS_CONTENT_HANDSHAKE 22
#define TLS_HANDSHAKE_CLIENT_HELLO 1
/* version(2) random(32) session_id(1) cipher_suites(2+2) compression(1+1). */
#define TLS_CLIENT_HELLO_MIN 41
#define TLS_EXT_SERVER_NAME 0
#define TLS_SNI_HOST_NAME 0

#define HTTP_METHOD_MAX 20

/* ---- host names ---- */

/* After lower(): a name's characters and its dots. */
static bool host_char(unsigned char c)
{
    return c == '.' || (dns_name_char(c) && !(c >= 'A' && c <= 'Z'));
}

static unsigned char lower(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? (unsigned char)(c - 'A' + 'a') : c;
}

/* An IPv6 literal, rewritten in its canonical text form so that two spellings
 * of one address compare equal. */
static bool ipv6_literal(char *s)
{
    struct in6_addr a;
    if (inet_pton(AF_INET6, s, &a) != 1) return false;
    return inet_ntop(AF_INET6, &a, s, SNIFF_NAME_MAX) != NULL;
}

/* A name whose last label is all digits is not a DNS name: it must be a plain
 * dotted quad. Resolvers also read "127.1" or "0x7f000001" as addresses, so a
 * name inet_aton accepts must be exactly its own canonical dotted quad, or a
 * policy written for names could be passed by a disguised address. */
static bool ipv4_or_dns_name(const char *s, size_t n, size_t last_label)
{
    struct in_addr a;
    char canon[INET_ADDRSTRLEN];
    if (inet_aton(s, &a)) {
        return inet_ntop(AF_INET, &a, canon, sizeof canon) && strcmp(canon, s) == 0;
    }
    for (size_t i = last_label; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return true;
    }
    return false;
}

/* DNS labels of 1..63 characters, at most 253 in all (the trailing dot is
 * already gone). */
static bool dns_labels(const char *s, size_t n, size_t *last_label)
{
    if (n == 0 || n > DNS_TEXT_MAX) return false;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '.') continue;
        if (i == start || i - start > DNS_LABEL_MAX) return false;
        *last_label = start;
        start = i + 1;
    }
    return true;
}

/* Copies s[0..n) lower-cased into out if it is a DNS name or an IP literal
 * (IPv6 only when allow_v6); drops one trailing dot. */
bool sniff_host_canon(const unsigned char *s, size_t n, bool allow_v6, char out[SNIFF_NAME_MAX])
{
    if (n == 0 || n >= SNIFF_NAME_MAX) return false;
    bool colon = false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = lower(s[i]);
        if (c == ':' && allow_v6)
            colon = true;
        else if (!host_char(c))
            return false;
        out[i] = (char)c;
    }
    out[n] = '\0';
    if (colon) return ipv6_literal(out);
    if (out[n - 1] == '.') out[--n] = '\0';
    size_t last_label = 0;
    return dns_labels(out, n, &last_label) && ipv4_or_dns_name(out, n, last_label);
}

/* ---- TLS ---- */

/* A reader of handshake bytes across consecutive handshake records. */
struct tls_rd {
    const unsigned char *buf;
    size_t len;
    size_t pos;      /* next byte of buf */
    size_t rec_left; /* handshake bytes left in the current record */
    size_t hs;       /* handshake bytes read so far */
    size_t hs_end;   /* reading at or past this many handshake bytes is malformed */
    enum step st;
};

/* Enters the record whose header is at pos, checking each header byte as soon
 * as it has arrived. */
static void tls_next_record(struct tls_rd *r)
{
    const unsigned char *h = r->buf + r->pos;
    size_t have = r->len - r->pos;
    if ((have >= 1 && h[0] != TLS_CONTENT_HANDSHAKE) || (have >= 2 && h[1] != 3) ||
        (have >= 3 && (h[2] < 1 || h[2] > 4))) {
        r->st = STEP_BAD;
        return;
    }
    if (have < 5) {
        r->st = STEP_MORE;
        return;
    }
    size_t n = (size_t)h[3] << 8 | h[4];
    /* Empty handshake records are forbidden (RFC 8446 5.1) and would let a
     * sender make us walk headers forever without progress. */
    if (n == 0 || n > TLS_RECORD_MAX) {
        r->st = STEP_BAD;
        return;
    }
    r->pos += 5;
    r->rec_left = n;
}

/* Makes sure at least one handshake byte is readable at pos; returns how many
 * contiguous ones are (0 when st is no longer OK). */
static size_t tls_ready(struct tls_rd *r)
{
    if (r->st != STEP_OK) return 0;
    if (r->hs >= r->hs_end) {
        r->st = STEP_BAD;
        return 0;
    }
    if (r->rec_left == 0) tls_next_record(r);
    if (r->st != STEP_OK) return 0;
    if (r->pos >= r->len) {
        r->st = STEP_MORE;
        return 0;
    }
    size_t n = r->len - r->pos;
    if (n > r->rec_left) n = r->rec_left;
    if (n > r->hs_end - r->hs) n = r->hs_end - r->hs;
    return n;
}

static unsigned tls_byte(struct tls_rd *r)
{
    if (!tls_ready(r)) return 0;
    r->rec_left--;
    r->hs++;
    return r->buf[r->pos++];
}

/* A big-endian integer of n (1..3) bytes. */
static size_t tls_uint(struct tls_rd *r, int n)
{
    size_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | tls_byte(r);
    return v;
}

static void tls_skip(struct tls_rd *r, size_t n)
{
    while (n > 0 && r->st == STEP_OK) {
        size_t have = tls_ready(r);
        size_t take = have < n ? have : n;
        r->pos += take;
        r->rec_left -= take;
        r->hs += take;
        n -= take;
    }
}

/* Reads a vector length of n bytes; BAD if outside [lo, hi] or past the end
 * of the message. */
static size_t tls_vec_len(struct tls_rd *r, int n, size_t lo, size_t hi)
{
    size_t v = tls_uint(r, n);
    if (r->st == STEP_OK && (v < lo || v > hi || v > r->hs_end - r->hs)) r->st = STEP_BAD;
    return v;
}

/* server_name extension (RFC 6066 3): exactly one host_name entry. */
static void tls_server_name(struct tls_rd *r, size_t ext_len, char name[SNIFF_NAME_MAX])
{
    unsigned char raw[255];
    size_t list = tls_vec_len(r, 2, 1, SIZE_MAX);
    if (r->st == STEP_OK && list + 2 != ext_len) r->st = STEP_BAD;
    if (tls_byte(r) != TLS_SNI_HOST_NAME && r->st == STEP_OK) r->st = STEP_BAD;
    size_t n = tls_vec_len(r, 2, 1, sizeof raw);
    if (r->st == STEP_OK && n + 3 != list) r->st = STEP_BAD;
    for (size_t i = 0; i < n && r->st == STEP_OK; i++)
        raw[i] = (unsigned char)tls_byte(r);
    if (r->st == STEP_OK && !sniff_host_canon(raw, n, true, name)) r->st = STEP_BAD;
}

static void tls_extensions(struct tls_rd *r, char name[SNIFF_NAME_MAX])
{
    uint8_t seen[65536 / 8] = {0};
    size_t total = tls_uint(r, 2);
    if (r->st == STEP_OK && total != r->hs_end - r->hs) r->st = STEP_BAD;
    while (r->st == STEP_OK && r->hs < r->hs_end) {
        unsigned type = (unsigned)tls_uint(r, 2);
        size_t n = tls_vec_len(r, 2, 0, SIZE_MAX);
        if (r->st != STEP_OK) return;
        if (seen[type / 8] & (1u << (type % 8))) {
            r->st = STEP_BAD;
            return;
        }
        seen[type / 8] |= (uint8_t)(1u << (type % 8));
        if (type == TLS_EXT_SERVER_NAME) {
            size_t end = r->hs + n;
            tls_server_name(r, n, name);
            if (r->st == STEP_OK && r->hs != end) r->st = STEP_BAD;
        } else {
            tls_skip(r, n);
        }
    }
}

static enum step tls_client_hello(struct tls_rd *r, size_t max, char name[SNIFF_NAME_MAX])
{
    if (tls_byte(r) != TLS_HANDSHAKE_CLIENT_HELLO && r->st == STEP_OK) return STEP_BAD;
    size_t body = tls_uint(r, 3);
    if (r->st != STEP_OK) return r->st;
    /* Every body byte still to come takes at least one byte of buffer. */
    if (body < TLS_CLIENT_HELLO_MIN || body > max || r->pos > max - body) return STEP_BAD;
    r->hs_end = r->hs + body;

    /* TLS 1.0 or later; a server must negotiate down from a version it does
     * not know (RFC 5246 E.1), so higher minor versions are fine. */
    unsigned version = (unsigned)tls_uint(r, 2);
    if (r->st == STEP_OK && (version >> 8 != 3 || (version & 0xff) < 1)) return STEP_BAD;
    tls_skip(r, 32);                       /* random */
    tls_skip(r, tls_vec_len(r, 1, 0, 32)); /* legacy_session_id */
    size_t suites = tls_vec_len(r, 2, 2, SIZE_MAX);
    if (r->st == STEP_OK && suites % 2) return STEP_BAD;
    tls_skip(r, suites);
    tls_skip(r, tls_vec_len(r, 1, 1, SIZE_MAX)); /* compression_methods */
    if (r->st == STEP_OK && r->hs < r->hs_end) tls_extensions(r, name);
    return r->st;
}

static enum sniff_result tls_peek(const unsigned char *buf, size_t len, size_t max,
                                  char name[SNIFF_NAME_MAX])
{
    struct tls_rd r = {.buf = buf, .len = len, .hs_end = SIZE_MAX, .st = STEP_OK};
    switch (tls_client_hello(&r, max, name)) {
    case STEP_OK:
        return SNIFF_TLS;
    case STEP_MORE:
        return SNIFF_MORE;
    case STEP_BAD:
        break;
    }
    return SNIFF_BAD;
}

/* ---- HTTP ---- */

bool sniff_tchar(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
    return c && strchr("!#$%&'*+-.^_`|~", c);
}

bool sniff_field_char(unsigned char c)
{
    return c == ' ' || c == '\t' || (c >= 0x21 && c != 0x7f);
}

bool sniff_authority(const unsigned char *s, size_t n, char out[SNIFF_NAME_MAX], unsigned *port)
{
    size_t host = 0, host_len, after;
    *port = 0;
    if (n == 0) return false;
    if (s[0] == '[') {
        const unsigned char *close = memchr(s, ']', n);
        if (!close) return false;
        host = 1;
        host_len = (size_t)(close - s) - 1;
        after = (size_t)(close - s) + 1;
        if (!memchr(s + host, ':', host_len)) return false; /* in brackets it must be IPv6 */
    } else {
        const unsigned char *colon = memchr(s, ':', n);
        host_len = colon ? (size_t)(colon - s) : n;
        after = host_len;
    }
    if (after < n) {
        if (s[after] != ':') return false;
        size_t digits = n - after - 1;
        unsigned long p = 0;
        if (digits < 1 || digits > 5) return false;
        for (size_t i = after + 1; i < n; i++) {
            if (s[i] < '0' || s[i] > '9') return false;
            p = p * 10 + (unsigned long)(s[i] - '0');
        }
        if (p == 0 || p > 65535) return false;
        *port = (unsigned)p;
    }
    return sniff_host_canon(s + host, host_len, s[0] == '[', out);
}

/* "host[:port]" or "[v6][:port]" into its normalized host. */
static bool authority_host(const unsigned char *s, size_t n, bool need_port,
                           char out[SNIFF_NAME_MAX])
{
    unsigned port;
    return sniff_authority(s, n, out, &port) && (port || !need_port);
}

/* The authority of an "http://" or "https://" absolute-form target; BAD for
 * any other scheme or for userinfo (a second host-looking part invites
 * disagreement about which one is meant). */
static bool absolute_host(const unsigned char *t, size_t n, char out[SNIFF_NAME_MAX])
{
    size_t skip;
    if (n >= 7 && strncasecmp((const char *)t, "http://", 7) == 0)
        skip = 7;
    else if (n >= 8 && strncasecmp((const char *)t, "https://", 8) == 0)
        skip = 8;
    else
        return false;
    size_t end = skip;
    while (end < n && t[end] != '/' && t[end] != '?' && t[end] != '#')
        end++;
    if (memchr(t + skip, '@', end - skip)) return false;
    return authority_host(t + skip, end - skip, false, out);
}

struct http_head {
    bool target_has_host; /* absolute-form, or CONNECT's authority-form */
    char target_host[SNIFF_NAME_MAX];
    int hosts; /* Host fields seen */
    char host[SNIFF_NAME_MAX];
};

/* The request target's form; its host, if it names one. */
static bool http_target(const unsigned char *method, size_t method_len, const unsigned char *t,
                        size_t n, struct http_head *h)
{
    if (t[0] == '/') return true;
    if (method_len == 7 && memcmp(method, "OPTIONS", 7) == 0 && n == 1 && t[0] == '*') return true;
    h->target_has_host = true;
    if (method_len == 7 && memcmp(method, "CONNECT", 7) == 0)
        return authority_host(t, n, true, h->target_host);
    return absolute_host(t, n, h->target_host);
}

struct http_rd {
    const unsigned char *buf;
    size_t len, pos;
};

/* Expects CRLF at pos; a bare LF or a lone CR is BAD. */
static enum step http_crlf(struct http_rd *r)
{
    for (int i = 0; i < 2; i++, r->pos++) {
        if (r->pos >= r->len) return STEP_MORE;
        if (r->buf[r->pos] != "\r\n"[i]) return STEP_BAD;
    }
    return STEP_OK;
}

static enum step http_literal(struct http_rd *r, const char *lit)
{
    for (; *lit; lit++, r->pos++) {
        if (r->pos >= r->len) return STEP_MORE;
        if (r->buf[r->pos] != (unsigned char)*lit) return STEP_BAD;
    }
    return STEP_OK;
}

static enum sniff_result step_result(enum step st)
{
    return st == STEP_OK ? SNIFF_HTTP : st == STEP_MORE ? SNIFF_MORE : SNIFF_BAD;
}

/* "METHOD SP target SP HTTP/1.x CRLF". The method decides HTTP or not: the
 * first byte that cannot continue it makes the whole thing OTHER. */
static enum sniff_result http_request_line(struct http_rd *r, struct http_head *h)
{
    const unsigned char *b = r->buf;
    size_t i = 0;
    while (i < r->len && i < HTTP_METHOD_MAX && b[i] >= 'A' && b[i] <= 'Z')
        i++;
    if (i == r->len) return SNIFF_MORE;
    if (i == 0 || b[i] != ' ') return SNIFF_OTHER;
    size_t method_len = i;

    size_t start = ++i;
    while (i < r->len && b[i] >= 0x21 && b[i] <= 0x7e)
        i++;
    if (i == r->len) return SNIFF_MORE;
    if (i == start || b[i] != ' ') return SNIFF_BAD;
    if (!http_target(b, method_len, b + start, i - start, h)) return SNIFF_BAD;
    r->pos = i + 1;

    enum step st = http_literal(r, "HTTP/1.");
    if (st != STEP_OK) return step_result(st);
    if (r->pos >= r->len) return SNIFF_MORE;
    if (b[r->pos] != '0' && b[r->pos] != '1') return SNIFF_BAD;
    r->pos++;
    return step_result(http_crlf(r));
}

/* Host's value, once its line is complete: without OWS, port and brackets. */
static enum step http_host(const unsigned char *v, size_t n, struct http_head *h)
{
    while (n > 0 && (v[0] == ' ' || v[0] == '\t'))
        v++, n--;
    while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    if (!authority_host(v, n, false, h->host)) return STEP_BAD;
    if (h->target_has_host && strcmp(h->host, h->target_host) != 0) return STEP_BAD;
    return STEP_OK;
}

/* One "name: value CRLF" line; a second Host is BAD as soon as its colon
 * arrives. */
static enum step http_field(struct http_rd *r, struct http_head *h)
{
    const unsigned char *b = r->buf;
    size_t i = r->pos, name = i;
    while (i < r->len && sniff_tchar(b[i]))
        i++;
    if (i == r->len) return STEP_MORE;
    if (i == name || b[i] != ':') return STEP_BAD; /* also obs-fold, bare LF, "Host :" */
    bool is_host = i - name == 4 && strncasecmp((const char *)b + name, "host", 4) == 0;
    if (is_host && h->hosts++ > 0) return STEP_BAD;

    size_t val = ++i;
    while (i < r->len && sniff_field_char(b[i]))
        i++;
    r->pos = i;
    enum step st = http_crlf(r);
    if (st == STEP_OK && is_host) st = http_host(b + val, i - val, h);
    return st;
}

/* Header lines up to the empty line. */
static enum step http_fields(struct http_rd *r, struct http_head *h)
{
    for (;;) {
        if (r->pos >= r->len) return STEP_MORE;
        if (r->buf[r->pos] == '\r') return http_crlf(r);
        enum step st = http_field(r, h);
        if (st != STEP_OK) return st;
    }
}

static enum sniff_result http_peek(const unsigned char *buf, size_t len, char name[SNIFF_NAME_MAX])
{
    struct http_rd r = {.buf = buf, .len = len};
    struct http_head h = {0};
    enum sniff_result res = http_request_line(&r, &h);
    if (res != SNIFF_HTTP) return res;
    res = step_result(http_fields(&r, &h));
    if (res != SNIFF_HTTP) return res;
    /* Without Host, only a target that names its host says where to go. */
    if (h.hosts == 0 && !h.target_has_host) return SNIFF_BAD;
    memcpy(name, h.hosts ? h.host : h.target_host, SNIFF_NAME_MAX);
    return SNIFF_HTTP;
}

/* ---- entry ---- */

enum sniff_result sniff_peek(const unsigned char *buf, size_t len, size_t max,
                             char name[SNIFF_NAME_MAX])
{
    enum sniff_result res = SNIFF_MORE;
    name[0] = '\0';
    if (len > 0 && buf[0] == TLS_CONTENT_HANDSHAKE)
        res = tls_peek(buf, len, max, name);
    else if (len > 0 && buf[0] >= 'A' && buf[0] <= 'Z')
        res = http_peek(buf, len, name);
    else if (len > 0 && (buf[0] == '\r' || buf[0] == '\n'))
        res = SNIFF_BAD; /* servers skip blank lines before a request: it would hide Host */
    else if (len > 0)
        res = SNIFF_OTHER;
    if (res == SNIFF_MORE && len >= max) res = SNIFF_BAD;
    if (res != SNIFF_TLS && res != SNIFF_HTTP) name[0] = '\0';
    return res;
}
