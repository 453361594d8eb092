#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../catalog/catalog.h"
#include "../gateway/gateway.h"
#include "../secrets/secrets.h"
#include "api_impl.h"

void api_json(struct httpd_req *req, int status, json_t *v)
{
    /* 12 significant digits: usage figures without binary noise (0.069, not 0.069000000000000006).
     */
    char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(12));
    json_decref(v);
    api_idempotency_answer(req, status, text ? text : "null");
    struct evbuffer *out = evbuffer_new();
    evbuffer_add_printf(out, "%s\n", text ? text : "null");
    free(text);
    httpd_add_header(req, "Content-Type", "application/json");
    httpd_reply(req, status, out);
    evbuffer_free(out);
}

void api_no_content(struct httpd_req *req)
{
    api_idempotency_answer(req, 204, NULL);
    httpd_reply(req, 204, NULL);
}

__attribute__((format(printf, 5, 0))) static void error_reply(struct httpd_req *req, int status,
                                                              const char *code, json_t *details,
                                                              const char *fmt, va_list ap)
{
    char msg[600];
    vsnprintf(msg, sizeof msg, fmt, ap);
    /* The message may echo user bytes (or cut them mid-character): keep it UTF-8. */
    json_t *err = json_pack("{s:s,s:i,s:o,s:s}", "code", code, "status", status, "message",
                            api_json_text(msg, strlen(msg)), "requestId", httpd_request_id(req));
    if (details) json_object_set_new(err, "details", details);
    api_json(req, status, json_pack("{s:o}", "error", err));
}

void api_error(struct httpd_req *req, int status, const char *code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_reply(req, status, code, NULL, fmt, ap);
    va_end(ap);
}

void api_error_details(struct httpd_req *req, int status, const char *code, json_t *details,
                       const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_reply(req, status, code, details, fmt, ap);
    va_end(ap);
}

void api_issue(struct api_issues *is, const char *field, const char *fmt, ...)
{
    char msg[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!is->list) is->list = json_array();
    json_array_append_new(is->list, json_pack("{s:s,s:o}", "field", field, "message",
                                              api_json_text(msg, strlen(msg))));
    size_t n = strlen(is->text);
    snprintf(is->text + n, sizeof is->text - n, "%s%s", n ? "; " : "", msg);
}

bool api_issues_reply(struct httpd_req *req, struct api_issues *is)
{
    if (!is->list) return false;
    api_error_details(req, 400, "invalid_request", json_pack("{s:o}", "issues", is->list), "%s",
                      is->text);
    is->list = NULL;
    return true;
}

void api_fail(struct httpd_req *req, const err_t *err)
{
    static const struct {
        int code, status;
        const char *name;
    } map[] = {
        {-EINVAL, 400, "invalid_request"},
        {-ENOENT, 404, "not_found"},
        {-EEXIST, 409, "conflict"},
        {-E2BIG, 413, "too_large"},
        {-EFBIG, 413, "too_large"},
        {-ENOSPC, 507, "disk_full"},
        {-EDQUOT, 507, "disk_full"},
        {-EAGAIN, 429, "limit_reached"},
        {-EACCES, 403, "forbidden"},
        {-EPERM, 403, "forbidden"},
        {-EISDIR, 400, "invalid_request"},
        {-ENOTDIR, 400, "invalid_request"},
        {-ELOOP, 400, "invalid_request"},
        {-EROFS, 403, "read_only"},
        {-EXDEV, 400, "invalid_request"},
        {-ENAMETOOLONG, 400, "invalid_request"},
        {-EBUSY, 409, "busy"},
        {-ESHUTDOWN, 503, "unavailable"},
        {-EOPNOTSUPP, 501, "feature_unavailable"}, /* what this daemon or driver lacks */
    };
    for (size_t i = 0; i < ARRAY_LEN(map); i++)
        if (map[i].code == err->code) {
            api_error(req, map[i].status, map[i].name, "%s", err->msg);
            return;
        }
    api_error(req, 500, "internal_error", "%s", err->msg[0] ? err->msg : "internal error");
}

json_t *api_body_json(struct httpd_req *req, bool allow_empty)
{
    struct evbuffer *in = httpd_body(req);
    size_t n = evbuffer_get_length(in);
    if (n > API_MAX_JSON_BODY) {
        api_error(req, 413, "too_large", "the JSON body is %zu bytes; the limit is %u", n,
                  API_MAX_JSON_BODY);
        return NULL;
    }
    if (n == 0 && allow_empty) return json_object();
    json_error_t jerr;
    char *raw = (char *)evbuffer_pullup(in, -1);
    json_t *v = json_loadb(raw, n, JSON_REJECT_DUPLICATES, &jerr);
    /* Parsed once: the raw bytes (a secret's value, maybe) are wiped and let go. */
    if (raw) explicit_bzero(raw, n);
    httpd_drop_body(req);
    if (!v)
        api_error(req, 400, "invalid_request", "the body is not valid JSON: %s (line %d)",
                  jerr.text, jerr.line);
    return v;
}

bool api_query(struct httpd_req *req, struct evkeyvalq *q, const char *const *known)
{
    const char *query = httpd_query(req);
    if (evhttp_parse_query_str(query ? query : "", q) < 0) {
        api_error(req, 400, "invalid_request", "the query string cannot be read: %.200s", query);
        return false;
    }
    char unknown[300] = "";
    size_t n = 0;
    for (struct evkeyval *kv = q->tqh_first; kv; kv = kv->next.tqe_next) {
        size_t i = 0;
        while (known[i] && strcmp(known[i], kv->key) != 0)
            i++;
        if (!known[i])
            n += (size_t)snprintf(unknown + n, n < sizeof unknown ? sizeof unknown - n : 0,
                                  "%s%.40s", n ? ", " : "", kv->key);
    }
    if (!n) return true;
    evhttp_clear_headers(q);
    char allowed[300] = "";
    size_t m = 0;
    for (size_t i = 0; known[i]; i++)
        m += (size_t)snprintf(allowed + m, m < sizeof allowed ? sizeof allowed - m : 0, "%s%s",
                              m ? ", " : "", known[i]);
    api_error(req, 400, "invalid_request", "unknown query parameter: %s; this path takes %s",
              unknown, m ? allowed : "none");
    return false;
}

bool api_key_caller(struct server *srv, const char *key, struct api_caller *out)
{
    if (str_equal_ct(key, server_config(srv)->admin_key)) {
        *out = (struct api_caller){.account = ACCOUNT_DEFAULT, .admin = true};
        return true;
    }
    const struct account *acct = accounts_authenticate(server_accounts(srv), key);
    if (acct) *out = (struct api_caller){.account = acct->name};
    return acct != NULL;
}

