#include "zoo.h"
#include "error.h"

#include <json-glib/json-glib.h>
#include <stdarg.h>
#include <string.h>

#include "jsonutil.h"
#include "topology.h"

static const char *const dtype_names[RF_DT_COUNT] = {"bf16", "fp16", "fp32", "fp8"};
static const int dtype_sizes[RF_DT_COUNT] = {2, 2, 4, 1};

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
               {"f8_e4m3", RF_DT_FP8}, {"float8_e4m3fn", RF_DT_FP8}, {"f8_e5m2", RF_DT_FP8}};
  for (size_t i = 0; i < G_N_ELEMENTS(alias); i++)
    if (!g_ascii_strcasecmp(s, alias[i].name)) {
      *out = alias[i].dt;
      return TRUE;
    }
  g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "unknown dtype '%s' (bf16, fp16, fp32, fp8)", s);
  return FALSE;
}

static const char *const kind_names[RF_KIND_COUNT] = {
    "embedding", "lm_head",     "norm",        "attn_qkv",   "attn_q",      "attn_k",
    "attn_v",    "attn_o",      "attn_gate",   "mla_q_a",    "mla_kv_a",    "mla_q_b",
    "mla_kv_b",  "mamba_in",    "mamba_conv",  "mamba_head", "mamba_norm",  "mamba_out",
    "kda_proj",  "kda_conv",    "kda_head",    "kda_repl",   "kda_o",       "gdn_proj",
    "gdn_conv",  "gdn_head",    "gdn_o",       "router",     "moe_latent",  "dense_gate",
    "dense_up",  "dense_down",  "expert_gate", "expert_up",  "expert_down", "shared_gate",
    "shared_up", "shared_down", "mtp_proj",    "other"};

const char *rf_kind_name(RfKind k) {
  return kind_names[k];
}

gboolean rf_kind_is_ffn(RfKind k) {
  return k == RF_KIND_DENSE_GATE || k == RF_KIND_DENSE_UP || k == RF_KIND_DENSE_DOWN ||
         k == RF_KIND_EXPERT_GATE || k == RF_KIND_EXPERT_UP || k == RF_KIND_EXPERT_DOWN;
}

/* ---- builder ---------------------------------------------------------------------------- */

typedef struct {
  GArray *tensors; /* RfTensor */
  GArray *parts;   /* RfPart */
  RfDtype dtype;
  gboolean mtp; /* tensors added now belong to the MTP block */
} Builder;

static uint32_t add_tensor(Builder *b, RfKind kind, int layer, int nexperts, int ndim,
                           const int64_t *shape, const char *fmt, ...) G_GNUC_PRINTF(7, 8);

static uint32_t add_tensor(Builder *b, RfKind kind, int layer, int nexperts, int ndim,
                           const int64_t *shape, const char *fmt, ...) {
  RfTensor t = {0};
  va_list ap;
  va_start(ap, fmt);
  t.name = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  t.ndim = ndim;
  memcpy(t.shape, shape, sizeof(int64_t) * ndim);
  t.dtype = b->dtype;
  t.kind = kind;
  t.layer = layer;
  t.nexperts = nexperts;
  t.mtp = b->mtp;
  g_array_append_val(b->tensors, t);
  return b->tensors->len - 1;
}

/* Split tensor ti along dim 0 into segments of the given lengths (a whole part when n == 0). */
static void add_parts(Builder *b, uint32_t ti, int n, const int64_t *len, const char *const *tag) {
  const RfTensor *t = &g_array_index(b->tensors, RfTensor, ti);
  int64_t off = 0;
  for (int i = 0; i < (n ? n : 1); i++) {
    RfPart p = {0};
    p.tensor = ti;
    p.ndim = t->ndim;
    memcpy(p.shape, t->shape, sizeof(int64_t) * t->ndim);
    p.seg_dim = 0;
    p.seg_off = off;
    p.tag = "";
    if (n) {
      p.shape[0] = len[i];
      p.tag = tag[i];
      off += len[i];
    }
    g_array_append_val(b->parts, p);
  }
}

#define T1(b, kind, layer, d0, ...)                                                                \
  add_parts(b, add_tensor(b, kind, layer, 0, 1, (int64_t[]){d0}, __VA_ARGS__), 0, NULL, NULL)
#define T2(b, kind, layer, d0, d1, ...)                                                            \
  add_parts(b, add_tensor(b, kind, layer, 0, 2, (int64_t[]){d0, d1}, __VA_ARGS__), 0, NULL, NULL)
#define TE(b, kind, layer, e, d0, d1, ...)                                                         \
  add_parts(b, add_tensor(b, kind, layer, (int)(e), 3, (int64_t[]){e, d0, d1}, __VA_ARGS__), 0,    \
            NULL, NULL)

/* ---- config access --------------------------------------------------------------------- */

typedef struct {
  JsonObject *o;
  const char *file;
  GError **error;
  gboolean failed;
} Cfg;

/* Dims, counts and sizes of a config: integers in [0, 2^32). */
#define CFG_MAX (INT64_C(1) << 32)

static int64_t cfg_int(Cfg *c, const char *key) {
  if (c->failed) return 0;
  int64_t v;
  if (!rf_json_node_int(json_object_get_member(c->o, key), 0, CFG_MAX - 1, &v)) {
    g_set_error(c->error, RF_ERROR, RF_ERROR_INPUT, "%s: '%s' missing or not an integer in 0..%lld",
                c->file, key, (long long)(CFG_MAX - 1));
    c->failed = TRUE;
    return 0;
  }
  return v;
}

