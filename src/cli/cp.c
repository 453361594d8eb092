/* `runtime sandbox cp LOCAL ID:PATH | ID:PATH LOCAL` over the files API. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WORKSPACE "/workspace"
/* Uploads are read whole before they are sent. */
#define MAX_UPLOAD ((size_t)1 << 30)

static const char cmd_name[] = "sandbox cp";

struct remote {
    char id[256];
    char path[4096]; /* absolute inside the sandbox */
};

/* "ID:PATH": a colon with no slash before it. "./a:b" and "/a:b" stay local. */
static bool is_remote(const char *arg)
{
    const char *colon = strchr(arg, ':');
    return colon && colon != arg && !memchr(arg, '/', (size_t)(colon - arg));
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* Splits ID:PATH; a relative PATH is under /workspace, and one ending in '/' takes
 * other_name (the local file's name) when given. */
static int parse_remote(const char *arg, const char *other_name, struct remote *r)
{
    const char *colon = strchr(arg, ':'), *p = colon + 1;
    int n = snprintf(r->id, sizeof r->id, "%.*s", (int)(colon - arg), arg);
    if (n < 0 || (size_t)n >= sizeof r->id) return cli_usage_error(cmd_name, "ID is too long");
    bool dir = *p == '\0' || p[strlen(p) - 1] == '/';
    if (dir && !other_name)
        return cli_usage_error(cmd_name, "'%s' names a directory; name the file, as ID:PATH", arg);
    n = snprintf(r->path, sizeof r->path, "%s%s%s", *p == '/' ? "" : WORKSPACE "/", p,
                 dir ? other_name : "");
    if (n < 0 || (size_t)n >= sizeof r->path) return cli_usage_error(cmd_name, "PATH is too long");
    return 0;
}

/* The files API path of r; mode (an upload's, 0 for none) goes along. */
static char *files_path(const struct remote *r, unsigned mode)
{
    char *enc = url_encode(r->path, "/");
    char *sb = enc ? api_sandbox_path(r->id, "/files?path=") : NULL;
    char *full = NULL, m[16] = "";
    if (mode) snprintf(m, sizeof m, "&mode=%04o", mode);
    if (sb && asprintf(&full, "%s%s%s", sb, enc, m) < 0) full = NULL;
    free(enc);
    free(sb);
    return full;
}

/* Reads LOCAL (or stdin for "-") whole; *mode is its permission bits (0 for stdin). */
static int read_local(const char *local, char **buf, size_t *len, unsigned *mode)
{
    int fd = strcmp(local, "-") == 0 ? 0 : open(local, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0) return cli_error("cannot open %s: %s", local, strerror(errno));
    int r = fstat(fd, &st) < 0 ? -errno : 0;
    *mode = fd > 0 && r == 0 ? (unsigned)(st.st_mode & 0777) : 0;
    if (r == 0 && S_ISDIR(st.st_mode)) r = -EISDIR;
    if (r == 0) r = read_fd_all(fd, MAX_UPLOAD, buf, len);
    if (fd > 0) close(fd);
    if (r == -EISDIR) return cli_error("%s is a directory; cp copies one file at a time", local);
    if (r == -EFBIG) return cli_error("%s is over 1 GiB, too big to copy", local);
    if (r < 0) return cli_error("cannot read %s: %s", local, strerror(-r));
    return 0;
}

static int upload(struct cli *c, const char *local, const char *dst)
{
    struct remote r;
    const char *name = strcmp(local, "-") == 0 ? NULL : base_name(local);
    if (parse_remote(dst, name && *name ? name : NULL, &r)) return EXIT_USAGE;
    char *buf = NULL, *path = NULL;
    size_t len = 0;
    unsigned mode = 0;
    /* The file keeps its mode, as with docker cp: an executable stays executable. */
    int ret = read_local(local, &buf, &len, &mode);
    if (ret == 0 && !(path = files_path(&r, mode))) ret = cli_error("out of memory");
    if (ret == 0) {
        struct http_req req = {.method = "PUT",
                               .path = path,
                               .content_type = "application/octet-stream",
                               .body = buf,
                               .body_len = len,
                               .sink_fd = -1};
        struct http_resp resp = {0};
        ret = api_call(c, &req, &resp);
        http_resp_free(&resp);
    }
    free(buf);
    free(path);
    return ret;
}

/* Writes the file to fd; *mode is its mode in the sandbox (-1 when not said). */
static int fetch_to(struct cli *c, const struct remote *r, int fd, int *mode)
{
    char *path = files_path(r, 0);
    if (!path) return cli_error("out of memory");
    struct http_req req = {.method = "GET", .path = path, .sink_fd = fd};
    struct http_resp resp = {0};
    int ret = api_call(c, &req, &resp);
    *mode = resp.file_mode;
    http_resp_free(&resp);
    free(path);
    return ret;
}

/* LOCAL, or LOCAL/NAME when LOCAL is a directory (as cp does). */
static int local_target(const char *local, const struct remote *r, char *out, size_t size)
{
    struct stat st;
    bool dir = stat(local, &st) == 0 && S_ISDIR(st.st_mode);
    int n = snprintf(out, size, "%s%s%s", local, dir ? "/" : "", dir ? base_name(r->path) : "");
    if (n < 0 || (size_t)n >= size) return cli_usage_error(cmd_name, "LOCAL is too long");
    return 0;
}

static int download(struct cli *c, const char *src, const char *local)
{
    struct remote r;
    char target[4096];
    struct tmpfile t;
    int mode;
    if (parse_remote(src, NULL, &r)) return EXIT_USAGE;
    if (strcmp(local, "-") == 0) return fetch_to(c, &r, 1, &mode);
    if (local_target(local, &r, target, sizeof target)) return EXIT_USAGE;
    int e = tmpfile_open(&t, target);
    if (e < 0) return cli_error("cannot write %s: %s", target, strerror(-e));
    int ret = fetch_to(c, &r, t.fd, &mode);
    e = tmpfile_finish(&t, ret == 0, mode); /* the sandbox file's mode, as docker cp keeps it */
    if (ret == 0 && e < 0) ret = cli_error("cannot write %s: %s", target, strerror(-e));
    return ret;
}

int cmd_sandbox_cp(struct cli *c, int argc, char **argv)
{
    static const struct opt_spec none[] = {{NULL, false, 0}};
    const char *pos[2];
    int n = 0, id;
    struct args a;
    args_init(&a, argc, argv, cmd_name, none);
    while ((id = args_next(&a)) != ARG_END) {
        if (id == ARG_HELP) return usage_print(cmd_name, stdout), EXIT_OK;
        if (id == ARG_BAD) return EXIT_USAGE;
        if (id == ARG_REST) break; /* after "--", LOCAL may start with '-' */
        if (n == 2) return cli_usage_error(cmd_name, "too many arguments: give SOURCE DEST");
        pos[n++] = a.val;
    }
    for (; id == ARG_REST && a.i < a.argc; a.i++) {
        if (n == 2) return cli_usage_error(cmd_name, "too many arguments: give SOURCE DEST");
        pos[n++] = a.argv[a.i];
    }
    if (n < 2) return cli_usage_error(cmd_name, "give a SOURCE and a DEST, one of them ID:PATH");
    bool r0 = is_remote(pos[0]) && strcmp(pos[0], "-") != 0, r1 = is_remote(pos[1]);
    if (r0 == r1)
        return cli_usage_error(cmd_name, "exactly one of '%s' and '%s' must be ID:PATH", pos[0],
                               pos[1]);
    return r0 ? download(c, pos[0], pos[1]) : upload(c, pos[0], pos[1]);
}
