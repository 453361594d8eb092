/* The interception CA, signer side: the only code that loads the CA key. It
 * signs leaves for a public key the server sends (through signer.c), after checking the key and
 * the name itself (the server may be compromised; OpenSSH's monitor re-checks
 * every input the same way). */
#include <errno.h>
#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mitm.h"

#define CA_DAYS 3650
#define BACKDATE_SECS 86400 /* clocks in sandboxes and clients may lag */
#define SERIAL_BYTES 16
#define KEY_FILE_MAX 16384

struct mitm_ca {
    EVP_PKEY *key;
    X509 *cert;
    char *pem;
    /* The server has one leaf key per CA, so the last key parsed is kept:
     * OpenSSL 3.0 spends more time decoding a key than signing with it. */
    EVP_PKEY *last_pk;
    uint8_t last_spki[MITM_SPKI_MAX];
    size_t last_len;
};

/* Fills err with what failed and OpenSSL's first reason, and empties its queue. */
static int ssl_fail(err_t *err, const char *what)
{
    unsigned long e = ERR_get_error();
    char reason[256] = "no detail from OpenSSL";
    if (e) ERR_error_string_n(e, reason, sizeof reason);
    ERR_clear_error();
    return err_set(err, EIO, "%s: %s", what, reason);
}

static int join(char *out, size_t size, const char *dir, const char *file, err_t *err)
{
    int n = snprintf(out, size, "%s/%s", dir, file);
    if (n < 0 || (size_t)n >= size)
        return err_set(err, ENAMETOOLONG, "the CA directory path %s is too long", dir);
    return 0;
}

/* ---- files ---- */

static int read_fd(int fd, char *buf, size_t size, size_t *got)
{
    *got = 0;
    while (*got < size) {
        ssize_t r = read(fd, buf + *got, size - *got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -errno;
        if (r == 0) return 0;
        *got += (size_t)r;
    }
    return -EFBIG;
}

/* The key must be a regular file of ours that nobody else can read or write:
 * a key others could read is a CA anyone on the host can mint with. */
static int check_key_file(int fd, const char *path, err_t *err)
{
    struct stat st;
    if (fstat(fd, &st) < 0) return err_set(err, errno, "cannot stat %s: %m", path);
    if (!S_ISREG(st.st_mode)) return err_set(err, EINVAL, "%s is not a regular file", path);
    if (st.st_mode & 077)
        return err_set(err, EPERM,
                       "%s is readable or writable by group or others (mode %04o); the CA key "
                       "must be private: run chmod 600 %s, and if others may have read it, "
                       "remove ca.key and ca.crt to create a new CA",
                       path, (unsigned)(st.st_mode & 07777), path);
    if (st.st_uid != geteuid())
        return err_set(err, EPERM, "%s is owned by uid %u, not by the daemon (uid %u); chown it",
                       path, (unsigned)st.st_uid, (unsigned)geteuid());
    return 0;
}

static int no_password(char *buf, int size, int rwflag, void *u)
{
    return 0; /* never prompt on a terminal for an encrypted key */
}

static int load_key(const char *path, EVP_PKEY **out, err_t *err)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        return err_set(err, ENOENT,
                       "%s is missing but the CA certificate is there; restore the key, or "
                       "remove ca.crt to create a new CA",
                       path);
    if (fd < 0) return err_set(err, errno, "cannot open the CA key %s: %m", path);
    char *buf = OPENSSL_secure_malloc(KEY_FILE_MAX);
    size_t got = 0;
    int r = buf ? check_key_file(fd, path, err) : err_set(err, ENOMEM, "out of memory");
    if (r == 0 && (r = read_fd(fd, buf, KEY_FILE_MAX, &got)) < 0)
        err_set(err, r, "cannot read the CA key %s: %s", path, strerror(-r));
    close(fd);
    if (r == 0) {
        BIO *bio = BIO_new_mem_buf(buf, (int)got);
        *out = bio ? PEM_read_bio_PrivateKey(bio, NULL, no_password, NULL) : NULL;
        BIO_free(bio);
        if (!*out) r = ssl_fail(err, "the CA key file holds no usable unencrypted PEM key");
    }
    if (buf) OPENSSL_secure_clear_free(buf, KEY_FILE_MAX);
    return r;
}

