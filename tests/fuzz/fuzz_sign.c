/* Fuzz target: the signer's request (struct mitm_sign_req, src/mitm/signer.c): a
 * name and a DER SubjectPublicKeyInfo from the server (untrusted: a compromised
 * server writes any bytes), and mitm_ca_sign() that mints a leaf for them with the
 * interception CA.
 *
 * A real CA is made at start (mitm_ca_load_or_create in a temporary directory, removed
 * again), and a server-side leaf cache (mitm_leaves_new). Each input is signed either
 * directly or through the signer's loop, mitm_signer_serve() (one record on a
 * SOCK_SEQPACKET socketpair, then EOF), and then once more directly with the same
 * bytes (the CA caches the last key: the second answer must be the same). Checks:
 *   - the signer answers every record exactly once, with the record's id (its first
 *     4 bytes; 0 when shorter), and keeps serving: the loop ends only at EOF, with 0;
 *   - it answers -EPROTO exactly when the record is malformed: not
 *     sizeof(struct mitm_sign_req), a name without its NUL, spki_len 0 or over 1024;
 *     otherwise a certificate exactly when it signed, and the answer's length fields
 *     match the record;
 *   - it signs exactly when the name is a valid host name by a model written here (LDH
 *     and '_' labels of 1-63 bytes, no '-' at either end, at most 253 bytes, a last label
 *     that starts with a letter; or an IPv4/IPv6 literal as inet_pton reads it) and the
 *     key is exactly one EC P-256 SubjectPublicKeyInfo (nothing after it);
 *   - a refusal has a message without control bytes (the name is the sandbox's and the
 *     message goes to logs and the API), and no certificate;
 *   - a certificate is exactly one DER X509 v3; verifies against the CA as an SSL
 *     server certificate for the name (X509_verify_cert with host or IP set); its
 *     issuer is the CA's subject; its subject is only CN=<canonical name>; it has exactly
 *     one SAN, DNS <canonical name> (lowercase) or the address's bytes; CA:false
 *     (critical), keyUsage digitalSignature only, extKeyUsage serverAuth only; its
 *     SubjectPublicKeyInfo is byte for byte the one given; ecdsa-with-SHA256; a positive
 *     serial of at most 20 bytes; valid now, inside the CA's validity, for at most
 *     MITM_LEAF_DAYS + 1 days;
 *   - for the server's own leaf key, mitm_leaves_put() takes it and mitm_leaves_get()
 *     finds it under the name asked;
 *   - no fd leaks, no leaks (LeakSanitizer), no crash.
 *
 * Input:
 *   byte 0   bits 0-1: the key: 0 the bytes after the name, 1 the server's leaf key
 *            (mitm_leaves), 2 another P-256 key, 3 a P-384 key (must be refused);
 *            0x04 through mitm_signer_serve, else a direct call; 0x08 (with 0x04)
 *            raw: the bytes after byte 0 are the request record as is, of that
 *            length
 *   byte 1   name length n, then n bytes of name (may hold a NUL: the C string ends
 *            there, as it does in struct mitm_sign_req), then the SPKI bytes (key 0)
 * Found and fixed: a valid name longer than 64 characters was refused (X.509 caps a
 * CN at 64), and a P-256 key spelled with explicit curve parameters was signed into
 * a certificate OpenSSL will not verify; their inputs are in the corpus.
 * gen_corpus.c writes the sign-* seeds: valid names and addresses, and bad ones, with
 * the real kinds of keys. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define FUZZ_NAME "fuzz_sign"
#include "fuzz.h"
#include "mitm/mitm.h"

#define FD_WINDOW 64

static int g_err = 2;
static int g_devnull = -1;
static struct mitm_ca *g_ca;
static X509 *g_ca_cert;
static struct mitm_leaves *g_leaves;
static uint8_t *g_key_b, *g_key_p384; /* DER SPKIs */
static size_t g_key_b_len, g_key_p384_len;

static void die(const char *what, const char *msg)
{
    dprintf(g_err, "fuzz_sign: %s: %s\n", what, msg);
    exit(1);
}

/* ---- the model of a valid name ------------------------------------------ */

enum kind { BAD, DNS, IP4, IP6 };

/* What the name must be signed as, and its canonical text (lowercase; the address as
 * inet_ntop writes it) and, for an address, its bytes. */
