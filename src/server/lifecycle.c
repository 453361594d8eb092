/* A sandbox's life on the server's side: every change of its state is a move of
 * src/lifecycle's table (sbx_move), and the keeper's part of each runs while the
 * loop goes on. Here: pause and wake (a paused sandbox is frozen with its memory
 * and servers kept and its open connections closed; the next request thaws it
 * before it is served: server_sandbox_admit), hibernation (a paused one's memory
 * written to an image and its processes ended; the next request restores it the
 * same way: docs/hibernation.md), stop (its processes ended, its
 * workspace kept), and its activity, which holds off idle pause (src/idle).
 * Creation, start and removal are server.c's: they build and destroy. */
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server_impl.h"

/* ---- waiting for a state (Runtime Cloud's GET ...?waitFor=STATE) ---- */

struct state_wait {
    struct state_wait *next;
    struct sbx *sb;
    const char *word; /* sbx_state_word's: static */
    struct event *timer;
    server_sandbox_done_fn *done;
    void *arg;
};

/* Takes w off its sandbox's list and frees it; done is the caller's to call. */
static void state_wait_drop(struct state_wait *w)
{
    for (struct state_wait **p = &w->sb->state_waits; *p; p = &(*p)->next)
        if (*p == w) {
            *p = w->next;
            break;
        }
    event_free(w->timer);
    free(w);
}

static void state_wait_answer(struct state_wait *w, const err_t *err)
{
    struct server *srv = w->sb->owner;
    struct sbx *sb = w->sb;
    server_sandbox_done_fn *done = w->done;
    void *arg = w->arg;
    state_wait_drop(w);
    done(srv, sb, err, arg);
}

static void on_state_wait_timeout(evutil_socket_t fd, short what, void *arg)
{
    state_wait_answer(arg, NULL); /* answered as it is now */
}

/* Its state changed: the waits for its new word are answered. */
static void state_waits_check(struct sbx *sb)
{
    const char *word = sbx_state_word(sb->state);
    struct state_wait *w = sb->state_waits, *next;
    for (; w; w = next) {
        next = w->next;
        if (strcmp(w->word, word) == 0) state_wait_answer(w, NULL);
    }
}

int server_sandbox_wait_state(struct server *srv, struct sbx *sb, const char *word,
                              uint32_t timeout_ms, server_sandbox_done_fn *done, void *arg,
                              err_t *err)
{
    const char *known = NULL;
    for (int s = 0; s < SBX_STATE_COUNT && !known; s++)
        if (strcmp(sbx_state_word((enum sbx_state)s), word) == 0)
            known = sbx_state_word((enum sbx_state)s);
    if (!known) return err_set(err, -EINVAL, "waitFor %.40s is no sandbox state", word);
    if (strcmp(sbx_state_word(sb->state), known) == 0 || timeout_ms == 0) {
        done(srv, sb, NULL, arg);
        return 0;
    }
    struct state_wait *w = calloc(1, sizeof *w);
    if (!w) return err_set(err, -ENOMEM, "out of memory");
    *w = (struct state_wait){.sb = sb, .word = known, .done = done, .arg = arg};
    w->timer = evtimer_new(srv->base, on_state_wait_timeout, w);
    if (!w->timer) {
        free(w);
        return err_set(err, -ENOMEM, "out of memory");
    }
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    evtimer_add(w->timer, &tv);
    w->next = sb->state_waits;
    sb->state_waits = w;
    return 0;
}

void server_state_waits_end(struct sbx *sb, bool answer)
{
    err_t err;
    err_set(&err, -ENOENT, "sandbox %s was removed", sb->id);
    while (sb->state_waits) {
        if (answer)
            state_wait_answer(sb->state_waits, &err);
        else
            state_wait_drop(sb->state_waits); /* at shutdown: the requests end with the loop */
    }
}

