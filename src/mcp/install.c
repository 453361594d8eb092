/* Installing a catalog server in its sandbox: the exact pinned version, install
 * scripts off (npm) or binary wheels only (pip), so no package code runs before the
 * server itself; meanwhile the sandbox's egress reaches only the package registry. */
#include <errno.h>
#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../egress/egress.h"
#include "../policy/policy.h"
#include "mcp_impl.h"

#define INSTALL_OUTPUT_CAP (64u << 10)
/* PyPI serves its files from a host of their own. */
#define PYPI_HOST "pypi.org"
#define PYPI_FILES_HOST "files.pythonhosted.org"

static bool is_python(const struct mcp_server *ms)
{
    return strcmp(json_string_value(json_object_get(ms->entry, "runtime")), "python") == 0;
}

/* ---- the sandbox's policy ---- */

static bool url_host(const char *url, char canon[POLICY_NAME_MAX]);

static int add_host(struct model_network *hosts, const char *host, err_t *err)
{
    return host && *host ? model_network_add(hosts, host, err) : 0;
}

static int add_catalog_hosts(struct model_network *hosts, const struct mcp_server *ms, err_t *err)
{
    size_t i;
    json_t *v;
    int r = 0;
    json_array_foreach(json_object_get(ms->entry, "egress"), i, v)
    {
        if (r == 0) r = add_host(hosts, json_string_value(v), err);
    }
    return r;
}

/* The pip index's host once known (nothing while the venv is made), and PyPI's file
 * host when the index is PyPI's. */
static int add_index_hosts(struct model_network *hosts, const char *index, err_t *err)
{
    char host[POLICY_NAME_MAX];
    if (!index[0] || !url_host(index, host)) return 0;
    int r = add_host(hosts, host, err);
    if (r == 0 && strcmp(host, PYPI_HOST) == 0) r = add_host(hosts, PYPI_FILES_HOST, err);
    return r;
}

static bool serving(const struct mcp_server *ms)
{
    return ms->entry && (ms->status == MCP_STARTING || ms->status == MCP_READY);
}

/* While installs run: their registries, and the hosts of servers starting or running. */
static int installing_hosts(const struct mcp_box *box, struct model_network *hosts, err_t *err)
{
    int r = 0;
    for (struct mcp_server *ms = box->servers; ms && r == 0; ms = ms->next) {
        if (ms->status == MCP_INSTALLING && is_python(ms))
            r = add_index_hosts(hosts, box->pip_index, err);
        else if (ms->status == MCP_INSTALLING)
            r = add_host(hosts, box->registry, err);
        else if (serving(ms))
            r = add_catalog_hosts(hosts, ms, err);
    }
    hosts->internet = hosts->allow.n > 0;
    return r;
}

/* Servers' hosts are allowed even with internet off or an empty allow list; the rest
 * as the sandbox says. */
static int serving_hosts(const struct mcp_box *box, const struct model_network *network,
                         struct model_network *hosts, err_t *err)
{
    int r = 0;
    for (struct mcp_server *ms = box ? box->servers : NULL; ms && r == 0; ms = ms->next)
        if (serving(ms)) r = add_catalog_hosts(hosts, ms, err);
    bool everything = network->internet && !network->listed;
    if (r == 0 && (hosts->allow.n == 0 || everything)) { /* the sandbox's own policy as it is */
        model_network_clear(hosts);
        return model_network_copy(hosts, network, err);
    }
    for (size_t i = 0; r == 0 && network->internet && i < network->allow.n; i++)
        r = add_host(hosts, network->allow.v[i], err);
    for (size_t i = 0; r == 0 && network->internet && i < network->connect.n; i++)
        r = add_host(hosts, network->connect.v[i], err);
    /* The sandbox's deny wins over its servers' hosts too. */
    for (size_t i = 0; r == 0 && i < network->deny.n; i++)
        r = model_hosts_add(&hosts->deny, network->deny.v[i], err);
    hosts->internet = true;
    hosts->listed = true;
    return r;
}

int mcp_policy(struct sbx *sb, const struct model_network *network, struct policy *out, err_t *err)
{
    struct model_network hosts = {0};
    struct mcp_box *box = mcp_box_of(sb);
    int r = box && box->installing > 0 ? installing_hosts(box, &hosts, err)
                                       : serving_hosts(box, network, &hosts, err);
    if (r == 0) r = model_network_policy(&hosts, out, err);
    model_network_clear(&hosts);
    return r;
}

void mcp_apply_policy(struct mcp_box *box)
{
    server_sandbox_apply_policy(box->srv, box->sb);
}

