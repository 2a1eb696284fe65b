#include "advise_search.h"
#include "advise_pool.h"
#include "error.h"

#include <math.h>
#include <string.h>

void rf_advise_candidates_clear(RfAdviseCandidate *cands, int n) {
  for (int i = 0; i < n; i++) {
    g_free(cands[i].layout);
    cands[i].layout = NULL;
  }
}

/* One search on this rank: the candidates, the live ones among them (not dropped: the bounds
 * are sharded over these), this rank's place in the job, and the step the workers run. */
typedef struct {
  const RfAdviseSearch *s;
  RfAdviseCandidate *cands; /* the caller's, all n; a worker's item is an index in it */
  const int *live;          /* the candidates not dropped, ascending */
  int nlive;
  int R, W;
  gboolean simulate; /* FALSE: bounds (step 2), TRUE: simulations (step 3) */
} Search;

static void pool_item(int item, void *result, void *ud) {
  const Search *x = ud;
  x->s->eval(item, &x->cands[item], x->simulate, result, x->s->eval_ud);
}

static void progress(const Search *x, const char *what, int done, int total, gint64 t0) {
  if (x->s->progress)
    x->s->progress(what, done, total, (g_get_monotonic_time() - t0) / 1e6, x->s->progress_ud);
}

/* The worker of item ended: its outcome goes to its candidate's step. */
static RfAdviseCandidate *collect(Search *x, RfPool *pool) {
  RfAdviseOutcome o;
  GError *died = NULL;
  int item = rf_pool_wait(pool, &o, &died);
  if (item < 0) return NULL;
  if (died) {
    o.ok = 0;
    o.code = died->code;
    g_strlcpy(o.error, died->message, sizeof o.error);
    g_error_free(died);
  }
  RfAdviseCandidate *k = &x->cands[item];
  if (x->simulate) {
    k->sim = o;
    k->simulated = TRUE;
  } else {
    k->bound = o;
    k->bounded = TRUE;
  }
  return k;
}

static gboolean allgather(const Search *x, const void *mine, void *all, size_t bytes,
                          GError **error) {
  const RfAdviseComm *c = x->s->comm;
  if (c && c->allgather) return c->allgather(mine, all, bytes, c->ud, error);
  memcpy(all, mine, bytes);
  return TRUE;
}

/* Step 2: this rank's share of the bounds (live j with j % W == R), then every rank's. */
static gboolean bound_step(Search *x, GError **error) {
  int R = x->R, W = x->W, n = x->nlive;
  int mine = n > R ? (n - R + W - 1) / W : 0, next = 0, done = 0;
  x->simulate = FALSE;
  RfPool *pool = rf_pool_new(x->s->jobs, sizeof(RfAdviseOutcome), pool_item, x);
  gint64 t0 = g_get_monotonic_time();
  while (done < mine) {
    while (!rf_pool_full(pool) && next < mine) {
      if (!rf_pool_spawn(pool, x->live[R + next * W], error)) goto fail;
      next++;
    }
    if (collect(x, pool)) progress(x, "bounds", ++done, mine, t0);
  }
  rf_pool_free(pool);
  if (W == 1) return TRUE;
  int K = (n + W - 1) / W;
  RfAdviseOutcome *blk = g_new0(RfAdviseOutcome, K), *all = g_new0(RfAdviseOutcome, (size_t)K * W);
  for (int k = 0; k < K && R + k * W < n; k++)
    blk[k] = x->cands[x->live[R + k * W]].bound;
  gboolean ok = allgather(x, blk, all, sizeof(RfAdviseOutcome) * (size_t)K, error);
  for (int r = 0; ok && r < W; r++)
    for (int k = 0; k < K && r + k * W < n; k++) {
      RfAdviseCandidate *c = &x->cands[x->live[r + k * W]];
      c->bound = all[(size_t)r * K + k];
      c->bounded = TRUE;
    }
  g_free(blk);
  g_free(all);
  return ok;
fail:
  rf_pool_free(pool);
  return FALSE;
}

static int by_bound(const void *a, const void *b, void *ud) {
  const RfAdviseCandidate *c = ud;
  const RfAdviseCandidate *x = &c[*(const int *)a], *y = &c[*(const int *)b];
  return x->bound.bound_s < y->bound.bound_s ? -1 : x->bound.bound_s > y->bound.bound_s;
}

static int by_prediction(const void *a, const void *b, void *ud) {
  const RfAdviseCandidate *c = ud;
  const RfAdviseCandidate *x = &c[*(const int *)a], *y = &c[*(const int *)b];
  double px = x->simulated && x->sim.ok ? x->sim.predicted_s : INFINITY;
  double py = y->simulated && y->sim.ok ? y->sim.predicted_s : INFINITY;
  if (px != py) return px < py ? -1 : 1;
  return x->bound.bound_s < y->bound.bound_s ? -1 : x->bound.bound_s > y->bound.bound_s;
}

/* The best prediction a candidate is pruned against: of all (best), or with per_gpus of its GPU
 * count (group_best: ngpus -> double*). */
static double prune_at(const Search *x, const RfAdviseCandidate *k, double best,
                       GHashTable *group_best) {
  if (!x->s->per_gpus) return best;
  const double *b = g_hash_table_lookup(group_best, GINT_TO_POINTER(k->ngpus));
  return b ? *b : INFINITY;
}

