/* Plan checks and dumps: the invariant checker for tests and --verify, and the JSON transfer
 * listing of --dump. */
#include "error.h"
#include "plan.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

/* ---- verification --------------------------------------------------------------------- */

/* Replace the boxes in left by what remains of them outside cut. */
static void box_subtract(GArray *left, const RfBox *cut, int nd) {
  GArray *out = g_array_new(FALSE, FALSE, sizeof(RfBox));
  for (guint i = 0; i < left->len; i++) {
    RfBox rest[2 * RF_MAX_DIMS];
    int n = rf_box_subtract(&g_array_index(left, RfBox, i), cut, nd, rest);
    g_array_append_vals(out, rest, (guint)n);
  }
  g_array_set_size(left, 0);
  g_array_append_vals(left, out->data, out->len);
  g_array_free(out, TRUE);
}

/* Transfers indexed by (part, receiving rank): key -> GArray of transfer indices. */
static GHashTable *index_new(void) {
  return g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, (GDestroyNotify)g_array_unref);
}

static inline gint64 index_key(uint32_t part, int rank) {
  return ((gint64)part << 32) | (uint32_t)rank;
}

static GArray *index_get(GHashTable *by, uint32_t part, int rank) {
  gint64 key = index_key(part, rank);
  return g_hash_table_lookup(by, &key);
}

gboolean rf_plan_check_messages(const RfPlan *plan, GError **error) {
  const int nranks = plan->problem ? plan->problem->nranks : INT_MAX;
  uint64_t next = 0;
  for (uint64_t i = 0; i < plan->nmsgs; i++) {
    const RfMessage *mg = &plan->msgs[i];
    if (mg->first != next || mg->count == 0 || mg->first + (uint64_t)mg->count > plan->nxfers ||
        mg->src < 0 || mg->src >= nranks || mg->dst < 0 || mg->dst >= nranks) {
      g_set_error(error, RF_ERROR, RF_ERROR_VERIFY, "message %llu does not match its transfers",
                  (unsigned long long)i);
      return FALSE;
    }
    next += mg->count;
  }
  if (next != plan->nxfers) {
    g_set_error(error, RF_ERROR, RF_ERROR_VERIFY, "messages cover %llu of %llu transfers",
                (unsigned long long)next, (unsigned long long)plan->nxfers);
    return FALSE;
  }
  return TRUE;
}

/* 1. Messages tile the transfers (rf_plan_check_messages), sorted by (stage, source,
 * destination) with no two alike, their bytes their transfers'; mof[t]: transfer t's message. */
static gboolean check_messages(const RfPlan *plan, uint64_t *mof, GError **error) {
  if (!rf_plan_check_messages(plan, error)) return FALSE;
  for (uint64_t i = 0; i < plan->nmsgs; i++) {
    const RfMessage *mg = &plan->msgs[i];
    if (i > 0) {
      const RfMessage *p = &plan->msgs[i - 1];
      if (p->stage > mg->stage ||
          (p->stage == mg->stage &&
           (p->src > mg->src || (p->src == mg->src && p->dst >= mg->dst)))) {
        g_set_error(error, RF_ERROR, RF_ERROR_VERIFY,
                    "messages not sorted by (stage, src, dst) at %llu", (unsigned long long)i);
        return FALSE;
      }
    }
    uint64_t by = 0;
    for (uint64_t j = mg->first; j < (uint64_t)mg->first + mg->count; j++) {
      const RfTransfer *t = &plan->xfers[j];
      if (t->piece >= plan->npieces) {
        g_set_error(error, RF_ERROR, RF_ERROR_VERIFY, "transfer %llu names piece %u of %u",
                    (unsigned long long)j, t->piece, plan->npieces);
        return FALSE;
      }
      by += plan->pieces[t->piece].bytes;
      mof[j] = i;
    }
    if (by != mg->bytes || mg->phase != plan->xfers[mg->first].phase) {
      g_set_error(error, RF_ERROR, RF_ERROR_VERIFY, "message %llu does not match its transfers",
                  (unsigned long long)i);
      return FALSE;
    }
  }
  return TRUE;
}

