/* The stub resolver's wire format: queries are hostile bytes, so these check
 * every refusal (FORMERR, NOTIMP, silence), every truncation, the name limits,
 * and that what we answer reads back field by field with an independent
 * parser (dns_response.h). */
#include <arpa/inet.h>
#include <stdlib.h>

#include "common/common.h"
#include "dns/dns.h"
#include "dns_response.h"
#include "unit.h"

#define RD 0x0100

static size_t put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
    return 2;
}

/* Encodes dotted text as labels ("" is the root); labels may be too long on
 * purpose (the length byte is written as is). */
static size_t put_name(uint8_t *p, const char *name)
{
    size_t n = 0;
    while (*name) {
        const char *dot = strchr(name, '.');
        size_t l = dot ? (size_t)(dot - name) : strlen(name);
        p[n++] = (uint8_t)l;
        memcpy(p + n, name, l);
        n += l;
        name += l + (dot != NULL);
    }
    p[n++] = 0;
    return n;
}

/* An EDNS OPT record: UDP size 4096, DO bit, one 8-byte cookie option. */
static const uint8_t opt_rr[] = {0,  0, 41, 0x10, 0, 0, 0, 0x80, 0, 0, 12, 0,
                                 10, 0, 8,  1,    2, 3, 4, 5,    6, 7, 8};

/* Writes a query into buf and returns its length. */
static size_t make_query(uint8_t *buf, uint16_t id, uint16_t flags, const char *name,
                         uint16_t qtype, int edns)
{
    size_t n = 0;
    n += put16(buf + n, id);
    n += put16(buf + n, flags);
    n += put16(buf + n, 1);
    n += put16(buf + n, 0);
    n += put16(buf + n, 0);
    n += put16(buf + n, edns ? 1 : 0);
    n += put_name(buf + n, name);
    n += put16(buf + n, qtype);
    n += put16(buf + n, DNS_CLASS_IN);
    if (edns) {
        memcpy(buf + n, opt_rr, sizeof opt_rr);
        n += sizeof opt_rr;
    }
    return n;
}

/* A name of total length len made of labels of at most 63 characters. */
static void long_name(char *out, size_t len, size_t label)
{
    size_t n = 0, in_label = 0;
    while (n < len) {
        if (in_label == label && n + 1 < len) {
            out[n++] = '.';
            in_label = 0;
        } else {
            out[n++] = 'a';
            in_label++;
        }
    }
    out[n] = '\0';
}

static int parse(const uint8_t *m, size_t len)
{
    struct dns_question q;
    return dns_parse_query(m, len, &q);
}

TEST(dns_roundtrip_answer)
{
    uint8_t qb[512], out[512];
    size_t qlen = make_query(qb, 0xBEEF, RD, "Example.COM", DNS_TYPE_A, 0);
    struct dns_question q;
    CHECK(dns_parse_query(qb, qlen, &q) == 0);
    CHECK(q.id == 0xBEEF);
    CHECK_STR(q.name, "example.com");
    CHECK(q.qtype == DNS_TYPE_A && q.qclass == DNS_CLASS_IN);
    CHECK(q.question_end == 12 + 13 + 4 && q.question_end == qlen);

    struct in_addr a[2];
    inet_pton(AF_INET, "93.184.216.34", &a[0]);
    inet_pton(AF_INET, "10.1.2.3", &a[1]);
    int n = dns_build_answer(qb, &q, a, 2, 60, out, sizeof out);
    CHECK(n == (int)qlen + 32);

    /* The exact bytes first: header, the question verbatim, then the records. */
    static const uint8_t hdr[] = {0xBE, 0xEF, 0x81, 0x80, 0, 1, 0, 2, 0, 0, 0, 0};
    CHECK(memcmp(out, hdr, sizeof hdr) == 0);
    CHECK(memcmp(out + 12, qb + 12, qlen - 12) == 0);
    static const uint8_t rr0[] = {0xC0, 0x0C, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 93, 184, 216, 34};
    static const uint8_t rr1[] = {0xC0, 0x0C, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 10, 1, 2, 3};
    CHECK(memcmp(out + qlen, rr0, 16) == 0);
    CHECK(memcmp(out + qlen + 16, rr1, 16) == 0);

    /* Then every field through the independent parser. */
    struct dns_response r;
    CHECK(dns_response_parse(out, (size_t)n, &r) == 0);
    CHECK(r.id == 0xBEEF && r.qr == 1 && r.opcode == 0 && r.aa == 0 && r.tc == 0);
    CHECK(r.rd == 1 && r.ra == 1 && r.z == 0 && r.rcode == DNS_RCODE_NOERROR);
    CHECK(r.qdcount == 1 && r.ancount == 2 && r.nscount == 0 && r.arcount == 0);
    CHECK_STR(r.qname, "Example.COM"); /* echoed as asked (0x20 case randomisation) */
    CHECK(r.qtype == DNS_TYPE_A && r.qclass == DNS_CLASS_IN);
    for (int i = 0; i < 2; i++) {
        CHECK_STR(r.an[i].name, "Example.COM");
        CHECK(r.an[i].type == DNS_TYPE_A && r.an[i].class == DNS_CLASS_IN);
        CHECK(r.an[i].ttl == 60 && r.an[i].rdlen == 4);
        CHECK(memcmp(r.an[i].rdata, &a[i].s_addr, 4) == 0);
    }
}

