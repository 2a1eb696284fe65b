/* The real executor: runs a plan's transfers on real memory, one process per rank (MPI) or all
 * ranks in one process (--local), and checks every destination element afterwards.
 *
 * Backends share one code path (real/engine.c): "host" uses host memory and MPI point-to-point,
 * "cuda" uses device memory, CUDA kernels for pack / unpack / fill / verify and grouped NCCL
 * send / recv. Both fill the same RfResult as the simulator. */
#ifndef RF_REAL_H
#define RF_REAL_H

#include "executor.h"
#include <glib.h>
#include <stdint.h>

typedef struct {
  char *backend;          /* "host" or "cuda" */
  gboolean local;         /* every rank in this one process (single-GPU mode for cuda) */
  int warmup;             /* untimed refits before the timed ones */
  int iters;              /* timed refits; each one is a new training step */
  uint64_t staging_bytes; /* bound on the send (and on the receive) staging of one rank */
  int max_ops;            /* send + receive operations of one rank in one group */
  double timeout_s;       /* no progress for this long: the stage has failed */
  int fail_rank;          /* test hook: this rank stops responding at fail_stage (-1: none) */
  int fail_stage;
  gboolean plan_only; /* memory per rank only: no buffers, no data moved, every rank here */
  int corrupt_rank;   /* test hook: this rank loses one received chunk in the last refit of
                       * each run (-1: none) */
} RfRealOptions;

/* Defaults: host backend, 1 warm-up, 5 iterations, 64 MiB staging, 32 ops, 60 s timeout. */
void rf_real_options_init(RfRealOptions *o);

/* TRUE when the named backend was compiled in ("host" always, "cuda" with CUDA + NCCL). */
gboolean rf_real_backend_built(const char *name);

/* An executor for opt->backend; opt is copied. The MPI bootstrap (rf_run_command) must have run
 * unless opt->local. NULL + one-line error for an unknown or missing backend. */
RfExecutor *rf_real_executor_new(const RfRealOptions *opt, GError **error);

/* `refit run ARGS...` (argv[0] == "run"): MPI_Init, world check, one refit per strategy,
 * table / CSV / JSON on rank 0. Returns the process exit code: 0 only when every element
 * arrived right on every rank. */
int rf_run_command(int argc, char **argv);

#endif
