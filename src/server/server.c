#include "server.h"

#include <errno.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <malloc.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../mitm/mitm.h"
#include "server_impl.h"

struct event_base *server_base(struct server *srv)
{
    return srv->base;
}

struct store *server_store(struct server *srv)
{
    return srv->store;
}

struct store_writer *server_writer(struct server *srv)
{
    return srv->writer;
}

json_t *server_catalog(struct server *srv)
{
    return srv->catalog;
}

struct budget *server_budget(struct server *srv)
{
    return srv->budget;
}

const struct server_config *server_config(struct server *srv)
{
    return &srv->cfg;
}

/* The keeper's driver of a setting; DEFAULT never reaches here (create and restore fill
 * it in), but would be ns, what every sandbox was before there was a choice. */
static uint32_t proto_driver_of(enum model_driver d)
{
    switch (d) {
    case MODEL_DRIVER_GVISOR:
        return PROTO_DRIVER_GVISOR;
    case MODEL_DRIVER_NS:
    case MODEL_DRIVER_DEFAULT:
        break;
    }
    return PROTO_DRIVER_NS;
}

static void fill_proto_sandbox(const struct sbx *sb, struct proto_sandbox *p)
{
    memset(p, 0, sizeof *p);
    memcpy(p->id, sb->id, sizeof p->id);
    p->slot = sb->slot;
    p->memory_mib = sb->settings.memory_mib;
    p->disk_mib = sb->settings.disk_mib;
    p->cpu_milli = (uint32_t)lround(sb->settings.cpus * 1000);
    p->pids_max = DEFAULT_PIDS_MAX;
    p->driver = proto_driver_of(sb->settings.isolation);
}

struct sbx *server_sandbox_first(struct server *srv)
{
    return srv->sandboxes;
}

struct sbx *server_sandbox_next(const struct sbx *sb)
{
    return sb->next;
}

const char *sbx_id(const struct sbx *sb)
{
    return sb->id;
}

const char *sbx_account(const struct sbx *sb)
{
    return sb->account;
}

const struct model_sandbox *sbx_settings(const struct sbx *sb)
{
    return &sb->settings;
}

enum sbx_state sbx_state(const struct sbx *sb)
{
    return sb->state;
}

void sbx_note_user_program(struct sbx *sb)
{
    sb->user_programs = true;
}

bool sbx_user_programs(const struct sbx *sb)
{
    return sb->user_programs;
}

int64_t sbx_created_ms(const struct sbx *sb)
{
    return sb->created_ms;
}

uint64_t sbx_paused_ms(const struct sbx *sb)
{
    return sb->paused_ms;
}

void sbx_set_paused_ms(struct sbx *sb, uint64_t ms)
{
    sb->paused_ms = ms;
}

uint32_t server_hibernate_below_mib(const struct server *srv)
{
    return srv->cfg.hibernate_below_mib;
}

uint32_t server_hibernate_after_s(const struct server *srv)
{
    return srv->cfg.hibernate_after_s;
}

bool server_templates(const struct server *srv)
{
    return srv->cfg.templates;
}

uint64_t sbx_last_active_ms(const struct sbx *sb)
{
    return sb->last_active_ms;
}

struct budget *sbx_budget(const struct sbx *sb)
{
    return sb->budget;
}

void *sbx_slot(const struct sbx *sb, enum sbx_slot slot)
{
    return slot < SBX_SLOT_COUNT ? sb->slots[slot] : NULL;
}

void sbx_set_slot(struct sbx *sb, enum sbx_slot slot, void *data)
{
    if (slot < SBX_SLOT_COUNT) sb->slots[slot] = data;
}

static bool owned_by(const struct sbx *s, const char *account)
{
    return !account || strcmp(s->account, account) == 0;
}

/* Only the account's own sandboxes are looked at, ids first: another account's id must
 * read as no id at all, or a name equal to it would tell the caller that it exists. */
struct sbx *server_sandbox_find(struct server *srv, const char *account, const char *key)
{
    for (struct sbx *s = srv->sandboxes; s; s = s->next)
        if (owned_by(s, account) && strcmp(s->id, key) == 0) return s;
    for (struct sbx *s = srv->sandboxes; account && s; s = s->next)
        if (owned_by(s, account) && s->settings.name[0] && strcmp(s->settings.name, key) == 0)
            return s;
    return NULL;
}

static uint32_t free_slot(struct server *srv)
{
    for (uint32_t slot = 0;; slot++) {
        bool used = false;
        for (struct sbx *s = srv->sandboxes; s && !used; s = s->next)
            used = s->slot == slot;
        if (!used) return slot;
    }
}

/* Stops watching its init (the watch fd is ours to close). */
static void unwatch_death(struct sbx *sb)
{
    if (!sb->death) return;
    /* The event first: libevent applies its deletion at the next turn of the
     * loop, by fd number, which a close would already have handed to a new
     * socket (a proxied connection, whose registration it would then drop). */
    int fd = event_get_fd(sb->death);
    event_free(sb->death);
    sb->death = NULL;
    close(fd);
}

void sbx_waiters_append(struct sbx_waiter **list, struct sbx_waiter *w)
{
    while (*list)
        list = &(*list)->next;
    *list = w;
}

int sbx_waiters_add(struct sbx_waiter **list, server_created_fn *done, void *arg, err_t *err)
{
    if (!done) return 0;
    struct sbx_waiter *w = malloc(sizeof *w);
    if (!w) return err_set(err, -ENOMEM, "out of memory");
    *w = (struct sbx_waiter){.done = done, .arg = arg};
    sbx_waiters_append(list, w);
    return 0;
}

void sbx_waiters_tell(struct server *srv, struct sbx *sb, struct sbx_waiter *w, const err_t *err)
{
    while (w) {
        struct sbx_waiter *next = w->next;
        w->done(srv, sb, err, w->arg);
        free(w);
        w = next;
    }
}

void sbx_waiters_free(struct sbx_waiter *w)
{
    while (w) {
        struct sbx_waiter *next = w->next;
        free(w);
        w = next;
    }
}

static void sbx_free(struct sbx *sb)
{
    if (!sb) return;
    struct server *srv = sb->owner;
    if (srv && srv->hooks.halted) srv->hooks.halted(sb);
    if (srv && srv->hooks.freed) srv->hooks.freed(sb);
    if (sb->egress) egress_sandbox_remove(sb->egress);
    unwatch_death(sb);
    if (sb->revive) event_free(sb->revive);
    server_sandbox_change_free(sb);
    free(sb->series);
    sbx_waiters_free(sb->waiters); /* at shutdown: their requests end with the loop */
    server_state_waits_end(sb, false);
    model_sandbox_clear(&sb->settings);
    budget_unref(sb->budget);
    free(sb);
}

static void link_sandbox(struct server *srv, struct sbx *sb)
{
    sb->owner = srv;
    sb->next = srv->sandboxes;
    srv->sandboxes = sb;
    srv->count++;
}

static void unlink_sandbox(struct server *srv, struct sbx *sb)
{
    server_state_waits_end(sb, true);
    for (struct sbx **p = &srv->sandboxes; *p; p = &(*p)->next) {
        if (*p != sb) continue;
        *p = sb->next;
        srv->count--;
        return;
    }
}

const char *sbx_label(const struct sbx *sb, char *out, size_t size)
{
    if (sb->settings.name[0])
        snprintf(out, size, "%s (name %s, account %s)", sb->id, sb->settings.name, sb->account);
    else
        snprintf(out, size, "%s (account %s)", sb->id, sb->account);
    return out;
}

