/* Internal to real/: the process bootstrap (MPI world, node-local rank, NCCL unique id) and the
 * few collectives the engine needs, all with a timeout. Everything MPI- or build-dependent
 * about starting a run lives in boot.c. */
#ifndef RF_REAL_BOOT_H
#define RF_REAL_BOOT_H

#include "backend.h"
#include "error.h"
#include <glib.h>

typedef struct {
  int rank, world; /* MPI world (0 / 1 without MPI) */
  int local_rank;  /* rank among the processes of this node: the GPU it drives */
  int local_size;  /* processes of this node */
  gboolean mpi;    /* MPI_Init ran */
  char host[64];
} RfBoot;

/* Print "host rank file:line 'what'" on stderr (the CHECK macros' format). */
#define RF_REAL_REPORT(what)                                                                       \
  fprintf(stderr, "%s %d %s:%d '%s'\n", rf_boot()->host, rf_boot()->rank, __FILE__, __LINE__,      \
          (what))

/* Check an MPI call where mpi.h is included: on failure report it (RF_REAL_REPORT) and run
 * on_fail, a statement such as `return RF_REAL_ERR_MPI` or `goto out`. */
#define RF_MPICHECK(cmd, on_fail)                                                                  \
  do {                                                                                             \
    int e_ = (cmd);                                                                                \
    if (e_ != MPI_SUCCESS) {                                                                       \
      char s_[MPI_MAX_ERROR_STRING];                                                               \
      int l_ = 0;                                                                                  \
      MPI_Error_string(e_, s_, &l_);                                                               \
      RF_REAL_REPORT(s_);                                                                          \
      on_fail;                                                                                     \
    }                                                                                              \
  } while (0)

/* MPI_Init (unless local), world, hostname, node-local rank. FALSE + error on failure. */
gboolean rf_boot_init(int *argc, char ***argv, gboolean local, GError **error);
const RfBoot *rf_boot(void);
/* MPI_Finalize when MPI_Init ran. */
void rf_boot_finalize(void);
/* Kill the whole job (MPI_Abort), or exit(code) without MPI. */
G_GNUC_NORETURN void rf_boot_abort(int code);

/* Rank 0 makes an ncclUniqueId and broadcasts it; id must hold ncclUniqueId. */
RfRealStatus rf_boot_nccl_id(void *id, size_t len);
/* Sum (u64) or max (double) over the world, giving up after timeout_s. No-ops without MPI. */
RfRealStatus rf_boot_sum_u64(uint64_t *v, int n, double timeout_s);
RfRealStatus rf_boot_max_double(double *v, int n, double timeout_s);
RfRealStatus rf_boot_barrier(double timeout_s);

/* Every rank's host name (world entries of 64 bytes, caller frees); NULL on failure. */
char *rf_boot_hosts(double timeout_s);

/* A distributed search (refit advise), without timeouts (a rank waits for the slowest one,
 * sleeping, not spinning). Every rank's block of `bytes` into all (world x bytes, rank order).
 * Collective. */
RfRealStatus rf_boot_allgather_bytes(const void *mine, void *all, size_t bytes);
/* A minimum shared as it improves: post sends v to every other rank (non-blocking); poll lowers
 * *v to what has arrived; end (collective) receives what is still in flight and completes the
 * sends. No-ops without MPI. */
RfRealStatus rf_boot_min_post(double v);
RfRealStatus rf_boot_min_poll(double *v);
RfRealStatus rf_boot_min_end(double *v);

#endif
