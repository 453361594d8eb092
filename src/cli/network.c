/* `runtime sandbox network ID [--internet on|off] [--allow HOST]... [--clear] [--json]`.
 * PUT .../network replaces the whole network object, so the command reads the sandbox's
 * policy first and sends it back with the change applied. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum { N_INTERNET, N_ALLOW, N_CLEAR, N_JSON };

static const struct opt_spec specs[] = {
    {"internet", true, N_INTERNET}, {"allow", true, N_ALLOW}, {"clear", false, N_CLEAR},
    {"json", false, N_JSON},        {NULL, false, 0},
};

struct change {
    const char *sid;
    int internet;  /* -1: unchanged, else 0 (off) or 1 (on) */
    json_t *allow; /* hosts to add, in the order given, without repeats */
    bool clear;    /* drop the allow list before adding (none left: any public host) */
    bool json;
};

static bool changes_something(const struct change *ch)
{
    return ch->internet >= 0 || ch->clear || json_array_size(ch->allow) > 0;
}

/* Host names are case-insensitive: "API.github.com" is already on a list with api.github.com. */
static bool listed(json_t *list, const char *host)
{
    size_t i;
    json_t *h;
    json_array_foreach(list, i, h)
    {
        const char *s = json_string_value(h);
        if (s && strcasecmp(s, host) == 0) return true;
    }
    return false;
}

static int set_internet(const char *cmd, struct change *ch, const char *val)
{
    if (strcmp(val, "on") == 0)
        ch->internet = 1;
    else if (strcmp(val, "off") == 0)
        ch->internet = 0;
    else
        return cli_usage_error(cmd, "bad value '%s' for --internet: expected on or off", val);
    return 0;
}

static int add_allow(const char *cmd, struct change *ch, const char *val)
{
    json_t *s = *val ? json_string(val) : NULL;
    if (!s) return cli_usage_error(cmd, "bad value '%s' for --allow: expected a host name", val);
    if (listed(ch->allow, val))
        json_decref(s);
    else
        json_array_append_new(ch->allow, s);
    return 0;
}

static int apply(struct args *a, struct change *ch, int id)
{
    switch (id) {
    case N_INTERNET:
        return set_internet(a->cmd, ch, a->val);
    case N_ALLOW:
        return add_allow(a->cmd, ch, a->val);
    case N_CLEAR:
        return ch->clear = true, 0;
    case N_JSON:
        return ch->json = true, 0;
    case ARG_POS:
        if (ch->sid || !*a->val) break;
        ch->sid = a->val;
        return 0;
    }
    return cli_usage_error(a->cmd, "unexpected argument '%s'", a->argv[a->i - 1]);
}

/* Returns -1 after printing help. */
static int scan(struct args *a, struct change *ch)
{
    int id;
    while ((id = args_next(a)) != ARG_END) {
        if (id == ARG_HELP) return usage_print(a->cmd, stdout), -1;
        if (id == ARG_BAD || apply(a, ch, id)) return EXIT_USAGE;
    }
    if (!ch->sid) return cli_usage_error(a->cmd, "missing the sandbox ID (an id or name)");
    return 0;
}

/* The sandbox's network object with the change applied; members this client does not know
 * are sent back as they came. No allow list (any public host) stays none unless hosts are
 * added, and --clear without hosts drops it: an empty list would be no host at all. NULL
 * when out of memory. */
static json_t *changed(json_t *net, const struct change *ch)
{
    json_t *out = json_is_object(net) ? json_deep_copy(net) : json_object();
    json_t *old = json_object_get(out, "allow"), *allow = json_array(), *h;
    size_t i;
    if (!out || !allow) goto fail;
    bool keep = !ch->clear && json_is_array(old);
    if (keep && json_array_extend(allow, old) < 0) goto fail;
    json_array_foreach(ch->allow, i, h)
    {
        if (!listed(allow, json_string_value(h)) && json_array_append(allow, h) < 0) goto fail;
    }
    if (!keep && json_array_size(allow) == 0) {
        json_decref(allow);
        json_object_del(out, "allow");
    } else if (json_object_set_new(out, "allow", allow) < 0)
        goto fail_out;
    if (ch->internet >= 0 && json_object_set_new(out, "internet", json_boolean(ch->internet)) < 0)
        goto fail_out;
    return out;
fail:
    json_decref(allow);
fail_out:
    json_decref(out);
    return NULL;
}

/* "internet: on\nallow: a, b"; no list lets any public host through, an empty one none. */
static int show_policy(json_t *net)
{
    json_t *internet = json_object_get(net, "internet"), *h;
    size_t i, n = 0;
    if (!json_is_object(net) || !json_is_boolean(internet))
        return cli_error("the daemon's answer has no network policy; is that runtimed?");
    printf("internet: %s\n", json_is_true(internet) ? "on" : "off (all connections refused)");
    fputs("allow: ", stdout);
    json_array_foreach(json_object_get(net, "allow"), i, h)
    {
        const char *s = json_string_value(h);
        if (!s) continue;
        fputs(n++ ? ", " : "", stdout);
        print_clean(stdout, s, 1000);
    }
    if (n)
        putchar('\n');
    else if (json_is_array(json_object_get(net, "allow")))
        puts("(no host: the list is empty)");
    else
        puts(json_is_true(internet) ? "(any public host)"
                                    : "(any public host once internet is on)");
    return 0;
}

static int show_current(json_t *sb, bool json)
{
    json_t *net = json_object_get(sb, "network");
    if (!json || !json_is_object(net)) return show_policy(net);
    char *text = json_dumps(net, JSON_COMPACT);
    if (!text) return cli_error("out of memory");
    puts(text);
    free(text);
    return 0;
}

static int put(struct cli *c, const char *path, const char *text, bool json)
{
    struct http_req req = {.method = "PUT",
                           .path = path,
                           .content_type = "application/json",
                           .body = text,
                           .body_len = strlen(text),
                           .sink_fd = -1};
    struct http_resp resp = {0};
    json_t *net = NULL;
    int r = api_call(c, &req, &resp);
    if (r) return r;
    if (json)
        print_raw_json(&resp);
    else if (!(r = parse_json_body(&resp, &net)))
        r = show_policy(net);
    json_decref(net);
    http_resp_free(&resp);
    return r;
}

/* PUTs to the id rather than the name given, so that it reaches the sandbox just read. */
static int change(struct cli *c, json_t *sb, const struct change *ch)
{
    const char *id = json_string_value(json_object_get(sb, "id"));
    if (!id) return cli_error("the daemon's answer has no sandbox id; is that runtimed?");
    json_t *net = changed(json_object_get(sb, "network"), ch);
    char *text = net ? json_dumps(net, JSON_COMPACT) : NULL;
    char *path = api_sandbox_path(id, "/network");
    int r = text && path ? put(c, path, text, ch->json) : cli_error("out of memory");
    free(path);
    free(text);
    json_decref(net);
    return r;
}

int cmd_sandbox_network(struct cli *c, int argc, char **argv)
{
    struct args a;
    struct change ch = {.internet = -1, .allow = json_array()};
    json_t *sb = NULL;
    args_init(&a, argc, argv, "sandbox network", specs);
    int r = ch.allow ? scan(&a, &ch) : cli_error("out of memory");
    if (r == 0) r = api_get_sandbox(c, ch.sid, &sb);
    if (r == 0) r = changes_something(&ch) ? change(c, sb, &ch) : show_current(sb, ch.json);
    json_decref(sb);
    json_decref(ch.allow);
    return r < 0 ? EXIT_OK : r;
}
