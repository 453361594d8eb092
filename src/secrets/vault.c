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

struct secret_entry {
    char account[SECRETS_ACCOUNT_MAX];
    char name[SECRET_NAME_MAX + 1];
    uint8_t *sealed;
    size_t sealed_len;
    json_t *rules;       /* {hosts[], methods[], paths[]} */
    struct policy hosts; /* rules' hosts, compiled once when they are set (compile_hosts) */
    bool hosts_ok;       /* compiled, and at least one: else no host is allowed */
    int64_t created_ms, updated_ms;
    uint64_t version; /* the put that made its value: an undo applies only to its own */
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

/* Compiles s->rules' hosts into s->hosts: each intercepted request checks them, and a
 * policy built there for every one cost a parse of every rule. Called wherever
 * s->rules is set. */
static void compile_hosts(struct secret_entry *s)
{
    if (s->hosts_ok) policy_clear(&s->hosts);
    json_t *hosts = json_object_get(s->rules, "hosts");
    size_t n = json_array_size(hosts);
    const char *list[SECRET_RULES_MAX];
    for (size_t i = 0; i < n && i < SECRET_RULES_MAX; i++)
        list[i] = json_string_value(json_array_get(hosts, i));
    s->hosts_ok =
        n > 0 && policy_build(true, true, list, n < SECRET_RULES_MAX ? n : SECRET_RULES_MAX,
                              &s->hosts, NULL) == 0;
}

static void free_secret(struct secret_entry *s)
{
    free(s->sealed);
    json_decref(s->rules);
    if (s->hosts_ok) policy_clear(&s->hosts);
    free(s);
}

static json_t *parse_rules(json_t *body, err_t *err);

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
    s->rules = stored ? parse_rules(stored, &err) : NULL;
    if (!s->rules) {
        log_error("secret %s of account %s: its rules in the store cannot be read (%s); it is "
                  "sent to no host until it is set again",
                  s->name, s->account, stored ? err.msg : jerr.text);
        s->rules = json_pack("{s:[],s:[],s:[]}", "hosts", "methods", "paths");
    }
    json_decref(stored);
    compile_hosts(s);
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

/* A list of strings, each checked by ok(). */
static int string_list(json_t *body, const char *key, bool required, json_t *out,
                       int (*ok)(const char *s, err_t *err), err_t *err)
{
    json_t *v = json_object_get(body, key), *list = json_array();
    json_object_set_new(out, key, list);
    if (!v || json_is_null(v)) {
        if (required)
            return err_set(err, -EINVAL,
                           "%s is required: the hosts the secret may be "
                           "sent to, e.g. [\"api.github.com\"]",
                           key);
        return 0;
    }
    if (!json_is_array(v) || json_array_size(v) > SECRET_RULES_MAX ||
        (required && json_array_size(v) == 0))
        return err_set(err, -EINVAL, "%s must be an array of 1 to %d strings", key,
                       SECRET_RULES_MAX);
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e)
    {
        const char *s = json_string_value(e);
        if (!s) return err_set(err, -EINVAL, "%s[%zu] must be a string", key, i);
        int r = ok(s, err);
        if (r < 0) return err_wrap(err, "%s[%zu]", key, i);
        json_array_append(list, e);
    }
    return 0;
}

static int host_ok(const char *s, err_t *err)
{
    struct policy_rule rule;
    int r = policy_parse_rule(s, &rule, err);
    if (r == 0 && rule.kind == POLICY_RULE_CIDR && rule.prefix != 32 && rule.prefix != 128)
        r = err_set(err, -EINVAL,
                    "\"%s\": a secret's host is a name or one address, not a "
                    "range",
                    s);
    return r;
}

static int method_ok(const char *s, err_t *err)
{
    size_t n = strlen(s);
    bool ok = n > 0 && n <= 16;
    for (size_t i = 0; ok && i < n; i++)
        ok = isupper((unsigned char)s[i]);
    return ok ? 0 : err_set(err, -EINVAL, "\"%.32s\" is not an HTTP method like GET or POST", s);
}

static int path_ok(const char *s, err_t *err)
{
    const char *why = NULL;
    if (strlen(s) < 1024 && http_glob_valid(s, &why)) return 0;
    return err_set(err, -EINVAL, "\"%.64s\" is not a path glob like /repos/acme/* (%s)", s,
                   why ? why : "too long");
}

static json_t *secret_json(const struct secret_entry *s)
{
    char created[40], updated[40];
    time_rfc3339(created, sizeof created, s->created_ms);
    time_rfc3339(updated, sizeof updated, s->updated_ms);
    json_t *v = json_deep_copy(s->rules);
    json_object_set_new(v, "name", json_string(s->name));
    json_object_set_new(v, "createdAt", json_string(created));
    json_object_set_new(v, "updatedAt", json_string(updated));
    return v;
}

