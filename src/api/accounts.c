/* /v1/accounts: the admin's calls to make, list, rotate and remove accounts. */
#include <errno.h>
#include <event2/http.h>
#include <stdlib.h>
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

/* A request answered once its account's change is on disk. */
struct pending {
    struct httpd_req *req;
    struct server *srv;
    char name[ACCOUNT_NAME_MAX];
};

static struct pending *pending_new(struct httpd_req *req, struct server *srv, const char *name)
{
    struct pending *p = calloc(1, sizeof *p);
    if (!p) {
        api_error(req, 500, "internal_error", "out of memory");
        return NULL;
    }
    *p = (struct pending){.req = req, .srv = srv};
    if (name) str_copy(p->name, sizeof p->name, name);
    return p;
}

/* Whether to answer (after a failure, the answer is sent here); frees p if not. */
static bool answerable(struct pending *p, const err_t *err)
{
    if (!err) return true;
    if (err->code != -ECANCELED)
        api_fail(p->req, err); /* stopping: the request ends with the loop */
    free(p);
    return false;
}

static void created(const err_t *err, const char *key, void *arg)
{
    struct pending *p = arg;
    if (!answerable(p, err)) return;
    const struct account *acct = accounts_find(server_accounts(p->srv), p->name);
    json_t *v = acct ? with_usage(p->srv, acct) : json_pack("{s:s}", "name", p->name);
    json_object_set_new(v, "apiKey", json_string(key)); /* shown this once */
    api_json(p->req, 201, v);
    free(p);
}

static void create(struct httpd_req *req, struct server *srv)
{
    json_t *body = api_body_json(req, false);
    if (!body) return;
    err_t err = {0};
    struct pending *p = pending_new(req, srv, json_string_value(json_object_get(body, "name")));
    int r = p ? accounts_create(server_accounts(srv), body, created, p, &err) : 0;
    json_decref(body);
    if (r < 0) {
        free(p);
        api_fail(req, &err);
    }
}

static void list(struct httpd_req *req, struct server *srv)
{
    json_t *arr = json_array();
    for (const struct account *a = accounts_first(server_accounts(srv)); a; a = a->next)
        json_array_insert_new(arr, 0, with_usage(srv, a)); /* oldest first */
    api_json(req, 200, arr);
}

static void key_made(const err_t *err, const char *key, void *arg)
{
    struct pending *p = arg;
    if (!answerable(p, err)) return;
    api_json(p->req, 201, json_pack("{s:s,s:s}", "name", p->name, "apiKey", key));
    free(p);
}

static void new_key(struct httpd_req *req, struct server *srv, const char *name)
{
    err_t err = {0};
    struct pending *p = pending_new(req, srv, name);
    if (p && accounts_new_key(server_accounts(srv), name, key_made, p, &err) < 0) {
        free(p);
        api_fail(req, &err);
    }
}

static void removed(struct server *srv, const err_t *err, void *arg)
{
    if (err) return api_fail(arg, err);
    api_no_content(arg);
}

void api_accounts(struct httpd_req *req, struct server *srv, const struct api_caller *who,
                  const char *name, const char *action)
{
    enum httpd_method m = httpd_method(req);
    err_t err = {0};
    if (!who->admin)
        return api_error(req, 403, "forbidden",
                         "accounts are managed with the admin key (STATE/admin.key)");
    if (!name && m == HTTPD_POST) return create(req, srv);
    if (!name && m == HTTPD_GET) return list(req, srv);
    if (name && !action && m == HTTPD_DELETE) {
        if (server_account_remove(srv, name, removed, req, &err) < 0) api_fail(req, &err);
        return;
    }
    if (name && action && strcmp(action, "keys") == 0 && m == HTTPD_POST)
        return new_key(req, srv, name);
    api_error(req, 405, "method_not_allowed",
              "use POST or GET /v1/accounts, DELETE /v1/accounts/NAME or POST "
              "/v1/accounts/NAME/keys");
}