static int64_t cfg_int_or(Cfg *c, const char *key, int64_t def) {
  if (!json_object_has_member(c->o, key) || json_object_get_null_member(c->o, key)) return def;
  return cfg_int(c, key);
}

static gboolean cfg_bool_or(Cfg *c, const char *key, gboolean def) {
  JsonNode *n = json_object_get_member(c->o, key);
  if (!n || JSON_NODE_HOLDS_NULL(n) || c->failed) return def;
  if (!JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_BOOLEAN) {
    g_set_error(c->error, RF_ERROR, RF_ERROR_INPUT, "%s: '%s' must be true or false", c->file, key);
    c->failed = TRUE;
    return def;
  }
  return json_node_get_boolean(n);
}

/* Counts that size loops and stacked entries stay in range (after the config was read). */
static gboolean arch_sane(Cfg *c, const RfArch *a) {
  if (c->failed) return FALSE;
  if (a->layers > 100000 || a->experts > (1 << 20) || a->mtp_layers > 64) {
    g_set_error(c->error, RF_ERROR, RF_ERROR_INPUT,
                "%s: implausible config (%lld layers, %lld experts, %lld MTP layers)", c->file,
                (long long)a->layers, (long long)a->experts, (long long)a->mtp_layers);
    c->failed = TRUE;
    return FALSE;
  }
  return TRUE;
}

/* Integer list member as a membership mask over [0, n); offset subtracts (1-based lists). */
static gboolean *cfg_layer_set(Cfg *c, const char *key, int64_t n, int offset) {
  gboolean *set = g_new0(gboolean, n > 0 ? n : 1);
  JsonNode *node = json_object_get_member(c->o, key);
  if (!node || c->failed) return set;
  if (JSON_NODE_TYPE(node) != JSON_NODE_ARRAY) {
    g_set_error(c->error, RF_ERROR, RF_ERROR_INPUT, "%s: '%s' must be a list of layer indices",
                c->file, key);
    c->failed = TRUE;
    return set;
  }
  JsonArray *a = json_node_get_array(node);
  for (guint i = 0; i < json_array_get_length(a); i++) {
    int64_t v;
    if (!rf_json_array_int(a, i, offset, n - 1 + offset, &v)) {
      g_set_error(c->error, RF_ERROR, RF_ERROR_INPUT,
                  "%s: '%s' entry %u is not a layer in %d..%lld", c->file, key, i, offset,
                  (long long)(n - 1 + offset));
      c->failed = TRUE;
      return set;
    }
    set[v - offset] = TRUE;
  }
  return set;
}

/* ---- shared pieces of architectures ----------------------------------------------------- */

static void add_gqa(Builder *b, const RfArch *a, int L, const char *pre, gboolean gated) {
  int64_t q = a->heads * a->head_dim, kv = a->kv_heads * a->head_dim;
  T2(b, RF_KIND_ATTN_Q, L, gated ? 2 * q : q, a->hidden, "%sself_attn.q_proj.weight", pre);
  T2(b, RF_KIND_ATTN_K, L, kv, a->hidden, "%sself_attn.k_proj.weight", pre);
  T2(b, RF_KIND_ATTN_V, L, kv, a->hidden, "%sself_attn.v_proj.weight", pre);
  T2(b, RF_KIND_ATTN_O, L, a->hidden, q, "%sself_attn.o_proj.weight", pre);
}

static void add_mla(Builder *b, const RfArch *a, int L, const char *pre, gboolean gated) {
  int64_t qk = a->qk_nope + a->qk_rope;
  if (a->q_lora) {
    T2(b, RF_KIND_MLA_Q_A, L, a->q_lora, a->hidden, "%sself_attn.q_a_proj.weight", pre);
    T1(b, RF_KIND_NORM, L, a->q_lora, "%sself_attn.q_a_layernorm.weight", pre);
    T2(b, RF_KIND_MLA_Q_B, L, a->heads * qk, a->q_lora, "%sself_attn.q_b_proj.weight", pre);
  } else {
    T2(b, RF_KIND_MLA_Q_B, L, a->heads * qk, a->hidden, "%sself_attn.q_proj.weight", pre);
  }
  T2(b, RF_KIND_MLA_KV_A, L, a->kv_lora + a->qk_rope, a->hidden,
     "%sself_attn.kv_a_proj_with_mqa.weight", pre);
  T1(b, RF_KIND_NORM, L, a->kv_lora, "%sself_attn.kv_a_layernorm.weight", pre);
  T2(b, RF_KIND_MLA_KV_B, L, a->heads * (a->qk_nope + a->v_head), a->kv_lora,
     "%sself_attn.kv_b_proj.weight", pre);
  if (gated)
    T2(b, RF_KIND_ATTN_GATE, L, a->heads * a->v_head, a->hidden, "%sself_attn.g_proj.weight", pre);
  T2(b, RF_KIND_ATTN_O, L, a->hidden, a->heads * a->v_head, "%sself_attn.o_proj.weight", pre);
}

static void add_dense_mlp(Builder *b, int64_t h, int64_t inter, int L, const char *pre,
                          gboolean gated) {
  if (gated) T2(b, RF_KIND_DENSE_GATE, L, inter, h, "%smlp.gate_proj.weight", pre);
  T2(b, RF_KIND_DENSE_UP, L, inter, h, "%smlp.up_proj.weight", pre);
  T2(b, RF_KIND_DENSE_DOWN, L, h, inter, "%smlp.down_proj.weight", pre);
}

