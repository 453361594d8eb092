#include "store.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct store {
    sqlite3 *db;
};

static const char *const schema =
    "PRAGMA journal_mode=WAL;"
    "PRAGMA synchronous=FULL;" /* acknowledged means on disk, even after a power cut */
    "PRAGMA foreign_keys=ON;"
    "PRAGMA wal_autocheckpoint=0;"       /* the writer's thread checkpoints (store_checkpoint) */
    "PRAGMA journal_size_limit=4194304;" /* and the WAL file shrinks back once it starts over */
    "CREATE TABLE IF NOT EXISTS sandboxes ("
    "  id TEXT PRIMARY KEY,"
    "  name TEXT UNIQUE,"
    "  slot INTEGER NOT NULL UNIQUE,"
    "  status TEXT NOT NULL,"
    "  created_ms INTEGER NOT NULL,"
    "  spec TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS events ("
    "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  sandbox TEXT NOT NULL,"
    "  time_ms INTEGER NOT NULL,"
    "  kind TEXT NOT NULL,"
    "  fields TEXT NOT NULL);"
    "CREATE INDEX IF NOT EXISTS events_by_sandbox ON events(sandbox, seq);"
    "CREATE TABLE IF NOT EXISTS egress_names ("
    "  sandbox TEXT NOT NULL,"
    "  slot INTEGER NOT NULL,"
    "  seq INTEGER NOT NULL,"
    "  name TEXT NOT NULL,"
    "  PRIMARY KEY (sandbox, slot));"
    "CREATE TABLE IF NOT EXISTS secrets ("
    "  name TEXT PRIMARY KEY,"
    "  sealed BLOB NOT NULL,"
    "  rules TEXT NOT NULL,"
    "  created_ms INTEGER NOT NULL,"
    "  updated_ms INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS placeholders ("
    "  sandbox TEXT NOT NULL,"
    "  secret TEXT NOT NULL,"
    "  placeholder TEXT NOT NULL UNIQUE,"
    "  PRIMARY KEY (sandbox, secret));"
    "CREATE TABLE IF NOT EXISTS usage ("
    "  sandbox TEXT PRIMARY KEY,"
    "  created_ms INTEGER NOT NULL,"
    "  state TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS mcp ("
    "  sandbox TEXT PRIMARY KEY,"
    "  state TEXT NOT NULL);";

/* Schema versions after the first (PRAGMA user_version), each run once in a
 * transaction by the first connection that finds the database older. */
