/* http: the strict HTTP/1.x request reader of the intercepting egress proxy.
 * After the proxy terminates a sandbox's TLS, each request of the keep-alive
 * connection goes through, in order:
 *   1. http_request_parse: the head, strictly; anything two parsers could read
 *      differently (framing, folding, line ends, path tricks) is refused;
 *   2. the proxy checks req.host against the SNI (421 when they differ);
 *   3. http_request_rewrite: the head to forward, each placeholder swapped for
 *      the value the caller's decide callback allows, hop-by-hop and Proxy-*
 *      fields dropped;
 *   4. http_body_feed: exactly the body the framing says, forwarded as it
 *      arrives, then the next request starts at the byte after it.
 * Pure functions over byte buffers: no I/O, libc only; unit-tested
 * (tests/unit/test_http.c) and fuzzed (tests/fuzz/fuzz_http.c). */
#ifndef RUNTIME_HTTP_H
#define RUNTIME_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum http_result {
    HTTP_MORE = 0, /* the bytes so far are a valid beginning: wait for more */
    HTTP_OK,       /* done (see each function) */
    HTTP_BAD,      /* refuse: no continuation can make it valid; *why says what */
};

#define HTTP_METHOD_MAX 24         /* 1..20 upper-case letters, NUL-terminated */
#define HTTP_HOST_MAX 256          /* a host name or IP literal, NUL-terminated */
#define HTTP_PATH_MAX 8192         /* the normalised path, NUL-terminated */
#define HTTP_FIELDS_MAX 100        /* header fields in one head */
#define HTTP_CHUNK_MAX 0xffffffffu /* largest chunk size accepted (4 GiB - 1) */
#define HTTP_CHUNK_LINE_MAX 4096   /* a chunk-size line with its extensions */
#define HTTP_TRAILERS_MAX 8192     /* all trailer lines of a chunked body */
#define HTTP_PREFIX_MAX 64         /* placeholder prefix, e.g. "RUNTIME_PH_" */
#define HTTP_PLACEHOLDER_RANDOM 32 /* [A-Za-z0-9] characters after the prefix */

enum http_framing {
    HTTP_BODY_NONE,    /* neither Content-Length nor Transfer-Encoding: no body */
    HTTP_BODY_LENGTH,  /* Content-Length: content_length bytes */
    HTTP_BODY_CHUNKED, /* Transfer-Encoding: chunked, up to the last chunk and trailers */
};

/* Bytes buf[off .. off+len) of the buffer that was parsed. */
struct http_span {
    size_t off, len;
};

struct http_field {
    struct http_span name;  /* as sent */
    struct http_span value; /* without leading and trailing SP/HTAB */
    bool hop;               /* not forwarded: hop-by-hop, Proxy-*, or named by Connection */
};

struct http_request {
    char method[HTTP_METHOD_MAX]; /* as sent (methods are case-sensitive) */
    int minor;                    /* HTTP/1.minor, 0 or 1 */
    struct http_span target;      /* the request target as sent */
    /* What is forwarded as the target: path and query ("" or "?q" for an
     * absolute-form target without a path: rewrite adds the "/"). */
    struct http_span origin;
    char host[HTTP_HOST_MAX]; /* from Host: lower case, no port, no brackets, no final dot */
    unsigned port;            /* Host's port, 0 when it has none */
    /* The path for matching secrets' globs: the target's path (query
     * excluded) with percent-encoded unreserved characters decoded and other
     * escapes in upper-case hex; "/" for absolute-form without a path, "*"
     * for "OPTIONS *". Never holds a dot segment, an empty segment (but a
     * final one: "/a/"), a decoded '/', backslash or control character. */
    char path[HTTP_PATH_MAX];
    size_t head_len; /* bytes of the head with its final empty line; the body starts here */
    enum http_framing framing;
    uint64_t content_length; /* HTTP_BODY_LENGTH only */
    /* Whether the client expects the connection kept after this request
     * (HTTP/1.1 without "Connection: close", HTTP/1.0 with keep-alive). The
     * rewritten head carries no Connection field: the proxy manages each side. */
    bool keep_alive;
    size_t nfields;
    struct http_field fields[HTTP_FIELDS_MAX];
};