bool sbx_move(struct server *srv, struct sbx *sb, enum sbx_event event, json_t *fields)
{
    int to = lifecycle_next(sb->state, event);
    if (to < 0) {
        log_warn("sandbox %s: no move from %s on %s; it stays %s", sb->id,
                 sbx_state_name(sb->state), sbx_event_name(event), sbx_state_name(sb->state));
        json_decref(fields);
        return false;
    }
    const char *kind = lifecycle_event_kind(sb->state, event);
    log_debug("sandbox %s: %s --%s--> %s", sb->id, sbx_state_name(sb->state), sbx_event_name(event),
              sbx_state_name(to));
    enum sbx_state from = sb->state;
    sb->state = (enum sbx_state)to;
    if (!fields && kind) fields = json_object();
    if (kind) server_event(srv, sb->id, kind, fields);
    json_decref(fields);
    if (sb->state != SBX_STOPPED && sb->state != SBX_STARTING) sb->start_at_admit = false;
    /* Every run (created, woken, started again) has a fresh lease, as Runtime Cloud's. */
    if (sb->state == SBX_RUNNING && from != SBX_RUNNING)
        sb->lease_ends_ms =
            sb->settings.lease_s ? now_unix_ms() + (int64_t)sb->settings.lease_s * 1000 : 0;
    sbx_changed(srv, sb, false);
    state_waits_check(sb);
    return true;
}

void sbx_changed(struct server *srv, struct sbx *sb, bool gone)
{
    if (srv->hooks.sandbox_changed) srv->hooks.sandbox_changed(srv, sb, gone);
}

void server_sandbox_changed(struct server *srv, struct sbx *sb)
{
    sbx_changed(srv, sb, false);
}

int64_t sbx_lease_ends_ms(const struct sbx *sb)
{
    return sb->state == SBX_RUNNING ? sb->lease_ends_ms : 0;
}

const char *sbx_stop_reason(const struct sbx *sb)
{
    bool halted = sb->state == SBX_STOPPING || sb->state == SBX_STOPPED;
    return halted && sb->halt_reason[0] ? sb->halt_reason : NULL;
}

int server_sandbox_extend(struct sbx *sb, uint32_t seconds, err_t *err)
{
    if (!sb->settings.lease_s)
        return err_set(err, -EINVAL,
                       "sandbox %s has no lease to extend (it was created without "
                       "timeoutSeconds)",
                       sb->id);
    if (sb->state != SBX_RUNNING)
        return err_set(err, -EBUSY, "sandbox %s is %s: its lease starts when it runs", sb->id,
                       sbx_state_said(sb->state));
    int64_t now = now_unix_ms(), most = now + (int64_t)MODEL_LEASE_MAX_S * 1000;
    int64_t ends = (sb->lease_ends_ms > now ? sb->lease_ends_ms : now) + (int64_t)seconds * 1000;
    sb->lease_ends_ms = ends < most ? ends : most;
    return 0;
}

void server_sandbox_touch(struct sbx *sb)
{
    sb->last_active_ms = now_ms();
}

void server_sandbox_hold(struct sbx *sb, int delta)
{
    sb->holds += delta;
    if (sb->holds < 0) sb->holds = 0;
    server_sandbox_touch(sb);
}

/* A pause or a wake under way (the sandbox is pausing or waking): the keeper
 * freezes or thaws it while the loop goes on, then its new status is written,
 * and once that is on disk it moves (paused or running) and everyone waiting
 * hears. What asks meanwhile waits with them: a wake during a pause waits for
 * the pause and then wakes it, a removal runs once the change is over. */
struct sbx_change {
    enum sbx_event landing; /* frozen or thawed, once the keeper has done it */
    json_t *fields;         /* ... and the fields of its event */
    char reason[32];
    struct timespec started;
    struct sbx_waiter *waiters;     /* hear how this change went */
    struct sbx_waiter *then_resume; /* asked for a wake during a pause */
    char resume_reason[32];
    server_deleted_fn *then_delete; /* a removal asked for meanwhile */
    void *delete_arg;
};

/* At shutdown (sbx_free): the requests waiting end with the loop. */
void server_sandbox_change_free(struct sbx *sb)
{
    if (!sb->change) return;
    sbx_waiters_free(sb->change->waiters);
    sbx_waiters_free(sb->change->then_resume);
    json_decref(sb->change->fields);
    free(sb->change);
    sb->change = NULL;
}

bool server_sandbox_changing(const struct sbx *sb)
{
    return sb->change != NULL;
}

static int start_change(struct server *srv, struct sbx *sb, enum sbx_event event,
                        const char *reason, struct sbx_waiter *waiters, err_t *err);

/* A change that takes it further from running (a wake asked meanwhile waits for it),
 * one that brings it back, and the states a wake starts from. */
static bool going_down(enum sbx_state s)
{
    return s == SBX_PAUSING || s == SBX_HIBERNATING;
}

