/* libFuzzer target for the egress policy's parsers (src/policy): IP literals,
 * host names and allow-list rules, all of them text a sandbox or an API client
 * controls. Beyond "no crash, no out-of-bounds read" (ASan, UBSan) it checks:
 * - an accepted IP literal prints (policy_addr_str) to text that parses back
 *   to the same bytes and the same guard class; an IPv4 spelling is read
 *   exactly as glibc's inet_aton() reads it (what getaddrinfo() would connect
 *   to), an IPv6 one as inet_pton(); ::ffff:v4 is classed as v4, and NAT64 or
 *   6to4 forms of a refused IPv4 are refused;
 * - an IP literal is never also a host name;
 * - an accepted name is lower-case [a-z0-9-_] labels of 1..63 not starting or
 *   ending with '-', at most 253 characters, canonicalises to itself, and
 *   ASCII case and a trailing dot do not change the result;
 * - a name that canonicalises is also a valid NAME rule for that name;
 * - an accepted rule printed back as rule text parses to the same rule, and
 *   the policy made of it allows its own witness (the name, a subdomain for a
 *   wildcard, the base address for a CIDR) and refuses near misses (the apex
 *   of a wildcard, a parent-less lookalike, the other port, an address just
 *   outside the prefix);
 * - every error is -EINVAL with a message of printable, valid UTF-8.
 * Lines of the input (up to 8) are also built into one policy with
 * policy_build, which must accept them iff each parses alone.
 * Build (from the repository root):
 *   clang -std=gnu17 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined \
 *     -fno-sanitize-recover=undefined -Isrc \
 *     tests/fuzz/fuzz_policy.c src/policy/addr.c src/policy/name.c src/policy/rules.c src/dns/dns.c
 * \ src/common/common.c -o build/fuzz_policy build/fuzz_policy -max_len=4096
 * tests/fuzz/corpus/policy */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_NAME "fuzz_policy"
#include "fuzz.h"
#include "policy/policy.h"

#define MAX_TEXT 4096
#define MAX_LINES 8

/* Independent of src/policy's decoder: printable, well-formed UTF-8. */
static bool printable_utf8(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned c = *p, n, cp;
        if (c < 0x20 || c == 0x7f) return false;
        if (c < 0x80) {
            p++;
            continue;
        }
        if (c >= 0xc2 && c <= 0xdf)
            n = 1, cp = c & 0x1f;
        else if (c >= 0xe0 && c <= 0xef)
            n = 2, cp = c & 0x0f;
        else if (c >= 0xf0 && c <= 0xf4)
            n = 3, cp = c & 0x07;
        else
            return false;
        for (unsigned i = 1; i <= n; i++) {
            if ((p[i] & 0xc0) != 0x80) return false;
            cp = cp << 6 | (p[i] & 0x3f);
        }
        if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff))) return false;
        if (cp >= 0xd800 && cp <= 0xdfff) return false;
        if (cp < 0xa0) return false; /* C1 controls */
        p += n + 1;
    }
    return true;
}

static void check_error(int r, const err_t *err)
{
    REQUIRE(r == -EINVAL);
    REQUIRE(err->code == -EINVAL);
    REQUIRE(memchr(err->msg, '\0', sizeof err->msg));
    REQUIRE(err->msg[0]);
    REQUIRE(printable_utf8(err->msg));
}

static bool same_addr(const struct policy_addr *a, const struct policy_addr *b)
{
    return memcmp(a, b, sizeof *a) == 0;
}

static struct policy_addr v4_in_v6(const struct policy_addr *a, const uint8_t *prefix, size_t n,
                                   size_t at)
{
    struct policy_addr o = {.family = AF_INET6};
    memcpy(o.v6.s6_addr, prefix, n);
    memcpy(o.v6.s6_addr + at, &a->v4, 4);
    return o;
}