/* Who is calling: the admin (who acts as the account default) or an account, by the key
 * in Authorization, or else by the dashboard's session cookie. False after answering. */
static bool authenticate(struct httpd_req *req, struct server *srv, struct api_caller *out)
{
    const char *h = httpd_header(req, "Authorization");
    if (h && strncasecmp(h, "Bearer ", 7) == 0 && api_key_caller(srv, h + 7, out)) return true;
    const char *why = "";
    /* EventSource cannot send a header: the event stream is read-only, and no other
     * site can read it (no CORS; the cookie is SameSite=Strict). */
    bool csrf_checked =
        !(httpd_method(req) == HTTPD_GET && strcmp(httpd_path(req), "/v1/events/stream") == 0);
    int r = h ? 0 : api_session_caller(req, srv, csrf_checked, out, &why);
    if (r > 0) return true;
    if (r < 0)
        api_error(req, 403, "forbidden", "%s", why);
    else
        api_error(req, 401, "unauthorized",
                  "missing or wrong API key; send \"Authorization: Bearer <key>\" with the key "
                  "from STATE/admin.key or your account's key");
    return false;
}

json_t *api_sandbox_json(const struct sbx *sb)
{
    json_t *v = model_sandbox_json(sbx_settings(sb));
    char created[40];
    time_rfc3339(created, sizeof created, sbx_created_ms(sb));
    json_object_set_new(v, "id", json_string(sbx_id(sb)));
    json_object_set_new(v, "account", json_string(sbx_account(sb)));
    json_object_set_new(v, "vcpu", json_deep_copy(json_object_get(v, "cpus"))); /* Cloud's */
    if (sbx_lease_ends_ms(sb)) {
        char ends[40];
        time_rfc3339(ends, sizeof ends, sbx_lease_ends_ms(sb));
        json_object_set_new(v, "endsAt", json_string(ends));
    }
    json_object_set_new(v, "status", json_string(sbx_status_name(sbx_state(sb))));
    json_object_set_new(v, "state", json_string(sbx_state_word(sbx_state(sb))));
    json_object_set_new(v, "createdAt", json_string(created));
    const char *why = sbx_stop_reason(sb); /* Runtime Cloud's stopReason */
    json_object_set_new(v, "stopReason", why ? json_string(why) : json_null());
    if (mcp_box_of(sb)) json_object_set_new(v, "mcp", mcp_servers_json(mcp_box_of(sb)));
    return v;
}

/* The sandbox the caller names: its own by id or name; the admin's reaches any
 * account's by id too (the dashboard's admin acts on every customer's sandboxes). */
static struct sbx *caller_sandbox(struct server *srv, const struct api_caller *who, const char *key)
{
    struct sbx *sb = server_sandbox_find(srv, who->account, key);
    return sb || !who->admin ? sb : server_sandbox_find(srv, NULL, key);
}

/* The same, or NULL after answering 404. */
static struct sbx *found_sandbox(struct httpd_req *req, struct server *srv,
                                 const struct api_caller *who, const char *key)
{
    struct sbx *sb = caller_sandbox(srv, who, key);
    if (!sb)
        api_error(req, 404, "not_found", "no sandbox %s; `runtime sandbox list` shows them", key);
    return sb;
}

/* label=K:V (Runtime Cloud's), K=V (runtimed's before it) or K alone: it has that label. */
static bool label_matches(const struct sbx *sb, const char *filter)
{
    const char *sep = strchr(filter, ':');
    if (!sep) sep = strchr(filter, '=');
    const struct model_map *labels = &sbx_settings(sb)->labels;
    if (!sep) return model_map_get(labels, filter) != NULL;
    char key[256];
    snprintf(key, sizeof key, "%.*s", (int)(sep - filter), filter);
    const char *v = model_map_get(labels, key);
    return v && strcmp(v, sep + 1) == 0;
}

#define LIST_LIMIT_MAX 100

/* What a listing asks for: every filter must hold (each state= or label= given). The
 * admin's account= names whose sandboxes ("*": everyone's); others see their own. */
static bool listed(const struct sbx *s, const struct api_caller *who, struct evkeyvalq *q)
{
    const char *account = who->admin ? evhttp_find_header(q, "account") : NULL;
    if (!account) account = who->account;
    if (strcmp(account, "*") != 0 && strcmp(sbx_account(s), account) != 0) return false;
    bool state_asked = false, state_ok = false;
    for (struct evkeyval *kv = q->tqh_first; kv; kv = kv->next.tqe_next) {
        if (strcmp(kv->key, "label") == 0 && !label_matches(s, kv->value)) return false;
        if (strcmp(kv->key, "name") == 0 && strcmp(sbx_settings(s)->name, kv->value) != 0)
            return false;
        if (strcmp(kv->key, "state") == 0) {
            state_asked = true;
            state_ok = state_ok || strcmp(sbx_state_word(sbx_state(s)), kv->value) == 0;
        }
    }
    return !state_asked || state_ok;
}

/* GET /v1/sandboxes: {data, nextCursor}, oldest first, as Runtime Cloud pages it: at most
 * `limit` (1 to 100, default 100) after the sandbox `cursor` names (the id the page
 * before ended with). */
static void list_sandboxes(struct httpd_req *req, struct server *srv, const struct api_caller *who)
{
    struct evkeyvalq q;
    const char *query = httpd_query(req);
    evhttp_parse_query_str(query ? query : "", &q);
    const char *lim = evhttp_find_header(&q, "limit"), *cursor = evhttp_find_header(&q, "cursor");
    char *end = NULL;
    long limit = lim ? strtol(lim, &end, 10) : LIST_LIMIT_MAX;
    if (lim && (*end || limit < 1 || limit > LIST_LIMIT_MAX)) {
        evhttp_clear_headers(&q);
        return api_error(req, 400, "invalid_request", "limit must be 1 to %d", LIST_LIMIT_MAX);
    }
    const char *account = evhttp_find_header(&q, "account");
    if (account && !who->admin && strcmp(account, who->account) != 0) {
        evhttp_clear_headers(&q);
        return api_error(req, 403, "forbidden",
                         "another account's sandboxes are the admin's to list");
    }
    char cursor_copy[PROTO_ID_LEN * 2] = "";
    if (cursor) str_copy(cursor_copy, sizeof cursor_copy, cursor); /* q is cleared before use */
    cursor = cursor ? cursor_copy : NULL;
    size_t n = 0;
    for (struct sbx *s = server_sandbox_first(srv); s; s = server_sandbox_next(s))
        n += listed(s, who, &q);
    struct sbx **v = calloc(n ? n : 1, sizeof *v); /* oldest first: the registry is newest first */
    size_t at = n;
    for (struct sbx *s = server_sandbox_first(srv); s && v; s = server_sandbox_next(s))
        if (listed(s, who, &q)) v[--at] = s;
    evhttp_clear_headers(&q);
    if (!v) return api_error(req, 500, "internal_error", "out of memory");
    size_t from = 0;
    if (cursor) { /* after it; past the end when it is not (any more) one of them */
        while (from < n && strcmp(sbx_id(v[from]), cursor) != 0)
            from++;
        from++;
    }
    json_t *data = json_array();
    size_t last = from;
    for (; last < n && last - from < (size_t)limit; last++)
        json_array_append_new(data, api_sandbox_json(v[last]));
    json_t *next = last < n ? json_string(sbx_id(v[last - 1])) : json_null();
    free(v);
    api_json(req, 200, json_pack("{s:o,s:o}", "data", data, "nextCursor", next));
}

