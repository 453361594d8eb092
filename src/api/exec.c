/* POST /v1/sandboxes/{id}/exec (and :exec): runs the program to its end (server_run)
 * and replies with its status and output; with "stream": true, as Runtime Cloud does,
 * the answer is NDJSON events while it runs: start, stdout and stderr (with their
 * byte offset, one count for both), exit. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_impl.h"

#define MAX_ARGV PROTO_MAX_STRINGS
#define MAX_RUNNING_EXECS 64 /* per sandbox: each holds four pipes in the server */
/* Exec starts a second per sandbox (bursts of 3x): each start is a keeper call that
 * the server's loop waits for (about 1.4 ms), so a storm of short execs would slow
 * every sandbox; a program running short commands one after another stays below. */
#define EXEC_STARTS_PER_S 100
/* A streamed exec's reader that leaves this much unread is cut (and its program ended). */
#define EXEC_STREAM_BACKLOG (16u << 20)

struct api_sandbox *api_sandbox_of(struct sbx *sb)
{
    struct api_sandbox *a = sbx_slot(sb, SBX_SLOT_API);
    if (a) return a;
    a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->exec_rate = RATE_LIMIT(EXEC_STARTS_PER_S, 3 * EXEC_STARTS_PER_S);
    sbx_set_slot(sb, SBX_SLOT_API, a);
    return a;
}

void api_sandbox_freed(struct sbx *sb)
{
    struct api_sandbox *a = sbx_slot(sb, SBX_SLOT_API);
    if (a) api_uploads_free(a);
    free(a);
    sbx_set_slot(sb, SBX_SLOT_API, NULL);
}

static json_t *stream_json(struct evbuffer *buf, size_t dropped)
{
    if (dropped)
        evbuffer_add_printf(buf,
                            "\n[runtime: output truncated after %u bytes; %zu bytes "
                            "dropped]\n",
                            API_MAX_OUTPUT, dropped);
    size_t n = evbuffer_get_length(buf);
    return api_json_text((const char *)evbuffer_pullup(buf, -1), n);
}

/* By id: the sandbox may be removed while its program runs. */
struct exec_call {
    struct httpd_req *req;
    struct server *srv;
    char sandbox[PROTO_ID_LEN];
};

/* One exec fewer under way in the sandbox (if it is still there). */
static void exec_ended(struct server *srv, const char *sandbox)
{
    struct sbx *sb = server_sandbox_find(srv, NULL, sandbox);
    struct api_sandbox *a = sb ? sbx_slot(sb, SBX_SLOT_API) : NULL;
    if (sb) server_sandbox_hold(sb, -1);
    if (a) a->execs--;
}

/* How a command ended, as Runtime Cloud says it: exitCode (null when a signal or the
 * timeout ended it), state (exited, killed, timed_out), timedOut, durationMs; and
 * runtimed's signal ("SIGKILL") when one ended it. */
static json_t *ended_json(const struct server_run_result *res)
{
    bool exited = !res->signal && !res->timed_out;
    json_t *v = json_pack("{s:o,s:s,s:b,s:I}", "exitCode",
                          exited ? json_integer(res->exit_code) : json_null(), "state",
                          res->timed_out ? "timed_out"
                          : exited       ? "exited"
                                         : "killed",
                          "timedOut", res->timed_out, "durationMs", (json_int_t)res->duration_ms);
    const char *name = res->signal ? sigabbrev_np(res->signal) : NULL;
    if (name) json_object_set_new(v, "signal", json_sprintf("SIG%s", name));
    return v;
}

static void on_done(void *arg, const struct server_run_result *res)
{
    struct exec_call *call = arg;
    struct httpd_req *req = call->req;
    exec_ended(call->srv, call->sandbox);
    free(call);
    if (res->error) {
        api_fail(req, res->error);
    } else if (res->ended && res->exit_code == -1) {
        api_error(req, 400, "exec_failed",
                  "cannot start the program: %s; check argv[0] "
                  "and that it exists in the sandbox",
                  strerror(res->start_errno));
    } else if (!res->ended) {
        api_error(req, 500, "internal_error", "the exec monitor ended without a status");
    } else {
        json_t *out = ended_json(res);
        json_object_set_new(out, "stdout", stream_json(res->out, res->out_dropped));
        json_object_set_new(out, "stderr", stream_json(res->err, res->err_dropped));
        json_object_set_new(out, "stdoutTruncated", json_boolean(res->out_dropped > 0));
        json_object_set_new(out, "stderrTruncated", json_boolean(res->err_dropped > 0));
        api_json(req, 200, out);
    }
}

