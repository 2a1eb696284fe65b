/* `refit advise`: search the inference layouts, placements and strategies for the fastest refit.
 *
 * 1. Enumerate candidates: inference GPU counts x vLLM layouts (TP x DP, with and without EP)
 *    x placements x strategies; a layout the model cannot take (heads, experts) or whose weights
 *    do not fit the memory left after the KV reserve is dropped with its reason.
 * 2. Bound every candidate (forked workers): build the plan, take its fabric-aware lower bound
 *    at the calibration's link rates (rf_plan_fabric_bound) and its memory.
 * 3. Simulate in order of increasing bound (forked workers, up to --jobs): a candidate whose bound
 *    exceeds the best prediction so far is never simulated.
 * 4. Rank, print (table, --json, --csv), plot (--plot, scripts/advise_plot.py).
 * Under mpirun / srun (or --mpi) steps 2 and 3 are spread over the ranks (search()), each rank
 * forking its own workers, and rank 0 prints the one answer. */
#include <errno.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "advise.h"
#include "args.h"
#include "commands.h"
#include "error.h"
#include "memory.h"
#include "predict.h"
#include "real.h"
#include "report.h"
#include "sim.h"

/* What a worker sends back through its pipe (fixed size, plain data). */
typedef struct {
  int ok;
  int code; /* RfError code when !ok */
  double bound_s, nic_bound_s, predicted_s;
  uint64_t weights_bytes, extra_bytes, peak_bytes, network_bytes;
  char bound_what[40];
  char bound_by[120];
  char error[240];
} Outcome;

typedef struct {
  int ngpus;
  char *layout; /* vLLM layout string */
  RfPlacementKind place;
  RfStrategy strategy;
  Outcome bound; /* step 2 */
  Outcome sim;   /* step 3 */
  gboolean bounded, simulated, pruned, dropped;
} Cand;

typedef struct {
  char *model, *train, *topology, *gpus, *tps, *eps, *strategy, *placements, *calib;
  char *kv_reserve, *csv, *plot, *software, *variant;
  int jobs;
  gboolean json, quiet, exhaustive, mpi;
} Opts;

typedef struct {
  const Opts *o;
  const RfModel *model; /* for the cheap layout check */
  RfCalibration cal;
  char *cal_source;
  double mem_bytes;     /* GPU memory (0: unknown) */
  double reserve_bytes; /* KV-cache reserve per GPU */
  int rank, world;      /* MPI (0 / 1 without) */
  RfBoundRates rates;   /* the calibration's link rates, for the bound */
} Ctx;

/* ---------- parsing the constraints ---------- */

/* "N", "A-B" (A, 2A, 4A, ... up to B, and B) or a comma list. */
static GArray *parse_counts(const char *s, const char *flag, GError **error) {
  GArray *a = g_array_new(FALSE, FALSE, sizeof(int));
  char **tok = g_strsplit(s, ",", -1);
  for (int i = 0; tok[i]; i++) {
    char *end = NULL;
    long lo = strtol(tok[i], &end, 10), hi = lo;
    if (end && *end == '-') hi = strtol(end + 1, &end, 10);
    if (!*tok[i] || !end || *end || lo < 1 || hi < lo || hi >= RF_MAX_RANKS) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                  "%s wants N, A-B or a comma list of counts in 1..%d, got '%s'", flag,
                  RF_MAX_RANKS - 1, tok[i]);
      g_strfreev(tok);
      g_array_free(a, TRUE);
      return NULL;
    }
    for (long v = lo; v <= hi; v *= 2) {
      int x = (int)v;
      g_array_append_val(a, x);
      if (v * 2 > hi && v != hi) {
        x = (int)hi;
        g_array_append_val(a, x);
      }
    }
  }
  g_strfreev(tok);
  return a;
}

/* "GiB" or a fraction of the GPU memory ("0.1" or "10%"). */
static gboolean parse_reserve(const char *s, double mem_bytes, double *out, GError **error) {
  char *end = NULL;
  double v = g_ascii_strtod(s, &end);
  gboolean pct = end && !strcmp(end, "%");
  gboolean frac = pct || (end && !*end && v < 1.0);
  if (!end || end == s || (*end && !pct) || !isfinite(v) || v < 0) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "--kv-reserve wants GiB (e.g. 20) or a fraction of GPU memory (0.3 or 30%%), got "
                "'%s'",
                s);
    return FALSE;
  }
  if (frac) {
    double f = pct ? v / 100.0 : v;
    if (mem_bytes <= 0) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                  "--kv-reserve %s is a fraction, but the topology gives no [gpu] memory_GB", s);
      return FALSE;
    }
    if (f >= 1.0) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                  "--kv-reserve %s leaves no memory for the weights", s);
      return FALSE;
    }
    *out = f * mem_bytes;
  } else {
    *out = v * (double)(1ull << 30);
    if (mem_bytes > 0 && *out >= mem_bytes) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                  "--kv-reserve %s GiB is not below the GPU memory (%.0f GB)", s, mem_bytes / 1e9);
      return FALSE;
    }
  }
  return TRUE;
}

/* ---------- one candidate, in a worker ---------- */

static void outcome_error(Outcome *o, const GError *e) {
  o->ok = 0;
  o->code = e ? e->code : RF_ERROR_INPUT;
  g_strlcpy(o->error, e ? e->message : "failed", sizeof o->error);
}

