/* server: the unprivileged half of runtimed. It owns the event loop, the state
 * (store), the registry of sandboxes and the connection to the keeper. The API
 * and the gateway run on its loop and hook into a sandbox's life through
 * struct server_hooks: the server includes neither (docs/architecture.md). */
#ifndef RUNTIME_SERVER_H
#define RUNTIME_SERVER_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "../accounts/accounts.h"
#include "../common/common.h"
#include "../dashboard/dashboard.h"
#include "../egress/egress.h"
#include "../httpd/httpd.h"
#include "../lifecycle/lifecycle.h"
#include "../meter/meter.h"
#include "../model/model.h"
#include "../proto/proto.h"

struct server_config {
    char state_dir[512];
    char db_path[600];
    char admin_key[80];
    char public_url[256];
    char listen[128];
    uint32_t max_sandboxes;
    uint32_t mcp_input_wait_ms;   /* --mcp-input-wait: a parked 2026-07-28 call's (0: default) */
    uint32_t hibernate_after_s;   /* --hibernate-after: a create's hibernateAfterSeconds */
    uint32_t hibernate_below_mib; /* --hibernate-below: MemAvailable under it, paused ones go */
    struct egress_pin pins[64];   /* --resolve */
    size_t n_pins;
    char upstream_ca[512];             /* --upstream-ca, "" for none */
    char nameserver[128];              /* --nameserver, "" for resolv.conf */
    bool inspect_allowed_tls;          /* --tls-inspect allowed-hosts */
    struct egress_rates egress_rates;  /* --rate, 0: the defaults */
    uint8_t secrets_key[32];           /* sealing key, read by root from STATE/secrets.key */
    struct meter_rates rates;          /* --price-* */
    int signer_sock;                   /* the signer's socket (mitm/signer.c); -1: none */
    bool tls;                          /* --listen speaks TLS (the keeper reads the files) */
    bool templates;                    /* --templates on */
    struct dashboard_limits dashboard; /* --session-idle, --session-max */
    struct httpd_limits http;          /* --max-connections, ... */
    uint64_t sandbox_held_bytes;       /* --held-per-sandbox: what the server may hold for one */
    uint64_t held_bytes;               /* --held-total: ... for all of them together */
    char tls_cert[512], tls_key[512];  /* their names, for messages: the server never opens them */
    /* The isolation drivers (enum proto_driver): --driver's (what a create without
     * `isolation` gets), and for each the reason it is missing ("" where it works). */
    uint32_t default_driver;
    char driver_missing[PROTO_DRIVER_COUNT][200];
};

/* A sandbox as the server knows it: private to the server (server_impl.h). The
 * other layers read it through these, and keep what they add to a sandbox in a
 * slot of their own, which they set and free (the gateway in hooks.halted, the
 * API in hooks.freed). */
struct sbx;
const char *sbx_id(const struct sbx *sb);
const char *sbx_account(const struct sbx *sb);
const struct model_sandbox *sbx_settings(const struct sbx *sb);
enum sbx_state sbx_state(const struct sbx *sb);
int64_t sbx_created_ms(const struct sbx *sb); /* wall clock */
/* An exec of the API ran in it: it neither gives nor takes an MCP server's template. */
void sbx_note_user_program(struct sbx *sb);
bool sbx_user_programs(const struct sbx *sb);
uint64_t sbx_last_active_ms(const struct sbx *sb); /* monotonic: the last request or hold */
/* Wall clock: when the lease of its run ends (Runtime Cloud's endsAt); 0: no lease, or not
 * running. Each run (created, woken, started) gets a fresh one of settings.lease_s. */
int64_t sbx_lease_ends_ms(const struct sbx *sb);
/* Why a stopping or stopped sandbox stopped, as its sandbox.stopped event says ("api",
 * "lease", "init process exited", "out of memory"); NULL while it runs, and for one
 * stopped before the daemon last started (the reason is not stored). */
