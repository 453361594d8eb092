/* `runtime account ...` (admin key only): create, list, rotate a key, remove. An account's
 * key is shown once, by the daemon's answer to create or rotate: it goes alone to stdout, so
 * that `KEY=$(runtime account create acme)` keeps it, and what to do with it goes to stderr,
 * without the key, so that a log of stderr does not hold it. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { A_JSON, A_MAX_SANDBOXES, A_MAX_MEMORY };

static const struct opt_spec json_opts[] = {{"json", false, A_JSON}, {NULL, false, 0}};
static const struct opt_spec no_opts[] = {{NULL, false, 0}};
static const struct opt_spec create_opts[] = {
    {"max-sandboxes", true, A_MAX_SANDBOXES},
    {"max-memory", true, A_MAX_MEMORY},
    {"json", false, A_JSON},
    {NULL, false, 0},
};

/* "/v1/accounts/<encoded name><suffix>"; malloc'd. */
static char *account_path(const char *name, const char *suffix)
{
    char *enc = url_encode(name, NULL), *path = NULL;
    if (enc && asprintf(&path, "/v1/accounts/%s%s", enc, suffix) < 0) path = NULL;
    free(enc);
    return path;
}

/* The one argument NAME and, when allowed, --json; -1 after printing help. */
static int scan_name(struct args *a, const char **name, bool *json)
{
    int id;
    while ((id = args_next(a)) != ARG_END) {
        if (id == ARG_HELP) return usage_print(a->cmd, stdout), -1;
        if (id == ARG_BAD) return EXIT_USAGE;
        if (id == A_JSON) {
            *json = true;
            continue;
        }
        if (id != ARG_POS || *name || !*a->val)
            return cli_usage_error(a->cmd, "unexpected argument '%s'", a->argv[a->i - 1]);
        *name = a->val;
    }
    if (!*name) return cli_usage_error(a->cmd, "missing the account NAME");
    return 0;
}

/* ---- create and key: the answer holds the key ---- */

struct key_note {
    const char *name;
    bool rotated;
};

static int show_key(json_t *ans, void *arg)
{
    const struct key_note *n = arg;
    const char *key = json_string_value(json_object_get(ans, "apiKey"));
    if (!key) return cli_error("the daemon's answer has no apiKey; is that runtimed?");
    printf("%s\n", key);
    fflush(stdout);
    if (n->rotated)
        fprintf(stderr,
                "runtime: a new API key for account %s (above), shown only this once: keep it. "
                "The previous key keeps working until the next rotation; move the account's "
                "programs to this one (RUNTIME_API_KEY=<the key>)\n",
                n->name);
    else
        fprintf(stderr,
                "runtime: account %s created; its API key (above) is shown only this once: keep "
                "it. The account's programs give it as RUNTIME_API_KEY, e.g. "
                "RUNTIME_API_KEY=<the key> runtime sandbox list\n",
                n->name);
    return 0;
}

/* POSTs body (or nothing) to path; prints the answer's key, or its JSON with --json. */
static int post_for_key(struct cli *c, const char *path, json_t *body, bool json,
                        struct key_note *note)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    if (body && !text) return cli_error("out of memory");
    struct http_req req = {.method = "POST",
                           .path = path,
                           .content_type = text ? "application/json" : NULL,
                           .body = text,
                           .body_len = text ? strlen(text) : 0,
                           .sink_fd = -1};
    int r = api_show(c, &req, json, show_key, note);
    free(text);
    return r;
}

static int set_limit(const char *cmd, json_t *body, const char *opt, const char *field,
                     const char *val)
{
    json_int_t n;
    if (parse_count(cmd, opt, val, &n)) return EXIT_USAGE;
    if (n < 1)
        return cli_usage_error(cmd,
                               "bad value '%s' for --%s: at least 1 (leave it out for no "
                               "limit)",
                               val, opt);
    json_object_set_new(body, field, json_integer(n));
    return 0;
}

/* Returns -1 after printing help. */
static int scan_create(struct args *a, json_t *body, bool *json)
{
    const char *name = NULL;
    int id, r = 0;
    while (r == 0 && (id = args_next(a)) != ARG_END) {
        if (id == ARG_HELP) return usage_print(a->cmd, stdout), -1;
        if (id == ARG_BAD) return EXIT_USAGE;
        if (id == A_JSON)
            *json = true;
        else if (id == A_MAX_SANDBOXES)
            r = set_limit(a->cmd, body, "max-sandboxes", "maxSandboxes", a->val);
        else if (id == A_MAX_MEMORY)
            r = set_limit(a->cmd, body, "max-memory", "maxMemoryMiB", a->val);
        else if (id == ARG_POS && !name && *a->val)
            name = a->val;
        else
            r = cli_usage_error(a->cmd, "unexpected argument '%s'", a->argv[a->i - 1]);
    }
    if (r) return r;
    if (!name) return cli_usage_error(a->cmd, "missing the account NAME");
    json_object_set_new(body, "name", json_string(name));
    return 0;
}

