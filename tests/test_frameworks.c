/* Inference frameworks (vLLM, SGLang, Megatron generation), training ETP > 1, and elastic
 * recovery (lost GPUs): exact plans on random layouts and random lost sets, every strategy. */
#include <glib.h>
#include <string.h>

#include "error.h"
#include "plan.h"

static RfProblem *preset_fw(const char *model, const char *train, const char *infer,
                            RfInferFramework fw, int domain, GError **e) {
  RfModel *m = rf_model_load(model, e);
  if (!m) return NULL;
  return rf_problem_new_preset_fw(m, train, infer, fw, rf_topology_new_domains(domain), e);
}

/* Every strategy builds a plan that passes rf_plan_verify, and no transfer touches a lost rank. */
static void verify_all(const RfProblem *pb, const char *what) {
  for (int s = 0; s < RF_STRATEGY_COUNT; s++) {
    GError *e = NULL;
    RfPlan *plan = rf_plan_build(pb, (RfStrategy)s, NULL, &e);
    if (!plan) g_error("%s %s: %s", what, rf_strategy_name(s), e->message);
    if (!rf_plan_verify(plan, &e)) g_error("%s %s: %s", what, rf_strategy_name(s), e->message);
    for (uint64_t i = 0; pb->lost && i < plan->nmsgs; i++) { /* the ranks of its transfers */
      const RfMessage *g = &plan->msgs[i];
      if (pb->lost[g->src] || pb->lost[g->dst])
        g_error("%s %s: message %d -> %d touches a lost rank", what, rf_strategy_name(s), g->src,
                g->dst);
    }
    rf_plan_free(plan);
  }
}

static const char *const models[] = {"tiny-moe", "tiny-mla", "tiny-hybrid", "tiny-kimi",
                                     "tiny-next"};

static int pick(GRand *r, const int *v, int n) {
  return v[g_rand_int_range(r, 0, n)];
}

/* A random training layout: TP, PP, EP, ETP (> 1 too), CP, sometimes DP. */
static char *random_train(GRand *r) {
  static const int tp[] = {1, 2, 4}, pp[] = {1, 2, 3}, ep[] = {1, 2, 3, 4, 6}, etp[] = {1, 2},
                   cp[] = {1, 1, 2};
  GString *s = g_string_new(NULL);
  g_string_printf(s, "TP%dxPP%dxEP%dxETP%dxCP%d", pick(r, tp, 3), pick(r, pp, 3), pick(r, ep, 5),
                  pick(r, etp, 2), pick(r, cp, 3));
  if (g_rand_int_range(r, 0, 3) == 0) g_string_append_printf(s, "xDP%d", g_rand_int_range(r, 1, 5));
  return g_string_free(s, FALSE);
}

static char *random_infer(GRand *r, RfInferFramework fw) {
  static const int tp[] = {1, 2, 4, 8}, dp[] = {1, 2, 3};
  int t = pick(r, tp, 4), d = pick(r, dp, 3);
  switch (fw) {
  case RF_INFER_VLLM: {
    /* EP over the whole side (TP x DP), EP inside each engine (TP), or no EP */
    int k = g_rand_int_range(r, 0, 3);
    return k == 2 ? g_strdup_printf("TP%dxDP%d", t, d)
                  : g_strdup_printf("TP%dxDP%dxEP%d", t, d, k ? t : t * d);
  }
  case RF_INFER_SGLANG: {
    /* ADP and EP: divisors of TP */
    int adp = 1 << g_rand_int_range(r, 0, 4), ep = 1 << g_rand_int_range(r, 0, 4);
    if (t % adp) adp = t;
    if (t % ep) ep = 1;
    return g_strdup_printf("TP%dxDP%dxADP%dxEP%d", t, d, adp, ep);
  }
  default: {
    static const int ep[] = {1, 2, 3, 4}, etp[] = {1, 2};
    return g_strdup_printf("TP%dxEP%dxETP%d%s", t, pick(r, ep, 4), pick(r, etp, 2),
                           g_rand_boolean(r) ? "" : "xDP2");
  }
  }
}

