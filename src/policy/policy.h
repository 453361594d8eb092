/* policy: who a sandbox may talk to. Host names are canonicalised, allow-list
 * patterns parsed and matched, and addresses classified by the always-on guard
 * (loopback, private, link-local, metadata, ... are refused whatever the
 * policy). Pure functions, no I/O: everything here is unit-tested and fuzzed. */
#ifndef RUNTIME_POLICY_H
#define RUNTIME_POLICY_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/common.h"

#define POLICY_NAME_MAX 254 /* canonical name plus NUL */

/* Canonical form of a DNS name: lower case, no trailing dot, IDNA labels as
 * punycode ("bücher.example" -> "xn--bcher-kva.example"), each label 1..63 of
 * [a-z0-9-_] not starting or ending with '-', total <= 253. Non-ASCII input must
 * be UTF-8; only ASCII, Latin-1, Greek and Cyrillic capitals are lower-cased
 * (no full UTS #46 mapping: other spellings fail closed). A name whose
 * last label is a number ("1.2.3.4", "127.0.0.1.", "a.0x7f") is refused: it is
 * an IP address spelling, so try policy_parse_ip() first. Returns 0 or -EINVAL
 * with a message in err (err may be NULL). */
int policy_canon_name(const char *in, char out[POLICY_NAME_MAX], err_t *err);

/* An address in a form that covers both families: IPv4 is kept as IPv4. */
struct policy_addr {
    int family; /* AF_INET or AF_INET6 */
    union {
        struct in_addr v4;
        struct in6_addr v6;
    };
};

/* Parses an IP literal in every spelling a resolver or URL parser accepts:
 * dotted quad, shortened and mixed forms (127.1, 0x7f.0.0.1, 017700000001,
 * 2130706433), bracketed or plain IPv6 ([::1], ::ffff:127.0.0.1, with %zone
 * refused). Returns 0 if `in` is an IP literal, -EINVAL if it is not. */
int policy_parse_ip(const char *in, struct policy_addr *out);
/* Writes the canonical text (inet_ntop form, no brackets). */
void policy_addr_str(const struct policy_addr *a, char *out, size_t size);

/* Why an address is refused, or POLICY_ADDR_OK. */
enum policy_addr_class {
    POLICY_ADDR_OK = 0,
    POLICY_ADDR_UNSPECIFIED, /* 0.0.0.0/8, :: */
    POLICY_ADDR_LOOPBACK,    /* 127/8, ::1 */
    POLICY_ADDR_PRIVATE,     /* RFC 1918, fc00::/7 (ULA, fd00:ec2::254 included) */
    POLICY_ADDR_SHARED,      /* 100.64/10 CGNAT (Alibaba metadata 100.100.100.200) */
    POLICY_ADDR_LINK_LOCAL,  /* 169.254/16 (cloud metadata), fe80::/10 */
    POLICY_ADDR_METADATA,    /* 168.63.129.16 (Azure), and other single metadata hosts */
    POLICY_ADDR_RESERVED,    /* 192.0.0/24, 198.18/15, 240/4, 255.255.255.255, other IANA special */
    POLICY_ADDR_MULTICAST,   /* 224/4, ff00::/8 */
    POLICY_ADDR_HOST_LOCAL,  /* one of this host's own interface addresses */
};
/* Classifies a, judging IPv6 forms that embed an IPv4 (mapped ::ffff:0:0/96,
 * compatible ::/96, NAT64 64:ff9b::/96 and 64:ff9b:1::/48, 6to4 2002::/16,
 * Teredo 2001::/32) by the IPv4 inside. host_addrs (may be NULL) are the
 * host's own addresses. */
enum policy_addr_class policy_classify(const struct policy_addr *a,
                                       const struct policy_addr *host_addrs, size_t n_host);
const char *policy_addr_class_name(enum policy_addr_class c); /* "loopback", ... */

/* One allow-list entry: "example.com", "*.example.com" (subdomains only, not the
 * apex), optional ":port", an IP literal, or a CIDR ("203.0.113.0/24",
 * "2001:db8::/32"). "*", "*.com" (a wildcard over a public suffix or a single
 * label) and other patterns are rejected with a message that says why. */
struct policy_rule {
    enum { POLICY_RULE_NAME, POLICY_RULE_WILDCARD, POLICY_RULE_CIDR } kind;
    char name[POLICY_NAME_MAX]; /* canonical; for WILDCARD the suffix without "*." */
    struct policy_addr addr;    /* CIDR base */
    unsigned prefix;            /* CIDR length */
    uint16_t port;              /* 0: any port */
};
int policy_parse_rule(const char *text, struct policy_rule *out, err_t *err);

/* A sandbox's network policy. */
#define POLICY_RULES_MAX 256 /* entries in network.allow */
struct policy {
    bool internet;
    bool listed; /* only what a rule matches (nothing when there is none); false and no
                    rule: any public host */
    struct policy_rule *rules; /* owned */
    size_t n_rules;
    struct policy_rule *deny; /* owned: refused whatever else says (Runtime Cloud's deny) */
    size_t n_deny;
};
/* Builds from the network.allow strings of a sandbox's settings; err names the
 * bad entry. listed: an allow list was given (even empty: then no host); false
 * with n 0: no list, any public host. */
int policy_build(bool internet, bool listed, const char *const *allow, size_t n, struct policy *out,
                 err_t *err);
/* Adds the network.deny strings (the same forms as allow): a destination one matches is
 * refused even when an allow rule matches it. A deny rule with a port refuses that
 * port only, so it never refuses a DNS question (which has none). */
int policy_deny(struct policy *p, const char *const *deny, size_t n, err_t *err);
void policy_clear(struct policy *p);

/* Decision for a destination: name is canonical or NULL (IP-only connection),
 * addr may be NULL (not resolved yet). internet=false refuses all; no list
 * (listed false) allows any public host; otherwise a rule must match the name (or the
 * address, for IP and CIDR rules) and the port. A deny rule that matches wins. Port 0 in a rule
 * matches any port; port 0 here means "any port" too (a DNS question has no port yet). */
enum policy_verdict {
    POLICY_ALLOW,
    POLICY_DENY_OFFLINE,
    POLICY_DENY_NOT_LISTED,
    POLICY_DENY_DENIED
};
enum policy_verdict policy_check(const struct policy *p, const char *name,
                                 const struct policy_addr *addr, uint16_t port);
/* Whether a deny rule refuses this destination (policy_check asks it first; the egress
 * asks it again of each address a name resolves to, for deny rules that are CIDRs). A
 * deny rule with a port refuses that port only: an unknown port (0, a DNS question) is
 * not refused by it. */
bool policy_denied(const struct policy *p, const char *name, const struct policy_addr *addr,
                   uint16_t port);
const char *
policy_verdict_name(enum policy_verdict v); /* "allowed", "internet_off", "not_allowed", "denied" */

#endif
