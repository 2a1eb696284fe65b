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

#include "error.h"

#include <string.h>

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

gboolean rf_schedule_pipelines(const RfPlan *plan) {
  return plan->strategy == RF_STRATEGY_M2N || plan->strategy == RF_STRATEGY_P2P;
}

/* Pipelined schedules: the latest round in which a rank received a piece of a part, at the stages
 * placed so far; key rank x nparts + part. */
typedef struct {
  GHashTable *last; /* guint64 key (owned) -> round + 1 */
  uint32_t nparts;
} DepMap;

static int dep_get(const DepMap *d, int rank, uint32_t part) {
  guint64 key = (guint64)rank * d->nparts + part;
  return GPOINTER_TO_INT(g_hash_table_lookup(d->last, &key)) - 1;
}

static void dep_put(DepMap *d, int rank, uint32_t part, int round) {
  guint64 key = (guint64)rank * d->nparts + part;
  int old = GPOINTER_TO_INT(g_hash_table_lookup(d->last, &key)) - 1;
  if (round <= old) return;
  g_hash_table_insert(d->last, g_memdup2(&key, sizeof key), GINT_TO_POINTER(round + 1));
}

static uint64_t piece_bytes(const RfPlan *plan, uint64_t t) {
  return plan->pieces[plan->xfers[t].piece].bytes;
}

static uint32_t piece_part(const RfPlan *plan, uint64_t t) {
  return plan->pieces[plan->xfers[t].piece].part;
}

/* After a stage is placed: what each of its receivers got, and in which round it ended. */
static void dep_add_stage(DepMap *d, const RfSchedule *s, const RfPlan *plan, uint64_t m0,
                          uint64_t m1) {
  const uint64_t B = s->seg_bytes;
  for (uint64_t m = m0; m < m1; m++) {
    const RfMessage *msg = &plan->msgs[m];
    uint64_t w = 0;
    for (uint64_t t = msg->first; t < (uint64_t)msg->first + msg->count; t++) {
      uint64_t b = piece_bytes(plan, t);
      if (b) {
        int last = -1;
        for (uint64_t g = s->seg_first[m] + w / B; g <= s->seg_first[m] + (w + b - 1) / B; g++)
          last = MAX(last, s->seg_round[g]);
        dep_put(d, msg->dst, piece_part(plan, t), last);
      }
      w += b;
    }
  }
}

