#include "advise_candidates.h"
#include "error.h"
#include "memory.h"

#include <string.h>

void rf_advise_bound_rates(const RfCalibration *cal, RfBoundRates *r) {
  rf_bound_rates_peak(r);
  r->nic = cal->nic_efficiency;
  r->nvlink = cal->nvlink_efficiency;
  r->phase_net[RF_PHASE_EXPORT] = cal->nic_efficiency / cal->allgather_efficiency;
  r->phase_net[RF_PHASE_BROADCAST] = cal->nic_efficiency / cal->broadcast_efficiency;
  r->fixed_s = cal->fixed_s;
}

/* The layouts of engine fw on ng GPUs that the space allows. */
static GPtrArray *space_layouts(const RfModel *m, const RfAdviseSpace *sp, RfInferFramework fw,
                                int ng) {
  gboolean with_vllm = sp->nfw == 0;
  for (int f = 0; f < sp->nfw; f++)
    with_vllm |= sp->fw[f] == RF_INFER_VLLM;
  if (fw == RF_INFER_SGLANG)
    return rf_advise_sglang_layouts(m, ng, sp->tps, sp->ntps, sp->with_ep, sp->without_ep,
                                    !with_vllm);
  return rf_advise_layouts(m, ng, sp->tps, sp->ntps, sp->with_ep, sp->without_ep);
}

gboolean rf_advise_candidates(const RfModel *m, const RfAdviseSpace *sp, GArray *out,
                              GError **error) {
  static const RfInferFramework vllm_only = RF_INFER_VLLM;
  const RfInferFramework *fws = sp->nfw > 0 ? sp->fw : &vllm_only;
  int nfw = sp->nfw > 0 ? sp->nfw : 1;
  gboolean ok = TRUE;
  for (int g = 0; ok && g < sp->ngpus; g++)
    for (int f = 0; ok && f < nfw; f++) {
      int ng = sp->gpus[g];
      GPtrArray *lay = space_layouts(m, sp, fws[f], ng);
      for (guint l = 0; ok && l < lay->len; l++) {
        RfParallel par;
        ok = rf_parallel_parse(lay->pdata[l], &par, error);
        int doms = ok ? rf_advise_tp_domains(par.tp, sp->domain_gpus) : 1;
        if (doms > 1 && !sp->cross_domain_tp) continue;
        for (int p = 0; ok && p < sp->nplace; p++)
          for (int s = 0; s < sp->nstrategy; s++) {
            RfAdviseCandidate k = {0};
            k.ngpus = ng;
            k.layout = g_strdup(lay->pdata[l]);
            k.par = par;
            k.fw = fws[f];
            k.tp_domains = doms;
            k.place = sp->place[p];
            k.strategy = sp->strategy[s];
            g_array_append_val(out, k);
          }
      }
      g_ptr_array_free(lay, TRUE);
    }
  return ok;
}

static RfProblem *candidate_problem(const RfAdviseSetup *c, const RfAdviseCandidate *k,
                                    GError **error) {
  RfModel *m = rf_model_load(c->model, error);
  if (!m) return NULL;
  RfTopology *t = rf_topology_load(c->topology, error);
  if (!t) {
    rf_model_free(m);
    return NULL;
  }
  RfProblem *pb = rf_problem_new_preset_fw(m, c->train, k->layout, k->fw, t, error);
  if (pb && k->place == RF_PLACE_INTERLEAVED) rf_problem_interleave(pb);
  return pb;
}

/* Why k cannot be taken (owned), or NULL. */
static char *unfit_reason(const RfAdviseSetup *c, const RfAdviseCandidate *k) {
  GError *e = NULL;
  RfProblem *pb = NULL;
  if (rf_advise_layout_check_fw(c->arch, k->fw, &k->par, k->ngpus, &e))
    pb = candidate_problem(c, k, &e);
  if (pb && c->mem_bytes > 0) {
    RfMemory mem;
    rf_memory_weights(pb, &mem);
    double room = c->mem_bytes - c->reserve_bytes;
    if ((double)mem.weights_bytes > room)
      g_set_error(&e, RF_ERROR, RF_ERROR_INPUT,
                  "weights %.1f GB per GPU exceed %.1f GB (memory %.0f GB - KV reserve %.1f GB)",
                  mem.weights_bytes / 1e9, room / 1e9, c->mem_bytes / 1e9, c->reserve_bytes / 1e9);
  }
  rf_problem_free(pb);
  char *why = e ? g_strdup(e->message) : NULL;
  g_clear_error(&e);
  return why;
}

