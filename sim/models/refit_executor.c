/* refit's own executor as a flow program (`refit sim --software refit --software-variant
 * executor`): the schedule of model/plan/schedule.h, the one real/ runs, round by round.
 *
 * Every rank runs its program (rf_schedule_rank_program), one SimGrid actor per rank on its GPU's
 * host, exactly as real/ issues it:
 * - PACK r: the rank's copy stream packs the bytes it sends in round r at the device copy rate
 *   (rf_topology_copy_Bps: topology HBM x `efficiency.hbm` / 2) after a kernel launch
 *   (`executor.kernel_launch_s`): the actor sleeps, its groups in flight keep moving;
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
 * - WAIT r: until the round's sends and receives are done, and its self-send copy (below);
 * - UNPACK r: the copy stream's wait on the group (`executor.stream_wait_gpu_s`), a kernel launch
 *   and the copy of the bytes it received, at the device copy rate.
 * A self-send (source rank = destination rank) is a pack, NCCL's copy of its bytes from the send
 * staging to the receive staging in the group (real/'s cuda_post hands it to ncclSend and
 * ncclRecv to the rank itself: NCCL's kernel copies it on the communication stream) at the
 * device copy rate, and an unpack; no transfer on a link. The group lasts at least that copy
 * from its post (SimExec.self_s).
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

/* One round's segments: (message, bytes) in the order of the schedule; 16 bytes (Kimi K3's 45 M
 * segments: 727 MB). */
typedef struct {
  uint32_t msg; /* below 2^32 (sw_exec_build checks) */
  int32_t dep;  /* pipelined: the round the sender must have unpacked first (-1: none) */
  uint64_t bytes;
} Seg;
G_STATIC_ASSERT(sizeof(Seg) == 16);

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

/* A rank's entry for a round, listed as rounds open it (in round order): its rank and its
 * round's copies and need. */
typedef struct {
  int32_t rank;
  float self_s; /* its group's self-sends (SimExec.self_s); in the padding before r */
  SimExecRound r;
} RankRound;
G_STATIC_ASSERT(sizeof(RankRound) == sizeof(SimExecRound) + 8);

/* The actors' rounds, sends and programs. An actor runs one rank (group 1: exact), or, on a
 * coarser platform, every rank of one simulated host together (a "unit"): the union of their
 * rounds, each round's copies as long as its longest (the GPUs copy at once, each on its own
 * engine), the latest need, and the sends of its ranks, one per (source rank, destination rank)
 * and phase as on the exact platform, to the destination's host (host links are the sum of their
 * GPUs', scaled in sw_exec_build so that none is faster than its busiest GPU over the run). Each
 * GPU pair's message thus keeps its own share of the links under max-min sharing: one send per
 * host pair carrying all its ranks' bytes took one share for all of them and made the coarse
 * model 1.8-7.6% slower than the exact one for m2n (-1.1 to +0.2% with a send per rank pair; m2n
 * and p2p within 1.1%, docs/sim.md "refit's executor at scale").
 * One pass over the segments, by round, each round's by (unit, source rank) (segs: sw_exec_build
 * lists them so): a rank's round opens its entry at its first segment, and the segments one rank
 * sends another in the round (of one phase) travel as one send. NCCL runs the operations to one
 * peer in order on that peer's channels (p2pnChannelsPerPeer, init.cc), so they take one share of
 * a NIC beside the other peers' traffic, not one share each. The sends stay in round order: each
 * unit's sends of a round are together. sender, receiver (out): each send's ranks; round_sends
 * (nrounds + 1): each round's first send. unit: each rank's actor (units: a host's). */