static bool coming_up(enum sbx_state s)
{
    return s == SBX_WAKING || s == SBX_RESTORING;
}

static bool asleep(enum sbx_state s)
{
    return s == SBX_PAUSED || s == SBX_HIBERNATED;
}

/* The wakes asked for during a pause that is now over. */
static void resume_after(struct server *srv, struct sbx *sb, const char *reason,
                         struct sbx_waiter *waiters)
{
    err_t err = {0};
    struct sbx_change *c = sb->change; /* one a waiter of the pause started */
    if (c)
        return sbx_waiters_append(going_down(sb->state) ? &c->then_resume : &c->waiters, waiters);
    /* Not paused (the pause failed, or it died): nothing to wake; they see its status. */
    if (!asleep(sb->state)) return sbx_waiters_tell(srv, sb, waiters, NULL);
    if (start_change(srv, sb, SBX_WAKE, reason, waiters, &err) < 0)
        sbx_waiters_tell(srv, sb, waiters, &err);
}

/* The change is over (err: it failed, and the state is what it was): the
 * waiters hear, then what was asked for meanwhile runs. */
static void end_change(struct server *srv, struct sbx *sb, const err_t *err)
{
    struct sbx_change *c = sb->change;
    sb->change = NULL;
    struct sbx_waiter *waiters = c->waiters, *resume = c->then_resume;
    server_deleted_fn *del = c->then_delete;
    void *del_arg = c->delete_arg;
    char reason[sizeof c->resume_reason];
    memcpy(reason, c->resume_reason, sizeof reason);
    json_decref(c->fields);
    free(c);
    sbx_waiters_tell(srv, sb, waiters, err);
    if (resume) resume_after(srv, sb, reason, resume);
    err_t e = {0};
    if (del && server_sandbox_delete(srv, sb, del, del_arg, &e) < 0) del(srv, &e, del_arg);
}

/* Its new status is on disk (or could not be written: it is frozen or thawed
 * all the same): it moves, unless its init died meanwhile (it is stopping). */
static void on_status_written(int r, const err_t *err, void *arg)
{
    struct sbx *sb = arg;
    if (r == -ECANCELED) return; /* stopping: sb went with the registry */
    struct sbx_change *c = sb->change;
    err_t died = {0};
    if (!going_down(sb->state) && !coming_up(sb->state)) {
        err_set(&died, -EIO, "sandbox %s is %s now", sb->id, sbx_state_said(sb->state));
        return end_change(sb->owner, sb, &died);
    }
    sbx_move(sb->owner, sb, c->landing, c->fields);
    c->fields = NULL;
    /* From now its image is stored: the next checkpoint counts it from here. */
    if (sb->state == SBX_HIBERNATED) usage_checkpoint(sb->owner, sb);
    end_change(sb->owner, sb, r < 0 ? err : NULL);
}

static double ms_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

static const char *change_verb(enum sbx_state s)
{
    return s == SBX_PAUSING ? "pause" : s == SBX_HIBERNATING ? "hibernate" : "wake";
}

/* Hibernated: the event says where its memory went (gvisor: an image; ns: swap) and how
 * much (usage.c counts it as stored bytes). */
static void landed_hibernated(struct sbx *sb, struct sbx_change *c, const struct proto_result *res)
{
    bool swap = sb->settings.isolation == MODEL_DRIVER_NS;
    c->landing = SBX_CHECKPOINTED;
    c->fields = json_pack("{s:s,s:s,s:I}", "reason", c->reason, "to", swap ? "swap" : "image",
                          "imageBytes", (json_int_t)res->values[0]);
    if (res->msg[0]) { /* gVisor ended it without an image: the next wake starts it cold */
        json_object_set_new(c->fields, "note", json_string(res->msg));
        log_warn("sandbox %s hibernated without an image: %s", sb->id, res->msg);
    }
}

/* Woken: from a freeze, or restored from its image (its sentry is a new one to watch),
 * or, where the image could not be restored, started cold (the event says why). */
