/* Elastic recovery cost (`refit sim --lost ...`): the communicators a refit software holds,
 * recreated from scratch (destroy and ncclCommInitRank over the survivors) or shrunk
 * (ncclCommShrink), from the calibration's public communicator-init figures (docs/elastic.md). */
#ifndef RF_RECOVERY_H
#define RF_RECOVERY_H

#include "sim.h"

typedef struct {
  gboolean available;    /* FALSE: the calibration has no communicator-init figure */
  gboolean extrapolated; /* a communicator size outside the two published points */
  int ncomms;            /* communicators the software holds, each rebuilt in series */
  int ranks_before;      /* ranks of the largest communicator before the loss */
  int ranks_after;       /* and over the survivors */
  double recreate_s;     /* destroy-and-recreate: an init of every communicator */
  double shrink_s;       /* ncclCommShrink of every communicator */
  char *comms;           /* what the communicators are, for the report */
} RfRecovery;

/* Init time of one communicator of n ranks: a power law through the calibration's two points
 * (log-log interpolation, extrapolated outside them); -1 when the calibration has no figure. */
double rf_recovery_init_s(const RfCalibration *c, int nranks);

/* The recovery cost of problem pb (its lost ranks already set) for a strategy run by software
 * c->software: which communicators that software holds, and the time to recreate or shrink
 * them. Without lost ranks the sizes before and after are equal. */
void rf_recovery_cost(const RfProblem *pb, RfStrategy strategy, const RfCalibration *c,
                      RfRecovery *r);
void rf_recovery_clear(RfRecovery *r);

#endif
