/* The store's writer thread: what it is given is on disk, in order, once
 * store_writer_sync returns; a delete queued after adds removes them; stop writes
 * what is still queued; its checkpoints keep the WAL from growing. The sandbox
 * rows' writes call back in queue order, on the thread that runs
 * store_writer_run_done, only once written; stop cancels the callbacks due. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "store/store.h"
#include "unit.h"

struct db {
    char dir[64], path[96], wal[100];
    struct store *reader;
    struct store_writer *writer;
};

static void db_open(struct db *d, int *failed_)
{
    strcpy(d->dir, "/tmp/runtime-unit-store-XXXXXX");
    CHECK(mkdtemp(d->dir) != NULL);
    snprintf(d->path, sizeof d->path, "%s/state.db", d->dir);
    snprintf(d->wal, sizeof d->wal, "%s-wal", d->path);
    err_t err = {0};
    CHECK(store_open(d->path, &d->reader, &err) == 0);
    CHECK(store_writer_start(d->path, &d->writer, &err) == 0);
}

static void db_close(struct db *d, int *failed_)
{
    store_writer_stop(d->writer);
    store_close(d->reader);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", d->dir);
    CHECK(system(cmd) == 0);
}

/* Queues n events "k0".."k(n-1)" for sandbox; the writer takes the strings. */
static void add_events(struct db *d, const char *sandbox, int from, int n)
{
    struct store_event ev[64];
    for (int i = 0; i < n; i++) {
        char kind[16];
        snprintf(kind, sizeof kind, "k%d", from + i);
        ev[i] = (struct store_event){
            .time_ms = 1000 + from + i, .kind = strdup(kind), .fields_json = strdup("{\"a\":1}")};
    }
    store_writer_events_add(d->writer, sandbox, ev, (size_t)n);
}

struct seen {
    int n;
    char kinds[256][16];
};

static int collect(const struct store_event *ev, void *arg)
{
    struct seen *s = arg;
    if (s->n < 256) snprintf(s->kinds[s->n], sizeof s->kinds[0], "%s", ev->kind);
    s->n++;
    return 0;
}

static struct seen read_events(struct db *d, const char *sandbox, int *failed_)
{
    struct seen s = {0};
    err_t err = {0};
    CHECK(store_events_each(d->reader, sandbox, 0, 1000, collect, &s, &err) == 0);
    return s;
}

TEST(store_writer_events_seen_in_order_after_sync)
{
    struct db d;
    db_open(&d, failed_);
    for (int batch = 0; batch < 4; batch++)
        add_events(&d, "sbA", batch * 50, 50);
    add_events(&d, "sbB", 0, 3);
    store_writer_sync(d.writer);
    struct seen a = read_events(&d, "sbA", failed_), b = read_events(&d, "sbB", failed_);
    CHECK(a.n == 200);
    CHECK(b.n == 3);
    char want[16];
    for (int i = 0; i < a.n && i < 200; i++) {
        snprintf(want, sizeof want, "k%d", i);
        CHECK_STR(a.kinds[i], want);
    }
    db_close(&d, failed_);
}

TEST(store_writer_delete_after_adds_removes_them_and_later_adds_stay)
{
    struct db d;
    db_open(&d, failed_);
    add_events(&d, "sbA", 0, 10);
    store_writer_events_delete(d.writer, "sbA");
    add_events(&d, "sbA", 10, 2);
    store_writer_sync(d.writer);
    struct seen a = read_events(&d, "sbA", failed_);
    CHECK(a.n == 2);
    CHECK_STR(a.kinds[0], "k10");
    db_close(&d, failed_);
}

TEST(store_writer_usage_put_is_read_back_after_sync)
{
    struct db d;
    db_open(&d, failed_);
    store_writer_usage_put(d.writer, "sbA", "{\"cpuSeconds\":1}");
    store_writer_usage_put(d.writer, "sbA", "{\"cpuSeconds\":2}");
    store_writer_sync(d.writer);
    char *json = NULL;
    err_t err = {0};
    CHECK(store_usage_get(d.reader, "sbA", &json, &err) == 0);
    CHECK(json && strcmp(json, "{\"cpuSeconds\":2}") == 0);
    free(json);
    db_close(&d, failed_);
}

