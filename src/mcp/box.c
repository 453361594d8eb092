/* The MCP servers of one sandbox: their settings, statuses, persistence and the
 * API calls that start, stop and show them. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../catalog/catalog.h"
#include "../secrets/secrets.h"
#include "../store/store.h"
#include "mcp_impl.h"

struct mcp_waiter {
    struct mcp_box *box;
    struct httpd_req *req;
    struct event *timer;
    struct mcp_waiter *next;
};

static const char *const status_names[] = {"installing", "starting", "ready",
                                           "failed",     "refused",  "stopped"};

const char *mcp_status_name(enum mcp_status s)
{
    return status_names[s];
}

static bool busy(const struct mcp_server *ms)
{
    return ms->status == MCP_INSTALLING || ms->status == MCP_STARTING;
}

bool mcp_sandbox_busy(struct sbx *sb)
{
    for (struct mcp_server *ms = mcp_box_of(sb) ? mcp_box_of(sb)->servers : NULL; ms; ms = ms->next)
        if (busy(ms)) return true;
    return false;
}

/* ---- the gateway's side ---- */

static void no_message(struct mcp_backend *be, json_t *msg) {}
static void no_request(struct mcp_backend *be, struct mcp_session *s) {}
static void no_loss(struct mcp_backend *be, const char *why) {}
static void no_server(struct mcp_server *ms) {}
static void no_broadcast(struct mcp_server *ms, json_t *msg)
{
    json_decref(msg);
}
static void no_keepalive(struct mcp_box *box) {}

/* Until the daemon sets the gateway's (and in unit tests): servers without clients. */
static const struct mcp_clients no_clients = {no_message, no_request,   no_loss,     no_server,
                                              no_server,  no_broadcast, no_keepalive};
static const struct mcp_clients *clients = &no_clients;

void mcp_set_clients(const struct mcp_clients *c)
{
    clients = c ? c : &no_clients;
}

const struct mcp_clients *mcp_clients(void)
{
    return clients;
}

struct mcp_box *mcp_box_of(const struct sbx *sb)
{
    return sbx_slot(sb, SBX_SLOT_GATEWAY);
}

void mcp_sandbox_halted(struct sbx *sb)
{
    mcp_box_free(mcp_box_of(sb));
    sbx_set_slot(sb, SBX_SLOT_GATEWAY, NULL);
}

void mcp_metrics_write(struct sbx *sb, FILE *f)
{
    if (mcp_box_of(sb) && mcp_box_of(sb)->history)
        fprintf(f, "runtime_gateway_history_bytes{account=\"%s\",sandbox=\"%s\"} %llu\n",
                sbx_account(sb), sbx_id(sb), (unsigned long long)mcp_box_of(sb)->history->used);
    for (struct mcp_server *ms = mcp_box_of(sb) ? mcp_box_of(sb)->servers : NULL; ms;
         ms = ms->next) {
        char labels[240];
        snprintf(labels, sizeof labels, "account=\"%s\",sandbox=\"%s\",server=\"%s\"",
                 sbx_account(sb), sbx_id(sb), ms->name);
        fprintf(f, "runtime_gateway_requests_total{%s} %llu\n", labels,
                (unsigned long long)ms->requests);
        fprintf(f, "runtime_gateway_notifications_dropped_total{%s} %llu\n", labels,
                (unsigned long long)ms->notifications_dropped);
        meter_histogram_write(f, "runtime_gateway_request_seconds", labels, &ms->latency);
    }
}

void mcp_event(struct mcp_server *ms, const char *kind, json_t *fields)
{
    json_object_set_new(fields, "server", json_string(ms->name));
    server_event(ms->box->srv, sbx_id(ms->box->sb), kind, fields);
    json_decref(fields);
}

const char *mcp_manager(const struct mcp_server *ms)
{
    const char *rt = ms->entry ? json_string_value(json_object_get(ms->entry, "runtime")) : NULL;
    if (!rt) return NULL;
    return strcmp(rt, "python") == 0 ? "pip" : "npm";
}

double mcp_status_seconds(const struct mcp_server *ms)
{
    return (double)(now_ms() - ms->status_ms) / 1000.0;
}

