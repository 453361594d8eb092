/* A sandbox's settings after its create: GET/PUT .../network and Runtime Cloud's
 * POST .../{id}:update (name, labels, env, idlePauseSeconds, hibernateAfterSeconds; isolation
 * only as it is).
 * Both answer once the change is on disk, and a network change reaches open connections
 * at once. And the fields of Runtime Cloud's a self-hosted daemon cannot honour: refused
 * by name with 501 feature_unavailable, never dropped. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api_impl.h"

/* A field given with a value runtimed cannot honour. A boolean runtimed always
 * behaves as when true (autoWake: a request wakes a paused sandbox; persistent: a stop
 * keeps the workspace) is refused only when false. */
static bool cannot_honour(const char *name, json_t *v)
{
    static const char *const always_true[] = {"autoWake", "persistent", "pausable", NULL};
    if (!v || json_is_null(v)) return false;
    for (size_t i = 0; always_true[i]; i++)
        if (strcmp(name, always_true[i]) == 0) return !json_is_true(v);
    return true;
}

bool api_refuse_cloud_only(struct httpd_req *req, json_t *body, const char *const *fields)
{
    char named[400] = "";
    size_t n = 0;
    json_t *list = json_array();
    for (size_t i = 0; fields[i]; i++)
        if (json_is_object(body) && cannot_honour(fields[i], json_object_get(body, fields[i]))) {
            n += (size_t)snprintf(named + n, n < sizeof named ? sizeof named - n : 0, "%s%s",
                                  n ? ", " : "", fields[i]);
            json_array_append_new(list, json_string(fields[i]));
        }
    if (!n) {
        json_decref(list);
        return false;
    }
    api_error_details(req, 501, "feature_unavailable", json_pack("{s:o}", "fields", list),
                      "runtimed (self-hosted) does not have %s; leave %s out "
                      "(docs/runtime-cloud.md lists what it serves)",
                      named, json_array_size(list) > 1 ? "them" : "it");
    return true;
}

/* ---- network ---- */

/* The rules as Runtime Cloud answers them: openPorts, as a runtimed sandbox reaches
 * every port of a host it may reach (connect names ports beyond its allow list). */
static json_t *network_json(const struct model_network *network)
{
    json_t *v = model_network_json(network);
    json_object_set_new(v, "openPorts", json_true());
    return v;
}

/* The 200 goes once the settings are on disk. */
static void network_set(struct server *srv, const struct model_sandbox *settings, const err_t *err,
                        void *arg)
{
    if (!settings) return api_fail(arg, err);
    api_json(arg, 200, network_json(&settings->network));
}

static void set_network(struct httpd_req *req, struct server *srv, struct sbx *sb)
{
    json_t *body = api_body_json(req, false);
    if (!body) return;
    err_t err = {0};
    struct model_sandbox changed;
    int r = model_sandbox_copy(&changed, sbx_settings(sb), &err);
    if (r == 0) {
        model_network_clear(&changed.network);
        r = model_network_parse(body, &changed.network, &err);
    }
    json_decref(body);
    if (r == 0) model_network_as_cloud_reads(&changed.network);
    if (r == 0) r = server_sandbox_update(srv, sb, &changed, network_set, req, &err);
    model_sandbox_clear(&changed);
    if (r < 0) api_fail(req, &err);
}

void api_network(struct httpd_req *req, struct server *srv, struct sbx *sb, const char *sub)
{
    if (httpd_method(req) == HTTPD_GET)
        return api_json(req, 200, network_json(&sbx_settings(sb)->network));
    set_network(req, srv, sb);
}

/* ---- :update ---- */

/* An update waiting for the disk: the sandbox is found again by its id (a rename
 * changes the name the request used; a removal may come meanwhile). */
struct update_req {
    struct httpd_req *req;
    char id[PROTO_ID_LEN];
};