/* Every write of a sandbox's row goes through the writer's queue, so that they
 * reach the disk in the order they were made; a failed one is logged there. */
static void save_status(struct server *srv, struct sbx *sb)
{
    store_writer_sandbox_status(srv->writer, sb->id, sbx_status_name(sb->state), NULL, NULL);
}

/* The settings as the store keeps them (malloc'd text, or NULL). */
static char *settings_text(const struct model_sandbox *settings)
{
    json_t *v = model_sandbox_json(settings);
    char *text = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(v);
    return text;
}

/* Queues its row; saved runs on the loop once it is on disk. */
static int save_new(struct server *srv, struct sbx *sb, store_done_fn *saved, err_t *err)
{
    char *text = settings_text(&sb->settings);
    if (!text) return err_set(err, -ENOMEM, "out of memory");
    struct store_sandbox row = {.slot = sb->slot, .created_ms = sb->created_ms, .spec_json = text};
    memcpy(row.id, sb->id, sizeof row.id);
    snprintf(row.status, sizeof row.status, "%s", sbx_status_name(sb->state));
    row.name = sb->settings.name[0] ? sb->settings.name : NULL;
    memcpy(row.account, sb->account, sizeof row.account);
    store_writer_sandbox_insert(srv->writer, &row, saved, sb);
    free(text);
    return 0;
}

static void detach_egress(struct sbx *sb);

/* Its init died (killed from the host, say): nothing runs in it any more, and
 * it is stopped as a stop would (its workspace kept; start builds it again). One
 * being built is stopped once it is (on_running). */
static void on_death(evutil_socket_t fd, short what, void *arg)
{
    struct sbx *sb = arg;
    event_free(sb->death);
    sb->death = NULL;
    close(fd);
    /* A checkpoint ends gVisor's sentry: hibernation, not a death; so does a template's
     * image taking its place, unless that fails with nothing changed. */
    if (sb->state == SBX_HIBERNATING || sb->state == SBX_HIBERNATED) return;
    if (sb->sentry_swapping) {
        sb->died_swapping = true;
        return;
    }
    if (sb->state == SBX_CREATING || sb->state == SBX_STARTING)
        sb->init_died = true;
    else
        server_sandbox_died(sb->owner, sb);
}

void server_sandbox_watch(struct server *srv, struct sbx *sb, int fd)
{
    unwatch_death(sb); /* a restore's new sentry replaces the one a checkpoint ended */
    sb->owner = srv;
    sb->death = event_new(srv->base, fd, EV_READ, on_death, sb);
    if (sb->death)
        event_add(sb->death, NULL);
    else
        close(fd);
}

static void restore_name(uint32_t slot, uint64_t seq, const char *name, void *arg)
{
    egress_sandbox_restore_name(arg, slot, seq, name);
}

/* Gives the running sandbox its egress: sockets made inside its network
 * namespace by the keeper, served by the proxy and stub with its policy. */
/* What its egress applies: its settings, as the gateway's hook changes them. */
static int sandbox_policy(struct server *srv, struct sbx *sb, const struct model_network *network,
                          struct policy *out, err_t *err)
{
    if (srv->hooks.policy) return srv->hooks.policy(sb, network, out, err);
    return model_network_policy(network, out, err);
}

/* Its egress on the listeners the keeper made in its network namespace (taken);
 * restored, with the names it had (a new sandbox has none to read). */
static int attach_egress_with(struct server *srv, struct sbx *sb, int fds[3], bool restored,
                              err_t *err)
{
    struct policy pol;
    int r = sandbox_policy(srv, sb, &sb->settings.network, &pol, err);
    if (r < 0) {
        for (int i = 0; i < 3; i++)
            close(fds[i]);
        return r;
    }
    r = egress_sandbox_add(srv->egress, sb->id, fds, &pol, &sb->egress, err);
    if (r == 0 && restored) r = store_names_each(srv->store, sb->id, restore_name, sb->egress, err);
    return r;
}

static int attach_egress(struct server *srv, struct sbx *sb, err_t *err)
{
    struct proto_ref ref = {0};
    struct proto_result res;
    memcpy(ref.id, sb->id, sizeof ref.id);
    int fds[3];
    int r = server_keeper_call(srv, PROTO_NET_SOCKETS, &ref, sizeof ref, &res, fds, 3, err);
    return r < 0 ? r : attach_egress_with(srv, sb, fds, true, err);
}

static void detach_egress(struct sbx *sb)
{
    if (sb->egress) egress_sandbox_remove(sb->egress);
    sb->egress = NULL;
}

void server_sandbox_apply_policy(struct server *srv, struct sbx *sb)
{
    struct policy pol;
    err_t err = {0};
    if (!sb->egress) return;
    if (sandbox_policy(srv, sb, &sb->settings.network, &pol, &err) < 0)
        return log_warn("sandbox %s: egress policy not updated: %s", sb->id, err.msg);
    egress_sandbox_set_policy(sb->egress, &pol);
}

void server_sandbox_detach(struct server *srv, struct sbx *sb)
{
    if (srv->hooks.halted) srv->hooks.halted(sb);
    detach_egress(sb);
    unwatch_death(sb);
}

/* A change of settings on its way to the disk; sb may be removed meanwhile. */
struct settings_change {
    struct server *srv;
    struct sbx *sb;
    char id[PROTO_ID_LEN];
    struct model_sandbox settings;
    server_settings_set_fn *done;
    void *arg;
};

static void on_settings_saved(int r, const err_t *err, void *arg)
{
    struct settings_change *c = arg;
    struct server *srv = c->srv;
    struct sbx *sb = r == -ECANCELED ? NULL : server_sandbox_find(srv, NULL, c->id);
    if (r == 0 && sb == c->sb) { /* still there: in force from now on */
        model_sandbox_clear(&sb->settings);
        sb->settings = c->settings;
        c->settings = (struct model_sandbox){0};
        server_sandbox_apply_policy(srv, sb);
        sbx_changed(srv, sb, false);
        c->done(srv, &sb->settings, NULL, c->arg);
    } else if (r == 0) { /* removed since: what was saved is the answer */
        c->done(srv, &c->settings, NULL, c->arg);
    } else if (r != -ECANCELED) {
        c->done(srv, NULL, err, c->arg);
    }
    model_sandbox_clear(&c->settings);
    free(c);
}

/* Another sandbox of its account holds the name. */
static bool name_taken(struct server *srv, const struct sbx *sb, const char *name)
{
    if (!name[0] || strcmp(name, sb->settings.name) == 0) return false;
    for (struct sbx *s = srv->sandboxes; s; s = s->next)
        if (s != sb && strcmp(s->account, sb->account) == 0 && strcmp(s->settings.name, name) == 0)
            return true;
    return false;
}

