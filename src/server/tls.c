/* The API listener's TLS: the certificate and key come from the keeper (root
 * reads them; this process cannot), as sealed memfds: at start (waiting, before
 * the loop runs) and on every SIGHUP (answered later, on the loop). Each reload
 * builds a new SSL_CTX and puts it in place for the connections accepted after
 * it; an open connection's SSL holds a reference to the context it was made
 * with and keeps it to its end. A reload that fails keeps the context in place. */
#include <errno.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server_impl.h"

/* A file's bytes as the keeper sent them. */
struct blob {
    char *data;
    size_t len;
};

/* The key's bytes are wiped before they are freed. */
static void blob_free(struct blob *b)
{
    if (b->data) explicit_bzero(b->data, b->len);
    free(b->data);
    *b = (struct blob){0};
}

static int read_memfd(int fd, struct blob *out)
{
    struct stat st;
    if (fstat(fd, &st) < 0) return -errno;
    if (st.st_size > PROTO_TLS_MAX_FILE) return -EFBIG;
    out->len = (size_t)st.st_size;
    out->data = malloc(out->len + 1);
    if (!out->data) return -ENOMEM;
    for (size_t off = 0; off < out->len;) {
        ssize_t n = pread(fd, out->data + off, out->len - off, (off_t)off);
        if (n <= 0) return n < 0 ? -errno : -EIO;
        off += (size_t)n;
    }
    out->data[out->len] = '\0';
    return 0;
}

/* Fills err with the option and file that failed, OpenSSL's first reason and
 * what was wanted, and empties OpenSSL's queue. */
static int ssl_fail(err_t *err, const char *option, const char *file, const char *want)
{
    unsigned long e = ERR_get_error();
    char reason[256] = "no detail from OpenSSL";
    if (e) ERR_error_string_n(e, reason, sizeof reason);
    ERR_clear_error();
    return err_set(err, -EPROTO, "%s %s: %s%s%s%s", option, file, reason, want ? " (want " : "",
                   want ? want : "", want ? ")" : "");
}

/* A key with a passphrase would make OpenSSL ask on the terminal: refuse it. */
static int no_passphrase(char *buf, int size, int rwflag, void *arg)
{
    return 0;
}

/* The leaf first, then the chain, as web servers read a certificate file. */
static int use_chain(SSL_CTX *ctx, const struct blob *pem, const char *file, err_t *err)
{
    BIO *bio = BIO_new_mem_buf(pem->data, (int)pem->len);
    X509 *leaf = bio ? PEM_read_bio_X509_AUX(bio, NULL, no_passphrase, NULL) : NULL;
    int r = 0;
    if (!leaf)
        r = ssl_fail(err, "--tls-cert", file, "a PEM certificate, then its chain");
    else if (SSL_CTX_use_certificate(ctx, leaf) != 1)
        r = ssl_fail(err, "--tls-cert", file, NULL);
    for (X509 *ca; r == 0 && (ca = PEM_read_bio_X509(bio, NULL, no_passphrase, NULL));) {
        if (SSL_CTX_add0_chain_cert(ctx, ca) != 1) {
            X509_free(ca);
            r = ssl_fail(err, "--tls-cert", file, NULL);
        }
    }
    ERR_clear_error(); /* the end of the chain reads as an error */
    X509_free(leaf);
    BIO_free(bio);
    return r;
}

static int use_key(SSL_CTX *ctx, const struct blob *pem, const struct server_config *cfg,
                   err_t *err)
{
    BIO *bio = BIO_new_mem_buf(pem->data, (int)pem->len);
    EVP_PKEY *key = bio ? PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL) : NULL;
    int r = 0;
    if (!key)
        r = ssl_fail(err, "--tls-key", cfg->tls_key, "a PEM private key without a passphrase");
    else if (X509_check_private_key(SSL_CTX_get0_certificate(ctx), key) != 1) {
        ERR_clear_error(); /* a renewal that replaced one of the two files, not both */
        r = err_set(err, -EINVAL, "--tls-key %s is not the key of the certificate in --tls-cert %s",
                    cfg->tls_key, cfg->tls_cert);
    } else if (SSL_CTX_use_PrivateKey(ctx, key) != 1 || SSL_CTX_check_private_key(ctx) != 1)
        r = ssl_fail(err, "--tls-key", cfg->tls_key, NULL);
    EVP_PKEY_free(key);
    BIO_free(bio);
    return r;
}

/* A server context from the two files' bytes: TLS 1.2 or later, HTTP/1.1. */
static int build_ctx(const struct blob *cert, const struct blob *key,
                     const struct server_config *cfg, SSL_CTX **out, err_t *err)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) return ssl_fail(err, "--listen", cfg->listen, NULL);
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    int r = use_chain(ctx, cert, cfg->tls_cert, err);
    if (r == 0) r = use_key(ctx, key, cfg, err);
    if (r < 0) {
        SSL_CTX_free(ctx);
        return r;
    }
    *out = ctx;
    return 0;
}

