/* The schedule of a plan (schedule.h): segments into rounds, rounds into lanes, and the program
 * each rank issues.
 *
 * Round assignment: usage is kept per rank, only for the rounds up to the last one the rank takes
 * part in (a rank is idle in every later round), so a stage costs what its segments touch, not
 * ranks x rounds. The search for a segment starts where first-fit can first succeed: past the
 * rounds that are full for either end (open pointers) and, for the next full-size segment of the
 * same message, at the round of the one before (the rounds before it had no room for that size
 * then, and usage only grows). The result is the plain first-fit assignment, segment by
 * segment. */
#include "schedule.h"

#include "bigmem.h"
#include "error.h"
#include "sort.h"

#include <string.h>

/* The large arrays below (dependency graph, arrivals, segments' rounds and dependencies,
 * endpoint lists) are walked out of order on schedules of hundreds of millions of segments:
 * RF_BIG_NEW advises their pages as huge-page candidates (fewer TLB misses and faults). */

/* Rounds of usage a rank keeps allocated from one stage to the next (a few KiB). */
#define KEEP_SLOTS 256u

/* One rank's usage of one round. */
typedef struct {
  uint64_t send, recv; /* staging bytes */
  uint32_t ops;
} Slot;

/* One rank's usage of the rounds of the stage being filled: slot[0 .. len), idle after. */
typedef struct {
  Slot *slot;
  guint len, cap;
  guint open_send, open_recv; /* rounds below are full for it as a sender (receiver) */
  guint full_send, full_recv; /* rounds below cannot take a full-size segment that way */
  gboolean touched;
} RankUse;

static Slot *rank_slot(RankUse *u, guint r) {
  if (r >= u->cap) {
    guint cap = MAX(16u, u->cap);
    while (cap <= r)
      cap *= 2;
    u->slot = g_renew(Slot, u->slot, cap);
    u->cap = cap;
  }
  if (r >= u->len) {
    memset(u->slot + u->len, 0, sizeof(Slot) * (r + 1 - u->len));
    u->len = r + 1;
  }
  return &u->slot[r];
}

static gboolean send_fits(const RankUse *u, guint r, uint64_t b, uint64_t B, int need,
                          int max_ops) {
  if (r >= u->len) return TRUE;
  const Slot *s = &u->slot[r];
  return s->send + b <= B && (int)s->ops + need <= max_ops;
}

static gboolean recv_fits(const RankUse *u, guint r, uint64_t b, uint64_t B, int need,
                          int max_ops) {
  if (r >= u->len) return TRUE;
  const Slot *s = &u->slot[r];
  return s->recv + b <= B && (int)s->ops + need <= max_ops;
}

/* A round that cannot take even the smallest segment from (to) the rank never will again in this
 * stage: first-fit may start after it. */
static void advance_open(RankUse *u, uint64_t B, int max_ops) {
  while (u->open_send < u->len && !send_fits(u, u->open_send, RF_SCHEDULE_ALIGN, B, 1, max_ops))
    u->open_send++;
  while (u->open_recv < u->len && !recv_fits(u, u->open_recv, RF_SCHEDULE_ALIGN, B, 1, max_ops))
    u->open_recv++;
}

static uint64_t align_up(uint64_t x, uint64_t a) {
  return (x + a - 1) / a * a;
}

void rf_schedule_free(RfSchedule *s) {
  if (!s) return;
  g_free(s->seg_first);
  g_free(s->seg_round);
  g_free(s->seg_dep);
  g_free(s->stage_round0);
  g_free(s->send_max);
  g_free(s->recv_max);
  g_free(s);
}

/* A segment's bytes at a staging bound: the aligned bound staged, a quarter of it pipelined (at
 * least one aligned unit); 0 for a bound below one unit. */
static uint64_t segment_bytes(uint64_t staging_bytes, gboolean pipelined) {
  const uint64_t room = staging_bytes / RF_SCHEDULE_ALIGN * RF_SCHEDULE_ALIGN;
  if (!pipelined || !room) return room;
  return MAX(RF_SCHEDULE_ALIGN, room / RF_SCHEDULE_CUTS / RF_SCHEDULE_ALIGN * RF_SCHEDULE_ALIGN);
}

uint64_t rf_schedule_segments(const RfPlan *plan, uint64_t staging_bytes, gboolean pipelined) {
  const uint64_t seg = MAX(1, segment_bytes(staging_bytes, pipelined));
  uint64_t n = 0;
  for (uint64_t m = 0; m < plan->nmsgs; m++)
    n += (plan->msgs[m].bytes + seg - 1) / seg;
  return n;
}

static uint64_t piece_bytes(const RfPlan *plan, uint64_t t) {
  return plan->pieces[plan->xfers[t].piece].bytes;
}

/* ---- pipelined schedules: rounds in time order ------------------------------------------ */

/* A transfer t (in plan order: by stage) with bytes, of message m (both below 2^32:
 * check_pipelined); its segments come from xfer_segs. */
typedef struct {
  uint32_t m, t;
  uint64_t w;      /* the piece's first byte in its message */
  uint32_t g0, g1; /* its segments [g0, g1) (xfer_segs; segment ids fit 32 bits) */
} Arrival;

/* The segments of message m that carry transfer t (at byte w of the message, bytes b). */
static void xfer_segs(const RfSchedule *s, uint64_t m, uint64_t w, uint64_t b, uint64_t *g0,
                      uint64_t *g1) {
  *g0 = s->seg_first[m] + w / s->seg_bytes;
  *g1 = s->seg_first[m] + (w + b - 1) / s->seg_bytes + 1;
}

static uint64_t arrival_key(int rank, uint32_t part) {
  return (uint64_t)(uint32_t)rank << 32 | part;
}

/* Which segment waits for which: a segment that sends a piece on waits for every segment that
 * brought its sender, at an earlier stage, a piece the pack may read: the candidates real/'s box
 * cover takes (lists.c, rank_sources), i.e. the pieces of the same part meeting its box, in plan
 * order up to the first that holds all of it (without a problem to name the parts' ranks: the
 * same piece). When that first candidate is the very box sent on (m2n's forwarding and fan-out
 * of a piece as it came), byte k of the piece sent is byte k of the piece held (both row-major
 * in the one box), so a segment waits only for the segments that brought its own bytes: a
 * piece goes on as its first segments land, not once all of it has (chunk-pipelined). As lists
 * of dependents (CSR: dependents of segment g are next[first[g] .. first[g + 1])) and a count of
 * prerequisites. */
typedef struct {
  uint32_t npre; /* prerequisites not yet placed */
  uint32_t dep1; /* 1 + the latest round of those placed (seg_dep + 1; zero-filled: pages of
                    segments without prerequisites are never touched) */
} PreDep;

typedef struct {
  uint32_t *first; /* the pairs fit 32 bits (checked in dep_graph_build) */
  uint32_t *next;  /* node ids fit 32 bits (check_pipelined): half the largest array's bytes */
  PreDep *pre;     /* per segment: both in one place (a placement updates both of each dependent) */
  uint64_t nsegs;  /* nodes below are segments; nodes nsegs + i join arrival i (below) */
} DepGraph;

/* Where the (before, after) pairs of segments go: counted per `before` (count[before + 1]; next
 * NULL), or written into their bucket (next[fill[before]++] = after). */
typedef struct {
  uint32_t *count;  /* DepGraph.first, before its prefix sum */
  gboolean wrapped; /* a count passed 2^32 - 1 (the pairs are then too many: refused) */
  uint32_t *fill, *next;
  uint64_t nsegs;  /* the first join node */
  uint8_t *joined; /* per arrival: its segments already point at its join node */
} PairSink;

static inline void pair_push(PairSink *k, uint64_t before, uint64_t after) {
  if (!k->next)
    k->wrapped |= !++k->count[before + 1];
  else
    k->next[k->fill[before]++] = (uint32_t)after;
}

/* The transfers as arrivals: sorted by (receiving rank, part), then t, arrival i is transfer
 * xv[id[i]] with key[i]; rank x's are i in [rank_first[x], rank_first[x + 1]). Keys and ids
 * apart from the transfers: 12 bytes an arrival, not a copy of the 40-byte record. */
typedef struct {
  const uint64_t *key;
  const uint32_t *id;
  const uint64_t *info; /* beside key: the transfer's stage << 32 | its piece (the scan of a key's
                           arrivals reads these in order, not a transfer and an arrival each) */
  const guint *rank_first;
  const uint32_t *first; /* per (rank, part): rank x nparts + part -> its first arrival + 1, 0:
                            none (NULL: a binary search among the rank's, a dozen cache misses a
                            transfer) */
  uint32_t nparts;
} Arrivals;

/* The most bytes of Arrivals.first (a rank x part table); above it, the binary search. */
#define RF_ARRIVALS_TABLE_BYTES ((uint64_t)256 << 20)

