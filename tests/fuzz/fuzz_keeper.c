/* Fuzz target: the keeper's request validation, through keeper_main() only.
 *
 * The keeper treats every byte from the server as hostile (keeper.h, proto.h).
 * Each input becomes a short session: the records below are queued on a
 * SOCK_SEQPACKET socketpair, our write side is shut down, and keeper_main()
 * serves them with a fake driver that records calls, never touches the system
 * and checks what the keeper promises the driver:
 *   - a create/adopt spec has a valid id, an in-range slot and limits, and
 *     neither its id nor its slot is live; reuse_workspace only after a failed
 *     adopt;
 *   - exec, open_file, file_op, net_sockets, watch_fd, freeze, stats and
 *     destroy only on a live sandbox (one this keeper created); argv non-empty
 *     and NULL-terminated, envp NULL-terminated, cwd and path terminated within
 *     PROTO_PATH_LEN; a file_op's op, flags, mode, depth and limit in range;
 *   - sweep only for a valid id that is not live;
 *   - every sandbox is freed exactly once, all of them by the time it returns;
 *   - TLS_FILES answers with two sealed memfds holding exactly the bytes of
 *     the two files it was given (and -ENOENT when it was given none);
 * and what it promises the server: one RESULT per request, in order, echoing
 * the request id, carrying 4 fds after a successful exec, 1 after open and
 * file_op, 3
 * after net_sockets, 1 after create/adopt (when the driver has a watch fd),
 * none otherwise; a request the driver was asked to carry out is always
 * answered (a driver error is an error reply, not a protocol violation); no fd
 * leaks. A new driver op needs a fake here, or the target calls NULL.
 *
 * Input:
 *   byte 0     flags: 0x01 send a HELLO first (the keeper requires it),
 *              0x02 start the keeper without TLS files
 *   bytes 1-2  driver ops that fail, a bit per enum op below (little-endian)
 *   byte 3     which errno they fail with (index into fail_errnos)
 *   then up to MAX_RECORDS records, each
 *     u8 rflags: bits 0-1 fds of /dev/null to attach (3 counts as 2),
 *                0x04 raw (send as is; otherwise version, len and nfds of the
 *                header are fixed up to match), 0x08 pad past PROTO_MAX_MSG
 *     u16 little-endian length, then that many bytes: header + payload
 * gen_corpus.c writes well-formed sessions of every request type.
 * FUZZ_KNOWN (comma list) skips checks of reported, unfixed bugs:
 * keeper-driver-eproto, proto-empty-fds. FUZZ_TRACE=1 prints the session. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define FUZZ_NAME "fuzz_keeper"
#include "cgroup/cgroup_impl.h" /* cgi_set_root: sweeps list a fake cgroup tree */
#include "fuzz.h"
#include "keeper/keeper.h"
#include "proto/proto.h"

/* keeper_main() never closes its signalfd (one leak per call; the daemon calls
 * it once). Tolerated here so the target can run; set to 0 once fixed. */
#define KEEPER_LEAKS_SIGNALFD 0

#define MAX_RECORDS 8
#define MAX_LIVE 64
#define FD_WINDOW 64

