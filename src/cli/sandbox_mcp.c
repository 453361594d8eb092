/* `runtime sandbox mcp ...`: the MCP servers of a sandbox, and the catalog.
 *
 *   sandbox mcp catalog [--json]          GET /v1/mcp/catalog
 *   sandbox mcp ID [--json]               GET /v1/sandboxes/ID/mcp
 *   sandbox mcp ID start SERVER... ...    POST .../mcp, then GET .../mcp?wait=SECONDS
 *   sandbox mcp ID stop SERVER            DELETE .../mcp/SERVER
 *   sandbox mcp ID logs SERVER [--follow] GET .../mcp/SERVER/logs[?follow=1]
 *
 * One scan serves every form: the words say which form it is, then the form checks that it
 * was given only its own options. */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_WAIT 300

/* ---- usage texts ---- */

static const char mcp_usage[] =
    "Usage: runtime sandbox mcp catalog [--json]\n"
    "       runtime sandbox mcp ID start SERVER... [--secret SERVER.ENV=SECRET]...\n"
    "                           [--fingerprint SERVER=HASH]... [--tools SERVER=TOOL,...]...\n"
    "                           [--wait SECONDS]\n"
    "       runtime sandbox mcp ID [--json]\n"
    "       runtime sandbox mcp ID stop SERVER\n"
    "       runtime sandbox mcp ID logs SERVER [--follow]\n"
    "\n"
    "The MCP servers of the sandbox ID (an id or name). Each one runs in the sandbox\n"
    "and is reached over MCP Streamable HTTP at its own private URL, with the\n"
    "sandbox's gateway token in an Authorization header.\n"
    "\n"
    "  catalog               the servers runtime installs by id\n"
    "  ID start SERVER...    start servers: catalog ids, or NAME=CMD for your own\n"
    "  ID                    each server's status and URL, and how to connect\n"
    "  ID stop SERVER        stop a server\n"
    "  ID logs SERVER        what a server wrote on stderr, and its install's output\n"
    "\n"
    "'runtime sandbox mcp ID' prints a line per server, NAME STATUS URL, with its\n"
    "tools, warnings and error under it; then the header every request needs, and\n"
    "for each ready server a line that adds it to Claude Code (a server not ready\n"
    "gets a '#' line with its status and error instead):\n"
    "\n"
    "  NAME   STATUS  URL\n"
    "  hello  ready   http://127.0.0.1:7070/mcp/LINK/hello\n"
    "    tools: hello (fingerprint 0123456789abcdef)\n"
    "\n"
    "  Authorization: Bearer TOKEN\n"
    "\n"
    "  claude mcp add --transport http hello http://127.0.0.1:7070/mcp/LINK/hello "
    "--header \"Authorization: Bearer TOKEN\"\n"
    "\n"
    "STATUS is installing, starting, ready, failed, refused (its tools are not the\n"
    "reviewed ones) or stopped.\n"
    "\n"
    "Options:\n"
    "  --json        print the API's JSON\n"
    "\n"
    "Run 'runtime sandbox mcp ID start --help' for how to start servers.\n";

static const char catalog_usage[] =
    "Usage: runtime sandbox mcp catalog [--json]\n"
    "\n"
    "Lists the MCP servers runtime installs by id: ID VERSION LICENSE SECRETS.\n"
    "SECRETS are the variables the server takes a secret in, [optional ones] in\n"
    "brackets; give them when starting it, e.g.\n"
    "  runtime sandbox mcp ID start github \\\n"
    "      --secret github.GITHUB_PERSONAL_ACCESS_TOKEN=MY_GITHUB_TOKEN\n"
    "\n"
    "Options:\n"
    "  --json        print the API's JSON (every field of every entry)\n";

static const char start_usage[] =
    "Usage: runtime sandbox mcp ID start SERVER... [--secret SERVER.ENV=SECRET]...\n"
    "                           [--fingerprint SERVER=HASH]... [--tools SERVER=TOOL,...]...\n"
    "                           [--wait SECONDS]\n"
    "\n"
    "Starts MCP servers in the sandbox ID, waits until they are ready and prints\n"
    "what 'runtime sandbox mcp ID' prints. A SERVER is\n"
    "\n"
    "  a catalog id, e.g. github or fetch ('runtime sandbox mcp catalog'), or\n"
    "  NAME=CMD, your own stdio server, e.g.\n"
    "      tickets='python3 /workspace/tickets_server.py'\n"
    "    run in /workspace as the sandbox's user.\n"
    "\n"
    "CMD is split at blanks into the program and its arguments, without a shell:\n"
    "no $VARIABLES, globs, pipes or redirections. An argument with blanks goes in\n"
    "'single' or \"double\" quotes (in double quotes \\\" and \\\\ are \" and \\; outside\n"
    "quotes \\ keeps the next character), e.g.\n"
    "  notes='node /workspace/notes.mjs \"--dir=/workspace/my notes\"'\n"
    "\n"
    "A server that already runs with the same settings is left as it is.\n"
    "\n"
    "Options:\n"
    "  --secret SERVER.ENV=SECRET   give SERVER the variable ENV holding the\n"
    "                               placeholder of the secret SECRET ('runtime\n"
    "                               secret set'); repeatable\n"
    "  --fingerprint SERVER=HASH    the fingerprint of SERVER's reviewed tools\n"
    "                               ('runtime mcp fingerprint'); the server is\n"
    "                               refused if its tools differ; repeatable\n"
    "  --tools SERVER=TOOL,...      the only tools of SERVER that clients see and\n"
    "                               may call (the others are refused); repeatable\n"
    "  --wait SECONDS               wait this long for the servers to be ready\n"
    "                               (default 300; 0: do not wait)\n"
    "\n"
    "Exit status: 0 when every SERVER is ready (with --wait 0: was accepted), 1\n"
    "when one failed or was refused (its error is printed), 124 when one was not\n"
    "ready after SECONDS, 2 for a usage error.\n";

