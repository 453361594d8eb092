/* A secret's spec: what a put's body says about where its value may go, in
 * Runtime Cloud's shape ({value, hosts, header?, format?, rules?, only?, env?}),
 * checked whole so that every wrong field is named in one answer, and the form
 * the store keeps (the same, without the value, with the secret's placeholder).
 * Rows stored before rules existed ({hosts, methods, paths}, path globs) are read
 * into one rule whose paths keep their glob meaning, so that reading an old row
 * never widens where its value goes. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../http/http.h"
#include "../policy/policy.h"
#include "secrets.h"

/* One wrong field: {field, message}. */
static void issue(json_t *issues, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void issue(json_t *issues, const char *field, const char *fmt, ...)
{
    char msg[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_array_append_new(issues, json_pack("{s:s,s:s}", "field", field, "message", msg));
}

int secret_value_check(const char *value, size_t len, err_t *err)
{
    if (len == 0 || len > SECRET_VALUE_MAX)
        return err_set(err, len ? -EFBIG : -EINVAL, "a secret's value must be 1 to %d bytes",
                       SECRET_VALUE_MAX);
    /* It goes into header fields and URLs: only what is safe in both, as Runtime Cloud. */
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)value[i] < 0x20 || (unsigned char)value[i] > 0x7e)
            return err_set(err, -EINVAL,
                           "a secret's value must be visible ASCII (spaces allowed): byte %zu "
                           "is not (no NUL, CR, LF or tab; strip the trailing newline)",
                           i);
    return 0;
}

static bool host_ok(const char *s, char *why, size_t size)
{
    struct policy_rule rule;
    err_t err = {0};
    if (policy_parse_rule(s, &rule, &err) < 0) {
        snprintf(why, size, "%s", err.msg);
        return false;
    }
    if (rule.kind == POLICY_RULE_CIDR && rule.prefix != 32 && rule.prefix != 128) {
        snprintf(why, size, "\"%.64s\": a secret's host is a name or one address, not a range", s);
        return false;
    }
    return true;
}

static bool method_ok(const char *s)
{
    size_t n = strlen(s);
    bool ok = n > 0 && n <= 16;
    for (size_t i = 0; ok && i < n; i++)
        ok = isupper((unsigned char)s[i]);
    return ok;
}

/* Runtime Cloud's path: exact, or a prefix ending in slash-star; either way in
 * the normalised form the proxy matches (http_glob_valid's rules, no other '*'). */
static bool path_ok(const char *s, const char **why)
{
    size_t n = strlen(s);
    const char *star = strchr(s, '*');
    if (star && !(star == s + n - 1 && n >= 2 && s[n - 2] == '/')) {
        *why = "a path is exact (/v1/chat/completions) or a prefix ending in /* (/repos/acme/*)";
        return false;
    }
    return http_glob_valid(s, why);
}

/* A list of 1..max strings at where, each passing check (NULL: any string); a
 * copy, or NULL after naming what is wrong. */
static json_t *strings(json_t *v, const char *where, size_t max, json_t *issues,
                       bool (*check)(const char *s, const char *where, json_t *issues))
{
    if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > max) {
        issue(issues, where, "must be a list of 1 to %zu strings", max);
        return NULL;
    }
    json_t *out = json_array();
    size_t i, bad = 0;
    json_t *e;
    json_array_foreach(v, i, e)
    {
        char at[96];
        snprintf(at, sizeof at, "%s[%zu]", where, i);
        if (!json_is_string(e) || strlen(json_string_value(e)) != json_string_length(e)) {
            issue(issues, at, "must be a string");
            bad++;
        } else if (check && !check(json_string_value(e), at, issues)) {
            bad++;
        } else {
            json_array_append(out, e);
        }
    }
    if (bad) json_decref(out);
    return bad ? NULL : out;
}

static bool check_host(const char *s, const char *where, json_t *issues)
{
    char why[256];
    if (host_ok(s, why, sizeof why)) return true;
    issue(issues, where, "%s", why);
    return false;
}

static bool check_method(const char *s, const char *where, json_t *issues)
{
    if (method_ok(s)) return true;
    issue(issues, where, "\"%.32s\" is not an HTTP method like GET or POST", s);
    return false;
}

static bool check_path(const char *s, const char *where, json_t *issues)
{
    const char *why = "too long";
    if (strlen(s) < 1024 && path_ok(s, &why)) return true;
    issue(issues, where, "\"%.64s\": %s", s, why);
    return false;
}

