/* Fuzz target: the create-body validation (model_sandbox_parse, the settings as
 * the API and the store read them) and the bytes-to-JSON-text conversion of exec
 * output (api_json_text).
 *
 * The input is an HTTP body, parsed as api_body_json() does. Checks:
 *   - api_json_text(input) always gives a string json_dumps can write; valid
 *     UTF-8 comes out unchanged, and a second pass changes nothing;
 *   - a rejected body has a negative code and a message that fits the error
 *     shape (api_error packs it as a JSON string, so it must be valid UTF-8);
 *     the same for the invalid_request message built from jansson's error text;
 *   - an accepted body gives settings whose JSON (model_sandbox_json: the API's
 *     answer and the store's row) has exactly the documented fields, each of
 *     its type and in its range (isolation: null, "ns" or "gvisor"); parsing that JSON again gives
 * the same JSON; it survives the round trip through text the store makes. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FUZZ_NAME "fuzz_spec"
#include "api/api.h"
#include "fuzz.h"
#include "model/model.h"

static void check_text(const uint8_t *data, size_t size)
{
    json_t *s = api_json_text((const char *)data, size);
    if (!s || !json_is_string(s)) fail("api_json_text gave no string for %zu bytes", size);
    char *dump = json_dumps(s, JSON_ENCODE_ANY | JSON_COMPACT);
    if (!dump) fail("json_dumps cannot write the output of api_json_text");
    free(dump);
    size_t n = json_string_length(s);
    if (n > 3 * size) fail("api_json_text grew %zu bytes to %zu", size, n);
    /* jansson's own check: what it accepts as UTF-8 must pass through untouched. */
    json_t *direct = json_stringn((const char *)data, size);
    if (direct && (n != size || memcmp(json_string_value(s), data, size) != 0))
        fail("api_json_text changed valid UTF-8");
    json_decref(direct);
    json_t *again = api_json_text(json_string_value(s), n);
    if (!again || !json_equal(s, again)) fail("api_json_text is not idempotent");
    json_decref(again);
    json_decref(s);
}

/* What api_error() sends: it must pack, or the client gets "null". */
static void __attribute__((format(printf, 1, 2))) check_error_message(const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* As api_error does: the message goes through api_json_text. */
    json_t *e = json_pack("{s:{s:s,s:o}}", "error", "code", "invalid_request", "message",
                          api_json_text(msg, strlen(msg)));
    if (!e) fail("the error message is not valid UTF-8, so api_error sends null: \"%s\"", msg);
    json_decref(e);
}

static bool is_int_in(json_t *v, long long lo, long long hi)
{
    return json_is_integer(v) && json_integer_value(v) >= lo && json_integer_value(v) <= hi;
}

static void check_string_map(json_t *m, const char *key)
{
    if (!json_is_object(m) || json_object_size(m) > 256) fail("%s is not an object of <= 256", key);
    const char *k;
    json_t *v;
    json_object_foreach(m, k, v) if (!json_is_string(v)) fail("%s.%s is not a string", key, k);
}

