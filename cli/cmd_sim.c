/* `refit sim`: predict the refit time of one or more strategies and explain it. */
#include "advise_pool.h"
#include "args.h"
#include "commands.h"
#include "error.h"
#include "predict.h"
#include "quant.h"
#include "recovery.h"
#include "report.h"
#include "schedule.h"
#include "sim.h"

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <stdio.h>
#include <string.h>

typedef struct {
  RfStrategy strategy;
  RfSoftware software;
  RfSwVariant variant;
  RfResult res;
  RfSimStats stats; /* copied names */
  RfPlanStats plan;
  RfMemory mem;      /* inference GPU memory of the plan */
  RfStaging staging; /* refit's executor: staging bound, lanes, operation bound of the plan */
  gboolean have_staging;
  gboolean ok;
  GError *error;  /* when not ok */
  gboolean lost;  /* --lost: the recovery cost below is reported */
  RfRecovery rec; /* communicators rebuilt before the first refit over the survivors */
  RfPlan *pre;    /* the row's plan, built before the workers are forked (simulate_rows) */
} Row;

static void row_clear(Row *r) {
  rf_result_clear(&r->res);
  rf_recovery_clear(&r->rec);
  for (int i = 0; i < r->stats.ntop; i++)
    g_free(r->stats.top[i].name);
  g_free(r->stats.top);
  g_free(r->stats.exec_fallback);
  g_clear_error(&r->error);
}

/* The model that produced the row's figures: the flow model where refit's executor could not be
 * simulated (RfSimStats.exec_fallback), else the one asked for. */
static RfSwVariant row_variant(const Row *r) {
  return r->ok && r->stats.exec_fallback ? RF_VARIANT_DEFAULT : r->variant;
}

/* The row's model line: what produced its figures and, after a fallback, why; on a coarse
 * platform, that platform's measured error. Caller frees. */
static char *row_model_line(const Row *r, double *oos) {
  char *line = rf_predict_model_line(r->software, row_variant(r), (int)r->strategy, oos);
  g_autofree char *more = NULL;
  if (r->ok && r->stats.exec_fallback)
    more = g_strdup_printf("shown because refit's executor was not simulated: %s",
                           r->stats.exec_fallback);
  else if (r->ok && r->stats.group > 1 && rf_variant_is_executor(r->software, r->variant))
    more = rf_predict_coarse_line(r->stats.group);
  if (!more) return line;
  char *all = g_strdup_printf("%s; %s", line, more);
  g_free(line);
  return all;
}

static void copy_stats(RfSimStats *dst, const RfSimStats *src) {
  *dst = *src;
  dst->exec_fallback = g_strdup(src->exec_fallback);
  dst->top = g_new0(RfSimLink, src->ntop > 0 ? src->ntop : 1);
  for (int i = 0; i < src->ntop; i++) {
    dst->top[i] = src->top[i];
    dst->top[i].name = g_strdup(src->top[i].name);
  }
}

static void print_header(FILE *f, const RfArgs *a, const RfProblem *pb, const RfCalibration *c,
                         const char *source) {
  const RfTopology *t = pb->topo;
  fprintf(f, "# refit sim  model %s  train %s  infer %s  spec %s\n", a->model ? a->model : "-",
          a->train ? a->train : "-", a->infer ? a->infer : "-", a->spec ? a->spec : "-");
  fprintf(f,
          "# topology %s: %d GPUs/domain, NVLink %.0f GB/s, %d x %.0f Gb/s NIC per GPU, %s fabric"
          " (oversubscription %g), HBM %.0f GB/s\n",
          t->name, t->gpus_per_domain, t->nvlink_GBps, t->nics_per_gpu, t->nic_Gbps,
          t->fabric == RF_FABRIC_RAIL_OPTIMIZED ? "rail-optimized" : "fat-tree",
          t->oversubscription, t->hbm_GBps);
  fprintf(
      f,
      "# calibration %s: efficiency NIC %.3g NVLink %.3g HBM %.3g all-gather %.3g "
      "broadcast %.3g; message %.3g s, collective %.3g s, chunk %.0f B; export %.3g s (host %s) "
      "and m2n %.3g s per tensor; bucket %.3g GB x %d; fixed %.3g s; hybrid %s\n",
      source, c->nic_efficiency, c->nvlink_efficiency, c->hbm_efficiency, c->allgather_efficiency,
      c->broadcast_efficiency, c->message_latency_s, c->collective_base_s, c->chunk_bytes,
      c->export_tensor_overhead_s, c->export_host_overlap ? "overlapped" : "in series",
      c->m2n_tensor_overhead_s, rf_calibration_bucket_bytes(c) / 1e9, c->buffers, c->fixed_s,
      c->hybrid_overlap ? "concurrent" : "sequential");
  fprintf(f, "# ranks %d (train %d, infer %d)\n", pb->nranks, pb->src.nranks, pb->dst.nranks);
  if (pb->placement_note) fprintf(f, "# placement: %s\n", pb->placement_note);
  rf_args_print_node_map(f, a, pb);
  g_autofree char *quant = rf_quant_describe(pb);
  if (quant) fprintf(f, "# quant: %s\n", quant);
  if (rf_variant_is_executor(c->software, c->variant))
    fprintf(f, "# executor: %s\n",
            c->exec_lane_comms
                ? "each lane's groups on a communicator and stream of its own (refit run's "
                  "default): a rank's groups on different lanes run at once"
                : "every lane on one communicator and stream (--one-comm): a rank's groups one "
                  "after another");
}

