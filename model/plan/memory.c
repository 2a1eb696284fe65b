#include "memory.h"
#include "bigmem.h"
#include "dtensor.h"
#include "schedule.h"
#include "u64map.h"
#include "zoo.h"

#include <string.h>

void rf_memory_weights(const RfProblem *pb, RfMemory *out) {
  memset(out, 0, sizeof *out);
  out->weights_rank = out->peak_rank = pb->dst.nranks ? pb->dst.ranks[0] : -1;
  /* Per buffer, over its mesh's positions: a rank's elements of a buffer depend only on the
   * shard it holds, so each shard's are counted once (rf_side_buffer_elems at one rank holding
   * it) and added to every rank holding it; the same sums as rf_side_buffer_elems per (buffer,
   * rank), in the same order, at a lookup per position instead of a search per rank. */
  const RfSide *s = &pb->dst;
  uint64_t *w = g_new0(uint64_t, (size_t)MAX(pb->nranks, 1));
  int64_t *shard_elems = NULL;
  int cap = 0;
  for (int buf = 0; buf < s->nbufs; buf++) {
    const RfPlacement *p = &s->place[s->buf_part[buf]];
    if (!p->mesh) continue;
    const RfTensor *t = &pb->model->tensors[pb->model->parts[s->buf_part[buf]].tensor];
    const uint64_t es = (uint64_t)rf_dtype_size(t->dtype);
    const int nsh = rf_placement_nshards(p);
    if (nsh > cap) {
      cap = nsh;
      shard_elems = g_renew(int64_t, shard_elems, cap);
    }
    for (int k = 0; k < nsh; k++)
      shard_elems[k] = -1;
    for (int pos = 0; pos < p->mesh->nranks; pos++) {
      const int r = p->mesh->ranks[pos];
      if (r >= pb->nranks || rf_side_rank_lost(s, r)) continue;
      int sh;
      rf_placement_locate(p, pos, &sh, NULL);
      if (shard_elems[sh] < 0) shard_elems[sh] = rf_side_buffer_elems(s, buf, r);
      w[r] += (uint64_t)shard_elems[sh] * es;
    }
  }
  g_free(shard_elems);
  for (int i = 0; i < pb->dst.nranks; i++) {
    const uint64_t b = w[pb->dst.ranks[i]];
    if (b > out->weights_bytes) {
      out->weights_bytes = b;
      out->weights_rank = pb->dst.ranks[i];
    }
  }
  g_free(w);
  out->banks = 1;
  out->peak_bytes = out->weights_bytes;
  out->peak_rank = out->weights_rank;
  out->gpu_memory_bytes = pb->topo->memory_GB * 1e9;
  out->from = RF_MEMORY_FROM_WEIGHTS;
}

void rf_memory_set_banks(RfMemory *m, int banks) {
  banks = banks == 2 ? 2 : 1;
  m->peak_bytes =
      m->peak_bytes - (uint64_t)m->banks * m->weights_bytes + (uint64_t)banks * m->weights_bytes;
  m->own_peak_bytes = m->own_peak_bytes - (uint64_t)m->banks * m->weights_bytes +
                      (uint64_t)banks * m->weights_bytes;
  m->banks = banks;
}

/* The most bytes of per-round holding sums rf_memory_of_schedule keeps at once. */
#define RF_HOLD_BLOCK_BYTES ((uint64_t)64 << 20)

/* (rank, part) packed into a pointer-sized key, never NULL. */
static gpointer rank_part(int rank, uint32_t part) {
  return GSIZE_TO_POINTER((((gsize)(guint32)rank << 32) | part) + 1);
}

/* Counts rank r's holding and staging into out: the largest of each, of their sum, and the
 * largest weights plus this rank's extra (ranks of one layout hold nearly equal weights, and a
 * second pass over every buffer per rank would cost buffers x ranks again). */
static void count_rank(RfMemory *out, int r, uint64_t hold, uint64_t staging, uint64_t nccl) {
  out->hold_bytes = MAX(out->hold_bytes, hold);
  out->staging_bytes = MAX(out->staging_bytes, staging);
  out->nccl_bytes = MAX(out->nccl_bytes, nccl);
  out->extra_bytes = MAX(out->extra_bytes, hold + staging + nccl);
  const uint64_t total = out->weights_bytes + hold + staging + nccl;
  out->own_peak_bytes = MAX(out->own_peak_bytes, out->weights_bytes + hold + staging);
  if (total > out->peak_bytes) {
    out->peak_bytes = total;
    out->peak_rank = r;
  }
}

int rf_memory_nccl_channels_per_peer(const RfProblem *pb) {
  if (pb->nranks <= pb->topo->gpus_per_domain) return RF_NCCL_P2P_CHANNELS;
  return 2 * pb->nranks > 4 * RF_NCCL_P2P_CHANNELS ? 1 : 2;
}

