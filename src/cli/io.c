/* Local files: reading inputs whole, writing downloads without leaving half a file. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int read_fd_all(int fd, size_t max, char **out, size_t *len)
{
    size_t cap = 0;
    char *buf = NULL;
    *out = NULL;
    *len = 0;
    for (;;) {
        if (*len == cap) {
            if (cap >= max) return free(buf), -EFBIG;
            cap = cap ? (cap * 2 < max ? cap * 2 : max) : 65536;
            char *nb = realloc(buf, cap + 1);
            if (!nb) return free(buf), -ENOMEM;
            buf = nb;
        }
        ssize_t r = read(fd, buf + *len, cap - *len);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return free(buf), -errno;
        if (r == 0) break;
        *len += (size_t)r;
    }
    if (buf) buf[*len] = '\0';
    *out = buf;
    return 0;
}

/* "dir/.name.runtime-XXXXXX" next to the target, so the final rename stays on one file system. */
int tmpfile_open(struct tmpfile *t, const char *target)
{
    const char *slash = strrchr(target, '/');
    int dirlen = slash ? (int)(slash - target + 1) : 0;
    snprintf(t->target, sizeof t->target, "%s", target);
    int n =
        snprintf(t->tmp, sizeof t->tmp, "%.*s.%s.runtime-XXXXXX", dirlen, target, target + dirlen);
    if (n < 0 || (size_t)n >= sizeof t->tmp || strlen(target) >= sizeof t->target)
        return -ENAMETOOLONG;
    t->fd = mkostemp(t->tmp, O_CLOEXEC);
    return t->fd < 0 ? -errno : 0;
}

/* Keeps the file (with the mode a plain create would give it) or removes it. */
int tmpfile_finish(struct tmpfile *t, bool keep, int mode)
{
    int r = 0;
    if (keep) {
        mode_t mask = umask(0);
        umask(mask);
        if (fchmod(t->fd, mode >= 0 ? (mode_t)mode : 0666 & ~mask) < 0 || fsync(t->fd) < 0)
            r = -errno;
    }
    if (close(t->fd) < 0 && r == 0) r = -errno;
    t->fd = -1;
    if (keep && r == 0 && rename(t->tmp, t->target) < 0) r = -errno;
    if (!keep || r < 0) unlink(t->tmp);
    return r;
}
