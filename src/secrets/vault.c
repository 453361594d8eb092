/* The vault: sealed values and rules in memory and in the store, and the
 * placeholders each sandbox sees. Values are opened only when a request needs
 * them and wiped at once (secrets_release). */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../http/http.h"
#include "../policy/policy.h"
#include "../store/store.h"
#include "secrets.h"

/* A sandbox that had the secret swapped in, and when last: what the dashboard shows of
 * where a secret goes. In memory only, the most recent first. */
#define SECRET_USES_KEPT 8
struct secret_use {
    char sandbox[32];
    int64_t at_ms;
};

struct secret_entry {
    char account[SECRETS_ACCOUNT_MAX];
    char name[SECRET_NAME_MAX + 1];
    uint8_t *sealed;
    size_t sealed_len;
    json_t *spec;        /* secret_spec_parse's: hosts, rules, header, only, env, placeholder */
    struct policy hosts; /* spec's hosts, compiled once when they are set (compile_hosts) */
    bool hosts_ok;       /* compiled, and at least one: else no host is allowed */
    int64_t created_ms, updated_ms;
    uint64_t version; /* the put that made its value: an undo applies only to its own */
    struct secret_use uses[SECRET_USES_KEPT];
    unsigned n_uses;
    struct secret_entry *next;
};

struct placeholder_entry {
    char placeholder[PLACEHOLDER_LEN + 1];
    char sandbox[SECRETS_SANDBOX_ID_MAX];
    char account[SECRETS_ACCOUNT_MAX]; /* the sandbox's, and so the secret's */
    char secret[SECRET_NAME_MAX + 1];
    struct placeholder_entry *next;
};

struct vault {
    struct store_writer *writer; /* every change; the store is read once, at open */
    struct vault_hooks hooks;
    uint8_t key[SECRETS_KEY_LEN];
    struct secret_entry *secrets;
    struct placeholder_entry *placeholders;
    uint64_t puts; /* ever: each put's version */
};

static struct secret_entry *find_secret(const struct vault *v, const char *account,
                                        const char *name)
{
    for (struct secret_entry *s = v->secrets; s; s = s->next)
        if (strcmp(s->account, account) == 0 && strcmp(s->name, name) == 0) return s;
    return NULL;
}

static size_t count_secrets(const struct vault *v, const char *account)
{
    size_t n = 0;
    for (struct secret_entry *s = v->secrets; s; s = s->next)
        n += strcmp(s->account, account) == 0;
    return n;
}

/* The associated data a value is sealed with: its name, and its account's but
 * for "default" (values sealed before accounts existed open as they were). */
static void sealed_as(const char *account, const char *name, char out[SECRETS_AD_MAX])
{
    if (strcmp(account, "default") == 0)
        snprintf(out, SECRETS_AD_MAX, "%s", name);
    else
        snprintf(out, SECRETS_AD_MAX, "%s/%s", account, name);
}

/* Compiles s->spec's hosts into s->hosts: each intercepted request checks them, and a
 * policy built there for every one cost a parse of every rule. Called wherever
 * s->spec is set. */
static void compile_hosts(struct secret_entry *s)
{
    if (s->hosts_ok) policy_clear(&s->hosts);
    json_t *hosts = json_object_get(s->spec, "hosts");
    size_t n = json_array_size(hosts);
    if (n > SECRET_RULES_MAX_LEGACY) n = SECRET_RULES_MAX_LEGACY;
    const char *list[SECRET_RULES_MAX_LEGACY];
    for (size_t i = 0; i < n; i++)
        list[i] = json_string_value(json_array_get(hosts, i));
    s->hosts_ok = n > 0 && policy_build(true, true, list, n, &s->hosts, NULL) == 0;
}

static void free_secret(struct secret_entry *s)
{
    free(s->sealed);
    json_decref(s->spec);
    if (s->hosts_ok) policy_clear(&s->hosts);
    free(s);
}

/* The variable a sandbox finds the placeholder in: env, or the secret's name. */
static const char *env_of(const struct secret_entry *s)
{
    const char *env = json_string_value(json_object_get(s->spec, "env"));
    return env ? env : s->name;
}