/* The pairs of the rule above, every transfer xv[0 .. n) against the arrivals av. */
static void dep_pairs(const RfSchedule *s, const RfPlan *plan, const Arrival *xv,
                      const Arrivals *av, guint n, PairSink *pairs) {
  const RfModel *model = plan->problem ? plan->problem->model : NULL;
  enum { AHEAD = 16 }; /* transfers ahead whose key's slot is loaded (a cache miss each) */
  for (guint j = 0; j < n; j++) {
    if (av->first && j + AHEAD < n) {
      const RfTransfer *y = &plan->xfers[xv[j + AHEAD].t];
      const int src = plan->msgs[xv[j + AHEAD].m].src;
      if (av->rank_first[src] < av->rank_first[src + 1])
        __builtin_prefetch(&av->first[(uint64_t)src * av->nparts + plan->pieces[y->piece].part]);
    }
    const RfMessage *msg = &plan->msgs[xv[j].m];
    const RfTransfer *x = &plan->xfers[xv[j].t];
    const RfPiece *pc = &plan->pieces[x->piece];
    const uint64_t g0 = xv[j].g0, g1 = xv[j].g1; /* the transfer's segments */
    guint lo = av->rank_first[msg->src], hi = av->rank_first[msg->src + 1];
    if (lo == hi) continue; /* its sender received nothing */
    const int ndim = model ? model->parts[pc->part].ndim : 0;
    const uint64_t key = arrival_key(msg->src, model ? pc->part : x->piece);
    if (av->first) { /* the first arrival with this key */
      const uint32_t f = av->first[(uint64_t)msg->src * av->nparts + pc->part];
      if (!f) continue;
      lo = f - 1;
    } else { /* searched among its rank's (a smaller, nearer range) */
      while (lo < hi) {
        guint mid = lo + (hi - lo) / 2;
        if (av->key[mid] < key)
          lo = mid + 1;
        else
          hi = mid;
      }
    }
    gboolean first_met = TRUE;
    for (guint i = lo; i < n && av->key[i] == key; i++) {
      if (av->info[i] >> 32 >= msg->stage) break; /* only what came earlier */
      const Arrival *a = &xv[av->id[i]];
      const RfBox *held = &plan->pieces[(uint32_t)av->info[i]].box;
      RfBox in;
      if (model && !rf_box_intersect(&pc->box, held, ndim, &in)) continue;
      const gboolean whole = !model || rf_box_contains(held, &pc->box, ndim);
      if (first_met && whole && (!model || rf_box_contains(&pc->box, held, ndim))) {
        /* the same box: segment g needs the arriving segments of its own bytes */
        const uint64_t C = s->seg_bytes, b = pc->bytes;
        const uint64_t m_in = s->seg_first[a->m]; /* the arriving message's first segment */
        for (uint64_t g = g0; g < g1; g++) {
          const uint64_t g_lo = (g - s->seg_first[xv[j].m]) * C, g_hi = g_lo + C;
          const uint64_t lo_b = MAX(g_lo, xv[j].w) - xv[j].w; /* the piece's bytes in g */
          const uint64_t hi_b = MIN(g_hi, xv[j].w + b) - xv[j].w;
          for (uint64_t ga = m_in + (a->w + lo_b) / C; ga <= m_in + (a->w + hi_b - 1) / C; ga++)
            pair_push(pairs, ga, g);
        }
        break;
      }
      first_met = FALSE;
      /* every segment of the arrival before every segment of the transfer: through the
       * arrival's join node, which is placed when the last of them is, so that the pairs are
       * as many as the two counts together, not their product (a gathered tensor sent on whole
       * reads a whole shard: DeepSeek-V3's gather-broadcast made 36 G pairs) */
      const uint64_t v = pairs->nsegs + i;
      if (!pairs->joined[i]) {
        pairs->joined[i] = 1;
        for (uint64_t ga = a->g0; ga < a->g1; ga++)
          pair_push(pairs, ga, v);
      }
      for (uint64_t g = g0; g < g1; g++)
        pair_push(pairs, v, g);
      if (whole) break;
    }
  }
}

static gboolean dep_graph_build(DepGraph *d, const RfSchedule *s, const RfPlan *plan,
                                GError **error) {
  const RfModel *model = plan->problem ? plan->problem->model : NULL;
  /* every transfer with bytes */
  g_autoptr(GArray) xs =
      g_array_sized_new(FALSE, FALSE, sizeof(Arrival), (guint)MAX(plan->nxfers, 1));
  rf_big_advise(xs->data, sizeof(Arrival) * MAX(plan->nxfers, 1)); /* huge pages: bigmem.h */
  for (uint64_t m = 0; m < plan->nmsgs; m++) {
    const RfMessage *msg = &plan->msgs[m];
    uint64_t w = 0;
    for (uint64_t t = msg->first; t < (uint64_t)msg->first + msg->count; t++) {
      const uint64_t b = piece_bytes(plan, t);
      if (!b) continue;
      uint64_t g0, g1;
      xfer_segs(s, m, w, b, &g0, &g1);
      const Arrival x = {(uint32_t)m, (uint32_t)t, w, (uint32_t)g0, (uint32_t)g1};
      g_array_append_val(xs, x);
      w += b;
    }
  }
  const Arrival *xv = (const Arrival *)(void *)xs->data;
  /* what a rank receives, by (rank, part), then t: xs is in plan order (t ascending), so a
   * stable sort by (rank, part) */
  const size_t nx = xs->len ? xs->len : 1;
  g_autofree uint64_t *akey = RF_BIG_NEW(uint64_t, nx); /* the sorted keys */
  g_autofree uint32_t *aid = RF_BIG_NEW(uint32_t, nx);
  {
    g_autofree uint64_t *key = RF_BIG_NEW(uint64_t, nx), *id = RF_BIG_NEW(uint64_t, nx);
    for (guint i = 0; i < xs->len; i++) {
      const RfTransfer *x = &plan->xfers[xv[i].t];
      key[i] = arrival_key(plan->msgs[xv[i].m].dst, model ? plan->pieces[x->piece].part : x->piece);
      id[i] = i;
    }
    rf_radix_sort(id, akey, xs->len, key, FALSE); /* akey: the sort's room, then the keys */
    for (guint i = 0; i < xs->len; i++) {
      aid[i] = (uint32_t)id[i];
      akey[i] = key[id[i]];
    }
  }
  g_autofree uint64_t *ainfo = RF_BIG_NEW(uint64_t, nx);
  for (guint i = 0; i < xs->len; i++) {
    const Arrival *a = &xv[aid[i]];
    ainfo[i] = (uint64_t)plan->msgs[a->m].stage << 32 | plan->xfers[a->t].piece;
  }
  g_autofree guint *rank_first = g_new0(guint, (size_t)s->nranks + 1);
  for (guint i = 0; i < xs->len; i++) /* the keys are (rank, part): by rank first */
    rank_first[(akey[i] >> 32) + 1]++;
  for (int x = 0; x < s->nranks; x++)
    rank_first[x + 1] += rank_first[x];
  /* each (rank, part)'s first arrival, where the model names parts and the table is small
   * (Kimi K3 on 3,072 ranks: tens of MB) */
  const uint32_t nparts = model ? model->nparts : 0;
  g_autofree uint32_t *first_of = NULL;
  if (nparts && xs->len < UINT32_MAX &&
      (uint64_t)s->nranks * nparts * sizeof(uint32_t) <= RF_ARRIVALS_TABLE_BYTES) {
    first_of = RF_BIG_NEW0(uint32_t, (uint64_t)s->nranks * nparts);
    for (guint i = 0; i < xs->len; i++)
      if (!i || akey[i] != akey[i - 1])
        first_of[(akey[i] >> 32) * nparts + (uint32_t)akey[i]] = i + 1;
  }
  const Arrivals av = {akey, aid, ainfo, rank_first, first_of, nparts};
  /* as CSR without sorting the pairs: counted by `before`, then written into their buckets
   * (two passes over the rule: no list of pairs), each bucket's `after` sorted and deduplicated
   * (a few each): the sorted, distinct pairs */
  const uint64_t nn = s->nsegs + xs->len; /* segments, then a join node per arrival */
  d->nsegs = s->nsegs;
  /* counted in the offsets' own 32-bit array, summed there (a 64-bit array of counts beside it
   * was a gigabyte of fresh pages for Kimi K3's hybrid) */
  d->first = RF_BIG_NEW0(uint32_t, nn + 1);
  g_autofree uint8_t *joined = g_new0(uint8_t, xs->len ? xs->len : 1);
  PairSink sink = {d->first, FALSE, NULL, NULL, s->nsegs, joined};
  dep_pairs(s, plan, xv, &av, xs->len, &sink);
  uint64_t total = 0;
  for (uint64_t g = 1; g <= nn; g++) {
    total += d->first[g];
    d->first[g] = (uint32_t)MIN(total, UINT32_MAX);
  }
  if (sink.wrapped || total > UINT32_MAX) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "%s%" G_GUINT64_FORMAT " dependency pairs: more than the pipelined schedule "
                "numbers (2^32)",
                sink.wrapped ? "more than " : "", total);
    g_clear_pointer(&d->first, g_free);
    return FALSE;
  }
  d->pre = RF_BIG_NEW0(PreDep, nn ? nn : 1);
  d->next = RF_BIG_NEW(uint32_t, d->first[nn] ? d->first[nn] : 1);
  memset(joined, 0, sizeof(uint8_t) * (xs->len ? xs->len : 1));
  sink.next = d->next;
  sink.fill = d->first; /* each bucket's start, then its end: the next one's start */
  dep_pairs(s, plan, xv, &av, xs->len, &sink);
  memmove(d->first + 1, d->first, sizeof(uint32_t) * nn);
  d->first[0] = 0;
  uint64_t np2 = 0, ntmp = 0;
  g_autofree uint64_t *tmp = NULL, *v = NULL;
  for (uint64_t g = 0; g < nn; g++) {
    const uint32_t *b = d->next + d->first[g];
    const uint64_t n = d->first[g + 1] - d->first[g];
    if (n > ntmp) { /* buckets are small: a few each, a join node's as many as a transfer's */
      ntmp = MAX(n, 2 * ntmp);
      g_free(v);
      g_free(tmp);
      v = g_new(uint64_t, ntmp);
      tmp = g_new(uint64_t, ntmp);
    }
    for (uint64_t i = 0; i < n; i++)
      v[i] = b[i];
    rf_radix_sort(v, tmp, n, NULL, FALSE);
    d->first[g] = (uint32_t)np2;
    for (uint64_t i = 0; i < n; i++)
      if (!i || v[i] != v[i - 1]) {
        d->next[np2++] = (uint32_t)v[i];
        d->pre[v[i]].npre++;
      }
  }
  d->first[nn] = (uint32_t)np2;
  return TRUE;
}

static void dep_graph_clear(DepGraph *d) {
  g_free(d->first);
  g_free(d->next);
  g_free(d->pre);
}

