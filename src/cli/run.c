/* `runtime sandbox run [--keep] [create options] -- CMD [ARG...]`: create, exec, delete. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { R_KEEP = 300 };

static const struct opt_spec run_specs[] = {
    {"keep", false, R_KEEP},
    {"cwd", true, EXEC_CWD},
    {"timeout", true, EXEC_TIMEOUT},
    {NULL, false, 0},
};

struct run {
    json_t *create; /* POST /v1/sandboxes body */
    struct exec_opts exec;
    bool keep;
    int argc; /* the command */
    char **argv;
};

static int apply(struct args *a, struct run *r, int id)
{
    if (id == R_KEEP) return r->keep = true, 0;
    if (id == EXEC_CWD || id == EXEC_TIMEOUT) return exec_apply(a->cmd, &r->exec, id, a->val);
    if (id >= CREATE_OPT_FIRST && id <= CREATE_OPT_LAST)
        return create_apply(a->cmd, r->create, id, a->val);
    return cli_usage_error(a->cmd, "unexpected '%s'; put the command after --", a->argv[a->i - 1]);
}

/* Returns -1 after printing help. */
static int scan(struct args *a, struct run *r)
{
    int id;
    while ((id = args_next(a)) != ARG_END && id != ARG_REST) {
        if (id == ARG_HELP) return usage_print(a->cmd, stdout), -1;
        if (id == ARG_BAD || apply(a, r, id)) return EXIT_USAGE;
    }
    if (id != ARG_REST || a->i >= a->argc)
        return cli_usage_error(a->cmd, "missing the command: put it after --");
    r->argc = a->argc - a->i;
    r->argv = a->argv + a->i;
    return 0;
}

static void delete_sandbox(struct cli *c, const char *id)
{
    char *path = api_sandbox_path(id, "");
    if (!path || cli_call_json(c, "DELETE", path, NULL, NULL))
        cli_error("sandbox %s was not deleted; delete it with 'runtime sandbox rm %s'", id, id);
    free(path);
}

/* Create, exec, delete. Signals are caught from before the sandbox exists so that none
 * can leave it behind; the create call itself is not interrupted for the same reason. */
static int run(struct cli *c, struct run *r)
{
    char *id = NULL;
    http_catch_signals();
    int status = cli_create_sandbox(c, r->create, &id);
    if (status) goto out;
    if (r->keep) fprintf(stderr, "%s\n", id);
    r->exec.interruptible = true;
    if (!http_interrupted) status = exec_in(c, id, &r->exec, r->argc, r->argv);
    /* A second Ctrl-C during the cleanup ends the client at once. */
    http_default_signals();
    if (!r->keep) delete_sandbox(c, id);
out:
    free(id);
    return http_interrupted ? 128 + http_interrupted : status;
}

int cmd_sandbox_run(struct cli *c, int argc, char **argv)
{
    struct args a;
    struct run r = {.create = json_object(), .exec = {.body = json_object()}};
    args_init(&a, argc, argv, "sandbox run", run_specs);
    a.more = create_opt_specs;
    int status = scan(&a, &r);
    if (status == 0) status = run(c, &r);
    json_decref(r.create);
    json_decref(r.exec.body);
    return status < 0 ? EXIT_OK : status;
}
