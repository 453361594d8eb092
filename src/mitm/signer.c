/* The signer: the process that holds the CA key and nothing else (relayd's ca
 * process). It reads fixed-size requests from the server on one socket and
 * answers each with a leaf or an error; what the server sends is untrusted, so
 * every field is checked here before mitm_ca_sign checks the name and key
 * again. The server's client of it is client.c. */
#include <errno.h>
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
