/* `refit advise`: search the inference layouts, placements and strategies for the fastest refit.
 *
 * 1. Options: the model, training layout and strategies through the shared entries (args.h),
 *    the constraints (GPU counts, TP, EP, engines, placements) and the serving defaults (TP
 *    within one NVLink domain, a KV reserve of 10% of GPU memory) parsed here into an
 *    RfAdviseSpace; candidates a layout or the memory rules out are dropped with their reason
 *    (sim/advise/advise_candidates.h).
 * 2. + 3. The search (sim/advise/advise_search.h): bound every candidate in forked workers,
 * simulate in order of increasing bound, never simulating one whose bound exceeds the best
 * prediction so far. Under mpirun / srun (or --mpi) it is spread over the ranks through the MPI
 * steps of real/ (advise_comm), each rank forking its own workers, and rank 0 prints the one
 * answer.
 * 4. Rank, print (table, --json, --csv; the best of each GPU count when several were searched,
 *    each then pruned only by its own count's predictions), plot (--plot,
 *    scripts/advise_plot.py; skipped with a message without matplotlib). */
#include <errno.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "advise.h"
#include "advise_candidates.h"
#include "advise_search.h"
#include "args.h"
#include "commands.h"
#include "error.h"
#include "predict.h"
#include "real.h"
#include "report.h"
#include "sim.h"

typedef struct {
  RfArgs a; /* the shared options: --model, --train, --strategy, --json */
  char *topology, *gpus, *tps, *eps, *placements, *calib;
  char *kv_reserve, *csv, *plot, *software, *variant, *frameworks;
  int jobs;
  gboolean quiet, exhaustive, mpi, cross_domain_tp;
} Opts;

typedef struct {
  Opts *o;
  RfCalibration cal;
  char *cal_source;
  RfAdviseSetup setup; /* what every candidate shares (cal, memory, link rates) */
  int rank, world;     /* MPI (0 / 1 without) */
  int domain_gpus;     /* the topology's GPUs per NVLink domain */
  RfInferFramework fw[2];
  int nfw;
  char reserve_note[200]; /* where the KV reserve came from */
} Ctx;

/* What a search found, for the reports. */
typedef struct {
  int n, nsim, npruned, ndropped, nok;
  double wall_s;
  gboolean per_gpus; /* pruned within each GPU count (more than one searched) */
} Summary;

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

/* "20" or "20GiB" (GiB, the flag's unit since it was added), "21.5GB" (GB, the unit every memory
 * figure is printed in) or a fraction of the GPU memory ("0.1" or "10%"). */
static gboolean parse_reserve(const char *s, double mem_bytes, double *out, GError **error) {
  char *end = NULL;
  double v = g_ascii_strtod(s, &end);
  gboolean pct = end && !strcmp(end, "%");
  gboolean gb = end && !g_ascii_strcasecmp(end, "GB");
  gboolean gib = end && !g_ascii_strcasecmp(end, "GiB");
  gboolean frac = pct || (end && !*end && v < 1.0);
  if (!end || end == s || (*end && !pct && !gb && !gib) || !isfinite(v) || v < 0) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "--kv-reserve wants GiB (20 or 20GiB), GB (21.5GB) or a fraction of GPU memory "
                "(0.3 or 30%%), got '%s'",
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
    *out = gb ? v * 1e9 : v * (double)(1ull << 30);
    if (mem_bytes > 0 && *out >= mem_bytes) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                  "--kv-reserve %s (%.4g GB) is not below the GPU memory (%.0f GB)", s, *out / 1e9,
                  mem_bytes / 1e9);
      return FALSE;
    }
  }
  return TRUE;
}

/* The default KV-cache reserve, a fraction of GPU memory: vLLM's engine takes
 * gpu_memory_utilization = 0.9 of HBM by default (vllm/config/cache.py, docs.vllm.ai engine
 * arguments); weights above that leave it no KV cache at all and it refuses to start. */
#define ADVISE_DEFAULT_RESERVE 0.10

/* --infer-framework: a comma list of vllm and sglang (default both). */
static gboolean parse_frameworks(const char *s, Ctx *c, GError **error) {
  c->nfw = 0;
  if (!s) {
    c->fw[c->nfw++] = RF_INFER_VLLM;
    c->fw[c->nfw++] = RF_INFER_SGLANG;
    return TRUE;
  }
  char **tok = g_strsplit(s, ",", -1);
  gboolean ok = tok[0] != NULL;
  for (int i = 0; ok && tok[i]; i++) {
    RfInferFramework f;
    ok = rf_infer_framework_parse(tok[i], &f, NULL) && f != RF_INFER_MEGATRON;
    for (int j = 0; ok && j < c->nfw; j++)
      ok = c->fw[j] != f;
    if (ok) c->fw[c->nfw++] = f;
  }
  g_strfreev(tok);
  if (!ok)
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "--infer-framework wants vllm, sglang or vllm,sglang, got '%s'", s);
  return ok;
}

/* ---------- report ---------- */

