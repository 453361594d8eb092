/* Fields that some servers, frameworks and proxies read as the request's method
 * or URL instead of the request line's. Beside a secret limited to some
 * methods or paths they would undo the limit (the proxy matches the request
 * line; the application acts on the field), so the proxy refuses them there.
 *
 * A list of names is always one name short (X-HTTP-Method-Override was on it,
 * X-Forwarded-Method was not), so this is a rule over the name, lower-cased:
 *   - it holds "method" or "override": X-HTTP-Method(-Override),
 *     X-Method-Override, X-Original-Method, X-Forwarded-Method, ...;
 *   - it starts with "x-" and ends with "-uri", "-url", "-path", "-prefix" or
 *     "-script-name": X-Original-URL, X-Rewrite-URL, X-Forwarded-Uri,
 *     X-Original-Uri, X-Forwarded-Path, X-Envoy-Original-Path,
 *     X-Forwarded-Prefix, X-Script-Name (what Werkzeug's ProxyFix, Traefik,
 *     Envoy, nginx's auth_request and IIS's URL Rewrite pass on);
 *   - it starts with "x-original-", "x-rewrite-" or "x-envoy-original-"
 *     (whatever follows names a part of the original request);
 *   - it is "destination": WebDAV's COPY and MOVE act on that URL too.
 * And in the target, a query parameter "_method" (Express's method-override
 * and others read it; Rails and Laravel read it from a form body, which the
 * proxy does not parse). A false positive costs a refusal of a request that
 * carries a limited secret, and nothing else. */
#include <string.h>

#include "http_impl.h"

static bool has_suffix(const char *s, size_t n, const char *suffix)
{
    size_t k = strlen(suffix);
    return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

static bool has_prefix(const char *s, size_t n, const char *prefix)
{
    size_t k = strlen(prefix);
    return n >= k && memcmp(s, prefix, k) == 0;
}

bool http_field_overrides(const char *name, size_t n)
{
    char low[128];
    if (n == 0 || n >= sizeof low) return n > 0; /* no real field name is this long: refuse */
    for (size_t i = 0; i < n; i++)
        low[i] = (char)http_lower((unsigned char)name[i]);
    low[n] = '\0';
    static const char *const suffixes[] = {"-uri", "-url", "-path", "-prefix", "-script-name"};
    static const char *const prefixes[] = {"x-original-", "x-rewrite-", "x-envoy-original-"};
    if (strstr(low, "method") || strstr(low, "override")) return true;
    if (has_prefix(low, n, "x-"))
        for (size_t i = 0; i < sizeof suffixes / sizeof *suffixes; i++)
            if (has_suffix(low, n, suffixes[i])) return true;
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++)
        if (has_prefix(low, n, prefixes[i])) return true;
    return strcmp(low, "destination") == 0;
}

/* A parameter named "_method" (any case, '_' also as %5F) in the query. */
static bool query_has_method(const unsigned char *q, size_t n)
{
    size_t i = 0;
    while (i < n) {
        size_t end = i;
        while (end < n && q[end] != '&' && q[end] != '=' && q[end] != ';')
            end++;
        if (http_name_is(q + i, end - i, "_method") ||
            (end - i == 9 && http_name_is(q + i, 3, "%5f") && http_name_is(q + i + 3, 6, "method")))
            return true;
        while (end < n && q[end] != '&' && q[end] != ';')
            end++;
        i = end + 1;
    }
    return false;
}

bool http_request_overrides(const char *buf, const struct http_request *req)
{
    for (size_t i = 0; i < req->nfields; i++)
        if (http_field_overrides(buf + req->fields[i].name.off, req->fields[i].name.len))
            return true;
    const unsigned char *o = (const unsigned char *)buf + req->origin.off;
    const unsigned char *q = memchr(o, '?', req->origin.len);
    return q && query_has_method(q + 1, req->origin.len - (size_t)(q + 1 - o));
}