const char *sbx_stop_reason(const struct sbx *sb);
/* Runtime Cloud's :extend: its lease ends seconds later (from now if it has ended), at
 * most MODEL_LEASE_MAX_S ahead. -EINVAL without a lease, -EBUSY when not running. */
int server_sandbox_extend(struct sbx *sb, uint32_t seconds, err_t *err);
struct budget *sbx_budget(const struct sbx *sb); /* what the server holds for it */
enum sbx_slot { SBX_SLOT_GATEWAY, SBX_SLOT_API, SBX_SLOT_COUNT };
void *sbx_slot(const struct sbx *sb, enum sbx_slot slot);
void sbx_set_slot(struct sbx *sb, enum sbx_slot slot, void *data);

/* "ID (name NAME, account ACCOUNT)", or without the name when it has none: how the
 * daemon's log names a sandbox. Returns out. */
const char *sbx_label(const struct sbx *sb, char *out, size_t size);

struct server;
struct event_base;
struct httpd_req;
struct policy;

/* What the API and the gateway add to a sandbox's life, filled in by the daemon.
 * Every hook may be NULL (nothing to add). */
struct server_hooks {
    /* Every HTTP request once its head is in, on the TCP listener (maybe TLS)
     * and the unix socket: the API and the gateway (httpd.h); and httpd's own
     * errors, to be answered in their shape. */
    void (*http_head)(struct httpd_req *req, struct server *srv);
    void (*http_fail)(struct httpd_req *req, int status, const char *code, const char *message,
                      struct server *srv);
    /* A sandbox was re-adopted after a restart, or started again after a stop:
     * bring back what hangs off it. */
    int (*restored)(struct server *srv, struct sbx *sb, err_t *err);
    /* The egress policy of a sandbox for its network settings (the gateway adds
     * the hosts its servers need). NULL: the settings alone. */
    int (*policy)(struct sbx *sb, const struct model_network *network, struct policy *out,
                  err_t *err);
    /* Its processes are going (a stop or a removal, or a removal that failed):
     * free what hangs off them. What is stored stays: restored brings it back
     * when a stopped sandbox starts again. */
    void (*halted)(struct sbx *sb);
    /* sb is freed (removed, or the daemon stops): free what the slots hold. */
    void (*freed)(struct sbx *sb);
    /* Something in it is busy on the host's side (installs): no idle pause yet. */
    bool (*busy)(struct sbx *sb);
    /* Its egress reported something (egress.refused, ...), before it is recorded. */
    void (*egress_event)(struct sbx *sb, const char *kind, json_t *fields);
    /* Prometheus lines of its own, for /metrics. */
    void (*metrics)(struct sbx *sb, FILE *f);
    /* A sandbox appeared, changed state or settings, or is gone (removed, or its creation
     * failed): for those who watch (the dashboard's event stream). */
    void (*sandbox_changed)(struct server *srv, struct sbx *sb, bool gone);
    /* An event of a sandbox was recorded (after the rate limits): the same. */
    void (*event_recorded)(struct server *srv, struct sbx *sb, const char *kind, json_t *fields,
                           int64_t time_ms);
    /* Once a second, on the loop (idle pause looks for sandboxes to pause). */
    void (*tick)(struct server *srv);
};

/* Runs until SIGTERM/SIGINT or the keeper hangs up. Takes ownership of the fds. */
int server_main(const struct server_config *cfg, const struct server_hooks *hooks, int keeper_sock,
                int tcp_fd, int unix_fd);

struct event_base *server_base(struct server *srv);
const struct server_config *server_config(struct server *srv);
struct store *server_store(struct server *srv); /* reads only, once started */
struct store_writer;
struct store_writer *server_writer(struct server *srv); /* every write */
json_t *server_catalog(struct server *srv);             /* borrowed */
/* What the server holds for requests that name no sandbox (the parent of theirs). */
struct budget *server_budget(struct server *srv);

/* Registry. Lookups take an id or a name, among the account's own sandboxes only (ids
 * first): a sandbox of another account is not found, and its id is no id here (a name
 * equal to it finds the account's sandbox of that name). account NULL: any, by id only. */
