/* The sandbox's pid 1 as a program of its own (src/sandbox/init/runtime-init.c).
 * The keeper copies the image into a sealed memfd once; each sandbox's first
 * process, once set up, execs it from there. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ns_impl.h"

extern const char sandbox_init_image[], sandbox_init_image_end[];

static int init_fd = -1;

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U /* Linux 6.3: asks for an executable memfd where vm.memfd_noexec is 1 */
#endif

static int make_memfd(void)
{
    unsigned flags = MFD_CLOEXEC | MFD_ALLOW_SEALING;
    int fd = memfd_create("runtime-init", flags | MFD_EXEC);
    if (fd < 0 && errno == EINVAL) fd = memfd_create("runtime-init", flags); /* before 6.3 */
    return fd;
}

int sandbox_init_prepare(err_t *err)
{
    if (init_fd >= 0) return 0;
    int fd = make_memfd();
    if (fd < 0) return err_set(err, errno, "memfd_create: %s", strerror(errno));
    size_t n = (size_t)(sandbox_init_image_end - sandbox_init_image);
    int r = write_all(fd, sandbox_init_image, n);
    if (r == 0 &&
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
        r = -errno;
    if (r < 0) {
        close(fd);
        return err_set(err, r, "cannot write the init program to a memfd: %s", strerror(-r));
    }
    init_fd = fd;
    return 0;
}

int init_image_write(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0555);
    if (fd < 0) return -errno;
    int r =
        write_all(fd, sandbox_init_image, (size_t)(sandbox_init_image_end - sandbox_init_image));
    close(fd);
    return r;
}

void ns_exec_init(void)
{
    if (init_fd < 0) return;
    char *const argv[] = {"runtime-init", NULL};
    char *const envp[] = {NULL};
    syscall(SYS_execveat, init_fd, "", argv, envp, AT_EMPTY_PATH);
}
