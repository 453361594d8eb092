/* Allow-list rules: parsing the API's network.allow strings, and the decision
 * for one destination. */
#include "policy_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RULE_TEXT_MAX 1024

/* A wildcard over one of these would hand the sandbox every site anyone can
 * register under it. A short built-in list of common multi-label public
 * suffixes, not the whole Public Suffix List: it catches the usual mistakes. */
static const char *const public_suffixes[] = {
    "co.uk",
    "org.uk",
    "ac.uk",
    "gov.uk",
    "me.uk",
    "com.au",
    "net.au",
    "org.au",
    "co.nz",
    "co.jp",
    "ne.jp",
    "or.jp",
    "co.kr",
    "com.br",
    "com.cn",
    "com.hk",
    "com.tw",
    "com.sg",
    "com.mx",
    "com.tr",
    "co.in",
    "co.za",
    "co.il",
    "com.ar",
    /* hosting where anyone can get a subdomain */
    "github.io",
    "gitlab.io",
    "herokuapp.com",
    "appspot.com",
    "blogspot.com",
    "vercel.app",
    "netlify.app",
    "pages.dev",
    "workers.dev",
    "web.app",
    "firebaseapp.com",
    "azurewebsites.net",
    "cloudfront.net",
    "s3.amazonaws.com",
    "ngrok.io",
    "ngrok-free.app",
    "fly.dev",
    "onrender.com",
    "glitch.me",
    "surge.sh",
};

static bool is_public_suffix(const char *name)
{
    for (size_t i = 0; i < ARRAY_LEN(public_suffixes); i++)
        if (strcmp(name, public_suffixes[i]) == 0) return true;
    return false;
}

static int parse_port(const char *s, uint16_t *port, err_t *err)
{
    unsigned long v = 0;
    size_t n = strspn(s, "0123456789");
    char shown[24];
    if (!*s) return err_set(err, -EINVAL, "nothing after ':'; write a port such as :443");
    policy_show(s, SIZE_MAX, shown, sizeof shown);
    if (s[n] || n > 5 || s[0] == '0')
        return err_set(err, -EINVAL, "port \"%s\" must be a number from 1 to 65535", shown);
    for (size_t i = 0; i < n; i++)
        v = v * 10 + (unsigned long)(s[i] - '0');
    if (v > 65535) return err_set(err, -EINVAL, "port %lu is above 65535", v);
    *port = (uint16_t)v;
    return 0;
}

/* An IP or CIDR rule; an IPv4-mapped base becomes the IPv4 it carries, as the
 * addresses it is compared with do. */
static int set_cidr(struct policy_rule *out, const struct policy_addr *a, unsigned prefix,
                    err_t *err)
{
    out->kind = POLICY_RULE_CIDR;
    out->addr = *a;
    out->prefix = prefix;
    if (a->family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&a->v6) && prefix >= 96) {
        policy_addr_unmap(&out->addr);
        out->prefix = prefix - 96;
    }
    if (out->prefix == 0)
        return err_set(err, -EINVAL,
                       "the range covers every address; to allow any public host, "
                       "leave the allow list empty");
    struct policy_addr masked = {.family = out->addr.family};
    uint8_t *dst = masked.family == AF_INET ? (uint8_t *)&masked.v4 : masked.v6.s6_addr;
    const uint8_t *src =
        out->addr.family == AF_INET ? (const uint8_t *)&out->addr.v4 : out->addr.v6.s6_addr;
    for (unsigned i = 0; i < out->prefix; i++)
        dst[i / 8] |= (uint8_t)(src[i / 8] & (0x80 >> (i % 8)));
    if (!policy_addr_same(&masked, &out->addr)) {
        char base[INET6_ADDRSTRLEN];
        policy_addr_str(&masked, base, sizeof base);
        return err_set(err, -EINVAL,
                       "the address has bits set past the first %u; did you mean %s/%u?",
                       out->prefix, base, out->prefix);
    }
    return 0;
}

static int set_ip(struct policy_rule *out, const struct policy_addr *a, err_t *err)
{
    return set_cidr(out, a, a->family == AF_INET ? 32 : 128, err);
}

/* "[2001:db8::1]" or "[2001:db8::1]:443". */
static int parse_bracketed(const char *text, struct policy_rule *out, err_t *err)
{
    const char *close = strchr(text, ']');
    if (!close) return err_set(err, -EINVAL, "'[' without a closing ']'");
    char buf[RULE_TEXT_MAX + 1];
    size_t len = (size_t)(close - text) + 1;
    memcpy(buf, text, len);
    buf[len] = '\0';
    struct policy_addr a;
    char shown[72];
    policy_show(buf, len, shown, sizeof shown);
    if (policy_parse_ip(buf, &a) < 0)
        return err_set(err, -EINVAL, "%s is not an IPv6 address (brackets are for IPv6 only)",
                       shown);
    if (close[1] == '/')
        return err_set(err, -EINVAL, "write a CIDR range without brackets, as in 2001:db8::/32");
    if (close[1] && close[1] != ':')
        return err_set(err, -EINVAL,
                       "unexpected text after ']'; a port is written [2001:db8::1]:443");
    if (close[1] == ':') {
        int r = parse_port(close + 2, &out->port, err);
        if (r < 0) return r;
    }
    return set_ip(out, &a, err);
}

