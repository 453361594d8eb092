/* `runtime login` and `runtime logout` (docs/login.md): Runtime Cloud's device login
 * against the daemon itself. A key pair is made for this request alone; a person
 * approves the printed code in a browser; the key comes back sealed to the pair,
 * is saved where the official SDKs look, and confirmed. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define POLL_S 3
#define WAIT_AGENT_S 50       /* without a terminal or --wait: an agent's budget */
#define WAIT_FULL_S (15 * 60) /* a request lives 15 minutes */
#define DEFAULT_AGENT "My coding agent"
#define EXIT_PENDING EXIT_TIMEOUT

enum { L_NO_BROWSER, L_WAIT, L_AGENT_NAME };

static const struct opt_spec login_opts[] = {
    {"no-browser", false, L_NO_BROWSER},
    {"wait", false, L_WAIT},
    {"agent-name", true, L_AGENT_NAME},
    {NULL, false, 0},
};
static const struct opt_spec no_opts[] = {{NULL, false, 0}};

/* Where the connection is saved, for the origins this client uses. */
struct place {
    char api[300], auth[300], dir[4096], name[72];
};

static int place_of(const struct cli *c, struct place *p)
{
    if (!c->api_url)
        return cli_error("login needs the daemon's address: set RUNTIME_API_URL (or --api-url) "
                         "to its http(s)://HOST:PORT");
    if (saved_origins(c, p->api, p->auth, sizeof p->api) < 0)
        return cli_error("RUNTIME_API_URL (%s) or RUNTIME_AUTH_URL is not an http(s) origin",
                         c->api_url);
    if (saved_dir(p->dir, sizeof p->dir) < 0)
        return cli_error("neither XDG_CONFIG_HOME nor HOME is an absolute path");
    saved_name(p->auth, p->api, p->name);
    return 0;
}

/* POST /api/connect/WHAT with body (taken) and, when key is given, that key: the
 * HTTP status and the answer (NULL when not JSON), or -1 when unreachable. */
static long connect_post(struct cli *c, const char *what, json_t *body, const char *key,
                         json_t **out)
{
    char path[64], *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    snprintf(path, sizeof path, "/api/connect/%s", what);
    str_copy(c->key, sizeof c->key, key ? key : "");
    struct http_req req = {.method = "POST",
                           .path = path,
                           .content_type = "application/json",
                           .body = text,
                           .body_len = text ? strlen(text) : 0,
                           .sink_fd = -1};
    struct http_resp resp;
    int r = text ? http_do(c, &req, &resp) : EXIT_FAIL;
    free(text);
    explicit_bzero(c->key, sizeof c->key);
    *out = NULL;
    if (r) return -1;
    if (resp.body) *out = json_loadb(resp.body, resp.len, 0, NULL);
    http_resp_free(&resp);
    return resp.status;
}

/* ---- the key pair ---- */

static char *public_pem(EVP_PKEY *pair)
{
    BIO *bio = BIO_new(BIO_s_mem());
    char *data = NULL, *pem = NULL;
    long n = bio && PEM_write_bio_PUBKEY(bio, pair) ? BIO_get_mem_data(bio, &data) : 0;
    if (n > 0 && (pem = malloc((size_t)n + 1))) {
        memcpy(pem, data, (size_t)n);
        pem[n] = '\0';
    }
    BIO_free(bio);
    return pem;
}

/* The key sealed to pair (base64 of RSA-OAEP, SHA-256 for OAEP and MGF1). */
static int unseal(EVP_PKEY *pair, const char *b64, char *key, size_t size)
{
    size_t n = strlen(b64);
    unsigned char *cipher = malloc(n + 3), plain[512];
    int len = cipher ? EVP_DecodeBlock(cipher, (const unsigned char *)b64, (int)n) : -1;
    while (len > 0 && n > 0 && b64[n - 1] == '=') /* DecodeBlock counts padding as bytes */
        len--, n--;
    EVP_PKEY_CTX *ctx = len > 0 ? EVP_PKEY_CTX_new(pair, NULL) : NULL;
    size_t out = sizeof plain;
    bool ok = ctx && EVP_PKEY_decrypt_init(ctx) > 0 &&
              EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_OAEP_PADDING) > 0 &&
              EVP_PKEY_CTX_set_rsa_oaep_md(ctx, EVP_sha256()) > 0 &&
              EVP_PKEY_CTX_set_rsa_mgf1_md(ctx, EVP_sha256()) > 0 &&
              EVP_PKEY_decrypt(ctx, plain, &out, cipher, (size_t)len) > 0 && out < size;
    EVP_PKEY_CTX_free(ctx);
    free(cipher);
    if (ok) {
        memcpy(key, plain, out);
        key[out] = '\0';
    }
    explicit_bzero(plain, sizeof plain);
    return ok ? 0 : -EINVAL;
}

/* ---- the request ---- */

struct request {
    char device_code[64], user_code[16], url[700];
};