int server_sandbox_update(struct server *srv, struct sbx *sb, const struct model_sandbox *changed,
                          server_settings_set_fn *done, void *arg, err_t *err)
{
    /* Its settings are its create's until it runs (the same FIFO would keep a
     * change in order, but the create's answer would not show it). */
    if (sb->state == SBX_CREATING || sb->state == SBX_STARTING)
        return err_set(err, -EBUSY, "sandbox %s is being %s; try again in a moment", sb->id,
                       sb->state == SBX_CREATING ? "created" : "started");
    if (name_taken(srv, sb, changed->name))
        return err_set(err, -EEXIST, "another sandbox of this account is named %s", changed->name);
    struct settings_change *c = calloc(1, sizeof *c);
    if (!c) return err_set(err, -ENOMEM, "out of memory");
    *c = (struct settings_change){.srv = srv, .sb = sb, .done = done, .arg = arg};
    memcpy(c->id, sb->id, sizeof c->id);
    int r = model_sandbox_copy(&c->settings, changed, err);
    char *text = r == 0 ? settings_text(&c->settings) : NULL;
    if (r == 0 && !text) r = err_set(err, -ENOMEM, "out of memory");
    if (r < 0) {
        model_sandbox_clear(&c->settings);
        free(c);
        return r;
    }
    /* After every write of its row queued before (the FIFO). */
    store_writer_sandbox_spec(srv->writer, sb->id, text, on_settings_saved, c);
    free(text);
    return 0;
}

/* ---- create: the keeper's part is answered later, on the loop ---- */

/* Who is answered once a write is on disk, and with what: the waiters of a
 * create that failed (err), or the caller of a removal (err when failed). */
struct answer {
    struct server *srv;
    struct sbx *sb;             /* a removal: until the keeper's answer */
    struct sbx_waiter *waiters; /* a create that failed */
    server_deleted_fn *deleted; /* a removal */
    void *arg;
    bool failed;
    err_t err;
};

static void answer_now(struct answer *a)
{
    if (a->deleted)
        a->deleted(a->srv, a->failed ? &a->err : NULL, a->arg);
    else
        sbx_waiters_tell(a->srv, NULL, a->waiters, &a->err);
    free(a);
}

static void on_answer_written(int r, const err_t *err, void *arg)
{
    struct answer *a = arg;
    if (r == -ECANCELED) { /* stopping: the requests end with the loop */
        sbx_waiters_free(a->waiters);
        free(a);
        return;
    }
    if (r < 0) log_warn("%s", err->msg);
    answer_now(a);
}

/* Its row (and what hangs off it) out of the store, then a answered. */
static void forget_row(struct server *srv, const char *id, struct answer *a)
{
    if (a)
        store_writer_sandbox_forget(srv->writer, id, on_answer_written, a);
    else
        store_writer_sandbox_forget(srv->writer, id, NULL, NULL);
}

/* A sandbox that never came to be: out of the registry, and of the store when
 * its row was written; its waiters hear err once the row is gone. */
static void creation_failed_as(struct server *srv, struct sbx *sb, bool saved, const err_t *err)
{
    char who[300];
    log_warn("sandbox %s was not created: %s", sbx_label(sb, who, sizeof who), err->msg);
    struct answer *a = calloc(1, sizeof *a);
    struct sbx_waiter *w = sb->waiters;
    sb->waiters = NULL;
    char id[PROTO_ID_LEN];
    memcpy(id, sb->id, sizeof id);
    sbx_changed(srv, sb, true);
    unlink_sandbox(srv, sb);
    sbx_free(sb);
    if (!a) {
        if (saved) forget_row(srv, id, NULL);
        return sbx_waiters_tell(srv, NULL, w, err);
    }
    *a = (struct answer){.srv = srv, .waiters = w, .err = *err};
    if (saved)
        forget_row(srv, id, a);
    else
        answer_now(a);
}

/* A start that failed: it stays stopped, its workspace kept. */
static void start_failed(struct server *srv, struct sbx *sb, const err_t *err)
{
    char who[300];
    log_warn("sandbox %s was not started: %s", sbx_label(sb, who, sizeof who), err->msg);
    sbx_move(srv, sb, SBX_BUILD_FAILED, NULL);
    struct sbx_waiter *w = sb->waiters;
    sb->waiters = NULL;
    sbx_waiters_tell(srv, sb, w, err);
}

/* A build (a create, or a start) that failed. */
static void build_failed(struct server *srv, struct sbx *sb, const err_t *err)
{
    if (sb->state == SBX_STARTING) return start_failed(srv, sb, err);
    creation_failed_as(srv, sb, true, err);
}

/* A sandbox built without its network, until the keeper has destroyed it again. */
struct unbuilt {
    struct sbx *sb;
    err_t err; /* what its waiters are told */
};

/* Whatever the keeper answers, the build failed with u's reason. sb is still
 * there: it is creating or starting, which no removal takes (at a stop, the
 * registry frees it and this is not called). */
static void on_unbuilt(struct server *srv, const struct proto_result *res, int *fds, unsigned nfds,
                       void *arg)
{
    struct unbuilt *u = arg;
    build_failed(srv, u->sb, &u->err);
    free(u);
}

static void on_destroy_ignored(struct server *srv, const struct proto_result *res, int *fds,
                               unsigned nfds, void *arg)
{
}

/* Built, but it cannot have its network: the keeper destroys it again (a
 * started one is stopped again: its workspace stays), and its waiters hear why
 * once that is answered (the slot stays taken until then). */
static void without_network(struct server *srv, struct sbx *sb, err_t *err)
{
    struct proto_ref ref = {0};
    memcpy(ref.id, sb->id, sizeof ref.id);
    uint16_t undo = sb->state == SBX_STARTING ? PROTO_STOP : PROTO_DESTROY;
    unwatch_death(sb);
    err_wrap(err, "cannot give the sandbox its network");
    struct unbuilt *u = malloc(sizeof *u);
    if (u) {
        *u = (struct unbuilt){.sb = sb, .err = *err};
        if (server_keeper_send(srv, undo, &ref, sizeof ref, 0, on_unbuilt, u, &(err_t){0}) == 0)
            return;
        free(u); /* the keeper is gone: the loop stops */
    } else {
        /* No memory to wait with: it still goes, unwaited (the keeper is serial). */
        server_keeper_send(srv, undo, &ref, sizeof ref, 0, on_destroy_ignored, NULL, &(err_t){0});
    }
    build_failed(srv, sb, err);
}

/* Its status is on disk: it runs, and its waiters get their answer. A sandbox
 * being built cannot be removed, so sb is still there (at a stop, it went with
 * the registry). One whose init died meanwhile is stopped now. */
static void on_running(int r, const err_t *err, void *arg)
{
    struct sbx *sb = arg;
    if (r == -ECANCELED) return;
    struct server *srv = sb->owner;
    if (r < 0) log_warn("status of sandbox %s not saved: %s", sb->id, err->msg);
    char who[300];
    if (sb->state == SBX_CREATING)
        log_info("sandbox %s created in %lld ms: %u MiB, %g CPUs, %u MiB disk, internet %s",
                 sbx_label(sb, who, sizeof who), (long long)(now_unix_ms() - sb->created_ms),
                 (unsigned)sb->settings.memory_mib, sb->settings.cpus,
                 (unsigned)sb->settings.disk_mib, sb->settings.network.internet ? "on" : "off");
    else
        log_info("sandbox %s started", sbx_label(sb, who, sizeof who));
    sbx_move(srv, sb, SBX_BUILT, NULL);
    struct sbx_waiter *w = sb->waiters;
    sb->waiters = NULL;
    sbx_waiters_tell(srv, sb, w, NULL);
    if (sb->init_died) {
        sb->init_died = false;
        server_sandbox_died(srv, sb);
    }
}