enum op {
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
static const int fail_errnos[] = {EIO, ENOENT, EPROTO, ENOMEM, EEXIST, EINVAL, EPERM, ENOSPC};

struct sandbox {
    uint32_t magic;
    char id[PROTO_ID_LEN];
    uint32_t slot;
};
#define SB_MAGIC 0x5a5b0c0du

static struct sandbox_host g_host;
/* The TLS files TLS_FILES copies (nothing parses them: any bytes do). */
static const char TLS_CERT_BYTES[] = "-----BEGIN CERTIFICATE-----\nfuzz\n";
static const char TLS_KEY_BYTES[] = "-----BEGIN PRIVATE KEY-----\nfuzz\n";
static char g_tls_cert[160], g_tls_key[160];
static struct keeper_files g_files = {g_tls_cert, g_tls_key};
static int g_err = 2; /* our stderr, kept when libFuzzer closes fd 2 */
static int g_devnull = -1;

/* One session's state. */
static struct {
    int sock; /* our end: replies arrive here */
    uint16_t fail_mask;
    int fail_errno;
    bool watch_ok; /* the last watch_fd gave a descriptor */
    struct sandbox *live[MAX_LIVE];
    size_t nlive;
    struct {
        uint16_t type;
        uint32_t id;
    } sent[MAX_RECORDS + 1];
    unsigned nsent, replies;
    int driver_req; /* index of the last request the driver was called for, -1 none */
    int driver_ret; /* and what the driver returned */
    bool adopt_failed;
    char adopt_id[PROTO_ID_LEN];
} g;

static bool known(const char *name)
{
    const char *k = getenv("FUZZ_KNOWN");
    return k && strstr(k, name);
}

static bool g_trace; /* FUZZ_TRACE=1: one line per request, reply and driver call */

/* ---- replies ------------------------------------------------------------ */

static void check_reply(const struct proto_hdr *hdr, const struct proto_result *res, ssize_t n,
                        unsigned nfds)
{
    unsigned i = g.replies;
    if (i >= g.nsent) fail("reply %u but only %u requests were sent", i + 1, g.nsent);
    if (n != (ssize_t)(sizeof *hdr + sizeof *res) || hdr->type != PROTO_RESULT ||
        hdr->version != PROTO_VERSION || hdr->len != sizeof *res || hdr->nfds != nfds)
        fail("reply %u is not a well-formed RESULT (n=%zd type=%u nfds=%u)", i, n, hdr->type,
             hdr->nfds);
    if (hdr->id != g.sent[i].id)
        fail("reply %u has id %u, request had %u (replies out of order?)", i, hdr->id,
             g.sent[i].id);
    if (res->status > 0) fail("reply %u has positive status %d", i, res->status);
    if (!memchr(res->msg, '\0', sizeof res->msg)) fail("reply %u: msg not terminated", i);
    uint16_t t = g.sent[i].type;
    /* The fds of a success answer are proto.h's table's, except a create's watch fd,
     * which the driver may not have. */
    const struct proto_request_info *info = proto_request(t);
    if (!info) fail("reply %u answers a %u, which is not a request", i, t);
    unsigned want = res->status < 0                         ? 0
                    : t == PROTO_CREATE || t == PROTO_ADOPT ? g.watch_ok
                                                            : info->fds;
    if (nfds != want)
        fail("reply %u to %s carries %u fds, want %u", i, proto_type_name(t), nfds, want);
    if (res->status < 0 && res->msg[0] == '\0') fail("reply %u: error without a message", i);
    if (res->status == 0 && t == PROTO_STATS &&
        (res->values[0] != 11 || res->values[1] != 22 || res->values[2] != 33 ||
         res->values[4] != 44))
        fail("stats reply %u does not carry the driver's values", i);
    if (res->status == 0 && t == PROTO_ADOPT && res->values[0] != 1 && res->values[0] != 2)
        fail("adopt reply %u: values[0]=%llu, want 1 or 2", i, (unsigned long long)res->values[0]);
    if (g_trace)
        dprintf(g_err, "  reply %u: id %u status %d fds %u\n", i, hdr->id, res->status, nfds);
    g.replies++;
}

/* A TLS_FILES descriptor: sealed against any change, holding exactly want. */
static void check_tls_fd(int fd, const char *want)
{
    char got[128];
    ssize_t n = pread(fd, got, sizeof got, 0);
    int seals = fcntl(fd, F_GET_SEALS);
    int all = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL;
    if (n != (ssize_t)strlen(want) || memcmp(got, want, (size_t)n) != 0)
        fail("TLS_FILES: a descriptor holds %zd bytes that are not the file's", n);
    if (seals < 0 || (seals & all) != all)
        fail("TLS_FILES: a descriptor is not sealed (%d)", seals);
}

/* Reads every reply queued so far; the keeper answers before it reads the next
 * request, so the count tells which request is being handled. */
static void drain_replies(void)
{
    for (;;) {
        struct proto_hdr hdr;
        struct proto_result res;
        union {
            char b[CMSG_SPACE(sizeof(int) * 8)];
            struct cmsghdr align;
        } ctl;
        struct iovec iov[2] = {{&hdr, sizeof hdr}, {&res, sizeof res}};
        struct msghdr msg = {
            .msg_iov = iov, .msg_iovlen = 2, .msg_control = ctl.b, .msg_controllen = sizeof ctl.b};
        ssize_t n = recvmsg(g.sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0 && (errno == EINTR || errno == ECONNRESET)) continue; /* reported once */
        if (n <= 0) return;
        unsigned nfds = 0;
        int fds[8];
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
            size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t j = 0; j < k && nfds < 8; j++, nfds++)
                memcpy(&fds[nfds], CMSG_DATA(c) + j * sizeof(int), sizeof(int));
        }
        if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) fail("reply truncated");
        uint16_t t = g.replies < g.nsent ? g.sent[g.replies].type : 0;
        check_reply(&hdr, &res, n, nfds);
        if (t == PROTO_TLS_FILES && res.status == 0) {
            check_tls_fd(fds[0], TLS_CERT_BYTES);
            check_tls_fd(fds[1], TLS_KEY_BYTES);
        }
        for (unsigned j = 0; j < nfds; j++)
            close(fds[j]);
    }
}