static void print_row(FILE *f, const Row *r) {
  if (r->software == RF_SOFTWARE_REFIT)
    fprintf(f, "\n## %s\n", rf_strategy_name(r->strategy));
  else
    fprintf(f, "\n## %s  (software %s, %s)\n", rf_strategy_name(r->strategy),
            rf_software_name(r->software),
            rf_predict_path_name(r->software, r->variant, (int)r->strategy));
  double oos;
  g_autofree char *model = row_model_line(r, &oos);
  fprintf(f, "#  model: %s\n", model);
  if (r->have_staging && rf_variant_is_executor(r->software, r->variant)) {
    g_autofree char *st = rf_staging_describe(&r->staging);
    fprintf(f, "#  executor: %s\n", st);
  }
  if (!r->ok) {
    fprintf(f, "#  failed: %s\n", r->error->message);
    return;
  }
  fprintf(f, "#  %-10s %12s %12s %14s\n", "stage", "start(s)", "end(s)", "bytes(GB)");
  for (int i = 0; i < r->res.nstages; i++)
    fprintf(f, "   %-10s %12.5g %12.5g %14.4g\n", r->res.stages[i].name, r->res.stages[i].start_s,
            r->res.stages[i].end_s, r->res.stages[i].bytes / 1e9);
  fprintf(f,
          "#  busiest links (%s: %d hosts of %d GPU%s, %" G_GUINT64_FORMAT " flows, %.2f s wall)\n",
          r->stats.engine == RF_SIM_ENGINE_EVENTS ? "events engine" : "SimGrid", r->stats.hosts,
          r->stats.group, r->stats.group > 1 ? "s" : "", (guint64)r->stats.flows, r->stats.wall_s);
  fprintf(f, "#  %-28s %12s %12s %10s\n", "link", "bytes(GB)", "busy(s)", "util(%)");
  for (int i = 0; i < r->stats.ntop; i++)
    fprintf(f, "   %-28s %12.3f %12.4f %10.1f\n", r->stats.top[i].name, r->stats.top[i].bytes / 1e9,
            r->stats.top[i].busy_s,
            r->res.total_s > 0 ? 100.0 * r->stats.top[i].busy_s / r->res.total_s : 0.0);
  if (r->stats.nbuckets > 0 && r->software == RF_SOFTWARE_REFIT)
    fprintf(f,
            "#  export and broadcast: %.0f buckets of %.3g GB, overlapped step paced to %.3f s\n",
            r->stats.nbuckets, r->stats.bucket_bytes / 1e9, r->stats.export_pace_s);
  else if (r->stats.nbuckets > 0)
    fprintf(f,
            "#  export: %.0f checkpoint tensors in %.0f collective rounds, latency %.3f s; %.0f "
            "buckets of %.3g GB; overlapped step paced to %.3f s\n",
            r->stats.export_tensors, r->stats.export_calls, r->stats.export_latency_s,
            r->stats.nbuckets, r->stats.bucket_bytes / 1e9, r->stats.export_pace_s);
  if (r->stats.m2n_tensors > 0 && r->software == RF_SOFTWARE_REFIT)
    fprintf(f, "#  m2n/p2p: %.0f checkpoint tensors by messages\n", r->stats.m2n_tensors);
  if (r->software != RF_SOFTWARE_REFIT)
    fprintf(f, "#  software %s (%s): %.0f reshard calls, %.3f s of serial software time\n",
            rf_software_name(r->software),
            rf_predict_path_name(r->software, r->variant, (int)r->strategy), r->stats.sw_calls,
            r->stats.sw_software_s);
  fprintf(f, "   predicted %.5g s   network lower bound %.5g s   ratio %.2f\n", r->res.total_s,
          r->res.lower_bound_s,
          r->res.lower_bound_s > 0 ? r->res.total_s / r->res.lower_bound_s : 0.0);
  fprintf(f, "   bound by %s\n", r->res.bound_by ? r->res.bound_by : "-");
  g_autofree char *mem = rf_memory_format(&r->mem);
  g_autofree char *from = rf_predict_memory_source(r->software, &r->mem);
  fprintf(f, "#  %s (%s)%s\n", mem, from, rf_memory_exceeds(&r->mem) ? "  EXCEEDS GPU MEMORY" : "");
}

/* Members of one plan's inference memory (sim and plan write the same names). */
static void json_memory(JsonBuilder *b, const RfMemory *m) {
  rf_json_int(b, "infer_weights_bytes", (gint64)m->weights_bytes);
  rf_json_int(b, "weight_banks", m->banks);
  rf_json_int(b, "refit_extra_bytes", (gint64)m->extra_bytes);
  rf_json_int(b, "nccl_buffer_bytes", (gint64)m->nccl_bytes);
  rf_json_int(b, "nccl_communicators", m->comms);
  rf_json_int(b, "infer_peak_bytes", (gint64)m->peak_bytes);
  rf_json_bool(b, "memory_exceeded", rf_memory_exceeds(m));
}

/* --lost: the recovery members (the *_s of destroy-and-recreate are absent when the calibration
 * has no communicator-init figure: recovery_available false). */
static void json_recovery(JsonBuilder *b, const Row *r) {
  const RfRecovery *v = &r->rec;
  rf_json_bool(b, "recovery_available", v->available);
  rf_json_int(b, "recovery_communicators", v->ncomms);
  rf_json_int(b, "recovery_comm_ranks_before", v->ranks_before);
  rf_json_int(b, "recovery_comm_ranks_after", v->ranks_after);
  rf_json_bool(b, "recovery_extrapolated", v->extrapolated);
  if (!v->available) return;
  const char *names[] = {"recovery_recreate_s", "recovery_shrink_s", "recovery_recreate_total_s",
                         "recovery_shrink_total_s"};
  double vals[] = {v->recreate_s, v->shrink_s, v->recreate_s + r->res.total_s,
                   v->shrink_s + r->res.total_s};
  for (int i = 0; i < 4; i++) {
    rf_json_num(b, names[i], vals[i]);
  }
}

static void json_head(JsonBuilder *b, const void *ud) {
  rf_json_str(b, "calibration", ud);
}

/* The members of one strategy (the run command writes the same names, measured_s for
 * predicted_s). */
