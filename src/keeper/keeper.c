#include "keeper.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../confine/confine.h"
#include "../proto/proto.h"

#define MAX_SANDBOXES SANDBOX_MAX_SLOTS

struct entry {
    char id[PROTO_ID_LEN];
    uint32_t slot;
    const struct sandbox_driver *drv; /* the one that built it */
    struct sandbox *sb;
};

struct keeper {
    int sock;
    const struct sandbox_host *host;
    const struct sandbox_driver *const *drivers; /* by enum proto_driver; NULL: not here */
    const struct keeper_files *files;
    struct entry *entries; /* dense array; order does not matter */
    size_t n, cap;
    bool hello;
};

/* -EPROTO from the keeper's own checks ends the session; a driver that happens
 * to fail with EPROTO must not. */
static int from_driver(int r)
{
    return r == -EPROTO ? -EIO : r;
}

static struct entry *find(struct keeper *k, const char *id)
{
    for (size_t i = 0; i < k->n; i++)
        if (strcmp(k->entries[i].id, id) == 0) return &k->entries[i];
    return NULL;
}

static bool slot_taken(struct keeper *k, uint32_t slot)
{
    for (size_t i = 0; i < k->n; i++)
        if (k->entries[i].slot == slot) return true;
    return false;
}

static int add(struct keeper *k, const struct sandbox_spec *spec, const struct sandbox_driver *drv,
               struct sandbox *sb)
{
    if (k->n == k->cap) {
        size_t cap = k->cap ? k->cap * 2 : 64;
        struct entry *e = realloc(k->entries, cap * sizeof *e);
        if (!e) return -ENOMEM;
        k->entries = e;
        k->cap = cap;
    }
    struct entry *e = &k->entries[k->n++];
    memcpy(e->id, spec->id, sizeof e->id);
    e->slot = spec->slot;
    e->drv = drv;
    e->sb = sb;
    return 0;
}

static void drop(struct keeper *k, struct entry *e)
{
    e->drv->free(e->sb);
    *e = k->entries[--k->n];
}

static int reply(struct keeper *k, uint32_t id, int status, const err_t *err, const int *fds,
                 unsigned nfds, const uint64_t *values)
{
    struct proto_result res = {.status = status};
    if (err && (status < 0 || err->msg[0])) snprintf(res.msg, sizeof res.msg, "%s", err->msg);
    if (values) memcpy(res.values, values, sizeof res.values);
    return proto_send(k->sock, PROTO_RESULT, id, &res, sizeof res, fds, nfds);
}

/* One request being handled: its payload, the sandbox it names (for
 * PROTO_NEEDS_SANDBOX), and what its answer carries. */
struct request {
    uint16_t type;
    const char *buf;
    int len;
    struct entry *e;
    int fds[PROTO_MAX_FDS];
    unsigned nfds;
    uint64_t values[5];
    err_t err;
};

/* PROTO_NEEDS_SANDBOX payloads start with the sandbox's id (checked in handle()). */
_Static_assert(offsetof(struct proto_ref, id) == 0, "proto_ref starts with the id");
_Static_assert(offsetof(struct proto_exec, id) == 0, "proto_exec starts with the id");
_Static_assert(offsetof(struct proto_file, id) == 0, "proto_file starts with the id");
_Static_assert(offsetof(struct proto_file_op, id) == 0, "proto_file_op starts with the id");
_Static_assert(offsetof(struct proto_template, id) == 0, "proto_template starts with the id");

static int on_hello(struct keeper *k, struct request *rq)
{
    struct proto_hello h;
    memcpy(&h, rq->buf, sizeof h);
    if (h.version != PROTO_VERSION) return -EPROTO;
    k->hello = true;
    return 0;
}

