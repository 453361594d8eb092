/* Option scanning: long options (--name V, --name=V), -h, and "--" before a command.
 * Hand-written rather than getopt_long because getopt permutes "ID -- CMD" and loses
 * where the command starts, and its messages do not follow our error format. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void args_init(struct args *a, int argc, char **argv, const char *cmd, const struct opt_spec *opts)
{
    *a = (struct args){.argc = argc, .argv = argv, .cmd = cmd, .opts = opts};
}

static const struct opt_spec *find_in(const struct opt_spec *opts, const char *name, size_t n)
{
    for (; opts && opts->name; opts++)
        if (strlen(opts->name) == n && strncmp(opts->name, name, n) == 0) return opts;
    return NULL;
}

static const struct opt_spec *find_opt(const struct args *a, const char *name, size_t n)
{
    const struct opt_spec *o = find_in(a->opts, name, n);
    return o ? o : find_in(a->more, name, n);
}

static int take_value(struct args *a, const struct opt_spec *o, const char *eq)
{
    if (!o->has_arg) {
        if (eq) return cli_usage_error(a->cmd, "option --%s takes no value", o->name), ARG_BAD;
        a->val = NULL;
        return o->id;
    }
    if (eq) {
        a->val = eq + 1;
        return o->id;
    }
    if (a->i >= a->argc)
        return cli_usage_error(a->cmd, "option --%s needs a value", o->name), ARG_BAD;
    a->val = a->argv[a->i++];
    return o->id;
}

static int long_option(struct args *a, const char *arg)
{
    const char *name = arg + 2;
    const char *eq = strchr(name, '=');
    size_t n = eq ? (size_t)(eq - name) : strlen(name);
    if (n == 4 && strncmp(name, "help", 4) == 0) return ARG_HELP;
    const struct opt_spec *o = find_opt(a, name, n);
    if (!o) return cli_usage_error(a->cmd, "unknown option '%.*s'", (int)n + 2, arg), ARG_BAD;
    return take_value(a, o, eq);
}

int args_next(struct args *a)
{
    if (a->i >= a->argc) return ARG_END;
    const char *arg = a->argv[a->i++];
    if (strcmp(arg, "--") == 0) return ARG_REST;
    if (strcmp(arg, "-h") == 0) return ARG_HELP;
    if (arg[0] == '-' && arg[1] == '-') return long_option(a, arg);
    if (arg[0] == '-' && arg[1] != '\0')
        return cli_usage_error(a->cmd, "unknown option '%s'", arg), ARG_BAD;
    a->val = arg; /* a word, or "-" meaning stdin/stdout */
    return ARG_POS;
}

int parse_count(const char *cmd, const char *opt, const char *s, json_int_t *out)
{
    char *end;
    errno = 0;
    if (*s < '0' || *s > '9') goto bad;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v > (1LL << 40)) goto bad;
    *out = v;
    return 0;
bad:
    return cli_usage_error(cmd, "bad value '%s' for --%s: expected a whole number", s, opt);
}

/* Plain decimals only ("0.5", "2"): strtod alone would also take "inf", "nan" and hex. */
int parse_decimal(const char *cmd, const char *opt, const char *s, double *out)
{
    if (s[0] == '\0' || strspn(s, "0123456789.") != strlen(s) || strchr(s, '.') != strrchr(s, '.'))
        goto bad;
    if (strcmp(s, ".") == 0) goto bad;
    char *end;
    double v = strtod(s, &end);
    if (*end || !isfinite(v) || v > 1e9) goto bad;
    *out = v;
    return 0;
bad:
    return cli_usage_error(cmd, "bad value '%s' for --%s: expected a number like 2 or 0.5", s, opt);
}

int parse_kv_into(const char *cmd, const char *opt, const char *s, json_t *obj)
{
    const char *eq = strchr(s, '=');
    if (!eq || eq == s)
        return cli_usage_error(cmd, "bad value '%s' for --%s: expected K=V", s, opt);
    char key[256];
    size_t n = (size_t)(eq - s);
    if (n >= sizeof key) return cli_usage_error(cmd, "key in --%s %s is too long", opt, s);
    memcpy(key, s, n);
    key[n] = '\0';
    json_t *v = json_string(eq + 1);
    if (!v || json_object_set_new(obj, key, v) < 0)
        return cli_usage_error(cmd, "bad value '%s' for --%s: not UTF-8 text", s, opt);
    return 0;
}
