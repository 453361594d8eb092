/* A secret's spec (src/secrets/spec.c): Runtime Cloud's body read whole, every
 * wrong field named at once; rules matched as any-of, paths exact or a prefix
 * ending in slash-star; rows stored before rules read as one rule that keeps its
 * glob meaning; header text built from format. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "secrets/secrets.h"
#include "unit.h"

static json_t *parse(const char *body, json_t **issues)
{
    json_t *b = json_loads(body, 0, NULL);
    *issues = json_array();
    json_t *spec = secret_spec_parse(b, *issues);
    json_decref(b);
    return spec;
}

/* Whether some issue names field. */
static int names(json_t *issues, const char *field)
{
    size_t i;
    json_t *e;
    json_array_foreach(issues, i, e)
    {
        if (strcmp(json_string_value(json_object_get(e, "field")), field) == 0) return 1;
        const char *many = json_string_value(json_object_get(e, "fields"));
        if (many && strstr(many, field)) return 1;
    }
    return 0;
}

TEST(secret_spec_reads_runtime_clouds_body)
{
    json_t *issues;
    json_t *spec =
        parse("{\"value\":\"token abc\",\"hosts\":[\"api.github.com\",\"*.example.com\"],"
              "\"header\":\"Authorization\",\"format\":\"token {value}\","
              "\"rules\":[{\"methods\":[\"GET\"],\"paths\":[\"/repos/*\"]},"
              "{\"paths\":[\"/issues\"]}],\"only\":{\"sandboxes\":[\"sb1\"],"
              "\"labels\":[{\"team\":\"a\"}]},\"env\":\"GITHUB_TOKEN\"}",
              &issues);
    CHECK(spec != NULL);
    CHECK(json_array_size(issues) == 0);
    CHECK(json_object_get(spec, "value") == NULL); /* never kept with the spec */
    CHECK_STR(json_string_value(json_object_get(spec, "header")), "Authorization");
    CHECK(json_array_size(json_object_get(spec, "rules")) == 2);
    CHECK_STR(json_string_value(json_object_get(spec, "env")), "GITHUB_TOKEN");
    json_decref(spec);
    json_decref(issues);
}

TEST(secret_spec_names_every_wrong_field_at_once)
{
    json_t *issues;
    json_t *spec = parse("{\"value\":\"a\\tb\",\"hosts\":[],\"header\":\"Content-Length\","
                         "\"format\":\"no placeholder\",\"rules\":[{\"methods\":[\"get\"]}],"
                         "\"only\":{\"apps\":[\"x\"]},\"env\":\"PATH\",\"git\":{},"
                         "\"githubApp\":{},\"colour\":1}",
                         &issues);
    CHECK(spec == NULL);
    static const char *const wrong[] = {
        "value",          "hosts",     "header", "format", "rules[0].methods[0]",
        "rules[0].paths", "only.apps", "env",    "git",    "githubApp",
        "colour"};
    for (size_t i = 0; i < sizeof wrong / sizeof *wrong; i++) {
        if (!names(issues, wrong[i])) fprintf(stderr, "  not named: %s\n", wrong[i]);
        CHECK(names(issues, wrong[i]));
    }
    char *text = secret_issues_text(issues, SIZE_MAX);
    CHECK(text && strstr(text, "not available in runtimed"));
    CHECK(text && strstr(text, "unknown field: colour; known: value"));
    free(text);
    /* Too long for an error's message: the fields alone, every one. */
    text = secret_issues_text(issues, 200);
    for (size_t i = 0; i < sizeof wrong / sizeof *wrong; i++)
        CHECK(text && strstr(text, wrong[i]));
    free(text);
    json_decref(issues);
}

TEST(secret_spec_limits_rules_paths_and_hosts)
{
    char body[4096];
    json_t *issues;
    /* 17 rules */
    size_t n = (size_t)snprintf(body, sizeof body,
                                "{\"value\":\"v\",\"hosts\":[\"h.example\"],\"rules\":[");
    for (int i = 0; i < 17; i++)
        n += (size_t)snprintf(body + n, sizeof body - n, "%s{\"paths\":[\"/r%d\"]}", i ? "," : "",
                              i);
    snprintf(body + n, sizeof body - n, "]}");
    json_t *spec = parse(body, &issues);
    CHECK(spec == NULL && names(issues, "rules"));
    json_decref(issues);
    /* a star anywhere but a final slash-star; ".." */
    static const char *const bad[] = {"/repos/*/issues", "/repos*", "repos", "/a/../b", "/a/**"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(body, sizeof body,
                 "{\"value\":\"v\",\"hosts\":[\"h.example\"],\"rules\":[{\"paths\":[\"%s\"]}]}",
                 bad[i]);
        spec = parse(body, &issues);
        CHECK(spec == NULL && names(issues, "rules[0].paths[0]"));
        json_decref(issues);
    }
    /* 17 hosts; a range is not a host */
    n = (size_t)snprintf(body, sizeof body, "{\"value\":\"v\",\"hosts\":[");
    for (int i = 0; i < 17; i++)
        n += (size_t)snprintf(body + n, sizeof body - n, "%s\"h%d.example\"", i ? "," : "", i);
    snprintf(body + n, sizeof body - n, "]}");
    spec = parse(body, &issues);
    CHECK(spec == NULL && names(issues, "hosts"));
    json_decref(issues);
    spec = parse("{\"value\":\"v\",\"hosts\":[\"10.0.0.0/8\"]}", &issues);
    CHECK(spec == NULL && names(issues, "hosts[0]"));
    json_decref(issues);
}

