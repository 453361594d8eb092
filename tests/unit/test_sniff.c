/* sniff decides where a sandbox's connection may go from its first bytes, so
 * these check real ClientHellos and HTTP heads (captured on loopback from
 * openssl, node and curl; tests/fuzz/capture_sniff.js) at every split point,
 * and that malformed or ambiguous input is refused rather than guessed at. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "sniff/sniff.h"
#include "unit.h"

#define DATA_DIR "tests/unit/data/sniff/"
#define BIG_MAX (64 * 1024)

static const char *result_name(enum sniff_result r)
{
    static const char *names[] = {"MORE", "TLS", "HTTP", "OTHER", "BAD"};
    return (unsigned)r < ARRAY_LEN(names) ? names[r] : "?";
}

static unsigned char *load(const char *file, size_t *n)
{
    char path[256];
    snprintf(path, sizeof path, DATA_DIR "%s", file);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char *buf = malloc(BIG_MAX);
    *n = buf ? fread(buf, 1, BIG_MAX, f) : 0;
    fclose(f);
    return buf;
}

/* Where the first message ends, computed independently of sniff: the
 * handshake length walked over record lengths, or the end of CRLF CRLF. */
static size_t message_end(const unsigned char *b, size_t n)
{
    if (b[0] != 22) {
        const unsigned char *e = memmem(b, n, "\r\n\r\n", 4);
        return e ? (size_t)(e - b) + 4 : 0;
    }
    size_t need = 4 + ((size_t)b[6] << 16 | (size_t)b[7] << 8 | b[8]), pos = 0;
    while (pos + 5 <= n) {
        size_t rec = (size_t)b[pos + 3] << 8 | b[pos + 4];
        if (need <= rec) return pos + 5 + need;
        need -= rec;
        pos += 5 + rec;
    }
    return 0;
}

/* Feeds every prefix: MORE until `end` bytes, then want/name for all longer
 * ones. Returns false (after printing the first difference) otherwise. */
static bool every_prefix(const unsigned char *b, size_t n, size_t end, size_t max,
                         enum sniff_result want, const char *want_name)
{
    char name[SNIFF_NAME_MAX];
    for (size_t k = 0; k <= n; k++) {
        enum sniff_result r = sniff_peek(b, k, max, name);
        enum sniff_result w = k < end ? SNIFF_MORE : want;
        const char *wn = k < end ? "" : want_name;
        if (r != w || strcmp(name, wn) != 0) {
            fprintf(stderr, "  prefix %zu/%zu (end %zu): %s \"%s\", want %s \"%s\"\n", k, n, end,
                    result_name(r), name, result_name(w), wn);
            return false;
        }
    }
    return true;
}

static const struct capture {
    const char *file;
    enum sniff_result want;
    const char *name;
} captures[] = {
    {"openssl_tls13.bin", SNIFF_TLS, "example.com"},
    {"openssl_tls12.bin", SNIFF_TLS, "example.com"},
    {"openssl_tls12_ems.bin", SNIFF_TLS, "example.com"},
    {"openssl_nosni.bin", SNIFF_TLS, ""},
    {"openssl_upper.bin", SNIFF_TLS, "example.com"}, /* sent as Example.COM */
    {"openssl_groups.bin", SNIFF_TLS, "www.example.com"},
    {"openssl_resume.bin", SNIFF_TLS, "example.com"},        /* TLS 1.3 PSK */
    {"openssl_resume12.bin", SNIFF_TLS, "example.com"},      /* session ticket */
    {"openssl_split.bin", SNIFF_TLS, "example.com"},         /* 100-byte records */
    {"openssl_split16.bin", SNIFF_TLS, "a-b_c.example.com"}, /* 16-byte records */
    {"node_tls13.bin", SNIFF_TLS, "example.com"},
    {"node_tls12.bin", SNIFF_TLS, "example.com"},
    {"node_alpn_big.bin", SNIFF_TLS, "big.example.com"}, /* 18 KB, two records */
    {"curl_tls13.bin", SNIFF_TLS, "example.com"},
    {"curl_tls12.bin", SNIFF_TLS, "example.com"},
    {"curl_dot.bin", SNIFF_TLS, "example.com"},
    {"curl_ip.bin", SNIFF_TLS, ""}, /* no SNI for an address */
    {"curl_v6.bin", SNIFF_TLS, ""},
    {"http_curl.bin", SNIFF_HTTP, "example.com"},
    {"http_curl10.bin", SNIFF_HTTP, "example.com"},
    {"http_curl_post.bin", SNIFF_HTTP, "example.com"},
    {"http_curl_proxy.bin", SNIFF_HTTP, "example.com"},
    {"http_curl_v6.bin", SNIFF_HTTP, "::1"},
    {"http_node.bin", SNIFF_HTTP, "api.example.com"},
    {"http_node_fetch.bin", SNIFF_HTTP, "127.0.0.1"},
};