static const char *const migrations[] = {
    /* 1: accounts. Sandboxes and secrets belong to one (those made before, to
     * "default"); names are unique within an account. */
    "CREATE TABLE accounts ("
    "  name TEXT PRIMARY KEY,"
    "  key_hash TEXT NOT NULL,"
    "  key2_hash TEXT NOT NULL DEFAULT '',"
    "  max_sandboxes INTEGER NOT NULL DEFAULT 0,"
    "  max_memory_mib INTEGER NOT NULL DEFAULT 0,"
    "  created_ms INTEGER NOT NULL,"
    "  removing INTEGER NOT NULL DEFAULT 0);"
    "CREATE TABLE sandboxes1 ("
    "  id TEXT PRIMARY KEY,"
    "  account TEXT NOT NULL,"
    "  name TEXT,"
    "  slot INTEGER NOT NULL UNIQUE,"
    "  status TEXT NOT NULL,"
    "  created_ms INTEGER NOT NULL,"
    "  spec TEXT NOT NULL,"
    "  UNIQUE (account, name));"
    "INSERT INTO sandboxes1 SELECT id,'default',name,slot,status,created_ms,spec FROM sandboxes;"
    "DROP TABLE sandboxes;"
    "ALTER TABLE sandboxes1 RENAME TO sandboxes;"
    "CREATE TABLE secrets1 ("
    "  account TEXT NOT NULL,"
    "  name TEXT NOT NULL,"
    "  sealed BLOB NOT NULL,"
    "  rules TEXT NOT NULL,"
    "  created_ms INTEGER NOT NULL,"
    "  updated_ms INTEGER NOT NULL,"
    "  PRIMARY KEY (account, name));"
    "INSERT INTO secrets1 SELECT 'default',name,sealed,rules,created_ms,updated_ms FROM secrets;"
    "DROP TABLE secrets;"
    "ALTER TABLE secrets1 RENAME TO secrets;"
    "ALTER TABLE placeholders ADD COLUMN account TEXT NOT NULL DEFAULT 'default';",
    /* 2: network.allow [] now means no host, and no allow field any public host
     * (issue 23): the rows written before, where [] meant any public host, lose the
     * empty list so that they keep their meaning. */
    "UPDATE sandboxes SET spec = json_remove(spec, '$.network.allow') "
    "WHERE CASE WHEN json_valid(spec) THEN json_type(spec, '$.network.allow') = 'array' "
    "AND json_array_length(spec, '$.network.allow') = 0 ELSE 0 END;",
    /* 3: security events are kept apart from routine ones, each class up to its
     * own cap (the kinds are server/events.c's; these were security then). */
    "ALTER TABLE events ADD COLUMN security INTEGER NOT NULL DEFAULT 0;"
    "UPDATE events SET security=1 WHERE kind IN "
    "  ('secret.misdirected','secret.reflected','mcp.refused');"
    "CREATE INDEX events_by_class ON events(sandbox, security, seq);",
    /* 4: connections (docs/login.md): a key of its own for each machine a person
     * approved with `runtime login`, revocable alone; only its SHA-256 is kept. */
    "CREATE TABLE IF NOT EXISTS connections ("
    "  id TEXT PRIMARY KEY,"
    "  account TEXT NOT NULL,"
    "  key_hash TEXT NOT NULL UNIQUE,"
    "  agent_name TEXT NOT NULL,"
    "  machine TEXT NOT NULL,"
    "  created_ms INTEGER NOT NULL);",
};

static int db_error(sqlite3 *db, err_t *err, const char *what)
{
    int code = sqlite3_extended_errcode(db);
    int r = (code & 0xff) == SQLITE_CONSTRAINT ? -EEXIST : -EIO;
    return err_set(err, r, "%s: %s", what, sqlite3_errmsg(db));
}

static int user_version(struct store *st)
{
    sqlite3_stmt *stmt = NULL;
    int v = -1;
    if (sqlite3_prepare_v2(st->db, "PRAGMA user_version", -1, &stmt, NULL) == SQLITE_OK &&
        sqlite3_step(stmt) == SQLITE_ROW)
        v = sqlite3_column_int(stmt, 0);
    sqlite3_finalize(stmt);
    return v;
}

/* Brings the schema up to date. BEGIN IMMEDIATE: of two connections opening at
 * once (the server's and the writer's), one migrates and the other then sees
 * the new version. */
static int migrate(struct store *st, const char *path, err_t *err)
{
    for (;;) {
        char *msg = NULL;
        if (sqlite3_exec(st->db, "BEGIN IMMEDIATE", NULL, NULL, &msg) != SQLITE_OK) {
            int r = err_set(err, -EIO, "cannot update the database %s: %s", path, msg);
            sqlite3_free(msg);
            return r;
        }
        int v = user_version(st), latest = (int)ARRAY_LEN(migrations);
        if (v == latest)
            return sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK
                       ? 0
                       : err_set(err, -EIO, "cannot read the database %s", path);
        if (v < 0 || v > latest) {
            sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
            return err_set(err, -EPROTO,
                           "the database %s has schema %d, which this runtimed does not know "
                           "(it knows up to %d); run the runtimed that made it",
                           path, v, latest);
        }
        char bump[64];
        snprintf(bump, sizeof bump, "PRAGMA user_version=%d", v + 1);
        if (sqlite3_exec(st->db, migrations[v], NULL, NULL, &msg) != SQLITE_OK ||
            sqlite3_exec(st->db, bump, NULL, NULL, &msg) != SQLITE_OK ||
            sqlite3_exec(st->db, "COMMIT", NULL, NULL, &msg) != SQLITE_OK) {
            int r = err_set(err, -EIO, "cannot update the database %s to schema %d: %s", path,
                            v + 1, msg);
            sqlite3_free(msg);
            sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
            return r;
        }
        log_info("database %s updated to schema %d", path, v + 1);
    }
}

