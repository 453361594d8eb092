/* The device login's requests: codes, checks, sealing, and the table. */
#include "connect.h"

#include <errno.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <stdlib.h>
#include <string.h>

/* ---- codes and keys ---- */

void connect_base64url(char *out, const void *in, size_t n)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const unsigned char *p = in;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        if (i + 1 < n) v |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < n) v |= p[i + 2];
        out[o++] = abc[(v >> 18) & 63];
        out[o++] = abc[(v >> 12) & 63];
        if (i + 1 < n) out[o++] = abc[(v >> 6) & 63];
        if (i + 2 < n) out[o++] = abc[v & 63];
    }
    out[o] = '\0';
}

void connect_uuid(char out[CONNECT_UUID_LEN + 1])
{
    unsigned char b[16];
    char hex[33];
    random_bytes(b, sizeof b);
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    hex_encode(hex, b, sizeof b);
    snprintf(out, CONNECT_UUID_LEN + 1, "%.8s-%.4s-%.4s-%.4s-%.12s", hex, hex + 8, hex + 12,
             hex + 16, hex + 20);
}

void connect_user_code(char out[CONNECT_USER_CODE_LEN + 1])
{
    unsigned char b[6];
    char hex[13];
    random_bytes(b, sizeof b);
    hex_encode(hex, b, sizeof b);
    for (int i = 0; i < 12; i++)
        if (hex[i] >= 'a') hex[i] = (char)(hex[i] - 'a' + 'A');
    snprintf(out, CONNECT_USER_CODE_LEN + 1, "%.4s-%.4s-%.4s", hex, hex + 4, hex + 8);
}

bool connect_user_code_ok(const char *s)
{
    if (!s || strlen(s) != CONNECT_USER_CODE_LEN) return false;
    for (int i = 0; i < CONNECT_USER_CODE_LEN; i++) {
        bool dash = i == 4 || i == 9;
        if (dash != (s[i] == '-')) return false;
        if (!dash && !strchr("0123456789ABCDEF", s[i])) return false;
    }
    return true;
}

static bool is_b64url(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
}

void connect_device_code(char out[CONNECT_DEVICE_CODE_LEN + 1])
{
    unsigned char b[32];
    random_bytes(b, sizeof b);
    connect_base64url(out, b, sizeof b);
    explicit_bzero(b, sizeof b);
}

bool connect_device_code_ok(const char *s)
{
    if (!s || strlen(s) != CONNECT_DEVICE_CODE_LEN) return false;
    for (; *s; s++)
        if (!is_b64url(*s)) return false;
    return true;
}

void connect_key(char out[CONNECT_KEY_LEN + 1])
{
    char uuid[CONNECT_UUID_LEN + 1], secret[CONNECT_DEVICE_CODE_LEN + 1];
    connect_uuid(uuid);
    connect_device_code(secret); /* the same 32 random bytes, base64url */
    snprintf(out, CONNECT_KEY_LEN + 1, "rtcloud_%s_%s", uuid, secret);
    explicit_bzero(secret, sizeof secret);
}

bool connect_key_ok(const char *s)
{
    if (!s || strlen(s) != CONNECT_KEY_LEN || strncmp(s, "rtcloud_", 8) != 0) return false;
    for (int i = 8; i < 8 + CONNECT_UUID_LEN; i++)
        if (!strchr("0123456789abcdef-", s[i])) return false;
    return s[8 + CONNECT_UUID_LEN] == '_' && connect_device_code_ok(s + 8 + CONNECT_UUID_LEN + 1);
}

/* ---- inputs ---- */

/* Characters of a UTF-8 text (jansson has checked it is UTF-8); -1 at a control
 * character (C0, DEL, C1), which would let a name fake lines on the approval page. */
static long text_chars(const char *s)
{
    long n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p < 0x20 || *p == 0x7f) return -1;
        if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) return -1;
        n += (*p & 0xc0) != 0x80;
    }
    return n;
}

int connect_check_agent(const char *s, err_t *err)
{
    long n = s ? text_chars(s) : -1;
    if (n < 1 || n > CONNECT_AGENT_MAX)
        return err_set(err, -EINVAL, "agentName must be 1 to %d characters, none a control one",
                       CONNECT_AGENT_MAX);
    return 0;
}

int connect_check_machine(const char *s, err_t *err)
{
    long n = s ? text_chars(s) : -1;
    if (n < 1 || strlen(s) > CONNECT_MACHINE_MAX)
        return err_set(err, -EINVAL, "machine must be 1 to %d bytes, no control character",
                       CONNECT_MACHINE_MAX);
    return 0;
}