/* A round's room over NVLink, in staging bounds: what NVLink carries while the network carries
 * one bound, halved (the copies into and out of staging share the GPU's memory with it), at
 * least 1 and at most RF_SCHEDULE_MAX_NVLINK_SHARE; 1 without a topology. */
uint64_t rf_schedule_nvlink_share(const RfPlan *plan) {
  const RfTopology *t = plan->problem ? plan->problem->topo : NULL;
  if (!t || t->nic_Gbps <= 0 || t->nvlink_GBps <= 0) return 1;
  double x = t->nvlink_GBps * 1e9 / (rf_topology_nic_Bps(t) * MAX(t->nics_per_gpu, 1)) / 2;
  return (uint64_t)CLAMP(x, 1, RF_SCHEDULE_MAX_NVLINK_SHARE);
}

int rf_schedule_max_ops(const RfPlan *plan, gboolean pipelined) {
  if (!pipelined) return RF_SCHEDULE_STAGED_MAX_OPS;
  return 2 * RF_SCHEDULE_CUTS * (1 + (int)rf_schedule_nvlink_share(plan));
}

/* The message of segment g among messages [lo, hi), which hold it (binary search over
 * seg_first). */
static uint64_t seg_message_in(const RfSchedule *s, uint64_t g, uint64_t lo, uint64_t hi) {
  while (hi - lo > 1) { /* the m with seg_first[m] <= g < seg_first[m + 1] */
    uint64_t mid = lo + (hi - lo) / 2;
    if (s->seg_first[mid] <= g)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

static uint64_t seg_message(const RfSchedule *s, uint64_t g) {
  return seg_message_in(s, g, 0, s->nmsgs);
}

/* seg_message narrowed by a table of the message of every (1 << MSG_LUT_SHIFT)-th segment: the
 * placement looks up every segment as it becomes ready. */
#define MSG_LUT_SHIFT 12

static uint64_t *msg_lut_new(const RfSchedule *s) {
  const uint64_t n = (s->nsegs >> MSG_LUT_SHIFT) + 1;
  uint64_t *lut = g_new(uint64_t, n);
  for (uint64_t j = 0; j < n; j++)
    lut[j] = (j << MSG_LUT_SHIFT) < s->nsegs ? seg_message(s, j << MSG_LUT_SHIFT) : s->nmsgs;
  return lut;
}

static uint64_t msg_lut_find(const RfSchedule *s, const uint64_t *lut, uint64_t g) {
  const uint64_t j = g >> MSG_LUT_SHIFT; /* the last entry's messages run to the end */
  const uint64_t hi = j < (s->nsegs >> MSG_LUT_SHIFT) ? MIN(lut[j + 1] + 1, s->nmsgs) : s->nmsgs;
  return seg_message_in(s, g, lut[j], hi);
}

void rf_schedule_byte_rounds(const RfSchedule *s, uint64_t m, uint64_t lo, uint64_t len, int *first,
                             int *last) {
  const uint64_t g0 = s->seg_first[m], B = s->seg_bytes;
  const uint64_t a = g0 + lo / B, b = g0 + (len ? (lo + len - 1) / B : lo / B);
  *first = G_MAXINT;
  *last = -1;
  for (uint64_t g = a; g <= b && g < s->seg_first[m + 1]; g++) {
    *first = MIN(*first, s->seg_round[g]);
    *last = MAX(*last, s->seg_round[g]);
  }
}

uint64_t *rf_schedule_round_offsets(const RfSchedule *s) {
  uint64_t *first = g_new0(uint64_t, (size_t)s->nrounds + 1);
  for (uint64_t g = 0; g < s->nsegs; g++)
    first[s->seg_round[g] + 1]++;
  for (int r = 0; r < s->nrounds; r++)
    first[r + 1] += first[r];
  return first;
}

double rf_schedule_lockstep_s(const RfSchedule *s, const RfPlan *plan) {
  const RfTopology *t = plan->problem ? plan->problem->topo : NULL;
  if (!t || !s->seg_round || t->nic_Gbps <= 0 || t->nvlink_GBps <= 0) return 0;
  const double nic = rf_topology_nic_Bps(t) * MAX(t->nics_per_gpu, 1), nvl = t->nvlink_GBps * 1e9;
  g_autofree uint64_t *first = rf_schedule_round_offsets(s);
  g_autofree uint64_t *order = RF_BIG_NEW(uint64_t, s->nsegs ? s->nsegs : 1);
  {
    g_autofree uint64_t *w = g_memdup2(first, sizeof(uint64_t) * ((size_t)s->nrounds + 1));
    for (uint64_t g = 0; g < s->nsegs; g++)
      order[w[s->seg_round[g]]++] = g;
  }
  g_autofree double *tm = g_new0(double, 4 * (size_t)s->nranks); /* net out, in, NVLink out, in */
  g_autoptr(GArray) touched = g_array_new(FALSE, FALSE, sizeof(int));
  double sum = 0;
  for (int r = 0; r < s->nrounds; r++) {
    for (uint64_t i = first[r]; i < first[r + 1]; i++) {
      const uint64_t g = order[i], m = seg_message(s, g);
      const RfMessage *msg = &plan->msgs[m];
      if (msg->src == msg->dst) continue;
      const uint64_t lo = (g - s->seg_first[m]) * s->seg_bytes;
      const double b = (double)MIN(s->seg_bytes, msg->bytes - lo);
      const int net = (msg->flags & RF_XFER_NET) != 0;
      double *a = &tm[4 * msg->src + (net ? 0 : 2)], *z = &tm[4 * msg->dst + (net ? 1 : 3)];
      if (!tm[4 * msg->src] && !tm[4 * msg->src + 1] && !tm[4 * msg->src + 2] &&
          !tm[4 * msg->src + 3])
        g_array_append_val(touched, msg->src);
      *a += b / (net ? nic : nvl);
      if (!tm[4 * msg->dst] && !tm[4 * msg->dst + 1] && !tm[4 * msg->dst + 2] &&
          !tm[4 * msg->dst + 3])
        g_array_append_val(touched, msg->dst);
      *z += b / (net ? nic : nvl);
    }
    double slowest = 0;
    for (guint k = 0; k < touched->len; k++) {
      double *q = &tm[4 * g_array_index(touched, int, k)];
      slowest = MAX(slowest, MAX(MAX(q[0], q[1]), MAX(q[2], q[3])));
      q[0] = q[1] = q[2] = q[3] = 0;
    }
    g_array_set_size(touched, 0);
    sum += slowest;
  }
  return sum;
}

/* Pipelined placement, round after round. In each round every message, in priority order, puts
 * in those of its segments that are ready (every segment they wait for sits `slots` rounds or more
 * before: the sender retires that round before it packs this one without stalling, schedule.h)
 * while both ends have room: a segment may go before an earlier one of its message, so a fan-out
 * does not wait behind a piece that has not arrived yet. Room is kept per link class, per rank
 * and direction: the staging bound over the network, rf_schedule_nvlink_share() bounds over NVLink
 * (the two ride different links; a lane holds both), and max_ops operations in all. Priority,
 * renewed every round: network messages first, then the message whose busier end (sender's sends or
 * receiver's receives of its class) has the most bytes left, so that the ranks that bound the
 * refit are fed every round (rounds run nearly in lockstep: a round waits for its slowest
 * peer); equal keys, the lower message first. Messages without a ready segment sit out the
 * round.
 *
 * How the order is walked (the result is the one of sorting every ready message by its key):
 * a message's key is that of its busier end, an "endpoint" (rank, class, direction) whose key is
 * the class bit and its bytes left at the start of the round. The endpoints are sorted by key;
 * each takes, in message order, the ready messages whose key it gives (the source's on a tie);
 * endpoints of equal keys merge theirs by message. An endpoint already full (no operation, or no
 * aligned unit of room, left) is passed over whole, and one that fills stops there: none of its
 * remaining messages could place a segment. A round so costs the endpoints with room, not every
 * ready message, and a turn visits only the endpoint's messages with a ready segment (a bit per
 * message of its list), deciding which end keys each from the two endpoints' keys alone. */

/* A set of segments as a bitmap with a summary (bit w of sum: word w of bit is not empty), for
 * visiting the members at or after a segment in ascending order without scanning the others. */
typedef struct {
  uint64_t *bit, *sum;
} SegSet;

static void segset_init(SegSet *b, uint64_t n) {
  const uint64_t nw = n / 64 + 1;
  b->bit = RF_BIG_NEW0(uint64_t, nw);
  b->sum = g_new0(uint64_t, nw / 64 + 1);
}

static void segset_add(SegSet *b, uint64_t g) {
  b->bit[g / 64] |= UINT64_C(1) << (g % 64);
  b->sum[g / 4096] |= UINT64_C(1) << (g / 64 % 64);
}

static void segset_del(SegSet *b, uint64_t g) {
  b->bit[g / 64] &= ~(UINT64_C(1) << (g % 64));
  if (!b->bit[g / 64]) b->sum[g / 4096] &= ~(UINT64_C(1) << (g / 64 % 64));
}

/* The first member >= g and < end, or end. */
static uint64_t segset_next(const SegSet *b, uint64_t g, uint64_t end) {
  if (g >= end) return end;
  uint64_t w = g / 64, x = b->bit[w] & (~UINT64_C(0) << (g % 64));
  if (x) return MIN(end, w * 64 + (uint64_t)__builtin_ctzll(x));
  const uint64_t wend = (end - 1) / 64; /* the last word that may hold a member < end */
  for (w++; w <= wend;) {
    const uint64_t y = b->sum[w / 64] & (~UINT64_C(0) << (w % 64));
    if (!y) {
      w = (w / 64 + 1) * 64;
      continue;
    }
    w = w / 64 * 64 + (uint64_t)__builtin_ctzll(y);
    if (w > wend) break;
    return MIN(end, w * 64 + (uint64_t)__builtin_ctzll(b->bit[w]));
  }
  return end;
}

/* An endpoint's message, with what a turn looks at beside it in one place (one cache line where
 * three arrays took three: the turns' visits are their misses). Messages and endpoints are below
 * 2^32 (check_pipelined). */
typedef struct {
  uint32_t m;     /* the message */
  uint32_t other; /* its other endpoint (no look at the message) */
  uint32_t tail;  /* its short last segment in aligned units (0: none), so that msg_no_fit does
                     not load the message */
} EpMsg;

/* The state of one pipelined placement. Endpoint e = 4 x rank + 2 x class + direction (0: the
 * rank sends, 1: it receives), as in rem[]. */
typedef struct {
  RfSchedule *s;
  const RfPlan *plan;
  DepGraph d;
  uint64_t B, Bn; /* a round's room over the network and over NVLink */
  int max_ops;
  Slot *use;        /* per rank: network, NVLink (ops counted in the first) */
  GArray *touched;  /* ranks with usage this round */
  uint64_t *rem;    /* bytes each endpoint has left */
  uint64_t *cur;    /* per message: its first segment not placed */
  uint32_t *nready; /* per message: segments ready and not placed */
  SegSet rdy;       /* the same segments, for visiting only them */
  uint64_t placed;
  GArray *later; /* segments whose last prerequisite this round placed */
  GArray *done;  /* segments placed this round, their dependents told at its end */
  /* per endpoint: its messages (ascending, ep_msg[ep_first[e] ..  ep_first[e + 1])), how many
   * of them are ready, the key at the start of the round */
  uint64_t *ep_first, *ep_key;
  EpMsg *ep_msg;
  uint64_t *ep_keyf; /* per endpoint: its key, or RF_KEY_FULL once it is full this round */
  uint32_t *ep_ready;
  /* per endpoint, a bit per message of its list, set while the message has a ready segment
   * (words ep_bits[ep_wfirst[e] .. ep_wfirst[e + 1])): a turn visits only those; per message,
   * its place in its source's and its destination's list (ep_pos[2 m + dir]) */
  uint64_t *ep_wfirst, *ep_bits;
  uint32_t *ep_pos;
  uint32_t *ep_small;   /* per endpoint: its messages whose short last segment is ready */
  const uint64_t *act;  /* the round's active endpoints, largest key first (place_round) */
  uint64_t open_end[4]; /* per kind (class and direction, e & 3): act[0 .. open_end) holds every
                           one of its endpoints not full (open_min_key's cursor) */
  uint64_t *msg_small;  /* a bit per message: its short last segment is ready (msg_no_fit's test,
                           without a look at the message) */
} Placer;

/* A node is placed (a segment: in round dep1 - 1) or complete (a join node: its last arrival
 * segment placed): its dependents learn the round they follow, and a segment whose last
 * prerequisite this was becomes ready after the rounds in flight (`later`); a join node whose
 * last one it was is complete at once (dep_release_all). */
static void dep_release_all(Placer *P, const uint64_t *gs, uint32_t n, uint32_t dep1);

/* Node x learns that one of its prerequisites is placed or complete (in round dep1 - 1). */
static inline void dep_tell(Placer *P, uint64_t x, uint32_t dep1) {
  PreDep *q = &P->d.pre[x];
  q->dep1 = MAX(q->dep1, dep1);
  if (--q->npre) return;
  if (x < P->d.nsegs)
    g_array_append_val(P->later, x);
  else
    dep_release_all(P, &x, 1, q->dep1); /* join nodes point at segments only: one level */
}

/* The release above of nodes gs[0 .. n), all placed or complete in round dep1 - 1, in that
 * order, with the state of their dependents loaded DEP_AHEAD dependents ahead across the nodes (a
 * segment has a dependent or two, each a cache miss, so a lookahead within one node's list never
 * started for them: the release was a sixth of Kimi K3's hybrid schedule; a join node has many) */
#define DEP_AHEAD 12
static void dep_release_all(Placer *P, const uint64_t *gs, uint32_t n, uint32_t dep1) {
  const uint32_t *first = P->d.first, *next = P->d.next;
  uint32_t ia = 0, ahead = 0; /* the lookahead: segment gs[ia], dependent ka */
  uint64_t ka = n ? first[gs[0]] : 0;
  for (uint32_t i = 0; i < n; i++) {
    const uint64_t end = first[gs[i] + 1];
    for (uint64_t k = first[gs[i]]; k < end; k++) {
      while (ahead < DEP_AHEAD && ia < n) {
        if (ka < first[gs[ia] + 1]) {
          __builtin_prefetch(&P->d.pre[next[ka++]], 1);
          ahead++;
        } else if (++ia < n) {
          ka = first[gs[ia]];
        }
      }
      ahead--;
      dep_tell(P, next[k], dep1);
    }
  }
}

static int msg_class(const RfMessage *msg) {
  return (msg->flags & RF_XFER_NET) ? 0 : 1;
}

static uint64_t msg_endpoint(const RfMessage *msg, int dir) {
  return 4 * (uint64_t)(dir ? msg->dst : msg->src) + 2 * (uint64_t)msg_class(msg) + (uint64_t)dir;
}

/* No ready segment of any message of endpoint e can go in this round any more: no operation
 * left, or less room than its smallest ready segment (a whole one, C bytes, aligned, unless a
 * message's short last segment is ready). Room and operations only shrink within a round, and no
 * segment becomes ready in it, so it stays so until the round ends. */
static gboolean ep_full(const Placer *P, uint64_t e) {
  const uint64_t x = e / 4, c = (e / 2) & 1;
  if ((int)P->use[2 * x].ops + 1 > P->max_ops) return TRUE;
  const Slot *u = &P->use[2 * x + c];
  const uint64_t used = (e & 1) ? u->recv : u->send, room = c ? P->Bn : P->B;
  return used + RF_SCHEDULE_ALIGN > room || (used + P->s->seg_bytes > room && !P->ep_small[e]);
}

/* Segment g became ready (delta 1) or was placed (-1): the endpoints of its message count it when
 * it is the message's short last segment. */
static void ep_small_add(Placer *P, uint64_t m, uint64_t g, int delta) {
  const RfMessage *msg = &P->plan->msgs[m];
  if (g + 1 != P->s->seg_first[m + 1] || !(msg->bytes % P->s->seg_bytes)) return;
  P->ep_small[msg_endpoint(msg, 0)] += (uint32_t)delta;
  P->ep_small[msg_endpoint(msg, 1)] += (uint32_t)delta;
  if (delta > 0)
    P->msg_small[m / 64] |= UINT64_C(1) << (m % 64);
  else
    P->msg_small[m / 64] &= ~(UINT64_C(1) << (m % 64));
}

/* An end of message m is full: it can place nothing this round (and never again in it). */
static gboolean msg_blocked(const Placer *P, uint64_t m) {
  const RfMessage *msg = &P->plan->msgs[m];
  const int cls = msg_class(msg);
  const uint64_t room = cls ? P->Bn : P->B;
  const Slot *us = &P->use[2 * msg->src + cls], *ud = &P->use[2 * msg->dst + cls];
  const Slot *os = &P->use[2 * msg->src], *od = &P->use[2 * msg->dst];
  const int need = msg->src == msg->dst ? 2 : 1;
  return (int)os->ops + need > P->max_ops || (int)od->ops + need > P->max_ops ||
         us->send + RF_SCHEDULE_ALIGN > room || ud->recv + RF_SCHEDULE_ALIGN > room;
}

/* The ready count of message m changed from or to zero: its endpoints' counts follow. */
static void ep_ready_add(Placer *P, uint64_t m, int delta) {
  const RfMessage *msg = &P->plan->msgs[m];
  for (int dir = 0; dir < 2; dir++) {
    const uint64_t e = msg_endpoint(msg, dir), i = P->ep_pos[2 * m + (uint64_t)dir];
    uint64_t *w = &P->ep_bits[P->ep_wfirst[e] + i / 64];
    P->ep_ready[e] += (uint32_t)delta;
    if (delta > 0)
      *w |= UINT64_C(1) << (i % 64);
    else
      *w &= ~(UINT64_C(1) << (i % 64));
  }
}

/* Message m puts in, in order, those of its ready segments both ends have room for (round r). */
static void place_msg(Placer *P, uint64_t m, int r) {
  RfSchedule *s = P->s;
  const RfMessage *msg = &P->plan->msgs[m];
  const uint64_t C = s->seg_bytes;
  const int cls = msg_class(msg);
  const uint64_t room = cls ? P->Bn : P->B;
  Slot *us = &P->use[2 * msg->src + cls], *ud = &P->use[2 * msg->dst + cls];
  Slot *os = &P->use[2 * msg->src], *od = &P->use[2 * msg->dst]; /* operations: class 0 counts */
  const int need = msg->src == msg->dst ? 2 : 1, max_ops = P->max_ops;
  if (msg_blocked(P, m)) return;  /* an end is full: its first ready segment would stop it */
  uint32_t unseen = P->nready[m]; /* ready segments not yet looked at: none left, stop */
  const uint64_t end = s->seg_first[m + 1];
  for (uint64_t g = segset_next(&P->rdy, P->cur[m], end); g < end && unseen;
       g = segset_next(&P->rdy, g + 1, end)) {
    unseen--;
    const uint64_t lo = (g - s->seg_first[m]) * C;
    const uint64_t b = align_up(MIN(C, msg->bytes - lo), RF_SCHEDULE_ALIGN);
    if ((int)os->ops + need > max_ops || (int)od->ops + need > max_ops) break;
    if (us->send + b > room || ud->recv + b > room) {
      if (us->send + RF_SCHEDULE_ALIGN > room || ud->recv + RF_SCHEDULE_ALIGN > room) break;
      /* a smaller one may fit: only the message's last segment can be smaller (the ones
       * between are whole, and nothing changes until one is placed) */
      const uint64_t last = end - 1;
      if (g >= last || !(msg->bytes % C) || !(P->rdy.bit[last / 64] >> (last % 64) & 1)) break;
      g = last - 1; /* the loop's next ready segment is the last */
      continue;
    }
    if (!os->ops) g_array_append_val(P->touched, msg->src);
    us->send += b;
    os->ops++;
    if (!od->ops) g_array_append_val(P->touched, msg->dst);
    ud->recv += b;
    od->ops++;
    s->send_max[msg->src] = MAX(s->send_max[msg->src], os[0].send + os[1].send);
    s->recv_max[msg->dst] = MAX(s->recv_max[msg->dst], od[0].recv + od[1].recv);
    s->seg_round[g] = r;
    if (!--P->nready[m]) ep_ready_add(P, m, -1);
    segset_del(&P->rdy, g);
    ep_small_add(P, m, g, -1);
    P->rem[4 * msg->src + 2 * cls] -= MIN(C, msg->bytes - lo);
    P->rem[4 * msg->dst + 2 * cls + 1] -= MIN(C, msg->bytes - lo);
    g_array_append_val(P->done, g); /* its dependents told at the round's end */
    P->placed++;
  }
  while (P->cur[m] < s->seg_first[m + 1] && s->seg_round[P->cur[m]] >= 0)
    P->cur[m]++;
}

/* Message m has no ready segment that both ends have room for (and would place nothing): less
 * room than a whole segment at an end, and its short last segment (tail aligned units, 0: none)
 * not ready or too large. */
static gboolean msg_no_fit(const Placer *P, uint64_t m, uint32_t tail, uint64_t a, uint64_t b) {
  const uint64_t cls = (a / 2) & 1; /* a, b: its source's and destination's endpoints */
  const uint64_t room = cls ? P->Bn : P->B, C = P->s->seg_bytes;
  const uint64_t used = MAX(P->use[2 * (a / 4) + cls].send, P->use[2 * (b / 4) + cls].recv);
  if (used + C <= room) return FALSE;
  if (!(P->msg_small[m / 64] >> (m % 64) & 1)) return TRUE; /* no short last segment ready */
  return used + (uint64_t)tail * RF_SCHEDULE_ALIGN > room;
}

/* Above every key (class bit 62 and bytes left): a full endpoint's ep_keyf, so that the test
 * of who keys a message also passes over the messages whose other end is full. */
#define RF_KEY_FULL UINT64_MAX

/* Whether endpoint e, not full, places a ready message between it and endpoint o in its turn:
 * e gives its key (the busier end; the source, the endpoint of direction 0, on a tie) and o is
 * not full. */
static gboolean ep_takes(const Placer *P, uint64_t e, uint64_t o) {
  const uint64_t ke = P->ep_key[e], ko = P->ep_keyf[o];
  return ke > ko || (ke == ko && !(e & 1));
}

/* The endpoints of rank x that are full now get RF_KEY_FULL (after a placement at x). */
static void rank_keyf(Placer *P, uint64_t x) {
  for (uint64_t e = 4 * x; e < 4 * x + 4; e++)
    if (P->ep_keyf[e] != RF_KEY_FULL && ep_full(P, e)) P->ep_keyf[e] = RF_KEY_FULL;
}

/* The smallest key of an active endpoint of kind k (e & 3) not full now: RF_KEY_FULL when there
 * is none. Its cursor walks act from its end (the smallest keys) and passes for good over the
 * endpoints of other kinds and those full: an endpoint full stays full to the round's end. */
static uint64_t open_min_key(Placer *P, unsigned k) {
  uint64_t *at = &P->open_end[k];
  for (; *at > 0; (*at)--) {
    const uint64_t o = P->act[*at - 1];
    if ((o & 3) == k && P->ep_keyf[o] != RF_KEY_FULL) return P->ep_key[o];
  }
  return RF_KEY_FULL;
}

static gboolean turn_skip = TRUE; /* rf_schedule_set_turn_skip (tests) */

void rf_schedule_set_turn_skip(gboolean on) {
  turn_skip = on;
}

/* Whether endpoint e may key a message now: some endpoint of its class and the other direction is
 * not full and has a key e beats (ep_takes: larger, or equal with e the source). Where none has,
 * e's turn would visit its whole list and place nothing (in p2p a sender, half a receiver's
 * bytes left, keys no message once the receivers have taken theirs). */
static gboolean ep_may_key(Placer *P, uint64_t e) {
  if (!turn_skip) return TRUE;
  const uint64_t m = open_min_key(P, (unsigned)(e ^ 1) & 3), ke = P->ep_key[e];
  return (e & 1) ? ke > m : ke >= m;
}

/* Where endpoint e's turn stands: at message m (its other end o, its short last segment tail
 * aligned units), the bits of word k of its list after it still to visit in x. */
typedef struct {
  uint64_t e, m;
  uint32_t o, tail;
  uint64_t k, x;
} Turn;

/* Moves t on to the next ready message of its endpoint's list that it may place: it takes the
 * message's key, the other end is not full and the message fits (ep_takes, msg_no_fit); FALSE
 * when there is none or the endpoint is full. Placing a message changes only its own bit, so the
 * bits a turn holds stay those of the round's ready messages; fullness and no-fit only set
 * within a round, so a message passed over here would place nothing later in it. */
static gboolean turn_next(Placer *P, Turn *t) {
  const uint64_t e = t->e, f = P->ep_first[e], wf = P->ep_wfirst[e];
  const uint64_t nw = P->ep_wfirst[e + 1] - wf;
  if (P->ep_keyf[e] == RF_KEY_FULL) return FALSE;
  for (;;) {
    while (!t->x) {
      /* the ends e could key fill as the round goes: at each word, whether any is left */
      if (++t->k >= nw || !ep_may_key(P, e)) return FALSE;
      t->x = P->ep_bits[wf + t->k];
    }
    const uint64_t i = 64 * t->k + (uint64_t)__builtin_ctzll(t->x);
    t->x &= t->x - 1;
    const EpMsg *em = &P->ep_msg[f + i];
    const uint64_t o = em->other;
    if (!ep_takes(P, e, o)) continue;
    const uint64_t m = em->m;
    const uint32_t tail = em->tail;
    if (msg_no_fit(P, m, tail, e & 1 ? o : e, e & 1 ? e : o)) continue;
    t->o = (uint32_t)o;
    t->m = m;
    t->tail = tail;
    return TRUE;
  }
}

/* Restores the heap order of h[0 .. n) (smallest message first) below position i. */
static void turn_sift(Turn *h, uint64_t n, uint64_t i) {
  const Turn t = h[i];
  for (uint64_t c; (c = 2 * i + 1) < n; i = c) {
    if (c + 1 < n && h[c + 1].m < h[c].m) c++;
    if (h[c].m >= t.m) break;
    h[i] = h[c];
  }
  h[i] = t;
}

/* Places the message turn t found placeable and marks its ranks' endpoints that are full now. */
static void place_found(Placer *P, const Turn *t, int r) {
  place_msg(P, t->m, r);
  rank_keyf(P, t->e / 4);
  rank_keyf(P, t->o / 4);
}

/* The same, if the message still is placeable: another turn of the merge may have filled an end
 * since its turn found it. */
static void place_taken(Placer *P, const Turn *t, int r) {
  const uint64_t e = t->e, o = t->o;
  const uint64_t a = e & 1 ? o : e, b = e & 1 ? e : o; /* source, destination */
  if (P->ep_keyf[e] == RF_KEY_FULL || P->ep_keyf[o] == RF_KEY_FULL ||
      msg_no_fit(P, t->m, t->tail, a, b))
    return;
  place_found(P, t, r);
}

/* The turns of endpoints eps[0 .. n) (one key) in round r: their ready messages that take their
 * key from them, merged in message order (each message is in one list only: its keying end's),
 * each placed unless an end can place nothing (ep_full, msg_no_fit). An endpoint that is full
 * stops its turn: room and operations only shrink within a round, and no segment becomes ready
 * in it, so none of its remaining messages could place a segment. So a merge of endpoints gives
 * what collecting every message with room at the start and placing them in message order gave,
 * visiting only the messages before each endpoint fills, and passing over, without the merge,
 * those whose other end is full or that do not fit (turn_next). Only the messages with a ready
 * segment are visited (ep_bits). h: room for n turns. */
static void place_turns(Placer *P, const uint64_t *eps, uint64_t n, int r, Turn *h) {
  if (n == 1) { /* one endpoint of this key (the most): its turn alone, no merge */
    Turn t = {.e = eps[0], .k = 0, .x = P->ep_bits[P->ep_wfirst[eps[0]]]};
    if (P->ep_wfirst[eps[0] + 1] == P->ep_wfirst[eps[0]] || !ep_may_key(P, eps[0])) return;
    while (turn_next(P, &t)) /* nothing placed since it looked: no test again */
      place_found(P, &t, r);
    return;
  }
  uint64_t nh = 0;
  for (uint64_t j = 0; j < n; j++) {
    const uint64_t e = eps[j];
    if (P->ep_wfirst[e + 1] == P->ep_wfirst[e] || !ep_may_key(P, e)) continue;
    h[nh] = (Turn){.e = e, .k = 0, .x = P->ep_bits[P->ep_wfirst[e]]};
    if (turn_next(P, &h[nh])) nh++;
  }
  for (uint64_t i = nh / 2; i-- > 0;)
    turn_sift(h, nh, i);
  while (nh) {
    place_taken(P, &h[0], r);
    if (!turn_next(P, &h[0])) h[0] = h[--nh];
    turn_sift(h, nh, 0);
  }
}

/* The endpoints' messages (each message under its source's and its destination's endpoint) and
 * the ready counts. */
static void placer_endpoints(Placer *P) {
  const RfPlan *plan = P->plan;
  const uint64_t ne = 4 * (uint64_t)P->s->nranks;
  P->ep_first = g_new0(uint64_t, ne + 1);
  P->ep_wfirst = g_new0(uint64_t, ne + 1);
  P->ep_ready = g_new0(uint32_t, ne ? ne : 1);
  P->ep_small = g_new0(uint32_t, ne ? ne : 1);
  P->msg_small = g_new0(uint64_t, plan->nmsgs / 64 + 1);
  P->ep_key = g_new0(uint64_t, ne ? ne : 1);
  P->ep_keyf = g_new0(uint64_t, ne ? ne : 1);
  P->ep_pos = RF_BIG_NEW0(uint32_t, 2 * (plan->nmsgs ? plan->nmsgs : 1));
  for (uint64_t m = 0; m < plan->nmsgs; m++)
    if (P->s->seg_first[m + 1] > P->s->seg_first[m])
      for (int dir = 0; dir < 2; dir++)
        P->ep_first[msg_endpoint(&plan->msgs[m], dir) + 1]++;
  for (uint64_t e = 0; e < ne; e++) {
    P->ep_wfirst[e + 1] = P->ep_wfirst[e] + (P->ep_first[e + 1] + 63) / 64;
    P->ep_first[e + 1] += P->ep_first[e];
  }
  P->ep_msg = RF_BIG_NEW(EpMsg, P->ep_first[ne] ? P->ep_first[ne] : 1);
  P->ep_bits = RF_BIG_NEW0(uint64_t, P->ep_wfirst[ne] ? P->ep_wfirst[ne] : 1);
  g_autofree uint64_t *fill = g_memdup2(P->ep_first, sizeof(uint64_t) * (ne + 1));
  for (uint64_t m = 0; m < plan->nmsgs; m++)
    if (P->s->seg_first[m + 1] > P->s->seg_first[m]) {
      const uint64_t tail = align_up(plan->msgs[m].bytes % P->s->seg_bytes, RF_SCHEDULE_ALIGN);
      for (int dir = 0; dir < 2; dir++) {
        const uint64_t e = msg_endpoint(&plan->msgs[m], dir);
        P->ep_pos[2 * m + (uint64_t)dir] = (uint32_t)(fill[e] - P->ep_first[e]);
        /* the tail clamped (a staging bound of 1 TiB): a lower tail only costs a visit to
         * place_msg */
        P->ep_msg[fill[e]++] = (EpMsg){(uint32_t)m, (uint32_t)msg_endpoint(&plan->msgs[m], !dir),
                                       (uint32_t)MIN(tail / RF_SCHEDULE_ALIGN, UINT32_MAX)};
      }
    }
  for (uint64_t m = 0; m < plan->nmsgs; m++) {
    if (P->nready[m]) ep_ready_add(P, m, 1);
    const uint64_t g = P->s->seg_first[m + 1] - 1; /* the last segment, when ready */
    if (g + 1 > P->s->seg_first[m] && !P->d.pre[g].npre) ep_small_add(P, m, g, 1);
  }
}

/* Round r's turns: the endpoints with a ready message, by key (largest first), those of one key
 * merging their messages by message order. act, tmp: room for every endpoint; h: room for a turn
 * per endpoint. */
static void place_round(Placer *P, int r, uint64_t *act, uint64_t *tmp, Turn *h) {
  const uint64_t ne = 4 * (uint64_t)P->s->nranks;
  uint64_t nact = 0;
  for (uint64_t e = 0; e < ne; e++)
    if (P->ep_ready[e]) {
      P->ep_key[e] = ((uint64_t)(1 - ((e / 2) & 1)) << 62) | P->rem[e];
      act[nact++] = e;
    }
  for (uint64_t i = 0; i < nact; i++) /* a ready message's ends are both in act */
    P->ep_keyf[act[i]] = ep_full(P, act[i]) ? RF_KEY_FULL : P->ep_key[act[i]];
  rf_radix_sort(act, tmp, nact, P->ep_key, TRUE);
  P->act = act;
  for (int k = 0; k < 4; k++)
    P->open_end[k] = nact;
  for (uint64_t i = 0, j; i < nact; i = j) {
    for (j = i + 1; j < nact && P->ep_key[act[j]] == P->ep_key[act[i]];)
      j++;
    place_turns(P, act + i, j - i, r, h);
  }
}

static gboolean place_pipelined(RfSchedule *s, const RfPlan *plan, int max_ops,
                                RfScheduleProgress progress, void *progress_ud, GError **error) {
  Placer P = {.s = s, .plan = plan, .B = s->room_bytes, .max_ops = max_ops};
  P.Bn = P.B * rf_schedule_nvlink_share(plan); /* a round's room over NVLink */
  if (!dep_graph_build(&P.d, s, plan, error)) return FALSE;
  for (uint64_t g = 0; g < s->nsegs; g++)
    s->seg_round[g] = -1;
  const size_t nm = plan->nmsgs ? plan->nmsgs : 1, ne = 4 * (size_t)s->nranks;
  P.cur = RF_BIG_NEW(uint64_t, nm);
  for (uint64_t m = 0; m < plan->nmsgs; m++)
    P.cur[m] = s->seg_first[m];
  P.use = g_new0(Slot, 2 * (size_t)s->nranks);
  P.touched = g_array_new(FALSE, FALSE, sizeof(int));
  P.done = g_array_new(FALSE, FALSE, sizeof(uint64_t));
  /* bytes each rank still has to send and receive, per class */
  P.rem = g_new0(uint64_t, ne);
  for (uint64_t m = 0; m < plan->nmsgs; m++) {
    P.rem[msg_endpoint(&plan->msgs[m], 0)] += plan->msgs[m].bytes;
    P.rem[msg_endpoint(&plan->msgs[m], 1)] += plan->msgs[m].bytes;
  }
  /* Segments ready (every prerequisite placed in an earlier round) and not placed, per message.
   * A segment whose last prerequisite is placed in round r is ready from round r + slots
   * (`later`, one bucket per round in flight: round r's is released at the end of round
   * r + slots - 1). */
  P.nready = RF_BIG_NEW0(uint32_t, nm);
  segset_init(&P.rdy, s->nsegs);
  for (uint64_t m = 0; m < plan->nmsgs; m++)
    for (uint64_t g = s->seg_first[m]; g < s->seg_first[m + 1]; g++)
      if (!P.d.pre[g].npre) {
        P.nready[m]++;
        segset_add(&P.rdy, g);
      }
  placer_endpoints(&P);
  GArray *bucket[RF_SCHEDULE_MAX_SLOTS];
  for (int i = 0; i < s->slots; i++)
    bucket[i] = g_array_new(FALSE, FALSE, sizeof(uint64_t));
  g_autofree uint64_t *act = g_new(uint64_t, ne ? ne : 1);
  g_autofree uint64_t *tmp = g_new(uint64_t, ne ? ne : 1);
  g_autofree Turn *turns = g_new(Turn, ne ? ne : 1);
  g_autofree uint64_t *lut = msg_lut_new(s);
  int r = 0;
  for (; P.placed < s->nsegs; r++) {
    P.later = bucket[r % s->slots];
    place_round(&P, r, act, tmp, turns);
    /* the round's placed segments tell their dependents together: nothing in a round reads what
     * a release writes (the prerequisites' states, `later`, read once round r + slots - 1
     * ends), and `later` is a set (its order changes no state), so this is the release at each
     * placement, with the dependents' states loaded DEP_AHEAD ahead across the whole round (a
     * message places a segment or two a turn: within one turn the lookahead never started) */
    dep_release_all(&P, (const uint64_t *)(void *)P.done->data, P.done->len, (uint32_t)r + 1);
    g_array_set_size(P.done, 0);
    GArray *ready = bucket[(r + 1) % s->slots]; /* placed in round r + 1 - slots: ready now */
    for (guint i = 0; i < ready->len; i++) {
      const uint64_t g = g_array_index(ready, uint64_t, i), m = msg_lut_find(s, lut, g);
      if (!P.nready[m]++) ep_ready_add(&P, m, 1);
      segset_add(&P.rdy, g);
      ep_small_add(&P, m, g, 1);
    }
    g_array_set_size(ready, 0);
    for (guint i = 0; i < P.touched->len; i++) {
      const int x = g_array_index(P.touched, int, i);
      P.use[2 * x] = P.use[2 * x + 1] = (Slot){0};
    }
    g_array_set_size(P.touched, 0);
    if (progress) progress(P.placed, s->nsegs, progress_ud);
  }
  s->nrounds = r;
  g_free(P.d.first); /* before seg_dep: the largest of the placement's arrays */
  g_free(P.d.next);
  P.d.first = NULL;
  P.d.next = NULL;
  s->seg_dep = RF_BIG_NEW(int, s->nsegs ? s->nsegs : 1);
  for (uint64_t g = 0; g < s->nsegs; g++)
    s->seg_dep[g] = (int)P.d.pre[g].dep1 - 1;
  for (int i = 0; i < s->slots; i++)
    g_array_free(bucket[i], TRUE);
  dep_graph_clear(&P.d);
  g_free(P.cur);
  g_free(P.use);
  g_array_free(P.touched, TRUE);
  g_array_free(P.done, TRUE);
  g_free(P.rem);
  g_free(P.nready);
  g_free(P.rdy.bit);
  g_free(P.rdy.sum);
  g_free(P.ep_first);
  g_free(P.ep_msg);
  g_free(P.ep_key);
  g_free(P.ep_keyf);
  g_free(P.ep_wfirst);
  g_free(P.ep_bits);
  g_free(P.ep_pos);
  g_free(P.ep_ready);
  g_free(P.ep_small);
  g_free(P.msg_small);
  return TRUE;
}

/* The staged first-fit of message m's segments (its stage's rounds start at round0): returns one
 * past the last stage-relative round it used. us / ud: the usage of its source and destination. */
static guint place_message(RfSchedule *s, const RfMessage *msg, uint64_t m, RankUse *us,
                           RankUse *ud, int round0, int max_ops, RfScheduleProgress progress,
                           void *progress_ud) {
  const uint64_t B = s->seg_bytes, total = s->nsegs;
  const int need = msg->src == msg->dst ? 2 : 1;
  guint prev_r = 0, nr = 0;
  uint64_t prev_b = 0;
  uint64_t g = s->seg_first[m];
  /* Full-size segments first, in one sweep: each takes the first round from the last one on
   * where both ends are still empty in that direction and have operation slots. A segment
   * changes only its own round, so this is the segment-by-segment first-fit. */
  const uint64_t nfull = msg->bytes / B; /* B is aligned: b == B */
  if (nfull) {
    while (us->full_send < us->len &&
           (us->slot[us->full_send].send || (int)us->slot[us->full_send].ops + 1 > max_ops))
      us->full_send++;
    while (ud->full_recv < ud->len &&
           (ud->slot[ud->full_recv].recv || (int)ud->slot[ud->full_recv].ops + 1 > max_ops))
      ud->full_recv++;
    guint r = MAX(MAX(us->open_send, ud->open_recv), MAX(us->full_send, ud->full_recv));
    for (uint64_t j = 0; j < nfull; r++) {
      if (r < us->len && (us->slot[r].send || (int)us->slot[r].ops + need > max_ops)) continue;
      if (r < ud->len && (ud->slot[r].recv || (int)ud->slot[r].ops + need > max_ops)) continue;
      Slot *ss = rank_slot(us, r);
      ss->send = B;
      ss->ops++;
      Slot *sd = rank_slot(ud, r); /* after ss: rank_slot may move the array (src == dst) */
      sd->recv = B;
      sd->ops++;
      if (s->seg_round) s->seg_round[g + j] = round0 + (int)r;
      if (!(++j & 4095) && progress) progress(g + j, total, progress_ud);
      prev_r = r;
    }
    s->send_max[msg->src] = MAX(s->send_max[msg->src], B);
    s->recv_max[msg->dst] = MAX(s->recv_max[msg->dst], B);
    nr = MAX(nr, prev_r + 1);
    prev_b = B;
    g += nfull;
    advance_open(us, B, max_ops);
    if (ud != us) advance_open(ud, B, max_ops);
  }
  for (; g < s->seg_first[m + 1]; g++) {
    if (progress && !(g & 4095)) progress(g, total, progress_ud);
    uint64_t lo = (g - s->seg_first[m]) * B;
    uint64_t b = align_up(MIN(B, msg->bytes - lo), RF_SCHEDULE_ALIGN);
    guint r = MAX(us->open_send, ud->open_recv);
    if (b == prev_b) r = MAX(r, prev_r);
    while (!send_fits(us, r, b, B, need, max_ops) || !recv_fits(ud, r, b, B, need, max_ops))
      r++;
    Slot *ss = rank_slot(us, r);
    ss->send += b;
    ss->ops++;
    s->send_max[msg->src] = MAX(s->send_max[msg->src], ss->send);
    Slot *sd = rank_slot(ud, r); /* after ss: rank_slot may move the array (src == dst) */
    sd->recv += b;
    sd->ops++;
    s->recv_max[msg->dst] = MAX(s->recv_max[msg->dst], sd->recv);
    if (s->seg_round) s->seg_round[g] = round0 + (int)r;
    nr = MAX(nr, r + 1);
    prev_r = r;
    prev_b = b;
    advance_open(us, B, max_ops);
    if (ud != us) advance_open(ud, B, max_ops);
  }
  return nr;
}

/* Mark rank id's usage as touched in this stage (to be reset at its end). */
static void touch_rank(RankUse *u, int id, GArray *touched) {
  if (u->touched) return;
  u->touched = TRUE;
  g_array_append_val(touched, id);
}

/* Forget the usage of the ranks a stage touched. */
static void reset_touched(RankUse *use, GArray *touched) {
  for (guint i = 0; i < touched->len; i++) {
    RankUse *u = &use[g_array_index(touched, int, i)];
    u->len = u->open_send = u->open_recv = u->full_send = u->full_recv = 0;
    u->touched = FALSE;
    if (u->cap > KEEP_SLOTS) { /* a long stage: do not keep its usage for every rank */
      g_clear_pointer(&u->slot, g_free);
      u->cap = 0;
    }
  }
  g_array_set_size(touched, 0);
}

/* Stages one after another, each its own rounds: the first-fit of every message in plan order.
 * FALSE + error when a message names a rank outside the world or the plan is not sorted by stage.
 */
static gboolean place_staged(RfSchedule *s, const RfPlan *plan, int max_ops,
                             RfScheduleProgress progress, void *progress_ud, GError **error) {
  const int nranks = s->nranks;
  RankUse *use = g_new0(RankUse, nranks);
  g_autoptr(GArray) touched = g_array_new(FALSE, FALSE, sizeof(int));
  int round0 = 0;
  uint64_t m = 0;
  gboolean ok = TRUE;
  for (int k = 0; k < plan->nstages && ok; k++) {
    s->stage_round0[k] = round0;
    guint nr = 0; /* rounds of this stage */
    for (; m < plan->nmsgs && plan->msgs[m].stage == k; m++) {
      const RfMessage *msg = &plan->msgs[m];
      if (msg->src < 0 || msg->src >= nranks || msg->dst < 0 || msg->dst >= nranks) {
        g_set_error(error, RF_ERROR, RF_ERROR_VERIFY,
                    "plan message %" G_GUINT64_FORMAT " has a rank outside the world", m);
        ok = FALSE;
        break;
      }
      touch_rank(&use[msg->src], msg->src, touched);
      touch_rank(&use[msg->dst], msg->dst, touched);
      guint used = place_message(s, msg, m, &use[msg->src], &use[msg->dst], round0, max_ops,
                                 progress, progress_ud); /* once: MAX evaluates twice */
      nr = MAX(nr, used);
    }
    round0 += nr;
    reset_touched(use, touched);
  }
  for (int x = 0; x < nranks; x++)
    g_free(use[x].slot);
  g_free(use);
  if (!ok) return FALSE;
  if (m != plan->nmsgs) {
    g_set_error(error, RF_ERROR, RF_ERROR_VERIFY, "plan messages are not sorted by stage");
    return FALSE;
  }
  s->stage_round0[plan->nstages] = round0;
  s->nrounds = round0;
  return TRUE;
}

/* What the pipelined placement assumes of a plan: messages sorted by stage, every rank inside
 * the world, and its dependency graph's nodes (a segment each, a join node per transfer)
 * numbered in 32 bits. */
static gboolean check_pipelined(const RfPlan *plan, int nranks, uint64_t nsegs, GError **error) {
  if (nsegs + plan->nxfers >= UINT32_MAX || plan->nmsgs >= UINT32_MAX) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "%" G_GUINT64_FORMAT " segments, %" G_GUINT64_FORMAT
                " transfers and %" G_GUINT64_FORMAT
                " messages: more than the pipelined schedule numbers (2^32)",
                nsegs, plan->nxfers, plan->nmsgs);
    return FALSE;
  }
  for (uint64_t m = 1; m < plan->nmsgs; m++)
    if (plan->msgs[m].stage < plan->msgs[m - 1].stage) {
      g_set_error(error, RF_ERROR, RF_ERROR_VERIFY, "plan messages are not sorted by stage");
      return FALSE;
    }
  for (uint64_t m = 0; m < plan->nmsgs; m++)
    if (plan->msgs[m].src < 0 || plan->msgs[m].src >= nranks || plan->msgs[m].dst < 0 ||
        plan->msgs[m].dst >= nranks) {
      g_set_error(error, RF_ERROR, RF_ERROR_VERIFY,
                  "plan message %" G_GUINT64_FORMAT " has a rank outside the world", m);
      return FALSE;
    }
  return TRUE;
}

