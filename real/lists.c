/* Per-rank lists of the real engine: for one local rank, the rounds it takes part in, their
 * send / receive operations, the pack / unpack copy lists (cut at segment bounds, chunked for the
 * device), the holding store's layout (a first-fit allocator over piece lifetimes) and the
 * tables of base pointers, uploaded into backend memory once per plan. */
#include "engine_int.h"
#include "quant.h"

#include <string.h>

static void box_desc(const RfProblem *pb, uint32_t part, const RfBox *box, RfBoxDesc *d) {
  const RfPart *p = &pb->model->parts[part];
  const RfTensor *t = &pb->model->tensors[p->tensor];
  memset(d, 0, sizeof *d);
  d->tensor = p->tensor;
  d->ndim = p->ndim;
  d->esize = rf_dtype_size(t->dtype);
  d->seg_dim = p->seg_dim;
  d->seg_off = p->seg_off;
  int64_t stride = 1;
  for (int k = t->ndim - 1; k >= 0; k--) {
    if (k < RF_REAL_MAX_DIMS) d->tstride[k] = stride;
    stride *= t->shape[k];
  }
  for (int k = 0; k < p->ndim; k++) {
    d->lo[k] = box->lo[k];
    d->ext[k] = box->hi[k] - box->lo[k];
  }
}

void rf_real_side_runs(const RfProblem *pb, const RfSide *side, int rank, int sp0, GArray *boxes,
                       GArray *runs) {
  GArray *spans = g_array_new(FALSE, FALSE, sizeof(Span));
  for (uint32_t part = 0; part < pb->model->nparts; part++) {
    RfBox box, chunk;
    if (!side->place[part].mesh || !rf_side_rank_shard(side, part, rank, &box, &chunk)) continue;
    if (rf_quant_part_quantized(pb, part)) continue; /* filled and checked by quant.c */
    RfBoxDesc d;
    box_desc(pb, part, &box, &d);
    uint32_t bi = boxes->len;
    g_array_append_val(boxes, d);
    g_array_set_size(spans, 0);
    rf_local_runs(side, part, &chunk, &box, rf_span_cb, spans);
    uint64_t seq = 0;
    for (guint i = 0; i < spans->len; i++) {
      Span s = g_array_index(spans, Span, i);
      RfRun r = {(uint64_t)s.off, (uint64_t)s.len, seq, bi,
                 (uint32_t)(sp0 + side->local[part].buf)};
      g_array_append_val(runs, r);
      seq += s.len;
    }
  }
  g_array_free(spans, TRUE);
}

void *rf_real_upload_array(RealState *st, GArray *a, guint esize, RfRealStatus *s) {
  void *p = NULL;
  *s = st->ops->alloc(st->dev, (uint64_t)a->len * esize, &p);
  if (*s != RF_REAL_OK) return NULL;
  *s = st->ops->upload(st->dev, p, a->data, (uint64_t)a->len * esize);
  return p;
}

static RRound *rank_round(LRank *l, GArray *rounds, int g) {
  if (l->local_round[g] < 0) {
    RRound r = {0};
    r.round = g;
    r.need = -1;
    r.sends = g_array_new(FALSE, FALSE, sizeof(RfOp));
    r.recvs = g_array_new(FALSE, FALSE, sizeof(RfOp));
    r.pack = g_array_new(FALSE, FALSE, sizeof(RfCopy));
    r.unpack = g_array_new(FALSE, FALSE, sizeof(RfCopy));
    l->local_round[g] = rounds->len;
    g_array_append_val(rounds, r);
  }
  return &g_array_index(rounds, RRound, l->local_round[g]);
}

typedef struct {
  GArray *items;
  uint64_t wire0; /* byte offset of the piece in the message */
  uint64_t mem0;  /* byte offset of the memory box in its space */
  uint32_t sp;
  int esize;
  gboolean wire_is_a;
} ItemCtx;

static void item_cb(int64_t a, int64_t b, int64_t len, void *ud) {
  ItemCtx *c = ud;
  int64_t w = c->wire_is_a ? a : b, m = c->wire_is_a ? b : a;
  Item it = {c->wire0 + (uint64_t)w * c->esize, c->mem0 + (uint64_t)m * c->esize,
             (uint64_t)len * c->esize, c->sp};
  g_array_append_val(c->items, it);
}

static gint item_cmp(gconstpointer a, gconstpointer b) {
  const Item *x = a, *y = b;
  return x->wire < y->wire ? -1 : x->wire > y->wire;
}

/* Per-rank free-list allocator for the holding store: offsets are fixed before the run. */
typedef struct {
  uint64_t off, len;
} Hole;

static uint64_t hold_alloc(GArray *holes, uint64_t *top, uint64_t len) {
  for (guint i = 0; i < holes->len; i++) {
    Hole *h = &g_array_index(holes, Hole, i);
    if (h->len >= len) {
      uint64_t off = h->off;
      h->off += len;
      h->len -= len;
      if (!h->len) g_array_remove_index(holes, i);
      return off;
    }
  }
  /* none fits: grow the store, from the last hole where it ends at the top */
  if (holes->len) {
    Hole *h = &g_array_index(holes, Hole, holes->len - 1);
    if (h->off + h->len == *top) {
      const uint64_t off = h->off;
      *top = off + len;
      g_array_remove_index(holes, holes->len - 1);
      return off;
    }
  }
  uint64_t off = *top;
  *top += len;
  return off;
}

