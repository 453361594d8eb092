#include <errno.h>

#include "model/model.h"
#include "policy/policy.h"
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
    CHECK(s.network.allow.n == 0);
    CHECK(s.name[0] == '\0');
    CHECK(s.isolation == MODEL_DRIVER_DEFAULT); /* the API gives it the daemon's */
    json_t *v = model_sandbox_json(&s);
    CHECK(json_is_null(json_object_get(v, "name")));
    CHECK(json_is_null(json_object_get(v, "isolation")));
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
    CHECK(!s.network.internet); /* a stored row keeps its meaning: off */
    model_network_as_cloud_reads(&s.network);
    CHECK(s.network.internet); /* a request's: that list (Runtime Cloud's reading) */
    s.network.internet = false;
    CHECK(s.network.allow.n == 2);
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
        {"{\"isolation\": \"vm\"}", "isolation must be ns or gvisor"},
        {"{\"isolation\": 5}", "isolation"},
        {"{\"isolation\": \"NS\"}", "isolation"},
        {"[]", "JSON object"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        err_t err = {0};
        struct model_sandbox s;
        CHECK(parse(cases[i].body, &s, &err) == -EINVAL);
        CHECK(strstr(err.msg, cases[i].word) != NULL);
        CHECK(s.labels.v == NULL && s.env.v == NULL && s.network.allow.v == NULL);
    }
}

TEST(model_sandbox_isolation)
{
    static const struct {
        const char *body;
        enum model_driver want;
        const char *name;
    } cases[] = {
        {"{\"isolation\":\"ns\"}", MODEL_DRIVER_NS, "ns"},
        {"{\"isolation\":\"gvisor\"}", MODEL_DRIVER_GVISOR, "gvisor"},
        {"{\"isolation\":null}", MODEL_DRIVER_DEFAULT, NULL},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        err_t err = {0};
        struct model_sandbox s, copy;
        CHECK(parse(cases[i].body, &s, &err) == 0);
        CHECK(s.isolation == cases[i].want);
        json_t *v = model_sandbox_json(&s);
        json_t *iso = json_object_get(v, "isolation");
        if (cases[i].name)
            CHECK_STR(json_string_value(iso), cases[i].name);
        else
            CHECK(json_is_null(iso));
        CHECK(model_sandbox_copy(&copy, &s, &err) == 0); /* the copy keeps it */
        CHECK(copy.isolation == cases[i].want);
        json_decref(v);
        model_sandbox_clear(&s);
        model_sandbox_clear(&copy);
    }
    /* Every wrong field is named at once, isolation among them. */
    err_t err = {0};
    struct model_sandbox s;
    CHECK(parse("{\"memoryMiB\":1,\"isolation\":\"vm\"}", &s, &err) == -EINVAL);
    CHECK(strstr(err.msg, "memoryMiB") && strstr(err.msg, "isolation"));
    /* A NUL inside is not the name it starts with. */
    json_t *body = json_pack("{s:o}", "isolation", json_stringn("ns\0x", 4));
    CHECK(model_sandbox_parse(body, &s, &err) == -EINVAL);
    CHECK(strstr(err.msg, "isolation") != NULL);
    json_decref(body);
}

TEST(model_network_add_and_copy)
{
    err_t err = {0};
    struct model_network n = {.internet = true}, copy;
    CHECK(model_network_add(&n, "a.example", &err) == 0);
    CHECK(model_network_add(&n, "a.example", &err) == 0);
    CHECK(model_network_add(&n, "b.example", &err) == 0);
    CHECK(n.allow.n == 2);
    CHECK(model_network_copy(&copy, &n, &err) == 0);
    CHECK(copy.allow.n == 2 && copy.allow.v[1] != n.allow.v[1]);
    CHECK_STR(copy.allow.v[1], "b.example");
    model_network_clear(&n);
    model_network_clear(&copy);
}

static int parse_mcp(const char *text, struct model_mcp_server *out, err_t *err)
{
    json_t *in = json_loads(text, 0, NULL);
    int r = model_mcp_server_parse(in, out, err);
    json_decref(in);
    return r;
}

