/* The vault through the store's writer: a put or delete is answered once written;
 * one that cannot be written reaches its callback as an error and leaves memory
 * as the disk is (a new secret gone, a replaced one as it was, a deleted one back). */
#include <errno.h>
#include <poll.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "secrets/secrets.h"
#include "store/store.h"
#include "unit.h"

struct vdb {
    char dir[64], path[96];
    struct store *reader;
    struct store_writer *writer;
    struct vault *vault;
};

struct answers {
    int n, failed, created;
    char msg[128];
};

static void on_saved(const err_t *err, json_t *answer, bool created, void *arg)
{
    struct answers *a = arg;
    a->n++;
    if (err) {
        a->failed++;
        snprintf(a->msg, sizeof a->msg, "%s", err->msg);
    }
    a->created += created;
    json_decref(answer);
}

static void no_event(void *arg, const char *sandbox_id, const char *kind, json_t *fields) {}

static void vdb_open(struct vdb *d, int *failed_)
{
    strcpy(d->dir, "/tmp/runtime-unit-vault-XXXXXX");
    CHECK(mkdtemp(d->dir) != NULL);
    snprintf(d->path, sizeof d->path, "%s/state.db", d->dir);
    err_t err = {0};
    CHECK(store_open(d->path, &d->reader, &err) == 0);
    CHECK(store_writer_start(d->path, &d->writer, &err) == 0);
    uint8_t key[SECRETS_KEY_LEN] = {1};
    struct vault_hooks hooks = {.event = no_event};
    CHECK(vault_open(d->reader, d->writer, key, &hooks, &d->vault, &err) == 0);
}

static void vdb_close(struct vdb *d, int *failed_)
{
    vault_close(d->vault);
    store_writer_stop(d->writer);
    store_close(d->reader);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", d->dir);
    CHECK(system(cmd) == 0);
}

static void wait_answers(struct vdb *d, struct answers *a, int want, int *failed_)
{
    while (a->n < want) {
        struct pollfd p = {.fd = store_writer_done_fd(d->writer), .events = POLLIN};
        int ready = poll(&p, 1, 5000);
        CHECK(ready == 1);
        if (ready != 1) return;
        store_writer_run_done(d->writer);
    }
}

static int put(struct vdb *d, const char *name, const char *host, struct answers *a)
{
    json_t *body = json_pack("{s:s,s:[s]}", "value", "secret-value", "hosts", host);
    err_t err = {0};
    int r = vault_put(d->vault, "default", name, body, on_saved, a, NULL, &err);
    json_decref(body);
    return r;
}

/* The first host of the secret's rules as the vault lists it, or "". */
static const char *host_of(struct vdb *d, const char *name, char *out, size_t size)
{
    json_t *list = vault_list(d->vault, "default");
    size_t i;
    json_t *s;
    snprintf(out, size, "%s", "");
    json_array_foreach(list, i, s)
    {
        if (strcmp(json_string_value(json_object_get(s, "name")), name) == 0)
            snprintf(out, size, "%s",
                     json_string_value(json_array_get(json_object_get(s, "hosts"), 0)));
    }
    json_decref(list);
    return out;
}