/* One rule: {methods?, paths}; paths_required false for the earlier top-level form. */
static json_t *parse_rule(json_t *v, const char *where, bool paths_required, json_t *issues)
{
    char at[96];
    if (!json_is_object(v)) {
        issue(issues, where, "must be an object {methods?: [...], paths: [...]}");
        return NULL;
    }
    size_t before = json_array_size(issues);
    json_t *rule = json_object();
    const char *k;
    json_t *x;
    json_object_foreach(v, k, x)
    {
        snprintf(at, sizeof at, "%s.%.40s", where, k);
        if (strcmp(k, "methods") != 0 && strcmp(k, "paths") != 0)
            issue(issues, at, "unknown field; a rule has methods and paths");
    }
    json_t *m = json_object_get(v, "methods"), *p = json_object_get(v, "paths");
    snprintf(at, sizeof at, "%s.methods", where);
    if (m && !json_is_null(m)) {
        json_t *list = strings(m, at, SECRET_RULE_ITEMS_MAX, issues, check_method);
        if (list) json_object_set_new(rule, "methods", list);
    }
    snprintf(at, sizeof at, "%s.paths", where);
    if (p && !json_is_null(p)) {
        json_t *list = strings(p, at, SECRET_RULE_ITEMS_MAX, issues, check_path);
        if (list) json_object_set_new(rule, "paths", list);
    } else if (paths_required) {
        issue(issues, at, "is required: the paths the rule allows, e.g. [\"/repos/acme/*\"]");
    }
    if (json_array_size(issues) == before) return rule;
    json_decref(rule);
    return NULL;
}

static void parse_rules(json_t *body, json_t *spec, json_t *issues)
{
    json_t *rules = json_object_get(body, "rules");
    json_t *m = json_object_get(body, "methods"), *p = json_object_get(body, "paths");
    bool legacy = (m && !json_is_null(m)) || (p && !json_is_null(p));
    if (rules && !json_is_null(rules) && legacy) {
        issue(issues, "rules", "give either rules or the earlier methods and paths, not both");
        return;
    }
    if (legacy) { /* runtimed's earlier body: one rule */
        json_t *one = json_pack("{s:O?,s:O?}", "methods", json_is_null(m) ? NULL : m, "paths",
                                json_is_null(p) ? NULL : p);
        json_t *rule = parse_rule(one, "rules[0]", false, issues);
        json_decref(one);
        if (rule) json_object_set_new(spec, "rules", json_pack("[o]", rule));
        return;
    }
    if (!rules || json_is_null(rules)) return; /* none: every request to the hosts */
    if (!json_is_array(rules) || json_array_size(rules) == 0 ||
        json_array_size(rules) > SECRET_RULES_MAX) {
        issue(issues, "rules", "must be a list of 1 to %d rules {methods?, paths}",
              SECRET_RULES_MAX);
        return;
    }
    json_t *out = json_array();
    size_t i;
    json_t *r;
    json_array_foreach(rules, i, r)
    {
        char at[32];
        snprintf(at, sizeof at, "rules[%zu]", i);
        json_t *rule = parse_rule(r, at, true, issues);
        if (rule) json_array_append_new(out, rule);
    }
    json_object_set_new(spec, "rules", out);
}

/* Fields a header may not be: they frame or route the request, or are the proxy's own. */
static bool header_forbidden(const char *name)
{
    static const char *const list[] = {
        "host", "content-length", "transfer-encoding", "connection", "upgrade",
        "te",   "trailer",        "keep-alive",        "expect",     "accept-encoding"};
    for (size_t i = 0; i < ARRAY_LEN(list); i++)
        if (strcasecmp(name, list[i]) == 0) return true;
    return strncasecmp(name, "proxy-", 6) == 0;
}

static void parse_header(json_t *body, json_t *spec, json_t *issues)
{
    json_t *h = json_object_get(body, "header"), *f = json_object_get(body, "format");
    if (h && !json_is_null(h)) {
        const char *s = json_string_value(h);
        size_t n = s ? strlen(s) : 0;
        bool ok = n > 0 && n <= SECRET_HEADER_MAX;
        for (size_t i = 0; ok && i < n; i++)
            ok = isalnum((unsigned char)s[i]) || strchr("!#$%&'*+-.^_`|~", s[i]);
        if (!ok)
            issue(issues, "header", "must be a header field name such as Authorization");
        else if (header_forbidden(s))
            issue(issues, "header", "%s frames or routes the request; it cannot carry a secret", s);
        else
            json_object_set(spec, "header", h);
    }
    if (!f || json_is_null(f)) return;
    const char *s = json_string_value(f);
    err_t err = {0};
    if (!s || strlen(s) > SECRET_FORMAT_MAX || !strstr(s, "{value}") ||
        secret_value_check(s, strlen(s), &err) < 0)
        issue(issues, "format",
              "must be text of at most %d visible ASCII characters holding {value}, e.g. "
              "\"token {value}\"",
              SECRET_FORMAT_MAX);
    else if (!h || json_is_null(h))
        issue(issues, "format", "needs header: the field the formatted value is set in");
    else
        json_object_set(spec, "format", f);
}

