/* mitm mints the certificates a sandbox's TLS clients will trust, so these
 * check every property a strict verifier looks at (OpenSSL's X509_verify_cert
 * with X509_STRICT, hostname and IP checks without CN fallback), the CA's files
 * and their modes, the name checks, and that the leaf cache stays bounded. */
#include <errno.h>
#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"
#include "confine/confine.h"
#include "mitm/mitm.h"
#include "unit.h"

#define DAY 86400

/* A fresh directory path (not created) under /tmp; the caller removes it. */
static void tmp_path(char *out, size_t size)
{
    char hex[17];
    random_hex(hex, 8);
    snprintf(out, size, "/tmp/runtime-mitm-test-%s", hex);
}

static void rm_ca_dir(const char *dir)
{
    char p[512];
    snprintf(p, sizeof p, "%s/ca.key", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/ca.crt", dir);
    unlink(p);
    rmdir(dir);
}

static mode_t file_mode(const char *dir, const char *file)
{
    char p[512];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, file);
    return stat(p, &st) == 0 ? st.st_mode & 07777 : (mode_t)-1;
}

static X509 *pem_cert(const char *pem)
{
    BIO *b = BIO_new_mem_buf(pem, -1);
    X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
    BIO_free(b);
    return x;
}

static X509 *der_cert(const uint8_t *der, size_t len)
{
    const unsigned char *p = der;
    return d2i_X509(NULL, &p, (long)len);
}

static int ext_critical(X509 *x, int nid)
{
    int i = X509_get_ext_by_NID(x, nid, -1);
    return i < 0 ? -1 : X509_EXTENSION_get_critical(X509_get_ext(x, i));
}

/* Seconds from now to t (negative: in the past). */
static long secs_from_now(const ASN1_TIME *t)
{
    int days = 0, secs = 0;
    if (!ASN1_TIME_diff(&days, &secs, NULL, t)) return 0;
    return (long)days * DAY + secs;
}

/* What a TLS client does: chain to the CA only, strict, for a server, and match
 * the name against the SAN alone. */
static int verify_leaf(X509 *ca, X509 *leaf, const char *host, const char *ip)
{
    X509_STORE *store = X509_STORE_new();
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    int ok = -1;
    if (store && ctx && X509_STORE_add_cert(store, ca) &&
        X509_STORE_CTX_init(ctx, store, leaf, NULL)) {
        X509_VERIFY_PARAM *param = X509_STORE_CTX_get0_param(ctx);
        X509_VERIFY_PARAM_set_flags(param, X509_V_FLAG_X509_STRICT);
        X509_VERIFY_PARAM_set_purpose(param, X509_PURPOSE_SSL_SERVER);
        X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NEVER_CHECK_SUBJECT);
        if (host) X509_VERIFY_PARAM_set1_host(param, host, 0);
        if (ip) X509_VERIFY_PARAM_set1_ip_asc(param, ip);
        ok = X509_verify_cert(ctx);
        if (ok != 1 && getenv("MITM_TEST_VERBOSE"))
            fprintf(stderr, "  verify: %s\n",
                    X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx)));
    }
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(store);
    ERR_clear_error();
    return ok;
}

struct fixture {
    char dir[256];
    struct mitm_ca *ca;
    struct mitm_leaves *lv;
    X509 *ca_cert;
};

static int fixture_open(struct fixture *f, size_t max)
{
    err_t err = {0};
    memset(f, 0, sizeof *f);
    tmp_path(f->dir, sizeof f->dir);
    if (mitm_ca_load_or_create(f->dir, &f->ca, &err) < 0 ||
        mitm_leaves_new(max, &f->lv, &err) < 0) {
        fprintf(stderr, "  fixture: %s\n", err.msg);
        return -1;
    }
    f->ca_cert = pem_cert(mitm_ca_cert_pem(f->ca));
    return f->ca_cert ? 0 : -1;
}

static void fixture_close(struct fixture *f)
{
    X509_free(f->ca_cert);
    mitm_leaves_free(f->lv);
    mitm_ca_free(f->ca);
    rm_ca_dir(f->dir);
}

static X509 *mint(struct fixture *f, const char *name, uint8_t **der, size_t *len)
{
    size_t spki_len;
    const uint8_t *spki = mitm_leaves_spki(f->lv, &spki_len);
    err_t err = {0};
    if (mitm_ca_sign(f->ca, spki, spki_len, name, der, len, &err) < 0) {
        fprintf(stderr, "  mint %s: %s\n", name, err.msg);
        return NULL;
    }
    return der_cert(*der, *len);
}

/* ---- the CA ---- */

TEST(mitm_ca_create_then_load)
{
    char dir[256];
    err_t err = {0};
    struct mitm_ca *a = NULL, *b = NULL;
    tmp_path(dir, sizeof dir);
    CHECK(mitm_ca_load_or_create(dir, &a, &err) == 0);
    CHECK(file_mode(dir, "") == 0700);
    CHECK(file_mode(dir, "ca.key") == 0600);
    CHECK(file_mode(dir, "ca.crt") == 0644);
    CHECK(mitm_ca_load_or_create(dir, &b, &err) == 0);
    CHECK(a && b && strcmp(mitm_ca_cert_pem(a), mitm_ca_cert_pem(b)) == 0);
    CHECK(a && strstr(mitm_ca_cert_pem(a), "-----BEGIN CERTIFICATE-----") != NULL);
    mitm_ca_free(a);
    mitm_ca_free(b);
    rm_ca_dir(dir);
}