static RfProblem *cand_problem(const Ctx *c, const Cand *k, GError **error) {
  RfModel *m = rf_model_load(c->o->model, error);
  if (!m) return NULL;
  RfTopology *t = rf_topology_load(c->o->topology, error);
  if (!t) {
    rf_model_free(m);
    return NULL;
  }
  RfProblem *pb = rf_problem_new_preset(m, c->o->train, k->layout, t, error);
  if (pb && k->place == RF_PLACE_INTERLEAVED) rf_problem_interleave(pb);
  return pb;
}

/* simulate: FALSE = bound only. */
static void run_candidate(const Ctx *c, const Cand *k, gboolean simulate, Outcome *out) {
  memset(out, 0, sizeof *out);
  GError *e = NULL;
  RfPlan *plan = NULL;
  RfExecutor *ex = NULL;
  RfProblem *pb = cand_problem(c, k, &e);
  if (!pb) goto out;
  RfPlanOptions po = {0};
  plan = rf_plan_build(pb, k->strategy, &po, &e);
  if (!plan) goto out;
  const char *what = "NIC";
  out->nic_bound_s = plan->stats.lower_bound_s;
  out->bound_s = rf_plan_fabric_bound(plan, &c->rates, !c->cal.hybrid_overlap, &what);
  g_strlcpy(out->bound_what, what, sizeof out->bound_what);
  out->network_bytes = plan->stats.network_bytes;
  RfMemory mem;
  rf_memory_of_plan(plan, &mem);
  out->weights_bytes = mem.weights_bytes;
  out->extra_bytes = mem.extra_bytes;
  out->peak_bytes = mem.peak_bytes;
  if (c->mem_bytes > 0 && (double)mem.peak_bytes > c->mem_bytes) {
    g_set_error(&e, RF_ERROR, RF_ERROR_INPUT,
                "weights %.1f GB + refit extra %.1f GB exceed %.0f GB per GPU",
                mem.weights_bytes / 1e9, mem.extra_bytes / 1e9, c->mem_bytes / 1e9);
    goto out;
  }
  if (simulate) {
    RfSimOptions so = {0};
    so.calib = c->cal;
    ex = rf_sim_executor_new(&so);
    RfResult res = {0};
    if (!ex->prepare(ex, pb, &e) || !ex->run(ex, plan, &res, &e)) goto out;
    out->predicted_s = res.total_s;
    g_strlcpy(out->bound_by, res.bound_by ? res.bound_by : "-", sizeof out->bound_by);
    rf_result_clear(&res);
  }
  out->ok = 1;
out:
  if (e) outcome_error(out, e);
  g_clear_error(&e);
  if (ex) ex->destroy(ex);
  rf_plan_free(plan);
  rf_problem_free(pb);
}

/* ---------- forked workers ---------- */

typedef struct {
  pid_t pid;
  int fd;
  int cand;
} Worker;

static gboolean spawn(const Ctx *c, Cand *cands, int i, gboolean simulate, Worker *w,
                      GError **error) {
  int p[2];
  if (pipe(p) != 0) {
    g_set_error(error, RF_ERROR, RF_ERROR_IO, "pipe: %s", g_strerror(errno));
    return FALSE;
  }
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    g_set_error(error, RF_ERROR, RF_ERROR_IO, "fork: %s", g_strerror(errno));
    close(p[0]);
    close(p[1]);
    return FALSE;
  }
  if (pid == 0) {
    close(p[0]);
    Outcome o;
    run_candidate(c, &cands[i], simulate, &o);
    ssize_t n = write(p[1], &o, sizeof o);
    _exit(n == (ssize_t)sizeof o ? 0 : 1);
  }
  close(p[1]);
  w->pid = pid;
  w->fd = p[0];
  w->cand = i;
  return TRUE;
}

/* Wait for any worker; its outcome goes to its candidate. Returns the slot that finished. */
static int reap(Worker *w, int nw, Cand *cands, gboolean simulate) {
  int status = 0;
  pid_t pid = waitpid(-1, &status, 0);
  for (int j = 0; j < nw; j++) {
    if (w[j].pid != pid) continue;
    Outcome o;
    memset(&o, 0, sizeof o);
    ssize_t n = read(w[j].fd, &o, sizeof o);
    close(w[j].fd);
    if (n != (ssize_t)sizeof o) {
      o.ok = 0;
      o.code = RF_ERROR_IO;
      g_snprintf(o.error, sizeof o.error, "worker died (status %d)", status);
    }
    Cand *k = &cands[w[j].cand];
    if (simulate) {
      k->sim = o;
      k->simulated = TRUE;
    } else {
      k->bound = o;
      k->bounded = TRUE;
    }
    return j;
  }
  return -1;
}

/* At most one line a second (and the last one): done/total and an ETA from the mean so far. */
static void progress(const Ctx *c, const char *what, int done, int total, gint64 t0) {
  static gint64 last;
  if (c->o->quiet || c->o->json || c->rank) return;
  gint64 now = g_get_monotonic_time();
  if (done < total && now - last < G_USEC_PER_SEC) return;
  last = now;
  double el = (now - t0) / 1e6;
  double eta = done > 0 ? el / done * (total - done) : 0;
  gboolean tty = isatty(2);
  g_printerr("%s# advise: %s %d/%d, %.0f s, ETA %.0f s%s", tty ? "\r" : "", what, done, total, el,
             eta, tty && done < total ? "" : "\n");
}

static int by_bound(const void *a, const void *b, void *ud) {
  const Cand *c = ud;
  const Cand *x = &c[*(const int *)a], *y = &c[*(const int *)b];
  return x->bound.bound_s < y->bound.bound_s ? -1 : x->bound.bound_s > y->bound.bound_s;
}