TEST(dns_rd_copied_or_not)
{
    uint8_t qb[512], out[512];
    size_t qlen = make_query(qb, 7, 0, "a.b", DNS_TYPE_A, 0);
    struct dns_question q;
    CHECK(dns_parse_query(qb, qlen, &q) == 0);
    struct in_addr a = {htonl(0x01020304)};
    int n = dns_build_answer(qb, &q, &a, 1, 0xFFFFFFFFu, out, sizeof out);
    struct dns_response r;
    CHECK(n > 0 && dns_response_parse(out, (size_t)n, &r) == 0);
    CHECK(r.rd == 0 && r.ra == 1 && r.id == 7);
    CHECK(r.an[0].ttl == 0xFFFFFFFFu);
}

TEST(dns_other_qtypes_parse)
{
    static const uint16_t types[] = {DNS_TYPE_AAAA, 15 /* MX */,    16 /* TXT */,
                                     255 /* ANY */, 65 /* HTTPS */, 0xFFFF};
    for (size_t i = 0; i < ARRAY_LEN(types); i++) {
        uint8_t qb[512];
        size_t qlen = make_query(qb, 1, RD, "host.example", types[i], 1);
        struct dns_question q;
        CHECK(dns_parse_query(qb, qlen, &q) == 0);
        CHECK(q.qtype == types[i]);
    }
}

TEST(dns_refuses_responses_and_short_headers)
{
    uint8_t qb[512];
    size_t qlen = make_query(qb, 1, 0x8000 | RD, "a.com", DNS_TYPE_A, 0);
    CHECK(parse(qb, qlen) == DNS_DROP);
    qlen = make_query(qb, 1, 0x8000 | (1 << 11), "a.com", DNS_TYPE_A, 0); /* QR wins */
    CHECK(parse(qb, qlen) == DNS_DROP);
    for (size_t len = 0; len < 12; len++)
        CHECK(parse(qb, len) == DNS_DROP);
    CHECK(parse(NULL, 0) == DNS_DROP);
}

TEST(dns_notimp_for_other_opcodes)
{
    for (int op = 1; op < 16; op++) {
        uint8_t qb[512], out[512];
        size_t qlen = make_query(qb, 0x1234, (uint16_t)(op << 11 | RD), "a.com", DNS_TYPE_A, 0);
        struct dns_question q;
        CHECK(dns_parse_query(qb, qlen, &q) == DNS_RCODE_NOTIMP);
        CHECK(q.question_end == 0);
        int n = dns_build_error(qb, qlen, &q, DNS_RCODE_NOTIMP, out, sizeof out);
        CHECK(n == 12);
        struct dns_response r;
        CHECK(dns_response_parse(out, (size_t)n, &r) == 0);
        CHECK(r.id == 0x1234 && r.opcode == op && r.rd == 1 && r.rcode == DNS_RCODE_NOTIMP);
        CHECK(r.qdcount == 0 && r.ancount == 0);
    }
}

