/* The accounts: in memory, and in the store's accounts table. */
#include "accounts.h"

#include <ctype.h>
#include <errno.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "../store/store.h"

struct accounts {
    struct store_writer *writer;
    struct account *list; /* newest first */
    size_t count;
    struct account_connection *connections; /* newest first */
};

/* What a connection of "default" authenticates as: the admin's account has no row. */
static const struct account default_account = {.name = ACCOUNT_DEFAULT};

static void load_connection(const struct store_connection *row, void *arg);
static void forget_connections_of(struct accounts *a, const char *account);

int account_check_name(const char *name, err_t *err)
{
    size_t n = name ? strlen(name) : 0;
    bool ok = n > 0 && n < ACCOUNT_NAME_MAX && isalnum((unsigned char)name[0]);
    for (size_t i = 0; ok && i < n; i++)
        ok = islower((unsigned char)name[i]) || isdigit((unsigned char)name[i]) ||
             strchr("-_.", name[i]);
    if (ok) return 0;
    return err_set(err, -EINVAL,
                   "an account name is 1-63 of a-z, 0-9, '-', '_', '.', starting with a letter "
                   "or digit");
}

static void hash_key(const char *key, char out[ACCOUNT_HASH_LEN + 1])
{
    unsigned char md[32];
    unsigned int len = 0;
    EVP_Digest(key, strlen(key), md, &len, EVP_sha256(), NULL);
    hex_encode(out, md, sizeof md);
}

/* A fresh key and its hash. */
static void make_key(char key[ACCOUNT_KEY_LEN + 1], char hash[ACCOUNT_HASH_LEN + 1])
{
    memcpy(key, ACCOUNT_KEY_PREFIX, sizeof ACCOUNT_KEY_PREFIX - 1);
    random_hex(key + sizeof ACCOUNT_KEY_PREFIX - 1, 32);
    hash_key(key, hash);
}

static void load_row(const struct store_account *row, void *arg)
{
    struct accounts *a = arg;
    struct account *acct = calloc(1, sizeof *acct);
    if (!acct || str_copy(acct->name, sizeof acct->name, row->name) < 0) {
        free(acct);
        return;
    }
    str_copy(acct->key_hash[0], sizeof acct->key_hash[0], row->key_hash ? row->key_hash : "");
    str_copy(acct->key_hash[1], sizeof acct->key_hash[1], row->key2_hash ? row->key2_hash : "");
    acct->max_sandboxes = (uint32_t)row->max_sandboxes;
    acct->max_memory_mib = (uint64_t)row->max_memory_mib;
    acct->created_ms = row->created_ms;
    acct->removing = row->removing;
    acct->next = a->list;
    a->list = acct;
    a->count++;
}

int accounts_open(struct store *store, struct store_writer *writer, struct accounts **out,
                  err_t *err)
{
    struct accounts *a = calloc(1, sizeof *a);
    if (!a) return err_set(err, -ENOMEM, "out of memory");
    a->writer = writer;
    int r = store_accounts_each(store, load_row, a, err);
    if (r == 0) r = store_connections_each(store, load_connection, a, err);
    if (r < 0) {
        accounts_close(a);
        return r;
    }
    *out = a;
    return 0;
}

void accounts_close(struct accounts *a)
{
    if (!a) return;
    while (a->list) {
        struct account *acct = a->list;
        a->list = acct->next;
        explicit_bzero(acct->key_hash, sizeof acct->key_hash);
        free(acct);
    }
    forget_connections_of(a, NULL);
    free(a);
}

static const struct account *connection_account(const struct accounts *a, const char *key)
{
    const struct account_connection *c = accounts_connection_by_key(a, key);
    if (!c) return NULL;
    if (strcmp(c->account, ACCOUNT_DEFAULT) == 0) return &default_account;
    const struct account *acct = accounts_find(a, c->account);
    return acct && !acct->removing ? acct : NULL;
}