TEST(store_writer_stop_writes_what_is_queued)
{
    struct db d;
    db_open(&d, failed_);
    add_events(&d, "sbA", 0, 64);
    store_writer_stop(d.writer); /* no sync first */
    err_t err = {0};
    CHECK(store_writer_start(d.path, &d.writer, &err) == 0);
    CHECK(read_events(&d, "sbA", failed_).n == 64);
    db_close(&d, failed_);
}

/* No connection checkpoints on its own, so the WAL grows with every commit of the
 * server's connection until the writer's thread checkpoints it; then it starts
 * over and shrinks to the journal size limit (4 MiB). */
TEST(store_writer_checkpoints_keep_the_wal_bounded)
{
    struct db d;
    db_open(&d, failed_);
    store_writer_stop(d.writer); /* first: commits with no writer running */
    err_t err = {0};
    char name[4001];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = 0;
    for (int i = 0; i < 1500; i++) /* a 4000-byte row is at least one 4 KiB page */
        CHECK(store_names_put(d.reader, "sbA", (uint32_t)i, (uint64_t)i, name, &err) == 0);
    struct stat before;
    CHECK(stat(d.wal, &before) == 0);
    CHECK(before.st_size > 6 * 1024 * 1024);
    CHECK(store_writer_start(d.path, &d.writer, &err) == 0);
    store_writer_stop(d.writer); /* it checkpoints on the way out */
    CHECK(store_writer_start(d.path, &d.writer, &err) == 0);
    CHECK(store_names_put(d.reader, "sbB", 1, 1, "b.example", &err) == 0);
    struct stat after;
    CHECK(stat(d.wal, &after) == 0);
    CHECK(after.st_size <= 4 * 1024 * 1024);
    db_close(&d, failed_);
}

/* ---- the sandbox rows' writes, with their completions ---- */

struct done_log {
    int n;
    int tags[16];
    int r[16];
    char msg[16][64];
    pthread_t thread[16];
};

struct done_arg {
    struct done_log *log;
    int tag;
};

static void on_done(int r, const err_t *err, void *arg)
{
    struct done_arg *a = arg;
    struct done_log *l = a->log;
    if (l->n < 16) {
        l->tags[l->n] = a->tag;
        l->r[l->n] = r;
        snprintf(l->msg[l->n], sizeof l->msg[0], "%s", err ? err->msg : "");
        l->thread[l->n] = pthread_self();
    }
    l->n++;
}

/* Runs the callbacks due, as the loop does when the eventfd is readable, until
 * want have run (poll's 5 s is a bound on a broken writer, not a pause). */
static void run_done_until(struct db *d, struct done_log *l, int want, int *failed_)
{
    while (l->n < want) {
        struct pollfd p = {.fd = store_writer_done_fd(d->writer), .events = POLLIN};
        int ready = poll(&p, 1, 5000);
        CHECK(ready == 1);
        if (ready != 1) return;
        store_writer_run_done(d->writer);
    }
}

static struct store_sandbox row(const char *id, const char *name, uint32_t slot)
{
    struct store_sandbox sb = {
        .name = (char *)name, .slot = slot, .created_ms = slot, .spec_json = (char *)"{}"};
    snprintf(sb.id, sizeof sb.id, "%s", id);
    snprintf(sb.status, sizeof sb.status, "creating");
    return sb;
}

struct rows {
    int n;
    char ids[8][32], status[8][16];
};

static int collect_row(const struct store_sandbox *sb, void *arg)
{
    struct rows *r = arg;
    if (r->n < 8) {
        snprintf(r->ids[r->n], sizeof r->ids[0], "%s", sb->id);
        snprintf(r->status[r->n], sizeof r->status[0], "%s", sb->status);
    }
    r->n++;
    return 0;
}

static struct rows read_rows(struct db *d, int *failed_)
{
    struct rows r = {0};
    err_t err = {0};
    CHECK(store_sandbox_each(d->reader, collect_row, &r, &err) == 0);
    return r;
}

