/* CUDA backend: device memory, pack / unpack / fill / verify kernels, grouped NCCL send / recv on
 * a non-blocking communicator, CUDA events for timing. Copies (pack, unpack, fill, verify) are
 * queued on the copy stream, groups on the communication stream; events order the two (a group
 * after the copies queued before it, a lane's wait before the copies queued after it), so that
 * copies overlap the groups in flight. The host only waits in finish() and verify(), and never
 * without a timeout while peers are involved.
 *
 * Lane communicators (cfg.lane_comms, refit run --lane-comms): lane 0 keeps the data communicator
 * and the communication stream; lanes 1 .. slots - 1 each get a communicator split from it
 * (ncclCommSplit, one color, keys in rank order) and a stream of their own, so that the groups of
 * different lanes run at the same time and one lane's first-byte latency hides behind another
 * lane's bytes. Why this cannot deadlock:
 * - each communicator sees its groups in one order on every rank: every rank issues its rounds in
 *   ascending order (the schedule's program), a lane's rounds are a subsequence of them, and a
 *   round is posted on the same lane by every rank taking part (its lane is a function of the
 *   round alone: rf_schedule_lane);
 * - on one communicator the groups stay in order on the lane's stream, as they did on the one
 *   stream before; across communicators nothing waits on another lane's group except through the
 *   copy stream (a pack or unpack waits for the group whose data it needs), and that group was
 *   posted earlier on every rank, in the same order;
 * - the NCCL user guide ("Using multiple NCCL communicators concurrently") asks that operations
 *   on several communicators be issued in a consistent order across ranks, which the program
 *   does (one thread, the same program order on every rank), and that the kernels running at
 *   once fit on the GPU: p2p groups use a few blocks each (one or two per channel), a few lanes
 *   of them beside the copy kernels fit. The copy kernels run at a lower priority than every
 *   communication stream, so they never hold the SMs an NCCL kernel waits for.
 * Nothing here depends on NCCL_LAUNCH_ORDER_IMPLICIT (an NCCL environment variable of NCCL >= 2.26,
 * not a symbol of nccl.h: 2.28.9 here has none by that name).
 *
 * Compiled only when CUDA and NCCL are found (real/CMakeLists.txt). */
#include <cuda_runtime.h>
#include <nccl.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RF_PATTERN_FN static __host__ __device__ inline
#include "backend.h"
#include "pattern.h"

struct RfDev {
  RfDevConfig cfg;
  int device;
  char host[64];
  cudaStream_t stream;  /* copies, fill, verify, timing marks */
  cudaStream_t cstream; /* NCCL groups, at the greatest priority: copy grids wait, not NCCL */
  cudaEvent_t copied;   /* the copies queued before a group */
  cudaEvent_t lane_done[RF_REAL_MAX_LANES];
  ncclComm_t comm;
  /* lane_comms: lanes 1 .. nlanes - 1 on lcomm[lane] and lstream[lane] ([0] unused: comm and
   * cstream); nlanes 0 until lanes() made them */
  ncclComm_t lcomm[RF_REAL_MAX_LANES];
  cudaStream_t lstream[RF_REAL_MAX_LANES];
  int nlanes;
  cudaEvent_t *ev;
  int nev;
  /* One event per group posted since mark 0 (a pool of ngcap): finish() counts each completed
   * group as progress, so that a long pipelined refit is not taken for a hang. */
  cudaEvent_t *gev;
  int ngev, ngcap, gdone;
  cudaEvent_t synced; /* verify's end, polled with a timeout */
  unsigned long long *wrong_dev;
  unsigned long long *wrong_host; /* pinned: an asynchronous copy lands there */
  int blocking; /* rf_real_nccl_blocking(): REFIT_NCCL_BLOCKING=1, a measurement hook */
};

#define CUDACHECK(d, cmd)                                                                          \
  do {                                                                                             \
    cudaError_t e_ = (cmd);                                                                        \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "%s %d %s:%d '%s'\n", (d)->host, (d)->cfg.rank, __FILE__, __LINE__,          \
              cudaGetErrorString(e_));                                                             \
      return RF_REAL_ERR_CUDA;                                                                     \
    }                                                                                              \
  } while (0)

#define NCCLCHECK(d, cmd)                                                                          \
  do {                                                                                             \
    ncclResult_t r_ = (cmd);                                                                       \
    if (r_ != ncclSuccess && r_ != ncclInProgress) {                                               \
      fprintf(stderr, "%s %d %s:%d '%s'\n", (d)->host, (d)->cfg.rank, __FILE__, __LINE__,          \
              ncclGetErrorString(r_));                                                             \
      return RF_REAL_ERR_NCCL;                                                                     \
    }                                                                                              \
  } while (0)

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Between polls: spin for the first POLL_SPIN_S (a group or a stage usually completes within
 * microseconds, and usleep(20) really sleeps 60 us or more), then sleep briefly. */
#define POLL_SPIN_S 200e-6
static void poll_pause(double waited_s) {
  if (waited_s >= POLL_SPIN_S) usleep(20);
}

/* A non-blocking communicator answers ncclInProgress while it works in the background: poll it
 * with a deadline, so that a dead peer cannot hang us. */
static RfRealStatus nccl_wait_comm(RfDev *d, ncclComm_t comm, double timeout_s) {
  double t0 = now_s();
  for (;;) {
    ncclResult_t st = ncclSuccess;
    NCCLCHECK(d, ncclCommGetAsyncError(comm, &st));
    if (st == ncclSuccess) return RF_REAL_OK;
    if (st != ncclInProgress) {
      fprintf(stderr, "%s %d %s:%d '%s'\n", d->host, d->cfg.rank, __FILE__, __LINE__,
              ncclGetErrorString(st));
      return RF_REAL_ERR_NCCL;
    }
    double waited = now_s() - t0;
    if (waited > timeout_s) return RF_REAL_ERR_TIMEOUT;
    poll_pause(waited);
  }
}

