/* runtime-shim: a gvisor sandbox's end of the agent's channel, outside gVisor (frame.h
 * says why it exists). The keeper starts it in the holder's namespaces and the
 * sandbox's cgroup, so it is charged to the sandbox, frozen with it and ended with it,
 * as the sandbox root's host uid with no capability, under the sandbox's seccomp filter
 * (gvisor.c, start_shim).
 *
 * Descriptors it starts with:
 *   3  a listening SOCK_SEQPACKET socket (STATE/sandboxes/<id>/shim.sock, root's only)
 *   4  the agent's stdin (we write)      5  the agent's stdout (we read)
 *   6  the agent's own end of 4          7  the agent's own end of 5
 *   8  a pidfd of gVisor's sentry
 * 6 and 7 are kept for a restore, which gives the agent the same pipes again. The sentry
 * ending is the sandbox ending (out of memory, killed): every program still known is
 * reported killed (SIGKILL) and the shim exits, unless the keeper said it ends for a
 * checkpoint (SHIM_HIBERNATE); after a restore the keeper hands it the new sentry's
 * pidfd (SHIM_WATCH). SIGTERM, the keeper's stop, ends it the same way: a keeper that
 * stops the sandbox as soon as it sees the sentry die must not leave a caller with no
 * status because it won the race against us.
 *
 * Each connection on 3 is one request (enum shim_request). SHIM_EXEC, a struct
 * frame_spawn with its strings, is answered with an int32 (0 or -errno) and, on 0, four
 * pipes as SCM_RIGHTS: the program's stdin (write end), stdout and stderr (read ends)
 * and a status pipe that carries one struct proto_exec_status when it ends. The shim
 * enforces the timeout, and stops a program whose status pipe's reader is gone (the
 * daemon no longer wants it), as the ns driver's monitor does. SHIM_ADOPT answers the
 * same for a program the agent already runs (a template's, template.c): its id is the
 * one the template's shim gave it. SHIM_SERVE takes an MCP server the keeper started in
 * a container of its own (serve.c): its supervisor's frames come on a pipe of their own,
 * and only its stderr and status pipes are the shim's to answer. It never blocks; see agent.c for
 * the pausing. */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>

#include "../../proto/proto.h"
#include "frame.h"

#define LISTEN_FD 3
#define AGENT_IN 4
#define AGENT_OUT 5
#define AGENT_IN_THEIRS 6
#define AGENT_OUT_THEIRS 7
#define SENTRY_FD 8
#define MAX_EXECS 4096
/* A program stopped (its timeout, or the daemon let it go) that has not ended this long
 * after its SIGKILL is reported killed all the same: under a fork storm gVisor may take
 * long to run the agent, and the caller's answer must not wait for it. */
#define KILL_GRACE_MS 2000

struct exec {
    uint32_t id;
    int in;     /* the daemon writes the program's stdin here; we read */
    int out[2]; /* we write its stdout and stderr here */
    int status; /* we write its proto_exec_status here */
    struct queue q[2];
    bool out_ended[2]; /* the agent said the stream ended: close once written */
    bool paused;       /* the agent asked us to stop sending its input */
    bool holding;      /* we asked the agent to stop sending its output */
    bool ended;        /* the status is known, written once the outputs are */
    uint64_t start_ms, deadline_ms;
    uint64_t kill_ms; /* when stopped: reported killed at KILL_GRACE_MS after it */
    struct proto_exec_status st;
    /* An MCP server in a container of its own (SHIM_SERVE): its supervisor's frames come
     * on ctl, its stdin and stdout are the daemon's directly (in and out[0] stay -1), and
     * ends are the container's stdin, stdout and stderr, kept for a restore. */
    int ctl;
    struct queue ctl_q;
    int ends[3];
    char name[SHIM_NAME_MAX];
};

static struct exec *execs[MAX_EXECS];
static int nexecs;
static uint32_t next_id = 1;
static struct queue to_agent, from_agent;
static int sentry = SENTRY_FD; /* -1 while hibernated */
static int sigterm = -1;       /* a signalfd of SIGTERM (blocked): the keeper's stop */

static uint64_t clock_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