TEST(sniff_captures_every_prefix)
{
    for (size_t i = 0; i < ARRAY_LEN(captures); i++) {
        const struct capture *c = &captures[i];
        size_t n = 0;
        unsigned char *b = load(c->file, &n);
        CHECK(b && n > 0);
        if (!b || n == 0) {
            fprintf(stderr, "  cannot read " DATA_DIR "%s (run from the repo root)\n", c->file);
            free(b);
            continue;
        }
        size_t end = message_end(b, n);
        CHECK(end > 0 && end <= n);
        bool ok = every_prefix(b, n, end, BIG_MAX, c->want, c->name);
        if (!ok) fprintf(stderr, "  in %s\n", c->file);
        CHECK(ok);
        /* A caller that buffers exactly the message still gets it; one byte less is BAD. */
        char name[SNIFF_NAME_MAX];
        CHECK(sniff_peek(b, end, end, name) == c->want);
        CHECK(sniff_peek(b, end - 1, end - 1, name) == SNIFF_BAD);
        free(b);
    }
}

/* ---- building ClientHellos ---- */

struct msg {
    unsigned char b[40000];
    size_t n;
};

static void put(struct msg *m, const void *p, size_t n)
{
    memcpy(m->b + m->n, p, n);
    m->n += n;
}
static void put8(struct msg *m, unsigned v)
{
    m->b[m->n++] = (unsigned char)v;
}
static void put16(struct msg *m, unsigned v)
{
    put8(m, v >> 8);
    put8(m, v);
}
static void put24(struct msg *m, unsigned v)
{
    put8(m, v >> 16);
    put16(m, v & 0xffff);
}

/* A server_name extension with one host_name entry. */
static void ext_sni(struct msg *m, const char *host, size_t n)
{
    put16(m, 0);
    put16(m, (unsigned)n + 5);
    put16(m, (unsigned)n + 3);
    put8(m, 0);
    put16(m, (unsigned)n);
    put(m, host, n);
}

/* A ClientHello handshake message around the given extensions block (none at
 * all when ext is NULL). */
static void client_hello(struct msg *hs, const struct msg *ext)
{
    unsigned char random[32];
    memset(random, 0x5a, sizeof random);
    hs->n = 0;
    put8(hs, 1);
    put24(hs, 0); /* patched below */
    put16(hs, 0x0303);
    put(hs, random, 32);
    put8(hs, 32);
    put(hs, random, 32);
    put16(hs, 4);
    put16(hs, 0x1301);
    put16(hs, 0x1302);
    put8(hs, 1);
    put8(hs, 0);
    if (ext) {
        put16(hs, (unsigned)ext->n);
        put(hs, ext->b, ext->n);
    }
    size_t body = hs->n - 4;
    hs->b[1] = (unsigned char)(body >> 16);
    hs->b[2] = (unsigned char)(body >> 8);
    hs->b[3] = (unsigned char)body;
}

/* Wraps handshake bytes into handshake records, cutting at the given
 * offsets (ascending, 0-terminated list). */
static void records(struct msg *out, const struct msg *hs, const size_t *cuts)
{
    size_t from = 0;
    out->n = 0;
    for (;;) {
        size_t to = *cuts ? *cuts++ : hs->n;
        put8(out, 22);
        put16(out, 0x0301);
        put16(out, (unsigned)(to - from));
        put(out, hs->b + from, to - from);
        from = to;
        if (to == hs->n) break;
    }
}

static const size_t one_record[] = {0};

/* A ClientHello with only the given SNI host (raw bytes) in one record. */
static enum sniff_result sni_verdict(const char *host, size_t n, char name[SNIFF_NAME_MAX])
{
    static struct msg ext, hs, rec;
    ext.n = 0;
    ext_sni(&ext, host, n);
    client_hello(&hs, &ext);
    records(&rec, &hs, one_record);
    return sniff_peek(rec.b, rec.n, BIG_MAX, name);
}