const struct account *accounts_authenticate(const struct accounts *a, const char *key)
{
    if (key && strncmp(key, CONNECTION_KEY_PREFIX, sizeof CONNECTION_KEY_PREFIX - 1) == 0)
        return connection_account(a, key);
    if (!key || strncmp(key, ACCOUNT_KEY_PREFIX, sizeof ACCOUNT_KEY_PREFIX - 1) != 0) return NULL;
    char hash[ACCOUNT_HASH_LEN + 1];
    hash_key(key, hash);
    const struct account *found = NULL;
    /* No early exit: the time does not tell which account, or how close. */
    for (const struct account *acct = a->list; acct; acct = acct->next)
        for (int i = 0; i < 2; i++)
            if (acct->key_hash[i][0] && str_equal_ct(acct->key_hash[i], hash) && !acct->removing)
                found = acct;
    return found;
}

const struct account *accounts_find(const struct accounts *a, const char *name)
{
    for (const struct account *acct = a->list; acct; acct = acct->next)
        if (strcmp(acct->name, name) == 0) return acct;
    return NULL;
}

const struct account *accounts_first(const struct accounts *a)
{
    return a->list;
}

/* A change on its way to the disk: how to undo it in memory if it fails. */
enum account_change { CHANGE_CREATE, CHANGE_KEY, CHANGE_MARK, CHANGE_DELETE };
struct account_write {
    struct accounts *a;
    enum account_change what;
    char name[ACCOUNT_NAME_MAX];
    char key[ACCOUNT_KEY_LEN + 1];          /* CHANGE_CREATE, CHANGE_KEY: shown once written */
    char old_hash[2][ACCOUNT_HASH_LEN + 1]; /* CHANGE_KEY: the keys before */
    bool was_removing;                      /* CHANGE_MARK */
    accounts_saved_fn *done;
    void *arg;
};

static struct account *find_mutable(struct accounts *a, const char *name, err_t *err);

static void unlink_account(struct accounts *a, struct account *acct)
{
    for (struct account **pp = &a->list; *pp; pp = &(*pp)->next) {
        if (*pp != acct) continue;
        *pp = acct->next;
        a->count--;
        explicit_bzero(acct->key_hash, sizeof acct->key_hash);
        free(acct);
        return;
    }
}

/* The write failed: memory goes back to what the disk holds. */
static void undo(struct account_write *w, struct account *acct)
{
    switch (w->what) {
    case CHANGE_CREATE:
        unlink_account(w->a, acct);
        break;
    case CHANGE_KEY: /* unless a later key replaced it meanwhile */
        if (strcmp(acct->key_hash[1], w->old_hash[0]) == 0)
            memcpy(acct->key_hash, w->old_hash, sizeof acct->key_hash);
        break;
    case CHANGE_MARK:
        acct->removing = w->was_removing;
        acct->busy = false;
        break;
    case CHANGE_DELETE:
        acct->busy = false; /* still marked: a retry, or the restart, finishes it */
        break;
    }
}

static void on_written(int r, const err_t *err, void *arg)
{
    struct account_write *w = arg;
    struct account *acct = r == -ECANCELED ? NULL : find_mutable(w->a, w->name, NULL);
    if (r < 0 && acct) undo(w, acct);
    if (r == 0 && acct && w->what == CHANGE_DELETE) {
        forget_connections_of(w->a, acct->name);
        unlink_account(w->a, acct);
    }
    w->done(r < 0 ? err : NULL, r == 0 && w->key[0] ? w->key : NULL, w->arg);
    explicit_bzero(w->key, sizeof w->key);
    free(w);
}

static struct account_write *write_new(struct accounts *a, enum account_change what,
                                       const char *name, accounts_saved_fn *done, void *arg,
                                       err_t *err)
{
    struct account_write *w = calloc(1, sizeof *w);
    if (!w) {
        err_set(err, -ENOMEM, "out of memory");
        return NULL;
    }
    *w = (struct account_write){.a = a, .what = what, .done = done, .arg = arg};
    str_copy(w->name, sizeof w->name, name);
    return w;
}

static void save(struct accounts *a, const struct account *acct, struct account_write *w)
{
    struct store_account row = {.name = acct->name,
                                .key_hash = acct->key_hash[0],
                                .key2_hash = acct->key_hash[1],
                                .max_sandboxes = acct->max_sandboxes,
                                .max_memory_mib = (int64_t)acct->max_memory_mib,
                                .created_ms = acct->created_ms,
                                .removing = acct->removing};
    store_writer_account_put(a->writer, &row, on_written, w);
}

