/* A file in chunks (Runtime Cloud's uploads, for files over the 1 MiB a PUT of
 * .../files/content takes):
 *
 *   POST .../uploads {path, size, sha256, mode?}   -> {uploadId, chunkBytes, ...}
 *   PUT  .../uploads/{id}?offset=N                  one chunk, in any order, in parallel
 *   POST .../uploads/{id}:commit                    the digest checked, the file in place
 *   POST .../uploads/{id}:abort                     given up
 *
 * The bytes go to a new file beside the path (opened by the keeper, as the sandbox's
 * user, parents made), which takes the path's place at the commit: a reader never
 * sees half a file. The digest is taken as the chunks arrive, in order, reading back
 * what is on disk: a commit hashes nothing, and no chunk waits for more than the run
 * of chunks it completes. Kept in memory: a restart of runtimed forgets them (their
 * files stay, under their temporary names). */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api_impl.h"

#define UPLOAD_CHUNK (1u << 20)        /* chunkBytes: the SDKs send chunks of this */
#define UPLOADS_PER_SANDBOX 8          /* begun and not committed or aborted */
#define UPLOAD_IDLE_MS (3600u * 1000)  /* then a new begin may drop it */
#define UPLOAD_MAX_BYTES (64ull << 30) /* and never past the sandbox's disk */
#define UPLOAD_ID_PREFIX "upl_"

struct upload {
    struct upload *next;
    char id[24]; /* upl_ and 16 hex digits */
    char sandbox[PROTO_ID_LEN];
    char path[PROTO_PATH_LEN], temp[PROTO_PATH_LEN];
    char mode[8]; /* as asked ("755"), "" when not */
    uint64_t size, hashed;
    size_t chunks;
    uint8_t *got; /* a byte per chunk: written */
    char want[65];
    EVP_MD_CTX *sha;
    int fd;              /* the temporary file, written by this loop; -1 until open */
    bool busy;           /* a keeper call (open, rename) is under way */
    bool orphan;         /* its sandbox went meanwhile: the keeper's answer frees it */
    uint64_t touched_ms; /* monotonic */
    struct httpd_req *req;
    struct server *srv;
};

static void upload_free(struct upload *u)
{
    if (u->fd >= 0) close(u->fd);
    EVP_MD_CTX_free(u->sha);
    free(u->got);
    free(u);
}

void api_uploads_free(struct api_sandbox *a)
{
    while (a->uploads) {
        struct upload *u = a->uploads;
        a->uploads = u->next;
        if (u->busy)
            u->orphan = true; /* a keeper call holds it */
        else
            upload_free(u);
    }
}

/* Takes u out of its sandbox's list (if the sandbox is still there). */
static void upload_unlink(struct upload *u)
{
    struct sbx *sb = server_sandbox_find(u->srv, NULL, u->sandbox);
    struct api_sandbox *a = sb ? sbx_slot(sb, SBX_SLOT_API) : NULL;
    for (struct upload **p = a ? &a->uploads : NULL; p && *p; p = &(*p)->next)
        if (*p == u) {
            *p = u->next;
            return;
        }
}

static struct upload *upload_find(struct api_sandbox *a, const char *id)
{
    for (struct upload *u = a ? a->uploads : NULL; u; u = u->next)
        if (strcmp(u->id, id) == 0) return u;
    return NULL;
}

/* The temporary file of an upload given up, removed as the sandbox's user. */
static void on_leftover_removed(struct server *srv, const err_t *err, void *arg)
{
    struct upload *u = arg;
    if (err) log_warn("upload %s into sandbox %s: %s", u->id, u->sandbox, err->msg);
    upload_free(u);
}

static void upload_drop(struct server *srv, struct sbx *sb, struct upload *u)
{
    err_t err = {0};
    upload_unlink(u);
    if (u->fd < 0 ||
        server_rename_file(srv, sb, u->temp, NULL, false, on_leftover_removed, u, &err) < 0)
        upload_free(u);
}

