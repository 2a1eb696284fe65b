/* Transfer plans: the exact data movement of one refit, as plain data.
 *
 * A piece is a global box of one part (the overlap of a source and a destination shard, or a
 * whole shard for the gather stages). A transfer moves one piece from one rank to another at a
 * stage; stages are dependency depths: a rank sends at stage k only what it held at the start
 * or received at a stage < k. Transfers are sorted by (stage, src, dst) and grouped into
 * messages: the simulator moves messages, the real executor slices them back into transfers.
 * Both executors take const RfPlan * and never change it. */
#ifndef RF_PLAN_H
#define RF_PLAN_H

#include "layout.h"
#include <glib.h>
#include <stdint.h>

typedef enum {
  RF_STRATEGY_GATHER_BROADCAST,
  RF_STRATEGY_P2P,
  RF_STRATEGY_M2N,
  RF_STRATEGY_HYBRID,
  RF_STRATEGY_COUNT
} RfStrategy;

/* What a stage does; the simulator models each phase with the system's own mechanism. */
typedef enum {
  RF_PHASE_EXPORT,    /* training-side PP broadcast + TP/EP all-gather (gather-broadcast) */
  RF_PHASE_BROADCAST, /* root-0 chain broadcast of packed buckets, pipelined (gather-broadcast) */
  RF_PHASE_INJECT,    /* "inject": copies from a source holder (p2p copies; m2n injection) */
  RF_PHASE_FORWARD,   /* domain-to-domain chain forwarding over the network (m2n) */
  RF_PHASE_FANOUT,    /* NVLink fan-out inside a destination domain (m2n) */
  RF_PHASE_COUNT
} RfPhase;

enum {
  RF_XFER_NET = 1u << 0,   /* crosses NVLink domains */
  RF_XFER_RELAY = 1u << 1, /* the receiver keeps none of it as inference weights: it forwards
                              it (broadcast chains) or uses it transiently (export gathers) */
};

typedef struct {
  uint32_t part;
  uint32_t pad_;
  RfBox box; /* global coordinates of the part (add seg_off along seg_dim for the tensor); the
                bounds past the part's ndim are 0 */
  uint64_t bytes;
} RfPiece;

/* 4 bytes: a plan of tens of millions of transfers is written once on fresh pages, and on a
 * virtual machine its time goes with its bytes (issue 26). A transfer's stage and ranks are its
 * message's (RfMessage: the transfers plan->xfers[first .. first + count) share them): walk the
 * messages, or find a transfer's with rf_plan_message_of. */
typedef struct {
  uint32_t piece : 27; /* < RF_PLAN_MAX_TRANSFERS (2^27) */
  uint32_t phase : 3;  /* RfPhase */
  uint32_t flags : 2;  /* RF_XFER_* */
} RfTransfer;

typedef struct {
  uint16_t stage;
  uint8_t phase; /* phase of its first transfer (a message never mixes phases) */
  uint8_t flags; /* RF_XFER_NET when it crosses domains */
  int32_t src, dst;
  uint64_t bytes;
  uint32_t first; /* its transfers: plan->xfers[first .. first + count) */
  uint32_t count;
} RfMessage;

typedef struct {
  uint64_t network_bytes;
  uint64_t nvlink_bytes;
  uint64_t max_nic_bytes; /* max over NICs of max(sent, received) */
  uint64_t messages;
  uint64_t transfers;
  uint64_t payload_bytes; /* bytes the destination side must end with (sum of its shards) */
  int stages;
  double lower_bound_s;      /* max_nic_bytes / NIC bandwidth */
  uint64_t max_nvlink_bytes; /* max over GPUs of max(NVLink bytes sent, received) */
  double link_bound_s;       /* busiest link: max(lower_bound_s, max_nvlink_bytes / NVLink rate) */
  /* The physical network bound, a property of the problem (the same for every strategy): per
   * NVLink domain, the bytes that must enter it (elements its ranks need and no rank of it holds)
   * and the bytes that must leave it (elements held only there and needed elsewhere), over the
   * NIC line rate of the domain's ranks; the max over domains. <= lower_bound_s of any plan. */
  double domain_bound_s;
  uint64_t phase_network_bytes[RF_PHASE_COUNT];
  uint64_t phase_max_nic_bytes[RF_PHASE_COUNT]; /* busiest NIC counting that phase alone */
} RfPlanStats;

