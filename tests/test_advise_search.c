/* The search of `refit advise` (sim/advise/): the worker pool, the branch and bound, and the
 * sharded search, on arithmetic problems whose answer an exhaustive loop gives. */
#include <glib.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "advise_candidates.h"
#include "advise_pool.h"
#include "advise_search.h"
#include "error.h"
#include "memory.h"

/* ---------- the pool ---------- */

typedef struct {
  int item;
  long square;
} Square;

static void square_fn(int item, void *result, void *ud) {
  Square *s = result;
  int die = GPOINTER_TO_INT(ud);
  if (item == die) _exit(3); /* a worker that dies before sending */
  s->item = item;
  s->square = (long)item * item + 7;
}

/* Every spawned item comes back exactly once, with its own result, whatever the worker count. */
static void test_pool_each_once(void) {
  const int n = 23;
  for (int jobs = 1; jobs <= 3; jobs++) {
    RfPool *p = rf_pool_new(jobs, sizeof(Square), square_fn, GINT_TO_POINTER(-1));
    int seen[23] = {0}, next = 0, done = 0;
    while (done < n) {
      while (!rf_pool_full(p) && next < n) {
        GError *e = NULL;
        g_assert_true(rf_pool_spawn(p, next++, &e));
        g_assert_no_error(e);
      }
      g_assert_cmpint(rf_pool_running(p), <=, jobs);
      Square s;
      GError *died = NULL;
      int item = rf_pool_wait(p, &s, &died);
      g_assert_no_error(died);
      g_assert_cmpint(item, >=, 0);
      g_assert_cmpint(item, <, n);
      g_assert_cmpint(s.item, ==, item);
      g_assert_cmpint(s.square, ==, (long)item * item + 7);
      seen[item]++, done++;
    }
    for (int i = 0; i < n; i++)
      g_assert_cmpint(seen[i], ==, 1);
    Square s;
    g_assert_cmpint(rf_pool_wait(p, &s, NULL), ==, -1);
    rf_pool_free(p);
  }
}

/* A worker that dies still returns its item once, its result zeroed, the others unharmed; a
 * full pool refuses another worker. */
static void test_pool_died(void) {
  RfPool *p = rf_pool_new(2, sizeof(Square), square_fn, GINT_TO_POINTER(1));
  GError *e = NULL;
  g_assert_true(rf_pool_spawn(p, 0, &e));
  g_assert_true(rf_pool_spawn(p, 1, &e));
  g_assert_true(rf_pool_full(p));
  g_assert_false(rf_pool_spawn(p, 2, &e));
  g_assert_error(e, RF_ERROR, RF_ERROR_IO);
  g_clear_error(&e);
  int got = 0;
  for (int k = 0; k < 2; k++) {
    Square s;
    GError *died = NULL;
    int item = rf_pool_wait(p, &s, &died);
    if (item == 1) {
      g_assert_error(died, RF_ERROR, RF_ERROR_IO);
      g_assert_nonnull(strstr(died->message, "worker died"));
      g_assert_cmpint(s.square, ==, 0);
      g_clear_error(&died);
    } else {
      g_assert_no_error(died);
      g_assert_cmpint(s.square, ==, 7);
    }
    got |= 1 << item;
  }
  g_assert_cmpint(got, ==, 3);
  rf_pool_free(p);
  rf_pool_free(NULL);
}

/* A full pool freed waits for its workers. */
static void test_pool_free_running(void) {
  RfPool *p = rf_pool_new(3, sizeof(Square), square_fn, GINT_TO_POINTER(-1));
  for (int i = 0; i < 3; i++)
    g_assert_true(rf_pool_spawn(p, i, NULL));
  rf_pool_free(p);
}

/* ---------- an arithmetic problem ---------- */

/* Candidate i predicts pred[i] and is bounded below by bound[i] <= pred[i]; fail[i] makes its
 * bound step fail (the plan cannot be built). Distinct predictions, so one best. */
typedef struct {
  int n;
  double pred[64], bound[64];
  gboolean fail[64];
} Problem;