/* A group's enqueue: the stage timeout. */
static RfRealStatus nccl_wait(RfDev *d, ncclComm_t comm) {
  return nccl_wait_comm(d, comm, d->cfg.timeout_s);
}

/* The communicator and stream of a lane's groups: its own with lane_comms, else the data
 * communicator's; NULL comm: none made for it (an excluded rank, or lanes() not called). */
static ncclComm_t lane_comm(const RfDev *d, int lane) {
  return d->cfg.lane_comms && lane > 0 ? (lane < d->nlanes ? d->lcomm[lane] : NULL) : d->comm;
}
static cudaStream_t lane_stream(const RfDev *d, int lane) {
  return d->cfg.lane_comms && lane > 0 && lane < d->nlanes ? d->lstream[lane] : d->cstream;
}

/* A failed cudaGetDeviceCount, in full: "no GPU" is also what a driver older than the toolkit
 * answers (cudaErrorInsufficientDriver), so name the error and both versions. */
static void report_device_error(const char *host, int rank, cudaError_t e) {
  int drv = 0, rt = 0;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  char who[96];
  if (rank >= 0)
    snprintf(who, sizeof who, "%s %d", host, rank);
  else
    snprintf(who, sizeof who, "%s", host);
  if (!drv) /* no driver loaded: cudaDriverGetVersion answers 0 */
    fprintf(stderr, "%s: cudaGetDeviceCount: '%s' (no CUDA driver loaded; runtime %d.%d)\n", who,
            cudaGetErrorString(e), rt / 1000, rt % 1000 / 10);
  else
    fprintf(stderr,
            "%s: cudaGetDeviceCount: '%s' (CUDA driver supports %d.%d, runtime is %d.%d%s)\n", who,
            cudaGetErrorString(e), drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10,
            drv < rt ? ": the driver is older than the toolkit" : "");
  cudaGetLastError();
}

static int cuda_device_count(void) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    char host[64];
    if (gethostname(host, sizeof host) != 0) strcpy(host, "localhost");
    host[sizeof host - 1] = '\0';
    report_device_error(host, -1, e); /* also clears it for the kernel checks that follow */
    return 0;
  }
  return n;
}

static RfRealStatus cuda_open(const RfDevConfig *cfg, RfDev **out) {
  *out = NULL;
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  RfDev *d = (RfDev *)calloc(1, sizeof *d);
  if (!d) return RF_REAL_ERR_NOMEM;
  d->cfg = *cfg;
  d->blocking = rf_real_nccl_blocking();
  if (gethostname(d->host, sizeof d->host) != 0) strcpy(d->host, "localhost");
  d->host[sizeof d->host - 1] = '\0';
  *out = d;
  if (e != cudaSuccess) report_device_error(d->host, cfg->rank, e);
  if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || (e == cudaSuccess && n == 0))
    return RF_REAL_ERR_NODEV;
  CUDACHECK(d, e);
  /* The engine checked the node's ranks against the GPUs (rf_real_check_gpus): no wrap-around,
   * two ranks on one GPU would only show up as an NCCL error when joining. */
  if (!cfg->local && (cfg->device < 0 || cfg->device >= n)) {
    fprintf(stderr, "%s %d: node-local rank %d but %d GPU(s) visible\n", d->host, cfg->rank,
            cfg->device, n);
    return RF_REAL_ERR_NODEV;
  }
  d->device = cfg->local ? 0 : cfg->device;
  CUDACHECK(d, cudaSetDevice(d->device));
  CUDACHECK(d, cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking));
  /* Copy grids of up to 65,535 blocks fill every SM: NCCL's kernels must be scheduled first
   * (the numerically lowest priority is the greatest). */
  int least = 0, greatest = 0;
  CUDACHECK(d, cudaDeviceGetStreamPriorityRange(&least, &greatest));
  CUDACHECK(d, cudaStreamCreateWithPriority(&d->cstream, cudaStreamNonBlocking, greatest));
  CUDACHECK(d, cudaEventCreateWithFlags(&d->copied, cudaEventDisableTiming));
  CUDACHECK(d, cudaEventCreateWithFlags(&d->synced, cudaEventDisableTiming));
  CUDACHECK(d, cudaMallocHost((void **)&d->wrong_host, sizeof *d->wrong_host));
  for (int i = 0; i < RF_REAL_MAX_LANES; i++)
    CUDACHECK(d, cudaEventCreateWithFlags(&d->lane_done[i], cudaEventDisableTiming));
  CUDACHECK(d, cudaMalloc((void **)&d->wrong_dev, sizeof *d->wrong_dev));
  return RF_REAL_OK;
}

static RfRealStatus comm_init(RfDev *d, const void *id, int nranks, int rank, ncclComm_t *out) {
  ncclUniqueId uid;
  memcpy(&uid, id, sizeof uid);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = d->blocking;
  NCCLCHECK(d, ncclCommInitRankConfig(out, nranks, uid, rank, &config));
  return nccl_wait_comm(d, *out, d->cfg.init_timeout_s);
}

/* Release a communicator nothing is queued on (non-blocking: finalize may answer in progress);
 * a failure is reported on stderr, and the communicator aborted. */
static RfRealStatus comm_release(RfDev *d, ncclComm_t comm) {
  RfRealStatus s = RF_REAL_OK;
  ncclResult_t r = ncclCommFinalize(comm);
  if (r == ncclInProgress)
    s = nccl_wait_comm(d, comm, d->cfg.init_timeout_s);
  else if (r != ncclSuccess)
    s = RF_REAL_ERR_NCCL;
  if (s != RF_REAL_OK)
    fprintf(stderr, "%s %d: ncclCommFinalize: %s%s%s; communicator aborted\n", d->host, d->cfg.rank,
            s == RF_REAL_ERR_TIMEOUT ? "no answer within the set-up timeout" : "'",
            s == RF_REAL_ERR_TIMEOUT ? "" : ncclGetErrorString(r),
            s == RF_REAL_ERR_TIMEOUT ? "" : "'");
  if (s == RF_REAL_OK)
    ncclCommDestroy(comm);
  else
    ncclCommAbort(comm);
  return s;
}

