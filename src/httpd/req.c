/* Requests: what the application reads of them, their bodies and their answers. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "httpd_impl.h"

/* A request's id: the daemon's run (random at its first request) and a count, so
 * that ids never repeat within a run and hardly across runs. Not a secret. */
static void request_id(char *out, size_t size)
{
    static uint32_t run, count;
    if (!run) random_bytes(&run, sizeof run);
    snprintf(out, size, "req_%08x%08x", run, ++count);
}

struct httpd_req *req_new(struct httpd *h, struct httpd_conn *c)
{
    struct httpd_req *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    request_id(r->id, sizeof r->id);
    r->h = h;
    r->conn = c;
    r->query = "";
    r->method = HTTPD_OTHER;
    r->out_fields = evbuffer_new();
    r->body = evbuffer_new();
    if (!r->out_fields || !r->body) {
        req_free(r);
        return NULL;
    }
    return r;
}

const char *httpd_request_id(const struct httpd_req *req)
{
    return req->id;
}

static enum httpd_method method_of(const char *m)
{
    static const struct {
        const char *name;
        enum httpd_method m;
    } names[] = {{"GET", HTTPD_GET},       {"POST", HTTPD_POST}, {"PUT", HTTPD_PUT},
                 {"DELETE", HTTPD_DELETE}, {"HEAD", HTTPD_HEAD}, {"OPTIONS", HTTPD_OPTIONS}};
    for (size_t i = 0; i < ARRAY_LEN(names); i++)
        if (strcmp(m, names[i].name) == 0) return names[i].m;
    return HTTPD_OTHER;
}

int req_set_head(struct httpd_req *r, const char *buf, const struct http_request *head)
{
    r->head_buf = malloc(head->head_len + 1);
    if (!r->head_buf) return -ENOMEM;
    memcpy(r->head_buf, buf, head->head_len);
    r->head_buf[head->head_len] = '\0';
    r->method = method_of(head->method);
    r->keep_alive = head->keep_alive;
    /* The query: after the target's '?', cut where the target ends (the head is ours). */
    char *target = r->head_buf + head->target.off;
    target[head->target.len] = '\0';
    char *q = strchr(target, '?');
    if (q) r->query = q + 1;
    return 0;
}

void req_free(struct httpd_req *r)
{
    if (!r) return;
    if (r->budget) {
        budget_give(r->budget, r->body_charged);
        budget_unref(r->budget);
    }
    if (r->body) evbuffer_free(r->body);
    if (r->out_fields) evbuffer_free(r->out_fields);
    free(r->head_buf);
    free(r);
}

void req_client_gone(struct httpd_req *r)
{
    r->conn = NULL;
    httpd_gone_fn *gone = r->gone;
    r->gone = NULL;
    if (gone) gone(r, r->gone_arg);
}

bool req_body_add(struct httpd_req *r, struct evbuffer *from, size_t n)
{
    if (r->budget && !budget_take(r->budget, n)) return false;
    r->body_charged += r->budget ? n : 0;
    evbuffer_remove_buffer(from, r->body, n);
    return true;
}

void req_fail(struct httpd_req *r, int status, const char *code, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (r->conn) r->conn->must_close = true; /* nothing more is read from it */
    r->h->hd.fail(r, status, code, msg, r->h->hd.arg);
}

/* ---- what the application reads ---- */

enum httpd_method httpd_method(const struct httpd_req *r)
{
    return r->method;
}

const char *httpd_path(const struct httpd_req *r)
{
    return r->head_buf ? r->head.path : "/";
}

const char *httpd_query(const struct httpd_req *r)
{
    return r->query;
}

const char *httpd_header(const struct httpd_req *r, const char *name)
{
    if (!r->head_buf) return NULL;
    size_t len = strlen(name);
    for (size_t i = 0; i < r->head.nfields; i++) {
        const struct http_field *f = &r->head.fields[i];
        if (f->name.len != len || strncasecmp(r->head_buf + f->name.off, name, len) != 0) continue;
        /* Values end at CR in the head's copy: terminate it there (the head is
         * parsed once; spans stay valid as bytes, only the CR is replaced). */
        char *v = r->head_buf + f->value.off;
        v[f->value.len] = '\0';
        return v;
    }
    return NULL;
}

