/* Files in a sandbox: GET and PUT of one file's bytes (Runtime Cloud's
 * .../files/content?path=, and runtimed's earlier .../files?path=). The keeper opens
 * and renames as the sandbox's user; the bytes go through this loop. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../fingerprint/fingerprint.h"
#include "api_impl.h"

const struct api_file_error *api_file_error(int code)
{
    static const struct api_file_error map[] = {
        {-ENOENT, 404, "file_not_found", "no such file or directory"},
        {-EISDIR, 409, "is_a_directory", "it is a directory"},
        {-ENOTDIR, 409, "not_a_directory", "a step of the path is not a directory"},
        {-EACCES, 403, "permission_denied", "permission denied to the sandbox's user"},
        {-EPERM, 403, "permission_denied", "permission denied to the sandbox's user"},
        {-EROFS, 403, "permission_denied", "the filesystem is read-only"},
        {-EEXIST, 409, "file_exists", "it exists"},
        {-ENOTEMPTY, 409, "not_empty", "the directory is not empty"},
        {-EBUSY, 409, "busy", "it is in use or a mount point"},
        {-ENOSPC, 507, "disk_full", "the disk is full"},
        {-EDQUOT, 507, "disk_full", "the disk is full"},
        {-EXDEV, 400, "invalid_request", "the two paths are on different filesystems"},
        {-EINVAL, 400, "invalid_request", "not possible (a directory into itself?)"},
        {-ELOOP, 400, "invalid_request", "too many levels of symbolic links"},
        {-ENAMETOOLONG, 400, "invalid_request", "a name is too long"},
        {-EOPNOTSUPP, 400, "invalid_request",
         "it is a symlink, which this kernel cannot follow here"},
        {-EMLINK, 400, "invalid_request", "nested too deep"},
    };
    for (size_t i = 0; i < ARRAY_LEN(map); i++)
        if (map[i].code == code) return &map[i];
    return NULL;
}

void api_file_fail(struct httpd_req *req, const err_t *err)
{
    const struct api_file_error *e = api_file_error(err->code);
    if (e) return api_error(req, e->status, e->name, "%s", err->msg);
    api_fail(req, err);
}

/* Sandbox paths: absolute as given; relative ones are under /workspace. */
static int sandbox_path(const char *in, char *out, size_t size)
{
    /* Room for /workspace/ and an upload's temporary name beside it. */
    if (!in || !*in || strlen(in) >= size - 40) return -EINVAL;
    if (in[0] == '/')
        snprintf(out, size, "%s", in);
    else
        snprintf(out, size, "/workspace/%s", in);
    return 0;
}

/* A file request waiting for the keeper. httpd keeps a request that was not
 * answered alive even when its client leaves (answering it then frees it), so
 * req is valid until the answer. */
struct file_req {
    struct httpd_req *req;
    struct server *srv;
    char sandbox[PROTO_ID_LEN]; /* looked up again: it may be removed meanwhile */
    char path[PROTO_PATH_LEN];
    char temp[PROTO_PATH_LEN]; /* PUT: where the bytes go before they take path's place */
    bool keep_mode;
    bool cloud;    /* Runtime Cloud's .../files/content: a PUT answers {path, size} */
    uint64_t size; /* PUT: the bytes written */
    err_t err;     /* PUT: why it failed, told once the temporary file is gone */
};

static struct file_req *file_req_new(struct httpd_req *req, struct server *srv,
                                     const struct sbx *sb, const char *path)
{
    struct file_req *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    f->req = req;
    f->srv = srv;
    memcpy(f->sandbox, sbx_id(sb), sizeof f->sandbox);
    snprintf(f->path, sizeof f->path, "%s", path);
    return f;
}

/* An upload is atomic: its bytes go to a new file beside PATH, which takes PATH's
 * place once they are all on disk, or is removed. A reader never sees half a file,
 * and a full disk leaves nothing behind. */
static void temp_name(const char *path, char *out, size_t size)
{
    const char *slash = strrchr(path, '/');
    char rnd[9];
    random_hex(rnd, 4);
    snprintf(out, size, "%.*s.%s.runtime-%s", (int)(slash - path + 1), path, slash + 1, rnd);
}

static void put_answer(struct file_req *f, const err_t *err)
{
    if (err)
        api_file_fail(f->req, err);
    else if (f->cloud)
        api_json(f->req, 200, json_pack("{s:s,s:I}", "path", f->path, "size", (json_int_t)f->size));
    else
        api_no_content(f->req);
    free(f);
}

static void on_temp_removed(struct server *srv, const err_t *err, void *arg)
{
    struct file_req *f = arg;
    if (err) log_warn("upload into sandbox %s: %s", f->sandbox, err->msg);
    put_answer(f, &f->err);
}

/* Gives up the upload: the temporary file goes, then the client hears f->err. */
static void put_abandon(struct file_req *f)
{
    err_t err = {0};
    struct sbx *sb = server_sandbox_find(f->srv, NULL, f->sandbox);
    if (!sb || server_rename_file(f->srv, sb, f->temp, NULL, false, on_temp_removed, f, &err) < 0)
        put_answer(f, &f->err);
}

static void on_put_renamed(struct server *srv, const err_t *err, void *arg)
{
    struct file_req *f = arg;
    if (!err) return put_answer(f, NULL);
    f->err = *err;
    put_abandon(f);
}

/* PUT: the body (read in full already) into the new file the keeper opened, then
 * in place of the old one. */