/* The answers to a create, once the keeper has built the sandbox (libevent keeps
 * a request whose client went away until it is answered, then frees it). */
static void answer_creation(struct httpd_req *req, int status, struct sbx *sb, const err_t *err)
{
    if (sb) return api_json(req, status, api_sandbox_json(sb));
    api_fail(req, err);
}

static void answer_created(struct server *srv, struct sbx *sb, const err_t *err, void *arg)
{
    answer_creation(arg, 201, sb, err);
}

/* getOrCreate's answer when the name was taken: that sandbox, running, marked reused
 * (Runtime Cloud's SDK then stops it rather than deletes it at the end of a block). */
static void answer_reused(struct server *srv, struct sbx *sb, const err_t *err, void *arg)
{
    if (err) return api_fail(arg, err);
    json_t *v = api_sandbox_json(sb);
    json_object_set_new(v, "reused", json_true());
    api_json(arg, 200, v);
}

/* It is answered once it runs: woken if paused, started again if stopped. */
static void reuse_sandbox(struct server *srv, struct sbx *sb, struct httpd_req *req)
{
    err_t err = {0};
    int r = 0;
    switch (sbx_state(sb)) {
    case SBX_PAUSED:
    case SBX_PAUSING:
    case SBX_WAKING:
    case SBX_HIBERNATING:
    case SBX_HIBERNATED:
    case SBX_RESTORING:
        r = server_sandbox_resume(srv, sb, "getOrCreate", answer_reused, req, &err);
        break;
    case SBX_STOPPED:
    case SBX_STOPPING:
    case SBX_STARTING:
    case SBX_FAILED:
        r = server_sandbox_start(srv, sb, "getOrCreate", answer_reused, req, &err);
        break;
    case SBX_CREATING:
    case SBX_RUNNING:
    case SBX_STATE_COUNT:
        server_sandbox_when_created(srv, sb, answer_reused, req);
        break;
    case SBX_REMOVING:
        return api_error(req, 409, "busy", "sandbox %s is being removed; try again in a moment",
                         sbx_id(sb));
    }
    if (r < 0) api_fail(req, &err);
}

/* A removal on its way: what its answer names (the sandbox is freed before it). */
struct removal {
    struct httpd_req *req;
    char id[PROTO_ID_LEN];
    char name[MODEL_NAME_MAX];
};

/* Runtime Cloud's answer to a delete: {id, name, status: "deleted", deletedAt}. */
static void answer_deleted(struct server *srv, const err_t *err, void *arg)
{
    struct removal rm = *(struct removal *)arg;
    free(arg);
    if (err) return api_fail(rm.req, err);
    char now[40];
    time_rfc3339(now, sizeof now, now_unix_ms());
    api_json(rm.req, 200,
             json_pack("{s:s,s:o,s:s,s:s}", "id", rm.id, "name",
                       rm.name[0] ? json_string(rm.name) : json_null(), "status", "deleted",
                       "deletedAt", now));
}

static void delete_sandbox(struct httpd_req *req, struct server *srv, struct sbx *sb)
{
    err_t err = {0};
    struct removal *rm = calloc(1, sizeof *rm);
    if (!rm) return api_error(req, 500, "internal_error", "out of memory");
    rm->req = req;
    memcpy(rm->id, sbx_id(sb), sizeof rm->id);
    memcpy(rm->name, sbx_settings(sb)->name, sizeof rm->name);
    if (server_sandbox_delete(srv, sb, answer_deleted, rm, &err) < 0) {
        free(rm);
        api_fail(req, &err);
    }
}

/* getOrCreate: a name that exists is the answer, once it runs. */
static int get_or_create(json_t *body, bool *out, err_t *err)
{
    json_t *v = json_object_get(body, "getOrCreate");
    if (v && !json_is_boolean(v) && !json_is_null(v))
        return err_set(err, -EINVAL, "getOrCreate must be true or false");
    *out = json_is_true(v);
    return 0;
}

/* The account's own limits (the daemon's is the server's to check). */
static int check_limits(struct server *srv, const char *account,
                        const struct model_sandbox *settings, err_t *err)
{
    const struct account *acct = accounts_find(server_accounts(srv), account);
    size_t count;
    uint64_t memory;
    server_account_load(srv, account, &count, &memory);
    if (acct && acct->max_sandboxes && count >= acct->max_sandboxes)
        return err_set(err, -EAGAIN,
                       "account %s has %zu sandboxes, its limit maxSandboxes=%u; remove one "
                       "first",
                       account, count, acct->max_sandboxes);
    if (acct && acct->max_memory_mib && memory + settings->memory_mib > acct->max_memory_mib)
        return err_set(err, -EAGAIN,
                       "account %s would hold %llu MiB, past its limit maxMemoryMiB=%llu (its "
                       "sandboxes hold %llu MiB); ask for less memory or remove a sandbox",
                       account, (unsigned long long)(memory + settings->memory_mib),
                       (unsigned long long)acct->max_memory_mib, (unsigned long long)memory);
    return 0;
}

/* A sandbox gets at most the host's online CPUs: more would be a limit that never
 * limits, and a user who asks for 64 on a 2-core host should hear so. */
static int check_host_cpus(double cpus, long online, err_t *err)
{
    if (online > 0 && cpus > (double)online)
        return err_set(err, -EINVAL,
                       "cpus %g is more than this host's %ld online CPUs; ask for at most %ld",
                       cpus, online, online);
    return 0;
}

