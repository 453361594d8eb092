/* `runtime usage [--json]`: what each sandbox used and cost (GET /v1/usage), and
 * `runtime usage --estimate ...`: a month's cost of a fleet, worked out here by the daemon's
 * own arithmetic (meter.h) so that the estimate and the bill agree. */
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../meter/meter.h"

/* In the order of specs[], which is indexed by them. */
enum {
    U_JSON,
    U_ESTIMATE,
    U_COUNT,
    U_VCPU,
    U_GIB,
    U_BUSY,
    U_AVG,
    U_STORED,
    U_PRICE_VCPU,
    U_PRICE_GIB,
    U_PRICE_GB,
};

static const struct opt_spec specs[] = {
    {"json", false, U_JSON},
    {"estimate", false, U_ESTIMATE},
    {"count", true, U_COUNT},
    {"vcpu", true, U_VCPU},
    {"gib", true, U_GIB},
    {"busy-hours", true, U_BUSY},
    {"avg-cpu", true, U_AVG},
    {"stored-gb", true, U_STORED},
    {"price-vcpu-hour", true, U_PRICE_VCPU},
    {"price-gib-hour", true, U_PRICE_GIB},
    {"price-gb-month", true, U_PRICE_GB},
    {NULL, false, 0},
};

/* The prices' variables, as runtimed takes them, in the order of U_PRICE_*. */
static const char *const price_env[] = {"RUNTIME_PRICE_VCPU_HOUR", "RUNTIME_PRICE_GIB_HOUR",
                                        "RUNTIME_PRICE_GB_MONTH"};

struct usage_opts {
    bool json, estimate;
    int estimate_opt; /* an option that goes only with --estimate, or -1 */
    bool price_given[ARRAY_LEN(price_env)];
    struct meter_fleet fleet;
    struct meter_rates rates;
};

static double *price_field(struct meter_rates *r, int i)
{
    return i == 0 ? &r->vcpu_hour : i == 1 ? &r->gib_hour : &r->gb_month;
}

static double *fleet_field(struct meter_fleet *f, int id)
{
    switch (id) {
    case U_VCPU:
        return &f->vcpu;
    case U_GIB:
        return &f->gib;
    case U_BUSY:
        return &f->busy_hours_per_day;
    case U_AVG:
        return &f->avg_cpu;
    }
    return &f->stored_gb;
}

static int apply_number(const char *cmd, struct usage_opts *o, int id, const char *val)
{
    json_int_t n;
    o->estimate_opt = id;
    if (id == U_COUNT) {
        if (parse_count(cmd, specs[id].name, val, &n)) return EXIT_USAGE;
        o->fleet.count = (double)n;
        return 0;
    }
    if (id >= U_PRICE_VCPU) {
        o->price_given[id - U_PRICE_VCPU] = true;
        return parse_decimal(cmd, specs[id].name, val, price_field(&o->rates, id - U_PRICE_VCPU));
    }
    return parse_decimal(cmd, specs[id].name, val, fleet_field(&o->fleet, id));
}

/* Returns -1 after printing help. */
static int scan(struct args *a, struct usage_opts *o)
{
    int id;
    while ((id = args_next(a)) != ARG_END) {
        if (id == ARG_HELP) return usage_print(a->cmd, stdout), -1;
        if (id == ARG_BAD) return EXIT_USAGE;
        if (id == U_JSON)
            o->json = true;
        else if (id == U_ESTIMATE)
            o->estimate = true;
        else if (id < 0)
            return cli_usage_error(a->cmd, "unexpected argument '%s'", a->argv[a->i - 1]);
        else if (apply_number(a->cmd, o, id, a->val))
            return EXIT_USAGE;
    }
    if (!o->estimate && o->estimate_opt >= 0)
        return cli_usage_error(a->cmd, "option --%s goes only with --estimate",
                               specs[o->estimate_opt].name);
    return 0;
}

/* The prices not given as options come from the environment, read as runtimed reads them
 * so that one setting serves both. */
