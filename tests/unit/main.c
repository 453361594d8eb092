#include <stdlib.h>

#include "unit.h"

struct unit_case {
    const char *name;
    unit_fn fn;
};
static struct unit_case cases[512];
static int ncases;

void unit_register(const char *name, unit_fn fn)
{
    if (ncases < (int)(sizeof cases / sizeof cases[0]))
        cases[ncases++] = (struct unit_case){name, fn};
}

int main(int argc, char **argv)
{
    int passed = 0, failed = 0;
    for (int i = 0; i < ncases; i++) {
        if (argc > 1 && !strstr(cases[i].name, argv[1])) continue;
        int f = 0;
        cases[i].fn(&f);
        if (f) {
            fprintf(stderr, "FAIL %s\n", cases[i].name);
            failed++;
        } else {
            passed++;
        }
    }
    printf("unit: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
