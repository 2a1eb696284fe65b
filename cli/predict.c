#include "predict.h"
#include "datafile.h"
#include "error.h"

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

char *rf_predict_model_key(RfSoftware sw, RfSwVariant v) {
  if (sw == RF_SOFTWARE_REFIT)
    return g_strdup(rf_variant_resolve(sw, v) == RF_VARIANT_EXECUTOR ? "executor" : "flows");
  return g_strdup_printf("%s/%s", rf_software_name(sw), rf_variant_name(sw, v));
}

/* The line of software/variant in validate-public's summary: rows, mean and max |error| (%).
 * FALSE when the file or the line is missing or malformed. */
static gboolean variant_error(const char *software, const char *variant, int *rows, double *mean,
                              double *max) {
  char *path = g_build_filename(rf_data_dir(), "experiments", "results",
                                "validate-public-variants.csv", NULL);
  char *text = NULL;
  gboolean found = FALSE;
  if (rf_file_read(path, RF_MAX_INPUT_BYTES, &text, NULL, NULL)) {
    char **lines = g_strsplit(text, "\n", -1);
    for (int i = 0; lines[i] && !found; i++) {
      char **f = g_strsplit(lines[i], ",", -1);
      if (g_strv_length(f) == 5 && !strcmp(f[0], software) && !strcmp(f[1], variant)) {
        char *e1 = NULL, *e2 = NULL, *e3 = NULL;
        *rows = (int)strtol(f[2], &e1, 10);
        *mean = g_ascii_strtod(f[3], &e2);
        *max = g_ascii_strtod(f[4], &e3);
        found = *e1 == '\0' && *e2 == '\0' && *e3 == '\0' && *rows > 0;
      }
      g_strfreev(f);
    }
    g_strfreev(lines);
  }
  g_free(text);
  g_free(path);
  return found;
}

char *rf_predict_model_line(RfSoftware sw, RfSwVariant v, double *oos_pct) {
  *oos_pct = -1;
  if (sw == RF_SOFTWARE_REFIT)
    return g_strdup(rf_variant_resolve(sw, v) == RF_VARIANT_EXECUTOR
                        ? "refit's executor: every rank's program of the schedule refit run "
                          "executes, per-operation costs from public figures (calibration "
                          "[executor]; not yet checked against a GPU run)"
                        : "flows: the plan's bound at calibrated rates, refit's plan as flows "
                          "with no software cost, not what refit run executes (the default, "
                          "--software-variant executor, is)");
  const char *name = rf_software_name(sw), *var = rf_variant_name(sw, v);
  int rows = 0;
  double mean = 0, max = 0;
  if (!variant_error(name, var, &rows, &mean, &max))
    return g_strdup_printf("a model of %s's code (variant %s); out of sample: no published run "
                           "of this variant measured (experiments/validate-public)",
                           name, var);
  *oos_pct = mean;
  return g_strdup_printf("a model of %s's code (variant %s); out of sample: mean |error| %.0f%%, "
                         "max %.0f%% on %d published run%s (experiments/validate-public)",
                         name, var, mean, max, rows, rows == 1 ? "" : "s");
}