static int by_prediction(const void *a, const void *b, void *ud) {
  const Cand *c = ud;
  const Cand *x = &c[*(const int *)a], *y = &c[*(const int *)b];
  double px = x->simulated && x->sim.ok ? x->sim.predicted_s : INFINITY;
  double py = y->simulated && y->sim.ok ? y->sim.predicted_s : INFINITY;
  if (px != py) return px < py ? -1 : 1;
  return x->bound.bound_s < y->bound.bound_s ? -1 : x->bound.bound_s > y->bound.bound_s;
}

/* Under MPI, every rank gets every rank's blocks: block k of rank r is item r + k x world. */
static gboolean share(const void *mine, void *all, size_t block, int nblocks, GError **error) {
  return rf_real_world_allgather(mine, all, block * (size_t)nblocks, error);
}

/* Step 2 and 3. Fills cands; the indices of the bounded ones, by bound, in order. Under MPI,
 * rank R of W takes candidates i with i % W == R for the bounds (then every rank gets every
 * bound, and all sort them alike), and positions p % W == R of that order for the simulations;
 * each rank prunes against the best prediction it knows (its own and those the others have sent
 * so far), and every rank ends with every outcome. */
static gboolean search(const Ctx *c, Cand *cands, int n, int *order, int *nord, GError **error) {
  int jobs = c->o->jobs, R = c->rank, W = c->world;
  Worker *w = g_new0(Worker, jobs);
  int running = 0, next = 0, done = 0;
  gint64 t0 = g_get_monotonic_time();
  /* 2. bounds: this rank's share */
  int mine = n > R ? (n - R + W - 1) / W : 0;
  while (done < mine) {
    while (running < jobs && next < mine) {
      int slot = -1;
      for (int j = 0; j < jobs; j++)
        if (!w[j].pid) slot = j;
      if (!spawn(c, cands, R + next * W, FALSE, &w[slot], error)) goto fail;
      next++, running++;
    }
    int j = reap(w, jobs, cands, FALSE);
    if (j >= 0) {
      w[j].pid = 0;
      running--, done++;
      progress(c, "bounds", done, mine, t0);
    }
  }
  if (W > 1) {
    int K = (n + W - 1) / W;
    Outcome *blk = g_new0(Outcome, K), *all = g_new0(Outcome, (size_t)K * W);
    for (int k = 0; k < K && R + k * W < n; k++)
      blk[k] = cands[R + k * W].bound;
    gboolean ok = share(blk, all, sizeof(Outcome), K, error);
    for (int r = 0; ok && r < W; r++)
      for (int k = 0; k < K && r + k * W < n; k++) {
        cands[r + k * W].bound = all[(size_t)r * K + k];
        cands[r + k * W].bounded = TRUE;
      }
    g_free(blk);
    g_free(all);
    if (!ok) goto fail;
  }
  *nord = 0;
  for (int i = 0; i < n; i++)
    if (cands[i].bound.ok)
      order[(*nord)++] = i;
    else
      cands[i].dropped = TRUE;
  g_qsort_with_data(order, *nord, sizeof(int), by_bound, cands); /* stable: alike on every rank */
  /* 3. simulations in bound order, pruned against the best so far; this rank's positions */
  double best = INFINITY;
  int sims = 0;
  mine = *nord > R ? (*nord - R + W - 1) / W : 0;
#define AT(q) order[R + (q)*W]
  next = 0;
  t0 = g_get_monotonic_time();
  while (next < mine || running > 0) {
    if (!rf_real_world_min_poll(&best, error)) goto fail;
    while (running < jobs && next < mine) {
      Cand *k = &cands[AT(next)];
      if (!c->o->exhaustive && k->bound.bound_s > best) {
        /* sorted by bound: everything after it is pruned too */
        for (int r = next; r < mine; r++)
          cands[AT(r)].pruned = TRUE;
        next = mine;
        break;
      }
      int slot = -1;
      for (int j = 0; j < jobs; j++)
        if (!w[j].pid) slot = j;
      if (!spawn(c, cands, AT(next), TRUE, &w[slot], error)) goto fail;
      next++, running++;
    }
    if (!running) break;
    int j = reap(w, jobs, cands, TRUE);
    if (j >= 0) {
      const Cand *k = &cands[w[j].cand];
      if (k->sim.ok && k->sim.predicted_s < best) {
        best = k->sim.predicted_s;
        if (!rf_real_world_min_post(best, error)) goto fail;
      }
      w[j].pid = 0;
      running--, sims++;
      int pruned = 0;
      for (int r = next; r < mine; r++)
        pruned += !c->o->exhaustive && cands[AT(r)].bound.bound_s > best;
      progress(c, "simulated", sims, sims + running + (mine - next) - pruned, t0);
    }
  }
#undef AT
  if (!rf_real_world_min_end(&best, error)) goto fail;
  if (W > 1 && *nord > 0) {
    typedef struct {
      int simulated, pruned;
      Outcome sim;
    } Done;
    int K = (*nord + W - 1) / W;
    Done *blk = g_new0(Done, K), *all = g_new0(Done, (size_t)K * W);
    for (int k = 0; k < K && R + k * W < *nord; k++) {
      const Cand *x = &cands[order[R + k * W]];
      blk[k] = (Done){x->simulated, x->pruned, x->sim};
    }
    gboolean ok = share(blk, all, sizeof(Done), K, error);
    for (int r = 0; ok && r < W; r++)
      for (int k = 0; k < K && r + k * W < *nord; k++) {
        const Done *d = &all[(size_t)r * K + k];
        Cand *x = &cands[order[r + k * W]];
        x->simulated = d->simulated, x->pruned = d->pruned, x->sim = d->sim;
      }
    g_free(blk);
    g_free(all);
    if (!ok) goto fail;
  }
  g_free(w);
  return TRUE;
fail:
  while (running-- > 0)
    reap(w, jobs, cands, FALSE);
  g_free(w);
  return FALSE;
}

