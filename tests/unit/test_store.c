/* The store's writer thread: what it is given is on disk, in order, once
 * store_writer_sync returns; a delete queued after adds removes them; stop writes
 * what is still queued; its checkpoints keep the WAL from growing. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
