/* The real executor's engine, shared by every backend.
 *
 * prepare(): allocate every local rank's shards (sources once, destinations once: in place, the
 * default; twice with double_bank) and the run lists that fill and verify them.
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
 * it later, into the holding store. The pieces live in spans.c and lists.c, the status, error
 * and progress helpers in status.c (engine_int.h); this file schedules the plan (model/
 * schedule.h), prepares a rank and runs the refits. */
#include "boot.h"
#include "engine_int.h"
#include "pattern.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void rf_real_options_init(RfRealOptions *o) {
  memset(o, 0, sizeof *o);
  o->backend = g_strdup("host");
  o->warmup = 1;
  o->iters = 5;
  o->staging_bytes = RF_SCHEDULE_DEFAULT_STAGING_BYTES;
  o->max_ops = RF_SCHEDULE_DEFAULT_MAX_OPS;
  o->slots = RF_SCHEDULE_DEFAULT_SLOTS;
  o->timeout_s = 60.0;
  o->fail_rank = -1;
  o->fail_stage = 0;
  o->corrupt_rank = -1;
}

gboolean rf_real_backend_built(const char *name) {
  return rf_boot_dev_ops(name) != NULL;
}

static int buf_esize(const RfProblem *pb, const RfSide *side, int buf) {
  return rf_part_esize(pb, side->buf_part[buf]);
}

gboolean rf_real_check_gpus(int rank, const char *host, int local_rank, int local_size, int ngpus,
                            GError **error) {
  if (local_size <= ngpus && local_rank < ngpus) return TRUE;
  g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
              "rank %d (%s): %d ranks on this node but %d GPU%s visible: every rank needs its own "
              "GPU (launch at most %d rank%s per node, or use --local)",
              rank, host, MAX(local_size, local_rank + 1), ngpus, ngpus == 1 ? "" : "s", ngpus,
              ngpus == 1 ? "" : "s");
  return FALSE;
}

int rf_real_pick_gpu(int local_rank, int ngpus, int override, gboolean visible_set) {
  if (override >= 0) return override;
  if (ngpus == 1 && visible_set) return 0;
  return local_rank;
}

/* REFIT_CUDA_DEVICE: a GPU index, or -1 when unset or not a number. */
static int device_override(void) {
  const char *v = g_getenv("REFIT_CUDA_DEVICE");
  guint64 d = 0;
  if (!v || !g_ascii_string_to_unsigned(v, 10, 0, G_MAXINT, &d, NULL)) return -1;
  return (int)d;
}

/* The GPU of this rank (cfg->device), checked against the ngpus it sees; FALSE + *mine. */
static gboolean choose_gpu(const RfBoot *b, int ngpus, RfDevConfig *cfg, GError **mine) {
  const int over = device_override();
  cfg->device =
      rf_real_pick_gpu(b->local_rank, ngpus, over, g_getenv("CUDA_VISIBLE_DEVICES") != NULL);
  if (over < 0 && cfg->device == b->local_rank)
    return rf_real_check_gpus(b->rank, b->host, b->local_rank, b->local_size, ngpus, mine);
  if (cfg->device < ngpus) return TRUE;
  g_set_error(mine, RF_ERROR, RF_ERROR_INPUT,
              "rank %d (%s): REFIT_CUDA_DEVICE=%d but %d GPU%s visible", b->rank, b->host,
              cfg->device, ngpus, ngpus == 1 ? "" : "s");
  return FALSE;
}

/* Open the backend on every rank and join the communicator; the ranks agree first, so that one
 * rank without a (free) GPU or host memory (precheck: taken) cannot leave the others waiting in
 * the communicator setup. */
int rf_real_survivors(const uint8_t *lost, int world, int *exclude, int *comm_rank) {
  int nex = 0, next = 0;
  for (int r = 0; r < world; r++) {
    if (lost && lost[r]) {
      exclude[nex++] = r;
      comm_rank[r] = -1;
    } else {
      comm_rank[r] = next++;
    }
  }
  return nex;
}

static gboolean open_device(RealState *st, GError *precheck, GError **error) {
  const RfBoot *b = rf_boot();
  RfDevConfig cfg = {.rank = b->rank,
                     .world = b->world,
                     .local = st->opt.local,
                     .device = b->local_rank,
                     .timeout_s = st->opt.timeout_s,
                     .init_timeout_s = MAX(st->opt.timeout_s, RF_REAL_INIT_TIMEOUT_S),
                     .op_delay_s = st->opt.op_delay_s,
                     .lane_comms = st->opt.lane_comms && !st->opt.local};
  /* Elastic recovery: the lost ranks stay in the MPI world (idle, they take part in the engine's
   * bookkeeping collectives) but not in the data communicator. */
  if (!st->opt.local && st->pb->nlost) {
    st->exclude = g_new(int, b->world);
    st->comm_rank = g_new(int, b->world);
    cfg.nexclude = rf_real_survivors(st->pb->lost, b->world, st->exclude, st->comm_rank);
    cfg.exclude = st->exclude;
    cfg.comm_rank = st->comm_rank;
  }
  g_autoptr(GError) mine = precheck;
  RfRealStatus s = RF_REAL_OK;
  int ngpus = st->ops->device_count && !st->opt.local ? st->ops->device_count() : -1;
  if (mine)
    s = RF_REAL_ERR_NOMEM; /* reported through mine */
  else if (ngpus == 0)
    s = RF_REAL_ERR_NODEV;
  else if (ngpus > 0 && !choose_gpu(b, ngpus, &cfg, &mine))
    s = RF_REAL_ERR_INTERNAL; /* reported through mine */
  else
    s = st->ops->open(&cfg, &st->dev);
  uint64_t failed = s != RF_REAL_OK;
  RfRealStatus ag = rf_boot_sum_u64(&failed, 1, st->opt.timeout_s);
  if (s != RF_REAL_OK || ag != RF_REAL_OK || failed) {
    if (mine)
      g_propagate_error(error, g_steal_pointer(&mine));
    else if (s == RF_REAL_ERR_NODEV)
      rf_real_set_err(error, rf_real_status_code(s),
                      "rank %d (%s): %s backend: no GPU found (the cuda backend needs one GPU per "
                      "rank)",
                      st->me, b->host, st->ops->name);
    else if (s != RF_REAL_OK)
      rf_real_set_err(error, rf_real_status_code(s), "rank %d (%s): %s backend: %s", st->me,
                      b->host, st->ops->name, rf_real_status_string(s));
    else
      g_set_error(error, RF_ERROR, RF_ERROR_PEER,
                  "rank %d: %" G_GUINT64_FORMAT " rank(s) could not start the %s backend", st->me,
                  failed, st->ops->name);
    if (st->dev) st->ops->close(st->dev, 1);
    st->dev = NULL;
    return FALSE;
  }
  if (!st->opt.local && st->ops->connect) {
    char nccl_id[2][256] = {{0}}; /* each holds an ncclUniqueId (128 bytes) */
    if (st->ops->needs_nccl_id) {
      s = rf_boot_nccl_id(nccl_id[0], sizeof nccl_id[0]);
      /* the communicator over the survivors, where NCCL cannot shrink one */
      if (s == RF_REAL_OK && cfg.nexclude) s = rf_boot_nccl_id(nccl_id[1], sizeof nccl_id[1]);
    }
    if (s == RF_REAL_OK)
      s = st->ops->connect(st->dev, st->ops->needs_nccl_id ? nccl_id[0] : NULL,
                           st->ops->needs_nccl_id && cfg.nexclude ? nccl_id[1] : NULL);
    if (s != RF_REAL_OK) {
      rf_real_set_err(error, rf_real_status_code(s), "rank %d: joining the communicator: %s",
                      st->me, rf_real_status_string(s));
      st->ops->close(st->dev, 1);
      st->dev = NULL;
      return FALSE;
    }
  }
  return TRUE;
}