/* Which recovery path this build takes, for the log and the docs. */
#ifndef RF_NCCL_SHRINK /* -DRF_NCCL_SHRINK=0 builds the other path (a compile check) */
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
#define RF_NCCL_SHRINK 1
#else
#define RF_NCCL_SHRINK 0
#endif
#endif

static RfRealStatus cuda_connect(RfDev *d, const void *id, const void *id2) {
  const RfDevConfig *c = &d->cfg;
  RfRealStatus s = comm_init(d, id, c->world, c->rank, &d->comm);
  if (s != RF_REAL_OK || !c->nexclude) return s;
  /* Elastic recovery: the communicator over the world exists (as before the failure); leave the
   * lost ranks out of it. */
  const int mine = c->comm_rank[c->rank];
  const int survivors = c->world - c->nexclude;
  ncclComm_t world = d->comm;
  d->comm = NULL;
  if (mine == 0)
    fprintf(stderr,
            "refit run: elastic recovery: %d lost rank(s) excluded: %s over %d survivors "
            "(NCCL %d.%d.%d)\n",
            c->nexclude,
            RF_NCCL_SHRINK ? "ncclCommShrink of the world communicator"
                           : "no ncclCommShrink before NCCL 2.27: communicator destroyed and "
                             "created again",
            survivors, NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
#if RF_NCCL_SHRINK
  (void)id2;
  if (mine >= 0) { /* the excluded ranks do not take part in the shrink */
    int *ex = (int *)malloc(sizeof(int) * c->nexclude);
    if (!ex) return RF_REAL_ERR_NOMEM;
    memcpy(ex, c->exclude, sizeof(int) * c->nexclude);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = d->blocking;
    ncclResult_t r = ncclCommShrink(world, ex, c->nexclude, &d->comm, &config, NCCL_SHRINK_DEFAULT);
    free(ex);
    if (r != ncclSuccess && r != ncclInProgress) {
      fprintf(stderr, "%s %d %s:%d '%s'\n", d->host, c->rank, __FILE__, __LINE__,
              ncclGetErrorString(r));
      ncclCommAbort(world);
      d->comm = NULL;
      return RF_REAL_ERR_NCCL;
    }
    s = nccl_wait_comm(d, d->comm, c->init_timeout_s);
  }
  RfRealStatus s2 = comm_release(d, world);
  return s != RF_REAL_OK ? s : s2;
#else
  (void)survivors;
  s = comm_release(d, world);
  if (s == RF_REAL_OK && mine >= 0) s = comm_init(d, id2, survivors, mine, &d->comm);
  return s;
#endif
}

static void cuda_close(RfDev *d, int abort) {
  if (!d) return;
  /* the lane communicators first: they were split from the data communicator */
  for (int i = 1; i < d->nlanes; i++)
    if (d->lcomm[i]) {
      if (abort)
        ncclCommAbort(d->lcomm[i]);
      else
        comm_release(d, d->lcomm[i]);
      d->lcomm[i] = NULL;
    }
  if (d->comm) {
    if (abort)
      ncclCommAbort(d->comm);
    else /* finalize flushes pending work; a failure is reported (and the communicator aborted) */
      comm_release(d, d->comm);
  }
  /* Also after an abort (and on the open / connect failure path): ncclCommAbort has stopped
   * NCCL's kernels, so nothing on the stream waits for a peer any more. */
  for (int i = 0; i < d->nev; i++)
    cudaEventDestroy(d->ev[i]);
  free(d->ev);
  for (int i = 0; i < d->ngcap; i++)
    cudaEventDestroy(d->gev[i]);
  free(d->gev);
  if (d->copied) cudaEventDestroy(d->copied);
  if (d->synced) cudaEventDestroy(d->synced);
  if (d->wrong_host) cudaFreeHost(d->wrong_host);
  for (int i = 0; i < RF_REAL_MAX_LANES; i++)
    if (d->lane_done[i]) cudaEventDestroy(d->lane_done[i]);
  if (d->wrong_dev) cudaFree(d->wrong_dev);
  for (int i = 1; i < d->nlanes; i++)
    if (d->lstream[i]) cudaStreamDestroy(d->lstream[i]);
  if (d->cstream) cudaStreamDestroy(d->cstream);
  if (d->stream) cudaStreamDestroy(d->stream);
  cudaGetLastError(); /* whatever failed here is not the next run's error */
  free(d);
}

/* After a failure: NCCL's kernels stop, so the streams drain and a local verify can run. */
static void cuda_cancel(RfDev *d) {
  if (!d) return;
  for (int i = 1; i < d->nlanes; i++)
    if (d->lcomm[i]) {
      ncclCommAbort(d->lcomm[i]);
      d->lcomm[i] = NULL;
    }
  if (!d->comm) return;
  ncclCommAbort(d->comm);
  d->comm = NULL;
}

/* Lanes 1 .. nlanes - 1: a communicator split from the data communicator (non-blocking, waited
 * with the set-up timeout, one after another: a non-blocking parent takes one call at a time)
 * and a stream at the greatest priority, as the communication stream. */
static RfRealStatus cuda_lanes(RfDev *d, int nlanes) {
  if (!d->cfg.lane_comms || !d->comm) return RF_REAL_OK; /* excluded: no peers */
  if (nlanes > RF_REAL_MAX_LANES) return RF_REAL_ERR_INTERNAL;
  int least = 0, greatest = 0, me = 0;
  CUDACHECK(d, cudaDeviceGetStreamPriorityRange(&least, &greatest));
  NCCLCHECK(d, ncclCommUserRank(d->comm, &me));
  for (int lane = d->nlanes ? d->nlanes : 1; lane < nlanes; lane++) {
    CUDACHECK(d, cudaStreamCreateWithPriority(&d->lstream[lane], cudaStreamNonBlocking, greatest));
    d->nlanes = lane + 1; /* close() releases what is made, also on failure */
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = d->blocking;
    ncclResult_t r = ncclCommSplit(d->comm, 0, me, &d->lcomm[lane], &config);
    if (r != ncclSuccess && r != ncclInProgress) {
      fprintf(stderr, "%s %d %s:%d ncclCommSplit (lane %d): '%s'\n", d->host, d->cfg.rank, __FILE__,
              __LINE__, lane, ncclGetErrorString(r));
      d->lcomm[lane] = NULL;
      return RF_REAL_ERR_NCCL;
    }
    RfRealStatus s = nccl_wait_comm(d, d->comm, d->cfg.init_timeout_s);
    if (s == RF_REAL_OK && d->lcomm[lane])
      s = nccl_wait_comm(d, d->lcomm[lane], d->cfg.init_timeout_s);
    if (s != RF_REAL_OK) return s;
  }
  if (d->nlanes < 1) d->nlanes = 1;
  return RF_REAL_OK;
}

static RfRealStatus cuda_mem_free(RfDev *d, uint64_t *free_bytes) {
  size_t fr = 0, total = 0;
  CUDACHECK(d, cudaMemGetInfo(&fr, &total));
  *free_bytes = fr;
  return RF_REAL_OK;
}

static RfRealStatus cuda_alloc(RfDev *d, uint64_t bytes, void **out) {
  /* a unique, aligned pointer even for 0 bytes */
  cudaError_t e = cudaMalloc(out, bytes ? bytes : 16);
  if (e == cudaErrorMemoryAllocation) {
    fprintf(stderr, "%s %d: cudaMalloc of %llu bytes failed: out of device memory\n", d->host,
            d->cfg.rank, (unsigned long long)bytes);
    return RF_REAL_ERR_NOMEM;
  }
  CUDACHECK(d, e);
  /* on our stream (non-blocking: it does not order with the legacy stream), then wait */
  CUDACHECK(d, cudaMemsetAsync(*out, 0, bytes ? bytes : 16, d->stream));
  CUDACHECK(d, cudaStreamSynchronize(d->stream));
  return RF_REAL_OK;
}

static void cuda_release(RfDev *d, void *p) {
  (void)d;
  if (p) cudaFree(p);
}

/* Tables and lists, on our stream: a pageable cudaMemcpy would go through the legacy stream,
 * which does not order with a non-blocking one. Synchronous: src may be freed on return. */
static RfRealStatus cuda_upload(RfDev *d, void *dst, const void *src, uint64_t bytes) {
  if (!bytes) return RF_REAL_OK;
  CUDACHECK(d, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, d->stream));
  CUDACHECK(d, cudaStreamSynchronize(d->stream));
  return RF_REAL_OK;
}

