/* `refit calibrate`: fit a few calibration keys to measured refit times, and report the
 * leave-one-out error (each measurement predicted by keys fitted without it) beside the
 * in-sample error, so that a fit that only memorises the table shows as such. The fit itself is
 * sim/fit.c. */
#include "args.h"
#include "commands.h"
#include "datafile.h"
#include "error.h"
#include "predict.h"
#include "report.h"
#include "sim.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct {
  char *topology, *model, *train, *infer;
  int line; /* in the CSV */
  RfStrategy strategy;
  RfSoftware software; /* columns software, variant (optional; default refit) */
  RfSwVariant variant;
  gboolean exec_fallback; /* no variant column: refit's default model, flows where it cannot run */
  double measured_s;
  RfProblem *pb; /* borrowed from the problem cache */
  RfPlan *plan;  /* owned */
  RfCalibration base;
} Meas;

static void meas_clear(Meas *m) {
  g_free(m->topology);
  g_free(m->model);
  g_free(m->train);
  g_free(m->infer);
  rf_plan_free(m->plan);
  rf_calibration_clear(&m->base);
}

/* A measured time: a plain decimal number of seconds, finite and > 0 (no nan, inf, hex, or
 * trailing text). */
static gboolean parse_seconds(const char *v, double *out) {
  if (!*v || strspn(v, "0123456789.eE+-") != strlen(v)) return FALSE;
  char *end = NULL;
  double x = g_ascii_strtod(v, &end);
  if (*end || !isfinite(x) || x <= 0) return FALSE;
  *out = x;
  return TRUE;
}

/* One strategy per row: "all" is not one. */
static gboolean parse_strategy(const char *s, RfStrategy *out) {
  return s && strcmp(s, "all") != 0 && rf_strategy_parse(s, out, NULL);
}

/* The measurements of one CSV data line (h: header name -> field); FALSE + error naming the
 * line. */
static gboolean read_row(const char *path, int ln, GHashTable *h, GArray *rows, GError **error) {
  const char *topo = g_hash_table_lookup(h, "platform");
  if (!topo) topo = g_hash_table_lookup(h, "topology");
  const char *model = g_hash_table_lookup(h, "model");
  const char *train = g_hash_table_lookup(h, "train_layout");
  if (!train) train = g_hash_table_lookup(h, "train");
  const char *infer = g_hash_table_lookup(h, "infer_layout");
  if (!infer) infer = g_hash_table_lookup(h, "infer");
  if (!topo || !model || !train || !infer) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "%s:%d: need columns platform|topology, model, train[_layout], infer[_layout]",
                path, ln);
    return FALSE;
  }
  /* reported-table format: baseline_s (gather-broadcast) and reshard_s (hybrid);
   * generic format: strategy, measured_s */
  const char *cols[3][2] = {
      {"baseline_s", "gather-broadcast"}, {"reshard_s", "hybrid"}, {"measured_s", NULL}};
  for (int c = 0; c < 3; c++) {
    const char *v = g_hash_table_lookup(h, cols[c][0]);
    if (!v || !*v) continue;
    Meas m = {0};
    m.line = ln;
    if (!parse_seconds(v, &m.measured_s)) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                  "%s:%d: bad %s '%s' (want seconds, a finite decimal number > 0)", path, ln,
                  cols[c][0], v);
      return FALSE;
    }
    const char *sn = cols[c][1] ? cols[c][1] : g_hash_table_lookup(h, "strategy");
    if (!sn) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                  "%s:%d: measured_s needs a strategy column (gather-broadcast, p2p, m2n, hybrid)",
                  path, ln);
      return FALSE;
    }
    if (!parse_strategy(sn, &m.strategy)) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                  "%s:%d: unknown strategy '%s' (one per row: gather-broadcast, p2p, m2n, hybrid)",
                  path, ln, sn);
      return FALSE;
    }
    const char *swn = g_hash_table_lookup(h, "software");
    const char *var = g_hash_table_lookup(h, "variant");
    GError *se = NULL;
    m.exec_fallback = !(var && *var); /* the default model, not named: may fall back to flows */
    if (!rf_software_parse(swn && *swn ? swn : "refit", var, &m.software, &m.variant, &se)) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "%s:%d: %s", path, ln, se->message);
      g_error_free(se);
      return FALSE;
    }
    m.topology = g_strdup(topo);
    m.model = g_strdup(model);
    m.train = g_strdup(train);
    m.infer = g_strdup(infer);
    g_array_append_val(rows, m);
  }
  return TRUE;
}

