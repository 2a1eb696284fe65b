/* Internal to real/: the device ops table the engine drives (host memory + MPI, or CUDA + NCCL).
 *
 * Everything the engine hands a backend is plain data in the backend's own memory: copy lists,
 * run lists and box descriptors are uploaded once per plan, addresses are (space, offset) pairs
 * resolved through a per-rank base table, so double-buffer swaps only change which table is
 * used. Plain C, no GLib: the CUDA backend is compiled by nvcc. */
#ifndef RF_REAL_BACKEND_H
#define RF_REAL_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RF_REAL_MAX_DIMS 8
#define RF_REAL_MAX_LANES                                                                          \
  8 /* staging lanes (groups in flight) of a rank: RF_SCHEDULE_MAX_SLOTS                           \
     */

typedef enum {
  RF_REAL_OK = 0,
  RF_REAL_ERR_MPI,
  RF_REAL_ERR_CUDA,
  RF_REAL_ERR_NCCL,
  RF_REAL_ERR_NODEV, /* no GPU visible */
  RF_REAL_ERR_NOMEM,
  RF_REAL_ERR_TIMEOUT, /* a stage made no progress within the timeout */
  RF_REAL_ERR_PEER,    /* a peer aborted the run */
  RF_REAL_ERR_INTERNAL
} RfRealStatus;

const char *rf_real_status_string(RfRealStatus s);

/* Copies of at most this many bytes are small: a copy list puts them first (rf_real_order_copies)
 * and the cuda backend spreads each batch of eight over a warp's lanes instead of giving each a
 * block (on an H200: 4 KiB rows 0.85 of device memcpy, 8 KiB rows as small copies 0.70, by a block
 * each 0.83; docs/real.md). A -D override builds the variants of scripts/copy-variants.sh. */
#ifndef RF_REAL_SMALL_COPY_BYTES
#define RF_REAL_SMALL_COPY_BYTES 4096u
#endif

/* Copy bytes from bases[src_sp] + src_off to bases[dst_sp] + dst_off. */
typedef struct {
  uint64_t src_off, dst_off, bytes;
  uint32_t src_sp, dst_sp;
} RfCopy;

/* elems elements at element offset off of space sp, which are elements seq0 .. seq0 + elems - 1
 * of box (row-major order of the box). */
typedef struct {
  uint64_t off, elems, seq0;
  uint32_t box, sp;
} RfRun;

/* A box of one tensor part, for the fill / verify pattern. */
typedef struct {
  uint32_t tensor;
  int32_t ndim, esize, seg_dim;
  int64_t seg_off;
  int64_t lo[RF_REAL_MAX_DIMS]; /* part coordinates */
  int64_t ext[RF_REAL_MAX_DIMS];
  int64_t tstride[RF_REAL_MAX_DIMS]; /* row-major strides of the whole tensor */
} RfBoxDesc;

/* One send or receive of a group: bytes at offset off of the send / receive staging. */
typedef struct {
  int32_t peer;
  int32_t pad_;
  uint64_t off, bytes;
} RfOp;

typedef struct RfDev RfDev;

typedef struct {
  int rank, world; /* this process in the MPI world (0 / 1 in local mode) */
  int local;       /* all ranks in this process: no communicator */
  int device;      /* GPU to use (node-local rank) */
  double timeout_s;
  double init_timeout_s; /* communicator set-up (NCCL init, shrink): longer than a stage's */
  /* Elastic recovery: the plan's lost ranks, excluded from the data communicator (ascending,
   * nexclude of them), and comm_rank[r], world rank r's rank in that communicator (-1: excluded).
   * nexclude 0: the communicator is the whole world (comm_rank NULL). The arrays outlive the
   * device. */
  const int *exclude;
  int nexclude;
  const int *comm_rank;
  /* Test hook (host): every copy list lasts at least this long, and a group completes no earlier
   * than this long after it was posted, as on a device whose copies and transfers take time. */
  double op_delay_s;
  /* Each staging lane's groups on a communicator and stream of their own (lanes()); 0: every group
   * on the data communicator, one after another. */
  int lane_comms;
} RfDevConfig;

