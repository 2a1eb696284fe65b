#include "bigmem.h"

#include <glib.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void rf_big_advise(void *p, size_t bytes) {
#ifdef MADV_HUGEPAGE
  if (!p || bytes < RF_BIG_MIN_BYTES) return;
  const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  /* Whole pages around the block: a block this large is a mapping of its own whose first page
   * holds malloc's header, and advising only part of a mapping splits it in two, which makes
   * realloc's mremap fail (EFAULT) and fall back to a copy. */
  const uintptr_t lo = (uintptr_t)p / page * page;
  const uintptr_t hi = ((uintptr_t)p + bytes + page - 1) / page * page;
  (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE); /* advice: failure is fine */
#else
  (void)p;
  (void)bytes;
#endif
}

/* Huge pages back only whole, aligned 2 MiB stretches of a mapping: a fresh block starts on one. */
#define HUGE_ALIGN ((size_t)2 << 20)

void *rf_big_alloc(size_t bytes) {
  if (bytes < RF_BIG_MIN_BYTES) return g_malloc(bytes);
  void *p = NULL;
  if (posix_memalign(&p, HUGE_ALIGN, bytes) != 0) g_error("out of memory: %zu bytes", bytes);
  rf_big_advise(p, bytes);
  return p;
}

void *rf_big_alloc0(size_t bytes) {
  if (bytes < RF_BIG_MIN_BYTES) return g_malloc0(bytes);
  void *p = rf_big_alloc(bytes); /* advised before its pages are first touched */
  memset(p, 0, bytes);
  return p;
}

void *rf_big_realloc(void *p, size_t old_bytes, size_t bytes) {
  if (bytes < RF_BIG_MIN_BYTES) return g_realloc(p, bytes);
  /* a new aligned block (realloc's mremap would keep the old alignment): the copy is as much
   * again as the doubling array's final size, once */
  void *q = rf_big_alloc(bytes);
  if (p) memcpy(q, p, MIN(old_bytes, bytes));
  g_free(p);
  return q;
}