/* The keeper re-checks every field: ranges, terminated strings, unique slots. */
static int check_spec(struct keeper *k, const struct proto_sandbox *p, struct sandbox_spec *spec,
                      const struct sandbox_driver **drv, err_t *err)
{
    if (proto_check_id(p->id) < 0) return err_set(err, -EINVAL, "bad sandbox id");
    if (p->driver >= PROTO_DRIVER_COUNT) return err_set(err, -EINVAL, "bad driver");
    *drv = k->drivers[p->driver];
    if (!*drv) return err_set(err, -ENOTSUP, "this daemon has no such isolation driver");
    if (p->slot >= SANDBOX_MAX_SLOTS) return err_set(err, -EINVAL, "bad slot");
    if (p->memory_mib < 16 || p->memory_mib > (1u << 22) || p->cpu_milli < 10 ||
        p->cpu_milli > 1024000 || p->disk_mib < 16 || p->disk_mib > (1u << 24) || p->pids_max < 8 ||
        p->pids_max > (1u << 22))
        return err_set(err, -EINVAL, "sandbox limits out of range");
    *spec = (struct sandbox_spec){.slot = p->slot,
                                  .memory_mib = p->memory_mib,
                                  .cpu_milli = p->cpu_milli,
                                  .disk_mib = p->disk_mib,
                                  .pids_max = p->pids_max};
    memcpy(spec->id, p->id, sizeof spec->id);
    return 0;
}

/* Builds (or, on a restart, re-adopts) a sandbox; answers with its watch fd. */
static int create_or_adopt(struct keeper *k, struct request *rq, bool adopt)
{
    struct sandbox_spec spec;
    const struct sandbox_driver *drv = NULL;
    int r = check_spec(k, (const struct proto_sandbox *)rq->buf, &spec, &drv, &rq->err);
    if (r < 0) return r;
    if (find(k, spec.id)) return err_set(&rq->err, -EEXIST, "sandbox %s exists", spec.id);
    if (slot_taken(k, spec.slot)) return err_set(&rq->err, -EEXIST, "slot %u is taken", spec.slot);
    struct sandbox *sb = NULL;
    if (adopt) {
        err_t ignored = {0};
        r = drv->adopt(k->host, &spec, &sb, &ignored);
        rq->values[0] = r == 1 ? 3 : r == 0 ? 1 : 2;
        r = from_driver(r < 0 ? r : 0);
    }
    const struct proto_sandbox *p = (const struct proto_sandbox *)rq->buf;
    if (!sb && adopt && (p->flags & PROTO_ADOPT_ONLY))
        return err_set(&rq->err, -ENOENT, "sandbox %s is gone, and is not built again now",
                       spec.id);
    if (!sb) r = from_driver(drv->create(k->host, &spec, adopt, &sb, &rq->err));
    if (r < 0) return r;
    if (add(k, &spec, drv, sb) < 0) {
        drv->destroy(sb, NULL);
        drv->free(sb);
        return err_set(&rq->err, -ENOMEM, "out of memory");
    }
    rq->fds[0] = drv->watch_fd(sb);
    rq->nfds = rq->fds[0] >= 0;
    return 0;
}

static int on_create(struct keeper *k, struct request *rq)
{
    return create_or_adopt(k, rq, false);
}

static int on_adopt(struct keeper *k, struct request *rq)
{
    return create_or_adopt(k, rq, true);
}

static bool in_list(const char **ids, unsigned n, const char *id)
{
    for (unsigned i = 0; i < n; i++)
        if (strcmp(ids[i], id) == 0) return true;
    return false;
}

struct sweep_ctx {
    struct keeper *k;
    const char **keep;
    unsigned nkeep;
};

static void sweep_one(const char *id, void *arg)
{
    struct sweep_ctx *c = arg;
    if (!id || proto_check_id(id) < 0 || find(c->k, id) || in_list(c->keep, c->nkeep, id)) return;
    log_info("removing leftovers of sandbox %s", id);
    sandbox_sweep(c->k->host, id);
}

static void sweep_cgroup(const char *name, void *arg)
{
    struct sweep_ctx *c = arg;
    sweep_one(sandbox_id_of_cgroup(c->k->host, name), arg);
}