static bool check_any(const char *s, const char *where, json_t *issues)
{
    return true;
}

/* only: {labels?: [{k: v}, ...], sandboxes?: [id, ...]}; apps are Runtime Cloud's. */
static void parse_only(json_t *only, json_t *spec, json_t *issues)
{
    if (!only || json_is_null(only)) return;
    if (!json_is_object(only)) {
        issue(issues, "only", "must be an object {labels?, sandboxes?}");
        return;
    }
    json_t *out = json_object();
    const char *k;
    json_t *v;
    json_object_foreach(only, k, v)
    {
        char at[64];
        snprintf(at, sizeof at, "only.%.40s", k);
        if (strcmp(k, "apps") == 0) {
            issue(issues, at,
                  "is not available in runtimed, which has no apps; scope the secret "
                  "with only.sandboxes or only.labels");
        } else if (strcmp(k, "sandboxes") == 0) {
            json_t *ids = strings(v, at, SECRET_SCOPE_IDS_MAX, issues, check_any);
            if (ids) json_object_set_new(out, k, ids);
        } else if (strcmp(k, "labels") != 0) {
            issue(issues, at, "unknown field; only has labels and sandboxes");
        } else if (!json_is_array(v) || json_array_size(v) == 0 ||
                   json_array_size(v) > SECRET_SCOPE_LABELS_MAX) {
            issue(issues, at, "must be a list of 1 to %d label maps such as {\"team\": \"a\"}",
                  SECRET_SCOPE_LABELS_MAX);
        } else {
            size_t i, bad = 0;
            json_t *map, *x;
            const char *lk;
            json_array_foreach(v, i, map)
            {
                bool ok = json_is_object(map) && json_object_size(map) > 0 &&
                          json_object_size(map) <= SECRET_SCOPE_LABELS_MAX;
                json_object_foreach(map, lk, x) ok = ok && json_is_string(x);
                if (!ok) {
                    char e[80];
                    snprintf(e, sizeof e, "only.labels[%zu]", i);
                    issue(issues, e,
                          "must be a map of 1 to %d labels to text, such as {\"team\": "
                          "\"a\"}",
                          SECRET_SCOPE_LABELS_MAX);
                    bad++;
                }
            }
            if (!bad) json_object_set(out, k, v);
        }
    }
    if (json_object_size(out)) json_object_set(spec, "only", out);
    json_decref(out);
}

static void parse_env(json_t *env, json_t *spec, json_t *issues)
{
    if (!env || json_is_null(env)) return;
    err_t err = {0};
    if (!json_is_string(env))
        issue(issues, "env", "must be the name of an environment variable");
    else if (secrets_check_name(json_string_value(env), &err) < 0)
        issue(issues, "env", "%s", err.msg);
    else
        json_object_set(spec, "env", env);
}

/* Runtime Cloud's fields runtimed has not, each refused by name; then the unknown
 * ones, all in one issue last, as json_known_fields words it ("unknown fields: a,
 * b; known: ..."), so that the known list ends the message. */
static void parse_fields(json_t *body, json_t *issues)
{
    static const char *const known[] = {"value", "hosts", "header",  "format", "rules",
                                        "only",  "env",   "methods", "paths"};
    static const char *const elsewhere[] = {"githubApp", "git", "api", "jobs"};
    char names[300] = "";
    size_t len = 0, n = 0;
    const char *k;
    json_t *v;
    json_object_foreach(body, k, v)
    {
        bool ok = false, cloud = false;
        for (size_t i = 0; i < ARRAY_LEN(known); i++)
            ok = ok || strcmp(k, known[i]) == 0;
        for (size_t i = 0; i < ARRAY_LEN(elsewhere); i++)
            cloud = cloud || strcmp(k, elsewhere[i]) == 0;
        if (cloud)
            issue(issues, k, "is Runtime Cloud's and not available in runtimed; leave it out");
        int w = ok || cloud
                    ? 0
                    : snprintf(names + len, sizeof names - len, "%s%.64s", n ? ", " : "", k);
        if (w > 0 && len + (size_t)w < sizeof names) len += (size_t)w, n++;
    }
    if (n)
        json_array_append_new(issues,
                              json_pack("{s:s,s:s,s:s++}", "field", "", "fields", names, "message",
                                        n > 1 ? "unknown fields: " : "unknown field: ", names,
                                        "; known: value, hosts, header, format, rules, only, env"));
}

