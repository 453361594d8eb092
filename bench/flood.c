/* flood: bench/neighbour.sh's unauthenticated flood of a daemon's API port (issue 23),
 * the same one as `neighbour.mjs api-flood` made by a generator that costs the machine
 * next to nothing. On a real host the flood's generator is somebody else's machine; here
 * it shares the victim's two CPUs, and Node's took about a fifth of one making 2000
 * connections a second: a cost of the benchmark, not of the daemon. What is left is the
 * kernel's handshakes and teardowns, which a flood from elsewhere costs too.
 *
 *   cc -O2 -o flood bench/flood.c
 *   flood --port P [--host 127.0.0.1] [--conns 5000] [--rate 2000] [--slow 10]
 *         [--bulk BYTES (16 MiB)] [--length BYTES (60 MiB)] [--gap S (3)] [--paths P,P]
 *         [--idle-from 127.0.0.2] [--slow-from 127.0.0.3] [--seconds S (90)] [--stop FILE]
 *
 * --conns idle TCP connections (nothing sent), opened --rate a second (a token bucket of a
 * tenth of a second's burst) and held, each reopened when the daemon ends it (a refused
 * one after 20 ms); and --slow connections that send a request head with no credentials
 * and Content-Length --length, then --bulk bytes of spaces at once, then a space every
 * --gap s (never the last byte), to the --paths in turn, each reopened 1 s after the
 * daemon ends it. From their own source addresses, so that a per-client limit can tell
 * them from the victim. Ends at --seconds, or once the --stop file exists (checked every
 * 50 ms), and prints one JSON object of counts, named as api-flood's: attempts,
 * held_connected, held_not_connected, held_end_WHY, slow_connected, slow_bulk_bytes,
 * slow_bulk_done, slow_trickle_bytes, slow_answer_STATUS, slow_end_WHY (WHY: closed,
 * held at the end, or the errno's name). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define TICK_MS 10
#define MAX_COUNTS 64
#define MAX_PATHS 8

/* ---- counts, printed as JSON at the end ---- */

static struct {
    char name[48];
    uint64_t n;
} counts[MAX_COUNTS];
static int n_counts;

static void count(const char *name, uint64_t n)
{
    for (int i = 0; i < n_counts; i++)
        if (strcmp(counts[i].name, name) == 0) {
            counts[i].n += n;
            return;
        }
    if (n_counts == MAX_COUNTS) return;
    snprintf(counts[n_counts].name, sizeof counts[n_counts].name, "%s", name);
    counts[n_counts++].n = n;
}

static void count_end(const char *kind, const char *why)
{
    char name[48];
    snprintf(name, sizeof name, "%s_end_%s", kind, why);
    count(name, 1);
}

/* The errno's name as Node's e.code would say it, for the few a flood meets. */
static const char *errno_name(int e)
{
    switch (e) {
    case ECONNRESET:
        return "ECONNRESET";
    case ECONNREFUSED:
        return "ECONNREFUSED";
    case EPIPE:
        return "EPIPE";
    case ETIMEDOUT:
        return "ETIMEDOUT";
    case EADDRNOTAVAIL:
        return "EADDRNOTAVAIL";
    case EMFILE:
        return "EMFILE";
    default:
        return "error";
    }
}

/* ---- options ---- */

static struct {
    const char *host, *idle_from, *slow_from, *stop;
    int port, conns, slow;
    double rate, gap, seconds;
    uint64_t bulk, length;
    const char *paths[MAX_PATHS];
    int n_paths;
} o = {.host = "127.0.0.1",
       .idle_from = "127.0.0.2",
       .slow_from = "127.0.0.3",
       .conns = 5000,
       .slow = 10,
       .rate = 2000,
       .gap = 3,
       .seconds = 90,
       .bulk = 16u << 20,
       .length = 60u << 20,
       .paths = {"/v1/sandboxes"},
       .n_paths = 1};

static void usage(const char *why)
{
    fprintf(stderr,
            "flood: %s\nusage: flood --port P [--host A] [--conns N] [--rate R] [--slow K] "
            "[--bulk B] [--length B] [--gap S] [--paths P,P] [--idle-from A] [--slow-from A] "
            "[--seconds S] [--stop FILE]\n",
            why);
    exit(2);
}

