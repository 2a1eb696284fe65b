/* Model zoo: public totals, tensor lists, listings, bad configs. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "plan.h"
#include "zoo.h"

static RfModel *load(const char *n) {
  GError *e = NULL;
  RfModel *m = rf_model_load(n, &e);
  if (!m) g_error("%s: %s", n, e->message);
  return m;
}

/* BRIEF section 4: within 1% for Qwen3 and DeepSeek-V3, 3% for the others. */
static void test_public_totals(void) {
  static const struct {
    const char *name;
    double params, tol;
  } want[] = {
      {"qwen3-235b-a22b", 235.1e9, 0.01},  {"deepseek-v3", 671.0e9, 0.01},
      {"deepseek-v3-mtp", 682.6e9, 0.01},  {"qwen3-30b-a3b", 30.5e9, 0.01},
      {"nemotron-3-ultra", 549e9, 0.03},   {"kimi-k3", 2.8e12, 0.03},
      {"qwen3.8-2.4t-a95b", 2.4e12, 0.03},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(want); i++) {
    RfModel *m = load(want[i].name);
    double p = (double)rf_model_params(m);
    if (fabs(p / want[i].params - 1) > want[i].tol)
      g_error("%s: %.4g params, public %.4g", want[i].name, p, want[i].params);
    g_assert_cmpint(rf_model_bytes(m), ==, 2 * rf_model_params(m)); /* BF16 */
    rf_model_free(m);
  }
}

/* Qwen3.8: routed experts alone are 2.37T (BRIEF). */
static void test_qwen38_experts(void) {
  RfModel *m = load("qwen3.8-2.4t-a95b");
  int64_t ex = 0;
  for (uint32_t i = 0; i < m->ntensors; i++)
    if (m->tensors[i].nexperts && !m->tensors[i].mtp) ex += rf_tensor_elems(&m->tensors[i]);
  g_assert_cmpfloat(fabs(ex / 2.37e12 - 1), <, 0.01);
  rf_model_free(m);
}

/* Hybrid layouts: the layer mix of BRIEF section 4. */
static void test_layer_mix(void) {
  RfModel *m = load("nemotron-3-ultra");
  int mamba = 0, attn = 0, moe = 0;
  for (uint32_t i = 0; i < m->ntensors; i++) {
    const RfTensor *t = &m->tensors[i];
    if (t->kind == RF_KIND_MAMBA_OUT) mamba++;
    if (t->kind == RF_KIND_ATTN_O) attn++;
    if (t->kind == RF_KIND_EXPERT_DOWN) moe++;
  }
  g_assert_cmpint(mamba, ==, 48);
  g_assert_cmpint(attn, ==, 12);
  g_assert_cmpint(moe, ==, 48);
  rf_model_free(m);
  m = load("kimi-k3");
  int kda = 0, mla = 0;
  for (uint32_t i = 0; i < m->ntensors; i++) {
    if (m->tensors[i].kind == RF_KIND_KDA_O) kda++;
    if (m->tensors[i].kind == RF_KIND_MLA_KV_B) mla++;
  }
  g_assert_cmpint(kda, ==, 69);
  g_assert_cmpint(mla, ==, 24);
  rf_model_free(m);
}

/* Parts: Mamba in_proj splits into z | x | B | C | dt covering the tensor exactly. */
static void test_parts(void) {
  RfModel *m = load("tiny-hybrid");
  for (uint32_t i = 0; i < m->ntensors; i++) {
    int64_t sum = 0, off = 0;
    int n = 0;
    for (uint32_t p = 0; p < m->nparts; p++) {
      if (m->parts[p].tensor != i) continue;
      g_assert_cmpint(m->parts[p].seg_off, ==, off);
      off += m->parts[p].shape[0];
      sum += rf_part_elems(&m->parts[p]);
      n++;
    }
    g_assert_cmpint(sum, ==, rf_tensor_elems(&m->tensors[i]));
    if (m->tensors[i].kind == RF_KIND_MAMBA_IN) g_assert_cmpint(n, ==, 5);
  }
  rf_model_free(m);
}

static void test_expert_names(void) {
  RfModel *m = load("tiny-moe");
  const RfTensor *t = NULL;
  for (uint32_t i = 0; i < m->ntensors && !t; i++)
    if (m->tensors[i].kind == RF_KIND_EXPERT_UP) t = &m->tensors[i];
  g_assert_nonnull(t);
  g_assert_cmpint(t->nexperts, ==, 6);
  char *n = rf_tensor_name(t, 5);
  g_assert_cmpstr(n, ==, "model.layers.1.mlp.experts.5.up_proj.weight");
  g_free(n);
  /* layer 0 is dense (mlp_only_layers), layers 1-2 MoE: 2 x 6 x 3 expert tensors */
  int64_t experts = 0;
  for (uint32_t i = 0; i < m->ntensors; i++)
    if (m->tensors[i].nexperts) experts += rf_tensor_count(&m->tensors[i]);
  g_assert_cmpint(experts, ==, 36);
  rf_model_free(m);
}