TEST(mitm_ca_refuses_readable_key)
{
    char dir[256], key[512];
    err_t err = {0};
    struct mitm_ca *a = NULL, *b = NULL;
    tmp_path(dir, sizeof dir);
    CHECK(mitm_ca_load_or_create(dir, &a, &err) == 0);
    snprintf(key, sizeof key, "%s/ca.key", dir);
    CHECK(chmod(key, 0640) == 0);
    CHECK(mitm_ca_load_or_create(dir, &b, &err) == -EPERM);
    CHECK(b == NULL);
    CHECK(strstr(err.msg, "readable") != NULL && strstr(err.msg, "chmod 600") != NULL);
    CHECK(chmod(key, 0604) == 0);
    CHECK(mitm_ca_load_or_create(dir, &b, &err) == -EPERM);
    CHECK(chmod(key, 0600) == 0);
    CHECK(mitm_ca_load_or_create(dir, &b, &err) == 0);
    mitm_ca_free(a);
    mitm_ca_free(b);
    rm_ca_dir(dir);
}

TEST(mitm_ca_cert_without_key_fails_key_without_cert_replaced)
{
    char dir[256], p[512];
    err_t err = {0};
    struct mitm_ca *a = NULL, *b = NULL;
    tmp_path(dir, sizeof dir);
    CHECK(mitm_ca_load_or_create(dir, &a, &err) == 0);
    char *old = a ? strdup(mitm_ca_cert_pem(a)) : NULL;
    mitm_ca_free(a);
    /* a key without its certificate was never published: a new CA is made */
    snprintf(p, sizeof p, "%s/ca.crt", dir);
    CHECK(unlink(p) == 0);
    CHECK(mitm_ca_load_or_create(dir, &b, &err) == 0);
    CHECK(b && old && strcmp(old, mitm_ca_cert_pem(b)) != 0);
    mitm_ca_free(b);
    b = NULL;
    /* a certificate without its key cannot sign: refuse, and say what to do */
    snprintf(p, sizeof p, "%s/ca.key", dir);
    CHECK(unlink(p) == 0);
    CHECK(mitm_ca_load_or_create(dir, &b, &err) < 0);
    CHECK(b == NULL && strstr(err.msg, "ca.key") != NULL);
    free(old);
    rm_ca_dir(dir);
}

TEST(mitm_ca_properties)
{
    struct fixture f;
    CHECK(fixture_open(&f, 4) == 0);
    X509 *ca = f.ca_cert;
    if (!ca) goto out;
    CHECK(X509_get_version(ca) == X509_VERSION_3);
    CHECK((X509_get_extension_flags(ca) & EXFLAG_CA) != 0);
    CHECK(ext_critical(ca, NID_basic_constraints) == 1);
    CHECK(X509_get_pathlen(ca) == 0);
    CHECK(ext_critical(ca, NID_key_usage) == 1);
    CHECK(X509_get_key_usage(ca) == (KU_KEY_CERT_SIGN | KU_CRL_SIGN));
    CHECK(X509_get0_subject_key_id(ca) != NULL);
    CHECK(X509_self_signed(ca, 1) == 1);
    long life = secs_from_now(X509_get0_notAfter(ca)) - secs_from_now(X509_get0_notBefore(ca));
    CHECK(life >= 3650L * DAY && life <= 3652L * DAY);
    CHECK(secs_from_now(X509_get0_notBefore(ca)) <= 0);
    X509_NAME *subj = X509_get_subject_name(ca);
    char cn[128] = "";
    X509_NAME_get_text_by_NID(subj, NID_commonName, cn, sizeof cn);
    CHECK(strstr(cn, "runtimed") != NULL);
    X509_STORE *store = X509_STORE_new();
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    CHECK(store && ctx && X509_STORE_add_cert(store, ca) &&
          X509_STORE_CTX_init(ctx, store, ca, NULL) && X509_verify_cert(ctx) == 1);
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(store);
out:
    fixture_close(&f);
}

/* ---- leaves ---- */

static void check_leaf_props(int *failed_, struct fixture *f, X509 *leaf, int gen_type)
{
    X509 *ca = f->ca_cert;
    CHECK(X509_get_version(leaf) == X509_VERSION_3);
    GENERAL_NAMES *san = X509_get_ext_d2i(leaf, NID_subject_alt_name, NULL, NULL);
    CHECK(san && sk_GENERAL_NAME_num(san) == 1 && sk_GENERAL_NAME_value(san, 0)->type == gen_type);
    GENERAL_NAMES_free(san);
    /* SKI is the SHA-1 of the leaf's public key bits (RFC 5280 method 1) */
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    CHECK(X509_pubkey_digest(leaf, EVP_sha1(), md, &mdlen) == 1);
    const ASN1_OCTET_STRING *ski = X509_get0_subject_key_id(leaf);
    CHECK(ski && ASN1_STRING_length(ski) == (int)mdlen &&
          memcmp(ASN1_STRING_get0_data(ski), md, mdlen) == 0);
    const ASN1_OCTET_STRING *aki = X509_get0_authority_key_id(leaf);
    CHECK(aki && ASN1_OCTET_STRING_cmp(aki, X509_get0_subject_key_id(ca)) == 0);
    CHECK((X509_get_extension_flags(leaf) & EXFLAG_CA) == 0);
    CHECK(ext_critical(leaf, NID_basic_constraints) == 1);
    CHECK(ext_critical(leaf, NID_key_usage) == 1);
    CHECK(X509_get_key_usage(leaf) == KU_DIGITAL_SIGNATURE);
    CHECK(X509_get_extended_key_usage(leaf) == XKU_SSL_SERVER);
    CHECK(secs_from_now(X509_get0_notBefore(leaf)) <= -86000);
    CHECK(ASN1_TIME_compare(X509_get0_notAfter(leaf), X509_get0_notAfter(ca)) <= 0);
    CHECK(secs_from_now(X509_get0_notAfter(leaf)) <= (long)MITM_LEAF_DAYS * DAY);
    CHECK(secs_from_now(X509_get0_notAfter(leaf)) >= (long)MITM_LEAF_DAYS * DAY - 60);
    CHECK(X509_check_private_key(leaf, mitm_leaves_key(f->lv)) == 1);
    BIGNUM *serial = ASN1_INTEGER_to_BN(X509_get0_serialNumber(leaf), NULL);
    CHECK(serial && !BN_is_negative(serial) && !BN_is_zero(serial) && BN_num_bits(serial) <= 128 &&
          BN_num_bits(serial) > 96);
    BN_free(serial);
}

