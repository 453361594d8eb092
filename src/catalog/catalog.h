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

#endif