TEST(store_writer_sandbox_writes_call_back_in_order_on_the_caller_thread)
{
    struct db d;
    db_open(&d, failed_);
    struct done_log l = {0};
    struct done_arg a[5];
    for (int i = 0; i < 5; i++)
        a[i] = (struct done_arg){.log = &l, .tag = i};
    struct store_sandbox one = row("sb1", "one", 1), two = row("sb2", NULL, 2);
    struct store_sandbox taken = row("sb3", "one", 3); /* the name is sb1's */
    store_writer_sandbox_insert(d.writer, &one, on_done, &a[0]);
    add_events(&d, "sb1", 0, 3); /* no callback, between them */
    store_writer_sandbox_insert(d.writer, &two, on_done, &a[1]);
    store_writer_sandbox_insert(d.writer, &taken, on_done, &a[2]);
    store_writer_sandbox_status(d.writer, "sb1", "running", on_done, &a[3]);
    store_writer_sandbox_status(d.writer, "sb2", "stopped", NULL, NULL);
    store_writer_sandbox_forget(d.writer, "sb2", on_done, &a[4]);
    store_writer_sync(d.writer);
    CHECK(l.n == 0); /* written, but called back only from store_writer_run_done */
    run_done_until(&d, &l, 5, failed_);
    CHECK(l.n == 5);
    for (int i = 0; i < 5 && i < l.n; i++) {
        CHECK(l.tags[i] == i);
        CHECK(pthread_equal(l.thread[i], pthread_self()));
        CHECK(l.r[i] == (i == 2 ? -EEXIST : 0));
    }
    CHECK(strstr(l.msg[2], "saving the sandbox") != NULL);
    struct rows r = read_rows(&d, failed_);
    CHECK(r.n == 1);
    CHECK_STR(r.ids[0], "sb1");
    CHECK_STR(r.status[0], "running");
    CHECK(read_events(&d, "sb1", failed_).n == 3);
    db_close(&d, failed_);
}

TEST(store_writer_forget_removes_the_names_and_mcp_state_too)
{
    struct db d;
    db_open(&d, failed_);
    err_t err = {0};
    struct store_sandbox one = row("sb1", NULL, 1);
    CHECK(store_sandbox_insert(d.reader, &one, &err) == 0);
    CHECK(store_names_put(d.reader, "sb1", 1, 1, "a.example", &err) == 0);
    CHECK(store_mcp_put(d.reader, "sb1", "{}", &err) == 0);
    CHECK(store_mcp_put(d.reader, "sb2", "{}", &err) == 0);
    struct done_log l = {0};
    struct done_arg a = {.log = &l};
    store_writer_sandbox_forget(d.writer, "sb1", on_done, &a);
    run_done_until(&d, &l, 1, failed_);
    CHECK(l.n == 1 && l.r[0] == 0);
    CHECK(read_rows(&d, failed_).n == 0);
    char *json = NULL;
    CHECK(store_mcp_get(d.reader, "sb1", &json, &err) == -ENOENT);
    CHECK(store_mcp_get(d.reader, "sb2", &json, &err) == 0);
    free(json);
    db_close(&d, failed_);
}

/* Stop writes what is queued; callbacks not yet run hear -ECANCELED, once each. */
TEST(store_writer_stop_with_writes_pending_cancels_their_callbacks)
{
    struct db d;
    db_open(&d, failed_);
    struct done_log l = {0};
    struct done_arg a[3];
    for (int i = 0; i < 3; i++)
        a[i] = (struct done_arg){.log = &l, .tag = i};
    struct store_sandbox one = row("sb1", NULL, 1), two = row("sb2", NULL, 2);
    store_writer_sandbox_insert(d.writer, &one, on_done, &a[0]);
    store_writer_sandbox_insert(d.writer, &two, on_done, &a[1]);
    store_writer_sandbox_status(d.writer, "sb2", "running", on_done, &a[2]);
    store_writer_stop(d.writer); /* no run_done first */
    CHECK(l.n == 3);
    for (int i = 0; i < 3 && i < l.n; i++) {
        CHECK(l.tags[i] == i);
        CHECK(l.r[i] == -ECANCELED);
    }
    err_t err = {0};
    CHECK(store_writer_start(d.path, &d.writer, &err) == 0);
    struct rows r = read_rows(&d, failed_);
    CHECK(r.n == 2);
    CHECK_STR(r.status[1], "running");
    db_close(&d, failed_);
    CHECK(l.n == 3); /* not called again */
}

