/* The store's writer: a thread with a connection of its own that makes the writes
 * nobody waits for (events, usage counters), the sandbox rows' writes that a
 * client is answered after, and the WAL checkpoints, so that neither SQLite's
 * time nor an fsync is spent on the server's event loop, where every sandbox's
 * proxied bytes move. Jobs run in the order queued. A job with a done callback
 * goes, once written, to a second list that the loop empties (store_writer_run_done)
 * when the eventfd says there is something in it. */
#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "store.h"

enum job_kind {
    JOB_EVENTS_ADD,
    JOB_EVENTS_DELETE,
    JOB_USAGE_PUT,
    JOB_SANDBOX_INSERT,
    JOB_SANDBOX_STATUS,
    JOB_SANDBOX_FORGET,
    JOB_FLUSH, /* writes nothing: done runs once everything queued before it is written */
    JOB_SANDBOX_SPEC,
    JOB_NAMES_PUT,
    JOB_MCP_PUT,
    JOB_SECRET_PUT,
    JOB_SECRET_DELETE,
    JOB_PLACEHOLDER_PUT,
    JOB_PLACEHOLDERS_DELETE,
    JOB_ACCOUNT_PUT,
    JOB_ACCOUNT_DELETE,
    JOB_CONNECTION_PUT,
    JOB_CONNECTION_DELETE
};

struct job {
    enum job_kind kind;
    char *sandbox;
    struct store_event *events; /* JOB_EVENTS_ADD: kind and fields_json owned */
    size_t n_events;
    char *json;                /* JOB_USAGE_PUT; JOB_SANDBOX_STATUS: the status */
    struct store_sandbox *row; /* JOB_SANDBOX_INSERT: a copy, owned */
    store_done_fn *done;       /* NULL: nobody waits */
    void *arg;
    int r; /* how it went, for done */
    err_t err;
    struct job *next;
    /* The rows that were written on the loop before (their strings owned): */
    uint32_t slot;                        /* JOB_NAMES_PUT (json: the name) */
    uint64_t seq;                         /* JOB_NAMES_PUT */
    struct store_secret secret;           /* JOB_SECRET_PUT; JOB_SECRET_DELETE: account, name */
    struct store_placeholder placeholder; /* JOB_PLACEHOLDER_PUT */
    struct store_account account;         /* JOB_ACCOUNT_PUT; JOB_ACCOUNT_DELETE: name */
    struct store_connection connection;   /* JOB_CONNECTION_PUT; JOB_CONNECTION_DELETE: id */
};

static void rows_free(struct job *j);

struct store_writer {
    struct store *st; /* used by the thread only */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake; /* the thread: a job was queued, or stop */
    pthread_cond_t idle; /* store_writer_sync: the queue was written */
    struct job *head, **tail;
    struct job *done_head, **done_tail; /* written, their done not yet run */
    int done_fd;                        /* eventfd: readable when done_head is not empty */
    size_t queued;                      /* jobs in the queue */
    uint64_t n_queued, n_done;          /* ever, for sync */
    uint64_t events_dropped;
    bool stop;
};

static void job_free(struct job *j)
{
    for (size_t i = 0; i < j->n_events; i++) {
        free((char *)j->events[i].kind);
        free((char *)j->events[i].fields_json);
    }
    free(j->events);
    free(j->sandbox);
    free(j->json);
    if (j->row) {
        store_sandbox_clear(j->row);
        free(j->row);
    }
    rows_free(j);
    free(j);
}

static int run_row_job(struct store *st, struct job *j, err_t *err);

/* A sandbox gone: its names, MCP state and row in one transaction (one fsync). */
static int forget_sandbox(struct store *st, const char *id, err_t *err)
{
    int r = store_begin(st, err);
    if (r == 0) r = store_names_delete(st, id, err);
    if (r == 0) r = store_mcp_delete(st, id, err);
    if (r == 0) r = store_sandbox_delete(st, id, err);
    return store_end(st, r, err);
}

