#include <errno.h>

#include "api/api.h"
#include "unit.h"

static json_t *spec_of(const char *text, err_t *err)
{
    json_t *body = json_loads(text, 0, NULL);
    json_t *spec = api_sandbox_spec(body, err);
    json_decref(body);
    return spec;
}

TEST(api_spec_defaults)
{
    err_t err = {0};
    json_t *s = spec_of("{}", &err);
    CHECK(s != NULL);
    CHECK(json_integer_value(json_object_get(s, "memoryMiB")) == 1024);
    CHECK(json_integer_value(json_object_get(s, "diskMiB")) == 2048);
    CHECK(json_integer_value(json_object_get(s, "idlePauseSeconds")) == 300);
    CHECK(json_number_value(json_object_get(s, "cpus")) == 1);
    CHECK(json_is_true(json_object_get(json_object_get(s, "network"), "internet")));
    CHECK(json_is_null(json_object_get(s, "name")));
    json_decref(s);
}

TEST(api_spec_rejects_with_field_name)
{
    static const struct {
        const char *body, *word;
    } cases[] = {
        {"{\"memoryMiB\": 1}", "memoryMiB"},
        {"{\"cpus\": \"two\"}", "cpus"},
        {"{\"name\": \"../x\"}", "name"},
        {"{\"bogus\": 1}", "bogus"},
        {"{\"env\": {\"1BAD\": \"x\"}}", "env"},
        {"{\"labels\": []}", "labels"},
        {"{\"network\": {\"internet\": 1}}", "network.internet"},
        {"{\"diskMiB\": 1.5}", "diskMiB"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        err_t err = {0};
        json_t *s = spec_of(cases[i].body, &err);
        CHECK(s == NULL);
        CHECK(err.code == -EINVAL);
        CHECK(strstr(err.msg, cases[i].word) != NULL);
        json_decref(s);
    }
}

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
