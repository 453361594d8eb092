/* HTTP/1.1 transport of the CLI: one request per connection, to the daemon's unix
 * socket or to RUNTIME_API_URL (http, or https through OpenSSL).
 *
 * Not libcurl: loading it and the libraries it links (LDAP, Kerberos, GnuTLS, SSH,
 * RTMP, ...) took 4-5 ms of every command's 5.4 ms start, and none of them is wanted in
 * a process that holds an API key. What the daemon's API needs is small: a request with
 * a Content-Length body, and an answer framed by Content-Length, chunks or the end of
 * the connection. */
#include "cli.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* Answers bigger than this are not JSON we want to hold in memory. */
#define MAX_BODY (256u << 20)
#define MAX_HEAD (64u << 10)
#define CONNECT_TIMEOUT_MS 10000

volatile sig_atomic_t http_interrupted;

static void on_signal(int sig)
{
    http_interrupted = sig;
}

void http_catch_signals(void)
{
    /* No SA_RESTART: a waiting poll() returns, and the transfer sees the flag. */
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

void http_default_signals(void)
{
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
}

void http_global_init(void)
{
    /* Output goes to pipes that may close early; a write error beats dying mid-cleanup. */
    signal(SIGPIPE, SIG_IGN);
}

void http_resp_free(struct http_resp *r)
{
    free(r->body);
    r->body = NULL;
    r->len = 0;
}

/* ---- the daemon's address ---- */

struct url {
    bool tls;
    char host[256]; /* without an IPv6 address's brackets */
    char port[8];
    const char *base; /* the URL's path, without its trailing slashes */
    size_t base_len;
};

/* http(s)://HOST[:PORT][/PATH]; false when it is not that. */
static bool parse_url(const char *s, struct url *u)
{
    *u = (struct url){0};
    if (strncasecmp(s, "https://", 8) == 0)
        u->tls = true, s += 8;
    else if (strncasecmp(s, "http://", 7) == 0)
        s += 7;
    else
        return false;
    size_t auth = strcspn(s, "/?#");
    const char *end = s + auth, *host = s, *host_end;
    if (memchr(s, '@', auth)) return false; /* no credentials in the URL */
    if (*s == '[') {
        host = s + 1;
        host_end = memchr(host, ']', (size_t)(end - host));
        if (!host_end) return false;
        s = host_end + 1;
    } else {
        host_end = memchr(s, ':', auth);
        if (!host_end) host_end = end;
        s = host_end;
    }
    size_t hl = (size_t)(host_end - host);
    if (hl == 0 || hl >= sizeof u->host) return false;
    memcpy(u->host, host, hl);
    const char *port = u->tls ? "443" : "80";
    size_t pl = strlen(port);
    if (s < end && *s == ':') {
        port = s + 1;
        pl = (size_t)(end - port);
        if (pl == 0 || pl >= sizeof u->port || strspn(port, "0123456789") < pl) return false;
    } else if (s != end) {
        return false;
    }
    memcpy(u->port, port, pl);
    if (*end && *end != '/') return false; /* a query or fragment is not a base */
    u->base = end;
    u->base_len = strlen(end);
    while (u->base_len > 0 && u->base[u->base_len - 1] == '/')
        u->base_len--;
    return true;
}

/* ---- one connection, plain or TLS, non-blocking ---- */

struct wire {
    int fd;
    SSL_CTX *ctx;
    SSL *ssl;
    const struct http_req *req;
    char why[300];  /* what failed, for the message */
    int err;        /* its errno, or 0 */
    bool untrusted; /* the daemon's certificate did not verify */
    bool connected; /* (and TLS set up): what fails from now on is the daemon's answer */
    bool interrupted;
};

static int fail(struct wire *w, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct wire *w, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->why, sizeof w->why, fmt, ap);
    va_end(ap);
    w->err = err;
    return -1;
}

/* Waits until fd is ready for one of events; its revents, or -1 with why (timed out, or
 * a signal the request gives way to). deadline_ms 0: none. */
static int wait_ready(struct wire *w, short events, uint64_t deadline_ms)
{
    for (;;) {
        int left = deadline_ms ? (int)((int64_t)deadline_ms - (int64_t)now_ms()) : -1;
        if (deadline_ms && left <= 0) return fail(w, ETIMEDOUT, "%s", strerror(ETIMEDOUT));
        struct pollfd p = {.fd = w->fd, .events = events};
        int n = poll(&p, 1, left);
        if (n > 0) return p.revents;
        if (n < 0 && errno != EINTR) return fail(w, errno, "%s", strerror(errno));
        if (w->req->interruptible && http_interrupted) {
            w->interrupted = true;
            return fail(w, EINTR, "interrupted");
        }
    }
}

