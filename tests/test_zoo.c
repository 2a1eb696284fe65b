/* Model zoo: public totals, tensor lists, listings, bad configs. */
#include <glib.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

#include "error.h"
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

/* Published configs (tests/data/hf, copied from shared/reference/hf-configs): each loads within
 * 1% of its published size. "~" sizes in the README are two significant figures: 2%. Sizes
 * without MTP where the published figure leaves the MTP block out (Nemotron-3, Qwen3.5). */
typedef struct {
  const char *file;
  double params, tol;
  gboolean with_mtp;
} HfCase;

static const HfCase hf_cases[] = {
    {"DeepSeek-V3", 685e9, 0.01, TRUE}, /* 671 B + 14 B MTP */
    {"Kimi-K3", 2.8e12, 0.02, TRUE},
    {"Meta-Llama-3.1-70B", 70.6e9, 0.01, TRUE},
    {"MiniMax-M2.5", 230e9, 0.02, TRUE},
    {"Mixtral-8x7B-v0.1", 46.7e9, 0.01, TRUE},
    {"NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16", 550e9, 0.02, FALSE},
    {"Nemotron-H-56B-Base-8K", 56e9, 0.02, TRUE},
    {"Qwen3-Next-80B-A3B-Thinking", 80e9, 0.01, TRUE},
    {"Qwen3.5-397B-A17B", 397e9, 0.01, FALSE},
    {"gpt-oss-120b", 116.8e9, 0.01, TRUE},
};

static RfModel *load_data(const char *dir, const char *name) {
  char *path = g_strdup_printf("%s/tests/data/%s/%s.json", g_getenv("REFIT_DATA_DIR"), dir, name);
  GError *e = NULL;
  RfModel *m = rf_model_load(path, &e);
  g_assert_no_error(e);
  g_free(path);
  return m;
}

static void test_hf(gconstpointer data) {
  const HfCase *c = data;
  RfModel *m = load_data("hf", c->file);
  double p = 0;
  for (uint32_t i = 0; i < m->ntensors; i++)
    if (c->with_mtp || !m->tensors[i].mtp) p += (double)rf_tensor_elems(&m->tensors[i]);
  if (fabs(p / c->params - 1) > c->tol)
    g_error("%s: %.4g params, published %.4g", c->file, p, c->params);
  /* planning keeps the training precision */
  g_assert_cmpint(rf_model_bytes(m), ==, 2 * rf_model_params(m));
  rf_model_free(m);
}

/* GLM-5 has no published size at hand: it loads, with its DSA indexer in every layer. */
static void test_hf_glm5(void) {
  RfModel *m = load_data("hf", "GLM-5");
  int idx = 0;
  for (uint32_t i = 0; i < m->ntensors; i++)
    idx += g_str_has_suffix(m->tensors[i].name, "indexer.wk.weight");
  g_assert_cmpint(idx, ==, m->nlayers + m->arch.mtp_layers);
  rf_model_free(m);
}

/* Published quantization: FP8 blocks add weight_scale_inv; MXFP4 packs gpt-oss experts. */
static void test_quant(void) {
  RfModel *m = load_data("hf", "DeepSeek-V3");
  g_assert_nonnull(m->ckpt);
  int fp8 = 0, scales = 0;
  for (uint32_t i = 0; i < m->nckpt; i++) {
    const RfTensor *t = &m->ckpt[i];
    if (t->dtype == RF_DT_FP8) fp8++;
    if (g_str_has_suffix(t->name, "weight_scale_inv")) {
      scales++;
      g_assert_cmpint(t->dtype, ==, RF_DT_FP32);
      g_assert_true(g_str_has_suffix(m->ckpt[i - 1].name, ".weight"));
      g_assert_cmpint(t->shape[t->ndim - 1], ==, (m->ckpt[i - 1].shape[t->ndim - 1] + 127) / 128);
    }
    g_assert_false(t->kind == RF_KIND_EMBEDDING && t->dtype != RF_DT_BF16);
  }
  g_assert_cmpint(fp8, ==, scales);
  g_assert_cmpint(fp8, >, 0);
  /* about one byte a parameter, scales and BF16 tables on top */
  double r = (double)rf_model_checkpoint_bytes(m) / rf_model_params(m);
  g_assert_cmpfloat(r, >, 1.0);
  g_assert_cmpfloat(r, <, 1.02);
  rf_model_free(m);
  /* gpt-oss-120b: the MXFP4 checkpoint is about 65 GB */
  m = load_data("hf", "gpt-oss-120b");
  g_assert_cmpfloat(fabs(rf_model_checkpoint_bytes(m) / 65.3e9 - 1), <, 0.01);
  rf_model_free(m);
}

