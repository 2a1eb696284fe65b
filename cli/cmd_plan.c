/* `refit plan`: the exact transfer plan of each strategy, as a table or JSON. */
#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "error.h"
#include "plan.h"
#include "predict.h"
#include "quant.h"
#include "report.h"
#include "schedule.h"

typedef struct {
  RfStrategy strategy;
  RfPlanStats stats;
  RfMemory mem;
  gboolean scheduled, pipelined; /* --schedule: refit run's schedule of the plan */
  int groups, max_ops, slots;
  uint64_t segments, staging_bytes; /* the staging bound and lanes refit run chooses */
  double lockstep_s;
} PlanRow;

typedef struct {
  const RfModel *model;
  const char *placement;
} PlanHead;

static void json_head(JsonBuilder *b, const void *ud) {
  const PlanHead *h = ud;
  rf_json_str(b, "model", h->model->name);
  rf_json_int(b, "model_bytes", rf_model_bytes(h->model));
  rf_json_str(b, "placement", h->placement);
}

static void json_row(JsonBuilder *b, int i, const void *rows) {
  const PlanRow *r = &((const PlanRow *)rows)[i];
  const RfPlanStats *s = &r->stats;
  rf_json_str(b, "strategy", rf_strategy_name(r->strategy));
  rf_json_int(b, "network_bytes", (gint64)s->network_bytes);
  rf_json_int(b, "nvlink_bytes", (gint64)s->nvlink_bytes);
  rf_json_int(b, "max_nic_bytes", (gint64)s->max_nic_bytes);
  rf_json_int(b, "messages", (gint64)s->messages);
  rf_json_int(b, "transfers", (gint64)s->transfers);
  rf_json_int(b, "stages", s->stages);
  rf_json_int(b, "payload_bytes", (gint64)s->payload_bytes);
  rf_json_num(b, "lower_bound_s", s->lower_bound_s);
  rf_json_int(b, "max_nvlink_bytes", (gint64)s->max_nvlink_bytes);
  rf_json_num(b, "link_bound_s", s->link_bound_s);
  if (r->scheduled) {
    rf_json_int(b, "schedule_groups", r->groups);
    rf_json_int(b, "schedule_segments", (gint64)r->segments);
    rf_json_int(b, "schedule_max_ops", r->max_ops);
    rf_json_int(b, "schedule_staging_bytes", (gint64)r->staging_bytes);
    rf_json_int(b, "schedule_lanes", r->slots);
    rf_json_num(b, "schedule_lockstep_s", r->lockstep_s);
  }
  rf_json_num(b, "physical_bound_s", s->domain_bound_s);
  rf_json_int(b, "infer_weights_bytes", (gint64)r->mem.weights_bytes);
  rf_json_int(b, "weight_banks", r->mem.banks);
  rf_json_int(b, "refit_extra_bytes", (gint64)r->mem.extra_bytes);
  rf_json_int(b, "nccl_buffer_bytes", (gint64)r->mem.nccl_bytes);
  rf_json_int(b, "infer_peak_bytes", (gint64)r->mem.peak_bytes);
  rf_json_bool(b, "memory_exceeded", rf_memory_exceeds(&r->mem));
  rf_json_str(b, "memory_from", rf_memory_from_key(&r->mem));
  json_builder_set_member_name(b, "phases");
  json_builder_begin_array(b);
  for (int ph = 0; ph < RF_PHASE_COUNT; ph++) {
    if (!s->phase_network_bytes[ph]) continue;
    json_builder_begin_object(b);
    rf_json_str(b, "phase", rf_phase_name((RfPhase)ph));
    rf_json_int(b, "network_bytes", (gint64)s->phase_network_bytes[ph]);
    rf_json_int(b, "max_nic_bytes", (gint64)s->phase_max_nic_bytes[ph]);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
}

static void print_header(const RfArgs *a, const RfProblem *pb) {
  const RfModel *m = pb->model;
  printf("# refit plan: model %s (%.1f GB)%s%s\n", m->name, rf_model_bytes(m) / 1e9,
         a->spec ? ", spec " : "", a->spec ? a->spec : "");
  if (!a->spec)
    printf("# train %s (%s, %d ranks) -> infer %s (%s, %d ranks)\n", a->train, pb->src.framework,
           pb->src.nranks, a->infer, pb->dst.framework, pb->dst.nranks);
  printf("# topology %s: %d GPUs per NVLink domain, %d x %.0f Gb/s NIC per GPU\n", pb->topo->name,
         pb->topo->gpus_per_domain, pb->topo->nics_per_gpu, pb->topo->nic_Gbps);
  printf("# placement: %s\n", pb->placement_note);
  rf_args_print_node_map(stdout, a, pb);
  g_autofree char *quant = rf_quant_describe(pb);
  if (quant) printf("# quant: %s\n", quant);
  printf("%-17s %12s %12s %12s %10s %11s %7s %10s %10s %8s\n", "strategy", "network", "nvlink",
         "max_nic", "messages", "transfers", "stages", "lower_bd", "phys_bd", "net/model");
  printf("%-17s %12s %12s %12s %10s %11s %7s %10s %10s %8s\n", "", "(GB)", "(GB)", "(GB)", "", "",
         "", "(s)", "(s)", "(x)");
}

static void print_row(const PlanRow *r, uint64_t model_bytes) {
  const RfPlanStats *s = &r->stats;
  printf("%-17s %12.3f %12.3f %12.3f %10" G_GUINT64_FORMAT " %11" G_GUINT64_FORMAT
         " %7d %10.4f %10.4f %8.2f\n",
         rf_strategy_name(r->strategy), s->network_bytes / 1e9, s->nvlink_bytes / 1e9,
         s->max_nic_bytes / 1e9, (guint64)s->messages, (guint64)s->transfers, s->stages,
         s->lower_bound_s, s->domain_bound_s,
         model_bytes ? (double)s->network_bytes / model_bytes : 0);
}

int rf_cmd_plan(int argc, char **argv) {
  RfArgs a = {0};
  RfPlanArgs pa = {0};
  GOptionEntry entries[RF_PLAN_ARGS_NENTRIES];
  rf_plan_args_entries(&pa, entries);
  g_set_prgname("refit plan");
  GOptionContext *ctx = g_option_context_new("- exact transfer plans of refit strategies");
  g_option_context_set_summary(
      ctx,
      "Plan the refit of a model from a Megatron training layout to a vLLM inference layout\n"
      "(or of a raw DTensor spec) and print, per strategy, bytes over the network and NVLink,\n"
      "the busiest NIC, messages, transfers, the plan's network lower bound (busiest NIC) and\n"
      "the physical bound (bytes into or out of the busiest NVLink domain over its NIC rate).");
  g_option_context_set_description(ctx, RF_EXIT_STATUS_HELP);
  g_option_context_set_main_group(ctx, rf_args_group(&a));
  g_option_context_add_main_entries(ctx, entries, NULL);
  gboolean schedule = FALSE;
  const GOptionEntry more[] = {
      {"schedule", 0, 0, G_OPTION_ARG_NONE, &schedule,
       "Also build the schedule refit run executes (its staging, lanes and operation bound, chosen "
       "as refit run chooses them) "
       "and print its groups, segments and lockstep time: the sum over groups of the slowest "
       "rank's bytes at line rate (a statistic of the schedule, not a prediction). The memory "
       "line counts refit run's schedule either way; without --schedule, plans above 2 million "
       "segments count the plan's stages instead (and say so)",
       NULL},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  g_option_context_add_main_entries(ctx, more, NULL);
  GError *e = NULL;
  RfProblem *pb = NULL;
  RfStrategy st[RF_STRATEGY_COUNT];
  PlanRow rows[RF_STRATEGY_COUNT];
  RfCalibration cal = {0}; /* the topology's: refit run's staging choice weighs its costs */
  int nst = 0;
  if (!rf_args_parse(ctx, &argc, &argv, FALSE, &e)) goto out;
  if (!rf_plan_args_check(&pa, &e)) goto out;
  nst = rf_args_strategies(&a, st, &e);
  if (nst < 0) goto out;
  pb = rf_args_problem(&a, &e);
  if (!pb) goto out;
  uint64_t model_bytes = (uint64_t)rf_model_bytes(pb->model);
  {
    g_autofree char *src = NULL;
    gboolean neutral = FALSE;
    if (!rf_calibration_select(&cal, NULL, pb->topo, &src, &neutral, &e)) goto out;
  }
  if (!a.json)
    print_header(&a, pb);
  else if (!a.quiet)
    fprintf(stderr, "# placement: %s\n", pb->placement_note);
  if (a.json) rf_args_print_node_map(stderr, &a, pb);
  for (int i = 0; i < nst; i++) {
    RfPlan *plan = rf_plan_args_build(&pa, pb, st[i], nst > 1, &e);
    if (!plan) goto out;
    rows[i].strategy = st[i];
    rows[i].stats = plan->stats;
    rows[i].scheduled = FALSE;
    RfMemoryRun run; /* refit run's staging bound, lanes and operation bound, chosen as it
                      * chooses them from the topology's calibration */
    rf_calibration_memory_run_plan(&cal, plan, pa.double_bank ? 2 : 1, &run, NULL);
    if (!schedule && !rf_memory_of_run(plan, &run, &rows[i].mem, &e)) {
      rf_plan_free(plan);
      g_prefix_error(&e, "%s: ", rf_strategy_name(st[i]));
      goto out;
    }
    if (schedule) {
      const gboolean pipe = !run.staged;
      RfSchedule *sg =
          rf_schedule_build(plan, pb->nranks, run.staging_bytes, run.max_ops, run.slots,
                            pipe ? RF_SCHEDULE_PIPELINED : 0, NULL, NULL, &e);
      if (!sg) {
        rf_plan_free(plan);
        g_prefix_error(&e, "%s: ", rf_strategy_name(st[i]));
        goto out;
      }
      rows[i].scheduled = TRUE;
      rows[i].pipelined = pipe;
      rows[i].groups = sg->nrounds;
      rows[i].segments = sg->nsegs;
      rows[i].max_ops = sg->max_ops;
      rows[i].staging_bytes = run.staging_bytes;
      rows[i].slots = run.slots;
      rows[i].lockstep_s = rf_schedule_lockstep_s(sg, plan);
      rf_memory_of_schedule(plan, sg, run.lane_comms,
                            &rows[i].mem); /* the same count, of this schedule */
      rf_memory_set_banks(&rows[i].mem, run.banks);
      rf_schedule_free(sg);
    }
    rf_plan_free(plan);
    if (!rf_memory_check(&rows[i].mem, "refit plan", pa.strict, a.json ? a.quiet : TRUE, &e)) {
      g_prefix_error(&e, "%s: ", rf_strategy_name(st[i]));
      goto out;
    }
    if (!a.json) print_row(&rows[i], model_bytes);
  }
  if (a.json) {
    PlanHead h = {pb->model, pb->placement_note};
    rf_json_print_strategies(json_head, &h, nst, json_row, rows);
  } else {
    gboolean by_stages = FALSE;
    for (int i = 0; i < nst; i++) {
      char *m = rf_memory_format(&rows[i].mem);
      printf("# %s %s (%s)%s\n", rf_strategy_name(st[i]), m, rf_memory_from_name(&rows[i].mem),
             rf_memory_exceeds(&rows[i].mem) ? "  EXCEEDS GPU MEMORY" : "");
      g_free(m);
      by_stages |= rows[i].mem.from == RF_MEMORY_FROM_STAGES;
    }
    if (by_stages)
      printf("# by the plan's stages: an estimate, not refit run's count (its pipelined schedule "
             "frees a relayed piece once forwarded); --schedule builds and counts the schedule, "
             "as refit sim does\n");
    for (int i = 0; i < nst; i++)
      if (rows[i].scheduled)
        printf("# %s schedule (refit run: %g MiB staging, %d lanes, %s): %d groups of up to %d "
               "operations, %" G_GUINT64_FORMAT " segments; lockstep %.4f s at line rate "
               "(%.2fx lower_bd)\n",
               rf_strategy_name(st[i]), (double)rows[i].staging_bytes / 1048576.0, rows[i].slots,
               rows[i].pipelined ? "pipelined" : "staged", rows[i].groups, rows[i].max_ops,
               (guint64)rows[i].segments, rows[i].lockstep_s,
               rows[i].stats.lower_bound_s > 0 ? rows[i].lockstep_s / rows[i].stats.lower_bound_s
                                               : 0);
    if (pa.verify) printf("# verified: every destination element received exactly once; OK\n");
  }
out:
  rf_calibration_clear(&cal);
  rf_problem_free(pb);
  rf_args_clear(&a);
  rf_plan_args_clear(&pa);
  g_option_context_free(ctx);
  return rf_cmd_exit("refit: error", e, TRUE);
}
