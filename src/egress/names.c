/* The stub resolver's memory: which synthetic address stands for which name.
 * Stable for a name while the sandbox lives (a lookup returns the address it
 * was given before), wrapping around and reusing the oldest slot when full. */
#include <stdlib.h>
#include <string.h>

#include "egress_impl.h"

static bool names_alloc(struct names *n)
{
    if (!n->by_index) n->by_index = calloc(SYNTH_COUNT, sizeof *n->by_index);
    return n->by_index != NULL;
}

void names_restore(struct names *n, uint32_t slot, uint64_t seq, const char *name)
{
    if (slot == 0 || slot >= SYNTH_COUNT || !names_alloc(n)) return;
    free(n->by_index[slot]);
    n->by_index[slot] = strdup(name);
    if (seq + 1 > n->next) n->next = seq + 1;
}

/* The slot of name, or 0. A sandbox uses tens to hundreds of names (and gets new
 * ones at a bounded rate): a linear scan of the used part is cheaper than keeping a
 * second index in step. Slot 0 (the network address) is never handed out. */
static uint32_t names_find(const struct names *n, const char *name)
{
    const uint32_t cap = SYNTH_COUNT - 1;
    uint32_t used = n->next < cap ? (uint32_t)n->next : cap;
    for (uint32_t i = 1; n->by_index && i <= used; i++)
        if (n->by_index[i] && strcmp(n->by_index[i], name) == 0) return i;
    return 0;
}

bool names_has(const struct names *n, const char *name)
{
    return names_find(n, name) != 0;
}

uint32_t names_lookup_or_add(struct names *n, const char *name, bool *added)
{
    *added = false;
    if (!names_alloc(n)) return 0;
    const uint32_t cap = SYNTH_COUNT - 1;
    uint32_t found = names_find(n, name);
    if (found) return SYNTH_BASE + found;
    uint32_t slot = 1 + (uint32_t)(n->next % cap);
    free(n->by_index[slot]);
    n->by_index[slot] = strdup(name);
    n->next++;
    *added = n->by_index[slot] != NULL;
    return *added ? SYNTH_BASE + slot : 0;
}

const char *names_by_addr(const struct names *n, uint32_t addr)
{
    if (!n->by_index || addr < SYNTH_BASE || addr >= SYNTH_BASE + SYNTH_COUNT) return NULL;
    return n->by_index[addr - SYNTH_BASE];
}

void names_clear(struct names *n)
{
    if (!n->by_index) return;
    for (uint32_t i = 0; i < SYNTH_COUNT; i++)
        free(n->by_index[i]);
    free(n->by_index);
    n->by_index = NULL;
}