TEST(mitm_leaf_dns)
{
    struct fixture f;
    uint8_t *der = NULL, *der2 = NULL;
    size_t len = 0, len2 = 0;
    CHECK(fixture_open(&f, 4) == 0);
    X509 *leaf = mint(&f, "api.example.test", &der, &len);
    X509 *again = mint(&f, "api.example.test", &der2, &len2);
    CHECK(leaf && again);
    if (!leaf || !again) goto out;
    check_leaf_props(failed_, &f, leaf, GEN_DNS);
    CHECK(ASN1_INTEGER_cmp(X509_get0_serialNumber(leaf), X509_get0_serialNumber(again)) != 0);
    CHECK(verify_leaf(f.ca_cert, leaf, "api.example.test", NULL) == 1);
    CHECK(verify_leaf(f.ca_cert, leaf, "API.Example.Test", NULL) == 1);
    CHECK(verify_leaf(f.ca_cert, leaf, "other.example.test", NULL) != 1);
    CHECK(verify_leaf(f.ca_cert, leaf, "example.test", NULL) != 1);
    CHECK(verify_leaf(f.ca_cert, leaf, NULL, "127.0.0.1") != 1);
out:
    X509_free(leaf);
    X509_free(again);
    free(der);
    free(der2);
    fixture_close(&f);
}

TEST(mitm_leaf_ipv4_ipv6)
{
    struct fixture f;
    uint8_t *d4 = NULL, *d6 = NULL;
    size_t l4 = 0, l6 = 0;
    CHECK(fixture_open(&f, 4) == 0);
    X509 *v4 = mint(&f, "127.0.0.1", &d4, &l4);
    X509 *v6 = mint(&f, "0:0::1", &d6, &l6); /* a non-canonical spelling of ::1 */
    CHECK(v4 && v6);
    if (!v4 || !v6) goto out;
    check_leaf_props(failed_, &f, v4, GEN_IPADD);
    check_leaf_props(failed_, &f, v6, GEN_IPADD);
    CHECK(verify_leaf(f.ca_cert, v4, NULL, "127.0.0.1") == 1);
    CHECK(verify_leaf(f.ca_cert, v4, NULL, "127.0.0.2") != 1);
    CHECK(verify_leaf(f.ca_cert, v4, "127.0.0.1", NULL) != 1); /* an IP is not a DNS SAN */
    CHECK(verify_leaf(f.ca_cert, v6, NULL, "::1") == 1);
    CHECK(verify_leaf(f.ca_cert, v6, NULL, "::2") != 1);
    CHECK(verify_leaf(f.ca_cert, v6, NULL, "127.0.0.1") != 1);
out:
    X509_free(v4);
    X509_free(v6);
    free(d4);
    free(d6);
    fixture_close(&f);
}

TEST(mitm_leaf_from_other_ca_fails)
{
    struct fixture f, g;
    uint8_t *der = NULL;
    size_t len = 0;
    CHECK(fixture_open(&f, 4) == 0);
    CHECK(fixture_open(&g, 4) == 0);
    X509 *leaf = mint(&f, "api.example.test", &der, &len);
    CHECK(leaf && verify_leaf(g.ca_cert, leaf, "api.example.test", NULL) != 1);
    X509_free(leaf);
    free(der);
    fixture_close(&g);
    fixture_close(&f);
}

TEST(mitm_sign_refuses_bad_spki)
{
    struct fixture f;
    uint8_t *der = NULL;
    size_t len = 0, spki_len = 0;
    err_t err = {0};
    CHECK(fixture_open(&f, 4) == 0);
    const uint8_t *spki = mitm_leaves_spki(f.lv, &spki_len);
    uint8_t longer[1100] = {0};
    memcpy(longer, spki, spki_len);
    CHECK(mitm_ca_sign(f.ca, spki, spki_len - 1, "a.test", &der, &len, &err) < 0);
    CHECK(mitm_ca_sign(f.ca, longer, spki_len + 1, "a.test", &der, &len, &err) < 0);
    CHECK(mitm_ca_sign(f.ca, longer, sizeof longer, "a.test", &der, &len, &err) < 0);
    CHECK(mitm_ca_sign(f.ca, NULL, 0, "a.test", &der, &len, &err) < 0);
    EVP_PKEY *rsa = EVP_RSA_gen(2048);
    unsigned char *rsa_der = NULL;
    int rsa_len = rsa ? i2d_PUBKEY(rsa, &rsa_der) : -1;
    CHECK(rsa_len > 0 &&
          mitm_ca_sign(f.ca, rsa_der, (size_t)rsa_len, "a.test", &der, &len, &err) == -EINVAL);
    CHECK(strstr(err.msg, "P-256") != NULL);
    CHECK(der == NULL && len == 0);
    OPENSSL_free(rsa_der);
    EVP_PKEY_free(rsa);
    fixture_close(&f);
}