static void job_run(struct store *st, struct job *j)
{
    err_t err = {0};
    int r = 0;
    switch (j->kind) {
    case JOB_EVENTS_ADD:
        r = store_events_add(st, j->sandbox, j->events, j->n_events, &err);
        break;
    case JOB_EVENTS_DELETE:
        r = store_events_delete(st, j->sandbox, &err);
        break;
    case JOB_USAGE_PUT:
        r = store_usage_put(st, j->sandbox, j->json, &err);
        break;
    case JOB_SANDBOX_INSERT:
        r = store_sandbox_insert(st, j->row, &err);
        break;
    case JOB_SANDBOX_STATUS:
        r = store_sandbox_set_status(st, j->sandbox, j->json, &err);
        break;
    case JOB_SANDBOX_FORGET:
        r = forget_sandbox(st, j->sandbox, &err);
        break;
    case JOB_FLUSH:
        break;
    case JOB_SANDBOX_SPEC:
    case JOB_NAMES_PUT:
    case JOB_MCP_PUT:
    case JOB_SECRET_PUT:
    case JOB_SECRET_DELETE:
    case JOB_PLACEHOLDER_PUT:
    case JOB_PLACEHOLDERS_DELETE:
    case JOB_ACCOUNT_PUT:
    case JOB_ACCOUNT_DELETE:
    case JOB_CONNECTION_PUT:
    case JOB_CONNECTION_DELETE:
        r = run_row_job(st, j, &err);
        break;
    }
    j->r = r;
    j->err = err;
    if (r < 0 && !j->done) log_warn("sandbox %s: %s", j->sandbox, err.msg);
}

/* Checkpoints run here only (store_open turns them off on every connection) and
 * at most once every STORE_CHECKPOINT_S: PASSIVE never waits for readers or
 * writers, and with nothing new in the WAL it costs no I/O. */
static void checkpoint_when_due(struct store_writer *w, struct timespec *due)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec < due->tv_sec || (now.tv_sec == due->tv_sec && now.tv_nsec < due->tv_nsec))
        return;
    store_checkpoint(w->st);
    *due = now;
    due->tv_sec += STORE_CHECKPOINT_S;
}

static struct job *take_all(struct store_writer *w, size_t *n)
{
    struct job *all = w->head;
    *n = w->queued;
    w->head = NULL;
    w->tail = &w->head;
    w->queued = 0;
    return all;
}

/* Runs the jobs; those with a callback are handed back, in order, on done. */
static void run_all(struct store *st, struct job *jobs, struct job ***done_tail)
{
    while (jobs) {
        struct job *next = jobs->next;
        job_run(st, jobs);
        if (jobs->done) {
            jobs->next = NULL;
            **done_tail = jobs;
            *done_tail = &jobs->next;
        } else {
            job_free(jobs);
        }
        jobs = next;
    }
}

/* Puts the written jobs with a callback on the done list and wakes the loop. */
static void hand_back(struct store_writer *w, struct job *done)
{
    if (!done) return;
    bool was_empty = !w->done_head;
    *w->done_tail = done;
    while (done->next)
        done = done->next;
    w->done_tail = &done->next;
    uint64_t one = 1;
    if (was_empty && write(w->done_fd, &one, sizeof one) < 0)
        log_warn("cannot wake the loop for finished store writes: %s", strerror(errno));
}

static void *writer_main(void *arg)
{
    struct store_writer *w = arg;
    struct timespec due;
    clock_gettime(CLOCK_MONOTONIC, &due);
    pthread_mutex_lock(&w->lock);
    while (w->head || !w->stop) {
        if (!w->head) pthread_cond_timedwait(&w->wake, &w->lock, &due);
        size_t n;
        struct job *jobs = take_all(w, &n), *done = NULL, **done_tail = &done;
        pthread_mutex_unlock(&w->lock);
        run_all(w->st, jobs, &done_tail);
        checkpoint_when_due(w, &due);
        pthread_mutex_lock(&w->lock);
        hand_back(w, done);
        w->n_done += n;
        pthread_cond_broadcast(&w->idle);
    }
    pthread_mutex_unlock(&w->lock);
    store_checkpoint(w->st);
    return NULL;
}

