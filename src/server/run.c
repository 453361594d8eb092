/* Programs run to their end in a sandbox, on the loop: the keeper starts the process and
 * hands back its pipes; this file feeds stdin, collects output up to a cap and calls back
 * once the status pipe says the process ended (not at EOF: a background child may keep
 * the pipes open for ever). Used by the exec API and by MCP server installs. The
 * keeper's answer (the pipes) comes back on the loop too: until then the run is
 * `starting`, and a cancel only marks it. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server_impl.h"

struct stream {
    int fd;
    struct event *ev;
    struct evbuffer *buf;
    size_t dropped; /* bytes past the cap */
    size_t cap;
    int number; /* 1 stdout, 2 stderr */
    struct server_run *run;
};

struct server_run {
    struct stream out, err;
    int in_fd;
    struct event *in_ev;
    struct evbuffer *stdin_buf;
    int status_fd;
    struct event *status_ev;
    server_run_done done;
    void (*on_output)(void *arg, int stream, const char *data, size_t len);
    void *arg;
    bool starting;  /* the keeper has not answered yet */
    bool cancelled; /* while starting: free it when the answer comes */
    struct server *srv;
    struct server_run *prev, *next; /* the server's runs, for server_runs_stop */
};

static void stream_close(struct stream *s)
{
    if (s->ev) event_free(s->ev);
    if (s->fd >= 0) close(s->fd);
    s->ev = NULL;
    s->fd = -1;
}

static void stdin_close(struct server_run *j)
{
    if (j->in_ev) event_free(j->in_ev);
    if (j->in_fd >= 0) close(j->in_fd);
    j->in_ev = NULL;
    j->in_fd = -1;
}

static void unlink_run(struct server_run *j)
{
    if (j->prev)
        j->prev->next = j->next;
    else if (j->srv)
        j->srv->runs = j->next;
    if (j->next) j->next->prev = j->prev;
    j->prev = j->next = NULL;
    j->srv = NULL;
}

void server_run_cancel(struct server_run *j)
{
    if (!j) return;
    if (j->starting) {
        j->cancelled = true;
        return;
    }
    unlink_run(j);
    stream_close(&j->out);
    stream_close(&j->err);
    stdin_close(j);
    if (j->status_ev) event_free(j->status_ev);
    if (j->status_fd >= 0) close(j->status_fd); /* the monitor kills the program */
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
        struct server_run *j = s->run;
        if (j->on_output) {
            j->on_output(j->arg, s->number, chunk, (size_t)n);
            continue;
        }
        size_t have = evbuffer_get_length(s->buf);
        size_t room = have < s->cap ? s->cap - have : 0;
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
    struct server_run *j = arg;
    while (evbuffer_get_length(j->stdin_buf) > 0) {
        int n = evbuffer_write(j->stdin_buf, fd);
        if (n < 0 && errno == EAGAIN) return;
        if (n <= 0) break; /* EPIPE: the program does not read its input */
    }
    stdin_close(j);
}

static void on_status(evutil_socket_t fd, short what, void *arg)
{
    struct server_run *j = arg;
    struct proto_exec_status st = {.exit_code = -1, .start_errno = EIO};
    ssize_t n = read(fd, &st, sizeof st);
    if (n < 0 && errno == EAGAIN) return;
    if (j->out.fd >= 0) stream_drain(&j->out);
    if (j->err.fd >= 0) stream_drain(&j->err);
    struct server_run_result res = {
        .ended = n == (ssize_t)sizeof st,
        .exit_code = st.exit_code,
        .signal = st.signal,
        .start_errno = st.exit_code == -1 ? st.start_errno : 0,
        .timed_out = st.timed_out != 0,
        .duration_ms = st.duration_ms,
        .out = j->out.buf,
        .err = j->err.buf,
        .out_dropped = j->out.dropped,
        .err_dropped = j->err.dropped,
    };
    j->done(j->arg, &res);
    server_run_cancel(j);
}

