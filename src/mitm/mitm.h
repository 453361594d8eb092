/* mitm: the interception CA and the leaf certificates minted from it, for the
 * hosts where the egress proxy must see requests to swap secrets in.
 *
 * Key separation (OpenBSD relayd's ca.c): the CA key is loaded only by the
 * signer, a process of its own that holds nothing else and signs on request
 * (signer.c); the unprivileged server holds one leaf key per CA and asks the
 * signer for a certificate per name, which it caches. A compromised server can
 * get certificates minted while it runs, but never the CA key, and the root
 * keeper never parses a key or a certificate the server sends. */
#ifndef RUNTIME_MITM_H
#define RUNTIME_MITM_H

#include <openssl/evp.h>
#include <openssl/x509.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/common.h"

#define MITM_LEAF_DAYS 30   /* leaf validity, capped by the CA's own */
#define MITM_CACHE_MAX 1024 /* leaf certificates kept by the server */
#define MITM_NAME_MAX 254   /* a DNS name of 253 characters and its NUL */

/* ---- names (both sides) ---- */
enum mitm_name_kind { MITM_NAME_DNS, MITM_NAME_IPV4, MITM_NAME_IPV6 };
/* Checks that the len bytes at name (as TLS SNI carries them, so an embedded
 * NUL is refused) are a DNS name (LDH labels, underscore allowed, no wildcard,
 * no trailing dot, a top label that starts with a letter so that no numeric
 * form such as 2130706433 or 0x7f.1 passes) or an IPv4/IPv6 literal without
 * brackets, and writes its canonical form to out: lowercase, or the address as
 * inet_ntop prints it. kind may be NULL. Returns 0 or -EINVAL. The names given
 * to the functions below go through this; they use the canonical form. */
int mitm_name_canon(const char *name, size_t len, char out[MITM_NAME_MAX],
                    enum mitm_name_kind *kind, err_t *err);

/* ---- signer side (the CA) ---- */
struct mitm_ca;
/* Loads DIR/ca.crt and DIR/ca.key, or creates them (EC P-256, 10 years,
 * basicConstraints CA:true pathlen 0, keyCertSign, a CN that names this
 * daemon); the key file is 0600, the certificate 0644. */
int mitm_ca_load_or_create(const char *dir, struct mitm_ca **out, err_t *err);
void mitm_ca_free(struct mitm_ca *ca);
/* The CA certificate in PEM (borrowed), for trust bundles. */
const char *mitm_ca_cert_pem(const struct mitm_ca *ca);
/* Signs a leaf for name (a DNS name, or an IPv4/IPv6 literal) with the given
 * subject public key (DER SubjectPublicKeyInfo): SAN DNS or IP, SKI and AKI,
 * CA:false, keyUsage digitalSignature, extKeyUsage serverAuth, a random 128-bit
 * serial, notBefore a day back, notAfter MITM_LEAF_DAYS ahead but never past
 * the CA's. Returns the certificate in DER (malloc'd). */
int mitm_ca_sign(struct mitm_ca *ca, const uint8_t *spki, size_t spki_len, const char *name,
                 uint8_t **der, size_t *der_len, err_t *err);

/* ---- the signer process (signer.c) ----
 * One SOCK_SEQPACKET socketpair between the server and the signer: a request is
 * one record of exactly sizeof(struct mitm_sign_req), an answer one record of a
 * struct mitm_sign_ans and len bytes (the DER leaf, or a message). The signer
 * answers every record in order, a malformed one with -EPROTO; it never ends
 * the session on one. */
#define MITM_SPKI_MAX 1024
#define MITM_ANSWER_MAX 4096 /* header and body; a P-256 leaf is under 1 KiB */

struct mitm_sign_req {
    uint32_t id; /* echoed in the answer, to tell a late answer from this one */
    uint32_t spki_len;
    char name[256]; /* NUL-terminated */
    uint8_t spki[MITM_SPKI_MAX];
};

struct mitm_sign_ans {
    uint32_t id;
    int32_t status; /* 0: the DER leaf follows; negative errno: a message follows */
    uint32_t len;
};

/* Answers one request record (len bytes at req, untrusted) into ans, of
 * MITM_ANSWER_MAX bytes; returns the answer's length. Always answers. */
size_t mitm_signer_answer(struct mitm_ca *ca, const void *req, size_t len, uint8_t *ans);
/* Serves requests on sock until the server hangs up (0) or sock fails
 * (negative errno). Descriptors sent along are never installed. */
int mitm_signer_serve(int sock, struct mitm_ca *ca);

/* ---- the server's client of the signer (client.c) ----
 * Asynchronous, on the server's event loop: requests go out at once (at most
 * MITM_SIGNER_INFLIGHT on the socket, the rest wait their turn in memory, at
 * most MITM_SIGNER_PENDING_MAX in all), answers are matched to requests by
 * their id, and each request ends in its done callback, on the loop, exactly
 * once: with the leaf, the signer's refusal, a timeout (a signer that hangs),
 * or the signer's hang-up, after which every request fails at once. */
#define MITM_SIGNER_TIMEOUT_MS 5000 /* from the request to its answer */
#define MITM_SIGNER_INFLIGHT 32     /* on the socket: its buffer holds about 90 */
#define MITM_SIGNER_PENDING_MAX 1024

struct event_base;
struct mitm_signer_client;
/* r 0: der is the DER leaf (borrowed for the call); r < 0: err says why. */
typedef void mitm_signed_fn(int r, const uint8_t *der, size_t der_len, const err_t *err, void *arg);
/* A client of the signer on sock (not taken; -1: no signer, every request
 * fails), each request failing after timeout_ms without an answer. */
int mitm_signer_client_new(struct event_base *base, int sock, unsigned timeout_ms,
                           struct mitm_signer_client **out, err_t *err);
/* Every request still pending ends, -ECANCELED. */
void mitm_signer_client_free(struct mitm_signer_client *sc);
/* Asks for a leaf for name over spki. Returns 0, and done(arg) is called
 * later, from the loop; or a negative errno (the signer has exited, too many
 * requests, a name or key too long) and done is never called. */
int mitm_signer_client_sign(struct mitm_signer_client *sc, const char *name, const uint8_t *spki,
                            size_t spki_len, mitm_signed_fn *done, void *arg, err_t *err);
size_t mitm_signer_client_pending(const struct mitm_signer_client *sc);

/* ---- server side ---- */
struct mitm_leaves;
/* A fresh leaf key (EC P-256) and an empty cache of at most max certificates. */
int mitm_leaves_new(size_t max, struct mitm_leaves **out, err_t *err);
void mitm_leaves_free(struct mitm_leaves *lv);
/* The leaf key's public half, DER SubjectPublicKeyInfo (borrowed). */
const uint8_t *mitm_leaves_spki(const struct mitm_leaves *lv, size_t *len);
EVP_PKEY *mitm_leaves_key(const struct mitm_leaves *lv); /* borrowed */
/* The cached certificate for name, or NULL (borrowed; valid until the next put). */
X509 *mitm_leaves_get(struct mitm_leaves *lv, const char *name);
/* Adds a certificate from mitm_ca_sign, evicting the least recently used. */
int mitm_leaves_put(struct mitm_leaves *lv, const char *name, const uint8_t *der, size_t len,
                    err_t *err);
size_t mitm_leaves_count(const struct mitm_leaves *lv);

#endif
