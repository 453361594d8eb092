/* connect: the device login's requests (docs/login.md), Runtime Cloud's protocol.
 *
 * A machine asks (start) with a public key of its own; it gets a device code, which
 * only it knows and polls with, and a user code, which a person checks in the
 * browser and approves with. The key minted on approval goes back encrypted to the
 * machine's public key (RSA-OAEP, SHA-256), so that it never travels or rests in
 * clear: the daemon keeps only the sealed copy, until the machine confirms it has
 * it, and only the SHA-256 of the device code. Everything is in memory and
 * bounded; nothing here knows HTTP or accounts (src/api/connect.c does). */
#ifndef RUNTIME_CONNECT_H
#define RUNTIME_CONNECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/common.h"

#define CONNECT_PENDING_MAX 64            /* requests not yet settled */
#define CONNECT_KEPT_MAX 256              /* with those settled, kept to answer */
#define CONNECT_PENDING_PER_ADDRESS 8     /* of those, from one client address */
#define CONNECT_TTL_MS (15 * 60 * 1000)   /* a request lives 15 minutes */
#define CONNECT_FORGET_MS (5 * 60 * 1000) /* ... and is answered "expired" 5 more */
#define CONNECT_POLL_MIN_MS 2000          /* a faster poll is answered "pending" */
#define CONNECT_BODY_MAX (16u << 10)      /* the unauthenticated routes' bodies */
#define CONNECT_DEVICE_CODE_LEN 43        /* 32 random bytes, base64url */
#define CONNECT_USER_CODE_LEN 14          /* XXXX-XXXX-XXXX, upper hex */
#define CONNECT_UUID_LEN 36
#define CONNECT_KEY_LEN (8 + 36 + 1 + 43) /* rtcloud_<uuid>_<43> */
#define CONNECT_AGENT_MAX 80              /* characters */
#define CONNECT_MACHINE_MAX 255           /* bytes */
#define CONNECT_ADDRESS_MAX 48

/* ---- pure parts (unit-tested) ---- */

/* base64url without padding of n bytes; out holds 4*ceil(n/3)+1. */
void connect_base64url(char *out, const void *in, size_t n);
/* A random uuid v4, lowercase. */
void connect_uuid(char out[CONNECT_UUID_LEN + 1]);
/* A random user code "1A2B-3C4D-5E6F", and whether a text is one. */
void connect_user_code(char out[CONNECT_USER_CODE_LEN + 1]);
bool connect_user_code_ok(const char *s);
/* A random device code (43 of [A-Za-z0-9_-]), and whether a text is one. */
void connect_device_code(char out[CONNECT_DEVICE_CODE_LEN + 1]);
bool connect_device_code_ok(const char *s);
/* A random key of Runtime Cloud's shape, rtcloud_<uuid v4>_<32 bytes base64url>, and
 * whether a text is one (^rtcloud_[a-f0-9-]{36}_[A-Za-z0-9_-]{43}$). */
void connect_key(char out[CONNECT_KEY_LEN + 1]);
bool connect_key_ok(const char *s);
/* An agent name: 1-80 characters of UTF-8, no control character. */
int connect_check_agent(const char *s, err_t *err);
/* A machine name: 1-255 bytes of UTF-8, no control character. */
int connect_check_machine(const char *s, err_t *err);
/* A PEM RSA public key (SPKI) of 2048 to 4096 bits: 0, or -EINVAL saying why. */
int connect_check_public_key(const char *pem, err_t *err);
/* key encrypted to pem (RSA-OAEP, SHA-256 for OAEP and MGF1), as standard base64
 * (malloc'd in *out). */
int connect_seal(const char *pem, const char *key, char **out, err_t *err);

/* ---- the requests ---- */

enum connect_state {
    CONNECT_PENDING,
    CONNECT_APPROVING, /* a connection is being written for it */
    CONNECT_APPROVED,  /* sealed, waiting for confirm */
    CONNECT_CONFIRMED, /* the machine has its key: the sealed copy is gone */
    CONNECT_DENIED,
    CONNECT_EXPIRED,
};

struct connect_request {
    char user_code[CONNECT_USER_CODE_LEN + 1];
    unsigned char device_hash[32]; /* SHA-256 of the device code: never the code */
    char agent_name[CONNECT_AGENT_MAX * 4 + 1];
    char machine[CONNECT_MACHINE_MAX + 1];
    char address[CONNECT_ADDRESS_MAX];
    char *public_key;      /* PEM, until sealed */
    int64_t created_ms;    /* unix ms */
    int64_t expires_ms;    /* unix ms */
    uint64_t last_poll_ms; /* monotonic, 0 before the first */
    enum connect_state state;
    char *sealed; /* base64 ciphertext, while APPROVED */
    char connection_id[CONNECT_UUID_LEN + 1];
    char account[64];
    struct connect_request *next;
};

struct connect_table;
struct connect_table *connect_table_new(void);
void connect_table_free(struct connect_table *t);

/* A new request (its inputs checked by the caller); device_code gets its code.
 * -EAGAIN when CONNECT_PENDING_MAX are pending or CONNECT_KEPT_MAX kept, or when
 * CONNECT_PENDING_PER_ADDRESS are pending from `address` (so that one client cannot
 * fill the table and lock everyone else out of login for a request's life). */
int connect_start(struct connect_table *t, const char *agent_name, const char *machine,
                  const char *public_key, const char *address, int64_t now,
                  char device_code[CONNECT_DEVICE_CODE_LEN + 1], struct connect_request **out,
                  err_t *err);
/* Lookups, after dropping those past CONNECT_FORGET_MS and marking the expired;
 * NULL when there is no such request. */
struct connect_request *connect_by_device(struct connect_table *t, const char *device_code,
                                          int64_t now);
struct connect_request *connect_by_user(struct connect_table *t, const char *user_code,
                                        int64_t now);
struct connect_request *connect_by_connection(struct connect_table *t, const char *id, int64_t now);
/* Whether a poll (monotonic now_mono) comes too soon after the last one. */
bool connect_poll_too_soon(struct connect_request *r, uint64_t now_mono);
/* APPROVED: key sealed to the request's public key, which is then let go. */
int connect_approved(struct connect_request *r, const char *key, const char *account,
                     const char *connection_id, err_t *err);
void connect_denied(struct connect_request *r);
/* CONFIRMED: the sealed copy is wiped. */
void connect_confirmed(struct connect_request *r);
/* "pending", "approved", "denied", "expired" (APPROVING is pending, CONFIRMED approved). */
const char *connect_state_name(enum connect_state s);

#endif
