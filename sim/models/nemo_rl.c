/* The published refit software as a flow program: NeMo RL's nccl_reshard refit (and its
 * gather + broadcast baseline), and NCCL M2N's reshard_model_bench. Mechanisms and their
 * sources (NVIDIA-NeMo/RL at 7ea279a, NVIDIA/nccl-extensions at 44d2de0):
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
 *   communicators sharing a slot serialize;
 * - reshard_model_bench (nccl_m2n/benchmarks/reshard_model_bench.cu): every parameter, each
 *   layer timed on its own and summed ("Latency Max" with --no-dedup): calls in series. */
#include "error.h"
#include "sw.h"

#include <math.h>
#include <string.h>

typedef struct {
  int32_t src, dst; /* GPUs */
  uint16_t sub;
  uint8_t phase;
  double offset_s, weight;
} FKey;

typedef struct {
  FKey k;
  double bytes;
} FAgg;

static guint fkey_hash(gconstpointer p) {
  const FKey *k = p;
  guint64 v = ((guint64)(uint32_t)k->src * 1000003u) ^ ((guint64)(uint32_t)k->dst << 20) ^
              ((guint64)k->sub << 50) ^ ((guint64)k->phase << 58);
  double o = k->offset_s * 1e9;
  v ^= (guint64)(int64_t)o * 0x9e3779b97f4a7c15ULL;
  return (guint)(v ^ (v >> 32));
}

static gboolean fkey_equal(gconstpointer a, gconstpointer b) {
  const FKey *x = a, *y = b;
  return x->src == y->src && x->dst == y->dst && x->sub == y->sub && x->phase == y->phase &&
         x->offset_s == y->offset_s && x->weight == y->weight;
}

/* One PP stage: its calls summed. */
typedef struct {
  GArray *agg;       /* FAgg */
  GHashTable *index; /* FKey -> position + 1 in agg */
  int nsub;
  double calls, host_s, latency_s;
  double *pre_bytes, *post_bytes; /* per GPU */
  double ce_pre_s, ce_post_s;     /* copy-engine time (row-size dependent), max over GPUs */
} Stage;

static double copy_Bps(const RfProblem *pb, const RfCalibration *cal) {
  return pb->topo->hbm_GBps * 1e9 * cal->hbm_efficiency;
}

/* Copy-engine strided copy rate for rows of `row` bytes: the device copy rate times
 * row / (row + ce_row_half_bytes). */
static double ce_Bps(const RfProblem *pb, const RfCalibration *cal, double row) {
  double r = copy_Bps(pb, cal);
  if (cal->ce_row_half_bytes > 0 && row > 0) r *= row / (row + cal->ce_row_half_bytes);
  return r;
}

static void stage_add_call(Stage *st, const SwCall *c, const RfProblem *pb,
                           const RfCalibration *cal, int ngpus, gboolean ce) {
  for (guint i = 0; i < c->flows->len; i++) {
    const SwFlow *f = &g_array_index(c->flows, SwFlow, i);
    FKey k = {f->src, f->dst, f->sub, f->phase, f->offset_s, f->weight};
    gpointer pos = g_hash_table_lookup(st->index, &k);
    if (pos) {
      g_array_index(st->agg, FAgg, GPOINTER_TO_UINT(pos) - 1).bytes += f->bytes;
      continue;
    }
    FAgg a = {k, f->bytes};
    g_array_append_val(st->agg, a);
    FKey *kk = g_memdup2(&k, sizeof k);
    g_hash_table_insert(st->index, kk, GUINT_TO_POINTER(st->agg->len));
  }
  if (c->nsub > st->nsub) st->nsub = c->nsub;
  st->calls += 1;
  st->host_s += c->host_s;
  st->latency_s += c->latency_s;
  /* copies are serial with the call's transfer; copy-engine copies at the row's rate, torch
   * copies at the device copy rate: summed per GPU, the stage waits for the slowest GPU */
  double pre = 0, post = 0;
  double rate = ce ? ce_Bps(pb, cal, c->ce_row_bytes) : copy_Bps(pb, cal);
  for (int g = 0; g < ngpus; g++) {
    if (c->pre_bytes[g] / rate > pre) pre = c->pre_bytes[g] / rate;
    if (c->post_bytes[g] / rate > post) post = c->post_bytes[g] / rate;
  }
  st->ce_pre_s += pre;
  st->ce_post_s += post;
}

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