/* Parses the request head at the start of buf[0..len): "METHOD SP target SP
 * HTTP/1.x CRLF", fields, CRLF. MORE until the head is complete (a head is
 * only ever judged whole), then OK with *req filled, or BAD with *why set to
 * a static string:
 *   "bare LF", "bare CR", "NUL in head", "head too large" (no end within
 *   max_head bytes), "bad request line", "bad method", "unsupported HTTP
 *   version", "bad request target", "fragment in target", "userinfo in
 *   target", "TRACE refused", "CONNECT refused", "obs-fold", "space before
 *   colon", "bad header name", "control character in header", "too many
 *   header fields", "missing Host", "duplicate Host", "bad Host", "Host
 *   disagrees with target", "bad Content-Length" (not 1..18 digits, or a
 *   leading zero), "duplicate Content-Length", "duplicate
 *   Transfer-Encoding", "unsupported Transfer-Encoding" (anything but
 *   "chunked"), "Transfer-Encoding in HTTP/1.0", "CL and TE together",
 *   "Upgrade refused" (an Upgrade field, or "upgrade" in Connection), "bad
 *   Connection header", "Connection lists a framing header" (Host,
 *   Content-Length or Transfer-Encoding), and the path's: "bad
 *   percent-encoding", "encoded slash in path", "backslash in path" (raw
 *   anywhere in the target, or %5C in the path),
 *   "control character in path", "path not UTF-8", "dot segment in path"
 *   ("." or "..", raw or %2e, also before a ';'), "empty segment in path",
 *   "path too long".
 * BAD bare LF/CR and NUL are found as soon as they arrive, so a verdict other
 * than MORE never changes with more bytes. Pipelined requests: parse the next
 * one at buf + head_len + the body's length. */
enum http_result http_request_parse(const char *buf, size_t len, size_t max_head,
                                    struct http_request *req, const char **why);

/* ---- body ---- */

/* Where the body of one request ends, fed as bytes arrive. */
struct http_body {
    enum http_framing framing;
    uint64_t left; /* LENGTH: bytes left; CHUNKED: data bytes left in this chunk */
    int state;
    uint64_t size;   /* chunk size being read */
    unsigned digits; /* its hex digits so far */
    size_t line;     /* bytes of the current chunk-size line so far */
    size_t trailers; /* trailer bytes so far */
};

void http_body_init(struct http_body *b, const struct http_request *req);

/* Feeds buf[0..len) (bytes after the head, or after what was fed before).
 * *used gets how many of them belong to the body: forward those. MORE: all of
 * them did, and the body goes on. OK: the body ended after *used bytes (the
 * rest is the next request); feeding again gives OK and 0. BAD: *used bytes
 * were well-formed, the next is not; *why is one of "bare LF", "bare CR",
 * "bad chunk size", "chunk too large", "bad chunk extension", "chunk line too
 * long", "missing CRLF after chunk data", "obs-fold", "bad trailer",
 * "trailers too large". Chunk extensions and trailers are forwarded as sent. */
enum http_result http_body_feed(struct http_body *b, const char *buf, size_t len, size_t *used,
                                const char **why);

/* For a reader that handles the data itself (the proxy's answers, which it
 * scans and chunks again): how many data bytes follow now (0 when the next
 * byte is framing: a chunk-size line, a CRLF, trailers), passing over n of them
 * without their bytes, whether the bytes now fed are the trailer section (after
 * the last chunk's line, up to and with the final CRLF), and whether the body
 * has ended. Framing bytes go through http_body_feed, data bytes through
 * http_body_take_data; the verdicts are those of feeding everything. */
uint64_t http_body_data_left(const struct http_body *b);
void http_body_take_data(struct http_body *b, uint64_t n);
bool http_body_in_trailers(const struct http_body *b);
bool http_body_done(const struct http_body *b);

/* ---- rewrite ---- */

/* Where a placeholder was found. */
enum http_where {
    HTTP_IN_TARGET, /* the target's path or query */
    HTTP_IN_HEADER, /* a field value */
    HTTP_IN_BASIC,  /* the decoded credentials of "Authorization: Basic <base64>" */
};

