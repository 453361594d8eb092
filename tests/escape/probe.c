/* probe: attempts one named attack from inside a sandbox and says how it ended.
 *
 *   probe ATTACK [ARG...]
 *
 * Exit status 0 means the attack SUCCEEDED (the sandbox failed); 1 means it was
 * refused, and the line printed names the errno; 2 is a usage error. Every attack
 * stops at the first step that proves the point, so a success does no harm to the
 * host (e.g. files under /proc/sys are opened for writing, never written).
 *
 * Built by the escape tests with `cc -O2 -o probe probe.c`. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/keyctl.h>
#include <linux/perf_event.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef __X32_SYSCALL_BIT
#define __X32_SYSCALL_BIT 0x40000000
#endif

static int refused(const char *attack, const char *step, int e)
{
    printf("%s: refused at %s: %s (errno %d)\n", attack, step, strerror(e), e);
    return 1;
}

static int succeeded(const char *attack, const char *what)
{
    printf("%s: SUCCEEDED: %s\n", attack, what);
    return 0;
}

/* A result of a permission-checked call: -1 with EPERM/EACCES/ENOSYS is a refusal;
 * anything else means the kernel got past the permission check. */
static int judge(const char *attack, const char *step, long rc, int e)
{
    if (rc < 0 && (e == EPERM || e == EACCES || e == ENOSYS)) return refused(attack, step, e);
    char what[160];
    snprintf(what, sizeof what, "%s passed the permission check (rc %ld, %s)", step, rc,
             rc < 0 ? strerror(e) : "ok");
    return succeeded(attack, what);
}

static long parse_long(const char *s)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end) {
        fprintf(stderr, "probe: not a number: %s\n", s);
        exit(2);
    }
    return v;
}

static int do_ptrace(int argc, char **argv)
{
    if (argc < 3) return 2;
    pid_t pid = (pid_t)parse_long(argv[2]);
    if (ptrace(PTRACE_ATTACH, pid, 0, 0) < 0) return refused("ptrace", "PTRACE_ATTACH", errno);
    waitpid(pid, NULL, __WALL);
    ptrace(PTRACE_DETACH, pid, 0, 0);
    return succeeded("ptrace", "attached");
}

/* ptrace of our own child: allowed or not, it says whether ptrace is filtered. */
static int do_ptrace_child(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        pause();
        _exit(0);
    }
    long rc = ptrace(PTRACE_ATTACH, pid, 0, 0);
    int e = errno;
    if (rc == 0) {
        waitpid(pid, NULL, __WALL);
        ptrace(PTRACE_DETACH, pid, 0, 0);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    if (rc < 0) return refused("ptrace-child", "PTRACE_ATTACH", e);
    return succeeded("ptrace-child", "attached to own child");
}

static int do_mount(int argc, char **argv)
{
    const char *kind = argc > 2 ? argv[2] : "tmpfs";
    const char *target = argc > 3 ? argv[3] : "/tmp";
    int rc;
    if (strcmp(kind, "tmpfs") == 0) rc = mount("none", target, "tmpfs", 0, "size=1m");
    else if (strcmp(kind, "bind") == 0) rc = mount("/", target, NULL, MS_BIND | MS_REC, NULL);
    else if (strcmp(kind, "proc") == 0) rc = mount("proc", target, "proc", 0, NULL);
    else if (strcmp(kind, "remount") == 0) rc = mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND, NULL);
    else {
        fprintf(stderr, "probe: mount KIND is tmpfs, bind, proc or remount\n");
        return 2;
    }
    if (rc < 0) return refused("mount", kind, errno);
    umount2(target, MNT_DETACH);
    return succeeded("mount", kind);
}

static int do_userns(void)
{
    if (unshare(CLONE_NEWUSER) < 0) return refused("userns", "unshare(CLONE_NEWUSER)", errno);
    return succeeded("userns", "unshare(CLONE_NEWUSER)");
}