/* The schedule's sizes and its segments (no rounds yet): seg_bytes B per segment. */
static RfSchedule *schedule_new(const RfPlan *plan, int nranks, uint64_t room, uint64_t B,
                                int max_ops, int slots, gboolean pipelined, gboolean sizes_only) {
  RfSchedule *s = g_new0(RfSchedule, 1);
  s->room_bytes = room;
  s->seg_bytes = B;
  s->slots = slots;
  s->max_ops = max_ops;
  s->nranks = nranks;
  s->nmsgs = plan->nmsgs;
  s->nstages = plan->nstages;
  s->seg_first = RF_BIG_NEW(uint64_t, plan->nmsgs + 1);
  uint64_t total = 0;
  for (uint64_t m = 0; m < plan->nmsgs; m++) {
    s->seg_first[m] = total;
    total += (plan->msgs[m].bytes + B - 1) / B;
  }
  s->seg_first[plan->nmsgs] = total;
  s->nsegs = total;
  s->seg_round = sizes_only ? NULL : RF_BIG_NEW(int, total ? total : 1);
  s->pipelined = pipelined;
  s->seg_dep = NULL; /* pipelined: written by the placement */
  s->send_max = g_new0(uint64_t, nranks);
  s->recv_max = g_new0(uint64_t, nranks);
  s->stage_round0 = g_new0(int, plan->nstages + 1);
  return s;
}

