/* secrets: API keys that never enter a sandbox. Values are sealed at rest with
 * AES-256-GCM under a key file of mode 0600 (the secret's name is the
 * associated data, so a sealed value cannot be moved to another name); a
 * sandbox sees only placeholders, one per secret per sandbox, each with 128
 * random bits; the egress proxy puts the value in place of its placeholder only
 * in HTTPS requests to the secret's own hosts, methods and paths. */
#ifndef RUNTIME_SECRETS_H
#define RUNTIME_SECRETS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/common.h"

#define SECRETS_KEY_LEN 32
#define SECRET_VALUE_MAX 8192 /* Runtime Cloud's 8 KiB */
#define SECRETS_PER_OWNER 50
#define SECRET_NAME_MAX 128
#define SECRET_HOSTS_MAX 16        /* hosts of one secret */
#define SECRET_RULES_MAX 16        /* rules of one secret */
#define SECRET_RULE_ITEMS_MAX 16   /* methods, paths of one rule */
#define SECRET_RULES_MAX_LEGACY 32 /* hosts, methods, paths of rows stored before rules */
#define SECRET_HEADER_MAX 64       /* a header field's name */
#define SECRET_FORMAT_MAX 256      /* format, {value} included */
#define SECRET_SCOPE_IDS_MAX 100   /* only.sandboxes */
#define SECRET_SCOPE_LABELS_MAX 8  /* only.labels: maps, and pairs in each */
#define PLACEHOLDER_PREFIX "RUNTIME_PH_"
#define PLACEHOLDER_LEN (sizeof PLACEHOLDER_PREFIX - 1 + 32)
#define SECRETS_SANDBOX_ID_MAX 32 /* a sandbox id and its NUL (PROTO_ID_LEN) */
#define SECRETS_ACCOUNT_MAX 64    /* an account name and its NUL (ACCOUNT_NAME_MAX) */
#define SECRETS_AD_MAX (SECRETS_ACCOUNT_MAX + SECRET_NAME_MAX + 2)

/* Reads the sealing key from path, or makes one (mode 0600) when missing. */
int secrets_key_load(const char *path, uint8_t key[SECRETS_KEY_LEN], err_t *err);

/* Seals value under key with name as associated data: nonce(12) || ct || tag(16). */
int secrets_seal(const uint8_t key[SECRETS_KEY_LEN], const char *name, const void *value,
                 size_t len, uint8_t **sealed, size_t *sealed_len, err_t *err);
/* Opens what secrets_seal made; *value is NUL-terminated, to be released with
 * secrets_release (which wipes it). */
int secrets_open(const uint8_t key[SECRETS_KEY_LEN], const char *name, const uint8_t *sealed,
                 size_t sealed_len, char **value, size_t *len, err_t *err);
void secrets_release(char *value, size_t len);

/* A name is a valid environment variable name: [A-Za-z_][A-Za-z0-9_]*, at most
 * SECRET_NAME_MAX bytes, and not one of the variables a sandbox's programs
 * depend on (PATH, HOME, any LD_*, ...: see secrets.c), which the secret's
 * placeholder would replace. */
int secrets_check_name(const char *name, err_t *err);
/* One of those. */
bool secrets_name_reserved(const char *name);
/* ---- a secret's spec (spec.c) ----
 * What a put's body says, in Runtime Cloud's shape: {value, hosts[], header?,
 * format?, rules?: [{methods?, paths}], only?: {labels?, sandboxes?}, env?}
 * (runtimed's earlier top-level methods and paths are one rule). The spec is that
 * without the value; the store keeps it with the secret's "placeholder". */

/* A value: 1..SECRET_VALUE_MAX bytes of visible ASCII or space (it goes into
 * header fields and URLs). */
int secret_value_check(const char *value, size_t len, err_t *err);
/* The spec of a put's body, or NULL after appending to issues one {field, message}
 * for every wrong field (unknown ones, and Runtime Cloud's that runtimed has not). */