int store_open(const char *path, struct store **out, err_t *err)
{
    struct store *st = calloc(1, sizeof *st);
    if (!st) return err_set(err, -ENOMEM, "out of memory");
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
    if (sqlite3_open_v2(path, &st->db, flags, NULL) != SQLITE_OK) {
        int r = err_set(err, -EIO,
                        "cannot open the database %s: %s; the daemon's "
                        "unprivileged server must reach it: every directory above the state "
                        "directory needs search (x) permission for others",
                        path, st->db ? sqlite3_errmsg(st->db) : "out of memory");
        store_close(st);
        return r;
    }
    sqlite3_busy_timeout(st->db, 5000);
    char *msg = NULL;
    if (sqlite3_exec(st->db, schema, NULL, NULL, &msg) != SQLITE_OK) {
        int r = err_set(err, -EIO, "cannot prepare the database %s: %s", path, msg);
        sqlite3_free(msg);
        store_close(st);
        return r;
    }
    int r = migrate(st, path, err);
    if (r < 0) {
        store_close(st);
        return r;
    }
    *out = st;
    return 0;
}

void store_checkpoint(struct store *st)
{
    sqlite3_wal_checkpoint_v2(st->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
}

void store_close(struct store *st)
{
    if (!st) return;
    sqlite3_close(st->db);
    free(st);
}

/* Runs one statement with text/int parameters given as a format: 't' text, 'i' int64. */
static int run(struct store *st, err_t *err, const char *what, const char *sql, const char *fmt,
               ...)
{
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v2(st->db, sql, -1, &stmt, NULL) != SQLITE_OK)
        return db_error(st->db, err, what);
    va_list ap;
    va_start(ap, fmt);
    for (int i = 0; fmt[i]; i++) {
        if (fmt[i] == 't') {
            const char *s = va_arg(ap, const char *);
            if (s)
                sqlite3_bind_text(stmt, i + 1, s, -1, SQLITE_TRANSIENT);
            else
                sqlite3_bind_null(stmt, i + 1);
        } else {
            sqlite3_bind_int64(stmt, i + 1, va_arg(ap, int64_t));
        }
    }
    va_end(ap);
    int rc = sqlite3_step(stmt);
    int r = rc == SQLITE_DONE ? 0 : db_error(st->db, err, what);
    sqlite3_finalize(stmt);
    return r;
}

/* Commits that nobody is answered after may skip the fsync (the WAL stays
 * consistent; a power cut may lose them): on for them, then back to FULL. */
static void without_fsync(struct store *st, bool on)
{
    run(st, NULL, "setting the sync mode",
        on ? "PRAGMA synchronous=NORMAL" : "PRAGMA synchronous=FULL", "");
}

int store_set_read_only(struct store *st, err_t *err)
{
    return run(st, err, "making the server's connection read-only", "PRAGMA query_only=ON", "");
}

int store_begin(struct store *st, err_t *err)
{
    return run(st, err, "starting a transaction", "BEGIN IMMEDIATE", "");
}

int store_end(struct store *st, int r, err_t *err)
{
    if (r < 0) {
        run(st, NULL, "rolling back", "ROLLBACK", "");
        return r;
    }
    return run(st, err, "committing", "COMMIT", "");
}

int store_sandbox_insert(struct store *st, const struct store_sandbox *sb, err_t *err)
{
    return run(st, err, "saving the sandbox",
               "INSERT INTO sandboxes(id,account,name,slot,status,created_ms,spec) "
               "VALUES(?,?,?,?,?,?,?)",
               "tttitit", sb->id, sb->account, sb->name, (int64_t)sb->slot, sb->status,
               sb->created_ms, sb->spec_json);
}

int store_sandbox_set_status(struct store *st, const char *id, const char *status, err_t *err)
{
    return run(st, err, "saving the sandbox status", "UPDATE sandboxes SET status=? WHERE id=?",
               "tt", status, id);
}

int store_sandbox_delete(struct store *st, const char *id, err_t *err)
{
    return run(st, err, "deleting the sandbox", "DELETE FROM sandboxes WHERE id=?", "t", id);
}