static enum kind model_name(const char *s, char canon[MITM_NAME_MAX], uint8_t addr[16])
{
    size_t len = strlen(s);
    if (len == 0 || len > 253) return BAD;
    if (inet_pton(AF_INET, s, addr) == 1) {
        inet_ntop(AF_INET, addr, canon, MITM_NAME_MAX);
        return IP4;
    }
    if (inet_pton(AF_INET6, s, addr) == 1) {
        inet_ntop(AF_INET6, addr, canon, MITM_NAME_MAX);
        return IP6;
    }
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && s[i] != '.') {
            char c = s[i];
            bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '_';
            if (!ok) return BAD;
            continue;
        }
        size_t l = i - start;
        if (l == 0 || l > 63 || s[start] == '-' || s[i - 1] == '-') return BAD;
        if (i == len) {
            char c = s[start];
            if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) return BAD;
        }
        start = i + 1;
    }
    for (size_t i = 0; i <= len; i++)
        canon[i] = (s[i] >= 'A' && s[i] <= 'Z') ? (char)(s[i] + 32) : s[i];
    return DNS;
}

/* Exactly one EC P-256 SubjectPublicKeyInfo, read by other calls than the CA's. */
static bool model_key(const uint8_t *spki, size_t len)
{
    if (len == 0 || len > 1024) return false;
    const unsigned char *p = spki;
    EVP_PKEY *pk = d2i_PUBKEY(NULL, &p, (long)len);
    bool ok = false;
    if (pk && p == spki + len && EVP_PKEY_get_base_id(pk) == EVP_PKEY_EC) {
        char group[80] = "";
        size_t glen = 0;
        /* A named curve: the algorithm's parameters are the OID of prime256v1
         * (explicit parameters are refused: a certificate over them would not
         * verify). The SPKI is short enough for one-byte DER lengths. Then the
         * point, as the server writes it: a BIT STRING with no unused bits of an
         * uncompressed point (04, X, Y); OpenSSL also reads other spellings and
         * writes them back otherwise (fuzz_sign found 1 unused bit: signed with
         * other bytes than given). */
        static const uint8_t named[] = {0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48,
                                        0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
                                        0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07};
        ok = EVP_PKEY_get_group_name(pk, group, sizeof group, &glen) == 1 &&
             (OBJ_sn2nid(group) == NID_X9_62_prime256v1 ||
              EC_curve_nist2nid(group) == NID_X9_62_prime256v1) &&
             EVP_PKEY_get_bits(pk) == 256 && len == 2 + sizeof named + 4 + 64 && spki[0] == 0x30 &&
             spki[1] == len - 2 && memcmp(spki + 2, named, sizeof named) == 0 &&
             memcmp(spki + 2 + sizeof named, "\x03\x42\x00\x04", 4) == 0;
    }
    EVP_PKEY_free(pk);
    ERR_clear_error();
    return ok;
}

/* ---- the certificate ------------------------------------------------------ */

static void check_text(const char *msg, const char *what)
{
    if (!msg[0]) fail("%s without a message", what);
    for (const unsigned char *u = (const unsigned char *)msg; *u; u++)
        if (*u < 0x20 || *u == 0x7f) fail("%s: control byte 0x%02x in message: %s", what, *u, msg);
}

