/* Usage metering: each sandbox's counters (meter.h) move forward at checkpoints, at
 * every pause, resume and removal and at least once a minute, and each checkpoint is
 * written to the store, so a daemon restart loses nothing: the time it was down is
 * counted in the state the sandbox was in (it kept running, or stayed frozen). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server_impl.h"

#define CHECKPOINT_MS 60000

static json_t *row_json(const struct sbx *sb, const char *state, bool deleted)
{
    const struct meter_usage *u = &sb->usage;
    const char *name = sb->settings.name;
    return json_pack(
        "{s:s,s:o,s:b,s:s,s:f,s:f,s:f,s:f,s:f,s:I,s:I,s:I,s:I}", "account", sb->account, "name",
        name[0] ? json_string(name) : json_null(), "deleted", deleted, "state", state, "cpuSeconds",
        u->cpu_seconds, "runningHours", u->running_hours, "memoryGiBHours", u->memory_gib_hours,
        "pausedHours", u->paused_hours, "pausedGBHours", u->paused_gb_hours, "markMs",
        (json_int_t)sb->mark_ms, "markCpuNs", (json_int_t)sb->mark_cpu_ns, "storedBytes",
        (json_int_t)sb->stored_bytes, "memoryMiB", (json_int_t)sb->settings.memory_mib);
}

static void save_as(struct server *srv, const struct sbx *sb, enum sbx_status state, bool deleted)
{
    json_t *row = row_json(sb, sbx_status_name(state), deleted);
    char *text = json_dumps(row, JSON_COMPACT);
    json_decref(row);
    if (text)
        store_writer_usage_put(srv->writer, sb->id, text);
    else
        log_warn("usage of sandbox %s not saved: out of memory", sb->id);
    free(text);
}

static void save(struct server *srv, const struct sbx *sb, bool deleted)
{
    save_as(srv, sb, sb->status, deleted);
}

/* At startup only (usage_restore): the loop is not serving yet. */
static int stats_now(struct server *srv, struct sbx *sb, uint64_t *cpu_ns, uint64_t *disk)
{
    struct proto_ref ref = {0};
    struct proto_result res;
    err_t err = {0};
    memcpy(ref.id, sb->id, sizeof ref.id);
    int r = server_keeper_call(srv, PROTO_STATS, &ref, sizeof ref, &res, NULL, 0, &err);
    if (r == 0) {
        *cpu_ns = res.values[0];
        *disk = res.values[4];
    }
    return r;
}

static bool is_live(enum sbx_status state)
{
    return state == SBX_RUNNING || state == SBX_PAUSED;
}

/* Counts the time since the last checkpoint as `state` (live: with the keeper's
 * cpu and disk figures), then moves the marks. */
static void count(struct sbx *sb, enum sbx_status state, bool live, uint64_t cpu, uint64_t disk)
{
    int64_t now = now_unix_ms();
    if (!live) {
        cpu = sb->mark_cpu_ns;
        disk = sb->stored_bytes;
    }
    double hours = sb->mark_ms && now > sb->mark_ms ? (double)(now - sb->mark_ms) / 3.6e6 : 0;
    double gib = (double)sb->settings.memory_mib / 1024.0;
    if (live && state == SBX_RUNNING) {
        /* A rebuilt sandbox has a fresh cgroup whose counter starts again at zero. */
        uint64_t used = cpu >= sb->mark_cpu_ns ? cpu - sb->mark_cpu_ns : cpu;
        meter_add_running(&sb->usage, hours, (double)used / 1e9, gib);
    } else if (live) {
        meter_add_paused(&sb->usage, hours, (double)sb->stored_bytes / 1e9);
    }
    sb->mark_ms = now;
    sb->mark_cpu_ns = cpu;
    sb->stored_bytes = disk;
}

static void checkpoint_as(struct server *srv, struct sbx *sb, enum sbx_status state)
{
    uint64_t cpu = 0, disk = 0;
    bool live = is_live(state) && stats_now(srv, sb, &cpu, &disk) == 0;
    count(sb, state, live, cpu, disk);
    save(srv, sb, false);
}

/* The keeper's figures, counted in the state sb is in when they come: the
 * keeper is serial, so a pause or resume sent after them has not landed yet. */
static void on_stats(struct server *srv, const struct proto_result *res, int *fds, unsigned nfds,
                     void *arg)
{
    struct sbx *sb = arg;
    sb->stats_pending = false;
    bool live = res->status == 0 && is_live(sb->status);
    count(sb, sb->status, live, res->values[0], res->values[4]);
    save(srv, sb, false);
}

/* Asks the keeper for the figures without waiting; sb outlives the answer, as
 * it goes only after its destroy is answered, which comes later. One at a time:
 * the answer counts up to when it comes. */
void usage_checkpoint(struct server *srv, struct sbx *sb)
{
    if (sb->stats_pending) return;
    struct proto_ref ref = {0};
    memcpy(ref.id, sb->id, sizeof ref.id);
    err_t err = {0};
    if (is_live(sb->status) &&
        server_keeper_send(srv, PROTO_STATS, &ref, sizeof ref, 0, on_stats, sb, &err) == 0) {
        sb->stats_pending = true;
        return;
    }
    count(sb, sb->status, false, 0, 0);
    save(srv, sb, false);
}

