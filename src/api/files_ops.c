/* Runtime Cloud's file-tree routes: GET .../files/list and .../files/stat, POST
 * .../files:mkdir, :remove, :rename and :chmod. Each request is read once, here, into a
 * struct proto_file_op (unknown query parameters and body fields refused, every one
 * named; wrong types named), then carried out in the sandbox by a helper of the
 * keeper's, as the sandbox's user (server_file_op, src/sandbox/files.c). Paths are
 * absolute; relative ones are under /workspace, as files.c reads them. */
#include <errno.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api_impl.h"

#define LIST_DEFAULT_LIMIT 1000
#define LIST_MAX_GLOB_STEPS 64 /* src/sandbox/files.c's GLOB_MAX_STEPS */

/* A request waiting for its helper. httpd keeps an unanswered request alive even when
 * its client leaves, so req is valid until the answer. */
struct file_op_req {
    struct httpd_req *req;
    const char *verb; /* "list", "stat", ... (a literal) */
    struct proto_file_op op;
};

/* ---- reading the request ---------------------------------------------------------- */

/* in as an absolute path without empty, "." or ".." steps nor a trailing '/': the path
 * the answer names (".." is taken lexically; the helper resolves within the sandbox's
 * root whatever it is given). false when it does not fit in out. */
static bool normal_path(const char *in, char *out, size_t size)
{
    char buf[2 * PROTO_PATH_LEN];
    int n = snprintf(buf, sizeof buf, "%s%s", in[0] == '/' ? "" : "/workspace/", in);
    if (n < 0 || (size_t)n >= sizeof buf) return false;
    size_t len = 0;
    for (char *save = NULL, *s = strtok_r(buf, "/", &save); s; s = strtok_r(NULL, "/", &save)) {
        if (strcmp(s, ".") == 0) continue;
        if (strcmp(s, "..") == 0) {
            while (len > 0 && out[--len] != '/') {
            }
            continue;
        }
        size_t step = strlen(s);
        if (len + 1 + step >= size) return false;
        out[len++] = '/';
        memcpy(out + len, s, step);
        len += step;
    }
    if (len == 0) out[len++] = '/';
    out[len] = '\0';
    return true;
}

static void take_path(struct api_issues *is, const char *field, const char *text, char *out)
{
    if (!text || !*text)
        api_issue(is, field, "%s is required: an absolute path such as /workspace/notes.txt",
                  field);
    else if (!normal_path(text, out, PROTO_PATH_LEN))
        api_issue(is, field, "%s is longer than %d bytes", field, PROTO_PATH_LEN - 1);
}

/* A string field of the body; NULL (and an issue when required) when absent or not a
 * string, or when it holds a NUL. */
static const char *body_string(json_t *body, const char *field, bool required,
                               struct api_issues *is)
{
    json_t *v = json_object_get(body, field);
    if (!v && !required) return NULL;
    if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v)) {
        api_issue(is, field, "%s must be a string", field);
        return NULL;
    }
    return json_string_value(v);
}

static bool body_bool(json_t *body, const char *field, bool fallback, struct api_issues *is)
{
    json_t *v = json_object_get(body, field);
    if (!v) return fallback;
    if (!json_is_boolean(v)) api_issue(is, field, "%s must be true or false", field);
    return json_is_true(v);
}

