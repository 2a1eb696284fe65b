/* Models of the published refit software and of refit's executor (sim/models/): the same plan
 * problem turned into the flows, steps and software delays that NeMo RL's nccl_reshard refit,
 * NCCL M2N's reshard_model_bench and refit's executor run, mechanism by mechanism. refit's own
 * strategies (program.c) are not touched by them; program.c picks the model. */
#ifndef RF_SIM_SW_H
#define RF_SIM_SW_H

#include "internal.h"

/* One reshard call (one parameter) as a set of GPU-level flows, grouped by sub-step
 * (models/reshard_call.c). */
typedef struct {
  int32_t src, dst; /* GPUs */
  uint16_t sub;     /* sub-step inside the call: 0 put / p2p, 1.. forward hops or all-gather */
  uint8_t phase;    /* RfPhase: INJECT, FORWARD or FANOUT */
  uint8_t pad_;
  double bytes;    /* payload */
  double weight;   /* simulated bytes per payload byte (NCCL collective efficiency) */
  double offset_s; /* start after the sub-step starts (pipelined forwarding) */
} SwFlow;

/* Per-call serial costs and the call's flows, summed per PP stage by the caller. */
typedef struct {
  GArray *flows;       /* SwFlow */
  int nsub;            /* sub-steps used */
  double host_s;       /* host software time of the call (serial on the issuing thread) */
  double latency_s;    /* kernel / NCCL latencies of the call (serial on the stream) */
  double *pre_bytes;   /* per GPU: bytes copied before the transfer (pack, torch.stack) */
  double *post_bytes;  /* per GPU: bytes copied after it (unpack, copy-back) */
  double ce_row_bytes; /* smallest contiguous row of a copy-engine copy (0: none) */
} SwCall;

/* Reshard transport of one call: how the bytes travel. */
typedef enum {
  SW_PYTHON_FALLBACK, /* NeMo RL xferdtensor_python: striped grouped send/recv + all-gather */
  SW_M2N_PACK,        /* NCCL M2N PACK: CE pack, put, whole-slice store-and-forward, CE unpack */
  SW_M2N_RING_V01,    /* NCCL Xfer v0.1 RING: zero copy, 256 KiB chunk pipelined forwarding */
  SW_M2N_DIRECT,      /* NCCL Xfer v0.1 DIRECT: every source puts to every destination replica */
  SW_GOLDEN, /* NeMo RL xferdtensor_golden: each unique source shard broadcast to the communicator
              */
} SwTransport;

/* Checks the transport's limits for part `part` and fills call (flows cleared first). FALSE +
 * error (RF_ERROR_INPUT) when the published code would refuse the call. */
gboolean sw_call_build(const RfProblem *pb, const RfCalibration *cal, SwTransport tr, uint32_t part,
                       SwCall *call, GError **error);
void sw_call_init(SwCall *c, int ngpus);
void sw_call_clear(SwCall *c);

/* Size of the NVLink team (NCCL LSA team) of a communicator whose ranks sit on gpus[n] in
 * communicator order: the gcd of the lengths of the runs of consecutive ranks in one NVLink
 * domain (NCCL ncclDevrInitOnce). */
int sw_lsa_team(const int *gpus, int n, int gpus_per_domain);

/* NCCL Xfer v0.1 RING: the replica (0 .. nlocal-1) of a destination shard on the target domain
 * that receives source p of the shard's nsrc sources over the network and fans it out there
 * (nccl_m2n/src/reshard_prepare.cc prepareReshardParams at 4532497). */
int sw_ring_leader(int p, int nsrc, int nlocal);

/* Pipeline stage (training PP) that holds a part. */
int sw_part_stage(const RfProblem *pb, uint32_t part);

/* The calls of one training PP stage, summed (models/reshard_stages.c). */
typedef struct {
  GArray *agg;       /* the calls' flows summed per (GPUs, sub-step, phase, offset, weight) */
  GHashTable *index; /* their key -> position + 1 in agg */
  int nsub;          /* sub-steps used */
  double calls, host_s, latency_s;
  double ce_pre_s, ce_post_s; /* copy time (row-size dependent), max over GPUs, summed */
} SwStage;