int store_writer_start(const char *path, struct store_writer **out, err_t *err)
{
    struct store_writer *w = calloc(1, sizeof *w);
    if (!w) return err_set(err, -ENOMEM, "out of memory");
    w->tail = &w->head;
    w->done_tail = &w->done_head;
    w->done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (w->done_fd < 0) {
        free(w);
        return err_set(err, -errno, "cannot make the store writer's eventfd: %s", strerror(errno));
    }
    int r = store_open(path, &w->st, err);
    if (r < 0) {
        close(w->done_fd);
        free(w);
        return r;
    }
    pthread_mutex_init(&w->lock, NULL);
    pthread_condattr_t attr; /* the wait's deadline is on the monotonic clock */
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&w->wake, &attr);
    pthread_condattr_destroy(&attr);
    pthread_cond_init(&w->idle, NULL);
    int e = pthread_create(&w->thread, NULL, writer_main, w);
    if (e != 0) {
        store_close(w->st);
        close(w->done_fd);
        free(w);
        return err_set(err, -e, "cannot start the store's writer thread: %s", strerror(e));
    }
    *out = w;
    return 0;
}

/* At stop, the loop is going: each callback still due is told so (-ECANCELED),
 * to free what its arg holds; the write itself was made. */
static void cancel_done(struct store_writer *w)
{
    struct job *j = w->done_head;
    w->done_head = NULL;
    w->done_tail = &w->done_head;
    while (j) {
        struct job *next = j->next;
        err_t err = {0};
        err_set(&err, -ECANCELED, "the daemon is stopping");
        j->done(-ECANCELED, &err, j->arg);
        job_free(j);
        j = next;
    }
}

void store_writer_stop(struct store_writer *w)
{
    if (!w) return;
    pthread_mutex_lock(&w->lock);
    w->stop = true;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    store_close(w->st);
    cancel_done(w);
    close(w->done_fd);
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->wake);
    pthread_cond_destroy(&w->idle);
    free(w);
}

/* Takes j (NULL when it could not be made: out of memory, nothing queued). Events
 * are the one job that may be refused: past STORE_WRITER_QUEUE_MAX jobs (a disk
 * that stalls), so that memory stays bounded; the count is logged later. */
static void enqueue(struct store_writer *w, struct job *j)
{
    if (!j) return;
    pthread_mutex_lock(&w->lock);
    if (j->kind == JOB_EVENTS_ADD && w->queued >= STORE_WRITER_QUEUE_MAX) {
        w->events_dropped += j->n_events;
        pthread_mutex_unlock(&w->lock);
        job_free(j);
        return;
    }
    uint64_t dropped = w->events_dropped;
    w->events_dropped = 0;
    *w->tail = j;
    w->tail = &j->next;
    w->queued++;
    w->n_queued++;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
    if (dropped)
        log_warn("%llu events not saved: the store's writer was %d jobs behind",
                 (unsigned long long)dropped, STORE_WRITER_QUEUE_MAX);
}

static struct job *job_new(enum job_kind kind, const char *sandbox)
{
    struct job *j = calloc(1, sizeof *j);
    if (j) j->kind = kind;
    if (j && !(j->sandbox = strdup(sandbox))) {
        free(j);
        j = NULL;
    }
    if (!j) log_warn("sandbox %s: out of memory; a store write is lost", sandbox);
    return j;
}

void store_writer_events_add(struct store_writer *w, const char *sandbox, struct store_event *ev,
                             size_t n)
{
    struct job *j = job_new(JOB_EVENTS_ADD, sandbox);
    if (j && !(j->events = malloc(n * sizeof *ev))) {
        job_free(j);
        j = NULL;
    }
    if (j) {
        memcpy(j->events, ev, n * sizeof *ev);
        j->n_events = n;
    } else {
        for (size_t i = 0; i < n; i++) {
            free((char *)ev[i].kind);
            free((char *)ev[i].fields_json);
        }
    }
    enqueue(w, j);
}

