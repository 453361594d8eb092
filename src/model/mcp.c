/* The settings of an MCP server in a sandbox. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../fingerprint/fingerprint.h"
#include "model.h"

static bool valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= MODEL_MCP_NAME_MAX) return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool ok =
            (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (i > 0 && (c == '-' || c == '_'));
        if (!ok) return false;
    }
    return true;
}

static bool valid_fingerprint(const char *f)
{
    size_t n = strlen(f);
    return n >= FINGERPRINT_SHORT && n <= 64 && strspn(f, "0123456789abcdefABCDEF") == n;
}

/* An array of strings (NULL/null: empty); false when it is something else. */
static bool parse_strings(json_t *v, struct model_strings *out)
{
    if (!v || json_is_null(v)) return true;
    if (!json_is_array(v)) return false;
    if (!(out->v = calloc(json_array_size(v) + 1, sizeof *out->v))) return false;
    size_t i;
    json_t *x;
    json_array_foreach(v, i, x)
    {
        if (!json_is_string(x) || !(out->v[out->n] = strdup(json_string_value(x)))) return false;
        out->n++;
    }
    return true;
}

static json_t *strings_json(const struct model_strings *s)
{
    json_t *a = json_array();
    for (size_t i = 0; i < s->n; i++)
        json_array_append_new(a, json_string(s->v[i]));
    return a;
}

static void strings_clear(struct model_strings *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
    *s = (struct model_strings){0};
}

static bool nonempty(const char *key)
{
    return *key != '\0';
}

/* id or name and command: which server this is. */
static int parse_identity(json_t *in, struct model_mcp_server *s, err_t *err)
{
    const char *id = json_string_value(json_object_get(in, "id"));
    const char *name = json_string_value(json_object_get(in, "name"));
    json_t *command = json_object_get(in, "command");
    if (!id && (!name || !json_is_array(command) || json_array_size(command) == 0 ||
                !parse_strings(command, &s->command)))
        return err_set(err, -EINVAL,
                       "a server needs a catalog id, or a name and a command (an argv array of "
                       "strings)");
    /* A catalog server runs the catalog's command: one given beside it is refused, not dropped. */
    if (id && command)
        return err_set(err, -EINVAL,
                       "server %.64s: command is for a server of one's own, not beside a catalog "
                       "id; give {\"name\", \"command\"} without id to run your own",
                       id);
    if (!name) name = id;
    if (!valid_name(name) || (id && strlen(id) >= sizeof s->id))
        return err_set(err, -EINVAL,
                       "server name %.64s must be 1-63 of a-z, 0-9, '-', '_', starting with a "
                       "letter or digit",
                       name);
    str_copy(s->name, sizeof s->name, name);
    if (id) str_copy(s->id, sizeof s->id, id);
    return 0;
}

/* tools: a non-empty list of names, each once. */
static int parse_tools(json_t *v, struct model_mcp_server *s, err_t *err)
{
    if (!v || json_is_null(v)) return 0;
    bool ok = json_is_array(v) && json_array_size(v) > 0 && json_array_size(v) <= MODEL_TOOLS_MAX &&
              parse_strings(v, &s->tools);
    for (size_t i = 0; ok && i < s->tools.n; i++) {
        ok = s->tools.v[i][0] != '\0' && strlen(s->tools.v[i]) <= 128;
        for (size_t j = 0; ok && j < i; j++)
            ok = strcmp(s->tools.v[i], s->tools.v[j]) != 0;
    }
    if (ok) return 0;
    return err_set(err, -EINVAL,
                   "server %s: tools must list 1 to %d tool names, each once (the only tools "
                   "clients may see and call)",
                   s->name, MODEL_TOOLS_MAX);
}

static int parse_options(json_t *in, struct model_mcp_server *s, err_t *err)
{
    json_t *fp = json_object_get(in, "fingerprint");
    json_t *iso_v = json_object_get(in, "isolation");
    const char *iso = json_string_value(iso_v);
    /* One message for every shape error of these (err NULL: it is made below). */
    if (model_map_parse(json_object_get(in, "env"), "env", nonempty, "a name", &s->env, NULL) < 0 ||
        model_map_parse(json_object_get(in, "secrets"), "secrets", nonempty, "a name", &s->secrets,
                        NULL) < 0 ||
        !parse_strings(json_object_get(in, "args"), &s->args) ||
        (fp && !json_is_null(fp) && !json_is_string(fp)) ||
        (iso_v && !json_is_null(iso_v) && !iso) ||
        (iso && strcmp(iso, "shared") != 0 && strcmp(iso, "session") != 0))
        return err_set(err, -EINVAL,
                       "server %s: env and secrets are objects of strings, args an array of "
                       "strings, fingerprint a hex string, isolation \"shared\" or \"session\"",
                       s->name);
    s->isolation =
        iso && strcmp(iso, "session") == 0 ? MODEL_ISOLATION_SESSION : MODEL_ISOLATION_SHARED;
    const char *f = json_string_value(fp);
    if (f && !valid_fingerprint(f))
        return err_set(err, -EINVAL,
                       "server %s: fingerprint must be 16 to 64 hex digits, as `runtime mcp "
                       "fingerprint` prints it",
                       s->name);
    if (f) str_copy(s->fingerprint, sizeof s->fingerprint, f);
    return parse_tools(json_object_get(in, "tools"), s, err);
}

static const char *const known_fields[] = {
    "id", "name", "command", "args", "env", "secrets", "fingerprint", "isolation", "tools", NULL,
};

int model_mcp_server_parse(json_t *in, struct model_mcp_server *out, err_t *err)
{
    *out = (struct model_mcp_server){0};
    if (!json_is_object(in))
        return err_set(err, -EINVAL,
                       "each server is an object: {\"id\": \"memory\"} or {\"name\": \"mine\", "
                       "\"command\": [\"node\", \"/workspace/server.js\"]}");
    int r = json_known_fields(in, NULL, known_fields, err);
    if (r < 0) return r;
    r = parse_identity(in, out, err);
    if (r == 0) r = parse_options(in, out, err);
    if (r < 0) model_mcp_server_clear(out);
    return r;
}

json_t *model_mcp_server_json(const struct model_mcp_server *s)
{
    json_t *v =
        json_pack("{s:s,s:o,s:o,s:o,s:s}", "name", s->name, "env", model_map_json(&s->env),
                  "secrets", model_map_json(&s->secrets), "args", strings_json(&s->args),
                  "isolation", s->isolation == MODEL_ISOLATION_SESSION ? "session" : "shared");
    if (s->id[0])
        json_object_set_new(v, "id", json_string(s->id));
    else
        json_object_set_new(v, "command", strings_json(&s->command));
    if (s->fingerprint[0]) json_object_set_new(v, "fingerprint", json_string(s->fingerprint));
    if (s->tools.n) json_object_set_new(v, "tools", strings_json(&s->tools));
    return v;
}

bool model_mcp_server_equal(const struct model_mcp_server *a, const struct model_mcp_server *b)
{
    json_t *x = model_mcp_server_json(a), *y = model_mcp_server_json(b);
    bool same = json_equal(x, y);
    json_decref(x);
    json_decref(y);
    return same;
}

void model_mcp_server_clear(struct model_mcp_server *s)
{
    strings_clear(&s->command);
    strings_clear(&s->args);
    strings_clear(&s->tools);
    model_map_clear(&s->env);
    model_map_clear(&s->secrets);
    s->name[0] = s->id[0] = s->fingerprint[0] = '\0';
}
