/* The gateway's pure parts: the fingerprint of a paged tool list and the Host and
 * Origin checks against DNS rebinding. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/gateway_impl.h"
#include "mcp/mcp_impl.h"
#include "unit.h"

static const char *page1 =
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[{\"name\":\"zeta\","
    "\"inputSchema\":{\"type\":\"object\"}}],\"nextCursor\":\"p2\"}}";
static const char *page2 =
    "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"tools\":[{\"name\":\"alpha\","
    "\"description\":\"x\",\"inputSchema\":{\"type\":\"object\"}}]}}";
static const char *whole =
    "[{\"name\":\"alpha\",\"description\":\"x\",\"inputSchema\":{\"type\":"
    "\"object\"}},{\"name\":\"zeta\",\"inputSchema\":{\"type\":\"object\"}}]";

TEST(mcp_paged_fingerprint_equals_whole_list)
{
    char *pages[] = {(char *)page1, (char *)page2};
    size_t lens[] = {strlen(page1), strlen(page2)};
    struct mcp_toolset t = {0};
    err_t err = {0};
    CHECK(mcp_toolset_from_pages(pages, lens, 2, &t, &err) == 0);
    char hex[65];
    CHECK(fingerprint_tools(whole, strlen(whole), NULL, hex, &err) == 0);
    CHECK_STR(t.sha256, hex);
    CHECK(t.n == 2);
    CHECK_STR(t.v[0].name, "alpha");
    CHECK_STR(t.v[1].canon, "{\"inputSchema\":{\"type\":\"object\"},\"name\":\"zeta\"}");
    /* What is stored and served is the canonical text; reading it back changes nothing. */
    struct mcp_toolset back = {0};
    CHECK(mcp_toolset_from_canon(t.canon, &back, &err) == 0);
    CHECK_STR(back.sha256, t.sha256);
    mcp_toolset_clear(&back);
    mcp_toolset_clear(&t);
}

TEST(mcp_bad_tool_list_has_no_fingerprint)
{
    const char *bad = "{\"result\":{\"tools\":[{\"description\":\"no name\"}]}}";
    char *pages[] = {(char *)bad};
    size_t lens[] = {strlen(bad)};
    struct mcp_toolset t = {0};
    err_t err = {0};
    CHECK(mcp_toolset_from_pages(pages, lens, 1, &t, &err) == -EINVAL);
    CHECK(strstr(err.msg, "name") != NULL);
}

TEST(mcp_host_header_must_name_the_gateway)
{
    const char *pub = "https://mcp.example.com", *listen = "127.0.0.1:7070";
    CHECK(gateway_host_allowed(pub, listen, "mcp.example.com"));
    CHECK(gateway_host_allowed(pub, listen, "MCP.example.com"));
    CHECK(gateway_host_allowed(pub, listen, "127.0.0.1:7070"));
    CHECK(gateway_host_allowed(pub, listen, "localhost:7070"));
    CHECK(gateway_host_allowed(pub, listen, "[::1]:7070"));
    CHECK(!gateway_host_allowed(pub, listen, "localhost:8080"));
    CHECK(!gateway_host_allowed(pub, listen, "evil.example:7070"));
    CHECK(!gateway_host_allowed(pub, listen, "127.0.0.1.evil.example:7070"));
    CHECK(!gateway_host_allowed(pub, listen, NULL));
    /* Listening on all addresses: only the public name counts. */
    CHECK(!gateway_host_allowed(pub, "0.0.0.0:7070", "localhost:7070"));
    CHECK(gateway_host_allowed(pub, "0.0.0.0:7070", "mcp.example.com"));
}

TEST(mcp_origin_must_be_the_gateway_or_local)
{
    const char *pub = "https://mcp.example.com/base";
    CHECK(gateway_origin_allowed(pub, NULL));
    CHECK(gateway_origin_allowed(pub, "https://mcp.example.com"));
    CHECK(gateway_origin_allowed(pub, "http://localhost:6274"));
    CHECK(gateway_origin_allowed(pub, "http://127.0.0.1:6274"));
    CHECK(!gateway_origin_allowed(pub, "https://mcp.example.com.evil.example"));
    CHECK(!gateway_origin_allowed(pub, "https://evil.example"));
    CHECK(!gateway_origin_allowed(pub, "http://localhost.evil.example"));
    CHECK(!gateway_origin_allowed(pub, "null"));
}

