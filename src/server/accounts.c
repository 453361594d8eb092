/* An account's sandboxes as a whole: what they hold (for its limits) and the
 * account's removal, which must finish even when the daemon stops half-way. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../secrets/secrets.h"
#include "server_impl.h"

struct accounts *server_accounts(struct server *srv)
{
    return srv->accounts;
}

void server_account_load(struct server *srv, const char *account, size_t *sandboxes,
                         uint64_t *memory_mib)
{
    *sandboxes = 0;
    *memory_mib = 0;
    for (struct sbx *sb = srv->sandboxes; sb; sb = sb->next) {
        if (strcmp(sb->account, account) != 0) continue;
        (*sandboxes)++;
        *memory_mib += sb->settings.memory_mib;
    }
}

struct account_removal {
    struct server *srv;
    char name[ACCOUNT_NAME_MAX];
    int pending; /* sandboxes still being removed */
    bool failed;
    err_t err; /* the first failure */
    server_account_removed_fn *done;
    void *arg;
};

/* The end of a removal: its caller is told. */
static void ended(struct account_removal *rm, const err_t *err)
{
    if (err) log_warn("account %s not removed yet: %s", rm->name, err->msg);
    if (!err) log_info("account %s removed", rm->name);
    if (rm->done) rm->done(rm->srv, err, rm->arg);
    free(rm);
}

/* Its secrets, usage and row are on disk no more: out of memory too. */
static void on_deleted(const err_t *err, const char *key, void *arg)
{
    struct account_removal *rm = arg;
    if (err && err->code == -ECANCELED) { /* stopping: a restart finishes it */
        free(rm);
        return;
    }
    if (!err) vault_forget_account(rm->srv->vault, rm->name);
    ended(rm, err);
}

/* Its sandboxes are gone: its secrets, usage and row next (the writer). */
static void finish(struct server *srv, struct account_removal *rm)
{
    err_t err = rm->err;
    if (rm->failed) accounts_removal_stopped(srv->accounts, rm->name);
    if (rm->failed || accounts_delete(srv->accounts, rm->name, on_deleted, rm, &err) < 0)
        ended(rm, &err);
}

static void note_failure(struct account_removal *rm, const err_t *err)
{
    if (rm->failed) return;
    rm->failed = true;
    rm->err = *err;
    err_wrap(&rm->err, "one of its sandboxes could not be removed; remove the account again");
}

static void sandbox_removed(struct server *srv, const err_t *err, void *arg)
{
    struct account_removal *rm = arg;
    if (err) note_failure(rm, err);
    if (--rm->pending == 0) finish(srv, rm);
}

static int check_idle(struct server *srv, const char *name, err_t *err)
{
    /* What a removal of the sandbox would refuse (one pausing or waking is removed after). */
    for (struct sbx *sb = srv->sandboxes; sb; sb = sb->next)
        if (strcmp(sb->account, name) == 0 && !server_sandbox_changing(sb) &&
            lifecycle_next(sb->state, SBX_REMOVE) < 0)
            return err_set(err, -EBUSY, "sandbox %s of account %s is %s; try again in a moment",
                           sb->id, name, sbx_state_said(sb->state));
    return 0;
}

/* Marked as being removed, on disk (a restart finishes the removal): its
 * sandboxes go next, as rm removes them. */
static void on_marked(const err_t *err, const char *key, void *arg)
{
    struct account_removal *rm = arg;
    struct server *srv = rm->srv;
    if (err && err->code == -ECANCELED) {
        free(rm);
        return;
    }
    if (err) return ended(rm, err);
    rm->pending = 1; /* this call's own, so that no removal finishes before all are asked */
    for (struct sbx *sb = srv->sandboxes, *next; sb; sb = next) {
        next = sb->next;
        if (strcmp(sb->account, rm->name) != 0) continue;
        err_t one = {0};
        if (server_sandbox_delete(srv, sb, sandbox_removed, rm, &one) == 0)
            rm->pending++;
        else
            note_failure(rm, &one);
    }
    sandbox_removed(srv, NULL, rm);
}

int server_account_remove(struct server *srv, const char *name, server_account_removed_fn *done,
                          void *arg, err_t *err)
{
    if (strcmp(name, ACCOUNT_DEFAULT) == 0)
        return err_set(err, -EPERM, "the account default is the admin's own; it cannot be removed");
    if (!accounts_find(srv->accounts, name))
        return err_set(err, -ENOENT, "no account %s; `runtime account list` shows them", name);
    int r = check_idle(srv, name, err);
    struct account_removal *rm = r == 0 ? calloc(1, sizeof *rm) : NULL;
    if (r == 0 && !rm) r = err_set(err, -ENOMEM, "out of memory");
    if (r < 0) return r;
    *rm = (struct account_removal){.srv = srv, .done = done, .arg = arg};
    str_copy(rm->name, sizeof rm->name, name);
    r = accounts_mark_removing(srv->accounts, name, on_marked, rm, err);
    if (r < 0) free(rm);
    return r;
}

void server_accounts_resume(struct server *srv)
{
    for (const struct account *a = accounts_first(srv->accounts), *next; a; a = next) {
        next = a->next;
        if (!a->removing) continue;
        err_t err = {0};
        log_info("account %s: finishing its removal", a->name);
        if (server_account_remove(srv, a->name, NULL, NULL, &err) < 0)
            log_warn("account %s not removed: %s", a->name, err.msg);
    }
}
