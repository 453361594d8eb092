/* The sandbox's /workspace: an ext4 filesystem in an image file, mounted from a
 * loop device, so its size is a hard cap that no quota setup on the host is needed
 * for, and it survives daemon restarts. Images are sparse copies of a template
 * formatted once per size, which keeps mkfs out of the create path. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/loop.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ns_impl.h"

static int run_mkfs(const char *image, uint32_t disk_mib, err_t *err)
{
    char size[32];
    snprintf(size, sizeof size, "%um", disk_mib);
    /* No resize_inode: a workspace never grows (its size is set at create), and the
     * blocks it reserves for growth were 1 MiB of the template's 1.1 MiB of data,
     * copied and synced at every create. */
    const char *argv[] = {"mkfs.ext4",
                          "-q",
                          "-F",
                          "-m",
                          "0",
                          "-O",
                          "^resize_inode",
                          "-E",
                          "lazy_itable_init=1,lazy_journal_init=1,nodiscard",
                          image,
                          size,
                          NULL};
    pid_t pid = fork();
    if (pid < 0) return err_set(err, errno, "cannot fork mkfs.ext4: %s", strerror(errno));
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDWR);
        if (devnull >= 0) dup2(devnull, 1);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return err_set(err, -EIO,
                       "mkfs.ext4 failed for a %u MiB workspace (status %d); is e2fsprogs "
                       "installed?",
                       disk_mib, status);
    return 0;
}

/* Returns an open fd of the template image for this size, formatting it once. */
static int template_open(const struct sandbox_host *host, uint32_t disk_mib, err_t *err)
{
    char dir[700], path[760], tmp[780];
    snprintf(dir, sizeof dir, "%s/templates", host->state_dir);
    /* The "-2" is the format: templates made with other mkfs options are not reused. */
    snprintf(path, sizeof path, "%s/ext4-%u-2.img", dir, disk_mib);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) return fd;
    int r = mkdir_p(dir, 0700);
    if (r < 0) return err_set(err, r, "cannot create %s: %s", dir, strerror(-r));
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, getpid());
    r = run_mkfs(tmp, disk_mib, err);
    if (r == 0 && rename(tmp, path) < 0) r = err_set(err, errno, "cannot rename template");
    if (r < 0) {
        unlink(tmp);
        return r;
    }
    fd = open(path, O_RDONLY | O_CLOEXEC);
    return fd >= 0 ? fd : err_set(err, errno, "cannot open %s: %s", path, strerror(errno));
}

/* Copies only the data extents of src, keeping holes, with copy_file_range. */
static int copy_sparse(int src, int dst, off_t size)
{
    off_t pos = 0;
    while (pos < size) {
        off_t data = lseek(src, pos, SEEK_DATA);
        if (data < 0) return errno == ENXIO ? 0 : -errno;
        off_t hole = lseek(src, data, SEEK_HOLE);
        if (hole < 0) return -errno;
        loff_t in = data, out = data;
        while (in < hole) {
            ssize_t n = copy_file_range(src, &in, dst, &out, (size_t)(hole - in), 0);
            if (n < 0) return -errno;
            if (n == 0) break;
        }
        pos = hole;
    }
    return 0;
}

int workspace_create(const struct sandbox_host *host, const char *image, uint32_t disk_mib,
                     err_t *err)
{
    int tpl = template_open(host, disk_mib, err);
    if (tpl < 0) return tpl;
    struct stat st;
    int r = 0;
    int dst = open(image, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (dst < 0) {
        r = err_set(err, errno, "cannot create %s: %s", image, strerror(errno));
        goto out;
    }
    if (fstat(tpl, &st) < 0 || ftruncate(dst, st.st_size) < 0 ||
        (r = copy_sparse(tpl, dst, st.st_size)) < 0 || fsync(dst) < 0) {
        if (r == 0) r = -errno;
        r = err_set(err, r, "cannot write the workspace image %s: %s", image, strerror(-r));
        unlink(image);
    }
    close(dst);
out:
    close(tpl);
    return r;
}

/* Whether a loop device still holds the image at real (its resolved path, as the kernel
 * shows it, " (deleted)" after once removed); dev gets its name. */
static bool image_held(const char *real, char *dev, size_t n)
{
    DIR *d = opendir("/sys/block");
    if (!d) return false;
    size_t len = strlen(real);
    bool held = false;
    for (struct dirent *e; !held && (e = readdir(d));) {
        if (strncmp(e->d_name, "loop", 4) != 0) continue;
        char path[300], backing[PATH_MAX + 16];
        snprintf(path, sizeof path, "/sys/block/%s/loop/backing_file", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t got = fd >= 0 ? read(fd, backing, sizeof backing - 1) : -1;
        if (fd >= 0) close(fd);
        if (got <= 0) continue; /* not attached */
        backing[got] = '\0';
        backing[strcspn(backing, "\n")] = '\0';
        held = strncmp(backing, real, len) == 0 &&
               (backing[len] == '\0' || strcmp(backing + len, " (deleted)") == 0);
        if (held) snprintf(dev, n, "/dev/%s", e->d_name);
    }
    closedir(d);
    return held;
}

int workspace_wait_released(const char *real, int timeout_ms, err_t *err)
{
    char dev[300];
    for (int waited = 0; image_held(real, dev, sizeof dev); waited += WORKSPACE_RELEASE_POLL_MS) {
        if (waited >= timeout_ms)
            return err_set(err, -EBUSY,
                           "%s still holds the workspace image %s %d ms after its sandbox ended",
                           dev, real, timeout_ms);
        usleep(WORKSPACE_RELEASE_POLL_MS * 1000);
    }
    return 0;
}

int workspace_attach(const char *image, int *loop_fd, err_t *err)
{
    int r = 0;
    int img = open(image, O_RDWR | O_CLOEXEC);
    if (img < 0) return err_set(err, errno, "cannot open %s: %s", image, strerror(errno));
    int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
    if (ctl < 0) {
        r = err_set(err, errno,
                    "cannot open /dev/loop-control: %s; the ns driver needs loop "
                    "devices (modprobe loop)",
                    strerror(errno));
        goto out;
    }
    r = -EBUSY;
    for (int attempt = 0; attempt < 32 && r == -EBUSY; attempt++) {
        int n = ioctl(ctl, LOOP_CTL_GET_FREE);
        if (n < 0) {
            r = err_set(err, errno, "no free loop device: %s", strerror(errno));
            break;
        }
        char dev[32];
        snprintf(dev, sizeof dev, "/dev/loop%d", n);
        int lfd = open(dev, O_RDWR | O_CLOEXEC);
        if (lfd < 0) {
            r = err_set(err, errno, "cannot open %s: %s", dev, strerror(errno));
            break;
        }
        struct loop_config cfg = {.fd = (uint32_t)img};
        cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR;
        if (ioctl(lfd, LOOP_CONFIGURE, &cfg) == 0) {
            *loop_fd = lfd;
            r = 0;
        } else {
            r = errno == EBUSY ? -EBUSY
                               : err_set(err, errno, "cannot attach %s: %s", dev, strerror(errno));
            close(lfd);
        }
    }
    if (r == -EBUSY) err_set(err, r, "every loop device was taken while attaching %s", image);
    close(ctl);
out:
    close(img);
    return r;
}