/* Random layouts of one framework on every tiny family: the accepted ones plan exactly under
 * every strategy. Refused layouts (a split that does not divide) must be one-line errors. */
static void test_random_presets(gconstpointer data) {
  RfInferFramework fw = (RfInferFramework)GPOINTER_TO_INT(data);
  GRand *rng = g_rand_new_with_seed(1300 + (guint32)fw);
  int accepted = 0, etp = 0, engine_ep = 0;
  for (int it = 0; it < 2000 && accepted < 60; it++) {
    const char *model = models[it % G_N_ELEMENTS(models)];
    g_autofree char *train = random_train(rng);
    g_autofree char *infer = random_infer(rng, fw);
    int domain = g_rand_int_range(rng, 1, 9);
    GError *e = NULL;
    g_autoptr(RfProblem) pb = preset_fw(model, train, infer, fw, domain, &e);
    if (!pb) {
      g_assert_nonnull(e);
      g_assert_null(strchr(e->message, '\n'));
      g_clear_error(&e);
      continue;
    }
    g_assert_cmpstr(pb->dst.framework, ==, rf_infer_framework_name(fw));
    g_autofree char *what = g_strdup_printf("%s %s -> %s %s D%d", model, train,
                                            rf_infer_framework_name(fw), infer, domain);
    verify_all(pb, what);
    accepted++;
    etp += pb->src.par.etp > 1;
    const RfParallel *I = &pb->dst.par;
    engine_ep += I->ep > 1 && I->ep == I->tp && I->dp > 1;
  }
  g_rand_free(rng);
  g_assert_cmpint(accepted, >=, 60);
  g_assert_cmpint(etp, >, 0);
  /* vLLM and SGLang: some accepted layouts split experts inside each of several engines */
  if (fw != RF_INFER_MEGATRON) g_assert_cmpint(engine_ep, >, 0);
}

/* The same on the tiny published-family configs whose attention biases, sinks, expert biases
 * and all-head q/k norms have their own layout kinds (gpt_oss, glm4_moe, minimax_m2). */
static void test_random_kinds(gconstpointer data) {
  RfInferFramework fw = (RfInferFramework)GPOINTER_TO_INT(data);
  static const char *const files[] = {"gpt-oss.json", "glm4-moe.json", "minimax-m2.json"};
  GRand *rng = g_rand_new_with_seed(1700 + (guint32)fw);
  int accepted = 0, kv_repl = 0;
  for (int it = 0; it < 1000 && accepted < 30; it++) {
    g_autofree char *model = g_build_filename(g_getenv("REFIT_DATA_DIR"), "tests/data/tiny",
                                              files[it % G_N_ELEMENTS(files)], NULL);
    g_autofree char *train = random_train(rng);
    g_autofree char *infer = random_infer(rng, fw);
    int domain = g_rand_int_range(rng, 1, 9);
    GError *e = NULL;
    g_autoptr(RfProblem) pb = preset_fw(model, train, infer, fw, domain, &e);
    if (!pb) {
      g_assert_nonnull(e);
      g_assert_null(strchr(e->message, '\n'));
      g_clear_error(&e);
      continue;
    }
    g_autofree char *what = g_strdup_printf("%s %s -> %s %s D%d", files[it % G_N_ELEMENTS(files)],
                                            train, rf_infer_framework_name(fw), infer, domain);
    verify_all(pb, what);
    accepted++;
    kv_repl += pb->dst.par.tp > pb->model->arch.kv_heads; /* 4 KV heads in each */
  }
  g_rand_free(rng);
  g_assert_cmpint(accepted, >=, 30);
  g_assert_cmpint(kv_repl, >, 0);
}

static uint32_t find_part(const RfModel *m, const char *name) {
  for (uint32_t i = 0; i < m->nparts; i++)
    if (!strcmp(m->tensors[m->parts[i].tensor].name, name)) return i;
  g_error("no part %s", name);
}

