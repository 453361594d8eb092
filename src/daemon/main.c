/* runtimed: reads options, prepares the state directory and the listening
 * sockets as root, then splits into three: the root keeper (parent), the
 * signer (a child that holds the interception CA key and nothing else) and
 * the unprivileged server (a child), which confine themselves before they
 * read a byte from anyone. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../api/api.h"
#include "../cgroup/cgroup.h"
#include "../confine/confine.h"
#include "../gateway/gateway.h"
#include "../idle/idle.h"
#include "../keeper/keeper.h"
#include "../mcp/mcp.h"
#include "../meter/meter.h"
#include "../mitm/mitm.h"
#include "../secrets/secrets.h"
#include "../server/server.h"
#include "daemon.h"

/* The server's own uid and gid, just below the sandbox uid ranges of this daemon's uid
 * block: owned by no account, shared with nothing, not even another daemon's server. */
#define SERVER_UID(o) ((o)->uid_base - 1)
/* The signer's: another one, so that the server can neither signal nor trace it. */
#define SIGNER_UID(o) ((o)->uid_base - 2)

/* The admin key: made once, mode 0600, owned by root. */
static int admin_key(const char *state, char *key, size_t size, err_t *err)
{
    char path[600];
    snprintf(path, sizeof path, "%s/admin.key", state);
    int n = read_file_small(path, key, size);
    if (n == -ENOENT) {
        char fresh[65];
        random_hex(fresh, 32);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) return err_set(err, errno, "cannot create %s: %s", path, strerror(errno));
        int r = write_all(fd, fresh, 64);
        if (r == 0) r = write_all(fd, "\n", 1);
        if (r == 0 && fsync(fd) < 0) r = -errno;
        close(fd);
        if (r < 0) return err_set(err, r, "cannot write %s", path);
        n = read_file_small(path, key, size);
    }
    if (n < 0) return err_set(err, n, "cannot read %s: %s", path, strerror(-n));
    key[strcspn(key, "\r\n")] = '\0';
    if (strlen(key) < 32)
        return err_set(err, -EINVAL, "%s is too short; delete it to make a new one", path);
    return 0;
}

static int listen_tcp(const char *addr, err_t *err)
{
    char host[128];
    snprintf(host, sizeof host, "%s", addr);
    char *colon = strrchr(host, ':');
    if (!colon) return err_set(err, -EINVAL, "--listen wants ADDR:PORT, e.g. 127.0.0.1:7070");
    *colon = '\0';
    int port = atoi(colon + 1);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (port <= 0 || port > 65535 || inet_pton(AF_INET, host, &sa.sin_addr) != 1)
        return err_set(err, -EINVAL, "--listen %s: give an IPv4 address and a port", addr);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 512) < 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        return err_set(err, e,
                       "cannot listen on %s: %s; is another runtimed running? pick "
                       "another --listen",
                       addr, strerror(e));
    }
    return fd;
}

static int listen_unix(const char *path, err_t *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (str_copy(sa.sun_path, sizeof sa.sun_path, path) < 0)
        return err_set(err, -ENAMETOOLONG, "--socket %s is too long", path);
    char dir[256];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        mkdir_p(dir, 0755);
    }
    unlink(path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    mode_t old = umask(0177); /* the socket file is born 0600: root only */
    int r = fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 512) < 0;
    umask(old);
    if (r) {
        int e = errno;
        if (fd >= 0) close(fd);
        return err_set(err, e, "cannot listen on %s: %s", path, strerror(e));
    }
    return fd;
}

/* One daemon per state directory: a second one would fight the first over its
 * sandboxes. The lock lives as long as the keeper. */
static int lock_state(const char *state, err_t *err)
{
    char path[600];
    snprintf(path, sizeof path, "%s/lock", state);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return err_set(err, errno, "cannot open %s: %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        char pid[32] = "";
        read_file_small(path, pid, sizeof pid);
        pid[strcspn(pid, "\n")] = '\0';
        close(fd);
        return err_set(err, -EBUSY,
                       "%s is in use by another runtimed%s%s%s; stop it first or "
                       "give this one another --state-dir",
                       state, pid[0] ? " (pid " : "", pid, pid[0] ? ")" : "");
    }
    char text[32];
    snprintf(text, sizeof text, "%d\n", (int)getpid());
    if (ftruncate(fd, 0) == 0) write_all(fd, text, strlen(text));
    return fd;
}