static const char *why(const RfAdviseCandidate *k, const RfAdviseCandidate *runner, gboolean top) {
  static char buf[260];
  char dom[64] = "";
  if (k->tp_domains > 1)
    g_snprintf(dom, sizeof dom, "TP%d SPANS %d NVLINK DOMAINS%s", k->par.tp, k->tp_domains,
               top ? "; " : "");
  if (!top) {
    g_strlcpy(buf, dom, sizeof buf);
    return buf;
  }
  g_snprintf(buf, sizeof buf, "%sbound by %s; %.1f GB over the network%s", dom, k->sim.bound_by,
             k->sim.network_bytes / 1e9,
             runner && runner->sim.ok
                 ? (k->sim.network_bytes < runner->sim.network_bytes ? ", less than the next" : "")
                 : "");
  return buf;
}

/* The serving rules of the search, for the header. */
static void print_serving(const Ctx *c) {
  const Opts *o = c->o;
  printf("# engines %s%s; TP groups %s\n", rf_infer_framework_name(c->fw[0]),
         c->nfw > 1 ? ", sglang (attention DP, EP; vLLM's TP x DP and EP = TP x DP left to vLLM)"
                    : "",
         o->cross_domain_tp ? "may span NVLink domains (--allow-cross-domain-tp; flagged)"
                            : "within one NVLink domain (--allow-cross-domain-tp allows more)");
  printf("# NVLink domain %d GPUs; GPU memory ", c->domain_gpus);
  if (c->setup.mem_bytes > 0)
    printf("%.0f GB", c->setup.mem_bytes / 1e9);
  else
    printf("unknown");
  printf("; KV reserve %.1f GB per GPU (%s); weights must fit memory - reserve, weights + refit "
         "extra must fit memory\n",
         c->setup.reserve_bytes / 1e9, c->reserve_note);
}

/* The indices into order of the best simulated candidate of each GPU count, ascending count;
 * returns how many (at most ngpus of the search). */
static int best_per_gpus(const RfAdviseCandidate *cands, const int *rank, int nr, int *best) {
  int nb = 0;
  for (int i = 0; i < nr; i++) {
    const RfAdviseCandidate *k = &cands[rank[i]];
    if (!k->simulated || !k->sim.ok) continue;
    int j = 0;
    while (j < nb && cands[rank[best[j]]].ngpus != k->ngpus)
      j++;
    if (j == nb) best[nb++] = i; /* rank order: the first of a count is its best */
  }
  for (int i = 1; i < nb; i++) /* ascending GPU count */
    for (int j = i; j > 0 && cands[rank[best[j - 1]]].ngpus > cands[rank[best[j]]].ngpus; j--) {
      int t = best[j];
      best[j] = best[j - 1], best[j - 1] = t;
    }
  return nb;
}

static void print_best(const RfAdviseCandidate *cands, const int *rank, int nr) {
  int *best = g_new(int, nr > 0 ? nr : 1), nb = best_per_gpus(cands, rank, nr, best);
  if (nb > 1) {
    double fastest = cands[rank[best[0]]].sim.predicted_s;
    for (int i = 1; i < nb; i++)
      fastest = MIN(fastest, cands[rank[best[i]]].sim.predicted_s);
    printf("# best per inference GPU count (each count searched to its own best; rank in the "
           "table above)\n");
    printf("%-4s %6s %-6s %-20s %-12s %-17s %12s %8s %5s\n", "best", "gpus", "engine", "layout",
           "placement", "strategy", "predicted", "vs-best", "rank");
    printf("%-4s %6s %-6s %-20s %-12s %-17s %12s %8s %5s\n", "", "", "", "", "", "", "(s)", "(x)",
           "");
    for (int i = 0; i < nb; i++) {
      const RfAdviseCandidate *k = &cands[rank[best[i]]];
      printf("%-4s %6d %-6s %-20s %-12s %-17s %12.5g %8.2f %5d\n", "best", k->ngpus,
             rf_infer_framework_name(k->fw), k->layout, rf_placement_kind_name(k->place),
             rf_strategy_name(k->strategy), k->sim.predicted_s, k->sim.predicted_s / fastest,
             best[i] + 1);
    }
  }
  g_free(best);
}

/* The memory a candidate shows: its simulation's (refit's executor counts the schedule it
 * simulated, refit run's) where it was simulated, else the bound step's. */
static const RfAdviseOutcome *memory_of(const RfAdviseCandidate *k) {
  return k->simulated && k->sim.ok ? &k->sim : &k->bound;
}

/* The mem/GPU cell: GB, with a * where the plan's stages estimated it (footnote in the table). */
static const char *memory_cell(const RfAdviseCandidate *k, char *buf, size_t n) {
  const RfAdviseOutcome *m = memory_of(k);
  g_snprintf(buf, n, "%.4g%s", m->peak_bytes / 1e9,
             m->memory_from == RF_MEMORY_FROM_STAGES ? "*" : "");
  return buf;
}