/* Per rank of pb: its index in pb->dst.ranks, or -1 (g_free it). */
static int *dst_index_new(const RfProblem *pb) {
  int *idx = g_new(int, MAX(pb->nranks, 1));
  for (int r = 0; r < pb->nranks; r++)
    idx[r] = -1;
  for (int i = 0; i < pb->dst.nranks; i++)
    idx[pb->dst.ranks[i]] = i;
  return idx;
}

/* NCCL's point-to-point buffers of every inference rank (indexed as pb->dst.ranks), over `comms`
 * communicators: the data communicator (comms 1: every lane's rounds) or one per lane. A
 * connection is (rank, peer, direction, communicator): its lanes are those of its message's
 * segments' rounds (sg with rounds), else every lane. */
static uint64_t *nccl_of_ranks(const RfPlan *plan, const RfSchedule *sg, int comms,
                               const int *idx) {
  const RfProblem *pb = plan->problem;
  const int n = pb->nranks, nd = pb->dst.nranks;
  G_STATIC_ASSERT(RF_SCHEDULE_MAX_SLOTS < 32); /* a lane mask in 32 bits */
  G_STATIC_ASSERT(RF_MAX_RANKS <= (1 << 29));  /* (peer, direction, network) in 32 bits */
  const uint32_t all = (UINT32_C(1) << comms) - 1;
  const gboolean by_round = comms > 1 && sg && sg->seg_round;
  g_autofree uint32_t *lane_bit = NULL; /* per round: its lane's bit */
  if (by_round) {
    lane_bit = g_new(uint32_t, (size_t)sg->nrounds + 1);
    for (int r = 0; r < sg->nrounds; r++)
      lane_bit[r] = UINT32_C(1) << rf_schedule_lane(sg, r);
  }
  /* Every message's ends among the inference ranks, as (peer, direction, network) and the
   * message's lanes, listed by inference rank (a counting sort: first[i] .. first[i + 1]); a
   * connection (rank, peer, direction) is then found again by a stamp per (peer, direction) of
   * the rank being counted, not by a map of every connection (millions at 4,096 ranks). */
  uint64_t *first = g_new0(uint64_t, (size_t)nd + 1);
  for (uint64_t m = 0; m < plan->nmsgs; m++) {
    const RfMessage *g = &plan->msgs[m];
    if (g->src == g->dst) continue;
    if (idx[g->src] >= 0) first[idx[g->src] + 1]++;
    if (idx[g->dst] >= 0) first[idx[g->dst] + 1]++;
  }
  for (int i = 0; i < nd; i++)
    first[i + 1] += first[i];
  const uint64_t nconn = first[nd];
  uint32_t *code = rf_big_alloc(sizeof(uint32_t) * (nconn + 1)); /* peer << 2 | dir << 1 | net */
  uint32_t *lanes_of = rf_big_alloc(sizeof(uint32_t) * (nconn + 1));
  uint64_t *fill = g_memdup2(first, sizeof(uint64_t) * ((size_t)nd + 1));
  for (uint64_t m = 0; m < plan->nmsgs; m++) {
    const RfMessage *g = &plan->msgs[m];
    if (g->src == g->dst || (idx[g->src] < 0 && idx[g->dst] < 0)) continue;
    uint32_t lanes = comms > 1 ? all : 1;
    if (by_round) {
      lanes = 0;
      for (uint64_t k = sg->seg_first[m]; k < sg->seg_first[m + 1]; k++)
        lanes |= lane_bit[sg->seg_round[k]];
    }
    const uint32_t net = (g->flags & RF_XFER_NET) != 0;
    for (int dir = 0; dir < 2; dir++) { /* 0: the sender's connection, 1: the receiver's */
      const int me = dir ? g->dst : g->src, peer = dir ? g->src : g->dst;
      if (idx[me] < 0) continue;
      const uint64_t at = fill[idx[me]]++;
      code[at] = (uint32_t)peer << 2 | (uint32_t)dir << 1 | net;
      lanes_of[at] = lanes;
    }
  }
  g_free(fill);
  /* per rank and communicator: NVLink connections and whether a network pool is in use */
  uint64_t *out = g_new0(uint64_t, MAX(nd, 1));
  uint8_t *pools = g_new0(uint8_t, (size_t)MAX(nd, 1) * comms); /* bit 0 send, bit 1 receive */
  const uint64_t cpp = (uint64_t)rf_memory_nccl_channels_per_peer(pb);
  /* per (peer, direction): the stamp of the rank that has it (i + 1) and its lanes so far */
  uint32_t *stamp = g_new0(uint32_t, 2 * (size_t)MAX(n, 1));
  uint32_t *acc = g_new(uint32_t, 2 * (size_t)MAX(n, 1));
  uint32_t *seen = g_new(uint32_t, 2 * (size_t)MAX(n, 1) + 1); /* codes of rank i's connections */
  for (int i = 0; i < nd; i++) {
    uint32_t nseen = 0;
    for (uint64_t c = first[i]; c < first[i + 1]; c++) {
      const uint32_t pd = code[c] >> 1; /* (peer, direction): its network bit follows the pair */
      if (stamp[pd] != (uint32_t)i + 1) {
        stamp[pd] = (uint32_t)i + 1;
        acc[pd] = 0;
        seen[nseen++] = code[c];
      }
      acc[pd] |= lanes_of[c];
    }
    for (uint32_t j = 0; j < nseen; j++) {
      const uint32_t lanes = acc[seen[j] >> 1];
      const int dir = (int)((seen[j] >> 1) & 1), net = (int)(seen[j] & 1);
      for (int c = 0; c < comms; c++) {
        if (!(lanes & (UINT32_C(1) << c))) continue;
        if (net)
          pools[(size_t)i * comms + c] |= (uint8_t)(1u << dir);
        else
          out[i] += cpp * (dir ? RF_NCCL_P2P_RECV_CONN_BYTES : RF_NCCL_P2P_SEND_CONN_BYTES);
      }
    }
  }
  const uint64_t pool = (uint64_t)RF_NCCL_P2P_CHANNELS * RF_NCCL_NET_POOL_CHANNEL_BYTES;
  for (int i = 0; i < nd; i++)
    for (int c = 0; c < comms; c++)
      out[i] += pool * (uint64_t)__builtin_popcount(pools[(size_t)i * comms + c]);
  g_free(stamp);
  g_free(acc);
  g_free(seen);
  g_free(code);
  g_free(lanes_of);
  g_free(first);
  g_free(pools);
  return out;
}