static int env_prices(struct usage_opts *o)
{
    for (int i = 0; i < (int)ARRAY_LEN(price_env); i++) {
        const char *s = getenv(price_env[i]);
        if (o->price_given[i] || !s || !*s) continue;
        char *end;
        double v = strtod(s, &end);
        if (*end || !(v >= 0) || v > 1e6)
            return cli_usage_error("usage", "%s=%s is not a price in dollars >= 0; fix or unset it",
                                   price_env[i], s);
        *price_field(&o->rates, i) = v;
    }
    return 0;
}

/* ---- money ---- */

/* Dollars to `decimals` places, half up as a bill rounds: printf alone rounds the binary
 * value, so 2.625 would print 2.62; the nudge absorbs the float error of sums of products. */
static void dollars(double v, int decimals, char *out, size_t size)
{
    double scale = pow(10, decimals);
    snprintf(out, size, "$%.*f", decimals, round(v * scale + 1e-9) / scale);
}

static void print_rates(const struct meter_rates *r)
{
    printf("rates: $%g per vCPU-hour, $%g per GiB-hour of memory, $%g per GB-month stored "
           "while paused\n",
           r->vcpu_hour, r->gib_hour, r->gb_month);
}

/* ---- the estimate ---- */

static int print_estimate_json(const struct usage_opts *o, const struct meter_cost *m)
{
    const struct meter_fleet *f = &o->fleet;
    const struct meter_rates *r = &o->rates;
    json_t *j = json_pack("{s:{s:f,s:f,s:f,s:f,s:f},s:{s:f,s:f,s:f},s:{s:I,s:f,s:f,s:f,s:f,s:f}}",
                          "month", "cpu", m->cpu, "memory", m->memory, "paused", m->paused, "total",
                          m->total, "vcpuHours", m->vcpu_hours, "rates", "vcpuHour", r->vcpu_hour,
                          "gibHour", r->gib_hour, "gbMonth", r->gb_month, "fleet", "count",
                          (json_int_t)f->count, "vcpu", f->vcpu, "gib", f->gib, "busyHoursPerDay",
                          f->busy_hours_per_day, "avgCpu", f->avg_cpu, "storedGB", f->stored_gb);
    /* 12 digits: 0.0075 rather than its binary value's 0.0074999999999999997. */
    char *text = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(12)) : NULL;
    json_decref(j);
    if (!text) return cli_error("out of memory");
    puts(text);
    free(text);
    return 0;
}

static void money_line(const char *label, double v, const char *note)
{
    char d[64];
    dollars(v, 2, d, sizeof d);
    printf("  %-16s%10s%s\n", label, d, note);
}

static void print_estimate(const struct usage_opts *o, const struct meter_cost *m, double hour)
{
    const struct meter_fleet *f = &o->fleet;
    char note[128], d[64];
    printf("A month (30 days) of %.0f sandbox%s of %g vCPU and %g GiB, busy %g hours a day at "
           "%g vCPU, paused the rest with %g GB stored:\n",
           f->count, f->count == 1 ? "" : "es", f->vcpu, f->gib, f->busy_hours_per_day, f->avg_cpu,
           f->stored_gb);
    snprintf(note, sizeof note, "  (%g vCPU-hours billed)", m->vcpu_hours);
    money_line("CPU", m->cpu, note);
    money_line("memory", m->memory, "");
    money_line("paused storage", m->paused, "");
    money_line("total", m->total, " a month");
    dollars(hour, 5, d, sizeof d);
    printf("A running sandbox costs %s an hour.\n", d);
    print_rates(&o->rates);
}

static int estimate(const struct usage_opts *o)
{
    const struct meter_fleet *f = &o->fleet;
    /* One sandbox busy all day and never paused: its cost per hour running. */
    struct meter_fleet one = {1, f->vcpu, f->gib, 24, f->avg_cpu, 0};
    struct meter_cost month, day;
    err_t err = {0};
    if (meter_estimate(f, &o->rates, &month, &err) < 0)
        return cli_usage_error("usage", "%s", err.msg);
    if (meter_estimate(&one, &o->rates, &day, &err) < 0)
        return cli_usage_error("usage", "%s", err.msg);
    if (o->json) return print_estimate_json(o, &month);
    print_estimate(o, &month, day.total / METER_HOURS_PER_MONTH);
    return 0;
}

/* ---- GET /v1/usage ---- */

