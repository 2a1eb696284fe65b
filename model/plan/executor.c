#include "executor.h"

#include <string.h>

void rf_result_clear(RfResult *r) {
  if (!r) return;
  for (int i = 0; i < r->nstages; i++)
    g_free(r->stages[i].name);
  g_free(r->stages);
  g_free(r->executor);
  g_free(r->bound_by);
  memset(r, 0, sizeof *r);
}

void rf_result_add_stage(RfResult *r, const char *name, double start_s, double end_s,
                         uint64_t bytes) {
  r->stages = g_renew(RfStageTime, r->stages, r->nstages + 1);
  RfStageTime *s = &r->stages[r->nstages++];
  s->name = g_strdup(name);
  s->start_s = start_s;
  s->end_s = end_s;
  s->bytes = bytes;
}
