/* Stable radix sorts of 64-bit values, for the large sorts of a schedule's build and its
 * simulation (tens of millions of segments' keys: glibc's qsort, a merge sort calling a
 * comparison per step, was a fifth of a schedule's build). */
#ifndef RF_SORT_H
#define RF_SORT_H

#include <glib.h>
#include <stdint.h>

/* v[0 .. n) sorted by key[v[i]] (key NULL: by the values themselves), ascending, or largest first
 * when desc; equal keys keep their order (stable). tmp: room for n values (its contents are
 * lost). A least-significant-digit radix sort, 8 bits a pass, passes whose digit is the same in
 * every key skipped; an insertion sort below 32 values. */
void rf_radix_sort(uint64_t *v, uint64_t *tmp, uint64_t n, const uint64_t *key, gboolean desc);

#endif
