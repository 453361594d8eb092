/* The records of a FILE_OP's STAT or LIST answer come from a helper that runs as the
 * sandbox's user: proto_file_entry_get must refuse every record that is cut short or
 * does not add up, and never read past the buffer (ASan watches the second run). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto.h"
#include "unit.h"

static struct proto_file_info info(uint32_t type, const char *path, const char *target)
{
    struct proto_file_info e = {.type = type,
                                .mode = 0644,
                                .uid = 1000,
                                .gid = 1000,
                                .bytes = 3,
                                .mtime_s = 1700000000,
                                .mtime_ns = 5};
    snprintf(e.path, sizeof e.path, "%s", path);
    snprintf(e.target, sizeof e.target, "%s", target);
    return e;
}

/* A buffer of exactly len bytes on the heap, so that a read past it is caught. */
static char *exact(const void *bytes, size_t len)
{
    char *b = malloc(len ? len : 1);
    memcpy(b, bytes, len);
    return b;
}

TEST(proto_file_entries_round_trip)
{
    static struct proto_file_info in[3], out;
    in[0] = info(PROTO_FILE_DIR, "a", "");
    in[1] = info(PROTO_FILE_REG, "a/b.txt", "");
    in[2] = info(PROTO_FILE_LNK, "link", "../etc/passwd");
    char buf[1024];
    size_t len = 0;
    for (int i = 0; i < 3; i++) {
        int n = proto_file_entry_put(buf + len, sizeof buf - len, &in[i]);
        CHECK(n ==
              (int)(sizeof(struct proto_file_entry) + strlen(in[i].path) + strlen(in[i].target)));
        len += (size_t)n;
    }
    char *b = exact(buf, len);
    size_t off = 0;
    for (int i = 0; i < 3; i++) {
        CHECK(proto_file_entry_get(b, len, &off, &out) == 1);
        CHECK_STR(out.path, in[i].path);
        CHECK_STR(out.target, in[i].target);
        CHECK(out.type == in[i].type && out.mode == 0644 && out.uid == 1000 && out.bytes == 3 &&
              out.mtime_s == 1700000000 && out.mtime_ns == 5);
    }
    CHECK(proto_file_entry_get(b, len, &off, &out) == 0);
    CHECK(off == len);
    free(b);
}

TEST(proto_file_entry_put_refuses_what_get_would)
{
    static struct proto_file_info e;
    char buf[64];
    e = info(PROTO_FILE_REG, "x", "not a link");
    CHECK(proto_file_entry_put(buf, sizeof buf, &e) == -EINVAL);
    e = info(PROTO_FILE_OTHER + 1, "x", "");
    CHECK(proto_file_entry_put(buf, sizeof buf, &e) == -EINVAL);
    e = info(PROTO_FILE_REG, "x", "");
    e.mode = 010000;
    CHECK(proto_file_entry_put(buf, sizeof buf, &e) == -EINVAL);
    e = info(PROTO_FILE_REG, "a-name-longer-than-the-room-left-in-this-buffer", "");
    CHECK(proto_file_entry_put(buf, sizeof buf, &e) == -ENOSPC);
}

/* Every cut of a valid record is refused, none is read as a record. */
TEST(proto_file_entry_truncated)
{
    static struct proto_file_info e, out;
    e = info(PROTO_FILE_LNK, "dir/link", "/target");
    char buf[256];
    int n = proto_file_entry_put(buf, sizeof buf, &e);
    CHECK(n > 0);
    for (int cut = 1; cut < n; cut++) {
        char *b = exact(buf, (size_t)cut);
        size_t off = 0;
        CHECK(proto_file_entry_get(b, (size_t)cut, &off, &out) == -EPROTO);
        CHECK(off == 0);
        free(b);
    }
}

