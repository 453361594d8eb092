/* libFuzzer target for sniff_peek: the bytes are whatever a sandbox sends
 * first. Besides memory safety (ASan and UBSan) it checks what the egress
 * relies on:
 *  - a name only with TLS or HTTP (never empty with HTTP), always terminated,
 *    lower-case host text without a trailing dot;
 *  - a verdict other than MORE on a prefix is final: the whole input gives
 *    the same verdict and name;
 *  - a caller's max only turns verdicts into BAD, never into something else,
 *    and MORE with len >= max is BAD.
 * Input: the first bytes of a connection, as is. Seeds in corpus/sniff are
 * real first flights captured on loopback (capture_sniff.js). Built by
 * `make fuzz`, or alone:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=gnu17 -D_GNU_SOURCE -Isrc \
 *       tests/fuzz/fuzz_sniff.c src/sniff/sniff.c src/dns/dns.c -o build/fuzz_sniff */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_NAME "fuzz_sniff"
#include "fuzz.h"
#include "sniff/sniff.h"

#define BIG_MAX (1u << 20)

static void check_name(enum sniff_result r, const char *name)
{
    size_t n = strnlen(name, SNIFF_NAME_MAX);
    if (n == SNIFF_NAME_MAX) fail("name not terminated");
    if (r != SNIFF_TLS && r != SNIFF_HTTP && n != 0) fail("name \"%s\" with verdict %d", name, r);
    if (r == SNIFF_HTTP && n == 0) fail("HTTP without a name");
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || strchr(".-_:", c)))
            fail("name \"%s\" has byte 0x%02x", name, (unsigned char)c);
    }
    if (n > 0 && name[n - 1] == '.') fail("name \"%s\" ends in a dot", name);
}

/* The verdict on the first k bytes must be MORE or the whole input's. */
static void check_prefix(const uint8_t *data, size_t k, enum sniff_result full,
                         const char *full_name)
{
    char name[SNIFF_NAME_MAX];
    enum sniff_result r = sniff_peek(data, k, BIG_MAX, name);
    check_name(r, name);
    if (r != SNIFF_MORE && (r != full || strcmp(name, full_name) != 0))
        fail("prefix %zu: %d \"%s\", whole input: %d \"%s\"", k, r, name, full, full_name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char full_name[SNIFF_NAME_MAX], name[SNIFF_NAME_MAX];
    enum sniff_result full = sniff_peek(data, size, BIG_MAX, full_name);
    if (full > SNIFF_BAD) fail("verdict %d", full);
    check_name(full, full_name);

    /* A handful of prefixes: every one would be quadratic. */
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < size; i++)
        h = (h ^ data[i]) * 16777619u;
    if (size > 0) {
        check_prefix(data, size - 1, full, full_name);
        check_prefix(data, size / 2, full, full_name);
        check_prefix(data, h % size, full, full_name);
        check_prefix(data, (h >> 16) % size, full, full_name);
    }

    /* A caller whose max is just this input, or a little more. */
    size_t maxes[] = {size, size + 1 + h % 64};
    for (size_t i = 0; i < sizeof maxes / sizeof maxes[0]; i++) {
        enum sniff_result r = sniff_peek(data, size, maxes[i], name);
        check_name(r, name);
        if (full == SNIFF_MORE && size >= maxes[i] && r != SNIFF_BAD)
            fail("MORE at max %zu gave %d", maxes[i], r);
        if (r != SNIFF_BAD && (r != full || strcmp(name, full_name) != 0))
            fail("max %zu: %d \"%s\", unbounded: %d \"%s\"", maxes[i], r, name, full, full_name);
    }
    /* A prefix seen under a max just above it. */
    if (size > 1) {
        size_t k = h % size;
        enum sniff_result r = sniff_peek(data, k, k + 1, name);
        check_name(r, name);
        if (r != SNIFF_MORE && r != SNIFF_BAD && (r != full || strcmp(name, full_name) != 0))
            fail("prefix %zu at max %zu: %d \"%s\", whole: %d \"%s\"", k, k + 1, r, name, full,
                 full_name);
    }
    return 0;
}
