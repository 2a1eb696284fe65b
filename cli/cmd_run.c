/* `refit run`: options (all checked before MPI starts), world check, one verified refit per
 * strategy, the report on rank 0. The MPI lifecycle is real/run.c. */
#include "args.h"
#include "backend.h" /* rf_real_nccl_blocking */
#include "commands.h"
#include "error.h"
#include "quant.h"
#include "real.h"
#include "report.h"
#include "schedule.h"
#include "sim.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct {
  RfStrategy strategy;
  gboolean ok;
  GError *error; /* when not ok: the plan could not be built */
  RfPlanStats plan;
  uint64_t nxfers;
  RfResult res;
  RfRealSpread spread; /* copied: min_s / max_s owned here */
  gboolean lane_comms; /* --lane-comms */
} Row;

static void row_clear(Row *r) {
  g_clear_error(&r->error);
  rf_result_clear(&r->res);
  g_free(r->spread.min_s);
  g_free(r->spread.max_s);
}

static double gbps(uint64_t bytes, double s) {
  return s > 0 ? bytes / s / 1e9 : 0.0;
}

/* Communicators in use: by the run under MPI, and by --memory's count of it (--local runs none:
 * a round moves by copies); lane communicators, where the lanes have their own. */
static gboolean on_comms(const RfRealOptions *o) {
  return !o->local || o->plan_only;
}
static gboolean lanes_on_comms(const RfRealOptions *o) {
  return o->lane_comms && on_comms(o);
}

static void print_header(const RfArgs *a, const RfRealOptions *o, const RfProblem *pb, int world,
                         const char *hosts_note, const RfStaging *staging) {
  printf("# refit run  backend %s%s  model %s  train %s  infer %s  spec %s\n", o->backend,
         o->local ? " (all ranks in one process)" : "", a->model ? a->model : "-",
         a->train ? a->train : "-", a->infer ? a->infer : "-", a->spec ? a->spec : "-");
  printf("# ranks %d (train %d, infer %d), %s %d; topology %s (%d GPUs/domain)\n", pb->nranks,
         pb->src.nranks, pb->dst.nranks, o->local ? "processes" : "MPI world", o->local ? 1 : world,
         pb->topo->name, pb->topo->gpus_per_domain);
  if (pb->placement_note) printf("# placement: %s\n", pb->placement_note);
  g_autofree char *quant = rf_quant_describe(pb);
  if (quant) printf("# quant: %s\n", quant);
  if (hosts_note) printf("# hosts: %s\n", hosts_note);
  printf("# weights %s\n",
         o->double_bank ? "double bank (--double-bank): the refit writes a second bank, swapped in "
                          "once every rank verified it; generation goes on from the first"
                        : "in place: generation is paused, the refit writes the served buffers; a "
                          "failed refit leaves them stale (not served) and is retried from the "
                          "training shards");
  /* the first strategy's (model/plan/staging.h); a row whose choice differs prints its own */
  g_autofree char *st = staging ? rf_staging_describe(staging) : NULL;
  printf("# %s", st ? st : "staging, lanes and operation bound: no strategy planned");
  if (lanes_on_comms(o))
    printf(", each lane's groups on a communicator and stream of its own");
  else if (on_comms(o))
    printf(", every lane's groups on one communicator and stream (--one-comm)");
  if (o->plan_only) {
    printf("\n# --memory: sizes only, no data moved; GB = 1e9 bytes; NCCL's point-to-point "
           "buffers counted, not allocated here; not counted: NCCL's fixed structures per "
           "communicator, the CUDA context, the copy lists\n");
    return;
  }
  printf(", warm-up %d, iterations %d, timeout %.1f s\n", o->warmup, o->iters, o->timeout_s);
  if (!strcmp(o->backend, "cuda") && !o->local && rf_real_nccl_blocking())
    printf("# REFIT_NCCL_BLOCKING=1: blocking NCCL communicators (a measurement hook: the host "
           "launches each group itself; a dead peer can hang it, no timeout)\n");
  printf("# time = median over iterations (min / max beside it); algbw = bytes / time; a stage's\n"
         "# window runs from the end of the plan stage before its first to the end of its last\n");
}

