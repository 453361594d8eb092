/* cli: the `runtime` command line client of the daemon's HTTP API. */
#ifndef RUNTIME_CLI_H
#define RUNTIME_CLI_H

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "../common/common.h"

/* Exit statuses of the client itself (a command run in a sandbox passes its own through). */
enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_TIMEOUT = 124 };

/* Where the daemon is and how to authenticate; filled from options and environment. */
struct cli {
    const char *api_url;   /* http(s)://host:port, or NULL to use the socket */
    const char *socket;    /* unix socket path when api_url is NULL */
    const char *state_dir; /* where admin.key lives */
    bool state_dir_given;  /* --state-dir on the command line beats RUNTIME_API_KEY */
    char key[512];         /* loaded on the first API call */
    char key_source[4200]; /* "RUNTIME_API_KEY" or the file it was read from */
};

/* ---- errors (main.c) ---- */
/* Prints "runtime: <msg>" on stderr and returns EXIT_FAIL. */
int cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "runtime: <msg>; see 'runtime <cmd> --help'" and returns EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- usage texts (usage.c) ---- */
/* Prints the usage of a command ("", "sandbox", "sandbox create", ...) to f; false if unknown. */
bool usage_print(const char *cmd, FILE *f);

/* ---- option scanning (args.c) ---- */
struct opt_spec {
    const char *name; /* long name without the dashes, e.g. "name" for --name */
    bool has_arg;
    int id; /* >= 0, returned by args_next */
};
enum { ARG_END = -1, ARG_POS = -2, ARG_REST = -3, ARG_HELP = -4, ARG_BAD = -5 };
struct args {
    int argc;
    char **argv;
    int i;                       /* next argument to look at */
    const char *cmd;             /* command name for messages, e.g. "sandbox create" */
    const struct opt_spec *opts; /* terminated by a NULL name */
    const struct opt_spec *more; /* a second table (run = its own + create's), or NULL */
    const char *val;             /* option value or positional argument */
};
void args_init(struct args *a, int argc, char **argv, const char *cmd, const struct opt_spec *opts);
/* Next option id, or ARG_POS (a->val), ARG_REST (a->i is after "--"), ARG_END, ARG_HELP,
 * ARG_BAD (usage error already printed). */
int args_next(struct args *a);
/* Parsers for option values; they print a usage error and return EXIT_USAGE when bad. */
int parse_count(const char *cmd, const char *opt, const char *s, json_int_t *out);
int parse_decimal(const char *cmd, const char *opt, const char *s, double *out);
int parse_kv_into(const char *cmd, const char *opt, const char *s, json_t *obj);

/* ---- connection (conn.c) ---- */
void conn_defaults(struct cli *c);
/* Human description of where the daemon is expected ("/run/runtime/api.sock" or the URL). */
const char *conn_where(const struct cli *c);
/* Loads the API key into c->key once; prints an error saying where it looked on failure. */
int conn_load_key(struct cli *c);

/* ---- the saved connection of a login (saved.c; docs/login.md) ---- */
/* The auth origin the official SDKs assume when RUNTIME_AUTH_URL is not set: the
 * saved file is named for it, so that they find it. */
#define SAVED_DEFAULT_AUTH "https://withruntime.com"
/* scheme://host[:port] of an http(s) URL as the official SDKs normalise it (lower
 * case, no path, the scheme's own port dropped); -EINVAL for another. */
int saved_origin(const char *url, char *out, size_t size);
/* The API origin (c->api_url's) and the auth origin (RUNTIME_AUTH_URL's, else
 * SAVED_DEFAULT_AUTH); -EINVAL without an API URL. */
int saved_origins(const struct cli *c, char *api, char *auth, size_t size);
/* "<sha256hex(auth "\n" api)>.json" */
void saved_name(const char *auth, const char *api, char out[65 + 5]);
/* ${XDG_CONFIG_HOME:-$HOME/.config}/runtime-cloud */
int saved_dir(char *out, size_t size);
/* Reads dir/name if both are private to this user (no link, mode 0700/0600 or
 * less, owned, a regular file of at most 4096 bytes). */
int saved_read(const char *dir, const char *name, char *buf, size_t size);
/* Writes it 0600 through a temporary file, fsync and rename (dir made 0700). */
int saved_write(const char *dir, const char *name, const char *text);
int saved_remove(const char *dir, const char *name);
/* The saved key for c's API origin (a login's key, saved for that origin). */
int saved_key(const struct cli *c, char *key, size_t size);
/* ^rtcloud_[a-f0-9-]{36}_[A-Za-z0-9_-]{43}$ */
bool login_key_ok(const char *s);

