/* store: the server's durable state in SQLite (WAL). Everything acknowledged to a
 * client is committed here first, so a SIGKILL loses nothing that was answered. */
#ifndef RUNTIME_STORE_H
#define RUNTIME_STORE_H

#include <stdint.h>

#include "../common/common.h"

struct store;

/* A sandbox row. spec_json is the API's view of the sandbox's settings (name,
 * limits, labels, env, network) as JSON text, owned by the row. */
struct store_sandbox {
    char id[32];
    char account[64]; /* the account it belongs to */
    char *name;       /* NULL when unnamed */
    uint32_t slot;    /* host uid range index */
    char status[16];  /* creating|running|paused|stopped|failed */
    int64_t created_ms;
    char *spec_json;
};

/* A connection of this thread's own (SQLite connections are not shared between
 * threads). No connection checkpoints the WAL by itself: store_checkpoint does,
 * from the writer's thread. */
int store_open(const char *path, struct store **out, err_t *err);
void store_close(struct store *st);
void store_checkpoint(struct store *st);
/* From now on the connection only reads (PRAGMA query_only): the server's, once
 * it has started, so that a write left on the event loop fails, and says so,
 * instead of waiting there for the writer's lock and the disk. */
int store_set_read_only(struct store *st, err_t *err);
/* A transaction around several writes: end commits when r is 0, else rolls back;
 * it returns r, or the commit's error. */
int store_begin(struct store *st, err_t *err);
int store_end(struct store *st, int r, err_t *err);

/* Inserts; -EEXIST when id, name or slot is taken. */
int store_sandbox_insert(struct store *st, const struct store_sandbox *sb, err_t *err);
int store_sandbox_set_status(struct store *st, const char *id, const char *status, err_t *err);
int store_sandbox_delete(struct store *st, const char *id, err_t *err);
/* Calls fn for each row in creation order; the row is borrowed for the call. */
int store_sandbox_each(struct store *st, int (*fn)(const struct store_sandbox *sb, void *arg),
                       void *arg, err_t *err);
void store_sandbox_clear(struct store_sandbox *sb); /* frees name and spec_json */
int store_sandbox_set_spec(struct store *st, const char *id, const char *spec_json, err_t *err);

/* Events of a sandbox, numbered by a global sequence. */
struct store_event {
    int64_t seq;
    int64_t time_ms;
    const char *kind;
    const char *fields_json; /* an object with the event's own fields */
    bool security;           /* kept apart from routine events (server/events.c says which) */
};
/* Per sandbox, each class on its own: a flood of routine events never pushes a
 * security event out, and the other way round. Older ones are dropped. */
#define STORE_EVENTS_KEPT 10000
#define STORE_SECURITY_EVENTS_KEPT 10000

/* Appends events of one sandbox in one transaction (callers batch them). */
int store_events_add(struct store *st, const char *sandbox, const struct store_event *ev, size_t n,
                     err_t *err);
/* Calls fn for events of sandbox with seq > after, oldest first, at most limit. */
int store_events_each(struct store *st, const char *sandbox, int64_t after, int limit,
                      int (*fn)(const struct store_event *ev, void *arg), void *arg, err_t *err);
int store_events_delete(struct store *st, const char *sandbox, err_t *err);

/* The egress stub's names: which synthetic address (slot) stands for which name
 * in a sandbox, kept so that an address handed out before a restart never
 * leads to another name after it. seq orders allocations (oldest reused first). */
int store_names_put(struct store *st, const char *sandbox, uint32_t slot, uint64_t seq,
                    const char *name, err_t *err);
int store_names_each(struct store *st, const char *sandbox,
                     void (*fn)(uint32_t slot, uint64_t seq, const char *name, void *arg),
                     void *arg, err_t *err);
int store_names_delete(struct store *st, const char *sandbox, err_t *err);

/* Secrets: sealed values and their rules ({hosts, methods, paths} as JSON). */
struct store_secret {
    const char *account;
    const char *name;
    const uint8_t *sealed;
    size_t sealed_len;
    const char *rules_json;
    int64_t created_ms, updated_ms;
};
int store_secret_put(struct store *st, const struct store_secret *s, err_t *err);
int store_secret_delete(struct store *st, const char *account, const char *name, err_t *err);
int store_secrets_each(struct store *st, void (*fn)(const struct store_secret *s, void *arg),
                       void *arg, err_t *err);

/* Placeholders: one per secret per sandbox (of the sandbox's account). */
struct store_placeholder {
    const char *sandbox, *account, *secret, *placeholder;
};
int store_placeholder_put(struct store *st, const struct store_placeholder *p, err_t *err);
int store_placeholders_each(struct store *st,
                            void (*fn)(const struct store_placeholder *p, void *arg), void *arg,
                            err_t *err);
/* Removes the placeholders of a sandbox, or (sandbox NULL) of an account's secret. */
int store_placeholders_delete(struct store *st, const char *sandbox, const char *account,
                              const char *secret, err_t *err);

/* The MCP state of a sandbox (gateway link and token, its servers' settings and
 * approved tool lists) as one JSON object; get gives -ENOENT when there is none. */
int store_mcp_put(struct store *st, const char *sandbox, const char *state_json, err_t *err);
int store_mcp_get(struct store *st, const char *sandbox, char **state_json, err_t *err);
int store_mcp_delete(struct store *st, const char *sandbox, err_t *err);