/* What the log says of a certificate put in place: enough to tell two apart. */
static void log_served(SSL_CTX *ctx, const char *file)
{
    X509 *x = SSL_CTX_get0_certificate(ctx);
    char subject[256] = "?", serial[80] = "?", until[64] = "?";
    X509_NAME_oneline(X509_get_subject_name(x), subject, sizeof subject);
    BIGNUM *bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(x), NULL);
    char *hex = bn ? BN_bn2hex(bn) : NULL;
    if (hex) snprintf(serial, sizeof serial, "%s", hex);
    OPENSSL_free(hex);
    BN_free(bn);
    BIO *b = BIO_new(BIO_s_mem());
    if (b && ASN1_TIME_print(b, X509_get0_notAfter(x)) == 1) {
        int n = BIO_read(b, until, sizeof until - 1);
        until[n > 0 ? n : 0] = '\0';
    }
    BIO_free(b);
    log_info("TLS: serving %s from %s (serial %s, valid until %s)", subject, file, serial, until);
    if (X509_cmp_current_time(X509_get0_notAfter(x)) < 0)
        log_warn("TLS: the certificate in %s has expired; clients will refuse it", file);
}

/* A context from the keeper's two memfds (closed here). */
static int ctx_from_fds(struct server *srv, const int *fds, unsigned nfds, SSL_CTX **out,
                        err_t *err)
{
    struct blob cert = {0}, key = {0};
    int r = 0;
    if (nfds != 2)
        r = err_set(err, -EIO, "the keeper sent no TLS files");
    else if ((r = read_memfd(fds[0], &cert)) < 0)
        err_set(err, r, "cannot read what the keeper read of %s: %s", srv->cfg.tls_cert,
                strerror(-r));
    else if ((r = read_memfd(fds[1], &key)) < 0)
        err_set(err, r, "cannot read what the keeper read of %s: %s", srv->cfg.tls_key,
                strerror(-r));
    for (unsigned i = 0; i < nfds; i++)
        close(fds[i]);
    if (r == 0) r = build_ctx(&cert, &key, &srv->cfg, out, err);
    blob_free(&cert);
    blob_free(&key);
    return r;
}

/* At start, before the loop runs: waits for the keeper. */
int server_tls_start(struct server *srv, err_t *err)
{
    if (!srv->cfg.tls) return 0;
    struct proto_tls req = {0};
    struct proto_result res;
    int fds[2] = {-1, -1};
    int r = server_keeper_call(srv, PROTO_TLS_FILES, &req, sizeof req, &res, fds, 2, err);
    unsigned n = 0;
    while (n < 2 && fds[n] >= 0)
        n++;
    if (r == 0) r = ctx_from_fds(srv, fds, n, &srv->tls, err);
    if (r == 0) log_served(srv->tls, srv->cfg.tls_cert);
    return r;
}

/* The keeper's answer to a reload: the new context in place, or the old one kept. */
static void on_reload_files(struct server *srv, const struct proto_result *res, int *fds,
                            unsigned nfds, void *arg)
{
    SSL_CTX *ctx = NULL;
    err_t err = {0};
    int r = res->status;
    if (r < 0) {
        for (unsigned i = 0; i < nfds; i++)
            close(fds[i]);
        err_set(&err, r, "%s", res->msg);
    } else {
        r = ctx_from_fds(srv, fds, nfds, &ctx, &err);
    }
    if (r < 0) {
        log_error("TLS: kept the certificate served so far: %s", err.msg);
        return;
    }
    SSL_CTX_free(srv->tls); /* open connections hold references of their own */
    srv->tls = ctx;
    log_served(ctx, srv->cfg.tls_cert);
}

/* SIGHUP: the keeper reads the files while the loop goes on. Two reloads close
 * together are answered in order, so the later one's files win. */
void server_tls_reload(struct server *srv)
{
    if (!srv->cfg.tls) {
        log_info("SIGHUP: runtimed was started without --tls-cert; nothing to reload");
        return;
    }
    struct proto_tls req = {0};
    err_t err = {0};
    if (server_keeper_send(srv, PROTO_TLS_FILES, &req, sizeof req, 2, on_reload_files, NULL, &err) <
        0)
        log_error("TLS: kept the certificate served so far: %s", err.msg);
}

/* The context in place when a connection comes: a reload applies to the next. */
struct ssl_ctx_st *server_tls_context(void *arg)
{
    struct server *srv = arg;
    return srv->tls;
}

void server_tls_stop(struct server *srv)
{
    SSL_CTX_free(srv->tls);
    srv->tls = NULL;
}