static void split_paths(char *list)
{
    o.n_paths = 0;
    for (char *save = NULL, *p = strtok_r(list, ",", &save); p && o.n_paths < MAX_PATHS;
         p = strtok_r(NULL, ",", &save))
        o.paths[o.n_paths++] = p;
    if (o.n_paths == 0) usage("--paths needs at least one path");
}

static void parse(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i];
        if (i + 1 >= argc) usage("every option takes a value");
        char *v = argv[++i];
        if (!strcmp(k, "--port"))
            o.port = atoi(v);
        else if (!strcmp(k, "--host"))
            o.host = v;
        else if (!strcmp(k, "--conns"))
            o.conns = atoi(v);
        else if (!strcmp(k, "--rate"))
            o.rate = atof(v);
        else if (!strcmp(k, "--slow"))
            o.slow = atoi(v);
        else if (!strcmp(k, "--bulk"))
            o.bulk = strtoull(v, NULL, 10);
        else if (!strcmp(k, "--length"))
            o.length = strtoull(v, NULL, 10);
        else if (!strcmp(k, "--gap"))
            o.gap = atof(v);
        else if (!strcmp(k, "--paths"))
            split_paths(v);
        else if (!strcmp(k, "--idle-from"))
            o.idle_from = v;
        else if (!strcmp(k, "--slow-from"))
            o.slow_from = v;
        else if (!strcmp(k, "--seconds"))
            o.seconds = atof(v);
        else if (!strcmp(k, "--stop"))
            o.stop = v;
        else
            usage("unknown option");
    }
    if (o.port <= 0 || o.port > 65535) usage("--port is required (1-65535)");
    if (o.conns < 0 || o.slow < 0 || o.rate <= 0 || o.gap <= 0 || o.length < 2)
        usage("--conns and --slow are counts, --rate and --gap positive, --length at least 2");
}

/* ---- connections ---- */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

enum kind { IDLE, SLOW };

struct conn {
    enum kind kind;
    int fd; /* -1 while waiting to open */
    bool connected;
    double open_at;   /* slow, or a refused idle one: when to open again */
    int path;         /* slow: its path */
    uint64_t unsent;  /* slow: head and bulk bytes not written yet */
    uint64_t room;    /* slow: trickle bytes it may still send (never the last one) */
    double next_byte; /* slow: when the next trickle byte goes */
    bool answered;
    char got[16]; /* slow: the start of the answer, for its status */
    size_t n_got;
};

static int epfd;
static struct conn *conns; /* o.conns idle ones, then o.slow slow ones */
static int *waiting;       /* idle slots waiting for a token, a ring */
static int wait_head, n_waiting;
static struct sockaddr_in target, idle_src, slow_src;
static char heads[MAX_PATHS][512]; /* a slow request's head, for each path */
static size_t head_lens[MAX_PATHS];
static char spaces[65536];
static uint64_t attempts;

static void want_token(int slot)
{
    waiting[(wait_head + n_waiting++) % o.conns] = slot;
}

static void open_conn(struct conn *c, int slot)
{
    c->connected = c->answered = false;
    c->n_got = 0;
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    const struct sockaddr_in *src = c->kind == IDLE ? &idle_src : &slow_src;
    int e = c->fd < 0 ? errno : 0;
    if (!e && bind(c->fd, (const struct sockaddr *)src, sizeof *src) < 0) e = errno;
    if (!e && connect(c->fd, (const struct sockaddr *)&target, sizeof target) < 0 &&
        errno != EINPROGRESS)
        e = errno;
    struct epoll_event ev = {.events = EPOLLOUT | EPOLLIN | EPOLLRDHUP, .data.u32 = (uint32_t)slot};
    if (!e && epoll_ctl(epfd, EPOLL_CTL_ADD, c->fd, &ev) < 0) e = errno;
    if (!e) return;
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    count(c->kind == IDLE ? "held_not_connected" : "slow_not_connected", 1);
    count_end(c->kind == IDLE ? "held" : "slow", errno_name(e));
    c->open_at = now_s() + (c->kind == IDLE ? 0.02 : 1.0);
}