static double gb(uint64_t b) {
  return b / 1e9;
}

/* A choice of staging, lanes and operation bound other than the header's. */
static gboolean staging_differs(const RfStaging *a, const RfStaging *b) {
  return a->staging_bytes != b->staging_bytes || a->slots != b->slots || a->max_ops != b->max_ops;
}

static void print_row(const Row *r, gboolean memory, const RfStaging *header) {
  printf("\n## %s\n", rf_strategy_name(r->strategy));
  if (!r->ok) {
    printf("#  failed: %s\n", r->error->message);
    return;
  }
  if (header && staging_differs(&r->spread.staging, header)) {
    g_autofree char *st = rf_staging_describe(&r->spread.staging);
    printf("#  %s\n", st);
  }
  if (memory) {
    const RfMemory *m = &r->spread.memory;
    g_autofree char *line = rf_memory_format(m);
    const char *banks = r->spread.banks == 2 ? "2 x " : "";
    /* the memory model's count, as refit plan / sim / advise / step print it */
    printf("   %s (%s)%s\n", line, rf_memory_from_name(m),
           rf_memory_exceeds(m) ? "  EXCEEDS GPU MEMORY" : "");
    const uint64_t own = m->own_peak_bytes; /* what refit allocates itself */
    printf("   allocated: fullest inference rank %.3f GB (%+.2f%% of the count above less NCCL's "
           "buffers: the holding store's first-fit alignment and fragmentation)\n",
           gb(r->spread.infer_alloc_bytes),
           own ? 100.0 * ((double)r->spread.infer_alloc_bytes / own - 1) : 0);
    printf("   largest rank: %.3f GB = source %.3f + destination %s%.3f + holding %.3f + staging "
           "%.3f (maxima over ranks, each)\n",
           gb(r->spread.rank_bytes), gb(r->spread.src_bytes), banks, gb(r->spread.dst_bytes),
           gb(r->spread.hold_bytes), gb(r->spread.staging_bytes));
    if (r->spread.process_ranks > 1) /* --local: every rank on one GPU (or in one host) */
      printf("   process total: %.3f GB = source + destination%s + holding + staging, summed "
             "over the %d ranks of this process\n",
             gb(r->spread.process_bytes), r->spread.banks == 2 ? " 2 x" : "",
             r->spread.process_ranks);
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
  if (r->res.wrong_elements && r->spread.banks == 2)
    printf("#  verification failed: the previous weights stay in place (no swap)\n");
  else if (r->res.wrong_elements)
    printf("#  verification failed: in place, the weights are stale and not served (generation "
           "stays paused); the refit is retried from the training shards\n");
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

/* The members of one strategy: the simulator's names where they mean the same. */
static void json_row(JsonBuilder *b, int idx, const void *rows) {
  const Row *r = &((const Row *)rows)[idx];
  rf_json_str(b, "strategy", rf_strategy_name(r->strategy));
  if (!r->ok) {
    rf_json_str(b, "error", r->error->message);
    return;
  }
  /* The simulator's fields where they mean the same, measured_s in place of predicted_s. */
  rf_json_str(b, "executor", r->res.executor);
  rf_json_num(b, "measured_s", r->res.total_s);
  rf_json_num(b, "min_s", r->res.min_s);
  rf_json_num(b, "max_s", r->res.max_s);
  rf_json_num(b, "lower_bound_s", r->res.lower_bound_s);
  rf_json_num(b, "ratio_to_lower_bound",
              r->res.lower_bound_s > 0 ? r->res.total_s / r->res.lower_bound_s : 0);
  rf_json_int(b, "network_bytes", (gint64)r->plan.network_bytes);
  rf_json_int(b, "payload_bytes", (gint64)r->plan.payload_bytes);
  rf_json_int(b, "messages", (gint64)r->plan.messages);
  rf_json_int(b, "iterations", r->spread.iters);
  rf_json_int(b, "groups", (gint64)r->spread.rounds);
  rf_json_int(b, "holding_bytes", (gint64)r->spread.hold_bytes);
  rf_json_int(b, "staging_bytes", (gint64)r->spread.staging_bytes);
  rf_json_staging(b, &r->spread.staging, r->lane_comms);
  rf_json_int(b, "source_bytes", (gint64)r->spread.src_bytes);
  rf_json_int(b, "destination_bytes", (gint64)r->spread.dst_bytes);
  rf_json_int(b, "rank_bytes", (gint64)r->spread.rank_bytes);
  /* the memory model's count (plan, sim, advise and step write the same names) */
  rf_json_int(b, "infer_weights_bytes", (gint64)r->spread.memory.weights_bytes);
  rf_json_int(b, "weight_banks", r->spread.banks);
  rf_json_int(b, "refit_extra_bytes", (gint64)r->spread.memory.extra_bytes);
  rf_json_int(b, "nccl_buffer_bytes", (gint64)r->spread.memory.nccl_bytes);
  rf_json_int(b, "infer_refit_peak_bytes", (gint64)r->spread.memory.own_peak_bytes);
  rf_json_int(b, "infer_peak_bytes", (gint64)r->spread.memory.peak_bytes);
  rf_json_bool(b, "memory_exceeded", rf_memory_exceeds(&r->spread.memory));
  rf_json_str(b, "memory_from", rf_memory_from_key(&r->spread.memory));
  rf_json_int(b, "infer_allocated_bytes", (gint64)r->spread.infer_alloc_bytes);
  rf_json_bool(b, "serving", r->spread.serving);
  rf_json_int(b, "wrong_elements", (gint64)r->res.wrong_elements);
  rf_json_int(b, "wrong_previous_elements", (gint64)r->spread.wrong_old);
  json_builder_set_member_name(b, "stages");
  json_builder_begin_array(b);
  for (int i = 0; i < r->res.nstages; i++) {
    const RfStageTime *s = &r->res.stages[i];
    json_builder_begin_object(b);
    rf_json_str(b, "name", s->name);
    rf_json_num(b, "start_s", s->start_s);
    rf_json_num(b, "end_s", s->end_s);
    rf_json_int(b, "bytes", (gint64)s->bytes);
    rf_json_num(b, "min_s", r->spread.min_s[i]);
    rf_json_num(b, "max_s", r->spread.max_s[i]);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
}

/* Options of `refit run`, every one checked before MPI starts. */
typedef struct {
  RfArgs a;
  RfRealOptions o;
  char *fail;
  double staging_mib;
  double delay_ms; /* --test-delay-ms */
  int drop;        /* --test-drop; G_MININT when not given */
  gboolean csv;
  gboolean emulate;  /* --emulate-network */
  gboolean one_comm; /* --one-comm: every lane on the data communicator */
  RfRealNetEmulation emu;
  RfStrategy strategies[RF_STRATEGY_COUNT];
  int ns;
  RfProblem *pb;
} RunCmd;

/* Under mpirun every rank runs the same checks: only world rank 0 (as the launcher's environment
 * tells it before MPI starts) prints what all of them found. */
static gboolean env_rank_zero(void) {
  const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID", NULL};
  for (int i = 0; vars[i]; i++) {
    const char *v = g_getenv(vars[i]);
    if (v) return !strcmp(v, "0");
  }
  return TRUE;
}

/* --test-fail RANK:STAGE[:kill]: a rank and a plan stage index or kind (export, broadcast,
 * inject, forward, fanout, p2p), optionally ":kill" (SIGKILL mid-stage in the last refit). */
static gboolean parse_fail(const char *s, RfRealOptions *o, GError **error) {
  g_auto(GStrv) f = g_strsplit(s, ":", 0);
  guint n = g_strv_length(f);
  guint64 r = 0, st = 0;
  gboolean ok = (n == 2 || n == 3) && g_ascii_string_to_unsigned(f[0], 10, 0, G_MAXINT, &r, NULL);
  if (ok && g_ascii_isdigit(f[1][0]))
    ok = g_ascii_string_to_unsigned(f[1], 10, 0, G_MAXINT, &st, NULL);
  else if (ok) { /* a stage kind: a phase name */
    gboolean known = FALSE;
    for (int p = 0; p < RF_PHASE_COUNT; p++)
      known |= !strcmp(f[1], rf_phase_name((RfPhase)p));
    ok = known;
  }
  if (ok && n == 3) ok = !strcmp(f[2], "kill");
  if (!ok) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "--test-fail wants RANK:STAGE[:kill], got '%s'",
                s);
    return FALSE;
  }
  o->fail_rank = (int)r;
  o->fail_stage = g_ascii_isdigit(f[1][0]) ? (int)st : -1;
  g_free(o->fail_label);
  o->fail_label = g_ascii_isdigit(f[1][0]) ? NULL : g_strdup(f[1]);
  o->fail_kill = n == 3;
  return TRUE;
}

/* 1. The values of the options, alone. */
static gboolean check_options(RunCmd *c, GError **error) {
  RfRealOptions *o = &c->o;
  if (c->fail && !parse_fail(c->fail, o, error)) return FALSE;
  if (!(c->staging_mib >= 0 && c->staging_mib <= 1 << 20)) { /* refuses nan too */
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "--staging-mib must be in [0, %d] (0: chosen)",
                1 << 20);
    return FALSE;
  }
  if (o->iters < 1 || o->iters > 1000000 || o->warmup < 0 || o->warmup > 1000000) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "--iters must be in 1..1000000 and --warmup in 0..1000000");
    return FALSE;
  }
  if (!(o->timeout_s > 0 && o->timeout_s <= 1e6) || o->max_ops < 0 || o->max_ops == 1) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "--timeout must be in (0, 1e6] seconds and --max-ops >= 2 (0: from the topology)");
    return FALSE;
  }
  if (o->slots < 0 || o->slots > RF_SCHEDULE_MAX_SLOTS) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "--slots must be in 1..%d (0: chosen)",
                RF_SCHEDULE_MAX_SLOTS);
    return FALSE;
  }
  if (!(c->delay_ms >= 0 && c->delay_ms <= 60000)) { /* refuses nan too */
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "--test-delay-ms must be in [0, 60000]");
    return FALSE;
  }
  o->op_delay_s = c->delay_ms * 1e-3;
  if (o->local && c->fail && !o->plan_only) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "--test-fail needs MPI (one process per rank)");
    return FALSE;
  }
  o->staging_bytes = (uint64_t)(c->staging_mib * 1048576.0);
  if (o->plan_only) o->local = TRUE;
  /* --local moves a round by device copies once every rank posted it: no communicator, no group
   * in flight; --memory moves nothing and counts the run as MPI runs it */
  if (o->lane_comms && c->one_comm) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "--lane-comms and --one-comm exclude each other");
    return FALSE;
  }
  if (o->lane_comms && o->local && !o->plan_only) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "--lane-comms gives each staging lane a communicator of its own: it needs MPI "
                "(one process per rank), not --local");
    return FALSE;
  }
  /* the default: a communicator per lane where MPI runs it; the staging choice and the memory
   * count take it also with --local and --memory (what the run on GPUs would choose and hold) */
  o->lane_comms = !c->one_comm;
  return TRUE;
}