/* ---- the fake driver ------------------------------------------------------ */

static void driver_called(void)
{
    drain_replies();
    g.driver_req = (int)g.replies;
    if (g_trace) dprintf(g_err, "  driver called for request %u\n", g.replies);
}

static int driver_result(enum op op, err_t *err, const char *what)
{
    int r = 0;
    if (g.fail_mask & (1u << op)) r = err_set(err, -g.fail_errno, "fake %s failed", what);
    g.driver_ret = r;
    return r;
}

static size_t live_index(const struct sandbox *sb, const char *op)
{
    for (size_t i = 0; i < g.nlive; i++)
        if (g.live[i] == sb) {
            if (sb->magic != SB_MAGIC) fail("%s: sandbox corrupted", op);
            return i;
        }
    fail("%s called on a sandbox that is not live (%p)", op, (const void *)sb);
}

static bool id_ok(const char *id)
{
    size_t n = strnlen(id, PROTO_ID_LEN);
    if (n == 0 || n == PROTO_ID_LEN) return false;
    return strspn(id, "abcdefghijklmnopqrstuvwxyz0123456789-") == n;
}

static struct sandbox *live_by_id(const char *id)
{
    for (size_t i = 0; i < g.nlive; i++)
        if (strcmp(g.live[i]->id, id) == 0) return g.live[i];
    return NULL;
}

static void check_spec(const struct sandbox_spec *s, const char *op)
{
    if (!id_ok(s->id)) fail("%s with a bad id", op);
    if (s->slot >= SANDBOX_MAX_SLOTS) fail("%s with slot %u", op, s->slot);
    if (s->memory_mib < 16 || s->memory_mib > (1u << 22) || s->cpu_milli < 10 ||
        s->cpu_milli > 1024000 || s->disk_mib < 16 || s->disk_mib > (1u << 24) || s->pids_max < 8 ||
        s->pids_max > (1u << 22))
        fail("%s with limits out of range", op);
    if (live_by_id(s->id)) fail("%s of %s, which is live", op, s->id);
    for (size_t i = 0; i < g.nlive; i++)
        if (g.live[i]->slot == s->slot) fail("%s with slot %u, which is taken", op, s->slot);
}

static int new_sandbox(const struct sandbox_spec *spec, struct sandbox **out)
{
    if (!out || *out) fail("create/adopt: out is not an empty slot");
    if (g.nlive == MAX_LIVE) fail("more live sandboxes than creates");
    struct sandbox *sb = calloc(1, sizeof *sb);
    if (!sb) abort();
    sb->magic = SB_MAGIC;
    memcpy(sb->id, spec->id, sizeof sb->id);
    sb->slot = spec->slot;
    g.live[g.nlive++] = sb;
    *out = sb;
    return 0;
}

static int fake_create(const struct sandbox_host *host, const struct sandbox_spec *spec,
                       bool reuse_workspace, struct sandbox **out, err_t *err)
{
    driver_called();
    if (host != &g_host) fail("create: foreign host");
    check_spec(spec, "create");
    if (reuse_workspace && (!g.adopt_failed || strcmp(g.adopt_id, spec->id) != 0))
        fail("create reusing a workspace without a failed adopt of %s", spec->id);
    g.adopt_failed = false;
    int r = driver_result(OP_CREATE, err, "create");
    return r < 0 ? r : new_sandbox(spec, out);
}

static int fake_adopt(const struct sandbox_host *host, const struct sandbox_spec *spec,
                      struct sandbox **out, err_t *err)
{
    driver_called();
    if (host != &g_host) fail("adopt: foreign host");
    check_spec(spec, "adopt");
    int r = driver_result(OP_ADOPT, err, "adopt");
    g.adopt_failed = r < 0;
    memcpy(g.adopt_id, spec->id, sizeof g.adopt_id);
    return r < 0 ? r : new_sandbox(spec, out);
}

