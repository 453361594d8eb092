/* Host names: the canonical form allow-list rules and destinations are compared in.
 *
 * IDNA: a label with non-ASCII characters becomes "xn--" + its RFC 3492
 * (punycode) encoding. This is NOT full UTS #46 processing (libidn2 is not
 * available here): ASCII letters and the capitals of Latin-1, basic Greek and
 * basic Cyrillic are lower-cased, nothing else is mapped (no other case
 * folding, no NFC, no width or compatibility mapping, no IDNA2008 validity
 * checks). A name spelled in a form UTS #46 would map ("ＥＸＡＭＰＬＥ", a
 * decomposed "u" + U+0308) gets an A-label of its own that no real name has, so
 * it fails closed: such a rule matches nothing. Rules written in lower case, or
 * as their xn-- form, behave as expected. */
#include "policy_impl.h"

#include "../dns/dns.h"

#include <errno.h>
#include <string.h>

#define NAME_MAX_LEN (POLICY_NAME_MAX - 1)

/* RFC 3492 section 5 parameters. */
enum {
    PC_BASE = 36,
    PC_TMIN = 1,
    PC_TMAX = 26,
    PC_SKEW = 38,
    PC_DAMP = 700,
    PC_BIAS = 72,
    PC_N = 128,
};

static uint32_t pc_adapt(uint32_t delta, uint32_t numpoints, bool first)
{
    delta = first ? delta / PC_DAMP : delta / 2;
    delta += delta / numpoints;
    uint32_t k = 0;
    while (delta > ((PC_BASE - PC_TMIN) * PC_TMAX) / 2) {
        delta /= PC_BASE - PC_TMIN;
        k += PC_BASE;
    }
    return k + (PC_BASE - PC_TMIN + 1) * delta / (delta + PC_SKEW);
}

static char pc_digit(uint32_t d)
{
    return (char)(d < 26 ? 'a' + d : '0' + (d - 26));
}

/* Appends c to out if there is room for it and a NUL. */
static bool put(char *out, size_t size, size_t *len, char c)
{
    if (*len + 1 >= size) return false;
    out[(*len)++] = c;
    return true;
}

/* The variable-length integer of RFC 3492 section 6.3 for one delta. */
static bool pc_put_delta(uint32_t q, uint32_t bias, char *out, size_t size, size_t *len)
{
    for (uint32_t k = PC_BASE;; k += PC_BASE) {
        uint32_t t = k <= bias ? PC_TMIN : k >= bias + PC_TMAX ? PC_TMAX : k - bias;
        if (q < t) break;
        if (!put(out, size, len, pc_digit(t + (q - t) % (PC_BASE - t)))) return false;
        q = (q - t) / (PC_BASE - t);
    }
    return put(out, size, len, pc_digit(q));
}

int policy_punycode_encode(const uint32_t *cps, size_t n, char *out, size_t size)
{
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        if (cps[i] < 0x80 && !put(out, size, &len, (char)cps[i])) return -ENOSPC;
    size_t b = len, h = len;
    if (b > 0 && !put(out, size, &len, '-')) return -ENOSPC;
    uint32_t cp = PC_N, delta = 0, bias = PC_BIAS;
    while (h < n) {
        uint32_t m = UINT32_MAX;
        for (size_t i = 0; i < n; i++)
            if (cps[i] >= cp && cps[i] < m) m = cps[i];
        if (m == UINT32_MAX || m - cp > (UINT32_MAX - delta) / (h + 1)) return -EOVERFLOW;
        delta += (m - cp) * (uint32_t)(h + 1);
        cp = m;
        for (size_t i = 0; i < n; i++) {
            if (cps[i] < cp && ++delta == 0) return -EOVERFLOW;
            if (cps[i] != cp) continue;
            if (!pc_put_delta(delta, bias, out, size, &len)) return -ENOSPC;
            bias = pc_adapt(delta, (uint32_t)(h + 1), h == b);
            delta = 0;
            h++;
        }
        delta++;
        cp++;
    }
    if (size == 0) return -ENOSPC;
    out[len] = '\0';
    return (int)len;
}

size_t policy_utf8_decode(const unsigned char *s, uint32_t *cp)
{
    unsigned char c = s[0];
    size_t n;
    uint32_t v, min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2, v = c & 0x1f, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
        n = 3, v = c & 0x0f, min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4, v = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0; /* also stops at the NUL */
        v = v << 6 | (s[i] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
    *cp = v;
    return n;
}

/* Simple lower-case mapping for the scripts where it is one offset per range
 * (and agrees with UTS #46); every other code point is kept as it is. */
static uint32_t fold(uint32_t c)
{
    if (c >= 'A' && c <= 'Z') return c + 0x20;
    if (c >= 0xc0 && c <= 0xde && c != 0xd7) return c + 0x20;    /* À..Þ but × */
    if (c >= 0x391 && c <= 0x3ab && c != 0x3a2) return c + 0x20; /* Α..Ϋ */
    if (c == 0x386) return 0x3ac;                                /* Ά */
    if (c >= 0x388 && c <= 0x38a) return c + 0x25;               /* Έ Ή Ί */
    if (c == 0x38c) return 0x3cc;                                /* Ό */
    if (c == 0x38e || c == 0x38f) return c + 0x3f;               /* Ύ Ώ */
    if (c >= 0x410 && c <= 0x42f) return c + 0x20;               /* А..Я */
    if (c >= 0x400 && c <= 0x40f) return c + 0x50;               /* Ѐ..Џ */
    return c;
}

void policy_show(const char *text, size_t len, char *out, size_t size)
{
    size_t o = 0, i = 0;
    while (i < len && text[i] && o + 8 < size) {
        uint32_t cp;
        size_t k = policy_utf8_decode((const unsigned char *)text + i, &cp);
        if (!k || k > len - i || cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0)) {
            out[o++] = '?';
            i += k && k <= len - i ? k : 1;
            continue;
        }
        memcpy(out + o, text + i, k);
        o += k;
        i += k;
    }
    if (i < len && text[i]) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
}

