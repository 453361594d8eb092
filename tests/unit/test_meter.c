/* Usage and price: the three examples of issue 6 to the cent, and the floor. */
#include <errno.h>
#include <math.h>

#include "meter/meter.h"
#include "unit.h"

static bool cents(double got, double want)
{
    return fabs(got - want) < 0.005;
}

TEST(meter_idle_2gib_gateway_costs_0_01625_an_hour)
{
    struct meter_rates r;
    meter_default_rates(&r);
    struct meter_usage u = {0};
    meter_add_running(&u, 1.0, 0.0, 2.0); /* idle: no CPU at all, the floor applies */
    struct meter_cost c;
    meter_cost(&u, &r, &c);
    CHECK(fabs(c.total - 0.01625) < 1e-12);
    CHECK(fabs(c.vcpu_hours - 0.05) < 1e-12);
}

TEST(meter_five_1gib_servers_busy_two_hours_a_day)
{
    struct meter_rates r;
    meter_default_rates(&r);
    struct meter_fleet f = {.count = 5,
                            .vcpu = 1,
                            .gib = 1,
                            .busy_hours_per_day = 2,
                            .avg_cpu = METER_VCPU_FLOOR,
                            .stored_gb = 0};
    struct meter_cost m;
    CHECK(meter_estimate(&f, &r, &m, NULL) == 0);
    CHECK(cents(m.total, 2.63));
}

TEST(meter_100_customers_cost_108_67_a_month)
{
    struct meter_rates r;
    meter_default_rates(&r);
    struct meter_fleet f = {.count = 100,
                            .vcpu = 1,
                            .gib = 2,
                            .busy_hours_per_day = 2,
                            .avg_cpu = 0.1,
                            .stored_gb = 0.5};
    struct meter_cost m;
    CHECK(meter_estimate(&f, &r, &m, NULL) == 0);
    CHECK(cents(m.cpu, 15.00));
    CHECK(cents(m.memory, 90.00));
    CHECK(cents(m.paused, 3.67));
    CHECK(cents(m.total, 108.67));
}

/* The same 100 customers, each an account of its own (issue 14): each account's
 * month priced as GET /v1/usage prices it (meter_cost of its usage), and the
 * 100 bills add up to the fleet's estimate. */
TEST(meter_100_accounts_add_up_to_the_fleet)
{
    struct meter_rates r;
    meter_default_rates(&r);
    double sum = 0;
    struct meter_usage fleet = {0};
    for (int account = 0; account < 100; account++) {
        struct meter_usage u = {0};
        for (int day = 0; day < 30; day++) {
            meter_add_running(&u, 2.0, 2.0 * 3600 * 0.1, 2.0); /* 2 h at 0.1 vCPU, 2 GiB */
            meter_add_paused(&u, 22.0, 0.5);                   /* the rest paused, 0.5 GB */
        }
        struct meter_cost c;
        meter_cost(&u, &r, &c);
        CHECK(cents(c.total, 1.0867));
        sum += c.total;
        meter_usage_add(&fleet, &u); /* as GET /v1/usage sums the fleet */
    }
    struct meter_cost all;
    meter_cost(&fleet, &r, &all);
    CHECK(cents(sum, 108.67));
    CHECK(fabs(sum - all.total) < 1e-9);
}

TEST(meter_cpu_above_the_floor_is_billed_as_used)
{
    struct meter_rates r;
    meter_default_rates(&r);
    struct meter_usage u = {0};
    meter_add_running(&u, 2.0, 3600.0, 1.0); /* half a vCPU on average */
    meter_add_paused(&u, 720.0, 1.0);        /* a month paused with 1 GB */
    struct meter_cost c;
    meter_cost(&u, &r, &c);
    CHECK(fabs(c.vcpu_hours - 1.0) < 1e-12);
    CHECK(fabs(c.paused - 0.08) < 1e-12);
}

TEST(meter_estimate_refuses_impossible_fleets)
{
    struct meter_rates r;
    meter_default_rates(&r);
    struct meter_cost m;
    err_t err = {0};
    struct meter_fleet busy = {.count = 1, .vcpu = 1, .gib = 1, .busy_hours_per_day = 25};
    CHECK(meter_estimate(&busy, &r, &m, &err) == -EINVAL);
    struct meter_fleet cpu = {.count = 1, .vcpu = 1, .gib = 1, .avg_cpu = 2};
    CHECK(meter_estimate(&cpu, &r, &m, &err) == -EINVAL);
    struct meter_fleet neg = {.count = -1};
    CHECK(meter_estimate(&neg, &r, &m, &err) == -EINVAL);
}

TEST(meter_series_keeps_a_day_of_minutes_and_each_minutes_peaks)
{
    static struct meter_series s; /* 1440 points: not on the stack */
    int64_t t0 = 1800000000000;   /* a minute boundary */
    meter_series_note(&s, t0, &(struct meter_point){.vcpu = 0.5f, .memory_mib = 100, .cost = 1});
    meter_series_note(&s, t0 + 30000, /* a pause in the same minute */
                      &(struct meter_point){.vcpu = 0.1f, .stored_mib = 7, .cost = 2});
    const struct meter_point *p = meter_series_at(&s, (int32_t)(t0 / 60000));
    CHECK(p && p->vcpu == 0.5f && p->memory_mib == 100 && p->stored_mib == 7 && p->cost == 2);
    CHECK(meter_series_at(&s, (int32_t)(t0 / 60000) + 1) == NULL);
    /* A day later the same slot is another minute's: the old one is gone. */
    meter_series_note(&s, t0 + 86400000, &(struct meter_point){.vcpu = 1});
    CHECK(meter_series_at(&s, (int32_t)(t0 / 60000)) == NULL);
    p = meter_series_at(&s, (int32_t)((t0 + 86400000) / 60000));
    CHECK(p && p->vcpu == 1 && p->memory_mib == 0);
}