static void hold_free(GArray *holes, uint64_t off, uint64_t len) {
  guint i = 0;
  while (i < holes->len && g_array_index(holes, Hole, i).off < off)
    i++;
  Hole h = {off, len};
  g_array_insert_val(holes, i, h);
  /* coalesce with the next, then with the previous */
  if (i + 1 < holes->len && off + len == g_array_index(holes, Hole, i + 1).off) {
    g_array_index(holes, Hole, i).len += g_array_index(holes, Hole, i + 1).len;
    g_array_remove_index(holes, i + 1);
  }
  if (i > 0 &&
      g_array_index(holes, Hole, i - 1).off + g_array_index(holes, Hole, i - 1).len == off) {
    g_array_index(holes, Hole, i - 1).len += g_array_index(holes, Hole, i).len;
    g_array_remove_index(holes, i);
  }
}

/* Copies for the wire bytes [lo, hi) of a message: items are disjoint (wire, memory) pairs sorted
 * by wire offset; a send copies memory -> staging at stage_off, a receive staging -> memory. */
static void cut_items(const GArray *items, uint64_t lo, uint64_t hi, uint64_t stage_off,
                      gboolean send, uint32_t stage_sp, GArray *out) {
  /* binary search: first item ending after lo */
  guint a = 0, b = items->len;
  while (a < b) {
    guint mid = (a + b) / 2;
    const Item *it = &g_array_index(items, Item, mid);
    if (it->wire + it->bytes <= lo)
      a = mid + 1;
    else
      b = mid;
  }
  for (guint i = a; i < items->len; i++) {
    const Item *it = &g_array_index(items, Item, i);
    if (it->wire >= hi) break;
    uint64_t x = MAX(lo, it->wire), y = MIN(hi, it->wire + it->bytes);
    if (x >= y) continue;
    RfCopy c;
    if (send)
      c = (RfCopy){it->off + (x - it->wire), stage_off + (x - lo), y - x, it->sp, stage_sp};
    else
      c = (RfCopy){stage_off + (x - lo), it->off + (x - it->wire), y - x, stage_sp, it->sp};
    g_array_append_val(out, c);
  }
}

/* Test hook: a second unpack list, less the first copy into the destination shard, that the
 * last refit of a run uses: this rank loses one received chunk. */
static void drop_one_chunk(RealState *st, RRound *rounds, int n) {
  for (int k = 0; k < n; k++) {
    GArray *u = rounds[k].unpack;
    for (guint i = 0; i < u->len; i++) {
      const RfCopy *c = &g_array_index(u, RfCopy, i);
      if (c->dst_sp >= (uint32_t)st->ns && c->dst_sp < (uint32_t)st->sp_hold) {
        rounds[k].unpack_drop = g_array_sized_new(FALSE, FALSE, sizeof(RfCopy), u->len);
        g_array_append_vals(rounds[k].unpack_drop, u->data, u->len);
        g_array_remove_index(rounds[k].unpack_drop, i);
        return;
      }
    }
  }
}

/* Which messages touch each rank (CSR, ascending ids), so that building a rank walks only its
 * own part of the plan: every rank of a --memory check is built in one process. A rank's
 * transfers are its messages', in order (rf_real_build_rank numbers them so). */
void rf_real_index_plan(RealState *st, const RfPlan *plan) {
  const int n = st->pb->nranks;
  uint64_t *mf = g_new0(uint64_t, (size_t)n + 1);
  for (uint64_t m = 0; m < plan->nmsgs; m++) {
    const RfMessage *msg = &plan->msgs[m];
    if (msg->src >= 0 && msg->src < n) mf[msg->src + 1]++;
    if (msg->dst != msg->src && msg->dst >= 0 && msg->dst < n) mf[msg->dst + 1]++;
  }
  for (int r = 0; r < n; r++)
    mf[r + 1] += mf[r];
  uint64_t *ms = g_new(uint64_t, MAX(1, mf[n])), *mw = g_memdup2(mf, sizeof(uint64_t) * n);
  for (uint64_t m = 0; m < plan->nmsgs; m++) {
    const RfMessage *msg = &plan->msgs[m];
    if (msg->src >= 0 && msg->src < n) ms[mw[msg->src]++] = m;
    if (msg->dst != msg->src && msg->dst >= 0 && msg->dst < n) ms[mw[msg->dst]++] = m;
  }
  g_free(mw);
  st->rank_msg_first = mf;
  st->rank_msgs = ms;
}

/* A piece this rank received: local transfer i, its piece and stage (cover sources of a later
 * send, kept apart from the plan's arrays so that the scans below stay in cache). */
typedef struct {
  uint64_t i;
  uint32_t piece;
  int32_t stage;
  int64_t lo0, hi0; /* the piece's extent along dim 0: most misses are found with it */
} Got;

/* A received transfer the holding store may keep: local transfer i, its stage and bytes. */
typedef struct {
  uint64_t i, bytes;
  int32_t stage;
} Recvd;

/* What building one rank needs beside the rank itself; transfers are numbered locally: local i
 * is global transfer lx[i] (ascending). */
