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
};

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
    free(a);
}

const struct account *accounts_authenticate(const struct accounts *a, const char *key)
{
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
    if (r == 0 && acct && w->what == CHANGE_DELETE) unlink_account(w->a, acct);
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
