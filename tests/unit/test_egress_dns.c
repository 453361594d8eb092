/* The DNS stub waits for a new name's write: no answer for it (or for the same
 * name asked again meanwhile) leaves before on_name's caller says it is saved;
 * a name already saved is answered at once; a sandbox removed with an answer
 * waiting drops it, and the late callback only frees. Over loopback UDP. */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "egress/egress.h"
#include "unit.h"

struct name_hook {
    int calls;
    char name[64];
    egress_saved_fn *saved;
    void *saved_arg;
};

static void on_name(void *arg, const char *sandbox_id, uint32_t slot, uint64_t seq,
                    const char *name, egress_saved_fn *saved, void *saved_arg)
{
    struct name_hook *h = arg;
    h->calls++;
    snprintf(h->name, sizeof h->name, "%s", name);
    h->saved = saved;
    h->saved_arg = saved_arg;
}

static int udp_bound(struct sockaddr_in *addr)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0)
        return -1;
    if (addr) *addr = a;
    return fd;
}

static int tcp_listener(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 4) < 0) return -1;
    return fd;
}

/* An A query for name (id in its first two bytes). */
static size_t query(uint8_t *buf, uint16_t id, const char *name)
{
    size_t n = 0;
    uint8_t head[12] = {(uint8_t)(id >> 8), (uint8_t)id, 1, 0, 0, 1};
    memcpy(buf, head, sizeof head);
    n = sizeof head;
    for (const char *label = name; *label;) {
        const char *dot = strchr(label, '.');
        size_t len = dot ? (size_t)(dot - label) : strlen(label);
        buf[n++] = (uint8_t)len;
        memcpy(buf + n, label, len);
        n += len;
        label += len + (dot ? 1 : 0);
    }
    buf[n++] = 0;
    uint8_t tail[4] = {0, 1, 0, 1}; /* A, IN */
    memcpy(buf + n, tail, sizeof tail);
    return n + sizeof tail;
}

/* Turns the loop until nothing is ready, then reads the ids of what the client got. */
static int answers(struct event_base *base, int client, uint16_t *ids, int max)
{
    for (int i = 0; i < 5; i++)
        event_base_loop(base, EVLOOP_NONBLOCK);
    int n = 0;
    struct pollfd p = {.fd = client, .events = POLLIN};
    while (n < max && poll(&p, 1, 50) == 1) {
        uint8_t buf[512];
        ssize_t got = recv(client, buf, sizeof buf, 0);
        if (got < 2) break;
        ids[n++] = (uint16_t)(buf[0] << 8 | buf[1]);
    }
    return n;
}

static void ask(struct event_base *base, int client, const struct sockaddr_in *stub, uint16_t id,
                const char *name)
{
    uint8_t buf[512];
    size_t n = query(buf, id, name);
    sendto(client, buf, n, 0, (const struct sockaddr *)stub, sizeof *stub);
    for (int i = 0; i < 5; i++)
        event_base_loop(base, EVLOOP_NONBLOCK);
}

TEST(egress_dns_answer_of_a_new_name_waits_for_its_write)
{
    struct event_base *base = event_base_new();
    struct name_hook hook = {0};
    struct egress_config cfg = {
        .nameserver = "127.0.0.1:9", .on_name = on_name, .event_arg = &hook};
    struct egress *eg = NULL;
    err_t err = {0};
    CHECK(egress_new(base, &cfg, &eg, &err) == 0);
    struct sockaddr_in stub;
    int fds[3] = {tcp_listener(), udp_bound(&stub), tcp_listener()};
    int client = udp_bound(NULL);
    CHECK(fds[0] >= 0 && fds[1] >= 0 && fds[2] >= 0 && client >= 0);
    const char *allow[] = {"a.example", "b.example"};
    struct policy pol;
    CHECK(policy_build(true, true, allow, 2, &pol, &err) == 0);
    struct egress_sandbox *es = NULL;
    CHECK(egress_sandbox_add(eg, "sb1", fds, &pol, &es, &err) == 0);
    uint16_t ids[8];

    ask(base, client, &stub, 1, "a.example");
    CHECK(hook.calls == 1);
    CHECK_STR(hook.name, "a.example");
    ask(base, client, &stub, 2, "a.example"); /* the same name, its write still going */
    CHECK(hook.calls == 1);
    CHECK(answers(base, client, ids, 8) == 0); /* nothing before the write */
    hook.saved(0, NULL, hook.saved_arg);
    int n = answers(base, client, ids, 8);
    CHECK(n == 2);
    CHECK(n == 2 && ((ids[0] == 1 && ids[1] == 2) || (ids[0] == 2 && ids[1] == 1)));
    ask(base, client, &stub, 3, "a.example"); /* saved: answered at once */
    CHECK(answers(base, client, ids, 8) == 1 && ids[0] == 3);
    CHECK(hook.calls == 1);

    /* A write that failed: answered anyway (and logged). */
    ask(base, client, &stub, 4, "b.example");
    CHECK(hook.calls == 2);
    CHECK(answers(base, client, ids, 8) == 0);
    err_t failed = {0};
    err_set(&failed, -EIO, "disk I/O error");
    hook.saved(-EIO, &failed, hook.saved_arg);
    CHECK(answers(base, client, ids, 8) == 1 && ids[0] == 4);

    /* Removed while a write is going: the answer is dropped, the callback frees. */
    const char *allow2[] = {"c.example"};
    CHECK(policy_build(true, true, allow2, 1, &pol, &err) == 0);
    egress_sandbox_set_policy(es, &pol);
    ask(base, client, &stub, 5, "c.example");
    CHECK(hook.calls == 3);
    egress_sandbox_remove(es);
    hook.saved(0, NULL, hook.saved_arg);
    CHECK(answers(base, client, ids, 8) == 0);

    close(client);
    egress_free(eg);
    event_base_free(base);
}