TEST(sniff_tls_three_records)
{
    static struct msg ext, hs, rec;
    ext_sni(&ext, "three.example.com", 17);
    client_hello(&hs, &ext);
    /* The first record holds only part of the 4-byte handshake header. */
    const size_t cuts[] = {2, 60, 0};
    records(&rec, &hs, cuts);
    CHECK(rec.n == hs.n + 15);
    CHECK(every_prefix(rec.b, rec.n, rec.n, BIG_MAX, SNIFF_TLS, "three.example.com"));
    /* One byte per record. */
    static size_t each[sizeof hs.b];
    for (size_t i = 1; i < hs.n; i++)
        each[i - 1] = i;
    each[hs.n - 1] = 0;
    records(&rec, &hs, each);
    CHECK(rec.n == hs.n * 6);
    CHECK(every_prefix(rec.b, rec.n, rec.n, BIG_MAX, SNIFF_TLS, "three.example.com"));
}

TEST(sniff_tls_wrong_records)
{
    static struct msg ext, hs, rec;
    char name[SNIFF_NAME_MAX];
    ext_sni(&ext, "example.com", 11);
    client_hello(&hs, &ext);
    const size_t cuts[] = {50, 0};
    records(&rec, &hs, cuts);
    size_t second = 5 + 50;

    /* Good as is. */
    CHECK(sniff_peek(rec.b, rec.n, BIG_MAX, name) == SNIFF_TLS);
    /* The second record is an alert, CCS or application data: refused as soon as its type byte
     * arrives. */
    for (unsigned t = 20; t <= 24; t++) {
        if (t == 22) continue;
        rec.b[second] = (unsigned char)t;
        CHECK(sniff_peek(rec.b, second + 1, BIG_MAX, name) == SNIFF_BAD);
        CHECK(sniff_peek(rec.b, rec.n, BIG_MAX, name) == SNIFF_BAD);
    }
    rec.b[second] = 22;
    /* Record versions outside 0x0301..0x0304. */
    rec.b[1] = 2;
    CHECK(sniff_peek(rec.b, 2, BIG_MAX, name) == SNIFF_BAD);
    rec.b[1] = 3;
    rec.b[2] = 0;
    CHECK(sniff_peek(rec.b, 3, BIG_MAX, name) == SNIFF_BAD);
    rec.b[2] = 5;
    CHECK(sniff_peek(rec.b, rec.n, BIG_MAX, name) == SNIFF_BAD);
    rec.b[2] = 4;
    CHECK(sniff_peek(rec.b, rec.n, BIG_MAX, name) == SNIFF_TLS);
    rec.b[second + 2] = 0;
    CHECK(sniff_peek(rec.b, rec.n, BIG_MAX, name) == SNIFF_BAD);
    rec.b[second + 2] = 1;
    /* Empty record, oversized record. */
    const unsigned char empty[] = {22, 3, 1, 0, 0, 22, 3, 1, 0, 4, 1, 0, 0, 100};
    CHECK(sniff_peek(empty, sizeof empty, BIG_MAX, name) == SNIFF_BAD);
    const unsigned char huge[] = {22, 3, 1, 0x48, 0x01, 1, 0, 0, 100};
    CHECK(sniff_peek(huge, sizeof huge, BIG_MAX, name) == SNIFF_BAD);
    /* A handshake that is not a ClientHello (ServerHello, Certificate). */
    hs.b[0] = 2;
    records(&rec, &hs, one_record);
    CHECK(sniff_peek(rec.b, 6, BIG_MAX, name) == SNIFF_BAD);
    hs.b[0] = 11;
    records(&rec, &hs, one_record);
    CHECK(sniff_peek(rec.b, rec.n, BIG_MAX, name) == SNIFF_BAD);
    /* First byte not 22: application data, SSLv2-style hello, NUL. */
    const unsigned char appdata[] = {23, 3, 3, 0, 1, 0};
    CHECK(sniff_peek(appdata, sizeof appdata, BIG_MAX, name) == SNIFF_OTHER);
    const unsigned char v2[] = {0x80, 0x2e, 0x01, 0x03, 0x01};
    CHECK(sniff_peek(v2, sizeof v2, BIG_MAX, name) == SNIFF_OTHER);
    CHECK(sniff_peek((const unsigned char *)"\0", 1, BIG_MAX, name) == SNIFF_OTHER);
}