/* 2. Every box inside its part, bytes matching the box; fills by. */
static gboolean check_transfers(const RfPlan *plan, const uint64_t *mof, GHashTable *by,
                                GError **error) {
  const RfModel *m = plan->problem->model;
  char b1[256];
  for (uint64_t i = 0; i < plan->nxfers; i++) {
    const RfTransfer *t = &plan->xfers[i];
    const RfPiece *pc = &plan->pieces[t->piece];
    const RfPart *part = &m->parts[pc->part];
    RfBox full;
    rf_box_full(&full, part->shape, part->ndim);
    if (rf_box_empty(&pc->box, part->ndim) || !rf_box_contains(&full, &pc->box, part->ndim)) {
      g_set_error(error, RF_ERROR, RF_ERROR_VERIFY, "transfer %llu: box %s outside part %u",
                  (unsigned long long)i, rf_box_format(&pc->box, part->ndim, b1, sizeof b1),
                  pc->part);
      return FALSE;
    }
    if (pc->bytes != (uint64_t)rf_box_volume(&pc->box, part->ndim) *
                         rf_dtype_size(m->tensors[part->tensor].dtype)) {
      g_set_error(error, RF_ERROR, RF_ERROR_VERIFY, "piece %u: bytes do not match its box",
                  t->piece);
      return FALSE;
    }
    const int dst = plan->msgs[mof[i]].dst;
    GArray *a = index_get(by, pc->part, dst);
    if (!a) {
      gint64 key = index_key(pc->part, dst);
      a = g_array_new(FALSE, FALSE, sizeof(uint64_t));
      g_hash_table_insert(by, g_memdup2(&key, sizeof key), a);
    }
    g_array_append_val(a, i);
  }
  return TRUE;
}

/* Whether the sender of transfer i holds its piece: its source shard, or what it received
 * earlier. */
static gboolean sender_holds(const RfPlan *plan, const uint64_t *mof, GHashTable *by, uint64_t i) {
  const RfProblem *pb = plan->problem;
  const RfMessage *mg = &plan->msgs[mof[i]];
  const RfPiece *pc = &plan->pieces[plan->xfers[i].piece];
  int nd = pb->model->parts[pc->part].ndim;
  RfBox own;
  gboolean has_own = rf_side_rank_shard(&pb->src, pc->part, mg->src, &own, NULL);
  if (has_own && rf_box_contains(&own, &pc->box, nd)) return TRUE;
  GArray *left = g_array_new(FALSE, FALSE, sizeof(RfBox));
  g_array_append_val(left, pc->box);
  if (has_own) box_subtract(left, &own, nd);
  GArray *a = index_get(by, pc->part, mg->src);
  for (guint j = 0; a && j < a->len && left->len; j++) {
    const uint64_t u = g_array_index(a, uint64_t, j);
    if (plan->msgs[mof[u]].stage < mg->stage)
      box_subtract(left, &plan->pieces[plan->xfers[u].piece].box, nd);
  }
  gboolean held = left->len == 0;
  g_array_free(left, TRUE);
  return held;
}

/* 3. Every sender held what it sends; the network and relay flags say the truth. */
static gboolean check_senders(const RfPlan *plan, const uint64_t *mof, GHashTable *by,
                              GError **error) {
  const RfProblem *pb = plan->problem;
  char b1[256];
  for (uint64_t i = 0; i < plan->nxfers; i++) {
    const RfTransfer *t = &plan->xfers[i];
    const RfMessage *mg = &plan->msgs[mof[i]];
    const RfPiece *pc = &plan->pieces[t->piece];
    int nd = pb->model->parts[pc->part].ndim;
    if (!sender_holds(plan, mof, by, i)) {
      g_set_error(error, RF_ERROR, RF_ERROR_VERIFY,
                  "transfer %llu (stage %d, %d -> %d, part %u %s): the sender does not hold it",
                  (unsigned long long)i, mg->stage, mg->src, mg->dst, pc->part,
                  rf_box_format(&pc->box, nd, b1, sizeof b1));
      return FALSE;
    }
    const gboolean net = rf_problem_domain(pb, mg->src) != rf_problem_domain(pb, mg->dst);
    if (!!(t->flags & RF_XFER_NET) != net || !!(mg->flags & RF_XFER_NET) != net) {
      g_set_error(error, RF_ERROR, RF_ERROR_VERIFY, "transfer %llu: network flag is wrong",
                  (unsigned long long)i);
      return FALSE;
    }
    RfBox mine, ov;
    gboolean keeps = t->phase != RF_PHASE_EXPORT &&
                     rf_side_rank_shard(&pb->dst, pc->part, mg->dst, &mine, NULL) &&
                     rf_box_intersect(&mine, &pc->box, nd, &ov);
    if (keeps == !!(t->flags & RF_XFER_RELAY)) {
      g_set_error(error, RF_ERROR, RF_ERROR_VERIFY, "transfer %llu: relay flag is wrong",
                  (unsigned long long)i);
      return FALSE;
    }
  }
  return TRUE;
}

