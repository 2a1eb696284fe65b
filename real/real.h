/* The real executor: runs a plan's transfers on real memory, one process per rank (MPI) or all
 * ranks in one process (--local), and checks every destination element afterwards.
 *
 * Backends share one code path (real/engine.c): "host" uses host memory and MPI point-to-point,
 * "cuda" uses device memory, CUDA kernels for pack / unpack / fill / verify and grouped NCCL
 * send / recv. Both fill the same RfResult as the simulator. */
#ifndef RF_REAL_H
#define RF_REAL_H

#include "executor.h"
#include "memory.h"
#include "plan.h"
#include "staging.h"
#include <glib.h>
#include <stdint.h>

typedef struct {
  char *backend;          /* "host" or "cuda" */
  gboolean local;         /* every rank in this one process (single-GPU mode for cuda) */
  int warmup;             /* untimed refits before the timed ones */
  int iters;              /* timed refits; each one is a new training step */
  uint64_t staging_bytes; /* bound on the send (and on the receive) staging of one rank, per
                           * lane; 0: chosen (model/plan/staging.h, from costs) */
  int max_ops;            /* send + receive operations of one rank in one group; 0 (the
                           * default): rf_schedule_max_ops of the plan */
  int slots;              /* staging lanes: groups a rank keeps in flight (1: one at a time);
                           * 0: chosen */
  gboolean lane_comms;    /* each lane's groups on a communicator and stream of its own (cuda;
                           * host: the emulated network starts a group after its own lane's
                           * previous group only); FALSE: one communicator, groups in post order.
                           * With local no communicator moves data: the staging choice and the
                           * memory count still take it (the run under MPI) */
  RfStagingCosts costs;   /* what the choice weighs (refit run: the topology's calibration) */
  gboolean staged;        /* m2n / p2p too: one plan stage after another (no pipelining) */
  gboolean double_bank;   /* destinations twice: the refit writes a second bank, swapped in after
                           * verification; FALSE (the default): in place, one bank written while
                           * generation is paused, stale (not served) until verified */
  double timeout_s;       /* no progress for this long: the stage has failed */
  int fail_rank;          /* test hook: this rank stops responding at fail_stage (-1: none) */
  int fail_stage;         /* plan stage index, or -1 with fail_label */
  char *fail_label;       /* test hook: the first plan stage of this kind ("fanout"), or NULL */
  gboolean fail_kill;     /* test hook: SIGKILL itself mid-stage in the last refit, not hang */
  gboolean plan_only;     /* memory per rank only: no buffers, no data moved, every rank here */
  int corrupt_rank;       /* test hook: this rank loses one received chunk in the last refit of
                           * each run (-1: none) */
  double op_delay_s;      /* test hook (host): every copy list and group lasts at least this */
  GArray *trace;          /* test hook: the schedule ops (RfRealTrace) each rank issued in the
                           * last refit, in order; NULL: not recorded */
} RfRealOptions;

/* One schedule operation a rank issued (RfRealOptions.trace). */
typedef struct {
  int rank;
  int round;
  int kind; /* RfSchedOpKind */
  int lane;
} RfRealTrace;

/* Defaults: host backend, 1 warm-up, 5 iterations, 32 MiB staging, ops from the topology, 2 staging
 * lanes, 60 s timeout. */
void rf_real_options_init(RfRealOptions *o);

/* TRUE when the named backend was compiled in ("host" always, "cuda" with CUDA + NCCL). */
gboolean rf_real_backend_built(const char *name);

/* An executor for opt->backend; opt is copied. The world must have started
 * (rf_real_world_start) unless opt->local. NULL + one-line error for an unknown or missing
 * backend. */
RfExecutor *rf_real_executor_new(const RfRealOptions *opt, GError **error);