static void print_row(const RfAdviseCandidate *k, int i, const RfAdviseCandidate *next) {
  char mem[32];
  if (k->simulated && k->sim.ok)
    printf("%4d %6d %-6s %-20s %-12s %-17s %12.5g %10.5g %7.2f %10s  %s\n", i + 1, k->ngpus,
           rf_infer_framework_name(k->fw), k->layout, rf_placement_kind_name(k->place),
           rf_strategy_name(k->strategy), k->sim.predicted_s, k->bound.bound_s,
           k->sim.predicted_s / k->bound.bound_s, memory_cell(k, mem, sizeof mem),
           why(k, next, i < 3));
  else
    printf("%4s %6d %-6s %-20s %-12s %-17s %12s %10.5g %7s %10s  %s%s%s\n", "-", k->ngpus,
           rf_infer_framework_name(k->fw), k->layout, rf_placement_kind_name(k->place),
           rf_strategy_name(k->strategy), "-", k->bound.bound_s, "-",
           memory_cell(k, mem, sizeof mem), why(k, NULL, FALSE), k->tp_domains > 1 ? "; " : "",
           k->pruned      ? "pruned: bound above the best prediction"
           : k->simulated ? k->sim.error
                          : "-");
}

static void print_table(const Ctx *c, const RfAdviseCandidate *cands, const int *rank, int nr,
                        const Summary *s) {
  const Opts *o = c->o;
  int n = s->n;
  printf("# refit advise  model %s  train %s  infer GPUs %s  topology %s\n", o->a.model, o->a.train,
         o->gpus, o->topology);
  printf("# calibration %s; software %s (%s)%s\n", c->cal_source, rf_software_name(c->cal.software),
         rf_variant_name(c->cal.software, c->cal.variant),
         c->cal.software != RF_SOFTWARE_REFIT ? ", every feasible candidate simulated" : "");
  double oos;
  g_autofree char *model = rf_predict_model_line(c->cal.software, c->cal.variant, -1, &oos);
  printf("# model of the predictions: %s\n", model);
  print_serving(c);
  char ranks[48] = "";
  if (c->world > 1) g_snprintf(ranks, sizeof ranks, " over %d MPI ranks", c->world);
  printf("# candidates %d: %d infeasible, %d simulated, %d pruned by the bound (%.0f%% of the "
         "feasible%s), %.1f s wall%s\n",
         n, s->ndropped, s->nsim, s->npruned,
         n - s->ndropped > 0 ? 100.0 * s->npruned / (n - s->ndropped) : 0.0,
         s->per_gpus ? "; pruned within each GPU count" : "", s->wall_s, ranks);
  printf("%4s %6s %-6s %-20s %-12s %-17s %12s %10s %7s %10s  %s\n", "rank", "gpus", "engine",
         "layout", "placement", "strategy", "predicted", "bound", "ratio", "mem/GPU", "why");
  printf("%4s %6s %-6s %-20s %-12s %-17s %12s %10s %7s %10s\n", "", "", "", "", "", "", "(s)",
         "(s)", "", "(GB)");
  gboolean staged = FALSE;
  for (int i = 0; i < nr; i++) {
    print_row(&cands[rank[i]], i, i + 1 < nr ? &cands[rank[i + 1]] : NULL);
    staged |= memory_of(&cands[rank[i]])->memory_from == RF_MEMORY_FROM_STAGES;
  }
  if (staged)
    printf("# mem/GPU *: by the plan's stages, refit run's schedule too large to build for "
           "every candidate (an over-estimate where the schedule pipelines); a simulated "
           "candidate of refit's executor counts the schedule it simulated\n");
  for (int i = 0; i < n; i++)
    if (cands[i].dropped)
      printf("# infeasible: %d GPUs %s %s %s %s: %s\n", cands[i].ngpus,
             rf_infer_framework_name(cands[i].fw), cands[i].layout,
             rf_placement_kind_name(cands[i].place), rf_strategy_name(cands[i].strategy),
             cands[i].bound.error);
  for (int i = 0; i < nr; i++) {
    const RfAdviseCandidate *k = &cands[rank[i]];
    if (k->simulated && k->sim.ok && k->sim.predicted_s < k->bound.bound_s * (1 - 1e-9))
      printf("# note: %s %s %s predicted below its bound (%.4f < %.4f): the bound is not safe "
             "there\n",
             k->layout, rf_placement_kind_name(k->place), rf_strategy_name(k->strategy),
             k->sim.predicted_s, k->bound.bound_s);
  }
  print_best(cands, rank, nr);
}

static void json_cand(JsonBuilder *b, const RfAdviseCandidate *k, int rank) {
  json_builder_begin_object(b);
  rf_json_int(b, "rank", rank);
  rf_json_int(b, "infer_gpus", k->ngpus);
  rf_json_str(b, "infer", k->layout);
  rf_json_str(b, "framework", rf_infer_framework_name(k->fw));
  rf_json_int(b, "tp_domains", k->tp_domains);
  rf_json_bool(b, "tp_spans_domains", k->tp_domains > 1);
  rf_json_str(b, "placement", rf_placement_kind_name(k->place));
  rf_json_str(b, "strategy", rf_strategy_name(k->strategy));
  rf_json_str(b, "status",
              k->dropped  ? "infeasible"
              : k->pruned ? "pruned"
              : k->sim.ok ? "simulated"
                          : "failed");
  if (k->dropped) {
    rf_json_str(b, "error", k->bound.error);
  } else {
    rf_json_num(b, "lower_bound_s", k->bound.bound_s);
    rf_json_num(b, "nic_lower_bound_s", k->bound.nic_bound_s);
    rf_json_str(b, "bound_resource", k->bound.bound_what);
    const RfAdviseOutcome *m = memory_of(k);
    const RfMemory from = {.from = (RfMemoryFrom)m->memory_from};
    rf_json_int(b, "infer_weights_bytes", (gint64)m->weights_bytes);
    rf_json_int(b, "refit_extra_bytes", (gint64)m->extra_bytes);
    rf_json_int(b, "nccl_buffer_bytes", (gint64)m->nccl_bytes);
    rf_json_int(b, "infer_peak_bytes", (gint64)m->peak_bytes);
    rf_json_str(b, "memory_from", rf_memory_from_key(&from));
    rf_json_int(b, "network_bytes", (gint64)k->bound.network_bytes);
    if (k->simulated && k->sim.ok) {
      rf_json_num(b, "predicted_s", k->sim.predicted_s);
      rf_json_num(b, "ratio_to_lower_bound", k->sim.predicted_s / k->bound.bound_s);
      rf_json_str(b, "bound_by", k->sim.bound_by);
    } else if (k->simulated) {
      rf_json_str(b, "error", k->sim.error);
    }
  }
  json_builder_end_object(b);
}

