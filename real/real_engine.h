/* Internal to real/: the engine's measurements (RfRealSpread) are public now, in real.h. */
#ifndef RF_REAL_ENGINE_H
#define RF_REAL_ENGINE_H

#include "backend.h"
#include "real.h"

/* Copies and fill / verify runs are cut into pieces of this many bytes when the lists are built,
 * so that a list of a few large copies still spreads over the whole GPU (one block per piece). */
#define RF_REAL_CHUNK_BYTES (256u << 10)

/* Communicator set-up (NCCL init over many nodes, shrink) may take this long, whatever the stage
 * timeout (RfDevConfig.init_timeout_s: the larger of the two). */
#define RF_REAL_INIT_TIMEOUT_S 300.0

/* Most timed (and warm-up) refits of one run: their stage times are kept, one row each. */
#define RF_REAL_MAX_ITERS 100000

/* Progress of a long run() (a --memory check builds every rank): `done` of `total` `what`
 * ("segments scheduled", "ranks built"), seconds since that phase started. Called at most every
 * few seconds, and only once a phase has taken a few. */
typedef void (*RfRealProgressFn)(const char *strategy, const char *what, uint64_t done,
                                 uint64_t total, double elapsed_s, void *user_data);
/* Replace the default progress report (a line on stderr) of ex; fn NULL: none. */
void rf_real_set_progress(RfExecutor *ex, RfRealProgressFn fn, void *user_data);

/* Cut every RfCopy of copies (in place, order kept) into pieces of at most chunk_bytes, a
 * multiple of 16: piece j starts j * chunk_bytes into both source and destination, so every
 * piece keeps the copy's source / destination alignment modulo 16. */
void rf_real_chunk_copies(GArray *copies, uint64_t chunk_bytes);
/* Put the copies of at most small_bytes first, each class in its order (stable), and return how
 * many there are: the nsmall of RfDevOps.copy (RF_REAL_SMALL_COPY_BYTES). Copies of one list
 * write disjoint bytes, so their order does not change the result. */
uint64_t rf_real_order_copies(GArray *copies, uint64_t small_bytes);
/* Cut every RfRun of runs (in place, order kept) into pieces of at most chunk_bytes of its box's
 * element size (boxes[run.box].esize); offsets and sequence numbers advance together. */
void rf_real_chunk_runs(GArray *runs, const RfBoxDesc *boxes, uint64_t chunk_bytes);

/* Each rank of a node drives GPU local_rank: TRUE when the node's local_size ranks each get their
 * own of ngpus, else FALSE + one line (RF_ERROR_INPUT) naming the ranks and the GPUs. */
gboolean rf_real_check_gpus(int rank, const char *host, int local_rank, int local_size, int ngpus,
                            GError **error);

/* The GPU a rank drives: override (REFIT_CUDA_DEVICE, >= 0) when set; GPU 0 when it sees exactly
 * one and visible_set (CUDA_VISIBLE_DEVICES set: the launcher gave each rank its own, as Slurm's
 * --gpus-per-task=1 does); else its node-local rank, which rf_real_check_gpus checks. */
int rf_real_pick_gpu(int local_rank, int ngpus, int override, gboolean visible_set);

/* Elastic recovery: the data communicator of a world of `world` ranks whose lost[r] are set
 * (lost NULL: none). Fills exclude (ascending lost ranks) and comm_rank (each rank's rank among
 * the survivors, in world order, as ncclCommShrink and MPI_Comm_split with the world rank as key
 * number them; -1 for a lost rank), each of `world` entries; returns how many are excluded. */
int rf_real_survivors(const uint8_t *lost, int world, int *exclude, int *comm_rank);

/* Host memory this process may still take (MemAvailable; UINT64_MAX when unknown). */
uint64_t rf_real_host_available_bytes(void);
/* TRUE when a process's shards (src_bytes + banks x dst_bytes: 1 in place, 2 double bank) fit
 * in available_bytes, else FALSE + one line (RF_ERROR_LIMIT) with both figures in GB. The
 * executor checks it in prepare for the host backend, before allocating anything. */
gboolean rf_real_check_host_memory(int rank, uint64_t src_bytes, uint64_t dst_bytes, int banks,
                                   uint64_t available_bytes, GError **error);

/* --local on a GPU: TRUE when need_bytes (what of this process's ranks is still to be allocated,
 * `what` names it) fit in free_bytes (cudaMemGetInfo), else FALSE + one line (RF_ERROR_LIMIT)
 * naming both figures in GB. The executor checks it before allocating the shards and before
 * the holding stores and staging of a plan: one GPU holds every rank. */
gboolean rf_real_check_device_memory(int nranks, const char *what, uint64_t need_bytes,
                                     uint64_t free_bytes, GError **error);

#endif
