/* The egress policy's pure parts: every address class of the always-on guard and
 * every literal spelling of it, host name canonicalisation (IDNA included),
 * allow-list rule parsing with its error messages, and the allow/deny decision. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>

#include "policy/policy.h"
#include "policy/policy_impl.h"
#include "unit.h"

#define INVALID (-1) /* policy_parse_ip must refuse it */

struct addr_case {
    const char *in;
    int cls; /* enum policy_addr_class, or INVALID */
};

static const struct addr_case addr_cases[] = {
    /* loopback in every spelling */
    {"127.0.0.1", POLICY_ADDR_LOOPBACK},
    {"127.1", POLICY_ADDR_LOOPBACK},
    {"127.0.1", POLICY_ADDR_LOOPBACK},
    {"2130706433", POLICY_ADDR_LOOPBACK},
    {"0x7f.0.0.1", POLICY_ADDR_LOOPBACK},
    {"0x7f.1", POLICY_ADDR_LOOPBACK},
    {"0X7F000001", POLICY_ADDR_LOOPBACK},
    {"017700000001", POLICY_ADDR_LOOPBACK},
    {"0177.0.0.1", POLICY_ADDR_LOOPBACK},
    {"127.255.255.254", POLICY_ADDR_LOOPBACK},
    {"::1", POLICY_ADDR_LOOPBACK},
    {"[::1]", POLICY_ADDR_LOOPBACK},
    {"0:0:0:0:0:0:0:1", POLICY_ADDR_LOOPBACK},
    {"::ffff:127.0.0.1", POLICY_ADDR_LOOPBACK},
    {"[::ffff:127.0.0.1]", POLICY_ADDR_LOOPBACK},
    {"::ffff:7f00:1", POLICY_ADDR_LOOPBACK},
    {"::FFFF:7F00:0001", POLICY_ADDR_LOOPBACK},
    /* IPv6 forms that carry an IPv4, judged by it */
    {"::127.0.0.1", POLICY_ADDR_RESERVED},        /* compatible */
    {"::8.8.8.8", POLICY_ADDR_OK},                /* compatible, public inside */
    {"::0.0.0.2", POLICY_ADDR_RESERVED},          /* compatible, 0/8 inside */
    {"::ffff:0:127.0.0.1", POLICY_ADDR_RESERVED}, /* SIIT */
    {"64:ff9b::127.0.0.1", POLICY_ADDR_RESERVED},
    {"64:ff9b::a9fe:a9fe", POLICY_ADDR_RESERVED},
    {"64:ff9b::a00:1", POLICY_ADDR_RESERVED},
    {"64:ff9b::808:808", POLICY_ADDR_OK},
    {"64:ff9b:1::808:808", POLICY_ADDR_RESERVED}, /* local-use NAT64 */
    {"2002:a9fe:a9fe::", POLICY_ADDR_RESERVED},
    {"2002:7f00:1::1", POLICY_ADDR_RESERVED},
    {"2002:c0a8:101::", POLICY_ADDR_RESERVED},
    {"2002:808:808::1", POLICY_ADDR_OK},
    {"2001:0:4136:e378:8000:63bf:80ff:fffe", POLICY_ADDR_RESERVED}, /* Teredo, 127.0.0.1 */
    {"2001:0:4136:e378:8000:63bf:5601:5645", POLICY_ADDR_RESERVED}, /* Teredo, 169.254.169.186 */
    {"2001:0:4136:e378:8000:63bf:f7f7:f7f7", POLICY_ADDR_OK},       /* Teredo, 8.8.8.8 */
    /* unspecified */
    {"0.0.0.0", POLICY_ADDR_UNSPECIFIED},
    {"0", POLICY_ADDR_UNSPECIFIED},
    {"0.1.2.3", POLICY_ADDR_UNSPECIFIED},
    {"::", POLICY_ADDR_UNSPECIFIED},
    {"[::]", POLICY_ADDR_UNSPECIFIED},
    {"::ffff:0.0.0.0", POLICY_ADDR_UNSPECIFIED},
    /* RFC 1918 and ULA */
    {"10.1.2.3", POLICY_ADDR_PRIVATE},
    {"10.255.255.255", POLICY_ADDR_PRIVATE},
    {"012.1.2.3", POLICY_ADDR_PRIVATE},
    {"172.16.0.1", POLICY_ADDR_PRIVATE},
    {"172.31.255.255", POLICY_ADDR_PRIVATE},
    {"172.15.255.255", POLICY_ADDR_OK},
    {"172.32.0.1", POLICY_ADDR_OK},
    {"192.168.1.1", POLICY_ADDR_PRIVATE},
    {"192.169.0.1", POLICY_ADDR_OK},
    {"::ffff:10.0.0.1", POLICY_ADDR_PRIVATE},
    {"fd00:ec2::254", POLICY_ADDR_PRIVATE},
    {"[fd00:ec2::254]", POLICY_ADDR_PRIVATE},
    {"fc00::1", POLICY_ADDR_PRIVATE},
    /* CGNAT, link-local, metadata */
    {"100.64.0.1", POLICY_ADDR_SHARED},
    {"100.100.100.200", POLICY_ADDR_SHARED},
    {"100.127.255.255", POLICY_ADDR_SHARED},
    {"100.63.255.255", POLICY_ADDR_OK},
    {"100.128.0.1", POLICY_ADDR_OK},
    {"169.254.169.254", POLICY_ADDR_LINK_LOCAL},
    {"0xa9fea9fe", POLICY_ADDR_LINK_LOCAL},
    {"2852039166", POLICY_ADDR_LINK_LOCAL},
    {"169.254.43518", POLICY_ADDR_LINK_LOCAL},
    {"::ffff:169.254.169.254", POLICY_ADDR_LINK_LOCAL},
    {"fe80::1", POLICY_ADDR_LINK_LOCAL},
    {"febf::1", POLICY_ADDR_LINK_LOCAL},
    {"168.63.129.16", POLICY_ADDR_METADATA},
    {"::ffff:168.63.129.16", POLICY_ADDR_METADATA},
    {"168.63.129.17", POLICY_ADDR_OK},
    /* reserved, broadcast, multicast */
    {"192.0.0.1", POLICY_ADDR_RESERVED},
    {"192.0.0.170", POLICY_ADDR_RESERVED},
    {"192.88.99.1", POLICY_ADDR_RESERVED},
    {"198.18.0.1", POLICY_ADDR_RESERVED},
    {"198.19.255.255", POLICY_ADDR_RESERVED},
    {"198.20.0.1", POLICY_ADDR_OK},
    {"240.0.0.1", POLICY_ADDR_RESERVED},
    {"255.255.255.255", POLICY_ADDR_RESERVED},
    {"4294967295", POLICY_ADDR_RESERVED},
    {"224.0.0.1", POLICY_ADDR_MULTICAST},
    {"239.255.255.250", POLICY_ADDR_MULTICAST},
    {"ff02::1", POLICY_ADDR_MULTICAST},
    {"::ffff:224.0.0.1", POLICY_ADDR_MULTICAST},
    {"fec0::1", POLICY_ADDR_RESERVED},
    {"2001:db8::1", POLICY_ADDR_RESERVED},
    {"3fff::1", POLICY_ADDR_RESERVED},
    {"2001:2::1", POLICY_ADDR_RESERVED},
    {"2001:20::1", POLICY_ADDR_RESERVED},
    {"100::1", POLICY_ADDR_RESERVED},
    {"4000::1", POLICY_ADDR_RESERVED},
    /* public; the IPv4 documentation ranges are deliberately allowed */
    {"8.8.8.8", POLICY_ADDR_OK},
    {"1.1.1.1", POLICY_ADDR_OK},
    {"1.2.3", POLICY_ADDR_OK},
    {"198.51.100.7", POLICY_ADDR_OK},
    {"192.0.2.1", POLICY_ADDR_OK},
    {"203.0.113.5", POLICY_ADDR_OK},
    {"::ffff:8.8.8.8", POLICY_ADDR_OK},
    {"2606:4700::1111", POLICY_ADDR_OK},
    {"[2606:4700::1111]", POLICY_ADDR_OK},
    {"2001:4860:4860::8888", POLICY_ADDR_OK},
    /* not IP literals */
    {"127.0.0.1.", INVALID},
    {"1.2.3.4.5", INVALID},
    {"256.1.1.1", INVALID},
    {"1.2.3.256", INVALID},
    {"1.2.65536", INVALID},
    {"1.16777216", INVALID},
    {"0x100000000", INVALID},
    {"4294967296", INVALID},
    {"99999999999999999999", INVALID},
    {"08.1.1.1", INVALID},
    {"0x", INVALID},
    {"0xg.1.1.1", INVALID},
    {"1..2", INVALID},
    {".1.2.3", INVALID},
    {" 1.2.3.4", INVALID},
    {"1.2.3.4 ", INVALID},
    {"+1.2.3.4", INVALID},
    {"-1", INVALID},
    {"", INVALID},
    {"localhost", INVALID},
    {"[1.2.3.4]", INVALID},
    {"[::1", INVALID},
    {"::1]", INVALID},
    {"[]", INVALID},
    {"::1%lo", INVALID},
    {"[::1%lo]", INVALID},
    {"fe80::1%eth0", INVALID},
    {"::ffff:127.1", INVALID},
    {"1:2:3:4:5:6:7:8:9", INVALID},
    {"12345::", INVALID},
    {"[[::1]]", INVALID},
};

