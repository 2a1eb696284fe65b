/* The RfExecutor of the simulator: plan -> flow program -> SimGrid -> RfResult. */
#include "error.h"
#include "internal.h"
#include "quant.h"

#include <string.h>

/* NICs per GPU the simulator accepts: today's machines have 1 (DGX H100, GB200 NVL72); a count
 * far above any machine is a typo, and would predict a network that cannot exist. */
#define SIM_MAX_NICS_PER_GPU 16

typedef struct {
  RfSimOptions opt;
  gboolean have_calib; /* opt.calib was given: do not look up the topology's file */
  RfCalibration calib; /* in use */
  RfSimStats stats;
  gboolean have_stats;
  gboolean have_staging; /* rf_sim_executor_use_staging: chosen by the caller */
  RfStaging staging;
} SimState;

static void stats_clear(RfSimStats *s) {
  for (int i = 0; i < s->ntop; i++)
    g_free(s->top[i].name);
  g_free(s->top);
  g_free(s->exec_fallback);
  memset(s, 0, sizeof *s);
}

static gboolean sim_prepare(RfExecutor *ex, const RfProblem *pb, GError **error) {
  SimState *st = ex->state;
  const RfTopology *t = pb->topo;
  if (t->nvlink_GBps <= 0 || t->nic_Gbps <= 0 || t->pcie_GBps <= 0 || t->hbm_GBps <= 0 ||
      t->nics_per_gpu < 1) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "sim: topology '%s' lacks the bandwidths the simulator needs (NVLink, NIC, PCIe, "
                "HBM); give a topology file (--topology)",
                t->name);
    return FALSE;
  }
  if (t->nics_per_gpu > SIM_MAX_NICS_PER_GPU) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "sim: topology '%s' has %d NICs per GPU; the simulator models at most %d", t->name,
                t->nics_per_gpu, SIM_MAX_NICS_PER_GPU);
    return FALSE;
  }
  if (st->have_calib) return TRUE;
  gboolean found;
  return rf_calibration_for_topology(&st->calib, pb->topo, &found, error);
}

const char *rf_sim_engine_name(RfSimEngine e) {
  switch (e) {
  case RF_SIM_ENGINE_EVENTS:
    return "events";
  case RF_SIM_ENGINE_SIMGRID:
    return "simgrid";
  }
  return NULL;
}

gboolean rf_sim_engine_parse(const char *name, RfSimEngine *out) {
  if (!g_strcmp0(name, "events"))
    *out = RF_SIM_ENGINE_EVENTS;
  else if (!g_strcmp0(name, "simgrid"))
    *out = RF_SIM_ENGINE_SIMGRID;
  else
    return FALSE;
  return TRUE;
}

/* The program of the GPU-level records x (built in records_s) with the smallest group whose
 * distinct flows (the cost SimGrid pays) fit. */
static SimProgram *build_fitting(const SimProtos *x, double records_s, const RfCalibration *cal,
                                 int forced, int max_flows, RfSimEngine engine, GError **error) {
  const RfPlan *plan = x->plan;
  int G = plan->problem->topo->gpus_per_domain;
  gint64 t1 = g_get_monotonic_time();
  SimProgram *p = NULL;
  /* refit's executor: exact (a GPU per host) on the events engine; on SimGrid up to
   * SIM_EXEC_EXACT_RANKS ranks, above the largest group of at most SIM_EXEC_COARSE_GROUP GPUs
   * dividing the domain (sim/models/refit_executor.c) */
  if (rf_variant_is_executor(cal->software, cal->variant) && forced <= 0) {
    forced = 1;
    if (engine == RF_SIM_ENGINE_SIMGRID && plan->problem->nranks > SIM_EXEC_EXACT_RANKS)
      for (int g = SIM_EXEC_COARSE_GROUP; g > 1 && forced == 1; g--)
        if (G % g == 0) forced = g;
  }
  if (forced > 0) {
    p = sim_program_build(x, cal, forced, error);
  } else {
    for (int g = 1; g <= G; g++) {
      if (G % g) continue;
      sim_program_free(p);
      p = sim_program_build(x, cal, g, error);
      if (!p || (int)p->flows->len <= max_flows) break;
    }
  }
  if (g_getenv("REFIT_SIM_VERBOSE"))
    g_printerr("sim: %s: %" G_GUINT64_FORMAT
               " GPU-level records in %.2f s, program (group %d, %u flows) in %.2f s\n",
               rf_strategy_name(plan->strategy), (guint64)sim_protos_count(x), records_s,
               p ? p->group : 0, p ? p->flows->len : 0, (g_get_monotonic_time() - t1) / 1e6);
  return p;
}