void rf_memory_of_plan(const RfPlan *plan, RfMemory *out) {
  rf_memory_of_plan_staging(plan, RF_SCHEDULE_DEFAULT_STAGING_BYTES, RF_SCHEDULE_DEFAULT_SLOTS,
                            FALSE, out);
}

#define DIFF_BUDGET (1u << 22) /* entries of the dense arrays below: 32 MiB of int64 */
#define LAST_BUDGET (1u << 25) /* entries of the dense (rank, part) array: 32 or 128 MiB */

/* Live-byte changes by stage of a block of inference ranks, dense: the peak of a rank's holding
 * is the largest prefix sum over its stages (and 0). The same as sorting its events by stage,
 * frees first: within one stage the live bytes fall, then rise to the stage's prefix sum. Blocks
 * keep the array within DIFF_BUDGET entries whatever the number of stages. */

/* The dense (rank, part) -> last send stage + 1 array: a byte an entry where every value fits
 * (plans of up to 255 stages: a quarter of the fresh pages and of the cache it takes), else 4. */
static inline int last_get(const void *row, uint32_t part, gboolean narrow) {
  return narrow ? ((const uint8_t *)row)[part] : ((const int32_t *)row)[part];
}

static inline void last_raise(void *row, uint32_t part, gboolean narrow, int v) {
  if (narrow)
    ((uint8_t *)row)[part] = (uint8_t)MAX(((uint8_t *)row)[part], v);
  else
    ((int32_t *)row)[part] = MAX(((int32_t *)row)[part], v);
}

/* What plan->derived holds: the peak holding of each inference rank by the plan's stages (index
 * in pb->dst.ranks), which no staging bound or number of lanes changes. */
typedef struct {
  int n;
  uint64_t hold[];
} Derived;

/* The holding of every inference rank of plan, counted on the first call and kept with the plan
 * (plan->derived: plan.h) for the next ones: the staging choice and the memory line count the
 * same plan at different bounds. */