typedef struct {
  RealState *st;
  const RfPlan *plan;
  const RfSchedule *sg;
  LRank *l;
  int me;
  uint64_t *lx; /* owned */
  uint64_t nx;
  int32_t *last_use; /* per local transfer: the last stage (pipelined: round) it is forwarded
                      * at, or -1 */
  int32_t *xr_first, *xr_last; /* pipelined: per local transfer, its first and last round */
  int64_t *hold_off;           /* per local transfer: its offset in the holding store, or -1 */
  GArray *decomp; /* Decomp of every sent transfer (xfer: local index), in transfer order */
  GArray *rounds; /* RRound while building, indexed through l->local_round */
  GArray *recvd;  /* Recvd of every received transfer, in transfer order */
} Build;

static void rround_clear(RRound *r) {
  if (r->sends) g_array_free(r->sends, TRUE);
  if (r->recvs) g_array_free(r->recvs, TRUE);
  if (r->pack) g_array_free(r->pack, TRUE);
  if (r->unpack) g_array_free(r->unpack, TRUE);
  if (r->unpack_drop) g_array_free(r->unpack_drop, TRUE);
  r->sends = r->recvs = r->pack = r->unpack = r->unpack_drop = NULL;
}

static void build_clear(Build *b) {
  g_free(b->lx);
  g_free(b->last_use);
  g_free(b->xr_first);
  g_free(b->xr_last);
  g_free(b->hold_off);
  if (b->decomp) g_array_free(b->decomp, TRUE);
  if (b->recvd) g_array_free(b->recvd, TRUE);
  if (b->rounds) { /* still here: building failed before the rounds moved into the rank */
    for (guint k = 0; k < b->rounds->len; k++)
      rround_clear(&g_array_index(b->rounds, RRound, k));
    g_array_free(b->rounds, TRUE);
  }
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(Build, build_clear)

/* The plan's transfers are read through the rank's index, far apart: fetch ahead (the loops
 * below are bound by memory latency on large plans, not by arithmetic). */
#if defined(__GNUC__)
#define PREFETCH(p) __builtin_prefetch(p)
#else
#define PREFETCH(p) ((void)(p))
#endif
enum { AHEAD = 16 };

static void prefetch_piece(const RfPlan *plan, uint64_t t) {
  const RfPiece *p = &plan->pieces[plan->xfers[t].piece];
  PREFETCH(&p->box.lo[0]);
  PREFETCH(&p->box.hi[0]);
  PREFETCH(&p->bytes);
}

/* 0. Pipelined schedules: the first and last round of every local transfer's segments (a
 * transfer is its piece's bytes at its offset in its message). The holding store keeps a piece
 * from its first round to the last round that packs it. */
static void xfer_rounds(Build *b) {
  const RfSchedule *sg = b->sg;
  const RfPlan *plan = b->plan;
  const RealState *st = b->st;
  b->xr_first = g_new(int32_t, MAX(1, b->nx));
  b->xr_last = g_new(int32_t, MAX(1, b->nx));
  for (uint64_t i = 0; i < b->nx; i++)
    b->xr_first[i] = b->xr_last[i] = -1;
  const uint64_t *ms = st->rank_msgs + st->rank_msg_first[b->me];
  const uint64_t nm = st->rank_msg_first[b->me + 1] - st->rank_msg_first[b->me];
  uint64_t li = 0; /* local transfer of t: the rank's messages' transfers, in order */
  for (uint64_t k = 0; k < nm; k++) {
    const uint64_t m = ms[k];
    const RfMessage *msg = &plan->msgs[m];
    uint64_t w = 0;
    for (uint64_t t = msg->first; t < (uint64_t)msg->first + msg->count; t++, li++) {
      const uint64_t bytes = plan->pieces[plan->xfers[t].piece].bytes;
      if (bytes) {
        const uint64_t i = li;
        int lo, hi;
        rf_schedule_byte_rounds(sg, m, w, bytes, &lo, &hi);
        b->xr_first[i] = lo;
        b->xr_last[i] = hi;
      }
      w += bytes;
    }
  }
}

/* 1. What this rank receives, by part, and what each of its sends is made of. */
static gboolean rank_sources(Build *b, GError **error) {
  const RfProblem *pb = b->st->pb;
  const RfPlan *plan = b->plan;
  g_autoptr(GHashTable) recv_by_part =
      g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, (GDestroyNotify)g_array_unref);
  g_autoptr(GArray) srcs = g_array_new(FALSE, FALSE, sizeof(CoverSrc));
  /* the rank's transfers are its messages' (which hold their ranks and stage), in order: local
   * transfer i is the i-th of them */
  const uint64_t *ms = b->st->rank_msgs + b->st->rank_msg_first[b->me];
  const uint64_t nm = b->st->rank_msg_first[b->me + 1] - b->st->rank_msg_first[b->me];
  uint64_t i = 0;
  for (uint64_t k = 0; k < nm; k++) {
    const RfMessage *msg = &plan->msgs[ms[k]];
    for (uint64_t t = msg->first; t < (uint64_t)msg->first + msg->count; t++, i++) {
      if (i + 2 * AHEAD < b->nx) PREFETCH(&plan->xfers[b->lx[i + 2 * AHEAD]]);
      if (i + AHEAD < b->nx) prefetch_piece(plan, b->lx[i + AHEAD]);
      const RfTransfer *x = &plan->xfers[t];
      if (x->piece >= plan->npieces) {
        rf_real_set_err(error, RF_ERROR_VERIFY,
                        "plan transfer %" G_GUINT64_FORMAT " names piece %u of %u", t, x->piece,
                        plan->npieces);
        return FALSE;
      }
      const RfPiece *p = &plan->pieces[x->piece];
      int ndim = pb->model->parts[p->part].ndim;
      if (p->bytes != (uint64_t)rf_box_volume(&p->box, ndim) * rf_part_esize(pb, p->part)) {
        rf_real_set_err(error, RF_ERROR_VERIFY,
                        "plan piece %u: %" G_GUINT64_FORMAT " bytes for a box of %" G_GINT64_FORMAT
                        " elements",
                        x->piece, p->bytes, rf_box_volume(&p->box, ndim));
        return FALSE;
      }
      if (msg->src == b->me) {
        g_array_set_size(srcs, 0);
        CoverSrc c;
        if (pb->src.place[p->part].mesh &&
            rf_side_rank_shard(&pb->src, p->part, b->me, &c.box, NULL)) {
          c.origin = -1;
          g_array_append_val(srcs, c);
        }
        GArray *got = g_hash_table_lookup(recv_by_part, GUINT_TO_POINTER(p->part));
        for (guint k = 0; got && k < got->len; k++) {
          const Got *g = &g_array_index(got, Got, k);
          if (g->stage >= (int32_t)msg->stage) break;
          /* only what meets the piece: rf_cover skips the rest anyway */
          if (ndim > 0 && (g->hi0 <= p->box.lo[0] || p->box.hi[0] <= g->lo0)) continue;
          const RfBox *held = &plan->pieces[g->piece].box;
          RfBox in;
          if (!rf_box_intersect(&p->box, held, ndim, &in)) continue;
          c.box = *held;
          c.origin = (int64_t)g->i;
          g_array_append_val(srcs, c);
          /* rf_cover never gets past a source holding all of the piece: it covers whatever
           * the ones before it left */
          if (rf_box_contains(held, &p->box, ndim)) break;
        }
        guint d0 = b->decomp->len;
        if (!rf_cover(&p->box, ndim, (const CoverSrc *)srcs->data, srcs->len, 0, i, b->decomp)) {
          char buf[256];
          rf_real_set_err(
              error, RF_ERROR_VERIFY,
              "plan: rank %d sends %s of part %u at stage %u but does not hold all of it", b->me,
              rf_box_format(&p->box, ndim, buf, sizeof buf), p->part, msg->stage);
          return FALSE;
        }
        for (guint k = d0; k < b->decomp->len; k++) {
          int64_t u = g_array_index(b->decomp, Decomp, k).origin;
          if (u >= 0)
            b->last_use[u] = MAX(b->last_use[u], b->xr_last ? b->xr_last[i] : (int32_t)msg->stage);
        }
        /* sizes only: no pack lists will be made from it */
        if (b->st->opt.plan_only) g_array_set_size(b->decomp, d0);
      }
      if (msg->dst == b->me) {
        GArray *got = g_hash_table_lookup(recv_by_part, GUINT_TO_POINTER(p->part));
        if (!got) {
          got = g_array_new(FALSE, FALSE, sizeof(Got));
          g_hash_table_insert(recv_by_part, GUINT_TO_POINTER(p->part), got);
        }
        Got g = {i, x->piece, msg->stage, ndim > 0 ? p->box.lo[0] : 0, ndim > 0 ? p->box.hi[0] : 0};
        g_array_append_val(got, g);
        Recvd r = {i, p->bytes, b->xr_first ? b->xr_first[i] : (int32_t)msg->stage};
        g_array_append_val(b->recvd, r);
      }
    }
  }
  return TRUE;
}

