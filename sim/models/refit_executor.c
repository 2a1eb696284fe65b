/* refit's own executor as a flow program (`refit sim --software refit --software-variant
 * executor`): the schedule of model/plan/schedule.h, the one real/ runs, round by round.
 *
 * Every rank runs its program (rf_schedule_rank_program), one SimGrid actor per rank on its GPU's
 * host, exactly as real/ issues it:
 * - PACK r: the rank's copy stream packs the bytes it sends in round r at the device copy rate
 *   (topology HBM x `efficiency.hbm`) after a kernel launch (`executor.kernel_launch_s`): the
 *   actor sleeps, its groups in flight keep moving;
 * - POST r: the host posts the group (`executor.group_host_s`, NCCL's calls, plus the event
 *   records and stream wait of [executor], exec_post_s), then one asynchronous send per
 *   destination rank and phase (the segments it takes there in the round, together: below) and
 *   the receives of the round (a mailbox per rank and round, so a round matches only its own
 *   messages). The groups of a rank run one after another, as
 *   NCCL groups on real/'s one communication stream do: round r's transfers start when the
 *   rank's rounds before it are done; the copies of other lanes overlap them. With a
 *   communicator and stream per lane (refit run --lane-comms, cal->exec_lane_comms) the groups of
 *   different lanes run at once: round r's transfers start when it is posted (its lane's group
 *   before it was waited before the lane was packed again), sharing the links with the groups of
 *   the other lanes still in flight;
 * - WAIT r: until the round's sends and receives are done;
 * - UNPACK r: a stream wait on the group (`executor.stream_wait_s`), a kernel launch and the copy
 *   of the bytes it received, at the device copy rate.
 * A self-send (source rank = destination rank) is a pack and an unpack, no transfer.
 *
 * That is the exact model (group 1), run by sim/events.c (the default) or SimGrid's actors
 * (engine.c). On SimGrid its cost is SimGrid's: a message's start and end re-solve
 * the sharing of the messages whose links it shares (the lazy max-min update with a link of its
 * own per route pair, sim/engine.c; the full update, REFIT_SIM_REFERENCE=1, re-solves all
 * messages in flight and gives the same times to SimGrid's precision; a coarse platform, below,
 * runs the full update: faster there), so it grows with ranks x
 * messages (DeepSeek-V3 on 512 GB200 ranks: 441 k messages, docs/sim.md Speed). A coarse platform
 * (group g > 1, g GPUs of a domain per simulated host) runs one actor per host: the union of its
 * ranks' programs, the ranks of a host taking each round together (coupled: a round waits for the
 * slowest of them), the sends of each rank pair one message; on the four reported configurations
 * the coarse model of 8 GPUs per host comes within 1.1% of the exact one,
 * experiments/executor_scale.py: two errors of 4-5% cancelling, the pooled host links faster and
 * the coupled rounds slower, docs/sim.md). `refit sim --engine simgrid` picks it
 * above SIM_EXEC_EXACT_RANKS ranks (sim/executor.c); the events engine (sim/events.c, the default)
 * runs these programs exact at every size, a coarse one only with --group. The steps (one per
 * round, on its lane) and their flows only name the rounds for the timeline and give the platform
 * its routes; the actors do not use them. */
#include "bigmem.h"
#include "error.h"
#include "memory.h"
#include "schedule.h"
#include "sim.h"
#include "sort.h"
#include "staging.h"
#include "sw.h"
#include "u64map.h"

#include <string.h>

/* (source, destination, phase) as a non-zero key of an RfU64Map (model/base/u64map.h: emptied
 * once per round in the time of what it holds; a GHashTable with a key allocated per entry cost
 * more than the rest of the program's build). */
static uint64_t xmap_key(int src, int dst, int phase) {
  return (uint64_t)(uint32_t)(src + 1) << 36 | (uint64_t)(uint32_t)(dst + 1) << 8 |
         (uint64_t)(uint8_t)phase;
}

/* One round's segments: (message, bytes) in the order of the schedule. */
typedef struct {
  uint64_t msg;
  uint64_t bytes;
  int dep; /* pipelined: the round the sender must have unpacked first (-1: none) */
} Seg;

/* The (rank, round) key of a round a rank takes part in, in the order of the pair. */
static uint64_t rkey(int rank, int round) {
  return (uint64_t)(uint32_t)rank << 32 | (uint32_t)round;
}

