/* Fitting calibration keys to measured refit times: the arithmetic behind `refit calibrate`.
 * Additive keys (refit.fixed_s, m2n.tensor_overhead_s) add coefficient x value to a prediction,
 * so fitting only them needs one simulation per row; any other key re-simulates each row at each
 * step of the search. */
#include "error.h"
#include "internal.h"

#include <math.h>
#include <string.h>

struct RfFit {
  RfFitRow *rows;
  int n;
  const RfCalibrationKey *const *keys;
  int nkeys;
  gboolean any_sim;    /* some key needs re-simulation */
  double *m2n_tensors; /* per row: the coefficient of m2n.tensor_overhead_s */
  double *deflt;       /* per row: prediction with its base calibration */
  double *base;        /* per row: deflt without the additive keys' terms */
  long sims;
  GError *error;   /* first simulation failure */
  char **fallback; /* per row: why the flow model stood in for refit's executor, or NULL */
};

/* Seconds an additive key adds to row i per unit of its value. */
static double coef(const RfFit *f, int i, const RfCalibrationKey *k) {
  if (!strcmp(k->group, "m2n")) return f->m2n_tensors[i];
  return 1.0; /* refit.fixed_s */
}

static double simulate(RfFit *f, int i, const RfCalibration *c) {
  RfSimOptions o = {0};
  o.calib = *c;
  o.exec_fallback = f->rows[i].exec_fallback;
  /* a row the flow model stood in for keeps that model for the whole search (one model per row,
   * so the objective does not jump between models as a key moves the chosen staging), and
   * skips rebuilding a schedule of millions of groups (seconds) at every step to learn it */
  if (f->fallback[i]) o.calib.variant = RF_VARIANT_DEFAULT;
  RfExecutor *ex = rf_sim_executor_new(&o);
  RfResult r;
  GError *e = NULL;
  double t = -1;
  if (ex->prepare(ex, f->rows[i].pb, &e) && ex->run(ex, f->rows[i].plan, &r, &e)) {
    t = r.total_s;
    rf_result_clear(&r);
    const RfSimStats *st = rf_sim_executor_stats(ex);
    if (st && st->exec_fallback && !f->fallback[i]) f->fallback[i] = g_strdup(st->exec_fallback);
  }
  if (e && !f->error)
    f->error = e;
  else if (e)
    g_error_free(e);
  ex->destroy(ex);
  f->sims++;
  return t;
}

/* Simulated with the additive keys at 0 (reusing base when nothing else is fitted), then the
 * additive terms. */
double rf_fit_predict(RfFit *f, int i, const double *x) {
  RfCalibration c = *f->rows[i].base;
  double add = 0;
  for (int k = 0; k < f->nkeys; k++) {
    *rf_calibration_real(&c, f->keys[k]) = f->keys[k]->additive ? 0.0 : x[k];
    if (f->keys[k]->additive) add += coef(f, i, f->keys[k]) * x[k];
  }
  double t = f->any_sim ? simulate(f, i, &c) : f->base[i];
  return t < 0 ? t : t + add;
}

RfFit *rf_fit_new(const RfFitRow *rows, int n, const RfCalibrationKey *const *keys, int nkeys,
                  GError **error) {
  for (int k = 0; k < nkeys; k++)
    if (keys[k]->kind != RF_CAL_REAL || keys[k]->fit_hi <= keys[k]->fit_lo) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "%s.%s cannot be fitted", keys[k]->group,
                  keys[k]->key);
      return NULL;
    }
  RfFit *f = g_new0(RfFit, 1);
  f->rows = g_memdup2(rows, sizeof *rows * (gsize)MAX(n, 1));
  f->n = n;
  f->keys = keys;
  f->nkeys = nkeys;
  for (int k = 0; k < nkeys; k++)
    f->any_sim |= !keys[k]->additive;
  f->m2n_tensors = g_new0(double, MAX(n, 1));
  f->deflt = g_new0(double, MAX(n, 1));
  f->base = g_new0(double, MAX(n, 1));
  f->fallback = g_new0(char *, MAX(n, 1) + 1);
  double *x = g_new0(double, MAX(nkeys, 1));
  gboolean any_sim = f->any_sim;
  f->any_sim = TRUE;
  for (int i = 0; i < n && !f->error; i++) {
    f->m2n_tensors[i] = sim_plan_m2n_tensors(rows[i].plan);
    RfCalibration c = *rows[i].base;
    for (int k = 0; k < nkeys; k++)
      x[k] = *rf_calibration_real(&c, keys[k]);
    f->deflt[i] = rf_fit_predict(f, i, x);
    f->base[i] = f->deflt[i];
    for (int k = 0; k < nkeys; k++)
      if (keys[k]->additive) f->base[i] -= coef(f, i, keys[k]) * x[k];
  }
  f->any_sim = any_sim;
  g_free(x);
  if (f->error) {
    g_propagate_error(error, f->error);
    f->error = NULL;
    rf_fit_free(f);
    return NULL;
  }
  return f;
}

void rf_fit_free(RfFit *f) {
  if (!f) return;
  g_free(f->rows);
  g_free(f->m2n_tensors);
  g_free(f->deflt);
  g_free(f->base);
  for (int i = 0; f->fallback && i < f->n; i++)
    g_free(f->fallback[i]);
  g_free(f->fallback);
  g_clear_error(&f->error);
  g_free(f);
}

const char *rf_fit_fallback(const RfFit *f, int i) {
  return f->fallback[i];
}

double rf_fit_default(const RfFit *f, int i) {
  return f->deflt[i];
}

long rf_fit_simulations(const RfFit *f) {
  return f->sims;
}

const GError *rf_fit_error(const RfFit *f) {
  return f->error;
}

/* Mean squared log error over the rows with use[i]. */
static double objective(RfFit *f, const gboolean *use, const double *x) {
  double s = 0;
  int k = 0;
  for (int i = 0; i < f->n; i++) {
    if (use && !use[i]) continue;
    double p = rf_fit_predict(f, i, x);
    if (p <= 0) return INFINITY;
    double d = log(p / f->rows[i].measured_s);
    s += d * d;
    k++;
  }
  return k ? s / k : 0;
}

void rf_fit_run(RfFit *f, const gboolean *use, int iters, double *x) {
  const double g = (sqrt(5.0) - 1) / 2;
  for (int k = 0; k < f->nkeys; k++)
    x[k] = f->keys[k]->fit_lo;
  for (int pass = 0; pass < (f->nkeys > 1 ? 2 : 1); pass++)
    for (int k = 0; k < f->nkeys; k++) {
      double a = f->keys[k]->fit_lo, b = f->keys[k]->fit_hi;
      double c = b - g * (b - a), d = a + g * (b - a);
      x[k] = c;
      double fc = objective(f, use, x);
      x[k] = d;
      double fd = objective(f, use, x);
      for (int it = 0; it < iters; it++) {
        if (fc < fd) {
          b = d, d = c, fd = fc;
          c = b - g * (b - a);
          x[k] = c;
          fc = objective(f, use, x);
        } else {
          a = c, c = d, fc = fd;
          d = a + g * (b - a);
          x[k] = d;
          fd = objective(f, use, x);
        }
      }
      x[k] = fc < fd ? c : d;
    }
}
