/* bare-listener: bench/neighbour.sh's flood-bare reference. The least any server holding
 * an unauthenticated flood must do, with no daemon behind it: accept every connection,
 * keep at most --per-client of them for each client address (the oldest is closed to make
 * room, as runtimed's listener does), answer a request head with 401 and read no more of
 * that connection. What the flood then costs the victim is the machine's share: the
 * kernel's handshakes and teardowns and the flood's generator, not runtime's.
 *
 *   cc -O2 -o bare-listener bench/bare-listener.c
 *   bare-listener [--per-client N (512)] [--stop FILE]
 *
 * Listens on 127.0.0.1, an ephemeral port, which it prints on the first line of stdout;
 * ends at SIGTERM or once the --stop file exists (checked every 100 ms). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_CLIENTS 16    /* client addresses told apart; the rest share the last slot */
#define MAX_FDS (1 << 16) /* descriptors this program tracks */

struct client {
    in_addr_t addr;
    int *fifo; /* its connections, oldest first (a ring) */
    size_t head, n;
};

static struct client clients[MAX_CLIENTS];
static size_t n_clients, per_client = 512;
static unsigned char *answered; /* by descriptor: 401 sent, no more reading */
static int epfd;
static volatile sig_atomic_t stop;

static void on_term(int sig)
{
    (void)sig;
    stop = 1;
}

static struct client *client_of(in_addr_t addr)
{
    for (size_t i = 0; i < n_clients; i++)
        if (clients[i].addr == addr) return &clients[i];
    struct client *c = &clients[n_clients < MAX_CLIENTS ? n_clients++ : MAX_CLIENTS - 1];
    if (!c->fifo) {
        c->addr = addr;
        c->fifo = calloc(per_client, sizeof *c->fifo);
        if (!c->fifo) exit(1);
    }
    return c;
}

static void drop(int fd)
{
    epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
    close(fd);
}

/* Keeps fd for its client; closes the client's oldest when it holds per_client already.
 * A connection that ended on its own leaves a -1 behind, skipped here. */
static void keep(in_addr_t addr, int fd)
{
    struct client *c = client_of(addr);
    while (c->n == per_client) {
        int old = c->fifo[c->head];
        c->head = (c->head + 1) % per_client;
        c->n--;
        if (old >= 0) drop(old);
    }
    c->fifo[(c->head + c->n++) % per_client] = fd;
}

static void forget(int fd)
{
    for (size_t i = 0; i < n_clients; i++)
        for (size_t k = 0; k < clients[i].n; k++) {
            size_t at = (clients[i].head + k) % per_client;
            if (clients[i].fifo[at] == fd) clients[i].fifo[at] = -1;
        }
}

static void accept_all(int lfd)
{
    for (;;) {
        struct sockaddr_in peer;
        socklen_t len = sizeof peer;
        int fd = accept4(lfd, (struct sockaddr *)&peer, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;
        if (fd >= MAX_FDS) {
            close(fd);
            continue;
        }
        answered[fd] = 0;
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
        epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
        keep(peer.sin_addr.s_addr, fd);
    }
}

/* Reads what came; the first read that holds a head's end gets the 401, and then the
 * connection is no longer read (its peer's bytes stay in the kernel, as runtimed's do). */
static void readable(int fd)
{
    static const char answer[] = "HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n";
    char buf[65536];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) {
        if (n == 0 || errno != EAGAIN) {
            forget(fd);
            drop(fd);
        }
        return;
    }
    if (!answered[fd] && memmem(buf, (size_t)n, "\r\n\r\n", 4)) {
        answered[fd] = 1;
        if (write(fd, answer, sizeof answer - 1) < 0) { /* its end comes as a read */
        }
        epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
    }
}

int main(int argc, char **argv)
{
    const char *stop_file = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--per-client") == 0)
            per_client = strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--stop") == 0)
            stop_file = argv[i + 1];
        else
            break;
    }
    if (argc % 2 == 0 || per_client == 0) {
        fprintf(stderr, "usage: bare-listener [--per-client N] [--stop FILE]\n");
        return 2;
    }
    signal(SIGTERM, on_term);
    signal(SIGPIPE, SIG_IGN);
    answered = calloc(MAX_FDS, 1);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    if (!answered || lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) < 0 ||
        listen(lfd, 4096) < 0 || getsockname(lfd, (struct sockaddr *)&a, &alen) < 0) {
        perror("bare-listener");
        return 1;
    }
    printf("%u\n", ntohs(a.sin_port));
    fflush(stdout);
    epfd = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = lfd};
    epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &ev);
    while (!stop && !(stop_file && access(stop_file, F_OK) == 0)) {
        struct epoll_event got[64];
        int n = epoll_wait(epfd, got, 64, 100);
        for (int i = 0; i < n; i++) {
            if (got[i].data.fd == lfd)
                accept_all(lfd);
            else
                readable(got[i].data.fd);
        }
    }
    return 0;
}
