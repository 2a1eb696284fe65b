/* Output helpers shared by the commands: JSON to stdout, per-strategy file names. */
#ifndef RF_REPORT_H
#define RF_REPORT_H

#include <glib.h>
#include <json-glib/json-glib.h>

/* Print the builder's document, pretty, with a newline, to stdout; unrefs the builder. */
void rf_json_print(JsonBuilder *b);

/* Rows as one object when there is one, else {"strategies": [...]}: row(b, i, ud) adds row i. */
void rf_json_rows(JsonBuilder *b, int n, void (*row)(JsonBuilder *b, int i, void *ud), void *ud);

/* path with ".STRATEGY" before its extension when several strategies write files, else path. */
char *rf_strategy_path(const char *path, const char *strategy, gboolean several);

#endif
