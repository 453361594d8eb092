/* common: errors, logging, randomness, small string helpers shared by every program. */
#ifndef RUNTIME_COMMON_H
#define RUNTIME_COMMON_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* An error a user may read: what failed and what to do. Functions return 0 or a
 * negative errno-style code and fill a caller-owned err_t (crun's style). */
typedef struct {
    int code; /* negative errno-style */
    char msg[512];
} err_t;

/* Sets *e (if not NULL) and returns -abs(code) so callers can `return err_set(...)`. */
int err_set(err_t *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Prefixes context to an existing message: "creating sandbox: <old>". Returns e->code. */
int err_wrap(err_t *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };
void log_init(const char *who, bool json);
void log_msg(enum log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

/* Fills buf with n bytes from getrandom(); aborts if the kernel cannot supply them. */
void random_bytes(void *buf, size_t n);
/* Writes 2*n lowercase hex digits of n random bytes plus NUL into out (size >= 2n+1). */
void random_hex(char *out, size_t nbytes);
void hex_encode(char *out, const void *in, size_t n);
/* Constant-time comparison of two strings (length leaks only). */
bool str_equal_ct(const char *a, const char *b);

/* Bounded copy that always terminates; returns -ENAMETOOLONG when src does not fit. */
int str_copy(char *dst, size_t size, const char *src);
/* The first max bytes of s (len bytes) as printable ASCII in out, for a message that
 * shows what a program printed: \" \\ \n \r \t, every other byte outside 0x20-0x7e as
 * \xNN, and "..." after it when it was cut (at max, or at size). */
void text_escape(const char *s, size_t len, size_t max, char *out, size_t size);
/* The line of a failed command's stderr that says what went wrong, into out (cut to
 * fit): the first line that names an error ("error" in any case, or npm's "ERR!") and
 * is not a notice (npm's "notice" and "WARN" lines, pip's "[notice]", "WARNING:",
 * "DEPRECATION:") nor npm's bookkeeping (its "code", "errno", "syscall", "path" lines,
 * where its log is); else the first line that is neither; else the last line. Empty
 * when there is no text. Returns out. */
const char *text_error_line(const char *text, size_t len, char *out, size_t size);
/* Writes whole buffer / reads whole file; return 0 or -errno. */
int write_all(int fd, const void *buf, size_t n);
int write_file(const char *path, const char *text);
int read_file_small(const char *path, char *buf, size_t size); /* NUL-terminates */
/* One figure of /proc/meminfo ("MemAvailable", "SwapTotal", "SwapFree") in bytes, or -1. */
int64_t meminfo_bytes(const char *key);
/* mkdir -p with mode for the last component only created ones. */
int mkdir_p(const char *path, unsigned mode);

/* Closes every descriptor from 3 up except those in keep (a forked helper must
 * not hold its parent's sockets: they would keep the peer from seeing EOF). */
void close_fds_except(const int *keep, size_t n);

/* The version of this build (version.c: VERSION and git describe, from the Makefile). */
const char *runtime_version(void);

/* What a user asks for is never silently widened: the keys of a JSON body (or of an
 * object in it) that its reader does not know are refused, every one named in one
 * message with the keys it knows: "network: unknown fields: deny, foo; known: internet,
 * allow" (-EINVAL). known ends with NULL; where ("" or NULL: none) names the object.
 * Anything but an object passes: its type is its reader's to check. */
struct json_t;
int json_known_fields(const struct json_t *obj, const char *where, const char *const *known,
                      err_t *err);
/* v as compact JSON text (NUL-terminated, *len its length; free it), as
 * json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) writes it but faster on long strings
 * (16 KiB: 15 us against 96 us here): jansson escapes a code point at a time, and the
 * gateway writes every message a server sends to each stream that gets it, on the loop
 * every sandbox shares. NULL on ENOMEM. */
char *json_text(const struct json_t *v, size_t *len);

/* Milliseconds of CLOCK_MONOTONIC. */
uint64_t now_ms(void);
/* Seconds since the epoch with millisecond precision, as RFC 3339 text. */
void time_rfc3339(char *out, size_t size, int64_t unix_ms);
int64_t now_unix_ms(void);

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* A token bucket: on average `rate` a second, in bursts of up to `burst`.
 * rate_allow takes a token, or counts a drop when there is none. */
struct rate_limit {
    uint32_t rate, burst;
    double tokens;
    uint64_t last_ms;
    uint64_t dropped; /* since the last rate_take_dropped */
};
#define RATE_LIMIT(r, b) ((struct rate_limit){.rate = (r), .burst = (b), .tokens = (b)})
bool rate_allow(struct rate_limit *rl, uint64_t now);
/* The drops counted since the last call (then 0 again). */
uint64_t rate_take_dropped(struct rate_limit *rl);

/* A byte budget: what the server holds for one owner (a sandbox) against its
 * limit, charged to its parent (the whole server) too. Reference-counted, so
 * that a request which outlives its sandbox keeps its budget until it ends. */
struct budget {
    uint64_t used, limit, peak;
    uint64_t refused; /* charges refused, and forced past the limit */
    unsigned refs;
    struct budget *parent;
};
/* A budget of limit bytes (0: none) under parent (NULL: none; referenced). */
struct budget *budget_new(uint64_t limit, struct budget *parent);
struct budget *budget_ref(struct budget *b);
void budget_unref(struct budget *b);
/* Charges n when it fits here and in every parent: true; otherwise charges
 * nothing, counts a refusal and is false. */
bool budget_take(struct budget *b, size_t n);
/* Charges n even past a limit (bytes already held); false when that is past one. */
bool budget_force(struct budget *b, size_t n);
void budget_give(struct budget *b, size_t n);
/* Whether b or a parent is past its limit. */
bool budget_over(const struct budget *b);

#define LOG_LINES_PER_S 100
#define LOG_LINES_BURST 500

/* Cleanup helpers (bubblewrap's style). */
void cleanup_freep(void *p);
void cleanup_closep(int *fd);
#define auto_free __attribute__((cleanup(cleanup_freep)))
#define auto_close __attribute__((cleanup(cleanup_closep)))
static inline void *steal_pointer(void *pp)
{
    void **p = pp;
    void *v = *p;
    *p = NULL;
    return v;
}
static inline int steal_fd(int *fd)
{
    int v = *fd;
    *fd = -1;
    return v;
}

#endif
