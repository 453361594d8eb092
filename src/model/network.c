/* A sandbox's network settings: internet on or off, its allow and deny lists, and
 * the host:port pairs it may connect to. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../policy/policy.h"
#include "model.h"

static void hosts_clear(struct model_hosts *h)
{
    for (size_t i = 0; i < h->n; i++)
        free(h->v[i]);
    free(h->v);
    *h = (struct model_hosts){0};
}

void model_network_clear(struct model_network *n)
{
    hosts_clear(&n->allow);
    hosts_clear(&n->deny);
    hosts_clear(&n->connect);
    *n = (struct model_network){.internet = true};
}

int model_hosts_add(struct model_hosts *h, const char *host, err_t *err)
{
    char **grown = realloc(h->v, (h->n + 1) * sizeof *grown);
    if (!grown) return err_set(err, -ENOMEM, "out of memory");
    h->v = grown;
    if (!(h->v[h->n] = strdup(host))) return err_set(err, -ENOMEM, "out of memory");
    h->n++;
    return 0;
}

static int hosts_copy(struct model_hosts *dst, const struct model_hosts *src, err_t *err)
{
    for (size_t i = 0; i < src->n; i++) {
        int r = model_hosts_add(dst, src->v[i], err);
        if (r < 0) return r;
    }
    return 0;
}

/* The allow list and the connect pairs: what a rule may match. */
static int allowed_rules(const struct model_network *n, struct model_hosts *out, err_t *err)
{
    *out = (struct model_hosts){0};
    int r = hosts_copy(out, &n->allow, err);
    if (r == 0) r = hosts_copy(out, &n->connect, err);
    if (r < 0) hosts_clear(out);
    return r;
}

int model_network_policy(const struct model_network *n, struct policy *out, err_t *err)
{
    struct model_hosts all;
    int r = allowed_rules(n, &all, err);
    if (r < 0) return r;
    r = policy_build(n->internet, n->listed || n->connect.n > 0, (const char *const *)all.v, all.n,
                     out, err);
    hosts_clear(&all);
    if (r == 0) r = policy_deny(out, (const char *const *)n->deny.v, n->deny.n, err);
    if (r < 0) policy_clear(out);
    return r;
}

/* The entries must build a policy: the egress applies nothing else. */
static int check_rules(const struct model_network *n, err_t *err)
{
    struct policy pol;
    int r = model_network_policy(n, &pol, err);
    if (r < 0) return r;
    policy_clear(&pol);
    return 0;
}

/* A connect entry names its port: "db.example.com:5432". */
static int check_connect(const struct model_hosts *connect, err_t *err)
{
    if (connect->n > MODEL_CONNECT_MAX)
        return err_set(err, -EINVAL, "network.connect has %zu entries; at most %d", connect->n,
                       MODEL_CONNECT_MAX);
    for (size_t i = 0; i < connect->n; i++) {
        struct policy_rule rule;
        if (policy_parse_rule(connect->v[i], &rule, NULL) == 0 && !rule.port)
            return err_set(err, -EINVAL,
                           "network.connect[%zu] \"%.80s\" must name its port, as host:port", i,
                           connect->v[i]);
    }
    return 0;
}

/* field: an array of strings into out. */
static int parse_hosts(json_t *list, const char *field, struct model_hosts *out, err_t *err)
{
    if (!list || json_is_null(list)) return 0;
    if (!json_is_array(list))
        return err_set(err, -EINVAL, "network.%s must be an array of host names", field);
    size_t i;
    json_t *h;
    json_array_foreach(list, i, h)
    {
        if (!json_is_string(h))
            return err_set(err, -EINVAL, "network.%s[%zu] must be a string", field, i);
        int r = model_hosts_add(out, json_string_value(h), err);
        if (r < 0) return r;
    }
    return 0;
}

static int parse_lists(json_t *v, struct model_network *out, err_t *err)
{
    json_t *allow = json_object_get(v, "allow");
    out->listed = allow && !json_is_null(allow);
    int r = parse_hosts(allow, "allow", &out->allow, err);
    if (r == 0) r = parse_hosts(json_object_get(v, "deny"), "deny", &out->deny, err);
    if (r == 0) r = parse_hosts(json_object_get(v, "connect"), "connect", &out->connect, err);
    if (r == 0) r = check_connect(&out->connect, err);
    if (r == 0) r = check_rules(out, err);
    return r;
}

int model_network_parse(json_t *v, struct model_network *out, err_t *err)
{
    *out = (struct model_network){.internet = true};
    if (!v || json_is_null(v)) return 0;
    static const char *const known[] = {"internet", "allow", "deny", "connect", NULL};
    if (!json_is_object(v))
        return err_set(err, -EINVAL, "network must be {internet, allow?[], deny?[], connect?[]}");
    int r = json_known_fields(v, "network", known, err);
    if (r < 0) return r;
    json_t *inet = json_object_get(v, "internet");
    if (inet && !json_is_boolean(inet))
        return err_set(err, -EINVAL, "network.internet must be true or false");
    out->internet = !inet || json_is_true(inet);
    r = parse_lists(v, out, err);
    if (r < 0) {
        model_network_clear(out);
        return r;
    }
    return 0;
}

void model_network_as_cloud_reads(struct model_network *n)
{
    if (!n->internet && n->allow.n > 0) n->internet = true;
}

static json_t *hosts_json(const struct model_hosts *h)
{
    json_t *list = json_array();
    for (size_t i = 0; i < h->n; i++)
        json_array_append_new(list, json_string(h->v[i]));
    return list;
}

json_t *model_network_json(const struct model_network *n)
{
    json_t *v = json_pack("{s:b}", "internet", n->internet);
    if (n->listed) json_object_set_new(v, "allow", hosts_json(&n->allow)); /* else any host */
    if (n->deny.n) json_object_set_new(v, "deny", hosts_json(&n->deny));
    if (n->connect.n) json_object_set_new(v, "connect", hosts_json(&n->connect));
    return v;
}

int model_network_copy(struct model_network *dst, const struct model_network *src, err_t *err)
{
    *dst = (struct model_network){.internet = src->internet, .listed = src->listed};
    int r = hosts_copy(&dst->allow, &src->allow, err);
    if (r == 0) r = hosts_copy(&dst->deny, &src->deny, err);
    if (r == 0) r = hosts_copy(&dst->connect, &src->connect, err);
    if (r < 0) model_network_clear(dst);
    return r;
}

int model_network_add(struct model_network *n, const char *host, err_t *err)
{
    n->listed = true;
    for (size_t i = 0; i < n->allow.n; i++)
        if (strcmp(n->allow.v[i], host) == 0) return 0;
    return model_hosts_add(&n->allow, host, err);
}
