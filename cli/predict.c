#include "predict.h"
#include "error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* One "group.key" = text override of the topology's [calibration] group, checked like the file. */
static gboolean apply_override(RfCalibration *c, const RfTopology *t, const char *name,
                               const char *text, GError **error) {
  const RfCalibrationKey *k = rf_calibration_key(name);
  if (!k) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "%s: [calibration] %s is not a calibration key (docs/sim.md lists them)", t->path,
                name);
    return FALSE;
  }
  char *end = NULL;
  double v = g_ascii_strtod(text, &end);
  if (end == text || *end || !isfinite(v) || v < k->lo || v > k->hi ||
      (k->kind != RF_CAL_REAL && v != floor(v))) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "%s: [calibration] %s must be %s in [%g, %g], got '%s'", t->path, name,
                k->kind == RF_CAL_REAL ? "a number" : "a whole number", k->lo, k->hi, text);
    return FALSE;
  }
  char *field = (char *)c + k->offset;
  if (k->kind == RF_CAL_REAL)
    *(double *)field = v;
  else if (k->kind == RF_CAL_INT)
    *(int *)field = (int)v;
  else
    *(gboolean *)field = v != 0;
  return TRUE;
}

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
      if (!apply_override(c, t, t->calibration_keys[i], t->calibration_values[i], error))
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
