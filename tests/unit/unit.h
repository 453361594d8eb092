/* The unit test runner: each test is a function registered with TEST(); the
 * runner prints one line per failure and "N passed, N failed" at the end. */
#ifndef RUNTIME_UNIT_H
#define RUNTIME_UNIT_H

#include <stdio.h>
#include <string.h>

typedef void (*unit_fn)(int *failed);
void unit_register(const char *name, unit_fn fn);

#define TEST(name)                                                                                 \
    static void test_##name(int *failed_);                                                         \
    __attribute__((constructor)) static void register_##name(void)                                 \
    {                                                                                              \
        unit_register(#name, test_##name);                                                         \
    }                                                                                              \
    static void test_##name(int *failed_)

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);             \
            *failed_ = 1;                                                                          \
        }                                                                                          \
    } while (0)

#define CHECK_STR(a, b)                                                                            \
    do {                                                                                           \
        const char *a_ = (a), *b_ = (b);                                                           \
        if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                                   \
            fprintf(stderr, "  %s:%d: \"%s\" != \"%s\"\n", __FILE__, __LINE__, a_ ? a_ : "(null)", \
                    b_ ? b_ : "(null)");                                                           \
            *failed_ = 1;                                                                          \
        }                                                                                          \
    } while (0)

#endif