static EVP_PKEY *read_public_key(const char *pem)
{
    BIO *bio = BIO_new_mem_buf(pem, -1);
    EVP_PKEY *key = bio ? PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL) : NULL;
    BIO_free(bio);
    return key;
}

int connect_check_public_key(const char *pem, err_t *err)
{
    EVP_PKEY *key = pem ? read_public_key(pem) : NULL;
    int bits = key ? EVP_PKEY_get_bits(key) : 0;
    bool rsa = key && EVP_PKEY_get_base_id(key) == EVP_PKEY_RSA;
    EVP_PKEY_free(key);
    if (!key) return err_set(err, -EINVAL, "publicKey must be a PEM public key (SPKI)");
    if (!rsa || bits < 2048 || bits > 4096)
        return err_set(err, -EINVAL, "publicKey must be an RSA key of 2048 to 4096 bits");
    return 0;
}

static int oaep_sha256(EVP_PKEY_CTX *ctx)
{
    return EVP_PKEY_encrypt_init(ctx) > 0 &&
                   EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_OAEP_PADDING) > 0 &&
                   EVP_PKEY_CTX_set_rsa_oaep_md(ctx, EVP_sha256()) > 0 &&
                   EVP_PKEY_CTX_set_rsa_mgf1_md(ctx, EVP_sha256()) > 0
               ? 0
               : -1;
}

int connect_seal(const char *pem, const char *key, char **out, err_t *err)
{
    EVP_PKEY *pub = read_public_key(pem);
    EVP_PKEY_CTX *ctx = pub ? EVP_PKEY_CTX_new(pub, NULL) : NULL;
    unsigned char cipher[512]; /* a 4096-bit key's block */
    size_t n = sizeof cipher;
    int r = ctx && oaep_sha256(ctx) == 0 &&
                    EVP_PKEY_encrypt(ctx, cipher, &n, (const unsigned char *)key, strlen(key)) > 0
                ? 0
                : err_set(err, -EINVAL, "the key could not be sealed to the request's public key");
    EVP_PKEY_CTX_free(ctx);
    EVP_PKEY_free(pub);
    if (r < 0) return r;
    *out = malloc(4 * ((n + 2) / 3) + 1);
    if (!*out) return err_set(err, -ENOMEM, "out of memory");
    EVP_EncodeBlock((unsigned char *)*out, cipher, (int)n);
    return 0;
}

/* ---- the table ---- */

struct connect_table {
    struct connect_request *list; /* newest first */
};

struct connect_table *connect_table_new(void)
{
    return calloc(1, sizeof(struct connect_table));
}

static void request_free(struct connect_request *r)
{
    free(r->public_key);
    if (r->sealed) explicit_bzero(r->sealed, strlen(r->sealed));
    free(r->sealed);
    explicit_bzero(r, sizeof *r);
    free(r);
}

void connect_table_free(struct connect_table *t)
{
    if (!t) return;
    while (t->list) {
        struct connect_request *r = t->list;
        t->list = r->next;
        request_free(r);
    }
    free(t);
}

static bool unsettled(const struct connect_request *r)
{
    return r->state == CONNECT_PENDING || r->state == CONNECT_APPROVING;
}

/* Marks the expired (an approval being written finishes first), and forgets those
 * expired for CONNECT_FORGET_MS. An approved key never confirmed is wiped at expiry. */
static void sweep(struct connect_table *t, int64_t now)
{
    for (struct connect_request **pp = &t->list; *pp;) {
        struct connect_request *r = *pp;
        if (now >= r->expires_ms && r->state != CONNECT_APPROVING && r->state != CONNECT_EXPIRED &&
            r->state != CONNECT_DENIED && r->state != CONNECT_CONFIRMED) {
            connect_confirmed(r); /* wipes a sealed copy */
            r->state = CONNECT_EXPIRED;
        }
        if (now >= r->expires_ms + CONNECT_FORGET_MS && r->state != CONNECT_APPROVING) {
            *pp = r->next;
            request_free(r);
            continue;
        }
        pp = &r->next;
    }
}

struct counts {
    size_t pending, kept, pending_here; /* _here: from the address asked about */
};

static struct counts count(const struct connect_table *t, const char *address)
{
    struct counts c = {0};
    for (const struct connect_request *r = t->list; r; r = r->next) {
        c.pending += unsettled(r);
        c.pending_here += unsettled(r) && strcmp(r->address, address) == 0;
        c.kept++;
    }
    return c;
}

static void device_hash(const char *code, unsigned char out[32])
{
    unsigned int len = 0;
    EVP_Digest(code, strlen(code), out, &len, EVP_sha256(), NULL);
}

