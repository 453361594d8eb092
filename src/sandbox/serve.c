/* MCP servers under the gvisor driver, each in a container of its own in the sandbox
 * (docs/gvisor.md, "MCP servers in containers of their own").
 *
 * A program the agent starts has its stdio in gVisor's pipes, carried over the agent's
 * one pair of host pipes as frames: every request and answer wakes the agent inside and
 * the shim outside. A server's container instead has host pipes as its stdin and stdout,
 * as a bare runsc's program has, and a checkpoint keeps it: `runsc restore` of that
 * container, after the root's, takes its stdio again. So the daemon writes the server's
 * requests and reads its answers directly.
 *
 * The container's process is the agent binary as a supervisor (agent.c, serve): it starts
 * the server and speaks frames on the container's stderr, which the shim reads (the
 * server's stderr, its start and its exit: the status the daemon waits for). The shim
 * keeps the container's ends of the three pipes for a restore (SHIM_SERVER_ENDS), and
 * closing its end of the frames is how a server is stopped.
 *
 * Each container's bundle is STATE/sandboxes/<id>/servers/<name>: the sandbox's own, with
 * the supervisor as its process and the annotations that make runsc start it in the
 * sandbox. A container that ended is deleted at the next server's start or checkpoint. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/frame.h"
#include "ns_impl.h"

static void server_dir(const struct sandbox *sb, const char *name, char *out, size_t n)
{
    snprintf(out, n, "%s/" GVISOR_SERVERS "/%s", sb->dir, name);
}

/* A name no container of this sentry has had (64 random bits): gVisor keeps a
 * container's cgroup after it is deleted (its process joins /<name> in each), and
 * refuses the name again. Of one length, and not starting with the sandbox's id: runsc
 * takes any unambiguous prefix of a container's id for it. */
static int new_name(char out[SHIM_NAME_MAX], err_t *err)
{
    uint64_t bits;
    if (getrandom(&bits, sizeof bits, 0) != (ssize_t)sizeof bits)
        return err_set(err, -EIO, "no random bytes for a container's name");
    snprintf(out, SHIM_NAME_MAX, "mcp-%016llx", (unsigned long long)bits);
    return 0;
}

static json_t *string_array(const char *const *v)
{
    json_t *a = json_array();
    for (; a && v && *v; v++)
        if (json_array_append_new(a, json_string(*v)) < 0) { /* not UTF-8 */
            json_decref(a);
            return NULL;
        }
    return a;
}

/* The supervisor starting ex, as a container's process; NULL when a string of ex is not
 * UTF-8, which an OCI bundle cannot hold. */
static json_t *server_process_json(const struct sandbox *sb, const struct sandbox_exec *ex)
{
    char pids[16];
    snprintf(pids, sizeof pids, "%u", sb->spec.pids_max);
    json_t *args = json_pack("[s,s,s,s,s]", GVISOR_AGENT_PATH, "--serve", pids, ex->cwd, "--");
    json_t *argv = string_array(ex->argv), *env = string_array(ex->envp);
    if (!args || !argv || !env || json_array_extend(args, argv) < 0) {
        json_decref(args);
        json_decref(argv);
        json_decref(env);
        return NULL;
    }
    json_decref(argv);
    return json_pack("{s:{s:i,s:i},s:o,s:o,s:s,s:o,s:b}", "user", "uid", 0, "gid", 0, "args", args,
                     "env", env, "cwd", "/", "capabilities", gvisor_agent_capabilities(),
                     "noNewPrivileges", 1);
}

/* STATE/sandboxes/<id>/servers/<name>/config.json: the sandbox's bundle with process as
 * its container's process (a reference taken). Its own cgroup mount: the supervisor
 * sets the container's pids limit there. */
