/* `refit step`: what refit costs one RL step, under three scheduling modes (docs/advise.md).
 *
 * One step has a rollout (generation) time R, a training time T (with log-probs and the rest of
 * the trainer's work O), and a refit time F. The modes:
 *   sync           synchronous on-policy: rollout, train, refit in series: R + T + O + F
 *   async          one-step off-policy: rollout of step k+1 overlaps training of step k; the
 *                  refit stops both sides (generators wait for the weights, the trainer sends
 *                  them): max(R, T + O) + F
 *   async-overlap  as async, but the refit streams into a second weight bank while generation
 *                  goes on; only the trainer waits for it: max(R, T + O + F)
 *   colocated      rollout and training share the GPUs; the refit is a local reshard of time
 *                  --colocated-refit-s (default 0): R + T + O + Fc. For comparison only: it does
 *                  not depend on the disaggregated strategy.
 * Refit's share of a step is F / step; the end-to-end speedup of a strategy over the baseline is
 * step(F_baseline) / step(F_strategy); the Amdahl ceiling is step(F_baseline) / step(0). */
#include <glib.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "datafile.h"
#include "error.h"
#include "predict.h"
#include "report.h"
#include "sim.h"

typedef enum { MODE_SYNC, MODE_ASYNC, MODE_OVERLAP, MODE_COLOCATED, MODE_COUNT } Mode;
static const char *const MODE_NAMES[MODE_COUNT] = {"sync", "async", "async-overlap", "colocated"};

typedef struct {
  double rollout_s, train_s, other_s, colocated_s;
  char *name, *source, *date; /* from a workload file, else NULL */
  double refit_s;             /* a workload's measured refit time, -1 when none */
} Workload;

/* Step time of one mode for a refit of f seconds. */
static double step_time(const Workload *w, Mode m, double f) {
  double t = w->train_s + w->other_s;
  switch (m) {
  case MODE_SYNC:
    return w->rollout_s + t + f;
  case MODE_ASYNC:
    return MAX(w->rollout_s, t) + f;
  case MODE_OVERLAP:
    return MAX(w->rollout_s, t + f);
  default:
    return w->rollout_s + t + w->colocated_s;
  }
}

/* A workload file: [workload] source, date, rollout_s, train_s, optional other_s, refit_s, name.
 * FALSE + one-line error naming the file and key. */
static gboolean workload_load(const char *path, Workload *w, GError **error) {
  GKeyFile *kf = g_key_file_new();
  GError *e = NULL;
  gboolean ok = FALSE;
  char *text = NULL;
  gsize len = 0;
  if (!rf_file_read(path, RF_MAX_INPUT_BYTES, &text, &len, &e) ||
      !g_key_file_load_from_data(kf, text, len, G_KEY_FILE_NONE, &e)) {
    g_set_error(error, RF_ERROR, e->domain == RF_ERROR ? e->code : RF_ERROR_INPUT,
                "workload %s: %s", path, e->message);
    g_error_free(e);
    goto out;
  }
  const char *need[] = {"source", "date"};
  for (int i = 0; i < 2; i++) {
    char *v = g_key_file_get_string(kf, "workload", need[i], NULL);
    if (!v || !*g_strstrip(v)) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                  "workload %s: [workload] %s is missing (every value needs its public source "
                  "and date)",
                  path, need[i]);
      g_free(v);
      goto out;
    }
    if (i == 0)
      w->source = v;
    else
      w->date = v;
  }
  w->name = g_key_file_get_string(kf, "workload", "name", NULL);
  if (!w->name) w->name = g_path_get_basename(path);
  if (!rf_keyfile_number(kf, path, "workload", "rollout_s", 0, 1e7, &w->rollout_s, error) ||
      !rf_keyfile_number(kf, path, "workload", "train_s", 0, 1e7, &w->train_s, error))
    goto out;
  if (g_key_file_has_key(kf, "workload", "other_s", NULL) &&
      !rf_keyfile_number(kf, path, "workload", "other_s", 0, 1e7, &w->other_s, error))
    goto out;
  if (g_key_file_has_key(kf, "workload", "refit_s", NULL) &&
      !rf_keyfile_number(kf, path, "workload", "refit_s", 0, 1e7, &w->refit_s, error))
    goto out;
  ok = TRUE;