static void landed_awake(struct server *srv, struct sbx *sb, struct sbx_change *c,
                         const struct proto_result *res, int *fds, unsigned nfds)
{
    double ms = ms_since(&c->started);
    bool restored = sb->state == SBX_RESTORING;
    server_sandbox_touch(sb);
    metrics_wake(srv, ms / 1000.0);
    c->landing = SBX_THAWED;
    c->fields = json_pack("{s:s,s:f}", "reason", c->reason, "wakeMs", ms);
    if (!restored) return;
    if (nfds == 1 && fds[0] >= 0) server_sandbox_watch(srv, sb, fds[0]);
    static const char *const from[] = {"image", "cold", "swap"};
    bool cold = res->values[0] == PROTO_FROM_COLD;
    json_object_set_new(c->fields, "from",
                        json_string(res->values[0] < ARRAY_LEN(from) ? from[res->values[0]] : "?"));
    if (cold) {
        json_object_set_new(c->fields, "why", json_string(res->msg));
        log_warn("sandbox %s could not be restored from its image (%s); it started cold", sb->id,
                 res->msg);
    }
    if (sb->servers_at_wake && srv->hooks.restored) { /* deferred by a daemon restart */
        err_t err = {0};
        sb->servers_at_wake = false;
        if (srv->hooks.restored(srv, sb, &err) < 0)
            log_warn("sandbox %s: MCP servers not restored: %s", sb->id, err.msg);
    }
}

/* The keeper froze, thawed, checkpointed or restored it (or could not): the new state
 * goes to the store, and the waiters hear once it is on disk. Its init may have died
 * meanwhile: it is stopping then, and the change failed. */
static void on_frozen(struct server *srv, const struct proto_result *res, int *fds, unsigned nfds,
                      void *arg)
{
    struct sbx *sb = arg;
    struct sbx_change *c = sb->change;
    err_t err = {0};
    if (!going_down(sb->state) && !coming_up(sb->state)) {
        for (unsigned i = 0; i < nfds; i++)
            close(fds[i]);
        err_set(&err, -EIO, "sandbox %s is %s now", sb->id, sbx_state_said(sb->state));
        return end_change(srv, sb, &err);
    }
    if (res->status < 0) {
        err_set(&err, res->status, "cannot %s sandbox %s: %s", change_verb(sb->state), sb->id,
                res->msg);
        sbx_move(srv, sb, SBX_CHANGE_FAILED, NULL);
        return end_change(srv, sb, &err);
    }
    if (sb->state == SBX_PAUSING) {
        if (sb->egress) egress_sandbox_close_all(sb->egress);
        metrics_pause(srv);
        sb->paused_ms = now_ms();
        c->landing = SBX_FROZEN;
        c->fields = json_pack("{s:s}", "reason", c->reason);
    } else if (sb->state == SBX_HIBERNATING) {
        landed_hibernated(sb, c, res);
    } else {
        landed_awake(srv, sb, c, res, fds, nfds);
    }
    store_writer_sandbox_status(srv->writer, sb->id,
                                sbx_status_name(lifecycle_next(sb->state, c->landing)),
                                on_status_written, sb);
}

/* Takes waiters (on success). The usage checkpoint's stats go first: the
 * keeper answers in order, so they count the time before the change. */
static int start_change(struct server *srv, struct sbx *sb, enum sbx_event event,
                        const char *reason, struct sbx_waiter *waiters, err_t *err)
{
    /* A freeze or a thaw, or a checkpoint or a restore (from hibernated). */
    bool down = event == SBX_PAUSE || event == SBX_HIBERNATE;
    bool image = event == SBX_HIBERNATE || sb->state == SBX_HIBERNATED;
    struct sbx_change *c = calloc(1, sizeof *c);
    if (!c) return err_set(err, -ENOMEM, "out of memory");
    *c = (struct sbx_change){.waiters = waiters};
    str_copy(c->reason, sizeof c->reason, reason);
    clock_gettime(CLOCK_MONOTONIC, &c->started);
    usage_checkpoint(srv, sb);
    struct proto_ref ref = {.flag = down ? 1 : 0};
    memcpy(ref.id, sb->id, sizeof ref.id);
    int r = server_keeper_send(srv, image ? PROTO_HIBERNATE : PROTO_FREEZE, &ref, sizeof ref,
                               image && !down ? 1 : 0, on_frozen, sb, err);
    if (r < 0) {
        free(c);
        return err_wrap(err, "cannot %s sandbox %s",
                        event == SBX_PAUSE ? "pause"
                        : down             ? "hibernate"
                                           : "wake",
                        sb->id);
    }
    sb->change = c;
    sbx_move(srv, sb, event, NULL);
    return 0;
}

