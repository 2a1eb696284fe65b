/* The reshard calls of a software model summed per training PP stage (the unit both published
 * models time: one communicator per stage in NeMo RL, one layer after another in NCCL M2N's
 * bench), then turned into the program's steps and flows, with the per-step GPU link loads that
 * the group factors need. */
#include "sw.h"

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

/* Copy-engine strided copy rate for rows of `row` bytes: the device copy rate times
 * row / (row + ce_row_half_bytes). */
static double ce_Bps(const RfProblem *pb, const RfCalibration *cal, double row) {
  double r = rf_topology_copy_Bps(pb->topo, cal->hbm_efficiency);
  if (cal->ce_row_half_bytes > 0 && row > 0) r *= row / (row + cal->ce_row_half_bytes);
  return r;
}

SwTransport sw_transport(RfSwVariant v) {
  return v == RF_VARIANT_PYTHON_FALLBACK                        ? SW_PYTHON_FALLBACK
         : v == RF_VARIANT_XFER_V01 || v == RF_VARIANT_RING_V01 ? SW_M2N_RING_V01
         : v == RF_VARIANT_DIRECT                               ? SW_M2N_DIRECT
         : v == RF_VARIANT_GOLDEN                               ? SW_GOLDEN
                                                                : SW_M2N_PACK;
}

SwStage *sw_stages_new(int pp) {
  SwStage *stages = g_new0(SwStage, pp);
  for (int s = 0; s < pp; s++) {
    stages[s].agg = g_array_new(FALSE, FALSE, sizeof(FAgg));
    stages[s].index = g_hash_table_new_full(fkey_hash, fkey_equal, g_free, NULL);
  }
  return stages;
}

void sw_stages_free(SwStage *stages, int pp) {
  if (!stages) return;
  for (int s = 0; s < pp; s++) {
    g_array_free(stages[s].agg, TRUE);
    g_hash_table_destroy(stages[s].index);
  }
  g_free(stages);
}

static void stage_add_call(SwStage *st, const SwCall *c, const RfProblem *pb,
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
  double rate =
      ce ? ce_Bps(pb, cal, c->ce_row_bytes) : rf_topology_copy_Bps(pb->topo, cal->hbm_efficiency);
  for (int g = 0; g < ngpus; g++) {
    if (c->pre_bytes[g] / rate > pre) pre = c->pre_bytes[g] / rate;
    if (c->post_bytes[g] / rate > post) post = c->post_bytes[g] / rate;
  }
  st->ce_pre_s += pre;
  st->ce_post_s += post;
}

gboolean sw_stages_add_calls(SwStage *stages, const int *slot, const SimProtos *x,
                             const RfCalibration *cal, SwTransport tr, gboolean every_part,
                             double call_host_s, SwCallCosts after, GError **error) {
  const RfProblem *pb = x->plan->problem;
  const int ngpus = x->ngpus;
  gboolean ok = TRUE;
  SwCall c;
  sw_call_init(&c, ngpus);
  for (uint32_t i = 0; i < pb->model->nparts; i++) {
    const RfTensor *t = &pb->model->tensors[pb->model->parts[i].tensor];
    if (!pb->src.place[i].mesh || !pb->dst.place[i].mesh) continue;
    if (!every_part && !rf_tensor_in_reshard_set(t)) continue;
    memset(c.pre_bytes, 0, sizeof(double) * (ngpus > 0 ? ngpus : 1));
    memset(c.post_bytes, 0, sizeof(double) * (ngpus > 0 ? ngpus : 1));
    if (!sw_call_build(pb, cal, tr, i, &c, error)) {
      ok = FALSE;
      break;
    }
    SwStage *st = &stages[slot ? slot[i] : sw_part_stage(pb, i)];
    c.host_s += call_host_s;
    /* the torch copies around the call (stack, copy-back) at the device copy rate; the
     * copy-engine pack / unpack of PACK at the row rate */
    stage_add_call(st, &c, pb, cal, ngpus, tr == SW_M2N_PACK);
    if (after) after(st, pb, cal, i, ngpus);
  }
  sw_call_clear(&c);
  return ok;
}

/* Per-step GPU link loads, for the group factors. */
static double *step_load(SimProgram *p, GPtrArray *loads, int step) {
  while ((int)loads->len <= step)
    g_ptr_array_add(loads, NULL);
  if (!loads->pdata[step]) loads->pdata[step] = g_new0(double, (size_t)p->sw_ngpus *SIM_HOST_LINKS);
  return loads->pdata[step];
}