TEST(policy_addr_table)
{
    CHECK(ARRAY_LEN(addr_cases) >= 60);
    for (size_t i = 0; i < ARRAY_LEN(addr_cases); i++) {
        const struct addr_case *c = &addr_cases[i];
        struct policy_addr a;
        int r = policy_parse_ip(c->in, &a);
        int got = r < 0 ? INVALID : (int)policy_classify(&a, NULL, 0);
        if (got != c->cls) {
            fprintf(stderr, "  \"%s\": got %s, want %s\n", c->in,
                    got == INVALID ? "invalid" : policy_addr_class_name(got),
                    c->cls == INVALID ? "invalid" : policy_addr_class_name(c->cls));
            CHECK(got == c->cls);
        }
        if (r < 0) CHECK(r == -EINVAL);
    }
}

/* Our IPv4 grammar is glibc's inet_aton() (which getaddrinfo() uses), so a
 * spelling we read one way can never reach a socket as another address. */
TEST(policy_addr_matches_inet_aton)
{
    for (size_t i = 0; i < ARRAY_LEN(addr_cases); i++) {
        const char *s = addr_cases[i].in;
        if (strchr(s, ':') || strchr(s, '[') || strchr(s, ' ')) continue;
        struct in_addr ref;
        struct policy_addr a;
        int ours = policy_parse_ip(s, &a);
        int theirs = inet_aton(s, &ref);
        if ((ours == 0) != (theirs == 1)) fprintf(stderr, "  \"%s\" differs from inet_aton\n", s);
        CHECK((ours == 0) == (theirs == 1));
        if (ours == 0 && theirs == 1) CHECK(a.family == AF_INET && a.v4.s_addr == ref.s_addr);
    }
}