typedef struct {
  int link;
  double busy;
} Busy;

static int cmp_busy(const void *a, const void *b) {
  double x = ((const Busy *)a)->busy, y = ((const Busy *)b)->busy;
  return (x < y) - (x > y);
}

/* Wire-equivalent bytes over each link: every flow completes, so a link carries the sum of the
 * bytes of the flows routed over it. (SimGrid 3.32's link-load plugin measures something else:
 * see docs/sim.md.) */
static double *link_bytes(const SimProgram *p) {
  double *bytes = g_new0(double, sim_nlinks(p) + 1);
  for (guint i = 0; i < p->flows->len; i++) {
    const SimFlow *f = &g_array_index(p->flows, SimFlow, i);
    int links[8], n = sim_route(p, f->src, f->dst, links);
    for (int j = 0; j < n; j++)
      bytes[links[j]] += f->bytes;
  }
  return bytes;
}

/* The program's assumptions and its busiest links (by busy time) into st->stats. */
static void fill_stats(SimState *st, const SimProgram *p, const RfProblem *pb) {
  int nl = sim_nlinks(p);
  g_autofree double *bytes = link_bytes(p);
  g_autofree Busy *b = g_new(Busy, nl + 1);
  for (int l = 0; l < nl; l++)
    b[l] = (Busy){l, bytes[l] / sim_link_Bps(p, l)};
  qsort(b, nl, sizeof *b, cmp_busy);
  stats_clear(&st->stats);
  st->have_stats = TRUE;
  RfSimStats *s = &st->stats;
  s->hosts = p->nhosts;
  s->group = p->group;
  s->have_exec_mem = p->exec != NULL;
  if (p->exec) s->exec_mem = p->exec_mem;
  s->flows = p->flows->len;
  s->export_latency_s = p->export_latency_s;
  s->export_tensors = p->export_tensors;
  s->export_calls = p->export_calls;
  s->export_pace_s = p->export_pace_s;
  s->nbuckets = p->nbuckets;
  s->bucket_bytes = p->bucket_bytes;
  s->m2n_tensors = p->m2n_tensors;
  s->sw_calls = p->sw_calls;
  s->sw_software_s = p->sw_software_s;
  s->ntop = nl < 5 ? nl : 5;
  s->top = g_new0(RfSimLink, s->ntop > 0 ? s->ntop : 1);
  for (int i = 0; i < s->ntop; i++) {
    s->top[i].name = sim_link_name(p, pb, b[i].link);
    s->top[i].bytes = bytes[b[i].link];
    s->top[i].bandwidth_Bps = sim_link_Bps(p, b[i].link);
    s->top[i].busy_s = b[i].busy;
  }
}

/* What bounds the run: a link busy most of the time; else the software time (refit's executor:
 * the host posting its groups; the published software: its calls, export latencies and
 * per-tensor costs, the export's host time overlapping its transfers with export.host_overlap);
 * else the busiest link with the rest lost to the executor's stages in series, or to pipeline
 * fill and contention. */
static char *bound_by(const SimState *st, const SimProgram *p, double total_s) {
  const RfSimStats *s = &st->stats;
  double soft = st->calib.software != RF_SOFTWARE_REFIT
                    ? p->sw_software_s + p->export_latency_s
                    : p->export_latency_s + p->m2n_tensors * st->calib.m2n_tensor_overhead_s +
                          st->calib.fixed_s;
  double busy = s->ntop > 0 ? s->top[0].busy_s : 0;
  const char *top = s->ntop > 0 ? s->top[0].name : "-";
  if (total_s <= 0) return g_strdup("nothing moves");
  if (busy >= 0.8 * total_s)
    return g_strdup_printf("%s (busy %.0f%% of the run)", top, 100 * busy / total_s);
  if (p->exec) { /* refit's executor: its own software time is the host posting its groups */
    if (p->sw_software_s >= 0.4 * total_s)
      return g_strdup_printf("software time %.3g s (%.0f%%, the host posting %.0f groups); "
                             "busiest link %s %.0f%%",
                             p->sw_software_s, 100 * p->sw_software_s / total_s, p->sw_calls, top,
                             100 * busy / total_s);
    if (p->exec_stages > 1)
      return g_strdup_printf("%s (busy %.0f%%), the schedule's %d stages one after another "
                             "(%.0f groups)",
                             top, 100 * busy / total_s, p->exec_stages, p->sw_calls);
    return g_strdup_printf("%s (busy %.0f%%), pipeline fill, group latencies and contention", top,
                           100 * busy / total_s);
  }
  if (soft >= 0.4 * total_s)
    return g_strdup_printf("software time %.3g s (%.0f%%, %s); busiest link %s %.0f%%", soft,
                           100 * soft / total_s,
                           st->calib.software != RF_SOFTWARE_REFIT
                               ? "the calls' host and latency costs, the host running ahead of "
                                 "the stream where the code does"
                           : st->calib.export_host_overlap && p->export_host_s > 0
                               ? "the export's host time overlapping its transfers"
                               : "in series with transfers",
                           top, 100 * busy / total_s);
  return g_strdup_printf("%s (busy %.0f%%), pipeline fill and contention", top,
                         100 * busy / total_s);
}