/* ---- names ---- */

static int canon(const char *name, char *out)
{
    return mitm_name_canon(name, strlen(name), out, NULL, NULL);
}

TEST(mitm_name_accepts)
{
    char out[MITM_NAME_MAX];
    enum mitm_name_kind kind = -1;
    CHECK(canon("api.example.test", out) == 0);
    CHECK_STR(out, "api.example.test");
    CHECK(canon("API.GitHub.COM", out) == 0);
    CHECK_STR(out, "api.github.com");
    CHECK(canon("localhost", out) == 0);
    CHECK(canon("xn--bcher-kva.example", out) == 0);
    CHECK(canon("my_bucket.s3.amazonaws.com", out) == 0);
    CHECK(mitm_name_canon("10.0.0.1", 8, out, &kind, NULL) == 0 && kind == MITM_NAME_IPV4);
    CHECK(mitm_name_canon("2001:DB8:0::1", 13, out, &kind, NULL) == 0 && kind == MITM_NAME_IPV6);
    CHECK_STR(out, "2001:db8::1");
    CHECK(mitm_name_canon("a.b", 3, out, &kind, NULL) == 0 && kind == MITM_NAME_DNS);
    char longest[254];
    memset(longest, 'a', 253); /* 63+1+63+1+63+1+61 */
    longest[63] = longest[127] = longest[191] = '.';
    longest[253] = '\0';
    CHECK(canon(longest, out) == 0);
}

TEST(mitm_name_refuses)
{
    static const char *bad[] = {
        "",
        " ",
        "api .example.test",
        "*.example.test",
        "a/b",
        "a\\b",
        "a..b",
        ".a.b",
        "a.b.",
        "-a.b",
        "a-.b",
        "a:b",
        "[::1]",
        "1.2.3",
        "2130706433",
        "0x7f.1",
        "1.2.3.256",
        "a.b.1",
        "a\nb",
        "a\tb",
        "caf\xc3\xa9.test",
        "a%b",
        "a@b",
        "::1%lo",
        "01.2.3.4x",
    };
    char out[MITM_NAME_MAX];
    err_t err = {0};
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        int r = mitm_name_canon(bad[i], strlen(bad[i]), out, NULL, &err);
        if (r != -EINVAL) fprintf(stderr, "  accepted bad name \"%s\"\n", bad[i]);
        CHECK(r == -EINVAL);
    }
    CHECK(mitm_name_canon("a\0b.test", 8, out, NULL, &err) == -EINVAL);
    CHECK(strstr(err.msg, "NUL") != NULL);
    CHECK(mitm_name_canon(NULL, 0, out, NULL, &err) == -EINVAL);
    char label[70];
    memset(label, 'a', 64);
    strcpy(label + 64, ".test");
    CHECK(canon(label, out) == -EINVAL);
    char big[300];
    memset(big, 'a', sizeof big);
    for (size_t i = 50; i < sizeof big; i += 50)
        big[i] = '.';
    big[254] = '\0'; /* 254 characters */
    CHECK(mitm_name_canon(big, 254, out, NULL, &err) == -EINVAL);
    CHECK(strstr(err.msg, "253") != NULL);
    /* no control bytes of the sandbox's reach the message */
    CHECK(mitm_name_canon("a\x1b[31mb", 8, out, NULL, &err) == -EINVAL);
    CHECK(strchr(err.msg, '\x1b') == NULL);
}

TEST(mitm_sign_refuses_bad_names)
{
    struct fixture f;
    static const char *bad[] = {"", "*.example.test", "a b.test", "a/b", "[::1]", "1.2.3"};
    uint8_t *der = NULL;
    size_t len = 0, spki_len = 0;
    err_t err = {0};
    CHECK(fixture_open(&f, 4) == 0);
    const uint8_t *spki = mitm_leaves_spki(f.lv, &spki_len);
    for (size_t i = 0; i < ARRAY_LEN(bad); i++)
        CHECK(mitm_ca_sign(f.ca, spki, spki_len, bad[i], &der, &len, &err) == -EINVAL);
    CHECK(der == NULL && strstr(err.msg, "minting") != NULL);
    fixture_close(&f);
}

/* ---- the cache ---- */

static int put_minted(struct fixture *f, const char *name)
{
    uint8_t *der = NULL;
    size_t len = 0, spki_len = 0;
    const uint8_t *spki = mitm_leaves_spki(f->lv, &spki_len);
    err_t err = {0};
    int r = mitm_ca_sign(f->ca, spki, spki_len, name, &der, &len, &err);
    if (r == 0) r = mitm_leaves_put(f->lv, name, der, len, &err);
    if (r < 0) fprintf(stderr, "  put %s: %s\n", name, err.msg);
    free(der);
    return r;
}