const char *httpd_client_address(const struct httpd_req *r)
{
    if (!r->conn) return "";
    if (r->conn->local) return "local";
    return r->conn->client ? r->conn->client->key : "";
}

bool httpd_is_local(const struct httpd_req *r)
{
    return r->conn && r->conn->local;
}

void httpd_set_data(struct httpd_req *r, void *data)
{
    r->data = data;
}

void *httpd_data(const struct httpd_req *r)
{
    return r->data;
}

void httpd_trust(struct httpd_req *r)
{
    if (r->conn) r->conn->trusted = true;
}

void httpd_charge(struct httpd_req *r, struct budget *b)
{
    if (r->budget == b) return;
    if (r->budget) {
        budget_give(r->budget, r->body_charged);
        budget_unref(r->budget);
    }
    r->budget = budget_ref(b);
    r->body_charged = evbuffer_get_length(r->body);
    if (b) budget_force(b, r->body_charged);
}

void httpd_read_body(struct httpd_req *r, size_t max, httpd_body_fn *done, void *arg)
{
    r->body_max = max;
    r->body_done = done;
    r->body_arg = arg;
    if (!r->conn) return done(r, arg);
    conn_start_body(r->conn);
}

struct evbuffer *httpd_body(struct httpd_req *r)
{
    return r->body;
}

void httpd_drop_body(struct httpd_req *r)
{
    evbuffer_drain(r->body, evbuffer_get_length(r->body));
    if (r->budget) budget_give(r->budget, r->body_charged);
    r->body_charged = 0;
}

/* ---- answers ---- */

static const char *reason(int status)
{
    static const struct {
        int status;
        const char *text;
    } reasons[] = {
        {200, "OK"},
        {201, "Created"},
        {202, "Accepted"},
        {204, "No Content"},
        {400, "Bad Request"},
        {401, "Unauthorized"},
        {403, "Forbidden"},
        {404, "Not Found"},
        {405, "Method Not Allowed"},
        {406, "Not Acceptable"},
        {408, "Request Timeout"},
        {409, "Conflict"},
        {411, "Length Required"},
        {413, "Content Too Large"},
        {415, "Unsupported Media Type"},
        {421, "Misdirected Request"},
        {429, "Too Many Requests"},
        {431, "Request Header Fields Too Large"},
        {500, "Internal Server Error"},
        {501, "Not Implemented"},
        {503, "Service Unavailable"},
        {507, "Insufficient Storage"},
    };
    for (size_t i = 0; i < ARRAY_LEN(reasons); i++)
        if (reasons[i].status == status) return reasons[i].text;
    return status < 400 ? "OK" : "Error";
}

void httpd_add_header(struct httpd_req *r, const char *name, const char *value)
{
    /* Our own fields: no CR or LF may come from a value (one echoed from a request). */
    if (strpbrk(name, "\r\n:") || strpbrk(value, "\r\n")) return;
    if (evbuffer_get_length(r->out_fields) + strlen(name) + strlen(value) > HTTPD_MAX_OUT_FIELDS)
        return;
    evbuffer_add_printf(r->out_fields, "%s: %s\r\n", name, value);
}

/* Whether the connection ends with this answer: the client asked, it never
 * proved who it is, a body it announced was not read, or httpd refused it. */
static bool closes_after(const struct httpd_req *r)
{
    const struct httpd_conn *c = r->conn;
    if (!c) return true;
    bool unread = c->state != CONN_SERVING &&
                  (r->head.framing == HTTP_BODY_CHUNKED ||
                   (r->head.framing == HTTP_BODY_LENGTH && r->head.content_length > 0));
    return !r->keep_alive || !c->trusted || c->must_close || c->cut || unread;
}

static void write_head(struct httpd_req *r, struct evbuffer *out, int status, bool close)
{
    evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\nx-request-id: %s\r\n", status, reason(status),
                        r->id);
    evbuffer_add_buffer(out, r->out_fields);
    if (close)
        evbuffer_add_printf(out, "Connection: close\r\n");
    else if (r->head.minor == 0)
        evbuffer_add_printf(out, "Connection: keep-alive\r\n");
}