/* The bytes of a local rank's shards, one bank of each side. */
static void shard_bytes(RealState *st, LRank *l) {
  const RfProblem *pb = st->pb;
  for (int k = 0; k < st->ns; k++)
    l->src_bytes +=
        (uint64_t)rf_side_buffer_elems(&pb->src, k, l->rank) * buf_esize(pb, &pb->src, k);
  for (int k = 0; k < st->nd; k++)
    l->dst_bytes +=
        (uint64_t)rf_side_buffer_elems(&pb->dst, k, l->rank) * buf_esize(pb, &pb->dst, k);
}

/* A local rank's shards (destinations once per bank) and its fill / verify lists, in backend
 * memory; nothing but the pointer tables with plan_only. */
static gboolean prepare_rank(RealState *st, LRank *l, GError **error) {
  const RfProblem *pb = st->pb;
  RfRealStatus s;
  l->src_buf = g_new0(void *, st->ns ? st->ns : 1);
  l->dst_buf[0] = g_new0(void *, st->nd ? st->nd : 1);
  l->dst_buf[1] = g_new0(void *, st->nd ? st->nd : 1);
  if (st->opt.plan_only) return TRUE;
  g_autoptr(GArray) boxes = g_array_new(FALSE, FALSE, sizeof(RfBoxDesc));
  g_autoptr(GArray) fill = g_array_new(FALSE, FALSE, sizeof(RfRun));
  g_autoptr(GArray) verify = g_array_new(FALSE, FALSE, sizeof(RfRun));
  for (int k = 0; k < st->ns; k++)
    DEVCHECK(st,
             st->ops->alloc(st->dev,
                            (uint64_t)rf_side_buffer_elems(&pb->src, k, l->rank) *
                                buf_esize(pb, &pb->src, k),
                            &l->src_buf[k]),
             "source buffer");
  for (int bank = 0; bank < st->nbanks; bank++)
    for (int k = 0; k < st->nd; k++)
      DEVCHECK(st,
               st->ops->alloc(st->dev,
                              (uint64_t)rf_side_buffer_elems(&pb->dst, k, l->rank) *
                                  buf_esize(pb, &pb->dst, k),
                              &l->dst_buf[bank][k]),
               "destination buffer");
  rf_real_side_runs(pb, &pb->src, l->rank, 0, boxes, fill);
  rf_real_side_runs(pb, &pb->dst, l->rank, st->ns, boxes, verify);
  rf_real_chunk_runs(fill, (const RfBoxDesc *)boxes->data, RF_REAL_CHUNK_BYTES);
  rf_real_chunk_runs(verify, (const RfBoxDesc *)boxes->data, RF_REAL_CHUNK_BYTES);
  l->nfill = fill->len;
  l->nverify = verify->len;
  l->boxes_dev = rf_real_upload_array(st, boxes, sizeof(RfBoxDesc), &s);
  DEVCHECK(st, s, "box table");
  l->fill_dev = rf_real_upload_array(st, fill, sizeof(RfRun), &s);
  DEVCHECK(st, s, "fill list");
  l->verify_dev = rf_real_upload_array(st, verify, sizeof(RfRun), &s);
  DEVCHECK(st, s, "verify list");
  return TRUE;
fail:
  return FALSE;
}