static int load_cert(const char *path, X509 **out, err_t *err)
{
    FILE *f = fopen(path, "re");
    if (!f) return err_set(err, errno, "cannot open the CA certificate %s: %m", path);
    *out = PEM_read_X509(f, NULL, NULL, NULL);
    fclose(f);
    if (!*out) return ssl_fail(err, "the CA certificate file holds no PEM certificate");
    return 0;
}

/* Writes through a temporary file and rename, so a crash leaves either the
 * old file or the whole new one. */
static int write_file_mode(const char *path, const char *data, size_t len, mode_t mode, err_t *err)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return err_set(err, ENAMETOOLONG, "path %s is too long", path);
    unlink(tmp); /* left by a crash */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0) return err_set(err, errno, "cannot create %s: %m", tmp);
    int r = fchmod(fd, mode) < 0 ? -errno : write_all(fd, data, len);
    if (r == 0 && fsync(fd) < 0) r = -errno;
    close(fd);
    if (r == 0 && rename(tmp, path) < 0) r = -errno;
    if (r < 0) {
        unlink(tmp);
        return err_set(err, r, "cannot write %s: %s", path, strerror(-r));
    }
    return 0;
}

static int sync_dir(const char *dir, err_t *err)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) < 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        return err_set(err, e, "cannot sync directory %s: %s", dir, strerror(e));
    }
    close(fd);
    return 0;
}

static int ensure_dir(const char *dir, err_t *err)
{
    struct stat st;
    if (stat(dir, &st) == 0) {
        if (S_ISDIR(st.st_mode)) return 0;
        return err_set(err, ENOTDIR, "%s is not a directory; give a directory for the CA", dir);
    }
    if (errno != ENOENT) return err_set(err, errno, "cannot stat %s: %m", dir);
    int r = mkdir_p(dir, 0700);
    if (r < 0) return err_set(err, r, "cannot create the CA directory %s: %s", dir, strerror(-r));
    return 0;
}

/* ---- certificate building, shared by the CA and its leaves ----
 * These return -EIO when OpenSSL fails: its reason stays in its error queue,
 * where the caller's ssl_fail reads it for the user. */

static int set_random_serial(X509 *x)
{
    unsigned char b[SERIAL_BYTES];
    do
        random_bytes(b, sizeof b);
    while (b[0] == 0 && !memcmp(b, b + 1, sizeof b - 1)); /* all zero: not a valid serial */
    BIGNUM *bn = BN_bin2bn(b, sizeof b, NULL);            /* unsigned, so always positive */
    int ok = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) != NULL;
    BN_free(bn);
    return ok ? 0 : -EIO;
}

static int add_ext(X509 *x, X509V3_CTX *ctx, int nid, const char *value)
{
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, ctx, nid, value);
    int ok = ext && X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
    return ok ? 0 : -EIO;
}

/* Adds the extensions whose values are fixed strings; SKI must come before AKI
 * so that a self-signed certificate's AKI can refer to it. */
static int add_exts(X509 *x, X509 *issuer, const char *const (*exts)[2], size_t n)
{
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
    for (size_t i = 0; i < n; i++)
        if (add_ext(x, &ctx, OBJ_sn2nid(exts[i][0]), exts[i][1]) < 0) return -EIO;
    return 0;
}

/* X.509 caps a CN at 64 characters (ub-common-name); a longer name is named by the
 * subjectAltName alone, which is what clients check. */
#define CN_MAX 64

