/* A test-side reader of DNS responses, written apart from src/dns so that the
 * unit tests and the fuzzer check what dns_build_* write against a second,
 * independent reading of RFC 1035 rather than against the code under test.
 * It follows compression pointers (backwards only, so it cannot loop) and
 * requires every count to match the bytes exactly. */
#ifndef RUNTIME_TEST_DNS_RESPONSE_H
#define RUNTIME_TEST_DNS_RESPONSE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define RESP_MAX_ANSWERS 64

struct resp_rr {
    char name[256];
    uint16_t type, class, rdlen;
    uint32_t ttl;
    uint8_t rdata[4]; /* the first 4 bytes */
};

struct dns_response {
    uint16_t id, flags, qdcount, ancount, nscount, arcount;
    int qr, opcode, aa, tc, rd, ra, z, rcode;
    char qname[256];
    uint16_t qtype, qclass;
    size_t question_end; /* 12 when there is no question */
    struct resp_rr an[RESP_MAX_ANSWERS];
};

static inline uint16_t resp_get16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

/* Reads a name at m[*off] into text (dotted, no trailing dot, "" for root);
 * returns 0 or -1. A pointer must point before the label that holds it. */
static inline int resp_name(const uint8_t *m, size_t len, size_t *off, char out[256])
{
    size_t p = *off, n = 0, end = 0;
    int jumped = 0;
    for (int steps = 0; steps < 256; steps++) {
        if (p >= len) return -1;
        uint8_t l = m[p];
        if ((l & 0xC0) == 0xC0) {
            if (p + 1 >= len) return -1;
            size_t target = (size_t)(resp_get16(m + p) & 0x3FFF);
            if (target >= p) return -1;
            if (!jumped) end = p + 2;
            jumped = 1;
            p = target;
            continue;
        }
        if (l > 63) return -1;
        p++;
        if (l == 0) {
            out[n] = '\0';
            *off = jumped ? end : p;
            return 0;
        }
        if (l > len - p || n + 1 + l > 254) return -1;
        if (n > 0) out[n++] = '.';
        memcpy(out + n, m + p, l);
        n += l;
        p += l;
    }
    return -1;
}

/* Parses a whole response; returns 0 or -1 (anything malformed or left over). */
static inline int dns_response_parse(const uint8_t *m, size_t len, struct dns_response *r)
{
    memset(r, 0, sizeof *r);
    if (len < 12) return -1;
    r->id = resp_get16(m);
    r->flags = resp_get16(m + 2);
    r->qr = r->flags >> 15;
    r->opcode = (r->flags >> 11) & 15;
    r->aa = (r->flags >> 10) & 1;
    r->tc = (r->flags >> 9) & 1;
    r->rd = (r->flags >> 8) & 1;
    r->ra = (r->flags >> 7) & 1;
    r->z = (r->flags >> 4) & 7;
    r->rcode = r->flags & 15;
    r->qdcount = resp_get16(m + 4);
    r->ancount = resp_get16(m + 6);
    r->nscount = resp_get16(m + 8);
    r->arcount = resp_get16(m + 10);
    if (!r->qr || r->qdcount > 1 || r->ancount > RESP_MAX_ANSWERS || r->nscount || r->arcount)
        return -1;
    size_t off = 12;
    if (r->qdcount == 1) {
        if (resp_name(m, len, &off, r->qname) || len - off < 4) return -1;
        r->qtype = resp_get16(m + off);
        r->qclass = resp_get16(m + off + 2);
        off += 4;
    }
    r->question_end = off;
    for (int i = 0; i < r->ancount; i++) {
        struct resp_rr *rr = &r->an[i];
        if (resp_name(m, len, &off, rr->name) || len - off < 10) return -1;
        rr->type = resp_get16(m + off);
        rr->class = resp_get16(m + off + 2);
        rr->ttl = (uint32_t)resp_get16(m + off + 4) << 16 | resp_get16(m + off + 6);
        rr->rdlen = resp_get16(m + off + 8);
        off += 10;
        if (rr->rdlen > len - off) return -1;
        if (rr->type == 1 && rr->rdlen != 4) return -1;
        memcpy(rr->rdata, m + off, rr->rdlen < 4 ? rr->rdlen : 4);
        off += rr->rdlen;
    }
    return off == len ? 0 : -1;
}

#endif