TEST(secret_rules_any_rule_lets_a_request_carry_the_value)
{
    json_t *issues;
    json_t *spec = parse("{\"value\":\"v\",\"hosts\":[\"h.example\"],\"rules\":["
                         "{\"methods\":[\"GET\"],\"paths\":[\"/repos/*\"]},"
                         "{\"methods\":[\"POST\"],\"paths\":[\"/issues\"]}]}",
                         &issues);
    CHECK(spec != NULL);
    CHECK(secret_rules_refusal(spec, "GET", "/repos/acme/x/y") == NULL); /* a prefix */
    CHECK(secret_rules_refusal(spec, "GET", "/repos/") == NULL);
    CHECK(secret_rules_refusal(spec, "POST", "/issues") == NULL);
    CHECK_STR(secret_rules_refusal(spec, "GET", "/repos"), "path not allowed");
    CHECK_STR(secret_rules_refusal(spec, "GET", "/issues"), "path not allowed");
    CHECK_STR(secret_rules_refusal(spec, "POST", "/issues/1"), "path not allowed");
    CHECK_STR(secret_rules_refusal(spec, "DELETE", "/issues"), "method not allowed");
    CHECK_STR(secret_rules_refusal(spec, "GET", "/repos/%2525"), "ambiguous path");
    json_decref(spec);
    json_decref(issues);
    /* No rules: every request to the hosts. */
    spec = parse("{\"value\":\"v\",\"hosts\":[\"h.example\"]}", &issues);
    CHECK(spec && secret_rules_refusal(spec, "PATCH", "/anything") == NULL);
    json_decref(spec);
    json_decref(issues);
}

TEST(secret_spec_earlier_body_is_one_rule)
{
    json_t *issues;
    json_t *spec =
        parse("{\"value\":\"v\",\"hosts\":[\"h.example\"],\"methods\":[\"GET\"]}", &issues);
    CHECK(spec != NULL);
    CHECK(json_array_size(json_object_get(spec, "rules")) == 1);
    CHECK(secret_rules_refusal(spec, "GET", "/any/path") == NULL);
    CHECK_STR(secret_rules_refusal(spec, "POST", "/any/path"), "method not allowed");
    json_decref(spec);
    json_decref(issues);
    spec = parse("{\"value\":\"v\",\"hosts\":[\"h.example\"],\"methods\":[\"GET\"],"
                 "\"rules\":[{\"paths\":[\"/a\"]}]}",
                 &issues);
    CHECK(spec == NULL && names(issues, "rules"));
    json_decref(issues);
}

/* A row stored before rules keeps its glob meaning: '*' is one segment there. */
TEST(secret_spec_stored_row_before_rules_keeps_its_globs)
{
    json_t *stored = json_loads("{\"hosts\":[\"h.example\"],\"methods\":[\"GET\"],"
                                "\"paths\":[\"/repos/acme/*\"]}",
                                0, NULL);
    err_t err = {0};
    json_t *spec = secret_spec_load(stored, &err);
    CHECK(spec != NULL);
    CHECK(json_array_size(json_object_get(spec, "rules")) == 1);
    CHECK(secret_rules_refusal(spec, "GET", "/repos/acme/x") == NULL);
    CHECK_STR(secret_rules_refusal(spec, "GET", "/repos/acme/x/y"), "path not allowed");
    CHECK_STR(secret_rules_refusal(spec, "POST", "/repos/acme/x"), "method not allowed");
    json_decref(spec);
    json_decref(stored);
    /* Neither methods nor paths: no rules. */
    stored = json_loads("{\"hosts\":[\"h.example\"],\"methods\":[],\"paths\":[]}", 0, NULL);
    spec = secret_spec_load(stored, &err);
    CHECK(spec && !json_object_get(spec, "rules"));
    json_decref(spec);
    json_decref(stored);
}

TEST(secret_header_text_puts_the_value_in_format)
{
    json_t *issues;
    json_t *spec = parse("{\"value\":\"v\",\"hosts\":[\"h.example\"],\"header\":\"Authorization\","
                         "\"format\":\"token {value}\"}",
                         &issues);
    size_t len = 0;
    char *text = secret_header_text(spec, "abc", 3, &len);
    CHECK_STR(text, "token abc");
    CHECK(len == 9);
    free(text);
    json_object_del(spec, "format");
    text = secret_header_text(spec, "abc", 3, &len);
    CHECK_STR(text, "abc");
    free(text);
    json_decref(spec);
    json_decref(issues);
    /* format without header is refused */
    spec =
        parse("{\"value\":\"v\",\"hosts\":[\"h.example\"],\"format\":\"token {value}\"}", &issues);
    CHECK(spec == NULL && names(issues, "format"));
    json_decref(issues);
}

TEST(secret_value_is_visible_ascii_up_to_8_kib)
{
    err_t err = {0};
    CHECK(secret_value_check("Basic dXNlcjpwYXNz", 18, &err) == 0);
    CHECK(secret_value_check("a\tb", 3, &err) < 0);
    CHECK(secret_value_check("a\r\nb", 4, &err) < 0);
    CHECK(secret_value_check("\xc3\xa9", 2, &err) < 0);
    char *big = malloc(8193);
    memset(big, 'x', 8193);
    CHECK(secret_value_check(big, 8192, &err) == 0);
    CHECK(secret_value_check(big, 8193, &err) < 0);
    free(big);
}