static void json_row(JsonBuilder *b, int i, const void *rows) {
  const Row *r = &((const Row *)rows)[i];
  rf_json_str(b, "strategy", rf_strategy_name(r->strategy));
  if (!r->ok) {
    rf_json_str(b, "error", r->error->message);
    return;
  }
  rf_json_num(b, "predicted_s", r->res.total_s);
  rf_json_num(b, "lower_bound_s", r->res.lower_bound_s);
  rf_json_num(b, "ratio_to_lower_bound",
              r->res.lower_bound_s > 0 ? r->res.total_s / r->res.lower_bound_s : 0);
  rf_json_str(b, "bound_by", r->res.bound_by ? r->res.bound_by : "");
  rf_json_int(b, "network_bytes", (gint64)r->plan.network_bytes);
  rf_json_int(b, "messages", (gint64)r->plan.messages);
  rf_json_int(b, "sim_hosts", r->stats.hosts);
  rf_json_int(b, "sim_group", r->stats.group);
  rf_json_int(b, "sim_flows", (gint64)r->stats.flows);
  rf_json_str(b, "sim_engine", rf_sim_engine_name(r->stats.engine));
  rf_json_str(b, "software", rf_software_name(r->software));
  rf_json_str(b, "software_variant", rf_variant_name(r->software, row_variant(r)));
  if (r->ok && r->stats.exec_fallback)
    rf_json_str(b, "executor_not_simulated", r->stats.exec_fallback);
  if (r->have_staging && rf_variant_is_executor(r->software, r->variant))
    rf_json_staging(b, &r->staging, r->staging.lane_comms); /* the "#  executor:" line's */
  double oos;
  g_autofree char *key = rf_predict_model_key(r->software, row_variant(r), (int)r->strategy);
  g_autofree char *line = row_model_line(r, &oos);
  rf_json_str(b, "predicted_by", key);
  rf_json_str(b, "model_note", line);
  if (oos >= 0) rf_json_num(b, "out_of_sample_error_pct", oos);
  rf_json_num(b, "reshard_calls", r->stats.sw_calls);
  rf_json_num(b, "software_s", r->stats.sw_software_s);
  rf_json_num(b, "export_latency_s", r->stats.export_latency_s);
  rf_json_num(b, "export_pace_s", r->stats.export_pace_s);
  json_memory(b, &r->mem);
  rf_json_str(b, "memory_from", rf_memory_from_key(&r->mem));
  if (r->lost) json_recovery(b, r);
  json_builder_set_member_name(b, "stages");
  json_builder_begin_array(b);
  for (int i = 0; i < r->res.nstages; i++) {
    json_builder_begin_object(b);
    rf_json_str(b, "name", r->res.stages[i].name);
    rf_json_num(b, "start_s", r->res.stages[i].start_s);
    rf_json_num(b, "end_s", r->res.stages[i].end_s);
    rf_json_int(b, "bytes", (gint64)r->res.stages[i].bytes);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
  json_builder_set_member_name(b, "links");
  json_builder_begin_array(b);
  for (int i = 0; i < r->stats.ntop; i++) {
    json_builder_begin_object(b);
    rf_json_str(b, "name", r->stats.top[i].name);
    rf_json_num(b, "bytes", r->stats.top[i].bytes);
    rf_json_num(b, "utilization", r->res.total_s > 0 ? r->stats.top[i].busy_s / r->res.total_s : 0);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
}

/* --timeline: a PNG path that can be written (checked before anything is simulated). */
static gboolean timeline_check(const char *png, GError **error) {
  if (!*png || !g_str_has_suffix(png, ".png") || g_file_test(png, G_FILE_TEST_IS_DIR)) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "--timeline wants a FILE.png, got '%s'", png);
    return FALSE;
  }
  char *dir = g_path_get_dirname(png);
  gboolean ok = g_file_test(dir, G_FILE_TEST_IS_DIR);
  if (!ok)
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "--timeline %s: no directory '%s'", png, dir);
  g_free(dir);
  return ok;
}

/* Timeline PNG through sim/timeline.py (matplotlib), fed a CSV of the stages. A failure of the
 * script is one line: the last line it wrote on stderr. */
static gboolean write_timeline(const char *png, const char *title, const Row *rows, int n,
                               GError **error) {
  char *csv = NULL;
  int fd = g_file_open_tmp("refit-timeline-XXXXXX.csv", &csv, error);
  if (fd < 0) return FALSE;
  FILE *f = fdopen(fd, "w");
  fprintf(f, "strategy,stage,start_s,end_s,bytes\n");
  for (int i = 0; i < n; i++)
    for (int s = 0; rows[i].ok && s < rows[i].res.nstages; s++)
      fprintf(f, "%s,%s,%.9g,%.9g,%" G_GUINT64_FORMAT "\n", rf_strategy_name(rows[i].strategy),
              rows[i].res.stages[s].name, rows[i].res.stages[s].start_s,
              rows[i].res.stages[s].end_s, (guint64)rows[i].res.stages[s].bytes);
  fclose(f);
  gboolean ok = rf_plot_script("sim/timeline.py", csv, png, title, "timeline", error);
  g_unlink(csv);
  g_free(csv);
  return ok;
}

/* The plot's title: what was simulated, on which cluster. */
static char *timeline_title(const RfArgs *a, const RfProblem *pb, const Row *rows, int n) {
  GString *t = g_string_new("refit sim: ");
  if (a->spec)
    g_string_append_printf(t, "spec %s", a->spec);
  else
    g_string_append_printf(t, "%s, train %s -> infer %s", pb->model->name, a->train, a->infer);
  g_string_append_printf(t, ", %s (%d GPUs/domain), ", pb->topo->name, pb->topo->gpus_per_domain);
  for (int i = 0; i < n; i++) {
    g_string_append_printf(t, "%s%s", i ? ", " : "", rf_strategy_name(rows[i].strategy));
    /* which model drew the row */
    g_autofree char *key =
        rf_predict_model_key(rows[i].software, row_variant(&rows[i]), (int)rows[i].strategy);
    g_string_append_printf(t, " [%s]", key);
  }
  return g_string_free(t, FALSE);
}

/* --lost: destroy-and-recreate against ncclCommShrink, each followed by the first refit over the
 * survivors (the prediction above). */
