/* The library side of `refit advise` (model/plan/advise.c): the candidate layouts (each divides the
 * GPUs, EP spans them all, the divisibility check only refuses what the preset refuses too), the
 * interleaved placement (a permutation of domains: every GPU once, sides alternating, a domain's
 * ranks kept together in their slots) and the fabric bound, from arithmetic. */
#include "advise.h"
#include "error.h"

#include <glib.h>
#include <string.h>

static void test_placement_names(void) {
  for (int k = 0; k < RF_PLACE_COUNT; k++) {
    RfPlacementKind got = RF_PLACE_COUNT;
    GError *e = NULL;
    g_assert_true(rf_placement_kind_parse(rf_placement_kind_name((RfPlacementKind)k), &got, &e));
    g_assert_no_error(e);
    g_assert_cmpint(got, ==, k);
  }
  g_assert_cmpstr(rf_placement_kind_name(RF_PLACE_SPLIT), ==, "split");
  g_assert_cmpstr(rf_placement_kind_name(RF_PLACE_INTERLEAVED), ==, "interleaved");
  g_assert_cmpstr(rf_placement_kind_name(RF_PLACE_COUNT), ==, "?");
  RfPlacementKind got;
  GError *e = NULL;
  g_assert_false(rf_placement_kind_parse("mixed", &got, &e));
  g_assert_error(e, RF_ERROR, RF_ERROR_INPUT);
  g_assert_cmpstr(e->message, ==, "unknown placement 'mixed' (split or interleaved)");
  g_clear_error(&e);
}

static RfModel *load(const char *name) {
  GError *e = NULL;
  RfModel *m = rf_model_load(name, &e);
  g_assert_no_error(e);
  return m;
}

/* Every candidate for 1..64 GPUs is TP{t}xDP{n/t}[xEP{n}] with t dividing n, in ascending TP,
 * none twice; one per divisor and kind asked for (EP only with routed experts and more than one
 * GPU); a TP list keeps its order and drops what does not divide. */
static void test_layouts_divide(void) {
  RfModel *m = load("tiny-moe");
  const int64_t experts = m->arch.experts;
  for (int dense = 0; dense < 2; dense++) {
    m->arch.experts = dense ? 0 : experts;
    for (int n = 1; n <= 64; n++)
      for (int kinds = 1; kinds < 4; kinds++) {
        const gboolean with_ep = kinds & 1, without_ep = kinds & 2;
        GPtrArray *l = rf_advise_layouts(m, n, NULL, 0, with_ep, without_ep);
        int ndiv = 0;
        for (int t = 1; t <= n; t++)
          ndiv += n % t == 0;
        const int per = (without_ep || dense) + (with_ep && !dense && n > 1);
        g_assert_cmpuint(l->len, ==, (guint)(ndiv * per));
        int last_tp = 0;
        for (guint i = 0; i < l->len; i++) {
          const char *s = g_ptr_array_index(l, i);
          RfParallel p;
          GError *e = NULL;
          g_assert_true(rf_parallel_parse(s, &p, &e));
          g_assert_no_error(e);
          g_assert_cmpint(n % p.tp, ==, 0);
          g_assert_cmpint(p.tp * p.dp, ==, n);
          g_assert_cmpint(p.pp, ==, 1);
          g_assert_cmpint(p.ep, ==, p.ep_given ? n : 1);
          g_assert_true(!p.ep_given || (with_ep && !dense));
          g_assert_cmpint(p.tp, >=, last_tp);
          last_tp = p.tp;
          for (guint j = 0; j < i; j++)
            g_assert_cmpstr(g_ptr_array_index(l, j), !=, s);
        }
        g_ptr_array_unref(l);
      }
  }
  m->arch.experts = experts;
  const int tps[] = {8, 3, 0, -2, 2, 64};
  GPtrArray *l = rf_advise_layouts(m, 16, tps, G_N_ELEMENTS(tps), FALSE, TRUE);
  g_assert_cmpuint(l->len, ==, 2);
  g_assert_cmpstr(g_ptr_array_index(l, 0), ==, "TP8xDP2");
  g_assert_cmpstr(g_ptr_array_index(l, 1), ==, "TP2xDP8");
  g_ptr_array_unref(l);
  rf_model_free(m);
}

/* SGLang's layouts: DP engines of TP t (t divides n), EP and ADP each 1 or t, EP only with routed
 * experts and as --ep asks, none twice; with plain the engines without ADP or EP too, without it
 * neither those nor EP-only single engines (vLLM places them alike). Every layout the check
 * passes builds with the SGLang preset, and every one it refuses does not. */
