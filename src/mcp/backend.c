/* A server process and the gateway's JSON-RPC link to it: newline-delimited JSON on its
 * stdin and stdout, stderr kept as a short tail for error messages. The gateway
 * initializes it once, lists its tools (all pages) and puts them through the gate
 * before any client is served. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../fingerprint/fingerprint.h"
#include "../secrets/secrets.h"
#include "mcp_impl.h"

#define MAX_PAGES 100
#define RESTART_MAX_MS 60000

static void on_page(struct mcp_backend *be, json_t *msg, const char *line, size_t len);

/* ---- the process ---- */

static void nonblock(int fd)
{
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* A catalog command's "${NAME}" argument: the setting NAME from env. */
static const char *expand(const struct mcp_server *ms, const char *a, json_t *env, err_t *err)
{
    size_t len = strlen(a);
    if (len <= 3 || a[0] != '$' || a[1] != '{' || a[len - 1] != '}') return a;
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)(len - 3), a + 2);
    const char *v = json_string_value(json_object_get(env, name));
    if (!v) err_set(err, -EINVAL, "server %s needs the setting %s", ms->name, name);
    return v;
}

/* argv: the catalog's command with "${NAME}" arguments taken from env, or the own
 * command; then the start call's args. */
static int build_argv(struct mcp_server *ms, json_t *env, const char ***out, err_t *err)
{
    json_t *cmd = ms->entry ? json_object_get(ms->entry, "command") : NULL;
    const struct model_strings *own = &ms->config.command, *args = &ms->config.args;
    size_t n = (ms->entry ? json_array_size(cmd) : own->n) + args->n, k = 0;
    const char **argv = calloc(n + 1, sizeof *argv);
    if (!argv) return err_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; ms->entry && i < json_array_size(cmd); i++) {
        if (!(argv[k++] = expand(ms, json_string_value(json_array_get(cmd, i)), env, err))) {
            free(argv);
            return -EINVAL;
        }
    }
    for (size_t i = 0; !ms->entry && i < own->n; i++)
        argv[k++] = own->v[i];
    for (size_t i = 0; i < args->n; i++)
        argv[k++] = args->v[i];
    *out = argv;
    return 0;
}

/* env: the sandbox's, the server's own settings, its secrets under the names it wants,
 * and for catalog servers the install's bin folder first on PATH. */
static json_t *build_env(struct mcp_server *ms, err_t *err)
{
    struct server *srv = ms->box->srv;
    json_t *extra = model_map_json(&ms->config.env);
    json_t *all = server_exec_env(srv, ms->box->sb, NULL, err);
    if (!all) {
        json_decref(extra);
        return NULL;
    }
    for (size_t i = 0; i < ms->config.secrets.n; i++) {
        /* The secret's placeholder is in the variable of its env (its name by default). */
        const struct model_pair *p = &ms->config.secrets.v[i];
        const char *var = vault_env_name(server_vault(srv), sbx_account(ms->box->sb), p->value);
        json_t *ph = var ? json_object_get(all, var) : NULL;
        if (ph) json_object_set(extra, p->key, ph);
    }
    json_decref(all);
    json_t *env = server_exec_env(srv, ms->box->sb, extra, err);
    json_decref(extra);
    if (env && ms->entry) {
        /* The install's bin folder first: the package's bins (node) or the venv's
         * python3 (python), so the catalog's command names them plainly. */
        const char *bin =
            strcmp(json_string_value(json_object_get(ms->entry, "runtime")), "python") == 0
                ? "bin"
                : "node_modules/.bin";
        char *path = NULL;
        if (asprintf(&path, "/workspace/mcp/%s/%s:%s", ms->name, bin,
                     json_string_value(json_object_get(env, "PATH")) ?: "/usr/bin") > 0) {
            json_object_set_new(env, "PATH", json_string(path));
            free(path);
        }
        /* What the catalog fixes for this server (fetch: a PATH without node). */
        json_object_update(env, json_object_get(ms->entry, "env"));
    }
    return env;
}

static void on_readable(evutil_socket_t fd, short what, void *arg);
static void on_writable(evutil_socket_t fd, short what, void *arg);
static void on_stderr(evutil_socket_t fd, short what, void *arg);
static void on_exit_status(evutil_socket_t fd, short what, void *arg);
static void on_deadline(evutil_socket_t fd, short what, void *arg);
static void on_rested(evutil_socket_t fd, short what, void *arg);

