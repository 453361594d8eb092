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
#include "../store/store.h"
#include "mcp_impl.h"

struct mcp_waiter {
    struct mcp_box *box;
    struct evhttp_request *req;
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
    for (struct mcp_server *ms = sb->mcp ? sb->mcp->servers : NULL; ms; ms = ms->next)
        if (busy(ms)) return true;
    return false;
}

void mcp_sandbox_removed(struct sbx *sb)
{
    mcp_box_free(sb->mcp);
    sb->mcp = NULL;
}

void mcp_metrics_write(struct sbx *sb, FILE *f)
{
    for (struct mcp_server *ms = sb->mcp ? sb->mcp->servers : NULL; ms; ms = ms->next) {
        char labels[160];
        snprintf(labels, sizeof labels, "sandbox=\"%s\",server=\"%s\"", sb->id, ms->name);
        fprintf(f, "runtime_gateway_requests_total{%s} %llu\n", labels,
                (unsigned long long)ms->requests);
        meter_histogram_write(f, "runtime_gateway_request_seconds", labels, &ms->latency);
    }
}

void mcp_event(struct mcp_server *ms, const char *kind, json_t *fields)
{
    json_object_set_new(fields, "server", json_string(ms->name));
    server_event(ms->box->srv, ms->box->sb->id, kind, fields);
    json_decref(fields);
}

void mcp_server_set_status(struct mcp_server *ms, enum mcp_status st, const char *fmt, ...)
{
    ms->status = st;
    ms->error[0] = '\0';
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ms->error, sizeof ms->error, fmt, ap);
        va_end(ap);
    }
    if (st == MCP_FAILED) mcp_event(ms, "mcp.failed", json_pack("{s:s}", "error", ms->error));
    if (st == MCP_READY) mcp_event(ms, "mcp.ready", json_object());
    mcp_box_changed(ms->box);
}

struct mcp_server *mcp_server_find(struct mcp_box *box, const char *name)
{
    for (struct mcp_server *ms = box ? box->servers : NULL; ms; ms = ms->next)
        if (strcmp(ms->name, name) == 0) return ms;
    return NULL;
}

struct mcp_box *mcp_box_find_link(struct server *srv, const char *link)
{
    struct mcp_box *found = NULL;
    /* Every box is compared, in constant time each: no early exit tells how close a guess was. */
    for (struct sbx *sb = server_sandbox_first(srv); sb; sb = sb->next)
        if (sb->mcp && str_equal_ct(sb->mcp->link, link)) found = sb->mcp;
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
        json_array_append_new(servers, json_pack("{s:O,s:b,s:b,s:o}", "config", ms->config,
                                                 "installed", ms->installed, "running",
                                                 ms->status != MCP_STOPPED, "approved", approved));
    }
    json_t *state =
        json_pack("{s:s,s:s,s:o}", "link", box->link, "token", box->token, "servers", servers);
    char *text = json_dumps(state, JSON_COMPACT);
    json_decref(state);
    err_t err = {0};
    if (!text || store_mcp_put(server_store(box->srv), box->sb->id, text, &err) < 0)
        log_warn("MCP servers of sandbox %s not saved: %s", box->sb->id, err.msg);
    free(text);
}

static void keepalive_tick(evutil_socket_t fd, short what, void *arg)
{
    mcp_keepalive(arg);
}

static struct mcp_box *box_new(struct server *srv, struct sbx *sb)
{
    struct mcp_box *box = calloc(1, sizeof *box);
    if (!box) return NULL;
    box->srv = srv;
    box->sb = sb;
    random_hex(box->link, 16);
    random_hex(box->token, 32);
    box->keepalive = event_new(server_base(srv), -1, EV_PERSIST, keepalive_tick, box);
    struct timeval tv = {MCP_KEEPALIVE_MS / 1000, 0};
    event_add(box->keepalive, &tv);
    sb->mcp = box;
    return box;
}

/* ---- configuration of one server ---- */

