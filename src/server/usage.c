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

/* A usage row as the store keeps it. */
struct usage_row {
    struct meter_usage usage;
    int64_t mark_ms;
    uint64_t mark_cpu_ns, stored_bytes;
    enum sbx_state state;
    bool deleted;
    char account[ACCOUNT_NAME_MAX]; /* rows saved before accounts existed: the default's */
    json_t *name;                   /* a string or null (owned) */
};

static int number_field(json_t *row, const char *key, double *out, err_t *err)
{
    json_t *v = json_object_get(row, key);
    if (!json_is_number(v) || json_number_value(v) < 0 || !isfinite(json_number_value(v)))
        return err_set(err, -EINVAL, "%s is %s", key, v ? "not a number >= 0" : "missing");
    *out = json_number_value(v);
    return 0;
}

/* Reads a row into *out; -EINVAL, saying which field is wrong, when it cannot be read:
 * a row with a counter missing is not a row of zeros. */
static int usage_row_parse(const char *text, struct usage_row *out, err_t *err)
{
    json_error_t jerr;
    json_t *row = json_loads(text, 0, &jerr);
    if (!json_is_object(row)) {
        json_decref(row);
        return err_set(err, -EINVAL, "not a JSON object: %s", row ? "another type" : jerr.text);
    }
    *out = (struct usage_row){0};
    double mark_ms = 0, mark_cpu_ns = 0, stored = 0;
    int r = number_field(row, "cpuSeconds", &out->usage.cpu_seconds, err);
    if (r == 0) r = number_field(row, "runningHours", &out->usage.running_hours, err);
    if (r == 0) r = number_field(row, "memoryGiBHours", &out->usage.memory_gib_hours, err);
    if (r == 0) r = number_field(row, "pausedHours", &out->usage.paused_hours, err);
    if (r == 0) r = number_field(row, "pausedGBHours", &out->usage.paused_gb_hours, err);
    if (r == 0) r = number_field(row, "markMs", &mark_ms, err);
    if (r == 0) r = number_field(row, "markCpuNs", &mark_cpu_ns, err);
    if (r == 0) r = number_field(row, "storedBytes", &stored, err);
    const char *state = json_string_value(json_object_get(row, "state"));
    if (r == 0 && (!state || (sbx_status_parse(state) == SBX_FAILED && strcmp(state, "failed"))))
        r = err_set(err, -EINVAL, "state is not a sandbox status");
    if (r == 0) {
        out->mark_ms = (int64_t)mark_ms;
        out->mark_cpu_ns = (uint64_t)mark_cpu_ns;
        out->stored_bytes = (uint64_t)stored;
        out->state = sbx_status_parse(state);
        out->deleted = json_is_true(json_object_get(row, "deleted"));
        str_copy(out->account, sizeof out->account,
                 json_string_value(json_object_get(row, "account")) ?: ACCOUNT_DEFAULT);
        out->name = json_incref(json_object_get(row, "name") ?: json_null());
    }
    json_decref(row);
    return r;
}

