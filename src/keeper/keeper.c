#include "keeper.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../mitm/mitm.h"
#include "../proto/proto.h"

#define MAX_SANDBOXES SANDBOX_MAX_SLOTS

struct entry {
    char id[PROTO_ID_LEN];
    uint32_t slot;
    struct sandbox *sb;
};

struct keeper {
    int sock;
    const struct sandbox_host *host;
    const struct sandbox_driver *drv;
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

static int add(struct keeper *k, const struct sandbox_spec *spec, struct sandbox *sb)
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
    e->sb = sb;
    return 0;
}

static void drop(struct keeper *k, struct entry *e)
{
    k->drv->free(e->sb);
    *e = k->entries[--k->n];
}

static int reply(struct keeper *k, uint32_t id, int status, const err_t *err, const int *fds,
                 unsigned nfds, const uint64_t *values)
{
    struct proto_result res = {.status = status};
    if (status < 0 && err) snprintf(res.msg, sizeof res.msg, "%s", err->msg);
    if (values) memcpy(res.values, values, sizeof res.values);
    return proto_send(k->sock, PROTO_RESULT, id, &res, sizeof res, fds, nfds);
}

/* The keeper re-checks every field: ranges, terminated strings, unique slots. */
static int check_spec(const struct proto_sandbox *p, struct sandbox_spec *spec, err_t *err)
{
    if (proto_check_id(p->id) < 0) return err_set(err, -EINVAL, "bad sandbox id");
    if (p->slot >= SANDBOX_MAX_SLOTS) return err_set(err, -EINVAL, "bad slot");
    if (p->memory_mib < 16 || p->memory_mib > (1u << 22) || p->cpu_milli < 10 ||
        p->cpu_milli > 1024000 || p->disk_mib < 16 || p->disk_mib > (1u << 24) ||
        p->pids_max < 8 || p->pids_max > (1u << 22))
        return err_set(err, -EINVAL, "sandbox limits out of range");
    *spec = (struct sandbox_spec){.slot = p->slot, .memory_mib = p->memory_mib,
                                  .cpu_milli = p->cpu_milli, .disk_mib = p->disk_mib,
                                  .pids_max = p->pids_max};
    memcpy(spec->id, p->id, sizeof spec->id);
    return 0;
}

static int on_create(struct keeper *k, const void *buf, int len, bool adopt, uint64_t *values,
                     err_t *err)
{
    struct sandbox_spec spec;
    if (len != (int)sizeof(struct proto_sandbox)) return -EPROTO;
    int r = check_spec(buf, &spec, err);
    if (r < 0) return r;
    if (find(k, spec.id)) return err_set(err, -EEXIST, "sandbox %s exists", spec.id);
    if (slot_taken(k, spec.slot)) return err_set(err, -EEXIST, "slot %u is taken", spec.slot);
    struct sandbox *sb = NULL;
    values[0] = 0;
    if (adopt) {
        err_t ignored = {0};
        r = from_driver(k->drv->adopt(k->host, &spec, &sb, &ignored));
        values[0] = r == 0 ? 1 : 2;
    }
    if (!sb) r = from_driver(k->drv->create(k->host, &spec, adopt, &sb, err));
    if (r < 0) return r;
    if (add(k, &spec, sb) < 0) {
        k->drv->destroy(sb, NULL);
        k->drv->free(sb);
        return err_set(err, -ENOMEM, "out of memory");
    }
    return 0;
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
    c->k->drv->sweep(c->k->host, id);
}

static void sweep_cgroup(const char *name, void *arg)
{
    struct sweep_ctx *c = arg;
    sweep_one(sandbox_id_of_cgroup(c->k->host, name), arg);
}

