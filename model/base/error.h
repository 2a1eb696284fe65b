/* The one error domain of refit. Every GError refit sets is in RF_ERROR with a code that says
 * what kind of failure it is; the message is one line for the user. The commands map the code
 * to the exit status (rf_error_exit_status), so every command exits the same way. */
#ifndef RF_ERROR_H
#define RF_ERROR_H

#include <glib.h>

typedef enum {
  RF_ERROR_INPUT = 1, /* bad input: unknown name, malformed file, layout or shape that cannot be */
  RF_ERROR_IO,        /* a file could not be read or written, a helper program failed */
  RF_ERROR_PEER,      /* another rank, the MPI runtime or the device failed */
  RF_ERROR_TIMEOUT,   /* a stage made no progress within the timeout */
  RF_ERROR_LIMIT,     /* a size, count or memory limit would be exceeded */
  RF_ERROR_VERIFY,    /* a plan broke an invariant or an executor moved wrong bytes */
} RfError;

#define RF_ERROR (rf_error_quark())
GQuark rf_error_quark(void);

/* Exit statuses of every refit command (documented in the README). */
enum {
  RF_EXIT_OK = 0,
  RF_EXIT_RUNTIME = 1, /* I/O, peer, timeout: the input was fine, the run failed */
  RF_EXIT_INPUT = 2,   /* bad input or usage, limits exceeded */
  RF_EXIT_VERIFY = 3,  /* verification failed */
};

/* The exit status for an error of any domain (GOption and GKeyFile errors are bad input). */
int rf_error_exit_status(const GError *error);

#endif