json_t *secret_spec_parse(json_t *body, json_t *issues);
/* "field: message; field: message" (malloc'd; NULL when out of memory); when that
 * is max bytes or more, "wrong fields (...): field, field" instead. */
char *secret_issues_text(json_t *issues, size_t max);
/* A spec as the store holds it, checked as a put's body is; rows stored before
 * rules ({hosts, methods, paths} of path globs) become one rule that keeps the
 * globs' meaning ("globs": true). NULL with err when it cannot be read. */
json_t *secret_spec_load(json_t *stored, err_t *err);
/* NULL when some rule of spec lets a request of this method to this path
 * (struct http_request's normalised form) carry the value (or there are no
 * rules); else why not: "method not allowed", "path not allowed", "ambiguous path". */
const char *secret_rules_refusal(json_t *spec, const char *method, const char *path);
/* Whether the JSON array of strings list holds s. */
bool secret_list_has(json_t *list, const char *s);
/* spec's format with value in place of {value} ("{value}" without one):
 * malloc'd, NUL-terminated, to be wiped. */
char *secret_header_text(json_t *spec, const char *value, size_t len, size_t *out_len);

/* A fresh placeholder: PLACEHOLDER_PREFIX and 32 hex digits of getrandom. */
void secrets_placeholder(char out[PLACEHOLDER_LEN + 1]);
/* True when s[0..n) starts with a well-formed placeholder. */
bool secrets_is_placeholder(const char *s, size_t n);

/* ---- reflection (reflect.c) ----
 * The values swapped into one connection, looked for in what its upstream
 * answers: as sent, in base64 (standard and URL-safe, also inside a longer
 * base64 text such as Basic credentials), and through percent-encoding and
 * JSON string escapes, in any mix. Each match is overwritten in place, at the
 * same length (framing never changes), with the value's placeholder: see
 * reflect.c for exactly what it becomes. The scan runs over a stream: what it
 * does not settle (a match that may still be under way, the last few base64
 * characters) the caller keeps and passes again, in front of what follows. */
#define REFLECT_VALUES_MAX 16 /* per connection: OPENED_MAX distinct values per request */
#define REFLECT_VALUE_MIN 8   /* shorter values are not looked for (they would match by chance) */
#define REFLECT_ENCODINGS 12  /* reflect_encoding_name's indexes */

struct reflect;
struct reflect *reflect_new(void);
/* Wipes the values and their forms. NULL is fine. */
void reflect_free(struct reflect *r);
/* Adds a value (copied) and the placeholder that stands for it: 1 when added,
 * 0 when it is there already or shorter than REFLECT_VALUE_MIN, -ENOSPC when
 * REFLECT_VALUES_MAX are held, -ENOMEM. */
int reflect_add(struct reflect *r, const char *value, size_t len, const char *placeholder);
/* Nothing to look for (r may be NULL). */
bool reflect_empty(const struct reflect *r);

struct reflect_hit {
    unsigned value;          /* which value, in the order added */
    const char *placeholder; /* its placeholder */
    unsigned encoding;       /* reflect_encoding_name(encoding): "verbatim", "base64+json", ... */
};
typedef void reflect_hit_fn(void *arg, const struct reflect_hit *hit);
const char *reflect_encoding_name(unsigned encoding);
/* Overwrites every match in buf[0..len) and calls hit for each. Returns how many
 * leading bytes are settled (never change again): all of them when final (the
 * end of the answer); else the bytes from the first place where a match may
 * still be under way, or the last four base64 characters, are not. */
size_t reflect_scan(const struct reflect *r, unsigned char *buf, size_t len, bool final,
                    reflect_hit_fn *hit, void *arg);

/* ---- the vault (vault.c): the secrets in memory and in the store ----
 * A secret belongs to an account, and is seen only in that account's sandboxes:
 * names are unique within an account, and every call names the account. */

