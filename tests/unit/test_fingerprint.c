/* The fingerprint: every shared test vector byte for byte, Python's number forms, strings,
 * the wrappers a tools list comes in, and what is refused. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>

#include "fingerprint/fingerprint.h"
#include "unit.h"

/* Written by the Python reference; the unit runner runs from the repository root. */
#define VECTORS "tests/fixtures/fingerprint/vectors.jsonl"

static const char *str_of(json_t *o, const char *key, size_t *len)
{
    json_t *v = json_object_get(o, key);
    if (len) *len = json_string_length(v);
    return json_string_value(v);
}

/* One vector: canonical text and hash must be the reference's exactly. */
static int check_vector(json_t *v)
{
    size_t in_len, canon_len;
    const char *name = str_of(v, "name", NULL), *in = str_of(v, "tools_json", &in_len);
    const char *canon = str_of(v, "canonical", &canon_len), *sha = str_of(v, "sha256", NULL);
    const char *fp = str_of(v, "fingerprint", NULL);
    if (!name || !in || !canon || !sha || !fp) {
        fprintf(stderr, "  a vector lacks name, tools_json, canonical, sha256 or fingerprint\n");
        return 1;
    }
    char *got = NULL, hex[65];
    err_t err = {0};
    if (fingerprint_tools(in, in_len, &got, hex, &err)) {
        fprintf(stderr, "  vector %s: %s\n", name, err.msg);
        return 1;
    }
    int bad = 0;
    size_t got_len = strlen(got), i = 0;
    if (got_len != canon_len || memcmp(got, canon, canon_len) != 0) {
        while (i < got_len && i < canon_len && got[i] == canon[i])
            i++;
        fprintf(stderr,
                "  vector %s: canonical differs at byte %zu: got \"%.40s\", want \"%.40s\"\n", name,
                i, got + i, canon + i);
        bad = 1;
    }
    if (strcmp(hex, sha) != 0 || strncmp(hex, fp, FINGERPRINT_SHORT) != 0 ||
        strlen(fp) != FINGERPRINT_SHORT) {
        fprintf(stderr, "  vector %s: sha256 %s, want %s (%s)\n", name, hex, sha, fp);
        bad = 1;
    }
    free(got);
    return bad;
}

TEST(fingerprint_vectors)
{
    FILE *f = fopen(VECTORS, "r");
    if (!f) {
        fprintf(stderr, "  cannot open %s: %s; run build/unit from the repository root\n", VECTORS,
                strerror(errno));
        CHECK(!"the fingerprint test vectors are missing");
        return;
    }
    char *line = NULL;
    size_t cap = 0, n = 0, bad = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) > 0) {
        if (len == 1 && line[0] == '\n') continue;
        json_error_t jerr;
        json_t *v = json_loadb(line, (size_t)len, JSON_ALLOW_NUL, &jerr);
        if (!v) {
            fprintf(stderr, "  %s line %zu: %s\n", VECTORS, n + 1, jerr.text);
            bad++;
        } else {
            bad += (size_t)check_vector(v);
        }
        json_decref(v);
        n++;
    }
    free(line);
    fclose(f);
    CHECK(n >= 16);
    CHECK(bad == 0);
}

static char *canon_of(const char *json)
{
    struct fp_doc *doc;
    err_t err = {0};
    char *out = NULL;
    if (fp_parse(json, strlen(json), &doc, &err)) return NULL;
    if (fp_canonical(fp_doc_root(doc), &out, NULL, &err)) out = NULL;
    fp_doc_free(doc);
    return out;
}

#define CHECK_CANON(in, want)                                                                      \
    do {                                                                                           \
        char *c_ = canon_of(in);                                                                   \
        CHECK_STR(c_, want);                                                                       \
        free(c_);                                                                                  \
    } while (0)