out:
  g_free(text);
  g_key_file_free(kf);
  return ok;
}

/* --refit "gather-broadcast=6.4,hybrid=1.9": refit seconds per strategy. */
static gboolean parse_refit(const char *s, double f[RF_STRATEGY_COUNT], GError **error) {
  char **tok = g_strsplit(s, ",", -1);
  gboolean ok = TRUE;
  for (int i = 0; ok && tok[i]; i++) {
    char *eq = strchr(tok[i], '=');
    RfStrategy st;
    char *end = NULL;
    double v = eq ? g_ascii_strtod(eq + 1, &end) : NAN;
    if (eq) *eq = '\0';
    if (!eq || !rf_strategy_parse(tok[i], &st, NULL) || end == eq + 1 || *end || !isfinite(v) ||
        v < 0) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                  "--refit wants STRATEGY=SECONDS,... (e.g. gather-broadcast=6.4,hybrid=1.9), got "
                  "'%s'",
                  s);
      ok = FALSE;
    } else {
      f[st] = v;
    }
  }
  g_strfreev(tok);
  return ok;
}

/* Refit times predicted by the simulator for every strategy of the problem the args describe. */
/* With a model of the published software (sw != refit), a strategy it does not run, or a plan
 * its limits refuse, has no time (f < 0). */
static gboolean predict_refit(const RfArgs *a, const char *calib, RfSoftware sw, RfSwVariant swv,
                              const gboolean want[RF_STRATEGY_COUNT], double f[RF_STRATEGY_COUNT],
                              uint64_t peak[2 * RF_STRATEGY_COUNT], char **cal_source,
                              GError **error) {
  RfProblem *pb = rf_args_problem(a, error);
  if (!pb) return FALSE;
  rf_args_print_node_map(a->json ? stderr : stdout, a, pb);
  RfSimOptions so = {0};
  gboolean neutral = FALSE, ok = FALSE;
  if (!rf_calibration_select(&so.calib, calib, pb->topo, cal_source, &neutral, error)) goto out;
  so.calib.software = sw;
  so.calib.variant = swv;
  RfExecutor *ex = rf_sim_executor_new(&so);
  ok = ex->prepare(ex, pb, error);
  for (int s = 0; ok && s < RF_STRATEGY_COUNT; s++) {
    if (!want[s]) continue;
    RfPlan *plan = rf_plan_build(pb, (RfStrategy)s, NULL, error);
    RfResult res = {0};
    RfMemoryRun mr; /* the memory model (model/plan/memory.h), as the software runs the plan */
    RfMemory mem;
    rf_calibration_memory_run(&so.calib, 1, &mr);
    ok = plan && rf_memory_of_run(plan, &mr, &mem, error) && ex->run(ex, plan, &res, error);
    if (ok) f[s] = res.total_s;
    if (ok) peak[s] = mem.peak_bytes;
    if (ok)
      peak[RF_STRATEGY_COUNT + s] = mem.weights_bytes; /* the second bank async-overlap needs */
    if (!ok && plan && sw != RF_SOFTWARE_REFIT && error && *error &&
        (*error)->code == RF_ERROR_INPUT) { /* not this software's strategy, or over its limits */
      g_clear_error(error);
      f[s] = -1;
      ok = TRUE;
    }
    rf_result_clear(&res);
    rf_plan_free(plan);
  }
  ex->destroy(ex);
out:
  rf_calibration_clear(&so.calib);
  rf_problem_free(pb);
  return ok;
}

typedef struct {
  const Workload *w;
  const double *f;
  const uint64_t *peak; /* per strategy: the fullest inference GPU in place (0: not predicted),
                         * then per strategy its weights (async-overlap adds a second bank) */
  RfStrategy base;
  const char *refit_source;
  int modes[MODE_COUNT], nmodes;
} Report;

