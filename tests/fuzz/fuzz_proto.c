/* Fuzz target: proto_recv, proto_split_strings, proto_check_id and proto_send on
 * arbitrary records. Each is compared with a plain statement of its contract
 * (proto.h), with buffers allocated to their exact size so ASan sees any
 * access past them, and no descriptor may leak.
 *
 * Input:
 *   byte 0  maxfds passed to proto_recv (0-7; it clamps above PROTO_MAX_FDS)
 *   byte 1  bits 0-2: fds of /dev/null attached to the record (0-7)
 *   byte 2  the receive buffer: bits 0-1 pick PROTO_MAX_MSG, sizeof(struct
 *           proto_result), bits 2-7 as a byte count, or 0
 *   byte 3  n for proto_split_strings
 *   byte 4  0x01 fix up version, len and nfds of the header; 0x02 also send the
 *           record's type, id and payload with proto_send and receive them back;
 *           0x04 pad the record past PROTO_MAX_MSG; 0x08 NUL-pad the id for
 *           proto_check_id (otherwise 'a'-padded)
 *   then the record: header + payload.
 * FUZZ_KNOWN (comma list) skips checks of reported, unfixed bugs: proto-empty-fds. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define FUZZ_NAME "fuzz_proto"
#include "fuzz.h"
#include "proto/proto.h"

#define FD_WINDOW 32
#define HDR sizeof(struct proto_hdr)

static int g_devnull = -1;

static bool known(const char *name)
{
    const char *k = getenv("FUZZ_KNOWN");
    return k && strstr(k, name);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    g_devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    return g_devnull < 0;
}

static void pair(int sp[2])
{
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) abort();
}

/* Sends one raw record with nfds copies of /dev/null; false if the kernel refused. */
static bool send_raw(int sock, const uint8_t *rec, size_t n, unsigned nfds)
{
    struct iovec iov = {(void *)rec, n};
    union {
        char b[CMSG_SPACE(sizeof(int) * 8)];
        struct cmsghdr align;
    } ctl;
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (nfds) {
        memset(&ctl, 0, sizeof ctl);
        msg.msg_control = ctl.b;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
        for (unsigned i = 0; i < nfds; i++)
            memcpy(CMSG_DATA(c) + i * sizeof(int), &g_devnull, sizeof(int));
    }
    return sendmsg(sock, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)n;
}

static void check_received_fds(const int *fds, int n)
{
    for (int i = 0; i < n; i++) {
        int fl = fcntl(fds[i], F_GETFD);
        if (fl < 0) fail("received fd %d is not open", fds[i]);
        if (!(fl & FD_CLOEXEC)) fail("received fd %d lacks FD_CLOEXEC", fds[i]);
        close(fds[i]);
    }
}

/* proto_recv on an arbitrary record, against what proto.h says it accepts. */
static void recv_case(const uint8_t *rec, size_t n, unsigned maxfds, unsigned attach,
                      size_t bufsize, unsigned mode)
{
    size_t total = n + (mode & 4 ? PROTO_MAX_MSG : 0);
    if (total == 0 && known("proto-empty-fds")) attach = 0;
    uint8_t *r = calloc(1, total ? total : 1);
    if (!r) abort();
    memcpy(r, rec, n);
    struct proto_hdr want = {0};
    if ((mode & 1) && total >= HDR) {
        memcpy(&want, r, HDR);
        want.version = PROTO_VERSION;
        want.len = (uint32_t)(total - HDR);
        want.nfds = attach;
        memcpy(r, &want, HDR);
    }
    memcpy(&want, r, total < HDR ? total : HDR);
    int sp[2];
    pair(sp);
    if (!send_raw(sp[0], r, total, attach)) goto out;
    unsigned eff = maxfds < PROTO_MAX_FDS ? maxfds : PROTO_MAX_FDS;
    int *fds = malloc(sizeof(int) * (eff ? eff : 1));
    uint8_t *buf = malloc(bufsize ? bufsize : 1);
    struct proto_hdr *hdr = malloc(sizeof *hdr);
    if (!fds || !buf || !hdr) abort();
    int got = proto_recv(sp[1], hdr, buf, bufsize, fds, maxfds);
    bool ok = total >= HDR && total - HDR <= bufsize && want.version == PROTO_VERSION &&
              want.len == total - HDR && want.nfds == attach && attach <= eff && want.type >= 1 &&
              want.type < PROTO_TYPE_END;
    if (total == 0) {
        /* A hangup, unless it carries more descriptors than asked for: malformed. */
        int expect = attach > eff ? -EPROTO : -ECONNRESET;
        if (got != expect) fail("an empty record with %u fds gave %d, not %d", attach, got, expect);
    } else if (!ok) {
        if (got >= 0)
            fail("accepted a bad record (n=%zu type=%u len=%u nfds=%u/%u)", total, want.type,
                 want.len, want.nfds, attach);
        if (got != -EPROTO) fail("a bad record gave %d, not -EPROTO", got);
    } else {
        if (got < 0) fail("refused a good record: %d", got);
        if ((size_t)got != total - HDR || hdr->len != (uint32_t)got || hdr->type != want.type ||
            hdr->id != want.id || hdr->nfds != attach)
            fail("received header differs from the one sent");
        if (memcmp(buf, r + HDR, (size_t)got) != 0) fail("received payload differs");
        check_received_fds(fds, (int)attach);
    }
    free(fds);
    free(buf);
    free(hdr);
out:
    close(sp[0]);
    close(sp[1]);
    free(r);
}