static int prepare_state(const struct options *o, err_t *err)
{
    char db[600];
    int r = mkdir_p(o->state_dir, 0711);
    if (r == 0) chmod(o->state_dir, 0711);
    snprintf(db, sizeof db, "%s/db", o->state_dir);
    if (r == 0) r = mkdir_p(db, 0700);
    char sandboxes[600];
    snprintf(sandboxes, sizeof sandboxes, "%s/sandboxes", o->state_dir);
    /* Searchable, not listable: a gvisor sandbox's gofer reaches its own directory
     * (gvisor.c), which only that sandbox's host root group may enter. */
    if (r == 0) r = mkdir_p(sandboxes, 0711);
    if (r == 0) chmod(sandboxes, 0711);
    if (r < 0)
        return err_set(err, r, "cannot prepare the state directory %s: %s", o->state_dir,
                       strerror(-r));
    return 0;
}

/* The daemon's uid block (its sandboxes', server's and signer's host uids), then STATE/db
 * for the server: it is the only directory it may write. Under the state lock, so that
 * the block's record is this daemon's alone to write. */
static int claim_uids(struct options *o, err_t *err)
{
    int r = keeper_uid_block_claim(KEEPER_UID_REGISTRY, o->state_dir, &o->uid_block, err);
    if (r < 0) return r;
    o->uid_base = sandbox_uid_base(o->uid_block);
    char db[600];
    snprintf(db, sizeof db, "%s/db", o->state_dir);
    if (chown(db, SERVER_UID(o), SERVER_UID(o)) < 0)
        return err_set(err, -errno, "cannot hand %s to the server's uid %u: %m", db,
                       (unsigned)SERVER_UID(o));
    return 0;
}

/* Sanitized builds: LeakSanitizer's report of the server, which ends with _exit
 * (the tests run one gateway suite with it, see the Makefile's check). */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
static void leak_check(void)
{
    __lsan_do_leak_check();
}
#else
static void leak_check(void) {}
#endif

/* The server is the registry of sandboxes; the API, the gateway and idle pause
 * hook into it here, so that it includes none of them (docs/architecture.md). */
static const struct server_hooks server_hooks = {
    .http_head = api_head,
    .http_fail = api_http_fail,
    .restored = mcp_box_restore,
    .policy = mcp_policy,
    .halted = mcp_sandbox_halted,
    .freed = api_sandbox_freed,
    .busy = mcp_sandbox_busy,
    .egress_event = mcp_sandbox_egress_event,
    .metrics = mcp_metrics_write,
    .sandbox_changed = api_stream_sandbox_changed,
    .event_recorded = api_stream_event,
    .tick = idle_tick,
};

/* The isolation drivers this host can run, and the one --driver makes the default. */
struct drivers {
    const struct sandbox_driver *table[PROTO_DRIVER_COUNT]; /* NULL: missing here */
    char missing[PROTO_DRIVER_COUNT][200];                  /* why */
    uint32_t default_driver;
};

static const char *const driver_names[PROTO_DRIVER_COUNT] = {"ns", "gvisor"};

/* Says at start which drivers there are and why one is missing; -1 when --driver
 * names one that is unknown or missing. */
static int find_drivers(const char *wanted, struct drivers *d)
{
    *d = (struct drivers){.table = {[PROTO_DRIVER_NS] = &sandbox_ns_driver}};
    err_t why = {0};
    if (sandbox_gvisor_available(&why) == 0)
        d->table[PROTO_DRIVER_GVISOR] = &sandbox_gvisor_driver;
    else
        snprintf(d->missing[PROTO_DRIVER_GVISOR], sizeof d->missing[0], "%s", why.msg);
    bool found = strcmp(wanted, "auto") == 0;
    d->default_driver = d->table[PROTO_DRIVER_GVISOR] ? PROTO_DRIVER_GVISOR : PROTO_DRIVER_NS;
    for (uint32_t i = 0; !found && i < PROTO_DRIVER_COUNT; i++)
        if (strcmp(wanted, driver_names[i]) == 0) {
            found = true;
            d->default_driver = i;
        }
    if (!found) {
        fprintf(stderr, "runtimed: unknown --driver %s; give gvisor, ns or auto\n", wanted);
        return -1;
    }
    if (!d->table[d->default_driver]) {
        fprintf(stderr, "runtimed: --driver %s: %s\n", wanted, d->missing[d->default_driver]);
        return -1;
    }
    if (d->table[PROTO_DRIVER_GVISOR])
        log_info("isolation drivers: gvisor (gVisor %s), ns; default %s", RUNSC_MODULE_VERSION,
                 driver_names[d->default_driver]);
    else
        log_info("isolation drivers: ns (default); gvisor is missing: %s",
                 d->missing[PROTO_DRIVER_GVISOR]);
    int64_t swap = meminfo_bytes("SwapTotal");
    if (swap > 0)
        log_info("swap: %lld MiB; a hibernating ns sandbox's memory goes there",
                 (long long)(swap >> 20));
    else
        log_info("no swap: ns sandboxes cannot hibernate (their paused memory stays in RAM); "
                 "gvisor ones hibernate to images");
    return 0;
}

