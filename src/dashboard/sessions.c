/* Sign-in sessions: a small table in memory (a restart signs everyone out, which is
 * the safe side), each known by the SHA-256 of its token. */
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>

#include "../common/common.h"
#include "dashboard.h"

struct slot {
    bool used;
    char token_hash[SHA256_DIGEST_LENGTH * 2 + 1];
    struct dashboard_session s;
};

struct dashboard_sessions {
    struct dashboard_limits limits;
    struct slot slots[DASHBOARD_SESSIONS_MAX];
    size_t n;
};

struct dashboard_sessions *dashboard_sessions_new(const struct dashboard_limits *limits)
{
    struct dashboard_sessions *ds = calloc(1, sizeof *ds);
    if (!ds) return NULL;
    ds->limits = *limits;
    if (!ds->limits.idle_s) ds->limits.idle_s = 12 * 3600;
    if (!ds->limits.max_s) ds->limits.max_s = 7 * 24 * 3600;
    return ds;
}

void dashboard_sessions_free(struct dashboard_sessions *ds)
{
    if (!ds) return;
    explicit_bzero(ds, sizeof *ds);
    free(ds);
}

/* 32 random bytes as base64url without padding: 43 characters. */
static void random_token(char out[DASHBOARD_TOKEN_LEN + 1])
{
    unsigned char raw[32], b64[48];
    random_bytes(raw, sizeof raw);
    EVP_EncodeBlock(b64, raw, sizeof raw); /* 44 characters, the last '=' */
    for (size_t i = 0; i < DASHBOARD_TOKEN_LEN; i++)
        out[i] = b64[i] == '+' ? '-' : b64[i] == '/' ? '_' : (char)b64[i];
    out[DASHBOARD_TOKEN_LEN] = '\0';
    explicit_bzero(raw, sizeof raw);
}

static void hash_token(const char *token, char out[SHA256_DIGEST_LENGTH * 2 + 1])
{
    unsigned char md[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)token, strlen(token), md);
    hex_encode(out, md, sizeof md);
}

static void end_slot(struct dashboard_sessions *ds, struct slot *sl)
{
    explicit_bzero(sl, sizeof *sl);
    ds->n--;
}

static bool expired(const struct dashboard_sessions *ds, const struct slot *sl, int64_t now)
{
    return now - sl->s.used_ms >= (int64_t)ds->limits.idle_s * 1000 ||
           now - sl->s.created_ms >= (int64_t)ds->limits.max_s * 1000;
}

/* A slot for a new session of account: a free one, else (the account at its cap, or
 * the table full) the one of that account, or of anyone, unused the longest. Expired
 * ones are let go on the way. */
static struct slot *free_slot(struct dashboard_sessions *ds, const char *account, int64_t now)
{
    struct slot *empty = NULL, *oldest_own = NULL, *oldest = NULL;
    size_t own = 0;
    for (size_t i = 0; i < DASHBOARD_SESSIONS_MAX; i++) {
        struct slot *sl = &ds->slots[i];
        if (sl->used && expired(ds, sl, now)) end_slot(ds, sl);
        if (!sl->used) {
            if (!empty) empty = sl;
            continue;
        }
        if (!oldest || sl->s.used_ms < oldest->s.used_ms) oldest = sl;
        if (strcmp(sl->s.account, account) != 0) continue;
        own++;
        if (!oldest_own || sl->s.used_ms < oldest_own->s.used_ms) oldest_own = sl;
    }
    struct slot *victim = own >= DASHBOARD_SESSIONS_PER_ACCOUNT ? oldest_own
                          : empty                               ? NULL
                                                                : oldest;
    if (victim) {
        end_slot(ds, victim);
        return victim;
    }
    return empty;
}

const struct dashboard_session *dashboard_session_open(struct dashboard_sessions *ds,
                                                       const char *key, const char *account,
                                                       char token_out[DASHBOARD_TOKEN_LEN + 1])
{
    int64_t now = now_unix_ms();
    struct slot *sl = free_slot(ds, account, now);
    if (!sl || strlen(key) >= DASHBOARD_KEY_MAX) return NULL;
    random_token(token_out);
    *sl = (struct slot){.used = true};
    hash_token(token_out, sl->token_hash);
    str_copy(sl->s.key, sizeof sl->s.key, key);
    str_copy(sl->s.account, sizeof sl->s.account, account);
    random_token(sl->s.csrf);
    sl->s.created_ms = sl->s.used_ms = now;
    ds->n++;
    return &sl->s;
}

struct dashboard_session *dashboard_session_find(struct dashboard_sessions *ds, const char *token,
                                                 int64_t now_ms)
{
    if (strlen(token) != DASHBOARD_TOKEN_LEN) return NULL;
    char hash[SHA256_DIGEST_LENGTH * 2 + 1];
    hash_token(token, hash);
    struct slot *found = NULL;
    for (size_t i = 0; i < DASHBOARD_SESSIONS_MAX; i++)
        if (ds->slots[i].used && str_equal_ct(ds->slots[i].token_hash, hash)) found = &ds->slots[i];
    if (!found) return NULL;
    if (expired(ds, found, now_ms)) {
        end_slot(ds, found);
        return NULL;
    }
    found->s.used_ms = now_ms;
    return &found->s;
}

void dashboard_session_close(struct dashboard_sessions *ds, struct dashboard_session *s)
{
    end_slot(ds, (struct slot *)((char *)s - offsetof(struct slot, s)));
}

int64_t dashboard_session_expires_ms(const struct dashboard_sessions *ds,
                                     const struct dashboard_session *s)
{
    int64_t idle_end = s->used_ms + (int64_t)ds->limits.idle_s * 1000;
    int64_t max_end = s->created_ms + (int64_t)ds->limits.max_s * 1000;
    return idle_end < max_end ? idle_end : max_end;
}

size_t dashboard_sessions_count(const struct dashboard_sessions *ds)
{
    return ds->n;
}
