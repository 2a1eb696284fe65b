/* Layouts: layout strings, world sizes, placements of framework presets, local memory maps. */
#include <glib.h>
#include <string.h>

#include "error.h"
#include "layout.h"

static RfProblem *preset(const char *model, const char *train, const char *infer, int domain,
                         GError **e) {
  RfModel *m = rf_model_load(model, e);
  if (!m) return NULL;
  return rf_problem_new_preset(m, train, infer, rf_topology_new_domains(domain), e);
}

static uint32_t find_part(const RfModel *m, const char *name, const char *tag) {
  for (uint32_t i = 0; i < m->nparts; i++)
    if (!strcmp(m->tensors[m->parts[i].tensor].name, name) && !strcmp(m->parts[i].tag, tag))
      return i;
  g_error("no part %s#%s", name, tag);
  return 0;
}

static void test_parse(void) {
  RfParallel p;
  GError *e = NULL;
  g_assert_true(rf_parallel_parse("TP8xPP16xEP16xDP16", &p, &e));
  g_assert_no_error(e);
  g_assert_cmpint(p.tp, ==, 8);
  g_assert_cmpint(p.pp, ==, 16);
  g_assert_cmpint(p.ep, ==, 16);
  g_assert_cmpint(p.dp, ==, 16);
  g_assert_true(p.dp_given);
  g_assert_true(rf_parallel_parse("tp2xetp2xcp2", &p, &e));
  g_assert_no_error(e);
  g_assert_cmpint(p.etp, ==, 2);
  g_assert_cmpint(p.cp, ==, 2);
  g_assert_false(p.dp_given);
  g_assert_true(rf_parallel_parse("TP1048576", &p, &e)); /* the limit itself */
  g_assert_no_error(e);
}

/* Refused layout strings: one line, the error code, a word of the message. */
typedef struct {
  const char *layout;
  RfError code;
  const char *needle;
} BadParse;

static const BadParse bad_parse[] = {
    {"", RF_ERROR_INPUT, "empty"},
    {"TP", RF_ERROR_INPUT, "not TP<n>"},
    {"TP0", RF_ERROR_INPUT, "not TP<n>"},
    {"XX4", RF_ERROR_INPUT, "not TP<n>"},
    {"TP4xTP2", RF_ERROR_INPUT, "twice"},
    {"TP4x", RF_ERROR_INPUT, "not TP<n>"},
    {"TP-2", RF_ERROR_INPUT, "not TP<n>"},
    {"TP4xPP", RF_ERROR_INPUT, "not TP<n>"},
    {"TP+2", RF_ERROR_INPUT, "no sign"},
    {"TP 2", RF_ERROR_INPUT, "space"},
    {"TP\t2", RF_ERROR_INPUT, "space"},
    {"TP02", RF_ERROR_INPUT, "leading zero"},
    {"TP2 ", RF_ERROR_INPUT, "not TP<n>"},
    {"TP1048577", RF_ERROR_LIMIT, "limit of 1048576"},
    {"PP99999999999999999999", RF_ERROR_LIMIT, "limit of 1048576"},
};

static void test_parse_bad(gconstpointer data) {
  const BadParse *c = data;
  RfParallel p;
  GError *e = NULL;
  g_assert_false(rf_parallel_parse(c->layout, &p, &e));
  g_assert_error(e, RF_ERROR, (gint)c->code);
  if (!strstr(e->message, c->needle)) g_error("'%s' lacks '%s'", e->message, c->needle);
  g_assert_null(strchr(e->message, '\n'));
  g_clear_error(&e);
}

/* Smallest world consistent with EP, for the four reported configurations. */
typedef struct {
  const char *model, *train, *infer;
  int train_ranks, infer_ranks, domain;
} World;

static const World worlds[] = {
    {"qwen3-235b-a22b", "TP4xPP8xEP16", "TP8xDP16", 128, 128, 8},
    {"deepseek-v3", "PP16xEP16", "TP32xDP8", 256, 256, 8},
    {"deepseek-v3", "PP16xEP16", "TP32xDP8", 256, 256, 72},
    {"nemotron-3-ultra", "TP8xEP32xPP2", "TP8xDP8", 64, 64, 72},
};