static bool valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= MCP_NAME_MAX) return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool ok =
            (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (i > 0 && (c == '-' || c == '_'));
        if (!ok) return false;
    }
    return true;
}

static bool string_object(json_t *v)
{
    const char *k;
    json_t *x;
    if (!json_is_object(v)) return false;
    json_object_foreach(v, k, x) if (!json_is_string(x) || !*k) return false;
    return true;
}

static bool string_array(json_t *v, bool nonempty)
{
    size_t i;
    json_t *x;
    if (!json_is_array(v) || (nonempty && json_array_size(v) == 0)) return false;
    json_array_foreach(v, i, x) if (!json_is_string(x)) return false;
    return true;
}

/* A required setting is met by env, by secrets{}, or by a secret of that name (every
 * secret is in every sandbox under its own name). */
static int check_settings(struct server *srv, json_t *entry, json_t *cfg, err_t *err)
{
    json_t *secrets = json_object_get(cfg, "secrets"), *env = json_object_get(cfg, "env");
    json_t *known = server_secrets_list(srv);
    const char *k;
    json_t *v;
    int r = 0;
    json_object_foreach(secrets, k, v)
    {
        bool found = false;
        size_t i;
        json_t *s;
        json_array_foreach(known, i, s) found =
            found ||
            strcmp(json_string_value(json_object_get(s, "name")), json_string_value(v)) == 0;
        if (!found) {
            r = err_set(err, -EINVAL,
                        "secrets.%s names the secret %s, which does not exist; "
                        "create it with `runtime secret set %s --host HOST`",
                        k, json_string_value(v), json_string_value(v));
            goto out;
        }
    }
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(entry, "settings"), i, s)
    {
        const char *name = json_string_value(json_object_get(s, "env"));
        if (!json_is_true(json_object_get(s, "required"))) continue;
        bool met = json_object_get(env, name) || json_object_get(secrets, name);
        size_t j;
        json_t *x;
        json_array_foreach(known, j, x) met =
            met || strcmp(json_string_value(json_object_get(x, "name")), name) == 0;
        if (!met) {
            bool secret = json_is_true(json_object_get(s, "secret"));
            r = err_set(err, -EINVAL, "server %s needs %s (%s); pass %s",
                        json_string_value(json_object_get(entry, "id")), name,
                        json_string_value(json_object_get(s, "description")) ?: "a setting",
                        secret
                            ? "secrets: {\"NAME\": \"YOUR_SECRET\"} (CLI: --secret ID.NAME=SECRET)"
                            : "env: {\"NAME\": \"value\"}");
            goto out;
        }
    }
out:
    json_decref(known);
    return r;
}

