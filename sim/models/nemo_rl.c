/* NeMo RL's refit as a flow program: its nccl_reshard hybrid and its gather + broadcast
 * baseline. Mechanisms and their sources (NVIDIA-NeMo/RL at 7ea279a, NVIDIA/nccl-extensions at
 * 44d2de0):
 * - one communicator per training PP stage (its training ranks + every generation rank);
 *   the generation side keeps at most NRL_REFIT_NUM_STREAMS (2) stages in flight, issued in
 *   stage order from one Python thread (nemo_rl/models/generation/vllm/vllm_backend.py
 *   nccl_reshard_refit); a trainer sends its own stage on one stream
 *   (nemo_rl/models/policy/workers/megatron_policy_worker.py nccl_reshard_refit);
 * - one reshard call per parameter, experts stacked per (layer, projection): 3 calls per MoE
 *   layer (nemo_rl/weight_sync/nccl_reshard_utils.py group_expert_params_in_metadata); the
 *   trainer torch.stack-s its local experts per call; the generation side copies fused
 *   w13 / gate_up receive buffers into place (vllm_backend.py _merged_param_spec);
 * - bulk = FFN gate/up/down + routed experts (nccl_reshard_utils.py is_nccl_reshard_param);
 *   the rest by packed broadcast from global rank 0 fed by export_hf_weights
 *   (nemo_rl/utils/packed_tensor.py), strictly after the bulk (torch.cuda.synchronize on both
 *   sides), then vLLM process_weights_after_loading;
 * - the whole sync_weights is one timer, Ray dispatch included
 *   (nemo_rl/weight_sync/nccl_reshard_weight_synchronizer.py);
 * - M2N PACK: 4 staging slots per device, sticky per communicator (pack_staging.cc):
 *   communicators sharing a slot serialize.
 * The golden variant is the code PR #2413 / #2808 timed (NVIDIA-NeMo/RL at bf68d87, branch
 * youngeunk/new-refit-integration; docs/measurements.md): every parameter by xferdtensor_golden
 * (nemo_rl/distributed/nccl_reshard_utils.py; models/reshard_call.c); the generation side walks
 * every layer in order on one stream, so the stages run one after another (vllm_backend.py
 * nccl_reshard_refit); no misc path and no process_weights_after_loading; its timer (grpo.py
 * async_grpo_train weight_sync) adds the Ray dispatch of both sides (nemo.golden_dispatch_s). */
#include "error.h"
#include "sw.h"

#include <string.h>

/* Bytes the trainer copies with torch.stack (its local experts of the part) and the generation
 * side copies back into a fused w13 / gate_up buffer. */
static void nemo_copies(const RfProblem *pb, uint32_t part, double *pre, double *post) {
  const RfPart *pt = &pb->model->parts[part];
  const RfTensor *t = &pb->model->tensors[pt->tensor];
  int es = rf_dtype_size(t->dtype);
  gboolean stacked = t->nexperts > 0;
  gboolean fused = t->kind == RF_KIND_EXPERT_GATE || t->kind == RF_KIND_EXPERT_UP ||
                   t->kind == RF_KIND_DENSE_GATE || t->kind == RF_KIND_DENSE_UP;
  RfBox b;
  if (stacked)
    for (int i = 0; i < pb->src.nranks; i++) {
      int r = pb->src.ranks[i];
      if (rf_side_rank_shard(&pb->src, part, r, &b, NULL))
        pre[pb->gpu[r]] += (double)rf_box_volume(&b, pt->ndim) * es;
    }
  if (fused)
    for (int i = 0; i < pb->dst.nranks; i++) {
      int r = pb->dst.ranks[i];
      if (rf_side_rank_shard(&pb->dst, part, r, &b, NULL))
        post[pb->gpu[r]] += (double)rf_box_volume(&b, pt->ndim) * es;
    }
}

/* The torch copies around a call, at the device copy rate: the stage waits for the slowest GPU
 * (SwCallCosts). */
static void nemo_call_copies(SwStage *st, const RfProblem *pb, const RfCalibration *cal,
                             uint32_t part, int ngpus) {
  double *pre = g_new0(double, ngpus), *post = g_new0(double, ngpus);
  nemo_copies(pb, part, pre, post);
  /* golden: the destination copies its shard out of the broadcast tensor (reshard_call.c), no
   * fused receive buffer */
  if (rf_variant_resolve(RF_SOFTWARE_NEMO_RL, cal->variant) == RF_VARIANT_GOLDEN)
    memset(post, 0, sizeof(double) * ngpus);
  double a = 0, b = 0, r = rf_topology_copy_Bps(pb->topo, cal->hbm_efficiency);
  for (int g = 0; g < ngpus; g++) {
    if (pre[g] / r > a) a = pre[g] / r;
    if (post[g] / r > b) b = post[g] / r;
  }
  st->ce_pre_s += a;
  st->ce_post_s += b;
  g_free(pre);
  g_free(post);
}

