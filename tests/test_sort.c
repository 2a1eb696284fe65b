/* model/base/sort: rf_radix_sort gives the order of a stable comparison sort (GLib's merge sort,
 * ties by position), by value and by key, either way, on the insertion path (< 32 values) and the
 * radix path, with keys whose bytes all vary, some vary, or none. */
#include "sort.h"

#include <glib.h>

/* The reference order: positions i, j of the input val[] compared by the key of their value
 * (key[val[i]], or val[i] itself without a table), complemented when desc, then by position. */
typedef struct {
  const uint64_t *val, *key;
  gboolean desc;
} Ref;

static int cmp_ref(gconstpointer a, gconstpointer b, gpointer ud) {
  const Ref *r = ud;
  const uint64_t i = *(const uint64_t *)a, j = *(const uint64_t *)b;
  uint64_t x = r->key ? r->key[r->val[i]] : r->val[i], y = r->key ? r->key[r->val[j]] : r->val[j];
  if (r->desc) {
    x = ~x;
    y = ~y;
  }
  if (x != y) return x < y ? -1 : 1;
  return i < j ? -1 : (i > j); /* stable: the earlier position first */
}

/* Sorts v (n values) with rf_radix_sort and checks it against the reference order of positions. */
static void check(const uint64_t *v, uint64_t n, const uint64_t *key, gboolean desc) {
  g_autofree uint64_t *got = g_memdup2(v, sizeof(uint64_t) * (n ? n : 1));
  g_autofree uint64_t *tmp = g_new(uint64_t, n ? n : 1);
  g_autofree uint64_t *pos = g_new(uint64_t, n ? n : 1);
  for (uint64_t i = 0; i < n; i++)
    pos[i] = i;
  Ref r = {v, key, desc};
  g_qsort_with_data(pos, (gint)n, sizeof(uint64_t), cmp_ref, &r);
  rf_radix_sort(got, tmp, n, key, desc);
  for (uint64_t i = 0; i < n; i++)
    g_assert_cmpuint(got[i], ==, v[pos[i]]);
}

/* n values drawn from rng, masked (the bits of a key that may vary), by value and as ids into a
 * key table, ascending and descending. */
static void check_all(GRand *rng, uint64_t n, uint64_t mask) {
  g_autofree uint64_t *v = g_new(uint64_t, n ? n : 1);
  g_autofree uint64_t *key = g_new(uint64_t, n ? n : 1);
  g_autofree uint64_t *ids = g_new(uint64_t, n ? n : 1);
  for (uint64_t i = 0; i < n; i++) {
    v[i] = (((uint64_t)g_rand_int(rng) << 32) | g_rand_int(rng)) & mask;
    key[i] = (((uint64_t)g_rand_int(rng) << 32) | g_rand_int(rng)) & mask;
    ids[i] = n - 1 - i; /* ids in descending order: ties must keep it */
  }
  for (int desc = 0; desc < 2; desc++) {
    check(v, n, NULL, desc);
    check(ids, n, key, desc);
  }
}

static void test_orders(void) {
  g_autoptr(GRand) rng = g_rand_new_with_seed(26);
  const uint64_t sizes[] = {0, 1, 2, 31, 32, 33, 1000, 70000};
  const uint64_t masks[] = {~UINT64_C(0), UINT64_C(0x3), UINT64_C(0xff00ff0000000f00), 0,
                            UINT64_C(1) << 63};
  for (guint i = 0; i < G_N_ELEMENTS(sizes); i++)
    for (guint j = 0; j < G_N_ELEMENTS(masks); j++)
      check_all(rng, sizes[i], masks[j]);
}

/* The extremes of the key space sort to the ends (the complement of a descending sort). */
static void test_extremes(void) {
  uint64_t v[40], tmp[40];
  for (int i = 0; i < 40; i++)
    v[i] = i % 2 ? G_MAXUINT64 : (uint64_t)i;
  rf_radix_sort(v, tmp, 40, NULL, TRUE);
  for (int i = 0; i < 20; i++)
    g_assert_cmpuint(v[i], ==, G_MAXUINT64);
  g_assert_cmpuint(v[20], ==, 38);
  g_assert_cmpuint(v[39], ==, 0);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/sort/stable_orders", test_orders);
  g_test_add_func("/sort/extremes", test_extremes);
  return g_test_run();
}