static bool ascii_label_char(uint32_t c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Full stops other than '.' that UTS #46 would map to '.'; without the mapping
 * they would silently become part of a label, so say what to write instead. */
static bool unicode_dot(uint32_t c)
{
    return c == 0x3002 || c == 0xff0e || c == 0xff61;
}

static int bad_char(uint32_t c, err_t *err)
{
    if (c > 0x20 && c < 0x7f)
        return err_set(err, -EINVAL,
                       "'%c' is not allowed in a host name (letters, digits, '-' and '_' only)",
                       (char)c);
    if (unicode_dot(c))
        return err_set(err, -EINVAL, "U+%04X is not a label separator here; write '.'",
                       (unsigned)c);
    return err_set(err, -EINVAL, "character U+%04X is not allowed in a host name", (unsigned)c);
}

/* Decodes the label in[0..len) into lower-cased code points. */
static int label_cps(const char *in, size_t len, uint32_t cps[POLICY_LABEL_CPS], size_t *n,
                     bool *ascii, err_t *err)
{
    *n = 0;
    *ascii = true;
    for (size_t i = 0; i < len;) {
        uint32_t c;
        size_t k = policy_utf8_decode((const unsigned char *)in + i, &c);
        if (!k || i + k > len) return err_set(err, -EINVAL, "host name is not valid UTF-8");
        c = fold(c);
        if (c < 0x80 ? !ascii_label_char(c) : (c < 0xa0 || unicode_dot(c))) return bad_char(c, err);
        if (c >= 0x80) *ascii = false;
        if (*n == POLICY_LABEL_CPS) {
            char shown[32];
            policy_show(in, len, shown, sizeof shown);
            return err_set(err, -EINVAL, "label \"%s\" is longer than %d characters", shown,
                           DNS_LABEL_MAX);
        }
        cps[(*n)++] = c;
        i += k;
    }
    return 0;
}

/* Writes the canonical form of the label in[0..len) to label (64 bytes). */
static int canon_label(const char *in, size_t len, char label[DNS_LABEL_MAX + 1], err_t *err)
{
    uint32_t cps[POLICY_LABEL_CPS];
    size_t n;
    bool ascii;
    if (len == 0)
        return err_set(err, -EINVAL,
                       "host name has an empty label (a leading dot or two in a row)");
    int r = label_cps(in, len, cps, &n, &ascii, err);
    if (r < 0) return r;
    char shown[72];
    if (cps[0] == '-' || cps[n - 1] == '-') {
        policy_show(in, len, shown, sizeof shown);
        return err_set(err, -EINVAL, "label \"%s\" starts or ends with '-'", shown);
    }
    if (ascii) {
        for (size_t i = 0; i < n; i++)
            label[i] = (char)cps[i];
        label[n] = '\0';
        return 0;
    }
    memcpy(label, "xn--", 4);
    if (policy_punycode_encode(cps, n, label + 4, DNS_LABEL_MAX + 1 - 4) < 0) {
        policy_show(in, len, shown, sizeof shown);
        return err_set(err, -EINVAL, "label \"%s\" is longer than %d characters as IDNA (xn--)",
                       shown, DNS_LABEL_MAX);
    }
    return 0;
}

/* WHATWG's "ends in a number": such a name is a spelling of an IPv4 address
 * ("127.0.0.1.", "1.0x7f"), never a host name to look up. */
static bool numeric_label(const char *l)
{
    if (l[0] == '0' && l[1] == 'x') return strspn(l + 2, "0123456789abcdef") == strlen(l + 2);
    return strspn(l, "0123456789") == strlen(l);
}

int policy_canon_name(const char *in, char out[POLICY_NAME_MAX], err_t *err)
{
    out[0] = '\0';
    if (!in || !*in) return err_set(err, -EINVAL, "host name is empty");
    size_t total = strlen(in), pos = 0;
    int r;
    if (in[total - 1] == '.') total--; /* the root's dot: "example.com." is "example.com" */
    if (total == 0) return err_set(err, -EINVAL, "host name is empty");
    const char *last = out;
    for (size_t start = 0; start <= total;) {
        const char *dot = memchr(in + start, '.', total - start);
        size_t len = dot ? (size_t)(dot - (in + start)) : total - start;
        char label[DNS_LABEL_MAX + 1];
        r = canon_label(in + start, len, label, err);
        if (r < 0) goto fail;
        size_t l = strlen(label);
        if (pos + (pos ? 1 : 0) + l > NAME_MAX_LEN) {
            r = err_set(err, -EINVAL, "host name is longer than %d characters", NAME_MAX_LEN);
            goto fail;
        }
        if (pos) out[pos++] = '.';
        last = out + pos;
        memcpy(out + pos, label, l + 1);
        pos += l;
        start += len + 1;
    }
    if (numeric_label(last)) {
        r = err_set(err, -EINVAL,
                    "\"%s\" ends in a number: that is a spelling of an IP address, not a host "
                    "name (write IPv4 addresses as a.b.c.d, without a trailing dot)",
                    out);
        goto fail;
    }
    return 0;
fail:
    out[0] = '\0';
    return r;
}