/* Runtime Cloud's create fields a self-hosted daemon does not have (billing, regions,
 * images, volumes, ...): refused by name (api_refuse_cloud_only). autoWake,
 * persistent and pausable are what runtimed always does when true. */
static const char *const create_cloud_only[] = {
    "funding",
    "region",
    "cpu",
    "cpuFloorMillis",
    "maxCostMicros",
    "maxTotalCostMicros",
    "user",
    "image",
    "snapshot",
    "spreadFrom",
    "volumes",
    "tailscale",
    "secrets",
    "autoWake",
    "persistent",
    "pausable",
    NULL,
};

/* A create's fields in order of what to say first: unknown ones (400, every one named),
 * then Runtime Cloud's that runtimed cannot honour (501); those it can are dropped from
 * body, which is left with the model's. false after answering. */
static bool cloud_fields_taken(struct httpd_req *req, json_t *body)
{
    if (!json_is_object(body)) return true; /* the parse says what is wrong */
    json_t *rest = json_copy(body);
    for (size_t i = 0; create_cloud_only[i]; i++)
        json_object_del(rest, create_cloud_only[i]);
    err_t err = {0};
    int r = json_known_fields(rest, NULL, model_sandbox_fields, &err);
    json_decref(rest);
    if (r < 0) {
        api_fail(req, &err);
        return false;
    }
    if (api_refuse_cloud_only(req, body, create_cloud_only)) return false;
    for (size_t i = 0; create_cloud_only[i]; i++)
        json_object_del(body, create_cloud_only[i]); /* null, or true as runtimed always is */
    return true;
}

static void create_sandbox(struct httpd_req *req, struct server *srv, const struct api_caller *who)
{
    json_t *body = api_body_json(req, true);
    if (!body) return;
    if (!cloud_fields_taken(req, body)) {
        json_decref(body);
        return;
    }
    err_t err = {0};
    struct model_sandbox settings;
    bool reuse = false;
    int r = get_or_create(body, &reuse, &err);
    if (!json_object_get(body, "hibernateAfterSeconds"))
        json_object_set_new(body, "hibernateAfterSeconds",
                            json_integer(server_hibernate_after_s(srv)));
    if (r == 0) r = model_sandbox_parse(body, &settings, &err);
    if (r == 0) model_network_as_cloud_reads(&settings.network);
    json_decref(body);
    if (r < 0) return api_fail(req, &err);
    struct sbx *old =
        settings.name[0] ? server_sandbox_find(srv, who->account, settings.name) : NULL;
    if (old && reuse) {
        reuse_sandbox(srv, old, req); /* 200 once it runs */
    } else if (old) {
        api_error(req, 409, "name_taken",
                  "a sandbox named %s exists (%s); pick another name, remove it, or pass "
                  "getOrCreate",
                  settings.name, sbx_id(old));
    } else if (check_host_cpus(settings.cpus, sysconf(_SC_NPROCESSORS_ONLN), &err) < 0) {
        api_fail(req, &err);
    } else if (check_limits(srv, who->account, &settings, &err) < 0) {
        log_warn("refused a sandbox of account %s: %s", who->account, err.msg);
        api_fail(req, &err);
    } else if (server_sandbox_create(srv, who->account, &settings, answer_created, req, &err) < 0) {
        api_fail(req, &err);
    }
    model_sandbox_clear(&settings); /* what the create did not take */
}

/* The answer to an API request (arg) that the server gives later: its JSON, or why not. */
static void answer_later(struct server *srv, json_t *v, const err_t *err, void *arg)
{
    if (v)
        api_json(arg, 200, json_incref(v));
    else
        api_fail(arg, err);
}

static void events(struct httpd_req *req, struct server *srv, struct sbx *sb)
{
    struct evkeyvalq q;
    const char *query = httpd_query(req);
    evhttp_parse_query_str(query ? query : "", &q);
    const char *after = evhttp_find_header(&q, "after");
    char *end = NULL;
    long long seq = after ? strtoll(after, &end, 10) : 0;
    bool bad = after && (*end || seq < 0);
    evhttp_clear_headers(&q);
    if (bad) return api_error(req, 400, "invalid_request", "after must be an event seq number");
    err_t err = {0};
    if (server_events(srv, sb, seq, answer_later, req, &err) < 0) return api_fail(req, &err);
}

/* 409 for a request that needs the sandbox running, saying what to do, with Runtime
 * Cloud's codes: sandbox_not_ready (it is on its way), sandbox_stopped. */
static void not_running(struct httpd_req *req, const struct sbx *sb)
{
    if (sbx_state(sb) == SBX_CREATING || sbx_state(sb) == SBX_STARTING)
        return api_error(req, 409, "sandbox_not_ready", "sandbox %s is %s; try again in a moment",
                         sbx_id(sb), sbx_state_said(sbx_state(sb)));
    api_error(req, 409, "sandbox_stopped",
              "sandbox %s is %s; start it with `runtime sandbox start %s` (its /workspace is "
              "kept), or remove it with `runtime sandbox rm %s`",
              sbx_id(sb), sbx_state_said(sbx_state(sb)), sbx_id(sb), sbx_id(sb));
}

static void serve_when_awake(struct server *srv, struct sbx *sb, const err_t *err, void *req);

/* POST .../mcp/{name}:approve {"fingerprint"}: a person approves the list they reviewed;
 * a server refused at its start then starts (a paused sandbox is woken for it). */
static void mcp_approve_route(struct httpd_req *req, struct server *srv,
                              const struct api_caller *who, const char *key, const char *name)
{
    struct sbx *sb = found_sandbox(req, srv, who, key);
    if (!sb) return;
    if (httpd_method(req) != HTTPD_POST)
        return api_error(req, 405, "method_not_allowed", "use POST .../mcp/NAME:approve");
    err_t err = {0};
    int admitted = server_sandbox_admit(srv, sb, "mcp", serve_when_awake, req, &err);
    if (admitted < 0) return api_fail(req, &err);
    if (admitted > 0) return; /* approved once it is awake */
    if (sbx_state(sb) != SBX_RUNNING) return not_running(req, sb);
    json_t *body = api_body_json(req, false), *out = NULL;
    if (!body) return;
    const char *fp = json_string_value(json_object_get(body, "fingerprint"));
    struct api_issues is = {0};
    if (!fp || strlen(fp) != 64 || strspn(fp, "0123456789abcdef") != 64)
        api_issue(&is, "fingerprint", "the whole fingerprint the review showed: 64 hex digits");
    if (json_object_size(body) != (fp ? 1u : 0u)) api_issue(&is, "body", "only fingerprint");
    if (api_issues_reply(req, &is)) return json_decref(body);
    char by[ACCOUNT_NAME_MAX + 40];
    snprintf(by, sizeof by, "%s%s", who->admin ? "admin" : who->account,
             who->session ? " (dashboard)" : " (API key)");
    int r = mcp_approve(sb, name, fp, by, &out, &err);
    json_decref(body);
    if (r < 0) return api_fail(req, &err);
    api_json(req, 200, out);
}