static int fake_destroy(struct sandbox *sb, err_t *err)
{
    driver_called();
    live_index(sb, "destroy");
    return driver_result(OP_DESTROY, err, "destroy");
}

static int fake_stop(struct sandbox *sb, err_t *err)
{
    driver_called();
    live_index(sb, "stop");
    return driver_result(OP_STOP, err, "stop");
}

static size_t count_strings(const char *const *v, const char *what)
{
    if (!v) fail("exec: %s is NULL", what);
    size_t n = 0;
    for (; v[n]; n++) {
        if (n > 4096) fail("exec: %s has no NULL within 4096 entries", what);
        if (strnlen(v[n], PROTO_MAX_MSG) == PROTO_MAX_MSG)
            fail("exec: %s[%zu] unterminated", what, n);
    }
    return n;
}

static int fake_exec(struct sandbox *sb, const struct sandbox_exec *ex, int fds[4], err_t *err)
{
    driver_called();
    live_index(sb, "exec");
    if (count_strings(ex->argv, "argv") == 0) fail("exec with an empty argv");
    count_strings(ex->envp, "envp");
    if (!ex->cwd || strnlen(ex->cwd, PROTO_PATH_LEN) == PROTO_PATH_LEN)
        fail("exec: cwd not terminated within %d bytes", PROTO_PATH_LEN);
    int r = driver_result(OP_EXEC, err, "exec");
    if (r < 0) return r;
    int a[2], b[2];
    if (pipe2(a, O_CLOEXEC) < 0) abort();
    if (pipe2(b, O_CLOEXEC) < 0) abort();
    fds[0] = a[1];
    fds[1] = a[0];
    fds[2] = b[0];
    fds[3] = b[1];
    return 0;
}

static int fake_open_file(struct sandbox *sb, const char *path, unsigned write, unsigned mode,
                          int *fd, err_t *err)
{
    driver_called();
    live_index(sb, "open_file");
    if (!path || strnlen(path, PROTO_PATH_LEN) == PROTO_PATH_LEN)
        fail("open_file: path not terminated within %d bytes", PROTO_PATH_LEN);
    if (!fd) fail("open_file: no fd slot");
    if (mode > 0777) fail("open_file: mode %o passed the keeper's check", mode);
    /* The ns driver refuses relative paths itself (ns_open_file); so does this one. */
    if (path[0] != '/') return g.driver_ret = err_set(err, -EINVAL, "path must be absolute");
    int r = driver_result(OP_OPEN, err, "open_file");
    if (r < 0) return r;
    *fd = fcntl(g_devnull, F_DUPFD_CLOEXEC, 0);
    return *fd < 0 ? -errno : 0;
}

static int fake_rename_file(struct sandbox *sb, const char *from, const char *to, bool keep_mode,
                            err_t *err)
{
    driver_called();
    live_index(sb, "rename_file");
    if (!from || strnlen(from, PROTO_PATH_LEN) == PROTO_PATH_LEN)
        fail("rename_file: from not terminated within %d bytes", PROTO_PATH_LEN);
    if (to && strnlen(to, PROTO_PATH_LEN) == PROTO_PATH_LEN)
        fail("rename_file: to not terminated within %d bytes", PROTO_PATH_LEN);
    if (from[0] != '/' || (to && to[0] != '/'))
        return g.driver_ret = err_set(err, -EINVAL, "paths must be absolute");
    return driver_result(OP_OPEN, err, "rename_file");
}