uint64_t rf_real_host_available_bytes(void) {
  g_autofree char *info = NULL;
  if (g_file_get_contents("/proc/meminfo", &info, NULL, NULL)) {
    const char *m = strstr(info, "MemAvailable:");
    if (m) return g_ascii_strtoull(m + strlen("MemAvailable:"), NULL, 10) << 10;
  }
  long pages = sysconf(_SC_AVPHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : UINT64_MAX;
}

gboolean rf_real_check_host_memory(int rank, uint64_t src_bytes, uint64_t dst_bytes, int banks,
                                   uint64_t available_bytes, GError **error) {
  /* sources once, destinations once per bank; saturating */
  uint64_t need = src_bytes,
           d2 = banks == 2 ? (dst_bytes > UINT64_MAX / 2 ? UINT64_MAX : 2 * dst_bytes) : dst_bytes;
  need = need > UINT64_MAX - d2 ? UINT64_MAX : need + d2;
  if (need <= available_bytes) return TRUE;
  g_set_error(error, RF_ERROR, RF_ERROR_LIMIT,
              "rank %d: the shards need %.3f GB of host memory (source %.3f + destination %s%.3f "
              "GB; `refit run --memory` adds holding and staging), %.3f GB is available",
              rank, need / 1e9, src_bytes / 1e9, banks == 2 ? "2 x " : "", dst_bytes / 1e9,
              available_bytes / 1e9);
  return FALSE;
}

gboolean rf_real_check_device_memory(int nranks, const char *what, uint64_t need_bytes,
                                     uint64_t free_bytes, GError **error) {
  if (need_bytes <= free_bytes) return TRUE;
  g_set_error(error, RF_ERROR, RF_ERROR_LIMIT,
              "--local: the %s of the %d ranks need %.3f GB of device memory, the GPU has %.3f "
              "GB free (`refit run --memory --local` prints the process total)",
              what, nranks, need_bytes / 1e9, free_bytes / 1e9);
  return FALSE;
}

/* --local on a GPU: refuse what one GPU cannot hold before allocating any of it. */
static gboolean check_local_device(RealState *st, const char *what, uint64_t need_bytes,
                                   GError **error) {
  if (!st->opt.local || st->opt.plan_only || !st->ops->mem_free) return TRUE;
  uint64_t free_bytes = 0;
  RfRealStatus s = st->ops->mem_free(st->dev, &free_bytes);
  if (s != RF_REAL_OK) {
    rf_real_set_err(error, rf_real_status_code(s), "rank %d: free device memory: %s", st->me,
                    rf_real_status_string(s));
    return FALSE;
  }
  return rf_real_check_device_memory(st->nlr, what, need_bytes, free_bytes, error);
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
  st->ns = pb->src.nbufs;
  st->nd = pb->dst.nbufs;
  st->sp_hold = st->ns + st->nd;
  st->sp_sstage = st->sp_hold + 1;
  st->sp_rstage = st->sp_hold + 2;
  st->nsp = st->sp_hold + 3;
  st->nlr = st->opt.local ? pb->nranks : 1;
  st->nbanks = st->opt.double_bank ? 2 : 1;
  st->lr = g_new0(LRank, st->nlr);
  st->lr_of_rank = g_new(int, pb->nranks);
  for (int r = 0; r < pb->nranks; r++)
    st->lr_of_rank[r] = st->opt.local ? r : (r == st->me ? 0 : -1);
  /* Host memory: refuse up front what cannot fit (every local rank's shards are in this
   * process), rather than die in an allocation. */
  uint64_t src_bytes = 0, dst_bytes = 0;
  for (int i = 0; i < st->nlr; i++) {
    LRank *l = &st->lr[i];
    l->rank = st->opt.local ? i : st->me;
    shard_bytes(st, l);
    src_bytes += l->src_bytes;
    dst_bytes += l->dst_bytes;
  }
  GError *precheck = NULL;
  if (!st->opt.plan_only && st->ops == &rf_dev_host)
    rf_real_check_host_memory(st->me, src_bytes, dst_bytes, st->nbanks,
                              rf_real_host_available_bytes(), &precheck);
  if (!open_device(st, precheck, error)) return FALSE;
  if (!check_local_device(st,
                          st->nbanks == 2 ? "shards (source + 2 x destination)"
                                          : "shards (source + destination)",
                          src_bytes + (uint64_t)st->nbanks * dst_bytes, error))
    return FALSE;
  for (int i = 0; i < st->nlr; i++)
    if (!prepare_rank(st, &st->lr[i], error)) return FALSE;
  return TRUE;
}

/* Local mode: the sends of round g (every rank of it posted) land in their receivers' staging. */
static RfRealStatus local_round_copies(RealState *st, int g) {
  RfRealStatus s = RF_REAL_OK;
  for (int i = 0; i < st->nlr; i++) {
    LRank *l = &st->lr[i];
    int k = l->local_round[g];
    if (k < 0) continue;
    const RRound *r = &l->rounds[k];
    for (guint o = 0; o < r->sends->len; o++) {
      const RfOp *op = &g_array_index(r->sends, RfOp, o);
      LRank *p = &st->lr[st->lr_of_rank[op->peer]];
      const RRound *pr = &p->rounds[p->local_round[g]];
      /* the j-th send to a peer in a round meets the peer's j-th receive from us (both lists are
       * in message order; a pipelined round may carry two messages of one pair), as NCCL and MPI
       * match them */
      guint j = 0;
      for (guint q = 0; q < o; q++)
        j += g_array_index(r->sends, RfOp, q).peer == op->peer;
      for (guint q = 0; q < pr->recvs->len; q++) {
        const RfOp *in = &g_array_index(pr->recvs, RfOp, q);
        if (in->peer != l->rank || j-- > 0) continue;
        if ((s = st->ops->peer_copy(st->dev, (char *)p->rstage + in->off,
                                    (const char *)l->sstage + op->off, op->bytes)))
          return s;
        break;
      }
    }
  }
  return s;
}

/* The bank a refit writes: the other one (double bank), or the one in service (in place). */
static int write_bank(const RealState *st) {
  return st->nbanks == 2 ? 1 - st->bank : st->bank;
}

/* Issue one operation of local rank l's program (MPI mode, or local mode once it may run). last:
 * the last refit of the run (its trace is kept, the --test-drop hook applies to it). */
static RfRealStatus issue_op(RealState *st, LRank *l, const RfSchedOp *op, gboolean last,
                             int *stuck) {
  const RRound *r = &l->rounds[l->local_round[op->round]];
  if (st->opt.trace && last) {
    RfRealTrace t = {l->rank, op->round, op->kind, op->lane};
    g_array_append_val(st->opt.trace, t);
  }
  switch ((RfSchedOpKind)op->kind) {
  case RF_SOP_PACK:
    return r->npack ? st->ops->copy(st->dev, l->bases_dev[0], r->pack_dev, r->npack, r->npack_small)
                    : RF_REAL_OK;
  case RF_SOP_POST:
    if (st->opt.local) return RF_REAL_OK; /* the caller moves the round when all ranks posted */
    return st->ops->post(st->dev, op->lane, (const RfOp *)r->sends->data, (int)r->sends->len,
                         (const RfOp *)r->recvs->data, (int)r->recvs->len, l->sstage, l->rstage);
  case RF_SOP_WAIT:
    return st->opt.local ? RF_REAL_OK : st->ops->wait(st->dev, op->lane, stuck);
  case RF_SOP_UNPACK: {
    gboolean d = last && r->unpack_drop_dev;
    uint64_t n = d ? r->nunpack_drop : r->nunpack;
    return n ? st->ops->copy(st->dev, l->bases_dev[write_bank(st)],
                             d ? r->unpack_drop_dev : r->unpack_dev, n,
                             d ? r->nunpack_drop_small : r->nunpack_small)
             : RF_REAL_OK;
  }
  }
  return RF_REAL_ERR_INTERNAL;
}

/* Local mode: every rank's program up to the end of stage k, interleaved: a rank runs until it
 * must wait for a round some rank has not posted yet; a round moves when its last rank posts.
 * pc: per local rank, its next operation; posted: per round, the ranks that posted it. */
static RfRealStatus run_stage_local(RealState *st, int k, gboolean last, int *pc, int *posted) {
  for (;;) {
    gboolean moved = FALSE, left = FALSE;
    for (int i = 0; i < st->nlr; i++) {
      LRank *l = &st->lr[i];
      while (pc[i] < l->nprog && rf_schedule_round_stage(st->sched, l->prog[pc[i]].round) <= k) {
        const RfSchedOp *op = &l->prog[pc[i]];
        if (op->kind == RF_SOP_WAIT && posted[op->round] < st->round_ranks[op->round]) break;
        RfRealStatus s = issue_op(st, l, op, last, &(int){-1});
        if (s == RF_REAL_OK && op->kind == RF_SOP_POST &&
            ++posted[op->round] == st->round_ranks[op->round])
          s = local_round_copies(st, op->round);
        if (s != RF_REAL_OK) return s;
        pc[i]++;
        moved = TRUE;
      }
      left |= pc[i] < l->nprog && rf_schedule_round_stage(st->sched, l->prog[pc[i]].round) <= k;
    }
    if (!left) return RF_REAL_OK;
    if (!moved) return RF_REAL_ERR_INTERNAL; /* every rank waits: the schedule is broken */
  }
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

static void progress_stderr(const char *strategy, const char *what, uint64_t done, uint64_t total,
                            double elapsed_s, void *user_data) {
  (void)user_data;
  fprintf(stderr, "refit run: %s: %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT " %s (%.0f s)\n",
          strategy, done, total, what, elapsed_s);
  fflush(stderr);
}

void rf_real_set_progress(RfExecutor *ex, RfRealProgressFn fn, void *user_data) {
  RealState *st = ex->state;
  st->progress = fn;
  st->progress_data = user_data;
}

/* The schedule (model/plan/schedule.h) of plan for the executor's staging bound, operation bound
 * and lanes (sizes only with plan_only): st->sched, st->stage_round0 and st->nrounds. */
typedef struct {
  RealState *st;
  const RfPlan *plan;
  gint64 t0, shown;
} ScheduleProgress;

static void on_schedule_progress(uint64_t done, uint64_t total, void *ud) {
  ScheduleProgress *p = ud;
  rf_real_progress(p->st, p->plan, "segments scheduled", done, total, p->t0, &p->shown);
}

static gboolean build_schedule(RealState *st, const RfPlan *plan, GError **error) {
  ScheduleProgress pr = {st, plan, g_get_monotonic_time(), 0};
  pr.shown = pr.t0;
  /* every strategy pipelined, as refit sim; --memory builds what its count needs */
  const unsigned flags = st->opt.plan_only
                             ? rf_memory_count_flags(st->opt.staged, st->opt.lane_comms)
                         : st->opt.staged ? 0
                                          : RF_SCHEDULE_PIPELINED;
  /* staging bound, lanes and operation bound: as given, or chosen (model/plan/staging.h) */
  RfStaging *sc = &st->spread.staging;
  rf_staging_choose(plan, &st->opt.costs, (flags & RF_SCHEDULE_PIPELINED) != 0,
                    st->opt.staging_bytes, st->opt.slots, st->opt.max_ops, sc);
  st->sched = rf_schedule_build(plan, st->pb->nranks, sc->staging_bytes, sc->max_ops, sc->slots,
                                flags, on_schedule_progress, &pr, error);
  if (!st->sched) return FALSE;
  st->stage_round0 = st->sched->stage_round0;
  st->nrounds = st->sched->nrounds;
  return TRUE;
}

/* 1. Rounds, per-rank lists and tables; the buffer sizes of the largest rank of the world. */
static gboolean build_plan(RealState *st, const RfPlan *plan, GError **error) {
  /* the schedule and the rank lists walk the plan by its messages */
  if (!rf_plan_check_messages(plan, error) || !build_schedule(st, plan, error)) return FALSE;
  const RfSchedule *sg = st->sched;
  rf_real_index_plan(st, plan);
  /* A lost rank is out of the data communicator: it must neither send nor receive. */
  for (int r = 0; st->pb->lost && r < st->pb->nranks; r++)
    if (st->pb->lost[r] && st->rank_msg_first[r + 1] > st->rank_msg_first[r]) {
      rf_real_set_err(error, RF_ERROR_VERIFY,
                      "plan: lost rank %d takes part in %" G_GUINT64_FORMAT " message(s)", r,
                      st->rank_msg_first[r + 1] - st->rank_msg_first[r]);
      return FALSE;
    }
  RfRealSpread *sp = &st->spread;
  const gint64 t0 = g_get_monotonic_time();
  gint64 shown = t0;
  uint64_t plan_bytes = 0; /* holding + staging of every local rank */
  for (int i = 0; i < st->nlr; i++) {
    LRank *l = &st->lr[i];
    rf_real_progress(st, plan, "ranks built", (uint64_t)i, (uint64_t)st->nlr, t0, &shown);
    if (!rf_real_build_rank(st, plan, sg, l, error)) return FALSE;
    const uint64_t banks_bytes = (uint64_t)st->nbanks * l->dst_bytes;
    plan_bytes += l->hold_bytes + l->sstage_bytes + l->rstage_bytes;
    sp->process_bytes += l->src_bytes + banks_bytes;
    sp->hold_bytes = MAX(sp->hold_bytes, l->hold_bytes);
    sp->staging_bytes = MAX(sp->staging_bytes, l->sstage_bytes + l->rstage_bytes);
    sp->src_bytes = MAX(sp->src_bytes, l->src_bytes);
    sp->dst_bytes = MAX(sp->dst_bytes, l->dst_bytes);
    sp->rank_bytes = MAX(sp->rank_bytes, l->src_bytes + banks_bytes + l->hold_bytes +
                                             l->sstage_bytes + l->rstage_bytes);
    if (rf_side_index(&st->pb->dst, l->rank) >= 0) { /* an inference GPU, as the model counts */
      sp->infer_alloc_bytes = MAX(sp->infer_alloc_bytes,
                                  banks_bytes + l->hold_bytes + l->sstage_bytes + l->rstage_bytes);
      sp->infer_hold_bytes = MAX(sp->infer_hold_bytes, l->hold_bytes);
      sp->infer_hold_live_bytes = MAX(sp->infer_hold_live_bytes, l->hold_live_bytes);
    }
  }
  /* the memory model (model/plan/memory.h) of this very schedule: what --memory reports */
  rf_memory_of_schedule(plan, sg, st->opt.lane_comms, &sp->memory);
  rf_memory_set_banks(&sp->memory, st->nbanks);
  sp->banks = st->nbanks;
  sp->process_bytes += plan_bytes;
  sp->process_ranks = st->nlr;
  if (!check_local_device(st, "holding stores and staging", plan_bytes, error)) return FALSE;
  for (int i = 0; i < st->nlr && !st->opt.plan_only; i++)
    if (!rf_real_rank_tables(st, &st->lr[i], error)) return FALSE;
  sp->rounds = st->nrounds;
  sp->slots = sg->slots;
  if (st->opt.local && !st->opt.plan_only) { /* ranks per round, for the local interleaving */
    st->round_ranks = g_new0(int, MAX(1, st->nrounds));
    for (int i = 0; i < st->nlr; i++)
      for (int k = 0; k < st->lr[i].nrounds; k++)
        st->round_ranks[st->lr[i].rounds[k].round]++;
  }
  return TRUE;
}

/* The largest rank of the world (exact: sizes are far below 2^53). */
static gboolean world_sizes(RealState *st, GError **error) {
  RfRealSpread *sp = &st->spread;
  double v[8] = {(double)sp->hold_bytes,       (double)sp->staging_bytes,
                 (double)sp->src_bytes,        (double)sp->dst_bytes,
                 (double)sp->rank_bytes,       (double)sp->infer_alloc_bytes,
                 (double)sp->infer_hold_bytes, (double)sp->infer_hold_live_bytes};
  if (!st->opt.local && rf_boot_max_double(v, 8, st->opt.timeout_s) != RF_REAL_OK) {
    rf_real_set_err(error, RF_ERROR_PEER,
                    "rank %d: exchanging buffer sizes failed (a peer stopped)", st->me);
    return FALSE;
  }
  sp->hold_bytes = (uint64_t)v[0];
  sp->staging_bytes = (uint64_t)v[1];
  sp->src_bytes = (uint64_t)v[2];
  sp->dst_bytes = (uint64_t)v[3];
  sp->rank_bytes = (uint64_t)v[4];
  sp->infer_alloc_bytes = (uint64_t)v[5];
  sp->infer_hold_bytes = (uint64_t)v[6];
  sp->infer_hold_live_bytes = (uint64_t)v[7];
  return TRUE;
}

/* Does plan stage k carry the phase named kind ("fanout")? */
static gboolean stage_has_kind(const RfPlan *plan, int k, const char *kind) {
  unsigned mask = stage_mask(plan, k);
  for (int p = 0; p < RF_PHASE_COUNT; p++)
    if ((mask & (1u << p)) && !strcmp(rf_phase_name((RfPhase)p), kind)) return TRUE;
  return FALSE;
}

/* Test hook (--test-fail): this rank fails at stage k (by index, or the first stage of a kind).
 * It stops responding at the stage's start in the first refit, or with fail_kill it dies by
 * SIGKILL after its first round of the stage (mid-stage: before the first of its rounds past the
 * stage's first round, or at the stage's end) in the last refit, so that the bank in service holds
 * the step before. round is the stage's round about to run. */
static void maybe_fail(RealState *st, const RfPlan *plan, int k, int round, gboolean last) {
  if (st->opt.local || st->me != st->opt.fail_rank) return;
  g_autofree char *lab = stage_label(plan, k);
  gboolean at =
      st->opt.fail_label ? stage_has_kind(plan, k, st->opt.fail_label) : k == st->opt.fail_stage;
  for (int j = 0; at && st->opt.fail_label && j < k; j++) /* only the first stage of that kind */
    at = !stage_has_kind(plan, j, st->opt.fail_label);
  if (!at) return;
  int nrounds = st->stage_round0[k + 1] - st->stage_round0[k];
  if (st->opt.fail_kill) {
    if (st->sched->pipelined) return; /* maybe_fail_pipelined, at the round */
    if (!last || round < st->stage_round0[k] + (nrounds > 1 ? 1 : 0)) return;
    fprintf(stderr, "refit run: rank %d: stage %d (%s): injected failure, this rank is killed\n",
            st->me, k, lab);
    fflush(stderr);
    kill(getpid(), SIGKILL);
  }
  if (round != st->stage_round0[k]) return; /* the stage start of the first refit reaching it */
  fprintf(stderr,
          "refit run: rank %d: stage %d (%s): injected failure, this rank stops responding\n",
          st->me, k, lab);
  fflush(stderr);
  g_usleep((gulong)(st->opt.timeout_s * 4e6));
  _exit(3);
}

/* The same hook for a pipelined schedule, whose stages share rounds: the rank fails at the pack
 * of a round of its that carries a stage of the kind (any stage of it: a rank may take part in
 * the second hop of a broadcast and not the first; or the stage of that index), past its first
 * such round (or at its only one): mid-stage. A rank with no such round does not fail. k: the
 * local round. */
static void maybe_fail_pipelined(RealState *st, const RfPlan *plan, const LRank *l, int k,
                                 gboolean last) {
  if (st->opt.local || st->me != st->opt.fail_rank || !st->opt.fail_kill || !last) return;
  uint32_t bits = 0; /* the stages of that kind (or the index), as stage_mask keeps them */
  for (int j = 0; j < plan->nstages; j++)
    if (st->opt.fail_label ? stage_has_kind(plan, j, st->opt.fail_label) : j == st->opt.fail_stage)
      bits |= 1u << MIN(j, 31);
  if (!(l->rounds[k].stage_mask & bits)) return;
  int first = -1, later = 0; /* the rank's first such round, and the ones after it */
  for (int j = 0; j < l->nrounds; j++)
    if (l->rounds[j].stage_mask & bits) {
      if (first < 0) first = j;
      later += j > k;
    }
  if (k == first && later) return; /* past its first round of the stage: mid-stage */
  int stage = 0; /* the first stage of that kind in the round (bit 31: the 32nd or a later) */
  while (!((l->rounds[k].stage_mask & bits) >> stage & 1u))
    stage++;
  g_autofree char *lab = stage_label(plan, stage);
  fprintf(stderr, "refit run: rank %d: stage %d (%s): injected failure, this rank is killed\n",
          st->me, stage, lab);
  fflush(stderr);
  kill(getpid(), SIGKILL);
}

/* 2. One refit of training step `step`: fill (untimed), barrier, every stage's rounds, wait;
 * since[1 + k] is the end of stage k on this rank. FALSE: the communicator must be aborted. */
static gboolean one_refit(RealState *st, const RfPlan *plan, uint64_t step, gboolean last,
                          double *since, GError **error) {
  const int nst = plan->nstages;
  RfRealStatus s;
  for (int i = 0; i < st->nlr; i++) {
    LRank *l = &st->lr[i];
    if (l->nfill &&
        (s = st->ops->fill(st->dev, l->bases_dev[0], l->fill_dev, l->nfill, l->boxes_dev, step))) {
      rf_real_set_err(error, rf_real_status_code(s), "rank %d: fill: %s", st->me,
                      rf_real_status_string(s));
      return FALSE;
    }
  }
  for (int i = 0; st->pb->quant && i < st->nlr; i++) /* host only: cmd_run checks */
    rf_real_quant_fill(st->pb, st->lr[i].rank, st->lr[i].src_buf, step);
  /* wait for the fill: it is not part of the refit */
  if ((s = st->ops->mark(st->dev, 0)) || (s = st->ops->finish(st->dev, 1, since, &(int){0}))) {
    rf_real_set_err(error, rf_real_status_code(s), "rank %d: fill: %s", st->me,
                    rf_real_status_string(s));
    return FALSE;
  }
  s = rf_boot_barrier(st->opt.timeout_s);
  if (s != RF_REAL_OK) {
    rf_real_set_err(error, rf_real_status_code(s),
                    "rank %d: barrier before step %" G_GUINT64_FORMAT
                    ": %s (a peer failed before it)",
                    st->me, step, rf_real_status_string(s));
    return FALSE;
  }
  /* In place: from here the refit writes the served buffers (generation is paused): the bank is
   * stale, not to be served, until this step is verified. */
  if (st->nbanks == 1) {
    st->have_prev = FALSE;
    st->stale = TRUE;
    st->writing_step = step;
  }
  /* every rank's program, stage by stage (a rank's program drains each stage before the next) */
  g_autofree int *pc = g_new0(int, st->nlr);
  g_autofree int *posted = st->opt.local ? g_new0(int, MAX(1, st->nrounds)) : NULL;
  for (int k = -1; k < nst; k++) {
    if (k >= 0) {
      int stuck = -1;
      s = RF_REAL_OK;
      if (st->opt.local) {
        s = run_stage_local(st, k, last, pc, posted);
      } else {
        LRank *l = &st->lr[0];
        maybe_fail(st, plan, k, st->stage_round0[k], last);
        while (s == RF_REAL_OK && pc[0] < l->nprog &&
               rf_schedule_round_stage(st->sched, l->prog[pc[0]].round) <= k) {
          const RfSchedOp *op = &l->prog[pc[0]++];
          if (op->kind == RF_SOP_PACK && st->sched->pipelined)
            maybe_fail_pipelined(st, plan, l, l->local_round[op->round], last);
          else if (op->kind == RF_SOP_PACK)
            maybe_fail(st, plan, k, op->round, last);
          s = issue_op(st, l, op, last, &stuck);
        }
        if (s == RF_REAL_OK && !st->sched->pipelined)
          maybe_fail(st, plan, k, st->stage_round0[k + 1] - 1, last);
      }
      if (s != RF_REAL_OK) {
        g_autofree char *lab = stage_label(plan, k);
        g_autofree char *who = stuck >= 0 ? g_strdup_printf("rank %d", stuck) : g_strdup("a peer");
        if (s == RF_REAL_ERR_TIMEOUT)
          rf_real_set_err(error, RF_ERROR_TIMEOUT,
                          "rank %d: stage %d (%s): no progress for %.1f s, waiting on %s; "
                          "communicator aborted",
                          st->me, k, lab, st->opt.timeout_s, who);
        else
          rf_real_set_err(error, rf_real_status_code(s),
                          "rank %d: stage %d (%s): %s; communicator aborted", st->me, k, lab,
                          rf_real_status_string(s));
        return FALSE;
      }
    }
    if ((s = st->ops->mark(st->dev, k + 1))) {
      rf_real_set_err(error, rf_real_status_code(s), "rank %d: timer: %s", st->me,
                      rf_real_status_string(s));
      return FALSE;
    }
  }
  int done = 0;
  s = st->ops->finish(st->dev, nst + 1, since, &done);
  if (s != RF_REAL_OK) {
    int k = MAX(0, MIN(nst - 1, done - 1));
    g_autofree char *lab = stage_label(plan, k);
    rf_real_set_err(error, rf_real_status_code(s),
                    "rank %d: stage %d (%s) did not complete: %s after %.1f s, waiting on a "
                    "peer; communicator aborted",
                    st->me, k, lab, rf_real_status_string(s), st->opt.timeout_s);
    return FALSE;
  }
  return TRUE;
}

/* 3. Count wrong elements of the bank just written (step) and, double bank, of the bank in
 * service (the previous step), summed over the world into w[0], w[1] (in place: w[1] = 0, the
 * one bank is the one written). */
static gboolean verify_banks(RealState *st, uint64_t step, uint64_t w[2], GError **error) {
  w[0] = w[1] = 0;
  const int nb = write_bank(st);
  for (int i = 0; i < st->nlr; i++) {
    LRank *l = &st->lr[i];
    uint64_t n = 0;
    if (st->pb->quant) {
      w[0] += rf_real_quant_verify(st->pb, l->rank, l->dst_buf[nb], step);
      if (st->have_prev)
        w[1] += rf_real_quant_verify(st->pb, l->rank, l->dst_buf[st->bank], st->prev_step);
    }
    if (!l->nverify) continue;
    DEVCHECK(st,
             st->ops->verify(st->dev, l->bases_dev[nb], l->verify_dev, l->nverify, l->boxes_dev,
                             step, &n),
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
  return TRUE;
fail:
  return FALSE;
}

/* In place, after a failed refit: what this rank leaves (checked locally, nothing collective),
 * at the end of the error's message: its weights are stale (written part-way, not served: the
 * generation stays paused) and its training shards still hold the step, checked against the
 * pattern, so that the refit can be retried from them. */
static void note_in_place(RealState *st, GError **error) {
  GString *m = g_string_new((*error)->message);
  uint64_t wrong = 0, n = 0;
  gboolean infer = FALSE, train = FALSE, checked = !st->pb->quant;
  for (int i = 0; i < st->nlr; i++) {
    LRank *l = &st->lr[i];
    infer |= l->nverify > 0;
    train |= l->nfill > 0;
    if (l->nfill && checked) /* the fill runs describe the source shards */
      checked = st->ops->verify(st->dev, l->bases_dev[0], l->fill_dev, l->nfill, l->boxes_dev,
                                st->writing_step, &n) == RF_REAL_OK;
    wrong += n;
  }
  if (infer)
    g_string_append_printf(m,
                           "; weights: in place, step %" G_GUINT64_FORMAT
                           " incomplete: marked stale, not served (generation stays paused)",
                           st->writing_step);
  if (train && checked)
    g_string_append_printf(m,
                           "; training shards: step %" G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT
                           " wrong elements (the refit is retried from them)",
                           st->writing_step, wrong);
  else if (train)
    g_string_append(m, "; training shards: could not be checked");
  g_free((*error)->message);
  (*error)->message = g_string_free(m, FALSE);
}

/* After a failed refit: say whether this rank's bank in service still holds the previous step
 * (double bank) or what in place leaves (note_in_place), checked locally, nothing collective, at
 * the end of the error's message. */
static void note_bank_in_service(RealState *st, GError **error) {
  if (!error || !*error) return;
  if (st->nbanks == 1 && st->stale) {
    note_in_place(st, error);
    return;
  }
  if (!st->have_prev) return;
  uint64_t wrong = 0, n = 0;
  gboolean checked = TRUE;
  for (int i = 0; i < st->nlr && checked; i++) {
    LRank *l = &st->lr[i];
    if (!l->nverify) continue;
    checked = st->ops->verify(st->dev, l->bases_dev[st->bank], l->verify_dev, l->nverify,
                              l->boxes_dev, st->prev_step, &n) == RF_REAL_OK;
    wrong += n;
  }
  char *m = checked
                ? g_strdup_printf("%s; bank in service: step %" G_GUINT64_FORMAT
                                  ", %" G_GUINT64_FORMAT " wrong elements",
                                  (*error)->message, st->prev_step, wrong)
                : g_strdup_printf("%s; bank in service: could not be checked", (*error)->message);
  g_free((*error)->message);
  (*error)->message = m;
}

/* 4. One result stage per label, spanning the plan stages that carry it (as the simulator
 * reports them): from the end of the stage before its first to the end of its last. ends holds
 * `timed` rows of nstages stage ends. */
static void summarize(RealState *st, const RfPlan *plan, const double *ends, int timed,
                      RfResult *out) {
  const int nst = plan->nstages;
  g_autofree unsigned *mask = g_new(unsigned, nst);
  uint64_t lbytes[RF_PHASE_COUNT] = {0};
  for (int k = 0; k < nst; k++)
    mask[k] = stage_mask(plan, k);
  for (uint64_t t = 0; t < plan->nxfers; t++)
    lbytes[plan->xfers[t].phase] += plan->pieces[plan->xfers[t].piece].bytes;
  g_autofree double *t0 = g_new(double, timed);
  g_autofree double *t1 = g_new(double, timed);
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
}

static gboolean real_run(RfExecutor *ex, const RfPlan *plan, RfResult *out, GError **error) {
  RealState *st = ex->state;
  const int nst = plan->nstages;
  /* both are int: the sum (and ends' size below) in 64 bits */
  const int64_t total_it = (int64_t)st->opt.warmup + st->opt.iters;
  gboolean ok = FALSE;
  g_autofree double *ends = NULL;
  g_autofree double *since = g_new0(double, nst + 1);
  int timed = 0;
  memset(out, 0, sizeof *out);
  out->executor = g_strdup_printf("real:%s", st->ops->name);
  out->strategy = plan->strategy;
  out->lower_bound_s = plan->stats.lower_bound_s;
  spread_clear(&st->spread);
  if (!st->dev) {
    rf_real_set_err(error, RF_ERROR_INPUT, "real executor: run without a successful prepare");
    goto out;
  }
  if (plan->problem != st->pb) {
    rf_real_set_err(error, RF_ERROR_VERIFY,
                    "real executor: the plan is for another problem than the prepared one");
    goto out;
  }
  if (!build_plan(st, plan, error)) goto out;
  if (!world_sizes(st, error)) goto abort;
  if (st->opt.plan_only) {
    ok = TRUE;
    goto out;
  }
  /* --lane-comms: a communicator per lane, made by every rank here (the lane count is the
   * schedule's, the same on every rank, and every rank passed world_sizes' collective above) */
  if (st->opt.lane_comms && !st->opt.local && st->ops->lanes) {
    RfRealStatus s = st->ops->lanes(st->dev, st->sched->slots);
    if (s != RF_REAL_OK) {
      rf_real_set_err(error, rf_real_status_code(s), "rank %d: lane communicators (%d lanes): %s",
                      st->me, st->sched->slots, rf_real_status_string(s));
      goto abort;
    }
  }
  /* stage ends of every timed refit (iters <= RF_REAL_MAX_ITERS) */
  ends = g_new0(double, (size_t)MAX(1, st->opt.iters) * MAX(1, nst));
  for (int64_t it = 0; it < total_it; it++) {
    uint64_t step = st->step++;
    uint64_t w[2];
    if (!one_refit(st, plan, step, it == total_it - 1, since, error)) goto abort;
    if (!verify_banks(st, step, w, error)) goto out;
    if (rf_boot_sum_u64(w, 2, st->opt.timeout_s) != RF_REAL_OK ||
        rf_boot_max_double(since + 1, nst, st->opt.timeout_s) != RF_REAL_OK) {
      rf_real_set_err(error, RF_ERROR_PEER,
                      "rank %d: result exchange after step %" G_GUINT64_FORMAT " failed", st->me,
                      step);
      goto abort;
    }
    if (it >= st->opt.warmup) memcpy(ends + (size_t)timed++ * nst, since + 1, sizeof(double) * nst);
    st->spread.wrong_new = w[0];
    st->spread.wrong_old = w[1];
    /* double bank: the previous weights stay the served ones; in place: the bank stays stale */
    if (w[0] || w[1]) break;
    st->bank = write_bank(st);
    st->prev_step = step;
    st->have_prev = TRUE;
    st->stale = FALSE;
  }
  st->spread.serving = st->have_prev;
  st->spread.served_step = st->prev_step;
  out->wrong_elements = st->spread.wrong_new + st->spread.wrong_old;
  st->spread.iters = timed;
  if (timed > 0 && nst > 0) summarize(st, plan, ends, timed, out);
  ok = TRUE;
  goto out;
abort:
  /* First tear the communicator down: the check below queues behind groups that only an abort
   * ends (an NCCL kernel waiting on a dead peer). */
  if (st->ops->cancel) st->ops->cancel(st->dev);
  note_bank_in_service(st, error);
  /* A peer may be stuck in a group with us: tear the communicator down, do not wait. */
  st->ops->close(st->dev, 1);
  st->dev = NULL;
out:
  rf_real_free_plan(st);
  return ok;
}

static void real_destroy(RfExecutor *ex) {
  if (!ex) return;
  RealState *st = ex->state;
  if (st) {
    rf_real_free_plan(st);
    for (int i = 0; i < st->nlr && st->dev; i++) {
      LRank *l = &st->lr[i];
      if (!l->src_buf) continue; /* prepare stopped before this rank */
      for (int k = 0; k < st->ns; k++)
        st->ops->release(st->dev, l->src_buf[k]);
      for (int b = 0; b < st->nbanks; b++)
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
    g_free(st->exclude);
    g_free(st->comm_rank);
    spread_clear(&st->spread);
    g_free(st->opt.backend);
    g_free(st->opt.fail_label);
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
      rf_real_set_err(
          error, RF_ERROR_INPUT,
          "the cuda backend is not built (CUDA or NCCL was not found at configure time)");
    else
      rf_real_set_err(error, RF_ERROR_INPUT, "unknown backend '%s' (host, cuda)",
                      opt->backend ? opt->backend : "");
    return NULL;
  }
  if ((opt->staging_bytes && opt->staging_bytes < STAGE_ALIGN) ||
      (opt->max_ops < 2 && opt->max_ops != RF_SCHEDULE_AUTO_OPS) || opt->iters < 1 ||
      opt->warmup < 0 || !(opt->timeout_s > 0) || opt->slots < 0 ||
      opt->slots > RF_SCHEDULE_MAX_SLOTS || !(opt->op_delay_s >= 0)) {
    rf_real_set_err(
        error, RF_ERROR_INPUT,
        "real executor: staging >= %u bytes (or 0), max ops >= 2 (or 0), slots 0..%d, iters >= 1, "
        "warmup >= 0 and timeout > 0 are required",
        STAGE_ALIGN, RF_SCHEDULE_MAX_SLOTS);
    return NULL;
  }
  if (opt->iters > RF_REAL_MAX_ITERS || opt->warmup > RF_REAL_MAX_ITERS) {
    rf_real_set_err(error, RF_ERROR_LIMIT,
                    "real executor: iters %d and warmup %d: each must be at most %d", opt->iters,
                    opt->warmup, RF_REAL_MAX_ITERS);
    return NULL;
  }
  RealState *st = g_new0(RealState, 1);
  st->opt = *opt;
  st->opt.backend = g_strdup(opt->backend);
  st->opt.fail_label = g_strdup(opt->fail_label);
  st->ops = ops;
  st->progress = progress_stderr;
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