/* shifted vectors in flight per thread (two loads each): 2 and 4 spill registers at 3 blocks of
 * 256 threads per SM (ptxas -v); -D overridable for scripts/copy-variants.sh */
#ifndef SHIFT_INFLIGHT
#define SHIFT_INFLIGHT 1
#endif
/* The 16 bytes that start sh bytes (1 .. 15) into the 32 of lo and hi, little-endian. */
__device__ static inline uint4 shift_pair(uint4 lo, uint4 hi, unsigned sh) {
  const uint64_t y0 = lo.x | (uint64_t)lo.y << 32, y1 = lo.z | (uint64_t)lo.w << 32;
  const uint64_t y2 = hi.x | (uint64_t)hi.y << 32, y3 = hi.z | (uint64_t)hi.w << 32;
  const int q = sh >= 8;
  const unsigned r = (sh & 7) * 8;
  const uint64_t a = q ? y1 : y0, b = q ? y2 : y1, c = q ? y3 : y2;
  const uint64_t o0 = r ? (a >> r) | (b << (64 - r)) : a;
  const uint64_t o1 = r ? (b >> r) | (c << (64 - r)) : b;
  return make_uint4((unsigned)o0, (unsigned)(o0 >> 32), (unsigned)o1, (unsigned)(o1 >> 32));
}

/* nv destination vectors, each shifted together from the two source vectors from s4 it straddles
 * (a block's large copies; a batch's small ones go through vec_pass<true>). Out of line as it ran
 * on the H200 (calls 12-13): it was so because inlined into copy_batch's loop over its copies it
 * spilled registers; that loop is gone, and inlined it is spill-free too (ptxas -v), but that
 * build has not run on a GPU. */
__device__ __noinline__ static void copy_shifted(const uint4 *__restrict__ s4,
                                                 uint4 *__restrict__ d4, uint64_t nv, unsigned sh,
                                                 unsigned t, unsigned width) {
  for (uint64_t k = t; k < nv; k += (uint64_t)SHIFT_INFLIGHT * width) {
    uint4 lo[SHIFT_INFLIGHT], hi[SHIFT_INFLIGHT];
#pragma unroll
    for (int u = 0; u < SHIFT_INFLIGHT; u++)
      if (k + u * (uint64_t)width < nv) {
        lo[u] = __ldg(s4 + k + u * (uint64_t)width);
        hi[u] = __ldg(s4 + k + u * (uint64_t)width + 1);
      }
#pragma unroll
    for (int u = 0; u < SHIFT_INFLIGHT; u++)
      if (k + u * (uint64_t)width < nv) d4[k + u * (uint64_t)width] = shift_pair(lo[u], hi[u], sh);
  }
}

/* bytes from s to d by `width` threads (a block, or a warp), t = 0 .. width - 1: 16-byte
 * vectors, up to four in flight per thread, read through the read-only cache. When source and
 * destination agree modulo 16 a vector is a load and a store; else the destination is aligned and
 * each of its vectors is shifted together from the two aligned source vectors it straddles (the
 * 2-byte copies before ran at 0.47 of device memcpy on an H200). Every aligned source vector read
 * holds a byte of the copy, so no read leaves the source's allocation: the last destination
 * vector, whose second source vector may hold none, goes bytewise with the head and the tail. */