static void watch(struct mcp_backend *be, int fds[4])
{
    struct event_base *base = server_base(be->server->box->srv);
    be->in_fd = fds[0];
    be->out_fd = fds[1];
    be->err_fd = fds[2];
    be->status_fd = fds[3];
    for (int i = 0; i < 4; i++)
        nonblock(fds[i]);
    be->in_ev = event_new(base, be->in_fd, EV_WRITE | EV_PERSIST, on_writable, be);
    be->out_ev = event_new(base, be->out_fd, EV_READ | EV_PERSIST, on_readable, be);
    be->err_ev = event_new(base, be->err_fd, EV_READ | EV_PERSIST, on_stderr, be);
    be->status_ev = event_new(base, be->status_fd, EV_READ | EV_PERSIST, on_exit_status, be);
    be->out_rest = evtimer_new(base, on_rested, be);
    be->out_tokens = MCP_OUTPUT_BURST;
    be->out_ms = now_ms();
    event_add(be->out_ev, NULL);
    event_add(be->err_ev, NULL);
    event_add(be->status_ev, NULL);
}

static void send_initialize(struct mcp_backend *be);
static void fail(struct mcp_backend *be, const char *fmt, ...);

/* An exec the keeper has not answered yet. The backend may go first (its
 * server stopped, its sandbox removed, its start timed out): be is then NULL,
 * and the answer's pipes are closed, which stops the process. */
struct mcp_start {
    struct mcp_backend *be;
};

static void on_started(struct server *srv, int *fds, const err_t *err, void *arg)
{
    struct mcp_start *st = arg;
    struct mcp_backend *be = st->be;
    free(st);
    if (!be) {
        for (int i = 0; fds && i < 4; i++)
            close(fds[i]);
        return;
    }
    be->start = NULL;
    if (!fds) return fail(be, "cannot start it: %s", err->msg);
    watch(be, fds);
    send_initialize(be);
}

/* Its start is no longer wanted: the answer, when it comes, is dropped. */
static void drop_start(struct mcp_backend *be)
{
    if (be->start) be->start->be = NULL;
    be->start = NULL;
}

/* What waits to be read by the process is held for its sandbox: charged to its
 * budget as it is queued, given back as the process reads it. */
static void charge_unsent(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
    struct mcp_backend *be = arg;
    size_t back = info->n_deleted < be->charged ? info->n_deleted : be->charged;
    budget_give(be->budget, back);
    be->charged -= back;
    budget_force(be->budget, info->n_added);
    be->charged += info->n_added;
}

static struct mcp_backend *backend_new(struct mcp_server *ms, struct mcp_session *owner,
                                       void (*on_ready)(struct mcp_backend *be, int r,
                                                        const char *error))
{
    struct mcp_backend *be = calloc(1, sizeof *be);
    if (!be) return NULL;
    be->budget = budget_ref(sbx_budget(ms->box->sb));
    be->server = ms;
    be->owner = owner;
    be->on_ready = on_ready;
    be->next_id = 1;
    be->exit_code = -1;
    be->in_fd = be->out_fd = be->err_fd = be->status_fd = -1; /* until the keeper's answer */
    be->to_server = evbuffer_new();
    be->from_server = evbuffer_new();
    be->deadline = evtimer_new(server_base(ms->box->srv), on_deadline, be);
    if (!be->to_server || !be->from_server || !be->deadline) {
        mcp_backend_free(be);
        return NULL;
    }
    evbuffer_add_cb(be->to_server, charge_unsent, be);
    return be;
}

/* The keeper starts the process while the loop goes on; the start's deadline
 * counts from now, the keeper's answer included. */
int mcp_backend_spawn(struct mcp_server *ms, struct mcp_session *owner,
                      void (*on_ready)(struct mcp_backend *be, int r, const char *error),
                      struct mcp_backend **out, err_t *err)
{
    json_t *env = build_env(ms, err);
    if (!env) return -EIO;
    const char **argv = NULL;
    char **envp = NULL;
    struct mcp_backend *be = backend_new(ms, owner, on_ready);
    struct mcp_start *st = be ? calloc(1, sizeof *st) : NULL;
    int r = st ? build_argv(ms, env, &argv, err) : err_set(err, -ENOMEM, "out of memory");
    if (r == 0) r = server_env_list(env, &envp, err);
    if (r == 0) {
        struct server_run_spec spec = {
            .argv = argv, .envp = (const char *const *)envp, .cwd = "/workspace", .serve = true};
        st->be = be;
        r = server_exec(ms->box->srv, ms->box->sb, &spec, on_started, st, err);
    }
    free(argv);
    server_env_free(envp);
    json_decref(env);
    if (r < 0) {
        free(st);
        mcp_backend_free(be);
        return r;
    }
    be->start = st;
    struct timeval tv = {MCP_START_TIMEOUT_MS / 1000, 0};
    evtimer_add(be->deadline, &tv);
    *out = be;
    return 0;
}

