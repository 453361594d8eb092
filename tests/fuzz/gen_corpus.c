/* Writes the seed corpora of fuzz_keeper and fuzz_proto: well-formed sessions
 * of every request type, plus the near misses the keeper must refuse; and of
 * fuzz_sign: names and keys to sign, good and bad. The formats are described
 * at the top of fuzz_keeper.c, fuzz_proto.c and fuzz_sign.c.
 *
 *   make fuzz && build/fuzz/gen_corpus tests/fuzz/corpus
 *
 * writes tests/fuzz/corpus/{keeper,proto,sign}/seed-*. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "mitm/mitm.h"
#include "proto/proto.h"
#include "sandbox/sandbox.h"

/* fuzz_keeper's header byte and driver ops (enum op there). */
#define K_HELLO 1
#define K_NO_TLS 2 /* the keeper is given no TLS files */
enum {
    OP_CREATE,
    OP_ADOPT,
    OP_DESTROY,
    OP_EXEC,
    OP_OPEN,
    OP_FREEZE,
    OP_STATS,
    OP_SWEEP,
    OP_NET,
    OP_WATCH,
    OP_STOP,
    OP_FILE
};
enum { E_EIO, E_ENOENT, E_EPROTO, E_ENOMEM };
#define R_RAW 4
#define R_PAD 8

struct buf {
    unsigned char b[1 << 17];
    size_t n;
};

static const char *g_dir;

static void put(struct buf *o, const void *p, size_t n)
{
    if (n == 0) return;
    if (o->n + n > sizeof o->b) abort();
    memcpy(o->b + o->n, p, n);
    o->n += n;
}

static void save(const char *sub, const char *name, const struct buf *o)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_dir, sub);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/%s/seed-%s", g_dir, sub, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(o->b, 1, o->n, f) != o->n || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

/* ---- keeper sessions ------------------------------------------------------ */

static struct buf s;

static void session(unsigned flags, unsigned fail_mask, unsigned err)
{
    s.n = 0;
    unsigned char h[4] = {(unsigned char)flags, (unsigned char)(fail_mask & 0xff),
                          (unsigned char)(fail_mask >> 8), (unsigned char)err};
    put(&s, h, 4);
}

static uint32_t g_reqid;

/* One record: rflags, u16 length, then header + payload. */
static void rec_hdr(unsigned rflags, const struct proto_hdr *hdr, const void *payload, size_t len)
{
    size_t total = sizeof *hdr + len;
    unsigned char pre[3] = {(unsigned char)rflags, (unsigned char)(total & 0xff),
                            (unsigned char)(total >> 8)};
    put(&s, pre, 3);
    put(&s, hdr, sizeof *hdr);
    put(&s, payload, len);
}

static void rec(unsigned rflags, uint16_t type, const void *payload, size_t len)
{
    struct proto_hdr hdr = {.type = type,
                            .version = PROTO_VERSION,
                            .len = (uint32_t)len,
                            .id = ++g_reqid,
                            .nfds = rflags & 3};
    rec_hdr(rflags, &hdr, payload, len);
}

static struct proto_sandbox sandbox(const char *id, uint32_t slot)
{
    struct proto_sandbox p = {
        .slot = slot, .memory_mib = 1024, .cpu_milli = 1000, .disk_mib = 2048, .pids_max = 1024};
    snprintf(p.id, sizeof p.id, "%s", id);
    return p;
}

static void create(const char *id, uint32_t slot)
{
    struct proto_sandbox p = sandbox(id, slot);
    rec(0, PROTO_CREATE, &p, sizeof p);
}

static void ref(uint16_t type, const char *id, uint32_t flag)
{
    struct proto_ref r = {.flag = flag};
    snprintf(r.id, sizeof r.id, "%s", id);
    rec(0, type, &r, sizeof r);
}

/* strings: NUL-separated, given as one literal with embedded \0 and its size. */
static void exec(const char *id, const char *cwd, uint32_t argc, uint32_t envc, const char *strs,
                 size_t strs_len)
{
    static unsigned char b[PROTO_MAX_MSG];
    struct proto_exec e = {.timeout_ms = 60000, .argc = argc, .envc = envc};
    snprintf(e.id, sizeof e.id, "%s", id);
    snprintf(e.cwd, sizeof e.cwd, "%s", cwd);
    memcpy(b, &e, sizeof e);
    memcpy(b + sizeof e, strs, strs_len);
    rec(0, PROTO_EXEC, b, sizeof e + strs_len);
}

