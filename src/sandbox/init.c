/* The sandbox's pid 1 as a program of its own (src/sandbox/init/runtime-init.c).
 * The keeper copies the image into a sealed memfd once; each sandbox's first
 * process, once set up, execs it from there. The gvisor driver's shim
 * (src/sandbox/agent/shim.c) is run from a memfd the same way; its agent is written
 * into each gvisor sandbox's root. */
#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ns_impl.h"

extern const char sandbox_init_image[], sandbox_init_image_end[];
extern const char sandbox_agent_image[], sandbox_agent_image_end[];
extern const char sandbox_shim_image[], sandbox_shim_image_end[];

static int init_fd = -1, shim_fd = -1;

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U /* Linux 6.3: asks for an executable memfd where vm.memfd_noexec is 1 */
#endif

/* A sealed memfd holding the program from start to end. */
static int image_memfd(const char *name, const char *start, const char *end, err_t *err)
{
    unsigned flags = MFD_CLOEXEC | MFD_ALLOW_SEALING;
    int fd = memfd_create(name, flags | MFD_EXEC);
    if (fd < 0 && errno == EINVAL) fd = memfd_create(name, flags); /* before 6.3 */
    if (fd < 0) return err_set(err, errno, "memfd_create: %s", strerror(errno));
    int r = write_all(fd, start, (size_t)(end - start));
    if (r == 0 &&
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
        r = -errno;
    if (r < 0) {
        close(fd);
        return err_set(err, r, "cannot write %s to a memfd: %s", name, strerror(-r));
    }
    return fd;
}

int sandbox_init_prepare(err_t *err)
{
    if (init_fd < 0)
        init_fd = image_memfd("runtime-init", sandbox_init_image, sandbox_init_image_end, err);
    if (init_fd >= 0 && shim_fd < 0)
        shim_fd = image_memfd("runtime-shim", sandbox_shim_image, sandbox_shim_image_end, err);
    return init_fd < 0 ? init_fd : shim_fd < 0 ? shim_fd : 0;
}

int agent_image_write(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0555);
    if (fd < 0) return -errno;
    int r =
        write_all(fd, sandbox_agent_image, (size_t)(sandbox_agent_image_end - sandbox_agent_image));
    close(fd);
    return r;
}

int sandbox_agent_install(const struct sandbox_host *host, err_t *err)
{
    char path[600], tmp[620];
    snprintf(path, sizeof path, "%s/" AGENT_SHARED_NAME, host->state_dir);
    snprintf(tmp, sizeof tmp, "%s.new", path);
    unlink(tmp);
    /* A new inode, renamed over the old: a sandbox's bind of the old one keeps it. */
    int r = agent_image_write(tmp);
    if (r == 0 && rename(tmp, path) < 0) r = -errno;
    if (r < 0) {
        unlink(tmp);
        return err_set(err, r, "cannot write %s: %s", path, strerror(-r));
    }
    return 0;
}

void gvisor_exec_shim(const int fds[GVISOR_SHIM_FDS])
{
    char *const argv[] = {"runtime-shim", NULL};
    char *const envp[] = {NULL};
    /* Everything above them first, the memfd too, so that no dup2 lands on one. */
    int high[GVISOR_SHIM_FDS], image = fcntl(shim_fd, F_DUPFD_CLOEXEC, 64);
    for (int i = 0; i < GVISOR_SHIM_FDS; i++)
        high[i] = fcntl(fds[i], F_DUPFD, 64);
    for (int i = 0; i < GVISOR_SHIM_FDS; i++)
        dup2(high[i], 3 + i);
    close_range(3 + GVISOR_SHIM_FDS, ~0U, CLOSE_RANGE_CLOEXEC);
    if (image >= 0) syscall(SYS_execveat, image, "", argv, envp, AT_EMPTY_PATH);
}

void ns_exec_init(void)
{
    if (init_fd < 0) return;
    char *const argv[] = {"runtime-init", NULL};
    char *const envp[] = {NULL};
    syscall(SYS_execveat, init_fd, "", argv, envp, AT_EMPTY_PATH);
}