static void problem_random(Problem *pb, GRand *r, int n) {
  pb->n = n;
  for (int i = 0; i < n; i++) {
    pb->pred[i] = 1.0 + g_rand_double(r) * 9.0 + i * 1e-9;
    /* from a tight bound to a loose one (a tenth of the prediction) */
    pb->bound[i] = pb->pred[i] * g_rand_double_range(r, 0.1, 1.0);
    pb->fail[i] = g_rand_int_range(r, 0, 10) == 0;
  }
}

static void eval_arith(int i, const RfAdviseCandidate *k, gboolean simulate, RfAdviseOutcome *out,
                       void *ud) {
  const Problem *pb = ud;
  g_assert_cmpint(k->ngpus, ==, i); /* the worker judges the candidate it was given */
  memset(out, 0, sizeof *out);
  if (pb->fail[i]) {
    out->code = RF_ERROR_INPUT;
    g_strlcpy(out->error, "no plan", sizeof out->error);
    return;
  }
  out->ok = 1;
  out->bound_s = pb->bound[i];
  if (simulate) out->predicted_s = pb->pred[i];
}

static RfAdviseCandidate *cands_new(const Problem *pb) {
  RfAdviseCandidate *k = g_new0(RfAdviseCandidate, pb->n);
  for (int i = 0; i < pb->n; i++)
    k[i].ngpus = i;
  return k;
}

/* The best of an exhaustive loop over the candidates that can be planned; -1 when none. */
static int exhaustive_best(const Problem *pb) {
  int best = -1;
  for (int i = 0; i < pb->n; i++)
    if (!pb->fail[i] && (best < 0 || pb->pred[i] < pb->pred[best])) best = i;
  return best;
}

/* One search; returns the candidates (caller frees), their order and count. */
static RfAdviseCandidate *search(const Problem *pb, int jobs, gboolean exhaustive,
                                 const RfAdviseComm *comm, int *order, int *nord) {
  RfAdviseCandidate *k = cands_new(pb);
  RfAdviseSearch s = {.jobs = jobs,
                      .exhaustive = exhaustive,
                      .eval = eval_arith,
                      .eval_ud = (void *)pb,
                      .comm = comm};
  GError *e = NULL;
  g_assert_true(rf_advise_search(&s, k, pb->n, order, nord, &e));
  g_assert_no_error(e);
  return k;
}

/* What every search answer holds: order has every plannable candidate once, best prediction
 * first; nothing is pruned whose bound is at most the best; a pruned candidate is not
 * simulated; every plannable one is simulated or pruned; the failed ones are dropped. */
static void check_answer(const Problem *pb, const RfAdviseCandidate *k, const int *order, int nord,
                         gboolean exhaustive) {
  int best = exhaustive_best(pb), nplan = 0;
  for (int i = 0; i < pb->n; i++)
    nplan += !pb->fail[i];
  g_assert_cmpint(nord, ==, nplan);
  g_assert_cmpint(order[0], ==, best);
  g_assert_cmpfloat(k[best].sim.predicted_s, ==, pb->pred[best]);
  int *seen = g_new0(int, pb->n);
  for (int j = 0; j < nord; j++) {
    const RfAdviseCandidate *c = &k[order[j]];
    seen[order[j]]++;
    g_assert_true(c->bounded && c->bound.ok && !c->dropped);
    g_assert_true(c->simulated != c->pruned);
    if (c->pruned) g_assert_cmpfloat(c->bound.bound_s, >, pb->pred[best]);
    if (exhaustive) g_assert_true(c->simulated);
    if (c->simulated) g_assert_cmpfloat(c->sim.predicted_s, ==, pb->pred[order[j]]);
    if (j > 0 && c->simulated)
      g_assert_cmpfloat(k[order[j - 1]].sim.predicted_s, <, c->sim.predicted_s);
  }
  for (int i = 0; i < pb->n; i++) {
    g_assert_cmpint(seen[i], ==, !pb->fail[i]);
    if (pb->fail[i]) g_assert_true(k[i].dropped && !k[i].simulated);
  }
  g_free(seen);
}

/* The branch and bound finds the exhaustive loop's best, prunes only what its bound rules out,
 * and agrees with its own --exhaustive, on random problems and worker counts. */