void mcp_log(const struct mcp_server *ms, bool warn, const char *fmt, ...)
{
    char what[1200], who[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    log_msg(warn ? LOG_WARN : LOG_INFO, "sandbox %s: MCP server %s %s",
            sbx_label(ms->box->sb, who, sizeof who), ms->name, what);
}

/* A failure's event and log line name the phase it ended: "installing", "starting" or,
 * for one that was ready, "running". */
static void report_failure(struct mcp_server *ms, enum mcp_status was, double seconds)
{
    const char *phase = was == MCP_READY ? "running" : mcp_status_name(was);
    mcp_event(ms, "mcp.failed",
              json_pack("{s:s,s:s,s:f}", "error", ms->error, "phase", phase, "seconds", seconds));
    mcp_log(ms, true, "failed while %s (after %.1f s): %s", phase, seconds, ms->error);
}

void mcp_server_set_status(struct mcp_server *ms, enum mcp_status st, const char *fmt, ...)
{
    enum mcp_status was = ms->status;
    double seconds = mcp_status_seconds(ms); /* in the phase that ends now */
    ms->status = st;
    ms->status_ms = now_ms();
    ms->error[0] = '\0';
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ms->error, sizeof ms->error, fmt, ap);
        va_end(ap);
    }
    if (st == MCP_FAILED) report_failure(ms, was, seconds);
    if (st == MCP_READY) {
        mcp_event(ms, "mcp.ready", json_pack("{s:f}", "seconds", seconds));
        mcp_log(ms, false, "ready (started in %.1f s)", seconds);
    }
    if (st == MCP_REFUSED) mcp_log(ms, true, "refused: %s", ms->error);
    mcp_box_changed(ms->box);
    server_sandbox_changed(ms->box->srv, ms->box->sb); /* its JSON shows the servers' status */
}

struct mcp_server *mcp_server_find(struct mcp_box *box, const char *name)
{
    for (struct mcp_server *ms = box ? box->servers : NULL; ms; ms = ms->next)
        if (strcmp(ms->name, name) == 0) return ms;
    return NULL;
}

struct mcp_server *mcp_server_of(struct sbx *sb, const char *name, err_t *err)
{
    struct mcp_server *ms = mcp_box_of(sb) ? mcp_server_find(mcp_box_of(sb), name) : NULL;
    if (!ms)
        err_set(err, -ENOENT, "sandbox %s has no MCP server %s; GET .../mcp lists them", sbx_id(sb),
                name);
    return ms;
}

struct mcp_box *mcp_box_find_link(struct server *srv, const char *link)
{
    struct mcp_box *found = NULL;
    /* Every box is compared, in constant time each: no early exit tells how close a guess was. */
    for (struct sbx *sb = server_sandbox_first(srv); sb; sb = server_sandbox_next(sb))
        if (mcp_box_of(sb) && str_equal_ct(mcp_box_of(sb)->link, link)) found = mcp_box_of(sb);
    return found;
}

/* ---- persistence ---- */

void mcp_box_save(struct mcp_box *box)
{
    json_t *servers = json_array();
    for (struct mcp_server *ms = box->servers; ms; ms = ms->next) {
        json_t *approved = ms->has_approved ? json_pack("{s:s,s:s}", "sha256", ms->approved.sha256,
                                                        "tools", ms->approved.canon)
                                            : json_null();
        json_array_append_new(servers,
                              json_pack("{s:o,s:b,s:b,s:o,s:O}", "config",
                                        model_mcp_server_json(&ms->config), "installed",
                                        ms->installed, "running", ms->status != MCP_STOPPED,
                                        "approved", approved, "approvals", ms->approvals));
    }
    json_t *state =
        json_pack("{s:s,s:s,s:o}", "link", box->link, "token", box->token, "servers", servers);
    char *text = json_dumps(state, JSON_COMPACT);
    json_decref(state);
    /* Nobody waits for it; the writer's FIFO keeps it before the sandbox's forget. */
    if (text)
        store_writer_mcp_put(server_writer(box->srv), sbx_id(box->sb), text);
    else
        log_warn("MCP servers of sandbox %s not saved: out of memory", sbx_id(box->sb));
    free(text);
}

