/* The real executor's engine, shared by every backend.
 *
 * prepare(): allocate every local rank's shards (sources once, destinations twice: the double
 * buffer) and the run lists that fill and verify them.
 * run(): turn the plan into per-rank rounds, then execute warm-up + timed refits.
 *
 * A round is one group of send / receive operations; rounds never span stages, and inside a stage
 * every message is cut into segments of at most the staging bound and placed first-fit into the
 * earliest round where both ends still have staging room and operation slots. Every rank computes
 * the same assignment from the same plan, so peers always meet in the same group (rounds are
 * collective: a rank must not wait in round r for a peer still in round r' < r that in turn waits
 * for it). On the wire a message is its transfers' pieces, each in row-major order of the
 * piece's box; senders pack into that order from their source shard or from what they received
 * earlier (the holding store), receivers unpack into their destination shard and, if they forward
 * it later, into the holding store. */
#include "boot.h"
#include "error.h"
#include "pattern.h"
#include "real.h"
#include "real_engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STAGE_ALIGN 64u /* staging offsets: enough for any element and for vector copies */
#define HOLD_ALIGN 64u

typedef struct {
  int64_t off, len; /* elements */
} Span;

typedef struct {
  uint64_t wire; /* byte offset in the message */
  uint64_t off;  /* byte offset in space sp */
  uint64_t bytes;
  uint32_t sp;
} Item;

typedef struct {
  int round;                             /* global round */
  GArray *sends, *recvs, *pack, *unpack; /* RfOp, RfOp, RfCopy, RfCopy while building */
  uint64_t send_top, recv_top;
  void *pack_dev, *unpack_dev;
  uint64_t npack, nunpack;
  GArray *unpack_drop; /* test hook: the unpack list less one chunk */
  void *unpack_drop_dev;
  uint64_t nunpack_drop;
} RRound;

typedef struct {
  int rank;
  uint64_t src_bytes, dst_bytes; /* all its buffers of each side (one bank) */
  void **src_buf;                /* ns */
  void **dst_buf[2];             /* nd per bank */
  RfBoxDesc *boxes_dev;
  RfRun *fill_dev, *verify_dev;
  uint64_t nfill, nverify;
  /* per plan */
  void *hold, *sstage, *rstage;
  uint64_t hold_bytes, sstage_bytes, rstage_bytes;
  void **bases_dev[2];
  RRound *rounds;
  int nrounds;
  int *local_round; /* global round -> index in rounds or -1 */
} LRank;

typedef struct {
  RfRealOptions opt;
  const RfDevOps *ops;
  RfDev *dev;
  const RfProblem *pb;
  int me, world;
  int ns, nd, nsp, sp_hold, sp_sstage, sp_rstage;
  LRank *lr;
  int nlr;
  int *lr_of_rank;
  int bank;      /* bank holding the last verified weights */
  uint64_t step; /* next training step */
  uint64_t prev_step;
  gboolean have_prev;
  /* per plan */
  int nrounds;
  int *stage_round0; /* nstages + 1: first global round of each stage */
  RfRealSpread spread;
} RealState;