static void test_layouts_sglang(void) {
  RfModel *m = load("tiny-moe");
  const int64_t experts = m->arch.experts;
  int built = 0, refused = 0;
  for (int dense = 0; dense < 2; dense++) {
    m->arch.experts = dense ? 0 : experts;
    for (int n = 1; n <= 12; n++)
      for (int kinds = 1; kinds < 4; kinds++)
        for (int plain = 0; plain < 2; plain++) {
          const gboolean with_ep = kinds & 1, without_ep = kinds & 2;
          GPtrArray *l = rf_advise_sglang_layouts(m, n, NULL, 0, with_ep, without_ep, plain);
          for (guint i = 0; i < l->len; i++) {
            const char *s = g_ptr_array_index(l, i);
            RfParallel p;
            g_assert_true(rf_parallel_parse(s, &p, NULL));
            g_assert_cmpint(p.tp * p.dp, ==, n);
            g_assert_true(p.ep == 1 || (p.ep == p.tp && p.tp > 1 && !dense && with_ep));
            g_assert_true(p.adp == 1 || (p.adp == p.tp && p.tp > 1));
            g_assert_true(dense || p.ep > 1 || without_ep);
            if (!plain) g_assert_true(p.adp > 1 || (p.ep > 1 && p.dp > 1));
            for (guint j = 0; j < i; j++)
              g_assert_cmpstr(g_ptr_array_index(l, j), !=, s);
            if (dense || plain) continue; /* the preset's check on the real model below */
            GError *e = NULL;
            gboolean ok = rf_advise_layout_check_fw(m, RF_INFER_SGLANG, &p, n, &e);
            g_assert_true(ok == (e == NULL));
            g_clear_error(&e);
            RfProblem *pb = rf_problem_new_preset_fw(
                load("tiny-moe"), "TP2xEP2", s, RF_INFER_SGLANG, rf_topology_new_domains(4), &e);
            if (!ok) g_assert_null(pb);
            built += pb != NULL, refused += !ok;
            g_clear_error(&e);
            rf_problem_free(pb);
          }
          /* with plain: at least the plain engine of every divisor */
          if (plain && (without_ep || dense)) {
            int ndiv = 0;
            for (int t = 1; t <= n; t++)
              ndiv += n % t == 0;
            g_assert_cmpuint(l->len, >=, (guint)ndiv);
          }
          g_ptr_array_unref(l);
        }
  }
  m->arch.experts = experts;
  g_assert_cmpint(built, >, 0);
  g_assert_cmpint(refused, >, 0);
  GPtrArray *l = rf_advise_sglang_layouts(m, 16, (const int[]){8}, 1, TRUE, TRUE, FALSE);
  g_assert_cmpuint(l->len, ==, 3);
  g_assert_cmpstr(g_ptr_array_index(l, 0), ==, "TP8xDP2xADP8");
  g_assert_cmpstr(g_ptr_array_index(l, 1), ==, "TP8xDP2xEP8");
  g_assert_cmpstr(g_ptr_array_index(l, 2), ==, "TP8xDP2xEP8xADP8");
  g_ptr_array_unref(l);
  GError *e = NULL;
  RfParallel p;
  static const char *const bad[][2] = {
      {"TP4xADP3", "SGLang: ADP3 does not divide TP4"},
      {"TP32xADP2", "SGLang attention TP (TP32 / ADP2): TP16 does not divide 8 attention heads"},
      {"TP4xEP4", "EP4 (SGLang) does not divide 6 routed experts"}};
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_assert_true(rf_parallel_parse(bad[i][0], &p, NULL));
    g_assert_false(rf_advise_layout_check_fw(m, RF_INFER_SGLANG, &p, p.tp * p.dp, &e));
    g_assert_error(e, RF_ERROR, RF_ERROR_INPUT);
    g_assert_cmpstr(e->message, ==, bad[i][1]);
    g_clear_error(&e);
  }
  g_assert_true(rf_parallel_parse("TP8xADP8", &p, NULL)); /* attention TP1: any head count */
  g_assert_true(rf_advise_layout_check_fw(m, RF_INFER_SGLANG, &p, 8, &e));
  g_assert_no_error(e);
  rf_model_free(m);
}