static void check_cert(const uint8_t *der, size_t der_len, const char *name, enum kind kind,
                       const char *canon, const uint8_t addr[16], const uint8_t *spki,
                       size_t spki_len)
{
    const unsigned char *p = der;
    X509 *x = d2i_X509(NULL, &p, (long)der_len);
    if (!x || p != der + der_len) fail("the certificate for %s is not exactly one DER X509", canon);
    if (X509_get_version(x) != X509_VERSION_3) fail("not a v3 certificate");

    /* A chain to the CA, for this host, as a TLS server. */
    X509_STORE *store = X509_STORE_new();
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    if (!store || !ctx || !X509_STORE_add_cert(store, g_ca_cert) ||
        !X509_STORE_CTX_init(ctx, store, x, NULL))
        abort();
    X509_VERIFY_PARAM *vp = X509_STORE_CTX_get0_param(ctx);
    X509_VERIFY_PARAM_set_purpose(vp, X509_PURPOSE_SSL_SERVER);
    X509_VERIFY_PARAM_set_hostflags(vp, X509_CHECK_FLAG_NEVER_CHECK_SUBJECT);
    if (kind == DNS)
        X509_VERIFY_PARAM_set1_host(vp, canon, 0);
    else
        X509_VERIFY_PARAM_set1_ip(vp, addr, kind == IP4 ? 4 : 16);
    if (X509_verify_cert(ctx) != 1)
        fail("the certificate for %s does not verify: %s", canon,
             X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx)));
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(store);

    if (X509_NAME_cmp(X509_get_issuer_name(x), X509_get_subject_name(g_ca_cert)) != 0)
        fail("issuer is not the CA");
    const X509_NAME *subj = X509_get_subject_name(x);
    char cn[300] = "";
    /* CN=<name> when it fits X.509's 64 characters, else an empty subject (the SAN
     * names it). */
    if (strlen(canon) > 64
            ? X509_NAME_entry_count(subj) != 0
            : (X509_NAME_entry_count(subj) != 1 ||
               X509_NAME_get_text_by_NID((X509_NAME *)subj, NID_commonName, cn, sizeof cn) < 0 ||
               strcmp(cn, canon) != 0))
        fail("subject is not CN=%s (CN %s)", canon, cn);

    GENERAL_NAMES *sans = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
    if (!sans || sk_GENERAL_NAME_num(sans) != 1) fail("not exactly one SAN for %s", canon);
    const GENERAL_NAME *g = sk_GENERAL_NAME_value(sans, 0);
    if (kind == DNS) {
        const ASN1_STRING *s = g->type == GEN_DNS ? g->d.dNSName : NULL;
        if (!s || (size_t)ASN1_STRING_length(s) != strlen(canon) ||
            memcmp(ASN1_STRING_get0_data(s), canon, strlen(canon)) != 0)
            fail("the SAN is not DNS:%s", canon);
    } else {
        const ASN1_STRING *s = g->type == GEN_IPADD ? g->d.iPAddress : NULL;
        int want = kind == IP4 ? 4 : 16;
        if (!s || ASN1_STRING_length(s) != want || memcmp(ASN1_STRING_get0_data(s), addr, want))
            fail("the SAN is not IP:%s", canon);
    }
    GENERAL_NAMES_free(sans);

    uint32_t xf = X509_get_extension_flags(x);
    if (!(xf & EXFLAG_BCONS) || (xf & EXFLAG_CA) || X509_check_ca(x) != 0) fail("not CA:false");
    int crit = -1;
    BASIC_CONSTRAINTS *bc = X509_get_ext_d2i(x, NID_basic_constraints, &crit, NULL);
    if (!bc || bc->ca || crit != 1) fail("basicConstraints is not critical,CA:FALSE");
    BASIC_CONSTRAINTS_free(bc);
    if (X509_get_key_usage(x) != KU_DIGITAL_SIGNATURE) fail("keyUsage is not digitalSignature");
    if (!(xf & EXFLAG_XKUSAGE) || X509_get_extended_key_usage(x) != XKU_SSL_SERVER)
        fail("extKeyUsage is not serverAuth alone");
    if (X509_check_purpose(x, X509_PURPOSE_SSL_SERVER, 0) != 1) fail("not for a TLS server");

    unsigned char *mine = NULL;
    int n = i2d_X509_PUBKEY(X509_get_X509_PUBKEY(x), &mine);
    if (n <= 0 || (size_t)n != spki_len || memcmp(mine, spki, spki_len) != 0)
        fail("the certificate's SubjectPublicKeyInfo (%d bytes) is not the one given (%zu)", n,
             spki_len);
    OPENSSL_free(mine);
    if (X509_get_signature_nid(x) != NID_ecdsa_with_SHA256) fail("not ecdsa-with-SHA256");

    const ASN1_INTEGER *serial = X509_get0_serialNumber(x);
    BIGNUM *bn = ASN1_INTEGER_to_BN(serial, NULL);
    if (!bn || BN_is_negative(bn) || BN_is_zero(bn) || BN_num_bytes(bn) > 20)
        fail("the serial is not positive or longer than 20 bytes");
    BN_free(bn);

    const ASN1_TIME *nb = X509_get0_notBefore(x), *na = X509_get0_notAfter(x);
    if (X509_cmp_current_time(nb) > 0 || X509_cmp_current_time(na) < 0) fail("not valid now");
    if (ASN1_TIME_compare(nb, X509_get0_notBefore(g_ca_cert)) < 0 ||
        ASN1_TIME_compare(na, X509_get0_notAfter(g_ca_cert)) > 0)
        fail("valid outside the CA's validity");
    int days = 0, secs = 0;
    if (!ASN1_TIME_diff(&days, &secs, nb, na) || days < 0 ||
        days * 86400L + secs > (MITM_LEAF_DAYS + 1) * 86400L)
        fail("valid for %d days %d s", days, secs);

    size_t ll;
    const uint8_t *leaf = mitm_leaves_spki(g_leaves, &ll);
    if (ll == spki_len && memcmp(leaf, spki, ll) == 0) {
        err_t err = {0};
        if (mitm_leaves_put(g_leaves, name, der, der_len, &err) < 0)
            fail("the server's cache refuses the certificate for %s: %s", canon, err.msg);
        X509 *got = mitm_leaves_get(g_leaves, name);
        if (!got || X509_cmp(got, x) != 0) fail("the cache does not give it back for %s", name);
    }
    X509_free(x);
    ERR_clear_error();
}