static json_t *parse_rules(json_t *body, err_t *err)
{
    json_t *rules = json_object();
    int r = string_list(body, "hosts", true, rules, host_ok, err);
    if (r == 0) r = string_list(body, "methods", false, rules, method_ok, err);
    if (r == 0) r = string_list(body, "paths", false, rules, path_ok, err);
    if (r < 0) {
        json_decref(rules);
        return NULL;
    }
    return rules;
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
        json_t *rules = s->rules;
        s->sealed = b->sealed;
        s->sealed_len = b->sealed_len;
        s->rules = b->rules;
        compile_hosts(s);
        s->updated_ms = b->updated_ms;
        b->sealed = sealed; /* freed with b */
        b->rules = rules;
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
    } else if (r != -ECANCELED) {
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
    char *text = json_dumps(s->rules, JSON_COMPACT);
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

int vault_put(struct vault *v, const char *account, const char *name, json_t *body,
              vault_saved_fn *done, void *arg, err_t *err)
{
    json_t *value = json_object_get(body, "value");
    int r = secrets_check_name(name, err);
    if (r < 0) return r;
    static const char *const known[] = {"value", "hosts", "methods", "paths", NULL};
    if (!json_is_object(body) || !json_is_string(value))
        return err_set(err, -EINVAL, "the body must be {value, hosts[], methods?[], paths?[]}");
    r = json_known_fields(body, NULL, known, err);
    if (r < 0) return r;
    r = secrets_check_value(json_string_value(value), json_string_length(value), err);
    if (r < 0) return r;
    struct secret_entry *s = find_secret(v, account, name);
    if (!s && count_secrets(v, account) >= SECRETS_PER_OWNER)
        return err_set(err, -EAGAIN,
                       "the account %s has %d secrets, the limit of secrets per account; "
                       "remove one first",
                       account, SECRETS_PER_OWNER);
    json_t *rules = parse_rules(body, err);
    if (!rules) return -EINVAL;
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
    before->rules = s->rules;
    before->updated_ms = s->updated_ms;
    s->sealed = sealed;
    s->sealed_len = sealed_len;
    s->rules = rules;
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

int vault_env(struct vault *v, const char *account, const char *sandbox, json_t *env, err_t *err)
{
    for (struct secret_entry *s = v->secrets; s; s = s->next) {
        if (strcmp(s->account, account) != 0) continue; /* another account's: never here */
        /* Stored before such names were refused: never in place of the variable. */
        if (secrets_name_reserved(s->name)) continue;
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
        json_object_set_new(env, s->name, json_string(ph));
    }
    return 0;
}

/* ---- what the egress proxy asks (the server's struct egress_secrets) ---- */

static bool host_allowed(const struct secret_entry *s, const char *host, uint16_t port)
{
    return s->hosts_ok && policy_check(&s->hosts, host, NULL, port) == POLICY_ALLOW;
}

static bool list_has(json_t *list, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v) if (strcmp(json_string_value(v), s) == 0) return true;
    return false;
}

static bool path_allowed(json_t *globs, const char *path)
{
    size_t i;
    json_t *v;
    json_array_foreach(globs, i, v) if (http_glob_match(json_string_value(v), path)) return true;
    return false;
}

/* Only the secrets the sandbox holds placeholders of: its account's, and no other. */
bool vault_wants(void *arg, const char *sandbox, const char *host, uint16_t port)
{
    struct vault *v = arg;
    for (struct placeholder_entry *p = v->placeholders; p; p = p->next) {
        if (strcmp(p->sandbox, sandbox) != 0) continue;
        struct secret_entry *s = find_secret(v, p->account, p->secret);
        if (s && host_allowed(s, host, port)) return true;
    }
    return false;
}

static struct placeholder_entry *find_placeholder(struct vault *v, const char *token)
{
    for (struct placeholder_entry *p = v->placeholders; p; p = p->next)
        if (str_equal_ct(p->placeholder, token)) return p;
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

/* Why the placeholder may not be swapped here, or NULL when it may. */
static const char *refusal(struct vault *v, struct placeholder_entry *p, const char *sandbox,
                           const char *host, uint16_t port, const char *method, const char *path,
                           struct secret_entry **out)
{
    if (!p) return "unknown placeholder";
    if (strcmp(p->sandbox, sandbox) != 0) return "placeholder of another sandbox";
    struct secret_entry *s = find_secret(v, p->account, p->secret);
    if (!s) return "secret removed";
    json_t *methods = json_object_get(s->rules, "methods");
    json_t *paths = json_object_get(s->rules, "paths");
    if (!host_allowed(s, host, port)) return "host not allowed";
    if (json_array_size(methods) && !list_has(methods, method)) return "method not allowed";
    /* A path an upstream could read as another one matches no glob. */
    if (json_array_size(paths) && http_path_ambiguous(path)) return "ambiguous path";
    if (json_array_size(paths) && !path_allowed(paths, path)) return "path not allowed";
    *out = s;
    return NULL;
}

char *vault_value(void *arg, const char *sandbox, const char *host, uint16_t port,
                  const char *method, const char *path, const char *token, size_t *len,
                  bool *limited)
{
    struct vault *v = arg;
    struct placeholder_entry *p = find_placeholder(v, token);
    struct secret_entry *s = NULL;
    const char *why = refusal(v, p, sandbox, host, port, method, path, &s);
    const char *name = p && strcmp(p->sandbox, sandbox) == 0 ? p->secret : NULL;
    if (why) {
        secret_event(v, sandbox, "secret.misdirected", name, host, method, path, why);
        return NULL;
    }
    char *value = NULL;
    err_t err = {0};
    char ad[SECRETS_AD_MAX];
    sealed_as(s->account, s->name, ad);
    if (secrets_open(v->key, ad, s->sealed, s->sealed_len, &value, len, &err) < 0) {
        log_error("%s", err.msg);
        return NULL;
    }
    secret_event(v, sandbox, "secret.used", s->name, host, method, path, NULL);
    *limited = json_array_size(json_object_get(s->rules, "methods")) ||
               json_array_size(json_object_get(s->rules, "paths"));
    return value;
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
