/* gwcall: tools/call round trips through runtime's gateway from a client that costs
 * almost nothing, so that what is timed is the gateway and the server, not the client.
 *
 * The Node clients of bench/mcp-load.mjs spend 0.3-0.4 ms of CPU per call (the "lean" one
 * too: node:http, JSON, timers), about as much as the call itself, and on a small machine
 * that CPU competes with what a benchmark puts beside the call. This one speaks the same
 * messages over one keep-alive HTTP/1.1 connection: initialize (keeping Mcp-Session-Id),
 * notifications/initialized, then one tools/call after another, each timed from before its
 * write to the last byte of its answer. Answers must be application/json with a
 * Content-Length (what runtimed sends for a call); anything else counts as an error.
 *
 *   cc -O2 -o gwcall bench/gwcall.c
 *   gwcall --url http://127.0.0.1:PORT/mcp/LINK/NAME --token T [--calls N (1000)]
 *          [--warmup K (50)] [--seconds S (120)] [--tool NAME (echo)] [--args JSON ({})]
 *          [--timeout-ms T (10000)] [--raw FILE]
 *
 * Prints one JSON object like mcp-load.mjs's (calls, errors, seconds, rps, p50_ms, p90_ms,
 * p99_ms, max_ms, mean_ms, client_cpu, first_error); --raw writes every latency in
 * microseconds, one a line, in the order of the calls. Exit status 0 when a call succeeded.
 * Only http:// on an IPv4 address (the benchmarks' loopback URLs). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PROTOCOL "2025-11-25"
#define BUF_SIZE (1 << 20)

struct options {
    const char *url, *token, *tool, *args, *raw;
    long calls, warmup, seconds, timeout_ms;
};

struct conn {
    int fd;
    char host[64], path[512];
    uint16_t port;
    const char *token;
    char session[128];
    char buf[BUF_SIZE];
    size_t have; /* bytes in buf */
    int timeout_ms;
};

static char first_error[300];

static void note_error(const char *fmt, ...)
{
    if (first_error[0]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(first_error, sizeof first_error, fmt, ap);
    va_end(ap);
}

static void __attribute__((noreturn)) die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("gwcall: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void parse_url(struct conn *c, const char *url)
{
    unsigned port;
    int n = 0;
    if (sscanf(url, "http://%63[0-9.]:%u%n", c->host, &port, &n) != 2 || port == 0 ||
        port > 65535 || url[n] != '/')
        die("--url must be http://IPv4:PORT/PATH, not '%s'", url);
    c->port = (uint16_t)port;
    snprintf(c->path, sizeof c->path, "%s", url + n);
}

static int dial(struct conn *c)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(c->port)};
    if (inet_pton(AF_INET, c->host, &a.sin_addr) != 1) die("bad address %s", c->host);
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (c->fd < 0 || setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0 ||
        connect(c->fd, (struct sockaddr *)&a, sizeof a) < 0) {
        note_error("cannot connect to %s:%u: %s", c->host, c->port, strerror(errno));
        return -1;
    }
    c->have = 0;
    return 0;
}

