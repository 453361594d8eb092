/* `runtime secret set NAME --host HOST... [--method M]... [--path P]... [--header H
 * [--format F]] [--env VAR] [--from-env VAR]`: PUT /v1/egress-secrets/NAME, the methods
 * and paths one rule. The value never passes through jansson (its copies are freed without
 * being wiped): the body is the rules' JSON with the value spliced in by hand, in a buffer
 * this file wipes as soon as the daemon has answered. */
#include "cli.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { S_HOST, S_METHOD, S_PATH, S_FROM_ENV, S_HEADER, S_FORMAT, S_ENV };

static const struct opt_spec specs[] = {
    {"host", true, S_HOST},         {"method", true, S_METHOD}, {"path", true, S_PATH},
    {"header", true, S_HEADER},     {"format", true, S_FORMAT}, {"env", true, S_ENV},
    {"from-env", true, S_FROM_ENV}, {NULL, false, 0},
};

struct set {
    const char *name;
    const char *env; /* --from-env, or NULL for stdin */
    json_t *hosts, *methods, *paths;
    const char *header, *format, *var; /* --header, --format, --env */
};

/* An option given once: its value, non-empty. */
static int once(struct args *a, const char **slot, const char *opt)
{
    if (*slot) return cli_usage_error(a->cmd, "--%s is given twice", opt);
    if (!*a->val) return cli_usage_error(a->cmd, "empty value for --%s", opt);
    *slot = a->val;
    return 0;
}

/* The daemon's rule too; checked here first so that nobody types a value for a doomed name. */
static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    bool ok = n > 0 && n <= 128 && !isdigit((unsigned char)s[0]);
    for (size_t i = 0; ok && i < n; i++)
        ok = isalnum((unsigned char)s[i]) || s[i] == '_';
    return ok;
}

static int add(const char *cmd, json_t *list, const char *opt, const char *val, bool upper)
{
    char buf[1024];
    if (!*val) return cli_usage_error(cmd, "empty value for --%s", opt);
    if (snprintf(buf, sizeof buf, "%s", val) >= (int)sizeof buf)
        return cli_usage_error(cmd, "the value of --%s is too long", opt);
    for (char *p = buf; upper && *p; p++) /* HTTP methods are upper case: get means GET */
        *p = (char)toupper((unsigned char)*p);
    json_t *s = json_string(buf);
    if (!s) return cli_usage_error(cmd, "bad value for --%s: not UTF-8 text", opt);
    json_array_append_new(list, s);
    return 0;
}

static int apply(struct args *a, struct set *s, int id)
{
    switch (id) {
    case S_HOST:
        return add(a->cmd, s->hosts, "host", a->val, false);
    case S_METHOD:
        return add(a->cmd, s->methods, "method", a->val, true);
    case S_PATH:
        return add(a->cmd, s->paths, "path", a->val, false);
    case S_FROM_ENV:
        return once(a, &s->env, "from-env");
    case S_HEADER:
        return once(a, &s->header, "header");
    case S_FORMAT:
        return once(a, &s->format, "format");
    case S_ENV:
        return once(a, &s->var, "env");
    case ARG_POS:
        if (s->name || !*a->val) break;
        s->name = a->val;
        return 0;
    }
    return cli_usage_error(a->cmd, "unexpected argument '%s'", a->argv[a->i - 1]);
}

/* Returns -1 after printing help. */
static int scan(struct args *a, struct set *s)
{
    int id;
    while ((id = args_next(a)) != ARG_END) {
        if (id == ARG_HELP) return usage_print(a->cmd, stdout), -1;
        if (id == ARG_BAD || apply(a, s, id)) return EXIT_USAGE;
    }
    if (!s->name) return cli_usage_error(a->cmd, "missing the secret NAME");
    if (!name_ok(s->name))
        return cli_usage_error(a->cmd,
                               "bad secret name '%s': it is an environment variable name, letters, "
                               "digits and '_', not starting with a digit, at most 128",
                               s->name);
    if (json_array_size(s->hosts) == 0)
        return cli_usage_error(a->cmd, "give at least one --host: the hosts the value may be sent "
                                       "to, e.g. --host api.github.com");
    return 0;
}

/* The body without the value: {"hosts":[...],"rules":[{"methods"?,"paths"}],"header"?,...};
 * --method and --path make one rule (no --path: every path, slash-star), none when neither. */