TEST(sniff_tls_lengths_past_the_end)
{
    static struct msg ext, hs, rec;
    char name[SNIFF_NAME_MAX];
    ext_sni(&ext, "example.com", 11);
    client_hello(&hs, &ext);
    records(&rec, &hs, one_record);
    const size_t body_at = 5 + 4, sid_at = body_at + 2 + 32, suites_at = sid_at + 1 + 32;
    const size_t comp_at = suites_at + 2 + 4, exts_at = comp_at + 2;
    static struct msg bad;

#define MUTATE(off, val, want)                                                                     \
    do {                                                                                           \
        bad = rec;                                                                                 \
        bad.b[off] = (unsigned char)(val);                                                         \
        CHECK(sniff_peek(bad.b, bad.n, BIG_MAX, name) == (want));                                  \
    } while (0)
    MUTATE(body_at, 0x02, SNIFF_BAD);          /* client_version 0x0203 */
    MUTATE(body_at + 1, 0x00, SNIFF_BAD);      /* client_version 0x0300: SSL 3 */
    MUTATE(body_at + 1, 0x0d, SNIFF_TLS);      /* 0x030d: negotiated down (RFC 5246 E.1) */
    MUTATE(sid_at, 33, SNIFF_BAD);             /* session_id > 32 */
    MUTATE(suites_at + 1, 3, SNIFF_BAD);       /* odd cipher_suites */
    MUTATE(suites_at + 1, 0, SNIFF_BAD);       /* no cipher_suites */
    MUTATE(suites_at, 0x40, SNIFF_BAD);        /* cipher_suites past the message */
    MUTATE(comp_at, 0, SNIFF_BAD);             /* no compression methods */
    MUTATE(exts_at + 1, ext.n + 1, SNIFF_BAD); /* extensions past the message */
    MUTATE(exts_at + 1, ext.n - 1, SNIFF_BAD); /* extensions short of it */
    MUTATE(exts_at + 2 + 3, 17, SNIFF_BAD);    /* server_name past the block */
    MUTATE(exts_at + 2 + 5, 15, SNIFF_BAD);    /* server_name list too long */
    MUTATE(exts_at + 2 + 5, 13, SNIFF_BAD);    /* server_name list too short */
    MUTATE(exts_at + 2 + 6, 1, SNIFF_BAD);     /* name_type not host_name */
    MUTATE(exts_at + 2 + 8, 12, SNIFF_BAD);    /* host_name longer than the list */
    MUTATE(exts_at + 2 + 8, 0, SNIFF_BAD);     /* empty host_name */
    MUTATE(8, hs.n - 4 + 1, SNIFF_BAD);        /* handshake longer than its contents */
    MUTATE(8, hs.n - 4 - 1, SNIFF_BAD);        /* handshake shorter than its contents */
#undef MUTATE
    /* A wrong length is refused at once, without waiting for bytes that would never help. */
    bad = rec;
    bad.b[suites_at] = 0x40;
    CHECK(sniff_peek(bad.b, suites_at + 2, BIG_MAX, name) == SNIFF_BAD);
    /* A handshake that could never fit in the caller's buffer is refused at its header. */
    CHECK(sniff_peek(rec.b, 9, rec.n - 1, name) == SNIFF_BAD);
    CHECK(sniff_peek(rec.b, 9, rec.n, name) == SNIFF_MORE);
    const unsigned char giant[] = {22, 3, 1, 0x40, 0, 1, 0xff, 0xff, 0xff};
    CHECK(sniff_peek(giant, sizeof giant, BIG_MAX, name) == SNIFF_BAD);
    /* Bytes after the ClientHello (the next flight, early data) do not matter. */
    bad = rec;
    put(&bad, "\x17\x03\x03\x00\x01\x00", 6);
    CHECK(sniff_peek(bad.b, bad.n, BIG_MAX, name) == SNIFF_TLS);
    CHECK_STR(name, "example.com");
}