void store_writer_events_delete(struct store_writer *w, const char *sandbox)
{
    enqueue(w, job_new(JOB_EVENTS_DELETE, sandbox));
}

void store_writer_usage_put(struct store_writer *w, const char *sandbox, const char *json)
{
    struct job *j = job_new(JOB_USAGE_PUT, sandbox);
    if (j && !(j->json = strdup(json))) {
        job_free(j);
        j = NULL;
    }
    enqueue(w, j);
}

void store_writer_sync(struct store_writer *w)
{
    pthread_mutex_lock(&w->lock);
    uint64_t target = w->n_queued;
    while (w->n_done < target)
        pthread_cond_wait(&w->idle, &w->lock);
    pthread_mutex_unlock(&w->lock);
}

int store_writer_done_fd(struct store_writer *w)
{
    return w->done_fd;
}

void store_writer_run_done(struct store_writer *w)
{
    uint64_t n;
    if (read(w->done_fd, &n, sizeof n) < 0 && errno != EAGAIN)
        log_warn("cannot read the store writer's eventfd: %s", strerror(errno));
    pthread_mutex_lock(&w->lock);
    struct job *j = w->done_head;
    w->done_head = NULL;
    w->done_tail = &w->done_head;
    pthread_mutex_unlock(&w->lock);
    while (j) {
        struct job *next = j->next;
        j->done(j->r, j->r < 0 ? &j->err : NULL, j->arg);
        job_free(j);
        j = next;
    }
}

/* A job that is waited for: when it cannot be made, done hears so at once. */
static struct job *acked_job(enum job_kind kind, const char *sandbox, store_done_fn *done,
                             void *arg)
{
    struct job *j = job_new(kind, sandbox);
    if (j) {
        j->done = done;
        j->arg = arg;
    } else if (done) {
        err_t err = {0};
        err_set(&err, -ENOMEM, "out of memory");
        done(-ENOMEM, &err, arg);
    }
    return j;
}

static struct store_sandbox *row_copy(const struct store_sandbox *sb)
{
    struct store_sandbox *c = malloc(sizeof *c);
    if (!c) return NULL;
    *c = *sb;
    c->name = sb->name ? strdup(sb->name) : NULL;
    c->spec_json = sb->spec_json ? strdup(sb->spec_json) : NULL;
    if ((sb->name && !c->name) || (sb->spec_json && !c->spec_json)) {
        store_sandbox_clear(c);
        free(c);
        return NULL;
    }
    return c;
}

/* Fails j (out of memory for its data) through its callback, and frees it. */
static void job_lost(struct job *j)
{
    err_t err = {0};
    err_set(&err, -ENOMEM, "out of memory");
    if (j->done) j->done(-ENOMEM, &err, j->arg);
    job_free(j);
}

void store_writer_sandbox_insert(struct store_writer *w, const struct store_sandbox *sb,
                                 store_done_fn *done, void *arg)
{
    struct job *j = acked_job(JOB_SANDBOX_INSERT, sb->id, done, arg);
    if (j && !(j->row = row_copy(sb))) return job_lost(j);
    enqueue(w, j);
}

void store_writer_sandbox_status(struct store_writer *w, const char *id, const char *status,
                                 store_done_fn *done, void *arg)
{
    struct job *j = acked_job(JOB_SANDBOX_STATUS, id, done, arg);
    if (j && !(j->json = strdup(status))) return job_lost(j);
    enqueue(w, j);
}

void store_writer_sandbox_forget(struct store_writer *w, const char *id, store_done_fn *done,
                                 void *arg)
{
    enqueue(w, acked_job(JOB_SANDBOX_FORGET, id, done, arg));
}

/* ---- the rows the loop used to write itself: settings, names, MCP state,
 * secrets, placeholders, accounts ---- */

