/* SimGrid executor: golden scenarios whose answers follow from arithmetic, end-to-end runs under
 * the plan's invariants, the coarsening used at scale, and rejection of bad input files. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "error.h"
#include "golden.h"
#include "internal.h"
#include "recovery.h"
#include "sim.h"
#include "sw.h"

/* Simulates plan with cal; asserts that prepare and run succeed. Returns the predicted time;
 * with stats, also the executor's statistics (scalars only: no busiest-link list). */
static double simulate_stats(const RfPlan *plan, const RfCalibration *cal, int group, RfResult *res,
                             RfSimStats *stats) {
  RfSimOptions o = {0};
  o.calib = *cal;
  o.group = group;
  RfExecutor *ex = rf_sim_executor_new(&o);
  GError *e = NULL;
  gboolean ok = ex->prepare(ex, plan->problem, &e);
  g_assert_no_error(e);
  g_assert_true(ok);
  ok = ex->run(ex, plan, res, &e);
  g_assert_no_error(e);
  g_assert_true(ok);
  if (stats) {
    *stats = *rf_sim_executor_stats(ex);
    stats->top = NULL;
    stats->ntop = 0;
    stats->exec_fallback = NULL; /* owned by the executor */
  }
  ex->destroy(ex);
  return res->total_s;
}

static double simulate(const RfPlan *plan, const RfCalibration *cal, int group, RfResult *res) {
  return simulate_stats(plan, cal, group, res, NULL);
}

static void assert_rel(double got, double want) {
  g_assert_cmpfloat_with_epsilon(got, want, 1e-6 * fabs(want));
}

/* ---- golden scenarios: a copy of 100 MB from GPU 0, planned p2p on the golden cluster ---- */

typedef struct {
  const char *dst_ranks; /* comma-separated */
  int ndst;
  int domain; /* GPUs per NVLink domain */
} GoldenCase;

typedef struct {
  RfCalibration cal;
  RfProblem *pb;
  RfPlan *plan;
} Golden;

static void golden_setup(Golden *g, gconstpointer data) {
  const GoldenCase *c = data;
  golden_calib(&g->cal);
  g->pb = copy_problem_on("golden.topo", 50000000, "0", 1, c->dst_ranks, c->ndst, c->domain);
  GError *e = NULL;
  g->plan = rf_plan_build(g->pb, RF_STRATEGY_P2P, NULL, &e);
  g_assert_no_error(e);
}

static void golden_teardown(Golden *g, gconstpointer data) {
  (void)data;
  rf_plan_free(g->plan);
  rf_problem_free(g->pb);
  rf_calibration_clear(&g->cal);
}

static const GoldenCase one_remote = {"1", 1, 1}, two_remote = {"1,2", 2, 1},
                        three_local = {"1,2,3", 3, 4}, four_remote = {"4,5,6,7", 4, 4};

/* bytes / bandwidth + latency: 100 MB over one 10 GB/s NIC, 6 us of NIC + switch latency and
 * 2 us of software latency per message. */
static void test_one_message(Golden *g, gconstpointer data) {
  (void)data;
  g_assert_cmpuint(g->plan->nmsgs, ==, 1);
  RfResult r;
  double t = simulate(g->plan, &g->cal, 0, &r);
  g_assert_cmpfloat_with_epsilon(t, 1e8 / 10e9 + 6e-6 + 2e-6 + 5e7 / 1e15, 1e-7);
  g_assert_cmpint(r.nstages, ==, 1);
  g_assert_cmpstr(r.stages[0].name, ==, "inject");
  assert_rel(r.stages[0].end_s, t);
  g_assert_nonnull(r.bound_by);
  g_assert_nonnull(strstr(r.bound_by, "gpu0.NIC.tx"));
  rf_result_clear(&r);
}

/* Two messages of one source share its NIC: each gets half of it. */
static void test_two_messages_share_nic(Golden *g, gconstpointer data) {
  (void)data;
  g_assert_cmpuint(g->plan->nmsgs, ==, 2);
  g_assert_cmpint(g->plan->msgs[0].src, ==, 0);
  g_assert_cmpint(g->plan->msgs[1].src, ==, 0);
  RfResult r;
  assert_rel(simulate(g->plan, &g->cal, 0, &r), 2e8 / 10e9 + 6e-6 + 2e-6);
  rf_result_clear(&r);
}

/* NVLink fan-out: rank 0 sends a full copy to its three domain peers over its 100 GB/s NVLink. */
static void test_nvlink_fanout(Golden *g, gconstpointer data) {
  (void)data;
  g_assert_cmpuint(g->plan->stats.network_bytes, ==, 0);
  RfResult r;
  assert_rel(simulate(g->plan, &g->cal, 0, &r), 3e8 / 100e9 + 1e-6 + 2e-6);
  rf_result_clear(&r);
}

/* Grouping GPUs into one simulated host keeps the time of its busiest GPU link: GPU 0 alone
 * sends to four GPUs of another domain, and a host of GPUs {0, 1} still sends at one NIC's
 * speed. */
static void test_group_exact_on_symmetric(Golden *g, gconstpointer data) {
  (void)data;
  RfResult a, b;
  double t1 = simulate(g->plan, &g->cal, 1, &a), t2 = simulate(g->plan, &g->cal, 2, &b);
  assert_rel(t1, 4e8 / 10e9 + 6e-6 + 2e-6);
  g_assert_cmpfloat(fabs(t1 - t2) / t1, <, 0.01);
  rf_result_clear(&a);
  rf_result_clear(&b);
}

/* ---- whole plans ---- */

static RfProblem *preset(const char *model, const char *train, const char *infer,
                         const char *topo) {
  GError *e = NULL;
  RfModel *m = rf_model_load(model, &e);
  g_assert_no_error(e);
  RfTopology *t = rf_topology_load(topo, &e);
  g_assert_no_error(e);
  RfProblem *pb = rf_problem_new_preset(m, train, infer, t, &e);
  g_assert_no_error(e);
  return pb;
}

static void topology_calib(RfCalibration *cal, const RfTopology *t) {
  gboolean found;
  GError *e = NULL;
  rf_calibration_defaults(cal);
  gboolean ok = rf_calibration_for_topology(cal, t, &found, &e);
  g_assert_no_error(e);
  g_assert_true(ok);
  g_assert_true(found);
}

static const RfStrategy strategies[RF_STRATEGY_COUNT] = {
    RF_STRATEGY_GATHER_BROADCAST, RF_STRATEGY_P2P, RF_STRATEGY_M2N, RF_STRATEGY_HYBRID};

/* A strategy on a small MoE: the plan keeps its invariants, the simulation ends, stages lie
 * inside the run, and p2p / m2n do not beat the NIC time of the bytes their plan sends. */
static void test_end_to_end(gconstpointer data) {
  RfStrategy s = *(const RfStrategy *)data;
  RfProblem *pb = preset("tiny-moe", "TP2xPP2xEP6", "TP2xDP6", "dgx-h100");
  RfCalibration cal;
  topology_calib(&cal, pb->topo);
  GError *e = NULL;
  RfPlan *plan = rf_plan_build(pb, s, NULL, &e);
  g_assert_no_error(e);
  gboolean ok = rf_plan_verify(plan, &e);
  g_assert_no_error(e);
  g_assert_true(ok);
  RfResult r;
  double t = simulate(plan, &cal, 1, &r);
  g_assert_cmpfloat(t, >, 0);
  g_assert_cmpint(r.nstages, >, 0);
  for (int i = 0; i < r.nstages; i++) {
    g_assert_cmpfloat(r.stages[i].start_s, >=, 0);
    g_assert_cmpfloat(r.stages[i].start_s, <=, r.stages[i].end_s);
    g_assert_cmpfloat(r.stages[i].end_s, <=, t * (1 + 1e-12));
  }
  if (s == RF_STRATEGY_P2P || s == RF_STRATEGY_M2N)
    g_assert_cmpfloat(t, >=, plan->stats.lower_bound_s);
  rf_result_clear(&r);
  rf_plan_free(plan);
  rf_problem_free(pb);
  rf_calibration_clear(&cal);
}

/* The reduction used at scale (GPUs grouped into hosts with the summed links) changes a
 * strategy's prediction by under 1% on a case small enough to simulate both ways; the flow
 * model's gather-broadcast by under 10% (+2.9% on hosts of 2, +8.6% on hosts of 4; +1.75% and
 * +5.3% while copies moved at the whole of efficiency.hbm's HBM traffic, not half). Before refit's
 * flow model dropped NeMo RL's export host time, that time bound this case and hid the error.
 * Its cause is not established: it moves with the copy rate (at a quarter of today's the coarse
 * model is 27% faster: pooled HBM links, a GPU's copies borrowing its host's other GPUs' rate);
 * the executor's coarse model erred the same way while a host sent one merged message per
 * destination host (one max-min share where its GPUs' take one each). */
static void test_reduction_under_one_percent(gconstpointer data) {
  RfStrategy s = *(const RfStrategy *)data;
  RfProblem *pb = preset("qwen3-30b-a3b", "TP1xPP2xEP8", "TP4xDP4", "dgx-h100");
  RfCalibration cal;
  topology_calib(&cal, pb->topo);
  GError *e = NULL;
  RfPlan *plan = rf_plan_build(pb, s, NULL, &e);
  g_assert_no_error(e);
  RfResult a;
  double t1 = simulate(plan, &cal, 1, &a);
  for (int g = 2; g <= 4; g *= 2) {
    RfResult b;
    double t2 = simulate(plan, &cal, g, &b);
    g_test_message("%s: exact %.6g s, %d GPUs per host %.6g s (%+.3f%%)", rf_strategy_name(s), t1,
                   g, t2, 100 * (t2 - t1) / t1);
    g_assert_cmpfloat(fabs(t1 - t2) / t1, <, s == RF_STRATEGY_GATHER_BROADCAST ? 0.10 : 0.01);
    rf_result_clear(&b);
  }
  rf_result_clear(&a);
  rf_plan_free(plan);
  rf_problem_free(pb);
  rf_calibration_clear(&cal);
}

/* Source ranks equal to the destination ranks: no byte leaves its GPU, the program has no flow,
 * and the run says so (it passed NULL to qsort before, issue 10). */