static int write_all(struct conn *c, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(c->fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return note_error("write: %s", strerror(errno)), -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Reads more into the buffer, waiting at most the call's timeout. */
static int read_more(struct conn *c)
{
    if (c->have == sizeof c->buf) return note_error("an answer larger than 1 MiB"), -1;
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    int r = poll(&p, 1, c->timeout_ms);
    if (r == 0) return note_error("no answer in %d ms", c->timeout_ms), -1;
    ssize_t n = r > 0 ? read(c->fd, c->buf + c->have, sizeof c->buf - c->have) : -1;
    if (n <= 0) return note_error("read: %s", n == 0 ? "the gateway closed" : strerror(errno)), -1;
    c->have += (size_t)n;
    return 0;
}

/* Copies header `name`'s value (from the head that ends at `end`) into out. */
static int header(const char *head, const char *end, const char *name, char *out, size_t size)
{
    size_t len = strlen(name);
    for (const char *l = strstr(head, "\r\n"); l && l < end; l = strstr(l + 2, "\r\n")) {
        const char *h = l + 2;
        if (strncasecmp(h, name, len) != 0 || h[len] != ':') continue;
        h += len + 1;
        while (*h == ' ')
            h++;
        size_t n = strcspn(h, "\r");
        if (n >= size) n = size - 1;
        memcpy(out, h, n);
        out[n] = '\0';
        return 0;
    }
    return -1;
}

/* One request and its answer: the status, and the body in c->buf from *body (NUL ended). */
static int round_trip(struct conn *c, const char *json, int *status, const char **body)
{
    char req[4096];
    int n = snprintf(req, sizeof req,
                     "POST %s HTTP/1.1\r\nHost: %s:%u\r\nAuthorization: Bearer %s\r\n"
                     "Content-Type: application/json\r\nAccept: application/json, "
                     "text/event-stream\r\nMCP-Protocol-Version: " PROTOCOL "\r\n%s%s%s"
                     "Content-Length: %zu\r\n\r\n%s",
                     c->path, c->host, c->port, c->token, c->session[0] ? "Mcp-Session-Id: " : "",
                     c->session, c->session[0] ? "\r\n" : "", strlen(json), json);
    if (n < 0 || (size_t)n >= sizeof req) die("request too long");
    if (write_all(c, req, (size_t)n) < 0) return -1;
    char *end;
    while (c->buf[c->have] = '\0', !(end = strstr(c->buf, "\r\n\r\n")))
        if (read_more(c) < 0) return -1;
    char value[128], type[128] = "";
    if (sscanf(c->buf, "HTTP/1.1 %d", status) != 1) return note_error("not HTTP"), -1;
    if (header(c->buf, end, "Content-Length", value, sizeof value) < 0) {
        header(c->buf, end, "Content-Type", type, sizeof type);
        return note_error("an answer without Content-Length (Content-Type '%s')", type), -1;
    }
    if (!c->session[0]) header(c->buf, end, "Mcp-Session-Id", c->session, sizeof c->session);
    size_t head = (size_t)(end + 4 - c->buf), total = head + strtoul(value, NULL, 10);
    if (total >= sizeof c->buf) return note_error("an answer larger than 1 MiB"), -1;
    while (c->have < total)
        if (read_more(c) < 0) return -1;
    static char copy[BUF_SIZE];
    memcpy(copy, c->buf + head, total - head);
    copy[total - head] = '\0';
    memmove(c->buf, c->buf + total, c->have - total); /* a pipelined extra: none expected */
    c->have -= total;
    *body = copy;
    return 0;
}

static int call_ok(struct conn *c, const char *json)
{
    int status;
    const char *body;
    if (round_trip(c, json, &status, &body) < 0) return -1;
    if (status == 202 ||
        (status == 200 && strstr(body, "\"result\"") && !strstr(body, "\"isError\":true")))
        return 0;
    note_error("HTTP %d: %.200s", status, body);
    return -1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double pct(const double *sorted, long n, double p)
{
    long i = (long)((p / 100.0) * (double)n + 0.999999) - 1;
    return n ? sorted[i < 0 ? 0 : i >= n ? n - 1 : i] : 0;
}

static double cpu_s(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec / 1e6 +
           (double)u.ru_stime.tv_sec + (double)u.ru_stime.tv_usec / 1e6;
}

static long number(const char *flag, const char *v)
{
    char *end;
    long n = strtol(v, &end, 10);
    if (*v == '\0' || *end != '\0' || n < 0) die("%s takes a whole number, not '%s'", flag, v);
    return n;
}

static void parse_args(int argc, char **argv, struct options *o)
{
    *o = (struct options){.tool = "echo",
                          .args = "{}",
                          .calls = 1000,
                          .warmup = 50,
                          .seconds = 120,
                          .timeout_ms = 10000};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) die("%s needs a value (see the comment at the top of bench/gwcall.c)", a);
        i++;
        if (!strcmp(a, "--url"))
            o->url = v;
        else if (!strcmp(a, "--token"))
            o->token = v;
        else if (!strcmp(a, "--tool"))
            o->tool = v;
        else if (!strcmp(a, "--args"))
            o->args = v;
        else if (!strcmp(a, "--raw"))
            o->raw = v;
        else if (!strcmp(a, "--calls"))
            o->calls = number(a, v);
        else if (!strcmp(a, "--warmup"))
            o->warmup = number(a, v);
        else if (!strcmp(a, "--seconds"))
            o->seconds = number(a, v);
        else if (!strcmp(a, "--timeout-ms"))
            o->timeout_ms = number(a, v);
        else
            die("unknown option %s (see the comment at the top of bench/gwcall.c)", a);
    }
    if (!o->url || !o->token) die("--url and --token are needed");
    if (o->calls < 1) die("--calls must be at least 1");
}

static void report(const struct options *o, double *lat, long n, long errors, double wall,
                   double cpu)
{
    if (o->raw) {
        FILE *f = fopen(o->raw, "w");
        if (!f) die("cannot write %s: %s", o->raw, strerror(errno));
        for (long i = 0; i < n; i++)
            fprintf(f, "%ld\n", (long)(lat[i] * 1e6 + 0.5));
        fclose(f);
    }
    double sum = 0;
    for (long i = 0; i < n; i++)
        sum += lat[i];
    qsort(lat, (size_t)n, sizeof *lat, cmp_double);
    printf("{\"mode\":\"http\",\"client\":\"c\",\"calls\":%ld,\"errors\":%ld,\"seconds\":%.3f,"
           "\"rps\":%.1f,\"p50_ms\":%.3f,\"p90_ms\":%.3f,\"p99_ms\":%.3f,\"max_ms\":%.3f,"
           "\"mean_ms\":%.3f,\"client_cpu\":%.3f,\"warmup\":%ld,\"tool\":\"%s\"",
           n, errors, wall, n / wall, pct(lat, n, 50) * 1e3, pct(lat, n, 90) * 1e3,
           pct(lat, n, 99) * 1e3, n ? lat[n - 1] * 1e3 : 0, n ? sum / n * 1e3 : 0, cpu / wall,
           o->warmup, o->tool);
    if (first_error[0]) {
        printf(",\"first_error\":\"");
        for (const char *p = first_error; *p; p++)
            if (*p != '"' && *p != '\\' && (unsigned char)*p >= 0x20) putchar(*p);
        putchar('"');
    }
    printf("}\n");
}

int main(int argc, char **argv)
{
    struct options o;
    parse_args(argc, argv, &o);
    static struct conn c;
    c.timeout_ms = (int)o.timeout_ms;
    c.token = o.token;
    parse_url(&c, o.url);
    if (dial(&c) < 0 ||
        call_ok(&c, "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
                    "\"protocolVersion\":\"" PROTOCOL "\",\"capabilities\":{},\"clientInfo\":"
                    "{\"name\":\"runtime-bench-gwcall\",\"version\":\"1.0.0\"}}}") < 0 ||
        call_ok(&c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}") < 0)
        die("the session did not start: %s", first_error);
    double *lat = calloc((size_t)o.calls, sizeof *lat);
    if (!lat) die("out of memory");
    char json[4096];
    long n = 0, errors = 0;
    double t0 = now_s(), cpu0 = cpu_s(), deadline = now_s() + (double)o.seconds;
    for (long i = 0; n + errors < o.calls && now_s() < deadline; i++) {
        if (i == o.warmup) t0 = now_s(), cpu0 = cpu_s();
        snprintf(json, sizeof json,
                 "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":\"tools/call\",\"params\":{"
                 "\"name\":\"%s\",\"arguments\":%s}}",
                 i + 1, o.tool, o.args);
        double start = now_s();
        int r = call_ok(&c, json);
        double took = now_s() - start;
        if (r < 0 && (close(c.fd), dial(&c) < 0)) break; /* a broken connection: once more */
        if (i < o.warmup) continue;
        if (r == 0)
            lat[n++] = took;
        else
            errors++;
    }
    report(&o, lat, n, errors, now_s() - t0, cpu_s() - cpu0);
    return n > 0 ? 0 : 1;
}