static void test_world(gconstpointer data) {
  const World *c = data;
  GError *e = NULL;
  g_autoptr(RfProblem) pb = preset(c->model, c->train, c->infer, c->domain, &e);
  g_assert_no_error(e);
  g_assert_cmpint(pb->src.nranks, ==, c->train_ranks);
  g_assert_cmpint(pb->dst.nranks, ==, c->infer_ranks);
  g_assert_nonnull(strstr(pb->placement_note, "smallest consistent"));
  /* the sides never share a domain; a TP replica that fits never straddles two */
  int last_train = rf_problem_domain(pb, pb->src.ranks[pb->src.nranks - 1]);
  int tp = pb->dst.par.tp, D = c->domain;
  for (int r = 0; r < pb->dst.nranks; r++) {
    int g = pb->dst.ranks[r];
    g_assert_cmpint(rf_problem_domain(pb, g), >, last_train);
    if (tp <= D)
      g_assert_cmpint(rf_problem_domain(pb, g), ==,
                      rf_problem_domain(pb, pb->dst.ranks[r - r % tp]));
  }
}

/* GB200: two TP32 replicas per 72-GPU domain, 8 GPUs idle. */
static void test_gb200_packing(void) {
  GError *e = NULL;
  RfProblem *pb = preset("deepseek-v3", "PP16xEP16", "TP32xDP8", 72, &e);
  g_assert_no_error(e);
  int first = pb->dst.ranks[0];
  g_assert_cmpint(pb->gpu[first] % 72, ==, 0);
  g_assert_cmpint(pb->gpu[first + 32], ==, pb->gpu[first] + 32);
  g_assert_cmpint(pb->gpu[first + 64], ==, pb->gpu[first] + 72);
  g_assert_nonnull(strstr(pb->placement_note, "idle"));
  rf_problem_free(pb);
}

typedef struct {
  const char *model, *train, *infer;
  RfError code;
  const char *needle;
} BadLayout;

static const BadLayout bad_layouts[] = {
    {"tiny-moe", "TP2xEP4xDP3", "TP2", RF_ERROR_INPUT, "does not divide"}, /* EP4 over 6 */
    {"tiny-moe", "TP2", "TP2xDP2xEP3", RF_ERROR_INPUT, "EP = TP x DP"},
    {"tiny-moe", "TP2", "TP2xPP2", RF_ERROR_INPUT, "generation PP"},
    {"tiny-moe", "TP3", "TP2", RF_ERROR_INPUT, "does not divide"},     /* 8 heads over TP3 */
    {"tiny-moe", "TP2", "TP16", RF_ERROR_INPUT, "does not divide"},    /* 8 heads over TP16 */
    {"tiny-moe", "TP2xEP4", "TP2", RF_ERROR_INPUT, "does not divide"}, /* 6 experts over EP4 */
    /* found by fuzz_layout: refused on the counts, before meshes of 800,000 ranks are built */
    {"tiny-moe", "TP8xEP99999", "TP1", RF_ERROR_INPUT, "EP99999 does not divide the 6 experts"},
    {"tiny-moe", "PP9", "TP2", RF_ERROR_INPUT, "exceeds"},
    {"tiny-moe", "TP2", "TP8x", RF_ERROR_INPUT, "bad layout"},
    {"tiny-hybrid", "TP4", "TP2", RF_ERROR_INPUT, "Mamba"},
    {"tiny-mla", "TP1", "TP8", RF_ERROR_INPUT, "attention heads"}, /* 4 MLA heads over TP8 */
    {"tiny-next", "TP1", "TP4", RF_ERROR_INPUT, "GDN heads"},      /* 2 key heads over TP4 */
    {"tiny-kimi", "TP8", "TP1", RF_ERROR_INPUT, "heads"},          /* 4 heads over TP8 */
    {"tiny-moe", "EP1048576xETP1048576", "TP1", RF_ERROR_LIMIT, "limit of 1048575"},
    {"tiny-moe", "TP1", "TP32768xDP65536", RF_ERROR_LIMIT, "limit of 1048575"},
    /* products past 2^63 (signed overflow before the check, issue 10) */
    {"tiny-moe", "TP1048576xCP1048576xEP1048576xETP1048576", "TP2", RF_ERROR_LIMIT,
     "limit of 1048575"},
    {"tiny-moe", "TP2", "TP65536xDP65536xEP1", RF_ERROR_LIMIT, "limit of 1048575"},
    {"tiny-moe", "TP8192xCP2047xDP1048576xPP1048576", "TP2", RF_ERROR_LIMIT, "limit of 1048575"},
    /* heads and rows both fail: one error, set once (GLib warns, fatally here, on a second) */
    {"tiny-moe", "TP64", "TP2", RF_ERROR_INPUT, "TP64 does not divide 8 attention heads"},
    {"tiny-moe", "TP2xEP4xETP4", "TP2", RF_ERROR_INPUT, "does not divide"},
};