static int connect_unix(struct wire *w, const char *path)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof a.sun_path)
        return fail(w, ENAMETOOLONG, "%s", strerror(ENAMETOOLONG));
    memcpy(a.sun_path, path, strlen(path));
    w->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (w->fd < 0 || connect(w->fd, (struct sockaddr *)&a, sizeof a) < 0)
        return fail(w, errno, "%s", strerror(errno));
    return fcntl(w->fd, F_SETFL, O_NONBLOCK) < 0 ? fail(w, errno, "%s", strerror(errno)) : 0;
}

static int connect_wait(struct wire *w, uint64_t deadline)
{
    if (wait_ready(w, POLLOUT, deadline) < 0) return -1;
    int soerr = 0;
    socklen_t len = sizeof soerr;
    if (getsockopt(w->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0) soerr = errno;
    return soerr ? fail(w, soerr, "%s", strerror(soerr)) : 0;
}

/* One address: a non-blocking connect, finished within the deadline. */
static int connect_addr(struct wire *w, const struct addrinfo *ai, uint64_t deadline)
{
    w->fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (w->fd < 0) return fail(w, errno, "%s", strerror(errno));
    int r = 0;
    if (connect(w->fd, ai->ai_addr, ai->ai_addrlen) < 0)
        r = errno == EINPROGRESS ? connect_wait(w, deadline)
                                 : fail(w, errno, "%s", strerror(errno));
    if (r < 0) {
        close(w->fd);
        w->fd = -1;
        return -1;
    }
    int one = 1;
    setsockopt(w->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return 0;
}

static int connect_tcp(struct wire *w, const struct url *u)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *list;
    int r = getaddrinfo(u->host, u->port, &hints, &list);
    if (r != 0) return fail(w, 0, "could not resolve host %s: %s", u->host, gai_strerror(r));
    uint64_t deadline = now_ms() + CONNECT_TIMEOUT_MS;
    r = -1;
    for (const struct addrinfo *ai = list; ai && r < 0 && !w->interrupted; ai = ai->ai_next)
        r = connect_addr(w, ai, deadline);
    freeaddrinfo(list);
    return r;
}

/* The TLS error at the top of OpenSSL's queue, or the certificate's verdict. */
static int tls_failed(struct wire *w, const char *what)
{
    long verdict = SSL_get_verify_result(w->ssl);
    if (verdict != X509_V_OK) {
        w->untrusted = true;
        return fail(w, 0, "certificate verify failed: %s", X509_verify_cert_error_string(verdict));
    }
    unsigned long e = ERR_get_error();
    const char *reason = e ? ERR_reason_error_string(e) : NULL;
    return fail(w, 0, "%s: %s", what, reason ? reason : "the connection closed");
}

/* Drives an SSL call that may want to wait: 1 to call it again, -1 failed. */
static int tls_wait(struct wire *w, int ret, const char *what)
{
    switch (SSL_get_error(w->ssl, ret)) {
    case SSL_ERROR_WANT_READ:
        return wait_ready(w, POLLIN, 0) < 0 ? -1 : 1;
    case SSL_ERROR_WANT_WRITE:
        return wait_ready(w, POLLOUT, 0) < 0 ? -1 : 1;
    default:
        return tls_failed(w, what);
    }
}

static int start_tls(struct wire *w, const struct url *u)
{
    const char *ca = getenv("RUNTIME_CA_FILE");
    w->ctx = SSL_CTX_new(TLS_client_method());
    if (!w->ctx) return fail(w, ENOMEM, "%s", strerror(ENOMEM));
    SSL_CTX_set_min_proto_version(w->ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(w->ctx, SSL_VERIFY_PEER, NULL);
    int loaded = ca && *ca ? SSL_CTX_load_verify_locations(w->ctx, ca, NULL)
                           : SSL_CTX_set_default_verify_paths(w->ctx);
    if (loaded != 1) {
        w->untrusted = true;
        return fail(w, 0, "cannot read the CA file %s", ca && *ca ? ca : "(the system's)");
    }
    w->ssl = SSL_new(w->ctx);
    if (!w->ssl || SSL_set_fd(w->ssl, w->fd) != 1) return fail(w, ENOMEM, "%s", strerror(ENOMEM));
    /* The name (or address) in the URL is what the certificate must be for. */
    unsigned char ip[16];
    bool literal = inet_pton(AF_INET, u->host, ip) == 1 || inet_pton(AF_INET6, u->host, ip) == 1;
    X509_VERIFY_PARAM *param = SSL_get0_param(w->ssl);
    if (literal
            ? X509_VERIFY_PARAM_set1_ip_asc(param, u->host) != 1
            : SSL_set_tlsext_host_name(w->ssl, u->host) != 1 || SSL_set1_host(w->ssl, u->host) != 1)
        return fail(w, EINVAL, "cannot check the certificate for %s", u->host);
    int r;
    while ((r = SSL_connect(w->ssl)) != 1)
        if (tls_wait(w, r, "TLS handshake failed") < 0) return -1;
    return 0;
}

static int wire_open(struct wire *w, struct cli *c, const struct url *u)
{
    int r = c->api_url ? connect_tcp(w, u) : connect_unix(w, c->socket);
    if (r == 0 && u->tls) r = start_tls(w, u);
    w->connected = r == 0;
    return r;
}

static void wire_close(struct wire *w)
{
    if (w->ssl) SSL_free(w->ssl);
    if (w->ctx) SSL_CTX_free(w->ctx);
    if (w->fd >= 0) close(w->fd);
}

/* Some bytes sent (> 0), 0 when the socket would block, -1 failed. */
static ssize_t send_some(struct wire *w, const char *p, size_t n)
{
    if (!w->ssl) {
        ssize_t k = send(w->fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno != EAGAIN && errno != EINTR)
            return fail(w, errno, "%s", strerror(errno));
        return k < 0 ? 0 : k;
    }
    size_t done = 0;
    int r = SSL_write_ex(w->ssl, p, n, &done);
    if (r == 1) return (ssize_t)done;
    if (SSL_get_error(w->ssl, r) == SSL_ERROR_WANT_WRITE) return 0;
    return tls_wait(w, r, "sending failed") < 0 ? -1 : 0;
}

/* Whether the daemon began its answer. Under TLS 1.3 the bytes to read may be only its
 * session tickets, which a peek takes without any answer to show. */
static bool answer_begun(struct wire *w)
{
    if (!w->ssl) return true;
    char ch;
    size_t got = 0;
    int r = SSL_peek_ex(w->ssl, &ch, 1, &got);
    int e = r == 1 ? SSL_ERROR_NONE : SSL_get_error(w->ssl, r);
    return e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE; /* data, or an end to report */
}

/* Sends n bytes: 0, 1 when the daemon answered before taking them all (a refused upload:
 * it reads no more, and the answer says why), or -1 failed. */
static int wire_write(struct wire *w, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = send_some(w, p, n);
        if (k < 0) return -1;
        p += k, n -= (size_t)k;
        if (k > 0) continue;
        int ready = wait_ready(w, POLLOUT | POLLIN, 0);
        if (ready < 0) return -1;
        if ((ready & POLLIN) && answer_begun(w)) return 1;
    }
    return 0;
}

/* Some bytes (> 0), 0 at the end of the connection, -1 failed. */
static ssize_t wire_read(struct wire *w, char *buf, size_t n)
{
    for (;;) {
        if (w->ssl) {
            size_t got = 0;
            int r = SSL_read_ex(w->ssl, buf, n, &got);
            if (r == 1) return (ssize_t)got;
            if (SSL_get_error(w->ssl, r) == SSL_ERROR_ZERO_RETURN) return 0;
            if (tls_wait(w, r, "receiving failed") < 0) return -1;
            continue;
        }
        ssize_t k = recv(w->fd, buf, n, 0);
        if (k >= 0) return k;
        if (errno != EAGAIN && errno != EINTR) return fail(w, errno, "%s", strerror(errno));
        if (wait_ready(w, POLLIN, 0) < 0) return -1;
    }
}

/* ---- the request ---- */

static char *request_head(struct cli *c, const struct http_req *req, const struct url *u,
                          size_t *len)
{
    char *head = NULL;
    FILE *f = open_memstream(&head, len);
    if (!f) return NULL;
    fprintf(f, "%s %.*s%s HTTP/1.1\r\n", req->method, (int)u->base_len, u->base ? u->base : "",
            req->path);
    if (!c->api_url)
        fputs("Host: localhost\r\n", f); /* the unix socket */
    else if (strchr(u->host, ':'))
        fprintf(f, "Host: [%s]:%s\r\n", u->host, u->port);
    else
        fprintf(f, "Host: %s:%s\r\n", u->host, u->port);
    fprintf(f, "User-Agent: runtime/%s\r\nAccept: application/json\r\nConnection: close\r\n",
            runtime_version());
    if (c->key[0]) fprintf(f, "Authorization: Bearer %s\r\n", c->key);
    if (req->content_type) fprintf(f, "Content-Type: %s\r\n", req->content_type);
    bool wants_body = strcmp(req->method, "POST") == 0 || strcmp(req->method, "PUT") == 0;
    if (req->body || wants_body) fprintf(f, "Content-Length: %zu\r\n", req->body_len);
    fputs("\r\n", f);
    if (fclose(f) != 0) {
        free(head);
        return NULL;
    }
    return head;
}

/* ---- the answer ---- */

struct reader {
    struct wire *w;
    char buf[16384];
    size_t at, end; /* what is read and not used yet */
    bool eof;
};

/* Reads more into buf once all of it is used: 1, 0 at the end, -1 failed. */
static int fill(struct reader *rd)
{
    rd->at = rd->end = 0;
    if (rd->eof) return 0;
    ssize_t n = wire_read(rd->w, rd->buf, sizeof rd->buf);
    if (n < 0) return -1;
    rd->eof = n == 0;
    rd->end = (size_t)n;
    return n > 0;
}

/* One line (without its CRLF) of at most max bytes into line; -1 failed. */
static int read_line(struct reader *rd, char *line, size_t max)
{
    size_t n = 0;
    for (;;) {
        while (rd->at < rd->end) {
            char ch = rd->buf[rd->at++];
            if (ch == '\n') {
                if (n && line[n - 1] == '\r') n--;
                line[n] = '\0';
                return 0;
            }
            if (n + 1 >= max) return fail(rd->w, 0, "the daemon's answer has a line too long");
            line[n++] = ch;
        }
        int r = fill(rd);
        if (r <= 0) return r < 0 ? -1 : fail(rd->w, 0, "the daemon closed the connection early");
    }
}

struct answer {
    struct http_resp *resp;
    const struct http_req *req;
    int64_t length; /* -1: to the end of the connection */
    bool chunked;
    int sink_err;
    bool too_big;
};

/* The status line and the headers the CLI reads; 1xx answers are skipped. */
static int read_head(struct reader *rd, struct answer *a)
{
    char line[8192];
    size_t total = 0;
    do {
        if (read_line(rd, line, sizeof line) < 0) return -1;
        int minor, status;
        if (sscanf(line, "HTTP/1.%d %3d", &minor, &status) != 2 || status < 100)
            return fail(rd->w, 0, "the answer is not HTTP");
        a->resp->status = status;
        a->length = -1;
        a->chunked = false;
        while (read_line(rd, line, sizeof line) == 0 && line[0]) {
            if ((total += strlen(line)) > MAX_HEAD)
                return fail(rd->w, 0, "the answer's head is too big");
            char *colon = strchr(line, ':');
            if (!colon) continue;
            *colon = '\0';
            char *value = colon + 1 + strspn(colon + 1, " \t");
            if (strcasecmp(line, "Content-Length") == 0 &&
                (a->length = strtoll(value, NULL, 10)) < 0)
                return fail(rd->w, 0, "the answer's Content-Length is not a length");
            else if (strcasecmp(line, "Transfer-Encoding") == 0)
                a->chunked = strcasestr(value, "chunked") != NULL;
            else if (strcasecmp(line, "X-File-Mode") == 0)
                a->resp->file_mode = (int)(strtoul(value, NULL, 8) & 0777);
        }
        if (rd->w->why[0]) return -1;
    } while (a->resp->status < 200);
    return 0;
}

/* Body bytes: to the sink file for a 2xx answer that asks for it, else collected. */
static int take(struct answer *a, const char *p, size_t n)
{
    bool ok = a->resp->status >= 200 && a->resp->status < 300;
    if (a->req->sink_fd >= 0 && ok) {
        int r = write_all(a->req->sink_fd, p, n);
        if (r < 0) a->sink_err = -r;
        return r < 0 ? -1 : 0;
    }
    struct http_resp *resp = a->resp;
    char *nb = resp->len + n <= MAX_BODY ? realloc(resp->body, resp->len + n + 1) : NULL;
    if (!nb) {
        a->too_big = true;
        return -1;
    }
    memcpy(nb + resp->len, p, n);
    resp->body = nb;
    resp->len += n;
    nb[resp->len] = '\0';
    return 0;
}

/* want bytes (-1: to the end of the connection) of body. */
static int read_span(struct reader *rd, struct answer *a, int64_t want)
{
    while (want != 0) {
        if (rd->at == rd->end) {
            int r = fill(rd);
            if (r < 0) return -1;
            if (r == 0) return want < 0 ? 0 : fail(rd->w, 0, "the daemon's answer ended early");
        }
        size_t n = rd->end - rd->at;
        if (want > 0 && (int64_t)n > want) n = (size_t)want;
        if (take(a, rd->buf + rd->at, n) < 0) return -1;
        rd->at += n;
        if (want > 0) want -= (int64_t)n;
    }
    return 0;
}

static int read_chunks(struct reader *rd, struct answer *a)
{
    char line[256];
    for (;;) {
        if (read_line(rd, line, sizeof line) < 0) return -1;
        char *end;
        unsigned long long size = strtoull(line, &end, 16);
        if (end == line || size > MAX_BODY)
            return fail(rd->w, 0, "the answer's chunks are malformed");
        if (size == 0) break;
        if (read_span(rd, a, (int64_t)size) < 0 || read_line(rd, line, sizeof line) < 0) return -1;
    }
    do /* trailers, up to the empty line */
        if (read_line(rd, line, sizeof line) < 0) return -1;
    while (line[0]);
    return 0;
}

static int read_answer(struct wire *w, const struct http_req *req, struct answer *a)
{
    struct reader *rd = calloc(1, sizeof *rd);
    if (!rd) return fail(w, ENOMEM, "%s", strerror(ENOMEM));
    rd->w = w;
    int r = read_head(rd, a);
    bool bodiless =
        strcmp(req->method, "HEAD") == 0 || a->resp->status == 204 || a->resp->status == 304;
    if (r == 0 && !bodiless) r = a->chunked ? read_chunks(rd, a) : read_span(rd, a, a->length);
    free(rd);
    return r;
}

/* ---- errors, as a user reads them ---- */

static int report_failure(struct cli *c, const struct wire *w, const struct answer *a)
{
    const char *where = conn_where(c);
    if (w->interrupted) return w->req->quiet_interrupt ? EXIT_FAIL : cli_error("interrupted");
    if (a->sink_err) return cli_error("cannot write the file: %s", strerror(a->sink_err));
    if (a->too_big) return cli_error("the daemon's answer is too big or out of memory");
    if (w->untrusted)
        return cli_error("the daemon at %s has a certificate this machine does not trust: %s; "
                         "set RUNTIME_CA_FILE to the CA's PEM file",
                         where, w->why);
    if (!w->connected && w->err == EACCES && !c->api_url)
        return cli_error("cannot reach the daemon at %s: %s; the socket is for root: run as "
                         "root, or set RUNTIME_API_URL and RUNTIME_API_KEY",
                         where, w->why);
    if (!w->connected && !w->ssl)
        return cli_error("cannot reach the daemon at %s: %s; is runtimed running? set "
                         "RUNTIME_API_URL or --socket",
                         where, w->why);
    return cli_error("talking to the daemon at %s failed: %s; check that it is runtimed and "
                     "running",
                     where, w->why);
}

int http_do(struct cli *c, const struct http_req *req, struct http_resp *resp)
{
    *resp = (struct http_resp){.file_mode = -1};
    struct url u = {0};
    if (c->api_url && !parse_url(c->api_url, &u))
        return cli_error("bad API URL '%s'; give it as http://HOST:PORT", c->api_url);
    struct wire w = {.fd = -1, .req = req};
    struct answer a = {.resp = resp, .req = req};
    size_t head_len = 0;
    char *head = request_head(c, req, &u, &head_len);
    if (!head) return cli_error("out of memory");
    int r = wire_open(&w, c, &u);
    if (r == 0) r = wire_write(&w, head, head_len);
    if (r == 0 && req->body_len) r = wire_write(&w, req->body, req->body_len);
    if (r == 1) r = 0;              /* answered early: the answer says why */
    explicit_bzero(head, head_len); /* it holds the key */
    free(head);
    if (r == 0) r = read_answer(&w, req, &a);
    int ret = r == 0 ? 0 : report_failure(c, &w, &a);
    if (ret) http_resp_free(resp);
    wire_close(&w);
    return ret;
}