/* Routed experts (stacked), router, shared experts. lat: expert width (hidden or MoE latent). */
static void add_moe(Builder *b, const RfArch *a, int L, const char *pre, const char *blk,
                    const char *shared_name, gboolean gated, gboolean router_bias) {
  int64_t E = a->experts, I = a->expert_inter, h = a->hidden;
  int64_t lat = a->moe_latent ? a->moe_latent : h;
  T2(b, RF_KIND_ROUTER, L, E, h, "%s%sgate.weight", pre, blk);
  if (router_bias) T1(b, RF_KIND_ROUTER, L, E, "%s%sgate.e_score_correction_bias", pre, blk);
  if (a->moe_latent) {
    T2(b, RF_KIND_MOE_LATENT, L, lat, h, "%s%sfc1_latent_proj.weight", pre, blk);
    T2(b, RF_KIND_MOE_LATENT, L, h, lat, "%s%sfc2_latent_proj.weight", pre, blk);
  }
  if (gated) TE(b, RF_KIND_EXPERT_GATE, L, E, I, lat, "%s%sexperts.{e}.gate_proj.weight", pre, blk);
  TE(b, RF_KIND_EXPERT_UP, L, E, I, lat, "%s%sexperts.{e}.up_proj.weight", pre, blk);
  TE(b, RF_KIND_EXPERT_DOWN, L, E, lat, I, "%s%sexperts.{e}.down_proj.weight", pre, blk);
  if (a->shared_experts) {
    int64_t si = a->dense_inter ? a->dense_inter : a->shared_experts * I;
    if (gated)
      T2(b, RF_KIND_SHARED_GATE, L, si, h, "%s%s%s.gate_proj.weight", pre, blk, shared_name);
    T2(b, RF_KIND_SHARED_UP, L, si, h, "%s%s%s.up_proj.weight", pre, blk, shared_name);
    T2(b, RF_KIND_SHARED_DOWN, L, h, si, "%s%s%s.down_proj.weight", pre, blk, shared_name);
  }
}

/* ---- families -------------------------------------------------------------------------- */

static void build_qwen3_moe(Builder *b, Cfg *c, RfArch *a, int *nlayers) {
  a->hidden = cfg_int(c, "hidden_size");
  a->layers = cfg_int(c, "num_hidden_layers");
  a->heads = cfg_int(c, "num_attention_heads");
  a->kv_heads = cfg_int(c, "num_key_value_heads");
  a->head_dim = cfg_int_or(c, "head_dim", a->heads ? a->hidden / MAX(a->heads, 1) : 0);
  /* dense Qwen3 (model_type qwen3) has no experts */
  a->experts = cfg_int_or(c, "num_experts", 0);
  a->top_k = cfg_int_or(c, "num_experts_per_tok", 0);
  a->expert_inter = cfg_int_or(c, "moe_intermediate_size", 0);
  a->dense_inter =
      a->experts ? cfg_int_or(c, "intermediate_size", 0) : cfg_int(c, "intermediate_size");
  a->vocab = cfg_int(c, "vocab_size");
  int64_t step = cfg_int_or(c, "decoder_sparse_step", 1);
  gboolean *dense = cfg_layer_set(c, "mlp_only_layers", a->layers, 0);
  gboolean tie = cfg_bool_or(c, "tie_word_embeddings", FALSE);
  if (!arch_sane(c, a)) goto out;
  *nlayers = (int)a->layers;
  T2(b, RF_KIND_EMBEDDING, -1, a->vocab, a->hidden, "model.embed_tokens.weight");
  for (int L = 0; L < a->layers; L++) {
    char *pre = g_strdup_printf("model.layers.%d.", L);
    T1(b, RF_KIND_NORM, L, a->hidden, "%sinput_layernorm.weight", pre);
    add_gqa(b, a, L, pre, FALSE);
    T1(b, RF_KIND_NORM, L, a->head_dim, "%sself_attn.q_norm.weight", pre);
    T1(b, RF_KIND_NORM, L, a->head_dim, "%sself_attn.k_norm.weight", pre);
    T1(b, RF_KIND_NORM, L, a->hidden, "%spost_attention_layernorm.weight", pre);
    if (dense[L] || a->experts == 0 || step < 1 || (L + 1) % step != 0)
      add_dense_mlp(b, a->hidden, a->dense_inter, L, pre, TRUE);
    else
      add_moe(b, a, L, pre, "mlp.", "shared_expert", TRUE, FALSE);
    g_free(pre);
  }
  T1(b, RF_KIND_NORM, -1, a->hidden, "model.norm.weight");
  if (!tie) T2(b, RF_KIND_LM_HEAD, -1, a->vocab, a->hidden, "lm_head.weight");
out:
  g_free(dense);
}