static void print_recovery(const RfCalibration *c, const Row *rows, int nrows) {
  printf("\n# recovery: communicators rebuilt over the survivors, then the first refit "
         "(docs/elastic.md)\n");
  if (rf_recovery_init_s(c, 1) < 0)
    printf("# destroy-and-recreate: unavailable (the calibration has no communicator-init "
           "figure: [recovery] init_*)\n");
  else
    printf("# communicator init: %.3g s at %.0f ranks, %.3g s at %.0f ranks (public figures), "
           "power law between; shrink = %.3g x init\n",
           c->recovery_init_small_s, c->recovery_init_small_ranks, c->recovery_init_large_s,
           c->recovery_init_large_ranks, c->recovery_shrink_fraction);
  printf("# %-18s %5s %13s %12s %10s %12s %15s %14s\n", "strategy", "comms", "ranks", "recreate(s)",
         "shrink(s)", "refit(s)", "recreate+refit", "shrink+refit");
  for (int i = 0; i < nrows; i++) {
    const Row *r = &rows[i];
    if (!r->ok) continue;
    const RfRecovery *v = &r->rec;
    char ranks[32];
    g_snprintf(ranks, sizeof ranks, "%d->%d", v->ranks_before, v->ranks_after);
    if (v->available)
      printf("  %-18s %5d %13s %12.4g %10.4g %12.5g %15.5g %14.5g%s\n",
             rf_strategy_name(r->strategy), v->ncomms, ranks, v->recreate_s, v->shrink_s,
             r->res.total_s, v->recreate_s + r->res.total_s, v->shrink_s + r->res.total_s,
             v->extrapolated ? "  (extrapolated)" : "");
    else
      printf("  %-18s %5d %13s %12s %10s %12.5g %15s %14s\n", rf_strategy_name(r->strategy),
             v->ncomms, ranks, "unavailable", "-", r->res.total_s, "-", "-");
    printf("  %-18s %s\n", "", v->comms);
  }
}

static void print_summary(const Row *rows, int nrows) {
  printf("\n# %-18s %12s %12s %8s  %-24s %s\n", "strategy", "predicted(s)", "bound(s)", "ratio",
         "model", "bound by");
  for (int i = 0; i < nrows; i++) {
    const Row *r = &rows[i];
    g_autofree char *key = rf_predict_model_key(r->software, row_variant(r), (int)r->strategy);
    if (!r->ok) {
      printf("  %-18s %12s %12s %8s  %-24s %s\n", rf_strategy_name(r->strategy), "-", "-", "-", key,
             r->error->message);
      continue;
    }
    printf("  %-18s %12.5g %12.5g %8.2f  %-24s %s\n", rf_strategy_name(r->strategy), r->res.total_s,
           r->res.lower_bound_s,
           r->res.lower_bound_s > 0 ? r->res.total_s / r->res.lower_bound_s : 0, key,
           r->res.bound_by ? r->res.bound_by : "-");
  }
}

/* One strategy's row: plan, memory, simulate (r->strategy, software and variant set). A failure
 * stays in r->error. */
static void simulate_row(const RfPlanArgs *pa, const RfProblem *pb, RfExecutor *ex,
                         const RfCalibration *cal, gboolean several, Row *r) {
  /* refit's executor builds refit run's schedule and counts its memory itself: its memory line
   * is the executor's (the same count, of that schedule), checked after the run, also where
   * rf_memory_of_run would only estimate it from the plan's stages (a plan too large to schedule
   * for the count alone), so that one run gives one memory answer; the staging chosen here is
   * handed to it (one choice, one schedule build per plan) */
  const gboolean exec = rf_variant_is_executor(r->software, r->variant);
  RfPlan *plan = r->pre ? r->pre : rf_plan_args_build(pa, pb, r->strategy, several, &r->error);
  r->pre = NULL;
  if (plan) {
    r->plan = plan->stats;
  }
  /* refit run's staging bound, lanes and operation bound for this plan (chosen where the
   * options left them 0), then the memory model (model/plan/memory.h) of the software as the
   * calibration runs it */
  RfMemoryRun mr;
  if (plan) {
    rf_calibration_memory_run_plan(cal, plan, pa->double_bank ? 2 : 1, &mr, &r->staging);
    r->have_staging = TRUE;
    rf_sim_executor_use_staging(ex, exec ? &r->staging : NULL);
  }
  /* the memory line from the executor's run */
  const gboolean after = plan && exec;
  if (plan && !after && !rf_memory_of_run(plan, &mr, &r->mem, &r->error)) {
    rf_plan_free(plan);
    plan = NULL;
  }
  if (plan && !after && !rf_memory_check(&r->mem, "refit sim", pa->strict, FALSE, &r->error)) {
    rf_plan_free(plan);
    plan = NULL;
    g_prefix_error(&r->error, "%s: ", rf_strategy_name(r->strategy));
  }
  if (plan) {
    if (ex->run(ex, plan, &r->res, &r->error)) {
      r->ok = TRUE;
      copy_stats(&r->stats, rf_sim_executor_stats(ex));
      /* the executor model built refit run's schedule: the same count, of that schedule */
      if (!rf_sim_executor_memory(ex, mr.banks, &r->mem) && after &&
          !rf_memory_of_run(plan, &mr, &r->mem, &r->error)) {
        r->ok = FALSE;
      }
      if (after && r->ok && !rf_memory_check(&r->mem, "refit sim", pa->strict, FALSE, &r->error)) {
        r->ok = FALSE;
        g_prefix_error(&r->error, "%s: ", rf_strategy_name(r->strategy));
      }
    }
    rf_plan_free(plan);
  }
}

/* A row as plain data, for a forked worker to send back (sim/advise/advise_pool.h): its strings
 * cut to the fields' sizes, its stages and busiest links to the arrays'. */
#define PACK_STAGES 64
#define PACK_TOP 8
typedef struct {
  gboolean ok, have_staging;
  int err_code;
  char err[1024];
  RfPlanStats plan;
  RfMemory mem;
  RfStaging staging;
  double total_s, min_s, max_s, lower_bound_s;
  int nstages;
  struct {
    char name[48];
    double start_s, end_s;
    uint64_t bytes;
  } stages[PACK_STAGES];
  char bound_by[512];
  RfSimStats stats; /* its pointers cleared: top and exec_fallback below */
  struct {
    char name[64];
    double bytes, bandwidth_Bps, busy_s;
  } top[PACK_TOP];
  char exec_fallback[512];
} PackedRow;