/* Removes cgroups and directories of sandboxes that neither side knows any more. */
static int on_sweep(struct keeper *k, struct request *rq)
{
    struct proto_sweep h;
    memcpy(&h, rq->buf, sizeof h);
    if (h.count > MAX_SANDBOXES) return -EPROTO;
    const char **ids = calloc(h.count + 1, sizeof *ids);
    if (!ids) return err_set(&rq->err, -ENOMEM, "out of memory");
    int r = proto_split_strings(rq->buf + sizeof h, (size_t)rq->len - sizeof h, h.count, ids);
    if (r == 0) {
        struct sweep_ctx c = {k, ids, h.count};
        cgroup_list(sweep_cgroup, &c);
        char dir[600];
        snprintf(dir, sizeof dir, "%s/sandboxes", k->host->state_dir);
        DIR *d = opendir(dir);
        for (struct dirent *de; d && (de = readdir(d));)
            if (de->d_name[0] != '.') sweep_one(de->d_name, &c);
        if (d) closedir(d);
    }
    free(ids);
    return r;
}

/* A destroy that fails keeps the entry (the driver's destroy can be run again),
 * so that the server, which keeps the sandbox too, can retry the rm. */
static int on_destroy(struct keeper *k, struct request *rq)
{
    int r = from_driver(rq->e->drv->destroy(rq->e->sb, &rq->err));
    if (r == 0) drop(k, rq->e);
    return r;
}

static int on_stop(struct keeper *k, struct request *rq)
{
    struct sandbox_stats st = {0}; /* its cgroup goes with the stop */
    if (rq->e->drv->stats(rq->e->sb, &st) == 0) rq->values[0] = st.cg.oom_kills;
    int r = from_driver(rq->e->drv->stop(rq->e->sb, &rq->err));
    if (r == 0) drop(k, rq->e);
    return r;
}

static int on_forget(struct keeper *k, struct request *rq)
{
    const char *id = rq->buf;
    if (proto_check_id(id) < 0) return -EPROTO;
    if (find(k, id)) return err_set(&rq->err, -EBUSY, "sandbox %s is not stopped", id);
    int r = from_driver(sandbox_sweep(k->host, id));
    return r < 0
               ? err_set(&rq->err, r, "cannot remove the files of sandbox %s: %s", id, strerror(-r))
               : 0;
}

static int on_exec(struct keeper *k, struct request *rq)
{
    struct proto_exec h;
    memcpy(&h, rq->buf, sizeof h);
    if (memchr(h.cwd, '\0', sizeof h.cwd) == NULL || h.argc == 0 || h.argc > PROTO_MAX_STRINGS ||
        h.envc > PROTO_MAX_STRINGS || h.serve > 1)
        return -EPROTO;
    const char **strs = calloc(h.argc + h.envc + 2, sizeof *strs);
    if (!strs) return err_set(&rq->err, -ENOMEM, "out of memory");
    int r =
        proto_split_strings(rq->buf + sizeof h, (size_t)rq->len - sizeof h, h.argc + h.envc, strs);
    if (r == 0) {
        /* argv ends at its own NULL; env follows after it. */
        memmove(strs + h.argc + 1, strs + h.argc, h.envc * sizeof *strs);
        strs[h.argc] = NULL;
        strs[h.argc + 1 + h.envc] = NULL;
        struct sandbox_exec ex = {.argv = strs,
                                  .envp = strs + h.argc + 1,
                                  .cwd = h.cwd,
                                  .timeout_ms = h.timeout_ms,
                                  .serve = h.serve};
        r = from_driver(rq->e->drv->exec(rq->e->sb, &ex, rq->fds, &rq->err));
        if (r == 0) rq->nfds = 4;
    }
    free(strs);
    return r;
}

static int on_open_file(struct keeper *k, struct request *rq)
{
    const struct proto_file *p = (const void *)rq->buf;
    if (!memchr(p->path, '\0', sizeof p->path) || p->mode > 0777) return -EPROTO;
    if (p->write > 2) return -EPROTO;
    int r = from_driver(
        rq->e->drv->open_file(rq->e->sb, p->path, p->write, p->mode, &rq->fds[0], &rq->err));
    if (r == 0) rq->nfds = 1;
    return r;
}

static int on_rename_file(struct keeper *k, struct request *rq)
{
    const struct proto_rename *p = (const void *)rq->buf;
    if (!memchr(p->from, '\0', sizeof p->from) || !memchr(p->to, '\0', sizeof p->to) ||
        p->keep_mode > 1)
        return -EPROTO;
    return from_driver(rq->e->drv->rename_file(rq->e->sb, p->from, p->to[0] ? p->to : NULL,
                                               p->keep_mode != 0, &rq->err));
}

