/* Tensor vocabulary: dtype and kind names, the kind a checkpoint name implies, the quantization
 * target rule, and the counts and names of one checkpoint entry. */
#include "tensor.h"
#include "error.h"

#include <string.h>

static const char *const dtype_names[RF_DT_COUNT] = {"bf16", "fp16", "fp32", "fp8", "u8",
                                                     "i8",   "i16",  "u16",  "i32", "u32",
                                                     "i64",  "u64",  "fp64", "bool"};
static const int dtype_sizes[RF_DT_COUNT] = {2, 2, 4, 1, 1, 1, 2, 2, 4, 4, 8, 8, 8, 1};

const char *rf_dtype_name(RfDtype d) {
  return dtype_names[d];
}

int rf_dtype_size(RfDtype d) {
  return dtype_sizes[d];
}

gboolean rf_dtype_parse(const char *s, RfDtype *out, GError **error) {
  static const struct {
    const char *name;
    RfDtype dt;
  } alias[] = {{"bf16", RF_DT_BF16},   {"bfloat16", RF_DT_BF16},     {"fp16", RF_DT_FP16},
               {"f16", RF_DT_FP16},    {"float16", RF_DT_FP16},      {"fp32", RF_DT_FP32},
               {"f32", RF_DT_FP32},    {"float32", RF_DT_FP32},      {"fp8", RF_DT_FP8},
               {"f8_e4m3", RF_DT_FP8}, {"float8_e4m3fn", RF_DT_FP8}, {"f8_e5m2", RF_DT_FP8},
               {"u8", RF_DT_U8},       {"uint8", RF_DT_U8},          {"f8_e8m0", RF_DT_U8},
               {"i8", RF_DT_I8},       {"i16", RF_DT_I16},           {"u16", RF_DT_U16},
               {"i32", RF_DT_I32},     {"u32", RF_DT_U32},           {"i64", RF_DT_I64},
               {"u64", RF_DT_U64},     {"fp64", RF_DT_FP64},         {"f64", RF_DT_FP64},
               {"bool", RF_DT_BOOL}};
  for (size_t i = 0; i < G_N_ELEMENTS(alias); i++)
    if (!g_ascii_strcasecmp(s, alias[i].name)) {
      *out = alias[i].dt;
      return TRUE;
    }
  g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
              "unknown dtype '%s' (bf16, fp16, fp32, fp8, u8, i8 ... u64, fp64, bool)", s);
  return FALSE;
}

static const char *const kind_names[RF_KIND_COUNT] = {"embedding",
                                                      "lm_head",
                                                      "norm",
                                                      "attn_qkv",
                                                      "attn_q",
                                                      "attn_k",
                                                      "attn_v",
                                                      "attn_o",
                                                      "attn_gate",
                                                      "mla_q_a",
                                                      "mla_kv_a",
                                                      "mla_q_b",
                                                      "mla_kv_b",
                                                      "mamba_in",
                                                      "mamba_conv",
                                                      "mamba_head",
                                                      "mamba_norm",
                                                      "mamba_out",
                                                      "kda_proj",
                                                      "kda_conv",
                                                      "kda_head",
                                                      "kda_repl",
                                                      "kda_o",
                                                      "gdn_proj",
                                                      "gdn_conv",
                                                      "gdn_head",
                                                      "gdn_o",
                                                      "router",
                                                      "moe_latent",
                                                      "dense_gate",
                                                      "dense_up",
                                                      "dense_down",
                                                      "expert_gate",
                                                      "expert_up",
                                                      "expert_down",
                                                      "shared_gate",
                                                      "shared_up",
                                                      "shared_down",
                                                      "mtp_proj",
                                                      "attn_q_bias",
                                                      "attn_k_bias",
                                                      "attn_v_bias",
                                                      "attn_sink",
                                                      "attn_q_norm",
                                                      "attn_k_norm",
                                                      "expert_gate_up_bias",
                                                      "expert_down_bias",
                                                      "other"};

const char *rf_kind_name(RfKind k) {
  return kind_names[k];
}

gboolean rf_kind_is_ffn(RfKind k) {
  return k == RF_KIND_DENSE_GATE || k == RF_KIND_DENSE_UP || k == RF_KIND_DENSE_DOWN ||
         k == RF_KIND_EXPERT_GATE || k == RF_KIND_EXPERT_UP || k == RF_KIND_EXPERT_DOWN;
}

gboolean rf_tensor_in_reshard_set(const RfTensor *t) {
  return rf_kind_is_ffn(t->kind) && !t->mtp && !g_str_has_suffix(t->name, "_scale_inv");
}

