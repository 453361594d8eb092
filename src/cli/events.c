/* `runtime sandbox events ID [--follow] [--json]`: the sandbox's event log, oldest first.
 * The API hands it out in pages after a seq number; --follow keeps asking for more. */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* How often --follow asks for new events once it has caught up. */
#define POLL_MS 250

enum { E_FOLLOW, E_JSON };

static const struct opt_spec specs[] = {
    {"follow", false, E_FOLLOW}, {"json", false, E_JSON}, {NULL, false, 0}};

struct events {
    const char *given; /* the ID as the user wrote it, for messages */
    char *sid;         /* the sandbox's id: a name could pass to a later sandbox */
    json_int_t after;  /* seq of the last event printed */
    bool follow, json;
};

/* Returns -1 after printing help. */
static int scan(struct args *a, struct events *e)
{
    int id;
    while ((id = args_next(a)) != ARG_END) {
        if (id == ARG_HELP) return usage_print(a->cmd, stdout), -1;
        if (id == ARG_BAD) return EXIT_USAGE;
        if (id == E_FOLLOW)
            e->follow = true;
        else if (id == E_JSON)
            e->json = true;
        else if (id == ARG_POS && !e->given && *a->val)
            e->given = a->val;
        else
            return cli_usage_error(a->cmd, "unexpected argument '%s'", a->argv[a->i - 1]);
    }
    if (!e->given) return cli_usage_error(a->cmd, "missing the sandbox ID (an id or name)");
    return 0;
}

static int resolve(struct cli *c, struct events *e)
{
    json_t *sb = NULL;
    int r = api_get_sandbox(c, e->given, &sb);
    if (r) return r;
    const char *id = json_string_value(json_object_get(sb, "id"));
    e->sid = id ? strdup(id) : NULL;
    json_decref(sb);
    if (!id) return cli_error("the daemon's answer has no sandbox id; is that runtimed?");
    return e->sid ? 0 : cli_error("out of memory");
}

/* The events after e->after: 0 and *page (an array), or EXIT_FAIL having printed why (nothing
 * when interrupted). While following, a 404 means the sandbox was deleted: *gone. */
static int fetch(struct cli *c, const struct events *e, json_t **page, bool *gone)
{
    char suffix[64];
    snprintf(suffix, sizeof suffix, "/events?after=%lld", (long long)e->after);
    char *path = api_sandbox_path(e->sid, suffix);
    struct http_req req = {.method = "GET",
                           .path = path,
                           .sink_fd = -1,
                           .interruptible = e->follow,
                           .quiet_interrupt = e->follow,
                           .accept_status = e->follow ? 404 : 0};
    struct http_resp resp = {0};
    *page = NULL;
    *gone = false;
    if (!path) return cli_error("out of memory");
    int r = api_call(c, &req, &resp);
    free(path);
    if (r) return r;
    if (resp.status == 404)
        *gone = true;
    else if (!(r = parse_json_body(&resp, page)) && !json_is_array(*page))
        r = cli_error("the daemon's answer is not a list of events; is that runtimed?");
    http_resp_free(&resp);
    return r;
}

/* Bare when it reads unambiguously on a line of key=value pairs, else as a JSON string. */
static bool bare(const char *s)
{
    if (!*s) return false;
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch <= ' ' || ch == 0x7f || ch == '"' || ch == '\\') return false;
    }
    return true;
}

static void print_value(json_t *v)
{
    const char *s = json_string_value(v);
    if (s && bare(s)) {
        fputs(s, stdout);
        return;
    }
    /* JSON escapes control characters but for DEL, which print_clean turns into a space. */
    char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    print_clean(stdout, text ? text : "?", 4000);
    free(text);
}

/* "TIME KIND key=value ...", the other members in the order the daemon sent them. */
static void print_line(json_t *ev)
{
    const char *k;
    json_t *v;
    print_value(json_object_get(ev, "time"));
    putchar(' ');
    print_value(json_object_get(ev, "kind"));
    json_object_foreach(ev, k, v)
    {
        if (strcmp(k, "seq") == 0 || strcmp(k, "time") == 0 || strcmp(k, "kind") == 0) continue;
        putchar(' ');
        print_clean(stdout, k, 200);
        putchar('=');
        print_value(v);
    }
    putchar('\n');
}

static int print_json_line(json_t *ev)
{
    char *text = json_dumps(ev, JSON_COMPACT);
    if (!text) return cli_error("out of memory");
    puts(text);
    free(text);
    return 0;
}

/* Flushed per page so that a pipe sees events as they come; a closed pipe ends the command. */
static int flush_out(void)
{
    if (fflush(stdout) == 0 && !ferror(stdout)) return 0;
    if (errno == EPIPE) return EXIT_FAIL;
    return cli_error("cannot write the events: %s", strerror(errno));
}

static int print_page(struct events *e, json_t *page)
{
    size_t i;
    json_t *ev;
    json_array_foreach(page, i, ev)
    {
        json_t *seq = json_object_get(ev, "seq");
        /* Increasing seq numbers are also what makes the paging loop end. */
        if (!json_is_integer(seq) || json_integer_value(seq) <= e->after)
            return flush_out(), cli_error("the daemon's answer has an event without a new seq "
                                          "number; is that runtimed?");
        e->after = json_integer_value(seq);
        if (e->json)
            print_json_line(ev);
        else
            print_line(ev);
    }
    return flush_out();
}

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL); /* a signal ends it early, and the loop then stops */
}

/* Pages through the log until a page comes back empty; following, waits for more instead. */
static int list(struct cli *c, struct events *e)
{
    while (!http_interrupted) {
        json_t *page = NULL;
        bool gone = false;
        size_t n = 0;
        int r = fetch(c, e, &page, &gone);
        if (r == 0 && page) n = json_array_size(page), r = print_page(e, page);
        json_decref(page);
        if (http_interrupted) break;
        if (gone && strcmp(e->given, e->sid) != 0)
            return cli_error("sandbox %s (%s) was deleted", e->given, e->sid);
        if (gone) return cli_error("sandbox %s was deleted", e->sid);
        if (r) return r;
        if (n == 0 && !e->follow) return EXIT_OK;
        if (n == 0) pause_ms(POLL_MS);
    }
    return EXIT_OK; /* SIGINT or SIGTERM: the way to stop following */
}

int cmd_sandbox_events(struct cli *c, int argc, char **argv)
{
    struct args a;
    struct events e = {0};
    args_init(&a, argc, argv, "sandbox events", specs);
    int r = scan(&a, &e);
    if (r == 0) r = resolve(c, &e);
    if (r == 0 && e.follow) http_catch_signals();
    if (r == 0) r = list(c, &e);
    free(e.sid);
    return r < 0 ? EXIT_OK : r;
}