static void close_fd(int *fd)
{
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

static void send_frame(uint8_t type, uint32_t id, const void *p, uint32_t len)
{
    if (queue_frame(&to_agent, type, id, 0, p, len) < 0) _exit(70);
}

/* Still ours (compares the pointer only: it may be freed). */
static bool alive(const struct exec *e)
{
    for (int i = 0; i < nexecs; i++)
        if (execs[i] == e) return true;
    return false;
}

static struct exec *find(uint32_t id)
{
    for (int i = 0; i < nexecs; i++)
        if (execs[i]->id == id) return execs[i];
    return NULL;
}

/* A served program's container ends: nothing will ask for them again. */
static void drop_ends(struct exec *e)
{
    close_fd(&e->ctl);
    for (int i = 0; i < 3; i++)
        close_fd(&e->ends[i]);
}

static void forget(struct exec *e)
{
    close_fd(&e->in);
    close_fd(&e->status);
    drop_ends(e);
    queue_free(&e->ctl_q);
    for (int s = 0; s < 2; s++) {
        close_fd(&e->out[s]);
        queue_free(&e->q[s]);
    }
    for (int i = 0; i < nexecs; i++)
        if (execs[i] == e) execs[i] = execs[--nexecs];
    free(e);
}

/* The status goes once the output written before it has: the daemon reads the pipes
 * that are ready when the status comes, and its last words must be among them. */
static void maybe_report(struct exec *e)
{
    if (!e->ended || queue_size(&e->q[0]) || queue_size(&e->q[1])) return;
    if (e->status >= 0) {
        e->st.duration_ms = clock_ms() - e->start_ms;
        if (write(e->status, &e->st, sizeof e->st) < 0) { /* nobody waits for it */
        }
        close_fd(&e->status);
    }
    if (e->out[0] < 0 && e->out[1] < 0) forget(e);
}

static bool served(const struct exec *e)
{
    return e->name[0] != '\0';
}

/* A served program's supervisor kills it once nobody reads its frames (drop_ends): it
 * says nothing more, and is reported killed at once. */
static void stop(struct exec *e)
{
    int32_t sig = SIGKILL;
    if (served(e))
        drop_ends(e);
    else
        send_frame(FRAME_SIGNAL, e->id, &sig, sizeof sig);
    e->deadline_ms = 0;
    e->kill_ms = clock_ms();
}

static uint64_t kill_grace_ms(const struct exec *e)
{
    return served(e) ? 0 : KILL_GRACE_MS;
}

/* Its grace is over: reported killed now; what the agent says of it later is dropped. */
static void given_up(struct exec *e)
{
    e->st.exit_code = 128 + SIGKILL;
    e->st.signal = SIGKILL;
    e->ended = true;
    for (int s = 0; s < 2; s++) {
        queue_free(&e->q[s]);
        close_fd(&e->out[s]);
    }
    maybe_report(e);
}

/* ---- the keeper's requests ---- */

static int send_answer(int conn, int32_t status, const int *fds, int nfds)
{
    struct iovec iov = {.iov_base = &status, .iov_len = sizeof status};
    char ctl[CMSG_SPACE(4 * sizeof(int))] = {0};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (nfds) {
        msg.msg_control = ctl;
        msg.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
        memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
    }
    return sendmsg(conn, &msg, MSG_NOSIGNAL) < 0 ? -errno : 0;
}

/* Our ends and the daemon's four (stdin's write end, stdout's and stderr's read ends,
 * status's read end); a served program's stdin and stdout are not ours (-1 both sides). */
static int make_pipes(struct exec *e, int theirs[4], bool serve)
{
    int p[4][2] = {{-1, -1}, {-1, -1}, {-1, -1}, {-1, -1}};
    for (int i = serve ? 2 : 0; i < 4; i++)
        if (pipe2(p[i], O_CLOEXEC) < 0) {
            int err = -errno;
            for (int j = 0; j < i; j++)
                for (int k = 0; k < 2; k++)
                    close_fd(&p[j][k]);
            return err;
        }
    e->in = p[0][0];
    theirs[0] = p[0][1];
    e->out[0] = p[1][1];
    theirs[1] = p[1][0];
    e->out[1] = p[2][1];
    theirs[2] = p[2][0];
    e->status = p[3][1];
    theirs[3] = p[3][0];
    for (int i = serve ? 2 : 0; i < 3; i++) {
        int fd = i == 0 ? e->in : e->out[i - 1];
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    }
    return 0;
}

/* A new entry for program id, with its pipes; NULL with *r set when there cannot be one. */
static struct exec *add_exec(uint32_t id, int theirs[4], bool serve, int *r)
{
    struct exec *e = NULL;
    *r = nexecs == MAX_EXECS ? -EAGAIN : find(id) ? -EEXIST : 0;
    if (*r == 0 && !(e = calloc(1, sizeof *e))) *r = -ENOMEM;
    if (*r < 0) return NULL;
    *e = (struct exec){
        .id = id, .in = -1, .out = {-1, -1}, .status = -1, .ctl = -1, .ends = {-1, -1, -1}};
    if ((*r = make_pipes(e, theirs, serve)) < 0) {
        free(e);
        return NULL;
    }
    e->start_ms = clock_ms();
    e->st.exit_code = -1;
    execs[nexecs++] = e;
    return e;
}

static void answer_pipes(int conn, int r, int theirs[4])
{
    send_answer(conn, r, theirs, r == 0 ? 4 : 0);
    for (int i = 0; i < 4; i++)
        close_fd(&theirs[i]);
}

static void on_exec(int conn, const char *req, ssize_t n)
{
    struct frame_spawn s;
    int theirs[4] = {-1, -1, -1, -1};
    int r = n < (ssize_t)sizeof s ? -EPROTO : 0;
    struct exec *e = r == 0 ? add_exec(next_id, theirs, false, &r) : NULL;
    if (e) {
        next_id++;
        memcpy(&s, req, sizeof s);
        e->deadline_ms = s.timeout_ms ? e->start_ms + s.timeout_ms : 0;
        send_frame(FRAME_SPAWN, e->id, req, (uint32_t)n);
    }
    answer_pipes(conn, r, theirs);
}

/* The program a template's image brought keeps the id the template's shim gave it; ours
 * go on above it. */
static void on_adopt(int conn, const char *req, ssize_t n)
{
    uint32_t id = 0;
    int theirs[4] = {-1, -1, -1, -1};
    int r = n == (ssize_t)sizeof id ? 0 : -EPROTO;
    if (r == 0) memcpy(&id, req, sizeof id);
    if (r == 0 && id == 0) r = -EINVAL;
    if (r == 0 && add_exec(id, theirs, false, &r) && id >= next_id) next_id = id + 1;
    answer_pipes(conn, r, theirs);
}

/* An MCP server the keeper started in a container of its own (serve.c, gvisor_serve):
 * req is its container's name, passed its supervisor's frames (read end) and the
 * container's stdin, stdout and stderr. Answers its stderr and status pipes. */
static void on_serve(int conn, const char *req, ssize_t n, int passed[4], int npassed)
{
    int theirs[4] = {-1, -1, -1, -1};
    int r =
        npassed == 4 && n > 0 && n < SHIM_NAME_MAX && !memchr(req, '\0', (size_t)n) ? 0 : -EPROTO;
    struct exec *e = r == 0 ? add_exec(next_id, theirs, true, &r) : NULL;
    if (e) {
        next_id++;
        memcpy(e->name, req, (size_t)n);
        e->ctl = passed[0];
        fcntl(e->ctl, F_SETFL, fcntl(e->ctl, F_GETFL) | O_NONBLOCK);
        for (int i = 0; i < 3; i++)
            e->ends[i] = passed[i + 1];
        for (int i = 0; i < 4; i++)
            passed[i] = -1;
        e->out_ended[0] = true;
    }
    send_answer(conn, r, theirs + 2, r == 0 ? 2 : 0);
    for (int i = 0; i < 4; i++)
        close_fd(&theirs[i]);
}

/* The container ends of the running server named req, for its restore. */
static void on_server_ends(int conn, const char *req, ssize_t n)
{
    for (int i = 0; i < nexecs; i++) {
        struct exec *e = execs[i];
        if (served(e) && e->ends[0] >= 0 && n == (ssize_t)strlen(e->name) &&
            memcmp(e->name, req, (size_t)n) == 0)
            return (void)send_answer(conn, 0, e->ends, 3);
    }
    send_answer(conn, -ENOENT, NULL, 0);
}

static int only_program(void)
{
    int running = 0;
    uint32_t id = 0;
    for (int i = 0; i < nexecs; i++)
        if (!execs[i]->ended) running++, id = execs[i]->id;
    return running > 1 ? -EBUSY : (int)id;
}

/* One request into req (its length, or -1), and the descriptors it carried (at most 4:
 * *npassed of them, the rest -1). */
static ssize_t receive(int conn, char *req, size_t size, int passed[4], int *npassed)
{
    struct iovec iov = {.iov_base = req, .iov_len = size};
    char ctl[CMSG_SPACE(4 * sizeof(int))];
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
    ssize_t n = recvmsg(conn, &msg, MSG_CMSG_CLOEXEC);
    struct cmsghdr *c = n >= 0 ? CMSG_FIRSTHDR(&msg) : NULL;
    *npassed = 0;
    for (int i = 0; i < 4; i++)
        passed[i] = -1;
    if (c && c->cmsg_type == SCM_RIGHTS) {
        *npassed = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        memcpy(passed, CMSG_DATA(c), (size_t)*npassed * sizeof(int));
    }
    return (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ? -1 : n;
}

/* The sentry ended with no checkpoint: so did every program. */
static void __attribute__((noreturn)) sandbox_ended(void)
{
    for (int i = 0; i < nexecs; i++) {
        struct exec *e = execs[i];
        if (e->status < 0) continue;
        e->st.exit_code = 128 + SIGKILL;
        e->st.signal = SIGKILL;
        e->st.duration_ms = clock_ms() - e->start_ms;
        if (write(e->status, &e->st, sizeof e->st) < 0) { /* nobody waits for it */
        }
    }
    _exit(0);
}

static void on_request(int conn)
{
    static char req[FRAME_MAX + sizeof(uint32_t)];
    int passed[4], npassed;
    ssize_t n = receive(conn, req, sizeof req, passed, &npassed);
    uint32_t kind = 0;
    if (n >= (ssize_t)sizeof kind) memcpy(&kind, req, sizeof kind);
    if (kind == SHIM_EXEC)
        on_exec(conn, req + sizeof kind, n - (ssize_t)sizeof kind);
    else if (kind == SHIM_ADOPT)
        on_adopt(conn, req + sizeof kind, n - (ssize_t)sizeof kind);
    else if (kind == SHIM_SERVE)
        on_serve(conn, req + sizeof kind, n - (ssize_t)sizeof kind, passed, npassed);
    else if (kind == SHIM_SERVER_ENDS)
        on_server_ends(conn, req + sizeof kind, n - (ssize_t)sizeof kind);
    else if (kind == SHIM_ONLY_PROGRAM)
        send_answer(conn, only_program(), NULL, 0);
    else if (kind == SHIM_AGENT_ENDS)
        send_answer(conn, 0, (int[2]){AGENT_IN_THEIRS, AGENT_OUT_THEIRS}, 2);
    else if (kind == SHIM_HIBERNATE || (kind == SHIM_WATCH && npassed == 1)) {
        close_fd(&sentry);
        if (kind == SHIM_WATCH) sentry = passed[0], passed[0] = -1;
        send_answer(conn, 0, NULL, 0);
    } else
        send_answer(conn, -EPROTO, NULL, 0);
    for (int i = 0; i < 4; i++)
        close_fd(&passed[i]);
}

/* ---- the agent's frames ---- */

static void on_output(struct exec *e, int stream, const char *data, uint32_t len)
{
    if (stream < 0 || stream > 1) return;
    if (len == 0) {
        e->out_ended[stream] = true;
    } else if (e->out[stream] >= 0 && queue_push(&e->q[stream], data, len) < 0) {
        _exit(70);
    }
    if (!e->holding && queue_size(&e->q[stream]) > FRAME_PAUSE_AT) {
        if (!served(e)) send_frame(FRAME_PAUSE, e->id, NULL, 0); /* else its frames wait */
        e->holding = true;
    }
}

/* A frame about program e, from the agent or from its supervisor. */
static void on_program_frame(struct exec *e, const struct frame_hdr *h, const char *payload)
{
    int32_t v = 0;
    if ((h->type == FRAME_STARTED || h->type == FRAME_EXIT) && h->len == sizeof v)
        memcpy(&v, payload, sizeof v);
    switch (h->type) {
    case FRAME_STARTED:
        if (v == 0) return;
        e->st.start_errno = v; /* exit_code stays -1 */
        e->ended = true;
        e->out_ended[0] = e->out_ended[1] = true;
        close_fd(&e->out[0]);
        close_fd(&e->out[1]);
        drop_ends(e); /* a served one's container has ended */
        return maybe_report(e);
    case FRAME_OUT:
        return on_output(e, h->stream - 1, payload, h->len);
    case FRAME_EXIT:
        e->st.exit_code = WIFEXITED(v) ? WEXITSTATUS(v) : 128 + WTERMSIG(v);
        e->st.signal = WIFSIGNALED(v) ? WTERMSIG(v) : 0;
        e->ended = true;
        drop_ends(e);
        return maybe_report(e);
    case FRAME_PAUSE:
    case FRAME_RESUME:
        e->paused = h->type == FRAME_PAUSE;
        return;
    }
}

static void on_agent_frame(const struct frame_hdr *h, const char *payload)
{
    struct exec *e = find(h->id);
    if (e && !served(e)) on_program_frame(e, h, payload);
}

/* What a served program's supervisor said. Its end unheard (not while we hold its
 * container's stderr, unless gVisor ended it) is its end: reported killed. */
static void read_ctl(struct exec *e)
{
    ssize_t n = queue_read(&e->ctl_q, e->ctl, FRAME_DATA_MAX);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) {
        drop_ends(e);
        return given_up(e);
    }
    struct frame_hdr h;
    const char *payload;
    int r = 0;
    while (alive(e) && e->ctl >= 0 && (r = queue_next_frame(&e->ctl_q, &h, &payload)) == 1)
        on_program_frame(e, &h, payload);
    if (r < 0) stop(e); /* not a supervisor's frames */
}

static void read_agent(void)
{
    ssize_t n = queue_read(&from_agent, AGENT_OUT, FRAME_DATA_MAX);
    if (n == 0) _exit(0); /* the agent's end is gone: so is the sandbox */
    if (n < 0) return;
    struct frame_hdr h;
    const char *payload;
    int r;
    while ((r = queue_next_frame(&from_agent, &h, &payload)) == 1)
        on_agent_frame(&h, payload);
    if (r < 0) _exit(71);
}

/* ---- the daemon's side of each exec ---- */

static void forward_input(struct exec *e)
{
    char buf[FRAME_DATA_MAX];
    ssize_t n = read(e->in, buf, sizeof buf);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) close_fd(&e->in);
    send_frame(FRAME_STDIN, e->id, buf, n > 0 ? (uint32_t)n : 0);
}

