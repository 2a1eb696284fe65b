#include "report.h"
#include "datafile.h"
#include "error.h"

#include <stdio.h>
#include <string.h>

void rf_json_staging(JsonBuilder *b, const RfStaging *st, gboolean lane_comms) {
  rf_json_int(b, "staging_bound_bytes", (gint64)st->staging_bytes);
  rf_json_int(b, "lanes", st->slots);
  rf_json_bool(b, "lane_comms", lane_comms);
  rf_json_int(b, "max_ops", st->max_ops);
}

void rf_json_print(JsonBuilder *b) {
  JsonGenerator *g = json_generator_new();
  JsonNode *root = json_builder_get_root(b);
  json_generator_set_root(g, root);
  json_generator_set_pretty(g, TRUE);
  char *s = json_generator_to_data(g, NULL);
  printf("%s\n", s);
  g_free(s);
  json_node_unref(root);
  g_object_unref(g);
  g_object_unref(b);
}

void rf_json_print_strategies(void (*head)(JsonBuilder *b, const void *ud), const void *ud, int n,
                              RfJsonRowFn row, const void *rows) {
  JsonBuilder *b = json_builder_new();
  json_builder_begin_object(b);
  if (head) head(b, ud);
  if (n == 1) row(b, 0, rows); /* the single-strategy shape, kept for compatibility */
  json_builder_set_member_name(b, "strategies");
  json_builder_begin_array(b);
  for (int i = 0; i < n; i++) {
    json_builder_begin_object(b);
    row(b, i, rows);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
  json_builder_end_object(b);
  rf_json_print(b);
}

char *rf_strategy_path(const char *path, const char *strategy, gboolean several) {
  if (!several) return g_strdup(path);
  const char *dot = strrchr(path, '.');
  const char *slash = strrchr(path, '/');
  if (!dot || (slash && dot < slash)) return g_strdup_printf("%s.%s", path, strategy);
  return g_strdup_printf("%.*s.%s%s", (int)(dot - path), path, strategy, dot);
}

int rf_cmd_exit(const char *prefix, GError *error, gboolean print) {
  int rc = rf_error_exit_status(error);
  if (error && print) fprintf(stderr, "%s: %s\n", prefix, error->message);
  if (error) g_error_free(error);
  return rc;
}

gboolean rf_plot_script(const char *script, const char *csv, const char *png, const char *title,
                        const char *what, GError **error) {
  g_autofree char *path = g_strdup_printf("%s/%s", rf_data_dir(), script);
  const char *python = g_getenv("REFIT_PYTHON") ? g_getenv("REFIT_PYTHON") : "/usr/bin/python3";
  char *argv[] = {(char *)python, path, (char *)csv, (char *)png, (char *)title, NULL};
  int status = 0;
  g_autofree char *err = NULL;
  GError *se = NULL;
  if (!g_spawn_sync(NULL, argv, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL, &err, &status,
                    &se)) {
    g_set_error(error, RF_ERROR, RF_ERROR_IO, "%s: cannot run %s: %s", what, python, se->message);
    g_error_free(se);
    return FALSE;
  }
  if (!g_spawn_check_wait_status(status, NULL)) {
    char *last = err ? g_strstrip(err) : NULL;
    char *nl = last ? strrchr(last, '\n') : NULL;
    g_set_error(error, RF_ERROR, RF_ERROR_IO, "%s: %s failed: %s", what, path,
                last && *last ? (nl ? nl + 1 : last) : "no message");
    return FALSE;
  }
  return TRUE;
}