static void nonblock(int fd)
{
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* The keeper started it (or could not): now the pipes are watched. */
static void on_started(struct server *srv, const struct proto_result *res, int *fds, unsigned nfds,
                       void *arg)
{
    struct server_run *j = arg;
    j->starting = false;
    if (j->cancelled) { /* nobody wants its pipes */
        for (unsigned i = 0; i < nfds; i++)
            close(fds[i]);
        return server_run_cancel(j);
    }
    err_t err = {0};
    if (server_keeper_fds(res, fds, nfds, 4, "pipes", &err) < 0) {
        struct server_run_result r = {.error = &err, .out = j->out.buf, .err = j->err.buf};
        j->done(j->arg, &r);
        return server_run_cancel(j);
    }
    j->in_fd = fds[0];
    j->out.fd = fds[1];
    j->err.fd = fds[2];
    j->status_fd = fds[3];
    for (int i = 0; i < 4; i++)
        nonblock(fds[i]);
    struct event_base *base = server_base(srv);
    j->out.ev = event_new(base, j->out.fd, EV_READ | EV_PERSIST, on_stream, &j->out);
    j->err.ev = event_new(base, j->err.fd, EV_READ | EV_PERSIST, on_stream, &j->err);
    j->status_ev = event_new(base, j->status_fd, EV_READ | EV_PERSIST, on_status, j);
    event_add(j->out.ev, NULL);
    event_add(j->err.ev, NULL);
    event_add(j->status_ev, NULL);
    if (j->stdin_buf) {
        j->in_ev = event_new(base, j->in_fd, EV_WRITE | EV_PERSIST, on_stdin, j);
        event_add(j->in_ev, NULL);
    } else {
        stdin_close(j);
    }
}

int server_run(struct server *srv, struct sbx *sb, const struct server_run_spec *spec,
               server_run_done done, void *arg, struct server_run **out, err_t *err)
{
    struct server_run *j = calloc(1, sizeof *j);
    if (!j) return err_set(err, -ENOMEM, "out of memory");
    j->done = done;
    j->on_output = spec->on_output;
    j->arg = arg;
    j->in_fd = j->status_fd = -1;
    j->out = (struct stream){.fd = -1, .buf = evbuffer_new(), .cap = spec->output_cap, 1, j};
    j->err = (struct stream){.fd = -1, .buf = evbuffer_new(), .cap = spec->output_cap, 2, j};
    if (spec->stdin_len > 0) { /* copied now: the caller's text is gone by the answer */
        j->stdin_buf = evbuffer_new();
        evbuffer_add(j->stdin_buf, spec->stdin_text, spec->stdin_len);
    }
    int r = server_exec_send(srv, sb, spec, on_started, j, err);
    if (r < 0) {
        server_run_cancel(j);
        return r;
    }
    j->starting = true;
    j->srv = srv;
    j->next = srv->runs;
    if (j->next) j->next->prev = j;
    srv->runs = j;
    if (out) *out = j;
    return 0;
}

/* At shutdown, after the sandboxes (and their installs) are gone: whoever still
 * waits for a run (an exec request) is told, with its connection still there. */
void server_runs_stop(struct server *srv)
{
    err_t err = {0};
    err_set(&err, -ESHUTDOWN, "runtimed is stopping; the program was stopped");
    struct server_run *j;
    while ((j = srv->runs)) {
        struct server_run_result r = {.error = &err, .out = j->out.buf, .err = j->err.buf};
        bool wanted = !j->cancelled;        /* a cancelled one's caller is gone */
        j->starting = j->cancelled = false; /* the keeper's answer will not come now */
        if (wanted) j->done(j->arg, &r);
        server_run_cancel(j);
    }
}

/* ---- the environment of programs in a sandbox ---- */

json_t *server_exec_env(struct server *srv, struct sbx *sb, json_t *extra, err_t *err)
{
    /* The bundle holds the system roots and the interception CA; tools that do
     * not read the system store are pointed at it. */
    const char *bundle = "/etc/ssl/certs/ca-certificates.crt";
    json_t *env = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "PATH",
                            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME",
                            "/workspace", "USER", "user", "LOGNAME", "user", "LANG", "C.UTF-8",
                            "NODE_EXTRA_CA_CERTS", bundle, "SSL_CERT_FILE", bundle,
                            "REQUESTS_CA_BUNDLE", bundle, "GIT_SSL_CAINFO", bundle);
    if (vault_env(srv->vault, sb->account, sb->id, env, err) < 0) {
        json_decref(env);
        return NULL;
    }
    json_object_update_new(env, model_map_json(&sb->settings.env));
    if (extra) json_object_update(env, extra);
    return env;
}

int server_env_list(json_t *env, char ***out, err_t *err)
{
    char **list = calloc(json_object_size(env) + 1, sizeof *list);
    if (!list) return err_set(err, -ENOMEM, "out of memory");
    size_t n = 0;
    const char *k;
    json_t *v;
    json_object_foreach(env, k, v)
    {
        const char *val = json_string_value(v);
        if (!val || strlen(val) != json_string_length(v) || !*k || strchr(k, '=')) {
            server_env_free(list);
            return err_set(err, -EINVAL,
                           "env.%.64s must be a string without NUL bytes and a "
                           "name without '='",
                           k);
        }
        if (asprintf(&list[n++], "%s=%s", k, val) < 0) list[--n] = NULL;
    }
    *out = list;
    return 0;
}

void server_env_free(char **list)
{
    for (char **p = list; p && *p; p++)
        free(*p);
    free(list);
}
