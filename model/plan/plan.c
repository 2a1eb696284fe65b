#include "plan.h"
#include "bigmem.h"
#include "error.h"

#include <string.h>

#define MAX_STAGE 65535

G_STATIC_ASSERT(MAX_STAGE < (1 << 16)); /* RfMessage.stage */

static const char *const strategy_names[RF_STRATEGY_COUNT] = {"gather-broadcast", "p2p", "m2n",
                                                              "hybrid"};
static const char *const phase_names[RF_PHASE_COUNT] = {"export", "broadcast", "inject", "forward",
                                                        "fanout"};

const char *rf_strategy_name(RfStrategy s) {
  return strategy_names[s];
}

const char *rf_phase_name(RfPhase p) {
  return phase_names[p];
}

gboolean rf_strategy_parse(const char *s, RfStrategy *out, GError **error) {
  for (int i = 0; i < RF_STRATEGY_COUNT; i++)
    if (!g_strcmp0(s, strategy_names[i])) {
      *out = (RfStrategy)i;
      return TRUE;
    }
  g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
              "unknown strategy '%s' (gather-broadcast, p2p, m2n, hybrid, all)", s ? s : "");
  return FALSE;
}

#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(p) __builtin_prefetch(p)
#else
#define PREFETCH(p) ((void)(p))
#endif

/* ---- growable arrays of plain structs ------------------------------------------------- */

/* Transfers as they are planned, in one array that never moves once large (RfBigVec: its
 * pages are written once, by the planner, and sorted in place), already distributed by cell
 * (stage, src >> cell_shift; cell_w cells a stage, at most CELL_BUDGET in all where the record
 * allows it): each cell fills blocks of XBLOCK transfers of its own, taken from the array's end
 * as they are needed (IPS4o's blocks, written while planning), so that the sort moves whole
 * blocks, not transfers, and a cell's transfers stay in the order they were planned in (the
 * sort needs no tie-break on the piece). Few cells keep the planner's writes in few streams (64
 * a stage: Kimi K3 4096 -> 4096, 17 stages, writes into 1,088 blocks at a time); the sort cuts
 * each cell into runs small enough for the cache. A cell's last block is partly filled, and so
 * are those open when cells merge (xvec_stages): XVEC_MAX_ROOM bounds the room they leave
 * unused.
 *
 * A planned transfer is a Rec of 8 bytes, which its cell completes: dst in the low rb bits (rb:
 * the bits of a global rank), the low cell_shift bits of src above it, then RF_XFER_* flags (2
 * bits) at REC_TAG, the phase (3) and the piece (27) at REC_PIECE. The local key of the sort,
 * (src's low bits, dst), is the record's low 32 bits: cell_shift <= 32 - rb, so that from 2^16
 * ranks on a stage keeps 2^(2 rb - 32) cells at least (MIN_CELL_W), and past CELL_LIMIT cells
 * the plan is refused. The sorted records become 4-byte RfTransfers in place, as their messages
 * are gathered (group_run), and the array's second half is given back. */
typedef uint64_t Rec;
#define REC_TAG 32
#define REC_PIECE 37
#define REC_LOW ((UINT64_C(1) << REC_TAG) - 1)
#define CELL_BUDGET (1u << 11)
#define CELL_LIMIT (MAX_STAGE + 1u) /* cells a plan may take at most */
#define CELL_W_BITS 6               /* at most 64 cells a stage, where the record allows */
#define MAX_CELL_W_BITS 8           /* 2^20 ranks: 256 cells a stage at least */
#define XBLOCK 256                  /* transfers a block: 2 KiB */
#define MSD_MAX_BITS 12             /* runs a cell is cut into: at most 4096 */
typedef struct {
  RfBigVec v;
  Rec *t;              /* v.p */
  uint64_t n;          /* transfers held */
  uint64_t used, room; /* transfers of room the blocks take, and room for */
  uint32_t *open;      /* per cell: its next free place (a multiple of XBLOCK: no open block) */
  uint32_t *bcell;     /* per block: its cell */
  uint16_t *bfill;     /* per block: the transfers it holds */
  uint64_t nblk, blk_cap;
  int rb, cell_shift, cell_w, cell_stages;
} XferVec;

G_STATIC_ASSERT(XBLOCK <= 65535 && (XBLOCK & (XBLOCK - 1)) == 0);
/* a record holds every rank, piece, phase and flags; RfTransfer the piece, phase and flags */
G_STATIC_ASSERT(RF_MAX_RANKS <= (1 << 20) && 2 * 20 - 32 <= MAX_CELL_W_BITS);
G_STATIC_ASSERT(RF_PLAN_MAX_TRANSFERS <= (UINT64_C(1) << (64 - REC_PIECE)));
G_STATIC_ASSERT(RF_PHASE_COUNT <= 8 && (RF_XFER_NET | RF_XFER_RELAY) < 4);
G_STATIC_ASSERT(sizeof(RfTransfer) == 4 && sizeof(Rec) == 2 * sizeof(RfTransfer));

/* Room the blocks may take: the transfers, a partly filled block per cell at the end (at most
 * CELL_LIMIT cells), and those closed when cells merge (xvec_stages: at most CELL_W_BITS times,
 * each while the cells were at most CELL_BUDGET; MAX_CELL_W_BITS + 1 bounds it). */
#define XVEC_MAX_ROOM                                                                              \
  (RF_PLAN_MAX_TRANSFERS + (uint64_t)(CELL_LIMIT + (MAX_CELL_W_BITS + 1) * CELL_BUDGET) * XBLOCK)

/* The largest cell_shift a record holds, with rb bits a rank. */
static int max_shift(int rb) {
  return REC_TAG - rb;
}

static void xvec_init(XferVec *x, int rank_bits) {
  memset(x, 0, sizeof *x);
  x->v.max = sizeof(Rec) * XVEC_MAX_ROOM;
  x->rb = rank_bits;
  /* fewer cells a stage past CELL_BUDGET: xvec_stages */
  x->cell_shift = MAX(0, MIN(rank_bits - CELL_W_BITS, max_shift(rank_bits)));
  x->cell_w = 1 << (rank_bits - x->cell_shift);
}

/* Forget every transfer, keeping their room. */
static void xvec_reset(XferVec *x) {
  x->n = x->used = x->nblk = 0;
  if (x->open) memset(x->open, 0, sizeof(uint32_t) * x->cell_stages * x->cell_w);
}

static void xvec_clear(XferVec *x) {
  rf_bigvec_clear(&x->v);
  g_free(x->open);
  g_free(x->bcell);
  g_free(x->bfill);
  memset(x, 0, sizeof *x);
}

/* Close every open block (their fill counted); cells then open new ones as they need them. */
static void xvec_close(XferVec *x) {
  const size_t ncell = (size_t)x->cell_stages * x->cell_w;
  for (size_t c = 0; c < ncell; c++) {
    const uint32_t at = x->open[c];
    if (at % XBLOCK) x->bfill[at / XBLOCK] = (uint16_t)(at % XBLOCK);
    x->open[c] = 0;
  }
}

/* Cells for stages up to stage; FALSE when they would pass CELL_LIMIT (the plan is refused).
 * Many stages (gather-broadcast chains): coarser cells, each two merged into one, so that the
 * cells and the sort's arrays per cell stay small; a merged cell's records take the bit of src
 * that left the cell. */
static gboolean xvec_stages(XferVec *x, int stage) {
  const int ns = MIN(MAX(stage + 1, 2 * x->cell_stages), MAX_STAGE + 1);
  if ((size_t)ns * x->cell_w > CELL_BUDGET && x->cell_w > 1 && x->cell_shift < max_shift(x->rb)) {
    if (x->open) xvec_close(x);
    while ((size_t)ns * x->cell_w > CELL_BUDGET && x->cell_w > 1 &&
           x->cell_shift < max_shift(x->rb)) {
      const uint32_t w = (uint32_t)x->cell_w;
      const Rec bit = (Rec)1 << (x->rb + x->cell_shift);
      for (uint64_t j = 0; j < x->nblk; j++) {
        if (x->bcell[j] % w % 2) {
          Rec *r = x->t + j * XBLOCK;
          for (uint32_t i = 0; i < x->bfill[j]; i++)
            r[i] |= bit;
        }
        x->bcell[j] = x->bcell[j] / w * (w / 2) + x->bcell[j] % w / 2;
      }
      x->cell_w /= 2;
      x->cell_shift++;
    }
  }
  if ((size_t)stage * x->cell_w + x->cell_w > CELL_LIMIT) return FALSE;
  const int keep = (int)MIN((size_t)ns, CELL_LIMIT / x->cell_w);
  /* the cells of the stages before (all closed if they merged) keep their places */
  const size_t from = (size_t)x->cell_stages * x->cell_w, to = (size_t)keep * x->cell_w;
  x->open = g_renew(uint32_t, x->open, to);
  memset(x->open + from, 0, sizeof(uint32_t) * (to - from));
  x->cell_stages = keep;
  return TRUE;
}

/* A new block for cell c at the array's end: its first place. */
static uint32_t xvec_block(XferVec *x, size_t c) {
  if (x->used + XBLOCK > x->room) {
    x->t = rf_bigvec_room(&x->v, sizeof(Rec) * (x->used + XBLOCK));
    x->room = x->v.room / sizeof(Rec);
  }
  if (x->nblk == x->blk_cap) {
    x->blk_cap = MAX(1024, 2 * x->blk_cap);
    x->bcell = g_renew(uint32_t, x->bcell, x->blk_cap);
    x->bfill = g_renew(uint16_t, x->bfill, x->blk_cap);
  }
  x->bcell[x->nblk] = (uint32_t)c;
  x->bfill[x->nblk++] = XBLOCK; /* until closed partly filled */
  const uint32_t at = (uint32_t)x->used;
  x->used += XBLOCK;
  return at;
}