/* A round's staging room (the bound, aligned down), the segment size and the operation bound
 * (RF_SCHEDULE_AUTO_OPS resolved) of a schedule of these arguments; FALSE when one is out of
 * range. */
static gboolean schedule_sizes(const RfPlan *plan, int nranks, uint64_t staging_bytes,
                               gboolean pipelined, uint64_t *room, uint64_t *B, int *max_ops) {
  *room = staging_bytes / RF_SCHEDULE_ALIGN * RF_SCHEDULE_ALIGN;
  *B = segment_bytes(staging_bytes, pipelined);
  if (*max_ops == RF_SCHEDULE_AUTO_OPS) *max_ops = rf_schedule_max_ops(plan, pipelined);
  return *room > 0 && *max_ops >= 2 && nranks >= 1;
}

/* What one rank's segments of a stage (staged) or of the whole schedule (pipelined) take: aligned
 * staging bytes sent and received per link class (staged: all in class 0), and operations. */
typedef struct {
  uint64_t send[2], recv[2], ops;
} RankLoad;

static uint64_t div_up(uint64_t a, uint64_t b) {
  return a / b + (a % b != 0);
}

/* The rounds rank load l needs at least: a round holds at most room[c] staging bytes of each
 * direction and class and max_ops operations of the rank. */
