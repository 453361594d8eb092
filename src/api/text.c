/* Text from sandboxes for JSON answers: bytes that are not UTF-8 are replaced. */
#include <errno.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"

/* Length of the valid UTF-8 sequence at s, or 0 (overlongs, surrogates, > U+10FFFF). */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    if (s[0] < 0x80) return 1;
    size_t len = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 ? 2 : 0;
    if (len == 0 || len > n || s[0] > 0xf4) return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if (len == 3 && ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0))) return 0;
    if (len == 4 && ((s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))) return 0;
    return len;
}

json_t *api_json_text(const char *bytes, size_t n)
{
    char *buf = malloc(n * 3 + 1);
    if (!buf) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t len = utf8_seq((const unsigned char *)bytes + i, n - i);
        if (len == 0) {
            memcpy(buf + o, "\xef\xbf\xbd", 3); /* U+FFFD */
            o += 3;
            i++;
            continue;
        }
        memcpy(buf + o, bytes + i, len);
        o += len;
        i += len;
    }
    json_t *s = json_stringn(buf, o);
    free(buf);
    return s;
}

json_t *api_base64(const void *bytes, size_t n)
{
    char *out = malloc(4 * ((n + 2) / 3) + 1);
    if (!out) return NULL;
    EVP_EncodeBlock((unsigned char *)out, bytes, (int)n);
    json_t *v = json_string(out);
    free(out);
    return v;
}

int api_base64_decode(const char *text, size_t n, char **out, size_t *len)
{
    if (n % 4 != 0 || n > (1u << 30)) return -EINVAL;
    unsigned char *buf = malloc(n / 4 * 3 + 1);
    if (!buf) return -ENOMEM;
    int got = n ? EVP_DecodeBlock(buf, (const unsigned char *)text, (int)n) : 0;
    if (got < 0) {
        free(buf);
        return -EINVAL;
    }
    /* EVP_DecodeBlock counts the padding's bytes too. */
    size_t pad = n >= 2 && text[n - 1] == '=' ? (text[n - 2] == '=' ? 2 : 1) : 0;
    *out = (char *)buf;
    *len = (size_t)got - pad;
    return 0;
}