json_t *secret_spec_parse(json_t *body, json_t *issues)
{
    if (!json_is_object(body)) {
        issue(issues, "",
              "the body must be an object {value, hosts, header?, format?, rules?, "
              "only?, env?}");
        return NULL;
    }
    size_t before = json_array_size(issues);
    json_t *spec = json_object();
    json_t *value = json_object_get(body, "value");
    err_t err = {0};
    if (!json_is_string(value))
        issue(issues, "value", "is required: the secret's value, as text");
    else if (secret_value_check(json_string_value(value), json_string_length(value), &err) < 0)
        issue(issues, "value", "%s", err.msg);
    json_t *hosts = json_object_get(body, "hosts");
    if (!hosts || json_is_null(hosts)) {
        issue(issues, "hosts",
              "is required: the hosts the secret may be sent to, e.g. "
              "[\"api.github.com\"]");
    } else {
        json_t *list = strings(hosts, "hosts", SECRET_HOSTS_MAX, issues, check_host);
        if (list) json_object_set_new(spec, "hosts", list);
    }
    parse_header(body, spec, issues);
    parse_rules(body, spec, issues);
    parse_only(json_object_get(body, "only"), spec, issues);
    parse_env(json_object_get(body, "env"), spec, issues);
    parse_fields(body, issues);
    if (json_array_size(issues) == before) return spec;
    json_decref(spec);
    return NULL;
}

/* Appends text to *out (grown as needed); false when out of memory. */
static bool append(char **out, size_t *len, size_t *size, const char *text)
{
    size_t n = strlen(text);
    if (*len + n + 1 > *size) {
        size_t want = (*len + n + 1) * 2;
        char *more = realloc(*out, want);
        if (!more) return false;
        *out = more;
        *size = want;
    }
    memcpy(*out + *len, text, n + 1);
    *len += n;
    return true;
}

char *secret_issues_text(json_t *issues, size_t max)
{
    size_t len = 0, size = 256, i;
    char *out = calloc(1, size);
    json_t *e;
    bool ok = out != NULL;
    json_array_foreach(issues, i, e)
    {
        const char *f = json_string_value(json_object_get(e, "field"));
        const char *m = json_string_value(json_object_get(e, "message"));
        ok = ok && (!i || append(&out, &len, &size, "; ")) &&
             (!f || !*f || (append(&out, &len, &size, f) && append(&out, &len, &size, ": "))) &&
             append(&out, &len, &size, m ? m : "");
    }
    if (!ok || len < max) return ok ? out : (free(out), NULL);
    /* Too long to say why for each: every field still named, the reasons in details. */
    len = 0;
    ok = append(&out, &len, &size, "wrong fields (details.issues says why): ");
    json_array_foreach(issues, i, e)
    {
        const char *f = json_string_value(json_object_get(e, "field"));
        const char *many = json_string_value(json_object_get(e, "fields"));
        ok = ok && (!i || append(&out, &len, &size, ", ")) &&
             append(&out, &len, &size,
                    many ? many
                    : f  ? f
                         : "");
    }
    return ok ? out : (free(out), NULL);
}

/* ---- a stored spec read back ---- */

/* Rows written before rules: {hosts, methods, paths} with runtimed's path globs
 * ('*' within a segment, '**' across), read as one rule that keeps that meaning. */
static json_t *load_legacy(json_t *stored, err_t *err)
{
    json_t *issues = json_array();
    json_t *hosts = strings(json_object_get(stored, "hosts"), "hosts", SECRET_RULES_MAX_LEGACY,
                            issues, check_host);
    json_t *m = json_object_get(stored, "methods"), *p = json_object_get(stored, "paths");
    json_t *rule = json_object();
    if (json_array_size(m))
        json_object_set_new(rule, "methods",
                            strings(m, "methods", SECRET_RULES_MAX_LEGACY, issues, check_method));
    bool globs_ok = json_is_array(p) || !p;
    size_t i;
    json_t *g;
    json_array_foreach(p, i, g) globs_ok =
        globs_ok && json_is_string(g) && http_glob_valid(json_string_value(g), NULL);
    if (!globs_ok || (m && !json_is_array(m))) issue(issues, "rules", "not lists of rules");
    if (json_array_size(p)) json_object_set(rule, "paths", p);
    json_t *spec = NULL;
    if (json_array_size(issues) == 0 && hosts) {
        spec = json_pack("{s:O,s:b}", "hosts", hosts, "globs", 1);
        if (json_object_size(rule)) json_object_set_new(spec, "rules", json_pack("[O]", rule));
    } else {
        char *text = secret_issues_text(issues, SIZE_MAX);
        err_set(err, -EINVAL, "%s", text ? text : "unreadable");
        free(text);
    }
    json_decref(rule);
    json_decref(hosts);
    json_decref(issues);
    return spec;
}