/* The body of a POST .../files:VERB into op; false after answering 400. */
static bool read_body(struct httpd_req *req, const char *verb, struct proto_file_op *op)
{
    static const struct {
        const char *verb;
        enum proto_file_op_kind op;
        const char *const known[4];
    } rows[] = {
        {"mkdir", PROTO_FILE_MKDIR, {"path", "parents", NULL}},
        {"remove", PROTO_FILE_REMOVE, {"path", "recursive", NULL}},
        {"rename", PROTO_FILE_RENAME, {"from", "to", "overwrite", NULL}},
        {"chmod", PROTO_FILE_CHMOD, {"path", "mode", NULL}},
    };
    size_t i = 0;
    while (strcmp(rows[i].verb, verb) != 0)
        i++;
    json_t *body = api_body_json(req, false);
    if (!body) return false;
    char where[32];
    snprintf(where, sizeof where, "files:%s", verb);
    err_t err = {0};
    if (!json_is_object(body) || json_known_fields(body, where, rows[i].known, &err) < 0) {
        json_decref(body);
        api_error(req, 400, "invalid_request", "%s",
                  err.msg[0] ? err.msg : "the body must be a JSON object");
        return false;
    }
    struct api_issues is = {0};
    op->op = rows[i].op;
    if (op->op == PROTO_FILE_RENAME) {
        take_path(&is, "from", body_string(body, "from", true, &is), op->path);
        take_path(&is, "to", body_string(body, "to", true, &is), op->path2);
        if (body_bool(body, "overwrite", false, &is)) op->flags |= PROTO_FILE_OVERWRITE;
    } else {
        take_path(&is, "path", body_string(body, "path", true, &is), op->path);
    }
    /* mkdir makes parents unless told not to, as the SDK's files.mkdir does. */
    if (op->op == PROTO_FILE_MKDIR && body_bool(body, "parents", true, &is))
        op->flags |= PROTO_FILE_PARENTS;
    if (op->op == PROTO_FILE_REMOVE && body_bool(body, "recursive", false, &is))
        op->flags |= PROTO_FILE_RECURSIVE;
    if (op->op == PROTO_FILE_CHMOD) {
        const char *mode = body_string(body, "mode", true, &is);
        int bits = mode ? api_file_mode(mode) : 0;
        if (bits < 0)
            api_issue(&is, "mode",
                      "mode is permission bits in octal, such as \"755\" (at most 777)");
        else
            op->mode = (uint32_t)bits;
    }
    json_decref(body);
    return !api_issues_reply(req, &is);
}

/* A whole number from min to max in the query. */
static void query_number(struct evkeyvalq *q, const char *name, unsigned min, unsigned max,
                         uint32_t *out, struct api_issues *is)
{
    const char *text = evhttp_find_header(q, name);
    if (!text) return;
    char *end;
    unsigned long v = strspn(text, "0123456789") == strlen(text) ? strtoul(text, &end, 10) : 0;
    if (!*text || v < min || v > max)
        api_issue(is, name, "%s must be a whole number from %u to %u", name, min, max);
    else
        *out = (uint32_t)v;
}

/* A glob's steps; its bytes are the helper's to match (fnmatch(3) per step, "**" any
 * number of steps). */
static bool glob_fits(const char *glob)
{
    size_t steps = 0;
    for (const char *p = glob; *p; p++)
        steps += (p == glob || p[-1] == '/') && *p != '/';
    return strlen(glob) < PROTO_PATH_LEN && steps <= LIST_MAX_GLOB_STEPS;
}

/* The query of GET .../files/list or .../files/stat into op; false after answering. */
static bool read_query(struct httpd_req *req, const char *verb, struct proto_file_op *op)
{
    static const char *const list_known[] = {"path", "depth", "glob", "hidden", "limit", NULL};
    static const char *const stat_known[] = {"path", NULL};
    bool list = strcmp(verb, "list") == 0;
    struct evkeyvalq q;
    if (!api_query(req, &q, list ? list_known : stat_known)) return false;
    struct api_issues is = {0};
    const char *path = evhttp_find_header(&q, "path");
    take_path(&is, "path", list && !path ? "/workspace" : path, op->path);
    op->op = list ? PROTO_FILE_LIST : PROTO_FILE_STAT;
    if (list) {
        const char *glob = evhttp_find_header(&q, "glob");
        const char *hidden = evhttp_find_header(&q, "hidden");
        /* Without a depth, a glob looks as deep as a list goes (a "**" step finds every level). */
        op->depth = glob && *glob ? PROTO_FILE_MAX_DEPTH : 1;
        op->limit = LIST_DEFAULT_LIMIT;
        query_number(&q, "depth", 1, PROTO_FILE_MAX_DEPTH, &op->depth, &is);
        query_number(&q, "limit", 1, PROTO_FILE_MAX_LIMIT, &op->limit, &is);
        if (glob && !glob_fits(glob))
            api_issue(&is, "glob", "glob must be shorter than %d bytes, in at most %d steps",
                      PROTO_PATH_LEN, LIST_MAX_GLOB_STEPS);
        else if (glob)
            snprintf(op->path2, sizeof op->path2, "%s", glob);
        if (hidden && strcmp(hidden, "true") != 0 && strcmp(hidden, "false") != 0)
            api_issue(&is, "hidden", "hidden must be true or false");
        if (hidden && strcmp(hidden, "true") == 0) op->flags |= PROTO_FILE_HIDDEN;
    }
    evhttp_clear_headers(&q);
    return !api_issues_reply(req, &is);
}