static int fake_file_op(struct sandbox *sb, const struct proto_file_op *op, int *fd, err_t *err)
{
    driver_called();
    live_index(sb, "file_op");
    if (!op || !fd) fail("file_op: no op or no fd slot");
    if (strnlen(op->path, PROTO_PATH_LEN) == PROTO_PATH_LEN ||
        strnlen(op->path2, PROTO_PATH_LEN) == PROTO_PATH_LEN)
        fail("file_op: a path not terminated within %d bytes", PROTO_PATH_LEN);
    if (op->op < PROTO_FILE_STAT || op->op >= PROTO_FILE_OP_END) fail("file_op: op %u", op->op);
    if (op->flags & ~PROTO_FILE_FLAGS) fail("file_op: flags %#x", op->flags);
    if (op->mode > 0777) fail("file_op: mode %o passed the keeper's check", op->mode);
    bool list = op->op == PROTO_FILE_LIST;
    if (list ? op->depth < 1 || op->depth > PROTO_FILE_MAX_DEPTH || op->limit < 1 ||
                   op->limit > PROTO_FILE_MAX_LIMIT
             : op->depth || op->limit)
        fail("file_op: depth %u and limit %u for op %u", op->depth, op->limit, op->op);
    /* The ns driver refuses relative paths itself (ns_file_op); so does this one. */
    if (op->path[0] != '/') return g.driver_ret = err_set(err, -EINVAL, "path must be absolute");
    int r = driver_result(OP_FILE, err, "file_op");
    if (r < 0) return r;
    *fd = fcntl(g_devnull, F_DUPFD_CLOEXEC, 0);
    return *fd < 0 ? -errno : 0;
}

static int fake_net_sockets(struct sandbox *sb, int fds[3], err_t *err)
{
    driver_called();
    live_index(sb, "net_sockets");
    int r = driver_result(OP_NET, err, "net_sockets");
    if (r < 0) return r;
    for (int i = 0; i < 3; i++)
        if ((fds[i] = fcntl(g_devnull, F_DUPFD_CLOEXEC, 0)) < 0) abort();
    return 0;
}

static int fake_freeze(struct sandbox *sb, bool frozen, err_t *err)
{
    driver_called();
    live_index(sb, "freeze");
    return driver_result(OP_FREEZE, err, "freeze");
}

static int fake_stats(struct sandbox *sb, struct sandbox_stats *st)
{
    driver_called();
    live_index(sb, "stats");
    if (!st) fail("stats: no result");
    int r = driver_result(OP_STATS, NULL, "stats");
    if (r == 0)
        *st = (struct sandbox_stats){.cg = {.cpu_ns = 11, .memory_bytes = 22, .pids = 33},
                                     .disk_bytes = 44};
    return r;
}

static int fake_sweep(const struct sandbox_host *host, const char *id)
{
    driver_called();
    if (host != &g_host) fail("sweep: foreign host");
    if (!id || !id_ok(id)) fail("sweep of a bad id");
    if (live_by_id(id)) fail("sweep of %s, which is live", id);
    return driver_result(OP_SWEEP, NULL, "sweep");
}

static int fake_watch_fd(struct sandbox *sb)
{
    live_index(sb, "watch_fd");
    g.watch_ok = !(g.fail_mask & (1u << OP_WATCH));
    return g.watch_ok ? fcntl(g_devnull, F_DUPFD_CLOEXEC, 0) : -1;
}

static void fake_free(struct sandbox *sb)
{
    size_t i = live_index(sb, "free");
    g.live[i] = g.live[--g.nlive];
    sb->magic = 0;
    free(sb); /* ASan reports any later use */
}

static const struct sandbox_driver fake_driver = {
    .name = "fuzz",
    .create = fake_create,
    .adopt = fake_adopt,
    .destroy = fake_destroy,
    .stop = fake_stop,
    .exec = fake_exec,
    .open_file = fake_open_file,
    .rename_file = fake_rename_file,
    .file_op = fake_file_op,
    .net_sockets = fake_net_sockets,
    .freeze = fake_freeze,
    .stats = fake_stats,
    .sweep = fake_sweep,
    .watch_fd = fake_watch_fd,
    .free = fake_free,
};

/* ---- setup ---------------------------------------------------------------- */

/* A fixed tree beside the binary (build/fuzz/keeper-tree), made once and reused
 * by every run, so crashed runs leave nothing behind: nothing in it changes. */
static char g_tree[100];

static void mkdir_in(const char *rel)
{
    char p[256];
    snprintf(p, sizeof p, "%s%s%s", g_tree, *rel ? "/" : "", rel);
    if (mkdir(p, 0700) < 0 && errno != EEXIST) {
        dprintf(g_err, "fuzz_keeper: mkdir %s: %s\n", p, strerror(errno));
        exit(1);
    }
}

static void write_in(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text)) {
        dprintf(g_err, "fuzz_keeper: write %s: %s\n", path, strerror(errno));
        exit(1);
    }
    close(fd);
}