json_t *secret_spec_load(json_t *stored, err_t *err)
{
    if (!json_is_object(stored)) return err_set(err, -EINVAL, "not an object"), NULL;
    if (!json_object_get(stored, "placeholder")) return load_legacy(stored, err);
    /* Read as a put's body is: a garbled field must not widen where the value goes. */
    json_t *body = json_deep_copy(stored);
    json_object_set_new(body, "value", json_string("x"));
    json_object_del(body, "placeholder");
    json_object_del(body, "globs");
    json_t *issues = json_array();
    json_t *spec = secret_spec_parse(body, issues);
    const char *ph = json_string_value(json_object_get(stored, "placeholder"));
    if (spec && (!ph || !secrets_is_placeholder(ph, strlen(ph)) || strlen(ph) != PLACEHOLDER_LEN))
        json_array_append_new(
            issues, json_pack("{s:s,s:s}", "field", "placeholder", "message", "not a placeholder"));
    if (json_array_size(issues)) {
        char *text = secret_issues_text(issues, SIZE_MAX);
        err_set(err, -EINVAL, "%s", text ? text : "unreadable");
        free(text);
        json_decref(spec);
        spec = NULL;
    } else {
        json_object_set(spec, "placeholder", json_object_get(stored, "placeholder"));
    }
    json_decref(body);
    json_decref(issues);
    return spec;
}

/* ---- what a request may carry ---- */

bool secret_list_has(json_t *list, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        const char *e = json_string_value(v);
        if (e && strcmp(e, s) == 0) return true;
    }
    return false;
}

/* Exact, or a prefix ending in slash-star: "/repos/acme/x/y" is under "/repos/acme/" then a star.
 */
static bool path_matches(const char *pattern, const char *path, bool globs)
{
    if (globs) return http_glob_match(pattern, path);
    size_t n = strlen(pattern);
    if (n >= 2 && pattern[n - 1] == '*') return strncmp(pattern, path, n - 1) == 0;
    return strcmp(pattern, path) == 0;
}

static bool any_path(json_t *paths, const char *path, bool globs)
{
    size_t i;
    json_t *v;
    json_array_foreach(paths, i,
                       v) if (path_matches(json_string_value(v), path, globs)) return true;
    return false;
}

const char *secret_rules_refusal(json_t *spec, const char *method, const char *path)
{
    json_t *rules = json_object_get(spec, "rules");
    if (json_array_size(rules) == 0) return NULL;
    bool globs = json_is_true(json_object_get(spec, "globs"));
    /* A path an upstream could read as another one matches no path of any rule. */
    bool ambiguous = http_path_ambiguous(path);
    const char *why = "method not allowed";
    size_t i;
    json_t *rule;
    json_array_foreach(rules, i, rule)
    {
        json_t *methods = json_object_get(rule, "methods");
        json_t *paths = json_object_get(rule, "paths");
        if (json_array_size(methods) && !secret_list_has(methods, method)) continue;
        if (!json_array_size(paths)) return NULL;
        if (ambiguous) {
            why = "ambiguous path";
            continue;
        }
        if (any_path(paths, path, globs)) return NULL;
        if (strcmp(why, "ambiguous path") != 0) why = "path not allowed";
    }
    return why;
}

char *secret_header_text(json_t *spec, const char *value, size_t len, size_t *out_len)
{
    const char *format = json_string_value(json_object_get(spec, "format"));
    if (!format) format = "{value}";
    const char *at = strstr(format, "{value}");
    size_t head = (size_t)(at - format), tail = strlen(at + 7);
    /* Each {value} after the first is kept as written: one value per field. */
    char *out = malloc(head + len + tail + 1);
    if (!out) return NULL;
    memcpy(out, format, head);
    memcpy(out + head, value, len);
    memcpy(out + head + len, at + 7, tail + 1);
    *out_len = head + len + tail;
    return out;
}
