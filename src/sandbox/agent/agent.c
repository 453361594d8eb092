/* runtime-agent: pid 1 of a gvisor sandbox's container (frame.h says why it exists).
 *
 * Started by runsc as uid 0 inside with four capabilities only (SETUID, SETGID and
 * SETPCAP to make each program the sandbox user with none, KILL to end programs of
 * that user), under the sandbox's seccomp profile and no_new_privs. Its one argument
 * is the sandbox's pids limit, which it writes to gVisor's own pids cgroup before
 * anything runs (only root inside may write it; programs are uid 1000), then says
 * AGENT_READY on its stdout. From then on it reads frames on stdin (start a program,
 * its input, a signal) and writes frames on stdout (started, output, exit), and reaps
 * whatever ends inside.
 *
 * It never blocks: what a reader is not ready for waits in a queue, and a program whose
 * queue grows past FRAME_PAUSE_AT is paused (its output not read, or the shim told to
 * stop sending its input) until it drains, so one program that does not read cannot
 * stall the others. Built static (the Makefile), carried in runtimed. */
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "exec_path.h"
#include "frame.h"

#define PIDS_MAX_FILE "/sys/fs/cgroup/pids/pids.max"
#define USER_UID 1000 /* SANDBOX_USER_UID */
#define MAX_PROGRAMS 4096
/* What waits for the shim before programs' output is no longer read. */
#define TO_HOST_MAX (4u << 20)

struct program {
    uint32_t id;
    pid_t pid;      /* 0 once reaped */
    int in, out[2]; /* our ends of its stdin, stdout, stderr; -1 once closed */
    struct queue input;
    bool close_input; /* the shim closed it: close once the queue is written */
    bool held;        /* the shim asked us to stop sending its output */
    bool told_pause;  /* we asked the shim to stop sending its input */
};

static struct program *programs[MAX_PROGRAMS];
static int nprograms;
static struct queue to_host, from_host;

static struct program *find(uint32_t id)
{
    for (int i = 0; i < nprograms; i++)
        if (programs[i]->id == id) return programs[i];
    return NULL;
}

static void send_frame(uint8_t type, uint32_t id, uint8_t stream, const void *p, uint32_t len)
{
    if (queue_frame(&to_host, type, id, stream, p, len) < 0) _exit(70); /* out of memory */
}

static void send_int(uint8_t type, uint32_t id, int32_t v)
{
    send_frame(type, id, 0, &v, sizeof v);
}