/* ---- one request ----------------------------------------------------------- */

struct outcome {
    bool malformed; /* the signer answered -EPROTO */
    bool signed_;
    uint8_t *der;
    size_t der_len;
};

static void sign_direct(const char *name, const uint8_t *spki, size_t spki_len, struct outcome *o)
{
    err_t err = {0};
    uint8_t *der = (uint8_t *)"x";
    size_t der_len = 7;
    int r = mitm_ca_sign(g_ca, spki, spki_len, name, &der, &der_len, &err);
    if (r > 0) fail("mitm_ca_sign returned %d", r);
    if (r < 0) {
        if (der || der_len) fail("a refusal with a certificate");
        check_text(err.msg, "mitm_ca_sign refused");
        return;
    }
    if (!der || !der_len) fail("signed without a certificate");
    o->signed_ = true;
    o->der = der;
    o->der_len = der_len;
}

/* Checks the one answer to a record with the given id, and takes its leaf. */
static void check_answer(const uint8_t *buf, ssize_t n, uint32_t id, struct outcome *o)
{
    struct mitm_sign_ans h;
    if (n < (ssize_t)sizeof h || n > MITM_ANSWER_MAX) fail("an answer of %zd bytes", n);
    memcpy(&h, buf, sizeof h);
    if (h.id != id) fail("the answer has id %u, the request %u", h.id, id);
    if (h.len != (size_t)n - sizeof h) fail("the answer says %u bytes, has %zd", h.len, n);
    if (h.status > 0) fail("positive status %d", h.status);
    if (h.status == 0 && !h.len) fail("signed without a certificate");
    if (h.status < 0) {
        char msg[MITM_ANSWER_MAX + 1];
        memcpy(msg, buf + sizeof h, h.len);
        msg[h.len] = '\0';
        if (strlen(msg) != h.len) fail("a NUL inside the message");
        check_text(msg, "the signer refused");
        o->malformed = h.status == -EPROTO;
        return;
    }
    o->signed_ = true;
    o->der = malloc(h.len);
    if (!o->der) abort();
    memcpy(o->der, buf + sizeof h, h.len);
    o->der_len = h.len;
}