/* Index of (unit, round) in rounds, whose units start at first[] (the pair is there). */
static uint64_t unit_round(const uint64_t *first, const SimExecRound *rounds, int unit, int round) {
  uint64_t lo = first[unit], hi = first[unit + 1];
  while (hi - lo > 1) {
    uint64_t mid = (lo + hi) / 2;
    if (rounds[mid].round <= round)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

/* unit_round for the rounds of each unit asked in ascending order (the pair is there): cur[unit],
 * from first[unit], only moves on (no search per segment). */
static uint64_t unit_round_next(uint64_t *cur, const SimExecRound *rounds, int unit, int round) {
  while (rounds[cur[unit]].round < round)
    cur[unit]++;
  return cur[unit];
}

/* The (unit, round) pairs of keys[0 .. nk) (rkey), sorted and unique, as rounds indexed by unit
 * (first[u] .. first[u + 1]); sorts keys in place. */
static void index_rounds(uint64_t *keys, uint64_t nk, int nunits, int step0, uint64_t **first,
                         SimExecRound **rounds) {
  {
    g_autofree uint64_t *tmp = RF_BIG_NEW(uint64_t, nk ? nk : 1); /* huge pages: bigmem.h */
    rf_radix_sort(keys, tmp, nk, NULL, FALSE);
  }
  uint64_t nu = 0;
  for (uint64_t i = 0; i < nk; i++)
    if (!nu || keys[nu - 1] != keys[i]) keys[nu++] = keys[i];
  *first = g_new0(uint64_t, (size_t)nunits + 1);
  *rounds = g_new0(SimExecRound, nu + 1);
  for (uint64_t i = 0; i < nu; i++) {
    const int round = (int)(uint32_t)keys[i];
    (*first)[(keys[i] >> 32) + 1]++;
    (*rounds)[i].round = round;
    (*rounds)[i].step = step0 + round;
    (*rounds)[i].need = -1;
  }
  for (int u = 0; u < nunits; u++)
    (*first)[u + 1] += (*first)[u];
}

/* The actors' rounds, sends and programs. An actor runs one rank (group 1: exact), or, on a
 * coarser platform, every rank of one simulated host together (a "unit"): the union of their
 * rounds, each round's copies as long as its longest (the GPUs copy at once, each on its own
 * engine), the latest need, and the sends of its ranks, one per (source rank, destination rank)
 * and phase as on the exact platform, to the destination's host (host links are the sum of their
 * GPUs', scaled in sw_exec_build so that none is faster than its busiest GPU over the run). Each
 * GPU pair's message thus keeps its own share of the links under max-min sharing: one send per
 * host pair carrying all its ranks' bytes took one share for all of them and made the coarse
 * model 1.8-7.6% slower than the exact one for m2n (-1.1 to +0.2% with a send per rank pair; m2n
 * and p2p within 1.1%, docs/sim.md "refit's executor at scale"). */
static SimExec *exec_build(const RfSchedule *s, const RfPlan *plan, const Seg *segs,
                           const uint64_t *first, const int *slot_host, int group, int nhosts,
                           double copy_Bps, double launch_s, int step0) {
  const RfProblem *pb = plan->problem;
  SimExec *e = g_new0(SimExec, 1);
  const gboolean units = group > 1;
  e->nranks = units ? nhosts : pb->nranks;
  e->launch_s = launch_s;
  e->host = g_new(int, e->nranks);
  g_autofree int *unit = g_new(int, pb->nranks);
  for (int r = 0; r < pb->nranks; r++)
    unit[r] = !units ? r : pb->gpu[r] >= 0 ? slot_host[pb->gpu[r] / group] : -1;
  for (int u = 0; u < e->nranks; u++)
    e->host[u] = units ? u : pb->gpu[u] >= 0 ? slot_host[pb->gpu[u] / group] : -1;
  /* 1. the (rank, round) pairs and each rank's copies and needs */
  g_autofree uint64_t *keys = RF_BIG_NEW(uint64_t, 2 * s->nsegs + 1);
  uint64_t nk = 0;
  for (int r = 0; r < s->nrounds; r++)
    for (uint64_t i = first[r]; i < first[r + 1]; i++) {
      const RfMessage *m = &plan->msgs[segs[i].msg];
      keys[nk++] = rkey(m->src, r);
      if (m->dst != m->src) keys[nk++] = rkey(m->dst, r);
    }
  uint64_t *rfirst;
  SimExecRound *rr;
  index_rounds(keys, nk, pb->nranks, step0, &rfirst, &rr);
  g_autofree uint64_t *cur = g_memdup2(rfirst, sizeof(uint64_t) * ((size_t)pb->nranks + 1));
  for (int r = 0; r < s->nrounds; r++)
    for (uint64_t i = first[r]; i < first[r + 1]; i++) {
      const RfMessage *m = &plan->msgs[segs[i].msg];
      SimExecRound *a = &rr[unit_round_next(cur, rr, m->src, r)];
      SimExecRound *b = &rr[unit_round_next(cur, rr, m->dst, r)];
      a->pack_s += (double)segs[i].bytes / copy_Bps;
      a->need = MAX(a->need, segs[i].dep);
      b->unpack_s += (double)segs[i].bytes / copy_Bps;
    }
  if (!units) {
    e->round_first = rfirst;
    e->rounds = rr;
  } else { /* the units' rounds: the longest copy and the latest need of their ranks' */
    nk = 0;
    for (int r = 0; r < pb->nranks; r++)
      for (uint64_t i = rfirst[r]; i < rfirst[r + 1]; i++) /* a rank without a GPU: none */
        keys[nk++] = rkey(unit[r], rr[i].round);
    index_rounds(keys, nk, e->nranks, step0, &e->round_first, &e->rounds);
    for (int r = 0; r < pb->nranks; r++)
      for (uint64_t i = rfirst[r]; i < rfirst[r + 1]; i++) {
        SimExecRound *u = &e->rounds[unit_round(e->round_first, e->rounds, unit[r], rr[i].round)];
        u->pack_s = MAX(u->pack_s, rr[i].pack_s);
        u->unpack_s = MAX(u->unpack_s, rr[i].unpack_s);
        u->need = MAX(u->need, rr[i].need);
      }
    g_free(rfirst);
    g_free(rr);
  }
  g_clear_pointer(&keys, g_free); /* two per segment: freed before the sends take room */
  /* 2. receives and the send counts, then the sends. The segments one rank sends another in
   * one round (of one phase) travel as one simulated message: NCCL runs the operations to one
   * peer in order on that peer's channels (p2pnChannelsPerPeer, init.cc), so they take one
   * share of a NIC beside the other peers' traffic, not one share each. */
  RfU64Map pair;
  rf_u64map_init(&pair, 1024, TRUE);
  g_free(cur);
  cur = g_memdup2(e->round_first, sizeof(uint64_t) * ((size_t)e->nranks + 1));
  for (int r = 0; r < s->nrounds; r++) {
    rf_u64map_reset(&pair);
    for (uint64_t i = first[r]; i < first[r + 1]; i++) {
      const RfMessage *m = &plan->msgs[segs[i].msg];
      if (m->dst == m->src) continue;
      const int su = unit[m->src], du = unit[m->dst];
      const uint64_t k = xmap_key(m->src, m->dst, m->phase);
      if (rf_u64map_get(&pair, k, 0)) continue;
      rf_u64map_set(&pair, k, 1);
      e->rounds[unit_round_next(cur, e->rounds, su, r)].nsend++;
      e->rounds[unit_round_next(cur, e->rounds, du, r)].nrecv++;
    }
  }
  uint64_t ns = 0, nu = e->round_first[e->nranks];
  for (uint64_t i = 0; i < nu; i++) {
    e->rounds[i].send_first = (uint32_t)ns;
    ns += e->rounds[i].nsend;
    e->rounds[i].nsend = 0;
  }
  e->sends = RF_BIG_NEW(SimExecSend, ns + 1);
  RfU64Map *at = &pair; /* the send of each pair and phase in the round */
  memcpy(cur, e->round_first, sizeof(uint64_t) * ((size_t)e->nranks + 1));
  for (int r = 0; r < s->nrounds; r++) {
    rf_u64map_reset(at);
    for (uint64_t i = first[r]; i < first[r + 1]; i++) {
      const RfMessage *m = &plan->msgs[segs[i].msg];
      if (m->dst == m->src) continue;
      const int su = unit[m->src], du = unit[m->dst];
      const uint64_t k = xmap_key(m->src, m->dst, m->phase);
      const uint32_t pos = (uint32_t)rf_u64map_get(at, k, 0);
      if (pos) { /* the send of this pair and phase in this round: one more segment */
        e->sends[pos - 1].bytes += (double)segs[i].bytes;
        continue;
      }
      SimExecRound *a = &e->rounds[unit_round_next(cur, e->rounds, su, r)];
      const uint32_t j = a->send_first + a->nsend++;
      e->sends[j] = (SimExecSend){du, m->phase, {0}, (double)segs[i].bytes};
      rf_u64map_set(at, k, (int32_t)(j + 1));
    }
  }
  rf_u64map_free(&pair);
  /* 3. the programs */
  g_autoptr(GArray) prog = g_array_new(FALSE, FALSE, sizeof(RfSchedOp));
  g_autoptr(GArray) mine = g_array_new(FALSE, FALSE, sizeof(int));
  g_autoptr(GArray) needs = g_array_new(FALSE, FALSE, sizeof(int));
  e->prog_first = g_new0(uint64_t, (size_t)e->nranks + 1);
  for (int u = 0; u < e->nranks; u++) {
    g_array_set_size(mine, 0);
    g_array_set_size(needs, 0);
    for (uint64_t i = e->round_first[u]; i < e->round_first[u + 1]; i++) {
      g_array_append_val(mine, e->rounds[i].round);
      g_array_append_val(needs, e->rounds[i].need);
    }
    rf_schedule_rank_program(s, (const int *)(void *)mine->data, (const int *)(void *)needs->data,
                             (int)mine->len, prog);
    e->prog_first[u + 1] = prog->len;
  }
  e->prog = (RfSchedOp *)(void *)g_array_free(g_steal_pointer(&prog), FALSE);
  return e;
}

/* Per-operation costs of real/'s CUDA backend (calibration [executor]): a copy kernel's launch
 * before each pack and unpack that moves bytes, and the GPU side of the copy stream's wait on the
 * group's event (cudaStreamWaitEvent, cuda_wait: executor.stream_wait_gpu_s, 14 us on an H200)
 * before each unpack. A unit's round
 * counts them once: its ranks issue theirs at the same time. */
static void exec_op_costs(SimExec *e, const RfCalibration *cal) {
  const double k = cal->exec_kernel_launch_s;
  for (uint64_t i = 0; i < e->round_first[e->nranks]; i++) {
    SimExecRound *r = &e->rounds[i];
    if (r->pack_s > 0) r->pack_s += k;
    r->unpack_s += (r->unpack_s > 0 ? k : 0) + cal->exec_stream_wait_gpu_s;
  }
}

/* Host time to post one group (cuda_post): its NCCL calls (executor.group_host_s: group start to
 * end and the wait for the launch NCCL hands to a thread of its own on a non-blocking
 * communicator, 46-53 us a group on an H200 where latency.message_s, NCCL's base latency of 8.4
 * us, stood in before; docs/real.md, "First runs on a GPU"), the wait of the communication stream
 * on the copies (one cudaStreamWaitEvent) and three event records (copied, lane_done, the
 * group's progress event). */
static double exec_post_s(const RfCalibration *cal) {
  return cal->exec_group_host_s + cal->exec_stream_wait_s + 3 * cal->exec_event_record_s;
}

/* The coarse platform's load (sim_group_scales): GPU g's bytes on host link k over the run. */
static double exec_load(const SimProgram *p, const void *ud, int s, int g, int k) {
  (void)p;
  return s < 0 ? ((const double *)ud)[(size_t)g * SIM_HOST_LINKS + k] : 0;
}

void rf_calibration_staging_costs(const RfCalibration *cal, RfStagingCosts *out) {
  out->group_s = exec_post_s(cal) + 2 * cal->exec_kernel_launch_s; /* post, pack, unpack */
  out->nic_efficiency = cal->nic_efficiency;
  out->banks = MAX(cal->exec_banks, 1);
  out->lane_comms = cal->exec_lane_comms;
}

void rf_calibration_staging(const RfCalibration *cal, const RfPlan *plan, RfStaging *out) {
  RfStagingCosts c;
  rf_calibration_staging_costs(cal, &c);
  rf_staging_choose(plan, &c, !cal->exec_staged, (uint64_t)cal->exec_staging_bytes, cal->exec_slots,
                    cal->exec_max_ops, out);
}

void rf_calibration_memory_run_plan(const RfCalibration *cal, const RfPlan *plan, int banks,
                                    RfMemoryRun *out, RfStaging *staging) {
  RfCalibration rc = *cal; /* shallow: the chosen values only */
  RfStaging st;
  rc.exec_banks = banks;
  rf_calibration_staging(&rc, plan, &st);
  rc.exec_staging_bytes = (double)st.staging_bytes;
  rc.exec_slots = st.slots;
  rc.exec_max_ops = st.max_ops;
  rf_calibration_memory_run(&rc, banks, out);
  /* the schedule of the bytes the default bound would build: smaller bounds, more segments */
  if (out->max_segments && out->staging_bytes &&
      out->staging_bytes < RF_SCHEDULE_DEFAULT_STAGING_BYTES)
    out->max_segments *= RF_SCHEDULE_DEFAULT_STAGING_BYTES / out->staging_bytes;
  if (staging) *staging = st;
}

uint64_t rf_sim_work(const RfCalibration *cal, const RfPlan *plan, RfSoftware sw, RfSwVariant v) {
  if (!rf_variant_is_executor(sw, v)) return plan->nmsgs;
  /* for an order, the default bound stands in for refit run's choice (which takes a pass over
   * the plan's memory) */
  const uint64_t staging = cal->exec_staging_bytes > 0 ? (uint64_t)cal->exec_staging_bytes
                                                       : RF_SCHEDULE_DEFAULT_STAGING_BYTES;
  const uint64_t nsegs = rf_schedule_segments(plan, staging, !cal->exec_staged);
  return nsegs > SIM_EXEC_MAX_SEGMENTS ? plan->nmsgs : MAX(nsegs, plan->nmsgs);
}

gboolean sw_exec_build(SimProgram *p, const SimProtos *x, const RfCalibration *cal,
                       const int *slot_host, GError **error) {
  const RfPlan *plan = x->plan;
  const RfProblem *pb = plan->problem;
  RfStaging st; /* staging bound and lanes as refit run chooses them (0: chosen) */
  rf_calibration_staging(cal, plan, &st);
  const unsigned flags = !cal->exec_staged ? RF_SCHEDULE_PIPELINED : 0;
  /* refused before it is built where its segments, or even its lower bound on groups, are too
   * many: building tens of millions of groups only to refuse them took seconds (docs/sim.md) */
  const uint64_t nsegs = rf_schedule_segments(plan, st.staging_bytes, flags != 0);
  if (nsegs > SIM_EXEC_MAX_SEGMENTS) {
    g_set_error(error, RF_ERROR, RF_ERROR_LIMIT,
                "sim: the executor's schedule has %" G_GUINT64_FORMAT
                " segments, more than the %" G_GUINT64_FORMAT
                " one simulation builds; give a larger staging bound (--staging-mib)",
                nsegs, SIM_EXEC_MAX_SEGMENTS);
    return FALSE;
  }
  const uint64_t at_least =
      rf_schedule_rounds_lower_bound(plan, pb->nranks, st.staging_bytes, st.max_ops, flags);
  if (at_least + 1 > SIM_MAX_STEPS) {
    g_set_error(error, RF_ERROR, RF_ERROR_LIMIT,
                "sim: the executor's schedule has at least %" G_GUINT64_FORMAT
                " groups, more than the %d steps one simulation holds; give a larger staging "
                "bound (--staging-mib)",
                at_least, SIM_MAX_STEPS - 1);
    return FALSE;
  }
  g_autoptr(RfSchedule) s = rf_schedule_build(plan, pb->nranks, st.staging_bytes, st.max_ops,
                                              st.slots, flags, NULL, NULL, error);
  if (!s) return FALSE;
  if (s->nrounds + 1 > SIM_MAX_STEPS) {
    g_set_error(error, RF_ERROR, RF_ERROR_LIMIT,
                "sim: the executor's schedule has %d groups, more than the %d steps one "
                "simulation holds; give a larger staging bound (--staging-mib)",
                s->nrounds, SIM_MAX_STEPS - 1);
    return FALSE;
  }
  const int ngpus = x->ngpus;
  const double copy_Bps = pb->topo->hbm_GBps * 1e9 * cal->hbm_efficiency;
  g_autofree uint64_t *first = rf_schedule_round_offsets(s); /* segments by round */
  g_autofree Seg *segs = RF_BIG_NEW(Seg, s->nsegs ? s->nsegs : 1);
  {
    g_autofree uint64_t *w = g_memdup2(first, sizeof(uint64_t) * ((size_t)s->nrounds + 1));
    for (uint64_t m = 0; m < plan->nmsgs; m++)
      for (uint64_t g = s->seg_first[m]; g < s->seg_first[m + 1]; g++) {
        uint64_t lo = (g - s->seg_first[m]) * s->seg_bytes;
        uint64_t b = MIN(s->seg_bytes, plan->msgs[m].bytes - lo);
        segs[w[s->seg_round[g]]++] = (Seg){m, b, s->seg_dep ? s->seg_dep[g] : -1};
      }
  }
  p->nlanes = s->slots;
  p->sw_ngpus = ngpus;
  const int step0 = p->nsteps; /* (fixed_s: every rank actor sleeps it first, exec->setup_s) */
  RfU64Map idx;
  rf_u64map_init(&idx, 1024, TRUE);
  double soft = cal->fixed_s;
  for (int r = 0; r < s->nrounds; r++) {
    const int k = rf_schedule_round_stage(s, r);
    const RfPhase ph0 =
        first[r] < first[r + 1] ? (RfPhase)plan->msgs[segs[first[r]].msg].phase : RF_PHASE_INJECT;
    char name[32];
    g_snprintf(name, sizeof name, "%s.stage%d", rf_phase_name(ph0), k);
    const int step = sim_add_step(p, rf_schedule_lane(s, r), name, 0, 0);
    if (r == s->stage_round0[k]) p->steps[step].join = TRUE;
    guint f0 = p->flows->len;
    rf_u64map_reset(&idx);
    for (uint64_t i = first[r]; i < first[r + 1]; i++) {
      const RfMessage *msg = &plan->msgs[segs[i].msg];
      const int sg = pb->gpu[msg->src], dg = pb->gpu[msg->dst];
      const double b = (double)segs[i].bytes;
      p->phase_bytes[msg->phase] += b;
      p->frac[step][msg->phase] += b; /* bytes for now: shares at the end */
      if (sg == dg) continue;         /* a rank's copy to itself: staging to staging, no link */
      const int hs = slot_host[sg / p->group], hd = slot_host[dg / p->group];
      const uint64_t hk = xmap_key(hs, hd, msg->phase);
      const uint32_t pos = (uint32_t)rf_u64map_get(&idx, hk, 0);
      if (pos) {
        g_array_index(p->flows, SimFlow, f0 + pos - 1).bytes += b;
        continue;
      }
      SimFlow f = {hs, hd, msg->phase, 0, (uint16_t)step, b, 0, 0, 1.0};
      g_array_append_val(p->flows, f);
      rf_u64map_set(&idx, hk, (int32_t)(p->flows->len - f0));
    }
    soft += exec_post_s(cal); /* the host issues every group in turn; copies overlap */
  }
  rf_u64map_free(&idx);
  for (int st = step0; st < p->nsteps; st++)
    for (int l = 0; l < RF_PHASE_COUNT; l++)
      p->frac[st][l] = p->phase_bytes[l] > 0 ? p->frac[st][l] / p->phase_bytes[l] : 0;
  p->sw_software_s = soft;
  p->sw_calls = s->nrounds;
  p->exec_stages = s->pipelined ? 1 : s->nstages;
  p->exec = exec_build(s, plan, segs, first, slot_host, p->group, p->nhosts, copy_Bps,
                       exec_post_s(cal), step0);
  exec_op_costs(p->exec, cal);
  if (p->group > 1) { /* host links: each as busy as its busiest GPU's over the run */
    g_autofree double *load = g_new0(double, (size_t)ngpus *SIM_HOST_LINKS + 1);
    const int G = pb->topo->gpus_per_domain;
    for (uint64_t i = 0; i < s->nsegs; i++) {
      const RfMessage *msg = &plan->msgs[segs[i].msg];
      const int sg = pb->gpu[msg->src], dg = pb->gpu[msg->dst];
      if (sg == dg || sg < 0 || dg < 0) continue;
      const gboolean net = sg / G != dg / G;
      const double b = (double)segs[i].bytes;
      load[(size_t)sg * SIM_HOST_LINKS + SIM_LINK_HBM] += b;
      load[(size_t)dg * SIM_HOST_LINKS + SIM_LINK_HBM] += b;
      load[(size_t)sg * SIM_HOST_LINKS + (net ? SIM_LINK_NICUP : SIM_LINK_NVUP)] += b;
      load[(size_t)dg * SIM_HOST_LINKS + (net ? SIM_LINK_NICDN : SIM_LINK_NVDN)] += b;
    }
    sim_group_scales(p, ngpus, exec_load, load);
  }
  p->exec->setup_s = cal->fixed_s;
  p->exec->lane_comms = cal->exec_lane_comms;
  rf_memory_of_schedule(plan, s, cal->exec_lane_comms, &p->exec_mem);
  return TRUE;
}
