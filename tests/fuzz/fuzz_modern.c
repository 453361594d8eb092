/* Fuzz target: how the gateway classifies a POST between the 2025 revisions and
 * 2026-07-28 (mcp_modern_classify in src/gateway/modern.c), and Mcp-Name decoding
 * (mcp_name_decode): both read what any client holding the token sends.
 *
 * The input is three header lines (MCP-Protocol-Version, Mcp-Method, Mcp-Name; an empty
 * line is an absent header) and then the body. Checks:
 *   - a verdict is one of the four eras; a rejection has status 400 and a code of
 *     -32600, -32602, -32020 or -32022, and a message; only -32022 carries data, with
 *     "supported" (an array) and "requested";
 *   - MODERN only for a JSON object with an id, a string method and
 *     params._meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28", whose
 *     MCP-Protocol-Version and Mcp-Method headers are those values exactly;
 *   - mcp_name_decode gives a NUL-terminated string no longer than its buffer, and
 *     decoding what it gave (plain text without blanks at its ends) gives it back;
 *   - no crash, no leak (LeakSanitizer), on any bytes. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_NAME "fuzz_modern"
#include "fuzz.h"
#include "gateway/gateway_impl.h"

/* The catalog's texts are assembled from src/catalog/data.S, which the fuzz archive (C
 * only) leaves out; nothing here reads it. */
const char catalog_json_text[] = "{}";
const char catalog_tools_text[] = "{}";

/* The next line of in (up to '\n'), copied into out; NULL when it is empty. */
static const char *take_line(const uint8_t **in, size_t *left, char *out, size_t size)
{
    size_t n = 0;
    while (n < *left && (*in)[n] != '\n')
        n++;
    size_t copy = n < size - 1 ? n : size - 1;
    memcpy(out, *in, copy);
    out[copy] = 0;
    *in += n < *left ? n + 1 : n;
    *left -= n < *left ? n + 1 : n;
    return copy && !memchr(out, 0, copy) ? out : NULL;
}

static void check_name(const char *raw)
{
    char out[256], again[256];
    if (!raw || mcp_name_decode(raw, out, sizeof out) < 0) return;
    REQUIRE(strlen(out) < sizeof out);
    size_t n = strlen(out);
    if (n && out[0] != ' ' && out[0] != '\t' && out[n - 1] != ' ' && out[n - 1] != '\t' &&
        strncasecmp(out, "=?base64?", 9) != 0) {
        REQUIRE(mcp_name_decode(out, again, sizeof again) == 0);
        REQUIRE(strcmp(out, again) == 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char version[128], method[128], name[256];
    const uint8_t *p = data;
    size_t left = size;
    struct mcp_headers h;
    h.version = take_line(&p, &left, version, sizeof version);
    h.method = take_line(&p, &left, method, sizeof method);
    h.name = take_line(&p, &left, name, sizeof name);
    check_name(h.name);
    json_error_t jerr;
    json_t *body = json_loadb((const char *)p, left, 0, &jerr);
    if (!body) return 0;
    struct mcp_verdict v;
    mcp_modern_classify(body, &h, &v);
    REQUIRE(v.era == MCP_ERA_LEGACY || v.era == MCP_ERA_MODERN || v.era == MCP_ERA_NOTIFICATION ||
            v.era == MCP_ERA_REJECT);
    if (v.era == MCP_ERA_REJECT) {
        REQUIRE(v.status == 400 && v.message[0]);
        REQUIRE(v.code == -32600 || v.code == -32602 || v.code == -32020 || v.code == -32022);
        REQUIRE((v.data != NULL) == (v.code == -32022));
        if (v.data) REQUIRE(json_is_array(json_object_get(v.data, "supported")));
    } else {
        REQUIRE(v.data == NULL);
    }
    if (v.era == MCP_ERA_MODERN) {
        json_t *meta = json_object_get(json_object_get(body, "params"), "_meta");
        const char *claim =
            json_string_value(json_object_get(meta, "io.modelcontextprotocol/protocolVersion"));
        const char *m = json_string_value(json_object_get(body, "method"));
        REQUIRE(json_is_object(body) && json_object_get(body, "id") && m && claim);
        REQUIRE(strcmp(claim, "2026-07-28") == 0);
        REQUIRE(h.version && strcmp(h.version, claim) == 0);
        REQUIRE(h.method && strcmp(h.method, m) == 0);
    }
    json_decref(v.data);
    json_decref(body);
    return 0;
}