static const uint64_t *plan_holding(const RfPlan *plan) {
  const RfProblem *pb = plan->problem;
  const Derived *done = g_atomic_pointer_get(&plan->derived);
  if (done && done->n == pb->dst.nranks) return done->hold;
  g_assert(!done); /* the problem's inference ranks never change under a plan */
  Derived *dv = g_malloc(sizeof(Derived) + sizeof(uint64_t) * ((size_t)pb->dst.nranks + 1));
  dv->n = pb->dst.nranks;
  int *dst_index = dst_index_new(pb); /* per rank: its index in pb->dst.ranks, -1 if not there */
  /* each piece's part and bytes, compact: the sorted transfers visit pieces in no useful order,
   * and a piece is a box of RF_MAX_DIMS bounds */
  uint32_t *ppart = rf_big_alloc(sizeof(uint32_t) * (plan->npieces + 1));
  int64_t *pbytes = rf_big_alloc(sizeof(int64_t) * (plan->npieces + 1));
  for (uint32_t k = 0; k < plan->npieces; k++) {
    ppart[k] = plan->pieces[k].part;
    pbytes[k] = (int64_t)plan->pieces[k].bytes;
  }
  int max_stage = 0;
  for (uint64_t m = 0; m < plan->nmsgs; m++)
    max_stage = MAX(max_stage, (int)plan->msgs[m].stage);
  /* Holding, per block of inference ranks, in one pass over the transfers from the last: a
   * received piece is held from its stage to the last stage (+ 1) its rank sends a piece of its
   * part at (forwarding keeps it until then), and those sends are all met before it in the pass
   * (sends at its own stage, met or not, change nothing: a piece is held only up to a later
   * stage, and a relayed one to its own stage either way). last: (rank in block, part) ->
   * that stage + 1, dense where the block's rows fit LAST_BUDGET, else a map. */
  const uint32_t nparts = pb->model->nparts;
  const uint64_t width = (uint64_t)max_stage + 2; /* stages 0 .. last + 1 */
  const int block = (int)MAX(1, MIN((uint64_t)pb->dst.nranks, DIFF_BUDGET / width));
  const gboolean dense = (uint64_t)block * nparts <= LAST_BUDGET;
  const gboolean narrow = width <= 256; /* stage + 1 <= width - 1 fits a byte */
  const size_t lsize = narrow ? 1 : sizeof(int32_t);
  char *last_dense = dense ? rf_big_alloc(lsize * ((size_t)block * nparts + 1)) : NULL;
  RfU64Map last_send; /* (rank, part) -> stage + 1, where the dense array would pass LAST_BUDGET */
  int64_t *diff = rf_big_alloc(sizeof(int64_t) * (size_t)block * width);
  for (int b0 = 0; b0 < pb->dst.nranks; b0 += block) {
    const int b1 = MIN(b0 + block, pb->dst.nranks);
    memset(diff, 0, sizeof(int64_t) * (size_t)(b1 - b0) * width);
    if (dense)
      memset(last_dense, 0, lsize * (size_t)(b1 - b0) * nparts);
    else
      rf_u64map_init(&last_send, 1024, FALSE);
    /* message by message (from the last): one (stage, src, dst) for all of its transfers */
    for (uint64_t mi = plan->nmsgs; mi-- > 0;) {
      const RfMessage *g = &plan->msgs[mi];
      const int ds = dst_index[g->src], d = dst_index[g->dst], stage = g->stage;
      const gboolean sends = ds >= b0 && ds < b1, gets = d >= b0 && d < b1;
      if (!sends && !gets) continue;
      char *lsend = dense && sends ? last_dense + lsize * (size_t)(ds - b0) * nparts : NULL;
      const char *lget = dense && gets ? last_dense + lsize * (size_t)(d - b0) * nparts : NULL;
      int64_t *drow = gets ? diff + (size_t)(d - b0) * width : NULL;
      for (uint64_t i = (uint64_t)g->first + g->count; i-- > g->first;) {
        const RfTransfer *x = &plan->xfers[i];
        const uint32_t part = ppart[x->piece];
        if (sends) {
          if (dense) {
            last_raise(lsend, part, narrow, stage + 1);
          } else {
            const uint64_t k = GPOINTER_TO_SIZE(rank_part(g->src, part));
            const int32_t l = rf_u64map_get(&last_send, k, 0);
            if (stage + 1 > l) rf_u64map_set(&last_send, k, stage + 1);
          }
        }
        if (!gets) continue;
        int last =
            (dense ? last_get(lget, part, narrow)
                   : rf_u64map_get(&last_send, GPOINTER_TO_SIZE(rank_part(g->dst, part)), 0)) -
            1;
        if (last <= stage && !(x->flags & RF_XFER_RELAY)) continue;
        if (last < stage) last = stage;
        const int64_t by = pbytes[x->piece];
        drow[stage] += by;
        drow[last + 1] -= by;
      }
    }
    if (!dense) rf_u64map_free(&last_send);
    for (int i = b0; i < b1; i++) {
      int64_t live = 0, peak = 0;
      for (uint64_t st = 0; st < width; st++) {
        live += diff[(size_t)(i - b0) * width + st];
        peak = MAX(peak, live);
      }
      dv->hold[i] = (uint64_t)peak;
    }
  }
  g_free(diff);
  g_free(dst_index);
  g_free(last_dense);
  g_free(ppart);
  g_free(pbytes);
  if (!g_atomic_pointer_compare_and_exchange((gpointer *)&((RfPlan *)plan)->derived, NULL, dv)) {
    g_free(dv); /* another thread counted it first: the same counts */
    dv = g_atomic_pointer_get(&plan->derived);
  }
  return dv->hold;
}