static int do_clone_userns(void)
{
    /* The raw syscall, like a program that bypasses libc's clone3 first. */
    long pid = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, 0);
    if (pid < 0) return refused("clone-userns", "clone(CLONE_NEWUSER)", errno);
    if (pid == 0) _exit(0);
    waitpid((pid_t)pid, NULL, 0);
    return succeeded("clone-userns", "clone(CLONE_NEWUSER)");
}

static int do_clone3_userns(void)
{
    struct {
        uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
    } args = {.flags = CLONE_NEWUSER, .exit_signal = SIGCHLD};
    long pid = syscall(SYS_clone3, &args, sizeof args);
    if (pid < 0) return refused("clone3-userns", "clone3(CLONE_NEWUSER)", errno);
    if (pid == 0) _exit(0);
    waitpid((pid_t)pid, NULL, 0);
    return succeeded("clone3-userns", "clone3(CLONE_NEWUSER)");
}

static int do_unshare_other(void)
{
    static const struct {
        int flag;
        const char *name;
    } all[] = {{CLONE_NEWNS, "CLONE_NEWNS"},   {CLONE_NEWNET, "CLONE_NEWNET"},
               {CLONE_NEWPID, "CLONE_NEWPID"}, {CLONE_NEWIPC, "CLONE_NEWIPC"},
               {CLONE_NEWUTS, "CLONE_NEWUTS"}, {CLONE_NEWCGROUP, "CLONE_NEWCGROUP"}};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (unshare(all[i].flag) == 0) return succeeded("unshare", all[i].name);
        if (errno != EPERM) return succeeded("unshare", "an unexpected errno (not EPERM)");
    }
    return refused("unshare", "every namespace flag", EPERM);
}

/* x32 and i386 entry points of unshare(CLONE_NEWUSER): a filter written for the
 * x86_64 table alone would miss them. */
static int do_x32_userns(void)
{
#ifdef __x86_64__
    long rc = syscall(__X32_SYSCALL_BIT | 272, CLONE_NEWUSER);
    if (rc < 0) return refused("x32-userns", "x32 unshare", errno);
    return succeeded("x32-userns", "x32 unshare(CLONE_NEWUSER)");
#else
    return refused("x32-userns", "not x86_64", ENOSYS);
#endif
}

static int do_i386_userns(void)
{
#ifdef __x86_64__
    long rc = 310; /* unshare in the i386 table */
    long flags = CLONE_NEWUSER;
    __asm__ volatile("int $0x80" : "+a"(rc) : "b"(flags) : "memory");
    if (rc < 0) return refused("i386-userns", "int 0x80 unshare", (int)-rc);
    return succeeded("i386-userns", "int 0x80 unshare(CLONE_NEWUSER)");
#else
    return refused("i386-userns", "not x86_64", ENOSYS);
#endif
}

static int do_module(void)
{
    static const char junk[64] = "not an ELF module";
    long rc = syscall(SYS_init_module, junk, sizeof junk, "");
    int e = errno;
    if (!(rc < 0 && (e == EPERM || e == ENOSYS))) return judge("module", "init_module", rc, e);
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    rc = syscall(SYS_finit_module, fd, "", 0);
    e = errno;
    if (!(rc < 0 && (e == EPERM || e == ENOSYS))) return judge("module", "finit_module", rc, e);
    rc = syscall(SYS_delete_module, "probe_no_such_module", O_NONBLOCK);
    return judge("module", "init_module, finit_module and delete_module", rc, errno);
}

static int do_bpf(void)
{
    union bpf_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.map_type = BPF_MAP_TYPE_ARRAY;
    attr.key_size = 4;
    attr.value_size = 4;
    attr.max_entries = 1;
    long fd = syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof attr);
    if (fd < 0) return refused("bpf", "BPF_MAP_CREATE", errno);
    close((int)fd);
    return succeeded("bpf", "created a map");
}

