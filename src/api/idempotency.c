/* Idempotency-Key, as Runtime Cloud answers it: a change sent again with the same key
 * and the same request is answered as it was the first time, marked "replayed": true
 * and Idempotency-Replayed: true, and nothing happens twice; the same key with another
 * request is refused (422 idempotency_key_reused). Its SDKs send a key with every
 * change and retry with it after a lost answer.
 *
 * The keys live in memory for 24 hours, at most IDEM_MAX of them (the oldest go
 * first): a restart of runtimed forgets them, and the SDKs' retries come within
 * seconds. A streamed answer cannot be sent again: its key is forgotten. */
#include <ctype.h>
#include <errno.h>
#include <event2/buffer.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "api_impl.h"

#define IDEM_TTL_MS (24LL * 3600 * 1000)
#define IDEM_MAX 4096
#define IDEM_KEY_MAX 128
/* A first request still unanswered after this long is taken as lost. */
#define IDEM_ABANDONED_MS (10LL * 60 * 1000)

struct idem {
    char account[ACCOUNT_NAME_MAX];
    char key[IDEM_KEY_MAX + 1];
    uint8_t digest[32]; /* SHA-256 of the request: method, path, query, body */
    int64_t at_ms;
    bool done;
    int status;
    char *body; /* the answer's (JSON, or NULL for none) */
    struct idem *newer, *older;
};

static struct {
    struct idem *newest, *oldest;
    size_t n;
} keys;

static void unlink_idem(struct idem *e)
{
    if (e->newer)
        e->newer->older = e->older;
    else
        keys.newest = e->older;
    if (e->older)
        e->older->newer = e->newer;
    else
        keys.oldest = e->newer;
    keys.n--;
}

static void free_idem(struct idem *e)
{
    unlink_idem(e);
    free(e->body);
    free(e);
}

/* The expired, and the oldest past the count. One still under way is kept. */
static void expire(int64_t now)
{
    struct idem *e = keys.oldest;
    while (e && (now - e->at_ms > IDEM_TTL_MS || keys.n >= IDEM_MAX)) {
        struct idem *newer = e->newer;
        if (e->done) free_idem(e);
        e = newer;
    }
}

static struct idem *find(const char *account, const char *key)
{
    for (struct idem *e = keys.newest; e; e = e->older)
        if (strcmp(e->key, key) == 0 && strcmp(e->account, account) == 0) return e;
    return NULL;
}

static void digest_of(struct httpd_req *req, uint8_t out[32])
{
    static const char *const methods[] = {
        [HTTPD_GET] = "GET",       [HTTPD_POST] = "POST", [HTTPD_PUT] = "PUT",
        [HTTPD_DELETE] = "DELETE", [HTTPD_HEAD] = "HEAD", [HTTPD_OPTIONS] = "OPTIONS",
        [HTTPD_OTHER] = "OTHER"};
    const char *m = methods[httpd_method(req)], *q = httpd_query(req);
    struct evbuffer *body = httpd_body(req);
    size_t n = evbuffer_get_length(body);
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    if (!c || EVP_DigestInit_ex(c, EVP_sha256(), NULL) != 1 ||
        EVP_DigestUpdate(c, m, strlen(m) + 1) != 1 ||
        EVP_DigestUpdate(c, httpd_path(req), strlen(httpd_path(req)) + 1) != 1 ||
        EVP_DigestUpdate(c, q ? q : "", q ? strlen(q) + 1 : 1) != 1 ||
        EVP_DigestUpdate(c, evbuffer_pullup(body, -1), n) != 1 ||
        EVP_DigestFinal_ex(c, out, NULL) != 1)
        memset(out, 0xff, 32); /* no digest: no two requests match (nor replay) */
    EVP_MD_CTX_free(c);
}

static bool key_ok(const char *key)
{
    size_t n = strlen(key);
    if (n == 0 || n > IDEM_KEY_MAX) return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)key[i]) && !strchr("_.:-", key[i])) return false;
    return true;
}

/* The first answer again, marked replayed. */
static void replay(struct httpd_req *req, const struct idem *e)
{
    httpd_add_header(req, "Idempotency-Replayed", "true");
    if (!e->body) return httpd_reply(req, e->status, NULL);
    json_t *v = json_loads(e->body, 0, NULL);
    if (json_is_object(v)) json_object_set_new(v, "replayed", json_true());
    api_json(req, e->status, v ? v : json_string(e->body));
}

int api_idempotency_begin(struct httpd_req *req, const char *account)
{
    enum httpd_method m = httpd_method(req);
    const char *key = httpd_header(req, "Idempotency-Key");
    if (!key || httpd_data(req) || (m != HTTPD_POST && m != HTTPD_PUT && m != HTTPD_DELETE))
        return 0;
    if (!key_ok(key)) {
        api_error(req, 400, "invalid_request",
                  "Idempotency-Key must be 1 to %d letters, digits and _.:- (a UUID will do)",
                  IDEM_KEY_MAX);
        return 1;
    }
    int64_t now = now_ms();
    expire(now);
    uint8_t digest[32];
    digest_of(req, digest);
    struct idem *e = find(account, key);
    if (e && memcmp(e->digest, digest, sizeof digest) != 0) {
        api_error(req, 422, "idempotency_key_reused",
                  "this Idempotency-Key came with another request; send the same request "
                  "again with it, or use a new key for new work");
        return 1;
    }
    if (e && !e->done && now - e->at_ms > IDEM_ABANDONED_MS) {
        free_idem(e); /* its answer never came: the request is new work again */
        e = NULL;
    }
    if (e && !e->done) {
        httpd_add_header(req, "Retry-After", "1");
        api_error(req, 409, "busy",
                  "the first request with this Idempotency-Key is still under way; retry "
                  "with it in a moment");
        return 1;
    }
    if (e) return replay(req, e), 1;
    e = calloc(1, sizeof *e);
    if (!e) return 0; /* no memory to remember it: served without */
    str_copy(e->account, sizeof e->account, account);
    str_copy(e->key, sizeof e->key, key);
    memcpy(e->digest, digest, sizeof digest);
    e->at_ms = now;
    e->older = keys.newest;
    if (keys.newest) keys.newest->newer = e;
    keys.newest = e;
    if (!keys.oldest) keys.oldest = e;
    keys.n++;
    httpd_set_data(req, e);
    return 0;
}

void api_idempotency_answer(struct httpd_req *req, int status, const char *body)
{
    struct idem *e = httpd_data(req);
    if (!e) return;
    httpd_set_data(req, NULL);
    if (status >= 500 || status == 429) return free_idem(e); /* nothing ran: may run again */
    e->done = true;
    e->status = status;
    e->body = body ? strdup(body) : NULL;
}

void api_idempotency_forget(struct httpd_req *req)
{
    struct idem *e = httpd_data(req);
    httpd_set_data(req, NULL);
    if (e) free_idem(e);
}