static SimExec *exec_build(const RfSchedule *s, const RfPlan *plan, const Seg *segs,
                           const uint64_t *first, const int *unit, gboolean units, int nunits,
                           const int *host, double copy_Bps, double launch_s, int step0,
                           uint32_t **sender, uint32_t **receiver, uint64_t *round_sends) {
  const RfProblem *pb = plan->problem;
  SimExec *e = g_new0(SimExec, 1);
  const int n = pb->nranks;
  e->nranks = nunits;
  e->launch_s = launch_s;
  e->host = g_memdup2(host, sizeof(int) * (size_t)MAX(nunits, 1));
  /* 1. the pass: rank rounds (at[x]: rank x's latest, last[x]: its round + 1) and sends (mark:
   * per destination and phase, the send of the current sender's round, by its stamp) */
  g_autofree int32_t *last = g_new0(int32_t, MAX(n, 1));
  g_autofree uint64_t *at = g_new0(uint64_t, MAX(n, 1));
  typedef struct {
    uint64_t stamp, send;
  } Mark;
  g_autofree Mark *mark = g_new0(Mark, (size_t)MAX(n, 1) * RF_PHASE_COUNT);
  uint64_t stamp = 0, nrr = 0, ns = 0;
  gboolean self = FALSE; /* a round has a self-send */
  /* arrays that grow without moving, on huge pages (bigmem.h): a page fault per 2 MiB, where
   * the 4 KiB pages of GLib's arrays cost more than the pass itself */
  const size_t cap = s->nsegs + 1; /* sends; rank rounds: twice as many */
  RfBigVec vrr = {.max = sizeof(RankRound) * 2 * cap}, vsend = {.max = sizeof(SimExecSend) * cap};
  RfBigVec vfrom = {.max = sizeof(uint32_t) * cap}, vto = {.max = sizeof(uint32_t) * cap};
  RfBigVec vown = {.max = sizeof(uint32_t) * cap}, vpeer = {.max = sizeof(uint32_t) * cap};
  RankRound *rr = rf_bigvec_room(&vrr, sizeof(RankRound));
  SimExecSend *sends = rf_bigvec_room(&vsend, sizeof(SimExecSend));
  uint32_t *from = rf_bigvec_room(&vfrom, sizeof(uint32_t)), *to = rf_bigvec_room(&vto, 4);
  uint32_t *own = rf_bigvec_room(&vown, 4), *peer = rf_bigvec_room(&vpeer, 4);
  for (int r = 0; r < s->nrounds; r++) {
    int prev = -1;
    round_sends[r] = ns;
    for (uint64_t i = first[r]; i < first[r + 1]; i++) {
      const RfMessage *m = &plan->msgs[segs[i].msg];
      const double b = (double)segs[i].bytes;
      for (int end = 0; end < 2; end++) {
        const int x = end ? m->dst : m->src;
        if (last[x] == r + 1) continue;
        last[x] = r + 1;
        if (sizeof(RankRound) * (nrr + 1) > vrr.room)
          rr = rf_bigvec_room(&vrr, sizeof(RankRound) * (nrr + 1));
        at[x] = nrr;
        rr[nrr++] = (RankRound){x, 0, {.round = r, .step = step0 + r, .need = -1}};
      }
      SimExecRound *a = &rr[at[m->src]].r, *z = &rr[at[m->dst]].r;
      a->pack_s += b / copy_Bps;
      a->need = MAX(a->need, segs[i].dep);
      z->unpack_s += b / copy_Bps;
      if (m->dst == m->src) { /* a self-send: NCCL's copy in the group, no transfer */
        rr[at[m->src]].self_s += (float)(b / copy_Bps);
        self = TRUE;
        continue;
      }
      if (m->src != prev) stamp++, prev = m->src;
      Mark *k = &mark[(size_t)m->dst * RF_PHASE_COUNT + m->phase];
      if (k->stamp == stamp) { /* the send of this pair and phase in this round */
        sends[k->send].bytes += b;
        continue;
      }
      if (sizeof(SimExecSend) * (ns + 1) > vsend.room) /* each grows as its size asks */
        sends = rf_bigvec_room(&vsend, sizeof(SimExecSend) * (ns + 1));
      if (sizeof(uint32_t) * (ns + 1) > vfrom.room) {
        from = rf_bigvec_room(&vfrom, sizeof(uint32_t) * (ns + 1));
        to = rf_bigvec_room(&vto, sizeof(uint32_t) * (ns + 1));
        own = rf_bigvec_room(&vown, sizeof(uint32_t) * (ns + 1));
        peer = rf_bigvec_room(&vpeer, sizeof(uint32_t) * (ns + 1));
      }
      *k = (Mark){stamp, ns};
      sends[ns] = (SimExecSend){unit[m->dst], m->phase, {0}, b};
      from[ns] = (uint32_t)m->src;
      to[ns] = (uint32_t)m->dst;
      own[ns] = (uint32_t)at[m->src]; /* at most 2 per segment: below 2^32 (sw_exec_build) */
      peer[ns++] = (uint32_t)at[m->dst];
    }
  }
  round_sends[s->nrounds] = ns;
  g_assert(ns <= UINT32_MAX);
  /* 2. the rank rounds by rank (a stable counting sort: each rank's in round order), then the
   * actors' rounds: the rank's own, or its unit's, with the longest copy and the latest need of
   * their ranks' */
  uint64_t *rfirst = g_new0(uint64_t, (size_t)n + 1);
  for (uint64_t i = 0; i < nrr; i++)
    rfirst[rr[i].rank + 1]++;
  for (int x = 0; x < n; x++)
    rfirst[x + 1] += rfirst[x];
  g_autofree uint64_t *pos = RF_BIG_NEW(uint64_t, nrr + 1); /* rr[i]'s place among the actors' */
  SimExecRound *byrank = RF_BIG_NEW(SimExecRound, nrr + 1);
  {
    g_autofree uint64_t *fill = g_memdup2(rfirst, sizeof(uint64_t) * ((size_t)n + 1));
    for (uint64_t i = 0; i < nrr; i++) {
      pos[i] = fill[rr[i].rank]++;
      byrank[pos[i]] = rr[i].r;
    }
  }
  if (!units) {
    e->round_first = rfirst;
    e->rounds = byrank;
    if (self) {
      e->self_s = RF_BIG_NEW0(double, nrr + 1); /* huge pages, as byrank */
      for (uint64_t i = 0; i < nrr; i++)
        e->self_s[pos[i]] = rr[i].self_s;
    }
  } else {
    g_autofree uint64_t *keys = g_new(uint64_t, nrr + 1);
    uint64_t nk = 0;
    for (int x = 0; x < n; x++)
      for (uint64_t i = rfirst[x]; i < rfirst[x + 1]; i++) /* a rank without a GPU: none */
        keys[nk++] = rkey(unit[x], byrank[i].round);
    index_rounds(keys, nk, nunits, step0, &e->round_first, &e->rounds);
    for (uint64_t i = 0; i < nrr; i++) {
      const int x = rr[i].rank;
      pos[i] = unit_round(e->round_first, e->rounds, unit[x], rr[i].r.round);
      SimExecRound *u = &e->rounds[pos[i]];
      u->pack_s = MAX(u->pack_s, rr[i].r.pack_s);
      u->unpack_s = MAX(u->unpack_s, rr[i].r.unpack_s);
      u->need = MAX(u->need, rr[i].r.need);
    }
    if (self) { /* the unit's GPUs copy at once, each its own: the longest */
      e->self_s = RF_BIG_NEW0(double, e->round_first[nunits] + 1);
      for (uint64_t i = 0; i < nrr; i++)
        e->self_s[pos[i]] = MAX(e->self_s[pos[i]], (double)rr[i].self_s);
    }
    g_free(rfirst);
    g_free(byrank);
  }
  rf_bigvec_clear(&vrr);
  /* 3. the sends where the pass listed them: an actor's round's are together */
  for (uint64_t j = 0; j < ns; j++) {
    SimExecRound *a = &e->rounds[pos[own[j]]];
    if (!a->nsend++) a->send_first = (uint32_t)j;
    e->rounds[pos[peer[j]]].nrecv++;
  }
  rf_bigvec_clear(&vown);
  rf_bigvec_clear(&vpeer);
  e->sends = rf_bigvec_take(&vsend, sizeof(SimExecSend) * ns); /* rf_bigvec_free */
  *sender = rf_bigvec_take(&vfrom, sizeof(uint32_t) * ns);
  *receiver = rf_bigvec_take(&vto, sizeof(uint32_t) * ns);
  /* 4. the programs */
  const uint64_t nu = e->round_first[e->nranks];
  g_autoptr(GArray) prog = g_array_sized_new(FALSE, FALSE, sizeof(RfSchedOp), (guint)(4 * nu + 1));
  rf_big_advise(prog->data, sizeof(RfSchedOp) * (4 * nu + 1));
  uint64_t most = 0; /* the most rounds of one actor */
  for (int u = 0; u < e->nranks; u++)
    most = MAX(most, e->round_first[u + 1] - e->round_first[u]);
  g_autofree int *mine = g_new(int, most + 1), *needs = g_new(int, most + 1);
  e->prog_first = g_new0(uint64_t, (size_t)e->nranks + 1);
  for (int u = 0; u < e->nranks; u++) {
    const uint64_t r0 = e->round_first[u], k = e->round_first[u + 1] - r0;
    for (uint64_t i = 0; i < k; i++) {
      mine[i] = e->rounds[r0 + i].round;
      needs[i] = e->rounds[r0 + i].need;
    }
    rf_schedule_rank_program(s, mine, needs, (int)k, prog);
    e->prog_first[u + 1] = prog->len;
  }
  e->prog = (RfSchedOp *)(void *)g_array_free(g_steal_pointer(&prog), FALSE);
  return e;
}

