#include "proto.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int proto_send(int sock, uint16_t type, uint32_t id, const void *payload, size_t len,
               const int *fds, unsigned nfds)
{
    if (len > PROTO_MAX_MSG - sizeof(struct proto_hdr) || nfds > PROTO_MAX_FDS) return -EMSGSIZE;
    struct proto_hdr hdr = {
        .type = type, .version = PROTO_VERSION, .len = (uint32_t)len, .id = id, .nfds = nfds};
    struct iovec iov[2] = {{&hdr, sizeof hdr}, {(void *)payload, len}};
    union {
        char buf[CMSG_SPACE(sizeof(int) * PROTO_MAX_FDS)];
        struct cmsghdr align;
    } ctl;
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = len ? 2 : 1};
    if (nfds > 0) {
        memset(&ctl, 0, sizeof ctl);
        msg.msg_control = ctl.buf;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
    }
    for (;;) {
        ssize_t w = sendmsg(sock, &msg, MSG_NOSIGNAL);
        if (w >= 0) return w == (ssize_t)(sizeof hdr + len) ? 0 : -EPROTO;
        if (errno != EINTR) return -errno;
    }
}

static void close_all(int *fds, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        if (fds[i] >= 0) close(fds[i]);
        fds[i] = -1;
    }
}

/* Takes the descriptors out of the control message; returns how many, or -EPROTO. */
static int take_fds(struct msghdr *msg, int *fds, unsigned maxfds)
{
    unsigned got = 0;
    int bad = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        int *in = (int *)CMSG_DATA(c);
        for (size_t i = 0; i < n; i++) {
            if (got < maxfds)
                fds[got++] = in[i];
            else {
                close(in[i]);
                bad = 1;
            }
        }
    }
    if (bad || (msg->msg_flags & MSG_CTRUNC)) {
        close_all(fds, got);
        return -EPROTO;
    }
    return (int)got;
}

int proto_recv(int sock, struct proto_hdr *hdr, void *buf, size_t size, int *fds, unsigned maxfds)
{
    struct iovec iov[2] = {{hdr, sizeof *hdr}, {buf, size}};
    union {
        char b[CMSG_SPACE(sizeof(int) * PROTO_MAX_FDS)];
        struct cmsghdr align;
    } ctl;
    struct msghdr msg = {
        .msg_iov = iov, .msg_iovlen = 2, .msg_control = ctl.b, .msg_controllen = sizeof ctl.b};
    ssize_t r;
    do
        r = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    while (r < 0 && errno == EINTR);
    if (r < 0) return -errno;
    if (maxfds > PROTO_MAX_FDS) maxfds = PROTO_MAX_FDS;
    int nfds = take_fds(&msg, fds, maxfds); /* first: installed descriptors must not leak */
    if (nfds < 0) return nfds;
    if (r == 0) {
        close_all(fds, (unsigned)nfds);
        return -ECONNRESET;
    }
    if ((msg.msg_flags & MSG_TRUNC) || (size_t)r < sizeof *hdr || hdr->version != PROTO_VERSION ||
        hdr->len != (size_t)r - sizeof *hdr || hdr->nfds != (uint32_t)nfds || hdr->type == 0 ||
        hdr->type >= PROTO_TYPE_END) {
        close_all(fds, (unsigned)nfds);
        return -EPROTO;
    }
    return (int)hdr->len;
}

int proto_check_id(const char *id)
{
    size_t n = strnlen(id, PROTO_ID_LEN);
    if (n == 0 || n == PROTO_ID_LEN) return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        char c = id[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return -EINVAL;
    }
    return 0;
}

int proto_split_strings(const char *buf, size_t len, unsigned n, const char **out)
{
    size_t off = 0;
    for (unsigned i = 0; i < n; i++) {
        if (off >= len) return -EPROTO;
        const char *end = memchr(buf + off, '\0', len - off);
        if (!end) return -EPROTO;
        out[i] = buf + off;
        off = (size_t)(end - buf) + 1;
    }
    return off == len ? 0 : -EPROTO;
}

#define PROTO_ROW_(T, nm, type, str, n, nd)                                                        \
    [PROTO_##T] = {.name = #nm, .payload = sizeof(type), .strings = str, .fds = n, .needs = nd},
static const struct proto_request_info requests[PROTO_TYPE_END] = {PROTO_REQUESTS(PROTO_ROW_)};
#undef PROTO_ROW_

const struct proto_request_info *proto_request(uint16_t type)
{
    return type < PROTO_TYPE_END && requests[type].name ? &requests[type] : NULL;
}

const char *proto_type_name(uint16_t type)
{
    if (type == PROTO_RESULT) return "result";
    const struct proto_request_info *info = proto_request(type);
    return info ? info->name : "unknown";
}