/* Uploads nobody has touched for an hour make room for new ones. */
static void drop_idle(struct server *srv, struct sbx *sb, struct api_sandbox *a)
{
    uint64_t now = now_ms();
    struct upload *u = a->uploads, *next;
    for (; u; u = next) {
        next = u->next;
        if (!u->busy && now - u->touched_ms > UPLOAD_IDLE_MS) upload_drop(srv, sb, u);
    }
}

static size_t count_uploads(const struct api_sandbox *a)
{
    size_t n = 0;
    for (const struct upload *u = a->uploads; u; u = u->next)
        n++;
    return n;
}

/* ---- begin ---- */

struct upload_begin {
    char path[PROTO_PATH_LEN];
    uint64_t size;
    char sha256[65];
    char mode[8];
    unsigned mode_bits;
};

static bool is_hex64(const char *s)
{
    return strlen(s) == 64 && strspn(s, "0123456789abcdefABCDEF") == 64;
}

static void parse_mode(json_t *v, struct upload_begin *out, struct api_issues *is)
{
    const char *s = json_string_value(v);
    int bits = api_file_mode(s);
    if (bits < 0)
        return api_issue(is, "mode", "mode must be permission bits in octal, such as \"755\"");
    snprintf(out->mode, sizeof out->mode, "%s", s);
    out->mode_bits = (unsigned)bits;
}

/* {path, size, sha256, mode?}: every wrong field named. */
static bool parse_begin(json_t *body, const struct sbx *sb, struct upload_begin *out,
                        struct api_issues *is)
{
    static const char *const known[] = {"path", "size", "sha256", "mode", NULL};
    *out = (struct upload_begin){0};
    err_t err = {0};
    if (!json_is_object(body)) {
        api_issue(is, "", "the body must be {path, size, sha256, mode?}");
        return false;
    }
    if (json_known_fields(body, "upload", known, &err) < 0) api_issue(is, "", "%s", err.msg);
    const char *path = json_string_value(json_object_get(body, "path"));
    if (!path || strncmp(path, "/workspace/", 11) != 0 || strlen(path) >= sizeof out->path - 40 ||
        strstr(path, "/../") || path[strlen(path) - 1] == '/')
        api_issue(is, "path",
                  "path must be a file under /workspace/ (move it with exec after the commit)");
    else
        snprintf(out->path, sizeof out->path, "%s", path);
    json_t *size = json_object_get(body, "size");
    uint64_t disk = (uint64_t)sbx_settings(sb)->disk_mib << 20;
    uint64_t max = disk && disk < UPLOAD_MAX_BYTES ? disk : UPLOAD_MAX_BYTES;
    if (!json_is_integer(size) || json_integer_value(size) < 0 ||
        (uint64_t)json_integer_value(size) > max)
        api_issue(is, "size", "size must be the file's length in bytes, 0 to %llu",
                  (unsigned long long)max);
    else
        out->size = (uint64_t)json_integer_value(size);
    const char *sha = json_string_value(json_object_get(body, "sha256"));
    if (!sha || !is_hex64(sha))
        api_issue(is, "sha256", "sha256 must be the whole file's SHA-256 in 64 hex digits");
    else
        for (size_t i = 0; i <= 64; i++)
            out->sha256[i] = (char)(sha[i] >= 'A' && sha[i] <= 'F' ? sha[i] + 32 : sha[i]);
    json_t *mode = json_object_get(body, "mode");
    if (mode && !json_is_null(mode)) parse_mode(mode, out, is);
    return is->list == NULL;
}