static void mcp_route(struct httpd_req *req, struct server *srv, struct sbx *sb, const char *name)
{
    enum httpd_method m = httpd_method(req);
    err_t err = {0};
    if (name && m == HTTPD_DELETE) {
        if (mcp_stop(srv, sb, name, &err) < 0) return api_fail(req, &err);
        return api_no_content(req);
    }
    if (!name && m == HTTPD_DELETE)
        return api_json(req, 200, json_pack("{s:b}", "stopped", mcp_stop_all(srv, sb)));
    if (!name && m == HTTPD_GET) {
        static const char *const known[] = {"wait", NULL};
        struct evkeyvalq q;
        if (!api_query(req, &q, known)) return;
        const char *wait = evhttp_find_header(&q, "wait");
        char *end = NULL;
        long secs = wait ? strtol(wait, &end, 10) : 0;
        bool bad = wait && (*end || secs < 0 || secs > 3600);
        evhttp_clear_headers(&q);
        if (bad) return api_error(req, 400, "invalid_request", "wait must be 0 to 3600 seconds");
        return mcp_status_reply(srv, sb, req, (uint32_t)secs * 1000);
    }
    if (!name && m == HTTPD_POST) {
        if (sbx_state(sb) != SBX_RUNNING) return not_running(req, sb);
        json_t *body = api_body_json(req, false), *out = NULL;
        if (!body) return;
        int r = mcp_start(srv, sb, body, &out, &err);
        json_decref(body);
        if (r < 0) return api_fail(req, &err);
        return api_json(req, 202, out);
    }
    api_error(req, 405, "method_not_allowed",
              "use POST, GET or DELETE /v1/sandboxes/ID/mcp, or DELETE "
              "/v1/sandboxes/ID/mcp/NAME");
}

/* GET /v1/sandboxes/{id}/mcp/{name}/logs[?follow=1]: kept in the daemon, so a paused
 * sandbox is not woken for it. */
static void mcp_logs(struct httpd_req *req, struct server *srv, const struct api_caller *who,
                     const char *key, const char *name)
{
    struct sbx *sb = found_sandbox(req, srv, who, key);
    if (!sb) return;
    if (httpd_method(req) != HTTPD_GET)
        return api_error(req, 405, "method_not_allowed", "use GET .../mcp/NAME/logs");
    struct evkeyvalq q;
    const char *query = httpd_query(req);
    evhttp_parse_query_str(query ? query : "", &q);
    const char *follow = evhttp_find_header(&q, "follow");
    bool on = follow && (strcmp(follow, "1") == 0 || strcmp(follow, "true") == 0);
    bool bad = follow && !on && strcmp(follow, "0") != 0 && strcmp(follow, "false") != 0;
    evhttp_clear_headers(&q);
    if (bad) return api_error(req, 400, "invalid_request", "follow must be true or false (1 or 0)");
    err_t err = {0};
    if (mcp_logs_reply(srv, sb, name, req, on, &err) < 0) api_fail(req, &err);
}

/* GET /v1/sandboxes/{id}/mcp/{name}/review and .../calls: kept in the daemon, so a
 * paused sandbox is not woken for them. */
static void mcp_read_route(struct httpd_req *req, struct server *srv, const struct api_caller *who,
                           const char *key, const char *name, const char *what)
{
    struct sbx *sb = found_sandbox(req, srv, who, key);
    if (!sb) return;
    if (httpd_method(req) != HTTPD_GET)
        return api_error(req, 405, "method_not_allowed", "use GET .../mcp/NAME/%s", what);
    json_t *out = NULL;
    err_t err = {0};
    if (strcmp(what, "review") == 0 && mcp_review(sb, name, &out, &err) < 0)
        return api_fail(req, &err);
    if (strcmp(what, "calls") == 0) {
        struct mcp_server *ms = mcp_server_of(sb, name, &err);
        if (!ms) return api_fail(req, &err);
        out = mcp_calls_json(ms);
    }
    api_json(req, 200, out);
}

static void answer_sandbox(struct server *srv, struct sbx *sb, const err_t *err, void *req)
{
    if (err) return api_fail(req, err);
    api_json(req, 200, api_sandbox_json(sb));
}

static void route(struct httpd_req *req, void *arg);

/* The sandbox was woken for this request: it is served as if it had just come. */
static void serve_when_awake(struct server *srv, struct sbx *sb, const err_t *err, void *req)
{
    if (err) return api_fail(req, err);
    route(req, srv);
}

#define WAIT_FOR_MAX_S 3600

/* GET /v1/sandboxes/{id}[?waitFor=STATE&timeoutSeconds=N]: at once, or once it is in
 * that state (Runtime Cloud's words) or the time is up, as it is then (200 either way:
 * the caller reads its state). */
static void get_sandbox(struct httpd_req *req, struct server *srv, struct sbx *sb)
{
    static const char *const known[] = {"waitFor", "timeoutSeconds", NULL};
    struct evkeyvalq q;
    if (!api_query(req, &q, known)) return;
    const char *word = evhttp_find_header(&q, "waitFor"),
               *secs = evhttp_find_header(&q, "timeoutSeconds");
    char *end = NULL;
    long timeout = secs ? strtol(secs, &end, 10) : 60;
    bool bad = secs && (!*secs || *end || timeout < 0 || timeout > WAIT_FOR_MAX_S);
    char state[24] = "";
    if (word) str_copy(state, sizeof state, word);
    evhttp_clear_headers(&q); /* word and secs go with it */
    if (bad)
        return api_error(req, 400, "invalid_request", "timeoutSeconds must be 0 to %d",
                         WAIT_FOR_MAX_S);
    if (!state[0]) return api_json(req, 200, api_sandbox_json(sb));
    err_t err = {0};
    if (server_sandbox_wait_state(srv, sb, state, (uint32_t)timeout * 1000, answer_sandbox, req,
                                  &err) < 0)
        api_fail(req, &err);
}

/* The changes of a sandbox's life: answered once the change has landed. */
typedef int sandbox_change_fn(struct server *srv, struct sbx *sb, const char *why,
                              server_sandbox_done_fn *done, void *arg, err_t *err);