/* SGLang layouts (python/sglang/srt/layers/dp_attention.py, models/qwen3_moe.py): with ADP the
 * attention splits over TP / ADP ranks and the embedding is whole; experts split over EP inside
 * the engine and over TP / EP within an EP rank; lm_head over the full TP. tiny-moe: 8 heads,
 * 2 KV heads, 6 experts. */
static void test_sglang_layout(void) {
  GError *e = NULL;
  g_autoptr(RfProblem) pb = preset_fw("tiny-moe", "TP2", "TP4xADP2xEP2", RF_INFER_SGLANG, 8, &e);
  g_assert_no_error(e);
  const RfModel *m = pb->model;
  int r0 = pb->dst.ranks[0];
  RfBox box;
  /* q_proj: attention TP2 -> rank 0 and rank 2 hold the same half */
  uint32_t q = find_part(m, "model.layers.0.self_attn.q_proj.weight");
  g_assert_true(rf_side_rank_shard(&pb->dst, q, r0, &box, NULL));
  g_assert_cmpint(box.hi[0] - box.lo[0], ==, m->parts[q].shape[0] / 2);
  RfBox b2;
  g_assert_true(rf_side_rank_shard(&pb->dst, q, r0 + 2, &b2, NULL));
  g_assert_cmpint(b2.lo[0], ==, box.lo[0]);
  /* embedding whole on every rank */
  uint32_t emb = find_part(m, "model.embed_tokens.weight");
  g_assert_true(rf_side_rank_shard(&pb->dst, emb, r0 + 3, &box, NULL));
  g_assert_cmpint(box.hi[0] - box.lo[0], ==, m->parts[emb].shape[0]);
  /* lm_head: full TP4 */
  uint32_t lm = find_part(m, "lm_head.weight");
  g_assert_true(rf_side_rank_shard(&pb->dst, lm, r0, &box, NULL));
  g_assert_cmpint(box.hi[0] - box.lo[0], <, m->parts[lm].shape[0] / 2);
  /* experts: EP2 x MoE-TP2; rank 1 = ep 0, moe_tp 1: experts [0, 3), second half of I */
  uint32_t w = 0;
  while (w < m->nparts && m->tensors[m->parts[w].tensor].kind != RF_KIND_EXPERT_GATE)
    w++;
  g_assert_cmpuint(w, <, m->nparts);
  {
    g_assert_true(rf_side_rank_shard(&pb->dst, w, r0 + 1, &box, NULL));
    g_assert_cmpint(box.lo[0], ==, 0);
    g_assert_cmpint(box.hi[0], ==, m->parts[w].shape[0] / 2);
    g_assert_cmpint(box.lo[1], ==, m->parts[w].shape[1] / 2);
    g_assert_true(rf_side_rank_shard(&pb->dst, w, r0 + 2, &box, NULL));
    g_assert_cmpint(box.lo[0], ==, m->parts[w].shape[0] / 2);
    g_assert_cmpint(box.lo[1], ==, 0);
  }
  verify_all(pb, "sglang TP4xADP2xEP2");
}

/* vLLM with expert parallel inside each engine (EP = TP, DP > 1: NeMo RL's
 * expert_parallel_size == tensor_parallel_size, each engine a vLLM data-parallel group of 1;
 * vllm fused_moe FusedMoEParallelConfig.make / determine_expert_map): on rank tp of every
 * replica, experts [tp E / EP, (tp + 1) E / EP) of each expert weight with all their rows and
 * columns; every expert once per replica; dense parts split over TP as without EP. tiny-mla:
 * 8 routed experts, so 2 per rank. */