static void on_net_sockets(struct server *srv, const struct proto_result *res, int *fds,
                           unsigned nfds, void *arg)
{
    struct sbx *sb = arg;
    err_t err = {0};
    if (server_keeper_fds(res, fds, nfds, 3, "listeners", &err) < 0)
        return without_network(srv, sb, &err);
    bool started = sb->state == SBX_STARTING;
    if (attach_egress_with(srv, sb, fds, started, &err) < 0) return without_network(srv, sb, &err);
    sb->last_active_ms = now_ms();
    usage_started(srv, sb);
    if (started && srv->hooks.restored && srv->hooks.restored(srv, sb, &err) < 0)
        log_warn("sandbox %s: MCP servers not started again: %s", sb->id, err.msg);
    /* Running once that is on disk (its row's insert is already). */
    store_writer_sandbox_status(srv->writer, sb->id, sbx_status_name(SBX_RUNNING), on_running, sb);
}

/* The keeper built it; next, the listeners of its egress (answered on the loop too). */
static void on_created(struct server *srv, const struct proto_result *res, int *fds, unsigned nfds,
                       void *arg)
{
    struct sbx *sb = arg;
    err_t err = {0};
    if (res->status < 0) {
        err_set(&err, res->status, "cannot %s the sandbox: %s",
                sb->state == SBX_STARTING ? "start" : "create", res->msg);
        return build_failed(srv, sb, &err);
    }
    if (nfds > 0) server_sandbox_watch(srv, sb, fds[0]);
    struct proto_ref ref = {0};
    memcpy(ref.id, sb->id, sizeof ref.id);
    if (server_keeper_send(srv, PROTO_NET_SOCKETS, &ref, sizeof ref, 3, on_net_sockets, sb, &err) <
        0)
        without_network(srv, sb, &err);
}

/* Its row is on disk (a crash from now on leaves a row the restart marks failed,
 * and the keeper's sweep removes what it built for a row never written); next,
 * the keeper builds it. */
static void on_saved(int r, const err_t *err, void *arg)
{
    struct sbx *sb = arg;
    if (r == -ECANCELED) return; /* stopping: sb went with the registry */
    struct server *srv = sb->owner;
    err_t e = {0};
    if (r < 0) {
        e = *err;
        err_wrap(&e, "cannot save the sandbox");
        return creation_failed_as(srv, sb, false, &e);
    }
    struct proto_sandbox p;
    fill_proto_sandbox(sb, &p);
    if (server_keeper_send(srv, PROTO_CREATE, &p, sizeof p, 1, on_created, sb, &e) < 0) {
        err_wrap(&e, "cannot create the sandbox");
        creation_failed_as(srv, sb, true, &e);
    }
}

void server_sandbox_when_created(struct server *srv, struct sbx *sb, server_created_fn *done,
                                 void *arg)
{
    err_t err = {0};
    if (sb->state != SBX_CREATING) return done(srv, sb, NULL, arg);
    if (sbx_waiters_add(&sb->waiters, done, arg, &err) < 0) done(srv, NULL, &err, arg);
}

/* A create's driver: the daemon's --driver when it named none; -EOPNOTSUPP and why when
 * this daemon lacks it (runsc not installed, say), before anything is built. */
static int create_isolation(struct server *srv, struct model_sandbox *settings, err_t *err)
{
    if (settings->isolation == MODEL_DRIVER_DEFAULT)
        settings->isolation =
            srv->cfg.default_driver == PROTO_DRIVER_GVISOR ? MODEL_DRIVER_GVISOR : MODEL_DRIVER_NS;
    const char *missing = srv->cfg.driver_missing[proto_driver_of(settings->isolation)];
    if (missing[0])
        return err_set(err, -EOPNOTSUPP, "isolation %s is not available on this daemon: %s",
                       model_driver_name(settings->isolation), missing);
    return 0;
}

int server_sandbox_create(struct server *srv, const char *account, struct model_sandbox *settings,
                          server_created_fn *done, void *arg, err_t *err)
{
    struct model_sandbox taken = *settings;
    *settings = (struct model_sandbox){0};
    if (create_isolation(srv, &taken, err) < 0) {
        model_sandbox_clear(&taken);
        log_warn("refused a sandbox of account %s: %s", account, err->msg);
        return err->code;
    }
    if (srv->count >= srv->cfg.max_sandboxes) {
        model_sandbox_clear(&taken);
        err_set(err, -EAGAIN,
                "this daemon already runs %zu sandboxes, its limit; remove some first", srv->count);
        log_warn("refused a sandbox of account %s: %s", account, err->msg);
        return err->code;
    }
    struct sbx *sb = calloc(1, sizeof *sb);
    if (!sb) {
        model_sandbox_clear(&taken);
        return err_set(err, -ENOMEM, "out of memory");
    }
    sb->settings = taken;
    sb->budget = budget_new(srv->cfg.sandbox_held_bytes, srv->budget);
    str_copy(sb->account, sizeof sb->account, account);
    random_hex(sb->id, 6);
    sb->slot = free_slot(srv);
    sb->created_ms = now_unix_ms();
    sb->state = SBX_CREATING;
    link_sandbox(srv, sb);
    int r = save_new(srv, sb, on_saved, err);
    if (r < 0) {
        unlink_sandbox(srv, sb);
        sbx_free(sb);
        return r;
    }
    sbx_changed(srv, sb, false);
    server_sandbox_when_created(srv, sb, done, arg);
    return 0;
}

/* A stopped (or failed) sandbox built again on its workspace: as a create from
 * the keeper's build on (on_created), with ADOPT, which builds on a kept
 * workspace. A failed one may still be held by the keeper (a removal that
 * failed): a STOP goes first, its answer unread. */
int server_sandbox_start(struct server *srv, struct sbx *sb, const char *reason,
                         server_sandbox_done_fn *done, void *arg, err_t *err)
{
    struct sbx_request rq = {SBX_START, SBX_STARTING, SBX_RUNNING, "started", &sb->waiters};
    int r = sbx_request(srv, sb, &rq, done, arg, err);
    if (r != 0) return r < 0 ? r : 0;
    struct proto_ref ref = {0};
    memcpy(ref.id, sb->id, sizeof ref.id);
    if (sb->state == SBX_FAILED &&
        server_keeper_send(srv, PROTO_STOP, &ref, sizeof ref, 0, on_destroy_ignored, NULL, err) < 0)
        return err_wrap(err, "cannot start sandbox %s", sb->id);
    struct proto_sandbox p;
    fill_proto_sandbox(sb, &p);
    r = sbx_waiters_add(&sb->waiters, done, arg, err);
    if (r == 0) r = server_keeper_send(srv, PROTO_ADOPT, &p, sizeof p, 1, on_created, sb, err);
    if (r < 0) {
        sbx_waiters_free(sb->waiters);
        sb->waiters = NULL;
        return err_wrap(err, "cannot start sandbox %s", sb->id);
    }
    usage_checkpoint(srv, sb); /* the time it was stopped, counted as stopped */
    sb->init_died = false;
    log_info("starting sandbox %s (%s)", sb->id, reason);
    sbx_move(srv, sb, SBX_START, NULL);
    return 0;
}

/* ---- delete: likewise ---- */

/* Out of the registry now, out of the store next (its events after those still
 * queued); the caller is answered once its row is gone from the disk. */