/* Every tiny family config plans and verifies with every strategy. */
static const struct {
  const char *file, *train, *infer;
} tiny_cases[] = {
    {"llama", "TP2xPP2", "TP4"},
    {"mixtral", "TP2xPP2xEP2", "TP2xDP2"},
    {"minimax-m2", "TP2xEP4", "TP4xDP2"},
    {"glm4-moe", "TP2xPP2xEP2", "TP4"},
    {"glm5", "TP2xPP2xEP4", "TP4xDP2"},
    {"qwen3.5-moe", "TP2xPP2xEP2", "TP2xDP2"},
    {"qwen3.5", "TP2xPP2", "TP2"},
    {"gpt-oss", "TP2xEP2", "TP4"},
    {"nemotron-listed", "TP2xPP2", "TP2xDP2"},
};

static void test_tiny(gconstpointer data) {
  const int i = GPOINTER_TO_INT(data);
  RfModel *m = load_data("tiny", tiny_cases[i].file);
  GError *e = NULL;
  RfProblem *pb = rf_problem_new_preset(m, tiny_cases[i].train, tiny_cases[i].infer,
                                        rf_topology_new_domains(8), &e);
  g_assert_no_error(e);
  for (int s = 0; s < RF_STRATEGY_COUNT; s++) {
    RfPlan *p = rf_plan_build(pb, (RfStrategy)s, NULL, &e);
    g_assert_no_error(e);
    g_assert_true(rf_plan_verify(p, NULL));
    rf_plan_free(p);
  }
  rf_problem_free(pb);
}