/* Sets one 16-bit header field of a valid query and expects FORMERR. */
static int with_count(int field, uint16_t v)
{
    uint8_t qb[512];
    size_t qlen = make_query(qb, 1, RD, "a.com", DNS_TYPE_A, 0);
    put16(qb + 4 + 2 * field, v);
    return parse(qb, qlen);
}

TEST(dns_formerr_counts)
{
    CHECK(with_count(0, 0) == DNS_RCODE_FORMERR); /* QDCOUNT */
    CHECK(with_count(0, 2) == DNS_RCODE_FORMERR);
    CHECK(with_count(0, 0xFFFF) == DNS_RCODE_FORMERR);
    CHECK(with_count(1, 1) == DNS_RCODE_FORMERR); /* ANCOUNT */
    CHECK(with_count(2, 1) == DNS_RCODE_FORMERR); /* NSCOUNT */
    CHECK(with_count(3, 2) == DNS_RCODE_FORMERR); /* ARCOUNT */
    CHECK(with_count(3, 1) == DNS_RCODE_FORMERR); /* says 1, has none */
}

TEST(dns_formerr_additional_section)
{
    uint8_t qb[512];
    struct dns_question q;
    size_t qlen = make_query(qb, 1, RD, "a.com", DNS_TYPE_A, 1);
    CHECK(parse(qb, qlen) == 0);
    size_t opt = qlen - sizeof opt_rr;

    qb[opt + 2] = 1; /* type A instead of OPT */
    CHECK(parse(qb, qlen) == DNS_RCODE_FORMERR);
    qb[opt + 2] = 41;

    qb[opt + 10] = 13; /* rdlength one past the end */
    CHECK(parse(qb, qlen) == DNS_RCODE_FORMERR);
    qb[opt + 9] = 0xFF;
    CHECK(parse(qb, qlen) == DNS_RCODE_FORMERR);
    qb[opt + 9] = 0;
    qb[opt + 10] = 11; /* one short: a trailing byte */
    CHECK(parse(qb, qlen) == DNS_RCODE_FORMERR);
    qb[opt + 10] = 12;
    CHECK(parse(qb, qlen) == 0);

    /* An OPT whose name is not the root. */
    uint8_t nb[512];
    size_t n = make_query(nb, 1, RD, "a.com", DNS_TYPE_A, 0);
    put16(nb + 10, 1);
    n += put_name(nb + n, "x");
    memcpy(nb + n, opt_rr + 1, sizeof opt_rr - 1);
    n += sizeof opt_rr - 1;
    CHECK(parse(nb, n) == DNS_RCODE_FORMERR);
    /* A name that is one label, laid out so that the bytes after its first one
     * read as type OPT: only the root-name check refuses it. */
    n = make_query(nb, 1, RD, "a.com", DNS_TYPE_A, 0);
    put16(nb + 10, 1);
    static const uint8_t fake[] = {1, 0, 41, 0x10, 0, 0, 0, 0, 0, 0, 0};
    memcpy(nb + n, fake, sizeof fake);
    CHECK(parse(nb, n + sizeof fake) == DNS_RCODE_FORMERR);

    /* Trailing bytes without any OPT; the question is parsed, so it is echoed. */
    qlen = make_query(qb, 9, RD, "a.com", DNS_TYPE_A, 0);
    qb[qlen] = 0;
    CHECK(dns_parse_query(qb, qlen + 1, &q) == DNS_RCODE_FORMERR);
    CHECK(q.question_end == qlen);
    uint8_t out[512];
    int e = dns_build_error(qb, qlen + 1, &q, DNS_RCODE_FORMERR, out, sizeof out);
    CHECK(e == (int)qlen);
    struct dns_response r;
    CHECK(dns_response_parse(out, (size_t)e, &r) == 0);
    CHECK(r.id == 9 && r.rcode == DNS_RCODE_FORMERR && r.qdcount == 1);
    CHECK_STR(r.qname, "a.com");
}

