/* NCCL M2N's reshard_model_bench as a flow program (nccl_m2n/benchmarks/reshard_model_bench.cu,
 * NVIDIA/nccl-extensions at 4532497, the README's Reference Performance; docs/measurements.md):
 * the m2n strategy, every parameter one reshard call (experts stacked per tensor);
 * - one NCCL communicator and one CUDA stream per (training PP stage, generation PP stage) pair;
 * - parameters grouped by name pattern (layers.N -> layers.X); for each group every layer's
 *   transfer is launched asynchronously on its pair's stream and all streams are synchronized
 *   once; the groups run one after another, each after an MPI barrier;
 * - "Latency Max": per rank the sum over groups of the group's time, the maximum over ranks; a
 *   generation rank sits in every pair, so its host launches every call of a group.
 * So a group lasts max(the host time of its calls, the slowest pair's GPU time), and the bench
 * time is the sum over groups (models/reshard_stages.c sw_groups_emit). No Ray dispatch. */
#include "error.h"
#include "sw.h"

#include <string.h>

/* PP stage of the side that holds a part (the mesh's first rank). */
static int side_stage(const RfSide *side, uint32_t part) {
  const RfPlacement *pl = &side->place[part];
  int pp = side->par.pp > 0 ? side->par.pp : 1;
  if (!pl->mesh || side->nranks < pp) return 0;
  int idx = rf_side_index(side, rf_placement_rank(pl, 0, 0));
  int per = side->nranks / pp;
  int s = idx >= 0 && per > 0 ? idx / per : 0;
  return s < pp ? s : pp - 1;
}

/* The bench's pattern of a tensor name: the layer number after "layers." replaced by X. */
static char *name_pattern(const char *name) {
  GString *s = g_string_new(NULL);
  const char *p = name;
  while (*p) {
    if (!strncmp(p, "layers.", 7) && g_ascii_isdigit(p[7])) {
      g_string_append(s, "layers.X");
      p += 7;
      while (g_ascii_isdigit(*p))
        p++;
      continue;
    }
    g_string_append_c(s, *p++);
  }
  return g_string_free(s, FALSE);
}

/* Per part: its slot group * npairs + pair, groups numbered in order of first appearance.
 * Returns the number of groups. */
static int bench_slots(const RfProblem *pb, int npairs, int gpp, int *slot) {
  g_autoptr(GHashTable) groups = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  int ngroups = 0;
  for (uint32_t i = 0; i < pb->model->nparts; i++) {
    const RfTensor *t = &pb->model->tensors[pb->model->parts[i].tensor];
    char *key = name_pattern(t->name);
    gpointer v = g_hash_table_lookup(groups, key);
    int g;
    if (v) {
      g = GPOINTER_TO_INT(v) - 1;
      g_free(key);
    } else {
      g = ngroups++;
      g_hash_table_insert(groups, key, GINT_TO_POINTER(g + 1));
    }
    int pair = side_stage(&pb->src, i) * gpp + side_stage(&pb->dst, i);
    slot[i] = g * npairs + (pair < npairs ? pair : npairs - 1);
  }
  return ngroups;
}

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
  const int gpp = pb->dst.par.pp > 0 ? pb->dst.par.pp : 1;
  const int npairs = pp * gpp;
  if (npairs > SIM_MAX_LANES) {
    g_set_error(error, RF_ERROR, RF_ERROR_LIMIT,
                "--software nccl-m2n: %d (train stage, generation stage) streams, above the %d "
                "lanes a program holds",
                npairs, SIM_MAX_LANES);
    return FALSE;
  }
  p->sw_ngpus = x->ngpus;
  g_autofree int *slot = g_new(int, pb->model->nparts > 0 ? pb->model->nparts : 1);
  int ngroups = bench_slots(pb, npairs, gpp, slot);
  SwStage *stages = sw_stages_new(ngroups * npairs);
  if (!sw_stages_add_calls(stages, slot, x, cal, tr, TRUE, 0, NULL, error)) {
    sw_stages_free(stages, ngroups * npairs);
    return FALSE;
  }
  /* one step per sub-step of every (group, pair) that has calls, and the set-up */
  int64_t need = 1;
  for (int i = 0; i < ngroups * npairs; i++)
    if (stages[i].calls > 0) need += stages[i].nsub > 0 ? stages[i].nsub : 1;
  if (p->nsteps + need > SIM_MAX_STEPS) {
    g_set_error(error, RF_ERROR, RF_ERROR_LIMIT,
                "--software nccl-m2n: %" G_GINT64_FORMAT " steps (name-pattern groups x stream "
                "pairs), above the %d a program holds",
                need, SIM_MAX_STEPS);
    sw_stages_free(stages, ngroups * npairs);
    return FALSE;
  }
  p->nlanes = npairs;
  if (cal->fixed_s > 0) sim_add_step(p, 0, "setup", cal->fixed_s, 0);
  GPtrArray *loads = g_ptr_array_new_with_free_func(g_free);
  /* no Ray dispatch in the bench: its software time is the set-up and the calls' serial costs */
  double soft = cal->fixed_s, calls = 0;
  sw_groups_emit(p, stages, ngroups, npairs, tr, slot_host, loads, &soft, &calls);
  sw_stages_free(stages, ngroups * npairs);
  p->sw_software_s = soft;
  p->sw_calls = calls;
  sw_loads_finish(p, x, loads);
  g_ptr_array_free(loads, TRUE);
  return TRUE;
}
