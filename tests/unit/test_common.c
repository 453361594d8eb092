/* common: the helpers that turn what a program printed into a message. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "unit.h"

TEST(text_escape_shows_control_bytes_and_cuts)
{
    char out[300];
    const char in[] = "Starting \"server\"\tv1\r\n\x01\xc3\xa9\\";
    text_escape(in, sizeof in - 1, 200, out, sizeof out);
    CHECK_STR(out, "Starting \\\"server\\\"\\tv1\\r\\n\\x01\\xc3\\xa9\\\\");
    /* Cut at max bytes of the input: "..." says there was more. */
    text_escape("abcdefgh", 8, 3, out, sizeof out);
    CHECK_STR(out, "abc...");
    /* Cut by the room in out: never a half escape, always terminated. */
    char small[8];
    text_escape("\x01\x02\x03", 3, 200, small, sizeof small);
    CHECK_STR(small, "\\x01...");
    text_escape("ab", 2, 200, small, sizeof small);
    CHECK_STR(small, "ab");
}

/* The shapes of tests/fixtures/error-lines.json (npm 9 and 11, pip, a traceback), which
 * the SDKs' tests read too: the same rule in the daemon and both SDKs. */
TEST(text_error_line_takes_the_error_not_the_notices)
{
    json_error_t jerr;
    json_t *cases = json_load_file("tests/fixtures/error-lines.json", 0, &jerr);
    CHECK(json_array_size(cases) >= 8);
    size_t i;
    json_t *c;
    json_array_foreach(cases, i, c)
    {
        char out[300];
        json_t *in = json_object_get(c, "stderr");
        text_error_line(json_string_value(in), json_string_length(in), out, sizeof out);
        if (strcmp(out, json_string_value(json_object_get(c, "line"))) != 0)
            fprintf(stderr, "  case: %s\n", json_string_value(json_object_get(c, "what")));
        CHECK_STR(out, json_string_value(json_object_get(c, "line")));
    }
    json_decref(cases);
    char small[6]; /* cut to fit */
    text_error_line("error: abcdef", 13, small, sizeof small);
    CHECK_STR(small, "error");
}

/* json_text writes what json_dumps(JSON_COMPACT) writes: every escape, nesting, key
 * order, integers at their limits, reals in jansson's own form, UTF-8 as it is. */
TEST(json_text_writes_what_jansson_writes)
{
    char every_byte[0x80];
    for (int c = 1; c < 0x80; c++)
        every_byte[c - 1] = (char)c;
    every_byte[0x7f] = '\0';
    json_t *values[] = {
        json_pack("{s:s,s:i,s:[b,b,n,f,f,f],s:{s:{}},s:[]}", "jsonrpc", "2.0", "id", -7, "a", 1, 0,
                  0.5, 1e300, -3.0, "nested", "deeper", "empty"),
        json_string(every_byte),
        json_string("caf\xc3\xa9 \xe2\x80\xa8 \xf0\x9f\x98\x80 \"quoted\" \\back/slash"),
        json_integer(INT64_MAX),
        json_integer(INT64_MIN),
        json_real(0.1),
        json_pack("{s:s%}", "with\nnewline", "nul\0inside", (size_t)10),
        json_pack("[{s:[{s:i}]}]", "k", "z", 1),
    };
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        CHECK(values[i] != NULL);
        char *want = json_dumps(values[i], JSON_COMPACT | JSON_ENCODE_ANY);
        size_t len = 0;
        char *got = json_text(values[i], &len);
        CHECK_STR(got, want);
        CHECK(len == strlen(want));
        free(got);
        free(want);
        json_decref(values[i]);
    }
    CHECK(json_text(NULL, NULL) == NULL);
}

/* meminfo_bytes: a whole name at a line's start, in bytes; the first line too. */
TEST(meminfo_bytes_reads_whole_names_in_bytes)
{
    char buf[8192];
    CHECK(read_file_small("/proc/meminfo", buf, sizeof buf) > 0);
    long long kib = 0;
    CHECK(sscanf(buf, "MemTotal: %lld kB", &kib) == 1);
    CHECK(meminfo_bytes("MemTotal") == kib * 1024);
    CHECK(meminfo_bytes("SwapTotal") >= 0);
    CHECK(meminfo_bytes("Total") == -1);     /* not "MemTotal"'s tail */
    CHECK(meminfo_bytes("MemTotal:") == -1); /* the name, not the line */
    CHECK(meminfo_bytes("NoSuchField") == -1);
}
