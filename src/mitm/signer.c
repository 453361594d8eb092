/* The signer: the process that holds the CA key and nothing else (relayd's ca
 * process). It reads fixed-size requests from the server on one socket and
 * answers each with a leaf or an error; what the server sends is untrusted, so
 * every field is checked here before mitm_ca_sign checks the name and key
 * again. Also the server's client of it. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "mitm.h"

#define BODY_MAX (MITM_ANSWER_MAX - sizeof(struct mitm_sign_ans))

/* ---- the signer's side ---- */

static size_t answer(uint8_t *ans, uint32_t id, int status, const void *body, size_t len)
{
    struct mitm_sign_ans h = {.id = id, .status = status, .len = (uint32_t)len};
    memcpy(ans, &h, sizeof h);
    memcpy(ans + sizeof h, body, len);
    return sizeof h + len;
}

/* msg: a literal or an err_t's message, whose 512 bytes fit the body. */
_Static_assert(sizeof(((err_t *)0)->msg) <= BODY_MAX, "a message fits an answer");
static size_t refuse(uint8_t *ans, uint32_t id, int status, const char *msg)
{
    return answer(ans, id, status, msg, strlen(msg));
}

/* The record's own checks: its size, a terminated name, a key length in range.
 * The name and the key themselves are mitm_ca_sign's. */
static const char *malformed(const struct mitm_sign_req *rq, size_t len)
{
    if (len != sizeof *rq) return "a signing request of the wrong size";
    if (!memchr(rq->name, '\0', sizeof rq->name))
        return "a signing request with an unterminated name";
    if (rq->spki_len == 0 || rq->spki_len > sizeof rq->spki)
        return "a signing request with a key length out of range";
    return NULL;
}

size_t mitm_signer_answer(struct mitm_ca *ca, const void *req, size_t len, uint8_t *ans)
{
    struct mitm_sign_req rq;
    uint32_t id = 0;
    if (len >= sizeof id) memcpy(&id, req, sizeof id);
    memset(&rq, 0, sizeof rq);
    memcpy(&rq, req, len < sizeof rq ? len : sizeof rq);
    const char *why = malformed(&rq, len);
    if (why) return refuse(ans, id, -EPROTO, why);
    err_t err = {0};
    uint8_t *der = NULL;
    size_t der_len = 0;
    int r = mitm_ca_sign(ca, rq.spki, rq.spki_len, rq.name, &der, &der_len, &err);
    if (r == 0 && der_len > BODY_MAX)
        r = err_set(&err, -EMSGSIZE, "the leaf certificate is larger than %zu bytes", BODY_MAX);
    size_t n = r < 0 ? refuse(ans, id, r, err.msg) : answer(ans, id, 0, der, der_len);
    free(der);
    return n;
}

int mitm_signer_serve(int sock, struct mitm_ca *ca)
{
    /* One byte more than a request, so that a longer record reads as malformed. */
    uint8_t in[sizeof(struct mitm_sign_req) + 1], out[MITM_ANSWER_MAX];
    for (;;) {
        struct iovec iov = {in, sizeof in};
        /* No control buffer: descriptors the server sends are dropped by the
         * kernel, never installed here. */
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
        ssize_t n = recvmsg(sock, &msg, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -errno;
        if (n == 0) return 0; /* the server hung up (or sent an empty record) */
        size_t len = msg.msg_flags & MSG_TRUNC ? sizeof in : (size_t)n;
        size_t a = mitm_signer_answer(ca, in, len, out);
        ssize_t w;
        do
            w = send(sock, out, a, MSG_NOSIGNAL);
        while (w < 0 && errno == EINTR);
        if (w < 0) return errno == EPIPE ? 0 : -errno;
    }
}

/* ---- the server's side ---- */

static int gone(err_t *err)
{
    return err_set(err, -EPIPE,
                   "the signer process has exited, so TLS interception of new hosts fails "
                   "until runtimed restarts (the daemon's log says why it stopped)");
}

/* Waits for the answer to request id; answers to earlier requests, which timed
 * out, are dropped. */
static int await_answer(int sock, uint32_t id, uint8_t *buf, size_t *got, err_t *err)
{
    uint64_t deadline = now_ms() + MITM_SIGNER_TIMEOUT_MS;
    for (;;) {
        uint64_t now = now_ms();
        struct pollfd p = {.fd = sock, .events = POLLIN};
        int r = now < deadline ? poll(&p, 1, (int)(deadline - now)) : 0;
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return err_set(err, errno, "cannot wait for the signer: %m");
        if (r == 0)
            return err_set(err, -ETIMEDOUT, "the signer did not answer within %d ms",
                           MITM_SIGNER_TIMEOUT_MS);
        ssize_t n = recv(sock, buf, MITM_ANSWER_MAX + 1, MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n == 0 || (n < 0 && errno == ECONNRESET)) return gone(err);
        if (n < 0) return err_set(err, errno, "cannot read the signer's answer: %m");
        struct mitm_sign_ans h;
        if ((size_t)n < sizeof h)
            return err_set(err, -EPROTO, "a malformed answer from the signer");
        memcpy(&h, buf, sizeof h);
        if (h.id != id) continue;
        *got = (size_t)n;
        return 0;
    }
}

static int take_answer(const uint8_t *buf, size_t n, uint8_t **der, size_t *der_len, err_t *err)
{
    struct mitm_sign_ans h;
    memcpy(&h, buf, sizeof h);
    const uint8_t *body = buf + sizeof h;
    if (n > MITM_ANSWER_MAX || h.len != n - sizeof h || h.status > 0 || (h.status == 0 && !h.len))
        return err_set(err, -EPROTO, "a malformed answer from the signer");
    if (h.status < 0) return err_set(err, h.status, "%.*s", (int)h.len, (const char *)body);
    *der = malloc(h.len);
    if (!*der) return err_set(err, -ENOMEM, "out of memory");
    memcpy(*der, body, h.len);
    *der_len = h.len;
    return 0;
}

static int send_request(int sock, const struct mitm_sign_req *rq, err_t *err)
{
    ssize_t w;
    do
        w = send(sock, rq, sizeof *rq, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (w < 0 && errno == EINTR);
    if (w < 0 && (errno == EPIPE || errno == ECONNRESET)) return gone(err);
    if (w < 0 && errno == EAGAIN)
        return err_set(err, -ETIMEDOUT, "the signer is not taking requests (its queue is full)");
    if (w < 0) return err_set(err, errno, "cannot reach the signer: %m");
    return 0;
}

int mitm_signer_sign(int sock, const char *name, const uint8_t *spki, size_t spki_len,
                     uint8_t **der, size_t *der_len, err_t *err)
{
    /* One socket, used from the server's loop only: a counter tells answers apart. */
    static uint32_t last_id;
    struct mitm_sign_req rq = {.id = ++last_id, .spki_len = (uint32_t)spki_len};
    *der = NULL;
    *der_len = 0;
    if (sock < 0) return err_set(err, -ENOTSUP, "interception is not set up");
    if (spki_len == 0 || spki_len > sizeof rq.spki || str_copy(rq.name, sizeof rq.name, name) < 0)
        return err_set(err, -EINVAL, "name or key too long");
    memcpy(rq.spki, spki, spki_len);
    uint8_t buf[MITM_ANSWER_MAX + 1];
    size_t n = 0;
    int r = send_request(sock, &rq, err);
    if (r == 0) r = await_answer(sock, rq.id, buf, &n, err);
    if (r == 0) r = take_answer(buf, n, der, der_len, err);
    return r;
}
