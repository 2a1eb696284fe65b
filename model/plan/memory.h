/* Memory of the inference GPUs, from the problem and a plan (no executor): the weights each GPU
 * serves, and what the refit needs on top of them while it runs.
 *
 * Weights are exact: the local buffers of the vLLM layout (padding and fusion included). The
 * refit's extra memory is an estimate from the plan's stages, the arithmetic `refit run
 * --memory` does exactly with its allocator:
 *   holding: a piece a GPU receives and later forwards (or receives only to relay) is live from
 *            the stage it arrives to the last stage the GPU sends a piece of that part;
 *   staging: send and receive staging, each the largest message of the GPU, capped at
 *            refit run's default staging bound, times its default lanes (groups in flight,
 *            schedule.h RF_SCHEDULE_DEFAULT_*).
 * The peak of holding + staging over the stages is the extra; the run also keeps a second bank
 * of weights (double buffering), which this count leaves out: it is a choice of refit run, not
 * of the strategies. */
#ifndef RF_MEMORY_H
#define RF_MEMORY_H

#include "layout.h"
#include "plan.h"
#include "schedule.h"
#include <stdint.h>

typedef struct {
  uint64_t weights_bytes; /* largest inference weights of one GPU */
  int weights_rank;       /* the global rank holding them */
  uint64_t hold_bytes;    /* largest holding of one inference GPU (0 before a plan) */
  uint64_t staging_bytes; /* largest send + receive staging of one inference GPU */
  uint64_t extra_bytes;   /* largest holding + staging of one inference GPU */
  uint64_t peak_bytes;    /* largest weights + largest extra (a bound on the fullest GPU) */
  int peak_rank;
  double gpu_memory_bytes; /* the topology's [gpu] memory_GB in bytes; 0 when unknown */
} RfMemory;

/* Weights of the inference side of pb (extra fields 0, peak = weights). Cost: buffers x ranks. */
void rf_memory_weights(const RfProblem *pb, RfMemory *out);
/* Weights plus the plan's holding and staging estimate (above), at refit run's default staging
 * bound and lanes. Cost: transfers + ranks. */
void rf_memory_of_plan(const RfPlan *plan, RfMemory *out);
/* The same for a staging bound (bytes per rank, direction and lane) and a number of lanes. */
void rf_memory_of_plan_staging(const RfPlan *plan, uint64_t staging_bytes, int slots,
                               RfMemory *out);
/* The same from the schedule refit run executes (pipelined: rounds instead of stages): a
 * received piece that a later send of its rank reads (real/'s rule: the first received piece of
 * the part holding all of the sent box, else every one meeting it) is held from the first round
 * its bytes arrive to the last round of those sends; staging is the lanes times the rank's
 * fullest round each way. What `refit run --memory` lays out per rank, less its allocator's
 * alignment and fragmentation. Cost: transfers + segments, and the received pieces of a part
 * scanned per send of it. */
void rf_memory_of_schedule(const RfPlan *plan, const RfSchedule *sg, RfMemory *out);
/* TRUE when the topology gives a GPU memory and peak_bytes exceeds it. */
gboolean rf_memory_exceeds(const RfMemory *m);
/* One line: "inference GPU: weights W GB + refit extra E GB (holding H, staging S) = P GB of
 * M GB"; caller frees. */
char *rf_memory_format(const RfMemory *m);

#endif
