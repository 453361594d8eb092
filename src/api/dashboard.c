/* The browser dashboard on the API's listener: its files at /dashboard/ (and the page
 * at /connect, the link a `runtime login` prints), and its sign-in: an API key given
 * once to POST /dashboard/session becomes a session in an HttpOnly, SameSite=Strict
 * cookie (__Host- and Secure under TLS). The page then calls the API like any client,
 * the cookie in place of the key, with the session's CSRF token in X-CSRF-Token on
 * every call; a request that says it comes from another site is refused whatever it
 * carries. docs/dashboard.md. */
#include <event2/buffer.h>
#include <stdio.h>
#include <string.h>

#include "../dashboard/dashboard.h"
#include "api_impl.h"

#define SESSION_BODY_MAX 4096 /* {"apiKey": ...}: read before anyone is known */
#define COOKIE_PLAIN "rt_session"
#define COOKIE_TLS "__Host-rt_session" /* a browser takes it only Secure, Path=/, no Domain */

static struct dashboard_sessions *sessions;
static struct rate_limit failed_sign_ins = RATE_LIMIT(5, 50);

static struct dashboard_sessions *sessions_of(struct server *srv)
{
    if (!sessions) sessions = dashboard_sessions_new(&server_config(srv)->dashboard);
    return sessions;
}

/* Whether the browser sees this listener as https (the cookie is then Secure). */
static bool over_tls(struct httpd_req *req, struct server *srv)
{
    return server_config(srv)->tls && !httpd_is_local(req);
}

static const char *cookie_name(struct httpd_req *req, struct server *srv)
{
    return over_tls(req, srv) ? COOKIE_TLS : COOKIE_PLAIN;
}

/* The value of cookie `name` in the Cookie field, copied to out; false when absent. */
static bool cookie_value(struct httpd_req *req, const char *name, char *out, size_t size)
{
    const char *h = httpd_header(req, "Cookie");
    size_t n = strlen(name);
    for (const char *p = h; p && *p;) {
        while (*p == ' ' || *p == ';')
            p++;
        const char *end = strchr(p, ';');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > n && strncmp(p, name, n) == 0 && p[n] == '=') {
            snprintf(out, size, "%.*s", (int)(len - n - 1), p + n + 1);
            return len - n - 1 < size;
        }
        p = end;
    }
    return false;
}

/* Whether the request comes from this daemon's own pages, as far as a browser says:
 * Sec-Fetch-Site (sent by every current browser) must not name another site, and an
 * Origin, when given, must be this listener's own. A client that is no browser sends
 * neither and passes: it holds the key or the cookie itself. */
static bool same_origin(struct httpd_req *req, struct server *srv)
{
    const char *site = httpd_header(req, "Sec-Fetch-Site");
    if (site && strcmp(site, "same-origin") != 0 && strcmp(site, "none") != 0) return false;
    const char *origin = httpd_header(req, "Origin"), *host = httpd_header(req, "Host");
    if (!origin) return true;
    char own[300];
    snprintf(own, sizeof own, "%s://%s", over_tls(req, srv) ? "https" : "http", host ? host : "");
    return host && strcasecmp(origin, own) == 0;
}

/* The session the request's cookie names, or NULL. */
static struct dashboard_session *session_of(struct httpd_req *req, struct server *srv)
{
    char token[DASHBOARD_TOKEN_LEN + 2];
    if (!cookie_value(req, cookie_name(req, srv), token, sizeof token)) return NULL;
    return dashboard_session_find(sessions_of(srv), token, now_unix_ms());
}

int api_session_caller(struct httpd_req *req, struct server *srv, bool csrf_checked,
                       struct api_caller *out, const char **why)
{
    struct dashboard_session *s = session_of(req, srv);
    if (!s) return 0;
    const char *csrf = httpd_header(req, "X-CSRF-Token");
    if (!same_origin(req, srv)) {
        *why = "this request comes from another site; the dashboard's session serves only its "
               "own pages";
        return -1;
    }
    if (csrf_checked && !(csrf && str_equal_ct(csrf, s->csrf))) {
        *why = "a call with the dashboard's session needs its X-CSRF-Token (GET "
               "/dashboard/session gives it)";
        return -1;
    }
    if (!api_key_caller(srv, s->key, out)) { /* its key was rotated away, or its account removed */
        dashboard_session_close(sessions_of(srv), s);
        return 0;
    }
    out->session = true;
    return 1;
}

/* The headers every answer of the dashboard's carries: nothing but its own files may
 * run or be loaded, in no frame, and no page it links to learns where it came from. */
static void page_headers(struct httpd_req *req)
{
    httpd_add_header(req, "Content-Security-Policy",
                     "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' "
                     "data:; connect-src 'self'; font-src 'self'; base-uri 'none'; form-action "
                     "'self'; frame-ancestors 'none'");
    httpd_add_header(req, "X-Content-Type-Options", "nosniff");
    httpd_add_header(req, "X-Frame-Options", "DENY");
    httpd_add_header(req, "Referrer-Policy", "no-referrer");
    httpd_add_header(req, "Cross-Origin-Opener-Policy", "same-origin");
    httpd_add_header(req, "Cross-Origin-Resource-Policy", "same-origin");
    httpd_add_header(req, "Permissions-Policy", "camera=(), microphone=(), geolocation=()");
}