static void test_nothing_moves(void) {
  RfProblem *pb = copy_problem_on("golden.topo", 1024, "0", 1, "0", 1, 1);
  RfCalibration cal;
  golden_calib(&cal);
  GError *e = NULL;
  RfPlan *plan = rf_plan_build(pb, RF_STRATEGY_P2P, NULL, &e);
  g_assert_no_error(e);
  g_assert_cmpuint(plan->stats.network_bytes, ==, 0);
  RfResult r;
  g_assert_cmpfloat(simulate(plan, &cal, 0, &r), ==, 0);
  g_assert_cmpint(r.nstages, ==, 0);
  g_assert_cmpstr(r.bound_by, ==, "nothing moves");
  rf_result_clear(&r);
  rf_plan_free(plan);
  rf_problem_free(pb);
  rf_calibration_clear(&cal);
}

/* ---- bad input files: one line naming the culprit, RF_ERROR_INPUT ---- */

typedef struct {
  const char *file, *needle;
} BadFile;

static const BadFile bad_topologies[] = {{"bad-fabric.topo", "kind"},
                                         {"bad-nic.topo", "bandwidth_Gbps"},
                                         {"bad-hbm.topo", "hbm_GBps"},
                                         {"bad-nics-per-gpu.topo", "per_gpu"},
                                         {"does-not-exist.topo", "does-not-exist"}};

static const BadFile bad_calibrations[] = {{"bad-eff.cal", "nic"},
                                           {"bad-missing.cal", "chunk_bytes"}};

static void assert_one_line_naming(GError *e, const char *needle) {
  g_assert_error(e, RF_ERROR, RF_ERROR_INPUT);
  g_test_message("message: %s", e->message);
  g_assert_nonnull(strstr(e->message, needle));
  g_assert_null(strchr(e->message, '\n'));
}

static void test_bad_topology(gconstpointer data) {
  const BadFile *c = data;
  g_autofree char *p = data_path(c->file);
  GError *e = NULL;
  g_assert_null(rf_topology_load(p, &e));
  assert_one_line_naming(e, c->needle);
  g_error_free(e);
}

static void test_bad_calibration(gconstpointer data) {
  const BadFile *c = data;
  g_autofree char *p = data_path(c->file);
  GError *e = NULL;
  RfCalibration cal;
  rf_calibration_defaults(&cal);
  g_assert_false(rf_calibration_load(&cal, p, &e));
  assert_one_line_naming(e, c->needle);
  g_error_free(e);
  rf_calibration_clear(&cal);
}

/* A shipped calibration loads for its topology and is found by name. */
static void test_shipped_calibration(gconstpointer data) {
  const char *name = *(const char *const *)data;
  GError *e = NULL;
  RfTopology *t = rf_topology_load(name, &e);
  g_assert_no_error(e);
  RfCalibration c;
  topology_calib(&c, t);
  g_assert_cmpstr(c.name, ==, name);
  rf_calibration_clear(&c);
  rf_topology_free(t);
}

static const char *const shipped[] = {"dgx-h100", "gb200-nvl72", "gb200-nvl72-800g"};

/* ---- the published-software models (sim/models/) on the golden cluster ---- */

/* Simulates model file `listing` (tests/data/sim/) planned with strategy on the golden cluster
 * under cal; returns the predicted time (stages in *res). */
static double sw_simulate(const char *listing, const char *train, const char *infer,
                          RfStrategy strategy, const RfCalibration *cal, RfResult *res) {
  g_autofree char *m = data_path(listing), *t = data_path("golden.topo");
  RfProblem *pb = preset(m, train, infer, t);
  GError *e = NULL;
  RfPlan *plan = rf_plan_build(pb, strategy, NULL, &e);
  g_assert_no_error(e);
  double s = simulate(plan, cal, 1, res);
  rf_plan_free(plan);
  rf_problem_free(pb);
  return s;
}

/* NCCL M2N PACK, one call: 100 MB from GPU 0 to GPU 1. The copy-engine pack (100 MB at a copy
 * rate of 100 GB/s: 1 ms), the put (100 MB over the 10 GB/s NIC, 6 us of NIC + switch latency)
 * and the unpack (1 ms) run in series, after the host planning (0.2 ms) and four barriers
 * (0.1 ms each; m2n.pack_plan_s, not the v0.1 library's m2n.plan_s). The software time it reports
 * is those serial costs: the bench runs no Ray dispatch, so nemo.dispatch_s counts neither in the
 * time nor in the software time. */
static void test_sw_pack_put_unpack(void) {
  RfCalibration cal;
  golden_calib(&cal);
  cal.software = RF_SOFTWARE_NCCL_M2N;
  cal.variant = RF_VARIANT_PACK;
  cal.hbm_efficiency = 2e-4; /* golden HBM 1e6 GB/s: 200 GB/s of traffic, copies at 100 GB/s */
  cal.m2n_pack_plan_s = 2e-4;
  cal.m2n_plan_s = 1.0; /* NCCL Xfer v0.1's per-call cost: not today's PACK library */
  cal.m2n_barrier_s = 1e-4;
  RfProblem *pb = copy_problem_on("golden.topo", 50000000, "0", 1, "1", 1, 1);
  GError *e = NULL;
  RfPlan *plan = rf_plan_build(pb, RF_STRATEGY_M2N, NULL, &e);
  g_assert_no_error(e);
  cal.nemo_dispatch_s = 1.0; /* NeMo RL's Ray dispatch: no part of the bench */
  RfResult r;
  RfSimStats st;
  double t = simulate_stats(plan, &cal, 1, &r, &st);
  assert_rel(t, 2e-4 + 4e-4 + 1e-3 + (1e8 / 10e9 + 6e-6) + 1e-3);
  /* its software time: planning, barriers and the copies, no dispatch */
  assert_rel(st.sw_software_s, 2e-4 + 4e-4 + 1e-3 + 1e-3);
  rf_result_clear(&r);
  /* the same call with its put alone (no copies, no software) is the message alone */
  cal.hbm_efficiency = 1.0, cal.m2n_pack_plan_s = 0, cal.m2n_barrier_s = 0;
  t = simulate(plan, &cal, 1, &r);
  g_assert_cmpfloat_with_epsilon(t, 1e8 / 10e9 + 6e-6, 1e-6);
  rf_result_clear(&r);
  rf_plan_free(plan);
  rf_problem_free(pb);
  rf_calibration_clear(&cal);
}

/* refit's executor on the golden cluster, staged, at the given staging bound: copies at
 * 100 GB/s (200 GB/s of HBM traffic), a group posted in 0.1 ms, 32 operations a group. */
static void exec_golden_calib(RfCalibration *cal, double staging_bytes) {
  golden_calib(cal);
  cal->software = RF_SOFTWARE_REFIT;
  cal->variant = RF_VARIANT_EXECUTOR;
  cal->hbm_efficiency = 2e-4;
  cal->exec_group_host_s = 1e-4;
  cal->fixed_s = 0;
  cal->exec_staging_bytes = staging_bytes;
  cal->exec_max_ops = 32;
  cal->exec_staged = TRUE;
}

/* The total time of plan by refit's executor model on the events engine (engine 0) or SimGrid's
 * (1), group GPUs per simulated host (0: the default). */
static double run_on_engine(const RfPlan *plan, const RfCalibration *cal, int engine, int group) {
  RfSimOptions o = {0};
  o.calib = *cal;
  o.engine = engine ? RF_SIM_ENGINE_SIMGRID : RF_SIM_ENGINE_EVENTS;
  o.group = group;
  RfExecutor *ex = rf_sim_executor_new(&o);
  RfResult r;
  GError *e = NULL;
  g_assert_true(ex->prepare(ex, plan->problem, &e));
  const gboolean ran = ex->run(ex, plan, &r, &e);
  g_assert_no_error(e);
  g_assert_true(ran);
  const double t = r.total_s;
  rf_result_clear(&r);
  ex->destroy(ex);
  return t;
}

/* A self-send (tests: one rank sending itself 100 MB, as scripts/device-check.sh times on one GPU)
 * goes through NCCL: real/'s cuda_post hands it to ncclSend and ncclRecv to the rank itself, and
 * NCCL's kernel copies it from the send staging to the receive staging in the group. One group
 * (a 200 MB staging bound), copies at 100 GB/s: the pack (1 ms), the post (0.1 ms), the group's
 * copy (1 ms) and the unpack (1 ms) one after another, on either engine, one communicator or a
 * communicator per lane. Two groups of 50 MB on one communicator and lane: each its pack, post,
 * copy and unpack (0.5 ms copies). On two lanes (a group's copy in flight while the other lane
 * posts; on one communicator the next post waits for it) the two engines agree. Two ranks each
 * sending itself, exact and on hosts of 2 GPUs: as one rank. */
static void test_exec_self_send(void) {
  RfCalibration cal;
  exec_golden_calib(&cal, 2e8);
  cal.exec_slots = 1;
  RfProblem *pb = copy_problem_on("golden.topo", 50000000, "0", 1, "0", 1, 1);
  GError *e = NULL;
  RfPlan *plan = rf_plan_build(pb, RF_STRATEGY_P2P, NULL, &e);
  g_assert_no_error(e);
  for (int staging = 0; staging < 2; staging++) {
    cal.exec_staging_bytes = staging ? 5e7 : 2e8;
    const double c = staging ? 5e-4 : 1e-3, want = (staging ? 2 : 1) * (3 * c + 1e-4);
    for (int lc = 0; lc < 2; lc++)
      for (int engine = 0; engine < 2; engine++) {
        cal.exec_lane_comms = lc;
        const double t = run_on_engine(plan, &cal, engine, 0);
        g_test_message("self-send, staging %g B, %s, %s: %.9g s (want %.9g s)",
                       cal.exec_staging_bytes, lc ? "lane comms" : "one comm",
                       engine ? "simgrid" : "events", t, want);
        g_assert_cmpfloat_with_epsilon(t, want, 1e-8);
      }
  }
  cal.exec_staging_bytes = 5e7;
  cal.exec_slots = 2;
  for (int lc = 0; lc < 2; lc++) {
    cal.exec_lane_comms = lc;
    const double t[2] = {run_on_engine(plan, &cal, 0, 0), run_on_engine(plan, &cal, 1, 0)};
    g_test_message("self-send, two lanes, %s: events %.9g s, simgrid %.9g s",
                   lc ? "lane comms" : "one comm", t[0], t[1]);
    g_assert_cmpfloat_with_epsilon(t[0], t[1], 1e-8);
    g_assert_cmpfloat(t[0], >=, 3 * 5e-4 + 1e-4 - 1e-8); /* one group's chain at least */
  }
  /* two ranks in one NVLink domain, each sending itself 100 MB (one replicated tensor to the
   * same two ranks), exact and on hosts of 2 GPUs (one actor for both: its rounds' copies and
   * self-copies the longest of its ranks'), either engine: the same 3.1 ms as one rank */
  RfProblem *pb2 = copy_problem_on("golden.topo", 50000000, "0,1", 2, "0,1", 2, 2);
  RfPlan *plan2 = rf_plan_build(pb2, RF_STRATEGY_P2P, NULL, &e);
  g_assert_no_error(e);
  for (uint64_t m = 0; m < plan2->nmsgs; m++) /* every message a self-send */
    g_assert_cmpint(plan2->msgs[m].src, ==, plan2->msgs[m].dst);
  cal.exec_staging_bytes = 2e8;
  cal.exec_slots = 1;
  cal.exec_lane_comms = FALSE;
  for (int group = 1; group <= 2; group++)
    for (int engine = 0; engine < 2; engine++) {
      const double t = run_on_engine(plan2, &cal, engine, group);
      g_test_message("self-sends of 2 ranks, hosts of %d, %s: %.9g s", group,
                     engine ? "simgrid" : "events", t);
      g_assert_cmpfloat_with_epsilon(t, 3 * 1e-3 + 1e-4, 1e-8);
    }
  rf_plan_free(plan2);
  rf_problem_free(pb2);
  rf_plan_free(plan);
  rf_problem_free(pb);
  rf_calibration_clear(&cal);
}