/* A min-heap of held pieces by the last stage they are forwarded at. */
typedef struct {
  int32_t last;
  uint64_t i;     /* local transfer */
  uint64_t bytes; /* its slot in the holding store */
} Held;

static void heap_push(GArray *h, Held v) {
  g_array_append_val(h, v);
  Held *a = (Held *)h->data;
  for (guint k = h->len - 1; k > 0;) {
    guint p = (k - 1) / 2;
    if (a[p].last <= a[k].last) break;
    Held t = a[p];
    a[p] = a[k];
    a[k] = t;
    k = p;
  }
}

static Held heap_pop(GArray *h) {
  Held *a = (Held *)h->data, top = a[0];
  a[0] = a[h->len - 1];
  g_array_set_size(h, h->len - 1);
  for (guint k = 0;;) {
    guint l = 2 * k + 1, r = l + 1, m = k;
    if (l < h->len && a[l].last < a[m].last) m = l;
    if (r < h->len && a[r].last < a[m].last) m = r;
    if (m == k) break;
    Held t = a[m];
    a[m] = a[k];
    a[k] = t;
    k = m;
  }
  return top;
}

/* 2. Holding store: a received piece lives from its stage to its last forward. Freeing every
 * piece whose last forward is before the new piece's stage (in any order: the free list is kept
 * coalesced) before placing it first-fit. */
static gint recvd_by_first(gconstpointer a, gconstpointer b) {
  int32_t x = ((const Recvd *)a)->stage, y = ((const Recvd *)b)->stage;
  return (x > y) - (x < y);
}