static void test_vllm_engine_ep(void) {
  GError *e = NULL;
  g_autoptr(RfProblem) pb = preset_fw("tiny-mla", "TP2xEP2", "TP4xEP4xDP4", RF_INFER_VLLM, 8, &e);
  g_assert_no_error(e);
  const RfModel *m = pb->model;
  g_assert_cmpint(pb->dst.nranks, ==, 16);
  int nexp = 0;
  for (uint32_t pi = 0; pi < m->nparts; pi++) {
    const RfPart *part = &m->parts[pi];
    const RfTensor *t = &m->tensors[part->tensor];
    if (t->nexperts <= 0) continue;
    int64_t E = part->shape[0], per = E / 4;
    g_assert_cmpint(E % 4, ==, 0);
    for (int d = 0; d < 4; d++) {
      int64_t held = 0;
      for (int tp = 0; tp < 4; tp++) {
        RfBox box;
        int r = pb->dst.ranks[d * 4 + tp];
        g_assert_true(rf_side_rank_shard(&pb->dst, pi, r, &box, NULL));
        g_assert_cmpint(box.lo[0], ==, tp * per);
        g_assert_cmpint(box.hi[0], ==, (tp + 1) * per);
        for (int k = 1; k < part->ndim; k++) {
          g_assert_cmpint(box.lo[k], ==, 0);
          g_assert_cmpint(box.hi[k], ==, part->shape[k]);
        }
        /* contiguous blocks: this rank's block starts where the previous one ended */
        g_assert_cmpint(box.lo[0], ==, held);
        held = box.hi[0];
      }
      g_assert_cmpint(held, ==, E); /* each expert exactly once in replica d */
    }
    nexp++;
  }
  g_assert_cmpint(nexp, >, 0);
  /* dense: the embedding split over the engine's TP4, the same on every replica */
  uint32_t emb = find_part(m, "model.embed_tokens.weight");
  RfBox a, b;
  g_assert_true(rf_side_rank_shard(&pb->dst, emb, pb->dst.ranks[1], &a, NULL));
  g_assert_true(rf_side_rank_shard(&pb->dst, emb, pb->dst.ranks[3 * 4 + 1], &b, NULL));
  g_assert_cmpint(a.lo[0], ==, b.lo[0]);
  g_assert_cmpint(a.hi[0] - a.lo[0], <, m->parts[emb].shape[0] / 2);
  verify_all(pb, "vllm TP4xEP4xDP4");
}

/* Megatron generation keeps Megatron's local layouts: the fused QKV per KV group. */
static void test_megatron_generation(void) {
  GError *e = NULL;
  g_autoptr(RfProblem) pb =
      preset_fw("tiny-moe", "TP2xEP2", "TP2xEP2xETP1", RF_INFER_MEGATRON, 8, &e);
  g_assert_no_error(e);
  g_assert_cmpstr(pb->dst.framework, ==, "megatron");
  const RfModel *m = pb->model;
  uint32_t k = find_part(m, "model.layers.0.self_attn.k_proj.weight");
  /* the same local map on both sides: [q_g | k_g | v_g] per KV group */
  g_assert_cmpint(pb->dst.local[k].blk, ==, pb->src.local[k].blk);
  g_assert_cmpint(pb->dst.local[k].period, ==, pb->src.local[k].period);
  g_assert_cmpint(pb->dst.local[k].blk, >, 0);
  verify_all(pb, "megatron generation");
}

typedef struct {
  const char *train, *infer;
  RfInferFramework fw;
  const char *needle;
} Bad;

static const Bad bad[] = {
    {"TP2", "TP2xETP2", RF_INFER_VLLM, "ETP"},
    {"TP2", "TP2xETP2", RF_INFER_SGLANG, "ETP"},
    {"TP2", "TP4xADP2", RF_INFER_VLLM, "ADP"},
    {"TP2", "TP4xADP2", RF_INFER_MEGATRON, "ADP"},
    {"TP2xADP2", "TP2", RF_INFER_SGLANG, "ADP"},
    {"TP2", "TP4xEP3", RF_INFER_SGLANG, "must divide TP"},
    {"TP2", "TP4xADP8", RF_INFER_SGLANG, "must divide TP"},
    {"TP2", "TP2xPP2", RF_INFER_MEGATRON, "generation PP"},
    {"TP2", "TP2xCP2", RF_INFER_SGLANG, "generation PP"},
    {"TP2", "TP2xEP4xDP3", RF_INFER_MEGATRON, "does not divide"},
    {"TP2", "TP2xEP4", RF_INFER_SGLANG, "must divide TP"},
    {"TP2", "TP8xEP8", RF_INFER_SGLANG, "does not divide"}, /* 6 experts over EP8 */
    {"TP2", "TP2xEP4xDP3", RF_INFER_VLLM, "EP = TP x DP = 6"},
    {"TP2", "TP4xEP2xDP2", RF_INFER_VLLM, "EP = TP = 4"},
    {"TP2", "TP4xEP4xDP2", RF_INFER_VLLM, "does not divide"}, /* 6 experts over EP4 */
};