/* An optional whole-number limit: 0 (none) when absent. */
static int limit_field(json_t *body, const char *field, long long max, long long *out, err_t *err)
{
    json_t *v = json_object_get(body, field);
    *out = 0;
    if (!v || json_is_null(v)) return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > max)
        return err_set(err, -EINVAL, "%s must be a whole number from 1 to %lld", field, max);
    *out = json_integer_value(v);
    return 0;
}

static int parse_body(json_t *body, struct account *acct, err_t *err)
{
    static const char *const known[] = {"name", "maxSandboxes", "maxMemoryMiB", NULL};
    if (!json_is_object(body))
        return err_set(err, -EINVAL, "the body must be {name, maxSandboxes?, maxMemoryMiB?}");
    if (json_known_fields(body, NULL, known, err) < 0) return -EINVAL;
    const char *name = json_string_value(json_object_get(body, "name"));
    long long sandboxes = 0, memory = 0;
    int r = account_check_name(name, err);
    if (r == 0) r = limit_field(body, "maxSandboxes", 1 << 20, &sandboxes, err);
    if (r == 0) r = limit_field(body, "maxMemoryMiB", 1LL << 40, &memory, err);
    if (r < 0) return r;
    str_copy(acct->name, sizeof acct->name, name);
    acct->max_sandboxes = (uint32_t)sandboxes;
    acct->max_memory_mib = (uint64_t)memory;
    return 0;
}

int accounts_create(struct accounts *a, json_t *body, accounts_saved_fn *done, void *arg,
                    err_t *err)
{
    struct account *acct = calloc(1, sizeof *acct);
    if (!acct) return err_set(err, -ENOMEM, "out of memory");
    int r = parse_body(body, acct, err);
    if (r == 0 && (accounts_find(a, acct->name) || strcmp(acct->name, ACCOUNT_DEFAULT) == 0))
        r = err_set(err, -EEXIST, "an account named %s exists; pick another name", acct->name);
    if (r == 0 && a->count >= ACCOUNTS_MAX)
        r = err_set(err, -EAGAIN, "there are %d accounts, the limit; remove some first",
                    ACCOUNTS_MAX);
    struct account_write *w =
        r == 0 ? write_new(a, CHANGE_CREATE, acct->name, done, arg, err) : NULL;
    if (!w) {
        free(acct);
        return r < 0 ? r : -ENOMEM;
    }
    acct->created_ms = now_unix_ms();
    make_key(w->key, acct->key_hash[0]);
    acct->next = a->list; /* the name is taken from now on */
    a->list = acct;
    a->count++;
    save(a, acct, w);
    return 0;
}

static struct account *find_mutable(struct accounts *a, const char *name, err_t *err)
{
    for (struct account *acct = a->list; acct; acct = acct->next)
        if (strcmp(acct->name, name) == 0) return acct;
    err_set(err, -ENOENT, "no account %s; `runtime account list` shows them", name);
    return NULL;
}

int accounts_new_key(struct accounts *a, const char *name, accounts_saved_fn *done, void *arg,
                     err_t *err)
{
    struct account *acct = find_mutable(a, name, err);
    if (!acct) return -ENOENT;
    struct account_write *w = write_new(a, CHANGE_KEY, name, done, arg, err);
    if (!w) return -ENOMEM;
    memcpy(w->old_hash, acct->key_hash, sizeof w->old_hash);
    memcpy(acct->key_hash[1], acct->key_hash[0], sizeof acct->key_hash[1]);
    make_key(w->key, acct->key_hash[0]);
    save(a, acct, w);
    return 0;
}

int accounts_mark_removing(struct accounts *a, const char *name, accounts_saved_fn *done, void *arg,
                           err_t *err)
{
    struct account *acct = find_mutable(a, name, err);
    if (!acct) return -ENOENT;
    if (acct->busy)
        return err_set(err, -EBUSY, "account %s is being removed; try again in a moment", name);
    struct account_write *w = write_new(a, CHANGE_MARK, name, done, arg, err);
    if (!w) return -ENOMEM;
    w->was_removing = acct->removing;
    acct->removing = acct->busy = true;
    save(a, acct, w);
    return 0;
}

