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
/* The same with details (Runtime Cloud's error.details), taken. */
void api_error_details(struct httpd_req *req, int status, const char *code, json_t *details,
                       const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* What is wrong with a request, every field of it: answered at once as Runtime Cloud
 * does, 400 invalid_request naming each, details.issues [{field, message}]. */
struct api_issues {
    json_t *list;   /* NULL while nothing is wrong */
    char text[600]; /* the messages, joined */
};
void api_issue(struct api_issues *is, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* true after answering 400 when something was wrong (is is then empty). */
bool api_issues_reply(struct httpd_req *req, struct api_issues *is);
/* Maps an err_t from below to a status and code, and sends it. */
void api_fail(struct httpd_req *req, const err_t *err);
/* Sends a JSON value (taken) with status. */
void api_json(struct httpd_req *req, int status, json_t *v);
/* Parses the request body as JSON (at most API_MAX_JSON_BODY), then wipes and
 * drops the raw bytes; NULL after replying. */
json_t *api_body_json(struct httpd_req *req, bool allow_empty);

/* Parses the request's query into q, refusing (400 invalid_request, every unknown one
 * named) a parameter not in known (NULL-terminated): false after replying. On true,
 * evhttp_clear_headers q when done. */
struct evkeyvalq;
bool api_query(struct httpd_req *req, struct evkeyvalq *q, const char *const *known);

/* Who calls: the admin key acts as the account default. */
struct api_caller {
    const char *account;
    bool admin;
    bool session; /* by the dashboard's session cookie, not a key */
};

/* The caller a key is (the admin key, or an account's): false when it is none. */
bool api_key_caller(struct server *srv, const char *key, struct api_caller *out);

/* dashboard.c: the dashboard's files and sign-in (/dashboard/..., /connect), before any
 * key is asked for. */
bool api_dashboard_path(const char *path);
void api_dashboard(struct httpd_req *req, struct server *srv);
/* The caller a request's dashboard session cookie stands for: 1 (out set), 0 when it
 * has none that is live, -1 when it is refused (*why: from another site, or without
 * its X-CSRF-Token when csrf_checked). */
int api_session_caller(struct httpd_req *req, struct server *srv, bool csrf_checked,
                       struct api_caller *out, const char **why);

/* stream.c: GET /v1/events/stream (Server-Sent Events). */
void api_events_stream(struct httpd_req *req, struct server *srv, const struct api_caller *who);

/* accounts.c: /v1/accounts[/NAME[/keys]], admin only. */
void api_accounts(struct httpd_req *req, struct server *srv, const struct api_caller *who,
                  const char *name, const char *action);

/* connect.c: the device login (docs/login.md). head: /api/connect/... before any key
 * (start, token; confirm and disconnect with the connection's key); api_connect:
 * /v1/me and /v1/connect/... (seg: the path's segments after "v1", n of them). */
void api_connect_head(struct httpd_req *req, struct server *srv);
void api_connect(struct httpd_req *req, struct server *srv, const struct api_caller *who,
                 char **seg, int n);

/* secrets.c: /v1/egress-secrets[/NAME] (GET the list, PUT and DELETE one), the
 * secrets sandboxes use through the egress proxy. */
void api_egress_secrets(struct httpd_req *req, struct server *srv, const struct api_caller *who,
                        const char *name);
/* Every /v1/secrets... route: 501 unavailable (Runtime Cloud's jobs secrets). */
void api_jobs_secrets(struct httpd_req *req);

/* files.c: GET or PUT .../files[/content]?path= (one file's bytes). */
void api_files(struct httpd_req *req, struct server *srv, struct sbx *sb, const char *sub);
/* Runtime Cloud's answer to a file operation's errno (file_not_found, is_a_directory,
 * not_a_directory, permission_denied, file_exists, not_empty, ...) with a phrase for
 * it; NULL for an errno that is no file's. */
struct api_file_error {
    int code, status;
    const char *name, *why;
};
const struct api_file_error *api_file_error(int code);
/* "755" or "0755": permission bits in octal, at most 0777; -EINVAL when it is not. */
int api_file_mode(const char *s);
/* api_fail with those codes (err's message names the path). */
void api_file_fail(struct httpd_req *req, const err_t *err);
/* files_ops.c: GET .../files/list|stat and POST .../files:mkdir|remove|rename|chmod
 * (op is "list", "stat", "mkdir", ...). */
void api_files_op(struct httpd_req *req, struct server *srv, struct sbx *sb, const char *op);
/* uploads.c: a file in chunks: POST .../uploads, PUT .../uploads/{id}?offset=,
 * POST .../uploads/{id}:commit and :abort (sub: NULL, "{id}" or "{id}:verb"). */
void api_uploads(struct httpd_req *req, struct server *srv, struct sbx *sb, const char *sub);

/* What the API keeps for a sandbox (its slot), made when first needed. */
struct upload;
struct api_sandbox {
    unsigned execs;              /* running now (4 descriptors each) */
    struct rate_limit exec_rate; /* starts a second */
    struct upload *uploads;      /* chunked uploads begun (uploads.c) */
};
struct api_sandbox *api_sandbox_of(struct sbx *sb); /* NULL: out of memory */
/* The sandbox is gone: its uploads are let go (their files went with it). */
void api_uploads_free(struct api_sandbox *a);

/* A sandbox as the API answers it: its settings, id, status, state, createdAt, MCP. */
json_t *api_sandbox_json(const struct sbx *sb);

/* settings.c: GET/PUT .../network, POST .../{id}:update. */
void api_network(struct httpd_req *req, struct server *srv, struct sbx *sb, const char *sub);
void api_update(struct httpd_req *req, struct server *srv, struct sbx *sb, const char *sub);
/* Refuses (501 feature_unavailable, every one named) a field of fields (NULL-ended)
 * that body gives and runtimed cannot honour: true after answering. */
bool api_refuse_cloud_only(struct httpd_req *req, json_t *body, const char *const *fields);

/* exec.c: POST /v1/sandboxes/{id}/exec; replies when the process has ended. */
void api_exec(struct httpd_req *req, struct server *srv, struct sbx *sb);
/* Fills a NULL-terminated argv (at most max-1 strings) from a JSON array. */
int api_argv_from(json_t *arr, const char **out, size_t max, err_t *err);

#endif