struct sbx *server_sandbox_find(struct server *srv, const char *account, const char *id_or_name);
struct sbx *server_sandbox_first(struct server *srv);
struct sbx *server_sandbox_next(const struct sbx *sb); /* NULL after the last */
/* Creates with these settings (taken: *settings is left empty). The keeper builds it while the loop
 * goes on: the sandbox is listed at once as creating, and done is called once, from the loop, with
 * the running sandbox or with NULL and why it failed. Negative with err (and no call of done) when
 * it cannot even start: -EOPNOTSUPP when its isolation driver is missing on this daemon
 * (server_config.driver_missing). Settings without isolation get the daemon's default_driver. */
typedef void server_created_fn(struct server *srv, struct sbx *sb, const err_t *err, void *arg);
int server_sandbox_create(struct server *srv, const char *account, struct model_sandbox *settings,
                          server_created_fn *done, void *arg, err_t *err);
/* Calls done when sb is no longer creating: at once, or once the keeper is done. */
void server_sandbox_when_created(struct server *srv, struct sbx *sb, server_created_fn *done,
                                 void *arg);
/* Removes a sandbox; done is called once, from the loop (err NULL: it is gone). A
 * sandbox being created, started, stopped or removed is refused (-EBUSY). */
typedef void server_deleted_fn(struct server *srv, const err_t *err, void *arg);
int server_sandbox_delete(struct server *srv, struct sbx *sb, server_deleted_fn *done, void *arg,
                          err_t *err);

/* Replaces the sandbox's settings (copied: name, labels, env, idle pause, network...)
 * once they are on disk; then open connections a new policy refuses are closed, and
 * done is called once, from the loop, with the settings now in force (err NULL) or
 * why they could not be saved (settings NULL). Not called when the daemon stops
 * first. Negative with err (and no call of done) when it cannot even start: -EBUSY
 * while it is created or started, -EEXIST when another sandbox of its account has the
 * name. Resources (memory, CPUs, disk) are the create's: a change of them is the
 * caller's to refuse. */
typedef void server_settings_set_fn(struct server *srv, const struct model_sandbox *settings,
                                    const err_t *err, void *arg);
int server_sandbox_update(struct server *srv, struct sbx *sb, const struct model_sandbox *changed,
                          server_settings_set_fn *done, void *arg, err_t *err);

/* Something the sandbox's JSON shows changed outside the server (an MCP server's status):
 * the sandbox_changed hook hears of it. */
void server_sandbox_changed(struct server *srv, struct sbx *sb);

/* The policy hook would answer otherwise now (the gateway's servers need other
 * hosts): a running sandbox's egress applies its new answer. */
void server_sandbox_apply_policy(struct server *srv, struct sbx *sb);

/* A row of a sandbox's in the store that cannot be read (table: "usage", "mcp"): an
 * error in the log, naming the sandbox and why, and counted in /metrics
 * (runtime_store_unreadable_rows_total{table}). The caller keeps the row as it is. */
void server_row_unreadable(struct server *srv, const char *table, const char *sandbox_id,
                           const char *why);

/* Events: recorded in memory and written to the store in batches. */
void server_event(struct server *srv, const char *sandbox_id, const char *kind, json_t *fields);
/* The sandbox's events after seq `after`, oldest first, as the API's JSON array
 * (borrowed), or NULL and why: done is called once, from the loop, when those
 * recorded so far are written. Negative with err (done not called) when it
 * cannot be asked. */
typedef void server_events_fn(struct server *srv, json_t *events, const err_t *err, void *arg);
int server_events(struct server *srv, struct sbx *sb, int64_t after, server_events_fn *done,
                  void *arg, err_t *err);

/* The secrets (secrets/secrets.h: vault_put, vault_list, ...). */
struct vault *server_vault(struct server *srv);

