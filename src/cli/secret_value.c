/* A secret's value: from stdin, a terminal (without echo) or an environment variable. It is
 * kept in one buffer that never moves (a realloc would leave copies behind), locked out of
 * swap and core dumps when the system allows, and wiped after use. Messages never show it. */
#include "cli.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <termios.h>
#include <unistd.h>

/* Far above what the daemon takes (16 KiB): it, not the client, says what the limit is. */
enum { VALUE_CAP = 65536 };

static int value_alloc(struct secret_value *v)
{
    v->cap = VALUE_CAP;
    v->len = 0;
    void *p = mmap(NULL, v->cap + 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return v->buf = NULL, cli_error("out of memory");
    v->buf = p;
    (void)mlock(v->buf, v->cap + 1);                  /* best effort: not everyone may */
    (void)madvise(v->buf, v->cap + 1, MADV_DONTDUMP); /* best effort */
    return 0;
}

void secret_value_wipe(struct secret_value *v)
{
    if (!v->buf) return;
    explicit_bzero(v->buf, v->cap + 1);
    munlock(v->buf, v->cap + 1);
    munmap(v->buf, v->cap + 1);
    *v = (struct secret_value){0};
}

static int too_long(void)
{
    return cli_error("the value is longer than %d bytes; a secret is one API key or token",
                     VALUE_CAP);
}

/* Reads until end of input or, on a terminal, the end of the line. */
static int read_into(struct secret_value *v, bool one_line)
{
    for (;;) {
        ssize_t n = read(STDIN_FILENO, v->buf + v->len, v->cap + 1 - v->len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return cli_error("cannot read the value from stdin: %s", strerror(errno));
        if (n == 0) break;
        v->len += (size_t)n;
        if (v->len > v->cap) return too_long();
        if (one_line && v->buf[v->len - 1] == '\n') break;
    }
    return 0;
}

static void strip_newline(struct secret_value *v)
{
    if (v->len > 0 && v->buf[v->len - 1] == '\n') {
        v->len--;
        if (v->len > 0 && v->buf[v->len - 1] == '\r') v->len--;
    }
}

/* ---- the terminal: echo off while the value is typed, back on whatever happens ---- */

static struct termios saved_tty;
static volatile sig_atomic_t echo_is_off;
static const int fatal_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

static void restore_and_die(int sig)
{
    if (echo_is_off) tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_tty);
    (void)!write(STDERR_FILENO, "\n", 1);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Ctrl-C and friends restore the terminal and then act as usual; a stop (Ctrl-Z) waits until
 * the echo is back on, so the shell is never left without echo. */
static void guard_signals(struct sigaction *old, sigset_t *old_mask)
{
    struct sigaction sa = {.sa_handler = restore_and_die};
    sigset_t stops;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < ARRAY_LEN(fatal_signals); i++) {
        sigaction(fatal_signals[i], &sa, &old[i]);
        if (old[i].sa_handler == SIG_IGN) /* e.g. nohup: stays ignored */
            sigaction(fatal_signals[i], &old[i], NULL);
    }
    sigemptyset(&stops);
    sigaddset(&stops, SIGTSTP);
    sigaddset(&stops, SIGTTIN);
    sigaddset(&stops, SIGTTOU);
    sigprocmask(SIG_BLOCK, &stops, old_mask);
}

static void unguard_signals(const struct sigaction *old, const sigset_t *old_mask)
{
    for (size_t i = 0; i < ARRAY_LEN(fatal_signals); i++)
        sigaction(fatal_signals[i], &old[i], NULL);
    sigprocmask(SIG_SETMASK, old_mask, NULL);
}

static int read_from_terminal(const char *name, struct secret_value *v)
{
    struct sigaction old[ARRAY_LEN(fatal_signals)];
    sigset_t old_mask;
    struct termios quiet;
    if (tcgetattr(STDIN_FILENO, &saved_tty) < 0)
        return cli_error("cannot set up the terminal to read the value: %s", strerror(errno));
    quiet = saved_tty;
    quiet.c_lflag &= ~(tcflag_t)(ECHO | ECHOE | ECHOK | ECHONL);
    quiet.c_lflag |= ICANON;
    fprintf(stderr, "value for %s: ", name);
    fflush(stderr);
    guard_signals(old, &old_mask);
    echo_is_off = 1;
    int r = tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet) < 0
                ? cli_error("cannot turn the terminal's echo off: %s", strerror(errno))
                : read_into(v, true);
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_tty);
    echo_is_off = 0;
    fputc('\n', stderr); /* the Enter typed was not echoed */
    unguard_signals(old, &old_mask);
    return r;
}

/* ---- checks the daemon would make too, so that nothing doomed is sent ---- */

/* Length of the UTF-8 sequence at s (at most n bytes), 0 when it is not valid UTF-8. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    size_t len;
    uint32_t cp;
    if (s[0] < 0x80) return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        len = 2, cp = s[0] & 0x1f;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        len = 3, cp = s[0] & 0x0f;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        len = 4, cp = s[0] & 0x07;
    else
        return 0;
    if (len > n) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    bool overlong = (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
    if (overlong || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return len;
}

static int check_value(const struct secret_value *v, const char *from)
{
    const unsigned char *s = (const unsigned char *)v->buf;
    if (v->len == 0)
        return cli_error("the value from %s is empty; give the API key on stdin (printf '%%s' "
                         "\"$KEY\" | runtime secret set ...) or with --from-env VAR",
                         from);
    if (memchr(s, '\0', v->len) || memchr(s, '\r', v->len) || memchr(s, '\n', v->len))
        return cli_error("the value from %s has a NUL, CR or LF byte%s; a secret goes into "
                         "HTTP headers, so it is one line",
                         from,
                         strcmp(from, "stdin") == 0 ? " (one trailing newline is removed)" : "");
    for (size_t i = 0, n; i < v->len; i += n)
        if (!(n = utf8_seq(s + i, v->len - i)))
            return cli_error("the value from %s is not UTF-8 text", from);
    return 0;
}

static int read_from_env(const char *env, struct secret_value *v)
{
    const char *s = getenv(env);
    if (!s || !*s)
        return cli_error("environment variable %s is %s; set it to the value, or leave out "
                         "--from-env to give the value on stdin",
                         env, s ? "empty" : "not set");
    size_t n = strlen(s);
    if (n > v->cap) return too_long();
    memcpy(v->buf, s, n);
    v->len = n;
    return 0;
}

int secret_value_read(const char *name, const char *env, struct secret_value *v)
{
    *v = (struct secret_value){0};
    int r = value_alloc(v);
    if (r == 0 && env)
        r = read_from_env(env, v);
    else if (r == 0 && isatty(STDIN_FILENO))
        r = read_from_terminal(name, v);
    else if (r == 0)
        r = read_into(v, false);
    if (r == 0 && !env) strip_newline(v);
    if (r == 0) r = check_value(v, env ? env : "stdin");
    if (r) secret_value_wipe(v);
    return r;
}