/* The work rf_sim_work estimates, by which refit sim starts the largest row first: refit's
 * executor simulates refit run's segments (a quarter of the staging bound each where pipelined)
 * and builds its schedule from the plan's transfers, every other model the plan's messages, and
 * so does refit's executor where the schedule is too large to simulate (the flow model stands
 * in), at a given bound or at a chosen one that even raised stays too large (the choice raises
 * it as refit run does). 100 MB from GPU 0 to GPU 1: one message of one transfer. */
static void test_exec_work(void) {
  RfCalibration cal;
  golden_calib(&cal);
  cal.software = RF_SOFTWARE_REFIT;
  cal.variant = RF_VARIANT_EXECUTOR;
  cal.exec_staging_bytes = 25e6;
  cal.exec_staged = TRUE;
  RfProblem *pb = copy_problem_on("golden.topo", 50000000, "0", 1, "1", 1, 1);
  GError *e = NULL;
  RfPlan *plan = rf_plan_build(pb, RF_STRATEGY_P2P, NULL, &e);
  g_assert_no_error(e);
  g_assert_cmpuint(plan->nmsgs, ==, 1);
  g_assert_true(rf_variant_is_executor(RF_SOFTWARE_REFIT, RF_VARIANT_EXECUTOR));
  g_assert_false(rf_variant_is_executor(RF_SOFTWARE_REFIT, RF_VARIANT_DEFAULT)); /* flows */
  g_assert_false(rf_variant_is_executor(RF_SOFTWARE_NEMO_RL, RF_VARIANT_DEFAULT));
  g_assert_false(rf_variant_is_executor(RF_SOFTWARE_NCCL_M2N, RF_VARIANT_PACK));
  const uint64_t staged = rf_sim_work(&cal, plan, RF_SOFTWARE_REFIT, RF_VARIANT_EXECUTOR);
  g_assert_cmpuint(plan->nxfers, ==, 1);
  g_assert_cmpuint(staged, ==, rf_schedule_segments(plan, 25000000, FALSE) + 1);
  g_assert_cmpuint(staged, >=, 4);
  cal.exec_staged = FALSE;
  const uint64_t piped = rf_sim_work(&cal, plan, RF_SOFTWARE_REFIT, RF_VARIANT_EXECUTOR);
  g_assert_cmpuint(piped, ==, rf_schedule_segments(plan, 25000000, TRUE) + 1);
  g_assert_cmpuint(piped - 1, >=, 4 * (staged - 1) - 4);
  /* the default bound where the calibration leaves it to the choice (no raise: few segments) */
  cal.exec_staging_bytes = 0;
  g_assert_cmpuint(rf_sim_work(&cal, plan, RF_SOFTWARE_REFIT, RF_VARIANT_EXECUTOR), ==,
                   rf_schedule_segments(plan, RF_SCHEDULE_DEFAULT_STAGING_BYTES, TRUE) + 1);
  /* a message grown to 3 x the segments one simulation builds at the default bound: the choice
   * raises the bound (twice, to 128 MiB: 48 M segments), so the row is the executor's and its work
   * those segments; a given bound is kept, and the row is the flow model's (the one message) */
  const uint64_t bytes = plan->msgs[0].bytes, mib = UINT64_C(1) << 20;
  plan->msgs[0].bytes = 3 * SIM_EXEC_MAX_SEGMENTS * (32 * mib / RF_SCHEDULE_CUTS);
  g_assert_cmpuint(rf_staging_fitting(plan, RF_SCHEDULE_DEFAULT_STAGING_BYTES, TRUE, NULL), ==,
                   128 * mib);
  g_assert_cmpuint(rf_sim_work(&cal, plan, RF_SOFTWARE_REFIT, RF_VARIANT_EXECUTOR), ==,
                   rf_schedule_segments(plan, 128 * mib, TRUE) + 1);
  g_assert_cmpuint(rf_schedule_segments(plan, 128 * mib, TRUE), <=, SIM_EXEC_MAX_SEGMENTS);
  cal.exec_staging_bytes = (double)RF_SCHEDULE_DEFAULT_STAGING_BYTES;
  g_assert_cmpuint(rf_sim_work(&cal, plan, RF_SOFTWARE_REFIT, RF_VARIANT_EXECUTOR), ==, 1);
  cal.exec_staging_bytes = 0;
  plan->msgs[0].bytes = bytes;
  /* the flow model, a published software's model: the plan's one message */
  g_assert_cmpuint(rf_sim_work(&cal, plan, RF_SOFTWARE_REFIT, RF_VARIANT_DEFAULT), ==, 1);
  g_assert_cmpuint(rf_sim_work(&cal, plan, RF_SOFTWARE_NCCL_M2N, RF_VARIANT_PACK), ==, 1);
  /* 1-byte groups: 100 M segments, above what one simulation builds: the flow model's work */
  cal.exec_staging_bytes = 1;
  g_assert_cmpuint(rf_schedule_segments(plan, 1, TRUE), >, SIM_EXEC_MAX_SEGMENTS);
  g_assert_cmpuint(rf_sim_work(&cal, plan, RF_SOFTWARE_REFIT, RF_VARIANT_EXECUTOR), ==, 1);
  rf_plan_free(plan);
  rf_problem_free(pb);
  rf_calibration_clear(&cal);
}

/* refit's executor (--software refit --software-variant executor): 100 MB from GPU 0 to GPU 1
 * in four 25 MB groups (staging bound 25 MB; the staged schedule, one 25 MB segment per group).
 * Pack and unpack at 100 GB/s (0.25 ms each), 0.1 ms to post a group, 2.5 ms + 6 us on the 10 GB/s
 * NIC. One lane: each group packs, posts, moves, unpacks in series, and the next one starts when
 * the receiver has unpacked and both posted again: 4 x (0.25 + 0.1 + 2.506) + 0.25 ms. Two lanes:
 * the next pack and post overlap the transfer in flight (groups still move one after another, on
 * the one communication stream), the NIC never idles: the first pack and post, 10 ms of transfers,
 * the last unpack, within a few latencies. The pipelined schedule cuts each group into four 6.25 MB
 * segments, four messages sharing the NIC at once: the same time within 1.5% (SimGrid's sharing of
 * concurrent flows). Two lanes on communicators of their own (--lane-comms): a group starts when
 * posted, beside the other lane's group in flight, whose bytes keep the NIC busy through its
 * latency: the NIC idles for two latencies (the first group's and one hand-over), not four. */
static void test_exec_lanes(void) {
  RfCalibration cal;
  exec_golden_calib(&cal, 25e6);
  cal.exec_lane_comms = FALSE; /* one communicator first (refit run --one-comm) */
  RfProblem *pb = copy_problem_on("golden.topo", 50000000, "0", 1, "1", 1, 1);
  GError *e = NULL;
  RfPlan *plan = rf_plan_build(pb, RF_STRATEGY_P2P, NULL, &e);
  g_assert_no_error(e);
  RfResult r;
  const double p = 2.5e-4, L = 1e-4, x = 2.5e-3 + 6e-6;
  cal.exec_slots = 1;
  double t1 = simulate(plan, &cal, 0, &r);
  g_assert_cmpfloat_with_epsilon(t1, 4 * (p + L + x) + p, 1e-7);
  rf_result_clear(&r);
  cal.exec_slots = 2;
  double t2 = simulate(plan, &cal, 0, &r);
  g_assert_cmpfloat(t2, <, t1);
  g_assert_cmpfloat(t2, >=, p + L + 1e-2 + p);
  g_assert_cmpfloat(t2, <=, p + L + 1e-2 + p + 4 * 6e-6 + 1e-6);
  rf_result_clear(&r);
  cal.exec_lane_comms = TRUE;
  double tc = simulate(plan, &cal, 0, &r);
  g_assert_cmpfloat(tc, >=, p + L + 1e-2 + p);
  g_assert_cmpfloat(tc, <=, p + L + 1e-2 + p + 2 * 6e-6 + 1e-7);
  g_assert_cmpfloat(tc, <, t2 - 6e-6);
  rf_result_clear(&r);
  cal.exec_lane_comms = FALSE;
  cal.exec_staged = FALSE;
  for (int slots = 1; slots <= 2; slots++) {
    cal.exec_slots = slots;
    double tp = simulate(plan, &cal, 0, &r);
    g_assert_cmpfloat(fabs(tp / (slots == 1 ? t1 : t2) - 1), <, 0.015);
    rf_result_clear(&r);
  }
  /* more groups than a program holds (1.56 M 64-byte groups, above SIM_MAX_STEPS, 1,048,576):
   * refused with a clear error */
  cal.exec_staging_bytes = 64;
  RfSimOptions o = {0};
  o.calib = cal;
  RfExecutor *ex = rf_sim_executor_new(&o);
  g_assert_true(ex->prepare(ex, pb, &e));
  g_assert_false(ex->run(ex, plan, &r, &e));
  g_assert_error(e, RF_ERROR, RF_ERROR_LIMIT);
  g_clear_error(&e);
  ex->destroy(ex);
  /* as the default model (exec_fallback): the flow model's figure, saying why */
  o.exec_fallback = TRUE;
  ex = rf_sim_executor_new(&o);
  g_assert_true(ex->prepare(ex, pb, &e));
  g_assert_true(ex->run(ex, plan, &r, &e));
  g_assert_no_error(e);
  const RfSimStats *st = rf_sim_executor_stats(ex);
  g_assert_nonnull(st);
  g_assert_nonnull(strstr(st->exec_fallback, "groups, more than the"));
  /* refused by the schedule's lower bound, before it was built */
  g_assert_nonnull(strstr(st->exec_fallback, "has at least"));
  RfCalibration flows = cal;
  flows.variant = RF_VARIANT_DEFAULT;
  RfResult rf;
  g_assert_cmpfloat(fabs(simulate(plan, &flows, 0, &rf) - r.total_s), <=, 1e-12);
  rf_result_clear(&rf);
  rf_result_clear(&r);
  ex->destroy(ex);
  /* a schedule that fits is the executor's, with no fallback said */
  cal.exec_staging_bytes = 25e6;
  o.calib = cal;
  ex = rf_sim_executor_new(&o);
  g_assert_true(ex->prepare(ex, pb, &e));
  g_assert_true(ex->run(ex, plan, &r, &e));
  g_assert_null(rf_sim_executor_stats(ex)->exec_fallback);
  rf_result_clear(&r);
  ex->destroy(ex);
  rf_plan_free(plan);
  rf_problem_free(pb);
  rf_calibration_clear(&cal);
}