static int do_keyctl(void)
{
    long id = syscall(SYS_add_key, "user", "probe", "x", 1, KEY_SPEC_PROCESS_KEYRING);
    if (id >= 0) return succeeded("keyctl", "add_key");
    int e = errno;
    long rc = syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, "probe");
    if (rc >= 0) return succeeded("keyctl", "KEYCTL_JOIN_SESSION_KEYRING");
    printf("keyctl: add_key refused: %s\n", strerror(e));
    return refused("keyctl", "keyctl(JOIN_SESSION_KEYRING)", errno);
}

static int do_kill(int argc, char **argv)
{
    if (argc < 3) return 2;
    pid_t pid = (pid_t)parse_long(argv[2]);
    int sig = argc > 3 ? (int)parse_long(argv[3]) : SIGKILL;
    if (kill(pid, sig) < 0) return refused("kill", "kill", errno);
    return succeeded("kill", "signal delivered");
}

static int do_open_write(int argc, char **argv)
{
    if (argc < 3) return 2;
    int fd = open(argv[2], O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) return refused("open-write", argv[2], errno);
    close(fd);
    return succeeded("open-write", argv[2]);
}

static int do_read(int argc, char **argv)
{
    if (argc < 3) return 2;
    int fd = open(argv[2], O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) return refused("read", argv[2], errno);
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    if (n < 0) return refused("read", argv[2], errno);
    fwrite(buf, 1, (size_t)n, stdout);
    printf("\n");
    return succeeded("read", argv[2]);
}

static int do_setuid(void)
{
    if (setuid(0) == 0) return succeeded("setuid", "setuid(0)");
    return refused("setuid", "setuid(0)", errno);
}

static int do_mknod(void)
{
    /* /dev/vda's numbers: a block device node would give the raw host disk. */
    if (mknod("/tmp/probe-disk", S_IFBLK | 0600, makedev(254, 0)) == 0) {
        unlink("/tmp/probe-disk");
        return succeeded("mknod", "made a block device node");
    }
    return refused("mknod", "mknod(S_IFBLK)", errno);
}

static int do_chroot(void)
{
    if (chroot("/tmp") == 0) return succeeded("chroot", "chroot(/tmp)");
    return refused("chroot", "chroot", errno);
}

static int do_raw_socket(void)
{
    int s = socket(AF_INET, SOCK_RAW, IPPROTO_ICMP);
    if (s >= 0) {
        close(s);
        return succeeded("raw-socket", "SOCK_RAW");
    }
    int e = errno;
    s = socket(AF_PACKET, SOCK_RAW, 0);
    if (s >= 0) {
        close(s);
        return succeeded("raw-socket", "AF_PACKET");
    }
    printf("raw-socket: SOCK_RAW refused: %s\n", strerror(e));
    return refused("raw-socket", "AF_PACKET", errno);
}

static int do_perf(void)
{
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_CPU_CLOCK;
    long fd = syscall(SYS_perf_event_open, &attr, -1, 0, -1, 0); /* every process on cpu 0 */
    if (fd < 0) return refused("perf", "perf_event_open", errno);
    close((int)fd);
    return succeeded("perf", "system-wide perf event");
}

/* TCP connect with a deadline. Refused, unreachable or timed out all count as failure. */
static int do_connect(int argc, char **argv)
{
    if (argc < 4) return 2;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)parse_long(argv[3]))};
    if (inet_pton(AF_INET, argv[2], &sa.sin_addr) != 1) return 2;
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return refused("connect", "socket", errno);
    struct timeval tv = {.tv_sec = 3};
    setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(s, (struct sockaddr *)&sa, sizeof sa) < 0) return refused("connect", argv[2], errno);
    /* Print what answers, so a test can tell whose service it reached. */
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[256];
    ssize_t n = read(s, buf, sizeof buf - 1);
    if (n > 0) {
        buf[n] = 0;
        printf("banner: %s\n", buf);
    }
    close(s);
    return succeeded("connect", argv[2]);
}

