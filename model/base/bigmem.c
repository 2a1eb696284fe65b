#include "bigmem.h"

#include <glib.h>
#include <stdint.h>
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

void *rf_big_alloc(size_t bytes) {
  void *p = g_malloc(bytes);
  rf_big_advise(p, bytes);
  return p;
}

void *rf_big_alloc0(size_t bytes) {
  /* g_malloc0 would touch (or map zeroed) pages before the advice: advise, then clear */
  void *p = g_malloc(bytes);
  rf_big_advise(p, bytes);
  memset(p, 0, bytes);
  return p;
}

void *rf_big_realloc(void *p, size_t bytes) {
  p = g_realloc(p, bytes);
  rf_big_advise(p, bytes);
  return p;
}