static void test_bad_layout(gconstpointer data) {
  const BadLayout *c = data;
  GError *e = NULL;
  g_autoptr(RfProblem) pb = preset(c->model, c->train, c->infer, 8, &e);
  if (pb) g_error("accepted %s %s -> %s", c->model, c->train, c->infer);
  g_assert_error(e, RF_ERROR, (gint)c->code);
  if (!strstr(e->message, c->needle))
    g_error("%s -> %s: '%s' lacks '%s'", c->train, c->infer, e->message, c->needle);
  g_assert_null(strchr(e->message, '\n'));
  g_clear_error(&e);
}

/* Megatron fuses QKV per KV group [q_g | k_g | v_g]; vLLM holds [q_loc | k_loc | v_loc] and
 * replicates KV heads when TP > KV heads. tiny-moe: 8 heads, 2 KV heads, head dim 12, hidden 96. */
static void test_qkv_local(void) {
  GError *e = NULL;
  RfProblem *pb = preset("tiny-moe", "TP1", "TP4", 8, &e);
  g_assert_no_error(e);
  const RfModel *m = pb->model;
  uint32_t q = find_part(m, "model.layers.0.self_attn.q_proj.weight", "");
  uint32_t k = find_part(m, "model.layers.0.self_attn.k_proj.weight", "");
  RfBox box, chunk;
  /* Megatron TP1: both groups on rank 0; a group is 48 q rows + 12 k + 12 v = 72 rows */
  g_assert_true(rf_side_rank_shard(&pb->src, q, 0, &box, &chunk));
  int64_t g[2] = {50, 3}; /* q row 50 = group 1, row 2 */
  g_assert_cmpint(rf_local_offset(&pb->src, q, &chunk, g), ==, (72 + 2) * 96 + 3);
  g_assert_true(rf_side_rank_shard(&pb->src, k, 0, &box, &chunk));
  int64_t gk[2] = {13, 0}; /* k row 13 = group 1, row 1 */
  g_assert_cmpint(rf_local_offset(&pb->src, k, &chunk, gk), ==, (72 + 48 + 1) * 96);
  g_assert_cmpint(rf_side_buffer_elems(&pb->src, pb->src.local[q].buf, 0), ==, 144 * 96);
  /* vLLM TP4: 24 q rows per rank; KV head 1 replicated on ranks 2 and 3 */
  int r2 = pb->dst.ranks[2];
  g_assert_true(rf_side_rank_shard(&pb->dst, k, r2, &box, &chunk));
  g_assert_cmpint(box.lo[0], ==, 12);
  g_assert_cmpint(box.hi[0], ==, 24);
  g_assert_true(rf_side_rank_shard(&pb->dst, k, pb->dst.ranks[3], &box, NULL));
  g_assert_cmpint(box.lo[0], ==, 12);
  int64_t gk2[2] = {12, 5};
  g_assert_cmpint(rf_local_offset(&pb->dst, k, &chunk, gk2), ==, 24 * 96 + 5);
  g_assert_cmpint(rf_side_buffer_elems(&pb->dst, pb->dst.local[k].buf, r2), ==, 48 * 96);
  rf_problem_free(pb);
}