/* What proto_split_strings promises: n strings, each NUL-terminated, ending exactly at len. */
static void split_case(const uint8_t *rec, size_t n, unsigned nstr)
{
    char *b = malloc(n ? n : 1);
    const char **out = malloc(sizeof *out * (nstr ? nstr : 1));
    if (!b || !out) abort();
    memcpy(b, rec, n);
    size_t nuls = 0;
    for (size_t i = 0; i < n; i++)
        nuls += b[i] == '\0';
    bool ok = nstr == 0 ? n == 0 : n > 0 && b[n - 1] == '\0' && nuls == nstr;
    int r = proto_split_strings(b, n, nstr, out);
    if ((r == 0) != ok) fail("proto_split_strings(len=%zu, n=%u) gave %d", n, nstr, r);
    if (r != 0 && r != -EPROTO) fail("proto_split_strings gave %d", r);
    for (unsigned i = 0; r == 0 && i < nstr; i++) {
        const char *expect = i == 0 ? b : out[i - 1] + strlen(out[i - 1]) + 1;
        if (out[i] != expect) fail("string %u of %u starts at the wrong place", i, nstr);
    }
    free(b);
    free(out);
}

static void id_case(const uint8_t *rec, size_t n, bool nul_pad)
{
    char *id = malloc(PROTO_ID_LEN);
    if (!id) abort();
    memset(id, nul_pad ? 0 : 'a', PROTO_ID_LEN);
    memcpy(id, rec, n < PROTO_ID_LEN ? n : PROTO_ID_LEN);
    size_t len = strnlen(id, PROTO_ID_LEN);
    bool ok =
        len > 0 && len < PROTO_ID_LEN && strspn(id, "abcdefghijklmnopqrstuvwxyz0123456789-") == len;
    int r = proto_check_id(id);
    if ((r == 0) != ok) fail("proto_check_id gave %d for a%s id", r, ok ? " good" : " bad");
    free(id);
}

/* proto_send then proto_recv: the record comes back as it was, or is refused as documented. */
static void roundtrip_case(const uint8_t *rec, size_t n, unsigned nfds, bool pad)
{
    struct proto_hdr h = {0};
    memcpy(&h, rec, n < HDR ? n : HDR);
    size_t plen = (n > HDR ? n - HDR : 0) + (pad ? PROTO_MAX_MSG : 0);
    uint8_t *payload = calloc(1, plen ? plen : 1);
    if (!payload) abort();
    if (n > HDR) memcpy(payload, rec + HDR, n - HDR);
    int in[8];
    for (unsigned i = 0; i < 8; i++)
        in[i] = g_devnull;
    int sp[2];
    pair(sp);
    int r = proto_send(sp[0], h.type, h.id, plen ? payload : NULL, plen, nfds ? in : NULL, nfds);
    if (nfds > PROTO_MAX_FDS || plen > PROTO_MAX_MSG - HDR) {
        if (r != -EMSGSIZE) fail("proto_send of %zu bytes, %u fds gave %d", plen, nfds, r);
        goto out;
    }
    if (r != 0) fail("proto_send failed: %d", r);
    struct proto_hdr got;
    uint8_t *buf = malloc(PROTO_MAX_MSG);
    int fds[PROTO_MAX_FDS];
    if (!buf) abort();
    int len = proto_recv(sp[1], &got, buf, PROTO_MAX_MSG, fds, PROTO_MAX_FDS);
    if (h.type == 0 || h.type >= PROTO_TYPE_END) {
        if (len != -EPROTO) fail("a record of type %u came back as %d", h.type, len);
    } else {
        if (len != (int)plen || got.type != h.type || got.id != h.id || got.nfds != nfds ||
            got.version != PROTO_VERSION || memcmp(buf, payload, plen) != 0)
            fail("proto_send/proto_recv round trip changed the record (%d)", len);
        check_received_fds(fds, (int)nfds);
    }
    free(buf);
out:
    close(sp[0]);
    close(sp[1]);
    free(payload);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 5) return 0;
    unsigned maxfds = data[0] & 7, attach = data[1] & 7, nstr = data[3], mode = data[4];
    static const size_t sizes[] = {PROTO_MAX_MSG, sizeof(struct proto_result), 0, 0};
    size_t bufsize = (data[2] & 3) == 2 ? data[2] >> 2 : sizes[data[2] & 3];
    const uint8_t *rec = data + 5;
    size_t n = size - 5;

    int lo = fcntl(g_devnull, F_DUPFD, 0);
    close(lo);
    bool before[FD_WINDOW];
    for (int i = 0; i < FD_WINDOW; i++)
        before[i] = fcntl(lo + i, F_GETFD) >= 0;

    recv_case(rec, n, maxfds, attach, bufsize, mode);
    split_case(rec, n, nstr);
    if (n > HDR) split_case(rec + HDR, n - HDR, nstr);
    id_case(rec, n, mode & 8);
    if (n > HDR) id_case(rec + HDR, n - HDR, mode & 8);
    if (mode & 2) roundtrip_case(rec, n, attach, mode & 4);
    struct proto_hdr h = {0};
    memcpy(&h, rec, n < HDR ? n : HDR);
    if (!proto_type_name(h.type)) fail("proto_type_name(%u) is NULL", h.type);

    for (int i = 0; i < FD_WINDOW; i++)
        if ((fcntl(lo + i, F_GETFD) >= 0) != before[i]) fail("fd %d leaked or closed", lo + i);
    return 0;
}
