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

int proto_file_entry_put(void *buf, size_t size, const struct proto_file_info *e)
{
    size_t path_len = strnlen(e->path, sizeof e->path);
    size_t target_len = strnlen(e->target, sizeof e->target);
    if (path_len > PROTO_FILE_TEXT_MAX || target_len > PROTO_FILE_TEXT_MAX) return -ENAMETOOLONG;
    if (e->type > PROTO_FILE_OTHER || e->mode > 07777 || e->mtime_ns >= 1000000000u ||
        (target_len && e->type != PROTO_FILE_LNK))
        return -EINVAL;
    struct proto_file_entry h = {
        .size = (uint32_t)(sizeof h + path_len + target_len),
        .path_len = (uint16_t)path_len,
        .target_len = (uint16_t)target_len,
        .type = e->type,
        .mode = e->mode,
        .uid = e->uid,
        .gid = e->gid,
        .bytes = e->bytes,
        .mtime_s = e->mtime_s,
        .mtime_ns = e->mtime_ns,
    };
    if (h.size > size) return -ENOSPC;
    char *out = buf;
    memcpy(out, &h, sizeof h);
    memcpy(out + sizeof h, e->path, path_len);
    memcpy(out + sizeof h + path_len, e->target, target_len);
    return (int)h.size;
}

/* A LIST path is relative and each of its steps names an entry: nothing empty, "."
 * or "..", so that joined to the listed directory it stays under it. */
static bool relative_steps(const char *p, size_t n)
{
    if (n == 0) return true; /* STAT's record */
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && p[i] != '/') continue;
        size_t len = i - start;
        if (len == 0 || (len == 1 && p[start] == '.') ||
            (len == 2 && p[start] == '.' && p[start + 1] == '.'))
            return false;
        start = i + 1;
    }
    return true;
}

int proto_file_entry_get(const void *buf, size_t len, size_t *off, struct proto_file_info *out)
{
    if (*off == len) return 0;
    struct proto_file_entry h;
    if (*off > len || len - *off < sizeof h) return -EPROTO;
    const char *rec = (const char *)buf + *off;
    memcpy(&h, rec, sizeof h);
    if (h.path_len > PROTO_FILE_TEXT_MAX || h.target_len > PROTO_FILE_TEXT_MAX ||
        h.size != sizeof h + h.path_len + h.target_len || h.size > len - *off)
        return -EPROTO;
    if (h.type > PROTO_FILE_OTHER || h.mode > 07777 || h.mtime_ns >= 1000000000u || h.zero ||
        (h.target_len && h.type != PROTO_FILE_LNK))
        return -EPROTO;
    const char *path = rec + sizeof h, *target = path + h.path_len;
    if (memchr(path, '\0', h.path_len) || memchr(target, '\0', h.target_len) ||
        !relative_steps(path, h.path_len))
        return -EPROTO;
    *out = (struct proto_file_info){.type = h.type,
                                    .mode = h.mode,
                                    .uid = h.uid,
                                    .gid = h.gid,
                                    .bytes = h.bytes,
                                    .mtime_s = h.mtime_s,
                                    .mtime_ns = h.mtime_ns};
    memcpy(out->path, path, h.path_len);
    out->path[h.path_len] = '\0';
    memcpy(out->target, target, h.target_len);
    out->target[h.target_len] = '\0';
    *off += h.size;
    return 1;
}
