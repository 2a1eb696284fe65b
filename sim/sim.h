/* SimGrid executor: predicts the time of a refit plan on a cluster described by a topology file.
 *
 * The plan's messages become flows between GPU hosts of a generated SimGrid platform (CM02,
 * no TCP factors). Each phase is modelled with the mechanism the real system uses: the
 * gather-broadcast export as NCCL rings (a piece enters each NVLink domain once, then fans out
 * over NVLink), the broadcast as a chain pipelined in NCCL chunks and overlapped with the export
 * of the next bucket (two buffers), m2n injection, forwarding and NVLink fan-out overlapped, pack
 * and unpack on an HBM link of each GPU. Every number comes from the topology file and a
 * calibration file (sim/calibration/NAME.cal) that names the public source of each value. */
#ifndef RF_SIM_H
#define RF_SIM_H

#include "executor.h"
#include "memory.h"
#include "plan.h"
#include "staging.h"
#include <glib.h>
#include <stddef.h>

/* Which software the prediction models (`refit sim --software`): refit's own executor, or a
 * model of the published NeMo RL / NCCL M2N code (sim/models/, docs/sim.md). */
typedef enum {
  RF_SOFTWARE_REFIT,
  RF_SOFTWARE_NEMO_RL,  /* nccl_reshard refit (hybrid) and its gather + broadcast baseline */
  RF_SOFTWARE_NCCL_M2N, /* nccl-extensions reshard_model_bench (m2n) */
} RfSoftware;

/* The code path of a software model where the evidence leaves it open. */
typedef enum {
  RF_VARIANT_DEFAULT,         /* refit: "flows", its strategies as flows (an ideal estimate) */
  RF_VARIANT_PYTHON_FALLBACK, /* nemo-rl: xferdtensor_python (nccl.m2n not installed) */
  RF_VARIANT_M2N_PACK,        /* nemo-rl: nccl.m2n PACK (today's default path) */
  RF_VARIANT_XFER_V01,        /* nemo-rl: PR #2413/#2808, every parameter by NCCL Xfer v0.1 */
  RF_VARIANT_GOLDEN,   /* nemo-rl: PR #2413/#2808 as run (bf68d87): xferdtensor_golden broadcasts */
  RF_VARIANT_PACK,     /* nccl-m2n: PACK (today) */
  RF_VARIANT_RING_V01, /* nccl-m2n: v0.1 zero-copy RING, 256 KiB pipelined forwarding */
  RF_VARIANT_DIRECT,   /* nccl-m2n: DIRECT, every source to every destination */
  RF_VARIANT_EXECUTOR, /* refit: the schedule real/ runs (model/plan/schedule.h), round by round */
} RfSwVariant;

/* "refit", "nemo-rl", "nccl-m2n" (NULL: refit) and a variant name (NULL or "": the software's
 * default). refit's default is its executor (RF_VARIANT_EXECUTOR: the schedule refit run
 * executes); "flows" is its strategies as flows at calibrated rates (an ideal estimate)
 * (RF_VARIANT_DEFAULT, which a zeroed RfCalibration holds);
 * FALSE + one-line error for a name that does not exist or a variant of another software. */
gboolean rf_software_parse(const char *software, const char *variant, RfSoftware *sw,
                           RfSwVariant *v, GError **error);
const char *rf_software_name(RfSoftware s);
/* The variant's name; the default resolved for the software. */
const char *rf_variant_name(RfSoftware s, RfSwVariant v);
RfSwVariant rf_variant_resolve(RfSoftware s, RfSwVariant v);
/* Whether the software's variants apply to strategy st (an RfStrategy, or -1 for none in
 * particular): NeMo RL's are its hybrid's bulk transport, and its gather-broadcast, the
 * collective path (every tensor by packed broadcast), has none. */
gboolean rf_variant_applies(RfSoftware s, int st);
/* refit's executor model (software refit, variant executor): the schedule refit run executes,
 * built and simulated, its memory counted. */