/* What a real executor measured beyond RfResult, for the run table. */
typedef struct {
  int nstages;            /* == RfResult.nstages (one per label: export, broadcast, inject, ...) */
  double *min_s, *max_s;  /* per result stage: spread of its duration over the timed iterations */
  int iters;              /* timed iterations that completed */
  uint64_t rounds;        /* groups of send / receive operations (all stages) */
  uint64_t hold_bytes;    /* largest holding store of one rank (received pieces kept to forward) */
  uint64_t staging_bytes; /* largest send + receive staging of one rank (every lane) */
  int slots;              /* staging lanes per rank and direction */
  RfStaging staging;      /* the staging bound, lanes and operation bound the run used */
  uint64_t src_bytes;     /* largest source shards of one rank */
  uint64_t dst_bytes;     /* largest destination shards of one rank (one bank) */
  int banks;              /* destination banks: 1 in place, 2 double bank */
  uint64_t rank_bytes;    /* largest source + banks x destination + holding + staging of one rank */
  uint64_t process_bytes; /* the same summed over this process's ranks (--local: every rank) */
  uint64_t infer_alloc_bytes;     /* the fullest inference rank as allocated: banks x destination +
                                   * holding (first-fit) + staging (--memory: every rank is here) */
  uint64_t infer_hold_bytes;      /* largest holding store of an inference rank (the memory model's
                                   * hold_bytes counts these; a training rank's, gather-broadcast's
                                   * export, is not an inference GPU's) */
  uint64_t infer_hold_live_bytes; /* the most bytes an inference rank holds at once: the holding
                                   * store less its first-fit gaps (what the model counts) */
  RfMemory memory;      /* the memory model's count of the inference GPUs (model/plan/memory.h,
                         * rf_memory_of_schedule of this run's schedule, banks as the run) */
  gboolean serving;     /* after a run: a bank holds verified weights and may be served */
  uint64_t served_step; /* the step it holds, when serving */
  int process_ranks;    /* ranks in this process (--local: all of the plan, else 1) */
  uint64_t wrong_new;   /* elements of the new weights that differ from the pattern */
  uint64_t wrong_old;   /* elements of the previous weights changed during the refit */
} RfRealSpread;

/* Valid after a run of a real executor, until the next run or destroy. Owned by the executor. */
const RfRealSpread *rf_real_spread(const RfExecutor *ex);

/* An emulated network for the host backend (refit run --emulate-network, docs/real.md): each
 * rank's sends and receives are paced, per direction, at the NVLink rate when the peer sits in
 * its NVLink domain and at the NIC rate when it does not, one token bucket per rank, direction
 * and kind; every message also arrives a latency after its last byte left. */
typedef struct {
  double nvlink_Bps, nic_Bps;             /* bytes per second, per rank and direction */
  double nvlink_latency_s, nic_latency_s; /* per message */
  int nranks;
  const int *domain; /* NVLink domain of each world rank (nranks); copied */
} RfRealNetEmulation;

/* Process-wide: host backend devices opened after this call pace their transfers as *e says (e
 * is copied); NULL turns the emulation off. Sends to itself are never paced; --local runs
 * (no MPI) are not either. */
void rf_real_emulate_network(const RfRealNetEmulation *e);

/* The process world of a run (real/run.c). */
typedef struct {
  int rank, world; /* MPI world (0 / 1 without MPI) */
  gboolean mpi;    /* MPI_Init ran */
} RfRealWorld;

/* MPI_Init unless local, then this rank and the world size in *out. Call it after every option
 * is checked: a bad option must not start MPI. FALSE + error when MPI cannot start. */
gboolean rf_real_world_start(int *argc, char ***argv, gboolean local, RfRealWorld *out,
                             GError **error);
/* MPI_Finalize when MPI_Init ran; harmless otherwise. */
void rf_real_world_end(void);
/* Take the whole job down (MPI_Abort), or exit(code) without MPI. */
G_GNUC_NORETURN void rf_real_world_abort(int code);
/* Collective (every rank calls it): exchange host names and say in one line whether the ranks
 * sit in the plan's NVLink domains. Caller frees. */
char *rf_real_world_placement(const RfProblem *pb, double timeout_s);

/* A search spread over the ranks (refit advise): no timeouts, a waiting rank sleeps. Without
 * MPI (or in a world of one) they act on this process alone. FALSE + error on an MPI failure:
 * the caller takes the job down (rf_real_world_abort), as the others may wait for it. */
/* Collective: every rank's block of `bytes` into all (world x bytes, in rank order). */
gboolean rf_real_world_allgather(const void *mine, void *all, size_t bytes, GError **error);
/* A minimum shared as it improves: post sends v to every other rank without waiting; poll lowers
 * *v to the smallest value that has arrived; end (collective, once) takes what is still in
 * flight and completes the sends. */
gboolean rf_real_world_min_post(double v, GError **error);
gboolean rf_real_world_min_poll(double *v, GError **error);
gboolean rf_real_world_min_end(double *v, GError **error);

#endif