/* Transport of a resolved software variant. */
SwTransport sw_transport(RfSwVariant v);
/* pp empty stages; free with sw_stages_free (NULL: no-op). */
SwStage *sw_stages_new(int pp);
void sw_stages_free(SwStage *stages, int pp);
/* A model's costs around one call of part `part`, added to its stage after the call. */
typedef void (*SwCallCosts)(SwStage *st, const RfProblem *pb, const RfCalibration *cal,
                            uint32_t part, int ngpus);
/* One call per part the plan moves (every_part: all of them; else the FFN bulk, NeMo RL
 * is_nccl_reshard_param), each with call_host_s more host time, summed into stages[slot[part]]
 * (slot NULL: the part's training PP stage); after may be NULL. FALSE + error when the
 * published code would refuse a call. */
gboolean sw_stages_add_calls(SwStage *stages, const int *slot, const SimProtos *x,
                             const RfCalibration *cal, SwTransport tr, gboolean every_part,
                             double call_host_s, SwCallCosts after, GError **error);
/* The stages' steps: stage s on lane s % lanes, one step per sub-step, its serial costs before
 * the first and after the last; the steps' GPU link loads go into loads (GPtrArray of per-step
 * arrays). host_ahead: the host issues the calls without a per-call sync, so a stage lasts
 * max(host time, GPU time) (the host time on the stage's steps' host_s); else the host time is
 * in series before the transfers. Adds the serial time to *software_s and the calls to *calls. */
void sw_stages_emit(SimProgram *p, const SwStage *stages, int pp, int lanes, SwTransport tr,
                    gboolean host_ahead, const int *slot_host, GPtrArray *loads, double *software_s,
                    double *calls);
/* Groups run one after another, each joined behind every lane (a synchronize of every stream);
 * inside group g, stages[g * lanes + q] runs on lane q, the lanes concurrently. The issuing host
 * launches every call of the group without a sync, so a group lasts max(its calls' summed host
 * time, the slowest lane's first call's host time + that lane's GPU time); the lanes' serial GPU
 * costs (latencies, copies) stay on their lanes. Adds the serial time to *software_s and the calls
 * to *calls. */
void sw_groups_emit(SimProgram *p, const SwStage *stages, int ngroups, int lanes, SwTransport tr,
                    const int *slot_host, GPtrArray *loads, double *software_s, double *calls);
/* p->sw_load for every step: from loads where a step has them, else (gather-broadcast steps)
 * from the plan's export and broadcast records. */
void sw_loads_finish(SimProgram *p, const SimProtos *x, GPtrArray *loads);
/* Group factors of a software program (per-GPU loads of its flows). */
void sw_group_scales(SimProgram *p);

/* The models' steps and flows in program p (hosts already placed, slot_host maps GPU / group to
 * host). FALSE + error when the model cannot run the plan. */
/* NeMo RL (models/nemo_rl.c): the hybrid (bulk by reshard, the rest by gb, program.c's
 * gather-broadcast steps) or the gather-broadcast baseline. */
typedef void (*SwGbSteps)(SimProgram *p, int lane, void *ud); /* program.c's gather-broadcast */
gboolean sw_nemo_rl_build(SimProgram *p, const SimProtos *x, const RfCalibration *cal,
                          const int *slot_host, SwGbSteps gb, void *gb_ud, GError **error);
/* NCCL M2N (models/nccl_m2n.c): the m2n strategy as reshard_model_bench times it. */
gboolean sw_nccl_m2n_build(SimProgram *p, const SimProtos *x, const RfCalibration *cal,
                           const int *slot_host, GError **error);
/* refit's executor (models/refit_executor.c): the steps and flows of the schedule real/ runs.
 * FALSE + error when the schedule has more groups than a program holds. */
gboolean sw_exec_build(SimProgram *p, const SimProtos *x, const RfCalibration *cal,
                       const int *slot_host, GError **error);

#endif