static uint64_t load_rounds(const RankLoad *l, const uint64_t room[2], int max_ops) {
  uint64_t n = div_up(l->ops, (uint64_t)max_ops);
  for (int c = 0; c < 2; c++)
    n = MAX(n, MAX(div_up(l->send[c], room[c]), div_up(l->recv[c], room[c])));
  return n;
}

uint64_t rf_schedule_rounds_lower_bound(const RfPlan *plan, int nranks, uint64_t staging_bytes,
                                        int max_ops, unsigned flags) {
  const gboolean pipelined = (flags & RF_SCHEDULE_PIPELINED) != 0;
  uint64_t room, B;
  if (!schedule_sizes(plan, nranks, staging_bytes, pipelined, &room, &B, &max_ops)) return 0;
  const uint64_t rooms[2] = {room, pipelined ? room * rf_schedule_nvlink_share(plan) : room};
  g_autofree RankLoad *ld = g_new0(RankLoad, nranks);
  uint64_t total = 0, stage_max = 0, stage_first = 0;
  for (uint64_t m = 0; m <= plan->nmsgs; m++) {
    const RfMessage *msg = m < plan->nmsgs ? &plan->msgs[m] : NULL;
    if (msg && (msg->src < 0 || msg->src >= nranks || msg->dst < 0 || msg->dst >= nranks))
      return 0; /* rf_schedule_build refuses it */
    if (msg && m && msg->stage < plan->msgs[m - 1].stage) return 0;
    /* staged: rounds never span stages, so the stages' bounds add up */
    if (!pipelined && (!msg || (m && msg->stage != plan->msgs[m - 1].stage))) {
      total += stage_max;
      stage_max = 0;
      for (; stage_first < m; stage_first++) {
        ld[plan->msgs[stage_first].src] = (RankLoad){0};
        ld[plan->msgs[stage_first].dst] = (RankLoad){0};
      }
    }
    if (!msg) break;
    /* its segments: whole ones of B bytes and an aligned tail; an operation at each end */
    const uint64_t nseg = div_up(msg->bytes, B);
    const uint64_t bytes = msg->bytes / B * B + align_up(msg->bytes % B, RF_SCHEDULE_ALIGN);
    const int c = pipelined && !(msg->flags & RF_XFER_NET);
    RankLoad *a = &ld[msg->src], *z = &ld[msg->dst];
    a->send[c] += bytes;
    a->ops += nseg;
    z->recv[c] += bytes;
    z->ops += nseg;
    stage_max = MAX(stage_max, MAX(load_rounds(a, rooms, max_ops), load_rounds(z, rooms, max_ops)));
  }
  return pipelined ? stage_max : total;
}