static void write_output(struct exec *e, int s)
{
    if (queue_flush(&e->q[s], e->out[s]) < 0) { /* nobody reads it: dropped from now */
        queue_free(&e->q[s]);
        close_fd(&e->out[s]);
    }
    if (e->holding && queue_size(&e->q[0]) < FRAME_RESUME_AT &&
        queue_size(&e->q[1]) < FRAME_RESUME_AT) {
        if (!served(e)) send_frame(FRAME_RESUME, e->id, NULL, 0);
        e->holding = false;
    }
    if (e->out_ended[s] && !queue_size(&e->q[s])) close_fd(&e->out[s]);
}

enum role {
    R_LISTEN,
    R_AGENT_IN,
    R_AGENT_OUT,
    R_SENTRY,
    R_SIGTERM,
    R_IN,
    R_OUT0,
    R_OUT1,
    R_STATUS,
    R_CTL
};
#define FIXED_FDS 5 /* the first five of a turn's fds */

static void turn(void)
{
    static struct pollfd fds[FIXED_FDS + 5 * MAX_EXECS];
    static struct exec *owner[FIXED_FDS + 5 * MAX_EXECS];
    static enum role role[FIXED_FDS + 5 * MAX_EXECS];
    int n = 0;
    uint64_t now = clock_ms(), wake = 0;
    role[n] = R_LISTEN;
    fds[n++] = (struct pollfd){.fd = LISTEN_FD, .events = POLLIN};
    role[n] = R_AGENT_IN;
    fds[n++] = (struct pollfd){.fd = AGENT_IN, .events = queue_size(&to_agent) ? POLLOUT : 0};
    role[n] = R_AGENT_OUT;
    fds[n++] = (struct pollfd){.fd = AGENT_OUT, .events = POLLIN};
    role[n] = R_SENTRY; /* -1 while hibernated: poll skips it */
    fds[n++] = (struct pollfd){.fd = sentry, .events = POLLIN};
    role[n] = R_SIGTERM;
    fds[n++] = (struct pollfd){.fd = sigterm, .events = POLLIN};
    for (int i = 0; i < nexecs; i++) {
        struct exec *e = execs[i];
        if (e->deadline_ms && e->deadline_ms <= now) {
            e->st.timed_out = 1;
            stop(e);
        }
        if (e->deadline_ms && (!wake || e->deadline_ms < wake)) wake = e->deadline_ms;
        if (e->kill_ms && !e->ended && e->kill_ms + kill_grace_ms(e) <= now) {
            given_up(e);
            i--; /* it was forgotten: execs[i] is another now */
            continue;
        }
        uint64_t grace_end = e->kill_ms && !e->ended ? e->kill_ms + kill_grace_ms(e) : 0;
        if (grace_end && (!wake || grace_end < wake)) wake = grace_end;
        if (e->in >= 0 && !e->paused) {
            owner[n] = e, role[n] = R_IN;
            fds[n++] = (struct pollfd){.fd = e->in, .events = POLLIN};
        }
        for (int s = 0; s < 2; s++)
            if (e->out[s] >= 0 && queue_size(&e->q[s])) {
                owner[n] = e, role[n] = s ? R_OUT1 : R_OUT0;
                fds[n++] = (struct pollfd){.fd = e->out[s], .events = POLLOUT};
            }
        if (e->ctl >= 0 && !e->holding) {
            owner[n] = e, role[n] = R_CTL;
            fds[n++] = (struct pollfd){.fd = e->ctl, .events = POLLIN};
        }
        if (e->status >= 0 && !e->ended && !e->kill_ms) { /* POLLERR once its reader is gone */
            owner[n] = e, role[n] = R_STATUS;
            fds[n++] = (struct pollfd){.fd = e->status, .events = 0};
        }
    }
    int timeout = wake ? (int)(wake - now) : -1;
    if (poll(fds, (nfds_t)n, timeout) <= 0) return;
    if (fds[4].revents) sandbox_ended();
    if (fds[1].revents && queue_flush(&to_agent, AGENT_IN) < 0) _exit(0);
    for (int i = FIXED_FDS; i < n; i++) {
        struct exec *e = owner[i];
        if (!fds[i].revents || !alive(e)) continue; /* forgotten in this turn */
        if (role[i] == R_IN)
            forward_input(e);
        else if (role[i] == R_STATUS)
            stop(e);
        else if (role[i] == R_CTL)
            read_ctl(e);
        else {
            write_output(e, role[i] == R_OUT1);
            maybe_report(e);
        }
    }
    if (fds[2].revents) read_agent();
    if (fds[3].revents) sandbox_ended();
    if (fds[0].revents & POLLIN) {
        int conn = accept4(LISTEN_FD, NULL, NULL, SOCK_CLOEXEC);
        if (conn >= 0) {
            on_request(conn);
            close(conn);
        }
    }
    if (queue_size(&to_agent)) queue_flush(&to_agent, AGENT_IN);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    sigprocmask(SIG_BLOCK, &term, NULL);
    sigterm = signalfd(-1, &term, SFD_CLOEXEC);
    prctl(PR_SET_NAME, "runtime-shim");
    fcntl(AGENT_IN, F_SETFL, fcntl(AGENT_IN, F_GETFL) | O_NONBLOCK);
    for (;;)
        turn();
}