static void emit_stage_flows(SimProgram *p, const SwStage *st, int sub, int step,
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
    SimFlow f = {s, d, a->k.phase, 0, 0, (uint32_t)step, a->bytes * w, a->k.offset_s, 0, w};
    g_array_append_val(p->flows, f);
    g_hash_table_insert(idx, g_memdup2(&hk, sizeof hk), GUINT_TO_POINTER(p->flows->len - first));
  }
}

static const char *sub_name(SwTransport tr, int sub) {
  if (tr == SW_PYTHON_FALLBACK) return sub == 0 ? "p2p" : "allgather";
  if (tr == SW_M2N_PACK) return sub == 0 ? "put" : "forward";
  if (tr == SW_GOLDEN) return "broadcast";
  return "transfer";
}

void sw_stages_emit(SimProgram *p, const SwStage *stages, int pp, int lanes, SwTransport tr,
                    gboolean host_ahead, const int *slot_host, GPtrArray *loads, double *software_s,
                    double *calls) {
  for (int s = 0; s < pp; s++) {
    const SwStage *st = &stages[s];
    if (st->calls <= 0) continue;
    *calls += st->calls;
    int lane = s % lanes, nsub = st->nsub > 0 ? st->nsub : 1;
    double host = host_ahead ? st->host_s : 0;
    double pre = st->host_s - host + st->latency_s + st->ce_pre_s, post = st->ce_post_s;
    *software_s += pre + post + host;
    for (int k = 0; k < nsub; k++) {
      char name[32];
      g_snprintf(name, sizeof name, "stream%d stage%d.%s%d", lane, s, sub_name(tr, k), k);
      int step = sim_add_step(p, lane, name, k == 0 ? pre : 0, k == nsub - 1 ? post : 0);
      /* one step per sub-step: the host issues the whole stage, spread over its sub-steps */
      p->steps[step].host_s = host / nsub;
      emit_stage_flows(p, st, k, step, slot_host, loads);
    }
  }
}

void sw_groups_emit(SimProgram *p, const SwStage *stages, int ngroups, int lanes, SwTransport tr,
                    const int *slot_host, GPtrArray *loads, double *software_s, double *calls) {
  for (int g = 0; g < ngroups; g++) {
    const SwStage *grp = stages + (size_t)g * lanes;
    double host = 0;
    for (int q = 0; q < lanes; q++)
      host += grp[q].host_s;
    int first = -1;
    for (int q = 0; q < lanes; q++) {
      const SwStage *st = &grp[q];
      if (st->calls <= 0) continue;
      *calls += st->calls;
      int nsub = st->nsub > 0 ? st->nsub : 1;
      /* the lane's GPU work starts once the host has issued its first call */
      double first_host = st->host_s / st->calls;
      double pre = first_host + st->latency_s + st->ce_pre_s, post = st->ce_post_s;
      *software_s += pre - first_host + post;
      for (int k = 0; k < nsub; k++) {
        char name[32];
        g_snprintf(name, sizeof name, "group%d pair%d.%s%d", g, q, sub_name(tr, k), k);
        int step = sim_add_step(p, q, name, k == 0 ? pre : 0, k == nsub - 1 ? post : 0);
        if (first < 0) {
          first = step;
          p->steps[step].join = TRUE; /* after every stream of the previous group */
          p->steps[step].host_s = host;
        }
        emit_stage_flows(p, st, k, step, slot_host, loads);
      }
    }
    *software_s += host;
  }
}

void sw_loads_finish(SimProgram *p, const SimProtos *x, GPtrArray *loads) {
  const int ngpus = p->sw_ngpus;
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
}

/* The software program's load: the GPU link bytes it recorded per step. */
static double sw_load(const SimProgram *p, const void *ud, int s, int g, int k) {
  (void)ud;
  double v = 0;
  for (int t = (s < 0 ? 0 : s); t < (s < 0 ? p->nsteps : s + 1); t++)
    v += p->sw_load[((size_t)t * p->sw_ngpus + g) * SIM_HOST_LINKS + k];
  return v;
}

void sw_group_scales(SimProgram *p) {
  sim_group_scales(p, p->sw_ngpus, sw_load, NULL);
}