/* Expected texts are Python's: json.dumps(json.loads(IN)). */
TEST(fingerprint_numbers)
{
    static const char *const cases[][2] = {
        {"-0", "0"},
        {"-0.0", "-0.0"},
        {"0.0", "0.0"},
        {"1e2", "100.0"},
        {"1E-7", "1e-07"},
        {"1e16", "1e+16"},
        {"1e15", "1000000000000000.0"},
        {"0.1", "0.1"},
        {"0.3", "0.3"},
        {"0.30000000000000004", "0.30000000000000004"},
        {"1e-5", "1e-05"},
        {"0.0001", "0.0001"},
        {"1e22", "1e+22"},
        {"1e23", "1e+23"},
        {"5e-324", "5e-324"},
        {"2.2250738585072014e-308", "2.2250738585072014e-308"},
        {"1.7976931348623157e308", "1.7976931348623157e+308"},
        {"9007199254740993.0", "9007199254740992.0"},
        {"123456789012345678.5", "1.2345678901234568e+17"},
        {"1234567890123456.7", "1234567890123456.8"},
        {"9999999999999999.0", "1e+16"},
        {"8.98846567431158e307", "8.98846567431158e+307"},
        {"3.0517578125e-05", "3.0517578125e-05"},
        {"1e400", "Infinity"},
        {"-1e400", "-Infinity"},
        {"1e-400", "0.0"},
        {"NaN", "NaN"},
        {"-Infinity", "-Infinity"},
        {"123456789012345678901234567890", "123456789012345678901234567890"},
        {"-123456789012345678901234567890", "-123456789012345678901234567890"},
        {"[1.0,-5,2.50,1E+2]", "[1.0,-5,2.5,100.0]"},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++)
        CHECK_CANON(cases[i][0], cases[i][1]);
}

TEST(fingerprint_strings)
{
    /* Lone surrogates stay, pairs join, astral characters go out as pairs, lowercase hex. */
    CHECK_CANON("[\"\\ud800\",\"\\uD83D\\uDE00\",\"\\udc00\\ud800\",\"x\\ud800y\"]",
                "[\"\\ud800\",\"\\ud83d\\ude00\",\"\\udc00\\ud800\",\"x\\ud800y\"]");
    CHECK_CANON("\"\\u007f\\u0000\\u001f\\u2028\\/ \\b\\f\\n\\r\\t\"",
                "\"\\u007f\\u0000\\u001f\\u2028/ \\b\\f\\n\\r\\t\"");
    CHECK_CANON("\"\xc3\xa9\xf0\x9f\x98\x80\x7f\"", "\"\\u00e9\\ud83d\\ude00\\u007f\"");
    /* Keys by code point: NUL after the end of "a", astral after U+FFFF; the last wins. */
    CHECK_CANON("{\"b\":1,\"a\\u0000\":2,\"a\":3,\"\\ud83d\\ude00\":4,\"\\uffff\":5,\"b\":6}",
                "{\"a\":3,\"a\\u0000\":2,\"b\":6,\"\\uffff\":5,\"\\ud83d\\ude00\":4}");
    CHECK_CANON("\xef\xbb\xbf [ ]\r\n", "[]");
}

TEST(fingerprint_wrappers)
{
    const char *arr = "[{\"name\":\"b\"},{\"name\":\"a\",\"x\":1}]";
    const char *wrapped[] = {
        "{\"tools\":[{\"name\":\"b\"},{\"name\":\"a\",\"x\":1}]}",
        "{\"tools\":[{\"name\":\"b\"},{\"name\":\"a\",\"x\":1}],\"nextCursor\":null}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[{\"name\":\"b\"},"
        "{\"x\":1,\"name\":\"a\"}]}}",
    };
    char want[65], hex[65], *canon = NULL;
    err_t err = {0};
    CHECK(fingerprint_tools(arr, strlen(arr), &canon, want, &err) == 0);
    CHECK_STR(canon, "[{\"name\":\"a\",\"x\":1},{\"name\":\"b\"}]");
    free(canon);
    for (size_t i = 0; i < ARRAY_LEN(wrapped); i++) {
        CHECK(fingerprint_tools(wrapped[i], strlen(wrapped[i]), NULL, hex, &err) == 0);
        CHECK_STR(hex, want);
    }
    const char *sorted = "[{\"name\":\"a\",\"x\":1},{\"name\":\"b\"}]";
    fingerprint_sha256_hex(sorted, strlen(sorted), hex);
    CHECK_STR(hex, want);
}

static int refused(const char *json, const char *msg_part)
{
    char hex[65];
    err_t err = {0};
    int r = fingerprint_tools(json, strlen(json), NULL, hex, &err);
    if (r != -EINVAL || !strstr(err.msg, msg_part)) {
        fprintf(stderr, "  %.60s: r=%d \"%s\", want \"%s\"\n", json, r, err.msg, msg_part);
        return 0;
    }
    return 1;
}

