/* The device login (docs/login.md): Runtime Cloud's /api/connect/... for the machine
 * that logs in (start and token without a key, confirm and disconnect with the key
 * it got), and /v1/connect/... and /v1/me for the person who approves it and the
 * programs that use it. The requests themselves are src/connect's; the keys are
 * connections of an account (src/accounts). */
#include <errno.h>
#include <event2/buffer.h>
#include <stdlib.h>
#include <string.h>

#include "../connect/connect.h"
#include "api_impl.h"

/* One daemon serves one table; made when first asked for. */
static struct connect_table *table(void)
{
    static struct connect_table *t;
    if (!t) t = connect_table_new();
    return t;
}

/* ---- the origin the machine reached us at ---- */

/* A Host field that is a host[:port] and nothing else (it is echoed in a link). */
static bool host_ok(const char *h)
{
    size_t n = h ? strlen(h) : 0;
    if (n == 0 || n > 255) return false;
    for (size_t i = 0; i < n; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]", h[i]))
            return false;
    return true;
}

/* scheme://host[:port]: the scheme the daemon serves (or --public-url's, behind a
 * proxy that speaks TLS), the host the client asked for (the page must be where
 * the machine's own auth origin is), else --public-url's. */
static void origin_of(struct httpd_req *req, struct server *srv, char *out, size_t size)
{
    const struct server_config *cfg = server_config(srv);
    const char *pub = cfg->public_url;
    bool https = cfg->tls || strncmp(pub, "https://", 8) == 0;
    const char *host = httpd_header(req, "Host");
    if (host_ok(host)) {
        snprintf(out, size, "%s://%s", https ? "https" : "http", host);
        return;
    }
    const char *rest = strstr(pub, "://");
    rest = rest ? rest + 3 : pub;
    snprintf(out, size, "%s://%.*s", https ? "https" : "http", (int)strcspn(rest, "/?#"), rest);
}

/* ---- bodies ---- */

/* The body as an object of only the known fields; NULL after answering 400. */
static json_t *body_object(struct httpd_req *req, const char *const *known, bool allow_empty)
{
    json_t *body = api_body_json(req, allow_empty);
    if (!body) return NULL;
    err_t err = {0};
    if (!json_is_object(body) || json_known_fields(body, NULL, known, &err) < 0) {
        json_decref(body);
        api_error(req, 400, "invalid_request", "%s",
                  err.msg[0] ? err.msg : "the body must be a JSON object");
        return NULL;
    }
    return body;
}

static const char *field(json_t *body, const char *name)
{
    return json_string_value(json_object_get(body, name));
}

/* ---- the machine's routes ---- */

static void check_start(json_t *body, struct api_issues *is)
{
    err_t err = {0};
    if (connect_check_agent(field(body, "agentName"), &err) < 0)
        api_issue(is, "agentName", "%s", err.msg);
    if (connect_check_machine(field(body, "machine"), &err) < 0)
        api_issue(is, "machine", "%s", err.msg);
    if (connect_check_public_key(field(body, "publicKey"), &err) < 0)
        api_issue(is, "publicKey", "%s", err.msg);
}

/* POST /api/connect/start {agentName, publicKey, machine}. */
static void start(struct httpd_req *req, struct server *srv)
{
    static const char *const known[] = {"agentName", "publicKey", "machine", NULL};
    json_t *body = body_object(req, known, false);
    if (!body) return;
    struct api_issues is = {0};
    check_start(body, &is);
    if (api_issues_reply(req, &is)) return json_decref(body);
    char device[CONNECT_DEVICE_CODE_LEN + 1], origin[300], uri[400];
    struct connect_request *r = NULL;
    err_t err = {0};
    int rc = connect_start(table(), field(body, "agentName"), field(body, "machine"),
                           field(body, "publicKey"), httpd_client_address(req), now_unix_ms(),
                           device, &r, &err);
    json_decref(body);
    if (rc == -EAGAIN) return api_error(req, 429, "rate_limited", "%s", err.msg);
    if (rc < 0) return api_fail(req, &err);
    log_info("connect: request %s from %s (machine \"%s\", agent \"%s\")", r->user_code, r->address,
             r->machine, r->agent_name);
    origin_of(req, srv, origin, sizeof origin);
    snprintf(uri, sizeof uri, "%s/connect?code=%s", origin, r->user_code);
    api_json(req, 200,
             json_pack("{s:s,s:s,s:s,s:I}", "verificationUri", uri, "deviceCode", device,
                       "userCode", r->user_code, "expiresAt", (json_int_t)r->expires_ms));
    explicit_bzero(device, sizeof device);
}