static void row_pack(const Row *r, PackedRow *k) {
  memset(k, 0, sizeof *k);
  k->ok = r->ok;
  k->have_staging = r->have_staging;
  if (r->error) {
    k->err_code = r->error->code;
    g_strlcpy(k->err, r->error->message, sizeof k->err);
  }
  k->plan = r->plan;
  k->mem = r->mem;
  k->staging = r->staging;
  k->total_s = r->res.total_s, k->min_s = r->res.min_s, k->max_s = r->res.max_s;
  k->lower_bound_s = r->res.lower_bound_s;
  k->nstages = MIN(r->res.nstages, PACK_STAGES);
  for (int i = 0; i < k->nstages; i++) {
    g_strlcpy(k->stages[i].name, r->res.stages[i].name, sizeof k->stages[i].name);
    k->stages[i].start_s = r->res.stages[i].start_s;
    k->stages[i].end_s = r->res.stages[i].end_s;
    k->stages[i].bytes = r->res.stages[i].bytes;
  }
  if (r->res.bound_by) g_strlcpy(k->bound_by, r->res.bound_by, sizeof k->bound_by);
  k->stats = r->stats;
  k->stats.top = NULL;
  k->stats.exec_fallback = NULL;
  k->stats.ntop = MIN(r->stats.ntop, PACK_TOP);
  for (int i = 0; i < k->stats.ntop; i++) {
    g_strlcpy(k->top[i].name, r->stats.top[i].name, sizeof k->top[i].name);
    k->top[i].bytes = r->stats.top[i].bytes;
    k->top[i].bandwidth_Bps = r->stats.top[i].bandwidth_Bps;
    k->top[i].busy_s = r->stats.top[i].busy_s;
  }
  if (r->stats.exec_fallback)
    g_strlcpy(k->exec_fallback, r->stats.exec_fallback, sizeof k->exec_fallback);
}

/* Into r (strategy, software and variant set, the rest empty). */
static void row_unpack(const PackedRow *k, Row *r) {
  r->ok = k->ok;
  r->have_staging = k->have_staging;
  if (!k->ok)
    r->error = g_error_new_literal(RF_ERROR, k->err_code ? k->err_code : RF_ERROR_IO, k->err);
  r->plan = k->plan;
  r->mem = k->mem;
  r->staging = k->staging;
  r->res.executor = g_strdup("sim");
  r->res.strategy = r->strategy;
  r->res.total_s = k->total_s, r->res.min_s = k->min_s, r->res.max_s = k->max_s;
  r->res.lower_bound_s = k->lower_bound_s;
  for (int i = 0; i < k->nstages; i++)
    rf_result_add_stage(&r->res, k->stages[i].name, k->stages[i].start_s, k->stages[i].end_s,
                        k->stages[i].bytes);
  if (k->bound_by[0]) r->res.bound_by = g_strdup(k->bound_by);
  r->stats = k->stats;
  r->stats.top = g_new0(RfSimLink, k->stats.ntop > 0 ? k->stats.ntop : 1);
  for (int i = 0; i < k->stats.ntop; i++)
    r->stats.top[i] = (RfSimLink){g_strdup(k->top[i].name), k->top[i].bytes,
                                  k->top[i].bandwidth_Bps, k->top[i].busy_s};
  r->stats.exec_fallback = k->exec_fallback[0] ? g_strdup(k->exec_fallback) : NULL;
}

typedef struct {
  const RfPlanArgs *pa;
  const RfProblem *pb;
  RfExecutor *ex;
  const RfCalibration *cal;
  Row *rows;
  int ns;
} RowJob;

/* A forked worker's row (advise_pool.h RfPoolFn). */
static void row_worker(int item, void *result, void *ud) {
  RowJob *j = ud;
  Row r = j->rows[item]; /* strategy, software, variant */
  simulate_row(j->pa, j->pb, j->ex, j->cal, j->ns > 1, &r);
  row_pack(&r, result);
  row_clear(&r);
}

/* The rows' plans and work estimates, built before any row starts, on up to nthreads threads
 * (each takes the next row not yet taken; a plan's build reads only its arguments, so the plans
 * are the ones one thread builds). The threads end before the workers are forked. Kimi K3 -s all:
 * the plans took 17-21 s one after another, with the second core idle. */
typedef struct {
  const RfPlanArgs *pa;
  const RfProblem *pb;
  const RfCalibration *cal;
  RfSoftware sw;
  RfSwVariant swv;
  Row *rows;
  int ns;
  gint next;
  uint64_t *work;
  double *built_s, *work_s;
} PlanJob;

static gpointer plans_thread(gpointer ud) {
  PlanJob *j = ud;
  for (int i; (i = g_atomic_int_add(&j->next, 1)) < j->ns;) {
    Row *r = &j->rows[i];
    const gint64 t0 = g_get_monotonic_time();
    r->pre = rf_plan_args_build(j->pa, j->pb, r->strategy, TRUE, &r->error);
    const gint64 t1 = g_get_monotonic_time();
    j->built_s[i] = (t1 - t0) / 1e6;
    if (!r->pre) continue;
    j->work[i] = rf_sim_work(j->cal, r->pre, j->sw, j->swv);
    j->work_s[i] = (g_get_monotonic_time() - t1) / 1e6;
  }
  return NULL;
}

/* Returns the threads it ran on (this one included). */
static int plans_build(PlanJob *j, int nthreads) {
  GThread *t[8];
  int nt = 0;
  for (; nt < MIN(nthreads, 8) - 1; nt++)
    if (!(t[nt] = g_thread_try_new("plan", plans_thread, j, NULL))) break; /* fewer threads */
  plans_thread(j);
  for (int k = 0; k < nt; k++)
    g_thread_join(t[k]);
  return nt + 1;
}

/* One row per strategy: plan, simulate; with jobs > 1 up to jobs rows at once, each in a forked
 * worker (the same figures: a row's work never depends on another's). A failed row keeps its
 * error; with one strategy it is the command's error (FALSE). */
