/* `refit run`: options, world check, one verified refit per strategy, the report on rank 0. */
#include "boot.h"
#include "error.h"
#include "real.h"
#include "real_engine.h"

#include "args.h"
#include "report.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct {
  RfStrategy strategy;
  gboolean ok;
  char *error;
  RfPlanStats plan;
  uint64_t nxfers;
  RfResult res;
  RfRealSpread spread; /* copied: min_s / max_s owned here */
} Row;

static void row_clear(Row *r) {
  g_free(r->error);
  rf_result_clear(&r->res);
  g_free(r->spread.min_s);
  g_free(r->spread.max_s);
}

static double gbps(uint64_t bytes, double s) {
  return s > 0 ? bytes / s / 1e9 : 0.0;
}

/* Do the MPI ranks sit where the plan (and the simulator) put them? A node is inside one NVLink
 * domain, and on a topology whose domains are single nodes (<= 8 GPUs) a domain is one node. */
static char *placement_check(const RfProblem *pb, const char *hosts) {
  if (!hosts) return g_strdup("unknown (host names not exchanged)");
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

static void print_header(const RfArgs *a, const RfRealOptions *o, const RfProblem *pb, int world) {
  printf("# refit run  backend %s%s  model %s  train %s  infer %s  spec %s\n", o->backend,
         o->local ? " (all ranks in one process)" : "", a->model ? a->model : "-",
         a->train ? a->train : "-", a->infer ? a->infer : "-", a->spec ? a->spec : "-");
  printf("# ranks %d (train %d, infer %d), %s %d; topology %s (%d GPUs/domain)\n", pb->nranks,
         pb->src.nranks, pb->dst.nranks, o->local ? "processes" : "MPI world", o->local ? 1 : world,
         pb->topo->name, pb->topo->gpus_per_domain);
  printf("# staging %" G_GUINT64_FORMAT " B per rank per direction, max %d ops per group",
         o->staging_bytes, o->max_ops);
  if (o->plan_only) {
    printf("\n# --memory: sizes only, no data moved\n");
    return;
  }
  printf(", warm-up %d, iterations %d, timeout %.1f s\n", o->warmup, o->iters, o->timeout_s);
  printf("# time = median over iterations (min / max beside it); algbw = bytes / time; a stage's\n"
         "# window runs from the end of the plan stage before its first to the end of its last\n");
}

static double gib(uint64_t b) {
  return b / (double)(1ull << 30);
}

static void print_row(const Row *r, gboolean memory) {
  printf("\n## %s\n", rf_strategy_name(r->strategy));
  if (!r->ok) {
    printf("#  failed: %s\n", r->error);
    return;
  }
  if (memory) {
    printf(
        "   largest rank: %.3f GiB = source %.3f + destination 2 x %.3f + holding %.3f + staging "
        "%.3f (maxima over ranks, each)\n",
        gib(r->spread.rank_bytes), gib(r->spread.src_bytes), gib(r->spread.dst_bytes),
        gib(r->spread.hold_bytes), gib(r->spread.staging_bytes));
    printf("#  %" G_GUINT64_FORMAT " groups, %" G_GUINT64_FORMAT " transfers, %" G_GUINT64_FORMAT
           " B to deliver\n",
           r->spread.rounds, r->nxfers, r->plan.payload_bytes);
    return;
  }
  printf("#  %-10s %14s %8s %12s %12s %12s %12s %8s\n", "stage", "bytes", "xfers", "time", "min",
         "max", "algbw", "#wrong");
  printf("#  %-10s %14s %8s %12s %12s %12s %12s %8s\n", "", "(B)", "", "(s)", "(s)", "(s)",
         "(GB/s)", "");
  for (int i = 0; i < r->res.nstages; i++) {
    const RfStageTime *s = &r->res.stages[i];
    double t = s->end_s - s->start_s;
    printf("   %-10s %14" G_GUINT64_FORMAT " %8s %12.6f %12.6f %12.6f %12.3f %8s\n", s->name,
           s->bytes, "", t, r->spread.min_s[i], r->spread.max_s[i], gbps(s->bytes, t), "");
  }
  printf("   %-10s %14" G_GUINT64_FORMAT " %8" G_GUINT64_FORMAT
         " %12.6f %12.6f %12.6f %12.3f %8" G_GUINT64_FORMAT "\n",
         "total", r->plan.payload_bytes, r->nxfers, r->res.total_s, r->res.min_s, r->res.max_s,
         gbps(r->plan.payload_bytes, r->res.total_s), r->res.wrong_elements);
  printf("#  %d timed iteration%s, %" G_GUINT64_FORMAT " groups, holding store %" G_GUINT64_FORMAT
         " B, staging %" G_GUINT64_FORMAT " B (largest rank); network lower bound %.6f s\n",
         r->spread.iters, r->spread.iters == 1 ? "" : "s", r->spread.rounds, r->spread.hold_bytes,
         r->spread.staging_bytes, r->res.lower_bound_s);
  if (r->spread.wrong_old)
    printf("#  %" G_GUINT64_FORMAT " elements of the previous weights changed during the refit\n",
           r->spread.wrong_old);
  if (r->res.wrong_elements)
    printf("#  verification failed: the previous weights stay in place (no swap)\n");
}

static void print_csv(const Row *rows, int n) {
  /* The first five columns are the simulator's timeline CSV. */
  printf("strategy,stage,start_s,end_s,bytes,time_s,min_s,max_s,algbw_GBps,wrong\n");
  for (int i = 0; i < n; i++) {
    const Row *r = &rows[i];
    if (!r->ok) continue;
    for (int k = 0; k < r->res.nstages; k++) {
      const RfStageTime *s = &r->res.stages[k];
      double t = s->end_s - s->start_s;
      printf("%s,%s,%.9g,%.9g,%" G_GUINT64_FORMAT ",%.9g,%.9g,%.9g,%.6g,\n",
             rf_strategy_name(r->strategy), s->name, s->start_s, s->end_s, s->bytes, t,
             r->spread.min_s[k], r->spread.max_s[k], gbps(s->bytes, t));
    }
    printf("%s,total,0,%.9g,%" G_GUINT64_FORMAT ",%.9g,%.9g,%.9g,%.6g,%" G_GUINT64_FORMAT "\n",
           rf_strategy_name(r->strategy), r->res.total_s, r->plan.payload_bytes, r->res.total_s,
           r->res.min_s, r->res.max_s, gbps(r->plan.payload_bytes, r->res.total_s),
           r->res.wrong_elements);
  }
}

static void json_row(JsonBuilder *b, const Row *r) {
#define MEMBER(name, call)                                                                         \
  do {                                                                                             \
    json_builder_set_member_name(b, (name));                                                       \
    call;                                                                                          \
  } while (0)
  json_builder_begin_object(b);
  MEMBER("strategy", json_builder_add_string_value(b, rf_strategy_name(r->strategy)));
  if (!r->ok) {
    MEMBER("error", json_builder_add_string_value(b, r->error));
    json_builder_end_object(b);
    return;
  }
  /* The simulator's fields where they mean the same, measured_s in place of predicted_s. */
  MEMBER("executor", json_builder_add_string_value(b, r->res.executor));
  MEMBER("measured_s", json_builder_add_double_value(b, r->res.total_s));
  MEMBER("min_s", json_builder_add_double_value(b, r->res.min_s));
  MEMBER("max_s", json_builder_add_double_value(b, r->res.max_s));
  MEMBER("lower_bound_s", json_builder_add_double_value(b, r->res.lower_bound_s));
  MEMBER("ratio_to_lower_bound",
         json_builder_add_double_value(
             b, r->res.lower_bound_s > 0 ? r->res.total_s / r->res.lower_bound_s : 0));
  MEMBER("network_bytes", json_builder_add_int_value(b, (gint64)r->plan.network_bytes));
  MEMBER("payload_bytes", json_builder_add_int_value(b, (gint64)r->plan.payload_bytes));
  MEMBER("messages", json_builder_add_int_value(b, (gint64)r->plan.messages));
  MEMBER("iterations", json_builder_add_int_value(b, r->spread.iters));
  MEMBER("groups", json_builder_add_int_value(b, (gint64)r->spread.rounds));
  MEMBER("holding_bytes", json_builder_add_int_value(b, (gint64)r->spread.hold_bytes));
  MEMBER("staging_bytes", json_builder_add_int_value(b, (gint64)r->spread.staging_bytes));
  MEMBER("source_bytes", json_builder_add_int_value(b, (gint64)r->spread.src_bytes));
  MEMBER("destination_bytes", json_builder_add_int_value(b, (gint64)r->spread.dst_bytes));
  MEMBER("rank_bytes", json_builder_add_int_value(b, (gint64)r->spread.rank_bytes));
  MEMBER("wrong_elements", json_builder_add_int_value(b, (gint64)r->res.wrong_elements));
  MEMBER("wrong_previous_elements", json_builder_add_int_value(b, (gint64)r->spread.wrong_old));
  json_builder_set_member_name(b, "stages");
  json_builder_begin_array(b);
  for (int i = 0; i < r->res.nstages; i++) {
    const RfStageTime *s = &r->res.stages[i];
    json_builder_begin_object(b);
    MEMBER("name", json_builder_add_string_value(b, s->name));
    MEMBER("start_s", json_builder_add_double_value(b, s->start_s));
    MEMBER("end_s", json_builder_add_double_value(b, s->end_s));
    MEMBER("bytes", json_builder_add_int_value(b, (gint64)s->bytes));
    MEMBER("min_s", json_builder_add_double_value(b, r->spread.min_s[i]));
    MEMBER("max_s", json_builder_add_double_value(b, r->spread.max_s[i]));
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
  json_builder_end_object(b);
#undef MEMBER
}

static void json_row_at(JsonBuilder *b, int i, void *rows) {
  json_row(b, &((const Row *)rows)[i]);
}

static void print_json(const Row *rows, int n) {
  JsonBuilder *b = json_builder_new();
  rf_json_rows(b, n, json_row_at, (void *)rows);
  rf_json_print(b);
}

static gboolean parse_fail(const char *s, int *rank, int *stage, GError **error) {
  if (!s) return TRUE;
  if (sscanf(s, "%d:%d", rank, stage) != 2 || *rank < 0 || *stage < 0) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "--test-fail wants RANK:STAGE, got '%s'", s);
    return FALSE;
  }
  return TRUE;
}