TEST(dns_formerr_names)
{
    static const char *bad[] = {
        "a b.com", "a.c*m", "a/b", "xn--\xc3\xa9", "a\x7f", "a@b", "a,b", "a:b", "a\\b",
    };
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        uint8_t qb[512];
        size_t qlen = make_query(qb, 1, RD, bad[i], DNS_TYPE_A, 0);
        CHECK(parse(qb, qlen) == DNS_RCODE_FORMERR);
    }
    /* A NUL and a dot inside a label, which put_name cannot write. */
    uint8_t qb[512];
    size_t qlen = make_query(qb, 1, RD, "abc.com", DNS_TYPE_A, 0);
    qb[13 + 1] = '\0';
    CHECK(parse(qb, qlen) == DNS_RCODE_FORMERR);
    qb[13 + 1] = '.';
    CHECK(parse(qb, qlen) == DNS_RCODE_FORMERR);
    qb[13 + 1] = 'B';
    CHECK(parse(qb, qlen) == 0);
    /* Reserved label types 0x40 and 0x80. */
    qb[12] = 0x41;
    CHECK(parse(qb, qlen) == DNS_RCODE_FORMERR);
    qb[12] = 0x83;
    CHECK(parse(qb, qlen) == DNS_RCODE_FORMERR);
}

TEST(dns_formerr_compression_pointers)
{
    /* A pointer to itself, to the header, forwards, and after a label: all
     * refused without being followed. */
    static const uint8_t names[][6] = {
        {0xC0, 12}, {0xC0, 0}, {0xC0, 16}, {1, 'a', 0xC0, 12}, {0xFF, 0xFF},
    };
    static const size_t lens[] = {2, 2, 2, 4, 2};
    for (size_t i = 0; i < ARRAY_LEN(names); i++) {
        uint8_t qb[64] = {0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0};
        size_t n = 12;
        memcpy(qb + n, names[i], lens[i]);
        n += lens[i];
        n += put16(qb + n, DNS_TYPE_A);
        n += put16(qb + n, DNS_CLASS_IN);
        struct dns_question q;
        CHECK(dns_parse_query(qb, n, &q) == DNS_RCODE_FORMERR);
        CHECK(q.question_end == 0);
    }
}

TEST(dns_truncated_at_every_length)
{
    static const char *names[] = {"www.example.com", ""};
    for (size_t k = 0; k < 2; k++) {
        uint8_t full[512], out[512];
        size_t qlen = make_query(full, 0xABCD, RD, names[k], DNS_TYPE_AAAA, 1);
        CHECK(parse(full, qlen) == 0);
        for (size_t len = 0; len < qlen; len++) {
            /* A copy of exactly len bytes, so ASan sees any read past the end. */
            uint8_t *m = malloc(len ? len : 1);
            memcpy(m, full, len);
            struct dns_question q;
            int rc = dns_parse_query(m, len, &q);
            CHECK(rc != 0);
            CHECK(rc == (len < 12 ? DNS_DROP : DNS_RCODE_FORMERR));
            if (rc > 0) {
                int e = dns_build_error(m, len, &q, rc, out, sizeof out);
                struct dns_response r;
                CHECK(e >= 12 && dns_response_parse(out, (size_t)e, &r) == 0);
                CHECK(r.id == 0xABCD && r.rcode == DNS_RCODE_FORMERR);
            }
            free(m);
        }
    }
}

TEST(dns_label_limits)
{
    char name[300];
    uint8_t qb[600];
    struct dns_question q;
    memset(name, 'x', 63);
    strcpy(name + 63, ".com");
    CHECK(dns_parse_query(qb, make_query(qb, 1, 0, name, DNS_TYPE_A, 0), &q) == 0);
    CHECK(strlen(q.name) == 67);
    memset(name, 'x', 64);
    strcpy(name + 64, ".com");
    CHECK(parse(qb, make_query(qb, 1, 0, name, DNS_TYPE_A, 0)) == DNS_RCODE_FORMERR);
    /* An empty label in the middle reads as the end of the name: trailing bytes. */
    CHECK(parse(qb, make_query(qb, 1, 0, "a..com", DNS_TYPE_A, 0)) == DNS_RCODE_FORMERR);
}

