/* Interception, only for hosts some secret of the sandbox may go to: the proxy
 * terminates the sandbox's TLS with a leaf minted for the name (keys and
 * signing in src/mitm; a name not cached parks its connections until the
 * signer's answer, the loop going on meanwhile), opens its own TLS to the real host with full
 * verification, and reads each request head strictly (src/http): Host must be
 * the name, placeholders the secret allows for this host, method and path are
 * swapped for the value, others stay and are reported. Request bodies pass
 * through as they arrive; answers are scanned for the values swapped into the
 * connection (redact.c) on their way to the sandbox. When the upstream ends,
 * what it sent is delivered and the HTTP framing says whether it was whole.
 * Every other host is spliced undecrypted. */
#include <ctype.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../http/http.h"
#include "../mitm/mitm.h"
#include "../secrets/secrets.h"
#include "egress_impl.h"

#define HEAD_MAX (64 * 1024)
#define FLOW_HIGH (1 << 20) /* stop reading a side while the other has this much queued */
#define OPENED_MAX 16

struct intercept {
    struct conn *c;
    struct bufferevent *down, *up; /* sandbox side, upstream side */
    bool in_body;
    bool up_ready; /* upstream TLS verified: until then requests wait, unread */
    bool plain;    /* plain HTTP: read to report placeholders, never to swap them */
    bool closing;  /* an error answer is on its way; close once it is sent */
    bool complete; /* closing after the upstream ended: what it sent was whole (close_notify) */
    bool notified; /* the upstream ended with a close_notify */
    /* The upstream's end, handled once libevent has stored what it read with
     * it: an OpenSSL bufferevent calls the event callback before it commits
     * the bytes of the same read to the input. */
    struct event *ended;
    struct http_body body;
    /* Answers are counted so that a refusal never overtakes the answer to a
     * request forwarded before it (a pipelining client reads them in order). */
    unsigned forwarded, answered;
    bool is_head[64]; /* per outstanding request, by forwarded % 64: HEAD has no body */
    bool resp_in_body, resp_until_close;
    struct http_body resp;
    /* Answers of a TLS connection go through the reflection scan (redact.c):
     * the values swapped into it are overwritten wherever the upstream echoes
     * them. Chunked bodies are chunked again by the proxy (resp_rechunk); the
     * trailer section waits to be scanned whole. */
    bool scan;
    struct redactor rd;
    bool resp_rechunk, resp_last_chunk;
    struct evbuffer *trailers;
    bool unredactable; /* a value of this request could not be added to the scan */
    const char *refusal_status, *refusal_why; /* waiting for the answers before it */
    /* Values opened for the request being rewritten; wiped right after. */
    char *opened[OPENED_MAX];
    size_t opened_len[OPENED_MAX];
    size_t n_opened;
    bool limited;  /* a value opened for this request allows only some methods/paths */
    bool too_many; /* the request holds more placeholders than OPENED_MAX */
    const char *method, *path;
};