/* ---- the answers ------------------------------------------------------------------- */

/* Names from the sandbox's own /etc/passwd and /etc/group (src/sandbox/rootfs.c):
 * root, user (1000, whom programs run as) and nobody. */
static json_t *user_name(uint32_t id, bool group)
{
    if (id == 0) return json_string("root");
    if (id == 1000) return json_string("user");
    if (id == 65534) return json_string(group ? "nogroup" : "nobody");
    char text[16];
    snprintf(text, sizeof text, "%u", id);
    return json_string(text);
}

static json_t *entry_json(const struct proto_file_info *e, const char *path)
{
    static const char *const types[] = {"file", "directory", "symlink", "other"};
    const char *slash = strrchr(path, '/');
    const char *name = slash && slash[1] ? slash + 1 : path;
    char mode[8], when[40];
    snprintf(mode, sizeof mode, "%03o", e->mode);
    time_t t = (time_t)e->mtime_s;
    struct tm tm;
    if (!gmtime_r(&t, &tm)) memset(&tm, 0, sizeof tm);
    size_t n = strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(when + n, sizeof when - n, ".%03uZ", e->mtime_ns / 1000000);
    json_t *v = json_pack("{s:o,s:o,s:s,s:I,s:s,s:s,s:I,s:I,s:o,s:o}", "name",
                          api_json_text(name, strlen(name)), "path",
                          api_json_text(path, strlen(path)), "type", types[e->type], "size",
                          (json_int_t)(e->bytes > INT64_MAX ? INT64_MAX : e->bytes), "mode", mode,
                          "modifiedAt", when, "uid", (json_int_t)e->uid, "gid", (json_int_t)e->gid,
                          "owner", user_name(e->uid, false), "group", user_name(e->gid, true));
    if (e->type == PROTO_FILE_LNK)
        json_object_set_new(v, "symlinkTarget", api_json_text(e->target, strlen(e->target)));
    return v;
}

struct listed {
    char path[PROTO_PATH_LEN + PROTO_FILE_TEXT_MAX + 1];
    json_t *v;
};

static int by_path(const void *a, const void *b)
{
    return strcmp(((const struct listed *)a)->path, ((const struct listed *)b)->path);
}

/* {"data": [entries sorted by path], "truncated"}: the records below dir. */
static json_t *list_json(const char *dir, const struct server_file_result *res)
{
    size_t count = res->values[0];
    if (count > PROTO_FILE_MAX_LIMIT) return NULL;
    struct proto_file_info *e = malloc(sizeof *e);
    struct listed *all = calloc(count + 1, sizeof *all);
    size_t n = 0, off = 0;
    int r = e && all ? 1 : -ENOMEM;
    while (r > 0 && (r = proto_file_entry_get(res->entries, res->entries_len, &off, e)) > 0) {
        if (!e->path[0] || n == count) { /* a LIST names each entry, as many as it said */
            r = -EPROTO;
            break;
        }
        snprintf(all[n].path, sizeof all[n].path, "%s/%s", strcmp(dir, "/") ? dir : "", e->path);
        all[n].v = entry_json(e, all[n].path);
        n++;
    }
    qsort(all, n, sizeof *all, by_path);
    json_t *data = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(data, all[i].v);
    free(all);
    free(e);
    if (r < 0) {
        json_decref(data);
        return NULL;
    }
    return json_pack("{s:o,s:b}", "data", data, "truncated", res->values[1] != 0);
}

static json_t *stat_json(const char *path, const struct server_file_result *res)
{
    struct proto_file_info *e = malloc(sizeof *e);
    size_t off = 0;
    json_t *v = NULL;
    if (e && proto_file_entry_get(res->entries, res->entries_len, &off, e) == 1 && !e->path[0] &&
        off == res->entries_len) {
        v = entry_json(e, path);
        json_object_set_new(v, "exists", json_true());
    }
    free(e);
    return v;
}