/* ---------- report ---------- */

static const char *why(const Cand *k, const Cand *runner) {
  static char buf[200];
  g_snprintf(buf, sizeof buf, "bound by %s; %.1f GB over the network%s", k->sim.bound_by,
             k->sim.network_bytes / 1e9,
             runner && runner->sim.ok
                 ? (k->sim.network_bytes < runner->sim.network_bytes ? ", less than the next" : "")
                 : "");
  return buf;
}

static void print_table(const Ctx *c, const Cand *cands, const int *rank, int nr, int n, int nsim,
                        int npruned, int ndropped, double wall_s) {
  const Opts *o = c->o;
  printf("# refit advise  model %s  train %s  infer GPUs %s  topology %s\n", o->model, o->train,
         o->gpus, o->topology);
  printf("# calibration %s; software %s (%s)%s\n", c->cal_source, rf_software_name(c->cal.software),
         rf_variant_name(c->cal.software, c->cal.variant),
         c->cal.software != RF_SOFTWARE_REFIT || c->cal.variant != RF_VARIANT_DEFAULT
             ? ", every feasible candidate simulated"
             : "");
  char mem[32] = "unknown";
  if (c->mem_bytes > 0) g_snprintf(mem, sizeof mem, "%.0f GB", c->mem_bytes / 1e9);
  printf("# GPU memory %s; KV reserve %.1f GB per GPU; weights must fit memory - reserve, "
         "weights + refit extra must fit memory\n",
         mem, c->reserve_bytes / 1e9);
  char ranks[48] = "";
  if (c->world > 1) g_snprintf(ranks, sizeof ranks, " over %d MPI ranks", c->world);
  printf("# candidates %d: %d infeasible, %d simulated, %d pruned by the bound (%.0f%% of the "
         "feasible), %.1f s wall%s\n",
         n, ndropped, nsim, npruned, n - ndropped > 0 ? 100.0 * npruned / (n - ndropped) : 0.0,
         wall_s, ranks);
  printf("%4s %6s %-20s %-12s %-17s %12s %10s %7s %10s  %s\n", "rank", "gpus", "layout",
         "placement", "strategy", "predicted", "bound", "ratio", "mem/GPU", "why");
  printf("%4s %6s %-20s %-12s %-17s %12s %10s %7s %10s\n", "", "", "", "", "", "(s)", "(s)", "",
         "(GB)");
  for (int i = 0; i < nr; i++) {
    const Cand *k = &cands[rank[i]];
    if (k->simulated && k->sim.ok)
      printf("%4d %6d %-20s %-12s %-17s %12.5g %10.5g %7.2f %10.4g  %s\n", i + 1, k->ngpus,
             k->layout, rf_placement_kind_name(k->place), rf_strategy_name(k->strategy),
             k->sim.predicted_s, k->bound.bound_s, k->sim.predicted_s / k->bound.bound_s,
             k->bound.peak_bytes / 1e9,
             i < 3 ? why(k, i + 1 < nr ? &cands[rank[i + 1]] : NULL) : "");
    else
      printf("%4s %6d %-20s %-12s %-17s %12s %10.5g %7s %10.4g  %s\n", "-", k->ngpus, k->layout,
             rf_placement_kind_name(k->place), rf_strategy_name(k->strategy), "-", k->bound.bound_s,
             "-", k->bound.peak_bytes / 1e9,
             k->pruned      ? "pruned: bound above the best prediction"
             : k->simulated ? k->sim.error
                            : "-");
  }
  for (int i = 0; i < n; i++)
    if (cands[i].dropped)
      printf("# infeasible: %d GPUs %s %s %s: %s\n", cands[i].ngpus, cands[i].layout,
             rf_placement_kind_name(cands[i].place), rf_strategy_name(cands[i].strategy),
             cands[i].bound.error);
  for (int i = 0; i < nr; i++) {
    const Cand *k = &cands[rank[i]];
    if (k->simulated && k->sim.ok && k->sim.predicted_s < k->bound.bound_s * (1 - 1e-9))
      printf("# note: %s %s %s predicted below its bound (%.4f < %.4f): the bound is not safe "
             "there\n",
             k->layout, rf_placement_kind_name(k->place), rf_strategy_name(k->strategy),
             k->sim.predicted_s, k->bound.bound_s);
  }
}

static void json_cand(JsonBuilder *b, const Cand *k, int rank) {
  json_builder_begin_object(b);
#define S(n, v)                                                                                    \
  json_builder_set_member_name(b, n);                                                              \
  json_builder_add_string_value(b, v)
#define D(n, v)                                                                                    \
  json_builder_set_member_name(b, n);                                                              \
  json_builder_add_double_value(b, v)
#define I(n, v)                                                                                    \
  json_builder_set_member_name(b, n);                                                              \
  json_builder_add_int_value(b, v)
  I("rank", rank);
  I("infer_gpus", k->ngpus);
  S("infer", k->layout);
  S("placement", rf_placement_kind_name(k->place));
  S("strategy", rf_strategy_name(k->strategy));
  S("status", k->dropped  ? "infeasible"
              : k->pruned ? "pruned"
              : k->sim.ok ? "simulated"
                          : "failed");
  if (k->dropped) {
    S("error", k->bound.error);
  } else {
    D("lower_bound_s", k->bound.bound_s);
    D("nic_lower_bound_s", k->bound.nic_bound_s);
    S("bound_resource", k->bound.bound_what);
    I("infer_weights_bytes", (gint64)k->bound.weights_bytes);
    I("refit_extra_bytes", (gint64)k->bound.extra_bytes);
    I("infer_peak_bytes", (gint64)k->bound.peak_bytes);
    I("network_bytes", (gint64)k->bound.network_bytes);
    if (k->simulated && k->sim.ok) {
      D("predicted_s", k->sim.predicted_s);
      D("ratio_to_lower_bound", k->sim.predicted_s / k->bound.bound_s);
      S("bound_by", k->sim.bound_by);
    } else if (k->simulated) {
      S("error", k->sim.error);
    }
  }
#undef S
#undef D
#undef I
  json_builder_end_object(b);
}