/* Removes cgroups and directories of sandboxes that neither side knows any more. */
static int on_sweep(struct keeper *k, const char *buf, int len, err_t *err)
{
    if (len < (int)sizeof(struct proto_sweep)) return -EPROTO;
    struct proto_sweep h;
    memcpy(&h, buf, sizeof h);
    if (h.count > MAX_SANDBOXES) return -EPROTO;
    const char **ids = calloc(h.count + 1, sizeof *ids);
    if (!ids) return err_set(err, -ENOMEM, "out of memory");
    int r = proto_split_strings(buf + sizeof h, (size_t)len - sizeof h, h.count, ids);
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

static struct entry *find_ref(struct keeper *k, const void *buf, int len, uint32_t *flag)
{
    if (len != (int)sizeof(struct proto_ref)) return NULL;
    const struct proto_ref *p = buf;
    if (proto_check_id(p->id) < 0) return NULL;
    if (flag) *flag = p->flag;
    return find(k, p->id);
}

static int on_exec(struct keeper *k, const char *buf, int len, int fds[4], err_t *err)
{
    struct proto_exec h;
    if (len < (int)sizeof h) return -EPROTO;
    memcpy(&h, buf, sizeof h);
    if (proto_check_id(h.id) < 0 || memchr(h.cwd, '\0', sizeof h.cwd) == NULL || h.argc == 0 ||
        h.argc > PROTO_MAX_STRINGS || h.envc > PROTO_MAX_STRINGS)
        return -EPROTO;
    struct entry *e = find(k, h.id);
    if (!e) return err_set(err, -ENOENT, "no sandbox %s", h.id);
    const char **strs = calloc(h.argc + h.envc + 2, sizeof *strs);
    if (!strs) return err_set(err, -ENOMEM, "out of memory");
    int r = proto_split_strings(buf + sizeof h, (size_t)len - sizeof h, h.argc + h.envc, strs);
    if (r == 0) {
        /* argv ends at its own NULL; env follows after it. */
        memmove(strs + h.argc + 1, strs + h.argc, h.envc * sizeof *strs);
        strs[h.argc] = NULL;
        strs[h.argc + 1 + h.envc] = NULL;
        struct sandbox_exec ex = {.argv = strs, .envp = strs + h.argc + 1, .cwd = h.cwd,
                                  .timeout_ms = h.timeout_ms};
        r = from_driver(k->drv->exec(e->sb, &ex, fds, err));
    }
    free(strs);
    return r;
}

static int on_open(struct keeper *k, const void *buf, int len, int *fd, err_t *err)
{
    if (len != (int)sizeof(struct proto_file)) return -EPROTO;
    const struct proto_file *p = buf;
    if (proto_check_id(p->id) < 0 || !memchr(p->path, '\0', sizeof p->path) || p->mode > 0777)
        return -EPROTO;
    struct entry *e = find(k, p->id);
    if (!e) return err_set(err, -ENOENT, "no sandbox %s", p->id);
    return from_driver(k->drv->open_file(e->sb, p->path, p->write != 0, p->mode, fd, err));
}

/* Signs a leaf for the server and hands it back in a memfd (the reply itself
 * has no room for a certificate). */
static int on_sign(struct keeper *k, const void *buf, int len, int *fd, err_t *err)
{
    if (len != (int)sizeof(struct proto_sign)) return -EPROTO;
    const struct proto_sign *p = buf;
    if (!memchr(p->name, '\0', sizeof p->name) || p->spki_len == 0 ||
        p->spki_len > sizeof p->spki)
        return -EPROTO;
    if (!k->host->ca) return err_set(err, -ENOTSUP, "interception is not set up");
    uint8_t *der = NULL;
    size_t der_len = 0;
    int r = mitm_ca_sign(k->host->ca, p->spki, p->spki_len, p->name, &der, &der_len, err);
    if (r < 0) return from_driver(r);
    int m = memfd_create("leaf", MFD_CLOEXEC);
    if (m < 0 || write_all(m, der, der_len) < 0) r = err_set(err, -EIO, "cannot pass the leaf");
    free(der);
    if (r < 0) {
        if (m >= 0) close(m);
        return r;
    }
    *fd = m;
    return 0;
}

/* Handles one request; returns -EPROTO when the server broke the protocol. */
static int handle(struct keeper *k, const struct proto_hdr *hdr, const char *buf, int len)
{
    err_t err = {0};
    uint64_t values[5] = {0};
    int fds[4] = {-1, -1, -1, -1};
    unsigned nfds = 0;
    uint32_t flag = 0;
    struct entry *e;
    int r;
    if (!k->hello && hdr->type != PROTO_HELLO) return -EPROTO;
    switch ((enum proto_type)hdr->type) {
    case PROTO_HELLO: {
        struct proto_hello h;
        if (len != (int)sizeof h || k->hello) return -EPROTO;
        memcpy(&h, buf, sizeof h);
        if (h.version != PROTO_VERSION) return -EPROTO;
        k->hello = true;
        r = 0;
        break;
    }
    case PROTO_CREATE:
    case PROTO_ADOPT:
        r = on_create(k, buf, len, hdr->type == PROTO_ADOPT, values, &err);
        if (r == 0) {
            const struct proto_sandbox *p = (const void *)buf;
            fds[0] = k->drv->watch_fd(find(k, p->id)->sb);
            nfds = fds[0] >= 0;
        }
        break;
    case PROTO_SWEEP:
        r = on_sweep(k, buf, len, &err);
        break;
    case PROTO_DESTROY:
        if (!(e = find_ref(k, buf, len, NULL))) return -EPROTO;
        r = from_driver(k->drv->destroy(e->sb, &err));
        drop(k, e);
        break;
    case PROTO_EXEC:
        r = on_exec(k, buf, len, fds, &err);
        if (r == 0) nfds = 4;
        break;
    case PROTO_OPEN_FILE:
        r = on_open(k, buf, len, &fds[0], &err);
        if (r == 0) nfds = 1;
        break;
    case PROTO_NET_SOCKETS:
        if (!(e = find_ref(k, buf, len, NULL))) return -EPROTO;
        r = from_driver(k->drv->net_sockets(e->sb, fds, &err));
        if (r == 0) nfds = 3;
        break;
    case PROTO_SIGN:
        r = on_sign(k, buf, len, &fds[0], &err);
        if (r == 0) nfds = 1;
        break;
    case PROTO_FREEZE:
        if (!(e = find_ref(k, buf, len, &flag))) return -EPROTO;
        r = from_driver(k->drv->freeze(e->sb, flag != 0, &err));
        break;
    case PROTO_STATS: {
        struct sandbox_stats st = {0};
        if (!(e = find_ref(k, buf, len, NULL))) return -EPROTO;
        r = from_driver(k->drv->stats(e->sb, &st));
        values[0] = st.cg.cpu_ns;
        values[1] = st.cg.memory_bytes;
        values[2] = st.cg.pids;
        values[3] = st.cg.frozen;
        values[4] = st.disk_bytes;
        break;
    }
    case PROTO_RESULT:
    case PROTO_TYPE_END:
    default:
        return -EPROTO;
    }
    if (r == -EPROTO) return r;
    if (r < 0 && !err.msg[0]) err_set(&err, r, "%s failed: %s", proto_type_name(hdr->type),
                                      strerror(-r));
    int s = reply(k, hdr->id, r, &err, fds, nfds, values);
    for (unsigned i = 0; i < nfds; i++) close(fds[i]);
    return s;
}

static void reap_children(void)
{
    while (waitpid(-1, NULL, WNOHANG) > 0) {}
}

int keeper_main(int sock, const struct sandbox_host *host, const struct sandbox_driver *drv)
{
    struct keeper k = {.sock = sock, .host = host, .drv = drv};
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
            while (read(sfd, &si, sizeof si) > 0) {}
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
    for (size_t i = 0; i < k.n; i++) drv->free(k.entries[i].sb); /* sandboxes keep running */
    free(k.entries);
    free(buf);
    if (sfd >= 0) close(sfd);
    return status;
}
