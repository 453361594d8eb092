/* HTTP transport over libcurl: TCP to RUNTIME_API_URL or the daemon's unix socket. */
#include "cli.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Answers bigger than this are not JSON we want to hold in memory. */
#define MAX_BODY (256u << 20)

volatile sig_atomic_t http_interrupted;

static void on_signal(int sig)
{
    http_interrupted = sig;
}

void http_catch_signals(void)
{
    /* No SA_RESTART: curl's poll() returns and the progress callback sees the flag. */
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
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

void http_resp_free(struct http_resp *r)
{
    free(r->body);
    r->body = NULL;
    r->len = 0;
}

struct xfer {
    CURL *h;
    const struct http_req *req;
    struct http_resp *resp;
    int sink_err; /* errno of a failed write to sink_fd */
};

static bool is_2xx(CURL *h)
{
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    return status >= 200 && status < 300;
}

static size_t on_data(char *p, size_t size, size_t n, void *ud)
{
    struct xfer *x = ud;
    size_t len = size * n;
    if (x->req->sink_fd >= 0 && is_2xx(x->h)) {
        int r = write_all(x->req->sink_fd, p, len);
        if (r < 0) x->sink_err = -r;
        return r < 0 ? 0 : len;
    }
    struct http_resp *resp = x->resp;
    if (resp->len + len > MAX_BODY) return 0;
    char *nb = realloc(resp->body, resp->len + len + 1);
    if (!nb) return 0;
    memcpy(nb + resp->len, p, len);
    resp->body = nb;
    resp->len += len;
    nb[resp->len] = '\0';
    return len;
}

static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    struct xfer *x = ud;
    return x->req->interruptible && http_interrupted ? 1 : 0;
}

static bool add_header(struct curl_slist **list, const char *line)
{
    struct curl_slist *n = curl_slist_append(*list, line);
    if (n) *list = n;
    return n != NULL;
}

static struct curl_slist *make_headers(struct cli *c, const struct http_req *req)
{
    char auth[600], type[200];
    struct curl_slist *h = NULL;
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", c->key);
    /* Without a type, "Content-Type:" stops curl from claiming a form was sent. */
    snprintf(type, sizeof type, "Content-Type:%s%s", req->content_type ? " " : "",
             req->content_type ? req->content_type : "");
    if (add_header(&h, auth) && add_header(&h, "Accept: application/json") &&
        add_header(&h, "Expect:") /* no 100-continue round trip */ && add_header(&h, type))
        return h;
    curl_slist_free_all(h);
    return NULL;
}

static char *make_url(struct cli *c, const char *path)
{
    const char *base = c->api_url ? c->api_url : "http://localhost";
    size_t bl = strlen(base);
    while (bl > 0 && base[bl - 1] == '/')
        bl--;
    size_t n = bl + strlen(path) + 1;
    char *url = malloc(n);
    if (url) snprintf(url, n, "%.*s%s", (int)bl, base, path);
    return url;
}

static void set_body(CURL *h, const struct http_req *req)
{
    if (strcmp(req->method, "GET") == 0) return;
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req->method);
    bool wants_body = strcmp(req->method, "POST") == 0 || strcmp(req->method, "PUT") == 0;
    if (!req->body && !wants_body) return;
    /* POSTFIELDS with a custom method sends the body (with its length) for PUT as well. */
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, req->body ? req->body : "");
}

static void set_options(CURL *h, struct cli *c, struct xfer *x, char *errbuf)
{
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    /* The API is local (or reached directly): never hand the bearer key to a proxy. */
    curl_easy_setopt(h, CURLOPT_PROXY, "");
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
    char agent[80];
    snprintf(agent, sizeof agent, "runtime/%s", runtime_version());
    curl_easy_setopt(h, CURLOPT_USERAGENT, agent);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, x);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    if (!c->api_url) curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, c->socket);
    /* A daemon serving TLS with a certificate of a private CA (runtimed --tls-cert). */
    const char *ca = getenv("RUNTIME_CA_FILE");
    if (ca && *ca) curl_easy_setopt(h, CURLOPT_CAINFO, ca);
}

static int report_failure(struct cli *c, struct xfer *x, CURLcode rc, const char *errbuf)
{
    long os_errno = 0;
    curl_easy_getinfo(x->h, CURLINFO_OS_ERRNO, &os_errno);
    if (rc == CURLE_ABORTED_BY_CALLBACK)
        return x->req->quiet_interrupt ? EXIT_FAIL : cli_error("interrupted");
    if (x->sink_err) return cli_error("cannot write the file: %s", strerror(x->sink_err));
    if (rc == CURLE_WRITE_ERROR)
        return cli_error("the daemon's answer is too big or out of memory");
    const char *why =
        os_errno ? strerror((int)os_errno) : (*errbuf ? errbuf : curl_easy_strerror(rc));
    if (rc == CURLE_COULDNT_CONNECT && os_errno == EACCES)
        return cli_error("cannot reach the daemon at %s: %s; the socket is for root: run as "
                         "root, or set RUNTIME_API_URL and RUNTIME_API_KEY",
                         conn_where(c), why);
    if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST ||
        rc == CURLE_OPERATION_TIMEDOUT)
        return cli_error("cannot reach the daemon at %s: %s; is runtimed running? set "
                         "RUNTIME_API_URL or --socket",
                         conn_where(c), why);
    if (rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CACERT_BADFILE)
        return cli_error("the daemon at %s has a certificate this machine does not trust: %s; "
                         "set RUNTIME_CA_FILE to the CA's PEM file",
                         conn_where(c), why);
    if (rc == CURLE_UNSUPPORTED_PROTOCOL || rc == CURLE_URL_MALFORMAT)
        return cli_error("bad API URL '%s'; give it as http://HOST:PORT", c->api_url);
    return cli_error("talking to the daemon at %s failed: %s; check that it is runtimed and "
                     "running",
                     conn_where(c), why);
}

int http_do(struct cli *c, const struct http_req *req, struct http_resp *resp)
{
    char errbuf[CURL_ERROR_SIZE] = "";
    *resp = (struct http_resp){0};
    CURL *h = curl_easy_init();
    char *url = make_url(c, req->path);
    struct curl_slist *headers = make_headers(c, req);
    int ret = EXIT_FAIL;
    if (!h || !url || !headers) {
        cli_error("out of memory");
        goto out;
    }
    struct xfer x = {.h = h, .req = req, .resp = resp};
    set_options(h, c, &x, errbuf);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    set_body(h, req);
    CURLcode rc = curl_easy_perform(h);
    if (rc != CURLE_OK) {
        report_failure(c, &x, rc, errbuf);
        http_resp_free(resp);
        goto out;
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &resp->status);
    struct curl_header *mode;
    resp->file_mode = -1;
    if (curl_easy_header(h, "X-File-Mode", 0, CURLH_HEADER, -1, &mode) == CURLHE_OK)
        resp->file_mode = (int)(strtoul(mode->value, NULL, 8) & 0777);
    ret = 0;
out:
    curl_slist_free_all(headers);
    free(url);
    if (h) curl_easy_cleanup(h);
    return ret;
}