static char *dup_col(sqlite3_stmt *stmt, int col)
{
    const unsigned char *t = sqlite3_column_text(stmt, col);
    return t ? strdup((const char *)t) : NULL;
}

int store_sandbox_each(struct store *st, int (*fn)(const struct store_sandbox *sb, void *arg),
                       void *arg, err_t *err)
{
    sqlite3_stmt *stmt = NULL;
    const char *sql = "SELECT id,name,slot,status,created_ms,spec,account FROM sandboxes "
                      "ORDER BY created_ms, id";
    if (sqlite3_prepare_v2(st->db, sql, -1, &stmt, NULL) != SQLITE_OK)
        return db_error(st->db, err, "reading sandboxes");
    int r = 0, rc;
    while (r == 0 && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        struct store_sandbox sb = {0};
        const unsigned char *id = sqlite3_column_text(stmt, 0);
        str_copy(sb.id, sizeof sb.id, id ? (const char *)id : "");
        sb.name = dup_col(stmt, 1);
        sb.slot = (uint32_t)sqlite3_column_int64(stmt, 2);
        const unsigned char *status = sqlite3_column_text(stmt, 3);
        str_copy(sb.status, sizeof sb.status, status ? (const char *)status : "failed");
        sb.created_ms = sqlite3_column_int64(stmt, 4);
        sb.spec_json = dup_col(stmt, 5);
        const unsigned char *account = sqlite3_column_text(stmt, 6);
        str_copy(sb.account, sizeof sb.account, account ? (const char *)account : "default");
        r = fn(&sb, arg);
        store_sandbox_clear(&sb);
    }
    if (r == 0 && rc != SQLITE_DONE) r = db_error(st->db, err, "reading sandboxes");
    sqlite3_finalize(stmt);
    return r;
}

void store_sandbox_clear(struct store_sandbox *sb)
{
    free(sb->name);
    free(sb->spec_json);
    sb->name = sb->spec_json = NULL;
}

int store_sandbox_set_spec(struct store *st, const char *id, const char *spec_json, err_t *err)
{
    /* The name column follows the settings' name (a rename), NULL when it has none. */
    return run(st, err, "saving the sandbox settings",
               "UPDATE sandboxes SET spec=?1, name=NULLIF(json_extract(?1, '$.name'), '') "
               "WHERE id=?2",
               "tt", spec_json, id);
}

int store_events_add(struct store *st, const char *sandbox, const struct store_event *ev, size_t n,
                     err_t *err)
{
    /* Events are not acknowledged to anyone: commit them without an fsync
     * (WAL stays consistent; a power cut may drop the last batch), so the
     * event loop that also moves proxied bytes is not held up by the disk. */
    without_fsync(st, true);
    int r = run(st, err, "saving events", "BEGIN", "");
    bool classes[2] = {false, false};
    for (size_t i = 0; r == 0 && i < n; i++) {
        r = run(st, err, "saving an event",
                "INSERT INTO events(sandbox,time_ms,kind,fields,security) VALUES(?,?,?,?,?)",
                "titti", sandbox, ev[i].time_ms, ev[i].kind, ev[i].fields_json,
                (int64_t)ev[i].security);
        classes[ev[i].security] = true;
    }
    for (int c = 0; r == 0 && c < 2; c++) /* each class the batch added to, to its own cap */
        if (classes[c])
            r = run(st, err, "dropping old events",
                    "DELETE FROM events WHERE sandbox=?1 AND security=?3 AND seq <= "
                    "(SELECT seq FROM events WHERE sandbox=?1 AND security=?3 "
                    "ORDER BY seq DESC LIMIT 1 OFFSET ?2)",
                    "tii", sandbox, (int64_t)(c ? STORE_SECURITY_EVENTS_KEPT : STORE_EVENTS_KEPT),
                    (int64_t)c);
    run(st, NULL, "saving events", r == 0 ? "COMMIT" : "ROLLBACK", "");
    without_fsync(st, false);
    return r;
}