static void addr_text(const char *in, char *out, size_t size)
{
    struct policy_addr a;
    if (policy_parse_ip(in, &a) < 0)
        snprintf(out, size, "(invalid)");
    else
        policy_addr_str(&a, out, size);
}

TEST(policy_addr_str_canonical)
{
    char buf[INET6_ADDRSTRLEN];
    addr_text("0x7f.1", buf, sizeof buf);
    CHECK_STR(buf, "127.0.0.1");
    addr_text("017700000001", buf, sizeof buf);
    CHECK_STR(buf, "127.0.0.1");
    addr_text("[::FFFF:127.0.0.1]", buf, sizeof buf);
    CHECK_STR(buf, "::ffff:127.0.0.1");
    addr_text("2001:DB8:0:0:0:0:0:1", buf, sizeof buf);
    CHECK_STR(buf, "2001:db8::1");
    struct policy_addr a;
    CHECK(policy_parse_ip("::ffff:7f00:1", &a) == 0 && a.family == AF_INET6);
    CHECK(policy_parse_ip("2130706433", &a) == 0 && a.family == AF_INET);
    CHECK(policy_parse_ip(NULL, &a) == -EINVAL);
    char small[4];
    policy_addr_str(&a, small, sizeof small); /* too small: a marker, never a cut address */
    CHECK_STR(small, "?");
    policy_addr_str(NULL, buf, sizeof buf);
    CHECK_STR(buf, "?");
    struct policy_addr none = {0};
    CHECK(policy_classify(&none, NULL, 0) == POLICY_ADDR_RESERVED);
    CHECK(policy_classify(NULL, NULL, 0) == POLICY_ADDR_RESERVED);
}

static struct policy_addr ip(const char *s)
{
    struct policy_addr a;
    if (policy_parse_ip(s, &a) < 0) abort();
    return a;
}

TEST(policy_addr_host_local)
{
    struct policy_addr host[] = {ip("203.0.113.9"), ip("2606:4700:10::5"),
                                 ip("::ffff:198.51.100.1"), ip("10.0.0.2")};
    struct policy_addr a;
    a = ip("203.0.113.9");
    CHECK(policy_classify(&a, host, ARRAY_LEN(host)) == POLICY_ADDR_HOST_LOCAL);
    a = ip("::ffff:203.0.113.9");
    CHECK(policy_classify(&a, host, ARRAY_LEN(host)) == POLICY_ADDR_HOST_LOCAL);
    a = ip("64:ff9b::cb00:7109"); /* NAT64 of 203.0.113.9 */
    CHECK(policy_classify(&a, host, ARRAY_LEN(host)) == POLICY_ADDR_RESERVED);
    a = ip("2606:4700:10::5");
    CHECK(policy_classify(&a, host, ARRAY_LEN(host)) == POLICY_ADDR_HOST_LOCAL);
    a = ip("198.51.100.1"); /* the host listed it mapped */
    CHECK(policy_classify(&a, host, ARRAY_LEN(host)) == POLICY_ADDR_HOST_LOCAL);
    a = ip("10.0.0.2"); /* the more telling class wins */
    CHECK(policy_classify(&a, host, ARRAY_LEN(host)) == POLICY_ADDR_PRIVATE);
    a = ip("203.0.113.10");
    CHECK(policy_classify(&a, host, ARRAY_LEN(host)) == POLICY_ADDR_OK);
    CHECK(policy_classify(&a, NULL, 3) == POLICY_ADDR_OK);
}

TEST(policy_addr_class_names)
{
    CHECK_STR(policy_addr_class_name(POLICY_ADDR_OK), "ok");
    CHECK_STR(policy_addr_class_name(POLICY_ADDR_LOOPBACK), "loopback");
    CHECK_STR(policy_addr_class_name(POLICY_ADDR_LINK_LOCAL), "link_local");
    CHECK_STR(policy_addr_class_name(POLICY_ADDR_HOST_LOCAL), "host_local");
    CHECK_STR(policy_addr_class_name((enum policy_addr_class)99), "unknown");
}

struct name_case {
    const char *in;
    const char *out;  /* NULL: refused */
    const char *word; /* refused: a word the message must contain */
};