static void forget(struct server *srv, struct sbx *sb, struct answer *rm)
{
    char who[300];
    log_info("sandbox %s removed", sbx_label(sb, who, sizeof who));
    char id[PROTO_ID_LEN];
    memcpy(id, sb->id, sizeof id);
    events_flush(srv);
    store_writer_events_delete(srv->writer, id);
    vault_forget_sandbox(srv->vault, id);
    sbx_changed(srv, sb, true);
    unlink_sandbox(srv, sb);
    sbx_free(sb);
    forget_row(srv, id, rm);
}

/* A removal the keeper could not finish (something left in the sandbox's
 * directory, say) keeps the sandbox, as failed: its processes are gone, and
 * both processes keep their entry, so that the rm can be retried. */
static void removal_failed(struct server *srv, struct sbx *sb, struct answer *rm,
                           const struct proto_result *res)
{
    rm->failed = true;
    err_set(&rm->err, res->status,
            "cannot remove sandbox %s: %s; its processes are stopped: fix that and remove it again",
            sb->id, res->msg);
    log_warn("%s", rm->err.msg);
    sbx_move(srv, sb, SBX_REMOVE_FAILED, NULL); /* the answer waits for it to be on disk */
    store_writer_sandbox_status(srv->writer, sb->id, sbx_status_name(sb->state), on_answer_written,
                                rm);
}

/* The files of one the keeper did not hold (stopped, or never built) are gone. */
static void on_forgotten(struct server *srv, const struct proto_result *res, int *fds,
                         unsigned nfds, void *arg)
{
    struct answer *rm = arg;
    struct sbx *sb = rm->sb;
    rm->sb = NULL;
    if (res->status < 0) return removal_failed(srv, sb, rm, res);
    forget(srv, sb, rm);
}

/* -ENOENT: the keeper does not hold it (stopped, or a create that failed):
 * what it left on disk goes next. */
static void on_destroyed(struct server *srv, const struct proto_result *res, int *fds,
                         unsigned nfds, void *arg)
{
    struct answer *rm = arg;
    struct sbx *sb = rm->sb;
    struct proto_ref ref = {0};
    memcpy(ref.id, sb->id, sizeof ref.id);
    err_t err = {0};
    if (res->status == -ENOENT &&
        server_keeper_send(srv, PROTO_FORGET, &ref, sizeof ref, 0, on_forgotten, rm, &err) == 0)
        return;
    rm->sb = NULL;
    if (res->status < 0 && res->status != -ENOENT) return removal_failed(srv, sb, rm, res);
    forget(srv, sb, rm);
}

int server_sandbox_delete(struct server *srv, struct sbx *sb, server_deleted_fn *done, void *arg,
                          err_t *err)
{
    if (server_sandbox_changing(sb)) return server_sandbox_delete_after_change(sb, done, arg, err);
    if (lifecycle_next(sb->state, SBX_REMOVE) < 0)
        return err_set(err, -EBUSY, "sandbox %s is %s; try again in a moment", sb->id,
                       sbx_state_said(sb->state));
    struct answer *rm = malloc(sizeof *rm);
    if (!rm) return err_set(err, -ENOMEM, "out of memory");
    *rm = (struct answer){.srv = srv, .sb = sb, .deleted = done, .arg = arg};
    struct proto_ref ref = {0};
    memcpy(ref.id, sb->id, sizeof ref.id);
    usage_removed(srv, sb); /* its last stats go before the destroy */
    int r = server_keeper_send(srv, PROTO_DESTROY, &ref, sizeof ref, 0, on_destroyed, rm, err);
    if (r < 0) {
        free(rm);
        return r;
    }
    server_sandbox_detach(srv, sb);
    sbx_move(srv, sb, SBX_REMOVE, NULL);
    return 0;
}

/* Packs a proto_exec and its strings; returns the length or negative. */
static int pack_exec(char *buf, size_t size, const struct sbx *sb,
                     const struct server_run_spec *spec, err_t *err)
{
    const char *const *argv = spec->argv, *const *env = spec->envp, *cwd = spec->cwd;
    struct proto_exec h = {.timeout_ms = spec->timeout_ms, .serve = spec->serve};
    memcpy(h.id, sb->id, sizeof h.id);
    if (str_copy(h.cwd, sizeof h.cwd, cwd) < 0) return err_set(err, -EINVAL, "cwd is too long");
    size_t off = sizeof h;
    for (int pass = 0; pass < 2; pass++) {
        const char *const *list = pass == 0 ? argv : env;
        for (; list && *list; list++) {
            size_t n = strlen(*list) + 1;
            if (off + n > size)
                return err_set(err, -E2BIG, "argv and env are larger than %u bytes together",
                               PROTO_MAX_MSG - 1024);
            memcpy(buf + off, *list, n);
            off += n;
            if (pass == 0)
                h.argc++;
            else
                h.envc++;
            /* The keeper takes no more, and the API says so before it asks. */
            if (h.argc > PROTO_MAX_STRINGS || h.envc > PROTO_MAX_STRINGS)
                return err_set(err, -E2BIG,
                               "too many %s: at most %u, counting the "
                               "sandbox's own environment variables",
                               pass == 0 ? "arguments" : "environment variables",
                               PROTO_MAX_STRINGS);
        }
    }
    memcpy(buf, &h, sizeof h);
    return (int)off;
}

int server_exec_send(struct server *srv, struct sbx *sb, const struct server_run_spec *spec,
                     server_keeper_done_fn *done, void *arg, err_t *err)
{
    size_t size = PROTO_MAX_MSG - 1024;
    char *buf = malloc(size);
    if (!buf) return err_set(err, -ENOMEM, "out of memory");
    int len = pack_exec(buf, size, sb, spec, err);
    int r =
        len < 0 ? len : server_keeper_send(srv, PROTO_EXEC, buf, (size_t)len, 4, done, arg, err);
    free(buf);
    return r;
}

/* Who gets the pipes of a program the keeper starts. */
struct exec_start {
    server_exec_fn *done;
    void *arg;
};

static void on_exec_started(struct server *srv, const struct proto_result *res, int *fds,
                            unsigned nfds, void *arg)
{
    struct exec_start *x = arg;
    err_t err = {0};
    if (server_keeper_fds(res, fds, nfds, 4, "pipes", &err) < 0) {
        x->done(srv, NULL, &err, x->arg);
    } else {
        x->done(srv, fds, NULL, x->arg);
    }
    free(x);
}

int server_exec(struct server *srv, struct sbx *sb, const struct server_run_spec *spec,
                server_exec_fn *done, void *arg, err_t *err)
{
    struct exec_start *x = malloc(sizeof *x);
    if (!x) return err_set(err, -ENOMEM, "out of memory");
    *x = (struct exec_start){.done = done, .arg = arg};
    int r = server_exec_send(srv, sb, spec, on_exec_started, x, err);
    if (r < 0) free(x);
    return r;
}

/* ---- templates (docs/templates.md) ---- */

struct template_call {
    char id[PROTO_ID_LEN];
    server_template_fn *done;
    void *arg;
};

static int template_send(struct server *srv, struct sbx *sb, const char *key, const char *name,
                         bool save, server_keeper_done_fn *on_answer, server_template_fn *done,
                         void *arg, err_t *err)
{
    struct proto_template t = {.save = save};
    memcpy(t.id, sb->id, sizeof t.id);
    if (str_copy(t.key, sizeof t.key, key) < 0 || str_copy(t.server, sizeof t.server, name) < 0)
        return err_set(err, -EINVAL, "bad template key or server name");
    struct template_call *c = malloc(sizeof *c);
    if (!c) return err_set(err, -ENOMEM, "out of memory");
    *c = (struct template_call){.done = done, .arg = arg};
    memcpy(c->id, sb->id, sizeof c->id);
    int r = server_keeper_send(srv, PROTO_TEMPLATE, &t, sizeof t, save ? 0 : 5, on_answer, c, err);
    if (r < 0) free(c);
    return r;
}

