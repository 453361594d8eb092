/* Templates of the gvisor driver (docs/templates.md): a sandbox whose one program is an
 * MCP server that has just answered initialize and tools/list is checkpointed without
 * stopping (runsc checkpoint --leave-running) into STATE/templates/<key>, with a copy
 * of the server's install (/workspace/mcp/<server>). A new sandbox with the same server
 * then restores that image in place of its own idle sentry and takes over the
 * program, instead of installing and booting it.
 *
 * The daemon chooses the key: it covers everything the program's memory could hold
 * of where it ran (account, limits, command, environment), so an image only ever goes
 * where that program would have started the same way.
 *
 *   STATE/templates/<key>/image        the checkpoint
 *                        /mcp          the install (directories 0755, files readable)
 *                        /server.json  the server's container (serve.c): its name and
 *                                      process, {"name": ..., "process": {...}}
 *                        /program      or the program's id in the agent (agent/frame.h),
 *                                      for a server the agent started
 *                        /runsc        the runsc version that wrote the image */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/frame.h"
#include "ns_impl.h"

#define TEMPLATES_DIR "server-templates"
#define TEMPLATE_MAX 64 /* kept at once; past it the least recently used goes */
#define TREE_MAX_DEPTH 64

static void template_path(const struct sandbox *sb, const char *key, const char *suffix, char *out,
                          size_t n)
{
    snprintf(out, n, "%s/" TEMPLATES_DIR "/%s%s", sb->host->state_dir, key, suffix);
}

/* ---- copying a tree that a sandbox could have changed ---- */