static gboolean simulate_rows(const RfPlanArgs *pa, const RfProblem *pb, RfExecutor *ex,
                              RfSoftware sw, RfSwVariant swv, const RfCalibration *cal,
                              const RfStrategy *strategies, int ns, int jobs, Row *rows,
                              GError **error) {
  for (int i = 0; i < ns; i++) {
    rows[i].strategy = strategies[i];
    rows[i].software = sw;
    rows[i].variant = swv;
  }
  if (jobs > 1 && ns > 1) {
    /* The largest simulation first (longest processing time first: on 2 workers DeepSeek-V3's
     * rows of 27, 17, 14 and 2 s end at 31 s in that order, at 41 s in the strategies' order).
     * Each row's work is estimated from its plan, built here (plans_build, on as many threads as
     * rows run at once): the forked workers inherit it. A row whose plan fails keeps its error and
     * is not simulated. */
    g_autofree int *order = g_new(int, ns);
    g_autofree uint64_t *work = g_new0(uint64_t, ns);
    /* each plan's build and work estimate here, before any row starts (verbose) */
    g_autofree double *built_s = g_new0(double, ns), *work_s = g_new0(double, ns);
    PlanJob pj = {pa, pb, cal, sw, swv, rows, ns, 0, work, built_s, work_s};
    const gint64 t0 = g_get_monotonic_time();
    const int nthreads = plans_build(&pj, MIN(jobs, ns));
    const double plans_s = (g_get_monotonic_time() - t0) / 1e6;
    int n = 0;
    for (int i = 0; i < ns; i++) {
      if (!rows[i].pre) continue;
      int at = n++;
      for (; at > 0 && work[order[at - 1]] < work[i]; at--)
        order[at] = order[at - 1];
      order[at] = i;
    }
    if (g_getenv("REFIT_SIM_VERBOSE")) {
      for (int k = 0; k < n; k++)
        g_printerr("sim: row %d: %s, work %" G_GUINT64_FORMAT
                   " (segments or messages + transfers); before the rows start, its plan "
                   "%.2f s, the estimate %.2f s\n",
                   k + 1, rf_strategy_name(rows[order[k]].strategy), (guint64)work[order[k]],
                   built_s[order[k]], work_s[order[k]]);
      g_printerr("sim: the rows' plans and estimates: %.2f s on %d threads\n", plans_s, nthreads);
    }
    RowJob j = {pa, pb, ex, cal, rows, ns};
    RfPool *pool = rf_pool_new(MIN(jobs, MAX(n, 1)), sizeof(PackedRow), row_worker, &j);
    PackedRow *k = g_new0(PackedRow, 1);
    int next = 0, left = n;
    gboolean ok = TRUE;
    while (ok && left > 0) {
      while (next < n && !rf_pool_full(pool)) {
        const int i = order[next++];
        if (!(ok = rf_pool_spawn(pool, i, error))) break;
        g_clear_pointer(&rows[i].pre, rf_plan_free); /* the worker has its own copy */
      }
      if (!ok) break;
      GError *died = NULL;
      int item = rf_pool_wait(pool, k, &died);
      if (item < 0) break;
      left--;
      if (died)
        rows[item].error = died;
      else
        row_unpack(k, &rows[item]);
    }
    g_free(k);
    rf_pool_free(pool);
    for (int i = 0; i < ns; i++)
      g_clear_pointer(&rows[i].pre, rf_plan_free);
    return ok;
  }
  for (int i = 0; i < ns; i++) {
    Row *r = &rows[i];
    simulate_row(pa, pb, ex, cal, ns > 1, r);
    if (!r->ok && ns == 1) {
      g_propagate_error(error, r->error);
      r->error = NULL;
      return FALSE;
    }
  }
  return TRUE;
}

/* refit sim's own options (the shared ones are RfArgs and RfPlanArgs). */
typedef struct {
  char *calib_path, *timeline, *software, *variant;
  int group, max_flows, exec_slots, exec_max_ops, jobs;
  double exec_staging_mib;
  gboolean keep, overlap, sequential, exec_staged, exec_lane_comms, exec_one_comm;
  char *engine;
} SimOpts;

#define SIM_NENTRIES 18 /* with the terminator */