static json_t *token_answer(struct connect_request *r)
{
    switch (r->state) {
    case CONNECT_APPROVED:
        return json_pack("{s:s,s:s,s:s,s:s}", "status", "connected", "encryptedKey", r->sealed,
                         "connectionId", r->connection_id, "orgId", r->account);
    case CONNECT_PENDING:
    case CONNECT_APPROVING:
        break;
    case CONNECT_DENIED:
        return json_pack("{s:s}", "status", "denied");
    case CONNECT_CONFIRMED: /* delivered: nothing more to hand out */
    case CONNECT_EXPIRED:
        return json_pack("{s:s}", "status", "expired");
    }
    return json_pack("{s:s}", "status", "pending");
}

/* POST /api/connect/token {deviceCode, action?: "cancel"}. */
static void token(struct httpd_req *req)
{
    static const char *const known[] = {"deviceCode", "action", NULL};
    json_t *body = body_object(req, known, false);
    if (!body) return;
    const char *code = field(body, "deviceCode"), *wish = field(body, "action");
    bool cancel = wish && strcmp(wish, "cancel") == 0;
    bool ok = connect_device_code_ok(code) && (!json_object_get(body, "action") || cancel);
    struct connect_request *r = ok ? connect_by_device(table(), code, now_unix_ms()) : NULL;
    json_decref(body);
    if (!ok)
        return api_error(req, 400, "invalid_request",
                         "the body must be {deviceCode} (43 of A-Z, a-z, 0-9, - and _), with "
                         "action \"cancel\" to withdraw it");
    if (!r) return api_error(req, 404, "not_found", "no such connection request, or it is over");
    if (cancel && (r->state == CONNECT_PENDING)) {
        connect_denied(r);
        log_info("connect: request %s withdrawn by its machine", r->user_code);
        return api_json(req, 200, json_pack("{s:s}", "status", "canceled"));
    }
    if (connect_poll_too_soon(r, now_ms()))
        return api_json(req, 200, json_pack("{s:s}", "status", "pending"));
    api_json(req, 200, token_answer(r));
}

/* The connection whose key the request bears (and whose account is in force). */
static const struct account_connection *bearer_connection(struct httpd_req *req, struct server *srv)
{
    const char *h = httpd_header(req, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7) != 0) return NULL;
    if (!accounts_authenticate(server_accounts(srv), h + 7)) return NULL;
    return accounts_connection_by_key(server_accounts(srv), h + 7);
}

static void not_connected(struct httpd_req *req)
{
    api_error(req, 401, "unauthorized",
              "this connection is no longer active (or the key is not a connection's); run "
              "`runtime login`");
}

/* The connection a machine's call comes from (its key as bearer, an empty body), or NULL
 * after answering. */
static const struct account_connection *calling_machine(struct httpd_req *req, struct server *srv)
{
    static const char *const known[] = {NULL};
    const struct account_connection *c = bearer_connection(req, srv);
    if (!c) {
        not_connected(req);
        return NULL;
    }
    json_t *body = body_object(req, known, true);
    json_decref(body);
    return body ? c : NULL;
}

/* POST /api/connect/confirm {} with the new key: the machine has it, so the sealed
 * copy goes. Also how a machine asks whether its saved key is still connected. */
static void confirm(struct httpd_req *req, struct server *srv)
{
    const struct account_connection *c = calling_machine(req, srv);
    if (!c) return;
    struct connect_request *r = connect_by_connection(table(), c->id, now_unix_ms());
    if (r && r->state == CONNECT_APPROVED) {
        connect_confirmed(r);
        log_info("connect: connection %s of account %s (machine \"%s\", agent \"%s\") confirmed "
                 "by its machine",
                 c->id, c->account, c->machine, c->agent_name);
    }
    api_json(req, 200, json_pack("{s:b}", "connected", 1));
}

