/* Fitting calibration keys to measured times (sim/fit.c), on synthetic measurements: the golden
 * cluster's times from arithmetic (what /sim/golden/ checks the simulator gives) under a known
 * value of a key. The golden-section coordinate descent recovers that value within its bracket,
 * stays inside the key's fit range when the measurements ask for more, ignores the rows left out,
 * re-simulates only for keys that are not additive, and refuses keys it cannot fit. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "error.h"
#include "golden.h"

/* The golden cluster's answer for 2n bytes from GPU 0 to GPU 1 over their 10 GB/s NICs: the
 * bytes at line rate over the NIC efficiency, 6 us of NIC and switch latency, 2 us of software
 * latency (test_sim's /sim/golden/one_message). */
static double golden_s(int64_t n, double nic_efficiency) {
  return 2.0 * (double)n / (10e9 * nic_efficiency) + 8e-6;
}

/* k bf16 tensors of n elements each from rank 0 to rank 1 on the golden cluster, planned p2p. */
static RfPlan *copy_plan(int k, int64_t n) {
  GString *s = g_string_new("{\"tensors\":[");
  for (int t = 0; t < k; t++)
    g_string_append_printf(s,
                           "%s{\"name\":\"w%d\",\"shape\":[%" G_GINT64_FORMAT
                           "],\"dtype\":\"bf16\","
                           "\"src\":{\"mesh\":[1],\"ranks\":[0],\"placements\":[\"R\"]},"
                           "\"dst\":{\"mesh\":[1],\"ranks\":[1],\"placements\":[\"R\"]}}",
                           t ? "," : "", t, n);
  g_string_append(s, "]}");
  GError *e = NULL;
  RfProblem *pb = rf_problem_new_spec(s->str, -1, load_topo("golden.topo", 1), &e);
  g_assert_no_error(e);
  g_string_free(s, TRUE);
  RfPlan *plan = rf_plan_build(pb, RF_STRATEGY_P2P, NULL, &e);
  g_assert_no_error(e);
  return plan;
}

static void free_plan(RfPlan *plan) {
  RfProblem *pb = (RfProblem *)plan->problem;
  rf_plan_free(plan);
  rf_problem_free(pb);
}

static const RfCalibrationKey *key(const char *name) {
  const RfCalibrationKey *k = rf_calibration_key(name);
  g_assert_nonnull(k);
  return k;
}

/* The bracket golden-section search leaves around the best point after iters steps on a key. */
static double bracket(const RfCalibrationKey *k, int iters) {
  return (k->fit_hi - k->fit_lo) * pow((sqrt(5.0) - 1) / 2, iters);
}

/* refit.fixed_s (additive, fit range 0..20 s): 3.25 s on top of the golden times of 100 MB and
 * 1 MB, recovered to within the bracket of 40 steps from the one simulation per row the fit
 * starts with (the defaults: the golden times). */
static void test_additive_recovers(void) {
  RfCalibration cal;
  golden_calib(&cal);
  const int64_t n[2] = {50000000, 500000};
  RfPlan *plan[2] = {copy_plan(1, n[0]), copy_plan(1, n[1])};
  RfFitRow rows[2];
  for (int i = 0; i < 2; i++)
    rows[i] = (RfFitRow){plan[i]->problem, plan[i], &cal, golden_s(n[i], 1) + 3.25, FALSE};
  const RfCalibrationKey *keys[] = {key("refit.fixed_s")};
  g_assert_true(keys[0]->additive);
  GError *e = NULL;
  RfFit *f = rf_fit_new(rows, 2, keys, 1, &e);
  g_assert_no_error(e);
  for (int i = 0; i < 2; i++)
    g_assert_cmpfloat_with_epsilon(rf_fit_default(f, i), golden_s(n[i], 1),
                                   1e-6 * golden_s(n[i], 1));
  g_assert_cmpint(rf_fit_simulations(f), ==, 2);
  double x;
  rf_fit_run(f, NULL, 40, &x);
  g_assert_cmpfloat_with_epsilon(x, 3.25, bracket(keys[0], 40));
  g_assert_cmpint(rf_fit_simulations(f), ==, 2); /* additive: no re-simulation */
  for (int i = 0; i < 2; i++)
    g_assert_cmpfloat_with_epsilon(rf_fit_predict(f, i, &x), rows[i].measured_s, 1e-6);
  g_assert_null(rf_fit_error(f));
  rf_fit_free(f);
  for (int i = 0; i < 2; i++)
    free_plan(plan[i]);
  rf_calibration_clear(&cal);
}

