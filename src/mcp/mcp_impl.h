/* Private to the mcp folder: how its files share the servers' objects (mcp.h).
 *
 *   mcp_box (one per sandbox: link, token)
 *     mcp_server (a configured server: status, approved tools)
 *       mcp_backend (a running stdio process: the JSON-RPC link, pending requests) */
#ifndef RUNTIME_MCP_IMPL_H
#define RUNTIME_MCP_IMPL_H

#include <stdint.h>

#include "mcp.h"

#define MCP_LOG_RING (64u << 10)            /* a server's output kept for `logs` */
#define MCP_LOG_FOLLOW_BACKLOG (256u << 10) /* unsent bytes to a follower before it is cut */

/* Lines a process wrote on stdout, to be parsed and routed in order (parse.c). */
struct mcp_line {
    char *text;
    size_t len;
    json_t *msg; /* once parsed: the message, or NULL when the line is not JSON */
};
struct mcp_batch {
    struct mcp_backend *be; /* the loop's: NULL once the backend is gone */
    struct mcp_line *lines;
    size_t n, bytes;
    bool parsed;
    void (*done)(struct mcp_batch *b); /* on the loop, once parsed */
    struct mcp_batch *next;
};
#define MCP_PARSE_INLINE 4096 /* bytes of lines the loop parses itself (~45 us) */

/* box.c */
void mcp_server_set_status(struct mcp_server *ms, enum mcp_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void mcp_box_save(struct mcp_box *box);
void mcp_box_changed(struct mcp_box *box);
/* Its list was just approved: a refused server starts again, a running one serves it all. */
void mcp_server_take_approval(struct mcp_server *ms);
/* A catalog server's package manager ("npm" or "pip"); NULL for one's own server. */
const char *mcp_manager(const struct mcp_server *ms);
/* Seconds since the server entered its status (to the millisecond). */
double mcp_status_seconds(const struct mcp_server *ms);
/* The gateway's part, as mcp_set_clients was given it. */
const struct mcp_clients *mcp_clients(void);

/* logs.c */
/* Adds bytes to the server's log (and sends them to its followers). */
void mcp_log_write(struct mcp_server *ms, const void *data, size_t len);
void mcp_log_printf(struct mcp_server *ms, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Ends the followers and frees the log. */
void mcp_log_free(struct mcp_server *ms);

/* install.c */
void mcp_install(struct mcp_server *ms);
/* The index URL in `pip config list` output, or PyPI's (exposed for tests). */
void mcp_pip_index(const char *config, char *url, size_t size);
void mcp_install_cancel(struct mcp_server *ms);
void mcp_apply_policy(struct mcp_box *box);

/* backend.c */
void mcp_server_start(struct mcp_server *ms);
void mcp_server_halt(struct mcp_server *ms);
/* The sha256 of where its process starts (template.c's key). */
int mcp_template_key(struct mcp_server *ms, char key[65], err_t *err);
/* Takes a template's process (its four pipes) as the server's: it is listed and gated. */
int mcp_server_adopt(struct mcp_server *ms, int fds[4], json_t *init_result);

/* template.c (docs/templates.md) */
/* Starts a catalog server from its template, where there is one for it: true when it
 * is under way (its install is then not needed; if the template fails, it installs). */
bool mcp_template_restore(struct mcp_server *ms);
/* A first process just gated: when its image should become the template, takes it and
 * then calls then(be, 0, NULL); true when it is under way. */
bool mcp_template_save(struct mcp_backend *be,
                       void (*then)(struct mcp_backend *be, int r, const char *error));
/* The server halts: an answer still to come is dropped. */
void mcp_template_cancel(struct mcp_server *ms);

/* parse.c: the parser thread. */
/* Queues b to be parsed off the loop; b->done gets it back on the loop. <0 when the
 * thread cannot run (the caller parses it itself). */
int mcp_parser_submit(struct event_base *base, struct mcp_batch *b);
void mcp_batch_parse(struct mcp_batch *b);
void mcp_batch_free(struct mcp_batch *b);

/* gate.c */
int mcp_toolset_from_pages(char **pages, const size_t *lens, size_t n, struct mcp_toolset *out,
                           err_t *err);
int mcp_toolset_from_canon(const char *canon, struct mcp_toolset *out, err_t *err);
void mcp_toolset_clear(struct mcp_toolset *t);
/* Checks a fresh list against the approval; 0 when it may serve (approving it when there
 * was no approval), -EPERM with what changed in err. */
int mcp_gate_check(struct mcp_server *ms, struct mcp_toolset *fresh, err_t *err);
/* A list that came while running: serves the approved tools it still has unchanged. */
void mcp_gate_relist(struct mcp_server *ms, struct mcp_toolset *fresh);
void mcp_gate_serve_all(struct mcp_server *ms);

/* stdio_modern.c */
/* Whether an initialize error is a 2026-07-28-only server's (-32022 naming no 2025
 * version); then discovers, and calls done as initialize's answer would. */
bool mcp_stdio_refused_2025(struct mcp_backend *be, json_t *msg, mcp_internal_fn done);
/* After the gate: asks the process for its list changes (subscriptions/listen). */
void mcp_stdio_listen(struct mcp_backend *be);

#endif