static void keepalive_tick(evutil_socket_t fd, short what, void *arg)
{
    mcp_clients()->keepalive(arg);
}

static struct mcp_box *box_new(struct server *srv, struct sbx *sb)
{
    struct mcp_box *box = calloc(1, sizeof *box);
    if (!box) return NULL;
    box->srv = srv;
    box->sb = sb;
    random_hex(box->link, 16);
    random_hex(box->token, 32);
    random_bytes(box->state_key, sizeof box->state_key);
    /* Resumption histories get a quarter of what the sandbox may hold: they are best
     * effort, and must never crowd out the answers its clients are reading. */
    box->history = budget_new(sbx_budget(sb) ? sbx_budget(sb)->limit / 4 : 0, sbx_budget(sb));
    box->keepalive = event_new(server_base(srv), -1, EV_PERSIST, keepalive_tick, box);
    struct timeval tv = {MCP_KEEPALIVE_MS / 1000, 0};
    event_add(box->keepalive, &tv);
    sbx_set_slot(sb, SBX_SLOT_GATEWAY, box);
    return box;
}

/* ---- configuration of one server ---- */

/* Every secrets{} entry names a secret that exists. */
static int check_secrets(const struct model_mcp_server *cfg, const struct vault *known,
                         const char *account, err_t *err)
{
    for (size_t i = 0; i < cfg->secrets.n; i++) {
        const struct model_pair *p = &cfg->secrets.v[i];
        if (!vault_has(known, account, p->value))
            return err_set(err, -EINVAL,
                           "secrets.%s names the secret %s, which does not exist; create it "
                           "with `runtime secret set %s --host HOST`",
                           p->key, p->value, p->value);
    }
    return 0;
}

/* A required setting is met by env, by secrets{}, or by a secret of that name (every
 * secret is in every sandbox under its own name). */
static int check_required(json_t *entry, const struct model_mcp_server *cfg,
                          const struct vault *known, const char *account, err_t *err)
{
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(entry, "settings"), i, s)
    {
        const char *name = json_string_value(json_object_get(s, "env"));
        if (!json_is_true(json_object_get(s, "required"))) continue;
        if (model_map_get(&cfg->env, name) || model_map_get(&cfg->secrets, name) ||
            vault_has(known, account, name))
            continue;
        bool secret = json_is_true(json_object_get(s, "secret"));
        return err_set(err, -EINVAL, "server %s needs %s (%s); pass %s",
                       json_string_value(json_object_get(entry, "id")), name,
                       json_string_value(json_object_get(s, "description")) ?: "a setting",
                       secret
                           ? "secrets: {\"NAME\": \"YOUR_SECRET\"} (CLI: --secret ID.NAME=SECRET)"
                           : "env: {\"NAME\": \"value\"}");
    }
    return 0;
}

/* Against the secrets of the sandbox's account: no other account's exist here. */
static int check_settings(struct server *srv, const struct sbx *sb, json_t *entry,
                          const struct model_mcp_server *cfg, err_t *err)
{
    const struct vault *known = server_vault(srv);
    int r = check_secrets(cfg, known, sbx_account(sb), err);
    return r < 0 ? r : check_required(entry, cfg, known, sbx_account(sb), err);
}

/* One entry of servers[]: its settings and its catalog entry (NULL for one's own). */
static int parse_config(struct server *srv, const struct sbx *sb, json_t *in,
                        struct model_mcp_server *cfg, json_t **entry, err_t *err)
{
    int r = model_mcp_server_parse(in, cfg, err);
    if (r < 0) return r;
    *entry = cfg->id[0] ? catalog_find(mcp_catalog(srv), cfg->id) : NULL;
    if (cfg->id[0] && !*entry)
        r = err_set(err, -EINVAL,
                    "no server %s in the catalog; `runtime sandbox mcp catalog` lists them, or "
                    "give {name, command} for your own",
                    cfg->id);
    if (r == 0 && *entry) r = check_settings(srv, sb, *entry, cfg, err);
    if (r < 0) model_mcp_server_clear(cfg);
    return r;
}