static struct upload *upload_new(struct server *srv, const struct sbx *sb,
                                 const struct upload_begin *b)
{
    struct upload *u = calloc(1, sizeof *u);
    if (!u) return NULL;
    u->fd = -1;
    u->srv = srv;
    u->size = b->size;
    u->chunks = (size_t)((b->size + UPLOAD_CHUNK - 1) / UPLOAD_CHUNK);
    u->got = calloc(u->chunks ? u->chunks : 1, 1);
    u->sha = EVP_MD_CTX_new();
    if (!u->got || !u->sha || !EVP_DigestInit_ex(u->sha, EVP_sha256(), NULL)) {
        upload_free(u);
        return NULL;
    }
    memcpy(u->id, UPLOAD_ID_PREFIX, strlen(UPLOAD_ID_PREFIX));
    random_hex(u->id + strlen(UPLOAD_ID_PREFIX), 8);
    memcpy(u->sandbox, sbx_id(sb), sizeof u->sandbox);
    snprintf(u->path, sizeof u->path, "%s", b->path);
    snprintf(u->mode, sizeof u->mode, "%s", b->mode);
    memcpy(u->want, b->sha256, sizeof u->want);
    const char *slash = strrchr(u->path, '/');
    snprintf(u->temp, sizeof u->temp, "%.*s.%s.%s", (int)(slash - u->path + 1), u->path, slash + 1,
             u->id);
    u->touched_ms = now_ms();
    return u;
}

static json_t *upload_json(const struct upload *u)
{
    json_t *v = json_pack("{s:s,s:i,s:s,s:I}", "uploadId", u->id, "chunkBytes", UPLOAD_CHUNK,
                          "path", u->path, "size", (json_int_t)u->size);
    if (u->mode[0]) json_object_set_new(v, "mode", json_string(u->mode)); /* no chmod after */
    return v;
}

static void on_begin_open(struct server *srv, int fd, const err_t *err, void *arg)
{
    struct upload *u = arg;
    struct httpd_req *req = u->req;
    u->busy = false;
    u->req = NULL;
    if (fd >= 0 && u->orphan) {
        close(fd);
        upload_free(u);
        return api_error(req, 404, "not_found", "the sandbox was removed during the upload");
    }
    if (fd < 0) {
        upload_unlink(u);
        upload_free(u);
        return api_file_fail(req, err);
    }
    u->fd = fd;
    api_json(req, 201, upload_json(u));
}

static void begin(struct httpd_req *req, struct server *srv, struct sbx *sb)
{
    json_t *body = api_body_json(req, false);
    if (!body) return;
    struct api_issues is = {0};
    struct upload_begin b;
    parse_begin(body, sb, &b, &is);
    json_decref(body);
    if (api_issues_reply(req, &is)) return;
    struct api_sandbox *a = api_sandbox_of(sb);
    if (!a) return api_error(req, 500, "internal_error", "out of memory");
    drop_idle(srv, sb, a);
    if (count_uploads(a) >= UPLOADS_PER_SANDBOX)
        return api_error(req, 429, "limit_reached",
                         "sandbox %s has %d uploads under way; commit or abort one first",
                         sbx_id(sb), UPLOADS_PER_SANDBOX);
    struct upload *u = upload_new(srv, sb, &b);
    if (!u) return api_error(req, 500, "internal_error", "out of memory");
    err_t err = {0};
    u->busy = true;
    u->req = req;
    u->next = a->uploads;
    a->uploads = u;
    if (server_open_file(srv, sb, u->temp, 2, b.mode_bits ? b.mode_bits : 0644, on_begin_open, u,
                         &err) < 0) {
        upload_unlink(u);
        upload_free(u);
        api_file_fail(req, &err);
    }
}

/* ---- chunks ---- */

static int pwrite_all(int fd, const char *p, size_t n, uint64_t offset)
{
    while (n > 0) {
        ssize_t w = pwrite(fd, p, n, (off_t)offset);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return -errno;
        p += w;
        n -= (size_t)w;
        offset += (uint64_t)w;
    }
    return 0;
}

/* The digest goes on over every chunk now written in order after what it covers. */
static int hash_ahead(struct upload *u)
{
    static char buf[64 << 10];
    while (u->hashed < u->size && u->got[u->hashed / UPLOAD_CHUNK]) {
        size_t want = u->size - u->hashed < sizeof buf ? (size_t)(u->size - u->hashed) : sizeof buf;
        ssize_t r = pread(u->fd, buf, want, (off_t)u->hashed);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return r < 0 ? -errno : -EIO;
        if (!EVP_DigestUpdate(u->sha, buf, (size_t)r)) return -ENOMEM;
        u->hashed += (uint64_t)r;
    }
    return 0;
}