/* 2. Strategies and problem, and the test hooks' ranks against the problem's world. */
static gboolean check_problem(RunCmd *c, GError **error) {
  c->ns = rf_args_strategies(&c->a, c->strategies, error);
  if (c->ns < 0) return FALSE;
  c->pb = rf_args_problem(&c->a, error);
  if (!c->pb) return FALSE;
  if (c->pb->quant && strcmp(c->o.backend, "host")) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "--infer-quant runs on the host backend only (the %s backend has no quantize "
                "kernels)",
                c->o.backend);
    return FALSE;
  }
  int n = c->pb->nranks;
  if (c->drop != G_MININT) {
    if (c->drop < 0 || c->drop >= n) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "--test-drop %d: the plan has ranks 0..%d",
                  c->drop, n - 1);
      return FALSE;
    }
    c->o.corrupt_rank = c->drop;
  }
  if (c->fail && c->o.fail_rank >= n) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "--test-fail %s: the plan has ranks 0..%d",
                c->fail, n - 1);
    return FALSE;
  }
  /* what the staging choice weighs: the per-group costs of the topology's calibration, as
   * refit sim's executor model takes them (neutral calibration where the topology has none) */
  RfCalibration cal = {0};
  gboolean found = FALSE;
  if (!rf_calibration_for_topology(&cal, c->pb->topo, &found, error)) return FALSE;
  cal.exec_banks = c->o.double_bank ? 2 : 1;
  cal.exec_lane_comms = c->o.lane_comms; /* lanes at once: more of them, smaller groups */
  rf_calibration_staging_costs(&cal, &c->o.costs);
  rf_calibration_clear(&cal);
  return TRUE;
}