gboolean rf_variant_is_executor(RfSoftware s, RfSwVariant v);

/* Calibration: achieved fractions of peak and software latencies. One file per topology in
 * sim/calibration/. */
typedef struct {
  char *name;                      /* topology it belongs to */
  char *path;                      /* file it came from, or "(built-in neutral)" */
  double nic_efficiency;           /* achieved / line rate per NIC */
  double nvlink_efficiency;        /* achieved / peak NVLink per GPU per direction */
  double allgather_efficiency;     /* NCCL all-gather across nodes: busbw / NIC line rate */
  double broadcast_efficiency;     /* NCCL broadcast across nodes: busbw / NIC line rate */
  double hbm_efficiency;           /* a device-to-device copy's HBM traffic (read + write) / peak */
  double message_latency_s;        /* software latency per message (NCCL call base latency) */
  double collective_base_s;        /* base latency of one NCCL collective (export path) */
  double chunk_bytes;              /* pipelining granularity of NCCL (chain fill) */
  double export_tensor_overhead_s; /* per exported tensor, beyond NCCL latencies */
  gboolean export_host_overlap;    /* export host time overlaps its collectives (per-buffer sync) */
  double m2n_tensor_overhead_s;    /* per tensor moved by m2n / p2p (reshard path software) */
  double gpu_memory_bytes;         /* for the bucket size */
  double bucket_memory_fraction;
  double bucket_max_bytes;
  int buffers;             /* alternating bucket buffers (>= 2 overlaps export and broadcast) */
  gboolean hybrid_overlap; /* hybrid: run m2n and gather-broadcast concurrently */
  double fixed_s;          /* per refit, before anything moves (setup, synchronisation) */
  /* software models (not file keys: chosen by --software / --software-variant) */
  RfSoftware software;
  RfSwVariant variant;
  /* refit's executor (the executor variant): refit run's --staging-mib, --max-ops, --slots */
  double exec_staging_bytes;
  int exec_max_ops, exec_slots;
  gboolean exec_staged;     /* refit run --staged: no pipelining across plan stages */
  gboolean exec_lane_comms; /* refit run --lane-comms: lanes on communicators of their own */
  int exec_banks; /* weight banks the staging choice counts (refit run --double-bank: 2) */
  /* refit's executor, per operation of real/'s CUDA backend (file keys [executor]) */
  double exec_kernel_launch_s; /* host launch of one copy kernel (pack, unpack) */
  double exec_event_record_s;  /* one cudaEventRecord */
  double exec_stream_wait_s;   /* one cudaStreamWaitEvent between two streams: the host's call */
  /* its GPU side: from the event's record to the waiting stream's next kernel (measured on one
   * H200, docs/real.md) */
  double exec_stream_wait_gpu_s;
  /* the host's time in a group's NCCL calls (cuda_post: group start to end and the wait for its
   * launch on a non-blocking communicator; measured on one H200, docs/real.md) */
  double exec_group_host_s;
  /* NeMo RL (sim/models/nemo_rl.c) */
  int nemo_streams;       /* NRL_REFIT_NUM_STREAMS: stages in flight on the generation side */
  double nemo_dispatch_s; /* per refit: Ray dispatch, result collection, synchronize */
  double nemo_call_s;     /* per reshard call: Python of xferdtensor and its NCCL bindings */
  double nemo_golden_dispatch_s; /* per refit, golden variant: Ray dispatch and ray.get */
  double nemo_p2p_op_s;   /* Python fallback: per send / recv of a grouped p2p, busiest rank */
  double nemo_nccl_op_s;  /* host: per NCCL operation issued from Python, busiest rank of a call */
  double vllm_finalize_s; /* per refit: process_weights_after_loading */
  /* NCCL M2N (sim/models/reshard_call.c, nccl_m2n.c) */
  double m2n_plan_s;      /* per call, NCCL Xfer v0.1 (ring-v0.1, direct, xfer-v0.1): host side */
  double m2n_pack_plan_s; /* per call, today's M2N PACK (pack, m2n-pack): host planning */
  double m2n_barrier_s;   /* per world barrier of the transfer kernel */
  int m2n_slots;          /* PACK staging slots per device */
  int m2n_max_sources, m2n_max_targets;               /* RING / PACK plan limits */
  int m2n_direct_max_sources, m2n_direct_max_targets; /* DIRECT plan limits */
  double m2n_staging_max_bytes;                       /* largest PACK staging bucket */
  double m2n_ring_chunk_bytes;                        /* v0.1 RING forwarding granularity */
  double ce_row_half_bytes; /* copy-engine strided copy: row size at half the copy rate */
  /* elastic recovery (sim/recovery.c): communicator init time at two published scales (0: no
   * figure, the destroy-and-recreate cost is unavailable) and the cost of a shrink relative to
   * an init of the same size */
  double recovery_init_small_ranks, recovery_init_small_s;
  double recovery_init_large_ranks, recovery_init_large_s;
  double recovery_shrink_fraction;
} RfCalibration;