/* Elements of part pi that rank r receives into its shard mine (kept transfers, clipped);
 * -1 + error when two received boxes overlap. */
static int64_t received_once(const RfPlan *plan, GHashTable *by, uint32_t pi, int r,
                             const RfBox *mine, GError **error) {
  const RfModel *m = plan->problem->model;
  int nd = m->parts[pi].ndim;
  char b1[256];
  GArray *a = index_get(by, pi, r);
  g_autoptr(GArray) clips = g_array_new(FALSE, FALSE, sizeof(RfBox));
  int64_t vol = 0;
  for (guint j = 0; a && j < a->len; j++) {
    const RfTransfer *t = &plan->xfers[g_array_index(a, uint64_t, j)];
    RfBox ov;
    if (t->flags & RF_XFER_RELAY) continue;
    if (!rf_box_intersect(&plan->pieces[t->piece].box, mine, nd, &ov)) continue;
    for (guint k = 0; k < clips->len; k++) {
      RfBox x;
      if (rf_box_intersect(&g_array_index(clips, RfBox, k), &ov, nd, &x)) {
        g_set_error(error, RF_ERROR, RF_ERROR_VERIFY, "rank %d receives %s of %s twice", r,
                    rf_box_format(&x, nd, b1, sizeof b1), m->tensors[m->parts[pi].tensor].name);
        return -1;
      }
    }
    g_array_append_val(clips, ov);
    vol += rf_box_volume(&ov, nd);
  }
  return vol;
}

/* 4. Every destination element received exactly once: the received boxes, clipped to the
 * rank's shard, are pairwise disjoint and their volumes add up to the shard's; bytes conserved. */
static gboolean check_delivery(const RfPlan *plan, GHashTable *by, GError **error) {
  const RfProblem *pb = plan->problem;
  const RfModel *m = pb->model;
  char b2[256];
  uint64_t delivered = 0;
  for (uint32_t pi = 0; pi < m->nparts; pi++) {
    const RfPlacement *dp = &pb->dst.place[pi];
    if (!dp->mesh) continue;
    int nd = dp->ndim;
    int es = rf_dtype_size(m->tensors[m->parts[pi].tensor].dtype);
    for (int pos = 0; pos < dp->mesh->nranks; pos++) {
      int r = dp->mesh->ranks[pos];
      RfBox mine;
      if (!rf_side_rank_shard(&pb->dst, pi, r, &mine, NULL)) continue;
      int64_t vol = received_once(plan, by, pi, r, &mine, error);
      if (vol < 0) return FALSE;
      if (vol != rf_box_volume(&mine, nd)) {
        g_set_error(error, RF_ERROR, RF_ERROR_VERIFY,
                    "rank %d receives %lld of the %lld elements of %s %s", r, (long long)vol,
                    (long long)rf_box_volume(&mine, nd), m->tensors[m->parts[pi].tensor].name,
                    rf_box_format(&mine, nd, b2, sizeof b2));
        return FALSE;
      }
      delivered += (uint64_t)vol * es;
    }
  }
  if (delivered != plan->stats.payload_bytes) {
    g_set_error(error, RF_ERROR, RF_ERROR_VERIFY,
                "bytes not conserved: %llu delivered, %llu expected", (unsigned long long)delivered,
                (unsigned long long)plan->stats.payload_bytes);
    return FALSE;
  }
  return TRUE;
}