/* The connection ended (why: closed, or an errno's name): an idle one waits for its next
 * token (a refused one 20 ms first), a slow one opens again in 1 s. */
static void end_conn(struct conn *c, int slot, const char *why)
{
    epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
    if (c->kind == IDLE) {
        if (!c->connected) count("held_not_connected", 1);
        count_end("held", why);
        if (c->connected)
            want_token(slot);
        else
            c->open_at = now_s() + 0.02;
    } else {
        count_end("slow", why);
        c->open_at = now_s() + 1.0;
    }
}

/* Writes what a slow connection still has of its head and bulk; the trickle is timed. */
static void write_slow(struct conn *c)
{
    const char *head = heads[c->path];
    uint64_t head_len = head_lens[c->path], bulk = o.bulk < o.length - 1 ? o.bulk : o.length - 1;
    while (c->unsent > 0) {
        uint64_t sent_so_far = head_len + bulk - c->unsent;
        const char *p = sent_so_far < head_len ? head + sent_so_far : spaces;
        size_t n = sent_so_far < head_len ? head_len - sent_so_far : sizeof spaces;
        if (n > c->unsent) n = c->unsent;
        ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) return; /* EAGAIN: the next EPOLLOUT; an error: the next read says */
        c->unsent -= (uint64_t)w;
        if (sent_so_far >= head_len) count("slow_bulk_bytes", (uint64_t)w);
    }
    count("slow_bulk_done", 1);
    c->next_byte = now_s() + o.gap;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.u32 = (uint32_t)(c - conns)};
    epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

static void on_connected(struct conn *c, int slot)
{
    c->connected = true;
    if (c->kind == IDLE) {
        count("held_connected", 1);
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.u32 = (uint32_t)slot};
        epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev);
        return;
    }
    count("slow_connected", 1);
    uint64_t bulk = o.bulk < o.length - 1 ? o.bulk : o.length - 1;
    c->unsent = head_lens[c->path] + bulk;
    c->room = o.length - 1 - bulk;
    write_slow(c);
}

static void on_readable(struct conn *c, int slot)
{
    char buf[4096];
    for (;;) {
        ssize_t n = recv(c->fd, buf, sizeof buf, 0);
        if (n == 0) return end_conn(c, slot, "closed");
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR) return;
            return end_conn(c, slot, errno_name(errno));
        }
        if (c->kind == SLOW && !c->answered) {
            size_t take =
                (size_t)n < sizeof c->got - 1 - c->n_got ? (size_t)n : sizeof c->got - 1 - c->n_got;
            memcpy(c->got + c->n_got, buf, take);
            c->n_got += take;
            c->got[c->n_got] = '\0';
            int status;
            if (c->n_got >= 12 && sscanf(c->got, "HTTP/1.%*1[01] %3d", &status) == 1) {
                char name[48];
                snprintf(name, sizeof name, "slow_answer_%d", status);
                count(name, 1);
                c->answered = true;
            }
        }
    }
}

static void on_event(int slot, uint32_t events)
{
    struct conn *c = &conns[slot];
    if (c->fd < 0) return;
    if (!c->connected) {
        int e = 0;
        socklen_t len = sizeof e;
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &e, &len);
        if (e) return end_conn(c, slot, errno_name(e));
        if (!(events & EPOLLOUT)) return;
        on_connected(c, slot);
        if (c->fd < 0) return;
    } else if (c->kind == SLOW && c->unsent && (events & EPOLLOUT)) {
        write_slow(c);
    }
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) on_readable(c, slot);
}

/* Every tick: tokens for the idle slots waiting, reopening what is due, the trickle. */
static void on_tick(double now, double *tokens, double burst, double elapsed)
{
    *tokens += o.rate * elapsed;
    if (*tokens > burst) *tokens = burst;
    while (n_waiting && *tokens >= 1) {
        int slot = waiting[wait_head];
        wait_head = (wait_head + 1) % o.conns;
        n_waiting--;
        *tokens -= 1;
        attempts++;
        open_conn(&conns[slot], slot);
    }
    for (int i = 0; i < o.conns + o.slow; i++) {
        struct conn *c = &conns[i];
        if (c->fd < 0 && c->open_at > 0 && now >= c->open_at) {
            c->open_at = 0;
            if (c->kind == IDLE)
                want_token(i);
            else
                open_conn(c, i);
        } else if (c->fd >= 0 && c->kind == SLOW && c->connected && !c->unsent && c->room &&
                   now >= c->next_byte) {
            if (send(c->fd, " ", 1, MSG_NOSIGNAL) == 1) {
                count("slow_trickle_bytes", 1);
                c->room--;
            }
            c->next_byte = now + o.gap;
        }
    }
}