static void test_bnb_matches_exhaustive(void) {
  GRand *r = g_rand_new_with_seed(20261202);
  for (int t = 0; t < 16; t++) {
    Problem pb;
    problem_random(&pb, r, g_rand_int_range(r, 2, 14));
    if (exhaustive_best(&pb) < 0) pb.fail[0] = FALSE;
    int jobs = 1 + t % 3, order[64], nord = 0, order_all[64], nall = 0;
    RfAdviseCandidate *k = search(&pb, jobs, FALSE, NULL, order, &nord);
    check_answer(&pb, k, order, nord, FALSE);
    RfAdviseCandidate *all = search(&pb, jobs, TRUE, NULL, order_all, &nall);
    check_answer(&pb, all, order_all, nall, TRUE);
    g_assert_cmpint(order[0], ==, order_all[0]);
    g_free(k);
    g_free(all);
  }
  g_rand_free(r);
}

/* One worker simulates in bound order: after the best is found, everything whose bound is
 * above it is pruned, so exactly the candidates with bound <= best are simulated. */
static void test_bnb_prunes_exactly(void) {
  Problem pb = {
      .n = 6, .pred = {5.0, 2.0, 9.0, 3.0, 7.0, 4.0}, .bound = {4.5, 1.0, 8.0, 2.5, 1.5, 2.1}};
  int order[6], nord = 0;
  RfAdviseCandidate *k = search(&pb, 1, FALSE, NULL, order, &nord);
  check_answer(&pb, k, order, nord, FALSE);
  /* bounds in order: 1 (1.0), 4 (1.5), 5 (2.1), 3 (2.5), 0 (4.5), 2 (8.0); best 2.0 after
   * the first simulation, then 4 (1.5 <= 2.0) is simulated and 5 (2.1 > 2.0) pruned with all
   * after it */
  const gboolean sim[6] = {FALSE, TRUE, FALSE, FALSE, TRUE, FALSE};
  for (int i = 0; i < 6; i++) {
    g_assert_cmpint(k[i].simulated, ==, sim[i]);
    g_assert_cmpint(k[i].pruned, ==, !sim[i]);
  }
  const int ranked[6] = {1, 4, 5, 3, 0, 2}; /* simulated by prediction, then by bound */
  for (int j = 0; j < 6; j++)
    g_assert_cmpint(order[j], ==, ranked[j]);
  g_free(k);
}

/* A dropped candidate goes to no worker and stays out of the order. */
static void test_dropped_skipped(void) {
  Problem pb = {.n = 4, .pred = {3, 1, 2, 4}, .bound = {3, 1, 2, 4}};
  RfAdviseCandidate *k = cands_new(&pb);
  k[1].dropped = TRUE;
  RfAdviseSearch s = {.jobs = 2, .eval = eval_arith, .eval_ud = &pb};
  int order[4], nord = 0;
  g_assert_true(rf_advise_search(&s, k, 4, order, &nord, NULL));
  g_assert_cmpint(nord, ==, 3);
  g_assert_false(k[1].bounded || k[1].simulated || k[1].pruned);
  g_assert_cmpint(order[0], ==, 2);
  g_free(k);
}

/* Candidate i (its index in par.dp) of GPU count group[i]: eval_arith's numbers. */
static void eval_grouped(int i, const RfAdviseCandidate *k, gboolean simulate, RfAdviseOutcome *out,
                         void *ud) {
  const Problem *pb = ud;
  g_assert_cmpint(k->par.dp, ==, i);
  memset(out, 0, sizeof *out);
  if (pb->fail[i]) {
    out->code = RF_ERROR_INPUT;
    g_strlcpy(out->error, "no plan", sizeof out->error);
    return;
  }
  out->ok = 1;
  out->bound_s = pb->bound[i];
  if (simulate) out->predicted_s = pb->pred[i];
}

/* per_gpus: every GPU count gets its own exact best (the exhaustive loop's within that count),
 * and a candidate is pruned only by a prediction of its own count; without it, counts whose
 * bounds exceed the overall best are pruned whole. */
