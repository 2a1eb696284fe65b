/* Problems the model-level tests build, asserting each builds: a zoo model under presets, as
 * `refit plan --model M --train T --infer I --domain-size D` builds it. */
#ifndef RF_TEST_PROBLEMS_H
#define RF_TEST_PROBLEMS_H

#include "layout.h"
#include "topology.h"
#include "zoo.h"

#include <glib.h>

static inline RfProblem *preset_problem(const char *model, const char *train, const char *infer,
                                        int domain) {
  GError *e = NULL;
  RfModel *m = rf_model_load(model, &e);
  g_assert_no_error(e);
  RfProblem *pb = rf_problem_new_preset(m, train, infer, rf_topology_new_domains(domain), &e);
  g_assert_no_error(e);
  return pb;
}

#endif