/* 2b. --emulate-network: the host backend paces every transfer at the topology's rates, as the
 * simulator's platform has them (docs/real.md, Emulated network). */
static gboolean check_emulation(RunCmd *c, GError **error) {
  if (!c->emulate) return TRUE;
  const RfTopology *t = c->pb->topo;
  if (strcmp(c->o.backend, "host") || c->o.local) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "--emulate-network paces the host backend's MPI transfers: it needs --backend "
                "host, one process per rank (not --local or --memory)");
    return FALSE;
  }
  if (t->oversubscription > 1.0) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "--emulate-network: topology '%s' has an oversubscribed fabric (%g:1), whose "
                "leaf uplinks the emulation does not model",
                t->name, t->oversubscription);
    return FALSE;
  }
  RfRealNetEmulation *m = &c->emu;
  const double nic = t->nic_Gbps / 8.0 * 1e9, pcie = t->pcie_GBps * 1e9;
  m->nvlink_Bps = t->nvlink_GBps * 1e9;
  m->nic_Bps = t->nics_per_gpu * MIN(nic, pcie);
  m->nvlink_latency_s = t->nvlink_latency_us * 1e-6;
  m->nic_latency_s = (t->nic_latency_us + t->switch_latency_us) * 1e-6;
  m->nranks = c->pb->nranks;
  int *dom = g_new(int, m->nranks);
  for (int r = 0; r < m->nranks; r++) /* a rank on no GPU shares no domain */
    dom[r] = c->pb->gpu[r] >= 0 ? rf_problem_domain(c->pb, r) : -1 - r;
  m->domain = dom;
  rf_real_emulate_network(m);
  return TRUE;
}

