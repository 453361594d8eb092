/* Addresses: every literal spelling a resolver accepts, and the always-on guard
 * that refuses special-purpose addresses whatever the policy says. */
#include "policy_impl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#define NOT_HEX (-1)

/* The value of a hex digit (0..15), or NOT_HEX. */
static int hex_value(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return NOT_HEX;
}

/* One part of an inet_aton() IPv4 literal: decimal, octal after a leading 0,
 * hex after 0x. Returns the end of the part or NULL. */
static const char *v4_part(const char *p, uint32_t *out)
{
    int base = 10;
    if (*p < '0' || *p > '9') return NULL;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        base = 16;
        p += 2;
        if (hex_value(*p) == NOT_HEX) return NULL; /* glibc refuses a bare "0x" too */
    } else if (p[0] == '0') {
        base = 8;
    }
    uint64_t v = 0;
    for (int d; (d = hex_value(*p)) != NOT_HEX && d < base; p++) {
        v = v * (uint64_t)base + (uint64_t)d;
        if (v > UINT32_MAX) return NULL;
    }
    *out = (uint32_t)v;
    return p;
}

/* The grammar of glibc's inet_aton() (which getaddrinfo() uses for numeric
 * hosts) minus its trailing-whitespace tolerance: 1 to 4 parts, the last one
 * filling the remaining bytes (127.1 is 127.0.0.1, 2130706433 is too). */
static int parse_v4(const char *s, struct in_addr *out)
{
    uint32_t parts[4];
    size_t n = 0;
    for (const char *p = s;; p++) {
        if (n == 4) return -EINVAL;
        p = v4_part(p, &parts[n++]);
        if (!p) return -EINVAL;
        if (*p == '\0') break;
        if (*p != '.') return -EINVAL;
    }
    uint32_t v = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        if (parts[i] > 255) return -EINVAL;
        v |= parts[i] << (24 - 8 * i);
    }
    if (n > 1 && parts[n - 1] >> (8 * (5 - n))) return -EINVAL;
    out->s_addr = htonl(v | parts[n - 1]);
    return 0;
}

static int parse_v6(const char *s, size_t len, struct policy_addr *out)
{
    char buf[INET6_ADDRSTRLEN + 1];
    if (len >= sizeof buf) return -EINVAL;
    memcpy(buf, s, len);
    buf[len] = '\0';
    /* A zone (fe80::1%eth0) names an interface of this host: never a destination. */
    if (!strchr(buf, ':') || strchr(buf, '%')) return -EINVAL;
    if (inet_pton(AF_INET6, buf, &out->v6) != 1) return -EINVAL;
    out->family = AF_INET6;
    return 0;
}

int policy_parse_ip(const char *in, struct policy_addr *out)
{
    memset(out, 0, sizeof *out);
    if (!in || !*in) return -EINVAL;
    size_t len = strnlen(in, INET6_ADDRSTRLEN + 3);
    if (in[0] == '[') {
        if (len < 2 || in[len - 1] != ']') return -EINVAL;
        return parse_v6(in + 1, len - 2, out);
    }
    if (strchr(in, ':')) return parse_v6(in, len, out);
    if (parse_v4(in, &out->v4) < 0) return -EINVAL;
    out->family = AF_INET;
    return 0;
}

void policy_addr_str(const struct policy_addr *a, char *out, size_t size)
{
    if (!size) return;
    if (!a || !inet_ntop(a->family, a->family == AF_INET ? (const void *)&a->v4 : &a->v6, out,
                         (socklen_t)size))
        snprintf(out, size, "?");
}

void policy_addr_unmap(struct policy_addr *a)
{
    if (a->family != AF_INET6 || !IN6_IS_ADDR_V4MAPPED(&a->v6)) return;
    struct in_addr v4;
    memcpy(&v4, a->v6.s6_addr + 12, 4);
    memset(a, 0, sizeof *a);
    a->family = AF_INET;
    a->v4 = v4;
}

bool policy_addr_same(const struct policy_addr *a, const struct policy_addr *b)
{
    if (a->family != b->family) return false;
    if (a->family == AF_INET) return a->v4.s_addr == b->v4.s_addr;
    return a->family == AF_INET6 && memcmp(&a->v6, &b->v6, sizeof a->v6) == 0;
}

static bool bits_equal(const uint8_t *x, const uint8_t *y, unsigned bits)
{
    if (memcmp(x, y, bits / 8) != 0) return false;
    if (bits % 8 == 0) return true;
    uint8_t mask = (uint8_t)(0xff << (8 - bits % 8));
    return ((x[bits / 8] ^ y[bits / 8]) & mask) == 0;
}