/* The secret's own placeholder (the one its answers show), or "". */
static const char *own_placeholder(const struct secret_entry *s)
{
    const char *ph = json_string_value(json_object_get(s->spec, "placeholder"));
    return ph ? ph : "";
}

struct vault_write;
static int save(struct vault *v, struct secret_entry *s, struct vault_write *w, err_t *err);
static struct vault_write *write_new(struct vault *v, vault_saved_fn *done, void *arg, err_t *err);

static void migrated(const err_t *err, json_t *answer, bool created, void *arg)
{
    if (err) log_warn("a secret stored before rules could not be written again: %s", err->msg);
    json_decref(answer);
}

/* A row stored before rules: given its own placeholder and written in the
 * current form (its globs kept), so that the placeholder survives restarts. */
static void migrate(struct vault *v, struct secret_entry *s)
{
    char ph[PLACEHOLDER_LEN + 1];
    secrets_placeholder(ph);
    json_object_set_new(s->spec, "placeholder", json_string(ph));
    err_t err = {0};
    struct vault_write *w = write_new(v, migrated, NULL, &err);
    if (w && save(v, s, w, &err) < 0) free(w);
}

static void load_secret(const struct store_secret *row, void *arg)
{
    struct vault *v = arg;
    struct secret_entry *s = calloc(1, sizeof *s);
    json_error_t jerr;
    if (!s || str_copy(s->name, sizeof s->name, row->name) < 0 ||
        str_copy(s->account, sizeof s->account, row->account) < 0 ||
        !(s->sealed = malloc(row->sealed_len))) {
        free(s);
        return;
    }
    memcpy(s->sealed, row->sealed, row->sealed_len);
    s->sealed_len = row->sealed_len;
    /* Read as a put's body is: a garbled rule must not widen where the value may go
     * (a "methods" that is not a list would limit nothing). Unreadable: it goes nowhere. */
    json_t *stored = json_loads(row->rules_json, 0, &jerr);
    err_t err = {0};
    s->spec = stored ? secret_spec_load(stored, &err) : NULL;
    bool legacy = s->spec && !json_object_get(s->spec, "placeholder");
    if (!s->spec) {
        log_error("secret %s of account %s: its rules in the store cannot be read (%s); it is "
                  "sent to no host until it is set again",
                  s->name, s->account, stored ? err.msg : jerr.text);
        s->spec = json_pack("{s:[]}", "hosts");
    }
    json_decref(stored);
    compile_hosts(s);
    if (legacy) migrate(v, s);
    s->created_ms = row->created_ms;
    s->updated_ms = row->updated_ms;
    s->next = v->secrets;
    v->secrets = s;
}

static void load_placeholder(const struct store_placeholder *row, void *arg)
{
    struct vault *v = arg;
    struct placeholder_entry *p = calloc(1, sizeof *p);
    if (!p || str_copy(p->placeholder, sizeof p->placeholder, row->placeholder) < 0 ||
        str_copy(p->sandbox, sizeof p->sandbox, row->sandbox) < 0 ||
        str_copy(p->account, sizeof p->account, row->account) < 0 ||
        str_copy(p->secret, sizeof p->secret, row->secret) < 0) {
        free(p);
        return;
    }
    p->next = v->placeholders;
    v->placeholders = p;
}

int vault_open(struct store *store, struct store_writer *writer, const uint8_t key[SECRETS_KEY_LEN],
               const struct vault_hooks *hooks, struct vault **out, err_t *err)
{
    struct vault *v = calloc(1, sizeof *v);
    if (!v) return err_set(err, -ENOMEM, "out of memory");
    v->writer = writer;
    v->hooks = *hooks;
    memcpy(v->key, key, SECRETS_KEY_LEN);
    int r = store_secrets_each(store, load_secret, v, err);
    if (r == 0) r = store_placeholders_each(store, load_placeholder, v, err);
    if (r < 0) {
        vault_close(v);
        return r;
    }
    *out = v;
    return 0;
}

