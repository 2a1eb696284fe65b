/* The search of `refit advise`: bound every candidate, then simulate in order of increasing
 * bound, never simulating one whose bound exceeds the best prediction so far (branch and
 * bound), each step in forked workers (advise_pool.h) and, when a communicator is given, spread
 * over the ranks of a job. What a candidate is and how it is judged is advise_candidates.h; this
 * file only orders, prunes and shares. No MPI here: the caller passes the collective steps in. */
#ifndef RF_ADVISE_SEARCH_H
#define RF_ADVISE_SEARCH_H

#include "advise.h"
#include "layout.h"
#include "plan.h"
#include <glib.h>
#include <stdint.h>

/* What one step (bound or simulation) found for a candidate. Fixed size, plain data: it crosses
 * a worker's pipe and the ranks' all-gather as bytes. */
typedef struct {
  int ok;                 /* 1: the step ran; 0: error[] says why */
  int code;               /* RfError code when !ok */
  double bound_s;         /* fabric-aware lower bound at the calibration's rates (s) */
  double nic_bound_s;     /* the plan's own bound, NICs at line rate (s) */
  double predicted_s;     /* simulated time (s); 0 for a bound step */
  uint64_t weights_bytes; /* inference weights per GPU (B) */
  uint64_t extra_bytes;   /* refit's extra memory per GPU (B) */
  uint64_t nccl_bytes;    /* of which NCCL's point-to-point buffers (B) */
  uint64_t peak_bytes;    /* weights + extra at the peak (B) */
  int memory_from;        /* RfMemoryFrom (model/plan/memory.h): what counted the three above */
  uint64_t network_bytes; /* bytes over the network (B) */
  char bound_what[40];    /* the resource binding bound_s ("NIC", "NVLink", "leaf", ...) */
  char bound_by[120];     /* what the simulation names as binding its time */
  char error[240];        /* one line when !ok (or why the candidate was dropped) */
} RfAdviseOutcome;

/* One point of the search: inference GPUs x engine layout x placement x strategy. */
typedef struct {
  int ngpus;             /* inference GPUs */
  char *layout;          /* owned: layout string, "TP4xDP2", "TP4xDP2xEP8", "TP8xDP1xEP8xADP8" */
  RfParallel par;        /* the layout, parsed (model/problem/layout.h) */
  RfInferFramework fw;   /* the engine whose preset places it: vLLM or SGLang */
  int tp_domains;        /* NVLink domains one TP group spans (1: within one) */
  RfPlacementKind place; /* where the two sides sit */
  RfStrategy strategy;   /* how the plan moves the weights */
  RfAdviseOutcome bound; /* step 2 (or why the candidate was dropped) */
  RfAdviseOutcome sim;   /* step 3 */
  gboolean bounded, simulated, pruned, dropped;
} RfAdviseCandidate;

/* Free the layout strings of n candidates (the array itself is the caller's). */
void rf_advise_candidates_clear(RfAdviseCandidate *cands, int n);

/* Judge candidate i (cands[i], a copy in a forked worker): simulate FALSE fills the bound step's
 * outcome, TRUE the simulation's. Runs in a child process: what it changes besides out is lost. */
typedef void (*RfAdviseEvalFn)(int i, const RfAdviseCandidate *k, gboolean simulate,
                               RfAdviseOutcome *out, void *ud);

/* The collective steps of a search spread over the ranks of a job (MPI in `refit advise`, a
 * test's in-process shards in tests/test_search.c). ud is passed to each; a NULL function is a
 * world of one. Every one returns FALSE + error when the step fails; the caller then takes the
 * job down, as the other ranks may wait for this one. */
typedef struct {
  int rank, world; /* this rank, 0..world-1, of world >= 1 */
  /* collective: every rank's block of bytes into all (world x bytes, in rank order) */
  gboolean (*allgather)(const void *mine, void *all, size_t bytes, void *ud, GError **error);
  /* send v, this rank's best so far, to every other rank without waiting */
  gboolean (*min_post)(double v, void *ud, GError **error);
  /* lower *v to the smallest value posted by another rank that has arrived */
  gboolean (*min_poll)(double *v, void *ud, GError **error);
  /* collective, once: take what is still in flight (lowering *v) and complete the posts */
  gboolean (*min_end)(double *v, void *ud, GError **error);
  void *ud;
} RfAdviseComm;

/* Progress of a step: what ("bounds" or "simulated"), done of total, seconds since the step
 * began. Called in the parent after each worker ends. */
typedef void (*RfAdviseProgressFn)(const char *what, int done, int total, double elapsed_s,
                                   void *ud);

typedef struct {
  int jobs;                    /* forked workers at once on this rank, >= 1 */
  gboolean exhaustive;         /* simulate every bounded candidate (no pruning) */
  gboolean per_gpus;           /* prune only against the best of the same GPU count (the best
                                * of every count is then exact); FALSE: against the best of all */
  RfAdviseEvalFn eval;         /* how a candidate is judged; borrowed */
  void *eval_ud;               /* borrowed, seen by eval in the workers */
  const RfAdviseComm *comm;    /* borrowed; NULL: one process */
  RfAdviseProgressFn progress; /* NULL: none */
  void *progress_ud;
} RfAdviseSearch;

/* Bound and simulate the candidates that are not dropped; cands[] gets every outcome and flag
 * (bounded, simulated, pruned; dropped too when the bound step fails). With per_gpus a
 * candidate is pruned only by a prediction of its own GPU count (this rank's). Under a communicator
 * of W ranks, rank R bounds the live candidates j with j % W == R, every rank gets every bound and
 * sorts them alike, rank R simulates the positions p % W == R of that order, prunes against the
 * best prediction it knows (its own and those the others posted so far), and every rank ends
 * with every outcome. order (n ints, the caller's) gets the bounded candidates' indices, best
 * prediction first (then by bound; unsimulated last), their count in *nord. FALSE + one-line
 * error when a worker or a collective step cannot start or fails; cands[] is then partial. */
gboolean rf_advise_search(const RfAdviseSearch *s, RfAdviseCandidate *cands, int n, int *order,
                          int *nord, GError **error);

#endif