/* Accounts (accounts/accounts.h), and their sandboxes as a whole (accounts.c). */
struct accounts *server_accounts(struct server *srv);
/* What the account's sandboxes hold now: how many, and their memory. */
void server_account_load(struct server *srv, const char *account, size_t *sandboxes,
                         uint64_t *memory_mib);
/* Removes an account: marked first (a restart finishes a removal cut short),
 * then each of its sandboxes as rm does, then its secrets, usage and row. done
 * is called once, from the loop (err NULL: it is gone). -EBUSY while one of its
 * sandboxes is being created or removed. */
typedef void server_account_removed_fn(struct server *srv, const err_t *err, void *arg);
int server_account_remove(struct server *srv, const char *name, server_account_removed_fn *done,
                          void *arg, err_t *err);

/* Keeper calls on behalf of the API. */
/* Opens path in sb (write: mode is the permission bits to give the file, 0: leave
 * them, 0644 when new). The keeper answers later: done is called once, from the
 * loop, with the descriptor (done closes it) or with -1 and why; at a stop it is
 * not called (its request ends with the loop). Negative with err (and no call of
 * done) when it cannot even be asked for. */
typedef void server_file_fn(struct server *srv, int fd, const err_t *err, void *arg);
int server_open_file(struct server *srv, struct sbx *sb, const char *path, int write, unsigned mode,
                     server_file_fn *done, void *arg, err_t *err);
/* Puts the file from in place of to (to NULL: removes from), in the sandbox as its
 * user; keep_mode: from takes the mode of the file it replaces. done gets NULL or
 * why not, from the loop. */
typedef void server_renamed_fn(struct server *srv, const err_t *err, void *arg);
int server_rename_file(struct server *srv, struct sbx *sb, const char *from, const char *to,
                       bool keep_mode, server_renamed_fn *done, void *arg, err_t *err);

/* One of Runtime Cloud's file-tree operations (proto.h, FILE_OP; op->id is filled in
 * here). The keeper starts it and a helper carries it out while the loop goes on: done
 * is called once, from the loop, with its result (res->status: 0 or the operation's
 * negative errno) or, when it could not be carried out at all, with err. At most
 * SERVER_FILE_OPS_PER_SANDBOX run at once in a sandbox; past it, -EAGAIN with err and
 * no call of done. */
#define SERVER_FILE_OPS_PER_SANDBOX 8
struct server_file_result {
    int status;
    const char *msg; /* the helper's own explanation, or "" */
    uint64_t values[5];
    const char *entries; /* STAT and LIST: records for proto_file_entry_get */
    size_t entries_len;
};
typedef void server_file_op_fn(struct server *srv, const struct server_file_result *res,
                               const err_t *err, void *arg);
int server_file_op(struct server *srv, struct sbx *sb, const struct proto_file_op *op,
                   server_file_op_fn *done, void *arg, err_t *err);

/* Activity keeps a sandbox awake (src/idle): touch marks it, a hold (an exec or
 * gateway request under way) keeps it awake until released. */
void server_sandbox_touch(struct sbx *sb);
void server_sandbox_hold(struct sbx *sb, int delta);
/* Something is under way in it: a hold, or the gateway's hooks.busy (installs). */
bool server_sandbox_busy(struct sbx *sb);
/* Pause freezes every process of a running sandbox and closes its open
 * connections; resume thaws a paused one. The keeper does it while the loop goes
 * on: done (may be NULL) is called once, from the loop, when the new status is
 * on disk (err NULL), or with why it failed. Pausing a paused sandbox, or
 * resuming one that is not paused, calls done at once; a resume asked for
 * during a pause waits for it, then resumes. Negative with err (done not
 * called) when it cannot be asked. */
typedef void server_sandbox_done_fn(struct server *srv, struct sbx *sb, const err_t *err,
                                    void *arg);
int server_sandbox_pause(struct server *srv, struct sbx *sb, const char *reason,
                         server_sandbox_done_fn *done, void *arg, err_t *err);
int server_sandbox_resume(struct server *srv, struct sbx *sb, const char *reason,
                          server_sandbox_done_fn *done, void *arg, err_t *err);