static int begin_change(struct server *srv, struct sbx *sb, enum sbx_event event,
                        const char *reason, server_sandbox_done_fn *done, void *arg, err_t *err)
{
    struct sbx_waiter *w = NULL;
    int r = sbx_waiters_add(&w, done, arg, err);
    if (r == 0 && (r = start_change(srv, sb, event, reason, w, err)) < 0) sbx_waiters_free(w);
    return r;
}

/* What a request to change a sandbox that is busy with something else hears. */
static int busy(const struct sbx *sb, err_t *err)
{
    return err_set(err, -EBUSY, "sandbox %s is %s; try again in a moment", sb->id,
                   sbx_state_said(sb->state));
}

int sbx_request(struct server *srv, struct sbx *sb, const struct sbx_request *rq,
                server_sandbox_done_fn *done, void *arg, err_t *err)
{
    if (sb->state == rq->under_way) {
        int r = sbx_waiters_add(rq->joined, done, arg, err);
        return r < 0 ? r : 1;
    }
    if (sb->state == rq->target) {
        if (done) done(srv, sb, NULL, arg);
        return 1;
    }
    if (lifecycle_next(sb->state, rq->event) >= 0) return 0;
    if (sbx_state_transitional(sb->state)) return busy(sb, err);
    return err_set(err, -EINVAL, "sandbox %s is %s; it cannot be %s", sb->id,
                   sbx_state_said(sb->state), rq->done_verb);
}

int server_sandbox_pause(struct server *srv, struct sbx *sb, const char *reason,
                         server_sandbox_done_fn *done, void *arg, err_t *err)
{
    struct sbx_request rq = {SBX_PAUSE, SBX_PAUSING, SBX_PAUSED, "paused",
                             sb->change ? &sb->change->waiters : NULL};
    int r = sbx_request(srv, sb, &rq, done, arg, err);
    return r == 0 ? begin_change(srv, sb, SBX_PAUSE, reason, done, arg, err) : r < 0 ? r : 0;
}

/* Paused, it hibernates; running, it is paused first. */
struct hibernate_ask {
    server_sandbox_done_fn *done;
    void *arg;
    char reason[32];
};

static void hibernate_after_pause(struct server *srv, struct sbx *sb, const err_t *err, void *arg)
{
    struct hibernate_ask a = *(struct hibernate_ask *)arg;
    free(arg);
    err_t e = {0};
    if (!err && server_sandbox_hibernate(srv, sb, a.reason, a.done, a.arg, &e) < 0) err = &e;
    if (err && a.done) a.done(srv, sb, err, a.arg);
}

int server_sandbox_hibernate(struct server *srv, struct sbx *sb, const char *reason,
                             server_sandbox_done_fn *done, void *arg, err_t *err)
{
    if (sb->state == SBX_RUNNING || sb->state == SBX_PAUSING) {
        struct hibernate_ask *a = calloc(1, sizeof *a);
        if (!a) return err_set(err, -ENOMEM, "out of memory");
        *a = (struct hibernate_ask){.done = done, .arg = arg};
        str_copy(a->reason, sizeof a->reason, reason);
        int r = server_sandbox_pause(srv, sb, reason, hibernate_after_pause, a, err);
        if (r < 0) free(a);
        return r;
    }
    struct sbx_request rq = {SBX_HIBERNATE, SBX_HIBERNATING, SBX_HIBERNATED, "hibernated",
                             sb->change ? &sb->change->waiters : NULL};
    int r = sbx_request(srv, sb, &rq, done, arg, err);
    return r == 0 ? begin_change(srv, sb, SBX_HIBERNATE, reason, done, arg, err) : r < 0 ? r : 0;
}

int server_sandbox_resume(struct server *srv, struct sbx *sb, const char *reason,
                          server_sandbox_done_fn *done, void *arg, err_t *err)
{
    struct sbx_change *c = sb->change;
    if (going_down(sb->state) && !c->then_resume)
        str_copy(c->resume_reason, sizeof c->resume_reason, reason);
    if (going_down(sb->state)) return sbx_waiters_add(&c->then_resume, done, arg, err);
    if (coming_up(sb->state)) return sbx_waiters_add(&c->waiters, done, arg, err);
    if (sb->state == SBX_REMOVING) return busy(sb, err);
    if (!asleep(sb->state)) {
        if (done) done(srv, sb, NULL, arg);
        return 0;
    }
    return begin_change(srv, sb, SBX_WAKE, reason, done, arg, err);
}