int rf_run_command(int argc, char **argv) {
  RfArgs a = {0};
  RfRealOptions o;
  rf_real_options_init(&o);
  char *backend = NULL, *fail = NULL;
  double staging_mib = 64.0;
  gboolean csv = FALSE;
  GOptionEntry entries[] = {
      {"backend", 'b', 0, G_OPTION_ARG_STRING, &backend,
       "host (host memory + MPI) or cuda (GPU + NCCL)", "NAME"},
      {"local", 0, 0, G_OPTION_ARG_NONE, &o.local,
       "Every rank in this one process (no MPI; with cuda: single-GPU mode)", NULL},
      {"warmup", 'w', 0, G_OPTION_ARG_INT, &o.warmup, "Untimed refits first (default 1)", "N"},
      {"iters", 'n', 0, G_OPTION_ARG_INT, &o.iters,
       "Timed refits, one training step each (default 5)", "N"},
      {"staging-mib", 0, 0, G_OPTION_ARG_DOUBLE, &staging_mib,
       "Staging bound per rank and direction in MiB (default 64)", "MIB"},
      {"max-ops", 0, 0, G_OPTION_ARG_INT, &o.max_ops,
       "Send + receive operations of a rank per group (default 32)", "N"},
      {"timeout", 0, 0, G_OPTION_ARG_DOUBLE, &o.timeout_s,
       "Seconds without progress before a stage counts as failed (default 60)", "S"},
      {"csv", 0, 0, G_OPTION_ARG_NONE, &csv, "Print CSV rows instead of a table", NULL},
      {"memory", 0, 0, G_OPTION_ARG_NONE, &o.plan_only,
       "Only the memory the largest rank needs (no buffers, no MPI, no data moved)", NULL},
      {"test-fail", 0, 0, G_OPTION_ARG_STRING, &fail,
       "Test hook: RANK stops responding at STAGE of the first refit", "RANK:STAGE"},
      {"test-drop", 0, 0, G_OPTION_ARG_INT, &o.corrupt_rank,
       "Test hook: RANK loses one received chunk in the last refit", "RANK"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  g_set_prgname("refit run");
  GOptionContext *ctx =
      g_option_context_new("- run the refit on real memory, verify every element");
  g_option_context_set_main_group(ctx, rf_args_group(&a));
  g_option_context_add_main_entries(ctx, entries, NULL);
  GError *perr = NULL, *e = NULL;
  gboolean parsed = g_option_context_parse(ctx, &argc, &argv, &perr);
  if (parsed && argc > 1)
    g_set_error(&perr, RF_ERROR, RF_ERROR_INPUT, "unexpected argument '%s'", argv[1]);
  if (!perr) parse_fail(fail, &o.fail_rank, &o.fail_stage, &perr);
  if (!perr && (staging_mib <= 0 || staging_mib > 1 << 20))
    g_set_error(&perr, RF_ERROR, RF_ERROR_INPUT, "--staging-mib must be > 0");
  if (!perr && o.local && fail)
    g_set_error(&perr, RF_ERROR, RF_ERROR_INPUT, "--test-fail needs MPI (one process per rank)");
  if (backend) {
    g_free(o.backend);
    o.backend = backend;
    backend = NULL;
  }
  o.staging_bytes = (uint64_t)(staging_mib * 1048576.0);
  if (o.plan_only) o.local = TRUE;

  int rc = 2;
  RfProblem *pb = NULL;
  RfExecutor *ex = NULL;
  Row *rows = NULL;
  int nrows = 0;
  char *placement = NULL;
  /* MPI first, so that only rank 0 reports an error every rank would report. */
  if (!rf_boot_init(&argc, &argv, o.local, &e)) {
    fprintf(stderr, "refit run: %s\n", e->message);
    goto out;
  }
  const RfBoot *b = rf_boot();
  gboolean root = b->rank == 0;
  if (perr) {
    if (root) fprintf(stderr, "refit run: %s\n", perr->message);
    goto out;
  }
  RfStrategy strategies[RF_STRATEGY_COUNT];
  int ns = rf_args_strategies(&a, strategies, &e);
  if (ns < 0) goto report;
  pb = rf_args_problem(&a, &e);
  if (!pb) goto report;
  if (!o.local && b->world != pb->nranks) {
    if (root)
      fprintf(stderr,
              "refit run: the MPI world has %d rank%s, the plan needs %d (%d training + %d "
              "inference): launch with mpirun -np %d (or srun -n %d), or use --local\n",
              b->world, b->world == 1 ? "" : "s", pb->nranks, pb->src.nranks, pb->dst.nranks,
              pb->nranks, pb->nranks);
    goto out;
  }
  ex = rf_real_executor_new(&o, &e);
  if (!ex) goto report;
  if (!ex->prepare(ex, pb, &e)) {
    if (root || e->code != RF_REAL_ERR_PEER) fprintf(stderr, "refit run: %s\n", e->message);
    goto out;
  }
  /* after the checks and the set-up, so that a bad input gets exactly one line */
  if (root && !a.quiet && pb->placement_note)
    fprintf(stderr, "# placement: %s\n", pb->placement_note);
  if (!o.local) {
    /* collective: every rank takes part, rank 0 reports */
    char *hosts = rf_boot_hosts(o.timeout_s);
    placement = placement_check(pb, hosts);
    g_free(hosts);
  }
  rows = g_new0(Row, ns);
  for (int i = 0; i < ns; i++) {
    Row *r = &rows[nrows++];
    r->strategy = strategies[i];
    GError *pe = NULL;
    RfPlan *plan = rf_plan_build(pb, strategies[i], NULL, &pe);
    if (plan) {
      r->plan = plan->stats;
      r->nxfers = plan->nxfers;
      if (ex->run(ex, plan, &r->res, &pe)) {
        r->ok = TRUE;
        const RfRealSpread *sp = rf_real_spread(ex);
        r->spread = *sp;
        r->spread.min_s = g_memdup2(sp->min_s, sizeof(double) * MAX(1, sp->nstages));
        r->spread.max_s = g_memdup2(sp->max_s, sizeof(double) * MAX(1, sp->nstages));
      } else {
        /* A failed run may have left peers inside a group: the whole job goes down. */
        fprintf(stderr, "refit run: %s: %s\n", rf_strategy_name(strategies[i]), pe->message);
        rf_plan_free(plan);
        g_clear_error(&pe);
        rc = 3;
        if (b->mpi && b->world > 1) rf_boot_abort(3);
        goto out;
      }
      rf_plan_free(plan);
    } else {
      /* Every rank builds the same plan: the same failure everywhere, reported once. */
      r->error = g_strdup(pe->message);
      g_clear_error(&pe);
    }
  }
  if (root) {
    uint64_t wrong = 0;
    int failed = 0;
    for (int i = 0; i < nrows; i++) {
      wrong += rows[i].res.wrong_elements;
      failed += !rows[i].ok;
    }
    if (a.json) {
      print_json(rows, nrows);
    } else if (csv) {
      print_csv(rows, nrows);
    } else {
      print_header(&a, &o, pb, b->world);
      if (placement) printf("# placement: %s\n", placement);
      for (int i = 0; i < nrows; i++)
        print_row(&rows[i], o.plan_only);
      if (!o.plan_only)
        printf("\n# wrong elements: %" G_GUINT64_FORMAT "\n", wrong);
      else
        printf("\n");
      if (failed)
        printf("# FAILED: %d strateg%s could not be planned\n", failed, failed == 1 ? "y" : "ies");
      else
        printf("# %s\n", wrong ? "FAILED: wrong elements" : "OK");
    }
    if (a.json || csv) fprintf(stderr, "# wrong elements: %" G_GUINT64_FORMAT "\n", wrong);
    rc = wrong ? 1 : failed ? 2 : 0;
  } else {
    uint64_t wrong = 0;
    int failed = 0;
    for (int i = 0; i < nrows; i++) {
      wrong += rows[i].res.wrong_elements;
      failed += !rows[i].ok;
    }
    rc = wrong ? 1 : failed ? 2 : 0;
  }
  goto out;
report:
  if (root) fprintf(stderr, "refit run: %s\n", e->message);
out:
  fflush(stdout);
  for (int i = 0; i < nrows; i++)
    row_clear(&rows[i]);
  g_free(rows);
  if (ex) ex->destroy(ex);
  rf_problem_free(pb);
  rf_boot_finalize();
  g_clear_error(&e);
  g_clear_error(&perr);
  g_option_context_free(ctx);
  rf_args_clear(&a);
  g_free(fail);
  g_free(placement);
  g_free(o.backend);
  return rc;
}