/* Hibernate writes a paused sandbox's memory to an image and ends its processes (a
 * running one is paused first): it then costs storage only, and the next request (or a
 * resume) restores it (docs/hibernation.md). done as for pause. -ENOTSUP (through done)
 * where its driver cannot. */
int server_sandbox_hibernate(struct server *srv, struct sbx *sb, const char *reason,
                             server_sandbox_done_fn *done, void *arg, err_t *err);
/* --hibernate-after: what a create that names no hibernateAfterSeconds gets. */
uint32_t server_hibernate_after_s(const struct server *srv);
bool server_templates(const struct server *srv); /* --templates on */
/* --hibernate-below: under this much MemAvailable (MiB), paused gvisor sandboxes hibernate. */
uint32_t server_hibernate_below_mib(const struct server *srv);
/* Monotonic ms of its last pause (0: never paused in this run). */
uint64_t sbx_paused_ms(const struct sbx *sb);
void sbx_set_paused_ms(struct sbx *sb, uint64_t ms);
/* Stop ends every process of a running or paused sandbox (or one whose init
 * died) and keeps its workspace, settings, name and gateway link and token;
 * start builds a stopped (or failed) one again on its workspace, its MCP servers
 * with it. done as for pause: once the new status is on disk. Stopping a stopped
 * sandbox, or starting a running one, calls done at once; a stop or start under
 * way takes more waiters. -EBUSY during a pause or wake, a creation or a removal. */
int server_sandbox_stop(struct server *srv, struct sbx *sb, const char *reason,
                        server_sandbox_done_fn *done, void *arg, err_t *err);
int server_sandbox_start(struct server *srv, struct sbx *sb, const char *reason,
                         server_sandbox_done_fn *done, void *arg, err_t *err);
/* Runtime Cloud's waitFor: done (from the loop) once sb's state word (sbx_state_word:
 * running, paused, stopped, ...) is word, or after timeout_ms with sb as it is then;
 * with err -ENOENT when it is removed first. At once when it is already (or
 * timeout_ms is 0). -EINVAL (done not called) for a word that is no state's. */
int server_sandbox_wait_state(struct server *srv, struct sbx *sb, const char *word,
                              uint32_t timeout_ms, server_sandbox_done_fn *done, void *arg,
                              err_t *err);
/* A pause or resume is under way: a request must wait for it (resume). */
bool server_sandbox_changing(const struct sbx *sb);
/* The one admission of a request that needs its sandbox running (the API's exec, files
 * and MCP start; the gateway's every request): touches it, then
 *   0   it is not paused nor being paused or resumed: go on now (done is not called);
 *   1   it is woken first: done is called once, when it runs or with why it does not;
 *   <0  it is being removed (-EBUSY), or a wake cannot be asked; err says why.
 * A sandbox that is creating, stopped or failed is 0: the caller says what it can do. */
int server_sandbox_admit(struct server *srv, struct sbx *sb, const char *why,
                         server_sandbox_done_fn *done, void *arg, err_t *err);

/* /metrics in Prometheus text format (malloc'd), or NULL. */
char *server_metrics_text(struct server *srv);

/* Usage of every sandbox of the account (NULL: of every account), live and
 * removed, with its cost, and the totals per account (GET /v1/usage). The live
 * ones are counted up to now first, without the loop waiting: done is called
 * once, from the loop, with the answer (borrowed) or NULL and why. Negative
 * with err (done not called) when it cannot be asked. */
typedef void server_usage_fn(struct server *srv, json_t *usage, const err_t *err, void *arg);
int server_usage(struct server *srv, const char *account, server_usage_fn *done, void *arg,
                 err_t *err);

/* What the account's sandboxes (or the one sandbox `only`) used minute by minute, the
 * last day, for charts (GET /v1/usage/series): {stepSeconds, minutes, points: [{t, vcpu,
 * memoryMiB, pausedStorageMiB, costUsd}]}, summed over the sandboxes there are now (a
 * removed one's minutes go with it; its cost stays in server_usage). */