void rf_memory_of_plan_staging(const RfPlan *plan, uint64_t staging_bytes, int slots,
                               gboolean lane_comms, RfMemory *out) {
  const RfProblem *pb = plan->problem;
  rf_memory_weights(pb, out);
  out->from = RF_MEMORY_FROM_STAGES;
  const int n = pb->nranks;
  /* largest message per rank, direction and link class: a round of refit run's (pipelined)
   * schedule holds up to the staging bound over the network and rf_schedule_nvlink_share() of
   * them over NVLink */
  const uint64_t share = rf_schedule_nvlink_share(plan);
  uint64_t *max_out = g_new0(uint64_t, 2 * (size_t)n), *max_in = g_new0(uint64_t, 2 * (size_t)n);
  for (uint64_t m = 0; m < plan->nmsgs; m++) {
    const RfMessage *g = &plan->msgs[m];
    const int c = !(g->flags & RF_XFER_NET);
    max_out[2 * g->src + c] = MAX(max_out[2 * g->src + c], g->bytes);
    max_in[2 * g->dst + c] = MAX(max_in[2 * g->dst + c], g->bytes);
  }
  const uint64_t *hold = plan_holding(plan);
  out->comms = lane_comms ? MAX(slots, 1) : 1;
  int *idx = dst_index_new(pb);
  uint64_t *nccl = nccl_of_ranks(plan, NULL, out->comms, idx);
  g_free(idx);
  for (int i = 0; i < pb->dst.nranks; i++) {
    const int r = pb->dst.ranks[i];
    const uint64_t cap = staging_bytes;
    uint64_t staging = 0;
    for (int c = 0; c < 2; c++) {
      const uint64_t room = c ? cap * share : cap;
      staging += (uint64_t)slots * (MIN(max_out[2 * r + c], room) + MIN(max_in[2 * r + c], room));
    }
    count_rank(out, r, hold[i], staging, nccl[i]);
  }
  g_free(nccl);
  g_free(max_out);
  g_free(max_in);
}

/* A piece an inference rank received: its transfer, stage and piece, together (the lists are
 * scanned once per piece the rank sends of that part). */
typedef struct {
  uint64_t t;
  uint32_t stage, piece;
} Got;

/* The (inference rank, part) -> list + 1 table of rf_memory_of_schedule: dense (rank index x
 * part) within this budget, else a map. */
#define SLOTS_TABLE_BYTES ((uint64_t)256 << 20)
static uint64_t slots_table_bytes = SLOTS_TABLE_BYTES;

void rf_memory_set_table_budget(uint64_t bytes) {
  slots_table_bytes = bytes;
}

typedef struct {
  int32_t *dense; /* [didx x nparts], or NULL: map */
  uint32_t nparts;
  const int *didx; /* rank -> its index in pb->dst.ranks, or -1 */
  RfU64Map map;
} Slots;

static inline int32_t slot_get(const Slots *sl, int rank, uint32_t part) {
  return sl->dense ? sl->dense[(size_t)sl->didx[rank] * sl->nparts + part]
                   : rf_u64map_get(&sl->map, GPOINTER_TO_SIZE(rank_part(rank, part)), 0);
}

static inline void slot_set(Slots *sl, int rank, uint32_t part, int32_t v) {
  if (sl->dense)
    sl->dense[(size_t)sl->didx[rank] * sl->nparts + part] = v;
  else
    rf_u64map_set(&sl->map, GPOINTER_TO_SIZE(rank_part(rank, part)), v);
}

/* Transfer t of message msg, sent by an inference rank: raise the last use (last_use, by
 * transfer) of the pieces it is sent from to its own last round (xl) -- the first earlier one
 * of its part holding all of it, or else every one meeting it. */
static void hold_uses(const RfPlan *plan, const Slots *slot_of, const Got *list,
                      const uint64_t *list_first, const RfMessage *msg, uint64_t t,
                      const int32_t *xl, int32_t *last_use) {
  const RfPiece *pc = &plan->pieces[plan->xfers[t].piece];
  const int ndim = plan->problem->model->parts[pc->part].ndim;
  const int32_t i = slot_get(slot_of, msg->src, pc->part);
  if (!i) return;
  const Got *g = list + list_first[i - 1];
  const uint64_t len = list_first[i] - list_first[i - 1];
  gboolean whole = FALSE;
  for (uint64_t k = 0; k < len && !whole; k++) { /* one holding all of it */
    if (g[k].stage >= msg->stage) break;
    if (rf_box_contains(&plan->pieces[g[k].piece].box, &pc->box, ndim)) {
      last_use[g[k].t] = MAX(last_use[g[k].t], xl[t]);
      whole = TRUE;
    }
  }
  for (uint64_t k = 0; k < len && !whole; k++) { /* else every one meeting it */
    RfBox in;
    if (g[k].stage >= msg->stage) break;
    if (rf_box_intersect(&plan->pieces[g[k].piece].box, &pc->box, ndim, &in))
      last_use[g[k].t] = MAX(last_use[g[k].t], xl[t]);
  }
}