static void open_file(const char *id, const char *path, uint32_t write)
{
    struct proto_file f = {.write = write};
    snprintf(f.id, sizeof f.id, "%s", id);
    snprintf(f.path, sizeof f.path, "%s", path);
    rec(0, PROTO_OPEN_FILE, &f, sizeof f);
}

static void file_op(const char *id, uint32_t op, const char *path, const char *path2,
                    uint32_t flags, uint32_t mode, uint32_t depth, uint32_t limit)
{
    struct proto_file_op f = {
        .op = op, .flags = flags, .mode = mode, .depth = depth, .limit = limit};
    snprintf(f.id, sizeof f.id, "%s", id);
    snprintf(f.path, sizeof f.path, "%s", path);
    snprintf(f.path2, sizeof f.path2, "%s", path2);
    rec(0, PROTO_FILE_OP, &f, sizeof f);
}

static void sweep(uint32_t count, const char *strs, size_t strs_len)
{
    unsigned char b[256];
    struct proto_sweep h = {.count = count};
    memcpy(b, &h, sizeof h);
    memcpy(b + sizeof h, strs, strs_len);
    rec(0, PROTO_SWEEP, b, sizeof h + strs_len);
}

#define STRS(lit) lit, sizeof(lit) - 1 /* the literal's bytes, embedded NULs included */

