/* The executor's staging bound, lanes and operation bound (staging.h). */
#include "staging.h"

#include "memory.h"
#include "schedule.h"

#include <math.h>
#include <string.h>

/* Staging a rank holds at most with bound b and lanes: both directions, the network bound and,
 * pipelined, the NVLink share beside it. */
static uint64_t footprint(uint64_t b, int slots, uint64_t share) {
  return (uint64_t)slots * 2 * b * (1 + share);
}

/* A GPU's NICs at the calibrated rate, bytes/s. */
static double nic_rate(const RfTopology *t, const RfStagingCosts *c) {
  return rf_topology_nic_Bps(t) * MAX(t->nics_per_gpu, 1) *
         (c->nic_efficiency > 0 ? c->nic_efficiency : 1.0);
}

/* The bandwidth-delay rule: group_s x the NIC rate x the ratio / the lanes that move at once (a
 * group sharing the NICs with lanes - 1 others takes lanes times as long on them), to a power of
 * two MiB. */
static uint64_t bdp_bytes(const RfPlan *plan, const RfStagingCosts *c, int lanes) {
  const RfTopology *t = plan->problem ? plan->problem->topo : NULL;
  if (!t || t->nic_Gbps <= 0 || !(c->group_s > 0)) return RF_SCHEDULE_DEFAULT_STAGING_BYTES;
  const double rate = nic_rate(t, c);
  const double want = RF_STAGING_COST_RATIO * c->group_s * rate / MAX(lanes, 1);
  const double mib = exp2(round(log2(MAX(want, 1.0) / 1048576.0)));
  const uint64_t b = (uint64_t)mib << 20;
  return CLAMP(b, RF_STAGING_MIN_BYTES, RF_STAGING_MAX_BYTES);
}

/* Per rank: bytes it sends and receives over the network and over NVLink (a self-send's as
 * NVLink's: the schedule gives it NVLink room). */
typedef struct {
  double *tn, *rn, *tv, *rv; /* one block: 4 x nranks */
  int n;
} RankBytes;

static void rank_bytes(const RfPlan *plan, RankBytes *rb) {
  rb->n = plan->problem->nranks;
  rb->tn = g_new0(double, 4 * (size_t)MAX(rb->n, 1));
  rb->rn = rb->tn + rb->n, rb->tv = rb->rn + rb->n, rb->rv = rb->tv + rb->n;
  for (uint64_t m = 0; m < plan->nmsgs; m++) { /* a self-send takes NVLink room and two copies */
    const RfMessage *g = &plan->msgs[m];
    const gboolean net = g->flags & RF_XFER_NET;
    (net ? rb->tn : rb->tv)[g->src] += (double)g->bytes;
    (net ? rb->rn : rb->rv)[g->dst] += (double)g->bytes;
  }
}

/* The serial rule has what it weighs: serial costs, and a NIC and an HBM rate. */
static gboolean serial_rule_on(const RfPlan *plan, const RfStagingCosts *c) {
  const RfTopology *t = plan->problem ? plan->problem->topo : NULL;
  return t && c->serial_group_s > 0 && c->hbm_efficiency > 0 && t->nic_Gbps > 0 && t->hbm_GBps > 0;
}

/* rf_staging_serial_s on loads counted once (serial_rule_on); share 0: NVLink segments share b. */
static double serial_s(const RfPlan *plan, const RfStagingCosts *c, const RankBytes *rb,
                       uint64_t share, uint64_t b, double *nic_s) {
  const RfTopology *t = plan->problem->topo;
  const double rate = nic_rate(t, c);
  const double copy = rf_topology_copy_Bps(t, c->hbm_efficiency), B = (double)b;
  double most = 0;
  *nic_s = 0;
  for (int r = 0; r < rb->n; r++) {
    const double tx = rb->tn[r], rx = rb->rn[r], vt = rb->tv[r], vr = rb->rv[r];
    *nic_s = MAX(*nic_s, MAX(tx, rx) / rate);
    const double groups =
        share ? MAX(MAX(tx, rx) / B, MAX(vt, vr) / (B * (double)share)) : MAX(tx + vt, rx + vr) / B;
    most = MAX(most, ceil(groups) * c->serial_group_s + (tx + rx + vt + vr) / copy);
  }
  return most;
}