/* The NVLink domains a TP group spans: one up to the domain size, then whole domains. */
static void test_tp_domains(void) {
  g_assert_cmpint(rf_advise_tp_domains(8, 8), ==, 1);
  g_assert_cmpint(rf_advise_tp_domains(1, 8), ==, 1);
  g_assert_cmpint(rf_advise_tp_domains(16, 8), ==, 2);
  g_assert_cmpint(rf_advise_tp_domains(24, 8), ==, 3);
  g_assert_cmpint(rf_advise_tp_domains(72, 72), ==, 1);
  g_assert_cmpint(rf_advise_tp_domains(16, 0), ==, 1); /* unknown domain: no rule */
}

/* The divisibility check, by the numbers of the tiny models, and against the preset: for every
 * candidate on 1..12 GPUs, a layout the check refuses does not build, and one that builds has
 * its GPUs on the inference side. */
static void test_layout_check(void) {
  static const char *const models[][2] = {{"tiny-moe", "TP2xEP2"},
                                          {"tiny-mla", "TP2xPP2xEP2"},
                                          {"tiny-next", "TP2xPP2"},
                                          {"tiny-hybrid", "TP2xEP2"},
                                          {"tiny-kimi", "TP1xPP2xEP2"}};
  int refused = 0, built = 0;
  for (guint c = 0; c < G_N_ELEMENTS(models); c++) {
    RfModel *m = load(models[c][0]);
    for (int n = 1; n <= 12; n++) {
      GPtrArray *l = rf_advise_layouts(m, n, NULL, 0, TRUE, TRUE);
      for (guint i = 0; i < l->len; i++) {
        const char *s = g_ptr_array_index(l, i);
        RfParallel p;
        g_assert_true(rf_parallel_parse(s, &p, NULL));
        GError *e = NULL;
        gboolean ok = rf_advise_layout_check(m, p.tp, n, p.ep_given, &e);
        g_assert_true(ok == (e == NULL));
        if (e) g_assert_null(strchr(e->message, '\n'));
        g_clear_error(&e);
        RfProblem *pb = rf_problem_new_preset(load(models[c][0]), models[c][1], s,
                                              rf_topology_new_domains(4), &e);
        if (!ok) g_assert_null(pb);
        if (pb) g_assert_cmpint(pb->dst.nranks, ==, n);
        refused += !ok;
        built += pb != NULL;
        g_clear_error(&e);
        rf_problem_free(pb);
      }
      g_ptr_array_unref(l);
    }
    rf_model_free(m);
  }
  g_assert_cmpint(refused, >, 0);
  g_assert_cmpint(built, >, 0);

  /* tiny-moe: 8 attention heads, 6 routed experts; tiny-next: 2 linear-attention key heads */
  RfModel *m = load("tiny-moe");
  GError *e = NULL;
  g_assert_true(rf_advise_layout_check(m, 8, 8, FALSE, &e));
  g_assert_true(rf_advise_layout_check(m, 2, 6, TRUE, &e));
  g_assert_no_error(e);
  g_assert_false(rf_advise_layout_check(m, 3, 6, FALSE, &e));
  g_assert_error(e, RF_ERROR, RF_ERROR_INPUT);
  g_assert_cmpstr(e->message, ==, "TP3 does not divide 8 attention heads");
  g_clear_error(&e);
  g_assert_false(rf_advise_layout_check(m, 2, 4, TRUE, &e));
  g_assert_cmpstr(e->message, ==, "EP4 (vLLM: TP x DP) does not divide 6 routed experts");
  g_clear_error(&e);
  rf_model_free(m);
  m = load("tiny-next");
  g_assert_false(rf_advise_layout_check(m, 4, 4, FALSE, &e));
  g_assert_cmpstr(e->message, ==, "TP4 does not divide 2 linear-attention key heads");
  g_clear_error(&e);
  rf_model_free(m);
}

/* Interleaving the split placement on several layouts and domain sizes: the GPUs are the same
 * set, each holding one rank; every rank keeps its slot in its domain and the ranks of a domain
 * stay together; training and inference domains alternate from domain 0, the side with more
 * domains finishing alone; the note says so. */
