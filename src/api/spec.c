/* Validation of API input: a create body becomes a normalized spec with every
 * default filled in, or a 400 that names the field and what is allowed. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../policy/policy.h"
#include "api.h"

static bool valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63 || !isalnum((unsigned char)s[0])) return false;
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

/* An integer field with a default and an inclusive range. */
static int int_field(json_t *body, json_t *out, const char *key, long long def, long long lo,
                     long long hi, err_t *err)
{
    json_t *v = json_object_get(body, key);
    long long x = def;
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v))
            return err_set(err, -EINVAL, "%s must be a whole number from %lld to %lld", key, lo,
                           hi);
        x = json_integer_value(v);
    }
    if (x < lo || x > hi)
        return err_set(err, -EINVAL, "%s must be from %lld to %lld, not %lld", key, lo, hi, x);
    json_object_set_new(out, key, json_integer(x));
    return 0;
}

static int cpus_field(json_t *body, json_t *out, err_t *err)
{
    json_t *v = json_object_get(body, "cpus");
    double x = 1;
    if (v && !json_is_null(v)) {
        if (!json_is_number(v))
            return err_set(err, -EINVAL, "cpus must be a number, e.g. 0.5 or 2");
        x = json_number_value(v);
    }
    if (!(x >= 0.01 && x <= 1024))
        return err_set(err, -EINVAL, "cpus must be from 0.01 to 1024, not %g", x);
    json_object_set_new(out, "cpus",
                        json_is_integer(v) ? json_integer((json_int_t)x) : json_real(x));
    return 0;
}

/* A {string: string} object, keys checked by key_ok. */
static int string_map(json_t *body, json_t *out, const char *key, bool (*key_ok)(const char *),
                      const char *what, err_t *err)
{
    json_t *v = json_object_get(body, key), *m = json_object();
    if (v && !json_is_null(v) && !json_is_object(v)) {
        json_decref(m);
        return err_set(err, -EINVAL, "%s must be an object of strings", key);
    }
    const char *k;
    json_t *val;
    json_object_foreach(v, k, val)
    {
        if (!json_is_string(val) || !key_ok(k) || json_object_size(v) > 256) {
            json_decref(m);
            return err_set(err, -EINVAL,
                           "%s: \"%.64s\" is not %s with a string value (at most "
                           "256 entries)",
                           key, k, what);
        }
        json_object_set(m, k, val);
    }
    json_object_set_new(out, key, m);
    return 0;
}

static bool valid_label_key(const char *s)
{
    return valid_name(s) || (strchr(s, '/') && strlen(s) < 128);
}

json_t *api_network_spec(json_t *v, err_t *err)
{
    json_t *net = json_object(), *allow = json_array();
    json_object_set_new(net, "internet", json_true());
    json_object_set_new(net, "allow", allow);
    if (!v || json_is_null(v)) return net;
    int r = 0;
    json_t *inet = json_object_get(v, "internet"), *list = json_object_get(v, "allow");
    if (!json_is_object(v))
        r = err_set(err, -EINVAL, "network must be {internet, allow[]}");
    else if (inet && !json_is_boolean(inet))
        r = err_set(err, -EINVAL, "network.internet must be true or false");
    else if (list && !json_is_array(list))
        r = err_set(err, -EINVAL, "network.allow must be an array of host names");
    if (inet && r == 0) json_object_set(net, "internet", inet);
    size_t i;
    json_t *h;
    json_array_foreach(list, i, h)
    {
        if (r < 0) break;
        if (!json_is_string(h))
            r = err_set(err, -EINVAL, "network.allow[%zu] must be a string", i);
        else
            json_array_append(allow, h);
    }
    struct policy pol;
    if (r == 0 && (r = policy_build_json(json_is_true(json_object_get(net, "internet")), allow,
                                         &pol, err)) < 0)
        err_wrap(err, "network.allow");
    if (r == 0) policy_clear(&pol);
    if (r < 0) {
        json_decref(net);
        return NULL;
    }
    return net;
}

static int network_field(json_t *body, json_t *out, err_t *err)
{
    json_t *net = api_network_spec(json_object_get(body, "network"), err);
    if (!net) return -EINVAL;
    json_object_set_new(out, "network", net);
    return 0;
}

static const char *const known_fields[] = {"name",    "memoryMiB",        "cpus",
                                           "diskMiB", "idlePauseSeconds", "labels",
                                           "env",     "network",          "getOrCreate"};

json_t *api_sandbox_spec(json_t *body, err_t *err)
{
    if (!json_is_object(body)) {
        err_set(err, -EINVAL, "the body must be a JSON object");
        return NULL;
    }
    const char *k;
    json_t *v;
    json_object_foreach(body, k, v)
    {
        bool known = false;
        for (size_t i = 0; i < ARRAY_LEN(known_fields); i++)
            known |= strcmp(k, known_fields[i]) == 0;
        if (!known) {
            err_set(err, -EINVAL, "unknown field \"%.64s\"; see SPEC.md for the sandbox fields", k);
            return NULL;
        }
    }
    json_t *out = json_object();
    json_t *name = json_object_get(body, "name"), *goc = json_object_get(body, "getOrCreate");
    int r = 0;
    if (goc && !json_is_boolean(goc) && !json_is_null(goc))
        r = err_set(err, -EINVAL, "getOrCreate must be true or false");
    if (r == 0 && name && !json_is_null(name) &&
        (!json_is_string(name) || !valid_name(json_string_value(name))))
        r = err_set(err, -EINVAL,
                    "name must be 1-63 letters, digits, '_', '.' or '-', starting "
                    "with a letter or digit");
    json_object_set(out, "name", name && json_is_string(name) ? name : json_null());
    if (r == 0) r = int_field(body, out, "memoryMiB", 1024, 64, 1 << 20, err);
    if (r == 0) r = cpus_field(body, out, err);
    if (r == 0) r = int_field(body, out, "diskMiB", 2048, 64, 1 << 22, err);
    if (r == 0) r = int_field(body, out, "idlePauseSeconds", 300, 0, 1 << 30, err);
    if (r == 0) r = string_map(body, out, "labels", valid_label_key, "a label key", err);
    if (r == 0) r = string_map(body, out, "env", valid_env_key, "an environment name", err);
    if (r == 0) r = network_field(body, out, err);
    if (r < 0) {
        json_decref(out);
        return NULL;
    }
    return out;
}

/* Length of the valid UTF-8 sequence at s, or 0 (overlongs, surrogates, > U+10FFFF). */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    if (s[0] < 0x80) return 1;
    size_t len = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 ? 2 : 0;
    if (len == 0 || len > n || s[0] > 0xf4) return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if (len == 3 && ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0))) return 0;
    if (len == 4 && ((s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))) return 0;
    return len;
}

json_t *api_json_text(const char *bytes, size_t n)
{
    char *buf = malloc(n * 3 + 1);
    if (!buf) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t len = utf8_seq((const unsigned char *)bytes + i, n - i);
        if (len == 0) {
            memcpy(buf + o, "\xef\xbf\xbd", 3); /* U+FFFD */
            o += 3;
            i++;
            continue;
        }
        memcpy(buf + o, bytes + i, len);
        o += len;
        i += len;
    }
    json_t *s = json_stringn(buf, o);
    free(buf);
    return s;
}
