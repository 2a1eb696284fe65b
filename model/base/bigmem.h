/* Large arrays of plain data (a plan's transfers, their sort buffer, per-transfer counts):
 * allocated with GLib, freed with g_free, and advised to the kernel as candidates for huge pages
 * where it supports them (Linux transparent huge pages in "madvise" mode). A plan of tens of
 * millions of transfers is written once and scattered by a sort: with 4 KiB pages nearly every
 * write of the scatter misses the TLB, and filling the pages costs a fault each (issue 26).
 * Advice only: contents, addresses and results are the same without it. */
#ifndef RF_BIGMEM_H
#define RF_BIGMEM_H

#include <stddef.h>

/* Arrays below this many bytes are left as they are (the advice costs a system call). */
#define RF_BIG_MIN_BYTES ((size_t)4 << 20)

/* g_malloc(bytes), or from RF_BIG_MIN_BYTES on a block aligned to 2 MiB (free()'s, so g_free
 * frees it), advised; aborts on out-of-memory like g_malloc. */
void *rf_big_alloc(size_t bytes);
/* g_malloc0(bytes), advised before its pages are first touched. */
void *rf_big_alloc0(size_t bytes);
/* g_realloc(p, bytes) for a block of old_bytes (contents kept), from RF_BIG_MIN_BYTES on into a
 * new block of rf_big_alloc's; p must come from rf_big_alloc, rf_big_realloc or GLib. */
void *rf_big_realloc(void *p, size_t old_bytes, size_t bytes);
/* Advise the pages holding [p, p + bytes) (p from malloc); no-op below RF_BIG_MIN_BYTES. */
void rf_big_advise(void *p, size_t bytes);

#endif