static void test_bnb_per_gpus(void) {
  GRand *r = g_rand_new_with_seed(7);
  int pruned_whole = 0;
  for (int t = 0; t < 5; t++) {
    Problem pb;
    problem_random(&pb, r, g_rand_int_range(r, 6, 13));
    int group[64];
    for (int i = 0; i < pb.n; i++)
      group[i] = 8 << (i % 3);
    for (int per = 0; per < 2; per++) {
      RfAdviseCandidate *k = g_new0(RfAdviseCandidate, pb.n);
      for (int i = 0; i < pb.n; i++)
        k[i].ngpus = group[i], k[i].par.dp = i;
      RfAdviseSearch s = {.jobs = 1 + t % 3, .per_gpus = per, .eval = eval_grouped, .eval_ud = &pb};
      int order[64], nord = 0;
      g_assert_true(rf_advise_search(&s, k, pb.n, order, &nord, NULL));
      for (int g = 8; g <= 32; g *= 2) {
        double want = INFINITY, got = INFINITY;
        for (int i = 0; i < pb.n; i++) {
          if (group[i] != g || pb.fail[i]) continue;
          want = MIN(want, pb.pred[i]);
          if (k[i].simulated && k[i].sim.ok) got = MIN(got, k[i].sim.predicted_s);
        }
        if (per) {
          g_assert_cmpfloat(got, ==, want);
          for (int i = 0; i < pb.n; i++)
            if (group[i] == g && k[i].pruned) g_assert_cmpfloat(k[i].bound.bound_s, >, want);
        } else {
          pruned_whole += isfinite(want) && !isfinite(got);
        }
      }
      g_free(k);
    }
  }
  g_assert_cmpint(pruned_whole, >, 0); /* the plain search would have lost some counts' best */
  g_rand_free(r);
}

/* ---------- shards: W ranks as threads, the collective steps in memory ---------- */

typedef struct {
  int world;
  GMutex mu;
  GCond cv;
  int arrived, generation;
  char *buf; /* all-gather area: world x the largest block */
  size_t block_max;
  double posted[3]; /* each rank's best so far */
} Shards;

typedef struct {
  Shards *sh;
  int rank;
  const Problem *pb;
  RfAdviseCandidate *k;
  int order[64], nord;
  gboolean ok;
} Shard;

static void barrier(Shards *sh) {
  g_mutex_lock(&sh->mu);
  int gen = sh->generation;
  if (++sh->arrived == sh->world) {
    sh->arrived = 0;
    sh->generation++;
    g_cond_broadcast(&sh->cv);
  } else {
    while (gen == sh->generation)
      g_cond_wait(&sh->cv, &sh->mu);
  }
  g_mutex_unlock(&sh->mu);
}

static gboolean sh_allgather(const void *mine, void *all, size_t bytes, void *ud, GError **error) {
  (void)error;
  Shard *me = ud;
  Shards *sh = me->sh;
  g_assert_cmpuint(bytes, <=, sh->block_max);
  memcpy(sh->buf + (size_t)me->rank * bytes, mine, bytes);
  barrier(sh); /* every block written */
  memcpy(all, sh->buf, bytes * (size_t)sh->world);
  barrier(sh); /* every block read: the area may be used again */
  return TRUE;
}

static gboolean sh_min_post(double v, void *ud, GError **error) {
  (void)error;
  Shard *me = ud;
  g_mutex_lock(&me->sh->mu);
  me->sh->posted[me->rank] = MIN(me->sh->posted[me->rank], v);
  g_mutex_unlock(&me->sh->mu);
  return TRUE;
}

static gboolean sh_min_poll(double *v, void *ud, GError **error) {
  (void)error;
  Shard *me = ud;
  g_mutex_lock(&me->sh->mu);
  for (int r = 0; r < me->sh->world; r++)
    if (r != me->rank) *v = MIN(*v, me->sh->posted[r]);
  g_mutex_unlock(&me->sh->mu);
  return TRUE;
}

static gboolean sh_min_end(double *v, void *ud, GError **error) {
  Shard *me = ud;
  barrier(me->sh);
  return sh_min_poll(v, ud, error);
}

