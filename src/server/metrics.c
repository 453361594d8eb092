/* GET /metrics: the daemon's counters in Prometheus text format. Counters come from the
 * events the server records anyway (egress, secrets), from the keeper round trips and
 * from idle pauses and wakes; the gateway adds its own per server. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server_impl.h"

#define MAX_REASONS 16

struct metrics {
    uint64_t pauses, wakes;
    struct meter_histogram wake;
    uint64_t egress_allowed;
    char reasons[MAX_REASONS][40];
    uint64_t refused[MAX_REASONS];
    uint64_t secret_used, secret_misdirected, secret_reflected;
    uint64_t keeper[PROTO_TYPE_END];
    uint64_t keeper_waits[PROTO_TYPE_END];     /* of those, the loop waited for (after startup) */
    uint64_t unreadable_usage, unreadable_mcp; /* store rows that could not be read */
};

void server_row_unreadable(struct server *srv, const char *table, const char *sandbox_id,
                           const char *why)
{
    log_error("sandbox %s: its %s row in the store cannot be read (%s); it is kept as it is "
              "and %s until it is mended or removed",
              sandbox_id, table, why,
              strcmp(table, "usage") == 0 ? "the sandbox's usage is not counted"
                                          : "its MCP servers are not restored");
    if (strcmp(table, "usage") == 0)
        srv->metrics->unreadable_usage++;
    else
        srv->metrics->unreadable_mcp++;
}

int metrics_start(struct server *srv)
{
    srv->metrics = calloc(1, sizeof *srv->metrics);
    return srv->metrics ? 0 : -ENOMEM;
}

void metrics_stop(struct server *srv)
{
    free(srv->metrics);
    srv->metrics = NULL;
}

void metrics_pause(struct server *srv)
{
    srv->metrics->pauses++;
}

void metrics_wake(struct server *srv, double seconds)
{
    srv->metrics->wakes++;
    meter_observe(&srv->metrics->wake, seconds);
}

void metrics_keeper(struct server *srv, uint16_t type)
{
    if (srv->metrics && type < PROTO_TYPE_END) srv->metrics->keeper[type]++;
}

void metrics_keeper_wait(struct server *srv, uint16_t type)
{
    if (srv->metrics && type < PROTO_TYPE_END) srv->metrics->keeper_waits[type]++;
}

static void count_refusal(struct metrics *m, const char *reason)
{
    if (!reason) reason = "unknown";
    for (int i = 0; i < MAX_REASONS; i++) {
        if (!m->reasons[i][0]) snprintf(m->reasons[i], sizeof m->reasons[i], "%s", reason);
        if (strcmp(m->reasons[i], reason) == 0) {
            m->refused[i]++;
            return;
        }
    }
}

void metrics_event(struct server *srv, const char *kind, json_t *fields)
{
    struct metrics *m = srv->metrics;
    if (!m) return;
    if (strcmp(kind, "egress.allowed") == 0)
        m->egress_allowed++;
    else if (strcmp(kind, "egress.refused") == 0)
        count_refusal(m, json_string_value(json_object_get(fields, "reason")));
    else if (strcmp(kind, "secret.used") == 0)
        m->secret_used++;
    else if (strcmp(kind, "secret.misdirected") == 0)
        m->secret_misdirected++;
    else if (strcmp(kind, "secret.reflected") == 0)
        m->secret_reflected++;
}

static long rss_bytes(void)
{
    char buf[128] = "";
    long pages = 0, rss = 0;
    if (read_file_small("/proc/self/statm", buf, sizeof buf) < 0) return 0;
    if (sscanf(buf, "%ld %ld", &pages, &rss) != 2) return 0;
    return rss * sysconf(_SC_PAGESIZE);
}

static void sandboxes(FILE *f, struct server *srv)
{
    fputs("# HELP runtime_sandboxes Sandboxes by status.\n# TYPE runtime_sandboxes gauge\n", f);
    for (int i = 0; i < SBX_STATUS_COUNT; i++) {
        enum sbx_state s = sbx_status_at(i);
        int n = 0;
        for (struct sbx *sb = srv->sandboxes; sb; sb = sb->next)
            n += sbx_state_shown(sb->state) == s;
        fprintf(f, "runtime_sandboxes{status=\"%s\"} %d\n", sbx_status_name(s), n);
    }
}

/* One account's sandboxes by status (the statuses it has). */
static void account_lines(FILE *f, struct server *srv, const char *account)
{
    for (int i = 0; i < SBX_STATUS_COUNT; i++) {
        enum sbx_state s = sbx_status_at(i);
        int n = 0;
        for (struct sbx *sb = srv->sandboxes; sb; sb = sb->next)
            n += sbx_state_shown(sb->state) == s && strcmp(sb->account, account) == 0;
        if (n)
            fprintf(f, "runtime_account_sandboxes{account=\"%s\",status=\"%s\"} %d\n", account,
                    sbx_status_name(s), n);
    }
}