/* Per-step GPU link loads, for the group factors. */
static double *step_load(SimProgram *p, GPtrArray *loads, int step) {
  while ((int)loads->len <= step)
    g_ptr_array_add(loads, NULL);
  if (!loads->pdata[step]) loads->pdata[step] = g_new0(double, (size_t)p->sw_ngpus *SIM_HOST_LINKS);
  return loads->pdata[step];
}

static void emit_stage_flows(SimProgram *p, const Stage *st, int sub, int step,
                             const int *slot_host, GPtrArray *loads) {
  const int G = p->gpus_per_domain;
  double *ld = step_load(p, loads, step);
  /* host-level flows: GPU-level flows between the same simulated hosts merge */
  g_autoptr(GHashTable) idx = g_hash_table_new_full(fkey_hash, fkey_equal, g_free, NULL);
  guint first = p->flows->len;
  for (guint i = 0; i < st->agg->len; i++) {
    const FAgg *a = &g_array_index(st->agg, FAgg, i);
    if (a->k.sub != sub) continue;
    int s = slot_host[a->k.src / p->group], d = slot_host[a->k.dst / p->group];
    gboolean net = a->k.src / G != a->k.dst / G;
    double w = net ? a->k.weight : 1.0;
#define L(g, k) ld[(size_t)(g)*SIM_HOST_LINKS + (k)]
    L(a->k.src, SIM_LINK_HBM) += a->bytes * w;
    L(a->k.dst, SIM_LINK_HBM) += a->bytes * w;
    L(a->k.src, net ? SIM_LINK_NICUP : SIM_LINK_NVUP) += a->bytes * w;
    L(a->k.dst, net ? SIM_LINK_NICDN : SIM_LINK_NVDN) += a->bytes * w;
#undef L
    p->phase_bytes[a->k.phase] += a->bytes;
    FKey hk = {s, d, 0, a->k.phase, a->k.offset_s, w};
    gpointer pos = g_hash_table_lookup(idx, &hk);
    if (pos) {
      g_array_index(p->flows, SimFlow, first + GPOINTER_TO_UINT(pos) - 1).bytes += a->bytes * w;
      continue;
    }
    SimFlow f = {s, d, a->k.phase, 0, (uint16_t)step, a->bytes * w, a->k.offset_s, 0, w};
    g_array_append_val(p->flows, f);
    g_hash_table_insert(idx, g_memdup2(&hk, sizeof hk), GUINT_TO_POINTER(p->flows->len - first));
  }
}

static void stage_init(Stage *st, int ngpus) {
  memset(st, 0, sizeof *st);
  st->agg = g_array_new(FALSE, FALSE, sizeof(FAgg));
  st->index = g_hash_table_new_full(fkey_hash, fkey_equal, g_free, NULL);
  st->pre_bytes = g_new0(double, ngpus > 0 ? ngpus : 1);
  st->post_bytes = g_new0(double, ngpus > 0 ? ngpus : 1);
}

static void stage_clear(Stage *st) {
  g_array_free(st->agg, TRUE);
  g_hash_table_destroy(st->index);
  g_free(st->pre_bytes);
  g_free(st->post_bytes);
}

static const char *sub_name(SwTransport tr, int sub) {
  if (tr == SW_PYTHON_FALLBACK) return sub == 0 ? "p2p" : "allgather";
  if (tr == SW_M2N_PACK) return sub == 0 ? "put" : "forward";
  return "transfer";
}

