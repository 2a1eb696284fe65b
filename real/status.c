/* The executor's status vocabulary, shared by its files: a backend status as a string and as an
 * error code (model/base/error.h), the GError of a failure, and the progress of a long phase. */
#include "engine_int.h"

#include <stdarg.h>

const char *rf_real_status_string(RfRealStatus s) {
  switch (s) {
  case RF_REAL_OK:
    return "ok";
  case RF_REAL_ERR_MPI:
    return "MPI error";
  case RF_REAL_ERR_CUDA:
    return "CUDA error";
  case RF_REAL_ERR_NCCL:
    return "NCCL error";
  case RF_REAL_ERR_NODEV:
    return "no GPU";
  case RF_REAL_ERR_NOMEM:
    return "out of memory";
  case RF_REAL_ERR_TIMEOUT:
    return "timed out";
  case RF_REAL_ERR_PEER:
    return "a peer failed";
  case RF_REAL_ERR_INTERNAL:
    return "internal error";
  }
  return "unknown error";
}

RfError rf_real_status_code(RfRealStatus s) {
  switch (s) {
  case RF_REAL_ERR_TIMEOUT:
    return RF_ERROR_TIMEOUT;
  case RF_REAL_ERR_NOMEM:
    return RF_ERROR_LIMIT;
  default:
    return RF_ERROR_PEER;
  }
}

void rf_real_set_err(GError **error, RfError code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *m = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error_literal(error, RF_ERROR, code, m);
  g_free(m);
}

#define PROGRESS_AFTER_US 3000000
#define PROGRESS_EVERY_US 5000000

void rf_real_progress(RealState *st, const RfPlan *plan, const char *what, uint64_t done,
                      uint64_t total, gint64 t0, gint64 *shown) {
  gint64 now = g_get_monotonic_time();
  if (!st->progress || now - t0 < PROGRESS_AFTER_US || now - *shown < PROGRESS_EVERY_US) return;
  st->progress(rf_strategy_name(plan->strategy), what, done, total, (now - t0) * 1e-6,
               st->progress_data);
  *shown = now;
}
