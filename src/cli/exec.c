/* `runtime sandbox exec ID [--env K=V]... [--cwd DIR] [--timeout SECONDS] -- CMD [ARG...]` */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Beyond this, stdin is not what the exec API is for: files go in with `sandbox cp`. */
#define MAX_STDIN (64u << 20)

static const struct opt_spec exec_specs[] = {
    {"env", true, EXEC_ENV},
    {"cwd", true, EXEC_CWD},
    {"timeout", true, EXEC_TIMEOUT},
    {NULL, false, 0},
};

static int set_string(const char *cmd, json_t *body, const char *key, const char *opt,
                      const char *val)
{
    json_t *s = *val ? json_string(val) : NULL;
    if (!s) return cli_usage_error(cmd, "bad value '%s' for --%s: expected UTF-8 text", val, opt);
    json_object_set_new(body, key, s);
    return 0;
}

int exec_apply(const char *cmd, struct exec_opts *o, int id, const char *val)
{
    double t;
    json_t *env;
    switch (id) {
    case EXEC_ENV:
        env = json_object_get(o->body, "env");
        if (!env) json_object_set_new(o->body, "env", env = json_object());
        return parse_kv_into(cmd, "env", val, env);
    case EXEC_CWD:
        return set_string(cmd, o->body, "cwd", "cwd", val);
    case EXEC_TIMEOUT:
        if (parse_decimal(cmd, "timeout", val, &t)) return EXIT_USAGE;
        if (t * 1000 < 1) return cli_usage_error(cmd, "--timeout must be at least 0.001");
        o->timeout_s = t;
        json_object_set_new(o->body, "timeoutMs", json_integer((json_int_t)(t * 1000 + 0.5)));
        return 0;
    }
    return cli_usage_error(cmd, "internal error: unknown option %d", id);
}

static int add_stdin(json_t *body)
{
    char *buf = NULL;
    size_t len = 0;
    if (isatty(0)) return 0;
    int r = read_fd_all(0, MAX_STDIN, &buf, &len);
    if (r == -EBADF) r = 0; /* no stdin at all: nothing to pass */
    if (r == -EFBIG)
        return cli_error("standard input is over %u MiB; copy big data in with 'runtime sandbox "
                         "cp - ID:PATH'",
                         MAX_STDIN >> 20);
    if (r < 0) return cli_error("cannot read standard input: %s", strerror(-r));
    json_t *s = json_stringn(buf ? buf : "", len);
    free(buf);
    if (!s)
        return cli_error("standard input is not UTF-8 text, which is all exec can pass; copy "
                         "binary data in with 'runtime sandbox cp - ID:PATH'");
    json_object_set_new(body, "stdin", s);
    return 0;
}

static int add_argv(json_t *body, int argc, char **argv)
{
    json_t *arr = json_array();
    json_object_set_new(body, "argv", arr);
    for (int i = 0; i < argc; i++) {
        json_t *s = json_string(argv[i]);
        if (!s) return cli_error("argument '%s' is not UTF-8 text; pass text arguments", argv[i]);
        json_array_append_new(arr, s);
    }
    return 0;
}

static void write_stream(int fd, json_t *s)
{
    if (json_is_string(s)) write_all(fd, json_string_value(s), json_string_length(s));
}

/* "SIGKILL" -> 9; 127 for a name this libc does not know (the answer is odd anyway). */
static int signal_number(const char *name)
{
    if (strncmp(name, "SIG", 3) == 0) name += 3;
    for (int n = 1; n < 65; n++) {
        const char *abbrev = sigabbrev_np(n);
        if (abbrev && strcmp(abbrev, name) == 0) return n;
    }
    return 127;
}

/* Prints the output and turns the answer into an exit status. */
static int finish(json_t *res, const struct exec_opts *o)
{
    fflush(stdout);
    write_stream(1, json_object_get(res, "stdout"));
    write_stream(2, json_object_get(res, "stderr"));
    if (json_is_true(json_object_get(res, "timedOut"))) {
        if (o->timeout_s > 0)
            cli_error("the command timed out after %g s; allow more with --timeout SECONDS",
                      o->timeout_s);
        else
            cli_error("the command timed out; allow more with --timeout SECONDS");
        return EXIT_TIMEOUT;
    }
    json_t *code = json_object_get(res, "exitCode");
    const char *sig = json_string_value(json_object_get(res, "signal"));
    if (json_is_null(code) && sig) return 128 + signal_number(sig); /* as a shell says it */
    if (!json_is_integer(code))
        return cli_error("the daemon's answer has no exitCode; is that runtimed?");
    json_int_t v = json_integer_value(code);
    return v >= 0 && v <= 255 ? (int)v : 255;
}

static int post_exec(struct cli *c, const char *path, const struct exec_opts *o, json_t **res)
{
    char *text = json_dumps(o->body, JSON_COMPACT);
    if (!text) return cli_error("out of memory");
    struct http_req req = {.method = "POST",
                           .path = path,
                           .content_type = "application/json",
                           .body = text,
                           .body_len = strlen(text),
                           .sink_fd = -1,
                           .interruptible = o->interruptible};
    struct http_resp resp = {0};
    int r = api_call(c, &req, &resp);
    if (r == 0) r = parse_json_body(&resp, res);
    http_resp_free(&resp);
    free(text);
    return r;
}

int exec_in(struct cli *c, const char *sid, struct exec_opts *o, int argc, char **argv)
{
    json_t *res = NULL;
    char *path = NULL;
    int r = add_argv(o->body, argc, argv);
    if (r == 0) r = add_stdin(o->body);
    if (r == 0 && !(path = api_sandbox_path(sid, "/exec"))) r = cli_error("out of memory");
    if (r == 0) r = post_exec(c, path, o, &res);
    if (r == 0) r = finish(res, o);
    json_decref(res);
    free(path);
    return r;
}

/* Scans ID, options, then "--" and the command. Returns -1 after printing help. */
static int scan(struct args *a, struct exec_opts *o, const char **sid)
{
    int id;
    *sid = NULL;
    while ((id = args_next(a)) != ARG_END && id != ARG_REST) {
        if (id == ARG_HELP) return usage_print(a->cmd, stdout), -1;
        if (id == ARG_BAD) return EXIT_USAGE;
        if (id == ARG_POS && !*sid && *a->val)
            *sid = a->val;
        else if (id == ARG_POS)
            return cli_usage_error(a->cmd, "unexpected '%s'; put the command after --", a->val);
        else if (exec_apply(a->cmd, o, id, a->val))
            return EXIT_USAGE;
    }
    if (!*sid) return cli_usage_error(a->cmd, "missing the sandbox ID (an id or name)");
    if (id != ARG_REST || a->i >= a->argc)
        return cli_usage_error(a->cmd, "missing the command: put it after --");
    return 0;
}

int cmd_sandbox_exec(struct cli *c, int argc, char **argv)
{
    struct args a;
    struct exec_opts o = {.body = json_object()};
    const char *sid;
    args_init(&a, argc, argv, "sandbox exec", exec_specs);
    int r = scan(&a, &o, &sid);
    if (r == 0) r = exec_in(c, sid, &o, a.argc - a.i, a.argv + a.i);
    json_decref(o.body);
    return r < 0 ? EXIT_OK : r;
}