/* ---- HTTP transport (http.c) ---- */
struct http_req {
    const char *method;
    const char *path; /* "/v1/...", already URL-encoded */
    const char *content_type;
    const char *body; /* may be NULL */
    size_t body_len;
    int sink_fd;          /* >= 0: a 2xx answer's body is written here instead of collected */
    bool interruptible;   /* abort when a signal set http_interrupted */
    bool quiet_interrupt; /* ... and say nothing: the caller takes a signal as the way out */
    long accept_status;   /* a non-2xx status api_call hands back rather than reports, or 0 */
};
struct http_resp {
    long status;
    char *body; /* NUL-terminated, malloc'd; NULL when empty or sent to sink_fd */
    size_t len;
    int file_mode; /* the X-File-Mode header of a file GET, or -1 */
};
void http_global_init(void);
/* 0, or prints why the daemon could not be reached and returns EXIT_FAIL. */
int http_do(struct cli *c, const struct http_req *req, struct http_resp *resp);
void http_resp_free(struct http_resp *r);
/* Signal handling for commands that must clean up (sandbox run). */
extern volatile sig_atomic_t http_interrupted; /* signal number, 0 if none */
void http_catch_signals(void);
void http_default_signals(void);

/* ---- API calls (api.c) ---- */
/* Sends the request with the key; non-2xx answers (but req->accept_status) print the API's
 * error and return EXIT_FAIL. */
int api_call(struct cli *c, const struct http_req *req, struct http_resp *resp);
/* JSON in, JSON out: *out is the parsed answer (NULL for an empty body). */
int cli_call_json(struct cli *c, const char *method, const char *path, json_t *body, json_t **out);
/* GET /v1/sandboxes/{id or name}: 0 and the sandbox (an object), or EXIT_FAIL. */
int api_get_sandbox(struct cli *c, const char *id, json_t **sb);
/* "/v1/sandboxes/<encoded id><suffix>"; malloc'd. */
char *api_sandbox_path(const char *id, const char *suffix);
/* Percent-encodes s, keeping unreserved characters and those in keep; malloc'd. */
char *url_encode(const char *s, const char *keep);
/* Prints at most max bytes of s with control characters as spaces: the daemon's text goes to
 * a terminal, on one line and without escape sequences. */
void print_clean(FILE *f, const char *s, size_t max);
/* Prints the body as received, with a final newline. */
void print_raw_json(const struct http_resp *r);
/* Sends req; --json prints the answer as received, else show() prints the parsed answer and
 * returns 0, or EXIT_FAIL having said why it cannot. */
int api_show(struct cli *c, const struct http_req *req, bool json,
             int (*show)(json_t *answer, void *arg), void *arg);
/* GETs a list: --json prints it as received, else table() prints it; what
 * names the items for the error when the answer is not a list. */
/* A table of a JSON list: a column per head, cell fills a row's text for a column
 * (cleaned of terminal escapes by the caller), under (may be NULL) prints lines
 * under a row. Widths are the widest cell of each column. */
#define CLI_TABLE_COLS_MAX 8
struct cli_table {
    const char *const *heads;
    int cols;
    void (*cell)(json_t *row, int col, char *out, size_t size);
    void (*under)(json_t *row);
};
void cli_table_print(const struct cli_table *t, json_t *list); /* show.c */

int api_print_list(struct cli *c, const char *path, bool json, void (*table)(json_t *list),
                   const char *what);
/* A `... list [--json]` command: its options parsed, then api_print_list. */
int api_list_command(struct cli *c, int argc, char **argv, const char *cmd, const char *path,
                     void (*table)(json_t *list), const char *what);
int parse_json_body(const struct http_resp *r, json_t **out);