/* A schedule of more groups than a 16-bit step index numbers (65,535 steps: one simulation's
 * limit until 2026-12-05): 67.6 MB from GPU 0 to GPU 1 in 1 KiB groups, staged, one lane (66,016
 * groups, one after another; a few more would only cost valgrind's CI run time). Both engines
 * simulate it (SimGrid's child returns every step's times past 65,535 through its pipe) to the same
 * time; the groups end in order, the last at the end of the run, and their flows carry the steps
 * past 65,535. */
static void test_exec_many_groups(void) {
  RfCalibration cal;
  golden_calib(&cal);
  cal.software = RF_SOFTWARE_REFIT;
  cal.variant = RF_VARIANT_EXECUTOR;
  cal.fixed_s = 0;
  cal.exec_staging_bytes = 1024;
  cal.exec_staged = TRUE;
  cal.exec_slots = 1;
  cal.exec_lane_comms = FALSE;
  RfProblem *pb = copy_problem_on("golden.topo", 33800000, "0", 1, "1", 1, 1);
  GError *e = NULL;
  RfPlan *plan = rf_plan_build(pb, RF_STRATEGY_P2P, NULL, &e);
  g_assert_no_error(e);
  g_autoptr(SimProtos) x = sim_protos_build(plan, &cal);
  g_autoptr(SimProgram) p = sim_program_build(x, &cal, 1, &e);
  g_assert_no_error(e);
  g_assert_nonnull(p->exec);
  g_assert_cmpint(p->nsteps, ==, 66016);
  uint32_t top = 0;
  for (guint i = 0; i < p->flows->len; i++)
    top = MAX(top, g_array_index(p->flows, SimFlow, i).step);
  g_assert_cmpuint(top, ==, (uint32_t)p->nsteps - 1);
  g_auto(SimOutcome) eo = {0}, so = {0};
  g_assert_true(sim_events_run(p, &eo, &e));
  g_assert_no_error(e);
  g_assert_cmpint(eo.nsteps, ==, p->nsteps);
  for (int st = 1; st < p->nsteps; st++)
    g_assert_cmpfloat(eo.step_end_s[st], >=, eo.step_end_s[st - 1]);
  g_assert_cmpfloat(eo.step_start_s[p->nsteps - 1], >, eo.step_end_s[65535]);
  g_assert_cmpfloat_with_epsilon(eo.step_end_s[p->nsteps - 1], eo.total_s, 1e-9 * eo.total_s);
  g_assert_cmpfloat(eo.total_s, >, 6.76e7 / 10e9); /* on the 10 GB/s NIC at least */
  g_assert_true(sim_engine_run(p, FALSE, &so, &e));
  g_assert_no_error(e);
  g_test_message("66,016 groups: events %.9g s, SimGrid %.9g s", eo.total_s, so.total_s);
  g_assert_cmpfloat_with_epsilon(so.total_s, eo.total_s, 1e-6 * eo.total_s);
  g_assert_cmpfloat_with_epsilon(so.step_end_s[p->nsteps - 1], eo.step_end_s[p->nsteps - 1],
                                 1e-6 * eo.total_s);
  rf_calibration_clear(&cal);
  rf_plan_free(plan);
  rf_problem_free(pb);
}

/* Sends and their bytes, over every actor's rounds of an executor program. */
static void exec_sends(const SimExec *e, uint64_t *n, double *bytes) {
  *n = 0, *bytes = 0;
  for (uint64_t i = 0; i < e->round_first[e->nranks]; i++)
    for (uint32_t k = 0; k < e->rounds[i].nsend; k++) {
      (*n)++;
      *bytes += e->sends[e->rounds[i].send_first + k].bytes;
    }
}

/* The executor on a coarse platform (two GPUs per simulated host, one actor per host) on the
 * golden cluster (10 GB/s NICs, domains of two GPUs): 100 MB sharded over GPUs 0 and 1 to
 * (a) GPUs 2 and 3, sharded alike: 50 MB on each GPU's NIC, 5 ms; the host's NIC carries 100 MB
 * at twice the rate; (b) GPU 2 alone: 100 MB into its NIC, 10 ms; the host NIC is scaled to its
 * busiest GPU's (half its sum). Both take what the exact platform (one actor per rank) takes, from
 * a program of two actors, which sends what the exact program sends: one message per rank pair
 * and round (in (a) two per round from host 0 to host 1, each with its own share of the links,
 * not one carrying both). */
static void test_exec_coarse(void) {
  const char *dsts[] = {"\"mesh\":[2],\"ranks\":[2,3],\"placements\":[\"S0\"]",
                        "\"mesh\":[1],\"ranks\":[2],\"placements\":[\"R\"]"};
  const double want[] = {5e-3, 10e-3};
  for (int c = 0; c < 2; c++) {
    g_autofree char *json = g_strdup_printf(
        "{\"tensors\":[{\"name\":\"w\",\"shape\":[50000000],\"dtype\":\"bf16\","
        "\"src\":{\"mesh\":[2],\"ranks\":[0,1],\"placements\":[\"S0\"]},\"dst\":{%s}}]}",
        dsts[c]);
    GError *e = NULL;
    RfProblem *pb = rf_problem_new_spec(json, -1, load_topo("golden.topo", 2), &e);
    g_assert_no_error(e);
    RfPlan *plan = rf_plan_build(pb, RF_STRATEGY_P2P, NULL, &e);
    g_assert_no_error(e);
    RfCalibration cal;
    golden_calib(&cal);
    cal.software = RF_SOFTWARE_REFIT;
    cal.variant = RF_VARIANT_EXECUTOR;
    cal.fixed_s = 0;
    g_autoptr(SimProtos) x = sim_protos_build(plan, &cal);
    g_autoptr(SimProgram) p = sim_program_build(x, &cal, 2, &e);
    g_assert_no_error(e);
    g_assert_cmpint(p->exec->nranks, ==, 2);
    g_assert_cmpint(p->group, ==, 2);
    {
      g_autoptr(SimProgram) p1 = sim_program_build(x, &cal, 1, &e);
      g_assert_no_error(e);
      uint64_t n1, n2;
      double b1, b2;
      exec_sends(p1->exec, &n1, &b1);
      exec_sends(p->exec, &n2, &b2);
      g_assert_cmpuint(n2, ==, n1);
      g_assert_cmpuint(n1, >=, c == 0 ? 2 : 1);
      g_assert_cmpfloat_with_epsilon(b2, b1, 1e-6 * b1);
      g_assert_cmpfloat_with_epsilon(b1, 1e8, 1e-6 * 1e8);
    }
    RfResult r;
    const double t1 = simulate(plan, &cal, 1, &r);
    rf_result_clear(&r);
    const double t2 = simulate(plan, &cal, 2, &r);
    rf_result_clear(&r);
    g_assert_cmpfloat(t1, >=, want[c]);
    g_assert_cmpfloat(t1, <, want[c] * 1.02);
    g_assert_cmpfloat_with_epsilon(t2, t1, 1e-6 * t1);
    rf_calibration_clear(&cal);
    rf_plan_free(plan);
    rf_problem_free(pb);
  }
}

/* The engine tests' case: Qwen3-30B-A3B TP1xPP2xEP8 -> TP4xDP4 (16 + 16 GPUs, bandwidth-bound:
 * 0.08-1.3 s) on DGX H100 (t 0), GB200 (t 1) or DGX H100 figures under 4:1 oversubscribed leaves
 * of 16 GPUs (t 2, tests/data/h100-os4.topo), p2p (k 0) or m2n (k 1), refit's executor program on
 * hosts of `group` GPUs. */
typedef struct {
  RfProblem *pb;
  RfPlan *plan;
  RfCalibration cal;
  SimProgram *p;
  const char *topo, *strategy;
} ExecCase;

static ExecCase exec_case(int t, int k, int group, gboolean lane_comms) {
  static const char *const topos[] = {"dgx-h100", "gb200-nvl72", "h100-os4.topo"};
  static const RfStrategy strat[] = {RF_STRATEGY_P2P, RF_STRATEGY_M2N};
  ExecCase c = {.topo = topos[t], .strategy = rf_strategy_name(strat[k])};
  g_autofree char *path =
      t == 2 ? g_strdup_printf("%s/tests/data/%s", rf_data_dir(), topos[t]) : g_strdup(topos[t]);
  c.pb = preset("qwen3-30b-a3b", "TP1xPP2xEP8", "TP4xDP4", path);
  if (t < 2) {
    topology_calib(&c.cal, c.pb->topo);
  } else { /* a test fixture: no calibration file of its own (the engines' inputs are the same) */
    gboolean found;
    rf_calibration_defaults(&c.cal);
    g_assert_true(rf_calibration_for_topology(&c.cal, c.pb->topo, &found, NULL));
  }
  c.cal.software = RF_SOFTWARE_REFIT;
  c.cal.variant = RF_VARIANT_EXECUTOR;
  c.cal.exec_lane_comms = lane_comms;
  GError *e = NULL;
  c.plan = rf_plan_build(c.pb, strat[k], NULL, &e);
  g_assert_no_error(e);
  g_autoptr(SimProtos) x = sim_protos_build(c.plan, &c.cal);
  c.p = sim_program_build(x, &c.cal, group, &e);
  g_assert_no_error(e);
  g_assert_nonnull(c.p->exec);
  return c;
}

