/* `refit calibrate`: fit a few calibration parameters to measured refit times, and report the
 * leave-one-out error (each measurement predicted by parameters fitted without it) beside the
 * in-sample error, so that a fit that only memorises the table shows as such. */
#include "args.h"
#include "error.h"
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct {
  char *topology, *model, *train, *infer;
  RfStrategy strategy;
  double measured_s;
  RfProblem *pb; /* borrowed from the problem cache */
  RfPlan *plan;  /* owned */
  RfCalibration base;
  double m2n_tensors;
} Meas;

typedef struct {
  const char *name; /* group.key */
  double lo, hi;
  gboolean additive; /* adds coef x value to the prediction: no re-simulation needed */
} Param;

static const Param PARAMS[] = {
    {"refit.fixed_s", 0.0, 20.0, TRUE},
    {"m2n.tensor_overhead_s", 0.0, 2e-4, TRUE},
    {"export.tensor_overhead_s", 0.0, 1e-3, FALSE},
    {"efficiency.nic", 0.3, 1.0, FALSE},
    {"efficiency.allgather_net", 0.2, 1.0, FALSE},
    {"efficiency.broadcast_net", 0.2, 1.0, FALSE},
    {"latency.message_s", 0.0, 1e-3, FALSE},
};

static double *param_field(RfCalibration *c, const char *name) {
  if (!strcmp(name, "refit.fixed_s")) return &c->fixed_s;
  if (!strcmp(name, "m2n.tensor_overhead_s")) return &c->m2n_tensor_overhead_s;
  if (!strcmp(name, "export.tensor_overhead_s")) return &c->export_tensor_overhead_s;
  if (!strcmp(name, "efficiency.nic")) return &c->nic_efficiency;
  if (!strcmp(name, "efficiency.allgather_net")) return &c->allgather_efficiency;
  if (!strcmp(name, "efficiency.broadcast_net")) return &c->broadcast_efficiency;
  if (!strcmp(name, "latency.message_s")) return &c->message_latency_s;
  return NULL;
}

typedef struct {
  Meas *m;
  int n;
  const Param **p;
  int np;
  gboolean any_sim;  /* some parameter needs re-simulation */
  double *base_pred; /* predictions with the base calibration (fixed_s excluded) */
  long sims;
} Fit;

/* Seconds an additive parameter adds to row i per unit of its value. */
static double coef(const Fit *F, int i, const Param *p) {
  if (!strcmp(p->name, "m2n.tensor_overhead_s")) return F->m[i].m2n_tensors;
  return 1.0; /* refit.fixed_s */
}

/* Prediction of row i with the fitted parameters at x: simulated with the additive ones at 0
 * (reusing base_pred when nothing else is fitted), then the additive terms. */
static double predict(Fit *F, int i, const double *x) {
  Meas *m = &F->m[i];
  RfCalibration c = m->base;
  double add = 0;
  for (int k = 0; k < F->np; k++) {
    *param_field(&c, F->p[k]->name) = F->p[k]->additive ? 0.0 : x[k];
    if (F->p[k]->additive) add += coef(F, i, F->p[k]) * x[k];
  }
  if (!F->any_sim && F->base_pred) return F->base_pred[i] + add;
  RfSimOptions o = {0};
  o.calib = c;
  RfExecutor *ex = rf_sim_executor_new(&o);
  RfResult r;
  GError *e = NULL;
  double t = -1;
  if (ex->prepare(ex, m->pb, &e) && ex->run(ex, m->plan, &r, &e)) {
    t = r.total_s;
    rf_result_clear(&r);
  }
  if (e) {
    g_printerr("refit calibrate: %s\n", e->message);
    g_error_free(e);
  }
  ex->destroy(ex);
  F->sims++;
  return t < 0 ? t : t + add;
}

/* Mean squared log error over the rows with use[i]. */
static double objective(Fit *F, const gboolean *use, const double *x) {
  double s = 0;
  int k = 0;
  for (int i = 0; i < F->n; i++) {
    if (!use[i]) continue;
    double p = predict(F, i, x);
    if (p <= 0) return INFINITY;
    double d = log(p / F->m[i].measured_s);
    s += d * d;
    k++;
  }
  return k ? s / k : 0;
}

/* Coordinate descent, golden-section search on each parameter inside its bounds. */
static void fit(Fit *F, const gboolean *use, double *x, int iters) {
  const double g = (sqrt(5.0) - 1) / 2;
  for (int pass = 0; pass < (F->np > 1 ? 2 : 1); pass++)
    for (int k = 0; k < F->np; k++) {
      double a = F->p[k]->lo, b = F->p[k]->hi;
      double c = b - g * (b - a), d = a + g * (b - a);
      x[k] = c;
      double fc = objective(F, use, x);
      x[k] = d;
      double fd = objective(F, use, x);
      for (int it = 0; it < iters; it++) {
        if (fc < fd) {
          b = d, d = c, fd = fc;
          c = b - g * (b - a);
          x[k] = c;
          fc = objective(F, use, x);
        } else {
          a = c, c = d, fc = fd;
          d = a + g * (b - a);
          x[k] = d;
          fd = objective(F, use, x);
        }
      }
      x[k] = fc < fd ? c : d;
    }
}