static void on_template_saved(struct server *srv, const struct proto_result *res, int *fds,
                              unsigned nfds, void *arg)
{
    struct template_call *c = arg;
    err_t err = {0};
    for (unsigned i = 0; i < nfds; i++)
        close(fds[i]);
    if (res->status < 0) err_set(&err, res->status, "%s", res->msg);
    c->done(srv, NULL, res->values[0], res->status < 0 ? &err : NULL, c->arg);
    free(c);
}

int server_template_save(struct server *srv, struct sbx *sb, const char *key, const char *name,
                         server_template_fn *done, void *arg, err_t *err)
{
    return template_send(srv, sb, key, name, true, on_template_saved, done, arg, err);
}

/* The keeper's answer: the program's pipes and the new sentry to watch; or the sandbox
 * started again as it was (its new sentry only); or nothing changed. */
static void on_template_restored(struct server *srv, const struct proto_result *res, int *fds,
                                 unsigned nfds, void *arg)
{
    struct template_call *c = arg;
    struct sbx *sb = server_sandbox_find(srv, NULL, c->id);
    bool restored = res->status == 0 && res->values[0] == 1 && nfds == 5;
    err_t err = {0};
    if (!restored)
        err_set(&err, res->status < 0 ? res->status : -EAGAIN, "%s",
                res->msg[0] ? res->msg : "the keeper passed no pipes");
    if (sb) sb->sentry_swapping = false;
    if (sb && res->status == 0 && nfds > 0)
        server_sandbox_watch(srv, sb, fds[nfds - 1]);
    else if (nfds > 0)
        close(fds[nfds - 1]);
    if (!restored)
        for (unsigned i = 0; i + 1 < nfds; i++)
            close(fds[i]);
    if (sb && res->status < 0 && sb->died_swapping) server_sandbox_died(srv, sb);
    if (sb) sb->died_swapping = false;
    c->done(srv, restored ? fds : NULL, 0, restored ? NULL : &err, c->arg);
    free(c);
}

int server_template_restore(struct server *srv, struct sbx *sb, const char *key, const char *name,
                            server_template_fn *done, void *arg, err_t *err)
{
    int r = template_send(srv, sb, key, name, false, on_template_restored, done, arg, err);
    if (r == 0) sb->sentry_swapping = true;
    return r;
}

struct file_rename {
    server_renamed_fn *done;
    void *arg;
};

static void on_file_renamed(struct server *srv, const struct proto_result *res, int *fds,
                            unsigned nfds, void *arg)
{
    struct file_rename *o = arg;
    err_t err = {0};
    for (unsigned i = 0; i < nfds; i++)
        close(fds[i]);
    if (res->status < 0) err_set(&err, res->status, "%s", res->msg);
    o->done(srv, res->status < 0 ? &err : NULL, o->arg);
    free(o);
}

int server_rename_file(struct server *srv, struct sbx *sb, const char *from, const char *to,
                       bool keep_mode, server_renamed_fn *done, void *arg, err_t *err)
{
    struct proto_rename f = {.keep_mode = keep_mode};
    memcpy(f.id, sb->id, sizeof f.id);
    if (str_copy(f.from, sizeof f.from, from) < 0 || (to && str_copy(f.to, sizeof f.to, to) < 0))
        return err_set(err, -ENAMETOOLONG, "path too long");
    struct file_rename *o = malloc(sizeof *o);
    if (!o) return err_set(err, -ENOMEM, "out of memory");
    *o = (struct file_rename){.done = done, .arg = arg};
    int r = server_keeper_send(srv, PROTO_RENAME_FILE, &f, sizeof f, 0, on_file_renamed, o, err);
    if (r < 0) free(o);
    return r;
}

/* Who gets a file the keeper opens. */
struct file_open {
    server_file_fn *done;
    void *arg;
};

static void on_file_opened(struct server *srv, const struct proto_result *res, int *fds,
                           unsigned nfds, void *arg)
{
    struct file_open *o = arg;
    err_t err = {0};
    if (server_keeper_fds(res, fds, nfds, 1, "file", &err) < 0) {
        o->done(srv, -1, &err, o->arg);
    } else {
        o->done(srv, fds[0], NULL, o->arg);
    }
    free(o);
}

int server_open_file(struct server *srv, struct sbx *sb, const char *path, int write, unsigned mode,
                     server_file_fn *done, void *arg, err_t *err)
{
    struct proto_file f = {.write = (uint32_t)write, .mode = mode};
    memcpy(f.id, sb->id, sizeof f.id);
    if (str_copy(f.path, sizeof f.path, path) < 0)
        return err_set(err, -ENAMETOOLONG, "path too long");
    struct file_open *o = malloc(sizeof *o);
    if (!o) return err_set(err, -ENOMEM, "out of memory");
    *o = (struct file_open){.done = done, .arg = arg};
    int r = server_keeper_send(srv, PROTO_OPEN_FILE, &f, sizeof f, 1, on_file_opened, o, err);
    if (r < 0) free(o);
    return r;
}

/* Its settings from the store; the defaults (and why) when they cannot be read. */
static int load_settings(const char *text, struct model_sandbox *out, err_t *err)
{
    json_error_t jerr;
    json_t *v = json_loads(text ? text : "{}", 0, &jerr);
    int r = v ? model_sandbox_parse(v, out, err) : err_set(err, -EINVAL, "not JSON: %s", jerr.text);
    json_decref(v);
    if (r < 0) {
        err_wrap(err, "its stored settings cannot be read");
        json_t *empty = json_object();
        model_sandbox_parse(empty, out, NULL);
        json_decref(empty);
    }
    /* A row saved before isolation could be chosen has none: it was built with ns,
     * whatever --driver says now. */
    if (out->isolation == MODEL_DRIVER_DEFAULT) out->isolation = MODEL_DRIVER_NS;
    return r;
}

/* A hibernated one whose processes did not outlive a host restart: stopped, and started
 * (cold: its image's memory is lost, its workspace is not) by the next request that needs
 * it, not now, so that a host of hibernated sandboxes does not boot them all at once. */
static int gone_while_hibernated(struct server *srv, struct sbx *sb)
{
    sb->state = SBX_STOPPED;
    sb->start_at_admit = true;
    str_copy(sb->halt_reason, sizeof sb->halt_reason, HALT_HOST_RESTARTED);
    usage_restore(srv, sb);
    json_t *fields = json_pack("{s:s}", "reason", HALT_HOST_RESTARTED);
    server_event(srv, sb->id, "sandbox.stopped", fields); /* borrows them */
    json_decref(fields);
    log_warn("sandbox %s was hibernated and its processes are gone (the host restarted?); "
             "its next request starts it",
             sb->id);
    save_status(srv, sb);
    return 0;
}

/* At start: every sandbox of the store is re-adopted (still running) or rebuilt
 * on its kept workspace; then the keeper removes whatever nobody knows. */