static const struct name_case name_cases[] = {
    {"example.com", "example.com", NULL},
    {"EXAMPLE.com.", "example.com", NULL},
    {"Example.COM", "example.com", NULL},
    {"a", "a", NULL},
    {"localhost", "localhost", NULL},
    {"_dmarc.example.com", "_dmarc.example.com", NULL},
    {"a-b.c_d.example", "a-b.c_d.example", NULL},
    {"123.example", "123.example", NULL},
    {"example.123a", "example.123a", NULL},
    {"r3---sn-abc.googlevideo.com", "r3---sn-abc.googlevideo.com", NULL},
    {"bücher.example", "xn--bcher-kva.example", NULL},
    {"Bücher.Example.", "xn--bcher-kva.example", NULL},
    {"XN--BCHER-KVA.example", "xn--bcher-kva.example", NULL},
    {"BÜCHER.example", "xn--bcher-kva.example", NULL},
    {"ПРИМЕР.ИСПЫТАНИЕ", "xn--e1afmkfd.xn--80akhbyknj4f", NULL},
    {"ΕΛΛΗΝΙΚΆ.Ελ", "xn--hxargifdar.xn--qxam", NULL},
    {"ÀÉÎÕÜ×ÞÐ", "xn--rcar1aul2a3cr", NULL},
    {"ΆΈΉΊΌΎΏ", "xn--hxacde9lgh", NULL},
    {"ѐЀЏџ", "xn--51aa9ba", NULL},
    {"ＥＸＡＭＰＬＥ.com", "xn--ph7chab1aes7c.com", NULL}, /* not mapped: fails closed */
    {"españa.com", "xn--espaa-rta.com", NULL},
    {"中国", "xn--fiqs8s", NULL},
    {"日本.例え", "xn--wgv71a.xn--r8jz45g", NULL},
    {"пример.испытание", "xn--e1afmkfd.xn--80akhbyknj4f", NULL},
    {"3年b組金八先生", "xn--3b-ww4c5e180e575a65lsy2b", NULL},
    {"安室奈美恵-with-super-monkeys", "xn---with-super-monkeys-pc58ag80a8qai00g7n9n", NULL},
    {"他们为什么不说中文", "xn--ihqwcrb4cv8a8dqg056pqjye", NULL},
    {"pročprostěnemluvíčesky", "xn--proprostnemluvesky-uyb24dma41a", NULL},
    {"なぜみんな日本語を話してくれないのか", "xn--n8jok5ay5dzabd5bym9f0cm5685rrjetr6pdxa", NULL},
    {"a-ñ-b", "xn--a--b-hqa", NULL},
    {"ü.ü.ü", "xn--tda.xn--tda.xn--tda", NULL},
    {"ÿaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
     "xn--aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-ckf", NULL},
    /* refused */
    {"", NULL, "empty"},
    {".", NULL, "empty"},
    {"a..b", NULL, "empty label"},
    {".example.com", NULL, "empty label"},
    {"example.com..", NULL, "empty label"},
    {"-example.com", NULL, "'-'"},
    {"example-.com", NULL, "'-'"},
    {"a.-b-.com", NULL, "'-'"},
    {"-ñ.com", NULL, "'-'"},
    {"exa mple.com", NULL, "not allowed"},
    {"exa\tmple.com", NULL, "not allowed"},
    {"a/b.com", NULL, "'/'"},
    {"a:b", NULL, "':'"},
    {"a*b.com", NULL, "'*'"},
    {"example\xe3\x80\x82"
     "com",
     NULL, "write '.'"},
    {"a\xc2\x85.com", NULL, "not allowed"},
    {"\xff.com", NULL, "UTF-8"},
    {"b\xc3", NULL, "UTF-8"},
    {"\xc0\xaf.com", NULL, "UTF-8"},
    {"\xed\xa0\x80.com", NULL, "UTF-8"},
    {"\xf4\x90\x80\x80.com", NULL, "UTF-8"},
    {"\xe4\xb8.com", NULL, "UTF-8"},
    {"1.2.3.4", NULL, "IP address"},
    {"127.0.0.1.", NULL, "IP address"},
    {"a.0x7f", NULL, "IP address"},
    {"0x", NULL, "IP address"},
    {"12", NULL, "IP address"},
    {"ääaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.com", NULL, "IDNA"},
};

TEST(policy_name_canon)
{
    for (size_t i = 0; i < ARRAY_LEN(name_cases); i++) {
        const struct name_case *c = &name_cases[i];
        char out[POLICY_NAME_MAX];
        err_t err = {0};
        int r = policy_canon_name(c->in, out, &err);
        if (c->out) {
            if (r != 0) fprintf(stderr, "  \"%s\": %s\n", c->in, err.msg);
            CHECK(r == 0);
            CHECK_STR(out, c->out);
        } else {
            if (r == 0) fprintf(stderr, "  \"%s\" accepted as \"%s\"\n", c->in, out);
            CHECK(r == -EINVAL && err.code == -EINVAL && out[0] == '\0');
            if (r && !strstr(err.msg, c->word))
                fprintf(stderr, "  \"%s\": \"%s\" lacks \"%s\"\n", c->in, err.msg, c->word);
            CHECK(strstr(err.msg, c->word) != NULL);
        }
    }
    char out[POLICY_NAME_MAX];
    CHECK(policy_canon_name(NULL, out, NULL) == -EINVAL);
    CHECK(policy_canon_name("-bad", out, NULL) == -EINVAL); /* err may be NULL */
}