static void keeper_corpus(void)
{
    struct proto_hello hello = {PROTO_VERSION};

    session(K_HELLO, 0, 0);
    save("keeper", "hello", &s);

    session(0, 0, 0);
    rec(0, PROTO_HELLO, &hello, sizeof hello);
    rec(0, PROTO_HELLO, &hello, sizeof hello);
    save("keeper", "hello-explicit-twice", &s);

    session(0, 0, 0);
    create("alpha", 1);
    save("keeper", "create-before-hello", &s);

    session(K_HELLO, 0, 0);
    rec(1, PROTO_HELLO, &hello, sizeof hello);
    save("keeper", "fd-attached", &s);

    session(K_HELLO, 0, 0);
    create("alpha", 1);
    create("beta", 2);
    save("keeper", "create", &s);

    session(K_HELLO, 0, 0);
    create("alpha", 1);
    create("alpha", 2);
    create("beta", 1);
    save("keeper", "create-taken", &s);

    session(K_HELLO, 0, 0);
    struct proto_sandbox p = sandbox("alpha", SANDBOX_MAX_SLOTS);
    rec(0, PROTO_CREATE, &p, sizeof p);
    p = sandbox("alpha", 1);
    p.memory_mib = 8;
    rec(0, PROTO_CREATE, &p, sizeof p);
    p = sandbox("Alpha", 1);
    rec(0, PROTO_CREATE, &p, sizeof p);
    memset(p.id, 'a', sizeof p.id); /* unterminated */
    rec(0, PROTO_CREATE, &p, sizeof p);
    save("keeper", "create-bad", &s);

    session(K_HELLO, 1u << OP_CREATE, E_EIO);
    create("alpha", 1);
    create("alpha", 1);
    save("keeper", "create-fails", &s);

    session(K_HELLO, 0, 0);
    p = sandbox("alpha", 3);
    rec(0, PROTO_ADOPT, &p, sizeof p);
    save("keeper", "adopt", &s);

    session(K_HELLO, 1u << OP_ADOPT, E_ENOENT);
    rec(0, PROTO_ADOPT, &p, sizeof p);
    save("keeper", "adopt-recreates", &s);

    session(K_HELLO, 1u << OP_WATCH, E_EIO);
    create("beta", 1);
    rec(0, PROTO_ADOPT, &p, sizeof p);
    save("keeper", "no-watch-fd", &s);

    session(K_HELLO, 1u << OP_ADOPT | 1u << OP_CREATE, E_EIO);
    rec(0, PROTO_ADOPT, &p, sizeof p);
    save("keeper", "adopt-fails", &s);

    session(K_HELLO, 0, 0);
    sweep(0, "", 0);
    save("keeper", "sweep-none", &s);

    session(K_HELLO, 0, 0);
    create("alpha", 1);
    sweep(2, STRS("zeta\0delta\0"));
    save("keeper", "sweep-keep", &s);

    session(K_HELLO, 1u << OP_SWEEP, E_EIO);
    sweep(1, STRS("epsilon\0"));
    sweep(3, STRS("a\0b\0"));
    save("keeper", "sweep-bad-count", &s);

    session(K_HELLO, 0, 0);
    create("alpha", 1);
    ref(PROTO_DESTROY, "alpha", 0);
    create("alpha", 1);
    ref(PROTO_DESTROY, "alpha", 0);
    ref(PROTO_DESTROY, "alpha", 0);
    save("keeper", "destroy-twice", &s);

    /* stop keeps the files, forget removes them only once it is stopped, adopt builds it again */
    session(K_HELLO, 0, 0);
    create("alpha", 1);
    ref(PROTO_FORGET, "alpha", 0);
    ref(PROTO_STOP, "alpha", 0);
    ref(PROTO_STOP, "alpha", 0);
    ref(PROTO_FORGET, "alpha", 0);
    save("keeper", "stop-forget", &s);

    session(K_HELLO, 1u << OP_STOP, E_EIO);
    create("alpha", 1);
    ref(PROTO_STOP, "alpha", 0);
    ref(PROTO_STATS, "alpha", 0);
    save("keeper", "stop-fails", &s);

    session(K_HELLO, 1u << OP_DESTROY, E_EIO);
    create("alpha", 1);
    ref(PROTO_DESTROY, "alpha", 0);
    ref(PROTO_STATS, "alpha", 0);
    save("keeper", "destroy-fails", &s);

    session(K_HELLO, 0, 0);
    create("alpha", 1);
    exec("alpha", "/workspace", 3, 1, STRS("sh\0-c\0echo hi\0PATH=/usr/bin\0"));
    exec("alpha", "/", 1, 0, STRS("ls\0"));
    save("keeper", "exec", &s);

    session(K_HELLO, 1u << OP_EXEC, E_EIO);
    create("alpha", 1);
    exec("alpha", "/workspace", 1, 0, STRS("true\0"));
    exec("beta", "/workspace", 1, 0, STRS("true\0"));
    save("keeper", "exec-fails", &s);

    session(K_HELLO, 0, 0);
    create("alpha", 1);
    exec("alpha", "/workspace", 0, 1, STRS("A=b\0"));
    save("keeper", "exec-argc0", &s);

    session(K_HELLO, 0, 0);
    create("alpha", 1);
    exec("alpha", "/workspace", 2, 0, STRS("sh\0-c")); /* last string unterminated */
    save("keeper", "exec-unterminated", &s);

    session(K_HELLO, 0, 0);
    create("alpha", 1);
    open_file("alpha", "/workspace/a.txt", 0);
    open_file("alpha", "/workspace/b.txt", 1);
    open_file("alpha", "workspace/relative", 0);
    open_file("beta", "/etc/passwd", 0);
    save("keeper", "open", &s);

    session(K_HELLO, 1u << OP_OPEN, E_ENOENT);
    create("alpha", 1);
    open_file("alpha", "/nope", 0);
    save("keeper", "open-fails", &s);

    session(K_HELLO, 0, 0);
    create("alpha", 1);
    ref(PROTO_FREEZE, "alpha", 1);
    ref(PROTO_FREEZE, "alpha", 0);
    ref(PROTO_STATS, "alpha", 0);
    ref(PROTO_STATS, "beta", 0);
    save("keeper", "freeze-stats", &s);

    session(K_HELLO, 1u << OP_FREEZE | 1u << OP_STATS, E_ENOMEM);
    create("alpha", 1);
    ref(PROTO_FREEZE, "alpha", 1);
    ref(PROTO_STATS, "alpha", 0);
    save("keeper", "freeze-stats-fail", &s);

    session(K_HELLO, 0, 0);
    create("alpha", 1);
    ref(PROTO_NET_SOCKETS, "alpha", 0);
    ref(PROTO_NET_SOCKETS, "beta", 0);
    save("keeper", "net-sockets", &s);

    session(K_HELLO, 1u << OP_NET, E_EIO);
    create("alpha", 1);
    ref(PROTO_NET_SOCKETS, "alpha", 0);
    save("keeper", "net-sockets-fails", &s);

    struct proto_tls tls = {0};
    session(K_HELLO, 0, 0);
    rec(0, PROTO_TLS_FILES, &tls, sizeof tls);
    rec(0, PROTO_TLS_FILES, &tls, sizeof tls);
    save("keeper", "tls-files", &s);

    session(K_HELLO | K_NO_TLS, 0, 0);
    rec(0, PROTO_TLS_FILES, &tls, sizeof tls);
    save("keeper", "tls-files-none", &s);

    session(0, 0, 0);
    rec(0, PROTO_TLS_FILES, &tls, sizeof tls);
    save("keeper", "tls-files-before-hello", &s);

    session(K_HELLO, 0, 0);
    tls.flags = 1;
    rec(0, PROTO_TLS_FILES, &tls, sizeof tls);
    save("keeper", "tls-files-bad-flags", &s);

    session(K_HELLO, 0, 0);
    create("alpha", 1);
    exec("alpha", "/workspace", 1, 0, STRS("id\0"));
    ref(PROTO_NET_SOCKETS, "alpha", 0);
    open_file("alpha", "/workspace/x", 1);
    ref(PROTO_FREEZE, "alpha", 1);
    ref(PROTO_STATS, "alpha", 0);
    ref(PROTO_DESTROY, "alpha", 0);
    sweep(0, "", 0);
    save("keeper", "lifecycle", &s);

    /* Headers the keeper must refuse. */
    session(K_HELLO, 0, 0);
    struct proto_hdr bad = {.type = PROTO_HELLO, .version = 2, .len = sizeof hello, .id = 9};
    rec_hdr(R_RAW, &bad, &hello, sizeof hello);
    save("keeper", "bad-version", &s);

    session(K_HELLO, 0, 0);
    bad = (struct proto_hdr){.type = PROTO_HELLO, .version = PROTO_VERSION, .len = 99, .id = 9};
    rec_hdr(R_RAW, &bad, &hello, sizeof hello);
    save("keeper", "bad-len", &s);

    session(K_HELLO, 0, 0);
    struct proto_result res = {0};
    rec(0, PROTO_RESULT, &res, sizeof res);
    save("keeper", "type-result", &s);

    session(K_HELLO, 0, 0);
    rec(0, PROTO_TYPE_END, &hello, sizeof hello);
    save("keeper", "type-end", &s);

    session(K_HELLO, 0, 0);
    rec(R_PAD, PROTO_SWEEP, NULL, 0);
    save("keeper", "oversize-edge", &s);

    session(K_HELLO, 0, 0);
    rec(R_PAD, PROTO_HELLO, &hello, sizeof hello);
    save("keeper", "oversize", &s);
    /* FILE_OP last: the request ids of the seeds above stay as they were. */
    session(K_HELLO, 0, 0);
    create("alpha", 1);
    file_op("alpha", PROTO_FILE_STAT, "/workspace/a", "", 0, 0, 0, 0);
    file_op("alpha", PROTO_FILE_LIST, "/workspace", "**/*.py", PROTO_FILE_HIDDEN, 0, 32, 10000);
    file_op("alpha", PROTO_FILE_MKDIR, "/workspace/a/b", "", PROTO_FILE_PARENTS, 0, 0, 0);
    file_op("alpha", PROTO_FILE_REMOVE, "/workspace/a", "", PROTO_FILE_RECURSIVE, 0, 0, 0);
    file_op("alpha", PROTO_FILE_RENAME, "/workspace/a", "/workspace/b", PROTO_FILE_OVERWRITE, 0, 0,
            0);
    file_op("alpha", PROTO_FILE_CHMOD, "/workspace/run", "", 0, 0755, 0, 0);
    save("keeper", "file-op", &s);

    session(K_HELLO, 0, 0);
    create("alpha", 1);
    file_op("alpha", PROTO_FILE_STAT, "workspace/relative", "", 0, 0, 0, 0);
    file_op("beta", PROTO_FILE_STAT, "/etc", "", 0, 0, 0, 0);
    save("keeper", "file-op-refused", &s);

    session(K_HELLO, 1u << OP_FILE, E_EIO);
    create("alpha", 1);
    file_op("alpha", PROTO_FILE_REMOVE, "/workspace/a", "", 0, 0, 0, 0);
    save("keeper", "file-op-fails", &s);

    /* Each breaks the protocol, and ends the session: op, flags, mode, depth, limit. */
    static const struct proto_file_op bad_ops[] = {
        {.op = 0},
        {.op = PROTO_FILE_OP_END},
        {.op = PROTO_FILE_STAT, .flags = 0x10},
        {.op = PROTO_FILE_CHMOD, .mode = 04755},
        {.op = PROTO_FILE_LIST, .depth = 33, .limit = 1},
        {.op = PROTO_FILE_LIST, .depth = 1, .limit = 0},
        {.op = PROTO_FILE_STAT, .depth = 1},
    };
    for (size_t i = 0; i < sizeof bad_ops / sizeof *bad_ops; i++) {
        char name[40];
        session(K_HELLO, 0, 0);
        create("alpha", 1);
        const struct proto_file_op *b = &bad_ops[i];
        file_op("alpha", b->op, "/workspace/a", "", b->flags, b->mode, b->depth, b->limit);
        snprintf(name, sizeof name, "file-op-bad-%zu", i);
        save("keeper", name, &s);
    }
}

