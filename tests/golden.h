/* The golden cluster of tests/data/sim/ (10 GB/s NICs, 100 GB/s NVLink, round latencies) and its
 * calibration, shared by the tests that simulate on it: answers follow from arithmetic. */
#ifndef RF_TEST_GOLDEN_H
#define RF_TEST_GOLDEN_H

#include "datafile.h"
#include "sim.h"

#include <glib.h>

/* tests/data/sim/NAME under the data directory; caller frees. */
static inline char *data_path(const char *name) {
  return g_strdup_printf("%s/tests/data/sim/%s", rf_data_dir(), name);
}

/* A topology of tests/data/sim/ with domain GPUs per NVLink domain; asserts it loads. */
static inline RfTopology *load_topo(const char *file, int domain) {
  g_autofree char *p = data_path(file);
  GError *e = NULL;
  RfTopology *t = rf_topology_load(p, &e);
  g_assert_no_error(e);
  t->gpus_per_domain = domain;
  return t;
}

/* golden.cal over the neutral defaults; asserts it loads. */
static inline void golden_calib(RfCalibration *c) {
  g_autofree char *p = data_path("golden.cal");
  GError *e = NULL;
  rf_calibration_defaults(c);
  gboolean ok = rf_calibration_load(c, p, &e);
  g_assert_no_error(e);
  g_assert_true(ok);
}

/* One BF16 tensor of n elements from the ranks of src (a replicated mesh) to the ranks of dst
 * (each gets a full copy), on a topology of tests/data/sim/. */
static inline RfProblem *copy_problem_on(const char *topo, int64_t n, const char *src_ranks,
                                         int nsrc, const char *dst_ranks, int ndst, int domain) {
  g_autofree char *json = g_strdup_printf(
      "{\"tensors\":[{\"name\":\"w\",\"shape\":[%" G_GINT64_FORMAT "],\"dtype\":\"bf16\","
      "\"src\":{\"mesh\":[%d],\"ranks\":[%s],\"placements\":[\"R\"]},"
      "\"dst\":{\"mesh\":[%d],\"ranks\":[%s],\"placements\":[\"R\"]}}]}",
      n, nsrc, src_ranks, ndst, dst_ranks);
  GError *e = NULL;
  RfProblem *pb = rf_problem_new_spec(json, -1, load_topo(topo, domain), &e);
  g_assert_no_error(e);
  return pb;
}

#endif
