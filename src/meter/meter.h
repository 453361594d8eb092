/* meter: what a sandbox used and what it costs (`GET /v1/usage`, `runtime usage`).
 * Pure arithmetic over counters the server keeps: no I/O, unit-tested.
 *
 * Billing model (issue 6): while running, vCPU-hours with a floor of a twentieth of a
 * vCPU and the configured memory in GiB-hours; while paused, only the bytes its
 * /workspace holds, per GB-month of 30 days. */
#ifndef RUNTIME_METER_H
#define RUNTIME_METER_H

#include <stdbool.h>
#include <stdint.h>

#include "../common/common.h"

#define METER_VCPU_FLOOR 0.05       /* vCPU billed at least, while running */
#define METER_HOURS_PER_MONTH 720.0 /* 30 days */

struct meter_rates {
    double vcpu_hour; /* $ per vCPU-hour, default 0.025 */
    double gib_hour;  /* $ per GiB-hour of memory, default 0.0075 */
    double gb_month;  /* $ per GB-month stored while paused, default 0.08 */
};
void meter_default_rates(struct meter_rates *r);

/* What one sandbox used, accumulated across runs and daemon restarts. */
struct meter_usage {
    double cpu_seconds; /* from the cgroup */
    double running_hours;
    double memory_gib_hours; /* configured memory x running hours */
    double paused_hours;
    double paused_gb_hours; /* /workspace GB x paused hours */
};

/* Adds an interval in one state. gib: configured memory; gb: stored bytes / 1e9. */
void meter_add_running(struct meter_usage *u, double hours, double cpu_seconds, double gib);
void meter_add_paused(struct meter_usage *u, double hours, double gb);
/* Adds u to sum (an account's total, the fleet's). */
void meter_usage_add(struct meter_usage *sum, const struct meter_usage *u);

struct meter_cost {
    double vcpu_hours;                 /* billed: max(used, floor x running hours) */
    double cpu, memory, paused, total; /* dollars */
};
void meter_cost(const struct meter_usage *u, const struct meter_rates *r, struct meter_cost *c);

/* A fleet estimate for one month of 30 days: count sandboxes of vcpu and gib each,
 * busy (running) busy_hours_per_day at avg_cpu vCPU, paused the rest of the month with
 * stored_gb on disk. */
struct meter_fleet {
    double count, vcpu, gib, busy_hours_per_day, avg_cpu, stored_gb;
};
/* 0, or -EINVAL naming the bad figure (negative, busy hours over 24, avg_cpu over vcpu). */
int meter_estimate(const struct meter_fleet *f, const struct meter_rates *r,
                   struct meter_cost *month, err_t *err);

/* What a sandbox used, minute by minute, for the dashboard's charts: the last
 * METER_SERIES_MINUTES minutes, in memory only (a restart starts them empty; the totals
 * above are the record). A point holds its minute's peaks, and the cost at its last
 * checkpoint. */
#define METER_SERIES_MINUTES 1440 /* a day */
struct meter_point {
    int32_t minute;   /* since the epoch; 0: empty */
    float vcpu;       /* CPU used over the interval the checkpoint closed */
    float memory_mib; /* in use at the checkpoint (0 when not running) */
    float stored_mib; /* /workspace (and image) while paused or stopped, else 0 */
    float cost;       /* dollars so far, all of its life */
};
struct meter_series {
    struct meter_point points[METER_SERIES_MINUTES];
};
/* Notes a checkpoint at unix_ms (with an earlier one of the same minute: the peaks). */
void meter_series_note(struct meter_series *s, int64_t unix_ms, const struct meter_point *p);
/* The point of that minute, or NULL when there is none. */
const struct meter_point *meter_series_at(const struct meter_series *s, int32_t minute);

/* Latency histograms for /metrics (Prometheus text format). */
#define METER_BUCKETS 12
extern const double meter_bounds[METER_BUCKETS]; /* seconds, 0.5 ms to 5 s */
struct meter_histogram {
    uint64_t counts[METER_BUCKETS + 1]; /* the last one is +Inf */
    double sum;
    uint64_t count;
};
void meter_observe(struct meter_histogram *h, double seconds);
/* Writes NAME_bucket{LABELS,le="..."} (cumulative), NAME_sum and NAME_count lines;
 * labels is "" or `k="v",...`. */
#include <stdio.h>
void meter_histogram_write(FILE *f, const char *name, const char *labels,
                           const struct meter_histogram *h);

#endif
