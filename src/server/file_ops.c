/* Runtime Cloud's file-tree operations (proto.h, FILE_OP) from the loop. The keeper
 * answers at once with a socket; the helper that carries the operation out in the
 * sandbox writes one PROTO_RESULT on it when it is done (a walk or a recursive remove
 * may take a while), with the entries of a STAT or LIST in a sealed memfd. That helper
 * runs as the sandbox's user, so its records are read with proto_file_entry_get only,
 * and the memfd must be sealed and within PROTO_FILE_LIST_MAX. */
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server_impl.h"

struct file_op_call {
    struct server *srv;
    char sandbox[PROTO_ID_LEN]; /* looked up again at the end: it may be gone */
    server_file_op_fn *done;
    void *arg;
    int sock; /* the helper's */
    struct event *ev;
};

static void finish(struct file_op_call *c, const struct server_file_result *res, const err_t *err)
{
    struct sbx *sb = server_sandbox_find(c->srv, NULL, c->sandbox);
    if (sb && sb->file_ops) sb->file_ops--;
    c->done(c->srv, res, err, c->arg);
    if (c->ev) event_free(c->ev); /* before its fd is closed */
    if (c->sock >= 0) close(c->sock);
    free(c);
}

/* The records of the memfd the helper sent: sealed, so that what is read is what it
 * wrote, and bounded. */
static int read_entries(int mem, char **out, size_t *len)
{
    const int sealed = F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW;
    struct stat st;
    int seals = fcntl(mem, F_GET_SEALS);
    if (seals < 0 || (seals & sealed) != sealed || fstat(mem, &st) < 0 || st.st_size < 0 ||
        st.st_size > PROTO_FILE_LIST_MAX)
        return -EPROTO;
    *len = (size_t)st.st_size;
    *out = malloc(*len ? *len : 1);
    if (!*out) return -ENOMEM;
    for (size_t got = 0; got < *len;) {
        ssize_t n = pread(mem, *out + got, *len - got, (off_t)got);
        if (n <= 0) {
            free(*out);
            return n < 0 ? -errno : -EPROTO;
        }
        got += (size_t)n;
    }
    return 0;
}

static void on_helper_answer(evutil_socket_t fd, short what, void *arg)
{
    struct file_op_call *c = arg;
    struct proto_hdr hdr;
    struct proto_result res;
    int mem[1] = {-1};
    err_t err = {0};
    int n = proto_recv(c->sock, &hdr, &res, sizeof res, mem, 1);
    if (n != (int)sizeof res || hdr.type != PROTO_RESULT || res.status > 0) {
        if (n >= 0 && mem[0] >= 0) close(mem[0]);
        err_set(&err, -EIO, "the file helper of sandbox %s ended without an answer", c->sandbox);
        return finish(c, NULL, &err);
    }
    res.msg[sizeof res.msg - 1] = '\0';
    struct server_file_result out = {.status = res.status, .msg = res.msg};
    memcpy(out.values, res.values, sizeof out.values);
    char *entries = NULL;
    int r = mem[0] >= 0 ? read_entries(mem[0], &entries, &out.entries_len) : 0;
    if (mem[0] >= 0) close(mem[0]);
    if (r < 0) {
        err_set(&err, -EIO, "the file helper of sandbox %s sent unreadable entries", c->sandbox);
        return finish(c, NULL, &err);
    }
    out.entries = entries;
    finish(c, &out, NULL);
    free(entries);
}

/* The keeper's answer: the helper's socket, to wait on. */
static void on_started(struct server *srv, const struct proto_result *res, int *fds, unsigned nfds,
                       void *arg)
{
    struct file_op_call *c = arg;
    err_t err = {0};
    if (server_keeper_fds(res, fds, nfds, 1, "file helper", &err) < 0) return finish(c, NULL, &err);
    c->sock = fds[0];
    c->ev = event_new(srv->base, c->sock, EV_READ, on_helper_answer, c);
    if (!c->ev || event_add(c->ev, NULL) < 0) {
        err_set(&err, -ENOMEM, "out of memory");
        finish(c, NULL, &err);
    }
}

int server_file_op(struct server *srv, struct sbx *sb, const struct proto_file_op *op,
                   server_file_op_fn *done, void *arg, err_t *err)
{
    if (sb->file_ops >= SERVER_FILE_OPS_PER_SANDBOX)
        return err_set(err, -EAGAIN,
                       "%d file operations are under way in sandbox %s; try again when one "
                       "has ended",
                       SERVER_FILE_OPS_PER_SANDBOX, sb->id);
    struct proto_file_op p = *op;
    memcpy(p.id, sb->id, sizeof p.id);
    struct file_op_call *c = malloc(sizeof *c);
    if (!c) return err_set(err, -ENOMEM, "out of memory");
    *c = (struct file_op_call){.srv = srv, .done = done, .arg = arg, .sock = -1};
    memcpy(c->sandbox, sb->id, sizeof c->sandbox);
    int r = server_keeper_send(srv, PROTO_FILE_OP, &p, sizeof p, 1, on_started, c, err);
    if (r < 0) {
        free(c);
        return r;
    }
    sb->file_ops++;
    return 0;
}