int store_events_each(struct store *st, const char *sandbox, int64_t after, int limit,
                      int (*fn)(const struct store_event *ev, void *arg), void *arg, err_t *err)
{
    sqlite3_stmt *stmt = NULL;
    const char *sql = "SELECT seq,time_ms,kind,fields FROM events WHERE sandbox=? AND seq>? "
                      "ORDER BY seq LIMIT ?";
    if (sqlite3_prepare_v2(st->db, sql, -1, &stmt, NULL) != SQLITE_OK)
        return db_error(st->db, err, "reading events");
    sqlite3_bind_text(stmt, 1, sandbox, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(stmt, 2, after);
    sqlite3_bind_int(stmt, 3, limit);
    int r = 0, rc;
    while (r == 0 && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        struct store_event ev = {
            .seq = sqlite3_column_int64(stmt, 0),
            .time_ms = sqlite3_column_int64(stmt, 1),
            .kind = (const char *)sqlite3_column_text(stmt, 2),
            .fields_json = (const char *)sqlite3_column_text(stmt, 3),
        };
        r = fn(&ev, arg);
    }
    if (r == 0 && rc != SQLITE_DONE) r = db_error(st->db, err, "reading events");
    sqlite3_finalize(stmt);
    return r;
}

int store_events_delete(struct store *st, const char *sandbox, err_t *err)
{
    return run(st, err, "deleting events", "DELETE FROM events WHERE sandbox=?", "t", sandbox);
}

/* Without an fsync (each DNS answer for a new name waits for this write, on the
 * event loop). A name must outlive a crash of the daemon, whose sandboxes keep
 * running and keep the address: the WAL in the page cache does. A power cut
 * may lose it, and takes the sandboxes' processes, and their addresses, too. */
int store_names_put(struct store *st, const char *sandbox, uint32_t slot, uint64_t seq,
                    const char *name, err_t *err)
{
    without_fsync(st, true);
    int r = run(st, err, "saving a name",
                "INSERT OR REPLACE INTO egress_names(sandbox,slot,seq,name) VALUES(?,?,?,?)",
                "tiit", sandbox, (int64_t)slot, (int64_t)seq, name);
    without_fsync(st, false);
    return r;
}

int store_names_each(struct store *st, const char *sandbox,
                     void (*fn)(uint32_t slot, uint64_t seq, const char *name, void *arg),
                     void *arg, err_t *err)
{
    sqlite3_stmt *stmt = NULL;
    const char *sql = "SELECT slot,seq,name FROM egress_names WHERE sandbox=?";
    if (sqlite3_prepare_v2(st->db, sql, -1, &stmt, NULL) != SQLITE_OK)
        return db_error(st->db, err, "reading names");
    sqlite3_bind_text(stmt, 1, sandbox, -1, SQLITE_TRANSIENT);
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        const unsigned char *name = sqlite3_column_text(stmt, 2);
        if (name)
            fn((uint32_t)sqlite3_column_int64(stmt, 0), (uint64_t)sqlite3_column_int64(stmt, 1),
               (const char *)name, arg);
    }
    int r = rc == SQLITE_DONE ? 0 : db_error(st->db, err, "reading names");
    sqlite3_finalize(stmt);
    return r;
}

int store_names_delete(struct store *st, const char *sandbox, err_t *err)
{
    return run(st, err, "deleting names", "DELETE FROM egress_names WHERE sandbox=?", "t", sandbox);
}