/* One key of a calibration file, the one table that the reader (rf_calibration_load), the
 * topology overrides (rf_calibration_override) and `refit calibrate --param` share. */
typedef enum {
  RF_CAL_REAL, /* a double field */
  RF_CAL_INT,  /* an int field: a whole number in the file */
  RF_CAL_BOOL, /* a gboolean field: 0 or 1 in the file */
} RfCalKind;

typedef struct {
  const char *group, *key; /* [group] key in the file; "group.key" names it on the command line */
  RfCalKind kind;
  size_t offset;         /* of the field in RfCalibration */
  double lo, hi;         /* accepted in a file */
  double fit_lo, fit_hi; /* range `refit calibrate` searches; fit_hi == 0: not fitted */
  gboolean additive;     /* fitted: adds coefficient x value to a prediction, no re-simulation */
} RfCalibrationKey;

/* Every key of a calibration file, in file order; *n gets the count. */
const RfCalibrationKey *rf_calibration_keys(int *n);
/* The key named "group.key", NULL when there is none. */
const RfCalibrationKey *rf_calibration_key(const char *name);
/* The double field of a RF_CAL_REAL key in c. */
double *rf_calibration_real(RfCalibration *c, const RfCalibrationKey *k);
/* One "group.key" = text override (a topology's [calibration] line), checked like the file:
 * FALSE + one-line error naming origin when name is not a key or text is not a value in its
 * bounds (a whole number for whole-number keys); c is unchanged then. */
gboolean rf_calibration_override(RfCalibration *c, const char *origin, const char *name,
                                 const char *text, GError **error);

/* Neutral calibration: efficiencies 1, software latencies 0, NeMo RL bucket rule. */
void rf_calibration_defaults(RfCalibration *c);
/* Load NAME (sim/calibration/NAME.cal under rf_data_dir()) or a path. FALSE + one-line error. */
gboolean rf_calibration_load(RfCalibration *c, const char *name_or_path, GError **error);
/* Calibration for a topology: its file when one exists, else the neutral defaults
 * (*found = FALSE). FALSE + error only for a file that exists but is malformed. */
gboolean rf_calibration_for_topology(RfCalibration *c, const RfTopology *t, gboolean *found,
                                     GError **error);
void rf_calibration_clear(RfCalibration *c);
/* Bucket size in bytes: min(fraction x GPU memory, max). */
double rf_calibration_bucket_bytes(const RfCalibration *c);
/* How the calibrated software runs a refit, for the memory model (model/plan/memory.h): refit's
 * executor at its staging bound, lanes, operation bound and --staged, with banks weight banks;
 * NeMo RL's gather + broadcast (software nemo-rl) with its reused buckets (bucket, buffers). */
