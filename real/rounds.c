/* The executor's schedule: model/schedule.h for the run's staging bound, operation bound and
 * lanes. Every rank computes the same schedule from the same plan, so peers always meet in the
 * same group. */
#include "engine_int.h"

typedef struct {
  RealState *st;
  const RfPlan *plan;
  gint64 t0, shown;
} Progress;

static void on_progress(uint64_t done, uint64_t total, void *ud) {
  Progress *p = ud;
  rf_real_progress(p->st, p->plan, "segments scheduled", done, total, p->t0, &p->shown);
}

gboolean rf_real_schedule(RealState *st, const RfPlan *plan, GError **error) {
  Progress pr = {st, plan, g_get_monotonic_time(), 0};
  pr.shown = pr.t0;
  unsigned flags = st->opt.plan_only ? RF_SCHEDULE_SIZES_ONLY : 0;
  if (!st->opt.staged && rf_schedule_pipelines(plan)) flags |= RF_SCHEDULE_PIPELINED;
  st->sched = rf_schedule_build(plan, st->pb->nranks, st->opt.staging_bytes, st->opt.max_ops,
                                st->opt.slots, flags, on_progress, &pr, error);
  if (!st->sched) return FALSE;
  st->stage_round0 = st->sched->stage_round0;
  st->nrounds = st->sched->nrounds;
  return TRUE;
}
