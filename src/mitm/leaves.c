/* The server's side of interception: one leaf key, and the certificates the
 * keeper minted for it, kept in a hash table with an LRU list so that a sandbox
 * trying many names cannot make the cache grow past its limit. */
#include <errno.h>
#include <limits.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <string.h>

#include "mitm.h"

#define LEAVES_MAX_LIMIT (1u << 20)

struct leaf {
    struct leaf *prev, *next; /* LRU list, most recently used first */
    struct leaf *chain;       /* next in the same bucket */
    uint64_t hash;
    X509 *cert;
    char name[]; /* canonical */
};

struct mitm_leaves {
    EVP_PKEY *key;
    uint8_t *spki;
    size_t spki_len;
    size_t max, count, mask;
    uint64_t seed;
    struct leaf **buckets;
    struct leaf *head, *tail;
};

/* FNV-1a with a per-process seed. Not a keyed PRF, but a bucket can never
 * hold more than max entries, so a worst case costs max string compares. */
static uint64_t name_hash(uint64_t seed, const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull ^ seed;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

static struct leaf **bucket_of(struct mitm_leaves *lv, uint64_t hash)
{
    return &lv->buckets[hash & lv->mask];
}

static struct leaf *lookup(struct mitm_leaves *lv, const char *name, uint64_t hash)
{
    for (struct leaf *l = *bucket_of(lv, hash); l; l = l->chain)
        if (l->hash == hash && strcmp(l->name, name) == 0) return l;
    return NULL;
}

static void lru_unlink(struct mitm_leaves *lv, struct leaf *l)
{
    if (l->prev)
        l->prev->next = l->next;
    else
        lv->head = l->next;
    if (l->next)
        l->next->prev = l->prev;
    else
        lv->tail = l->prev;
    l->prev = l->next = NULL;
}

static void lru_push_front(struct mitm_leaves *lv, struct leaf *l)
{
    l->next = lv->head;
    l->prev = NULL;
    if (lv->head) lv->head->prev = l;
    lv->head = l;
    if (!lv->tail) lv->tail = l;
}

static void bucket_remove(struct mitm_leaves *lv, struct leaf *l)
{
    struct leaf **pp = bucket_of(lv, l->hash);
    while (*pp && *pp != l)
        pp = &(*pp)->chain;
    if (*pp) *pp = l->chain;
}

static void leaf_free(struct leaf *l)
{
    X509_free(l->cert);
    free(l);
}

static void evict_oldest(struct mitm_leaves *lv)
{
    struct leaf *l = lv->tail;
    if (!l) return;
    lru_unlink(lv, l);
    bucket_remove(lv, l);
    leaf_free(l);
    lv->count--;
}

static int make_key(struct mitm_leaves *lv, err_t *err)
{
    lv->key = EVP_EC_gen("P-256");
    int n = lv->key ? i2d_PUBKEY(lv->key, NULL) : -1;
    uint8_t *p = n > 0 ? malloc((size_t)n) : NULL;
    lv->spki = p;
    if (!p || i2d_PUBKEY(lv->key, &p) != n) {
        ERR_clear_error();
        return err_set(err, ENOMEM, "cannot generate the leaf key (out of memory?)");
    }
    lv->spki_len = (size_t)n;
    return 0;
}

int mitm_leaves_new(size_t max, struct mitm_leaves **out, err_t *err)
{
    *out = NULL;
    if (max == 0 || max > LEAVES_MAX_LIMIT)
        return err_set(err, EINVAL, "the certificate cache size must be 1 to %u, not %zu",
                       LEAVES_MAX_LIMIT, max);
    struct mitm_leaves *lv = calloc(1, sizeof *lv);
    size_t nbuckets = 16;
    while (nbuckets < max)
        nbuckets <<= 1;
    if (lv) lv->buckets = calloc(nbuckets, sizeof *lv->buckets);
    if (!lv || !lv->buckets) {
        free(lv);
        return err_set(err, ENOMEM, "out of memory for the certificate cache");
    }
    lv->max = max;
    lv->mask = nbuckets - 1;
    random_bytes(&lv->seed, sizeof lv->seed);
    int r = make_key(lv, err);
    if (r < 0) {
        mitm_leaves_free(lv);
        return r;
    }
    *out = lv;
    return 0;
}

void mitm_leaves_free(struct mitm_leaves *lv)
{
    if (!lv) return;
    while (lv->tail)
        evict_oldest(lv);
    free(lv->buckets);
    EVP_PKEY_free(lv->key);
    free(lv->spki);
    free(lv);
}

const uint8_t *mitm_leaves_spki(const struct mitm_leaves *lv, size_t *len)
{
    *len = lv->spki_len;
    return lv->spki;
}

EVP_PKEY *mitm_leaves_key(const struct mitm_leaves *lv)
{
    return lv->key;
}

size_t mitm_leaves_count(const struct mitm_leaves *lv)
{
    return lv->count;
}

X509 *mitm_leaves_get(struct mitm_leaves *lv, const char *name)
{
    char canon[MITM_NAME_MAX];
    if (!name || mitm_name_canon(name, strlen(name), canon, NULL, NULL) < 0) return NULL;
    struct leaf *l = lookup(lv, canon, name_hash(lv->seed, canon));
    if (!l) return NULL;
    lru_unlink(lv, l);
    lru_push_front(lv, l);
    return l->cert;
}

/* The certificate must be for our key and for this name: a mix-up between
 * replies would otherwise serve one host's certificate for another. */
static int parse_leaf(struct mitm_leaves *lv, const char *canon, enum mitm_name_kind kind,
                      const uint8_t *der, size_t len, X509 **out, err_t *err)
{
    const unsigned char *p = der;
    X509 *x = der && len > 0 && len <= LONG_MAX ? d2i_X509(NULL, &p, (long)len) : NULL;
    const char *problem = NULL;
    if (!x || p != der + len)
        problem = "is not exactly one DER certificate";
    else if (X509_check_private_key(x, lv->key) != 1)
        problem = "is not for this leaf key";
    else if (kind == MITM_NAME_DNS
                 ? X509_check_host(x, canon, 0, X509_CHECK_FLAG_NEVER_CHECK_SUBJECT, NULL) != 1
                 : X509_check_ip_asc(x, canon, 0) != 1)
        problem = "does not name the host";
    ERR_clear_error();
    if (problem) {
        X509_free(x);
        return err_set(err, EINVAL, "the certificate for %s %s; this is a bug in the keeper", canon,
                       problem);
    }
    *out = x;
    return 0;
}

static int insert(struct mitm_leaves *lv, const char *canon, uint64_t hash, X509 *x, err_t *err)
{
    size_t n = strlen(canon) + 1;
    struct leaf *l = malloc(sizeof *l + n);
    if (!l) return err_set(err, ENOMEM, "out of memory for the certificate cache");
    while (lv->count >= lv->max)
        evict_oldest(lv);
    memcpy(l->name, canon, n);
    l->hash = hash;
    l->cert = x;
    struct leaf **b = bucket_of(lv, hash);
    l->chain = *b;
    *b = l;
    lru_push_front(lv, l);
    lv->count++;
    return 0;
}

int mitm_leaves_put(struct mitm_leaves *lv, const char *name, const uint8_t *der, size_t len,
                    err_t *err)
{
    char canon[MITM_NAME_MAX];
    enum mitm_name_kind kind;
    X509 *x = NULL;
    int r = mitm_name_canon(name, name ? strlen(name) : 0, canon, &kind, err);
    if (r == 0) r = parse_leaf(lv, canon, kind, der, len, &x, err);
    if (r < 0) return err_wrap(err, "caching a leaf certificate");
    uint64_t hash = name_hash(lv->seed, canon);
    struct leaf *l = lookup(lv, canon, hash);
    if (l) { /* a fresher certificate for a cached name replaces the old one */
        X509_free(l->cert);
        l->cert = x;
        lru_unlink(lv, l);
        lru_push_front(lv, l);
        return 0;
    }
    r = insert(lv, canon, hash, x, err);
    if (r < 0) X509_free(x);
    return r;
}
