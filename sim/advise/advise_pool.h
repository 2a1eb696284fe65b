/* A pool of forked workers: each runs one item and sends back a fixed-size block of plain data
 * through a pipe, so a crash, a leak or a global in the work stays in its process. `refit
 * advise` bounds and simulates its candidates this way (sim/advise/advise_search.h). */
#ifndef RF_POOL_H
#define RF_POOL_H

#include <glib.h>
#include <stddef.h>

/* The work of one item, run in a forked child: fill result (result_bytes, zeroed beforehand)
 * for item. Plain data only: pointers in result mean nothing to the parent. */
typedef void (*RfPoolFn)(int item, void *result, void *ud);

typedef struct RfPool RfPool;

/* A pool of at most jobs (>= 1) workers at once, each running fn(item, result, ud). fn and ud
 * are borrowed: they must outlive the pool. Starts no process yet. */
RfPool *rf_pool_new(int jobs, size_t result_bytes, RfPoolFn fn, void *ud);

/* Waits for the workers still running and discards their results; NULL is a no-op. */
void rf_pool_free(RfPool *p);

/* Workers running now (0..jobs). */
int rf_pool_running(const RfPool *p);

/* Whether every worker slot is taken (rf_pool_spawn would fail). */
gboolean rf_pool_full(const RfPool *p);

/* Fork a worker for item into a free slot (stdio is flushed first). FALSE + one-line error
 * (RF_ERROR_IO) when the pool is full or pipe / fork fails; nothing is started then. */
gboolean rf_pool_spawn(RfPool *p, int item, GError **error);

/* Block until one running worker ends; copy its block into result (result_bytes) and return
 * its item. A worker that ended without sending its whole block (a crash, a kill) still
 * returns its item, with result zeroed and *died set (RF_ERROR_IO, "worker died (status
 * N)"). -1 when no worker runs. Each spawned item comes back exactly once. */
int rf_pool_wait(RfPool *p, void *result, GError **died);

#endif
