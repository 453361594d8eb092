/* API calls: the key, the daemon's error answers, JSON bodies, encoded paths. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void print_clean(FILE *f, const char *s, size_t max)
{
    for (size_t i = 0; s[i] && i < max; i++) {
        unsigned char ch = (unsigned char)s[i];
        fputc(ch < 0x20 || ch == 0x7f ? ' ' : ch, f);
    }
}

/* Calls only the admin key may make: a 403 there means an account's key was used. */
static bool admin_only(const char *path)
{
    return strncmp(path, "/v1/accounts", 12) == 0 || strcmp(path, "/metrics") == 0;
}

static void print_hint(const struct cli *c, const struct http_req *req, long status,
                       const char *code)
{
    if (status == 401)
        fprintf(stderr, "; check the API key, which came from %s", c->key_source);
    else if (status == 403 && code && strcmp(code, "forbidden") == 0 && admin_only(req->path))
        fprintf(stderr, "; the key used came from %s", c->key_source);
    else if (status == 503)
        fputs("; try again in a moment", stderr);
}

static int cli_api_error(const struct cli *c, const struct http_req *req, const struct http_resp *r)
{
    json_t *j = r->body ? json_loadb(r->body, r->len, 0, NULL) : NULL;
    json_t *err = json_object_get(j, "error");
    const char *code = json_string_value(json_object_get(err, "code"));
    const char *msg = json_string_value(json_object_get(err, "message"));
    fputs("runtime: ", stderr);
    if (msg) {
        print_clean(stderr, msg, 2000);
        fprintf(stderr, " (%s, HTTP %ld)", code ? code : "error", r->status);
    } else {
        fprintf(stderr, "the daemon answered HTTP %ld", r->status);
        if (r->body && r->len) fputs(": ", stderr), print_clean(stderr, r->body, 200);
    }
    print_hint(c, req, r->status, code);
    fputc('\n', stderr);
    json_decref(j);
    return EXIT_FAIL;
}

int api_call(struct cli *c, const struct http_req *req, struct http_resp *resp)
{
    if (conn_load_key(c)) return EXIT_FAIL;
    if (http_do(c, req, resp)) return EXIT_FAIL;
    if (resp->status >= 200 && resp->status < 300) return 0;
    if (req->accept_status && resp->status == req->accept_status) return 0;
    cli_api_error(c, req, resp);
    http_resp_free(resp);
    return EXIT_FAIL;
}

int parse_json_body(const struct http_resp *r, json_t **out)
{
    json_error_t je;
    *out = NULL;
    if (!r->body || r->len == 0) return 0;
    *out = json_loadb(r->body, r->len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (!*out) return cli_error("the daemon's answer is not JSON (%s); is that runtimed?", je.text);
    return 0;
}

int cli_call_json(struct cli *c, const char *method, const char *path, json_t *body, json_t **out)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    if (body && !text) return cli_error("out of memory");
    struct http_req req = {.method = method,
                           .path = path,
                           .content_type = text ? "application/json" : NULL,
                           .body = text,
                           .body_len = text ? strlen(text) : 0,
                           .sink_fd = -1};
    struct http_resp resp = {0};
    int r = api_call(c, &req, &resp);
    free(text);
    if (r) return r;
    r = out ? parse_json_body(&resp, out) : 0;
    http_resp_free(&resp);
    return r;
}

char *url_encode(const char *s, const char *keep)
{
    static const char hex[] = "0123456789ABCDEF";
    char *out = malloc(strlen(s) * 3 + 1), *p = out;
    if (!out) return NULL;
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
            strchr("-._~", ch) || (keep && strchr(keep, ch))) {
            *p++ = (char)ch;
        } else {
            *p++ = '%';
            *p++ = hex[ch >> 4];
            *p++ = hex[ch & 15];
        }
    }
    *p = '\0';
    return out;
}

int api_get_sandbox(struct cli *c, const char *id, json_t **sb)
{
    *sb = NULL;
    char *path = api_sandbox_path(id, "");
    if (!path) return cli_error("out of memory");
    int r = cli_call_json(c, "GET", path, NULL, sb);
    free(path);
    if (r == 0 && !json_is_object(*sb)) {
        json_decref(*sb);
        *sb = NULL;
        r = cli_error("the daemon's answer is not a sandbox; is that runtimed?");
    }
    return r;
}

char *api_sandbox_path(const char *id, const char *suffix)
{
    char *enc = url_encode(id, NULL);
    if (!enc) return NULL;
    size_t n = strlen("/v1/sandboxes/") + strlen(enc) + strlen(suffix) + 1;
    char *path = malloc(n);
    if (path) snprintf(path, n, "/v1/sandboxes/%s%s", enc, suffix);
    free(enc);
    return path;
}

void print_raw_json(const struct http_resp *r)
{
    if (r->len) fwrite(r->body, 1, r->len, stdout);
    if (!r->len || r->body[r->len - 1] != '\n') fputc('\n', stdout);
}

int api_show(struct cli *c, const struct http_req *req, bool json,
             int (*show)(json_t *answer, void *arg), void *arg)
{
    struct http_resp resp = {0};
    json_t *answer = NULL;
    int r = api_call(c, req, &resp);
    if (r) return r;
    if (json)
        print_raw_json(&resp);
    else if (!(r = parse_json_body(&resp, &answer)))
        r = show(answer, arg);
    json_decref(answer);
    http_resp_free(&resp);
    return r;
}

struct list_show {
    void (*table)(json_t *list);
    const char *what;
};

static int show_list(json_t *list, void *arg)
{
    const struct list_show *l = arg;
    /* Runtime Cloud's pages: {data, nextCursor}, and the secrets' {secrets, next}. */
    if (json_is_object(list) && json_is_array(json_object_get(list, "data")))
        list = json_object_get(list, "data");
    else if (json_is_object(list) && json_is_array(json_object_get(list, "secrets")))
        list = json_object_get(list, "secrets");
    if (!json_is_array(list))
        return cli_error("the daemon's answer is not a list of %s; is that runtimed?", l->what);
    l->table(list);
    return 0;
}

int api_print_list(struct cli *c, const char *path, bool json, void (*table)(json_t *list),
                   const char *what)
{
    struct http_req req = {.method = "GET", .path = path, .sink_fd = -1};
    struct list_show l = {table, what};
    return api_show(c, &req, json, show_list, &l);
}

int api_list_command(struct cli *c, int argc, char **argv, const char *cmd, const char *path,
                     void (*table)(json_t *list), const char *what)
{
    enum { L_JSON };
    static const struct opt_spec opts[] = {{"json", false, L_JSON}, {NULL, false, 0}};
    struct args a;
    bool json = false;
    int id;
    args_init(&a, argc, argv, cmd, opts);
    while ((id = args_next(&a)) != ARG_END) {
        if (id == ARG_HELP) return usage_print(a.cmd, stdout), EXIT_OK;
        if (id == ARG_BAD) return EXIT_USAGE;
        if (id != L_JSON)
            return cli_usage_error(a.cmd, "unexpected argument '%s'", a.argv[a.i - 1]);
        json = true;
    }
    return api_print_list(c, path, json, table, what);
}
