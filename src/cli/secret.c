/* `runtime secret ...`: dispatch, list and rm (set is in secret_set.c). The API never
 * answers with a value, so nothing here can show one. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct opt_spec no_opts[] = {{NULL, false, 0}};

void secret_rules_text(json_t *list, const char *sep, char *out, size_t size)
{
    size_t i, n = 0;
    json_t *e;
    out[0] = '\0';
    json_array_foreach(list, i, e)
    {
        const char *s = json_string_value(e);
        if (!s) continue;
        int w = snprintf(out + n, size - n, "%s%s", n ? sep : "", s);
        if (w < 0 || (size_t)w >= size - n) break;
        n += (size_t)w;
    }
    if (!out[0]) snprintf(out, size, "any");
    show_clean(out);
}

char *secret_path(const char *name)
{
    char *enc = url_encode(name, NULL), *path = NULL;
    if (enc && asprintf(&path, "/v1/egress-secrets/%s", enc) < 0) path = NULL;
    free(enc);
    return path;
}

/* ---- list ---- */

void secret_rules_show(json_t *rules, char *out, size_t size)
{
    size_t i, n = 0;
    json_t *rule;
    snprintf(out, size, "any");
    json_array_foreach(rules, i, rule)
    {
        char methods[256], paths[1024];
        secret_rules_text(json_object_get(rule, "methods"), ",", methods, sizeof methods);
        secret_rules_text(json_object_get(rule, "paths"), ",", paths, sizeof paths);
        int w = snprintf(out + n, size - n, "%s%s %s", n ? " | " : "", methods, paths);
        if (w < 0 || (size_t)w >= size - n) break;
        n += (size_t)w;
    }
    show_clean(out);
}

enum { COLS = 5 };
static const char *const heads[COLS] = {"NAME", "HOSTS", "RULES", "HEADER", "UPDATED"};

static void cell(json_t *s, int col, char *out, size_t size)
{
    static const char *const keys[COLS] = {"name", "hosts", "rules", "header", "updatedAt"};
    json_t *v = json_object_get(s, keys[col]);
    if (col == 0 || col == 3) {
        snprintf(out, size, "%s", json_string_value(v) ?: "-");
        show_clean(out);
    } else if (col == 1) {
        secret_rules_text(v, ",", out, size);
    } else if (col == 2) {
        secret_rules_show(v, out, size);
    } else {
        show_age(v, out, size);
        show_clean(out);
    }
}

static void secret_table(json_t *list)
{
    cli_table_print(&(struct cli_table){heads, COLS, cell, NULL}, list);
}

/* {secrets: [...], next}: an account holds at most 50, one page of 100 holds them all. */
static int cmd_list(struct cli *c, int argc, char **argv)
{
    return api_list_command(c, argc, argv, "secret list", "/v1/egress-secrets?limit=100",
                            secret_table, "secrets");
}

/* ---- rm ---- */

static int cmd_rm(struct cli *c, int argc, char **argv)
{
    struct args a;
    const char *name = NULL;
    int id;
    args_init(&a, argc, argv, "secret rm", no_opts);
    while ((id = args_next(&a)) != ARG_END) {
        if (id == ARG_HELP) return usage_print(a.cmd, stdout), EXIT_OK;
        if (id == ARG_BAD) return EXIT_USAGE;
        if (id != ARG_POS || name || !*a.val)
            return cli_usage_error(a.cmd, "unexpected argument '%s'", a.argv[a.i - 1]);
        name = a.val;
    }
    if (!name) return cli_usage_error(a.cmd, "missing the secret NAME");
    char *path = secret_path(name);
    if (!path) return cli_error("out of memory");
    int r = cli_call_json(c, "DELETE", path, NULL, NULL);
    free(path);
    if (r == 0) printf("secret %s removed\n", name);
    return r;
}

int cmd_secret(struct cli *c, int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*fn)(struct cli *c, int argc, char **argv);
    } subs[] = {{"set", cmd_secret_set}, {"list", cmd_list}, {"rm", cmd_rm}};
    if (argc == 0) {
        usage_print("secret", stderr);
        return EXIT_USAGE;
    }
    if (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0 ||
        strcmp(argv[0], "help") == 0)
        return usage_print("secret", stdout), EXIT_OK;
    for (size_t i = 0; i < ARRAY_LEN(subs); i++)
        if (strcmp(subs[i].name, argv[0]) == 0) return subs[i].fn(c, argc - 1, argv + 1);
    return cli_usage_error("secret", "unknown command 'secret %s'", argv[0]);
}
