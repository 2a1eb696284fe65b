#include "advise.h"
#include "error.h"

#include <string.h>

static const char *const PLACE_NAMES[RF_PLACE_COUNT] = {"split", "interleaved"};

const char *rf_placement_kind_name(RfPlacementKind k) {
  return k < RF_PLACE_COUNT ? PLACE_NAMES[k] : "?";
}

gboolean rf_placement_kind_parse(const char *s, RfPlacementKind *out, GError **error) {
  for (int i = 0; i < RF_PLACE_COUNT; i++)
    if (!strcmp(s, PLACE_NAMES[i])) {
      *out = (RfPlacementKind)i;
      return TRUE;
    }
  g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "unknown placement '%s' (split or interleaved)", s);
  return FALSE;
}

void rf_problem_interleave(RfProblem *pb) {
  int D = pb->topo->gpus_per_domain, maxdom = 0;
  for (int r = 0; r < pb->nranks; r++)
    if (pb->gpu[r] >= 0 && pb->gpu[r] / D > maxdom) maxdom = pb->gpu[r] / D;
  /* which side owns each domain (the split placement never mixes them) */
  int *side = g_new0(int, maxdom + 1), *newdom = g_new(int, maxdom + 1);
  for (int i = 0; i < pb->src.nranks; i++)
    side[pb->gpu[pb->src.ranks[i]] / D] = 1;
  for (int i = 0; i < pb->dst.nranks; i++)
    side[pb->gpu[pb->dst.ranks[i]] / D] = 2;
  int nt = 0, ni = 0;
  for (int d = 0; d <= maxdom; d++)
    nt += side[d] == 1, ni += side[d] == 2;
  int kt = 0, ki = 0;
  for (int d = 0; d <= maxdom; d++) {
    if (side[d] == 1) {
      newdom[d] = kt < ni ? 2 * kt : ni + kt;
      kt++;
    } else if (side[d] == 2) {
      newdom[d] = ki < nt ? 2 * ki + 1 : nt + ki;
      ki++;
    } else {
      newdom[d] = d;
    }
  }
  for (int r = 0; r < pb->nranks; r++)
    if (pb->gpu[r] >= 0) pb->gpu[r] = newdom[pb->gpu[r] / D] * D + pb->gpu[r] % D;
  char *n = g_strdup_printf("%s; interleaved: %d training and %d inference domains alternate",
                            pb->placement_note ? pb->placement_note : "", nt, ni);
  g_free(pb->placement_note);
  pb->placement_note = n;
  g_free(side);
  g_free(newdom);
}

GPtrArray *rf_advise_layouts(const RfModel *m, int ngpus, const int *tps, int ntps,
                             gboolean with_ep, gboolean without_ep) {
  GPtrArray *out = g_ptr_array_new_with_free_func(g_free);
  for (int i = 0; i < (tps ? ntps : ngpus); i++) {
    int t = tps ? tps[i] : i + 1;
    if (t < 1 || ngpus % t) continue;
    if (without_ep || m->arch.experts <= 0)
      g_ptr_array_add(out, g_strdup_printf("TP%dxDP%d", t, ngpus / t));
    if (with_ep && m->arch.experts > 0 && ngpus > 1)
      g_ptr_array_add(out, g_strdup_printf("TP%dxDP%dxEP%d", t, ngpus / t, ngpus));
  }
  return out;
}

GPtrArray *rf_advise_sglang_layouts(const RfModel *m, int ngpus, const int *tps, int ntps,
                                    gboolean with_ep, gboolean without_ep, gboolean plain) {
  GPtrArray *out = g_ptr_array_new_with_free_func(g_free);
  gboolean moe = m->arch.experts > 0;
  for (int i = 0; i < (tps ? ntps : ngpus); i++) {
    int t = tps ? tps[i] : i + 1;
    if (t < 1 || ngpus % t) continue;
    /* EP of 1 or t, ADP of 1 or t; t == 1 has only the plain engine */
    for (int ep = 0; ep < 2; ep++)
      for (int adp = 0; adp < 2; adp++) {
        gboolean has_ep = ep && moe && t > 1, has_adp = adp && t > 1;
        if ((ep && !has_ep) || (adp && !has_adp)) continue;
        if (moe && !(has_ep ? with_ep : without_ep)) continue;
        /* vLLM searched too: its TPxDP places plain engines alike, its EP (= TP x DP) one
         * engine's EP (= TP) alike */
        if (!plain && !has_adp && (!has_ep || ngpus == t)) continue;
        GString *s = g_string_new(NULL);
        g_string_printf(s, "TP%dxDP%d", t, ngpus / t);
        if (has_ep) g_string_append_printf(s, "xEP%d", t);
        if (has_adp) g_string_append_printf(s, "xADP%d", t);
        g_ptr_array_add(out, g_string_free(s, FALSE));
      }
  }
  return out;
}

int rf_advise_tp_domains(int tp, int domain_gpus) {
  if (domain_gpus < 1 || tp <= domain_gpus) return 1;
  return (tp + domain_gpus - 1) / domain_gpus;
}

gboolean rf_advise_layout_check_fw(const RfModel *m, RfInferFramework fw, const RfParallel *p,
                                   int ngpus, GError **error) {
  if (fw != RF_INFER_SGLANG) return rf_advise_layout_check(m, p->tp, ngpus, p->ep_given, error);
  int adp = p->adp > 0 ? p->adp : 1;
  if (p->tp % adp) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "SGLang: ADP%d does not divide TP%d", adp, p->tp);
    return FALSE;
  }
  if (!rf_advise_layout_check(m, p->tp / adp, ngpus, FALSE, error)) {
    if (adp > 1) g_prefix_error(error, "SGLang attention TP (TP%d / ADP%d): ", p->tp, adp);
    return FALSE;
  }
  if (p->ep > 1 && m->arch.experts > 0 && m->arch.experts % p->ep) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "EP%d (SGLang) does not divide %lld routed experts", p->ep,
                (long long)m->arch.experts);
    return FALSE;
  }
  return TRUE;
}

