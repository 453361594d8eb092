/* runtimed's options: one table of them (name, where the value goes, its default and its
 * help). The table makes the --help text, the RUNTIME_<NAME> environment variables and
 * getopt's list; each kind of value is parsed and its error worded in one place. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../sandbox/sandbox.h"
#include "daemon.h"

enum opt_kind {
    OPT_TEXT,   /* a string, into char[size] */
    OPT_CHOICE, /* one of the words of choices ("a|b") */
    OPT_COUNT,  /* a whole number from min to max, into an unsigned */
    OPT_PRICE,  /* dollars, >= 0, into a double */
    OPT_FLAG,   /* no argument; in the environment, "" or "0" is off */
    OPT_EACH,   /* repeatable: each value to each(); in the environment, space-separated */
};

struct opt {
    const char *name; /* --name, and RUNTIME_NAME in the environment */
    enum opt_kind kind;
    size_t offset, size; /* where the value goes in struct options */
    const char *def;     /* the default, as if given; NULL: none (0, "") */
    unsigned min, max;   /* OPT_COUNT */
    const char *choices; /* OPT_CHOICE */
    int (*each)(struct options *o, const char *value, const char *where);
    const char *arg;  /* the value's name in --help */
    const char *help; /* its --help text, wrapped there */
};

static int add_pins(struct options *o, const char *text, const char *where);
static int add_rate(struct options *o, const char *text, const char *where);

/* The rows' shapes (one line each: clang-format would spread them over four). */
// clang-format off
#define AT(field) offsetof(struct options, field), sizeof(((struct options *)0)->field)
#define TEXT(n, field, d, a, h) {n, OPT_TEXT, AT(field), d, 0, 0, NULL, NULL, a, h}
#define CHOICE(n, field, d, c, h) {n, OPT_CHOICE, AT(field), d, 0, 0, c, NULL, c, h}
#define COUNT(n, field, d, lo, hi, a, h) {n, OPT_COUNT, AT(field), d, lo, hi, NULL, NULL, a, h}
#define PRICE(n, field, d, h) {n, OPT_PRICE, AT(field), d, 0, 0, NULL, NULL, "USD", h}
#define FLAG(n, field, h) {n, OPT_FLAG, AT(field), NULL, 0, 0, NULL, NULL, NULL, h}
#define EACH(n, fn, a, h) {n, OPT_EACH, 0, 0, NULL, 0, 0, NULL, fn, a, h}
// clang-format on

