/* Internal to real/: what the engine measured beyond RfResult, for the run table. */
#ifndef RF_REAL_ENGINE_H
#define RF_REAL_ENGINE_H

#include "executor.h"
#include <stdint.h>

typedef struct {
  int nstages;            /* == RfResult.nstages (one per label: export, broadcast, inject, ...) */
  double *min_s, *max_s;  /* per result stage: spread of its duration over the timed iterations */
  int iters;              /* timed iterations that completed */
  uint64_t rounds;        /* groups of send / receive operations (all stages) */
  uint64_t hold_bytes;    /* largest holding store of one rank (received pieces kept to forward) */
  uint64_t staging_bytes; /* largest send + receive staging of one rank */
  uint64_t src_bytes;     /* largest source shards of one rank */
  uint64_t dst_bytes;     /* largest destination shards of one rank (one bank) */
  uint64_t rank_bytes;    /* largest source + 2 x destination + holding + staging of one rank */
  uint64_t wrong_new;     /* elements of the new weights that differ from the pattern */
  uint64_t wrong_old;     /* elements of the previous weights changed during the refit */
} RfRealSpread;

/* Valid after a run of a real executor, until the next run or destroy. */
const RfRealSpread *rf_real_spread(const RfExecutor *ex);

#endif
