/* libFuzzer target for the stub resolver's wire format (src/dns). Beyond "no
 * crash, no out-of-bounds read" (ASan, UBSan) it checks properties:
 * - the parser's verdict agrees with the header (DNS_DROP exactly for short
 *   messages and responses, NOTIMP exactly for opcode != 0);
 * - an accepted name is plain lower-case [a-z0-9-_] labels of 1..63, at most
 *   253 characters, and re-encodes to the query's own question bytes;
 * - every answer and error built from a parsed query reads back with the
 *   independent response parser of the unit tests (tests/unit/dns_response.h)
 *   with the same id, question, flags and records, and building in place
 *   gives the same bytes;
 * - dns_tcp_frame never claims more bytes than it was given, and a frame it
 *   returns parses like any other message.
 * Build (from the repository root):
 *   clang -std=gnu17 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined \
 *     -fno-sanitize-recover=undefined -Isrc \
 *     tests/fuzz/fuzz_dns.c src/dns/dns.c -o build/fuzz_dns
 *   build/fuzz_dns -max_len=600 tests/fuzz/corpus/dns */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_NAME "fuzz_dns"
#include "../unit/dns_response.h"
#include "dns/dns.h"
#include "fuzz.h"

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static int lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

/* Compares a name as the response carries it (the query's case) with q.name. */
static int same_name(const char *wire_text, const char *name)
{
    size_t n = strlen(name);
    if (strlen(wire_text) != n) return 0;
    for (size_t i = 0; i < n; i++)
        if (lower((uint8_t)wire_text[i]) != name[i]) return 0;
    return 1;
}

/* An accepted name, re-encoded as labels, must equal the query's question
 * name with its letters folded to lower case. */
static void check_name(const uint8_t *msg, const struct dns_question *q)
{
    const char *s = q->name;
    size_t n = strlen(s);
    REQUIRE(n <= 253);
    uint8_t wire[260];
    size_t w = 0, label_at = 0;
    wire[w++] = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || s[i] == '.') {
            size_t l = w - label_at - 1;
            REQUIRE(n == 0 || (l >= 1 && l <= 63));
            wire[label_at] = (uint8_t)l;
            if (i < n) label_at = w, wire[w++] = 0;
            continue;
        }
        int c = (uint8_t)s[i];
        REQUIRE((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_');
        wire[w++] = (uint8_t)c;
    }
    if (n > 0) wire[w++] = 0;
    REQUIRE(q->question_end == 12 + w + 4);
    for (size_t i = 0; i < w; i++)
        REQUIRE(lower(msg[12 + i]) == wire[i]);
    REQUIRE(q->qtype == get16(msg + 12 + w) && q->qclass == get16(msg + 14 + w));
}

static void check_answer(const uint8_t *msg, size_t len, const struct dns_question *q,
                         size_t n_addrs, uint32_t ttl)
{
    struct in_addr addrs[32];
    for (size_t i = 0; i < n_addrs; i++)
        addrs[i].s_addr = (uint32_t)(i * 0x01010101u) ^ ttl;
    uint8_t out[512];
    int n = dns_build_answer(msg, q, addrs, n_addrs, ttl, out, sizeof out);
    size_t want = q->question_end + 16 * n_addrs;
    if (want > sizeof out) {
        REQUIRE(n == DNS_DROP);
        return;
    }
    REQUIRE(n == (int)want);
    struct dns_response r;
    REQUIRE(dns_response_parse(out, (size_t)n, &r) == 0);
    REQUIRE(r.id == q->id && r.qr && r.opcode == 0 && !r.aa && !r.tc && r.ra && !r.z);
    REQUIRE(r.rd == !!(q->flags & 0x0100) && r.rcode == 0);
    REQUIRE(r.qdcount == 1 && r.ancount == n_addrs && r.question_end == q->question_end);
    REQUIRE(same_name(r.qname, q->name) && r.qtype == q->qtype && r.qclass == q->qclass);
    REQUIRE(memcmp(out + 12, msg + 12, q->question_end - 12) == 0);
    for (size_t i = 0; i < n_addrs; i++) {
        REQUIRE(same_name(r.an[i].name, q->name));
        REQUIRE(r.an[i].type == DNS_TYPE_A && r.an[i].class == DNS_CLASS_IN);
        REQUIRE(r.an[i].ttl == ttl && r.an[i].rdlen == 4);
        REQUIRE(memcmp(r.an[i].rdata, &addrs[i].s_addr, 4) == 0);
    }
    /* In place, from a copy of the query in the output buffer. */
    uint8_t *in_place = malloc(len > 512 ? len : 512);
    memcpy(in_place, msg, len);
    int m = dns_build_answer(in_place, q, addrs, n_addrs, ttl, in_place, 512);
    REQUIRE(m == n && memcmp(in_place, out, (size_t)n) == 0);
    free(in_place);
}

