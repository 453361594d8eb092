/* Private to the server folder. */
#ifndef RUNTIME_SERVER_IMPL_H
#define RUNTIME_SERVER_IMPL_H

#include "../catalog/catalog.h"
#include "../secrets/secrets.h"
#include "../store/store.h"
#include "server.h"

#define DEFAULT_PIDS_MAX 1024
#define EVENTS_FLUSH_MS 200
/* Why a sandbox stopped on its own: its init died, or it died where the OOM killer had
 * been at work (the stopped event's reason). */
#define HALT_INIT_EXITED "init process exited"
#define HALT_OUT_OF_MEMORY "out of memory"
/* A hibernated one whose processes a host restart ended: its next request starts it. */
#define HALT_HOST_RESTARTED "host restarted, hibernated"
/* A sandbox stopped out of memory starts again after 0.5 s, doubling at each stop that
 * follows within a minute of the last, up to a minute: under gvisor a program that
 * exhausts the memory ends the whole sandbox, where under ns the kernel kills only it. */
#define REVIVE_FIRST_MS 500
#define REVIVE_MAX_MS 60000
#define REVIVE_RESET_MS 60000
#define EVENTS_PENDING_MAX 512
#define EVENTS_PER_S 100         /* routine events per sandbox, bursts of 5x */
#define EVENTS_SECURITY_PER_S 20 /* security events (events.c), a budget of their own */

/* events.c: whether an event is kept apart from routine ones (and which they are). */
bool event_is_security(const char *kind, json_t *fields);

/* A sandbox as the server knows it (server.h reads it for the other layers). */
struct sbx {
    char id[PROTO_ID_LEN];
    char account[ACCOUNT_NAME_MAX]; /* whose it is: nobody else sees it */
    uint32_t slot;                  /* its host uid range */
    enum sbx_state state;           /* moved only by lifecycle.c's sbx_move (lifecycle.h's table) */
    bool init_died;       /* its init exited while it was being built: stopped once built */
    bool sentry_swapping; /* a template's image replaces its sentry (server_template_restore) */
    bool died_swapping;   /* ... and the old one's death came meanwhile */
    bool user_programs;   /* an exec of the API ran in it (or a restart cannot tell): a
                           * program it left behind would be in a template's image, or
                           * ended by one's restore (docs/templates.md) */
    char halt_reason[32]; /* why it is stopping: "api", HALT_INIT_EXITED, ... */
    int64_t created_ms;
    struct model_sandbox settings;
    struct egress_sandbox *egress; /* NULL while not running */
    struct event *death;           /* fires when its init process exits */
    struct budget *budget;         /* what the server holds for it (bodies, streams) */
    void *slots[SBX_SLOT_COUNT];   /* what the gateway and the API keep for it */
    /* lifecycle.c: for the idle pause */
    uint64_t last_active_ms; /* monotonic */
    uint64_t paused_ms;      /* monotonic: when it was last paused (hibernateAfterSeconds) */
    int holds;               /* execs and gateway requests under way */
    /* lifecycle.c: hibernation (docs/hibernation.md) */
    bool servers_at_wake; /* a restart found it hibernated: its MCP servers start at wake */
    bool start_at_admit;  /* ... with its processes gone: the next request starts it */
    unsigned file_ops;    /* file_ops.c: file-tree operations under way */
    /* usage.c: what it used so far, and where the counting stands */
    struct meter_usage usage;
    int64_t mark_ms;               /* wall clock of the last checkpoint */
    bool usage_unreadable;         /* its stored row could not be read: kept, not counted */
    uint64_t mark_cpu_ns;          /* its cgroup's CPU time then */
    uint64_t stored_bytes;         /* its /workspace on the host, at the last look */
    bool stats_pending;            /* a checkpoint's figures are on their way */
    enum sbx_state stats_as;       /* ... counted as the status it showed when asked */
    struct meter_series *series;   /* minute by minute, for charts (made at its first) */
    struct rate_limit events_rate; /* events.c: what it may record a second */
    struct rate_limit security_events_rate; /* ... of security events, apart */
    struct sbx_waiter *waiters;             /* for the end of its creation, start or stop */
    struct sbx_change *change;              /* lifecycle.c: a pause or wake under way, or NULL */
    struct state_wait *state_waits;         /* lifecycle.c: requests waiting for a state */
    int64_t lease_ends_ms; /* wall clock: a run's lease (settings.lease_s) ends; 0: none */
    /* lifecycle.c: one the OOM killer ended starts again by itself, after a backoff */
    struct event *revive;
    unsigned oom_stops;   /* in a row, each less than REVIVE_RESET_MS after the last */
    uint64_t last_oom_ms; /* monotonic */
    struct server *owner;
    struct sbx *next;
};

