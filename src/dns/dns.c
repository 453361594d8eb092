/* dns: the wire format a stub resolver needs (see dns.h). Every byte of a
 * query is hostile: each read is checked against len before it happens, the
 * question name is read label by label without following compression
 * pointers, and anything a stub has no use for is refused as FORMERR, so
 * that only plain host names in [a-z0-9-_] ever reach the policy code. */
#include "dns.h"

#include <string.h>

#define HDR_LEN 12
#define FLAG_QR 0x8000
#define FLAG_OPCODE 0x7800
#define FLAG_RD 0x0100
#define FLAG_RA 0x0080
#define NAME_WIRE_MAX 255
/* The longest question: header, the longest name on the wire, type and class. */
#define QUESTION_END_MAX (HDR_LEN + NAME_WIRE_MAX + 4)
#define TYPE_OPT 41
#define ANSWER_LEN 16 /* pointer, type, class, ttl, rdlength, IPv4 address */

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
    put16(p, (uint16_t)(v >> 16));
    put16(p + 2, (uint16_t)v);
}

bool dns_name_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
}

/* Reads the question name at msg[*off] into out as lower-case text. Labels
 * of 64..255 (compression pointers, the obsolete extended label types) are
 * FORMERR rather than followed: a query has nothing before its question to
 * point at, and the question is echoed byte for byte into responses, where a
 * pointer into the query would point at the wrong bytes. Not following them
 * also means there is no loop to guard against. */
static int read_name(const uint8_t *msg, size_t len, size_t *off, char out[DNS_NAME_MAX])
{
    size_t p = *off, n = 0;
    for (;;) {
        if (p >= len) return DNS_RCODE_FORMERR;
        size_t l = msg[p++];
        if (l == 0) break;
        if (l > DNS_LABEL_MAX || l > len - p) return DNS_RCODE_FORMERR;
        if (n + (n > 0) + l > DNS_TEXT_MAX) return DNS_RCODE_FORMERR;
        if (n > 0) out[n++] = '.';
        for (size_t i = 0; i < l; i++) {
            uint8_t c = msg[p + i];
            if (!dns_name_char(c)) return DNS_RCODE_FORMERR;
            out[n++] = (char)(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
        }
        p += l;
    }
    out[n] = '\0';
    *off = p;
    return 0;
}

/* Skips the one record the additional section may hold: an EDNS OPT record
 * (RFC 6891), whose name is the root. Its options are not read; their total
 * length only has to fit the message. */
static int skip_opt(const uint8_t *msg, size_t len, size_t *off)
{
    size_t p = *off;
    /* root name (1), type (2), class = UDP size (2), ttl = flags (4), rdlength (2) */
    if (len - p < 11 || msg[p] != 0 || get16(msg + p + 1) != TYPE_OPT) return DNS_RCODE_FORMERR;
    size_t rdlen = get16(msg + p + 9);
    p += 11;
    if (rdlen > len - p) return DNS_RCODE_FORMERR;
    *off = p + rdlen;
    return 0;
}

int dns_parse_query(const uint8_t *msg, size_t len, struct dns_question *q)
{
    memset(q, 0, sizeof *q);
    if (len < HDR_LEN) return DNS_DROP; /* no id to answer to */
    q->id = get16(msg);
    q->flags = get16(msg + 2);
    if (q->flags & FLAG_QR) return DNS_DROP; /* a response: answering could start a loop */
    if (q->flags & FLAG_OPCODE) return DNS_RCODE_NOTIMP;
    uint16_t arcount = get16(msg + 10);
    if (get16(msg + 4) != 1 || get16(msg + 6) != 0 || get16(msg + 8) != 0 || arcount > 1)
        return DNS_RCODE_FORMERR;

    size_t off = HDR_LEN;
    char name[DNS_NAME_MAX];
    int rc = read_name(msg, len, &off, name);
    if (rc) return rc;
    if (len - off < 4) return DNS_RCODE_FORMERR;
    memcpy(q->name, name, sizeof name);
    q->qtype = get16(msg + off);
    q->qclass = get16(msg + off + 2);
    off += 4;
    /* From here on the question is whole, so a FORMERR answer can echo it. */
    q->question_end = off;
    if (arcount == 1 && skip_opt(msg, len, &off)) return DNS_RCODE_FORMERR;
    if (off != len) return DNS_RCODE_FORMERR; /* trailing bytes: not a query we understand */
    return 0;
}

/* True when q holds a question the parser accepted (and so can be echoed). */
static int question_ok(const struct dns_question *q, size_t qlen)
{
    return q && q->question_end >= HDR_LEN + 5 && q->question_end <= QUESTION_END_MAX &&
           q->question_end <= qlen;
}

/* Writes the response header. The question bytes are moved, not copied, so
 * that out may be the query's own buffer. */
static void put_header(uint8_t *out, uint16_t id, uint16_t flags, uint16_t qd, uint16_t an)
{
    put16(out, id);
    put16(out + 2, flags);
    put16(out + 4, qd);
    put16(out + 6, an);
    put16(out + 8, 0);
    put16(out + 10, 0);
}

int dns_build_answer(const uint8_t *query, const struct dns_question *q,
                     const struct in_addr *addrs, size_t n_addrs, uint32_t ttl, uint8_t *out,
                     size_t size)
{
    if (!question_ok(q, QUESTION_END_MAX)) return DNS_DROP;
    size_t qe = q->question_end;
    if (n_addrs > UINT16_MAX || size < qe || (size - qe) / ANSWER_LEN < n_addrs) return DNS_DROP;
    uint16_t id = q->id, flags = FLAG_QR | (q->flags & FLAG_RD) | FLAG_RA;
    memmove(out + HDR_LEN, query + HDR_LEN, qe - HDR_LEN);
    put_header(out, id, flags, 1, (uint16_t)n_addrs);
    uint8_t *p = out + qe;
    for (size_t i = 0; i < n_addrs; i++, p += ANSWER_LEN) {
        put16(p, 0xC000 | HDR_LEN); /* the question name, always at offset 12 */
        put16(p + 2, DNS_TYPE_A);
        put16(p + 4, DNS_CLASS_IN);
        put32(p + 6, ttl);
        put16(p + 10, 4);
        memcpy(p + 12, &addrs[i].s_addr, 4); /* already in network order */
    }
    return (int)(qe + n_addrs * ANSWER_LEN);
}

int dns_build_error(const uint8_t *query, size_t qlen, const struct dns_question *q, int rcode,
                    uint8_t *out, size_t size)
{
    /* Extended rcodes (> 15) need an OPT record, which a stub does not send. */
    if (qlen < HDR_LEN || rcode < 0 || rcode > 15) return DNS_DROP;
    size_t qe = question_ok(q, qlen) ? q->question_end : HDR_LEN;
    if (size < qe) return DNS_DROP;
    uint16_t id = get16(query), qflags = get16(query + 2);
    uint16_t flags = FLAG_QR | (qflags & (FLAG_OPCODE | FLAG_RD)) | FLAG_RA | (uint16_t)rcode;
    memmove(out + HDR_LEN, query + HDR_LEN, qe - HDR_LEN);
    put_header(out, id, flags, qe > HDR_LEN, 0);
    return (int)qe;
}

size_t dns_tcp_frame(const uint8_t *buf, size_t len)
{
    if (len < 2) return 0;
    size_t n = get16(buf);
    /* A frame shorter than a header is still returned whole, so that the
     * caller drains it (dns_parse_query then says DNS_DROP); only 0 cannot be. */
    return n > 0 && len - 2 >= n ? n : 0;
}