/* A transfer of a stage that has its cells (xvec_stages). */
static inline void xpush(XferVec *x, uint32_t piece, int src, int dst, int stage, RfPhase phase,
                         uint8_t flags) {
  const size_t c = (size_t)stage * x->cell_w + ((uint32_t)src >> x->cell_shift);
  uint32_t at = x->open[c];
  if (G_UNLIKELY(at % XBLOCK == 0)) at = xvec_block(x, c);
  const uint32_t low = (uint32_t)src & ((UINT32_C(1) << x->cell_shift) - 1);
  x->t[at] = (Rec)piece << REC_PIECE | (Rec)phase << (REC_TAG + 2) | (Rec)flags << REC_TAG |
             (Rec)low << x->rb | (uint32_t)dst;
  x->open[c] = at + 1;
  x->n++;
}

/* Pieces as they are planned, like the transfers in one RfBigVec: written once on fresh pages,
 * never copied to a larger array. */
typedef struct {
  RfBigVec big;
  RfPiece *v; /* big.p */
  uint32_t n, cap;
} PieceVec;

typedef struct {
  uint64_t ntx, nrx, vtx, vrx; /* network / NVLink bytes sent, received */
} Load;

typedef struct {
  Load *r; /* per global rank */
} Loads;

typedef struct {
  const RfProblem *pb;
  PieceVec pieces;
  XferVec x;
  int max_stage;
  int since_stage; /* the last stage of the transfers planned since it was set to -1 */
  int bcast_channels;
  RfStrategy strategy;
  int *domain; /* per global rank: its NVLink domain (a division saved per lookup) */
  int ndomains;
  uint32_t *dh_stamp; /* per domain: == stamp when dh_first holds this delivery's holder */
  int *dh_first;
  uint32_t stamp;
  GError **error;
  gboolean failed;
  /* m2n load balancing: bytes each rank sends and receives so far, over the network and over
   * NVLink, in the plan being built (ld) and in the p2p plan of the same problem (p2p, counted
   * alongside so m2n can be held to never do worse); per-GPU link rates in bytes/s */
  Loads ld, p2p;
  double gpu_nic_Bps, nvl_Bps;
  double nic_inv, nvl_inv; /* seconds per byte */
  uint64_t split_bytes;
  int *grp, *fwd, *astage; /* scratch per delivery: remote domain groups (start, end in dst),
                            their forwarders and the stage these received the piece at */
  int nscratch;
} Builder;

/* The plan outgrew RF_PLAN_MAX_TRANSFERS (2^27) of `what`: the build fails (first error kept). */
static void over_limit(Builder *b, const char *what, const char *why) {
  if (!b->failed)
    g_set_error(b->error, RF_ERROR, RF_ERROR_LIMIT,
                "%s plan needs more than %llu %s (2^27, %s); use fewer ranks or another strategy",
                rf_strategy_name(b->strategy), (unsigned long long)RF_PLAN_MAX_TRANSFERS, what,
                why);
  b->failed = TRUE;
}

/* A new piece: the first ndim bounds of box (rf_box_intersect writes no more: the rest of a
 * caller's box may be uninitialized), the others 0, so that a piece is fully defined data. */
static uint32_t add_piece(Builder *b, uint32_t part, const RfBox *box) {
  const RfModel *m = b->pb->model;
  const int nd = m->parts[part].ndim;
  RfPiece p = {0};
  p.part = part;
  for (int d = 0; d < nd; d++) {
    p.box.lo[d] = box->lo[d];
    p.box.hi[d] = box->hi[d];
  }
  p.bytes = (uint64_t)rf_box_volume(box, nd) *
            (uint64_t)rf_dtype_size(m->tensors[m->parts[part].tensor].dtype);
  PieceVec *v = &b->pieces;
  if (v->n == v->cap) {
    if (v->n >= RF_PLAN_MAX_TRANSFERS) { /* as many pieces as transfers: the transfers' limit */
      over_limit(b, "pieces", "the limit of its transfers");
      return 0; /* the build fails: no transfer of it is kept */
    }
    v->v = rf_bigvec_room(&v->big, sizeof(RfPiece) * ((size_t)v->n + 1));
    v->cap = (uint32_t)MIN(v->big.room / sizeof(RfPiece), RF_PLAN_MAX_TRANSFERS);
  }
  v->v[v->n] = p;
  return v->n++;
}

static inline int dom(const Builder *b, int rank) {
  return b->domain[rank];
}

static inline uint8_t net_flag(const Builder *b, int src, int dst) {
  return dom(b, src) != dom(b, dst) ? RF_XFER_NET : 0;
}

/* TRUE when rank r keeps none of box as its destination shard (it only forwards or discards). */
static gboolean relay_for(const Builder *b, uint32_t pi, int r, const RfBox *box) {
  RfBox mine, ov;
  return !(rf_side_rank_shard(&b->pb->dst, pi, r, &mine, NULL) &&
           rf_box_intersect(&mine, box, b->pb->model->parts[pi].ndim, &ov));
}

static void emit(Builder *b, uint32_t piece, int src, int dst, int stage, RfPhase phase,
                 gboolean relay) {
  if (stage > MAX_STAGE) {
    if (!b->failed)
      g_set_error(b->error, RF_ERROR, RF_ERROR_LIMIT, "plan needs more than %d stages", MAX_STAGE);
    b->failed = TRUE;
    return;
  }
  if (b->x.n >= RF_PLAN_MAX_TRANSFERS) {
    over_limit(b, "transfers", "the limit: 1 GiB of them as planned");
    return;
  }
  if (G_UNLIKELY(stage >= b->x.cell_stages) && !xvec_stages(&b->x, stage)) {
    if (!b->failed)
      g_set_error(b->error, RF_ERROR, RF_ERROR_LIMIT,
                  "%s plan over rank ids up to %d needs more than %d stages, the most its "
                  "transfer records hold with ids that large; use lower rank ids, fewer ranks or "
                  "another strategy",
                  rf_strategy_name(b->strategy), b->pb->nranks - 1,
                  (int)(CELL_LIMIT / (uint32_t)b->x.cell_w));
    b->failed = TRUE;
    return;
  }
  if (stage > b->max_stage) b->max_stage = stage;
  if (stage > b->since_stage) b->since_stage = stage;
  xpush(&b->x, piece, src, dst, stage, phase, net_flag(b, src, dst) | (relay ? RF_XFER_RELAY : 0));
}

/* Shards of one placement: boxes and replica ranks, empty shards dropped. */
typedef struct {
  int n;
  RfBox *box;
  int *idx; /* shard index in the placement */
  int nrep;
  const RfPlacement *p;
} Shards;

static void shards_init(Shards *s, const RfPlacement *p) {
  int ns = rf_placement_nshards(p);
  s->p = p;
  s->box = g_new(RfBox, ns);
  s->idx = g_new(int, ns);
  s->nrep = rf_placement_nreplicas(p);
  s->n = 0;
  for (int i = 0; i < ns; i++)
    if (rf_placement_shard_box(p, i, &s->box[s->n], NULL)) s->idx[s->n++] = i;
}

static void shards_clear(Shards *s) {
  g_free(s->box);
  g_free(s->idx);
}

static inline int holder(const Shards *s, int k, int r) {
  return rf_placement_rank(s->p, s->idx[k], r);
}

/* Elastic recovery: lost ranks neither send nor receive (RfProblem.lost). */
static inline gboolean is_lost(const Builder *b, int r) {
  return b->pb->lost && b->pb->lost[r];
}

/* Drop the lost ranks from v[0..n), keeping the order; returns the new count. */
static int drop_lost(const Builder *b, int *v, int n) {
  if (!b->pb->lost) return n;
  int k = 0;
  for (int i = 0; i < n; i++)
    if (!is_lost(b, v[i])) v[k++] = v[i];
  return k;
}

/* ---- p2p and m2n ------------------------------------------------------------------------ */

/* Deliver one piece from its holders to the ranks dst[0..n) (reordered in place).
 * Flat (p2p): each destination reads from the holder in its own domain, else round robin.
 * Hierarchical (the gather-broadcast export; m2n has its own balanced deliver_m2n below):
 * destinations are grouped by NVLink domain; a domain holding a holder is
 * served over NVLink; of the others, K = min(holders, domains) are injected by distinct holders
 * and the rest forwarded along chains i, i+K, i+2K, ... by domain leaders; each leader fans the
 * piece out over NVLink one stage later. Each piece so crosses the network once per domain.
 * rot rotates holder and leader choice so load spreads over GPUs and NICs. */
typedef struct {
  uint32_t piece;
  uint32_t part;
  const RfBox *box;
  const int *hold;
  int nhold;
  int stage;     /* stage of the first hop */
  RfPhase phase; /* RF_PHASE_EXPORT keeps every hop in the export phase */
  int rot;
} Delivery;

static int cmp_dom(const void *a, const void *b, void *ud) {
  const Builder *bl = ud;
  int da = dom(bl, *(const int *)a), db = dom(bl, *(const int *)b);
  return (da > db) - (da < db);
}