static void print_emulation(const RunCmd *c) {
  const RfRealNetEmulation *m = &c->emu;
  printf("# emulated network (topology %s): NIC %.4g MB/s + %.4g us, NVLink %.4g MB/s + %.4g us "
         "per message, per rank and direction\n",
         c->pb->topo->name, m->nic_Bps / 1e6, m->nic_latency_s * 1e6, m->nvlink_Bps / 1e6,
         m->nvlink_latency_s * 1e6);
}

/* 3. One refit per strategy on every rank. A failed run takes the job down (peers may wait in
 * a group); a plan that cannot be built fails the same way everywhere and is reported in its
 * row. */
static int run_rows(RunCmd *c, RfExecutor *ex, Row *rows) {
  for (int i = 0; i < c->ns; i++) {
    Row *r = &rows[i];
    r->strategy = c->strategies[i];
    r->lane_comms = lanes_on_comms(&c->o);
    GError *pe = NULL;
    RfPlan *plan = rf_plan_build(c->pb, c->strategies[i], NULL, &r->error);
    if (!plan) continue;
    r->plan = plan->stats;
    r->nxfers = plan->nxfers;
    if (!ex->run(ex, plan, &r->res, &pe)) {
      fprintf(stderr, "refit run: %s: %s\n", rf_strategy_name(c->strategies[i]), pe->message);
      int rc = rf_error_exit_status(pe);
      rf_plan_free(plan);
      g_error_free(pe);
      return rc;
    }
    r->ok = TRUE;
    const RfRealSpread *sp = rf_real_spread(ex);
    r->spread = *sp;
    r->spread.min_s = g_memdup2(sp->min_s, sizeof(double) * MAX(1, sp->nstages));
    r->spread.max_s = g_memdup2(sp->max_s, sizeof(double) * MAX(1, sp->nstages));
    rf_plan_free(plan);
  }
  return 0;
}