static int write_server_bundle(const struct sandbox *sb, const char *name, json_t *process,
                               err_t *err)
{
    char dir[800], path[820];
    snprintf(dir, sizeof dir, "%s/" GVISOR_SERVERS, sb->dir);
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return err_set(err, -errno, "cannot make %s: %s", dir, strerror(errno));
    server_dir(sb, name, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/config.json", dir);
    json_t *spec = gvisor_bundle_json(sb);
    int r = spec && mkdir(dir, 0700) == 0 ? 0 : -EIO;
    if (r == 0) {
        json_object_set(spec, "process", process);
        json_object_set_new(spec, "annotations",
                            json_pack("{s:s,s:s,s:s}", "io.kubernetes.cri.container-type",
                                      "container", "io.kubernetes.cri.sandbox-id", sb->spec.id,
                                      "io.kubernetes.cri.container-name", name));
        if (json_dump_file(spec, path, JSON_COMPACT) < 0) r = -EIO;
    }
    json_decref(spec);
    return r < 0 ? err_set(err, r, "cannot write the OCI bundle %s", path) : 0;
}

static void delete_container(struct sandbox *sb, const char *name, void *arg)
{
    err_t ignored = {0};
    gvisor_runsc(sb, (const char *[]){"delete", "--force", name, NULL}, -1, -1, &ignored);
}

/* The container of a server that is no longer running goes, with its bundle. */
static void delete_server(struct sandbox *sb, const char *name)
{
    char dir[800];
    delete_container(sb, name, NULL);
    server_dir(sb, name, dir, sizeof dir);
    ns_remove_tree(dir);
}

/* The container ends of running server name, which the shim keeps: 0, or -ENOENT when
 * it has none (the server ended, or was stopped). */
static int server_ends(struct sandbox *sb, const char *name, int ends[3])
{
    return gvisor_shim_call(sb, SHIM_SERVER_ENDS, name, strlen(name), NULL, 0, ends, 3);
}

/* Unless the shim says it has ended (not when the shim cannot be asked). */
static bool server_running(struct sandbox *sb, const char *name)
{
    int ends[3];
    int r = server_ends(sb, name, ends);
    for (int i = 0; r == 0 && i < 3; i++)
        close(ends[i]);
    return r != -ENOENT;
}

/* Calls fn for each server container the sandbox has a bundle of; returns how many. */
static int each_server(struct sandbox *sb, void (*fn)(struct sandbox *, const char *, void *),
                       void *arg)
{
    char dir[800];
    snprintf(dir, sizeof dir, "%s/" GVISOR_SERVERS, sb->dir);
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *de; d && (de = readdir(d));) {
        if (de->d_name[0] == '.') continue;
        n++;
        if (fn) fn(sb, de->d_name, arg);
    }
    if (d) closedir(d);
    return n;
}

static void delete_if_ended(struct sandbox *sb, const char *name, void *arg)
{
    if (!server_running(sb, name)) delete_server(sb, name);
}

int gvisor_servers_prune(struct sandbox *sb)
{
    each_server(sb, delete_if_ended, NULL);
    return each_server(sb, NULL, NULL);
}

void gvisor_servers_delete(struct sandbox *sb)
{
    each_server(sb, delete_container, NULL);
}

void gvisor_servers_forget(struct sandbox *sb)
{
    char dir[800];
    snprintf(dir, sizeof dir, "%s/" GVISOR_SERVERS, sb->dir);
    ns_remove_tree(dir);
}

static void close_pipes(int (*p)[2], int n)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < 2; j++)
            if (p[i][j] >= 0) close(p[i][j]);
}

static int make_server_pipes(int p[3][2], err_t *err)
{
    for (int i = 0; i < 3; i++)
        p[i][0] = p[i][1] = -1;
    for (int i = 0; i < 3; i++)
        if (pipe2(p[i], O_CLOEXEC) < 0) {
            int e = errno;
            close_pipes(p, 3);
            return err_set(err, -e, "pipe: %s", strerror(e));
        }
    return 0;
}

