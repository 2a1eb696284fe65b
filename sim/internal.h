/* Internals of the SimGrid executor: the flow program (what the simulator runs) and the engine. */
#ifndef RF_SIM_INTERNAL_H
#define RF_SIM_INTERNAL_H

#include "schedule.h"
#include "sim.h"
#include "staging.h"
#include <stdint.h>

/* One flow: bytes from one simulated host to another, started offset_s after its step starts.
 * Its phase is the plan's phase (RfPhase) of the mechanism it models: EXPORT (PP broadcast +
 * TP/EP all-gather as NCCL rings), BROADCAST (chain broadcast of packed buckets), INJECT (m2n /
 * p2p copies from a source holder), FORWARD (m2n domain-to-domain forwarding), FANOUT (m2n
 * NVLink fan-out). */
typedef struct {
  int32_t src, dst;
  uint8_t phase; /* RfPhase */
  uint8_t pad_;
  uint16_t pad2_;
  uint32_t step;
  double bytes;
  double offset_s;
  double rate_Bps; /* upper bound on its rate (0: none): the pace of a pipelined producer */
  double weight;   /* simulated bytes per payload byte (NCCL collective overhead on the NIC) */
} SimFlow;

/* Steps one simulation holds: software models take a few per pipeline stage, refit's executor
 * one per group. The step arrays grow as steps are added (about 130 bytes a step: SimStep, its
 * phase shares, its start and end in SimOutcome): 2^20 steps would take 136 MB. Up to 2026-12-05
 * the arrays were fixed and SimFlow.step 16 bits: 65,535 steps. */
#define SIM_MAX_STEPS (1 << 20)
/* refit's executor simulation on SimGrid (--engine simgrid): exact (an actor per rank) up to this
 * many ranks; above, hosts of up to SIM_EXEC_COARSE_GROUP GPUs (docs/sim.md: measured against the
 * exact model). The events engine (sim/events.c, the default) is exact at every size. */
#define SIM_EXEC_EXACT_RANKS 1024
/* refit's executor simulation: the most segments a schedule it builds may hold (a placement costs
 * about 40 bytes a segment: Kimi K3 m2n on 1,024 + 1,024 GPUs, 22.9 M, builds in 3.4 GB); above
 * it the row is refused before the build, as one whose groups exceed SIM_MAX_STEPS
 * (DeepSeek-V3's pipelined gather-broadcast, 245 M segments and 102,395 groups, took 9.6 GB and
 * 111 s to build only to be refused) */
#define SIM_EXEC_MAX_SEGMENTS RF_STAGING_MAX_SEGMENTS /* what a chosen bound stays within */
#define SIM_EXEC_COARSE_GROUP 8
#define SIM_MAX_LANES 64     /* concurrent streams (lanes) of a program (nemo.streams <= 64) */
#define SIM_DEPTH_CLASSES 64 /* pipeline depth classes kept exact */

/* Steps of a lane run one after another (all hosts of the lane meet at a barrier between two
 * steps); lanes run concurrently. A join step starts only when every lane has finished all of
 * its earlier steps (a torch.cuda.synchronize() across streams). */
typedef struct {
  int lane;
  gboolean join;
  double pre_s;  /* software time before the flows start */
  double post_s; /* software time after the last flow ends */
  double host_s; /* host time issuing the step's work ahead of the GPU (no per-call sync): the
                  * step lasts at least this long, max(host, pre + flows + post) */
  char name[32]; /* "group.part": the timeline shows one bar per group */
} SimStep;

/* refit's executor (sim/models/refit_executor.c): every rank's program of the schedule
 * (model/plan/schedule.h), run by one actor per rank (engine.c) instead of the steps' lanes. */
typedef struct {
  int32_t peer;  /* destination rank */
  uint8_t phase; /* RfPhase */
  uint8_t pad_[3];
  double bytes;
} SimExecSend;

typedef struct {
  int32_t round, step;        /* schedule round, program step (timeline) */
  uint32_t send_first, nsend; /* into SimExec.sends */
  uint32_t nrecv;             /* receives from other ranks */
  int32_t need;               /* the round to have unpacked before packing this one (-1) */
  double pack_s, unpack_s;    /* copies on the rank's copy stream */
} SimExecRound;

