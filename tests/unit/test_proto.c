/* The keeper trusts nothing from the server: these check that malformed records,
 * stray descriptors and unterminated strings are refused. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto/proto.h"
#include "unit.h"

static void pair(int sp[2])
{
    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp);
}

TEST(proto_roundtrip_with_fd)
{
    int sp[2];
    pair(sp);
    struct proto_ref ref = {.id = "abc", .flag = 1};
    int devnull = open("/dev/null", O_RDONLY);
    CHECK(proto_send(sp[0], PROTO_FREEZE, 7, &ref, sizeof ref, &devnull, 1) == 0);
    struct proto_hdr hdr;
    char buf[PROTO_MAX_MSG];
    int fds[1] = {-1};
    int n = proto_recv(sp[1], &hdr, buf, sizeof buf, fds, 1);
    CHECK(n == (int)sizeof ref);
    CHECK(hdr.type == PROTO_FREEZE && hdr.id == 7 && hdr.nfds == 1);
    CHECK(fds[0] >= 0);
    close(fds[0]);
    close(devnull);
    close(sp[0]);
    close(sp[1]);
}

TEST(proto_refuses_unwanted_fds)
{
    int sp[2];
    pair(sp);
    int devnull = open("/dev/null", O_RDONLY);
    struct proto_hello h = {PROTO_VERSION};
    proto_send(sp[0], PROTO_HELLO, 1, &h, sizeof h, &devnull, 1);
    struct proto_hdr hdr;
    char buf[PROTO_MAX_MSG];
    int fds[1];
    CHECK(proto_recv(sp[1], &hdr, buf, sizeof buf, fds, 0) == -EPROTO);
    close(devnull);
    close(sp[0]);
    close(sp[1]);
}

TEST(proto_refuses_bad_header)
{
    int sp[2];
    pair(sp);
    struct proto_hdr bad = {.type = 999, .version = PROTO_VERSION, .len = 0};
    send(sp[0], &bad, sizeof bad, 0);
    struct proto_hdr wrong_len = {.type = PROTO_HELLO, .version = PROTO_VERSION, .len = 100};
    send(sp[0], &wrong_len, sizeof wrong_len, 0);
    send(sp[0], "x", 1, 0); /* shorter than a header */
    struct proto_hdr hdr;
    char buf[PROTO_MAX_MSG];
    int fds[1];
    for (int i = 0; i < 3; i++)
        CHECK(proto_recv(sp[1], &hdr, buf, sizeof buf, fds, 1) == -EPROTO);
    close(sp[0]);
    CHECK(proto_recv(sp[1], &hdr, buf, sizeof buf, fds, 1) == -ECONNRESET);
    close(sp[1]);
}

TEST(proto_ids)
{
    CHECK(proto_check_id("abc-123") == 0);
    CHECK(proto_check_id("") < 0);
    CHECK(proto_check_id("../etc") < 0);
    CHECK(proto_check_id("ABC") < 0);
    char longid[PROTO_ID_LEN];
    memset(longid, 'a', sizeof longid); /* not terminated within the field */
    CHECK(proto_check_id(longid) < 0);
}

TEST(proto_split_strings_exact)
{
    const char *out[3];
    CHECK(proto_split_strings("a\0bc\0", 5, 2, out) == 0);
    CHECK_STR(out[0], "a");
    CHECK_STR(out[1], "bc");
    CHECK(proto_split_strings("a\0bc", 4, 2, out) < 0);     /* unterminated */
    CHECK(proto_split_strings("a\0b\0c\0", 6, 2, out) < 0); /* trailing bytes */
    CHECK(proto_split_strings("a\0", 2, 2, out) < 0);       /* too few */
}

/* Leaf signing is the signer's (mitm/signer.c): the root keeper must not take
 * a request that would make it parse a key or a certificate from the server. */
TEST(proto_keeper_table_has_no_signing)
{
    for (uint16_t t = 0; t < PROTO_TYPE_END; t++) {
        const struct proto_request_info *info = proto_request(t);
        CHECK(!info || strstr(info->name, "sign") == NULL);
    }
    CHECK(proto_request(PROTO_RESULT) == NULL);
}