static void hold_layout(Build *b) {
  g_autoptr(GArray) holes = g_array_new(FALSE, FALSE, sizeof(Hole));
  g_autoptr(GArray) active = g_array_new(FALSE, FALSE, sizeof(Held));
  uint64_t live = 0; /* bytes of the pieces held now: the peak is what the memory model counts */
  for (guint k = 0; k < b->recvd->len; k++) {
    const Recvd *x = &g_array_index(b->recvd, Recvd, k);
    if (b->last_use[x->i] < 0) continue;
    while (active->len && g_array_index(active, Held, 0).last < x->stage) {
      Held u = heap_pop(active);
      hold_free(holes, (uint64_t)b->hold_off[u.i], u.bytes);
      live -= u.bytes;
    }
    uint64_t len = rf_align_up(x->bytes, HOLD_ALIGN);
    b->hold_off[x->i] = (int64_t)hold_alloc(holes, &b->l->hold_bytes, len);
    heap_push(active, (Held){b->last_use[x->i], x->i, len});
    live += len;
    b->l->hold_live_bytes = MAX(b->l->hold_live_bytes, live);
  }
}

/* Scratch arrays of one message: items in wire order and the spans they are merged from. */
typedef struct {
  GArray *sitems, *ritems, *hitems; /* Item: from memory, into the destination shard, into the
                                     * holding store */
  GArray *A, *B;                    /* Span */
  guint di;                         /* next Decomp (b->decomp is in transfer order) */
} MsgScratch;

/* The pack items of local transfer i, a piece at byte wire of its message. */
static gboolean send_items(Build *b, MsgScratch *w, uint64_t i, uint64_t wire, GError **error) {
  const RfProblem *pb = b->st->pb;
  const RfPiece *p = &b->plan->pieces[b->plan->xfers[b->lx[i]].piece];
  int ndim = pb->model->parts[p->part].ndim;
  while (w->di < b->decomp->len && g_array_index(b->decomp, Decomp, w->di).xfer < i)
    w->di++;
  for (; w->di < b->decomp->len && g_array_index(b->decomp, Decomp, w->di).xfer == i; w->di++) {
    const Decomp *d = &g_array_index(b->decomp, Decomp, w->di);
    g_array_set_size(w->A, 0);
    g_array_set_size(w->B, 0);
    rf_box_spans(&p->box, &d->box, ndim, w->A);
    ItemCtx c = {w->sitems, wire, 0, 0, rf_part_esize(pb, p->part), TRUE};
    if (d->origin < 0) {
      RfBox chunk;
      rf_side_rank_shard(&pb->src, p->part, b->me, NULL, &chunk);
      rf_local_runs(&pb->src, p->part, &chunk, &d->box, rf_span_cb, w->B);
      c.sp = (uint32_t)pb->src.local[p->part].buf;
    } else {
      rf_box_spans(&b->plan->pieces[b->plan->xfers[b->lx[d->origin]].piece].box, &d->box, ndim,
                   w->B);
      c.sp = (uint32_t)b->st->sp_hold;
      c.mem0 = (uint64_t)b->hold_off[d->origin];
    }
    if (!rf_merge_spans(w->A, w->B, item_cb, &c)) {
      rf_real_set_err(error, RF_ERROR_VERIFY,
                      "rank %d: pack runs of transfer %" G_GUINT64_FORMAT " do not match", b->me,
                      b->lx[i]);
      return FALSE;
    }
  }
  return TRUE;
}

/* The unpack items of local transfer i: its part of the destination shard, and the whole piece
 * into the holding store when the rank forwards it later. */
static gboolean recv_items(Build *b, MsgScratch *w, uint64_t i, uint64_t wire, GError **error) {
  const RfProblem *pb = b->st->pb;
  const RfTransfer *x = &b->plan->xfers[b->lx[i]];
  const RfPiece *p = &b->plan->pieces[x->piece];
  int ndim = pb->model->parts[p->part].ndim;
  RfBox mine, chunk, keep;
  if (!(x->flags & RF_XFER_RELAY) && pb->dst.place[p->part].mesh &&
      rf_side_rank_shard(&pb->dst, p->part, b->me, &mine, &chunk) &&
      rf_box_intersect(&p->box, &mine, ndim, &keep)) {
    g_array_set_size(w->A, 0);
    g_array_set_size(w->B, 0);
    rf_box_spans(&p->box, &keep, ndim, w->A);
    rf_local_runs(&pb->dst, p->part, &chunk, &keep, rf_span_cb, w->B);
    ItemCtx c = {w->ritems,
                 wire,
                 0,
                 (uint32_t)(b->st->ns + pb->dst.local[p->part].buf),
                 rf_part_esize(pb, p->part),
                 TRUE};
    if (!rf_merge_spans(w->A, w->B, item_cb, &c)) {
      rf_real_set_err(error, RF_ERROR_VERIFY,
                      "rank %d: unpack runs of transfer %" G_GUINT64_FORMAT " do not match", b->me,
                      b->lx[i]);
      return FALSE;
    }
  }
  if (b->hold_off[i] >= 0) {
    Item it = {wire, (uint64_t)b->hold_off[i], p->bytes, (uint32_t)b->st->sp_hold};
    g_array_append_val(w->hitems, it);
  }
  return TRUE;
}