static char *rules_text(const struct set *s)
{
    json_t *o = json_pack("{s:O,s:s?,s:s?,s:s?}", "hosts", s->hosts, "header", s->header, "format",
                          s->format, "env", s->var);
    char *text = NULL;
    if (!o) return NULL;
    if (json_array_size(s->methods) || json_array_size(s->paths)) {
        json_t *rule = json_array_size(s->paths) ? json_pack("{s:O}", "paths", s->paths)
                                                 : json_pack("{s:[s]}", "paths", "/*");
        if (json_array_size(s->methods)) json_object_set(rule, "methods", s->methods);
        json_object_set_new(o, "rules", json_pack("[o]", rule));
    }
    text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return text;
}

/* JSON string escaping of bytes already checked to be UTF-8 without NUL, CR or LF. Writes to
 * out unless NULL; returns the escaped length. */
static size_t escape(char *out, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        char e[6] = {(char)ch};
        size_t w = 1;
        if (ch == '"' || ch == '\\') {
            e[0] = '\\', e[1] = (char)ch, w = 2;
        } else if (ch < 0x20) {
            memcpy(e, "\\u00", 4), e[4] = hex[ch >> 4], e[5] = hex[ch & 15], w = 6;
        }
        if (out) memcpy(out + k, e, w);
        k += w;
        explicit_bzero(e, sizeof e);
    }
    return k;
}

/* {"value":"...",<rules>}: malloc'd, *len set; to be wiped by the caller. */
static char *body_text(const struct secret_value *v, const char *rules, size_t *len)
{
    static const char head[] = "{\"value\":\"";
    size_t esc = escape(NULL, v->buf, v->len), nr = strlen(rules);
    *len = sizeof head - 1 + esc + 2 + (nr - 1);
    char *b = malloc(*len + 1);
    if (!b) return NULL;
    memcpy(b, head, sizeof head - 1);
    size_t k = sizeof head - 1;
    k += escape(b + k, v->buf, v->len);
    memcpy(b + k, "\",", 2);
    memcpy(b + k + 2, rules + 1, nr); /* rules without its '{', with its '}' and NUL */
    return b;
}

static void print_saved(const struct set *s, json_t *ans)
{
    char hosts[2048], rules[4096];
    json_t *h = json_object_get(ans, "hosts");
    secret_rules_text(json_is_array(h) ? h : s->hosts, ", ", hosts, sizeof hosts);
    secret_rules_show(json_object_get(ans, "rules"), rules, sizeof rules);
    printf("secret %s saved (hosts: %s; rules: %s)\n", s->name, hosts, rules);
}

static int put(struct cli *c, const struct set *s, const char *body, size_t len)
{
    char *path = secret_path(s->name);
    struct http_req req = {.method = "PUT",
                           .path = path,
                           .content_type = "application/json",
                           .body = body,
                           .body_len = len,
                           .sink_fd = -1};
    struct http_resp resp = {0};
    json_t *ans = NULL;
    if (!path) return cli_error("out of memory");
    int r = api_call(c, &req, &resp);
    free(path);
    if (r) return r;
    /* The answer is the secret without its value; a body we cannot read still means saved. */
    if (resp.body && resp.len) ans = json_loadb(resp.body, resp.len, 0, NULL);
    print_saved(s, json_is_object(ans) ? ans : NULL);
    json_decref(ans);
    http_resp_free(&resp);
    return 0;
}

static int send_value(struct cli *c, const struct set *s, const struct secret_value *v)
{
    size_t len = 0;
    char *rules = rules_text(s);
    char *body = rules ? body_text(v, rules, &len) : NULL;
    int r = body ? put(c, s, body, len) : cli_error("out of memory");
    if (body) explicit_bzero(body, len), free(body);
    free(rules);
    return r;
}

int cmd_secret_set(struct cli *c, int argc, char **argv)
{
    struct args a;
    struct set s = {.hosts = json_array(), .methods = json_array(), .paths = json_array()};
    struct secret_value v = {0};
    args_init(&a, argc, argv, "secret set", specs);
    int r = s.hosts && s.methods && s.paths ? scan(&a, &s) : cli_error("out of memory");
    /* The key first: a missing one should not cost anybody a typed value. */
    if (r == 0) r = conn_load_key(c) ? EXIT_FAIL : 0;
    if (r == 0) r = secret_value_read(s.name, s.env, &v);
    if (r == 0) r = send_value(c, &s, &v);
    secret_value_wipe(&v);
    json_decref(s.hosts);
    json_decref(s.methods);
    json_decref(s.paths);
    return r < 0 ? EXIT_OK : r;
}