TEST(sniff_tls_duplicates_and_absence)
{
    static struct msg ext, hs, rec;
    char name[SNIFF_NAME_MAX];
    /* Two server_name extensions. */
    ext.n = 0;
    ext_sni(&ext, "good.example.com", 16);
    ext_sni(&ext, "evil.example.com", 16);
    client_hello(&hs, &ext);
    records(&rec, &hs, one_record);
    CHECK(sniff_peek(rec.b, rec.n, BIG_MAX, name) == SNIFF_BAD);
    CHECK_STR(name, "");
    /* Two host_name entries in one extension. */
    ext.n = 0;
    put16(&ext, 0);
    put16(&ext, 2 + 2 * 8);
    put16(&ext, 2 * 8);
    put8(&ext, 0), put16(&ext, 5), put(&ext, "a.com", 5);
    put8(&ext, 0), put16(&ext, 5), put(&ext, "b.com", 5);
    client_hello(&hs, &ext);
    records(&rec, &hs, one_record);
    CHECK(sniff_peek(rec.b, rec.n, BIG_MAX, name) == SNIFF_BAD);
    /* A duplicate of another extension. */
    ext.n = 0;
    put16(&ext, 10), put16(&ext, 4), put16(&ext, 2), put16(&ext, 29);
    ext_sni(&ext, "example.com", 11);
    put16(&ext, 10), put16(&ext, 4), put16(&ext, 2), put16(&ext, 23);
    client_hello(&hs, &ext);
    records(&rec, &hs, one_record);
    CHECK(sniff_peek(rec.b, rec.n, BIG_MAX, name) == SNIFF_BAD);
    /* Extensions without server_name; no extensions at all. */
    ext.n = 0;
    put16(&ext, 10), put16(&ext, 4), put16(&ext, 2), put16(&ext, 29);
    put16(&ext, 0xff01), put16(&ext, 1), put8(&ext, 0);
    client_hello(&hs, &ext);
    records(&rec, &hs, one_record);
    CHECK(every_prefix(rec.b, rec.n, rec.n, BIG_MAX, SNIFF_TLS, ""));
    client_hello(&hs, NULL);
    records(&rec, &hs, one_record);
    CHECK(every_prefix(rec.b, rec.n, rec.n, BIG_MAX, SNIFF_TLS, ""));
    /* An empty server_name extension (what servers send back) is malformed from a client. */
    ext.n = 0;
    put16(&ext, 0), put16(&ext, 0);
    client_hello(&hs, &ext);
    records(&rec, &hs, one_record);
    CHECK(sniff_peek(rec.b, rec.n, BIG_MAX, name) == SNIFF_BAD);
}

TEST(sniff_tls_host_names)
{
    char name[SNIFF_NAME_MAX];
    static const struct {
        const char *host;
        size_t n;
        enum sniff_result want;
        const char *name;
    } cases[] = {
        {"Example.COM", 11, SNIFF_TLS, "example.com"},
        {"example.com.", 12, SNIFF_TLS, "example.com"},
        {"_acme.x-y.example", 17, SNIFF_TLS, "_acme.x-y.example"},
        {"10.1.2.3", 8, SNIFF_TLS, "10.1.2.3"},
        {"::1", 3, SNIFF_TLS, "::1"},
        {"2001:DB8:0:0::1", 15, SNIFF_TLS, "2001:db8::1"},
        {"exa\0mple.com", 12, SNIFF_BAD, ""},
        {"example.com\0", 12, SNIFF_BAD, ""},
        {"example.com/x", 13, SNIFF_BAD, ""},
        {"example.com evil", 16, SNIFF_BAD, ""},
        {"user@example.com", 16, SNIFF_BAD, ""},
        {"[::1]", 5, SNIFF_BAD, ""},
        {"example.com:443", 15, SNIFF_BAD, ""},
        {"caf\xc3\xa9.com", 9, SNIFF_BAD, ""},
        {"a..b", 4, SNIFF_BAD, ""},
        {".example.com", 12, SNIFF_BAD, ""},
        {"example.com..", 13, SNIFF_BAD, ""},
        {".", 1, SNIFF_BAD, ""},
        {"127.1", 5, SNIFF_BAD, ""},       /* resolvers read it as 127.0.0.1 */
        {"0x7f000001", 10, SNIFF_BAD, ""}, /* likewise */
        {"010.0.0.1", 9, SNIFF_BAD, ""},   /* octal */
        {"1.2.3.4.5", 9, SNIFF_BAD, ""},
        {"256.1.1.1", 9, SNIFF_BAD, ""},
        {"example.123", 11, SNIFF_BAD, ""},
        {"1:2:3", 5, SNIFF_BAD, ""},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        enum sniff_result r = sni_verdict(cases[i].host, cases[i].n, name);
        if (r != cases[i].want || strcmp(name, cases[i].name) != 0) {
            fprintf(stderr, "  SNI case %zu: %s \"%s\"\n", i, result_name(r), name);
            *failed_ = 1;
        }
    }
    /* Lengths: a 63-character label is fine, 64 is not; 253 in all is fine, 254 is not. */
    char host[300];
    memset(host, 'a', sizeof host);
    CHECK(sni_verdict(host, 63, name) == SNIFF_TLS);
    CHECK(sni_verdict(host, 64, name) == SNIFF_BAD);
    for (size_t i = 63; i < sizeof host; i += 64)
        host[i] = '.';
    CHECK(sni_verdict(host, 253, name) == SNIFF_TLS);
    CHECK(strlen(name) == 253);
    CHECK(sni_verdict(host, 254, name) == SNIFF_BAD); /* 254 characters */
    host[253] = '.';
    CHECK(sni_verdict(host, 254, name) == SNIFF_TLS); /* trailing dot */
    CHECK(sni_verdict(host, 255, name) == SNIFF_BAD);
    CHECK(sni_verdict(host, 256, name) == SNIFF_BAD);
}