/* Every field is checked here, whatever the op uses: terminated paths, a known op
 * and flags, a mode without setuid, setgid or sticky bits, and LIST's depth and limit
 * in range (0 for the other ops). */
static bool file_op_valid(const struct proto_file_op *p)
{
    bool list = p->op == PROTO_FILE_LIST;
    return memchr(p->path, '\0', sizeof p->path) && memchr(p->path2, '\0', sizeof p->path2) &&
           p->op >= PROTO_FILE_STAT && p->op < PROTO_FILE_OP_END &&
           (p->flags & ~PROTO_FILE_FLAGS) == 0 && p->mode <= 0777 &&
           (list ? p->depth >= 1 && p->depth <= PROTO_FILE_MAX_DEPTH && p->limit >= 1 &&
                       p->limit <= PROTO_FILE_MAX_LIMIT
                 : p->depth == 0 && p->limit == 0);
}

/* Answers at once with the socket its helper will answer on (proto.h, FILE_OP). */
static int on_file_op(struct keeper *k, struct request *rq)
{
    const struct proto_file_op *p = (const void *)rq->buf;
    if (!file_op_valid(p)) return -EPROTO;
    int r = from_driver(rq->e->drv->file_op(rq->e->sb, p, &rq->fds[0], &rq->err));
    if (r == 0) rq->nfds = 1;
    return r;
}

static int on_freeze(struct keeper *k, struct request *rq)
{
    const struct proto_ref *p = (const void *)rq->buf;
    return from_driver(rq->e->drv->freeze(rq->e->sb, p->flag != 0, &rq->err));
}

static int on_hibernate(struct keeper *k, struct request *rq)
{
    const struct proto_ref *p = (const void *)rq->buf;
    const struct sandbox_driver *drv = rq->e->drv;
    if (!drv->hibernate)
        return err_set(&rq->err, -ENOTSUP, "sandboxes of the %s driver cannot hibernate",
                       drv->name);
    if (p->flag) return from_driver(drv->hibernate(rq->e->sb, &rq->values[0], &rq->err));
    enum proto_from from = PROTO_FROM_IMAGE;
    int r = from_driver(drv->restore(rq->e->sb, &from, &rq->err));
    rq->values[0] = from;
    if (r == 0) {
        rq->fds[0] = drv->watch_fd(rq->e->sb);
        rq->nfds = rq->fds[0] >= 0;
    }
    return r;
}

static bool template_valid(const struct proto_template *p)
{
    size_t n = strnlen(p->server, sizeof p->server);
    bool name = n > 0 && n < sizeof p->server &&
                strchr("abcdefghijklmnopqrstuvwxyz0123456789", p->server[0]) &&
                strspn(p->server, "abcdefghijklmnopqrstuvwxyz0123456789-_") == n;
    return name && strnlen(p->key, sizeof p->key) == PROTO_KEY_LEN - 1 &&
           strspn(p->key, "0123456789abcdef") == PROTO_KEY_LEN - 1 && p->save <= 1;
}

static int on_template(struct keeper *k, struct request *rq)
{
    const struct proto_template *p = (const void *)rq->buf;
    const struct sandbox_driver *drv = rq->e->drv;
    if (!template_valid(p)) return -EPROTO;
    if (!drv->template_save)
        return err_set(&rq->err, -ENOTSUP, "sandboxes of the %s driver have no templates",
                       drv->name);
    if (p->save)
        return from_driver(
            drv->template_save(rq->e->sb, p->key, p->server, &rq->values[0], &rq->err));
    int r = from_driver(drv->template_restore(rq->e->sb, p->key, p->server, rq->fds, &rq->err));
    rq->values[0] = r == 0;
    rq->nfds = r == 0 ? 5 : r == 1 ? 1 : 0;
    if (r == 1) rq->fds[0] = rq->fds[4]; /* started again as it was: its new death fd */
    return r < 0 ? r : 0;
}