RfSchedule *rf_schedule_build(const RfPlan *plan, int nranks, uint64_t staging_bytes, int max_ops,
                              int slots, unsigned flags, RfScheduleProgress progress,
                              void *progress_ud, GError **error) {
  const gboolean pipelined = (flags & RF_SCHEDULE_PIPELINED) != 0;
  const gboolean sizes_only = (flags & RF_SCHEDULE_SIZES_ONLY) && !pipelined;
  const uint64_t B = staging_bytes / RF_SCHEDULE_ALIGN * RF_SCHEDULE_ALIGN;
  if (B == 0 || max_ops < 2 || nranks < 1) {
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
  g_autoptr(RfSchedule) s = g_new0(RfSchedule, 1);
  s->seg_bytes = B;
  s->slots = slots;
  s->max_ops = max_ops;
  s->nranks = nranks;
  s->nmsgs = plan->nmsgs;
  s->nstages = plan->nstages;
  s->seg_first = g_new(uint64_t, plan->nmsgs + 1);
  uint64_t total = 0;
  for (uint64_t m = 0; m < plan->nmsgs; m++) {
    s->seg_first[m] = total;
    total += (plan->msgs[m].bytes + B - 1) / B;
  }
  s->seg_first[plan->nmsgs] = total;
  s->nsegs = total;
  s->seg_round = sizes_only ? NULL : g_new(int, total ? total : 1);
  s->pipelined = pipelined;
  s->seg_dep = pipelined ? g_new(int, total ? total : 1) : NULL;
  DepMap dm = {NULL, 0};
  if (pipelined) {
    dm.last = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    dm.nparts = plan->problem ? plan->problem->model->nparts : 1;
    for (uint64_t t = 0; t < plan->nxfers; t++) /* parts named by the plan (specs in tests) */
      dm.nparts = MAX(dm.nparts, piece_part(plan, t) + 1);
  }
  s->send_max = g_new0(uint64_t, nranks);
  s->recv_max = g_new0(uint64_t, nranks);
  s->stage_round0 = g_new0(int, plan->nstages + 1);
  RankUse *use = g_new0(RankUse, nranks);
  g_autoptr(GArray) touched = g_array_new(FALSE, FALSE, sizeof(int));
  int round0 = 0;
  uint64_t m = 0;
  gboolean ok = TRUE;
  guint nr = 0; /* rounds of this stage (pipelined: of every stage so far) */
  for (int k = 0; k < plan->nstages && ok; k++) {
    s->stage_round0[k] = round0;
    if (!pipelined) nr = 0;
    const uint64_t mk = m;
    for (; m < plan->nmsgs && plan->msgs[m].stage == k; m++) {
      const RfMessage *msg = &plan->msgs[m];
      if (msg->src < 0 || msg->src >= nranks || msg->dst < 0 || msg->dst >= nranks) {
        g_set_error(error, RF_ERROR, RF_ERROR_VERIFY,
                    "plan message %" G_GUINT64_FORMAT " has a rank outside the world", m);
        ok = FALSE;
        break;
      }
      RankUse *us = &use[msg->src], *ud = &use[msg->dst];
      for (int x = 0; x < 2; x++) {
        RankUse *u = x ? ud : us;
        if (!u->touched) {
          u->touched = TRUE;
          int id = x ? msg->dst : msg->src;
          g_array_append_val(touched, id);
        }
      }
      const int need = msg->src == msg->dst ? 2 : 1;
      guint prev_r = 0;
      uint64_t prev_b = 0;
      uint64_t g = s->seg_first[m];
      /* Full-size segments first, in one sweep: each takes the first round from the last one on
       * where both ends are still empty in that direction and have operation slots. A segment
       * changes only its own round, so this is the segment-by-segment first-fit. */
      /* (pipelined: segments have their own earliest rounds, placed one by one below) */
      const uint64_t nfull = pipelined ? 0 : msg->bytes / B; /* B is aligned: b == B */
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
      uint64_t t = msg->first, w = 0; /* pipelined: the first transfer not before the segment */
      for (; g < s->seg_first[m + 1]; g++) {
        if (progress && !(g & 4095)) progress(g, total, progress_ud);
        uint64_t lo = (g - s->seg_first[m]) * B;
        uint64_t b = align_up(MIN(B, msg->bytes - lo), RF_SCHEDULE_ALIGN);
        guint r = MAX(us->open_send, ud->open_recv);
        if (b == prev_b) r = MAX(r, prev_r);
        if (pipelined) { /* after the rounds that brought the sender what it forwards here */
          const uint64_t hi = MIN(msg->bytes, lo + B), tend = (uint64_t)msg->first + msg->count;
          while (t < tend && w + piece_bytes(plan, t) <= lo)
            w += piece_bytes(plan, t++);
          int dep = -1;
          for (uint64_t u = t, wu = w; u < tend && wu < hi; wu += piece_bytes(plan, u++))
            dep = MAX(dep, dep_get(&dm, msg->src, piece_part(plan, u)));
          s->seg_dep[g] = dep;
          r = MAX(r, (guint)(dep + 1));
        }
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
    }
    if (pipelined) { /* one round space for every stage: usage stays */
      dep_add_stage(&dm, s, plan, mk, m);
      continue;
    }
    round0 += nr;
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
  if (pipelined) round0 = (int)nr;
  for (int x = 0; x < nranks; x++)
    g_free(use[x].slot);
  g_free(use);
  if (dm.last) g_hash_table_destroy(dm.last);
  if (!ok) return NULL;
  if (m != plan->nmsgs) {
    g_set_error(error, RF_ERROR, RF_ERROR_VERIFY, "plan messages are not sorted by stage");
    return NULL;
  }
  s->stage_round0[plan->nstages] = round0;
  s->nrounds = round0;
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

static void push(GArray *ops, int round, RfSchedOpKind kind, int lane) {
  RfSchedOp o = {.round = round, .kind = (uint8_t)kind, .lane = (uint8_t)lane};
  g_array_append_val(ops, o);
}

void rf_schedule_rank_program(const RfSchedule *s, const int *rounds, const int *needs, int n,
                              GArray *ops) {
  int fly[RF_SCHEDULE_MAX_SLOTS]; /* posted, not yet waited: oldest first */
  int nfly = 0, stage = -1;
  for (int i = 0; i <= n; i++) {
    int r = i < n ? rounds[i] : -1;
    int k = i < n ? rf_schedule_round_stage(s, r) : -1;
    int lane = i < n ? rf_schedule_lane(s, r) : -1;
    for (;;) {
      gboolean busy = FALSE; /* the lane of r is held by a round in flight */
      for (int j = 0; j < nfly; j++)
        busy |= rf_schedule_lane(s, fly[j]) == lane;
      /* the end, a new stage, a full pipeline, a held lane or a round whose data this one
       * forwards: retire the oldest round */
      gboolean need = i < n && needs && nfly && fly[0] <= needs[i];
      if (!nfly || (i < n && k == stage && nfly < s->slots && !busy && !need)) break;
      int o = fly[0];
      push(ops, o, RF_SOP_WAIT, rf_schedule_lane(s, o));
      push(ops, o, RF_SOP_UNPACK, rf_schedule_lane(s, o));
      memmove(fly, fly + 1, sizeof(int) * (size_t)--nfly);
    }
    if (i == n) break;
    stage = k;
    push(ops, r, RF_SOP_PACK, lane);
    push(ops, r, RF_SOP_POST, lane);
    fly[nfly++] = r;
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