/* ---- HTTP ---- */

static enum sniff_result http(const char *head, size_t max, char name[SNIFF_NAME_MAX])
{
    return sniff_peek((const unsigned char *)head, strlen(head), max, name);
}

/* The whole head is a valid request for want_name at every split point. */
static bool http_ok(const char *head, const char *want_name)
{
    size_t n = strlen(head);
    return every_prefix((const unsigned char *)head, n, n, BIG_MAX, SNIFF_HTTP, want_name);
}

TEST(sniff_http_hosts)
{
    char name[SNIFF_NAME_MAX];
    CHECK(http_ok("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n", "example.com"));
    CHECK(http_ok("GET /a?b HTTP/1.1\r\nHost: example.com:8080\r\nAccept: */*\r\n\r\n",
                  "example.com"));
    CHECK(http_ok("GET / HTTP/1.1\r\nhOST:   Example.COM.  \r\n\r\n", "example.com"));
    CHECK(http_ok("GET / HTTP/1.1\r\nHost: [2001:DB8::1]:8443\r\n\r\n", "2001:db8::1"));
    CHECK(http_ok("GET / HTTP/1.1\r\nHost: [::1]\r\n\r\n", "::1"));
    CHECK(http_ok("GET / HTTP/1.1\r\nHost: 192.0.2.7:80\r\n\r\n", "192.0.2.7"));
    CHECK(http_ok("POST /x HTTP/1.0\r\nHost: a.example\r\nContent-Length: 0\r\n\r\n", "a.example"));
    CHECK(http_ok("DELETE /x HTTP/1.1\r\nX-Empty:\r\nHost: a.example\r\n\r\n", "a.example"));
    CHECK(http_ok("OPTIONS * HTTP/1.1\r\nHost: a.example\r\n\r\n", "a.example"));
    /* Absolute form: its host is used without a Host header and must agree with one. */
    CHECK(http_ok("GET http://Abs.Example/p HTTP/1.1\r\n\r\n", "abs.example"));
    CHECK(
        http_ok("GET HTTP://abs.example:81 HTTP/1.1\r\nHost: abs.example\r\n\r\n", "abs.example"));
    CHECK(http_ok("GET https://[::1]:8443/ HTTP/1.1\r\nHost: [0::1]\r\n\r\n", "::1"));
    CHECK(http_ok("CONNECT example.com:443 HTTP/1.1\r\n\r\n", "example.com"));
    CHECK(http_ok("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
                  "example.com"));
    /* Bytes after the head (a body, a pipelined request) do not matter. */
    CHECK(http("GET / HTTP/1.1\r\nHost: a.example\r\n\r\nGET / HTTP/1.1\r\nHost: b.example\r\n",
               BIG_MAX, name) == SNIFF_HTTP);
    CHECK_STR(name, "a.example");
}

