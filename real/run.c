/* The process world of `refit run`: MPI start and end, the job-wide abort, and where the ranks
 * sit against the plan's NVLink domains. The command itself (options, report) is cli/cmd_run.c. */
#include "boot.h"
#include "error.h"
#include "real.h"

#include <stdio.h>
#include <string.h>

gboolean rf_real_world_start(int *argc, char ***argv, gboolean local, RfRealWorld *out,
                             GError **error) {
  if (!rf_boot_init(argc, argv, local, error)) return FALSE;
  const RfBoot *b = rf_boot();
  out->rank = b->rank;
  out->world = b->world;
  out->mpi = b->mpi;
  return TRUE;
}

void rf_real_world_end(void) {
  rf_boot_finalize();
}

void rf_real_world_abort(int code) {
  rf_boot_abort(code);
}

/* Do the MPI ranks sit where the plan (and the simulator) put them? A node is inside one NVLink
 * domain, and on a topology whose domains are single nodes (<= 8 GPUs) a domain is one node. */
static char *placement_check(const RfProblem *pb, const char *hosts) {
  gboolean one_host = TRUE;
  for (int r = 1; r < pb->nranks && one_host; r++)
    one_host = !strcmp(hosts, hosts + (size_t)r * 64);
  /* Every rank on one machine is a smoke test by choice, not a misplaced job: say so once. */
  if (one_host)
    return g_strdup_printf("all %d ranks on host %s: NVLink domains are not reproduced, times are "
                           "not comparable with predictions",
                           pb->nranks, hosts);
  for (int r = 0; r < pb->nranks; r++)
    for (int s = r + 1; s < pb->nranks; s++) {
      if (pb->gpu[r] < 0 || pb->gpu[s] < 0) continue;
      gboolean same_host = !strcmp(hosts + (size_t)r * 64, hosts + (size_t)s * 64);
      gboolean same_domain = rf_problem_domain(pb, r) == rf_problem_domain(pb, s);
      if (same_host && !same_domain)
        return g_strdup_printf("WARNING: ranks %d and %d share host %s but the plan puts them in "
                               "NVLink domains %d and %d (GPUs %d and %d): measured and predicted "
                               "times will differ",
                               r, s, hosts + (size_t)r * 64, rf_problem_domain(pb, r),
                               rf_problem_domain(pb, s), pb->gpu[r], pb->gpu[s]);
      if (!same_host && same_domain && pb->topo->gpus_per_domain <= 8)
        return g_strdup_printf("WARNING: ranks %d and %d are on hosts %s and %s but the plan puts "
                               "both in NVLink domain %d (GPUs %d and %d): measured and predicted "
                               "times will differ",
                               r, s, hosts + (size_t)r * 64, hosts + (size_t)s * 64,
                               rf_problem_domain(pb, r), pb->gpu[r], pb->gpu[s]);
    }
  return g_strdup("ranks sit in the plan's NVLink domains");
}

char *rf_real_world_placement(const RfProblem *pb, double timeout_s) {
  char *hosts = rf_boot_hosts(timeout_s);
  char *note = hosts ? placement_check(pb, hosts) : g_strdup("unknown (host names not exchanged)");
  g_free(hosts);
  return note;
}

/* ---------- a search spread over the ranks ---------- */

static gboolean status_ok(RfRealStatus s, const char *what, GError **error) {
  if (s == RF_REAL_OK) return TRUE;
  g_set_error(error, RF_ERROR, RF_ERROR_PEER, "%s: %s", what, rf_real_status_string(s));
  return FALSE;
}

gboolean rf_real_world_allgather(const void *mine, void *all, size_t bytes, GError **error) {
  return status_ok(rf_boot_allgather_bytes(mine, all, bytes), "MPI all-gather", error);
}

gboolean rf_real_world_min_post(double v, GError **error) {
  return status_ok(rf_boot_min_post(v), "MPI send of the best so far", error);
}

gboolean rf_real_world_min_poll(double *v, GError **error) {
  return status_ok(rf_boot_min_poll(v), "MPI receive of the best so far", error);
}

gboolean rf_real_world_min_end(double *v, GError **error) {
  return status_ok(rf_boot_min_end(v), "MPI exchange of the best so far", error);
}