typedef struct {
  RfStrategy strategy;
  const RfProblem *problem; /* borrowed: must outlive the plan */
  RfPiece *pieces;          /* pieces, xfers and msgs are model/base/bigmem.h RfBigVec arrays:
                               rf_plan_free frees them, never g_free */
  uint32_t npieces;
  RfTransfer *xfers; /* by their messages' (stage, src, dst), then by piece */
  uint64_t nxfers;
  RfMessage *msgs; /* in the same order */
  uint64_t nmsgs;
  int nstages;
  RfPlanStats stats;
  /* Not part of the plan: what model/plan/memory.c derives from it once, on the first memory
   * count, for the next ones (one GLib block; NULL until then). rf_plan_free frees it; a plan
   * filled by hand that is counted frees it with g_free. Never copy an RfPlan by value. */
  gpointer derived;
} RfPlan;

typedef struct {
  int bcast_channels; /* 0: the topology's value */
} RfPlanOptions;

const char *rf_strategy_name(RfStrategy s);
const char *rf_phase_name(RfPhase p);
/* "gather-broadcast", "p2p", "m2n", "hybrid"; FALSE + error for anything else. */
gboolean rf_strategy_parse(const char *s, RfStrategy *out, GError **error);

/* Most transfers one plan may hold: 2^27 transfers are 1 GiB while planned (8 bytes each,
 * sorted in place), 0.5 GiB once planned, and take several seconds to plan. */
#define RF_PLAN_MAX_TRANSFERS (UINT64_C(1) << 27)

/* Build the plan of one strategy. NULL + error if the problem cannot be planned, or
 * (RF_ERROR_LIMIT) when it needs more than RF_PLAN_MAX_TRANSFERS transfers: refused before the
 * quadratic gather-broadcast export is emitted. Time and memory grow with the transfers. */
RfPlan *rf_plan_build(const RfProblem *pb, RfStrategy strategy, const RfPlanOptions *opt,
                      GError **error);
void rf_plan_free(RfPlan *plan);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(RfPlan, rf_plan_free)

/* The message that holds transfer t (< plan->nxfers): a binary search over the messages, for
 * the odd transfer; a pass over many walks the messages instead. */
uint64_t rf_plan_message_of(const RfPlan *plan, uint64_t t);

/* The messages tile the transfers in order (each first where the one before ended, none empty,
 * all of them covered) and name ranks of the problem: what every reader that walks a plan by
 * its messages relies on; one pass over the messages (rf_plan_verify checks it too). FALSE +
 * RF_ERROR_VERIFY otherwise. */
gboolean rf_plan_check_messages(const RfPlan *plan, GError **error);

/* Check the plan's invariants: every destination element of every part received exactly once
 * by its destination rank, no box outside its part or outside the sender's holding, every
 * forwarded piece held by its sender at an earlier stage, bytes conserved. FALSE + the first
 * violation in error. Cost grows with transfers x box volume: for tests and small plans. */
gboolean rf_plan_verify(const RfPlan *plan, GError **error);

/* (quant_pass.c) HBM bytes (read + written) of the quantize pass (quant.h) of every global rank
 * into bytes[pb->nranks] (may be NULL): at the sender, the source shards of target parts a rank
 * sends from in the plan (training dtype read, e4m3 and scales written); at the receiver, the
 * destination shards. Returns the max over ranks and its rank in *rank (may be NULL); 0 when not
 * quantized. */
uint64_t rf_quant_pass_bytes(const RfProblem *pb, const RfPlan *plan, uint64_t *bytes, int *rank);

/* Write every transfer as JSON ({"transfers":[...]}, docs/formats.md) to path. */
gboolean rf_plan_dump(const RfPlan *plan, const char *path, GError **error);

#endif