TEST(model_mcp_server_catalog_and_own)
{
    err_t err = {0};
    struct model_mcp_server s, own, back;
    CHECK(parse_mcp("{\"id\":\"github\",\"secrets\":{\"GITHUB_TOKEN\":\"GH\"},"
                    "\"fingerprint\":\"0123456789abcdef\",\"isolation\":\"session\"}",
                    &s, &err) == 0);
    CHECK_STR(s.name, "github");
    CHECK_STR(s.id, "github");
    CHECK_STR(model_map_get(&s.secrets, "GITHUB_TOKEN"), "GH");
    CHECK(s.isolation == MODEL_ISOLATION_SESSION);
    CHECK(parse_mcp("{\"name\":\"mine\",\"command\":[\"node\",\"s.js\"],\"args\":[\"-v\"]}", &own,
                    &err) == 0);
    CHECK(own.id[0] == '\0' && own.command.n == 2 && own.args.n == 1);
    CHECK(own.isolation == MODEL_ISOLATION_SHARED);
    json_t *v = model_mcp_server_json(&own);
    CHECK(model_mcp_server_parse(v, &back, &err) == 0);
    CHECK(model_mcp_server_equal(&own, &back));
    CHECK(!model_mcp_server_equal(&own, &s));
    json_decref(v);
    model_mcp_server_clear(&s);
    model_mcp_server_clear(&own);
    model_mcp_server_clear(&back);
}

TEST(model_mcp_server_rejects)
{
    static const struct {
        const char *in, *word;
    } cases[] = {
        {"[]", "each server is an object"},
        {"{\"name\":\"x\"}", "a catalog id, or a name and a command"},
        {"{\"name\":\"x\",\"command\":[]}", "a name and a command"},
        {"{\"name\":\"Bad\",\"command\":[\"a\"]}", "server name"},
        {"{\"id\":\"memory\",\"env\":{\"A\":1}}", "env and secrets"},
        {"{\"id\":\"memory\",\"isolation\":\"both\"}", "isolation"},
        {"{\"id\":\"memory\",\"fingerprint\":\"abc\"}", "16 to 64 hex digits"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        err_t err = {0};
        struct model_mcp_server s;
        CHECK(parse_mcp(cases[i].in, &s, &err) == -EINVAL);
        CHECK(strstr(err.msg, cases[i].word) != NULL);
        CHECK(s.env.v == NULL && s.command.v == NULL && s.args.v == NULL);
    }
}

/* Unknown keys: refused, every one named at once with the known ones. */
TEST(json_known_fields_names_every_unknown_key)
{
    static const char *const known[] = {"internet", "allow", NULL};
    err_t err = {0};
    json_t *ok = json_loads("{\"internet\":true,\"allow\":[]}", 0, NULL);
    json_t *bad = json_loads("{\"internet\":true,\"deny\":[\"x\"],\"foo\":1}", 0, NULL);
    json_t *one = json_loads("{\"deny\":[]}", 0, NULL);
    json_t *arr = json_loads("[1]", 0, NULL);
    CHECK(json_known_fields(ok, "network", known, &err) == 0);
    CHECK(json_known_fields(arr, "network", known, &err) == 0); /* its type: the reader's */
    CHECK(json_known_fields(bad, "network", known, &err) == -EINVAL);
    CHECK_STR(err.msg, "network: unknown fields: deny, foo; known: internet, allow");
    CHECK(json_known_fields(one, NULL, known, &err) == -EINVAL);
    CHECK_STR(err.msg, "unknown field: deny; known: internet, allow");
    json_decref(ok);
    json_decref(bad);
    json_decref(one);
    json_decref(arr);
}

TEST(json_known_fields_counts_what_the_message_cannot_hold)
{
    static const char *const known[] = {"a", NULL};
    json_t *o = json_object();
    char key[80];
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof key, "unknown_key_number_%02d", i);
        json_object_set_new(o, key, json_true());
    }
    err_t err = {0};
    CHECK(json_known_fields(o, "body", known, &err) == -EINVAL);
    CHECK(strstr(err.msg, "unknown_key_number_00, unknown_key_number_01") != NULL);
    CHECK(strstr(err.msg, " more; known: a") != NULL);
    json_decref(o);
}