static void check_error(const uint8_t *msg, size_t len, const struct dns_question *q, int rcode)
{
    uint8_t out[512];
    int n = dns_build_error(msg, len, q, rcode, out, sizeof out);
    REQUIRE(n >= 12);
    struct dns_response r;
    REQUIRE(dns_response_parse(out, (size_t)n, &r) == 0);
    REQUIRE(r.id == get16(msg) && r.rcode == rcode && r.ancount == 0);
    REQUIRE(r.opcode == ((get16(msg + 2) >> 11) & 15) && r.rd == ((msg[2] & 1) != 0));
    REQUIRE(r.qdcount == (q->question_end ? 1 : 0));
    if (r.qdcount) {
        REQUIRE(same_name(r.qname, q->name) && r.qtype == q->qtype);
        REQUIRE(memcmp(out + 12, msg + 12, q->question_end - 12) == 0);
    }
    REQUIRE(dns_build_error(msg, len, NULL, rcode, out, sizeof out) == 12);
}

static void check_query(const uint8_t *msg, size_t len, uint8_t knob)
{
    struct dns_question q;
    int rc = dns_parse_query(msg, len, &q);
    if (len < 12 || (msg[2] & 0x80)) {
        REQUIRE(rc == DNS_DROP);
        return;
    }
    if (msg[2] & 0x78) {
        REQUIRE(rc == DNS_RCODE_NOTIMP && q.question_end == 0);
        check_error(msg, len, &q, rc);
        return;
    }
    REQUIRE(rc == 0 || rc == DNS_RCODE_FORMERR);
    REQUIRE(q.question_end == 0 || (q.question_end >= 17 && q.question_end <= len));
    if (q.question_end) check_name(msg, &q);
    if (rc == 0) {
        REQUIRE(q.question_end > 0);
        REQUIRE(get16(msg + 4) == 1 && !get16(msg + 6) && !get16(msg + 8) && get16(msg + 10) <= 1);
        check_answer(msg, len, &q, knob % 20, (uint32_t)knob * 0x01000193u);
        check_error(msg, len, &q, (knob & 1) ? DNS_RCODE_NXDOMAIN : DNS_RCODE_REFUSED);
    } else {
        check_error(msg, len, &q, rc);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t knob = size ? data[size - 1] : 0;
    check_query(data, size, knob);

    /* The same bytes as a TCP stream: a frame is never longer than the input. */
    size_t n = dns_tcp_frame(data, size);
    if (size < 2) {
        REQUIRE(n == 0);
    } else if (get16(data) == 0) {
        REQUIRE(n == 0); /* never complete: the caller closes such a peer */
    } else if (n != 0) {
        REQUIRE(n == get16(data) && n <= size - 2);
        /* An exact-size copy, so ASan catches a read past the frame. */
        uint8_t *msg = malloc(n);
        memcpy(msg, data + 2, n);
        check_query(msg, n, knob);
        free(msg);
    } else {
        REQUIRE(size - 2 < get16(data));
    }
    return 0;
}