static void check_embedded(const struct policy_addr *a, enum policy_addr_class cls)
{
    static const uint8_t mapped[12] = {[10] = 0xff, [11] = 0xff};
    static const uint8_t nat64[12] = {0x00, 0x64, 0xff, 0x9b};
    static const uint8_t sixto4[2] = {0x20, 0x02};
    struct policy_addr m = v4_in_v6(a, mapped, sizeof mapped, 12);
    REQUIRE(policy_classify(&m, NULL, 0) == cls);
    struct policy_addr n = v4_in_v6(a, nat64, sizeof nat64, 12);
    REQUIRE((policy_classify(&n, NULL, 0) == POLICY_ADDR_OK) == (cls == POLICY_ADDR_OK));
    struct policy_addr s = v4_in_v6(a, sixto4, sizeof sixto4, 2);
    REQUIRE((policy_classify(&s, NULL, 0) == POLICY_ADDR_OK) == (cls == POLICY_ADDR_OK));
    /* the host's own address is refused, also when it is written mapped */
    REQUIRE(policy_classify(a, &m, 1) != POLICY_ADDR_OK);
}

/* What a resolver would make of the same text. */
static void check_reference(const char *s, const struct policy_addr *a, int r)
{
    if (s[0] == '[' || strchr(s, ':')) {
        char inner[MAX_TEXT + 1];
        size_t len = strlen(s);
        if (s[0] == '[') {
            if (len < 2 || s[len - 1] != ']') {
                REQUIRE(r < 0);
                return;
            }
            memcpy(inner, s + 1, len - 2);
            inner[len - 2] = '\0';
        } else {
            memcpy(inner, s, len + 1);
        }
        struct in6_addr ref;
        bool ok = !strchr(inner, '%') && inet_pton(AF_INET6, inner, &ref) == 1;
        REQUIRE(ok == (r == 0));
        if (ok) REQUIRE(a->family == AF_INET6 && !memcmp(&a->v6, &ref, sizeof ref));
        return;
    }
    for (const char *p = s; *p; p++)
        if (isspace((unsigned char)*p)) return; /* inet_aton tolerates trailing junk after it */
    struct in_addr ref;
    bool ok = inet_aton(s, &ref) == 1;
    REQUIRE(ok == (r == 0));
    if (ok) REQUIRE(a->family == AF_INET && a->v4.s_addr == ref.s_addr);
}

static void fuzz_ip(const char *s)
{
    struct policy_addr a;
    int r = policy_parse_ip(s, &a);
    check_reference(s, &a, r);
    if (r < 0) {
        REQUIRE(r == -EINVAL);
        return;
    }
    REQUIRE(a.family == AF_INET || a.family == AF_INET6);
    char text[INET6_ADDRSTRLEN];
    policy_addr_str(&a, text, sizeof text);
    struct policy_addr b;
    REQUIRE(policy_parse_ip(text, &b) == 0);
    REQUIRE(same_addr(&a, &b));
    enum policy_addr_class cls = policy_classify(&a, NULL, 0);
    REQUIRE(policy_classify(&b, NULL, 0) == cls);
    REQUIRE(strcmp(policy_addr_class_name(cls), "unknown") != 0);
    if (a.family == AF_INET) check_embedded(&a, cls);
    /* a literal is never a host name too */
    char name[POLICY_NAME_MAX];
    err_t err = {0};
    REQUIRE(policy_canon_name(s, name, &err) < 0);
}