static void count(int64_t off, int64_t len, void *ud) {
  (void)off;
  *(int64_t *)ud += len;
}

/* w13 stacking [E, 2I/tp, H]; vocab padding; row-parallel runs merge across full rows. */
static void test_experts_vocab_runs(void) {
  GError *e = NULL;
  RfProblem *pb = preset("tiny-moe", "TP2", "TP2", 8, &e);
  g_assert_no_error(e);
  const RfModel *m = pb->model;
  uint32_t gate = find_part(m, "model.layers.1.mlp.experts.{e}.gate_proj.weight", "");
  uint32_t up = find_part(m, "model.layers.1.mlp.experts.{e}.up_proj.weight", "");
  int r1 = pb->dst.ranks[1];
  RfBox box, chunk;
  g_assert_true(rf_side_rank_shard(&pb->dst, gate, r1, &box, &chunk));
  g_assert_cmpint(box.lo[1], ==, 20); /* I = 40 over TP2 */
  int64_t g[3] = {3, 25, 7};
  g_assert_cmpint(rf_local_offset(&pb->dst, gate, &chunk, g), ==, (3 * 40 + 5) * 96 + 7);
  g_assert_true(rf_side_rank_shard(&pb->dst, up, r1, &box, &chunk));
  g_assert_cmpint(rf_local_offset(&pb->dst, up, &chunk, g), ==, (3 * 40 + 20 + 5) * 96 + 7);
  g_assert_cmpint(rf_side_buffer_elems(&pb->dst, pb->dst.local[up].buf, r1), ==, 6 * 40 * 96);
  /* Megatron pads vocab 1000 to 1024 (128 x TP2): rank 1 holds rows 512..999 in 512 rows */
  uint32_t emb = find_part(m, "model.embed_tokens.weight", "");
  g_assert_true(rf_side_rank_shard(&pb->src, emb, 1, &box, &chunk));
  g_assert_cmpint(box.lo[0], ==, 512);
  g_assert_cmpint(box.hi[0], ==, 1000);
  g_assert_cmpint(rf_side_buffer_elems(&pb->src, pb->src.local[emb].buf, 1), ==, 512 * 96);
  /* vLLM pads to 1024 (multiple of 64) too, 512 rows per rank */
  g_assert_true(rf_side_rank_shard(&pb->dst, emb, r1, &box, &chunk));
  g_assert_cmpint(chunk.hi[0] - chunk.lo[0], ==, 512);
  /* o_proj [96, 96] Shard(1): rank 1 holds columns 48..96; 4 full local rows = one run */
  uint32_t o = find_part(m, "model.layers.0.self_attn.o_proj.weight", "");
  g_assert_true(rf_side_rank_shard(&pb->dst, o, r1, &box, &chunk));
  RfBox sub = {{0, 48}, {4, 96}};
  int64_t n = 0;
  g_assert_cmpint(rf_local_runs(&pb->dst, o, &chunk, &sub, count, &n), ==, 1);
  g_assert_cmpint(n, ==, 4 * 48);
  RfBox sub2 = {{0, 50}, {4, 60}};
  n = 0;
  g_assert_cmpint(rf_local_runs(&pb->dst, o, &chunk, &sub2, count, &n), ==, 4);
  g_assert_cmpint(n, ==, 40);
  rf_problem_free(pb);
}

static RfProblem *tiny_preset(const char *file, const char *train, const char *infer,
                              RfInferFramework fw) {
  GError *e = NULL;
  g_autofree char *path =
      g_build_filename(g_getenv("REFIT_DATA_DIR"), "tests/data/tiny", file, NULL);
  RfModel *m = rf_model_load(path, &e);
  g_assert_no_error(e);
  RfProblem *pb = rf_problem_new_preset_fw(m, train, infer, fw, rf_topology_new_domains(8), &e);
  g_assert_no_error(e);
  return pb;
}

