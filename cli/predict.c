#include "predict.h"
#include "error.h"

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