struct pending_event {
    char sandbox[PROTO_ID_LEN];
    struct store_event ev; /* kind and fields_json owned */
};

struct server {
    struct server_config cfg;
    struct server_hooks hooks;
    struct event_base *base;
    struct httpd *http;     /* the API and the gateway: --listen (TLS when configured) and
                             * the unix socket (plain: local, root only) */
    struct budget *budget;  /* what it holds for requests: the parent of each sandbox's */
    struct ssl_ctx_st *tls; /* for new TLS connections; NULL without TLS */
    struct store *store;
    struct store_writer *writer; /* events, usage and sandbox rows, on a thread of its own */
    struct event *writer_done;   /* the writer finished writes someone waits for */
    struct egress *egress;
    struct mitm_signer_client *signer; /* leaves for the egress's interception */
    int keeper;
    uint32_t next_req;
    struct keeper_pending *keeper_fifo, **keeper_fifo_tail; /* sent, not yet handed back */
    struct server_run *runs;       /* programs running to their end (run.c) */
    struct event *keeper_ev;       /* the keeper's socket is readable */
    struct event *keeper_answered; /* answers read by a waiting call, to hand back */
    bool serving;                  /* the loop runs: no call may wait (they are counted) */
    struct sbx *sandboxes;         /* newest first */
    size_t count;
    struct pending_event pending[EVENTS_PENDING_MAX];
    size_t n_pending;
    struct event *flush_timer;
    struct vault *vault;       /* the secrets */
    struct accounts *accounts; /* who may call, and their limits */
    json_t *catalog;           /* the built-in MCP catalog */
    struct event *tick_timer;  /* once a second: hooks.tick, usage checkpoints */
    struct metrics *metrics;
};

/* server.c: watches fd, readable once its sandbox's init (or sentry) died. */
void server_sandbox_watch(struct server *srv, struct sbx *sb, int fd);

/* keeper_client.c: requests to the keeper. A send returns at once and done gets
 * the answer later, from the loop, with the descriptors it carries (done closes
 * them); at a stop, requests still waiting are dropped and done is not called. A
 * call waits for its answer: for the startup only, before the loop runs.
 * keeper_client_start comes before the first of either. */
int server_keeper_call(struct server *srv, uint16_t type, const void *payload, size_t len,
                       struct proto_result *res, int *fds, unsigned maxfds, err_t *err);
typedef void server_keeper_done_fn(struct server *srv, const struct proto_result *res, int *fds,
                                   unsigned nfds, void *arg);
int server_keeper_send(struct server *srv, uint16_t type, const void *payload, size_t len,
                       unsigned maxfds, server_keeper_done_fn *done, void *arg, err_t *err);
int server_keeper_after(struct server *srv, server_keeper_done_fn *done, void *arg, err_t *err);
/* An answer that should carry want descriptors (what names them in the error): 0 when it
 * does; else they are closed and err says why (the keeper's failure, or what is missing). */
int server_keeper_fds(const struct proto_result *res, int *fds, unsigned nfds, unsigned want,
                      const char *what, err_t *err);
int keeper_client_start(struct server *srv);
/* run.c: at shutdown, ends every run still going; its caller gets an error. */
void server_runs_stop(struct server *srv);
/* server.c: starts a program; done gets the keeper's answer and its four pipes. */
int server_exec_send(struct server *srv, struct sbx *sb, const struct server_run_spec *spec,
                     server_keeper_done_fn *done, void *arg, err_t *err);
void keeper_client_stop(struct server *srv);

/* accounts.c: at start, the removals a stop cut short. */
void server_accounts_resume(struct server *srv);