static void print_json(const Ctx *c, const RfAdviseCandidate *cands, const int *rank, int nr,
                       const Summary *s) {
  int n = s->n;
  JsonBuilder *b = json_builder_new();
  json_builder_begin_object(b);
  rf_json_str(b, "model", c->o->a.model);
  rf_json_str(b, "train", c->o->a.train);
  rf_json_str(b, "topology", c->o->topology);
  rf_json_str(b, "calibration", c->cal_source);
  rf_json_str(b, "software", rf_software_name(c->cal.software));
  rf_json_str(b, "software_variant", rf_variant_name(c->cal.software, c->cal.variant));
  double oos;
  g_autofree char *key = rf_predict_model_key(c->cal.software, c->cal.variant, -1);
  g_autofree char *line = rf_predict_model_line(c->cal.software, c->cal.variant, -1, &oos);
  rf_json_str(b, "predicted_by", key);
  rf_json_str(b, "model_note", line);
  if (oos >= 0) rf_json_num(b, "out_of_sample_error_pct", oos);
  rf_json_int(b, "candidates", n);
  rf_json_int(b, "infeasible", s->ndropped);
  rf_json_int(b, "simulated", s->nsim);
  rf_json_int(b, "pruned", s->npruned);
  rf_json_num(b, "wall_s", s->wall_s);
  rf_json_int(b, "mpi_ranks", c->world);
  g_autofree char *fws =
      g_strdup_printf("%s%s%s", rf_infer_framework_name(c->fw[0]), c->nfw > 1 ? "," : "",
                      c->nfw > 1 ? rf_infer_framework_name(c->fw[1]) : "");
  rf_json_str(b, "frameworks", fws);
  rf_json_int(b, "domain_gpus", c->domain_gpus);
  rf_json_bool(b, "tp_within_domain", !c->o->cross_domain_tp);
  rf_json_num(b, "kv_reserve_bytes", c->setup.reserve_bytes);
  rf_json_str(b, "kv_reserve_from", c->reserve_note);
  rf_json_bool(b, "pruned_per_gpus", s->per_gpus);
  int *best = g_new(int, nr > 0 ? nr : 1), nb = best_per_gpus(cands, rank, nr, best);
  json_builder_set_member_name(b, "best_per_gpus");
  json_builder_begin_array(b);
  for (int i = 0; i < nb; i++)
    json_cand(b, &cands[rank[best[i]]], best[i] + 1);
  json_builder_end_array(b);
  g_free(best);
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

static gboolean write_csv(const char *path, const RfAdviseCandidate *cands, const int *rank, int nr,
                          GError **error) {
  FILE *f = fopen(path, "w");
  if (!f) {
    g_set_error(error, RF_ERROR, RF_ERROR_IO, "--csv %s: %s", path, g_strerror(errno));
    return FALSE;
  }
  fprintf(f, "rank,infer_gpus,infer,tp,placement,strategy,status,predicted_s,lower_bound_s,"
             "ratio,infer_peak_bytes,bound_by,framework,tp_domains\n");
  for (int i = 0; i < nr; i++) {
    const RfAdviseCandidate *k = &cands[rank[i]];
    gboolean ok = k->simulated && k->sim.ok;
    fprintf(f, "%d,%d,%s,%d,%s,%s,%s,", ok ? i + 1 : 0, k->ngpus, k->layout, k->par.tp,
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
    fprintf(f, "%" G_GUINT64_FORMAT ",\"%s\",%s,%d\n", (guint64)memory_of(k)->peak_bytes,
            ok ? k->sim.bound_by : "", rf_infer_framework_name(k->fw), k->tp_domains);
  }
  gboolean ok = fclose(f) == 0;
  if (!ok) g_set_error(error, RF_ERROR, RF_ERROR_IO, "--csv %s: %s", path, g_strerror(errno));
  return ok;
}

/* Whether the plotting Python (REFIT_PYTHON, else /usr/bin/python3) imports matplotlib. */
static gboolean have_matplotlib(const char **python) {
  *python = g_getenv("REFIT_PYTHON") ? g_getenv("REFIT_PYTHON") : "/usr/bin/python3";
  char *argv[] = {(char *)*python, "-c", "import matplotlib", NULL};
  int status = 0;
  return g_spawn_sync(NULL, argv, NULL, G_SPAWN_STDOUT_TO_DEV_NULL | G_SPAWN_STDERR_TO_DEV_NULL,
                      NULL, NULL, NULL, NULL, &status, NULL) &&
         g_spawn_check_wait_status(status, NULL);
}

/* --plot: a CSV of the ranked rows through scripts/advise_plot.py (matplotlib); skipped with a
 * line on stderr, not failed, when matplotlib is missing. */
static gboolean write_plot(const char *png, const char *title, const RfAdviseCandidate *cands,
                           const int *rank, int nr, GError **error) {
  const char *python;
  if (!have_matplotlib(&python)) {
    fprintf(stderr,
            "refit advise: --plot %s skipped: %s cannot import matplotlib (install it, or set "
            "REFIT_PYTHON to a Python that has it)\n",
            png, python);
    return TRUE;
  }
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

/* ---------- the candidates ---------- */

static gboolean parse_list(const char *s, const char *flag, int *out, int *n, GError **error) {
  GArray *a = parse_counts(s, flag, error);
  if (!a) return FALSE;
  *n = 0;
  for (guint i = 0; i < a->len && *n < 64; i++)
    out[(*n)++] = g_array_index(a, int, i);
  g_array_free(a, TRUE);
  return TRUE;
}

/* --ep on|off|both into with / without EP. */
static gboolean parse_ep(const char *s, gboolean *with_ep, gboolean *without_ep, GError **error) {
  *with_ep = *without_ep = TRUE;
  if (!s || !strcmp(s, "both")) return TRUE;
  if (!strcmp(s, "on"))
    *without_ep = FALSE;
  else if (!strcmp(s, "off"))
    *with_ep = FALSE;
  else {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "--ep wants on, off or both, got '%s'", s);
    return FALSE;
  }
  return TRUE;
}

/* --placement: a comma list (default split). Returns the count, -1 + error on a bad name. */
static int parse_placements(const char *s, RfPlacementKind out[RF_PLACE_COUNT], GError **error) {
  if (!s) {
    out[0] = RF_PLACE_SPLIT;
    return 1;
  }
  int n = 0;
  char **tok = g_strsplit(s, ",", -1);
  for (int i = 0; tok[i] && n < RF_PLACE_COUNT; i++)
    if (!rf_placement_kind_parse(tok[i], &out[n++], error)) {
      g_strfreev(tok);
      return -1;
    }
  g_strfreev(tok);
  return n;
}

/* The search space of the options, enumerated into cands. */
static gboolean build_candidates(const Ctx *c, GArray *cands, GError **error) {
  const Opts *o = c->o;
  int tps[64], ntps = 0;
  RfAdviseSpace sp = {0};
  RfStrategy st[RF_STRATEGY_COUNT];
  RfPlacementKind pl[RF_PLACE_COUNT];
  if (o->tps && !parse_list(o->tps, "--tp", tps, &ntps, error)) return FALSE;
  if (!parse_ep(o->eps, &sp.with_ep, &sp.without_ep, error)) return FALSE;
  GArray *gpus = parse_counts(o->gpus, "--infer-gpus", error);
  if (!gpus) return FALSE;
  sp.nstrategy = rf_args_strategies(&o->a, st, error);
  sp.nplace = sp.nstrategy < 0 ? -1 : parse_placements(o->placements, pl, error);
  gboolean ok = sp.nstrategy >= 0 && sp.nplace >= 0;
  if (ok) {
    sp.gpus = (const int *)gpus->data, sp.ngpus = (int)gpus->len;
    sp.tps = o->tps ? tps : NULL, sp.ntps = ntps;
    sp.place = pl, sp.strategy = st;
    sp.fw = c->fw, sp.nfw = c->nfw;
    sp.domain_gpus = c->domain_gpus, sp.cross_domain_tp = o->cross_domain_tp;
    ok = rf_advise_candidates(c->setup.arch, &sp, cands, error);
  }
  g_array_free(gpus, TRUE);
  return ok;
}

/* ---------- MPI ---------- */

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

/* The search's collective steps (advise_search.h), done by real/'s MPI world. */
static gboolean comm_allgather(const void *mine, void *all, size_t bytes, void *ud,
                               GError **error) {
  (void)ud;
  return rf_real_world_allgather(mine, all, bytes, error);
}

static gboolean comm_min_post(double v, void *ud, GError **error) {
  (void)ud;
  return rf_real_world_min_post(v, error);
}

static gboolean comm_min_poll(double *v, void *ud, GError **error) {
  (void)ud;
  return rf_real_world_min_poll(v, error);
}

static gboolean comm_min_end(double *v, void *ud, GError **error) {
  (void)ud;
  return rf_real_world_min_end(v, error);
}

/* At most one line a second (and the last one): done/total and an ETA from the mean so far. */
static void progress(const char *what, int done, int total, double el, void *ud) {
  static gint64 last;
  const Ctx *c = ud;
  if (c->o->quiet || c->o->a.json || c->rank) return;
  gint64 now = g_get_monotonic_time();
  if (done < total && now - last < G_USEC_PER_SEC) return;
  last = now;
  double eta = done > 0 ? el / done * (total - done) : 0;
  gboolean tty = isatty(2);
  g_printerr("%s# advise: %s %d/%d, %.0f s, ETA %.0f s%s", tty ? "\r" : "", what, done, total, el,
             eta, tty && done < total ? "" : "\n");
}

/* More than one inference GPU count among the candidates: each is then searched to its own best. */
static gboolean several_counts(const RfAdviseCandidate *k, int n) {
  for (int i = 1; i < n; i++)
    if (k[i].ngpus != k[0].ngpus) return TRUE;
  return FALSE;
}

/* Steps 2 and 3, with MPI started when the launcher gave more than one rank (or --mpi): once
 * every option and the candidate list are checked (every rank found the same errors before;
 * launcher_rank_zero printed them once). *started says whether MPI started. */
static gboolean search(Ctx *c, int *argc, char ***argv, RfAdviseCandidate *k, int n, int *order,
                       int *nord, gboolean *started, GError **error) {
  if (c->o->mpi || launcher_world() > 1) {
    RfRealWorld world;
    if (!rf_real_world_start(argc, argv, FALSE, &world, error)) return FALSE;
    *started = TRUE;
    c->rank = world.rank, c->world = world.world;
  }
  RfAdviseComm comm = {c->rank,      c->world, comm_allgather, comm_min_post, comm_min_poll,
                       comm_min_end, NULL};
  RfAdviseSearch s = {.jobs = c->o->jobs,
                      .exhaustive = c->o->exhaustive,
                      .per_gpus = several_counts(k, n),
                      .eval = rf_advise_evaluate,
                      .eval_ud = &c->setup,
                      .comm = &comm,
                      .progress = progress,
                      .progress_ud = c};
  gboolean ok = rf_advise_search(&s, k, n, order, nord, error);
  if (!ok && c->world > 1) {
    /* the other ranks may wait for this one in a collective: take the job down */
    fprintf(stderr, "refit advise: rank %d: %s\n", c->rank, (*error)->message);
    rf_real_world_abort(rf_error_exit_status(*error));
  }
  return ok;
}

/* ---------- the command ---------- */

#define ADVISE_NENTRIES 22 /* with the terminator */

/* The entries of `refit advise`: the shared ones (args.h) where every command means the same. */
static void advise_entries(Opts *o, GOptionEntry *entries) {
  const GOptionEntry e[ADVISE_NENTRIES] = {
      {0}, /* --model (shared) */
      {0}, /* --train (shared) */
      {"infer-gpus", 'n', 0, G_OPTION_ARG_STRING, &o->gpus,
       "Inference GPUs: N, A-B (A, 2A, 4A ... and B) or a comma list", "N|A-B"},
      {"topology", 'T', 0, G_OPTION_ARG_STRING, &o->topology, "Cluster (default dgx-h100)",
       "NAME|FILE"},
      {"tp", 0, 0, G_OPTION_ARG_STRING, &o->tps,
       "Allowed inference TP values: N, A-B or a list (default: every divisor of the GPU count)",
       "LIST"},
      {"ep", 0, 0, G_OPTION_ARG_STRING, &o->eps,
       "Expert parallel (vLLM: EP = TP x DP; SGLang: EP = TP inside each engine): on, off or both "
       "(default both, MoE only)",
       "MODE"},
      {"infer-framework", 0, 0, G_OPTION_ARG_STRING, &o->frameworks,
       "Engines whose layouts to try: vllm, sglang or vllm,sglang (default both; SGLang with "
       "attention DP and EP of 1 or TP; vLLM's TP x DP and EP = TP x DP are left to vLLM, and "
       "vLLM's EP = TP per engine, placed as SGLang's, is tried as SGLang)",
       "LIST"},
      {"allow-cross-domain-tp", 0, 0, G_OPTION_ARG_NONE, &o->cross_domain_tp,
       "Also try TP groups larger than one NVLink domain (default: TP within a domain, as "
       "serving keeps its all-reduces on NVLink); such candidates are flagged",
       NULL},
      {0}, /* --strategy (shared) */
      {"placement", 0, 0, G_OPTION_ARG_STRING, &o->placements,
       "Placements to try: split, interleaved or both as a list (default split)", "LIST"},
      {"kv-reserve", 0, 0, G_OPTION_ARG_STRING, &o->kv_reserve,
       "Memory per GPU kept from the weights for the KV cache: GiB (20 or 20GiB), GB (21.5GB), or "
       "a fraction of GPU memory (0.3 or 30%); default 10% (vLLM's default "
       "gpu_memory_utilization 0.9); 0 for none",
       "GIB|NGB|FRAC"},
      {"calibration", 'c', 0, G_OPTION_ARG_FILENAME, &o->calib,
       "Calibration file (default: the topology's, docs/topologies.md)", "FILE"},
      {"jobs", 'j', 0, G_OPTION_ARG_INT, &o->jobs, "Forked workers (default: the core count)", "N"},
      {"mpi", 0, 0, G_OPTION_ARG_NONE, &o->mpi,
       "Start MPI and spread the candidates over the ranks (automatic under mpirun or srun with "
       "more than one rank)",
       NULL},
      {"exhaustive", 0, 0, G_OPTION_ARG_NONE, &o->exhaustive,
       "Simulate every feasible candidate (no pruning)", NULL},
      {"software", 0, 0, G_OPTION_ARG_STRING, &o->software,
       "Rank what this software would do (refit sim --software): refit (default), nemo-rl "
       "(hybrid, gather-broadcast) or nccl-m2n (m2n); a published-software model simulates every "
       "feasible candidate (its time is not bounded by the plan)",
       "NAME"},
      {"software-variant", 0, 0, G_OPTION_ARG_STRING, &o->variant,
       "Code path of the software model (refit sim --software-variant)", "NAME"},
      {0}, /* --json (shared) */
      {"csv", 0, 0, G_OPTION_ARG_FILENAME, &o->csv, "Also write the ranked rows as CSV", "FILE"},
      {"plot", 0, 0, G_OPTION_ARG_FILENAME, &o->plot,
       "Plot the best predicted time against inference GPUs (each point named; per strategy "
       "behind), or against TP for one GPU count; skipped with a message without matplotlib",
       "FILE.png"},
      /* not the shared --quiet: advise's silences its progress line */
      {"quiet", 'q', 0, G_OPTION_ARG_NONE, &o->quiet, "No progress line on stderr", NULL},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  memcpy(entries, e, sizeof e);
  const struct {
    int at;
    const char *name;
  } shared[] = {{0, "model"}, {1, "train"}, {8, "strategy"}, {17, "json"}};
  for (size_t i = 0; i < G_N_ELEMENTS(shared); i++)
    if (!rf_args_entry(&o->a, shared[i].name, &entries[shared[i].at]))
      g_error("advise: no shared option --%s", shared[i].name);
}

static void opts_clear(Opts *o) {
  rf_args_clear(&o->a);
  g_free(o->topology), g_free(o->gpus), g_free(o->tps), g_free(o->eps), g_free(o->placements);
  g_free(o->calib), g_free(o->software), g_free(o->variant);
  g_free(o->kv_reserve), g_free(o->csv), g_free(o->plot), g_free(o->frameworks);
}

static GOptionContext *advise_context(Opts *o, GOptionEntry *entries) {
  advise_entries(o, entries);
  g_set_prgname("refit advise");
  GOptionContext *ctx =
      g_option_context_new("- search inference layouts, placements and strategies");
  g_option_context_set_summary(
      ctx, "Enumerate vLLM layouts (TP x DP, with and without EP) and SGLang layouts (attention\n"
           "DP, EP) for the given GPU counts, placements and strategies, TP within one NVLink\n"
           "domain and a KV-cache reserve kept by default; drop those the model or the memory\n"
           "cannot take; bound every candidate with its plan; simulate in order of bound, never\n"
           "simulating a candidate whose bound exceeds the best prediction so far (of its GPU\n"
           "count, when several are searched: the best of each is printed). docs/advise.md.");
  g_option_context_set_description(ctx, RF_EXIT_STATUS_HELP);
  g_option_context_add_main_entries(ctx, entries, NULL);
  return ctx;
}

/* The options once parsed: their ranges, the topology's memory, the calibration, the software,
 * the model. Fills c (c->setup borrows from c and *model). */
static gboolean advise_setup(Ctx *c, RfModel **model, GError **error) {
  Opts *o = c->o;
  RfAdviseSetup *su = &c->setup;
  if (!o->a.model || !o->a.train || !o->gpus) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "need --model, --train and --infer-gpus");
    return FALSE;
  }
  if (o->jobs < 1 || o->jobs > 1024) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "--jobs must be 1..1024");
    return FALSE;
  }
  if (o->plot && (!g_str_has_suffix(o->plot, ".png") || g_file_test(o->plot, G_FILE_TEST_IS_DIR))) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "--plot wants a FILE.png, got '%s'", o->plot);
    return FALSE;
  }
  if (!o->topology) o->topology = g_strdup(RF_DEFAULT_SIM_TOPOLOGY);
  RfTopology *topo = rf_topology_load(o->topology, error);
  if (!topo) return FALSE;
  su->mem_bytes = topo->memory_GB * 1e9;
  c->domain_gpus = topo->gpus_per_domain;
  gboolean neutral = FALSE;
  if (o->kv_reserve)
    g_snprintf(c->reserve_note, sizeof c->reserve_note, "--kv-reserve %s", o->kv_reserve);
  else
    g_snprintf(c->reserve_note, sizeof c->reserve_note,
               "default %.0f%% of GPU memory: vLLM's default gpu_memory_utilization 0.9 leaves "
               "weights above 90%% no KV cache; --kv-reserve sets yours",
               100 * ADVISE_DEFAULT_RESERVE);
  su->reserve_bytes = ADVISE_DEFAULT_RESERVE * MAX(su->mem_bytes, 0);
  gboolean ok =
      parse_frameworks(o->frameworks, c, error) &&
      (!o->kv_reserve || parse_reserve(o->kv_reserve, su->mem_bytes, &su->reserve_bytes, error)) &&
      rf_calibration_select(&c->cal, o->calib, topo, &c->cal_source, &neutral, error) &&
      rf_software_parse(o->software, o->variant, &c->cal.software, &c->cal.variant, error);
  rf_topology_free(topo);
  if (!ok) return FALSE;
  /* the plan's bound (its bytes on the busiest link at calibrated rates) holds for refit's flow
   * model and its executor, which moves the same messages plus software time: branch and bound
   * on it, the executor predicting what it simulates; the published software moves the bytes its
   * own way: simulate everything */
  if (c->cal.software != RF_SOFTWARE_REFIT) o->exhaustive = TRUE;
  rf_advise_bound_rates(&c->cal, &su->rates);
  *model = rf_model_load(o->a.model, error);
  if (*model && !rf_model_check_plannable(*model, error)) g_clear_pointer(model, rf_model_free);
  if (!*model) return FALSE;
  su->model = o->a.model, su->train = o->a.train, su->topology = o->topology;
  su->arch = *model, su->cal = &c->cal;
  return TRUE;
}