static void test_bad(gconstpointer data) {
  const Bad *c = data;
  GError *e = NULL;
  g_autoptr(RfProblem) pb = preset_fw("tiny-moe", c->train, c->infer, c->fw, 8, &e);
  if (pb) g_error("accepted %s -> %s %s", c->train, rf_infer_framework_name(c->fw), c->infer);
  g_assert_error(e, RF_ERROR, RF_ERROR_INPUT);
  if (!strstr(e->message, c->needle)) g_error("'%s' lacks '%s'", e->message, c->needle);
  g_assert_null(strchr(e->message, '\n'));
  g_clear_error(&e);
}

static void test_framework_parse(void) {
  RfInferFramework f;
  GError *e = NULL;
  for (int i = 0; i < RF_INFER_COUNT; i++) {
    g_assert_true(rf_infer_framework_parse(rf_infer_framework_name(i), &f, &e));
    g_assert_cmpint(f, ==, i);
  }
  g_assert_false(rf_infer_framework_parse("trtllm", &f, &e));
  g_assert_error(e, RF_ERROR, RF_ERROR_INPUT);
  g_clear_error(&e);
  g_assert_false(rf_infer_framework_parse(NULL, &f, &e));
  g_clear_error(&e);
}

/* ---- elastic recovery ----------------------------------------------------------------- */

/* Independent check of the refusal: is there a needed source shard all of whose replicas sit on
 * lost GPUs? */
static gboolean only_copy_lost(const RfProblem *pb, const uint8_t *lostgpu) {
  for (uint32_t pi = 0; pi < pb->model->nparts; pi++) {
    const RfPlacement *sp = &pb->src.place[pi];
    if (!sp->mesh || !pb->dst.place[pi].mesh) continue;
    for (int s = 0; s < rf_placement_nshards(sp); s++) {
      if (!rf_placement_shard_box(sp, s, NULL, NULL)) continue;
      gboolean alive = FALSE;
      for (int r = 0; r < rf_placement_nreplicas(sp); r++)
        alive |= !lostgpu[pb->gpu[rf_placement_rank(sp, s, r)]];
      if (!alive) return TRUE;
    }
  }
  return FALSE;
}

/* Lose 1-3 random GPUs of pb; on success, every plan is exact over the survivors; on refusal,
 * the only copy of a shard was lost (or no destination survived). Returns TRUE if accepted. */
static gboolean lose_random(RfProblem *pb, GRand *r, const char *what) {
  int maxgpu = 0;
  for (int i = 0; i < pb->nranks; i++)
    maxgpu = MAX(maxgpu, pb->gpu[i] + 1);
  g_autofree uint8_t *lostgpu = g_new0(uint8_t, maxgpu);
  int gpus[3], n = g_rand_int_range(r, 1, 4);
  for (int i = 0; i < n; i++) {
    gpus[i] = pb->gpu[g_rand_int_range(r, 0, pb->nranks)];
    lostgpu[gpus[i]] = 1;
  }
  int alive_dst = 0;
  for (int i = 0; i < pb->dst.nranks; i++)
    alive_dst += !lostgpu[pb->gpu[pb->dst.ranks[i]]];
  gboolean refuse = alive_dst == 0 || only_copy_lost(pb, lostgpu);
  GError *e = NULL;
  gboolean ok = rf_problem_set_lost(pb, gpus, n, &e);
  if (ok == refuse)
    g_error("%s: set_lost %s, expected %s", what, ok ? "accepted" : e->message,
            refuse ? "a refusal" : "success");
  if (!ok) {
    g_assert_error(e, RF_ERROR, RF_ERROR_INPUT);
    g_assert_null(strchr(e->message, '\n'));
    g_clear_error(&e);
    return FALSE;
  }
  g_assert_cmpint(pb->nlost, >=, 1);
  /* lost ranks hold and receive nothing */
  for (int i = 0; i < pb->nranks; i++)
    if (pb->lost[i])
      for (uint32_t pi = 0; pi < pb->model->nparts; pi++) {
        g_assert_false(rf_side_rank_shard(&pb->src, pi, i, NULL, NULL));
        g_assert_false(rf_side_rank_shard(&pb->dst, pi, i, NULL, NULL));
      }
  verify_all(pb, what);
  return TRUE;
}