/* ---- the install ----
 *
 * node:    npm config get registry            (the registry npm there will use)
 *          npm install --ignore-scripts PKG@VERSION
 * python:  python3 -m venv DIR && DIR/bin/python -m pip config list   (the index)
 *          pip install --only-binary=:all: --require-hashes -r DIR/requirements.txt
 *          (the catalog's lock: every package pinned with the hash of its wheel)
 * Each step runs in the sandbox as the sandbox user; egress opens the registry or
 * index host only once the step that needs it starts. */

/* The line of the step's stderr that says what went wrong (npm's error, not the notices
 * it prints after it), and where the rest is. */
static void error_line(const struct mcp_server *ms, struct evbuffer *buf, char *out, size_t size)
{
    char line[500];
    size_t n = evbuffer_get_length(buf);
    text_error_line((const char *)evbuffer_pullup(buf, -1), n, line, sizeof line);
    for (char *p = line; *p; p++)
        if ((unsigned char)*p < 0x20) *p = ' ';
    snprintf(out, size, "%s%s(all its output: runtime sandbox mcp %s logs %s)", line,
             line[0] ? " " : "", sbx_id(ms->box->sb), ms->name);
}

static const char *entry_str(const struct mcp_server *ms, const char *key)
{
    return json_string_value(json_object_get(ms->entry, key));
}

static void install_ended(struct mcp_server *ms)
{
    ms->install = NULL;
    ms->box->installing--;
    mcp_apply_policy(ms->box);
}

static void install_failed(struct mcp_server *ms, const char *why)
{
    install_ended(ms);
    mcp_server_set_status(ms, MCP_FAILED, "cannot install %s %s: %s", entry_str(ms, "package"),
                          entry_str(ms, "version"), why);
}

/* The step's output goes to the server's log (`logs`), stdout then stderr, and a line for
 * how it ended; then on to the step's own callback. */
static void step_done(void *arg, const struct server_run_result *res)
{
    struct mcp_server *ms = arg;
    struct evbuffer *streams[] = {res->out, res->err};
    for (size_t i = 0; i < ARRAY_LEN(streams); i++) {
        size_t n = streams[i] ? evbuffer_get_length(streams[i]) : 0;
        if (n) mcp_log_write(ms, evbuffer_pullup(streams[i], -1), n);
    }
    if (res->error)
        mcp_log_printf(ms, "[runtime: the step could not start: %s]\n", res->error->msg);
    else if (res->timed_out)
        mcp_log_printf(ms, "[runtime: the step timed out]\n");
    else
        mcp_log_printf(ms, "[runtime: the step exited with status %d]\n", res->exit_code);
    ms->step_done(arg, res);
}

/* "$ ARGV..." in the log: what runs, as a terminal would show it. */
static void log_command(struct mcp_server *ms, const char *const *argv)
{
    mcp_log_write(ms, "$", 1);
    for (size_t i = 0; argv[i]; i++) {
        mcp_log_write(ms, " ", 1);
        mcp_log_write(ms, argv[i], strlen(argv[i]));
    }
    mcp_log_write(ms, "\n", 1);
}

/* Runs one step of an install in the sandbox; done gets its result. */
static void run_step(struct mcp_server *ms, const char *const *argv, const char *stdin_text,
                     uint32_t timeout_ms, server_run_done done)
{
    err_t err = {0};
    json_t *env = server_exec_env(ms->box->srv, ms->box->sb, NULL, &err);
    char **envp = NULL;
    int r = env ? server_env_list(env, &envp, &err) : -EIO;
    json_decref(env);
    struct server_run_spec rs = {.argv = argv,
                                 .envp = (const char *const *)envp,
                                 .cwd = "/workspace",
                                 .timeout_ms = timeout_ms,
                                 .stdin_text = stdin_text,
                                 .stdin_len = stdin_text ? strlen(stdin_text) : 0,
                                 .output_cap = INSTALL_OUTPUT_CAP};
    log_command(ms, argv);
    ms->step_done = done;
    if (r == 0) r = server_run(ms->box->srv, ms->box->sb, &rs, step_done, ms, &ms->install, &err);
    server_env_free(envp);
    if (r < 0) install_failed(ms, err.msg);
}

/* What the step printed, NUL-terminated (cut at size - 1 bytes). */
static void step_output(const struct server_run_result *res, char *out, size_t size)
{
    size_t n = evbuffer_copyout(res->out, out, size - 1);
    out[n] = '\0';
}