/* Normalizes one entry of servers[]; a new object or NULL with err. */
static json_t *parse_config(struct server *srv, json_t *in, json_t **entry, err_t *err)
{
    if (!json_is_object(in)) {
        err_set(err, -EINVAL,
                "each server is an object: {\"id\": \"memory\"} or {\"name\": "
                "\"mine\", \"command\": [\"node\", \"/workspace/server.js\"]}");
        return NULL;
    }
    const char *id = json_string_value(json_object_get(in, "id"));
    const char *name = json_string_value(json_object_get(in, "name"));
    json_t *command = json_object_get(in, "command");
    *entry = id ? catalog_find(mcp_catalog(srv), id) : NULL;
    if (id && !*entry) {
        err_set(err, -EINVAL,
                "no server %s in the catalog; `runtime sandbox mcp catalog` lists "
                "them, or give {name, command} for your own",
                id);
        return NULL;
    }
    if (!id && (!name || !string_array(command, true))) {
        err_set(err, -EINVAL,
                "a server needs a catalog id, or a name and a command (an argv "
                "array of strings)");
        return NULL;
    }
    if (!name) name = id;
    if (!valid_name(name)) {
        err_set(err, -EINVAL,
                "server name %.64s must be 1-63 of a-z, 0-9, '-', '_', starting "
                "with a letter or digit",
                name);
        return NULL;
    }
    json_t *env = json_object_get(in, "env"), *secrets = json_object_get(in, "secrets");
    json_t *args = json_object_get(in, "args"), *fp = json_object_get(in, "fingerprint");
    const char *iso = json_string_value(json_object_get(in, "isolation"));
    if ((env && !string_object(env)) || (secrets && !string_object(secrets)) ||
        (args && !string_array(args, false)) || (fp && !json_is_null(fp) && !json_is_string(fp)) ||
        (iso && strcmp(iso, "shared") != 0 && strcmp(iso, "session") != 0)) {
        err_set(err, -EINVAL,
                "server %s: env and secrets are objects of strings, args an array "
                "of strings, fingerprint a hex string, isolation \"shared\" or \"session\"",
                name);
        return NULL;
    }
    const char *f = json_string_value(fp);
    if (f && (strlen(f) < FINGERPRINT_SHORT || strlen(f) > 64 ||
              strspn(f, "0123456789abcdefABCDEF") != strlen(f))) {
        err_set(err, -EINVAL,
                "server %s: fingerprint must be 16 to 64 hex digits, as `runtime "
                "mcp fingerprint` prints it",
                name);
        return NULL;
    }
    /* "o" takes the reference: a borrowed value is given one, a default is new. */
    json_t *cfg = json_pack("{s:s,s:o,s:o,s:o,s:s}", "name", name, "env",
                            env ? json_incref(env) : json_object(), "secrets",
                            secrets ? json_incref(secrets) : json_object(), "args",
                            args ? json_incref(args) : json_array(), "isolation", iso ?: "shared");
    if (id)
        json_object_set_new(cfg, "id", json_string(id));
    else
        json_object_set(cfg, "command", command);
    if (f) json_object_set_new(cfg, "fingerprint", json_string(f));
    if (*entry && check_settings(srv, *entry, cfg, err) < 0) {
        json_decref(cfg);
        return NULL;
    }
    return cfg;
}

static struct mcp_server *server_new(struct mcp_box *box, json_t *cfg, json_t *entry)
{
    struct mcp_server *ms = calloc(1, sizeof *ms);
    if (!ms) return NULL;
    ms->box = box;
    str_copy(ms->name, sizeof ms->name, json_string_value(json_object_get(cfg, "name")));
    ms->config = cfg;
    ms->entry = entry;
    ms->per_session = strcmp(json_string_value(json_object_get(cfg, "isolation")), "session") == 0;
    ms->warnings = json_array();
    ms->status = MCP_STOPPED;
    ms->next = box->servers;
    box->servers = ms;
    return ms;
}

static void server_free(struct mcp_server *ms)
{
    mcp_server_halt(ms);
    json_decref(ms->config);
    json_decref(ms->warnings);
    json_decref(ms->served_names);
    json_decref(ms->served_json);
    free(ms->served);
    mcp_toolset_clear(&ms->approved);
    free(ms);
}

/* Starts (or restarts) a configured server: install first where needed. */
static void launch(struct mcp_server *ms)
{
    json_array_clear(ms->warnings);
    ms->restarts = 0;
    if (ms->entry && !ms->installed)
        mcp_install(ms);
    else
        mcp_server_start(ms);
}

static int count(struct mcp_box *box)
{
    int n = 0;
    for (struct mcp_server *ms = box ? box->servers : NULL; ms; ms = ms->next)
        n++;
    return n;
}

/* ---- the API ---- */

