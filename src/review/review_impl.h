/* Private to the review folder: what its files share. */
#ifndef RUNTIME_REVIEW_IMPL_H
#define RUNTIME_REVIEW_IMPL_H

#include "../fingerprint/fingerprint.h"
#include "review.h"

/* A growing string; after a failed allocation it stays failed (oom) and take gives NULL. */
struct sbuf {
    char *p;
    size_t len, cap;
    bool oom;
};
void sb_put(struct sbuf *b, const char *s, size_t n);
void sb_puts(struct sbuf *b, const char *s);
void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Cuts the text back to len bytes (a path after a child was visited). */
void sb_cut(struct sbuf *b, size_t len);
/* The text (malloc'd, the buffer is emptied), or NULL after an allocation failed. */
char *sb_take(struct sbuf *b);

/* Writes text for a terminal, as review.h promises; ascii_only escapes every non-ASCII
 * character too (names, where a Cyrillic 'е' must not pass for 'e'). */
void display_put(struct sbuf *b, const char *s, size_t n, bool ascii_only);
/* A path segment: "name" first, ".name" after, ["odd name"] when not [A-Za-z0-9_$-]+. */
void path_put(struct sbuf *b, const char *key, size_t n, bool first);
/* Appends a malloc'd copy of the text of b to l; -ENOMEM. */
int list_add(struct review_list *l, struct sbuf *b);

/* scan.c: the strings of the tools of NEW, each checked; OLD's (may be NULL) tell which
 * were there before. */
int review_scan(struct review *r, const struct fp_value *const *new_tools, size_t n_new,
                const struct fp_value *const *old_tools, size_t n_old);

#endif
