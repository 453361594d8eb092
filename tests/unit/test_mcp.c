/* The gateway's pure parts: the fingerprint of a paged tool list and the Host and
 * Origin checks against DNS rebinding. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
    CHECK(mcp_host_allowed(pub, listen, "mcp.example.com"));
    CHECK(mcp_host_allowed(pub, listen, "MCP.example.com"));
    CHECK(mcp_host_allowed(pub, listen, "127.0.0.1:7070"));
    CHECK(mcp_host_allowed(pub, listen, "localhost:7070"));
    CHECK(mcp_host_allowed(pub, listen, "[::1]:7070"));
    CHECK(!mcp_host_allowed(pub, listen, "localhost:8080"));
    CHECK(!mcp_host_allowed(pub, listen, "evil.example:7070"));
    CHECK(!mcp_host_allowed(pub, listen, "127.0.0.1.evil.example:7070"));
    CHECK(!mcp_host_allowed(pub, listen, NULL));
    /* Listening on all addresses: only the public name counts. */
    CHECK(!mcp_host_allowed(pub, "0.0.0.0:7070", "localhost:7070"));
    CHECK(mcp_host_allowed(pub, "0.0.0.0:7070", "mcp.example.com"));
}

TEST(mcp_origin_must_be_the_gateway_or_local)
{
    const char *pub = "https://mcp.example.com/base";
    CHECK(mcp_origin_allowed(pub, NULL));
    CHECK(mcp_origin_allowed(pub, "https://mcp.example.com"));
    CHECK(mcp_origin_allowed(pub, "http://localhost:6274"));
    CHECK(mcp_origin_allowed(pub, "http://127.0.0.1:6274"));
    CHECK(!mcp_origin_allowed(pub, "https://mcp.example.com.evil.example"));
    CHECK(!mcp_origin_allowed(pub, "https://evil.example"));
    CHECK(!mcp_origin_allowed(pub, "http://localhost.evil.example"));
    CHECK(!mcp_origin_allowed(pub, "null"));
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