__device__ static inline void copy_span(const unsigned char *__restrict__ s,
                                        unsigned char *__restrict__ d, uint64_t b, unsigned t,
                                        unsigned width) {
  const int same = (((uintptr_t)s ^ (uintptr_t)d) & 15) == 0;
  uint64_t head = (16 - ((uintptr_t)d & 15)) & 15;
  if (head > b) head = b;
  for (uint64_t k = t; k < head; k += width)
    d[k] = __ldg(s + k);
  uint4 *__restrict__ d4 = (uint4 *)(d + head);
  const unsigned sh = (unsigned)((uintptr_t)(s + head) & 15); /* 0 when same */
  const uint4 *__restrict__ s4 = (const uint4 *)(s + head - sh);
  uint64_t nv = (b - head) / 16;
  if (same) {
    /* four loads in flight also on the last, partial round: a copy of 8 KiB by a block has two
     * vectors per thread, which one at a time left it at 0.53 of device memcpy on an H200 */
    for (uint64_t k = t; k < nv; k += 4ull * width) {
      uint4 v[4];
#pragma unroll
      for (int u = 0; u < 4; u++)
        if (k + u * (uint64_t)width < nv) v[u] = __ldg(s4 + k + u * (uint64_t)width);
#pragma unroll
      for (int u = 0; u < 4; u++)
        if (k + u * (uint64_t)width < nv) d4[k + u * (uint64_t)width] = v[u];
    }
  } else {
    nv = nv ? nv - 1 : 0;
    copy_shifted(s4, d4, nv, sh, t, width);
  }
  for (uint64_t k = head + nv * 16 + t; k < b; k += width)
    d[k] = __ldg(s + k);
}

/* Small copies go to warps COPY_BATCH at a time: the batch's descriptors are read at once (one
 * lane each), and the 16-byte vectors of its co-aligned copies are numbered one after another
 * and spread over the warp's lanes, COPY_INFLIGHT in flight per lane, whatever each copy's size;
 * then the shifted vectors of its copies whose source and destination disagree modulo 16 (at
 * least COPY_TINY bytes; a copy at a time through the warp, 4 KiB rows ran at 0.61 of device
 * memcpy on an H200, in this pass 0.63), SHIFT_INFLIGHT in flight; then the bytes of all heads and
 * tails and of the shorter copies that disagree modulo 16 (a copy at a time, 7-byte rows ran at
 * 0.04: a batch waited a load latency per copy), the three passes spread the same way (vec_pass and
 * the byte pass). A warp per copy (the kernel before) waited a descriptor, a base and a data
 * latency per copy and left lanes idle on copies under 2 KiB: on an H200 it ran 384-byte rows at
 * 774 GB/s and 4 KiB rows at 1,255 GB/s, this 1,282-1,321 and 1,491-1,508 (docs/real.md, "On a
 * GPU"). All lanes of the warp call this together. The settings were chosen on that GPU among the
 * variants scripts/copy-variants.sh builds (-D overrides): 8 copies a batch (16 and 4 were slower),
 * 4 vectors in flight, at least 3 blocks of 256 threads per SM (80 registers, no spills; 8 in
 * flight at 2 blocks ran 4 KiB rows faster and 8 KiB copies, a block each, slower), copies up to 4
 * KiB small (RF_REAL_SMALL_COPY_BYTES). */
#ifndef COPY_BATCH
#define COPY_BATCH 8
#endif
#ifndef COPY_INFLIGHT
#define COPY_INFLIGHT 4
#endif
#ifndef COPY_MIN_BLOCKS
#define COPY_MIN_BLOCKS 3
#endif
#define COPY_TINY 64
static_assert(COPY_BATCH >= 2 && COPY_BATCH <= 32 && (COPY_BATCH & (COPY_BATCH - 1)) == 0,
              "copy_batch's binary search takes a power of two up to a warp");
/* The vectors of a batch's copies, numbered one after another over the warp's lanes (incl: the
 * inclusive prefix over the lanes of nv, each lane's copy's vectors), INFLIGHT per lane at a
 * time; with SHIFT each destination vector is shifted together from the two aligned source
 * vectors it straddles (sh: its copy's shift; s4 its first aligned source vector). All lanes of
 * the warp call this together; every lane shuffles (a shuffle of the full mask that some lanes
 * skip is undefined: one read in a conditional faulted on the H200). */
template <bool SHIFT, int INFLIGHT>
__device__ static inline void vec_pass(uint32_t incl, uint32_t nv, unsigned long long s4,
                                       unsigned long long d4, unsigned sh, unsigned lane) {
  const unsigned full = 0xffffffffu;
  const uint32_t total = __shfl_sync(full, incl, 31), excl = incl - nv;
  for (uint32_t base = 0; base < total; base += 32u * INFLIGHT) { /* uniform over the warp */
    uint4 lo[INFLIGHT], hi[INFLIGHT];
    uint4 *to[INFLIGHT];
    unsigned shv[INFLIGHT];
#pragma unroll
    for (int u = 0; u < INFLIGHT; u++) {
      const uint32_t f = base + 32u * u + lane;
      int j = 0; /* the copy of vector f: the first lane whose inclusive prefix exceeds f */
#pragma unroll
      for (int step = COPY_BATCH / 2; step >= 1; step >>= 1) {
        const uint32_t p = __shfl_sync(full, incl, j + step - 1);
        if (p <= f) j += step;
      }
      const uint32_t ex = __shfl_sync(full, excl, j);
      const uint4 *from = (const uint4 *)(uintptr_t)__shfl_sync(full, s4, j) + (f - ex);
      to[u] = (uint4 *)(uintptr_t)__shfl_sync(full, d4, j) + (f - ex);
      shv[u] = SHIFT ? __shfl_sync(full, sh, j) : 0;
      if (f < total) {
        lo[u] = __ldg(from);
        if (SHIFT) hi[u] = __ldg(from + 1);
      }
    }
#pragma unroll
    for (int u = 0; u < INFLIGHT; u++)
      if (base + 32u * u + lane < total) *to[u] = SHIFT ? shift_pair(lo[u], hi[u], shv[u]) : lo[u];
  }
}