/* A revocation on its way to the disk: its answer, and what the log says. */
struct revocation {
    struct httpd_req *req;
    bool by_machine; /* disconnect's answer, else the API's 204 */
    char id[CONNECTION_ID_LEN + 1], account[ACCOUNT_NAME_MAX];
};

static void revoked(const err_t *err, const char *key, void *arg)
{
    struct revocation *rv = arg;
    if (err && err->code == -ECANCELED) return free(rv);
    if (err) {
        api_fail(rv->req, err);
    } else {
        log_info("connect: connection %s of account %s revoked (%s)", rv->id, rv->account,
                 rv->by_machine ? "disconnect, by its machine" : "through the API");
        if (rv->by_machine)
            api_json(rv->req, 200, json_pack("{s:b}", "disconnected", 1));
        else
            api_no_content(rv->req);
    }
    free(rv);
}

static void revoke(struct httpd_req *req, struct server *srv, const char *account, const char *id,
                   bool by_machine)
{
    struct revocation *rv = calloc(1, sizeof *rv);
    if (!rv) return api_error(req, 500, "internal_error", "out of memory");
    *rv = (struct revocation){.req = req, .by_machine = by_machine};
    str_copy(rv->id, sizeof rv->id, id);
    str_copy(rv->account, sizeof rv->account, account);
    err_t err = {0};
    if (accounts_connection_remove(server_accounts(srv), rv->account, rv->id, revoked, rv, &err) <
        0) {
        free(rv);
        api_fail(req, &err);
    }
}

/* POST /api/connect/disconnect {} with the key: that key is revoked. */
static void disconnect(struct httpd_req *req, struct server *srv)
{
    const struct account_connection *c = calling_machine(req, srv);
    if (!c) return;
    revoke(req, srv, c->account, c->id, true);
}

static void machine_route(struct httpd_req *req, void *arg)
{
    struct server *srv = arg;
    const char *what = httpd_path(req) + strlen("/api/connect/");
    if (strcmp(what, "start") == 0) return start(req, srv);
    if (strcmp(what, "token") == 0) return token(req);
    if (strcmp(what, "confirm") == 0) return confirm(req, srv);
    disconnect(req, srv);
}

void api_connect_head(struct httpd_req *req, struct server *srv)
{
    static const char *const routes[] = {"start", "token", "confirm", "disconnect"};
    const char *what = httpd_path(req) + strlen("/api/connect/");
    bool known = false;
    for (size_t i = 0; i < ARRAY_LEN(routes); i++)
        known = known || strcmp(what, routes[i]) == 0;
    if (!known)
        return api_error(req, 404, "not_found",
                         "no such API path: %s; /api/connect/ has start, token, confirm and "
                         "disconnect",
                         httpd_path(req));
    if (httpd_method(req) != HTTPD_POST)
        return api_error(req, 405, "method_not_allowed", "/api/connect/%s takes POST", what);
    /* Before any key: a small body, charged to the whole server's budget. */
    httpd_charge(req, server_budget(srv));
    httpd_read_body(req, CONNECT_BODY_MAX, machine_route, srv);
}

/* ---- the person's routes (/v1/connect, with the API's authentication) ---- */

static json_t *request_json(const struct connect_request *r)
{
    char created[40], expires[40];
    time_rfc3339(created, sizeof created, r->created_ms);
    time_rfc3339(expires, sizeof expires, r->expires_ms);
    json_t *v = json_pack("{s:s,s:o,s:o,s:s,s:s,s:s,s:s,s:b}", "userCode", r->user_code,
                          "agentName", api_json_text(r->agent_name, strlen(r->agent_name)),
                          "machine", api_json_text(r->machine, strlen(r->machine)), "address",
                          r->address, "createdAt", created, "expiresAt", expires, "status",
                          connect_state_name(r->state), "confirmed", r->state == CONNECT_CONFIRMED);
    if (r->connection_id[0]) {
        json_object_set_new(v, "account", json_string(r->account));
        json_object_set_new(v, "connectionId", json_string(r->connection_id));
    }
    return v;
}

