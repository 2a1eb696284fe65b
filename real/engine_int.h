/* Internal to real/: the executor's state and the calls its engine files share.
 *
 *   status.c  a backend status as a string and an error code, the GError of a failure, progress
 *   spans.c   span algebra: runs of a box inside another, merging two segmentations, covering
 *             a box with the boxes a rank holds, chunking copy and run lists
 *   lists.c   per-rank rounds, copy lists and the holding allocator; per-rank tables
 *   quant.c   the quantize pass of a quantized problem (fill and verify)
 *   engine.c  the schedule of a plan, prepare, the run loop, timing, destroy */
#ifndef RF_REAL_ENGINE_INT_H
#define RF_REAL_ENGINE_INT_H

#include "backend.h"
#include "error.h"
#include "real.h"
#include "real_engine.h"
#include "schedule.h"

#include <glib.h>
#include <stdint.h>

#define STAGE_ALIGN RF_SCHEDULE_ALIGN
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
  int round;           /* global round */
  int need;            /* pipelined: the round this rank must have unpacked before packing it */
  uint32_t stage_mask; /* plan stages of its segments (bit min(stage, 31)) */
  GArray *sends, *recvs, *pack, *unpack; /* RfOp, RfOp, RfCopy, RfCopy while building */
  uint64_t send_top, recv_top;
  void *pack_dev, *unpack_dev; /* in the rank's list arena (LRank.lists_dev) */
  uint64_t npack, nunpack;
  uint64_t npack_small, nunpack_small; /* the small copies, first in each list */
  GArray *unpack_drop;                 /* test hook: the unpack list less one chunk */
  void *unpack_drop_dev;
  uint64_t nunpack_drop, nunpack_drop_small;
} RRound;

typedef struct {
  int rank;
  uint64_t src_bytes, dst_bytes; /* all its buffers of each side (one bank) */
  void **src_buf;                /* ns */
  void **dst_buf[2];             /* nd per bank (bank 1: --double-bank only) */
  RfBoxDesc *boxes_dev;
  RfRun *fill_dev, *verify_dev;
  uint64_t nfill, nverify;
  /* per plan */
  void *hold, *sstage, *rstage;
  uint64_t hold_bytes, sstage_bytes, rstage_bytes;
  uint64_t hold_live_bytes; /* the most bytes of pieces held at once (hold_bytes less the gaps) */
  void **bases_dev[2];      /* per bank (nbanks) */
  RRound *rounds;
  int nrounds;
  RfCopy *lists_dev; /* every round's copy lists, one allocation (the rounds point into it) */
  int *local_round;  /* global round -> index in rounds or -1 */
  RfSchedOp *prog;   /* the rank's program (rf_schedule_rank_program) */
  int nprog;
  uint64_t slot_send, slot_recv; /* staging of one lane, each direction */
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
  int *exclude, *comm_rank; /* elastic recovery (RfDevConfig): NULL without lost ranks */
  int nbanks;               /* destination banks: 1 in place (the default), 2 --double-bank */
  int bank;                 /* bank holding the last verified weights (in place: always 0) */
  uint64_t step;            /* next training step */
  uint64_t prev_step;       /* the step the bank in service holds, when have_prev */
  gboolean have_prev;       /* a bank holds verified weights and may be served; in place it is
                             * cleared when a refit starts writing (stale until verified) */
  uint64_t writing_step;    /* in place: the step the last refit started writing */
  gboolean stale;           /* in place: that refit has not been verified: the bank is not served */
  /* per plan */
  RfSchedule *sched;
  int nrounds;
  int *stage_round0; /* nstages + 1: first global round of each stage (the schedule's) */
  int *round_ranks;  /* local mode: per global round, the local ranks taking part */
  /* messages touching rank r: rank_msgs[rank_msg_first[r] .. [r + 1]), ascending (its transfers
   * are theirs, in order) */
  uint64_t *rank_msg_first, *rank_msgs;
  RfRealSpread spread;
  RfRealProgressFn progress;
  void *progress_data;
} RealState;

/* A box a rank holds when it sends, one source rf_cover may cover a sent box from: its source
 * shard or a piece it received earlier. */
typedef struct {
  RfBox box;
  int64_t origin; /* -1: the source shard, else the transfer it was received by */
} CoverSrc;

