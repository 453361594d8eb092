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
static const char *const pypi_hosts[] = {"pypi.org", "files.pythonhosted.org"};

static bool is_python(const struct mcp_server *ms)
{
    return strcmp(json_string_value(json_object_get(ms->entry, "runtime")), "python") == 0;
}

/* ---- the sandbox's policy ---- */

static void add_host(json_t *allow, const char *host)
{
    size_t i;
    json_t *v;
    if (!host || !*host) return;
    json_array_foreach(allow, i, v) if (strcmp(json_string_value(v), host) == 0) return;
    json_array_append_new(allow, json_string(host));
}

static void add_catalog_hosts(json_t *allow, const struct mcp_server *ms)
{
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(ms->entry, "egress"), i, v)
        add_host(allow, json_string_value(v));
}

static int build(bool internet, json_t *allow, struct policy *out, err_t *err)
{
    size_t n = json_array_size(allow);
    const char **list = calloc(n + 1, sizeof *list);
    if (!list) return err_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) list[i] = json_string_value(json_array_get(allow, i));
    int r = policy_build(internet, list, n, out, err);
    free(list);
    return r;
}

int mcp_policy(struct sbx *sb, json_t *network, struct policy *out, err_t *err)
{
    bool internet = json_is_true(json_object_get(network, "internet"));
    json_t *base = json_object_get(network, "allow");
    struct mcp_box *box = sb->mcp;
    json_t *allow = json_array();
    int r;
    if (box && box->installing > 0) {
        /* Installs reach their registry; servers already running keep their hosts. */
        for (struct mcp_server *ms = box->servers; ms; ms = ms->next) {
            if (ms->status == MCP_INSTALLING && is_python(ms))
                for (size_t i = 0; i < ARRAY_LEN(pypi_hosts); i++) add_host(allow, pypi_hosts[i]);
            else if (ms->status == MCP_INSTALLING) add_host(allow, box->registry);
            else if (ms->status == MCP_READY && ms->entry) add_catalog_hosts(allow, ms);
        }
        r = build(json_array_size(allow) > 0, allow, out, err);
    } else {
        for (struct mcp_server *ms = box ? box->servers : NULL; ms; ms = ms->next)
            if (ms->entry && (ms->status == MCP_STARTING || ms->status == MCP_READY))
                add_catalog_hosts(allow, ms);
        bool everything = internet && json_array_size(base) == 0;
        if (json_array_size(allow) == 0 || everything) {
            r = build(internet, base, out, err); /* the sandbox's own policy as it is */
        } else {
            /* Servers' hosts are allowed even with internet off; the rest as the sandbox says. */
            size_t i;
            json_t *v;
            if (internet) json_array_foreach(base, i, v) add_host(allow, json_string_value(v));
            r = build(true, allow, out, err);
        }
    }
    json_decref(allow);
    return r;
}

void mcp_apply_policy(struct mcp_box *box)
{
    struct policy pol;
    err_t err = {0};
    if (!box->sb->egress) return;
    if (mcp_policy(box->sb, json_object_get(box->sb->spec, "network"), &pol, &err) < 0) {
        log_warn("sandbox %s: egress policy not updated: %s", box->sb->id, err.msg);
        return;
    }
    egress_sandbox_set_policy(box->sb->egress, &pol);
}

/* ---- the install ---- */