TEST(sniff_http_refused)
{
    char name[SNIFF_NAME_MAX];
    static const char *bad[] = {
        "GET / HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a.example\r\nhost: a.example\r\n\r\n",
        "GET / HTTP/1.1\r\nAccept: */*\r\n\r\n",                   /* no Host */
        "GET / HTTP/1.0\r\n\r\n",                                  /* no Host, 1.0 */
        "GET / HTTP/1.1\nHost: a.example\r\n\r\n",                 /* bare LF */
        "GET / HTTP/1.1\r\nHost: a.example\n\r\n",                 /* bare LF */
        "GET / HTTP/1.1\r\nHost: a.example\r\n\n",                 /* bare LF */
        "GET / HTTP/1.1\r\nHost: a.example\rX: y\r\n\r\n",         /* lone CR */
        "GET / HTTP/1.1\r\nX: y\r\n b\r\nHost: a.example\r\n\r\n", /* obs-fold */
        "GET / HTTP/1.1\r\nX: y\r\n\tb\r\nHost: a.example\r\n\r\n",
        "GET / HTTP/1.1\r\n Host: a.example\r\n\r\n",
        "GET / HTTP/1.1\r\nHost : a.example\r\n\r\n",
        "GET / HTTP/1.1\r\nHo(st: a.example\r\n\r\n",
        "GET / HTTP/1.1\r\n: a.example\r\n\r\n",
        "GET / HTTP/1.1\r\nHost:\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a.example/evil\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a.example evil\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: user@a.example\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a.example:\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a.example:65536\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a.example:80:80\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: ::1\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: [a.example]\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: [::1\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: [::1]x\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: 127.1\r\n\r\n",
        "GET http://a.example/ HTTP/1.1\r\nHost: b.example\r\n\r\n", /* mismatch */
        "GET http://user@a.example/ HTTP/1.1\r\nHost: a.example\r\n\r\n",
        "GET ftp://a.example/ HTTP/1.1\r\nHost: a.example\r\n\r\n",
        "GET http:/// HTTP/1.1\r\n\r\n",
        "GET a.example:80 HTTP/1.1\r\nHost: a.example\r\n\r\n",
        "CONNECT a.example HTTP/1.1\r\n\r\n",
        "CONNECT a.example:443 HTTP/1.1\r\nHost: b.example:443\r\n\r\n",
        "GET * HTTP/1.1\r\nHost: a.example\r\n\r\n",
        "GET / HTTP/2.0\r\nHost: a.example\r\n\r\n",
        "GET / HTTP/1.2\r\nHost: a.example\r\n\r\n",
        "GET / http/1.1\r\nHost: a.example\r\n\r\n",
        "GET / HTTP/1.1 \r\nHost: a.example\r\n\r\n",
        "GET  / HTTP/1.1\r\nHost: a.example\r\n\r\n",
        "GET /\x7f HTTP/1.1\r\nHost: a.example\r\n\r\n",
        "GET /\xc3\xa9 HTTP/1.1\r\nHost: a.example\r\n\r\n",
        "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    };
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        enum sniff_result r = http(bad[i], BIG_MAX, name);
        if (r != SNIFF_BAD || name[0]) {
            fprintf(stderr, "  HTTP case %zu: %s \"%s\"\n", i, result_name(r), name);
            *failed_ = 1;
        }
    }
    /* Refused as soon as the fault arrives, not at the end of the head. */
    CHECK(http("GET / HTTP/1.1\r\nHost: a\r\nHost", BIG_MAX, name) == SNIFF_MORE); /* Hostname? */
    CHECK(http("GET / HTTP/1.1\r\nHost: a\r\nHost:", BIG_MAX, name) == SNIFF_BAD);
    const char nul[] = "GET / HTTP/1.1\r\nHost: a.example\r\nX: a\0b\r\n\r\n";
    CHECK(sniff_peek((const unsigned char *)nul, sizeof nul - 1, BIG_MAX, name) == SNIFF_BAD);
    CHECK(sniff_peek((const unsigned char *)nul, 38, BIG_MAX, name) == SNIFF_BAD);
    CHECK(http("GET / HTTP/1.1\r\nX: y\r\n ", BIG_MAX, name) == SNIFF_BAD);
    CHECK(http("GET / HTTP/1.1\n", BIG_MAX, name) == SNIFF_BAD);
    CHECK(http("GET / HTTP/3", BIG_MAX, name) == SNIFF_BAD);
    CHECK(http("GET /\x01", BIG_MAX, name) == SNIFF_BAD);
    CHECK(http("GET ftp://a.example/ ", BIG_MAX, name) == SNIFF_BAD);
    CHECK(http("GET / HTTP/1.1\r\nHost: a.example/b\r\n", BIG_MAX, name) == SNIFF_BAD);
    CHECK(http("GET http://a.example/ HTTP/1.1\r\nHost: b.example\r\n", BIG_MAX, name) ==
          SNIFF_BAD);
}