TEST(mitm_cache_put_get)
{
    struct fixture f;
    CHECK(fixture_open(&f, 2) == 0);
    CHECK(mitm_leaves_get(f.lv, "a.test") == NULL);
    CHECK(put_minted(&f, "a.test") == 0);
    CHECK(put_minted(&f, "b.test") == 0);
    X509 *a = mitm_leaves_get(f.lv, "A.TEST"); /* same canonical name */
    CHECK(a && X509_check_host(a, "a.test", 0, 0, NULL) == 1);
    CHECK(mitm_leaves_count(f.lv) == 2);
    CHECK(put_minted(&f, "c.test") == 0); /* b is the least recently used */
    CHECK(mitm_leaves_count(f.lv) == 2);
    CHECK(mitm_leaves_get(f.lv, "b.test") == NULL);
    CHECK(mitm_leaves_get(f.lv, "a.test") != NULL);
    CHECK(mitm_leaves_get(f.lv, "c.test") != NULL);
    CHECK(put_minted(&f, "c.test") == 0); /* replacing keeps the count */
    CHECK(mitm_leaves_count(f.lv) == 2);
    CHECK(mitm_leaves_get(f.lv, "*.test") == NULL);
    fixture_close(&f);
}

TEST(mitm_cache_refuses_wrong_cert)
{
    struct fixture f;
    uint8_t *der = NULL;
    size_t len = 0;
    err_t err = {0};
    CHECK(fixture_open(&f, 4) == 0);
    X509 *x = mint(&f, "a.test", &der, &len);
    CHECK(x != NULL);
    CHECK(mitm_leaves_put(f.lv, "b.test", der, len, &err) == -EINVAL);
    CHECK(strstr(err.msg, "does not name") != NULL);
    CHECK(mitm_leaves_put(f.lv, "a.test", der, len - 1, &err) == -EINVAL);
    CHECK(mitm_leaves_put(f.lv, "a.test", NULL, 0, &err) == -EINVAL);
    CHECK(mitm_leaves_put(f.lv, "a b", der, len, &err) == -EINVAL);
    struct mitm_leaves *other = NULL;
    CHECK(mitm_leaves_new(4, &other, &err) == 0);
    CHECK(other && mitm_leaves_put(other, "a.test", der, len, &err) == -EINVAL);
    CHECK(strstr(err.msg, "leaf key") != NULL);
    CHECK(mitm_leaves_count(f.lv) == 0);
    mitm_leaves_free(other);
    CHECK(mitm_leaves_new(0, &other, &err) == -EINVAL && other == NULL);
    X509_free(x);
    free(der);
    fixture_close(&f);
}

TEST(mitm_cache_bounded)
{
    struct fixture f;
    char name[64];
    size_t peak = 0;
    int bad = 0;
    CHECK(fixture_open(&f, MITM_CACHE_MAX) == 0);
    for (int i = 0; i < 10000 && !bad; i++) {
        snprintf(name, sizeof name, "host-%d.example.test", i);
        bad = put_minted(&f, name) < 0;
        if (mitm_leaves_count(f.lv) > peak) peak = mitm_leaves_count(f.lv);
        /* the first name is kept in use, so it is never the one evicted */
        if (!mitm_leaves_get(f.lv, "host-0.example.test")) bad = 1;
    }
    CHECK(!bad);
    CHECK(peak == MITM_CACHE_MAX);
    CHECK(mitm_leaves_count(f.lv) == MITM_CACHE_MAX);
    CHECK(mitm_leaves_get(f.lv, "host-1.example.test") == NULL);
    CHECK(mitm_leaves_get(f.lv, "host-8976.example.test") == NULL);
    CHECK(mitm_leaves_get(f.lv, "host-8977.example.test") != NULL);
    CHECK(mitm_leaves_get(f.lv, "host-9999.example.test") != NULL);
    fixture_close(&f);
}

/* ---- a CA near or past its end (made here: mitm only makes 10-year ones) ---- */

static int write_pem(const char *dir, const char *file, X509 *x, EVP_PKEY *k, mode_t mode)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    FILE *f = fopen(p, "w");
    int ok = f && (x ? PEM_write_X509(f, x) : PEM_write_PrivateKey(f, k, NULL, NULL, 0, 0, 0));
    if (f) fclose(f);
    return ok && chmod(p, mode) == 0 ? 0 : -1;
}

/* Writes dir/ca.key and dir/ca.crt for a CA whose validity ends in days. */
static int short_ca(const char *dir, long days)
{
    EVP_PKEY *k = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    X509V3_CTX ctx;
    X509_EXTENSION *bc = NULL, *ku = NULL, *ski = NULL;
    int ok = k && x && mkdir(dir, 0700) == 0 && X509_set_version(x, X509_VERSION_3) &&
             ASN1_INTEGER_set(X509_get_serialNumber(x), 7) &&
             X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
                                        (const unsigned char *)"short CA", -1, -1, 0) &&
             X509_set_issuer_name(x, X509_get_subject_name(x)) && X509_set_pubkey(x, k) &&
             X509_gmtime_adj(X509_getm_notBefore(x), -2 * DAY) &&
             X509_time_adj_ex(X509_getm_notAfter(x), (int)days, 0, NULL);
    X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
    ok = ok && (bc = X509V3_EXT_conf_nid(NULL, &ctx, NID_basic_constraints, "critical,CA:TRUE")) &&
         (ku = X509V3_EXT_conf_nid(NULL, &ctx, NID_key_usage, "critical,keyCertSign")) &&
         (ski = X509V3_EXT_conf_nid(NULL, &ctx, NID_subject_key_identifier, "hash")) &&
         X509_add_ext(x, bc, -1) && X509_add_ext(x, ku, -1) && X509_add_ext(x, ski, -1) &&
         X509_sign(x, k, EVP_sha256()) && write_pem(dir, "ca.key", NULL, k, 0600) == 0 &&
         write_pem(dir, "ca.crt", x, NULL, 0644) == 0;
    X509_EXTENSION_free(bc);
    X509_EXTENSION_free(ku);
    X509_EXTENSION_free(ski);
    X509_free(x);
    EVP_PKEY_free(k);
    return ok ? 0 : -1;
}

