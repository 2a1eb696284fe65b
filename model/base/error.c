#include "error.h"

G_DEFINE_QUARK(refit - error - quark, rf_error)

int rf_error_exit_status(const GError *error) {
  if (!error) return RF_EXIT_OK;
  if (error->domain != RF_ERROR) return RF_EXIT_INPUT; /* option and key-file parsing */
  switch ((RfError)error->code) {
  case RF_ERROR_IO:
  case RF_ERROR_PEER:
  case RF_ERROR_TIMEOUT:
    return RF_EXIT_RUNTIME;
  case RF_ERROR_VERIFY:
    return RF_EXIT_VERIFY;
  case RF_ERROR_INPUT:
  case RF_ERROR_LIMIT:
    break;
  }
  return RF_EXIT_INPUT;
}