static uint64_t bytes_written(const struct upload *u)
{
    uint64_t n = 0;
    for (size_t i = 0; i < u->chunks; i++)
        if (u->got[i]) n += i + 1 < u->chunks ? UPLOAD_CHUNK : u->size - (uint64_t)i * UPLOAD_CHUNK;
    return n;
}

/* The offset= of a chunk: a multiple of chunkBytes inside the file; -1 after answering. */
static int64_t chunk_offset(struct httpd_req *req, const struct upload *u)
{
    static const char *const known[] = {"offset", NULL};
    struct evkeyvalq q;
    if (!api_query(req, &q, known)) return -1;
    const char *text = evhttp_find_header(&q, "offset");
    char *end = NULL;
    long long off = text ? strtoll(text, &end, 10) : -1;
    bool ok =
        text && *text && !*end && off >= 0 && (uint64_t)off < u->size && off % UPLOAD_CHUNK == 0;
    evhttp_clear_headers(&q);
    if (ok) return off;
    api_error(req, 400, "invalid_request",
              "offset must be a multiple of chunkBytes (%u) below the size (%llu)", UPLOAD_CHUNK,
              (unsigned long long)u->size);
    return -1;
}

static void put_chunk(struct httpd_req *req, struct upload *u)
{
    int64_t off = chunk_offset(req, u);
    if (off < 0) return;
    size_t i = (size_t)(off / UPLOAD_CHUNK);
    uint64_t want = i + 1 < u->chunks ? UPLOAD_CHUNK : u->size - (uint64_t)off;
    struct evbuffer *in = httpd_body(req);
    size_t n = evbuffer_get_length(in);
    if (n != want)
        return api_error(req, 400, "invalid_request",
                         "the chunk at offset %lld must be %llu bytes; it is %zu", (long long)off,
                         (unsigned long long)want, n);
    if (!u->got[i]) { /* a chunk sent again (a retry) is not written twice */
        int r = pwrite_all(u->fd, (const char *)evbuffer_pullup(in, -1), n, (uint64_t)off);
        if (r == 0) u->got[i] = 1;
        if (r == 0) r = hash_ahead(u);
        if (r < 0) {
            err_t err;
            err_set(&err, r, "cannot write %s: %s", u->path, strerror(-r));
            return api_file_fail(req, &err);
        }
    }
    httpd_drop_body(req);
    api_json(req, 200,
             json_pack("{s:s,s:I,s:I}", "uploadId", u->id, "offset", (json_int_t)off, "received",
                       (json_int_t)bytes_written(u)));
}

/* ---- commit and abort ---- */

static void on_committed(struct server *srv, const err_t *err, void *arg)
{
    struct upload *u = arg;
    struct httpd_req *req = u->req;
    u->busy = false;
    u->req = NULL;
    if (err && !u->orphan) return api_file_fail(req, err); /* kept: the client may abort it */
    if (err) {
        upload_free(u);
        return api_file_fail(req, err);
    }
    json_t *v =
        json_pack("{s:s,s:I,s:s}", "path", u->path, "size", (json_int_t)u->size, "sha256", u->want);
    if (u->mode[0]) json_object_set_new(v, "mode", json_string(u->mode));
    upload_unlink(u);
    upload_free(u);
    api_json(req, 200, v);
}

/* The index of the first chunk not written, or chunks when all are. */
static size_t first_missing(const struct upload *u)
{
    size_t i = 0;
    while (i < u->chunks && u->got[i])
        i++;
    return i;
}