typedef struct {
  int nranks;
  int *host;             /* per rank: simulated host (-1: no GPU) */
  uint64_t *round_first; /* nranks + 1: the rank's rounds, ascending */
  SimExecRound *rounds;
  SimExecSend *sends;
  /* per round (as rounds): the GPU time of its group's self-sends, NCCL copying them from the
   * send staging to the receive staging on the communication stream at the device copy rate
   * (the group lasts at least this long from its post); NULL when no round has a self-send */
  double *self_s;
  uint64_t *prog_first; /* nranks + 1 */
  RfSchedOp *prog;      /* every rank's program */
  double launch_s;      /* host time to post one group */
  double setup_s;       /* per refit, before the first operation (calibration fixed_s) */
  gboolean lane_comms;  /* refit run --lane-comms: each lane's groups on a communicator and
                         * stream of its own (a rank's groups on different lanes at once); FALSE:
                         * one communication stream, a rank's groups one after another */
} SimExec;

/* When the group of round i (an index into SimExec.rounds) posted at `posted` ends at the
 * earliest: the post plus the copy of its self-sends (SimExec.self_s), or the post without any;
 * both engines wait for it. */
static inline double sim_exec_self_end(const SimExec *e, uint64_t i, double posted) {
  return e->self_s ? posted + e->self_s[i] : posted;
}

typedef struct {
  int group; /* GPUs per simulated host */
  int nhosts;
  int *host_gpu;   /* first GPU of each host */
  int *host_ngpus; /* GPUs of the plan on each host */
  int gpus_per_domain;
  SimStep *steps; /* nsteps of steps_cap (sim_add_step) */
  int nsteps, steps_cap;
  int nlanes;
  GArray *flows; /* SimFlow, sorted by (step, src, offset) after sim_program_build */
  double phase_bytes[RF_PHASE_COUNT];
  /* Link parameters in bytes/s and seconds (per simulated host, already x group). */
  double nvl_Bps, nic_Bps, hbm_Bps, leaf_Bps;
  double nvl_lat_s, nic_lat_s, sw_lat_s;
  gboolean leaves; /* oversubscribed fabric: leaf uplinks modelled */
  int nleaves;
  int *host_leaf;
  double *link_scale; /* per link: capacity factor that keeps a group's busiest GPU (<= 1) */
  double *step_scale; /* per step x link: the same factor for the bytes of that step */
  double (*frac)[RF_PHASE_COUNT]; /* per step (as steps): share of a phase's bytes moved in it */
  double inflate[RF_PHASE_COUNT]; /* simulated bytes per network payload byte, per phase */
  /* What the program assumed, for the report. */
  double export_latency_s; /* NCCL + per-tensor export latency, whole model */
  double export_host_s;    /* of which per-tensor host (Python) time */
  double export_calls;     /* Megatron parameters exported (collective rounds) */
  double export_tensors;   /* checkpoint tensors exported */
  double export_pace_s;    /* duration the overlapped export + broadcast step is paced to */
  double m2n_tensors;
  double bucket_bytes;
  double nbuckets;
  double gb_bytes; /* bytes the gather-broadcast group broadcasts */
  /* software models (sim/models/): per-step GPU link loads for the group factors, and what the
   * model assumed (for the report) */
  double *sw_load; /* [step][gpu][SIM_HOST_LINKS] bytes, NULL for the refit model */
  int sw_ngpus;
  double sw_software_s;  /* serial software time the model put in steps */
  double sw_calls;       /* reshard calls */
  SimExec *exec;         /* refit's executor: rank programs, or per host when group > 1 (NULL:
                            steps and lanes) */
  RfMemory exec_mem;     /* refit's executor: the inference memory of its schedule */
  int exec_stages;       /* refit's executor: stages run one after another (1: pipelined) */
  gboolean progress;     /* the executor's simulation prints progress on stderr (long runs) */
  gboolean exact_routes; /* executor: keep HBM links that cannot bind on the routes (tests: the
                            reference the engine's pruned platform is checked against) */
  gboolean full_update;  /* executor: SimGrid's full max-min update, no pair links (engine.c;
                            the reference the lazy update is checked against) */
} SimProgram;

/* The plan's movement between GPUs as the simulator models it (export pieces routed as NCCL
 * rings, messages elsewhere), aggregated per (source GPU, destination GPU, pipeline depth,
 * phase): built once per plan, then turned into programs for one or more group sizes. */
typedef struct {
  const RfPlan *plan;
  int ngpus;
  gboolean *used; /* per GPU: holds a rank of the plan */
  GArray *protos; /* internal records */
  double *load;   /* per GPU x SIM_HOST_LINKS x RF_PHASE_COUNT: bytes */
  gboolean has_gb, has_m2n;
  double gb_bytes;
  double bcast_net_fraction, m2n_net_fraction;
  double inflate[RF_PHASE_COUNT];
  double export_calls, export_tensors, export_latency_s, export_host_s;
  double m2n_tensors; /* checkpoint tensors moved by m2n / p2p messages */
} SimProtos;

