/* accounts: who may call the API, and what is theirs. Every sandbox and secret
 * belongs to an account; the admin key (STATE/admin.key) manages accounts and
 * acts as the account "default". An account's API key has 256 random bits, is
 * shown once and kept only as its SHA-256 (a key that random needs no slow hash);
 * a presented key is compared with every stored one in constant time. An
 * account has at most two keys: a new one (rotation) keeps the newest earlier
 * one valid until the next rotation; and up to ACCOUNT_CONNECTIONS_MAX connection
 * keys (below), one for each machine approved with `runtime login`. */
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
    bool busy;     /* ... and runs now, in this process */
    struct account *next;
};

/* A name: 1-63 of a-z, 0-9, '-', '_', '.', starting with a letter or digit. */
int account_check_name(const char *name, err_t *err);

struct store;
struct store_writer;
struct accounts;
/* Loads the accounts of the store (read on the loop's connection); every change
 * goes through the writer. */
int accounts_open(struct store *store, struct store_writer *writer, struct accounts **out,
                  err_t *err);
void accounts_close(struct accounts *a);

/* The account a presented API key (an account's, or a connection's) belongs to,
 * or NULL. Every stored key is compared, each in constant time. A connection of
 * "default" (the admin's account, which has no row) gives a struct of its own. */
const struct account *accounts_authenticate(const struct accounts *a, const char *key);
const struct account *accounts_find(const struct accounts *a, const char *name);
const struct account *accounts_first(const struct accounts *a);

/* A change is in force in memory at once, and done is called exactly once, from
 * the loop: when it is on disk (err NULL; key, for a create or a new key, is the
 * key to show, once, and is wiped after the call), or when it could not be
 * written (err; the change is undone in memory). At a stop, err->code is
 * -ECANCELED: done then only frees what arg holds. Each is negative with err
 * (and no call of done) when refused. */
typedef void accounts_saved_fn(const err_t *err, const char *key, void *arg);
/* body: {name, maxSandboxes?, maxMemoryMiB?}. -EEXIST when the name is taken,
 * -EAGAIN past ACCOUNTS_MAX. */
int accounts_create(struct accounts *a, json_t *body, accounts_saved_fn *done, void *arg,
                    err_t *err);
/* A new key for the account; the newest earlier one stays valid. */
int accounts_new_key(struct accounts *a, const char *name, accounts_saved_fn *done, void *arg,
                     err_t *err);
/* Marks it as being removed (durably: a restart finishes the removal) and busy;
 * -EBUSY while a removal of it runs. */
int accounts_mark_removing(struct accounts *a, const char *name, accounts_saved_fn *done, void *arg,
                           err_t *err);
/* The removal stopped short (a sandbox could not be removed): it may be tried again. */
void accounts_removal_stopped(struct accounts *a, const char *name);
/* Its row goes (out of memory once on disk); call when nothing of it is left. */
int accounts_delete(struct accounts *a, const char *name, accounts_saved_fn *done, void *arg,
                    err_t *err);

/* ---- connections: a key of its own for each machine a person approved with
 * `runtime login` (docs/login.md). Its shape is Runtime Cloud's, which the official
 * SDKs insist on: rtcloud_<uuid v4>_<32 random bytes, base64url>. Only its SHA-256
 * is kept; it acts as its account, and is revoked alone (or with the account). */
#define CONNECTION_KEY_PREFIX "rtcloud_"
#define CONNECTION_KEY_LEN (sizeof CONNECTION_KEY_PREFIX - 1 + 36 + 1 + 43)
#define CONNECTION_ID_LEN 36 /* a uuid */
#define CONNECTION_AGENT_MAX 80
#define CONNECTION_MACHINE_MAX 255
#define ACCOUNT_CONNECTIONS_MAX 100

struct account_connection {
    char id[CONNECTION_ID_LEN + 1];
    char account[ACCOUNT_NAME_MAX];
    char key_hash[ACCOUNT_HASH_LEN + 1];
    char agent_name[CONNECTION_AGENT_MAX * 4 + 1]; /* UTF-8 */
    char machine[CONNECTION_MACHINE_MAX + 1];
    int64_t created_ms;
    int64_t last_used_ms; /* in memory only: 0 until used since the daemon started */
    struct account_connection *next;
};

/* The connection a presented key is, or NULL (each compared in constant time). */
const struct account_connection *accounts_connection_by_key(const struct accounts *a,
                                                            const char *key);
/* The account's connection of that id, or NULL. */
const struct account_connection *accounts_connection_find(const struct accounts *a,
                                                          const char *account, const char *id);
/* Every connection, newest first (the caller picks an account's). */
const struct account_connection *accounts_connections_first(const struct accounts *a);
/* A new connection of the account (which must exist, or be "default") for key, made
 * by the caller in the shape above; id is the connection's. done as for the rest
 * (its key argument is NULL). -EAGAIN past ACCOUNT_CONNECTIONS_MAX, -ENOENT for no
 * such account. */
int accounts_connection_add(struct accounts *a, const char *account, const char *id,
                            const char *key, const char *agent_name, const char *machine,
                            accounts_saved_fn *done, void *arg, err_t *err);
/* Revokes it: no longer accepted from now on; done once it is off the disk. */
int accounts_connection_remove(struct accounts *a, const char *account, const char *id,
                               accounts_saved_fn *done, void *arg, err_t *err);
/* {id, agentName, machine, createdAt, lastUsedAt}: never the key or its hash. */
json_t *account_connection_json(const struct account_connection *c);

/* {name, maxSandboxes, maxMemoryMiB, createdAt, removing}: never a key or a hash. */
json_t *account_json(const struct account *acct);

#endif
