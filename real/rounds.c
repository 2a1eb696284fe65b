/* Round scheduling of the real engine: every message of a stage is cut into segments of at most
 * the staging bound, and each segment goes first-fit into the earliest round of its stage where
 * both ends still have staging room and operation slots. Every rank computes the same assignment
 * from the same plan, so peers always meet in the same group.
 *
 * Usage is kept per rank, only for the rounds up to the last one the rank takes part in (a rank
 * is idle in every later round), so a stage costs what its segments touch, not ranks x rounds.
 * The search for a segment starts where first-fit can first succeed: past the rounds that are
 * full for either end (open pointers) and, for the next full-size segment of the same message,
 * at the round of the one before (the rounds before it had no room for that size then, and usage
 * only grows). The result is the plain first-fit assignment, segment by segment. */
#include "engine_int.h"

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
  while (u->open_send < u->len && !send_fits(u, u->open_send, STAGE_ALIGN, B, 1, max_ops))
    u->open_send++;
  while (u->open_recv < u->len && !recv_fits(u, u->open_recv, STAGE_ALIGN, B, 1, max_ops))
    u->open_recv++;
}

gboolean rf_real_assign_rounds(RealState *st, const RfPlan *plan, Segs *sg, GError **error) {
  const int n = st->pb->nranks;
  const int max_ops = st->opt.max_ops;
  uint64_t B = st->opt.staging_bytes / STAGE_ALIGN * STAGE_ALIGN;
  sg->seg_bytes = B;
  sg->seg_first = g_new(uint64_t, plan->nmsgs + 1);
  uint64_t total = 0;
  for (uint64_t m = 0; m < plan->nmsgs; m++) {
    sg->seg_first[m] = total;
    total += (plan->msgs[m].bytes + B - 1) / B;
  }
  sg->seg_first[plan->nmsgs] = total;
  /* sizes only: the rounds of each rank are not built, only its staging maxima */
  sg->seg_round = st->opt.plan_only ? NULL : g_new(int, total ? total : 1);
  sg->send_max = g_new0(uint64_t, n);
  sg->recv_max = g_new0(uint64_t, n);
  st->stage_round0 = g_new0(int, plan->nstages + 1);
  RankUse *use = g_new0(RankUse, n);
  g_autoptr(GArray) touched = g_array_new(FALSE, FALSE, sizeof(int));
  int round0 = 0;
  uint64_t m = 0;
  const gint64 t0 = g_get_monotonic_time();
  gint64 shown = t0;
  gboolean ok = TRUE;
  for (int k = 0; k < plan->nstages && ok; k++) {
    st->stage_round0[k] = round0;
    guint nr = 0; /* rounds of this stage */
    for (; m < plan->nmsgs && plan->msgs[m].stage == k; m++) {
      const RfMessage *msg = &plan->msgs[m];
      if (msg->src < 0 || msg->src >= n || msg->dst < 0 || msg->dst >= n) {
        rf_real_set_err(error, RF_ERROR_VERIFY,
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
      uint64_t s = sg->seg_first[m];
      /* Full-size segments first, in one sweep: each takes the first round from the last one on
       * where both ends are still empty in that direction and have operation slots. A segment
       * changes only its own round, so this is the segment-by-segment first-fit. */
      uint64_t nfull = msg->bytes / B; /* B is a multiple of STAGE_ALIGN: these have b == B */
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
          if (sg->seg_round) sg->seg_round[s + j] = round0 + (int)r;
          if (!(++j & 4095))
            rf_real_progress(st, plan, "segments scheduled", s + j, total, t0, &shown);
          prev_r = r;
        }
        sg->send_max[msg->src] = MAX(sg->send_max[msg->src], B);
        sg->recv_max[msg->dst] = MAX(sg->recv_max[msg->dst], B);
        nr = MAX(nr, prev_r + 1);
        prev_b = B;
        s += nfull;
        advance_open(us, B, max_ops);
        if (ud != us) advance_open(ud, B, max_ops);
      }
      for (; s < sg->seg_first[m + 1]; s++) {
        if (!(s & 4095)) rf_real_progress(st, plan, "segments scheduled", s, total, t0, &shown);
        uint64_t lo = (s - sg->seg_first[m]) * B;
        uint64_t b = rf_align_up(MIN(B, msg->bytes - lo), STAGE_ALIGN);
        guint r = MAX(us->open_send, ud->open_recv);
        if (b == prev_b) r = MAX(r, prev_r);
        while (!send_fits(us, r, b, B, need, max_ops) || !recv_fits(ud, r, b, B, need, max_ops))
          r++;
        Slot *ss = rank_slot(us, r);
        ss->send += b;
        ss->ops++;
        sg->send_max[msg->src] = MAX(sg->send_max[msg->src], ss->send);
        Slot *sd = rank_slot(ud, r); /* after ss: rank_slot may move the array (src == dst) */
        sd->recv += b;
        sd->ops++;
        sg->recv_max[msg->dst] = MAX(sg->recv_max[msg->dst], sd->recv);
        if (sg->seg_round) sg->seg_round[s] = round0 + (int)r;
        nr = MAX(nr, r + 1);
        prev_r = r;
        prev_b = b;
        advance_open(us, B, max_ops);
        if (ud != us) advance_open(ud, B, max_ops);
      }
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
  for (int x = 0; x < n; x++)
    g_free(use[x].slot);
  g_free(use);
  if (!ok) return FALSE;
  st->stage_round0[plan->nstages] = round0;
  st->nrounds = round0;
  if (m != plan->nmsgs) {
    rf_real_set_err(error, RF_ERROR_VERIFY, "plan messages are not sorted by stage");
    return FALSE;
  }
  return TRUE;
}

void rf_real_segs_clear(Segs *sg) {
  g_clear_pointer(&sg->seg_first, g_free);
  g_clear_pointer(&sg->seg_round, g_free);
  g_clear_pointer(&sg->send_max, g_free);
  g_clear_pointer(&sg->recv_max, g_free);
}
