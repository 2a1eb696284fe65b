/* Plan invariants on random DTensor pairs and on every framework preset, plus known answers. */
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "datafile.h"
#include "error.h"
#include "plan.h"

static RfProblem *spec_problem(const char *json, int domain, GError **e) {
  return rf_problem_new_spec(json, -1, rf_topology_new_domains(domain), e);
}

/* Every strategy verified; the physical bound below every plan's busiest NIC; m2n (the
 * strategy refit recommends) never busier on its busiest link than p2p, nor on its busiest NIC
 * where p2p is bound by a NIC. */
static void verify_all(const RfProblem *pb, const char *what) {
  RfPlanStats st[RF_STRATEGY_COUNT];
  for (int s = 0; s < RF_STRATEGY_COUNT; s++) {
    GError *e = NULL;
    RfPlan *plan = rf_plan_build(pb, (RfStrategy)s, NULL, &e);
    if (!plan) g_error("%s %s: %s", what, rf_strategy_name(s), e->message);
    if (!rf_plan_verify(plan, &e)) g_error("%s %s: %s", what, rf_strategy_name(s), e->message);
    g_assert_no_error(e);
    /* messages partition the transfers and carry their bytes */
    uint64_t n = 0, by = 0, tb = 0;
    for (uint64_t i = 0; i < plan->nmsgs; i++) {
      g_assert_cmpuint(plan->msgs[i].first, ==, n);
      n += plan->msgs[i].count;
      by += plan->msgs[i].bytes;
    }
    for (uint64_t i = 0; i < plan->nxfers; i++)
      tb += plan->pieces[plan->xfers[i].piece].bytes;
    g_assert_cmpuint(n, ==, plan->nxfers);
    g_assert_cmpuint(by, ==, tb);
    g_assert_cmpuint(plan->stats.network_bytes + plan->stats.nvlink_bytes, <=, tb);
    st[s] = plan->stats;
    /* max_nic_bytes is floored per NIC: allow one byte a NIC */
    double slack = (double)pb->topo->nics_per_gpu / rf_topology_nic_Bps(pb->topo);
    if (st[s].domain_bound_s > st[s].lower_bound_s * (1 + 1e-12) + slack)
      g_error("%s %s: physical bound %.9g s above the busiest NIC %.9g s", what,
              rf_strategy_name(s), st[s].domain_bound_s, st[s].lower_bound_s);
    g_assert_cmpfloat(st[s].link_bound_s, >=, st[s].lower_bound_s);
    rf_plan_free(plan);
  }
  const RfPlanStats *m = &st[RF_STRATEGY_M2N], *p = &st[RF_STRATEGY_P2P];
  g_assert_cmpfloat(m->domain_bound_s, ==, p->domain_bound_s);
  if (m->link_bound_s > p->link_bound_s * (1 + 1e-9))
    g_error("%s: m2n busiest link %.9g s above p2p's %.9g s", what, m->link_bound_s,
            p->link_bound_s);
  if (p->link_bound_s == p->lower_bound_s && m->max_nic_bytes > p->max_nic_bytes + 1)
    g_error("%s: m2n busiest NIC %llu bytes above p2p's %llu", what,
            (unsigned long long)m->max_nic_bytes, (unsigned long long)p->max_nic_bytes);
}

