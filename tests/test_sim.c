/* SimGrid executor: golden scenarios whose answers follow from arithmetic, end-to-end runs under
 * the plan's invariants, the coarsening used at scale, and rejection of bad input files. */
#include <glib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "internal.h"
#include "sim.h"

static char *data_path(const char *name) {
  return g_strdup_printf("%s/tests/data/sim/%s", rf_data_dir(), name);
}

static RfTopology *golden_topo(int domain) {
  char *p = data_path("golden.topo");
  GError *e = NULL;
  RfTopology *t = rf_topology_load(p, &e);
  g_assert_no_error(e);
  t->gpus_per_domain = domain;
  g_free(p);
  return t;
}

static void golden_calib(RfCalibration *c) {
  char *p = data_path("golden.cal");
  GError *e = NULL;
  rf_calibration_defaults(c);
  g_assert_true(rf_calibration_load(c, p, &e));
  g_assert_no_error(e);
  g_free(p);
}

/* One BF16 tensor of n elements from rank 0 to the ranks of dst (each gets a full copy). */
static RfProblem *copy_problem(int64_t n, const char *dst_ranks, int ndst, int domain) {
  char *json = g_strdup_printf("{\"tensors\":[{\"name\":\"w\",\"shape\":[%" G_GINT64_FORMAT
                               "],\"dtype\":\"bf16\","
                               "\"src\":{\"mesh\":[1],\"ranks\":[0],\"placements\":[\"R\"]},"
                               "\"dst\":{\"mesh\":[%d],\"ranks\":[%s],\"placements\":[\"R\"]}}]}",
                               n, ndst, dst_ranks);
  GError *e = NULL;
  RfProblem *pb = rf_problem_new_spec(json, -1, golden_topo(domain), &e);
  g_assert_no_error(e);
  g_free(json);
  return pb;
}

static double simulate(const RfPlan *plan, const RfCalibration *cal, int group, RfResult *res) {
  RfSimOptions o = {0};
  o.calib = *cal;
  o.group = group;
  RfExecutor *ex = rf_sim_executor_new(&o);
  GError *e = NULL;
  g_assert_true(ex->prepare(ex, plan->problem, &e));
  g_assert_true(ex->run(ex, plan, res, &e));
  g_assert_no_error(e);
  ex->destroy(ex);
  return res->total_s;
}

static void assert_rel(double got, double want) {
  if (fabs(got - want) > 1e-6 * fabs(want))
    g_error("got %.12g s, want %.12g s (rel err %.3g)", got, want, fabs(got - want) / want);
}

/* bytes / bandwidth + latency: 100 MB over one 10 GB/s NIC, 6 us of NIC + switch latency and
 * 2 us of software latency per message. */
static void test_one_message(void) {
  RfProblem *pb = copy_problem(50000000, "1", 1, 1);
  RfCalibration cal;
  golden_calib(&cal);
  GError *e = NULL;
  RfPlan *plan = rf_plan_build(pb, RF_STRATEGY_P2P, NULL, &e);
  g_assert_no_error(e);
  g_assert_cmpuint(plan->nmsgs, ==, 1);
  RfResult r;
  double t = simulate(plan, &cal, 0, &r);
  assert_rel(t, 1e8 / 10e9 + 6e-6 + 2e-6);
  g_assert_cmpint(r.nstages, ==, 1);
  g_assert_cmpstr(r.stages[0].name, ==, "inject");
  assert_rel(r.stages[0].end_s, t);
  g_assert_nonnull(r.bound_by);
  g_assert_nonnull(strstr(r.bound_by, "gpu0.NIC.tx"));
  rf_result_clear(&r);
  rf_plan_free(plan);
  rf_problem_free(pb);
  rf_calibration_clear(&cal);
}

