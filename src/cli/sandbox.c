/* `runtime sandbox ...`: dispatch, and the commands that are one API call each. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { O_JSON, O_LABEL };

static const struct opt_spec json_opts[] = {{"json", false, O_JSON}, {NULL, false, 0}};
static const struct opt_spec list_opts[] = {
    {"json", false, O_JSON}, {"label", true, O_LABEL}, {NULL, false, 0}};
static const struct opt_spec no_opts[] = {{NULL, false, 0}};

/* Appends "label=K=V" to the query, K and V encoded apart so that the first '=' splits. */
static int add_label(FILE *q, const char *kv, bool first)
{
    const char *eq = strchr(kv, '=');
    if (!eq || eq == kv)
        return cli_usage_error("sandbox list", "bad value '%s' for --label: expected K=V", kv);
    char *k = strndup(kv, (size_t)(eq - kv));
    char *ek = k ? url_encode(k, NULL) : NULL, *ev = url_encode(eq + 1, NULL);
    if (ek && ev) fprintf(q, "%slabel=%s=%s", first ? "?" : "&", ek, ev);
    free(k), free(ek), free(ev);
    return ek && ev ? 0 : cli_error("out of memory");
}

/* Builds "/v1/sandboxes?label=..." from the options. Returns -1 after printing help. */
static int scan_list(struct args *a, FILE *q, bool *json)
{
    int id, n = 0;
    fputs("/v1/sandboxes", q);
    while ((id = args_next(a)) != ARG_END) {
        if (id == ARG_HELP) return usage_print(a->cmd, stdout), -1;
        if (id == ARG_BAD) return EXIT_USAGE;
        if (id == O_JSON)
            *json = true;
        else if (id != O_LABEL)
            return cli_usage_error(a->cmd, "unexpected argument '%s'", a->argv[a->i - 1]);
        else if (add_label(q, a->val, n++ == 0))
            return EXIT_USAGE;
    }
    return 0;
}

static int cmd_list(struct cli *c, int argc, char **argv)
{
    char *path = NULL;
    size_t len = 0;
    bool json = false;
    struct args a;
    FILE *q = open_memstream(&path, &len);
    if (!q) return cli_error("out of memory");
    args_init(&a, argc, argv, "sandbox list", list_opts);
    int r = scan_list(&a, q, &json);
    fclose(q);
    if (r == 0) r = api_print_list(c, path, json, show_table, "sandboxes");
    free(path);
    return r < 0 ? EXIT_OK : r;
}

/* Scans "ID [--json]"-shaped arguments: exactly one ID. Returns -1 after printing help. */
static int scan_one_id(struct args *a, const char **idp, bool *json)
{
    int id;
    *idp = NULL;
    while ((id = args_next(a)) != ARG_END) {
        if (id == ARG_HELP) return usage_print(a->cmd, stdout), -1;
        if (id == ARG_BAD) return EXIT_USAGE;
        if (id == O_JSON)
            *json = true;
        else if (id == ARG_POS && !*idp && *a->val)
            *idp = a->val;
        else
            return cli_usage_error(a->cmd, "unexpected argument '%s'", a->argv[a->i - 1]);
    }
    if (!*idp) return cli_usage_error(a->cmd, "missing the sandbox ID (an id or name)");
    return 0;
}

static int cmd_get(struct cli *c, int argc, char **argv)
{
    struct args a;
    const char *sid;
    bool json = false;
    args_init(&a, argc, argv, "sandbox get", json_opts);
    int r = scan_one_id(&a, &sid, &json);
    if (r) return r < 0 ? EXIT_OK : r;
    char *path = api_sandbox_path(sid, "");
    struct http_req req = {.method = "GET", .path = path, .sink_fd = -1};
    struct http_resp resp = {0};
    json_t *sb = NULL;
    if (!path) return cli_error("out of memory");
    r = api_call(c, &req, &resp);
    free(path);
    if (r) return r;
    if (json)
        print_raw_json(&resp);
    else if (!(r = parse_json_body(&resp, &sb)))
        show_sandbox(sb);
    json_decref(sb);
    http_resp_free(&resp);
    return r;
}

/* One call on one sandbox that answers with nothing we show; prints the ID on success. */
static int simple_call(struct cli *c, const char *method, const char *sid, const char *suffix)
{
    char *path = api_sandbox_path(sid, suffix);
    if (!path) return cli_error("out of memory");
    int r = api_json(c, method, path, NULL, NULL);
    free(path);
    if (r == 0) puts(sid);
    return r;
}

static int cmd_rm(struct cli *c, int argc, char **argv)
{
    struct args a;
    int id, n = 0, failed = 0;
    args_init(&a, argc, argv, "sandbox rm", no_opts);
    /* Check every argument before deleting anything. */
    while ((id = args_next(&a)) != ARG_END) {
        if (id == ARG_HELP) return usage_print(a.cmd, stdout), EXIT_OK;
        if (id == ARG_BAD) return EXIT_USAGE;
        if (id != ARG_POS || !*a.val)
            return cli_usage_error(a.cmd, "unexpected argument '%s'", a.argv[a.i - 1]);
        n++;
    }
    if (n == 0) return cli_usage_error(a.cmd, "missing the sandbox ID (an id or name)");
    for (int i = 0; i < argc; i++)
        failed |= simple_call(c, "DELETE", argv[i], "") != 0;
    return failed ? EXIT_FAIL : EXIT_OK;
}

static int pause_resume(struct cli *c, int argc, char **argv, const char *cmd, const char *suffix)
{
    struct args a;
    const char *sid;
    bool json = false;
    args_init(&a, argc, argv, cmd, no_opts);
    int r = scan_one_id(&a, &sid, &json);
    if (r) return r < 0 ? EXIT_OK : r;
    return simple_call(c, "POST", sid, suffix);
}

static int cmd_pause(struct cli *c, int argc, char **argv)
{
    return pause_resume(c, argc, argv, "sandbox pause", "/pause");
}

static int cmd_resume(struct cli *c, int argc, char **argv)
{
    return pause_resume(c, argc, argv, "sandbox resume", "/resume");
}

struct sub {
    const char *name;
    int (*fn)(struct cli *c, int argc, char **argv);
};

static const struct sub subs[] = {
    {"create", cmd_sandbox_create},
    {"run", cmd_sandbox_run},
    {"exec", cmd_sandbox_exec},
    {"list", cmd_list},
    {"get", cmd_get},
    {"rm", cmd_rm},
    {"pause", cmd_pause},
    {"resume", cmd_resume},
    {"network", cmd_sandbox_network},
    {"cp", cmd_sandbox_cp},
    {"events", cmd_sandbox_events},
    {"mcp", cmd_sandbox_mcp},
};

int cmd_sandbox(struct cli *c, int argc, char **argv)
{
    if (argc == 0) {
        usage_print("sandbox", stderr);
        return EXIT_USAGE;
    }
    if (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0 ||
        strcmp(argv[0], "help") == 0)
        return usage_print("sandbox", stdout), EXIT_OK;
    for (size_t i = 0; i < ARRAY_LEN(subs); i++)
        if (strcmp(subs[i].name, argv[0]) == 0) return subs[i].fn(c, argc - 1, argv + 1);
    char full[64];
    snprintf(full, sizeof full, "sandbox %s", argv[0]);
    if (pending_usage(full)) return cmd_pending(full, argc - 1, argv + 1);
    return cli_usage_error("sandbox", "unknown command 'sandbox %s'", argv[0]);
}