TEST(sniff_http_long_head)
{
    char name[SNIFF_NAME_MAX];
    static char head[10000];
    strcpy(head, "GET / HTTP/1.1\r\nHost: a.example\r\nX-Pad: ");
    size_t n = strlen(head);
    memset(head + n, 'p', 9000);
    n += 9000;
    strcpy(head + n, "\r\n\r\n");
    n += 4;
    const unsigned char *b = (const unsigned char *)head;
    /* Without the end of the head: MORE below max, BAD at it. */
    CHECK(sniff_peek(b, 4096, 8192, name) == SNIFF_MORE);
    CHECK(sniff_peek(b, 8191, 8192, name) == SNIFF_MORE);
    CHECK(sniff_peek(b, 8192, 8192, name) == SNIFF_BAD);
    CHECK(sniff_peek(b, 4096, 4096, name) == SNIFF_BAD);
    /* The whole head in exactly max bytes is fine. */
    CHECK(sniff_peek(b, n, n, name) == SNIFF_HTTP);
    CHECK_STR(name, "a.example");
    CHECK(sniff_peek(b, n - 1, n - 1, name) == SNIFF_BAD);
    /* Nothing yet. */
    CHECK(sniff_peek(b, 0, 8192, name) == SNIFF_MORE);
    CHECK(sniff_peek(b, 0, 0, name) == SNIFF_BAD);
}

TEST(sniff_other_protocols)
{
    char name[SNIFF_NAME_MAX];
    const char *ssh = "SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n";
    /* "S", "SS", "SSH" could still be a method; "SSH-" cannot. */
    for (size_t k = 1; k <= 3; k++)
        CHECK(sniff_peek((const unsigned char *)ssh, k, BIG_MAX, name) == SNIFF_MORE);
    CHECK(sniff_peek((const unsigned char *)ssh, 4, BIG_MAX, name) == SNIFF_OTHER);
    CHECK(http(ssh, BIG_MAX, name) == SNIFF_OTHER);
    CHECK(http("get / HTTP/1.1\r\n", BIG_MAX, name) == SNIFF_OTHER);
    CHECK(http("GET\r\n", BIG_MAX, name) == SNIFF_OTHER);
    CHECK(http("EHLO example.com\r\n", BIG_MAX, name) == SNIFF_BAD); /* looks like a request line */
    CHECK(http("220 smtp ready\r\n", BIG_MAX, name) == SNIFF_OTHER);
    CHECK(http("ABCDEFGHIJKLMNOPQRSTUVWXYZ / HTTP/1.1\r\n", BIG_MAX, name) == SNIFF_OTHER);
    /* Servers skip blank lines before a request line, so they would hide Host. */
    CHECK(http("\r\nGET / HTTP/1.1\r\n", BIG_MAX, name) == SNIFF_BAD);
    CHECK(http("\nGET / HTTP/1.1\r\n", BIG_MAX, name) == SNIFF_BAD);
    CHECK_STR(name, "");
}

/* Random bytes, and captures with one byte changed: never a crash, a name
 * only with TLS or HTTP, and a decision on a prefix never changes later. */
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static bool consistent(const unsigned char *b, size_t n)
{
    char name[SNIFF_NAME_MAX], full_name[SNIFF_NAME_MAX];
    enum sniff_result full = sniff_peek(b, n, BIG_MAX, full_name);
    if (full != SNIFF_TLS && full != SNIFF_HTTP && full_name[0]) return false;
    if (strlen(full_name) >= SNIFF_NAME_MAX) return false;
    for (size_t k = 0; k < n; k++) {
        enum sniff_result r = sniff_peek(b, k, BIG_MAX, name);
        if (r == SNIFF_MORE) continue;
        if (r != full || strcmp(name, full_name) != 0) {
            fprintf(stderr, "  prefix %zu/%zu: %s \"%s\" but whole: %s \"%s\"\n", k, n,
                    result_name(r), name, result_name(full), full_name);
            return false;
        }
    }
    return true;
}

TEST(sniff_random_input)
{
    static unsigned char b[2048];
    for (int i = 0; i < 2000; i++) {
        size_t n = next_rand() % sizeof b;
        for (size_t j = 0; j < n; j++)
            b[j] = (unsigned char)next_rand();
        if (n && i % 3 == 0) b[0] = 22;
        if (n > 2 && i % 3 == 1) b[0] = 22, b[1] = 3, b[2] = 1;
        CHECK(consistent(b, n));
    }
    for (size_t i = 0; i < ARRAY_LEN(captures); i++) {
        size_t n = 0;
        unsigned char *c = load(captures[i].file, &n);
        if (!c) continue;
        if (n > 1024) n = 1024; /* keep the quadratic check quick */
        for (int j = 0; j < 40; j++) {
            memcpy(b, c, n);
            b[next_rand() % n] = (unsigned char)next_rand();
            CHECK(consistent(b, n));
        }
        free(c);
    }
}