bool policy_addr_in_prefix(const struct policy_addr *a, const struct policy_addr *base,
                           unsigned prefix)
{
    if (a->family != base->family) return false;
    if (a->family == AF_INET)
        return prefix <= 32 &&
               bits_equal((const uint8_t *)&a->v4, (const uint8_t *)&base->v4, prefix);
    return a->family == AF_INET6 && prefix <= 128 &&
           bits_equal(a->v6.s6_addr, base->v6.s6_addr, prefix);
}

struct v4_block {
    uint32_t net;
    unsigned len;
    enum policy_addr_class cls;
};

/* IANA's IPv4 special-purpose registry, minus the documentation ranges
 * 192.0.2.0/24, 198.51.100.0/24 and 203.0.113.0/24: nothing real lives there,
 * and the project's tests use 198.51.100.0/24 for fake public upstreams, so
 * they are deliberately NOT refused. */
static const struct v4_block v4_blocks[] = {
    {0x00000000, 8, POLICY_ADDR_UNSPECIFIED}, /* 0.0.0.0/8 "this network" */
    {0x7f000000, 8, POLICY_ADDR_LOOPBACK},    /* 127.0.0.0/8 */
    {0x0a000000, 8, POLICY_ADDR_PRIVATE},     /* 10.0.0.0/8 */
    {0xac100000, 12, POLICY_ADDR_PRIVATE},    /* 172.16.0.0/12 */
    {0xc0a80000, 16, POLICY_ADDR_PRIVATE},    /* 192.168.0.0/16 */
    {0x64400000, 10, POLICY_ADDR_SHARED},     /* 100.64.0.0/10, Alibaba's 100.100.100.200 */
    {0xa9fe0000, 16, POLICY_ADDR_LINK_LOCAL}, /* 169.254.0.0/16, 169.254.169.254 */
    {0xa83f8110, 32, POLICY_ADDR_METADATA},   /* 168.63.129.16, Azure's wire server */
    {0xc0000000, 24, POLICY_ADDR_RESERVED},   /* 192.0.0.0/24 IETF protocol assignments */
    {0xc0586300, 24, POLICY_ADDR_RESERVED},   /* 192.88.99.0/24 6to4 relay anycast */
    {0xc6120000, 15, POLICY_ADDR_RESERVED},   /* 198.18.0.0/15 benchmarking */
    {0xe0000000, 4, POLICY_ADDR_MULTICAST},   /* 224.0.0.0/4 */
    {0xf0000000, 4, POLICY_ADDR_RESERVED},    /* 240.0.0.0/4, 255.255.255.255 */
};

static bool host_has(const struct policy_addr *host, size_t n, const struct policy_addr *a)
{
    for (size_t i = 0; host && i < n; i++) {
        struct policy_addr h = host[i];
        policy_addr_unmap(&h);
        if (policy_addr_same(&h, a)) return true;
    }
    return false;
}

static enum policy_addr_class classify_v4(uint32_t v, const struct policy_addr *host, size_t n)
{
    for (size_t i = 0; i < ARRAY_LEN(v4_blocks); i++) {
        uint32_t mask = UINT32_MAX << (32 - v4_blocks[i].len);
        if ((v & mask) == v4_blocks[i].net) return v4_blocks[i].cls;
    }
    struct policy_addr a = {.family = AF_INET, .v4 = {htonl(v)}};
    return host_has(host, n, &a) ? POLICY_ADDR_HOST_LOCAL : POLICY_ADDR_OK;
}

/* An IPv6 form that carries an IPv4 (compatible, NAT64, 6to4, Teredo) reaches
 * that IPv4 through some translator: refuse it whenever the IPv4 would be. */