TEST(mitm_leaf_capped_by_ca)
{
    struct fixture f = {0};
    uint8_t *der = NULL;
    size_t len = 0;
    err_t err = {0};
    tmp_path(f.dir, sizeof f.dir);
    CHECK(short_ca(f.dir, 10) == 0);
    CHECK(mitm_ca_load_or_create(f.dir, &f.ca, &err) == 0);
    CHECK(mitm_leaves_new(4, &f.lv, &err) == 0);
    f.ca_cert = f.ca ? pem_cert(mitm_ca_cert_pem(f.ca)) : NULL;
    X509 *leaf = f.ca_cert && f.lv ? mint(&f, "api.example.test", &der, &len) : NULL;
    CHECK(leaf && ASN1_TIME_compare(X509_get0_notAfter(leaf), X509_get0_notAfter(f.ca_cert)) == 0);
    CHECK(leaf &&
          ASN1_TIME_compare(X509_get0_notBefore(leaf), X509_get0_notBefore(f.ca_cert)) >= 0);
    CHECK(leaf && verify_leaf(f.ca_cert, leaf, "api.example.test", NULL) == 1);
    X509_free(leaf);
    free(der);
    fixture_close(&f);
}

TEST(mitm_ca_expired_refused)
{
    char dir[256];
    err_t err = {0};
    struct mitm_ca *ca = NULL;
    tmp_path(dir, sizeof dir);
    CHECK(short_ca(dir, -1) == 0);
    CHECK(mitm_ca_load_or_create(dir, &ca, &err) == -EKEYEXPIRED);
    CHECK(ca == NULL && strstr(err.msg, "expired") != NULL);
    rm_ca_dir(dir);
}

/* ---- the signer's socket ---- */

struct serving {
    int sock;
    struct mitm_ca *ca;
    int status;
};

static void *serve_thread(void *arg)
{
    struct serving *s = arg;
    s->status = mitm_signer_serve(s->sock, s->ca);
    return NULL;
}

/* What a request's done callback was told. */
struct got {
    int calls, r;
    uint8_t *der;
    size_t len;
    char msg[512];
};

static void on_got(int r, const uint8_t *der, size_t len, const err_t *err, void *arg)
{
    struct got *g = arg;
    g->calls++;
    g->r = r;
    if (r == 0 && (g->der = malloc(len))) {
        memcpy(g->der, der, len);
        g->len = len;
    }
    if (r < 0) snprintf(g->msg, sizeof g->msg, "%s", err->msg);
}

/* Runs the loop until *calls reaches want, or ms have passed. */
static void run_until(struct event_base *base, const int *calls, int want, unsigned ms)
{
    uint64_t end = now_ms() + ms;
    while (*calls < want && now_ms() < end) {
        event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
        if (*calls < want) usleep(1000);
    }
}

/* The fake signer's side: the id of the next request on sock, 0 when none. */
static uint32_t fake_take(int sock)
{
    struct mitm_sign_req rq;
    ssize_t n = recv(sock, &rq, sizeof rq, MSG_DONTWAIT);
    return n == (ssize_t)sizeof rq ? rq.id : 0;
}

static void fake_answer(int sock, uint32_t id, int status, const char *body)
{
    uint8_t buf[MITM_ANSWER_MAX];
    struct mitm_sign_ans h = {.id = id, .status = status, .len = (uint32_t)strlen(body)};
    memcpy(buf, &h, sizeof h);
    memcpy(buf + sizeof h, body, h.len);
    if (send(sock, buf, sizeof h + h.len, 0) < 0) perror("fake_answer");
}

static const uint8_t fake_spki[91] = {0x30};

/* A malformed record is answered (-EPROTO) and the signer keeps serving: a
 * good request after it gets its leaf, and EOF ends the loop with 0. Through
 * the server's client: two requests in flight, each answered as its own. */
TEST(mitm_signer_answers_malformed_and_goes_on)
{
    struct fixture f;
    CHECK(fixture_open(&f, 4) == 0);
    int sp[2];
    CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) == 0);
    struct serving s = {.sock = sp[1], .ca = f.ca, .status = 1};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, serve_thread, &s) == 0);

    struct mitm_sign_req bad = {.id = 77, .spki_len = 5000};
    CHECK(send(sp[0], &bad, sizeof bad, 0) == (ssize_t)sizeof bad);
    uint8_t buf[MITM_ANSWER_MAX];
    struct mitm_sign_ans h = {0};
    CHECK(recv(sp[0], buf, sizeof buf, 0) >= (ssize_t)sizeof h);
    memcpy(&h, buf, sizeof h);
    CHECK(h.id == 77 && h.status == -EPROTO && h.len > 0);

    struct event_base *base = event_base_new();
    struct mitm_signer_client *sc = NULL;
    err_t err = {0};
    CHECK(mitm_signer_client_new(base, sp[0], 5000, &sc, &err) == 0);
    size_t spki_len;
    const uint8_t *spki = mitm_leaves_spki(f.lv, &spki_len);
    struct got good = {0}, refused = {0};
    CHECK(mitm_signer_client_sign(sc, "api.example.com", spki, spki_len, on_got, &good, &err) == 0);
    CHECK(mitm_signer_client_sign(sc, "bad name", spki, spki_len, on_got, &refused, &err) == 0);
    CHECK(good.calls == 0 && refused.calls == 0); /* never from within sign */
    run_until(base, &refused.calls, 1, 5000);
    run_until(base, &good.calls, 1, 5000);
    CHECK(good.calls == 1 && good.r == 0);
    X509 *x = good.der ? der_cert(good.der, good.len) : NULL;
    CHECK(x != NULL);
    CHECK(x && mitm_leaves_put(f.lv, "api.example.com", good.der, good.len, &err) == 0);
    CHECK(refused.calls == 1 && refused.r == -EINVAL);
    CHECK(strstr(refused.msg, "minting a certificate") != NULL);
    CHECK(mitm_signer_client_pending(sc) == 0);

    mitm_signer_client_free(sc);
    close(sp[0]);
    pthread_join(t, NULL);
    CHECK(s.status == 0);
    X509_free(x);
    free(good.der);
    close(sp[1]);
    event_base_free(base);
    fixture_close(&f);
}