void rf_memory_of_schedule(const RfPlan *plan, const RfSchedule *sg, gboolean lane_comms,
                           RfMemory *out) {
  const RfProblem *pb = plan->problem;
  rf_memory_weights(pb, out);
  out->from = RF_MEMORY_FROM_SCHEDULE;
  if (sg->pipelined && !sg->seg_round) return; /* never built so (schedule.h) */
  const int nd = pb->dst.nranks;
  int *didx = dst_index_new(pb); /* rank -> its index in pb->dst.ranks, or -1: not inference */
  /* every transfer's first and last round (its bytes at its place in its message; staged
   * schedules: its stage) */
  int32_t *xf = g_new(int32_t, plan->nxfers + 1), *xl = g_new(int32_t, plan->nxfers + 1);
  for (uint64_t m = 0; m < plan->nmsgs; m++) {
    const RfMessage *msg = &plan->msgs[m];
    uint64_t w = 0;
    for (uint64_t t = msg->first; t < (uint64_t)msg->first + msg->count; t++) {
      const uint64_t bytes = plan->pieces[plan->xfers[t].piece].bytes;
      int f = msg->stage, l = f; /* staged: real/ keeps pieces by stage */
      if (sg->pipelined) rf_schedule_byte_rounds(sg, m, w, bytes, &f, &l);
      xf[t] = f;
      xl[t] = l;
      w += bytes;
    }
  }
  /* The holding store as real/ lays it out (real/lists.c): an inference rank sends a piece from
   * the pieces of its part it received at earlier stages, the first one holding all of the
   * piece, or else every one meeting it; a received piece it sends from is held from its first
   * round to the last round of those sends. Transfers are sorted by stage, so the pieces a rank
   * received of a part are listed in transfer order and a send looks only at those of earlier
   * stages. The lists: one array, by (rank, part) (a GHashTable of arrays cost a node, an array
   * and a pointer chase per key, and Kimi K3's tens of millions of transfers made it the larger
   * part of this pass; an RfU64Map of slots cost three random lookups a transfer: a dense
   * table of every (inference rank, part) where it fits SLOTS_TABLE_BYTES, 9.6 MB for Kimi K3's
   * 1,024 ranks). */
  Slots slot_of = {.nparts = pb->model->nparts, .didx = didx};
  if (nd > 0 && (uint64_t)nd * slot_of.nparts * sizeof(int32_t) <= slots_table_bytes)
    slot_of.dense = rf_big_alloc0(sizeof(int32_t) * ((size_t)nd * slot_of.nparts + 1));
  else
    rf_u64map_init(&slot_of.map, 1024, FALSE);
  GArray *count = g_array_new(FALSE, TRUE, sizeof(uint64_t)); /* per list, then its offset */
  for (uint64_t m = 0; m < plan->nmsgs; m++) {
    const RfMessage *msg = &plan->msgs[m];
    if (didx[msg->dst] < 0) continue;
    for (uint64_t t = msg->first; t < (uint64_t)msg->first + msg->count; t++) {
      const uint32_t part = plan->pieces[plan->xfers[t].piece].part;
      int32_t i = slot_get(&slot_of, msg->dst, part);
      if (!i) {
        g_array_set_size(count, count->len + 1);
        i = (int32_t)count->len;
        slot_set(&slot_of, msg->dst, part, i);
      }
      g_array_index(count, uint64_t, i - 1)++;
    }
  }
  const guint nlists = count->len;
  uint64_t *list_first = g_new(uint64_t, (size_t)nlists + 1), *fill = g_new(uint64_t, nlists + 1);
  list_first[0] = 0;
  for (guint i = 0; i < nlists; i++) {
    list_first[i + 1] = list_first[i] + g_array_index(count, uint64_t, i);
    fill[i] = list_first[i];
  }
  g_array_free(count, TRUE);
  Got *list = rf_big_alloc(sizeof(Got) * (list_first[nlists] + 1));
  for (uint64_t m = 0; m < plan->nmsgs; m++) {
    const RfMessage *msg = &plan->msgs[m];
    if (didx[msg->dst] < 0) continue;
    for (uint64_t t = msg->first; t < (uint64_t)msg->first + msg->count; t++) {
      const RfTransfer *x = &plan->xfers[t];
      list[fill[slot_get(&slot_of, msg->dst, plan->pieces[x->piece].part) - 1]++] =
          (Got){t, msg->stage, x->piece};
    }
  }
  g_free(fill);
  int32_t *last_use = g_new(int32_t, plan->nxfers + 1);
  for (uint64_t t = 0; t < plan->nxfers; t++)
    last_use[t] = -1;
  for (uint64_t m = 0; m < plan->nmsgs; m++) {
    const RfMessage *msg = &plan->msgs[m];
    if (didx[msg->src] >= 0)
      for (uint64_t t = msg->first; t < (uint64_t)msg->first + msg->count; t++)
        hold_uses(plan, &slot_of, list, list_first, msg, t, xl, last_use);
  }
  if (slot_of.dense)
    g_free(slot_of.dense);
  else
    rf_u64map_free(&slot_of.map);
  g_free(list_first);
  g_free(list);
  /* Each inference rank's peak of live holding bytes: a held piece is live from its first round
   * to the round after its last use, so the bytes that become live less those freed at each
   * round, summed in round order, give the live bytes after every round (frees and allocations
   * of one round net: the peak of the events sorted by round, frees first). Per block of ranks
   * whose rounds fit RF_HOLD_BLOCK_BYTES: a pass over the transfers each (one for Kimi K3's
   * 1,024 ranks x 5,263 rounds). */
  uint64_t R = 1; /* past the last round an event falls in */
  for (uint64_t t = 0; t < plan->nxfers; t++)
    if (last_use[t] >= 0 && plan->pieces[plan->xfers[t].piece].bytes)
      R = MAX(R, (uint64_t)MAX(last_use[t], xf[t]) + 2);
  uint64_t *hold = g_new0(uint64_t, MAX(nd, 1));
  const uint64_t block = MAX(1, RF_HOLD_BLOCK_BYTES / (sizeof(int64_t) * R));
  int64_t *diff = RF_BIG_NEW(int64_t, MIN(block, (uint64_t)MAX(nd, 1)) * R);
  for (uint64_t b0 = 0; b0 < (uint64_t)nd; b0 += block) {
    const uint64_t b1 = MIN((uint64_t)nd, b0 + block);
    memset(diff, 0, sizeof(int64_t) * (b1 - b0) * R);
    for (uint64_t m = 0; m < plan->nmsgs; m++) {
      const RfMessage *msg = &plan->msgs[m];
      const int i = didx[msg->dst];
      if (i < (int)b0 || i >= (int)b1) continue;
      int64_t *d = diff + (uint64_t)(i - (int)b0) * R;
      for (uint64_t t = msg->first; t < (uint64_t)msg->first + msg->count; t++) {
        const int64_t bytes = (int64_t)plan->pieces[plan->xfers[t].piece].bytes;
        if (last_use[t] < 0 || !bytes) continue;
        d[xf[t]] += bytes;
        d[MAX(last_use[t], xf[t]) + 1] -= bytes;
      }
    }
    for (uint64_t i = b0; i < b1; i++) {
      const int64_t *d = diff + (i - b0) * R;
      int64_t live = 0, peak = 0;
      for (uint64_t k = 0; k < R; k++) {
        live += d[k];
        peak = MAX(peak, live);
      }
      hold[i] = (uint64_t)peak;
    }
  }
  g_free(diff);
  g_free(xf);
  g_free(xl);
  g_free(last_use);
  out->comms = lane_comms ? MAX(sg->slots, 1) : 1;
  uint64_t *nccl = nccl_of_ranks(plan, sg, out->comms, didx);
  g_free(didx);
  for (int i = 0; i < pb->dst.nranks; i++) {
    const int r = pb->dst.ranks[i];
    /* one lane holds the rank's fullest round each way, as real/lists.c lays it out */
    count_rank(out, r, hold[i], (uint64_t)sg->slots * (sg->send_max[r] + sg->recv_max[r]), nccl[i]);
  }
  g_free(nccl);
  g_free(hold);
}