static void test_listing(void) {
  const char *js = "{\"__metadata__\":{\"format\":\"pt\"},"
                   "\"model.layers.0.self_attn.q_proj.weight\":{\"dtype\":\"BF16\",\"shape\":[64,"
                   "32],\"data_offsets\":[0,4096]},"
                   "\"model.layers.0.input_layernorm.weight\":{\"dtype\":\"F32\",\"shape\":[32]},"
                   "\"lm_head.weight\":{\"dtype\":\"bf16\",\"shape\":[100,32]}}";
  GError *e = NULL;
  RfModel *m = rf_model_from_json("listing", js, -1, &e);
  g_assert_no_error(e);
  g_assert_cmpuint(m->ntensors, ==, 3);
  g_assert_cmpint(rf_model_bytes(m), ==, 64 * 32 * 2 + 32 * 4 + 100 * 32 * 2);
  for (uint32_t i = 0; i < m->ntensors; i++) {
    if (g_str_has_suffix(m->tensors[i].name, "q_proj.weight"))
      g_assert_cmpint(m->tensors[i].kind, ==, RF_KIND_ATTN_Q);
    if (g_str_has_prefix(m->tensors[i].name, "lm_head"))
      g_assert_cmpint(m->tensors[i].kind, ==, RF_KIND_LM_HEAD);
  }
  rf_model_free(m);
  /* a listing has no head structure: its attention plans as plain row splits */
  m = rf_model_from_json("listing", js, -1, &e);
  RfProblem *pb = rf_problem_new_preset(m, "TP2", "TP2", rf_topology_new_domains(8), &e);
  g_assert_no_error(e);
  for (int s = 0; s < RF_STRATEGY_COUNT; s++) {
    RfPlan *p = rf_plan_build(pb, (RfStrategy)s, NULL, &e);
    g_assert_no_error(e);
    g_assert_true(rf_plan_verify(p, NULL));
    rf_plan_free(p);
  }
  rf_problem_free(pb);
}

static void test_bad(void) {
  const char *bad[] = {
      "not json",
      "[1,2]",
      "{\"model_type\":\"llama4\"}",
      "{\"model_type\":\"qwen3_moe\",\"hidden_size\":64}",
      "{\"model_type\":\"qwen3_moe\",\"hidden_size\":-4,\"num_hidden_layers\":1}",
      "{\"w\":{\"dtype\":\"bf16\"}}",
      "{\"w\":{\"dtype\":\"int7\",\"shape\":[4]}}",
      "{\"w\":{\"dtype\":\"bf16\",\"shape\":[0]}}",
      "{\"w\":{\"dtype\":5,\"shape\":[4]}}",
      "{\"model_type\":\"qwen3_moe\",\"torch_dtype\":5,\"hidden_size\":8}",
      "{\"model_type\":\"qwen3_moe\",\"hidden_size\":\"96\",\"num_hidden_layers\":1}",
      "{\"model_type\":\"qwen3\",\"hidden_size\":8,\"num_hidden_layers\":2147483648,\"num_"
      "attention_heads\":2,"
      "\"num_key_value_heads\":1,\"intermediate_size\":8,\"vocab_size\":10}",
      "{\"model_type\":\"nemotron_h\",\"hidden_size\":8,\"num_hidden_layers\":2,\"num_attention_"
      "heads\":2,"
      "\"num_key_value_heads\":1,\"mamba_num_heads\":2,\"mamba_head_dim\":2,\"n_groups\":1,"
      "\"ssm_state_size\":2,\"conv_kernel\":2,\"vocab_size\":10,\"hybrid_override_pattern\":"
      "\"MX\"}",
  };
  for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
    GError *e = NULL;
    RfModel *m = rf_model_from_json("bad", bad[i], -1, &e);
    if (m) g_error("accepted: %s", bad[i]);
    g_assert_nonnull(e);
    g_assert_null(strchr(e->message, '\n'));
    g_clear_error(&e);
  }
  GError *e = NULL;
  g_assert_null(rf_model_load("gpt-9", &e));
  g_assert_nonnull(strstr(e->message, "unknown model"));
  g_clear_error(&e);
  g_assert_null(rf_model_load("/nonexistent/config.json", &e));
  g_clear_error(&e);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/zoo/public_totals", test_public_totals);
  g_test_add_func("/zoo/qwen38_experts", test_qwen38_experts);
  g_test_add_func("/zoo/layer_mix", test_layer_mix);
  g_test_add_func("/zoo/parts", test_parts);
  g_test_add_func("/zoo/expert_names", test_expert_names);
  g_test_add_func("/zoo/listing", test_listing);
  g_test_add_func("/zoo/bad_input", test_bad);
  return g_test_run();
}
