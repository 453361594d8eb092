/* A sandbox's settings: a create body (or a stored row) becomes the struct with
 * every default filled in, or a -EINVAL that names the field and what is allowed. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

static bool valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= MODEL_NAME_MAX || !isalnum((unsigned char)s[0])) return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("_.-", s[i])) return false;
    return true;
}

static bool valid_env_key(const char *s)
{
    if (!*s || isdigit((unsigned char)*s) || strlen(s) > 255) return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_') return false;
    return true;
}

static bool valid_label_key(const char *s)
{
    return valid_name(s) || (strchr(s, '/') && strlen(s) < 128);
}

const char *model_map_get(const struct model_map *m, const char *key)
{
    for (size_t i = 0; i < m->n; i++)
        if (strcmp(m->v[i].key, key) == 0) return m->v[i].value;
    return NULL;
}

json_t *model_map_json(const struct model_map *m)
{
    json_t *o = json_object();
    for (size_t i = 0; i < m->n; i++)
        json_object_set_new(o, m->v[i].key, json_string(m->v[i].value));
    return o;
}

void model_map_clear(struct model_map *m)
{
    for (size_t i = 0; i < m->n; i++) {
        free(m->v[i].key);
        free(m->v[i].value);
    }
    free(m->v);
    *m = (struct model_map){0};
}

int model_map_parse(json_t *v, const char *field, bool (*key_ok)(const char *), const char *what,
                    struct model_map *out, err_t *err)
{
    if (!v || json_is_null(v)) return 0;
    if (!json_is_object(v)) return err_set(err, -EINVAL, "%s must be an object of strings", field);
    if (json_object_size(v) > MODEL_MAP_MAX)
        return err_set(err, -EINVAL, "%s has %zu entries; at most %d are allowed", field,
                       json_object_size(v), MODEL_MAP_MAX);
    if (!(out->v = calloc(json_object_size(v) + 1, sizeof *out->v)))
        return err_set(err, -ENOMEM, "out of memory");
    const char *k;
    json_t *val;
    json_object_foreach(v, k, val)
    {
        if (!json_is_string(val) || !key_ok(k))
            return err_set(err, -EINVAL, "%s: \"%.64s\" is not %s with a string value", field, k,
                           what);
        struct model_pair *p = &out->v[out->n++];
        if (!(p->key = strdup(k)) || !(p->value = strdup(json_string_value(val))))
            return err_set(err, -ENOMEM, "out of memory");
    }
    return 0;
}

/* An integer field with a default and an inclusive range. */
static int parse_uint(json_t *body, const char *field, long long def, long long lo, long long hi,
                      uint32_t *out, err_t *err)
{
    json_t *v = json_object_get(body, field);
    long long x = def;
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v))
            return err_set(err, -EINVAL, "%s must be a whole number from %lld to %lld", field, lo,
                           hi);
        x = json_integer_value(v);
    }
    if (x < lo || x > hi)
        return err_set(err, -EINVAL, "%s must be from %lld to %lld, not %lld", field, lo, hi, x);
    *out = (uint32_t)x;
    return 0;
}

/* cpus, or Runtime Cloud's vcpu: the same number (both given, they must agree). */
static int parse_cpus(json_t *body, double *out, err_t *err)
{
    json_t *v = json_object_get(body, "cpus"), *vcpu = json_object_get(body, "vcpu");
    if (json_is_null(v)) v = NULL;
    if (json_is_null(vcpu)) vcpu = NULL;
    if (v && vcpu &&
        !(json_is_number(v) && json_is_number(vcpu) &&
          json_number_value(v) == json_number_value(vcpu)))
        return err_set(err, -EINVAL, "cpus and vcpu are the same setting: give one");
    const char *field = v ? "cpus" : "vcpu";
    if (!v) v = vcpu;
    double x = 1;
    if (v) {
        if (!json_is_number(v))
            return err_set(err, -EINVAL, "%s must be a number, e.g. 0.5 or 2", field);
        x = json_number_value(v);
    }
    if (!(x >= 0.01 && x <= 1024))
        return err_set(err, -EINVAL, "%s must be from 0.01 to 1024, not %g", field, x);
    *out = x;
    return 0;
}

