/* Private to the fingerprint folder: what its files share. */
#ifndef RUNTIME_FINGERPRINT_IMPL_H
#define RUNTIME_FINGERPRINT_IMPL_H

#include "fingerprint.h"

/* A stable sort (merge sort): equal elements keep their order, as Python's sorted() does.
 * -ENOMEM when the scratch buffer cannot be had. */
int fp_stable_sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *));

#endif