static void change_sandbox(struct httpd_req *req, struct server *srv, struct sbx *sb,
                           sandbox_change_fn *change)
{
    err_t err = {0};
    if (change(srv, sb, "api", answer_sandbox, req, &err) < 0) api_fail(req, &err);
}

static void pause_route(struct httpd_req *req, struct server *srv, struct sbx *sb, const char *sub)
{
    change_sandbox(req, srv, sb, server_sandbox_pause);
}
static void hibernate_route(struct httpd_req *req, struct server *srv, struct sbx *sb,
                            const char *sub)
{
    change_sandbox(req, srv, sb, server_sandbox_hibernate);
}
static void wake_route(struct httpd_req *req, struct server *srv, struct sbx *sb, const char *sub)
{
    change_sandbox(req, srv, sb, server_sandbox_resume);
}
static void stop_route(struct httpd_req *req, struct server *srv, struct sbx *sb, const char *sub)
{
    change_sandbox(req, srv, sb, server_sandbox_stop);
}
static void start_route(struct httpd_req *req, struct server *srv, struct sbx *sb, const char *sub)
{
    change_sandbox(req, srv, sb, server_sandbox_start);
}
static void exec_route(struct httpd_req *req, struct server *srv, struct sbx *sb, const char *sub)
{
    api_exec(req, srv, sb);
}
static void events_route(struct httpd_req *req, struct server *srv, struct sbx *sb, const char *sub)
{
    events(req, srv, sb);
}
/* .../files?path= (runtimed's) and .../files/content?path= (Runtime Cloud's). */
static void files_route(struct httpd_req *req, struct server *srv, struct sbx *sb, const char *sub)
{
    if (!sub || strcmp(sub, "content") == 0) return api_files(req, srv, sb, sub);
    if (httpd_method(req) == HTTPD_GET) return api_files_op(req, srv, sb, sub);
    api_error(req, 405, "method_not_allowed", ".../files/%s takes GET", sub);
}
/* .../files:VERB, Runtime Cloud's changes of the file tree. */
static void files_verb_route(struct httpd_req *req, struct server *srv, struct sbx *sb,
                             const char *verb)
{
    api_files_op(req, srv, sb, verb);
}

/* Runtime Cloud's :extend {seconds}: the lease of this run ends that much later. */
static void extend_route(struct httpd_req *req, struct server *srv, struct sbx *sb, const char *sub)
{
    static const char *const known[] = {"seconds", NULL};
    json_t *body = api_body_json(req, false);
    if (!body) return;
    err_t err = {0};
    json_t *secs = json_object_get(body, "seconds");
    json_int_t n = json_integer_value(secs);
    int r = json_is_object(body) ? json_known_fields(body, NULL, known, &err)
                                 : err_set(&err, -EINVAL, "the body must be {seconds}");
    if (r == 0 && (!json_is_integer(secs) || n < 1 || n > MODEL_LEASE_MAX_S))
        r = err_set(&err, -EINVAL, "seconds must be 1 to %d", MODEL_LEASE_MAX_S);
    json_decref(body);
    if (r == 0) r = server_sandbox_extend(sb, (uint32_t)n, &err);
    if (r < 0) return api_fail(req, &err);
    api_json(req, 200, api_sandbox_json(sb));
}

#define GET_ (1u << HTTPD_GET)
#define POST_ (1u << HTTPD_POST)
#define PUT_ (1u << HTTPD_PUT)
#define DELETE_ (1u << HTTPD_DELETE)

/* What can be asked of one sandbox, .../{id}/ACTION[/SUB] (or .../{id}:ACTION): the
 * methods each takes, and whether it needs the sandbox running (a paused one is woken
 * for it; one that is not running is refused). */
static const struct sandbox_route {
    const char *action;
    unsigned methods;
    unsigned running; /* the methods that need it running */
    bool takes_sub;   /* .../ACTION/SUB */
    void (*serve)(struct httpd_req *req, struct server *srv, struct sbx *sb, const char *sub);
} sandbox_routes[] = {
    {"pause", POST_, 0, false, pause_route},
    {"hibernate", POST_, 0, false, hibernate_route},
    {"wake", POST_, 0, false, wake_route},
    {"resume", POST_, 0, false, wake_route}, /* runtimed's earlier name */
    {"stop", POST_, 0, false, stop_route},
    {"start", POST_, 0, false, start_route},
    {"exec", POST_, POST_, false, exec_route},
    {"files", GET_ | PUT_, GET_ | PUT_, true, files_route},
    {"files:", POST_, POST_, false, files_verb_route},
    {"uploads", POST_ | PUT_, POST_ | PUT_, true, api_uploads},
    {"network", GET_ | PUT_, 0, false, api_network},
    {":update", POST_, 0, false, api_update}, /* .../{id}:update only */
    {":extend", POST_, 0, false, extend_route},
    {"events", GET_, 0, false, events_route},
    {"mcp", GET_ | POST_ | DELETE_, POST_, true, mcp_route},
};

/* The route of an action: its row, or for "files:mkdir" the row "files:" with sub
 * "mkdir". */
static const struct sandbox_route *sandbox_route_of(const char *action, const char **sub)
{
    for (size_t i = 0; i < ARRAY_LEN(sandbox_routes); i++)
        if (strcmp(action, sandbox_routes[i].action) == 0) return &sandbox_routes[i];
    const char *colon = strchr(action, ':');
    for (size_t i = 0; colon && i < ARRAY_LEN(sandbox_routes); i++) {
        const char *name = sandbox_routes[i].action;
        size_t n = strlen(name);
        if (name[n - 1] == ':' && strncmp(action, name, n) == 0) {
            *sub = action + n;
            return &sandbox_routes[i];
        }
    }
    return NULL;
}

static void one_sandbox(struct httpd_req *req, struct server *srv, const struct api_caller *who,
                        const char *key, const char *action, const char *sub)
{
    enum httpd_method m = httpd_method(req);
    struct sbx *sb = found_sandbox(req, srv, who, key);
    if (!sb) return;
    if (sbx_state(sb) == SBX_REMOVING && m != HTTPD_GET)
        return api_error(req, 409, "busy", "sandbox %s is being removed", sbx_id(sb));
    err_t err = {0};
    if (!action && m == HTTPD_GET) return get_sandbox(req, srv, sb);
    if (!action && m == HTTPD_DELETE) return delete_sandbox(req, srv, sb);
    const struct sandbox_route *rt = action ? sandbox_route_of(action, &sub) : NULL;
    if (!rt || (sub && !rt->takes_sub && !strchr(action, ':')))
        return api_error(req, 404, "route_not_found",
                         "no such API path: %s; api/openapi.yaml lists them", httpd_path(req));
    if (m > HTTPD_DELETE || !(rt->methods & (1u << m)))
        return api_error(req, 405, "method_not_allowed",
                         "that method is not allowed on .../%s; api/openapi.yaml lists what "
                         "each path takes",
                         action);
    if (rt->running & (1u << m)) {
        int admitted = server_sandbox_admit(srv, sb, action, serve_when_awake, req, &err);
        if (admitted < 0) return api_fail(req, &err);
        if (admitted > 0) return; /* served once it is awake */
        if (sbx_state(sb) != SBX_RUNNING && strcmp(rt->action, "mcp") != 0)
            return not_running(req, sb);
    }
    rt->serve(req, srv, sb, sub);
}