static gpointer shard_main(gpointer data) {
  Shard *me = data;
  RfAdviseComm comm = {me->rank, me->sh->world, sh_allgather, sh_min_post, sh_min_poll, sh_min_end,
                       me};
  me->k = cands_new(me->pb);
  RfAdviseSearch s = {
      .jobs = 1 + me->rank % 2, .eval = eval_arith, .eval_ud = (void *)me->pb, .comm = &comm};
  me->ok = rf_advise_search(&s, me->k, me->pb->n, me->order, &me->nord, NULL);
  return NULL;
}

/* Two or three shards end, on every rank, with the one-process answer: the same best, every
 * plannable candidate simulated or pruned once, the same outcomes on every rank. */
static void test_shards(gconstpointer data) {
  int W = GPOINTER_TO_INT(data);
  GRand *r = g_rand_new_with_seed(7 + W);
  for (int t = 0; t < 6; t++) {
    Problem pb;
    problem_random(&pb, r, g_rand_int_range(r, 1, 20));
    if (exhaustive_best(&pb) < 0) pb.fail[0] = FALSE;
    int order1[64], nord1 = 0;
    RfAdviseCandidate *one = search(&pb, 2, FALSE, NULL, order1, &nord1);
    Shards sh = {.world = W, .block_max = 64 * (sizeof(RfAdviseOutcome) + 16)};
    sh.buf = g_malloc0(sh.block_max * W);
    for (int i = 0; i < W; i++)
      sh.posted[i] = INFINITY;
    g_mutex_init(&sh.mu);
    g_cond_init(&sh.cv);
    Shard s[3];
    GThread *th[3];
    for (int i = 0; i < W; i++) {
      s[i] = (Shard){.sh = &sh, .rank = i, .pb = &pb};
      th[i] = g_thread_new("shard", shard_main, &s[i]);
    }
    for (int i = 0; i < W; i++)
      g_thread_join(th[i]);
    for (int i = 0; i < W; i++) {
      g_assert_true(s[i].ok);
      check_answer(&pb, s[i].k, s[i].order, s[i].nord, FALSE);
      g_assert_cmpint(s[i].order[0], ==, order1[0]);
      for (int j = 0; j < pb.n; j++) {
        const RfAdviseCandidate *a = &s[i].k[j], *b = &s[0].k[j];
        g_assert_cmpint(a->simulated, ==, b->simulated);
        g_assert_cmpint(a->pruned, ==, b->pruned);
        g_assert_cmpfloat(a->sim.predicted_s, ==, b->sim.predicted_s);
        g_assert_cmpfloat(a->bound.bound_s, ==, one[j].bound.bound_s);
      }
    }
    for (int i = 0; i < W; i++) /* after the loop above: every rank is compared with rank 0's */
      g_free(s[i].k);
    g_mutex_clear(&sh.mu);
    g_cond_clear(&sh.cv);
    g_free(sh.buf);
    g_free(one);
  }
  g_rand_free(r);
}

/* ---------- the candidates of a model ---------- */

/* gpus x layouts x placements x strategies, each layout parsed: TP x DP = GPUs, EP given
 * exactly where the string names it (and then EP = GPUs). */