void httpd_reply(struct httpd_req *r, int status, struct evbuffer *body)
{
    struct httpd_conn *c = r->conn;
    if (c) {
        bool close = closes_after(r);
        struct evbuffer *out = bufferevent_get_output(c->bev);
        write_head(r, out, status, close);
        size_t len = body ? evbuffer_get_length(body) : 0;
        if (status != 204 && status != 304)
            evbuffer_add_printf(out, "Content-Length: %zu\r\n", len);
        evbuffer_add(out, "\r\n", 2);
        if (body && r->method != HTTPD_HEAD) evbuffer_add_buffer(out, body);
        conn_request_done(c, close);
    }
    req_free(r);
}

void httpd_reply_bytes(struct httpd_req *r, int status, const char *content_type, const void *data,
                       size_t len)
{
    struct evbuffer *body = evbuffer_new();
    if (content_type) httpd_add_header(r, "Content-Type", content_type);
    if (body && len) evbuffer_add(body, data, len);
    httpd_reply(r, status, body);
    if (body) evbuffer_free(body);
}

void httpd_stream_start(struct httpd_req *r, int status)
{
    struct httpd_conn *c = r->conn;
    r->streaming = true;
    if (!c) return;
    struct evbuffer *out = bufferevent_get_output(c->bev);
    bool chunked = r->head.minor == 1;
    write_head(r, out, status, !chunked);
    if (chunked) evbuffer_add_printf(out, "Transfer-Encoding: chunked\r\n");
    evbuffer_add(out, "\r\n", 2);
    if (r->budget) conn_charge_output(c, r->budget);
}

int httpd_stream_send(struct httpd_req *r, const void *data, size_t len)
{
    struct httpd_conn *c = r->conn;
    if (!c || c->cut) return -EPIPE;
    if (len == 0) return 0;
    struct evbuffer *out = bufferevent_get_output(c->bev);
    if (r->head.minor == 1) {
        evbuffer_add_printf(out, "%zx\r\n", len);
        evbuffer_add(out, data, len);
        evbuffer_add(out, "\r\n", 2);
    } else {
        evbuffer_add(out, data, len);
    }
    return 0;
}

int httpd_stream_send_buffer(struct httpd_req *r, struct evbuffer *buf)
{
    size_t len = evbuffer_get_length(buf);
    int rc = httpd_stream_send(r, evbuffer_pullup(buf, (ssize_t)len), len);
    evbuffer_drain(buf, len);
    return rc;
}

void httpd_abandon(struct httpd_req *r)
{
    struct httpd_conn *c = r->conn;
    if (c) {
        c->req = NULL;
        r->conn = NULL;
        conn_cut(c); /* an answer begun can only be ended by closing */
    }
    req_free(r);
}

void httpd_stream_end(struct httpd_req *r)
{
    struct httpd_conn *c = r->conn;
    if (c) {
        if (r->head.minor == 1 && !c->cut)
            evbuffer_add(bufferevent_get_output(c->bev), "0\r\n\r\n", 5);
        conn_charge_output(c, NULL);
        conn_request_done(c, r->head.minor == 0 || closes_after(r));
    }
    req_free(r);
}

size_t httpd_backlog(const struct httpd_req *r)
{
    return r->conn ? evbuffer_get_length(bufferevent_get_output(r->conn->bev)) : r->backlog_left;
}

void httpd_cut(struct httpd_req *r)
{
    struct httpd_conn *c = r->conn;
    if (!c) return;
    c->req = NULL; /* the request stays the application's */
    req_client_gone(r);
    conn_cut(c);
}

bool httpd_connected(const struct httpd_req *r)
{
    return r->conn && !r->conn->cut;
}

bool httpd_budget_spent(const struct httpd_req *r)
{
    return r->budget_spent;
}

void httpd_on_gone(struct httpd_req *r, httpd_gone_fn *fn, void *arg)
{
    r->gone = fn;
    r->gone_arg = arg;
}