/* Fills a NULL-terminated list from a JSON array of strings. */
int api_argv_from(json_t *arr, const char **out, size_t max, err_t *err)
{
    if (!json_is_array(arr) || json_array_size(arr) == 0 || json_array_size(arr) >= max)
        return err_set(err, -EINVAL,
                       "argv must be a non-empty array of strings, e.g. "
                       "[\"ls\", \"-l\"]");
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v)
    {
        if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
            return err_set(err, -EINVAL, "argv[%zu] must be a string without NUL bytes", i);
        out[i] = json_string_value(v);
    }
    out[json_array_size(arr)] = NULL;
    return 0;
}

static int command_argv(json_t *command, const char **argv, err_t *err)
{
    const char *line = json_string_value(command);
    if (!line || !line[0] || strlen(line) != json_string_length(command))
        return err_set(err, -EINVAL,
                       "command must be a non-empty string without NUL bytes, run by bash -c");
    argv[0] = "/bin/bash";
    argv[1] = "-c";
    argv[2] = line;
    argv[3] = NULL;
    return 0;
}

/* An exec body's fields (Runtime Cloud's :exec; user and traceFiles as below). */
static const char *const exec_fields[] = {"argv",  "command",     "env",       "cwd",
                                          "stdin", "stdinBase64", "timeoutMs", "stream",
                                          "user",  "traceFiles",  NULL};

/* Runtime Cloud's user and traceFiles: runtimed runs every command as the sandbox's
 * user and traces no files, so "sandbox" and false are taken (and dropped) and any other
 * value is refused by name. true after answering. */
static bool refuse_cloud_only(struct httpd_req *req, json_t *body)
{
    static const char *const fields[] = {"user", "traceFiles", NULL};
    err_t err = {0};
    if (json_known_fields(body, NULL, exec_fields, &err) < 0) { /* unknown ones first */
        api_fail(req, &err);
        return true;
    }
    json_t *user = json_object_get(body, "user"), *trace = json_object_get(body, "traceFiles");
    if (json_is_string(user) && strcmp(json_string_value(user), "sandbox") == 0)
        json_object_del(body, "user");
    if (json_is_false(trace)) json_object_del(body, "traceFiles");
    if (api_refuse_cloud_only(req, body, fields)) return true;
    json_object_del(body, "user"); /* null: the default */
    json_object_del(body, "traceFiles");
    return false;
}

/* A body refuse_cloud_only let through into spec; *stdin_bytes: stdinBase64 decoded (the
 * caller frees it). */
