/* model/base/bigmem: large arrays keep their contents through every growth, an RfBigVec never
 * moves once it is past the heap, trims and frees by its own header, and falls back to the heap
 * (still correct) where address space cannot be reserved. */
#include "bigmem.h"

#include <glib.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

static uint8_t pat(size_t i) {
  return (uint8_t)(i * 2654435761u >> 13);
}

/* Grow v step by step to max, writing each new byte, checking every old byte survives. Returns
 * where the array sat once it first passed RF_BIG_MIN_BYTES (NULL if it never did). */
static char *grow_checked(RfBigVec *v, size_t step) {
  size_t have = 0;
  char *big = NULL;
  while (have < v->max) {
    const size_t need = MIN(have + step, v->max);
    char *p = rf_bigvec_room(v, need);
    g_assert_true(p == v->p);
    g_assert_cmpuint(v->room, >=, need);
    for (size_t i = 0; i < have; i += 4093) /* a sample of the old bytes, every page */
      g_assert_cmpuint((uint8_t)p[i], ==, pat(i));
    for (size_t i = have; i < need; i++)
      p[i] = (char)pat(i);
    if (need > RF_BIG_MIN_BYTES && !big) big = p;
    have = need;
  }
  for (size_t i = 0; i < have; i++)
    if ((uint8_t)v->p[i] != pat(i)) g_error("byte %zu lost", i);
  return big;
}

static void test_vec_small(void) {
  RfBigVec v = {0};
  v.max = 100000;
  g_assert_null(rf_bigvec_take(&v, 0)); /* never held any */
  grow_checked(&v, 777);
  g_assert_null(rf_bigvec_take(&v, 0)); /* held some, keeps none: freed */
  g_assert_null(v.p);
  g_assert_cmpuint(v.room, ==, 0);
  grow_checked(&v, 777);
  char *p = rf_bigvec_take(&v, 5000);
  g_assert_null(v.p);
  g_assert_cmpuint(v.room, ==, 0);
  for (size_t i = 0; i < 5000; i++)
    g_assert_cmpuint((uint8_t)p[i], ==, pat(i));
  rf_bigvec_free(p);
  rf_bigvec_free(NULL);
  v.max = 10;
  rf_bigvec_room(&v, 10);
  rf_bigvec_clear(&v);
  g_assert_null(v.p);
  g_assert_cmpuint(v.max, ==, 10);
}

static void test_vec_large(void) {
  RfBigVec v = {0};
  v.max = 6 * RF_BIG_MIN_BYTES;
  char *big = grow_checked(&v, 1u << 20);
  g_assert_nonnull(big);
  g_assert_true(v.p == big); /* past the heap it never moved */
  g_assert_cmpuint(v.room, >=, v.max);
  /* trimmed: the same array, its bytes kept */
  const size_t used = 3 * RF_BIG_MIN_BYTES + 5;
  char *p = rf_bigvec_take(&v, used);
  g_assert_true(p == big);
  for (size_t i = 0; i < used; i++)
    if ((uint8_t)p[i] != pat(i)) g_error("byte %zu lost in the trim", i);
  rf_bigvec_free(p);
  /* emptied and grown again: works from the start */
  v.max = 2 * RF_BIG_MIN_BYTES;
  grow_checked(&v, 3u << 20);
  rf_bigvec_clear(&v);
}

/* No address space to reserve: the vector stays on the heap and still holds everything. */
static void test_vec_no_reservation(void) {
#if defined(__SANITIZE_ADDRESS__)
  g_test_skip("ASan needs its own address-space reservations");
  return;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  g_test_skip("ASan needs its own address-space reservations");
  return;
#endif
#endif
  if (g_test_subprocess()) {
    unsigned long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%lu", &pages) != 1) g_error("no /proc/self/statm");
    fclose(f);
    /* room for the heap growth below, not for a 1 GiB reservation */
    struct rlimit rl;
    rl.rlim_cur = rl.rlim_max = (rlim_t)pages * 4096 + (rlim_t)(256u << 20);
    if (setrlimit(RLIMIT_AS, &rl) != 0) g_error("setrlimit");
    RfBigVec w = {0};
    w.max = (size_t)1 << 30; /* what a reservation would take: over the limit */
    char *p = NULL;
    size_t have = 0;
    while (have < 3 * RF_BIG_MIN_BYTES) { /* well past the switch to a reservation */
      const size_t need = have + (1u << 20);
      p = rf_bigvec_room(&w, need);
      for (size_t i = have; i < need; i++)
        p[i] = (char)pat(i);
      have = need;
    }
    for (size_t i = 0; i < have; i++)
      if ((uint8_t)p[i] != pat(i)) g_error("byte %zu lost on the heap", i);
    p = rf_bigvec_take(&w, have);
    rf_bigvec_free(p);
    printf("heap fallback ok\n");
    return;
  }
  g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed();
  g_test_trap_assert_stdout("*heap fallback ok*");
}

static void test_alloc(void) {
  const size_t n = RF_BIG_MIN_BYTES + 12345;
  uint8_t *z = rf_big_alloc0(n);
  g_assert_cmpuint((uintptr_t)z % ((uintptr_t)2 << 20), ==, 0); /* on a huge-page boundary */
  for (size_t i = 0; i < n; i++)
    if (z[i]) g_error("rf_big_alloc0: byte %zu not zero", i);
  for (size_t i = 0; i < n; i++)
    z[i] = pat(i);
  z = rf_big_realloc(z, n, 2 * n); /* grows: contents kept */
  for (size_t i = 0; i < n; i++)
    if (z[i] != pat(i)) g_error("rf_big_realloc: byte %zu lost", i);
  z = rf_big_realloc(z, 2 * n, 100); /* shrinks below the threshold: onto the heap */
  for (size_t i = 0; i < 100; i++)
    g_assert_cmpuint(z[i], ==, pat(i));
  g_free(z);
  uint8_t *s = rf_big_alloc0(64); /* small: plain GLib */
  for (int i = 0; i < 64; i++)
    g_assert_cmpuint(s[i], ==, 0);
  g_free(s);
  rf_big_advise(NULL, n); /* no-ops */
  size_t small = n;
  rf_big_advise(&small, sizeof small);
}

/* rf_big_new_n: large and small, zeroed or not, a GLib block; the zeroed one reads zero. */
static void test_new_n(void) {
  const size_t n = RF_BIG_MIN_BYTES / sizeof(uint64_t) + 777;
  uint64_t *z = RF_BIG_NEW0(uint64_t, n);
  for (size_t i = 0; i < n; i++)
    if (z[i]) g_error("RF_BIG_NEW0: element %zu not zero", i);
  uint64_t *w = RF_BIG_NEW(uint64_t, n);
  for (size_t i = 0; i < n; i++)
    w[i] = z[i] + i;
  for (size_t i = 0; i < n; i++)
    g_assert_cmpuint(w[i], ==, i);
  g_free(w);
  g_free(z);
  uint32_t *s = RF_BIG_NEW0(uint32_t, 3); /* small: plain GLib */
  g_assert_cmpuint(s[0] | s[1] | s[2], ==, 0);
  g_free(s);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/bigmem/vec/small", test_vec_small);
  g_test_add_func("/bigmem/vec/large", test_vec_large);
  g_test_add_func("/bigmem/vec/no-reservation", test_vec_no_reservation);
  g_test_add_func("/bigmem/alloc", test_alloc);
  g_test_add_func("/bigmem/new-n", test_new_n);
  return g_test_run();
}