SimProtos *sim_protos_build(const RfPlan *plan, const RfCalibration *cal);
void sim_protos_free(SimProtos *x);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimProtos, sim_protos_free)
uint64_t sim_protos_count(const SimProtos *x);
/* Checkpoint tensors a plan moves by m2n / p2p messages. */
double sim_plan_m2n_tensors(const RfPlan *plan);

/* The flow program for a group size (GPUs per simulated host; 1: exact). NULL + error when the
 * group does not divide the domain size. */
SimProgram *sim_program_build(const SimProtos *x, const RfCalibration *cal, int group,
                              GError **error);
void sim_program_free(SimProgram *p);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimProgram, sim_program_free)

/* Link indices of a flow's route into out (at most 8); returns the count. Link i of host h:
 * h * SIM_HOST_LINKS + kind; leaf links follow all host links. */
enum { SIM_LINK_HBM, SIM_LINK_NVUP, SIM_LINK_NVDN, SIM_LINK_NICUP, SIM_LINK_NICDN, SIM_HOST_LINKS };
int sim_route(const SimProgram *p, int src, int dst, int *out);
gboolean sim_route_is_net(const SimProgram *p, int src, int dst);
double sim_link_Bps(const SimProgram *p, int link);      /* with the whole-run group factor */
double sim_link_base_Bps(const SimProgram *p, int link); /* without it */
char *sim_link_name(const SimProgram *p, const RfProblem *pb, int link);
double sim_link_latency_s(const SimProgram *p, int link);
/* TRUE when host h's HBM link can never bind (see flow.c): routes may leave it off. */
gboolean sim_link_hbm_slack(const SimProgram *p, int h);
int sim_nlinks(const SimProgram *p);
/* Per-GPU load for the group scales: bytes of GPU g on host link k in step s (s < 0: the run). */
typedef double (*SimLoadFn)(const SimProgram *p, const void *ud, int s, int g, int k);
/* link_scale and step_scale of a program whose hosts group p->group GPUs (see flow.c). */
void sim_group_scales(SimProgram *p, int ngpus, SimLoadFn load, const void *ud);
/* A new step on `lane` (name cut to 31 characters); returns its index. Aborts past
 * SIM_MAX_STEPS. */
int sim_add_step(SimProgram *p, int lane, const char *name, double pre_s, double post_s);

/* Engine result. Zero it before the first use (SimOutcome o = {0}); the engines size its step
 * times (sim_outcome_start); sim_outcome_clear frees them. */
typedef struct {
  double total_s;
  double start_s[RF_PHASE_COUNT];
  double end_s[RF_PHASE_COUNT];
  int used[RF_PHASE_COUNT];
  int nsteps;
  double *step_start_s, *step_end_s; /* per step of the program (0: the step moved nothing) */
} SimOutcome;

/* Forget o's figures and size its step times for nsteps steps, all 0. */
void sim_outcome_start(SimOutcome *o, int nsteps);
void sim_outcome_clear(SimOutcome *o);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(SimOutcome, sim_outcome_clear)

/* The route of one of refit's executor messages (p->exec) on the platform both engines run:
 * sim_route less the HBM links that can never bind (sim_link_hbm_slack; all kept with
 * p->exact_routes), into out (at most 8); its latency, summed over the whole route, into lat_s
 * when not NULL. Returns the count. */
int sim_exec_route(const SimProgram *p, int src, int dst, int *out, double *lat_s);
/* Phase ph moved from start to end: widens its span in o. */
void sim_outcome_phase(SimOutcome *o, int ph, double start, double end);

/* Generate the platform, run SimGrid (in a child process, so that one process can run many
 * simulations) and collect the phase times. FALSE + error when the run fails. */
gboolean sim_engine_run(const SimProgram *p, gboolean keep_platform, SimOutcome *out,
                        GError **error);

/* refit's executor programs (p->exec) run by sim/events.c's own discrete-event simulation
 * (equal link shares, no SimGrid): the same outcome fields as sim_engine_run. */
gboolean sim_events_run(const SimProgram *p, SimOutcome *out, GError **error);
/* Tests: the events engine's solves take their 32-bit stamps from `first` on (0 by default), so
 * that a run passes the stamps' reset (sim/events.c, stamp_room). Not for concurrent use. */
void sim_events_set_stamp_start(uint32_t first);

#endif
