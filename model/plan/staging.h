/* Staging bound, lanes and operation bound of refit's executor, chosen from the topology and the
 * memory left on the inference GPU (`refit run` and `refit sim` without --staging-mib, --slots,
 * --max-ops). The rules, in order:
 *
 *   staging  a group's fixed cost (the host's post and the NCCL group: group_s, from the
 *            calibration's [executor] costs) is 1 / RF_STAGING_COST_RATIO
 *            of the time a full group of the staging bound takes on one GPU's NICs at the
 *            calibrated rate: the bandwidth-delay product of a group times the ratio, to the
 *            nearest power of two MiB in [RF_STAGING_MIN_BYTES, RF_STAGING_MAX_BYTES]. Larger
 *            groups pay their size in fill, drain and imbalance, smaller ones their fixed cost
 *            (docs/sim.md, "Where the excess goes": the sweep on qwen3-235b / DGX H100); with
 *            lanes on communicators of their own a group shares the NICs with the other lanes'
 *            groups and takes that many times as long: the rule's bound over the lanes; then
 *            doubled (up to RF_STAGING_MAX_BYTES) while the busiest rank's serial work would
 *            outlast the busiest NIC's bytes at the calibrated rate (rf_staging_serial_s: a
 *            group's fixed costs, serial_group_s, for every bound it sends or receives over the
 *            network, or NVLink share x it over NVLink, and a copy of every byte it sends or
 *            receives: refit's executor posts a rank's groups and runs its copies one after
 *            another, so a rank whose serial work is longer than the transfers sets the time: at
 *            4 MiB Nemotron 3 Ultra's fan-out into one NVLink domain, each piece forwarded to 7
 *            GPUs, takes 1.03x its NIC time, the other reported configurations 0.88x), as long
 *            as a doubling saves more than 1 / RF_STAGING_COST_RATIO of that work (a rank of one
 *            group, or whose copies alone outlast its NIC, gains little for its staging); then
 *            doubled (up to RF_STAGING_MAX_BYTES) while refit run's schedule would have more
 *            than RF_STAGING_MAX_SEGMENTS segments: every rank of refit run builds the whole
 *            schedule (real/engine.c), about 40 bytes a segment (schedule.h), so 64 M take 2.6 GB
 *            of host memory in each rank's process, 8 of them on a DGX H100 node (Kimi K3's m2n
 *            on 1,024 + 1,024 GB200 at 8 lanes of 4 MiB: 114-181 M segments; at 16 MiB, 29-45 M);
 *            refit sim's executor model builds no more either (SIM_EXEC_MAX_SEGMENTS);
 *   lanes    RF_STAGING_LANES groups in flight (1 lane leaves the pack and unpack in series with
 *            the transfers, 4 hold more staging and fill worse: the same results); with lanes on
 *            communicators of their own (refit run --lane-comms: a rank's groups on different
 *            lanes run at once) RF_STAGING_LANES_CONCURRENT, so that a group's latency hides
 *            behind the bytes of the others in flight (simulated m2n on the four reported
 *            configurations, docs/sim.md: 8 lanes of 4 MiB 1.08-1.09x the network bound, 4 lanes
 *            1.08-1.11x, one stream 1.13-1.16x; 2 lanes at once 1.11-1.17x);
 *   memory   the staging a rank can hold, lanes x both directions x (one bound over the network
 *            + the NVLink share of a pipelined round), within RF_STAGING_BUDGET_FRACTION of the
 *            memory left on the fullest inference GPU after its weights (x banks) and its
 *            holding (the plan's stage estimate, rf_memory_of_plan; where that leaves too little,
 *            refit run's schedule at the default bound, rf_memory_of_run): else the bound halves
 *            down to the minimum, then one lane (not where the weights and holding alone
 *            exceed the GPU: smaller groups would only be slower, and the memory check reports);
 *            concurrent lanes first halve down to RF_STAGING_LANES;
 *   ops      rf_schedule_max_ops() of the plan.
 * A value given on the command line is kept as given. */
#ifndef RF_STAGING_H
#define RF_STAGING_H