static void build_deepseek(Builder *b, Cfg *c, RfArch *a, int *nlayers, gboolean kimi) {
  a->hidden = cfg_int(c, "hidden_size");
  a->layers = cfg_int(c, "num_hidden_layers");
  a->heads = cfg_int(c, "num_attention_heads");
  a->q_lora = cfg_int_or(c, "q_lora_rank", 0);
  a->kv_lora = cfg_int(c, "kv_lora_rank");
  a->qk_nope = cfg_int(c, "qk_nope_head_dim");
  a->qk_rope = cfg_int(c, "qk_rope_head_dim");
  a->v_head = cfg_int(c, "v_head_dim");
  a->experts = cfg_int(c, "n_routed_experts");
  a->shared_experts = cfg_int_or(c, "n_shared_experts", 0);
  a->top_k = cfg_int(c, "num_experts_per_tok");
  a->expert_inter = cfg_int(c, "moe_intermediate_size");
  a->moe_latent = cfg_int_or(c, "moe_latent_size", 0);
  int64_t dense_inter = cfg_int(c, "intermediate_size");
  int64_t first_dense = cfg_int_or(c, "first_k_dense_replace", 0);
  a->vocab = cfg_int(c, "vocab_size");
  a->mtp_layers = cfg_int_or(c, "num_nextn_predict_layers", 0);
  gboolean gated_attn = cfg_bool_or(c, "gated_attention", FALSE);
  gboolean *kda = NULL;
  if (kimi) {
    JsonObject *lin = rf_json_object(c->o, "linear_attn_config");
    if (c->failed) return;
    if (!lin) {
      g_set_error(c->error, RF_ERROR, RF_ERROR_INPUT, "%s: 'linear_attn_config' missing", c->file);
      c->failed = TRUE;
      return;
    }
    Cfg lc = {lin, c->file, c->error, FALSE};
    a->lin_heads = cfg_int(&lc, "num_heads");
    a->lin_head_dim = cfg_int(&lc, "head_dim");
    a->conv_kernel = cfg_int(&lc, "short_conv_kernel_size");
    kda = cfg_layer_set(&lc, "kda_layers", a->layers, 1); /* 1-based, as Kimi Linear writes it */
    if (lc.failed) c->failed = TRUE;
  }
  if (!arch_sane(c, a)) goto out;
  *nlayers = (int)a->layers;
  T2(b, RF_KIND_EMBEDDING, -1, a->vocab, a->hidden, "model.embed_tokens.weight");
  for (int L = 0; L < a->layers + a->mtp_layers; L++) {
    gboolean mtp = L >= a->layers;
    b->mtp = mtp;
    char *pre = g_strdup_printf("model.layers.%d.", L);
    if (mtp) {
      T1(b, RF_KIND_NORM, L, a->hidden, "%senorm.weight", pre);
      T1(b, RF_KIND_NORM, L, a->hidden, "%shnorm.weight", pre);
      T2(b, RF_KIND_MTP_PROJ, L, a->hidden, 2 * a->hidden, "%seh_proj.weight", pre);
    }
    T1(b, RF_KIND_NORM, L, a->hidden, "%sinput_layernorm.weight", pre);
    if (kda && !mtp && kda[L]) {
      int64_t hd = a->lin_head_dim, n = a->lin_heads * hd;
      T2(b, RF_KIND_KDA_PROJ, L, n, a->hidden, "%sself_attn.q_proj.weight", pre);
      T2(b, RF_KIND_KDA_PROJ, L, n, a->hidden, "%sself_attn.k_proj.weight", pre);
      T2(b, RF_KIND_KDA_PROJ, L, n, a->hidden, "%sself_attn.v_proj.weight", pre);
      add_parts(b,
                add_tensor(b, RF_KIND_KDA_CONV, L, 0, 3, (int64_t[]){n, 1, a->conv_kernel},
                           "%sself_attn.q_conv1d.weight", pre),
                0, NULL, NULL);
      add_parts(b,
                add_tensor(b, RF_KIND_KDA_CONV, L, 0, 3, (int64_t[]){n, 1, a->conv_kernel},
                           "%sself_attn.k_conv1d.weight", pre),
                0, NULL, NULL);
      add_parts(b,
                add_tensor(b, RF_KIND_KDA_CONV, L, 0, 3, (int64_t[]){n, 1, a->conv_kernel},
                           "%sself_attn.v_conv1d.weight", pre),
                0, NULL, NULL);
      T2(b, RF_KIND_KDA_REPL, L, hd, a->hidden, "%sself_attn.f_a_proj.weight", pre);
      T2(b, RF_KIND_KDA_PROJ, L, n, hd, "%sself_attn.f_b_proj.weight", pre);
      T2(b, RF_KIND_KDA_PROJ, L, a->lin_heads, a->hidden, "%sself_attn.b_proj.weight", pre);
      T2(b, RF_KIND_KDA_REPL, L, hd, a->hidden, "%sself_attn.g_a_proj.weight", pre);
      T2(b, RF_KIND_KDA_PROJ, L, n, hd, "%sself_attn.g_b_proj.weight", pre);
      T1(b, RF_KIND_KDA_HEAD, L, a->lin_heads, "%sself_attn.A_log", pre);
      T1(b, RF_KIND_KDA_HEAD, L, n, "%sself_attn.dt_bias", pre);
      T1(b, RF_KIND_NORM, L, hd, "%sself_attn.o_norm.weight", pre);
      T2(b, RF_KIND_KDA_O, L, a->hidden, n, "%sself_attn.o_proj.weight", pre);
    } else {
      add_mla(b, a, L, pre, gated_attn);
    }
    T1(b, RF_KIND_NORM, L, a->hidden, "%spost_attention_layernorm.weight", pre);
    if (L < first_dense) {
      add_dense_mlp(b, a->hidden, dense_inter, L, pre, TRUE);
    } else {
      RfArch m = *a;
      m.dense_inter = 0; /* shared experts are n_shared x expert width */
      add_moe(b, &m, L, pre, "mlp.", "shared_experts", TRUE, TRUE);
    }
    if (mtp) T1(b, RF_KIND_NORM, L, a->hidden, "%sshared_head.norm.weight", pre);
    g_free(pre);
  }
  b->mtp = FALSE;
  T1(b, RF_KIND_NORM, -1, a->hidden, "model.norm.weight");
  T2(b, RF_KIND_LM_HEAD, -1, a->vocab, a->hidden, "lm_head.weight");
out:
  g_free(kda);
}