/* n labels of the given length joined with dots, plus an optional tail. */
static void make_name(char *buf, size_t size, int n, int len, const char *tail)
{
    size_t o = 0;
    for (int i = 0; i < n; i++) {
        if (i) buf[o++] = '.';
        memset(buf + o, 'a' + i, (size_t)len);
        o += (size_t)len;
    }
    snprintf(buf + o, size - o, "%s", tail);
}

TEST(policy_name_lengths)
{
    char in[600], out[POLICY_NAME_MAX];
    err_t err = {0};
    make_name(in, sizeof in, 1, 63, ".com");
    CHECK(policy_canon_name(in, out, &err) == 0);
    make_name(in, sizeof in, 1, 64, ".com");
    CHECK(policy_canon_name(in, out, &err) == -EINVAL && strstr(err.msg, "longer than 63"));
    make_name(in, sizeof in, 3, 63, ".");
    memset(in + strlen(in), 'z', 61);
    in[253] = '\0';
    CHECK(strlen(in) == 253);
    CHECK(policy_canon_name(in, out, &err) == 0 && strlen(out) == 253);
    strcat(in, "."); /* the root's dot does not count */
    CHECK(policy_canon_name(in, out, &err) == 0 && strlen(out) == 253);
    make_name(in, sizeof in, 4, 63, "");
    CHECK(policy_canon_name(in, out, &err) == -EINVAL && strstr(err.msg, "253"));
    /* 64 code points of non-ASCII: too long before any encoding */
    char wide[200] = "";
    for (int i = 0; i < 64; i++)
        strcat(wide, "ü");
    CHECK(policy_canon_name(wide, out, &err) == -EINVAL && strstr(err.msg, "longer than 63"));
    /* a huge input fails fast and cleanly */
    size_t big = 1 << 20;
    char *huge = malloc(big + 1);
    memset(huge, 'a', big);
    huge[big] = '\0';
    CHECK(policy_canon_name(huge, out, &err) == -EINVAL);
    free(huge);
}

TEST(policy_punycode_rfc3492)
{
    /* RFC 3492 section 7.1 (A) Arabic (Egyptian) and (S) all-basic. */
    static const uint32_t arabic[] = {0x644, 0x64a, 0x647, 0x645, 0x627, 0x628, 0x62a, 0x643, 0x644,
                                      0x645, 0x648, 0x634, 0x639, 0x631, 0x628, 0x64a, 0x61f};
    char out[64];
    CHECK(policy_punycode_encode(arabic, ARRAY_LEN(arabic), out, sizeof out) == 22);
    CHECK_STR(out, "egbpdaj6bu4bxfgehfvwxn");
    const char *s = "-> $1.00 <-";
    uint32_t basic[16];
    for (size_t i = 0; s[i]; i++)
        basic[i] = (unsigned char)s[i];
    CHECK(policy_punycode_encode(basic, strlen(s), out, sizeof out) == 12);
    CHECK_STR(out, "-> $1.00 <--");
    CHECK(policy_punycode_encode(arabic, ARRAY_LEN(arabic), out, 10) == -ENOSPC);
    static const uint32_t max[] = {0x10ffff, 0x80};
    CHECK(policy_punycode_encode(max, 2, out, sizeof out) > 0);
}

struct rule_ok {
    const char *in;
    int kind;
    const char *name; /* NAME/WILDCARD: canonical; CIDR: the base address */
    unsigned prefix;
    uint16_t port;
};

static const struct rule_ok rules_ok[] = {
    {"example.com", POLICY_RULE_NAME, "example.com", 0, 0},
    {"Example.COM.", POLICY_RULE_NAME, "example.com", 0, 0},
    {"example.com:443", POLICY_RULE_NAME, "example.com", 0, 443},
    {"example.com:1", POLICY_RULE_NAME, "example.com", 0, 1},
    {"example.com:65535", POLICY_RULE_NAME, "example.com", 0, 65535},
    {"localhost", POLICY_RULE_NAME, "localhost", 0, 0},
    {"co.uk", POLICY_RULE_NAME, "co.uk", 0, 0},
    {"bücher.example:443", POLICY_RULE_NAME, "xn--bcher-kva.example", 0, 443},
    {"*.example.com", POLICY_RULE_WILDCARD, "example.com", 0, 0},
    {"*.Example.com.:8443", POLICY_RULE_WILDCARD, "example.com", 0, 8443},
    {"*.bücher.example", POLICY_RULE_WILDCARD, "xn--bcher-kva.example", 0, 0},
    {"*.bbc.co.uk", POLICY_RULE_WILDCARD, "bbc.co.uk", 0, 0},
    {"*.user.github.io", POLICY_RULE_WILDCARD, "user.github.io", 0, 0},
    {"203.0.113.5", POLICY_RULE_CIDR, "203.0.113.5", 32, 0},
    {"203.0.113.5:8443", POLICY_RULE_CIDR, "203.0.113.5", 32, 8443},
    {"0xcb.0.113.5", POLICY_RULE_CIDR, "203.0.113.5", 32, 0},
    {"2001:db8::1", POLICY_RULE_CIDR, "2001:db8::1", 128, 0},
    {"[2001:db8::1]", POLICY_RULE_CIDR, "2001:db8::1", 128, 0},
    {"[2001:db8::1]:443", POLICY_RULE_CIDR, "2001:db8::1", 128, 443},
    {"::ffff:203.0.113.5", POLICY_RULE_CIDR, "203.0.113.5", 32, 0},
    {"203.0.113.0/24", POLICY_RULE_CIDR, "203.0.113.0", 24, 0},
    {"203.0.113.0/24:443", POLICY_RULE_CIDR, "203.0.113.0", 24, 443},
    {"198.51.100.7/32", POLICY_RULE_CIDR, "198.51.100.7", 32, 0},
    {"2001:db8::/32", POLICY_RULE_CIDR, "2001:db8::", 32, 0},
    {"2001:db8::/32:443", POLICY_RULE_CIDR, "2001:db8::", 32, 443},
    {"::ffff:203.0.113.0/120", POLICY_RULE_CIDR, "203.0.113.0", 24, 0},
    {"128.0.0.0/1", POLICY_RULE_CIDR, "128.0.0.0", 1, 0},
};