/* Shard [lo, hi) along dim d a rank holds of a part. */
static void assert_shard(const RfSide *side, uint32_t part, int rank, int d, int64_t lo,
                         int64_t hi) {
  RfBox box;
  g_assert_true(rf_side_rank_shard(side, part, rank, &box, NULL));
  g_assert_cmpint(box.lo[d], ==, lo);
  g_assert_cmpint(box.hi[d], ==, hi);
}

/* glm4_moe q/k/v biases (8 heads, 4 KV heads x 16): sharded like the qkv rows, fused in their
 * own qkv_bias buffer. */
static void test_qkv_bias(void) {
  RfProblem *pb = tiny_preset("glm4-moe.json", "TP2", "TP8", RF_INFER_VLLM);
  const RfModel *m = pb->model;
  uint32_t kb = find_part(m, "model.layers.0.self_attn.k_proj.bias", "");
  uint32_t vb = find_part(m, "model.layers.0.self_attn.v_proj.bias", "");
  uint32_t kw = find_part(m, "model.layers.0.self_attn.k_proj.weight", "");
  g_assert_cmpint(m->tensors[m->parts[kb].tensor].kind, ==, RF_KIND_ATTN_K_BIAS);
  g_assert_cmpstr(pb->src.buf_names[pb->src.local[kb].buf], ==,
                  "model.layers.0.self_attn.qkv_bias");
  g_assert_cmpint(pb->dst.local[kb].buf, !=, pb->dst.local[kw].buf);
  /* Megatron TP2: rank 1 holds KV groups 2, 3: [q 32 | k 16 | v 16] per group */
  RfBox box, chunk;
  assert_shard(&pb->src, kb, 1, 0, 32, 64);
  g_assert_true(rf_side_rank_shard(&pb->src, kb, 1, &box, &chunk));
  int64_t g[1] = {50}; /* group 3, k row 2 */
  g_assert_cmpint(rf_local_offset(&pb->src, kb, &chunk, g), ==, 64 + 32 + 2);
  g_assert_cmpint(rf_side_buffer_elems(&pb->src, pb->src.local[kb].buf, 1), ==, 128);
  /* vLLM TP8 > 4 KV heads: rank 5 holds KV head 2 (rows 32..48): [q 16 | k 16 | v 16] */
  int r5 = pb->dst.ranks[5];
  assert_shard(&pb->dst, vb, r5, 0, 32, 48);
  g_assert_true(rf_side_rank_shard(&pb->dst, vb, r5, &box, &chunk));
  int64_t gv[1] = {40};
  g_assert_cmpint(rf_local_offset(&pb->dst, vb, &chunk, gv), ==, 32 + 8);
  g_assert_cmpint(rf_side_buffer_elems(&pb->dst, pb->dst.local[vb].buf, r5), ==, 48);
  rf_problem_free(pb);
}

/* gpt-oss sinks [8 heads]: split by heads on both sides. */
static void test_sinks(void) {
  RfProblem *pb = tiny_preset("gpt-oss.json", "TP2", "TP4", RF_INFER_VLLM);
  uint32_t s = find_part(pb->model, "model.layers.1.self_attn.sinks", "");
  g_assert_cmpint(pb->model->tensors[pb->model->parts[s].tensor].kind, ==, RF_KIND_ATTN_SINK);
  assert_shard(&pb->src, s, 1, 0, 4, 8);
  assert_shard(&pb->dst, s, pb->dst.ranks[3], 0, 6, 8);
  g_assert_cmpint(rf_side_buffer_elems(&pb->dst, pb->dst.local[s].buf, pb->dst.ranks[3]), ==, 2);
  rf_problem_free(pb);
}