/* 3. Per message: items in wire order, cut at segment bounds into the rounds' operations and
 * lists (only the staging sizes with --memory). i0: the local number of its first transfer (the
 * rank's transfers are its messages', in order: rf_real_index_plan). */
static gboolean message_lists(Build *b, uint64_t m, uint64_t i0, MsgScratch *w, GError **error) {
  RealState *st = b->st;
  const RfMessage *msg = &b->plan->msgs[m];
  const gboolean lists = !st->opt.plan_only;
  gboolean sending = msg->src == b->me, receiving = msg->dst == b->me;
  g_array_set_size(w->sitems, 0);
  g_array_set_size(w->ritems, 0);
  g_array_set_size(w->hitems, 0);
  uint64_t wire = 0;
  const uint64_t end = (uint64_t)msg->first + msg->count;
  for (uint64_t t = msg->first; t < end; t++) {
    if (t + AHEAD < end) PREFETCH(&b->plan->pieces[b->plan->xfers[t + AHEAD].piece].bytes);
    const RfTransfer *x = &b->plan->xfers[t];
    uint64_t i = i0 + (t - msg->first);
    if (sending && lists && !send_items(b, w, i, wire, error)) return FALSE;
    if (receiving && lists && !recv_items(b, w, i, wire, error)) return FALSE;
    wire += b->plan->pieces[x->piece].bytes;
  }
  if (wire != msg->bytes) {
    rf_real_set_err(error, RF_ERROR_VERIFY,
                    "plan message %" G_GUINT64_FORMAT ": %" G_GUINT64_FORMAT
                    " bytes, its transfers carry %" G_GUINT64_FORMAT,
                    m, msg->bytes, wire);
    return FALSE;
  }
  g_array_sort(w->sitems, item_cmp);
  g_array_sort(w->ritems, item_cmp);
  g_array_sort(w->hitems, item_cmp);
  /* Items are sorted by wire offset and tile the message; sweep them against the segments. */
  const RfSchedule *sg = b->sg;
  /* sizes only: the staging maxima come from the schedule (pipelined: it has rounds anyway) */
  if (!sg->seg_round || b->st->opt.plan_only) return TRUE;
  for (uint64_t s = sg->seg_first[m]; s < sg->seg_first[m + 1]; s++) {
    uint64_t lo = (s - sg->seg_first[m]) * sg->seg_bytes, hi = MIN(msg->bytes, lo + sg->seg_bytes);
    RRound *r = rank_round(b->l, b->rounds, sg->seg_round[s]);
    /* the round's lane: its staging starts at lane x the rank's largest round */
    const uint64_t lane = (uint64_t)rf_schedule_lane(sg, sg->seg_round[s]);
    r->stage_mask |= 1u << MIN(msg->stage, 31);
    if (sending && sg->seg_dep) r->need = MAX(r->need, sg->seg_dep[s]);
    if (sending) {
      RfOp op = {msg->dst, 0, lane * b->l->slot_send + r->send_top, hi - lo};
      g_array_append_val(r->sends, op);
      if (lists) cut_items(w->sitems, lo, hi, op.off, TRUE, (uint32_t)st->sp_sstage, r->pack);
      r->send_top += rf_align_up(hi - lo, STAGE_ALIGN);
    }
    if (receiving) {
      RfOp op = {msg->src, 0, lane * b->l->slot_recv + r->recv_top, hi - lo};
      g_array_append_val(r->recvs, op);
      if (lists) {
        cut_items(w->ritems, lo, hi, op.off, FALSE, (uint32_t)st->sp_rstage, r->unpack);
        cut_items(w->hitems, lo, hi, op.off, FALSE, (uint32_t)st->sp_rstage, r->unpack);
      }
      r->recv_top += rf_align_up(hi - lo, STAGE_ALIGN);
    }
  }
  return TRUE;
}

static gboolean rank_messages(Build *b, GError **error) {
  RealState *st = b->st;
  const uint64_t *ms = st->rank_msgs + st->rank_msg_first[b->me];
  uint64_t nm = st->rank_msg_first[b->me + 1] - st->rank_msg_first[b->me];
  g_autoptr(GArray) sitems = g_array_new(FALSE, FALSE, sizeof(Item));
  g_autoptr(GArray) ritems = g_array_new(FALSE, FALSE, sizeof(Item));
  g_autoptr(GArray) hitems = g_array_new(FALSE, FALSE, sizeof(Item));
  g_autoptr(GArray) A = g_array_new(FALSE, FALSE, sizeof(Span));
  g_autoptr(GArray) B = g_array_new(FALSE, FALSE, sizeof(Span));
  MsgScratch w = {sitems, ritems, hitems, A, B, 0};
  for (uint64_t k = 0, i0 = 0; k < nm; i0 += b->plan->msgs[ms[k]].count, k++)
    if (!message_lists(b, ms[k], i0, &w, error)) return FALSE;
  return TRUE;
}

/* Append a round's copy list to the arena (chunked, small copies first); *off: where it starts,
 * *nsmall: its small copies. The list is freed. */