/* Two messages of one source share its NIC: each gets half of it. */
static void test_two_messages_share_nic(void) {
  RfProblem *pb = copy_problem(50000000, "1,2", 2, 1);
  RfCalibration cal;
  golden_calib(&cal);
  GError *e = NULL;
  RfPlan *plan = rf_plan_build(pb, RF_STRATEGY_P2P, NULL, &e);
  g_assert_no_error(e);
  g_assert_cmpuint(plan->nmsgs, ==, 2);
  g_assert_cmpint(plan->msgs[0].src, ==, 0);
  g_assert_cmpint(plan->msgs[1].src, ==, 0);
  RfResult r;
  double t = simulate(plan, &cal, 0, &r);
  assert_rel(t, 2e8 / 10e9 + 6e-6 + 2e-6);
  rf_result_clear(&r);
  rf_plan_free(plan);
  rf_problem_free(pb);
  rf_calibration_clear(&cal);
}

/* NVLink fan-out: rank 0 sends a full copy to its three domain peers over its 100 GB/s NVLink. */
static void test_nvlink_fanout(void) {
  RfProblem *pb = copy_problem(50000000, "1,2,3", 3, 4);
  RfCalibration cal;
  golden_calib(&cal);
  GError *e = NULL;
  RfPlan *plan = rf_plan_build(pb, RF_STRATEGY_P2P, NULL, &e);
  g_assert_no_error(e);
  g_assert_cmpuint(plan->stats.network_bytes, ==, 0);
  RfResult r;
  double t = simulate(plan, &cal, 0, &r);
  assert_rel(t, 3e8 / 100e9 + 1e-6 + 2e-6);
  rf_result_clear(&r);
  rf_plan_free(plan);
  rf_problem_free(pb);
  rf_calibration_clear(&cal);
}

/* Grouping GPUs into one simulated host keeps the time of its busiest GPU link: GPU 0 alone
 * sends to four GPUs of another domain, and a host of GPUs {0, 1} still sends at one NIC's
 * speed. */
static void test_group_exact_on_symmetric(void) {
  RfProblem *pb = copy_problem(50000000, "4,5,6,7", 4, 4);
  RfCalibration cal;
  golden_calib(&cal);
  GError *e = NULL;
  RfPlan *plan = rf_plan_build(pb, RF_STRATEGY_P2P, NULL, &e);
  g_assert_no_error(e);
  RfResult a, b;
  double t1 = simulate(plan, &cal, 1, &a), t2 = simulate(plan, &cal, 2, &b);
  assert_rel(t1, 4e8 / 10e9 + 6e-6 + 2e-6);
  g_assert_cmpfloat(fabs(t1 - t2) / t1, <, 0.01);
  rf_result_clear(&a);
  rf_result_clear(&b);
  rf_plan_free(plan);
  rf_problem_free(pb);
  rf_calibration_clear(&cal);
}

static RfProblem *preset(const char *model, const char *train, const char *infer,
                         const char *topo) {
  GError *e = NULL;
  RfModel *m = rf_model_load(model, &e);
  g_assert_no_error(e);
  RfTopology *t = rf_topology_load(topo, &e);
  g_assert_no_error(e);
  RfProblem *pb = rf_problem_new_preset(m, train, infer, t, &e);
  g_assert_no_error(e);
  return pb;
}

/* Every strategy on a small MoE: the plan keeps its invariants, the simulation ends, stages lie
 * inside the run, and no strategy beats the NIC time of the bytes its plan sends directly. */