static int select_http11(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                         const unsigned char *in, unsigned inlen, void *arg)
{
    static const unsigned char h11[] = "\x08http/1.1";
    unsigned char *sel;
    if (SSL_select_next_proto(&sel, outlen, h11, sizeof h11 - 1, in, inlen) !=
        OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_ALERT_FATAL; /* h2 only: we speak http/1.1 */
    *out = sel;
    return SSL_TLSEXT_ERR_OK;
}

int intercept_init(struct egress *eg, const char *upstream_ca, err_t *err)
{
    if (!eg->secrets) return 0;
    int r = mitm_leaves_new(MITM_CACHE_MAX, &eg->leaves, err);
    if (r < 0) return r;
    eg->tls_down = SSL_CTX_new(TLS_server_method());
    eg->tls_up = SSL_CTX_new(TLS_client_method());
    if (!eg->tls_down || !eg->tls_up) return err_set(err, -ENOMEM, "cannot make TLS contexts");
    SSL_CTX_set_min_proto_version(eg->tls_down, TLS1_2_VERSION);
    SSL_CTX_set_alpn_select_cb(eg->tls_down, select_http11, NULL);
    SSL_CTX_set_min_proto_version(eg->tls_up, TLS1_2_VERSION);
    SSL_CTX_set_verify(eg->tls_up, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_alpn_protos(eg->tls_up, (const unsigned char *)"\x08http/1.1", 9);
    if (SSL_CTX_set_default_verify_paths(eg->tls_up) != 1)
        return err_set(err, -EIO, "cannot load the system CA certificates");
    if (upstream_ca && *upstream_ca &&
        SSL_CTX_load_verify_locations(eg->tls_up, upstream_ca, NULL) != 1)
        return err_set(err, -EIO, "cannot load --upstream-ca %s", upstream_ca);
    return 0;
}

/* A leaf being signed, and the connections waiting for it: however many
 * connect to a name new to the cache meanwhile, the signer is asked once. */
struct signing {
    struct egress *eg; /* NULL once the egress is gone: the answer only frees this */
    struct signing *prev, *next;
    struct conn *waiters;
    char name[POLICY_NAME_MAX];
};

void intercept_fini(struct egress *eg)
{
    if (eg->tls_down) SSL_CTX_free(eg->tls_down);
    if (eg->tls_up) SSL_CTX_free(eg->tls_up);
    mitm_leaves_free(eg->leaves);
    free(eg->scratch);
    eg->scratch = NULL;
    /* Their sandboxes are gone, and their waiters with them; each answer,
     * which the signer's client still owes, frees its own. */
    for (struct signing *s = eg->signings; s; s = s->next)
        s->eg = NULL;
    eg->signings = NULL;
}

static void wait_remove(struct conn *c)
{
    struct signing *s = c->signing;
    if (!s) return;
    if (c->wait_prev)
        c->wait_prev->wait_next = c->wait_next;
    else
        s->waiters = c->wait_next;
    if (c->wait_next) c->wait_next->wait_prev = c->wait_prev;
    c->wait_prev = c->wait_next = NULL;
    c->signing = NULL;
}

void intercept_stop(struct conn *c)
{
    wait_remove(c); /* a connection closed while its leaf is being signed */
    struct intercept *t = c->tls;
    if (!t) return;
    if (t->down) bufferevent_free(t->down); /* closes the fds: conn_close must not */
    if (t->up) bufferevent_free(t->up);
    if (t->trailers) evbuffer_free(t->trailers);
    if (t->ended) event_free(t->ended);
    redactor_fini(&t->rd);
    free(t);
    c->tls = NULL;
}

/* A short answer to the sandbox, then the end of the connection. */
static void answer_and_close(struct intercept *t, const char *status, const char *why)
{
    evbuffer_add_printf(bufferevent_get_output(t->down),
                        "HTTP/1.1 %s\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                        "Content-Length: %zu\r\n\r\n%s\n",
                        status, strlen(why) + 1, why);
    t->closing = true;
    t->complete = true; /* a whole answer: the sandbox gets a close_notify after it */
    bufferevent_disable(t->up, EV_READ | EV_WRITE);
}

/* Refuses the request being read: at once when every forwarded request has
 * its answer, else after the last of them. Nothing more is read from the
 * sandbox either way. */
static void refuse_request(struct intercept *t, const char *status, const char *why)
{
    bufferevent_disable(t->down, EV_READ);
    egress_refused(t->c->es, t->c->name, t->c->port, why, "request");
    if (t->answered == t->forwarded) return answer_and_close(t, status, why);
    t->refusal_status = status;
    t->refusal_why = why; /* static strings */
}

static const char *decide(void *arg, const struct http_request *req,
                          const struct http_placeholder *ph, size_t *len)
{
    struct intercept *t = arg;
    struct egress *eg = t->c->es->eg;
    if (t->plain) {
        char host[64];
        const char *to = t->c->name[0] ? t->c->name : req->host;
        snprintf(host, sizeof host, "%s", to);
        eg->secrets->misdirected(eg->secrets_arg, t->c->es->id, host, ph->token, "plain HTTP");
        return NULL;
    }
    if (t->n_opened == OPENED_MAX) {
        t->too_many = true; /* the request is refused whole: see forward_head */
        return NULL;
    }
    bool limited = false;
    char *v = eg->secrets->value(eg->secrets_arg, t->c->es->id, req->host, t->c->port, req->method,
                                 req->path, ph->token, len, &limited);
    if (!v) return NULL;
    /* Swapped in only if it will be looked for in the answers: else the
     * request is refused whole (forward_head). */
    if (t->scan && redactor_add(&t->rd, v, *len, ph->token) < 0) t->unredactable = true;
    t->limited = t->limited || limited;
    t->opened[t->n_opened] = v;
    t->opened_len[t->n_opened++] = *len;
    return v;
}

static void eg_release_headers(struct intercept *t, struct secret_header *h, int n)
{
    t->c->es->eg->secrets->release_headers(h, (size_t)n);
}

static void release_opened(struct intercept *t)
{
    struct egress *eg = t->c->es->eg;
    for (size_t i = 0; i < t->n_opened; i++)
        eg->secrets->release(t->opened[i], t->opened_len[i]);
    t->n_opened = 0;
    t->limited = t->too_many = t->unredactable = false;
}

/* The fields the sandbox's secrets set on this request (their header and
 * format), each value opened and added to the answers' scan; the request's own
 * fields of those names are not forwarded (the secret's replaces them). How
 * many, or -EPROTO after the request was marked refused (too_many/unredactable). */
static int secret_headers(struct intercept *t, const char *buf, struct http_request *req,
                          struct secret_header *h, size_t max)
{
    struct egress *eg = t->c->es->eg;
    if (t->plain || !eg->secrets->headers) return 0;
    int n = eg->secrets->headers(eg->secrets_arg, t->c->es->id, req->host, t->c->port, req->method,
                                 req->path, h, max);
    if (n < 0) {
        t->too_many = true; /* refused whole, as for placeholders past OPENED_MAX */
        return -EPROTO;
    }
    for (int i = 0; i < n; i++) {
        if (t->scan && redactor_add(&t->rd, h[i].value, h[i].value_len, h[i].placeholder) < 0)
            t->unredactable = true;
        t->limited = t->limited || h[i].limited;
        size_t len = strlen(h[i].name);
        for (size_t f = 0; f < req->nfields; f++) {
            const struct http_field *fl = &req->fields[f];
            if (fl->name.len == len && strncasecmp(buf + fl->name.off, h[i].name, len) == 0)
                req->fields[f].hop = true;
        }
    }
    return n;
}

/* Appends the secrets' fields before the head's final empty line; false when out
 * has no room (it was sized for them). */
static bool add_secret_headers(char *out, size_t out_size, size_t *out_len,
                               const struct secret_header *h, int n)
{
    for (int i = 0; i < n; i++) {
        size_t name = strlen(h[i].name), need = name + 2 + h[i].text_len + 2;
        if (*out_len + need > out_size) return false;
        char *at = out + *out_len - 2; /* over the final CRLF, written again below */
        memcpy(at, h[i].name, name);
        memcpy(at + name, ": ", 2);
        memcpy(at + name + 2, h[i].text, h[i].text_len);
        memcpy(at + name + 2 + h[i].text_len, "\r\n\r\n", 4);
        *out_len += need;
    }
    return true;
}

/* Marks the request's Accept-Encoding fields not to be forwarded. */
static void drop_accept_encoding(const char *buf, struct http_request *req)
{
    for (size_t i = 0; i < req->nfields; i++) {
        const struct http_field *f = &req->fields[i];
        if (f->name.len == 15 && strncasecmp(buf + f->name.off, "accept-encoding", 15) == 0)
            req->fields[i].hop = true;
    }
}

/* One request head: parse, check Host, rewrite, forward. Returns 1 when it was
 * forwarded, 0 when more bytes are needed, -EPROTO when the request is refused
 * (the refusal is on its way and nothing more is read), or -ENOMEM (nothing
 * was read: the next read tries again). */
static int forward_head(struct intercept *t, struct evbuffer *in)
{
    size_t have = evbuffer_get_length(in);
    size_t look = have < HEAD_MAX ? have : HEAD_MAX;
    const char *buf = (const char *)evbuffer_pullup(in, (ssize_t)look);
    struct http_request *req = malloc(sizeof *req);
    const char *why = NULL;
    if (!req) return -ENOMEM;
    enum http_result r = http_request_parse(buf, look, HEAD_MAX, req, &why);
    if (r == HTTP_MORE) {
        free(req);
        return 0;
    }
    if (r == HTTP_BAD) {
        refuse_request(t, "400 Bad Request", why);
        free(req);
        return -EPROTO;
    }
    /* Host names the connection's own host and port (no port: the scheme's). */
    if ((t->c->name[0] && strcmp(req->host, t->c->name) != 0) ||
        (req->port && req->port != t->c->port)) {
        refuse_request(t, "421 Misdirected Request", "host_mismatch");
        free(req);
        return -EPROTO;
    }
    struct secret_header hdrs[OPENED_MAX];
    int n_hdrs = secret_headers(t, buf, req, hdrs, OPENED_MAX);
    size_t extra = 0;
    for (int i = 0; i < n_hdrs; i++)
        extra += strlen(hdrs[i].name) + 4 + hdrs[i].text_len;
    size_t out_size = req->head_len + 64 * 1024 + extra, out_len = 0;
    char *out = malloc(out_size);
    /* Answers are scanned for the values as bytes: a compressed one would hide
     * them. Without Accept-Encoding any coding is acceptable (RFC 9110 12.5.3),
     * so the field is replaced (or added), not dropped. */
    if (t->scan) drop_accept_encoding(buf, req);
    r = out ? http_request_rewrite(buf, req, PLACEHOLDER_PREFIX, decide, t, out, out_size, &out_len,
                                   &why)
            : HTTP_BAD;
    if (r == HTTP_OK && t->too_many) {
        r = HTTP_BAD;
        why = "too_many_placeholders";
    } else if (r == HTTP_OK && t->unredactable) {
        r = HTTP_BAD;
        why = "too_many_secrets_on_connection";
    } else if (r == HTTP_OK && t->limited && http_request_overrides(buf, req)) {
        r = HTTP_BAD;
        why = "override_header_with_limited_secret";
    }
    if (r == HTTP_OK && n_hdrs > 0 && !add_secret_headers(out, out_size, &out_len, hdrs, n_hdrs)) {
        r = HTTP_BAD;
        why = "out of memory";
    }
    if (n_hdrs > 0) eg_release_headers(t, hdrs, n_hdrs);
    release_opened(t);
    if (r == HTTP_OK && !req->keep_alive && out_len + 19 <= out_size) {
        /* The rewrite forwards no Connection field: say close when the client did. */
        memcpy(out + out_len - 2, "Connection: close\r\n\r\n", 21);
        out_len += 19;
    }
    if (r == HTTP_OK && t->scan && out_len + 27 <= out_size) {
        memcpy(out + out_len - 2, "Accept-Encoding: identity\r\n\r\n", 29);
        out_len += 27;
    }
    if (r == HTTP_OK) {
        bufferevent_write(t->up, out, out_len);
        explicit_bzero(out, out_len); /* it may hold values */
        evbuffer_drain(in, req->head_len);
        http_body_init(&t->body, req);
        t->in_body = true;
        t->is_head[t->forwarded % 64] = strcmp(req->method, "HEAD") == 0;
        t->forwarded++;
    } else {
        refuse_request(t, "400 Bad Request", why ? why : "out of memory");
    }
    free(out);
    free(req);
    return r == HTTP_OK ? 1 : -EPROTO;
}

/* Body bytes of the current request, exactly as its framing says. Returns 1
 * when the body is whole, 0 when more bytes are needed, -EPROTO when it is
 * refused. */
static int forward_body(struct intercept *t, struct evbuffer *in)
{
    size_t have = evbuffer_get_length(in), used = 0;
    const char *why = NULL;
    const char *buf = (const char *)evbuffer_pullup(in, (ssize_t)have);
    enum http_result r = http_body_feed(&t->body, buf, have, &used, &why);
    if (used) evbuffer_remove_buffer(in, bufferevent_get_output(t->up), used);
    if (r == HTTP_BAD) {
        /* The head is out already: the upstream waits for a body that never ends.
         * Its answer can never come, so the sandbox gets the 400 at once when no
         * earlier answer is still due (else the connection ends). */
        t->answered++;
        refuse_request(t, "400 Bad Request", why);
        return -EPROTO;
    }
    if (r == HTTP_OK) t->in_body = false;
    return r == HTTP_OK ? 1 : 0;
}

static void on_down_read(struct bufferevent *bev, void *arg)
{
    struct intercept *t = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    /* No value is opened for a host whose certificate has not been checked. */
    if (!t->up_ready) return;
    int r = 1;
    while (r > 0 && evbuffer_get_length(in) > 0)
        r = t->in_body ? forward_body(t, in) : forward_head(t, in);
    /* Too many unanswered requests or too much queued: wait for the upstream. */
    if (r >= 0 && (evbuffer_get_length(bufferevent_get_output(t->up)) > FLOW_HIGH ||
                   t->forwarded - t->answered >= 64))
        bufferevent_disable(bev, EV_READ);
}

/* The value of a field in a lower-cased head (name given with its CRLF and
 * colon), leading blanks skipped; NULL when absent. */
static const char *header_value(const char *head, size_t len, const char *name)
{
    const char *p = memmem(head, len, name, strlen(name));
    if (!p) return NULL;
    p += strlen(name);
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

/* What an answer's head says of its body. */
struct answer_frame {
    bool interim;     /* 1xx but 101: the real answer follows */
    bool until_close; /* no framing: the body ends when the upstream closes */
    enum http_framing framing;
    uint64_t content_length;
};

/* The framing of an answer from its head: 1xx (but 101) come before the real
 * answer; HEAD, 204 and 304 have no body; else Content-Length, chunked, or
 * until the upstream closes. -ENOMEM. */
static int answer_frame(const struct intercept *t, const char *raw, size_t len,
                        struct answer_frame *f)
{
    char *head = malloc(len + 1); /* a lower-cased copy: what is sent stays as it is */
    if (!head) return -ENOMEM;
    for (size_t i = 0; i < len; i++)
        head[i] = (char)tolower((unsigned char)raw[i]);
    head[len] = '\0';
    int status = len > 12 ? atoi(head + 9) : 0;
    *f = (struct answer_frame){.framing = HTTP_BODY_NONE};
    f->interim = status >= 100 && status < 200 && status != 101;
    bool no_body = t->is_head[t->answered % 64] || status == 204 || status == 304;
    const char *cl = header_value(head, len, "\r\ncontent-length:");
    const char *te = header_value(head, len, "\r\ntransfer-encoding:");
    if (te && strncmp(te, "chunked", 7) != 0) te = NULL;
    if (f->interim || no_body) {
    } else if (te) {
        f->framing = HTTP_BODY_CHUNKED;
    } else if (cl) {
        f->framing = HTTP_BODY_LENGTH;
        f->content_length = strtoull(cl, NULL, 10);
    } else {
        f->until_close = true;
    }
    free(head);
    return 0;
}

static void answer_done(struct intercept *t)
{
    t->resp_in_body = false;
    t->answered++;
}

/* One whole answer head: scanned for the connection's values, its framing
 * read, sent on. 0 when it is not whole yet, 1 when it was sent, -ENOMEM, or
 * -EPROTO when a value found in it was part of its framing (the connection
 * must end: the proxy and the sandbox would frame the answer differently). */
static int relay_head(struct intercept *t, struct evbuffer *in, struct evbuffer *out)
{
    struct evbuffer_ptr end = evbuffer_search(in, "\r\n\r\n", 4, NULL);
    if (end.pos < 0) return 0;
    size_t hlen = (size_t)end.pos + 4;
    char *head = malloc(hlen);
    if (!head) return -ENOMEM;
    evbuffer_remove(in, head, hlen);
    struct answer_frame f, g;
    int r = answer_frame(t, head, hlen, &f);
    if (r == 0 && t->scan && !reflect_empty(t->rd.reflect)) {
        redactor_answer_start(&t->rd);
        redactor_head(&t->rd, head, hlen);
        r = answer_frame(t, head, hlen, &g);
        if (r == 0 && (f.interim != g.interim || f.until_close != g.until_close ||
                       f.framing != g.framing || f.content_length != g.content_length))
            r = -EPROTO;
    }
    if (r == 0) evbuffer_add(out, head, hlen);
    free(head);
    if (r < 0 || f.interim) return r < 0 ? r : 1;
    struct http_request fake = {.framing = f.framing, .content_length = f.content_length};
    http_body_init(&t->resp, &fake);
    t->resp_until_close = f.until_close;
    t->resp_rechunk = t->scan && f.framing == HTTP_BODY_CHUNKED;
    t->resp_last_chunk = false;
    t->resp_in_body = true;
    if (!f.until_close && http_body_done(&t->resp)) answer_done(t); /* no body */
    return 1;
}

/* Body bytes of an answer on a connection that is not scanned: as they come. */
static int relay_body_as_is(struct intercept *t, struct evbuffer *in, struct evbuffer *out)
{
    size_t have = evbuffer_get_length(in), used = 0;
    const char *why;
    const char *b = (const char *)evbuffer_pullup(in, (ssize_t)have);
    enum http_result r = http_body_feed(&t->resp, b, have, &used, &why);
    evbuffer_remove_buffer(in, out, used);
    if (r == HTTP_MORE) return 0;
    if (r == HTTP_BAD) { /* not ours to judge: pass the rest through */
        t->resp_until_close = true;
        return 1;
    }
    answer_done(t);
    return 1;
}

/* The trailer section of a chunked answer, whole: scanned like a head. */
static int relay_trailers(struct intercept *t, struct evbuffer *out)
{
    size_t n = t->trailers ? evbuffer_get_length(t->trailers) : 0;
    if (n == 0) return 0;
    char *b = (char *)evbuffer_pullup(t->trailers, (ssize_t)n);
    if (!b) return -ENOMEM;
    redactor_head(&t->rd, b, n);
    evbuffer_add(out, b, n);
    evbuffer_drain(t->trailers, n);
    return 0;
}

/* One framing byte of a chunked answer on a scanned connection: chunk-size
 * lines and CRLFs are dropped (relay_body writes its own), the trailer
 * section is kept to be scanned whole. 1, 0 when the framing is broken (the
 * rest then passes, scanned, as if until the upstream closes), or -ENOMEM. */
static int framing_byte(struct intercept *t, struct evbuffer *in, struct evbuffer *out)
{
    char c;
    size_t used;
    const char *why;
    evbuffer_copyout(in, &c, 1);
    bool trailer = http_body_in_trailers(&t->resp);
    if (http_body_feed(&t->resp, &c, 1, &used, &why) == HTTP_BAD) {
        t->resp_until_close = true;
        return redactor_flush(&t->rd, out, t->resp_rechunk && !t->resp_last_chunk) < 0 ? -ENOMEM
                                                                                       : 0;
    }
    evbuffer_drain(in, 1);
    if (trailer) {
        if (!t->trailers && !(t->trailers = evbuffer_new())) return -ENOMEM;
        evbuffer_add(t->trailers, &c, 1);
    } else if (http_body_in_trailers(&t->resp)) { /* the last chunk's line has been read */
        if (redactor_flush(&t->rd, out, true) < 0) return -ENOMEM;
        evbuffer_add(out, "0\r\n", 3);
        t->resp_last_chunk = true;
    }
    return 1;
}

/* Body bytes of the answer being relayed on a scanned connection: its content
 * through the scan, in order. 1 when the answer ended (or turned into
 * until-close), 0 when more bytes are needed, -ENOMEM. */
static int relay_body_scanned(struct intercept *t, struct evbuffer *in, struct evbuffer *out)
{
    while (evbuffer_get_length(in) > 0 && !http_body_done(&t->resp)) {
        uint64_t data = http_body_data_left(&t->resp);
        size_t have = evbuffer_get_length(in);
        if (data > 0) {
            size_t n = data < have ? (size_t)data : have;
            http_body_take_data(&t->resp, n);
            if (redactor_content(&t->rd, in, n, out, t->resp_rechunk) < 0) return -ENOMEM;
            continue;
        }
        int r = framing_byte(t, in, out);
        if (r <= 0) return r;
    }
    if (!http_body_done(&t->resp)) return 0;
    int r = t->resp_rechunk ? relay_trailers(t, out) : redactor_flush(&t->rd, out, false);
    if (r < 0) return r;
    answer_done(t);
    return 1;
}

/* Moves complete answer heads and their bodies to the sandbox, counting each
 * answer; a partial head waits for the rest. Negative when the connection must
 * end. */
static int relay_answers(struct intercept *t, struct evbuffer *in, struct evbuffer *out)
{
    int r = 1;
    while (r > 0 && evbuffer_get_length(in) > 0) {
        if (t->resp_until_close)
            return t->scan ? redactor_content(&t->rd, in, evbuffer_get_length(in), out, false)
                           : evbuffer_add_buffer(out, in);
        if (!t->resp_in_body)
            r = relay_head(t, in, out);
        else if (t->scan)
            r = relay_body_scanned(t, in, out);
        else
            r = relay_body_as_is(t, in, out);
    }
    return r < 0 ? r : 0;
}

/* The upstream ended: what the scan still holds of the answer is settled and sent. */
static int relay_last(struct intercept *t, struct evbuffer *out)
{
    if (!t->scan || !(t->resp_in_body || t->resp_until_close)) return 0;
    return redactor_flush(&t->rd, out, t->resp_rechunk && !t->resp_last_chunk);
}

/* What the upstream sent, on to the sandbox. False when the connection was
 * closed (t is gone). */
static bool up_read(struct intercept *t)
{
    if (relay_answers(t, bufferevent_get_input(t->up), bufferevent_get_output(t->down)) < 0) {
        egress_refused(t->c->es, t->c->name, t->c->port, "answer_not_redactable", "answer");
        conn_close(t->c);
        return false;
    }
    if (t->refusal_why && t->answered == t->forwarded)
        answer_and_close(t, t->refusal_status, t->refusal_why);
    else if (evbuffer_get_length(bufferevent_get_output(t->down)) > FLOW_HIGH)
        bufferevent_disable(t->up, EV_READ);
    return true;
}

static void on_up_read(struct bufferevent *bev, void *arg)
{
    up_read(arg);
}

/* The other side drained: read again. */
/* The connection ends. After a whole answer, the sandbox is told with a
 * close_notify, whatever the upstream did: the answer's framing says it is
 * complete (or it ended with the connection). A cut-short one ends without,
 * as the upstream's did, so the sandbox's TLS sees it cut short too. */
static void finish(struct intercept *t)
{
    if (t->complete) {
        SSL *ssl = bufferevent_openssl_get_ssl(t->down);
        if (ssl && SSL_is_init_finished(ssl))
            SSL_shutdown(ssl); /* a few bytes: the socket takes them */
        ERR_clear_error();
    }
    conn_close(t->c);
}

static void on_down_written(struct bufferevent *bev, void *arg)
{
    struct intercept *t = arg;
    if (t->closing) return finish(t);
    bufferevent_enable(t->up, EV_READ);
    if (!t->refusal_why && t->forwarded - t->answered < 64) bufferevent_enable(t->down, EV_READ);
}

static void on_up_written(struct bufferevent *bev, void *arg)
{
    struct intercept *t = arg;
    if (!t->closing && !t->refusal_why && t->forwarded - t->answered < 64)
        bufferevent_enable(t->down, EV_READ);
}

/* Whether the upstream's error is only the end of its connection: a reset,
 * or (OpenSSL 3) the end of the TCP stream with no close_notify before it;
 * once the handshake is done (before, any end is the handshake's failure;
 * SSL_is_init_finished cannot tell once an error has been met).
 * Takes libevent's queue of OpenSSL errors; *tls: some error was TLS's. */
static bool only_ended(struct bufferevent *up, bool handshake_done, bool *tls)
{
    bool other = !handshake_done;
    *tls = false;
    for (unsigned long e; (e = bufferevent_get_openssl_error(up)) != 0;) {
        if (e < 16) continue; /* libevent's note of SSL_get_error()'s kind */
#ifdef SSL_R_UNEXPECTED_EOF_WHILE_READING
        if (handshake_done && ERR_GET_LIB(e) == ERR_LIB_SSL &&
            ERR_GET_REASON(e) == SSL_R_UNEXPECTED_EOF_WHILE_READING)
            continue;
#endif
        *tls = other = true;
    }
    ERR_clear_error();
    return !other;
}

/* Why what the upstream sent before it ended is not a whole answer, or NULL. */
static const char *cut_short(struct intercept *t)
{
    if (t->resp_until_close) return NULL; /* the end of the connection ends it */
    if (evbuffer_get_length(bufferevent_get_input(t->up)) > 0 || t->resp_in_body)
        return "the upstream closed in the middle of an answer";
    if (t->forwarded != t->answered) return "the upstream closed before answering";
    return NULL;
}

/* Whether the upstream ended with a close_notify (plain HTTP: a FIN is all there is). */
static bool up_notified(struct intercept *t)
{
    SSL *ssl = bufferevent_openssl_get_ssl(t->up);
    return !ssl || (SSL_get_shutdown(ssl) & SSL_RECEIVED_SHUTDOWN);
}

static void upstream_ended(evutil_socket_t fd, short what, void *arg)
{
    struct intercept *t = arg;
    if (!up_read(t)) return;
    relay_last(t, bufferevent_get_output(t->down));
    const char *why = cut_short(t);
    if (why) egress_truncated(t->c->es, t->c->name, t->c->port, why, t->notified);
    t->complete = !why;
    while (bufferevent_get_openssl_error(t->up)) {
    }
    ERR_clear_error();
    bufferevent_disable(t->up, EV_READ | EV_WRITE);
    if (evbuffer_get_length(bufferevent_get_output(t->down)) == 0) return finish(t);
    t->closing = true; /* on_down_written finishes once it is sent */
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    struct intercept *t = arg;
    if (bev == t->up && (what & BEV_EVENT_CONNECTED)) {
        t->up_ready = true;
        return on_down_read(t->down, t); /* what the sandbox sent meanwhile */
    }
    if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT))) return;
    /* The upstream said its last word (after Connection: close, or closing
     * with or without close_notify, or with a reset): the sandbox still gets
     * every byte of it before the connection ends. */
    bool tls = false;
    if (bev == t->up && ((what & BEV_EVENT_EOF) ||
                         ((what & BEV_EVENT_ERROR) && only_ended(bev, t->up_ready, &tls)))) {
        bufferevent_disable(t->up, EV_READ | EV_WRITE);
        t->notified = (what & BEV_EVENT_EOF) && up_notified(t);
        return event_active(t->ended, EV_TIMEOUT, 0);
    }
    if (tls) { /* libevent moved OpenSSL's errors to its own queue before calling us */
        long v = SSL_get_verify_result(bufferevent_openssl_get_ssl(bev));
        char reason[160];
        snprintf(reason, sizeof reason, "upstream_tls_failed%s%s", v != X509_V_OK ? ": " : "",
                 v != X509_V_OK ? X509_verify_cert_error_string(v) : "");
        egress_refused(t->c->es, t->c->name, t->c->port, reason, "connect");
    }
    while (bufferevent_get_openssl_error(bev)) {
    }
    ERR_clear_error();
    conn_close(t->c);
}