/* A server with these settings (taken: *cfg is left empty). */
static struct mcp_server *server_new(struct mcp_box *box, struct model_mcp_server *cfg,
                                     json_t *entry)
{
    struct mcp_server *ms = calloc(1, sizeof *ms);
    if (!ms) return NULL;
    ms->box = box;
    str_copy(ms->name, sizeof ms->name, cfg->name);
    ms->config = *cfg;
    *cfg = (struct model_mcp_server){0};
    ms->entry = entry;
    ms->per_session = ms->config.isolation == MODEL_ISOLATION_SESSION;
    ms->warnings = json_array();
    ms->approvals = json_array();
    ms->status = MCP_STOPPED;
    ms->status_ms = now_ms();
    ms->next = box->servers;
    box->servers = ms;
    return ms;
}

static void server_free(struct mcp_server *ms)
{
    mcp_server_halt(ms);
    mcp_log_free(ms);
    model_mcp_server_clear(&ms->config);
    json_decref(ms->warnings);
    json_decref(ms->served_names);
    json_decref(ms->served_json);
    free(ms->served);
    mcp_toolset_clear(&ms->approved);
    mcp_toolset_clear(&ms->pending);
    json_decref(ms->approvals);
    mcp_calls_free(ms);
    free(ms);
}

static bool active(const struct mcp_server *ms);

/* Starts (or restarts) a configured server: install first where needed. */
static void launch(struct mcp_server *ms)
{
    json_array_clear(ms->warnings);
    ms->restarts = 0;
    if (ms->entry && !ms->installed && mcp_template_restore(ms)) return;
    if (ms->entry && !ms->installed)
        mcp_install(ms);
    else
        mcp_server_start(ms);
}

void mcp_server_take_approval(struct mcp_server *ms)
{
    if (!active(ms)) return launch(ms);
    json_array_clear(ms->warnings);
    mcp_gate_serve_all(ms);
    mcp_clients()->broadcast(
        ms, json_pack("{s:s,s:s}", "jsonrpc", "2.0", "method", "notifications/tools/list_changed"));
}

static int count(struct mcp_box *box)
{
    int n = 0;
    for (struct mcp_server *ms = box ? box->servers : NULL; ms; ms = ms->next)
        n++;
    return n;
}

/* ---- the API ---- */

/* Runtime Cloud's word for a server (its SDKs' ready() waits while one is
 * "installing"): installing and starting are both not serving yet; refused and
 * stopped are not serving and will not be without a new start. */
static const char *cloud_status(enum mcp_status s)
{
    switch (s) {
    case MCP_INSTALLING:
    case MCP_STARTING:
        return "installing";
    case MCP_READY:
        return "ready";
    case MCP_FAILED:
    case MCP_REFUSED:
    case MCP_STOPPED:
        break;
    }
    return "failed";
}

/* Why it is not serving, for a person: its error, or what stopped it. */
static json_t *server_message(const struct mcp_server *ms)
{
    if (ms->error[0]) return json_string(ms->error);
    if (ms->status == MCP_STOPPED)
        return json_sprintf("stopped; POST .../mcp with it starts it again");
    return json_null();
}

static json_t *server_json(const struct mcp_box *box, const struct mcp_server *ms, const char *base)
{
    char url[1024], fp[FINGERPRINT_SHORT + 1] = "";
    snprintf(url, sizeof url, "%s/mcp/%s/%s", base, box->link, ms->name);
    if (ms->seen[0]) snprintf(fp, sizeof fp, "%.*s", FINGERPRINT_SHORT, ms->seen);
    json_t *o = json_pack("{s:s,s:s,s:s,s:o,s:s,s:o,s:o,s:O}", "name", ms->name, "status",
                          cloud_status(ms->status), "phase", mcp_status_name(ms->status), "message",
                          server_message(ms), "url", url, "fingerprint",
                          fp[0] ? json_string(fp) : json_null(), "tools",
                          /* what clients see: nothing from a failed or refused one */
                          ms->served_names && ms->status != MCP_FAILED && ms->status != MCP_REFUSED
                              ? json_incref(ms->served_names)
                              : json_array(),
                          "warnings", ms->warnings);
    if (ms->config.id[0]) json_object_set_new(o, "id", json_string(ms->config.id));
    if (ms->has_approved)
        json_object_set_new(o, "approved", json_stringn(ms->approved.sha256, FINGERPRINT_SHORT));
    if (ms->error[0]) json_object_set_new(o, "error", json_string(ms->error));
    json_object_set_new(o, "statusSeconds", json_integer((json_int_t)mcp_status_seconds(ms)));
    if (mcp_manager(ms))
        json_object_set_new(o, "package",
                            json_pack("{s:s,s:O,s:O}", "manager", mcp_manager(ms), "name",
                                      json_object_get(ms->entry, "package"), "version",
                                      json_object_get(ms->entry, "version")));
    return o;
}