static int copy_file(int from, int to, const char *name, mode_t mode)
{
    /* Non-blocking, and checked once open: what was a file a moment ago may be a FIFO
     * now (the sandbox runs on while its install is copied), whose open would block. */
    int in = openat(from, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (in < 0) return -errno;
    struct stat st;
    if (fstat(in, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(in);
        return -EINVAL;
    }
    int out = openat(to, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    int r = out < 0 ? -errno : 0;
    for (ssize_t n = 1; r == 0 && n > 0;) {
        n = sendfile(out, in, NULL, 1 << 20); /* copy_file_range stops at file systems */
        if (n < 0) r = -errno;
    }
    if (r == 0 && fchmod(out, mode) < 0) r = -errno; /* the umask's cut back */
    close(in);
    if (out >= 0) close(out);
    return r;
}

/* Copies what from holds into to, never following a symlink (they are copied as
 * symlinks) and leaving out anything but directories, files and symlinks. Directories
 * come out 0755 and files readable by all (executable ones stay so): the copier may be
 * a sandbox's user reading a root-owned template. */
static int copy_tree(int from, int to, int depth)
{
    if (depth > TREE_MAX_DEPTH) return -ELOOP;
    int fd = fcntl(from, F_DUPFD_CLOEXEC, 0);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0) close(fd);
        return -errno;
    }
    int r = 0;
    struct stat st;
    for (struct dirent *de; r == 0 && (de = readdir(d));) {
        const char *name = de->d_name;
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) continue;
        if (fstatat(from, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            r = -errno;
        } else if (S_ISDIR(st.st_mode)) {
            if (mkdirat(to, name, 0755) < 0) r = -errno;
            int a =
                r == 0 ? openat(from, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
            int b = a >= 0 ? openat(to, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
            if (r == 0 && (a < 0 || b < 0)) r = -errno;
            if (r == 0 && fchmod(b, 0755) < 0) r = -errno; /* the umask's cut back */
            if (r == 0) r = copy_tree(a, b, depth + 1);
            if (a >= 0) close(a);
            if (b >= 0) close(b);
        } else if (S_ISREG(st.st_mode)) {
            r = copy_file(from, to, name, (st.st_mode & 0755) | 0644);
        } else if (S_ISLNK(st.st_mode)) {
            char target[PATH_MAX];
            ssize_t n = readlinkat(from, name, target, sizeof target - 1);
            if (n < 0) r = -errno;
            target[n < 0 ? 0 : n] = '\0';
            if (r == 0 && symlinkat(target, to, name) < 0) r = -errno;
        }
    }
    closedir(d);
    return r;
}

/* Runs fn(sb, arg) in a forked child (it may change namespace or identity): its answer,
 * 0 or -errno. Not ns_helper, which closes every descriptor but its own: the template's
 * directory, opened here, must reach the child. */
static int in_child(struct sandbox *sb, int (*fn)(struct sandbox *sb, const void *arg),
                    const void *arg)
{
    pid_t pid = fork();
    if (pid < 0) return -errno;
    if (pid == 0) _exit((unsigned char)-fn(sb, arg));
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(st) ? -WEXITSTATUS(st) : -EIO;
}

struct tree_copy {
    int dir;            /* the template's mcp directory */
    const char *server; /* /workspace/mcp/<server> in the sandbox */
};

/* Saving: the sandbox's install into the template, as root, in the sandbox's mount
 * namespace; no step of the path may be a symlink (the sandbox could have made it one). */
static int save_install(struct sandbox *sb, const void *arg)
{
    const struct tree_copy *c = arg;
    char root_path[700], path[128];
    snprintf(root_path, sizeof root_path, "%s/root", sb->dir);
    snprintf(path, sizeof path, "workspace/mcp/%s", c->server);
    if (setns(sb->init_pidfd, CLONE_NEWNS) < 0) return -errno;
    int root = open(root_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root < 0) return -errno;
    struct open_how how = {.flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
                           .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS};
    int from = (int)syscall(SYS_openat2, root, path, &how, sizeof how);
    if (from < 0) return -errno;
    return copy_tree(from, c->dir, 0);
}

/* Restoring: the template's install into the sandbox's /workspace/mcp/<server>, as the
 * sandbox's user (so its files are its own and a symlink it made leads nowhere else);
 * -EEXIST when the sandbox has that install already. */
static int restore_install(struct sandbox *sb, const void *arg)
{
    const struct tree_copy *c = arg;
    int root = ns_enter_as_user(sb);
    if (root < 0) return root;
    int ws = ns_open_in_root(root, "/workspace", O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
    if (ws < 0) return ws;
    if (mkdirat(ws, "mcp", 0755) < 0 && errno != EEXIST) return -errno;
    int mcp = openat(ws, "mcp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (mcp < 0 || mkdirat(mcp, c->server, 0755) < 0) return -errno;
    int to = openat(mcp, c->server, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    return to < 0 ? -errno : copy_tree(c->dir, to, 0);
}

/* ---- keeping templates ---- */

static int write_text(const char *dir, const char *name, const char *text)
{
    char path[800];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "we");
    if (!f) return -errno;
    fprintf(f, "%s\n", text);
    return fclose(f) == 0 ? 0 : -EIO;
}

/* Past TEMPLATE_MAX, the template used least recently (a restore touches it) goes. */
static void make_room(const struct sandbox *sb)
{
    char dir[600], oldest[300] = "", path[900];
    snprintf(dir, sizeof dir, "%s/" TEMPLATES_DIR, sb->host->state_dir);
    DIR *d = opendir(dir);
    int n = 0;
    time_t when = 0;
    struct stat st;
    for (struct dirent *de; d && (de = readdir(d));) {
        if (de->d_name[0] == '.' || fstatat(dirfd(d), de->d_name, &st, 0) < 0) continue;
        n++;
        if (!oldest[0] || st.st_mtime < when) {
            snprintf(oldest, sizeof oldest, "%s", de->d_name);
            when = st.st_mtime;
        }
    }
    if (d) closedir(d);
    snprintf(path, sizeof path, "%s/%s", dir, oldest);
    if (n >= TEMPLATE_MAX && oldest[0]) ns_remove_tree(path);
}

int gvisor_template_save(struct sandbox *sb, const char *key, const char *server,
                         uint64_t *image_bytes, err_t *err)
{
    /* Its server in a container of its own (serve.c), or as the agent's program. */
    char name[SHIM_NAME_MAX] = "";
    json_t *process = NULL;
    int served = gvisor_server_of_template(sb, name, &process);
    int id =
        served == 0 || served == -ENOENT ? gvisor_shim_tell(sb, SHIM_ONLY_PROGRAM, -1) : served;
    json_t *container = id > 0 && served == 0
                            ? json_pack("{s:s,s:o}", "name", name, "process", process)
                            : (json_decref(process), NULL);
    if (id <= 0)
        return err_set(err, id < 0 ? id : -ESRCH,
                       "a template is taken when its server is the only program running");
    char dir[700], tmp[720], flag[740], path[760];
    template_path(sb, "", "", dir, sizeof dir);
    mkdir(dir, 0700);
    make_room(sb);
    template_path(sb, key, "", dir, sizeof dir);
    snprintf(tmp, sizeof tmp, "%s.new", dir);
    ns_remove_tree(tmp);
    snprintf(path, sizeof path, "%s/mcp", tmp);
    if (mkdir(tmp, 0700) < 0 || mkdir(path, 0755) < 0 || chmod(path, 0755) < 0) {
        json_decref(container);
        return err_set(err, -errno, "cannot make %s: %s", path, strerror(errno));
    }
    snprintf(flag, sizeof flag, "--image-path=%s/image", tmp);
    int r = gvisor_runsc(sb,
                         (const char *[]){"checkpoint", "--leave-running", flag,
                                          "--compression=flate-best-speed", sb->spec.id, NULL},
                         -1, -1, err);
    struct tree_copy c = {.dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC), .server = server};
    int copied = r == 0 ? in_child(sb, save_install, &c) : 0;
    if (copied < 0) r = err_set(err, copied, "cannot copy its install: %s", strerror(-copied));
    if (c.dir >= 0) close(c.dir);
    char text[16], server_path[760];
    snprintf(text, sizeof text, "%d", id);
    snprintf(server_path, sizeof server_path, "%s/server.json", tmp);
    if (r == 0 && ((container ? json_dump_file(container, server_path, JSON_COMPACT)
                              : write_text(tmp, "program", text)) < 0 ||
                   write_text(tmp, "runsc", RUNSC_MODULE_VERSION) < 0))
        r = err_set(err, -EIO, "cannot write the template's files");
    json_decref(container);
    if (r == 0) ns_remove_tree(dir);
    if (r == 0 && rename(tmp, dir) < 0)
        r = err_set(err, -errno, "cannot keep the template: %s", strerror(errno));
    if (r < 0) {
        ns_remove_tree(tmp);
        return r;
    }
    snprintf(path, sizeof path, "%s/image", dir);
    *image_bytes = gvisor_dir_bytes(path);
    return 0;
}

/* What the template's server is, when the template is there whole and this runsc wrote
 * it: 1 with *container (its container's name and process), or with *id (the agent's
 * program); 0 if neither. */
static int template_server(const char *dir, uint32_t *id, json_t **container)
{
    char path[800], text[128] = "";
    snprintf(path, sizeof path, "%s/runsc", dir);
    read_file_small(path, text, sizeof text);
    text[strcspn(text, "\n")] = '\0';
    if (strcmp(text, RUNSC_MODULE_VERSION) != 0) return 0;
    snprintf(path, sizeof path, "%s/server.json", dir);
    *container = json_load_file(path, 0, NULL);
    if (*container) return json_is_string(json_object_get(*container, "name")) ? 1 : 0;
    snprintf(path, sizeof path, "%s/program", dir);
    text[0] = '\0';
    read_file_small(path, text, sizeof text);
    *id = (uint32_t)strtoul(text, NULL, 10);
    return *id != 0;
}

/* The template's image in place of the sandbox's idle sentry, and its server's pipes. */
static int swap_sentry(struct sandbox *sb, const char *dir, uint32_t id, json_t *container,
                       int fds[4], err_t *err)
{
    char image[800];
    snprintf(image, sizeof image, "%s/image", dir);
    int r = gvisor_shim_tell(sb, SHIM_HIBERNATE, -1); /* the sentry's end is not the sandbox's */
    if (r < 0) return err_set(err, r, "cannot reach the sandbox's shim: %s", strerror(-r));
    gvisor_forget_container(sb);
    /* A server's container is restored with pipes the shim holds already. */
    if (container)
        r = gvisor_server_from_template(sb, json_string_value(json_object_get(container, "name")),
                                        json_object_get(container, "process"), fds, err);
    if (r == 0) r = gvisor_restore_image(sb, image, true, err);
    if (r == 0 && !container) r = gvisor_shim_adopt(sb, id, fds, err);
    if (r < 0 && container && fds[0] >= 0)
        for (int i = 0; i < 4; i++)
            close(fds[i]);
    return r;
}

int gvisor_template_restore(struct sandbox *sb, const char *key, const char *server, int fds[5],
                            err_t *err)
{
    char dir[700], mcp[720];
    template_path(sb, key, "", dir, sizeof dir);
    uint32_t id = 0;
    json_t *container = NULL;
    if (!template_server(dir, &id, &container)) {
        json_decref(container);
        return err_set(err, -ENOENT, "there is no template for it");
    }
    int running = gvisor_shim_tell(sb, SHIM_ONLY_PROGRAM, -1);
    if (running != 0) {
        json_decref(container);
        return err_set(err, -EBUSY, "a template replaces a sandbox only while nothing runs in it");
    }
    snprintf(mcp, sizeof mcp, "%s/mcp", dir);
    struct tree_copy c = {.dir = open(mcp, O_RDONLY | O_DIRECTORY | O_CLOEXEC), .server = server};
    int r = c.dir < 0 ? -errno : in_child(sb, restore_install, &c);
    if (c.dir >= 0) close(c.dir);
    if (r < 0) {
        json_decref(container);
        return err_set(err, r, "cannot copy the template's install into it: %s", strerror(-r));
    }
    utimensat(AT_FDCWD, dir, NULL, 0); /* recently used */
    fds[0] = -1;
    r = swap_sentry(sb, dir, id, container, fds, err);
    json_decref(container);
    if (r == 0) {
        fds[4] = fcntl(sb->boot_pidfd, F_DUPFD_CLOEXEC, 3);
        return 0;
    }
    /* The image would not do: the template goes, and the sandbox starts as it was. */
    ns_remove_tree(dir);
    err_t why = *err;
    r = gvisor_start_again(sb, err);
    if (r < 0) return r;
    fds[4] = fcntl(sb->boot_pidfd, F_DUPFD_CLOEXEC, 3);
    err_set(err, 0, "its template would not restore: %s", why.msg);
    return 1;
}