static void record_best(GHashTable *group_best, const RfAdviseCandidate *k) {
  double *b = g_hash_table_lookup(group_best, GINT_TO_POINTER(k->ngpus));
  if (!b) {
    b = g_new(double, 1);
    *b = INFINITY;
    g_hash_table_insert(group_best, GINT_TO_POINTER(k->ngpus), b);
  }
  if (k->sim.predicted_s < *b) *b = k->sim.predicted_s;
}

/* Step 3: this rank's positions (p % W == R) of the bound order, in that order; a candidate
 * whose bound exceeds the best prediction known (of all, or with per_gpus of its GPU count) is
 * pruned. The order is by bound and the best only falls: without per_gpus everything after the
 * first pruned one is pruned too. */
static gboolean simulate_step(Search *x, const int *order, int nord, GError **error) {
  const RfAdviseSearch *s = x->s;
  const RfAdviseComm *comm = s->comm;
  int R = x->R, W = x->W;
  int mine = nord > R ? (nord - R + W - 1) / W : 0, next = 0, sims = 0;
  double best = INFINITY;
  GHashTable *group_best = g_hash_table_new_full(NULL, NULL, NULL, g_free);
  x->simulate = TRUE;
  RfPool *pool = rf_pool_new(s->jobs, sizeof(RfAdviseOutcome), pool_item, x);
  gint64 t0 = g_get_monotonic_time();
#define AT(q) (&x->cands[order[R + (q)*W]])
  while (next < mine || rf_pool_running(pool) > 0) {
    if (comm && comm->min_poll && !comm->min_poll(&best, comm->ud, error)) goto fail;
    while (!rf_pool_full(pool) && next < mine) {
      if (!s->exhaustive && AT(next)->bound.bound_s > prune_at(x, AT(next), best, group_best)) {
        AT(next++)->pruned = TRUE;
        continue;
      }
      if (!rf_pool_spawn(pool, order[R + next * W], error)) goto fail;
      next++;
    }
    if (!rf_pool_running(pool)) break;
    const RfAdviseCandidate *k = collect(x, pool);
    if (!k) continue;
    if (k->sim.ok) record_best(group_best, k);
    if (k->sim.ok && k->sim.predicted_s < best) {
      best = k->sim.predicted_s;
      if (comm && comm->min_post && !comm->min_post(best, comm->ud, error)) goto fail;
    }
    sims++;
    int pruned = 0;
    for (int r = next; r < mine; r++)
      pruned += !s->exhaustive && AT(r)->bound.bound_s > prune_at(x, AT(r), best, group_best);
    progress(x, "simulated", sims, sims + rf_pool_running(pool) + (mine - next) - pruned, t0);
  }
#undef AT
  rf_pool_free(pool);
  g_hash_table_destroy(group_best);
  return !comm || !comm->min_end || comm->min_end(&best, comm->ud, error);
fail:
  rf_pool_free(pool);
  g_hash_table_destroy(group_best);
  return FALSE;
}

/* Every rank's simulations and prunings to every rank. */
static gboolean share_simulations(Search *x, const int *order, int nord, GError **error) {
  typedef struct {
    int simulated, pruned;
    RfAdviseOutcome sim;
  } Done;
  int R = x->R, W = x->W;
  if (W == 1 || nord == 0) return TRUE;
  int K = (nord + W - 1) / W;
  Done *blk = g_new0(Done, K), *all = g_new0(Done, (size_t)K * W);
  for (int k = 0; k < K && R + k * W < nord; k++) {
    const RfAdviseCandidate *c = &x->cands[order[R + k * W]];
    blk[k] = (Done){c->simulated, c->pruned, c->sim};
  }
  gboolean ok = allgather(x, blk, all, sizeof(Done) * (size_t)K, error);
  for (int r = 0; ok && r < W; r++)
    for (int k = 0; k < K && r + k * W < nord; k++) {
      const Done *d = &all[(size_t)r * K + k];
      RfAdviseCandidate *c = &x->cands[order[r + k * W]];
      c->simulated = d->simulated, c->pruned = d->pruned, c->sim = d->sim;
    }
  g_free(blk);
  g_free(all);
  return ok;
}

gboolean rf_advise_search(const RfAdviseSearch *s, RfAdviseCandidate *cands, int n, int *order,
                          int *nord, GError **error) {
  /* dropped candidates go to no worker: the shards are over the live ones */
  int *live = g_new(int, n > 0 ? n : 1), nlive = 0;
  for (int i = 0; i < n; i++)
    if (!cands[i].dropped) live[nlive++] = i;
  Search x = {.s = s, .cands = cands, .live = live, .nlive = nlive, .R = 0, .W = 1};
  if (s->comm) x.R = s->comm->rank, x.W = s->comm->world;
  *nord = 0;
  gboolean ok = bound_step(&x, error);
  if (ok) {
    for (int j = 0; j < nlive; j++)
      if (cands[live[j]].bound.ok)
        order[(*nord)++] = live[j];
      else
        cands[live[j]].dropped = TRUE;
    /* stable: alike on every rank; the shards of step 3 are positions in this order */
    g_qsort_with_data(order, *nord, sizeof(int), by_bound, cands);
    ok = simulate_step(&x, order, *nord, error) && share_simulations(&x, order, *nord, error);
  }
  if (ok) g_qsort_with_data(order, *nord, sizeof(int), by_prediction, cands);
  g_free(live);
  return ok;
}