static bool active(const struct mcp_server *ms)
{
    return ms->status != MCP_STOPPED && ms->status != MCP_FAILED && ms->status != MCP_REFUSED;
}

/* The gateway as Runtime Cloud answers it: {running, port, token, headers, servers,
 * warnings}, each server {name, status, message, url} and runtimed's own fields
 * (phase, the finer word; fingerprint, tools, ...). Every URL needs the headers.
 * port is Runtime Cloud's in-sandbox gateway port: runtimed's gateway is its own
 * listener, so null. */
static json_t *status_json(struct mcp_box *box)
{
    json_t *list = json_array(), *warnings = json_array();
    const char *base = server_config(box->srv)->public_url;
    bool running = false;
    for (struct mcp_server *ms = box ? box->servers : NULL; ms; ms = ms->next) {
        json_array_insert_new(list, 0, server_json(box, ms, base)); /* oldest first */
        running = running || active(ms);
        size_t i;
        json_t *w;
        json_array_foreach(ms->warnings, i, w)
            json_array_append_new(warnings, json_sprintf("%s: %s", ms->name, json_string_value(w)));
    }
    char auth[80];
    snprintf(auth, sizeof auth, "Bearer %s", box->token);
    return json_pack("{s:b,s:n,s:s,s:{s:s},s:o,s:o}", "running", running, "port", "token",
                     box->token, "headers", "Authorization", auth, "servers", list, "warnings",
                     warnings);
}

json_t *mcp_servers_json(struct mcp_box *box)
{
    json_t *all = status_json(box), *servers = json_object_get(all, "servers");
    json_t *out = json_pack("{s:O}", "servers", servers);
    json_decref(all);
    return out;
}

/* Nothing was ever started in it. */
static json_t *empty_status(void)
{
    return json_pack("{s:b,s:n,s:{},s:[],s:[]}", "running", 0, "port", "headers", "servers",
                     "warnings");
}

/* Parses servers[] into cfgs/entries (*made of them, each to be cleared) and checks
 * them against each other and against what runs: nothing starts unless all may. */
static int check_starts(struct server *srv, struct sbx *sb, json_t *list, bool replace,
                        struct model_mcp_server *cfgs, json_t **entries, size_t *made, err_t *err)
{
    for (size_t i = 0; i < json_array_size(list); i++) {
        int r = parse_config(srv, sb, json_array_get(list, i), &cfgs[i], &entries[i], err);
        if (r < 0) return err_wrap(err, "servers[%zu]", i);
        *made = i + 1;
        const char *name = cfgs[i].name;
        struct mcp_server *old = mcp_server_find(mcp_box_of(sb), name);
        for (size_t j = 0; j < i; j++)
            if (strcmp(name, cfgs[j].name) == 0)
                return err_set(err, -EINVAL, "server %s is given twice", name);
        if (!replace && old && active(old) && !model_mcp_server_equal(&old->config, &cfgs[i]))
            return err_set(err, -EEXIST,
                           "server %s is already %s with other settings; stop "
                           "it first (DELETE .../mcp/%s), or start with \"replace\": true",
                           name, mcp_status_name(old->status), name);
        if (!old && count(mcp_box_of(sb)) + (int)i >= MCP_MAX_SERVERS) {
            char who[300];
            err_set(err, -EAGAIN, "sandbox %s has %d servers, the limit", sbx_id(sb),
                    MCP_MAX_SERVERS);
            log_warn("sandbox %s: MCP server %s refused: %s", sbx_label(sb, who, sizeof who), name,
                     err->msg);
            return err->code;
        }
    }
    return 0;
}

