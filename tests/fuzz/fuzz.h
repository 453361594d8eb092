/* What every fuzz target shares: how a broken invariant is reported (the target's
 * name, what broke, where) before the abort that libFuzzer takes for a crash.
 * A target defines FUZZ_NAME, then includes this. */
#ifndef RUNTIME_FUZZ_H
#define RUNTIME_FUZZ_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef FUZZ_NAME
#error "define FUZZ_NAME, the target's name, before including fuzz.h"
#endif

static void __attribute__((noreturn, format(printf, 1, 2), unused)) fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, FUZZ_NAME ": invariant broken: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    abort();
}

#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) fail("%s:%d: %s", __FILE__, __LINE__, #cond);                                 \
    } while (0)

#endif