/* ---- the rows the loop used to write: settings, names, MCP state, secrets,
 * placeholders, accounts ---- */

static void count_secret(const struct store_secret *s, void *arg)
{
    (*(int *)arg)++;
}

static void count_placeholder(const struct store_placeholder *p, void *arg)
{
    (*(int *)arg)++;
}

static void count_account(const struct store_account *a, void *arg)
{
    (*(int *)arg)++;
}

static void read_name(uint32_t slot, uint64_t seq, const char *name, void *arg)
{
    snprintf(arg, 32, "%u/%llu/%s", slot, (unsigned long long)seq, name);
}

static int read_spec(const struct store_sandbox *sb, void *arg)
{
    snprintf(arg, 64, "%s", sb->spec_json);
    return 0;
}

/* Each is written in queue order and called back after; a secret's delete takes
 * its placeholders; a failed one says why. */
TEST(store_writer_row_jobs_write_in_order_and_call_back)
{
    struct db d;
    db_open(&d, failed_);
    struct done_log l = {0};
    struct done_arg a[8];
    for (int i = 0; i < 8; i++)
        a[i] = (struct done_arg){.log = &l, .tag = i};
    struct store_sandbox one = row("sb1", NULL, 1);
    store_writer_sandbox_insert(d.writer, &one, NULL, NULL);
    store_writer_sandbox_spec(d.writer, "sb1", "{\"net\":1}", on_done, &a[0]);
    store_writer_names_put(d.writer, "sb1", 7, 3, "a.example", on_done, &a[1]);
    store_writer_mcp_put(d.writer, "sb1", "{\"link\":\"x\"}");
    const uint8_t sealed[] = {1, 2, 3};
    struct store_secret s = {.account = "default",
                             .name = "TOKEN",
                             .sealed = sealed,
                             .sealed_len = sizeof sealed,
                             .rules_json = "{}"};
    store_writer_secret_put(d.writer, &s, on_done, &a[2]);
    s.name = "OTHER";
    store_writer_secret_put(d.writer, &s, on_done, &a[3]);
    struct store_placeholder p = {
        .sandbox = "sb1", .account = "default", .secret = "TOKEN", .placeholder = "ph1"};
    store_writer_placeholder_put(d.writer, &p);
    p = (struct store_placeholder){
        .sandbox = "sb1", .account = "default", .secret = "OTHER", .placeholder = "ph2"};
    store_writer_placeholder_put(d.writer, &p);
    store_writer_secret_delete(d.writer, "default", "TOKEN", on_done, &a[4]);
    struct store_account acct = {.name = "acme", .key_hash = "h1", .key2_hash = ""};
    store_writer_account_put(d.writer, &acct, on_done, &a[5]);
    acct.name = "gone";
    store_writer_account_put(d.writer, &acct, NULL, NULL);
    store_writer_account_delete(d.writer, "gone", on_done, &a[6]);
    store_writer_secret_delete(d.writer, "default", "OTHER", on_done, &a[7]);
    run_done_until(&d, &l, 8, failed_);
    CHECK(l.n == 8);
    for (int i = 0; i < 8 && i < l.n; i++) {
        CHECK(l.tags[i] == i);
        CHECK(l.r[i] == 0);
    }
    err_t err = {0};
    char spec[64] = "", name[32] = "", *mcp = NULL;
    CHECK(store_sandbox_each(d.reader, read_spec, spec, &err) == 0);
    CHECK_STR(spec, "{\"net\":1}");
    CHECK(store_names_each(d.reader, "sb1", read_name, name, &err) == 0);
    CHECK_STR(name, "7/3/a.example");
    CHECK(store_mcp_get(d.reader, "sb1", &mcp, &err) == 0);
    CHECK(mcp && strcmp(mcp, "{\"link\":\"x\"}") == 0);
    free(mcp);
    int secrets = 0, placeholders = 0, accounts = 0;
    CHECK(store_secrets_each(d.reader, count_secret, &secrets, &err) == 0);
    CHECK(store_placeholders_each(d.reader, count_placeholder, &placeholders, &err) == 0);
    CHECK(store_accounts_each(d.reader, count_account, &accounts, &err) == 0);
    CHECK(secrets == 0);      /* both deleted */
    CHECK(placeholders == 0); /* with them */
    CHECK(accounts == 1);     /* acme; gone is */
    /* The placeholders of a sandbox go with store_writer_placeholders_delete. */
    p = (struct store_placeholder){
        .sandbox = "sb3", .account = "default", .secret = "X", .placeholder = "ph3"};
    store_writer_placeholder_put(d.writer, &p);
    store_writer_placeholders_delete(d.writer, "sb3");
    store_writer_sync(d.writer);
    placeholders = 0;
    CHECK(store_placeholders_each(d.reader, count_placeholder, &placeholders, &err) == 0);
    CHECK(placeholders == 0);
    db_close(&d, failed_);
}