void accounts_removal_stopped(struct accounts *a, const char *name)
{
    struct account *acct = find_mutable(a, name, NULL);
    if (acct) acct->busy = false;
}

int accounts_delete(struct accounts *a, const char *name, accounts_saved_fn *done, void *arg,
                    err_t *err)
{
    if (!find_mutable(a, name, err)) return -ENOENT;
    struct account_write *w = write_new(a, CHANGE_DELETE, name, done, arg, err);
    if (!w) return -ENOMEM;
    store_writer_account_delete(a->writer, name, on_written, w);
    return 0;
}

json_t *account_json(const struct account *acct)
{
    char created[40];
    time_rfc3339(created, sizeof created, acct->created_ms);
    json_t *v = json_pack("{s:s,s:s,s:b}", "name", acct->name, "createdAt", created, "removing",
                          acct->removing);
    json_object_set_new(v, "maxSandboxes",
                        acct->max_sandboxes ? json_integer(acct->max_sandboxes) : json_null());
    json_object_set_new(v, "maxMemoryMiB",
                        acct->max_memory_mib ? json_integer((json_int_t)acct->max_memory_mib)
                                             : json_null());
    return v;
}

/* ---- connections ---- */

static void load_connection(const struct store_connection *row, void *arg)
{
    struct accounts *a = arg;
    struct account_connection *c = calloc(1, sizeof *c);
    if (!c || str_copy(c->id, sizeof c->id, row->id) < 0 ||
        str_copy(c->account, sizeof c->account, row->account) < 0 ||
        str_copy(c->key_hash, sizeof c->key_hash, row->key_hash) < 0) {
        free(c);
        return;
    }
    str_copy(c->agent_name, sizeof c->agent_name, row->agent_name);
    str_copy(c->machine, sizeof c->machine, row->machine);
    c->created_ms = row->created_ms;
    c->next = a->connections; /* read oldest first: the list ends newest first */
    a->connections = c;
}

/* Out of memory: the account's connections (NULL: every one). */
static void forget_connections_of(struct accounts *a, const char *account)
{
    for (struct account_connection **pp = &a->connections; *pp;) {
        struct account_connection *c = *pp;
        if (account && strcmp(c->account, account) != 0) {
            pp = &c->next;
            continue;
        }
        *pp = c->next;
        explicit_bzero(c->key_hash, sizeof c->key_hash);
        free(c);
    }
}

const struct account_connection *accounts_connection_by_key(const struct accounts *a,
                                                            const char *key)
{
    if (!key || strncmp(key, CONNECTION_KEY_PREFIX, sizeof CONNECTION_KEY_PREFIX - 1) != 0)
        return NULL;
    char hash[ACCOUNT_HASH_LEN + 1];
    hash_key(key, hash);
    struct account_connection *found = NULL;
    for (struct account_connection *c = a->connections; c; c = c->next)
        if (str_equal_ct(c->key_hash, hash)) found = c; /* no early exit, as for accounts */
    if (found) found->last_used_ms = now_unix_ms();     /* memory only: no write per call */
    return found;
}

const struct account_connection *accounts_connection_find(const struct accounts *a,
                                                          const char *account, const char *id)
{
    for (const struct account_connection *c = a->connections; c; c = c->next)
        if (strcmp(c->account, account) == 0 && strcmp(c->id, id) == 0) return c;
    return NULL;
}

const struct account_connection *accounts_connections_first(const struct accounts *a)
{
    return a->connections;
}

static size_t connections_of(const struct accounts *a, const char *account)
{
    size_t n = 0;
    for (const struct account_connection *c = a->connections; c; c = c->next)
        n += strcmp(c->account, account) == 0;
    return n;
}

/* A connection's write on its way: what to tell, and what to undo if it fails. */
struct connection_write {
    struct accounts *a;
    bool added; /* else removed: c was taken out of the list, freed once written */
    struct account_connection *c;
    accounts_saved_fn *done;
    void *arg;
};