/* A signer that is gone fails the request at once, saying so; without a
 * signer at all, too. The callback is never called then. */
TEST(mitm_signer_gone_fails_at_once)
{
    int sp[2];
    CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) == 0);
    close(sp[1]);
    struct event_base *base = event_base_new();
    struct mitm_signer_client *sc = NULL, *none = NULL;
    err_t err = {0};
    struct got g = {0};
    CHECK(mitm_signer_client_new(base, sp[0], 5000, &sc, &err) == 0);
    CHECK(mitm_signer_client_sign(sc, "example.com", fake_spki, sizeof fake_spki, on_got, &g,
                                  &err) == -EPIPE);
    CHECK(strstr(err.msg, "the signer process has exited") != NULL);
    CHECK(mitm_signer_client_new(base, -1, 5000, &none, &err) == 0);
    CHECK(mitm_signer_client_sign(none, "example.com", fake_spki, sizeof fake_spki, on_got, &g,
                                  &err) == -ENOTSUP);
    event_base_loop(base, EVLOOP_NONBLOCK);
    CHECK(g.calls == 0);
    mitm_signer_client_free(sc);
    mitm_signer_client_free(none);
    event_base_free(base);
    close(sp[0]);
}

/* Answers go to their requests by id, whatever their order; an answer no
 * request waits for is dropped. */
TEST(mitm_signer_client_matches_ids)
{
    int sp[2];
    CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) == 0);
    struct event_base *base = event_base_new();
    struct mitm_signer_client *sc = NULL;
    err_t err = {0};
    struct got a = {0}, b = {0};
    CHECK(mitm_signer_client_new(base, sp[0], 5000, &sc, &err) == 0);
    CHECK(mitm_signer_client_sign(sc, "a.example", fake_spki, sizeof fake_spki, on_got, &a, &err) ==
          0);
    CHECK(mitm_signer_client_sign(sc, "b.example", fake_spki, sizeof fake_spki, on_got, &b, &err) ==
          0);
    uint32_t ia = fake_take(sp[1]), ib = fake_take(sp[1]);
    CHECK(ia && ib && ia != ib);
    fake_answer(sp[1], ib, 0, "leaf-b");
    fake_answer(sp[1], ia + ib + 1000, 0, "nobody's");
    fake_answer(sp[1], ia, -EACCES, "no, a");
    run_until(base, &a.calls, 1, 5000);
    CHECK(b.calls == 1 && b.r == 0 && b.len == 6 && b.der && memcmp(b.der, "leaf-b", 6) == 0);
    CHECK(a.calls == 1 && a.r == -EACCES);
    CHECK_STR(a.msg, "no, a");
    CHECK(mitm_signer_client_pending(sc) == 0);
    mitm_signer_client_free(sc);
    event_base_free(base);
    free(b.der);
    close(sp[0]);
    close(sp[1]);
}

/* A signer that does not answer: the request fails after its timeout, and
 * its late answer is not taken for the next request's. */
TEST(mitm_signer_client_times_out)
{
    int sp[2];
    CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) == 0);
    struct event_base *base = event_base_new();
    struct mitm_signer_client *sc = NULL;
    err_t err = {0};
    struct got slow = {0}, next = {0};
    CHECK(mitm_signer_client_new(base, sp[0], 100, &sc, &err) == 0);
    uint64_t t0 = now_ms();
    CHECK(mitm_signer_client_sign(sc, "slow.example", fake_spki, sizeof fake_spki, on_got, &slow,
                                  &err) == 0);
    run_until(base, &slow.calls, 1, 5000);
    CHECK(slow.calls == 1 && slow.r == -ETIMEDOUT);
    CHECK(now_ms() - t0 >= 90 && now_ms() - t0 < 2000);
    CHECK(strstr(slow.msg, "did not answer within 100 ms") != NULL);
    CHECK(mitm_signer_client_sign(sc, "next.example", fake_spki, sizeof fake_spki, on_got, &next,
                                  &err) == 0);
    uint32_t is = fake_take(sp[1]), in = fake_take(sp[1]);
    CHECK(is && in && is != in);
    fake_answer(sp[1], is, 0, "late");
    fake_answer(sp[1], in, 0, "next");
    run_until(base, &next.calls, 1, 5000);
    CHECK(slow.calls == 1);
    CHECK(next.calls == 1 && next.r == 0 && next.der && memcmp(next.der, "next", 4) == 0);
    mitm_signer_client_free(sc);
    event_base_free(base);
    free(next.der);
    close(sp[0]);
    close(sp[1]);
}

/* The signer hangs up with requests pending: each fails, saying why, and a
 * new one fails at once. Freeing the client ends what is left, -ECANCELED. */
