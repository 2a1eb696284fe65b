#include "predict.h"
#include "datafile.h"
#include "error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

gboolean rf_calibration_select(RfCalibration *c, const char *path, const RfTopology *t,
                               char **source, gboolean *neutral, GError **error) {
  gboolean found = TRUE;
  *neutral = FALSE;
  *source = NULL;
  rf_calibration_clear(c);
  rf_calibration_defaults(c);
  if (path) {
    if (!rf_calibration_load(c, path, error)) return FALSE;
    *source = g_strdup_printf("%s (--calibration)", c->path);
    return TRUE;
  }
  if (t->calibration_base) {
    if (!rf_calibration_load(c, t->calibration_base, error)) {
      g_prefix_error(error, "topology %s: [calibration] base: ", t->name);
      return FALSE;
    }
    int n = 0;
    for (int i = 0; t->calibration_keys && t->calibration_keys[i]; i++, n++)
      if (!rf_calibration_override(c, t->path, t->calibration_keys[i], t->calibration_values[i],
                                   error))
        return FALSE;
    *source = n ? g_strdup_printf("%s + %d override%s from topology %s", c->path, n,
                                  n == 1 ? "" : "s", t->name)
                : g_strdup_printf("%s (base of topology %s)", c->path, t->name);
    return TRUE;
  }
  if (!rf_calibration_for_topology(c, t, &found, error)) return FALSE;
  *neutral = !found;
  *source = found ? g_strdup(c->path)
                  : g_strdup_printf("neutral (no calibration file for topology %s)", t->name);
  return TRUE;
}

gboolean rf_memory_check(const RfMemory *m, const char *who, gboolean strict, gboolean quiet,
                         GError **error) {
  if (!rf_memory_exceeds(m)) return TRUE;
  char *line = rf_memory_format(m);
  if (strict) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "%s exceeds the GPU memory (--strict)", line);
    g_free(line);
    return FALSE;
  }
  if (!quiet) g_printerr("%s: warning: %s exceeds the GPU memory\n", who, line);
  g_free(line);
  return TRUE;
}

const char *rf_predict_path_name(RfSoftware sw, RfSwVariant v, int strategy) {
  return rf_variant_applies(sw, strategy) ? rf_variant_name(sw, v)
                                          : rf_strategy_name((RfStrategy)strategy);
}

char *rf_predict_model_key(RfSoftware sw, RfSwVariant v, int strategy) {
  if (sw == RF_SOFTWARE_REFIT)
    return g_strdup(rf_variant_resolve(sw, v) == RF_VARIANT_EXECUTOR ? "executor" : "flows");
  return g_strdup_printf("%s/%s", rf_software_name(sw), rf_predict_path_name(sw, v, strategy));
}

/* The lines of FILE under experiments/results in the data dir, or NULL when it cannot be read
 * (g_strfreev). */
static char **results_lines(const char *file) {
  g_autofree char *path = g_build_filename(rf_data_dir(), "experiments", "results", file, NULL);
  g_autofree char *text = NULL;
  if (!rf_file_read(path, RF_MAX_INPUT_BYTES, &text, NULL, NULL)) return NULL;
  return g_strsplit(text, "\n", -1);
}

/* The line of software/variant in an accuracy summary under experiments/results (FILE:
 * validate-public-variants.csv from experiments/validate-public, reproduce-models.csv from
 * experiments/main.sh): rows, mean and max |error| (%). FALSE when the file or the line is
 * missing or malformed. */
static gboolean variant_error(const char *file, const char *software, const char *variant,
                              int *rows, double *mean, double *max) {
  g_auto(GStrv) lines = results_lines(file);
  gboolean found = FALSE;
  for (int i = 0; lines && lines[i] && !found; i++) {
    g_auto(GStrv) f = g_strsplit(lines[i], ",", -1);
    if (g_strv_length(f) == 5 && !strcmp(f[0], software) && !strcmp(f[1], variant)) {
      char *e1 = NULL, *e2 = NULL, *e3 = NULL;
      *rows = (int)strtol(f[2], &e1, 10);
      *mean = g_ascii_strtod(f[3], &e2);
      *max = g_ascii_strtod(f[4], &e3);
      found = *e1 == '\0' && *e2 == '\0' && *e3 == '\0' && *rows > 0;
    }
  }
  return found;
}

