/* Models of the published refit software (sim/sw*.c): the same plan problem turned into the
 * flows, steps and software delays that NeMo RL's nccl_reshard refit and NCCL M2N's
 * reshard_model_bench run, mechanism by mechanism. refit's own strategies (program.c) are not
 * touched by them. */
#ifndef RF_SIM_SW_H
#define RF_SIM_SW_H

#include "internal.h"

/* One reshard call (one parameter) as a set of GPU-level flows, grouped by sub-step. */
typedef struct {
  int32_t src, dst; /* GPUs */
  uint16_t sub;     /* sub-step inside the call: 0 put / p2p, 1.. forward hops or all-gather */
  uint8_t phase;    /* RfPhase: DIRECT, FORWARD or FANOUT */
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
  SW_M2N_DIRECT,      /* NCCL M2N DIRECT: every source puts to every destination, 1 MiB chunks */
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

/* Pipeline stage (training PP) that holds a part. */
int sw_part_stage(const RfProblem *pb, uint32_t part);

/* The software model's steps and flows in program p (hosts already placed, slot_host maps
 * GPU / group to host). NeMo RL: the hybrid (bulk by reshard, the rest by the gather-broadcast
 * steps of program.c) or the gather-broadcast baseline; NCCL M2N: the m2n strategy as
 * reshard_model_bench times it. FALSE + error when the model cannot run the plan. */
typedef void (*SwGbSteps)(SimProgram *p, int lane, void *ud); /* program.c's gather-broadcast */
gboolean sw_build(SimProgram *p, const SimProtos *x, const RfCalibration *cal, const int *slot_host,
                  SwGbSteps gb, void *gb_ud, GError **error);

/* refit's executor: the steps and flows of the schedule real/ runs (sim/sw_exec.c). FALSE +
 * error when the schedule has more groups than a program holds. */
gboolean sw_exec_build(SimProgram *p, const SimProtos *x, const RfCalibration *cal,
                       const int *slot_host, GError **error);

/* Group factors of a software program (per-GPU loads of its flows). */
void sw_group_scales(SimProgram *p, const SimProtos *x);

int sim_add_step(SimProgram *p, int lane, const char *name, double pre_s, double post_s);

#endif