#include "plan.h"

#include <glib.h>
#include <stdint.h>

#define RF_STAGING_COST_RATIO 16.0
#define RF_STAGING_MIN_BYTES (UINT64_C(4) << 20)
#define RF_STAGING_MAX_BYTES (UINT64_C(256) << 20)
#define RF_STAGING_LANES 2
#define RF_STAGING_LANES_CONCURRENT 8
#define RF_STAGING_MAX_SEGMENTS UINT64_C(64000000) /* a chosen bound's schedule, at most */
/* the rest: NCCL's fixed structures, the CUDA context, lists */
#define RF_STAGING_BUDGET_FRACTION 0.5

/* What the choice depends on besides the plan (the calibration of the topology). */
typedef struct {
  double group_s;        /* fixed cost of one group: host post + NCCL latency + copy launches */
  double nic_efficiency; /* the calibrated share of the NICs' line rate */
  int banks;             /* weight banks of the inference GPU: 1 in place, 2 --double-bank */
  gboolean lane_comms;   /* lanes on communicators of their own (refit run --lane-comms) */
  /* A group's fixed time on a rank's serial timeline (group_s and the copy stream's wait on the
   * group before its unpack) and the efficiency of a copy on the GPU's HBM
   * (rf_topology_copy_Bps); 0: the serial rule is off. */
  double serial_group_s;
  double hbm_efficiency;
} RfStagingCosts;

typedef struct {
  uint64_t staging_bytes; /* per rank, direction and lane */
  int slots;              /* lanes */
  int max_ops;            /* operations per rank and group (never RF_SCHEDULE_AUTO_OPS) */
  gboolean chose_staging, chose_slots, chose_ops; /* FALSE: as given */
  gboolean lane_comms;   /* the lanes on communicators of their own (RfStagingCosts.lane_comms) */
  uint64_t budget_bytes; /* staging room the memory left allows (0: the topology gives no GPU
                          * memory, unbounded) */
  char why[200];         /* how the staging bound was chosen, one phrase */
} RfStaging;

/* The busiest rank's serial work at staging bound b (seconds; above: the serial rule) and, in
 * nic_s, the busiest NIC's transfer time at the calibrated rate; 0 for both where c has no serial
 * costs or the topology no NIC or HBM rate. pipelined: NVLink segments have the NVLink share's
 * room beside b (rf_schedule_nvlink_share), else they share b. */
double rf_staging_serial_s(const RfPlan *plan, const RfStagingCosts *c, gboolean pipelined,
                           uint64_t b, double *nic_s);

/* The executor's settings for plan: staging_bytes 0, slots 0 and max_ops RF_SCHEDULE_AUTO_OPS
 * are chosen by the rules above, other values kept. pipelined: the schedule pipelines stages
 * (refit run's default for every strategy; not with --staged). Cost: rf_memory_of_plan (transfers +
 * ranks, once per plan) when the staging bound or the lanes are chosen, and a schedule build
 * (rf_memory_of_run) when the staging does not fit beside the plan's stage estimate and refit run's
 * schedule is within RF_MEMORY_MAX_SEGMENTS (above it, a pipelined plan's estimate is that count
 * already). */
void rf_staging_choose(const RfPlan *plan, const RfStagingCosts *c, gboolean pipelined,
                       uint64_t staging_bytes, int slots, int max_ops, RfStaging *out);
/* A chosen bound raised as rf_staging_choose raises it: from bytes, doubled while its schedule
 * has more than RF_STAGING_MAX_SEGMENTS segments and it is below RF_STAGING_MAX_BYTES (where
 * the schedule may still have more); that schedule's segments into *nsegs when not NULL. */
uint64_t rf_staging_fitting(const RfPlan *plan, uint64_t bytes, gboolean pipelined,
                            uint64_t *nsegs);

/* One line for a header: "staging 16 MiB per rank, direction and lane (chosen: ...), 2 lanes
 * (chosen), max ops per group 40 (from the topology)"; caller frees. */
char *rf_staging_describe(const RfStaging *st);

#endif