/* ---- proto records -------------------------------------------------------- */

static void proto_one(const char *name, unsigned maxfds, unsigned attach, unsigned sizesel,
                      unsigned nstr, unsigned mode, uint16_t type, const void *payload, size_t len)
{
    s.n = 0;
    unsigned char h[5] = {(unsigned char)maxfds, (unsigned char)attach, (unsigned char)sizesel,
                          (unsigned char)nstr, (unsigned char)mode};
    put(&s, h, 5);
    struct proto_hdr hdr = {
        .type = type, .version = PROTO_VERSION, .len = (uint32_t)len, .id = 7, .nfds = attach};
    put(&s, &hdr, sizeof hdr);
    put(&s, payload, len);
    save("proto", name, &s);
}

static void proto_corpus(void)
{
    struct proto_hello hello = {PROTO_VERSION};
    struct proto_ref r = {.id = "alpha", .flag = 1};
    struct proto_result res = {.status = -2, .msg = "no sandbox alpha"};
    unsigned char ex[sizeof(struct proto_exec) + 16];
    struct proto_exec e = {.id = "alpha", .cwd = "/workspace", .argc = 2, .envc = 1};
    memcpy(ex, &e, sizeof e);
    memcpy(ex + sizeof e, "ls\0-l\0A=1\0", 10);
    unsigned char sw[4 + 12] = {2, 0, 0, 0};
    memcpy(sw + 4, "alpha\0beta\0", 11);

    proto_one("hello", 0, 0, 0, 0, 1, PROTO_HELLO, &hello, sizeof hello);
    proto_one("ref-fd", 1, 1, 0, 0, 1, PROTO_FREEZE, &r, sizeof r);
    proto_one("fds-unwanted", 0, 2, 0, 0, 1, PROTO_HELLO, &hello, sizeof hello);
    proto_one("fds-too-many", 4, 6, 0, 0, 1, PROTO_EXEC, ex, sizeof e + 10);
    proto_one("result-small-buf", 1, 0, 1, 0, 1, PROTO_RESULT, &res, sizeof res);
    proto_one("result-tiny-buf", 0, 0, 2 | (8 << 2), 0, 1, PROTO_RESULT, &res, sizeof res);
    proto_one("exec-strings", 0, 0, 0, 3, 1, PROTO_EXEC, ex, sizeof e + 10);
    proto_one("sweep-strings", 0, 0, 0, 3, 1 | 8, PROTO_SWEEP, sw, 4 + 11);
    proto_one("id", 0, 0, 0, 1, 8, PROTO_DESTROY, "alpha-1\0", 8);
    proto_one("raw-bad-len", 0, 0, 0, 0, 0, PROTO_HELLO, &hello, 0);
    proto_one("type-zero", 0, 0, 0, 0, 1, 0, &hello, sizeof hello);
    proto_one("roundtrip", 4, 4, 0, 0, 1 | 2, PROTO_EXEC, ex, sizeof e + 10);
    proto_one("roundtrip-bad", 4, 5, 0, 0, 2 | 4, 77, &hello, sizeof hello);
    proto_one("oversize", 0, 0, 0, 0, 1 | 4, PROTO_SWEEP, sw, 4);
}