static void send1(Builder *b, const Delivery *dv, int src, int dst, int stage, RfPhase ph) {
  /* Export gathers land in scratch memory, never in a rank's inference weights: relay. */
  gboolean exp = dv->phase == RF_PHASE_EXPORT;
  emit(b, dv->piece, src, dst, stage, exp ? RF_PHASE_EXPORT : ph, exp);
}

/* A holder in domain d, or -1. */
static int domain_holder(const Builder *b, int d) {
  return b->dh_stamp[d] == b->stamp ? b->dh_first[d] : -1;
}

/* Index the holders of a delivery by domain (the first holder of each), in O(holders). */
static void domain_holders_mark(Builder *b, const Delivery *dv) {
  if (++b->stamp == 0) { /* wrapped: forget every old mark */
    memset(b->dh_stamp, 0, sizeof(uint32_t) * b->ndomains);
    b->stamp = 1;
  }
  for (int h = dv->nhold - 1; h >= 0; h--) {
    int d = dom(b, dv->hold[h]);
    b->dh_stamp[d] = b->stamp;
    b->dh_first[d] = dv->hold[h];
  }
}

/* End of the run of ranks in dst[i..n) that share dst[i]'s domain. */
static int domain_end(const Builder *b, const int *dst, int n, int i) {
  int d = dom(b, dst[i]), j = i;
  while (j < n && dom(b, dst[j]) == d)
    j++;
  return j;
}

/* Source for rank r over NVLink: r itself when it holds the piece, else the j-th (round robin,
 * so one GPU does not serve its whole domain) of the holders in r's domain; -1 if none. */
static int near_source(const Builder *b, const Delivery *dv, int r, int j) {
  int d = dom(b, r), n = 0;
  for (int h = 0; h < dv->nhold; h++) {
    if (dv->hold[h] == r) return r;
    n += dom(b, dv->hold[h]) == d;
  }
  if (n == 0) return -1;
  int want = (j + dv->rot) % n;
  for (int h = 0; h < dv->nhold; h++)
    if (dom(b, dv->hold[h]) == d && want-- == 0) return dv->hold[h];
  return -1;
}

static void deliver(Builder *b, const Delivery *dv, int *dst, int n, gboolean hier) {
  if (!hier) {
    for (int j = 0; j < n; j++) {
      int src = near_source(b, dv, dst[j], j);
      if (src < 0) src = dv->hold[(j + dv->rot) % dv->nhold];
      send1(b, dv, src, dst[j], dv->stage, RF_PHASE_INJECT);
    }
    return;
  }
  /* stable: keeps rank order per domain; replicas usually come in domain order already */
  gboolean sorted = TRUE;
  for (int j = 1; j < n && sorted; j++)
    sorted = dom(b, dst[j - 1]) <= dom(b, dst[j]);
  if (!sorted) g_qsort_with_data(dst, n, sizeof(int), cmp_dom, b);
  int *leader = g_new(int, n > 0 ? n : 1);
  int nremote = 0;
  domain_holders_mark(b, dv);
  for (int i = 0; i < n; i = domain_end(b, dst, n, i))
    if (domain_holder(b, dom(b, dst[i])) < 0) nremote++;
  int K = MIN(dv->nhold, nremote), k = 0;
  for (int i = 0, j; i < n; i = j) {
    j = domain_end(b, dst, n, i);
    if (domain_holder(b, dom(b, dst[i])) >= 0) {
      for (int t = i; t < j; t++)
        send1(b, dv, near_source(b, dv, dst[t], t - i), dst[t], dv->stage, RF_PHASE_INJECT);
    } else {
      int cnt = j - i;
      int lead = dst[i + (dv->rot + k) % cnt];
      int c = k / K;
      int src = c == 0 ? dv->hold[(k + dv->rot) % dv->nhold] : leader[k - K];
      send1(b, dv, src, lead, dv->stage + c, c == 0 ? RF_PHASE_INJECT : RF_PHASE_FORWARD);
      for (int t = i; t < j; t++)
        if (dst[t] != lead) send1(b, dv, lead, dst[t], dv->stage + c + 1, RF_PHASE_FANOUT);
      leader[k++] = lead;
    }
  }
  g_free(leader);
}

/* ---- m2n: load-balanced domain delivery ------------------------------------------------ */

/* A piece larger than Builder.split_bytes is cut into sub-boxes, each delivered on its own, so
 * that one large piece spreads over several holders, NICs and NVLink links instead of pinning
 * one of each. The threshold is 1/SPLIT_SHARE of the bytes the busiest domain's NICs must each
 * carry at least (the physical bound), and no less than SPLIT_MIN: pieces that small already
 * balance to within a fraction of a percent, and cutting them finer only adds transfers. */
#define SPLIT_SHARE 256
#define SPLIT_MIN (UINT64_C(8) << 20)

static void loads_init(Loads *l, int n) {
  l->r = g_new0(Load, n);
}

static void loads_clear(Loads *l) {
  g_free(l->r);
}

static inline void loads_add(const Builder *b, Loads *l, int src, int dst, uint64_t by) {
  if (src == dst) return;
  if (dom(b, src) != dom(b, dst)) {
    l->r[src].ntx += by;
    l->r[dst].nrx += by;
  } else {
    l->r[src].vtx += by;
    l->r[dst].vrx += by;
  }
}

/* Time the busiest of rank r's links that the given bytes would go over (a NIC and an NVLink
 * link each way: four links) would need with them added; untouched links do not count, so a
 * rank busy receiving is still a good sender. All zero: its busiest link as it is. */
static inline double rank_cost(const Builder *b, const Loads *l, int r, uint64_t ntx, uint64_t nrx,
                               uint64_t vtx, uint64_t vrx) {
  const Load *x = &l->r[r];
  gboolean all = !(ntx | nrx | vtx | vrx);
  uint64_t n = MAX(ntx || all ? x->ntx + ntx : 0, nrx || all ? x->nrx + nrx : 0);
  uint64_t v = MAX(vtx || all ? x->vtx + vtx : 0, vrx || all ? x->vrx + vrx : 0);
  return MAX((double)n * b->nic_inv, (double)v * b->nvl_inv);
}

/* Busiest link of a whole set of loads, in seconds. */
static double loads_bound(const Builder *b, const Loads *l) {
  double mx = 0;
  for (int r = 0; r < b->pb->nranks; r++)
    mx = MAX(mx, rank_cost(b, l, r, 0, 0, 0, 0));
  return mx;
}

static void send_m2n(Builder *b, uint32_t piece, uint64_t by, int src, int dst, int stage,
                     RfPhase ph) {
  emit(b, piece, src, dst, stage, ph, FALSE);
  loads_add(b, &b->ld, src, dst, by);
}

/* The holder that can send by more bytes over the network soonest. The round-robin holder
 * keeps the piece unless another would finish it more than one piece's time sooner: the
 * balance stays within a piece or two, and pieces keep flowing between the same ranks, so
 * they aggregate into few messages. */
static inline double send_cost(const Builder *b, int r, uint64_t by) {
  /* rank_cost(b, &b->ld, r, by, 0, 0, 0) for by > 0: only the NIC's sends count (the idle
   * NVLink term is 0) */
  return G_LIKELY(by) ? MAX((double)(b->ld.r[r].ntx + by) * b->nic_inv, 0.0)
                      : rank_cost(b, &b->ld, r, 0, 0, 0, 0);
}

static int pick_holder(const Builder *b, const int *hold, int nhold, int rot, uint64_t by) {
  int j = rot % nhold; /* (rot + i) % nhold, without a division per holder */
  int best = hold[j];
  double bc = send_cost(b, best, by) - (double)by * b->nic_inv;
  for (int i = 1; i < nhold; i++) {
    if (++j == nhold) j = 0;
    int h = hold[j];
    double c = send_cost(b, h, by);
    if (c < bc) bc = c, best = h;
  }
  return best;
}

static void scratch_reserve(Builder *b, int n) {
  if (n <= b->nscratch) return;
  b->nscratch = MAX(n, 2 * b->nscratch);
  b->grp = g_renew(int, b->grp, 2 * b->nscratch);
  b->fwd = g_renew(int, b->fwd, b->nscratch);
  b->astage = g_renew(int, b->astage, b->nscratch);
}

/* Deliver one sub-box (piece) to the remote domain groups grp[0..nr) of dst: groups k < K are
 * injected by holders, the others forwarded from the receiver of group k - K (chains i, i+K,
 * ...) unless a holder is less loaded than that forwarder. In a group of cnt ranks the piece either
 * enters once, at the rank whose links are least loaded, and fans out over NVLink (domain copy), or
 * every rank reads it from a holder (direct): whichever leaves the busiest touched link less
 * loaded. Direct wins where the fan-out would make one GPU's NVLink link the bottleneck; with one
 * rank in the group both are the same. */