static void print_json(const Ctx *c, const Cand *cands, const int *rank, int nr, int n, int nsim,
                       int npruned, int ndropped, double wall_s) {
  JsonBuilder *b = json_builder_new();
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "model");
  json_builder_add_string_value(b, c->o->model);
  json_builder_set_member_name(b, "train");
  json_builder_add_string_value(b, c->o->train);
  json_builder_set_member_name(b, "topology");
  json_builder_add_string_value(b, c->o->topology);
  json_builder_set_member_name(b, "calibration");
  json_builder_add_string_value(b, c->cal_source);
  json_builder_set_member_name(b, "software");
  json_builder_add_string_value(b, rf_software_name(c->cal.software));
  json_builder_set_member_name(b, "software_variant");
  json_builder_add_string_value(b, rf_variant_name(c->cal.software, c->cal.variant));
  json_builder_set_member_name(b, "candidates");
  json_builder_add_int_value(b, n);
  json_builder_set_member_name(b, "infeasible");
  json_builder_add_int_value(b, ndropped);
  json_builder_set_member_name(b, "simulated");
  json_builder_add_int_value(b, nsim);
  json_builder_set_member_name(b, "pruned");
  json_builder_add_int_value(b, npruned);
  json_builder_set_member_name(b, "wall_s");
  json_builder_add_double_value(b, wall_s);
  json_builder_set_member_name(b, "mpi_ranks");
  json_builder_add_int_value(b, c->world);
  json_builder_set_member_name(b, "ranked");
  json_builder_begin_array(b);
  for (int i = 0; i < nr; i++)
    json_cand(b, &cands[rank[i]], cands[rank[i]].simulated && cands[rank[i]].sim.ok ? i + 1 : 0);
  for (int i = 0; i < n; i++)
    if (cands[i].dropped) json_cand(b, &cands[i], 0);
  json_builder_end_array(b);
  json_builder_end_object(b);
  rf_json_print(b);
}

static gboolean write_csv(const char *path, const Cand *cands, const int *rank, int nr,
                          GError **error) {
  FILE *f = fopen(path, "w");
  if (!f) {
    g_set_error(error, RF_ERROR, RF_ERROR_IO, "--csv %s: %s", path, g_strerror(errno));
    return FALSE;
  }
  fprintf(f, "rank,infer_gpus,infer,tp,placement,strategy,status,predicted_s,lower_bound_s,"
             "ratio,infer_peak_bytes,bound_by\n");
  for (int i = 0; i < nr; i++) {
    const Cand *k = &cands[rank[i]];
    gboolean ok = k->simulated && k->sim.ok;
    int tp = 1;
    sscanf(k->layout, "TP%d", &tp);
    fprintf(f, "%d,%d,%s,%d,%s,%s,%s,", ok ? i + 1 : 0, k->ngpus, k->layout, tp,
            rf_placement_kind_name(k->place), rf_strategy_name(k->strategy),
            k->pruned ? "pruned"
            : ok      ? "simulated"
                      : "failed");
    if (ok)
      fprintf(f, "%.6g,", k->sim.predicted_s);
    else
      fprintf(f, ",");
    fprintf(f, "%.6g,", k->bound.bound_s);
    if (ok)
      fprintf(f, "%.4f,", k->sim.predicted_s / k->bound.bound_s);
    else
      fprintf(f, ",");
    fprintf(f, "%" G_GUINT64_FORMAT ",\"%s\"\n", (guint64)k->bound.peak_bytes,
            ok ? k->sim.bound_by : "");
  }
  gboolean ok = fclose(f) == 0;
  if (!ok) g_set_error(error, RF_ERROR, RF_ERROR_IO, "--csv %s: %s", path, g_strerror(errno));
  return ok;
}

/* --plot: a CSV of the ranked rows through scripts/advise_plot.py (matplotlib). */
static gboolean write_plot(const char *png, const char *title, const Cand *cands, const int *rank,
                           int nr, GError **error) {
  char *csv = NULL;
  int fd = g_file_open_tmp("refit-advise-XXXXXX.csv", &csv, error);
  if (fd < 0) return FALSE;
  close(fd);
  gboolean ok = write_csv(csv, cands, rank, nr, error);
  ok = ok && rf_plot_script("scripts/advise_plot.py", csv, png, title, "--plot", error);
  g_unlink(csv);
  g_free(csv);
  return ok;
}

/* ---------- the command ---------- */

static gboolean parse_list(const char *s, const char *flag, int *out, int *n, GError **error) {
  GArray *a = parse_counts(s, flag, error);
  if (!a) return FALSE;
  *n = 0;
  for (guint i = 0; i < a->len && *n < 64; i++)
    out[(*n)++] = g_array_index(a, int, i);
  g_array_free(a, TRUE);
  return TRUE;
}

