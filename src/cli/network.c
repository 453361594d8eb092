/* `runtime sandbox network ID [--internet on|off] [--allow HOST]... [--deny HOST]... [--clear]
 * [--json]`.
 * PUT .../network replaces the whole network object, so the command reads the sandbox's
 * policy first and sends it back with the change applied. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum { N_INTERNET, N_ALLOW, N_DENY, N_CLEAR, N_JSON };

static const struct opt_spec specs[] = {
    {"internet", true, N_INTERNET}, {"allow", true, N_ALLOW}, {"deny", true, N_DENY},
    {"clear", false, N_CLEAR},      {"json", false, N_JSON},  {NULL, false, 0},
};

struct change {
    const char *sid;
    int internet;  /* -1: unchanged, else 0 (off) or 1 (on) */
    json_t *allow; /* hosts to add, in the order given, without repeats */
    json_t *deny;  /* the same, never to reach */
    bool clear;    /* drop the lists before adding (no allow left: any public host) */
    bool json;
};

static bool changes_something(const struct change *ch)
{
    return ch->internet >= 0 || ch->clear || json_array_size(ch->allow) > 0 ||
           json_array_size(ch->deny) > 0;
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

/* --allow or --deny HOST onto list, once. */
static int add_host(const char *cmd, json_t *list, const char *option, const char *val)
{
    json_t *s = *val ? json_string(val) : NULL;
    if (!s)
        return cli_usage_error(cmd, "bad value '%s' for --%s: expected a host name", val, option);
    if (listed(list, val))
        json_decref(s);
    else
        json_array_append_new(list, s);
    return 0;
}

static int apply(struct args *a, struct change *ch, int id)
{
    switch (id) {
    case N_INTERNET:
        return set_internet(a->cmd, ch, a->val);
    case N_ALLOW:
        return add_host(a->cmd, ch->allow, "allow", a->val);
    case N_DENY:
        return add_host(a->cmd, ch->deny, "deny", a->val);
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

/* old's hosts (none when clear) and then added's, once each: a new list, NULL when out
 * of memory. */
static json_t *merged(json_t *old, json_t *added, bool clear)
{
    json_t *list = json_array(), *h;
    size_t i;
    if (!list || (!clear && json_is_array(old) && json_array_extend(list, old) < 0)) goto fail;
    json_array_foreach(added, i, h)
    {
        if (!listed(list, json_string_value(h)) && json_array_append(list, h) < 0) goto fail;
    }
    return list;
fail:
    json_decref(list);
    return NULL;
}

/* The sandbox's network object with the change applied; members this client does not know
 * are sent back as they came. No allow list (any public host) stays none unless hosts are
 * added, and --clear without hosts drops it: an empty list would be no host at all.
 * Internet off empties a list (the API reads internet off with hosts listed as those
 * hosts): turned on again, it reaches no host until some are allowed. NULL when out of
 * memory. */
static json_t *changed(json_t *net, const struct change *ch)
{
    json_t *out = json_is_object(net) ? json_deep_copy(net) : json_object();
    json_t *old = out ? json_object_get(out, "allow") : NULL;
    bool none = !json_is_array(old) || ch->clear; /* no list before the hosts added */
    json_t *allow = out ? merged(old, ch->allow, ch->clear) : NULL;
    json_t *deny = out ? merged(json_object_get(out, "deny"), ch->deny, ch->clear) : NULL;
    if (!allow || !deny) goto fail;
    if (ch->internet == 0 && json_array_size(allow) > 0) {
        json_array_clear(allow); /* off with a list would be that list: no host instead */
        none = false;
    }
    if (none && json_array_size(allow) == 0)
        json_object_del(out, "allow");
    else if (json_object_set(out, "allow", allow) < 0)
        goto fail;
    if (json_array_size(deny) == 0)
        json_object_del(out, "deny");
    else if (json_object_set(out, "deny", deny) < 0)
        goto fail;
    json_object_del(out, "openPorts"); /* an answer's, not a setting */
    if (ch->internet >= 0 && json_object_set_new(out, "internet", json_boolean(ch->internet)) < 0)
        goto fail;
    json_decref(allow);
    json_decref(deny);
    return out;
fail:
    json_decref(allow);
    json_decref(deny);
    json_decref(out);
    return NULL;
}

/* One line of hosts: "label: a, b". */
static size_t print_hosts(const char *label, json_t *list)
{
    json_t *h;
    size_t i, n = 0;
    printf("%s: ", label);
    json_array_foreach(list, i, h)
    {
        const char *s = json_string_value(h);
        if (!s) continue;
        fputs(n++ ? ", " : "", stdout);
        print_clean(stdout, s, 1000);
    }
    return n;
}

/* "internet: on\nallow: a, b\ndeny: c"; no list lets any public host through, an empty
 * one none. */
static int show_policy(json_t *net)
{
    json_t *internet = json_object_get(net, "internet");
    if (!json_is_object(net) || !json_is_boolean(internet))
        return cli_error("the daemon's answer has no network policy; is that runtimed?");
    printf("internet: %s\n", json_is_true(internet) ? "on" : "off (all connections refused)");
    if (print_hosts("allow", json_object_get(net, "allow")))
        putchar('\n');
    else if (json_is_array(json_object_get(net, "allow")))
        puts("(no host: the list is empty)");
    else
        puts(json_is_true(internet) ? "(any public host)"
                                    : "(any public host once internet is on)");
    if (json_array_size(json_object_get(net, "deny")) &&
        print_hosts("deny", json_object_get(net, "deny")))
        putchar('\n');
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
    struct change ch = {.internet = -1, .allow = json_array(), .deny = json_array()};
    json_t *sb = NULL;
    args_init(&a, argc, argv, "sandbox network", specs);
    int r = ch.allow && ch.deny ? scan(&a, &ch) : cli_error("out of memory");
    if (r == 0) r = api_get_sandbox(c, ch.sid, &sb);
    if (r == 0) r = changes_something(&ch) ? change(c, sb, &ch) : show_current(sb, ch.json);
    json_decref(sb);
    json_decref(ch.allow);
    json_decref(ch.deny);
    return r < 0 ? EXIT_OK : r;
}
