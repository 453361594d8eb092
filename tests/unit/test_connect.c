/* The device login's pure parts: the codes and keys (src/connect) and where the CLI
 * saves a connection (src/cli/saved.c, compiled in here: the unit binary links no
 * CLI object). */
#include <regex.h>
#include <string.h>

#include "cli/saved.c"
#include "connect/connect.h"
#include "unit.h"

static bool matches(const char *re, const char *s)
{
    regex_t r;
    if (regcomp(&r, re, REG_EXTENDED | REG_NOSUB) != 0) return false;
    bool ok = regexec(&r, s, 0, NULL, 0) == 0;
    regfree(&r);
    return ok;
}

TEST(connect_codes_have_runtime_clouds_shapes)
{
    for (int i = 0; i < 200; i++) {
        char user[CONNECT_USER_CODE_LEN + 1], dev[CONNECT_DEVICE_CODE_LEN + 1];
        char key[CONNECT_KEY_LEN + 1], uuid[CONNECT_UUID_LEN + 1];
        connect_user_code(user);
        connect_device_code(dev);
        connect_key(key);
        connect_uuid(uuid);
        CHECK(matches("^[A-F0-9]{4}(-[A-F0-9]{4}){2}$", user));
        CHECK(connect_user_code_ok(user));
        CHECK(matches("^[A-Za-z0-9_-]{43}$", dev));
        CHECK(connect_device_code_ok(dev));
        CHECK(matches("^rtcloud_[a-f0-9-]{36}_[A-Za-z0-9_-]{43}$", key));
        CHECK(connect_key_ok(key) && login_key_ok(key));
        CHECK(
            matches("^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$", uuid));
    }
    CHECK(!connect_user_code_ok("abcd-ef01-2345"));
    CHECK(!connect_user_code_ok("ABCD-EF01-23456"));
    CHECK(!connect_device_code_ok("short"));
    CHECK(!login_key_ok("rtk_0123"));
    CHECK(!login_key_ok("rtcloud_ABCDEF00-0000-4000-8000-000000000000_"
                        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"));
}

TEST(connect_base64url_and_names)
{
    char out[16];
    connect_base64url(out, "\xfb\xff\xfe", 3);
    CHECK_STR(out, "-__-");
    connect_base64url(out, "ab", 2);
    CHECK_STR(out, "YWI");
    err_t err = {0};
    CHECK(connect_check_agent("My coding agent", &err) == 0);
    CHECK(connect_check_agent("\xc3\xa9t\xc3\xa9", &err) == 0);
    CHECK(connect_check_agent("a\nb", &err) < 0);
    CHECK(connect_check_agent("a\xc2\x85", &err) < 0); /* C1: NEXT LINE */
    CHECK(connect_check_agent("", &err) < 0);
    CHECK(connect_check_public_key("junk", &err) < 0);
}

TEST(saved_origin_is_normalised_as_the_official_sdks_do)
{
    char o[300];
    CHECK(saved_origin("https://api.withruntime.com/", o, sizeof o) == 0);
    CHECK_STR(o, "https://api.withruntime.com");
    CHECK(saved_origin("HTTP://127.0.0.1:7070/v1?x=1", o, sizeof o) == 0);
    CHECK_STR(o, "http://127.0.0.1:7070");
    CHECK(saved_origin("https://h.example:443/x", o, sizeof o) == 0);
    CHECK_STR(o, "https://h.example");
    CHECK(saved_origin("http://[::1]:80", o, sizeof o) == 0);
    CHECK_STR(o, "http://[::1]");
    CHECK(saved_origin("http://[::1]", o, sizeof o) == 0);
    CHECK_STR(o, "http://[::1]");
    CHECK(saved_origin("ftp://x", o, sizeof o) < 0);
    CHECK(saved_origin("http://u:p@x", o, sizeof o) < 0);
    CHECK(saved_origin("127.0.0.1:7070", o, sizeof o) < 0);
}

TEST(saved_name_is_the_sha256_of_both_origins)
{
    char name[72];
    saved_name("https://withruntime.com", "https://api.withruntime.com", name);
    CHECK_STR(name, "46e10a03492c1fab7df112410db1b48ddf6c946c3c8df5e66996722273a383d4.json");
    saved_name("https://withruntime.com", "http://127.0.0.1:7070", name);
    CHECK_STR(name, "4b63aae567447ecd9cc04c17adb8708a0565ce71b97dfe6b64b0401de90ad233.json");
}