TEST(fingerprint_refuses)
{
    CHECK(refused("", "ends where a value should be"));
    CHECK(refused("[1,]", "line 1, column 4: expected a value"));
    CHECK(refused("[\n{\"name\":\"a\"} x]", "line 2, column 14: expected ',' or ']'"));
    CHECK(refused("[01]", "expected ','"));
    CHECK(refused("[1.]", "digit after '.'"));
    CHECK(refused("[1e]", "digit in its exponent"));
    CHECK(refused("[-]", "digit after '-'"));
    CHECK(refused("[\"a\nb\"]", "control character"));
    CHECK(refused("[\"\\x\"]", "backslash"));
    CHECK(refused("[\"\\u12\"]", "four hex digits"));
    CHECK(refused("[\"\xc3\x28\"]", "not valid UTF-8"));
    CHECK(refused("[\"\xed\xa0\x80\"]", "not valid UTF-8")); /* a raw surrogate */
    CHECK(refused("[\"\xc0\xaf\"]", "not valid UTF-8"));     /* overlong */
    CHECK(refused("[\"abc", "not closed"));
    CHECK(refused("{\"a\" 1}", "expected ':'"));
    CHECK(refused("{1:1}", "expected a key"));
    CHECK(refused("[nul]", "expected a value"));
    CHECK(refused("[] []", "more text after"));
    CHECK(refused("{\"x\":1}", "not a tools list"));
    CHECK(refused("[{\"description\":\"no name\"}]", "tool 1 of the list"));
    CHECK(refused("[{\"name\":7}]", "\"name\" string"));
    CHECK(refused("{\"tools\":[],\"nextCursor\":\"2\"}", "nextCursor"));
    CHECK(refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-1,\"message\":\"boom\"}}",
                  "JSON-RPC error, not a tools list: boom"));
    char deep[1200];
    memset(deep, '[', 600);
    memset(deep + 600, ']', 600);
    deep[1199] = '\0';
    CHECK(refused(deep, "nested deeper than 512"));
    char *big = malloc(FP_MAX_INT_DIGITS + 8);
    memset(big, '7', FP_MAX_INT_DIGITS + 1);
    big[0] = '[', big[FP_MAX_INT_DIGITS + 1] = '7', big[FP_MAX_INT_DIGITS + 2] = ']';
    big[FP_MAX_INT_DIGITS + 3] = '\0';
    CHECK(refused(big, "more than 4300 digits"));
    big[FP_MAX_INT_DIGITS + 1] = ']', big[FP_MAX_INT_DIGITS + 2] = '\0'; /* 4300: fine */
    char *c = canon_of(big);
    CHECK(c && strlen(c) == FP_MAX_INT_DIGITS + 2);
    free(c);
    free(big);
}

TEST(fingerprint_get_and_match)
{
    struct fp_doc *doc;
    err_t err = {0};
    const char *j = "{\"b\":{\"c\":\"x\\u0000y\"},\"a\":1,\"a\":2}";
    CHECK(fp_parse(j, strlen(j), &doc, &err) == 0);
    const struct fp_value *root = fp_doc_root(doc);
    CHECK(root->type == FP_OBJECT && root->len == 2 && root->dups == 1);
    CHECK(root->dup_key_len == 1 && root->dup_key[0] == 'a');
    CHECK_STR(fp_get(root, "a")->text, "2");
    const struct fp_value *c = fp_get(fp_get(root, "b"), "c");
    CHECK(c && c->len == 3 && memcmp(c->text, "x\0y", 3) == 0);
    CHECK(fp_get(root, "zz") == NULL && fp_get(c, "a") == NULL);
    fp_doc_free(doc);

    const char *full = "1bd42917668ede860ece3c12e32deff4d843cbb94e94f1e21a6e8e43a6821371";
    CHECK(fingerprint_matches("1bd42917668ede86", full));
    CHECK(fingerprint_matches("1BD42917668EDE860E", full));
    CHECK(fingerprint_matches(full, full));
    CHECK(!fingerprint_matches("1bd42917668ede8", full)); /* too short to mean anything */
    CHECK(!fingerprint_matches("1bd42917668ede87", full));
    CHECK(!fingerprint_matches("1bd42917668ede86 ", full));
}