/* Over the rows of CSV file (under experiments/results; its first line names the columns) whose
 * column kcol reads kval, and whose column gcol reads gval where gcol is not NULL: how many, and
 * the mean and largest |value of column col - offset| in percent. FALSE when the file, a column
 * or every such row is missing or malformed (a row with a field missing or not a number is). */
static gboolean results_abs_stats(const char *file, const char *col, double offset,
                                  const char *kcol, const char *kval, const char *gcol,
                                  const char *gval, int *rows, double *mean, double *max) {
  *rows = 0;
  *mean = *max = 0;
  g_auto(GStrv) lines = results_lines(file);
  if (!lines || !lines[0]) return FALSE;
  g_auto(GStrv) head = g_strsplit(lines[0], ",", -1);
  int ic = -1, ik = -1, ig = -1;
  const int nh = (int)g_strv_length(head);
  for (int i = 0; i < nh; i++) {
    if (!strcmp(head[i], col)) ic = i;
    if (!strcmp(head[i], kcol)) ik = i;
    if (gcol && !strcmp(head[i], gcol)) ig = i;
  }
  if (ic < 0 || ik < 0 || (gcol && ig < 0)) return FALSE;
  double sum = 0;
  for (int l = 1; lines[l]; l++) {
    g_auto(GStrv) f = g_strsplit(lines[l], ",", -1);
    if ((int)g_strv_length(f) != nh || strcmp(f[ik], kval) || (gcol && strcmp(f[ig], gval)))
      continue;
    char *end = NULL;
    const double x = g_ascii_strtod(f[ic], &end);
    if (!*f[ic] || *end || !isfinite(x)) return FALSE;
    const double e = 100 * fabs(x - offset);
    sum += e;
    *max = MAX(*max, e);
    (*rows)++;
  }
  if (!*rows) return FALSE;
  *mean = sum / *rows;
  return TRUE;
}

/* "; against WHAT: mean |error| .., max .. on N runs (SCRIPT)" from the ratio column of the rows
 * of results FILE whose column kcol reads kval (TRUE), or "; OTHERWISE" where none (FALSE). */
static gboolean append_ratio_error(GString *t, const char *file, const char *kcol, const char *kval,
                                   const char *what, const char *script, const char *otherwise) {
  int n;
  double mean, max;
  if (!results_abs_stats(file, "ratio", 1.0, kcol, kval, NULL, NULL, &n, &mean, &max)) {
    g_string_append_printf(t, "; %s", otherwise);
    return FALSE;
  }
  g_string_append_printf(t, "; against %s: mean |error| %.1f%%, max %.1f%% on %d run%s (%s)", what,
                         mean, max, n, n == 1 ? "" : "s", script);
  return TRUE;
}

/* The executor model against refit run itself on an emulated network (experiments/emulated.py:
 * measured / predicted per run) and on one GPU (experiments/gpu_one_rank.py), in words. Caller
 * frees. */
static char *executor_line(void) {
  GString *t = g_string_new("refit's executor: every rank's program of the schedule refit run "
                            "executes, per-operation costs from public figures and "
                            "measurements on one H200 (calibration [executor])");
  /* how finely it resolves a prediction: the spread under a change of 1e-9 in the NIC efficiency */
  int n;
  double mean, max;
  if (results_abs_stats("resolution.csv", "spread", 0.0, "strategy", "m2n", NULL, NULL, &n, &mean,
                        &max))
    g_string_append_printf(
        t,
        "; at scale a change of 1e-9 in the NIC efficiency moves a prediction by up to "
        "%.3f%% (mean %.3f%%) on %d configuration%s (experiments/resolution.py): "
        "finer digits carry no meaning there",
        max, mean, n, n == 1 ? "" : "s");
  else
    g_string_append(t, "; its resolution not measured (experiments/resolution.py)");
  append_ratio_error(t, "emulated.csv", "topology", "emulated-2x4",
                     "refit run itself on an emulated network (the host backend, each rank's "
                     "transfers paced at the topology's rates)",
                     "experiments/emulated.py",
                     "against refit run on an emulated network: not measured "
                     "(experiments/emulated.py)");
  if (append_ratio_error(t, "gpu-one-rank.csv", "excluded", "",
                         "refit run on one H200, one rank (self-sends, 2-256 groups)",
                         "experiments/gpu_one_rank.py", "not yet checked against a GPU run"))
    g_string_append(t, "; runs of several GPUs not yet made");
  return g_string_free(t, FALSE);
}

