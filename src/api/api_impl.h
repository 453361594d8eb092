/* Private to the api folder: what its files share. */
#ifndef RUNTIME_API_IMPL_H
#define RUNTIME_API_IMPL_H

#include <event2/http.h> /* its URI and query helpers; the server is httpd */

#include "../httpd/httpd.h"

#include "api.h"

/* idempotency.c: Idempotency-Key on a change. begin: 1 when it answered (a replay, or
 * a refusal), 0 to go on; the answer is then kept by api_json and api_no_content. A
 * streamed answer forgets its key. */
int api_idempotency_begin(struct httpd_req *req, const char *account);
void api_idempotency_answer(struct httpd_req *req, int status, const char *body);
void api_idempotency_forget(struct httpd_req *req);
/* 204, kept for a replay. */
void api_no_content(struct httpd_req *req);

/* Sends {"error":{"code","message"}} with status. */
void api_error(struct httpd_req *req, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Maps an err_t from below to a status and code, and sends it. */
void api_fail(struct httpd_req *req, const err_t *err);
/* Sends a JSON value (taken) with status. */
void api_json(struct httpd_req *req, int status, json_t *v);
/* Parses the request body as JSON (at most API_MAX_JSON_BODY), then wipes and
 * drops the raw bytes; NULL after replying. */
json_t *api_body_json(struct httpd_req *req, bool allow_empty);

/* Who calls: the admin key acts as the account default. */
struct api_caller {
    const char *account;
    bool admin;
};

/* accounts.c: /v1/accounts[/NAME[/keys]], admin only. */
void api_accounts(struct httpd_req *req, struct server *srv, const struct api_caller *who,
                  const char *name, const char *action);

/* files.c: GET or PUT .../files[/content]?path= (one file's bytes). */
void api_files(struct httpd_req *req, struct server *srv, struct sbx *sb);
/* files_ops.c: GET .../files/list|stat and POST .../files:mkdir|remove|rename|chmod
 * (op is "list", "stat", "mkdir", ...). */
void api_files_op(struct httpd_req *req, struct server *srv, struct sbx *sb, const char *op);
/* uploads.c: a file in chunks: POST .../uploads, PUT .../uploads/{id}?offset=,
 * POST .../uploads/{id}:commit and :abort (sub: NULL, "{id}" or "{id}:verb"). */
void api_uploads(struct httpd_req *req, struct server *srv, struct sbx *sb, const char *sub);

/* exec.c: POST /v1/sandboxes/{id}/exec; replies when the process has ended. */
void api_exec(struct httpd_req *req, struct server *srv, struct sbx *sb);
/* Fills a NULL-terminated argv (at most max-1 strings) from a JSON array. */
int api_argv_from(json_t *arr, const char **out, size_t max, err_t *err);

#endif