int server_sandbox_admit(struct server *srv, struct sbx *sb, const char *why,
                         server_sandbox_done_fn *done, void *arg, err_t *err)
{
    server_sandbox_touch(sb);
    if (sb->state == SBX_REMOVING) return busy(sb, err);
    if (sb->start_at_admit && (sb->state == SBX_STOPPED || sb->state == SBX_STARTING)) {
        int r = server_sandbox_start(srv, sb, why, done, arg, err);
        return r < 0 ? r : 1;
    }
    if (!asleep(sb->state) && !going_down(sb->state) && !coming_up(sb->state)) return 0;
    int r = server_sandbox_resume(srv, sb, why, done, arg, err);
    return r < 0 ? r : 1;
}

/* server_sandbox_delete during a change: it runs when the change is over. */
int server_sandbox_delete_after_change(struct sbx *sb, server_deleted_fn *done, void *arg,
                                       err_t *err)
{
    if (sb->change->then_delete)
        return err_set(err, -EBUSY, "sandbox %s is already being removed", sb->id);
    sb->change->then_delete = done;
    sb->change->delete_arg = arg;
    return 0;
}

/* ---- stop: its processes end, its workspace stays ---- */

/* How the keeper's part of a stop went, until its status is on disk. */
struct halt_answer {
    struct sbx *sb;
    enum sbx_event landing; /* halted, or halt failed */
    err_t err;
};

static void on_revive(evutil_socket_t fd, short what, void *arg)
{
    struct sbx *sb = arg;
    err_t err = {0};
    if (sb->state != SBX_STOPPED || strcmp(sb->halt_reason, HALT_OUT_OF_MEMORY) != 0)
        return; /* started, removed or stopped by someone since */
    if (server_sandbox_start(sb->owner, sb, "restart after it ran out of memory", NULL, NULL,
                             &err) < 0)
        log_warn("sandbox %s ran out of memory and cannot start again: %s", sb->id, err.msg);
}

/* Stopped out of memory: it starts again by itself, after a backoff (REVIVE_*). */
static void revive_later(struct sbx *sb)
{
    uint64_t now = now_ms();
    if (now - sb->last_oom_ms > REVIVE_RESET_MS) sb->oom_stops = 0;
    sb->last_oom_ms = now;
    uint64_t delay = (uint64_t)REVIVE_FIRST_MS << (sb->oom_stops < 7 ? sb->oom_stops : 7);
    if (delay > REVIVE_MAX_MS) delay = REVIVE_MAX_MS;
    sb->oom_stops++;
    if (!sb->revive) sb->revive = evtimer_new(sb->owner->base, on_revive, sb);
    struct timeval tv = {(time_t)(delay / 1000), (suseconds_t)(delay % 1000) * 1000};
    if (sb->revive) evtimer_add(sb->revive, &tv);
    log_info("sandbox %s ran out of memory; it starts again in %llu ms", sb->id,
             (unsigned long long)delay);
}

/* It moves, and its waiters hear. */
static void land_halt(struct sbx *sb, enum sbx_event landing, const err_t *err)
{
    json_t *fields = landing == SBX_HALTED ? json_pack("{s:s}", "reason", sb->halt_reason) : NULL;
    sbx_move(sb->owner, sb, landing, fields);
    /* Before the waiters hear: one of them may remove it (which ends the timer). */
    if (sb->state == SBX_STOPPED && strcmp(sb->halt_reason, HALT_OUT_OF_MEMORY) == 0)
        revive_later(sb);
    struct sbx_waiter *w = sb->waiters;
    sb->waiters = NULL;
    sbx_waiters_tell(sb->owner, sb, w, err);
}

/* Until now it was stopping, which no removal takes: sb is still there (at a
 * stop of the daemon, it went with the registry). */
static void on_halt_written(int r, const err_t *err, void *arg)
{
    struct halt_answer *a = arg;
    if (r == -ECANCELED) return free(a);
    if (r < 0) log_warn("status of sandbox %s not saved: %s", a->sb->id, err->msg);
    land_halt(a->sb, a->landing, a->err.msg[0] ? &a->err : NULL);
    free(a);
}

/* The keeper ended it (or could not): its new status goes to the store, and it
 * moves once that is on disk. */
