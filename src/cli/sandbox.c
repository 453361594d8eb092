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

/* Appends "label=K:V" to the query (Runtime Cloud's form), K and V encoded apart. */
static int add_label(FILE *q, const char *kv, bool first)
{
    const char *eq = strchr(kv, '=');
    if (!eq || eq == kv)
        return cli_usage_error("sandbox list", "bad value '%s' for --label: expected K=V", kv);
    char *k = strndup(kv, (size_t)(eq - kv));
    char *ek = k ? url_encode(k, NULL) : NULL, *ev = url_encode(eq + 1, NULL);
    if (ek && ev) fprintf(q, "%slabel=%s:%s", first ? "?" : "&", ek, ev);
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

#define LIST_PAGES_MAX 10000 /* of 100: far past any daemon's --max-sandboxes */

/* Every page of GET path ({data, nextCursor}), the sandboxes in one array (*out). */
static int list_all(struct cli *c, const char *path, json_t **out)
{
    *out = json_array();
    char *cursor = NULL;
    int r = 0;
    for (int page = 0; r == 0 && page < LIST_PAGES_MAX; page++) {
        char *url = NULL, *enc = cursor ? url_encode(cursor, NULL) : NULL;
        if (asprintf(&url, "%s%scursor=%s", path, strchr(path, '?') ? "&" : "?", enc ? enc : "") <
            0)
            url = NULL;
        json_t *answer = NULL;
        r = url ? cli_call_json(c, "GET", cursor ? url : path, NULL, &answer)
                : cli_error("out of memory");
        free(url), free(enc), free(cursor);
        cursor = NULL;
        json_t *data = json_object_get(answer, "data");
        if (r == 0 && !json_is_array(data))
            r = cli_error("the daemon's answer is not a list of sandboxes; is that runtimed?");
        if (r == 0) json_array_extend(*out, data);
        const char *next = json_string_value(json_object_get(answer, "nextCursor"));
        cursor = r == 0 && next ? strdup(next) : NULL;
        json_decref(answer);
        if (!cursor) break;
    }
    free(cursor);
    return r;
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
    json_t *all = NULL;
    if (r == 0) r = list_all(c, path, &all);
    if (r == 0 && json) {
        json_dumpf(all, stdout, JSON_COMPACT);
        fputc('\n', stdout);
    } else if (r == 0) {
        show_table(all);
    }
    json_decref(all);
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

static int show_one(json_t *sb, void *arg)
{
    show_sandbox(sb);
    return 0;
}

/* One call on one sandbox that answers with the sandbox: --json prints it as received, else
 * show() prints it. */
static int sandbox_show(struct cli *c, const char *method, const char *sid, const char *suffix,
                        bool json, int (*show)(json_t *sb, void *arg), void *arg)
{
    char *path = api_sandbox_path(sid, suffix);
    if (!path) return cli_error("out of memory");
    struct http_req req = {.method = method, .path = path, .sink_fd = -1};
    int r = api_show(c, &req, json, show, arg);
    free(path);
    return r;
}

static int cmd_get(struct cli *c, int argc, char **argv)
{
    struct args a;
    const char *sid;
    bool json = false;
    args_init(&a, argc, argv, "sandbox get", json_opts);
    int r = scan_one_id(&a, &sid, &json);
    if (r) return r < 0 ? EXIT_OK : r;
    return sandbox_show(c, "GET", sid, "", json, show_one, NULL);
}

/* One call on one sandbox that answers with nothing we show; prints the ID on success. */
static int simple_call(struct cli *c, const char *method, const char *sid, const char *suffix)
{
    char *path = api_sandbox_path(sid, suffix);
    if (!path) return cli_error("out of memory");
    int r = cli_call_json(c, method, path, NULL, NULL);
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

/* "sandbox NAME (ID) paused", or "sandbox ID paused" for one without a name; arg is the verb. */
static int show_changed(json_t *sb, void *arg)
{
    const char *id = json_string_value(json_object_get(sb, "id"));
    const char *name = json_string_value(json_object_get(sb, "name"));
    bool named = name && *name;
    if (!id) return cli_error("the daemon's answer is not a sandbox; is that runtimed?");
    fputs("sandbox ", stdout);
    if (named) print_clean(stdout, name, 200), fputs(" (", stdout);
    print_clean(stdout, id, 200);
    printf("%s %s\n", named ? ")" : "", (const char *)arg);
    return 0;
}

/* pause, hibernate, wake, stop, start: a POST to the sandbox's verb, then one line. */
static int change_state(struct cli *c, int argc, char **argv, const char *cmd, const char *suffix,
                        const char *verb)
{
    struct args a;
    const char *sid;
    bool json = false;
    args_init(&a, argc, argv, cmd, json_opts);
    int r = scan_one_id(&a, &sid, &json);
    if (r) return r < 0 ? EXIT_OK : r;
    return sandbox_show(c, "POST", sid, suffix, json, show_changed, (void *)verb);
}

static int cmd_pause(struct cli *c, int argc, char **argv)
{
    return change_state(c, argc, argv, "sandbox pause", "/pause", "paused");
}

static int cmd_hibernate(struct cli *c, int argc, char **argv)
{
    return change_state(c, argc, argv, "sandbox hibernate", "/hibernate", "hibernated");
}

static int cmd_wake(struct cli *c, int argc, char **argv)
{
    return change_state(c, argc, argv, "sandbox wake", "/wake", "woken");
}

static int cmd_resume(struct cli *c, int argc, char **argv)
{
    return change_state(c, argc, argv, "sandbox resume", "/resume", "resumed");
}

static int cmd_stop(struct cli *c, int argc, char **argv)
{
    return change_state(c, argc, argv, "sandbox stop", "/stop", "stopped");
}

static int cmd_start(struct cli *c, int argc, char **argv)
{
    return change_state(c, argc, argv, "sandbox start", "/start", "started");
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
    {"hibernate", cmd_hibernate},
    {"wake", cmd_wake},
    {"resume", cmd_resume}, /* wake's name before Runtime Cloud's */
    {"stop", cmd_stop},
    {"start", cmd_start},
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
    return cli_usage_error("sandbox", "unknown command 'sandbox %s'", argv[0]);
}