static void rows_free(struct job *j)
{
    free((char *)j->secret.account);
    free((char *)j->secret.name);
    free((uint8_t *)j->secret.sealed);
    free((char *)j->secret.rules_json);
    free((char *)j->placeholder.sandbox);
    free((char *)j->placeholder.account);
    free((char *)j->placeholder.secret);
    free((char *)j->placeholder.placeholder);
    free((char *)j->account.name);
    free((char *)j->account.key_hash);
    free((char *)j->account.key2_hash);
    free((char *)j->connection.id);
    free((char *)j->connection.account);
    free((char *)j->connection.key_hash);
    free((char *)j->connection.agent_name);
    free((char *)j->connection.machine);
}

/* A secret gone, and its placeholders with it, in one transaction. */
static int delete_secret(struct store *st, const char *account, const char *name, err_t *err)
{
    int r = store_begin(st, err);
    if (r == 0) r = store_secret_delete(st, account, name, err);
    if (r == 0) r = store_placeholders_delete(st, NULL, account, name, err);
    return store_end(st, r, err);
}

static int run_row_job(struct store *st, struct job *j, err_t *err)
{
    switch (j->kind) {
    case JOB_SANDBOX_SPEC:
        return store_sandbox_set_spec(st, j->sandbox, j->json, err);
    case JOB_NAMES_PUT: /* without an fsync: see store_names_put */
        return store_names_put(st, j->sandbox, j->slot, j->seq, j->json, err);
    case JOB_MCP_PUT:
        return store_mcp_put(st, j->sandbox, j->json, err);
    case JOB_SECRET_PUT:
        return store_secret_put(st, &j->secret, err);
    case JOB_SECRET_DELETE:
        return delete_secret(st, j->secret.account, j->secret.name, err);
    case JOB_PLACEHOLDER_PUT:
        return store_placeholder_put(st, &j->placeholder, err);
    case JOB_PLACEHOLDERS_DELETE:
        return store_placeholders_delete(st, j->sandbox, NULL, NULL, err);
    case JOB_ACCOUNT_PUT:
        return store_account_put(st, &j->account, err);
    case JOB_ACCOUNT_DELETE:
        return store_account_delete(st, j->account.name, err);
    case JOB_CONNECTION_PUT:
        return store_connection_put(st, &j->connection, err);
    case JOB_CONNECTION_DELETE:
        return store_connection_delete(st, j->connection.id, err);
    case JOB_FLUSH:
    case JOB_EVENTS_ADD:
    case JOB_EVENTS_DELETE:
    case JOB_USAGE_PUT:
    case JOB_SANDBOX_INSERT:
    case JOB_SANDBOX_STATUS:
    case JOB_SANDBOX_FORGET:
        break;
    }
    return err_set(err, -EINVAL, "not a row job");
}

/* *to = a copy of from (NULL stays NULL); false when out of memory. */
static bool dup_text(const char **to, const char *from)
{
    *to = from ? strdup(from) : NULL;
    return !from || *to;
}

/* Queues j, or fails it when filling it in ran out of memory (ok false). */
static void enqueue_filled(struct store_writer *w, struct job *j, bool ok)
{
    if (j && !ok) return job_lost(j);
    enqueue(w, j);
}

void store_writer_sandbox_spec(struct store_writer *w, const char *id, const char *spec_json,
                               store_done_fn *done, void *arg)
{
    struct job *j = acked_job(JOB_SANDBOX_SPEC, id, done, arg);
    enqueue_filled(w, j, j && dup_text((const char **)&j->json, spec_json));
}

void store_writer_names_put(struct store_writer *w, const char *sandbox, uint32_t slot,
                            uint64_t seq, const char *name, store_done_fn *done, void *arg)
{
    struct job *j = acked_job(JOB_NAMES_PUT, sandbox, done, arg);
    if (j) {
        j->slot = slot;
        j->seq = seq;
    }
    enqueue_filled(w, j, j && dup_text((const char **)&j->json, name));
}

void store_writer_mcp_put(struct store_writer *w, const char *sandbox, const char *state_json)
{
    struct job *j = acked_job(JOB_MCP_PUT, sandbox, NULL, NULL);
    enqueue_filled(w, j, j && dup_text((const char **)&j->json, state_json));
}