static void test_interleave(void) {
  static const struct {
    const char *model, *train, *infer;
    int domain;
  } cases[] = {{"tiny-moe", "TP2xPP2", "TP2xDP4", 2},
               {"tiny-moe", "TP2xPP2xDP2", "TP2xDP2", 2},
               {"tiny-mla", "TP2xPP2xEP2", "TP2xDP2xEP4", 1},
               {"tiny-moe", "TP2xEP2", "TP4", 4},
               {"tiny-next", "TP2xPP2", "TP2xDP4", 4}};
  for (guint c = 0; c < G_N_ELEMENTS(cases); c++) {
    GError *e = NULL;
    const int D = cases[c].domain;
    RfProblem *pb = rf_problem_new_preset(load(cases[c].model), cases[c].train, cases[c].infer,
                                          rf_topology_new_domains(D), &e);
    g_assert_no_error(e);
    int *before = g_memdup2(pb->gpu, sizeof(int) * (gsize)pb->nranks);
    int ngpu = 0;
    for (int r = 0; r < pb->nranks; r++)
      ngpu = MAX(ngpu, pb->gpu[r] + 1);
    const int ndom = (ngpu + D - 1) / D;
    int *side = g_new0(int, ndom); /* per domain of the split: 1 training, 2 inference */
    for (int i = 0; i < pb->src.nranks; i++)
      side[pb->gpu[pb->src.ranks[i]] / D] |= 1;
    for (int i = 0; i < pb->dst.nranks; i++)
      side[pb->gpu[pb->dst.ranks[i]] / D] |= 2;
    int nt = 0, ni = 0;
    for (int d = 0; d < ndom; d++) {
      g_assert_true(side[d] == 1 || side[d] == 2);     /* split: no domain mixes the sides */
      g_assert_true(d == 0 || side[d] >= side[d - 1]); /* training first */
      nt += side[d] == 1, ni += side[d] == 2;
    }
    rf_problem_interleave(pb);
    int *owner = g_new(int, ngpu), *moved = g_new(int, ndom);
    for (int g = 0; g < ngpu; g++)
      owner[g] = -1;
    for (int d = 0; d < ndom; d++)
      moved[d] = -1;
    for (int r = 0; r < pb->nranks; r++) {
      if (before[r] < 0) {
        g_assert_cmpint(pb->gpu[r], ==, -1);
        continue;
      }
      const int g = pb->gpu[r], from = before[r] / D;
      g_assert_cmpint(g, >=, 0);
      g_assert_cmpint(g, <, ngpu);
      g_assert_cmpint(owner[g], ==, -1); /* every GPU once */
      owner[g] = r;
      g_assert_cmpint(g % D, ==, before[r] % D);
      g_assert_true(moved[from] < 0 || moved[from] == g / D); /* a domain moves whole */
      moved[from] = g / D;
    }
    int *now = g_new0(int, ndom); /* per domain after: its side */
    for (int d = 0; d < ndom; d++) {
      g_assert_cmpint(moved[d], >=, 0);
      g_assert_cmpint(now[moved[d]], ==, 0); /* a permutation of the domains */
      now[moved[d]] = side[d];
    }
    for (int d = 0; d < ndom; d++)
      g_assert_cmpint(now[d], ==, d < 2 * MIN(nt, ni) ? (d % 2 ? 2 : 1) : (nt > ni ? 1 : 2));
    g_free(now);
    g_autofree char *tail =
        g_strdup_printf("; interleaved: %d training and %d inference domains alternate", nt, ni);
    g_assert_true(g_str_has_suffix(pb->placement_note, tail));
    g_free(owner);
    g_free(moved);
    g_free(side);
    g_free(before);
    rf_problem_free(pb);
  }
}

/* One bf16 tensor of 2n bytes from the ranks of src to those of dst (same mesh and placement
 * on both sides) on a topology of 10 GB/s NICs and 100 GB/s NVLink, D GPUs per domain. */
static RfPlan *copy_plan(int64_t n, const char *src, const char *dst, const char *mesh,
                         const char *place, int D, int over, int leaf) {
  RfTopology *t = rf_topology_new_domains(D);
  t->nic_Gbps = 80;
  t->nvlink_GBps = 100;
  t->fabric = RF_FABRIC_FAT_TREE;
  t->oversubscription = over;
  t->gpus_per_leaf = leaf;
  g_autofree char *json = g_strdup_printf(
      "{\"tensors\":[{\"name\":\"w\",\"shape\":[%" G_GINT64_FORMAT "],\"dtype\":\"bf16\","
      "\"src\":{\"mesh\":[%s],\"ranks\":[%s],\"placements\":[\"%s\"]},"
      "\"dst\":{\"mesh\":[%s],\"ranks\":[%s],\"placements\":[\"%s\"]}}]}",
      n, mesh, src, place, mesh, dst, place);
  GError *e = NULL;
  RfProblem *pb = rf_problem_new_spec(json, -1, t, &e);
  g_assert_no_error(e);
  RfPlan *plan = rf_plan_build(pb, RF_STRATEGY_P2P, NULL, &e);
  g_assert_no_error(e);
  return plan;
}

static void free_plan(RfPlan *plan) {
  RfProblem *pb = (RfProblem *)plan->problem;
  rf_plan_free(plan);
  rf_problem_free(pb);
}