__device__ static inline void copy_batch(const void *const *__restrict__ bases,
                                         const RfCopy *__restrict__ list, uint64_t first,
                                         unsigned count, unsigned lane) {
  const unsigned full = 0xffffffffu;
  const unsigned char *s = NULL;
  unsigned char *d = NULL;
  uint64_t b = 0;
  if (lane < count) {
    const RfCopy c = list[first + lane];
    s = (const unsigned char *)bases[c.src_sp] + c.src_off;
    d = (unsigned char *)bases[c.dst_sp] + c.dst_off;
    b = c.bytes;
  }
  const int same = lane < count && (((uintptr_t)s ^ (uintptr_t)d) & 15) == 0;
  /* the copy's bytes [0, head) and [tail, b) go through the byte pass, its vectors between: nv
   * loaded and stored as they are (source and destination agree modulo 16), or nvs shifted (they
   * disagree; the last destination vector, whose second source vector may hold no byte of the
   * copy, goes with the tail, so that no read leaves the source's allocation) */
  uint32_t head = 0, nv = 0, nvs = 0, tail = (uint32_t)b; /* b: small, at most 4 KiB */
  unsigned sh = 0;
  if (same) {
    head = (uint32_t)((16 - ((uintptr_t)s & 15)) & 15);
    if (head > b) head = (uint32_t)b;
    nv = (uint32_t)((b - head) / 16);
    tail = head + 16 * nv;
  } else if (lane < count && b >= COPY_TINY) {
    head = (uint32_t)((16 - ((uintptr_t)d & 15)) & 15); /* at most 15 */
    sh = (unsigned)((uintptr_t)(s + head) & 15);        /* not 0 */
    nvs = (uint32_t)((b - head) / 16) - 1;
    tail = head + 16 * nvs;
  } else if (lane < count) {
    head = tail = (uint32_t)b;
  }
  const uint32_t nb = head + (uint32_t)(b - tail); /* 0 for the lanes without a copy */
  uint32_t incl = nv, incls = nvs, inclb = nb;     /* inclusive prefixes over the lanes */
  for (unsigned o = 1; o < 32; o <<= 1) {
    const uint32_t x = __shfl_up_sync(full, incl, o), y = __shfl_up_sync(full, inclb, o);
    const uint32_t z = __shfl_up_sync(full, incls, o);
    if (lane >= o) {
      incl += x;
      inclb += y;
      incls += z;
    }
  }
  const unsigned long long s4 = (unsigned long long)(uintptr_t)(s + head - sh);
  const unsigned long long d4 = (unsigned long long)(uintptr_t)(d + head);
  vec_pass<false, COPY_INFLIGHT>(incl, nv, s4, d4, 0, lane);
  vec_pass<true, SHIFT_INFLIGHT>(incls, nvs, s4, d4, sh, lane);
  const uint32_t totalb = __shfl_sync(full, inclb, 31), exclb = inclb - nb;
  for (uint32_t base = 0; base < totalb; base += 32u * COPY_INFLIGHT) { /* the byte pass */
    unsigned char v[COPY_INFLIGHT];
    unsigned char *to[COPY_INFLIGHT];
#pragma unroll
    for (int u = 0; u < COPY_INFLIGHT; u++) {
      const uint32_t f = base + 32u * u + lane;
      int j = 0;
#pragma unroll
      for (int step = COPY_BATCH / 2; step >= 1; step >>= 1) {
        const uint32_t p = __shfl_sync(full, inclb, j + step - 1);
        if (p <= f) j += step;
      }
      const uint32_t x = f - __shfl_sync(full, exclb, j), hj = __shfl_sync(full, head, j);
      const uint32_t tj = __shfl_sync(full, tail, j);
      const uint32_t off = x < hj ? x : tj + (x - hj);
      const unsigned char *from =
          (const unsigned char *)(uintptr_t)__shfl_sync(full, (unsigned long long)(uintptr_t)s, j);
      to[u] =
          (unsigned char *)(uintptr_t)__shfl_sync(full, (unsigned long long)(uintptr_t)d, j) + off;
      if (f < totalb) v[u] = __ldg(from + off);
    }
#pragma unroll
    for (int u = 0; u < COPY_INFLIGHT; u++)
      if (base + 32u * u + lane < totalb) *to[u] = v[u];
  }
}

/* Copy lists, grid-stride over "virtual blocks": the first ceil(nsmall / (8 x COPY_BATCH)) take
 * eight batches of small copies each (one warp per batch), then one block per large copy (the
 * engine cuts copies into pieces of at most RF_REAL_CHUNK_BYTES, so a long copy spreads over many
 * blocks). */
#define COPY_THREADS 256
#define COPY_WARPS (COPY_THREADS / 32)
#define COPY_SMALL_PER_BLOCK (COPY_WARPS * COPY_BATCH)
__global__ void __launch_bounds__(COPY_THREADS, COPY_MIN_BLOCKS)
    copy_kernel(const void *const *__restrict__ bases, const RfCopy *__restrict__ list, uint64_t n,
                uint64_t nsmall) {
  const uint64_t sblocks = (nsmall + COPY_SMALL_PER_BLOCK - 1) / COPY_SMALL_PER_BLOCK;
  const uint64_t nvb = sblocks + (n - nsmall);
  for (uint64_t vb = blockIdx.x; vb < nvb; vb += gridDim.x) {
    if (vb < sblocks) {
      const uint64_t first = (vb * COPY_WARPS + threadIdx.x / 32) * COPY_BATCH;
      if (first < nsmall) /* the whole warp, or none of it */
        copy_batch(bases, list, first,
                   (unsigned)(nsmall - first < COPY_BATCH ? nsmall - first : COPY_BATCH),
                   threadIdx.x % 32);
    } else {
      const RfCopy c = list[nsmall + (vb - sblocks)];
      copy_span((const unsigned char *)bases[c.src_sp] + c.src_off,
                (unsigned char *)bases[c.dst_sp] + c.dst_off, c.bytes, threadIdx.x, blockDim.x);
    }
  }
}