void store_writer_secret_put(struct store_writer *w, const struct store_secret *s,
                             store_done_fn *done, void *arg)
{
    struct job *j = acked_job(JOB_SECRET_PUT, s->account, done, arg);
    uint8_t *sealed = j ? malloc(s->sealed_len ? s->sealed_len : 1) : NULL;
    if (j) {
        j->secret = (struct store_secret){.sealed = sealed,
                                          .sealed_len = s->sealed_len,
                                          .created_ms = s->created_ms,
                                          .updated_ms = s->updated_ms};
        if (sealed) memcpy(sealed, s->sealed, s->sealed_len);
    }
    enqueue_filled(w, j,
                   j && sealed && dup_text(&j->secret.account, s->account) &&
                       dup_text(&j->secret.name, s->name) &&
                       dup_text(&j->secret.rules_json, s->rules_json));
}

void store_writer_secret_delete(struct store_writer *w, const char *account, const char *name,
                                store_done_fn *done, void *arg)
{
    struct job *j = acked_job(JOB_SECRET_DELETE, account, done, arg);
    enqueue_filled(w, j,
                   j && dup_text(&j->secret.account, account) && dup_text(&j->secret.name, name));
}

void store_writer_placeholder_put(struct store_writer *w, const struct store_placeholder *p)
{
    struct job *j = acked_job(JOB_PLACEHOLDER_PUT, p->sandbox, NULL, NULL);
    enqueue_filled(w, j,
                   j && dup_text(&j->placeholder.sandbox, p->sandbox) &&
                       dup_text(&j->placeholder.account, p->account) &&
                       dup_text(&j->placeholder.secret, p->secret) &&
                       dup_text(&j->placeholder.placeholder, p->placeholder));
}

void store_writer_placeholders_delete(struct store_writer *w, const char *sandbox)
{
    enqueue(w, acked_job(JOB_PLACEHOLDERS_DELETE, sandbox, NULL, NULL));
}

void store_writer_account_put(struct store_writer *w, const struct store_account *a,
                              store_done_fn *done, void *arg)
{
    struct job *j = acked_job(JOB_ACCOUNT_PUT, a->name, done, arg);
    if (j) {
        j->account = *a;
        j->account.name = j->account.key_hash = j->account.key2_hash = NULL;
    }
    enqueue_filled(w, j,
                   j && dup_text(&j->account.name, a->name) &&
                       dup_text(&j->account.key_hash, a->key_hash) &&
                       dup_text(&j->account.key2_hash, a->key2_hash));
}

void store_writer_account_delete(struct store_writer *w, const char *name, store_done_fn *done,
                                 void *arg)
{
    struct job *j = acked_job(JOB_ACCOUNT_DELETE, name, done, arg);
    enqueue_filled(w, j, j && dup_text(&j->account.name, name));
}

void store_writer_connection_put(struct store_writer *w, const struct store_connection *c,
                                 store_done_fn *done, void *arg)
{
    struct job *j = acked_job(JOB_CONNECTION_PUT, c->account, done, arg);
    if (j) j->connection.created_ms = c->created_ms;
    enqueue_filled(w, j,
                   j && dup_text(&j->connection.id, c->id) &&
                       dup_text(&j->connection.account, c->account) &&
                       dup_text(&j->connection.key_hash, c->key_hash) &&
                       dup_text(&j->connection.agent_name, c->agent_name) &&
                       dup_text(&j->connection.machine, c->machine));
}

void store_writer_connection_delete(struct store_writer *w, const char *id, store_done_fn *done,
                                    void *arg)
{
    struct job *j = acked_job(JOB_CONNECTION_DELETE, id, done, arg);
    enqueue_filled(w, j, j && dup_text(&j->connection.id, id));
}

void store_writer_flush(struct store_writer *w, store_done_fn *done, void *arg)
{
    enqueue(w, acked_job(JOB_FLUSH, "", done, arg));
}