static void find_tree(void)
{
    char exe[256];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    char *slash = n > 0 ? memrchr(exe, '/', (size_t)n) : NULL;
    /* The cgroup root must fit CG_ROOT_MAX, or cgi_set_root falls back to the real one. */
    if (slash && slash - exe < 64) {
        *slash = '\0';
        snprintf(g_tree, sizeof g_tree, "%s/keeper-tree", exe);
    } else {
        snprintf(g_tree, sizeof g_tree, "/tmp/runtime-fuzz-keeper-%d", (int)getuid());
    }
}

/* A state dir and a cgroup tree with leftovers for SWEEP to find: ids the corpus
 * creates (alpha), ids nobody knows (delta), names that are not ids. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    g_err = fcntl(2, F_DUPFD_CLOEXEC, 100);
    g_trace = getenv("FUZZ_TRACE") != NULL;
    if (g_err < 0) g_err = 2;
    g_devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    find_tree();
    static const char *const dirs[] = {
        "",
        "state",
        "state/sandboxes",
        "state/sandboxes/alpha",
        "state/sandboxes/delta",
        "state/sandboxes/.hidden",
        "state/sandboxes/Bad_Id",
        "cgroup",
        "cgroup/runtime",
        "cgroup/runtime/f0220001-alpha",
        "cgroup/runtime/f0220001-epsilon",
        "cgroup/runtime/f0220001-",
        "cgroup/runtime/other-alpha",
    };
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++)
        mkdir_in(dirs[i]);
    snprintf(g_host.state_dir, sizeof g_host.state_dir, "%s/state", g_tree);
    snprintf(g_host.ca_bundle, sizeof g_host.ca_bundle, "%s/ca.pem", g_tree);
    snprintf(g_host.instance, sizeof g_host.instance, "f0220001");
    snprintf(g_tls_cert, sizeof g_tls_cert, "%s/tls.crt", g_tree);
    snprintf(g_tls_key, sizeof g_tls_key, "%s/tls.key", g_tree);
    write_in(g_tls_cert, TLS_CERT_BYTES);
    write_in(g_tls_key, TLS_KEY_BYTES);
    char cg[128];
    snprintf(cg, sizeof cg, "%s/cgroup", g_tree);
    cgi_set_root(cg, 2, 0);
    /* Once a process, as in the daemon: made by keeper_main's first call, the init
     * program's memfd would count as a descriptor that session leaked. */
    err_t err = {0};
    if (sandbox_init_prepare(&err) < 0) fprintf(stderr, "fuzz_keeper: %s\n", err.msg);
    return 0;
}

/* ---- one session ---------------------------------------------------------- */