TEST(model_refuses_unknown_fields_at_every_level)
{
    static const struct {
        const char *body, *msg;
    } cases[] = {
        {"{\"bogus\":1,\"memoryMiB\":256,\"extra\":2}",
         "unknown fields: bogus, extra; known: name,"},
        {"{\"network\":{\"internet\":true,\"block\":[\"example.com\"]}}",
         "network: unknown field: block; known: internet, allow, deny, connect"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        err_t err = {0};
        struct model_sandbox s;
        CHECK(parse(cases[i].body, &s, &err) == -EINVAL);
        if (!strstr(err.msg, cases[i].msg)) fprintf(stderr, "  got: %s\n", err.msg);
        CHECK(strstr(err.msg, cases[i].msg) != NULL);
    }
    err_t err = {0};
    struct model_mcp_server m;
    CHECK(parse_mcp("{\"id\":\"memory\",\"tool\":[\"x\"],\"user\":\"root\"}", &m, &err) == -EINVAL);
    CHECK(strstr(err.msg, "unknown fields: tool, user; known: ") != NULL);
    CHECK(parse_mcp("{\"id\":\"memory\",\"command\":[\"sh\"]}", &m, &err) == -EINVAL);
    CHECK(strstr(err.msg, "command") != NULL);
}

/* allow: [] is a list with no host; no allow is no list (any public host). The
 * difference survives the JSON the API answers with and the store keeps. */
TEST(model_network_empty_list_is_not_no_list)
{
    static const struct {
        const char *in, *out;
        bool listed;
    } cases[] = {
        {"{\"internet\":true}", "{\"internet\":true}", false},
        {"{\"internet\":true,\"allow\":null}", "{\"internet\":true}", false},
        {"{\"internet\":true,\"allow\":[]}", "{\"internet\":true,\"allow\":[]}", true},
        {"{\"internet\":false,\"allow\":[]}", "{\"internet\":false,\"allow\":[]}", true},
        {"{\"allow\":[\"a.example\"]}", "{\"internet\":true,\"allow\":[\"a.example\"]}", true},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        err_t err = {0};
        struct model_network n, back, copy;
        json_t *in = json_loads(cases[i].in, 0, NULL), *want = json_loads(cases[i].out, 0, NULL);
        CHECK(model_network_parse(in, &n, &err) == 0);
        CHECK(n.listed == cases[i].listed);
        json_t *v = model_network_json(&n);
        CHECK(json_equal(v, want));
        CHECK(model_network_parse(v, &back, &err) == 0 && back.listed == n.listed);
        CHECK(model_network_copy(&copy, &n, &err) == 0 && copy.listed == n.listed);
        struct policy pol;
        CHECK(model_network_policy(&n, &pol, &err) == 0);
        enum policy_verdict any = policy_check(&pol, "anywhere.example", NULL, 443);
        CHECK(any == (!n.internet       ? POLICY_DENY_OFFLINE
                      : cases[i].listed ? POLICY_DENY_NOT_LISTED
                                        : POLICY_ALLOW));
        policy_clear(&pol);
        json_decref(in);
        json_decref(want);
        json_decref(v);
        model_network_clear(&n);
        model_network_clear(&back);
        model_network_clear(&copy);
    }
    struct model_network added = {.internet = true};
    err_t err = {0};
    CHECK(model_network_add(&added, "a.example", &err) == 0 && added.listed);
    model_network_clear(&added);
    CHECK(!added.listed && added.internet);
}

/* deny wins over allow, for names, wildcards and addresses; connect pairs are reached
 * beyond the allow list and must name their port. */
TEST(model_network_deny_and_connect)
{
    err_t err = {0};
    struct model_network n;
    json_t *in = json_loads("{\"internet\":true,\"allow\":[\"*.a.example\",\"b.example\"],"
                            "\"deny\":[\"bad.a.example\",\"203.0.113.0/24\",\"b.example:22\"],"
                            "\"connect\":[\"db.example:5432\"]}",
                            0, NULL);
    CHECK(model_network_parse(in, &n, &err) == 0);
    struct policy pol;
    CHECK(model_network_policy(&n, &pol, &err) == 0);
    CHECK(policy_check(&pol, "ok.a.example", NULL, 443) == POLICY_ALLOW);
    CHECK(policy_check(&pol, "bad.a.example", NULL, 443) == POLICY_DENY_DENIED);
    CHECK(policy_check(&pol, "bad.a.example", NULL, 0) == POLICY_DENY_DENIED); /* DNS too */
    CHECK(policy_check(&pol, "b.example", NULL, 443) == POLICY_ALLOW);
    CHECK(policy_check(&pol, "b.example", NULL, 22) == POLICY_DENY_DENIED);
    CHECK(policy_check(&pol, "b.example", NULL, 0) == POLICY_ALLOW); /* a port-only deny */
    CHECK(policy_check(&pol, "db.example", NULL, 5432) == POLICY_ALLOW);
    CHECK(policy_check(&pol, "db.example", NULL, 443) == POLICY_DENY_NOT_LISTED);
    struct policy_addr a;
    CHECK(policy_parse_ip("203.0.113.9", &a) == 0);
    CHECK(policy_denied(&pol, NULL, &a, 443)); /* the address a name resolved to */
    json_t *back = model_network_json(&n);
    CHECK(json_equal(back, in));
    policy_clear(&pol);
    model_network_clear(&n);
    json_decref(back);
    json_decref(in);
    static const char *const bad[] = {
        "{\"connect\":[\"db.example\"]}", /* no port */
        "{\"deny\":[\"*\"]}",             /* not a rule */
        "{\"deny\":\"example.com\"}",     /* not a list */
    };
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        json_t *v = json_loads(bad[i], 0, NULL);
        CHECK(model_network_parse(v, &n, &err) == -EINVAL);
        json_decref(v);
    }
}