gboolean rf_advise_layout_check(const RfModel *m, int tp, int ngpus, gboolean ep, GError **error) {
  const RfArch *a = &m->arch;
  const struct {
    int64_t n;
    const char *what;
  } heads[] = {{a->heads, "attention heads"},
               {a->lin_heads, "linear-attention heads"},
               {a->lin_kv_heads, "linear-attention key heads"},
               {a->mamba_heads, "Mamba heads"}};
  for (size_t i = 0; i < G_N_ELEMENTS(heads); i++)
    if (heads[i].n > 0 && heads[i].n % tp) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "TP%d does not divide %lld %s", tp,
                  (long long)heads[i].n, heads[i].what);
      return FALSE;
    }
  if (ep && a->experts > 0 && a->experts % ngpus) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "EP%d (vLLM: TP x DP) does not divide %lld routed experts", ngpus,
                (long long)a->experts);
    return FALSE;
  }
  return TRUE;
}

void rf_bound_rates_peak(RfBoundRates *r) {
  memset(r, 0, sizeof *r);
  r->nic = r->nvlink = 1.0;
  for (int p = 0; p < RF_PHASE_COUNT; p++)
    r->phase_net[p] = 1.0;
}

double rf_plan_fabric_bound(const RfPlan *plan, const RfBoundRates *rates,
                            gboolean hybrid_sequential, const char **what) {
  RfBoundRates peak;
  if (!rates) {
    rf_bound_rates_peak(&peak);
    rates = &peak;
  }
  const RfProblem *pb = plan->problem;
  const RfTopology *t = pb->topo;
  int ngpu = 0;
  for (int r = 0; r < pb->nranks; r++)
    if (pb->gpu[r] + 1 > ngpu) ngpu = pb->gpu[r] + 1;
  double nic1 = t->nic_Gbps * 1e9 / 8.0 * rates->nic, pcie = t->pcie_GBps * 1e9;
  double nic_Bps = t->nics_per_gpu * (pcie > 0 && pcie < nic1 ? pcie : nic1);
  double nvl_Bps = t->nvlink_GBps * 1e9 * rates->nvlink;
  /* per GPU: NIC tx, NIC rx, NVLink tx, NVLink rx */
  double *b = g_new0(double, 4 * (size_t)(ngpu > 0 ? ngpu : 1));
  int D = t->gpus_per_domain, L = t->gpus_per_leaf > 0 ? t->gpus_per_leaf : 1;
  gboolean leaves = t->oversubscription > 1.0;
  int nleaf = leaves ? ngpu + 1 : 1;
  double *up = g_new0(double, nleaf), *down = g_new0(double, nleaf);
  for (uint64_t i = 0; i < plan->nmsgs; i++) {
    const RfMessage *m = &plan->msgs[i];
    int s = pb->gpu[m->src], d = pb->gpu[m->dst];
    if (s == d) continue;
    if (s / D != d / D) {
      double f = m->phase < RF_PHASE_COUNT ? MIN(1.0, rates->phase_net[m->phase]) : 1.0;
      double bytes = (double)m->bytes * f;
      b[4 * s] += bytes;
      b[4 * d + 1] += bytes;
      if (leaves) {
        int ls = t->fabric == RF_FABRIC_RAIL_OPTIMIZED ? (s % D) + D * ((s / D) / L) : s / L;
        int ld = t->fabric == RF_FABRIC_RAIL_OPTIMIZED ? (d % D) + D * ((d / D) / L) : d / L;
        if (ls != ld) {
          up[ls] += bytes;
          down[ld] += bytes;
        }
      }
    } else {
      b[4 * s + 2] += m->bytes;
      b[4 * d + 3] += m->bytes;
    }
  }
  double best = plan->stats.lower_bound_s; /* transfers alone; fixed_s is added at the end */
  *what = "NIC";
  for (int g = 0; g < ngpu; g++) {
    double nic = MAX(b[4 * g], b[4 * g + 1]) / nic_Bps;
    double nvl = MAX(b[4 * g + 2], b[4 * g + 3]) / nvl_Bps;
    if (nic > best) best = nic, *what = "NIC";
    if (nvl > best) best = nvl, *what = "NVLink";
  }
  double leaf_Bps = L * nic_Bps / t->oversubscription;
  for (int l = 0; leaves && l < nleaf; l++) {
    double x = MAX(up[l], down[l]) / leaf_Bps;
    if (x > best) best = x, *what = "leaf";
  }
  if (hybrid_sequential && plan->strategy == RF_STRATEGY_HYBRID) {
    /* each part alone needs its busiest NIC; one part runs after the other */
    const RfPlanStats *st = &plan->stats;
    double ph[RF_PHASE_COUNT];
    for (int p = 0; p < RF_PHASE_COUNT; p++)
      ph[p] = (double)st->phase_max_nic_bytes[p] * MIN(1.0, rates->phase_net[p]);
    double gb = MAX(ph[RF_PHASE_EXPORT], ph[RF_PHASE_BROADCAST]);
    double m2n = MAX(ph[RF_PHASE_INJECT], MAX(ph[RF_PHASE_FORWARD], ph[RF_PHASE_FANOUT]));
    double seq = (gb + m2n) / nic_Bps;
    if (seq > best) best = seq, *what = "NIC, m2n then gather-broadcast";
  }
  g_free(b);
  g_free(up);
  g_free(down);
  return best + rates->fixed_s;
}