static void add_mamba(Builder *b, const RfArch *a, int L, const char *pre) {
  int64_t di = a->mamba_heads * a->mamba_head_dim, gs = a->mamba_groups * a->mamba_state;
  int64_t nh = a->mamba_heads;
  static const char *const in_tags[] = {"z", "x", "B", "C", "dt"};
  static const char *const conv_tags[] = {"x", "B", "C"};
  int64_t in_len[] = {di, di, gs, gs, nh}, conv_len[] = {di, gs, gs};
  add_parts(b,
            add_tensor(b, RF_KIND_MAMBA_IN, L, 0, 2, (int64_t[]){2 * di + 2 * gs + nh, a->hidden},
                       "%smixer.in_proj.weight", pre),
            5, in_len, in_tags);
  add_parts(b,
            add_tensor(b, RF_KIND_MAMBA_CONV, L, 0, 3, (int64_t[]){di + 2 * gs, 1, a->conv_kernel},
                       "%smixer.conv1d.weight", pre),
            3, conv_len, conv_tags);
  add_parts(b,
            add_tensor(b, RF_KIND_MAMBA_CONV, L, 0, 1, (int64_t[]){di + 2 * gs},
                       "%smixer.conv1d.bias", pre),
            3, conv_len, conv_tags);
  T1(b, RF_KIND_MAMBA_HEAD, L, nh, "%smixer.A_log", pre);
  T1(b, RF_KIND_MAMBA_HEAD, L, nh, "%smixer.D", pre);
  T1(b, RF_KIND_MAMBA_HEAD, L, nh, "%smixer.dt_bias", pre);
  T1(b, RF_KIND_MAMBA_NORM, L, di, "%smixer.norm.weight", pre);
  T2(b, RF_KIND_MAMBA_OUT, L, a->hidden, di, "%smixer.out_proj.weight", pre);
}

static void build_nemotron_h(Builder *b, Cfg *c, RfArch *a, int *nlayers) {
  a->hidden = cfg_int(c, "hidden_size");
  a->layers = cfg_int(c, "num_hidden_layers");
  a->heads = cfg_int(c, "num_attention_heads");
  a->kv_heads = cfg_int(c, "num_key_value_heads");
  a->head_dim = cfg_int_or(c, "head_dim", a->hidden / MAX(a->heads, 1));
  a->mamba_heads = cfg_int(c, "mamba_num_heads");
  a->mamba_head_dim = cfg_int(c, "mamba_head_dim");
  a->mamba_groups = cfg_int(c, "n_groups");
  a->mamba_state = cfg_int(c, "ssm_state_size");
  a->conv_kernel = cfg_int(c, "conv_kernel");
  a->dense_inter = cfg_int_or(c, "intermediate_size", 0);
  a->experts = cfg_int_or(c, "n_routed_experts", 0);
  a->top_k = cfg_int_or(c, "num_experts_per_tok", 0);
  a->expert_inter = cfg_int_or(c, "moe_intermediate_size", 0);
  a->moe_latent = cfg_int_or(c, "moe_latent_size", 0);
  int64_t shared_inter = cfg_int_or(c, "moe_shared_expert_intermediate_size", 0);
  a->vocab = cfg_int(c, "vocab_size");
  const char *pat = rf_json_string(c->o, "hybrid_override_pattern");
  if (!arch_sane(c, a)) return;
  if (!pat || (int64_t)strlen(pat) != a->layers) {
    g_set_error(c->error, RF_ERROR, RF_ERROR_INPUT,
                "%s: 'hybrid_override_pattern' missing or not num_hidden_layers long", c->file);
    c->failed = TRUE;
    return;
  }
  *nlayers = (int)a->layers;
  T2(b, RF_KIND_EMBEDDING, -1, a->vocab, a->hidden, "backbone.embeddings.weight");
  for (int L = 0; L < a->layers; L++) {
    char *pre = g_strdup_printf("backbone.layers.%d.", L);
    T1(b, RF_KIND_NORM, L, a->hidden, "%snorm.weight", pre);
    switch (pat[L]) {
    case 'M':
      add_mamba(b, a, L, pre);
      break;
    case '*': {
      int64_t q = a->heads * a->head_dim, kv = a->kv_heads * a->head_dim;
      T2(b, RF_KIND_ATTN_Q, L, q, a->hidden, "%smixer.q_proj.weight", pre);
      T2(b, RF_KIND_ATTN_K, L, kv, a->hidden, "%smixer.k_proj.weight", pre);
      T2(b, RF_KIND_ATTN_V, L, kv, a->hidden, "%smixer.v_proj.weight", pre);
      T2(b, RF_KIND_ATTN_O, L, a->hidden, q, "%smixer.o_proj.weight", pre);
      break;
    }
    case '-':
      T2(b, RF_KIND_DENSE_UP, L, a->dense_inter, a->hidden, "%smixer.up_proj.weight", pre);
      T2(b, RF_KIND_DENSE_DOWN, L, a->hidden, a->dense_inter, "%smixer.down_proj.weight", pre);
      break;
    case 'E': {
      /* relu2 experts: up + down only; shared expert likewise. */
      RfArch m = *a;
      m.shared_experts = shared_inter ? 1 : 0;
      m.dense_inter = shared_inter;
      add_moe(b, &m, L, pre, "mixer.", "shared_experts", FALSE, TRUE);
      break;
    }
    default:
      g_set_error(c->error, RF_ERROR, RF_ERROR_INPUT,
                  "%s: hybrid_override_pattern has '%c' (want M * - E)", c->file, pat[L]);
      c->failed = TRUE;
      g_free(pre);
      return;
    }
    g_free(pre);
  }
  T1(b, RF_KIND_NORM, -1, a->hidden, "backbone.norm_f.weight");
  T2(b, RF_KIND_LM_HEAD, -1, a->vocab, a->hidden, "lm_head.weight");
}