/* efficiency.nic (re-simulated, fit range 0.3..1): 100 MB measured at 60% of the NIC rate gives
 * 0.6 back within the bracket of 5 steps; each step one simulation (two to start the search). */
static void test_simulated_recovers(void) {
  RfCalibration cal;
  golden_calib(&cal);
  RfPlan *plan = copy_plan(1, 50000000);
  RfFitRow row = {plan->problem, plan, &cal, golden_s(50000000, 0.6), FALSE};
  const RfCalibrationKey *keys[] = {key("efficiency.nic")};
  g_assert_false(keys[0]->additive);
  GError *e = NULL;
  RfFit *f = rf_fit_new(&row, 1, keys, 1, &e);
  g_assert_no_error(e);
  double x;
  rf_fit_run(f, NULL, 5, &x);
  g_assert_cmpfloat_with_epsilon(x, 0.6, bracket(keys[0], 5));
  g_assert_cmpint(rf_fit_simulations(f), ==, 1 + 2 + 5);
  g_assert_null(rf_fit_error(f));
  rf_fit_free(f);
  free_plan(plan);
  rf_calibration_clear(&cal);
}

/* Measurements beyond a key's fit range leave it at the nearer end, never outside: 100 s of
 * fixed time (range 0..20) and a refit twice as fast as the golden time (below 0 s). */
static void test_bounds(void) {
  RfCalibration cal;
  golden_calib(&cal);
  RfPlan *plan = copy_plan(1, 50000000);
  const RfCalibrationKey *keys[] = {key("refit.fixed_s")};
  const double t = golden_s(50000000, 1);
  const double measured[2] = {t / 2, t + 100}, want[2] = {keys[0]->fit_lo, keys[0]->fit_hi};
  for (int side = 0; side < 2; side++) {
    RfFitRow row = {plan->problem, plan, &cal, measured[side], FALSE};
    GError *e = NULL;
    RfFit *f = rf_fit_new(&row, 1, keys, 1, &e);
    g_assert_no_error(e);
    double x;
    rf_fit_run(f, NULL, 40, &x);
    g_assert_cmpfloat(x, >=, keys[0]->fit_lo);
    g_assert_cmpfloat(x, <=, keys[0]->fit_hi);
    g_assert_cmpfloat_with_epsilon(x, want[side], bracket(keys[0], 40));
    rf_fit_free(f);
  }
  free_plan(plan);
  rf_calibration_clear(&cal);
}

/* Mean squared log error of the fit's predictions at x over rows[0 .. n). */
static double msle(RfFit *f, const RfFitRow *rows, int n, const double *x) {
  double s = 0;
  for (int i = 0; i < n; i++) {
    const double d = log(rf_fit_predict(f, i, x) / rows[i].measured_s);
    s += d * d;
  }
  return s / n;
}

/* Two additive keys, each searched in turn, twice: 1 ms of fixed time and 0.1 ms per tensor
 * (m2n.tensor_overhead_s) on one tensor of 100 MB and on forty of 2 KB (one 80 KB message). The
 * fit ends inside both ranges with a smaller error than where it starts (both at 0); a row
 * left out (use FALSE) does not move it, however wrong its measurement. */
