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

/* One row of the table: a refit time of one strategy as one software runs it, and the model
 * that gave it ("given" from --refit, "measured" from the workload file). */
typedef struct {
  RfSoftware sw;
  RfSwVariant var;
  RfStrategy st;
  double f;            /* refit seconds */
  char label[48];      /* "nemo-rl:gather-broadcast" for a published software, "m2n" for refit's */
  char model[48];      /* rf_predict_model_key, "given" or "measured" */
  uint64_t peak;       /* the fullest inference GPU in place (memory model), 0: not predicted */
  uint64_t weights;    /* its weights: the second bank async-overlap needs */
  char *mem_from;      /* where the memory figure comes from (rf_predict_memory_source) */
  const char *mem_key; /* the same as a JSON value (rf_memory_from_key) */
} Row;

static void row_clear(gpointer p) {
  g_free(((Row *)p)->mem_from);
}

/* One plan, one count: a published software's row whose memory is refit's for the plan, counted
 * by the plan's stages (above RF_MEMORY_MAX_SEGMENTS), takes the count of the schedule refit's
 * executor simulated for the same strategy's plan in this table, where it has one (the same
 * problem, plan and staging choice: the figure refit run's schedule gives). */
static void share_schedule_memory(GArray *rows) {
  for (guint i = 0; i < rows->len; i++) {
    Row *x = &g_array_index(rows, Row, i);
    if (x->sw == RF_SOFTWARE_REFIT || !x->mem_key || strcmp(x->mem_key, "plan")) continue;
    for (guint j = 0; j < rows->len; j++) {
      const Row *y = &g_array_index(rows, Row, j);
      if (y->sw != RF_SOFTWARE_REFIT || y->st != x->st || !y->mem_key ||
          strcmp(y->mem_key, "schedule"))
        continue;
      const RfMemory m = {.from = RF_MEMORY_FROM_SCHEDULE, .banks = 1};
      x->peak = y->peak;
      x->weights = y->weights;
      g_free(x->mem_from);
      x->mem_from = rf_predict_memory_source(x->sw, &m);
      x->mem_key = rf_memory_from_key(&m);
      break;
    }
  }
}

static void row_add(GArray *rows, RfSoftware sw, RfSwVariant var, RfStrategy st, double f,
                    const char *model) {
  Row r = {sw, var, st, f, "", "", 0, 0, NULL, NULL};
  if (sw == RF_SOFTWARE_REFIT)
    g_strlcpy(r.label, rf_strategy_name(st), sizeof r.label);
  else
    g_snprintf(r.label, sizeof r.label, "%s:%s", rf_software_name(sw), rf_strategy_name(st));
  g_strlcpy(r.model, model, sizeof r.model);
  g_array_append_val(rows, r);
}

/* --refit "gather-broadcast=6.4,hybrid=1.9": refit seconds per strategy, as rows "given". */
static gboolean parse_refit(const char *s, GArray *rows, GError **error) {
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
      guint j = 0; /* a strategy given twice: the last time counts */
      while (j < rows->len && g_array_index(rows, Row, j).st != st)
        j++;
      if (j < rows->len) g_array_remove_index(rows, j);
      row_add(rows, RF_SOFTWARE_REFIT, RF_VARIANT_DEFAULT, st, v, "given");
    }
  }
  g_strfreev(tok);
  return ok;
}

/* The strategies a software runs (the published code's models refuse the others). */
static gboolean software_runs(RfSoftware sw, RfStrategy st) {
  if (sw == RF_SOFTWARE_NEMO_RL)
    return st == RF_STRATEGY_GATHER_BROADCAST || st == RF_STRATEGY_HYBRID;
  if (sw == RF_SOFTWARE_NCCL_M2N) return st == RF_STRATEGY_M2N;
  return TRUE;
}

/* Rows of software sw (variant swv) for the strategies of want[], predicted by the simulator on
 * pb. A strategy the software does not run, or a plan its limits refuse, gets no row; a refusal
 * is said on stderr unless quiet. *cal_source gets the calibration (first call). */