/* false (and the server failed) when the step did not exit 0. */
static bool step_ok(struct mcp_server *ms, const struct server_run_result *res, const char *what)
{
    if (!res->error && res->ended && res->exit_code == 0) return true;
    char why[900], out[700];
    error_line(ms, res->err, out, sizeof out);
    if (res->error)
        snprintf(why, sizeof why, "%s could not be started: %s", what, res->error->msg);
    else if (res->ended && res->exit_code == -1)
        snprintf(why, sizeof why, "%s is not installed on this host (%s)", what,
                 strerror(res->start_errno));
    else
        snprintf(why, sizeof why, "%s exited with status %d%s: %s", what, res->exit_code,
                 res->timed_out ? " (timed out)" : "", out);
    ms->install = NULL;
    install_failed(ms, why);
    return false;
}

static void on_installed(void *arg, const struct server_run_result *res)
{
    struct mcp_server *ms = arg;
    if (!step_ok(ms, res, is_python(ms) ? "pip" : "npm")) return;
    install_ended(ms);
    double seconds = mcp_status_seconds(ms);
    mcp_event(ms, "mcp.installed",
              json_pack("{s:s,s:s,s:s,s:f}", "manager", mcp_manager(ms), "package",
                        entry_str(ms, "package"), "version", entry_str(ms, "version"), "seconds",
                        seconds));
    mcp_log(ms, false, "installed %s %s with %s in %.1f s", entry_str(ms, "package"),
            entry_str(ms, "version"), mcp_manager(ms), seconds);
    ms->installed = true;
    mcp_box_save(ms->box);
    mcp_server_start(ms);
}

/* The host of a registry or index URL, canonical; false when there is none. */
static bool url_host(const char *url, char canon[POLICY_NAME_MAX])
{
    char host[256];
    const char *p = strstr(url, "://");
    str_copy(host, sizeof host, p ? p + 3 : url);
    host[strcspn(host, "/:\n\r '\"@")] = '\0';
    return p && policy_canon_name(host, canon, NULL) == 0;
}

/* ---- node ---- */

static void npm_install(struct mcp_server *ms)
{
    char dir[128], spec[512];
    snprintf(dir, sizeof dir, "/workspace/mcp/%s", ms->name);
    snprintf(spec, sizeof spec, "%s@%s", entry_str(ms, "package"), entry_str(ms, "version"));
    const char *argv[] = {"npm",        "install",   "--ignore-scripts",
                          "--no-audit", "--no-fund", "--no-update-notifier",
                          "--omit=dev", "--prefix",  dir,
                          spec,         NULL};
    mcp_apply_policy(ms->box);
    run_step(ms, argv, NULL, MCP_INSTALL_TIMEOUT_MS, on_installed);
}

static void on_registry(void *arg, const struct server_run_result *res)
{
    struct mcp_server *ms = arg;
    char url[512], canon[POLICY_NAME_MAX];
    step_output(res, url, sizeof url);
    if (!step_ok(ms, res, "npm config get registry")) return;
    ms->install = NULL;
    if (!url_host(url, canon)) {
        char why[700];
        snprintf(why, sizeof why,
                 "cannot find npm's registry in the sandbox (npm config get "
                 "registry said \"%.200s\")",
                 url);
        return install_failed(ms, why);
    }
    str_copy(ms->box->registry, sizeof ms->box->registry, canon);
    npm_install(ms);
}

/* ---- python ---- */

/* The index pip in the sandbox will use, from `pip config list` ("KEY='VALUE'" lines):
 * the environment's PIP_INDEX_URL, then the install section, then global, else PyPI. */
void mcp_pip_index(const char *config, char *url, size_t size)
{
    static const char *const keys[] = {
        ":env:.index-url=", "install.index-url=", "global.index-url="};
    for (size_t k = 0; k < ARRAY_LEN(keys); k++) {
        for (const char *line = config; line && *line; line = strchr(line, '\n')) {
            line += *line == '\n';
            if (strncmp(line, keys[k], strlen(keys[k])) != 0) continue;
            const char *v = line + strlen(keys[k]);
            v += *v == '\'' || *v == '"';
            size_t n = strcspn(v, "'\"\n");
            snprintf(url, size, "%.*s", (int)n, v);
            return;
        }
    }
    snprintf(url, size, "https://pypi.org/simple");
}

/* The lock as a requirements file, one pinned and hashed package a line. */
static char *lock_text(const struct mcp_server *ms)
{
    size_t i, len = 1;
    json_t *v;
    json_t *lock = json_object_get(ms->entry, "lock");
    json_array_foreach(lock, i, v) len += strlen(json_string_value(v)) + 1;
    char *text = malloc(len), *p = text;
    if (!text) return NULL;
    json_array_foreach(lock, i, v) p += sprintf(p, "%s\n", json_string_value(v));
    *p = '\0';
    return text;
}