static void test_two_keys_and_use(void) {
  RfCalibration cal;
  golden_calib(&cal);
  RfPlan *plan[2] = {copy_plan(1, 50000000), copy_plan(40, 1000)};
  const RfCalibrationKey *keys[] = {key("refit.fixed_s"), key("m2n.tensor_overhead_s")};
  RfFitRow rows[3] = {
      {plan[0]->problem, plan[0], &cal, golden_s(50000000, 1) + 1e-3 + 1e-4, FALSE},
      {plan[1]->problem, plan[1], &cal, golden_s(40000, 1) + 1e-3 + 40 * 1e-4, FALSE},
      {plan[0]->problem, plan[0], &cal, 1000.0, FALSE}};
  GError *e = NULL;
  RfFit *f = rf_fit_new(rows, 3, keys, 2, &e);
  g_assert_no_error(e);
  RfFit *two = rf_fit_new(rows, 2, keys, 2, &e);
  g_assert_no_error(e);
  const gboolean use[3] = {TRUE, TRUE, FALSE};
  double x[2], y[2];
  rf_fit_run(f, use, 30, x);
  rf_fit_run(two, NULL, 30, y);
  g_assert_cmpmem(x, sizeof x, y, sizeof y);
  for (int k = 0; k < 2; k++) {
    g_assert_cmpfloat(x[k], >=, keys[k]->fit_lo);
    g_assert_cmpfloat(x[k], <=, keys[k]->fit_hi);
  }
  const double lo[2] = {keys[0]->fit_lo, keys[1]->fit_lo};
  g_assert_cmpfloat(msle(f, rows, 2, x), <, msle(f, rows, 2, lo));
  g_assert_cmpint(rf_fit_simulations(f), ==, 3);
  rf_fit_free(f);
  rf_fit_free(two);
  for (int i = 0; i < 2; i++)
    free_plan(plan[i]);
  rf_calibration_clear(&cal);
}

/* A whole-number key and a key without a fit range: NULL and a line naming the key. */
static void test_refuses(void) {
  RfCalibration cal;
  golden_calib(&cal);
  RfPlan *plan = copy_plan(1, 1000);
  RfFitRow row = {plan->problem, plan, &cal, 1.0, FALSE};
  const char *names[] = {"nemo.streams", "efficiency.nvlink"};
  for (guint i = 0; i < G_N_ELEMENTS(names); i++) {
    const RfCalibrationKey *keys[] = {key(names[i])};
    GError *e = NULL;
    g_assert_null(rf_fit_new(&row, 1, keys, 1, &e));
    g_assert_error(e, RF_ERROR, RF_ERROR_INPUT);
    g_autofree char *want = g_strdup_printf("%s cannot be fitted", names[i]);
    g_assert_cmpstr(e->message, ==, want);
    g_clear_error(&e);
  }
  free_plan(plan);
  rf_calibration_clear(&cal);
}

/* A row predicted by refit's executor whose schedule has more groups than one simulation holds
 * (100 MB in 64-byte groups: 1.56 M, above SIM_MAX_STEPS): with exec_fallback (no variant named)
 * the fit runs on the flow model's figure and says why; without it the fit is refused with the
 * limit. */
static void test_executor_fallback(void) {
  RfCalibration cal;
  golden_calib(&cal);
  cal.software = RF_SOFTWARE_REFIT;
  cal.variant = RF_VARIANT_EXECUTOR;
  cal.exec_staging_bytes = 64;
  RfPlan *plan = copy_plan(1, 50000000);
  const RfCalibrationKey *keys[] = {key("refit.fixed_s")};
  RfFitRow row = {plan->problem, plan, &cal, 1.0, TRUE};
  GError *e = NULL;
  RfFit *f = rf_fit_new(&row, 1, keys, 1, &e);
  g_assert_no_error(e);
  g_assert_nonnull(strstr(rf_fit_fallback(f, 0), "groups, more than the"));
  g_assert_cmpfloat(fabs(rf_fit_default(f, 0) - golden_s(50000000, 1)), <, 1e-4);
  rf_fit_free(f);
  row.exec_fallback = FALSE;
  g_assert_null(rf_fit_new(&row, 1, keys, 1, &e));
  g_assert_error(e, RF_ERROR, RF_ERROR_LIMIT);
  g_clear_error(&e);
  free_plan(plan);
  rf_calibration_clear(&cal);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/fit/additive/recovers", test_additive_recovers);
  g_test_add_func("/fit/simulated/recovers", test_simulated_recovers);
  g_test_add_func("/fit/bounds", test_bounds);
  g_test_add_func("/fit/two-keys/use", test_two_keys_and_use);
  g_test_add_func("/fit/refuses", test_refuses);
  g_test_add_func("/fit/executor-fallback", test_executor_fallback);
  return g_test_run();
}