static gboolean build_candidates(const Ctx *c, GArray *cands, GError **error) {
  const Opts *o = c->o;
  int tps[64], ntps = 0;
  if (o->tps && !parse_list(o->tps, "--tp", tps, &ntps, error)) return FALSE;
  gboolean with_ep = TRUE, without_ep = TRUE;
  if (o->eps) {
    if (!strcmp(o->eps, "on"))
      without_ep = FALSE;
    else if (!strcmp(o->eps, "off"))
      with_ep = FALSE;
    else if (strcmp(o->eps, "both")) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "--ep wants on, off or both, got '%s'", o->eps);
      return FALSE;
    }
  }
  GArray *gpus = parse_counts(o->gpus, "--infer-gpus", error);
  if (!gpus) return FALSE;
  RfArgs sa = {.strategy = o->strategy};
  RfStrategy st[RF_STRATEGY_COUNT];
  int ns = rf_args_strategies(&sa, st, error);
  if (ns < 0) {
    g_array_free(gpus, TRUE);
    return FALSE;
  }
  RfPlacementKind pl[RF_PLACE_COUNT];
  int np = 0;
  if (o->placements) {
    char **tok = g_strsplit(o->placements, ",", -1);
    for (int i = 0; tok[i] && np < RF_PLACE_COUNT; i++)
      if (!rf_placement_kind_parse(tok[i], &pl[np++], error)) {
        g_strfreev(tok);
        g_array_free(gpus, TRUE);
        return FALSE;
      }
    g_strfreev(tok);
  } else {
    pl[np++] = RF_PLACE_SPLIT;
  }
  const RfModel *m = c->model;
  for (guint g = 0; g < gpus->len; g++) {
    int ng = g_array_index(gpus, int, g);
    GPtrArray *lay = rf_advise_layouts(m, ng, o->tps ? tps : NULL, ntps, with_ep, without_ep);
    for (guint l = 0; l < lay->len; l++)
      for (int p = 0; p < np; p++)
        for (int s = 0; s < ns; s++) {
          Cand k = {0};
          k.ngpus = ng;
          k.layout = g_strdup(lay->pdata[l]);
          k.place = pl[p];
          k.strategy = st[s];
          g_array_append_val(cands, k);
        }
    g_ptr_array_free(lay, TRUE);
  }
  g_array_free(gpus, TRUE);
  return TRUE;
}

/* Layouts whose weights do not fit memory - reserve, or that the model cannot take, are dropped
 * before any plan: one problem per layout and placement, not per strategy. */
static void drop_unfit(const Ctx *c, Cand *cands, int n) {
  GHashTable *seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  for (int i = 0; i < n; i++) {
    char *key = g_strdup_printf("%d|%s|%d", cands[i].ngpus, cands[i].layout, cands[i].place);
    char *why = NULL;
    if (g_hash_table_contains(seen, key)) {
      why = g_strdup(g_hash_table_lookup(seen, key));
    } else {
      GError *e = NULL;
      RfProblem *pb = NULL;
      int tp = 0;
      sscanf(cands[i].layout, "TP%d", &tp);
      if (rf_advise_layout_check(c->model, tp, cands[i].ngpus,
                                 strstr(cands[i].layout, "EP") != NULL, &e))
        pb = cand_problem(c, &cands[i], &e);
      if (pb && c->mem_bytes > 0) {
        RfMemory mem;
        rf_memory_weights(pb, &mem);
        double room = c->mem_bytes - c->reserve_bytes;
        if ((double)mem.weights_bytes > room)
          g_set_error(&e, RF_ERROR, RF_ERROR_INPUT,
                      "weights %.1f GB per GPU exceed %.1f GB (memory %.0f GB - KV reserve %.1f "
                      "GB)",
                      mem.weights_bytes / 1e9, room / 1e9, c->mem_bytes / 1e9,
                      c->reserve_bytes / 1e9);
      }
      rf_problem_free(pb);
      why = e ? g_strdup(e->message) : NULL;
      g_clear_error(&e);
      g_hash_table_insert(seen, g_strdup(key), why ? g_strdup(why) : NULL);
    }
    if (why) {
      cands[i].dropped = TRUE;
      cands[i].bound.code = RF_ERROR_INPUT;
      g_strlcpy(cands[i].bound.error, why, sizeof cands[i].bound.error);
    }
    g_free(why);
    g_free(key);
  }
  g_hash_table_destroy(seen);
}

/* The launcher's world before MPI starts (mpirun, srun, or another PMI launcher); 1 outside. */
static int launcher_world(void) {
  const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS", NULL};
  for (int i = 0; vars[i]; i++) {
    const char *v = g_getenv(vars[i]);
    if (v) return atoi(v);
  }
  return 1;
}

/* Before MPI starts every rank finds the same errors: only the launcher's rank 0 prints them. */
static gboolean launcher_rank_zero(void) {
  const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID", NULL};
  for (int i = 0; vars[i]; i++) {
    const char *v = g_getenv(vars[i]);
    if (v) return !strcmp(v, "0");
  }
  return TRUE;
}