static bool request_ok(const struct place *p, json_t *ans, struct request *rq)
{
    const char *dev = json_string_value(json_object_get(ans, "deviceCode"));
    const char *user = json_string_value(json_object_get(ans, "userCode"));
    const char *uri = json_string_value(json_object_get(ans, "verificationUri"));
    char want[700];
    if (!dev || !user || !uri || strlen(dev) != 43 || strlen(user) != 14) return false;
    for (const char *s = dev; *s; s++)
        if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", *s))
            return false;
    for (int i = 0; i < 14; i++)
        if ((i == 4 || i == 9) ? user[i] != '-' : !strchr("0123456789ABCDEF", user[i]))
            return false;
    /* The link must be the daemon's own page for this code, and nothing else. */
    snprintf(want, sizeof want, "%s/connect?code=%s", p->api, user);
    if (strcmp(uri, want) != 0) return false;
    str_copy(rq->device_code, sizeof rq->device_code, dev);
    str_copy(rq->user_code, sizeof rq->user_code, user);
    str_copy(rq->url, sizeof rq->url, uri);
    return true;
}

static int start(struct cli *c, const struct place *p, const char *agent, const char *pem,
                 struct request *rq)
{
    char machine[256] = "unknown";
    gethostname(machine, sizeof machine - 1);
    json_t *ans;
    long st = connect_post(
        c, "start",
        json_pack("{s:s,s:s,s:s}", "agentName", agent, "publicKey", pem, "machine", machine), NULL,
        &ans);
    bool ok = st == 200 && request_ok(p, ans, rq);
    const char *msg = json_string_value(json_object_get(json_object_get(ans, "error"), "message"));
    if (!ok && st >= 0) {
        cli_error("the daemon refused the connection request (HTTP %ld)%s%s", st, msg ? ": " : "",
                  msg ? msg : (st == 200 ? ": its answer is not a connection request" : ""));
    }
    json_decref(ans);
    return ok ? 0 : EXIT_FAIL;
}

static void open_browser(const char *url)
{
    pid_t pid = fork();
    if (pid != 0) return; /* not waited for: the browser may stay */
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) dup2(null, 1), dup2(null, 2);
    execlp("xdg-open", "xdg-open", url, (char *)NULL);
    execlp("open", "open", url, (char *)NULL);
    _exit(127);
}

/* The settled answer of token (its status and the rest), or NULL while pending. */
static json_t *poll_once(struct cli *c, const struct request *rq, int *fail)
{
    json_t *ans;
    long st =
        connect_post(c, "token", json_pack("{s:s}", "deviceCode", rq->device_code), NULL, &ans);
    const char *status = json_string_value(json_object_get(ans, "status"));
    *fail = 0;
    if (st < 0 || st >= 500) { /* the daemon restarting: try again */
        json_decref(ans);
        return NULL;
    }
    if (st != 200 || !status) {
        json_decref(ans);
        *fail = cli_error("the daemon no longer knows this request (HTTP %ld); run `runtime "
                          "login` again",
                          st);
        return NULL;
    }
    if (strcmp(status, "pending") == 0) {
        json_decref(ans);
        return NULL;
    }
    return ans;
}

static json_t *wait_for_approval(struct cli *c, const struct request *rq, int budget_s, int *fail)
{
    time_t until = time(NULL) + budget_s;
    while (time(NULL) < until) {
        struct timespec ts = {.tv_sec = POLL_S};
        nanosleep(&ts, NULL); /* the daemon answers "pending" to faster polls */
        json_t *ans = poll_once(c, rq, fail);
        if (ans || *fail) return ans;
    }
    return NULL;
}

static int save(const struct place *p, const char *key, json_t *ans, const char *agent)
{
    json_t *v =
        json_pack("{s:i,s:s,s:s,s:s,s:O,s:O,s:s}", "version", 1, "apiOrigin", p->api, "authOrigin",
                  p->auth, "key", key, "connectionId", json_object_get(ans, "connectionId"),
                  "orgId", json_object_get(ans, "orgId"), "agentName", agent);
    char *text = v ? json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(v);
    int r = text ? saved_write(p->dir, p->name, text) : -ENOMEM;
    if (text) explicit_bzero(text, strlen(text));
    free(text);
    if (r < 0)
        return cli_error("cannot save the connection in %s/%s: %s (the directory must be yours "
                         "and private)",
                         p->dir, p->name, strerror(-r));
    return 0;
}

/* Connected: unseal, check, save, confirm. */
static int connected(struct cli *c, const struct place *p, EVP_PKEY *pair, json_t *ans,
                     const char *agent)
{
    char key[256];
    const char *sealed = json_string_value(json_object_get(ans, "encryptedKey"));
    const char *org = json_string_value(json_object_get(ans, "orgId"));
    if (!sealed || !org || !json_is_string(json_object_get(ans, "connectionId")) ||
        unseal(pair, sealed, key, sizeof key) < 0 || !login_key_ok(key))
        return cli_error("the daemon returned an invalid credential");
    int r = save(p, key, ans, agent);
    json_t *ok = NULL;
    long st = r ? 0 : connect_post(c, "confirm", json_object(), key, &ok);
    explicit_bzero(key, sizeof key);
    json_decref(ok);
    if (r) return r;
    if (st != 200) return cli_error("the daemon did not confirm the connection (HTTP %ld)", st);
    fprintf(stderr, "Connected as ");
    print_clean(stderr, agent, 200);
    fprintf(stderr, " to ");
    print_clean(stderr, org, 200);
    fprintf(stderr, ".\n");
    return EXIT_OK;
}