static int compare_strings(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Hashes what the process's memory could hold of where it started: the account, the
 * sandbox's limits, the catalog entry, the command line and the whole environment (a
 * secret's placeholder is the sandbox's own, so any secret makes the key its own too). */
int mcp_template_key(struct mcp_server *ms, char key[65], err_t *err)
{
    json_t *env = build_env(ms, err);
    if (!env) return -EIO;
    const char **argv = NULL;
    char **envp = NULL;
    int r = build_argv(ms, env, &argv, err);
    if (r == 0) r = server_env_list(env, &envp, err);
    json_t *what = r == 0 ? json_array() : NULL;
    if (what) {
        const struct model_sandbox *s = sbx_settings(ms->box->sb);
        json_array_append_new(what, json_string("runtime-template-1"));
        json_array_append_new(what, json_string(sbx_account(ms->box->sb)));
        json_array_append_new(what, json_pack("[i,f,i]", s->memory_mib, s->cpus, s->disk_mib));
        json_array_append(what, ms->entry);
        for (const char **a = argv; *a; a++)
            json_array_append_new(what, json_string(*a));
        size_t n = 0;
        while (envp[n])
            n++;
        qsort(envp, n, sizeof *envp, compare_strings);
        for (size_t i = 0; i < n; i++)
            json_array_append_new(what, json_string(envp[i]));
        char *text = json_dumps(what, JSON_COMPACT | JSON_SORT_KEYS);
        if (text) fingerprint_sha256_hex(text, strlen(text), key);
        r = text ? 0 : err_set(err, -ENOMEM, "out of memory");
        free(text);
        json_decref(what);
    }
    free(argv);
    server_env_free(envp);
    json_decref(env);
    return r;
}