static const struct opt opts[] = {
    TEXT("state-dir", state_dir, "/var/lib/runtime", "DIR",
         "database, keys, workspaces (default /var/lib/runtime)"),
    TEXT("listen", listen, "127.0.0.1:7070", "ADDR:PORT",
         "HTTP API and gateway (default 127.0.0.1:7070)"),
    TEXT("tls-cert", tls_cert, NULL, "FILE",
         "serve --listen over TLS with this certificate (PEM, the chain after it) and --tls-key; "
         "both are read by root at start and again on SIGHUP (open connections keep the old ones)"),
    TEXT("tls-key", tls_key, NULL, "FILE", "the key of --tls-cert"),
    FLAG("insecure-listen", insecure_listen,
         "allow a --listen address other than loopback without TLS (only behind something that "
         "encrypts it)"),
    TEXT("socket", socket_path, "/run/runtime/api.sock", "PATH",
         "API for local clients, root only (default /run/runtime/api.sock)"),
    TEXT("public-url", public_url, NULL, "URL",
         "base of gateway URLs (default http://<listen>, or https://<listen> with --tls-cert)"),
    TEXT("driver", driver, "auto", "NAME",
         "isolation of sandboxes created without one: gvisor (gVisor's runsc, its own kernel), "
         "ns (namespaces on the host's kernel) or auto (default: gvisor where runsc is "
         "installed, else ns); both stay available per sandbox"),
    EACH("resolve", add_pins, "HOST:PORT:ADDR",
         "pin a name to an address for the egress proxy (repeatable, like curl's --resolve; PORT 0 "
         "= any)"),
    TEXT("upstream-ca", upstream_ca, NULL, "FILE",
         "extra CA certificates trusted for upstream TLS"),
    TEXT("nameserver", nameserver, NULL, "ADDR[:PORT]",
         "resolve sandbox destinations with this server instead of /etc/resolv.conf"),
    COUNT("max-sandboxes", max_sandboxes, "1000", 1, SANDBOX_MAX_SLOTS, "N",
          "limit of sandboxes (default 1000)"),
    COUNT("mcp-input-wait", mcp_input_wait_s, "300", 1, 86400, "S",
          "how long a 2026-07-28 call that asked its client for input waits for the client's retry "
          "(default 300 s)"),
    COUNT("hibernate-after", hibernate_after_s, "300", 0, 1u << 30, "S",
          "a sandbox paused this long hibernates: a gvisor one's memory to an image on disk, "
          "its processes ended, an ns one's to the host's swap where there is any; restored at "
          "its next request (default 300; 0 never); what a create that names no "
          "hibernateAfterSeconds gets"),
    COUNT("hibernate-below", hibernate_below_mib, NULL, 1, 1u << 30, "MIB",
          "when the host's available memory falls under this, the longest-paused sandboxes "
          "hibernate first, whatever their hibernateAfterSeconds (default: a tenth of the "
          "host's memory)"),
    COUNT("session-idle", session_idle_s, "43200", 1, 1u << 30, "S",
          "a dashboard sign-in unused this long ends (default 43200, 12 hours)"),
    COUNT("session-max", session_max_s, "604800", 1, 1u << 30, "S",
          "... and at most this long after it began (default 604800, 7 days)"),
    COUNT("max-connections", max_conns, NULL, 16, 1u << 20, "N",
          "API and gateway connections over TCP (default: a quarter of the server's descriptors, "
          "at most 4096); at the limit a new one replaces the oldest that never authenticated"),
    COUNT("max-connections-per-client", max_conns_per_client, NULL, 1, 1u << 20, "N",
          "... of one client address (default: an eighth of those)"),
    COUNT("held-per-sandbox", held_per_sandbox_mib, NULL, 1, 1u << 20, "MIB",
          "what the daemon may hold in memory for one sandbox's requests: bodies, unread answers "
          "(default 128)"),
    COUNT("held-total", held_total_mib, NULL, 16, 1u << 22, "MIB",
          "... for all of them together (default 1024)"),
    EACH("rate", add_rate, "NAME=N",
         "a sandbox's rate a second (repeatable): dns-queries (default 500), dns-names (new names, "
         "100), connections (100)"),
    COUNT("sandbox-connections", rates_egress.open_connections, NULL, 1, 1000000, "N",
          "proxied connections a sandbox may hold open (default 256)"),
    CHOICE("templates", templates, "on", "on|off",
           "a catalog MCP server's first start in a gvisor sandbox is checkpointed as a "
           "template, from which later sandboxes of the account with the same server, "
           "settings and limits start instead of installing it (default on; "
           "docs/templates.md)"),
    CHOICE("tls-inspect", tls_inspect, "secret-hosts", "secret-hosts|allowed-hosts",
           "which TLS the egress proxy opens (default secret-hosts: those a secret may go to); "
           "allowed-hosts also opens, to report misdirected placeholders, TLS on port 443 to every "
           "allowed host of sandboxes that hold placeholders"),
    PRICE("price-vcpu-hour", rates.vcpu_hour, "0.025",
          "a vCPU-hour in `runtime usage` (default 0.025)"),
    PRICE("price-gib-hour", rates.gib_hour, "0.0075", "a GiB-hour of memory (default 0.0075)"),
    PRICE("price-gb-month", rates.gb_month, "0.08", "a GB-month of disk (default 0.08)"),
    CHOICE("log-format", log_format, "text", "text|json", "the daemon's log lines (default text)"),
};

/* getopt's values: OPT_BASE + the index in opts, and the two that are not in opts. */
enum { OPT_BASE = 1000, OPT_HELP = 2000, OPT_VERSION };

/* RUNTIME_ and the name in capitals, '-' as '_'. */
static void env_name(const char *name, char *out, size_t size)
{
    int n = snprintf(out, size, "RUNTIME_");
    for (size_t i = 0; name[i] && (size_t)n + 1 < size; i++)
        out[n++] = name[i] == '-' ? '_' : (char)toupper((unsigned char)name[i]);
    out[n] = '\0';
}

/* text in lines of at most width bytes (a longer word alone), each after the 24 columns of
 * the option's name; the first line follows what is already printed. */
static void print_wrapped(FILE *f, const char *text, int width)
{
    while (*text) {
        int len = (int)strlen(text), cut = len;
        if (len > width) {
            cut = width;
            while (cut > 0 && text[cut] != ' ')
                cut--;
            if (cut == 0) cut = (int)strcspn(text, " ");
        }
        fprintf(f, "%.*s\n", cut, text);
        text += cut;
        while (*text == ' ')
            text++;
        if (*text) fprintf(f, "%24s", "");
    }
}

