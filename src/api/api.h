/* api: the HTTP API (api/openapi.yaml) on the server's loop: routing, authentication,
 * JSON validation and the error shape. */
#ifndef RUNTIME_API_H
#define RUNTIME_API_H

#include "../server/server.h"

struct httpd_req;

/* Limits, each with a default (docs/architecture.md, "Limits (defaults)"). */
#define API_MAX_JSON_BODY (1u << 20)       /* 1 MiB */
#define API_MAX_FILE_BODY (64u << 20)      /* 64 MiB per PUT */
#define API_MAX_OUTPUT (1u << 20)          /* per stream of an exec */
#define API_MAX_TIMEOUT_MS (24u * 3600000) /* an exec runs at most a day */

/* Every request of the API and the gateway, once its head is in (the server's
 * hooks http_head and http_fail; see httpd.h). */
void api_head(struct httpd_req *req, struct server *srv);
void api_http_fail(struct httpd_req *req, int status, const char *code, const char *message,
                   struct server *srv);

/* The server's hook freed: what the API kept for a sandbox goes with it. */
void api_sandbox_freed(struct sbx *sb);

/* stream.c: the dashboard's event stream is told of every change (server hooks). */
void api_stream_sandbox_changed(struct server *srv, struct sbx *sb, bool gone);
void api_stream_event(struct server *srv, struct sbx *sb, const char *kind, json_t *fields,
                      int64_t time_ms);

/* Copies bytes to a JSON string, replacing invalid UTF-8 with U+FFFD. */
json_t *api_json_text(const char *bytes, size_t n);
/* Bytes as a JSON string of standard base64. */
json_t *api_base64(const void *bytes, size_t n);
/* Decodes standard base64 into a new buffer (*out, *len); -EINVAL when it is not. */
int api_base64_decode(const char *text, size_t n, char **out, size_t *len);

#endif