static void close_fd(int *fd, struct event **ev)
{
    if (*ev) event_free(*ev);
    *ev = NULL;
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

void mcp_backend_free(struct mcp_backend *be)
{
    if (!be) return;
    drop_start(be);
    if (be->parsing) be->parsing->be = NULL; /* the parser's answer is dropped */
    close_fd(&be->in_fd, &be->in_ev);
    close_fd(&be->out_fd, &be->out_ev);
    close_fd(&be->err_fd, &be->err_ev);
    close_fd(&be->status_fd, &be->status_ev); /* the monitor kills the process */
    if (be->deadline) event_free(be->deadline);
    if (be->out_rest) event_free(be->out_rest);
    for (size_t i = 0; i < MCP_PENDING_SLOTS; i++)
        if (be->pend[i].id) mcp_pending_clear(be, &be->pend[i]);
    for (size_t i = 0; i < be->n_pages; i++)
        free(be->pages[i]);
    free(be->pages);
    free(be->page_len);
    if (be->to_server) evbuffer_free(be->to_server);
    budget_give(be->budget, be->charged);
    budget_unref(be->budget);
    if (be->from_server) evbuffer_free(be->from_server);
    json_decref(be->init_result);
    json_decref(be->held);
    if (be->held_ev) event_free(be->held_ev);
    free(be);
}

static void on_reap(evutil_socket_t fd, short what, void *arg)
{
    mcp_backend_free(arg);
}

void mcp_backend_reap(struct mcp_backend *be)
{
    /* Now, not at the free: by then its server and sessions may be gone. */
    for (size_t i = 0; i < MCP_PENDING_SLOTS && be->n_pending; i++)
        if (be->pend[i].id) mcp_pending_clear(be, &be->pend[i]);
    be->state = BE_DEAD;
    drop_start(be);
    close_fd(&be->in_fd, &be->in_ev);
    close_fd(&be->out_fd, &be->out_ev);
    close_fd(&be->err_fd, &be->err_ev);
    close_fd(&be->status_fd, &be->status_ev);
    if (be->deadline) event_free(be->deadline);
    be->deadline = NULL;
    event_base_once(server_base(be->server->box->srv), -1, EV_TIMEOUT, on_reap, be, NULL);
}

/* ---- writing and reading ---- */

static void flush(struct mcp_backend *be)
{
    while (evbuffer_get_length(be->to_server) > 0) {
        int n = evbuffer_write(be->to_server, be->in_fd);
        if (n < 0 && errno == EAGAIN) {
            event_add(be->in_ev, NULL);
            return;
        }
        if (n <= 0) {
            evbuffer_drain(be->to_server, evbuffer_get_length(be->to_server));
            break; /* it stopped reading: its exit status follows */
        }
    }
    event_del(be->in_ev);
}

static void on_writable(evutil_socket_t fd, short what, void *arg)
{
    flush(arg);
}

void mcp_backend_send(struct mcp_backend *be, json_t *msg)
{
    if (be->modern && json_object_get(msg, "method") && json_object_get(msg, "id"))
        mcp_stdio_envelope(msg, NULL); /* the gateway's own requests */
    size_t len;
    char *text = json_text(msg, &len);
    json_decref(msg);
    if (!text || be->in_fd < 0) {
        free(text);
        return;
    }
    evbuffer_add(be->to_server, text, len);
    evbuffer_add(be->to_server, "\n", 1);
    free(text);
    flush(be);
}

struct mcp_pending *mcp_pending_find(struct mcp_backend *be, int64_t id)
{
    struct mcp_pending *p = &be->pend[(uint64_t)id & (MCP_PENDING_SLOTS - 1)];
    return id > 0 && p->id == id ? p : NULL;
}

int mcp_backend_request(struct mcp_backend *be, json_t *msg, struct mcp_pending **out)
{
    if (be->n_pending >= MCP_PENDING_SLOTS / 2) return -EAGAIN;
    struct mcp_pending *p;
    do
        p = &be->pend[(uint64_t)be->next_id & (MCP_PENDING_SLOTS - 1)];
    while (p->id && ++be->next_id);
    memset(p, 0, sizeof *p);
    p->id = be->next_id++;
    be->n_pending++;
    json_object_set_new(msg, "id", json_integer(p->id));
    *out = p;
    return 0;
}

/* A JSON-RPC 2.0 message as MCP allows it: a request (string method, string or integer
 * id), a notification (method, no id) or a response (id and a result or an error). */
bool mcp_valid_message(json_t *m)
{
    const char *v = json_string_value(json_object_get(m, "jsonrpc"));
    json_t *method = json_object_get(m, "method"), *id = json_object_get(m, "id");
    if (!json_is_object(m) || !v || strcmp(v, "2.0") != 0) return false;
    if (id && !json_is_string(id) && !json_is_integer(id)) return false;
    if (method) return json_is_string(method);
    return id && (json_object_get(m, "result") != NULL) != (json_object_get(m, "error") != NULL);
}

void mcp_pending_clear(struct mcp_backend *be, struct mcp_pending *p)
{
    json_decref(p->client_id);
    json_decref(p->client_token);
    json_decref(p->request);
    json_decref(p->inputs);
    json_decref(p->tool);
    struct mcp_session *waiter = p->session;
    if (waiter) server_sandbox_hold(be->server->box->sb, -1);
    memset(p, 0, sizeof *p);
    be->n_pending--;
    if (waiter) mcp_clients()->request_done(be, waiter);
}

static void fail(struct mcp_backend *be, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define STDOUT_EXCERPT 200 /* bytes of a first line that is not JSON-RPC, in the error */

/* A first line on stdout that is not JSON-RPC: the process writes something else there
 * (a banner, logs), and waiting for its answer to initialize would only end at the start's
 * deadline, saying nothing of why. */
static void fail_not_jsonrpc(struct mcp_backend *be, const char *line, size_t len)
{
    char shown[STDOUT_EXCERPT * 4 + 8];
    text_escape(line, len, STDOUT_EXCERPT, shown, sizeof shown);
    fail(be,
         "its first line on stdout is not JSON-RPC: \"%s\"; MCP's stdio transport carries "
         "only JSON-RPC messages on stdout (a server writes its logs to stderr)",
         shown);
}

static bool blank(const char *line, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (line[i] != ' ' && line[i] != '\t' && line[i] != '\r') return false;
    return true;
}

/* One line the process wrote, parsed (msg: NULL when it is not JSON; taken). */
static void handle_line(struct mcp_backend *be, const char *line, size_t len, json_t *msg)
{
    bool first = !be->spoke && !blank(line, len);
    be->spoke = be->spoke || first;
    if (first && !mcp_valid_message(msg)) {
        json_decref(msg);
        return fail_not_jsonrpc(be, line, len);
    }
    if (!json_is_object(msg)) {
        json_decref(msg);
        return; /* a log line on stdout: not protocol, not for clients */
    }
    json_t *id = json_object_get(msg, "id");
    bool response = id && !json_object_get(msg, "method");
    struct mcp_pending *p =
        response && json_is_integer(id) ? mcp_pending_find(be, json_integer_value(id)) : NULL;
    if (p && p->internal) {
        mcp_internal_fn fn = p->internal;
        mcp_pending_clear(be, p);
        fn(be, msg, line, len);
    } else if (!response || p) {
        const char *method = json_string_value(json_object_get(msg, "method"));
        if (method && strcmp(method, "notifications/tools/list_changed") == 0 &&
            be->state == BE_READY) {
            json_t *list =
                json_pack("{s:s,s:s,s:{}}", "jsonrpc", "2.0", "method", "tools/list", "params");
            struct mcp_pending *lp;
            if (mcp_backend_request(be, list, &lp) == 0) {
                lp->internal = on_page;
                be->relisting = true;
                mcp_backend_send(be, list);
            } else {
                json_decref(list);
            }
        } else {
            mcp_clients()->from_server(be, msg);
        }
    }
    json_decref(msg);
}

/* One read: the number of bytes, 0 at EOF (reading stops), negative when none now.
 * 16 KiB at a time: what one wakeup parses and routes is the time every other
 * sandbox's request may wait behind a server that floods its output. */
static ssize_t read_some(struct mcp_backend *be, int fd)
{
    char chunk[16384];
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n > 0)
        evbuffer_add(be->from_server, chunk, (size_t)n);
    else if (n == 0 || errno != EAGAIN)
        event_del(be->out_ev); /* the exit status tells the rest */
    return n;
}

/* The complete lines in from_server, taken out of it (NULL: none). A line longer than
 * a message may be is dropped here; a process that writes one without its end fails
 * in handle_lines. */
static struct mcp_batch *take_lines(struct mcp_backend *be)
{
    struct mcp_batch *b = NULL;
    size_t cap = 0;
    for (;;) {
        struct evbuffer_ptr eol = evbuffer_search(be->from_server, "\n", 1, NULL);
        if (eol.pos < 0) break;
        size_t len = (size_t)eol.pos;
        if (!b) b = calloc(1, sizeof *b);
        if (b && b->n == cap) {
            struct mcp_line *more = realloc(b->lines, (cap ? cap * 2 : 8) * sizeof *more);
            if (more) b->lines = more, cap = cap ? cap * 2 : 8;
        }
        char *text = b && b->n < cap && len <= MCP_MAX_MESSAGE ? malloc(len + 1) : NULL;
        if (text) {
            evbuffer_remove(be->from_server, text, len);
            text[len] = '\0';
            b->lines[b->n++] = (struct mcp_line){.text = text, .len = len};
            b->bytes += len;
        }
        evbuffer_drain(be->from_server, text ? 1 : len + 1);
    }
    if (b && b->n == 0) {
        mcp_batch_free(b);
        return NULL;
    }
    return b;
}

/* Routes a batch's lines in order (parsing them first when the parser did not). */
static void handle_batch(struct mcp_backend *be, struct mcp_batch *b)
{
    if (!b->parsed) mcp_batch_parse(b);
    for (size_t i = 0; i < b->n && be->state != BE_DEAD; i++) {
        json_t *msg = b->lines[i].msg;
        b->lines[i].msg = NULL;
        handle_line(be, b->lines[i].text, b->lines[i].len, msg);
    }
    mcp_batch_free(b);
}

static void finish_exit(struct mcp_backend *be);

/* Reading goes on once the batch at the parser is back and the output rate allows. */
static void read_again(struct mcp_backend *be)
{
    if (be->out_ev && !be->parsing && !evtimer_pending(be->out_rest, NULL))
        event_add(be->out_ev, NULL);
}

static void handle_lines(struct mcp_backend *be, bool now);

static void on_batch_parsed(struct mcp_batch *b)
{
    struct mcp_backend *be = b->be;
    if (!be) return mcp_batch_free(b); /* it was freed meanwhile */
    be->parsing = NULL;
    if (be->state == BE_DEAD) return mcp_batch_free(b);
    handle_batch(be, b);
    if (be->state == BE_DEAD) return;
    if (be->exit_due) return finish_exit(be);
    read_again(be);
    handle_lines(be, false);
}

/* Handles what the process wrote, in order: a batch of more than MCP_PARSE_INLINE
 * bytes goes to the parser thread (parse.c), and the process's output is not read
 * again before it is back; now: parse here whatever the size (its last words). */
static void handle_lines(struct mcp_backend *be, bool now)
{
    if (be->parsing) return; /* what it wrote after that batch waits for it */
    struct mcp_batch *b = take_lines(be);
    if (b && !now && b->bytes > MCP_PARSE_INLINE) {
        b->be = be;
        b->done = on_batch_parsed;
        if (mcp_parser_submit(server_base(be->server->box->srv), b) == 0) {
            be->parsing = b;
            if (be->out_ev) event_del(be->out_ev);
            return;
        }
    }
    if (b) handle_batch(be, b);
    if (be->state != BE_DEAD && evbuffer_get_length(be->from_server) > MCP_MAX_MESSAGE)
        fail(be, "it wrote a message longer than %u bytes, the limit", MCP_MAX_MESSAGE);
}

/* Charges n bytes read to the process's output rate; the milliseconds to wait
 * before the next read (0: none). */
static uint64_t output_wait(struct mcp_backend *be, size_t n)
{
    uint64_t now = now_ms();
    be->out_tokens += (double)(now - be->out_ms) * MCP_OUTPUT_RATE / 1000.0;
    if (be->out_tokens > MCP_OUTPUT_BURST) be->out_tokens = MCP_OUTPUT_BURST;
    be->out_ms = now;
    be->out_tokens -= (double)n;
    return be->out_tokens >= 0 ? 0 : (uint64_t)(-be->out_tokens * 1000.0 / MCP_OUTPUT_RATE) + 1;
}

static void on_rested(evutil_socket_t fd, short what, void *arg)
{
    read_again(arg);
}

/* One read a wake-up (epoll is level-triggered: more data wakes us again): no FIONREAD
 * and no read that only says EAGAIN, on the path of every answer. */
static void on_readable(evutil_socket_t fd, short what, void *arg)
{
    struct mcp_backend *be = arg;
    ssize_t n = read_some(be, fd);
    uint64_t wait = n > 0 ? output_wait(be, (size_t)n) : 0;
    if (wait) {
        event_del(be->out_ev);
        struct timeval tv = {(time_t)(wait / 1000), (suseconds_t)(wait % 1000) * 1000};
        evtimer_add(be->out_rest, &tv);
    }
    handle_lines(be, false);
}

static void on_stderr(evutil_socket_t fd, short what, void *arg)
{
    struct mcp_backend *be = arg;
    char chunk[4096];
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n <= 0) {
        if (n == 0 || errno != EAGAIN) event_del(be->err_ev);
        return;
    }
    mcp_log_write(be->server, chunk, (size_t)n);
    size_t cap = sizeof be->errtail - 1, add = (size_t)n > cap ? cap : (size_t)n;
    if (be->errtail_len + add > cap) {
        size_t drop = be->errtail_len + add - cap;
        memmove(be->errtail, be->errtail + drop, be->errtail_len - drop);
        be->errtail_len -= drop;
    }
    memcpy(be->errtail + be->errtail_len, chunk + n - add, add);
    be->errtail_len += add;
    be->errtail[be->errtail_len] = '\0';
}