static void exec_case_clear(ExecCase *c) {
  sim_program_free(c->p);
  rf_plan_free(c->plan);
  rf_calibration_clear(&c->cal);
  rf_problem_free(c->pb);
}

/* got within tol of want; tol 0: equal (GLib's epsilon test is strict: it passes nothing at 0). */
static void assert_near(double got, double want, double tol) {
  if (tol == 0)
    g_assert_cmpfloat(got, ==, want);
  else
    g_assert_cmpfloat_with_epsilon(got, want, tol);
}

/* got against want: the same phases, the total within rel x want's, each phase's end (and start,
 * with starts) within 10 x that (the total alone: rel); rel 0: all of them equal, and the steps'
 * times too. */
static void assert_outcomes(const SimOutcome *got, const SimOutcome *want, double rel,
                            gboolean starts) {
  g_assert_cmpfloat(want->total_s, >, 0);
  const double tol = rel * want->total_s, ptol = starts ? 10 * tol : tol;
  assert_near(got->total_s, want->total_s, tol);
  for (int l = 0; l < RF_PHASE_COUNT; l++) {
    g_assert_cmpint(got->used[l], ==, want->used[l]);
    assert_near(got->end_s[l], want->end_s[l], ptol);
    if (starts) assert_near(got->start_s[l], want->start_s[l], ptol);
  }
  if (rel > 0) return;
  g_assert_cmpint(got->nsteps, ==, want->nsteps);
  for (int st = 0; st < want->nsteps; st++) {
    g_assert_cmpfloat(got->step_start_s[st], ==, want->step_start_s[st]);
    g_assert_cmpfloat(got->step_end_s[st], ==, want->step_end_s[st]);
  }
}

/* The executor's fast path against its exact one: the engine leaves off the routes the HBM links
 * that cannot bind (each host's HBM is faster than its four NVLink and NIC links together, on
 * DGX H100 and GB200), so SimGrid solves half the link entries per message, and on the exact
 * platform it re-solves only what a change touches (SimGrid's lazy update, with a pair link first
 * on every route, engine.c) instead of every message at every change; the coarse platform (hosts
 * of 2 here) runs the full update, so there only the pruned routes are checked. The same max-min
 * sharing: the same predicted time and phase ends, to SimGrid's timing precision, for p2p and m2n
 * of Qwen3-30B-A3B (16 + 16 GPUs, bandwidth-bound: 0.09-0.36 s). */
static void test_exec_pruned_routes(void) {
  /* SimGrid's timing precision (surf/precision) at 1e-12 s instead of 1e-9 s: the lazy update
   * advances a message's remaining bytes at other instants than the full one, so at 1e-9 s per
   * event the two differ by up to 1.3e-8 s here (the reference itself moves by as much between
   * the two precisions); at 1e-12 s they agree to 1e-14 s (docs/sim.md, Speed) */
  g_setenv("REFIT_SIM_CFG", "--cfg=surf/precision:1e-12", TRUE);
  for (int t = 0; t < 2; t++)
    for (int k = 0; k < 2; k++) {
      /* the exact platform and hosts of 2 in turn: each topology and strategy once, each group
       * size on both topologies and both strategies (four pairs of runs: CI time, valgrind) */
      const int group = 1 + (t + k) % 2;
      ExecCase c = exec_case(t, k, group, FALSE);
      SimProgram *p = c.p;
      g_auto(SimOutcome) fast = {0}, exact = {0};
      GError *e = NULL;
      g_assert_true(sim_engine_run(p, FALSE, &fast, &e));
      g_assert_no_error(e);
      p->exact_routes = TRUE;
      p->full_update = TRUE;
      g_assert_true(sim_engine_run(p, FALSE, &exact, &e));
      g_assert_no_error(e);
      g_test_message("%s %s group %d: exact %.12g s, pruned%s %.12g s", c.topo, c.strategy, group,
                     exact.total_s, group == 1 ? " and lazy" : "", fast.total_s);
      assert_outcomes(&fast, &exact, 1e-9, FALSE);
      exec_case_clear(&c);
    }
  g_unsetenv("REFIT_SIM_CFG");
}

/* The events engine (sim/events.c) against SimGrid on the same executor programs: Qwen3-30B-A3B
 * p2p and m2n on DGX H100 and GB200 (16 + 16 GPUs), the exact platform; hosts of 2 GPUs; and the
 * lanes on communicators of their own (--lane-comms); and on oversubscribed leaves, where
 * messages that cross leaves have a longer route latency and so, in SimGrid's CM02 sharing, a
 * smaller share of a link (its weight: 1 / latency). The same rank programs, rendezvous and
 * weighted max-min sharing (solved locally by the events engine, over every message in flight by
 * SimGrid): the same predicted time within 1e-5 of the run and phase starts and ends within 1e-4
 * of it (measured: the same to 1e-12 on the exact platform, 1.1e-6 apart on hosts of 2; with a
 * communicator per lane 7e-7, a phase end 1.7e-5; under the leaves, with the fixture's neutral
 * calibration, 1e-12, checked to 1e-9: equal weights were 9.3e-6 off on p2p there;
 * `refit sim -T tests/data/h100-os4.topo` with dgx-h100's calibration: m2n
 * 1e-9, p2p 2.5e-5 slower whatever the depth of the local solve, 4e-9 with the switch latency
 * at 0: a difference not yet found). */
static void test_exec_events_engine(void) {
  g_setenv("REFIT_SIM_CFG", "--cfg=surf/precision:1e-12", TRUE);
  for (int t = 0; t < 3; t++)
    for (int k = 0; k < 2; k++) {
      const int group = t == 0 && k == 1 ? 2 : 1;   /* DGX H100 m2n: hosts of 2 GPUs */
      const gboolean lane_comms = t == 1 && k == 1; /* GB200 m2n: a communicator per lane */
      ExecCase c = exec_case(t, k, group, lane_comms);
      g_auto(SimOutcome) eo = {0}, so = {0};
      GError *e = NULL;
      gboolean ran = sim_events_run(c.p, &eo, &e);
      g_assert_no_error(e);
      g_assert_true(ran);
      g_assert_true(sim_engine_run(c.p, FALSE, &so, &e));
      g_assert_no_error(e);
      g_test_message("%s %s group %d%s: SimGrid %.12g s, events %.12g s", c.topo, c.strategy, group,
                     lane_comms ? " lane-comms" : "", so.total_s, eo.total_s);
      assert_outcomes(&eo, &so, t == 2 ? 1e-9 : 1e-5, TRUE);
      exec_case_clear(&c);
    }
  g_unsetenv("REFIT_SIM_CFG");
}

/* The events engine's 32-bit solve stamps go back to 0 before they would wrap (stamp_room): runs
 * whose stamps start just below the end, so that they pass the reset at their first solves or
 * among their later ones (of about 61,000), with messages moving, give the run's outcome exactly
 * (the stamps only tell which records a solve has taken in). Without the reset the count wraps to
 * a solve stamped 0, the stamp of a message just put on its links, which that solve then leaves
 * out: 0.341822 s against 0.341832 s here. */
static void test_exec_events_stamp_reset(void) {
  for (int k = 0; k < 2; k++) {
    ExecCase c = exec_case(1, k, 1, TRUE);
    g_auto(SimOutcome) want = {0};
    GError *e = NULL;
    g_assert_true(sim_events_run(c.p, &want, &e));
    g_assert_no_error(e);
    static const uint32_t back[] = {4, 200, 2000, 20000};
    for (unsigned i = 0; i < G_N_ELEMENTS(back); i++) {
      g_auto(SimOutcome) got = {0};
      sim_events_set_stamp_start(UINT32_MAX - back[i]);
      const gboolean ran = sim_events_run(c.p, &got, &e);
      sim_events_set_stamp_start(0);
      g_assert_no_error(e);
      g_assert_true(ran);
      assert_outcomes(&got, &want, 0, TRUE);
    }
    exec_case_clear(&c);
  }
}

/* NeMo RL, two PP stages of one 50 MB call each (GPU 0 and GPU 1 to GPU 2), 10 ms of Python per
 * call. The host issues ahead of the GPU (no per-call sync), so a stage lasts max(10 ms host,
 * 5 ms put) = 10 ms. Two streams: stream 0 runs 0-10 ms; stream 1 is issued after stage 0's host
 * time (one Python thread) and runs 10-20 ms: 20 ms. One stream: 10 + 10 = 20 ms: host-bound,
 * the second stream gains nothing. */
static void test_sw_two_stages_two_streams(void) {
  RfCalibration cal;
  golden_calib(&cal);
  cal.software = RF_SOFTWARE_NEMO_RL;
  cal.variant = RF_VARIANT_M2N_PACK;
  cal.nemo_call_s = 0.010;
  RfResult r;
  double t2 = sw_simulate("two-layers.json", "PP2", "TP1", RF_STRATEGY_HYBRID, &cal, &r);
  g_assert_cmpfloat_with_epsilon(t2, 0.020, 1e-6);
  gboolean lane1 = FALSE;
  for (int i = 0; i < r.nstages; i++)
    if (!strcmp(r.stages[i].name, "stream1 stage1")) {
      lane1 = TRUE;
      g_assert_cmpfloat_with_epsilon(r.stages[i].start_s, 0.010, 1e-9);
    }
  g_assert_true(lane1);
  rf_result_clear(&r);
  cal.nemo_streams = 1;
  double t1 = sw_simulate("two-layers.json", "PP2", "TP1", RF_STRATEGY_HYBRID, &cal, &r);
  g_assert_cmpfloat_with_epsilon(t1, 0.020, 1e-6);
  rf_result_clear(&r);
  rf_calibration_clear(&cal);
}

/* NeMo RL golden (xferdtensor_golden): one 100 MB replicated source shard on GPU 0 broadcast in
 * full to every rank of the communicator (GPU 0 and destinations 1, 2, 3, one GPU per domain): an
 * NCCL ring 0 -> 1 -> 2 -> 3, each hop on its own pair of 10 GB/s NICs, pipelined, hop h starting
 * h x 6 us (NIC + switch latency) after the first. The call's ring latency (3 hops x 6 us, base 0)
 * comes first; the last hop starts at 18 us and takes 6 us + 10 ms; each destination copies its
 * 100 MB out at half the golden HBM's 1e15 B/s (a copy reads and writes: 0.2 us): 18 + 18 + 6 us +
 * 10 ms + 0.2 us. Three separate sends from
 * GPU 0 would share its NIC: 30 ms. */