static const char stop_usage[] =
    "Usage: runtime sandbox mcp ID stop SERVER\n"
    "\n"
    "Stops the MCP server SERVER (its NAME; a catalog server's name is its id) in\n"
    "the sandbox ID. Start it again with 'runtime sandbox mcp ID start'.\n";

static const char logs_usage[] =
    "Usage: runtime sandbox mcp ID logs SERVER [--follow]\n"
    "\n"
    "Prints what the MCP server SERVER of the sandbox ID wrote on stderr, and the\n"
    "output of its install (each step's command line after '$', then what it\n"
    "printed), oldest first. The daemon keeps the last 64 KiB of each server, in\n"
    "memory (a restart of runtimed starts it empty); lines of its own start with\n"
    "'[runtime:'.\n"
    "\n"
    "Options:\n"
    "  --follow      keep printing what the server writes next, until interrupted\n";

static const struct {
    const char *cmd, *text;
} usages[] = {
    {"sandbox mcp", mcp_usage},
    {"sandbox mcp catalog", catalog_usage},
    {"sandbox mcp ID start", start_usage},
    {"sandbox mcp ID stop", stop_usage},
    {"sandbox mcp ID logs", logs_usage},
};

const char *sandbox_mcp_usage(const char *cmd)
{
    for (size_t i = 0; i < ARRAY_LEN(usages); i++)
        if (strcmp(usages[i].cmd, cmd) == 0) return usages[i].text;
    return NULL;
}

/* ---- the command line ---- */

enum { M_JSON, M_SECRET, M_FINGERPRINT, M_TOOLS, M_WAIT, M_FOLLOW };

static const struct opt_spec specs[] = {
    {"json", false, M_JSON},  {"secret", true, M_SECRET}, {"fingerprint", true, M_FINGERPRINT},
    {"tools", true, M_TOOLS}, {"wait", true, M_WAIT},     {"follow", false, M_FOLLOW},
    {NULL, false, 0},
};

/* Where each option goes, for the message when it is given elsewhere. */
static const char *const opt_where[] = {
    [M_JSON] = "'sandbox mcp catalog' and 'sandbox mcp ID'",
    [M_SECRET] = "'sandbox mcp ID start'",
    [M_FINGERPRINT] = "'sandbox mcp ID start'",
    [M_TOOLS] = "'sandbox mcp ID start'",
    [M_WAIT] = "'sandbox mcp ID start'",
    [M_FOLLOW] = "'sandbox mcp ID logs'",
};

enum form { F_NONE, F_CATALOG, F_SHOW, F_START, F_STOP, F_LOGS, F_BAD };

/* The command each form names in messages and the key of its help text. */
static const char *const form_cmd[] = {
    [F_NONE] = "sandbox mcp",         [F_CATALOG] = "sandbox mcp catalog",
    [F_SHOW] = "sandbox mcp",         [F_START] = "sandbox mcp ID start",
    [F_STOP] = "sandbox mcp ID stop", [F_LOGS] = "sandbox mcp ID logs",
    [F_BAD] = "sandbox mcp",
};

/* The options each form takes, as bits of option ids; none for the forms not listed. */
static const unsigned form_opts[F_BAD + 1] = {
    [F_CATALOG] = 1u << M_JSON,
    [F_SHOW] = 1u << M_JSON,
    [F_START] = 1u << M_SECRET | 1u << M_FINGERPRINT | 1u << M_TOOLS | 1u << M_WAIT,
    [F_LOGS] = 1u << M_FOLLOW,
};

struct item {
    int id;
    const char *val;
};

struct mcp {
    const char **words; /* the arguments that are not options, in order */
    size_t nwords;
    struct item *opts; /* the options, in order: --secret needs the SERVERs, given later */
    size_t nopts;
};

static enum form form_of(const struct mcp *m)
{
    if (m->nwords == 0 || !*m->words[0]) return F_NONE;
    if (strcmp(m->words[0], "catalog") == 0) return F_CATALOG;
    if (m->nwords == 1) return F_SHOW;
    if (strcmp(m->words[1], "start") == 0) return F_START;
    if (strcmp(m->words[1], "stop") == 0) return F_STOP;
    if (strcmp(m->words[1], "logs") == 0) return F_LOGS;
    return F_BAD;
}

static bool has_opt(const struct mcp *m, int id)
{
    for (size_t i = 0; i < m->nopts; i++)
        if (m->opts[i].id == id) return true;
    return false;
}

/* Returns -1 after printing help: that of the form the words so far name. */
static int scan(struct args *a, struct mcp *m)
{
    int id;
    while ((id = args_next(a)) != ARG_END) {
        if (id == ARG_HELP) return fputs(sandbox_mcp_usage(form_cmd[form_of(m)]), stdout), -1;
        if (id == ARG_BAD) return EXIT_USAGE;
        if (id == ARG_REST)
            return cli_usage_error(a->cmd, "unexpected argument '%s'", a->argv[a->i - 1]);
        if (id == ARG_POS)
            m->words[m->nwords++] = a->val;
        else
            m->opts[m->nopts++] = (struct item){id, a->val};
    }
    return 0;
}