TEST(mcp_pip_index_follows_pips_own_order)
{
    char url[512];
    /* The environment wins over the install section, which wins over global. */
    mcp_pip_index("global.index-url='https://g.example/simple'\n"
                  "install.index-url='https://i.example/simple'\n"
                  ":env:.index-url='https://e.example/simple'\n",
                  url, sizeof url);
    CHECK_STR(url, "https://e.example/simple");
    mcp_pip_index("global.cert='/etc/ssl/certs/ca.crt'\n"
                  "global.index-url='https://g.example/simple'\n"
                  "install.index-url=\"https://i.example/simple\"\n",
                  url, sizeof url);
    CHECK_STR(url, "https://i.example/simple");
    mcp_pip_index("global.index-url='https://g.example/simple'\n", url, sizeof url);
    CHECK_STR(url, "https://g.example/simple");
    /* extra-index-url is not the index; nothing configured means PyPI. */
    mcp_pip_index(":env:.extra-index-url='https://x.example/simple'\n", url, sizeof url);
    CHECK_STR(url, "https://pypi.org/simple");
    mcp_pip_index("", url, sizeof url);
    CHECK_STR(url, "https://pypi.org/simple");
}

/* ---- 2026-07-28: which era a POST speaks, and the checks of its envelope and headers ---- */

#define META_OK                                                                                    \
    "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","                       \
    "\"io.modelcontextprotocol/clientCapabilities\":{}}"

static enum mcp_era classify(const char *body, const char *version, const char *method,
                             const char *name, int *status, int *code)
{
    json_error_t jerr;
    json_t *b = json_loads(body, 0, &jerr);
    if (!b) return (enum mcp_era) - 1; /* a typo in the test's own JSON */
    struct mcp_headers h = {version, method, name};
    struct mcp_verdict v;
    mcp_modern_classify(b, &h, &v);
    *status = v.status;
    *code = v.code;
    json_decref(v.data);
    json_decref(b);
    return v.era;
}