static void updated(struct server *srv, const struct model_sandbox *settings, const err_t *err,
                    void *arg)
{
    struct update_req u = *(struct update_req *)arg;
    free(arg);
    if (!settings) return api_fail(u.req, err);
    struct sbx *sb = server_sandbox_find(srv, NULL, u.id);
    if (!sb) return api_error(u.req, 404, "not_found", "sandbox %s was removed meanwhile", u.id);
    api_json(u.req, 200, api_sandbox_json(sb));
}

/* env is a patch, as Runtime Cloud's is: a value sets a variable, null removes it. */
static void patch_env(json_t *settings, json_t *given)
{
    json_t *env = json_object_get(settings, "env"), *value;
    const char *key;
    if (!json_is_object(given) || !json_is_object(env)) {
        json_object_set(settings, "env", given); /* the parse names what is wrong */
        return;
    }
    json_object_foreach(given, key, value)
    {
        if (json_is_null(value))
            json_object_del(env, key);
        else
            json_object_set(env, key, value);
    }
}

/* The settings with the body's fields in place (null or absent leaves one as it is),
 * checked as a create's are. isolation may be given only as it is: the sandbox was built
 * with that driver, and its workspace and processes are that driver's. */
static int changed_settings(json_t *body, const struct model_sandbox *now,
                            struct model_sandbox *out, err_t *err)
{
    static const char *const replaced[] = {
        "name", "labels", "idlePauseSeconds", "isolation", "hibernateAfterSeconds", NULL};
    json_t *v = model_sandbox_json(now);
    for (size_t i = 0; replaced[i]; i++) {
        json_t *given = json_object_get(body, replaced[i]);
        if (given && !json_is_null(given)) json_object_set(v, replaced[i], given);
    }
    json_t *env = json_object_get(body, "env");
    if (env && !json_is_null(env)) patch_env(v, env);
    int r = model_sandbox_parse(v, out, err);
    json_decref(v);
    if (r == 0 && out->isolation != now->isolation) {
        r = err_set(err, -EINVAL,
                    "isolation is fixed at create: this sandbox's is %s; to run under %s, create "
                    "a new sandbox with \"isolation\": \"%s\"",
                    model_driver_name(now->isolation), model_driver_name(out->isolation),
                    model_driver_name(out->isolation));
        model_sandbox_clear(out);
    }
    return r;
}

void api_update(struct httpd_req *req, struct server *srv, struct sbx *sb, const char *sub)
{
    static const char *const known[] = {
        "name",
        "labels",
        "env",
        "idlePauseSeconds",
        "hibernateAfterSeconds",
        "isolation", /* only as it is: a change is refused */
        "autoWake",
        "persistent",
        "maxTotalCostMicros",
        "tailscale",
        "user",
        NULL,
    };
    static const char *const cloud_only[] = {
        "autoWake", "persistent", "maxTotalCostMicros", "tailscale", "user", NULL,
    };
    json_t *body = api_body_json(req, false);
    if (!body) return;
    err_t err = {0};
    struct model_sandbox changed = {0};
    int r = json_is_object(body) ? json_known_fields(body, NULL, known, &err)
                                 : err_set(&err, -EINVAL, "the body must be a JSON object");
    if (r == 0 && api_refuse_cloud_only(req, body, cloud_only)) {
        json_decref(body);
        return;
    }
    if (r == 0) r = changed_settings(body, sbx_settings(sb), &changed, &err);
    json_decref(body);
    struct update_req *u = r == 0 ? calloc(1, sizeof *u) : NULL;
    if (r == 0 && !u) r = err_set(&err, -ENOMEM, "out of memory");
    if (u) {
        u->req = req;
        memcpy(u->id, sbx_id(sb), sizeof u->id);
    }
    if (r == 0) r = server_sandbox_update(srv, sb, &changed, updated, u, &err);
    if (r < 0) free(u);
    model_sandbox_clear(&changed);
    if (r == -EEXIST) return api_error(req, 409, "name_taken", "%s; pick another name", err.msg);
    if (r < 0) api_fail(req, &err);
}