static int parse_request(json_t *body, struct server *srv, struct sbx *sb,
                         struct server_run_spec *spec, const char **argv, char ***envp,
                         char **stdin_bytes, err_t *err)
{
    int r = 0; /* its fields are known: refuse_cloud_only checked them */
    json_t *command = json_object_get(body, "command");
    if (r == 0 && command && json_object_get(body, "argv"))
        r = err_set(err, -EINVAL, "give argv or command, not both");
    if (r == 0 && command) /* Runtime Cloud's: a line for bash */
        r = command_argv(command, argv, err);
    else if (r == 0)
        r = api_argv_from(json_object_get(body, "argv"), argv, MAX_ARGV, err);
    if (r < 0) return r;
    json_t *e = json_object_get(body, "env");
    if (e && !json_is_object(e)) return err_set(err, -EINVAL, "env must be an object of strings");
    if (json_object_size(e) > PROTO_MAX_STRINGS)
        return err_set(err, -E2BIG, "too many environment variables: %zu, at most %u",
                       json_object_size(e), PROTO_MAX_STRINGS);
    json_t *c = json_object_get(body, "cwd"), *t = json_object_get(body, "timeoutMs");
    json_t *in = json_object_get(body, "stdin");
    spec->cwd = c ? json_string_value(c) : "/workspace";
    if (!spec->cwd || spec->cwd[0] != '/')
        return err_set(err, -EINVAL, "cwd must be an absolute path");
    json_int_t ms = t ? json_integer_value(t) : 60000;
    if ((t && !json_is_integer(t)) || ms < 1 || ms > API_MAX_TIMEOUT_MS)
        return err_set(err, -EINVAL, "timeoutMs must be from 1 to %u", API_MAX_TIMEOUT_MS);
    if (in && !json_is_string(in) && !json_is_null(in))
        return err_set(err, -EINVAL, "stdin must be a string");
    json_t *stream = json_object_get(body, "stream");
    if (stream && !json_is_boolean(stream))
        return err_set(err, -EINVAL, "stream must be true or false");
    spec->timeout_ms = (uint32_t)ms;
    spec->stdin_text = json_string_value(in);
    spec->stdin_len = json_is_string(in) ? json_string_length(in) : 0;
    json_t *in64 = json_object_get(body, "stdinBase64");
    if (in64 && in) return err_set(err, -EINVAL, "give stdin or stdinBase64, not both");
    if (in64 && (!json_is_string(in64) ||
                 api_base64_decode(json_string_value(in64), json_string_length(in64), stdin_bytes,
                                   &spec->stdin_len) < 0))
        return err_set(err, -EINVAL, "stdinBase64 must be standard base64");
    if (in64) spec->stdin_text = *stdin_bytes;
    spec->output_cap = API_MAX_OUTPUT;
    json_t *env = server_exec_env(srv, sb, e, err);
    if (!env) return -EIO;
    r = server_env_list(env, envp, err);
    json_decref(env);
    spec->argv = argv;
    spec->envp = (const char *const *)*envp;
    return r;
}

/* ---- a streamed exec ---- */

struct exec_stream {
    struct httpd_req *req;
    struct server *srv;
    char sandbox[PROTO_ID_LEN];
    struct server_run *run; /* NULL once it ended */
    uint64_t offset;        /* bytes of stdout and stderr sent so far */
    bool ending;            /* its reader left: the end is on its way (end_later) */
};

static void stream_line(struct exec_stream *es, json_t *event)
{
    char *text = json_dumps(event, JSON_COMPACT);
    json_decref(event);
    if (!text) return;
    httpd_stream_send(es->req, text, strlen(text));
    httpd_stream_send(es->req, "\n", 1);
    free(text);
}

static void stream_finish(struct exec_stream *es)
{
    httpd_stream_end(es->req);
    exec_ended(es->srv, es->sandbox);
    free(es);
}

/* Output as it comes: text when it is UTF-8, else (a cut character, binary) base64
 * too, which the SDKs count the offset by. */
static void on_stream_output(void *arg, int stream, const char *data, size_t len)
{
    struct exec_stream *es = arg;
    if (es->ending || !httpd_connected(es->req)) return;
    json_t *text = api_json_text(data, len);
    json_t *event = json_pack("{s:s,s:I,s:o}", "type", stream == 1 ? "stdout" : "stderr", "offset",
                              (json_int_t)es->offset, "data", text);
    if (json_string_length(text) != len || memcmp(json_string_value(text), data, len) != 0)
        json_object_set_new(event, "base64", api_base64(data, len));
    es->offset += len;
    stream_line(es, event);
    if (httpd_backlog(es->req) > EXEC_STREAM_BACKLOG) httpd_cut(es->req); /* on_gone ends it */
}

static void on_stream_done(void *arg, const struct server_run_result *res)
{
    struct exec_stream *es = arg;
    es->run = NULL;
    if (es->ending) return; /* end_later frees it */
    if (res->error) {
        int status = res->error->code == -ESHUTDOWN ? 503 : 500;
        stream_line(es,
                    json_pack("{s:s,s:{s:s,s:i,s:s,s:s}}", "type", "error", "error", "code",
                              status == 503 ? "unavailable" : "internal_error", "status", status,
                              "message", res->error->msg, "requestId", httpd_request_id(es->req)));
    } else {
        json_t *exit = ended_json(res);
        json_object_set_new(exit, "type", json_string("exit"));
        stream_line(es, exit);
    }
    stream_finish(es);
}

