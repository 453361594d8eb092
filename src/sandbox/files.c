/* Runtime Cloud's file-tree operations (proto.h, FILE_OP): stat, list, mkdir, remove,
 * rename, chmod. Each runs in a helper forked from the keeper that enters only the
 * sandbox's mount namespace, whose root is the sandbox's own (setns sets it), as the
 * sandbox user's host uid: permissions are the sandbox user's, and no path, symlink or
 * ".." can name a host file. Paths are resolved with openat2(RESOLVE_IN_ROOT |
 * RESOLVE_NO_MAGICLINKS); below that, every step is an *at call on one name relative
 * to a directory descriptor that never follows a symlink, so a tree that a sandbox
 * process changes meanwhile can at worst make the operation fail.
 *
 * The keeper does not wait: it hands the server a socket on which the helper writes
 * its result when done, so that a recursive remove of a large tree holds up nothing
 * else. The keeper's SIGCHLD reaps the helper. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <grp.h>
#include <linux/openat2.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ns_impl.h"

#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452 /* Linux 6.6, the same number on every architecture */
#endif

#define LIST_MAX_VISITS 200000 /* entries a LIST looks at, matched or not */
#define REMOVE_MAX_NESTING 256 /* directories a recursive remove descends (one fd each) */
#define GLOB_MAX_STEPS 64

/* ---- entries ------------------------------------------------------------------ */

/* A host uid or gid as the sandbox sees it: its slot's range maps to 0..65535. */
static uint32_t inside_id(const struct sandbox *sb, uint32_t host)
{
    uint32_t base = ns_host_uid(sb, 0);
    return host >= base && host - base < SANDBOX_UID_RANGE ? host - base : 65534;
}

/* name in dir, not followed. */
static int entry_of(const struct sandbox *sb, int dir, const char *name, struct proto_file_info *e)
{
    struct stat st;
    if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) < 0) return -errno;
    e->type = S_ISREG(st.st_mode)   ? PROTO_FILE_REG
              : S_ISDIR(st.st_mode) ? PROTO_FILE_DIR
              : S_ISLNK(st.st_mode) ? PROTO_FILE_LNK
                                    : PROTO_FILE_OTHER;
    e->mode = st.st_mode & 07777;
    e->uid = inside_id(sb, st.st_uid);
    e->gid = inside_id(sb, st.st_gid);
    e->bytes = (uint64_t)st.st_size;
    e->mtime_s = st.st_mtim.tv_sec;
    e->mtime_ns = (uint32_t)st.st_mtim.tv_nsec;
    e->target[0] = '\0';
    if (S_ISLNK(st.st_mode)) {
        ssize_t n = readlinkat(dir, name, e->target, PROTO_FILE_TEXT_MAX);
        e->target[n > 0 ? n : 0] = '\0';
        /* A target with a NUL cannot be made; one cut at the limit is still text. */
    }
    return 0;
}

/* The records of an answer, gathered, then handed over as a sealed memfd: a snapshot
 * the server reads at its pace and nobody can change. */
struct records {
    char *buf;
    size_t len, cap;
};

static int records_add(struct records *out, const struct proto_file_info *e)
{
    size_t need = sizeof(struct proto_file_entry) + strlen(e->path) + strlen(e->target);
    if (out->len + need > PROTO_FILE_LIST_MAX) return -ENOSPC;
    if (out->len + need > out->cap) {
        size_t cap = out->cap ? out->cap * 2 : 65536;
        if (cap > PROTO_FILE_LIST_MAX) cap = PROTO_FILE_LIST_MAX;
        char *b = realloc(out->buf, cap);
        if (!b) return -ENOMEM;
        out->buf = b;
        out->cap = cap;
    }
    int n = proto_file_entry_put(out->buf + out->len, out->cap - out->len, e);
    if (n < 0) return n;
    out->len += (size_t)n;
    return 0;
}

