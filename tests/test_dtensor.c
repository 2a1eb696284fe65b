/* DTensor algebra: torch.chunk rule, nesting, shard <-> rank maps, exact tiling. */
#include <glib.h>
#include <string.h>

#include "dtensor.h"

static void test_chunk_uneven(void) {
  int64_t lo, hi;
  const int64_t want10[4][2] = {{0, 3}, {3, 6}, {6, 9}, {9, 10}};
  for (int i = 0; i < 4; i++) {
    rf_chunk(10, 4, i, &lo, &hi);
    g_assert_cmpint(lo, ==, want10[i][0]);
    g_assert_cmpint(hi, ==, want10[i][1]);
  }
  /* 5 over 4: 2,2,1,0 -- the last shard is empty */
  const int64_t want5[4] = {2, 2, 1, 0};
  for (int i = 0; i < 4; i++) {
    rf_chunk(5, 4, i, &lo, &hi);
    g_assert_cmpint(hi - lo, ==, want5[i]);
  }
  /* 2 over 4: 1,1,0,0 */
  rf_chunk(2, 4, 3, &lo, &hi);
  g_assert_cmpint(hi - lo, ==, 0);
}

static void test_box_ops(void) {
  RfBox a = {{0, 2}, {4, 6}}, b = {{3, 0}, {10, 3}}, c;
  g_assert_true(rf_box_intersect(&a, &b, 2, &c));
  g_assert_cmpint(c.lo[0], ==, 3);
  g_assert_cmpint(c.hi[0], ==, 4);
  g_assert_cmpint(c.lo[1], ==, 2);
  g_assert_cmpint(c.hi[1], ==, 3);
  g_assert_cmpint(rf_box_volume(&c, 2), ==, 1);
  RfBox d = {{4, 0}, {5, 9}};
  g_assert_false(rf_box_intersect(&a, &d, 2, &c));
  g_assert_true(rf_box_contains(&a, &a, 2));
  char buf[64];
  g_assert_cmpstr(rf_box_format(&a, 2, buf, sizeof buf), ==, "[0:4,2:6]");
}

/* Mesh [2,3], placements [S0, S0]: dim 0 split in 2, each half split in 3 (left to right). */
static void test_nested(void) {
  int ranks[6] = {10, 11, 12, 13, 14, 15};
  RfMesh *m = rf_mesh_new(2, (int[]){2, 3}, ranks, 6, NULL);
  RfPlacement p = {.mesh = m, .ndim = 1, .shape = {10}, .pad_shape = {10}, .place = {0, 0}};
  g_assert_true(rf_placement_check(&p, NULL));
  g_assert_cmpint(rf_placement_nshards(&p), ==, 6);
  g_assert_cmpint(rf_placement_nreplicas(&p), ==, 1);
  /* halves [0,5) [5,10); thirds of 5 = 2,2,1 */
  const int64_t want[6][2] = {{0, 2}, {2, 4}, {4, 5}, {5, 7}, {7, 9}, {9, 10}};
  for (int s = 0; s < 6; s++) {
    RfBox b;
    g_assert_true(rf_placement_shard_box(&p, s, &b, NULL));
    g_assert_cmpint(b.lo[0], ==, want[s][0]);
    g_assert_cmpint(b.hi[0], ==, want[s][1]);
    g_assert_cmpint(rf_placement_rank(&p, s, 0), ==, ranks[s]);
  }
  rf_mesh_free(m);
}

/* Mesh [2,2] with [R, S1]: shard index follows the sharding dim, replica the other. */
static void test_rank_maps(void) {
  int ranks[4] = {7, 3, 9, 1};
  RfMesh *m = rf_mesh_new(2, (int[]){2, 2}, ranks, 4, NULL);
  RfPlacement p = {
      .mesh = m, .ndim = 2, .shape = {4, 6}, .pad_shape = {4, 6}, .place = {RF_REPLICATE, 1}};
  g_assert_cmpint(rf_placement_rank(&p, 1, 0), ==, 3);
  g_assert_cmpint(rf_placement_rank(&p, 1, 1), ==, 1);
  g_assert_cmpint(rf_placement_rank(&p, 0, 1), ==, 9);
  for (int pos = 0; pos < 4; pos++) {
    int s, r;
    rf_placement_locate(&p, pos, &s, &r);
    g_assert_cmpint(rf_placement_rank(&p, s, r), ==, ranks[pos]);
    g_assert_cmpint(rf_mesh_position(m, ranks[pos]), ==, pos);
  }
  g_assert_cmpint(rf_mesh_position(m, 5), ==, -1);
  rf_mesh_free(m);
}