/* Its cgroup is new and its counter starts at zero, as does its workspace's
 * share: no need to ask the keeper (which the loop would wait for). */
void usage_started(struct server *srv, struct sbx *sb)
{
    sb->mark_ms = now_unix_ms();
    sb->mark_cpu_ns = 0;
    sb->stored_bytes = 0;
    save_as(srv, sb, SBX_RUNNING, false);
}

/* A sandbox being removed has its last checkpoint under way (usage_removed). */
void usage_tick(struct server *srv)
{
    int64_t now = now_unix_ms();
    for (struct sbx *sb = srv->sandboxes; sb; sb = sb->next)
        if (!sb->removing && now - sb->mark_ms >= CHECKPOINT_MS) usage_checkpoint(srv, sb);
}

static void on_last_stats(struct server *srv, const struct proto_result *res, int *fds,
                          unsigned nfds, void *arg)
{
    struct sbx *sb = arg;
    bool live = res->status == 0 && is_live(sb->status);
    count(sb, sb->status, live, res->values[0], res->values[4]);
    save(srv, sb, true);
}

/* The last checkpoint: its stats are asked for without waiting, before the
 * destroy that follows, so the keeper (serial) answers them first, and sb is
 * still there when they come back (it goes after the destroy's answer). */
void usage_removed(struct server *srv, struct sbx *sb)
{
    struct proto_ref ref = {0};
    memcpy(ref.id, sb->id, sizeof ref.id);
    err_t err = {0};
    if (is_live(sb->status) &&
        server_keeper_send(srv, PROTO_STATS, &ref, sizeof ref, 0, on_last_stats, sb, &err) == 0)
        return;
    count(sb, sb->status, false, 0, 0);
    save(srv, sb, true);
}

/* After a restart: the saved counters, then the downtime in the state saved with them. */
void usage_restore(struct server *srv, struct sbx *sb)
{
    char *text = NULL;
    err_t err = {0};
    if (store_usage_get(srv->store, sb->id, &text, &err) < 0) {
        sb->mark_ms = now_unix_ms();
        return;
    }
    json_t *row = json_loads(text, 0, NULL);
    free(text);
    sb->usage = (struct meter_usage){
        .cpu_seconds = json_number_value(json_object_get(row, "cpuSeconds")),
        .running_hours = json_number_value(json_object_get(row, "runningHours")),
        .memory_gib_hours = json_number_value(json_object_get(row, "memoryGiBHours")),
        .paused_hours = json_number_value(json_object_get(row, "pausedHours")),
        .paused_gb_hours = json_number_value(json_object_get(row, "pausedGBHours")),
    };
    sb->mark_ms = json_integer_value(json_object_get(row, "markMs"));
    sb->mark_cpu_ns = (uint64_t)json_integer_value(json_object_get(row, "markCpuNs"));
    sb->stored_bytes = (uint64_t)json_integer_value(json_object_get(row, "storedBytes"));
    enum sbx_status state = sbx_status_parse(json_string_value(json_object_get(row, "state")));
    json_decref(row);
    checkpoint_as(srv, sb, state);
}

/* ---- GET /v1/usage ---- */

static double round_to(double v, double unit)
{
    return round(v / unit) * unit;
}

static json_t *cost_json(const struct meter_cost *c)
{
    return json_pack("{s:f,s:f,s:f,s:f}", "cpu", round_to(c->cpu, 1e-6), "memory",
                     round_to(c->memory, 1e-6), "paused", round_to(c->paused, 1e-6), "total",
                     round_to(c->total, 1e-6));
}

struct listing {
    struct server *srv;
    const char *account; /* NULL: every account's */
    json_t *list;
    struct meter_usage total;
    struct account_sum *sums; /* per account, in the order first seen */
    size_t n_sums;
};

struct account_sum {
    char account[ACCOUNT_NAME_MAX];
    struct meter_usage usage;
};

static void add_account(struct listing *l, const char *account, const struct meter_usage *u)
{
    for (size_t i = 0; i < l->n_sums; i++)
        if (strcmp(l->sums[i].account, account) == 0) return meter_usage_add(&l->sums[i].usage, u);
    struct account_sum *grown = realloc(l->sums, (l->n_sums + 1) * sizeof *grown);
    if (!grown) return; /* the per-account totals miss it; the fleet's does not */
    l->sums = grown;
    l->sums[l->n_sums] = (struct account_sum){.usage = *u};
    str_copy(l->sums[l->n_sums].account, ACCOUNT_NAME_MAX, account);
    l->n_sums++;
}