gboolean rf_plan_verify(const RfPlan *plan, GError **error) {
  g_autoptr(GHashTable) by = index_new();
  g_autofree uint64_t *mof = g_new(uint64_t, plan->nxfers + 1);
  return check_messages(plan, mof, error) && check_transfers(plan, mof, by, error) &&
         check_senders(plan, mof, by, error) && check_delivery(plan, by, error);
}

/* ---- dump ----------------------------------------------------------------------------- */

/* s as the inside of a JSON string (RFC 8259): quote, backslash and control characters
 * escaped, valid UTF-8 kept as is, each invalid byte written as U+FFFD. */
static void json_escape(GString *out, const char *s) {
  const char *end = s + strlen(s);
  while (s < end) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') {
      g_string_append_c(out, '\\');
      g_string_append_c(out, (char)c);
      s++;
    } else if (c < 0x20 || c == 0x7f) {
      g_string_append_printf(out, "\\u%04x", c);
      s++;
    } else if (c < 0x80) {
      g_string_append_c(out, (char)c);
      s++;
    } else {
      gunichar u = g_utf8_get_char_validated(s, end - s);
      if (u == (gunichar)-1 || u == (gunichar)-2) {
        g_string_append(out, "\\ufffd");
        s++;
      } else {
        const char *n = g_utf8_next_char(s);
        g_string_append_len(out, s, n - s);
        s = n;
      }
    }
  }
}

gboolean rf_plan_dump(const RfPlan *plan, const char *path, GError **error) {
  if (!rf_plan_check_messages(plan, error)) return FALSE; /* a transfer's ranks: its message's */
  FILE *f = fopen(path, "w");
  if (!f) {
    g_set_error(error, RF_ERROR, RF_ERROR_IO, "cannot write %s: %s", path, g_strerror(errno));
    return FALSE;
  }
  const RfModel *m = plan->problem->model;
  fprintf(f, "{\"strategy\":\"%s\",\"transfers\":[", rf_strategy_name(plan->strategy));
  gboolean first = TRUE;
  for (uint64_t i = 0, mi = 0; i < plan->nxfers; i++) {
    while (mi + 1 < plan->nmsgs && i >= (uint64_t)plan->msgs[mi].first + plan->msgs[mi].count)
      mi++;
    const RfMessage *mg = &plan->msgs[mi];
    const RfTransfer *t = &plan->xfers[i];
    const RfPiece *pc = &plan->pieces[t->piece];
    const RfPart *part = &m->parts[pc->part];
    const RfTensor *ten = &m->tensors[part->tensor];
    /* Checkpoint coordinates: add the segment offset; a stacked expert box becomes one entry
     * per expert without the expert dim. */
    int64_t e0 = 0, e1 = 1;
    int d0 = 0;
    if (ten->nexperts > 0) {
      e0 = pc->box.lo[0];
      e1 = pc->box.hi[0];
      d0 = 1;
    }
    for (int64_t e = e0; e < e1; e++) {
      char *name = rf_tensor_name(ten, e);
      g_autoptr(GString) esc = g_string_new(NULL);
      json_escape(esc, name);
      fprintf(f, "%s\n{\"tensor\":\"%s\",\"src\":%d,\"dst\":%d,\"box\":[", first ? "" : ",",
              esc->str, mg->src, mg->dst);
      g_free(name);
      first = FALSE;
      for (int d = d0; d < part->ndim; d++) {
        int64_t off = d == part->seg_dim ? part->seg_off : 0;
        fprintf(f, "%s[%lld,%lld]", d > d0 ? "," : "", (long long)(pc->box.lo[d] + off),
                (long long)(pc->box.hi[d] + off));
      }
      fprintf(f, "],\"stage\":%d,\"phase\":\"%s\",\"relay\":%s}", mg->stage,
              rf_phase_name((RfPhase)t->phase), (t->flags & RF_XFER_RELAY) ? "true" : "false");
    }
  }
  fprintf(f, "\n]}\n");
  if (fclose(f) != 0) {
    g_set_error(error, RF_ERROR, RF_ERROR_IO, "cannot write %s: %s", path, g_strerror(errno));
    return FALSE;
  }
  return TRUE;
}
