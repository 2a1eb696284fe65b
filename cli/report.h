/* Output shared by the commands: the one JSON shape, per-strategy file names, error lines. */
#ifndef RF_REPORT_H
#define RF_REPORT_H

#include "staging.h"

#include <glib.h>
#include <json-glib/json-glib.h>

/* One member of the open object of b: its name, then its value (the one way cli/ writes JSON;
 * nested objects and arrays: json_builder_set_member_name, then begin). */
static inline void rf_json_str(JsonBuilder *b, const char *name, const char *v) {
  json_builder_set_member_name(b, name);
  json_builder_add_string_value(b, v);
}
static inline void rf_json_num(JsonBuilder *b, const char *name, double v) {
  json_builder_set_member_name(b, name);
  json_builder_add_double_value(b, v);
}
static inline void rf_json_int(JsonBuilder *b, const char *name, gint64 v) {
  json_builder_set_member_name(b, name);
  json_builder_add_int_value(b, v);
}
static inline void rf_json_bool(JsonBuilder *b, const char *name, gboolean v) {
  json_builder_set_member_name(b, name);
  json_builder_add_boolean_value(b, v);
}

/* refit run's staging choice, as refit run and refit sim's executor rows name it:
 * staging_bound_bytes, lanes, lane_comms (given: refit run's lanes are on communicators only
 * where it runs any) and max_ops. */
void rf_json_staging(JsonBuilder *b, const RfStaging *st, gboolean lane_comms);

/* Print the builder's document, pretty, with a newline, to stdout; unrefs the builder. */
void rf_json_print(JsonBuilder *b);

/* Adds the members of strategy row i (strategy, then its figures) to the open object of b. */
typedef void (*RfJsonRowFn)(JsonBuilder *b, int i, const void *rows);

/* The JSON of every command that reports strategies (plan, sim, run), on stdout:
 *   {HEAD..., "strategies": [{row 0}, {row 1}, ...]}
 * and with exactly one row, that row's members again at the top level (scripts read
 * d["predicted_s"] there). head(b, ud) adds the members before the rows; it may be NULL. */
void rf_json_print_strategies(void (*head)(JsonBuilder *b, const void *ud), const void *ud, int n,
                              RfJsonRowFn row, const void *rows);

/* path with ".STRATEGY" before its extension when several strategies write files, else path. */
char *rf_strategy_path(const char *path, const char *strategy, gboolean several);

/* Draw png from csv with a matplotlib script of the source tree (script: a path under the data
 * dir, e.g. "sim/timeline.py"; title may be NULL), run by $REFIT_PYTHON or /usr/bin/python3.
 * FALSE + one line (RF_ERROR_IO, prefixed with what): the script's last stderr line, never its
 * traceback. */
gboolean rf_plot_script(const char *script, const char *csv, const char *png, const char *title,
                        const char *what, GError **error);

/* Print "PREFIX: MESSAGE" on stderr (when error is set and print is TRUE), free error, and
 * return its exit status (rf_error_exit_status): 0 without an error. */
int rf_cmd_exit(const char *prefix, GError *error, gboolean print);

#endif