static void check_canonical(const char *out)
{
    size_t len = strlen(out), label = 0;
    REQUIRE(len >= 1 && len <= POLICY_NAME_MAX - 1);
    for (size_t i = 0; i <= len; i++) {
        char c = out[i];
        if (c == '.' || c == '\0') {
            REQUIRE(label >= 1 && label <= 63);
            REQUIRE(out[i - 1] != '-' && out[i - label] != '-');
            label = 0;
            continue;
        }
        REQUIRE((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_');
        label++;
    }
}

static void fuzz_name(const char *s)
{
    char out[POLICY_NAME_MAX], again[POLICY_NAME_MAX];
    err_t err = {0};
    int r = policy_canon_name(s, out, &err);
    if (r < 0) {
        check_error(r, &err);
        REQUIRE(out[0] == '\0');
    } else {
        check_canonical(out);
        REQUIRE(policy_canon_name(out, again, &err) == 0 && strcmp(out, again) == 0);
        struct policy_rule rule;
        if (strlen(s) <= 1024) {
            REQUIRE(policy_parse_rule(s, &rule, &err) == 0);
            REQUIRE(rule.kind == POLICY_RULE_NAME && strcmp(rule.name, out) == 0);
        }
    }
    /* ASCII case and the root's dot change nothing */
    static char alt[MAX_TEXT + 2];
    size_t len = strlen(s);
    for (size_t i = 0; i <= len; i++)
        alt[i] = (char)toupper((unsigned char)s[i]);
    err_t err2 = {0};
    int r2 = policy_canon_name(alt, again, &err2);
    REQUIRE((r2 == 0) == (r == 0) && (r < 0 || strcmp(out, again) == 0));
    if (len && s[len - 1] != '.') {
        memcpy(alt, s, len);
        memcpy(alt + len, ".", 2);
        r2 = policy_canon_name(alt, again, &err2);
        REQUIRE((r2 == 0) == (r == 0) && (r < 0 || strcmp(out, again) == 0));
    }
}

/* The rule as text again, in the form parse_rule documents. */
static void rule_text(const struct policy_rule *r, char *out, size_t size)
{
    char port[8] = "";
    if (r->port) snprintf(port, sizeof port, ":%u", r->port);
    if (r->kind == POLICY_RULE_NAME) {
        snprintf(out, size, "%s%s", r->name, port);
    } else if (r->kind == POLICY_RULE_WILDCARD) {
        snprintf(out, size, "*.%s%s", r->name, port);
    } else {
        char a[INET6_ADDRSTRLEN];
        policy_addr_str(&r->addr, a, sizeof a);
        snprintf(out, size, "%s/%u%s", a, r->prefix, port);
    }
}

static bool same_rule(const struct policy_rule *a, const struct policy_rule *b)
{
    return a->kind == b->kind && strcmp(a->name, b->name) == 0 && a->prefix == b->prefix &&
           a->port == b->port && (a->kind != POLICY_RULE_CIDR || same_addr(&a->addr, &b->addr));
}

static enum policy_verdict check1(const struct policy_rule *r, const char *name,
                                  const struct policy_addr *a, uint16_t port)
{
    struct policy p = {.internet = true, .rules = (struct policy_rule *)r, .n_rules = 1};
    return policy_check(&p, name, a, port);
}

static void check_witness(const struct policy_rule *r)
{
    uint16_t port = r->port ? r->port : 443, other = (uint16_t)(port == 1 ? 2 : port - 1);
    char name[POLICY_NAME_MAX + 8];
    if (r->kind == POLICY_RULE_CIDR) {
        REQUIRE(check1(r, NULL, &r->addr, port) == POLICY_ALLOW);
        REQUIRE(check1(r, "x.example", &r->addr, port) == POLICY_ALLOW);
        REQUIRE(check1(r, "x.example", NULL, port) == POLICY_DENY_NOT_LISTED);
        if (r->port) REQUIRE(check1(r, NULL, &r->addr, other) == POLICY_DENY_NOT_LISTED);
        struct policy_addr out = r->addr;
        uint8_t *b = out.family == AF_INET ? (uint8_t *)&out.v4 : out.v6.s6_addr;
        unsigned bit = r->prefix - 1; /* the last bit the prefix fixes */
        b[bit / 8] ^= (uint8_t)(0x80 >> (bit % 8));
        REQUIRE(check1(r, NULL, &out, port) == POLICY_DENY_NOT_LISTED);
        return;
    }
    const char *inside = name; /* a name the rule covers */
    if (r->kind == POLICY_RULE_NAME) {
        inside = r->name;
        REQUIRE(check1(r, r->name, NULL, port) == POLICY_ALLOW);
        REQUIRE(check1(r, r->name, NULL, 0) == POLICY_ALLOW); /* a DNS question */
        snprintf(name, sizeof name, "x.%s", r->name);
        REQUIRE(check1(r, name, NULL, port) == POLICY_DENY_NOT_LISTED);
    } else {
        REQUIRE(check1(r, r->name, NULL, port) == POLICY_DENY_NOT_LISTED); /* not the apex */
        snprintf(name, sizeof name, "x.y.%s", r->name);
        REQUIRE(check1(r, name, NULL, port) == POLICY_ALLOW);
        snprintf(name, sizeof name, "x%s", r->name);
        REQUIRE(check1(r, name, NULL, port) == POLICY_DENY_NOT_LISTED);
        snprintf(name, sizeof name, "x.%s", r->name);
        REQUIRE(check1(r, name, NULL, port) == POLICY_ALLOW);
    }
    if (r->port) REQUIRE(check1(r, inside, NULL, other) == POLICY_DENY_NOT_LISTED);
    REQUIRE(check1(r, inside, NULL, 0) == POLICY_ALLOW);
    /* under a last label of its own ("x.x" + ".x0", not ".x": x.x.x is in *.x.x) */
    const char *last = strrchr(r->name, '.');
    snprintf(name, sizeof name, "%s.%s0", r->name, last ? last + 1 : r->name);
    REQUIRE(check1(r, name, NULL, port) == POLICY_DENY_NOT_LISTED);
}

static int fuzz_rule(const char *s)
{
    struct policy_rule r, back;
    err_t err = {0};
    int rc = policy_parse_rule(s, &r, &err);
    if (rc < 0) {
        check_error(rc, &err);
        return rc;
    }
    if (r.kind == POLICY_RULE_CIDR) {
        REQUIRE(r.prefix >= 1 && r.prefix <= (r.addr.family == AF_INET ? 32u : 128u));
        REQUIRE(r.name[0] == '\0');
    } else {
        check_canonical(r.name);
        if (r.kind == POLICY_RULE_WILDCARD) REQUIRE(strchr(r.name, '.'));
    }
    char text[POLICY_NAME_MAX + 80];
    rule_text(&r, text, sizeof text);
    if (policy_parse_rule(text, &back, &err) != 0) {
        fprintf(stderr, "fuzz_policy: \"%s\" printed as \"%s\": %s\n", s, text, err.msg);
        abort();
    }
    REQUIRE(same_rule(&r, &back));
    check_witness(&r);
    return 0;
}

/* The input's lines as one allow list: built iff every line parses alone. */
static void fuzz_lines(const char *s)
{
    static char copy[MAX_TEXT + 1];
    const char *lines[MAX_LINES];
    size_t n = 0;
    bool all_ok = true;
    strcpy(copy, s);
    for (char *p = copy; p && n < MAX_LINES;) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = '\0';
        lines[n++] = p;
        all_ok = fuzz_rule(p) == 0 && all_ok;
        p = nl ? nl + 1 : NULL;
    }
    struct policy pol;
    err_t err = {0};
    int r = policy_build(true, true, lines, n, &pol, &err);
    REQUIRE((r == 0) == all_ok);
    if (r < 0) {
        check_error(r, &err);
        REQUIRE(pol.rules == NULL && pol.n_rules == 0 && !pol.internet);
        REQUIRE(strstr(err.msg, "network.allow["));
        return;
    }
    REQUIRE(pol.n_rules == n);
    for (size_t i = 0; i < n; i++) {
        const struct policy_rule *r1 = &pol.rules[i];
        if (r1->kind == POLICY_RULE_CIDR)
            REQUIRE(policy_check(&pol, NULL, &r1->addr, r1->port) == POLICY_ALLOW);
        else if (r1->kind == POLICY_RULE_NAME)
            REQUIRE(policy_check(&pol, r1->name, NULL, r1->port) == POLICY_ALLOW);
    }
    pol.internet = false;
    REQUIRE(policy_check(&pol, "example.com", NULL, 443) == POLICY_DENY_OFFLINE);
    policy_clear(&pol);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char s[MAX_TEXT + 1];
    if (size > MAX_TEXT) return 0;
    memcpy(s, data, size);
    s[size] = '\0'; /* a NUL inside ends the text, as it would for a C caller */
    fuzz_ip(s);
    fuzz_name(s);
    fuzz_rule(s);
    if (strchr(s, '\n')) fuzz_lines(s);
    return 0;
}
