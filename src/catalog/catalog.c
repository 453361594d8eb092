#include "catalog.h"

#include <errno.h>
#include <string.h>

extern const char catalog_json_text[];
extern const char catalog_tools_text[];

json_t *catalog_reviewed_tools(const char *id)
{
    /* Parsed at each call: a person's review page, not a hot path; nothing kept. */
    json_t *all = json_loads(catalog_tools_text, 0, NULL);
    json_t *tools = json_incref(json_object_get(all, id));
    json_decref(all);
    return json_is_array(tools) ? tools : (json_decref(tools), NULL);
}

static bool strings(json_t *arr, bool nonempty)
{
    size_t i;
    json_t *v;
    if (!json_is_array(arr) || (nonempty && json_array_size(arr) == 0)) return false;
    json_array_foreach(arr, i, v) if (!json_is_string(v)) return false;
    return true;
}

static int check_entry(json_t *e, size_t i, err_t *err)
{
    const char *id = json_string_value(json_object_get(e, "id"));
    const char *rt = json_string_value(json_object_get(e, "runtime"));
    if (!id || !json_is_string(json_object_get(e, "package")) ||
        !json_is_string(json_object_get(e, "version")) || !rt ||
        (strcmp(rt, "node") != 0 && strcmp(rt, "python") != 0) ||
        !strings(json_object_get(e, "command"), true) ||
        !strings(json_object_get(e, "egress"), false) ||
        !json_is_array(json_object_get(e, "settings")))
        return err_set(err, -EINVAL,
                       "catalog entry %zu (%s) lacks id, package, version, "
                       "runtime, command, egress or settings; fix catalog/servers.json",
                       i, id ? id : "no id");
    size_t j;
    json_t *s;
    json_array_foreach(json_object_get(e, "settings"), j, s) if (
        !json_is_string(json_object_get(
            s, "env"))) return err_set(err, -EINVAL,
                                       "catalog entry %s: setting %zu has no env name", id, j);
    json_t *env = json_object_get(e, "env");
    const char *k;
    json_t *v;
    if (env && !json_is_object(env))
        return err_set(err, -EINVAL, "catalog entry %s: env must be an object", id);
    json_object_foreach(env, k, v) if (!json_is_string(v)) return err_set(
        err, -EINVAL, "catalog entry %s: env %s must be a string", id, k);
    /* A Python server is installed from its lock only (pip --require-hashes). */
    if (strcmp(rt, "python") == 0 && !strings(json_object_get(e, "lock"), true))
        return err_set(err, -EINVAL,
                       "catalog entry %s: a Python server needs its \"lock\" "
                       "(run catalog/lock-python.py --write)",
                       id);
    return 0;
}

int catalog_load(json_t **out, err_t *err)
{
    json_error_t jerr;
    json_t *cat = json_loads(catalog_json_text, JSON_REJECT_DUPLICATES, &jerr);
    if (!cat || !json_is_array(cat)) {
        json_decref(cat);
        return err_set(err, -EINVAL, "the built-in catalog is not a JSON array: %s (line %d)",
                       jerr.text, jerr.line);
    }
    size_t i;
    json_t *e;
    json_array_foreach(cat, i, e)
    {
        int r = check_entry(e, i, err);
        if (r < 0) {
            json_decref(cat);
            return r;
        }
    }
    *out = cat;
    return 0;
}

json_t *catalog_find(json_t *catalog, const char *id)
{
    size_t i;
    json_t *e;
    json_array_foreach(catalog, i, e)
    {
        const char *eid = json_string_value(json_object_get(e, "id"));
        if (eid && strcmp(eid, id) == 0) return e;
    }
    return NULL;
}

/* Where a person reads about the package at this version. */
static json_t *source_url(json_t *e)
{
    const char *pkg = json_string_value(json_object_get(e, "package"));
    const char *ver = json_string_value(json_object_get(e, "version"));
    bool python = strcmp(json_string_value(json_object_get(e, "runtime")), "python") == 0;
    return python ? json_sprintf("https://pypi.org/project/%s/%s/", pkg, ver)
                  : json_sprintf("https://www.npmjs.com/package/%s/v/%s", pkg, ver);
}

/* settings[] as Runtime Cloud's env[]: {name, description, required, secret, hosts?},
 * a secret's hosts being those the entry may reach. */
static json_t *cloud_env(json_t *e)
{
    json_t *out = json_array(), *s;
    size_t i;
    json_array_foreach(json_object_get(e, "settings"), i, s)
    {
        bool secret = json_is_true(json_object_get(s, "secret"));
        json_t *v = json_pack("{s:O,s:O*,s:b,s:b}", "name", json_object_get(s, "env"),
                              "description", json_object_get(s, "description"), "required",
                              json_is_true(json_object_get(s, "required")), "secret", secret);
        if (secret) json_object_set(v, "hosts", json_object_get(e, "egress"));
        json_array_append_new(out, v);
    }
    return out;
}

json_t *catalog_cloud_json(json_t *catalog)
{
    json_t *data = json_array(), *e;
    size_t i;
    json_array_foreach(catalog, i, e)
    {
        json_t *v = json_deep_copy(e);
        json_t *fixed = json_object_get(e, "env");
        if (fixed) json_object_set(v, "serverEnv", fixed);
        json_object_set_new(v, "env", cloud_env(e));
        json_object_set(v, "title", json_object_get(e, "name"));
        json_object_set_new(v, "source", source_url(e));
        json_object_set_new(v, "options", json_array());
        json_object_set_new(v, "checked", json_string(CATALOG_CHECKED));
        json_array_append_new(data, v);
    }
    return json_pack("{s:o}", "data", data);
}