/* Software models: one stage per group of steps (the name before the '.'), in step order:
 * the per-stream PP stages, the misc broadcast, finalize. Bytes: the payload of its flows. */
static void add_step_stages(RfResult *out, const SimProgram *p, const SimOutcome *oc) {
  g_autofree double *bytes = g_new0(double, p->nsteps + 1);
  for (guint i = 0; i < p->flows->len; i++) {
    const SimFlow *f = &g_array_index(p->flows, SimFlow, i);
    bytes[f->step] += f->weight > 0 ? f->bytes / f->weight : f->bytes;
  }
  int s = 0;
  while (s < p->nsteps) {
    const char *dot = strchr(p->steps[s].name, '.');
    size_t len = dot ? (size_t)(dot - p->steps[s].name) : strlen(p->steps[s].name);
    double a = oc->step_start_s[s], b = oc->step_end_s[s], by = bytes[s];
    int e = s + 1;
    while (e < p->nsteps && !strncmp(p->steps[e].name, p->steps[s].name, len) &&
           (p->steps[e].name[len] == '.' || p->steps[e].name[len] == 0)) {
      if (oc->step_end_s[e] > b) b = oc->step_end_s[e];
      by += bytes[e];
      e++;
    }
    char name[40];
    g_strlcpy(name, p->steps[s].name, len + 1 < sizeof name ? len + 1 : sizeof name);
    rf_result_add_stage(out, name, a, b, (uint64_t)(by + 0.5));
    s = e;
  }
}

/* The quantize pass (model/problem/quant.h) at the HBM rate of the busiest GPU, in series with the
 * transfers: before them at the sender (every stage starts later), after them at the receiver.
 * Bytes: what the pass reads and writes, so the rate is the HBM's own (not half of it, as for a
 * copy's payload). */
static void add_quantize(const SimState *st, const RfPlan *plan, RfResult *out) {
  const RfProblem *pb = plan->problem;
  if (!pb->quant) return;
  uint64_t by = rf_quant_pass_bytes(pb, plan, NULL, NULL);
  double t = (double)by / (pb->topo->hbm_GBps * 1e9 * st->calib.hbm_efficiency);
  if (pb->quant->at == RF_QUANT_AT_SENDER) {
    for (int i = 0; i < out->nstages; i++) {
      out->stages[i].start_s += t;
      out->stages[i].end_s += t;
    }
    rf_result_add_stage(out, "quantize", 0, t, by);
  } else {
    rf_result_add_stage(out, "quantize", out->total_s, out->total_s + t, by);
  }
  out->total_s += t;
  out->min_s = out->max_s = out->total_s;
}

