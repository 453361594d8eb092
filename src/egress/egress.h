/* egress: every connection a sandbox makes, through the daemon. Runs in the
 * server (unprivileged) on its event loop.
 *
 * In each sandbox's network namespace, nft rules (set up by the keeper) send
 * every TCP connection to SANDBOX_PROXY_PORT and every DNS query to port 53 on
 * 127.0.0.1 (sandbox.h), where sockets the keeper made *inside* that namespace listen. The
 * stub resolver answers allowed names with addresses from 198.18.0.0/15 that it
 * maps back to the name; the proxy reads the original destination, the TLS SNI
 * or HTTP Host, checks the policy, resolves the name itself, refuses blocked
 * address classes on the address it actually dials, and splices bytes in the
 * kernel. */
#ifndef RUNTIME_EGRESS_H
#define RUNTIME_EGRESS_H

#include <jansson.h>
#include <stdint.h>

#include "../common/common.h"
#include "../policy/policy.h"

/* What one sandbox may take of the daemon's shared resources: past a limit only
 * that sandbox is refused (a limit.reached event says which), so a sandbox at its
 * limits degrades only itself. Each proxied connection holds up to 6 descriptors. */
#define EGRESS_MAX_CONNS 256   /* open proxied connections */
#define EGRESS_CONNS_PER_S 100 /* new proxied connections a second (bursts of 2x) */
#define EGRESS_MAX_DNS_TCP 16  /* open DNS-over-TCP connections */
#define EGRESS_DNS_PER_S 500   /* DNS queries a second, UDP and TCP (bursts of 2x) */
#define EGRESS_NAMES_PER_S 100 /* names new to the sandbox a second (each is stored) */
/* Descriptors kept out of egress's reach for the API, gateway, store and keeper. */
#define EGRESS_FD_RESERVE 4096
#define EGRESS_SNIFF_MAX 16384
#define EGRESS_SNIFF_TIMEOUT_MS 10000
#define EGRESS_CONNECT_TIMEOUT_MS 10000

/* A name pinned to an address, like curl's --resolve HOST:PORT:ADDR (port 0: any). */
struct egress_pin {
    char host[POLICY_NAME_MAX];
    uint16_t port;
    struct policy_addr addr;
};

/* Called for every event a sandbox's traffic raises: kind is "egress.refused",
 * "egress.allowed", "egress.truncated" or "limit.reached"; fields is borrowed. */
typedef void (*egress_event_fn)(void *arg, const char *sandbox_id, const char *kind,
                                json_t *fields);

/* Called when the stub hands out a new address (slot) for a name, so the caller
 * can make it durable: the answer (and every other answer with that address)
 * waits until the caller calls saved, exactly once, from the loop or before it
 * returns. r < 0: not saved (err says why; the answer goes anyway, logged);
 * -ECANCELED: the daemon stops, and saved only frees what saved_arg holds.
 * saved NULL (out of memory for the wait): the answer has gone; save it anyway. */
typedef void egress_saved_fn(int r, const err_t *err, void *saved_arg);
typedef void (*egress_name_fn)(void *arg, const char *sandbox_id, uint32_t slot, uint64_t seq,
                               const char *name, egress_saved_fn *saved, void *saved_arg);

struct secret_header; /* secrets.h */
/* What the proxy needs from the secrets, for hosts it must intercept. */
struct egress_secrets {
    /* Whether the sandbox sees any secret at all. */
    bool (*any)(void *arg, const char *sandbox_id);
    /* Whether some secret visible in the sandbox may go to host:port. */
    bool (*wants)(void *arg, const char *sandbox_id, const char *host, uint16_t port);
    /* The value to put in place of placeholder in this request to host:port, or
     * NULL to keep it (reported as secret.misdirected). *limited: the secret allows
     * only some methods or paths. The value must be passed to release. */
    char *(*value)(void *arg, const char *sandbox_id, const char *host, uint16_t port,
                   const char *method, const char *path, const char *placeholder, size_t *len,
                   bool *limited);
    void (*release)(char *value, size_t len);
    /* The fields secrets set on this request whatever the sandbox sent (a secret's
     * header and format): how many filled (at most max), or negative: -E2BIG, more
     * than max. NULL: none. Released with release_headers. */
    int (*headers)(void *arg, const char *sandbox_id, const char *host, uint16_t port,
                   const char *method, const char *path, struct secret_header *out, size_t max);
    void (*release_headers)(struct secret_header *h, size_t n);
    /* A placeholder seen where it can never be swapped (plain HTTP). */
    void (*misdirected)(void *arg, const char *sandbox_id, const char *host,
                        const char *placeholder, const char *why);
    /* The value of placeholder came back from host in an answer, written as
     * encoding ("verbatim", "base64", "percent", "base64+json", ...), and was
     * overwritten with the placeholder before the sandbox saw it. */
    void (*reflected)(void *arg, const char *sandbox_id, const char *host, const char *placeholder,
                      const char *encoding);
};