static gboolean predict_rows(RfProblem *pb, const char *calib, RfSoftware sw, RfSwVariant swv,
                             gboolean fallback, const gboolean want[RF_STRATEGY_COUNT],
                             gboolean quiet, GArray *rows, char **cal_source, GError **error) {
  RfSimOptions so = {0};
  so.exec_fallback = fallback; /* refit's default model: the flow model where it cannot run */
  gboolean neutral = FALSE, ok = FALSE;
  char *src = NULL;
  if (!rf_calibration_select(&so.calib, calib, pb->topo, &src, &neutral, error)) goto out;
  if (!*cal_source) *cal_source = g_steal_pointer(&src);
  so.calib.software = sw;
  so.calib.variant = swv;
  RfExecutor *ex = rf_sim_executor_new(&so);
  ok = ex->prepare(ex, pb, error);
  for (int s = 0; ok && s < RF_STRATEGY_COUNT; s++) {
    if (!want[s] || !software_runs(sw, (RfStrategy)s)) continue;
    RfPlan *plan = rf_plan_build(pb, (RfStrategy)s, NULL, error);
    RfResult res = {0};
    RfMemoryRun mr; /* the memory model (model/plan/memory.h), as the software runs the plan */
    RfMemory mem;
    if (plan) rf_calibration_memory_run_plan(&so.calib, plan, 1, &mr, NULL);
    ok = plan && ex->run(ex, plan, &res, error);
    /* refit's executor counted the schedule it simulated, as refit sim takes it */
    if (ok && !rf_sim_executor_memory(ex, mr.banks, &mem))
      ok = rf_memory_of_run(plan, &mr, &mem, error);
    if (ok) {
      const RfSimStats *st = rf_sim_executor_stats(ex);
      const gboolean flows = st && st->exec_fallback; /* the flow model's figure instead */
      if (flows && !quiet)
        g_printerr("refit step: %s: refit's executor was not simulated (%s): the flow model's "
                   "estimate is shown\n",
                   rf_strategy_name((RfStrategy)s), st->exec_fallback);
      g_autofree char *key = rf_predict_model_key(sw, swv, s);
      row_add(rows, sw, flows ? RF_VARIANT_DEFAULT : swv, (RfStrategy)s, res.total_s,
              flows ? "flows" : key);
      Row *x = &g_array_index(rows, Row, rows->len - 1);
      x->peak = mem.peak_bytes;
      x->weights = mem.weights_bytes;
      x->mem_from = rf_predict_memory_source(sw, &mem);
      x->mem_key = rf_memory_from_key(&mem);
    }
    if (!ok && plan && sw != RF_SOFTWARE_REFIT && error && *error &&
        (*error)->code == RF_ERROR_INPUT) { /* over the published software's limits */
      if (!quiet)
        g_printerr("refit step: %s:%s not predicted: %s\n", rf_software_name(sw),
                   rf_strategy_name((RfStrategy)s), (*error)->message);
      g_clear_error(error);
      ok = TRUE;
    }
    rf_result_clear(&res);
    rf_plan_free(plan);
  }
  ex->destroy(ex);
out:
  g_free(src);
  rf_calibration_clear(&so.calib);
  return ok;
}

typedef struct {
  const Workload *w;
  const Row *rows;
  int nrows, base;
  const char *refit_source;
  int modes[MODE_COUNT], nmodes;
} Report;

/* The models behind the rows, one line each. */
static void print_models(const Report *r) {
  for (int i = 0; i < r->nrows; i++) {
    const Row *x = &r->rows[i];
    gboolean seen = FALSE;
    for (int j = 0; j < i && !seen; j++)
      seen = !strcmp(r->rows[j].model, x->model);
    if (seen || !strcmp(x->model, "given") || !strcmp(x->model, "measured")) continue;
    double oos;
    g_autofree char *line = rf_predict_model_line(x->sw, x->var, (int)x->st, &oos);
    printf("# model %s: %s\n", x->model, line);
  }
}