TEST(mcp_modern_classifier_follows_the_spec_ladder)
{
    int st, code;
    /* 2025 traffic stays on the session path, whatever it looks like. */
    CHECK(classify("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}", NULL,
                   NULL, NULL, &st, &code) == MCP_ERA_LEGACY);
    CHECK(classify("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}", "2025-11-25", NULL,
                   NULL, &st, &code) == MCP_ERA_LEGACY);
    CHECK(classify("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}", "2026-07-28", NULL, NULL, &st,
                   &code) == MCP_ERA_LEGACY);
    /* initialize is the 2025 handshake unless its _meta is a valid 2026-07-28 claim. */
    CHECK(classify("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"_meta\":"
                   "{\"io.modelcontextprotocol/protocolVersion\":\"2025-11-25\"}}}",
                   NULL, NULL, NULL, &st, &code) == MCP_ERA_LEGACY);
    CHECK(classify("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}",
                   "2026-07-28", "initialize", NULL, &st, &code) == MCP_ERA_REJECT);
    CHECK(st == 400 && code == -32020);
    CHECK(classify("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{" META_OK
                   "}}",
                   "2026-07-28", "initialize", NULL, &st, &code) == MCP_ERA_MODERN);
    /* A well-formed modern request. */
    CHECK(classify("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{" META_OK
                   "}}",
                   "2026-07-28", "tools/list", NULL, &st, &code) == MCP_ERA_MODERN);
    /* A modern header without _meta, or _meta without capabilities: -32602, 400. */
    CHECK(classify("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}", "2026-07-28",
                   "tools/list", NULL, &st, &code) == MCP_ERA_REJECT);
    CHECK(st == 400 && code == -32602);
    CHECK(classify("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"_meta\":"
                   "{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"}}}",
                   "2026-07-28", "tools/list", NULL, &st, &code) == MCP_ERA_REJECT);
    CHECK(st == 400 && code == -32602);
    /* The header differs from _meta: -32020 comes before the version check. */
    CHECK(classify("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"_meta\":"
                   "{\"io.modelcontextprotocol/protocolVersion\":\"v999.0.0\","
                   "\"io.modelcontextprotocol/clientCapabilities\":{}}}}",
                   "2026-07-28", "tools/list", NULL, &st, &code) == MCP_ERA_REJECT);
    CHECK(st == 400 && code == -32020);
    /* Both say a version we do not speak: -32022. */
    CHECK(classify("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"_meta\":"
                   "{\"io.modelcontextprotocol/protocolVersion\":\"v999.0.0\","
                   "\"io.modelcontextprotocol/clientCapabilities\":{}}}}",
                   "v999.0.0", "tools/list", NULL, &st, &code) == MCP_ERA_REJECT);
    CHECK(st == 400 && code == -32022);
    /* Mcp-Method missing, or of another case; Mcp-Name missing or wrong on a call. */
    CHECK(classify("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{" META_OK
                   "}}",
                   "2026-07-28", NULL, NULL, &st, &code) == MCP_ERA_REJECT);
    CHECK(code == -32020);
    CHECK(classify("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{" META_OK
                   "}}",
                   "2026-07-28", "TOOLS/LIST", NULL, &st, &code) == MCP_ERA_REJECT);
    CHECK(code == -32020);
    const char *call = "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"tools/call\",\"params\":{"
                       "\"name\":\"echo\"," META_OK "}}";
    CHECK(classify(call, "2026-07-28", "tools/call", NULL, &st, &code) == MCP_ERA_REJECT);
    CHECK(code == -32020);
    CHECK(classify(call, "2026-07-28", "tools/call", "other", &st, &code) == MCP_ERA_REJECT);
    CHECK(classify(call, "2026-07-28", "tools/call", " echo\t", &st, &code) == MCP_ERA_MODERN);
    CHECK(classify(call, "2026-07-28", "tools/call", "=?base64?ZWNobw==?=", &st, &code) ==
          MCP_ERA_MODERN);
    CHECK(classify(call, "2026-07-28", "tools/call", "=?base64?ZW*obw==?=", &st, &code) ==
          MCP_ERA_REJECT);
    /* A batch with a claim; a notification with one. */
    CHECK(classify("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{" META_OK
                   "}}]",
                   "2026-07-28", NULL, NULL, &st, &code) == MCP_ERA_REJECT);
    CHECK(st == 400 && code == -32600);
    CHECK(classify("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\",\"params\":{" META_OK "}}",
                   "2026-07-28", NULL, NULL, &st, &code) == MCP_ERA_NOTIFICATION);
    /* A bad logLevel or clientInfo is an envelope error. */
    CHECK(classify("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"_meta\":"
                   "{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
                   "\"io.modelcontextprotocol/clientCapabilities\":{},"
                   "\"io.modelcontextprotocol/logLevel\":\"loud\"}}}",
                   "2026-07-28", "tools/list", NULL, &st, &code) == MCP_ERA_REJECT);
    CHECK(st == 400 && code == -32602);
}

TEST(mcp_name_header_decoding)
{
    char out[64];
    CHECK(mcp_name_decode("  plain ", out, sizeof out) == 0);
    CHECK_STR(out, "plain");
    CHECK(mcp_name_decode("=?base64?w6lsw6h2ZQ==?=", out, sizeof out) == 0);
    CHECK_STR(out, "\xc3\xa9l\xc3\xa8ve");                                 /* élève */
    CHECK(mcp_name_decode("=?base64?AA==?=", out, sizeof out) == -EINVAL); /* a NUL inside */
    CHECK(mcp_name_decode("=?base64?!!?=", out, sizeof out) == -EINVAL);
}

/* The revisions are rows: each version found with its columns, the 2025 ones with
 * sessions, and the words messages name them with. */
TEST(mcp_revisions_table)
{
    CHECK(mcp_revision("2026-07-28") && mcp_revision("2026-07-28")->stateless);
    CHECK(mcp_revision("2025-03-26") && mcp_revision("2025-03-26")->batches);
    CHECK(mcp_revision("2025-06-18") && !mcp_revision("2025-06-18")->batches);
    CHECK(mcp_revision("2024-11-05") == NULL);
    CHECK(mcp_revision(NULL) == NULL);
    CHECK(mcp_revision_with_sessions("2026-07-28") == NULL);
    CHECK(mcp_revision_with_sessions("2025-11-25") != NULL);
    CHECK_STR(mcp_revisions_text(false), "2025-11-25, 2025-06-18 and 2025-03-26");
    CHECK_STR(mcp_revisions_text(true), "2026-07-28, 2025-11-25, 2025-06-18 and 2025-03-26");
    json_t *all = mcp_revisions_json();
    CHECK(json_array_size(all) == 4);
    CHECK_STR(json_string_value(json_array_get(all, 0)), "2026-07-28");
    json_decref(all);
}
