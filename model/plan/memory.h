/* Memory of the inference GPUs: the one memory model of refit. `refit plan`, `sim`, `advise`,
 * `step` and `run --memory` all count with rf_memory_of_run (or, where they already hold refit
 * run's schedule, with rf_memory_of_schedule, the function it calls), so they print the same
 * figure, in GB (1e9 bytes) in every command's text and in bytes in JSON (`infer_peak_bytes`).
 *
 * What an inference GPU holds while the refit runs, as `refit run` allocates it:
 *   weights: the local buffers of the vLLM layout (padding and fusion included), exact; once
 *            (in place, refit run's default: generation is paused and the refit writes the
 *            served buffers) or twice (--double-bank: the refit writes a second bank, swapped in
 *            after verification);
 *   holding: a received piece the GPU sends on later (or receives only to relay), live from the
 *            round its bytes arrive to the last round of those sends, as refit run's schedule
 *            orders them (staged schedules: by plan stage);
 *   staging: send and receive staging, each the rank's fullest round (the schedule's send_max /
 *            recv_max) times the lanes;
 *   NCCL:    the point-to-point buffers NCCL allocates on the GPU for the connections refit run's
 *            sends and receives open, per communicator (the data communicator, and on lane
 *            communicators, refit run's default, one per further lane, split without sharing
 *            resources: as many as the lanes), held for the
 *            communicator's life: NCCL connects a peer at the first group that uses it, per
 *            channel and direction (NVIDIA/nccl v2.27.7-1, src/enqueue.cc, src/group.cc), so
 *            they scale with the distinct peers a GPU meets (rf_memory_nccl_conn_bytes below).
 * Not counted: NCCL's fixed structures of a communicator (channels' peer tables, work FIFO: host
 * memory or O(ranks) per channel, not published as a figure), the CUDA context, copy lists.
 * The peak of holding + staging over the rounds is the extra. `refit run --memory` lays the
 * holding out with a first-fit allocator: above this count by its alignment and fragmentation
 * only (tests/test_memory.c: within 2% of the fullest GPU). */
#ifndef RF_MEMORY_H
#define RF_MEMORY_H

#include "layout.h"
#include "plan.h"
#include "schedule.h"
#include <stdint.h>

/* Where a count came from (RfMemory.from). */
typedef enum {
  RF_MEMORY_FROM_WEIGHTS,  /* weights only (no plan) */
  RF_MEMORY_FROM_SCHEDULE, /* refit run's schedule of the plan: what refit run allocates */
  RF_MEMORY_FROM_STAGES,   /* the plan's stages: the schedule was over RfMemoryRun.max_segments */
  RF_MEMORY_FROM_BUCKETS,  /* NeMo RL's packed broadcast: its reused buckets (gather-broadcast) */
} RfMemoryFrom;

typedef struct {
  uint64_t weights_bytes; /* largest inference weights of one GPU (one bank) */
  int banks;              /* weight banks counted: 1 in place, 2 double bank */
  int weights_rank;       /* the global rank holding them */
  uint64_t hold_bytes;    /* largest holding of one inference GPU (0 before a plan) */
  uint64_t staging_bytes; /* largest send + receive staging of one inference GPU */
  uint64_t nccl_bytes;    /* largest NCCL point-to-point buffers of one inference GPU */
  int comms;              /* communicators counted (1, or the lanes with --lane-comms) */
  uint64_t extra_bytes;   /* largest holding + staging + NCCL of one inference GPU */
  uint64_t peak_bytes;    /* banks x largest weights + the largest extra: the fullest GPU */
  int peak_rank;
  uint64_t own_peak_bytes; /* banks x weights + holding + staging of the fullest inference GPU
                            * by what refit run allocates itself (NCCL's buffers aside): what
                            * run --memory compares its allocation with */
  double gpu_memory_bytes; /* the topology's [gpu] memory_GB in bytes; 0 when unknown */
  RfMemoryFrom from;
} RfMemory;