static void test_sw_golden_broadcast(void) {
  RfCalibration cal;
  golden_calib(&cal);
  cal.software = RF_SOFTWARE_NEMO_RL;
  cal.variant = RF_VARIANT_GOLDEN;
  cal.nemo_dispatch_s = 1.0; /* python-fallback's per-refit cost: not golden's */
  RfProblem *pb = copy_problem_on("golden.topo", 50000000, "0", 1, "1,2,3", 3, 1);
  GError *e = NULL;
  RfPlan *plan = rf_plan_build(pb, RF_STRATEGY_HYBRID, NULL, &e);
  g_assert_no_error(e);
  RfResult r;
  double t = simulate(plan, &cal, 1, &r);
  g_assert_cmpfloat_with_epsilon(t, 18e-6 + 18e-6 + 6e-6 + 0.01 + 2e-7, 1e-7);
  rf_result_clear(&r);
  rf_plan_free(plan);
  rf_problem_free(pb);
  rf_calibration_clear(&cal);
}

/* The host runs ahead of the GPU (NeMo RL issues its calls without a per-call sync): a stage
 * lasts max(host, GPU), not host + GPU. One golden call of 100 MB from GPU 0 to GPU 1: GPU time
 * 6 us of ring latency, the flow from 6 us on (6 us + 10 ms), the 0.2 us copy-out: 10.0182 ms.
 * Host-bound (20 ms of host per call): 20 ms; GPU-bound (4 ms): 10.0182 ms. */
static void test_sw_host_ahead(void) {
  RfCalibration cal;
  golden_calib(&cal);
  cal.software = RF_SOFTWARE_NEMO_RL;
  cal.variant = RF_VARIANT_GOLDEN;
  RfProblem *pb = copy_problem_on("golden.topo", 50000000, "0", 1, "1", 1, 1);
  GError *e = NULL;
  RfPlan *plan = rf_plan_build(pb, RF_STRATEGY_HYBRID, NULL, &e);
  g_assert_no_error(e);
  RfResult r;
  const double gpu = 6e-6 + 6e-6 + 6e-6 + 0.01 + 2e-7;
  cal.nemo_call_s = 0.020;
  g_assert_cmpfloat_with_epsilon(simulate(plan, &cal, 1, &r), 0.020, 1e-7);
  rf_result_clear(&r);
  cal.nemo_call_s = 0.004;
  g_assert_cmpfloat_with_epsilon(simulate(plan, &cal, 1, &r), gpu, 1e-7);
  rf_result_clear(&r);
  rf_plan_free(plan);
  rf_problem_free(pb);
  rf_calibration_clear(&cal);
}

/* NCCL M2N's bench: one communicator and stream per (train stage, generation stage) pair, the
 * calls of one name-pattern group launched on their pairs' streams together, synchronized once.
 * Two layers of one pattern (50 MB each), PP2 -> TP1: pair 0 (GPU 0 -> GPU 2) and pair 1
 * (GPU 1 -> GPU 2) run concurrently: each lane's two 10 ms barriers (RING) at once, 0-20 ms, then
 * both puts share GPU 2's 10 GB/s NIC (100 MB: 10 ms + 6 us): 30.006 ms (in series 2 x 25.006).
 * Host-bound (40 ms of host planning per call, one host issues both): max(80 ms, 40 + 30.006). */
static void test_sw_bench_pairs_concurrent(void) {
  RfCalibration cal;
  golden_calib(&cal);
  cal.software = RF_SOFTWARE_NCCL_M2N;
  cal.variant = RF_VARIANT_RING_V01;
  cal.m2n_barrier_s = 0.010;
  RfResult r;
  double t = sw_simulate("two-layers.json", "PP2", "TP1", RF_STRATEGY_M2N, &cal, &r);
  g_assert_cmpfloat_with_epsilon(t, 0.030 + 6e-6, 1e-6);
  rf_result_clear(&r);
  cal.m2n_plan_s = 0.040;
  t = sw_simulate("two-layers.json", "PP2", "TP1", RF_STRATEGY_M2N, &cal, &r);
  g_assert_cmpfloat_with_epsilon(t, 0.080, 1e-6);
  rf_result_clear(&r);
  rf_calibration_clear(&cal);
}

/* Five PP stages, five communicators, tiny calls of 10 ms of kernel time each (four barriers of
 * 2.5 ms), five streams: with the 4 staging slots of M2N PACK the fifth communicator shares the
 * first one's slot and runs after it (20 ms); with 5 slots all run at once (10 ms). */
static void test_sw_slot_shared_by_five(void) {
  RfCalibration cal;
  golden_calib(&cal);
  cal.software = RF_SOFTWARE_NEMO_RL;
  cal.variant = RF_VARIANT_M2N_PACK;
  cal.nemo_streams = 5;
  cal.m2n_barrier_s = 0.0025;
  RfResult r;
  double t4 = sw_simulate("five-layers.json", "PP5", "TP1", RF_STRATEGY_HYBRID, &cal, &r);
  g_assert_cmpfloat_with_epsilon(t4, 0.020, 1e-4);
  g_assert_cmpfloat(t4, >, 0.020);
  rf_result_clear(&r);
  cal.m2n_slots = 5;
  double t5 = sw_simulate("five-layers.json", "PP5", "TP1", RF_STRATEGY_HYBRID, &cal, &r);
  g_assert_cmpfloat_with_epsilon(t5, 0.010, 1e-4);
  rf_result_clear(&r);
  rf_calibration_clear(&cal);
}

/* n BF16 elements sharded over GPUs 0 and 1 (S0) to GPUs 2 and 3, each a full replica, on the
 * golden cluster with NVLink domains of domain GPUs, planned by strategy. Free with
 * free_sharded. */
static RfPlan *sharded_to_replicas(int64_t n, int domain, RfStrategy strategy) {
  g_autofree char *json = g_strdup_printf(
      "{\"tensors\":[{\"name\":\"w\",\"shape\":[%" G_GINT64_FORMAT "],\"dtype\":\"bf16\","
      "\"src\":{\"mesh\":[2],\"ranks\":[0,1],\"placements\":[\"S0\"]},"
      "\"dst\":{\"mesh\":[2],\"ranks\":[2,3],\"placements\":[\"R\"]}}]}",
      n);
  GError *e = NULL;
  RfProblem *pb = rf_problem_new_spec(json, -1, load_topo("golden.topo", domain), &e);
  g_assert_no_error(e);
  RfPlan *plan = rf_plan_build(pb, strategy, NULL, &e);
  g_assert_no_error(e);
  return plan;
}

static void free_sharded(RfPlan *plan) {
  RfProblem *pb = (RfProblem *)plan->problem;
  rf_plan_free(plan);
  rf_problem_free(pb);
}

/* NeMo RL's gather-broadcast is its collective path: every tensor by packed broadcast, whatever
 * the variant (the hybrid's bulk transport). 100 MB sharded over GPUs 0 and 1 broadcast to GPUs
 * 2 and 3: the same time under every variant, above the 10 ms that 100 MB takes on one 10 GB/s
 * NIC. (With golden and xfer-v0.1, whose hybrid sends every part by the bulk path and has no
 * misc path, it moved nothing and took 0 s.) */
static void test_sw_gather_broadcast_any_variant(void) {
  RfPlan *plan = sharded_to_replicas(50000000, 1, RF_STRATEGY_GATHER_BROADCAST);
  RfCalibration cal;
  golden_calib(&cal);
  cal.software = RF_SOFTWARE_NEMO_RL;
  const RfSwVariant v[] = {RF_VARIANT_DEFAULT, RF_VARIANT_PYTHON_FALLBACK, RF_VARIANT_M2N_PACK,
                           RF_VARIANT_XFER_V01, RF_VARIANT_GOLDEN};
  double t0 = 0;
  for (size_t i = 0; i < G_N_ELEMENTS(v); i++) {
    cal.variant = v[i];
    RfResult r;
    double t = simulate(plan, &cal, 1, &r);
    rf_result_clear(&r);
    if (i == 0) t0 = t;
    g_assert_cmpfloat(t, >, 0.010);
    g_assert_cmpfloat_with_epsilon(t, t0, 1e-12);
  }
  rf_calibration_clear(&cal);
  free_sharded(plan);
}

/* The export's host time against its GPU time (export.host_overlap). 100 MB sharded over GPUs 0
 * and 1 (each gathers the other's half, the export's transfers) broadcast to GPUs 2 and 3, one
 * GPU per domain, in five 20 MB buckets: the middle step (the last four fifths of the export)
 * is paced to 4/5 of the export's duration. With no host time that is 4/5 of its GPU time G
 * (pace0). With host time H per tensor (one tensor here), overlapped (no host sync per tensor,
 * one per buffer) it is 4/5 max(H, G); in series (a sync per tensor) 4/5 (H + G). */
static void test_export_host_overlap(void) {
  RfPlan *plan = sharded_to_replicas(50000000, 1, RF_STRATEGY_GATHER_BROADCAST);
  RfCalibration cal;
  golden_calib(&cal);
  cal.software = RF_SOFTWARE_NEMO_RL; /* its collective path: Megatron-Bridge's export */
  cal.gpu_memory_bytes = 1e9;         /* 2%: 20 MB buckets, five of them */
  RfResult r;
  RfSimStats st;
  simulate_stats(plan, &cal, 1, &r, &st);
  rf_result_clear(&r);
  const double pace0 = st.export_pace_s, frac = 0.8;
  g_assert_cmpfloat(st.nbuckets, ==, 5);
  g_assert_cmpfloat(pace0, >, 0);
  const double host[] = {0.5 * pace0 / frac, 3 * pace0 / frac}; /* below and above G */
  for (int i = 0; i < 2; i++) {
    cal.export_tensor_overhead_s = host[i];
    cal.export_host_overlap = TRUE;
    double t_overlap = simulate_stats(plan, &cal, 1, &r, &st);
    rf_result_clear(&r);
    g_assert_cmpfloat_with_epsilon(st.export_pace_s, MAX(frac * host[i], pace0), 1e-9);
    cal.export_host_overlap = FALSE;
    double t_series = simulate_stats(plan, &cal, 1, &r, &st);
    rf_result_clear(&r);
    g_assert_cmpfloat_with_epsilon(st.export_pace_s, frac * host[i] + pace0, 1e-9);
    g_test_message("host %.4g s: overlapped %.6g s, in series %.6g s", host[i], t_overlap,
                   t_series);
    g_assert_cmpfloat(t_overlap, <, t_series);
    /* Host time 3 G: the host bounds the run and overlapping hides the GPU time under it, the
     * middle step's 4/5 G (pace0) and at most the first fifth's 1/5 G more. */
    if (i == 1) {
      g_assert_cmpfloat(t_series - t_overlap, >=, pace0 * (1 - 1e-3));
      g_assert_cmpfloat(t_series - t_overlap, <=, pace0 * 1.25 * (1 + 1e-3));
    }
  }
  rf_calibration_clear(&cal);
  free_sharded(plan);
}

