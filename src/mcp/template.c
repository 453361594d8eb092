/* Templates of catalog servers (docs/templates.md): a server's first start in a gvisor
 * sandbox, once initialized, listed and gated, is checkpointed where it runs; a later
 * sandbox whose server would start exactly the same way (mcp_template_key) restores
 * that image instead of installing and booting it, and its tools go through the gate
 * as any start's.
 *
 * The daemon keeps, for each template it saved, the process's initialize answer (what
 * the gateway tells its clients); the keeper keeps the image and the install. The
 * answers live in this process's memory only: after a daemon restart the first start
 * of each server installs and saves its template again. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcp_impl.h"

struct saved_template {
    char key[65];
    json_t *init_result; /* once saved; NULL while being saved, or when it is gone */
    bool saving;
    bool failed; /* its image would not do: not saved nor restored again */
    struct saved_template *next;
};
static struct saved_template *templates;

struct mcp_template_call {
    struct mcp_server *ms; /* NULL once the server no longer wants the answer */
    struct mcp_backend *be;
    void (*then)(struct mcp_backend *be, int r, const char *error);
    struct saved_template *t;
    json_t *init_result; /* saving: the process's, for the template */
    uint64_t start_ms;
};

static struct saved_template *find(const char *key)
{
    for (struct saved_template *t = templates; t; t = t->next)
        if (strcmp(t->key, key) == 0) return t;
    return NULL;
}

static struct saved_template *add(const char *key)
{
    struct saved_template *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    memcpy(t->key, key, sizeof t->key);
    t->next = templates;
    templates = t;
    return t;
}

/* Only a catalog server's one shared process in a gvisor sandbox in which no exec of the
 * API ever ran (what one left running in the background would be in the image, or be
 * ended by a restore), while the daemon's --templates is on. */
static bool eligible(const struct mcp_server *ms)
{
    return ms->entry && !ms->per_session && server_templates(ms->box->srv) &&
           sbx_settings(ms->box->sb)->isolation == MODEL_DRIVER_GVISOR &&
           !sbx_user_programs(ms->box->sb);
}

static struct mcp_template_call *call_new(struct mcp_server *ms, struct saved_template *t)
{
    struct mcp_template_call *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    *c = (struct mcp_template_call){.ms = ms, .t = t, .start_ms = now_ms()};
    ms->template_call = c;
    return c;
}

/* The call's answer came: the server it was for, or NULL when it is gone. */
static struct mcp_server *call_end(struct mcp_template_call *c)
{
    struct mcp_server *ms = c->ms;
    if (ms) ms->template_call = NULL;
    free(c);
    return ms;
}

void mcp_template_cancel(struct mcp_server *ms)
{
    if (ms->template_call) ms->template_call->ms = NULL;
    ms->template_call = NULL;
}

/* ---- saving ---- */

static void on_saved(struct server *srv, int *fds, uint64_t image_bytes, const err_t *err,
                     void *arg)
{
    struct mcp_template_call *c = arg;
    struct mcp_backend *be = c->be;
    struct saved_template *t = c->t;
    void (*then)(struct mcp_backend *, int, const char *) = c->then;
    double seconds = (double)(now_ms() - c->start_ms) / 1000;
    json_t *init_result = c->init_result;
    struct mcp_server *ms = call_end(c);
    t->saving = false;
    /* Something else ran in that sandbox: another first start may save it. */
    if (err && err->code != -EBUSY && err->code != -ESRCH) t->failed = true;
    if (!err) t->init_result = json_incref(init_result);
    json_decref(init_result);
    if (!ms) return;
    if (err && !t->failed) {
        mcp_log(ms, false, "no template of it this time: %s", err->msg);
    } else if (err) {
        mcp_log(ms, true, "no template of it: %s", err->msg);
        mcp_event(ms, "mcp.template_failed", json_pack("{s:s}", "error", err->msg));
    } else {
        mcp_log(ms, false, "saved its template (%.1f MB) in %.2f s", (double)image_bytes / 1e6,
                seconds);
        mcp_event(
            ms, "mcp.template_saved",
            json_pack("{s:I,s:f}", "imageBytes", (json_int_t)image_bytes, "seconds", seconds));
    }
    then(be, 0, NULL);
}