/* An approval on its way: the connection is written, then the key is sealed. */
struct approval {
    struct httpd_req *req;
    struct server *srv;
    char user_code[CONNECT_USER_CODE_LEN + 1];
    char key[CONNECT_KEY_LEN + 1]; /* wiped once sealed */
    char id[CONNECT_UUID_LEN + 1];
    char account[ACCOUNT_NAME_MAX];
    bool admin;
};

static void approval_free(struct approval *ap)
{
    explicit_bzero(ap, sizeof *ap);
    free(ap);
}

static void nothing(const err_t *err, const char *key, void *arg) {}

static void approval_written(const err_t *err, const char *key, void *arg)
{
    struct approval *ap = arg;
    if (err && err->code == -ECANCELED) return approval_free(ap);
    struct connect_request *r = connect_by_user(table(), ap->user_code, now_unix_ms());
    err_t seal_err = {0};
    if (!err && r && connect_approved(r, ap->key, ap->account, ap->id, &seal_err) < 0) {
        accounts_connection_remove(server_accounts(ap->srv), ap->account, ap->id, nothing, NULL,
                                   NULL);
        err = &seal_err;
    }
    if (err) {
        if (r) r->state = CONNECT_PENDING; /* it may be approved again */
        api_fail(ap->req, err);
        return approval_free(ap);
    }
    log_info("connect: request %s approved by %s for account %s: connection %s (machine \"%s\", "
             "agent \"%s\", from %s)",
             r->user_code, ap->admin ? "the admin" : ap->account, ap->account, ap->id, r->machine,
             r->agent_name, r->address);
    api_json(ap->req, 200,
             json_pack("{s:s,s:s,s:s}", "status", "approved", "account", ap->account,
                       "connectionId", ap->id));
    approval_free(ap);
}

/* The account an approval is for: the caller's own, or (admin only) the one named. */
static bool approval_account(struct httpd_req *req, const struct api_caller *who, json_t *body,
                             char *out, size_t size)
{
    const char *named = field(body, "account");
    if (json_object_get(body, "account") && !named) {
        api_error(req, 400, "invalid_request", "account must be an account's name");
        return false;
    }
    if (named && strcmp(named, who->account) != 0 && !who->admin) {
        api_error(req, 403, "forbidden", "a key approves for its own account (%s) only",
                  who->account);
        return false;
    }
    str_copy(out, size, named ? named : who->account);
    return true;
}

static void approve(struct httpd_req *req, struct server *srv, const struct api_caller *who,
                    struct connect_request *r)
{
    static const char *const known[] = {"account", NULL};
    json_t *body = body_object(req, known, true);
    if (!body) return;
    char account[ACCOUNT_NAME_MAX];
    bool ok = approval_account(req, who, body, account, sizeof account);
    json_decref(body);
    if (!ok) return;
    if (r->state != CONNECT_PENDING)
        return api_error(req, 409, "conflict", "request %s is %s already", r->user_code,
                         connect_state_name(r->state));
    struct approval *ap = calloc(1, sizeof *ap);
    if (!ap) return api_error(req, 500, "internal_error", "out of memory");
    *ap = (struct approval){.req = req, .srv = srv, .admin = who->admin};
    str_copy(ap->account, sizeof ap->account, account);
    str_copy(ap->user_code, sizeof ap->user_code, r->user_code);
    connect_key(ap->key);
    connect_uuid(ap->id);
    err_t err = {0};
    if (accounts_connection_add(server_accounts(srv), ap->account, ap->id, ap->key, r->agent_name,
                                r->machine, approval_written, ap, &err) < 0) {
        approval_free(ap);
        return api_fail(req, &err);
    }
    r->state = CONNECT_APPROVING; /* neither approved twice nor forgotten meanwhile */
}

static void deny(struct httpd_req *req, const struct api_caller *who, struct connect_request *r)
{
    if (r->state != CONNECT_PENDING)
        return api_error(req, 409, "conflict", "request %s is %s already", r->user_code,
                         connect_state_name(r->state));
    connect_denied(r);
    log_info("connect: request %s denied by %s (machine \"%s\", agent \"%s\", from %s)",
             r->user_code, who->admin ? "the admin" : who->account, r->machine, r->agent_name,
             r->address);
    api_json(req, 200, json_pack("{s:s}", "status", "denied"));
}