static int set_name(X509_NAME *xn, const char *org, const char *cn)
{
    const unsigned char *o = (const unsigned char *)org, *c = (const unsigned char *)cn;
    if (org && !X509_NAME_add_entry_by_txt(xn, "O", MBSTRING_UTF8, o, -1, -1, 0)) return -EIO;
    if (strlen(cn) > CN_MAX) return 0;
    return X509_NAME_add_entry_by_txt(xn, "CN", MBSTRING_UTF8, c, -1, -1, 0) ? 0 : -EIO;
}

/* A version 3 certificate with a random serial, subject key and issuer name. */
static X509 *cert_start(EVP_PKEY *subject_key, const X509_NAME *issuer)
{
    X509 *x = X509_new();
    if (!x || !X509_set_version(x, X509_VERSION_3) || set_random_serial(x) < 0 ||
        !X509_set_pubkey(x, subject_key) || (issuer && !X509_set_issuer_name(x, issuer))) {
        X509_free(x);
        return NULL;
    }
    return x;
}

/* ---- the CA itself ---- */

static const char *const ca_exts[][2] = {
    {"basicConstraints", "critical,CA:TRUE,pathlen:0"},
    {"keyUsage", "critical,keyCertSign,cRLSign"},
    {"subjectKeyIdentifier", "hash"},
    {"authorityKeyIdentifier", "keyid:always"},
};

static X509 *ca_cert_build(EVP_PKEY *key)
{
    char cn[64], id[9];
    random_hex(id, 4); /* tells two installations' CAs apart in a trust store */
    snprintf(cn, sizeof cn, "runtimed interception CA %s", id);
    X509 *x = cert_start(key, NULL);
    if (!x || set_name(X509_get_subject_name(x), "runtime", cn) < 0 ||
        !X509_set_issuer_name(x, X509_get_subject_name(x)) ||
        !X509_gmtime_adj(X509_getm_notBefore(x), -BACKDATE_SECS) ||
        !X509_time_adj_ex(X509_getm_notAfter(x), CA_DAYS, 0, NULL) ||
        add_exts(x, x, ca_exts, ARRAY_LEN(ca_exts)) < 0 || !X509_sign(x, key, EVP_sha256())) {
        X509_free(x);
        return NULL;
    }
    return x;
}

static char *pem_of(int (*write)(BIO *, const void *), const void *obj, BIO *bio)
{
    char *data, *out = NULL;
    if (bio && write(bio, obj)) {
        long n = BIO_get_mem_data(bio, &data);
        out = n > 0 ? strndup(data, (size_t)n) : NULL;
    }
    BIO_free(bio);
    return out;
}

static int write_cert_pem(BIO *bio, const void *x)
{
    return PEM_write_bio_X509(bio, (X509 *)x);
}

static int write_key_pem(BIO *bio, const void *k)
{
    return PEM_write_bio_PrivateKey(bio, (EVP_PKEY *)k, NULL, NULL, 0, NULL, NULL);
}

/* Writes the key first and the certificate last: a key without a certificate
 * was never handed to a sandbox, so the next start may replace it. */
static int ca_save(struct mitm_ca *ca, const char *dir, const char *key_path, const char *cert_path,
                   err_t *err)
{
    /* secmem: the memory BIO that held the key is cleared when freed */
    char *key_pem = pem_of(write_key_pem, ca->key, BIO_new(BIO_s_secmem()));
    if (!key_pem) return ssl_fail(err, "cannot encode the new CA key");
    size_t key_len = strlen(key_pem);
    int r = write_file_mode(key_path, key_pem, key_len, 0600, err);
    OPENSSL_cleanse(key_pem, key_len);
    free(key_pem);
    if (r == 0) r = write_file_mode(cert_path, ca->pem, strlen(ca->pem), 0644, err);
    if (r == 0) r = sync_dir(dir, err);
    return r;
}

