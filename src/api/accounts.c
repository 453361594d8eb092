/* /v1/accounts: the admin's calls to make, list, rotate and remove accounts. */
#include <errno.h>
#include <event2/http.h>
#include <string.h>

#include "api_impl.h"

static json_t *with_usage(struct server *srv, const struct account *acct)
{
    json_t *v = account_json(acct);
    size_t sandboxes;
    uint64_t memory;
    server_account_load(srv, acct->name, &sandboxes, &memory);
    json_object_set_new(v, "sandboxes", json_integer((json_int_t)sandboxes));
    json_object_set_new(v, "memoryMiB", json_integer((json_int_t)memory));
    return v;
}

static void create(struct evhttp_request *req, struct server *srv)
{
    json_t *body = api_body_json(req, false);
    if (!body) return;
    char key[ACCOUNT_KEY_LEN + 1];
    const struct account *acct = NULL;
    err_t err = {0};
    int r = accounts_create(server_accounts(srv), body, key, &acct, &err);
    json_decref(body);
    if (r < 0) return api_fail(req, &err);
    json_t *v = with_usage(srv, acct);
    json_object_set_new(v, "apiKey", json_string(key)); /* shown this once */
    explicit_bzero(key, sizeof key);
    api_json(req, 201, v);
}

static void list(struct evhttp_request *req, struct server *srv)
{
    json_t *arr = json_array();
    for (const struct account *a = accounts_first(server_accounts(srv)); a; a = a->next)
        json_array_insert_new(arr, 0, with_usage(srv, a)); /* oldest first */
    api_json(req, 200, arr);
}

static void new_key(struct evhttp_request *req, struct server *srv, const char *name)
{
    char key[ACCOUNT_KEY_LEN + 1];
    err_t err = {0};
    if (accounts_new_key(server_accounts(srv), name, key, &err) < 0) return api_fail(req, &err);
    json_t *v = json_pack("{s:s,s:s}", "name", name, "apiKey", key);
    explicit_bzero(key, sizeof key);
    api_json(req, 201, v);
}

static void removed(struct server *srv, const err_t *err, void *arg)
{
    if (err) return api_fail(arg, err);
    evhttp_send_reply(arg, 204, NULL, NULL);
}

void api_accounts(struct evhttp_request *req, struct server *srv, const struct api_caller *who,
                  const char *name, const char *action)
{
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    err_t err = {0};
    if (!who->admin)
        return api_error(req, 403, "forbidden",
                         "accounts are managed with the admin key (STATE/admin.key)");
    if (!name && m == EVHTTP_REQ_POST) return create(req, srv);
    if (!name && m == EVHTTP_REQ_GET) return list(req, srv);
    if (name && !action && m == EVHTTP_REQ_DELETE) {
        if (server_account_remove(srv, name, removed, req, &err) < 0) api_fail(req, &err);
        return;
    }
    if (name && action && strcmp(action, "keys") == 0 && m == EVHTTP_REQ_POST)
        return new_key(req, srv, name);
    api_error(req, 405, "method_not_allowed",
              "use POST or GET /v1/accounts, DELETE /v1/accounts/NAME or POST "
              "/v1/accounts/NAME/keys");
}