/* 4. The report on rank 0; the exit status on every rank: verification failed (3) when any
 * element arrived wrong, else the first unplannable strategy's status. */
static int report(const RunCmd *c, const Row *rows, int world, const char *hosts_note,
                  gboolean root) {
  uint64_t wrong = 0;
  int rc = 0;
  for (int i = 0; i < c->ns; i++) {
    wrong += rows[i].res.wrong_elements;
    if (!rows[i].ok && !rc) rc = rf_error_exit_status(rows[i].error);
  }
  if (wrong) rc = RF_EXIT_VERIFY;
  if (!root) return rc;
  if (c->a.json) {
    rf_json_print_strategies(NULL, NULL, c->ns, json_row, rows);
  } else if (c->csv) {
    print_csv(rows, c->ns);
  } else {
    const RfStaging *staging = NULL; /* the first planned strategy's choice */
    for (int i = 0; i < c->ns && !staging; i++)
      if (rows[i].ok) staging = &rows[i].spread.staging;
    print_header(&c->a, &c->o, c->pb, world, hosts_note, staging);
    if (c->emulate) print_emulation(c);
    for (int i = 0; i < c->ns; i++)
      print_row(&rows[i], c->o.plan_only, staging);
    if (!c->o.plan_only)
      printf("\n# wrong elements: %" G_GUINT64_FORMAT "\n", wrong);
    else
      printf("\n");
    int failed = 0;
    for (int i = 0; i < c->ns; i++)
      failed += !rows[i].ok;
    if (failed)
      printf("# FAILED: %d strateg%s could not be planned\n", failed, failed == 1 ? "y" : "ies");
    else
      printf("# %s\n", wrong ? "FAILED: wrong elements" : "OK");
  }
  if (c->a.json || c->csv) {
    if (!c->a.quiet && c->pb->placement_note)
      fprintf(stderr, "# placement: %s\n", c->pb->placement_note);
    if (hosts_note) fprintf(stderr, "# hosts: %s\n", hosts_note);
    fprintf(stderr, "# wrong elements: %" G_GUINT64_FORMAT "\n", wrong);
  }
  return rc;
}