static json_t *status_json(struct mcp_box *box)
{
    json_t *list = json_array();
    const char *base = server_config(box->srv)->public_url;
    for (struct mcp_server *ms = box->servers; ms; ms = ms->next) {
        char url[1024], fp[FINGERPRINT_SHORT + 1] = "";
        snprintf(url, sizeof url, "%s/mcp/%s/%s", base, box->link, ms->name);
        if (ms->seen[0]) snprintf(fp, sizeof fp, "%.*s", FINGERPRINT_SHORT, ms->seen);
        json_t *o = json_pack(
            "{s:s,s:s,s:s,s:o,s:o,s:O}", "name", ms->name, "status", mcp_status_name(ms->status),
            "url", url, "fingerprint", fp[0] ? json_string(fp) : json_null(), "tools",
            /* what clients see: nothing from a failed or refused one */
            ms->served_names && ms->status != MCP_FAILED && ms->status != MCP_REFUSED
                ? json_incref(ms->served_names)
                : json_array(),
            "warnings", ms->warnings);
        json_t *id = json_object_get(ms->config, "id");
        if (id) json_object_set(o, "id", id);
        if (ms->has_approved)
            json_object_set_new(o, "approved",
                                json_stringn(ms->approved.sha256, FINGERPRINT_SHORT));
        if (ms->error[0]) json_object_set_new(o, "error", json_string(ms->error));
        json_array_insert_new(list, 0, o); /* oldest first */
    }
    char auth[80];
    snprintf(auth, sizeof auth, "Bearer %s", box->token);
    return json_pack("{s:o,s:{s:s}}", "servers", list, "headers", "Authorization", auth);
}

json_t *mcp_servers_json(struct mcp_box *box)
{
    json_t *all = status_json(box), *servers = json_object_get(all, "servers");
    json_t *out = json_pack("{s:O}", "servers", servers);
    json_decref(all);
    return out;
}

static json_t *empty_status(void)
{
    return json_pack("{s:[],s:{}}", "servers", "headers");
}

static bool active(const struct mcp_server *ms)
{
    return ms->status != MCP_STOPPED && ms->status != MCP_FAILED && ms->status != MCP_REFUSED;
}

/* Parses servers[] into cfgs/entries (*made of them, each to be released) and checks
 * them against each other and against what runs: nothing starts unless all may. */
static int check_starts(struct server *srv, struct sbx *sb, json_t *list, json_t **cfgs,
                        json_t **entries, size_t *made, err_t *err)
{
    for (size_t i = 0; i < json_array_size(list); i++) {
        cfgs[i] = parse_config(srv, json_array_get(list, i), &entries[i], err);
        if (!cfgs[i]) return -EINVAL;
        *made = i + 1;
        const char *name = json_string_value(json_object_get(cfgs[i], "name"));
        struct mcp_server *old = mcp_server_find(sb->mcp, name);
        for (size_t j = 0; j < i; j++)
            if (strcmp(name, json_string_value(json_object_get(cfgs[j], "name"))) == 0)
                return err_set(err, -EINVAL, "server %s is given twice", name);
        if (old && active(old) && !json_equal(old->config, cfgs[i]))
            return err_set(err, -EEXIST,
                           "server %s is already %s with other settings; stop "
                           "it first (DELETE .../mcp/%s)",
                           name, mcp_status_name(old->status), name);
        if (!old && count(sb->mcp) + (int)i >= MCP_MAX_SERVERS)
            return err_set(err, -EAGAIN, "sandbox %s has %d servers, the limit", sb->id,
                           MCP_MAX_SERVERS);
    }
    return 0;
}

/* Starts one checked server: a new one, or a stopped, failed or refused one again with
 * these settings (its approval kept); one running with them already is left alone. */
static void start_one(struct mcp_box *box, json_t *cfg, json_t *entry)
{
    const char *name = json_string_value(json_object_get(cfg, "name"));
    struct mcp_server *ms = mcp_server_find(box, name);
    if (ms && active(ms)) return;
    if (!ms) {
        launch(server_new(box, json_incref(cfg), entry));
        return;
    }
    mcp_server_halt(ms);
    bool same_package = json_equal(json_object_get(ms->config, "id"), json_object_get(cfg, "id"));
    json_decref(ms->config);
    ms->config = json_incref(cfg);
    ms->entry = entry;
    ms->installed = ms->installed && same_package;
    ms->per_session = strcmp(json_string_value(json_object_get(cfg, "isolation")), "session") == 0;
    launch(ms);
}

