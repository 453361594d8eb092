/* Egress secrets in Runtime Cloud's shape: PUT and DELETE /v1/egress-secrets/{name},
 * GET /v1/egress-secrets ({secrets, next}). /v1/secrets is Runtime Cloud's path for
 * its jobs secrets, which runtimed has not: every route under it answers 501
 * unavailable, the answer Runtime Cloud's SDK passes over when its delete looks
 * for a jobs copy first. */
#include <errno.h>
#include <event2/keyvalq_struct.h>
#include <stdlib.h>
#include <string.h>

#include "../secrets/secrets.h"
#include "api_impl.h"

/* A put or delete is answered once it is on disk. */
static void secret_saved(const err_t *err, json_t *answer, bool created, void *arg)
{
    if (err) return api_fail(arg, err);
    if (!answer) return api_no_content(arg);
    api_json(arg, created ? 201 : 200, answer);
}

/* 400 invalid_request naming every wrong field, in the message and in details.issues. */
static void refuse_fields(struct httpd_req *req, const err_t *err, json_t *issues)
{
    json_t *body = json_pack("{s:{s:s,s:i,s:s,s:{s:O},s:s}}", "error", "code", "invalid_request",
                             "status", 400, "message", err->msg, "details", "issues", issues,
                             "requestId", httpd_request_id(req));
    api_json(req, 400, body);
}

static void put_secret(struct httpd_req *req, struct server *srv, const char *account,
                       const char *name)
{
    json_t *body = api_body_json(req, false); /* wipes the raw value */
    if (!body) return;
    err_t err = {0};
    json_t *issues = json_array();
    int r = vault_put(server_vault(srv), account, name, body, secret_saved, req, issues, &err);
    json_object_set_new(body, "value", json_null()); /* drop our copy of the value early */
    json_decref(body);
    if (r == -EINVAL)
        refuse_fields(req, &err, issues);
    else if (r < 0)
        api_fail(req, &err);
    json_decref(issues);
}

/* GET /v1/egress-secrets[?limit=&after=]: by name, a page of at most limit (1 to 100,
 * default 100) after the name after; next is the last name when more follow. */
static void list_secrets(struct httpd_req *req, struct server *srv, const char *account)
{
    struct evkeyvalq q;
    const char *query = httpd_query(req);
    evhttp_parse_query_str(query ? query : "", &q);
    const char *lim = evhttp_find_header(&q, "limit"), *after = evhttp_find_header(&q, "after");
    char *end = NULL;
    long limit = lim ? strtol(lim, &end, 10) : 100;
    bool bad = lim && (*end || limit < 1 || limit > 100); /* end points into q */
    char from[SECRET_NAME_MAX + 1] = "";
    if (after) str_copy(from, sizeof from, after);
    evhttp_clear_headers(&q);
    if (bad) return api_error(req, 400, "invalid_request", "limit must be 1 to 100");
    json_t *all = vault_list(server_vault(srv), account), *page = json_array();
    size_t n = json_array_size(all);
    const char **names = calloc(n ? n : 1, sizeof *names);
    if (!names) {
        json_decref(all);
        json_decref(page);
        return api_error(req, 500, "internal_error", "out of memory");
    }
    for (size_t i = 0; i < n; i++)
        names[i] = json_string_value(json_object_get(json_array_get(all, i), "name"));
    /* By name: a page boundary stays where it was whatever is added before it. */
    json_t *next = json_null();
    for (;;) {
        const char *best = NULL;
        size_t at = 0;
        for (size_t i = 0; i < n; i++)
            if (names[i] && strcmp(names[i], from) > 0 && (!best || strcmp(names[i], best) < 0)) {
                best = names[i];
                at = i;
            }
        if (!best) break;
        if (json_array_size(page) == (size_t)limit) {
            next = json_string(from);
            break;
        }
        json_array_append(page, json_array_get(all, at));
        str_copy(from, sizeof from, best);
    }
    free(names);
    json_decref(all);
    api_json(req, 200, json_pack("{s:o,s:o}", "secrets", page, "next", next));
}

void api_egress_secrets(struct httpd_req *req, struct server *srv, const struct api_caller *who,
                        const char *name)
{
    const char *account = who->account;
    enum httpd_method m = httpd_method(req);
    err_t err = {0};
    if (!name && m == HTTPD_GET) return list_secrets(req, srv, account);
    if (name && m == HTTPD_DELETE) {
        if (vault_delete(server_vault(srv), account, name, secret_saved, req, &err) < 0)
            api_fail(req, &err);
        return;
    }
    if (name && m == HTTPD_PUT) return put_secret(req, srv, account, name);
    api_error(req, 405, "method_not_allowed",
              "use GET /v1/egress-secrets, PUT or DELETE /v1/egress-secrets/NAME");
}

void api_jobs_secrets(struct httpd_req *req)
{
    api_error(req, 501, "unavailable",
              "runtimed has no jobs secrets (/v1/secrets); secrets for sandboxes are at "
              "/v1/egress-secrets");
}