/* Issue 10: shapes and counts past the limits, refused with their codes before any overflow. */
static void test_limits(void) {
  static const struct {
    const char *json;
    int code;
  } cases[] = {
      /* heads x head_dim, MLA and Mamba dims would overflow int64 if multiplied first */
      {"{\"model_type\":\"llama\",\"hidden_size\":8,\"num_hidden_layers\":1,\"num_attention_"
       "heads\":"
       "4294967295,\"head_dim\":4294967295,\"intermediate_size\":8,\"vocab_size\":8}",
       RF_ERROR_LIMIT},
      {"{\"model_type\":\"deepseek_v3\",\"hidden_size\":8,\"num_hidden_layers\":1,\"num_attention_"
       "heads\":2,\"kv_lora_rank\":8,\"qk_nope_head_dim\":4294967295,\"qk_rope_head_dim\":8,\"v_"
       "head_dim\":8,\"n_routed_experts\":2,\"num_experts_per_tok\":1,\"moe_intermediate_size\":8,"
       "\"intermediate_size\":8,\"vocab_size\":8}",
       RF_ERROR_LIMIT},
      {"{\"model_type\":\"nemotron_h\",\"hidden_size\":8,\"num_hidden_layers\":1,\"num_attention_"
       "heads\":2,\"mamba_num_heads\":4294967295,\"mamba_head_dim\":4294967295,\"n_groups\":1,"
       "\"ssm_state_size\":2,\"conv_kernel\":2,\"vocab_size\":8,\"hybrid_override_pattern\":\"M\"}",
       RF_ERROR_LIMIT},
      /* the largest accepted dims still stay below int64 and are refused by volume */
      {"{\"model_type\":\"llama\",\"hidden_size\":16777216,\"num_hidden_layers\":1,\"num_attention_"
       "heads\":16777216,\"head_dim\":16777216,\"intermediate_size\":8,\"vocab_size\":8}",
       RF_ERROR_LIMIT},
      /* a listing dim past 2^56, and a product past 2^56 */
      {"{\"w\":{\"dtype\":\"bf16\",\"shape\":[4294967296,4294967296]}}", RF_ERROR_LIMIT},
      {"{\"w\":{\"dtype\":\"bf16\",\"shape\":[72057594037927936,2]}}", RF_ERROR_LIMIT},
      /* 0 layers, decoder_sparse_step 0, more experts per token than experts */
      {"{\"model_type\":\"qwen3\",\"hidden_size\":8,\"num_hidden_layers\":0,\"num_attention_"
       "heads\":"
       "2,\"intermediate_size\":8,\"vocab_size\":8,\"mlp_only_layers\":[0]}",
       RF_ERROR_INPUT},
      {"{\"model_type\":\"qwen3_moe\",\"hidden_size\":8,\"num_hidden_layers\":2,\"num_attention_"
       "heads\":2,\"num_experts\":4,\"num_experts_per_tok\":2,\"moe_intermediate_size\":8,"
       "\"decoder_sparse_step\":0,\"vocab_size\":8}",
       RF_ERROR_INPUT},
      {"{\"model_type\":\"qwen3_moe\",\"hidden_size\":8,\"num_hidden_layers\":2,\"num_attention_"
       "heads\":2,\"num_experts\":4,\"num_experts_per_tok\":5,\"moe_intermediate_size\":8,"
       "\"vocab_size\":8}",
       RF_ERROR_INPUT},
      /* Python's constants: fine in a config, never in a listing */
      {"{\"w\":{\"dtype\":\"bf16\",\"shape\":[4]},\"x\":{\"dtype\":\"bf16\",\"shape\":[4],\"s\":"
       "Infinity}}",
       RF_ERROR_INPUT},
      {"{\"model_type\":\"llama4\"}", RF_ERROR_INPUT},
      {"{\"model_type\":\"llama\",\"quantization_config\":{\"quant_method\":\"gptq\"}}",
       RF_ERROR_INPUT},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    GError *e = NULL;
    RfModel *m = rf_model_from_json("bad", cases[i].json, -1, &e);
    if (m) g_error("accepted: %s", cases[i].json);
    g_assert_error(e, RF_ERROR, cases[i].code);
    g_assert_null(strchr(e->message, '\n'));
    g_assert_null(strstr(e->message, "0..-1"));
    g_clear_error(&e);
  }
  /* 33 tensors of 2^56 fp32 elements: each within the limits, the total is not */
  GString *js = g_string_new("{");
  for (int i = 0; i < 33; i++)
    g_string_append_printf(js, "%s\"t%d\":{\"dtype\":\"fp32\",\"shape\":[72057594037927936]}",
                           i ? "," : "", i);
  g_string_append(js, "}");
  GError *e = NULL;
  g_assert_null(rf_model_from_json("big", js->str, -1, &e));
  g_assert_error(e, RF_ERROR, RF_ERROR_LIMIT);
  g_clear_error(&e);
  g_string_free(js, TRUE);
}

/* A shipped config with one member set (value >= 0) or removed (value < 0), as JSON text. */
static char *config_with(const char *rel, const char *key, int64_t value) {
  g_autofree char *path = g_build_filename(g_getenv("REFIT_DATA_DIR"), rel, NULL);
  g_autoptr(JsonParser) p = json_parser_new();
  g_assert_true(json_parser_load_from_file(p, path, NULL));
  JsonObject *o = json_node_get_object(json_parser_get_root(p));
  if (value < 0)
    json_object_remove_member(o, key);
  else
    json_object_set_int_member(o, key, value);
  return json_to_string(json_parser_get_root(p), FALSE);
}