RfSchedule *rf_schedule_build(const RfPlan *plan, int nranks, uint64_t staging_bytes, int max_ops,
                              int slots, unsigned flags, RfScheduleProgress progress,
                              void *progress_ud, GError **error) {
  const gboolean pipelined = (flags & RF_SCHEDULE_PIPELINED) != 0;
  const gboolean sizes_only = (flags & RF_SCHEDULE_SIZES_ONLY) && !pipelined;
  uint64_t room, B;
  if (!schedule_sizes(plan, nranks, staging_bytes, pipelined, &room, &B, &max_ops)) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "schedule: staging bound %" G_GUINT64_FORMAT
                " B is below one %u B segment, or fewer than 2 operations per round",
                staging_bytes, RF_SCHEDULE_ALIGN);
    return NULL;
  }
  if (slots < 1 || slots > RF_SCHEDULE_MAX_SLOTS) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "schedule: %d staging slots (lanes) not in 1..%d",
                slots, RF_SCHEDULE_MAX_SLOTS);
    return NULL;
  }
  if (!sizes_only) {
    const uint64_t n = rf_schedule_segments(plan, staging_bytes, pipelined);
    if (n > RF_SCHEDULE_MAX_SEGMENTS) {
      g_set_error(error, RF_ERROR, RF_ERROR_LIMIT,
                  "schedule: %" G_GUINT64_FORMAT " segments of %" G_GUINT64_FORMAT
                  " B, more than the %" G_GUINT64_FORMAT
                  " one build places (about 40 bytes each); give a larger staging bound "
                  "(refit run, refit sim: --staging-mib)",
                  n, B, RF_SCHEDULE_MAX_SEGMENTS);
      return NULL;
    }
  }
  g_autoptr(RfSchedule) s =
      schedule_new(plan, nranks, room, B, max_ops, slots, pipelined, sizes_only);
  if (pipelined) { /* one round space for every stage: stage_round0 all 0 */
    if (!check_pipelined(plan, nranks, s->nsegs, error)) return NULL;
    if (!place_pipelined(s, plan, max_ops, progress, progress_ud, error)) return NULL;
    s->stage_round0[plan->nstages] = s->nrounds;
    return g_steal_pointer(&s);
  }
  if (!place_staged(s, plan, max_ops, progress, progress_ud, error)) return NULL;
  return g_steal_pointer(&s);
}