static void test_end_to_end(void) {
  RfProblem *pb = preset("tiny-moe", "TP2xPP2xEP6", "TP2xDP6", "dgx-h100");
  RfCalibration cal;
  gboolean found;
  GError *e = NULL;
  rf_calibration_defaults(&cal);
  g_assert_true(rf_calibration_for_topology(&cal, pb->topo, &found, &e));
  g_assert_true(found);
  for (int s = 0; s < RF_STRATEGY_COUNT; s++) {
    RfPlan *plan = rf_plan_build(pb, (RfStrategy)s, NULL, &e);
    g_assert_no_error(e);
    g_assert_true(rf_plan_verify(plan, &e));
    g_assert_no_error(e);
    RfResult r;
    double t = simulate(plan, &cal, 1, &r);
    g_assert_cmpfloat(t, >, 0);
    g_assert_cmpint(r.nstages, >, 0);
    for (int i = 0; i < r.nstages; i++) {
      g_assert_cmpfloat(r.stages[i].start_s, >=, 0);
      g_assert_cmpfloat(r.stages[i].start_s, <=, r.stages[i].end_s);
      g_assert_cmpfloat(r.stages[i].end_s, <=, t * (1 + 1e-12));
    }
    if (s == RF_STRATEGY_P2P || s == RF_STRATEGY_M2N)
      g_assert_cmpfloat(t, >=, plan->stats.lower_bound_s);
    rf_result_clear(&r);
    rf_plan_free(plan);
  }
  rf_problem_free(pb);
  rf_calibration_clear(&cal);
}

/* The reduction used at scale (GPUs grouped into hosts with the summed links) changes the
 * prediction by under 1% on a case small enough to simulate both ways. */
static void test_reduction_under_one_percent(void) {
  RfProblem *pb = preset("qwen3-30b-a3b", "TP1xPP2xEP8", "TP4xDP4", "dgx-h100");
  RfCalibration cal;
  gboolean found;
  GError *e = NULL;
  rf_calibration_defaults(&cal);
  g_assert_true(rf_calibration_for_topology(&cal, pb->topo, &found, &e));
  for (int s = 0; s < RF_STRATEGY_COUNT; s++) {
    RfPlan *plan = rf_plan_build(pb, (RfStrategy)s, NULL, &e);
    g_assert_no_error(e);
    RfResult a;
    double t1 = simulate(plan, &cal, 1, &a);
    for (int g = 2; g <= 4; g *= 2) {
      RfResult b;
      double t2 = simulate(plan, &cal, g, &b);
      if (g_test_verbose())
        g_printerr("%s: exact %.6g s, %d GPUs per host %.6g s (%+.3f%%)\n",
                   rf_strategy_name((RfStrategy)s), t1, g, t2, 100 * (t2 - t1) / t1);
      if (fabs(t1 - t2) / t1 >= 0.01)
        g_error("%s: exact %.6g s, %d GPUs per host %.6g s", rf_strategy_name((RfStrategy)s), t1, g,
                t2);
      rf_result_clear(&b);
    }
    rf_result_clear(&a);
    rf_plan_free(plan);
  }
  rf_problem_free(pb);
  rf_calibration_clear(&cal);
}

static void test_bad_topologies(void) {
  struct {
    const char *file, *needle;
  } cases[] = {{"bad-fabric.topo", "kind"},
               {"bad-nic.topo", "bandwidth_Gbps"},
               {"bad-hbm.topo", "hbm_GBps"},
               {"does-not-exist.topo", "does-not-exist"}};
  for (unsigned i = 0; i < G_N_ELEMENTS(cases); i++) {
    char *p = data_path(cases[i].file);
    GError *e = NULL;
    RfTopology *t = rf_topology_load(p, &e);
    g_assert_null(t);
    g_assert_nonnull(e);
    if (!strstr(e->message, cases[i].needle))
      g_error("%s: message '%s' does not name '%s'", cases[i].file, e->message, cases[i].needle);
    g_assert_null(strchr(e->message, '\n'));
    g_error_free(e);
    g_free(p);
  }
}

static void test_bad_calibrations(void) {
  struct {
    const char *file, *needle;
  } cases[] = {{"bad-eff.cal", "nic"}, {"bad-missing.cal", "chunk_bytes"}};
  for (unsigned i = 0; i < G_N_ELEMENTS(cases); i++) {
    char *p = data_path(cases[i].file);
    GError *e = NULL;
    RfCalibration c;
    rf_calibration_defaults(&c);
    g_assert_false(rf_calibration_load(&c, p, &e));
    g_assert_nonnull(e);
    if (!strstr(e->message, cases[i].needle))
      g_error("%s: message '%s' does not name '%s'", cases[i].file, e->message, cases[i].needle);
    g_error_free(e);
    rf_calibration_clear(&c);
    g_free(p);
  }
}