bool mcp_template_save(struct mcp_backend *be,
                       void (*then)(struct mcp_backend *be, int r, const char *error))
{
    struct mcp_server *ms = be->server;
    char key[65];
    err_t err = {0};
    /* Not a restart (a process that ran may have changed its install), not a process
     * that speaks 2026-07-28 (the gateway has asked it for updates already), and only
     * the sandbox's one server (the image would hold the others too). */
    if (!eligible(ms) || ms->restarts || be->modern || ms->template_call) return false;
    if (ms->box->servers != ms || ms->next) return false;
    if (mcp_template_key(ms, key, &err) < 0) return false;
    struct saved_template *t = find(key);
    if (t && (t->init_result || t->saving || t->failed)) return false;
    if (!t && !(t = add(key))) return false;
    struct mcp_template_call *c = call_new(ms, t);
    if (!c) return false;
    t->saving = true;
    c->be = be;
    c->then = then;
    c->init_result = json_incref(be->init_result);
    if (server_template_save(ms->box->srv, ms->box->sb, key, ms->name, on_saved, c, &err) < 0) {
        t->saving = false;
        json_decref(c->init_result);
        call_end(c);
        return false;
    }
    return true;
}

/* ---- restoring ---- */

static void on_restored(struct server *srv, int *fds, uint64_t image_bytes, const err_t *err,
                        void *arg)
{
    struct mcp_template_call *c = arg;
    struct saved_template *t = c->t;
    double seconds = (double)(now_ms() - c->start_ms) / 1000;
    struct mcp_server *ms = call_end(c);
    if (!ms) {
        for (int i = 0; fds && i < 4; i++)
            close(fds[i]);
        return;
    }
    if (!fds) {
        /* -ENOENT: the keeper no longer has it (evicted): the next first start saves
         * it again; -EAGAIN: its image would not restore (the keeper removed it). Other
         * answers are this sandbox's (programs run in it, it has an install). */
        if (err->code == -ENOENT || err->code == -EAGAIN) {
            json_decref(t->init_result);
            t->init_result = NULL;
        }
        if (err->code == -EAGAIN) t->failed = true;
        mcp_log(ms, err->code == -EAGAIN, "not from its template: %s", err->msg);
        if (err->code == -EAGAIN)
            mcp_event(ms, "mcp.template_failed", json_pack("{s:s}", "error", err->msg));
        return mcp_install(ms);
    }
    ms->installed = true;
    mcp_box_save(ms->box);
    mcp_log(ms, false, "restored from its template in %.2f s", seconds);
    mcp_event(ms, "mcp.template_restored", json_pack("{s:f}", "seconds", seconds));
    if (mcp_server_adopt(ms, fds, t->init_result) < 0)
        mcp_server_set_status(ms, MCP_FAILED, "out of memory");
}

bool mcp_template_restore(struct mcp_server *ms)
{
    char key[65];
    err_t err = {0};
    if (!eligible(ms) || ms->template_call || mcp_template_key(ms, key, &err) < 0) return false;
    struct saved_template *t = find(key);
    if (!t || !t->init_result || t->failed) return false;
    struct mcp_template_call *c = call_new(ms, t);
    if (!c) return false;
    mcp_server_set_status(ms, MCP_STARTING, NULL);
    mcp_event(ms, "mcp.starting", json_pack("{s:i,s:b}", "restarts", 0, "template", 1));
    mcp_apply_policy(ms->box);
    if (server_template_restore(ms->box->srv, ms->box->sb, key, ms->name, on_restored, c, &err) <
        0) {
        call_end(c);
        return false;
    }
    return true;
}