static void m2n_groups(Builder *b, uint32_t piece, uint64_t by, const int *hold, int nhold,
                       const int *dst, int nr, int K, int rot) {
  for (int k = 0; k < nr && !b->failed; k++) {
    int i = b->grp[2 * k], j = b->grp[2 * k + 1], cnt = j - i;
    /* the source: a holder, or for k >= K the receiver of group k - K (forwarding), unless a
     * holder's links are less loaded than the forwarder's */
    int src = pick_holder(b, hold, nhold, rot + k, by), st = 0;
    RfPhase ph = RF_PHASE_INJECT;
    if (k >= K && rank_cost(b, &b->ld, b->fwd[k - K], by, 0, 0, 0) <=
                      rank_cost(b, &b->ld, src, by, 0, 0, 0)) {
      src = b->fwd[k - K];
      st = b->astage[k - K] + 1;
      ph = RF_PHASE_FORWARD;
    }
    int hsrc = ph == RF_PHASE_INJECT ? src : -1;
    uint64_t fwd_tx = k + K < nr ? by : 0; /* the receiver forwards it once more */
    /* domain copy: the least loaded receiver */
    int at = (rot + k) % cnt; /* (rot + k + t) % cnt, without a division per receiver */
    int lead = dst[i + at];   /* the round-robin receiver, unless (pick_holder) */
    double lc = rank_cost(b, &b->ld, lead, fwd_tx, by, (uint64_t)(cnt - 1) * by, 0),
           lbar = lc - (double)by * b->nic_inv;
    for (int t = 1; t < cnt; t++) {
      if (++at == cnt) at = 0;
      int r = dst[i + at];
      double c = rank_cost(b, &b->ld, r, fwd_tx, by, (uint64_t)(cnt - 1) * by, 0);
      if (c < lbar) lc = lbar = c, lead = r;
    }
    gboolean direct = FALSE;
    if (cnt > 1) {
      double hier = MAX(lc, rank_cost(b, &b->ld, src, by, 0, 0, 0));
      for (int t = i; t < j; t++)
        if (dst[t] != lead) hier = MAX(hier, rank_cost(b, &b->ld, dst[t], 0, 0, 0, by));
      /* Direct puts by on every receiver's NIC, the leader's too: it can only win where the
       * domain copy is bound by something else than the leader's network receive. */
      if (hier > (double)(b->ld.r[lead].nrx + by) * b->nic_inv) {
        double dir = 0;
        for (int t = i; t < j; t++)
          dir = MAX(dir, rank_cost(b, &b->ld, dst[t], 0, by, 0, 0));
        /* the holders share cnt copies: the least loaded one takes its share */
        int h = hsrc >= 0 ? hsrc : pick_holder(b, hold, nhold, rot + k, by);
        dir =
            MAX(dir, rank_cost(b, &b->ld, h, (uint64_t)((cnt + nhold - 1) / nhold) * by, 0, 0, 0));
        direct = dir < hier;
      }
    }
    if (!direct) {
      send_m2n(b, piece, by, src, lead, st, ph);
      for (int t = i; t < j; t++)
        if (dst[t] != lead) send_m2n(b, piece, by, lead, dst[t], st + 1, RF_PHASE_FANOUT);
      b->fwd[k] = lead;
      b->astage[k] = st;
    } else {
      int best = dst[i];
      double bc = -1;
      for (int t = i; t < j; t++) {
        send_m2n(b, piece, by, pick_holder(b, hold, nhold, rot + t, by), dst[t], 0,
                 RF_PHASE_INJECT);
        double c = rank_cost(b, &b->ld, dst[t], fwd_tx, 0, 0, 0);
        if (bc < 0 || c < bc) bc = c, best = dst[t];
      }
      b->fwd[k] = best;
      b->astage[k] = 0;
    }
  }
}

/* What the p2p plan would put on each link for this piece: the flat delivery of deliver(),
 * counted only, so m2n can compare itself with p2p at the end. dst in deliver()'s order; the
 * holders already marked by domain. */
static void p2p_shadow(Builder *b, const Delivery *dv, const int *dst, int n, uint64_t by) {
  for (int j = 0; j < n; j++) {
    int src = domain_holder(b, dom(b, dst[j])) >= 0 ? near_source(b, dv, dst[j], j) : -1;
    if (src < 0) src = dv->hold[(j + dv->rot) % dv->nhold];
    loads_add(b, &b->p2p, src, dst[j], by);
  }
}

/* m2n delivery of box (of part pi) from its holders to the ranks dst[0..n) (reordered in
 * place). Destinations are grouped by NVLink domain; a domain holding a holder is served over
 * NVLink; the others go through m2n_groups, sub-box by sub-box for a large piece. */
static void deliver_m2n(Builder *b, uint32_t pi, const RfBox *box, int *hold, int nhold, int *dst,
                        int n, int rot, gboolean shadow) {
  const RfPart *part = &b->pb->model->parts[pi];
  uint32_t piece = UINT32_MAX; /* the whole box, added once a transfer needs it */
  uint64_t by = (uint64_t)rf_box_volume(box, part->ndim) *
                (uint64_t)rf_dtype_size(b->pb->model->tensors[part->tensor].dtype);
  Delivery dv = {0, pi, box, hold, nhold, 0, RF_PHASE_INJECT, rot};
  domain_holders_mark(b, &dv);
  if (shadow) p2p_shadow(b, &dv, dst, n, by);
  gboolean sorted = TRUE;
  for (int j = 1; j < n && sorted; j++)
    sorted = dom(b, dst[j - 1]) <= dom(b, dst[j]);
  if (!sorted) g_qsort_with_data(dst, n, sizeof(int), cmp_dom, b);
  scratch_reserve(b, n);
  int nr = 0, maxcnt = 0;
  for (int i = 0, j; i < n; i = j) {
    j = domain_end(b, dst, n, i);
    if (domain_holder(b, dom(b, dst[i])) >= 0) {
      if (piece == UINT32_MAX) piece = add_piece(b, pi, box);
      for (int t = i; t < j; t++) {
        int src = near_source(b, &dv, dst[t], t - i);
        emit(b, piece, src, dst[t], 0, RF_PHASE_INJECT, FALSE);
        loads_add(b, &b->ld, src, dst[t], by);
      }
    } else {
      b->grp[2 * nr] = i;
      b->grp[2 * nr++ + 1] = j;
      maxcnt = MAX(maxcnt, j - i);
    }
  }
  if (nr == 0) return;
  int K = MIN(nhold, nr);
  /* Cut a large piece along its outermost dim that can take the cut (row-major runs stay
   * long), into as many sub-boxes as there are holders or receivers to spread over. */
  uint64_t want = MIN((by + b->split_bytes - 1) / b->split_bytes, (uint64_t)MAX(maxcnt, K));
  int sd = -1;
  for (int d = 0; d < part->ndim && want > 1; d++)
    if (box->hi[d] - box->lo[d] >= (int64_t)want) {
      sd = d;
      break;
    }
  if (sd < 0) {
    if (piece == UINT32_MAX) piece = add_piece(b, pi, box);
    m2n_groups(b, piece, by, hold, nhold, dst, nr, K, rot);
    return;
  }
  int64_t ext = box->hi[sd] - box->lo[sd];
  for (uint64_t s = 0; s < want && !b->failed; s++) {
    RfBox sub = *box;
    sub.lo[sd] = box->lo[sd] + (int64_t)((uint64_t)ext * s / want);
    sub.hi[sd] = box->lo[sd] + (int64_t)((uint64_t)ext * (s + 1) / want);
    uint32_t sp = add_piece(b, pi, &sub);
    uint64_t sby = b->pieces.v[sp].bytes;
    m2n_groups(b, sp, sby, hold, nhold, dst, nr, K, rot + (int)s);
  }
}

/* p2p and m2n: the overlap of every (source shard, destination shard) pair, to every replica. */
static void plan_direct(Builder *b, uint32_t pi, const Shards *S, const Shards *D, gboolean m2n) {
  int nd = b->pb->model->parts[pi].ndim;
  int *hold = g_new(int, S->nrep), *dst = g_new(int, D->nrep), *dall = g_new(int, D->nrep);
  for (int dk = 0; dk < D->n; dk++) {
    for (int j = 0; j < D->nrep; j++)
      dall[j] = holder(D, dk, j);
    int ndst = drop_lost(b, dall, D->nrep);
    for (int sk = 0; sk < S->n && ndst > 0; sk++) {
      RfBox box;
      if (!rf_box_intersect(&S->box[sk], &D->box[dk], nd, &box)) continue;
      for (int j = 0; j < S->nrep; j++)
        hold[j] = holder(S, sk, j);
      int nhold = drop_lost(b, hold, S->nrep); /* > 0: rf_problem_set_lost checked */
      memcpy(dst, dall, sizeof(int) * ndst);   /* deliver may reorder it */
      if (m2n) {
        deliver_m2n(b, pi, &box, hold, nhold, dst, ndst, sk + dk, b->strategy == RF_STRATEGY_M2N);
      } else {
        Delivery dv = {add_piece(b, pi, &box), pi, NULL, hold, nhold, 0, RF_PHASE_INJECT, sk + dk};
        deliver(b, &dv, dst, ndst, FALSE);
      }
    }
  }
  g_free(hold);
  g_free(dst);
  g_free(dall);
}

/* ---- gather-broadcast ----------------------------------------------------------------- */

/* Chains of the root broadcast, laid like NCCL rings: ring c visits every training and
 * inference rank domain by domain, entering each domain at a different GPU (so rings spread
 * over the NICs); the chain is ring c read from the root around to the rank before it. */
typedef struct {
  int n; /* ranks in a chain */
  int nchains;
  int **order; /* per chain: ranks in chain order, root first */
} Chains;

static int cmp_rank_gpu(const void *a, const void *b, void *ud) {
  const int *gpu = ud;
  int ga = gpu[*(const int *)a], gb = gpu[*(const int *)b];
  return (ga > gb) - (ga < gb);
}