static void add_gdn(Builder *b, const RfArch *a, int L, const char *pre) {
  int64_t nk = a->lin_kv_heads * a->lin_head_dim; /* key heads x key dim */
  int64_t nv = a->lin_heads * a->head_dim;        /* value heads x value dim (head_dim reused) */
  static const char *const tags[] = {"q", "k", "v"};
  int64_t len[] = {nk, nk, nv};
  add_parts(b,
            add_tensor(b, RF_KIND_GDN_PROJ, L, 0, 2, (int64_t[]){2 * nk + nv, a->hidden},
                       "%slinear_attn.in_proj_qkv.weight", pre),
            3, len, tags);
  T2(b, RF_KIND_GDN_PROJ, L, nv, a->hidden, "%slinear_attn.in_proj_z.weight", pre);
  T2(b, RF_KIND_GDN_PROJ, L, a->lin_heads, a->hidden, "%slinear_attn.in_proj_b.weight", pre);
  T2(b, RF_KIND_GDN_PROJ, L, a->lin_heads, a->hidden, "%slinear_attn.in_proj_a.weight", pre);
  add_parts(b,
            add_tensor(b, RF_KIND_GDN_CONV, L, 0, 3, (int64_t[]){2 * nk + nv, 1, a->conv_kernel},
                       "%slinear_attn.conv1d.weight", pre),
            3, len, tags);
  T1(b, RF_KIND_GDN_HEAD, L, a->lin_heads, "%slinear_attn.dt_bias", pre);
  T1(b, RF_KIND_GDN_HEAD, L, a->lin_heads, "%slinear_attn.A_log", pre);
  T1(b, RF_KIND_NORM, L, a->head_dim, "%slinear_attn.norm.weight", pre);
  T2(b, RF_KIND_GDN_O, L, a->hidden, nv, "%slinear_attn.out_proj.weight", pre);
}

static void build_qwen3_next(Builder *b, Cfg *c, RfArch *a, int *nlayers) {
  a->hidden = cfg_int(c, "hidden_size");
  a->layers = cfg_int(c, "num_hidden_layers");
  a->heads = cfg_int(c, "num_attention_heads");
  a->kv_heads = cfg_int(c, "num_key_value_heads");
  a->head_dim = cfg_int(c, "head_dim");
  int64_t interval = cfg_int(c, "full_attention_interval");
  a->lin_kv_heads = cfg_int(c, "linear_num_key_heads");
  a->lin_head_dim = cfg_int(c, "linear_key_head_dim");
  a->lin_heads = cfg_int(c, "linear_num_value_heads");
  int64_t lin_vdim = cfg_int(c, "linear_value_head_dim");
  a->conv_kernel = cfg_int(c, "linear_conv_kernel_dim");
  a->experts = cfg_int(c, "num_experts");
  a->top_k = cfg_int(c, "num_experts_per_tok");
  a->expert_inter = cfg_int(c, "moe_intermediate_size");
  int64_t shared_inter = cfg_int_or(c, "shared_expert_intermediate_size", 0);
  a->vocab = cfg_int(c, "vocab_size");
  a->mtp_layers = cfg_int_or(c, "mtp_num_hidden_layers", 0);
  if (!arch_sane(c, a)) return;
  if (interval < 1) {
    g_set_error(c->error, RF_ERROR, RF_ERROR_INPUT, "%s: full_attention_interval must be >= 1",
                c->file);
    c->failed = TRUE;
    return;
  }
  *nlayers = (int)a->layers;
  RfArch moe = *a;
  moe.shared_experts = shared_inter ? 1 : 0;
  moe.dense_inter = shared_inter;
  RfArch gdn = *a;
  gdn.head_dim = lin_vdim;
  T2(b, RF_KIND_EMBEDDING, -1, a->vocab, a->hidden, "model.embed_tokens.weight");
  for (int L = 0; L < a->layers + a->mtp_layers; L++) {
    gboolean mtp = L >= a->layers;
    b->mtp = mtp;
    char *pre = mtp ? g_strdup_printf("mtp.layers.%d.", (int)(L - a->layers))
                    : g_strdup_printf("model.layers.%d.", L);
    T1(b, RF_KIND_NORM, L, a->hidden, "%sinput_layernorm.weight", pre);
    if (mtp || (L + 1) % interval == 0) {
      add_gqa(b, a, L, pre, TRUE);
      T1(b, RF_KIND_NORM, L, a->head_dim, "%sself_attn.q_norm.weight", pre);
      T1(b, RF_KIND_NORM, L, a->head_dim, "%sself_attn.k_norm.weight", pre);
    } else {
      add_gdn(b, &gdn, L, pre);
    }
    T1(b, RF_KIND_NORM, L, a->hidden, "%spost_attention_layernorm.weight", pre);
    add_moe(b, &moe, L, pre, "mlp.", "shared_expert", TRUE, FALSE);
    if (shared_inter)
      T2(b, RF_KIND_ROUTER, L, 1, a->hidden, "%smlp.shared_expert_gate.weight", pre);
    g_free(pre);
  }
  if (a->mtp_layers) {
    b->mtp = TRUE;
    T2(b, RF_KIND_MTP_PROJ, -1, a->hidden, 2 * a->hidden, "mtp.fc.weight");
    T1(b, RF_KIND_NORM, -1, a->hidden, "mtp.pre_fc_norm_embedding.weight");
    T1(b, RF_KIND_NORM, -1, a->hidden, "mtp.pre_fc_norm_hidden.weight");
    T1(b, RF_KIND_NORM, -1, a->hidden, "mtp.norm.weight");
    b->mtp = FALSE;
  }
  T1(b, RF_KIND_NORM, -1, a->hidden, "model.norm.weight");
  T2(b, RF_KIND_LM_HEAD, -1, a->vocab, a->hidden, "lm_head.weight");
}