static gboolean read_measurements(const char *path, GArray *rows, GError **error) {
  char *text = NULL;
  GError *e = NULL;
  if (!rf_file_read(path, RF_MAX_INPUT_BYTES, &text, NULL, &e)) {
    g_set_error(error, RF_ERROR, e->code, "measurements: %s", e->message);
    g_error_free(e);
    return FALSE;
  }
  char **lines = g_strsplit(text, "\n", -1);
  g_free(text);
  char **hdr = NULL;
  gboolean ok = TRUE;
  int ln = 0;
  for (char **l = lines; *l && ok; l++) {
    ln++;
    char *s = g_strstrip(*l);
    if (!*s || *s == '#') continue;
    char **f = g_strsplit(s, ",", -1);
    if (!hdr) {
      hdr = f;
      continue;
    }
    int nf = (int)g_strv_length(f);
    GHashTable *h = g_hash_table_new(g_str_hash, g_str_equal);
    for (int i = 0; hdr[i] && i < nf; i++)
      g_hash_table_insert(h, hdr[i], g_strstrip(f[i]));
    ok = read_row(path, ln, h, rows, error);
    g_hash_table_destroy(h);
    g_strfreev(f);
  }
  g_strfreev(hdr);
  g_strfreev(lines);
  if (ok && rows->len < 2) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "%s: need at least two measurements (leave-one-out)", path);
    ok = FALSE;
  }
  return ok;
}

/* --param NAME...: fittable keys of the calibration table, each once (default refit.fixed_s). */
static int select_keys(char **names, const RfCalibrationKey **sel, int max, GError **error) {
  const char *deflt[] = {"refit.fixed_s", NULL};
  const char *const *want = names ? (const char *const *)names : deflt;
  int n = 0;
  for (int i = 0; want[i]; i++) {
    const RfCalibrationKey *k = rf_calibration_key(want[i]);
    if (!k || k->fit_hi <= k->fit_lo) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "unknown --param '%s' (refit calibrate --help)",
                  want[i]);
      return -1;
    }
    for (int j = 0; j < n; j++)
      if (sel[j] == k) {
        g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "repeated --param '%s'", want[i]);
        return -1;
      }
    if (n == max) return -1; /* unreachable: each key at most once */
    sel[n++] = k;
  }
  return n;
}

/* Each row's problem (shared by rows with the same cluster, model and layouts), plan and base
 * calibration. */
static gboolean build_rows(const char *path, Meas *m, int n, const char *calib_path,
                           GHashTable *problems, GError **error) {
  for (int i = 0; i < n; i++) {
    char *key = g_strdup_printf("%s|%s|%s|%s", m[i].topology, m[i].model, m[i].train, m[i].infer);
    RfProblem *pb = g_hash_table_lookup(problems, key);
    if (!pb) {
      RfArgs a = {0};
      a.model = m[i].model, a.train = m[i].train, a.infer = m[i].infer, a.topology = m[i].topology;
      pb = rf_args_problem(&a, error);
      if (!pb) {
        g_prefix_error(error, "%s:%d: ", path, m[i].line);
        g_free(key);
        return FALSE;
      }
      g_hash_table_insert(problems, key, pb);
    } else {
      g_free(key);
    }
    m[i].pb = pb;
    m[i].plan = rf_plan_build(pb, m[i].strategy, NULL, error);
    if (!m[i].plan) {
      g_prefix_error(error, "%s:%d: ", path, m[i].line);
      return FALSE;
    }
    rf_calibration_defaults(&m[i].base);
    gboolean found = TRUE;
    if (calib_path ? !rf_calibration_load(&m[i].base, calib_path, error)
                   : !rf_calibration_for_topology(&m[i].base, pb->topo, &found, error))
      return FALSE;
    m[i].base.software = m[i].software;
    m[i].base.variant = m[i].variant;
  }
  return TRUE;
}

