/* api: the HTTP API of SPEC.md on the server's loop: routing, authentication,
 * JSON validation and the error shape. */
#ifndef RUNTIME_API_H
#define RUNTIME_API_H

#include "../server/server.h"

struct evhttp;

/* Limits with defaults (DESIGN invariant 7). */
#define API_MAX_JSON_BODY (1u << 20)       /* 1 MiB */
#define API_MAX_FILE_BODY (64u << 20)      /* 64 MiB per PUT */
#define API_MAX_OUTPUT (1u << 20)          /* per stream of an exec */
#define API_MAX_TIMEOUT_MS (24u * 3600000) /* an exec runs at most a day */

/* Installs the request handler on http. */
void api_attach(struct evhttp *http, struct server *srv);

/* Copies bytes to a JSON string, replacing invalid UTF-8 with U+FFFD. */
json_t *api_json_text(const char *bytes, size_t n);

#endif