TEST(mitm_signer_client_hang_up_fails_pending)
{
    int sp[2];
    CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) == 0);
    struct event_base *base = event_base_new();
    struct mitm_signer_client *sc = NULL, *other = NULL;
    err_t err = {0};
    struct got g[3] = {{0}}, late = {0}, cut = {0};
    CHECK(mitm_signer_client_new(base, sp[0], 5000, &sc, &err) == 0);
    for (int i = 0; i < 3; i++)
        CHECK(mitm_signer_client_sign(sc, "x.example", fake_spki, sizeof fake_spki, on_got, &g[i],
                                      &err) == 0);
    close(sp[1]);
    uint64_t t0 = now_ms();
    run_until(base, &g[2].calls, 1, 5000);
    CHECK(now_ms() - t0 < 1000);
    for (int i = 0; i < 3; i++) {
        CHECK(g[i].calls == 1 && g[i].r == -EPIPE);
        CHECK(strstr(g[i].msg, "the signer process has exited") != NULL);
    }
    CHECK(mitm_signer_client_sign(sc, "y.example", fake_spki, sizeof fake_spki, on_got, &late,
                                  &err) == -EPIPE);
    CHECK(late.calls == 0 && mitm_signer_client_pending(sc) == 0);
    mitm_signer_client_free(sc);
    close(sp[0]);

    CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) == 0);
    CHECK(mitm_signer_client_new(base, sp[0], 5000, &other, &err) == 0);
    CHECK(mitm_signer_client_sign(other, "z.example", fake_spki, sizeof fake_spki, on_got, &cut,
                                  &err) == 0);
    mitm_signer_client_free(other);
    CHECK(cut.calls == 1 && cut.r == -ECANCELED);
    event_base_free(base);
    close(sp[0]);
    close(sp[1]);
}

/* At most MITM_SIGNER_INFLIGHT requests are on the socket; the rest wait in
 * order and go as answers come back. */
TEST(mitm_signer_client_bounds_inflight)
{
    enum { N = MITM_SIGNER_INFLIGHT + 5 };
    int sp[2];
    CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) == 0);
    struct event_base *base = event_base_new();
    struct mitm_signer_client *sc = NULL;
    err_t err = {0};
    static struct got g[N];
    memset(g, 0, sizeof g);
    int done = 0;
    CHECK(mitm_signer_client_new(base, sp[0], 5000, &sc, &err) == 0);
    for (int i = 0; i < N; i++)
        CHECK(mitm_signer_client_sign(sc, "many.example", fake_spki, sizeof fake_spki, on_got,
                                      &g[i], &err) == 0);
    uint32_t ids[N];
    int seen = 0;
    while (seen < N && (ids[seen] = fake_take(sp[1])))
        seen++;
    CHECK(seen == MITM_SIGNER_INFLIGHT);
    for (int i = 0; i < seen; i++)
        fake_answer(sp[1], ids[i], 0, "leaf");
    uint64_t end = now_ms() + 5000;
    while (seen < N && now_ms() < end) {
        event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
        uint32_t id;
        while (seen < N && (id = fake_take(sp[1]))) {
            ids[seen++] = id;
            fake_answer(sp[1], id, 0, "leaf");
        }
    }
    CHECK(seen == N);
    while (done < N && now_ms() < end) {
        event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
        done = 0;
        for (int i = 0; i < N; i++)
            done += g[i].calls;
    }
    CHECK(done == N);
    for (int i = 0; i < N; i++) {
        CHECK(g[i].calls == 1 && g[i].r == 0);
        free(g[i].der);
    }
    CHECK(mitm_signer_client_pending(sc) == 0);
    mitm_signer_client_free(sc);
    event_base_free(base);
    close(sp[0]);
    close(sp[1]);
}

/* The signer under its own seccomp allow-list (confine_signer_seccomp, as runtimed
 * installs it after loading the CA) still mints a leaf the CA verifies: the list holds
 * what signing needs. A forked child, so that the filter stays with it. */
TEST(mitm_signer_signs_under_its_filter)
{
    struct fixture f;
    CHECK(fixture_open(&f, 4) == 0);
    int sp[2];
    CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(sp[0]);
        err_t err = {0};
        if (confine_signer_seccomp(&err) < 0) _exit(2);
        _exit(mitm_signer_serve(sp[1], f.ca) == 0 ? 0 : 3);
    }
    close(sp[1]);
    static struct mitm_sign_req rq = {.id = 41};
    size_t spki_len;
    const uint8_t *spki = mitm_leaves_spki(f.lv, &spki_len);
    rq.spki_len = (uint32_t)spki_len;
    memcpy(rq.spki, spki, spki_len);
    snprintf(rq.name, sizeof rq.name, "api.example.com");
    CHECK(send(sp[0], &rq, sizeof rq, 0) == (ssize_t)sizeof rq);
    static uint8_t buf[MITM_ANSWER_MAX];
    struct mitm_sign_ans h = {0};
    ssize_t n = recv(sp[0], buf, sizeof buf, 0);
    CHECK(n >= (ssize_t)sizeof h);
    if (n >= (ssize_t)sizeof h) memcpy(&h, buf, sizeof h);
    CHECK(h.id == 41 && h.status == 0 && h.len > 0 && sizeof h + h.len == (size_t)n);
    X509 *leaf = h.status == 0 ? der_cert(buf + sizeof h, h.len) : NULL;
    CHECK(leaf != NULL);
    CHECK(leaf && X509_verify(leaf, X509_get0_pubkey(f.ca_cert)) == 1);
    close(sp[0]); /* the signer's loop ends at EOF, with 0 */
    int st = -1;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    X509_free(leaf);
    fixture_close(&f);
}