static void close_fd(int *fd)
{
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

/* Gone when reaped and both its outputs have ended. */
static void maybe_forget(struct program *p)
{
    if (p->pid || p->out[0] >= 0 || p->out[1] >= 0) return;
    close_fd(&p->in);
    queue_free(&p->input);
    for (int i = 0; i < nprograms; i++)
        if (programs[i] == p) programs[i] = programs[--nprograms];
    free(p);
}

/* ---- starting a program ---- */

/* In the forked child: the sandbox user, no capability, its own session, then exec.
 * An errno before the exec goes to errfd (close-on-exec: empty when it worked). */
static void __attribute__((noreturn))
become(int stdio[3], int errfd, const char *cwd, char *const *argv, char *const *envp)
{
    int e = 0;
    for (int i = 0; i < 3; i++)
        if (dup2(stdio[i], i) < 0) e = errno;
    if (e == 0 && setsid() < 0) e = errno;
    for (int cap = 0; e == 0 && cap < 64; cap++)
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL) e = errno;
    if (e == 0 && (setgroups(0, NULL) < 0 || setresgid(USER_UID, USER_UID, USER_UID) < 0 ||
                   setresuid(USER_UID, USER_UID, USER_UID) < 0))
        e = errno;
    if (e == 0 && chdir(cwd) < 0) e = errno;
    if (e == 0) {
        umask(022);
        struct sigaction dfl = {.sa_handler = SIG_DFL};
        for (int s = 1; s < 65; s++)
            sigaction(s, &dfl, NULL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        e = exec_in_path(argv, envp);
    }
    if (write(errfd, &e, sizeof e) < 0) _exit(126);
    _exit(127);
}

/* The payload's strings into a NULL-ended vector (n of them, from *at); -1 if short. */
static int take_strings(const char **at, const char *end, uint32_t n, char ***out)
{
    char **v = calloc((size_t)n + 1, sizeof *v);
    if (!v) return -1;
    for (uint32_t i = 0; i < n; i++) {
        const char *nul = memchr(*at, '\0', (size_t)(end - *at));
        if (!nul) {
            free(v);
            return -1;
        }
        v[i] = (char *)*at;
        *at = nul + 1;
    }
    *out = v;
    return 0;
}

static int make_pipes(int fds[3][2])
{
    for (int i = 0; i < 3; i++)
        fds[i][0] = fds[i][1] = -1;
    for (int i = 0; i < 3; i++)
        if (pipe2(fds[i], O_CLOEXEC) < 0) return errno;
    return 0;
}

static int spawn(struct program *p, const char *payload, uint32_t len)
{
    struct frame_spawn s;
    if (len < sizeof s) return EINVAL;
    memcpy(&s, payload, sizeof s);
    const char *at = payload + sizeof s, *end = payload + len, *cwd = at;
    char **argv = NULL, **envp = NULL;
    const char *nul = memchr(at, '\0', (size_t)(end - at));
    if (!nul || s.argc == 0) return EINVAL;
    at = nul + 1;
    if (take_strings(&at, end, s.argc, &argv) < 0) return EINVAL;
    if (take_strings(&at, end, s.envc, &envp) < 0) {
        free(argv);
        return EINVAL;
    }
    int pipes[3][2], errp[2] = {-1, -1};
    int e = make_pipes(pipes);
    if (e == 0 && pipe2(errp, O_CLOEXEC) < 0) e = errno;
    pid_t pid = e == 0 ? fork() : -1;
    if (pid == 0) {
        close(errp[0]);
        become((int[3]){pipes[0][0], pipes[1][1], pipes[2][1]}, errp[1], cwd, argv, envp);
    }
    if (e == 0 && pid < 0) e = errno;
    free(argv);
    free(envp);
    close_fd(&errp[1]);
    /* Until the exec, the pipe stays open: what it says is the child's errno. */
    if (e == 0 && read(errp[0], &e, sizeof e) != (ssize_t)sizeof e) e = 0;
    close_fd(&errp[0]);
    close_fd(&pipes[0][0]);
    close_fd(&pipes[1][1]);
    close_fd(&pipes[2][1]);
    p->in = pipes[0][1];
    p->out[0] = pipes[1][0];
    p->out[1] = pipes[2][0];
    if (e != 0) {
        if (pid > 0) waitpid(pid, NULL, 0);
        return e;
    }
    p->pid = pid;
    for (int i = 0; i < 3; i++) {
        int fd = i == 0 ? p->in : p->out[i - 1];
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    }
    return 0;
}

static void on_spawn(uint32_t id, const char *payload, uint32_t len)
{
    struct program *p = calloc(1, sizeof *p);
    int e = !p || nprograms == MAX_PROGRAMS || find(id) ? EAGAIN : 0;
    if (p) p->id = id;
    if (e == 0) e = spawn(p, payload, len);
    send_int(FRAME_STARTED, id, e);
    if (e == 0) {
        programs[nprograms++] = p;
        return;
    }
    if (p) {
        close_fd(&p->in);
        close_fd(&p->out[0]);
        close_fd(&p->out[1]);
        free(p);
    }
}

/* ---- frames from the shim ---- */

static void on_stdin(struct program *p, const char *data, uint32_t len)
{
    if (len == 0) {
        p->close_input = true;
        if (!queue_size(&p->input)) close_fd(&p->in); /* else once the queue is written */
    } else if (p->in >= 0 && queue_push(&p->input, data, len) < 0) {
        _exit(70);
    }
    if (!p->told_pause && queue_size(&p->input) > FRAME_PAUSE_AT) {
        send_frame(FRAME_PAUSE, p->id, 0, NULL, 0);
        p->told_pause = true;
    }
}

static void on_frame(const struct frame_hdr *h, const char *payload)
{
    if (h->type == FRAME_SPAWN) return on_spawn(h->id, payload, h->len);
    struct program *p = find(h->id);
    if (!p) return; /* ended meanwhile */
    int32_t sig;
    switch (h->type) {
    case FRAME_STDIN:
        return on_stdin(p, payload, h->len);
    case FRAME_SIGNAL:
        if (h->len != sizeof sig || !p->pid) return;
        memcpy(&sig, payload, sizeof sig);
        kill(-p->pid, sig);
        kill(p->pid, sig);
        return;
    case FRAME_PAUSE:
    case FRAME_RESUME:
        p->held = h->type == FRAME_PAUSE;
        return;
    }
}

/* Reads what the shim sent; at its end (the shim is gone: the sandbox is ending), ends
 * everything, itself included, which ends the sandbox. */
static void read_host(void)
{
    ssize_t n = queue_read(&from_host, 0, FRAME_DATA_MAX);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        kill(-1, SIGKILL);
        _exit(0);
    }
    struct frame_hdr h;
    const char *payload;
    int r;
    while ((r = queue_next_frame(&from_host, &h, &payload)) == 1)
        on_frame(&h, payload);
    if (r < 0) _exit(71); /* not the shim's frames */
}