/* Accounts (accounts/accounts.h): the hashes of their keys, never a key. */
struct store_account {
    const char *name;
    const char *key_hash, *key2_hash; /* key2_hash "" for none */
    int64_t max_sandboxes, max_memory_mib, created_ms;
    bool removing;
};
int store_account_put(struct store *st, const struct store_account *a, err_t *err);
int store_accounts_each(struct store *st, void (*fn)(const struct store_account *a, void *arg),
                        void *arg, err_t *err);
/* Removes the account's row, its secrets, placeholders and usage rows ("account" in their
 * JSON), in one transaction. */
int store_account_delete(struct store *st, const char *name, err_t *err);

/* Connections (accounts/accounts.h): a login's key of its own, as its SHA-256. The
 * account's removal (store_account_delete) takes its connections with it. */
struct store_connection {
    const char *id, *account, *key_hash, *agent_name, *machine;
    int64_t created_ms;
};
int store_connection_put(struct store *st, const struct store_connection *c, err_t *err);
int store_connection_delete(struct store *st, const char *id, err_t *err);
int store_connections_each(struct store *st,
                           void (*fn)(const struct store_connection *c, void *arg), void *arg,
                           err_t *err);

/* Usage counters of a sandbox (usage.c's JSON, which names its account); rows
 * outlive their sandbox, not its account. */
int store_usage_put(struct store *st, const char *sandbox, const char *json, err_t *err);
int store_usage_get(struct store *st, const char *sandbox, char **json, err_t *err);
int store_usage_each(struct store *st, void (*fn)(const char *sandbox, const char *json, void *arg),
                     void *arg, err_t *err);

/* The writer: a thread with a connection of its own for the writes nobody waits
 * for (events, usage counters), for the sandbox rows' writes (below) and for the
 * WAL's checkpoints, so that SQLite's time and the disk's are never spent on the
 * server's event loop. Jobs run in the order queued; store_writer_sync waits
 * until those queued before it are written, so that a read on another
 * connection sees them (for tests and tools: the loop never waits, it uses
 * store_writer_flush below). */
#define STORE_CHECKPOINT_S 1
#define STORE_WRITER_QUEUE_MAX 4096 /* jobs; past it, events are dropped and counted */
struct store_writer;
int store_writer_start(const char *path, struct store_writer **out, err_t *err);
void store_writer_stop(struct store_writer *w); /* writes what is queued, then ends */
/* Takes the kind and fields_json strings of ev[0..n) (freed when written). */
void store_writer_events_add(struct store_writer *w, const char *sandbox, struct store_event *ev,
                             size_t n);
void store_writer_events_delete(struct store_writer *w, const char *sandbox);
void store_writer_usage_put(struct store_writer *w, const char *sandbox, const char *json);
void store_writer_sync(struct store_writer *w);

/* The sandbox rows' writes, which a client is answered after, go through the same
 * queue (so they stay in order with every write queued before them) and commit
 * with synchronous=FULL. done, if not NULL, runs on the thread that calls
 * store_writer_run_done (the event loop, when store_writer_done_fd is readable),
 * once the write is on disk, in the order the writes were queued: r is 0, or
 * negative with err saying why. Out of memory, done runs before the call returns.
 * At store_writer_stop, the queue is still written, and each done not yet run
 * is called with -ECANCELED from inside the stop: it must only free what arg
 * holds, as the loop is gone. */
typedef void store_done_fn(int r, const err_t *err, void *arg);
int store_writer_done_fd(struct store_writer *w);
void store_writer_run_done(struct store_writer *w);
void store_writer_sandbox_insert(struct store_writer *w, const struct store_sandbox *sb,
                                 store_done_fn *done, void *arg);
void store_writer_sandbox_status(struct store_writer *w, const char *id, const char *status,
                                 store_done_fn *done, void *arg);
/* done runs once every write queued before it is written (a reader on another
 * connection then sees them), without the caller waiting. */
void store_writer_flush(struct store_writer *w, store_done_fn *done, void *arg);
/* Deletes the sandbox's row, its names and its MCP state, in one transaction. */
void store_writer_sandbox_forget(struct store_writer *w, const char *id, store_done_fn *done,
                                 void *arg);

/* The other rows, which the event loop wrote itself before: the same queue, the
 * same done (NULL: nobody waits; a failure is logged). Each copies what it is
 * given. Names commit without an fsync (store_names_put says why), the rest with
 * synchronous=FULL. A secret's delete takes its placeholders with it. */
void store_writer_sandbox_spec(struct store_writer *w, const char *id, const char *spec_json,
                               store_done_fn *done, void *arg);
void store_writer_names_put(struct store_writer *w, const char *sandbox, uint32_t slot,
                            uint64_t seq, const char *name, store_done_fn *done, void *arg);
void store_writer_mcp_put(struct store_writer *w, const char *sandbox, const char *state_json);
void store_writer_secret_put(struct store_writer *w, const struct store_secret *s,
                             store_done_fn *done, void *arg);
void store_writer_secret_delete(struct store_writer *w, const char *account, const char *name,
                                store_done_fn *done, void *arg);
void store_writer_placeholder_put(struct store_writer *w, const struct store_placeholder *p);
void store_writer_placeholders_delete(struct store_writer *w, const char *sandbox);
void store_writer_account_put(struct store_writer *w, const struct store_account *a,
                              store_done_fn *done, void *arg);
void store_writer_account_delete(struct store_writer *w, const char *name, store_done_fn *done,
                                 void *arg);
void store_writer_connection_put(struct store_writer *w, const struct store_connection *c,
                                 store_done_fn *done, void *arg);
void store_writer_connection_delete(struct store_writer *w, const char *id, store_done_fn *done,
                                    void *arg);

#endif