/* Its reader left: the program is ended on the next turn of the loop (not from
 * inside the output callback that may have cut it). */
static void end_later(evutil_socket_t fd, short what, void *arg)
{
    struct exec_stream *es = arg;
    if (es->run) server_run_cancel(es->run);
    stream_finish(es);
}

static void on_stream_gone(struct httpd_req *req, void *arg)
{
    struct exec_stream *es = arg;
    if (es->ending) return;
    es->ending = true;
    struct timeval now = {0, 0};
    if (event_base_once(server_base(es->srv), -1, EV_TIMEOUT, end_later, es, &now) < 0)
        log_warn("cannot end a streamed exec whose reader left");
}

static int start_stream(struct httpd_req *req, struct server *srv, struct sbx *sb,
                        struct server_run_spec *spec, err_t *err)
{
    struct exec_stream *es = calloc(1, sizeof *es);
    if (!es) return err_set(err, -ENOMEM, "out of memory");
    *es = (struct exec_stream){.req = req, .srv = srv};
    memcpy(es->sandbox, sbx_id(sb), sizeof es->sandbox);
    spec->on_output = on_stream_output;
    int r = server_run(srv, sb, spec, on_stream_done, es, &es->run, err);
    if (r < 0) {
        free(es);
        return r;
    }
    char process[24];
    random_hex(process + 2, 8);
    memcpy(process, "p_", 2);
    api_idempotency_forget(req); /* a stream is not sent twice */
    httpd_add_header(req, "Content-Type", "application/x-ndjson");
    httpd_stream_start(req, 200);
    httpd_on_gone(req, on_stream_gone, es);
    stream_line(es, json_pack("{s:s,s:s}", "type", "start", "processId", process));
    return 0;
}

void api_exec(struct httpd_req *req, struct server *srv, struct sbx *sb)
{
    struct api_sandbox *a = api_sandbox_of(sb);
    if (!a) return api_error(req, 500, "internal_error", "out of memory");
    if (a->execs >= MAX_RUNNING_EXECS)
        return api_error(req, 429, "limit_reached",
                         "sandbox %s already runs %u execs, the "
                         "most it may at once; wait for one to end",
                         sbx_id(sb), a->execs);
    if (!rate_allow(&a->exec_rate, now_ms())) {
        httpd_add_header(req, "Retry-After", "1");
        return api_error(req, 429, "limit_reached",
                         "sandbox %s started %u execs a second, the "
                         "most it may; try again in a second",
                         sbx_id(sb), EXEC_STARTS_PER_S);
    }
    json_t *body = api_body_json(req, false);
    if (!body) return;
    if (refuse_cloud_only(req, body)) {
        json_decref(body);
        return;
    }
    const char *argv[MAX_ARGV];
    char **envp = NULL;
    struct server_run_spec spec = {0};
    err_t err = {0};
    char *stdin_bytes = NULL;
    int r = parse_request(body, srv, sb, &spec, argv, &envp, &stdin_bytes, &err);
    bool streamed = json_is_true(json_object_get(body, "stream"));
    if (r == 0 && streamed) {
        r = start_stream(req, srv, sb, &spec, &err);
        if (r == 0) {
            server_sandbox_hold(sb, +1); /* no idle pause while it runs */
            sbx_note_user_program(sb);
            a->execs++;
        }
        if (r < 0) api_fail(req, &err);
        server_env_free(envp);
        free(stdin_bytes);
        json_decref(body);
        return;
    }
    struct exec_call *call = r == 0 ? calloc(1, sizeof *call) : NULL;
    if (call) {
        call->req = req;
        call->srv = srv;
        memcpy(call->sandbox, sbx_id(sb), sizeof call->sandbox);
    } else if (r == 0)
        r = err_set(&err, -ENOMEM, "out of memory");
    if (r == 0) r = server_run(srv, sb, &spec, on_done, call, NULL, &err);
    if (r == 0) {
        server_sandbox_hold(sb, +1); /* no idle pause while it runs */
        sbx_note_user_program(sb);
        a->execs++;
    }
    if (r < 0) {
        free(call);
        api_fail(req, &err);
    }
    server_env_free(envp);
    free(stdin_bytes);
    json_decref(body);
}
