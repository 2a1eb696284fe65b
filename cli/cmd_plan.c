#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "error.h"
#include "plan.h"
#include "report.h"

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
      "the busiest NIC, messages, transfers and the network lower bound.");
  g_option_context_set_main_group(ctx, rf_args_group(&a));
  g_option_context_add_main_entries(ctx, entries, NULL);
  GError *e = NULL;
  RfProblem *pb = NULL;
  int rc = 1;
  RfStrategy st[RF_STRATEGY_COUNT];
  int nst = 0;
  if (!g_option_context_parse(ctx, &argc, &argv, &e)) goto out;
  if (argc > 1) {
    g_set_error(&e, RF_ERROR, RF_ERROR_INPUT, "unexpected argument '%s'", argv[1]);
    goto out;
  }
  if (!rf_plan_args_check(&pa, &e)) goto out;
  nst = rf_args_strategies(&a, st, &e);
  if (nst < 0) goto out;
  pb = rf_args_problem(&a, &e);
  if (!pb) goto out;
  const RfModel *m = pb->model;
  if (m->ckpt_note && !a.quiet) fprintf(stderr, "refit: %s: %s\n", m->ckpt_dir, m->ckpt_note);
  uint64_t model_bytes = (uint64_t)rf_model_bytes(m);
  if (!a.json) {
    printf("# refit plan: model %s (%.1f GB)%s%s\n", m->name, model_bytes / 1e9,
           a.spec ? ", spec " : "", a.spec ? a.spec : "");
    if (!a.spec)
      printf("# train %s (%s, %d ranks) -> infer %s (%s, %d ranks)\n", a.train, pb->src.framework,
             pb->src.nranks, a.infer, pb->dst.framework, pb->dst.nranks);
    printf("# topology %s: %d GPUs per NVLink domain, %d x %.0f Gb/s NIC per GPU\n", pb->topo->name,
           pb->topo->gpus_per_domain, pb->topo->nics_per_gpu, pb->topo->nic_Gbps);
    printf("# placement: %s\n", pb->placement_note);
    printf("%-17s %12s %12s %12s %10s %11s %7s %10s %8s\n", "strategy", "network", "nvlink",
           "max_nic", "messages", "transfers", "stages", "lower_bd", "net/model");
    printf("%-17s %12s %12s %12s %10s %11s %7s %10s %8s\n", "", "(GB)", "(GB)", "(GB)", "", "", "",
           "(s)", "(x)");
  } else if (!a.quiet) {
    fprintf(stderr, "# placement: %s\n", pb->placement_note);
  }
  JsonBuilder *jb = json_builder_new();
  json_builder_begin_object(jb);
  json_builder_set_member_name(jb, "model");
  json_builder_add_string_value(jb, m->name);
  json_builder_set_member_name(jb, "model_bytes");
  json_builder_add_int_value(jb, (gint64)model_bytes);
  json_builder_set_member_name(jb, "placement");
  json_builder_add_string_value(jb, pb->placement_note);
  json_builder_set_member_name(jb, "strategies");
  json_builder_begin_array(jb);
  gboolean ok = TRUE;
  for (int i = 0; i < nst && ok; i++) {
    RfPlan *plan = rf_plan_args_build(&pa, pb, st[i], nst > 1, &e);
    if (!plan) {
      ok = FALSE;
      break;
    }
    const RfPlanStats *s = &plan->stats;
    if (!a.json) {
      printf("%-17s %12.3f %12.3f %12.3f %10llu %11llu %7d %10.4f %8.2f\n", rf_strategy_name(st[i]),
             s->network_bytes / 1e9, s->nvlink_bytes / 1e9, s->max_nic_bytes / 1e9,
             (unsigned long long)s->messages, (unsigned long long)s->transfers, s->stages,
             s->lower_bound_s, model_bytes ? (double)s->network_bytes / model_bytes : 0);
    }
    json_builder_begin_object(jb);
    json_builder_set_member_name(jb, "strategy");
    json_builder_add_string_value(jb, rf_strategy_name(st[i]));
    json_builder_set_member_name(jb, "network_bytes");
    json_builder_add_int_value(jb, (gint64)s->network_bytes);
    json_builder_set_member_name(jb, "nvlink_bytes");
    json_builder_add_int_value(jb, (gint64)s->nvlink_bytes);
    json_builder_set_member_name(jb, "max_nic_bytes");
    json_builder_add_int_value(jb, (gint64)s->max_nic_bytes);
    json_builder_set_member_name(jb, "messages");
    json_builder_add_int_value(jb, (gint64)s->messages);
    json_builder_set_member_name(jb, "transfers");
    json_builder_add_int_value(jb, (gint64)s->transfers);
    json_builder_set_member_name(jb, "stages");
    json_builder_add_int_value(jb, s->stages);
    json_builder_set_member_name(jb, "payload_bytes");
    json_builder_add_int_value(jb, (gint64)s->payload_bytes);
    json_builder_set_member_name(jb, "lower_bound_s");
    json_builder_add_double_value(jb, s->lower_bound_s);
    json_builder_set_member_name(jb, "phases");
    json_builder_begin_array(jb);
    for (int ph = 0; ph < RF_PHASE_COUNT; ph++) {
      if (!s->phase_network_bytes[ph]) continue;
      json_builder_begin_object(jb);
      json_builder_set_member_name(jb, "phase");
      json_builder_add_string_value(jb, rf_phase_name((RfPhase)ph));
      json_builder_set_member_name(jb, "network_bytes");
      json_builder_add_int_value(jb, (gint64)s->phase_network_bytes[ph]);
      json_builder_set_member_name(jb, "max_nic_bytes");
      json_builder_add_int_value(jb, (gint64)s->phase_max_nic_bytes[ph]);
      json_builder_end_object(jb);
    }
    json_builder_end_array(jb);
    json_builder_end_object(jb);
    rf_plan_free(plan);
  }
  json_builder_end_array(jb);
  json_builder_end_object(jb);
  if (ok && a.json) {
    rf_json_print(g_object_ref(jb));
  } else if (ok && pa.verify) {
    printf("# verified: every destination element received exactly once; OK\n");
  }
  g_object_unref(jb);
  rc = ok ? 0 : 1;
out:
  if (e) {
    fprintf(stderr, "refit: error: %s\n", e->message);
    g_error_free(e);
    rc = rc ? rc : 1;
  }
  rf_problem_free(pb);
  rf_args_clear(&a);
  rf_plan_args_clear(&pa);
  g_option_context_free(ctx);
  return rc;
}