/* ---- commands ---- */
int cmd_sandbox(struct cli *c, int argc, char **argv);         /* sandbox.c */
int cmd_sandbox_create(struct cli *c, int argc, char **argv);  /* create.c */
int cmd_sandbox_run(struct cli *c, int argc, char **argv);     /* run.c */
int cmd_sandbox_exec(struct cli *c, int argc, char **argv);    /* exec.c */
int cmd_sandbox_cp(struct cli *c, int argc, char **argv);      /* cp.c */
int cmd_sandbox_network(struct cli *c, int argc, char **argv); /* network.c */
int cmd_sandbox_events(struct cli *c, int argc, char **argv);  /* events.c */
int cmd_sandbox_mcp(struct cli *c, int argc, char **argv);     /* sandbox_mcp.c */
int cmd_secret(struct cli *c, int argc, char **argv);          /* secret.c */
int cmd_secret_set(struct cli *c, int argc, char **argv);      /* secret_set.c */
int cmd_mcp(struct cli *c, int argc, char **argv);             /* mcp.c */
int cmd_usage(struct cli *c, int argc, char **argv);           /* usage_cmd.c */
int cmd_account(struct cli *c, int argc, char **argv);         /* account.c */
int cmd_login(struct cli *c, int argc, char **argv);           /* login.c */
int cmd_logout(struct cli *c, int argc, char **argv);          /* login.c */

/* sandbox_mcp.c: the usage of "sandbox mcp", "sandbox mcp catalog", "sandbox mcp ID start" and
 * "sandbox mcp ID stop"; NULL for another command. */
const char *sandbox_mcp_usage(const char *cmd);

/* create.c: the options `sandbox create` and `sandbox run` share. */
extern const struct opt_spec create_opt_specs[];
enum { CREATE_OPT_FIRST = 100, CREATE_OPT_LAST = 120 };
/* Applies create option id with value val to the POST /v1/sandboxes body. */
int create_apply(const char *cmd, json_t *body, int id, const char *val);
/* POSTs the body; returns 0 and the new sandbox's id (malloc'd) or EXIT_FAIL. */
int cli_create_sandbox(struct cli *c, json_t *body, char **id);

/* exec.c: shared by exec and run. */
enum { EXEC_ENV = 200, EXEC_CWD, EXEC_TIMEOUT };
struct exec_opts {
    json_t *body;       /* the exec request being built: env, cwd, timeoutMs */
    double timeout_s;   /* for the timed-out message; 0: the API's default */
    bool interruptible; /* a signal aborts the call (run deletes the sandbox then) */
};
/* Applies EXEC_* option id. */
int exec_apply(const char *cmd, struct exec_opts *o, int id, const char *val);
/* Sends argv (and stdin unless a terminal), prints the output; returns the command's exit
 * status, 124 when it timed out, or EXIT_FAIL having printed why. */
int exec_in(struct cli *c, const char *sid, struct exec_opts *o, int argc, char **argv);

/* io.c */
/* Reads fd to its end into a NUL-terminated malloc'd buffer; -EFBIG beyond max bytes. */
int read_fd_all(int fd, size_t max, char **out, size_t *len);
struct tmpfile {
    char target[4096];
    char tmp[4200];
    int fd;
};
/* A temporary file next to target; tmpfile_finish renames it over target (with mode, or
 * 0666 less the umask when mode is -1) or removes it. */
int tmpfile_open(struct tmpfile *t, const char *target);
int tmpfile_finish(struct tmpfile *t, bool keep, int mode);

/* secret.c */
/* "a, b" of a secret's hosts, methods or paths, "any" when none; cleaned for a terminal. */
void secret_rules_text(json_t *list, const char *sep, char *out, size_t size);
/* "GET /repos/x | any /issues" of a secret's rules, "any" when none; cleaned. */
void secret_rules_show(json_t *rules, char *out, size_t size);
/* "/v1/egress-secrets/<encoded name>"; malloc'd. */
char *secret_path(const char *name);

/* secret_value.c: a secret's value, read without echo and wiped after use. */
struct secret_value {
    char *buf; /* mlock'd when possible; NULL until read */
    size_t len;
    size_t cap;
};
/* Reads the value of secret name from the environment variable env (when not NULL) or
 * stdin: to its end, one trailing "\n" or "\r\n" removed; on a terminal one line without
 * echo after a prompt on stderr. Prints why on failure (never the value) and returns
 * EXIT_FAIL. */
int secret_value_read(const char *name, const char *env, struct secret_value *v);
/* Wipes and frees the value. */
void secret_value_wipe(struct secret_value *v);

/* show.c */
void show_table(json_t *list);
void show_sandbox(json_t *sb);
/* "5 minutes ago" from an RFC 3339 UTC time; the text itself when it is not one. */
void show_age(json_t *v, char *out, size_t size);
/* Replaces control characters with '?': names and labels are other people's text. */
void show_clean(char *s);

#endif