static void test_candidates_space(void) {
  GError *e = NULL;
  RfModel *m = rf_model_load("tiny-moe", &e);
  g_assert_no_error(e);
  const int gpus[] = {2, 4, 8};
  const RfPlacementKind place[] = {RF_PLACE_SPLIT, RF_PLACE_INTERLEAVED};
  const RfStrategy st[] = {RF_STRATEGY_P2P, RF_STRATEGY_M2N, RF_STRATEGY_HYBRID};
  RfAdviseSpace sp = {.gpus = gpus,
                      .ngpus = 3,
                      .with_ep = TRUE,
                      .without_ep = TRUE,
                      .place = place,
                      .nplace = 2,
                      .strategy = st,
                      .nstrategy = 3};
  GArray *a = g_array_new(FALSE, TRUE, sizeof(RfAdviseCandidate));
  g_assert_true(rf_advise_candidates(m, &sp, a, &e));
  g_assert_no_error(e);
  int want = 0;
  for (int g = 0; g < 3; g++) {
    GPtrArray *lay = rf_advise_layouts(m, gpus[g], NULL, 0, TRUE, TRUE);
    want += (int)lay->len * 2 * 3;
    g_ptr_array_free(lay, TRUE);
  }
  g_assert_cmpint(a->len, ==, want);
  for (guint i = 0; i < a->len; i++) {
    const RfAdviseCandidate *k = &g_array_index(a, RfAdviseCandidate, i);
    g_assert_cmpint(k->par.tp * k->par.dp, ==, k->ngpus);
    g_assert_cmpint(k->par.ep_given, ==, strstr(k->layout, "EP") != NULL);
    if (k->par.ep_given) g_assert_cmpint(k->par.ep, ==, k->ngpus);
    g_assert_true(k->place == place[(i / 3) % 2] && k->strategy == st[i % 3]);
  }
  rf_advise_candidates_clear((RfAdviseCandidate *)a->data, (int)a->len);
  g_array_free(a, TRUE);
  rf_model_free(m);
}

/* The serving rules of the space: without cross_domain_tp no TP group is larger than a
 * domain; with it the larger ones come, flagged with the domains they span; SGLang adds attention
 * DP and EP layouts (EP and ADP of 1 or TP), leaving vLLM's look-alikes to vLLM. */
static void test_candidates_serving(void) {
  GError *e = NULL;
  RfModel *m = rf_model_load("tiny-moe", &e);
  g_assert_no_error(e);
  const int gpus[] = {2, 4, 8};
  const RfPlacementKind place[] = {RF_PLACE_SPLIT};
  const RfStrategy st[] = {RF_STRATEGY_M2N};
  const RfInferFramework both[] = {RF_INFER_VLLM, RF_INFER_SGLANG}, sgl[] = {RF_INFER_SGLANG};
  for (int cross = 0; cross < 2; cross++)
    for (int f = 0; f < 2; f++) {
      RfAdviseSpace sp = {.gpus = gpus,
                          .ngpus = 3,
                          .with_ep = TRUE,
                          .without_ep = TRUE,
                          .place = place,
                          .nplace = 1,
                          .strategy = st,
                          .nstrategy = 1,
                          .fw = f ? sgl : both,
                          .nfw = f ? 1 : 2,
                          .domain_gpus = 2,
                          .cross_domain_tp = cross};
      GArray *a = g_array_new(FALSE, TRUE, sizeof(RfAdviseCandidate));
      g_assert_true(rf_advise_candidates(m, &sp, a, &e));
      g_assert_no_error(e);
      int spans = 0, sglang = 0, plain_sglang = 0;
      for (guint i = 0; i < a->len; i++) {
        const RfAdviseCandidate *k = &g_array_index(a, RfAdviseCandidate, i);
        g_assert_cmpint(k->tp_domains, ==, k->par.tp <= 2 ? 1 : k->par.tp / 2);
        g_assert_true(cross || k->par.tp <= 2);
        spans += k->tp_domains > 1;
        g_assert_true(k->fw == RF_INFER_VLLM || k->fw == RF_INFER_SGLANG);
        g_assert_true(!f || k->fw == RF_INFER_SGLANG);
        if (k->fw != RF_INFER_SGLANG) continue;
        sglang++;
        g_assert_true(k->par.ep == 1 || k->par.ep == k->par.tp);
        g_assert_true(k->par.adp == 1 || k->par.adp == k->par.tp);
        gboolean plain = k->par.ep == 1 && k->par.adp == 1;
        plain_sglang += plain || (k->par.adp == 1 && k->par.dp == 1);
        GError *ce = NULL;
        g_assert_true(rf_advise_layout_check_fw(m, k->fw, &k->par, k->ngpus, &ce) == !ce);
        g_clear_error(&ce);
      }
      g_assert_cmpint(spans > 0, ==, cross);
      g_assert_cmpint(sglang, >, 0);
      g_assert_cmpint(plain_sglang > 0, ==, f); /* vLLM's look-alikes only without vLLM */
      rf_advise_candidates_clear((RfAdviseCandidate *)a->data, (int)a->len);
      g_array_free(a, TRUE);
    }
  rf_model_free(m);
}