static void account_sandboxes(FILE *f, struct server *srv)
{
    fputs("# HELP runtime_account_sandboxes Sandboxes by account and status.\n"
          "# TYPE runtime_account_sandboxes gauge\n",
          f);
    account_lines(f, srv, ACCOUNT_DEFAULT);
    for (const struct account *a = accounts_first(srv->accounts); a; a = a->next)
        account_lines(f, srv, a->name);
}

static void idle(FILE *f, const struct metrics *m)
{
    fprintf(f,
            "# HELP runtime_pauses_total Sandboxes paused (idle or asked).\n"
            "# TYPE runtime_pauses_total counter\nruntime_pauses_total %llu\n"
            "# HELP runtime_wakes_total Paused sandboxes woken.\n"
            "# TYPE runtime_wakes_total counter\nruntime_wakes_total %llu\n"
            "# HELP runtime_wake_seconds Time to thaw a paused sandbox.\n"
            "# TYPE runtime_wake_seconds histogram\n",
            (unsigned long long)m->pauses, (unsigned long long)m->wakes);
    meter_histogram_write(f, "runtime_wake_seconds", "", &m->wake);
    /* Where a hibernating ns sandbox's memory goes (docs/hibernation.md): 0, none. */
    int64_t total = meminfo_bytes("SwapTotal"), free_b = meminfo_bytes("SwapFree");
    fprintf(f,
            "# HELP runtime_host_swap_bytes The host's swap (0: ns sandboxes cannot hibernate).\n"
            "# TYPE runtime_host_swap_bytes gauge\nruntime_host_swap_bytes %lld\n"
            "# HELP runtime_host_swap_free_bytes What of it is free.\n"
            "# TYPE runtime_host_swap_free_bytes gauge\nruntime_host_swap_free_bytes %lld\n",
            (long long)(total < 0 ? 0 : total), (long long)(free_b < 0 ? 0 : free_b));
}

static void egress(FILE *f, const struct metrics *m)
{
    fprintf(f,
            "# HELP runtime_egress_connections_total Egress decisions by verdict and reason.\n"
            "# TYPE runtime_egress_connections_total counter\n"
            "runtime_egress_connections_total{verdict=\"allowed\",reason=\"\"} %llu\n",
            (unsigned long long)m->egress_allowed);
    for (int i = 0; i < MAX_REASONS && m->reasons[i][0]; i++)
        fprintf(f, "runtime_egress_connections_total{verdict=\"refused\",reason=\"%s\"} %llu\n",
                m->reasons[i], (unsigned long long)m->refused[i]);
    fprintf(
        f,
        "# HELP runtime_secret_swaps_total Placeholders swapped for a secret's value.\n"
        "# TYPE runtime_secret_swaps_total counter\nruntime_secret_swaps_total %llu\n"
        "# HELP runtime_secret_misdirected_total Placeholders sent where their secret may "
        "not go.\n# TYPE runtime_secret_misdirected_total counter\n"
        "runtime_secret_misdirected_total %llu\n"
        "# HELP runtime_secret_reflected_total Answers that echoed a swapped value (overwritten "
        "before the sandbox saw it).\n# TYPE runtime_secret_reflected_total counter\n"
        "runtime_secret_reflected_total %llu\n",
        (unsigned long long)m->secret_used, (unsigned long long)m->secret_misdirected,
        (unsigned long long)m->secret_reflected);
}

static void keeper(FILE *f, const struct metrics *m)
{
    fputs("# HELP runtime_keeper_calls_total Requests to the privileged keeper by type.\n"
          "# TYPE runtime_keeper_calls_total counter\n",
          f);
    for (int t = 0; t < PROTO_TYPE_END; t++)
        if (m->keeper[t])
            fprintf(
                f, "runtime_keeper_calls_total{type=\"%s\"} %llu\n", proto_type_name(t),
                (unsigned long long)m->keeper[t]); /* Should stay empty: after startup every request
                                                      is answered while the loop goes on. */
    fputs("# HELP runtime_keeper_loop_waits_total Keeper requests the event loop stopped for, "
          "after startup, by type.\n"
          "# TYPE runtime_keeper_loop_waits_total counter\n",
          f);
    for (int t = 0; t < PROTO_TYPE_END; t++)
        if (m->keeper_waits[t])
            fprintf(f, "runtime_keeper_loop_waits_total{type=\"%s\"} %llu\n", proto_type_name(t),
                    (unsigned long long)m->keeper_waits[t]);
}

