/* policy internals shared by name.c, addr.c and rules.c. Nothing outside
 * src/policy/ and its tests includes this. */
#ifndef RUNTIME_POLICY_IMPL_H
#define RUNTIME_POLICY_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy.h"

/* Most code points a label may have: each one becomes at least one character
 * of the 63-character A-label, so more can never fit. */
#define POLICY_LABEL_CPS 63

/* RFC 3492 encoding of cps[0..n) (basic code points copied, then the deltas),
 * without the "xn--" prefix. Returns the length written, -ENOSPC when it does
 * not fit in size-1 characters, or -EOVERFLOW when a delta overflows (RFC 3492
 * section 6.4). */
int policy_punycode_encode(const uint32_t *cps, size_t n, char *out, size_t size);

/* Decodes one UTF-8 sequence at s into *cp; returns its length, or 0 when it
 * is malformed (overlong, surrogate, beyond U+10FFFF, cut short by the NUL). */
size_t policy_utf8_decode(const unsigned char *s, uint32_t *cp);

/* Copies at most len bytes of text (stopping at a NUL) for an error message:
 * valid UTF-8 only, control characters and broken sequences shown as '?', cut
 * with "..." to fit size (at least 12). */
void policy_show(const char *text, size_t len, char *out, size_t size);

/* An IPv4-mapped IPv6 address (::ffff:a.b.c.d) becomes the IPv4 it carries:
 * the kernel sends it as that IPv4 packet. Other addresses are unchanged. */
void policy_addr_unmap(struct policy_addr *a);
/* True when a and b (both unmapped) are the same address. */
bool policy_addr_same(const struct policy_addr *a, const struct policy_addr *b);
/* Whether the first prefix bits of a and base agree (same family required). */
bool policy_addr_in_prefix(const struct policy_addr *a, const struct policy_addr *base,
                           unsigned prefix);

#endif