/* Issue 25: a MoE model_type without routed experts, and 0 where a dimension sizes tensors,
 * are refused in one line naming the key; 0 stays legal where it means none. */
static void test_strict(void) {
  static const struct {
    const char *file, *key;
    int64_t value;    /* -1: removed */
    const char *says; /* NULL: loads */
  } cases[] = {
      {"model/configs/tiny-moe.json", "num_experts", -1,
       "model_type 'qwen3_moe' has routed experts, but 'num_experts' (or 'n_routed_experts', "
       "'num_local_experts') is missing"},
      {"model/configs/tiny-moe.json", "num_experts", 0,
       "'num_experts' is 0 (want >= 1: the routed experts of a MoE model)"},
      {"model/configs/tiny-moe.json", "moe_intermediate_size", 0,
       "'moe_intermediate_size' is 0 (want >= 1: the routed experts' width)"},
      {"tests/data/hf/Mixtral-8x7B-v0.1.json", "num_local_experts", -1,
       "model_type 'mixtral' has routed experts"},
      {"tests/data/hf/gpt-oss-120b.json", "num_local_experts", 0, "'num_local_experts' is 0"},
      {"tests/data/hf/Qwen3-Next-80B-A3B-Thinking.json", "num_experts", -1,
       "model_type 'qwen3_next' has routed experts"},
      {"model/configs/tiny-mla.json", "n_routed_experts", -1,
       "model_type 'deepseek_v3' has routed experts"},
      {"model/configs/tiny-mla.json", "qk_nope_head_dim", 0, "'qk_nope_head_dim' is 0"},
      {"model/configs/tiny-mla.json", "qk_rope_head_dim", 0, "'qk_rope_head_dim' is 0"},
      {"model/configs/tiny-hybrid.json", "moe_latent_size", 0,
       "'moe_latent_size' is 0 (want >= 1: the routed experts' latent width; leave it out for "
       "none)"},
      /* 0 meaning none */
      {"model/configs/tiny-mla.json", "q_lora_rank", 0, NULL},
      {"model/configs/tiny-mla.json", "n_shared_experts", 0, NULL},
      {"model/configs/tiny-mla.json", "first_k_dense_replace", 0, NULL},
      {"model/configs/tiny-mla.json", "num_nextn_predict_layers", 0, NULL},
      {"model/configs/tiny-hybrid.json", "moe_latent_size", -1, NULL},
      {"tests/data/tiny/llama.json", "num_experts", 0, NULL}, /* dense: no experts */
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *json = config_with(cases[i].file, cases[i].key, cases[i].value);
    GError *e = NULL;
    RfModel *m = rf_model_from_json("cfg", json, -1, &e);
    if (!cases[i].says) {
      if (!m)
        g_error("%s %s=%lld: %s", cases[i].file, cases[i].key, (long long)cases[i].value,
                e->message);
      rf_model_free(m);
      continue;
    }
    if (m) g_error("accepted: %s %s=%lld", cases[i].file, cases[i].key, (long long)cases[i].value);
    g_assert_error(e, RF_ERROR, RF_ERROR_INPUT);
    if (!strstr(e->message, cases[i].says)) g_error("'%s' lacks '%s'", e->message, cases[i].says);
    g_assert_true(g_str_has_prefix(e->message, "cfg: "));
    g_assert_null(strchr(e->message, '\n'));
    g_clear_error(&e);
  }
}

/* Every config shipped (model/configs/), the public ones (tests/data/hf/, copies of
 * shared/reference/hf-configs/) and the tiny families load. */
