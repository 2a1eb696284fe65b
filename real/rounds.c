/* Round scheduling of the real engine: every message of a stage is cut into segments of at most
 * the staging bound, and each segment goes first-fit into the earliest round of its stage where
 * both ends still have staging room and operation slots. Every rank computes the same assignment
 * from the same plan, so peers always meet in the same group. */
#include "engine_int.h"

#include <string.h>

/* Staging bytes and operations of every rank in one round being filled. */
typedef struct {
  uint64_t *send, *recv;
  int *ops;
} Usage;

static Usage *usage_new(int n) {
  Usage *u = g_new0(Usage, 1);
  u->send = g_new0(uint64_t, n);
  u->recv = g_new0(uint64_t, n);
  u->ops = g_new0(int, n);
  return u;
}

static void usage_free(gpointer p) {
  Usage *u = p;
  g_free(u->send);
  g_free(u->recv);
  g_free(u->ops);
  g_free(u);
}

/* A round that cannot take even the smallest segment from (to) rank x never will again in this
 * stage: first-fit may start after it. */
static gboolean send_full(const Usage *u, int x, uint64_t B, int max_ops) {
  return u->ops[x] + 1 > max_ops || u->send[x] + STAGE_ALIGN > B;
}

static gboolean recv_full(const Usage *u, int x, uint64_t B, int max_ops) {
  return u->ops[x] + 1 > max_ops || u->recv[x] + STAGE_ALIGN > B;
}

gboolean rf_real_assign_rounds(RealState *st, const RfPlan *plan, Segs *sg, GError **error) {
  const int n = st->pb->nranks;
  uint64_t B = st->opt.staging_bytes / STAGE_ALIGN * STAGE_ALIGN;
  sg->seg_bytes = B;
  sg->seg_first = g_new(uint64_t, plan->nmsgs + 1);
  uint64_t total = 0;
  for (uint64_t m = 0; m < plan->nmsgs; m++) {
    sg->seg_first[m] = total;
    total += (plan->msgs[m].bytes + B - 1) / B;
  }
  sg->seg_first[plan->nmsgs] = total;
  sg->seg_round = g_new(int, total ? total : 1);
  st->stage_round0 = g_new0(int, plan->nstages + 1);
  g_autoptr(GPtrArray) use = g_ptr_array_new_with_free_func(usage_free);
  /* per rank: rounds below open_send[x] (open_recv[x]) are full for x as a sender (receiver) */
  g_autofree guint *open_send = g_new0(guint, n);
  g_autofree guint *open_recv = g_new0(guint, n);
  int round0 = 0;
  uint64_t m = 0;
  const gint64 t0 = g_get_monotonic_time();
  gint64 shown = t0;
  for (int k = 0; k < plan->nstages; k++) {
    st->stage_round0[k] = round0;
    for (; m < plan->nmsgs && plan->msgs[m].stage == k; m++) {
      const RfMessage *msg = &plan->msgs[m];
      if (msg->src < 0 || msg->src >= n || msg->dst < 0 || msg->dst >= n) {
        rf_real_set_err(error, RF_ERROR_VERIFY,
                        "plan message %" G_GUINT64_FORMAT " has a rank outside the world", m);
        return FALSE;
      }
      int need = msg->src == msg->dst ? 2 : 1;
      for (uint64_t s = sg->seg_first[m]; s < sg->seg_first[m + 1]; s++) {
        if (!(s & 255)) rf_real_progress(st, plan, "segments scheduled", s, total, t0, &shown);
        uint64_t lo = (s - sg->seg_first[m]) * B;
        uint64_t b = rf_align_up(MIN(B, msg->bytes - lo), STAGE_ALIGN);
        guint r = MAX(open_send[msg->src], open_recv[msg->dst]);
        for (;; r++) {
          if (r == use->len) g_ptr_array_add(use, usage_new(n));
          Usage *u = use->pdata[r];
          if (u->send[msg->src] + b <= B && u->recv[msg->dst] + b <= B &&
              u->ops[msg->src] + need <= st->opt.max_ops &&
              u->ops[msg->dst] + need <= st->opt.max_ops) {
            u->send[msg->src] += b;
            u->recv[msg->dst] += b;
            u->ops[msg->src]++;
            u->ops[msg->dst]++;
            break;
          }
        }
        sg->seg_round[s] = round0 + (int)r;
        while (open_send[msg->src] < use->len &&
               send_full(use->pdata[open_send[msg->src]], msg->src, B, st->opt.max_ops))
          open_send[msg->src]++;
        while (open_recv[msg->dst] < use->len &&
               recv_full(use->pdata[open_recv[msg->dst]], msg->dst, B, st->opt.max_ops))
          open_recv[msg->dst]++;
      }
    }
    round0 += use->len;
    g_ptr_array_set_size(use, 0);
    memset(open_send, 0, sizeof(guint) * n);
    memset(open_recv, 0, sizeof(guint) * n);
  }
  st->stage_round0[plan->nstages] = round0;
  st->nrounds = round0;
  if (m != plan->nmsgs) {
    rf_real_set_err(error, RF_ERROR_VERIFY, "plan messages are not sorted by stage");
    return FALSE;
  }
  return TRUE;
}
