#include "meter.h"

#include <errno.h>
#include <math.h>

void meter_default_rates(struct meter_rates *r)
{
    r->vcpu_hour = 0.025;
    r->gib_hour = 0.0075;
    r->gb_month = 0.08;
}

void meter_add_running(struct meter_usage *u, double hours, double cpu_seconds, double gib)
{
    u->running_hours += hours;
    u->cpu_seconds += cpu_seconds;
    u->memory_gib_hours += gib * hours;
}

void meter_add_paused(struct meter_usage *u, double hours, double gb)
{
    u->paused_hours += hours;
    u->paused_gb_hours += gb * hours;
}

void meter_usage_add(struct meter_usage *sum, const struct meter_usage *u)
{
    sum->cpu_seconds += u->cpu_seconds;
    sum->running_hours += u->running_hours;
    sum->memory_gib_hours += u->memory_gib_hours;
    sum->paused_hours += u->paused_hours;
    sum->paused_gb_hours += u->paused_gb_hours;
}

void meter_cost(const struct meter_usage *u, const struct meter_rates *r, struct meter_cost *c)
{
    double used = u->cpu_seconds / 3600.0, floor = METER_VCPU_FLOOR * u->running_hours;
    c->vcpu_hours = used > floor ? used : floor;
    c->cpu = c->vcpu_hours * r->vcpu_hour;
    c->memory = u->memory_gib_hours * r->gib_hour;
    c->paused = u->paused_gb_hours / METER_HOURS_PER_MONTH * r->gb_month;
    c->total = c->cpu + c->memory + c->paused;
}

int meter_estimate(const struct meter_fleet *f, const struct meter_rates *r,
                   struct meter_cost *month, err_t *err)
{
    const double v[] = {f->count, f->vcpu, f->gib, f->busy_hours_per_day, f->avg_cpu, f->stored_gb};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (!isfinite(v[i]) || v[i] < 0)
            return err_set(err, -EINVAL, "every figure of the fleet must be a number >= 0");
    if (f->busy_hours_per_day > 24)
        return err_set(err, -EINVAL, "busy hours are per day: at most 24");
    if (f->avg_cpu > f->vcpu)
        return err_set(err, -EINVAL, "the average CPU (%g vCPU) cannot exceed the vCPUs (%g)",
                       f->avg_cpu, f->vcpu);
    double busy = f->busy_hours_per_day * 30.0, idle = METER_HOURS_PER_MONTH - busy;
    struct meter_usage one = {0};
    meter_add_running(&one, busy, f->avg_cpu * busy * 3600.0, f->gib);
    meter_add_paused(&one, idle, f->stored_gb);
    struct meter_cost c;
    meter_cost(&one, r, &c);
    month->vcpu_hours = c.vcpu_hours * f->count;
    month->cpu = c.cpu * f->count;
    month->memory = c.memory * f->count;
    month->paused = c.paused * f->count;
    month->total = month->cpu + month->memory + month->paused;
    return 0;
}

const double meter_bounds[METER_BUCKETS] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                            0.05,   0.1,   0.25,   0.5,   1,    5};

void meter_observe(struct meter_histogram *h, double seconds)
{
    size_t i = 0;
    while (i < METER_BUCKETS && seconds > meter_bounds[i])
        i++;
    h->counts[i]++;
    h->sum += seconds;
    h->count++;
}

void meter_histogram_write(FILE *f, const char *name, const char *labels,
                           const struct meter_histogram *h)
{
    const char *sep = labels[0] ? "," : "";
    uint64_t cum = 0;
    for (size_t i = 0; i <= METER_BUCKETS; i++) {
        cum += h->counts[i];
        if (i < METER_BUCKETS)
            fprintf(f, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep, meter_bounds[i],
                    (unsigned long long)cum);
        else
            fprintf(f, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep,
                    (unsigned long long)cum);
    }
    const char *open = labels[0] ? "{" : "", *close = labels[0] ? "}" : "";
    fprintf(f, "%s_sum%s%s%s %.9g\n%s_count%s%s%s %llu\n", name, open, labels, close, h->sum, name,
            open, labels, close, (unsigned long long)h->count);
}

void meter_series_note(struct meter_series *s, int64_t unix_ms, const struct meter_point *p)
{
    int32_t minute = (int32_t)(unix_ms / 60000);
    struct meter_point *slot = &s->points[minute % METER_SERIES_MINUTES];
    if (slot->minute != minute) {
        *slot = *p;
        slot->minute = minute;
        return;
    }
    /* Another checkpoint in the same minute (a pause, a wake): the minute's peaks. */
    slot->vcpu = fmaxf(slot->vcpu, p->vcpu);
    slot->memory_mib = fmaxf(slot->memory_mib, p->memory_mib);
    slot->stored_mib = fmaxf(slot->stored_mib, p->stored_mib);
    slot->cost = p->cost;
}

const struct meter_point *meter_series_at(const struct meter_series *s, int32_t minute)
{
    const struct meter_point *slot = &s->points[minute % METER_SERIES_MINUTES];
    return minute > 0 && slot->minute == minute ? slot : NULL;
}