static int parse_prefix(const char *s, const struct policy_addr *a, unsigned *prefix, err_t *err)
{
    unsigned max = a->family == AF_INET ? 32 : 128;
    size_t n = strspn(s, "0123456789");
    unsigned v = 0;
    for (size_t i = 0; i < n && i < 4; i++)
        v = v * 10 + (unsigned)(s[i] - '0');
    if (n == 0 || n > 3 || (s[0] == '0' && n > 1) || v > max)
        return err_set(err, -EINVAL, "the prefix length after '/' must be a number from 1 to %u",
                       max);
    *prefix = v;
    return 0;
}

/* "203.0.113.0/24", "2001:db8::/32", either with an optional ":port" after it. */
static int parse_cidr(const char *text, struct policy_rule *out, err_t *err)
{
    const char *slash = strchr(text, '/');
    char buf[RULE_TEXT_MAX + 1];
    size_t len = (size_t)(slash - text);
    memcpy(buf, text, len);
    buf[len] = '\0';
    struct policy_addr a;
    char shown[72];
    policy_show(buf, len, shown, sizeof shown);
    if (policy_parse_ip(buf, &a) < 0)
        return err_set(err, -EINVAL,
                       "\"%s\" is not an IP address; a CIDR range is written like "
                       "203.0.113.0/24 (host names take no '/')",
                       shown);
    unsigned prefix = 0;
    int r = parse_prefix(slash + 1, &a, &prefix, err);
    if (r < 0) return r;
    const char *rest = slash + 1 + strspn(slash + 1, "0123456789");
    if (*rest && *rest != ':')
        return err_set(err, -EINVAL,
                       "unexpected text after the prefix length; a port is "
                       "written 203.0.113.0/24:443");
    if (*rest == ':') {
        r = parse_port(rest + 1, &out->port, err);
        if (r < 0) return r;
    }
    return set_cidr(out, &a, prefix, err);
}

/* "*.example.com": the subdomains of example.com, at any depth, not the apex. */
static int parse_wildcard(const char *host, struct policy_rule *out, err_t *err)
{
    if (strcmp(host, "*") == 0 || strcmp(host, "*.") == 0)
        return err_set(err, -EINVAL,
                       "\"%s\" would allow every host; to allow any public host, "
                       "leave the allow list empty",
                       host);
    if (strncmp(host, "*.", 2) != 0 || strchr(host + 2, '*'))
        return err_set(err, -EINVAL,
                       "a wildcard must be the whole leftmost label, as in "
                       "*.example.com (the subdomains of example.com)");
    int r = policy_canon_name(host + 2, out->name, err);
    if (r < 0) return r;
    if (!strchr(out->name, '.'))
        return err_set(err, -EINVAL,
                       "\"%s\" is a top-level domain, a public suffix; list the "
                       "sites you need (for example *.example.%s)",
                       out->name, out->name);
    if (is_public_suffix(out->name))
        return err_set(err, -EINVAL,
                       "\"%s\" is a public suffix; list the sites you need (for "
                       "example *.example.%s)",
                       out->name, out->name);
    out->kind = POLICY_RULE_WILDCARD;
    return 0;
}

/* "example.com", "*.example.com", "203.0.113.5": what is left once the port is off. */
static int parse_host(const char *host, struct policy_rule *out, err_t *err)
{
    if (strchr(host, '*')) return parse_wildcard(host, out, err);
    struct policy_addr a;
    if (policy_parse_ip(host, &a) == 0) return set_ip(out, &a, err);
    int r = policy_canon_name(host, out->name, err);
    if (r < 0) return r;
    out->kind = POLICY_RULE_NAME;
    return 0;
}

static int check_text(const char *text, err_t *err)
{
    if (!text || !*text) return err_set(err, -EINVAL, "the entry is empty");
    size_t len = strnlen(text, RULE_TEXT_MAX + 1);
    if (len > RULE_TEXT_MAX)
        return err_set(err, -EINVAL, "the entry is longer than %d bytes", RULE_TEXT_MAX);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c <= ' ' || c == 0x7f)
            return err_set(err, -EINVAL,
                           "the entry contains whitespace or a control character "
                           "(at byte %zu); write just the host",
                           i);
    }
    return 0;
}

