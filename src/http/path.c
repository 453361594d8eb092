/* Paths for matching secrets' globs. A secret allowed for /repos/acme/\* must
 * not reach /repos/acmeevil or /admin through spellings a server reads
 * differently from us, so the path is normalised only where RFC 3986 says two
 * spellings are the same resource (escaped unreserved characters, hex case),
 * and every spelling servers disagree about (dot segments, encoded slashes,
 * backslashes, "//", overlong UTF-8) is refused, never interpreted. */
#include <string.h>

#include "http_impl.h"

static const char HEX[] = "0123456789ABCDEF";

static bool refuse(const char **why, const char *what)
{
    *why = what;
    return false;
}

/* The next byte of a normalised path (a character, or %XX decoded). */
static unsigned char next_byte(const char *s, size_t *i)
{
    unsigned char c = (unsigned char)s[*i];
    if (c != '%') {
        (*i)++;
        return c;
    }
    c = (unsigned char)(http_hex((unsigned char)s[*i + 1]) << 4 |
                        http_hex((unsigned char)s[*i + 2]));
    *i += 3;
    return c;
}

/* Whether the bytes the path stands for are UTF-8 without overlong forms or
 * surrogates: "%C0%AE" is '.' to some decoders. */
static bool utf8_valid(const char *s)
{
    size_t i = 0;
    while (s[i]) {
        unsigned c = next_byte(s, &i), n;
        uint32_t min;
        if (c < 0x80) continue;
        if (c >= 0xc2 && c <= 0xdf)
            n = 1, min = 0x80;
        else if (c >= 0xe0 && c <= 0xef)
            n = 2, min = 0x800;
        else if (c >= 0xf0 && c <= 0xf4)
            n = 3, min = 0x10000;
        else
            return false;
        uint32_t cp = c & (0x3fu >> n);
        for (unsigned k = 0; k < n; k++) {
            if (!s[i]) return false;
            unsigned char cc = next_byte(s, &i);
            if ((cc & 0xc0) != 0x80) return false;
            cp = cp << 6 | (cc & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    }
    return true;
}

/* "." or "..", alone or before a ';' (some servers drop ";params" first). */
static bool dot_segment(const char *seg, size_t n)
{
    const char *semi = memchr(seg, ';', n);
    if (semi) n = (size_t)(semi - seg);
    return (n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.');
}

/* s starts with '/'. Only the last segment may be empty ("/a/"). */
static bool segments_ok(const char *s, const char *what_empty, const char *what_dot,
                        const char **why)
{
    const char *seg = s + 1;
    for (;;) {
        const char *slash = strchr(seg, '/');
        size_t n = slash ? (size_t)(slash - seg) : strlen(seg);
        if (n == 0 && slash) return refuse(why, what_empty);
        if (dot_segment(seg, n)) return refuse(why, what_dot);
        if (!slash) return true;
        seg = slash + 1;
    }
}

bool http_path_normalize(const unsigned char *p, size_t n, char out[HTTP_PATH_MAX],
                         const char **why)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char enc[3] = {(char)p[i]};
        size_t k = 1;
        if (p[i] == '%') {
            int hi = i + 2 < n ? http_hex(p[i + 1]) : HTTP_NOT_HEX;
            int lo = i + 2 < n ? http_hex(p[i + 2]) : HTTP_NOT_HEX;
            if (hi == HTTP_NOT_HEX || lo == HTTP_NOT_HEX)
                return refuse(why, "bad percent-encoding");
            unsigned char v = (unsigned char)(hi << 4 | lo);
            i += 2;
            if (v == '/') return refuse(why, "encoded slash in path");
            if (v == '\\') return refuse(why, "backslash in path");
            if (v < 0x20 || v == 0x7f) return refuse(why, "control character in path");
            if (http_unreserved(v)) {
                enc[0] = (char)v;
            } else {
                enc[1] = HEX[hi];
                enc[2] = HEX[lo];
                k = 3;
            }
        } else if (p[i] == '\\') {
            return refuse(why, "backslash in path");
        } else if (p[i] < 0x21 || p[i] > 0x7e) {
            return refuse(why, "control character in path");
        }
        if (o + k >= HTTP_PATH_MAX) return refuse(why, "path too long");
        memcpy(out + o, enc, k);
        o += k;
    }
    out[o] = '\0';
    if (o == 0 || out[0] != '/') return refuse(why, "bad request target");
    if (!utf8_valid(out)) return refuse(why, "path not UTF-8");
    return segments_ok(out, "empty segment in path", "dot segment in path", why);
}

/* ---- globs ---- */

static bool glob_escape_ok(const char *s)
{
    int hi = http_hex((unsigned char)s[1]);
    int lo = hi == HTTP_NOT_HEX ? HTTP_NOT_HEX : http_hex((unsigned char)s[2]);
    if (hi == HTTP_NOT_HEX || lo == HTTP_NOT_HEX || (s[1] >= 'a' && s[1] <= 'f') ||
        (s[2] >= 'a' && s[2] <= 'f'))
        return false;
    unsigned char v = (unsigned char)(hi << 4 | lo);
    return !http_unreserved(v) && v != '/' && v != '\\' && v >= 0x20 && v != 0x7f;
}

bool http_glob_valid(const char *pattern, const char **why)
{
    const char *ignored;
    if (!why) why = &ignored;
    if (!pattern || pattern[0] != '/') return refuse(why, "a path glob must start with '/'");
    size_t n = strlen(pattern);
    if (n >= HTTP_PATH_MAX) return refuse(why, "path glob too long");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)pattern[i];
        if (c < 0x21 || c > 0x7e || c == '?' || c == '#' || c == '\\')
            return refuse(why, "path glob has a character a path cannot have");
        if (c == '%' && (i + 2 >= n || !glob_escape_ok(pattern + i)))
            return refuse(why, "path glob has an escape a normalised path cannot have");
        if (c == '*' && pattern[i + 1] == '*' &&
            (pattern[i - 1] != '/' || (pattern[i + 2] != '/' && pattern[i + 2] != '\0')))
            return refuse(why, "'**' must be a whole segment of a path glob");
    }
    return segments_ok(pattern, "path glob has an empty segment", "path glob has a dot segment",
                       why);
}