static void print_table(const Report *r) {
  const Workload *w = r->w;
  printf("# refit step  %s\n", w->name ? w->name : "(flags)");
  if (w->source) printf("# source: %s (%s)\n", w->source, w->date);
  printf("# rollout %.4g s, training %.4g s, other trainer work %.4g s; refit %s; baseline %s\n",
         w->rollout_s, w->train_s, w->other_s, r->refit_source, rf_strategy_name(r->base));
  printf("# NeMo RL's nccl_reshard refit is the hybrid strategy (reshard for the FFN and expert "
         "projections, gather + broadcast for the rest; refit step --software nemo-rl predicts "
         "its code); its older refit is gather-broadcast\n");
  printf("# step: sync R+T+O+F; async max(R,T+O)+F; async-overlap max(R,T+O+F); colocated "
         "R+T+O+Fc (Fc = %.4g s, --colocated-refit-s)\n",
         w->colocated_s);
  for (int s = 0; s < RF_STRATEGY_COUNT; s++)
    if (r->f[s] >= 0 && r->peak[s])
      printf("# %s: fullest inference GPU %.4g GB in place, %.4g GB with the second weight bank "
             "async-overlap needs (NCCL buffers not counted)\n",
             rf_strategy_name((RfStrategy)s), r->peak[s] / 1e9,
             (r->peak[s] + r->peak[RF_STRATEGY_COUNT + s]) / 1e9);
  printf("%-14s %-17s %10s %10s %8s %9s %9s\n", "mode", "strategy", "refit", "step", "share",
         "speedup", "ceiling");
  printf("%-14s %-17s %10s %10s %8s %9s %9s\n", "", "", "(s)", "(s)", "(%)", "(x)", "(x)");
  for (int mi = 0; mi < r->nmodes; mi++) {
    Mode m = (Mode)r->modes[mi];
    double sb = step_time(w, m, r->f[r->base]), s0 = step_time(w, m, 0);
    if (m == MODE_COLOCATED) {
      printf("%-14s %-17s %10.4g %10.4g %8.1f %9s %9s\n", MODE_NAMES[m], "(local reshard)",
             w->colocated_s, sb, sb > 0 ? 100 * w->colocated_s / sb : 0, "-", "-");
      continue;
    }
    for (int s = 0; s < RF_STRATEGY_COUNT; s++) {
      if (r->f[s] < 0) continue;
      double st = step_time(w, m, r->f[s]);
      char ceil[32];
      if (s0 > 0)
        g_snprintf(ceil, sizeof ceil, "%.3f", sb / s0);
      else
        g_strlcpy(ceil, "inf", sizeof ceil); /* a step that is all refit */
      printf("%-14s %-17s %10.4g %10.4g %8.1f %9.3f %9s\n", MODE_NAMES[m],
             rf_strategy_name((RfStrategy)s), r->f[s], st, st > 0 ? 100 * r->f[s] / st : 0,
             st > 0 ? sb / st : 1, ceil);
    }
  }
}

static void print_json(const Report *r) {
  const Workload *w = r->w;
  JsonBuilder *b = json_builder_new();
  json_builder_begin_object(b);
  rf_json_str(b, "workload", w->name ? w->name : "");
  rf_json_str(b, "source", w->source ? w->source : "");
  rf_json_str(b, "refit_from", r->refit_source);
  rf_json_str(b, "baseline", rf_strategy_name(r->base));
  rf_json_num(b, "rollout_s", w->rollout_s);
  rf_json_num(b, "train_s", w->train_s);
  rf_json_num(b, "other_s", w->other_s);
  rf_json_num(b, "colocated_refit_s", w->colocated_s);
  json_builder_set_member_name(b, "rows");
  json_builder_begin_array(b);
  for (int mi = 0; mi < r->nmodes; mi++) {
    Mode m = (Mode)r->modes[mi];
    double sb = step_time(w, m, r->f[r->base]), s0 = step_time(w, m, 0);
    for (int s = 0; s < RF_STRATEGY_COUNT; s++) {
      if (r->f[s] < 0 || (m == MODE_COLOCATED && s > 0)) continue;
      double f = m == MODE_COLOCATED ? w->colocated_s : r->f[s];
      double st = m == MODE_COLOCATED ? sb : step_time(w, m, r->f[s]);
      json_builder_begin_object(b);
      rf_json_str(b, "mode", MODE_NAMES[m]);
      rf_json_str(b, "strategy",
                  m == MODE_COLOCATED ? "colocated" : rf_strategy_name((RfStrategy)s));
      rf_json_num(b, "refit_s", f);
      rf_json_num(b, "step_s", st);
      rf_json_num(b, "refit_share", st > 0 ? f / st : 0);
      if (m != MODE_COLOCATED && r->peak[s]) /* the memory model: in place, or two banks */
        rf_json_int(
            b, "infer_peak_bytes",
            (gint64)(r->peak[s] + (m == MODE_OVERLAP ? r->peak[RF_STRATEGY_COUNT + s] : 0)));
      rf_json_num(b, "speedup", m == MODE_COLOCATED ? 1.0 : st > 0 ? sb / st : 1);
      json_builder_set_member_name(b, "amdahl_ceiling"); /* null: a step that is all refit */
      if (m == MODE_COLOCATED || s0 > 0)
        json_builder_add_double_value(b, m == MODE_COLOCATED ? 1.0 : sb / s0);
      else
        json_builder_add_null_value(b);
      json_builder_end_object(b);
    }
  }
  json_builder_end_array(b);
  json_builder_end_object(b);
  rf_json_print(b);
}