static uint64_t arena_add(GArray *arena, GArray *list, uint64_t *off, uint64_t *nsmall) {
  rf_real_chunk_copies(list, RF_REAL_CHUNK_BYTES);
  *nsmall = rf_real_order_copies(list, RF_REAL_SMALL_COPY_BYTES);
  *off = arena->len;
  const uint64_t n = list->len;
  g_array_append_vals(arena, list->data, list->len);
  g_array_free(list, TRUE);
  return n;
}

/* Every round's pack, unpack (and test-drop) lists in one backend allocation, one upload: a
 * round's lists are offsets into it (an allocation, an upload and two syncs per list cost more
 * than the copies of a short round). */
static gboolean upload_lists(RealState *st, LRank *l, GError **error) {
  g_autoptr(GArray) arena = g_array_new(FALSE, FALSE, sizeof(RfCopy));
  g_autofree uint64_t *off = g_new(uint64_t, 3 * (size_t)MAX(1, l->nrounds));
  for (int k = 0; k < l->nrounds; k++) {
    RRound *r = &l->rounds[k];
    r->npack = arena_add(arena, r->pack, &off[3 * k], &r->npack_small);
    r->nunpack = arena_add(arena, r->unpack, &off[3 * k + 1], &r->nunpack_small);
    r->pack = r->unpack = NULL;
    if (r->unpack_drop) {
      r->nunpack_drop = arena_add(arena, r->unpack_drop, &off[3 * k + 2], &r->nunpack_drop_small);
      r->unpack_drop = NULL;
    } else {
      off[3 * k + 2] = UINT64_MAX;
    }
  }
  RfRealStatus s = RF_REAL_OK;
  l->lists_dev = rf_real_upload_array(st, arena, sizeof(RfCopy), &s);
  if (s != RF_REAL_OK) {
    rf_real_set_err(error, rf_real_status_code(s), "rank %d: copy lists: %s", l->rank,
                    rf_real_status_string(s));
    return FALSE;
  }
  RfCopy *base = l->lists_dev;
  for (int k = 0; k < l->nrounds; k++) {
    RRound *r = &l->rounds[k];
    r->pack_dev = base + off[3 * k];
    r->unpack_dev = base + off[3 * k + 1];
    r->unpack_drop_dev = off[3 * k + 2] == UINT64_MAX ? NULL : base + off[3 * k + 2];
  }
  return TRUE;
}

/* 4. Rounds in global order, lists chunked and uploaded into backend memory. */
static gboolean rank_upload(Build *b, GError **error) {
  RealState *st = b->st;
  LRank *l = b->l;
  l->nrounds = b->rounds->len;
  l->rounds = g_new0(RRound, l->nrounds ? l->nrounds : 1);
  int k = 0;
  for (int g = 0; g < st->nrounds; g++) {
    if (l->local_round[g] < 0) continue;
    l->rounds[k] = g_array_index(b->rounds, RRound, l->local_round[g]);
    l->local_round[g] = k++;
  }
  g_array_free(b->rounds, TRUE); /* its arrays belong to l->rounds now */
  b->rounds = NULL;
  if (b->me == st->opt.corrupt_rank) drop_one_chunk(st, l->rounds, l->nrounds);
  /* the rank's program: the schedule's order of its rounds' packs, posts, waits and unpacks */
  g_autoptr(GArray) mine = g_array_sized_new(FALSE, FALSE, sizeof(int), (guint)l->nrounds);
  g_autoptr(GArray) needs = g_array_sized_new(FALSE, FALSE, sizeof(int), (guint)l->nrounds);
  for (k = 0; k < l->nrounds; k++) {
    g_array_append_val(mine, l->rounds[k].round);
    g_array_append_val(needs, l->rounds[k].need);
  }
  g_autoptr(GArray) prog = g_array_new(FALSE, FALSE, sizeof(RfSchedOp));
  rf_schedule_rank_program(b->sg, (const int *)(const void *)mine->data,
                           (const int *)(const void *)needs->data, (int)mine->len, prog);
  l->nprog = (int)prog->len;
  l->prog = (RfSchedOp *)(void *)g_array_free(g_steal_pointer(&prog), FALSE);
  uint64_t send_top = 0, recv_top = 0;
  for (k = 0; k < l->nrounds; k++) {
    send_top = MAX(send_top, l->rounds[k].send_top);
    recv_top = MAX(recv_top, l->rounds[k].recv_top);
  }
  if (!upload_lists(st, l, error)) return FALSE;
  /* the schedule's per-rank maxima (the lane size) are the built rounds' */
  if (send_top != l->slot_send || recv_top != l->slot_recv) {
    rf_real_set_err(error, RF_ERROR_VERIFY,
                    "rank %d: staging of the built rounds (%" G_GUINT64_FORMAT
                    " + %" G_GUINT64_FORMAT " B) differs from the schedule's (%" G_GUINT64_FORMAT
                    " + %" G_GUINT64_FORMAT " B)",
                    b->me, send_top, recv_top, l->slot_send, l->slot_recv);
    return FALSE;
  }
  return TRUE;
}