/* The flow model of refit's gather-broadcast carries no export software cost: refit run moves
 * the plan's export messages in its groups, with no per-parameter collective and no per-tensor
 * host time (those are Megatron-Bridge's export, NeMo RL's model). A per-tensor host time of a
 * second predicts the same time as none, and 10 ms collectives add no export latency; in NeMo
 * RL's model the same second is there. */
static void test_refit_flows_no_export_software(void) {
  RfPlan *plan = sharded_to_replicas(50000000, 1, RF_STRATEGY_GATHER_BROADCAST);
  RfCalibration cal;
  golden_calib(&cal);
  g_assert_true(cal.software == RF_SOFTWARE_REFIT && cal.variant != RF_VARIANT_EXECUTOR);
  RfResult r;
  RfSimStats st;
  const double t0 = simulate_stats(plan, &cal, 1, &r, &st);
  rf_result_clear(&r);
  cal.export_tensor_overhead_s = 1.0;
  const double t1 = simulate_stats(plan, &cal, 1, &r, &st);
  rf_result_clear(&r);
  g_assert_cmpfloat(st.export_latency_s, ==, 0);
  g_assert_cmpfloat(t0, >, 0.010); /* 100 MB on 10 GB/s NICs */
  g_assert_cmpfloat_with_epsilon(t1, t0, 1e-12);
  cal.collective_base_s = 0.01; /* the export's ring latencies: none either */
  simulate_stats(plan, &cal, 1, &r, &st);
  rf_result_clear(&r);
  g_assert_cmpfloat(st.export_latency_s, ==, 0);
  cal.software = RF_SOFTWARE_NEMO_RL; /* the same costs in NeMo RL's model: a second at least */
  const double t2 = simulate_stats(plan, &cal, 1, &r, &st);
  rf_result_clear(&r);
  g_assert_cmpfloat(st.export_latency_s, >=, 1.0);
  g_assert_cmpfloat(t2, >=, 1.0);
  rf_calibration_clear(&cal);
  free_sharded(plan);
}

/* Twelve PP stages on twelve streams, each a call of 10 ms of kernel time (four barriers of
 * 2.5 ms), with twelve staging slots: all run at once (10 ms). More streams than the eight the
 * engine once held must not fold back onto eight lanes (that took 20 ms). */
static void test_sw_twelve_streams(void) {
  RfCalibration cal;
  golden_calib(&cal);
  cal.software = RF_SOFTWARE_NEMO_RL;
  cal.variant = RF_VARIANT_M2N_PACK;
  cal.nemo_streams = 12;
  cal.m2n_slots = 12;
  cal.m2n_barrier_s = 0.0025;
  RfResult r;
  double t = sw_simulate("twelve-layers.json", "PP12", "TP1", RF_STRATEGY_HYBRID, &cal, &r);
  g_assert_cmpfloat_with_epsilon(t, 0.010, 1e-4);
  rf_result_clear(&r);
  rf_calibration_clear(&cal);
}

/* M2N refuses a call past MAX_SOURCES: refit sim says so, it does not predict. */
static void test_sw_limits_refuse(void) {
  RfCalibration cal;
  golden_calib(&cal);
  cal.software = RF_SOFTWARE_NEMO_RL;
  cal.variant = RF_VARIANT_M2N_PACK;
  cal.m2n_max_sources = 1;
  g_autofree char *m = data_path("two-layers.json"), *t = data_path("golden.topo");
  RfProblem *pb = preset(m, "TP2", "TP1", t);
  GError *e = NULL;
  RfPlan *plan = rf_plan_build(pb, RF_STRATEGY_HYBRID, NULL, &e);
  g_assert_no_error(e);
  RfSimOptions o = {0};
  o.calib = cal;
  RfExecutor *ex = rf_sim_executor_new(&o);
  g_assert_true(ex->prepare(ex, pb, &e));
  RfResult r;
  g_assert_false(ex->run(ex, plan, &r, &e));
  g_assert_error(e, RF_ERROR, RF_ERROR_INPUT);
  g_assert_nonnull(strstr(e->message, "MAX_SOURCES"));
  g_assert_null(strchr(e->message, '\n'));
  g_error_free(e);
  ex->destroy(ex);
  rf_plan_free(plan);
  rf_problem_free(pb);
  rf_calibration_clear(&cal);
}

/* The NVLink team of a communicator: gcd of the per-domain run lengths. */
static void test_sw_lsa_team(void) {
  int a[] = {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15}; /* runs 4, 8 (domains of 8) */
  g_assert_cmpint(sw_lsa_team(a, 12, 8), ==, 4);
  int b[] = {0, 1, 2, 3, 4, 5, 6, 7, 72, 73}; /* runs 8, 2 (domains of 72) */
  g_assert_cmpint(sw_lsa_team(b, 10, 72), ==, 2);
  int c[] = {0, 1, 2, 3, 4, 5, 6, 7};
  g_assert_cmpint(sw_lsa_team(c, 8, 72), ==, 8);
}

/* NCCL Xfer v0.1 RING's leaders (reshard_prepare.cc): the nsrc sources of a destination shard
 * spread over its nlocal replicas on the target domain, nsrc / nlocal each, the first
 * nsrc % nlocal replicas one more. 5 over 2: 3 + 2; 16 over 8: 2 each; 1 over 8: replica 0. */
static void test_sw_ring_leader_rule(void) {
  const int five[] = {0, 0, 0, 1, 1};
  for (int p = 0; p < 5; p++)
    g_assert_cmpint(sw_ring_leader(p, 5, 2), ==, five[p]);
  for (int p = 0; p < 16; p++)
    g_assert_cmpint(sw_ring_leader(p, 16, 8), ==, p / 2);
  g_assert_cmpint(sw_ring_leader(0, 1, 8), ==, 0);
  g_assert_cmpint(sw_ring_leader(2, 3, 8), ==, 2);
}

/* RING, one call: 200 MB sharded over GPUs 0 and 1 (100 MB each) to two replicas on GPUs 2 and 3
 * (one NVLink team of 2). Each source piece lands on its own replica, which fans it out to the
 * other over NVLink (100 MB at 100 GB/s: 1 ms), so each NIC receives 100 MB at 10 GB/s at once:
 * 10 ms + 6 us of NIC + switch latency. One leader taking both pieces would need 20 ms. */
static void test_sw_ring_pieces_own_leaders(void) {
  RfCalibration cal;
  golden_calib(&cal);
  cal.software = RF_SOFTWARE_NCCL_M2N;
  cal.variant = RF_VARIANT_RING_V01;
  RfPlan *plan = sharded_to_replicas(100000000, 2, RF_STRATEGY_M2N);
  RfResult r;
  assert_rel(simulate(plan, &cal, 1, &r), 1e8 / 10e9 + 6e-6);
  rf_result_clear(&r);
  free_sharded(plan);
  rf_calibration_clear(&cal);
}

/* DIRECT (NCCL Xfer v0.1 at 4532497), one call: 200 MB sharded over GPUs 0 and 1 (100 MB each)
 * to two replicas on GPUs 2 and 3. The single source replica serves both destination replicas
 * (UNIFORM load balance, reshard_loadbalance.cc getTargetRepRange), so each source puts its
 * 100 MB piece to both (reshard_prepare.cc prepareDirectReshardParams): 200 MB over each 10 GB/s
 * NIC, 20 ms + 6 us of NIC + switch latency, after the call's two barriers (0.1 ms each). The
 * kernel posts its puts without a credit window (reshard_user_window.cu l.358-407): no fill
 * time per call, so the time is exactly that. */
static void test_sw_direct_every_replica(void) {
  RfCalibration cal;
  golden_calib(&cal);
  cal.software = RF_SOFTWARE_NCCL_M2N;
  cal.variant = RF_VARIANT_DIRECT;
  cal.m2n_barrier_s = 1e-4;
  RfPlan *plan = sharded_to_replicas(100000000, 2, RF_STRATEGY_M2N);
  RfResult r;
  assert_rel(simulate(plan, &cal, 1, &r), 2e-4 + 2e8 / 10e9 + 6e-6);
  rf_result_clear(&r);
  /* RING on the same call: one piece per replica, fanned out over NVLink: half DIRECT's NIC time */
  cal.variant = RF_VARIANT_RING_V01;
  assert_rel(simulate(plan, &cal, 1, &r), 2e-4 + 1e8 / 10e9 + 6e-6);
  rf_result_clear(&r);
  free_sharded(plan);
  rf_calibration_clear(&cal);
}

/* The Python fallback without destination replicas (xferdtensor_python.py: no active replica
 * group, so the generic exact path, _build_exact_plan): every destination box comes from the
 * first holder of the source region (holders[0]), not round-robin over the replicas. One FFN
 * tensor of 100 MB (tests/data/sim/one-ffn.json, up_proj: TP shards rows) replicated on
 * GPUs 0 and 1 (DP2), sharded in two on GPUs 2 and 3 (TP2): GPU 0 sends
 * both 50 MB halves over its 10 GB/s NIC: 10 ms + 6 us (NIC + switch) + 2 us (the grouped
 * send/recv's message latency) + 0.1 us (each destination's copy-back of its 50 MB into vLLM's
 * fused gate_up_proj at the device copy rate, half the golden HBM's 1e6 GB/s; within the
 * engine's 0.1 us precision);
 * round-robin would take 5 ms. */
static void test_sw_fallback_first_holder(void) {
  RfCalibration cal;
  golden_calib(&cal);
  cal.software = RF_SOFTWARE_NEMO_RL;
  cal.variant = RF_VARIANT_PYTHON_FALLBACK;
  RfResult r;
  double t = sw_simulate("one-ffn.json", "DP2", "TP2", RF_STRATEGY_HYBRID, &cal, &r);
  g_assert_cmpfloat_with_epsilon(t, 1e8 / 10e9 + 6e-6 + 2e-6 + 5e7 / 1e15, 1e-7);
  rf_result_clear(&r);
  rf_calibration_clear(&cal);
}

