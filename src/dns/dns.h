/* dns: the wire format of DNS messages (RFC 1035), for the stub resolver the
 * egress proxy runs inside each sandbox. Only what a stub needs: read one
 * question from a query, write an answer, an empty answer or an error. The
 * parser treats every byte as hostile (compression loops, lengths past the
 * end, label limits). Pure functions, unit-tested and fuzzed. */
#ifndef RUNTIME_DNS_H
#define RUNTIME_DNS_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A DNS name as text, one definition for every reader of names in the daemon (this
 * parser, sniffed TLS and HTTP names, leaf certificates, allow-list rules): labels of 1
 * to DNS_LABEL_MAX characters, at most DNS_TEXT_MAX in all (no trailing dot), of
 * dns_name_char's characters. DNS_NAME_MAX holds one with its NUL. */
#define DNS_LABEL_MAX 63
#define DNS_TEXT_MAX 253
#define DNS_NAME_MAX (DNS_TEXT_MAX + 1)
/* Letters, digits, '-' and '_' (service labels: _dmarc, _sip). */
bool dns_name_char(unsigned char c);
#define DNS_TYPE_A 1
#define DNS_TYPE_AAAA 28
#define DNS_CLASS_IN 1
#define DNS_RCODE_NOERROR 0
#define DNS_RCODE_FORMERR 1
#define DNS_RCODE_SERVFAIL 2
#define DNS_RCODE_NXDOMAIN 3
#define DNS_RCODE_NOTIMP 4
#define DNS_RCODE_REFUSED 5

/* What the parser and builders return when the message gets no answer at all:
 * too broken to answer, or the response cannot be built. Negative, so that it is
 * never a length or an rcode. */
#define DNS_DROP (-1)

struct dns_question {
    uint16_t id;
    uint16_t flags;          /* of the query, to echo RD */
    char name[DNS_NAME_MAX]; /* lower case, no trailing dot, "" for the root */
    uint16_t qtype, qclass;
    size_t question_end; /* offset after the question, to copy it */
};

/* Parses a query with exactly one question (QR=0, opcode 0). Returns 0, or a
 * DNS_RCODE_* > 0 to answer with (FORMERR, NOTIMP), or DNS_DROP if the message
 * is too broken to answer at all (shorter than a header, or a response: QR=1).
 * EDNS OPT records in the additional section are accepted and ignored. Names hold only
 * [a-z0-9-_] labels of 1..63 (upper case folded), 253 characters at most;
 * compression pointers in the question are FORMERR (a query has nothing to
 * point back at), so are trailing bytes. question_end is set (non-zero) once the
 * question itself was read, also when a later part fails: dns_build_error then
 * echoes it. Use q->name only when the result is 0. */
int dns_parse_query(const uint8_t *msg, size_t len, struct dns_question *q);

/* Builds a response to q into out (size >= 512): the question copied from the
 * query, and n_addrs A records (each 4 bytes, network order) with ttl. Returns
 * the length, or DNS_DROP if it does not fit (or q holds no parsed question).
 * With n_addrs = 0 it is an empty NOERROR answer (what AAAA queries get). out
 * may be the query's own buffer. */
int dns_build_answer(const uint8_t *query, const struct dns_question *q,
                     const struct in_addr *addrs, size_t n_addrs, uint32_t ttl, uint8_t *out,
                     size_t size);
/* Builds an error response (rcode 0..15) echoing the question when q is parsed,
 * or a bare header (QDCOUNT 0) when q is NULL or holds no question; id, opcode and
 * RD come from the query. Returns the length, or DNS_DROP when qlen < 12, rcode is
 * out of range or it does not fit. out may be the query's own buffer. */
int dns_build_error(const uint8_t *query, size_t qlen, const struct dns_question *q, int rcode,
                    uint8_t *out, size_t size);

/* DNS over TCP frames each message with a 2-byte big-endian length: returns
 * the message length (the message starts at buf + 2) once buf holds a whole
 * frame, 0 if more bytes are needed. A frame of length 0 never completes (0
 * means "more"): callers bound what they buffer (2 + 65535) and idle time, or
 * close a connection whose next two bytes are 0. Responses get the same prefix. */
size_t dns_tcp_frame(const uint8_t *buf, size_t len);

#endif