int store_secret_put(struct store *st, const struct store_secret *s, err_t *err)
{
    sqlite3_stmt *stmt = NULL;
    const char *sql =
        "INSERT INTO secrets(name,sealed,rules,created_ms,updated_ms,account) "
        "VALUES(?,?,?,?,?,?) ON CONFLICT(account,name) DO UPDATE SET "
        "sealed=excluded.sealed, rules=excluded.rules, updated_ms=excluded.updated_ms";
    if (sqlite3_prepare_v2(st->db, sql, -1, &stmt, NULL) != SQLITE_OK)
        return db_error(st->db, err, "saving the secret");
    sqlite3_bind_text(stmt, 1, s->name, -1, SQLITE_TRANSIENT);
    sqlite3_bind_blob(stmt, 2, s->sealed, (int)s->sealed_len, SQLITE_TRANSIENT);
    sqlite3_bind_text(stmt, 3, s->rules_json, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(stmt, 4, s->created_ms);
    sqlite3_bind_int64(stmt, 5, s->updated_ms);
    sqlite3_bind_text(stmt, 6, s->account, -1, SQLITE_TRANSIENT);
    int r = sqlite3_step(stmt) == SQLITE_DONE ? 0 : db_error(st->db, err, "saving the secret");
    sqlite3_finalize(stmt);
    return r;
}

int store_secret_delete(struct store *st, const char *account, const char *name, err_t *err)
{
    return run(st, err, "deleting the secret", "DELETE FROM secrets WHERE account=? AND name=?",
               "tt", account, name);
}

int store_secrets_each(struct store *st, void (*fn)(const struct store_secret *s, void *arg),
                       void *arg, err_t *err)
{
    sqlite3_stmt *stmt = NULL;
    const char *sql =
        "SELECT name,sealed,rules,created_ms,updated_ms,account FROM secrets ORDER BY name";
    if (sqlite3_prepare_v2(st->db, sql, -1, &stmt, NULL) != SQLITE_OK)
        return db_error(st->db, err, "reading secrets");
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        struct store_secret s = {
            .name = (const char *)sqlite3_column_text(stmt, 0),
            .sealed = sqlite3_column_blob(stmt, 1),
            .sealed_len = (size_t)sqlite3_column_bytes(stmt, 1),
            .rules_json = (const char *)sqlite3_column_text(stmt, 2),
            .created_ms = sqlite3_column_int64(stmt, 3),
            .updated_ms = sqlite3_column_int64(stmt, 4),
            .account = (const char *)sqlite3_column_text(stmt, 5),
        };
        if (s.name && s.sealed && s.rules_json && s.account) fn(&s, arg);
    }
    int r = rc == SQLITE_DONE ? 0 : db_error(st->db, err, "reading secrets");
    sqlite3_finalize(stmt);
    return r;
}

int store_placeholder_put(struct store *st, const struct store_placeholder *p, err_t *err)
{
    return run(st, err, "saving a placeholder",
               "INSERT OR REPLACE INTO placeholders(sandbox,account,secret,placeholder) "
               "VALUES(?,?,?,?)",
               "tttt", p->sandbox, p->account, p->secret, p->placeholder);
}

int store_placeholders_each(struct store *st,
                            void (*fn)(const struct store_placeholder *p, void *arg), void *arg,
                            err_t *err)
{
    sqlite3_stmt *stmt = NULL;
    const char *sql = "SELECT sandbox,account,secret,placeholder FROM placeholders";
    if (sqlite3_prepare_v2(st->db, sql, -1, &stmt, NULL) != SQLITE_OK)
        return db_error(st->db, err, "reading placeholders");
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        struct store_placeholder p = {
            .sandbox = (const char *)sqlite3_column_text(stmt, 0),
            .account = (const char *)sqlite3_column_text(stmt, 1),
            .secret = (const char *)sqlite3_column_text(stmt, 2),
            .placeholder = (const char *)sqlite3_column_text(stmt, 3),
        };
        if (p.sandbox && p.account && p.secret && p.placeholder) fn(&p, arg);
    }
    int r = rc == SQLITE_DONE ? 0 : db_error(st->db, err, "reading placeholders");
    sqlite3_finalize(stmt);
    return r;
}

/* Whether the query (one text parameter) finds a row: a read, which never waits
 * for the writer's thread to let go of the write lock. */
static bool any_row(struct store *st, const char *sql, const char *key)
{
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v2(st->db, sql, -1, &stmt, NULL) != SQLITE_OK) return true;
    sqlite3_bind_text(stmt, 1, key, -1, SQLITE_TRANSIENT);
    bool found = sqlite3_step(stmt) != SQLITE_DONE; /* a row, or an error: try the delete */
    sqlite3_finalize(stmt);
    return found;
}