enum { COLS = 7, CELL = 256 };
static const char *const heads[COLS] = {"NAME",  "STATUS",      "CPU s", "vCPU-h",
                                        "GiB-h", "PAUSED GB-h", "COST $"};
typedef char row_text[COLS][CELL];

static void num_cell(json_t *v, int decimals, char *out)
{
    if (json_is_number(v))
        snprintf(out, CELL, "%.*f", decimals, json_number_value(v));
    else
        snprintf(out, CELL, "-");
}

/* A sandbox's row, named by its name or else its id; the total's when label is given. */
static void row_cells(json_t *row, const char *label, row_text t)
{
    const char *name = json_string_value(json_object_get(row, "name"));
    const char *status = json_string_value(json_object_get(row, "status"));
    if (!name || !*name) name = json_string_value(json_object_get(row, "sandbox"));
    snprintf(t[0], CELL, "%s", label ? label : name ? name : "-");
    snprintf(t[1], CELL, "%s", label ? "" : status ? status : "-");
    show_clean(t[0]), show_clean(t[1]);
    num_cell(json_object_get(row, "cpuSeconds"), 3, t[2]);
    num_cell(json_object_get(row, "vcpuHours"), 6, t[3]);
    num_cell(json_object_get(row, "memoryGiBHours"), 6, t[4]);
    num_cell(json_object_get(row, "pausedGBHours"), 6, t[5]);
    json_t *total = json_object_get(json_object_get(row, "cost"), "total");
    if (json_is_number(total))
        dollars(json_number_value(total), 5, t[6], CELL);
    else
        snprintf(t[6], CELL, "-");
}

static void widen(int width[COLS], row_text t)
{
    for (int c = 0; c < COLS; c++)
        if ((int)strlen(t[c]) > width[c]) width[c] = (int)strlen(t[c]);
}

/* Names and states to the left, figures to the right. */
static void print_row(const int width[COLS], row_text t)
{
    for (int c = 0; c < COLS; c++)
        printf(c < 2 ? "%-*s  " : c < COLS - 1 ? "%*s  " : "%*s\n", width[c], t[c]);
}

static void table(json_t *list, json_t *total)
{
    int width[COLS];
    row_text t;
    size_t i;
    json_t *row;
    for (int c = 0; c < COLS; c++)
        width[c] = (int)strlen(heads[c]);
    json_array_foreach(list, i, row)
    {
        row_cells(row, NULL, t);
        widen(width, t);
    }
    row_cells(total, "TOTAL", t);
    widen(width, t);
    for (int c = 0; c < COLS; c++)
        snprintf(t[c], CELL, "%s", heads[c]);
    print_row(width, t);
    json_array_foreach(list, i, row)
    {
        row_cells(row, NULL, t);
        print_row(width, t);
    }
    row_cells(total, "TOTAL", t);
    print_row(width, t);
}

static int show_usage(json_t *answer, void *arg)
{
    json_t *list = json_object_get(answer, "sandboxes"), *rates = json_object_get(answer, "rates");
    if (!json_is_array(list))
        return cli_error("the daemon's answer is not a usage report; is that runtimed?");
    table(list, json_object_get(answer, "total"));
    struct meter_rates r = {
        .vcpu_hour = json_number_value(json_object_get(rates, "vcpuHour")),
        .gib_hour = json_number_value(json_object_get(rates, "gibHour")),
        .gb_month = json_number_value(json_object_get(rates, "gbMonth")),
    };
    putchar('\n');
    print_rates(&r);
    return 0;
}

int cmd_usage(struct cli *c, int argc, char **argv)
{
    struct args a;
    struct usage_opts o = {.estimate_opt = -1, .fleet = {1, 1, 1, 24, METER_VCPU_FLOOR, 0}};
    meter_default_rates(&o.rates);
    args_init(&a, argc, argv, "usage", specs);
    int r = scan(&a, &o);
    if (r) return r < 0 ? EXIT_OK : r;
    if (o.estimate) return env_prices(&o) ? EXIT_USAGE : estimate(&o);
    struct http_req req = {.method = "GET", .path = "/v1/usage", .sink_fd = -1};
    return api_show(c, &req, o.json, show_usage, NULL);
}