TEST(vault_changes_answer_once_written_and_undo_when_not)
{
    struct vdb d;
    vdb_open(&d, failed_);
    struct answers a = {0};
    char host[64];
    CHECK(put(&d, "A", "a.example", &a) == 0);
    CHECK(a.n == 0); /* not before it is written */
    wait_answers(&d, &a, 1, failed_);
    CHECK(a.n == 1 && a.failed == 0 && a.created == 1);

    /* The table goes, behind the vault's back: every write fails from now on. */
    sqlite3 *db = NULL;
    CHECK(sqlite3_open(d.path, &db) == SQLITE_OK);
    CHECK(sqlite3_exec(db, "DROP TABLE secrets", NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);

    a = (struct answers){0};
    CHECK(put(&d, "B", "b.example", &a) == 0);
    CHECK(vault_has(d.vault, "default", "B")); /* in force at once */
    CHECK(put(&d, "A", "changed.example", &a) == 0);
    CHECK_STR(host_of(&d, "A", host, sizeof host), "changed.example");
    wait_answers(&d, &a, 2, failed_);
    CHECK(a.n == 2 && a.failed == 2);
    CHECK(strstr(a.msg, "saving the secret") != NULL);
    CHECK(!vault_has(d.vault, "default", "B"));
    CHECK_STR(host_of(&d, "A", host, sizeof host), "a.example");

    a = (struct answers){0};
    err_t err = {0};
    CHECK(vault_delete(d.vault, "default", "A", on_saved, &a, &err) == 0);
    CHECK(!vault_has(d.vault, "default", "A"));
    wait_answers(&d, &a, 1, failed_);
    CHECK(a.n == 1 && a.failed == 1);
    CHECK(vault_has(d.vault, "default", "A")); /* its row is still there */
    vdb_close(&d, failed_);
}

/* A secret named after a variable the sandbox's programs depend on, stored
 * before such names were refused (here: written to the store directly), is
 * never put in place of that variable; the others are. */
TEST(vault_env_leaves_reserved_names_alone)
{
    struct vdb d;
    vdb_open(&d, failed_);
    struct answers a = {0};
    CHECK(put(&d, "GH_TOKEN", "api.example", &a) == 0);
    CHECK(put(&d, "PATH", "api.example", &a) < 0); /* refused now */
    wait_answers(&d, &a, 1, failed_);
    sqlite3 *db = NULL;
    CHECK(sqlite3_open(d.path, &db) == SQLITE_OK);
    CHECK(sqlite3_exec(db,
                       "INSERT INTO secrets SELECT account,'PATH',sealed,rules,created_ms,"
                       "updated_ms FROM secrets WHERE name='GH_TOKEN';"
                       "INSERT INTO secrets SELECT account,'LD_PRELOAD',sealed,rules,created_ms,"
                       "updated_ms FROM secrets WHERE name='GH_TOKEN'",
                       NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);
    vault_close(d.vault); /* read again: the rows as a daemon of before left them */
    uint8_t key[SECRETS_KEY_LEN] = {1};
    struct vault_hooks hooks = {.event = no_event};
    err_t err = {0};
    CHECK(vault_open(d.reader, d.writer, key, &hooks, &d.vault, &err) == 0);
    json_t *env = json_pack("{s:s}", "PATH", "/usr/bin:/bin");
    CHECK(vault_env(d.vault, "default", "sb1", env, &err) == 0);
    CHECK_STR(json_string_value(json_object_get(env, "PATH")), "/usr/bin:/bin");
    CHECK(json_object_get(env, "LD_PRELOAD") == NULL);
    CHECK(secrets_is_placeholder(json_string_value(json_object_get(env, "GH_TOKEN")),
                                 PLACEHOLDER_LEN));
    json_decref(env);
    vdb_close(&d, failed_);
}

TEST(secrets_check_name_refuses_reserved_variables)
{
    static const char *const reserved[] = {
        "PATH",        "path",          "HOME", "LD_PRELOAD",   "LD_X",          "ld_audit",
        "LC_ALL",      "TMPDIR",        "IFS",  "NODE_OPTIONS", "SSL_CERT_FILE", "MALLOC_ARENA_MAX",
        "https_proxy", "GLIBC_TUNABLES"};
    static const char *const fine[] = {"GITHUB_TOKEN", "PATHS", "MY_PATH", "LDAP_PASSWORD",
                                       "LD",           "HOMER", "_PATH",   "OPENAI_API_KEY"};
    err_t err = {0};
    for (size_t i = 0; i < sizeof reserved / sizeof *reserved; i++) {
        CHECK(secrets_check_name(reserved[i], &err) == -EINVAL);
        CHECK(strstr(err.msg, reserved[i]) && strstr(err.msg, "reserved"));
    }
    for (size_t i = 0; i < sizeof fine / sizeof *fine; i++)
        CHECK(secrets_check_name(fine[i], &err) == 0);
}

/* A secret's rules that come back from the store garbled (here "methods" a string, not a
 * list: read raw, it limited nothing) are read as a put's body is: refused, and the
 * secret goes to no host, rather than to its host with any method. */
TEST(vault_garbled_rules_row_sends_the_secret_nowhere)
{
    struct vdb d;
    vdb_open(&d, failed_);
    struct answers a = {0};
    CHECK(put(&d, "GH_TOKEN", "api.example", &a) == 0);
    wait_answers(&d, &a, 1, failed_);
    err_t err = {0};
    json_t *env = json_object();
    CHECK(vault_env(d.vault, "default", "sb1", env, &err) == 0);
    CHECK(vault_wants(d.vault, "sb1", "api.example", 443));
    json_decref(env);
    sqlite3 *db = NULL;
    CHECK(sqlite3_open(d.path, &db) == SQLITE_OK);
    sqlite3_busy_timeout(db, 5000); /* the writer may be writing the placeholder */
    CHECK(
        sqlite3_exec(db,
                     "UPDATE secrets SET rules='{\"hosts\":[\"api.example\"],\"methods\":\"GET\"}'"
                     " WHERE name='GH_TOKEN'",
                     NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);
    vault_close(d.vault);
    uint8_t key[SECRETS_KEY_LEN] = {1};
    struct vault_hooks hooks = {.event = no_event};
    CHECK(vault_open(d.reader, d.writer, key, &hooks, &d.vault, &err) == 0);
    env = json_object();
    CHECK(vault_env(d.vault, "default", "sb1", env, &err) == 0);
    CHECK(!vault_wants(d.vault, "sb1", "api.example", 443));
    char host[64];
    CHECK(strcmp(host_of(&d, "GH_TOKEN", host, sizeof host), "api.example") != 0); /* none */
    json_decref(env);
    vdb_close(&d, failed_);
}