/* ---- fuzz_sign: byte 0 flags (key choice, 0x04 the signer's loop, 0x08 raw), byte 1 name
 * length, the name, then an SPKI for key choice 0. The SPKIs below are real DER from
 * `openssl ec -pubout` (P-256 plain and compressed) and
 * `openssl pkey -pubout` (Ed25519, RSA 1024): only the first three may be signed. */
#define S_LEAF 1
#define S_OTHER 2
#define S_P384 3
#define S_SIGNER 4
#define S_RAW 8

static const char K_P256[] =
    "3059301306072a8648ce3d020106082a8648ce3d03010703420004b6aab3f956ac834404fe5a62ae"
    "4e33dc61da4630990af6d405a5fb03b2b70e86c38bbcdd0907da751ccde1eed759feaee542e66c49"
    "bb2cc776f99e109dbd392c";
static const char K_P256C[] =
    "3039301306072a8648ce3d020106082a8648ce3d030107032200020a5d2b405ddb6a0dc86e8a0848"
    "0c456aafbdb8e5b4b3b0a4b29acf15f9f4c07d";
static const char K_ED25519[] =
    "302a300506032b65700321006100a67b6924bf6fbd0b4ff35bdcb358ba8d7297d55c5781b8bc19db"
    "a86eba1b";