static gboolean read_measurements(const char *path, GArray *rows, GError **error) {
  char *text = NULL;
  if (!g_file_get_contents(path, &text, NULL, error)) return FALSE;
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
    int nf = g_strv_length(f);
    GHashTable *h = g_hash_table_new(g_str_hash, g_str_equal);
    for (int i = 0; hdr[i] && i < nf; i++)
      g_hash_table_insert(h, hdr[i], f[i]);
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
      ok = FALSE;
    } else {
      /* reported-table format: baseline_s (gather-broadcast) and reshard_s (hybrid);
       * generic format: strategy, measured_s */
      const char *cols[3][2] = {
          {"baseline_s", "gather-broadcast"}, {"reshard_s", "hybrid"}, {"measured_s", NULL}};
      for (int c = 0; c < 3 && ok; c++) {
        const char *v = g_hash_table_lookup(h, cols[c][0]);
        if (!v || !*v) continue;
        const char *sn = cols[c][1] ? cols[c][1] : g_hash_table_lookup(h, "strategy");
        Meas m = {0};
        char *end = NULL;
        m.measured_s = g_ascii_strtod(v, &end);
        if (!sn || !rf_strategy_parse(sn, &m.strategy, error) || end == v || m.measured_s <= 0) {
          if (error && !*error)
            g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "%s:%d: bad %s '%s'", path, ln, cols[c][0],
                        v);
          ok = FALSE;
          break;
        }
        m.topology = g_strdup(topo);
        m.model = g_strdup(model);
        m.train = g_strdup(train);
        m.infer = g_strdup(infer);
        g_array_append_val(rows, m);
      }
    }
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