int rf_schedule_round_stage(const RfSchedule *s, int round) {
  int lo = 0, hi = s->nstages; /* the stage k with stage_round0[k] <= round < [k + 1] */
  while (hi - lo > 1) {
    int mid = (lo + hi) / 2;
    if (s->stage_round0[mid] <= round)
      lo = mid;
    else
      hi = mid;
  }
  /* empty stages share their first round with the next one: take the last stage starting there */
  return lo;
}

int rf_schedule_lane(const RfSchedule *s, int round) {
  return (round - s->stage_round0[rf_schedule_round_stage(s, round)]) % s->slots;
}

void rf_schedule_rank_program(const RfSchedule *s, const int *rounds, const int *needs, int n,
                              GArray *ops) {
  /* posted, not yet waited, oldest first: the rounds and their lanes (a lane holds one at a
   * time, so the lanes in flight are distinct: a mask) */
  int fly[RF_SCHEDULE_MAX_SLOTS], fly_lane[RF_SCHEDULE_MAX_SLOTS];
  G_STATIC_ASSERT(RF_SCHEDULE_MAX_SLOTS <= 32);
  uint32_t held = 0;
  int nfly = 0, stage = -1;
  const guint at = ops->len; /* each round: PACK, POST, later WAIT, UNPACK: 4 n ops */
  g_array_set_size(ops, at + 4 * (guint)n);
  RfSchedOp *op = &g_array_index(ops, RfSchedOp, at);
  for (int i = 0; i <= n; i++) {
    const int r = i < n ? rounds[i] : -1;
    const int k = i < n ? rf_schedule_round_stage(s, r) : -1;
    const int lane = i < n ? (r - s->stage_round0[k]) % s->slots : -1; /* rf_schedule_lane */
    for (;;) {
      const gboolean busy = lane >= 0 && (held >> lane & 1); /* r's lane is held in flight */
      /* the end, a new stage, a full pipeline, a held lane or a round whose data this one
       * forwards: retire the oldest round */
      gboolean need = i < n && needs && nfly && fly[0] <= needs[i];
      if (!nfly || (i < n && k == stage && nfly < s->slots && !busy && !need)) break;
      *op++ = (RfSchedOp){.round = fly[0], .kind = RF_SOP_WAIT, .lane = (uint8_t)fly_lane[0]};
      *op++ = (RfSchedOp){.round = fly[0], .kind = RF_SOP_UNPACK, .lane = (uint8_t)fly_lane[0]};
      held &= ~(UINT32_C(1) << fly_lane[0]);
      nfly--;
      memmove(fly, fly + 1, sizeof(int) * (size_t)nfly);
      memmove(fly_lane, fly_lane + 1, sizeof(int) * (size_t)nfly);
    }
    if (i == n) break;
    stage = k;
    *op++ = (RfSchedOp){.round = r, .kind = RF_SOP_PACK, .lane = (uint8_t)lane};
    *op++ = (RfSchedOp){.round = r, .kind = RF_SOP_POST, .lane = (uint8_t)lane};
    fly[nfly] = r;
    fly_lane[nfly++] = lane;
    held |= UINT32_C(1) << lane;
  }
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

void rf_schedule_rank_rounds(const RfSchedule *s, const RfPlan *plan, int rank, GArray *out,
                             GArray *needs) {
  g_autoptr(GArray) pairs = g_array_new(FALSE, FALSE, sizeof(int) * 2); /* (round, need) */
  for (uint64_t m = 0; m < plan->nmsgs; m++) {
    if (plan->msgs[m].src != rank && plan->msgs[m].dst != rank) continue;
    for (uint64_t g = s->seg_first[m]; g < s->seg_first[m + 1]; g++) {
      int p[2] = {s->seg_round[g], s->seg_dep && plan->msgs[m].src == rank ? s->seg_dep[g] : -1};
      g_array_append_val(pairs, p);
    }
  }
  int *v = (int *)(void *)pairs->data;
  if (pairs->len > 1) qsort(v, pairs->len, sizeof(int) * 2, cmp_int); /* by round */
  for (guint i = 0; i < pairs->len; i++) {
    gboolean same = out->len && i > 0 && v[2 * (i - 1)] == v[2 * i];
    if (!same) g_array_append_val(out, v[2 * i]);
    if (!needs) continue;
    if (!same) g_array_append_val(needs, v[2 * i + 1]);
    int *nd = &g_array_index(needs, int, needs->len - 1);
    *nd = MAX(*nd, v[2 * i + 1]);
  }
}

const char *rf_sched_op_name(RfSchedOpKind k) {
  static const char *const names[] = {"pack", "post", "wait", "unpack"};
  return (unsigned)k < G_N_ELEMENTS(names) ? names[k] : "?";
}
