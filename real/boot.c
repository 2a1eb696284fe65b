/* The bootstrap: MPI world, node-local rank, the NCCL unique id, timed collectives. Here and in
 * backends/registry.c (which backends there are) the build says whether CUDA is in
 * (REFIT_HAVE_CUDA). */
#include "boot.h"
#include "error.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef REFIT_HAVE_CUDA
#include <nccl.h>
#endif

static RfBoot boot = {
    .rank = 0, .world = 1, .local_rank = 0, .local_size = 1, .mpi = FALSE, .host = "localhost"};

#define MPICHECK(cmd) RF_MPICHECK(cmd, return RF_REAL_ERR_MPI)

const RfBoot *rf_boot(void) {
  return &boot;
}

gboolean rf_boot_init(int *argc, char ***argv, gboolean local, GError **error) {
  if (gethostname(boot.host, sizeof boot.host) != 0)
    g_strlcpy(boot.host, "localhost", sizeof boot.host);
  boot.host[sizeof boot.host - 1] = '\0';
  if (local) return TRUE;
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "MPI_Init failed");
    return FALSE;
  }
  boot.mpi = TRUE;
  /* Errors come back as codes so that a failing rank can say where it failed. */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &boot.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &boot.world);
  MPI_Comm node;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, boot.rank, MPI_INFO_NULL, &node) ==
      MPI_SUCCESS) {
    MPI_Comm_rank(node, &boot.local_rank);
    MPI_Comm_size(node, &boot.local_size);
    MPI_Comm_free(&node);
  }
  return TRUE;
}

void rf_boot_finalize(void) {
  if (boot.mpi) MPI_Finalize();
  boot.mpi = FALSE;
}

void rf_boot_abort(int code) {
  fflush(stdout);
  fflush(stderr);
  if (boot.mpi) MPI_Abort(MPI_COMM_WORLD, code);
  exit(code);
}

/* Poll a request until done or timeout: MPI has no timed wait, and a dead peer must not hang
 * the survivors forever. */
static RfRealStatus wait_timed(MPI_Request *req, double timeout_s) {
  double t0 = MPI_Wtime();
  for (;;) {
    int done = 0;
    MPICHECK(MPI_Test(req, &done, MPI_STATUS_IGNORE));
    if (done) return RF_REAL_OK;
    if (MPI_Wtime() - t0 > timeout_s) return RF_REAL_ERR_TIMEOUT;
    g_usleep(50);
  }
}

RfRealStatus rf_boot_nccl_id(void *id, size_t len) {
#ifdef REFIT_HAVE_CUDA
  if (len < sizeof(ncclUniqueId)) return RF_REAL_ERR_INTERNAL;
  if (boot.rank == 0) {
    ncclResult_t r = ncclGetUniqueId((ncclUniqueId *)id);
    if (r != ncclSuccess) {
      RF_REAL_REPORT(ncclGetErrorString(r));
      /* The others wait in the broadcast: take them down with us. */
      rf_boot_abort(2);
    }
  }
  if (boot.mpi) MPICHECK(MPI_Bcast(id, (int)sizeof(ncclUniqueId), MPI_BYTE, 0, MPI_COMM_WORLD));
  return RF_REAL_OK;
#else
  (void)id;
  (void)len;
  return RF_REAL_ERR_INTERNAL;
#endif
}

RfRealStatus rf_boot_sum_u64(uint64_t *v, int n, double timeout_s) {
  if (!boot.mpi || boot.world == 1) return RF_REAL_OK;
  MPI_Request req;
  MPICHECK(MPI_Iallreduce(MPI_IN_PLACE, v, n, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD, &req));
  return wait_timed(&req, timeout_s);
}

RfRealStatus rf_boot_max_double(double *v, int n, double timeout_s) {
  if (!boot.mpi || boot.world == 1) return RF_REAL_OK;
  MPI_Request req;
  MPICHECK(MPI_Iallreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &req));
  return wait_timed(&req, timeout_s);
}

RfRealStatus rf_boot_barrier(double timeout_s) {
  if (!boot.mpi || boot.world == 1) return RF_REAL_OK;
  MPI_Request req;
  MPICHECK(MPI_Ibarrier(MPI_COMM_WORLD, &req));
  return wait_timed(&req, timeout_s);
}