static int check_words(const struct mcp *m, enum form f)
{
    const char *cmd = form_cmd[f];
    size_t max = f == F_START ? m->nwords : f == F_STOP || f == F_LOGS ? 3 : 1;
    if (f == F_NONE) return cli_usage_error(cmd, "missing the sandbox ID (an id or name)");
    if (f == F_BAD)
        return cli_usage_error(cmd,
                               "unknown command '%s' after the sandbox ID: expected start, "
                               "stop or logs, or nothing to show its servers",
                               m->words[1]);
    if (f == F_START && m->nwords < 3)
        return cli_usage_error(cmd, "missing the SERVER to start: a catalog id (see 'runtime "
                                    "sandbox mcp catalog') or NAME=CMD");
    if (f == F_STOP && m->nwords < 3) return cli_usage_error(cmd, "missing the SERVER to stop");
    if (f == F_LOGS && m->nwords < 3)
        return cli_usage_error(cmd, "missing the SERVER whose logs to print");
    if (m->nwords > max) return cli_usage_error(cmd, "unexpected argument '%s'", m->words[max]);
    return 0;
}

static int check_opts(const struct mcp *m, enum form f)
{
    for (size_t i = 0; i < m->nopts; i++) {
        int id = m->opts[i].id;
        if (!(form_opts[f] & 1u << id))
            return cli_usage_error(form_cmd[f], "option --%s goes only with %s", specs[id].name,
                                   opt_where[id]);
    }
    return 0;
}

/* ---- SERVER arguments ---- */

/* A server of the start request is named by its name, a catalog server by its id. */
static const char *server_key(json_t *srv)
{
    json_t *name = json_object_get(srv, "name");
    return json_string_value(name ? name : json_object_get(srv, "id"));
}

static json_t *find_server(json_t *list, const char *key, size_t len)
{
    size_t i;
    json_t *srv;
    json_array_foreach(list, i, srv)
    {
        const char *k = server_key(srv);
        if (k && strlen(k) == len && strncmp(k, key, len) == 0) return srv;
    }
    return NULL;
}

struct split {
    char *word; /* the word being read; as long as the whole command line */
    size_t n;
    char quote; /* the open quote, or 0 */
    bool in_word;
};

/* A backslash keeps the next character: any one outside quotes, " and \ in double quotes. */
static bool escaped(const struct split *sp, const char *s)
{
    if (s[0] != '\\' || sp->quote == '\'') return false;
    return sp->quote ? s[1] == '"' || s[1] == '\\' : s[1] != '\0';
}

/* Takes the character at *p (and the one a backslash keeps); true when it ends a word. */
static bool split_step(struct split *sp, const char **p)
{
    const char *s = (*p)++;
    if (escaped(sp, s)) {
        sp->word[sp->n++] = s[1];
        sp->in_word = true;
        (*p)++;
    } else if (sp->quote) {
        if (*s == sp->quote)
            sp->quote = 0;
        else
            sp->word[sp->n++] = *s;
    } else if (*s == ' ' || *s == '\t' || *s == '\n') {
        bool end = sp->in_word;
        sp->in_word = false;
        return end;
    } else {
        sp->in_word = true;
        if (*s == '\'' || *s == '"')
            sp->quote = *s;
        else
            sp->word[sp->n++] = *s;
    }
    return false;
}

static int push_word(struct split *sp, json_t *argv)
{
    json_t *s = json_stringn(sp->word, sp->n);
    sp->n = 0;
    return s && json_array_append_new(argv, s) == 0 ? 0 : -ENOMEM;
}

/* CMD of NAME=CMD into argv: blanks split, quotes group; no shell. */
static int split_command(const char *cmd, const char *server, const char *line, json_t *argv)
{
    struct split sp = {.word = malloc(strlen(line) + 1)};
    int r = sp.word ? 0 : cli_error("out of memory");
    for (const char *p = line; r == 0 && *p;)
        if (split_step(&sp, &p)) r = push_word(&sp, argv);
    if (r == 0 && sp.in_word) r = push_word(&sp, argv);
    if (r < 0) r = cli_usage_error(cmd, "bad SERVER '%s': not UTF-8 text", server);
    if (r == 0 && sp.quote)
        r = cli_usage_error(cmd, "bad SERVER '%s': the %c quote is not closed", server, sp.quote);
    if (r == 0 && json_array_size(argv) == 0)
        r = cli_usage_error(cmd,
                            "bad SERVER '%s': no command after '=', e.g. "
                            "tickets='python3 /workspace/tickets_server.py'",
                            server);
    free(sp.word);
    return r;
}

/* {name, command[]} from NAME=CMD. */
static int own_server(const char *cmd, const char *s, size_t n, json_t **out)
{
    json_t *argv = json_array(), *name = json_stringn(s, n);
    *out = json_object();
    int r = argv && *out ? 0 : cli_error("out of memory");
    if (r == 0 && !name) r = cli_usage_error(cmd, "bad SERVER '%s': not UTF-8 text", s);
    if (r == 0) r = split_command(cmd, s, s + n + 1, argv);
    if (r == 0) {
        json_object_set(*out, "name", name);
        json_object_set(*out, "command", argv);
    }
    json_decref(name);
    json_decref(argv);
    return r;
}

