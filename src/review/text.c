/* Text for the review: a growing buffer, and the escaping that makes other people's
 * strings safe to print on a terminal. */
#include "review_impl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sb_put(struct sbuf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->cap - b->len <= n) {
        size_t cap = b->cap ? b->cap : 128;
        while (cap - b->len <= n) {
            if (cap > SIZE_MAX / 4) {
                b->oom = true;
                return;
            }
            cap *= 2;
        }
        char *np = realloc(b->p, cap);
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np, b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void sb_puts(struct sbuf *b, const char *s)
{
    sb_put(b, s, strlen(s));
}

void sb_printf(struct sbuf *b, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    sb_put(b, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

void sb_cut(struct sbuf *b, size_t len)
{
    if (b->p && len <= b->len) b->p[b->len = len] = '\0';
}

char *sb_take(struct sbuf *b)
{
    if (!b->oom && !b->p) sb_put(b, "", 0);
    char *p = b->oom ? NULL : b->p;
    if (b->oom) free(b->p);
    *b = (struct sbuf){0};
    return p;
}

int list_add(struct review_list *l, struct sbuf *b)
{
    if (b->oom) return -ENOMEM;
    char *s = strdup(b->p ? b->p : "");
    char **nv = s ? realloc(l->v, (l->n + 1) * sizeof *nv) : NULL;
    if (!nv) {
        free(s);
        return -ENOMEM;
    }
    l->v = nv;
    l->v[l->n++] = s;
    return 0;
}

/* Code points a reader does not see, or that reorder what the reader sees: they are
 * escaped when shown. (The scan decides which of them are findings.) */
static bool hidden_cp(uint32_t cp)
{
    return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || cp == 0xAD || cp == 0x34F || cp == 0x61C ||
           cp == 0x115F || cp == 0x1160 || cp == 0x17B4 || cp == 0x17B5 ||
           (cp >= 0x180B && cp <= 0x180F) || (cp >= 0x200B && cp <= 0x200F) ||
           (cp >= 0x2028 && cp <= 0x202E) || (cp >= 0x2060 && cp <= 0x206F) || cp == 0x3164 ||
           (cp >= 0xD800 && cp <= 0xDFFF) || (cp >= 0xFE00 && cp <= 0xFE0F) || cp == 0xFEFF ||
           cp == 0xFFA0 || (cp >= 0xFFF9 && cp <= 0xFFFB) || (cp >= 0x1D173 && cp <= 0x1D17A) ||
           (cp >= 0xE0000 && cp <= 0xE0FFF);
}

/* The reader's UTF-8 (surrogates included) is all that reaches here; a stray byte is
 * taken as itself and escaped rather than trusted. */
static uint32_t decode(const unsigned char *s, size_t n, size_t *len)
{
    unsigned char c = s[0];
    size_t k = c < 0x80                ? 1
               : c >= 0xC2 && c < 0xE0 ? 2
               : c >= 0xE0 && c < 0xF0 ? 3
               : c >= 0xF0 && c < 0xF5 ? 4
                                       : 0;
    if (k == 0 || k > n) {
        *len = 1;
        return 0xDC00 | c; /* shown as an escape, never printed raw */
    }
    uint32_t cp = k == 1 ? c : k == 2 ? c & 0x1Fu : k == 3 ? c & 0x0Fu : c & 0x07u;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80) {
            *len = 1;
            return 0xDC00 | c;
        }
        cp = cp << 6 | (s[i] & 0x3Fu);
    }
    *len = k;
    return cp;
}

void display_put(struct sbuf *b, const char *s, size_t n, bool ascii_only)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        size_t len;
        uint32_t cp = decode(u + i, n - i, &len);
        const char *esc = cp == '"'    ? "\\\""
                          : cp == '\\' ? "\\\\"
                          : cp == '\n' ? "\\n"
                          : cp == '\t' ? "\\t"
                          : cp == '\r' ? "\\r"
                                       : NULL;
        if (esc)
            sb_puts(b, esc);
        else if (hidden_cp(cp) || (ascii_only && cp >= 0x80))
            sb_printf(b, cp > 0xFFFF ? "\\u{%x}" : "\\u%04x", cp);
        else
            sb_put(b, s + i, len);
        i += len;
    }
}

static bool plain_key(const char *s, size_t n)
{
    if (n == 0) return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '$' || c == '-'))
            return false;
    }
    return true;
}

void path_put(struct sbuf *b, const char *key, size_t n, bool first)
{
    if (plain_key(key, n)) {
        if (!first) sb_put(b, ".", 1);
        sb_put(b, key, n);
        return;
    }
    sb_puts(b, "[\"");
    display_put(b, key, n, true);
    sb_puts(b, "\"]");
}