int store_placeholders_delete(struct store *st, const char *sandbox, const char *account,
                              const char *secret, err_t *err)
{
    /* Every removed sandbox comes here, most with no placeholders: they take no
     * write lock (which the loop would wait for while the writer holds it). */
    if (sandbox && !any_row(st, "SELECT 1 FROM placeholders WHERE sandbox=? LIMIT 1", sandbox))
        return 0;
    if (sandbox)
        return run(st, err, "deleting placeholders", "DELETE FROM placeholders WHERE sandbox=?",
                   "t", sandbox);
    return run(st, err, "deleting placeholders",
               "DELETE FROM placeholders WHERE secret=? AND account=?", "tt", secret, account);
}

int store_mcp_put(struct store *st, const char *sandbox, const char *state_json, err_t *err)
{
    return run(st, err, "saving the MCP servers",
               "INSERT INTO mcp(sandbox,state) VALUES(?,?) ON CONFLICT(sandbox) DO UPDATE SET "
               "state=excluded.state",
               "tt", sandbox, state_json);
}

/* The text of the one column the query selects for key; -ENOENT when no row has it. */
static int get_text(struct store *st, const char *sql, const char *key, char **out,
                    const char *what, err_t *err)
{
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v2(st->db, sql, -1, &stmt, NULL) != SQLITE_OK)
        return db_error(st->db, err, what);
    sqlite3_bind_text(stmt, 1, key, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(stmt), r = 0;
    if (rc == SQLITE_ROW) {
        const unsigned char *text = sqlite3_column_text(stmt, 0);
        *out = strdup(text ? (const char *)text : "");
        if (!*out) r = err_set(err, -ENOMEM, "out of memory");
    } else {
        r = rc == SQLITE_DONE ? -ENOENT : db_error(st->db, err, what);
    }
    sqlite3_finalize(stmt);
    return r;
}

int store_mcp_get(struct store *st, const char *sandbox, char **state_json, err_t *err)
{
    return get_text(st, "SELECT state FROM mcp WHERE sandbox=?", sandbox, state_json,
                    "reading the MCP servers", err);
}

int store_mcp_delete(struct store *st, const char *sandbox, err_t *err)
{
    return run(st, err, "deleting the MCP servers", "DELETE FROM mcp WHERE sandbox=?", "t",
               sandbox);
}

int store_usage_put(struct store *st, const char *sandbox, const char *json, err_t *err)
{
    return run(st, err, "saving usage",
               "INSERT INTO usage(sandbox,created_ms,state) VALUES(?,?,?) ON CONFLICT(sandbox) "
               "DO UPDATE SET state=excluded.state",
               "tit", sandbox, now_unix_ms(), json);
}

int store_usage_get(struct store *st, const char *sandbox, char **json, err_t *err)
{
    return get_text(st, "SELECT state FROM usage WHERE sandbox=?", sandbox, json, "reading usage",
                    err);
}

int store_usage_each(struct store *st, void (*fn)(const char *sandbox, const char *json, void *arg),
                     void *arg, err_t *err)
{
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v2(st->db, "SELECT sandbox,state FROM usage ORDER BY created_ms", -1, &stmt,
                           NULL) != SQLITE_OK)
        return db_error(st->db, err, "reading usage");
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW)
        fn((const char *)sqlite3_column_text(stmt, 0), (const char *)sqlite3_column_text(stmt, 1),
           arg);
    int r = rc == SQLITE_DONE ? 0 : db_error(st->db, err, "reading usage");
    sqlite3_finalize(stmt);
    return r;
}

int store_account_put(struct store *st, const struct store_account *a, err_t *err)
{
    return run(st, err, "saving the account",
               "INSERT INTO accounts(name,key_hash,key2_hash,max_sandboxes,max_memory_mib,"
               "created_ms,removing) VALUES(?,?,?,?,?,?,?) ON CONFLICT(name) DO UPDATE SET "
               "key_hash=excluded.key_hash, key2_hash=excluded.key2_hash, "
               "max_sandboxes=excluded.max_sandboxes, max_memory_mib=excluded.max_memory_mib, "
               "removing=excluded.removing",
               "tttiiii", a->name, a->key_hash, a->key2_hash, a->max_sandboxes, a->max_memory_mib,
               a->created_ms, (int64_t)a->removing);
}