/* The option entries of o's fields, with its defaults set. */
static void sim_opts_entries(SimOpts *o, GOptionEntry out[SIM_NENTRIES]) {
  *o = (SimOpts){.exec_slots = 0, /* 0: chosen as refit run chooses them (model/plan/staging.h) */
                 .exec_max_ops = RF_SCHEDULE_DEFAULT_MAX_OPS,
                 .exec_staging_mib = 0};
  const GOptionEntry entries[SIM_NENTRIES] = {
      {"calibration", 'c', 0, G_OPTION_ARG_FILENAME, &o->calib_path,
       "Calibration file (default: sim/calibration/TOPOLOGY.cal)", "FILE"},
      {"timeline", 0, 0, G_OPTION_ARG_FILENAME, &o->timeline, "Write a timeline plot of the stages",
       "FILE.png"},
      {"group", 0, 0, G_OPTION_ARG_INT, &o->group,
       "GPUs per simulated host (default: 1, coarser only above --max-flows; refit's executor: "
       "1, or with --engine simgrid 1 up to 1024 ranks, above that the largest of at most 8 "
       "dividing the domain)",
       "N"},
      {"max-flows", 0, 0, G_OPTION_ARG_INT, &o->max_flows,
       "Coarsen GPUs into hosts until at most N distinct flows (default 15000)", "N"},
      {"hybrid-overlap", 0, 0, G_OPTION_ARG_NONE, &o->overlap,
       "Hybrid: run m2n and gather-broadcast concurrently", NULL},
      {"hybrid-sequential", 0, 0, G_OPTION_ARG_NONE, &o->sequential,
       "Hybrid: run m2n, then gather-broadcast", NULL},
      {"keep-platform", 0, 0, G_OPTION_ARG_NONE, &o->keep,
       "Keep the generated SimGrid XML (SimGrid runs only: the events engine writes none)", NULL},
      {"engine", 0, 0, G_OPTION_ARG_STRING, &o->engine,
       "What simulates refit's executor model: events (default: its own event simulation of "
       "every rank's program, max-min sharing solved locally; the same times as SimGrid's within "
       "1e-5 on the reported configurations on one communicator, 1.5e-3 on lane communicators, "
       "about the model's resolution there, docs/sim.md) or simgrid (an actor per rank on "
       "SimGrid, hosts of up to 8 GPUs above 1024 ranks); the other models run on SimGrid",
       "NAME"},
      {"jobs", 'j', 0, G_OPTION_ARG_INT, &o->jobs,
       "Strategies simulated at once, each in a process of its own, the largest first "
       "(default 0: one per CPU, at most one per strategy; 1: one after another in this "
       "process); the figures do not depend on it",
       "N"},
      {"software", 0, 0, G_OPTION_ARG_STRING, &o->software,
       "Model the published software instead of refit's executor: refit (default), nemo-rl "
       "(hybrid, gather-broadcast), nccl-m2n (m2n); docs/sim.md",
       "NAME"},
      {"software-variant", 0, 0, G_OPTION_ARG_STRING, &o->variant,
       "Code path of the software model: refit executor (default: the schedule refit run "
       "executes, group by group), flows (its strategies as flows sharing the links fairly at "
       "calibrated rates, no software cost: an ideal estimate, not a lower bound); nemo-rl "
       "m2n-pack (default), "
       "python-fallback, xfer-v0.1, golden; nccl-m2n pack (default), ring-v0.1, direct",
       "NAME"},
      {"staging-mib", 0, 0, G_OPTION_ARG_DOUBLE, &o->exec_staging_mib,
       "refit executor variant: refit run's staging bound per rank, direction and lane in MiB "
       "(default 0: chosen from the topology, the calibration's per-group costs and the memory "
       "left, as refit run chooses it; docs/real.md)",
       "MIB"},
      {"max-ops", 0, 0, G_OPTION_ARG_INT, &o->exec_max_ops,
       "refit executor variant: refit run's operations per rank and group (default 0: from the "
       "topology, as refit run)",
       "N"},
      {"slots", 0, 0, G_OPTION_ARG_INT, &o->exec_slots,
       "refit executor variant: refit run's staging lanes, groups in flight (default 0: chosen, "
       "as refit run)",
       "N"},
      {"staged", 0, 0, G_OPTION_ARG_NONE, &o->exec_staged,
       "refit executor variant: refit run --staged (the plan's stages one after another)", NULL},
      {"lane-comms", 0, 0, G_OPTION_ARG_NONE, &o->exec_lane_comms,
       "refit executor variant: refit run --lane-comms, its default (each staging lane's groups "
       "on a communicator and stream of its own, so a rank's groups on different lanes run at "
       "once; where not given, 8 lanes and an eighth of the staging bound, at least 4 MiB)",
       NULL},
      {"one-comm", 0, 0, G_OPTION_ARG_NONE, &o->exec_one_comm,
       "refit executor variant: refit run --one-comm (every lane on one communicator and stream, "
       "a rank's groups one after another; the default before 2026-12-04)",
       NULL},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  memcpy(out, entries, sizeof entries);
}

/* Every option of o checked before anything is built. */
static gboolean sim_opts_check(const SimOpts *o, GError **e) {
  if (o->jobs < 0 || o->jobs > 256) {
    g_set_error(e, RF_ERROR, RF_ERROR_INPUT, "--jobs must be in 0..256 (0: one per CPU)");
    return FALSE;
  }
  if (o->group < 0 || o->max_flows < 0) {
    g_set_error(e, RF_ERROR, RF_ERROR_INPUT, "--group and --max-flows must be >= 0");
    return FALSE;
  }
  RfSimEngine eng;
  if (o->engine && !rf_sim_engine_parse(o->engine, &eng)) {
    g_set_error(e, RF_ERROR, RF_ERROR_INPUT, "--engine must be events or simgrid, not '%s'",
                o->engine);
    return FALSE;
  }
  if (o->overlap && o->sequential) {
    g_set_error(e, RF_ERROR, RF_ERROR_INPUT,
                "--hybrid-overlap and --hybrid-sequential exclude each other");
    return FALSE;
  }
  if (o->exec_lane_comms && o->exec_one_comm) {
    g_set_error(e, RF_ERROR, RF_ERROR_INPUT, "--lane-comms and --one-comm exclude each other");
    return FALSE;
  }
  if (!(o->exec_staging_mib >= 0 && o->exec_staging_mib <= 1 << 20) ||
      (o->exec_staging_mib > 0 && o->exec_staging_mib * 1048576.0 < 64) ||
      (o->exec_max_ops < 2 && o->exec_max_ops != RF_SCHEDULE_AUTO_OPS) || o->exec_slots < 0 ||
      o->exec_slots > RF_SCHEDULE_MAX_SLOTS) { /* refuses nan too */
    g_set_error(e, RF_ERROR, RF_ERROR_INPUT,
                "--staging-mib must be in [64 B, %d MiB] (0: chosen), --max-ops >= 2 (0: from "
                "the topology) and --slots in 1..%d (0: chosen)",
                1 << 20, RF_SCHEDULE_MAX_SLOTS);
    return FALSE;
  }
  return !o->timeline || timeline_check(o->timeline, e);
}

/* The executor's options (refit run's schedule) apply to refit's executor only: with a model of
 * the published software or the flow model they changed nothing, silently. */
static gboolean executor_opts_check(const SimOpts *o, RfSoftware sw, RfSwVariant swv, GError **e) {
  if (rf_variant_is_executor(sw, swv)) return TRUE;
  const char *flag = o->engine && !strcmp(o->engine, "events") ? "--engine events"
                     : o->exec_lane_comms                      ? "--lane-comms"
                     : o->exec_one_comm                        ? "--one-comm"
                     : o->exec_staged                          ? "--staged"
                     : o->exec_staging_mib > 0                 ? "--staging-mib"
                     : o->exec_slots > 0                       ? "--slots"
                     : o->exec_max_ops != RF_SCHEDULE_AUTO_OPS ? "--max-ops"
                                                               : NULL;
  if (!flag) return TRUE;
  g_autofree char *key = rf_predict_model_key(sw, swv, -1);
  g_set_error(e, RF_ERROR, RF_ERROR_INPUT,
              "%s applies to refit's executor (--software refit, --software-variant executor: "
              "the default), not to the model %s",
              flag, key);
  return FALSE;
}

static void sim_opts_clear(SimOpts *o) {
  g_free(o->calib_path);
  g_free(o->timeline);
  g_free(o->software);
  g_free(o->variant);
  g_free(o->engine);
}

/* The table of the rows, their summary, recovery and the OK / FAILED footer. */
static void print_report(const RfArgs *a, const RfProblem *pb, const RfCalibration *cal,
                         const char *cal_source, const Row *rows, int ns) {
  print_header(stdout, a, pb, cal, cal_source);
  for (int i = 0; i < ns; i++)
    print_row(stdout, &rows[i]);
  if (ns > 1) print_summary(rows, ns);
  if (pb->nlost > 0) print_recovery(cal, rows, ns);
  int failed = 0;
  for (int i = 0; i < ns; i++)
    failed += !rows[i].ok;
  printf("# %s\n", failed ? "FAILED (see above)" : "OK");
}

int rf_cmd_sim(int argc, char **argv) {
  RfArgs a = {0};
  RfPlanArgs pa = {0};
  GOptionEntry plan_entries[RF_PLAN_ARGS_NENTRIES];
  rf_plan_args_entries(&pa, plan_entries);
  SimOpts opts, *o = &opts; /* set by sim_opts_entries */
  GOptionEntry entries[SIM_NENTRIES];
  sim_opts_entries(o, entries);
  g_set_prgname("refit sim");
  GOptionContext *ctx = g_option_context_new("- predict the refit time with SimGrid");
  g_option_context_set_description(ctx, RF_EXIT_STATUS_HELP);
  g_option_context_set_main_group(ctx, rf_args_group(&a));
  g_option_context_add_main_entries(ctx, plan_entries, NULL);
  g_option_context_add_main_entries(ctx, entries, NULL);
  GError *e = NULL;
  RfProblem *pb = NULL;
  RfCalibration cal = {0};
  Row *rows = NULL;
  int ns = 0, row_rc = 0;
  gboolean neutral = FALSE;
  char *cal_source = NULL;
  RfExecutor *ex = NULL;
  RfStrategy strategies[RF_STRATEGY_COUNT];
  RfSoftware sw = RF_SOFTWARE_REFIT;
  RfSwVariant swv = RF_VARIANT_DEFAULT;
  /* 1. options, all checked before anything is built */
  if (!rf_args_parse(ctx, &argc, &argv, FALSE, &e)) goto out;
  if (!a.topology) a.topology = g_strdup(RF_DEFAULT_SIM_TOPOLOGY); /* bandwidths needed */
  if (!sim_opts_check(o, &e)) goto out;
  if (!rf_software_parse(o->software, o->variant, &sw, &swv, &e)) goto out;
  if (!executor_opts_check(o, sw, swv, &e)) goto out;
  if (pa.double_bank && sw != RF_SOFTWARE_REFIT) { /* a memory count of refit run's, not theirs */
    g_set_error(&e, RF_ERROR, RF_ERROR_INPUT,
                "--double-bank counts refit run --double-bank's memory; --software %s has no "
                "second weight bank",
                rf_software_name(sw));
    goto out;
  }
  if (!rf_plan_args_check(&pa, &e)) goto out;
  ns = rf_args_strategies(&a, strategies, &e);
  if (ns < 0) goto out;
  /* 2. problem and calibration */
  pb = rf_args_problem(&a, &e);
  if (!pb) goto out;
  if (a.json && !a.quiet && pb->placement_note) g_printerr("# placement: %s\n", pb->placement_note);
  if (a.json) rf_args_print_node_map(stderr, &a, pb);
  if (!rf_calibration_select(&cal, o->calib_path, pb->topo, &cal_source, &neutral, &e)) goto out;
  cal.software = sw;
  cal.variant = swv;
  cal.exec_staging_bytes = o->exec_staging_mib * 1048576.0;
  cal.exec_max_ops = o->exec_max_ops;
  cal.exec_slots = o->exec_slots;
  cal.exec_staged = o->exec_staged;
  cal.exec_lane_comms = !o->exec_one_comm; /* refit run's default: a communicator per lane */
  cal.exec_banks = pa.double_bank ? 2 : 1;
  if (o->overlap) cal.hybrid_overlap = TRUE;
  if (o->sequential) cal.hybrid_overlap = FALSE;
  /* 3. the executor, one row per strategy */
  RfSimOptions so = {0};
  so.calib = cal;
  so.group = o->group;
  so.max_hosts_pairs = o->max_flows;
  so.keep_platform = o->keep;
  if (o->engine) rf_sim_engine_parse(o->engine, &so.engine); /* checked by sim_opts_check */
  so.progress = !a.quiet;
  so.exec_fallback = !(o->variant && *o->variant); /* the default model, not asked for by name */
  ex = rf_sim_executor_new(&so);
  if (!ex->prepare(ex, pb, &e)) goto out;
  if (neutral && !a.quiet) /* a note, once the topology is known to be usable */
    g_printerr("sim: no calibration file for topology '%s': neutral calibration (efficiency 1, "
               "no software latency)\n",
               pb->topo->name);
  rows = g_new0(Row, ns);
  const int jobs = o->jobs > 0 ? o->jobs : (int)g_get_num_processors();
  if (!simulate_rows(&pa, pb, ex, sw, swv, &cal, strategies, ns, jobs, rows, &e)) goto out;
  for (int i = 0; pb->nlost > 0 && i < ns; i++) {
    rows[i].lost = TRUE;
    rf_recovery_cost(pb, rows[i].strategy, &cal, &rows[i].rec);
  }
  /* 4. the report */
  if (a.json) {
    rf_json_print_strategies(json_head, cal_source, ns, json_row, rows);
  } else {
    print_report(&a, pb, &cal, cal_source, rows, ns);
  }
  if (o->timeline) {
    char *title = timeline_title(&a, pb, rows, ns);
    gboolean ok = write_timeline(o->timeline, title, rows, ns, &e);
    g_free(title);
    if (!ok) goto out;
  }
  /* several strategies: the first failed row's status (its message is in the report) */
  for (int i = 0; i < ns && !row_rc; i++)
    if (!rows[i].ok) row_rc = rf_error_exit_status(rows[i].error);
out:
  for (int i = 0; rows && i < ns; i++)
    row_clear(&rows[i]);
  g_free(rows);
  if (ex) ex->destroy(ex);
  rf_calibration_clear(&cal);
  g_free(cal_source);
  rf_problem_free(pb);
  rf_args_clear(&a);
  sim_opts_clear(o);
  rf_plan_args_clear(&pa);
  g_option_context_free(ctx);
  return e ? rf_cmd_exit("refit sim", e, TRUE) : row_rc;
}