/* Shipped calibrations load and name a value for every parameter. */
static void test_shipped_calibrations(void) {
  const char *names[] = {"dgx-h100", "gb200-nvl72", "gb200-nvl72-800g"};
  for (unsigned i = 0; i < G_N_ELEMENTS(names); i++) {
    GError *e = NULL;
    RfTopology *t = rf_topology_load(names[i], &e);
    g_assert_no_error(e);
    RfCalibration c;
    gboolean found;
    rf_calibration_defaults(&c);
    g_assert_true(rf_calibration_for_topology(&c, t, &found, &e));
    g_assert_no_error(e);
    g_assert_true(found);
    g_assert_cmpstr(c.name, ==, names[i]);
    rf_calibration_clear(&c);
    rf_topology_free(t);
  }
}

/* `refit sim --json` prints at least predicted_s and the stages; bad input is one line, rc != 0. */
static void test_command_json(void) {
  if (g_test_subprocess()) {
    char *argv[] = {"sim", "-q",      "--json", "-m",       "tiny-moe", "-t",     "TP2xPP2xEP6",
                    "-i",  "TP2xDP6", "-T",     "dgx-h100", "-s",       "hybrid", NULL};
    exit(rf_cmd_sim(13, argv));
  }
  g_test_trap_subprocess(NULL, 60000000, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed();
  g_test_trap_assert_stdout("*\"predicted_s\"*\"stages\"*\"name\"*\"start_s\"*\"end_s\"*");
}

static void test_command_bad_input(void) {
  if (g_test_subprocess()) {
    char *argv[] = {"sim",     "-m", "tiny-moe",        "-t", "TP2xPP2xEP6", "-i",
                    "TP2xDP6", "-T", "no-such-cluster", NULL};
    exit(rf_cmd_sim(9, argv));
  }
  g_test_trap_subprocess(NULL, 60000000, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_failed();
  g_test_trap_assert_stderr("refit sim: *no-such-cluster*");
}

/* `refit calibrate` fits and reports the leave-one-out error beside the in-sample one. */
static void test_calibrate_loo(void) {
  if (g_test_subprocess()) {
    char *csv = data_path("measured-tiny.csv");
    char *argv[] = {"calibrate", "--measurements", csv, "--param", "refit.fixed_s", NULL};
    int rc = rf_cmd_calibrate(5, argv);
    g_free(csv);
    exit(rc);
  }
  g_test_trap_subprocess(NULL, 120000000, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed();
  g_test_trap_assert_stdout("*fitted on all rows: refit.fixed_s=*leave-one-out*");
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/sim/golden/one_message", test_one_message);
  g_test_add_func("/sim/golden/two_messages_share_nic", test_two_messages_share_nic);
  g_test_add_func("/sim/golden/nvlink_fanout", test_nvlink_fanout);
  g_test_add_func("/sim/golden/group_exact_on_symmetric", test_group_exact_on_symmetric);
  g_test_add_func("/sim/plan/end_to_end", test_end_to_end);
  g_test_add_func("/sim/scale/reduction_under_one_percent", test_reduction_under_one_percent);
  g_test_add_func("/sim/input/bad_topologies", test_bad_topologies);
  g_test_add_func("/sim/input/bad_calibrations", test_bad_calibrations);
  g_test_add_func("/sim/input/shipped_calibrations", test_shipped_calibrations);
  g_test_add_func("/sim/command/json", test_command_json);
  g_test_add_func("/sim/command/bad_input", test_command_bad_input);
  g_test_add_func("/sim/command/calibrate_loo", test_calibrate_loo);
  return g_test_run();
}