/* The last lines of stderr on one line, for an error message. */
static const char *stderr_tail(struct mcp_backend *be, char *out, size_t size)
{
    const char *s = be->errtail;
    size_t n = be->errtail_len;
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == ' '))
        n--;
    size_t from = n > size - 1 ? n - (size - 1) : 0;
    snprintf(out, size, "%.*s", (int)(n - from), s + from);
    for (char *p = out; *p; p++)
        if (*p == '\n' || *p == '\r' || *p == '\t') *p = ' ';
    return out;
}

/* ---- start: initialize, list, gate ---- */

static void ready(struct mcp_backend *be, int r, const char *error)
{
    if (be->deadline) evtimer_del(be->deadline);
    be->on_ready(be, r, error);
}

static void fail(struct mcp_backend *be, const char *fmt, ...)
{
    char why[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    bool starting = be->state != BE_READY;
    be->state = BE_DEAD;
    close_fd(&be->in_fd, &be->in_ev);
    if (starting)
        ready(be, -EIO, why);
    else
        mcp_clients()->process_lost(be, why);
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
    struct mcp_backend *be = arg;
    if (be->state != BE_READY)
        fail(be, "it did not answer initialize and tools/list within %d s",
             MCP_START_TIMEOUT_MS / 1000);
}

static void on_exit_status(evutil_socket_t fd, short what, void *arg)
{
    struct mcp_backend *be = arg;
    struct proto_exec_status st = {.exit_code = -1, .start_errno = EIO};
    ssize_t n = read(fd, &st, sizeof st);
    if (n < 0 && errno == EAGAIN) return;
    close_fd(&be->status_fd, &be->status_ev);
    be->exit_status = st;
    be->exit_status_len = n;
    if (be->parsing)
        be->exit_due = true; /* what it wrote before it ended comes first */
    else
        finish_exit(be);
}

static void finish_exit(struct mcp_backend *be)
{
    while (be->state != BE_DEAD && read_some(be, be->out_fd) > 0) /* its last words */
        handle_lines(be, true);
    if (be->state == BE_DEAD) return;
    for (int i = 0; i < 4 && be->err_fd >= 0; i++)
        on_stderr(be->err_fd, EV_READ, be);
    char tail[600];
    stderr_tail(be, tail, sizeof tail);
    struct proto_exec_status st = be->exit_status;
    be->exit_code = st.exit_code;
    mcp_log_printf(be->server, "[runtime: the server's process exited with status %d]\n",
                   st.exit_code);
    if (be->exit_status_len == (ssize_t)sizeof st && st.exit_code == -1)
        fail(be, "cannot start it: %s; check the command", strerror(st.start_errno));
    else
        fail(be, "it exited with status %d%s%s", st.exit_code, tail[0] ? ": " : "", tail);
}

static const char *error_text(json_t *msg)
{
    const char *m = json_string_value(json_object_get(json_object_get(msg, "error"), "message"));
    return m ? m : "(no message)";
}

static void listed(struct mcp_backend *be)
{
    struct mcp_toolset fresh = {0};
    err_t err = {0};
    int r = mcp_toolset_from_pages(be->pages, be->page_len, be->n_pages, &fresh, &err);
    for (size_t i = 0; i < be->n_pages; i++)
        free(be->pages[i]);
    be->n_pages = 0;
    if (r < 0) {
        if (be->relisting) return; /* keep serving the approved list */
        return fail(be, "its tools/list answer has no fingerprint: %s", err.msg);
    }
    if (be->relisting) {
        be->relisting = false;
        mcp_gate_relist(be->server, &fresh);
        mcp_toolset_clear(&fresh);
        return;
    }
    r = mcp_gate_check(be->server, &fresh, &err);
    mcp_toolset_clear(&fresh);
    be->state = r == 0 ? BE_READY : BE_DEAD;
    if (r == 0 && be->modern) mcp_stdio_listen(be);
    ready(be, r, r == 0 ? NULL : err.msg);
}

static void request_page(struct mcp_backend *be, json_t *cursor)
{
    json_t *params = json_object();
    if (cursor) json_object_set(params, "cursor", cursor);
    json_t *msg =
        json_pack("{s:s,s:s,s:o}", "jsonrpc", "2.0", "method", "tools/list", "params", params);
    struct mcp_pending *p;
    if (mcp_backend_request(be, msg, &p) < 0) {
        json_decref(msg);
        return fail(be, "too many requests are pending");
    }
    p->internal = on_page;
    mcp_backend_send(be, msg);
}

static void on_page(struct mcp_backend *be, json_t *msg, const char *line, size_t len)
{
    if (json_object_get(msg, "error")) {
        if (be->relisting) {
            be->relisting = false;
            return;
        }
        return fail(be, "tools/list failed: %s", error_text(msg));
    }
    if (be->n_pages == MAX_PAGES)
        return fail(be, "its tools/list has more than %d pages", MAX_PAGES);
    char **pages = realloc(be->pages, (be->n_pages + 1) * sizeof *pages);
    if (pages) be->pages = pages;
    size_t *lens = realloc(be->page_len, (be->n_pages + 1) * sizeof *lens);
    if (lens) be->page_len = lens;
    char *copy = pages && lens ? strndup(line, len) : NULL;
    if (!copy) return fail(be, "out of memory");
    be->pages[be->n_pages] = copy;
    be->page_len[be->n_pages++] = len;
    json_t *cursor = json_object_get(json_object_get(msg, "result"), "nextCursor");
    if (json_is_string(cursor))
        request_page(be, cursor);
    else
        listed(be);
}

static void list_tools(struct mcp_backend *be);

static void on_initialized(struct mcp_backend *be, json_t *msg, const char *line, size_t len)
{
    json_t *result = json_object_get(msg, "result");
    if (!be->modern && mcp_stdio_refused_2025(be, msg, on_initialized)) return;
    if (!json_is_object(result)) return fail(be, "initialize failed: %s", error_text(msg));
    be->init_result = json_incref(result);
    if (!be->modern)
        mcp_backend_send(
            be, json_pack("{s:s,s:s}", "jsonrpc", "2.0", "method", "notifications/initialized"));
    list_tools(be);
}

/* The gate looks at the tools it lists now, whichever way it started. */
static void list_tools(struct mcp_backend *be)
{
    be->state = BE_LISTING;
    if (json_object_get(json_object_get(be->init_result, "capabilities"), "tools")) {
        request_page(be, NULL);
    } else {
        char *empty = strdup("[]");
        be->pages = malloc(sizeof *be->pages);
        be->page_len = malloc(sizeof *be->page_len);
        be->pages[0] = empty;
        be->page_len[0] = 2;
        be->n_pages = 1;
        listed(be);
    }
}

static void send_initialize(struct mcp_backend *be)
{
    json_t *msg = json_pack("{s:s,s:s,s:{s:s,s:{s:{},s:{},s:{s:b}},s:{s:s,s:s}}}", "jsonrpc", "2.0",
                            "method", "initialize", "params", "protocolVersion", MCP_VERSION_LATEST,
                            "capabilities", "sampling", "elicitation", "roots", "listChanged", 0,
                            "clientInfo", "name", "runtime", "version", "0.1");
    struct mcp_pending *p;
    mcp_backend_request(be, msg, &p);
    p->internal = on_initialized;
    mcp_backend_send(be, msg);
}

/* ---- a server's shared process ---- */

static void schedule_restart(struct mcp_server *ms);

/* A first process that did not get ready: refused by the gate (-EPERM) or failed. */
static void not_ready(struct mcp_server *ms, int r, const char *error)
{
    if (r == -EPERM) {
        mcp_event(
            ms, "mcp.refused",
            json_pack("{s:s#,s:s}", "fingerprint", ms->seen, FINGERPRINT_SHORT, "error", error));
        return mcp_server_set_status(ms, MCP_REFUSED, "%s", error);
    }
    mcp_server_set_status(ms, MCP_FAILED, "%s", error);
}

static void shared_ready(struct mcp_backend *be, int r, const char *error)
{
    struct mcp_server *ms = be->server;
    if (r == 0 && mcp_template_save(be, shared_ready)) return; /* ready once it is taken */
    if (r == 0) {
        ms->started_ms = now_ms();
        mcp_clients()->resubscribe(ms); /* after a restart: the updates clients still want */
        return mcp_server_set_status(ms, MCP_READY, NULL);
    }
    ms->shared = NULL;
    mcp_backend_reap(be);
    not_ready(ms, r, error);
}

/* isolation "session": the first process is only a probe for the gate. */
static void probe_ready(struct mcp_backend *be, int r, const char *error)
{
    struct mcp_server *ms = be->server;
    ms->shared = NULL;
    mcp_backend_reap(be);
    if (r == 0) return mcp_server_set_status(ms, MCP_READY, NULL);
    not_ready(ms, r, error);
}

/* A template's process (template.c): initialized in the template's sandbox, it is
 * listed and gated here as any start's. */
int mcp_server_adopt(struct mcp_server *ms, int fds[4], json_t *init_result)
{
    struct mcp_backend *be = backend_new(ms, NULL, shared_ready);
    if (!be) {
        for (int i = 0; i < 4; i++)
            close(fds[i]);
        return -ENOMEM;
    }
    ms->shared = be;
    watch(be, fds);
    be->init_result = json_incref(init_result);
    struct timeval tv = {MCP_START_TIMEOUT_MS / 1000, 0};
    evtimer_add(be->deadline, &tv);
    list_tools(be);
    return 0;
}

void mcp_server_start(struct mcp_server *ms)
{
    err_t err = {0};
    mcp_server_set_status(ms, MCP_STARTING, NULL);
    mcp_event(ms, "mcp.starting", json_pack("{s:i}", "restarts", ms->restarts));
    mcp_apply_policy(ms->box);
    if (mcp_backend_spawn(ms, NULL, ms->per_session ? probe_ready : shared_ready, &ms->shared,
                          &err) < 0)
        mcp_server_set_status(ms, MCP_FAILED, "cannot start it: %s", err.msg);
}

static void on_restart(evutil_socket_t fd, short what, void *arg)
{
    mcp_server_start(arg);
}

static void schedule_restart(struct mcp_server *ms)
{
    if (now_ms() - ms->started_ms > RESTART_MAX_MS) ms->restarts = 0;
    uint64_t delay = 500ull << (ms->restarts < 7 ? ms->restarts : 7);
    if (delay > RESTART_MAX_MS) delay = RESTART_MAX_MS;
    ms->restarts++;
    if (!ms->restart_timer)
        ms->restart_timer = evtimer_new(server_base(ms->box->srv), on_restart, ms);
    struct timeval tv = {(time_t)(delay / 1000), (suseconds_t)(delay % 1000) * 1000};
    evtimer_add(ms->restart_timer, &tv);
}

/* The shared process of a ready server ended: its clients' requests fail, the sessions
 * stay, and it comes back after a pause that grows while it keeps failing. */
void mcp_server_process_lost(struct mcp_backend *be, const char *why)
{
    struct mcp_server *ms = be->server;
    mcp_event(ms, "mcp.exited", json_pack("{s:i,s:s}", "exitCode", be->exit_code, "error", why));
    ms->shared = NULL;
    mcp_backend_reap(be);
    mcp_server_set_status(ms, MCP_STARTING, "restarting: %s", why);
    schedule_restart(ms);
}

void mcp_server_halt(struct mcp_server *ms)
{
    mcp_install_cancel(ms);
    mcp_template_cancel(ms);
    if (ms->restart_timer) {
        event_free(ms->restart_timer);
        ms->restart_timer = NULL;
    }
    mcp_clients()->server_halted(ms);
    if (ms->shared) mcp_backend_free(ms->shared);
    ms->shared = NULL;
}