void vault_close(struct vault *v)
{
    if (!v) return;
    while (v->secrets) {
        struct secret_entry *s = v->secrets;
        v->secrets = s->next;
        free_secret(s);
    }
    while (v->placeholders) {
        struct placeholder_entry *p = v->placeholders;
        v->placeholders = p->next;
        free(p);
    }
    explicit_bzero(v->key, sizeof v->key);
    free(v);
}

/* Removes from memory the placeholders of a sandbox, or (sandbox NULL) those of
 * an account's secret, or (secret NULL too) all of the account's; how many. */
static size_t drop_placeholders(struct vault *v, const char *sandbox, const char *account,
                                const char *secret)
{
    size_t n = 0;
    for (struct placeholder_entry **pp = &v->placeholders; *pp;) {
        struct placeholder_entry *p = *pp;
        bool of_account = account && strcmp(p->account, account) == 0;
        if ((sandbox && strcmp(p->sandbox, sandbox) == 0) ||
            (of_account && (!secret || strcmp(p->secret, secret) == 0))) {
            *pp = p->next;
            free(p);
            n++;
        } else {
            pp = &p->next;
        }
    }
    return n;
}

/* Memory holds every placeholder of the store, and each new one before its write
 * is queued: a sandbox with none in memory (most) has none to delete. */
void vault_forget_sandbox(struct vault *v, const char *sandbox)
{
    if (drop_placeholders(v, sandbox, NULL, NULL) > 0)
        store_writer_placeholders_delete(v->writer, sandbox);
}

/* The answer about a secret: never its value. */
static json_t *secret_json(const struct secret_entry *s)
{
    char created[40], updated[40];
    time_rfc3339(created, sizeof created, s->created_ms);
    time_rfc3339(updated, sizeof updated, s->updated_ms);
    json_t *v = json_deep_copy(s->spec);
    json_object_del(v, "globs"); /* how old rows' paths are read: the store's business */
    json_object_set_new(v, "name", json_string(s->name));
    json_object_set_new(v, "env", json_string(env_of(s)));
    json_object_set_new(v, "createdAt", json_string(created));
    json_object_set_new(v, "updatedAt", json_string(updated));
    json_t *used = json_array();
    for (unsigned i = 0; i < s->n_uses; i++) {
        char at[40];
        time_rfc3339(at, sizeof at, s->uses[i].at_ms);
        json_array_append_new(used,
                              json_pack("{s:s,s:s}", "sandbox", s->uses[i].sandbox, "at", at));
    }
    json_object_set_new(v, "usedBy", used);
    return v;
}

/* sandbox had the value swapped in now: first in the secret's list of uses. */
static void note_use(struct secret_entry *s, const char *sandbox)
{
    unsigned i = 0;
    while (i < s->n_uses && strcmp(s->uses[i].sandbox, sandbox) != 0)
        i++;
    if (i == s->n_uses && s->n_uses < SECRET_USES_KEPT) s->n_uses++;
    if (i == SECRET_USES_KEPT) i--; /* the one used longest ago goes */
    memmove(&s->uses[1], &s->uses[0], i * sizeof s->uses[0]);
    str_copy(s->uses[0].sandbox, sizeof s->uses[0].sandbox, sandbox);
    s->uses[0].at_ms = now_unix_ms();
}

/* A change on its way to the disk, and what its caller is told then. */
struct vault_write {
    struct vault *v;
    vault_saved_fn *done;
    void *arg;
    json_t *answer;
    bool created;
    struct secret_entry *removed; /* a delete: put back if it cannot be written */
    struct secret_entry *before;  /* a put: what it replaced (value, rules), or its name */
    uint64_t version;             /* a put: the secret's version it made */
};

/* A put that could not be written: the secret goes back to what its row holds,
 * unless a later put changed it since (that one's write decides). */
