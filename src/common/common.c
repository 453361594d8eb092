#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int err_set(err_t *e, int code, const char *fmt, ...)
{
    int c = code > 0 ? -code : code;
    if (c == 0) c = -EINVAL;
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
        e->code = c;
    }
    return c;
}

int err_wrap(err_t *e, const char *fmt, ...)
{
    if (!e) return -EINVAL;
    char prefix[256], old[sizeof e->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, e->msg, sizeof old);
    snprintf(e->msg, sizeof e->msg, "%s: %s", prefix, old);
    return e->code ? e->code : -EINVAL;
}

bool rate_allow(struct rate_limit *rl, uint64_t now)
{
    if (rl->last_ms && now > rl->last_ms) {
        rl->tokens += (double)(now - rl->last_ms) * rl->rate / 1000.0;
        if (rl->tokens > rl->burst) rl->tokens = rl->burst;
    }
    rl->last_ms = now;
    if (rl->tokens >= 1) {
        rl->tokens -= 1;
        return true;
    }
    rl->dropped++;
    return false;
}

uint64_t rate_take_dropped(struct rate_limit *rl)
{
    uint64_t n = rl->dropped;
    rl->dropped = 0;
    return n;
}

static const char *log_who = "runtime";
static bool log_json;

void log_init(const char *who, bool json)
{
    log_who = who;
    log_json = json;
}

static void json_escape_to(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
}

static void log_line(enum log_level lvl, const char *text);

/* At most 100 lines a second (bursts of 500): a flood, whoever causes it, cannot
 * fill the disk; what was dropped is counted in the next line that goes out. The
 * lock: the store's writer thread logs too, and a line is written in pieces. */
void log_msg(enum log_level lvl, const char *fmt, ...)
{
    static struct rate_limit limit = RATE_LIMIT(LOG_LINES_PER_S, LOG_LINES_BURST);
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    if (lvl == LOG_DEBUG && !getenv("RUNTIME_DEBUG")) return;
    char text[1024], note[96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&lock);
    if (rate_allow(&limit, now_ms())) {
        uint64_t dropped = rate_take_dropped(&limit);
        if (dropped) {
            snprintf(note, sizeof note, "%" PRIu64 " log lines dropped (over %u a second)", dropped,
                     LOG_LINES_PER_S);
            log_line(LOG_WARN, note);
        }
        log_line(lvl, text);
    }
    pthread_mutex_unlock(&lock);
}

static void log_line(enum log_level lvl, const char *text)
{
    static const char *names[] = {"debug", "info", "warn", "error"};
    char ts[40];
    time_rfc3339(ts, sizeof ts, now_unix_ms());
    if (log_json) {
        fprintf(stderr, "{\"time\":\"%s\",\"level\":\"%s\",\"proc\":\"%s\",\"msg\":\"", ts,
                names[lvl], log_who);
        json_escape_to(stderr, text);
        fputs("\"}\n", stderr);
    } else {
        fprintf(stderr, "%s %s %s: %s\n", ts, names[lvl], log_who, text);
    }
}

void random_bytes(void *buf, size_t n)
{
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t r = getrandom(p, n, 0);
        if (r < 0) {
            if (errno == EINTR) continue;
            perror("getrandom");
            abort();
        }
        p += r;
        n -= (size_t)r;
    }
}

void hex_encode(char *out, const void *in, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    const unsigned char *p = in;
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 15];
    }
    out[2 * n] = '\0';
}

void random_hex(char *out, size_t nbytes)
{
    unsigned char buf[64];
    if (nbytes > sizeof buf) abort();
    random_bytes(buf, nbytes);
    hex_encode(out, buf, nbytes);
}

bool str_equal_ct(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned char diff = la != lb;
    size_t n = la < lb ? la : lb;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0;
}

void text_escape(const char *s, size_t len, size_t max, char *out, size_t size)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0, i = 0;
    for (; i < len && i < max; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[5] = {0};
        if (c == '"' || c == '\\')
            esc[0] = '\\', esc[1] = (char)c;
        else if (c == '\n' || c == '\r' || c == '\t')
            esc[0] = '\\', esc[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
        else if (c < 0x20 || c > 0x7e)
            esc[0] = '\\', esc[1] = 'x', esc[2] = hex[c >> 4], esc[3] = hex[c & 15];
        else
            esc[0] = (char)c;
        size_t n = strlen(esc);
        if (o + n + 4 > size) break; /* room for "..." and the NUL */
        memcpy(out + o, esc, n);
        o += n;
    }
    if (i < len && o + 4 <= size) memcpy(out + o, "...", 3), o += 3;
    if (size) out[o < size ? o : size - 1] = '\0';
}

static bool line_starts(const char *l, size_t n, const char *prefix)
{
    size_t k = strlen(prefix);
    return n >= k && memcmp(l, prefix, k) == 0;
}

static bool line_has(const char *l, size_t n, const char *word, bool any_case)
{
    size_t k = strlen(word);
    for (size_t i = 0; i + k <= n; i++)
        if (any_case ? strncasecmp(l + i, word, k) == 0 : memcmp(l + i, word, k) == 0) return true;
    return false;
}