static void set_err(GError **error, RfError code, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
static void set_err(GError **error, RfError code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *m = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error_literal(error, RF_ERROR, code, m);
  g_free(m);
}

/* The error code of a backend status: a timeout, memory, or a failure of the runtime. */
static RfError status_code(RfRealStatus s) {
  switch (s) {
  case RF_REAL_ERR_TIMEOUT:
    return RF_ERROR_TIMEOUT;
  case RF_REAL_ERR_NOMEM:
    return RF_ERROR_LIMIT;
  default:
    return RF_ERROR_PEER;
  }
}

#define DEVCHECK(st, call, what)                                                                   \
  do {                                                                                             \
    RfRealStatus s_ = (call);                                                                      \
    if (s_ != RF_REAL_OK) {                                                                        \
      set_err(error, status_code(s_), "rank %d: %s: %s", (st)->me, (what),                         \
              rf_real_status_string(s_));                                                          \
      goto fail;                                                                                   \
    }                                                                                              \
  } while (0)

void rf_real_options_init(RfRealOptions *o) {
  memset(o, 0, sizeof *o);
  o->backend = g_strdup("host");
  o->warmup = 1;
  o->iters = 5;
  o->staging_bytes = 64ull << 20;
  o->max_ops = 32;
  o->timeout_s = 60.0;
  o->fail_rank = -1;
  o->fail_stage = 0;
  o->corrupt_rank = -1;
}

gboolean rf_real_backend_built(const char *name) {
  return rf_boot_dev_ops(name) != NULL;
}

static int part_esize(const RfProblem *pb, uint32_t part) {
  return rf_dtype_size(pb->model->tensors[pb->model->parts[part].tensor].dtype);
}

static int buf_esize(const RfProblem *pb, const RfSide *side, int buf) {
  return part_esize(pb, side->buf_part[buf]);
}

static uint64_t align_up(uint64_t x, uint64_t a) {
  return (x + a - 1) / a * a;
}

/* ---------- spans of boxes ---------- */

/* Runs of sub (inside outer) in outer's row-major order, in row-major order of sub. */
static void box_spans(const RfBox *outer, const RfBox *sub, int ndim, GArray *out) {
  int64_t ext[RF_MAX_DIMS], oext[RF_MAX_DIMS];
  if (ndim <= 0) { /* a scalar: one element */
    Span s = {0, 1};
    g_array_append_val(out, s);
    return;
  }
  for (int d = 0; d < ndim; d++) {
    ext[d] = sub->hi[d] - sub->lo[d];
    oext[d] = outer->hi[d] - outer->lo[d];
    if (ext[d] <= 0) return;
  }
  /* Dims after j are covered whole: a run spans sub's extent along j times those dims. */
  int j = ndim - 1;
  int64_t inner = 1;
  while (j > 0 && ext[j] == oext[j])
    inner *= ext[j--];
  int64_t len = ext[j] * inner;
  int64_t idx[RF_MAX_DIMS] = {0};
  for (;;) {
    int64_t off = 0;
    for (int d = 0; d < ndim; d++) {
      int64_t c = sub->lo[d] - outer->lo[d] + (d < j ? idx[d] : 0);
      off = off * oext[d] + c;
    }
    Span s = {off, len};
    if (out->len &&
        g_array_index(out, Span, out->len - 1).off + g_array_index(out, Span, out->len - 1).len ==
            off)
      g_array_index(out, Span, out->len - 1).len += len;
    else
      g_array_append_val(out, s);
    int d = j - 1;
    while (d >= 0 && ++idx[d] == ext[d])
      idx[d--] = 0;
    if (d < 0) break;
  }
}

static void span_cb(int64_t off, int64_t len, void *ud) {
  GArray *a = ud;
  Span s = {off, len};
  g_array_append_val(a, s);
}

/* Walk two segmentations of the same element sequence; emit (a, b, len) where both are contiguous.
 */
typedef void (*MergeFn)(int64_t a, int64_t b, int64_t len, void *ud);
static gboolean merge_spans(const GArray *A, const GArray *B, MergeFn fn, void *ud) {
  guint i = 0, k = 0;
  int64_t ai = 0, bk = 0; /* consumed in current spans */
  while (i < A->len && k < B->len) {
    const Span *a = &g_array_index(A, Span, i), *b = &g_array_index(B, Span, k);
    int64_t n = MIN(a->len - ai, b->len - bk);
    if (n > 0) fn(a->off + ai, b->off + bk, n, ud);
    ai += n;
    bk += n;
    if (ai == a->len) i++, ai = 0;
    if (bk == b->len) k++, bk = 0;
  }
  return i == A->len && k == B->len;
}

/* ---------- prepare ---------- */

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

/* Fill / verify runs of every shard a rank holds on one side; sp0 is the side's first space. */
static void side_runs(const RfProblem *pb, const RfSide *side, int rank, int sp0, GArray *boxes,
                      GArray *runs) {
  GArray *spans = g_array_new(FALSE, FALSE, sizeof(Span));
  for (uint32_t part = 0; part < pb->model->nparts; part++) {
    RfBox box, chunk;
    if (!side->place[part].mesh || !rf_side_rank_shard(side, part, rank, &box, &chunk)) continue;
    RfBoxDesc d;
    box_desc(pb, part, &box, &d);
    uint32_t bi = boxes->len;
    g_array_append_val(boxes, d);
    g_array_set_size(spans, 0);
    rf_local_runs(side, part, &chunk, &box, span_cb, spans);
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

static void *upload_array(RealState *st, GArray *a, guint esize, RfRealStatus *s) {
  void *p = NULL;
  *s = st->ops->alloc(st->dev, (uint64_t)a->len * esize, &p);
  if (*s != RF_REAL_OK) return NULL;
  *s = st->ops->upload(st->dev, p, a->data, (uint64_t)a->len * esize);
  return p;
}

static gboolean real_prepare(RfExecutor *ex, const RfProblem *pb, GError **error) {
  RealState *st = ex->state;
  const RfBoot *b = rf_boot();
  st->pb = pb;
  st->me = b->rank;
  st->world = b->world;
  if (!st->opt.local && b->world != pb->nranks) {
    g_set_error(error, RF_ERROR, RF_ERROR_PEER,
                "the MPI world has %d rank%s, the plan needs %d (%d training + %d inference)",
                b->world, b->world == 1 ? "" : "s", pb->nranks, pb->src.nranks, pb->dst.nranks);
    return FALSE;
  }
  RfDevConfig cfg = {.rank = b->rank,
                     .world = b->world,
                     .local = st->opt.local,
                     .device = b->local_rank,
                     .timeout_s = st->opt.timeout_s};
  RfRealStatus s = st->ops->open(&cfg, &st->dev);
  /* Agree before anything collective: one rank without a GPU must not leave the others waiting
   * in the communicator setup. */
  uint64_t failed = s != RF_REAL_OK;
  RfRealStatus ag = rf_boot_sum_u64(&failed, 1, st->opt.timeout_s);
  if (s != RF_REAL_OK || ag != RF_REAL_OK || failed) {
    if (s != RF_REAL_OK)
      set_err(error, status_code(s), "rank %d (%s): %s backend: %s", st->me, b->host, st->ops->name,
              s == RF_REAL_ERR_NODEV ? "no GPU found (the cuda backend needs one GPU per rank)"
                                     : rf_real_status_string(s));
    else
      g_set_error(error, RF_ERROR, RF_ERROR_PEER,
                  "rank %d: %" G_GUINT64_FORMAT " rank(s) could not start the %s backend", st->me,
                  failed, st->ops->name);
    if (st->dev) st->ops->close(st->dev, 1);
    st->dev = NULL;
    return FALSE;
  }
  if (!st->opt.local && st->ops->connect) {
    char nccl_id[256] = {0}; /* holds an ncclUniqueId (128 bytes) */
    s = rf_boot_nccl_id(nccl_id, sizeof nccl_id);
    if (s == RF_REAL_OK) s = st->ops->connect(st->dev, nccl_id);
    if (s != RF_REAL_OK) {
      set_err(error, status_code(s), "rank %d: joining the communicator: %s", st->me,
              rf_real_status_string(s));
      st->ops->close(st->dev, 1);
      st->dev = NULL;
      return FALSE;
    }
  }
  st->ns = pb->src.nbufs;
  st->nd = pb->dst.nbufs;
  st->sp_hold = st->ns + st->nd;
  st->sp_sstage = st->sp_hold + 1;
  st->sp_rstage = st->sp_hold + 2;
  st->nsp = st->sp_hold + 3;
  st->nlr = st->opt.local ? pb->nranks : 1;
  st->lr = g_new0(LRank, st->nlr);
  st->lr_of_rank = g_new(int, pb->nranks);
  for (int r = 0; r < pb->nranks; r++)
    st->lr_of_rank[r] = st->opt.local ? r : (r == st->me ? 0 : -1);
  GArray *boxes = g_array_new(FALSE, FALSE, sizeof(RfBoxDesc));
  GArray *fill = g_array_new(FALSE, FALSE, sizeof(RfRun));
  GArray *verify = g_array_new(FALSE, FALSE, sizeof(RfRun));
  for (int i = 0; i < st->nlr; i++) {
    LRank *l = &st->lr[i];
    l->rank = st->opt.local ? i : st->me;
    l->src_buf = g_new0(void *, st->ns ? st->ns : 1);
    l->dst_buf[0] = g_new0(void *, st->nd ? st->nd : 1);
    l->dst_buf[1] = g_new0(void *, st->nd ? st->nd : 1);
    for (int k = 0; k < st->ns; k++)
      l->src_bytes +=
          (uint64_t)rf_side_buffer_elems(&pb->src, k, l->rank) * buf_esize(pb, &pb->src, k);
    for (int k = 0; k < st->nd; k++)
      l->dst_bytes +=
          (uint64_t)rf_side_buffer_elems(&pb->dst, k, l->rank) * buf_esize(pb, &pb->dst, k);
    if (st->opt.plan_only) continue;
    for (int k = 0; k < st->ns; k++)
      DEVCHECK(st,
               st->ops->alloc(st->dev,
                              (uint64_t)rf_side_buffer_elems(&pb->src, k, l->rank) *
                                  buf_esize(pb, &pb->src, k),
                              &l->src_buf[k]),
               "source buffer");
    for (int bank = 0; bank < 2; bank++)
      for (int k = 0; k < st->nd; k++)
        DEVCHECK(st,
                 st->ops->alloc(st->dev,
                                (uint64_t)rf_side_buffer_elems(&pb->dst, k, l->rank) *
                                    buf_esize(pb, &pb->dst, k),
                                &l->dst_buf[bank][k]),
                 "destination buffer");
    g_array_set_size(boxes, 0);
    g_array_set_size(fill, 0);
    g_array_set_size(verify, 0);
    side_runs(pb, &pb->src, l->rank, 0, boxes, fill);
    side_runs(pb, &pb->dst, l->rank, st->ns, boxes, verify);
    l->nfill = fill->len;
    l->nverify = verify->len;
    l->boxes_dev = upload_array(st, boxes, sizeof(RfBoxDesc), &s);
    DEVCHECK(st, s, "box table");
    l->fill_dev = upload_array(st, fill, sizeof(RfRun), &s);
    DEVCHECK(st, s, "fill list");
    l->verify_dev = upload_array(st, verify, sizeof(RfRun), &s);
    DEVCHECK(st, s, "verify list");
  }
  g_array_free(boxes, TRUE);
  g_array_free(fill, TRUE);
  g_array_free(verify, TRUE);
  return TRUE;
fail:
  g_array_free(boxes, TRUE);
  g_array_free(fill, TRUE);
  g_array_free(verify, TRUE);
  return FALSE;
}

/* ---------- schedule ---------- */

typedef struct {
  RfBox box;
  int64_t origin; /* -1: the source shard, else the transfer it was received by */
} Cand;

typedef struct {
  uint64_t xfer;
  RfBox box;
  int64_t origin;
} Decomp;

/* Cover want with candidates from..: FALSE when some of it is held by none. */
static gboolean cover(const RfBox *want, int ndim, const Cand *c, int nc, int from, uint64_t xfer,
                      GArray *out) {
  for (int i = from; i < nc; i++) {
    RfBox in;
    if (!rf_box_intersect(want, &c[i].box, ndim, &in)) continue;
    Decomp d = {xfer, in, c[i].origin};
    g_array_append_val(out, d);
    RfBox rest[2 * RF_MAX_DIMS];
    int n = rf_box_subtract(want, &in, ndim, rest);
    for (int k = 0; k < n; k++)
      if (!cover(&rest[k], ndim, c, nc, i + 1, xfer, out)) return FALSE;
    return TRUE;
  }
  return FALSE;
}

/* Segments per message and their global rounds. */
typedef struct {
  uint64_t *seg_first; /* nmsgs + 1 */
  int *seg_round;
  uint64_t seg_bytes;
} Segs;

typedef struct {
  uint64_t *send, *recv;
  int *ops;
} Usage;

static gboolean assign_rounds(RealState *st, const RfPlan *plan, Segs *sg, GError **error) {
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
  GPtrArray *use = g_ptr_array_new();
  int round0 = 0;
  uint64_t m = 0;
  for (int k = 0; k < plan->nstages; k++) {
    st->stage_round0[k] = round0;
    for (; m < plan->nmsgs && plan->msgs[m].stage == k; m++) {
      const RfMessage *msg = &plan->msgs[m];
      if (msg->src < 0 || msg->src >= n || msg->dst < 0 || msg->dst >= n) {
        set_err(error, RF_ERROR_VERIFY,
                "plan message %" G_GUINT64_FORMAT " has a rank outside the world", m);
        goto fail;
      }
      int need = msg->src == msg->dst ? 2 : 1;
      for (uint64_t s = sg->seg_first[m]; s < sg->seg_first[m + 1]; s++) {
        uint64_t lo = (s - sg->seg_first[m]) * B;
        uint64_t b = align_up(MIN(B, msg->bytes - lo), STAGE_ALIGN);
        guint r = 0;
        for (;; r++) {
          if (r == use->len) {
            Usage *u = g_new0(Usage, 1);
            u->send = g_new0(uint64_t, n);
            u->recv = g_new0(uint64_t, n);
            u->ops = g_new0(int, n);
            g_ptr_array_add(use, u);
          }
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
      }
    }
    round0 += use->len;
    for (guint r = 0; r < use->len; r++) {
      Usage *u = use->pdata[r];
      g_free(u->send);
      g_free(u->recv);
      g_free(u->ops);
      g_free(u);
    }
    g_ptr_array_set_size(use, 0);
  }
  st->stage_round0[plan->nstages] = round0;
  st->nrounds = round0;
  g_ptr_array_free(use, TRUE);
  if (m != plan->nmsgs) {
    set_err(error, RF_ERROR_VERIFY, "plan messages are not sorted by stage");
    return FALSE;
  }
  return TRUE;
fail:
  g_ptr_array_free(use, TRUE);
  return FALSE;
}

static RRound *rank_round(LRank *l, GArray *rounds, int g) {
  if (l->local_round[g] < 0) {
    RRound r = {0};
    r.round = g;
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

/* Build one local rank's rounds, copy lists and holding layout. */
static gboolean build_rank(RealState *st, const RfPlan *plan, const Segs *sg, LRank *l,
                           GError **error) {
  const RfProblem *pb = st->pb;
  const int me = l->rank;
  gboolean ok = FALSE;
  int32_t *last_use = g_new(int32_t, plan->nxfers ? plan->nxfers : 1);
  int64_t *hold_off = g_new(int64_t, plan->nxfers ? plan->nxfers : 1);
  GHashTable *recv_by_part =
      g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, (GDestroyNotify)g_array_unref);
  GArray *decomp = g_array_new(FALSE, FALSE, sizeof(Decomp));
  GArray *cands = g_array_new(FALSE, FALSE, sizeof(Cand));
  GArray *holes = g_array_new(FALSE, FALSE, sizeof(Hole));
  GArray *active = g_array_new(FALSE, FALSE, sizeof(uint64_t));
  GArray *sitems = g_array_new(FALSE, FALSE, sizeof(Item));
  GArray *ritems = g_array_new(FALSE, FALSE, sizeof(Item)); /* into the destination shard */
  GArray *hitems = g_array_new(FALSE, FALSE, sizeof(Item)); /* into the holding store */
  GArray *A = g_array_new(FALSE, FALSE, sizeof(Span)),
         *Bs = g_array_new(FALSE, FALSE, sizeof(Span));
  GArray *rounds = g_array_new(FALSE, FALSE, sizeof(RRound));
  l->local_round = g_new(int, st->nrounds ? st->nrounds : 1);
  for (int g = 0; g < st->nrounds; g++)
    l->local_round[g] = -1;

  /* 1. What this rank receives, by part, and what each of its sends is made of. */
  for (uint64_t t = 0; t < plan->nxfers; t++) {
    last_use[t] = -1;
    hold_off[t] = -1;
  }
  for (uint64_t t = 0; t < plan->nxfers; t++) {
    const RfTransfer *x = &plan->xfers[t];
    if (x->piece >= plan->npieces) {
      set_err(error, RF_ERROR_VERIFY, "plan transfer %" G_GUINT64_FORMAT " names piece %u of %u", t,
              x->piece, plan->npieces);
      goto out;
    }
    const RfPiece *p = &plan->pieces[x->piece];
    int ndim = pb->model->parts[p->part].ndim;
    if (p->bytes != (uint64_t)rf_box_volume(&p->box, ndim) * part_esize(pb, p->part)) {
      set_err(error, RF_ERROR_VERIFY,
              "plan piece %u: %" G_GUINT64_FORMAT " bytes for a box of %" G_GINT64_FORMAT
              " elements",
              x->piece, p->bytes, rf_box_volume(&p->box, ndim));
      goto out;
    }
    if (x->src == me) {
      g_array_set_size(cands, 0);
      Cand c;
      if (pb->src.place[p->part].mesh && rf_side_rank_shard(&pb->src, p->part, me, &c.box, NULL)) {
        c.origin = -1;
        g_array_append_val(cands, c);
      }
      GArray *got = g_hash_table_lookup(recv_by_part, GUINT_TO_POINTER(p->part));
      for (guint i = 0; got && i < got->len; i++) {
        uint64_t u = g_array_index(got, uint64_t, i);
        if (plan->xfers[u].stage >= x->stage) break;
        c.box = plan->pieces[plan->xfers[u].piece].box;
        c.origin = (int64_t)u;
        g_array_append_val(cands, c);
      }
      guint d0 = decomp->len;
      if (!cover(&p->box, ndim, (const Cand *)cands->data, cands->len, 0, t, decomp)) {
        char buf[256];
        set_err(error, RF_ERROR_VERIFY,
                "plan: rank %d sends %s of part %u at stage %u but does not hold all of it", me,
                rf_box_format(&p->box, ndim, buf, sizeof buf), p->part, x->stage);
        goto out;
      }
      for (guint i = d0; i < decomp->len; i++) {
        int64_t u = g_array_index(decomp, Decomp, i).origin;
        if (u >= 0) last_use[u] = MAX(last_use[u], (int32_t)x->stage);
      }
    }
    if (x->dst == me) {
      GArray *got = g_hash_table_lookup(recv_by_part, GUINT_TO_POINTER(p->part));
      if (!got) {
        got = g_array_new(FALSE, FALSE, sizeof(uint64_t));
        g_hash_table_insert(recv_by_part, GUINT_TO_POINTER(p->part), got);
      }
      g_array_append_val(got, t);
    }
  }

  /* 2. Holding store: a received piece lives from its stage to its last forward. */
  for (uint64_t t = 0; t < plan->nxfers; t++) {
    if (last_use[t] < 0 || plan->xfers[t].dst != me) continue;
    int stage = plan->xfers[t].stage;
    for (guint i = 0; i < active->len;) {
      uint64_t u = g_array_index(active, uint64_t, i);
      if (last_use[u] < stage) {
        hold_free(holes, (uint64_t)hold_off[u],
                  align_up(plan->pieces[plan->xfers[u].piece].bytes, HOLD_ALIGN));
        g_array_remove_index_fast(active, i);
      } else {
        i++;
      }
    }
    hold_off[t] = (int64_t)hold_alloc(
        holes, &l->hold_bytes, align_up(plan->pieces[plan->xfers[t].piece].bytes, HOLD_ALIGN));
    g_array_append_val(active, t);
  }

  /* 3. Per message: items in wire order, cut at segment bounds into the rounds' lists (only the
   * staging sizes with --memory). */
  const gboolean lists = !st->opt.plan_only;
  guint di = 0; /* decomp is in transfer order */
  for (uint64_t m = 0; m < plan->nmsgs; m++) {
    const RfMessage *msg = &plan->msgs[m];
    gboolean sending = msg->src == me, receiving = msg->dst == me;
    if (!sending && !receiving) continue;
    g_array_set_size(sitems, 0);
    g_array_set_size(ritems, 0);
    g_array_set_size(hitems, 0);
    uint64_t wire = 0;
    for (uint64_t t = msg->first; t < (uint64_t)msg->first + msg->count; t++) {
      const RfTransfer *x = &plan->xfers[t];
      const RfPiece *p = &plan->pieces[x->piece];
      int ndim = pb->model->parts[p->part].ndim;
      int esize = part_esize(pb, p->part);
      if (sending && lists) {
        while (di < decomp->len && g_array_index(decomp, Decomp, di).xfer < t)
          di++;
        for (; di < decomp->len && g_array_index(decomp, Decomp, di).xfer == t; di++) {
          const Decomp *d = &g_array_index(decomp, Decomp, di);
          g_array_set_size(A, 0);
          g_array_set_size(Bs, 0);
          box_spans(&p->box, &d->box, ndim, A);
          ItemCtx c = {sitems, wire, 0, 0, esize, TRUE};
          if (d->origin < 0) {
            RfBox chunk;
            rf_side_rank_shard(&pb->src, p->part, me, NULL, &chunk);
            rf_local_runs(&pb->src, p->part, &chunk, &d->box, span_cb, Bs);
            c.sp = (uint32_t)pb->src.local[p->part].buf;
          } else {
            box_spans(&plan->pieces[plan->xfers[d->origin].piece].box, &d->box, ndim, Bs);
            c.sp = (uint32_t)st->sp_hold;
            c.mem0 = (uint64_t)hold_off[d->origin];
          }
          if (!merge_spans(A, Bs, item_cb, &c)) {
            set_err(error, RF_ERROR_VERIFY,
                    "rank %d: pack runs of transfer %" G_GUINT64_FORMAT " do not match", me, t);
            goto out;
          }
        }
      }
      if (receiving && lists) {
        RfBox mine, chunk, keep;
        if (!(x->flags & RF_XFER_RELAY) && pb->dst.place[p->part].mesh &&
            rf_side_rank_shard(&pb->dst, p->part, me, &mine, &chunk) &&
            rf_box_intersect(&p->box, &mine, ndim, &keep)) {
          g_array_set_size(A, 0);
          g_array_set_size(Bs, 0);
          box_spans(&p->box, &keep, ndim, A);
          rf_local_runs(&pb->dst, p->part, &chunk, &keep, span_cb, Bs);
          ItemCtx c = {ritems, wire, 0, (uint32_t)(st->ns + pb->dst.local[p->part].buf),
                       esize,  TRUE};
          if (!merge_spans(A, Bs, item_cb, &c)) {
            set_err(error, RF_ERROR_VERIFY,
                    "rank %d: unpack runs of transfer %" G_GUINT64_FORMAT " do not match", me, t);
            goto out;
          }
        }
        if (hold_off[t] >= 0) {
          Item it = {wire, (uint64_t)hold_off[t], p->bytes, (uint32_t)st->sp_hold};
          g_array_append_val(hitems, it);
        }
      }
      wire += p->bytes;
    }
    if (wire != msg->bytes) {
      set_err(error, RF_ERROR_VERIFY,
              "plan message %" G_GUINT64_FORMAT ": %" G_GUINT64_FORMAT
              " bytes, its transfers carry %" G_GUINT64_FORMAT,
              m, msg->bytes, wire);
      goto out;
    }
    g_array_sort(sitems, item_cmp);
    g_array_sort(ritems, item_cmp);
    g_array_sort(hitems, item_cmp);
    /* Items are sorted by wire offset and tile the message; sweep them against the segments. */
    for (uint64_t s = sg->seg_first[m]; s < sg->seg_first[m + 1]; s++) {
      uint64_t lo = (s - sg->seg_first[m]) * sg->seg_bytes,
               hi = MIN(msg->bytes, lo + sg->seg_bytes);
      RRound *r = rank_round(l, rounds, sg->seg_round[s]);
      if (sending) {
        RfOp op = {msg->dst, 0, r->send_top, hi - lo};
        g_array_append_val(r->sends, op);
        if (lists) cut_items(sitems, lo, hi, op.off, TRUE, (uint32_t)st->sp_sstage, r->pack);
        r->send_top += align_up(hi - lo, STAGE_ALIGN);
      }
      if (receiving) {
        RfOp op = {msg->src, 0, r->recv_top, hi - lo};
        g_array_append_val(r->recvs, op);
        if (lists) {
          cut_items(ritems, lo, hi, op.off, FALSE, (uint32_t)st->sp_rstage, r->unpack);
          cut_items(hitems, lo, hi, op.off, FALSE, (uint32_t)st->sp_rstage, r->unpack);
        }
        r->recv_top += align_up(hi - lo, STAGE_ALIGN);
      }
    }
  }

  /* 4. Rounds in global order, lists into backend memory. */
  l->nrounds = rounds->len;
  l->rounds = g_new0(RRound, l->nrounds ? l->nrounds : 1);
  {
    int k = 0;
    for (int g = 0; g < st->nrounds; g++) {
      if (l->local_round[g] < 0) continue;
      l->rounds[k] = g_array_index(rounds, RRound, l->local_round[g]);
      l->local_round[g] = k++;
    }
  }
  if (me == st->opt.corrupt_rank) drop_one_chunk(st, l->rounds, l->nrounds);
  for (int k = 0; k < l->nrounds; k++) {
    RRound *r = &l->rounds[k];
    RfRealStatus s;
    l->sstage_bytes = MAX(l->sstage_bytes, r->send_top);
    l->rstage_bytes = MAX(l->rstage_bytes, r->recv_top);
    if (!lists) continue; /* freed with the plan */
    r->npack = r->pack->len;
    r->nunpack = r->unpack->len;
    r->pack_dev = upload_array(st, r->pack, sizeof(RfCopy), &s);
    if (s == RF_REAL_OK) r->unpack_dev = upload_array(st, r->unpack, sizeof(RfCopy), &s);
    if (s == RF_REAL_OK && r->unpack_drop) {
      r->nunpack_drop = r->unpack_drop->len;
      r->unpack_drop_dev = upload_array(st, r->unpack_drop, sizeof(RfCopy), &s);
      g_array_free(r->unpack_drop, TRUE);
      r->unpack_drop = NULL;
    }
    g_array_free(r->pack, TRUE);
    g_array_free(r->unpack, TRUE);
    r->pack = r->unpack = NULL;
    if (s != RF_REAL_OK) {
      set_err(error, status_code(s), "rank %d: copy lists: %s", me, rf_real_status_string(s));
      goto out;
    }
  }
  ok = TRUE;
out:
  if (!l->rounds) {
    /* failed before the rounds moved into l->rounds: they still own their arrays */
    for (guint k = 0; k < rounds->len; k++) {
      RRound *r = &g_array_index(rounds, RRound, k);
      g_array_free(r->sends, TRUE);
      g_array_free(r->recvs, TRUE);
      g_array_free(r->pack, TRUE);
      g_array_free(r->unpack, TRUE);
    }
  }
  g_array_free(rounds, TRUE);
  g_free(last_use);
  g_free(hold_off);
  g_hash_table_destroy(recv_by_part);
  g_array_free(decomp, TRUE);
  g_array_free(cands, TRUE);
  g_array_free(holes, TRUE);
  g_array_free(active, TRUE);
  g_array_free(sitems, TRUE);
  g_array_free(ritems, TRUE);
  g_array_free(hitems, TRUE);
  g_array_free(A, TRUE);
  g_array_free(Bs, TRUE);
  return ok;
}

static void free_rank_plan(RealState *st, LRank *l) {
  gboolean live = st->dev != NULL; /* after an abort the device state is gone with the process */
  for (int k = 0; k < l->nrounds; k++) {
    RRound *r = &l->rounds[k];
    g_array_free(r->sends, TRUE);
    g_array_free(r->recvs, TRUE);
    if (r->pack) g_array_free(r->pack, TRUE);
    if (r->unpack) g_array_free(r->unpack, TRUE);
    if (r->unpack_drop) g_array_free(r->unpack_drop, TRUE);
    if (live) {
      st->ops->release(st->dev, r->pack_dev);
      st->ops->release(st->dev, r->unpack_dev);
      if (r->unpack_drop_dev) st->ops->release(st->dev, r->unpack_drop_dev);
    }
  }
  g_free(l->rounds);
  g_free(l->local_round);
  if (live) {
    st->ops->release(st->dev, l->hold);
    st->ops->release(st->dev, l->sstage);
    st->ops->release(st->dev, l->rstage);
    st->ops->release(st->dev, l->bases_dev[0]);
    st->ops->release(st->dev, l->bases_dev[1]);
  }
  l->rounds = NULL;
  l->local_round = NULL;
  l->nrounds = 0;
  l->hold = l->sstage = l->rstage = NULL;
  l->bases_dev[0] = l->bases_dev[1] = NULL;
  l->hold_bytes = l->sstage_bytes = l->rstage_bytes = 0;
}

static void free_plan(RealState *st) {
  for (int i = 0; i < st->nlr; i++)
    free_rank_plan(st, &st->lr[i]);
  g_free(st->stage_round0);
  st->stage_round0 = NULL;
  st->nrounds = 0;
}

static gboolean rank_tables(RealState *st, LRank *l, GError **error) {
  RfRealStatus s;
  DEVCHECK(st, st->ops->alloc(st->dev, l->hold_bytes, &l->hold), "holding store");
  DEVCHECK(st, st->ops->alloc(st->dev, l->sstage_bytes, &l->sstage), "send staging");
  DEVCHECK(st, st->ops->alloc(st->dev, l->rstage_bytes, &l->rstage), "receive staging");
  void **t = g_new0(void *, st->nsp);
  for (int bank = 0; bank < 2; bank++) {
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
      g_free(t);
      set_err(error, status_code(s), "rank %d: base table: %s", st->me, rf_real_status_string(s));
      return FALSE;
    }
  }
  g_free(t);
  return TRUE;
fail:
  return FALSE;
}

static RfRealStatus run_round(RealState *st, int g, gboolean drop, int *stuck) {
  RfRealStatus s = RF_REAL_OK;
  for (int i = 0; i < st->nlr; i++) {
    LRank *l = &st->lr[i];
    int k = l->local_round[g];
    if (k >= 0 && l->rounds[k].npack &&
        (s = st->ops->copy(st->dev, l->bases_dev[0], l->rounds[k].pack_dev, l->rounds[k].npack)))
      return s;
  }
  if (st->opt.local) {
    for (int i = 0; i < st->nlr; i++) {
      LRank *l = &st->lr[i];
      int k = l->local_round[g];
      if (k < 0) continue;
      const RRound *r = &l->rounds[k];
      for (guint o = 0; o < r->sends->len; o++) {
        const RfOp *op = &g_array_index(r->sends, RfOp, o);
        LRank *p = &st->lr[st->lr_of_rank[op->peer]];
        const RRound *pr = &p->rounds[p->local_round[g]];
        for (guint q = 0; q < pr->recvs->len; q++) {
          const RfOp *in = &g_array_index(pr->recvs, RfOp, q);
          if (in->peer != l->rank) continue;
          if ((s = st->ops->peer_copy(st->dev, (char *)p->rstage + in->off,
                                      (const char *)l->sstage + op->off, op->bytes)))
            return s;
          break;
        }
      }
    }
  } else {
    LRank *l = &st->lr[0];
    int k = l->local_round[g];
    if (k >= 0) {
      const RRound *r = &l->rounds[k];
      if ((s = st->ops->exchange(st->dev, (const RfOp *)r->sends->data, r->sends->len,
                                 (const RfOp *)r->recvs->data, r->recvs->len, l->sstage, l->rstage,
                                 stuck)))
        return s;
    }
  }
  for (int i = 0; i < st->nlr; i++) {
    LRank *l = &st->lr[i];
    int k = l->local_round[g];
    if (k < 0) continue;
    const RRound *r = &l->rounds[k];
    gboolean d = drop && r->unpack_drop_dev;
    if ((d ? r->nunpack_drop : r->nunpack) &&
        (s = st->ops->copy(st->dev, l->bases_dev[1 - st->bank],
                           d ? r->unpack_drop_dev : r->unpack_dev,
                           d ? r->nunpack_drop : r->nunpack)))
      return s;
  }
  return s;
}

/* Stage labels are the plan's phase names (rf_phase_name), as in the simulator, so measured
 * and predicted stages line up. */

static unsigned stage_mask(const RfPlan *plan, int k) {
  unsigned mask = 0;
  for (uint64_t m = 0; m < plan->nmsgs; m++)
    if (plan->msgs[m].stage == k)
      for (uint64_t t = plan->msgs[m].first;
           t < (uint64_t)plan->msgs[m].first + plan->msgs[m].count; t++)
        mask |= 1u << plan->xfers[t].phase;
  return mask;
}

static char *stage_label(const RfPlan *plan, int k) {
  unsigned mask = stage_mask(plan, k);
  GString *s = g_string_new(NULL);
  for (int p = 0; p < RF_PHASE_COUNT; p++)
    if (mask & (1u << p))
      g_string_append_printf(s, "%s%s", s->len ? "+" : "", rf_phase_name((RfPhase)p));
  if (!s->len) g_string_append(s, "idle");
  return g_string_free(s, FALSE);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Lower median of n values with a stride. */
static double median_of(const double *v, int n, int stride) {
  double *t = g_new(double, n);
  for (int i = 0; i < n; i++)
    t[i] = v[(size_t)i * stride];
  qsort(t, n, sizeof *t, cmp_double);
  double m = t[(n - 1) / 2];
  g_free(t);
  return m;
}

static void spread_clear(RfRealSpread *sp) {
  g_free(sp->min_s);
  g_free(sp->max_s);
  memset(sp, 0, sizeof *sp);
}

static gboolean real_run(RfExecutor *ex, const RfPlan *plan, RfResult *out, GError **error) {
  RealState *st = ex->state;
  const int nst = plan->nstages;
  const int total_it = st->opt.warmup + st->opt.iters;
  gboolean ok = FALSE;
  Segs sg = {0};
  double *ends = g_new0(double, (size_t)MAX(1, st->opt.iters) * MAX(1, nst));
  double *since = g_new0(double, nst + 1);
  int timed = 0;
  memset(out, 0, sizeof *out);
  out->executor = g_strdup_printf("real:%s", st->ops->name);
  out->strategy = plan->strategy;
  out->lower_bound_s = plan->stats.lower_bound_s;
  spread_clear(&st->spread);
  if (!st->dev) {
    set_err(error, RF_ERROR_INPUT, "real executor: run without a successful prepare");
    goto out;
  }
  if (plan->problem != st->pb) {
    set_err(error, RF_ERROR_VERIFY,
            "real executor: the plan is for another problem than the prepared one");
    goto out;
  }
  if (!assign_rounds(st, plan, &sg, error)) goto out;
  for (int i = 0; i < st->nlr; i++) {
    LRank *l = &st->lr[i];
    if (!build_rank(st, plan, &sg, l, error)) goto out;
    if (!st->opt.plan_only && !rank_tables(st, l, error)) goto out;
    st->spread.hold_bytes = MAX(st->spread.hold_bytes, l->hold_bytes);
    st->spread.staging_bytes = MAX(st->spread.staging_bytes, l->sstage_bytes + l->rstage_bytes);
    st->spread.src_bytes = MAX(st->spread.src_bytes, l->src_bytes);
    st->spread.dst_bytes = MAX(st->spread.dst_bytes, l->dst_bytes);
    st->spread.rank_bytes =
        MAX(st->spread.rank_bytes,
            l->src_bytes + 2 * l->dst_bytes + l->hold_bytes + l->sstage_bytes + l->rstage_bytes);
  }
  st->spread.rounds = st->nrounds;
  {
    /* the largest rank of the world (exact: sizes are far below 2^53) */
    double v[5] = {(double)st->spread.hold_bytes, (double)st->spread.staging_bytes,
                   (double)st->spread.src_bytes, (double)st->spread.dst_bytes,
                   (double)st->spread.rank_bytes};
    if (!st->opt.local && rf_boot_max_double(v, 5, st->opt.timeout_s) != RF_REAL_OK) {
      set_err(error, RF_ERROR_PEER, "rank %d: exchanging buffer sizes failed (a peer stopped)",
              st->me);
      goto abort;
    }
    st->spread.hold_bytes = (uint64_t)v[0];
    st->spread.staging_bytes = (uint64_t)v[1];
    st->spread.src_bytes = (uint64_t)v[2];
    st->spread.dst_bytes = (uint64_t)v[3];
    st->spread.rank_bytes = (uint64_t)v[4];
  }
  if (st->opt.plan_only) {
    ok = TRUE;
    goto out;
  }
  for (int it = 0; it < total_it; it++) {
    uint64_t step = st->step++;
    RfRealStatus s;
    for (int i = 0; i < st->nlr; i++) {
      LRank *l = &st->lr[i];
      if (l->nfill)
        DEVCHECK(st,
                 st->ops->fill(st->dev, l->bases_dev[0], l->fill_dev, l->nfill, l->boxes_dev, step),
                 "fill");
    }
    /* wait for the fill: it is not part of the refit */
    DEVCHECK(st, st->ops->mark(st->dev, 0), "timer");
    DEVCHECK(st, st->ops->finish(st->dev, 1, since, &(int){0}), "fill");
    s = rf_boot_barrier(st->opt.timeout_s);
    if (s != RF_REAL_OK) {
      set_err(error, status_code(s),
              "rank %d: barrier before step %" G_GUINT64_FORMAT ": %s (a peer failed before it)",
              st->me, step, rf_real_status_string(s));
      goto abort;
    }
    DEVCHECK(st, st->ops->mark(st->dev, 0), "timer");
    for (int k = 0; k < nst; k++) {
      if (!st->opt.local && st->me == st->opt.fail_rank && k == st->opt.fail_stage) {
        char *lab = stage_label(plan, k);
        fprintf(stderr,
                "refit run: rank %d: stage %d (%s): injected failure, this rank stops responding\n",
                st->me, k, lab);
        g_free(lab);
        fflush(stderr);
        g_usleep((gulong)(st->opt.timeout_s * 4e6));
        _exit(3);
      }
      for (int g = st->stage_round0[k]; g < st->stage_round0[k + 1]; g++) {
        int stuck = -1;
        s = run_round(st, g, it == total_it - 1, &stuck);
        if (s != RF_REAL_OK) {
          char *lab = stage_label(plan, k);
          if (s == RF_REAL_ERR_TIMEOUT)
            set_err(error, RF_ERROR_TIMEOUT,
                    "rank %d: stage %d (%s): no progress for %.1f s, waiting on rank %d; "
                    "communicator aborted",
                    st->me, k, lab, st->opt.timeout_s, stuck);
          else
            set_err(error, status_code(s), "rank %d: stage %d (%s): %s; communicator aborted",
                    st->me, k, lab, rf_real_status_string(s));
          g_free(lab);
          goto abort;
        }
      }
      DEVCHECK(st, st->ops->mark(st->dev, k + 1), "timer");
    }
    int done = 0;
    s = st->ops->finish(st->dev, nst + 1, since, &done);
    if (s != RF_REAL_OK) {
      int k = MAX(0, MIN(nst - 1, done - 1));
      char *lab = stage_label(plan, k);
      set_err(error, status_code(s),
              "rank %d: stage %d (%s) did not complete: %s after %.1f s; communicator aborted",
              st->me, k, lab, rf_real_status_string(s), st->opt.timeout_s);
      g_free(lab);
      goto abort;
    }
    uint64_t w[2] = {0, 0};
    for (int i = 0; i < st->nlr; i++) {
      LRank *l = &st->lr[i];
      uint64_t n = 0;
      if (!l->nverify) continue;
      DEVCHECK(st,
               st->ops->verify(st->dev, l->bases_dev[1 - st->bank], l->verify_dev, l->nverify,
                               l->boxes_dev, step, &n),
               "verify");
      w[0] += n;
      if (st->have_prev) {
        DEVCHECK(st,
                 st->ops->verify(st->dev, l->bases_dev[st->bank], l->verify_dev, l->nverify,
                                 l->boxes_dev, st->prev_step, &n),
                 "verify");
        w[1] += n;
      }
    }
    if (rf_boot_sum_u64(w, 2, st->opt.timeout_s) != RF_REAL_OK ||
        rf_boot_max_double(since + 1, nst, st->opt.timeout_s) != RF_REAL_OK) {
      set_err(error, RF_ERROR_PEER,
              "rank %d: result exchange after step %" G_GUINT64_FORMAT " failed", st->me, step);
      goto abort;
    }
    if (it >= st->opt.warmup) memcpy(ends + (size_t)timed++ * nst, since + 1, sizeof(double) * nst);
    st->spread.wrong_new = w[0];
    st->spread.wrong_old = w[1];
    if (w[0] || w[1]) break; /* the previous weights stay the served ones */
    st->bank = 1 - st->bank;
    st->prev_step = step;
    st->have_prev = TRUE;
  }
  out->wrong_elements = st->spread.wrong_new + st->spread.wrong_old;
  st->spread.iters = timed;
  if (timed > 0 && nst > 0) {
    /* One result stage per label, spanning the plan stages that carry it (as the simulator
     * reports them): from the end of the stage before its first to the end of its last. */
    unsigned *mask = g_new(unsigned, nst);
    uint64_t lbytes[RF_PHASE_COUNT] = {0};
    for (int k = 0; k < nst; k++)
      mask[k] = stage_mask(plan, k);
    for (uint64_t t = 0; t < plan->nxfers; t++)
      lbytes[plan->xfers[t].phase] += plan->pieces[plan->xfers[t].piece].bytes;
    double *t0 = g_new(double, timed), *t1 = g_new(double, timed);
    for (int p = 0; p < RF_PHASE_COUNT; p++) {
      int first = -1, last = -1;
      for (int k = 0; k < nst; k++)
        if (mask[k] & (1u << p)) {
          if (first < 0) first = k;
          last = k;
        }
      if (first < 0) continue;
      double lo = HUGE_VAL, hi = 0;
      for (int i = 0; i < timed; i++) {
        t0[i] = first ? ends[(size_t)i * nst + first - 1] : 0.0;
        t1[i] = ends[(size_t)i * nst + last];
        lo = MIN(lo, t1[i] - t0[i]);
        hi = MAX(hi, t1[i] - t0[i]);
      }
      rf_result_add_stage(out, rf_phase_name((RfPhase)p), median_of(t0, timed, 1),
                          median_of(t1, timed, 1), lbytes[p]);
      st->spread.min_s = g_renew(double, st->spread.min_s, out->nstages);
      st->spread.max_s = g_renew(double, st->spread.max_s, out->nstages);
      st->spread.min_s[out->nstages - 1] = lo;
      st->spread.max_s[out->nstages - 1] = hi;
    }
    out->total_s = median_of(ends + nst - 1, timed, nst);
    out->min_s = HUGE_VAL;
    out->max_s = 0;
    for (int i = 0; i < timed; i++) {
      out->min_s = MIN(out->min_s, ends[(size_t)i * nst + nst - 1]);
      out->max_s = MAX(out->max_s, ends[(size_t)i * nst + nst - 1]);
    }
    st->spread.nstages = out->nstages;
    g_free(t0);
    g_free(t1);
    g_free(mask);
  }
  ok = TRUE;
  goto out;
abort:
  /* A peer may be stuck in a group with us: tear the communicator down, do not wait. */
  st->ops->close(st->dev, 1);
  st->dev = NULL;
  goto out;
fail:
  ok = FALSE;
out:
  free_plan(st);
  g_free(sg.seg_first);
  g_free(sg.seg_round);
  g_free(ends);
  g_free(since);
  return ok;
}

static void real_destroy(RfExecutor *ex) {
  if (!ex) return;
  RealState *st = ex->state;
  if (st) {
    free_plan(st);
    for (int i = 0; i < st->nlr && st->dev; i++) {
      LRank *l = &st->lr[i];
      for (int k = 0; k < st->ns; k++)
        st->ops->release(st->dev, l->src_buf[k]);
      for (int b = 0; b < 2; b++)
        for (int k = 0; k < st->nd; k++)
          st->ops->release(st->dev, l->dst_buf[b][k]);
      st->ops->release(st->dev, l->boxes_dev);
      st->ops->release(st->dev, l->fill_dev);
      st->ops->release(st->dev, l->verify_dev);
    }
    for (int i = 0; i < st->nlr; i++) {
      g_free(st->lr[i].src_buf);
      g_free(st->lr[i].dst_buf[0]);
      g_free(st->lr[i].dst_buf[1]);
    }
    if (st->dev) st->ops->close(st->dev, 0);
    g_free(st->lr);
    g_free(st->lr_of_rank);
    spread_clear(&st->spread);
    g_free(st->opt.backend);
    g_free(st);
  }
  g_free(ex);
}

const RfRealSpread *rf_real_spread(const RfExecutor *ex) {
  return &((const RealState *)ex->state)->spread;
}

RfExecutor *rf_real_executor_new(const RfRealOptions *opt, GError **error) {
  const RfDevOps *ops = rf_boot_dev_ops(opt->backend);
  if (!ops) {
    if (opt->backend && !strcmp(opt->backend, "cuda"))
      set_err(error, RF_ERROR_INPUT,
              "the cuda backend is not built (CUDA or NCCL was not found at configure time)");
    else
      set_err(error, RF_ERROR_INPUT, "unknown backend '%s' (host, cuda)",
              opt->backend ? opt->backend : "");
    return NULL;
  }
  if (opt->staging_bytes < STAGE_ALIGN || opt->max_ops < 2 || opt->iters < 1 || opt->warmup < 0 ||
      !(opt->timeout_s > 0)) {
    set_err(error, RF_ERROR_INPUT,
            "real executor: staging >= %u bytes, max ops >= 2, iters >= 1, warmup >= 0 and "
            "timeout > 0 are required",
            STAGE_ALIGN);
    return NULL;
  }
  RealState *st = g_new0(RealState, 1);
  st->opt = *opt;
  st->opt.backend = g_strdup(opt->backend);
  st->ops = ops;
  if (opt->plan_only) { /* sizes only: no device, every rank here */
    st->ops = &rf_dev_host;
    st->opt.local = TRUE;
  }
  RfExecutor *ex = g_new0(RfExecutor, 1);
  ex->name = st->opt.local ? (!strcmp(ops->name, "cuda") ? "real:cuda-local" : "real:host-local")
                           : (!strcmp(ops->name, "cuda") ? "real:cuda" : "real:host");
  ex->prepare = real_prepare;
  ex->run = real_run;
  ex->destroy = real_destroy;
  ex->state = st;
  return ex;
}