static int on_stats(struct keeper *k, struct request *rq)
{
    struct sandbox_stats st = {0};
    int r = from_driver(rq->e->drv->stats(rq->e->sb, &st));
    uint64_t v[5] = {st.cg.cpu_ns, st.cg.memory_bytes, st.cg.pids, st.cg.frozen, st.disk_bytes};
    memcpy(rq->values, v, sizeof v);
    return r;
}

static int on_net_sockets(struct keeper *k, struct request *rq)
{
    int r = from_driver(rq->e->drv->net_sockets(rq->e->sb, rq->fds, &rq->err));
    if (r == 0) rq->nfds = 3;
    return r;
}

/* Copies what fd holds (at most PROTO_TLS_MAX_FILE bytes) into mem; the bytes
 * pass through a buffer that is wiped, since one of the files is a key. */
static int copy_bounded(int fd, int mem)
{
    char buf[16384];
    size_t total = 0;
    int r = 0;
    for (ssize_t n; r == 0 && (n = read(fd, buf, sizeof buf)) != 0;) {
        if (n < 0)
            r = errno == EINTR ? 0 : -errno;
        else if ((total += (size_t)n) > PROTO_TLS_MAX_FILE)
            r = -EFBIG;
        else
            r = write_all(mem, buf, (size_t)n);
    }
    explicit_bzero(buf, sizeof buf);
    return r;
}

/* A sealed memfd with the bytes of a regular file, read now: the server gets a
 * snapshot it can neither change nor use to reach the file. O_NONBLOCK: a FIFO
 * given as the path must not hang the keeper (it is refused as not regular). */
