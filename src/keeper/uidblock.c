/* The daemon's uid block (sandbox.h): claimed once per state directory, kept across
 * restarts, registered host-wide so that no two daemons on a host hold the same one.
 *
 * REGISTRY/<b>      the real path of the state directory that holds block b
 * STATE/uid-block   "b\n", then a comment line with the block's uids (for people and tests)
 *
 * An entry counts only while the directory it names still names the same block: a
 * directory that is gone, or was given another block, leaves a stale entry that the next
 * claim takes over. Claims run under an exclusive flock of REGISTRY/.lock. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "keeper.h"

#define RECORD "uid-block"

/* The block that dir's record names, or -1 (none, unreadable or not a block). */
static int record_block(const char *dir)
{
    char path[PATH_MAX + 16], text[256];
    snprintf(path, sizeof path, "%s/" RECORD, dir);
    if (read_file_small(path, text, sizeof text) <= 0) return -1;
    char *end;
    errno = 0;
    unsigned long b = strtoul(text, &end, 10);
    if (errno || end == text || (*end != '\n' && *end != '\0') || b >= SANDBOX_UID_BLOCKS)
        return -1;
    return (int)b;
}

/* The state directory that registry entry b names into out ("" for no entry). */
static void entry_holder(const char *registry, uint32_t b, char *out, size_t n)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/%u", registry, b);
    if (read_file_small(path, out, n) <= 0) out[0] = '\0';
    out[strcspn(out, "\n")] = '\0';
}

/* Whether entry b is held by another daemon's state directory (not self, and still
 * naming b); its holder into holder. */
static bool held_by_other(const char *registry, uint32_t b, const char *self, char *holder,
                          size_t n)
{
    entry_holder(registry, b, holder, n);
    if (!holder[0] || strcmp(holder, self) == 0) return false;
    return holder[0] == '/' && record_block(holder) == (int)b;
}

static int fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -errno;
    int r = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    return r;
}

/* Writes text to path through path.tmp and a rename, synced: a crash leaves the old file
 * or the new one. With excl, path must not exist (the register's entries). */
static int write_synced(const char *dir, const char *path, const char *text, bool excl)
{
    char tmp[PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return -errno;
    int r = write_all(fd, text, strlen(text));
    if (r == 0 && fsync(fd) < 0) r = -errno;
    close(fd);
    /* link(2) fails with EEXIST where rename(2) would replace: O_EXCL for a rename. */
    if (r == 0 && excl && link(tmp, path) < 0) r = -errno;
    if (r == 0 && !excl && rename(tmp, path) < 0) r = -errno;
    unlink(tmp);
    if (r == 0) r = fsync_dir(dir);
    return r;
}

/* Registry entry b names self from now on: a stale one is replaced. */
static int register_block(const char *registry, uint32_t b, const char *self, err_t *err)
{
    char path[PATH_MAX + 16], holder[PATH_MAX], text[PATH_MAX + 2];
    snprintf(path, sizeof path, "%s/%u", registry, b);
    entry_holder(registry, b, holder, sizeof holder);
    if (strcmp(holder, self) == 0) return 0;
    if (unlink(path) < 0 && errno != ENOENT)
        return err_set(err, -errno, "cannot remove the stale entry %s: %m", path);
    snprintf(text, sizeof text, "%s\n", self);
    int r = write_synced(registry, path, text, true);
    if (r < 0)
        return err_set(err, r, "cannot register uid block %u in %s: %s", b, path, strerror(-r));
    return 0;
}

static int write_record(const char *state, uint32_t b, err_t *err)
{
    char path[PATH_MAX + 16], text[256];
    snprintf(path, sizeof path, "%s/" RECORD, state);
    uid_t base = sandbox_uid_base(b);
    snprintf(text, sizeof text,
             "%u\n# runtimed's uid block: sandbox host uids %u..%u, server %u, signer %u\n", b,
             base, base + SANDBOX_MAX_SLOTS * SANDBOX_UID_RANGE - 1, base - 1, base - 2);
    int r = write_synced(state, path, text, false);
    if (r < 0) return err_set(err, r, "cannot write %s: %s", path, strerror(-r));
    return 0;
}

/* A state directory from before uid blocks: it has a database and no record. Its
 * sandboxes' files are owned by block 0's uids. */
static bool from_before_blocks(const char *state)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/db/runtime.db", state);
    return access(path, F_OK) == 0;
}

/* The lowest block no other daemon holds (only block 0 for a directory from before
 * blocks), or an error that names who holds what. */
static int pick_block(const char *registry, const char *self, bool legacy, uint32_t *out,
                      err_t *err)
{
    char holder[PATH_MAX], holders[1024] = "";
    uint32_t last = legacy ? 1 : SANDBOX_UID_BLOCKS;
    for (uint32_t b = 0; b < last; b++) {
        if (!held_by_other(registry, b, self, holder, sizeof holder)) {
            *out = b;
            return 0;
        }
        size_t used = strlen(holders);
        snprintf(holders + used, sizeof holders - used, "%s%u: %s", used ? ", " : "", b, holder);
    }
    if (legacy)
        return err_set(err, -EBUSY,
                       "%s is from before uid blocks: its sandboxes' files are owned by uid "
                       "block 0, which the daemon of %s holds now; stop that daemon and move "
                       "its state directory, or start this one first",
                       self, holder);
    return err_set(err, -ENOSPC,
                   "every uid block of this host (%u) is held: remove the state directory of "
                   "a daemon no longer used, and its block is free (%s names them: %s)",
                   SANDBOX_UID_BLOCKS, registry, holders);
}

static int claim_locked(const char *registry, const char *self, uint32_t *block, err_t *err)
{
    int mine = record_block(self);
    char holder[PATH_MAX];
    if (mine >= 0) {
        if (held_by_other(registry, (uint32_t)mine, self, holder, sizeof holder))
            return err_set(err, -EBUSY,
                           "uid block %d of %s is held by %s too, whose " RECORD
                           " names it: is one a copy of the other? Give the copy a state "
                           "directory of its own",
                           mine, self, holder);
        *block = (uint32_t)mine;
        return register_block(registry, *block, self, err);
    }
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/" RECORD, self);
    if (access(path, F_OK) == 0)
        return err_set(err, -EINVAL, "%s does not name a uid block from 0 to %u; restore it", path,
                       SANDBOX_UID_BLOCKS - 1);
    int r = pick_block(registry, self, from_before_blocks(self), block, err);
    if (r == 0) r = register_block(registry, *block, self, err);
    if (r == 0) r = write_record(self, *block, err);
    return r;
}

int keeper_uid_block_claim(const char *registry, const char *state_dir, uint32_t *block, err_t *err)
{
    char self[PATH_MAX];
    if (!realpath(state_dir, self))
        return err_set(err, -errno, "cannot resolve the state directory %s: %m", state_dir);
    int r = mkdir_p(registry, 0755);
    if (r < 0)
        return err_set(err, r, "cannot make the uid block register %s: %s", registry, strerror(-r));
    char lock[PATH_MAX + 16];
    snprintf(lock, sizeof lock, "%s/.lock", registry);
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return err_set(err, -errno, "cannot open %s: %m", lock);
    while ((r = flock(fd, LOCK_EX)) < 0 && errno == EINTR) {
    }
    if (r < 0) r = err_set(err, -errno, "cannot lock %s: %m", lock);
    if (r == 0) r = claim_locked(registry, self, block, err);
    close(fd); /* and with it the lock */
    return r;
}
