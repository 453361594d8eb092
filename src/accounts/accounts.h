/* accounts: who may call the API, and what is theirs. Every sandbox and secret
 * belongs to an account; the admin key (STATE/admin.key) manages accounts and
 * acts as the account "default". An account's API key has 256 random bits, is
 * shown once and kept only as its SHA-256 (a key that random needs no slow hash);
 * a presented key is compared with every stored one in constant time. An
 * account has at most two keys: a new one (rotation) keeps the newest earlier
 * one valid until the next rotation. */
#ifndef RUNTIME_ACCOUNTS_H
#define RUNTIME_ACCOUNTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "../common/common.h"

#define ACCOUNT_NAME_MAX 64 /* 1-63 bytes and a NUL */
#define ACCOUNT_DEFAULT "default"
#define ACCOUNT_KEY_PREFIX "rtk_"
#define ACCOUNT_KEY_LEN (sizeof ACCOUNT_KEY_PREFIX - 1 + 64)
#define ACCOUNT_HASH_LEN 64
#define ACCOUNTS_MAX 10000

struct account {
    char name[ACCOUNT_NAME_MAX];
    char key_hash[2][ACCOUNT_HASH_LEN + 1]; /* newest first; "" for none */
    uint32_t max_sandboxes;                 /* 0: only the daemon's limit */
    uint64_t max_memory_mib;                /* 0: no limit */
    int64_t created_ms;
    bool removing; /* its removal is under way (finished at restart if cut short) */
    struct account *next;
};

/* A name: 1-63 of a-z, 0-9, '-', '_', '.', starting with a letter or digit. */
int account_check_name(const char *name, err_t *err);

struct store;
struct accounts;
/* Loads the accounts of the store. */
int accounts_open(struct store *store, struct accounts **out, err_t *err);
void accounts_close(struct accounts *a);

/* The account a presented API key belongs to, or NULL. Every stored key is
 * compared, each in constant time. */
const struct account *accounts_authenticate(const struct accounts *a, const char *key);
const struct account *accounts_find(const struct accounts *a, const char *name);
const struct account *accounts_first(const struct accounts *a);

/* body: {name, maxSandboxes?, maxMemoryMiB?}. key gets the new account's API key
 * (shown once). -EEXIST when the name is taken, -EAGAIN past ACCOUNTS_MAX. */
int accounts_create(struct accounts *a, json_t *body, char key[ACCOUNT_KEY_LEN + 1],
                    const struct account **out, err_t *err);
/* A new key for the account; the newest earlier one stays valid. */
int accounts_new_key(struct accounts *a, const char *name, char key[ACCOUNT_KEY_LEN + 1],
                     err_t *err);
/* Marks it as being removed (durably: a restart finishes the removal). */
int accounts_mark_removing(struct accounts *a, const char *name, err_t *err);
/* Its row goes; call when nothing of it is left. */
int accounts_delete(struct accounts *a, const char *name, err_t *err);

/* {name, maxSandboxes, maxMemoryMiB, createdAt, removing}: never a key or a hash. */
json_t *account_json(const struct account *acct);

#endif