static int parse_name(json_t *body, char out[MODEL_NAME_MAX], err_t *err)
{
    json_t *name = json_object_get(body, "name");
    if (!name || json_is_null(name)) return 0;
    if (!json_is_string(name) || !valid_name(json_string_value(name)) ||
        strlen(json_string_value(name)) != json_string_length(name))
        return err_set(err, -EINVAL,
                       "name must be 1-63 letters, digits, '_', '.' or '-', starting with a "
                       "letter or digit");
    return str_copy(out, MODEL_NAME_MAX, json_string_value(name));
}

const char *const model_sandbox_fields[] = {
    "name",
    "memoryMiB",
    "cpus",
    "vcpu",
    "diskMiB",
    "idlePauseSeconds",
    "timeoutSeconds",
    "hibernateAfterSeconds",
    "onLeaseEnd",
    "labels",
    "env",
    "network",
    "isolation",
    "getOrCreate", /* a create's, read by
                      the API */
    NULL,
};

static const char *const lease_end_names[] = {"pause", "stop", "delete"};

const char *model_lease_end_name(enum model_lease_end e)
{
    return lease_end_names[e];
}

/* timeoutSeconds (null or absent: no lease) and onLeaseEnd (pause when absent). */
static int parse_lease(json_t *body, struct model_sandbox *s, err_t *err)
{
    json_t *t = json_object_get(body, "timeoutSeconds"), *e = json_object_get(body, "onLeaseEnd");
    if (t && !json_is_null(t)) {
        json_int_t v = json_integer_value(t);
        if (!json_is_integer(t) || v < MODEL_LEASE_MIN_S || v > MODEL_LEASE_MAX_S)
            return err_set(err, -EINVAL,
                           "timeoutSeconds must be %d to %d seconds, or null for no lease",
                           MODEL_LEASE_MIN_S, MODEL_LEASE_MAX_S);
        s->lease_s = (uint32_t)v;
    }
    if (!e || json_is_null(e)) return 0;
    for (size_t i = 0; i < ARRAY_LEN(lease_end_names); i++)
        if (json_is_string(e) && strcmp(json_string_value(e), lease_end_names[i]) == 0) {
            s->lease_end = (enum model_lease_end)i;
            return 0;
        }
    return err_set(err, -EINVAL, "onLeaseEnd must be pause, stop or delete");
}

/* The names of enum model_driver, DEFAULT's none. */
static const char *const driver_names[] = {NULL, "ns", "gvisor"};

const char *model_driver_name(enum model_driver d)
{
    return driver_names[d];
}

/* isolation: a driver's name; absent or null leaves it DEFAULT, for the API to fill in. */
static int parse_isolation(json_t *body, enum model_driver *out, err_t *err)
{
    json_t *v = json_object_get(body, "isolation");
    if (!v || json_is_null(v)) return 0;
    for (size_t i = MODEL_DRIVER_NS; i < ARRAY_LEN(driver_names); i++)
        if (json_is_string(v) && json_string_length(v) == strlen(driver_names[i]) &&
            strcmp(json_string_value(v), driver_names[i]) == 0) {
            *out = (enum model_driver)i;
            return 0;
        }
    return err_set(err, -EINVAL, "isolation must be ns or gvisor, or null");
}

static int check_fields(json_t *body, err_t *err)
{
    if (!json_is_object(body)) return err_set(err, -EINVAL, "the body must be a JSON object");
    return json_known_fields(body, NULL, model_sandbox_fields, err);
}

/* One step's failure joins what is wrong so far: a body is answered with every wrong
 * field at once, as Runtime Cloud does. */