TEST(policy_rule_accepts)
{
    for (size_t i = 0; i < ARRAY_LEN(rules_ok); i++) {
        const struct rule_ok *c = &rules_ok[i];
        struct policy_rule r;
        err_t err = {0};
        int rc = policy_parse_rule(c->in, &r, &err);
        if (rc) fprintf(stderr, "  \"%s\": %s\n", c->in, err.msg);
        CHECK(rc == 0);
        CHECK((int)r.kind == c->kind);
        CHECK(r.port == c->port);
        if (c->kind == POLICY_RULE_CIDR) {
            char base[INET6_ADDRSTRLEN];
            policy_addr_str(&r.addr, base, sizeof base);
            CHECK_STR(base, c->name);
            CHECK(r.prefix == c->prefix);
        } else {
            CHECK_STR(r.name, c->name);
        }
    }
}

struct rule_bad {
    const char *in;
    const char *word;
};

static const struct rule_bad rules_bad[] = {
    {"", "empty"},
    {" example.com", "whitespace"},
    {"example.com ", "whitespace"},
    {"example.com\n", "whitespace"},
    {"exa mple.com", "whitespace"},
    {"*", "every host"},
    {"*.", "every host"},
    {"*:443", "every host"},
    {"*.com", "list the sites you need"},
    {"*.co", "top-level domain"},
    {"*.COM.", "top-level domain"},
    {"*.co.uk", "is a public suffix; list the sites you need"},
    {"*.CO.UK.", "public suffix"},
    {"*.com.au:443", "public suffix"},
    {"*.github.io", "public suffix"},
    {"*.s3.amazonaws.com", "public suffix"},
    {"a.*.com", "leftmost"},
    {"ex*.com", "leftmost"},
    {"*ex.com", "leftmost"},
    {"**.example.com", "leftmost"},
    {"*.*.example.com", "leftmost"},
    {"example.*", "leftmost"},
    {"*.-x.com", "'-'"},
    {"example.com:0", "1 to 65535"},
    {"example.com:65536", "65535"},
    {"example.com:99999", "65535"},
    {"example.com:123456", "1 to 65535"},
    {"example.com:0443", "1 to 65535"},
    {"example.com:http", "1 to 65535"},
    {"example.com:-1", "1 to 65535"},
    {"example.com:", "port"},
    {":443", "no host"},
    {"example.com:443:80", "host[:port]"},
    {"2001:db8::1:443x", "IPv6"},
    {"[2001:db8::1]:", "port"},
    {"[2001:db8::1]x", "after ']'"},
    {"[2001:db8::1", "closing"},
    {"[203.0.113.5]", "IPv6"},
    {"[example.com]:443", "IPv6"},
    {"[2001:db8::]/32", "without brackets"},
    {"[::1%lo]", "IPv6"},
    {"::1%lo", "IPv6"},
    {"203.0.113.5/24", "did you mean 203.0.113.0/24"},
    {"2001:db8::1/32", "did you mean 2001:db8::/32"},
    {"203.0.113.0/33", "1 to 32"},
    {"2001:db8::/129", "1 to 128"},
    {"203.0.113.0/", "prefix"},
    {"203.0.113.0/024", "prefix"},
    {"203.0.113.0/24x", "port"},
    {"0.0.0.0/0", "every address"},
    {"::/0", "every address"},
    {"::ffff:0:0/96", "every address"},
    {"example.com/24", "not an IP address"},
    {"example.com/path", "not an IP address"},
    {"http://example.com", "not a URL"},
    {"https://example.com/", "not a URL"},
    {"-example.com", "'-'"},
    {"a..b", "empty label"},
    {"127.0.0.1.", "IP address"},
    {"1.2.3.4.5", "IP address"},
    {"ex@mple.com", "'@'"},
    {"\xff.com", "UTF-8"},
};