static SSL *upstream_ssl(struct egress *eg, const char *name, bool is_ip)
{
    SSL *ssl = SSL_new(eg->tls_up);
    if (!ssl) return NULL;
    if (is_ip) {
        X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name);
    } else {
        SSL_set_tlsext_host_name(ssl, name);
        SSL_set1_host(ssl, name);
    }
    return ssl;
}

/* A value swapped into this connection came back in an answer: reported, never the value. */
static void on_reflected(void *arg, const char *placeholder, const char *encoding)
{
    struct intercept *t = arg;
    struct egress *eg = t->c->es->eg;
    if (eg->secrets->reflected)
        eg->secrets->reflected(eg->secrets_arg, t->c->es->id, t->c->name, placeholder, encoding);
}

/* Hands c's two sockets to t's bufferevents (made by the caller) and starts
 * reading both sides. */
static int intercept_begin(struct conn *c, struct intercept *t)
{
    c->client = c->upstream = -1; /* the bufferevents own them now */
    c->tls = t;
    c->state = CONN_INTERCEPTING;
    t->ended = event_new(c->es->eg->base, -1, 0, upstream_ended, t);
    if (!t->down || !t->up || !t->ended) return -ENOMEM; /* conn_close frees t */
    bufferevent_setcb(t->down, on_down_read, on_down_written, on_event, t);
    bufferevent_setcb(t->up, on_up_read, on_up_written, on_event, t);
    bufferevent_enable(t->down, EV_READ | EV_WRITE);
    bufferevent_enable(t->up, EV_READ | EV_WRITE);
    return 0;
}