static int cmd_create(struct cli *c, int argc, char **argv)
{
    struct args a;
    bool json = false;
    json_t *body = json_object();
    if (!body) return cli_error("out of memory");
    args_init(&a, argc, argv, "account create", create_opts);
    int r = scan_create(&a, body, &json);
    if (r == 0) {
        struct key_note note = {json_string_value(json_object_get(body, "name")), false};
        r = post_for_key(c, "/v1/accounts", body, json, &note);
    }
    json_decref(body);
    return r < 0 ? EXIT_OK : r;
}

static int cmd_key(struct cli *c, int argc, char **argv)
{
    struct args a;
    const char *name = NULL;
    bool json = false;
    args_init(&a, argc, argv, "account key", json_opts);
    int r = scan_name(&a, &name, &json);
    if (r) return r < 0 ? EXIT_OK : r;
    char *path = account_path(name, "/keys");
    if (!path) return cli_error("out of memory");
    struct key_note note = {name, true};
    r = post_for_key(c, path, NULL, json, &note);
    free(path);
    return r;
}

/* ---- list ---- */

enum { COLS = 5 };
static const char *const heads[COLS] = {"NAME", "SANDBOXES", "MEMORY", "LIMITS", "CREATED"};

static long long int_of(json_t *acct, const char *key)
{
    json_t *v = json_object_get(acct, key);
    return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

/* "5 sandboxes, 4096MiB", one of them, or "none" (MiB as in `sandbox list`). */
static void limits_text(json_t *acct, char *out, size_t size)
{
    long long sb = int_of(acct, "maxSandboxes"), mem = int_of(acct, "maxMemoryMiB");
    if (sb > 0 && mem > 0)
        snprintf(out, size, "%lld sandbox%s, %lldMiB", sb, sb == 1 ? "" : "es", mem);
    else if (sb > 0)
        snprintf(out, size, "%lld sandbox%s", sb, sb == 1 ? "" : "es");
    else if (mem > 0)
        snprintf(out, size, "%lldMiB", mem);
    else
        snprintf(out, size, "none");
}

static void cell(json_t *acct, int col, char *out, size_t size)
{
    switch (col) {
    case 0:
        snprintf(out, size, "%s%s", json_string_value(json_object_get(acct, "name")) ?: "-",
                 json_is_true(json_object_get(acct, "removing")) ? " (removing)" : "");
        break;
    case 1:
        snprintf(out, size, "%lld", int_of(acct, "sandboxes"));
        break;
    case 2:
        snprintf(out, size, "%lldMiB", int_of(acct, "memoryMiB"));
        break;
    case 3:
        limits_text(acct, out, size);
        break;
    default:
        show_age(json_object_get(acct, "createdAt"), out, size);
    }
    show_clean(out);
}

static void account_table(json_t *list)
{
    cli_table_print(&(struct cli_table){heads, COLS, cell, NULL}, list);
}

static int cmd_list(struct cli *c, int argc, char **argv)
{
    return api_list_command(c, argc, argv, "account list", "/v1/accounts", account_table,
                            "accounts");
}

/* ---- rm ---- */

static int cmd_rm(struct cli *c, int argc, char **argv)
{
    struct args a;
    const char *name = NULL;
    bool json = false;
    args_init(&a, argc, argv, "account rm", no_opts);
    int r = scan_name(&a, &name, &json);
    if (r) return r < 0 ? EXIT_OK : r;
    if (strcmp(name, "default") == 0) /* the daemon refuses it too, with a 403 */
        return cli_usage_error(a.cmd, "the account default is the admin's own (the admin key "
                                      "acts as it); it cannot be removed");
    char *path = account_path(name, "");
    if (!path) return cli_error("out of memory");
    r = cli_call_json(c, "DELETE", path, NULL, NULL);
    free(path);
    if (r == 0) printf("account %s removed, with its sandboxes and secrets\n", name);
    return r;
}

int cmd_account(struct cli *c, int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*fn)(struct cli *c, int argc, char **argv);
    } subs[] = {{"create", cmd_create}, {"list", cmd_list}, {"key", cmd_key}, {"rm", cmd_rm}};
    if (argc == 0) {
        usage_print("account", stderr);
        return EXIT_USAGE;
    }
    if (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0 ||
        strcmp(argv[0], "help") == 0)
        return usage_print("account", stdout), EXIT_OK;
    for (size_t i = 0; i < ARRAY_LEN(subs); i++)
        if (strcmp(subs[i].name, argv[0]) == 0) return subs[i].fn(c, argc - 1, argv + 1);
    return cli_usage_error("account", "unknown command 'account %s'", argv[0]);
}
