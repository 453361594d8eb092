#include <errno.h>

#include "api/api.h"
#include "unit.h"

TEST(api_json_text_replaces_invalid_utf8)
{
    json_t *s = api_json_text("ok\xff\xc3\xa9\xed\xa0\x80", 8);
    CHECK_STR(json_string_value(s), "ok\xef\xbf\xbd\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    json_decref(s);
    s = api_json_text("a\0b", 3);
    CHECK(json_string_length(s) == 3);
    json_decref(s);
}

TEST(common_constant_time_equal)
{
    CHECK(str_equal_ct("abc", "abc"));
    CHECK(!str_equal_ct("abc", "abd"));
    CHECK(!str_equal_ct("abc", "abcd"));
    CHECK(!str_equal_ct("", "a"));
}