/* Kind of a tensor in a plain listing, from its checkpoint name. */
RfKind rf_kind_from_name(const char *n, int ndim) {
  static const struct {
    const char *needle;
    RfKind kind;
  } rules[] = {
      {"embed", RF_KIND_EMBEDDING},
      {"lm_head", RF_KIND_LM_HEAD},
      {"shared_expert", RF_KIND_SHARED_GATE}, /* before "experts.": "shared_experts." */
      {"experts.", RF_KIND_EXPERT_GATE},
      {"q_a_proj", RF_KIND_MLA_Q_A},
      {"kv_a_proj", RF_KIND_MLA_KV_A},
      {"q_b_proj", RF_KIND_MLA_Q_B},
      {"kv_b_proj", RF_KIND_MLA_KV_B},
      {"q_proj.bias", RF_KIND_ATTN_Q_BIAS},
      {"k_proj.bias", RF_KIND_ATTN_K_BIAS},
      {"v_proj.bias", RF_KIND_ATTN_V_BIAS},
      {"self_attn.sinks", RF_KIND_ATTN_SINK},
      {"o_proj.bias", RF_KIND_OTHER}, /* row-parallel bias: whole on every rank */
      {"qkv_proj", RF_KIND_ATTN_QKV},
      {"q_proj", RF_KIND_ATTN_Q},
      {"k_proj", RF_KIND_ATTN_K},
      {"v_proj", RF_KIND_ATTN_V},
      {"o_proj", RF_KIND_ATTN_O},
      {"gate_proj", RF_KIND_DENSE_GATE},
      {"up_proj", RF_KIND_DENSE_UP},
      {"down_proj", RF_KIND_DENSE_DOWN},
      {"mlp.gate.", RF_KIND_ROUTER},
      {"router", RF_KIND_ROUTER},
      {"norm", RF_KIND_NORM},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(rules); i++)
    if (strstr(n, rules[i].needle)) {
      RfKind k = rules[i].kind;
      if (k == RF_KIND_EXPERT_GATE) {
        if (strstr(n, "up_proj") || strstr(n, "w3"))
          k = RF_KIND_EXPERT_UP;
        else if (strstr(n, "down_proj") || strstr(n, "w2"))
          k = RF_KIND_EXPERT_DOWN;
      } else if (k == RF_KIND_SHARED_GATE) {
        if (strstr(n, "up_proj"))
          k = RF_KIND_SHARED_UP;
        else if (strstr(n, "down_proj"))
          k = RF_KIND_SHARED_DOWN;
      }
      /* norms are vectors, vocabulary tables are matrices */
      if (k == RF_KIND_NORM && ndim != 1) continue;
      if ((k == RF_KIND_EMBEDDING || k == RF_KIND_LM_HEAD) && ndim != 2) continue;
      return k;
    }
  return RF_KIND_OTHER;
}

/* The rule of the published FP8 checkpoints (DeepSeek-V3, Qwen3 FP8): every nn.Linear weight of
 * attention, MLP and experts; vocabulary tables, norms, the router, convolutions and per-head
 * vectors stay BF16 (zoo.c reads the same rule back from checkpoints). */
gboolean rf_quant_target(const RfTensor *t) {
  switch (t->kind) {
  case RF_KIND_EMBEDDING:
  case RF_KIND_LM_HEAD:
  case RF_KIND_NORM:
  case RF_KIND_ROUTER:
  case RF_KIND_MAMBA_CONV:
  case RF_KIND_MAMBA_HEAD:
  case RF_KIND_MAMBA_NORM:
  case RF_KIND_KDA_CONV:
  case RF_KIND_KDA_HEAD:
  case RF_KIND_GDN_CONV:
  case RF_KIND_GDN_HEAD:
  case RF_KIND_ATTN_Q_NORM:
  case RF_KIND_ATTN_K_NORM:
  case RF_KIND_ATTN_SINK:
  case RF_KIND_OTHER:
    return FALSE;
  default:
    break;
  }
  return t->ndim == (t->nexperts ? 3 : 2) && g_str_has_suffix(t->name, ".weight");
}

int64_t rf_tensor_count(const RfTensor *t) {
  return t->nexperts > 0 ? t->nexperts : 1;
}

int64_t rf_tensor_elems(const RfTensor *t) {
  int64_t v = 1;
  for (int d = 0; d < t->ndim; d++)
    v *= t->shape[d];
  return v;
}

char *rf_tensor_name(const RfTensor *t, int64_t expert) {
  if (t->nexperts <= 0) return g_strdup(t->name);
  char buf[32];
  g_snprintf(buf, sizeof buf, "%lld", (long long)expert);
  GString *s = g_string_new(t->name);
  g_string_replace(s, "{e}", buf, 1);
  return g_string_free(s, FALSE);
}
