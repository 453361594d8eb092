/* A sandbox's network settings: internet on or off and its allow list. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../policy/policy.h"
#include "model.h"

void model_network_clear(struct model_network *n)
{
    for (size_t i = 0; i < n->n_allow; i++)
        free(n->allow[i]);
    free(n->allow);
    *n = (struct model_network){.internet = true};
}

/* Appends a copy of host. */
static int add_allow(struct model_network *n, const char *host, err_t *err)
{
    char **grown = realloc(n->allow, (n->n_allow + 1) * sizeof *grown);
    if (!grown) return err_set(err, -ENOMEM, "out of memory");
    n->allow = grown;
    if (!(n->allow[n->n_allow] = strdup(host))) return err_set(err, -ENOMEM, "out of memory");
    n->n_allow++;
    return 0;
}

int model_network_policy(const struct model_network *n, struct policy *out, err_t *err)
{
    return policy_build(n->internet, n->listed, (const char *const *)n->allow, n->n_allow, out,
                        err);
}

/* The entries must build a policy: the egress applies nothing else. */
static int check_rules(const struct model_network *n, err_t *err)
{
    struct policy pol;
    int r = model_network_policy(n, &pol, err);
    if (r < 0) return err_wrap(err, "network.allow");
    policy_clear(&pol);
    return 0;
}

static int parse_allow(json_t *list, struct model_network *out, err_t *err)
{
    size_t i;
    json_t *h;
    json_array_foreach(list, i, h)
    {
        if (!json_is_string(h))
            return err_set(err, -EINVAL, "network.allow[%zu] must be a string", i);
        int r = add_allow(out, json_string_value(h), err);
        if (r < 0) return r;
    }
    return check_rules(out, err);
}

int model_network_parse(json_t *v, struct model_network *out, err_t *err)
{
    *out = (struct model_network){.internet = true};
    if (!v || json_is_null(v)) return 0;
    static const char *const known[] = {"internet", "allow", NULL};
    json_t *inet = json_object_get(v, "internet"), *list = json_object_get(v, "allow");
    if (json_is_null(list)) list = NULL; /* as if absent: no list */
    if (!json_is_object(v)) return err_set(err, -EINVAL, "network must be {internet, allow?[]}");
    int r = json_known_fields(v, "network", known, err);
    if (r < 0) return r;
    if (inet && !json_is_boolean(inet))
        return err_set(err, -EINVAL, "network.internet must be true or false");
    if (list && !json_is_array(list))
        return err_set(err, -EINVAL, "network.allow must be an array of host names");
    out->internet = !inet || json_is_true(inet);
    out->listed = list != NULL;
    r = parse_allow(list, out, err);
    if (r < 0) model_network_clear(out);
    return r;
}

json_t *model_network_json(const struct model_network *n)
{
    json_t *v = json_pack("{s:b}", "internet", n->internet);
    if (!n->listed) return v; /* no list: any public host */
    json_t *allow = json_array();
    for (size_t i = 0; i < n->n_allow; i++)
        json_array_append_new(allow, json_string(n->allow[i]));
    json_object_set_new(v, "allow", allow);
    return v;
}

int model_network_copy(struct model_network *dst, const struct model_network *src, err_t *err)
{
    *dst = (struct model_network){.internet = src->internet, .listed = src->listed};
    for (size_t i = 0; i < src->n_allow; i++) {
        int r = add_allow(dst, src->allow[i], err);
        if (r < 0) {
            model_network_clear(dst);
            return r;
        }
    }
    return 0;
}

int model_network_add(struct model_network *n, const char *host, err_t *err)
{
    n->listed = true;
    for (size_t i = 0; i < n->n_allow; i++)
        if (strcmp(n->allow[i], host) == 0) return 0;
    return add_allow(n, host, err);
}