static gboolean sim_run(RfExecutor *ex, const RfPlan *plan, RfResult *out, GError **error) {
  SimState *st = ex->state;
  gint64 t0 = g_get_monotonic_time();
  memset(out, 0, sizeof *out);
  int max_flows = st->opt.max_hosts_pairs > 0 ? st->opt.max_hosts_pairs : 15000;
  RfCalibration cal = st->calib; /* shallow: the staging the caller chose, given */
  if (st->have_staging) {
    cal.exec_staging_bytes = (double)st->staging.staging_bytes;
    cal.exec_slots = st->staging.slots;
    cal.exec_max_ops = st->staging.max_ops;
  }
  GError *e = NULL;
  /* the records, once: the flow model standing in below builds its program from the same ones
   * (they do not depend on the variant; Kimi K3's gather-broadcast took 4 s a build) */
  g_autoptr(SimProtos) x = sim_protos_build(plan, &cal);
  const double records_s = (g_get_monotonic_time() - t0) / 1e6;
  g_autoptr(SimProgram) p =
      build_fitting(x, records_s, &cal, st->opt.group, max_flows, st->opt.engine, &e);
  /* refit's executor whose schedule is too long to simulate (the one limit its build checks):
   * the flow model (flows at calibrated rates, no software cost), where the caller allows it */
  g_autofree char *fallback = NULL;
  if (!p && st->opt.exec_fallback && rf_variant_is_executor(cal.software, cal.variant) &&
      g_error_matches(e, RF_ERROR, RF_ERROR_LIMIT)) {
    fallback = g_strdup(e->message);
    g_clear_error(&e);
    cal.variant = RF_VARIANT_DEFAULT;
    p = build_fitting(x, records_s, &cal, st->opt.group, max_flows, st->opt.engine, &e);
  }
  if (!p) {
    g_propagate_error(error, e);
    return FALSE;
  }
  g_auto(SimOutcome) oc = {0};
  p->progress = st->opt.progress;
  p->full_update = g_getenv("REFIT_SIM_REFERENCE") != NULL; /* engine.c: experiments */
  gint64 te = g_get_monotonic_time();
  const gboolean events = p->exec && st->opt.engine != RF_SIM_ENGINE_SIMGRID;
  gboolean ran =
      events ? sim_events_run(p, &oc, error) : sim_engine_run(p, st->opt.keep_platform, &oc, error);
  if (g_getenv("REFIT_SIM_VERBOSE"))
    g_printerr("sim: %s: %s, %d hosts, %u flows: %.2f s\n", rf_strategy_name(plan->strategy),
               events ? "events engine" : "SimGrid", p->nhosts, p->flows->len,
               (g_get_monotonic_time() - te) / 1e6);
  if (!ran) return FALSE;
  out->executor = g_strdup("sim");
  out->strategy = plan->strategy;
  out->total_s = out->min_s = out->max_s = oc.total_s;
  out->lower_bound_s = plan->stats.lower_bound_s;
  if (st->calib.software == RF_SOFTWARE_REFIT)
    for (int l = 0; l < RF_PHASE_COUNT; l++) {
      if (oc.used[l])
        rf_result_add_stage(out, rf_phase_name((RfPhase)l), oc.start_s[l], oc.end_s[l],
                            (uint64_t)(p->phase_bytes[l] + 0.5));
    }
  else
    add_step_stages(out, p, &oc);
  add_quantize(st, plan, out);
  fill_stats(st, p, plan->problem);
  st->stats.exec_fallback = g_steal_pointer(&fallback);
  st->stats.engine = events ? RF_SIM_ENGINE_EVENTS : RF_SIM_ENGINE_SIMGRID;
  out->bound_by = bound_by(st, p, out->total_s);
  st->stats.wall_s = (g_get_monotonic_time() - t0) / 1e6;
  return TRUE;
}

static void sim_destroy(RfExecutor *ex) {
  if (!ex) return;
  SimState *st = ex->state;
  rf_calibration_clear(&st->calib);
  stats_clear(&st->stats);
  g_free(st);
  g_free(ex);
}

RfExecutor *rf_sim_executor_new(const RfSimOptions *opt) {
  RfExecutor *ex = g_new0(RfExecutor, 1);
  SimState *st = g_new0(SimState, 1);
  ex->name = "sim";
  ex->prepare = sim_prepare;
  ex->run = sim_run;
  ex->destroy = sim_destroy;
  ex->state = st;
  if (opt) {
    st->opt = *opt;
    if (opt->calib.name) {
      st->have_calib = TRUE;
      st->calib = opt->calib;
      st->calib.name = g_strdup(opt->calib.name);
      st->calib.path = g_strdup(opt->calib.path);
    }
  }
  memset(&st->opt.calib, 0, sizeof st->opt.calib);
  if (!st->have_calib) rf_calibration_defaults(&st->calib);
  return ex;
}

void rf_sim_executor_use_staging(RfExecutor *ex, const RfStaging *staging) {
  SimState *st = ex->state;
  st->have_staging = staging != NULL;
  if (staging) st->staging = *staging;
}

const RfSimStats *rf_sim_executor_stats(const RfExecutor *ex) {
  const SimState *st = ex->state;
  return st->have_stats ? &st->stats : NULL;
}

gboolean rf_sim_executor_memory(const RfExecutor *ex, int banks, RfMemory *out) {
  const RfSimStats *st = rf_sim_executor_stats(ex);
  if (!st || !st->have_exec_mem) return FALSE;
  *out = st->exec_mem;
  rf_memory_set_banks(out, banks);
  return TRUE;
}