/* Step 1: the candidates, the unfit dropped; FALSE + error when none is left to search. */
static gboolean advise_candidates(const Ctx *c, GArray *cands, GError **error) {
  if (!build_candidates(c, cands, error)) return FALSE;
  RfAdviseCandidate *k = (RfAdviseCandidate *)cands->data;
  int n = (int)cands->len;
  if (n == 0) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "no candidate: no allowed TP value divides the inference GPU counts (%s)%s",
                c->o->gpus,
                c->o->cross_domain_tp ? ""
                                      : " and stays within one NVLink domain "
                                        "(--allow-cross-domain-tp allows more)");
    return FALSE;
  }
  if (rf_advise_drop_unfit(&c->setup, k, n) == n) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "no feasible candidate among %d: %s%s", n,
                k[0].bound.error, n > 1 ? " (and the like; --json lists every reason)" : "");
    return FALSE;
  }
  return TRUE;
}

/* Step 4 (rank 0): the table or JSON, the CSV and the plot; FALSE + error when a file cannot
 * be written or every simulation failed. */
static gboolean advise_report(const Ctx *c, const RfAdviseCandidate *k, const int *order, int nord,
                              const Summary *s, GError **error) {
  const Opts *o = c->o;
  if (o->a.json)
    print_json(c, k, order, nord, s);
  else
    print_table(c, k, order, nord, s);
  if (o->csv && !write_csv(o->csv, k, order, nord, error)) return FALSE;
  if (o->plot) {
    char *title =
        g_strdup_printf("refit advise: %s, train %s, %s", o->a.model, o->a.train, o->topology);
    gboolean ok = write_plot(o->plot, title, k, order, nord, error);
    g_free(title);
    if (!ok) return FALSE;
  }
  if (!s->nok) {
    g_set_error(error, RF_ERROR, RF_ERROR_PEER, "every simulation failed: %s",
                nord ? k[order[0]].sim.error : "-");
    return FALSE;
  }
  return TRUE;
}