static int records_seal(const struct records *in, int *mem)
{
    int fd = memfd_create("file-entries", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return -errno;
    int r = write_all(fd, in->buf, in->len);
    if (r == 0 &&
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
        r = -errno;
    if (r < 0) {
        close(fd);
        return r;
    }
    *mem = fd;
    return 0;
}

/* ---- STAT --------------------------------------------------------------------- */

static int do_stat(const struct sandbox *sb, int root, const char *path, int *mem)
{
    static struct proto_file_info e; /* 8 KiB: off the stack of a short-lived process */
    const char *name = "";
    int dir = strcmp(path, "/") == 0 ? root : ns_parent_of(root, path, &name);
    if (dir < 0) return dir;
    int r = entry_of(sb, dir, name, &e);
    struct records out = {0};
    if (r == 0) r = records_add(&out, &e);
    if (r == 0) r = records_seal(&out, mem);
    free(out.buf);
    return r;
}

/* ---- LIST --------------------------------------------------------------------- */

/* A glob's steps: "**" stands for any number of steps (none too), the others match
 * one step each with fnmatch(3). Split once, matched against every entry's path. */
struct glob {
    char text[PROTO_PATH_LEN];
    char *steps[GLOB_MAX_STEPS];
    size_t n;
};

/* Splits s in place at '/', skipping empty steps; false when there are more than max. */
static bool split_steps(char *s, char **steps, size_t max, size_t *n)
{
    *n = 0;
    for (char *save = NULL, *t = strtok_r(s, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
        if (*n == max) return false;
        steps[(*n)++] = t;
    }
    return true;
}

/* Which (glob step, path step) pairs can be reached: a table, so that no pattern
 * costs more than its steps times the path's, whatever its "**"s. */
static bool glob_match(const struct glob *g, const char *rel)
{
    char copy[PROTO_FILE_TEXT_MAX + 1], *path[PROTO_FILE_MAX_DEPTH + 1];
    size_t n;
    snprintf(copy, sizeof copy, "%s", rel);
    if (!split_steps(copy, path, ARRAY_LEN(path), &n)) return false;
    bool reach[GLOB_MAX_STEPS + 1][PROTO_FILE_MAX_DEPTH + 2] = {{false}};
    reach[0][0] = true;
    for (size_t i = 0; i < g->n; i++)
        for (size_t j = 0; j <= n; j++) {
            if (!reach[i][j]) continue;
            if (strcmp(g->steps[i], "**") == 0)
                for (size_t k = j; k <= n; k++)
                    reach[i + 1][k] = true;
            else if (j < n && fnmatch(g->steps[i], path[j], 0) == 0)
                reach[i + 1][j + 1] = true;
        }
    return reach[g->n][n];
}

struct walk {
    const struct sandbox *sb;
    const struct glob *glob; /* NULL: every entry */
    bool hidden;
    unsigned depth, limit, emitted, visited;
    bool stop, truncated;
    struct records out;
    struct proto_file_info e;          /* the entry being written */
    char rel[PROTO_FILE_TEXT_MAX + 1]; /* its path below the listed directory */
};

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in the directory fd, sorted (so that a cut list is the same each time),
 * without "." and "..", nor hidden ones unless asked; at most what the walk may still
 * look at. */
static char **read_names(struct walk *w, int fd, size_t *n)
{
    *n = 0;
    int dup = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    DIR *d = dup >= 0 ? fdopendir(dup) : NULL;
    if (!d) {
        if (dup >= 0) close(dup);
        return NULL;
    }
    char **names = NULL;
    size_t cap = 0;
    for (struct dirent *de; (de = readdir(d));) {
        const char *name = de->d_name;
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) continue;
        if (name[0] == '.' && !w->hidden) continue;
        if (w->visited == LIST_MAX_VISITS) {
            w->truncated = w->stop = true;
            break;
        }
        if (*n == cap) {
            cap = cap ? cap * 2 : 64;
            char **more = realloc(names, cap * sizeof *names);
            if (!more) break;
            names = more;
        }
        if (!(names[*n] = strdup(name))) break;
        (*n)++;
        w->visited++;
    }
    closedir(d);
    if (names) qsort(names, *n, sizeof *names, cmp_names);
    return names;
}

static int emit(struct walk *w, int dir, const char *name)
{
    if (w->emitted == w->limit) {
        w->truncated = w->stop = true;
        return 0;
    }
    if (entry_of(w->sb, dir, name, &w->e) < 0) return 0; /* gone meanwhile */
    memcpy(w->e.path, w->rel, sizeof w->e.path);
    int r = records_add(&w->out, &w->e);
    if (r == -ENOSPC) {
        w->truncated = w->stop = true;
        return 0;
    }
    if (r == 0) w->emitted++;
    return r;
}

/* Depth first, in name order; never follows a symlink (O_NOFOLLOW on each step). */
static int walk_dir(struct walk *w, int fd, size_t rel_len, unsigned level)
{
    size_t n;
    char **names = read_names(w, fd, &n);
    int r = 0;
    for (size_t i = 0; i < n && r == 0 && !w->stop; i++) {
        const char *name = names[i];
        size_t len = (rel_len ? rel_len + 1 : 0) + strlen(name);
        if (len > PROTO_FILE_TEXT_MAX) continue; /* too deep to be named */
        snprintf(w->rel + rel_len, sizeof w->rel - rel_len, "%s%s", rel_len ? "/" : "", name);
        struct stat st;
        if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) continue;
        if (!w->glob || glob_match(w->glob, w->rel)) r = emit(w, fd, name);
        if (r == 0 && !w->stop && S_ISDIR(st.st_mode) && level < w->depth) {
            int sub =
                openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
            if (sub >= 0) { /* one it may not read is listed, not entered */
                r = walk_dir(w, sub, len, level + 1);
                close(sub);
            }
        }
        w->rel[rel_len] = '\0';
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return r;
}

static int do_list(const struct sandbox *sb, int root, const struct proto_file_op *op, int *mem,
                   uint64_t *values)
{
    static struct walk w; /* large: off the stack of a short-lived process */
    static struct glob g;
    w = (struct walk){
        .sb = sb, .hidden = op->flags & PROTO_FILE_HIDDEN, .depth = op->depth, .limit = op->limit};
    if (op->path2[0]) {
        snprintf(g.text, sizeof g.text, "%s", op->path2);
        if (!split_steps(g.text, g.steps, GLOB_MAX_STEPS, &g.n)) return -EINVAL;
        w.glob = &g;
    }
    int fd = ns_open_in_root(root, op->path, O_RDONLY | O_DIRECTORY | O_NONBLOCK, 0);
    if (fd < 0) return fd;
    int r = walk_dir(&w, fd, 0, 1);
    close(fd);
    if (r == 0) r = records_seal(&w.out, mem);
    free(w.out.buf);
    values[0] = w.emitted;
    values[1] = w.truncated;
    return r;
}

/* ---- MKDIR -------------------------------------------------------------------- */

static int make_dir(int root, const char *path, bool parents, bool *made)
{
    *made = false;
    if (strcmp(path, "/") == 0) return parents ? 0 : -EEXIST;
    const char *name;
    int dir = ns_parent_of(root, path, &name);
    if (dir == -ENOENT && parents) {
        char up[PROTO_PATH_LEN];
        const char *slash = strrchr(path, '/');
        snprintf(up, sizeof up, "%.*s", slash == path ? 1 : (int)(slash - path), path);
        bool up_made;
        int r = make_dir(root, up, true, &up_made);
        if (r < 0) return r;
        dir = ns_parent_of(root, path, &name);
    }
    if (dir < 0) return dir;
    int r = mkdirat(dir, name, 0755) < 0 ? -errno : 0;
    close(dir);
    *made = r == 0;
    if (r == -EEXIST && parents) {
        /* mkdir -p: a directory there is fine (a symlink to one too), a file is not. */
        int fd = ns_open_in_root(root, path, O_PATH | O_DIRECTORY, 0);
        if (fd >= 0) close(fd);
        r = fd >= 0 ? 0 : fd;
    }
    return r;
}

/* ---- REMOVE ------------------------------------------------------------------- */

/* Empties the directory name in dir, depth first, without following a symlink: a
 * link is removed, never what it points to. The first error is kept, the rest goes on. */
static int empty_dir(int dir, const char *name, unsigned nesting)
{
    if (nesting == REMOVE_MAX_NESTING) return -EMLINK;
    int fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return -errno;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return -errno;
    }
    int first = 0;
    for (struct dirent *de; (de = readdir(d));) {
        const char *child = de->d_name;
        if (strcmp(child, ".") == 0 || strcmp(child, "..") == 0) continue;
        int r = unlinkat(fd, child, 0) < 0 ? -errno : 0;
        if (r == -EISDIR) { /* a directory (unlink(2) says EISDIR on Linux) */
            r = empty_dir(fd, child, nesting + 1);
            if (r == 0 && unlinkat(fd, child, AT_REMOVEDIR) < 0) r = -errno;
        }
        if (r < 0 && r != -ENOENT && first == 0) first = r;
    }
    closedir(d);
    return first;
}

static int remove_path(int root, const char *path, bool recursive, bool *removed)
{
    *removed = false;
    const char *name;
    int dir = ns_parent_of(root, path, &name);
    if (dir == -ENOENT) return 0;                      /* nothing there */
    if (dir < 0) return dir == -EINVAL ? -EBUSY : dir; /* "/" */
    struct stat st;
    int r = fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
    if (r == 0 && S_ISDIR(st.st_mode)) {
        if (recursive) r = empty_dir(dir, name, 0);
        if (r == 0 && unlinkat(dir, name, AT_REMOVEDIR) < 0)
            r = errno == EEXIST ? -ENOTEMPTY : -errno;
    } else if (r == 0 && unlinkat(dir, name, 0) < 0) {
        r = -errno;
    }
    close(dir);
    if (r == -ENOENT) return 0;
    *removed = r == 0;
    return r;
}

/* ---- RENAME and CHMOD --------------------------------------------------------- */

static int rename_path(int root, const char *from, const char *to, bool overwrite)
{
    const char *from_name, *to_name;
    int from_dir = ns_parent_of(root, from, &from_name);
    if (from_dir < 0) return from_dir;
    int to_dir = ns_parent_of(root, to, &to_name);
    if (to_dir < 0) {
        close(from_dir);
        return to_dir;
    }
    int r = renameat2(from_dir, from_name, to_dir, to_name, overwrite ? 0 : RENAME_NOREPLACE);
    r = r < 0 ? -errno : 0;
    close(from_dir);
    close(to_dir);
    return r;
}

/* The mode of what path names (a symlink's target, resolved in the root). Linux 6.6
 * changes it through the resolved descriptor; before, a symlink is refused and the
 * name is changed relative to its directory. */
static int change_mode(int root, const char *path, unsigned mode)
{
    int fd = ns_open_in_root(root, path, O_PATH, 0);
    if (fd < 0) return fd;
    int r = syscall(SYS_fchmodat2, fd, "", mode, AT_EMPTY_PATH) < 0 ? -errno : 0;
    close(fd);
    if (r != -ENOSYS) return r;
    const char *name;
    int dir = strcmp(path, "/") == 0 ? -EPERM : ns_parent_of(root, path, &name);
    if (dir < 0) return dir;
    struct stat st;
    r = fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
    if (r == 0 && S_ISLNK(st.st_mode)) r = -EOPNOTSUPP;
    if (r == 0 && fchmodat(dir, name, mode, 0) < 0) r = -errno;
    close(dir);
    return r;
}

/* ---- the helper --------------------------------------------------------------- */

static int run_op(const struct sandbox *sb, const struct proto_file_op *op,
                  struct proto_result *res, int *mem)
{
    int root = ns_enter_as_user(sb);
    if (root < 0) return root;
    bool done = false;
    int r = -EINVAL;
    switch ((enum proto_file_op_kind)op->op) {
    case PROTO_FILE_STAT:
        r = do_stat(sb, root, op->path, mem);
        break;
    case PROTO_FILE_LIST:
        r = do_list(sb, root, op, mem, res->values);
        break;
    case PROTO_FILE_MKDIR:
        r = make_dir(root, op->path, op->flags & PROTO_FILE_PARENTS, &done);
        res->values[0] = done;
        break;
    case PROTO_FILE_REMOVE:
        r = remove_path(root, op->path, op->flags & PROTO_FILE_RECURSIVE, &done);
        res->values[0] = done;
        if (r == -EMLINK)
            snprintf(res->msg, sizeof res->msg, "nested deeper than %d directories",
                     REMOVE_MAX_NESTING);
        break;
    case PROTO_FILE_RENAME:
        r = rename_path(root, op->path, op->path2, op->flags & PROTO_FILE_OVERWRITE);
        break;
    case PROTO_FILE_CHMOD:
        r = change_mode(root, op->path, op->mode);
        break;
    case PROTO_FILE_OP_END:
        break;
    }
    return r;
}

int ns_file_op(struct sandbox *sb, const struct proto_file_op *op, int *fd, err_t *err)
{
    if (op->path[0] != '/' || (op->op == PROTO_FILE_RENAME && op->path2[0] != '/'))
        return err_set(err, -EINVAL, "paths must be absolute: %s", op->path);
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
        return err_set(err, -errno, "socketpair: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(sp[0]);
        close(sp[1]);
        return err_set(err, -e, "cannot start a file helper: %s", strerror(e));
    }
    if (pid == 0) {
        int keep[] = {sp[1], sb->init_pidfd};
        close_fds_except(keep, ARRAY_LEN(keep));
        struct proto_result res = {0};
        int mem = -1;
        res.status = run_op(sb, op, &res, &mem);
        if (res.status < 0 && mem >= 0) close(mem);
        bool with = res.status == 0 && mem >= 0;
        proto_send(sp[1], PROTO_RESULT, 0, &res, sizeof res, with ? &mem : NULL, with);
        _exit(0);
    }
    close(sp[1]);
    *fd = sp[0];
    return 0;
}
