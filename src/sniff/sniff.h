/* sniff: what a client's first bytes say about where it wants to go, read
 * without consuming them: the SNI of a TLS ClientHello (which may arrive split
 * over many TCP segments and several TLS records) or the Host of an HTTP/1.x
 * request head. Pure functions over a byte buffer, unit-tested and fuzzed. */
#ifndef RUNTIME_SNIFF_H
#define RUNTIME_SNIFF_H

#include <stdbool.h>
#include <stddef.h>

#define SNIFF_NAME_MAX 256

enum sniff_result {
    SNIFF_MORE = 0, /* need more bytes to decide */
    SNIFF_TLS,      /* a ClientHello; name holds the SNI host name, "" if none */
    SNIFF_HTTP,     /* an HTTP/1.x request head; name holds Host without port */
    SNIFF_OTHER,    /* neither: some other protocol */
    SNIFF_BAD,      /* looks like TLS or HTTP but is malformed (refuse) */
};

/* Looks at buf[0..len); name gets the host (lower case, no trailing dot,
 * without :port; IPv6 literals without brackets). A ClientHello with more than
 * one server_name entry, or an HTTP head with several Host headers, is BAD.
 * max: the most bytes the caller will ever buffer; past that, MORE becomes BAD. */
enum sniff_result sniff_peek(const unsigned char *buf, size_t len, size_t max,
                             char name[SNIFF_NAME_MAX]);

/* The canonical form of a host name, shared with src/http so that a request's
 * Host compares with the SNI: lower case, one trailing dot dropped, a DNS name
 * (labels 1..63, at most 253) or an IP literal (IPv6 only when allow_v6); a
 * name whose last label is all digits must be a plain dotted quad. False if
 * s[0..n) is none of these. */
bool sniff_host_canon(const unsigned char *s, size_t n, bool allow_v6, char out[SNIFF_NAME_MAX]);
/* "host[:port]" or "[v6][:port]" (a Host header, a request target's authority):
 * the canonical host, and the port (1-65535, 0 when none is given). */
bool sniff_authority(const unsigned char *s, size_t n, char out[SNIFF_NAME_MAX], unsigned *port);

/* RFC 9110's characters (5.6.2, 5.5), for the parsers here and in http: tchar, and a
 * field value's (field-vchar, SP or HTAB; obs-text allowed, controls are not). */
bool sniff_tchar(unsigned char c);
bool sniff_field_char(unsigned char c);

#endif