/* Plain HTTP from a sandbox that holds secrets: every request is read as on an
 * intercepted connection (strictly), so that each placeholder in it is
 * reported; nothing is ever swapped in. */
static int plain_start(struct conn *c)
{
    struct egress *eg = c->es->eg;
    struct intercept *t = calloc(1, sizeof *t);
    if (!t) return -ENOMEM;
    t->c = c;
    t->plain = true;
    t->up_ready = true;
    t->down = bufferevent_socket_new(eg->base, c->client, BEV_OPT_CLOSE_ON_FREE);
    t->up = bufferevent_socket_new(eg->base, c->upstream, BEV_OPT_CLOSE_ON_FREE);
    return intercept_begin(c, t);
}

/* TLS on both sides, c's host's leaf toward the sandbox. */
static int tls_start(struct conn *c, X509 *cert)
{
    struct egress *eg = c->es->eg;
    struct intercept *t = calloc(1, sizeof *t);
    SSL *down = SSL_new(eg->tls_down);
    struct policy_addr ignored;
    SSL *up = upstream_ssl(eg, c->name, policy_parse_ip(c->name, &ignored) == 0);
    int r = !t || !down || !up ? -ENOMEM : 0;
    if (r == 0 && (SSL_use_certificate(down, cert) != 1 ||
                   SSL_use_PrivateKey(down, mitm_leaves_key(eg->leaves)) != 1))
        r = -EPROTO;
    if (r < 0) {
        free(t);
        if (down) SSL_free(down);
        if (up) SSL_free(up);
        return r;
    }
    t->c = c;
    t->scan = true;
    redactor_init(&t->rd, eg, on_reflected, t);
    t->down = bufferevent_openssl_socket_new(eg->base, c->client, down, BUFFEREVENT_SSL_ACCEPTING,
                                             BEV_OPT_CLOSE_ON_FREE);
    t->up = bufferevent_openssl_socket_new(eg->base, c->upstream, up, BUFFEREVENT_SSL_CONNECTING,
                                           BEV_OPT_CLOSE_ON_FREE);
    r = intercept_begin(c, t);
    if (r == 0) bufferevent_setwatermark(t->down, EV_WRITE, 0, 0);
    /* An upstream that closes without close_notify after its answer is common;
     * whether the answer is whole is the HTTP framing's to say (upstream_ended). */
    if (r == 0) bufferevent_openssl_set_allow_dirty_shutdown(t->up, 1);
    return r;
}