/* Fit on all rows, then once per row without it; print the table. */
static gboolean fit_and_report(const char *meas_path, Meas *m, int n,
                               const RfCalibrationKey *const *keys, int nkeys, int iters,
                               GError **error) {
  RfFitRow *fr = g_new0(RfFitRow, (gsize)MAX(n, 1));
  for (int i = 0; i < n; i++)
    fr[i] = (RfFitRow){m[i].pb, m[i].plan, &m[i].base, m[i].measured_s, m[i].exec_fallback};
  RfFit *f = rf_fit_new(fr, n, keys, nkeys, error);
  g_free(fr);
  if (!f) return FALSE;
  double *x = g_new(double, (gsize)MAX(nkeys, 1)), *xi = g_new(double, (gsize)MAX(nkeys, 1));
  gboolean *use = g_new(gboolean, (gsize)MAX(n, 1));
  rf_fit_run(f, NULL, iters, x);
  printf("# refit calibrate  measurements %s  rows %d  parameters:", meas_path, n);
  for (int k = 0; k < nkeys; k++)
    printf(" %s.%s", keys[k]->group, keys[k]->key);
  printf("\n# fitted on all rows:");
  for (int k = 0; k < nkeys; k++)
    printf(" %s.%s=%.4g", keys[k]->group, keys[k]->key, x[k]);
  printf("\n# %-12s %-17s %-17s %9s %9s %8s %9s %8s %9s %8s  %s\n", "topology", "model", "strategy",
         "measured", "default", "err(%)", "fitted", "err(%)", "loo", "err(%)", "software");
  printf("# %-12s %-17s %-17s %9s %9s %8s %9s %8s %9s %8s\n", "", "", "", "(s)", "(s)", "", "(s)",
         "", "(s)", "");
  double e0 = 0, e1 = 0, e2 = 0;
  for (int i = 0; i < n; i++) {
    double p0 = rf_fit_default(f, i);
    double p1 = rf_fit_predict(f, i, x);
    for (int j = 0; j < n; j++)
      use[j] = j != i;
    rf_fit_run(f, use, iters, xi);
    double p2 = rf_fit_predict(f, i, xi);
    double r0 = 100 * (p0 - m[i].measured_s) / m[i].measured_s;
    double r1 = 100 * (p1 - m[i].measured_s) / m[i].measured_s;
    double r2 = 100 * (p2 - m[i].measured_s) / m[i].measured_s;
    e0 += fabs(r0), e1 += fabs(r1), e2 += fabs(r2);
    /* the model of the row: refit's executor, or the flow model where it could not run */
    const gboolean flows = rf_fit_fallback(f, i) != NULL;
    g_autofree char *key = rf_predict_model_key(
        m[i].software, flows ? RF_VARIANT_DEFAULT : m[i].variant, (int)m[i].strategy);
    g_autofree char *why =
        flows ? g_strdup_printf(" (executor not simulated: %s)", rf_fit_fallback(f, i))
              : g_strdup("");
    printf("  %-12s %-17s %-17s %9.3f %9.3f %8.1f %9.3f %8.1f %9.3f %8.1f  %s%s%s\n", m[i].topology,
           m[i].model, rf_strategy_name(m[i].strategy), m[i].measured_s, p0, r0, p1, r1, p2, r2,
           m[i].software == RF_SOFTWARE_REFIT ? "refit/" : "", key, why);
  }
  printf("# mean |error|: default %.1f %%, fitted in-sample %.1f %%, leave-one-out %.1f %% "
         "(%ld simulations)\n",
         e0 / n, e1 / n, e2 / n, rf_fit_simulations(f));
  printf("# the leave-one-out error is the one to quote: each row predicted by a fit that did not "
         "see it\n");
  gboolean ok = rf_fit_error(f) == NULL;
  if (!ok) g_propagate_error(error, g_error_copy(rf_fit_error(f)));
  g_free(use);
  g_free(x);
  g_free(xi);
  rf_fit_free(f);
  return ok;
}