static void chains_build(Builder *b, Chains *ch) {
  const RfProblem *pb = b->pb;
  int n = pb->src.nranks + pb->dst.nranks;
  int *all = g_new(int, n), k = 0;
  int root = -1;
  for (int i = 0; i < pb->src.nranks; i++)
    if (!is_lost(b, pb->src.ranks[i])) {
      all[k++] = pb->src.ranks[i];
      if (root < 0) root = pb->src.ranks[i];
    }
  for (int i = 0; i < pb->dst.nranks; i++)
    if (rf_side_index(&pb->src, pb->dst.ranks[i]) < 0 && !is_lost(b, pb->dst.ranks[i]))
      all[k++] = pb->dst.ranks[i];
  n = k;
  g_qsort_with_data(all, n, sizeof(int), cmp_rank_gpu, pb->gpu);
  ch->n = n;
  ch->nchains = MAX(1, MIN(b->bcast_channels, n)); /* more rings than ranks add nothing */
  ch->order = g_new(int *, ch->nchains);
  int *ring = g_new(int, n);
  for (int c = 0; c < ch->nchains; c++) {
    int w = 0, at = 0;
    for (int i = 0; i < n;) {
      int d = dom(b, all[i]), j = i;
      while (j < n && dom(b, all[j]) == d)
        j++;
      int cnt = j - i;
      int rot = (int)(((int64_t)c * cnt) / ch->nchains) % cnt;
      for (int t = 0; t < cnt; t++) {
        ring[w] = all[i + (t + rot) % cnt];
        if (ring[w] == root) at = w;
        w++;
      }
      i = j;
    }
    int *o = ch->order[c] = g_new(int, n);
    for (int t = 0; t < n; t++)
      o[t] = ring[(at + t) % n];
  }
  g_free(ring);
  g_free(all);
}

static void chains_clear(Chains *ch) {
  for (int c = 0; c < ch->nchains; c++)
    g_free(ch->order[c]);
  g_free(ch->order);
}

/* Export of part pi to every source rank. */
static void gb_export(Builder *b, uint32_t pi, const Shards *S) {
  const RfProblem *pb = b->pb;
  const RfPlacement *sp = S->p;
  const RfSide *src = &pb->src;
  /* Export. Megatron: every training rank at position q of its PP stage first receives
   * shard(q) from the owner stage's rank at q (PP broadcast, stage 0), then the other shards
   * inside its own stage (TP / EP all-gather, as NCCL rings do it: each shard enters each NVLink
   * domain once, then NVLink). The owner stage gathers at stage 0, the others at stage 1.
   * Spec input: the source mesh gathers at stage 0; other source ranks fetch at stage 1. */
  int msize = sp->mesh->nranks;
  const int *mranks = sp->mesh->ranks;
  gboolean staged = !strcmp(src->framework, "megatron");
  int ngroups = staged ? src->nranks / msize : 1;
  int nrep = S->nrep;
  int *hold = g_new(int, MAX(nrep, src->nranks)), *dst = g_new(int, src->nranks);
  /* Per part, not per shard: the shard each mesh position holds, and (spec input) the source
   * ranks outside the mesh. */
  int *own = g_new(int, msize), *outside = g_new(int, staged ? 1 : src->nranks), nout = 0;
  for (int q = 0; q < msize; q++)
    rf_placement_locate(sp, q, &own[q], NULL);
  for (int i = 0; !staged && i < src->nranks; i++)
    if (rf_mesh_position(sp->mesh, src->ranks[i]) < 0 && !is_lost(b, src->ranks[i]))
      outside[nout++] = src->ranks[i];
  int *ohold = g_new(int, msize); /* surviving holders of a shard in the owner group */
  for (int k = 0; k < S->n && !b->failed; k++) {
    uint32_t piece = add_piece(b, pi, &S->box[k]);
    int no = 0;
    for (int q = 0; q < msize; q++)
      if (own[q] == S->idx[k] && !is_lost(b, mranks[q])) ohold[no++] = mranks[q];
    for (int g = 0; g < ngroups; g++) {
      const int *grp = staged ? src->ranks + g * msize : mranks;
      gboolean owner = grp[0] == mranks[0];
      int nh = 0, n = 0;
      for (int q = 0; q < msize; q++) {
        if (is_lost(b, grp[q])) continue; /* elastic recovery: a lost rank gathers nothing */
        if (own[q] == S->idx[k]) {
          hold[nh++] = grp[q];
          if (!owner && no > 0) {
            /* from the owner stage's rank at q, or another surviving replica if it is lost */
            int from = is_lost(b, mranks[q]) ? ohold[(q + k) % no] : mranks[q];
            Delivery pp = {piece, pi, &S->box[k], &from, 1, 0, RF_PHASE_EXPORT, 0};
            send1(b, &pp, from, grp[q], 0, RF_PHASE_EXPORT);
          }
        } else {
          dst[n++] = grp[q];
        }
      }
      /* every holder of this group lost: its ranks fetch from the owner group */
      const int *h = nh ? hold : ohold;
      int hn = nh ? nh : no;
      Delivery dv = {piece, pi, &S->box[k], h, hn, owner ? 0 : 1, RF_PHASE_EXPORT, k + g};
      if (n > 0 && hn > 0) deliver(b, &dv, dst, n, TRUE);
    }
    if (!staged) {
      memcpy(dst, outside, sizeof(int) * nout); /* deliver may reorder it */
      for (int j = 0; j < nrep; j++)
        hold[j] = holder(S, k, j);
      int nh = drop_lost(b, hold, nrep);
      Delivery dv = {piece, pi, &S->box[k], hold, nh, 0, RF_PHASE_EXPORT, k};
      if (nout > 0 && nh > 0) deliver(b, &dv, dst, nout, TRUE);
    }
  }
  g_free(ohold);
  g_free(hold);
  g_free(dst);
  g_free(own);
  g_free(outside);
}

/* Broadcast of part pi along the chains, once its export (the transfers planned since
 * b->since_stage was set to -1) is complete: the part split into chunks along dim 0, one per
 * chain. */
static void gb_broadcast(Builder *b, uint32_t pi, const Chains *ch) {
  const RfModel *m = b->pb->model;
  const RfPart *part = &m->parts[pi];
  int nd = part->ndim;
  uint64_t bytes = (uint64_t)rf_part_elems(part) * rf_dtype_size(m->tensors[part->tensor].dtype);
  int nch = (int)MIN((int64_t)ch->nchains, MAX(1, (int64_t)(bytes >> 22))); /* >= 4 MiB a chain */
  if (nch > part->shape[0]) nch = (int)part->shape[0];
  /* The broadcast of this part starts once its export is complete. */
  const int first_stage = b->since_stage + 1;
  for (int c = 0; c < nch; c++) {
    RfBox box;
    rf_box_full(&box, part->shape, nd);
    rf_chunk(part->shape[0], nch, c, &box.lo[0], &box.hi[0]);
    if (box.hi[0] <= box.lo[0]) continue;
    uint32_t piece = add_piece(b, pi, &box);
    const int *o = ch->order[c];
    if (!relay_for(b, pi, o[0], &box)) /* the root is a destination too: a local copy */
      emit(b, piece, o[0], o[0], first_stage, RF_PHASE_BROADCAST, FALSE);
    for (int h = 1; h < ch->n && !b->failed; h++) {
      int r = o[h];
      emit(b, piece, o[h - 1], r, first_stage + h - 1, RF_PHASE_BROADCAST,
           relay_for(b, pi, r, &box));
    }
  }
}

static void plan_gather_broadcast(Builder *b, uint32_t pi, const Shards *S, const Chains *ch) {
  b->since_stage = -1;
  gb_export(b, pi, S);
  if (!b->failed) gb_broadcast(b, pi, ch);
}

/* ---- sort, messages, stats ------------------------------------------------------------ */

/* Bits that hold every value in 0..n-1 (at least 1). */
static int bits_for(uint64_t n) {
  int b = 1;
  while (b < 64 && (UINT64_C(1) << b) < n)
    b++;
  return b;
}

/* Counts of the digits 0..mask into their first output positions (exclusive prefix sums). */
static void counts_to_starts(uint32_t *cnt, uint64_t mask) {
  uint32_t sum = 0;
  for (uint64_t d = 0; d <= mask; d++) {
    const uint32_t c = cnt[d];
    cnt[d] = sum;
    sum += c;
  }
}

/* A stable sort of the records v[0..n) of one cell into out, by their local key's lbits bits
 * (the record's low bits, (src's low bits, dst): at most 32) through packed keys: (local key <<
 * ibits | index in the run) for every record (64 bits at most: ibits <= 27), an LSD sort of
 * those (8 bytes each, the digit a shift away) in digits of at most LOCAL_DIGIT bits (4096
 * buckets: the written streams stay in cache), and one gather of the records into out by the
 * index in the low bits. The keys are made and every digit counted in one pass, which also
 * finds a run already in order (its keys ascending). key and kout hold n each; cnt holds
 * LOCAL_PASSES << LOCAL_DIGIT counts. */