static enum policy_addr_class embedded(uint32_t v, const struct policy_addr *host, size_t n)
{
    return classify_v4(v, host, n) == POLICY_ADDR_OK ? POLICY_ADDR_OK : POLICY_ADDR_RESERVED;
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

struct v6_block {
    uint8_t net[6];
    unsigned len;
    enum policy_addr_class cls;
};

/* IANA's IPv6 special-purpose registry, for the part inside 2000::/3 or with a
 * class of its own; everything else outside 2000::/3 (100::/64 discard,
 * 5f00::/16 SRv6, unallocated space) is refused as reserved further down. */
static const struct v6_block v6_blocks[] = {
    {{0xfc}, 7, POLICY_ADDR_PRIVATE},           /* fc00::/7 ULA, fd00:ec2::254 */
    {{0xfe, 0x80}, 10, POLICY_ADDR_LINK_LOCAL}, /* fe80::/10 */
    {{0xfe, 0xc0}, 10, POLICY_ADDR_RESERVED},   /* fec0::/10 old site-local */
    {{0xff}, 8, POLICY_ADDR_MULTICAST},         /* ff00::/8 */
    {{0x00, 0x64, 0xff, 0x9b, 0x00, 0x01}, 48, POLICY_ADDR_RESERVED}, /* local-use NAT64 */
    {{0x20, 0x01, 0x0d, 0xb8}, 32, POLICY_ADDR_RESERVED}, /* 2001:db8::/32 documentation */
    {{0x3f, 0xff, 0x00}, 20, POLICY_ADDR_RESERVED},       /* 3fff::/20 documentation */
    {{0x20, 0x01, 0x00, 0x02, 0x00, 0x00}, 48, POLICY_ADDR_RESERVED}, /* benchmarking */
    {{0x20, 0x01, 0x00, 0x10}, 28, POLICY_ADDR_RESERVED},             /* 2001:10::/28 ORCHID */
    {{0x20, 0x01, 0x00, 0x20}, 28, POLICY_ADDR_RESERVED},             /* 2001:20::/28 ORCHIDv2 */
};

static bool zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i]) return false;
    return true;
}

/* The IPv4 inside an address of a form that embeds one, or false. */
static bool v6_embedded_v4(const uint8_t *b, uint32_t *v4)
{
    static const uint8_t nat64[12] = {0x00, 0x64, 0xff, 0x9b};
    static const uint8_t siit[12] = {[8] = 0xff, [9] = 0xff}; /* ::ffff:0:a.b.c.d, RFC 2765 */
    if (zero(b, 12) || !memcmp(b, nat64, 12) || !memcmp(b, siit, 12)) {
        *v4 = get32(b + 12); /* compatible ::a.b.c.d (deprecated), NAT64, SIIT */
        return true;
    }
    if (b[0] == 0x20 && b[1] == 0x02) { /* 6to4 2002:AABB:CCDD::/48 */
        *v4 = get32(b + 2);
        return true;
    }
    if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0) { /* Teredo 2001::/32 */
        *v4 = get32(b + 12) ^ UINT32_MAX; /* the client's address, obfuscated */
        return true;
    }
    return false;
}

static enum policy_addr_class classify_v6(const struct in6_addr *a, const struct policy_addr *host,
                                          size_t n)
{
    const uint8_t *b = a->s6_addr;
    if (zero(b, 16)) return POLICY_ADDR_UNSPECIFIED;
    if (zero(b, 15) && b[15] == 1) return POLICY_ADDR_LOOPBACK;
    uint32_t v4;
    if (v6_embedded_v4(b, &v4)) return embedded(v4, host, n);
    for (size_t i = 0; i < ARRAY_LEN(v6_blocks); i++)
        if (bits_equal(b, v6_blocks[i].net, v6_blocks[i].len)) return v6_blocks[i].cls;
    if ((b[0] & 0xe0) != 0x20) return POLICY_ADDR_RESERVED; /* outside 2000::/3 global unicast */
    struct policy_addr me = {.family = AF_INET6, .v6 = *a};
    return host_has(host, n, &me) ? POLICY_ADDR_HOST_LOCAL : POLICY_ADDR_OK;
}

enum policy_addr_class policy_classify(const struct policy_addr *a,
                                       const struct policy_addr *host_addrs, size_t n_host)
{
    if (!a) return POLICY_ADDR_RESERVED;
    struct policy_addr u = *a;
    policy_addr_unmap(&u); /* ::ffff:a.b.c.d is exactly a.b.c.d */
    if (u.family == AF_INET) return classify_v4(ntohl(u.v4.s_addr), host_addrs, n_host);
    if (u.family == AF_INET6) return classify_v6(&u.v6, host_addrs, n_host);
    return POLICY_ADDR_RESERVED; /* no family: nothing we could vouch for */
}

const char *policy_addr_class_name(enum policy_addr_class c)
{
    switch (c) {
    case POLICY_ADDR_OK:
        return "ok";
    case POLICY_ADDR_UNSPECIFIED:
        return "unspecified";
    case POLICY_ADDR_LOOPBACK:
        return "loopback";
    case POLICY_ADDR_PRIVATE:
        return "private";
    case POLICY_ADDR_SHARED:
        return "shared";
    case POLICY_ADDR_LINK_LOCAL:
        return "link_local";
    case POLICY_ADDR_METADATA:
        return "metadata";
    case POLICY_ADDR_RESERVED:
        return "reserved";
    case POLICY_ADDR_MULTICAST:
        return "multicast";
    case POLICY_ADDR_HOST_LOCAL:
        return "host_local";
    }
    return "unknown";
}
