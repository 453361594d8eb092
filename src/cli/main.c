/* runtime: global options and the top-level commands. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("runtime: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return EXIT_FAIL;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("runtime: ", stderr);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "; see 'runtime %s%s--help'\n", cmd, *cmd ? " " : "");
    va_end(ap);
    return EXIT_USAGE;
}

enum { G_API_URL, G_SOCKET, G_STATE_DIR, G_VERSION };

static const struct opt_spec global_opts[] = {
    {"api-url", true, G_API_URL},  {"socket", true, G_SOCKET}, {"state-dir", true, G_STATE_DIR},
    {"version", false, G_VERSION}, {NULL, false, 0},
};

static int print_usage(const char *cmd)
{
    usage_print(cmd, stdout);
    return EXIT_OK;
}

/* `runtime help [COMMAND...]` */
static int cmd_help(int argc, char **argv)
{
    char topic[128] = "";
    for (int i = 0; i < argc; i++) {
        size_t n = strlen(topic);
        snprintf(topic + n, sizeof topic - n, "%s%s", n ? " " : "", argv[i]);
    }
    if (!usage_print(topic, stdout)) return cli_usage_error("", "no help for '%s'", topic);
    return EXIT_OK;
}

static int run_command(struct cli *c, int argc, char **argv)
{
    const char *cmd = argv[0];
    if (strcmp(cmd, "sandbox") == 0) return cmd_sandbox(c, argc - 1, argv + 1);
    if (strcmp(cmd, "help") == 0) return cmd_help(argc - 1, argv + 1);
    if (strcmp(cmd, "version") == 0) return printf("runtime %s\n", runtime_version()), EXIT_OK;
    if (strcmp(cmd, "secret") == 0) return cmd_secret(c, argc - 1, argv + 1);
    if (strcmp(cmd, "mcp") == 0) return cmd_mcp(c, argc - 1, argv + 1);
    if (strcmp(cmd, "usage") == 0) return cmd_usage(c, argc - 1, argv + 1);
    if (strcmp(cmd, "account") == 0) return cmd_account(c, argc - 1, argv + 1);
    if (strcmp(cmd, "login") == 0) return cmd_login(c, argc - 1, argv + 1);
    if (strcmp(cmd, "logout") == 0) return cmd_logout(c, argc - 1, argv + 1);
    return cli_usage_error("", "unknown command '%s'", cmd);
}

static int apply_global(struct cli *c, int id, const char *val)
{
    switch (id) {
    case G_API_URL:
        c->api_url = val;
        break;
    case G_SOCKET:
        c->socket = val;
        c->api_url = NULL; /* an explicit socket beats RUNTIME_API_URL */
        break;
    case G_STATE_DIR:
        c->state_dir = val;
        c->state_dir_given = true;
        break;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct cli c;
    struct args a;
    conn_defaults(&c);
    http_global_init();
    /* Global options stop at the first word: that is the command. */
    args_init(&a, argc - 1, argv + 1, "", global_opts);
    for (;;) {
        if (a.i < a.argc && a.argv[a.i][0] != '-') break;
        int id = args_next(&a);
        if (id == ARG_BAD) return EXIT_USAGE;
        if (id == ARG_HELP) return print_usage("");
        if (id == G_VERSION) return printf("runtime %s\n", runtime_version()), EXIT_OK;
        if (id == ARG_END || id == ARG_REST) break;
        if (id == ARG_POS) return cli_usage_error("", "unknown command '%s'", a.val);
        apply_global(&c, id, a.val);
    }
    if (a.i >= a.argc) {
        usage_print("", stderr);
        return EXIT_USAGE;
    }
    return run_command(&c, a.argc - a.i, a.argv + a.i);
}