static const char K_RSA1024[] =
    "30819f300d06092a864886f70d010101050003818d0030818902818100c28eb70aaee6719737f5bd"
    "30cdb6f59ffc21c64caa85cff3ec41c8631fd24c89c228ebbc60a3be85f428c406203950371fe416"
    "eee6df6fc80a2926a19cf8b37d089b3731eea2050743093494374c5f283e583479b041acbcba08df"
    "1d5c43425e2bf2ad7a4e9afd5bb183471f17363cd272c8113b3be5bcfb9bf4ef101ab7110d020301"
    "0001";

static size_t unhex(const char *h, unsigned char *out)
{
    size_t n = 0;
    for (; h[0] && h[1]; h += 2) {
        unsigned v;
        sscanf(h, "%2x", &v);
        out[n++] = (unsigned char)v;
    }
    return n;
}

static void sign_seed(const char *name, unsigned flags, const char *label, size_t name_len,
                      const char *spki_hex)
{
    unsigned char spki[1024];
    size_t spki_len = spki_hex ? unhex(spki_hex, spki) : 0;
    s.n = 0;
    unsigned char b[2] = {(unsigned char)flags, (unsigned char)name_len};
    put(&s, b, 2);
    put(&s, label, name_len);
    put(&s, spki, spki_len);
    save("sign", name, &s);
}

static void sign_raw(const char *name, const char *label, uint32_t spki_len, size_t total,
                     bool unterminated)
{
    struct mitm_sign_req p;
    memset(&p, 0, sizeof p);
    p.id = 0x51676e72;
    if (unterminated)
        memset(p.name, 'a', sizeof p.name);
    else
        snprintf(p.name, sizeof p.name, "%s", label);
    unsigned char spki[1024];
    size_t n = unhex(K_P256, spki);
    memcpy(p.spki, spki, n);
    p.spki_len = spki_len ? spki_len : (uint32_t)n;
    if (spki_len == 1) p.spki_len = 0;
    s.n = 0;
    unsigned char flag = S_SIGNER | S_RAW;
    put(&s, &flag, 1);
    put(&s, &p, total < sizeof p ? total : sizeof p);
    if (total > sizeof p) {
        static const unsigned char zero[64];
        put(&s, zero, total - sizeof p);
    }
    save("sign", name, &s);
}