static void print_usage(FILE *f)
{
    fputs("usage: runtimed [options]\n\n"
          "Runs MCP servers in sandboxes and serves the runtime API. Must run as root; it\n"
          "drops to an unprivileged server process at once and keeps a small root keeper.\n"
          "Every option can also be set as RUNTIME_<NAME>, e.g. RUNTIME_STATE_DIR.\n\n",
          f);
    for (size_t i = 0; i < ARRAY_LEN(opts); i++) {
        int n = fprintf(f, "  --%s%s%s", opts[i].name, opts[i].arg ? " " : "",
                        opts[i].arg ? opts[i].arg : "");
        if (n < 24)
            fprintf(f, "%*s", 24 - n, "");
        else
            fprintf(f, "\n%24s", "");
        print_wrapped(f, opts[i].help, 80 - 24);
    }
    fputs("  --version             print the version and exit\n"
          "  -h, --help            this text\n",
          f);
}

/* --resolve: one or more space-separated HOST:PORT:ADDR pins. */
static int add_pins(struct options *o, const char *text, const char *where)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", text);
    for (char *save = NULL, *tok = strtok_r(buf, " ", &save); tok;
         tok = strtok_r(NULL, " ", &save)) {
        err_t err = {0};
        if (o->n_pins == ARRAY_LEN(o->pins)) {
            fprintf(stderr, "runtimed: %s: at most %zu pins\n", where, ARRAY_LEN(o->pins));
            return -EINVAL;
        }
        if (egress_parse_pin(tok, &o->pins[o->n_pins], &err) < 0) {
            fprintf(stderr, "runtimed: %s: %s\n", where, err.msg);
            return -EINVAL;
        }
        o->n_pins++;
    }
    return 0;
}

/* --rate: one or more space-separated NAME=N, a per-sandbox rate a second (0 in the
 * struct means the default). */
static int add_rate(struct options *o, const char *text, const char *where)
{
    static const char *const names[] = {"dns-queries", "dns-names", "connections"};
    unsigned *fields[] = {&o->rates_egress.dns_queries, &o->rates_egress.dns_names,
                          &o->rates_egress.connections};
    char buf[512];
    snprintf(buf, sizeof buf, "%s", text);
    for (char *save = NULL, *tok = strtok_r(buf, " ", &save); tok;
         tok = strtok_r(NULL, " ", &save)) {
        const char *eq = strchr(tok, '=');
        char *end;
        long v = eq ? strtol(eq + 1, &end, 10) : 0;
        size_t i = 0;
        while (eq && i < ARRAY_LEN(names) &&
               !(strlen(names[i]) == (size_t)(eq - tok) && strncmp(tok, names[i], eq - tok) == 0))
            i++;
        if (!eq || i == ARRAY_LEN(names) || *end || end == eq + 1 || v < 1 || v > 1000000) {
            fprintf(stderr,
                    "runtimed: %s %s: give NAME=N with NAME dns-queries, dns-names or "
                    "connections and N from 1 to 1000000\n",
                    where, tok);
            return -EINVAL;
        }
        *fields[i] = (unsigned)v;
    }
    return 0;
}

/* One value of opt (from where: "--name" or "RUNTIME_NAME"), into o. */
static int set_value(const struct opt *opt, const char *value, const char *where, struct options *o)
{
    void *at = (char *)o + opt->offset;
    char *end;
    switch (opt->kind) {
    case OPT_TEXT:
        if (strlen(value) >= opt->size) {
            fprintf(stderr, "runtimed: %s is longer than %zu bytes\n", where, opt->size - 1);
            return -EINVAL;
        }
        snprintf(at, opt->size, "%s", value);
        return 0;
    case OPT_CHOICE: {
        size_t n = strlen(value);
        for (const char *c = opt->choices; c; c = strchr(c, '|') ? strchr(c, '|') + 1 : NULL)
            if (strncmp(c, value, n) == 0 && (c[n] == '|' || c[n] == '\0') && n > 0 &&
                n < opt->size) {
                snprintf(at, opt->size, "%s", value);
                return 0;
            }
        fprintf(stderr, "runtimed: %s must be one of %s, not '%s'\n", where, opt->choices, value);
        return -EINVAL;
    }
    case OPT_COUNT: {
        long v = strtol(value, &end, 10);
        if (*end || end == value || v < (long)opt->min || v > (long)opt->max) {
            fprintf(stderr, "runtimed: %s must be a whole number from %u to %u, not '%s'\n", where,
                    opt->min, opt->max, value);
            return -EINVAL;
        }
        *(unsigned *)at = (unsigned)v;
        return 0;
    }
    case OPT_PRICE: {
        double v = strtod(value, &end);
        if (*end || end == value || !(v >= 0) || v > 1e6) {
            fprintf(stderr, "runtimed: %s %s is not a number of dollars from 0 to 1000000\n", where,
                    value);
            return -EINVAL;
        }
        *(double *)at = v;
        return 0;
    }
    case OPT_FLAG:
        *(bool *)at = *value && strcmp(value, "0") != 0;
        return 0;
    case OPT_EACH:
        return opt->each(o, value, where);
    }
    return -EINVAL;
}