json_t *server_usage_series(struct server *srv, const char *account, const struct sbx *only);

/* A program run to its end on the loop (the exec API, MCP installs). */
struct evbuffer;
struct server_run;
struct server_run_spec {
    const char *const *argv;
    const char *const *envp;
    const char *cwd;
    uint32_t timeout_ms; /* 0: none */
    bool serve;          /* an MCP server (struct sandbox_exec's serve) */
    const char *stdin_text;
    size_t stdin_len;
    size_t output_cap; /* bytes kept per stream */
    /* Set: each chunk of output goes here as it comes (stream 1 stdout, 2 stderr),
     * nothing is kept, and the result's buffers are empty (a streamed exec). */
    void (*on_output)(void *arg, int stream, const char *data, size_t len);
};
struct server_run_result {
    const err_t *error; /* it could not be started at all (the rest is empty), or NULL */
    bool ended;         /* false: the monitor died without a status */
    int exit_code;      /* -1 when it never started (start_errno says why) */
    int signal;         /* the signal that ended it (exit_code is 128+it), 0 when it exited */
    int start_errno;
    bool timed_out;
    uint64_t duration_ms;
    struct evbuffer *out, *err; /* borrowed for the call */
    size_t out_dropped, err_dropped;
};
typedef void (*server_run_done)(void *arg, const struct server_run_result *res);
/* Starts argv; done is called once, from the loop, when it has ended or could not
 * start (the keeper's answer comes later: the loop does not wait for it). *out
 * (may be NULL) lets the caller cancel: server_run_cancel kills the program and
 * done is not called. Negative with err (done not called) when it cannot even be
 * asked for. */
int server_run(struct server *srv, struct sbx *sb, const struct server_run_spec *spec,
               server_run_done done, void *arg, struct server_run **out, err_t *err);
void server_run_cancel(struct server_run *run);
/* Starts argv with its four pipes (stdin, stdout, stderr, its status record) for
 * the caller, who reads them itself (the gateway's server processes; closing the
 * status pipe stops the program). done is called once, from the loop, with the
 * pipes (done owns them) or with NULL and why; at a stop it is not called. A
 * caller that may go away first keeps a flag of its own for done to look at, and
 * done then closes the pipes. Negative with err (done not called) when it cannot
 * even be asked for. */
typedef void server_exec_fn(struct server *srv, int *fds, const err_t *err, void *arg);
int server_exec(struct server *srv, struct sbx *sb, const struct server_run_spec *spec,
                server_exec_fn *done, void *arg, err_t *err);

/* Templates of MCP servers (docs/templates.md; the gvisor driver's). Save checkpoints sb,
 * whose one program is server `name`, as template key without stopping it: done gets
 * the image's bytes. Restore gives sb, in which nothing may run, that template's image
 * and install: done gets the program's four pipes (stdin, stdout, stderr, status; its
 * to close), or NULL and why (-ENOENT: no template; -EBUSY: something runs in sb;
 * -EAGAIN: the image failed, and sb was started again as it was). Negative with err
 * (done not called) when it cannot even be asked. */
typedef void server_template_fn(struct server *srv, int *fds, uint64_t image_bytes,
                                const err_t *err, void *arg);
int server_template_save(struct server *srv, struct sbx *sb, const char *key, const char *name,
                         server_template_fn *done, void *arg, err_t *err);
int server_template_restore(struct server *srv, struct sbx *sb, const char *key, const char *name,
                            server_template_fn *done, void *arg, err_t *err);

/* The environment of a program in sb: defaults, the secrets' placeholders under their
 * own names, the sandbox's env, then extra (may be NULL). A new object, or NULL. */
json_t *server_exec_env(struct server *srv, struct sbx *sb, json_t *extra, err_t *err);
/* "K=V" strings of an env object, NULL-terminated; free with server_env_free. */
int server_env_list(json_t *env, char ***out, err_t *err);
void server_env_free(char **list);

#endif