static void test_lost_presets(void) {
  GRand *rng = g_rand_new_with_seed(77);
  int accepted = 0, refused = 0;
  for (int it = 0; it < 3000 && (accepted < 60 || refused < 10); it++) {
    RfInferFramework fw = (RfInferFramework)(it % RF_INFER_COUNT);
    const char *model = models[it % G_N_ELEMENTS(models)];
    g_autofree char *train = random_train(rng);
    g_autofree char *infer = random_infer(rng, fw);
    int domain = g_rand_int_range(rng, 1, 9);
    GError *e = NULL;
    g_autoptr(RfProblem) pb = preset_fw(model, train, infer, fw, domain, &e);
    if (!pb) {
      g_clear_error(&e);
      continue;
    }
    g_autofree char *what = g_strdup_printf("%s %s -> %s %s D%d lost", model, train,
                                            rf_infer_framework_name(fw), infer, domain);
    if (lose_random(pb, rng, what))
      accepted++;
    else
      refused++;
  }
  g_rand_free(rng);
  g_assert_cmpint(accepted, >=, 60);
  g_assert_cmpint(refused, >=, 10);
}

/* Random DTensor specs (1-3 mesh dims, overlapping or disjoint rank sets), random losses. */
static void append_side(GString *s, GRand *rng, int nd, int first, int npool) {
  int md = g_rand_int_range(rng, 1, 3), dims[2], n = 1;
  for (int i = 0; i < md; i++)
    n *= dims[i] = g_rand_int_range(rng, 1, 4);
  for (int i = 0; i < md && n > npool; i++) { /* shrink to fit the pool */
    n /= dims[i];
    dims[i] = 1;
  }
  g_string_append(s, "{\"mesh\":[");
  for (int i = 0; i < md; i++)
    g_string_append_printf(s, "%s%d", i ? "," : "", dims[i]);
  g_string_append(s, "],\"ranks\":[");
  for (int i = 0; i < n; i++)
    g_string_append_printf(s, "%s%d", i ? "," : "", first + i);
  g_string_append(s, "],\"placements\":[");
  for (int i = 0; i < md; i++) {
    int p = g_rand_int_range(rng, -1, nd);
    if (p < 0)
      g_string_append_printf(s, "%s\"R\"", i ? "," : "");
    else
      g_string_append_printf(s, "%s\"S%d\"", i ? "," : "", p);
  }
  g_string_append(s, "]}");
}

static void test_lost_specs(void) {
  GRand *rng = g_rand_new_with_seed(4242);
  int accepted = 0, refused = 0;
  for (int it = 0; it < 5000 && (accepted < 300 || refused < 30); it++) {
    GString *s = g_string_new("{\"tensors\":[");
    int nt = g_rand_int_range(rng, 1, 4);
    int ns = g_rand_int_range(rng, 1, 10), ndp = g_rand_int_range(rng, 1, 10);
    int dfirst = g_rand_int_range(rng, 0, 4) == 0 ? 0 : ns;
    for (int t = 0; t < nt; t++) {
      int nd = g_rand_int_range(rng, 1, 4);
      g_string_append_printf(s, "%s{\"name\":\"t%d\",\"dtype\":\"bf16\",\"shape\":[", t ? "," : "",
                             t);
      for (int d = 0; d < nd; d++)
        g_string_append_printf(s, "%s%d", d ? "," : "", g_rand_int_range(rng, 1, 10));
      g_string_append(s, "],\"src\":");
      append_side(s, rng, nd, 0, ns);
      g_string_append(s, ",\"dst\":");
      append_side(s, rng, nd, dfirst, ndp);
      g_string_append(s, "}");
    }
    g_string_append(s, "]}");
    GError *e = NULL;
    RfProblem *pb =
        rf_problem_new_spec(s->str, -1, rf_topology_new_domains(g_rand_int_range(rng, 1, 9)), &e);
    if (!pb) g_error("spec %s: %s", s->str, e->message);
    if (lose_random(pb, rng, s->str))
      accepted++;
    else
      refused++;
    rf_problem_free(pb);
    g_string_free(s, TRUE);
  }
  g_rand_free(rng);
  g_assert_cmpint(accepted, >=, 300);
  g_assert_cmpint(refused, >=, 30);
}