#define LOCAL_DIGIT 12
#define LOCAL_PASSES 6 /* 64 bits in digits of at most LOCAL_DIGIT */
static void sort_packed(const Rec *v, Rec *out, uint64_t n, int lbits, int ibits, uint64_t *key,
                        uint64_t *kout, uint32_t *cnt) {
  g_assert(lbits <= REC_TAG && lbits + ibits <= 64);
  const int bits = lbits, passes = (bits + LOCAL_DIGIT - 1) / LOCAL_DIGIT;
  const int dw = passes ? (bits + passes - 1) / passes : 1; /* even digits: 17 bits in 2 of 9 */
  const uint64_t mask = (UINT64_C(1) << dw) - 1;
  memset(cnt, 0, (sizeof(uint32_t) * passes) << dw);
  gboolean sorted = TRUE;
  const uint64_t lmask = (UINT64_C(1) << lbits) - 1;
  for (uint64_t i = 0; i < n; i++) {
    const uint64_t q = ((v[i] & lmask) << ibits) | i;
    key[i] = q;
    sorted &= i == 0 || key[i - 1] < q;
    for (int p = 0; p < passes; p++)
      cnt[((size_t)p << dw) + ((q >> (ibits + p * dw)) & mask)]++;
  }
  if (sorted) {
    memcpy(out, v, sizeof(Rec) * n);
    return;
  }
  for (int p = 0; p < passes; p++) {
    const int sh = ibits + p * dw;
    uint32_t *c = cnt + ((size_t)p << dw);
    if (c[(key[0] >> sh) & mask] == n) continue; /* one digit: nothing moves */
    counts_to_starts(c, mask);
    for (uint64_t i = 0; i < n; i++)
      kout[c[(key[i] >> sh) & mask]++] = key[i];
    uint64_t *t = key;
    key = kout;
    kout = t;
  }
  const uint64_t imask = (UINT64_C(1) << ibits) - 1;
  for (uint64_t i = 0; i < n; i++)
    out[i] = v[key[i] & imask];
}

/* Messages and per-rank byte counts, gathered as the sorted records are walked in order. The
 * byte counts are added once per stretch of a message's transfers of one phase and class (network
 * or not), not once per transfer: the same integer sums, at a tenth of the scattered updates. */
typedef struct {
  RfPlan *plan;
  int rb, nslot;
  const uint64_t *pbytes; /* per piece */
  RfBigVec msgs;
  uint64_t nm;
  Rec last;      /* the last record walked, without its piece */
  uint64_t acc;  /* bytes of the open stretch */
  gboolean open; /* a stretch is open: its ranks and tag are these */
  int src, dst, phase, flags;
  uint64_t *tx, *rx;   /* network bytes per rank x slot: each phase, and all (RF_PHASE_COUNT) */
  uint64_t *vtx, *vrx; /* NVLink bytes per rank */
} Group;

/* Add the open stretch's bytes to the plan's statistics and the per-rank counts. */
static void group_flush(Group *g) {
  if (!g->open) return;
  RfPlanStats *st = &g->plan->stats;
  const uint64_t by = g->acc;
  const int nslot = g->nslot, src = g->src, dst = g->dst, ph = g->phase;
  if (g->flags & RF_XFER_NET) {
    st->network_bytes += by;
    st->phase_network_bytes[ph] += by;
    g->tx[(size_t)src * nslot + RF_PHASE_COUNT] += by;
    g->rx[(size_t)dst * nslot + RF_PHASE_COUNT] += by;
    g->tx[(size_t)src * nslot + ph] += by;
    g->rx[(size_t)dst * nslot + ph] += by;
  } else if (src != dst) {
    st->nvlink_bytes += by;
    g->vtx[src] += by;
    g->vrx[dst] += by;
  }
  g->open = FALSE;
  g->acc = 0;
}

/* Walk the sorted records r[0 .. m) of cell (stage, src_hi: src's bits above the record's),
 * the transfers from b0 on: their messages and bytes, each written as its RfTransfer to out[b0
 * + i] (out: the same array, read at 8 bytes a transfer and written at 4, so never ahead of the
 * reads). A message is a run of equal (src, dst) in the cell: the records' low 32 bits. */
static void group_run(Group *g, const Rec *r, RfTransfer *out, uint64_t b0, uint64_t m, int stage,
                      uint32_t src_hi) {
  RfMessage *msg = NULL; /* a new cell: a new message */
  uint64_t acc = g->acc;
  const Rec rmask = (UINT64_C(1) << g->rb) - 1, nopiece = (UINT64_C(1) << REC_PIECE) - 1;
  for (uint64_t i = 0; i < m; i++) {
    const Rec rec = r[i], w = rec & nopiece;
    const uint32_t piece = (uint32_t)(rec >> REC_PIECE);
    const uint64_t by = g->pbytes[piece];
    if (G_UNLIKELY(w != g->last || !msg)) {
      g->acc = acc;
      group_flush(g);
      acc = 0;
      g->open = TRUE;
      g->src = (int)(src_hi | (uint32_t)((w & REC_LOW) >> g->rb));
      g->dst = (int)(w & rmask);
      g->flags = (int)(w >> REC_TAG) & 3;
      g->phase = (int)(w >> (REC_TAG + 2)) & 7;
      if (!msg || ((w ^ g->last) & REC_LOW)) {
        if (sizeof(RfMessage) * (g->nm + 1) > g->msgs.room)
          rf_bigvec_room(&g->msgs, sizeof(RfMessage) * (g->nm + 1));
        msg = (RfMessage *)g->msgs.p + g->nm;
        g->nm++;
        memset(msg, 0, sizeof *msg);
        msg->stage = (uint16_t)stage;
        msg->phase = (uint8_t)g->phase;
        msg->flags = (uint8_t)(g->flags & RF_XFER_NET);
        msg->src = g->src;
        msg->dst = g->dst;
        msg->first = (uint32_t)(b0 + i);
      }
      g->last = w;
    }
    acc += by;
    msg->bytes += by;
    msg->count++;
    out[b0 + i] = (RfTransfer){piece, (uint32_t)g->phase, (uint32_t)g->flags};
  }
  g->acc = acc;
}

/* Sort the planned records in place by (stage, src, dst) and stable, which is by (stage, src,
 * dst, piece): transfers are planned in order of their pieces, and the transfers of one message
 * keep the order they were planned in; then make them RfTransfers, in the array's first half.
 * MSD then LSD, stable throughout: the planner left them in blocks of one cell each (XferVec);
 * the blocks are permuted, whole, into cell order (in place, along the permutation's cycles: a
 * move is one copy of a block). Then cell by cell: its blocks are gathered down to the cell's
 * place, distributed by the upper bits of their local key into runs of about n / 4096 records
 * (small enough for the cache) in a scratch array, each run sorted by the rest of its key back
 * to its place, and the cell walked for its messages. A cell's place ends before the next
 * cell's blocks start (a cell's blocks hold at least its records), so cells are written in
 * order over blocks already read, and its RfTransfers in the half of its place below. */