static void gather(int r, const err_t *step, int *first, err_t *err)
{
    if (r >= 0) return;
    size_t n = *first ? strlen(err->msg) : 0;
    if (!*first) *err = (err_t){.code = r};
    snprintf(err->msg + n, sizeof err->msg - n, "%s%s", n ? "; " : "", step->msg);
    if (!*first) *first = r;
}

int model_sandbox_parse(json_t *body, struct model_sandbox *s, err_t *err)
{
    *s = (struct model_sandbox){.network.internet = true};
    err_t e = {0};
    int r = check_fields(body, err);
    if (r < 0 || !json_is_object(body)) return r;
    gather(parse_name(body, s->name, &e), &e, &r, err);
    gather(parse_uint(body, "memoryMiB", 1024, 64, 1 << 20, &s->memory_mib, &e), &e, &r, err);
    gather(parse_cpus(body, &s->cpus, &e), &e, &r, err);
    gather(parse_uint(body, "diskMiB", 2048, 64, 1 << 22, &s->disk_mib, &e), &e, &r, err);
    gather(parse_uint(body, "idlePauseSeconds", 300, 0, 1 << 30, &s->idle_pause_s, &e), &e, &r,
           err);
    gather(parse_uint(body, "hibernateAfterSeconds", MODEL_HIBERNATE_AFTER_DEFAULT, 0, 1 << 30,
                      &s->hibernate_after_s, &e),
           &e, &r, err);
    gather(parse_lease(body, s, &e), &e, &r, err);
    gather(model_map_parse(json_object_get(body, "labels"), "labels", valid_label_key,
                           "a label key", &s->labels, &e),
           &e, &r, err);
    gather(model_map_parse(json_object_get(body, "env"), "env", valid_env_key,
                           "an environment name", &s->env, &e),
           &e, &r, err);
    gather(model_network_parse(json_object_get(body, "network"), &s->network, &e), &e, &r, err);
    gather(parse_isolation(body, &s->isolation, &e), &e, &r, err);
    if (r < 0) model_sandbox_clear(s);
    return r;
}

json_t *model_sandbox_json(const struct model_sandbox *s)
{
    /* Whole numbers of CPUs read back as integers, as they are usually given. */
    json_t *cpus =
        s->cpus == floor(s->cpus) ? json_integer((json_int_t)s->cpus) : json_real(s->cpus);
    const char *isolation = model_driver_name(s->isolation);
    return json_pack("{s:o,s:I,s:o,s:I,s:I,s:o,s:s,s:o,s:o,s:o,s:o,s:I}", "name",
                     s->name[0] ? json_string(s->name) : json_null(), "memoryMiB",
                     (json_int_t)s->memory_mib, "cpus", cpus, "diskMiB", (json_int_t)s->disk_mib,
                     "idlePauseSeconds", (json_int_t)s->idle_pause_s, "timeoutSeconds",
                     s->lease_s ? json_integer(s->lease_s) : json_null(), "onLeaseEnd",
                     model_lease_end_name(s->lease_end), "labels", model_map_json(&s->labels),
                     "env", model_map_json(&s->env), "network", model_network_json(&s->network),
                     "isolation", isolation ? json_string(isolation) : json_null(),
                     "hibernateAfterSeconds", (json_int_t)s->hibernate_after_s);
}

void model_sandbox_clear(struct model_sandbox *s)
{
    model_map_clear(&s->labels);
    model_map_clear(&s->env);
    model_network_clear(&s->network);
    s->name[0] = '\0';
}

int model_sandbox_copy(struct model_sandbox *dst, const struct model_sandbox *src, err_t *err)
{
    json_t *v = model_sandbox_json(src); /* the one form both ways already agree on */
    int r = v ? model_sandbox_parse(v, dst, err) : err_set(err, -ENOMEM, "out of memory");
    json_decref(v);
    return r;
}