void rf_calibration_memory_run(const RfCalibration *c, int banks, RfMemoryRun *out);
/* refit's executor (sim/models/refit_executor.c): the costs its staging choice weighs
 * (model/plan/staging.h) from c, and the choice for plan as refit run makes it: exec_staging_bytes
 * 0, exec_slots 0 and exec_max_ops RF_SCHEDULE_AUTO_OPS are chosen, other values kept. */
void rf_calibration_staging_costs(const RfCalibration *c, RfStagingCosts *out);
void rf_calibration_staging(const RfCalibration *c, const RfPlan *plan, RfStaging *out);
/* The memory model's run (rf_memory_of_run) of plan as refit run executes it on this calibration:
 * the staging bound, lanes and operation bound chosen as refit run chooses them (with banks
 * weight banks; the chosen values into *staging when not NULL), then rf_calibration_memory_run.
 * Every command's memory line comes from here, so plan, sim, advise, step and run agree. */
void rf_calibration_memory_run_plan(const RfCalibration *c, const RfPlan *plan, int banks,
                                    RfMemoryRun *out, RfStaging *staging);

/* What simulating plan with this software and variant costs, in relative units, for running the
 * largest first: the segments of refit run's schedule (at the calibration's staging bound; where
 * it is chosen, the default raised as the choice raises it, rf_staging_fitting) plus the plan's
 * transfers where refit's executor model simulates it, else the plan's messages (the flows the
 * other models simulate, the flow model where the schedule is too large to simulate). Cost: a
 * pass over the plan's messages per bound tried (at most four). */
uint64_t rf_sim_work(const RfCalibration *c, const RfPlan *plan, RfSoftware sw, RfSwVariant v);

/* What runs refit's executor model (the other models always run on SimGrid). */
typedef enum {
  RF_SIM_ENGINE_EVENTS,  /* the default: sim/events.c, its own discrete-event run of the rank
                            programs, local max-min sharing; an exact platform (a GPU per host) at
                            every size */
  RF_SIM_ENGINE_SIMGRID, /* an actor per rank on SimGrid (its max-min sharing); hosts of up to 8
                            GPUs above SIM_EXEC_EXACT_RANKS ranks */
} RfSimEngine;

/* "events" / "simgrid"; NULL for another value. */
const char *rf_sim_engine_name(RfSimEngine e);
/* The engine of a name (events, simgrid); FALSE for another. */
gboolean rf_sim_engine_parse(const char *name, RfSimEngine *out);

typedef struct {
  RfCalibration calib;    /* copied by rf_sim_executor_new (strings duplicated) */
  RfSimEngine engine;     /* of refit's executor model */
  int max_hosts_pairs;    /* coarsen GPUs into groups above this many distinct flows (0: 15000) */
  int group;              /* force GPUs per simulated host (0: automatic, 1: never coarsen) */
  gboolean keep_platform; /* keep the generated XML (path printed on stderr) */
  gboolean progress;      /* refit's executor model: a progress line on stderr every 10 s of a
                             simulation longer than 10 s */
  gboolean exec_fallback; /* refit's executor model as the default: where its schedule has more
                             groups than one simulation holds, run the flow model (the plan's
                             bound) instead, and say why (RfSimStats.exec_fallback); FALSE: fail */
} RfSimOptions;

/* Per-link accounting of a run (for the report). */
typedef struct {
  char *name;
  double bytes;
  double bandwidth_Bps;
  double busy_s; /* bytes / bandwidth */
} RfSimLink;

