/* Large arrays of plain data (a plan's transfers and messages, per-transfer counts), advised to
 * the kernel as candidates for huge pages where it supports them (Linux transparent huge pages in
 * "madvise" mode). A plan of tens of millions of transfers is written once and permuted by a
 * sort: with 4 KiB pages nearly every write of the permutation misses the TLB, and filling the
 * pages costs a fault each, a 2 MiB page one where 4 KiB pages take 512 (issue 26). The advice
 * changes no contents, addresses or results. rf_big_alloc and co. are GLib blocks (g_free);
 * RfBigVec arrays have their own free. */
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
/* n elements of size bytes (the product overflow-checked, as g_malloc_n), zeroed when zero,
 * advised: GLib's block (g_free), unaligned. A large zeroed block is calloc's fresh mapping, its
 * pages untouched until written (rf_big_alloc0 writes every one), for arrays written sparsely or
 * out of order (a schedule's dependency graph and segment arrays). */
void *rf_big_new_n(size_t n, size_t size, int zero);
#define RF_BIG_NEW(T, n) ((T *)rf_big_new_n((n), sizeof(T), 0))
#define RF_BIG_NEW0(T, n) ((T *)rf_big_new_n((n), sizeof(T), 1))
/* Advise the pages holding [p, p + bytes) (p from malloc); no-op below RF_BIG_MIN_BYTES. */
void rf_big_advise(void *p, size_t bytes);

/* An array that grows without ever moving once large: on the heap while it needs less than
 * RF_BIG_MIN_BYTES, then in one reservation of address space for the most it may ever need
 * (max bytes, advised), whose pages the kernel fills only as they are first written. Growing
 * copies nothing past the switch, and a large array is written on fresh pages once: no second
 * array to move it into, no old one to free. Where the address space cannot be reserved it stays
 * on the heap (doubling). Zero {0}-initialised with max set is an empty vector. */
typedef struct {
  char *p;     /* the elements; NULL until the first rf_bigvec_room */
  size_t room; /* bytes usable at p */
  size_t max;  /* the most bytes it will be asked for */
} RfBigVec;

/* Make room for need bytes (need <= v->max) at v->p, keeping its contents; returns v->p. */
void *rf_bigvec_room(RfBigVec *v, size_t need);
/* The array of v trimmed to its first used bytes (pages past them given back), NULL when v never
 * held any or used is 0 (what it held freed: no pointer one past a block's end, which valgrind
 * counts as a leak); v is left empty. Free it with rf_bigvec_free, never g_free. */
void *rf_bigvec_take(RfBigVec *v, size_t used);
/* Free an array of rf_bigvec_take (NULL is fine). */
void rf_bigvec_free(void *p);
/* Free what v holds and leave it empty (max kept). */
void rf_bigvec_clear(RfBigVec *v);

#endif