gboolean rf_memory_exceeds(const RfMemory *m) {
  return m->gpu_memory_bytes > 0 && (double)m->peak_bytes > m->gpu_memory_bytes;
}

char *rf_memory_format(const RfMemory *m) {
  char cap[64];
  if (m->gpu_memory_bytes > 0)
    g_snprintf(cap, sizeof cap, " of %.4g GB", m->gpu_memory_bytes / 1e9);
  else
    g_snprintf(cap, sizeof cap, " (GPU memory unknown: no [gpu] memory_GB)");
  char nccl[64] = "";
  if (m->nccl_bytes)
    g_snprintf(nccl, sizeof nccl, ", NCCL %.4g%s", m->nccl_bytes / 1e9,
               m->comms > 1 ? " in communicators of the lanes too" : "");
  return g_strdup_printf(
      "inference GPU: weights %.4g GB%s + refit extra %.4g GB (%s %.4g, "
      "staging %.4g%s) = %.4g GB%s",
      m->weights_bytes / 1e9, m->banks == 2 ? " x 2 banks" : "", m->extra_bytes / 1e9,
      m->from == RF_MEMORY_FROM_BUCKETS ? "buckets" : "holding", m->hold_bytes / 1e9,
      m->staging_bytes / 1e9, nccl, m->peak_bytes / 1e9, cap);
}

const char *rf_memory_from_name(const RfMemory *m) {
  static const char *const names[2][4] = {
      {"in place, weights only", "in place, refit run's schedule",
       "in place, by the plan's stages: refit run's schedule too large to build here",
       "NeMo RL's reused broadcast buckets"},
      {"double bank, weights only", "double bank, refit run's schedule",
       "double bank, by the plan's stages: refit run's schedule too large to build here",
       "NeMo RL's reused broadcast buckets, double bank"}};
  return names[m->banks == 2][m->from];
}

const char *rf_memory_from_key(const RfMemory *m) {
  static const char *const keys[] = {"weights", "schedule", "plan", "buckets"};
  return keys[m->from];
}

void rf_memory_run_init(RfMemoryRun *run) {
  memset(run, 0, sizeof *run);
  run->staging_bytes = RF_SCHEDULE_DEFAULT_STAGING_BYTES;
  run->max_ops = RF_SCHEDULE_DEFAULT_MAX_OPS;
  run->slots = RF_SCHEDULE_DEFAULT_SLOTS;
  run->banks = 1;
  run->max_segments = RF_MEMORY_MAX_SEGMENTS;
}

