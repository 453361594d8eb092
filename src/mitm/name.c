/* The names a leaf certificate may be minted for. The name comes from the
 * sandbox (SNI, the address it dialled), so it is checked byte by byte before
 * it reaches a certificate or a cache key. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "../dns/dns.h"
#include "mitm.h"

static bool is_alpha(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* Checks one label of len bytes; returns NULL or what is wrong with it. */
static const char *label_problem(const char *s, size_t len)
{
    if (len == 0) return "has an empty label (leading, trailing or doubled dot)";
    if (len > DNS_LABEL_MAX) return "has a label longer than 63 characters";
    if (s[0] == '-' || s[len - 1] == '-') return "has a label that starts or ends with '-'";
    for (size_t i = 0; i < len; i++)
        if (!dns_name_char((unsigned char)s[i]))
            return "contains a character other than letters, digits, '-', '_' and '.'";
    return NULL;
}

static const char *dns_problem(const char *s, size_t len)
{
    size_t start = 0;
    if (memchr(s, '*', len)) return "contains '*': certificates are minted for exact names only";
    for (size_t i = 0; i <= len; i++) {
        if (i < len && s[i] != '.') continue;
        const char *p = label_problem(s + start, i - start);
        if (p) return p;
        if (i == len && !is_alpha((unsigned char)s[start]))
            return "has a last label that does not start with a letter (a numeric form of an "
                   "address?)";
        start = i + 1;
    }
    return NULL;
}

/* A copy of s fit for a message: the name is the sandbox's, so no control bytes
 * reach a log line or an API error. */
static void printable(char *dst, size_t size, const char *s)
{
    size_t i = 0;
    for (; s[i] && i + 1 < size; i++)
        dst[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
    dst[i] = '\0';
}

static int canon_ip(const char *s, enum mitm_name_kind *kind, char *out)
{
    unsigned char addr[16];
    int af = strchr(s, ':') ? AF_INET6 : AF_INET;
    if (inet_pton(af, s, addr) != 1) return -EINVAL;
    if (!inet_ntop(af, addr, out, MITM_NAME_MAX)) return -EINVAL;
    *kind = af == AF_INET6 ? MITM_NAME_IPV6 : MITM_NAME_IPV4;
    return 0;
}

int mitm_name_canon(const char *name, size_t len, char out[MITM_NAME_MAX],
                    enum mitm_name_kind *kind, err_t *err)
{
    enum mitm_name_kind k_local;
    if (!kind) kind = &k_local;
    if (!name || len == 0) return err_set(err, EINVAL, "the host name is empty");
    if (len > MITM_NAME_MAX - 1)
        return err_set(err, EINVAL, "the host name is %zu bytes long; at most 253 are allowed",
                       len);
    if (memchr(name, '\0', len)) return err_set(err, EINVAL, "the host name contains a NUL byte");
    char buf[MITM_NAME_MAX];
    memcpy(buf, name, len);
    buf[len] = '\0';
    char shown[72];
    printable(shown, sizeof shown, buf);
    if (buf[0] == '[')
        return err_set(err, EINVAL, "host name \"%s\": give an IPv6 address without brackets",
                       shown);
    if (canon_ip(buf, kind, out) == 0) return 0;
    const char *problem = dns_problem(buf, len);
    if (problem)
        return err_set(err, EINVAL, "\"%s\" is neither an IP address nor a valid DNS name: it %s",
                       shown, problem);
    for (size_t i = 0; i <= len; i++)
        out[i] = (buf[i] >= 'A' && buf[i] <= 'Z') ? (char)(buf[i] - 'A' + 'a') : buf[i];
    *kind = MITM_NAME_DNS;
    return 0;
}