static void undo_put(struct vault *v, struct vault_write *w)
{
    struct secret_entry *b = w->before;
    for (struct secret_entry **pp = &v->secrets; *pp; pp = &(*pp)->next) {
        struct secret_entry *s = *pp;
        if (strcmp(s->account, b->account) != 0 || strcmp(s->name, b->name) != 0) continue;
        if (s->version != w->version) return;
        if (w->created) { /* no row: no secret */
            drop_placeholders(v, NULL, s->account, s->name);
            *pp = s->next;
            free_secret(s);
            return;
        }
        uint8_t *sealed = s->sealed;
        json_t *spec = s->spec;
        s->sealed = b->sealed;
        s->sealed_len = b->sealed_len;
        s->spec = b->spec;
        compile_hosts(s);
        s->updated_ms = b->updated_ms;
        b->sealed = sealed; /* freed with b */
        b->spec = spec;
        return;
    }
}

static void on_written(int r, const err_t *err, void *arg)
{
    struct vault_write *w = arg;
    struct secret_entry *s = w->removed;
    if (r == -ECANCELED) { /* stopping: the vault may be gone */
        if (s) free_secret(s);
    } else if (r < 0 && s && !find_secret(w->v, s->account, s->name)) {
        s->next = w->v->secrets; /* its row is still there: so is it */
        w->v->secrets = s;
    } else if (s) {
        free_secret(s);
    }
    if (r < 0 && r != -ECANCELED && w->before) undo_put(w->v, w);
    if (w->before) free_secret(w->before);
    if (r == 0) {
        w->done(NULL, w->answer, w->created, w->arg);
        w->answer = NULL;
    } else if (r != -ECANCELED && w->done) {
        w->done(err, NULL, false, w->arg);
    }
    json_decref(w->answer);
    free(w);
}

static struct vault_write *write_new(struct vault *v, vault_saved_fn *done, void *arg, err_t *err)
{
    struct vault_write *w = calloc(1, sizeof *w);
    if (!w) {
        err_set(err, -ENOMEM, "out of memory");
        return NULL;
    }
    *w = (struct vault_write){.v = v, .done = done, .arg = arg};
    return w;
}

static int save(struct vault *v, struct secret_entry *s, struct vault_write *w, err_t *err)
{
    char *text = json_dumps(s->spec, JSON_COMPACT);
    if (!text) return err_set(err, -ENOMEM, "out of memory");
    struct store_secret row = {.account = s->account,
                               .name = s->name,
                               .sealed = s->sealed,
                               .sealed_len = s->sealed_len,
                               .rules_json = text,
                               .created_ms = s->created_ms,
                               .updated_ms = s->updated_ms};
    w->answer = secret_json(s);
    store_writer_secret_put(v->writer, &row, on_written, w);
    free(text);
    return 0;
}

/* Another secret of the account that puts its placeholder in the same variable. */
static const struct secret_entry *env_taken(const struct vault *v, const char *account,
                                            const char *name, const char *env)
{
    for (const struct secret_entry *o = v->secrets; o; o = o->next)
        if (strcmp(o->account, account) == 0 && strcmp(o->name, name) != 0 &&
            strcmp(env_of(o), env) == 0)
            return o;
    return NULL;
}

/* The spec of a put, its issues (every wrong field) appended to issues. Replacing
 * old, a body without only or env keeps the old one's (as Runtime Cloud: a new
 * value never widens who gets it; only: {} is every sandbox again). */
static json_t *put_spec(const struct vault *v, const char *account, const char *name, json_t *body,
                        const struct secret_entry *old, json_t *issues)
{
    json_t *spec = secret_spec_parse(body, issues);
    for (size_t i = 0; spec && old && i < 2; i++) {
        const char *key = i ? "env" : "only";
        json_t *kept = json_object_get(old->spec, key);
        if (!json_object_get(body, key) && kept) json_object_set(spec, key, kept);
    }
    const char *env = json_string_value(json_object_get(spec, "env"));
    const struct secret_entry *other = env_taken(v, account, name, env ? env : name);
    if (spec && other) {
        char msg[400];
        snprintf(msg, sizeof msg,
                 "the secret %s puts its placeholder in %s already; a variable holds one secret",
                 other->name, env ? env : name);
        json_array_append_new(issues, json_pack("{s:s,s:s}", "field", "env", "message", msg));
        json_decref(spec);
        return NULL;
    }
    return spec;
}