/* A write that fails in the writer reaches its callback with the reason. */
TEST(store_writer_row_job_failure_reaches_the_callback)
{
    struct db d;
    db_open(&d, failed_);
    struct done_log l = {0};
    struct done_arg a = {.log = &l};
    /* A secret without rules: the schema refuses it (NOT NULL). */
    struct store_secret s = {.account = "default",
                             .name = "T",
                             .sealed = (const uint8_t *)"x",
                             .sealed_len = 1,
                             .rules_json = NULL};
    store_writer_secret_put(d.writer, &s, on_done, &a);
    run_done_until(&d, &l, 1, failed_);
    CHECK(l.n == 1 && l.r[0] < 0);
    CHECK(strstr(l.msg[0], "saving the secret") != NULL);
    db_close(&d, failed_);
}

/* The server's connection once started: a write fails (and says so), reads go on,
 * and the writer's own connection still writes. */
TEST(store_read_only_connection_refuses_writes)
{
    struct db d;
    db_open(&d, failed_);
    err_t err = {0};
    CHECK(store_mcp_put(d.reader, "sb1", "{}", &err) == 0);
    CHECK(store_set_read_only(d.reader, &err) == 0);
    err = (err_t){0};
    CHECK(store_mcp_put(d.reader, "sb2", "{}", &err) == -EIO);
    CHECK(strstr(err.msg, "saving the MCP servers") != NULL);
    CHECK(strstr(err.msg, "readonly") != NULL || strstr(err.msg, "read-only") != NULL ||
          strstr(err.msg, "read only") != NULL);
    char *json = NULL;
    CHECK(store_mcp_get(d.reader, "sb1", &json, &err) == 0);
    free(json);
    store_writer_mcp_put(d.writer, "sb2", "{\"w\":1}");
    store_writer_sync(d.writer);
    json = NULL;
    CHECK(store_mcp_get(d.reader, "sb2", &json, &err) == 0);
    CHECK(json && strcmp(json, "{\"w\":1}") == 0);
    free(json);
    db_close(&d, failed_);
}

static int collect_spec(const struct store_sandbox *sb, void *arg)
{
    char **specs = arg;
    int i = sb->id[2] - '0';
    if (i >= 0 && i < 4) specs[i] = strdup(sb->spec_json);
    return 0;
}

/* Schema 2: rows written when network.allow [] meant any public host lose the empty
 * list (no list: any public host), so that they keep their meaning; a list with
 * hosts, and a row without one, are left as they were. */