static void on_halted(struct server *srv, const struct proto_result *res, int *fds, unsigned nfds,
                      void *arg)
{
    struct sbx *sb = arg;
    struct halt_answer *a = calloc(1, sizeof *a);
    if (!a) { /* no memory to wait with: it moves now, its status unsaved */
        log_warn("sandbox %s: out of memory; its status is not saved", sb->id);
        return land_halt(
            sb, res->status < 0 && res->status != -ENOENT ? SBX_HALT_FAILED : SBX_HALTED, NULL);
    }
    *a = (struct halt_answer){.sb = sb, .landing = SBX_HALTED};
    char who[300];
    if (res->status < 0 && res->status != -ENOENT) {
        a->landing = SBX_HALT_FAILED;
        err_set(&a->err, res->status,
                "cannot stop sandbox %s: %s; remove it, or start it to build it again", sb->id,
                res->msg);
        log_warn("%s", a->err.msg);
    } else {
        /* An init that died where the kernel's OOM killer had been at work: under gvisor
         * runsc's sentry was its victim (docs/gvisor.md), so the user reads that. */
        if (res->values[0] > 0 && strcmp(sb->halt_reason, HALT_INIT_EXITED) == 0)
            str_copy(sb->halt_reason, sizeof sb->halt_reason, HALT_OUT_OF_MEMORY);
        log_info("sandbox %s stopped (%s)", sbx_label(sb, who, sizeof who), sb->halt_reason);
    }
    store_writer_sandbox_status(srv->writer, sb->id,
                                sbx_status_name(lifecycle_next(sb->state, a->landing)),
                                on_halt_written, a);
}

/* Moves it (stop or died) and asks the keeper to end it. Its usage is counted
 * up to now first (the keeper answers in order). */
static int halt(struct server *srv, struct sbx *sb, enum sbx_event event, const char *reason,
                err_t *err)
{
    str_copy(sb->halt_reason, sizeof sb->halt_reason, reason);
    struct proto_ref ref = {0};
    memcpy(ref.id, sb->id, sizeof ref.id);
    usage_checkpoint(srv, sb);
    server_sandbox_detach(srv, sb);
    int r = server_keeper_send(srv, PROTO_STOP, &ref, sizeof ref, 0, on_halted, sb, err);
    if (r < 0) return err_wrap(err, "cannot stop sandbox %s", sb->id);
    sbx_move(srv, sb, event, json_pack("{s:s}", "reason", reason));
    return 0;
}

int server_sandbox_stop(struct server *srv, struct sbx *sb, const char *reason,
                        server_sandbox_done_fn *done, void *arg, err_t *err)
{
    struct sbx_request rq = {SBX_STOP, SBX_STOPPING, SBX_STOPPED, "stopped", &sb->waiters};
    int r = sbx_request(srv, sb, &rq, done, arg, err);
    if (r != 0) return r < 0 ? r : 0;
    r = sbx_waiters_add(&sb->waiters, done, arg, err);
    if (r == 0) r = halt(srv, sb, SBX_STOP, reason, err);
    if (r < 0) {
        sbx_waiters_free(sb->waiters);
        sb->waiters = NULL;
    }
    return r;
}

void server_sandbox_died(struct server *srv, struct sbx *sb)
{
    char who[300];
    log_warn("sandbox %s stopped: its init process exited", sbx_label(sb, who, sizeof who));
    err_t err = {0};
    if (halt(srv, sb, SBX_DIED, HALT_INIT_EXITED, &err) < 0) log_warn("%s", err.msg);
}

bool server_sandbox_busy(struct sbx *sb)
{
    return sb->holds > 0 || (sb->owner->hooks.busy && sb->owner->hooks.busy(sb));
}

/* Once a second: usage checkpoints and the daemon's own tick (idle pause). */
static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct server *srv = arg;
    if (srv->hooks.tick) srv->hooks.tick(srv);
    usage_tick(srv);
}

int server_tick_start(struct server *srv)
{
    srv->tick_timer = event_new(srv->base, -1, EV_PERSIST, on_tick, srv);
    struct timeval tv = {SERVER_TICK_MS / 1000, (SERVER_TICK_MS % 1000) * 1000};
    return srv->tick_timer ? event_add(srv->tick_timer, &tv) : -ENOMEM;
}

void server_tick_stop(struct server *srv)
{
    if (srv->tick_timer) event_free(srv->tick_timer);
    srv->tick_timer = NULL;
}