/* The --param help: every fittable key of the calibration table. */
static char *param_help(void) {
  int n = 0;
  const RfCalibrationKey *k = rf_calibration_keys(&n);
  GString *s = g_string_new("Parameter to fit (repeat):");
  for (int i = 0, first = 1; i < n; i++)
    if (k[i].fit_hi > k[i].fit_lo) {
      g_string_append_printf(s, "%s %s.%s", first ? "" : ",", k[i].group, k[i].key);
      first = 0;
    }
  g_string_append(s, " (default refit.fixed_s)");
  return g_string_free(s, FALSE);
}

int rf_cmd_calibrate(int argc, char **argv) {
  char *meas_path = NULL, *calib_path = NULL, **names = NULL;
  int iters = 12;
  char *phelp = param_help();
  GOptionEntry entries[] = {
      {"measurements", 'M', 0, G_OPTION_ARG_FILENAME, &meas_path,
       "CSV of measured refit times (the reported-table format, or topology,model,train,infer,"
       "strategy,measured_s; optional columns software, variant: the model of the software that "
       "produced the row, as refit sim --software / --software-variant)",
       "FILE"},
      {"param", 'p', 0, G_OPTION_ARG_STRING_ARRAY, &names, phelp, "NAME"},
      {"calibration", 'c', 0, G_OPTION_ARG_FILENAME, &calib_path,
       "Start from this calibration for every row (default: each topology's)", "FILE"},
      {"iterations", 0, 0, G_OPTION_ARG_INT, &iters, "Golden-section steps per parameter (12)",
       "N"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  g_set_prgname("refit calibrate");
  GOptionContext *ctx =
      g_option_context_new("- fit calibration parameters, report leave-one-out error");
  g_option_context_set_description(ctx, RF_EXIT_STATUS_HELP);
  g_option_context_add_main_entries(ctx, entries, NULL);
  GError *e = NULL;
  GArray *rows = g_array_new(FALSE, TRUE, sizeof(Meas));
  GHashTable *problems =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)rf_problem_free);
  int nkeys = 0;
  const RfCalibrationKey *keys[64];
  /* 1. options */
  if (!rf_args_parse(ctx, &argc, &argv, FALSE, &e)) goto out;
  if (!meas_path) {
    g_set_error(&e, RF_ERROR, RF_ERROR_INPUT, "need --measurements FILE");
    goto out;
  }
  if (iters < 1 || iters > 100) {
    g_set_error(&e, RF_ERROR, RF_ERROR_INPUT, "--iterations must be in 1..100");
    goto out;
  }
  nkeys = select_keys(names, keys, (int)G_N_ELEMENTS(keys), &e);
  if (nkeys < 0) goto out;
  /* 2. measurements, their problems and plans */
  if (!read_measurements(meas_path, rows, &e)) goto out;
  if (!build_rows(meas_path, (Meas *)rows->data, (int)rows->len, calib_path, problems, &e))
    goto out;
  /* 3. fit and report */
  fit_and_report(meas_path, (Meas *)rows->data, (int)rows->len, keys, nkeys, iters, &e);
out:
  for (guint i = 0; i < rows->len; i++)
    meas_clear(&g_array_index(rows, Meas, i));
  g_array_free(rows, TRUE);
  g_hash_table_destroy(problems);
  g_free(meas_path);
  g_free(calib_path);
  g_strfreev(names);
  g_free(phelp);
  g_option_context_free(ctx);
  return rf_cmd_exit("refit calibrate", e, TRUE);
}