/* gpt-oss expert biases (4 experts, I 64, H 64): gate_up [E, 2I] as parts gate | up. */
static void test_expert_bias(void) {
  const char *gu = "model.layers.2.mlp.experts.gate_up_proj_bias";
  const char *dn = "model.layers.2.mlp.experts.down_proj_bias";
  RfBox box, chunk;
  /* Megatron EP2 x ETP2 (expert rank r: EP r / 2, ETP r % 2); vLLM TP2 without EP */
  RfProblem *pb = tiny_preset("gpt-oss.json", "TP2xEP2xETP2", "TP2", RF_INFER_VLLM);
  const RfModel *m = pb->model;
  uint32_t gate = find_part(m, gu, "gate"), up = find_part(m, gu, "up"),
           down = find_part(m, dn, "");
  g_assert_cmpint(m->tensors[m->parts[down].tensor].kind, ==, RF_KIND_EXPERT_DOWN_BIAS);
  assert_shard(&pb->src, up, 3, 0, 2, 4);
  assert_shard(&pb->src, up, 3, 1, 32, 64);
  g_assert_true(rf_side_rank_shard(&pb->src, gate, 3, &box, &chunk));
  int64_t g1[2] = {2, 40}; /* local [gate_r 32 | up_r 32] per expert */
  g_assert_cmpint(rf_local_offset(&pb->src, gate, &chunk, g1), ==, 8);
  int64_t g2[2] = {3, 33};
  g_assert_true(rf_side_rank_shard(&pb->src, up, 3, &box, &chunk));
  g_assert_cmpint(rf_local_offset(&pb->src, up, &chunk, g2), ==, 64 + 32 + 1);
  g_assert_cmpint(rf_side_buffer_elems(&pb->src, pb->src.local[up].buf, 3), ==, 2 * 64);
  assert_shard(&pb->src, down, 2, 0, 2, 4); /* replicated over ETP */
  assert_shard(&pb->src, down, 3, 1, 0, 64);
  /* vLLM TP2: rank 1 holds I columns 32..63 of every expert, gate and up interleaved */
  int r1 = pb->dst.ranks[1];
  assert_shard(&pb->dst, gate, r1, 1, 32, 64);
  int64_t g3[2] = {1, 40};
  g_assert_true(rf_side_rank_shard(&pb->dst, gate, r1, &box, &chunk));
  g_assert_cmpint(rf_local_offset(&pb->dst, gate, &chunk, g3), ==, 64 + 16);
  g_assert_true(rf_side_rank_shard(&pb->dst, up, r1, &box, &chunk));
  g_assert_cmpint(rf_local_offset(&pb->dst, up, &chunk, g3), ==, 64 + 17);
  g_assert_cmpint(rf_side_buffer_elems(&pb->dst, pb->dst.local[up].buf, r1), ==, 4 * 64);
  assert_shard(&pb->dst, down, r1, 0, 0, 4); /* w2_bias whole on every TP rank */
  assert_shard(&pb->dst, down, r1, 1, 0, 64);
  rf_problem_free(pb);
  /* vLLM EP (TP2xEP2): rank 1 holds experts 2, 3 whole */
  pb = tiny_preset("gpt-oss.json", "TP2", "TP2xEP2", RF_INFER_VLLM);
  m = pb->model;
  up = find_part(m, gu, "up");
  down = find_part(m, dn, "");
  r1 = pb->dst.ranks[1];
  assert_shard(&pb->dst, up, r1, 0, 2, 4);
  assert_shard(&pb->dst, up, r1, 1, 0, 64);
  int64_t g4[2] = {3, 5};
  g_assert_true(rf_side_rank_shard(&pb->dst, up, r1, &box, &chunk));
  g_assert_cmpint(rf_local_offset(&pb->dst, up, &chunk, g4), ==, 128 + 11);
  assert_shard(&pb->dst, down, r1, 0, 2, 4);
  rf_problem_free(pb);
}

/* MiniMax-M2 q_norm [8 x 16] and k_norm [4 x 16] over all heads, TP8: vLLM chunks both
 * evenly; Megatron splits k_norm like k (KV head replicated on 2 ranks). */