/* tls.c: the listener's certificate, from the keeper; reloaded on SIGHUP (a
 * failure keeps the one in place and is logged). */
int server_tls_start(struct server *srv, err_t *err);
void server_tls_reload(struct server *srv);
struct ssl_ctx_st *server_tls_context(void *srv); /* for a new connection; NULL: plain */
void server_tls_stop(struct server *srv);

/* Those waiting to hear how something about a sandbox went (its creation, a
 * pause, wake, stop or start), in the order they asked (server.c). */
/* lifecycle.c: the waits for a state of sb end, answered (it is removed: -ENOENT) or
 * not (the daemon stops). */
void server_state_waits_end(struct sbx *sb, bool answer);

struct sbx_waiter {
    server_created_fn *done;
    void *arg;
    struct sbx_waiter *next;
};
/* Puts the list w at the end of *list. */
void sbx_waiters_append(struct sbx_waiter **list, struct sbx_waiter *w);
/* Appends one (done NULL: nobody to tell, nothing added). */
int sbx_waiters_add(struct sbx_waiter **list, server_created_fn *done, void *arg, err_t *err);
/* Tells each how it went, and frees the list. */
void sbx_waiters_tell(struct server *srv, struct sbx *sb, struct sbx_waiter *w, const err_t *err);
/* Frees the list without telling anyone (at shutdown: their requests end with the loop). */
void sbx_waiters_free(struct sbx_waiter *w);

/* lifecycle.c: the one place a sandbox's state changes. Moves sb by event
 * (lifecycle.h's table) and records the move's event, with fields (taken; NULL:
 * none); false, and the move refused with a warning in the log, when the table
 * has no such move. */
bool sbx_move(struct server *srv, struct sbx *sb, enum sbx_event event, json_t *fields);
/* Tells the sandbox_changed hook (server.h). */
void sbx_changed(struct server *srv, struct sbx *sb, bool gone);
/* The door of a request to move sb (pause, stop, start): it joins the move under
 * way (adding done to joined), is answered at once when sb is already where it
 * would go, and is refused when the table has no such move (-EBUSY while sb is
 * busy with another, else -EINVAL: "it cannot be <done_verb>"). 0: the caller
 * makes the move; 1: nothing more to do (done is or will be called); <0: err. */
struct sbx_request {
    enum sbx_event event;
    enum sbx_state under_way, target;
    const char *done_verb;
    struct sbx_waiter **joined;
};
int sbx_request(struct server *srv, struct sbx *sb, const struct sbx_request *rq,
                server_sandbox_done_fn *done, void *arg, err_t *err);
/* Its init exited on its own: it is stopped as server_sandbox_stop would. */
void server_sandbox_died(struct server *srv, struct sbx *sb);
#define SERVER_TICK_MS 1000
void server_sandbox_change_free(struct sbx *sb); /* at shutdown: drops its waiters */
/* A removal asked for during a pause or resume runs when it is over. */
int server_sandbox_delete_after_change(struct sbx *sb, server_deleted_fn *done, void *arg,
                                       err_t *err);
int server_tick_start(struct server *srv);
void server_tick_stop(struct server *srv);

/* server.c: its processes are going (a stop or a removal): the gateway's hook,
 * its egress and the watch on its init let go of them. */
void server_sandbox_detach(struct server *srv, struct sbx *sb);

/* usage.c */
void usage_checkpoint(struct server *srv, struct sbx *sb);
void usage_started(struct server *srv, struct sbx *sb); /* a new sandbox, now running */
void usage_tick(struct server *srv);
void usage_restore(struct server *srv, struct sbx *sb);
void usage_removed(struct server *srv, struct sbx *sb);

/* metrics.c */
void metrics_pause(struct server *srv);
void metrics_wake(struct server *srv, double seconds);
void metrics_keeper(struct server *srv, uint16_t type);
void metrics_keeper_wait(struct server *srv, uint16_t type); /* the loop waited for it */
void metrics_event(struct server *srv, const char *kind, json_t *fields);
int metrics_start(struct server *srv);
void metrics_stop(struct server *srv);

/* events.c */
int events_start(struct server *srv, err_t *err);
void events_flush(struct server *srv); /* hands the pending events to the writer */
void events_stop(struct server *srv);

#endif