int rf_cmd_advise(int argc, char **argv) {
  Opts o = {0};
  o.jobs = (int)g_get_num_processors();
  GOptionEntry entries[] = {
      {"model", 'm', 0, G_OPTION_ARG_STRING, &o.model, "Model: zoo name or config.json",
       "NAME|FILE"},
      {"train", 't', 0, G_OPTION_ARG_STRING, &o.train, "Megatron training layout", "LAYOUT"},
      {"infer-gpus", 'n', 0, G_OPTION_ARG_STRING, &o.gpus,
       "Inference GPUs: N, A-B (A, 2A, 4A ... and B) or a comma list", "N|A-B"},
      {"topology", 'T', 0, G_OPTION_ARG_STRING, &o.topology, "Cluster (default dgx-h100)",
       "NAME|FILE"},
      {"tp", 0, 0, G_OPTION_ARG_STRING, &o.tps,
       "Allowed inference TP values: N, A-B or a list (default: every divisor of the GPU count)",
       "LIST"},
      {"ep", 0, 0, G_OPTION_ARG_STRING, &o.eps,
       "vLLM expert parallel (EP = TP x DP): on, off or both (default both, MoE only)", "MODE"},
      {"strategy", 's', 0, G_OPTION_ARG_STRING, &o.strategy,
       "Strategies to try: a comma list or all (default all)", "NAME"},
      {"placement", 0, 0, G_OPTION_ARG_STRING, &o.placements,
       "Placements to try: split, interleaved or both as a list (default split)", "LIST"},
      {"kv-reserve", 0, 0, G_OPTION_ARG_STRING, &o.kv_reserve,
       "Memory per GPU kept for the KV cache: GiB, or a fraction of GPU memory (0.3 or 30%)",
       "GIB|FRAC"},
      {"calibration", 'c', 0, G_OPTION_ARG_FILENAME, &o.calib,
       "Calibration file (default: the topology's, docs/topologies.md)", "FILE"},
      {"jobs", 'j', 0, G_OPTION_ARG_INT, &o.jobs, "Forked workers (default: the core count)", "N"},
      {"mpi", 0, 0, G_OPTION_ARG_NONE, &o.mpi,
       "Start MPI and spread the candidates over the ranks (automatic under mpirun or srun with "
       "more than one rank)",
       NULL},
      {"exhaustive", 0, 0, G_OPTION_ARG_NONE, &o.exhaustive,
       "Simulate every feasible candidate (no pruning)", NULL},
      {"software", 0, 0, G_OPTION_ARG_STRING, &o.software,
       "Rank what this software would do (refit sim --software): refit (default), nemo-rl "
       "(hybrid, gather-broadcast) or nccl-m2n (m2n); a published-software model simulates every "
       "feasible candidate (its time is not bounded by the plan)",
       "NAME"},
      {"software-variant", 0, 0, G_OPTION_ARG_STRING, &o.variant,
       "Code path of the software model (refit sim --software-variant)", "NAME"},
      {"json", 0, 0, G_OPTION_ARG_NONE, &o.json, "Print JSON instead of a table", NULL},
      {"csv", 0, 0, G_OPTION_ARG_FILENAME, &o.csv, "Also write the ranked rows as CSV", "FILE"},
      {"plot", 0, 0, G_OPTION_ARG_FILENAME, &o.plot,
       "Plot predicted time against inference GPUs (or TP), one line per strategy", "FILE.png"},
      {"quiet", 'q', 0, G_OPTION_ARG_NONE, &o.quiet, "No progress line on stderr", NULL},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  g_set_prgname("refit advise");
  GOptionContext *ctx =
      g_option_context_new("- search inference layouts, placements and strategies");
  g_option_context_set_summary(
      ctx, "Enumerate vLLM inference layouts (TP x DP, with and without EP) for the given GPU\n"
           "counts, placements and strategies; drop those the model or the memory cannot take;\n"
           "bound every candidate with its plan; simulate in order of bound, never simulating a\n"
           "candidate whose bound exceeds the best prediction so far. docs/advise.md.");
  g_option_context_set_description(ctx, RF_EXIT_STATUS_HELP);
  g_option_context_add_main_entries(ctx, entries, NULL);
  GError *e = NULL;
  Ctx c = {0};
  c.o = &o;
  c.world = 1;
  gboolean started = FALSE, print_error = launcher_rank_zero();
  GArray *cands = g_array_new(FALSE, TRUE, sizeof(Cand));
  RfTopology *topo = NULL;
  RfModel *model = NULL;
  int *order = NULL, nord = 0;
  gint64 t0 = g_get_monotonic_time();
  /* 1. options and candidates */
  if (!rf_args_parse(ctx, &argc, &argv, FALSE, &e)) goto out;
  if (!o.model || !o.train || !o.gpus) {
    g_set_error(&e, RF_ERROR, RF_ERROR_INPUT, "need --model, --train and --infer-gpus");
    goto out;
  }
  if (o.jobs < 1 || o.jobs > 1024) {
    g_set_error(&e, RF_ERROR, RF_ERROR_INPUT, "--jobs must be 1..1024");
    goto out;
  }
  if (o.plot && (!g_str_has_suffix(o.plot, ".png") || g_file_test(o.plot, G_FILE_TEST_IS_DIR))) {
    g_set_error(&e, RF_ERROR, RF_ERROR_INPUT, "--plot wants a FILE.png, got '%s'", o.plot);
    goto out;
  }
  if (!o.topology) o.topology = g_strdup("dgx-h100");
  topo = rf_topology_load(o.topology, &e);
  if (!topo) goto out;
  c.mem_bytes = topo->memory_GB * 1e9;
  if (o.kv_reserve && !parse_reserve(o.kv_reserve, c.mem_bytes, &c.reserve_bytes, &e)) goto out;
  gboolean neutral = FALSE;
  if (!rf_calibration_select(&c.cal, o.calib, topo, &c.cal_source, &neutral, &e)) goto out;
  if (!rf_software_parse(o.software, o.variant, &c.cal.software, &c.cal.variant, &e)) goto out;
  /* the plan's bound holds for refit's flow model; the published software and refit's executor
   * move the bytes their own way: simulate everything */
  if (c.cal.software != RF_SOFTWARE_REFIT || c.cal.variant != RF_VARIANT_DEFAULT)
    o.exhaustive = TRUE;
  /* the simulator's link rates and network-byte factors (sim/program.c): the bound at those */
  rf_bound_rates_peak(&c.rates);
  c.rates.nic = c.cal.nic_efficiency;
  c.rates.nvlink = c.cal.nvlink_efficiency;
  c.rates.phase_net[RF_PHASE_EXPORT] = c.cal.nic_efficiency / c.cal.allgather_efficiency;
  c.rates.phase_net[RF_PHASE_BROADCAST] = c.cal.nic_efficiency / c.cal.broadcast_efficiency;
  c.rates.fixed_s = c.cal.fixed_s;
  model = rf_model_load(o.model, &e);
  if (!model) goto out;
  c.model = model;
  if (!build_candidates(&c, cands, &e)) goto out;
  Cand *k = (Cand *)cands->data;
  int n = (int)cands->len;
  if (n == 0) {
    g_set_error(&e, RF_ERROR, RF_ERROR_INPUT,
                "no candidate: no allowed TP value divides the inference GPU counts (%s)", o.gpus);
    goto out;
  }
  drop_unfit(&c, k, n);
  int ndropped = 0;
  for (int i = 0; i < n; i++)
    ndropped += k[i].dropped;
  if (ndropped == n) {
    g_set_error(&e, RF_ERROR, RF_ERROR_INPUT, "no feasible candidate among %d: %s%s", n,
                k[0].bound.error, n > 1 ? " (and the like; --json lists every reason)" : "");
    goto out;
  }
  /* 2 + 3. bound, then simulate what the bound cannot rule out (dropped ones are skipped by
   * giving them to no worker: compact the list first) */
  int *live = g_new(int, n), nlive = 0;
  for (int i = 0; i < n; i++)
    if (!k[i].dropped) live[nlive++] = i;
  Cand *sub = g_new0(Cand, nlive);
  for (int i = 0; i < nlive; i++)
    sub[i] = k[live[i]];
  order = g_new(int, nlive);
  /* MPI starts once every option and the candidate list are checked (every rank found the same
   * errors before; launcher_rank_zero printed them once) */
  if (o.mpi || launcher_world() > 1) {
    RfRealWorld world;
    if (!rf_real_world_start(&argc, &argv, FALSE, &world, &e)) {
      g_free(sub);
      g_free(live);
      goto out;
    }
    started = TRUE;
    c.rank = world.rank, c.world = world.world;
    print_error = c.rank == 0;
  }
  gboolean ok = search(&c, sub, nlive, order, &nord, &e);
  if (!ok && c.world > 1) {
    /* the other ranks may wait for this one in a collective: take the job down */
    fprintf(stderr, "refit advise: rank %d: %s\n", c.rank, e->message);
    rf_real_world_abort(rf_error_exit_status(e));
  }
  for (int i = 0; i < nlive; i++)
    k[live[i]] = sub[i];
  for (int i = 0; i < nord; i++)
    order[i] = live[order[i]];
  g_free(sub);
  g_free(live);
  if (!ok) goto out;
  /* 4. rank and report */
  ndropped = 0; /* now with those whose plan or refit memory failed */
  for (int i = 0; i < n; i++)
    ndropped += k[i].dropped;
  g_qsort_with_data(order, nord, sizeof(int), by_prediction, k);
  int nsim = 0, npruned = 0, nok = 0;
  for (int i = 0; i < n; i++) {
    nsim += k[i].simulated;
    npruned += k[i].pruned;
    nok += k[i].simulated && k[i].sim.ok;
  }
  double wall = (g_get_monotonic_time() - t0) / 1e6;
  if (c.rank) goto out; /* one answer, from rank 0 */
  if (o.json)
    print_json(&c, k, order, nord, n, nsim, npruned, ndropped, wall);
  else
    print_table(&c, k, order, nord, n, nsim, npruned, ndropped, wall);
  if (o.csv && !write_csv(o.csv, k, order, nord, &e)) goto out;
  if (o.plot) {
    char *title = g_strdup_printf("refit advise: %s, train %s, %s", o.model, o.train, o.topology);
    gboolean pok = write_plot(o.plot, title, k, order, nord, &e);
    g_free(title);
    if (!pok) goto out;
  }
  if (!nok)
    g_set_error(&e, RF_ERROR, RF_ERROR_PEER, "every simulation failed: %s",
                nord ? k[order[0]].sim.error : "-");
out:
  for (guint i = 0; i < cands->len; i++)
    g_free(g_array_index(cands, Cand, i).layout);
  g_array_free(cands, TRUE);
  g_free(order);
  rf_topology_free(topo);
  rf_model_free(model);
  rf_calibration_clear(&c.cal);
  g_free(c.cal_source);
  g_free(o.model), g_free(o.train), g_free(o.topology), g_free(o.gpus), g_free(o.tps);
  g_free(o.eps), g_free(o.strategy), g_free(o.placements), g_free(o.calib);
  g_free(o.software), g_free(o.variant);
  g_free(o.kv_reserve), g_free(o.csv), g_free(o.plot);
  g_option_context_free(ctx);
  if (started) rf_real_world_end();
  return rf_cmd_exit("refit advise", e, print_error);
}