/* ---- the programs' side ---- */

/* Sends what one of its outputs has (at most one chunk); false once it ended. */
static bool forward_output(struct program *p, int stream)
{
    char buf[FRAME_DATA_MAX];
    ssize_t n = read(p->out[stream], buf, sizeof buf);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
    if (n <= 0) {
        close_fd(&p->out[stream]);
        send_frame(FRAME_OUT, p->id, (uint8_t)(stream + 1), NULL, 0);
        return false;
    }
    send_frame(FRAME_OUT, p->id, (uint8_t)(stream + 1), buf, (uint32_t)n);
    return true;
}

static void write_input(struct program *p)
{
    if (queue_flush(&p->input, p->in) < 0) { /* it closed its stdin: the rest is dropped */
        queue_free(&p->input);
        close_fd(&p->in);
    }
    if (p->told_pause && queue_size(&p->input) < FRAME_RESUME_AT) {
        send_frame(FRAME_RESUME, p->id, 0, NULL, 0);
        p->told_pause = false;
    }
    if (p->close_input && queue_size(&p->input) == 0) close_fd(&p->in);
}

/* What its outputs hold now, then its exit: a program's last words come before it. */
static void report_exit(struct program *p, int status)
{
    for (int s = 0; s < 2; s++)
        while (p->out[s] >= 0 && forward_output(p, s) && !p->held) {
            struct pollfd q = {.fd = p->out[s], .events = POLLIN};
            if (poll(&q, 1, 0) != 1) break;
        }
    send_int(FRAME_EXIT, p->id, status);
    p->pid = 0;
}

/* Reaps every child that ended; ours are reported. */
static void reap(int sigfd)
{
    struct signalfd_siginfo si;
    while (read(sigfd, &si, sizeof si) > 0) {
    }
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        for (int i = 0; i < nprograms; i++) {
            struct program *p = programs[i];
            if (p->pid != pid) continue;
            report_exit(p, status);
            maybe_forget(p);
            break;
        }
    }
}

/* One turn of the loop over stdin, stdout, SIGCHLD and every program's pipes. */
static void turn(int sigfd)
{
    static struct pollfd fds[3 + 3 * MAX_PROGRAMS];
    static struct program *owner[3 + 3 * MAX_PROGRAMS];
    int n = 0;
    bool host_behind = queue_size(&to_host) > TO_HOST_MAX;
    fds[n++] = (struct pollfd){.fd = 0, .events = POLLIN};
    fds[n++] = (struct pollfd){.fd = 1, .events = queue_size(&to_host) ? POLLOUT : 0};
    fds[n++] = (struct pollfd){.fd = sigfd, .events = POLLIN};
    for (int i = 0; i < nprograms; i++) {
        struct program *p = programs[i];
        for (int s = 0; s < 2; s++)
            if (p->out[s] >= 0 && !p->held && !host_behind) {
                owner[n] = p;
                fds[n++] = (struct pollfd){.fd = p->out[s], .events = POLLIN};
            }
        if (p->in >= 0 && queue_size(&p->input)) {
            owner[n] = p;
            fds[n++] = (struct pollfd){.fd = p->in, .events = POLLOUT};
        }
    }
    if (poll(fds, (nfds_t)n, -1) < 0) return;
    if (fds[1].revents && queue_flush(&to_host, 1) < 0) _exit(0); /* the shim is gone */
    /* Programs first: the pointers in owner[] stay valid only until one is forgotten. */
    for (int i = 3; i < n; i++) {
        struct program *p = owner[i];
        if (!fds[i].revents) continue;
        if (fds[i].fd == p->in)
            write_input(p);
        else if (!forward_output(p, fds[i].fd == p->out[0] ? 0 : 1))
            maybe_forget(p);
        /* A forgotten program's later entries in fds are skipped: its fds are -1 now. */
        for (int j = i + 1; j < n; j++)
            if (owner[j] == p) fds[j].revents = 0;
    }
    if (fds[2].revents) reap(sigfd);
    if (fds[0].revents) read_host();
    /* What this turn queued is written now, not after one more poll: in gVisor each of
     * the agent's system calls is a trip to the sentry, and a tools/call paid two more. */
    for (int i = 0; i < nprograms; i++)
        if (programs[i]->in >= 0 && queue_size(&programs[i]->input)) write_input(programs[i]);
    if (queue_size(&to_host) && queue_flush(&to_host, 1) < 0) _exit(0); /* the shim is gone */
}

