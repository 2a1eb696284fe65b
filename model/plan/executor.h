/* The executor interface both sim/ and real/ implement (NCCL transport style ops table), and the
 * result they both fill, so a prediction and a measurement print side by side. */
#ifndef RF_EXECUTOR_H
#define RF_EXECUTOR_H

#include "plan.h"
#include <glib.h>

typedef struct {
  char *name; /* "export", "broadcast", "inject", "forward", "fanout", "p2p", or a stage label */
  double start_s;
  double end_s;
  uint64_t bytes;
} RfStageTime;

typedef struct {
  char *executor; /* "sim" or "real:host" / "real:cuda" */
  RfStrategy strategy;
  double total_s;       /* predicted or measured (median) refit time */
  double min_s, max_s;  /* spread over iterations (== total_s for a prediction) */
  double lower_bound_s; /* network lower bound of the plan */
  RfStageTime *stages;
  int nstages;
  uint64_t wrong_elements; /* real executors: elements that failed verification */
  char *bound_by;          /* what limits the run, e.g. "NIC gpu17" or "NVLink" (may be NULL) */
} RfResult;

typedef struct RfExecutor RfExecutor;
struct RfExecutor {
  const char *name;
  /* Set up for plans of this problem (platform, buffers, communicators). */
  gboolean (*prepare)(RfExecutor *ex, const RfProblem *pb, GError **error);
  /* Execute or simulate; fills *out (free it with rf_result_clear). */
  gboolean (*run)(RfExecutor *ex, const RfPlan *plan, RfResult *out, GError **error);
  void (*destroy)(RfExecutor *ex);
  void *state;
};

void rf_result_clear(RfResult *r);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(RfResult, rf_result_clear)
/* Append a stage (name copied). */
void rf_result_add_stage(RfResult *r, const char *name, double start_s, double end_s,
                         uint64_t bytes);

#endif