static void test_qk_norm_full(void) {
  RfProblem *pb = tiny_preset("minimax-m2.json", "TP8", "TP8", RF_INFER_VLLM);
  uint32_t qn = find_part(pb->model, "model.layers.0.self_attn.q_norm.weight", "");
  uint32_t kn = find_part(pb->model, "model.layers.0.self_attn.k_norm.weight", "");
  g_assert_cmpint(pb->model->tensors[pb->model->parts[kn].tensor].kind, ==, RF_KIND_ATTN_K_NORM);
  int r5 = pb->dst.ranks[5];
  assert_shard(&pb->src, qn, 5, 0, 80, 96);
  assert_shard(&pb->dst, qn, r5, 0, 80, 96);
  assert_shard(&pb->src, kn, 5, 0, 32, 48);
  assert_shard(&pb->dst, kn, r5, 0, 40, 48);
  g_assert_cmpint(rf_side_buffer_elems(&pb->dst, pb->dst.local[kn].buf, r5), ==, 8);
  rf_problem_free(pb);
}

/* Mamba in_proj per rank [z | x | B | C | dt]; every part's local rows are disjoint and fill
 * the buffer exactly. */
static void test_mamba_fused(void) {
  GError *e = NULL;
  RfProblem *pb = preset("tiny-hybrid", "TP2", "TP2", 8, &e);
  g_assert_no_error(e);
  const RfModel *m = pb->model;
  const char *name = "backbone.layers.0.mixer.in_proj.weight";
  int64_t total = 0;
  int buf = -1;
  int64_t seen[512] = {0};
  for (uint32_t i = 0; i < m->nparts; i++) {
    if (strcmp(m->tensors[m->parts[i].tensor].name, name)) continue;
    RfBox box, chunk;
    g_assert_true(rf_side_rank_shard(&pb->dst, i, pb->dst.ranks[1], &box, &chunk));
    buf = pb->dst.local[i].buf;
    for (int64_t r = box.lo[0]; r < box.hi[0]; r++) {
      int64_t g[2] = {r, 0};
      int64_t row = rf_local_offset(&pb->dst, i, &chunk, g) / 64;
      g_assert_cmpint(seen[row]++, ==, 0);
      total++;
    }
  }
  g_assert_cmpint(total * 64, ==, rf_side_buffer_elems(&pb->dst, buf, pb->dst.ranks[1]));
  rf_problem_free(pb);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/layout/parse", test_parse);
  for (size_t i = 0; i < G_N_ELEMENTS(bad_parse); i++) {
    g_autofree char *path = g_strdup_printf("/layout/parse/bad/%zu", i);
    g_test_add_data_func(path, &bad_parse[i], test_parse_bad);
  }
  for (size_t i = 0; i < G_N_ELEMENTS(worlds); i++) {
    g_autofree char *path = g_strdup_printf("/layout/worlds/%zu", i);
    g_test_add_data_func(path, &worlds[i], test_world);
  }
  g_test_add_func("/layout/gb200_packing", test_gb200_packing);
  for (size_t i = 0; i < G_N_ELEMENTS(bad_layouts); i++) {
    g_autofree char *path = g_strdup_printf("/layout/bad/%zu", i);
    g_test_add_data_func(path, &bad_layouts[i], test_bad_layout);
  }
  g_test_add_func("/layout/local/qkv", test_qkv_local);
  g_test_add_func("/layout/local/experts_vocab_runs", test_experts_vocab_runs);
  g_test_add_func("/layout/local/mamba_fused", test_mamba_fused);
  g_test_add_func("/layout/kinds/qkv_bias", test_qkv_bias);
  g_test_add_func("/layout/kinds/sinks", test_sinks);
  g_test_add_func("/layout/kinds/expert_bias", test_expert_bias);
  g_test_add_func("/layout/kinds/qk_norm_full", test_qk_norm_full);
  return g_test_run();
}
