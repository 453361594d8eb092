#include "catalog.h"

#include <errno.h>
#include <string.h>

extern const char catalog_json_text[];

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