/* How the refit runs, for rf_memory_of_run. */
typedef struct {
  uint64_t staging_bytes; /* refit run --staging-mib, bytes per rank, direction and lane */
  int max_ops;            /* --max-ops (RF_SCHEDULE_AUTO_OPS: from the plan) */
  int slots;              /* --slots */
  gboolean staged;        /* --staged: no pipelining across plan stages */
  int banks;              /* 1 in place (refit run's default), 2 --double-bank */
  gboolean lane_comms;    /* a communicator per lane (NCCL buffers per lane): refit run's default,
                           * but FALSE after rf_memory_run_init (rf_calibration_memory_run sets
                           * it from the calibration) */
  uint64_t max_segments;  /* build the schedule only up to this many segments (0: always);
                           * above it the plan's stages are counted instead (from: STAGES) */
  /* NeMo RL's gather + broadcast (bucket_bytes > 0, gather-broadcast plans only): the packed
   * broadcast reuses `buffers` buckets of bucket_bytes (min(NRL_REFIT_BUFFER_MEMORY_RATIO x GPU
   * memory, 5 GiB)), each up to one tensor larger, instead of refit run's holding store */
  uint64_t bucket_bytes;
  int buffers;
} RfMemoryRun;

/* Segments above which plan, sim, advise and step count the plan's stages instead of building
 * refit run's schedule (seconds per million segments on one core); run --memory has no limit. */
#define RF_MEMORY_MAX_SEGMENTS UINT64_C(2000000)

/* NCCL's point-to-point buffers at its defaults (NVIDIA/nccl v2.27.7-1, commit 593de54e; the same
 * constants 2.18 - 2.30):
 * - NVLink peers (P2P transport, src/transport/p2p.cc): the receiving GPU allocates per channel a
 *   4 KiB control block, the LL (512 KiB), LL128 (4,915,200 B) and SIMPLE (NCCL_BUFFSIZE, 4 MiB)
 *   buffers, rounded up to the 2 MiB cuMem granularity: 10 MiB; the sending GPU its 4 KiB
 *   control block, rounded up: 2 MiB (NVIDIA/nccl issue #1685 logs both allocations). P2P read
 *   mode, which moves SIMPLE to the sender, is on only for sm80 (src/graph/paths.cc).
 * - network peers (NET transport, src/transport/net.cc): point-to-point connections share a send
 *   pool and a receive pool per GPU and communicator (not per peer), each p2pnChannels x 16 steps
 *   x p2pChunkSize (128 KiB with more than one node), on the GPU with GPUDirect RDMA (the send
 *   side too, by default on sm >= 80).
 * - channels: p2pnChannels is a power of two up to MAXCHANNELS (32 before 2.25; issue #1685 shows
 *   32 channels per peer on 8 x H100, taken here); per peer, in a world of more than one NVLink
 *   domain, 2 for a network peer, halved to 1 while 2 x ranks > 4 x p2pnChannels, and the
 *   smallest over the peers for every peer (src/graph/paths.cc: NVLink peers take the same);
 *   within one domain, up to p2pnChannels. */
#define RF_NCCL_P2P_RECV_CONN_BYTES (UINT64_C(10) << 20)
#define RF_NCCL_P2P_SEND_CONN_BYTES (UINT64_C(2) << 20)
#define RF_NCCL_NET_POOL_CHANNEL_BYTES (UINT64_C(16) * (UINT64_C(128) << 10))
#define RF_NCCL_P2P_CHANNELS 32

/* refit run's defaults: in place, default staging, lanes and operation bound, pipelined where
 * refit run pipelines, RF_MEMORY_MAX_SEGMENTS, no buckets. */
void rf_memory_run_init(RfMemoryRun *run);
/* The one model: the inference memory of plan as refit run (run) executes it: builds refit run's
 * schedule (sizes only where it is staged) and counts it (rf_memory_of_schedule), with run->banks
 * weight banks. FALSE + error only when the schedule cannot be built (as refit run would fail).
 * Cost: the schedule's build (segments), or rf_memory_of_plan_staging's above max_segments. */
gboolean rf_memory_of_run(const RfPlan *plan, const RfMemoryRun *run, RfMemory *out,
                          GError **error);
/* TRUE when rf_memory_of_run(plan, run) builds refit run's schedule (what a caller that builds
 * that schedule anyway can count instead, with rf_memory_of_schedule): no buckets, and the
 * schedule within run->max_segments. Cost: the plan's messages. */