static bool user_code_taken(const struct connect_table *t, const char *code)
{
    for (const struct connect_request *r = t->list; r; r = r->next)
        if (strcmp(r->user_code, code) == 0) return true;
    return false;
}

int connect_start(struct connect_table *t, const char *agent_name, const char *machine,
                  const char *public_key, const char *address, int64_t now,
                  char device_code[CONNECT_DEVICE_CODE_LEN + 1], struct connect_request **out,
                  err_t *err)
{
    sweep(t, now);
    struct counts c = count(t, address);
    if (c.pending_here >= CONNECT_PENDING_PER_ADDRESS)
        return err_set(err, -EAGAIN,
                       "%d connection requests from %s are waiting for approval, the limit for "
                       "one address; approve or deny one, or wait until they expire",
                       CONNECT_PENDING_PER_ADDRESS, address);
    if (c.pending >= CONNECT_PENDING_MAX || c.kept >= CONNECT_KEPT_MAX)
        return err_set(err, -EAGAIN,
                       "%d connection requests are waiting for approval, the limit; try again "
                       "later",
                       CONNECT_PENDING_MAX);
    struct connect_request *r = calloc(1, sizeof *r);
    if (!r || !(r->public_key = strdup(public_key))) {
        free(r);
        return err_set(err, -ENOMEM, "out of memory");
    }
    do
        connect_user_code(r->user_code);
    while (user_code_taken(t, r->user_code)); /* 2^48 codes: a retry is rare */
    connect_device_code(device_code);
    device_hash(device_code, r->device_hash);
    str_copy(r->agent_name, sizeof r->agent_name, agent_name);
    str_copy(r->machine, sizeof r->machine, machine);
    str_copy(r->address, sizeof r->address, address);
    r->created_ms = now;
    r->expires_ms = now + CONNECT_TTL_MS;
    r->state = CONNECT_PENDING;
    r->next = t->list;
    t->list = r;
    *out = r;
    return 0;
}

struct connect_request *connect_by_device(struct connect_table *t, const char *device_code,
                                          int64_t now)
{
    sweep(t, now);
    if (!connect_device_code_ok(device_code)) return NULL;
    unsigned char h[32];
    device_hash(device_code, h);
    struct connect_request *found = NULL;
    /* Hashes of a random code: a compare that stops early tells nothing useful. */
    for (struct connect_request *r = t->list; r; r = r->next)
        if (memcmp(r->device_hash, h, sizeof h) == 0) found = r;
    return found;
}

struct connect_request *connect_by_user(struct connect_table *t, const char *user_code, int64_t now)
{
    sweep(t, now);
    for (struct connect_request *r = t->list; r; r = r->next)
        if (strcmp(r->user_code, user_code) == 0) return r;
    return NULL;
}

struct connect_request *connect_by_connection(struct connect_table *t, const char *id, int64_t now)
{
    sweep(t, now);
    for (struct connect_request *r = t->list; r; r = r->next)
        if (r->connection_id[0] && strcmp(r->connection_id, id) == 0) return r;
    return NULL;
}

bool connect_poll_too_soon(struct connect_request *r, uint64_t now_mono)
{
    bool soon = r->last_poll_ms && now_mono - r->last_poll_ms < CONNECT_POLL_MIN_MS;
    r->last_poll_ms = now_mono; /* a storm stays pending: each poll restarts the wait */
    return soon;
}

int connect_approved(struct connect_request *r, const char *key, const char *account,
                     const char *connection_id, err_t *err)
{
    int rc = connect_seal(r->public_key, key, &r->sealed, err);
    if (rc < 0) return rc;
    free(r->public_key);
    r->public_key = NULL;
    str_copy(r->account, sizeof r->account, account);
    str_copy(r->connection_id, sizeof r->connection_id, connection_id);
    r->state = CONNECT_APPROVED;
    return 0;
}

void connect_denied(struct connect_request *r)
{
    r->state = CONNECT_DENIED;
    free(r->public_key);
    r->public_key = NULL;
}

void connect_confirmed(struct connect_request *r)
{
    if (r->sealed) explicit_bzero(r->sealed, strlen(r->sealed));
    free(r->sealed);
    r->sealed = NULL;
    if (r->state == CONNECT_APPROVED) r->state = CONNECT_CONFIRMED;
}

const char *connect_state_name(enum connect_state s)
{
    switch (s) {
    case CONNECT_PENDING:
    case CONNECT_APPROVING:
        return "pending";
    case CONNECT_APPROVED:
    case CONNECT_CONFIRMED:
        return "approved";
    case CONNECT_DENIED:
        return "denied";
    case CONNECT_EXPIRED:
        break;
    }
    return "expired";
}