int mcp_start(struct server *srv, struct sbx *sb, json_t *body, json_t **out, err_t *err)
{
    json_t *list = json_object_get(body, "servers");
    if (!json_is_array(list) || json_array_size(list) == 0)
        return err_set(err, -EINVAL,
                       "give the servers to start: {\"servers\": [{\"id\": "
                       "\"memory\"}]}");
    if (json_array_size(list) > MCP_MAX_SERVERS)
        return err_set(err, -EINVAL, "at most %d servers per sandbox", MCP_MAX_SERVERS);
    json_t *cfgs[MCP_MAX_SERVERS], *entries[MCP_MAX_SERVERS];
    size_t made = 0;
    int r = check_starts(srv, sb, list, cfgs, entries, &made, err);
    if (r == 0 && !sb->mcp && !box_new(srv, sb)) r = err_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; r == 0 && i < made; i++)
        start_one(sb->mcp, cfgs[i], entries[i]);
    if (r == 0) {
        mcp_box_save(sb->mcp);
        *out = status_json(sb->mcp);
    }
    for (size_t i = 0; i < made; i++)
        json_decref(cfgs[i]);
    return r;
}

int mcp_stop(struct server *srv, struct sbx *sb, const char *name, err_t *err)
{
    struct mcp_server *ms = mcp_server_find(sb->mcp, name);
    if (!ms) return err_set(err, -ENOENT, "sandbox %s has no MCP server %s", sb->id, name);
    mcp_server_halt(ms);
    mcp_server_set_status(ms, MCP_STOPPED, NULL);
    mcp_event(ms, "mcp.stopped", json_object());
    mcp_box_save(sb->mcp);
    return 0;
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
    evhttp_add_header(evhttp_request_get_output_headers(w->req), "Content-Type",
                      "application/json");
    evhttp_send_reply(w->req, 200, NULL, out);
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

void mcp_status_reply(struct server *srv, struct sbx *sb, struct evhttp_request *req,
                      uint32_t wait_ms)
{
    struct mcp_box *box = sb->mcp;
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
        evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                          "application/json");
        evhttp_send_reply(req, 200, NULL, out);
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
    box->sb->mcp = NULL;
    free(box);
}

/* ---- restore after a daemon restart ---- */

static void restore_server(struct mcp_box *box, json_t *saved)
{
    json_t *cfg = json_object_get(saved, "config");
    const char *id = json_string_value(json_object_get(cfg, "id"));
    json_t *entry = id ? catalog_find(mcp_catalog(box->srv), id) : NULL;
    if (!json_is_object(cfg) || (id && !entry)) return;
    struct mcp_server *ms = server_new(box, json_incref(cfg), entry);
    if (!ms) return;
    ms->installed = json_is_true(json_object_get(saved, "installed"));
    const char *canon =
        json_string_value(json_object_get(json_object_get(saved, "approved"), "tools"));
    err_t err = {0};
    if (canon && mcp_toolset_from_canon(canon, &ms->approved, &err) == 0) ms->has_approved = true;
    if (json_is_true(json_object_get(saved, "running"))) launch(ms);
}

int mcp_box_restore(struct server *srv, struct sbx *sb, err_t *err)
{
    char *text = NULL;
    int r = store_mcp_get(server_store(srv), sb->id, &text, err);
    if (r == -ENOENT) return 0;
    if (r < 0) return r;
    json_error_t jerr;
    json_t *state = json_loads(text, 0, &jerr);
    free(text);
    const char *link = json_string_value(json_object_get(state, "link"));
    const char *token = json_string_value(json_object_get(state, "token"));
    struct mcp_box *box = link && token ? box_new(srv, sb) : NULL;
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
    for (struct mcp_server *ms = sb->mcp ? sb->mcp->servers : NULL; ms; ms = ms->next) {
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
    if (sb->mcp && strcmp(kind, "egress.refused") == 0) egress_refused(sb, fields);
}