static void signing_unlink(struct signing *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        s->eg->signings = s->next;
    if (s->next) s->next->prev = s->prev;
    s->prev = s->next = NULL;
}

/* The leaf is cached and every connection waiting for it goes on; without
 * one, they are closed, as when intercept_start fails. */
static void on_signed(int r, const uint8_t *der, size_t der_len, void *arg)
{
    struct signing *s = arg;
    struct egress *eg = s->eg;
    X509 *cert = NULL;
    if (eg) signing_unlink(s);
    if (eg && r == 0) {
        err_t err = {0};
        if (mitm_leaves_put(eg->leaves, s->name, der, der_len, &err) == 0)
            cert = mitm_leaves_get(eg->leaves, s->name);
        else
            log_warn("no certificate for %s: %s", s->name, err.msg);
    }
    while (s->waiters) {
        struct conn *c = s->waiters;
        wait_remove(c);
        if (!cert || tls_start(c, cert) < 0) conn_close(c);
    }
    free(s);
}

static struct signing *signing_new(struct egress *eg, const char *name)
{
    struct signing *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->eg = eg;
    snprintf(s->name, sizeof s->name, "%s", name);
    size_t spki_len;
    const uint8_t *spki = mitm_leaves_spki(eg->leaves, &spki_len);
    if (eg->sign(eg->event_arg, name, spki, spki_len, on_signed, s) < 0) {
        free(s);
        return NULL;
    }
    s->next = eg->signings;
    if (eg->signings) eg->signings->prev = s;
    eg->signings = s;
    return s;
}

/* Parks c, reading nothing, until its host's leaf is signed. -EIO when the
 * signer cannot be asked (it has exited, say): c is closed then, at once. */
static int wait_for_leaf(struct conn *c)
{
    struct egress *eg = c->es->eg;
    struct signing *s = eg->signings;
    while (s && strcmp(s->name, c->name) != 0)
        s = s->next;
    if (!s) s = signing_new(eg, c->name);
    if (!s) return -EIO;
    c->signing = s;
    c->wait_next = s->waiters;
    if (s->waiters) s->waiters->wait_prev = c;
    s->waiters = c;
    c->state = CONN_SIGNING;
    return 0;
}

int intercept_start(struct conn *c)
{
    struct egress *eg = c->es->eg;
    if (c->plain_http) return plain_start(c);
    X509 *cert = mitm_leaves_get(eg->leaves, c->name);
    return cert ? tls_start(c, cert) : wait_for_leaf(c);
}
