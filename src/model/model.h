/* model: what a sandbox is configured with, as C types. JSON is only the form
 * at the edges: the API's bodies and answers and the store's rows are read with
 * model_*_parse (which validates, fills in the defaults and says which field is
 * wrong) and written with model_*_json. Everything else reads the structs. */
#ifndef RUNTIME_MODEL_H
#define RUNTIME_MODEL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/common.h"

#define MODEL_NAME_MAX 64 /* a sandbox name: 1-63 bytes and a NUL */
#define MODEL_MAP_MAX 256 /* entries in labels, env */

/* {string: string}, in the order given. */
struct model_pair {
    char *key, *value;
};
struct model_map {
    struct model_pair *v;
    size_t n;
};
/* The value of key, or NULL. */
/* v: {string: string} (NULL/null: empty), at most MODEL_MAP_MAX entries, keys
 * checked by key_ok; err names field and says a bad key is not `what`. On
 * failure *out may hold some entries: model_map_clear it. */
int model_map_parse(json_t *v, const char *field, bool (*key_ok)(const char *), const char *what,
                    struct model_map *out, err_t *err);
const char *model_map_get(const struct model_map *m, const char *key);
json_t *model_map_json(const struct model_map *m);
void model_map_clear(struct model_map *m);

/* network: who the sandbox may reach (Runtime Cloud's network rules). The lists hold
 * the entries as given; the egress policy (policy.h) is built from them. An empty
 * allow list and no list differ: listed with no entry reaches no host (but what the
 * gateway adds: its catalog servers' hosts), no list (listed false) any public host.
 * internet false: none. deny is refused whatever else says. connect lists
 * "host:port" pairs reached beyond the allow list (Runtime Cloud's ports beyond 80
 * and 443; a runtimed sandbox reaches every port of a host it may reach). */
struct model_hosts {
    char **v;
    size_t n;
};
/* Appends a copy of host. */
int model_hosts_add(struct model_hosts *h, const char *host, err_t *err);
struct model_network {
    bool internet;
    bool listed; /* an allow list was given */
    struct model_hosts allow, deny, connect;
};
#define MODEL_CONNECT_MAX 64 /* entries in network.connect */
/* v: the API's {internet, allow?[], deny?[], connect?[]} or NULL/null for the default
 * (internet on, no list). allow absent or null: no list. Every entry is checked as a policy rule (a
 * connect one must name its port); err names the bad one, or every unknown field. */
int model_network_parse(json_t *v, struct model_network *out, err_t *err);
/* A request's settings as Runtime Cloud reads them: internet false with a non-empty
 * allow list is internet true with that list. (Not applied to stored rows: a sandbox
 * saved as internet false keeps reaching nothing.) */
void model_network_as_cloud_reads(struct model_network *n);
/* {internet, allow[]?, deny[]?, connect[]?}, allow only when there is a list, the
 * others when not empty: parsing it gives n back. */
json_t *model_network_json(const struct model_network *n);
/* Adds host to allow unless it is listed already; n is limited to its list from then on. */
int model_network_add(struct model_network *n, const char *host, err_t *err);
struct policy;
/* The egress policy of these settings (policy.h); policy_clear it. */
int model_network_policy(const struct model_network *n, struct policy *out, err_t *err);
int model_network_copy(struct model_network *dst, const struct model_network *src, err_t *err);
void model_network_clear(struct model_network *n);

/* What a sandbox's lease ends with (Runtime Cloud's onLeaseEnd). */
enum model_lease_end { MODEL_LEASE_PAUSE, MODEL_LEASE_STOP, MODEL_LEASE_DELETE };
#define MODEL_LEASE_MIN_S 60
#define MODEL_LEASE_MAX_S 86400

/* The isolation driver a sandbox is built and run with (its `isolation`), fixed at its
 * create. DEFAULT is a create that named none: the API gives it the daemon's --driver.
 * (Not enum model_isolation below: that is an MCP server's sessions.) */
enum model_driver { MODEL_DRIVER_DEFAULT, MODEL_DRIVER_NS, MODEL_DRIVER_GVISOR };

/* A sandbox's settings (api/openapi.yaml, SandboxCreate). */
struct model_sandbox {
    char name[MODEL_NAME_MAX]; /* "": unnamed */
    uint32_t memory_mib;
    double cpus;
    uint32_t disk_mib;
    uint32_t idle_pause_s; /* 0: never */
    /* paused this long, a gvisor sandbox hibernates (docs/hibernation.md); 0: never */
    uint32_t hibernate_after_s;
    uint32_t lease_s; /* timeoutSeconds: how long each run may last; 0: no lease */
    enum model_lease_end lease_end;
    struct model_map labels;
    struct model_map env;
    struct model_network network;
    enum model_driver isolation;
};
/* A create body (or a stored row): unknown fields, wrong types and values out of
 * range are refused with a message that names the field (-EINVAL). getOrCreate
 * is accepted and left to the API. out is cleared first; on failure it holds
 * nothing to free. */
int model_sandbox_parse(json_t *body, struct model_sandbox *out, err_t *err);
/* The fields model_sandbox_parse knows, NULL-terminated. */
extern const char *const model_sandbox_fields[];
/* A create that names no hibernateAfterSeconds gets the daemon's --hibernate-after; a
 * stored row from before it, this. */
#define MODEL_HIBERNATE_AFTER_DEFAULT 300
/* {name, memoryMiB, cpus, diskMiB, idlePauseSeconds, hibernateAfterSeconds, timeoutSeconds,
 * onLeaseEnd, labels,
 * env, network, isolation} (isolation null while DEFAULT):
 * model_sandbox_parse of it gives the same settings back. */
json_t *model_sandbox_json(const struct model_sandbox *s);
int model_sandbox_copy(struct model_sandbox *dst, const struct model_sandbox *src, err_t *err);
const char *model_lease_end_name(enum model_lease_end e); /* "pause", "stop", "delete" */
const char *model_driver_name(enum model_driver d);       /* "ns", "gvisor"; NULL: DEFAULT */
void model_sandbox_clear(struct model_sandbox *s);

/* An MCP server to start in a sandbox (docs/gateway.md): a catalog id, or a
 * name and a command of one's own. */
#define MODEL_MCP_NAME_MAX 64
enum model_isolation { MODEL_ISOLATION_SHARED, MODEL_ISOLATION_SESSION };
struct model_strings {
    char **v;
    size_t n;
};
struct model_mcp_server {
    char name[MODEL_MCP_NAME_MAX];
    char id[MODEL_MCP_NAME_MAX];  /* catalog id; "": a server of one's own */
    struct model_strings command; /* one's own server's argv */
    struct model_strings args;    /* appended to the command */
    struct model_map env;
    struct model_map secrets; /* variable name -> secret name */
    char fingerprint[65];     /* "": none given */
    enum model_isolation isolation;
    struct model_strings tools; /* the only tools clients see and call; n 0: all */
};
#define MODEL_TOOLS_MAX 256
/* One entry of a start call's servers[] (or a stored one). The shape only: that
 * the id is in the catalog and its settings are met is the gateway's to check. */
int model_mcp_server_parse(json_t *in, struct model_mcp_server *out, err_t *err);
/* {name, env, secrets, args, isolation, id | command, fingerprint?, tools?} */
json_t *model_mcp_server_json(const struct model_mcp_server *s);
bool model_mcp_server_equal(const struct model_mcp_server *a, const struct model_mcp_server *b);
void model_mcp_server_clear(struct model_mcp_server *s);

#endif