/* --hibernate-below, or a tenth of the host's memory when it was not given. */
static uint32_t hibernate_below_mib(const struct options *o)
{
    if (o->hibernate_below_mib) return o->hibernate_below_mib;
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (uint32_t)((uint64_t)pages * (uint64_t)size / 10 >> 20) : 0;
}

static void __attribute__((noreturn))
run_server(const struct options *o, const struct drivers *drivers, const char *key,
           const uint8_t *sealing_key, int ksock, int signer, int tcp, int unx)
{
    struct server_config cfg = {.max_sandboxes = o->max_sandboxes,
                                .mcp_input_wait_ms = o->mcp_input_wait_s * 1000u,
                                .hibernate_after_s = o->hibernate_after_s,
                                .hibernate_below_mib = hibernate_below_mib(o),
                                .rates = o->rates,
                                .dashboard = {o->session_idle_s, o->session_max_s},
                                .signer_sock = signer};
    memcpy(cfg.secrets_key, sealing_key, sizeof cfg.secrets_key);
    snprintf(cfg.state_dir, sizeof cfg.state_dir, "%s", o->state_dir);
    snprintf(cfg.db_path, sizeof cfg.db_path, "%s/db/runtime.db", o->state_dir);
    snprintf(cfg.admin_key, sizeof cfg.admin_key, "%s", key);
    snprintf(cfg.public_url, sizeof cfg.public_url, "%s", o->public_url);
    snprintf(cfg.listen, sizeof cfg.listen, "%s", o->listen);
    snprintf(cfg.upstream_ca, sizeof cfg.upstream_ca, "%s", o->upstream_ca);
    snprintf(cfg.nameserver, sizeof cfg.nameserver, "%s", o->nameserver);
    cfg.inspect_allowed_tls = strcmp(o->tls_inspect, "allowed-hosts") == 0;
    cfg.templates = strcmp(o->templates, "on") == 0;
    cfg.tls = o->tls_cert[0] != '\0';
    snprintf(cfg.tls_cert, sizeof cfg.tls_cert, "%s", o->tls_cert);
    snprintf(cfg.tls_key, sizeof cfg.tls_key, "%s", o->tls_key);
    cfg.egress_rates = o->rates_egress;
    httpd_limits_default(&cfg.http);
    cfg.http.max_conns = o->max_conns;
    cfg.http.max_per_client = o->max_conns_per_client;
    cfg.sandbox_held_bytes = (uint64_t)(o->held_per_sandbox_mib ? o->held_per_sandbox_mib : 128)
                             << 20;
    cfg.held_bytes = (uint64_t)(o->held_total_mib ? o->held_total_mib : 1024) << 20;
    cfg.default_driver = drivers->default_driver;
    memcpy(cfg.driver_missing, drivers->missing, sizeof cfg.driver_missing);
    memcpy(cfg.pins, o->pins, sizeof cfg.pins);
    cfg.n_pins = o->n_pins;
    log_init("server", strcmp(o->log_format, "json") == 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    err_t err = {0};
    if (confine_drop_to(SERVER_UID(o), SERVER_UID(o), &err) < 0 ||
        confine_server_seccomp(&err) < 0) {
        log_error("cannot confine the server: %s", err.msg);
        _exit(1);
    }
    mcp_set_clients(&gateway_clients); /* the servers' clients are the gateway's */
    int status = server_main(&cfg, &server_hooks, ksock, tcp, unx);
    leak_check(); /* _exit skips the sanitizer's own check at exit */
    _exit(status);
}

/* FNV-1a of the state dir's real path: stable across restarts, distinct per daemon. */
static void instance_name(const char *state_dir, char *out, size_t n)
{
    char real[PATH_MAX];
    const char *p = realpath(state_dir, real) ? real : state_dir;
    uint32_t h = 2166136261u;
    for (; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    snprintf(out, n, "%08x", h);
}

static void bundle_path(const char *state, char *out, size_t n)
{
    snprintf(out, n, "%s/ca/bundle.pem", state);
}

/* STATE/ca/bundle.pem: the system roots plus the interception CA, bind-mounted
 * as every sandbox's CA bundle. Written atomically at each start, by the
 * signer before it confines itself. */
static int write_bundle(const char *state, const struct mitm_ca *ca, err_t *err)
{
    char tmp[700], out[600];
    bundle_path(state, out, sizeof out);
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return err_set(err, errno, "cannot write %s: %s", tmp, strerror(errno));
    int sys = open("/etc/ssl/certs/ca-certificates.crt", O_RDONLY | O_CLOEXEC);
    char buf[65536];
    ssize_t got;
    int r = 0;
    while (sys >= 0 && r == 0 && (got = read(sys, buf, sizeof buf)) > 0)
        r = write_all(fd, buf, (size_t)got);
    if (sys >= 0) close(sys);
    const char *pem = mitm_ca_cert_pem(ca);
    if (r == 0) r = write_all(fd, "\n", 1);
    if (r == 0) r = write_all(fd, pem, strlen(pem));
    if (r == 0 && fchmod(fd, 0644) < 0) r = -errno;
    close(fd);
    if (r == 0 && rename(tmp, out) < 0) r = -errno;
    return r < 0 ? err_set(err, r, "cannot write %s: %s", out, strerror(-r)) : 0;
}

/* ---- the signer ---- */

/* One leaf signed before the filter is loaded: whatever OpenSSL loads on first
 * use (providers, configuration) is loaded while files may still be opened. */
static int warm_up(struct mitm_ca *ca, err_t *err)
{
    struct mitm_leaves *lv = NULL;
    uint8_t *der = NULL;
    size_t len = 0, der_len = 0;
    int r = mitm_leaves_new(1, &lv, err);
    const uint8_t *spki = r == 0 ? mitm_leaves_spki(lv, &len) : NULL;
    if (r == 0) r = mitm_ca_sign(ca, spki, len, "signer.invalid", &der, &der_len, err);
    free(der);
    mitm_leaves_free(lv);
    return r;
}

/* What the signer keeps: stdio (its log), its socket and, until it is ready,
 * the pipe that says so. No core dumps (they would hold the key), a handful of
 * descriptors, its own uid, the signer's seccomp filter. */
static int confine_signer(const struct options *o, int sock, int ready, err_t *err)
{
    int keep[] = {sock, ready};
    close_fds_except(keep, ARRAY_LEN(keep));
    int r = confine_signer_limits(err);
    if (r < 0) return r;
    if (chdir("/") < 0) return err_set(err, errno, "cannot leave the state directory: %m");
    if (prctl(PR_SET_DUMPABLE, 0) < 0) return err_set(err, errno, "cannot make it undumpable: %m");
    r = confine_drop_to(SIGNER_UID(o), SIGNER_UID(o), err);
    if (r == 0) r = confine_signer_seccomp(err);
    return r;
}

/* The signer's process: loads (or creates) the CA as root, writes the
 * sandboxes' bundle, confines itself, says it is ready, and signs for the
 * server until the server hangs up. Signals from a terminal are the server's
 * and the keeper's to act on; the signer follows them when they are gone. */
static void __attribute__((noreturn)) run_signer(const struct options *o, int sock, int ready)
{
    log_init("signer", strcmp(o->log_format, "json") == 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN); /* the listener's reload is the server's, not the signer's */
    char cadir[600];
    snprintf(cadir, sizeof cadir, "%s/ca", o->state_dir);
    err_t err = {0};
    struct mitm_ca *ca = NULL;
    int r = mitm_ca_load_or_create(cadir, &ca, &err);
    if (r == 0) r = write_bundle(o->state_dir, ca, &err);
    if (r == 0) r = warm_up(ca, &err);
    if (r == 0) r = confine_signer(o, sock, ready, &err);
    if (r == 0 && (r = write_all(ready, "1", 1)) < 0) err_set(&err, r, "cannot say it is ready");
    if (r < 0) {
        log_error("the signer cannot start: %s", err.msg);
        _exit(1);
    }
    close(ready);
    r = mitm_signer_serve(sock, ca);
    if (r < 0) log_error("the signer stops: its socket failed: %s", strerror(-r));
    mitm_ca_free(ca);
    leak_check();
    _exit(r < 0);
}

/* Forks the signer; returns the server's end of its socket once it is ready. */
static int start_signer(const struct options *o, pid_t *pid, err_t *err)
{
    int sp[2], rp[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
        return err_set(err, errno, "cannot make the signer's socket: %m");
    if (pipe2(rp, O_CLOEXEC) < 0) {
        close(sp[0]);
        close(sp[1]);
        return err_set(err, errno, "cannot make the signer's pipe: %m");
    }
    *pid = fork();
    if (*pid == 0) {
        close(sp[0]);
        close(rp[0]);
        run_signer(o, sp[1], rp[1]);
    }
    int e = errno;
    close(sp[1]);
    close(rp[1]);
    char c = 0;
    ssize_t n = -1;
    while (*pid > 0 && (n = read(rp[0], &c, 1)) < 0 && errno == EINTR) {
    }
    close(rp[0]);
    if (n == 1) return sp[0];
    close(sp[0]);
    if (*pid < 0) return err_set(err, e, "cannot fork the signer: %s", strerror(e));
    waitpid(*pid, NULL, 0);
    return err_set(err, -EIO, "the signer did not start (its reason is logged above)");
}

/* ---- stopping ---- */

static volatile pid_t server_pid;

/* A pidfd for a child not yet reaped: the keeper reaps whatever exits, so its
 * pid alone could name another process by the time it is stopped. */
static int child_pidfd(pid_t pid)
{
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* Waits up to 10 s for a child to exit (its pidfd becomes readable), then kills
 * it, and reaps it: its wait status, or -1 when the keeper reaped it already. */
static int stop_child(int pfd, const char *what)
{
    if (pfd < 0) return -1;
    struct pollfd p = {.fd = pfd, .events = POLLIN};
    if (poll(&p, 1, 10000) == 0) {
        log_error("the %s did not stop within 10 s; killing it", what);
        syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0);
    }
    siginfo_t si = {0};
    int r = waitid(P_PIDFD, (id_t)pfd, &si, WEXITED);
    close(pfd);
    if (r < 0) return -1;
    if (si.si_code == CLD_EXITED) return (si.si_status & 0xff) << 8;
    return (si.si_status & 0x7f) | (si.si_code == CLD_DUMPED ? 0x80 : 0);
}

/* One line on how the server process ended: whatever took it, the log says. */
static void log_server_end(pid_t pid, int status)
{
    if (status < 0) {
        log_error("the server process (pid %d) ended; how is not known", (int)pid);
    } else if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        const char *name = sigabbrev_np(sig);
        log_error("the server process (pid %d) was killed by signal %d (SIG%s)%s%s", (int)pid, sig,
                  name ? name : "?",
                  sig == SIGSYS ? ": a system call its seccomp filter forbids (docs/seccomp.md)"
                                : "",
                  WCOREDUMP(status) ? ", core dumped" : "");
    } else if (WEXITSTATUS(status) != 0) {
        log_error("the server process (pid %d) exited with status %d (its reason is logged "
                  "above)",
                  (int)pid, WEXITSTATUS(status));
    } else {
        log_info("the server process (pid %d) exited", (int)pid);
    }
}

static void forward_stop(int sig)
{
    if (server_pid > 0) kill(server_pid, SIGTERM);
}

/* SIGHUP goes to runtimed's pid, the keeper's: the server, which cannot read
 * the files, asks the keeper for them when it gets the signal. */
static void forward_reload(int sig)
{
    if (server_pid > 0) kill(server_pid, SIGHUP);
}

int main(int argc, char **argv)
{
    struct options o = {0};
    if (parse_options(argc, argv, &o) < 0) return 2;
    /* From the start, so that an early SIGHUP does not end the daemon (it is a
     * no-op until the server runs); SA_RESTART: a reload must not interrupt the
     * keeper's work in progress. A handler, not SIG_IGN, which programs in the
     * sandboxes would inherit through exec. */
    struct sigaction hup = {.sa_handler = forward_reload, .sa_flags = SA_RESTART};
    sigaction(SIGHUP, &hup, NULL);
    log_init("keeper", strcmp(o.log_format, "json") == 0);
    if (geteuid() != 0) {
        fprintf(stderr, "runtimed: must run as root (it makes namespaces, cgroups and mounts); "
                        "try sudo runtimed\n");
        return 1;
    }
    struct drivers drivers;
    if (find_drivers(o.driver, &drivers) < 0) return 2;
    err_t err = {0};
    char key[128], sealing_path[600];
    uint8_t sealing_key[SECRETS_KEY_LEN];
    snprintf(sealing_path, sizeof sealing_path, "%s/secrets.key", o.state_dir);
    int sp[2], tcp = -1, unx = -1;
    if (cgroup_version() < 0)
        err_set(&err, -ENOTSUP, "no usable cgroup hierarchy under /sys/fs/cgroup");
    else if (prepare_state(&o, &err) == 0 && lock_state(o.state_dir, &err) >= 0 &&
             claim_uids(&o, &err) == 0 && admin_key(o.state_dir, key, sizeof key, &err) == 0 &&
             secrets_key_load(sealing_path, sealing_key, &err) == 0 &&
             (tcp = listen_tcp(o.listen, &err)) >= 0)
        unx = listen_unix(o.socket_path, &err);
    if (unx < 0) {
        fprintf(stderr, "runtimed: %s\n", err.msg);
        return 1;
    }
    /* Each proxied connection holds six descriptors (two sockets, two pipes). */
    struct rlimit nofile = {1 << 20, 1 << 20};
    if (setrlimit(RLIMIT_NOFILE, &nofile) < 0) {
        nofile.rlim_cur = nofile.rlim_max = 65536;
        setrlimit(RLIMIT_NOFILE, &nofile);
    }
    /* The signer first: the keeper never holds the CA key, and the server is
     * handed the signer's socket. */
    pid_t signer = -1;
    int ssock = start_signer(&o, &signer, &err);
    if (ssock < 0) {
        log_error("%s", err.msg);
        return 1;
    }
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
        perror("runtimed: socketpair");
        return 1;
    }
    pid_t server = fork();
    if (server < 0) {
        perror("runtimed: fork");
        return 1;
    }
    if (server == 0) {
        close(sp[0]);
        run_server(&o, &drivers, key, sealing_key, sp[1], ssock, tcp, unx);
    }
    /* Opened after the fork, so that the server holds neither; nothing reaps
     * either child before keeper_main. */
    int server_pfd = child_pidfd(server), signer_pfd = child_pidfd(signer);
    explicit_bzero(key, sizeof key);
    explicit_bzero(sealing_key, sizeof sealing_key);
    close(ssock); /* the server's alone: the signer sees EOF when the server is gone */
    close(sp[1]);
    close(tcp);
    close(unx);
    struct sandbox_host host = {0};
    snprintf(host.state_dir, sizeof host.state_dir, "%s", o.state_dir);
    bundle_path(o.state_dir, host.ca_bundle, sizeof host.ca_bundle);
    instance_name(o.state_dir, host.instance, sizeof host.instance);
    host.uid_base = o.uid_base;
    host.title = argv[0];
    host.title_len = (size_t)(argv[argc - 1] + strlen(argv[argc - 1]) + 1 - argv[0]);
    /* The server stops first and the keeper follows when its socket closes. */
    server_pid = server;
    struct sigaction sa = {.sa_handler = forward_stop};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    log_info("runtimed %s started: API on %s%s and %s, state in %s", runtime_version(), o.listen,
             o.tls_cert[0] ? " (TLS)" : "", o.socket_path, o.state_dir);
    log_info("uid block %u: sandbox host uids %u..%u, server %u, signer %u", o.uid_block,
             o.uid_base, o.uid_base + SANDBOX_MAX_SLOTS * SANDBOX_UID_RANGE - 1, SERVER_UID(&o),
             SIGNER_UID(&o));
    struct keeper_files files = {.tls_cert = o.tls_cert, .tls_key = o.tls_key};
    keeper_watch(server);
    int status = keeper_main(sp[0], &host, drivers.table, &files);
    /* Closing our end ends any keeper call the server is blocked in, so it stops
     * at once; a server that does not is killed. The signer stops when the
     * server has. Either way the supervisor (docs/runtimed.service) starts the
     * three again and the sandboxes are re-adopted. */
    close(sp[0]);
    kill(server, SIGTERM);
    int server_status = stop_child(server_pfd, "server");
    if (server_status < 0) server_status = keeper_watched_status();
    log_server_end(server, server_status);
    stop_child(signer_pfd, "signer");
    /* A server that could not start (a bad certificate, say) says so in the log;
     * the exit status says it to the supervisor. */
    return status ? status : server_status != 0;
}