/* The KV reserve refuses a layout whose weights fit the memory but not memory - reserve, and
 * says so; the same layout passes with no reserve. */
static void test_unfit_kv_reserve(void) {
  GError *e = NULL;
  RfModel *m = rf_model_load("tiny-moe", &e);
  g_assert_no_error(e);
  RfCalibration cal;
  rf_calibration_defaults(&cal);
  RfAdviseSetup su = {
      .model = "tiny-moe", .train = "TP2", .topology = "dgx-h100", .arch = m, .cal = &cal};
  RfAdviseCandidate k = {.ngpus = 1, .layout = "TP1xDP1", .fw = RF_INFER_VLLM, .tp_domains = 1};
  g_assert_true(rf_parallel_parse(k.layout, &k.par, NULL));
  /* the weights per GPU: everything fits a huge memory with no reserve */
  su.mem_bytes = 1e15;
  g_assert_cmpint(rf_advise_drop_unfit(&su, &k, 1), ==, 0);
  RfTopology *t = rf_topology_load("dgx-h100", &e);
  RfProblem *pb = rf_problem_new_preset(rf_model_load("tiny-moe", NULL), "TP2", "TP1", t, &e);
  g_assert_no_error(e);
  RfMemory mem;
  rf_memory_weights(pb, &mem);
  rf_problem_free(pb);
  su.mem_bytes = (double)mem.weights_bytes / 0.95; /* fits, but not 90% of it */
  su.reserve_bytes = 0;
  g_assert_cmpint(rf_advise_drop_unfit(&su, &k, 1), ==, 0);
  su.reserve_bytes = 0.10 * su.mem_bytes;
  g_assert_cmpint(rf_advise_drop_unfit(&su, &k, 1), ==, 1);
  g_assert_true(k.dropped);
  g_assert_nonnull(strstr(k.bound.error, "KV reserve"));
  rf_calibration_clear(&cal);
  rf_model_free(m);
}

/* One candidate's memory through both steps (rf_advise_evaluate): the bound step's estimate by
 * the plan's stages (the schedule above setup->max_segments) does not drop a candidate refit's
 * executor will simulate, whose simulation counts the schedule it ran, as refit run's schedule
 * counts (rf_memory_of_run without a segment limit), and drops it there when that does not fit;
 * the flow model, which builds no schedule, keeps the estimate and drops the candidate at once. */