static int restore_one(const struct store_sandbox *row, void *arg)
{
    struct server *srv = arg;
    struct sbx *sb = calloc(1, sizeof *sb);
    if (!sb) return -ENOMEM;
    memcpy(sb->id, row->id, sizeof sb->id);
    sb->budget = budget_new(srv->cfg.sandbox_held_bytes, srv->budget);
    str_copy(sb->account, sizeof sb->account, row->account);
    sb->slot = row->slot;
    sb->created_ms = row->created_ms;
    err_t err = {0};
    bool readable = load_settings(row->spec_json, &sb->settings, &err) == 0;
    link_sandbox(srv, sb);
    struct proto_sandbox p;
    struct proto_result res;
    fill_proto_sandbox(sb, &p);
    int watch = -1;
    enum sbx_state saved = sbx_status_parse(row->status);
    /* The state a restart finds it in: no move, it is new to this run. */
    if (readable && saved == SBX_STOPPED) {
        sb->state = SBX_STOPPED;
        usage_restore(srv, sb);
        log_info("sandbox %s is stopped", sb->id);
        return 0;
    }
    if (saved == SBX_HIBERNATED) p.flags = PROTO_ADOPT_ONLY; /* not all booted at once */
    int adopted = readable && saved != SBX_CREATING
                      ? server_keeper_call(srv, PROTO_ADOPT, &p, sizeof p, &res, &watch, 1, &err)
                      : -EINVAL;
    if (adopted == -ENOENT && saved == SBX_HIBERNATED) return gone_while_hibernated(srv, sb);
    bool ok = adopted == 0;
    if (ok && watch >= 0) server_sandbox_watch(srv, sb, watch);
    ok = ok && attach_egress(srv, sb, &err) == 0;
    /* Adopted, a paused sandbox is still frozen and a hibernated one still an image (gvisor)
     * or frozen with its memory in swap (ns): its MCP servers start when it wakes, so that
     * a restart wakes none; rebuilt, it runs. */
    bool adopted_frozen = ok && res.values[0] == 1;
    bool paused = adopted_frozen && saved == SBX_PAUSED;
    bool hibernated = (ok && res.values[0] == 3) || (adopted_frozen && saved == SBX_HIBERNATED);
    if (ok && !hibernated && srv->hooks.restored && srv->hooks.restored(srv, sb, &err) < 0)
        log_warn("sandbox %s: MCP servers not restored: %s", sb->id, err.msg);
    sb->servers_at_wake = hibernated;
    sb->user_programs = true; /* what ran before the restart is not known */
    sb->state = hibernated ? SBX_HIBERNATED : paused ? SBX_PAUSED : ok ? SBX_RUNNING : SBX_FAILED;
    if (paused) sb->paused_ms = now_ms(); /* its hibernateAfterSeconds count from the restart */
    sb->last_active_ms = now_ms();
    if (sb->state == SBX_RUNNING && sb->settings.lease_s) /* the lease is not stored */
        sb->lease_ends_ms = now_unix_ms() + (int64_t)sb->settings.lease_s * 1000;
    usage_restore(srv, sb);
    if (ok)
        log_info("sandbox %s %s", sb->id,
                 hibernated           ? "re-adopted, hibernated"
                 : res.values[0] == 1 ? "re-adopted"
                                      : "restarted");
    else
        log_warn("sandbox %s could not be restored: %s", sb->id, err.msg);
    save_status(srv, sb);
    return 0;
}

static int restore(struct server *srv, err_t *err)
{
    int r = store_sandbox_each(srv->store, restore_one, srv, err);
    if (r < 0) return r;
    size_t size = sizeof(struct proto_sweep) + srv->count * PROTO_ID_LEN;
    char *buf = calloc(1, size);
    if (!buf) return err_set(err, -ENOMEM, "out of memory");
    struct proto_sweep h = {.count = (uint32_t)srv->count};
    size_t off = sizeof h;
    for (struct sbx *s = srv->sandboxes; s; s = s->next) {
        size_t n = strlen(s->id) + 1;
        memcpy(buf + off, s->id, n);
        off += n;
    }
    memcpy(buf, &h, sizeof h);
    struct proto_result res;
    r = server_keeper_call(srv, PROTO_SWEEP, buf, off, &res, NULL, 0, err);
    free(buf);
    return r;
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    struct server *srv = arg;
    log_info("stopping on signal %d; sandboxes keep running and are re-adopted at next start",
             (int)sig);
    event_base_loopbreak(srv->base);
}

/* Nothing ever arrives unasked: readable means the keeper died or broke the protocol. */
static int hello(struct server *srv, err_t *err)
{
    struct proto_hello h = {.version = PROTO_VERSION};
    struct proto_result res;
    return server_keeper_call(srv, PROTO_HELLO, &h, sizeof h, &res, NULL, 0, err);
}

static void on_reload(evutil_socket_t sig, short what, void *arg)
{
    server_tls_reload(arg);
}

static void on_http_head(struct httpd_req *req, void *arg)
{
    struct server *srv = arg;
    srv->hooks.http_head(req, srv);
}

static void on_http_fail(struct httpd_req *req, int status, const char *code, const char *message,
                         void *arg)
{
    struct server *srv = arg;
    srv->hooks.http_fail(req, status, code, message, srv);
}

/* One HTTP server for both sockets: the TCP listener's connections speak TLS
 * when it is configured, the unix socket's never. */
static int make_http(struct server *srv, int tcp_fd, int unix_fd, err_t *err)
{
    struct httpd_handlers hd = {.head = on_http_head, .fail = on_http_fail, .arg = srv};
    srv->http = httpd_new(srv->base, &srv->cfg.http, &hd);
    if (!srv->http) return err_set(err, -ENOMEM, "out of memory");
    if (tcp_fd >= 0 &&
        httpd_listen(srv->http, tcp_fd, false, srv->tls ? server_tls_context : NULL, srv, err) < 0)
        return err->code;
    if (unix_fd >= 0 && httpd_listen(srv->http, unix_fd, true, NULL, NULL, err) < 0)
        return err->code;
    return 0;
}

static int serve(struct server *srv, int tcp_fd, int unix_fd, err_t *err)
{
    int r = make_http(srv, tcp_fd, unix_fd, err);
    if (r < 0) return r;
    struct event *sigs[] = {evsignal_new(srv->base, SIGTERM, on_signal, srv),
                            evsignal_new(srv->base, SIGINT, on_signal, srv),
                            evsignal_new(srv->base, SIGHUP, on_reload, srv)};
    for (size_t i = 0; i < ARRAY_LEN(sigs); i++)
        event_add(sigs[i], NULL);
    server_accounts_resume(srv); /* removals a stop cut short: sent to the keeper from here */
    log_info("serving the API on %s%s and its socket", srv->cfg.listen,
             srv->tls ? " over TLS" : "");
    srv->serving = true;
    event_base_dispatch(srv->base);
    srv->serving = false;
    for (size_t i = 0; i < ARRAY_LEN(sigs); i++)
        event_free(sigs[i]);
    return 0;
}

/* After the runs: their requests are answered on connections that must still be there. */
static void unserve(struct server *srv)
{
    httpd_free(srv->http); /* its listeners, its connections */
    srv->http = NULL;
    server_tls_stop(srv);
}

static void on_egress_event(void *arg, const char *sandbox_id, const char *kind, json_t *fields)
{
    struct server *srv = arg;
    struct sbx *sb = server_sandbox_find(srv, NULL, sandbox_id);
    if (sb && srv->hooks.egress_event) srv->hooks.egress_event(sb, kind, fields);
    server_event(srv, sandbox_id, kind, fields);
}

