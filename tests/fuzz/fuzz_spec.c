/* libFuzzer target: DTensor spec files (docs/formats.md); a spec that loads is planned and
 * verified with every strategy. */
#include "layout.h"
#include "plan.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  GError *e = NULL;
  RfProblem *p =
      rf_problem_new_spec((const char *)data, (gssize)size, rf_topology_new_domains(4), &e);
  g_clear_error(&e);
  if (!p) return 0;
  for (int s = 0; s < RF_STRATEGY_COUNT; s++) {
    RfPlan *plan = rf_plan_build(p, (RfStrategy)s, NULL, &e);
    if (plan && !rf_plan_verify(plan, &e)) __builtin_trap(); /* a plan that loads must verify */
    rf_plan_free(plan);
    g_clear_error(&e);
  }
  rf_problem_free(p);
  return 0;
}
