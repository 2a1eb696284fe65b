/* NCCL M2N's reshard_model_bench as a flow program (nccl_m2n/benchmarks/reshard_model_bench.cu,
 * NVIDIA/nccl-extensions at 44d2de0): the m2n strategy, every parameter one reshard call, each
 * layer timed on its own and summed ("Latency Max" with --no-dedup): calls in series, on one
 * lane. */
#include "error.h"
#include "sw.h"

gboolean sw_nccl_m2n_build(SimProgram *p, const SimProtos *x, const RfCalibration *cal,
                           const int *slot_host, GError **error) {
  const RfProblem *pb = x->plan->problem;
  const RfStrategy strat = x->plan->strategy;
  if (strat != RF_STRATEGY_M2N) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "--software nccl-m2n models the m2n strategy (reshard_model_bench), not %s",
                rf_strategy_name(strat));
    return FALSE;
  }
  const SwTransport tr = sw_transport(rf_variant_resolve(RF_SOFTWARE_NCCL_M2N, cal->variant));
  const int pp = pb->src.par.pp > 0 ? pb->src.par.pp : 1;
  p->sw_ngpus = x->ngpus;
  SwStage *stages = sw_stages_new(pp);
  if (!sw_stages_add_calls(stages, x, cal, tr, TRUE, 0, NULL, error)) {
    sw_stages_free(stages, pp);
    return FALSE;
  }
  p->nlanes = 1;
  if (cal->fixed_s > 0) sim_add_step(p, 0, "setup", cal->fixed_s, 0);
  GPtrArray *loads = g_ptr_array_new_with_free_func(g_free);
  /* no Ray dispatch in the bench: its software time is the set-up and the calls' serial costs */
  double soft = cal->fixed_s, calls = 0;
  sw_stages_emit(p, stages, pp, 1, tr, FALSE, slot_host, loads, &soft, &calls);
  sw_stages_free(stages, pp);
  p->sw_software_s = soft;
  p->sw_calls = calls;
  sw_loads_finish(p, x, loads);
  g_ptr_array_free(loads, TRUE);
  return TRUE;
}