static void metrics(struct httpd_req *req, struct server *srv)
{
    char *text = server_metrics_text(srv);
    if (!text) return api_error(req, 500, "internal_error", "out of memory");
    struct evbuffer *out = evbuffer_new();
    evbuffer_add(out, text, strlen(text));
    free(text);
    httpd_add_header(req, "Content-Type", "text/plain; version=0.0.4");
    httpd_reply(req, 200, out);
    evbuffer_free(out);
}

/* Splits "/v1/sandboxes/ID/ACTION" into segments in place: their count, or
 * -E2BIG past max. */
static int split_path(char *path, char **seg, int max)
{
    int n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(path, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
        if (n == max) return -E2BIG;
        seg[n++] = tok;
    }
    return n;
}

/* Runtime Cloud's form of a change, POST /v1/sandboxes/{id}:VERB: the same routes
 * as .../{id}/VERB (restart is start: a stopped sandbox built again on its disk). */
static void one_sandbox_verb(struct httpd_req *req, struct server *srv,
                             const struct api_caller *who, char *key_verb)
{
    static const char *const verbs[][2] = {
        {"stop", "stop"},      {"pause", "pause"},         {"wake", "wake"},
        {"exec", "exec"},      {"restart", "start"},       {"update", ":update"},
        {"extend", ":extend"}, {"hibernate", "hibernate"},
    };
    char *colon = strrchr(key_verb, ':');
    *colon = '\0';
    for (size_t i = 0; i < ARRAY_LEN(verbs); i++)
        if (strcmp(colon + 1, verbs[i][0]) == 0) {
            if (httpd_method(req) != HTTPD_POST)
                return api_error(req, 405, "method_not_allowed", ":%s takes POST", verbs[i][0]);
            return one_sandbox(req, srv, who, key_verb, verbs[i][1], NULL);
        }
    api_error(req, 404, "route_not_found",
              "no change :%.40s of a sandbox here; these are: :stop, :pause, :hibernate, "
              ":wake, :exec, :restart, :update, :extend",
              colon + 1);
}

/* GET /v1/usage/series[?sandbox=ID | ?account=NAME]: the charts' minutes. An account's
 * key sees its own; the admin names any account (default: its own, "default"). */
static void usage_series(struct httpd_req *req, struct server *srv, const struct api_caller *who)
{
    static const char *const known[] = {"sandbox", "account", NULL};
    struct evkeyvalq q;
    if (!api_query(req, &q, known)) return;
    /* Copied out: q's strings go with it. */
    char id[PROTO_ID_LEN + MODEL_NAME_MAX] = "", name[ACCOUNT_NAME_MAX] = "";
    const char *given_id = evhttp_find_header(&q, "sandbox");
    const char *given_account = evhttp_find_header(&q, "account");
    bool both = given_id && given_account;
    if (given_id) str_copy(id, sizeof id, given_id);
    str_copy(name, sizeof name, given_account ? given_account : who->account);
    evhttp_clear_headers(&q);
    if (both) return api_error(req, 400, "invalid_request", "give sandbox or account, not both");
    struct sbx *sb = id[0] ? caller_sandbox(srv, who, id) : NULL;
    if (id[0] && !sb) return api_error(req, 404, "not_found", "no sandbox %s", id);
    if (!who->admin && strcmp(name, who->account) != 0)
        return api_error(req, 403, "forbidden", "another account's usage is the admin's to see");
    if (!accounts_find(server_accounts(srv), name) && strcmp(name, ACCOUNT_DEFAULT) != 0)
        return api_error(req, 404, "not_found", "no account %s", name);
    api_json(req, 200, server_usage_series(srv, name, sb));
}

/* GET /v1/mcp/catalog/{id}/review: an entry's tools read before its first start. */
static void catalog_review(struct httpd_req *req, struct server *srv, const char *id)
{
    json_t *out = NULL;
    err_t err = {0};
    if (mcp_catalog_review(mcp_catalog(srv), id, &out, &err) < 0) return api_fail(req, &err);
    api_json(req, 200, out);
}

/* Whether segment is "NAME:verb", and then cuts it to NAME. */
static bool verb_is(char *segment, const char *verb)
{
    char *colon = strrchr(segment, ':');
    if (!colon || colon == segment || strcmp(colon + 1, verb) != 0) return false;
    *colon = '\0';
    return true;
}