double rf_staging_serial_s(const RfPlan *plan, const RfStagingCosts *c, gboolean pipelined,
                           uint64_t b, double *nic_s) {
  *nic_s = 0;
  if (!serial_rule_on(plan, c)) return 0;
  RankBytes rb;
  rank_bytes(plan, &rb);
  const double s = serial_s(plan, c, &rb, pipelined ? rf_schedule_nvlink_share(plan) : 0, b, nic_s);
  g_free(rb.tn);
  return s;
}

/* Memory left for staging on the fullest inference GPU (0: unknown, no bound) after its weights
 * (x banks) and its holding: first by the plan's stage estimate (rf_memory_of_plan, cheap, which
 * holds a piece from its stage to the last stage that reads it: no less than refit run's
 * schedule); only when need bytes do not fit there, by refit run's schedule at the default bound
 * (rf_memory_of_run: a schedule build; the holding hardly depends on the bound). */
static uint64_t left_bytes(const RfMemory *m) {
  const double left = m->gpu_memory_bytes - ((double)m->peak_bytes - (double)m->staging_bytes);
  return left > 0 ? (uint64_t)(left * RF_STAGING_BUDGET_FRACTION) : 1;
}

static uint64_t budget_bytes(const RfPlan *plan, const RfStagingCosts *c, gboolean pipelined,
                             int slots, uint64_t need) {
  const int banks = MAX(c->banks, 1);
  RfMemory m; /* NCCL's buffers of every lane's communicator counted at the lanes asked for */
  rf_memory_of_plan_staging(plan, RF_SCHEDULE_DEFAULT_STAGING_BYTES, MAX(slots, 1), c->lane_comms,
                            &m);
  rf_memory_set_banks(&m, banks);
  if (!(m.gpu_memory_bytes > 0)) return 0;
  if (left_bytes(&m) >= need) return left_bytes(&m);
  RfMemoryRun run;
  rf_memory_run_init(&run);
  run.banks = banks;
  run.staged = !pipelined;
  run.lane_comms = c->lane_comms;
  run.slots = MAX(slots, 1);
  /* a pipelined schedule too large to build is counted by the plan's stages at the default
   * bound and lanes: rf_memory_of_run would count m again */
  if (!rf_memory_run_builds(plan, &run) && pipelined) return left_bytes(&m);
  RfMemory ms;
  return rf_memory_of_run(plan, &run, &ms, NULL) ? left_bytes(&ms) : left_bytes(&m);
}

uint64_t rf_staging_fitting(const RfPlan *plan, uint64_t bytes, gboolean pipelined,
                            uint64_t *nsegs) {
  uint64_t n = rf_schedule_segments(plan, bytes, pipelined);
  while (bytes < RF_STAGING_MAX_BYTES && n > RF_STAGING_MAX_SEGMENTS)
    n = rf_schedule_segments(plan, bytes *= 2, pipelined);
  if (nsegs) *nsegs = n;
  return bytes;
}

