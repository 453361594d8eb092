/* http reads what a sandbox sends to a host that holds a secret, so these
 * check that every ambiguous head is refused with the reason given (request
 * smuggling: CL.TE, TE.CL, duplicate lengths, folding, bare line ends), that
 * paths cannot be spelled past a glob, that bodies end exactly where the
 * framing says at every split point, and that the rewritten head swaps only
 * what the callback allows and drops what is meant for this hop. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "http/http.h"
#include "sniff/sniff.h"
#include "unit.h"

#define MAX_HEAD (64 * 1024)
#define PFX "RUNTIME_PH_"
#define TOK_A PFX "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA1"
#define TOK_B PFX "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb2"
#define TOK_X PFX "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx3" /* allowed nowhere */
#define VAL_A "ghp_S3cret1"
#define VAL_B "sk-live+/=:x y"

static struct http_request req_; /* big: one for all tests */

static enum http_result parse_n(const char *s, size_t n, const char **why)
{
    return http_request_parse(s, n, MAX_HEAD, &req_, why);
}

static enum http_result parse(const char *s, const char **why)
{
    return parse_n(s, strlen(s), why);
}

static const char *why_str(const char *why)
{
    return why ? why : "(none)";
}

/* ---- parsing ---- */

TEST(http_parse_simple)
{
    const char *why = NULL;
    const char *h = "GET /repos/acme/x?per_page=1 HTTP/1.1\r\n"
                    "Host: API.GitHub.com.\r\n"
                    "User-Agent:  curl/8.0 \t\r\n"
                    "Accept: */*\r\n\r\nNEXT";
    CHECK(parse(h, &why) == HTTP_OK);
    CHECK_STR(req_.method, "GET");
    CHECK_STR(req_.host, "api.github.com");
    CHECK(req_.port == 0);
    CHECK_STR(req_.path, "/repos/acme/x");
    CHECK(req_.minor == 1);
    CHECK(req_.head_len == strlen(h) - 4);
    CHECK(req_.framing == HTTP_BODY_NONE);
    CHECK(req_.keep_alive);
    CHECK(req_.nfields == 3);
    CHECK(req_.fields[1].value.len == 8 && !memcmp(h + req_.fields[1].value.off, "curl/8.0", 8));
    CHECK(req_.target.len == strlen("/repos/acme/x?per_page=1"));
    CHECK(why == NULL);

    CHECK(parse("POST /x HTTP/1.0\r\nHost: [::FFFF:1.2.3.4]:8443\r\nContent-Length: 12\r\n"
                "Connection: Keep-Alive\r\n\r\n",
                &why) == HTTP_OK);
    CHECK_STR(req_.host, "::ffff:1.2.3.4");
    CHECK(req_.port == 8443);
    CHECK(req_.minor == 0);
    CHECK(req_.framing == HTTP_BODY_LENGTH && req_.content_length == 12);
    CHECK(req_.keep_alive);

    CHECK(parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", &why) == HTTP_OK);
    CHECK(!req_.keep_alive);
    CHECK(parse("GET / HTTP/1.0\r\nHost: a\r\n\r\n", &why) == HTTP_OK);
    CHECK(!req_.keep_alive);
    CHECK(parse("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked \r\n\r\n", &why) ==
          HTTP_OK);
    CHECK(req_.framing == HTTP_BODY_CHUNKED);
    CHECK(parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n", &why) == HTTP_OK);
    CHECK(req_.framing == HTTP_BODY_LENGTH && req_.content_length == 0);
    CHECK(parse("GET / HTTP/1.1\r\nHost: a\r\nX-Empty:\r\n\r\n", &why) == HTTP_OK);
    CHECK(req_.nfields == 2 && req_.fields[1].value.len == 0);
}

/* A head is judged only once it is complete: every shorter prefix is MORE. */
TEST(http_parse_more_until_complete)
{
    const char *h =
        "GET /a?t=" TOK_A " HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer " TOK_B "\r\n\r\n";
    size_t n = strlen(h);
    for (size_t k = 0; k < n; k++) {
        const char *why = NULL;
        enum http_result r = parse_n(h, k, &why);
        if (r != HTTP_MORE) fprintf(stderr, "  prefix %zu: %d %s\n", k, r, why_str(why));
        CHECK(r == HTTP_MORE);
    }
    CHECK(parse_n(h, n, NULL) == HTTP_OK && req_.head_len == n);
}

static const struct bad_case {
    const char *head;
    const char *why;
} bad_cases[] = {
    /* smuggling: framing two readers could disagree about */
    {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
     "CL and TE together"},
    {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
     "CL and TE together"},
    {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
     "duplicate Content-Length"},
    {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\ncontent-length: 6\r\n\r\n",
     "duplicate Content-Length"},
    {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n", "bad Content-Length"},
    {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5 5\r\n\r\n", "bad Content-Length"},
    {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n", "bad Content-Length"},
    {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -5\r\n\r\n", "bad Content-Length"},
    {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x5\r\n\r\n", "bad Content-Length"},
    {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 05\r\n\r\n", "bad Content-Length"},
    {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5a\r\n\r\n", "bad Content-Length"},
    {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n", "bad Content-Length"},
    {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1234567890123456789\r\n\r\n",
     "bad Content-Length"},
    {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length : 5\r\n\r\n", "space before colon"},
    {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length\t: 5\r\n\r\n", "space before colon"},
    {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked"
     "\r\n\r\n",
     "duplicate Transfer-Encoding"},
    {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
     "unsupported Transfer-Encoding"},
    {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
     "unsupported Transfer-Encoding"},
    {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity\r\n\r\n",
     "unsupported Transfer-Encoding"},
    {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n",
     "unsupported Transfer-Encoding"},
    {"POST / HTTP/1.0\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
     "Transfer-Encoding in HTTP/1.0"},
    {"POST / HTTP/1.1\r\nHost: a\r\nConnection: content-length\r\nContent-Length: 5\r\n\r\n",
     "Connection lists a framing header"},
    {"POST / HTTP/1.1\r\nHost: a\r\nConnection: close, Transfer-Encoding\r\n\r\n",
     "Connection lists a framing header"},
    {"GET / HTTP/1.1\r\nHost: a\r\nConnection: host\r\n\r\n", "Connection lists a framing header"},
    /* line structure */
    {"GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n", "obs-fold"},
    {"GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n\tc\r\n\r\n", "obs-fold"},
    {"GET / HTTP/1.1\r\n Host: a\r\n\r\n", "obs-fold"},
    {"GET / HTTP/1.1\nHost: a\r\n\r\n", "bare LF"},
    {"GET / HTTP/1.1\r\nHost: a\nX: y\r\n\r\n", "bare LF"},
    {"GET / HTTP/1.1\r\nHost: a\r\n\n", "bare LF"},
    {"\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", "bare LF"},
    {"GET / HTTP/1.1\r\nHost: a\rX: y\r\n\r\n", "bare CR"},
    {"GET / HTTP/1.1\rHost: a\r\n\r\n", "bare CR"},
    {"GET / HTTP/1.1\r\nHost: a\r\n\r\r\n", "bare CR"},
    {"GET / HTTP/1.1\r\nHost: a\r\nX: \x01\r\n\r\n", "control character in header"},
    {"GET / HTTP/1.1\r\nHost: a\r\nX: a\x7f\r\n\r\n", "control character in header"},
    {"GET / HTTP/1.1\r\nHost: a\r\nX Y: z\r\n\r\n", "space before colon"},
    {"GET / HTTP/1.1\r\nHost: a\r\n: z\r\n\r\n", "bad header name"},
    {"GET / HTTP/1.1\r\nHost: a\r\nX(: z\r\n\r\n", "bad header name"},
    {"GET / HTTP/1.1\r\nHost: a\r\nNoColon\r\n\r\n", "bad header name"},
    {"\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", "bad method"},
    /* request line */
    {"get / HTTP/1.1\r\nHost: a\r\n\r\n", "bad method"},
    {"GETTTTTTTTTTTTTTTTTTT / HTTP/1.1\r\nHost: a\r\n\r\n", "bad method"},
    {"GET  / HTTP/1.1\r\nHost: a\r\n\r\n", "bad request line"},
    {"GET / HTTP/1.1 \r\nHost: a\r\n\r\n", "unsupported HTTP version"},
    {"GET /\r\nHost: a\r\n\r\n", "bad request line"},
    {"GET / HTTP/2.0\r\nHost: a\r\n\r\n", "unsupported HTTP version"},
    {"GET / HTTP/1.2\r\nHost: a\r\n\r\n", "unsupported HTTP version"},
    {"GET / http/1.1\r\nHost: a\r\n\r\n", "bad request line"},
    {"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "unsupported HTTP version"},
    {"GET /a\tb HTTP/1.1\r\nHost: a\r\n\r\n", "bad request line"},
    {"TRACE / HTTP/1.1\r\nHost: a\r\n\r\n", "TRACE refused"},
    {"CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n", "CONNECT refused"},
    {"GET * HTTP/1.1\r\nHost: a\r\n\r\n", "bad request target"},
    {"GET a/b HTTP/1.1\r\nHost: a\r\n\r\n", "bad request target"},
    {"GET ftp://a/b HTTP/1.1\r\nHost: a\r\n\r\n", "bad request target"},
    {"GET /a#frag HTTP/1.1\r\nHost: a\r\n\r\n", "fragment in target"},
    {"GET https://user@a/ HTTP/1.1\r\nHost: a\r\n\r\n", "userinfo in target"},
    /* Host */
    {"GET / HTTP/1.1\r\nX: y\r\n\r\n", "missing Host"},
    {"GET / HTTP/1.0\r\n\r\n", "missing Host"},
    {"GET https://a/ HTTP/1.1\r\n\r\n", "missing Host"},
    {"GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", "duplicate Host"},
    {"GET / HTTP/1.1\r\nHost: a\r\nhOST: b\r\n\r\n", "duplicate Host"},
    {"GET https://evil.com/x HTTP/1.1\r\nHost: api.github.com\r\n\r\n",
     "Host disagrees with target"},
    {"GET https://a:8443/x HTTP/1.1\r\nHost: a\r\n\r\n", "Host disagrees with target"},
    {"GET http://a/x HTTP/1.1\r\nHost: a:443\r\n\r\n", "Host disagrees with target"},
    {"GET / HTTP/1.1\r\nHost:\r\n\r\n", "bad Host"},
    {"GET / HTTP/1.1\r\nHost: a b\r\n\r\n", "bad Host"},
    {"GET / HTTP/1.1\r\nHost: u@a\r\n\r\n", "bad Host"},
    {"GET / HTTP/1.1\r\nHost: a:0\r\n\r\n", "bad Host"},
    {"GET / HTTP/1.1\r\nHost: a:65536\r\n\r\n", "bad Host"},
    {"GET / HTTP/1.1\r\nHost: 127.1\r\n\r\n", "bad Host"},
    {"GET / HTTP/1.1\r\nHost: a,b\r\n\r\n", "bad Host"},
    {"GET / HTTP/1.1\r\nHost: [a]\r\n\r\n", "bad Host"},
    /* Upgrade */
    {"GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n", "Upgrade refused"},
    {"GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\n\r\n", "Upgrade refused"},
    {"GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, upgrade\r\n\r\n", "Upgrade refused"},
    {"GET / HTTP/1.1\r\nHost: a\r\nConnection: foo bar\r\n\r\n", "bad Connection header"},
    {"GET / HTTP/1.1\r\nHost: a\r\nConnection: foo/bar\r\n\r\n", "bad Connection header"},
};

TEST(http_parse_refuses)
{
    for (size_t i = 0; i < ARRAY_LEN(bad_cases); i++) {
        const char *why = NULL;
        enum http_result r = parse(bad_cases[i].head, &why);
        if (r != HTTP_BAD || !why || strcmp(why, bad_cases[i].why) != 0) {
            fprintf(stderr, "  case %zu: got %d \"%s\", want BAD \"%s\"\n", i, r, why_str(why),
                    bad_cases[i].why);
            *failed_ = 1;
        }
    }
}

TEST(http_parse_nul_and_size)
{
    const char *why = NULL;
    static const char nul[] = "GET / HTTP/1.1\r\nHost: a\r\nX: a\0b\r\n\r\n";
    CHECK(parse_n(nul, sizeof nul - 1, &why) == HTTP_BAD);
    CHECK_STR(why, "NUL in head");
    CHECK(parse_n("GET /\0", 6, &why) == HTTP_BAD); /* found before the head is complete */

    /* Exactly max_head fits; one byte less is too large, as soon as max bytes are in. */
    const char *h = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
    size_t n = strlen(h);
    CHECK(http_request_parse(h, n, n, &req_, &why) == HTTP_OK);
    CHECK(http_request_parse(h, n, n - 1, &req_, &why) == HTTP_BAD);
    CHECK_STR(why, "head too large");
    CHECK(http_request_parse(h, n - 2, n - 1, &req_, &why) == HTTP_MORE);
    CHECK(http_request_parse(h, n - 1, n - 1, &req_, &why) == HTTP_BAD);

    /* A long field that never ends. */
    size_t big = 2 * MAX_HEAD;
    char *b = malloc(big);
    memcpy(b, "GET / HTTP/1.1\r\nHost: a\r\nX: ", 28);
    memset(b + 28, 'x', big - 28);
    CHECK(parse_n(b, big, &why) == HTTP_BAD);
    CHECK_STR(why, "head too large");
    CHECK(parse_n(b, MAX_HEAD - 1, &why) == HTTP_MORE);

    /* Too many fields. */
    size_t off = (size_t)sprintf(b, "GET / HTTP/1.1\r\nHost: a\r\n");
    for (int i = 0; i < HTTP_FIELDS_MAX; i++)
        off += (size_t)sprintf(b + off, "X-%d: y\r\n", i);
    off += (size_t)sprintf(b + off, "\r\n");
    CHECK(parse_n(b, off, &why) == HTTP_BAD);
    CHECK_STR(why, "too many header fields");
    free(b);
}

/* ---- paths ---- */

static const struct path_case {
    const char *target;
    const char *path; /* NULL: refused with why */
    const char *why;
} path_cases[] = {
    {"/repos/acme/../evil", NULL, "dot segment in path"},
    {"/repos/acme/%2e%2e/evil", NULL, "dot segment in path"},
    {"/repos/acme/%2E%2e/evil", NULL, "dot segment in path"},
    {"/repos/acme/.%2E/evil", NULL, "dot segment in path"},
    {"/repos/acme/./x", NULL, "dot segment in path"},
    {"/repos/acme/%2E/x", NULL, "dot segment in path"},
    {"/repos/acme/..", NULL, "dot segment in path"},
    {"/repos/acme/..;/evil", NULL, "dot segment in path"},
    {"/repos/acme/.;x/evil", NULL, "dot segment in path"},
    {"/repos/acme%2fevil", NULL, "encoded slash in path"},
    {"/repos/acme%2Fevil", NULL, "encoded slash in path"},
    {"//repos/acme/x", NULL, "empty segment in path"},
    {"/repos//acme/x", NULL, "empty segment in path"},
    {"/repos/acme/x%00", NULL, "control character in path"},
    {"/repos/acme/x%0d%0aX:%20y", NULL, "control character in path"},
    {"/repos/acme/x%7F", NULL, "control character in path"},
    {"/repos/acme%5cevil", NULL, "backslash in path"},
    {"/repos/acme\\evil", NULL, "backslash in path"},
    {"/repos/acme/x?q=\\", NULL, "backslash in path"},
    {"/a%2", NULL, "bad percent-encoding"},
    {"/a%", NULL, "bad percent-encoding"},
    {"/a%zz", NULL, "bad percent-encoding"},
    {"/a%u002e", NULL, "bad percent-encoding"},
    {"/a/%c0%ae%c0%ae/x", NULL, "path not UTF-8"},
    {"/a/%e0%80%ae", NULL, "path not UTF-8"},
    {"/a/%ed%a0%80", NULL, "path not UTF-8"},
    {"/a/%ff", NULL, "path not UTF-8"},
    {"/a/%C3", NULL, "path not UTF-8"},
    {"/a/%C3x", NULL, "path not UTF-8"},
    {"/repos/%61cme/x", "/repos/acme/x", NULL},
    {"/a/%7e%2d%5F%2e", "/a/~-_.", NULL},
    {"/a/%3a%3B", "/a/%3A%3B", NULL},
    {"/a/%C3%a9", "/a/%C3%A9", NULL},
    {"/a/%F0%9F%98%80", "/a/%F0%9F%98%80", NULL},
    {"/a/?x=../../%2f", "/a/", NULL},
    {"/a/", "/a/", NULL},
    {"/", "/", NULL},
    {"/?q", "/", NULL},
    {"/a/.b/..c/...", "/a/.b/..c/...", NULL},
    {"/a;p=1/b", "/a;p=1/b", NULL},
    {"/a/%2e%2e%2e", "/a/...", NULL},
    {"https://a/repos/x?y=1", "/repos/x", NULL},
    {"HTTPS://A:443/repos/x", "/repos/x", NULL},
    {"http://a:80/x", "/x", NULL},
    {"https://a", "/", NULL},
    {"https://a?q=1", "/", NULL},
    {"https://a//x", NULL, "empty segment in path"},
    {"https://a/x/../y", NULL, "dot segment in path"},
};

TEST(http_parse_paths)
{
    char h[512];
    for (size_t i = 0; i < ARRAY_LEN(path_cases); i++) {
        const struct path_case *c = &path_cases[i];
        snprintf(h, sizeof h, "GET %s HTTP/1.1\r\nHost: a\r\n\r\n", c->target);
        const char *why = NULL;
        enum http_result r = parse(h, &why);
        bool ok = c->path ? r == HTTP_OK && !strcmp(req_.path, c->path)
                          : r == HTTP_BAD && why && !strcmp(why, c->why);
        if (!ok) {
            fprintf(stderr, "  %s: got %d \"%s\" path \"%s\", want \"%s\" / \"%s\"\n", c->target, r,
                    why_str(why), r == HTTP_OK ? req_.path : "", c->path ? c->path : "",
                    c->why ? c->why : "");
            *failed_ = 1;
        }
    }
    CHECK(parse("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", NULL) == HTTP_OK);
    CHECK_STR(req_.path, "*");
    CHECK(req_.origin.len == 1);

    /* A path one byte short of the limit fits; at the limit it does not. */
    size_t n = HTTP_PATH_MAX + 64;
    char *b = malloc(n + 64);
    for (size_t plen = HTTP_PATH_MAX - 1; plen <= HTTP_PATH_MAX; plen++) {
        size_t off = (size_t)sprintf(b, "GET ");
        for (size_t k = 0; k < plen; k++)
            b[off++] = k % 64 == 0 ? '/' : 'p';
        off += (size_t)sprintf(b + off, " HTTP/1.1\r\nHost: a\r\n\r\n");
        const char *why = NULL;
        enum http_result r = parse_n(b, off, &why);
        CHECK(plen < HTTP_PATH_MAX ? r == HTTP_OK : r == HTTP_BAD);
        if (r == HTTP_BAD) CHECK_STR(why, "path too long");
    }
    free(b);
}

/* Host is read by the same rules as sniff's, so the proxy can compare it with the SNI. */
TEST(http_host_agrees_with_sniff)
{
    static const char *const hosts[] = {
        "API.GitHub.COM", "api.github.com.", "a:443",      "[::1]:8443", "[0:0::1]", "10.0.0.1",
        "x_y.example",    "127.1",           "0x7f000001", "a..b",       "-a.b",     "[1.2.3.4]"};
    char h[256], name[SNIFF_NAME_MAX];
    for (size_t i = 0; i < ARRAY_LEN(hosts); i++) {
        snprintf(h, sizeof h, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", hosts[i]);
        enum sniff_result s = sniff_peek((const unsigned char *)h, strlen(h), MAX_HEAD, name);
        enum http_result r = parse(h, NULL);
        bool same =
            (s == SNIFF_HTTP) == (r == HTTP_OK) && (r != HTTP_OK || !strcmp(name, req_.host));
        if (!same) {
            fprintf(stderr, "  Host %s: sniff %d \"%s\", http %d \"%s\"\n", hosts[i], s, name, r,
                    r == HTTP_OK ? req_.host : "");
            *failed_ = 1;
        }
    }
}

/* ---- globs ---- */

static const struct glob_case {
    const char *glob, *path;
    bool match;
} glob_cases[] = {
    {"/repos/acme/*", "/repos/acme/x", true},
    {"/repos/acme/*", "/repos/acme/", true},
    {"/repos/acme/*", "/repos/acmeevil", false},
    {"/repos/acme/*", "/repos/acme", false},
    {"/repos/acme/*", "/repos/acme/x/y", false},
    {"/repos/acme/*", "/repos/acmeevil/x", false},
    {"/repos/acme/*", "/Repos/acme/x", false},
    {"/repos/acme/**", "/repos/acme", true},
    {"/repos/acme/**", "/repos/acme/", true},
    {"/repos/acme/**", "/repos/acme/x/y/z", true},
    {"/repos/acme/**", "/repos/acmeevil", false},
    {"/repos/acme/**", "/repos/acmeevil/x", false},
    {"/repos/*/issues", "/repos/acme/issues", true},
    {"/repos/*/issues", "/repos/acme/x/issues", false},
    {"/repos/*/issues", "/repos/issues", false},
    {"/a/**/z", "/a/z", true},
    {"/a/**/z", "/a/b/c/z", true},
    {"/a/**/z", "/a/b/c/zz", false},
    {"/a/**/b/**/c", "/a/x/b/y/b/z/c", true},
    {"/a/**/b/**/c", "/a/x/b/y/c/d", false},
    {"/a/x*y", "/a/xy", true},
    {"/a/x*y", "/a/xaby", true},
    {"/a/x*y", "/a/xab/y", false},
    {"/a/*.json", "/a/b.json", true},
    {"/a/*.json", "/a/b.jsonx", false},
    {"/**", "/", true},
    {"/**", "/anything/at/all", true},
    {"/", "/", true},
    {"/", "/a", false},
    {"/a/%3A", "/a/%3A", true},
    {"/**", "*", false},
    {"/*", "", false},
    {"/a/*a*a*a*a*a*a*b",
     "/a/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false},
};

TEST(http_glob)
{
    for (size_t i = 0; i < ARRAY_LEN(glob_cases); i++) {
        const struct glob_case *c = &glob_cases[i];
        const char *why = NULL;
        if (!http_glob_valid(c->glob, &why)) {
            fprintf(stderr, "  glob %s invalid: %s\n", c->glob, why_str(why));
            *failed_ = 1;
        }
        if (http_glob_match(c->glob, c->path) != c->match) {
            fprintf(stderr, "  glob %s path %s: want %d\n", c->glob, c->path, c->match);
            *failed_ = 1;
        }
    }
    static const char *const invalid[] = {
        "",       "repos/*", "/a//b", "/a/../b", "/a/./b", "/a/**b", "/a/b**",
        "/a/***", "/a?x",    "/a#x",  "/a/%2f",  "/a/%2F", "/a/%41", "/a/%3a",
        "/a/%5C", "/a/%0A",  "/a/%",  "/a/%4",   "/a b",   "/a\\b",  "//"};
    for (size_t i = 0; i < ARRAY_LEN(invalid); i++) {
        const char *why = NULL;
        if (http_glob_valid(invalid[i], &why) || !why || http_glob_match(invalid[i], "/a/b")) {
            fprintf(stderr, "  glob \"%s\" should be invalid\n", invalid[i]);
            *failed_ = 1;
        }
    }
    CHECK(!http_glob_valid(NULL, NULL));
    CHECK(!http_glob_match("/**", NULL));
    /* A request path meets a glob only through the parser's normalisation. */
    CHECK(parse("GET /repos/%61cme/x HTTP/1.1\r\nHost: a\r\n\r\n", NULL) == HTTP_OK);
    CHECK(http_glob_match("/repos/acme/*", req_.path));
}

/* ---- bodies ---- */

static const char *const chunked_body = "5;name=\"v a\"\r\nhello\r\n"
                                        "1A \t; x\r\nabcdefghijklmnopqrstuvwxyz\r\n"
                                        "0000000000000001\r\n!\r\n"
                                        "0\r\nX-Trailer: yes \r\nX-Other:\r\n\r\n";

/* Feeds body+rest in two pieces split at k: MORE until the end, then OK at
 * exactly the body's length. */
static bool feed_split(const struct http_request *req, const char *s, size_t n, size_t body,
                       size_t k)
{
    struct http_body b;
    size_t used = 0, total = 0;
    const char *why = NULL;
    http_body_init(&b, req);
    enum http_result r = http_body_feed(&b, s, k, &used, &why);
    total = used;
    if (k < body && (r != HTTP_MORE || used != k)) return false;
    if (k >= body) return r == HTTP_OK && used == body;
    r = http_body_feed(&b, s + k, n - k, &used, &why);
    total += used;
    if (r != HTTP_OK || total != body) return false;
    r = http_body_feed(&b, s + k + used, n - k - used, &used, &why);
    return r == HTTP_OK && used == 0;
}

TEST(http_body_chunked_every_split)
{
    const char *h = "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
    CHECK(parse(h, NULL) == HTTP_OK);
    struct http_request req = req_;
    char s[512];
    size_t body = strlen(chunked_body);
    size_t n = (size_t)snprintf(s, sizeof s, "%sGET /next HTTP/1.1\r\n", chunked_body);
    for (size_t k = 0; k <= n; k++) {
        if (!feed_split(&req, s, n, body, k)) {
            fprintf(stderr, "  split at %zu of %zu (body %zu)\n", k, n, body);
            *failed_ = 1;
        }
    }
    /* One byte at a time. */
    struct http_body b;
    http_body_init(&b, &req);
    size_t total = 0, used = 0;
    enum http_result r = HTTP_MORE;
    for (size_t i = 0; i < n && r == HTTP_MORE; i++) {
        r = http_body_feed(&b, s + i, 1, &used, NULL);
        total += used;
    }
    CHECK(r == HTTP_OK && total == body);
}

TEST(http_body_length)
{
    CHECK(parse("POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n", NULL) == HTTP_OK);
    struct http_request req = req_;
    const char *s = "0123456789GET";
    for (size_t k = 0; k <= 13; k++) {
        if (!feed_split(&req, s, 13, 10, k)) {
            fprintf(stderr, "  split at %zu\n", k);
            *failed_ = 1;
        }
    }
    CHECK(parse("GET /x HTTP/1.1\r\nHost: a\r\n\r\n", NULL) == HTTP_OK);
    struct http_body b;
    size_t used = 7;
    http_body_init(&b, &req_);
    CHECK(http_body_feed(&b, "GET", 3, &used, NULL) == HTTP_OK && used == 0);
    CHECK(http_body_feed(&b, "", 0, &used, NULL) == HTTP_OK && used == 0);
}

static const struct chunk_bad {
    const char *body;
    size_t used; /* well-formed bytes before the refusal */
    const char *why;
} chunk_bads[] = {
    {"5\nhello\r\n0\r\n\r\n", 1, "bare LF"},
    {"5\rhello", 2, "bare CR"},
    {"5\r\nhelloX\r\n0\r\n\r\n", 8, "missing CRLF after chunk data"},
    {"5\r\nhello\rX", 9, "missing CRLF after chunk data"},
    {"5\r\nhello\n0\r\n\r\n", 8, "missing CRLF after chunk data"},
    {"g\r\n", 0, "bad chunk size"},
    {"\r\n", 0, "bad chunk size"},
    {";a\r\n", 0, "bad chunk size"},
    {" 5\r\n", 0, "bad chunk size"},
    {"-5\r\n", 0, "bad chunk size"},
    {"0x5\r\n", 1, "bad chunk size"},
    {"5 \r\nhello\r\n", 2, "bad chunk extension"},
    {"5 x\r\n", 2, "bad chunk extension"},
    {"5;a\x01\r\n", 3, "bad chunk extension"},
    {"5;a\nb\r\n", 3, "bare LF"},
    {"00000000000000005\r\n", 16, "chunk too large"},
    {"100000000\r\n", 8, "chunk too large"},
    {"ffffffffffffffff\r\n", 8, "chunk too large"},
    {"0\r\n X: y\r\n\r\n", 3, "obs-fold"},
    {"0\r\nX : y\r\n\r\n", 4, "bad trailer"},
    {"0\r\nX: y\nZ: w\r\n\r\n", 7, "bare LF"},
    {"0\r\nX: \x7f\r\n\r\n", 6, "bad trailer"},
    {"0\r\nX\r\n\r\n", 4, "bad trailer"},
    {"0\r\n\rX", 4, "bare CR"},
    {"0\r\n\n", 3, "bare LF"},
};

TEST(http_body_chunked_refuses)
{
    CHECK(parse("POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", NULL) ==
          HTTP_OK);
    struct http_request req = req_;
    for (size_t i = 0; i < ARRAY_LEN(chunk_bads); i++) {
        struct http_body b;
        size_t used = 0;
        const char *why = NULL;
        http_body_init(&b, &req);
        enum http_result r =
            http_body_feed(&b, chunk_bads[i].body, strlen(chunk_bads[i].body), &used, &why);
        if (r != HTTP_BAD || used != chunk_bads[i].used || !why || strcmp(why, chunk_bads[i].why)) {
            fprintf(stderr, "  chunked case %zu: got %d used %zu \"%s\", want BAD %zu \"%s\"\n", i,
                    r, used, why_str(why), chunk_bads[i].used, chunk_bads[i].why);
            *failed_ = 1;
        }
    }
    /* The limits on lines and trailers. */
    size_t n = HTTP_CHUNK_LINE_MAX + HTTP_TRAILERS_MAX + 64, used = 0;
    char *s = malloc(n);
    const char *why = NULL;
    struct http_body b;
    memset(s, 'e', n);
    memcpy(s, "1;", 2);
    http_body_init(&b, &req);
    CHECK(http_body_feed(&b, s, n, &used, &why) == HTTP_BAD && used == HTTP_CHUNK_LINE_MAX);
    CHECK_STR(why, "chunk line too long");
    memcpy(s, "0\r\nX: ", 6);
    http_body_init(&b, &req);
    CHECK(http_body_feed(&b, s, n, &used, &why) == HTTP_BAD && used == 3 + HTTP_TRAILERS_MAX);
    CHECK_STR(why, "trailers too large");
    /* The largest chunk size is accepted. */
    http_body_init(&b, &req);
    CHECK(http_body_feed(&b, "FFFFFFFF\r\nabc", 13, &used, &why) == HTTP_MORE && used == 13);
    CHECK(b.left == 0xffffffffull - 3);
    free(s);
}

/* Two requests in one buffer: each is judged on its own. */
TEST(http_pipelined)
{
    const char *s = "POST /repos/acme/x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello"
                    "POST /y HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "3\r\nabc\r\n0\r\n\r\n"
                    "GET /repos/acme/../z HTTP/1.1\r\nHost: a\r\n\r\n";
    size_t n = strlen(s), pos = 0, used = 0;
    struct http_body b;
    CHECK(http_request_parse(s, n, MAX_HEAD, &req_, NULL) == HTTP_OK);
    CHECK_STR(req_.path, "/repos/acme/x");
    pos = req_.head_len;
    http_body_init(&b, &req_);
    CHECK(http_body_feed(&b, s + pos, n - pos, &used, NULL) == HTTP_OK && used == 5);
    pos += used;

    CHECK(http_request_parse(s + pos, n - pos, MAX_HEAD, &req_, NULL) == HTTP_OK);
    CHECK_STR(req_.path, "/y");
    CHECK(req_.framing == HTTP_BODY_CHUNKED);
    pos += req_.head_len;
    http_body_init(&b, &req_);
    CHECK(http_body_feed(&b, s + pos, n - pos, &used, NULL) == HTTP_OK && used == 13);
    pos += used;

    const char *why = NULL;
    CHECK(http_request_parse(s + pos, n - pos, MAX_HEAD, &req_, &why) == HTTP_BAD);
    CHECK_STR(why, "dot segment in path");
}

/* ---- rewrite ---- */

struct secret {
    const char *token, *value;
    size_t len; /* 0: strlen(value) */
};

struct decider {
    const struct secret *secrets;
    size_t n;
    int calls, kept;
    enum http_where where[16];
    char field[16][32];
};

#define DECIDER(s, count) ((struct decider){.secrets = (s), .n = (count)})

static const char *decide(void *arg, const struct http_request *req,
                          const struct http_placeholder *ph, size_t *len)
{
    struct decider *d = arg;
    if (d->calls < 16) {
        d->where[d->calls] = ph->where;
        snprintf(d->field[d->calls], sizeof d->field[0], "%.*s", (int)ph->field_len,
                 ph->field ? ph->field : "");
    }
    d->calls++;
    for (size_t i = 0; i < d->n; i++) {
        if (!strcmp(d->secrets[i].token, ph->token)) {
            *len = d->secrets[i].len ? d->secrets[i].len : strlen(d->secrets[i].value);
            return d->secrets[i].value;
        }
    }
    d->kept++;
    return NULL;
}

static const struct secret secrets[] = {{TOK_A, VAL_A, 0}, {TOK_B, VAL_B, 0}};

static char out_[MAX_HEAD];

/* Parses h, rewrites it with d; returns the result with out_ NUL-terminated. */
static enum http_result rewrite(const char *h, struct decider *d, const char **why)
{
    size_t n = 0;
    if (parse(h, why) != HTTP_OK) return HTTP_MORE; /* not expected in these tests */
    enum http_result r =
        http_request_rewrite(h, &req_, PFX, decide, d, out_, sizeof out_ - 1, &n, why);
    out_[n] = '\0';
    return r;
}

TEST(http_rewrite_target_and_fields)
{
    struct decider d = DECIDER(secrets, ARRAY_LEN(secrets));
    const char *why = NULL;
    CHECK(rewrite("GET /repos/acme/" TOK_A "/x?key=" TOK_B "&a=" TOK_X " HTTP/1.1\r\n"
                  "Host: api.github.com\r\n"
                  "Authorization: Bearer " TOK_A "\r\n"
                  "X-Api-Key:  " TOK_B "  \r\n"
                  "X-Two: " TOK_A "," TOK_A "\r\n"
                  "X-Near: " PFX "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA " PFX PFX "\r\n"
                  "X-Long: " TOK_A "Z\r\n"
                  "X-Where: " TOK_X "\r\n\r\n",
                  &d, &why) == HTTP_OK);
    CHECK_STR(out_,
              "GET /repos/acme/" VAL_A "/x?key=sk-live%2B%2F%3D%3Ax%20y&a=" TOK_X " HTTP/1.1\r\n"
              "Host: api.github.com\r\n"
              "Authorization: Bearer " VAL_A "\r\n"
              "X-Api-Key: " VAL_B "\r\n"
              "X-Two: " VAL_A "," VAL_A "\r\n"
              "X-Near: " PFX "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA " PFX PFX "\r\n"
              "X-Long: " VAL_A "Z\r\n"
              "X-Where: " TOK_X "\r\n\r\n");
    CHECK(d.calls == 9 && d.kept == 2);
    CHECK(d.where[0] == HTTP_IN_TARGET && d.where[1] == HTTP_IN_TARGET &&
          d.where[2] == HTTP_IN_TARGET && !strcmp(d.field[0], ""));
    CHECK(d.where[3] == HTTP_IN_HEADER);
    CHECK_STR(d.field[3], "Authorization");
    CHECK_STR(d.field[4], "X-Api-Key");
    CHECK_STR(d.field[8], "X-Where");

    /* Absolute-form becomes origin-form; Host is never searched. */
    d = DECIDER(secrets, ARRAY_LEN(secrets));
    CHECK(rewrite("GET https://api.github.com?t=" TOK_A " HTTP/1.1\r\nHost: api.github.com\r\n"
                  "X-Host: " TOK_A "\r\n\r\n",
                  &d, &why) == HTTP_OK);
    CHECK_STR(out_,
              "GET /?t=" VAL_A " HTTP/1.1\r\nHost: api.github.com\r\nX-Host: " VAL_A "\r\n\r\n");
    d = DECIDER(secrets, ARRAY_LEN(secrets));
    CHECK(rewrite("OPTIONS * HTTP/1.0\r\nHost: a\r\n\r\n", &d, &why) == HTTP_OK);
    CHECK_STR(out_, "OPTIONS * HTTP/1.0\r\nHost: a\r\n\r\n");
    CHECK(d.calls == 0);
}

static const struct basic_case {
    const char *in, *out;
} basic_cases[] = {
    /* "ab:" TOK_A, padded, becomes "ab:" VAL_A, padded */
    {"Basic YWI6UlVOVElNRV9QSF9BQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBMQ==",
     "Basic YWI6Z2hwX1MzY3JldDE="},
    /* the same without padding stays without */
    {"Basic YWI6UlVOVElNRV9QSF9BQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBMQ",
     "Basic YWI6Z2hwX1MzY3JldDE"},
    /* "user:" TOK_A needs no padding; the result does and gets it */
    {"basic   dXNlcjpSVU5USU1FX1BIX0FBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUEx",
     "basic   dXNlcjpnaHBfUzNjcmV0MQ=="},
    /* TOK_A ":" TOK_A: both swapped */
    {"Basic UlVOVElNRV9QSF9BQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBMTpSVU5USU1FX1BIX0FBQUFBQUF"
     "BQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUEx",
     "Basic Z2hwX1MzY3JldDE6Z2hwX1MzY3JldDE="},
    /* no placeholder: byte for byte as sent */
    {"Basic dXNlcjpnaHBfUzNjcmV0MQ==", "Basic dXNlcjpnaHBfUzNjcmV0MQ=="},
    /* not base64 (spare bits, bad padding, bad alphabet): searched as text */
    {"Basic YR== " TOK_A, "Basic YR== " VAL_A},
    {"Basic YQ=", "Basic YQ="},
    {"Basic " TOK_A, "Basic " VAL_A},
    {"Basic", "Basic"},
    {"Bearer " TOK_A, "Bearer " VAL_A},
};

TEST(http_rewrite_basic)
{
    char h[512];
    for (size_t i = 0; i < ARRAY_LEN(basic_cases); i++) {
        struct decider d = DECIDER(secrets, ARRAY_LEN(secrets));
        const char *why = NULL;
        snprintf(h, sizeof h, "GET / HTTP/1.1\r\nHost: a\r\nAuthorization: %s\r\n\r\n",
                 basic_cases[i].in);
        enum http_result r = rewrite(h, &d, &why);
        char want[512];
        snprintf(want, sizeof want, "GET / HTTP/1.1\r\nHost: a\r\nAuthorization: %s\r\n\r\n",
                 basic_cases[i].out);
        if (r != HTTP_OK || strcmp(out_, want)) {
            fprintf(stderr, "  basic case %zu: got %d \"%s\" %s\n", i, r, why_str(why), out_);
            *failed_ = 1;
        }
        if (i < 4 &&
            (d.calls < 1 || d.where[0] != HTTP_IN_BASIC || strcmp(d.field[0], "Authorization")))
            *failed_ = 1;
    }
    /* A kept placeholder leaves the credentials byte for byte. */
    struct decider none = DECIDER(secrets, 0);
    const char *in = "GET / HTTP/1.1\r\nHost: a\r\nAuthorization: Basic "
                     "YWI6UlVOVElNRV9QSF9BQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBMQ\r\n\r\n";
    CHECK(rewrite(in, &none, NULL) == HTTP_OK);
    CHECK_STR(out_, in);
    CHECK(none.calls == 1 && none.kept == 1);
}

TEST(http_rewrite_drops_hop_fields)
{
    struct decider d = DECIDER(secrets, ARRAY_LEN(secrets));
    const char *why = NULL;
    CHECK(rewrite("POST /x HTTP/1.1\r\n"
                  "Host: a\r\n"
                  "Connection: keep-alive, X-Secret , ,x-other\r\n"
                  "Keep-Alive: timeout=5\r\n"
                  "Proxy-Connection: keep-alive\r\n"
                  "TE: trailers\r\n"
                  "Trailer: X-T\r\n"
                  "Transfer-Encoding: chunked\r\n"
                  "Proxy-Authorization: Basic " TOK_A "\r\n"
                  "proxy-foo: bar\r\n"
                  "X-Secret: " TOK_A "\r\n"
                  "X-Other: y\r\n"
                  "X-Proxy: kept\r\n"
                  "Accept: */*\r\n\r\n",
                  &d, &why) == HTTP_OK);
    CHECK_STR(out_, "POST /x HTTP/1.1\r\n"
                    "Host: a\r\n"
                    "Transfer-Encoding: chunked\r\n"
                    "X-Proxy: kept\r\n"
                    "Accept: */*\r\n\r\n");
    CHECK(d.calls == 0); /* placeholders in dropped fields are never sent, nor asked about */
    CHECK(req_.keep_alive);
}

TEST(http_rewrite_refuses_injection)
{
    static const struct secret bad[] = {
        {TOK_A, "x\r\nX-Evil: 1", 0}, {TOK_B, "x\ny", 0}, {TOK_X, "a\0b", 3}};
    static const char *const heads[] = {
        "GET / HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer " TOK_A "\r\n\r\n",
        "GET /?t=" TOK_A " HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nX: " TOK_B "\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nX: " TOK_X "\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nAuthorization: Basic "
        "YWI6UlVOVElNRV9QSF9BQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBMQ==\r\n\r\n",
    };
    for (size_t i = 0; i < ARRAY_LEN(heads); i++) {
        struct decider d = DECIDER(bad, ARRAY_LEN(bad));
        const char *why = NULL;
        size_t n = 99;
        CHECK(parse(heads[i], NULL) == HTTP_OK);
        enum http_result r =
            http_request_rewrite(heads[i], &req_, PFX, decide, &d, out_, sizeof out_, &n, &why);
        CHECK(r == HTTP_BAD && n == 0);
        CHECK_STR(why, "control character in secret value");
    }
    static const struct secret ctl[] = {{TOK_A, "a\x01", 0}, {TOK_B, "a\x7f", 0}};
    struct decider d = DECIDER(ctl, ARRAY_LEN(ctl));
    const char *why = NULL;
    CHECK(rewrite("GET / HTTP/1.1\r\nHost: a\r\nX: " TOK_B "\r\n\r\n", &d, &why) == HTTP_BAD);
    CHECK_STR(why, "control character in secret value");
    static const struct secret tab[] = {{TOK_A, "a\tb", 0}};
    d = DECIDER(tab, 1);
    CHECK(rewrite("GET / HTTP/1.1\r\nHost: a\r\nX: " TOK_A "\r\n\r\n", &d, &why) == HTTP_OK);
    CHECK_STR(out_, "GET / HTTP/1.1\r\nHost: a\r\nX: a\tb\r\n\r\n");
}

TEST(http_rewrite_limits)
{
    struct decider d = DECIDER(secrets, ARRAY_LEN(secrets));
    const char *why = NULL;
    const char *h = "GET /" TOK_A " HTTP/1.1\r\nHost: a\r\n\r\n";
    size_t n = 0;
    CHECK(parse(h, NULL) == HTTP_OK);
    /* The output buffer must hold the whole head. */
    size_t need = strlen("GET /" VAL_A " HTTP/1.1\r\nHost: a\r\n\r\n");
    CHECK(http_request_rewrite(h, &req_, PFX, decide, &d, out_, need, &n, &why) == HTTP_OK &&
          n == need);
    CHECK(http_request_rewrite(h, &req_, PFX, decide, &d, out_, need - 1, &n, &why) == HTTP_BAD);
    CHECK_STR(why, "rewritten head too large");
    CHECK(http_request_rewrite(h, &req_, "", decide, &d, out_, sizeof out_, &n, &why) == HTTP_BAD);
    CHECK_STR(why, "bad placeholder prefix");

    /* A value that would change the path the glob was checked against. */
    static const struct secret slash[] = {{TOK_A, "a/../../admin", 0}, {TOK_B, "..", 0}};
    d = DECIDER(slash, ARRAY_LEN(slash));
    CHECK(rewrite("GET /repos/" TOK_A " HTTP/1.1\r\nHost: a\r\n\r\n", &d, &why) == HTTP_BAD);
    CHECK_STR(why, "rewritten head does not parse");
    d = DECIDER(slash, ARRAY_LEN(slash));
    CHECK(rewrite("GET /repos/" TOK_B " HTTP/1.1\r\nHost: a\r\n\r\n", &d, &why) == HTTP_BAD);
    CHECK_STR(why, "rewritten head does not parse");
    /* In the query it is only data. */
    d = DECIDER(slash, ARRAY_LEN(slash));
    CHECK(rewrite("GET /repos?x=" TOK_A " HTTP/1.1\r\nHost: a\r\n\r\n", &d, &why) == HTTP_OK);
    CHECK_STR(out_, "GET /repos?x=a%2F..%2F..%2Fadmin HTTP/1.1\r\nHost: a\r\n\r\n");
}

/* The head is processed only once complete, so a placeholder cut by the
 * edge of what has arrived is never half-swapped. */
TEST(http_rewrite_placeholder_at_buffer_edge)
{
    const char *h = "GET /x HTTP/1.1\r\nHost: a\r\nAuthorization: token " TOK_A "\r\n\r\n";
    const char *cut = strstr(h, TOK_A);
    for (size_t k = (size_t)(cut - h); k <= (size_t)(cut - h) + strlen(TOK_A); k++)
        CHECK(parse_n(h, k, NULL) == HTTP_MORE);
    struct decider d = DECIDER(secrets, ARRAY_LEN(secrets));
    CHECK(rewrite(h, &d, NULL) == HTTP_OK);
    CHECK_STR(out_, "GET /x HTTP/1.1\r\nHost: a\r\nAuthorization: token " VAL_A "\r\n\r\n");
    CHECK(d.calls == 1);
}

TEST(http_path_ambiguous_flags_what_an_upstream_could_read_otherwise)
{
    CHECK(!http_path_ambiguous("/repos/acme/widgets"));
    CHECK(!http_path_ambiguous("/a%20b/c%3Fd")); /* reserved ASCII escapes are fine */
    CHECK(http_path_ambiguous("/repos/acme/%252e%252e/admin")); /* decoded twice: .. */
    CHECK(http_path_ambiguous("/x/%25"));
    CHECK(http_path_ambiguous("/x/%EF%BC%8E%EF%BC%8E")); /* FULLWIDTH FULL STOP */
    CHECK(http_path_ambiguous("/x%E2%88%95y"));          /* DIVISION SLASH */
    CHECK(http_path_ambiguous("/x/\xef\xbc\x8f"));       /* raw UTF-8 */
    CHECK(http_path_ambiguous("/x/%C0%AE"));             /* overlong '.' */
}

/* Method and URL overrides are refused by a rule over the name: the names
 * the attack campaign used, those the old list had, their cases, and the
 * ordinary fields that must pass. */
TEST(http_field_overrides_by_rule)
{
    static const char *const refused[] = {"X-HTTP-Method-Override",
                                          "X-HTTP-Method",
                                          "X-Method-Override",
                                          "X-Original-Method",
                                          "X-Original-URL",
                                          "X-Rewrite-URL",
                                          "X-Forwarded-Method",
                                          "X-Forwarded-Uri",
                                          "X-Forwarded-Path",
                                          "X-Forwarded-Prefix",
                                          "X-Original-Uri",
                                          "X-Envoy-Original-Path",
                                          "x-forwarded-method",
                                          "X-FORWARDED-URI",
                                          "x-envoy-original-path",
                                          "X-Envoy-Original-Url",
                                          "X-Original-Path",
                                          "X-Original-Host-Path",
                                          "X-Rewrite-Path",
                                          "X-Replaced-Path",
                                          "X-Request-Uri",
                                          "X-Request-Url",
                                          "X-Script-Name",
                                          "X-Url",
                                          "X-Uri",
                                          "Method",
                                          "HTTP-Method-Override",
                                          "X-Override",
                                          "Override-Path",
                                          "X-Original-Request-Line",
                                          "X-Rewrite-Anything",
                                          "X-Envoy-Original-Method",
                                          "Destination",
                                          "destination",
                                          "X-Ms-Original-Url",
                                          "X-Custom-Path",
                                          "X-Path",
                                          "X-Base-Path-Prefix"};
    static const char *const forwarded[] = {"Authorization",
                                            "Accept",
                                            "Accept-Encoding",
                                            "Content-Type",
                                            "Content-Length",
                                            "User-Agent",
                                            "X-Forwarded-For",
                                            "X-Forwarded-Proto",
                                            "X-Forwarded-Host",
                                            "X-Forwarded-Port",
                                            "X-Request-Id",
                                            "X-Api-Key",
                                            "X-GitHub-Api-Version",
                                            "Cookie",
                                            "If-None-Match",
                                            "X-Correlation-Id",
                                            "X-Uris-Count",
                                            "X-Urlish",
                                            "Path-Info",
                                            "X-Paths",
                                            "Referer",
                                            "Origin",
                                            "Url",
                                            "Location",
                                            "X-Destinations",
                                            "Prefer"};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
        if (!http_field_overrides(refused[i], strlen(refused[i]))) {
            fprintf(stderr, "  %s: not refused\n", refused[i]);
            *failed_ = 1;
        }
    for (size_t i = 0; i < sizeof forwarded / sizeof *forwarded; i++)
        if (http_field_overrides(forwarded[i], strlen(forwarded[i]))) {
            fprintf(stderr, "  %s: refused\n", forwarded[i]);
            *failed_ = 1;
        }
}

TEST(http_request_overrides_fields_and_method_parameter)
{
    static const struct {
        const char *target, *field;
        bool overrides;
    } cases[] = {
        {"/repos/acme/x", "X-Api-Key: k", false},
        {"/repos/acme/x", "X-Forwarded-Prefix: /admin", true},
        {"/repos/acme/x?_method=DELETE", "X-Api-Key: k", true},
        {"/repos/acme/x?a=1&_METHOD=delete", "X-Api-Key: k", true},
        {"/repos/acme/x?a=1;_method=put", "X-Api-Key: k", true},
        {"/repos/acme/x?%5Fmethod=DELETE", "X-Api-Key: k", true},
        {"/repos/acme/x?_method", "X-Api-Key: k", true},
        {"/repos/acme/x?payment_method=card&x_method=1", "X-Api-Key: k", false},
        {"/repos/acme/x?q=_method", "X-Api-Key: k", false},
        {"/repos/_method/x", "X-Api-Key: k", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char head[512];
        snprintf(head, sizeof head, "GET %s HTTP/1.1\r\nHost: h.test\r\n%s\r\n\r\n",
                 cases[i].target, cases[i].field);
        const char *why = NULL;
        CHECK(parse(head, &why) == HTTP_OK);
        if (http_request_overrides(head, &req_) != cases[i].overrides) {
            fprintf(stderr, "  %s with %s: expected %d\n", cases[i].target, cases[i].field,
                    cases[i].overrides);
            *failed_ = 1;
        }
    }
}