/* Writes limit (decimal text) to gVisor's pids.max; answers AGENT_READY or why not. */
static const char *set_pids_max(const char *limit)
{
    if (!*limit || strspn(limit, "0123456789") != strlen(limit)) return "bad-limit";
    int fd = open(PIDS_MAX_FILE, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return "no-pids-cgroup";
    ssize_t wrote = write(fd, limit, strlen(limit));
    close(fd);
    return wrote == (ssize_t)strlen(limit) ? AGENT_READY : "pids-max-refused";
}

/* ---- --serve: one MCP server's supervisor ---- */

/* Reaps what ended (as pid 1, orphans too); the server's end is reported. */
static void reap_server(struct program *server, int sigfd)
{
    struct signalfd_siginfo si;
    while (read(sigfd, &si, sizeof si) > 0) {
    }
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
        if (pid == server->pid) report_exit(server, status);
}

/* An MCP server under gvisor runs in a container of its own in the sandbox (serve.c,
 * gvisor_serve), whose stdin and stdout are host pipes the daemon holds, as a bare
 * runsc's program has: its requests and answers cross neither the agent nor the shim.
 * This supervisor is that container's pid 1, as uid 0 with the agent's capabilities: it
 * sets the container's own pids limit, starts the server as the sandbox user with those
 * two as its stdin and stdout, and speaks frames (id 0) on its stderr, a host pipe the
 * shim reads: FRAME_STARTED, the server's stderr as FRAME_OUT 2, and FRAME_EXIT. The
 * shim closing its end (the daemon let the server go, or its timeout) kills the server. */
static int serve(const char *pids, const char *cwd, char **argv)
{
    const char *ready = set_pids_max(pids);
    int e = strcmp(ready, AGENT_READY) == 0 ? 0 : EPERM;
    int err_out[2] = {-1, -1}, errp[2] = {-1, -1};
    if (e == 0 && (pipe2(err_out, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0)) e = errno;
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    int sigfd = e == 0 ? signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC) : -1;
    if (e == 0 && sigfd < 0) e = errno;
    pid_t pid = e == 0 ? fork() : -1;
    if (pid == 0) {
        close(errp[0]);
        become((int[3]){0, 1, err_out[1]}, errp[1], cwd, argv, environ);
    }
    if (e == 0 && pid < 0) e = errno;
    close_fd(&errp[1]);
    close_fd(&err_out[1]);
    if (e == 0 && read(errp[0], &e, sizeof e) != (ssize_t)sizeof e) e = 0;
    send_int(FRAME_STARTED, 0, e);
    if (e != 0) {
        queue_flush(&to_host, 2);
        return 1;
    }
    /* The server holds its stdin and stdout: a restore gives them back to it, through
     * the same files, and the daemon sees their end when it ends. */
    close(0);
    close(1);
    prctl(PR_SET_NAME, "runtime-serve");
    fcntl(2, F_SETFL, fcntl(2, F_GETFL) | O_NONBLOCK);
    fcntl(err_out[0], F_SETFL, fcntl(err_out[0], F_GETFL) | O_NONBLOCK);
    struct program server = {.pid = pid, .in = -1, .out = {-1, err_out[0]}};
    bool wanted = true;
    while (server.pid) {
        struct pollfd fds[3] = {
            {.fd = 2, .events = queue_size(&to_host) ? POLLOUT : 0},
            {.fd = sigfd, .events = POLLIN},
            {.fd = queue_size(&to_host) > TO_HOST_MAX ? -1 : server.out[1], .events = POLLIN},
        };
        if (poll(fds, 3, -1) < 0) continue;
        if (fds[0].revents & (POLLERR | POLLHUP) && wanted) { /* nobody reads it any more */
            wanted = false;
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
        }
        if (fds[0].revents & POLLOUT && queue_flush(&to_host, 2) < 0) queue_free(&to_host);
        if (fds[2].revents) forward_output(&server, 1);
        if (fds[1].revents) reap_server(&server, sigfd);
    }
    if (!wanted) return 0;
    fcntl(2, F_SETFL, fcntl(2, F_GETFL) & ~O_NONBLOCK); /* its last words, then its exit */
    return queue_flush(&to_host, 2) < 0;
}

int main(int argc, char **argv)
{
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, NULL); /* nothing inside can stop it */
    if (argc > 5 && strcmp(argv[1], "--serve") == 0 && strcmp(argv[4], "--") == 0)
        return serve(argv[2], argv[3], argv + 5);
    const char *outcome = argc == 2 ? set_pids_max(argv[1]) : "usage: runtime-agent PIDS_MAX";
    if (write(1, outcome, strlen(outcome)) < 0 || strcmp(outcome, AGENT_READY) != 0) return 1;
    prctl(PR_SET_NAME, "runtime-agent");
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    int sigfd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sigfd < 0) return 1;
    fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
    fcntl(1, F_SETFL, fcntl(1, F_GETFL) | O_NONBLOCK);
    for (;;)
        turn(sigfd);
}