int rf_advise_drop_unfit(const RfAdviseSetup *c, RfAdviseCandidate *cands, int n) {
  GHashTable *seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  int dropped = 0;
  for (int i = 0; i < n; i++) {
    RfAdviseCandidate *k = &cands[i];
    char *key = g_strdup_printf("%d|%d|%s|%d", k->ngpus, k->fw, k->layout, k->place);
    const char *why;
    if (g_hash_table_contains(seen, key)) {
      why = g_hash_table_lookup(seen, key);
      g_free(key);
    } else {
      char *reason = unfit_reason(c, k);
      g_hash_table_insert(seen, key, reason);
      why = reason;
    }
    if (why) {
      k->dropped = TRUE;
      k->bound.code = RF_ERROR_INPUT;
      g_strlcpy(k->bound.error, why, sizeof k->bound.error);
    }
    dropped += k->dropped;
  }
  g_hash_table_destroy(seen);
  return dropped;
}

static void outcome_error(RfAdviseOutcome *o, const GError *e) {
  o->ok = 0;
  o->code = e ? e->code : RF_ERROR_INPUT;
  g_strlcpy(o->error, e ? e->message : "failed", sizeof o->error);
}

static void set_memory(RfAdviseOutcome *out, const RfMemory *m) {
  out->weights_bytes = m->weights_bytes;
  out->extra_bytes = m->extra_bytes;
  out->nccl_bytes = m->nccl_bytes;
  out->peak_bytes = m->peak_bytes;
  out->memory_from = (int)m->from;
}

/* FALSE + error when out's weights + refit extra exceed the GPU memory. */
static gboolean memory_fits(const RfAdviseSetup *c, const RfAdviseOutcome *out, GError **error) {
  if (c->mem_bytes <= 0 || (double)out->peak_bytes <= c->mem_bytes) return TRUE;
  g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
              "weights %.1f GB + refit extra %.1f GB exceed %.0f GB per GPU%s",
              out->weights_bytes / 1e9, out->extra_bytes / 1e9, c->mem_bytes / 1e9,
              out->memory_from == RF_MEMORY_FROM_STAGES ? " (by the plan's stages)" : "");
  return FALSE;
}

/* The plan's bound and, in the bound step, its memory into out; FALSE + error when the memory
 * does not fit (not for an estimate by the plan's stages that the simulation will settle). */
static gboolean bound_and_memory(const RfAdviseSetup *c, const RfPlan *plan, gboolean simulate,
                                 RfAdviseOutcome *out, GError **error) {
  const char *what = "NIC";
  out->nic_bound_s = plan->stats.lower_bound_s;
  out->bound_s = rf_plan_fabric_bound(plan, &c->rates, !c->cal->hybrid_overlap, &what);
  g_strlcpy(out->bound_what, what, sizeof out->bound_what);
  out->network_bytes = plan->stats.network_bytes;
  if (simulate) return TRUE; /* after the run (rf_advise_evaluate) */
  RfMemory mem; /* the memory model of plan, section 1: as the calibrated software runs it */
  RfMemoryRun mr;
  rf_calibration_memory_run_plan(c->cal, plan, 1, &mr, NULL);
  if (c->max_segments) mr.max_segments = c->max_segments;
  if (!rf_memory_of_run(plan, &mr, &mem, error)) return FALSE;
  set_memory(out, &mem);
  return (mem.from == RF_MEMORY_FROM_STAGES &&
          rf_variant_is_executor(c->cal->software, c->cal->variant)) ||
         memory_fits(c, out, error);
}

void rf_advise_evaluate(int i, const RfAdviseCandidate *k, gboolean simulate, RfAdviseOutcome *out,
                        void *setup) {
  (void)i;
  const RfAdviseSetup *c = setup;
  memset(out, 0, sizeof *out);
  GError *e = NULL;
  RfPlan *plan = NULL;
  RfExecutor *ex = NULL;
  RfProblem *pb = candidate_problem(c, k, &e);
  if (!pb) goto out;
  RfPlanOptions po = {0};
  plan = rf_plan_build(pb, k->strategy, &po, &e);
  if (!plan || !bound_and_memory(c, plan, simulate, out, &e)) goto out;
  if (simulate) {
    RfSimOptions so = {0};
    so.calib = *c->cal;
    ex = rf_sim_executor_new(&so);
    RfResult res = {0};
    if (!ex->prepare(ex, pb, &e) || !ex->run(ex, plan, &res, &e)) goto out;
    out->predicted_s = res.total_s;
    g_strlcpy(out->bound_by, res.bound_by ? res.bound_by : "-", sizeof out->bound_by);
    rf_result_clear(&res);
    /* the memory of the schedule refit's executor simulated, as refit sim counts it; else the
     * bound step's */
    RfMemory mem;
    if (rf_sim_executor_memory(ex, 1, &mem)) {
      set_memory(out, &mem);
    } else {
      out->weights_bytes = k->bound.weights_bytes;
      out->extra_bytes = k->bound.extra_bytes;
      out->nccl_bytes = k->bound.nccl_bytes;
      out->peak_bytes = k->bound.peak_bytes;
      out->memory_from = k->bound.memory_from;
    }
    if (!memory_fits(c, out, &e)) goto out;
  }
  out->ok = 1;
out:
  if (e) outcome_error(out, e);
  g_clear_error(&e);
  if (ex) ex->destroy(ex);
  rf_plan_free(plan);
  rf_problem_free(pb);
}