/* The misc set by packed broadcast after the bulk (or the whole model for the baseline), joined
 * behind every stream, named misc.*. */
static void misc_steps(SimProgram *p, SwGbSteps gb, void *gb_ud) {
  int first = p->nsteps;
  gb(p, 0, gb_ud);
  if (p->nsteps > first) p->steps[first].join = TRUE;
  for (int s = first; s < p->nsteps; s++) {
    char name[32];
    g_snprintf(name, sizeof name, "misc.%s", p->steps[s].name);
    g_strlcpy(p->steps[s].name, name, sizeof p->steps[s].name);
  }
}

gboolean sw_nemo_rl_build(SimProgram *p, const SimProtos *x, const RfCalibration *cal,
                          const int *slot_host, SwGbSteps gb, void *gb_ud, GError **error) {
  const RfProblem *pb = x->plan->problem;
  const RfSwVariant v = rf_variant_resolve(RF_SOFTWARE_NEMO_RL, cal->variant);
  const RfStrategy strat = x->plan->strategy;
  if (strat != RF_STRATEGY_HYBRID && strat != RF_STRATEGY_GATHER_BROADCAST) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "--software nemo-rl models hybrid (nccl_reshard) and gather-broadcast (its "
                "baseline), not %s",
                rf_strategy_name(strat));
    return FALSE;
  }
  const SwTransport tr = sw_transport(v);
  /* the variants are the hybrid's bulk transport (nccl_reshard); gather-broadcast is NeMo RL's
   * collective path, every tensor by packed broadcast whatever the variant: with golden or
   * xfer-v0.1 (every part by the bulk path, no misc) it moved nothing before */
  const gboolean bulk = rf_variant_applies(RF_SOFTWARE_NEMO_RL, (int)strat);
  const gboolean golden = bulk && v == RF_VARIANT_GOLDEN;
  const gboolean every_part = bulk && (v == RF_VARIANT_XFER_V01 || golden);
  const int pp = pb->src.par.pp > 0 ? pb->src.par.pp : 1;
  p->sw_ngpus = x->ngpus;

  /* 1. the calls of each PP stage, summed */
  SwStage *stages = sw_stages_new(pp);
  if (bulk && !sw_stages_add_calls(stages, NULL, x, cal, tr, every_part, cal->nemo_call_s,
                                   nemo_call_copies, error)) {
    sw_stages_free(stages, pp);
    return FALSE;
  }

  /* 2. lanes: the generation streams (PACK: at most one per staging slot, since communicators
   * sharing a slot serialize) */
  int lanes = 1;
  if (bulk && !golden) {
    lanes = cal->nemo_streams < pp ? cal->nemo_streams : pp;
    if (tr == SW_M2N_PACK && cal->m2n_slots < lanes) lanes = cal->m2n_slots;
    if (lanes > SIM_MAX_LANES) lanes = SIM_MAX_LANES;
    if (lanes < 1) lanes = 1;
  }
  p->nlanes = lanes;
  const double dispatch_s = golden ? cal->nemo_golden_dispatch_s : cal->nemo_dispatch_s;
  for (int l = 0; l < lanes; l++) {
    sim_add_step(p, l, "dispatch", dispatch_s, 0);
    if (cal->fixed_s > 0) sim_add_step(p, l, "setup", cal->fixed_s, 0);
  }
  /* one Python thread issues every stage in order: stream l's first stage waits for the host
   * time of the stages issued before it */
  double host_before = 0;
  for (int l = 1; l < lanes && l < pp; l++) {
    host_before += stages[l - 1].host_s;
    if (host_before > 0) sim_add_step(p, l, "issue", host_before, 0);
  }
  GPtrArray *loads = g_ptr_array_new_with_free_func(g_free);
  double soft = dispatch_s + cal->fixed_s, calls = 0;
  if (bulk) sw_stages_emit(p, stages, pp, lanes, tr, TRUE, slot_host, loads, &soft, &calls);
  sw_stages_free(stages, pp);

  /* 3. the misc set by packed broadcast, then vLLM's finalize (golden: neither) */
  if (x->has_gb && !every_part) misc_steps(p, gb, gb_ud);
  const double finalize_s = golden ? 0 : cal->vllm_finalize_s;
  int f = sim_add_step(p, 0, "finalize", finalize_s, 0);
  p->steps[f].join = TRUE;
  soft += finalize_s;
  p->sw_software_s = soft;
  p->sw_calls = calls;
  /* loads of every step (gather-broadcast steps: from the records, as program.c does) */
  sw_loads_finish(p, x, loads);
  g_ptr_array_free(loads, TRUE);
  return TRUE;
}