int vault_put(struct vault *v, const char *account, const char *name, json_t *body,
              vault_saved_fn *done, void *arg, json_t *issues, err_t *err)
{
    json_t *value = json_object_get(body, "value");
    int r = secrets_check_name(name, err);
    if (r < 0) return r;
    json_t *own_issues = issues ? json_incref(issues) : json_array();
    struct secret_entry *s = find_secret(v, account, name);
    json_t *spec = put_spec(v, account, name, body, s, own_issues);
    if (!spec) {
        /* The message holds 512 bytes: past that, the fields alone (details has why). */
        char *text = secret_issues_text(own_issues, 440);
        bool big = json_is_string(value) && json_string_length(value) > SECRET_VALUE_MAX &&
                   json_array_size(own_issues) == 1;
        r = err_set(err, big ? -EFBIG : -EINVAL, "the secret was not stored: %s",
                    text ? text : "out of memory");
        free(text);
        json_decref(own_issues);
        return r;
    }
    json_decref(own_issues);
    if (!s && count_secrets(v, account) >= SECRETS_PER_OWNER) {
        json_decref(spec);
        return err_set(err, -EAGAIN,
                       "the account %s has %d secrets, the limit of secrets per account; "
                       "remove one first",
                       account, SECRETS_PER_OWNER);
    }
    /* Replacing a secret keeps its placeholder (sandboxes and programs hold it). */
    char fresh[PLACEHOLDER_LEN + 1];
    secrets_placeholder(fresh);
    json_object_set_new(spec, "placeholder",
                        json_string(s && *own_placeholder(s) ? own_placeholder(s) : fresh));
    json_t *rules = spec;
    uint8_t *sealed;
    size_t sealed_len;
    char ad[SECRETS_AD_MAX];
    sealed_as(account, name, ad);
    r = secrets_seal(v->key, ad, json_string_value(value), json_string_length(value), &sealed,
                     &sealed_len, err);
    struct vault_write *w = r == 0 ? write_new(v, done, arg, err) : NULL;
    struct secret_entry *before = w ? calloc(1, sizeof *before) : NULL;
    if (!before) {
        if (r == 0) free(sealed);
        free(w);
        json_decref(rules);
        return r < 0 ? r : err_set(err, -ENOMEM, "out of memory");
    }
    str_copy(before->name, sizeof before->name, name);
    str_copy(before->account, sizeof before->account, account);
    w->before = before;
    w->created = s == NULL;
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s) {
            free(before);
            free(w);
            free(sealed);
            json_decref(rules);
            return err_set(err, -ENOMEM, "out of memory");
        }
        str_copy(s->name, sizeof s->name, name);
        str_copy(s->account, sizeof s->account, account);
        s->created_ms = now_unix_ms();
        s->next = v->secrets;
        v->secrets = s;
    }
    before->sealed = s->sealed; /* kept until the write is done */
    before->sealed_len = s->sealed_len;
    before->spec = s->spec;
    before->updated_ms = s->updated_ms;
    s->sealed = sealed;
    s->sealed_len = sealed_len;
    s->spec = rules;
    compile_hosts(s);
    s->updated_ms = now_unix_ms();
    w->version = s->version = ++v->puts;
    r = save(v, s, w, err);
    if (r < 0) {
        free_secret(before);
        free(w);
    }
    return r;
}

bool vault_has(const struct vault *v, const char *account, const char *name)
{
    return find_secret(v, account, name) != NULL;
}

json_t *vault_list(const struct vault *v, const char *account)
{
    json_t *arr = json_array();
    for (struct secret_entry *s = v->secrets; s; s = s->next)
        if (strcmp(s->account, account) == 0) json_array_insert_new(arr, 0, secret_json(s));
    return arr;
}