TEST(store_schema_2_keeps_what_an_empty_allow_list_meant)
{
    static const char *const before[] = {
        "{\"name\":null,\"network\":{\"internet\":true,\"allow\":[]}}",
        "{\"name\":null,\"network\":{\"internet\":false,\"allow\":[]}}",
        "{\"name\":null,\"network\":{\"internet\":true,\"allow\":[\"a.example\"]}}",
        "{\"name\":null,\"network\":{\"internet\":true}}",
    };
    static const char *const after[] = {
        "{\"name\":null,\"network\":{\"internet\":true}}",
        "{\"name\":null,\"network\":{\"internet\":false}}",
        "{\"name\":null,\"network\":{\"internet\":true,\"allow\":[\"a.example\"]}}",
        "{\"name\":null,\"network\":{\"internet\":true}}",
    };
    struct db d;
    db_open(&d, failed_);
    err_t err = {0};
    for (int i = 0; i < 4; i++) {
        struct store_sandbox sb = {
            .slot = (uint32_t)i, .created_ms = i, .spec_json = (char *)before[i]};
        snprintf(sb.id, sizeof sb.id, "sb%d", i);
        strcpy(sb.account, "default");
        strcpy(sb.status, "running");
        CHECK(store_sandbox_insert(d.reader, &sb, &err) == 0);
    }
    store_writer_stop(d.writer);
    store_close(d.reader);
    /* As a daemon of schema 1 left it (without schema 3's events column). */
    sqlite3 *db;
    CHECK(sqlite3_open(d.path, &db) == SQLITE_OK);
    CHECK(sqlite3_exec(db,
                       "DROP INDEX events_by_class; ALTER TABLE events DROP COLUMN security;"
                       "PRAGMA user_version=1",
                       NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);
    CHECK(store_open(d.path, &d.reader, &err) == 0);
    CHECK(store_writer_start(d.path, &d.writer, &err) == 0);
    char *specs[4] = {0};
    CHECK(store_sandbox_each(d.reader, collect_spec, specs, &err) == 0);
    for (int i = 0; i < 4; i++) {
        CHECK_STR(specs[i], after[i]);
        free(specs[i]);
    }
    db_close(&d, failed_);
}

/* Every event of a sandbox after seq `after`, counted by class: the API pages
 * through them 1000 at a time the same way. */
struct classes {
    int routine, security;
    int64_t last;
    char first_security[32];
};

static int count_class(const struct store_event *ev, void *arg)
{
    struct classes *c = arg;
    c->last = ev->seq;
    if (ev->kind[0] == 'k') {
        c->routine++;
    } else {
        if (!c->security) snprintf(c->first_security, sizeof c->first_security, "%s", ev->kind);
        c->security++;
    }
    return 0;
}

static struct classes count_classes(struct db *d, const char *sandbox, int *failed_)
{
    struct classes c = {0};
    err_t err = {0};
    for (int page = 0; page < 100; page++) {
        int before = c.routine + c.security;
        CHECK(store_events_each(d->reader, sandbox, c.last, 1000, count_class, &c, &err) == 0);
        if (c.routine + c.security - before < 1000) break;
    }
    return c;
}

/* A sandbox's routine events (egress.allowed, ...) are capped on their own:
 * more of them than the cap never push a security event (secret.misdirected,
 * ...) out of the list, and security events have a cap of their own. */
TEST(store_security_events_outlive_a_flood_of_routine_ones)
{
    struct db d;
    db_open(&d, failed_);
    struct store_event ev = {.time_ms = 1,
                             .kind = strdup("secret.misdirected"),
                             .fields_json = strdup("{\"secret\":\"GH\"}"),
                             .security = true};
    store_writer_events_add(d.writer, "sbA", &ev, 1);
    for (int i = 0; i < STORE_EVENTS_KEPT + 200; i += 64)
        add_events(&d, "sbA", i, 64);
    store_writer_sync(d.writer);
    struct classes c = count_classes(&d, "sbA", failed_);
    CHECK(c.routine == STORE_EVENTS_KEPT);
    CHECK(c.security == 1);
    CHECK_STR(c.first_security, "secret.misdirected");
    /* and the other way: security events past their own cap go, oldest first */
    for (int i = 0; i < STORE_SECURITY_EVENTS_KEPT + 10; i += 64) {
        struct store_event evs[64];
        for (int k = 0; k < 64; k++)
            evs[k] = (struct store_event){.time_ms = 2 + i + k,
                                          .kind = strdup("secret.reflected"),
                                          .fields_json = strdup("{}"),
                                          .security = true};
        store_writer_events_add(d.writer, "sbA", evs, 64);
    }
    store_writer_sync(d.writer);
    c = count_classes(&d, "sbA", failed_);
    CHECK(c.security == STORE_SECURITY_EVENTS_KEPT);
    CHECK_STR(c.first_security, "secret.reflected");
    CHECK(c.routine == STORE_EVENTS_KEPT);
    db_close(&d, failed_);
}