/* --plot: end-to-end speedup against the baseline's refit share (sync), one curve per strategy
 * against the baseline, this workload's points marked, and those of every shipped workload file
 * (with these refit times); through scripts/step_plot.py. */
static gboolean write_plot(const char *png, const Report *r, GError **error) {
  char *csv = NULL;
  int fd = g_file_open_tmp("refit-step-XXXXXX.csv", &csv, error);
  if (fd < 0) return FALSE;
  FILE *f = fdopen(fd, "w");
  fprintf(f, "kind,label,x,y\n");
  for (int s = 0; s < RF_STRATEGY_COUNT; s++)
    if (r->f[s] > 0 && s != (int)r->base)
      fprintf(f, "ratio,%s vs %s,%.9g,0\n", rf_strategy_name((RfStrategy)s),
              rf_strategy_name(r->base), r->f[r->base] / r->f[s]);
  double sb = step_time(r->w, MODE_SYNC, r->f[r->base]);
  for (int s = 0; s < RF_STRATEGY_COUNT; s++)
    if (r->f[s] >= 0 && s != (int)r->base && sb > 0)
      fprintf(f, "point,\"%s %s\",%.9g,%.9g\n",
              r->w->name ? g_strdelimit(r->w->name, "\"", '\'') : "this step",
              rf_strategy_name((RfStrategy)s), r->f[r->base] / sb,
              sb / step_time(r->w, MODE_SYNC, r->f[s]));
  /* the shipped workloads (the .ini files of experiments/workloads) with these refit times: where
   * their published rollout and training times put them on the curves */
  char *dir = g_build_filename(rf_data_dir(), "experiments", "workloads", NULL);
  GDir *d = g_dir_open(dir, 0, NULL);
  const char *fn;
  while (d && (fn = g_dir_read_name(d))) {
    if (!g_str_has_suffix(fn, ".ini")) continue;
    char *path = g_build_filename(dir, fn, NULL);
    Workload sw = {.refit_s = -1};
    double swb = workload_load(path, &sw, NULL) ? step_time(&sw, MODE_SYNC, r->f[r->base]) : 0;
    if (r->w->name && sw.name && !strcmp(r->w->name, sw.name)) swb = 0; /* this one: above */
    for (int s = 0; s < RF_STRATEGY_COUNT && swb > 0; s++)
      if (r->f[s] >= 0 && s != (int)r->base)
        fprintf(f, "shipped,\"%s %s\",%.9g,%.9g\n", g_strdelimit(sw.name, "\"", '\''),
                rf_strategy_name((RfStrategy)s), r->f[r->base] / swb,
                swb / step_time(&sw, MODE_SYNC, r->f[s]));
    g_free(sw.name), g_free(sw.source), g_free(sw.date);
    g_free(path);
  }
  if (d) g_dir_close(d);
  g_free(dir);
  fclose(f);
  gboolean ok = rf_plot_script("scripts/step_plot.py", csv, png, NULL, "--plot", error);
  g_unlink(csv);
  g_free(csv);
  return ok;
}