/* Appends the server a SERVER argument names: {id} for a catalog id, {name, command} for
 * NAME=CMD. */
static int add_server(const char *cmd, const char *s, json_t *list)
{
    const char *eq = strchr(s, '=');
    size_t n = eq ? (size_t)(eq - s) : strlen(s);
    json_t *srv = NULL;
    if (n == 0 || strcspn(s, " \t\n") < n)
        return cli_usage_error(cmd,
                               "bad SERVER '%s': expected a catalog id, or NAME=CMD for your "
                               "own server, e.g. tickets='python3 /workspace/tickets_server.py'",
                               s);
    if (find_server(list, s, n))
        return cli_usage_error(cmd, "server '%.*s' is given twice", (int)n, s);
    int r = 0;
    if (eq)
        r = own_server(cmd, s, n, &srv);
    else if (!(srv = json_pack("{s:s}", "id", s)))
        r = cli_usage_error(cmd, "bad SERVER '%s': not UTF-8 text", s);
    if (r == 0) json_array_append(list, srv);
    json_decref(srv);
    return r;
}

/* --secret SERVER.ENV=SECRET; SERVER is the longest server name before a '.', as names may
 * have dots. */
static int add_secret(const char *cmd, json_t *list, const char *val)
{
    json_t *srv = NULL, *secrets;
    const char *dot = NULL, *eq;
    for (const char *d = strchr(val, '.'); d; d = strchr(d + 1, '.')) {
        json_t *s = find_server(list, val, (size_t)(d - val));
        if (s) srv = s, dot = d;
    }
    if (!srv)
        return cli_usage_error(cmd,
                               "bad value '%s' for --secret: expected SERVER.ENV=SECRET, "
                               "SERVER one of the servers to start",
                               val);
    eq = strchr(dot + 1, '=');
    if (!eq || eq == dot + 1 || !eq[1])
        return cli_usage_error(cmd,
                               "bad value '%s' for --secret: expected SERVER.ENV=SECRET, e.g. "
                               "github.GITHUB_PERSONAL_ACCESS_TOKEN=MY_GITHUB_TOKEN",
                               val);
    if (!(secrets = json_object_get(srv, "secrets")))
        json_object_set_new(srv, "secrets", secrets = json_object());
    return parse_kv_into(cmd, "secret", dot + 1, secrets);
}

/* --fingerprint SERVER=HASH: the 16 hex digits 'runtime mcp fingerprint' prints, or all 64. */
static int set_fingerprint(const char *cmd, json_t *list, const char *val)
{
    const char *eq = strchr(val, '=');
    json_t *srv = eq ? find_server(list, val, (size_t)(eq - val)) : NULL;
    char hash[65];
    if (!srv)
        return cli_usage_error(cmd,
                               "bad value '%s' for --fingerprint: expected SERVER=HASH, "
                               "SERVER one of the servers to start",
                               val);
    size_t n = strlen(eq + 1);
    if ((n != 16 && n != 64) || strspn(eq + 1, "0123456789abcdefABCDEF") != n)
        return cli_usage_error(cmd,
                               "bad HASH in --fingerprint %s: expected the 16 hex digits "
                               "that 'runtime mcp fingerprint' prints",
                               val);
    if (json_object_get(srv, "fingerprint"))
        return cli_usage_error(cmd, "--fingerprint is given twice for server '%s'",
                               server_key(srv));
    for (size_t i = 0; i <= n; i++)
        hash[i] = (char)tolower((unsigned char)eq[1 + i]);
    json_object_set_new(srv, "fingerprint", json_string(hash));
    return 0;
}

/* --tools SERVER=a,b: the only tools of SERVER that clients may see and call. */
static int set_tools(const char *cmd, json_t *list, const char *val)
{
    const char *eq = strchr(val, '=');
    json_t *srv = eq ? find_server(list, val, (size_t)(eq - val)) : NULL;
    if (!srv || !eq[1])
        return cli_usage_error(cmd,
                               "bad value '%s' for --tools: expected SERVER=TOOL[,TOOL...], "
                               "SERVER one of the servers to start",
                               val);
    if (json_object_get(srv, "tools"))
        return cli_usage_error(cmd, "--tools is given twice for server '%s'", server_key(srv));
    json_t *tools = json_array();
    for (const char *p = eq + 1; *p;) {
        size_t n = strcspn(p, ",");
        if (n == 0) {
            json_decref(tools);
            return cli_usage_error(cmd, "an empty tool name in --tools %s", val);
        }
        json_array_append_new(tools, json_stringn(p, n));
        p += n + (p[n] == ',');
    }
    json_object_set_new(srv, "tools", tools);
    return 0;
}

static int build_start(const struct mcp *m, json_t *list, json_int_t *wait)
{
    const char *cmd = form_cmd[F_START];
    int r = 0;
    for (size_t i = 2; r == 0 && i < m->nwords; i++)
        r = add_server(cmd, m->words[i], list);
    for (size_t i = 0; r == 0 && i < m->nopts; i++) {
        const struct item *o = &m->opts[i];
        if (o->id == M_SECRET)
            r = add_secret(cmd, list, o->val);
        else if (o->id == M_FINGERPRINT)
            r = set_fingerprint(cmd, list, o->val);
        else if (o->id == M_TOOLS)
            r = set_tools(cmd, list, o->val);
        else
            r = parse_count(cmd, "wait", o->val, wait);
    }
    return r;
}

