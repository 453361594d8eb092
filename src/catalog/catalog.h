/* catalog: the MCP servers runtime knows by id, pinned to exact versions
 * (catalog/servers.json, built into the daemon; format in docs/catalog.md). */
#ifndef RUNTIME_CATALOG_H
#define RUNTIME_CATALOG_H

#include <jansson.h>

#include "../common/common.h"

/* Parses and checks the built-in catalog: an array of entries, each with an id, package,
 * version, runtime (node|python), command[], egress[] and settings[]. */
int catalog_load(json_t **out, err_t *err);
/* The entry of id in a loaded catalog (borrowed), or NULL. */
json_t *catalog_find(json_t *catalog, const char *id);

/* The tool list the entry's fingerprint was made when it was reviewed (a new
 * reference), or NULL when the review kept none (catalog/tools.json). */
json_t *catalog_reviewed_tools(const char *id);

/* GET /v1/mcp/catalog: {data: [...]}, each entry as catalog/servers.json has it with
 * Runtime Cloud's fields added: title, source (the package's page at its version),
 * env[] (the settings as {name, description, required, secret, hosts?}; the entry's
 * own fixed variables move to serverEnv), options[] and checked (the day the pinned
 * versions were last reviewed). A new value; the catalog is not changed. */
json_t *catalog_cloud_json(json_t *catalog);
/* The day catalog/servers.json's versions and fingerprints were last reviewed
 * (catalog/review-catalog.mjs); updated with them. */
#define CATALOG_CHECKED "2026-12-02"

#endif