int rf_cmd_step(int argc, char **argv) {
  RfArgs a = {0};
  Workload w = {.rollout_s = -1, .train_s = -1, .refit_s = -1};
  char *workload = NULL, *refit = NULL, *mode = NULL, *baseline = NULL, *calib = NULL;
  char *software = NULL, *variant = NULL;
  char *plot = NULL;
  double rollout = -1, train = -1, other = 0, colocated = 0;
  GOptionEntry entries[] = {
      {"workload", 'w', 0, G_OPTION_ARG_FILENAME, &workload,
       "Workload file: rollout, training times and their source (docs/advise.md)", "FILE"},
      {"rollout-s", 0, 0, G_OPTION_ARG_DOUBLE, &rollout, "Rollout (generation) time per step", "S"},
      {"train-s", 0, 0, G_OPTION_ARG_DOUBLE, &train, "Training time per step", "S"},
      {"other-s", 0, 0, G_OPTION_ARG_DOUBLE, &other,
       "Other trainer work in series with training (log-probs, ...)", "S"},
      {"refit", 0, 0, G_OPTION_ARG_STRING, &refit,
       "Refit times given: STRATEGY=S,... (else predicted by the simulator from --model ...)",
       "LIST"},
      {"mode", 0, 0, G_OPTION_ARG_STRING, &mode,
       "sync, async, async-overlap, colocated or all (default all)", "MODE"},
      {"baseline", 0, 0, G_OPTION_ARG_STRING, &baseline,
       "Strategy the speedups are against (default gather-broadcast)", "NAME"},
      {"colocated-refit-s", 0, 0, G_OPTION_ARG_DOUBLE, &colocated,
       "Refit time of the colocated comparison (default 0)", "S"},
      {"software", 0, 0, G_OPTION_ARG_STRING, &software,
       "Predict what this software would do (refit sim --software): refit (default), nemo-rl, "
       "nccl-m2n; strategies it does not run get no time",
       "NAME"},
      {"software-variant", 0, 0, G_OPTION_ARG_STRING, &variant,
       "Code path of the software model (refit sim --software-variant)", "NAME"},
      {"calibration", 'c', 0, G_OPTION_ARG_FILENAME, &calib, "Calibration file for predictions",
       "FILE"},
      {"plot", 0, 0, G_OPTION_ARG_FILENAME, &plot, "Plot end-to-end speedup against refit share",
       "FILE.png"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  g_set_prgname("refit step");
  GOptionContext *ctx = g_option_context_new("- refit's share of one RL step");
  g_option_context_set_summary(
      ctx, "End-to-end step time, refit's share and speedup per strategy, and the Amdahl\n"
           "ceiling, under sync, async (one-step off-policy), async-overlap and colocated\n"
           "scheduling. Formulas: docs/advise.md.");
  g_option_context_set_description(ctx, RF_EXIT_STATUS_HELP);
  g_option_context_set_main_group(ctx, rf_args_group(&a));
  g_option_context_add_main_entries(ctx, entries, NULL);
  GError *e = NULL;
  double f[RF_STRATEGY_COUNT];
  uint64_t peak[2 * RF_STRATEGY_COUNT] = {0};
  char *refit_source = NULL;
  Report r = {0};
  for (int s = 0; s < RF_STRATEGY_COUNT; s++)
    f[s] = -1;
  if (!rf_args_parse(ctx, &argc, &argv, FALSE, &e)) goto out;
  if (workload && !workload_load(workload, &w, &e)) goto out;
  if (rollout >= 0) w.rollout_s = rollout;
  if (train >= 0) w.train_s = train;
  if (!isfinite(rollout) || !isfinite(train) || !isfinite(other) || !isfinite(colocated) ||
      other < 0 || colocated < 0 || (rollout < 0 && rollout != -1) || (train < 0 && train != -1)) {
    g_set_error(&e, RF_ERROR, RF_ERROR_INPUT,
                "--rollout-s, --train-s, --other-s and --colocated-refit-s must be >= 0");
    goto out;
  }
  if (w.rollout_s < 0 || w.train_s < 0) {
    g_set_error(&e, RF_ERROR, RF_ERROR_INPUT,
                "need --rollout-s and --train-s, or a --workload file that gives them");
    goto out;
  }
  if (!workload || other > 0) w.other_s = other;
  w.colocated_s = colocated;
  r.base = RF_STRATEGY_GATHER_BROADCAST;
  if (baseline && !rf_strategy_parse(baseline, &r.base, &e)) goto out;
  if (!mode || !strcmp(mode, "all")) {
    for (int m = 0; m < MODE_COUNT; m++)
      r.modes[r.nmodes++] = m;
  } else {
    for (int m = 0; m < MODE_COUNT; m++)
      if (!strcmp(mode, MODE_NAMES[m])) r.modes[r.nmodes++] = m;
    if (!r.nmodes) {
      g_set_error(&e, RF_ERROR, RF_ERROR_INPUT,
                  "--mode wants sync, async, async-overlap, colocated or all, got '%s'", mode);
      goto out;
    }
  }
  if (plot && !g_str_has_suffix(plot, ".png")) {
    g_set_error(&e, RF_ERROR, RF_ERROR_INPUT, "--plot wants a FILE.png, got '%s'", plot);
    goto out;
  }
  if (refit) {
    if (a.model || a.spec) {
      g_set_error(&e, RF_ERROR, RF_ERROR_INPUT,
                  "--refit gives the refit times; --model/--spec would predict them: one or the "
                  "other");
      goto out;
    }
    if (!parse_refit(refit, f, &e)) goto out;
    refit_source = g_strdup("given (--refit)");
  } else if (a.model || a.spec) {
    char *cal = NULL;
    RfSoftware sw = RF_SOFTWARE_REFIT;
    RfSwVariant swv = RF_VARIANT_DEFAULT;
    if (!rf_software_parse(software, variant, &sw, &swv, &e)) goto out;
    /* --strategy's strategies (default all), and the baseline the speedups are against */
    RfStrategy sel[RF_STRATEGY_COUNT];
    gboolean want[RF_STRATEGY_COUNT] = {FALSE};
    int nsel = rf_args_strategies(&a, sel, &e);
    if (nsel < 0) goto out;
    for (int i = 0; i < nsel; i++)
      want[sel[i]] = TRUE;
    want[r.base] = TRUE;
    if (!predict_refit(&a, calib, sw, swv, want, f, peak, &cal, &e)) {
      g_free(cal);
      goto out;
    }
    double oos;
    g_autofree char *model = rf_predict_model_line(sw, swv, &oos);
    refit_source = g_strdup_printf("predicted by refit sim (software %s, %s; calibration %s; "
                                   "model: %s)",
                                   rf_software_name(sw), rf_variant_name(sw, swv), cal, model);
    g_free(cal);
  } else if (w.refit_s >= 0) {
    f[r.base] = w.refit_s;
    refit_source = g_strdup_printf("the workload's measured refit_s (%s)", w.source);
  } else {
    g_set_error(&e, RF_ERROR, RF_ERROR_INPUT,
                "no refit time: give --refit STRATEGY=S,... or --model/--train/--infer to predict "
                "it");
    goto out;
  }
  if (f[r.base] < 0) {
    g_set_error(&e, RF_ERROR, RF_ERROR_INPUT, "no refit time for the baseline %s",
                rf_strategy_name(r.base));
    goto out;
  }
  r.w = &w;
  r.f = f;
  r.peak = peak;
  r.refit_source = refit_source;
  if (a.json)
    print_json(&r);
  else
    print_table(&r);
  if (plot && !write_plot(plot, &r, &e)) goto out;
out:
  g_free(w.name), g_free(w.source), g_free(w.date);
  g_free(workload), g_free(refit), g_free(mode), g_free(baseline), g_free(calib), g_free(plot);
  g_free(software), g_free(variant);
  g_free(refit_source);
  rf_args_clear(&a);
  g_option_context_free(ctx);
  return rf_cmd_exit("refit step", e, TRUE);
}