static void sort_group(XferVec *x, Group *g, int nstages) {
  const uint64_t n = x->n, nblk = x->nblk;
  Rec *v = x->t;
  RfTransfer *out = (RfTransfer *)(void *)v;
  xvec_close(x);
  const uint64_t ncell = (uint64_t)nstages * x->cell_w, target = MAX(n >> 12, 1024);
  /* per cell: its records, then its first block in cell order */
  uint64_t *ccount = g_new0(uint64_t, ncell);
  uint32_t *cblk = g_new0(uint32_t, ncell + 1);
  for (uint64_t j = 0; j < nblk; j++) {
    ccount[x->bcell[j]] += x->bfill[j];
    cblk[x->bcell[j]]++;
  }
  uint32_t sum = 0;
  uint64_t maxc = 1;
  for (uint64_t c = 0; c <= ncell; c++) {
    const uint32_t k = c < ncell ? cblk[c] : 0;
    cblk[c] = sum;
    sum += k;
    if (c < ncell) maxc = MAX(maxc, ccount[c]);
  }
  /* The sort's arrays in one block: from RF_BIG_MIN_BYTES on its pages are huge, a fault each
   * where a thousand 4 KiB faults cost more on a virtual machine (issue 26). pkey: a run's packed
   * keys, twice; A: a cell's records; src_of[s]: the block that goes to place s (a cell's
   * blocks keep their order); fill: the records held at place s once there. */
  const size_t o_A = 2 * sizeof(uint64_t) * maxc, o_src = o_A + sizeof(Rec) * maxc;
  const size_t o_fill = o_src + sizeof(uint32_t) * (nblk + 1);
  char *arena = rf_big_alloc(o_fill + sizeof(uint16_t) * (nblk + 1));
  uint64_t *pkey = (uint64_t *)arena;
  Rec *A = (Rec *)(arena + o_A);
  uint32_t *src_of = (uint32_t *)(arena + o_src), *next = g_memdup2(cblk, sizeof(uint32_t) * ncell);
  uint16_t *fill = (uint16_t *)(arena + o_fill);
  for (uint64_t j = 0; j < nblk; j++) {
    const uint32_t s = next[x->bcell[j]]++;
    src_of[s] = (uint32_t)j;
    fill[s] = x->bfill[j];
  }
  g_free(next);
  /* the permutation, cycle by cycle: a place is filled from its block's place, which is then
   * filled in turn, until the cycle closes on the first block (held aside) */
  Rec *held = g_new(Rec, XBLOCK);
  for (uint64_t s0 = 0; s0 < nblk; s0++) {
    if (src_of[s0] == s0) continue; /* in place, or moved */
    memcpy(held, v + s0 * XBLOCK, sizeof(Rec) * XBLOCK);
    for (uint64_t s = s0;;) {
      const uint64_t f = src_of[s];
      src_of[s] = (uint32_t)s;
      if (f == s0) {
        memcpy(v + s * XBLOCK, held, sizeof(Rec) * XBLOCK);
        break;
      }
      /* the cycle's moves wait on each other: start on the next block's first lines now */
      const char *nx = (const char *)(v + (uint64_t)src_of[f] * XBLOCK);
      for (int l = 0; l < 8; l++)
        PREFETCH(nx + 64 * l);
      memcpy(v + s * XBLOCK, v + f * XBLOCK, sizeof(Rec) * XBLOCK);
      s = f;
    }
  }
  g_free(held);
  uint32_t *cnt = g_new(uint32_t, LOCAL_PASSES << LOCAL_DIGIT);
  uint64_t *dcnt = g_new(uint64_t, (size_t)1 << MSD_MAX_BITS);
  const int shift = x->cell_shift, lbits = shift + g->rb;
  uint64_t b0 = 0;
  for (uint64_t c = 0; c < ncell; c++) {
    const uint64_t m = ccount[c];
    if (m == 0) continue;
    /* runs: the upper hb bits of the local key (src's low bits first) */
    int hb = 0;
    while (hb < MIN(lbits, MSD_MAX_BITS) && (m >> hb) > target)
      hb++;
    const int sh = lbits - hb;
    const uint64_t lmask = (UINT64_C(1) << lbits) - 1;
    /* the cell's records, one after the other: into A (one run), else at the cell's place
     * (moved down: a block's place is never below where its records go) to be distributed
     * into A by run */
    Rec *in = hb > 0 ? v + b0 : A;
    uint64_t w = 0;
    for (uint64_t s = cblk[c]; s < cblk[c + 1]; s++) {
      memmove(in + w, v + s * XBLOCK, sizeof(Rec) * fill[s]);
      w += fill[s];
    }
    g_assert(w == m);
    uint64_t nrun = 1;
    if (hb > 0) {
      nrun = (uint64_t)1 << hb;
      memset(dcnt, 0, sizeof(uint64_t) * nrun);
      for (uint64_t i = 0; i < m; i++)
        dcnt[(in[i] & lmask) >> sh]++;
      uint64_t at = 0;
      for (uint64_t d = 0; d < nrun; d++) {
        const uint64_t k = dcnt[d];
        dcnt[d] = at;
        at += k;
      }
      for (uint64_t i = 0; i < m; i++)
        A[dcnt[(in[i] & lmask) >> sh]++] = in[i]; /* dcnt[d]: the end of run d */
    }
    for (uint64_t d = 0, r0 = 0; d < nrun; d++) { /* each run from A to its place */
      const uint64_t r1 = hb > 0 ? dcnt[d] : m, len = r1 - r0;
      if (len == 0) continue;
      sort_packed(A + r0, v + b0 + r0, len, sh, bits_for(len), pkey, pkey + maxc, cnt);
      r0 = r1;
    }
    group_run(g, v + b0, out, b0, m, (int)(c / (uint64_t)x->cell_w),
              (uint32_t)(c % (uint64_t)x->cell_w) << shift);
    b0 += m;
  }
  g_assert(b0 == n);
  g_free(dcnt);
  g_free(cnt);
  g_free(arena);
  g_free(cblk);
  g_free(ccount);
}

/* A fresh mark for the arrays a and b of n entries (forgetting every old mark when it wraps). */
static uint32_t next_stamp(uint32_t *stamp, uint32_t *a, uint32_t *b, int n) {
  if (++*stamp == 0) {
    memset(a, 0, sizeof(uint32_t) * n);
    memset(b, 0, sizeof(uint32_t) * n);
    *stamp = 1;
  }
  return *stamp;
}

/* The distinct NVLink domains of each shard's replicas: shard k's in dom[k * nrep ..] (their
 * number in ndom[k]), and in only[k] the one domain of all of them (-1: several, -2: none). */
static void shard_domains(const RfProblem *pb, const Shards *S, int *dom, int *ndom, int *only,
                          uint32_t *mark, uint32_t *other, uint32_t *stamp, int nd_) {
  for (int k = 0; k < S->n; k++) {
    const uint32_t st = next_stamp(stamp, mark, other, nd_);
    int n = 0;
    for (int j = 0; j < S->nrep; j++) {
      const int d = rf_problem_domain(pb, holder(S, k, j));
      if (mark[d] == st) continue;
      mark[d] = st;
      dom[(size_t)k * S->nrep + n++] = d;
    }
    ndom[k] = n;
    only[k] = n == 0 ? -2 : n == 1 ? dom[(size_t)k * S->nrep] : -1;
  }
}

/* The physical network bound of the problem (RfPlanStats.domain_bound_s). Per part, over the
 * overlapping (source shard, destination shard) pairs: the distinct shards of one placement
 * tile the part, so overlaps of distinct pairs are disjoint and their volumes add up.
 * - into domain d: the overlap, if some replica of the destination shard is in d and no
 *   replica of the source shard is;
 * - out of domain s: the overlap, if every replica of the source shard is in s and some replica
 *   of the destination shard is outside s.
 * The domains of each shard's replicas are listed once per part, not once per pair. */
static double domain_bound(const RfProblem *pb) {
  const RfModel *m = pb->model;
  int nd_ = 0;
  for (int r = 0; r < pb->nranks; r++)
    if (pb->gpu[r] >= 0) nd_ = MAX(nd_, rf_problem_domain(pb, r) + 1);
  if (nd_ == 0) return 0;
  uint64_t *in = g_new0(uint64_t, nd_), *out = g_new0(uint64_t, nd_);
  int *nranks = g_new0(int, nd_);
  uint32_t *dmark = g_new0(uint32_t, nd_), *smark = g_new0(uint32_t, nd_), stamp = 0;
  /* ranks of the problem per domain (a rank on both sides counts once) */
  for (int r = 0; r < pb->nranks; r++)
    if (pb->gpu[r] >= 0 && (rf_side_index(&pb->src, r) >= 0 || rf_side_index(&pb->dst, r) >= 0))
      nranks[rf_problem_domain(pb, r)]++;
  for (uint32_t pi = 0; pi < m->nparts; pi++) {
    const RfPlacement *sp = &pb->src.place[pi], *dp = &pb->dst.place[pi];
    if (!sp->mesh || !dp->mesh) continue;
    int nd = m->parts[pi].ndim;
    uint64_t es = (uint64_t)rf_dtype_size(m->tensors[m->parts[pi].tensor].dtype);
    Shards S, D;
    shards_init(&S, sp);
    shards_init(&D, dp);
    int *sdom = g_new(int, (size_t)S.n *S.nrep + 1), *sn = g_new(int, S.n + 1);
    int *sonly = g_new(int, S.n + 1);
    int *ddom = g_new(int, (size_t)D.n *D.nrep + 1), *dn = g_new(int, D.n + 1);
    int *donly = g_new(int, D.n + 1);
    shard_domains(pb, &S, sdom, sn, sonly, smark, dmark, &stamp, nd_);
    shard_domains(pb, &D, ddom, dn, donly, dmark, smark, &stamp, nd_);
    for (int dk = 0; dk < D.n; dk++) {
      const int *dd = ddom + (size_t)dk * D.nrep;
      for (int sk = 0; sk < S.n; sk++) {
        RfBox ov;
        if (!rf_box_intersect(&S.box[sk], &D.box[dk], nd, &ov)) continue;
        uint64_t by = (uint64_t)rf_box_volume(&ov, nd) * es;
        const uint32_t st = next_stamp(&stamp, dmark, smark, nd_);
        for (int t = 0; t < sn[sk]; t++)
          smark[sdom[(size_t)sk * S.nrep + t]] = st;
        for (int t = 0; t < dn[dk]; t++)
          if (smark[dd[t]] != st) in[dd[t]] += by;
        const int only = sonly[sk];
        /* some destination replica outside the one source domain */
        const gboolean outside = dn[dk] > 1 || (dn[dk] == 1 && dd[0] != only);
        if (only >= 0 && outside) out[only] += by;
      }
    }
    g_free(sdom);
    g_free(sn);
    g_free(sonly);
    g_free(ddom);
    g_free(dn);
    g_free(donly);
    shards_clear(&S);
    shards_clear(&D);
  }
  double bps = rf_topology_nic_Bps(pb->topo) * MAX(1, pb->topo->nics_per_gpu), mx = 0;
  for (int d = 0; d < nd_; d++)
    if (nranks[d] > 0) mx = MAX(mx, (double)MAX(in[d], out[d]) / (nranks[d] * bps));
  g_free(in);
  g_free(out);
  g_free(nranks);
  g_free(dmark);
  g_free(smark);
  return mx;
}

/* Sort the planned transfers into plan->xfers, group them into messages and count the plan's
 * statistics. */