gboolean rf_memory_run_builds(const RfPlan *plan, const RfMemoryRun *run);
/* The rf_schedule_build flags of a schedule built to be counted: pipelined, or staged and sizes
 * only, unless NCCL's buffers per lane communicator need its rounds (which lane meets which
 * peer). refit run --memory and rf_memory_of_run both build so. */
static inline unsigned rf_memory_count_flags(gboolean staged, gboolean lane_comms) {
  return !staged ? RF_SCHEDULE_PIPELINED : lane_comms ? 0 : RF_SCHEDULE_SIZES_ONLY;
}
/* NCCL's channels per point-to-point peer in pb's world (the constants above). */
int rf_memory_nccl_channels_per_peer(const RfProblem *pb);
/* Count banks (1 or 2) weight banks in m: peak_bytes moves by the difference. */
void rf_memory_set_banks(RfMemory *m, int banks);

/* Weights of the inference side of pb, one bank (extra fields 0, peak = weights). Cost: buffers x
 * their mesh positions (each shard's size is computed once per buffer). */
void rf_memory_weights(const RfProblem *pb, RfMemory *out);
/* The plan's stage estimate (what rf_memory_of_run falls back to above max_segments): a piece a
 * GPU receives and forwards is live from the stage it arrives to the last stage the GPU sends a
 * piece of that part; staging is the largest message each way, capped at the staging bound
 * (pipelined: its NVLink share too), times the lanes. At refit run's default staging bound and
 * lanes. Cost: transfers + ranks on a plan's first count, which keeps the holding with the plan
 * (RfPlan.derived: it depends on no bound or lanes); messages + ranks after. */
void rf_memory_of_plan(const RfPlan *plan, RfMemory *out);
/* The same for a staging bound (bytes per rank, direction and lane) and a number of lanes; NCCL's
 * buffers of lane_comms' extra communicators connect every peer of the rank on every lane (an
 * upper bound: no rounds to say which lane meets which peer). */
void rf_memory_of_plan_staging(const RfPlan *plan, uint64_t staging_bytes, int slots,
                               gboolean lane_comms, RfMemory *out);
/* The count of a schedule refit run executes (pipelined: rounds instead of stages; a schedule
 * built for sizes only is fine when it is staged): a received piece that a later send of its
 * rank reads (real/'s rule: the first received piece of the part holding all of the sent box,
 * else every one meeting it) is held from the first round its bytes arrive to the last round of
 * those sends; staging is the lanes times the rank's fullest round each way (sg->send_max,
 * recv_max); NCCL's buffers of the data communicator, and with lane_comms of each lane's
 * communicator for the peers its rounds meet (a schedule built for sizes only: every peer on
 * every lane). One bank (rf_memory_set_banks for two). What `refit run --memory` lays out per rank
 * (NCCL's buffers aside), less its allocator's alignment and fragmentation. Cost: transfers +
 * segments, and the received pieces of a part scanned per send of it. */
void rf_memory_of_schedule(const RfPlan *plan, const RfSchedule *sg, gboolean lane_comms,
                           RfMemory *out);
/* Tests: the most bytes rf_memory_of_schedule's dense (inference rank, part) table may take
 * (default 256 MB; above it, and at 0, a map: the same counts, slower). Not for concurrent use. */
void rf_memory_set_table_budget(uint64_t bytes);
/* TRUE when the topology gives a GPU memory and peak_bytes exceeds it. */
gboolean rf_memory_exceeds(const RfMemory *m);
/* One line: "inference GPU: weights W GB [x 2 banks] + refit extra E GB (holding H, staging S)
 * = P GB of M GB", in GB (1e9 bytes) as every command prints memory; caller frees. */
char *rf_memory_format(const RfMemory *m);
/* What the count is (one phrase: "in place, refit run's schedule", ...), static. */
const char *rf_memory_from_name(const RfMemory *m);
/* The JSON name of m->from ("schedule", "plan", "buckets", "weights"), static. */
const char *rf_memory_from_key(const RfMemory *m);

#endif