/* The shim takes the server's frames (p[2]'s read end) and keeps its container's ends of
 * the three pipes; fds get the server's stdin and stdout (the daemon's to use directly)
 * and the shim's stderr and status pipes. */
static int hand_to_shim(struct sandbox *sb, const char *name, int p[3][2], int fds[4], err_t *err)
{
    int theirs[2] = {-1, -1};
    int given[4] = {p[2][0], p[0][0], p[1][1], p[2][1]};
    int r = gvisor_shim_call(sb, SHIM_SERVE, name, strlen(name), given, 4, theirs, 2);
    if (r < 0) return err_set(err, r, "the sandbox's shim cannot take it: %s", strerror(-r));
    fds[0] = p[0][1], p[0][1] = -1;
    fds[1] = p[1][0], p[1][0] = -1;
    fds[2] = theirs[0];
    fds[3] = theirs[1];
    return 0;
}

/* `runsc run` of the server's container with the pipes as its stdio, then to the shim. */
static int start_server(struct sandbox *sb, const char *name, int fds[4], err_t *err)
{
    int p[3][2]; /* stdin, stdout, frames */
    int r = make_server_pipes(p, err);
    if (r < 0) return r;
    char dir[800], bundle[820];
    server_dir(sb, name, dir, sizeof dir);
    snprintf(bundle, sizeof bundle, "--bundle=%s", dir);
    struct runsc_job job;
    r = gvisor_runsc_start(sb, (const char *[]){"run", "--detach", bundle, name, NULL},
                           (const int[3]){p[0][0], p[1][1], p[2][1]}, &job, err);
    if (r == 0) r = gvisor_runsc_wait(&job, err);
    if (r < 0) {
        char why[512];
        fcntl(p[2][0], F_SETFL, O_NONBLOCK); /* what runsc said on the container's stderr */
        gvisor_runsc_said(p[2][0], false, why, sizeof why);
        err_set(err, r, "runsc could not start its container: %s", why[0] ? why : "no message");
    }
    if (r == 0) r = hand_to_shim(sb, name, p, fds, err);
    close_pipes(p, 3);
    return r;
}

int gvisor_serve(struct sandbox *sb, const struct sandbox_exec *ex, int fds[4], err_t *err)
{
    char name[SHIM_NAME_MAX];
    int r = new_name(name, err);
    if (r < 0) return r;
    json_t *process = server_process_json(sb, ex);
    if (!process) return err_set(err, -EILSEQ, "its command or environment is not UTF-8");
    gvisor_servers_prune(sb);
    r = write_server_bundle(sb, name, process, err);
    json_decref(process);
    if (r == 0) r = start_server(sb, name, fds, err);
    if (r < 0) delete_server(sb, name);
    return r;
}

/* ---- templates (template.c) ---- */

struct running {
    int n;
    char name[SHIM_NAME_MAX];
};

static void count_running(struct sandbox *sb, const char *name, void *arg)
{
    struct running *run = arg;
    if (!server_running(sb, name)) return;
    if (run->n++ == 0) snprintf(run->name, sizeof run->name, "%s", name);
}

int gvisor_server_of_template(struct sandbox *sb, char name[SHIM_NAME_MAX], json_t **process)
{
    struct running run = {0};
    each_server(sb, count_running, &run);
    if (run.n != 1) return run.n ? -EBUSY : -ENOENT;
    char path[840];
    server_dir(sb, run.name, path, sizeof path);
    strcat(path, "/config.json");
    json_t *spec = json_load_file(path, 0, NULL);
    *process = json_incref(json_object_get(spec, "process"));
    json_decref(spec);
    if (!*process) return -EIO;
    memcpy(name, run.name, SHIM_NAME_MAX);
    return 0;
}