/* Padded extent: vocab 10 padded to 12 over 4 ranks -> 3,3,3,1 real rows, chunks of 3. */
static void test_padding(void) {
  int ranks[4] = {0, 1, 2, 3};
  RfMesh *m = rf_mesh_new(1, (int[]){4}, ranks, 4, NULL);
  RfPlacement p = {.mesh = m, .ndim = 2, .shape = {10, 2}, .pad_shape = {12, 2}, .place = {0}};
  RfBox b, c;
  g_assert_true(rf_placement_shard_box(&p, 3, &b, &c));
  g_assert_cmpint(b.lo[0], ==, 9);
  g_assert_cmpint(b.hi[0], ==, 10);
  g_assert_cmpint(c.hi[0] - c.lo[0], ==, 3);
  rf_mesh_free(m);
}

/* Random placements: the shard boxes tile the tensor exactly (each element in one shard). */
static void test_random_tiling(void) {
  GRand *rng = g_rand_new_with_seed(7);
  for (int it = 0; it < 2000; it++) {
    int nd = g_rand_int_range(rng, 1, 5), md = g_rand_int_range(rng, 1, 4);
    int dims[RF_MAX_DIMS], n = 1;
    for (int i = 0; i < md; i++)
      n *= dims[i] = g_rand_int_range(rng, 1, 5);
    int *ranks = g_new(int, n);
    for (int i = 0; i < n; i++)
      ranks[i] = i * 3 + 1;
    RfMesh *m = rf_mesh_new(md, dims, ranks, n, NULL);
    RfPlacement p = {.mesh = m, .ndim = nd};
    int64_t vol = 1;
    for (int d = 0; d < nd; d++) {
      p.shape[d] = p.pad_shape[d] = g_rand_int_range(rng, 1, 9);
      vol *= p.shape[d];
    }
    for (int i = 0; i < RF_MAX_DIMS; i++)
      p.place[i] = RF_REPLICATE;
    for (int i = 0; i < md; i++)
      p.place[i] = g_rand_boolean(rng) ? RF_REPLICATE : (int8_t)g_rand_int_range(rng, 0, nd);
    g_assert_true(rf_placement_check(&p, NULL));
    int ns = rf_placement_nshards(&p);
    g_assert_cmpint(ns * rf_placement_nreplicas(&p), ==, n);
    int64_t sum = 0;
    RfBox *boxes = g_new(RfBox, ns);
    int nb = 0;
    for (int s = 0; s < ns; s++) {
      if (!rf_placement_shard_box(&p, s, &boxes[nb], NULL)) continue;
      sum += rf_box_volume(&boxes[nb], nd);
      for (int j = 0; j < nb; j++) {
        RfBox x;
        g_assert_false(rf_box_intersect(&boxes[j], &boxes[nb], nd, &x));
      }
      nb++;
    }
    g_assert_cmpint(sum, ==, vol);
    g_free(boxes);
    g_free(ranks);
    rf_mesh_free(m);
  }
  g_rand_free(rng);
}

static void test_bad(void) {
  GError *e = NULL;
  g_assert_null(rf_mesh_new(1, (int[]){3}, (int[]){0, 1}, 2, &e));
  g_assert_nonnull(e);
  g_clear_error(&e);
  g_assert_null(rf_mesh_new(1, (int[]){2}, (int[]){4, 4}, 2, &e));
  g_assert_nonnull(strstr(e->message, "twice"));
  g_clear_error(&e);
  int8_t pl;
  g_assert_true(rf_placement_parse("Shard(2)", &pl, NULL));
  g_assert_cmpint(pl, ==, 2);
  g_assert_true(rf_placement_parse("Replicate()", &pl, NULL));
  g_assert_cmpint(pl, ==, RF_REPLICATE);
  g_assert_false(rf_placement_parse("S", &pl, &e));
  g_clear_error(&e);
  g_assert_false(rf_placement_parse("Shard(x)", &pl, &e));
  g_clear_error(&e);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/dtensor/chunk/uneven", test_chunk_uneven);
  g_test_add_func("/dtensor/box/ops", test_box_ops);
  g_test_add_func("/dtensor/placement/nested", test_nested);
  g_test_add_func("/dtensor/placement/rank_maps", test_rank_maps);
  g_test_add_func("/dtensor/placement/padding", test_padding);
  g_test_add_func("/dtensor/placement/random_tiling", test_random_tiling);
  g_test_add_func("/dtensor/bad_input", test_bad);
  return g_test_run();
}