static void summarize(const RfAdviseCandidate *k, int n, gint64 t0, Summary *s) {
  *s = (Summary){.n = n, .per_gpus = several_counts(k, n)};
  for (int i = 0; i < n; i++) {
    s->ndropped += k[i].dropped; /* with those whose plan or refit memory failed */
    s->nsim += k[i].simulated;
    s->npruned += k[i].pruned;
    s->nok += k[i].simulated && k[i].sim.ok;
  }
  s->wall_s = (g_get_monotonic_time() - t0) / 1e6;
}

int rf_cmd_advise(int argc, char **argv) {
  Opts o = {0};
  o.jobs = (int)g_get_num_processors();
  GOptionEntry entries[ADVISE_NENTRIES];
  GOptionContext *ctx = advise_context(&o, entries);
  GError *e = NULL;
  Ctx c = {.o = &o, .world = 1};
  gboolean started = FALSE, print_error = launcher_rank_zero();
  GArray *cands = g_array_new(FALSE, TRUE, sizeof(RfAdviseCandidate));
  RfModel *model = NULL;
  int *order = NULL, nord = 0;
  gint64 t0 = g_get_monotonic_time();
  if (!rf_args_parse(ctx, &argc, &argv, FALSE, &e) || !advise_setup(&c, &model, &e) ||
      !advise_candidates(&c, cands, &e))
    goto out;
  RfAdviseCandidate *k = (RfAdviseCandidate *)cands->data;
  int n = (int)cands->len;
  order = g_new(int, n);
  gboolean ok = search(&c, &argc, &argv, k, n, order, &nord, &started, &e);
  if (started) print_error = c.rank == 0;
  if (!ok || c.rank) goto out; /* one answer, from rank 0 */
  Summary s;
  summarize(k, n, t0, &s);
  advise_report(&c, k, order, nord, &s, &e);
out:
  rf_advise_candidates_clear((RfAdviseCandidate *)cands->data, (int)cands->len);
  g_array_free(cands, TRUE);
  g_free(order);
  rf_model_free(model);
  rf_calibration_clear(&c.cal);
  g_free(c.cal_source);
  opts_clear(&o);
  g_option_context_free(ctx);
  if (started) rf_real_world_end();
  return rf_cmd_exit("refit advise", e, print_error);
}