static void print_table(const Report *r) {
  const Workload *w = r->w;
  const Row *b = &r->rows[r->base];
  printf("# refit step  %s\n", w->name ? w->name : "(flags)");
  if (w->source) printf("# source: %s (%s)\n", w->source, w->date);
  printf("# rollout %.4g s, training %.4g s, other trainer work %.4g s; refit %s; baseline %s\n",
         w->rollout_s, w->train_s, w->other_s, r->refit_source, b->label);
  printf("# NeMo RL's default refit (non-colocated) is gather-broadcast; its nccl_reshard refit "
         "(refit_transport: nccl_reshard, experimental) is the hybrid strategy: reshard for the "
         "FFN and expert projections, gather + broadcast for the rest. Rows SOFTWARE:STRATEGY are "
         "a model of that software's code, the others refit's\n");
  print_models(r);
  for (int i = 0; i < r->nrows; i++)
    if (r->rows[i].peak)
      printf("# %s: fullest inference GPU %.4g GB in place, %.4g GB with the second weight bank "
             "async-overlap needs (%s; NCCL's fixed structures not counted)\n",
             r->rows[i].label, r->rows[i].peak / 1e9, (r->rows[i].peak + r->rows[i].weights) / 1e9,
             r->rows[i].mem_from);
  printf("# step: sync R+T+O+F; async max(R,T+O)+F; async-overlap max(R,T+O+F); colocated "
         "R+T+O+Fc (Fc = %.4g s, --colocated-refit-s)\n",
         w->colocated_s);
  printf("%-14s %-24s %10s %10s %8s %9s %9s  %s\n", "mode", "strategy", "refit", "step", "share",
         "speedup", "ceiling", "model");
  printf("%-14s %-24s %10s %10s %8s %9s %9s\n", "", "", "(s)", "(s)", "(%)", "(x)", "(x)");
  for (int mi = 0; mi < r->nmodes; mi++) {
    Mode m = (Mode)r->modes[mi];
    double sb = step_time(w, m, b->f), s0 = step_time(w, m, 0);
    if (m == MODE_COLOCATED) {
      printf("%-14s %-24s %10.4g %10.4g %8.1f %9s %9s  %s\n", MODE_NAMES[m], "(local reshard)",
             w->colocated_s, sb, sb > 0 ? 100 * w->colocated_s / sb : 0, "-", "-", "given");
      continue;
    }
    for (int i = 0; i < r->nrows; i++) {
      const Row *x = &r->rows[i];
      double st = step_time(w, m, x->f);
      char ceil[32];
      if (s0 > 0)
        g_snprintf(ceil, sizeof ceil, "%.3f", sb / s0);
      else
        g_strlcpy(ceil, "inf", sizeof ceil); /* a step that is all refit */
      printf("%-14s %-24s %10.4g %10.4g %8.1f %9.3f %9s  %s\n", MODE_NAMES[m], x->label, x->f, st,
             st > 0 ? 100 * x->f / st : 0, st > 0 ? sb / st : 1, ceil, x->model);
    }
  }
}

static void json_row(JsonBuilder *b, const Report *r, Mode m, const Row *x) {
  const Workload *w = r->w;
  double sb = step_time(w, m, r->rows[r->base].f), s0 = step_time(w, m, 0);
  double f = m == MODE_COLOCATED ? w->colocated_s : x->f;
  double st = m == MODE_COLOCATED ? sb : step_time(w, m, x->f);
  json_builder_begin_object(b);
  rf_json_str(b, "mode", MODE_NAMES[m]);
  rf_json_str(b, "strategy", m == MODE_COLOCATED ? "colocated" : rf_strategy_name(x->st));
  rf_json_str(b, "label", m == MODE_COLOCATED ? "colocated" : x->label);
  rf_json_str(b, "software", m == MODE_COLOCATED ? "-" : rf_software_name(x->sw));
  rf_json_str(b, "predicted_by", m == MODE_COLOCATED ? "given" : x->model);
  rf_json_num(b, "refit_s", f);
  rf_json_num(b, "step_s", st);
  rf_json_num(b, "refit_share", st > 0 ? f / st : 0);
  if (m != MODE_COLOCATED && x->peak) /* the memory model: in place, or two banks */
    rf_json_int(b, "infer_peak_bytes", (gint64)(x->peak + (m == MODE_OVERLAP ? x->weights : 0)));
  if (m != MODE_COLOCATED && x->peak) rf_json_str(b, "memory_from", x->mem_key);
  rf_json_num(b, "speedup", m == MODE_COLOCATED ? 1.0 : st > 0 ? sb / st : 1);
  json_builder_set_member_name(b, "amdahl_ceiling"); /* null: a step that is all refit */
  if (m == MODE_COLOCATED || s0 > 0)
    json_builder_add_double_value(b, m == MODE_COLOCATED ? 1.0 : sb / s0);
  else
    json_builder_add_null_value(b);
  json_builder_end_object(b);
}