static void append_side(GString *s, GRand *rng, int nd, const int *pool, int npool) {
  int md = g_rand_int_range(rng, 1, 4), dims[3], n = 1;
  for (int i = 0; i < md; i++)
    n *= dims[i] = g_rand_int_range(rng, 1, 4);
  while (n > npool) { /* shrink to fit the pool */
    for (int i = 0; i < md && n > npool; i++)
      if (dims[i] > 1) {
        n /= dims[i];
        dims[i]--;
        n *= dims[i];
      }
  }
  /* a random subset of the pool, in random order */
  int *perm = g_new(int, npool);
  memcpy(perm, pool, sizeof(int) * npool);
  for (int i = npool - 1; i > 0; i--) {
    int j = g_rand_int_range(rng, 0, i + 1), t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  g_string_append(s, "{\"mesh\":[");
  for (int i = 0; i < md; i++)
    g_string_append_printf(s, "%s%d", i ? "," : "", dims[i]);
  g_string_append(s, "],\"ranks\":[");
  for (int i = 0; i < n; i++)
    g_string_append_printf(s, "%s%d", i ? "," : "", perm[i]);
  g_string_append(s, "],\"placements\":[");
  for (int i = 0; i < md; i++) {
    int p = g_rand_int_range(rng, -1, nd);
    if (p < 0)
      g_string_append_printf(s, "%s\"R\"", i ? "," : "");
    else if (g_rand_boolean(rng))
      g_string_append_printf(s, "%s\"S%d\"", i ? "," : "", p);
    else
      g_string_append_printf(s, "%s\"Shard(%d)\"", i ? "," : "", p);
  }
  g_string_append(s, "]}");
  g_free(perm);
}

/* 10,000 random pairs: uneven shapes, 1-3 mesh dims, shared shard dims, tensor rank 1-4,
 * disjoint or overlapping rank sets, domain sizes 1-8; every strategy verified. */
static void test_random_specs(void) {
  GRand *rng = g_rand_new_with_seed(2026);
  int pairs = 0;
  for (int it = 0; pairs < 10000; it++) {
    GString *s = g_string_new("{\"tensors\":[");
    int nt = g_rand_int_range(rng, 1, 4);
    int src_pool[24], dst_pool[24];
    int ns = g_rand_int_range(rng, 1, 13), ndp = g_rand_int_range(rng, 1, 13);
    gboolean overlap = g_rand_int_range(rng, 0, 5) == 0;
    for (int i = 0; i < ns; i++)
      src_pool[i] = i;
    for (int i = 0; i < ndp; i++)
      dst_pool[i] = overlap ? i : ns + i;
    for (int t = 0; t < nt; t++) {
      int nd = g_rand_int_range(rng, 1, 5);
      g_string_append_printf(s, "%s{\"name\":\"t%d\",\"dtype\":\"%s\",\"shape\":[", t ? "," : "", t,
                             g_rand_boolean(rng) ? "bf16" : "fp32");
      for (int d = 0; d < nd; d++)
        g_string_append_printf(s, "%s%d", d ? "," : "", g_rand_int_range(rng, 1, 12));
      g_string_append(s, "],\"src\":");
      append_side(s, rng, nd, src_pool, ns);
      g_string_append(s, ",\"dst\":");
      append_side(s, rng, nd, dst_pool, ndp);
      g_string_append(s, "}");
      pairs++;
    }
    g_string_append(s, "]}");
    GError *e = NULL;
    RfProblem *pb = spec_problem(s->str, g_rand_int_range(rng, 1, 9), &e);
    if (!pb) g_error("spec %s: %s", s->str, e->message);
    verify_all(pb, s->str);
    rf_problem_free(pb);
    g_string_free(s, TRUE);
  }
  g_rand_free(rng);
}

static RfProblem *preset(const char *model, const char *train, const char *infer, int domain,
                         GError **e) {
  RfModel *m = rf_model_load(model, e);
  if (!m) return NULL;
  return rf_problem_new_preset(m, train, infer, rf_topology_new_domains(domain), e);
}

/* Every family, several layouts on each side, two domain sizes (full-size models: one). */
typedef struct {
  const char *model, *train, *infer;
  int domain;
} Preset;

static const Preset presets[] = {
    {"tiny-moe", "TP2xPP2", "TP4", 4},
    {"tiny-moe", "TP2xPP2", "TP4", 8},
    {"tiny-moe", "TP2xPP3xEP3", "TP2xDP3", 4},
    {"tiny-moe", "TP2xPP3xEP3", "TP2xDP3", 8},
    {"tiny-moe", "PP2xEP2xDP2", "TP8xDP2", 4},
    {"tiny-moe", "PP2xEP2xDP2", "TP8xDP2", 8},
    {"tiny-moe", "TP2xEP2xETP2", "TP2xDP3xEP6", 4},
    {"tiny-moe", "TP2xEP2xETP2", "TP2xDP3xEP6", 8},
    {"tiny-moe", "TP2xCP2xPP2", "TP1xDP3", 4},
    {"tiny-moe", "TP2xCP2xPP2", "TP1xDP3", 8},
    {"tiny-mla", "TP2xPP2xEP4", "TP4xDP2", 4},
    {"tiny-mla", "TP2xPP2xEP4", "TP4xDP2", 8},
    {"tiny-mla", "PP3xEP8", "TP2xDP4xEP8", 4},
    {"tiny-mla", "PP3xEP8", "TP2xDP4xEP8", 8},
    {"tiny-hybrid", "TP2xPP2", "TP2xDP2", 4},
    {"tiny-hybrid", "TP2xPP2", "TP2xDP2", 8},
    {"tiny-hybrid", "TP2xEP4xPP2", "TP2xDP3", 4},
    {"tiny-hybrid", "TP2xEP4xPP2", "TP2xDP3", 8},
    {"tiny-kimi", "TP2xPP2xEP2", "TP4xDP2", 4},
    {"tiny-kimi", "TP2xPP2xEP2", "TP4xDP2", 8},
    {"tiny-kimi", "TP4xEP6xDP3", "TP2xDP3xEP6", 4},
    {"tiny-kimi", "TP4xEP6xDP3", "TP2xDP3xEP6", 8},
    {"tiny-next", "TP2xPP2xEP4", "TP2xDP4", 4},
    {"tiny-next", "TP2xPP2xEP4", "TP2xDP4", 8},
    {"tiny-next", "TP2xPP3", "TP2xDP2xEP4", 4},
    {"tiny-next", "TP2xPP3", "TP2xDP2xEP4", 8},
    {"qwen3-30b-a3b", "TP2xPP4xEP8", "TP4xDP2", 8}, /* a full-size model: 48 layers, 128 experts */
};

/* FNV-1a over 64-bit words: the plan's contents, field by field (no padding bytes). */
static uint64_t fnv(uint64_t h, uint64_t v) {
  for (int i = 0; i < 8; i++, v >>= 8)
    h = (h ^ (v & 0xff)) * UINT64_C(0x100000001b3);
  return h;
}

/* Every piece, transfer (in order), message and statistic of a plan. */
static uint64_t plan_hash(uint64_t h, const RfPlan *p) {
  const RfModel *m = p->problem->model;
  h = fnv(fnv(fnv(fnv(h, p->npieces), p->nxfers), p->nmsgs), (uint64_t)p->nstages);
  for (uint32_t i = 0; i < p->npieces; i++) {
    const RfPiece *pc = &p->pieces[i];
    h = fnv(fnv(h, pc->part), pc->bytes);
    for (int d = 0; d < m->parts[pc->part].ndim; d++)
      h = fnv(fnv(h, (uint64_t)pc->box.lo[d]), (uint64_t)pc->box.hi[d]);
  }
  for (uint64_t m = 0; m < p->nmsgs; m++) { /* a transfer's ranks and stage: its message's */
    const RfMessage *g = &p->msgs[m];
    for (uint64_t i = g->first; i < (uint64_t)g->first + g->count; i++) {
      const RfTransfer *t = &p->xfers[i];
      h = fnv(fnv(fnv(h, t->piece), (uint64_t)(uint32_t)g->src), (uint64_t)(uint32_t)g->dst);
      h = fnv(h, (uint64_t)g->stage << 16 | (uint64_t)t->phase << 8 | t->flags);
    }
  }
  for (uint64_t i = 0; i < p->nmsgs; i++) {
    const RfMessage *g = &p->msgs[i];
    h = fnv(fnv(h, (uint64_t)g->stage << 16 | (uint64_t)g->phase << 8 | g->flags), g->bytes);
    h = fnv(fnv(fnv(fnv(h, (uint64_t)(uint32_t)g->src), (uint64_t)(uint32_t)g->dst), g->first),
            g->count);
  }
  const RfPlanStats *s = &p->stats;
  uint64_t w[] = {s->network_bytes, s->nvlink_bytes,  s->max_nic_bytes,    s->messages,
                  s->transfers,     s->payload_bytes, (uint64_t)s->stages, s->max_nvlink_bytes};
  for (size_t i = 0; i < G_N_ELEMENTS(w); i++)
    h = fnv(h, w[i]);
  double f[] = {s->lower_bound_s, s->link_bound_s, s->domain_bound_s};
  for (size_t i = 0; i < G_N_ELEMENTS(f); i++) {
    uint64_t v;
    memcpy(&v, &f[i], sizeof v);
    h = fnv(h, v);
  }
  for (int ph = 0; ph < RF_PHASE_COUNT; ph++)
    h = fnv(fnv(h, s->phase_network_bytes[ph]), s->phase_max_nic_bytes[ph]);
  return h;
}

static void test_preset(gconstpointer data) {
  const Preset *c = data;
  GError *e = NULL;
  g_autoptr(RfProblem) pb = preset(c->model, c->train, c->infer, c->domain, &e);
  g_assert_no_error(e);
  g_autofree char *what = g_strdup_printf("%s %s->%s D%d", c->model, c->train, c->infer, c->domain);
  verify_all(pb, what);
}

/* Plans are deterministic data: every preset's four plans hash to what the planner gave before
 * its speed-ups (issue 26), so a faster planner is the same planner. A change that means to
 * change plans updates these, and says why. */
static const uint64_t preset_golden[] = {
    UINT64_C(0x24c8282049c11fe8), UINT64_C(0x24c8282049c11fe8), UINT64_C(0x80a537d9797d3ce2),
    UINT64_C(0x50f25c9d013dc30c), UINT64_C(0x8c625b95c8d8f93a), UINT64_C(0x4c85c67667bf19fd),
    UINT64_C(0xafaf38dc1da016ea), UINT64_C(0xc33decea1203ee47), UINT64_C(0xb545121edcf5a1d8),
    UINT64_C(0xa06205c56c7e1939), UINT64_C(0x4d8551e5d189d701), UINT64_C(0xd0dfa2bcc7816a2a),
    UINT64_C(0x15853fe118e741e2), UINT64_C(0x5af7b8d8bfe6b417), UINT64_C(0x98c808d5ef5962a3),
    UINT64_C(0x98c808d5ef5962a3), UINT64_C(0x32d5c695b0ec0328), UINT64_C(0x0118f53909a5ed6f),
    UINT64_C(0xd91b5c2c1d5fa46c), UINT64_C(0x9242542d92ab1c4a), UINT64_C(0xcbc71db656a94f41),
    UINT64_C(0x2d4fa0840e55cef5), UINT64_C(0x6535038c1494d6ff), UINT64_C(0x8294e9767a70231f),
    UINT64_C(0x07f40af704794c8f), UINT64_C(0x98535f4305a72ebd), UINT64_C(0xa3d4bfc77cd0763d)};

static void test_preset_golden(void) {
  g_assert_cmpuint(G_N_ELEMENTS(preset_golden), ==, G_N_ELEMENTS(presets));
  int bad = 0;
  for (size_t i = 0; i < G_N_ELEMENTS(presets); i++) {
    const Preset *c = &presets[i];
    GError *e = NULL;
    g_autoptr(RfProblem) pb = preset(c->model, c->train, c->infer, c->domain, &e);
    g_assert_no_error(e);
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (int s = 0; s < RF_STRATEGY_COUNT; s++) {
      g_autoptr(RfPlan) plan = rf_plan_build(pb, (RfStrategy)s, NULL, &e);
      g_assert_no_error(e);
      h = plan_hash(h, plan);
    }
    if (h != preset_golden[i]) {
      g_test_message("preset %zu (%s %s -> %s D%d): plan hash 0x%016llx, expected 0x%016llx", i,
                     c->model, c->train, c->infer, c->domain, (unsigned long long)h,
                     (unsigned long long)preset_golden[i]);
      bad++;
    }
  }
  g_assert_cmpint(bad, ==, 0);
}

/* [10,7] Shard(0) over 2 ranks -> Shard(1) over 4 ranks: 7 over 4 = 2,2,2,1 columns. */
static void test_known_small(void) {
  const char *js = "{\"tensors\":[{\"name\":\"w\",\"shape\":[10,7],\"dtype\":\"bf16\","
                   "\"src\":{\"mesh\":[2],\"ranks\":[0,1],\"placements\":[\"S0\"]},"
                   "\"dst\":{\"mesh\":[4],\"ranks\":[8,9,10,11],\"placements\":[\"S1\"]}}]}";
  GError *e = NULL;
  RfProblem *pb = spec_problem(js, 8, &e);
  g_assert_no_error(e);
  RfPlan *plan = rf_plan_build(pb, RF_STRATEGY_P2P, NULL, &e);
  g_assert_no_error(e);
  g_assert_cmpuint(plan->nxfers, ==, 8); /* each dst column block from both row halves */
  g_assert_cmpuint(plan->stats.network_bytes, ==, 10 * 7 * 2);
  g_assert_cmpuint(plan->stats.payload_bytes, ==, 10 * 7 * 2);
  /* rank 11 gets column 6 only: rows 0-4 from rank 0, rows 5-9 from rank 1 */
  int seen = 0;
  for (uint64_t i = 0; i < plan->nxfers; i++) {
    const RfTransfer *t = &plan->xfers[i];
    const RfMessage *g = &plan->msgs[rf_plan_message_of(plan, i)];
    if (g->dst != 11) continue;
    const RfBox *b = &plan->pieces[t->piece].box;
    g_assert_cmpint(b->lo[1], ==, 6);
    g_assert_cmpint(b->hi[1], ==, 7);
    g_assert_cmpint(b->lo[0], ==, g->src == 0 ? 0 : 5);
    seen++;
  }
  g_assert_cmpint(seen, ==, 2);
  rf_plan_free(plan);
  rf_problem_free(pb);
}

/* m2n on replicas in separate domains: every piece crosses the network once per domain; with
 * 4 replicas packed two per domain, half the copies go over NVLink. */
static void test_m2n_domains(void) {
  const char *js =
      "{\"tensors\":[{\"name\":\"w\",\"shape\":[16,4],\"dtype\":\"fp32\","
      "\"src\":{\"mesh\":[2],\"ranks\":[0,1],\"placements\":[\"S0\"]},"
      "\"dst\":{\"mesh\":[4,2],\"ranks\":[4,5,6,7,8,9,10,11],\"placements\":[\"R\",\"S0\"]}}]}";
  GError *e = NULL;
  RfProblem *pb = spec_problem(js, 4, &e); /* domains: {0-3} {4-7} {8-11} */
  g_assert_no_error(e);
  RfPlan *m2n = rf_plan_build(pb, RF_STRATEGY_M2N, NULL, &e);
  g_assert_no_error(e);
  RfPlan *p2p = rf_plan_build(pb, RF_STRATEGY_P2P, NULL, &e);
  g_assert_no_error(e);
  uint64_t tensor = 16 * 4 * 4;
  g_assert_cmpuint(m2n->stats.network_bytes, ==, 2 * tensor); /* two destination domains */
  g_assert_cmpuint(m2n->stats.nvlink_bytes, ==, 2 * tensor);
  g_assert_cmpuint(p2p->stats.network_bytes, ==, 4 * tensor);
  g_assert_cmpint(m2n->nstages, ==, 3); /* one holder per shard: inject, forward, fan out */
  g_assert_true(rf_plan_verify(m2n, &e));
  g_assert_no_error(e);
  rf_plan_free(m2n);
  rf_plan_free(p2p);
  rf_problem_free(pb);
}

/* Chain forwarding: 1 source replica, 3 destination domains -> inject, forward, forward. */
static void test_m2n_chain(void) {
  const char *js = "{\"tensors\":[{\"name\":\"w\",\"shape\":[6],\"dtype\":\"bf16\","
                   "\"src\":{\"mesh\":[1],\"ranks\":[0],\"placements\":[\"R\"]},"
                   "\"dst\":{\"mesh\":[3],\"ranks\":[2,4,6],\"placements\":[\"R\"]}}]}";
  GError *e = NULL;
  RfProblem *pb = spec_problem(js, 2, &e);
  g_assert_no_error(e);
  RfPlan *p = rf_plan_build(pb, RF_STRATEGY_M2N, NULL, &e);
  g_assert_no_error(e);
  g_assert_cmpuint(p->nxfers, ==, 3);
  g_assert_cmpuint(p->nmsgs, ==, 3);
  for (uint64_t t = 0; t < 3; t++)
    g_assert_cmpuint(rf_plan_message_of(p, t), ==, t);
  g_assert_cmpint(p->msgs[0].src, ==, 0);
  g_assert_cmpint(p->msgs[0].dst, ==, 2);
  g_assert_cmpint(p->msgs[1].src, ==, 2);
  g_assert_cmpint(p->msgs[1].dst, ==, 4);
  g_assert_cmpint(p->xfers[1].phase, ==, RF_PHASE_FORWARD);
  g_assert_cmpint(p->msgs[2].src, ==, 4);
  g_assert_cmpint(p->msgs[2].stage, ==, 2);
  g_assert_true(rf_plan_verify(p, &e));
  g_assert_no_error(e);
  rf_plan_free(p);
  rf_problem_free(pb);
}

/* The reported Qwen3 configuration: one TP8 replica per 8-GPU domain, so m2n moves exactly
 * one copy of the model per inference domain over the network (docs/plan-check.md). */
static void test_qwen3_reported(void) {
  GError *e = NULL;
  RfProblem *pb = preset("qwen3-235b-a22b", "TP4xPP8xEP16", "TP8xDP16", 8, &e);
  g_assert_no_error(e);
  g_assert_cmpint(pb->src.nranks, ==, 128);
  g_assert_cmpint(pb->dst.nranks, ==, 128);
  RfPlan *p = rf_plan_build(pb, RF_STRATEGY_M2N, NULL, &e);
  g_assert_no_error(e);
  uint64_t model = (uint64_t)rf_model_bytes(pb->model);
  g_assert_cmpuint(p->stats.network_bytes, ==, 16 * model);
  g_assert_cmpuint(p->stats.payload_bytes, >, 16 * model); /* replicated KV heads */
  rf_plan_free(p);
  rf_problem_free(pb);
}

/* The reported Nemotron-3 Ultra configuration on GB200 NVL72 (72 GPUs a domain, one 400G NIC
 * a GPU): all 64 inference GPUs sit in one domain, which needs the whole model M, so the
 * physical bound is M / (64 x 50 GB/s); the balanced m2n plan puts within 1% of M / 64 on its
 * busiest NIC (27.8 GB, 1.62x, before load balancing), and far below p2p's. */
static void test_nemotron_balanced(void) {
  GError *e = NULL;
  g_autoptr(RfProblem) pb = preset("nemotron-3-ultra", "TP8xEP32xPP2", "TP8xDP8", 72, &e);
  g_assert_no_error(e);
  g_assert_cmpint(pb->dst.nranks, ==, 64);
  pb->topo->nvlink_GBps = 900; /* NVLink5 (the bare topology has H100's 450) */
  uint64_t model = (uint64_t)rf_model_bytes(pb->model);
  g_autoptr(RfPlan) m2n = rf_plan_build(pb, RF_STRATEGY_M2N, NULL, &e);
  g_assert_no_error(e);
  g_autoptr(RfPlan) p2p = rf_plan_build(pb, RF_STRATEGY_P2P, NULL, &e);
  g_assert_no_error(e);
  g_assert_cmpfloat(fabs(m2n->stats.domain_bound_s - model / (64 * 50e9)), <, 1e-9);
  g_assert_cmpuint(m2n->stats.network_bytes, ==, model);
  g_assert_cmpfloat((double)m2n->stats.max_nic_bytes, <=, 1.01 * model / 64);
  g_assert_cmpuint(m2n->stats.max_nic_bytes, <, p2p->stats.max_nic_bytes);
}

/* A corrupted plan is caught: drop one transfer, duplicate another. */
static void test_verify_catches(void) {
  GError *e = NULL;
  RfProblem *pb = preset("tiny-moe", "TP2xPP2", "TP4", 4, &e);
  g_assert_no_error(e);
  RfPlan *p = rf_plan_build(pb, RF_STRATEGY_P2P, NULL, &e);
  g_assert_no_error(e);
  g_assert_true(rf_plan_verify(p, &e));
  g_assert_no_error(e);
  RfTransfer keep = p->xfers[0];
  p->xfers[0] = p->xfers[1]; /* one rank now receives a piece twice, another misses one */
  g_assert_false(rf_plan_verify(p, &e));
  g_assert_error(e, RF_ERROR, RF_ERROR_VERIFY);
  g_clear_error(&e);
  p->xfers[0] = keep;
  p->xfers[0].flags ^= RF_XFER_NET; /* a lie about the link */
  g_assert_false(rf_plan_verify(p, &e));
  g_assert_error(e, RF_ERROR, RF_ERROR_VERIFY);
  g_assert_nonnull(strstr(e->message, "network flag"));
  g_clear_error(&e);
  p->xfers[0] = keep;
  const RfMessage keep_msg = p->msgs[0];
  p->msgs[0].src = p->msgs[0].dst; /* a sender that holds nothing */
  g_assert_false(rf_plan_verify(p, &e));
  g_assert_error(e, RF_ERROR, RF_ERROR_VERIFY);
  g_clear_error(&e);
  p->msgs[0] = keep_msg;
  p->msgs[0].count++; /* a message past its transfers */
  g_assert_false(rf_plan_verify(p, &e));
  g_assert_error(e, RF_ERROR, RF_ERROR_VERIFY);
  g_clear_error(&e);
  p->msgs[0] = keep_msg;
  g_assert_true(rf_plan_verify(p, &e));
  g_assert_no_error(e);
  const uint64_t nm = p->nmsgs;
  p->nmsgs = 0; /* transfers with no messages: no ranks to read them by */
  g_assert_false(rf_plan_check_messages(p, &e));
  g_assert_error(e, RF_ERROR, RF_ERROR_VERIFY);
  g_clear_error(&e);
  g_autofree char *dump = g_build_filename(g_get_tmp_dir(), "refit-test-dump.json", NULL);
  g_assert_false(rf_plan_dump(p, dump, &e)); /* refused before anything is written */
  g_assert_error(e, RF_ERROR, RF_ERROR_VERIFY);
  g_clear_error(&e);
  p->nmsgs = nm;
  g_assert_true(rf_plan_check_messages(p, &e));
  rf_plan_free(p);
  rf_problem_free(pb);
}

/* Refused specs: one line and the error code. */
typedef struct {
  const char *json;
  RfError code;
} BadSpec;

static const BadSpec bad_specs[] = {
    {"{", RF_ERROR_INPUT},
    {"{\"tensors\":[]}", RF_ERROR_INPUT},
    {"{\"tensors\":[{\"name\":\"w\",\"shape\":[4]}]}", RF_ERROR_INPUT},
    {"{\"tensors\":[{\"name\":\"w\",\"shape\":[4],\"src\":{\"mesh\":[2],\"ranks\":[0],"
     "\"placements\":[\"S0\"]},"
     "\"dst\":{\"mesh\":[1],\"ranks\":[3],\"placements\":[\"R\"]}}]}",
     RF_ERROR_INPUT},
    {"{\"tensors\":[{\"name\":\"w\",\"shape\":[4],\"src\":{\"mesh\":[1],\"ranks\":[0],"
     "\"placements\":[\"S1\"]},"
     "\"dst\":{\"mesh\":[1],\"ranks\":[3],\"placements\":[\"R\"]}}]}",
     RF_ERROR_INPUT},
    {"{\"tensors\":[{\"name\":\"w\",\"shape\":[0],\"src\":{\"mesh\":[1],\"ranks\":[0],"
     "\"placements\":[\"R\"]},"
     "\"dst\":{\"mesh\":[1],\"ranks\":[3],\"placements\":[\"R\"]}}]}",
     RF_ERROR_INPUT},
    {"{\"tensors\":[{\"name\":\"w\",\"shape\":[4],\"dtype\":\"int3\",\"src\":{\"mesh\":[1],"
     "\"ranks\":[0],\"placements\":[\"R\"]},"
     "\"dst\":{\"mesh\":[1],\"ranks\":[3],\"placements\":[\"R\"]}}]}",
     RF_ERROR_INPUT},
    {"{\"tensors\":[{\"name\":\"w\",\"shape\":[4],\"src\":{\"mesh\":[2],\"ranks\":[0,0],"
     "\"placements\":[\"R\"]},"
     "\"dst\":{\"mesh\":[1],\"ranks\":[3],\"placements\":[\"R\"]}}]}",
     RF_ERROR_INPUT},
    {"{\"tensors\":[{\"name\":\"w\",\"shape\":[4],\"src\":{\"mesh\":[1],\"ranks\":[-1],"
     "\"placements\":[\"R\"]},"
     "\"dst\":{\"mesh\":[1],\"ranks\":[3],\"placements\":[\"R\"]}}]}",
     RF_ERROR_INPUT},
    /* rank ids at or above 2^24, wrong JSON types, overflowing meshes and shapes */
    {"{\"tensors\":[{\"name\":\"w\",\"shape\":[4],\"src\":{\"mesh\":[1],\"ranks\":[16777216],"
     "\"placements\":[\"R\"]},"
     "\"dst\":{\"mesh\":[1],\"ranks\":[3],\"placements\":[\"R\"]}}]}",
     RF_ERROR_INPUT},
    {"{\"tensors\":[{\"name\":\"w\",\"shape\":[4],\"src\":{\"mesh\":[1],\"ranks\":[\"a\"],"
     "\"placements\":[\"R\"]},"
     "\"dst\":{\"mesh\":[1],\"ranks\":[3],\"placements\":[\"R\"]}}]}",
     RF_ERROR_INPUT},
    {"{\"tensors\":[{\"name\":\"w\",\"shape\":[4.5],\"src\":{\"mesh\":[1],\"ranks\":[0],"
     "\"placements\":[\"R\"]},"
     "\"dst\":{\"mesh\":[1],\"ranks\":[3],\"placements\":[\"R\"]}}]}",
     RF_ERROR_INPUT},
    {"{\"tensors\":[{\"name\":\"w\",\"shape\":\"ab\",\"src\":{\"mesh\":2,\"ranks\":[0],"
     "\"placements\":[\"R\"]},"
     "\"dst\":{\"mesh\":[1],\"ranks\":[3],\"placements\":[\"R\"]}}]}",
     RF_ERROR_INPUT},
    {"{\"tensors\":[{\"name\":\"w\",\"shape\":[4],\"src\":{\"mesh\":[65536,65536,65536,65536],"
     "\"ranks\":[],"
     "\"placements\":[\"R\",\"R\",\"R\",\"R\"]},\"dst\":{\"mesh\":[1],\"ranks\":[3],"
     "\"placements\":[\"R\"]}}]}",
     RF_ERROR_INPUT},
    {"{\"tensors\":[{\"name\":\"w\",\"shape\":[4611686018427387904,7],\"src\":{\"mesh\":[1],"
     "\"ranks\":[0],"
     "\"placements\":[\"R\"]},\"dst\":{\"mesh\":[1],\"ranks\":[3],\"placements\":[\"R\"]}}]}",
     RF_ERROR_INPUT},
    {"{\"tensors\":{}}", RF_ERROR_INPUT},
    /* shapes whose product overflows int64: checked before multiplying (issue 10) */
    {"{\"tensors\":[{\"name\":\"w\",\"shape\":[4294967296,4294967296],\"src\":{\"mesh\":[1],"
     "\"ranks\":[0],\"placements\":[\"R\"]},\"dst\":{\"mesh\":[1],\"ranks\":[3],"
     "\"placements\":[\"R\"]}}]}",
     RF_ERROR_LIMIT},
    {"{\"tensors\":[{\"name\":\"w\",\"shape\":[65536,65536,65536,65536],\"src\":{\"mesh\":[1],"
     "\"ranks\":[0],\"placements\":[\"R\"]},\"dst\":{\"mesh\":[1],\"ranks\":[3],"
     "\"placements\":[\"R\"]}}]}",
     RF_ERROR_LIMIT},
};

static void test_bad_spec(gconstpointer data) {
  const BadSpec *c = data;
  GError *e = NULL;
  g_autoptr(RfProblem) pb = spec_problem(c->json, 8, &e);
  if (pb) g_error("accepted bad spec %s", c->json);
  g_assert_error(e, RF_ERROR, (gint)c->code);
  g_assert_null(strchr(e->message, '\n'));
  g_clear_error(&e);
}

/* --dump writes RFC 8259 JSON whatever the tensor names hold: quotes, backslashes, control
 * characters and non-ASCII text round-trip through the strict reader. */
static void test_dump_json(void) {
  /* JSON source of the names in the spec, and the names they decode to */
  const char *names[] = {"caf\\u00e9 \\u5c64", "tab\\there", "quote\\\"back\\\\slash",
                         "bell\\u0007\\u001f\\u007f"};
  const char *want[] = {"caf\xc3\xa9 \xe5\xb1\xa4", "tab\there", "quote\"back\\slash",
                        "bell\x07\x1f\x7f"};
  GString *js = g_string_new("{\"tensors\":[");
  for (size_t i = 0; i < G_N_ELEMENTS(names); i++)
    g_string_append_printf(js,
                           "%s{\"name\":\"%s\",\"shape\":[4],\"src\":{\"mesh\":[1],\"ranks\":[0],"
                           "\"placements\":[\"R\"]},\"dst\":{\"mesh\":[1],\"ranks\":[1],"
                           "\"placements\":[\"R\"]}}",
                           i ? "," : "", names[i]);
  g_string_append(js, "]}");
  GError *e = NULL;
  g_autoptr(RfProblem) pb = spec_problem(js->str, 8, &e);
  g_assert_no_error(e);
  g_string_free(js, TRUE);
  g_autoptr(RfPlan) plan = rf_plan_build(pb, RF_STRATEGY_P2P, NULL, &e);
  g_assert_no_error(e);
  g_autofree char *path = NULL;
  int fd = g_file_open_tmp("refit-dump-XXXXXX.json", &path, &e);
  g_assert_no_error(e);
  close(fd);
  g_assert_true(rf_plan_dump(plan, path, &e));
  g_assert_no_error(e);
  g_autofree char *text = NULL;
  gsize len = 0;
  g_assert_true(g_file_get_contents(path, &text, &len, &e));
  g_assert_no_error(e);
  g_unlink(path);
  JsonNode *root = rf_json_parse(text, len, RF_JSON_STRICT, &e);
  g_assert_no_error(e);
  JsonArray *xs = json_object_get_array_member(json_node_get_object(root), "transfers");
  g_assert_cmpuint(json_array_get_length(xs), ==, G_N_ELEMENTS(names));
  for (guint i = 0; i < json_array_get_length(xs); i++) {
    const char *got = json_object_get_string_member(json_array_get_object_element(xs, i), "tensor");
    gboolean found = FALSE;
    for (size_t k = 0; k < G_N_ELEMENTS(want); k++)
      found |= !strcmp(got, want[k]);
    if (!found) g_error("dumped name '%s' is none of the spec's", got);
  }
  json_node_unref(root);
}

/* Gather-broadcast all-gathers every shard on every source rank: n^2 transfers for one S0 mesh
 * of n ranks. At 16,384 ranks that is over the plan limit: refused at once, before any memory
 * is spent on it (issue 10: it ran for minutes); m2n plans the same spec. */
static void test_transfer_limit(void) {
  int n = 16384;
  GString *js = g_string_new(NULL);
  g_string_printf(js,
                  "{\"tensors\":[{\"name\":\"w\",\"shape\":[%d,64],\"src\":{\"mesh\":[%d],"
                  "\"ranks\":[",
                  4 * n, n);
  for (int r = 0; r < n; r++)
    g_string_append_printf(js, "%s%d", r ? "," : "", r);
  g_string_append_printf(js,
                         "],\"placements\":[\"S0\"]},\"dst\":{\"mesh\":[1],\"ranks\":[%d],"
                         "\"placements\":[\"R\"]}}]}",
                         n);
  GError *e = NULL;
  g_autoptr(RfProblem) pb = spec_problem(js->str, 8, &e);
  g_string_free(js, TRUE);
  g_assert_no_error(e);
  gint64 t0 = g_get_monotonic_time();
  g_autoptr(RfPlan) gb = rf_plan_build(pb, RF_STRATEGY_GATHER_BROADCAST, NULL, &e);
  g_assert_null(gb);
  g_assert_error(e, RF_ERROR, RF_ERROR_LIMIT);
  g_assert_nonnull(strstr(e->message, "limit of 134217728"));
  g_clear_error(&e);
  g_assert_cmpint(g_get_monotonic_time() - t0, <, 5 * G_USEC_PER_SEC); /* refused, not built */
  g_autoptr(RfPlan) m2n = rf_plan_build(pb, RF_STRATEGY_M2N, NULL, &e);
  g_assert_no_error(e);
  g_assert_cmpuint(m2n->nxfers, ==, (uint64_t)n);
}

/* RfTransfer packs its fields into 4 bytes: the largest piece, phase and flags read back as
 * they were written, and one field never spills into another. */
static void test_transfer_fields(void) {
  g_assert_cmpuint(sizeof(RfTransfer), ==, 4);
  RfTransfer v[3] = {{0}};
  const uint32_t top = (uint32_t)(RF_PLAN_MAX_TRANSFERS - 1);
  v[1] = (RfTransfer){top, RF_PHASE_COUNT - 1, RF_XFER_NET | RF_XFER_RELAY};
  g_assert_cmpuint(v[1].piece, ==, top);
  g_assert_cmpint(v[1].phase, ==, RF_PHASE_COUNT - 1);
  g_assert_cmpint(v[1].flags, ==, RF_XFER_NET | RF_XFER_RELAY);
  v[1].phase = 0;
  g_assert_cmpuint(v[1].piece, ==, top);
  g_assert_cmpint(v[1].flags, ==, RF_XFER_NET | RF_XFER_RELAY);
  v[1].piece = 0;
  g_assert_cmpint(v[1].flags, ==, RF_XFER_NET | RF_XFER_RELAY);
  g_assert_cmpint(v[0].piece + v[0].phase + v[0].flags + v[2].piece + v[2].phase + v[2].flags, ==,
                  0);
}

/* The hybrid's reshard set is NeMo RL's bulk path: FFN projection weights only. An FP8 listing's
 * `*_scale_inv` siblings, FFN ones included, go by gather-broadcast (the misc path:
 * megatron_policy_worker.py _task_is_misc at e40aa046e), as do attention weights. */
static void test_hybrid_fp8_scales(void) {
  g_autofree char *path = g_strdup_printf("%s/tests/data/sim/fp8-ffn.json", rf_data_dir());
  GError *e = NULL;
  RfProblem *pb = preset(path, "TP2", "TP1xDP2", 2, &e);
  g_assert_no_error(e);
  const RfModel *m = pb->model;
  int reshard = 0;
  for (uint32_t i = 0; i < m->ntensors; i++) {
    const RfTensor *t = &m->tensors[i];
    gboolean want = g_str_has_suffix(t->name, "mlp.down_proj.weight");
    g_assert_cmpint(rf_tensor_in_reshard_set(t), ==, want);
    reshard += want;
  }
  g_assert_cmpint(reshard, ==, 1);
  RfPlan *plan = rf_plan_build(pb, RF_STRATEGY_HYBRID, NULL, &e);
  g_assert_no_error(e);
  uint64_t bulk = 0, misc = 0;
  for (uint64_t x = 0; x < plan->nxfers; x++) {
    const RfTransfer *tr = &plan->xfers[x];
    const RfPiece *pc = &plan->pieces[tr->piece];
    const RfTensor *t = &m->tensors[m->parts[pc->part].tensor];
    gboolean gb = tr->phase == RF_PHASE_EXPORT || tr->phase == RF_PHASE_BROADCAST;
    g_assert_cmpint(gb, ==, !rf_tensor_in_reshard_set(t));
    if (gb)
      misc += pc->bytes;
    else
      bulk += pc->bytes;
  }
  g_assert_cmpuint(bulk, >, 0);
  g_assert_cmpuint(misc, >, 0);
  rf_plan_free(plan);
  rf_problem_free(pb);
}

/* A piece's box is defined data past its part's dims (0 there): the planner's boxes come from
 * rf_box_intersect, which writes only ndim bounds, so a piece copied whole would carry whatever
 * the rest of the caller's box held into anything that compares or hashes whole boxes. */
static void test_piece_boxes_defined(void) {
  const char *js = "{\"tensors\":[{\"name\":\"w\",\"shape\":[10,7],\"dtype\":\"bf16\","
                   "\"src\":{\"mesh\":[2],\"ranks\":[0,1],\"placements\":[\"S0\"]},"
                   "\"dst\":{\"mesh\":[2,2],\"ranks\":[8,9,10,11],\"placements\":[\"R\",\"S1\"]}},"
                   "{\"name\":\"b\",\"shape\":[9],\"dtype\":\"fp32\","
                   "\"src\":{\"mesh\":[4],\"ranks\":[0,1,2,3],\"placements\":[\"S0\"]},"
                   "\"dst\":{\"mesh\":[2],\"ranks\":[12,13],\"placements\":[\"S0\"]}}]}";
  GError *e = NULL;
  RfProblem *pb = spec_problem(js, 4, &e);
  g_assert_no_error(e);
  for (int s = 0; s < RF_STRATEGY_COUNT; s++) {
    RfPlan *plan = rf_plan_build(pb, (RfStrategy)s, NULL, &e);
    g_assert_no_error(e);
    g_assert_cmpuint(plan->npieces, >, 0);
    for (uint32_t k = 0; k < plan->npieces; k++) {
      const RfPiece *pc = &plan->pieces[k];
      for (int d = pb->model->parts[pc->part].ndim; d < RF_MAX_DIMS; d++)
        g_assert_true(pc->box.lo[d] == 0 && pc->box.hi[d] == 0);
    }
    rf_plan_free(plan);
  }
  rf_problem_free(pb);
}

/* A spec of many ranks (256, from rank0 on) and tensors, whose gather-broadcast chains run to
 * hundreds of stages (the planner's cells merge as stages grow, and cells fill several blocks,
 * some partly: plan.c's XferVec). */
static GString *many_stages_spec(int rank0) {
  GString *js = g_string_new("{\"tensors\":[");
  for (int t = 0; t < 12; t++) {
    g_string_append_printf(js, "%s{\"name\":\"w%d\",\"shape\":[%d,%d],\"dtype\":\"bf16\",",
                           t ? "," : "", t, 256, 3 + t % 4);
    g_string_append(js, "\"src\":{\"mesh\":[128],\"ranks\":[");
    for (int r = 0; r < 128; r++)
      g_string_append_printf(js, "%s%d", r ? "," : "", rank0 + r);
    g_string_append_printf(js, "],\"placements\":[\"S%d\"]},\"dst\":{\"mesh\":[4,32],\"ranks\":[",
                           t % 2);
    for (int r = 0; r < 128; r++)
      g_string_append_printf(js, "%s%d", r ? "," : "", rank0 + 128 + (r * 37) % 128);
    g_string_append(js, "],\"placements\":[\"R\",\"S0\"]}}");
  }
  g_string_append(js, "]}");
  return js;
}

/* Every plan of many_stages_spec(rank0) with its transfers in (stage, src, dst, piece) order,
 * messages partitioning them, and every piece's box defined past its part's dims (0); the
 * gather-broadcast plan's stages (-1: refused, RF_ERROR_LIMIT, as having more stages than its
 * records hold). */
static int check_many_stages(int rank0) {
  g_autoptr(GString) js = many_stages_spec(rank0);
  GError *e = NULL;
  RfProblem *pb = spec_problem(js->str, 8, &e);
  g_assert_no_error(e);
  int gb_stages = -1;
  for (int s = 0; s < RF_STRATEGY_COUNT; s++) {
    RfPlan *plan = rf_plan_build(pb, (RfStrategy)s, NULL, &e);
    if (!plan && s != RF_STRATEGY_P2P && s != RF_STRATEGY_M2N &&
        g_error_matches(e, RF_ERROR, RF_ERROR_LIMIT) && strstr(e->message, "stages")) {
      g_test_message("%s at rank %d: %s", rf_strategy_name(s), rank0, e->message);
      g_clear_error(&e);
      continue;
    }
    g_assert_no_error(e);
    if (s == RF_STRATEGY_GATHER_BROADCAST) gb_stages = plan->nstages;
    for (uint64_t i = 1; i < plan->nxfers; i++) {
      const RfMessage *a = &plan->msgs[rf_plan_message_of(plan, i - 1)];
      const RfMessage *b = &plan->msgs[rf_plan_message_of(plan, i)];
      const int64_t ka[4] = {a->stage, a->src, a->dst, plan->xfers[i - 1].piece};
      const int64_t kb[4] = {b->stage, b->src, b->dst, plan->xfers[i].piece};
      int d = 0;
      while (d < 3 && ka[d] == kb[d])
        d++;
      if (ka[d] >= kb[d])
        g_error("%s: transfers %llu and %llu out of order", rf_strategy_name(s),
                (unsigned long long)i - 1, (unsigned long long)i);
    }
    uint64_t n = 0;
    for (uint64_t i = 0; i < plan->nmsgs; i++) {
      const RfMessage *g = &plan->msgs[i];
      g_assert_cmpuint(g->first, ==, n);
      g_assert_cmpuint(g->count, >, 0);
      for (uint64_t t = g->first; t < (uint64_t)g->first + g->count; t++)
        g_assert_cmpuint(rf_plan_message_of(plan, t), ==, i);
      n += g->count;
    }
    g_assert_cmpuint(n, ==, plan->nxfers);
    for (uint32_t k = 0; k < plan->npieces; k++) {
      const RfPiece *pc = &plan->pieces[k];
      for (int d = pb->model->parts[pc->part].ndim; d < RF_MAX_DIMS; d++)
        g_assert_true(pc->box.lo[d] == 0 && pc->box.hi[d] == 0);
    }
    if (!rf_plan_verify(plan, &e)) g_error("%s: %s", rf_strategy_name(s), e->message);
    rf_plan_free(plan);
  }
  rf_problem_free(pb);
  return gb_stages;
}

/* The plans of many_stages_spec at rank ids from 0 and from off (a multiple of the domain, 8):
 * the same plans, message ranks shifted by off, but where a wide id space refuses a plan of too
 * many stages (gather-broadcast, hybrid). The records' cells merge up to the cap on src's low
 * bits from 17-bit ids on, and are capped from the start at 20 bits. */
static void check_shifted(int off) {
  g_autoptr(GString) j0 = many_stages_spec(0), j1 = many_stages_spec(off);
  GError *e = NULL;
  g_autoptr(RfProblem) p0 = spec_problem(j0->str, 8, &e);
  g_assert_no_error(e);
  g_autoptr(RfProblem) p1 = spec_problem(j1->str, 8, &e);
  g_assert_no_error(e);
  for (int s = 0; s < RF_STRATEGY_COUNT; s++) {
    g_autoptr(RfPlan) a = rf_plan_build(p0, (RfStrategy)s, NULL, &e);
    g_assert_no_error(e);
    g_autoptr(RfPlan) b = rf_plan_build(p1, (RfStrategy)s, NULL, &e);
    if (!b) {
      g_assert_error(e, RF_ERROR, RF_ERROR_LIMIT);
      g_assert_true(s == RF_STRATEGY_GATHER_BROADCAST || s == RF_STRATEGY_HYBRID);
      g_clear_error(&e);
      continue;
    }
    g_assert_cmpuint(a->nxfers, ==, b->nxfers);
    g_assert_cmpuint(a->nmsgs, ==, b->nmsgs);
    g_assert_cmpint(a->nstages, ==, b->nstages);
    g_assert_cmpuint(a->npieces, ==, b->npieces);
    for (uint64_t i = 0; i < a->nxfers; i++) {
      const RfTransfer *x = &a->xfers[i], *y = &b->xfers[i];
      g_assert_true(x->piece == y->piece && x->phase == y->phase && x->flags == y->flags);
    }
    for (uint64_t i = 0; i < a->nmsgs; i++) {
      const RfMessage *x = &a->msgs[i], *y = &b->msgs[i];
      g_assert_true(x->stage == y->stage && x->phase == y->phase && x->flags == y->flags &&
                    x->bytes == y->bytes && x->first == y->first && x->count == y->count);
      g_assert_cmpint(y->src, ==, x->src + off);
      g_assert_cmpint(y->dst, ==, x->dst + off);
    }
    g_assert_cmpuint(a->stats.max_nic_bytes, ==, b->stats.max_nic_bytes);
    g_assert_cmpuint(a->stats.network_bytes, ==, b->stats.network_bytes);
  }
}

/* A planned transfer's record holds (src's low bits, dst) in 32 bits (plan.c's Rec): from 2^16
 * ranks on a stage keeps more cells, and past 65,536 cells a plan is refused. The same spec at
 * ranks from 0, from 2^17 (18-bit ranks: 16 cells a stage at least, so 4,096 stages) and at the
 * top of RF_MAX_RANKS (20 bits: 256 cells a stage, so 256 stages). */
static void test_sorted_many_stages(void) {
  const int n = check_many_stages(0);
  g_assert_cmpint(n, >, 200);
  g_assert_cmpint(check_many_stages(1 << 17), ==, n);
  g_assert_cmpint(check_many_stages(RF_MAX_RANKS - 256), ==, n <= 256 ? n : -1);
  check_shifted(1 << 16); /* 17-bit ids: the most merges before the cap */
  check_shifted(1 << 18); /* 19 bits */
  check_shifted(RF_MAX_RANKS - 256);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/plan/transfer_fields", test_transfer_fields);
  g_test_add_func("/plan/random_specs", test_random_specs);
  for (size_t i = 0; i < G_N_ELEMENTS(presets); i++) {
    g_autofree char *path = g_strdup_printf("/plan/presets/%zu", i);
    g_test_add_data_func(path, &presets[i], test_preset);
  }
  g_test_add_func("/plan/presets/golden", test_preset_golden);
  g_test_add_func("/plan/known/small", test_known_small);
  g_test_add_func("/plan/known/m2n_domains", test_m2n_domains);
  g_test_add_func("/plan/known/m2n_chain", test_m2n_chain);
  g_test_add_func("/plan/known/qwen3_reported", test_qwen3_reported);
  g_test_add_func("/plan/known/nemotron_balanced", test_nemotron_balanced);
  g_test_add_func("/plan/verify_catches", test_verify_catches);
  for (size_t i = 0; i < G_N_ELEMENTS(bad_specs); i++) {
    g_autofree char *path = g_strdup_printf("/plan/bad_specs/%zu", i);
    g_test_add_data_func(path, &bad_specs[i], test_bad_spec);
  }
  g_test_add_func("/plan/dump_json", test_dump_json);
  g_test_add_func("/plan/transfer_limit", test_transfer_limit);
  g_test_add_func("/plan/known/hybrid_fp8_scales", test_hybrid_fp8_scales);
  g_test_add_func("/plan/piece_boxes_defined", test_piece_boxes_defined);
  g_test_add_func("/plan/sorted_many_stages", test_sorted_many_stages);
  return g_test_run();
}