/* The segment starting at s ends at the next '/' or the end. */
static size_t seg_len(const char *s)
{
    return strcspn(s, "/");
}

/* The start of the segment after the one at s, NULL after the last. */
static const char *seg_next(const char *s)
{
    size_t n = seg_len(s);
    return s[n] == '/' ? s + n + 1 : NULL;
}

static bool seg_is_dstar(const char *s)
{
    return s[0] == '*' && s[1] == '*' && (s[2] == '/' || s[2] == '\0');
}

/* Within one segment, '*' matches any run (backtracking only to the last
 * '*': linear in practice, O(pn * sn) at worst). */
static bool seg_match(const char *p, size_t pn, const char *s, size_t sn)
{
    size_t pi = 0, si = 0, star = (size_t)-1, mark = 0;
    while (si < sn) {
        if (pi < pn && p[pi] == '*') {
            star = pi++;
            mark = si;
        } else if (pi < pn && p[pi] == s[si]) {
            pi++, si++;
        } else if (star != (size_t)-1) {
            pi = star + 1;
            si = ++mark;
        } else {
            return false;
        }
    }
    while (pi < pn && p[pi] == '*')
        pi++;
    return pi == pn;
}

/* The same algorithm one level up: "**" is the star, segments the characters. */
bool http_glob_match(const char *pattern, const char *path)
{
    if (!path || path[0] != '/' || !http_glob_valid(pattern, NULL)) return false;
    const char *pi = pattern + 1, *si = path + 1, *star = NULL, *mark = NULL;
    while (si) {
        if (pi && seg_is_dstar(pi)) {
            star = pi;
            pi = seg_next(pi);
            mark = si;
        } else if (pi && seg_match(pi, seg_len(pi), si, seg_len(si))) {
            pi = seg_next(pi);
            si = seg_next(si);
        } else if (star) {
            pi = seg_next(star);
            mark = seg_next(mark);
            si = mark;
        } else {
            return false;
        }
    }
    while (pi && seg_is_dstar(pi))
        pi = seg_next(pi);
    return pi == NULL;
}

bool http_path_ambiguous(const char *path)
{
    for (const char *p = path; *p; p++) {
        if ((unsigned char)*p >= 0x80) return true;
        if (p[0] == '%' && p[1] && p[2] &&
            ((p[1] == '2' && p[2] == '5') || (p[1] >= '8' && p[1] <= '9') ||
             (p[1] >= 'A' && p[1] <= 'F')))
            return true;
    }
    return false;
}