/* /v1/connect/requests/{userCode}[:approve|:deny] */
static void requests(struct httpd_req *req, struct server *srv, const struct api_caller *who,
                     char *code_verb)
{
    char *colon = strchr(code_verb, ':');
    const char *verb = colon ? colon + 1 : NULL;
    if (colon) *colon = '\0';
    enum httpd_method m = httpd_method(req);
    if (verb && strcmp(verb, "approve") != 0 && strcmp(verb, "deny") != 0)
        return api_error(req, 404, "route_not_found",
                         "no change :%.40s of a connection request; these are :approve, :deny",
                         verb);
    if ((verb && m != HTTPD_POST) || (!verb && m != HTTPD_GET))
        return api_error(req, 405, "method_not_allowed",
                         "GET /v1/connect/requests/{userCode}; POST .../{userCode}:approve or "
                         ":deny");
    struct connect_request *r =
        connect_user_code_ok(code_verb) ? connect_by_user(table(), code_verb, now_unix_ms()) : NULL;
    if (!r)
        return api_error(req, 404, "not_found",
                         "no connection request %.20s; the code is XXXX-XXXX-XXXX, and a request "
                         "lasts 15 minutes",
                         code_verb);
    if (!verb) return api_json(req, 200, request_json(r));
    if (strcmp(verb, "approve") == 0) return approve(req, srv, who, r);
    deny(req, who, r);
}

/* GET /v1/connect/connections, DELETE /v1/connect/connections/{id}: the caller's. */
static void connections(struct httpd_req *req, struct server *srv, const struct api_caller *who,
                        const char *id)
{
    enum httpd_method m = httpd_method(req);
    if (!id && m == HTTPD_GET) {
        json_t *data = json_array();
        for (const struct account_connection *c = accounts_connections_first(server_accounts(srv));
             c; c = c->next)
            if (strcmp(c->account, who->account) == 0)
                json_array_insert_new(data, 0, account_connection_json(c)); /* oldest first */
        return api_json(req, 200, json_pack("{s:o}", "data", data));
    }
    if (id && m == HTTPD_DELETE) {
        if (!accounts_connection_find(server_accounts(srv), who->account, id))
            return api_error(req, 404, "not_found", "no connection %.40s of account %s", id,
                             who->account);
        return revoke(req, srv, who->account, id, false);
    }
    api_error(req, 405, "method_not_allowed",
              "GET /v1/connect/connections; DELETE /v1/connect/connections/{id}");
}

/* GET /v1/me: who the key is, in Runtime Cloud's words (orgId: the account). */
static void me(struct httpd_req *req, struct server *srv, const struct api_caller *who)
{
    if (httpd_method(req) != HTTPD_GET)
        return api_error(req, 405, "method_not_allowed", "GET /v1/me");
    const struct account_connection *c = bearer_connection(req, srv);
    const char *credential = who->admin ? "admin-key" : c ? c->id : "account-key";
    api_json(req, 200,
             json_pack("{s:s,s:s,s:s,s:s,s:s}", "orgId", who->account, "orgName", who->account,
                       "principalId", who->admin ? "admin" : who->account, "credentialId",
                       credential, "role", who->admin ? "admin" : "owner"));
}

void api_connect(struct httpd_req *req, struct server *srv, const struct api_caller *who,
                 char **seg, int n)
{
    if (n == 1 && strcmp(seg[0], "me") == 0) return me(req, srv, who);
    bool connect = strcmp(seg[0], "connect") == 0;
    if (connect && n == 3 && strcmp(seg[1], "requests") == 0)
        return requests(req, srv, who, seg[2]);
    if (connect && (n == 2 || n == 3) && strcmp(seg[1], "connections") == 0)
        return connections(req, srv, who, n == 3 ? seg[2] : NULL);
    api_error(req, 404, "not_found", "no such API path: %s", httpd_path(req));
}