static void serve_file(struct httpd_req *req, const char *name)
{
    const struct dashboard_file *f = dashboard_file(name);
    if (!f) return api_error(req, 404, "not_found", "no file %s in the dashboard", name);
    page_headers(req);
    httpd_add_header(req, "Cache-Control", "no-cache");
    httpd_add_header(req, "ETag", f->etag);
    const char *seen = httpd_header(req, "If-None-Match");
    if (seen && strcmp(seen, f->etag) == 0) return httpd_reply(req, 304, NULL);
    httpd_reply_bytes(req, 200, f->type, f->data, f->len);
}

/* The session's own description: who it is, its CSRF token, when it ends if unused. */
static json_t *session_json(struct server *srv, const struct dashboard_session *s,
                            const struct api_caller *who)
{
    char ends[40];
    time_rfc3339(ends, sizeof ends, dashboard_session_expires_ms(sessions_of(srv), s));
    return json_pack("{s:s,s:b,s:s,s:s}", "account", who->account, "admin", who->admin, "csrfToken",
                     s->csrf, "expiresAt", ends);
}

static void set_cookie(struct httpd_req *req, struct server *srv, const char *token, long max_age)
{
    char text[200];
    snprintf(text, sizeof text, "%s=%s; Path=/; Max-Age=%ld; HttpOnly; SameSite=Strict%s",
             cookie_name(req, srv), token, max_age, over_tls(req, srv) ? "; Secure" : "");
    httpd_add_header(req, "Set-Cookie", text);
}

static void refuse_sign_in(struct httpd_req *req)
{
    if (!rate_allow(&failed_sign_ins, now_ms())) {
        httpd_add_header(req, "Retry-After", "60");
        return api_error(req, 429, "rate_limited",
                         "too many failed sign-ins; try again in a minute");
    }
    api_error(req, 401, "unauthorized",
              "that is not an API key of this daemon: give the key from STATE/admin.key or "
              "your account's key");
}

/* POST /dashboard/session {"apiKey"}, its body read. */
static void sign_in(struct httpd_req *req, void *arg)
{
    struct server *srv = arg;
    json_t *body = api_body_json(req, false);
    if (!body) return;
    const char *key = json_string_value(json_object_get(body, "apiKey"));
    struct api_caller who;
    if (!json_is_object(body) || json_object_size(body) != 1 || !key) {
        json_decref(body);
        return api_error(req, 400, "invalid_request", "the body is {\"apiKey\": \"<key>\"}");
    }
    if (!api_key_caller(srv, key, &who)) {
        json_decref(body);
        return refuse_sign_in(req);
    }
    char token[DASHBOARD_TOKEN_LEN + 1];
    const struct dashboard_session *s =
        dashboard_session_open(sessions_of(srv), key, who.account, token);
    json_decref(body);
    if (!s) return api_error(req, 500, "internal_error", "out of memory");
    log_info("dashboard: signed in as %s%s", who.account, who.admin ? " (admin)" : "");
    set_cookie(req, srv, token, (long)server_config(srv)->dashboard.max_s);
    explicit_bzero(token, sizeof token);
    api_json(req, 200, session_json(srv, s, &who));
}

/* /dashboard/session: GET who the cookie is, POST sign in, DELETE sign out. */
static void session_route(struct httpd_req *req, struct server *srv)
{
    enum httpd_method m = httpd_method(req);
    if (!same_origin(req, srv))
        return api_error(req, 403, "forbidden", "the dashboard signs in only from its own pages");
    if (m == HTTPD_POST) {
        httpd_charge(req, server_budget(srv));
        return httpd_read_body(req, SESSION_BODY_MAX, sign_in, srv);
    }
    if (m != HTTPD_GET && m != HTTPD_DELETE)
        return api_error(req, 405, "method_not_allowed",
                         "use GET, POST or DELETE /dashboard/session");
    struct api_caller who;
    const char *why = "";
    int r = api_session_caller(req, srv, m == HTTPD_DELETE, &who, &why);
    if (r < 0) return api_error(req, 403, "forbidden", "%s", why);
    if (r == 0) return api_error(req, 401, "unauthorized", "not signed in, or the session ended");
    httpd_trust(req);
    if (m == HTTPD_GET) return api_json(req, 200, session_json(srv, session_of(req, srv), &who));
    dashboard_session_close(sessions_of(srv), session_of(req, srv));
    set_cookie(req, srv, "", 0);
    httpd_reply(req, 204, NULL);
}

bool api_dashboard_path(const char *path)
{
    return strcmp(path, "/dashboard") == 0 || strncmp(path, "/dashboard/", 11) == 0 ||
           strcmp(path, "/connect") == 0;
}

void api_dashboard(struct httpd_req *req, struct server *srv)
{
    const char *path = httpd_path(req);
    if (strcmp(path, "/dashboard/session") == 0) return session_route(req, srv);
    if (httpd_method(req) != HTTPD_GET)
        return api_error(req, 405, "method_not_allowed", "the dashboard's pages take GET");
    if (strcmp(path, "/dashboard") == 0) {
        httpd_add_header(req, "Location", "/dashboard/");
        return httpd_reply(req, 308, NULL);
    }
    /* The page routes itself: /dashboard/ and the device login's link, /connect?code=. */
    if (strcmp(path, "/dashboard/") == 0 || strcmp(path, "/connect") == 0)
        return serve_file(req, "index.html");
    serve_file(req, path + strlen("/dashboard/"));
}