int vault_delete(struct vault *v, const char *account, const char *name, vault_saved_fn *done,
                 void *arg, err_t *err)
{
    for (struct secret_entry **pp = &v->secrets; *pp; pp = &(*pp)->next) {
        struct secret_entry *s = *pp;
        if (strcmp(s->account, account) != 0 || strcmp(s->name, name) != 0) continue;
        struct vault_write *w = write_new(v, done, arg, err);
        if (!w) return -ENOMEM;
        w->answer = json_pack("{s:s,s:b}", "name", name, "deleted", 1);
        /* Out of use now: no request swaps it in while its delete is written. */
        drop_placeholders(v, NULL, account, name);
        *pp = s->next;
        s->next = NULL;
        w->removed = s;
        store_writer_secret_delete(v->writer, account, name, on_written, w);
        return 0;
    }
    return err_set(err, -ENOENT, "no secret %s; `runtime secret list` shows them", name);
}

void vault_forget_account(struct vault *v, const char *account)
{
    drop_placeholders(v, NULL, account, NULL);
    for (struct secret_entry **pp = &v->secrets; *pp;) {
        struct secret_entry *s = *pp;
        if (strcmp(s->account, account) == 0) {
            *pp = s->next;
            free_secret(s);
        } else {
            pp = &s->next;
        }
    }
}

static const char *placeholder_of(struct vault *v, const char *sandbox, const char *secret)
{
    for (struct placeholder_entry *p = v->placeholders; p; p = p->next)
        if (strcmp(p->sandbox, sandbox) == 0 && strcmp(p->secret, secret) == 0)
            return p->placeholder;
    return NULL;
}

/* ---- which sandboxes get a secret (only) ---- */

/* Every pair of map is among labels. */
static bool labels_hold(json_t *labels, json_t *map)
{
    const char *k;
    json_t *want;
    json_object_foreach(map, k, want)
    {
        const char *have = json_string_value(json_object_get(labels, k));
        if (!have || strcmp(have, json_string_value(want)) != 0) return false;
    }
    return true;
}

/* Without only: every sandbox of the account. With it: a sandbox it names, or one
 * whose labels hold all pairs of one of its label maps (read now: labels change). */
static bool in_scope(const struct vault *v, const struct secret_entry *s, const char *sandbox)
{
    json_t *only = json_object_get(s->spec, "only");
    if (!only) return true;
    if (secret_list_has(json_object_get(only, "sandboxes"), sandbox)) return true;
    json_t *maps = json_object_get(only, "labels");
    if (!json_array_size(maps) || !v->hooks.labels) return false;
    json_t *labels = v->hooks.labels(v->hooks.arg, s->account, sandbox);
    bool ok = false;
    size_t i;
    json_t *map;
    json_array_foreach(maps, i, map) ok = ok || (labels && labels_hold(labels, map));
    json_decref(labels);
    return ok;
}

int vault_env(struct vault *v, const char *account, const char *sandbox, json_t *env, err_t *err)
{
    for (struct secret_entry *s = v->secrets; s; s = s->next) {
        if (strcmp(s->account, account) != 0) continue; /* another account's: never here */
        /* Stored before such names were refused: never in place of the variable. */
        if (secrets_name_reserved(env_of(s))) continue;
        if (!in_scope(v, s, sandbox)) continue;
        const char *ph = placeholder_of(v, sandbox, s->name);
        if (!ph) {
            struct placeholder_entry *p = calloc(1, sizeof *p);
            if (!p) return err_set(err, -ENOMEM, "out of memory");
            secrets_placeholder(p->placeholder);
            str_copy(p->sandbox, sizeof p->sandbox, sandbox);
            str_copy(p->secret, sizeof p->secret, s->name);
            str_copy(p->account, sizeof p->account, account);
            struct store_placeholder row = {.sandbox = sandbox,
                                            .account = account,
                                            .secret = s->name,
                                            .placeholder = p->placeholder};
            /* Not waited for: the program starts meanwhile. A crash before
             * the write would leave it holding a placeholder that no longer
             * swaps (its next program gets a new one). */
            store_writer_placeholder_put(v->writer, &row);
            p->next = v->placeholders;
            v->placeholders = p;
            ph = p->placeholder;
        }
        json_object_set_new(env, env_of(s), json_string(ph));
    }
    return 0;
}

const char *vault_env_name(const struct vault *v, const char *account, const char *name)
{
    const struct secret_entry *s = find_secret(v, account, name);
    return s ? env_of(s) : NULL;
}