/* The messages ordered by (actor of the source, source rank), each source's in message order: a
 * stable counting sort, twice. unit: each rank's actor (-1: none). */
static uint64_t *msgs_by_source(const RfPlan *plan, const int *unit) {
  const int n = plan->problem->nranks;
  uint64_t *a = g_new(uint64_t, plan->nmsgs + 1), *b = g_new(uint64_t, plan->nmsgs + 1);
  g_autofree uint64_t *c = g_new(uint64_t, (size_t)n + 2);
  for (int pass = 0; pass < 2; pass++) { /* by rank, then by actor: (actor, rank, message) */
    memset(c, 0, sizeof(uint64_t) * ((size_t)n + 2));
    for (uint64_t m = 0; m < plan->nmsgs; m++) {
      const int x = plan->msgs[pass ? a[m] : m].src;
      c[(pass ? unit[x] + 1 : x) + 1]++;
    }
    for (int i = 0; i <= n; i++)
      c[i + 1] += c[i];
    for (uint64_t m = 0; m < plan->nmsgs; m++) {
      const uint64_t id = pass ? a[m] : m;
      const int x = plan->msgs[id].src;
      b[c[pass ? unit[x] + 1 : x]++] = id;
    }
    uint64_t *t = a;
    a = b;
    b = t;
  }
  g_free(b);
  return a;
}