__global__ void fill_kernel(void *const *bases, const RfRun *runs, uint64_t n,
                            const RfBoxDesc *boxes, uint64_t step) {
  for (uint64_t i = blockIdx.x; i < n; i += gridDim.x) {
    RfRun r = runs[i];
    const RfBoxDesc *b = &boxes[r.box];
    int es = b->esize;
    unsigned char *p = (unsigned char *)bases[r.sp] + r.off * (uint64_t)es;
    for (uint64_t e = threadIdx.x; e < r.elems; e += blockDim.x) {
      uint64_t v = rf_pattern(b->tensor, rf_pattern_gidx(b, r.seq0 + e), step);
      for (int k = 0; k < es; k++)
        p[e * es + k] = (unsigned char)(v >> (8 * k));
    }
  }
}

__global__ void verify_kernel(void *const *bases, const RfRun *runs, uint64_t n,
                              const RfBoxDesc *boxes, uint64_t step, unsigned long long *wrong) {
  unsigned long long bad = 0;
  for (uint64_t i = blockIdx.x; i < n; i += gridDim.x) {
    RfRun r = runs[i];
    const RfBoxDesc *b = &boxes[r.box];
    int es = b->esize;
    const unsigned char *p = (const unsigned char *)bases[r.sp] + r.off * (uint64_t)es;
    for (uint64_t e = threadIdx.x; e < r.elems; e += blockDim.x) {
      uint64_t v = rf_pattern(b->tensor, rf_pattern_gidx(b, r.seq0 + e), step);
      int ok = 1;
      for (int k = 0; k < es; k++)
        ok &= p[e * es + k] == (unsigned char)(v >> (8 * k));
      bad += !ok;
    }
  }
  if (bad) atomicAdd(wrong, bad);
}

static unsigned grid_for(uint64_t n) {
  return (unsigned)(n < 65535 ? n : 65535);
}

static RfRealStatus cuda_copy(RfDev *d, void *const *bases, const RfCopy *list, uint64_t n,
                              uint64_t nsmall) {
  if (!n) return RF_REAL_OK;
  if (nsmall > n) return RF_REAL_ERR_INTERNAL;
  const uint64_t nvb = (nsmall + COPY_SMALL_PER_BLOCK - 1) / COPY_SMALL_PER_BLOCK + (n - nsmall);
  copy_kernel<<<grid_for(nvb), COPY_THREADS, 0, d->stream>>>((const void *const *)bases, list, n,
                                                             nsmall);
  CUDACHECK(d, cudaGetLastError());
  return RF_REAL_OK;
}

static RfRealStatus cuda_fill(RfDev *d, void *const *bases, const RfRun *runs, uint64_t n,
                              const RfBoxDesc *boxes, uint64_t step) {
  if (!n) return RF_REAL_OK;
  fill_kernel<<<grid_for(n), 256, 0, d->stream>>>(bases, runs, n, boxes, step);
  CUDACHECK(d, cudaGetLastError());
  return RF_REAL_OK;
}

static RfRealStatus cuda_verify(RfDev *d, void *const *bases, const RfRun *runs, uint64_t n,
                                const RfBoxDesc *boxes, uint64_t step, uint64_t *wrong) {
  *wrong = 0;
  if (!n) return RF_REAL_OK;
  CUDACHECK(d, cudaMemsetAsync(d->wrong_dev, 0, sizeof *d->wrong_dev, d->stream));
  verify_kernel<<<grid_for(n), 256, 0, d->stream>>>(bases, runs, n, boxes, step, d->wrong_dev);
  CUDACHECK(d, cudaGetLastError());
  /* into pinned memory (to pageable memory the call itself would wait, without a timeout) */
  CUDACHECK(d, cudaMemcpyAsync(d->wrong_host, d->wrong_dev, sizeof *d->wrong_dev,
                               cudaMemcpyDeviceToHost, d->stream));
  /* Poll, not cudaStreamSynchronize: after a failure the stream may still wait on a group. */
  CUDACHECK(d, cudaEventRecord(d->synced, d->stream));
  const double t0 = now_s();
  for (;;) {
    cudaError_t e = cudaEventQuery(d->synced);
    if (e == cudaSuccess) break;
    if (e != cudaErrorNotReady) CUDACHECK(d, e);
    cudaGetLastError(); /* "not ready" is recorded as the last error */
    const double waited = now_s() - t0;
    if (waited > d->cfg.timeout_s) return RF_REAL_ERR_TIMEOUT;
    poll_pause(waited);
  }
  *wrong = *d->wrong_host;
  return RF_REAL_OK;
}

/* A world rank's rank in the data communicator (renumbered after a shrink). */
static int peer_of(const RfDev *d, int world_rank) {
  return d->cfg.comm_rank ? d->cfg.comm_rank[world_rank] : world_rank;
}