/* 100 MB from GPU 0 to GPU 1: 10 ms on their NICs (one domain each), twice that at half the
 * NIC rate, plus the fixed time; 1 ms on NVLink (one domain of two). 100 MB sharded over GPUs 0
 * and 1 into GPUs 2 and 3 behind another leaf of two GPUs at 4:1 oversubscription: 5 ms on each
 * NIC, but 100 MB through an uplink of 2 x 10 GB/s / 4: 20 ms. */
static void test_bound_arithmetic(void) {
  const char *what = NULL;
  RfPlan *plan = copy_plan(50000000, "0", "1", "1", "R", 1, 1, 0);
  g_assert_cmpfloat_with_epsilon(rf_plan_fabric_bound(plan, NULL, FALSE, &what), 1e-2, 1e-12);
  g_assert_cmpstr(what, ==, "NIC");
  RfBoundRates r;
  rf_bound_rates_peak(&r);
  r.nic = 0.5;
  r.fixed_s = 0.25;
  g_assert_cmpfloat_with_epsilon(rf_plan_fabric_bound(plan, &r, FALSE, &what), 0.27, 1e-12);
  g_assert_cmpstr(what, ==, "NIC");
  r.nic = 1;
  r.phase_net[RF_PHASE_INJECT] = 2; /* factors are capped at 1 */
  g_assert_cmpfloat_with_epsilon(rf_plan_fabric_bound(plan, &r, FALSE, &what), 0.26, 1e-12);
  free_plan(plan);

  plan = copy_plan(50000000, "0", "1", "1", "R", 2, 1, 0);
  g_assert_cmpfloat_with_epsilon(rf_plan_fabric_bound(plan, NULL, FALSE, &what), 1e-3, 1e-12);
  g_assert_cmpstr(what, ==, "NVLink");
  free_plan(plan);

  plan = copy_plan(50000000, "0,1", "2,3", "2", "S0", 1, 4, 2);
  g_assert_cmpfloat_with_epsilon(plan->stats.lower_bound_s, 5e-3, 1e-12);
  g_assert_cmpfloat_with_epsilon(rf_plan_fabric_bound(plan, NULL, FALSE, &what), 2e-2, 1e-12);
  g_assert_cmpstr(what, ==, "leaf");
  free_plan(plan);
}

/* On every strategy of the tiny models: never below the plan's own bound, at least as high at
 * lower rates, and a hybrid run part after part at least as long as one that overlaps. */
static void test_bound_order(void) {
  static const char *const cases[][3] = {{"tiny-moe", "TP2xPP2", "TP2xDP4"},
                                         {"tiny-mla", "TP2xPP2xEP2", "TP2xDP2xEP4"}};
  for (guint c = 0; c < G_N_ELEMENTS(cases); c++) {
    GError *e = NULL;
    RfProblem *pb = rf_problem_new_preset(load(cases[c][0]), cases[c][1], cases[c][2],
                                          rf_topology_new_domains(2), &e);
    g_assert_no_error(e);
    for (int s = 0; s < RF_STRATEGY_COUNT; s++) {
      RfPlan *plan = rf_plan_build(pb, (RfStrategy)s, NULL, &e);
      g_assert_no_error(e);
      const char *what = NULL;
      RfBoundRates slow;
      rf_bound_rates_peak(&slow);
      slow.nic = 0.7;
      slow.nvlink = 0.5;
      const double peak = rf_plan_fabric_bound(plan, NULL, FALSE, &what);
      g_assert_nonnull(what);
      g_assert_cmpfloat(peak, >=, plan->stats.lower_bound_s);
      g_assert_cmpfloat(peak, >, 0);
      g_assert_cmpfloat(rf_plan_fabric_bound(plan, &slow, FALSE, &what), >=, peak);
      g_assert_cmpfloat(rf_plan_fabric_bound(plan, NULL, TRUE, &what), >=, peak);
      rf_plan_free(plan);
    }
    rf_problem_free(pb);
  }
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/advise/placement/names", test_placement_names);
  g_test_add_func("/advise/layouts/divide", test_layouts_divide);
  g_test_add_func("/advise/layouts/check", test_layout_check);
  g_test_add_func("/advise/layouts/sglang", test_layouts_sglang);
  g_test_add_func("/advise/layouts/tp_domains", test_tp_domains);
  g_test_add_func("/advise/placement/interleave", test_interleave);
  g_test_add_func("/advise/bound/arithmetic", test_bound_arithmetic);
  g_test_add_func("/advise/bound/order", test_bound_order);
  return g_test_run();
}