/* With the body in (and again after a wake): what the request asks for. */
static void route(struct httpd_req *req, void *arg)
{
    struct server *srv = arg;
    struct api_caller who;
    if (!authenticate(req, srv, &who)) return;
    if (api_idempotency_begin(req, who.account)) return;
    const char *raw = httpd_path(req);
    size_t decoded_len = 0;
    char *path = evhttp_uridecode(raw, 0, &decoded_len);
    if (path && strlen(path) != decoded_len) { /* a %00: the name would end there */
        free(path);
        return api_error(req, 400, "invalid_request",
                         "the path holds %%00, a NUL byte, which no name or id may hold");
    }
    char *seg[6];
    int n = path ? split_path(path, seg, 6) : -ENOMEM;
    enum httpd_method m = httpd_method(req);
    if (n >= 2 && strcmp(seg[0], "v1") == 0 && strcmp(seg[1], "sandboxes") == 0) {
        if (n == 2 && m == HTTPD_GET)
            list_sandboxes(req, srv, &who);
        else if (n == 2 && m == HTTPD_POST)
            create_sandbox(req, srv, &who);
        else if (n == 3 && strchr(seg[2], ':'))
            one_sandbox_verb(req, srv, &who, seg[2]);
        else if (n == 3 || (n == 4 && seg[3][0] != ':')) /* :verb follows the id alone */
            one_sandbox(req, srv, &who, seg[2], n == 4 ? seg[3] : NULL, NULL);
        else if (n == 5 && strcmp(seg[3], "mcp") == 0 && verb_is(seg[4], "approve"))
            mcp_approve_route(req, srv, &who, seg[2], seg[4]);
        else if (n == 5)
            one_sandbox(req, srv, &who, seg[2], seg[3], seg[4]);
        else if (n == 6 && strcmp(seg[3], "mcp") == 0 && strcmp(seg[5], "logs") == 0)
            mcp_logs(req, srv, &who, seg[2], seg[4]);
        else if (n == 6 && strcmp(seg[3], "mcp") == 0 &&
                 (strcmp(seg[5], "review") == 0 || strcmp(seg[5], "calls") == 0))
            mcp_read_route(req, srv, &who, seg[2], seg[4], seg[5]);
        else
            api_error(req, 404, "not_found", "no such API path: %s", raw);
    } else if (n == 3 && strcmp(seg[0], "v1") == 0 && strcmp(seg[1], "usage") == 0 &&
               strcmp(seg[2], "series") == 0 && m == HTTPD_GET) {
        usage_series(req, srv, &who);
    } else if (n == 2 && strcmp(seg[0], "v1") == 0 && strcmp(seg[1], "usage") == 0 &&
               m == HTTPD_GET) {
        err_t err = {0};
        if (server_usage(srv, who.admin ? NULL : who.account, answer_later, req, &err) < 0)
            api_fail(req, &err);
    } else if (n == 3 && strcmp(seg[0], "v1") == 0 && strcmp(seg[1], "events") == 0 &&
               strcmp(seg[2], "stream") == 0 && m == HTTPD_GET) {
        api_events_stream(req, srv, &who);
    } else if (n == 1 && strcmp(seg[0], "metrics") == 0 && m == HTTPD_GET) {
        if (who.admin)
            metrics(req, srv);
        else
            api_error(req, 403, "forbidden", "/metrics covers every account: admin key only");
    } else if (n == 3 && strcmp(seg[0], "v1") == 0 && strcmp(seg[1], "mcp") == 0 &&
               strcmp(seg[2], "catalog") == 0 && m == HTTPD_GET) {
        api_json(req, 200, catalog_cloud_json(mcp_catalog(srv)));
    } else if (n == 5 && strcmp(seg[0], "v1") == 0 && strcmp(seg[1], "mcp") == 0 &&
               strcmp(seg[2], "catalog") == 0 && strcmp(seg[4], "review") == 0 && m == HTTPD_GET) {
        catalog_review(req, srv, seg[3]);
    } else if (n >= 2 && n <= 3 && strcmp(seg[0], "v1") == 0 &&
               strcmp(seg[1], "egress-secrets") == 0) {
        api_egress_secrets(req, srv, &who, n == 3 ? seg[2] : NULL);
    } else if (n >= 2 && strcmp(seg[0], "v1") == 0 && strcmp(seg[1], "secrets") == 0) {
        api_jobs_secrets(req);
    } else if (n >= 2 && strcmp(seg[0], "v1") == 0 &&
               (strcmp(seg[1], "me") == 0 || strcmp(seg[1], "connect") == 0)) {
        api_connect(req, srv, &who, seg + 1, n - 1);
    } else if (n >= 2 && n <= 4 && strcmp(seg[0], "v1") == 0 && strcmp(seg[1], "accounts") == 0) {
        api_accounts(req, srv, &who, n >= 3 ? seg[2] : NULL, n == 4 ? seg[3] : NULL);
    } else {
        api_error(req, 404, "not_found", "no such API path: %s", raw);
    }
    free(path);
}

/* The sandbox a path names (/v1/sandboxes/KEY/...), if the caller has it: what
 * the request holds is charged to it. */
static struct sbx *sandbox_of_path(struct server *srv, const struct api_caller *who,
                                   const char *path)
{
    const char *prefix = "/v1/sandboxes/";
    if (strncmp(path, prefix, strlen(prefix)) != 0) return NULL;
    char key[PROTO_ID_LEN + MODEL_NAME_MAX];
    const char *start = path + strlen(prefix), *end = strchr(start, '/');
    size_t n = end ? (size_t)(end - start) : strlen(start);
    if (n == 0 || n >= sizeof key) return NULL;
    memcpy(key, start, n);
    key[n] = '\0';
    return caller_sandbox(srv, who, key);
}

static bool is_upload(struct httpd_req *req)
{
    const char *path = httpd_path(req);
    size_t n = strlen(path);
    return httpd_method(req) == HTTPD_PUT && n > 6 && strcmp(path + n - 6, "/files") == 0;
}

/* Before any body is read: the gateway checks its own token; the API the key.
 * Nobody unauthenticated gets a byte of theirs read past the head. */
void api_head(struct httpd_req *req, struct server *srv)
{
    const char *path = httpd_path(req);
    /* For load balancers and supervisors: no key, and nothing about the daemon but that it
     * answers. */
    if (strcmp(path, "/healthz") == 0) {
        if (httpd_method(req) != HTTPD_GET)
            return api_error(req, 405, "method_not_allowed", "use GET /healthz");
        return api_json(req, 200, json_pack("{s:b}", "ok", 1));
    }
    /* The gateway's, with its own token; and the OAuth discovery paths, which it answers. */
    if (strncmp(path, "/mcp/", 5) == 0 || strncmp(path, "/.well-known/", 13) == 0)
        return gateway_head(srv, req);
    if (api_dashboard_path(path)) return api_dashboard(req, srv);
    if (strncmp(path, "/api/connect/", 13) == 0) return api_connect_head(req, srv); /* login */
    struct api_caller who;
    if (!authenticate(req, srv, &who)) return;
    httpd_trust(req);
    struct sbx *sb = sandbox_of_path(srv, &who, path);
    httpd_charge(req, sb ? sbx_budget(sb) : server_budget(srv));
    httpd_read_body(req, is_upload(req) ? API_MAX_FILE_BODY : API_MAX_JSON_BODY, route, srv);
}

void api_http_fail(struct httpd_req *req, int status, const char *code, const char *message,
                   struct server *srv)
{
    const char *path = httpd_path(req);
    if (strncmp(path, "/mcp/", 5) == 0) return gateway_fail(req, status, message);
    size_t n = strlen(path);
    if (status == 413 && n > 14 && strcmp(path + n - 14, "/files/content") == 0)
        return api_error(req, status, code,
                         "%s; a file over 1 MiB goes in chunks: POST .../uploads (the SDKs' "
                         "files.write does it)",
                         message);
    api_error(req, status, code, "%s", message);
}