/* One part of a sent transfer's box, and where the sender takes it from. */
typedef struct {
  uint64_t xfer;
  RfBox box;
  int64_t origin;
} Decomp;

/* status.c */
/* Set *error (RF_ERROR domain, code) to the printf-formatted message; error may be NULL. */
void rf_real_set_err(GError **error, RfError code, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
/* Report progress (st->progress) of a phase that started at t0 (g_get_monotonic_time), if it has
 * run for a few seconds and the last report (*shown) is a few seconds old. */
void rf_real_progress(RealState *st, const RfPlan *plan, const char *what, uint64_t done,
                      uint64_t total, gint64 t0, gint64 *shown);
/* The error code of a backend status: a timeout, memory, or a failure of the runtime. */
RfError rf_real_status_code(RfRealStatus s);

#define DEVCHECK(st, call, what)                                                                   \
  do {                                                                                             \
    RfRealStatus s_ = (call);                                                                      \
    if (s_ != RF_REAL_OK) {                                                                        \
      rf_real_set_err(error, rf_real_status_code(s_), "rank %d: %s: %s", (st)->me, (what),         \
                      rf_real_status_string(s_));                                                  \
      goto fail;                                                                                   \
    }                                                                                              \
  } while (0)

static inline uint64_t rf_align_up(uint64_t x, uint64_t a) {
  return (x + a - 1) / a * a;
}

static inline int rf_part_esize(const RfProblem *pb, uint32_t part) {
  return rf_dtype_size(pb->model->tensors[pb->model->parts[part].tensor].dtype);
}

/* quant.c (host memory only): the quantize pass of a quantized problem (model/problem/quant.h) on
 * one rank. fill: the finite BF16 pattern of the rank's target source shards, quantized with the
 * production quantizer at the sender. verify: wrong e4m3 elements and scales of its destination
 * shards against the reference quantizer (at the receiver, first the BF16 that arrived, then its
 * quantize pass). Buffers are the rank's per-side buffer tables. */
void rf_real_quant_fill(const RfProblem *pb, int rank, void *const *src_buf, uint64_t step);
uint64_t rf_real_quant_verify(const RfProblem *pb, int rank, void *const *dst_buf, uint64_t step);

/* spans.c */
/* Runs (Span) of sub, a box inside outer, in outer's row-major order, appended to out in
 * row-major order of sub. */
void rf_box_spans(const RfBox *outer, const RfBox *sub, int ndim, GArray *out);
/* An rf_local_runs callback appending a Span to the GArray ud. */
void rf_span_cb(int64_t off, int64_t len, void *ud);
/* Walk two segmentations (Span arrays) of one element sequence; fn gets (a, b, len) where both
 * are contiguous. FALSE when their lengths differ. */
typedef void (*RfMergeFn)(int64_t a, int64_t b, int64_t len, void *ud);
gboolean rf_merge_spans(const GArray *A, const GArray *B, RfMergeFn fn, void *ud);
/* Cover want with the held boxes c[from..nc), appending one Decomp per used part to out;
 * FALSE when some of want is held by none. */
gboolean rf_cover(const RfBox *want, int ndim, const CoverSrc *c, int nc, int from, uint64_t xfer,
                  GArray *out);

/* lists.c */
/* Fill / verify runs of every shard a rank holds on one side; sp0 is the side's first space. */
void rf_real_side_runs(const RfProblem *pb, const RfSide *side, int rank, int sp0, GArray *boxes,
                       GArray *runs);
/* Allocate backend memory for a->len elements of esize and upload them (NULL + *s on failure). */
void *rf_real_upload_array(RealState *st, GArray *a, guint esize, RfRealStatus *s);
/* The per-rank transfer and message index of a plan (st->rank_*), freed with the plan. */
void rf_real_index_plan(RealState *st, const RfPlan *plan);
/* One local rank's rounds, copy lists (uploaded) and holding layout; with plan_only only its
 * holding layout and staging sizes (from the schedule sg), no rounds. */
gboolean rf_real_build_rank(RealState *st, const RfPlan *plan, const RfSchedule *sg, LRank *l,
                            GError **error);
/* Holding store, staging and the two base tables of a rank, in backend memory. */
gboolean rf_real_rank_tables(RealState *st, LRank *l, GError **error);
/* Everything per plan, of every local rank. */
void rf_real_free_plan(RealState *st);

#endif