struct http_placeholder {
    const char *token; /* prefix and 32 random characters, NUL-terminated; valid during the call */
    enum http_where where;
    const char *field; /* the field's name as sent (not NUL-terminated); NULL in the target */
    size_t field_len;
};

/* Returns the value to put in place of ph->token, *value_len bytes (need not
 * be NUL-terminated), or NULL to leave the placeholder as it is (the caller
 * then reports secret.misdirected). Called once per occurrence, target
 * first, then fields in order. */
typedef const char *(*http_decide_fn)(void *arg, const struct http_request *req,
                                      const struct http_placeholder *ph, size_t *value_len);

/* Writes to out[0..out_size) the head to forward for req, parsed from buf:
 *  - "METHOD SP origin SP HTTP/1.x CRLF": an absolute-form target becomes
 *    origin-form (Host agrees with it), "OPTIONS *" stays;
 *  - each field "Name: value CRLF" in order, but those marked hop (Connection,
 *    Keep-Alive, Proxy-Connection, TE, Trailer, Upgrade, Proxy-*, and every
 *    field Connection names; Transfer-Encoding stays, it frames the body);
 *    no Connection field is added;
 *  - CRLF.
 * Placeholders are `prefix` followed by 32 [A-Za-z0-9], leftmost first, not
 * overlapping, found verbatim (not percent-decoded) in the target's path and
 * query, in every field value but Host's, and inside the decoded credentials
 * of "Authorization: Basic" (decoded, swapped, encoded again, padded as the
 * original was). In the target the value is percent-encoded (every byte but
 * A-Z a-z 0-9 - . _ ~); in fields it is put as is. Field names are never
 * searched. OK with *out_len; BAD with *why: "control character in secret
 * value" (CR, LF, NUL or any other byte < 0x20 but HTAB, or 0x7f: header
 * injection; nothing may be forwarded), "rewritten head too large",
 * "rewritten head does not parse" (e.g. a value with '/' put in the path: the
 * result is re-parsed and must keep method, host, port and framing), "bad
 * placeholder prefix", "out of memory"; on BAD, out is wiped. On OK, out
 * holds secret values: wipe it (explicit_bzero) once sent; the scratch
 * memory used here is wiped. */
enum http_result http_request_rewrite(const char *buf, const struct http_request *req,
                                      const char *prefix, http_decide_fn decide, void *arg,
                                      char *out, size_t out_size, size_t *out_len,
                                      const char **why);

/* ---- method and URL overrides (override.c) ---- */

/* Whether a field of this name is one that some server, framework or proxy
 * reads as the request's method or URL instead of the request line's: by a
 * rule over the name (see override.c), not a list. */
bool http_field_overrides(const char *name, size_t len);
/* Whether req (parsed from buf) carries such a field, or a "_method" query
 * parameter. */
bool http_request_overrides(const char *buf, const struct http_request *req);

/* ---- path globs ---- */

/* A secret's path glob: '/'-separated segments, compared with
 * http_request.path, case-sensitively. In a segment, '*' matches any run of
 * characters but '/', the empty one too; a segment that is exactly "**"
 * matches zero or more whole segments. ("/\*" below stands for slash-star,
 * which a C comment cannot hold.) "/a/\*" matches "/a/" and "/a/x", not
 * "/a/x/y" nor "/ab"; "/a/\*\*" matches "/a", "/a/", "/a/x/y", not "/ab".
 * Valid globs start with '/', hold printable ASCII but '?', '#', backslash, no
 * "//" (a final '/' is fine), no "." or ".." segment, "**" only as a whole
 * segment, and '%' only as upper-case hex that http_request.path would keep
 * encoded (not an unreserved character, '/', backslash or a control). */
bool http_glob_valid(const char *pattern, const char **why);
/* False for an invalid pattern. */
bool http_glob_match(const char *pattern, const char *path);

/* Whether an upstream could read path (struct http_request's normalised form) as
 * another path than the one a glob is matched against: it holds an encoded '%'
 * ("%25": a second round of decoding changes it, %252e%252e becomes ..) or any
 * byte outside ASCII, raw or escaped (Unicode look-alikes of '.' and '/', and
 * whatever Unicode normalisation a server applies). Secrets with path globs are
 * swapped only into paths that are not ambiguous. */
bool http_path_ambiguous(const char *path);

#endif