/* ---- output ---- */

/* The string member key of obj, cleaned for a terminal; "-" when missing or empty. */
static void str_cell(json_t *obj, const char *key, char *out, size_t size)
{
    const char *s = json_string_value(json_object_get(obj, key));
    snprintf(out, size, "%s", s && *s ? s : "-");
    show_clean(out);
}

/* "A,[B]": the variables of a catalog entry's secret settings, optional ones in brackets. */
static void secrets_text(json_t *settings, char *out, size_t size)
{
    size_t i, n = 0;
    json_t *s;
    out[0] = '\0';
    json_array_foreach(settings, i, s)
    {
        const char *env = json_string_value(json_object_get(s, "env"));
        if (!env || !json_is_true(json_object_get(s, "secret"))) continue;
        bool opt = !json_is_true(json_object_get(s, "required"));
        int w = snprintf(out + n, size - n, "%s%s%s%s", n ? "," : "", opt ? "[" : "", env,
                         opt ? "]" : "");
        if (w < 0 || (size_t)w >= size - n) break;
        n += (size_t)w;
    }
    if (!out[0]) snprintf(out, size, "-");
    show_clean(out);
}

static void catalog_cell(json_t *e, int col, char *out, size_t size)
{
    static const char *const keys[] = {"id", "version", "license"};
    if (col < 3)
        str_cell(e, keys[col], out, size);
    else
        secrets_text(json_object_get(e, "settings"), out, size);
}

static void catalog_table(json_t *list)
{
    static const char *const heads[] = {"ID", "VERSION", "LICENSE", "SECRETS"};
    cli_table_print(&(struct cli_table){heads, 4, catalog_cell, NULL}, list);
}

static void status_cell(json_t *srv, int col, char *out, size_t size)
{
    static const char *const keys[] = {"name", "phase", "url"}; /* the finer word */
    str_cell(srv, keys[col], out, size);
}

/* Text from the daemon (or from a server's stderr) on one cleaned line. */
static void print_text_line(const char *label, json_t *v)
{
    char *dump = json_is_string(v) ? NULL : json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    printf("  %s: ", label);
    print_clean(stdout, json_is_string(v) ? json_string_value(v) : dump ? dump : "?", 2000);
    putchar('\n');
    free(dump);
}

/* "  tools: a, b (fingerprint F)", then warnings and the error. */
static void status_under(json_t *srv)
{
    json_t *tools = json_object_get(srv, "tools"), *v;
    const char *fp = json_string_value(json_object_get(srv, "fingerprint"));
    size_t i;
    if (json_array_size(tools)) {
        fputs("  tools: ", stdout);
        json_array_foreach(tools, i, v)
        {
            fputs(i ? ", " : "", stdout);
            print_clean(stdout, json_string_value(v) ?: "?", 200);
        }
        if (fp) fputs(" (fingerprint ", stdout), print_clean(stdout, fp, 64), putchar(')');
        putchar('\n');
    }
    json_array_foreach(json_object_get(srv, "warnings"), i, v) print_text_line("warning", v);
    v = json_object_get(srv, "error");
    if (v && !json_is_null(v)) print_text_line("error", v);
}

/* s as one word for a POSIX shell: bare when nothing in it is special, else in single
 * quotes. Control characters become '?': this goes to a terminal. */
static void print_word(const char *s)
{
    static const char safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                               "-_./:@%+=,";
    if (*s && strspn(s, safe) == strlen(s)) {
        fputs(s, stdout);
        return;
    }
    putchar('\'');
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '\'')
            fputs("'\\''", stdout);
        else
            putchar(ch < 0x20 || ch == 0x7f ? '?' : ch);
    }
    putchar('\'');
}

/* claude mcp add --transport http NAME URL --header "Authorization: Bearer TOKEN" */
static void print_claude_line(json_t *srv, const char *auth)
{
    const char *name = json_string_value(json_object_get(srv, "name"));
    const char *url = json_string_value(json_object_get(srv, "url"));
    if (!name || !url) return;
    fputs("claude mcp add --transport http ", stdout);
    print_word(name);
    putchar(' ');
    print_word(url);
    if (auth && strcspn(auth, "\"$`\\!") == strlen(auth)) {
        fputs(" --header \"Authorization: ", stdout);
        print_clean(stdout, auth, 1000);
        putchar('"');
    } else if (auth) {
        char *h = NULL;
        if (asprintf(&h, "Authorization: %s", auth) >= 0)
            fputs(" --header ", stdout), print_word(h);
        free(h);
    }
    putchar('\n');
}

/* A server's state in runtimed's finer words (installing, starting, ready, failed,
 * refused, stopped): its phase; status is Runtime Cloud's coarser one. */
static const char *server_phase(json_t *srv)
{
    const char *phase = json_string_value(json_object_get(srv, "phase"));
    return phase ? phase : json_string_value(json_object_get(srv, "status"));
}

static bool busy_status(const char *status)
{
    return status && (strcmp(status, "installing") == 0 || strcmp(status, "starting") == 0);
}

static bool is_ready(json_t *srv)
{
    const char *status = server_phase(srv);
    return status && strcmp(status, "ready") == 0;
}

/* Instead of a line to paste, which would add a server that does not answer: a comment
 * with its status and message ("# memory is installing; ..."). */