static int cmp_flow_src(const void *a, const void *b) {
  const int32_t x = ((const SimFlow *)a)->src, y = ((const SimFlow *)b)->src;
  return (x > y) - (x < y);
}

/* The flows of steps step0 and on, listed in step order, sorted by source within each step as
 * sim_program_build sorts the others' (by step, then source): only the steps not in that order
 * already (most are), a few thousand flows each, not a sort of them all. */
static void flows_by_source(SimProgram *p, int step0) {
  SimFlow *f = (SimFlow *)(void *)p->flows->data;
  const uint64_t n = p->flows->len;
  uint64_t a = 0;
  while (a < n && f[a].step < (uint32_t)step0)
    a++;
  for (uint64_t b; a < n; a = b) {
    gboolean sorted = TRUE;
    for (b = a + 1; b < n && f[b].step == f[a].step; b++)
      sorted &= f[b].src >= f[b - 1].src;
    if (!sorted) qsort(f + a, b - a, sizeof(SimFlow), cmp_flow_src);
  }
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
  /* the model's serial timeline: the post, both launches and the unpack's wait on the group */
  out->serial_group_s = out->group_s + cal->exec_stream_wait_gpu_s;
  out->hbm_efficiency = cal->hbm_efficiency;
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
   * the plan's memory), raised as the choice raises it until its schedule fits what one
   * simulation builds (before 2026-12-05 not raised: Kimi K3's hybrid, 41 M segments at its
   * chosen bound, counted as too large for the executor, ran after p2p instead of first) */
  const gboolean pipelined = !cal->exec_staged;
  uint64_t nsegs;
  if (cal->exec_staging_bytes > 0)
    nsegs = rf_schedule_segments(plan, (uint64_t)cal->exec_staging_bytes, pipelined);
  else
    rf_staging_fitting(plan, RF_SCHEDULE_DEFAULT_STAGING_BYTES, pipelined, &nsegs);
  /* the schedule's placement and the engine go with the segments, its dependency graph and the
   * memory line with the transfers (Kimi K3's hybrid: 41 M segments and 82 M transfers took
   * about 160 s, its p2p 46 M and 20 M about 86 s) */
  return nsegs > SIM_EXEC_MAX_SEGMENTS ? plan->nmsgs : MAX(nsegs, plan->nmsgs) + plan->nxfers;
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
  gint64 tv[5]; /* REFIT_SIM_VERBOSE: the build's parts */
  tv[0] = g_get_monotonic_time();
  g_autoptr(RfSchedule) s = rf_schedule_build(plan, pb->nranks, st.staging_bytes, st.max_ops,
                                              st.slots, flags, NULL, NULL, error);
  tv[1] = g_get_monotonic_time();
  if (!s) return FALSE;
  if (s->nrounds + 1 > SIM_MAX_STEPS) {
    g_set_error(error, RF_ERROR, RF_ERROR_LIMIT,
                "sim: the executor's schedule has %d groups, more than the %d steps one "
                "simulation holds; give a larger staging bound (--staging-mib)",
                s->nrounds, SIM_MAX_STEPS - 1);
    return FALSE;
  }
  const int ngpus = x->ngpus;
  /* Seg's message and exec_build's rank rounds (two a segment at most) in 32 bits */
  G_STATIC_ASSERT(2 * SIM_EXEC_MAX_SEGMENTS < UINT32_MAX);
  if (plan->nmsgs >= UINT32_MAX) {
    g_set_error(error, RF_ERROR, RF_ERROR_LIMIT,
                "sim: %" G_GUINT64_FORMAT " messages, more than the executor model numbers (2^32)",
                (guint64)plan->nmsgs);
    return FALSE;
  }
  const double copy_Bps = rf_topology_copy_Bps(pb->topo, cal->hbm_efficiency);
  g_autofree uint64_t *first = rf_schedule_round_offsets(s); /* segments by round */
  /* the actors: a rank each, or (group > 1) a simulated host each, its GPUs' ranks together */
  const gboolean units = p->group > 1;
  const int nunits = units ? p->nhosts : pb->nranks;
  g_autofree int *unit = g_new(int, MAX(pb->nranks, 1));
  g_autofree int *host = g_new(int, MAX(nunits, 1));
  for (int r = 0; r < pb->nranks; r++)
    unit[r] = !units ? r : pb->gpu[r] >= 0 ? slot_host[pb->gpu[r] / p->group] : -1;
  for (int u = 0; u < nunits; u++)
    host[u] = units ? u : pb->gpu[u] >= 0 ? slot_host[pb->gpu[u] / p->group] : -1;
  /* the segments by round, each round's by (actor, source rank, message): exec_build's order */
  g_autofree Seg *segs = RF_BIG_NEW(Seg, s->nsegs ? s->nsegs : 1);
  {
    g_autofree uint64_t *order = msgs_by_source(plan, unit);
    g_autofree uint64_t *w = g_memdup2(first, sizeof(uint64_t) * ((size_t)s->nrounds + 1));
    for (uint64_t j = 0; j < plan->nmsgs; j++) {
      const uint64_t m = order[j];
      for (uint64_t g = s->seg_first[m]; g < s->seg_first[m + 1]; g++) {
        uint64_t lo = (g - s->seg_first[m]) * s->seg_bytes;
        uint64_t b = MIN(s->seg_bytes, plan->msgs[m].bytes - lo);
        segs[w[s->seg_round[g]]++] = (Seg){(uint32_t)m, s->seg_dep ? s->seg_dep[g] : -1, b};
      }
    }
  }
  p->nlanes = s->slots;
  p->sw_ngpus = ngpus;
  const int step0 = p->nsteps; /* (fixed_s: every rank actor sleeps it first, exec->setup_s) */
  double soft = cal->fixed_s;
  for (int r = 0; r < s->nrounds; r++) { /* a step per round: step0 + r */
    const int k = rf_schedule_round_stage(s, r);
    const int step = sim_add_step(p, rf_schedule_lane(s, r), "", 0, 0);
    if (r == s->stage_round0[k]) p->steps[step].join = TRUE;
    soft += exec_post_s(cal);        /* the host issues every group in turn; copies overlap */
    uint64_t first_msg = UINT64_MAX; /* the round's first message: it names the step */
    for (uint64_t i = first[r]; i < first[r + 1]; i++) {
      const uint8_t ph = plan->msgs[segs[i].msg].phase;
      p->phase_bytes[ph] += (double)segs[i].bytes;
      p->frac[step][ph] += (double)segs[i].bytes; /* bytes for now: shares at the end */
      first_msg = MIN(first_msg, segs[i].msg);
    }
    const RfPhase ph0 =
        first_msg < plan->nmsgs ? (RfPhase)plan->msgs[first_msg].phase : RF_PHASE_INJECT;
    g_snprintf(p->steps[step].name, sizeof p->steps[step].name, "%s.stage%d", rf_phase_name(ph0),
               k);
  }
  for (int st = step0; st < p->nsteps; st++)
    for (int l = 0; l < RF_PHASE_COUNT; l++)
      p->frac[st][l] = p->phase_bytes[l] > 0 ? p->frac[st][l] / p->phase_bytes[l] : 0;
  p->sw_software_s = soft;
  p->sw_calls = s->nrounds;
  p->exec_stages = s->pipelined ? 1 : s->nstages;
  uint32_t *sender = NULL, *receiver = NULL; /* rf_bigvec_free */
  g_autofree uint64_t *round_sends = g_new(uint64_t, (size_t)s->nrounds + 1);
  tv[2] = g_get_monotonic_time();
  p->exec = exec_build(s, plan, segs, first, unit, units, nunits, host, copy_Bps, exec_post_s(cal),
                       step0, &sender, &receiver, round_sends);
  /* the steps' flows (the timeline's rounds and the platform's routes; the actors send
   * p->exec's): a round's sends between two hosts in one phase, by source host (each round's
   * in the order they were listed); a rank's copy to another on its GPU (colocated) rides no
   * link. A host per rank (group 1, no GPU shared): a flow per send. */
  gboolean own_host = !units;
  {
    g_autofree uint8_t *taken = g_new0(uint8_t, MAX(ngpus, 1));
    for (int r = 0; r < pb->nranks && own_host; r++)
      if (pb->gpu[r] >= 0) own_host = !taken[pb->gpu[r]]++;
  }
  { /* room for a flow per send, on huge pages (GArray grows in place: never shrinks) */
    const guint f0 = p->flows->len;
    g_array_set_size(p->flows, f0 + (guint)round_sends[s->nrounds]);
    rf_big_advise(p->flows->data, sizeof(SimFlow) * p->flows->len);
    g_array_set_size(p->flows, f0);
  }
  RfU64Map idx;
  rf_u64map_init(&idx, 1024, TRUE);
  for (int r = 0; r < s->nrounds; r++) {
    rf_u64map_reset(&idx);
    const guint f0 = p->flows->len;
    for (uint64_t j = round_sends[r]; j < round_sends[r + 1]; j++) {
      const int sg = pb->gpu[sender[j]], dg = pb->gpu[receiver[j]];
      if (sg == dg) continue;
      const int hs = slot_host[sg / p->group], hd = slot_host[dg / p->group];
      const SimExecSend *x = &p->exec->sends[j];
      SimFlow f = {hs, hd, x->phase, 0, 0, (uint32_t)(step0 + r), x->bytes, 0, 0, 1.0};
      if (own_host) {
        g_array_append_val(p->flows, f);
        continue;
      }
      const uint64_t hk = xmap_key(hs, hd, x->phase);
      const uint32_t pos = (uint32_t)rf_u64map_get(&idx, hk, 0);
      if (pos) {
        g_array_index(p->flows, SimFlow, f0 + pos - 1).bytes += x->bytes;
        continue;
      }
      g_array_append_val(p->flows, f);
      rf_u64map_set(&idx, hk, (int32_t)(p->flows->len - f0));
    }
  }
  rf_u64map_free(&idx);
  rf_bigvec_free(sender);
  rf_bigvec_free(receiver);
  flows_by_source(p, step0);
  tv[3] = g_get_monotonic_time();
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
  tv[4] = g_get_monotonic_time();
  if (g_getenv("REFIT_SIM_VERBOSE"))
    g_printerr("sim: %s: executor program: schedule %.2f s (%" G_GUINT64_FORMAT
               " segments, %d groups), segments and steps %.2f s, ranks' programs and flows "
               "%.2f s, memory %.2f s\n",
               rf_strategy_name(plan->strategy), (tv[1] - tv[0]) / 1e6, (guint64)s->nsegs,
               s->nrounds, (tv[2] - tv[1]) / 1e6, (tv[3] - tv[2]) / 1e6, (tv[4] - tv[3]) / 1e6);
  return TRUE;
}