/* ---- what the egress proxy asks (the server's struct egress_secrets) ---- */

static bool host_allowed(const struct secret_entry *s, const char *host, uint16_t port)
{
    return s->hosts_ok && policy_check(&s->hosts, host, NULL, port) == POLICY_ALLOW;
}

/* Only the secrets the sandbox holds placeholders of: its account's, and no other. */
bool vault_wants(void *arg, const char *sandbox, const char *host, uint16_t port)
{
    struct vault *v = arg;
    for (struct placeholder_entry *p = v->placeholders; p; p = p->next) {
        if (strcmp(p->sandbox, sandbox) != 0) continue;
        struct secret_entry *s = find_secret(v, p->account, p->secret);
        if (s && host_allowed(s, host, port) && in_scope(v, s, sandbox)) return true;
    }
    return false;
}

static struct placeholder_entry *find_placeholder(struct vault *v, const char *token)
{
    for (struct placeholder_entry *p = v->placeholders; p; p = p->next)
        if (str_equal_ct(p->placeholder, token)) return p;
    return NULL;
}

/* The secret whose own placeholder (its answers') token is. */
static struct secret_entry *find_own_placeholder(struct vault *v, const char *token)
{
    for (struct secret_entry *s = v->secrets; s; s = s->next)
        if (str_equal_ct(own_placeholder(s), token)) return s;
    return NULL;
}

/* The sandbox's account, as its placeholders say (NULL: it holds none). */
static const char *account_of(const struct vault *v, const char *sandbox)
{
    for (const struct placeholder_entry *p = v->placeholders; p; p = p->next)
        if (strcmp(p->sandbox, sandbox) == 0) return p->account;
    return NULL;
}

static void secret_event(struct vault *v, const char *sandbox, const char *kind, const char *secret,
                         const char *host, const char *method, const char *path, const char *reason)
{
    json_t *f = json_pack("{s:s?,s:s,s:s,s:s}", "secret", secret, "host", host, "method", method,
                          "path", path);
    if (reason) json_object_set_new(f, "reason", json_string(reason));
    v->hooks.event(v->hooks.arg, sandbox, kind, f);
    json_decref(f);
}

/* The secret token stands for in this sandbox: one of the sandbox's own
 * placeholders, or a secret's own placeholder (its answers show it) used in a
 * sandbox of the secret's account. *name: the secret's name when the sandbox may
 * be told it. NULL with why when none. */
static struct secret_entry *secret_of(struct vault *v, const char *sandbox, const char *token,
                                      const char **name, const char **why)
{
    struct placeholder_entry *p = find_placeholder(v, token);
    *name = NULL;
    if (p) {
        if (strcmp(p->sandbox, sandbox) != 0) return *why = "placeholder of another sandbox", NULL;
        *name = p->secret;
        struct secret_entry *s = find_secret(v, p->account, p->secret);
        if (!s) *why = "secret removed";
        return s;
    }
    struct secret_entry *s = find_own_placeholder(v, token);
    const char *account = account_of(v, sandbox);
    if (!s || !account || strcmp(account, s->account) != 0)
        return *why = "unknown placeholder", NULL;
    *name = s->name;
    return s;
}

/* Why the secret may not be swapped here, or NULL when it may. */
static const char *refusal(const struct vault *v, const struct secret_entry *s, const char *sandbox,
                           const char *host, uint16_t port, const char *method, const char *path)
{
    if (!host_allowed(s, host, port)) return "host not allowed";
    if (!in_scope(v, s, sandbox)) return "sandbox not in the secret's only";
    return secret_rules_refusal(s->spec, method, path);
}

static char *open_value(struct vault *v, const struct secret_entry *s, size_t *len)
{
    char *value = NULL;
    err_t err = {0};
    char ad[SECRETS_AD_MAX];
    sealed_as(s->account, s->name, ad);
    if (secrets_open(v->key, ad, s->sealed, s->sealed_len, &value, len, &err) < 0) {
        log_error("%s", err.msg);
        return NULL;
    }
    return value;
}