gboolean sw_build(SimProgram *p, const SimProtos *x, const RfCalibration *cal, const int *slot_host,
                  SwGbSteps gb, void *gb_ud, GError **error) {
  const RfPlan *plan = x->plan;
  const RfProblem *pb = plan->problem;
  const RfSoftware sw = cal->software;
  const RfSwVariant v = rf_variant_resolve(sw, cal->variant);
  const RfStrategy strat = plan->strategy;
  if (sw == RF_SOFTWARE_NEMO_RL && strat != RF_STRATEGY_HYBRID &&
      strat != RF_STRATEGY_GATHER_BROADCAST) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "--software nemo-rl models hybrid (nccl_reshard) and gather-broadcast (its "
                "baseline), not %s",
                rf_strategy_name(strat));
    return FALSE;
  }
  if (sw == RF_SOFTWARE_NCCL_M2N && strat != RF_STRATEGY_M2N) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "--software nccl-m2n models the m2n strategy (reshard_model_bench), not %s",
                rf_strategy_name(strat));
    return FALSE;
  }
  SwTransport tr = v == RF_VARIANT_PYTHON_FALLBACK                        ? SW_PYTHON_FALLBACK
                   : v == RF_VARIANT_XFER_V01 || v == RF_VARIANT_RING_V01 ? SW_M2N_RING_V01
                   : v == RF_VARIANT_DIRECT                               ? SW_M2N_DIRECT
                                                                          : SW_M2N_PACK;
  gboolean every_part = sw == RF_SOFTWARE_NCCL_M2N || v == RF_VARIANT_XFER_V01;
  gboolean bulk = strat != RF_STRATEGY_GATHER_BROADCAST;
  int pp = pb->src.par.pp > 0 ? pb->src.par.pp : 1;
  int ngpus = x->ngpus;
  p->sw_ngpus = ngpus;

  /* 1. the calls of each PP stage, summed */
  Stage *stages = g_new(Stage, pp);
  for (int s = 0; s < pp; s++)
    stage_init(&stages[s], ngpus);
  gboolean ok = TRUE;
  if (bulk) {
    SwCall c;
    sw_call_init(&c, ngpus);
    for (uint32_t i = 0; i < pb->model->nparts && ok; i++) {
      const RfTensor *t = &pb->model->tensors[pb->model->parts[i].tensor];
      if (!pb->src.place[i].mesh || !pb->dst.place[i].mesh) continue;
      if (!every_part && !(rf_kind_is_ffn(t->kind) && !t->mtp)) continue;
      memset(c.pre_bytes, 0, sizeof(double) * (ngpus > 0 ? ngpus : 1));
      memset(c.post_bytes, 0, sizeof(double) * (ngpus > 0 ? ngpus : 1));
      if (!sw_call_build(pb, cal, tr, i, &c, error)) {
        ok = FALSE;
        break;
      }
      Stage *st = &stages[sw_part_stage(pb, i)];
      if (sw == RF_SOFTWARE_NEMO_RL) c.host_s += cal->nemo_call_s;
      /* the torch copies around the call (stack, copy-back) at the device copy rate; the
       * copy-engine pack / unpack of PACK at the row rate */
      stage_add_call(st, &c, pb, cal, ngpus, tr == SW_M2N_PACK);
      if (sw == RF_SOFTWARE_NEMO_RL) {
        double *pre = g_new0(double, ngpus), *post = g_new0(double, ngpus);
        nemo_copies(pb, i, pre, post);
        double a = 0, b = 0, r = copy_Bps(pb, cal);
        for (int g = 0; g < ngpus; g++) {
          if (pre[g] / r > a) a = pre[g] / r;
          if (post[g] / r > b) b = post[g] / r;
        }
        st->ce_pre_s += a;
        st->ce_post_s += b;
        g_free(pre);
        g_free(post);
      }
    }
    sw_call_clear(&c);
  }
  if (!ok) {
    for (int s = 0; s < pp; s++)
      stage_clear(&stages[s]);
    g_free(stages);
    return FALSE;
  }

  /* 2. lanes: NeMo RL's generation streams (PACK: at most one per staging slot, since
   * communicators sharing a slot serialize); the bench: every call in series */
  int lanes = 1;
  if (sw == RF_SOFTWARE_NEMO_RL && bulk) {
    lanes = cal->nemo_streams < pp ? cal->nemo_streams : pp;
    if (tr == SW_M2N_PACK && cal->m2n_slots < lanes) lanes = cal->m2n_slots;
    if (lanes > SIM_MAX_LANES) lanes = SIM_MAX_LANES;
    if (lanes < 1) lanes = 1;
  }
  p->nlanes = lanes;
  for (int l = 0; l < lanes; l++) {
    if (sw == RF_SOFTWARE_NEMO_RL) sim_add_step(p, l, "dispatch", cal->nemo_dispatch_s, 0);
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
  double soft = cal->nemo_dispatch_s + cal->fixed_s, calls = 0;
  for (int s = 0; s < pp && bulk; s++) {
    Stage *st = &stages[s];
    if (st->calls <= 0) continue;
    calls += st->calls;
    int lane = s % lanes, nsub = st->nsub > 0 ? st->nsub : 1;
    double pre = st->host_s + st->latency_s + st->ce_pre_s, post = st->ce_post_s;
    soft += pre + post;
    for (int k = 0; k < nsub; k++) {
      char name[32];
      g_snprintf(name, sizeof name, "stream%d stage%d.%s%d", lane, s, sub_name(tr, k), k);
      int step = sim_add_step(p, lane, name, k == 0 ? pre : 0, k == nsub - 1 ? post : 0);
      emit_stage_flows(p, st, k, step, slot_host, loads);
    }
  }
  for (int s = 0; s < pp; s++)
    stage_clear(&stages[s]);
  g_free(stages);

  /* 3. NeMo RL: the misc set by packed broadcast after the bulk (or the whole model for the
   * baseline), then vLLM's finalize */
  if (sw == RF_SOFTWARE_NEMO_RL) {
    if (x->has_gb && !every_part) {
      int first = p->nsteps;
      gb(p, 0, gb_ud);
      if (p->nsteps > first) p->steps[first].join = TRUE;
      for (int s = first; s < p->nsteps; s++) {
        char name[32];
        g_snprintf(name, sizeof name, "misc.%s", p->steps[s].name);
        g_strlcpy(p->steps[s].name, name, sizeof p->steps[s].name);
      }
    }
    int f = sim_add_step(p, 0, "finalize", cal->vllm_finalize_s, 0);
    p->steps[f].join = TRUE;
    soft += cal->vllm_finalize_s;
  }
  p->sw_software_s = soft;
  p->sw_calls = calls;
  /* loads of every step (gather-broadcast steps: from the records, as program.c does) */
  p->sw_load = g_new0(double, (size_t)p->nsteps *ngpus *SIM_HOST_LINKS + 1);
  for (int s = 0; s < p->nsteps; s++) {
    double *dst = p->sw_load + (size_t)s * ngpus * SIM_HOST_LINKS;
    if (s < (int)loads->len && loads->pdata[s]) {
      memcpy(dst, loads->pdata[s], sizeof(double) * ngpus * SIM_HOST_LINKS);
      continue;
    }
    for (int g = 0; g < ngpus; g++)
      for (int k = 0; k < SIM_HOST_LINKS; k++)
        for (int l = 0; l < RF_PHASE_COUNT; l++)
          if (l == RF_PHASE_EXPORT || l == RF_PHASE_BROADCAST)
            dst[(size_t)g * SIM_HOST_LINKS + k] +=
                p->frac[s][l] * x->load[((size_t)g * SIM_HOST_LINKS + k) * RF_PHASE_COUNT + l];
  }
  g_ptr_array_free(loads, TRUE);
  return TRUE;
}

/* The software program's load: the GPU link bytes it recorded per step. */
static double sw_load(const SimProgram *p, const void *ud, int s, int g, int k) {
  (void)ud;
  double v = 0;
  for (int t = (s < 0 ? 0 : s); t < (s < 0 ? p->nsteps : s + 1); t++)
    v += p->sw_load[((size_t)t * p->sw_ngpus + g) * SIM_HOST_LINKS + k];
  return v;
}

void sw_group_scales(SimProgram *p, const SimProtos *x) {
  (void)x;
  sim_group_scales(p, p->sw_ngpus, sw_load, NULL);
}