static void on_put_open(struct server *srv, int fd, const err_t *error, void *arg)
{
    struct file_req *f = arg;
    if (fd < 0) return put_answer(f, error);
    struct evbuffer *in = httpd_body(f->req);
    int r = 0;
    f->size = evbuffer_get_length(in);
    while (r == 0 && evbuffer_get_length(in) > 0) {
        int n = evbuffer_write(in, fd);
        if (n < 0) r = -errno;
    }
    if (r == 0 && fsync(fd) < 0) r = -errno;
    close(fd);
    httpd_drop_body(f->req);
    struct sbx *sb = server_sandbox_find(srv, NULL, f->sandbox);
    if (r < 0)
        err_set(&f->err, r, "cannot write %s: %s", f->path, strerror(-r));
    else if (!sb)
        err_set(&f->err, -ENOENT, "sandbox %s was removed during the upload", f->sandbox);
    else if (server_rename_file(srv, sb, f->temp, f->path, f->keep_mode, on_put_renamed, f,
                                &f->err) == 0)
        return;
    put_abandon(f);
}

/* Files up to this size are read into memory and sent with their SHA-256
 * (x-content-sha256), digest and body from the same bytes; larger ones go out with
 * sendfile and their length only. */
#define FILE_DIGEST_MAX (8u << 20)

/* The first n bytes of fd into out; fewer when the file shrank meanwhile. */
static int read_small(int fd, size_t n, struct evbuffer *out, char digest[65])
{
    char *buf = malloc(n ? n : 1);
    if (!buf) return -ENOMEM;
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, buf + got, n - got, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            free(buf);
            return -errno;
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    fingerprint_sha256_hex(buf, got, digest);
    int r = evbuffer_add(out, buf, got);
    free(buf);
    return r < 0 ? -ENOMEM : 0;
}

/* GET: the file's bytes, with x-content-length (Runtime Cloud's SDKs check a body
 * against it and read again when it ends short), x-content-sha256 for a small file,
 * and its mode. */
static void send_file(struct httpd_req *req, int fd, const char *path)
{
    struct stat st;
    char digest[65] = "";
    struct evbuffer *out = evbuffer_new();
    int r = out && fstat(fd, &st) == 0 ? 0 : -EIO;
    if (r == 0 && (uint64_t)st.st_size <= FILE_DIGEST_MAX)
        r = read_small(fd, (size_t)st.st_size, out, digest);
    else if (r == 0 && evbuffer_add_file(out, fd, 0, st.st_size) == 0)
        fd = -1; /* the buffer owns it now */
    else
        r = -EIO;
    if (fd >= 0) close(fd);
    if (r < 0) {
        if (out) evbuffer_free(out);
        return api_error(req, 500, "internal_error", "cannot read %s", path);
    }
    char mode[8], length[24];
    snprintf(mode, sizeof mode, "%04o", (unsigned)(st.st_mode & 0777));
    snprintf(length, sizeof length, "%zu", evbuffer_get_length(out));
    httpd_add_header(req, "Content-Type", "application/octet-stream");
    httpd_add_header(req, "x-content-length", length);
    if (digest[0]) httpd_add_header(req, "x-content-sha256", digest);
    httpd_add_header(req, "X-File-Mode", mode); /* so that a copy can keep it */
    httpd_reply(req, 200, out);
    evbuffer_free(out);
}

static void on_get_open(struct server *srv, int fd, const err_t *error, void *arg)
{
    struct file_req *f = arg;
    if (fd < 0)
        api_file_fail(f->req, error);
    else
        send_file(f->req, fd, f->path);
    free(f);
}

/* The keeper opens the file; the answer goes out from on_put_open or on_get_open. */
static void open_file(struct httpd_req *req, struct server *srv, struct sbx *sb, const char *path,
                      bool put, unsigned mode, bool cloud)
{
    err_t err = {0};
    struct file_req *f = file_req_new(req, srv, sb, path);
    if (!f) return api_error(req, 500, "internal_error", "out of memory");
    f->cloud = cloud;
    if (put) {
        temp_name(path, f->temp, sizeof f->temp);
        f->keep_mode = mode == 0; /* no mode given: a file replaced keeps its own */
    }
    int r = put ? server_open_file(srv, sb, f->temp, 2, mode, on_put_open, f, &err)
                : server_open_file(srv, sb, path, 0, 0, on_get_open, f, &err);
    if (r < 0) {
        free(f);
        api_file_fail(req, &err);
    }
}

int api_file_mode(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n < 1 || n > 4 || strspn(s, "01234567") != n) return -EINVAL;
    long m = strtol(s, NULL, 8);
    return m > 0777 ? -EINVAL : (int)m;
}

void api_files(struct httpd_req *req, struct server *srv, struct sbx *sb, const char *sub)
{
    static const char *const known[] = {"path", "mode", NULL};
    struct evkeyvalq q;
    if (!api_query(req, &q, known)) return;
    char path[PROTO_PATH_LEN];
    int r = sandbox_path(evhttp_find_header(&q, "path"), path, sizeof path);
    const char *mode_text = evhttp_find_header(&q, "mode");
    int mode = mode_text ? api_file_mode(mode_text) : 0;
    evhttp_clear_headers(&q);
    if (r < 0)
        return api_error(req, 400, "invalid_request", "give the file as ?path=/workspace/NAME");
    bool put = httpd_method(req) == HTTPD_PUT;
    if (mode < 0 || (mode_text && !put))
        return api_error(req, 400, "invalid_request",
                         "mode is for PUT only, and is permission bits "
                         "in octal such as 0755 or 0644 (at most 0777)");
    open_file(req, srv, sb, path, put, (unsigned)mode, sub != NULL);
}