static int do_abstract_connect(int argc, char **argv)
{
    if (argc < 3) return 2;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t n = strlen(argv[2]);
    if (n + 1 > sizeof sa.sun_path) return 2;
    memcpy(sa.sun_path + 1, argv[2], n);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return refused("abstract-connect", "socket", errno);
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
    if (connect(s, (struct sockaddr *)&sa, len) < 0)
        return refused("abstract-connect", argv[2], errno);
    close(s);
    return succeeded("abstract-connect", argv[2]);
}

/* Listens on an abstract unix socket for a bounded time, for abstract-connect. */
static int do_abstract_listen(int argc, char **argv)
{
    if (argc < 4) return 2;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t n = strlen(argv[2]);
    if (n + 1 > sizeof sa.sun_path) return 2;
    memcpy(sa.sun_path + 1, argv[2], n);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
    if (s < 0 || bind(s, (struct sockaddr *)&sa, len) < 0 || listen(s, 16) < 0) {
        perror("abstract-listen");
        return 2;
    }
    alarm((unsigned)parse_long(argv[3]));
    for (;;) {
        int c = accept(s, NULL, NULL);
        if (c >= 0) close(c);
    }
}

static const char usage[] =
    "usage: probe ATTACK [ARG...]\n"
    "attacks: ptrace PID | ptrace-child | mount [tmpfs|bind|proc|remount] [TARGET] |\n"
    "         userns | clone-userns | clone3-userns | unshare | x32-userns | i386-userns |\n"
    "         module | bpf | keyctl | kill PID [SIG] | open-write PATH | read PATH |\n"
    "         setuid | mknod | chroot | raw-socket | perf | connect ADDR PORT |\n"
    "         abstract-connect NAME | abstract-listen NAME SECONDS\n"
    "exit 0: the attack succeeded; 1: refused; 2: usage\n";

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc < 2) {
        fputs(usage, stderr);
        return 2;
    }
    const char *a = argv[1];
    int rc = 2;
    if (strcmp(a, "ptrace") == 0) rc = do_ptrace(argc, argv);
    else if (strcmp(a, "ptrace-child") == 0) rc = do_ptrace_child();
    else if (strcmp(a, "mount") == 0) rc = do_mount(argc, argv);
    else if (strcmp(a, "userns") == 0) rc = do_userns();
    else if (strcmp(a, "clone-userns") == 0) rc = do_clone_userns();
    else if (strcmp(a, "clone3-userns") == 0) rc = do_clone3_userns();
    else if (strcmp(a, "unshare") == 0) rc = do_unshare_other();
    else if (strcmp(a, "x32-userns") == 0) rc = do_x32_userns();
    else if (strcmp(a, "i386-userns") == 0) rc = do_i386_userns();
    else if (strcmp(a, "module") == 0) rc = do_module();
    else if (strcmp(a, "bpf") == 0) rc = do_bpf();
    else if (strcmp(a, "keyctl") == 0) rc = do_keyctl();
    else if (strcmp(a, "kill") == 0) rc = do_kill(argc, argv);
    else if (strcmp(a, "open-write") == 0) rc = do_open_write(argc, argv);
    else if (strcmp(a, "read") == 0) rc = do_read(argc, argv);
    else if (strcmp(a, "setuid") == 0) rc = do_setuid();
    else if (strcmp(a, "mknod") == 0) rc = do_mknod();
    else if (strcmp(a, "chroot") == 0) rc = do_chroot();
    else if (strcmp(a, "raw-socket") == 0) rc = do_raw_socket();
    else if (strcmp(a, "perf") == 0) rc = do_perf();
    else if (strcmp(a, "connect") == 0) rc = do_connect(argc, argv);
    else if (strcmp(a, "abstract-connect") == 0) rc = do_abstract_connect(argc, argv);
    else if (strcmp(a, "abstract-listen") == 0) rc = do_abstract_listen(argc, argv);
    if (rc == 2) fputs(usage, stderr);
    return rc;
}