typedef struct {
  const char *name;
  /* GPUs this process can see (the engine checks them against the ranks of the node before
   * open); NULL when the backend uses none. */
  int (*device_count)(void);
  RfRealStatus (*open)(const RfDevConfig *cfg, RfDev **out);
  /* Join the data communicator (MPI mode); NULL when the backend needs none. Collective over the
   * world: called only after every rank opened. With lost ranks (cfg.nexclude) the communicator
   * leaves them out: host, an MPI_Comm_split of the world; cuda, the world's NCCL communicator
   * shrunk with ncclCommShrink (NCCL >= 2.27), else destroyed and created again over the
   * survivors from nccl_id2. An excluded rank holds no communicator afterwards, and its peers
   * are renumbered (comm_rank): ops still name world ranks. nccl_id, nccl_id2: the bootstrap's
   * ncclUniqueIds when needs_nccl_id (the second one only with lost ranks), else NULL. */
  RfRealStatus (*connect)(RfDev *dev, const void *nccl_id, const void *nccl_id2);
  int needs_nccl_id;
  /* With cfg.lane_comms: make lanes 1 .. nlanes - 1 a communicator each (lane 0 is the data
   * communicator), those not made yet. Collective over the data communicator: every rank calls it
   * at the same point (after the schedule is built, before the first refit), with the same nlanes.
   * A no-op without lane_comms, for an excluded rank, and where nothing else is needed (host: MPI
   * keeps lanes apart by tag). NULL: no-op. */
  RfRealStatus (*lanes)(RfDev *dev, int nlanes);
  /* abort: tear the communicator down without waiting for peers. A failed normal close
   * (ncclCommFinalize) is reported on stderr. */
  void (*close)(RfDev *dev, int abort);
  /* After a failure: tear the communicator down without waiting for peers (ncclCommAbort), so
   * that no queued work waits on a group any more, keeping the device and its memory usable for
   * a local check (verify); close(dev, 1) follows. NULL: nothing queued can wait on a peer. */
  void (*cancel)(RfDev *dev);
  /* Zeroed memory of the backend's kind; bytes may be 0 (a valid, unique pointer comes back). */
  RfRealStatus (*alloc)(RfDev *dev, uint64_t bytes, void **out);
  void (*release)(RfDev *dev, void *p);
  /* Device memory still free on the device (cudaMemGetInfo), for the --local check before
   * allocating; NULL when the backend uses host memory (checked against MemAvailable). */
  RfRealStatus (*mem_free)(RfDev *dev, uint64_t *free_bytes);
  /* Copy host data into backend memory (for tables and lists). */
  RfRealStatus (*upload)(RfDev *dev, void *dst, const void *src, uint64_t bytes);
  RfRealStatus (*download)(RfDev *dev, void *dst, const void *src, uint64_t bytes);
  /* bases: backend copy of a table of space pointers; the first nsmall of the n copies are small
   * (at most RF_REAL_SMALL_COPY_BYTES each, rf_real_order_copies). Asynchronous on cuda. */
  RfRealStatus (*copy)(RfDev *dev, void *const *bases, const RfCopy *list, uint64_t n,
                       uint64_t nsmall);
  RfRealStatus (*fill)(RfDev *dev, void *const *bases, const RfRun *runs, uint64_t n,
                       const RfBoxDesc *boxes, uint64_t step);
  /* Synchronous: counts elements that differ from the pattern of step; waits at most the
   * timeout (RF_REAL_ERR_TIMEOUT) behind work still queued. */
  RfRealStatus (*verify)(RfDev *dev, void *const *bases, const RfRun *runs, uint64_t n,
                         const RfBoxDesc *boxes, uint64_t step, uint64_t *wrong);
  /* Start one group of sends from sstage and receives into rstage with peers (MPI mode) on a
   * lane (0 .. RF_REAL_MAX_LANES - 1) that holds no group in flight; it runs after every copy
   * queued before it. Groups are posted in the same order on every rank. */
  RfRealStatus (*post)(RfDev *dev, int lane, const RfOp *sends, int nsends, const RfOp *recvs,
                       int nrecvs, void *sstage, void *rstage);
  /* The lane's group is done before any copy queued after this call runs. Host: blocks until it
   * is done or the timeout passes (*stuck_peer says whom it waited on); cuda: enqueues the wait
   * on the copy stream. */
  RfRealStatus (*wait)(RfDev *dev, int lane, int *stuck_peer);
  /* Local mode: one rank's send lands in another's receive staging. */
  RfRealStatus (*peer_copy)(RfDev *dev, void *dst, const void *src, uint64_t bytes);
  /* Timestamp i (0 = start of a refit), then wait for all queued work (timeout) and read the
   * seconds since mark 0; *done_marks tells how far it got on a timeout. */
  RfRealStatus (*mark)(RfDev *dev, int i);
  RfRealStatus (*finish)(RfDev *dev, int nmarks, double *since_start_s, int *done_marks);
} RfDevOps;

/* The backends: host (backend_host.c) always; cuda (registry.c) NULL when the CUDA backend was
 * not built. */
extern const RfDevOps rf_dev_host;
extern const RfDevOps *const rf_dev_cuda;
/* The device ops of a backend name (NULL: host), NULL when unknown or not built. */
const RfDevOps *rf_boot_dev_ops(const char *name);
/* REFIT_NCCL_BLOCKING=1, a measurement hook of the cuda backend: blocking NCCL communicators,
 * whose ncclGroupEnd launches in the calling thread (no timeout on a dead peer), to time what the
 * non-blocking one's launch thread costs a group (docs/real.md); refit run's header says so. */
static inline int rf_real_nccl_blocking(void) {
  const char *v = getenv("REFIT_NCCL_BLOCKING");
  return v && !strcmp(v, "1");
}

#ifdef __cplusplus
}
#endif

#endif