static bool stopped(double now, double deadline)
{
    return now >= deadline || (o.stop && access(o.stop, F_OK) == 0);
}

static void set_addr(struct sockaddr_in *sa, const char *ip, int port, const char *what)
{
    *sa = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, ip, &sa->sin_addr) != 1) usage(what);
}

static void setup(void)
{
    set_addr(&target, o.host, o.port, "--host is an IPv4 address");
    set_addr(&idle_src, o.idle_from, 0, "--idle-from is an IPv4 address");
    set_addr(&slow_src, o.slow_from, 0, "--slow-from is an IPv4 address");
    struct rlimit rl = {(rlim_t)o.conns + (rlim_t)o.slow + 64,
                        (rlim_t)o.conns + (rlim_t)o.slow + 64};
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
        perror("flood: setrlimit (the flood may run short of descriptors)");
    memset(spaces, ' ', sizeof spaces);
    for (int i = 0; i < o.n_paths; i++)
        head_lens[i] = (size_t)snprintf(heads[i], sizeof heads[i],
                                        "POST %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: "
                                        "application/json\r\nContent-Length: %llu\r\n\r\n",
                                        o.paths[i], o.host, o.port, (unsigned long long)o.length);
    for (int i = 0; i < o.n_paths; i++)
        if (head_lens[i] >= sizeof heads[i]) usage("a path in --paths is too long");
    epfd = epoll_create1(EPOLL_CLOEXEC);
    conns = calloc((size_t)o.conns + (size_t)o.slow + 1, sizeof *conns);
    waiting = calloc((size_t)o.conns + 1, sizeof *waiting);
    if (epfd < 0 || !conns || !waiting) {
        perror("flood");
        exit(1);
    }
    for (int i = 0; i < o.conns + o.slow; i++) {
        conns[i] = (struct conn){
            .kind = i < o.conns ? IDLE : SLOW, .fd = -1, .path = (i - o.conns) % o.n_paths};
        if (i < o.conns) want_token(i);
    }
}

static void finish(double seconds)
{
    for (int i = 0; i < o.conns + o.slow; i++)
        if (conns[i].fd >= 0 && conns[i].connected)
            count_end(conns[i].kind == IDLE ? "held" : "slow", "held");
    printf("{\"mode\":\"api-flood\",\"seconds\":%.3f,\"attempts\":%llu", seconds,
           (unsigned long long)attempts);
    for (int i = 0; i < n_counts; i++)
        printf(",\"%s\":%llu", counts[i].name, (unsigned long long)counts[i].n);
    printf(",\"conns\":%d,\"slow\":%d,\"bulk\":%llu,\"length\":%llu,\"gap\":%g}\n", o.conns, o.slow,
           (unsigned long long)o.bulk, (unsigned long long)o.length, o.gap);
}

int main(int argc, char **argv)
{
    parse(argc, argv);
    setup();
    double t0 = now_s(), deadline = t0 + o.seconds, last_tick = t0, last_stop_check = 0;
    double burst = o.rate / 10 > 1 ? o.rate / 10 : 1, tokens = burst;
    for (int i = o.conns; i < o.conns + o.slow; i++)
        open_conn(&conns[i], i);
    struct epoll_event evs[256];
    for (;;) {
        int n = epoll_wait(epfd, evs, 256, TICK_MS);
        for (int i = 0; i < n; i++)
            on_event((int)evs[i].data.u32, evs[i].events);
        double now = now_s();
        if (now - last_stop_check >= 0.05) {
            last_stop_check = now;
            if (stopped(now, deadline)) break;
        }
        if (now - last_tick >= TICK_MS / 1000.0) {
            on_tick(now, &tokens, burst, now - last_tick);
            last_tick = now;
        }
    }
    finish(now_s() - t0);
    return 0;
}