static void sign_signer(const void *record, size_t len, struct outcome *o)
{
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) abort();
    if (send(sp[0], record, len, MSG_NOSIGNAL) != (ssize_t)len)
        fail("cannot queue the record (%zu bytes)", len);
    shutdown(sp[0], SHUT_WR);
    int r = mitm_signer_serve(sp[1], g_ca);
    if (r != 0) fail("mitm_signer_serve returned %d at EOF", r);
    uint32_t id = 0;
    if (len >= sizeof id) memcpy(&id, record, sizeof id);
    uint8_t buf[MITM_ANSWER_MAX + 1];
    ssize_t n = recv(sp[0], buf, sizeof buf, MSG_DONTWAIT);
    check_answer(buf, n, id, o);
    if (recv(sp[0], buf, sizeof buf, MSG_DONTWAIT) >= 0) fail("more answers than records");
    close(sp[0]);
    close(sp[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2 || size > 60000) return 0;
    unsigned flags = data[0];
    int lo = fcntl(g_devnull, F_DUPFD, 0);
    close(lo);
    bool before[FD_WINDOW];
    for (int i = 0; i < FD_WINDOW; i++)
        before[i] = fcntl(lo + i, F_GETFD) >= 0;

    struct mitm_sign_req req;
    memset(&req, 0, sizeof req);
    const uint8_t *spki;
    size_t spki_len;
    bool raw = (flags & 0x0c) == 0x0c;
    struct outcome o = {0};
    if (raw) {
        memcpy(&req, data + 1, size - 1 < sizeof req ? size - 1 : sizeof req);
        sign_signer(data + 1, size - 1, &o);
        bool malformed = size - 1 != sizeof req || !memchr(req.name, '\0', sizeof req.name) ||
                         req.spki_len == 0 || req.spki_len > sizeof req.spki;
        if (o.malformed != malformed)
            fail("the signer %s a record that is %s", o.malformed ? "refused" : "took",
                 malformed ? "malformed" : "well-formed");
        if (malformed) goto done;
        spki = req.spki;
        spki_len = req.spki_len;
    } else {
        size_t n = data[1];
        if (n > size - 2) n = size - 2;
        memcpy(req.name, data + 2, n);
        switch (flags & 3) {
        case 0:
            spki = data + 2 + n;
            spki_len = size - 2 - n;
            break;
        case 1:
            spki = mitm_leaves_spki(g_leaves, &spki_len);
            break;
        case 2:
            spki = g_key_b;
            spki_len = g_key_b_len;
            break;
        default:
            spki = g_key_p384;
            spki_len = g_key_p384_len;
            break;
        }
        req.id = (uint32_t)size * 2654435761u; /* any: the answer must echo it */
        req.spki_len = (uint32_t)spki_len;
        memcpy(req.spki, spki, spki_len < sizeof req.spki ? spki_len : sizeof req.spki);
        if (flags & 4) {
            sign_signer(&req, sizeof req, &o);
            bool malformed = spki_len == 0 || spki_len > sizeof req.spki;
            if (o.malformed != malformed)
                fail("the signer %s spki_len %zu", o.malformed ? "refused" : "took", spki_len);
            if (malformed) goto done;
        } else {
            sign_direct(req.name, spki, spki_len, &o);
        }
    }

    char canon[MITM_NAME_MAX] = "";
    uint8_t addr[16];
    enum kind kind = model_name(req.name, canon, addr);
    bool want = kind != BAD && model_key(spki, spki_len);
    if (o.signed_ != want)
        fail("%s name \"%.300s\" (%s) with a %zu-byte key (%s)", o.signed_ ? "signed" : "refused",
             req.name, kind == BAD ? "bad" : "good", spki_len,
             model_key(spki, spki_len) ? "P-256" : "not P-256");
    if (o.signed_) check_cert(o.der, o.der_len, req.name, kind, canon, addr, spki, spki_len);
    free(o.der);

    /* Again, directly: the CA has this key cached now; the same answer. */
    struct outcome again = {0};
    sign_direct(req.name, spki, spki_len, &again);
    if (again.signed_ != o.signed_) fail("a second request gives another answer");
    if (again.signed_)
        check_cert(again.der, again.der_len, req.name, kind, canon, addr, spki, spki_len);
    free(again.der);

done:
    for (int i = 0; i < FD_WINDOW; i++) {
        bool now = fcntl(lo + i, F_GETFD) >= 0;
        if (now != before[i]) fail("fd %d %s by the request", lo + i, now ? "leaked" : "closed");
    }
    return 0;
}

/* ---- setup ---------------------------------------------------------------- */

static uint8_t *spki_of(EVP_PKEY *k, size_t *len)
{
    int n = k ? i2d_PUBKEY(k, NULL) : -1;
    uint8_t *buf = n > 0 ? malloc((size_t)n) : NULL, *p = buf;
    if (!buf || i2d_PUBKEY(k, &p) != n) die("key", "cannot encode");
    *len = (size_t)n;
    return buf;
}

static void rm_dir(const char *dir)
{
    char p[600];
    snprintf(p, sizeof p, "%s/ca.crt", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/ca.key", dir);
    unlink(p);
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    g_err = fcntl(2, F_DUPFD_CLOEXEC, 100);
    if (g_err < 0) g_err = 2;
    g_devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    char dir[] = "/tmp/fuzz-sign-XXXXXX";
    if (!mkdtemp(dir)) die("mkdtemp", strerror(errno));
    err_t err = {0};
    int r = mitm_ca_load_or_create(dir, &g_ca, &err);
    rm_dir(dir);
    if (r < 0) die("the test CA", err.msg);
    BIO *bio = BIO_new_mem_buf(mitm_ca_cert_pem(g_ca), -1);
    g_ca_cert = bio ? PEM_read_bio_X509(bio, NULL, NULL, NULL) : NULL;
    BIO_free(bio);
    if (!g_ca_cert) die("the test CA", "its PEM does not read");
    if (mitm_leaves_new(64, &g_leaves, &err) < 0) die("the leaf cache", err.msg);
    EVP_PKEY *b = EVP_EC_gen("P-256"), *c = EVP_EC_gen("P-384");
    g_key_b = spki_of(b, &g_key_b_len);
    g_key_p384 = spki_of(c, &g_key_p384_len);
    EVP_PKEY_free(b);
    EVP_PKEY_free(c);
    return 0;
}