static bool has_rules(const struct secret_entry *s)
{
    return json_array_size(json_object_get(s->spec, "rules")) > 0;
}

char *vault_value(void *arg, const char *sandbox, const char *host, uint16_t port,
                  const char *method, const char *path, const char *token, size_t *len,
                  bool *limited)
{
    struct vault *v = arg;
    const char *name = NULL, *why = NULL;
    struct secret_entry *s = secret_of(v, sandbox, token, &name, &why);
    if (s) why = refusal(v, s, sandbox, host, port, method, path);
    if (why) {
        secret_event(v, sandbox, "secret.misdirected", name, host, method, path, why);
        return NULL;
    }
    char *value = open_value(v, s, len);
    if (!value) return NULL;
    note_use(s, sandbox);
    secret_event(v, sandbox, "secret.used", s->name, host, method, path, NULL);
    *limited = has_rules(s);
    return value;
}

/* A header secret's field, set in the request: its value opened, and the text. */
static int fill_header(struct vault *v, const struct secret_entry *s, const char *placeholder,
                       struct secret_header *h)
{
    *h = (struct secret_header){.limited = has_rules(s)};
    str_copy(h->name, sizeof h->name, json_string_value(json_object_get(s->spec, "header")));
    str_copy(h->placeholder, sizeof h->placeholder, placeholder);
    h->value = open_value(v, s, &h->value_len);
    if (h->value) h->text = secret_header_text(s->spec, h->value, h->value_len, &h->text_len);
    if (h->text) return 0;
    secrets_release(h->value, h->value_len);
    return -ENOMEM;
}

void vault_headers_release(struct secret_header *h, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        secrets_release(h[i].value, h[i].value_len);
        secrets_release(h[i].text, h[i].text_len);
        h[i].value = h[i].text = NULL;
    }
}

int vault_headers(void *arg, const char *sandbox, const char *host, uint16_t port,
                  const char *method, const char *path, struct secret_header *out, size_t max)
{
    struct vault *v = arg;
    size_t n = 0;
    for (struct placeholder_entry *p = v->placeholders; p; p = p->next) {
        if (strcmp(p->sandbox, sandbox) != 0) continue;
        struct secret_entry *s = find_secret(v, p->account, p->secret);
        if (!s || !json_object_get(s->spec, "header")) continue;
        /* Set only where the value itself may go: the same hosts, scope and rules. */
        if (refusal(v, s, sandbox, host, port, method, path)) continue;
        if (n == max || fill_header(v, s, p->placeholder, &out[n]) < 0) {
            vault_headers_release(out, n);
            return n == max ? -E2BIG : -ENOMEM;
        }
        n++;
        note_use(s, sandbox);
        secret_event(v, sandbox, "secret.used", s->name, host, method, path, NULL);
    }
    return (int)n;
}

/* An event of the sandbox about the placeholder token: its secret's name when
 * the placeholder is the sandbox's own (null else), host, and one more field. */
static void record(struct vault *v, const char *sandbox, const char *kind, const char *token,
                   const char *host, const char *key, const char *value)
{
    struct placeholder_entry *p = find_placeholder(v, token);
    const char *name = p && strcmp(p->sandbox, sandbox) == 0 ? p->secret : NULL;
    json_t *f = json_pack("{s:s?,s:s,s:s}", "secret", name, "host", host, key, value);
    v->hooks.event(v->hooks.arg, sandbox, kind, f);
    json_decref(f);
}

void vault_misdirected(void *arg, const char *sandbox, const char *host, const char *token,
                       const char *why)
{
    record(arg, sandbox, "secret.misdirected", token, host, "reason", why);
}

void vault_reflected(void *arg, const char *sandbox, const char *host, const char *token,
                     const char *encoding)
{
    record(arg, sandbox, "secret.reflected", token, host, "encoding", encoding);
}

bool vault_any(void *arg, const char *sandbox)
{
    const struct vault *v = arg;
    for (const struct placeholder_entry *p = v->placeholders; p; p = p->next)
        if (strcmp(p->sandbox, sandbox) == 0) return true;
    return false;
}