/* Host time per NCCL operation issued from Python (nemo.nccl_op_s), counted on the busiest rank of
 * a call. Golden: the FFN tensor (100 MB, tests/data/sim/one-ffn.json) sharded in two on GPUs 0
 * and 1 (TP2), destination GPU 2 (TP1): two unique source shards, so every rank of the
 * communicator calls broadcast twice: 2 x 0.1 s of host, far above the GPU time (two 50 MB
 * broadcasts, ~10 ms): 0.2 s. Python fallback, the same source to two destination replicas on
 * GPUs 2 and 3 (DP2): striped (rows divide by 2), member m receives stripe m, which is source m's
 * shard exactly (one send on GPU m, one receive on GPU 2 + m), then each member calls the
 * all-gather: 2 operations on the busiest rank, 0.2 s (a member receiving from both sources, as
 * without the stripes, would make 3: 0.3 s). */
static void test_sw_nccl_op_host(void) {
  RfCalibration cal;
  golden_calib(&cal);
  cal.software = RF_SOFTWARE_NEMO_RL;
  cal.nemo_nccl_op_s = 0.1;
  RfResult r;
  cal.variant = RF_VARIANT_GOLDEN;
  double t = sw_simulate("one-ffn.json", "TP2", "TP1", RF_STRATEGY_HYBRID, &cal, &r);
  g_assert_cmpfloat_with_epsilon(t, 0.2, 1e-6);
  rf_result_clear(&r);
  cal.variant = RF_VARIANT_PYTHON_FALLBACK;
  t = sw_simulate("one-ffn.json", "TP2", "DP2", RF_STRATEGY_HYBRID, &cal, &r);
  g_assert_cmpfloat_with_epsilon(t, 0.2, 1e-6);
  rf_result_clear(&r);
  rf_calibration_clear(&cal);
}

/* Registers fn once per entry of a table, under prefix/NAME. */
static void add_cases(const char *prefix, const void *table, size_t size, size_t n,
                      const char *(*name)(const void *), GTestDataFunc fn) {
  for (size_t i = 0; i < n; i++) {
    const void *c = (const char *)table + i * size;
    g_autofree char *path = g_strdup_printf("%s/%s", prefix, name(c));
    g_test_add_data_func(path, c, fn);
  }
}

static const char *strategy_case(const void *c) {
  return rf_strategy_name(*(const RfStrategy *)c);
}

static const char *file_case(const void *c) {
  return ((const BadFile *)c)->file;
}

static const char *string_case(const void *c) {
  return *(const char *const *)c;
}

/* ---- elastic recovery: destroy-and-recreate vs ncclCommShrink, from arithmetic ----
 * golden.cal: init 2 s at 10 ranks, 20 s at 1000 ranks: t(N) = 2 sqrt(N / 10); shrink = 0.5 x.
 * tiny-moe TP2xPP2xDP2 (8 training ranks, 4 per PP stage) -> TP2xDP2 (4 inference ranks), GPU 1
 * (training rank 1, stage 0) and GPU 9 (an inference rank) lost: 10 of 12 ranks survive. */
static void test_recovery_cost(void) {
  RfCalibration cal;
  golden_calib(&cal);
  assert_rel(rf_recovery_init_s(&cal, 10), 2.0);
  assert_rel(rf_recovery_init_s(&cal, 40), 4.0);
  assert_rel(rf_recovery_init_s(&cal, 250), 10.0);
  assert_rel(rf_recovery_init_s(&cal, 1000), 20.0);
  g_autoptr(RfProblem) pb = preset("tiny-moe", "TP2xPP2xDP2", "TP2xDP2", "dgx-h100");
  const int lost[] = {1, 9};
  GError *e = NULL;
  g_assert_true(rf_problem_set_lost(pb, lost, 2, &e));
  g_assert_no_error(e);
  g_assert_cmpint(pb->lost[pb->src.ranks[1]], ==, 1);
  RfRecovery r;
  /* refit's executor: one world communicator, 12 -> 10 ranks: t(10) = 2 s */
  cal.software = RF_SOFTWARE_REFIT;
  rf_recovery_cost(pb, RF_STRATEGY_M2N, &cal, &r);
  g_assert_true(r.available);
  g_assert_cmpint(r.ncomms, ==, 1);
  g_assert_cmpint(r.ranks_before, ==, 12);
  g_assert_cmpint(r.ranks_after, ==, 10);
  g_assert_false(r.extrapolated);
  assert_rel(r.recreate_s, 2.0);
  assert_rel(r.shrink_s, 1.0);
  rf_recovery_clear(&r);
  /* NeMo RL hybrid: model_update_group (10 ranks) + stage 0 (3 training + 3 generation) +
   * stage 1 (4 + 3): 2 + 2 sqrt(0.6) + 2 sqrt(0.7) s, 6 and 7 ranks below the 10-rank point */
  cal.software = RF_SOFTWARE_NEMO_RL;
  rf_recovery_cost(pb, RF_STRATEGY_HYBRID, &cal, &r);
  g_assert_cmpint(r.ncomms, ==, 3);
  g_assert_true(r.extrapolated);
  assert_rel(r.recreate_s, 2.0 + 2.0 * sqrt(0.6) + 2.0 * sqrt(0.7));
  assert_rel(r.shrink_s, 0.5 * (2.0 + 2.0 * sqrt(0.6) + 2.0 * sqrt(0.7)));
  rf_recovery_clear(&r);
  /* its gather + broadcast: model_update_group only */
  rf_recovery_cost(pb, RF_STRATEGY_GATHER_BROADCAST, &cal, &r);
  g_assert_cmpint(r.ncomms, ==, 1);
  assert_rel(r.recreate_s, 2.0);
  rf_recovery_clear(&r);
  /* no init figure (the neutral calibration): destroy-and-recreate unavailable */
  RfCalibration neutral;
  rf_calibration_defaults(&neutral);
  g_assert_cmpfloat(rf_recovery_init_s(&neutral, 10), <, 0);
  rf_recovery_cost(pb, RF_STRATEGY_M2N, &neutral, &r);
  g_assert_false(r.available);
  g_assert_cmpint(r.ncomms, ==, 1);
  rf_recovery_clear(&r);
  rf_calibration_clear(&neutral);
  rf_calibration_clear(&cal);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add("/sim/golden/one_message", Golden, &one_remote, golden_setup, test_one_message,
             golden_teardown);
  g_test_add("/sim/golden/two_messages_share_nic", Golden, &two_remote, golden_setup,
             test_two_messages_share_nic, golden_teardown);
  g_test_add("/sim/golden/nvlink_fanout", Golden, &three_local, golden_setup, test_nvlink_fanout,
             golden_teardown);
  g_test_add("/sim/golden/group_exact_on_symmetric", Golden, &four_remote, golden_setup,
             test_group_exact_on_symmetric, golden_teardown);
  add_cases("/sim/plan/end_to_end", strategies, sizeof *strategies, G_N_ELEMENTS(strategies),
            strategy_case, test_end_to_end);
  add_cases("/sim/scale/reduction_under_one_percent", strategies, sizeof *strategies,
            G_N_ELEMENTS(strategies), strategy_case, test_reduction_under_one_percent);
  g_test_add_func("/sim/input/nothing_moves", test_nothing_moves);
  add_cases("/sim/input/bad_topology", bad_topologies, sizeof *bad_topologies,
            G_N_ELEMENTS(bad_topologies), file_case, test_bad_topology);
  add_cases("/sim/input/bad_calibration", bad_calibrations, sizeof *bad_calibrations,
            G_N_ELEMENTS(bad_calibrations), file_case, test_bad_calibration);
  add_cases("/sim/input/shipped_calibration", shipped, sizeof *shipped, G_N_ELEMENTS(shipped),
            string_case, test_shipped_calibration);
  g_test_add_func("/sim/software/pack_put_unpack_in_series", test_sw_pack_put_unpack);
  g_test_add_func("/sim/executor/lanes", test_exec_lanes);
  g_test_add_func("/sim/executor/self-send", test_exec_self_send);
  g_test_add_func("/sim/executor/work", test_exec_work);
  g_test_add_func("/sim/executor/many-groups", test_exec_many_groups);
  g_test_add_func("/sim/executor/coarse", test_exec_coarse);
  g_test_add_func("/sim/executor/pruned-routes", test_exec_pruned_routes);
  g_test_add_func("/sim/executor/events-engine", test_exec_events_engine);
  g_test_add_func("/sim/executor/events-stamp-reset", test_exec_events_stamp_reset);
  g_test_add_func("/sim/software/two_stages_two_streams", test_sw_two_stages_two_streams);
  g_test_add_func("/sim/software/slot_shared_by_five", test_sw_slot_shared_by_five);
  g_test_add_func("/sim/software/golden_broadcast_ring", test_sw_golden_broadcast);
  g_test_add_func("/sim/software/host_ahead_max", test_sw_host_ahead);
  g_test_add_func("/sim/software/gather_broadcast_any_variant",
                  test_sw_gather_broadcast_any_variant);
  g_test_add_func("/sim/software/bench_pairs_concurrent", test_sw_bench_pairs_concurrent);
  g_test_add_func("/sim/software/twelve_streams", test_sw_twelve_streams);
  g_test_add_func("/sim/golden/export_host_overlap", test_export_host_overlap);
  g_test_add_func("/sim/golden/refit_flows_no_export_software",
                  test_refit_flows_no_export_software);
  g_test_add_func("/sim/software/limits_refuse", test_sw_limits_refuse);
  g_test_add_func("/sim/software/lsa_team_gcd", test_sw_lsa_team);
  g_test_add_func("/sim/software/ring_leader_rule", test_sw_ring_leader_rule);
  g_test_add_func("/sim/software/ring_pieces_own_leaders", test_sw_ring_pieces_own_leaders);
  g_test_add_func("/sim/software/direct_every_replica", test_sw_direct_every_replica);
  g_test_add_func("/sim/software/fallback_first_holder", test_sw_fallback_first_holder);
  g_test_add_func("/sim/software/nccl_op_host", test_sw_nccl_op_host);
  g_test_add_func("/sim/recovery/recreate_vs_shrink", test_recovery_cost);
  return g_test_run();
}