static int ca_create(struct mitm_ca *ca, const char *dir, const char *key_path,
                     const char *cert_path, err_t *err)
{
    if (access(key_path, F_OK) == 0)
        log_warn("replacing %s: it has no certificate, so an earlier start was cut short before "
                 "publishing it",
                 key_path);
    ca->key = EVP_EC_gen("P-256");
    if (!ca->key) return ssl_fail(err, "cannot generate the CA key");
    ca->cert = ca_cert_build(ca->key);
    if (!ca->cert) return ssl_fail(err, "cannot build the CA certificate");
    ca->pem = pem_of(write_cert_pem, ca->cert, BIO_new(BIO_s_mem()));
    if (!ca->pem) return ssl_fail(err, "cannot encode the CA certificate");
    int r = ca_save(ca, dir, key_path, cert_path, err);
    if (r == 0) log_info("created the interception CA in %s", dir);
    return r;
}

static int ca_check(struct mitm_ca *ca, const char *dir, err_t *err)
{
    if (!X509_check_private_key(ca->cert, ca->key))
        return ssl_fail(err, "ca.key does not belong to ca.crt; restore the pair, or remove "
                             "both to create a new CA");
    if (X509_check_ca(ca->cert) != 1)
        return err_set(err, EINVAL,
                       "%s/ca.crt is not a CA certificate; remove ca.crt and "
                       "ca.key to create a new CA",
                       dir);
    if (X509_cmp_current_time(X509_get0_notAfter(ca->cert)) <= 0)
        return err_set(err, EKEYEXPIRED,
                       "the interception CA in %s has expired; remove ca.crt "
                       "and ca.key to create a new one",
                       dir);
    int id = EVP_PKEY_get_base_id(ca->key);
    if (id != EVP_PKEY_EC && id != EVP_PKEY_RSA)
        return err_set(err, EINVAL,
                       "%s/ca.key is neither an EC nor an RSA key; remove ca.crt "
                       "and ca.key to create a new CA",
                       dir);
    return 0;
}

static int ca_load(struct mitm_ca *ca, const char *dir, const char *key_path, const char *cert_path,
                   err_t *err)
{
    int r = load_key(key_path, &ca->key, err);
    if (r == 0) r = load_cert(cert_path, &ca->cert, err);
    if (r == 0) r = ca_check(ca, dir, err);
    if (r == 0 && !(ca->pem = pem_of(write_cert_pem, ca->cert, BIO_new(BIO_s_mem()))))
        r = ssl_fail(err, "cannot encode the CA certificate");
    return r;
}

int mitm_ca_load_or_create(const char *dir, struct mitm_ca **out, err_t *err)
{
    char key_path[4096], cert_path[4096];
    *out = NULL;
    ERR_clear_error();
    int r = join(key_path, sizeof key_path, dir, "ca.key", err);
    if (r == 0) r = join(cert_path, sizeof cert_path, dir, "ca.crt", err);
    if (r == 0) r = ensure_dir(dir, err);
    if (r < 0) return r;
    struct mitm_ca *ca = calloc(1, sizeof *ca);
    if (!ca) return err_set(err, ENOMEM, "out of memory");
    if (access(cert_path, F_OK) == 0)
        r = ca_load(ca, dir, key_path, cert_path, err);
    else if (errno == ENOENT)
        r = ca_create(ca, dir, key_path, cert_path, err);
    else
        r = err_set(err, errno, "cannot look at %s: %m", cert_path);
    if (r < 0) {
        err_wrap(err, "interception CA in %s", dir);
        mitm_ca_free(ca);
        return r;
    }
    *out = ca;
    return 0;
}

void mitm_ca_free(struct mitm_ca *ca)
{
    if (!ca) return;
    EVP_PKEY_free(ca->key);
    EVP_PKEY_free(ca->last_pk);
    X509_free(ca->cert);
    free(ca->pem);
    free(ca);
}

const char *mitm_ca_cert_pem(const struct mitm_ca *ca)
{
    return ca->pem;
}

/* ---- leaves ---- */