gboolean rf_real_build_rank(RealState *st, const RfPlan *plan, const RfSchedule *sg, LRank *l,
                            GError **error) {
  const int me = l->rank;
  /* the rank's transfers, numbered along its messages */
  const uint64_t *ms = st->rank_msgs + st->rank_msg_first[me];
  const uint64_t nm = st->rank_msg_first[me + 1] - st->rank_msg_first[me];
  uint64_t nx = 0;
  for (uint64_t k = 0; k < nm; k++)
    nx += plan->msgs[ms[k]].count;
  g_auto(Build) b = {st,   plan, sg,   l,    me,  g_new(uint64_t, MAX(1, nx)), nx, NULL, NULL,
                     NULL, NULL, NULL, NULL, NULL};
  for (uint64_t k = 0, i = 0; k < nm; k++) {
    const RfMessage *g = &plan->msgs[ms[k]];
    for (uint32_t j = 0; j < g->count; j++)
      b.lx[i++] = (uint64_t)g->first + j;
  }
  b.last_use = g_new(int32_t, MAX(1, nx));
  b.hold_off = g_new(int64_t, MAX(1, nx));
  for (uint64_t i = 0; i < nx; i++) {
    b.last_use[i] = -1;
    b.hold_off[i] = -1;
  }
  b.decomp = g_array_new(FALSE, FALSE, sizeof(Decomp));
  b.recvd = g_array_new(FALSE, FALSE, sizeof(Recvd));
  b.rounds = g_array_new(FALSE, FALSE, sizeof(RRound));
  if (!st->opt.plan_only) {
    l->local_round = g_new(int, st->nrounds ? st->nrounds : 1);
    for (int g = 0; g < st->nrounds; g++)
      l->local_round[g] = -1;
  }
  /* one lane holds the rank's largest round; the staging is every lane (what --memory reports) */
  l->slot_send = sg->send_max[me];
  l->slot_recv = sg->recv_max[me];
  l->sstage_bytes = (uint64_t)sg->slots * l->slot_send;
  l->rstage_bytes = (uint64_t)sg->slots * l->slot_recv;
  if (sg->pipelined) xfer_rounds(&b);
  if (!rank_sources(&b, error)) return FALSE;
  if (sg->pipelined) g_array_sort(b.recvd, recvd_by_first); /* by first round (stable) */
  hold_layout(&b);
  if (!rank_messages(&b, error)) return FALSE;
  if (st->opt.plan_only) return TRUE;
  return rank_upload(&b, error);
}

static void free_rank_plan(RealState *st, LRank *l) {
  gboolean live = st->dev != NULL; /* after an abort the device state is gone with the process */
  for (int k = 0; k < l->nrounds; k++) {
    RRound *r = &l->rounds[k];
    rround_clear(r);
  }
  if (live) st->ops->release(st->dev, l->lists_dev);
  l->lists_dev = NULL;
  g_free(l->rounds);
  g_free(l->local_round);
  g_clear_pointer(&l->prog, g_free);
  l->nprog = 0;
  if (live) {
    st->ops->release(st->dev, l->hold);
    st->ops->release(st->dev, l->sstage);
    st->ops->release(st->dev, l->rstage);
    for (int b = 0; b < st->nbanks; b++)
      st->ops->release(st->dev, l->bases_dev[b]);
  }
  l->rounds = NULL;
  l->local_round = NULL;
  l->nrounds = 0;
  l->hold = l->sstage = l->rstage = NULL;
  l->bases_dev[0] = l->bases_dev[1] = NULL;
  l->hold_bytes = l->hold_live_bytes = l->sstage_bytes = l->rstage_bytes = 0;
}

void rf_real_free_plan(RealState *st) {
  for (int i = 0; i < st->nlr; i++)
    free_rank_plan(st, &st->lr[i]);
  st->stage_round0 = NULL; /* the schedule's */
  g_clear_pointer(&st->sched, rf_schedule_free);
  g_clear_pointer(&st->round_ranks, g_free);
  g_clear_pointer(&st->rank_msg_first, g_free);
  g_clear_pointer(&st->rank_msgs, g_free);
  st->nrounds = 0;
}

gboolean rf_real_rank_tables(RealState *st, LRank *l, GError **error) {
  RfRealStatus s;
  g_autofree void **t = NULL;
  DEVCHECK(st, st->ops->alloc(st->dev, l->hold_bytes, &l->hold), "holding store");
  DEVCHECK(st, st->ops->alloc(st->dev, l->sstage_bytes, &l->sstage), "send staging");
  DEVCHECK(st, st->ops->alloc(st->dev, l->rstage_bytes, &l->rstage), "receive staging");
  t = g_new0(void *, st->nsp);
  for (int bank = 0; bank < st->nbanks; bank++) { /* one table per destination bank */
    for (int k = 0; k < st->ns; k++)
      t[k] = l->src_buf[k];
    for (int k = 0; k < st->nd; k++)
      t[st->ns + k] = l->dst_buf[bank][k];
    t[st->sp_hold] = l->hold;
    t[st->sp_sstage] = l->sstage;
    t[st->sp_rstage] = l->rstage;
    s = st->ops->alloc(st->dev, sizeof(void *) * st->nsp, (void **)&l->bases_dev[bank]);
    if (s == RF_REAL_OK)
      s = st->ops->upload(st->dev, l->bases_dev[bank], t, sizeof(void *) * st->nsp);
    if (s != RF_REAL_OK) {
      rf_real_set_err(error, rf_real_status_code(s), "rank %d: base table: %s", st->me,
                      rf_real_status_string(s));
      return FALSE;
    }
  }
  return TRUE;
fail:
  return FALSE;
}