char *rf_predict_coarse_line(int group) {
  int n;
  double mean, max;
  char g[16];
  g_snprintf(g, sizeof g, "%d", group);
  if (!results_abs_stats("executor-scale.csv", "error", 0.0, "kind", "coarse-check", "group", g, &n,
                         &mean, &max))
    return g_strdup_printf("simulated on hosts of %d GPUs (one actor per host): its error "
                           "against the exact model not measured at this size "
                           "(experiments/executor_scale.py)",
                           group);
  return g_strdup_printf(
      "simulated on hosts of %d GPUs (one actor per host): within %.1f%% of "
      "the exact model (mean %.1f%%) on the %d run%s where both run "
      "(experiments/executor_scale.py; what the agreement is made of: docs/sim.md)",
      group, max, mean, n, n == 1 ? "" : "s");
}

char *rf_predict_model_line(RfSoftware sw, RfSwVariant v, int strategy, double *oos_pct) {
  *oos_pct = -1;
  if (sw == RF_SOFTWARE_REFIT)
    return rf_variant_resolve(sw, v) == RF_VARIANT_EXECUTOR
               ? executor_line()
               : g_strdup("flows: refit's plan as flows sharing the links max-min fair at "
                          "calibrated rates, no software cost: an ideal estimate, not what refit "
                          "run executes (the default, --software-variant executor, is) and not a "
                          "lower bound (a schedule can beat fair sharing; the network lower "
                          "bound is)");
  const char *name = rf_software_name(sw), *var = rf_predict_path_name(sw, v, strategy);
  GString *t = g_string_new(NULL);
  if (!rf_variant_applies(sw, strategy)) /* NeMo RL's gather-broadcast */
    g_string_printf(t,
                    "a model of %s's code (its gather + packed broadcast path; the variant, "
                    "the hybrid's bulk transport, does not apply)",
                    name);
  else
    g_string_printf(t, "a model of %s's code (variant %s)", name, var);
  int rows = 0, trows = 0;
  double mean = 0, max = 0, tmean = 0, tmax = 0;
  const gboolean pub = variant_error("validate-public-variants.csv", name, var, &rows, &mean, &max);
  const gboolean table = variant_error("reproduce-models.csv", name, var, &trows, &tmean, &tmax);
  if (!pub && !table)
    g_string_append(t, "; out of sample: no published run of this variant measured "
                       "(experiments/validate-public, experiments/main.sh)");
  if (pub)
    g_string_append_printf(t,
                           "; out of sample: mean |error| %.0f%%, max %.0f%% on %d published "
                           "run%s (experiments/validate-public)",
                           mean, max, rows, rows == 1 ? "" : "s");
  if (table)
    g_string_append_printf(t,
                           "%s mean |error| %.0f%%, max %.0f%% on %d row%s of the reported "
                           "table (experiments/main.sh)",
                           pub ? ";" : "; out of sample:", tmean, tmax, trows,
                           trows == 1 ? "" : "s");
  *oos_pct = pub ? mean : table ? tmean : -1;
  return g_string_free(t, FALSE);
}

char *rf_predict_memory_source(RfSoftware sw, const RfMemory *m) {
  if (sw != RF_SOFTWARE_REFIT && m->from != RF_MEMORY_FROM_BUCKETS)
    return g_strdup_printf("%s: refit's memory for this plan; not modelled for %s",
                           rf_memory_from_name(m), rf_software_name(sw));
  return g_strdup(rf_memory_from_name(m));
}