static const char *const leaf_exts[][2] = {
    {"basicConstraints", "critical,CA:FALSE"},  {"keyUsage", "critical,digitalSignature"},
    {"extendedKeyUsage", "serverAuth"},         {"subjectKeyIdentifier", "hash"},
    {"authorityKeyIdentifier", "keyid:always"},
};

/* Only the key type the server's leaves use: anything else means the request
 * did not come from mitm_leaves. */
/* The key as the server writes it (an uncompressed point) and written back
 * byte for byte: OpenSSL also reads spellings it writes otherwise (fuzz_sign
 * found a BIT STRING with 1 unused bit, signed as 0), and the certificate must
 * carry the server's own bytes. */
static bool canonical(EVP_PKEY *pk, const uint8_t *spki, size_t len)
{
    char form[32] = "";
    if (!EVP_PKEY_get_utf8_string_param(pk, OSSL_PKEY_PARAM_EC_POINT_CONVERSION_FORMAT, form,
                                        sizeof form, NULL) ||
        strcmp(form, OSSL_PKEY_EC_POINT_CONVERSION_FORMAT_UNCOMPRESSED) != 0)
        return false;
    unsigned char *der = NULL;
    int n = i2d_PUBKEY(pk, &der);
    bool same = n > 0 && (size_t)n == len && memcmp(der, spki, len) == 0;
    OPENSSL_free(der);
    return same;
}

static int parse_spki(const uint8_t *spki, size_t len, EVP_PKEY **out, err_t *err)
{
    if (!spki || len == 0 || len > MITM_SPKI_MAX)
        return err_set(err, EINVAL, "the leaf public key is missing or too large (%zu bytes)", len);
    const unsigned char *p = spki;
    EVP_PKEY *pk = d2i_PUBKEY(NULL, &p, (long)len);
    char group[64] = "", encoding[32] = "";
    if (!pk) return ssl_fail(err, "the leaf public key is not a DER SubjectPublicKeyInfo");
    /* Named-curve form only: a key spelled with explicit parameters would be signed
     * into a certificate that OpenSSL itself refuses to verify. */
    if (p != spki + len || !EVP_PKEY_is_a(pk, "EC") ||
        !EVP_PKEY_get_utf8_string_param(pk, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group,
                                        NULL) ||
        strcmp(group, "prime256v1") != 0 ||
        !EVP_PKEY_get_utf8_string_param(pk, OSSL_PKEY_PARAM_EC_ENCODING, encoding, sizeof encoding,
                                        NULL) ||
        strcmp(encoding, OSSL_PKEY_EC_ENCODING_GROUP) != 0 || !canonical(pk, spki, len)) {
        EVP_PKEY_free(pk);
        ERR_clear_error();
        return err_set(err, EINVAL, "the leaf public key is not exactly one EC P-256 key");
    }
    *out = pk;
    return 0;
}

/* The key for spki, parsed and checked once per distinct key (borrowed). */
static int leaf_key(struct mitm_ca *ca, const uint8_t *spki, size_t len, EVP_PKEY **out, err_t *err)
{
    if (!spki || !ca->last_pk || len != ca->last_len || memcmp(spki, ca->last_spki, len) != 0) {
        EVP_PKEY *pk = NULL;
        int r = parse_spki(spki, len, &pk, err);
        if (r < 0) return r;
        EVP_PKEY_free(ca->last_pk);
        ca->last_pk = pk;
        memcpy(ca->last_spki, spki, len);
        ca->last_len = len;
    }
    *out = ca->last_pk;
    return 0;
}

