/* Writes what tests/mitm/verify.sh serves to real TLS clients, made by the
 * same code paths the daemon uses: the keeper's CA signs, the server's cache
 * holds the result, and the certificate written is the one the cache returns.
 *
 *   mkcerts OUTDIR NAME...  ->  OUTDIR/ca.pem, OUTDIR/leaf.key, OUTDIR/NAME.pem
 *
 * A second call with the same OUTDIR reuses the CA in OUTDIR/ca. */
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/common.h"
#include "mitm/mitm.h"

static int write_text(const char *dir, const char *file, const char *text, mode_t mode)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "w");
    int ok = f && fputs(text, f) >= 0;
    if (f && fclose(f) != 0) ok = 0;
    if (!ok || chmod(path, mode) != 0) {
        fprintf(stderr, "mkcerts: cannot write %s\n", path);
        return -1;
    }
    return 0;
}

/* PEM of an X509 or a private key, malloc'd. */
static char *pem(X509 *x, EVP_PKEY *k)
{
    BIO *b = BIO_new(BIO_s_mem());
    char *data, *out = NULL;
    int ok = b && (x ? PEM_write_bio_X509(b, x)
                     : PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL));
    long n = ok ? BIO_get_mem_data(b, &data) : 0;
    if (n > 0) out = strndup(data, (size_t)n);
    BIO_free(b);
    return out;
}

static int mint_one(struct mitm_ca *ca, struct mitm_leaves *lv, const char *dir, const char *name)
{
    size_t spki_len, der_len;
    const uint8_t *spki = mitm_leaves_spki(lv, &spki_len);
    uint8_t *der = NULL;
    err_t err = {0};
    char file[300];
    if (mitm_ca_sign(ca, spki, spki_len, name, &der, &der_len, &err) < 0 ||
        mitm_leaves_put(lv, name, der, der_len, &err) < 0) {
        fprintf(stderr, "mkcerts: %s\n", err.msg);
        free(der);
        return -1;
    }
    free(der);
    char *text = pem(mitm_leaves_get(lv, name), NULL);
    snprintf(file, sizeof file, "%s.pem", name);
    int r = text ? write_text(dir, file, text, 0644) : -1;
    free(text);
    return r;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: mkcerts OUTDIR NAME...\n");
        return 2;
    }
    char ca_dir[4096];
    snprintf(ca_dir, sizeof ca_dir, "%s/ca", argv[1]);
    struct mitm_ca *ca = NULL;
    struct mitm_leaves *lv = NULL;
    err_t err = {0};
    if (mitm_ca_load_or_create(ca_dir, &ca, &err) < 0 ||
        mitm_leaves_new(MITM_CACHE_MAX, &lv, &err) < 0) {
        fprintf(stderr, "mkcerts: %s\n", err.msg);
        return 1;
    }
    char *key = pem(NULL, mitm_leaves_key(lv));
    int r = write_text(argv[1], "ca.pem", mitm_ca_cert_pem(ca), 0644);
    if (r == 0) r = key ? write_text(argv[1], "leaf.key", key, 0600) : -1;
    for (int i = 2; i < argc && r == 0; i++)
        r = mint_one(ca, lv, argv[1], argv[i]);
    free(key);
    mitm_leaves_free(lv);
    mitm_ca_free(ca);
    return r == 0 ? 0 : 1;
}
