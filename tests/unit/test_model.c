#include <errno.h>

#include "model/model.h"
#include "unit.h"

static int parse(const char *text, struct model_sandbox *out, err_t *err)
{
    json_t *body = json_loads(text, 0, NULL);
    int r = model_sandbox_parse(body, out, err);
    json_decref(body);
    return r;
}

TEST(model_sandbox_defaults)
{
    err_t err = {0};
    struct model_sandbox s;
    CHECK(parse("{}", &s, &err) == 0);
    CHECK(s.memory_mib == 1024);
    CHECK(s.disk_mib == 2048);
    CHECK(s.idle_pause_s == 300);
    CHECK(s.cpus == 1);
    CHECK(s.network.internet);
    CHECK(s.network.n_allow == 0);
    CHECK(s.name[0] == '\0');
    json_t *v = model_sandbox_json(&s);
    CHECK(json_is_null(json_object_get(v, "name")));
    CHECK(json_is_integer(json_object_get(v, "cpus")));
    json_decref(v);
    model_sandbox_clear(&s);
}

TEST(model_sandbox_round_trip)
{
    err_t err = {0};
    struct model_sandbox s, again;
    CHECK(parse("{\"name\":\"a-1\",\"cpus\":0.5,\"memoryMiB\":256,\"idlePauseSeconds\":0,"
                "\"labels\":{\"team\":\"x\",\"acme.io/tier\":\"gold\"},\"env\":{\"A\":\"1\"},"
                "\"network\":{\"internet\":false,\"allow\":[\"api.github.com\",\"*.example.com\"]},"
                "\"getOrCreate\":true}",
                &s, &err) == 0);
    CHECK_STR(s.name, "a-1");
    CHECK(s.cpus == 0.5);
    CHECK(s.idle_pause_s == 0);
    CHECK_STR(model_map_get(&s.labels, "acme.io/tier"), "gold");
    CHECK(model_map_get(&s.labels, "nope") == NULL);
    CHECK(!s.network.internet);
    CHECK(s.network.n_allow == 2);
    json_t *v = model_sandbox_json(&s);
    CHECK(json_object_get(v, "getOrCreate") == NULL); /* the API's, not a setting */
    CHECK(model_sandbox_parse(v, &again, &err) == 0);
    json_t *w = model_sandbox_json(&again);
    CHECK(json_equal(v, w));
    json_decref(v);
    json_decref(w);
    model_sandbox_clear(&s);
    model_sandbox_clear(&again);
}

TEST(model_sandbox_rejects_with_field_name)
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
        {"{\"network\": {\"allow\": [\"*\"]}}", "network.allow"},
        {"{\"diskMiB\": 1.5}", "diskMiB"},
        {"[]", "JSON object"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        err_t err = {0};
        struct model_sandbox s;
        CHECK(parse(cases[i].body, &s, &err) == -EINVAL);
        CHECK(strstr(err.msg, cases[i].word) != NULL);
        CHECK(s.labels.v == NULL && s.env.v == NULL && s.network.allow == NULL);
    }
}

TEST(model_network_add_and_copy)
{
    err_t err = {0};
    struct model_network n = {.internet = true}, copy;
    CHECK(model_network_add(&n, "a.example", &err) == 0);
    CHECK(model_network_add(&n, "a.example", &err) == 0);
    CHECK(model_network_add(&n, "b.example", &err) == 0);
    CHECK(n.n_allow == 2);
    CHECK(model_network_copy(&copy, &n, &err) == 0);
    CHECK(copy.n_allow == 2 && copy.allow[1] != n.allow[1]);
    CHECK_STR(copy.allow[1], "b.example");
    model_network_clear(&n);
    model_network_clear(&copy);
}