/* Starts one checked server: a new one, or a stopped, failed or refused one (or, with
 * replace, a running one) again with these settings (its approval kept); one running
 * with them already is left alone.
 * Takes *cfg when it is used. */
static void start_one(struct mcp_box *box, struct model_mcp_server *cfg, json_t *entry)
{
    struct mcp_server *ms = mcp_server_find(box, cfg->name);
    if (ms && active(ms) && model_mcp_server_equal(&ms->config, cfg)) return;
    if (!ms) {
        if ((ms = server_new(box, cfg, entry))) launch(ms);
        return;
    }
    mcp_server_halt(ms);
    bool same_package = strcmp(ms->config.id, cfg->id) == 0;
    model_mcp_server_clear(&ms->config);
    ms->config = *cfg;
    *cfg = (struct model_mcp_server){0};
    ms->entry = entry;
    ms->installed = ms->installed && same_package;
    ms->per_session = ms->config.isolation == MODEL_ISOLATION_SESSION;
    launch(ms);
}

static void stop_server(struct mcp_server *ms);

/* Runtime Cloud's start options: port (its in-sandbox gateway's; runtimed's gateway is
 * its own listener), replace (the servers not listed stop), public (URLs that never
 * expire, guarded by the header alone: what runtimed's always are). */
static int start_options(json_t *body, bool *replace, err_t *err)
{
    static const char *const known[] = {"servers", "port", "replace", "public", NULL};
    if (json_known_fields(body, NULL, known, err) < 0) return -EINVAL;
    json_t *port = json_object_get(body, "port"), *rep = json_object_get(body, "replace"),
           *pub = json_object_get(body, "public");
    if (port && !json_is_null(port))
        return err_set(err, -EINVAL,
                       "port: runtimed serves every server at its own URL on the daemon's "
                       "listener, not on a port in the sandbox; leave port out");
    if ((rep && !json_is_boolean(rep)) || (pub && !json_is_boolean(pub)))
        return err_set(err, -EINVAL, "replace and public are true or false");
    *replace = json_is_true(rep);
    return 0;
}

/* replace: every server the start does not name stops. */
static void stop_unlisted(struct mcp_box *box, const struct model_mcp_server *cfgs, size_t n)
{
    for (struct mcp_server *ms = box->servers; ms; ms = ms->next) {
        size_t i = 0;
        while (i < n && strcmp(cfgs[i].name, ms->name) != 0)
            i++;
        if (i == n && ms->status != MCP_STOPPED) stop_server(ms);
    }
}

int mcp_start(struct server *srv, struct sbx *sb, json_t *body, json_t **out, err_t *err)
{
    json_t *list = json_object_get(body, "servers");
    bool replace = false;
    if (start_options(body, &replace, err) < 0) return -EINVAL;
    if (!json_is_array(list) || json_array_size(list) == 0)
        return err_set(err, -EINVAL,
                       "give the servers to start: {\"servers\": [{\"id\": "
                       "\"memory\"}]}");
    if (json_array_size(list) > MCP_MAX_SERVERS)
        return err_set(err, -EINVAL, "at most %d servers per sandbox", MCP_MAX_SERVERS);
    struct model_mcp_server cfgs[MCP_MAX_SERVERS];
    json_t *entries[MCP_MAX_SERVERS];
    size_t made = 0;
    int r = check_starts(srv, sb, list, replace, cfgs, entries, &made, err);
    if (r == 0 && !mcp_box_of(sb) && !box_new(srv, sb)) r = err_set(err, -ENOMEM, "out of memory");
    if (r == 0 && replace) stop_unlisted(mcp_box_of(sb), cfgs, made);
    for (size_t i = 0; r == 0 && i < made; i++)
        start_one(mcp_box_of(sb), &cfgs[i], entries[i]);
    if (r == 0) {
        mcp_box_save(mcp_box_of(sb));
        *out = status_json(mcp_box_of(sb));
    }
    for (size_t i = 0; i < made; i++)
        model_mcp_server_clear(&cfgs[i]);
    return r;
}