/* npm's "npm ERR! " (npm 9) or "npm error " (npm 10 and later): the rest, or NULL. */
static const char *npm_error_rest(const char *l, size_t n)
{
    if (line_starts(l, n, "npm ERR!")) return l + 8;
    if (line_starts(l, n, "npm error") && (n == 9 || l[9] == ' ')) return l + 9;
    return NULL;
}

/* What tells a failure nothing: notices and warnings, and npm's lines about its run. */
static bool line_is_noise(const char *l, size_t n)
{
    static const char *const notices[] = {"npm notice", "npm WARN", "npm warn",
                                          "[notice]",   "WARNING:", "DEPRECATION:"};
    static const char *const npm_meta[] = {"code",
                                           "errno",
                                           "syscall",
                                           "path",
                                           "dest",
                                           "signal",
                                           "command",
                                           "cwd",
                                           "A complete log of this run",
                                           "Log files were not written"};
    for (size_t i = 0; i < ARRAY_LEN(notices); i++)
        if (line_starts(l, n, notices[i])) return true;
    const char *rest = npm_error_rest(l, n);
    if (!rest) return false;
    size_t blanks = strspn(rest, " ");
    const char *word = rest + blanks, *end = l + n;
    if (word >= end || *word == '/') return true; /* empty, or the log's path alone */
    for (size_t i = 0; i < ARRAY_LEN(npm_meta); i++)
        if (line_starts(word, (size_t)(end - word), npm_meta[i])) return true;
    return false;
}

const char *text_error_line(const char *text, size_t len, char *out, size_t size)
{
    const char *pick[3] = {NULL, NULL, NULL}; /* names an error, plain, the last */
    size_t pick_n[3] = {0, 0, 0};
    for (const char *l = text, *end = text + len; l < end;) {
        const char *nl = memchr(l, '\n', (size_t)(end - l));
        size_t n = (size_t)((nl ? nl : end) - l);
        const char *next = nl ? nl + 1 : end;
        while (n > 0 && (l[n - 1] == '\r' || l[n - 1] == ' ' || l[n - 1] == '\t'))
            n--;
        if (n > 0) {
            int kind = line_is_noise(l, n)                                              ? 2
                       : line_has(l, n, "error", true) || line_has(l, n, "ERR!", false) ? 0
                                                                                        : 1;
            for (int k = kind; k < 3; k++)
                if (!pick[k] || k == 2) pick[k] = l, pick_n[k] = n;
        }
        l = next;
    }
    int k = pick[0] ? 0 : pick[1] ? 1 : 2;
    snprintf(out, size, "%.*s", pick[k] ? (int)pick_n[k] : 0, pick[k] ? pick[k] : "");
    return out;
}

int str_copy(char *dst, size_t size, const char *src)
{
    size_t n = strlen(src);
    if (n >= size) return -ENAMETOOLONG;
    memcpy(dst, src, n + 1);
    return 0;
}

int write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC | O_TRUNC | O_CREAT, 0644);
    if (fd < 0) return -errno;
    int r = write_all(fd, text, strlen(text));
    close(fd);
    return r;
}

int64_t meminfo_bytes(const char *key)
{
    char buf[8192] = "\n", want[40];
    if (read_file_small("/proc/meminfo", buf + 1, sizeof buf - 1) < 0) return -1;
    snprintf(want, sizeof want, "\n%s:", key); /* a whole name, at a line's start */
    const char *line = strstr(buf, want);
    return line ? strtoll(line + strlen(want), NULL, 10) * 1024 : -1;
}

int read_file_small(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    size_t got = 0;
    while (got + 1 < size) {
        ssize_t r = read(fd, buf + got, size - 1 - got);
        if (r < 0) {
            if (errno == EINTR) continue;
            int e = -errno;
            close(fd);
            return e;
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    buf[got] = '\0';
    close(fd);
    return (int)got;
}

int mkdir_p(const char *path, unsigned mode)
{
    char tmp[4096];
    if (str_copy(tmp, sizeof tmp, path) < 0) return -ENAMETOOLONG;
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(tmp, 0755) < 0 && errno != EEXIST) return -errno;
        *p = '/';
    }
    if (mkdir(tmp, mode) < 0 && errno != EEXIST) return -errno;
    return 0;
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

void close_fds_except(const int *keep, size_t n)
{
    int sorted[64];
    if (n > ARRAY_LEN(sorted)) n = ARRAY_LEN(sorted);
    memcpy(sorted, keep, n * sizeof *keep);
    qsort(sorted, n, sizeof *sorted, cmp_int);
    unsigned from = 3;
    for (size_t i = 0; i < n; i++) {
        if (sorted[i] < (int)from) continue;
        if ((unsigned)sorted[i] > from) close_range(from, (unsigned)sorted[i] - 1, 0);
        from = (unsigned)sorted[i] + 1;
    }
    close_range(from, ~0U, 0);
}

uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int64_t now_unix_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void time_rfc3339(char *out, size_t size, int64_t unix_ms)
{
    time_t s = (time_t)(unix_ms / 1000);
    struct tm tm;
    gmtime_r(&s, &tm);
    char base[32];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, size, "%s.%03dZ", base, (int)(unix_ms % 1000));
}

void cleanup_freep(void *p)
{
    free(*(void **)p);
}

void cleanup_closep(int *fd)
{
    if (*fd >= 0) close(*fd);
}
