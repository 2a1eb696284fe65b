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

void *rf_big_new_n(size_t n, size_t size, int zero) {
  void *p = zero ? g_malloc0_n(n, size) : g_malloc_n(n, size);
  rf_big_advise(p, n * size); /* the product checked above */
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

/* ---- RfBigVec ------------------------------------------------------------------------------ */

/* Every array of an RfBigVec starts HDR bytes into its block, after this header. */
#define HDR ((size_t)64)
#define MAGIC_HEAP UINT32_C(0x68656170) /* "heap" */
#define MAGIC_MAP UINT32_C(0x6d617070)  /* "mapp" */
typedef struct {
  size_t len; /* mapping: bytes mapped from the header on */
  uint32_t magic;
} Hdr;

static Hdr *hdr_of(void *p) {
  return (Hdr *)((char *)p - HDR);
}

static size_t round_up(size_t x, size_t to) {
  return (x + to - 1) / to * to;
}

/* A reservation of HDR + bytes on a 2 MiB boundary, advised; NULL if the address space cannot be
 * reserved. */
static char *map_reserve(size_t bytes) {
  const size_t len = round_up(HDR + bytes, HUGE_ALIGN), over = len + HUGE_ALIGN;
  char *m =
      mmap(NULL, over, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return NULL;
  char *base = (char *)round_up((uintptr_t)m, HUGE_ALIGN);
  if (base > m) munmap(m, (size_t)(base - m));
  if (m + over > base + len) munmap(base + len, (size_t)(m + over - (base + len)));
#ifdef MADV_HUGEPAGE
  (void)madvise(base, len, MADV_HUGEPAGE); /* advice: failure is fine */
#endif
  Hdr *h = (Hdr *)base;
  h->len = len;
  h->magic = MAGIC_MAP;
  return base + HDR;
}

void *rf_bigvec_room(RfBigVec *v, size_t need) {
  if (need <= v->room) return v->p;
  g_assert(need <= v->max);
  const gboolean mapped = v->p && hdr_of(v->p)->magic == MAGIC_MAP;
  g_assert(!mapped); /* a mapping has room for max */
  size_t room = MIN(MAX(need, MAX(2 * v->room, (size_t)4096)), v->max);
  if (room >= RF_BIG_MIN_BYTES) {
    char *q = map_reserve(v->max);
    if (q) {
      if (v->p) {
        memcpy(q, v->p, v->room);
        g_free(hdr_of(v->p));
      }
      v->p = q;
      v->room = hdr_of(q)->len - HDR;
      return v->p;
    }
  }
  Hdr *h = g_realloc(v->p ? hdr_of(v->p) : NULL, HDR + room); /* the heap: small, or no mapping */
  h->magic = MAGIC_HEAP;
  v->p = (char *)h + HDR;
  v->room = room;
  return v->p;
}

void *rf_bigvec_take(RfBigVec *v, size_t used) {
  if (used == 0) {
    rf_bigvec_clear(v);
    return NULL;
  }
  char *p = v->p;
  if (p) {
    Hdr *h = hdr_of(p);
    if (h->magic == MAGIC_MAP) {
      const long pg = sysconf(_SC_PAGESIZE);
      const size_t keep = round_up(HDR + used, pg > 0 ? (size_t)pg : 4096);
      if (keep < h->len) {
        munmap((char *)h + keep, h->len - keep);
        h->len = keep;
      }
    } else if (used < v->room) {
      p = (char *)g_realloc(h, HDR + used) + HDR;
    }
  }
  v->p = NULL;
  v->room = 0;
  return p;
}

void rf_bigvec_free(void *p) {
  if (!p) return;
  Hdr *h = hdr_of(p);
  if (h->magic == MAGIC_MAP)
    munmap(h, h->len);
  else
    g_free(h);
}

void rf_bigvec_clear(RfBigVec *v) {
  rf_bigvec_free(v->p);
  v->p = NULL;
  v->room = 0;
}