static void print_json(const Report *r) {
  const Workload *w = r->w;
  JsonBuilder *b = json_builder_new();
  json_builder_begin_object(b);
  rf_json_str(b, "workload", w->name ? w->name : "");
  rf_json_str(b, "source", w->source ? w->source : "");
  rf_json_str(b, "refit_from", r->refit_source);
  rf_json_str(b, "baseline", r->rows[r->base].label);
  rf_json_str(b, "baseline_strategy", rf_strategy_name(r->rows[r->base].st));
  rf_json_str(b, "baseline_software", rf_software_name(r->rows[r->base].sw));
  rf_json_str(b, "nemo_rl_default_strategy", "gather-broadcast");
  rf_json_num(b, "rollout_s", w->rollout_s);
  rf_json_num(b, "train_s", w->train_s);
  rf_json_num(b, "other_s", w->other_s);
  rf_json_num(b, "colocated_refit_s", w->colocated_s);
  json_builder_set_member_name(b, "rows");
  json_builder_begin_array(b);
  for (int mi = 0; mi < r->nmodes; mi++) {
    Mode m = (Mode)r->modes[mi];
    for (int i = 0; i < (m == MODE_COLOCATED ? 1 : r->nrows); i++)
      json_row(b, r, m, &r->rows[i]);
  }
  json_builder_end_array(b);
  json_builder_end_object(b);
  rf_json_print(b);
}

/* --plot: end-to-end speedup against the baseline's refit share (sync), one curve per row
 * against the baseline, this workload's points marked, and those of every shipped workload file
 * (with these refit times); through scripts/step_plot.py. */
static gboolean write_plot(const char *png, const Report *r, GError **error) {
  char *csv = NULL;
  int fd = g_file_open_tmp("refit-step-XXXXXX.csv", &csv, error);
  if (fd < 0) return FALSE;
  FILE *f = fdopen(fd, "w");
  const Row *b = &r->rows[r->base];
  fprintf(f, "kind,label,x,y\n");
  for (int i = 0; i < r->nrows; i++)
    if (r->rows[i].f > 0 && i != r->base)
      fprintf(f, "ratio,%s vs %s,%.9g,0\n", r->rows[i].label, b->label, b->f / r->rows[i].f);
  double sb = step_time(r->w, MODE_SYNC, b->f);
  for (int i = 0; i < r->nrows; i++)
    if (i != r->base && sb > 0)
      fprintf(f, "point,\"%s %s\",%.9g,%.9g\n",
              r->w->name ? g_strdelimit(r->w->name, "\"", '\'') : "this step", r->rows[i].label,
              b->f / sb, sb / step_time(r->w, MODE_SYNC, r->rows[i].f));
  /* the shipped workloads (the .ini files of experiments/workloads) with these refit times: where
   * their published rollout and training times put them on the curves */
  char *dir = g_build_filename(rf_data_dir(), "experiments", "workloads", NULL);
  GDir *d = g_dir_open(dir, 0, NULL);
  const char *fn;
  while (d && (fn = g_dir_read_name(d))) {
    if (!g_str_has_suffix(fn, ".ini")) continue;
    char *path = g_build_filename(dir, fn, NULL);
    Workload sw = {.refit_s = -1};
    double swb = workload_load(path, &sw, NULL) ? step_time(&sw, MODE_SYNC, b->f) : 0;
    if (r->w->name && sw.name && !strcmp(r->w->name, sw.name)) swb = 0; /* this one: above */
    for (int i = 0; i < r->nrows && swb > 0; i++)
      if (i != r->base)
        fprintf(f, "shipped,\"%s %s\",%.9g,%.9g\n", g_strdelimit(sw.name, "\"", '\''),
                r->rows[i].label, b->f / swb, swb / step_time(&sw, MODE_SYNC, r->rows[i].f));
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

/* --mode: one of MODE_NAMES or all (NULL: all) into r->modes. */
static gboolean parse_modes(const char *mode, Report *r, GError **error) {
  r->nmodes = 0;
  for (int m = 0; m < MODE_COUNT; m++)
    if (!mode || !strcmp(mode, "all") || !strcmp(mode, MODE_NAMES[m])) r->modes[r->nmodes++] = m;
  if (!r->nmodes)
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "--mode wants sync, async, async-overlap, colocated or all, got '%s'", mode);
  return r->nmodes > 0;
}

/* --baseline STRATEGY or SOFTWARE:STRATEGY (NULL: gather-broadcast of any software) into *st and
 * *sw (-1: any). FALSE + one-line error for an unknown name. */
static gboolean parse_baseline(const char *spec, RfStrategy *st, int *sw, GError **error) {
  const char *colon = spec ? strchr(spec, ':') : NULL;
  *sw = -1;
  *st = RF_STRATEGY_GATHER_BROADCAST;
  if (!spec) return TRUE;
  if (colon) {
    g_autofree char *name = g_strndup(spec, (gsize)(colon - spec));
    RfSoftware s;
    RfSwVariant v;
    if (!rf_software_parse(name, NULL, &s, &v, error)) return FALSE;
    *sw = (int)s;
  }
  return rf_strategy_parse(colon ? colon + 1 : spec, st, error);
}

/* The row of the baseline: strategy st of software sw (any when < 0), the published software's
 * first. -1 + error when none has a time. */
static int find_baseline(const char *spec, RfStrategy st, int sw, const GArray *rows,
                         GError **error) {
  for (guint i = 0; i < rows->len; i++) {
    const Row *x = &g_array_index(rows, Row, i);
    if (x->st == st && (sw < 0 || (int)x->sw == sw)) return (int)i;
  }
  g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "no refit time for the baseline %s",
              spec ? spec : rf_strategy_name(st));
  return -1;
}