static void print_not_ready(const char *sid, json_t *srv)
{
    const char *status = server_phase(srv);
    json_t *err = json_object_get(srv, "error");
    fputs("# ", stdout);
    print_clean(stdout, json_string_value(json_object_get(srv, "name")) ?: "?", 200);
    fputs(" is ", stdout);
    print_clean(stdout, status ? status : "in no known state", 40);
    if (status && busy_status(status)) {
        fputs("; 'runtime sandbox mcp ", stdout), print_clean(stdout, sid, 200);
        fputs("' prints its line once it is ready", stdout);
    } else {
        fputs(", so it has no line to paste", stdout);
        if (json_is_string(err))
            fputs(": ", stdout), print_clean(stdout, json_string_value(err), 2000);
    }
    putchar('\n');
}

/* The human form of GET .../mcp: the servers, the header, the lines to paste. */
static int print_state(const char *sid, json_t *ans)
{
    json_t *servers = json_object_get(ans, "servers"), *srv;
    const char *auth =
        json_string_value(json_object_get(json_object_get(ans, "headers"), "Authorization"));
    static const char *const heads[] = {"NAME", "STATUS", "URL"};
    size_t i;
    if (!json_is_array(servers))
        return cli_error("the daemon's answer has no list of MCP servers; is that runtimed?");
    if (json_array_size(servers))
        cli_table_print(&(struct cli_table){heads, 3, status_cell, status_under}, servers);
    else
        printf("no MCP servers in %s; start one with 'runtime sandbox mcp %s start SERVER'\n", sid,
               sid);
    if (auth) fputs("\nAuthorization: ", stdout), print_clean(stdout, auth, 1000), putchar('\n');
    if (json_array_size(servers)) putchar('\n');
    json_array_foreach(servers, i, srv)
    {
        if (is_ready(srv))
            print_claude_line(srv, auth);
        else
            print_not_ready(sid, srv);
    }
    return 0;
}

/* ---- the forms ---- */

static int show_state(json_t *answer, void *sid)
{
    return print_state(sid, answer);
}

static int show(struct cli *c, const char *sid, bool json)
{
    char *path = api_sandbox_path(sid, "/mcp");
    if (!path) return cli_error("out of memory");
    struct http_req req = {.method = "GET", .path = path, .sink_fd = -1};
    int r = api_show(c, &req, json, show_state, (void *)sid);
    free(path);
    return r;
}

/* The state of a started server in the answer: by name, else by catalog id. */
static json_t *find_state(json_t *ans, const char *key)
{
    json_t *list = json_object_get(ans, "servers"), *srv = find_server(list, key, strlen(key));
    size_t i;
    if (srv) return srv;
    json_array_foreach(list, i, srv)
    {
        const char *id = json_string_value(json_object_get(srv, "id"));
        if (id && strcmp(id, key) == 0) return srv;
    }
    return NULL;
}

static int server_error(const char *key, const char *what, json_t *err)
{
    fprintf(stderr, "runtime: MCP server %s %s", key, what);
    if (json_is_string(err)) fputs(": ", stderr), print_clean(stderr, json_string_value(err), 2000);
    fputc('\n', stderr);
    return EXIT_FAIL;
}

/* 0 when the server is ready (not waiting: on its way), else says why not. */
static int server_outcome(const char *sid, const char *key, json_t *st, json_int_t wait)
{
    const char *status = server_phase(st);
    json_t *err = json_object_get(st, "error");
    if (!st)
        return cli_error("the daemon's answer does not list the MCP server %s; see 'runtime "
                         "sandbox mcp %s'",
                         key, sid);
    if (!status)
        return cli_error("the daemon's answer has no status for the MCP server %s; see "
                         "'runtime sandbox mcp %s'",
                         key, sid);
    if (strcmp(status, "ready") == 0) return 0;
    if (strcmp(status, "installing") == 0 || strcmp(status, "starting") == 0) {
        if (!wait) return 0;
        cli_error("MCP server %s is still %s after %lld seconds; see 'runtime sandbox mcp %s' "
                  "later, or wait longer with --wait SECONDS",
                  key, status, (long long)wait, sid);
        return EXIT_TIMEOUT;
    }
    if (strcmp(status, "failed") == 0) return server_error(key, "failed", err);
    if (strcmp(status, "refused") == 0)
        return server_error(key, "was refused, its tools are not the reviewed ones", err);
    char what[64];
    snprintf(what, sizeof what, "is %s", status);
    show_clean(what);
    return server_error(key, what, err);
}

/* The exit status of start: a failure beats a timeout. */
static int outcome(const char *sid, json_t *started, json_t *ans, json_int_t wait)
{
    size_t i;
    json_t *srv;
    int r = 0;
    json_array_foreach(started, i, srv)
    {
        int o = server_outcome(sid, server_key(srv), find_state(ans, server_key(srv)), wait);
        if (o == EXIT_FAIL || (o && !r)) r = o;
    }
    return r;
}

/* GET .../mcp?wait=SECONDS: the daemon answers once none is installing or starting, or
 * after SECONDS. */
static int wait_state(struct cli *c, const char *sid, json_int_t wait, json_t **ans)
{
    char suffix[64];
    snprintf(suffix, sizeof suffix, "/mcp?wait=%lld", (long long)wait);
    char *path = api_sandbox_path(sid, suffix);
    int r = path ? cli_call_json(c, "GET", path, NULL, ans) : cli_error("out of memory");
    free(path);
    return r;
}