static void tail(struct evbuffer *buf, char *out, size_t size)
{
    size_t n = evbuffer_get_length(buf);
    size_t take = n < size - 1 ? n : size - 1;
    struct evbuffer_ptr pos;
    evbuffer_ptr_set(buf, &pos, n - take, EVBUFFER_PTR_SET);
    evbuffer_copyout_from(buf, &pos, out, take);
    out[take] = '\0';
    for (char *p = out; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
}

static void install_ended(struct mcp_server *ms)
{
    ms->install = NULL;
    ms->box->installing--;
    mcp_apply_policy(ms->box);
}

static void on_installed(void *arg, const struct server_run_result *res)
{
    struct mcp_server *ms = arg;
    const char *pkg = json_string_value(json_object_get(ms->entry, "package"));
    const char *ver = json_string_value(json_object_get(ms->entry, "version"));
    install_ended(ms);
    char why[600];
    tail(res->err, why, sizeof why);
    if (res->ended && res->exit_code == -1)
        return mcp_server_set_status(ms, MCP_FAILED, "cannot install %s@%s: %s is not installed "
                                     "on this host (%s)", pkg, ver, is_python(ms) ? "python3" :
                                     "npm", strerror(res->start_errno));
    if (!res->ended || res->exit_code != 0)
        return mcp_server_set_status(ms, MCP_FAILED, "cannot install %s@%s: the installer "
                                     "exited with status %d%s: %s", pkg, ver, res->exit_code,
                                     res->timed_out ? " (timed out)" : "", why);
    ms->installed = true;
    mcp_box_save(ms->box);
    mcp_server_start(ms);
}

static void run_installer(struct mcp_server *ms)
{
    const char *pkg = json_string_value(json_object_get(ms->entry, "package"));
    const char *ver = json_string_value(json_object_get(ms->entry, "version"));
    char dir[128], spec[512];
    snprintf(dir, sizeof dir, "/workspace/mcp/%s", ms->name);
    const char *node[] = {"npm", "install", "--ignore-scripts", "--no-audit", "--no-fund",
                          "--no-update-notifier", "--omit=dev", "--prefix", dir, spec, NULL};
    const char *python[] = {"python3", "-m", "pip", "install", "--only-binary=:all:",
                            "--no-compile", "--disable-pip-version-check", "--target", dir,
                            spec, NULL};
    snprintf(spec, sizeof spec, is_python(ms) ? "%s==%s" : "%s@%s", pkg, ver);
    mcp_apply_policy(ms->box);
    err_t err = {0};
    json_t *env = server_exec_env(ms->box->srv, ms->box->sb, NULL, &err);
    char **envp = NULL;
    int r = env ? server_env_list(env, &envp, &err) : -EIO;
    json_decref(env);
    struct server_run_spec rs = {.argv = is_python(ms) ? python : node,
                                 .envp = (const char *const *)envp, .cwd = "/workspace",
                                 .timeout_ms = MCP_INSTALL_TIMEOUT_MS,
                                 .output_cap = INSTALL_OUTPUT_CAP};
    if (r == 0) r = server_run(ms->box->srv, ms->box->sb, &rs, on_installed, ms, &ms->install, &err);
    server_env_free(envp);
    if (r < 0) {
        install_ended(ms);
        mcp_server_set_status(ms, MCP_FAILED, "cannot install %s: %s", spec, err.msg);
    }
}

/* `npm config get registry` in the sandbox: the registry npm there will really use. */
static void on_registry(void *arg, const struct server_run_result *res)
{
    struct mcp_server *ms = arg;
    ms->install = NULL;
    char url[512] = "";
    size_t n = evbuffer_copyout(res->out, url, sizeof url - 1);
    url[n] = '\0';
    char *host = strstr(url, "://");
    host = host ? host + 3 : url;
    host[strcspn(host, "/:\n\r ")] = '\0';
    char canon[POLICY_NAME_MAX];
    if (res->exit_code != 0 || policy_canon_name(host, canon, NULL) < 0) {
        install_ended(ms);
        return mcp_server_set_status(ms, MCP_FAILED, "cannot find npm's registry in the "
                                     "sandbox (npm config get registry said \"%.200s\")", url);
    }
    str_copy(ms->box->registry, sizeof ms->box->registry, canon);
    run_installer(ms);
}

void mcp_install(struct mcp_server *ms)
{
    ms->box->installing++;
    mcp_server_set_status(ms, MCP_INSTALLING, NULL);
    if (is_python(ms) || ms->box->registry[0]) return run_installer(ms);
    const char *argv[] = {"npm", "config", "get", "registry", NULL};
    err_t err = {0};
    json_t *env = server_exec_env(ms->box->srv, ms->box->sb, NULL, &err);
    char **envp = NULL;
    int r = env ? server_env_list(env, &envp, &err) : -EIO;
    json_decref(env);
    struct server_run_spec rs = {.argv = argv, .envp = (const char *const *)envp,
                                 .cwd = "/workspace", .timeout_ms = 60000, .output_cap = 4096};
    if (r == 0) r = server_run(ms->box->srv, ms->box->sb, &rs, on_registry, ms, &ms->install, &err);
    server_env_free(envp);
    if (r < 0) {
        install_ended(ms);
        mcp_server_set_status(ms, MCP_FAILED, "cannot start npm in the sandbox: %s", err.msg);
    }
}

void mcp_install_cancel(struct mcp_server *ms)
{
    if (!ms->install) return;
    server_run_cancel(ms->install);
    install_ended(ms);
}