/* Whether rows hold strategy st (of software sw; any software when sw < 0). */
static gboolean has_row(const GArray *rows, RfStrategy st, int sw) {
  for (guint i = 0; i < rows->len; i++) {
    const Row *x = &g_array_index(rows, Row, i);
    if (x->st == st && (sw < 0 || (int)x->sw == sw)) return TRUE;
  }
  return FALSE;
}

/* Rows predicted from --model ... (or --spec): with --software, that software's rows for the
 * --strategy strategies; without, NeMo RL's (its gather-broadcast default and nccl_reshard
 * hybrid) and refit's, in one table. The baseline (strategy base, of software base_sw, or of
 * any when < 0) is always predicted: by the published software when it runs it, else by refit. */
static gboolean predict_all(const RfArgs *a, const char *calib, const char *software,
                            const char *variant, RfStrategy base, int base_sw, GArray *rows,
                            char **source, GError **error) {
  RfSoftware sw = RF_SOFTWARE_REFIT;
  RfSwVariant swv = RF_VARIANT_DEFAULT;
  if (!rf_software_parse(software, variant, &sw, &swv, error)) return FALSE;
  RfStrategy sel[RF_STRATEGY_COUNT];
  gboolean want[RF_STRATEGY_COUNT] = {FALSE}, pub[RF_STRATEGY_COUNT];
  int nsel = rf_args_strategies(a, sel, error);
  if (nsel < 0) return FALSE;
  for (int i = 0; i < nsel; i++)
    want[sel[i]] = TRUE;
  memcpy(pub, want, sizeof pub);
  if (software) want[base] = TRUE;
  if (!software && base_sw != RF_SOFTWARE_REFIT) pub[base] = TRUE;
  RfProblem *pb = rf_args_problem(a, error);
  if (!pb) return FALSE;
  rf_args_print_node_map(a->json ? stderr : stdout, a, pb);
  char *cal = NULL;
  gboolean ok = TRUE;
  if (!software) /* the published software first: NeMo RL's default variant */
    ok = predict_rows(pb, calib, RF_SOFTWARE_NEMO_RL, RF_VARIANT_DEFAULT, FALSE, pub, a->quiet,
                      rows, &cal, error);
  const gboolean fallback = !(variant && *variant); /* refit's default model, not asked for */
  ok = ok && predict_rows(pb, calib, sw, swv, fallback, want, a->quiet, rows, &cal, error);
  if (ok && !software && !has_row(rows, base, base_sw) && base_sw != RF_SOFTWARE_NEMO_RL) {
    gboolean only[RF_STRATEGY_COUNT] = {FALSE}; /* the published software did not predict it */
    only[base] = TRUE;
    ok = predict_rows(pb, calib, sw, swv, fallback, only, a->quiet, rows, &cal, error);
  }
  if (ok) share_schedule_memory(rows);
  g_autofree char *which = software
                               ? g_strdup_printf("software %s, variant %s", rf_software_name(sw),
                                                 rf_variant_name(sw, swv))
                               : g_strdup("NeMo RL's model and refit's");
  if (ok) *source = g_strdup_printf("predicted by refit sim (%s; calibration %s)", which, cal);
  g_free(cal);
  rf_problem_free(pb);
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
       "Row the speedups are against: STRATEGY (the published software's row first) or "
       "SOFTWARE:STRATEGY (default gather-broadcast: NeMo RL's default refit when predicted)",
       "NAME"},
      {"colocated-refit-s", 0, 0, G_OPTION_ARG_DOUBLE, &colocated,
       "Refit time of the colocated comparison (default 0)", "S"},
      {"software", 0, 0, G_OPTION_ARG_STRING, &software,
       "Predict only this software (refit sim --software): refit, nemo-rl, nccl-m2n; strategies "
       "it does not run get no row (default: NeMo RL's model and refit's in one table)",
       "NAME"},
      {"software-variant", 0, 0, G_OPTION_ARG_STRING, &variant,
       "Code path of the software model (refit sim --software-variant; without --software: "
       "refit's)",
       "NAME"},
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
           "scheduling. Predicted from --model ...: NeMo RL's refit (a model of its code: its\n"
           "default gather-broadcast, the baseline, and its nccl_reshard hybrid) and refit's\n"
           "--strategy strategies in one table, each row naming its model. docs/advise.md.");
  g_option_context_set_description(ctx, RF_EXIT_STATUS_HELP);
  g_option_context_set_main_group(ctx, rf_args_group(&a));
  g_option_context_add_main_entries(ctx, entries, NULL);
  GError *e = NULL;
  GArray *rows = g_array_new(FALSE, TRUE, sizeof(Row));
  g_array_set_clear_func(rows, row_clear);
  char *refit_source = NULL;
  Report r = {0};
  if (!rf_args_parse(ctx, &argc, &argv, FALSE, &e)) goto out;
  if (!a.topology) a.topology = g_strdup(RF_DEFAULT_SIM_TOPOLOGY); /* bandwidths needed */
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
  if (!parse_modes(mode, &r, &e)) goto out;
  if (plot && !g_str_has_suffix(plot, ".png")) {
    g_set_error(&e, RF_ERROR, RF_ERROR_INPUT, "--plot wants a FILE.png, got '%s'", plot);
    goto out;
  }
  /* the baseline's strategy (SOFTWARE: checked once the rows are known) */
  RfStrategy base = RF_STRATEGY_GATHER_BROADCAST;
  int base_sw = -1;
  if (!parse_baseline(baseline, &base, &base_sw, &e)) goto out;
  if (refit) {
    if (a.model || a.spec) {
      g_set_error(&e, RF_ERROR, RF_ERROR_INPUT,
                  "--refit gives the refit times; --model/--spec would predict them: one or the "
                  "other");
      goto out;
    }
    if (!parse_refit(refit, rows, &e)) goto out;
    refit_source = g_strdup("given (--refit)");
  } else if (a.model || a.spec) {
    if (!predict_all(&a, calib, software, variant, base, base_sw, rows, &refit_source, &e))
      goto out;
  } else if (w.refit_s >= 0) {
    row_add(rows, RF_SOFTWARE_REFIT, RF_VARIANT_DEFAULT, base, w.refit_s, "measured");
    refit_source = g_strdup_printf("the workload's measured refit_s (%s)", w.source);
  } else {
    g_set_error(&e, RF_ERROR, RF_ERROR_INPUT,
                "no refit time: give --refit STRATEGY=S,... or --model/--train/--infer to predict "
                "it");
    goto out;
  }
  r.base = find_baseline(baseline, base, base_sw, rows, &e);
  if (r.base < 0) goto out;
  r.w = &w;
  r.rows = (const Row *)rows->data;
  r.nrows = (int)rows->len;
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
  g_array_free(rows, TRUE);
  rf_args_clear(&a);
  g_option_context_free(ctx);
  return rf_cmd_exit("refit step", e, TRUE);
}