TEST(policy_rule_refuses)
{
    for (size_t i = 0; i < ARRAY_LEN(rules_bad); i++) {
        const struct rule_bad *c = &rules_bad[i];
        struct policy_rule r;
        err_t err = {0};
        int rc = policy_parse_rule(c->in, &r, &err);
        if (rc == 0) fprintf(stderr, "  \"%s\" accepted\n", c->in);
        CHECK(rc == -EINVAL);
        if (rc && !strstr(err.msg, c->word))
            fprintf(stderr, "  \"%s\": \"%s\" lacks \"%s\"\n", c->in, err.msg, c->word);
        CHECK(strstr(err.msg, c->word) != NULL);
        CHECK(r.kind == 0 && r.name[0] == '\0' && r.port == 0); /* nothing half-filled */
    }
    struct policy_rule r;
    CHECK(policy_parse_rule(NULL, &r, NULL) == -EINVAL);
    char longer[1100];
    memset(longer, 'a', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    err_t err = {0};
    CHECK(policy_parse_rule(longer, &r, &err) == -EINVAL && strstr(err.msg, "longer"));
}

TEST(policy_build_limits)
{
    static char texts[POLICY_RULES_MAX + 1][32];
    const char *allow[POLICY_RULES_MAX + 1];
    for (int i = 0; i <= POLICY_RULES_MAX; i++) {
        snprintf(texts[i], sizeof texts[i], "host%d.example.com", i);
        allow[i] = texts[i];
    }
    struct policy p;
    err_t err = {0};
    CHECK(policy_build(true, true, allow, POLICY_RULES_MAX, &p, &err) == 0);
    CHECK(p.internet && p.n_rules == POLICY_RULES_MAX);
    CHECK_STR(p.rules[255].name, "host255.example.com");
    policy_clear(&p);
    CHECK(p.rules == NULL && p.n_rules == 0 && !p.internet);
    CHECK(policy_build(true, true, allow, POLICY_RULES_MAX + 1, &p, &err) == -EINVAL);
    CHECK(strstr(err.msg, "257 entries") && strstr(err.msg, "at most 256"));
    CHECK(p.rules == NULL && !p.internet);
    CHECK(policy_build(false, false, NULL, 0, &p, &err) == 0 && !p.internet && p.n_rules == 0);
    policy_clear(&p);
    CHECK(policy_build(true, true, NULL, 2, &p, &err) == -EINVAL);
    policy_clear(NULL);
}

TEST(policy_build_names_the_bad_entry)
{
    const char *allow[] = {"example.com", "*.co.uk", "b.example"};
    struct policy p;
    err_t err = {0};
    CHECK(policy_build(true, true, allow, 3, &p, &err) == -EINVAL);
    CHECK(strstr(err.msg, "network.allow[1] \"*.co.uk\"") != NULL);
    CHECK(strstr(err.msg, "public suffix") != NULL);
    CHECK(p.rules == NULL && p.n_rules == 0 && !p.internet); /* fails closed */
    const char *ctl[] = {"exa\x01mple\xff.com"};
    CHECK(policy_build(true, true, ctl, 1, &p, &err) == -EINVAL);
    CHECK(strstr(err.msg, "network.allow[0] \"exa?mple?.com\"") != NULL);
    const char *utf[] = {"bücher.example", "bü cher.example"};
    CHECK(policy_build(true, true, utf, 2, &p, &err) == -EINVAL);
    CHECK(strstr(err.msg, "\"bü cher.example\"") != NULL);
    char big[400];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    const char *longname[] = {big};
    CHECK(policy_build(true, true, longname, 1, &p, &err) == -EINVAL);
    CHECK(strstr(err.msg, "...\"") != NULL && strlen(err.msg) < 200);
}

static struct policy mkpolicy(bool internet, const char *const *allow, size_t n)
{
    struct policy p;
    err_t err = {0};
    if (policy_build(internet, n > 0, allow, n, &p, &err) < 0) {
        fprintf(stderr, "policy_build: %s\n", err.msg);
        abort();
    }
    return p;
}

TEST(policy_check_names)
{
    const char *allow[] = {"example.com", "*.wild.example", "api.test:443"};
    struct policy p = mkpolicy(true, allow, ARRAY_LEN(allow));
    CHECK(policy_check(&p, "example.com", NULL, 443) == POLICY_ALLOW);
    CHECK(policy_check(&p, "example.com", NULL, 22) == POLICY_ALLOW);
    CHECK(policy_check(&p, "evil-example.com", NULL, 443) == POLICY_DENY_NOT_LISTED);
    CHECK(policy_check(&p, "example.com.evil", NULL, 443) == POLICY_DENY_NOT_LISTED);
    CHECK(policy_check(&p, "a.example.com", NULL, 443) == POLICY_DENY_NOT_LISTED);
    CHECK(policy_check(&p, "xexample.com", NULL, 443) == POLICY_DENY_NOT_LISTED);
    /* a wildcard covers subdomains at any depth, never the apex */
    CHECK(policy_check(&p, "wild.example", NULL, 443) == POLICY_DENY_NOT_LISTED);
    CHECK(policy_check(&p, "a.wild.example", NULL, 443) == POLICY_ALLOW);
    CHECK(policy_check(&p, "a.b.wild.example", NULL, 443) == POLICY_ALLOW);
    CHECK(policy_check(&p, "awild.example", NULL, 443) == POLICY_DENY_NOT_LISTED);
    CHECK(policy_check(&p, "a.wild.example.evil", NULL, 443) == POLICY_DENY_NOT_LISTED);
    /* port rules; a DNS question (port 0) is answered for a name on any port */
    CHECK(policy_check(&p, "api.test", NULL, 443) == POLICY_ALLOW);
    CHECK(policy_check(&p, "api.test", NULL, 80) == POLICY_DENY_NOT_LISTED);
    CHECK(policy_check(&p, "api.test", NULL, 0) == POLICY_ALLOW);
    /* an IP-only connection matches no name rule */
    struct policy_addr a = ip("93.184.216.34");
    CHECK(policy_check(&p, NULL, &a, 443) == POLICY_DENY_NOT_LISTED);
    CHECK(policy_check(&p, NULL, NULL, 443) == POLICY_DENY_NOT_LISTED);
    policy_clear(&p);
}

TEST(policy_check_addresses)
{
    const char *allow[] = {"203.0.113.0/24", "198.51.100.7:8443", "2001:db8::/32",
                           "::ffff:192.0.2.9"};
    struct policy p = mkpolicy(true, allow, ARRAY_LEN(allow));
    struct policy_addr a;
    a = ip("203.0.113.77");
    CHECK(policy_check(&p, NULL, &a, 443) == POLICY_ALLOW);
    CHECK(policy_check(&p, "any.example", &a, 443) == POLICY_ALLOW); /* address rules match */
    CHECK(policy_check(&p, "any.example", NULL, 443) == POLICY_DENY_NOT_LISTED);
    a = ip("::ffff:203.0.113.77");
    CHECK(policy_check(&p, NULL, &a, 443) == POLICY_ALLOW);
    a = ip("203.0.114.1");
    CHECK(policy_check(&p, NULL, &a, 443) == POLICY_DENY_NOT_LISTED);
    a = ip("198.51.100.7");
    CHECK(policy_check(&p, NULL, &a, 8443) == POLICY_ALLOW);
    CHECK(policy_check(&p, NULL, &a, 443) == POLICY_DENY_NOT_LISTED);
    a = ip("198.51.100.8");
    CHECK(policy_check(&p, NULL, &a, 8443) == POLICY_DENY_NOT_LISTED);
    a = ip("2001:db8:ffff::5");
    CHECK(policy_check(&p, NULL, &a, 443) == POLICY_ALLOW);
    a = ip("2001:db9::");
    CHECK(policy_check(&p, NULL, &a, 443) == POLICY_DENY_NOT_LISTED);
    a = ip("192.0.2.9"); /* the rule was written mapped */
    CHECK(policy_check(&p, NULL, &a, 443) == POLICY_ALLOW);
    a = ip("::ffff:192.0.2.9");
    CHECK(policy_check(&p, NULL, &a, 443) == POLICY_ALLOW);
    a = ip("::c000:209"); /* compatible is not mapped */
    CHECK(policy_check(&p, NULL, &a, 443) == POLICY_DENY_NOT_LISTED);
    policy_clear(&p);
}

TEST(policy_check_empty_list_is_no_host)
{
    struct policy none, any;
    err_t err = {0};
    CHECK(policy_build(true, true, NULL, 0, &none, &err) == 0);
    CHECK(policy_build(true, false, NULL, 0, &any, &err) == 0);
    struct policy_addr a = ip("93.184.216.34");
    CHECK(policy_check(&none, "example.com", NULL, 443) == POLICY_DENY_NOT_LISTED);
    CHECK(policy_check(&none, NULL, &a, 443) == POLICY_DENY_NOT_LISTED);
    CHECK(policy_check(&any, "example.com", NULL, 443) == POLICY_ALLOW);
    CHECK(policy_check(&any, NULL, &a, 443) == POLICY_ALLOW);
    policy_clear(&none);
    policy_clear(&any);
}

TEST(policy_check_internet_and_empty)
{
    const char *allow[] = {"example.com"};
    struct policy off = mkpolicy(false, allow, 1);
    struct policy_addr a = ip("8.8.8.8");
    CHECK(policy_check(&off, "example.com", NULL, 443) == POLICY_DENY_OFFLINE);
    CHECK(policy_check(&off, NULL, &a, 443) == POLICY_DENY_OFFLINE);
    policy_clear(&off);
    struct policy off_empty = mkpolicy(false, NULL, 0);
    CHECK(policy_check(&off_empty, "example.com", NULL, 443) == POLICY_DENY_OFFLINE);
    struct policy open = mkpolicy(true, NULL, 0);
    CHECK(policy_check(&open, "anything.example", NULL, 443) == POLICY_ALLOW);
    CHECK(policy_check(&open, NULL, &a, 22) == POLICY_ALLOW);
    CHECK(policy_check(NULL, "example.com", NULL, 443) == POLICY_DENY_OFFLINE);
    CHECK_STR(policy_verdict_name(POLICY_ALLOW), "allowed");
    CHECK_STR(policy_verdict_name(POLICY_DENY_OFFLINE), "internet_off");
    CHECK_STR(policy_verdict_name(POLICY_DENY_NOT_LISTED), "not_allowed");
}