static void unlink_connection(struct accounts *a, struct account_connection *c)
{
    for (struct account_connection **pp = &a->connections; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            return;
        }
}

static void connection_written(int r, const err_t *err, void *arg)
{
    struct connection_write *w = arg;
    bool failed = r < 0 && r != -ECANCELED; /* stopping: the list goes with the daemon */
    if (failed && w->added) unlink_connection(w->a, w->c);
    if (failed && !w->added) { /* still on disk: in force again */
        w->c->next = w->a->connections;
        w->a->connections = w->c;
    }
    if (w->added == failed) { /* out of the list for good */
        explicit_bzero(w->c->key_hash, sizeof w->c->key_hash);
        free(w->c);
    }
    w->done(r < 0 ? err : NULL, NULL, w->arg);
    free(w);
}

static int connection_check(struct accounts *a, const char *account, err_t *err)
{
    const struct account *acct = accounts_find(a, account);
    if (!acct && strcmp(account, ACCOUNT_DEFAULT) != 0)
        return err_set(err, -ENOENT, "no account %s", account);
    if (acct && acct->removing) return err_set(err, -EBUSY, "account %s is being removed", account);
    if (connections_of(a, account) >= ACCOUNT_CONNECTIONS_MAX)
        return err_set(err, -EAGAIN,
                       "account %s has %d connections, the limit; revoke some first (DELETE "
                       "/v1/connect/connections/{id})",
                       account, ACCOUNT_CONNECTIONS_MAX);
    return 0;
}

int accounts_connection_add(struct accounts *a, const char *account, const char *id,
                            const char *key, const char *agent_name, const char *machine,
                            accounts_saved_fn *done, void *arg, err_t *err)
{
    int r = connection_check(a, account, err);
    if (r < 0) return r;
    struct account_connection *c = calloc(1, sizeof *c);
    struct connection_write *w = calloc(1, sizeof *w);
    if (!c || !w) {
        free(c);
        free(w);
        return err_set(err, -ENOMEM, "out of memory");
    }
    str_copy(c->id, sizeof c->id, id);
    str_copy(c->account, sizeof c->account, account);
    str_copy(c->agent_name, sizeof c->agent_name, agent_name);
    str_copy(c->machine, sizeof c->machine, machine);
    hash_key(key, c->key_hash);
    c->created_ms = now_unix_ms();
    c->next = a->connections; /* in force at once, as the rest; undone if the write fails */
    a->connections = c;
    *w = (struct connection_write){.a = a, .added = true, .c = c, .done = done, .arg = arg};
    struct store_connection row = {.id = c->id,
                                   .account = c->account,
                                   .key_hash = c->key_hash,
                                   .agent_name = c->agent_name,
                                   .machine = c->machine,
                                   .created_ms = c->created_ms};
    store_writer_connection_put(a->writer, &row, connection_written, w);
    return 0;
}

int accounts_connection_remove(struct accounts *a, const char *account, const char *id,
                               accounts_saved_fn *done, void *arg, err_t *err)
{
    struct account_connection *c =
        (struct account_connection *)accounts_connection_find(a, account, id);
    if (!c) return err_set(err, -ENOENT, "no connection %s of account %s", id, account);
    struct connection_write *w = calloc(1, sizeof *w);
    if (!w) return err_set(err, -ENOMEM, "out of memory");
    unlink_connection(a, c); /* refused from now on, before the disk has it */
    *w = (struct connection_write){.a = a, .added = false, .c = c, .done = done, .arg = arg};
    store_writer_connection_delete(a->writer, c->id, connection_written, w);
    return 0;
}

json_t *account_connection_json(const struct account_connection *c)
{
    char created[40], used[40];
    time_rfc3339(created, sizeof created, c->created_ms);
    if (c->last_used_ms) time_rfc3339(used, sizeof used, c->last_used_ms);
    return json_pack("{s:s,s:s,s:s,s:s,s:o}", "id", c->id, "agentName", c->agent_name, "machine",
                     c->machine, "createdAt", created, "lastUsedAt",
                     c->last_used_ms ? json_string(used) : json_null());
}