/* Written by the writer before the DNS answer leaves (the stub waits for saved),
 * so no address outlives its meaning. */
static void on_egress_name(void *arg, const char *sandbox_id, uint32_t slot, uint64_t seq,
                           const char *name, egress_saved_fn *saved, void *saved_arg)
{
    struct server *srv = arg;
    store_writer_names_put(srv->writer, sandbox_id, slot, seq, name, saved, saved_arg);
}

/* A leaf for the egress's interception: the signer, not the keeper, holds the
 * CA key (docs/architecture.md). Asked without waiting: the loop goes on
 * serving while the signer works, and a signer that hangs costs the
 * connections to a new host its timeout, not every sandbox's traffic. */
struct leaf_wait {
    egress_signed_fn *done;
    void *arg;
    char name[MITM_NAME_MAX];
};

static void on_leaf(int r, const uint8_t *der, size_t der_len, const err_t *err, void *arg)
{
    struct leaf_wait *w = arg;
    if (r < 0 && r != -ECANCELED) log_warn("no certificate for %s: %s", w->name, err->msg);
    w->done(r, der, der_len, w->arg);
    free(w);
}

static int sign_leaf(void *arg, const char *name, const uint8_t *spki, size_t spki_len,
                     egress_signed_fn *done, void *done_arg)
{
    struct server *srv = arg;
    err_t err = {0};
    struct leaf_wait *w = calloc(1, sizeof *w);
    int r = w ? 0 : err_set(&err, -ENOMEM, "out of memory");
    if (w) {
        *w = (struct leaf_wait){.done = done, .arg = done_arg};
        snprintf(w->name, sizeof w->name, "%s", name);
        r = mitm_signer_client_sign(srv->signer, name, spki, spki_len, on_leaf, w, &err);
    }
    if (r < 0) {
        log_warn("no certificate for %s: %s", name, err.msg);
        free(w);
    }
    return r;
}

static const struct egress_secrets vault_egress = {
    .any = vault_any,
    .wants = vault_wants,
    .value = vault_value,
    .release = secrets_release,
    .headers = vault_headers,
    .release_headers = vault_headers_release,
    .misdirected = vault_misdirected,
    .reflected = vault_reflected,
};

static void on_vault_event(void *arg, const char *sandbox_id, const char *kind, json_t *fields)
{
    server_event(arg, sandbox_id, kind, fields);
}

/* A secret's only.labels are matched against the sandbox's labels as they are now. */
static json_t *vault_labels(void *arg, const char *account, const char *sandbox_id)
{
    struct sbx *sb = server_sandbox_find(arg, account, sandbox_id);
    return sb ? model_map_json(&sbx_settings(sb)->labels) : NULL;
}

static int open_vault(struct server *srv, err_t *err)
{
    struct vault_hooks hooks = {.arg = srv, .event = on_vault_event, .labels = vault_labels};
    int r = vault_open(srv->store, srv->writer, srv->cfg.secrets_key, &hooks, &srv->vault, err);
    explicit_bzero(srv->cfg.secrets_key, sizeof srv->cfg.secrets_key);
    return r;
}

struct vault *server_vault(struct server *srv)
{
    return srv->vault;
}

static int start_egress(struct server *srv, err_t *err)
{
    int r = mitm_signer_client_new(srv->base, srv->cfg.signer_sock, MITM_SIGNER_TIMEOUT_MS,
                                   &srv->signer, err);
    if (r < 0) return r;
    struct egress_config ec = {.pins = srv->cfg.pins,
                               .n_pins = srv->cfg.n_pins,
                               .on_name = on_egress_name,
                               .sign = sign_leaf,
                               .secrets = &vault_egress,
                               .secrets_arg = srv->vault,
                               .upstream_ca = srv->cfg.upstream_ca,
                               .nameserver = srv->cfg.nameserver,
                               .inspect_allowed_tls = srv->cfg.inspect_allowed_tls,
                               .rates = srv->cfg.egress_rates,
                               .on_event = on_egress_event,
                               .event_arg = srv};
    return egress_new(srv->base, &ec, &srv->egress, err);
}

/* Request bodies with secret values pass through jansson: every block it frees
 * is wiped first, so no value outlives its request in freed memory. */
static void wiping_free(void *p)
{
    if (!p) return;
    explicit_bzero(p, malloc_usable_size(p));
    free(p);
}

/* libevent's own warnings go through the (rate-limited) log. */
static void on_libevent_log(int severity, const char *msg)
{
    if (severity >= EVENT_LOG_WARN)
        log_msg(severity >= EVENT_LOG_ERR ? LOG_ERROR : LOG_WARN, "libevent: %s", msg);
}

int server_main(const struct server_config *cfg, const struct server_hooks *hooks, int keeper_sock,
                int tcp_fd, int unix_fd)
{
    event_set_log_callback(on_libevent_log);
    json_set_alloc_funcs(malloc, wiping_free);
    struct server srv = {.cfg = *cfg, .hooks = *hooks, .keeper = keeper_sock};
    err_t err = {0};
    signal(SIGPIPE, SIG_IGN);
    srv.base = event_base_new();
    srv.budget = budget_new(cfg->held_bytes, NULL);
    int r = srv.base && srv.budget ? store_open(cfg->db_path, &srv.store, &err) : -ENOMEM;
    if (r == 0) r = events_start(&srv, &err);
    if (r == 0) r = catalog_load(&srv.catalog, &err);
    if (r == 0) r = metrics_start(&srv);
    if (r == 0) r = open_vault(&srv, &err);
    if (r == 0) r = accounts_open(srv.store, srv.writer, &srv.accounts, &err);
    if (r == 0) r = start_egress(&srv, &err);
    /* Before the first request: restore already sends some (its MCP servers' starts). */
    if (r == 0 && keeper_client_start(&srv) < 0) r = err_set(&err, -ENOMEM, "out of memory");
    if (r == 0) r = hello(&srv, &err);
    if (r == 0) r = server_tls_start(&srv, &err);
    if (r == 0) r = restore(&srv, &err);
    /* From here every write goes through the writer: one left on the loop fails. */
    if (r == 0) r = store_set_read_only(srv.store, &err);
    if (r == 0) r = server_tick_start(&srv);
    if (r == 0) r = serve(&srv, tcp_fd, unix_fd, &err);
    /* On the way out: a second stop signal (the keeper sends one when its socket
     * closes) would only cut the cleanup short; the keeper kills after 10 s. */
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    server_tick_stop(&srv);
    keeper_client_stop(&srv);
    if (r < 0) log_error("server: %s", err.msg[0] ? err.msg : strerror(-r));
    while (srv.sandboxes) {
        struct sbx *sb = srv.sandboxes;
        srv.sandboxes = sb->next;
        sbx_free(sb);
    }
    server_runs_stop(&srv);
    unserve(&srv);
    egress_free(srv.egress);
    mitm_signer_client_free(srv.signer); /* after the egress: its answers only free */
    json_decref(srv.catalog);
    metrics_stop(&srv);
    vault_close(srv.vault);
    accounts_close(srv.accounts);
    events_stop(&srv);
    store_close(srv.store);
    if (srv.base) event_base_free(srv.base);
    budget_unref(srv.budget);
    close(keeper_sock);
    return r < 0 ? 1 : 0;
}