static void commit(struct httpd_req *req, struct server *srv, struct sbx *sb, struct upload *u)
{
    size_t missing = first_missing(u);
    if (missing < u->chunks)
        return api_error(req, 409, "upload_incomplete",
                         "upload %s has %llu of %llu bytes; the chunk at offset %llu is missing",
                         u->id, (unsigned long long)bytes_written(u), (unsigned long long)u->size,
                         (unsigned long long)missing * UPLOAD_CHUNK);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    char got[65];
    EVP_MD_CTX *copy = EVP_MD_CTX_new(); /* a commit retried after a failure digests again */
    bool ok = copy && EVP_MD_CTX_copy_ex(copy, u->sha) && EVP_DigestFinal_ex(copy, md, &len);
    EVP_MD_CTX_free(copy);
    if (!ok || len != 32) return api_error(req, 500, "internal_error", "cannot take a digest");
    for (unsigned i = 0; i < 32; i++)
        snprintf(got + 2 * i, 3, "%02x", md[i]);
    if (strcmp(got, u->want) != 0)
        return api_error(req, 400, "invalid_request",
                         "the %llu bytes received have SHA-256 %s, not the %s the upload began "
                         "with; send the chunks again, or abort",
                         (unsigned long long)u->size, got, u->want);
    if (fsync(u->fd) < 0) {
        err_t err;
        err_set(&err, -errno, "cannot write %s: %s", u->path, strerror(errno));
        return api_file_fail(req, &err);
    }
    err_t err = {0};
    u->busy = true;
    u->req = req;
    if (server_rename_file(srv, sb, u->temp, u->path, false, on_committed, u, &err) < 0) {
        u->busy = false;
        u->req = NULL;
        api_file_fail(req, &err);
    }
}

static void abort_upload(struct httpd_req *req, struct server *srv, struct sbx *sb,
                         struct upload *u)
{
    json_t *v = json_pack("{s:s,s:b}", "uploadId", u->id, "aborted", 1);
    upload_drop(srv, sb, u);
    api_json(req, 200, v);
}

/* A body that must be empty or {} (commit, abort). */
static bool empty_body(struct httpd_req *req)
{
    json_t *body = api_body_json(req, true);
    if (!body) return false;
    bool ok = json_is_object(body) && json_object_size(body) == 0;
    if (!ok) api_error(req, 400, "invalid_request", "this change takes no fields: send {}");
    json_decref(body);
    return ok;
}

void api_uploads(struct httpd_req *req, struct server *srv, struct sbx *sb, const char *sub)
{
    enum httpd_method m = httpd_method(req);
    if (!sub && m == HTTPD_POST) return begin(req, srv, sb);
    if (!sub)
        return api_error(req, 405, "method_not_allowed", "begin an upload with POST .../uploads");
    char id[sizeof((struct upload *)0)->id];
    const char *colon = strchr(sub, ':'), *verb = colon ? colon + 1 : NULL;
    size_t n = colon ? (size_t)(colon - sub) : strlen(sub);
    snprintf(id, sizeof id, "%.*s", (int)(n < sizeof id ? n : sizeof id - 1), sub);
    struct upload *u = n < sizeof id ? upload_find(sbx_slot(sb, SBX_SLOT_API), id) : NULL;
    if (!u)
        return api_error(req, 404, "not_found",
                         "no upload %.40s in sandbox %s (it was committed, aborted, or begun "
                         "before runtimed restarted); begin it again",
                         id, sbx_id(sb));
    if (u->busy)
        return api_error(req, 409, "busy", "upload %s is being opened or committed", u->id);
    u->touched_ms = now_ms();
    if (!verb && m == HTTPD_PUT) return put_chunk(req, u);
    if (verb && m == HTTPD_POST && strcmp(verb, "commit") == 0) {
        if (empty_body(req)) commit(req, srv, sb, u);
        return;
    }
    if (verb && m == HTTPD_POST && strcmp(verb, "abort") == 0) {
        if (empty_body(req)) abort_upload(req, srv, sb, u);
        return;
    }
    api_error(req, 405, "method_not_allowed",
              "use PUT .../uploads/ID?offset=N, POST .../uploads/ID:commit or :abort");
}