/* The HTTP server's connections, and what the server holds for requests. */
static void http(FILE *f, struct server *srv)
{
    struct httpd_stats st = {0};
    if (srv->http) httpd_get_stats(srv->http, &st);
    const struct {
        const char *result;
        uint64_t n;
    } conns[] = {{"accepted", st.accepted},
                 {"refused", st.refused},
                 {"evicted", st.evicted},
                 {"out_of_descriptors", st.fd_exhausted},
                 {"head_timeout", st.head_timeouts},
                 {"bad_head", st.bad_heads},
                 {"body_refused", st.body_refused},
                 {"cut", st.cut}};
    fprintf(f,
            "# HELP runtime_http_connections Open connections to the API and the gateway.\n"
            "# TYPE runtime_http_connections gauge\n"
            "runtime_http_connections{listener=\"tcp\"} %llu\n"
            "runtime_http_connections{listener=\"unix\"} %llu\n"
            "# HELP runtime_http_connections_total Connections and requests by what became of "
            "them.\n# TYPE runtime_http_connections_total counter\n",
            (unsigned long long)st.open, (unsigned long long)st.local_open);
    for (size_t i = 0; i < ARRAY_LEN(conns); i++)
        fprintf(f, "runtime_http_connections_total{result=\"%s\"} %llu\n", conns[i].result,
                (unsigned long long)conns[i].n);
    const struct budget *b = srv->budget;
    fprintf(f,
            "# HELP runtime_held_bytes What the server holds for requests (bodies, unsent "
            "answers).\n# TYPE runtime_held_bytes gauge\nruntime_held_bytes %llu\n"
            "# HELP runtime_held_bytes_peak The most it held at once.\n"
            "# TYPE runtime_held_bytes_peak gauge\nruntime_held_bytes_peak %llu\n"
            "# HELP runtime_held_refused_total Bodies refused and streams cut at a limit.\n"
            "# TYPE runtime_held_refused_total counter\nruntime_held_refused_total %llu\n",
            (unsigned long long)(b ? b->used : 0), (unsigned long long)(b ? b->peak : 0),
            (unsigned long long)(b ? b->refused : 0));
    fputs("# HELP runtime_sandbox_held_bytes What the server holds for one sandbox's requests "
          "(bodies, unsent answers, unread input of its servers, resumption histories).\n"
          "# TYPE runtime_sandbox_held_bytes gauge\n",
          f);
    for (struct sbx *sb = srv->sandboxes; sb; sb = sb->next)
        if (sb->budget)
            fprintf(f, "runtime_sandbox_held_bytes{account=\"%s\",sandbox=\"%s\"} %llu\n",
                    sb->account, sb->id, (unsigned long long)sb->budget->used);
}

char *server_metrics_text(struct server *srv)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return NULL;
    sandboxes(f, srv);
    account_sandboxes(f, srv);
    idle(f, srv->metrics);
    fputs("# HELP runtime_gateway_requests_total MCP gateway requests by server.\n"
          "# TYPE runtime_gateway_requests_total counter\n"
          "# HELP runtime_gateway_request_seconds MCP gateway request latency by server.\n"
          "# TYPE runtime_gateway_request_seconds histogram\n"
          "# HELP runtime_gateway_notifications_dropped_total Client messages without an id "
          "that are not notifications MCP defines (a tools/call sent as one), by server.\n"
          "# TYPE runtime_gateway_notifications_dropped_total counter\n"
          "# HELP runtime_gateway_history_bytes Events a sandbox's sessions keep for "
          "resumption (at most a quarter of --held-per-sandbox).\n"
          "# TYPE runtime_gateway_history_bytes gauge\n",
          f);
    if (srv->hooks.metrics)
        for (struct sbx *sb = srv->sandboxes; sb; sb = sb->next)
            srv->hooks.metrics(sb, f);
    egress(f, srv->metrics);
    keeper(f, srv->metrics);
    fprintf(f,
            "# HELP runtime_store_unreadable_rows_total Sandbox rows of the store that could not "
            "be read at restore (kept as they are, not counted as zero; the log names them).\n"
            "# TYPE runtime_store_unreadable_rows_total counter\n"
            "runtime_store_unreadable_rows_total{table=\"usage\"} %llu\n"
            "runtime_store_unreadable_rows_total{table=\"mcp\"} %llu\n",
            (unsigned long long)srv->metrics->unreadable_usage,
            (unsigned long long)srv->metrics->unreadable_mcp);
    http(f, srv);
    fprintf(f,
            "# HELP runtime_daemon_memory_bytes Resident memory of the daemon's server "
            "process.\n# TYPE runtime_daemon_memory_bytes gauge\n"
            "runtime_daemon_memory_bytes %ld\n",
            rss_bytes());
    fclose(f);
    return text;
}