TEST(dns_name_limits)
{
    char name[300];
    uint8_t qb[600], out[512];
    struct dns_question q;
    for (size_t label = 1; label <= 63; label += 62) {
        long_name(name, 253, label);
        size_t qlen = make_query(qb, 1, RD, name, DNS_TYPE_A, 1);
        CHECK(dns_parse_query(qb, qlen, &q) == 0);
        CHECK(strlen(q.name) == 253);
        CHECK_STR(q.name, name);
        /* The longest question still leaves room for 15 answers in 512 bytes. */
        struct in_addr a[16] = {{0}};
        CHECK(q.question_end == 12 + 255 + 4);
        CHECK(dns_build_answer(qb, &q, a, 15, 1, out, 512) == 271 + 15 * 16);
        CHECK(dns_build_answer(qb, &q, a, 16, 1, out, 512) == DNS_DROP);
        long_name(name, 254, label);
        CHECK(parse(qb, make_query(qb, 1, RD, name, DNS_TYPE_A, 1)) == DNS_RCODE_FORMERR);
    }
    /* 63.63.63.61 is 253; 63.63.63.62 is 254. */
    memset(name, 'b', sizeof name);
    name[63] = name[127] = name[191] = '.';
    name[253] = '\0';
    CHECK(dns_parse_query(qb, make_query(qb, 1, 0, name, DNS_TYPE_A, 0), &q) == 0);
    name[253] = 'b';
    name[254] = '\0';
    CHECK(parse(qb, make_query(qb, 1, 0, name, DNS_TYPE_A, 0)) == DNS_RCODE_FORMERR);
}

TEST(dns_case_folding_and_charset)
{
    uint8_t qb[512];
    struct dns_question q;
    CHECK(dns_parse_query(qb, make_query(qb, 1, 0, "WwW.ExAmPlE.CoM", DNS_TYPE_A, 0), &q) == 0);
    CHECK_STR(q.name, "www.example.com");
    CHECK(dns_parse_query(qb, make_query(qb, 1, 0, "_DMARC.A-B.9x_Z", 16, 0), &q) == 0);
    CHECK_STR(q.name, "_dmarc.a-b.9x_z");
    CHECK(dns_parse_query(qb, make_query(qb, 1, 0, "XN--BCHER-KVA.DE", 1, 0), &q) == 0);
    CHECK_STR(q.name, "xn--bcher-kva.de");
    /* No fold outside ASCII: 0xC1 would be 'A' | 0x80. */
    CHECK(parse(qb, make_query(qb, 1, 0, "\xc1", DNS_TYPE_A, 0)) == DNS_RCODE_FORMERR);
}

TEST(dns_root_name)
{
    uint8_t qb[512], out[512];
    struct dns_question q;
    size_t qlen = make_query(qb, 5, RD, "", 2 /* NS */, 0);
    CHECK(qlen == 12 + 1 + 4);
    CHECK(dns_parse_query(qb, qlen, &q) == 0);
    CHECK_STR(q.name, "");
    CHECK(q.question_end == 17);
    struct in_addr a = {htonl(0x7f000001)};
    int n = dns_build_answer(qb, &q, &a, 1, 5, out, sizeof out);
    struct dns_response r;
    CHECK(n == 17 + 16 && dns_response_parse(out, (size_t)n, &r) == 0);
    CHECK_STR(r.qname, "");
    CHECK_STR(r.an[0].name, "");
}

TEST(dns_edns_accepted_not_echoed)
{
    uint8_t qb[512], out[512];
    struct dns_question q;
    size_t qlen = make_query(qb, 0x4242, RD, "api.example.org", DNS_TYPE_A, 1);
    CHECK(dns_parse_query(qb, qlen, &q) == 0);
    CHECK_STR(q.name, "api.example.org");
    CHECK(q.question_end == qlen - sizeof opt_rr);
    /* An OPT with no options at all is fine too. */
    uint8_t eb[512];
    size_t elen = make_query(eb, 1, 0, "a", DNS_TYPE_A, 0);
    put16(eb + 10, 1);
    static const uint8_t bare[] = {0, 0, 41, 2, 0, 0, 0, 0, 0, 0, 0};
    memcpy(eb + elen, bare, sizeof bare);
    CHECK(parse(eb, elen + sizeof bare) == 0);

    struct in_addr a = {htonl(0x08080808)};
    int n = dns_build_answer(qb, &q, &a, 1, 30, out, sizeof out);
    struct dns_response r;
    CHECK(n == (int)q.question_end + 16 && dns_response_parse(out, (size_t)n, &r) == 0);
    CHECK(r.arcount == 0 && r.ancount == 1 && r.id == 0x4242);
}

