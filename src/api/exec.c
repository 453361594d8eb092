/* POST /v1/sandboxes/{id}/exec: the keeper starts the process and hands back its
 * pipes; this file feeds stdin, collects output up to a cap and replies once the
 * status pipe says the process ended (not at EOF: a background child may keep
 * the pipes open for ever). */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api_impl.h"

#define MAX_ARGV 4096

struct stream {
    int fd;
    struct event *ev;
    struct evbuffer *buf;
    size_t dropped; /* bytes past the cap */
};

struct exec_job {
    struct evhttp_request *req;
    struct stream out, err;
    int in_fd;
    struct event *in_ev;
    struct evbuffer *stdin_buf;
    int status_fd;
    struct event *status_ev;
};

static void stream_close(struct stream *s)
{
    if (s->ev) event_free(s->ev);
    if (s->fd >= 0) close(s->fd);
    s->ev = NULL;
    s->fd = -1;
}

static void stdin_close(struct exec_job *j)
{
    if (j->in_ev) event_free(j->in_ev);
    if (j->in_fd >= 0) close(j->in_fd);
    j->in_ev = NULL;
    j->in_fd = -1;
}

static void job_free(struct exec_job *j)
{
    stream_close(&j->out);
    stream_close(&j->err);
    stdin_close(j);
    if (j->status_ev) event_free(j->status_ev);
    if (j->status_fd >= 0) close(j->status_fd);
    if (j->out.buf) evbuffer_free(j->out.buf);
    if (j->err.buf) evbuffer_free(j->err.buf);
    if (j->stdin_buf) evbuffer_free(j->stdin_buf);
    free(j);
}

/* Reads what is there now; returns false at EOF or error. */
static bool stream_drain(struct stream *s)
{
    char chunk[16384];
    for (;;) {
        ssize_t n = read(s->fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return errno == EAGAIN;
        if (n == 0) return false;
        size_t have = evbuffer_get_length(s->buf);
        size_t room = have < API_MAX_OUTPUT ? API_MAX_OUTPUT - have : 0;
        size_t take = (size_t)n < room ? (size_t)n : room;
        evbuffer_add(s->buf, chunk, take);
        s->dropped += (size_t)n - take;
    }
}

static void on_stream(evutil_socket_t fd, short what, void *arg)
{
    struct stream *s = arg;
    if (!stream_drain(s)) stream_close(s);
}

static void on_stdin(evutil_socket_t fd, short what, void *arg)
{
    struct exec_job *j = arg;
    while (evbuffer_get_length(j->stdin_buf) > 0) {
        int n = evbuffer_write(j->stdin_buf, fd);
        if (n < 0 && errno == EAGAIN) return;
        if (n <= 0) break; /* EPIPE: the program does not read its input */
    }
    stdin_close(j);
}

static json_t *stream_json(struct stream *s)
{
    if (s->dropped)
        evbuffer_add_printf(s->buf, "\n[runtime: output truncated after %u bytes; %zu bytes "
                            "dropped]\n", API_MAX_OUTPUT, s->dropped);
    size_t n = evbuffer_get_length(s->buf);
    return api_json_text((const char *)evbuffer_pullup(s->buf, -1), n);
}

static void on_status(evutil_socket_t fd, short what, void *arg)
{
    struct exec_job *j = arg;
    struct proto_exec_status st = {.exit_code = -1, .start_errno = EIO};
    ssize_t n = read(fd, &st, sizeof st);
    if (n < 0 && errno == EAGAIN) return;
    if (j->out.fd >= 0) stream_drain(&j->out);
    if (j->err.fd >= 0) stream_drain(&j->err);
    if (n == (ssize_t)sizeof st && st.exit_code == -1) {
        api_error(j->req, 400, "exec_failed", "cannot start the program: %s; check argv[0] "
                  "and that it exists in the sandbox", strerror(st.start_errno));
    } else if (n != (ssize_t)sizeof st) {
        api_error(j->req, 500, "internal", "the exec monitor ended without a status");
    } else {
        json_t *res = json_pack("{s:i,s:o,s:o,s:b,s:I}", "exitCode", st.exit_code, "stdout",
                                stream_json(&j->out), "stderr", stream_json(&j->err),
                                "timedOut", st.timed_out != 0, "durationMs",
                                (json_int_t)st.duration_ms);
        api_json(j->req, 200, res);
    }
    job_free(j);
}

/* Fills a NULL-terminated list from a JSON array of strings. */
static int argv_from(json_t *arr, const char **out, size_t max, err_t *err)
{
    if (!json_is_array(arr) || json_array_size(arr) == 0 || json_array_size(arr) >= max)
        return err_set(err, -EINVAL, "argv must be a non-empty array of strings, e.g. "
                       "[\"ls\", \"-l\"]");
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) {
        if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
            return err_set(err, -EINVAL, "argv[%zu] must be a string without NUL bytes", i);
        out[i] = json_string_value(v);
    }
    out[json_array_size(arr)] = NULL;
    return 0;
}

/* The environment: defaults, the secrets' placeholders under their own names,
 * then the sandbox's env, then the request's. */