static void finish(RfPlan *plan, XferVec *x) {
  const RfProblem *pb = plan->problem;
  RfPlanStats *st = &plan->stats;
  Group g = {0};
  g.plan = plan;
  g.rb = bits_for((uint64_t)pb->nranks);
  g.nslot = RF_PHASE_COUNT + 1;
  /* piece sizes in a compact array: the sorted transfers visit pieces in no useful order */
  uint64_t *pbytes = rf_big_alloc(sizeof(uint64_t) * (plan->npieces ? plan->npieces : 1));
  for (uint32_t k = 0; k < plan->npieces; k++)
    pbytes[k] = plan->pieces[k].bytes;
  g.pbytes = pbytes;
  g.msgs.max = sizeof(RfMessage) * MAX(x->n, 1);
  /* Bytes each rank sends and receives over the network: all phases (slot RF_PHASE_COUNT) and
   * each phase alone, in one pass. */
  const int nslot = g.nslot;
  uint64_t *tx = g.tx = g_new0(uint64_t, (size_t)pb->nranks * nslot);
  uint64_t *rx = g.rx = g_new0(uint64_t, (size_t)pb->nranks * nslot);
  uint64_t *vtx = g.vtx = g_new0(uint64_t, pb->nranks), *vrx = g.vrx = g_new0(uint64_t, pb->nranks);
  if (x->n) sort_group(x, &g, plan->nstages);
  group_flush(&g);
  plan->xfers = x->n ? rf_bigvec_take(&x->v, sizeof(RfTransfer) * x->n) : NULL;
  x->t = NULL;
  plan->nmsgs = g.nm;
  plan->msgs = rf_bigvec_take(&g.msgs, sizeof(RfMessage) * g.nm);
  uint64_t mx[RF_PHASE_COUNT + 1] = {0};
  for (int r = 0; r < pb->nranks; r++) {
    for (int k = 0; k < nslot; k++)
      mx[k] = MAX(mx[k], MAX(tx[(size_t)r * nslot + k], rx[(size_t)r * nslot + k]));
    st->max_nvlink_bytes = MAX(st->max_nvlink_bytes, MAX(vtx[r], vrx[r]));
  }
  uint64_t nics = (uint64_t)MAX(1, pb->topo->nics_per_gpu);
  st->max_nic_bytes = mx[RF_PHASE_COUNT] / nics;
  for (int ph = 0; ph < RF_PHASE_COUNT; ph++)
    st->phase_max_nic_bytes[ph] = mx[ph] / nics;
  g_free(tx);
  g_free(rx);
  g_free(vtx);
  g_free(vrx);
  g_free(pbytes);
  st->messages = plan->nmsgs;
  st->transfers = plan->nxfers;
  st->stages = plan->nstages;
  st->lower_bound_s = (double)st->max_nic_bytes / rf_topology_nic_Bps(pb->topo);
  st->link_bound_s = st->lower_bound_s;
  if (pb->topo->nvlink_GBps > 0)
    st->link_bound_s =
        MAX(st->link_bound_s, (double)st->max_nvlink_bytes / (pb->topo->nvlink_GBps * 1e9));
  const RfModel *m = pb->model;
  for (uint32_t pi = 0; pi < m->nparts; pi++) {
    const RfPlacement *p = &pb->dst.place[pi];
    if (!p->mesh) continue;
    int es = rf_dtype_size(m->tensors[m->parts[pi].tensor].dtype);
    for (int s = 0; s < rf_placement_nshards(p); s++) {
      RfBox box;
      if (!rf_placement_shard_box(p, s, &box, NULL)) continue;
      int nrep = rf_placement_nreplicas(p), alive = nrep;
      for (int r = 0; pb->lost && r < nrep; r++) /* lost destinations receive nothing */
        alive -= pb->lost[rf_placement_rank(p, s, r)];
      st->payload_bytes += (uint64_t)rf_box_volume(&box, p->ndim) * es * alive;
    }
  }
}

/* Plan every part; m2n_hier FALSE plans m2n's parts by the flat p2p delivery. */
static void build_parts(Builder *b, const Chains *ch, gboolean m2n_hier) {
  const RfProblem *pb = b->pb;
  const RfModel *m = pb->model;
  for (uint32_t pi = 0; pi < m->nparts && !b->failed; pi++) {
    const RfPlacement *sp = &pb->src.place[pi], *dp = &pb->dst.place[pi];
    const RfTensor *t = &m->tensors[m->parts[pi].tensor];
    if (!dp->mesh) continue;
    if (!sp->mesh) {
      g_set_error(b->error, RF_ERROR, RF_ERROR_INPUT, "no source holds %s", t->name);
      b->failed = TRUE;
      break;
    }
    Shards S, D;
    shards_init(&S, sp);
    shards_init(&D, dp);
    RfStrategy st = b->strategy;
    if (st == RF_STRATEGY_HYBRID)
      st = rf_tensor_in_reshard_set(t) ? RF_STRATEGY_M2N : RF_STRATEGY_GATHER_BROADCAST;
    /* The export all-gathers every shard on every source rank: quadratic in the mesh size.
     * Refuse before emitting what cannot fit. */
    uint64_t export_min = (uint64_t)MAX(S.n - 1, 0) * (uint64_t)pb->src.nranks +
                          (uint64_t)MAX(ch->n - 1, 0); /* and one broadcast chain */
    if (st == RF_STRATEGY_GATHER_BROADCAST && b->x.n + export_min > RF_PLAN_MAX_TRANSFERS) {
      g_set_error(b->error, RF_ERROR, RF_ERROR_LIMIT,
                  "gather-broadcast: gathering the %d shards of %s on %d source ranks needs over "
                  "%llu transfers, more than the limit of %llu (2^27); use another strategy",
                  S.n, t->name, pb->src.nranks, (unsigned long long)(b->x.n + export_min),
                  (unsigned long long)RF_PLAN_MAX_TRANSFERS);
      b->failed = TRUE;
    } else if (st == RF_STRATEGY_GATHER_BROADCAST)
      plan_gather_broadcast(b, pi, &S, ch);
    else
      plan_direct(b, pi, &S, &D, st == RF_STRATEGY_M2N && m2n_hier);
    shards_clear(&S);
    shards_clear(&D);
  }
}

RfPlan *rf_plan_build(const RfProblem *pb, RfStrategy strategy, const RfPlanOptions *opt,
                      GError **error) {
  Builder b = {0};
  b.pb = pb;
  b.strategy = strategy;
  b.error = error;
  b.bcast_channels =
      opt && opt->bcast_channels > 0 ? opt->bcast_channels : pb->topo->bcast_channels;
  xvec_init(&b.x, bits_for((uint64_t)pb->nranks));
  b.pieces.big.max = sizeof(RfPiece) * RF_PLAN_MAX_TRANSFERS;
  b.domain = g_new(int, pb->nranks);
  for (int r = 0; r < pb->nranks; r++) {
    b.domain[r] = rf_problem_domain(pb, r);
    b.ndomains = MAX(b.ndomains, b.domain[r] + 1);
  }
  b.dh_stamp = g_new0(uint32_t, b.ndomains);
  b.dh_first = g_new(int, b.ndomains);
  loads_init(&b.ld, pb->nranks);
  loads_init(&b.p2p, pb->nranks);
  b.gpu_nic_Bps = rf_topology_nic_Bps(pb->topo) * MAX(1, pb->topo->nics_per_gpu);
  b.nvl_Bps = pb->topo->nvlink_GBps > 0 ? pb->topo->nvlink_GBps * 1e9 : 1e300;
  b.nic_inv = 1.0 / b.gpu_nic_Bps;
  b.nvl_inv = 1.0 / b.nvl_Bps;
  double phys = domain_bound(pb);
  b.split_bytes = MAX(SPLIT_MIN, (uint64_t)(phys * b.gpu_nic_Bps / SPLIT_SHARE));
  Chains ch = {0};
  gboolean need_chains = strategy == RF_STRATEGY_GATHER_BROADCAST || strategy == RF_STRATEGY_HYBRID;
  if (need_chains) chains_build(&b, &ch);
  build_parts(&b, &ch, TRUE);
  /* Never worse than p2p: when the balanced m2n plan still leaves its busiest link more loaded
   * than p2p would, plan m2n as p2p (one copy per destination rank, no domain copies). */
  if (!b.failed && strategy == RF_STRATEGY_M2N &&
      loads_bound(&b, &b.ld) > loads_bound(&b, &b.p2p)) {
    b.pieces.n = 0;
    xvec_reset(&b.x);
    b.max_stage = 0;
    build_parts(&b, &ch, FALSE);
  }
  if (need_chains) chains_clear(&ch);
  g_free(b.domain);
  g_free(b.dh_stamp);
  g_free(b.dh_first);
  loads_clear(&b.ld);
  loads_clear(&b.p2p);
  g_free(b.grp);
  g_free(b.fwd);
  g_free(b.astage);
  if (b.failed) {
    rf_bigvec_clear(&b.pieces.big);
    xvec_clear(&b.x);
    return NULL;
  }
  RfPlan *plan = g_new0(RfPlan, 1);
  plan->strategy = strategy;
  plan->problem = pb;
  plan->npieces = b.pieces.n;
  plan->pieces = b.pieces.n ? rf_bigvec_take(&b.pieces.big, sizeof(RfPiece) * b.pieces.n) : NULL;
  rf_bigvec_clear(&b.pieces.big);
  plan->nxfers = b.x.n;
  plan->nstages = b.x.n ? b.max_stage + 1 : 0;
  plan->stats.domain_bound_s = phys;
  finish(plan, &b.x);
  xvec_clear(&b.x);
  return plan;
}

void rf_plan_free(RfPlan *plan) {
  if (!plan) return;
  rf_bigvec_free(plan->pieces);
  rf_bigvec_free(plan->xfers);
  rf_bigvec_free(plan->msgs);
  g_free(plan->derived);
  g_free(plan);
}

uint64_t rf_plan_message_of(const RfPlan *plan, uint64_t t) {
  g_assert(t < plan->nxfers && plan->nmsgs > 0);
  uint64_t lo = 0, hi = plan->nmsgs - 1; /* the last message whose first <= t */
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo + 1) / 2;
    if (plan->msgs[mid].first <= t)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}