/* The end of a sign: r 0 and the DER leaf (borrowed for the call), or a
 * negative errno (-ECANCELED: the daemon stops; after egress_free it only
 * frees what signed_arg holds). */
typedef void egress_signed_fn(int r, const uint8_t *der, size_t der_len, void *signed_arg);
/* Asks for a leaf certificate for name over the given public key, without
 * waiting: returns 0 and calls signed exactly once, later, from the loop (the
 * connections to name wait for it, reading nothing); or a negative errno, and
 * never calls it. */
typedef int (*egress_sign_fn)(void *arg, const char *name, const uint8_t *spki, size_t spki_len,
                              egress_signed_fn *signed_cb, void *signed_arg);

/* What a sandbox may do a second, and the proxied connections it may hold open. */
struct egress_rates {
    unsigned dns_queries, dns_names, connections;
    unsigned open_connections; /* --sandbox-connections; EGRESS_MAX_CONNS by default */
};

struct egress_config {
    const struct egress_pin *pins;
    size_t n_pins;
    const char *nameserver; /* "ADDR[:PORT]" to resolve with, or NULL for resolv.conf */
    egress_event_fn on_event;
    egress_name_fn on_name;
    egress_sign_fn sign;
    void *event_arg;                      /* passed to on_event, on_name and sign */
    const struct egress_secrets *secrets; /* NULL: never intercept */
    void *secrets_arg;                    /* passed to the secrets callbacks */
    const char *upstream_ca;              /* extra CA file for upstream TLS, or NULL */
    /* Also open TLS on 443 to allowed hosts no secret names, in sandboxes that hold
     * placeholders, so that a placeholder sent there is reported (nothing is swapped). */
    bool inspect_allowed_tls;
    struct egress_rates rates; /* per sandbox (--rate, --sandbox-connections); 0: defaults */
};

struct egress;
struct egress_sandbox;
struct event_base;

int egress_new(struct event_base *base, const struct egress_config *cfg, struct egress **out,
               err_t *err);
void egress_free(struct egress *eg);

/* Starts serving a sandbox on its listening sockets (taken): fds[0] TCP proxy,
 * fds[1] UDP DNS, fds[2] TCP DNS. The policy is taken. */
int egress_sandbox_add(struct egress *eg, const char *id, int fds[3], struct policy *pol,
                       struct egress_sandbox **out, err_t *err);
/* Restores a name the stub handed out in an earlier run (see egress_name_fn). */
void egress_sandbox_restore_name(struct egress_sandbox *es, uint32_t slot, uint64_t seq,
                                 const char *name);
/* Replaces the policy (taken) and closes every open connection it refuses. */
void egress_sandbox_set_policy(struct egress_sandbox *es, struct policy *pol);
/* Closes everything of the sandbox. */
void egress_sandbox_remove(struct egress_sandbox *es);
/* Closes every open connection of the sandbox (a paused sandbox keeps none). */
void egress_sandbox_close_all(struct egress_sandbox *es);

/* Parses "HOST:PORT:ADDR" (ADDR may be [v6]). */
int egress_parse_pin(const char *text, struct egress_pin *out, err_t *err);

/* Counters for metrics and tests. */
struct egress_stats {
    uint64_t allowed, refused, open, limited;
};
void egress_sandbox_stats(const struct egress_sandbox *es, struct egress_stats *st);

#endif