/* The only copy: training TP2xPP2 has one replica of every shard; losing GPU 0 (stage 0, tp 0)
 * leaves half of the embedding and of layer 0 nowhere. Also bad lost lists. */
static void test_lost_only_copy(void) {
  GError *e = NULL;
  g_autoptr(RfProblem) pb = preset_fw("tiny-moe", "TP2xPP2", "TP2xDP2", RF_INFER_VLLM, 8, &e);
  g_assert_no_error(e);
  int g0 = 0;
  g_assert_false(rf_problem_set_lost(pb, &g0, 1, &e));
  g_assert_error(e, RF_ERROR, RF_ERROR_INPUT);
  g_assert_nonnull(strstr(e->message, "cannot refit"));
  g_assert_nonnull(strstr(e->message, "model.embed_tokens.weight"));
  g_assert_null(strchr(e->message, '\n'));
  g_clear_error(&e);
  int unused = 7; /* GPUs 4-7 of domain 0 hold no rank */
  g_assert_false(rf_problem_set_lost(pb, &unused, 1, &e));
  g_assert_error(e, RF_ERROR, RF_ERROR_INPUT);
  g_clear_error(&e);
  /* a whole inference replica lost: the other one still gets everything */
  int rep[2] = {pb->gpu[pb->dst.ranks[0]], pb->gpu[pb->dst.ranks[1]]};
  g_assert_true(rf_problem_set_lost(pb, rep, 2, &e));
  g_assert_no_error(e);
  g_assert_nonnull(strstr(pb->placement_note, "lost GPUs"));
  verify_all(pb, "one replica lost");
  /* with training DP2, a lost training GPU is served by the other replica */
  g_autoptr(RfProblem) pb2 = preset_fw("tiny-moe", "TP2xPP2xDP2", "TP2xDP2", RF_INFER_VLLM, 8, &e);
  g_assert_no_error(e);
  g_assert_true(rf_problem_set_lost(pb2, &g0, 1, &e));
  verify_all(pb2, "a training GPU lost");
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  for (int f = 0; f < RF_INFER_COUNT; f++) {
    g_autofree char *path = g_strdup_printf("/frameworks/random/%s", rf_infer_framework_name(f));
    g_test_add_data_func(path, GINT_TO_POINTER(f), test_random_presets);
    g_autofree char *kpath = g_strdup_printf("/frameworks/kinds/%s", rf_infer_framework_name(f));
    g_test_add_data_func(kpath, GINT_TO_POINTER(f), test_random_kinds);
  }
  g_test_add_func("/frameworks/sglang_layout", test_sglang_layout);
  g_test_add_func("/frameworks/megatron_generation", test_megatron_generation);
  g_test_add_func("/frameworks/vllm_engine_ep", test_vllm_engine_ep);
  g_test_add_func("/frameworks/parse", test_framework_parse);
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autofree char *path = g_strdup_printf("/frameworks/bad/%u", i);
    g_test_add_data_func(path, &bad[i], test_bad);
  }
  g_test_add_func("/elastic/lost_presets", test_lost_presets);
  g_test_add_func("/elastic/lost_specs", test_lost_specs);
  g_test_add_func("/elastic/only_copy", test_lost_only_copy);
  return g_test_run();
}