static void test_memory_by_schedule(void) {
  GError *e = NULL;
  RfModel *m = rf_model_load("tiny-moe", &e);
  g_assert_no_error(e);
  RfCalibration cal;
  rf_calibration_defaults(&cal);
  cal.software = RF_SOFTWARE_REFIT;
  cal.variant = RF_VARIANT_EXECUTOR;
  cal.exec_staging_bytes = 4096; /* small groups: several segments per message */
  RfAdviseSetup su = {.model = "tiny-moe",
                      .train = "TP2xPP2",
                      .topology = "dgx-h100",
                      .arch = m,
                      .cal = &cal,
                      .max_segments = 1};
  rf_advise_bound_rates(&cal, &su.rates);
  RfAdviseCandidate k = {.ngpus = 4, .layout = "TP2xDP2", .fw = RF_INFER_VLLM, .tp_domains = 1};
  g_assert_true(rf_parallel_parse(k.layout, &k.par, NULL));
  gboolean differ = FALSE;
  for (int st = 0; st < RF_STRATEGY_COUNT; st++) {
    k.strategy = (RfStrategy)st;
    rf_advise_evaluate(0, &k, FALSE, &k.bound, &su);
    g_assert_cmpint(k.bound.ok, ==, 1);
    g_assert_cmpint(k.bound.memory_from, ==, RF_MEMORY_FROM_STAGES);
    rf_advise_evaluate(0, &k, TRUE, &k.sim, &su);
    g_assert_cmpint(k.sim.ok, ==, 1);
    g_assert_cmpint(k.sim.memory_from, ==, RF_MEMORY_FROM_SCHEDULE);
    /* the schedule's count, as rf_memory_of_run gives it without a segment limit */
    RfTopology *t = rf_topology_load("dgx-h100", &e);
    RfProblem *pb =
        rf_problem_new_preset(rf_model_load("tiny-moe", NULL), "TP2xPP2", "TP2xDP2", t, &e);
    g_assert_no_error(e);
    RfPlan *plan = rf_plan_build(pb, k.strategy, NULL, &e);
    g_assert_no_error(e);
    RfMemoryRun mr;
    RfMemory exact;
    rf_calibration_memory_run_plan(&cal, plan, 1, &mr, NULL);
    mr.max_segments = 0;
    g_assert_true(rf_memory_of_run(plan, &mr, &exact, &e));
    g_assert_cmpint(exact.from, ==, RF_MEMORY_FROM_SCHEDULE);
    g_assert_cmpuint(k.sim.peak_bytes, ==, exact.peak_bytes);
    g_assert_cmpuint(k.sim.extra_bytes, ==, exact.extra_bytes);
    g_assert_cmpuint(k.sim.weights_bytes, ==, k.bound.weights_bytes);
    g_test_message("%s: by stages %" G_GUINT64_FORMAT " B, by the schedule %" G_GUINT64_FORMAT " B",
                   rf_strategy_name(k.strategy), k.bound.peak_bytes, k.sim.peak_bytes);
    if (k.bound.peak_bytes > k.sim.peak_bytes) {
      differ = TRUE;
      /* a GPU between the two: kept by the bound step, fits in the simulation */
      su.mem_bytes = (double)k.sim.peak_bytes;
      rf_advise_evaluate(0, &k, FALSE, &k.bound, &su);
      g_assert_cmpint(k.bound.ok, ==, 1);
      rf_advise_evaluate(0, &k, TRUE, &k.sim, &su);
      g_assert_cmpint(k.sim.ok, ==, 1);
      /* one byte less: the simulation drops it */
      su.mem_bytes = (double)k.sim.peak_bytes - 1;
      rf_advise_evaluate(0, &k, TRUE, &k.sim, &su);
      g_assert_cmpint(k.sim.ok, ==, 0);
      g_assert_nonnull(strstr(k.sim.error, "exceed"));
      /* the flow model builds no schedule: the estimate drops it in the bound step */
      cal.variant = RF_VARIANT_DEFAULT;
      rf_advise_evaluate(0, &k, FALSE, &k.bound, &su);
      g_assert_cmpint(k.bound.ok, ==, 0);
      g_assert_nonnull(strstr(k.bound.error, "by the plan's stages"));
      cal.variant = RF_VARIANT_EXECUTOR;
      su.mem_bytes = 0;
    }
    rf_plan_free(plan);
    rf_problem_free(pb);
  }
  g_assert_true(differ); /* at least one strategy shows the estimate above the schedule */
  rf_calibration_clear(&cal);
  rf_model_free(m);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/advise_search/pool/each_once", test_pool_each_once);
  g_test_add_func("/advise_search/pool/died", test_pool_died);
  g_test_add_func("/advise_search/pool/free_running", test_pool_free_running);
  g_test_add_func("/advise_search/bnb/matches_exhaustive", test_bnb_matches_exhaustive);
  g_test_add_func("/advise_search/bnb/prunes_exactly", test_bnb_prunes_exactly);
  g_test_add_func("/advise_search/bnb/dropped_skipped", test_dropped_skipped);
  g_test_add_data_func("/advise_search/shards/2", GINT_TO_POINTER(2), test_shards);
  g_test_add_data_func("/advise_search/shards/3", GINT_TO_POINTER(3), test_shards);
  g_test_add_func("/advise_search/candidates/space", test_candidates_space);
  g_test_add_func("/advise_search/candidates/serving", test_candidates_serving);
  g_test_add_func("/advise_search/unfit/kv_reserve", test_unfit_kv_reserve);
  g_test_add_func("/advise_search/bnb/per_gpus", test_bnb_per_gpus);
  g_test_add_func("/advise_search/memory/by_schedule", test_memory_by_schedule);
  return g_test_run();
}