/* What a failed operation says: Runtime Cloud's file codes, naming the path. */
static void file_op_fail(struct file_op_req *f, const struct server_file_result *res)
{
    char what[2 * PROTO_PATH_LEN + 40];
    if (f->op.op == PROTO_FILE_RENAME)
        snprintf(what, sizeof what, "cannot rename %s to %s", f->op.path, f->op.path2);
    else
        snprintf(what, sizeof what, "cannot %s %s", f->verb, f->op.path);
    /* What the request could have said instead. */
    const char *hint = f->op.op == PROTO_FILE_RENAME && res->status == -EEXIST
                           ? " (overwrite: true replaces it)"
                       : f->op.op == PROTO_FILE_REMOVE && res->status == -ENOTEMPTY
                           ? " (recursive: true removes it and everything in it)"
                           : "";
    const struct api_file_error *e = api_file_error(res->status);
    if (e)
        return api_error(f->req, e->status, e->name, "%s: %s%s", what,
                         res->msg[0] ? res->msg : e->why, hint);
    api_error(f->req, 500, "internal_error", "%s: %s", what, strerror(-res->status));
}

static json_t *answer_of(const struct file_op_req *f, const struct server_file_result *res)
{
    const struct proto_file_op *op = &f->op;
    switch ((enum proto_file_op_kind)op->op) {
    case PROTO_FILE_LIST:
        return list_json(op->path, res);
    case PROTO_FILE_STAT:
        return stat_json(op->path, res);
    case PROTO_FILE_MKDIR:
        return json_pack("{s:s,s:b}", "path", op->path, "created", res->values[0] != 0);
    case PROTO_FILE_REMOVE:
        return json_pack("{s:s,s:b}", "path", op->path, "removed", res->values[0] != 0);
    case PROTO_FILE_RENAME:
        return json_pack("{s:s,s:s}", "from", op->path, "to", op->path2);
    case PROTO_FILE_CHMOD: {
        char mode[8];
        snprintf(mode, sizeof mode, "%03o", op->mode);
        return json_pack("{s:s,s:s}", "path", op->path, "mode", mode);
    }
    case PROTO_FILE_OP_END:
        break;
    }
    return NULL;
}

static void on_done(struct server *srv, const struct server_file_result *res, const err_t *err,
                    void *arg)
{
    struct file_op_req *f = arg;
    /* What is missing is an answer to stat, not an error: exists() reads it. */
    bool missing = res && (res->status == -ENOENT || res->status == -ENOTDIR);
    if (err)
        api_fail(f->req, err);
    else if (f->op.op == PROTO_FILE_STAT && missing)
        api_json(f->req, 200, json_pack("{s:b,s:s}", "exists", false, "path", f->op.path));
    else if (res->status < 0)
        file_op_fail(f, res);
    else {
        json_t *v = answer_of(f, res);
        if (v)
            api_json(f->req, 200, v);
        else
            api_error(f->req, 500, "internal_error",
                      "cannot %s %s: the sandbox's answer is malformed", f->verb, f->op.path);
    }
    free(f);
}

void api_files_op(struct httpd_req *req, struct server *srv, struct sbx *sb, const char *op)
{
    static const char *const verbs[] = {"list", "stat", "mkdir", "remove", "rename", "chmod"};
    size_t i = 0;
    while (i < ARRAY_LEN(verbs) && strcmp(verbs[i], op) != 0)
        i++;
    bool get = i < 2;
    if (i == ARRAY_LEN(verbs))
        return api_error(req, 404, "route_not_found",
                         "no such file route: %.40s (files/list, files/stat, files:mkdir, "
                         ":remove, :rename, :chmod)",
                         op);
    if (get != (httpd_method(req) == HTTPD_GET))
        return api_error(req, 405, "method_not_allowed", "files %s takes %s", op,
                         get ? "GET .../files/" : "POST .../files:");
    struct file_op_req *f = calloc(1, sizeof *f);
    if (!f) return api_error(req, 500, "internal_error", "out of memory");
    *f = (struct file_op_req){.req = req, .verb = verbs[i]};
    if (!(get ? read_query(req, op, &f->op) : read_body(req, op, &f->op))) {
        free(f);
        return;
    }
    err_t err = {0};
    if (server_file_op(srv, sb, &f->op, on_done, f, &err) < 0) {
        free(f);
        api_fail(req, &err);
    }
}
