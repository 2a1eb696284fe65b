/* model/base/u64map: the map holds what was set, last value wins, growth keeps every entry, and
 * a reset (both ways of emptying) forgets every key and keeps working. */
#include "u64map.h"

#include <glib.h>

static uint64_t key_of(uint64_t i) { /* distinct, non-zero, clustered low bits */
  return (i << 20) + 7;
}

static void fill_and_check(gboolean track) {
  RfU64Map m;
  rf_u64map_init(&m, 1, track);
  const uint64_t n = 50000; /* many growths from 1,024 slots */
  for (uint64_t i = 0; i < n; i++)
    rf_u64map_set(&m, key_of(i), (int32_t)i);
  for (uint64_t i = 0; i < n; i += 2)
    rf_u64map_set(&m, key_of(i), -(int32_t)i - 1); /* overwrite: no new key */
  g_assert_cmpuint(m.n, ==, n);
  g_assert_cmpuint(m.mask + 1, >=, 2 * n);
  for (uint64_t i = 0; i < n; i++)
    g_assert_cmpint(rf_u64map_get(&m, key_of(i), 99), ==, i % 2 ? (int32_t)i : -(int32_t)i - 1);
  g_assert_cmpint(rf_u64map_get(&m, key_of(n), 99), ==, 99);
  const uint64_t cap = m.mask + 1;
  rf_u64map_reset(&m);
  g_assert_cmpuint(m.n, ==, 0);
  g_assert_cmpuint(m.mask + 1, ==, cap);
  for (uint64_t i = 0; i < n; i++)
    g_assert_cmpint(rf_u64map_get(&m, key_of(i), -5), ==, -5);
  rf_u64map_set(&m, key_of(3), 42);
  g_assert_cmpint(rf_u64map_get(&m, key_of(3), 0), ==, 42);
  g_assert_cmpuint(m.n, ==, 1);
  rf_u64map_free(&m);
}

static void test_tracked(void) {
  fill_and_check(TRUE);
}

static void test_untracked(void) {
  fill_and_check(FALSE);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/u64map/tracked", test_tracked);
  g_test_add_func("/u64map/untracked", test_untracked);
  return g_test_run();
}