char *rf_boot_hosts(double timeout_s) {
  char *all = g_malloc0((size_t)boot.world * 64);
  memcpy(all + (size_t)boot.rank * 64, boot.host, 64);
  if (boot.mpi && boot.world > 1) {
    MPI_Request req;
    if (MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, 64, MPI_CHAR, MPI_COMM_WORLD,
                       &req) != MPI_SUCCESS ||
        wait_timed(&req, timeout_s) != RF_REAL_OK) {
      g_free(all);
      return NULL;
    }
  }
  return all;
}

/* ---------- a distributed search (refit advise) ---------- */

/* Wait without a timeout and without spinning a core: a search rank waits for the slowest one,
 * which may take minutes, and shares the machine with its forked workers. */
static RfRealStatus wait_idle(MPI_Request *req) {
  for (;;) {
    int done = 0;
    MPICHECK(MPI_Test(req, &done, MPI_STATUS_IGNORE));
    if (done) return RF_REAL_OK;
    g_usleep(1000);
  }
}

RfRealStatus rf_boot_allgather_bytes(const void *mine, void *all, size_t bytes) {
  memcpy((char *)all + (size_t)boot.rank * bytes, mine, bytes);
  if (!boot.mpi || boot.world == 1) return RF_REAL_OK;
  if (bytes > (size_t)G_MAXINT) return RF_REAL_ERR_INTERNAL;
  MPI_Request req;
  MPICHECK(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, (int)bytes, MPI_BYTE,
                          MPI_COMM_WORLD, &req));
  return wait_idle(&req);
}

/* The shared minimum: each improvement goes to every other rank as one double (tag MIN_TAG);
 * the receivers take what has arrived whenever they look. */
enum { MIN_TAG = 7301 };
static GArray *min_reqs;    /* MPI_Request of the sends in flight */
static GPtrArray *min_bufs; /* their payloads (one per post, freed at the end) */
static uint64_t min_posts, min_got;

RfRealStatus rf_boot_min_post(double v) {
  if (!boot.mpi || boot.world == 1) return RF_REAL_OK;
  if (!min_reqs) {
    min_reqs = g_array_new(FALSE, FALSE, sizeof(MPI_Request));
    min_bufs = g_ptr_array_new_with_free_func(g_free);
  }
  double *min_out = g_new(double, 1);
  *min_out = v;
  g_ptr_array_add(min_bufs, min_out);
  for (int r = 0; r < boot.world; r++) {
    if (r == boot.rank) continue;
    MPI_Request req;
    MPICHECK(MPI_Isend(min_out, 1, MPI_DOUBLE, r, MIN_TAG, MPI_COMM_WORLD, &req));
    g_array_append_val(min_reqs, req);
  }
  min_posts++;
  return RF_REAL_OK;
}

RfRealStatus rf_boot_min_poll(double *v) {
  if (!boot.mpi || boot.world == 1) return RF_REAL_OK;
  for (;;) {
    int flag = 0;
    MPICHECK(MPI_Iprobe(MPI_ANY_SOURCE, MIN_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
    if (!flag) return RF_REAL_OK;
    double x;
    MPICHECK(
        MPI_Recv(&x, 1, MPI_DOUBLE, MPI_ANY_SOURCE, MIN_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    min_got++;
    if (x < *v) *v = x;
  }
}

RfRealStatus rf_boot_min_end(double *v) {
  if (!boot.mpi || boot.world == 1) return RF_REAL_OK;
  /* how many each rank posted: receive exactly the rest of what was sent here */
  uint64_t *posts = g_new0(uint64_t, boot.world);
  RfRealStatus s = rf_boot_allgather_bytes(&min_posts, posts, sizeof(uint64_t));
  uint64_t expect = 0;
  for (int r = 0; r < boot.world; r++)
    if (r != boot.rank) expect += posts[r];
  g_free(posts);
  while (s == RF_REAL_OK && min_got < expect) {
    double x;
    MPI_Request req;
    MPICHECK(MPI_Irecv(&x, 1, MPI_DOUBLE, MPI_ANY_SOURCE, MIN_TAG, MPI_COMM_WORLD, &req));
    s = wait_idle(&req);
    min_got++;
    if (x < *v) *v = x;
  }
  if (s == RF_REAL_OK && min_reqs && min_reqs->len)
    MPICHECK(MPI_Waitall((int)min_reqs->len, (MPI_Request *)min_reqs->data, MPI_STATUSES_IGNORE));
  if (min_reqs) g_array_free(min_reqs, TRUE);
  if (min_bufs) g_ptr_array_free(min_bufs, TRUE);
  min_reqs = NULL, min_bufs = NULL;
  min_posts = min_got = 0;
  return s;
}