/* Kind of a tensor in a plain listing, from its checkpoint name. */
static RfKind kind_from_name(const char *n, int ndim) {
  static const struct {
    const char *needle;
    RfKind kind;
  } rules[] = {
      {"embed", RF_KIND_EMBEDDING},
      {"lm_head", RF_KIND_LM_HEAD},
      {"experts.", RF_KIND_EXPERT_GATE},
      {"shared_expert", RF_KIND_SHARED_GATE},
      {"q_a_proj", RF_KIND_MLA_Q_A},
      {"kv_a_proj", RF_KIND_MLA_KV_A},
      {"q_b_proj", RF_KIND_MLA_Q_B},
      {"kv_b_proj", RF_KIND_MLA_KV_B},
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

static gboolean build_listing(Builder *b, JsonObject *root, const char *file, int *nlayers,
                              GError **error) {
  GList *names = json_object_get_members(root);
  names = g_list_sort(names, (GCompareFunc)g_strcmp0);
  int maxl = -1;
  for (GList *l = names; l; l = l->next) {
    const char *n = l->data;
    if (!strcmp(n, "__metadata__")) continue;
    JsonNode *node = json_object_get_member(root, n);
    JsonObject *o = JSON_NODE_HOLDS_OBJECT(node) ? json_node_get_object(node) : NULL;
    JsonArray *shape = rf_json_array(o, "shape");
    const char *dt = rf_json_string(o, "dtype");
    guint nd = shape ? json_array_get_length(shape) : 0;
    if (!shape || !dt || nd < 1 || nd > RF_MAX_DIMS) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                  "%s: tensor '%s' needs \"shape\" (1-%d dims) and \"dtype\"", file, n,
                  RF_MAX_DIMS);
      g_list_free(names);
      return FALSE;
    }
    int64_t sh[RF_MAX_DIMS], vol = 1;
    for (guint d = 0; d < nd; d++) {
      if (!rf_json_array_int(shape, d, 1, RF_MAX_ELEMS, &sh[d]) || (vol *= sh[d]) > RF_MAX_ELEMS) {
        g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                    "%s: tensor '%s' dim %u must be an integer >= 1 (at most 2^56 elements)", file,
                    n, d);
        g_list_free(names);
        return FALSE;
      }
    }
    if (!rf_dtype_parse(dt, &b->dtype, error)) {
      g_prefix_error(error, "%s: tensor '%s': ", file, n);
      g_list_free(names);
      return FALSE;
    }
    int layer = -1;
    const char *lp = strstr(n, "layers.");
    if (lp && g_ascii_isdigit(lp[7])) {
      guint64 v = g_ascii_strtoull(lp + 7, NULL, 10);
      layer = v < 100000 ? (int)v : -1;
    }
    if (layer > maxl) maxl = layer;
    add_parts(b, add_tensor(b, kind_from_name(n, (int)nd), layer, 0, (int)nd, sh, "%s", n), 0, NULL,
              NULL);
  }
  g_list_free(names);
  *nlayers = maxl + 1;
  return TRUE;
}

/* ---- public ---------------------------------------------------------------------------- */

static const char *const zoo_names[] = {
    "qwen3-235b-a22b", "qwen3-30b-a3b",     "deepseek-v3", "deepseek-v3-mtp", "nemotron-3-ultra",
    "kimi-k3",         "qwen3.8-2.4t-a95b", "tiny-moe",    "tiny-mla",        "tiny-hybrid",
    "tiny-kimi",       "tiny-next",         NULL};

const char *const *rf_zoo_names(void) {
  return zoo_names;
}

void rf_model_free(RfModel *m) {
  if (!m) return;
  for (uint32_t i = 0; i < m->ntensors; i++)
    g_free(m->tensors[i].name);
  g_free(m->tensors);
  g_free(m->parts);
  g_free(m->name);
  g_free(m->family);
  g_free(m);
}