static json_t *merged_env(struct server *srv, struct sbx *sb, json_t *req_env, err_t *err)
{
    /* The bundle holds the system roots and the interception CA; tools that do
     * not read the system store are pointed at it. */
    const char *bundle = "/etc/ssl/certs/ca-certificates.crt";
    json_t *env = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "PATH",
                            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                            "HOME", "/workspace", "USER", "user", "LOGNAME", "user", "LANG",
                            "C.UTF-8", "NODE_EXTRA_CA_CERTS", bundle, "SSL_CERT_FILE", bundle,
                            "REQUESTS_CA_BUNDLE", bundle, "GIT_SSL_CAINFO", bundle);
    if (server_secret_env(srv, sb, env, err) < 0) {
        json_decref(env);
        return NULL;
    }
    json_object_update(env, json_object_get(sb->spec, "env"));
    json_object_update(env, req_env);
    return env;
}

static int env_list(json_t *env, char ***out, err_t *err)
{
    char **list = calloc(json_object_size(env) + 1, sizeof *list);
    size_t n = 0;
    const char *k;
    json_t *v;
    json_object_foreach(env, k, v) {
        const char *val = json_string_value(v);
        if (!val || strlen(val) != json_string_length(v) || !*k || strchr(k, '=')) {
            for (size_t i = 0; i < n; i++) free(list[i]);
            free(list);
            return err_set(err, -EINVAL, "env.%.64s must be a string without NUL bytes and a "
                           "name without '='", k);
        }
        if (asprintf(&list[n++], "%s=%s", k, val) < 0) list[--n] = NULL;
    }
    *out = list;
    return 0;
}

static void free_list(char **list)
{
    for (char **p = list; p && *p; p++) free(*p);
    free(list);
}

static int parse_request(json_t *body, struct server *srv, struct sbx *sb, const char **argv,
                         char ***envp,
                         const char **cwd, uint32_t *timeout, err_t *err)
{
    int r = argv_from(json_object_get(body, "argv"), argv, MAX_ARGV, err);
    if (r < 0) return r;
    json_t *e = json_object_get(body, "env");
    if (e && !json_is_object(e)) return err_set(err, -EINVAL, "env must be an object of strings");
    json_t *c = json_object_get(body, "cwd"), *t = json_object_get(body, "timeoutMs");
    json_t *in = json_object_get(body, "stdin");
    *cwd = c ? json_string_value(c) : "/workspace";
    if (!*cwd || (*cwd)[0] != '/') return err_set(err, -EINVAL, "cwd must be an absolute path");
    json_int_t ms = t ? json_integer_value(t) : 60000;
    if ((t && !json_is_integer(t)) || ms < 1 || ms > API_MAX_TIMEOUT_MS)
        return err_set(err, -EINVAL, "timeoutMs must be from 1 to %u", API_MAX_TIMEOUT_MS);
    if (in && !json_is_string(in) && !json_is_null(in))
        return err_set(err, -EINVAL, "stdin must be a string");
    *timeout = (uint32_t)ms;
    json_t *env = merged_env(srv, sb, e, err);
    if (!env) return -EIO;
    r = env_list(env, envp, err);
    json_decref(env);
    return r;
}

static void nonblock(int fd)
{
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static void start_job(struct evhttp_request *req, struct server *srv, int fds[4], json_t *in)
{
    struct event_base *base = server_base(srv);
    struct exec_job *j = calloc(1, sizeof *j);
    j->req = req;
    j->in_fd = fds[0];
    j->out = (struct stream){.fd = fds[1], .buf = evbuffer_new()};
    j->err = (struct stream){.fd = fds[2], .buf = evbuffer_new()};
    j->status_fd = fds[3];
    for (int i = 0; i < 4; i++) nonblock(fds[i]);
    j->out.ev = event_new(base, j->out.fd, EV_READ | EV_PERSIST, on_stream, &j->out);
    j->err.ev = event_new(base, j->err.fd, EV_READ | EV_PERSIST, on_stream, &j->err);
    j->status_ev = event_new(base, j->status_fd, EV_READ | EV_PERSIST, on_status, j);
    event_add(j->out.ev, NULL);
    event_add(j->err.ev, NULL);
    event_add(j->status_ev, NULL);
    const char *text = json_string_value(in);
    if (text && json_string_length(in) > 0) {
        j->stdin_buf = evbuffer_new();
        evbuffer_add(j->stdin_buf, text, json_string_length(in));
        j->in_ev = event_new(base, j->in_fd, EV_WRITE | EV_PERSIST, on_stdin, j);
        event_add(j->in_ev, NULL);
    } else {
        stdin_close(j);
    }
}

void api_exec(struct evhttp_request *req, struct server *srv, struct sbx *sb)
{
    json_t *body = api_body_json(req, false);
    if (!body) return;
    const char *argv[MAX_ARGV];
    char **envp = NULL;
    const char *cwd = NULL;
    uint32_t timeout = 0;
    err_t err = {0};
    int fds[4];
    int r = parse_request(body, srv, sb, argv, &envp, &cwd, &timeout, &err);
    if (r == 0)
        r = server_exec(srv, sb, argv, (const char *const *)envp, cwd, timeout, fds, &err);
    if (r < 0) api_fail(req, &err);
    else start_job(req, srv, fds, json_object_get(body, "stdin"));
    free_list(envp);
    json_decref(body);
}
