/* POST /v1/sandboxes/{id}/exec: runs the program to its end (server_run) and replies
 * with its status and output. */
#include <errno.h>
#include <event2/buffer.h>
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

/* What the API keeps for a sandbox (its slot), made at its first exec. */
struct api_sandbox {
    unsigned execs;              /* running now (4 descriptors each) */
    struct rate_limit exec_rate; /* starts a second */
};

static struct api_sandbox *api_sandbox_of(struct sbx *sb)
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
    free(sbx_slot(sb, SBX_SLOT_API));
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

static void on_done(void *arg, const struct server_run_result *res)
{
    struct exec_call *call = arg;
    struct httpd_req *req = call->req;
    struct sbx *sb = server_sandbox_find(call->srv, NULL, call->sandbox);
    struct api_sandbox *a = sb ? sbx_slot(sb, SBX_SLOT_API) : NULL;
    if (sb) server_sandbox_hold(sb, -1);
    if (a) a->execs--;
    free(call);
    if (res->error) {
        api_fail(req, res->error);
    } else if (res->ended && res->exit_code == -1) {
        api_error(req, 400, "exec_failed",
                  "cannot start the program: %s; check argv[0] "
                  "and that it exists in the sandbox",
                  strerror(res->start_errno));
    } else if (!res->ended) {
        api_error(req, 500, "internal", "the exec monitor ended without a status");
    } else {
        json_t *out = json_pack("{s:i,s:o,s:o,s:b,s:I}", "exitCode", res->exit_code, "stdout",
                                stream_json(res->out, res->out_dropped), "stderr",
                                stream_json(res->err, res->err_dropped), "timedOut", res->timed_out,
                                "durationMs", (json_int_t)res->duration_ms);
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

static int parse_request(json_t *body, struct server *srv, struct sbx *sb,
                         struct server_run_spec *spec, const char **argv, char ***envp, err_t *err)
{
    static const char *const known[] = {"argv", "env", "cwd", "stdin", "timeoutMs", NULL};
    int r = json_known_fields(body, NULL, known, err);
    if (r == 0) r = api_argv_from(json_object_get(body, "argv"), argv, MAX_ARGV, err);
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
    spec->timeout_ms = (uint32_t)ms;
    spec->stdin_text = json_string_value(in);
    spec->stdin_len = json_is_string(in) ? json_string_length(in) : 0;
    spec->output_cap = API_MAX_OUTPUT;
    json_t *env = server_exec_env(srv, sb, e, err);
    if (!env) return -EIO;
    r = server_env_list(env, envp, err);
    json_decref(env);
    spec->argv = argv;
    spec->envp = (const char *const *)*envp;
    return r;
}

void api_exec(struct httpd_req *req, struct server *srv, struct sbx *sb)
{
    struct api_sandbox *a = api_sandbox_of(sb);
    if (!a) return api_error(req, 500, "internal", "out of memory");
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
    const char *argv[MAX_ARGV];
    char **envp = NULL;
    struct server_run_spec spec = {0};
    err_t err = {0};
    int r = parse_request(body, srv, sb, &spec, argv, &envp, &err);
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
        a->execs++;
    }
    if (r < 0) {
        free(call);
        api_fail(req, &err);
    }
    server_env_free(envp);
    json_decref(body);
}