static void stop_server(struct mcp_server *ms)
{
    mcp_server_halt(ms);
    mcp_server_set_status(ms, MCP_STOPPED, NULL);
    mcp_event(ms, "mcp.stopped", json_object());
}

int mcp_stop(struct server *srv, struct sbx *sb, const char *name, err_t *err)
{
    struct mcp_server *ms = mcp_server_find(mcp_box_of(sb), name);
    if (!ms) return err_set(err, -ENOENT, "sandbox %s has no MCP server %s", sbx_id(sb), name);
    stop_server(ms);
    mcp_box_save(mcp_box_of(sb));
    return 0;
}

bool mcp_stop_all(struct server *srv, struct sbx *sb)
{
    struct mcp_box *box = mcp_box_of(sb);
    bool stopped = false;
    for (struct mcp_server *ms = box ? box->servers : NULL; ms; ms = ms->next)
        if (ms->status != MCP_STOPPED) {
            stopped = stopped || active(ms);
            stop_server(ms);
        }
    if (box) mcp_box_save(box);
    return stopped;
}

static void waiter_free(struct mcp_waiter *w)
{
    struct mcp_waiter **pp = &w->box->waiters;
    while (*pp && *pp != w)
        pp = &(*pp)->next;
    if (*pp) *pp = w->next;
    event_free(w->timer);
    free(w);
}

static void waiter_answer(struct mcp_waiter *w)
{
    json_t *v = status_json(w->box);
    char *text = json_dumps(v, JSON_COMPACT);
    json_decref(v);
    struct evbuffer *out = evbuffer_new();
    evbuffer_add_printf(out, "%s\n", text ? text : "{}");
    free(text);
    httpd_add_header(w->req, "Content-Type", "application/json");
    httpd_reply(w->req, 200, out);
    evbuffer_free(out);
    waiter_free(w);
}

static void on_wait_timeout(evutil_socket_t fd, short what, void *arg)
{
    waiter_answer(arg);
}

void mcp_box_changed(struct mcp_box *box)
{
    for (struct mcp_server *ms = box->servers; ms; ms = ms->next)
        if (busy(ms)) return;
    while (box->waiters)
        waiter_answer(box->waiters);
}

void mcp_status_reply(struct server *srv, struct sbx *sb, struct httpd_req *req, uint32_t wait_ms)
{
    struct mcp_box *box = mcp_box_of(sb);
    bool any_busy = false;
    for (struct mcp_server *ms = box ? box->servers : NULL; ms; ms = ms->next)
        any_busy = any_busy || busy(ms);
    if (!box || !any_busy || wait_ms == 0) {
        json_t *v = box ? status_json(box) : empty_status();
        char *text = json_dumps(v, JSON_COMPACT);
        json_decref(v);
        struct evbuffer *out = evbuffer_new();
        evbuffer_add_printf(out, "%s\n", text ? text : "{}");
        free(text);
        httpd_add_header(req, "Content-Type", "application/json");
        httpd_reply(req, 200, out);
        evbuffer_free(out);
        return;
    }
    struct mcp_waiter *w = calloc(1, sizeof *w);
    w->box = box;
    w->req = req;
    w->timer = evtimer_new(server_base(srv), on_wait_timeout, w);
    struct timeval tv = {wait_ms / 1000, (wait_ms % 1000) * 1000};
    evtimer_add(w->timer, &tv);
    w->next = box->waiters;
    box->waiters = w;
}

json_t *mcp_catalog(struct server *srv)
{
    return server_catalog(srv);
}

void mcp_box_free(struct mcp_box *box)
{
    if (!box) return;
    while (box->waiters)
        waiter_answer(box->waiters);
    while (box->servers) {
        struct mcp_server *ms = box->servers;
        box->servers = ms->next;
        server_free(ms);
    }
    event_free(box->keepalive);
    budget_unref(box->history);
    sbx_set_slot(box->sb, SBX_SLOT_GATEWAY, NULL);
    free(box);
}