TEST(dns_answers_0_to_8)
{
    uint8_t qb[512], out[512];
    struct dns_question q;
    size_t qlen = make_query(qb, 77, RD, "many.example", DNS_TYPE_A, 1);
    CHECK(dns_parse_query(qb, qlen, &q) == 0);
    struct in_addr a[8];
    for (int i = 0; i < 8; i++)
        a[i].s_addr = htonl(0xC0000200u + (uint32_t)i);
    for (size_t k = 0; k <= 8; k++) {
        int n = dns_build_answer(qb, &q, a, k, 300, out, sizeof out);
        CHECK(n == (int)(q.question_end + 16 * k));
        struct dns_response r;
        CHECK(dns_response_parse(out, (size_t)n, &r) == 0);
        CHECK(r.id == 77 && r.rcode == 0 && r.qdcount == 1 && r.ancount == k);
        CHECK_STR(r.qname, "many.example");
        for (size_t i = 0; i < k; i++) {
            CHECK_STR(r.an[i].name, "many.example");
            CHECK(r.an[i].type == DNS_TYPE_A && r.an[i].ttl == 300);
            CHECK(memcmp(r.an[i].rdata, &a[i].s_addr, 4) == 0);
        }
    }
}

TEST(dns_output_too_small)
{
    uint8_t qb[512], out[512];
    struct dns_question q;
    size_t qlen = make_query(qb, 1, RD, "small.example", DNS_TYPE_A, 0);
    CHECK(dns_parse_query(qb, qlen, &q) == 0);
    struct in_addr a[4] = {{0}};
    for (size_t k = 0; k <= 4; k++) {
        size_t need = q.question_end + 16 * k;
        for (size_t size = 0; size < need; size++)
            CHECK(dns_build_answer(qb, &q, a, k, 1, out, size) == DNS_DROP);
        CHECK(dns_build_answer(qb, &q, a, k, 1, out, need) == (int)need);
    }
    CHECK(dns_build_answer(qb, &q, a, (size_t)-1, 1, out, sizeof out) == DNS_DROP);
    CHECK(dns_build_answer(qb, &q, a, 70000, 1, out, sizeof out) == DNS_DROP);
    for (size_t size = 0; size < qlen; size++)
        CHECK(dns_build_error(qb, qlen, &q, DNS_RCODE_REFUSED, out, size) == DNS_DROP);
    CHECK(dns_build_error(qb, qlen, &q, DNS_RCODE_REFUSED, out, qlen) == (int)qlen);
    CHECK(dns_build_error(qb, qlen, NULL, DNS_RCODE_REFUSED, out, 11) == DNS_DROP);
    CHECK(dns_build_error(qb, qlen, NULL, DNS_RCODE_REFUSED, out, 12) == 12);
    /* An unparsed question is never answered from. */
    struct dns_question none = {0};
    CHECK(dns_build_answer(qb, &none, a, 1, 1, out, sizeof out) == DNS_DROP);
    /* Nor one longer than any question can be (a caller's corrupted struct). */
    static uint8_t big[1024];
    struct dns_question bogus = q;
    bogus.question_end = 12 + 255 + 5;
    CHECK(dns_build_answer(big, &bogus, a, 0, 1, big, sizeof big) == DNS_DROP);
    CHECK(dns_build_error(big, sizeof big, &bogus, 1, big, sizeof big) == 12);
}