/* A record whose header is changed one field at a time. */
static int get_changed(void (*change)(struct proto_file_entry *h, char *texts), const char *path,
                       const char *target)
{
    static struct proto_file_info e, out;
    e = info(*target ? PROTO_FILE_LNK : PROTO_FILE_REG, path, target);
    char buf[256];
    int n = proto_file_entry_put(buf, sizeof buf, &e);
    struct proto_file_entry h;
    memcpy(&h, buf, sizeof h);
    change(&h, buf + sizeof h);
    memcpy(buf, &h, sizeof h);
    char *b = exact(buf, (size_t)n);
    size_t off = 0;
    int r = proto_file_entry_get(b, (size_t)n, &off, &out);
    free(b);
    return r;
}

static void size_larger(struct proto_file_entry *h, char *t)
{
    h->size += 1;
}
static void size_huge(struct proto_file_entry *h, char *t)
{
    h->size = UINT32_MAX;
}
static void path_len_larger(struct proto_file_entry *h, char *t)
{
    h->path_len += 1;
}
static void path_len_over_max(struct proto_file_entry *h, char *t)
{
    h->path_len = PROTO_FILE_TEXT_MAX + 1;
    h->size = (uint32_t)(sizeof *h + h->path_len + h->target_len);
}
static void target_on_a_file(struct proto_file_entry *h, char *t)
{
    h->type = PROTO_FILE_REG;
}
static void bad_type(struct proto_file_entry *h, char *t)
{
    h->type = 7;
}
static void bad_mode(struct proto_file_entry *h, char *t)
{
    h->mode = 0170000;
}
static void bad_ns(struct proto_file_entry *h, char *t)
{
    h->mtime_ns = 1000000000u;
}
static void not_zero(struct proto_file_entry *h, char *t)
{
    h->zero = 1;
}
static void nul_in_path(struct proto_file_entry *h, char *t)
{
    t[1] = '\0';
}
static void nul_in_target(struct proto_file_entry *h, char *t)
{
    t[h->path_len] = '\0';
}
static void nothing(struct proto_file_entry *h, char *t) {}

TEST(proto_file_entry_malformed)
{
    CHECK(get_changed(nothing, "a/b", "/t") == 1);
    CHECK(get_changed(size_larger, "a/b", "/t") == -EPROTO);
    CHECK(get_changed(size_huge, "a/b", "/t") == -EPROTO);
    CHECK(get_changed(path_len_larger, "a/b", "/t") == -EPROTO);
    CHECK(get_changed(path_len_over_max, "a/b", "/t") == -EPROTO);
    CHECK(get_changed(target_on_a_file, "a/b", "/t") == -EPROTO);
    CHECK(get_changed(bad_type, "a/b", "") == -EPROTO);
    CHECK(get_changed(bad_mode, "a/b", "") == -EPROTO);
    CHECK(get_changed(bad_ns, "a/b", "") == -EPROTO);
    CHECK(get_changed(not_zero, "a/b", "") == -EPROTO);
    CHECK(get_changed(nul_in_path, "a/b", "/t") == -EPROTO);
    CHECK(get_changed(nul_in_target, "a/b", "/t") == -EPROTO);
}

/* A LIST path is joined to the listed directory: it must stay below it. */
TEST(proto_file_entry_paths_stay_below)
{
    static const char *const bad[] = {"/etc", "..", "a/../..", "a//b", "a/", "./a", "a/."};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(get_changed(nothing, bad[i], "") == -EPROTO);
    static const char *const good[] = {"", "a", "a/b", "..a", "a..", ".hidden/x"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        CHECK(get_changed(nothing, good[i], "") == 1);
}

/* An offset past the end, and a buffer too short for a header. */
TEST(proto_file_entry_bad_offsets)
{
    static struct proto_file_info out;
    char buf[8] = {0};
    size_t off = 9;
    CHECK(proto_file_entry_get(buf, sizeof buf, &off, &out) == -EPROTO);
    off = 0;
    CHECK(proto_file_entry_get(buf, sizeof buf, &off, &out) == -EPROTO);
    off = 8;
    CHECK(proto_file_entry_get(buf, sizeof buf, &off, &out) == 0);
}