static void add_row(const char *sandbox, const char *text, void *arg)
{
    struct listing *l = arg;
    json_t *row = json_loads(text, 0, NULL);
    /* Rows saved before accounts existed are the default account's. */
    const char *account = json_string_value(json_object_get(row, "account")) ?: ACCOUNT_DEFAULT;
    if (!row || (l->account && strcmp(account, l->account) != 0)) {
        json_decref(row);
        return;
    }
    struct meter_usage u = {
        .cpu_seconds = json_number_value(json_object_get(row, "cpuSeconds")),
        .running_hours = json_number_value(json_object_get(row, "runningHours")),
        .memory_gib_hours = json_number_value(json_object_get(row, "memoryGiBHours")),
        .paused_hours = json_number_value(json_object_get(row, "pausedHours")),
        .paused_gb_hours = json_number_value(json_object_get(row, "pausedGBHours")),
    };
    struct meter_cost c;
    meter_cost(&u, &l->srv->cfg.rates, &c);
    meter_usage_add(&l->total, &u);
    add_account(l, account, &u);
    bool deleted = json_is_true(json_object_get(row, "deleted"));
    json_array_append_new(l->list, json_pack(
        "{s:s,s:s,s:O,s:s,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:o}", "sandbox", sandbox, "account",
        account, "name",
        json_object_get(row, "name") ?: json_null(), "status", deleted ? "removed" :
        json_string_value(json_object_get(row, "state")) ?: "", "cpuSeconds",
        round_to(u.cpu_seconds, 1e-3), "vcpuHours", round_to(c.vcpu_hours, 1e-6), "runningHours",
        round_to(u.running_hours, 1e-6), "memoryGiBHours", round_to(u.memory_gib_hours, 1e-6),
        "pausedHours", round_to(u.paused_hours, 1e-6), "pausedGBHours",
        round_to(u.paused_gb_hours, 1e-9), "storedGB",
        (double)json_integer_value(json_object_get(row, "storedBytes")) / 1e9, "cost",
        cost_json(&c)));
    json_decref(row);
}

static json_t *total_json(const struct meter_usage *u, const struct meter_rates *rates)
{
    struct meter_cost c;
    meter_cost(u, rates, &c);
    return json_pack("{s:f,s:f,s:f,s:f,s:f,s:o}", "cpuSeconds", round_to(u->cpu_seconds, 1e-3),
                     "vcpuHours", round_to(c.vcpu_hours, 1e-6), "memoryGiBHours",
                     round_to(u->memory_gib_hours, 1e-6), "pausedHours",
                     round_to(u->paused_hours, 1e-6), "pausedGBHours",
                     round_to(u->paused_gb_hours, 1e-9), "cost", cost_json(&c));
}

static json_t *usage_json(struct server *srv, const char *account, err_t *err)
{
    struct listing l = {.srv = srv, .account = account, .list = json_array()};
    if (store_usage_each(srv->store, add_row, &l, err) < 0) {
        json_decref(l.list);
        free(l.sums);
        return NULL;
    }
    const struct meter_rates *r = &srv->cfg.rates;
    json_t *accounts = json_array();
    for (size_t i = 0; i < l.n_sums; i++)
        json_array_append_new(accounts, json_pack("{s:s,s:o}", "account", l.sums[i].account,
                                                  "total", total_json(&l.sums[i].usage, r)));
    free(l.sums);
    return json_pack("{s:o,s:o,s:o,s:{s:f,s:f,s:f}}", "sandboxes", l.list, "accounts", accounts,
                     "total", total_json(&l.total, r), "rates", "vcpuHour", r->vcpu_hour, "gibHour",
                     r->gib_hour, "gbMonth", r->gb_month);
}

/* A GET /v1/usage on its way: checkpoints asked for, then their rows written,
 * then read back. */
struct usage_query {
    struct server *srv;
    char account[ACCOUNT_NAME_MAX]; /* "": every account's */
    server_usage_fn *done;
    void *arg;
};

static void on_rows_written(int r, const err_t *werr, void *arg)
{
    struct usage_query *q = arg;
    if (r == -ECANCELED) { /* stopping: its request ends with the loop */
        free(q);
        return;
    }
    err_t err = {0};
    json_t *u = usage_json(q->srv, q->account[0] ? q->account : NULL, &err);
    q->done(q->srv, u, &err, q->arg);
    json_decref(u);
    free(q);
}

/* Every checkpoint's stats are in and its row queued: now the rows on disk. */
static void on_checkpoints_counted(struct server *srv, const struct proto_result *res, int *fds,
                                   unsigned nfds, void *arg)
{
    store_writer_flush(srv->writer, on_rows_written, arg);
}

int server_usage(struct server *srv, const char *account, server_usage_fn *done, void *arg,
                 err_t *err)
{
    struct usage_query *q = calloc(1, sizeof *q);
    if (!q) return err_set(err, -ENOMEM, "out of memory");
    *q = (struct usage_query){.srv = srv, .done = done, .arg = arg};
    if (account) str_copy(q->account, sizeof q->account, account);
    for (struct sbx *sb = srv->sandboxes; sb; sb = sb->next)
        if (!sb->removing) usage_checkpoint(srv, sb);
    int r = server_keeper_after(srv, on_checkpoints_counted, q, err);
    if (r < 0) free(q);
    return r;
}