static bool has(struct evbuffer *buf, const char *what)
{
    return evbuffer_search(buf, what, strlen(what), NULL).pos >= 0;
}

/* pip says "No matching distribution" both when the index has no wheel for the
 * package and when it could not reach the index at all: tell the two apart. */
static void on_pip_installed(void *arg, const struct server_run_result *res)
{
    struct mcp_server *ms = arg;
    bool no_match =
        res->ended && res->exit_code > 0 && has(res->err, "No matching distribution found");
    bool unreachable = has(res->err, "Retrying (Retry(") || has(res->err, "Could not fetch URL");
    if (!no_match) return on_installed(arg, res);
    char out[700], why[1400];
    error_line(ms, res->err, out, sizeof out);
    if (unreachable)
        snprintf(why, sizeof why,
                 "pip could not reach its index %s from the sandbox (the "
                 "sandbox's egress opens only that host while a server installs; see its "
                 "egress.refused events). pip said: %s",
                 ms->box->pip_index, out);
    else
        snprintf(why, sizeof why,
                 "%s==%s or one of its dependencies has no binary wheel "
                 "for the sandbox's Python on %s; runtime installs Python servers from "
                 "wheels only (--only-binary=:all:, so that no package code runs at "
                 "install), so a package published only as source cannot be installed. "
                 "pip said: %s",
                 entry_str(ms, "package"), entry_str(ms, "version"), ms->box->pip_index, out);
    ms->install = NULL;
    install_failed(ms, why);
}

static void pip_install(struct mcp_server *ms)
{
    char dir[128], script[512];
    snprintf(dir, sizeof dir, "/workspace/mcp/%s", ms->name);
    /* The lock comes on stdin and is kept beside the venv, for whoever looks. */
    snprintf(script, sizeof script,
             "cat > \"$1/requirements.txt\" && exec \"$1/bin/python\" -m pip install "
             "--only-binary=:all: --require-hashes --no-compile --no-input "
             "--disable-pip-version-check --index-url \"$2\" -r \"$1/requirements.txt\"");
    const char *argv[] = {"sh", "-c", script, "sh", dir, ms->box->pip_index, NULL};
    char *lock = lock_text(ms);
    if (!lock) return install_failed(ms, "out of memory");
    mcp_apply_policy(ms->box);
    run_step(ms, argv, lock, MCP_INSTALL_TIMEOUT_MS, on_pip_installed);
    free(lock);
}

static void on_venv(void *arg, const struct server_run_result *res)
{
    struct mcp_server *ms = arg;
    char config[4096], host[POLICY_NAME_MAX];
    step_output(res, config, sizeof config);
    if (!step_ok(ms, res, "python3 -m venv")) return;
    ms->install = NULL;
    mcp_pip_index(config, ms->box->pip_index, sizeof ms->box->pip_index);
    if (!url_host(ms->box->pip_index, host)) {
        char why[700];
        snprintf(why, sizeof why,
                 "pip's index in the sandbox is \"%.200s\", which names no "
                 "host; set PIP_INDEX_URL (or global.index-url) to an https:// URL",
                 ms->box->pip_index);
        return install_failed(ms, why);
    }
    pip_install(ms);
}

static void make_venv(struct mcp_server *ms)
{
    char dir[128];
    snprintf(dir, sizeof dir, "/workspace/mcp/%s", ms->name);
    /* --clear: an install cut short leaves nothing behind. The venv's pip is the one
     * Debian's python3-venv ships; no network is needed for this step. */
    const char *argv[] = {"sh",
                          "-c",
                          "python3 -m venv --clear \"$1\" && "
                          "exec \"$1/bin/python\" -m pip config list",
                          "sh",
                          dir,
                          NULL};
    run_step(ms, argv, NULL, 120000, on_venv);
}

void mcp_install(struct mcp_server *ms)
{
    ms->box->installing++;
    mcp_server_set_status(ms, MCP_INSTALLING, NULL);
    mcp_event(ms, "mcp.installing",
              json_pack("{s:s,s:s,s:s}", "manager", mcp_manager(ms), "package",
                        entry_str(ms, "package"), "version", entry_str(ms, "version")));
    mcp_log(ms, false, "installing %s %s with %s", entry_str(ms, "package"),
            entry_str(ms, "version"), mcp_manager(ms));
    if (is_python(ms)) return make_venv(ms);
    if (ms->box->registry[0]) return npm_install(ms);
    const char *argv[] = {"npm", "config", "get", "registry", NULL};
    run_step(ms, argv, NULL, 60000, on_registry);
}

void mcp_install_cancel(struct mcp_server *ms)
{
    if (!ms->install) return;
    server_run_cancel(ms->install);
    install_ended(ms);
}
