/* `runtime sandbox create`, and the create options `sandbox run` shares. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    C_NAME = CREATE_OPT_FIRST,
    C_MEMORY,
    C_CPUS,
    C_DISK,
    C_IDLE,
    C_HIBERNATE,
    C_LABEL,
    C_ENV,
    C_ALLOW,
    C_NO_INTERNET,
    C_ISOLATION,
};

const struct opt_spec create_opt_specs[] = {
    {"name", true, C_NAME},           {"memory", true, C_MEMORY},
    {"cpus", true, C_CPUS},           {"disk", true, C_DISK},
    {"idle-pause", true, C_IDLE},     {"hibernate-after", true, C_HIBERNATE},
    {"label", true, C_LABEL},         {"env", true, C_ENV},
    {"allow", true, C_ALLOW},         {"no-internet", false, C_NO_INTERNET},
    {"isolation", true, C_ISOLATION}, {NULL, false, 0},
};

/* The object member key of body, created empty on first use. */
static json_t *member(json_t *body, const char *key, json_t *(*make)(void))
{
    json_t *m = json_object_get(body, key);
    if (!m) json_object_set_new(body, key, m = make());
    return m;
}

static int set_count(const char *cmd, json_t *body, const char *key, const char *opt,
                     const char *val)
{
    json_int_t n;
    if (parse_count(cmd, opt, val, &n)) return EXIT_USAGE;
    json_object_set_new(body, key, json_integer(n));
    return 0;
}

static int set_cpus(const char *cmd, json_t *body, const char *val)
{
    double v;
    if (parse_decimal(cmd, "cpus", val, &v)) return EXIT_USAGE;
    if (v <= 0) return cli_usage_error(cmd, "--cpus must be more than 0");
    /* Whole numbers go out as integers for servers that read them as such. */
    json_t *j = v == (double)(json_int_t)v ? json_integer((json_int_t)v) : json_real(v);
    json_object_set_new(body, "cpus", j);
    return 0;
}

static int set_name(const char *cmd, json_t *body, const char *val)
{
    json_t *s = *val ? json_string(val) : NULL;
    if (!s) return cli_usage_error(cmd, "bad value '%s' for --name: expected UTF-8 text", val);
    json_object_set_new(body, "name", s);
    return 0;
}

/* The drivers are checked here too, so that a typo is a usage error before any request;
 * whether this daemon has the one asked for is the daemon's to say. */
static int set_isolation(const char *cmd, json_t *body, const char *val)
{
    if (strcmp(val, "ns") != 0 && strcmp(val, "gvisor") != 0)
        return cli_usage_error(cmd, "bad value '%s' for --isolation: expected ns or gvisor", val);
    json_object_set_new(body, "isolation", json_string(val));
    return 0;
}

static int append_string(const char *cmd, json_t *arr, const char *opt, const char *val)
{
    json_t *s = *val ? json_string(val) : NULL;
    if (!s) return cli_usage_error(cmd, "bad value '%s' for --%s", val, opt);
    json_array_append_new(arr, s);
    return 0;
}

/* Only what the user gave goes into the body: the API owns the defaults. */
int create_apply(const char *cmd, json_t *body, int id, const char *val)
{
    json_t *net = NULL;
    switch (id) {
    case C_NAME:
        return set_name(cmd, body, val);
    case C_MEMORY:
        return set_count(cmd, body, "memoryMiB", "memory", val);
    case C_CPUS:
        return set_cpus(cmd, body, val);
    case C_DISK:
        return set_count(cmd, body, "diskMiB", "disk", val);
    case C_IDLE:
        return set_count(cmd, body, "idlePauseSeconds", "idle-pause", val);
    case C_HIBERNATE:
        return set_count(cmd, body, "hibernateAfterSeconds", "hibernate-after", val);
    case C_LABEL:
        return parse_kv_into(cmd, "label", val, member(body, "labels", json_object));
    case C_ENV:
        return parse_kv_into(cmd, "env", val, member(body, "env", json_object));
    case C_ALLOW:
        net = member(body, "network", json_object);
        return append_string(cmd, member(net, "allow", json_array), "allow", val);
    case C_NO_INTERNET:
        net = member(body, "network", json_object);
        json_object_set_new(net, "internet", json_false());
        return 0;
    case C_ISOLATION:
        return set_isolation(cmd, body, val);
    }
    return cli_usage_error(cmd, "internal error: unknown option %d", id);
}

int cli_create_sandbox(struct cli *c, json_t *body, char **id)
{
    json_t *sb = NULL;
    *id = NULL;
    int r = cli_call_json(c, "POST", "/v1/sandboxes", body, &sb);
    if (r) return r;
    const char *s = json_string_value(json_object_get(sb, "id"));
    if (s) *id = strdup(s);
    json_decref(sb);
    if (!s) return cli_error("the daemon's answer has no sandbox id; is that runtimed?");
    return *id ? 0 : cli_error("out of memory");
}

static int scan(struct args *a, json_t *body)
{
    int id;
    while ((id = args_next(a)) != ARG_END) {
        if (id == ARG_HELP) return usage_print(a->cmd, stdout), -1;
        if (id == ARG_BAD) return EXIT_USAGE;
        if (id < 0) return cli_usage_error(a->cmd, "unexpected argument '%s'", a->argv[a->i - 1]);
        if (create_apply(a->cmd, body, id, a->val)) return EXIT_USAGE;
    }
    return 0;
}

int cmd_sandbox_create(struct cli *c, int argc, char **argv)
{
    struct args a;
    json_t *body = json_object();
    char *id = NULL;
    args_init(&a, argc, argv, "sandbox create", create_opt_specs);
    int r = scan(&a, body);
    if (r == 0) r = cli_create_sandbox(c, body, &id);
    if (r == 0) puts(id);
    free(id);
    json_decref(body);
    return r < 0 ? EXIT_OK : r;
}