int gvisor_server_from_template(struct sandbox *sb, const char *name, json_t *process, int fds[4],
                                err_t *err)
{
    int p[3][2];
    int r = write_server_bundle(sb, name, process, err);
    if (r == 0) r = make_server_pipes(p, err);
    if (r < 0) return r;
    r = hand_to_shim(sb, name, p, fds, err);
    close_pipes(p, 3);
    return r;
}

/* ---- restore ---- */

/* Pipes for a server whose ends the shim no longer has: its supervisor sees nobody
 * reads its frames, and kills it. */
static int orphan_ends(int ends[3])
{
    int p[3][2] = {{-1, -1}, {-1, -1}, {-1, -1}};
    for (int i = 0; i < 3; i++)
        if (pipe2(p[i], O_CLOEXEC) < 0) {
            close_pipes(p, 3);
            return -errno;
        }
    ends[0] = p[0][0];
    ends[1] = p[1][1];
    ends[2] = p[2][1];
    close(p[0][1]);
    close(p[1][0]);
    close(p[2][0]);
    return 0;
}

struct restoring {
    const char *image_flag;
    bool any_spec;
    struct runsc_job jobs[64];
    int n, r;
    err_t *err;
};

static void start_restore(struct sandbox *sb, const char *name, void *arg)
{
    struct restoring *rs = arg;
    int ends[3];
    if (rs->r < 0) return;
    if (rs->n == (int)ARRAY_LEN(rs->jobs)) {
        rs->r = err_set(rs->err, -E2BIG, "more than %zu servers to restore", ARRAY_LEN(rs->jobs));
        return;
    }
    int r = server_ends(sb, name, ends);
    if (r == -ENOENT) r = orphan_ends(ends);
    if (r < 0) {
        rs->r = err_set(rs->err, r, "no pipes for server %s: %s", name, strerror(-r));
        return;
    }
    char dir[800], bundle[820];
    server_dir(sb, name, dir, sizeof dir);
    snprintf(bundle, sizeof bundle, "--bundle=%s", dir);
    const char *words[] = {"--restore-spec-validation=warning",
                           "restore",
                           "--detach",
                           bundle,
                           rs->image_flag,
                           name,
                           NULL};
    rs->r =
        gvisor_runsc_start(sb, rs->any_spec ? words : words + 1, ends, &rs->jobs[rs->n], rs->err);
    if (rs->r == 0) rs->n++;
    for (int i = 0; i < 3; i++)
        close(ends[i]);
}

/* A container's restore loads the sandbox's record, which the root's restore writes first
 * (runsc's state file): until then it fails. Waits for it (every 5 ms, bounded), or for
 * the root's restore to end. */
static void wait_sandbox_record(struct sandbox *sb, struct runsc_job *root)
{
    char path[800];
    snprintf(path, sizeof path, "%s/runsc/%s_sandbox:%s.state", sb->dir, sb->spec.id, sb->spec.id);
    for (int waited = 0; waited < RUNSC_TIMEOUT_MS && access(path, F_OK) < 0; waited += 5) {
        siginfo_t si = {0};
        if (waitid(P_PID, (id_t)root->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid)
            return;
        usleep(5000);
    }
}

int gvisor_servers_restore(struct sandbox *sb, const char *image_flag, bool any_spec,
                           struct runsc_job *root, err_t *err)
{
    struct restoring rs = {.image_flag = image_flag, .any_spec = any_spec, .err = err};
    if (each_server(sb, NULL, NULL)) wait_sandbox_record(sb, root);
    each_server(sb, start_restore, &rs);
    /* The root's restore waits for every container of the image, ours included. */
    err_t why = {0};
    int r = gvisor_runsc_wait(root, &why);
    for (int i = 0; i < rs.n; i++) {
        int s = gvisor_runsc_wait(&rs.jobs[i], rs.r == 0 ? err : &(err_t){0});
        if (rs.r == 0 && s < 0) rs.r = s;
    }
    if (r < 0) return err_set(err, r, "%s", why.msg);
    return rs.r;
}