/* The defaults, then what the environment says. */
static int from_environment(struct options *o)
{
    for (size_t i = 0; i < ARRAY_LEN(opts); i++) {
        char env[64];
        env_name(opts[i].name, env, sizeof env);
        const char *v = getenv(env);
        if (opts[i].def && set_value(&opts[i], opts[i].def, env, o) < 0) return -EINVAL;
        if (v && *v && set_value(&opts[i], v, env, o) < 0) return -EINVAL;
    }
    return 0;
}

/* TLS wants both files; the API off loopback wants TLS (it carries the admin
 * key and every gateway token) unless the operator says something else
 * encrypts it. The files are read later, by the keeper for the server. */
static bool listen_is_loopback(const char *listen)
{
    char host[128];
    snprintf(host, sizeof host, "%s", listen);
    char *colon = strrchr(host, ':');
    if (colon) *colon = '\0';
    struct in_addr a;
    /* What does not parse is left to listen_tcp, which says what it wants. */
    return inet_pton(AF_INET, host, &a) != 1 || (ntohl(a.s_addr) >> 24) == 127;
}

static int check_listen(const struct options *o)
{
    if (!o->tls_cert[0] != !o->tls_key[0]) {
        fprintf(stderr, "runtimed: give --tls-cert and --tls-key together\n");
        return -EINVAL;
    }
    const char *files[] = {o->tls_cert, o->tls_key, o->upstream_ca},
               *names[] = {"--tls-cert", "--tls-key", "--upstream-ca"};
    for (int i = 0; i < 3; i++) {
        if (files[i][0] && access(files[i], R_OK) < 0) {
            fprintf(stderr, "runtimed: %s %s: %s\n", names[i], files[i], strerror(errno));
            return -EINVAL;
        }
    }
    if (o->tls_cert[0] || o->insecure_listen || listen_is_loopback(o->listen)) return 0;
    fprintf(stderr,
            "runtimed: --listen %s is not a loopback address and no TLS is configured: "
            "API keys and gateway tokens would cross the network in clear text. Give "
            "--tls-cert FILE and --tls-key FILE, or --insecure-listen if a TLS proxy in "
            "front encrypts the traffic, or listen on 127.0.0.1\n",
            o->listen);
    return -EINVAL;
}

int parse_options(int argc, char **argv, struct options *o)
{
    if (from_environment(o) < 0) return -EINVAL;
    struct option longs[ARRAY_LEN(opts) + 3];
    for (size_t i = 0; i < ARRAY_LEN(opts); i++)
        longs[i] = (struct option){opts[i].name,
                                   opts[i].kind == OPT_FLAG ? no_argument : required_argument, NULL,
                                   OPT_BASE + (int)i};
    longs[ARRAY_LEN(opts)] = (struct option){"help", no_argument, NULL, OPT_HELP};
    longs[ARRAY_LEN(opts) + 1] = (struct option){"version", no_argument, NULL, OPT_VERSION};
    longs[ARRAY_LEN(opts) + 2] = (struct option){0};
    int c;
    while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
        if (c == 'h' || c == OPT_HELP) {
            print_usage(stdout);
            exit(0);
        }
        if (c == OPT_VERSION) {
            printf("runtimed %s\n", runtime_version());
            exit(0);
        }
        size_t i = (size_t)(c - OPT_BASE);
        if (c < OPT_BASE || i >= ARRAY_LEN(opts)) { /* getopt said what it did not know */
            fprintf(stderr, "runtimed: see runtimed --help\n");
            return -EINVAL;
        }
        char where[64];
        snprintf(where, sizeof where, "--%s", opts[i].name);
        if (set_value(&opts[i], opts[i].kind == OPT_FLAG ? "1" : optarg, where, o) < 0)
            return -EINVAL;
    }
    if (optind < argc) {
        fprintf(stderr, "runtimed: unexpected argument %s; see runtimed --help\n", argv[optind]);
        return -EINVAL;
    }
    if (check_listen(o) < 0) return -EINVAL;
    if (!o->public_url[0])
        snprintf(o->public_url, sizeof o->public_url, "%s://%s", o->tls_cert[0] ? "https" : "http",
                 o->listen);
    return 0;
}