/* ---- progress while waiting ----
 *
 * Each phase of a started server is a line on stderr, from the sandbox's events (so that
 * none is missed, however quick): installing NAME (npm PACKAGE VERSION)..., installed NAME
 * (npm, 12.3 s), starting NAME..., NAME ready, NAME failed, NAME refused. While one
 * installs or starts, the state (asked for with ?wait=1, a second at a time) adds a line
 * every PROGRESS_EVERY_S seconds: installing NAME (npm, 20 s)... */

#define PROGRESS_EVERY_S 10
#define EVENTS_PAGE 1000 /* the most events the daemon answers at once */

struct progress {
    json_t *started;  /* the servers of the start request */
    json_int_t after; /* the last event seen */
    json_int_t *said; /* per started server: statusSeconds of its last line */
};

static int events_after(struct cli *c, const char *sid, json_int_t after, json_t **page)
{
    char suffix[64];
    snprintf(suffix, sizeof suffix, "/events?after=%lld", (long long)after);
    char *path = api_sandbox_path(sid, suffix);
    int r = path ? cli_call_json(c, "GET", path, NULL, page) : cli_error("out of memory");
    free(path);
    if (r == 0 && !json_is_array(*page))
        r = cli_error("the daemon's answer is not a list of events; is that runtimed?");
    return r;
}

/* The seq of the sandbox's last event, so that only those of this start are shown. */
static int events_mark(struct cli *c, const char *sid, json_int_t *mark)
{
    size_t n = EVENTS_PAGE;
    int r = 0;
    for (int i = 0; r == 0 && n == EVENTS_PAGE && i < 100; i++) {
        json_t *page = NULL;
        r = events_after(c, sid, *mark, &page);
        n = json_array_size(page);
        if (n) *mark = json_integer_value(json_object_get(json_array_get(page, n - 1), "seq"));
        json_decref(page);
    }
    return r;
}

/* "BEFORE NAME AFTER" on stderr, the name cleaned for a terminal. */
static void say(const char *before, const char *name, const char *after)
{
    char clean[200];
    snprintf(clean, sizeof clean, "%s", name);
    show_clean(clean);
    fprintf(stderr, "%s%s%s\n", before, clean, after);
}

/* "npm PACKAGE VERSION" of an mcp.installing event, "npm, 12.3 s" of mcp.installed. */
static void package_of(json_t *ev, bool installed, char *out, size_t size)
{
    const char *mgr = json_string_value(json_object_get(ev, "manager"));
    const char *pkg = json_string_value(json_object_get(ev, "package"));
    const char *ver = json_string_value(json_object_get(ev, "version"));
    if (installed)
        snprintf(out, size, "%s, %.1f s", mgr ? mgr : "?",
                 json_number_value(json_object_get(ev, "seconds")));
    else
        snprintf(out, size, "%s %s %s", mgr ? mgr : "?", pkg ? pkg : "?", ver ? ver : "?");
    show_clean(out);
}

static void phase_line(json_t *ev, const char *name)
{
    const char *kind = json_string_value(json_object_get(ev, "kind"));
    char pkg[600], after[700];
    bool installed = strcmp(kind, "mcp.installed") == 0;
    if (installed || strcmp(kind, "mcp.installing") == 0) {
        package_of(ev, installed, pkg, sizeof pkg);
        snprintf(after, sizeof after, " (%s)%s", pkg, installed ? "" : "...");
        say(installed ? "installed " : "installing ", name, after);
    } else if (strcmp(kind, "mcp.starting") == 0) {
        say("starting ", name, "...");
    } else if (strcmp(kind, "mcp.ready") == 0 || strcmp(kind, "mcp.failed") == 0 ||
               strcmp(kind, "mcp.refused") == 0) {
        snprintf(after, sizeof after, " %s", kind + 4);
        say("", name, after);
    }
}

/* The phase lines of one page of events; its size. */
static size_t show_page(json_t *page, struct progress *p)
{
    size_t i, k;
    json_t *ev, *srv;
    json_array_foreach(page, i, ev)
    {
        const char *kind = json_string_value(json_object_get(ev, "kind"));
        const char *name = json_string_value(json_object_get(ev, "server"));
        p->after = json_integer_value(json_object_get(ev, "seq"));
        if (!kind || !name || strncmp(kind, "mcp.", 4) != 0) continue;
        json_array_foreach(p->started, k, srv) if (strcmp(server_key(srv), name) == 0)
        {
            phase_line(ev, name);
            p->said[k] = 0;
        }
    }
    return json_array_size(page);
}

/* The phase lines of the events since the last look (a busy sandbox may have pages of
 * other events: at most 100 pages a look). */
static int show_phases(struct cli *c, const char *sid, struct progress *p)
{
    size_t n = EVENTS_PAGE;
    int r = 0;
    for (int i = 0; r == 0 && n == EVENTS_PAGE && i < 100; i++) {
        json_t *page = NULL;
        r = events_after(c, sid, p->after, &page);
        n = r == 0 ? show_page(page, p) : 0;
        json_decref(page);
    }
    return r;
}

/* Every PROGRESS_EVERY_S seconds of a phase: "installing NAME (npm, 20 s)...". Whether any
 * started server is still installing or starting. */