int rf_calibrate_command(int argc, char **argv) {
  char *meas_path = NULL, *calib_path = NULL, **names = NULL;
  int iters = 12;
  GOptionEntry entries[] = {
      {"measurements", 'M', 0, G_OPTION_ARG_FILENAME, &meas_path,
       "CSV of measured refit times (the reported-table format, or topology,model,train,infer,"
       "strategy,measured_s)",
       "FILE"},
      {"param", 'p', 0, G_OPTION_ARG_STRING_ARRAY, &names,
       "Parameter to fit (repeat): refit.fixed_s, export.tensor_overhead_s, efficiency.nic, "
       "efficiency.allgather_net, efficiency.broadcast_net, latency.message_s (default "
       "refit.fixed_s)",
       "NAME"},
      {"calibration", 'c', 0, G_OPTION_ARG_FILENAME, &calib_path,
       "Start from this calibration for every row (default: each topology's)", "FILE"},
      {"iterations", 0, 0, G_OPTION_ARG_INT, &iters, "Golden-section steps per parameter (12)",
       "N"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  g_set_prgname("refit calibrate");
  GOptionContext *ctx =
      g_option_context_new("- fit calibration parameters, report leave-one-out error");
  g_option_context_add_main_entries(ctx, entries, NULL);
  GError *e = NULL;
  int rc = 1;
  GArray *rows = g_array_new(FALSE, TRUE, sizeof(Meas));
  GHashTable *problems =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)rf_problem_free);
  Fit F = {0};
  const Param *sel[G_N_ELEMENTS(PARAMS)];
  if (!g_option_context_parse(ctx, &argc, &argv, &e)) goto out;
  if (!meas_path) {
    g_set_error(&e, RF_ERROR, RF_ERROR_INPUT, "need --measurements FILE");
    goto out;
  }
  if (iters < 1 || iters > 100) {
    g_set_error(&e, RF_ERROR, RF_ERROR_INPUT, "--iterations must be in 1..100");
    goto out;
  }
  const char *deflt[] = {"refit.fixed_s", NULL};
  const char *const *want = names ? (const char *const *)names : deflt;
  for (int i = 0; want[i]; i++) {
    const Param *p = NULL;
    for (unsigned k = 0; k < G_N_ELEMENTS(PARAMS); k++)
      if (!strcmp(want[i], PARAMS[k].name)) p = &PARAMS[k];
    if (!p || F.np == (int)G_N_ELEMENTS(PARAMS)) {
      g_set_error(&e, RF_ERROR, RF_ERROR_INPUT, "unknown or repeated --param '%s'", want[i]);
      goto out;
    }
    for (int k = 0; k < F.np; k++)
      if (sel[k] == p) {
        g_set_error(&e, RF_ERROR, RF_ERROR_INPUT, "repeated --param '%s'", want[i]);
        goto out;
      }
    sel[F.np++] = p;
    if (!p->additive) F.any_sim = TRUE;
  }
  F.p = sel;
  if (!read_measurements(meas_path, rows, &e)) goto out;
  F.m = (Meas *)rows->data;
  F.n = (int)rows->len;
  for (int i = 0; i < F.n; i++) {
    Meas *m = &F.m[i];
    char *key = g_strdup_printf("%s|%s|%s|%s", m->topology, m->model, m->train, m->infer);
    RfProblem *pb = g_hash_table_lookup(problems, key);
    if (!pb) {
      RfArgs a = {0};
      a.model = m->model, a.train = m->train, a.infer = m->infer, a.topology = m->topology;
      pb = rf_args_problem(&a, &e);
      if (!pb) {
        g_free(key);
        goto out;
      }
      g_hash_table_insert(problems, key, pb);
    } else {
      g_free(key);
    }
    m->pb = pb;
    m->plan = rf_plan_build(pb, m->strategy, NULL, &e);
    if (!m->plan) goto out;
    rf_calibration_defaults(&m->base);
    gboolean found = TRUE;
    if (calib_path ? !rf_calibration_load(&m->base, calib_path, &e)
                   : !rf_calibration_for_topology(&m->base, pb->topo, &found, &e))
      goto out;
  }
  /* each row's simulated part with the additive parameters at 0, and its default prediction */
  double *p_default = g_new(double, F.n);
  double *x = g_new(double, F.np), *xi = g_new(double, F.np);
  {
    double *base = g_new(double, F.n);
    for (int i = 0; i < F.n; i++) {
      F.m[i].m2n_tensors = sim_plan_m2n_tensors(F.m[i].plan);
      for (int k = 0; k < F.np; k++)
        x[k] = *param_field(&F.m[i].base, F.p[k]->name);
      gboolean saved = F.any_sim;
      F.any_sim = TRUE;
      p_default[i] = predict(&F, i, x);
      F.any_sim = saved;
      base[i] = p_default[i];
      for (int k = 0; k < F.np; k++)
        if (F.p[k]->additive) base[i] -= coef(&F, i, F.p[k]) * x[k];
    }
    F.base_pred = base;
  }
  gboolean *use = g_new(gboolean, F.n);
  for (int i = 0; i < F.n; i++)
    use[i] = TRUE;
  for (int k = 0; k < F.np; k++)
    x[k] = F.p[k]->lo;
  fit(&F, use, x, iters);
  printf("# refit calibrate  measurements %s  rows %d  parameters:", meas_path, F.n);
  for (int k = 0; k < F.np; k++)
    printf(" %s", F.p[k]->name);
  printf("\n# fitted on all rows:");
  for (int k = 0; k < F.np; k++)
    printf(" %s=%.4g", F.p[k]->name, x[k]);
  printf("\n# %-12s %-17s %-17s %9s %9s %8s %9s %8s %9s %8s\n", "topology", "model", "strategy",
         "measured", "default", "err(%)", "fitted", "err(%)", "loo", "err(%)");
  printf("# %-12s %-17s %-17s %9s %9s %8s %9s %8s %9s %8s\n", "", "", "", "(s)", "(s)", "", "(s)",
         "", "(s)", "");
  double e0 = 0, e1 = 0, e2 = 0;
  for (int i = 0; i < F.n; i++) {
    Meas *m = &F.m[i];
    double p0 = p_default[i];
    double p1 = predict(&F, i, x);
    for (int j = 0; j < F.n; j++)
      use[j] = j != i;
    for (int k = 0; k < F.np; k++)
      xi[k] = F.p[k]->lo;
    fit(&F, use, xi, iters);
    double p2 = predict(&F, i, xi);
    double r0 = 100 * (p0 - m->measured_s) / m->measured_s;
    double r1 = 100 * (p1 - m->measured_s) / m->measured_s;
    double r2 = 100 * (p2 - m->measured_s) / m->measured_s;
    e0 += fabs(r0), e1 += fabs(r1), e2 += fabs(r2);
    printf("  %-12s %-17s %-17s %9.3f %9.3f %8.1f %9.3f %8.1f %9.3f %8.1f\n", m->topology, m->model,
           rf_strategy_name(m->strategy), m->measured_s, p0, r0, p1, r1, p2, r2);
  }
  printf("# mean |error|: default %.1f %%, fitted in-sample %.1f %%, leave-one-out %.1f %% "
         "(%ld simulations)\n",
         e0 / F.n, e1 / F.n, e2 / F.n, F.sims);
  printf("# the leave-one-out error is the one to quote: each row predicted by a fit that did not "
         "see it\n");
  g_free(use);
  g_free(p_default);
  g_free(x);
  g_free(xi);
  rc = 0;
out:
  if (e) {
    g_printerr("refit calibrate: %s\n", e->message);
    g_error_free(e);
  }
  for (guint i = 0; i < rows->len; i++) {
    Meas *m = &g_array_index(rows, Meas, i);
    g_free(m->topology);
    g_free(m->model);
    g_free(m->train);
    g_free(m->infer);
    rf_plan_free(m->plan);
    rf_calibration_clear(&m->base);
  }
  g_array_free(rows, TRUE);
  g_hash_table_destroy(problems);
  g_free(F.base_pred);
  g_free(meas_path);
  g_free(calib_path);
  g_strfreev(names);
  g_option_context_free(ctx);
  return rc;
}