int policy_parse_rule(const char *text, struct policy_rule *out, err_t *err)
{
    memset(out, 0, sizeof *out);
    int r = check_text(text, err);
    if (r < 0) return r;
    if (strstr(text, "://"))
        return err_set(err, -EINVAL,
                       "write just the host (example.com or example.com:443), "
                       "not a URL");
    if (text[0] == '[') {
        r = parse_bracketed(text, out, err);
    } else if (strchr(text, '/')) {
        r = parse_cidr(text, out, err);
    } else {
        const char *colon = strchr(text, ':');
        if (colon && strchr(colon + 1, ':')) {
            struct policy_addr a;
            if (policy_parse_ip(text, &a) < 0)
                return err_set(err, -EINVAL,
                               "not a host[:port] nor an IPv6 address (a port on an IPv6 "
                               "address is written [2001:db8::1]:443)");
            r = set_ip(out, &a, err);
        } else {
            char host[RULE_TEXT_MAX + 1];
            size_t len = colon ? (size_t)(colon - text) : strlen(text);
            memcpy(host, text, len);
            host[len] = '\0';
            if (len == 0) return err_set(err, -EINVAL, "no host before ':'");
            r = colon ? parse_port(colon + 1, &out->port, err) : 0;
            if (r == 0) r = parse_host(host, out, err);
        }
    }
    if (r < 0) memset(out, 0, sizeof *out);
    return r;
}

/* The rules of a list of strings (field names it in errors): *out owned, NULL when n is 0. */
static int parse_rules(const char *field, const char *const *text, size_t n,
                       struct policy_rule **out, err_t *err)
{
    *out = NULL;
    if (n > POLICY_RULES_MAX)
        return err_set(err, -EINVAL,
                       "%s has %zu entries; at most %d are allowed (a wildcard such "
                       "as *.example.com covers a site's subdomains)",
                       field, n, POLICY_RULES_MAX);
    if (n && !text) return err_set(err, -EINVAL, "%s is missing", field);
    struct policy_rule *rules = n ? calloc(n, sizeof *rules) : NULL;
    if (n && !rules) return err_set(err, -ENOMEM, "out of memory for the network policy");
    for (size_t i = 0; i < n; i++) {
        int r = policy_parse_rule(text[i], &rules[i], err);
        if (r < 0) {
            char shown[72];
            policy_show(text[i] ? text[i] : "", SIZE_MAX, shown, sizeof shown);
            free(rules);
            err_wrap(err, "%s[%zu] \"%s\"", field, i, shown);
            return r;
        }
    }
    *out = rules;
    return 0;
}

int policy_build(bool internet, bool listed, const char *const *allow, size_t n, struct policy *out,
                 err_t *err)
{
    memset(out, 0, sizeof *out);
    struct policy_rule *rules;
    int r = parse_rules("network.allow", allow, n, &rules, err);
    if (r < 0) return r;
    out->internet = internet;
    out->listed = listed || n > 0;
    out->rules = rules;
    out->n_rules = n;
    return 0;
}

int policy_deny(struct policy *p, const char *const *deny, size_t n, err_t *err)
{
    struct policy_rule *rules;
    int r = parse_rules("network.deny", deny, n, &rules, err);
    if (r < 0) return r;
    free(p->deny);
    p->deny = rules;
    p->n_deny = n;
    return 0;
}

void policy_clear(struct policy *p)
{
    if (!p) return;
    free(p->rules);
    free(p->deny);
    memset(p, 0, sizeof *p);
}

static bool name_matches(const struct policy_rule *r, const char *name)
{
    if (r->kind == POLICY_RULE_NAME) return strcmp(name, r->name) == 0;
    size_t n = strlen(name), s = strlen(r->name);
    return n > s + 1 && name[n - s - 1] == '.' && strcmp(name + n - s, r->name) == 0;
}

static bool rule_matches(const struct policy_rule *r, const char *name,
                         const struct policy_addr *addr, uint16_t port)
{
    if (r->port && port && r->port != port) return false;
    if (r->kind == POLICY_RULE_CIDR) {
        if (!addr) return false;
        struct policy_addr a = *addr;
        policy_addr_unmap(&a);
        return policy_addr_in_prefix(&a, &r->addr, r->prefix);
    }
    return name && name_matches(r, name);
}

bool policy_denied(const struct policy *p, const char *name, const struct policy_addr *addr,
                   uint16_t port)
{
    for (size_t i = 0; i < p->n_deny; i++)
        if ((!p->deny[i].port || p->deny[i].port == port) &&
            rule_matches(&p->deny[i], name, addr, port))
            return true;
    return false;
}

enum policy_verdict policy_check(const struct policy *p, const char *name,
                                 const struct policy_addr *addr, uint16_t port)
{
    if (!p || !p->internet) return POLICY_DENY_OFFLINE;
    if (policy_denied(p, name, addr, port)) return POLICY_DENY_DENIED;
    if (!p->listed && p->n_rules == 0) return POLICY_ALLOW; /* any rule makes it a list */
    for (size_t i = 0; i < p->n_rules; i++)
        if (rule_matches(&p->rules[i], name, addr, port)) return POLICY_ALLOW;
    return POLICY_DENY_NOT_LISTED;
}

const char *policy_verdict_name(enum policy_verdict v)
{
    switch (v) {
    case POLICY_ALLOW:
        return "allowed";
    case POLICY_DENY_OFFLINE:
        return "internet_off";
    case POLICY_DENY_NOT_LISTED:
        return "not_allowed";
    case POLICY_DENY_DENIED:
        return "denied";
    }
    return "unknown";
}