TEST(dns_build_error_forms)
{
    uint8_t qb[512], out[512];
    struct dns_question q;
    size_t qlen = make_query(qb, 0x0102, RD, "blocked.example", DNS_TYPE_A, 1);
    CHECK(dns_parse_query(qb, qlen, &q) == 0);
    static const int rcodes[] = {DNS_RCODE_NXDOMAIN, DNS_RCODE_REFUSED, DNS_RCODE_SERVFAIL, 0, 15};
    for (size_t i = 0; i < ARRAY_LEN(rcodes); i++) {
        struct dns_response r;
        int n = dns_build_error(qb, qlen, &q, rcodes[i], out, sizeof out);
        CHECK(n == (int)q.question_end && dns_response_parse(out, (size_t)n, &r) == 0);
        CHECK(r.id == 0x0102 && r.rcode == rcodes[i] && r.rd && r.ra && !r.aa);
        CHECK(r.qdcount == 1 && r.ancount == 0 && r.qtype == DNS_TYPE_A);
        CHECK_STR(r.qname, "blocked.example");
        n = dns_build_error(qb, qlen, NULL, rcodes[i], out, sizeof out);
        CHECK(n == 12 && dns_response_parse(out, 12, &r) == 0);
        CHECK(r.id == 0x0102 && r.rcode == rcodes[i] && r.qdcount == 0);
    }
    CHECK(dns_build_error(qb, qlen, &q, 16, out, sizeof out) == DNS_DROP);
    CHECK(dns_build_error(qb, qlen, &q, -1, out, sizeof out) == DNS_DROP);
    CHECK(dns_build_error(qb, 11, NULL, DNS_RCODE_FORMERR, out, sizeof out) == DNS_DROP);
    /* A question longer than the bytes given is not echoed from beyond them. */
    CHECK(dns_build_error(qb, 20, &q, DNS_RCODE_FORMERR, out, sizeof out) == 12);
}

TEST(dns_build_in_place)
{
    uint8_t buf[512];
    struct dns_question q;
    size_t qlen = make_query(buf, 0x5555, RD, "inplace.example", DNS_TYPE_A, 1);
    CHECK(dns_parse_query(buf, qlen, &q) == 0);
    struct in_addr a[3] = {{htonl(1)}, {htonl(2)}, {htonl(3)}};
    int n = dns_build_answer(buf, &q, a, 3, 9, buf, sizeof buf);
    struct dns_response r;
    CHECK(n > 0 && dns_response_parse(buf, (size_t)n, &r) == 0);
    CHECK(r.id == 0x5555 && r.ancount == 3 && r.rd == 1);
    CHECK_STR(r.qname, "inplace.example");
    CHECK(memcmp(r.an[2].rdata, &a[2].s_addr, 4) == 0);

    qlen = make_query(buf, 0x6666, RD, "x.example", DNS_TYPE_A, 0);
    CHECK(dns_parse_query(buf, qlen, &q) == 0);
    n = dns_build_error(buf, qlen, &q, DNS_RCODE_REFUSED, buf, sizeof buf);
    CHECK(n == (int)qlen && dns_response_parse(buf, (size_t)n, &r) == 0);
    CHECK(r.id == 0x6666 && r.rcode == DNS_RCODE_REFUSED);
    CHECK_STR(r.qname, "x.example");
}

TEST(dns_tcp_framing)
{
    static uint8_t buf[70000];
    CHECK(dns_tcp_frame(buf, 0) == 0);
    CHECK(dns_tcp_frame(buf, 1) == 0);
    put16(buf, 29);
    for (size_t len = 2; len < 31; len++)
        CHECK(dns_tcp_frame(buf, len) == 0);
    CHECK(dns_tcp_frame(buf, 31) == 29);
    CHECK(dns_tcp_frame(buf, 200) == 29); /* a second frame may follow */
    put16(buf, 0);
    /* A zero length never completes: the caller must close such a peer. */
    CHECK(dns_tcp_frame(buf, 2) == 0);
    CHECK(dns_tcp_frame(buf, 100) == 0);
    put16(buf, 11);
    CHECK(dns_tcp_frame(buf, 12) == 0);
    CHECK(dns_tcp_frame(buf, 13) == 11); /* whole, too short to parse */
    CHECK(parse(buf + 2, 11) == DNS_DROP);
    put16(buf, 12);
    CHECK(dns_tcp_frame(buf, 13) == 0);
    CHECK(dns_tcp_frame(buf, 14) == 12);
    put16(buf, 0xFFFF);
    CHECK(dns_tcp_frame(buf, 0xFFFF + 1) == 0);
    CHECK(dns_tcp_frame(buf, 0xFFFF + 2) == 0xFFFF);

    /* A framed query parses from buf + 2. */
    size_t qlen = make_query(buf + 2, 3, RD, "tcp.example", DNS_TYPE_A, 0);
    put16(buf, (uint16_t)qlen);
    size_t n = dns_tcp_frame(buf, qlen + 2);
    CHECK(n == qlen && parse(buf + 2, n) == 0);
}