void rf_staging_choose(const RfPlan *plan, const RfStagingCosts *c, gboolean pipelined,
                       uint64_t staging_bytes, int slots, int max_ops, RfStaging *out) {
  memset(out, 0, sizeof *out);
  out->chose_staging = staging_bytes == 0;
  out->chose_slots = slots == 0;
  out->chose_ops = max_ops == RF_SCHEDULE_AUTO_OPS;
  out->lane_comms = c->lane_comms;
  out->max_ops = out->chose_ops ? rf_schedule_max_ops(plan, pipelined) : max_ops;
  out->slots = !out->chose_slots ? slots
               : c->lane_comms   ? RF_STAGING_LANES_CONCURRENT
                                 : RF_STAGING_LANES;
  const int moving = c->lane_comms ? out->slots : 1; /* groups of a rank moving at once */
  out->staging_bytes = out->chose_staging ? bdp_bytes(plan, c, moving) : staging_bytes;
  const uint64_t share = pipelined ? rf_schedule_nvlink_share(plan) : 0;
  const RfTopology *t = plan->problem ? plan->problem->topo : NULL;
  if (out->chose_staging && (!t || t->nic_Gbps <= 0 || !(c->group_s > 0)))
    g_strlcpy(out->why, "the default: no NIC rate or per-group cost to weigh", sizeof out->why);
  else if (out->chose_staging)
    g_snprintf(out->why, sizeof out->why,
               "a group's fixed cost %.3g us = 1/%.0f of its time on the NICs%s", c->group_s * 1e6,
               RF_STAGING_COST_RATIO,
               moving > 1 ? ", beside the other lanes' groups moving at once" : "");
  else
    g_strlcpy(out->why, "given", sizeof out->why);
  /* no smaller than the bound at which the busiest rank's serial work fits in its NIC time */
  if (out->chose_staging && serial_rule_on(plan, c)) {
    RankBytes rb;
    rank_bytes(plan, &rb);
    double nic = 0, s = serial_s(plan, c, &rb, share, out->staging_bytes, &nic);
    const uint64_t from = out->staging_bytes;
    /* while doubling saves more than 1 / RF_STAGING_COST_RATIO of it: a rank of one group, or
     * whose copies alone outlast its NIC, gains little from a larger bound and pays its staging */
    while (nic > 0 && s > nic && out->staging_bytes < RF_STAGING_MAX_BYTES) {
      const double next = serial_s(plan, c, &rb, share, 2 * out->staging_bytes, &nic);
      if (next > s * (1 - 1 / RF_STAGING_COST_RATIO)) break;
      out->staging_bytes *= 2;
      s = next;
    }
    g_free(rb.tn);
    if (out->staging_bytes != from)
      g_snprintf(out->why, sizeof out->why,
                 "raised from %.3g MiB: there a rank's serial work (its groups' fixed costs, "
                 "%.3g us each, and copies) outlasts its NIC time",
                 (double)from / 1048576.0, c->serial_group_s * 1e6);
  }
  /* no smaller than the bound whose schedule every rank builds within RF_STAGING_MAX_SEGMENTS
   * (rf_schedule_build refuses above RF_SCHEDULE_MAX_SEGMENTS; below it, each rank's process
   * holds the whole schedule: 64 M segments, 2.6 GB) */
  const uint64_t fits = out->chose_staging
                            ? rf_staging_fitting(plan, out->staging_bytes, pipelined, NULL)
                            : out->staging_bytes;
  uint64_t floor_bytes = RF_STAGING_MIN_BYTES; /* what a memory cut leaves at least */
  if (fits != out->staging_bytes) {
    out->staging_bytes = floor_bytes = fits;
    g_snprintf(out->why, sizeof out->why,
               "raised: the smallest power of two MiB whose schedule has at most %" G_GUINT64_FORMAT
               " segments",
               (guint64)RF_STAGING_MAX_SEGMENTS);
  }
  if (!out->chose_staging && !out->chose_slots) return;
  out->budget_bytes = budget_bytes(plan, c, pipelined, out->slots,
                                   footprint(out->staging_bytes, out->slots, share));
  if (!out->budget_bytes) return;
  if (out->budget_bytes == 1) { /* weights and holding alone exceed the GPU: cutting cannot help */
    g_strlcat(out->why, "; not cut: the weights and holding alone exceed the GPU", sizeof out->why);
    return;
  }
  gboolean cut = FALSE;
  while (out->chose_slots && out->slots > RF_STAGING_LANES &&
         footprint(out->staging_bytes, out->slots, share) > out->budget_bytes) {
    out->slots = MAX(out->slots / 2, RF_STAGING_LANES);
    cut = TRUE;
  }
  /* never below the bound the segment rule raised it to (a cut that refit run would build as
   * more than RF_STAGING_MAX_SEGMENTS segments): then fewer lanes, below */
  while (out->chose_staging && out->staging_bytes > floor_bytes &&
         footprint(out->staging_bytes, out->slots, share) > out->budget_bytes) {
    out->staging_bytes /= 2;
    cut = TRUE;
  }
  if (out->chose_slots && out->slots > 1 &&
      footprint(out->staging_bytes, out->slots, share) > out->budget_bytes) {
    out->slots = 1;
    cut = TRUE;
  }
  if (cut && out->chose_staging)
    g_snprintf(out->why, sizeof out->why, "cut to the %.2f GB of staging the memory left allows",
               (double)out->budget_bytes / 1e9);
}

char *rf_staging_describe(const RfStaging *st) {
  return g_strdup_printf(
      "staging %.6g MiB per rank, direction and lane (%s%s), %d lane%s (%s), max ops per group "
      "%d (%s)",
      (double)st->staging_bytes / 1048576.0, st->chose_staging ? "chosen: " : "", st->why,
      st->slots, st->slots == 1 ? "" : "s", st->chose_slots ? "chosen" : "given", st->max_ops,
      st->chose_ops ? "from the topology" : "given");
}