static int add_san(X509 *x, const char *name, enum mitm_name_kind kind)
{
    GENERAL_NAMES *gens = sk_GENERAL_NAME_new_null();
    GENERAL_NAME *gen = GENERAL_NAME_new();
    ASN1_STRING *value = kind == MITM_NAME_DNS ? ASN1_IA5STRING_new() : a2i_IPADDRESS(name);
    int ok = gens && gen && value;
    if (ok && kind == MITM_NAME_DNS) ok = ASN1_STRING_set(value, name, (int)strlen(name));
    if (ok) {
        GENERAL_NAME_set0_value(gen, kind == MITM_NAME_DNS ? GEN_DNS : GEN_IPADD, value);
        value = NULL;
        ok = sk_GENERAL_NAME_push(gens, gen) > 0;
        if (ok) gen = NULL;
    }
    if (ok) ok = X509_add1_ext_i2d(x, NID_subject_alt_name, gens, 0, X509V3_ADD_DEFAULT) == 1;
    ASN1_STRING_free(value);
    GENERAL_NAME_free(gen);
    GENERAL_NAMES_free(gens);
    return ok ? 0 : -EIO;
}

/* A day back, MITM_LEAF_DAYS ahead, and always inside the CA's own validity. */
static int set_leaf_validity(X509 *x, const X509 *ca)
{
    ASN1_TIME *nb = X509_getm_notBefore(x), *na = X509_getm_notAfter(x);
    if (!X509_gmtime_adj(nb, -BACKDATE_SECS) || !X509_time_adj_ex(na, MITM_LEAF_DAYS, 0, NULL))
        return -EIO;
    if (ASN1_TIME_compare(nb, X509_get0_notBefore(ca)) < 0 &&
        !X509_set1_notBefore(x, X509_get0_notBefore(ca)))
        return -EIO;
    if (ASN1_TIME_compare(na, X509_get0_notAfter(ca)) > 0 &&
        !X509_set1_notAfter(x, X509_get0_notAfter(ca)))
        return -EIO;
    return 0;
}

static X509 *leaf_build(struct mitm_ca *ca, EVP_PKEY *pk, const char *name,
                        enum mitm_name_kind kind)
{
    X509 *x = cert_start(pk, X509_get_subject_name(ca->cert));
    if (!x || set_name(X509_get_subject_name(x), NULL, name) < 0 ||
        set_leaf_validity(x, ca->cert) < 0 || add_san(x, name, kind) < 0 ||
        add_exts(x, ca->cert, leaf_exts, ARRAY_LEN(leaf_exts)) < 0 ||
        !X509_sign(x, ca->key, EVP_sha256())) {
        X509_free(x);
        return NULL;
    }
    return x;
}

static int to_der(X509 *x, uint8_t **der, size_t *der_len, err_t *err)
{
    int n = i2d_X509(x, NULL);
    if (n <= 0) return ssl_fail(err, "cannot encode the leaf certificate");
    uint8_t *buf = malloc((size_t)n), *p = buf;
    if (!buf) return err_set(err, ENOMEM, "out of memory");
    if (i2d_X509(x, &p) != n) {
        free(buf);
        return ssl_fail(err, "cannot encode the leaf certificate");
    }
    *der = buf;
    *der_len = (size_t)n;
    return 0;
}

int mitm_ca_sign(struct mitm_ca *ca, const uint8_t *spki, size_t spki_len, const char *name,
                 uint8_t **der, size_t *der_len, err_t *err)
{
    char canon[MITM_NAME_MAX];
    enum mitm_name_kind kind;
    EVP_PKEY *pk = NULL;
    *der = NULL;
    *der_len = 0;
    ERR_clear_error();
    int r = mitm_name_canon(name, name ? strlen(name) : 0, canon, &kind, err);
    if (r == 0) r = leaf_key(ca, spki, spki_len, &pk, err);
    if (r == 0 && X509_cmp_current_time(X509_get0_notAfter(ca->cert)) <= 0)
        r = err_set(err, EKEYEXPIRED,
                    "the interception CA has expired; remove ca.crt and ca.key "
                    "and restart the daemon to create a new one");
    if (r == 0) {
        X509 *x = leaf_build(ca, pk, canon, kind);
        r = x ? to_der(x, der, der_len, err) : ssl_fail(err, "cannot build the leaf certificate");
        X509_free(x);
    }
    if (r < 0) err_wrap(err, "minting a certificate");
    return r;
}