static bool show_waiting(json_t *ans, struct progress *p)
{
    size_t i;
    json_t *srv;
    bool busy = false;
    json_array_foreach(p->started, i, srv)
    {
        json_t *st = find_state(ans, server_key(srv));
        const char *status = server_phase(st);
        json_int_t secs = json_integer_value(json_object_get(st, "statusSeconds"));
        const char *mgr =
            json_string_value(json_object_get(json_object_get(st, "package"), "manager"));
        if (!busy_status(status)) continue;
        busy = true;
        if (secs < p->said[i] + PROGRESS_EVERY_S) continue;
        p->said[i] = secs - secs % PROGRESS_EVERY_S;
        char before[32], after[64];
        snprintf(before, sizeof before, "%s ", status);
        snprintf(after, sizeof after, " (%s%s%lld s)...", mgr ? mgr : "", mgr ? ", " : "",
                 (long long)p->said[i]);
        show_clean(after);
        say(before, server_key(srv), after);
    }
    return busy;
}

/* Waits up to wait seconds for the started servers, saying how each one gets on; *ans is
 * the last state. */
static int wait_progress(struct cli *c, const char *sid, struct progress *p, json_int_t wait,
                         json_t **ans)
{
    uint64_t deadline = now_ms() + (uint64_t)wait * 1000;
    int r = 0;
    for (bool busy = true; r == 0 && busy;) {
        json_decref(*ans);
        *ans = NULL;
        r = wait_state(c, sid, 1, ans);
        if (r == 0) r = show_phases(c, sid, p); /* after the state: its events are there */
        if (r == 0) busy = show_waiting(*ans, p) && now_ms() < deadline;
    }
    return r;
}

static int start(struct cli *c, const struct mcp *m)
{
    const char *sid = m->words[0];
    json_int_t wait = DEFAULT_WAIT;
    json_t *servers = json_array(), *body = json_object(), *ans = NULL;
    char *path = api_sandbox_path(sid, "/mcp");
    int r = servers && body && path ? build_start(m, servers, &wait) : cli_error("out of memory");
    struct progress prog = {.started = servers, .said = calloc(m->nwords, sizeof *prog.said)};
    if (r == 0 && !prog.said) r = cli_error("out of memory");
    if (r == 0) json_object_set(body, "servers", servers);
    if (r == 0 && wait) r = events_mark(c, sid, &prog.after);
    /* The 202 answer is the state at once: with --wait 0 that is what to show. */
    if (r == 0) r = cli_call_json(c, "POST", path, body, &ans);
    if (r == 0 && wait) r = wait_progress(c, sid, &prog, wait, &ans);
    if (r == 0) r = print_state(sid, ans);
    if (r == 0) fflush(stdout), r = outcome(sid, servers, ans, wait);
    free(prog.said);
    free(path);
    json_decref(ans);
    json_decref(body);
    json_decref(servers);
    return r;
}

static int stop(struct cli *c, const char *sid, const char *name)
{
    char *enc, *suffix = NULL, *path = NULL;
    if (strchr(name, '='))
        return cli_usage_error(form_cmd[F_STOP], "give the server's NAME, not NAME=CMD");
    if ((enc = url_encode(name, NULL)) && asprintf(&suffix, "/mcp/%s", enc) >= 0)
        path = api_sandbox_path(sid, suffix);
    int r = path ? cli_call_json(c, "DELETE", path, NULL, NULL) : cli_error("out of memory");
    if (r == 0) printf("MCP server %s stopped\n", name);
    free(path);
    free(suffix);
    free(enc);
    return r;
}

/* The body goes to stdout as it comes: with --follow, until interrupted. */
static int logs(struct cli *c, const char *sid, const char *name, bool follow)
{
    char *enc = url_encode(name, NULL), *suffix = NULL, *path = NULL;
    if (enc && asprintf(&suffix, "/mcp/%s/logs%s", enc, follow ? "?follow=1" : "") >= 0)
        path = api_sandbox_path(sid, suffix);
    struct http_req req = {.method = "GET", .path = path, .sink_fd = 1};
    struct http_resp resp = {0};
    int r = path ? api_call(c, &req, &resp) : cli_error("out of memory");
    http_resp_free(&resp);
    free(path);
    free(suffix);
    free(enc);
    return r;
}

static int run_form(struct cli *c, const struct mcp *m)
{
    enum form f = form_of(m);
    int r = check_words(m, f);
    if (r == 0) r = check_opts(m, f);
    if (r) return r;
    if (f == F_CATALOG)
        return api_print_list(c, "/v1/mcp/catalog", has_opt(m, M_JSON), catalog_table,
                              "catalog entries");
    if (f == F_SHOW) return show(c, m->words[0], has_opt(m, M_JSON));
    if (f == F_START) return start(c, m);
    if (f == F_LOGS) return logs(c, m->words[0], m->words[2], has_opt(m, M_FOLLOW));
    return stop(c, m->words[0], m->words[2]);
}

int cmd_sandbox_mcp(struct cli *c, int argc, char **argv)
{
    struct args a;
    if (argc == 0) return fputs(mcp_usage, stderr), EXIT_USAGE;
    if (argc == 1 && strcmp(argv[0], "help") == 0) return fputs(mcp_usage, stdout), EXIT_OK;
    /* Each argument is at most one word or one option. */
    struct mcp m = {.words = calloc((size_t)argc, sizeof *m.words),
                    .opts = calloc((size_t)argc, sizeof *m.opts)};
    args_init(&a, argc, argv, "sandbox mcp", specs);
    int r = m.words && m.opts ? scan(&a, &m) : cli_error("out of memory");
    if (r == 0) r = run_form(c, &m);
    free(m.words);
    free(m.opts);
    return r < 0 ? EXIT_OK : r;
}
