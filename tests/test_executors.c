/* The two executors together: both walk the one schedule of model/plan/schedule.h. Needs sim/ and
 * real/ (the only test binary that links both, as cli/ does); each executor's own tests link its
 * library alone. */
#include <glib.h>

#include "golden.h"
#include "internal.h"
#include "real.h"

/* Both executors walk the one schedule: the programs the simulator's rank actors run are, rank by
 * rank and operation by operation, the ones real/ issued (its trace), on a plan with injection,
 * fan-out and many groups, for one to three lanes. */
static void test_exec_same_program_as_real(void) {
  RfProblem *pb = copy_problem_on("golden.topo", 300000, "0,1", 2, "2,3,4,5,6,7", 6, 2);
  GError *e = NULL;
  RfPlan *plan = rf_plan_build(pb, RF_STRATEGY_M2N, NULL, &e);
  g_assert_no_error(e);
  for (int slots = 1; slots <= 3; slots++) {
    RfRealOptions o;
    rf_real_options_init(&o);
    o.local = TRUE;
    o.warmup = 0;
    o.iters = 1;
    o.staging_bytes = 16384;
    o.slots = slots;
    o.trace = g_array_new(FALSE, FALSE, sizeof(RfRealTrace));
    RfExecutor *ex = rf_real_executor_new(&o, &e);
    g_assert_no_error(e);
    g_assert_true(ex->prepare(ex, pb, &e));
    RfResult res = {0};
    g_assert_true(ex->run(ex, plan, &res, &e));
    g_assert_no_error(e);
    g_assert_cmpuint(res.wrong_elements, ==, 0);
    rf_result_clear(&res);
    ex->destroy(ex);
    RfCalibration cal;
    golden_calib(&cal);
    cal.software = RF_SOFTWARE_REFIT;
    cal.variant = RF_VARIANT_EXECUTOR;
    cal.exec_staging_bytes = (double)o.staging_bytes;
    cal.exec_max_ops = o.max_ops;
    cal.exec_slots = slots;
    g_autoptr(SimProtos) x = sim_protos_build(plan, &cal);
    g_autoptr(SimProgram) p = sim_program_build(x, &cal, 1, &e);
    g_assert_no_error(e);
    g_assert_nonnull(p->exec);
    g_assert_cmpint(p->nsteps, >, 10);
    guint seen = 0;
    for (int rank = 0; rank < pb->nranks; rank++) {
      uint64_t k = p->exec->prog_first[rank];
      for (guint i = 0; i < o.trace->len; i++) {
        const RfRealTrace *t = &g_array_index(o.trace, RfRealTrace, i);
        if (t->rank != rank) continue;
        g_assert_cmpuint(k, <, p->exec->prog_first[rank + 1]);
        const RfSchedOp *op = &p->exec->prog[k++];
        g_assert_cmpint(op->round, ==, t->round);
        g_assert_cmpint(op->kind, ==, t->kind);
        g_assert_cmpint(op->lane, ==, t->lane);
        seen++;
      }
      g_assert_cmpuint(k, ==, p->exec->prog_first[rank + 1]);
    }
    g_assert_cmpuint(seen, ==, o.trace->len);
    g_array_free(o.trace, TRUE);
    g_free(o.backend);
    rf_calibration_clear(&cal);
  }
  rf_plan_free(plan);
  rf_problem_free(pb);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/executors/same-program-as-real", test_exec_same_program_as_real);
  return g_test_run();
}