static bool send_record(int sock, const uint8_t *p, size_t n, unsigned rflags)
{
    unsigned nfds = rflags & 3;
    if (nfds > 2) nfds = 2;
    bool raw = rflags & 4;
    size_t pad = rflags & 8 ? PROTO_MAX_MSG : 0;
    size_t total = (raw || n >= sizeof(struct proto_hdr) ? n : sizeof(struct proto_hdr)) + pad;
    /* A 0-byte record reads as a hangup: the keeper stops there, so we do too. */
    if (total == 0 && nfds && known("proto-empty-fds")) nfds = 0;
    uint8_t *rec = calloc(1, total ? total : 1);
    if (!rec) abort();
    memcpy(rec, p, n);
    struct proto_hdr hdr;
    if (!raw) {
        memcpy(&hdr, rec, sizeof hdr);
        hdr.version = PROTO_VERSION;
        hdr.len = (uint32_t)(total - sizeof hdr);
        hdr.nfds = nfds;
        memcpy(rec, &hdr, sizeof hdr);
    }
    memset(&hdr, 0, sizeof hdr);
    memcpy(&hdr, rec, total < sizeof hdr ? total : sizeof hdr);
    struct iovec iov = {rec, total};
    union {
        char b[CMSG_SPACE(sizeof(int) * 2)];
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
        int fds[2] = {g_devnull, g_devnull};
        memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
    }
    ssize_t w = sendmsg(sock, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    free(rec);
    if (w != (ssize_t)total) return false; /* buffer full: stop */
    if (total == 0) {
        /* An empty record reads as a hangup, unless descriptors came with it: then the
         * keeper must call it malformed, so it counts as an unanswered request. */
        if (nfds) g.sent[g.nsent++].type = 0;
        return false;
    }
    if (g_trace)
        dprintf(g_err, "  request %u: type %u (%s) id %u, %zu bytes, %u fds%s\n", g.nsent, hdr.type,
                proto_type_name(hdr.type), hdr.id, total, nfds, raw ? ", raw" : "");
    g.sent[g.nsent].type = hdr.type;
    g.sent[g.nsent].id = hdr.id;
    g.nsent++;
    return true;
}

static void fd_window(int lo, bool open_out[FD_WINDOW])
{
    for (int i = 0; i < FD_WINDOW; i++)
        open_out[i] = fcntl(lo + i, F_GETFD) >= 0;
}

static bool is_signalfd(int fd)
{
    char link[64], target[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n < 0) return false;
    target[n] = '\0';
    return strcmp(target, "anon_inode:[signalfd]") == 0;
}

static void check_fds(int lo, const bool before[FD_WINDOW])
{
    bool after[FD_WINDOW];
    fd_window(lo, after);
    for (int i = 0; i < FD_WINDOW; i++) {
        if (before[i] == after[i]) continue;
        if (!after[i]) fail("fd %d was closed by the session", lo + i);
        if (KEEPER_LEAKS_SIGNALFD && is_signalfd(lo + i)) {
            close(lo + i);
            continue;
        }
        fail("fd %d leaked by the session", lo + i);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4) return 0;
    memset(&g, 0, sizeof g);
    g.driver_req = -1;
    g.fail_mask = (uint16_t)(data[1] | data[2] << 8);
    g.fail_errno = fail_errnos[data[3] % (sizeof fail_errnos / sizeof *fail_errnos)];

    int lo = fcntl(g_devnull, F_DUPFD, 0);
    close(lo);
    bool fds_before[FD_WINDOW];
    fd_window(lo, fds_before);

    int sp[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) abort();
    g.sock = sp[0];
    bool ok = true;
    if (data[0] & 1) {
        struct {
            struct proto_hdr h;
            struct proto_hello b;
        } hello = {{PROTO_HELLO, PROTO_VERSION, sizeof(struct proto_hello), 0x48454c4f, 0},
                   {PROTO_VERSION}};
        ok = send_record(sp[0], (const uint8_t *)&hello, sizeof hello, 4);
    }
    size_t off = 4;
    for (int i = 0; ok && i < MAX_RECORDS && off + 3 <= size; i++) {
        unsigned rflags = data[off];
        size_t n = data[off + 1] | (size_t)data[off + 2] << 8;
        off += 3;
        if (n > size - off) n = size - off;
        ok = send_record(sp[0], data + off, n, rflags);
        off += n;
    }
    shutdown(sp[0], SHUT_WR);

    /* Both driver numbers lead to the fake: a CREATE's driver field is fuzzed too. */
    static const struct sandbox_driver *const drivers[PROTO_DRIVER_COUNT] = {&fake_driver,
                                                                             &fake_driver};
    int status = keeper_main(sp[1], &g_host, drivers, data[0] & 2 ? NULL : &g_files);
    drain_replies(); /* before closing its end, which would flag ours ECONNRESET */
    close(sp[1]);
    close(sp[0]);

    if (status != 0 && status != 1) fail("keeper_main returned %d", status);
    if (g.nlive) fail("%zu sandboxes not freed when keeper_main returned", g.nlive);
    if (status == 0 && g.replies != g.nsent)
        fail("clean end after %u replies to %u requests", g.replies, g.nsent);
    if (status == 1 && g.replies >= g.nsent)
        fail("keeper_main reported a malformed request but answered all %u", g.nsent);
    /* The request the keeper gave up on must not be one it had the driver act on:
     * a driver error is an answer, not a protocol violation. */
    if (status == 1 && g.driver_req == (int)g.replies && !known("keeper-driver-eproto"))
        fail("request %u (%s) reached the driver, which returned %d, and the keeper then "
             "ended the session without a reply",
             g.replies, proto_type_name(g.sent[g.replies].type), g.driver_ret);
    if (g_trace)
        dprintf(g_err,
                "fuzz_keeper: %u requests, %u replies, keeper_main %d, last driver call for "
                "request %d (returned %d)\n",
                g.nsent, g.replies, status, g.driver_req, g.driver_ret);
    check_fds(lo, fds_before);
    return 0;
}