RfModel *rf_model_from_json(const char *name, const char *json, gssize len, GError **error) {
  JsonParser *parser = json_parser_new();
  RfModel *m = NULL;
  GError *e = NULL;
  if (!json_parser_load_from_data(parser, json, len, &e)) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "%s: malformed JSON: %s", name, e->message);
    g_error_free(e);
    goto out;
  }
  JsonNode *root = json_parser_get_root(parser);
  if (!root || !JSON_NODE_HOLDS_OBJECT(root)) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "%s: expected a JSON object", name);
    goto out;
  }
  JsonObject *o = json_node_get_object(root);
  Builder b = {g_array_new(FALSE, FALSE, sizeof(RfTensor)),
               g_array_new(FALSE, FALSE, sizeof(RfPart)), RF_DT_BF16, FALSE};
  m = g_new0(RfModel, 1);
  m->name = g_strdup(name);
  gboolean ok = TRUE;
  if (json_object_has_member(o, "model_type")) {
    const char *mt = rf_json_string(o, "model_type");
    const char *tdt = NULL;
    Cfg c = {o, name, error, FALSE};
    if (json_object_has_member(o, "torch_dtype") &&
        !rf_json_node_string(json_object_get_member(o, "torch_dtype"), &tdt)) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "%s: 'torch_dtype' must be a string", name);
      ok = FALSE;
    } else if (tdt && !rf_dtype_parse(tdt, &b.dtype, error)) {
      ok = FALSE;
    } else if (!g_strcmp0(mt, "qwen3_moe") || !g_strcmp0(mt, "qwen3")) {
      m->family = g_strdup("qwen3_moe");
      build_qwen3_moe(&b, &c, &m->arch, &m->nlayers);
    } else if (!g_strcmp0(mt, "qwen3_next")) {
      m->family = g_strdup("qwen3_next");
      build_qwen3_next(&b, &c, &m->arch, &m->nlayers);
    } else if (!g_strcmp0(mt, "deepseek_v3") || !g_strcmp0(mt, "kimi_k2")) {
      m->family = g_strdup("deepseek_v3");
      build_deepseek(&b, &c, &m->arch, &m->nlayers, FALSE);
    } else if (!g_strcmp0(mt, "kimi_linear") || !g_strcmp0(mt, "kimi")) {
      m->family = g_strdup("kimi");
      build_deepseek(&b, &c, &m->arch, &m->nlayers, TRUE);
    } else if (!g_strcmp0(mt, "nemotron_h")) {
      m->family = g_strdup("nemotron_h");
      build_nemotron_h(&b, &c, &m->arch, &m->nlayers);
    } else {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                  "%s: unsupported model_type '%s' (qwen3_moe, qwen3_next, deepseek_v3, "
                  "kimi_linear, nemotron_h)",
                  name, mt ? mt : "?");
      ok = FALSE;
    }
    if (c.failed) ok = FALSE;
  } else {
    m->family = g_strdup("listing");
    ok = build_listing(&b, o, name, &m->nlayers, error);
  }
  if (ok && b.tensors->len == 0) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "%s: no tensors", name);
    ok = FALSE;
  }
  for (guint i = 0; ok && i < b.tensors->len; i++) {
    RfTensor *t = &g_array_index(b.tensors, RfTensor, i);
    int64_t vol = 1;
    for (int d = 0; d < t->ndim && ok; d++) {
      if (t->shape[d] < 1 || vol > RF_MAX_ELEMS / t->shape[d]) {
        g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                    "%s: tensor %s has an empty dim or more than 2^56 elements (check the config)",
                    name, t->name);
        ok = FALSE;
      }
      vol *= t->shape[d];
    }
  }
  for (guint i = 0; ok && i < b.parts->len; i++) {
    const RfPart *p = &g_array_index(b.parts, RfPart, i);
    if (p->shape[0] < 1) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                  "%s: %s has an empty segment '%s' (check the config)", name,
                  g_array_index(b.tensors, RfTensor, p->tensor).name, p->tag);
      ok = FALSE;
    }
  }
  m->ntensors = b.tensors->len;
  m->tensors = (RfTensor *)g_array_free(b.tensors, FALSE);
  m->nparts = b.parts->len;
  m->parts = (RfPart *)g_array_free(b.parts, FALSE);
  if (!ok) {
    rf_model_free(m);
    m = NULL;
  }
out:
  g_object_unref(parser);
  return m;
}

RfModel *rf_model_load(const char *name_or_path, GError **error) {
  char *path;
  char *label;
  if (strchr(name_or_path, '/') || g_str_has_suffix(name_or_path, ".json")) {
    path = rf_data_resolve(name_or_path, "model/configs", ".json");
    label = g_path_get_basename(name_or_path);
    if (g_str_has_suffix(label, ".json")) label[strlen(label) - 5] = 0;
  } else {
    gboolean known = FALSE;
    for (int i = 0; zoo_names[i]; i++)
      known |= !strcmp(zoo_names[i], name_or_path);
    if (!known) {
      char *list = g_strjoinv(", ", (char **)zoo_names);
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                  "unknown model '%s' (known: %s; or a path to a config.json)", name_or_path, list);
      g_free(list);
      return NULL;
    }
    path = rf_data_resolve(name_or_path, "model/configs", ".json");
    label = g_strdup(name_or_path);
  }
  char *text = NULL;
  gsize len = 0;
  GError *e = NULL;
  RfModel *m = NULL;
  if (!g_file_get_contents(path, &text, &len, &e)) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "cannot read model '%s': %s", name_or_path,
                e->message);
    g_error_free(e);
  } else {
    m = rf_model_from_json(label, text, (gssize)len, error);
  }
  g_free(text);
  g_free(path);
  g_free(label);
  return m;
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

int64_t rf_part_elems(const RfPart *p) {
  int64_t v = 1;
  for (int d = 0; d < p->ndim; d++)
    v *= p->shape[d];
  return v;
}

int64_t rf_model_params(const RfModel *m) {
  int64_t n = 0;
  for (uint32_t i = 0; i < m->ntensors; i++)
    n += rf_tensor_elems(&m->tensors[i]);
  return n;
}

int64_t rf_model_bytes(const RfModel *m) {
  int64_t n = 0;
  for (uint32_t i = 0; i < m->ntensors; i++)
    n += rf_tensor_elems(&m->tensors[i]) * rf_dtype_size(m->tensors[i].dtype);
  return n;
}

int64_t rf_model_checkpoint_tensors(const RfModel *m) {
  int64_t n = 0;
  for (uint32_t i = 0; i < m->ntensors; i++)
    n += rf_tensor_count(&m->tensors[i]);
  return n;
}

char *rf_tensor_name(const RfTensor *t, int64_t expert) {
  if (t->nexperts <= 0) return g_strdup(t->name);
  char buf[32];
  g_snprintf(buf, sizeof buf, "%lld", (long long)expert);
  GString *s = g_string_new(t->name);
  g_string_replace(s, "{e}", buf, 1);
  return g_string_free(s, FALSE);
}