static int settle(struct cli *c, const struct place *p, EVP_PKEY *pair, const struct request *rq,
                  int budget_s, const char *agent)
{
    int fail = 0;
    json_t *ans = wait_for_approval(c, rq, budget_s, &fail);
    if (fail) return fail;
    if (!ans) {
        cli_error("not connected yet: open %s, check the code %s and choose Connect agent; then "
                  "run `runtime login` again (or `runtime login --wait`)",
                  rq->url, rq->user_code);
        return EXIT_PENDING;
    }
    const char *status = json_string_value(json_object_get(ans, "status"));
    int r = strcmp(status, "connected") == 0 ? connected(c, p, pair, ans, agent)
            : strcmp(status, "denied") == 0  ? cli_error("the connection was declined")
                                             : cli_error("the connection request expired; run "
                                                          "`runtime login` again");
    json_decref(ans);
    return r;
}

static int login(struct cli *c, const char *agent, bool no_browser, bool wait)
{
    struct place p;
    if (place_of(c, &p)) return EXIT_FAIL;
    EVP_PKEY *pair = EVP_RSA_gen(2048);
    char *pem = pair ? public_pem(pair) : NULL;
    struct request rq;
    int r = pem ? start(c, &p, agent, pem, &rq) : cli_error("cannot make an RSA key pair");
    free(pem);
    if (r == 0) {
        bool terminal = isatty(0) && isatty(2);
        fprintf(stderr,
                "Connect your agent: %s\nCheck that the browser shows code %s, then choose "
                "Connect agent.\n",
                rq.url, rq.user_code);
        if (terminal && !no_browser) open_browser(rq.url);
        r = settle(c, &p, pair, &rq, wait || terminal ? WAIT_FULL_S : WAIT_AGENT_S, agent);
    }
    EVP_PKEY_free(pair);
    return r;
}

int cmd_login(struct cli *c, int argc, char **argv)
{
    struct args a;
    const char *agent = DEFAULT_AGENT;
    bool no_browser = false, wait = false;
    args_init(&a, argc, argv, "login", login_opts);
    int id;
    while ((id = args_next(&a)) != ARG_END) {
        if (id == ARG_HELP) return usage_print("login", stdout), EXIT_OK;
        if (id == ARG_BAD) return EXIT_USAGE;
        if (id == L_NO_BROWSER)
            no_browser = true;
        else if (id == L_WAIT)
            wait = true;
        else if (id == L_AGENT_NAME)
            agent = a.val;
        else
            return cli_usage_error("login", "unexpected argument '%s'", a.argv[a.i - 1]);
    }
    size_t n = strlen(agent);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)agent[i] < 0x20 || agent[i] == 0x7f) n = 0;
    if (n == 0 || n > 80 * 4)
        return cli_usage_error("login", "--agent-name is 1 to 80 characters, none a control one");
    return login(c, agent, no_browser, wait);
}

int cmd_logout(struct cli *c, int argc, char **argv)
{
    struct args a;
    args_init(&a, argc, argv, "logout", no_opts);
    int id;
    while ((id = args_next(&a)) != ARG_END) {
        if (id == ARG_HELP) return usage_print("logout", stdout), EXIT_OK;
        if (id == ARG_BAD) return EXIT_USAGE;
        return cli_usage_error("logout", "unexpected argument '%s'", a.argv[a.i - 1]);
    }
    const char *env = getenv("RUNTIME_API_KEY");
    if (env && *env)
        return cli_error("this shell uses RUNTIME_API_KEY, which logout cannot revoke; unset it "
                         "to log out of the saved connection");
    struct place p;
    char key[256];
    if (place_of(c, &p)) return EXIT_FAIL;
    if (saved_key(c, key, sizeof key) < 0)
        return cli_error("no saved connection for %s in %s", p.api, p.dir);
    json_t *ans = NULL;
    long st = connect_post(c, "disconnect", json_object(), key, &ans);
    explicit_bzero(key, sizeof key);
    json_decref(ans);
    if (st != 200 && st != 401) /* 401: revoked already; the file goes all the same */
        return cli_error("the daemon did not revoke the connection (HTTP %ld); the saved one "
                         "stays in %s/%s",
                         st, p.dir, p.name);
    int r = saved_remove(p.dir, p.name);
    if (r < 0 && r != -ENOENT)
        return cli_error("revoked, but %s/%s cannot be removed: %s", p.dir, p.name, strerror(-r));
    fprintf(stderr, "Logged out: this machine's connection to %s is revoked.\n", p.api);
    return EXIT_OK;
}
