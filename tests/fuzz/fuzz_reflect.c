/* libFuzzer target for src/secrets/reflect.c: the bytes are an answer an
 * intercepted upstream sends (after TLS), scanned for a value swapped into the
 * connection. The input is: one byte n (the value's length, 8..39), the value
 * (n bytes), one byte and a second (two cut points), then the answer. Besides
 * memory safety it checks what the proxy relies on:
 *  - the scan never changes the answer's length (framing holds);
 *  - the bytes it settles never change however the answer is cut: scanning it
 *    whole, or in three pieces with what each scan does not settle fed again
 *    in front of the next (as src/egress/redact.c does), gives the same bytes
 *    and the same number of matches;
 *  - what a final scan leaves does not hold the value written plainly, when
 *    the value shares no byte with the placeholder (so no overwrite can
 *    spell it).
 * Build: `make fuzz`, then build/fuzz/fuzz_reflect tests/fuzz/corpus/reflect. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_NAME "fuzz_reflect"
#include "fuzz.h"
#include "secrets/secrets.h"

static const char PH[] = "RUNTIME_PH_0123456789abcdef0123456789abcdef";

static void count(void *arg, const struct reflect_hit *h)
{
    (*(int *)arg)++;
    REQUIRE(h->value == 0 && strcmp(h->placeholder, PH) == 0);
}

/* The answer fed in pieces ending at cuts[0], cuts[1] and len. */
static unsigned char *in_pieces(const struct reflect *r, const uint8_t *text, size_t len,
                                const size_t cuts[2], int *hits)
{
    unsigned char *out = malloc(len + 1), *buf = malloc(len + 1);
    size_t held = 0, out_len = 0, from = 0;
    for (int i = 0; i < 3; i++) {
        size_t to = i < 2 ? cuts[i] : len;
        memcpy(buf + held, text + from, to - from);
        size_t have = held + to - from;
        size_t settled = reflect_scan(r, buf, have, i == 2, count, hits);
        REQUIRE(settled <= have && (i < 2 || settled == have));
        memcpy(out + out_len, buf, settled);
        out_len += settled;
        memmove(buf, buf + settled, have - settled);
        held = have - settled;
        from = to;
    }
    REQUIRE(out_len == len && held == 0);
    free(buf);
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4) return 0;
    size_t n = 8 + data[0] % 32;
    if (size < 3 + n) return 0;
    const char *value = (const char *)data + 1;
    const uint8_t *text = data + 3 + n;
    size_t len = size - 3 - n;
    size_t cuts[2] = {len ? data[1 + n] % (len + 1) : 0, len ? data[2 + n] % (len + 1) : 0};
    if (cuts[0] > cuts[1]) {
        size_t t = cuts[0];
        cuts[0] = cuts[1];
        cuts[1] = t;
    }
    struct reflect *r = reflect_new();
    REQUIRE(r && reflect_add(r, value, n, PH) == 1);
    int whole_hits = 0, piece_hits = 0;
    unsigned char *whole = malloc(len + 1);
    memcpy(whole, text, len);
    REQUIRE(reflect_scan(r, whole, len, true, count, &whole_hits) == len);
    unsigned char *pieces = in_pieces(r, text, len, cuts, &piece_hits);
    REQUIRE(memcmp(whole, pieces, len) == 0);
    REQUIRE(whole_hits == piece_hits);
    bool apart = true; /* no byte of the value is one the placeholder (or 'x') has */
    for (size_t i = 0; i < n && apart; i++)
        apart = !memchr(PH, value[i], sizeof PH - 1) && value[i] != 'x';
    if (apart) REQUIRE(!memmem(whole, len, value, n));
    free(whole);
    free(pieces);
    reflect_free(r);
    return 0;
}