int rf_cmd_run(int argc, char **argv) {
  RunCmd c = {0};
  RfRealOptions *o = &c.o;
  rf_real_options_init(o);
  char *backend = NULL;
  c.staging_mib = 0; /* chosen (model/plan/staging.h) */
  o->slots = 0;
  c.drop = G_MININT;
  GOptionEntry entries[] = {
      {"backend", 'b', 0, G_OPTION_ARG_STRING, &backend,
       "host (host memory + MPI) or cuda (GPU + NCCL)", "NAME"},
      {"local", 0, 0, G_OPTION_ARG_NONE, &o->local,
       "Every rank in this one process (no MPI; with cuda: single-GPU mode)", NULL},
      {"warmup", 'w', 0, G_OPTION_ARG_INT, &o->warmup, "Untimed refits first (default 1)", "N"},
      {"iters", 'n', 0, G_OPTION_ARG_INT, &o->iters,
       "Timed refits, one training step each (default 5)", "N"},
      {"staging-mib", 0, 0, G_OPTION_ARG_DOUBLE, &c.staging_mib,
       "Staging bound per rank, direction and lane in MiB (default 0: chosen from the topology, "
       "the calibration's per-group costs and the memory left on the inference GPU; printed in "
       "the header)",
       "MIB"},
      {"max-ops", 0, 0, G_OPTION_ARG_INT, &o->max_ops,
       "Send + receive operations of a rank per group (default 0: from the topology, 32 for staged "
       "schedules, 2 x 4 x (1 + NVLink share) for pipelined ones: 40 DGX H100, 80 GB200)",
       "N"},
      {"slots", 0, 0, G_OPTION_ARG_INT, &o->slots,
       "Staging lanes per rank and direction: groups a rank keeps in flight, so that packing and "
       "unpacking overlap the transfers (default 0: chosen, 8 on lane communicators, the default, "
       "2 with --one-comm, fewer where the memory does not allow them; 1: one group at a time)",
       "N"},
      {"lane-comms", 0, 0, G_OPTION_ARG_NONE, &o->lane_comms,
       "Each staging lane's groups on a communicator and stream of its own (the default under "
       "MPI; cuda: a communicator split from the world's per lane; host --emulate-network: a "
       "group waits only for its own lane), so that a rank's groups on different lanes run at "
       "the same time; where not given, 8 lanes and an eighth of the staging bound (at least "
       "4 MiB) are chosen. Needs MPI (not --local)",
       NULL},
      {"one-comm", 0, 0, G_OPTION_ARG_NONE, &c.one_comm,
       "Every lane's groups on the data communicator and one stream, one after another (before "
       "2026-12-04 the default; 2 lanes chosen)",
       NULL},
      {"double-bank", 0, 0, G_OPTION_ARG_NONE, &o->double_bank,
       "Destinations twice: the refit writes a second weight bank, swapped in once every rank "
       "verified it (generation may go on meanwhile). Default: in place, one bank written while "
       "generation is paused",
       NULL},
      {"staged", 0, 0, G_OPTION_ARG_NONE, &o->staged,
       "Run the plan's stages one after another (store and forward) instead of pipelining "
       "a forwarded part as soon as it arrived (every strategy pipelines by default)",
       NULL},
      {"timeout", 0, 0, G_OPTION_ARG_DOUBLE, &o->timeout_s,
       "Seconds without progress before a stage counts as failed (default 60)", "S"},
      {"csv", 0, 0, G_OPTION_ARG_NONE, &c.csv, "Print CSV rows instead of a table", NULL},
      {"emulate-network", 0, 0, G_OPTION_ARG_NONE, &c.emulate,
       "Host backend: pace every transfer at the topology's NIC and NVLink rates and latencies "
       "(by whether the peer shares the NVLink domain), per rank and direction",
       NULL},
      {"memory", 0, 0, G_OPTION_ARG_NONE, &o->plan_only,
       "Only the memory of the fullest inference GPU (the memory model refit plan prints, and "
       "what the executor would allocate) and of the largest rank (no buffers, no MPI, no data "
       "moved)",
       NULL},
      {"test-fail", 0, 0, G_OPTION_ARG_STRING, &c.fail,
       "Test hook: RANK stops responding at STAGE (an index or a kind: export, broadcast, "
       "inject, forward, fanout, p2p) of the first refit; with :kill it dies by SIGKILL in the "
       "middle of that stage of the last refit",
       "RANK:STAGE[:kill]"},
      {"test-drop", 0, 0, G_OPTION_ARG_INT, &c.drop,
       "Test hook: RANK loses one received chunk in the last refit", "RANK"},
      {"test-delay-ms", 0, 0, G_OPTION_ARG_DOUBLE, &c.delay_ms,
       "Test hook (host backend): every pack / unpack and every group lasts at least MS "
       "milliseconds, as on a device whose copies and transfers take time",
       "MS"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  g_set_prgname("refit run");
  GOptionContext *ctx =
      g_option_context_new("- run the refit on real memory, verify every element");
  g_option_context_set_description(ctx, RF_EXIT_STATUS_HELP);
  g_option_context_set_main_group(ctx, rf_args_group(&c.a));
  g_option_context_add_main_entries(ctx, entries, NULL);
  GError *e = NULL;
  RfExecutor *ex = NULL;
  Row *rows = NULL;
  char *hosts_note = NULL;
  RfRealWorld w = {0, 1, FALSE};
  gboolean started = FALSE, root = env_rank_zero(), say;
  int rc = 0;
  say = root;
  if (!rf_args_parse(ctx, &argc, &argv, FALSE, &e)) goto out;
  if (backend) {
    g_free(o->backend);
    o->backend = backend;
  }
  if (!check_options(&c, &e) || !check_problem(&c, &e) || !check_emulation(&c, &e)) goto out;
  /* Only now MPI: a bad input never starts it. */
  if (!rf_real_world_start(&argc, &argv, o->local, &w, &e)) {
    say = TRUE;
    goto out;
  }
  started = TRUE;
  say = root = w.rank == 0;
  if (!o->local && w.world != c.pb->nranks) {
    g_set_error(&e, RF_ERROR, RF_ERROR_INPUT,
                "the MPI world has %d rank%s, the plan needs %d (%d training + %d inference): "
                "launch with mpirun -np %d (or srun -n %d), or use --local",
                w.world, w.world == 1 ? "" : "s", c.pb->nranks, c.pb->src.nranks, c.pb->dst.nranks,
                c.pb->nranks, c.pb->nranks);
    goto out;
  }
  ex = rf_real_executor_new(o, &e);
  if (!ex) goto out;
  if (!ex->prepare(ex, c.pb, &e)) {
    /* a rank's own failure is its to report; a peer's failure is reported by the peer */
    say = root || e->code != RF_ERROR_PEER;
    goto out;
  }
  /* collective: every rank takes part, rank 0 reports */
  if (!o->local) hosts_note = rf_real_world_placement(c.pb, o->timeout_s);
  if (hosts_note && c.emulate) { /* the domains are the plan's, by construction */
    g_free(hosts_note);
    hosts_note = g_strdup("NVLink domains emulated (--emulate-network): each transfer is paced "
                          "by whether its peer shares the rank's domain in the plan");
  }
  rows = g_new0(Row, c.ns);
  rc = run_rows(&c, ex, rows);
  if (rc) {
    fflush(stdout);
    fflush(stderr);
    /* A runtime failure (a peer died or timed out) is seen by every survivor on its own, within
     * the timeout: leave without MPI_Finalize (which would wait for the dead) and let each one
     * report; mpirun's default policy ends the job at the first non-zero exit. Anything else:
     * peers may wait inside a group, the whole job goes down now. */
    if (w.mpi && w.world > 1 && rc == RF_EXIT_RUNTIME) _exit(rc);
    if (w.mpi && w.world > 1) rf_real_world_abort(rc);
    goto out;
  }
  rc = report(&c, rows, w.world, hosts_note, root);
out:
  fflush(stdout);
  /* the error line before MPI ends: the other ranks leave (non-zero) once the world ends, and
   * mpirun's default policy then kills what is left, rank 0 included */
  if (e) rc = rf_cmd_exit("refit run", g_steal_pointer(&e), say);
  fflush(stderr);
  for (int i = 0; rows && i < c.ns; i++)
    row_clear(&rows[i]);
  g_free(rows);
  if (ex) ex->destroy(ex);
  rf_problem_free(c.pb);
  rf_real_emulate_network(NULL);
  g_free((int *)c.emu.domain);
  if (started) rf_real_world_end();
  g_option_context_free(ctx);
  rf_args_clear(&c.a);
  g_free(o->fail_label);
  g_free(c.fail);
  g_free(hosts_note);
  g_free(o->backend);
  return rc;
}