static RfRealStatus cuda_post(RfDev *d, int lane, const RfOp *sends, int nsends, const RfOp *recvs,
                              int nrecvs, void *sstage, void *rstage) {
  if (lane < 0 || lane >= RF_REAL_MAX_LANES) return RF_REAL_ERR_INTERNAL;
  /* the lane's communicator and stream (lane_comms), else the data communicator's */
  ncclComm_t comm = lane_comm(d, lane);
  cudaStream_t cs = lane_stream(d, lane);
  /* after the copies queued so far (this round's pack, the unpack that freed the lane) */
  CUDACHECK(d, cudaEventRecord(d->copied, d->stream));
  CUDACHECK(d, cudaStreamWaitEvent(cs, d->copied, 0));
  if (nsends || nrecvs) {
    /* an excluded (lost) rank has no peers; a lane without its communicator: lanes() not run */
    if (!comm) return RF_REAL_ERR_INTERNAL;
    NCCLCHECK(d, ncclGroupStart());
    ncclResult_t r = ncclSuccess;
    for (int i = 0; i < nrecvs && (r == ncclSuccess || r == ncclInProgress); i++)
      r = ncclRecv((char *)rstage + recvs[i].off, recvs[i].bytes, ncclUint8,
                   peer_of(d, recvs[i].peer), comm, cs);
    for (int i = 0; i < nsends && (r == ncclSuccess || r == ncclInProgress); i++)
      r = ncclSend((const char *)sstage + sends[i].off, sends[i].bytes, ncclUint8,
                   peer_of(d, sends[i].peer), comm, cs);
    if (r != ncclSuccess && r != ncclInProgress) {
      /* Close the group, so that the ncclCommAbort that follows can clean up. */
      ncclGroupEnd();
      NCCLCHECK(d, r);
    }
    NCCLCHECK(d, ncclGroupEnd());
    RfRealStatus s = nccl_wait(d, comm);
    if (s != RF_REAL_OK) return s;
  }
  CUDACHECK(d, cudaEventRecord(d->lane_done[lane], cs));
  if (d->ngev == d->ngcap) { /* the pool grows to the largest refit's groups */
    cudaEvent_t *g = (cudaEvent_t *)realloc(d->gev, sizeof(cudaEvent_t) * (d->ngcap + 64));
    if (!g) return RF_REAL_ERR_NOMEM;
    d->gev = g;
    for (; d->ngcap < d->ngev + 64; d->ngcap++)
      CUDACHECK(d, cudaEventCreateWithFlags(&d->gev[d->ngcap], cudaEventDisableTiming));
  }
  CUDACHECK(d, cudaEventRecord(d->gev[d->ngev++], cs));
  return RF_REAL_OK;
}

static RfRealStatus cuda_wait(RfDev *d, int lane, int *stuck_peer) {
  (void)stuck_peer; /* NCCL cannot say which peer is late */
  if (lane < 0 || lane >= RF_REAL_MAX_LANES) return RF_REAL_ERR_INTERNAL;
  CUDACHECK(d, cudaStreamWaitEvent(d->stream, d->lane_done[lane], 0));
  return RF_REAL_OK;
}

static RfRealStatus cuda_peer_copy(RfDev *d, void *dst, const void *src, uint64_t bytes) {
  if (bytes) CUDACHECK(d, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, d->stream));
  return RF_REAL_OK;
}

static RfRealStatus cuda_mark(RfDev *d, int i) {
  while (i >= d->nev) {
    cudaEvent_t *ev = (cudaEvent_t *)realloc(d->ev, sizeof(cudaEvent_t) * (d->nev + 1));
    if (!ev) return RF_REAL_ERR_NOMEM;
    d->ev = ev;
    CUDACHECK(d, cudaEventCreate(&d->ev[d->nev]));
    d->nev++;
  }
  CUDACHECK(d, cudaEventRecord(d->ev[i], d->stream));
  if (i == 0) d->ngev = d->gdone = 0; /* a new refit: its groups count as progress */
  return RF_REAL_OK;
}

/* Poll the marks in order; give up when neither a mark nor a group completes within the timeout
 * (a peer that never posts its half of a group leaves our kernels waiting forever; a pipelined
 * refit has one mark for many groups). Groups count in post order: with lane communicators a group
 * of a later lane may end first; it counts once the groups posted before it have ended. */
static RfRealStatus cuda_finish(RfDev *d, int nmarks, double *since_start_s, int *done_marks) {
  int done = 0;
  double t = now_s();
  while (done < nmarks) {
    cudaError_t e = cudaEventQuery(d->ev[done]);
    if (e == cudaSuccess) {
      done++;
      t = now_s();
      continue;
    }
    while (d->gdone < d->ngev && cudaEventQuery(d->gev[d->gdone]) == cudaSuccess) {
      d->gdone++;
      t = now_s();
    }
    if (e != cudaErrorNotReady) {
      *done_marks = done;
      CUDACHECK(d, e);
    }
    /* "not ready" is recorded as the last error: clear it, or the next kernel launch's
     * cudaGetLastError() would report it. */
    cudaGetLastError();
    for (int lane = 0; lane < (d->nlanes ? d->nlanes : 1); lane++) { /* every communicator */
      ncclComm_t comm = lane ? d->lcomm[lane] : d->comm;
      if (!comm) continue;
      ncclResult_t st = ncclSuccess;
      ncclCommGetAsyncError(comm, &st);
      if (st != ncclSuccess && st != ncclInProgress) {
        fprintf(stderr, "%s %d %s:%d lane %d: '%s'\n", d->host, d->cfg.rank, __FILE__, __LINE__,
                lane, ncclGetErrorString(st));
        *done_marks = done;
        return RF_REAL_ERR_NCCL;
      }
    }
    double waited = now_s() - t;
    if (waited > d->cfg.timeout_s) {
      *done_marks = done;
      return RF_REAL_ERR_TIMEOUT;
    }
    poll_pause(waited);
  }
  *done_marks = done;
  since_start_s[0] = 0;
  for (int i = 1; i < nmarks; i++) {
    float ms = 0;
    CUDACHECK(d, cudaEventElapsedTime(&ms, d->ev[0], d->ev[i]));
    since_start_s[i] = ms * 1e-3;
  }
  return RF_REAL_OK;
}

extern "C" const RfDevOps rf_dev_cuda_ops = {
    /* .name = */ "cuda",
    /* .device_count = */ cuda_device_count,
    /* .open = */ cuda_open,
    /* .connect = */ cuda_connect,
    /* .needs_nccl_id = */ 1,
    /* .lanes = */ cuda_lanes,
    /* .close = */ cuda_close,
    /* .cancel = */ cuda_cancel,
    /* .alloc = */ cuda_alloc,
    /* .release = */ cuda_release,
    /* .mem_free = */ cuda_mem_free,
    /* .upload = */ cuda_upload,
    /* .download = */ cuda_upload,
    /* .copy = */ cuda_copy,
    /* .fill = */ cuda_fill,
    /* .verify = */ cuda_verify,
    /* .post = */ cuda_post,
    /* .wait = */ cuda_wait,
    /* .peer_copy = */ cuda_peer_copy,
    /* .mark = */ cuda_mark,
    /* .finish = */ cuda_finish,
};