int store_accounts_each(struct store *st, void (*fn)(const struct store_account *a, void *arg),
                        void *arg, err_t *err)
{
    sqlite3_stmt *stmt = NULL;
    const char *sql = "SELECT name,key_hash,key2_hash,max_sandboxes,max_memory_mib,created_ms,"
                      "removing FROM accounts ORDER BY created_ms";
    if (sqlite3_prepare_v2(st->db, sql, -1, &stmt, NULL) != SQLITE_OK)
        return db_error(st->db, err, "reading accounts");
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        struct store_account a = {
            .name = (const char *)sqlite3_column_text(stmt, 0),
            .key_hash = (const char *)sqlite3_column_text(stmt, 1),
            .key2_hash = (const char *)sqlite3_column_text(stmt, 2),
            .max_sandboxes = sqlite3_column_int64(stmt, 3),
            .max_memory_mib = sqlite3_column_int64(stmt, 4),
            .created_ms = sqlite3_column_int64(stmt, 5),
            .removing = sqlite3_column_int64(stmt, 6) != 0,
        };
        if (a.name && a.key_hash) fn(&a, arg);
    }
    int r = rc == SQLITE_DONE ? 0 : db_error(st->db, err, "reading accounts");
    sqlite3_finalize(stmt);
    return r;
}

/* Its secrets, usage rows and the account itself, in one transaction; its
 * sandboxes (with their events, names, placeholders and MCP state) are removed
 * before, one by one, as rm does. */
int store_account_delete(struct store *st, const char *name, err_t *err)
{
    int r = run(st, err, "removing the account", "BEGIN", "");
    if (r == 0)
        r = run(st, err, "removing the account's secrets", "DELETE FROM secrets WHERE account=?",
                "t", name);
    if (r == 0)
        r = run(st, err, "removing the account's placeholders",
                "DELETE FROM placeholders WHERE account=?", "t", name);
    if (r == 0)
        r = run(st, err, "removing the account's usage",
                "DELETE FROM usage WHERE json_extract(state,'$.account')=?", "t", name);
    if (r == 0)
        r = run(st, err, "removing the account's connections",
                "DELETE FROM connections WHERE account=?", "t", name);
    if (r == 0)
        r = run(st, err, "removing the account", "DELETE FROM accounts WHERE name=?", "t", name);
    run(st, NULL, "removing the account", r == 0 ? "COMMIT" : "ROLLBACK", "");
    return r;
}

int store_connection_put(struct store *st, const struct store_connection *c, err_t *err)
{
    return run(st, err, "saving the connection",
               "INSERT INTO connections(id,account,key_hash,agent_name,machine,created_ms) "
               "VALUES(?,?,?,?,?,?)",
               "ttttti", c->id, c->account, c->key_hash, c->agent_name, c->machine, c->created_ms);
}

int store_connection_delete(struct store *st, const char *id, err_t *err)
{
    return run(st, err, "removing the connection", "DELETE FROM connections WHERE id=?", "t", id);
}

int store_connections_each(struct store *st,
                           void (*fn)(const struct store_connection *c, void *arg), void *arg,
                           err_t *err)
{
    sqlite3_stmt *stmt = NULL;
    const char *sql = "SELECT id,account,key_hash,agent_name,machine,created_ms FROM connections "
                      "ORDER BY created_ms";
    if (sqlite3_prepare_v2(st->db, sql, -1, &stmt, NULL) != SQLITE_OK)
        return db_error(st->db, err, "reading connections");
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        struct store_connection c = {
            .id = (const char *)sqlite3_column_text(stmt, 0),
            .account = (const char *)sqlite3_column_text(stmt, 1),
            .key_hash = (const char *)sqlite3_column_text(stmt, 2),
            .agent_name = (const char *)sqlite3_column_text(stmt, 3),
            .machine = (const char *)sqlite3_column_text(stmt, 4),
            .created_ms = sqlite3_column_int64(stmt, 5),
        };
        if (c.id && c.account && c.key_hash && c.agent_name && c.machine) fn(&c, arg);
    }
    int r = rc == SQLITE_DONE ? 0 : db_error(st->db, err, "reading connections");
    sqlite3_finalize(stmt);
    return r;
}
