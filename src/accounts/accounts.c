/* The accounts: in memory, and in the store's accounts table. */
#include "accounts.h"

#include <ctype.h>
#include <errno.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "../store/store.h"

struct accounts {
    struct store *store;
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

int accounts_open(struct store *store, struct accounts **out, err_t *err)
{
    struct accounts *a = calloc(1, sizeof *a);
    if (!a) return err_set(err, -ENOMEM, "out of memory");
    a->store = store;
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

static int save(struct accounts *a, const struct account *acct, err_t *err)
{
    struct store_account row = {.name = acct->name,
                                .key_hash = acct->key_hash[0],
                                .key2_hash = acct->key_hash[1],
                                .max_sandboxes = acct->max_sandboxes,
                                .max_memory_mib = (int64_t)acct->max_memory_mib,
                                .created_ms = acct->created_ms,
                                .removing = acct->removing};
    return store_account_put(a->store, &row, err);
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
    if (!json_is_object(body))
        return err_set(err, -EINVAL, "the body must be {name, maxSandboxes?, maxMemoryMiB?}");
    const char *k;
    json_t *v;
    json_object_foreach(body, k, v)
    {
        if (strcmp(k, "name") != 0 && strcmp(k, "maxSandboxes") != 0 &&
            strcmp(k, "maxMemoryMiB") != 0)
            return err_set(err, -EINVAL,
                           "unknown field \"%.64s\"; an account is {name, maxSandboxes?, "
                           "maxMemoryMiB?}",
                           k);
    }
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

int accounts_create(struct accounts *a, json_t *body, char key[ACCOUNT_KEY_LEN + 1],
                    const struct account **out, err_t *err)
{
    struct account *acct = calloc(1, sizeof *acct);
    if (!acct) return err_set(err, -ENOMEM, "out of memory");
    int r = parse_body(body, acct, err);
    if (r == 0 && (accounts_find(a, acct->name) || strcmp(acct->name, ACCOUNT_DEFAULT) == 0))
        r = err_set(err, -EEXIST, "an account named %s exists; pick another name", acct->name);
    if (r == 0 && a->count >= ACCOUNTS_MAX)
        r = err_set(err, -EAGAIN, "there are %d accounts, the limit; remove some first",
                    ACCOUNTS_MAX);
    if (r == 0) {
        acct->created_ms = now_unix_ms();
        make_key(key, acct->key_hash[0]);
        r = save(a, acct, err);
    }
    if (r < 0) {
        explicit_bzero(key, ACCOUNT_KEY_LEN + 1);
        free(acct);
        return r;
    }
    acct->next = a->list;
    a->list = acct;
    a->count++;
    *out = acct;
    return 0;
}

static struct account *find_mutable(struct accounts *a, const char *name, err_t *err)
{
    for (struct account *acct = a->list; acct; acct = acct->next)
        if (strcmp(acct->name, name) == 0) return acct;
    err_set(err, -ENOENT, "no account %s; `runtime account list` shows them", name);
    return NULL;
}

int accounts_new_key(struct accounts *a, const char *name, char key[ACCOUNT_KEY_LEN + 1],
                     err_t *err)
{
    struct account *acct = find_mutable(a, name, err);
    if (!acct) return -ENOENT;
    struct account changed = *acct;
    memcpy(changed.key_hash[1], acct->key_hash[0], sizeof changed.key_hash[1]);
    make_key(key, changed.key_hash[0]);
    int r = save(a, &changed, err);
    if (r < 0) {
        explicit_bzero(key, ACCOUNT_KEY_LEN + 1);
        return r;
    }
    memcpy(acct->key_hash, changed.key_hash, sizeof acct->key_hash);
    return 0;
}

int accounts_mark_removing(struct accounts *a, const char *name, err_t *err)
{
    struct account *acct = find_mutable(a, name, err);
    if (!acct) return -ENOENT;
    acct->removing = true;
    int r = save(a, acct, err);
    if (r < 0) acct->removing = false;
    return r;
}

int accounts_delete(struct accounts *a, const char *name, err_t *err)
{
    for (struct account **pp = &a->list; *pp; pp = &(*pp)->next) {
        struct account *acct = *pp;
        if (strcmp(acct->name, name) != 0) continue;
        int r = store_account_delete(a->store, name, err);
        if (r < 0) return r;
        *pp = acct->next;
        a->count--;
        explicit_bzero(acct->key_hash, sizeof acct->key_hash);
        free(acct);
        return 0;
    }
    return err_set(err, -ENOENT, "no account %s", name);
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