static void save_as(struct server *srv, const struct sbx *sb, enum sbx_state state, bool deleted)
{
    if (sb->usage_unreadable) return; /* its row stays as it is, for the operator */
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
    save_as(srv, sb, sbx_state_shown(sb->state), deleted);
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

/* The keeper holds it: it has figures to ask for. A hibernated one's stored bytes are its
 * workspace's and its image's (storage is all it costs). */
static bool is_live(enum sbx_state shown)
{
    return shown == SBX_RUNNING || shown == SBX_PAUSED || shown == SBX_HIBERNATED;
}

/* The checkpoint as a point of its charts: hours and used, the interval it closed. */
static void note_point(struct sbx *sb, int64_t now, bool running, double hours, double used_s,
                       uint64_t memory)
{
    if (!sb->series && !(sb->series = calloc(1, sizeof *sb->series))) return;
    struct meter_cost cost;
    meter_cost(&sb->usage, &sb->owner->cfg.rates, &cost);
    struct meter_point p = {
        .vcpu = running && hours > 0 ? (float)(used_s / (hours * 3600)) : 0,
        .memory_mib = running ? (float)memory / 1048576.0f : 0,
        .stored_mib = running ? 0 : (float)sb->stored_bytes / 1048576.0f,
        .cost = (float)cost.total,
    };
    meter_series_note(sb->series, now, &p);
}

/* Counts the time since the last checkpoint as `state`, the status it showed
 * (live: with the keeper's cpu, memory and disk figures), then moves the marks. A
 * stopped sandbox's kept workspace is stored as a paused one's is. */
static void count(struct sbx *sb, enum sbx_state state, bool live, uint64_t cpu, uint64_t memory,
                  uint64_t disk)
{
    int64_t now = now_unix_ms();
    if (!live) {
        cpu = sb->mark_cpu_ns;
        disk = sb->stored_bytes;
    }
    double hours = sb->mark_ms && now > sb->mark_ms ? (double)(now - sb->mark_ms) / 3.6e6 : 0;
    double gib = (double)sb->settings.memory_mib / 1024.0;
    bool running = live && state == SBX_RUNNING;
    /* A rebuilt sandbox has a fresh cgroup whose counter starts again at zero. */
    uint64_t used = !running ? 0 : cpu >= sb->mark_cpu_ns ? cpu - sb->mark_cpu_ns : cpu;
    if (running)
        meter_add_running(&sb->usage, hours, (double)used / 1e9, gib);
    else if (live || state == SBX_STOPPED)
        meter_add_paused(&sb->usage, hours, (double)sb->stored_bytes / 1e9);
    sb->mark_ms = now;
    sb->mark_cpu_ns = cpu;
    sb->stored_bytes = disk;
    note_point(sb, now, running, hours, (double)used / 1e9, memory);
}

static void checkpoint_as(struct server *srv, struct sbx *sb, enum sbx_state state)
{
    uint64_t cpu = 0, disk = 0;
    bool live = is_live(state) && stats_now(srv, sb, &cpu, &disk) == 0;
    count(sb, state, live, cpu, 0, disk);
    save(srv, sb, false);
}

/* The keeper's figures, counted in the status sb showed when they were asked
 * for: the keeper is serial, so a pause, stop or resume asked for after them
 * has not happened yet when it measures. */
static void on_stats(struct server *srv, const struct proto_result *res, int *fds, unsigned nfds,
                     void *arg)
{
    struct sbx *sb = arg;
    sb->stats_pending = false;
    bool live = res->status == 0 && is_live(sb->stats_as);
    count(sb, sb->stats_as, live, res->values[0], res->values[1], res->values[4]);
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
    sb->stats_as = sbx_state_shown(sb->state);
    if (is_live(sb->stats_as) &&
        server_keeper_send(srv, PROTO_STATS, &ref, sizeof ref, 0, on_stats, sb, &err) == 0) {
        sb->stats_pending = true;
        return;
    }
    count(sb, sb->stats_as, false, 0, 0, 0);
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
        if (sb->state != SBX_REMOVING && now - sb->mark_ms >= CHECKPOINT_MS)
            usage_checkpoint(srv, sb);
}

static void on_last_stats(struct server *srv, const struct proto_result *res, int *fds,
                          unsigned nfds, void *arg)
{
    struct sbx *sb = arg;
    bool live = res->status == 0 && is_live(sb->stats_as);
    count(sb, sb->stats_as, live, res->values[0], res->values[1], res->values[4]);
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
    sb->stats_as = sbx_state_shown(sb->state);
    if (is_live(sb->stats_as) &&
        server_keeper_send(srv, PROTO_STATS, &ref, sizeof ref, 0, on_last_stats, sb, &err) == 0)
        return;
    count(sb, sb->stats_as, false, 0, 0, 0);
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
    struct usage_row row;
    int r = usage_row_parse(text, &row, &err);
    free(text);
    if (r < 0) {
        /* Not a bill of zero: the row is kept as it is and this sandbox's usage is no
         * longer counted, until an operator mends or deletes the row. */
        sb->usage_unreadable = true;
        server_row_unreadable(srv, "usage", sb->id, err.msg);
        return;
    }
    json_decref(row.name);
    sb->usage = row.usage;
    sb->mark_ms = row.mark_ms;
    sb->mark_cpu_ns = row.mark_cpu_ns;
    sb->stored_bytes = row.stored_bytes;
    checkpoint_as(srv, sb, row.state);
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
    size_t unreadable; /* rows that cannot be read (usage_row_parse) */
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
    struct usage_row row;
    err_t err = {0};
    if (usage_row_parse(text, &row, &err) < 0) { /* its account is not known: the admin's */
        if (!l->account) l->unreadable++;
        return;
    }
    const char *account = row.account;
    if (l->account && strcmp(account, l->account) != 0) {
        json_decref(row.name);
        return;
    }
    struct meter_usage u = row.usage;
    struct meter_cost c;
    meter_cost(&u, &l->srv->cfg.rates, &c);
    meter_usage_add(&l->total, &u);
    add_account(l, account, &u);
    json_array_append_new(
        l->list,
        json_pack("{s:s,s:s,s:o,s:s,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:o}", "sandbox", sandbox,
                  "account", account, "name", row.name, "status",
                  row.deleted ? "removed" : sbx_status_name(row.state), "cpuSeconds",
                  round_to(u.cpu_seconds, 1e-3), "vcpuHours", round_to(c.vcpu_hours, 1e-6),
                  "runningHours", round_to(u.running_hours, 1e-6), "memoryGiBHours",
                  round_to(u.memory_gib_hours, 1e-6), "pausedHours", round_to(u.paused_hours, 1e-6),
                  "pausedGBHours", round_to(u.paused_gb_hours, 1e-9), "storedGB",
                  (double)row.stored_bytes / 1e9, "cost", cost_json(&c)));
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
    json_t *out = json_pack("{s:o,s:o,s:o,s:{s:f,s:f,s:f}}", "sandboxes", l.list, "accounts",
                            accounts, "total", total_json(&l.total, r), "rates", "vcpuHour",
                            r->vcpu_hour, "gibHour", r->gib_hour, "gbMonth", r->gb_month);
    /* The totals leave those rows out: say so, rather than bill them as nothing. */
    if (l.unreadable)
        json_object_set_new(out, "unreadableRows", json_integer((json_int_t)l.unreadable));
    return out;
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
        if (sb->state != SBX_REMOVING) usage_checkpoint(srv, sb);
    int r = server_keeper_after(srv, on_checkpoints_counted, q, err);
    if (r < 0) free(q);
    return r;
}

/* ---- the charts' series ---- */

struct series_sum {
    double vcpu, memory_mib, stored_mib, cost;
    bool any;
};

/* Adds sb's point of that minute to sum; its cost carries from its last point before. */
static void add_point(const struct sbx *sb, int32_t minute, struct series_sum *sum, float *cost)
{
    const struct meter_point *p = sb->series ? meter_series_at(sb->series, minute) : NULL;
    if (p) {
        sum->vcpu += p->vcpu;
        sum->memory_mib += p->memory_mib;
        sum->stored_mib += p->stored_mib;
        *cost = p->cost;
        sum->any = true;
    }
    sum->cost += *cost;
}

json_t *server_usage_series(struct server *srv, const char *account, const struct sbx *only)
{
    size_t n = 0;
    for (struct sbx *sb = srv->sandboxes; sb; sb = sb->next)
        n += only ? sb == only : strcmp(sb->account, account) == 0;
    float *costs = calloc(n ? n : 1, sizeof *costs);
    json_t *points = json_array();
    int32_t now = (int32_t)(now_unix_ms() / 60000);
    for (int32_t m = now - METER_SERIES_MINUTES + 1; costs && m <= now; m++) {
        struct series_sum sum = {0};
        size_t i = 0;
        for (struct sbx *sb = srv->sandboxes; sb; sb = sb->next)
            if (only ? sb == only : strcmp(sb->account, account) == 0)
                add_point(sb, m, &sum, &costs[i++]);
        if (!sum.any) continue;
        char t[40];
        time_rfc3339(t, sizeof t, (int64_t)m * 60000);
        json_array_append_new(points, json_pack("{s:s,s:f,s:f,s:f,s:f}", "t", t, "vcpu", sum.vcpu,
                                                "memoryMiB", sum.memory_mib, "pausedStorageMiB",
                                                sum.stored_mib, "costUsd", sum.cost));
    }
    free(costs);
    return json_pack("{s:i,s:i,s:o}", "stepSeconds", 60, "minutes", METER_SERIES_MINUTES, "points",
                     points);
}