static void test_all_configs(void) {
  const char *dirs[] = {"model/configs", "tests/data/hf", "tests/data/tiny"};
  int n = 0;
  for (size_t i = 0; i < G_N_ELEMENTS(dirs); i++) {
    g_autofree char *dir = g_build_filename(g_getenv("REFIT_DATA_DIR"), dirs[i], NULL);
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    g_assert_nonnull(d);
    for (const char *f; (f = g_dir_read_name(d));) {
      if (!g_str_has_suffix(f, ".json")) continue;
      g_autofree char *p = g_build_filename(dir, f, NULL);
      rf_model_free(load(p));
      n++;
    }
  }
  g_assert_cmpint(n, >=, 32);
}

/* DTensor specs of tensors of 2^56 fp32 elements: each within its element limit, the byte
 * total is not: 33 of them (2^63 B) overflowed the int64 sum (UBSan), and 2 (2^59 B, 576 PB)
 * were planned; both refused before the sum passes RF_MAX_MODEL_BYTES. Two tensors of 2^46
 * elements (2^49 B) stay within it. */
static void test_spec_total(void) {
  for (int k = 0; k < 3; k++) {
    const int nt = k == 2 ? 33 : 2;
    const uint64_t elems = k == 0 ? UINT64_C(1) << 46 : UINT64_C(1) << 56;
    GString *js = g_string_new("{\"tensors\":[");
    for (int i = 0; i < nt; i++)
      g_string_append_printf(js,
                             "%s{\"name\":\"t%d\",\"shape\":[%" G_GUINT64_FORMAT "],\"dtype\":"
                             "\"fp32\",\"src\":{\"mesh\":[1],\"ranks\":[0],\"placements\":"
                             "[\"R\"]},\"dst\":{\"mesh\":[1],\"ranks\":[1],\"placements\":"
                             "[\"R\"]}}",
                             i ? "," : "", i, elems);
    g_string_append(js, "]}");
    GError *e = NULL;
    RfProblem *pb = rf_problem_new_spec(js->str, -1, rf_topology_new_domains(8), &e);
    if (k == 0) {
      g_assert_no_error(e);
      g_assert_cmpint(rf_model_bytes(pb->model), ==, INT64_C(1) << 49);
      rf_problem_free(pb);
    } else {
      g_assert_null(pb);
      g_assert_error(e, RF_ERROR, RF_ERROR_LIMIT);
      g_assert_cmpstr(e->message, ==,
                      "spec: the model is more than 2^50 bytes (1.1 PB), the most refit plans "
                      "(200x the largest published model)");
      g_clear_error(&e);
    }
    g_string_free(js, TRUE);
  }
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  for (size_t i = 0; i < G_N_ELEMENTS(hf_cases); i++) {
    char *path = g_strdup_printf("/zoo/hf/%s", hf_cases[i].file);
    g_test_add_data_func(path, &hf_cases[i], test_hf);
    g_free(path);
  }
  g_test_add_func("/zoo/hf/GLM-5", test_hf_glm5);
  g_test_add_func("/zoo/quant", test_quant);
  for (size_t i = 0; i < G_N_ELEMENTS(tiny_cases); i++) {
    char *path = g_strdup_printf("/zoo/tiny/%s", tiny_cases[i].file);
    g_test_add_data_func(path, GINT_TO_POINTER((int)i), test_tiny);
    g_free(path);
  }
  g_test_add_func("/zoo/limits", test_limits);
  g_test_add_func("/zoo/public_totals", test_public_totals);
  g_test_add_func("/zoo/qwen38_experts", test_qwen38_experts);
  g_test_add_func("/zoo/layer_mix", test_layer_mix);
  g_test_add_func("/zoo/parts", test_parts);
  g_test_add_func("/zoo/expert_names", test_expert_names);
  g_test_add_func("/zoo/listing", test_listing);
  g_test_add_func("/zoo/bad_input", test_bad);
  g_test_add_func("/zoo/strict", test_strict);
  g_test_add_func("/zoo/all_configs", test_all_configs);
  g_test_add_func("/zoo/spec_total", test_spec_total);
  return g_test_run();
}