static int snapshot_file(const char *option, const char *path, int *out, err_t *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return err_set(err, errno, "%s %s: %s", option, path, strerror(errno));
    struct stat st;
    int r = fstat(fd, &st) < 0 ? -errno : 0;
    if (r == 0 && !S_ISREG(st.st_mode)) r = -EINVAL;
    int mem = r == 0 ? memfd_create("tls-file", MFD_CLOEXEC | MFD_ALLOW_SEALING) : -1;
    if (r == 0 && mem < 0) r = -errno;
    if (r == 0) r = copy_bounded(fd, mem);
    if (r == 0 &&
        fcntl(mem, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
        r = -errno;
    close(fd);
    if (r == 0) {
        *out = mem;
        return 0;
    }
    if (mem >= 0) close(mem);
    if (r == -EINVAL) return err_set(err, r, "%s %s: not a regular file", option, path);
    if (r == -EFBIG)
        return err_set(err, r, "%s %s: larger than %d bytes", option, path, PROTO_TLS_MAX_FILE);
    return err_set(err, r, "%s %s: %s", option, path, strerror(-r));
}

/* The listener's certificate and key, read again on every call (SIGHUP): the
 * server parses them, the keeper only copies. */
static int on_tls_files(struct keeper *k, struct request *rq)
{
    const struct proto_tls *p = (const void *)rq->buf;
    if (p->flags != 0) return -EPROTO;
    const struct keeper_files *f = k->files;
    if (!f || !f->tls_cert || !f->tls_cert[0] || !f->tls_key || !f->tls_key[0])
        return err_set(&rq->err, -ENOENT, "runtimed was started without --tls-cert and --tls-key");
    int r = snapshot_file("--tls-cert", f->tls_cert, &rq->fds[0], &rq->err);
    if (r == 0 && (r = snapshot_file("--tls-key", f->tls_key, &rq->fds[1], &rq->err)) < 0)
        close(rq->fds[0]);
    if (r == 0) rq->nfds = 2;
    return r;
}

/* The dispatch, from proto.h's table: a request type without a handler here does
 * not build. */
typedef int handler_fn(struct keeper *k, struct request *rq);
#define HANDLER_(T, name, payload, strings, fds, needs) [PROTO_##T] = on_##name,
static handler_fn *const handlers[PROTO_TYPE_END] = {PROTO_REQUESTS(HANDLER_)};
#undef HANDLER_

/* The checks every request of a type gets, from its row: the session's state,
 * the payload's size, and the sandbox it names. */
static int check_request(struct keeper *k, const struct proto_request_info *info,
                         struct request *rq)
{
    if ((info->needs == PROTO_NEEDS_NOTHING) == k->hello) return -EPROTO;
    if (info->strings ? rq->len < (int)info->payload : rq->len != (int)info->payload)
        return -EPROTO;
    if (info->needs != PROTO_NEEDS_SANDBOX) return 0;
    const char *id = rq->buf;
    if (proto_check_id(id) < 0) return -EPROTO;
    rq->e = find(k, id);
    return rq->e ? 0 : err_set(&rq->err, -ENOENT, "no sandbox %s", id);
}

/* Handles one request; returns -EPROTO when the server broke the protocol. */
static int handle(struct keeper *k, const struct proto_hdr *hdr, const char *buf, int len)
{
    const struct proto_request_info *info = proto_request(hdr->type);
    if (!info) return -EPROTO;
    struct request rq = {.type = hdr->type, .buf = buf, .len = len, .fds = {-1, -1, -1, -1}};
    int r = check_request(k, info, &rq);
    if (r == 0) r = handlers[hdr->type](k, &rq);
    if (r == -EPROTO) return r;
    if (r < 0 && !rq.err.msg[0]) err_set(&rq.err, r, "%s failed: %s", info->name, strerror(-r));
    if (r < 0) rq.nfds = 0; /* handlers return descriptors only with success */
    int s = reply(k, hdr->id, r, &rq.err, rq.fds, rq.nfds, rq.values);
    for (unsigned i = 0; i < rq.nfds; i++)
        close(rq.fds[i]);
    return s;
}

/* The server's pid, whose end the keeper may reap with the others: its status
 * is kept, so that runtimed's own tells a supervisor that the server failed. */
static pid_t watched = -1;
static int watched_status = -1;

void keeper_watch(pid_t pid)
{
    watched = pid;
}

int keeper_watched_status(void)
{
    return watched_status;
}

static void reap_children(void)
{
    int st;
    for (pid_t pid; (pid = waitpid(-1, &st, WNOHANG)) > 0;)
        if (pid == watched) watched_status = st;
}

int keeper_main(int sock, const struct sandbox_host *host,
                const struct sandbox_driver *const drivers[PROTO_DRIVER_COUNT],
                const struct keeper_files *files)
{
    struct keeper k = {.sock = sock, .host = host, .drivers = drivers, .files = files};
    /* Making and removing sandboxes is tens of milliseconds of CPU (namespaces,
     * mounts, images); niced, it yields to the server's loop and to the programs
     * in sandboxes (an exec's monitor goes back to 0) when the CPUs are short. */
    if (setpriority(PRIO_PROCESS, 0, KEEPER_NICE) < 0)
        log_warn("keeper: cannot lower its priority: %s", strerror(errno));
    err_t err = {0};
    if (confine_sandbox_prepare(&err) < 0)
        log_warn("keeper: %s; each sandbox will compile its seccomp filter itself", err.msg);
    if (sandbox_init_prepare(&err) < 0)
        log_warn("keeper: %s; each sandbox's pid 1 stays a copy of the keeper", err.msg);
    if (sandbox_agent_install(host, &err) < 0)
        log_warn("keeper: %s; each gvisor sandbox gets a copy of its agent", err.msg);
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL);
    int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
    char *buf = malloc(PROTO_MAX_MSG);
    int status = 0;
    while (buf) {
        struct pollfd p[2] = {{.fd = sock, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
        if (poll(p, 2, -1) < 0 && errno != EINTR) break;
        if (p[1].revents) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof si) > 0) {
            }
            reap_children();
        }
        if (!p[0].revents) continue;
        struct proto_hdr hdr = {0};
        int fds[PROTO_MAX_FDS];
        int len = proto_recv(sock, &hdr, buf, PROTO_MAX_MSG, fds, 0);
        if (len == -ECONNRESET) break; /* the server is gone: so are we */
        if (len < 0 || handle(&k, &hdr, buf, len) < 0) {
            log_error("keeper: malformed %s request from the server; closing",
                      proto_type_name(hdr.type));
            status = 1;
            break;
        }
    }
    for (size_t i = 0; i < k.n; i++)
        k.entries[i].drv->free(k.entries[i].sb); /* sandboxes keep running */
    free(k.entries);
    free(buf);
    if (sfd >= 0) close(sfd);
    return status;
}