static void sign_corpus(void)
{
    static const struct {
        const char *seed, *name;
    } names[] = {
        {"dns", "example.com"},
        {"dns-upper", "API.GitHub.com"},
        {"dns-one-label", "localhost"},
        {"dns-underscore", "_dmarc.example.org"},
        {"dns-idna", "xn--bcher-kva.example"},
        {"dns-digits", "1password.com"},
        {"dns-hyphen", "my-host.s3.eu-west-1.amazonaws.com"},
        {"ipv4", "10.0.0.1"},
        {"ipv6-loopback", "::1"},
        {"ipv6", "2001:DB8:0:0::1"},
        {"ipv6-mapped", "::ffff:1.2.3.4"},
        {"bad-empty", ""},
        {"bad-wildcard", "*.example.com"},
        {"bad-double-dot", "a..example.com"},
        {"bad-trailing-dot", "example.com."},
        {"bad-leading-hyphen", "-a.example.com"},
        {"bad-trailing-hyphen", "a-.example.com"},
        {"bad-numeric", "2130706433"},
        {"bad-hex-ip", "0x7f.1"},
        {"bad-ipv4-octet", "1.2.3.400"},
        {"bad-ipv4-zero", "01.2.3.4"},
        {"bad-last-digit", "example.123"},
        {"bad-bracket", "[::1]"},
        {"bad-space", "ex ample.com"},
        {"bad-newline", "example.com\nHost: evil"},
        {"bad-utf8", "b\xc3\xbc"
                     "cher.example"},
        {"bad-slash", "example.com/path"},
        {"bad-zone", "fe80::1%eth0"},
    };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char seed[64];
        const char *n = names[i].name;
        sign_seed(names[i].seed, S_LEAF, n, strlen(n), NULL);
        snprintf(seed, sizeof seed, "signer-%s", names[i].seed);
        if (i % 3 == 0) sign_seed(seed, S_LEAF | S_SIGNER, n, strlen(n), NULL);
    }
    /* A name with a NUL inside: the C string ends there. */
    sign_seed("nul-inside", S_LEAF, "good.example\0evil", 17, NULL);
    /* Labels of 63 and 64 bytes; names of 64 and 254 bytes. (Valid names of 65 to 253
     * bytes and P-256 keys with explicit curve parameters show reported bugs: their
     * inputs are in tests/fuzz/crashes/sign/, not here.) */
    char l[300];
    memset(l, 'a', 63);
    l[63] = '\0';
    sign_seed("label-63", S_LEAF, l, strlen(l), NULL);
    memset(l, 'a', 64);
    memcpy(l + 64, ".com", 5);
    sign_seed("bad-label-64", S_LEAF, l, strlen(l), NULL);
    memset(l, 'b', 60);
    memcpy(l + 60, ".com", 5);
    sign_seed("name-64", S_LEAF | S_SIGNER, l, strlen(l), NULL);
    for (size_t i = 0; i < 254; i++)
        l[i] = i % 2 ? '.' : 'a';
    l[253] = 'z';
    l[254] = '\0';
    sign_seed("bad-name-254", S_LEAF, l, 254, NULL);
    /* The kinds of keys. */
    sign_seed("key-p256", 0, "example.com", 11, K_P256);
    sign_seed("key-p256-compressed", 0, "example.com", 11, K_P256C);
    sign_seed("signer-key-p256", S_SIGNER, "10.1.2.3", 8, K_P256);
    sign_seed("bad-key-ed25519", 0, "example.com", 11, K_ED25519);
    sign_seed("bad-key-rsa", 0, "example.com", 11, K_RSA1024);
    sign_seed("bad-key-p384", S_P384, "example.com", 11, NULL);
    sign_seed("signer-bad-key-p384", S_P384 | S_SIGNER, "example.com", 11, NULL);
    sign_seed("key-other", S_OTHER, "example.org", 11, NULL);
    sign_seed("bad-key-empty", S_SIGNER, "example.com", 11, NULL);
    char trail[400];
    snprintf(trail, sizeof trail, "%s00", K_P256);
    sign_seed("bad-key-trailing", 0, "example.com", 11, trail);
    /* Raw request records: well-formed, and the ones answered -EPROTO. */
    sign_raw("raw", "example.com", 0, sizeof(struct mitm_sign_req), false);
    sign_raw("raw-short", "example.com", 0, sizeof(struct mitm_sign_req) - 1, false);
    sign_raw("raw-long", "example.com", 0, sizeof(struct mitm_sign_req) + 8, false);
    sign_raw("raw-unterminated", NULL, 0, sizeof(struct mitm_sign_req), true);
    sign_raw("raw-spki-0", "example.com", 1, sizeof(struct mitm_sign_req), false);
    sign_raw("raw-spki-1025", "example.com", 1025, sizeof(struct mitm_sign_req), false);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR (e.g. tests/fuzz/corpus)\n", argv[0]);
        return 2;
    }
    g_dir = argv[1];
    mkdir(g_dir, 0755);
    keeper_corpus();
    proto_corpus();
    sign_corpus();
    return 0;
}