struct store;
struct store_writer;
struct vault;
struct vault_hooks {
    void *arg;
    /* Records an event of a sandbox (secret.used, secret.misdirected); fields borrowed. */
    void (*event)(void *arg, const char *sandbox_id, const char *kind, json_t *fields);
    /* The labels of the account's sandbox as an object (a new reference), or NULL:
     * a secret's only.labels are checked against them. NULL hook: no labels. */
    json_t *(*labels)(void *arg, const char *account, const char *sandbox_id);
};
/* Loads every secret and placeholder of the store (read on the loop's
 * connection); every change goes through the writer. key is copied (the caller
 * wipes its own). */
int vault_open(struct store *store, struct store_writer *writer, const uint8_t key[SECRETS_KEY_LEN],
               const struct vault_hooks *hooks, struct vault **out, err_t *err);
void vault_close(struct vault *v);

/* A change is in force in memory at once; done is called once, from the loop,
 * when it is on disk (err NULL; answer, taken, is the secret's JSON for a put,
 * {name, deleted: true} for a delete; created tells a new secret from a replaced one) or could not
 * be written (err). Not called when the daemon stops first. */
typedef void vault_saved_fn(const err_t *err, json_t *answer, bool created, void *arg);
/* body is {value, hosts[], header?, format?, rules?[], only?, env?} (secret_spec_parse).
 * Answers never carry values. Negative with err (and no call of done) when refused;
 * issues (NULL: not wanted) then gets one {field, message} for each wrong field. */
int vault_put(struct vault *v, const char *account, const char *name, json_t *body,
              vault_saved_fn *done, void *arg, json_t *issues, err_t *err);
json_t *vault_list(const struct vault *v, const char *account);
bool vault_has(const struct vault *v, const char *account, const char *name);
/* Its placeholders go with it. A delete that cannot be written puts it back. */
int vault_delete(struct vault *v, const char *account, const char *name, vault_saved_fn *done,
                 void *arg, err_t *err);
/* Adds ENV=placeholder to env for every secret of the account the sandbox is in
 * the scope of (only), ENV its env or its name, making the
 * sandbox's placeholders where missing (queued to the writer, not waited for). */
int vault_env(struct vault *v, const char *account, const char *sandbox_id, json_t *env,
              err_t *err);
/* The variable vault_env gives the secret name of the account (its env, or its name),
 * or NULL when the account has no such secret. */
const char *vault_env_name(const struct vault *v, const char *account, const char *name);
/* The sandbox is gone: its placeholders too. */
void vault_forget_sandbox(struct vault *v, const char *sandbox_id);
/* The account is gone (its rows are, store_account_delete): out of memory too. */
void vault_forget_account(struct vault *v, const char *account);

/* What the egress proxy asks (struct egress_secrets; arg is the vault). */
bool vault_any(void *arg, const char *sandbox_id);
bool vault_wants(void *arg, const char *sandbox_id, const char *host, uint16_t port);
char *vault_value(void *arg, const char *sandbox_id, const char *host, uint16_t port,
                  const char *method, const char *path, const char *placeholder, size_t *len,
                  bool *limited);
void vault_misdirected(void *arg, const char *sandbox_id, const char *host, const char *placeholder,
                       const char *why);
/* A field a secret with header sets on a request: name, and its text (format with
 * the value in it); the value and the sandbox's placeholder of the secret, for the
 * answers' scan. text and value are opened: vault_headers_release wipes them. */
struct secret_header {
    char name[SECRET_HEADER_MAX + 1];
    char *text, *value;
    size_t text_len, value_len;
    char placeholder[PLACEHOLDER_LEN + 1];
    bool limited; /* the secret has rules */
};
/* The fields the sandbox's secrets with header set on this request (those whose
 * hosts, only and rules allow it): how many filled in out, -E2BIG when more than
 * max would be (none filled), -ENOMEM. */
int vault_headers(void *arg, const char *sandbox_id, const char *host, uint16_t port,
                  const char *method, const char *path, struct secret_header *out, size_t max);
void vault_headers_release(struct secret_header *h, size_t n);
/* A secret.reflected event: the value came back from host, in encoding. */
void vault_reflected(void *arg, const char *sandbox_id, const char *host, const char *placeholder,
                     const char *encoding);

#endif
