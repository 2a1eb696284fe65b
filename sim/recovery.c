/* Elastic recovery cost: destroy-and-recreate against ncclCommShrink (docs/elastic.md).
 *
 * Both rebuild every communicator the software holds over the surviving ranks, one after the
 * other. A recreate is a full ncclCommInitRank of the survivors; a shrink runs the same init job
 * (NCCL src/init.cc ncclCommInitChildComm -> ncclCommInitRankFunc: alloc, bootstrapSplit instead
 * of bootstrapInit, initTransportsRank) and is charged `recovery.shrink_fraction` of an init of
 * the same size. */
#include "recovery.h"

#include <math.h>
#include <string.h>

double rf_recovery_init_s(const RfCalibration *c, int nranks) {
  double n0 = c->recovery_init_small_ranks, t0 = c->recovery_init_small_s;
  double n1 = c->recovery_init_large_ranks, t1 = c->recovery_init_large_s;
  if (nranks < 1 || n0 < 1 || t0 <= 0 || n1 <= n0 || t1 <= 0) return -1;
  double b = log(t1 / t0) / log(n1 / n0);
  return t0 * pow((double)nranks / n0, b);
}

/* One communicator: its size before and after the loss, added to the totals. */
static void add_comm(RfRecovery *r, const RfCalibration *c, int before, int after) {
  r->ncomms++;
  if (before > r->ranks_before) {
    r->ranks_before = before;
    r->ranks_after = after;
  }
  if (after < c->recovery_init_small_ranks || after > c->recovery_init_large_ranks)
    r->extrapolated = TRUE;
  double t = rf_recovery_init_s(c, after);
  if (t < 0) {
    r->available = FALSE;
    return;
  }
  r->recreate_s += t;
  r->shrink_s += c->recovery_shrink_fraction * t;
}

static int alive(const RfProblem *pb, const RfSide *s, int from, int to) {
  int n = 0;
  for (int i = from; i < to; i++)
    n += !(pb->lost && pb->lost[s->ranks[i]]);
  return n;
}

void rf_recovery_cost(const RfProblem *pb, RfStrategy strategy, const RfCalibration *c,
                      RfRecovery *r) {
  memset(r, 0, sizeof *r);
  r->available = rf_recovery_init_s(c, 1) >= 0;
  int ns = pb->src.nranks, nd = pb->dst.nranks;
  int world = ns + nd, world_alive = alive(pb, &pb->src, 0, ns) + alive(pb, &pb->dst, 0, nd);
  /* NeMo RL's nccl_reshard refit: model_update_group (misc broadcast) over every rank, then one
   * group per training PP stage: that stage's training ranks and every generation rank
   * (nemo_rl/weight_sync/nccl_reshard_weight_synchronizer.py _build, steps 1 and 2; stage of
   * training rank r = r / (training ranks per stage), as there). */
  if (c->software == RF_SOFTWARE_NEMO_RL && strategy == RF_STRATEGY_HYBRID) {
    int pp = pb->src.par.pp > 0 ? pb->src.par.pp : 1, per = ns / pp;
    int gen_alive = alive(pb, &pb->dst, 0, nd);
    int most = 0;
    add_comm(r, c, world, world_alive);
    for (int s = 0; s < pp; s++) {
      int a = alive(pb, &pb->src, s * per, (s + 1) * per) + gen_alive;
      add_comm(r, c, per + nd, a);
      most = a > most ? a : most;
    }
    r->comms = g_strdup_printf("model_update_group (%d ranks) + %d PP-stage group%s (up to %d "
                               "ranks)",
                               world_alive, pp, pp > 1 ? "s" : "", most);
    return;
  }
  /* NeMo RL's gather + broadcast: model_update_group only (collective_weight_synchronizer);
   * refit's executor: one communicator over every rank (real/backends/backend_cuda.cu); NCCL M2N's
   * reshard_model_bench: one communicator over every rank. */
  add_comm(r, c, world, world_alive);
  r->comms = g_strdup_printf("%s (%d ranks)",
                             c->software == RF_SOFTWARE_NEMO_RL ? "model_update_group"
                                                                : "one world communicator",
                             world_alive);
}

void rf_recovery_clear(RfRecovery *r) {
  g_free(r->comms);
  r->comms = NULL;
}