/* NeMo RL's packed broadcast (nemo_rl/utils/packed_tensor.py, packed_comm_consumer, NVIDIA-NeMo/RL
 * at 599730cb2fdbdef2a0dad8bd0b4a6e22779abc4d): a consumer receives each bucket into one of
 * NRL_REFIT_NUM_BUFFERS buffers (default 2), unpacks it into the weights and reuses the buffer;
 * a bucket closes once it exceeds the target (min(NRL_REFIT_BUFFER_MEMORY_RATIO, default 0.02,
 * x GPU memory, 5 GiB)), so it is at most the target plus one parameter (a routed expert's slice
 * of a stacked tensor). Nothing else is held: the buffers are the extra. */
static void memory_of_buckets(const RfPlan *plan, const RfMemoryRun *run, RfMemory *out) {
  const RfModel *md = plan->problem->model;
  rf_memory_weights(plan->problem, out);
  out->from = RF_MEMORY_FROM_BUCKETS;
  uint64_t largest = 0;
  for (uint32_t t = 0; t < md->ntensors; t++) {
    const RfTensor *x = &md->tensors[t];
    uint64_t e = 1;
    for (int d = 0; d < x->ndim; d++)
      e *= (uint64_t)x->shape[d];
    e *= (uint64_t)rf_dtype_size(x->dtype);
    largest = MAX(largest, e / (uint64_t)MAX(1, x->nexperts));
  }
  const uint64_t bucket = MIN(run->bucket_bytes + largest, (uint64_t)rf_model_bytes(md));
  out->hold_bytes = out->extra_bytes = (uint64_t)MAX(1, run->buffers) * bucket;
  out->peak_bytes = out->weights_bytes + out->extra_bytes;
}

/* A staged schedule too large to build: its holding needs only the plan's stages (real/ keeps
 * pieces by stage), so it is counted exactly; a lane's staging is bounded by the staging bound
 * and by the rank's bytes of one stage each way (whole-bound segments take a full lane; first-fit
 * may spread the rest over more rounds, so this is an upper bound). */
static void staged_unbuilt(const RfPlan *plan, const RfMemoryRun *run, RfMemory *out) {
  const int n = plan->problem->nranks;
  const uint64_t B = run->staging_bytes;
  RfSchedule sg = {0};
  sg.slots = run->slots;
  sg.nranks = n;
  sg.send_max = g_new0(uint64_t, n);
  sg.recv_max = g_new0(uint64_t, n);
  uint64_t *sum = g_new0(uint64_t, 2 * (size_t)n);
  int *at = g_new(int, 2 * (size_t)n); /* the stage sum[] is of, per rank and direction */
  for (int i = 0; i < 2 * n; i++)
    at[i] = -1;
  for (uint64_t m = 0; m < plan->nmsgs; m++) { /* sorted by stage */
    const RfMessage *g = &plan->msgs[m];
    const uint64_t b =
        MIN(B, (g->bytes + RF_SCHEDULE_ALIGN - 1) / RF_SCHEDULE_ALIGN * RF_SCHEDULE_ALIGN);
    const int k[2] = {2 * g->src, 2 * g->dst + 1};
    for (int d = 0; d < 2; d++) {
      if (at[k[d]] != g->stage) sum[k[d]] = 0;
      at[k[d]] = g->stage;
      sum[k[d]] = MIN(B, sum[k[d]] + b);
    }
    sg.send_max[g->src] = MAX(sg.send_max[g->src], sum[k[0]]);
    sg.recv_max[g->dst] = MAX(sg.recv_max[g->dst], sum[k[1]]);
  }
  rf_memory_of_schedule(plan, &sg, run->lane_comms, out);
  out->from = RF_MEMORY_FROM_STAGES;
  g_free(sum);
  g_free(at);
  g_free(sg.send_max);
  g_free(sg.recv_max);
}

gboolean rf_memory_run_builds(const RfPlan *plan, const RfMemoryRun *run) {
  if (run->bucket_bytes > 0 && plan->strategy == RF_STRATEGY_GATHER_BROADCAST) return FALSE;
  return !run->max_segments ||
         rf_schedule_segments(plan, run->staging_bytes, !run->staged) <= run->max_segments;
}

gboolean rf_memory_of_run(const RfPlan *plan, const RfMemoryRun *run, RfMemory *out,
                          GError **error) {
  if (run->bucket_bytes > 0 && plan->strategy == RF_STRATEGY_GATHER_BROADCAST) {
    memory_of_buckets(plan, run, out);
  } else if (!rf_memory_run_builds(plan, run)) { /* too many segments to build for a count */
    if (!run->staged)
      rf_memory_of_plan_staging(plan, run->staging_bytes, run->slots, run->lane_comms, out);
    else
      staged_unbuilt(plan, run, out);
  } else {
    RfSchedule *sg =
        rf_schedule_build(plan, plan->problem->nranks, run->staging_bytes, run->max_ops, run->slots,
                          rf_memory_count_flags(run->staged, run->lane_comms), NULL, NULL, error);
    if (!sg) return FALSE;
    rf_memory_of_schedule(plan, sg, run->lane_comms, out);
    rf_schedule_free(sg);
  }
  rf_memory_set_banks(out, run->banks);
  return TRUE;
}
