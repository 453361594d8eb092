#include <stdlib.h>

#include "common.h"

struct budget *budget_new(uint64_t limit, struct budget *parent)
{
    struct budget *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->limit = limit;
    b->refs = 1;
    b->parent = parent ? budget_ref(parent) : NULL;
    return b;
}

struct budget *budget_ref(struct budget *b)
{
    if (b) b->refs++;
    return b;
}

void budget_unref(struct budget *b)
{
    if (!b || --b->refs > 0) return;
    budget_unref(b->parent);
    free(b);
}

static bool fits(const struct budget *b, size_t n)
{
    for (; b; b = b->parent)
        if (b->limit && b->used + n > b->limit) return false;
    return true;
}

bool budget_over(const struct budget *b)
{
    return !fits(b, 0);
}

bool budget_force(struct budget *b, size_t n)
{
    bool ok = fits(b, n);
    for (struct budget *p = b; p; p = p->parent) {
        p->used += n;
        if (p->used > p->peak) p->peak = p->used;
        if (!ok) p->refused++;
    }
    return ok;
}

bool budget_take(struct budget *b, size_t n)
{
    if (fits(b, n)) return budget_force(b, n);
    for (struct budget *p = b; p; p = p->parent)
        p->refused++;
    return false;
}

void budget_give(struct budget *b, size_t n)
{
    for (; b; b = b->parent)
        b->used = b->used > n ? b->used - n : 0;
}