static void check_spec(json_t *spec)
{
    static const char *const fields[] = {
        "name",       "memoryMiB", "cpus", "diskMiB", "idlePauseSeconds", "timeoutSeconds",
        "onLeaseEnd", "labels",    "env",  "network", "isolation",        "hibernateAfterSeconds"};
    if (!json_is_object(spec) || json_object_size(spec) != sizeof fields / sizeof *fields)
        fail("the spec does not have exactly the %zu fields", sizeof fields / sizeof *fields);
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
        if (!json_object_get(spec, fields[i])) fail("the spec has no %s", fields[i]);
    json_t *name = json_object_get(spec, "name");
    if (!json_is_null(name)) {
        const char *s = json_string_value(name);
        size_t n = s ? strlen(s) : 0;
        if (!s || n == 0 || n > 63 || n != json_string_length(name) ||
            strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") != n ||
            strchr("_.-", s[0]))
            fail("accepted a bad name");
    }
    if (!is_int_in(json_object_get(spec, "memoryMiB"), 64, 1 << 20)) fail("memoryMiB");
    if (!is_int_in(json_object_get(spec, "diskMiB"), 64, 1 << 22)) fail("diskMiB");
    if (!is_int_in(json_object_get(spec, "idlePauseSeconds"), 0, 1 << 30)) fail("idlePause");
    if (!is_int_in(json_object_get(spec, "hibernateAfterSeconds"), 0, 1 << 30))
        fail("hibernateAfter");
    json_t *lease = json_object_get(spec, "timeoutSeconds");
    if (!json_is_null(lease) && !is_int_in(lease, 60, 86400)) fail("timeoutSeconds");
    const char *end = json_string_value(json_object_get(spec, "onLeaseEnd"));
    if (!end || (strcmp(end, "pause") && strcmp(end, "stop") && strcmp(end, "delete")))
        fail("onLeaseEnd");
    /* null: none asked for (the API fills in the daemon's before it answers or stores). */
    json_t *iso = json_object_get(spec, "isolation");
    const char *driver = json_string_value(iso);
    if (!json_is_null(iso) && (!driver || (strcmp(driver, "ns") && strcmp(driver, "gvisor"))))
        fail("isolation");
    json_t *cpus = json_object_get(spec, "cpus");
    double c = json_number_value(cpus);
    if (!json_is_number(cpus) || !(c >= 0.01 && c <= 1024)) fail("cpus %g", c);
    check_string_map(json_object_get(spec, "labels"), "labels");
    check_string_map(json_object_get(spec, "env"), "env");
    json_t *net = json_object_get(spec, "network");
    static const char *const lists[] = {"allow", "deny", "connect"};
    size_t n_fields = 1;
    if (!json_is_object(net) || !json_is_boolean(json_object_get(net, "internet")))
        fail("network is not {internet, allow?[], deny?[], connect?[]}");
    for (size_t l = 0; l < ARRAY_LEN(lists); l++) {
        json_t *list = json_object_get(net, lists[l]); /* allow absent: any public host */
        if (!list) continue;
        n_fields++;
        if (!json_is_array(list)) fail("network.%s is not a list", lists[l]);
        size_t i;
        json_t *h;
        json_array_foreach(list, i, h) if (!json_is_string(h) || json_string_length(h) == 0 ||
                                           json_string_length(h) > 260)
            fail("network.%s[%zu]", lists[l], i);
    }
    if (json_object_size(net) != n_fields) fail("network has a field it should not");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_text(data, size);

    json_error_t jerr;
    json_t *body = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &jerr);
    if (!body) {
        check_error_message("the body is not valid JSON: %s (line %d)", jerr.text, jerr.line);
        return 0;
    }
    err_t err = {0};
    struct model_sandbox settings;
    int r = model_sandbox_parse(body, &settings, &err);
    json_decref(body);
    if (r < 0) {
        if (err.code >= 0 || !err.msg[0]) fail("rejected without an error (code %d)", err.code);
        check_error_message("%s", err.msg);
        return 0;
    }
    if (err.code != 0) fail("accepted with an error set");
    json_t *spec = model_sandbox_json(&settings);
    model_sandbox_clear(&settings);
    check_spec(spec);

    err_t err2 = {0};
    if (model_sandbox_parse(spec, &settings, &err2) < 0)
        fail("the settings' own JSON is rejected: %s", err2.msg);
    json_t *again = model_sandbox_json(&settings);
    model_sandbox_clear(&settings);
    if (!json_equal(spec, again)) fail("parsing the settings' JSON changes them");
    json_decref(again);

    /* server.c stores the spec as text and loads it back on restart. */
    char *text = json_dumps(spec, JSON_COMPACT | JSON_SORT_KEYS);
    if (!text) fail("json_dumps cannot write the spec");
    json_t *back = json_loads(text, 0, &jerr);
    if (!back || !json_equal(spec, back)) fail("the spec does not survive the store: %s", text);
    json_decref(back);
    free(text);
    json_decref(spec);
    return 0;
}