typedef struct {
  int hosts;      /* simulated hosts */
  int group;      /* GPUs per host */
  uint64_t flows; /* distinct flows simulated */
  RfSimLink *top; /* busiest links, descending busy_s */
  int ntop;
  double wall_s; /* simulator wall time */
  /* what the gather-broadcast model assumed (0 without a gather-broadcast part) */
  double export_latency_s; /* NCCL latencies + per-tensor software time of the export */
  double export_tensors;   /* checkpoint tensors exported */
  double export_calls;     /* Megatron parameters exported (collective rounds) */
  double export_pace_s;    /* duration the overlapped export + broadcast step is paced to */
  double nbuckets, bucket_bytes;
  double m2n_tensors; /* checkpoint tensors moved by m2n / p2p */
  /* software models: reshard calls and the serial software time the model put in steps */
  double sw_calls, sw_software_s;
  /* refit's executor model: the inference memory of the schedule it simulated (by round) */
  gboolean have_exec_mem;
  RfMemory exec_mem;
  /* refit's executor model was not simulated (RfSimOptions.exec_fallback): why, one line; the
   * figures are the flow model's. NULL otherwise. */
  char *exec_fallback;
  RfSimEngine engine; /* what ran the simulation: RF_SIM_ENGINE_EVENTS or _SIMGRID */
} RfSimStats;

/* The SimGrid executor. opt may be NULL (calibration of the problem's topology). */
RfExecutor *rf_sim_executor_new(const RfSimOptions *opt);
/* refit's executor variant: the next runs use this staging bound, lanes and operation bound
 * (chosen for the plan by rf_calibration_memory_run_plan) instead of choosing them again (a pass
 * over the plan's memory each); NULL: choose them (the default). */
void rf_sim_executor_use_staging(RfExecutor *ex, const RfStaging *staging);
/* Statistics of the executor's last run (NULL before one). Owned by the executor. */
const RfSimStats *rf_sim_executor_stats(const RfExecutor *ex);
/* The memory of the schedule refit's executor model simulated in ex's last run (refit run's
 * schedule, counted by rf_memory_of_schedule), with banks weight banks: what sim, advise and
 * step show for that run. FALSE when the run counted none (another model, or the flow model
 * standing in): the caller counts rf_memory_of_run. */
gboolean rf_sim_executor_memory(const RfExecutor *ex, int banks, RfMemory *out);

/* Fitting calibration keys to measured refit times (sim/fit.c): coordinate descent with a
 * golden-section search per key, on the mean squared log error. */
typedef struct {
  const RfProblem *pb;       /* borrowed */
  const RfPlan *plan;        /* borrowed */
  const RfCalibration *base; /* borrowed: the calibration the row starts from */
  double measured_s;         /* > 0 */
  gboolean exec_fallback;    /* refit's executor as the default model: the flow model where its
                                schedule is too long to simulate (RfSimOptions.exec_fallback) */
} RfFitRow;

typedef struct RfFit RfFit;

/* A fit of keys[nkeys] (fittable RF_CAL_REAL keys) to rows[n] (copied; what they point to must
 * outlive the fit). Simulates every row once with its base calibration. NULL + one-line error
 * when a row cannot be simulated or a key cannot be fitted. Cost: n simulations. */
RfFit *rf_fit_new(const RfFitRow *rows, int n, const RfCalibrationKey *const *keys, int nkeys,
                  GError **error);
void rf_fit_free(RfFit *f);
/* Row i predicted with its base calibration (no fitted values). */
double rf_fit_default(const RfFit *f, int i);
/* Fit on the rows with use[i] (NULL: all), iters golden-section steps per key; the fitted
 * values go to x[nkeys]. Re-simulates unless every key is additive. */
void rf_fit_run(RfFit *f, const gboolean *use, int iters, double *x);
/* Row i predicted with the keys at x; -1 when the simulation failed (rf_fit_error says why). */
double rf_fit_predict(RfFit *f, int i, const double *x);
/* Simulations run so far. */
long rf_fit_simulations(const RfFit *f);
/* Why row i was predicted by the flow model instead of refit's executor (RfFitRow.exec_fallback;
 * its first simulation), NULL when it was not. Owned by the fit. */
const char *rf_fit_fallback(const RfFit *f, int i);
/* The first simulation failure during rf_fit_run / rf_fit_predict, NULL when none. Owned. */
const GError *rf_fit_error(const RfFit *f);

#endif
