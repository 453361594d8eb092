/* daemon: runtimed's main (main.c) and its options (options.c). */
#ifndef RUNTIME_DAEMON_H
#define RUNTIME_DAEMON_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../egress/egress.h"
#include "../meter/meter.h"

struct options {
    char state_dir[512];
    char listen[128];
    char socket_path[256];
    char public_url[256];
    char driver[32];
    char log_format[16];
    unsigned max_sandboxes;
    unsigned mcp_input_wait_s;
    unsigned hibernate_after_s;
    unsigned hibernate_below_mib;           /* 0: a tenth of the host's memory */
    uint32_t session_idle_s, session_max_s; /* --session-idle, --session-max */
    struct egress_pin pins[64];
    size_t n_pins;
    char upstream_ca[512];
    char nameserver[128];
    char tls_inspect[16];
    char templates[8];
    char tls_cert[512], tls_key[512]; /* the listener's, "" for plain HTTP */
    bool insecure_listen;
    struct egress_rates rates_egress;
    struct meter_rates rates;
    /* 0: worked out from the descriptors the server may hold (httpd.h) */
    unsigned max_conns, max_conns_per_client;
    unsigned held_per_sandbox_mib, held_total_mib;
    uint32_t uid_block; /* claimed at start (keeper_uid_block_claim) */
    uid_t uid_base;     /* sandbox_uid_base(uid_block) */
};

/* Fills o from the defaults, then RUNTIME_<NAME> variables, then argv (options.c's
 * table is the one list of them). --help and --version print and exit 0. -EINVAL with
 * what is wrong printed on stderr. */
int parse_options(int argc, char **argv, struct options *o);

#endif