/* ---- restore after a daemon restart ---- */

static void restore_server(struct mcp_box *box, json_t *saved)
{
    struct model_mcp_server cfg;
    err_t err = {0};
    if (model_mcp_server_parse(json_object_get(saved, "config"), &cfg, &err) < 0) {
        log_warn("sandbox %s: a saved MCP server cannot be read: %s", sbx_id(box->sb), err.msg);
        return;
    }
    json_t *entry = cfg.id[0] ? catalog_find(mcp_catalog(box->srv), cfg.id) : NULL;
    if (cfg.id[0] && !entry)
        log_warn("sandbox %s: MCP server %s is not in the catalog any more; not restored",
                 sbx_id(box->sb), cfg.id);
    struct mcp_server *ms = cfg.id[0] && !entry ? NULL : server_new(box, &cfg, entry);
    model_mcp_server_clear(&cfg);
    if (!ms) return;
    ms->installed = json_is_true(json_object_get(saved, "installed"));
    const char *canon =
        json_string_value(json_object_get(json_object_get(saved, "approved"), "tools"));
    if (canon && mcp_toolset_from_canon(canon, &ms->approved, &err) == 0) ms->has_approved = true;
    json_t *approvals = json_object_get(saved, "approvals");
    if (json_is_array(approvals)) json_array_extend(ms->approvals, approvals);
    if (json_is_true(json_object_get(saved, "running"))) launch(ms);
}

int mcp_box_restore(struct server *srv, struct sbx *sb, err_t *err)
{
    char *text = NULL;
    int r = store_mcp_get(server_store(srv), sbx_id(sb), &text, err);
    if (r == -ENOENT) return 0;
    if (r < 0) return r;
    json_error_t jerr;
    json_t *state = json_loads(text, 0, &jerr);
    free(text);
    const char *link = json_string_value(json_object_get(state, "link"));
    const char *token = json_string_value(json_object_get(state, "token"));
    if (!link || !token || !json_is_array(json_object_get(state, "servers"))) {
        server_row_unreadable(srv, "mcp", sbx_id(sb),
                              !state ? jerr.text : "it lacks its link, token or servers");
        json_decref(state);
        return 0; /* the sandbox itself is restored */
    }
    struct mcp_box *box = box_new(srv, sb);
    if (box) {
        str_copy(box->link, sizeof box->link, link);
        str_copy(box->token, sizeof box->token, token);
        json_t *list = json_object_get(state, "servers");
        /* Saved newest first; re-adding in reverse keeps that order. */
        for (size_t i = json_array_size(list); i-- > 0;)
            restore_server(box, json_array_get(list, i));
    }
    json_decref(state);
    return 0;
}

/* ---- egress ---- */

/* The egress refused a connection of sb: a warning on servers that are starting. */
static void egress_refused(struct sbx *sb, json_t *fields)
{
    const char *stage = json_string_value(json_object_get(fields, "stage"));
    if (stage && strcmp(stage, "policy") == 0) return; /* an install's leftover connection */
    const char *host = json_string_value(json_object_get(fields, "host"));
    const char *reason = json_string_value(json_object_get(fields, "reason"));
    char text[400];
    snprintf(text, sizeof text, "egress to %s refused (%s)", host ? host : "an address",
             reason ? reason : "not allowed");
    for (struct mcp_server *ms = mcp_box_of(sb) ? mcp_box_of(sb)->servers : NULL; ms;
         ms = ms->next) {
        if (!busy(ms) || json_array_size(ms->warnings) >= 20) continue;
        bool dup = false;
        size_t i;
        json_t *w;
        json_array_foreach(ms->warnings, i, w) dup = dup || strcmp(json_string_value(w), text) == 0;
        if (!dup) json_array_append_new(ms->warnings, json_string(text));
    }
}

void mcp_sandbox_egress_event(struct sbx *sb, const char *kind, json_t *fields)
{
    if (mcp_box_of(sb) && strcmp(kind, "egress.refused") == 0) egress_refused(sb, fields);
}
