#include "zoo.h"
#include "datafile.h"
#include "error.h"

#include <json-glib/json-glib.h>
#include <stdarg.h>
#include <string.h>

#include "jsonutil.h"

/* ---- builder ---------------------------------------------------------------------------- */

typedef struct {
  GArray *tensors;  /* RfTensor */
  GArray *parts;    /* RfPart */
  GArray *ckpt;     /* RfTensor: checkpoint entries a family wrote itself */
  GArray *own_ckpt; /* guint8 per tensor: 1 when the family wrote its checkpoint form */
  RfDtype dtype;
  gboolean mtp;   /* tensors added now belong to the MTP block */
  gboolean mxfp4; /* gpt-oss experts published in MXFP4 */
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
  guint8 own = 0;
  g_array_append_val(b->own_ckpt, own);
  return b->tensors->len - 1;
}

/* A checkpoint-only entry (packed blocks, scales) the family writes itself. */
static void add_ckpt(Builder *b, RfDtype dt, int layer, int ndim, const int64_t *shape,
                     const char *fmt, ...) G_GNUC_PRINTF(6, 7);

static void add_ckpt(Builder *b, RfDtype dt, int layer, int ndim, const int64_t *shape,
                     const char *fmt, ...) {
  RfTensor t = {0};
  va_list ap;
  va_start(ap, fmt);
  t.name = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  t.ndim = ndim;
  memcpy(t.shape, shape, sizeof(int64_t) * ndim);
  t.dtype = dt;
  t.kind = RF_KIND_OTHER;
  t.layer = layer;
  t.mtp = b->mtp;
  g_array_append_val(b->ckpt, t);
}

/* Split tensor ti along dim d into segments of the given lengths (a whole part when n == 0). */
static void add_parts_dim(Builder *b, uint32_t ti, int d, int n, const int64_t *len,
                          const char *const *tag) {
  const RfTensor *t = &g_array_index(b->tensors, RfTensor, ti);
  int64_t off = 0;
  for (int i = 0; i < (n ? n : 1); i++) {
    RfPart p = {0};
    p.tensor = ti;
    p.ndim = t->ndim;
    memcpy(p.shape, t->shape, sizeof(int64_t) * t->ndim);
    p.seg_dim = d;
    p.seg_off = off;
    p.tag = "";
    if (n) {
      p.shape[d] = len[i];
      p.tag = tag[i];
      off += len[i];
    }
    g_array_append_val(b->parts, p);
  }
}

static void add_parts(Builder *b, uint32_t ti, int n, const int64_t *len, const char *const *tag) {
  add_parts_dim(b, ti, 0, n, len, tag);
}

#define T1(b, kind, layer, d0, ...)                                                                \
  add_parts(b, add_tensor(b, kind, layer, 0, 1, (int64_t[]){d0}, __VA_ARGS__), 0, NULL, NULL)
#define T2(b, kind, layer, d0, d1, ...)                                                            \
  add_parts(b, add_tensor(b, kind, layer, 0, 2, (int64_t[]){d0, d1}, __VA_ARGS__), 0, NULL, NULL)
#define CK(b, dt, layer, ndim, shape, ...) add_ckpt(b, dt, layer, ndim, shape, __VA_ARGS__)
#define TE(b, kind, layer, e, d0, d1, ...)                                                         \
  add_parts(b, add_tensor(b, kind, layer, (int)(e), 3, (int64_t[]){e, d0, d1}, __VA_ARGS__), 0,    \
            NULL, NULL)

/* ---- config access --------------------------------------------------------------------- */

typedef struct {
  JsonObject *o;
  const char *file;
  GError **error;
  gboolean failed;
  const char *moe_type; /* the model_type when its family has routed experts, else NULL */
} Cfg;

/* Dims, counts and sizes of a config: integers in [0, 2^24]. Real configs stay far below (the
 * largest vocabularies are ~2^18), and it keeps every product a builder forms (heads x head
 * dim, 2 x d_inner + ...) far from overflow before the tensor volumes are checked. */
#define CFG_MAX (INT64_C(1) << 24)

static G_GNUC_PRINTF(3, 4) void cfg_fail(Cfg *c, RfError code, const char *fmt, ...) {
  if (c->failed) return;
  va_list ap;
  va_start(ap, fmt);
  char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error(c->error, RF_ERROR, code, "%s: %s", c->file, msg);
  g_free(msg);
  c->failed = TRUE;
}

static gboolean cfg_has(Cfg *c, const char *key) {
  JsonNode *n = json_object_get_member(c->o, key);
  return n && !JSON_NODE_HOLDS_NULL(n);
}

static int64_t cfg_int(Cfg *c, const char *key) {
  if (c->failed) return 0;
  int64_t v;
  JsonNode *n = json_object_get_member(c->o, key);
  if (!rf_json_node_int(n, 0, CFG_MAX, &v)) {
    if (n && JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_INT64)
      cfg_fail(c, RF_ERROR_LIMIT, "'%s' is %lld, outside 0..%lld", key,
               (long long)json_node_get_int(n), (long long)CFG_MAX);
    else
      cfg_fail(c, RF_ERROR_INPUT, "'%s' missing or not an integer in 0..%lld", key,
               (long long)CFG_MAX);
    return 0;
  }
  return v;
}

static int64_t cfg_int_or(Cfg *c, const char *key, int64_t def) {
  return cfg_has(c, key) ? cfg_int(c, key) : def;
}

/* The first of keys the config has (names differ between families), or def; def < 0: required,
 * and the error names the first key. */
static int64_t cfg_any(Cfg *c, const char *const *keys, int64_t def) {
  for (int i = 0; keys[i]; i++)
    if (cfg_has(c, keys[i])) return cfg_int(c, keys[i]);
  if (def >= 0) return def;
  return cfg_int(c, keys[0]);
}

/* A dimension that sizes tensors: 0 is refused where the config writes it (a missing key keeps
 * the family's default); why says what it sizes. */
static void cfg_positive(Cfg *c, const char *const *keys, int64_t v, const char *why) {
  if (c->failed || v > 0) return;
  for (int i = 0; keys[i]; i++)
    if (cfg_has(c, keys[i])) {
      cfg_fail(c, RF_ERROR_INPUT, "'%s' is 0 (want >= 1: %s)", keys[i], why);
      return;
    }
}

static gboolean cfg_bool_or(Cfg *c, const char *key, gboolean def) {
  JsonNode *n = json_object_get_member(c->o, key);
  if (!n || JSON_NODE_HOLDS_NULL(n) || c->failed) return def;
  if (!JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_BOOLEAN) {
    cfg_fail(c, RF_ERROR_INPUT, "'%s' must be true or false", key);
    return def;
  }
  return json_node_get_boolean(n);
}

/* Integer list member as a membership mask over [0, n); offset subtracts (1-based lists). */
static gboolean *cfg_layer_set(Cfg *c, const char *key, int64_t n, int offset) {
  gboolean *set = g_new0(gboolean, n > 0 ? n : 1);
  JsonNode *node = json_object_get_member(c->o, key);
  if (!node || c->failed) return set;
  if (JSON_NODE_TYPE(node) != JSON_NODE_ARRAY) {
    cfg_fail(c, RF_ERROR_INPUT, "'%s' must be a list of layer indices", key);
    return set;
  }
  JsonArray *a = json_node_get_array(node);
  for (guint i = 0; i < json_array_get_length(a); i++) {
    int64_t v;
    if (!rf_json_array_int(a, i, offset, n - 1 + offset, &v)) {
      cfg_fail(c, RF_ERROR_INPUT, "'%s' entry %u is not a layer in %d..%lld", key, i, offset,
               (long long)(n - 1 + offset));
      return set;
    }
    set[v - offset] = TRUE;
  }
  return set;
}

/* A list of strings, each one of names[] (its index in out[], n long); FALSE + error else. */
static int *cfg_name_list(Cfg *c, const char *key, const char *const *names, int64_t *n) {
  JsonArray *a = rf_json_array(c->o, key);
  *n = a ? json_array_get_length(a) : 0;
  if (!a || c->failed) return NULL;
  int *out = g_new0(int, *n ? *n : 1);
  for (guint i = 0; i < *n; i++) {
    const char *s = NULL;
    int k = -1;
    if (rf_json_node_string(json_array_get_element(a, i), &s))
      for (int j = 0; names[j] && k < 0; j++)
        if (!strcmp(s, names[j])) k = j;
    if (k < 0) {
      GString *want = g_string_new(NULL);
      for (int j = 0; names[j]; j++)
        g_string_append_printf(want, "%s%s", j ? ", " : "", names[j]);
      cfg_fail(c, RF_ERROR_INPUT, "'%s' entry %u is not one of %s", key, i, want->str);
      g_string_free(want, TRUE);
      g_free(out);
      return NULL;
    }
    out[i] = k;
  }
  return out;
}

/* ---- the keys every family shares --------------------------------------------------------- */

/* Names of one number across families (first match wins). */
static const char *const K_HIDDEN[] = {"hidden_size", NULL};
static const char *const K_LAYERS[] = {"num_hidden_layers", NULL};
static const char *const K_HEADS[] = {"num_attention_heads", NULL};
static const char *const K_KV[] = {"num_key_value_heads", NULL};
static const char *const K_HEAD_DIM[] = {"head_dim", "attention_head_dim", NULL};
static const char *const K_VOCAB[] = {"vocab_size", NULL};
static const char *const K_EXPERTS[] = {"num_experts", "n_routed_experts", "num_local_experts",
                                        NULL};
static const char *const K_TOPK[] = {"num_experts_per_tok", "num_experts_per_token",
                                     "experts_per_token", NULL};
static const char *const K_SHARED[] = {"n_shared_experts", "num_shared_experts", NULL};
static const char *const K_EXPERT_INTER[] = {"moe_intermediate_size", NULL};
static const char *const K_INTER[] = {"intermediate_size", NULL};
static const char *const K_LATENT[] = {"moe_latent_size", "routed_expert_hidden_size", NULL};
static const char *const K_MTP[] = {"num_nextn_predict_layers", "mtp_num_hidden_layers", NULL};
static const char *const K_NOPE[] = {"qk_nope_head_dim", NULL};
static const char *const K_ROPE[] = {"qk_rope_head_dim", NULL};

enum {
  COMMON_NO_LAYERS = 1 << 0, /* the family lists its layers instead of num_hidden_layers */
  COMMON_MOE = 1 << 1,       /* routed experts are required */
  COMMON_DENSE = 1 << 2,     /* intermediate_size is required */
};

/* Read the common keys into a, then check them: every count a builder loops over or multiplies
 * is in range before any shape is formed. A MoE model_type (c->moe_type) needs routed experts:
 * without them it would be built as a dense model of another size. */
static void read_common(Cfg *c, RfArch *a, int flags) {
  if (c->moe_type) flags |= COMMON_MOE;
  a->hidden = cfg_any(c, K_HIDDEN, -1);
  a->layers = flags & COMMON_NO_LAYERS ? 0 : cfg_any(c, K_LAYERS, -1);
  a->heads = cfg_any(c, K_HEADS, -1);
  a->kv_heads = cfg_any(c, K_KV, a->heads);
  a->head_dim = cfg_any(c, K_HEAD_DIM, a->heads ? a->hidden / MAX(a->heads, 1) : 0);
  a->vocab = cfg_any(c, K_VOCAB, -1);
  a->experts = cfg_any(c, K_EXPERTS, 0);
  if (flags & COMMON_MOE) { /* written as 0, or missing */
    cfg_positive(c, K_EXPERTS, a->experts, "the routed experts of a MoE model");
    if (!a->experts)
      cfg_fail(c, RF_ERROR_INPUT,
               "model_type '%s' has routed experts, but 'num_experts' (or 'n_routed_experts', "
               "'num_local_experts') is missing",
               c->moe_type ? c->moe_type : "?");
  }
  a->top_k = cfg_any(c, K_TOPK, a->experts ? -1 : 0);
  a->shared_experts = cfg_any(c, K_SHARED, 0);
  a->expert_inter = cfg_any(c, K_EXPERT_INTER, 0);
  a->dense_inter = cfg_any(c, K_INTER, flags & COMMON_DENSE ? -1 : 0);
  a->moe_latent = cfg_any(c, K_LATENT, 0);
  a->mtp_layers = cfg_any(c, K_MTP, 0);
  if (a->experts) cfg_positive(c, K_EXPERT_INTER, a->expert_inter, "the routed experts' width");
  cfg_positive(c, K_LATENT, a->moe_latent,
               "the routed experts' latent width; leave it out for none");
}

/* Counts that size loops and stacked entries; call once the family filled in a->layers. */
static gboolean arch_check(Cfg *c, const RfArch *a) {
  if (c->failed) return FALSE;
  if (a->layers < 1 || a->layers > 100000)
    cfg_fail(c, a->layers < 1 ? RF_ERROR_INPUT : RF_ERROR_LIMIT,
             "%lld decoder layers (want 1..100000)", (long long)a->layers);
  else if (a->hidden < 1 || a->vocab < 1 || a->heads < 1)
    cfg_fail(c, RF_ERROR_INPUT, "hidden_size, vocab_size and num_attention_heads must be >= 1");
  else if (a->kv_heads < 1 || a->kv_heads > a->heads)
    cfg_fail(c, RF_ERROR_INPUT, "num_key_value_heads %lld is not in 1..%lld (the attention heads)",
             (long long)a->kv_heads, (long long)a->heads);
  else if (a->experts > (1 << 20))
    cfg_fail(c, RF_ERROR_LIMIT, "%lld experts (at most %d)", (long long)a->experts, 1 << 20);
  else if (a->experts && (a->top_k < 1 || a->top_k > a->experts))
    cfg_fail(c, RF_ERROR_INPUT, "%lld experts per token is not in 1..%lld (the routed experts)",
             (long long)a->top_k, (long long)a->experts);
  else if (a->mtp_layers > 64)
    cfg_fail(c, RF_ERROR_LIMIT, "%lld MTP layers (at most 64)", (long long)a->mtp_layers);
  return !c->failed;
}

/* ---- shared pieces of architectures ----------------------------------------------------- */

/* q, k, v, o (q, k, v consecutive: the layout rules rely on it); gated: q_proj carries a
 * per-head output gate (2 x heads x head_dim rows); bias: q/k/v/o biases after o_proj. */
static void add_gqa(Builder *b, const RfArch *a, int L, const char *pre, const char *blk,
                    gboolean gated, gboolean bias) {
  int64_t q = a->heads * a->head_dim, kv = a->kv_heads * a->head_dim;
  int64_t qrows = gated ? 2 * q : q;
  T2(b, RF_KIND_ATTN_Q, L, qrows, a->hidden, "%s%sq_proj.weight", pre, blk);
  T2(b, RF_KIND_ATTN_K, L, kv, a->hidden, "%s%sk_proj.weight", pre, blk);
  T2(b, RF_KIND_ATTN_V, L, kv, a->hidden, "%s%sv_proj.weight", pre, blk);
  T2(b, RF_KIND_ATTN_O, L, a->hidden, q, "%s%so_proj.weight", pre, blk);
  if (!bias) return;
  /* consecutive, like the weights: the layout rules rely on it */
  T1(b, RF_KIND_ATTN_Q_BIAS, L, qrows, "%s%sq_proj.bias", pre, blk);
  T1(b, RF_KIND_ATTN_K_BIAS, L, kv, "%s%sk_proj.bias", pre, blk);
  T1(b, RF_KIND_ATTN_V_BIAS, L, kv, "%s%sv_proj.bias", pre, blk);
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

/* Kimi Delta Attention. */
static void add_kda(Builder *b, const RfArch *a, int L, const char *pre) {
  int64_t hd = a->lin_head_dim, n = a->lin_heads * hd;
  T2(b, RF_KIND_KDA_PROJ, L, n, a->hidden, "%sself_attn.q_proj.weight", pre);
  T2(b, RF_KIND_KDA_PROJ, L, n, a->hidden, "%sself_attn.k_proj.weight", pre);
  T2(b, RF_KIND_KDA_PROJ, L, n, a->hidden, "%sself_attn.v_proj.weight", pre);
  static const char *const conv[] = {"q", "k", "v"};
  for (int i = 0; i < 3; i++)
    add_parts(b,
              add_tensor(b, RF_KIND_KDA_CONV, L, 0, 3, (int64_t[]){n, 1, a->conv_kernel},
                         "%sself_attn.%s_conv1d.weight", pre, conv[i]),
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
}

static void add_dense_mlp(Builder *b, int64_t h, int64_t inter, int L, const char *pre,
                          gboolean gated) {
  if (gated) T2(b, RF_KIND_DENSE_GATE, L, inter, h, "%smlp.gate_proj.weight", pre);
  T2(b, RF_KIND_DENSE_UP, L, inter, h, "%smlp.up_proj.weight", pre);
  T2(b, RF_KIND_DENSE_DOWN, L, h, inter, "%smlp.down_proj.weight", pre);
}

/* Checkpoint names of a family's MoE block. */
typedef struct {
  const char *blk;    /* "mlp." */
  const char *router; /* "gate.weight" */
  const char *bias;   /* router score bias, or NULL */
  const char *shared; /* shared expert module ("shared_expert"), or NULL for none */
  const char *w[3];   /* gate, up, down projections of an expert */
  gboolean gated;     /* FALSE: relu2 experts, up + down only */
} MoeNames;

/* Routed experts (stacked), router, shared experts. lat: expert width (hidden or MoE latent). */
static void add_moe(Builder *b, const RfArch *a, int L, const char *pre, const MoeNames *nm) {
  int64_t E = a->experts, I = a->expert_inter, h = a->hidden;
  int64_t lat = a->moe_latent ? a->moe_latent : h;
  const char *blk = nm->blk;
  T2(b, RF_KIND_ROUTER, L, E, h, "%s%s%s", pre, blk, nm->router);
  if (nm->bias) T1(b, RF_KIND_ROUTER, L, E, "%s%s%s", pre, blk, nm->bias);
  if (a->moe_latent) {
    T2(b, RF_KIND_MOE_LATENT, L, lat, h, "%s%sfc1_latent_proj.weight", pre, blk);
    T2(b, RF_KIND_MOE_LATENT, L, h, lat, "%s%sfc2_latent_proj.weight", pre, blk);
  }
  if (nm->gated)
    TE(b, RF_KIND_EXPERT_GATE, L, E, I, lat, "%s%sexperts.{e}.%s.weight", pre, blk, nm->w[0]);
  TE(b, RF_KIND_EXPERT_UP, L, E, I, lat, "%s%sexperts.{e}.%s.weight", pre, blk, nm->w[1]);
  TE(b, RF_KIND_EXPERT_DOWN, L, E, lat, I, "%s%sexperts.{e}.%s.weight", pre, blk, nm->w[2]);
  if (a->shared_experts && nm->shared) {
    int64_t si = a->dense_inter ? a->dense_inter : a->shared_experts * I;
    const char *sn = nm->shared;
    if (nm->gated) T2(b, RF_KIND_SHARED_GATE, L, si, h, "%s%s%s.gate_proj.weight", pre, blk, sn);
    T2(b, RF_KIND_SHARED_UP, L, si, h, "%s%s%s.up_proj.weight", pre, blk, sn);
    T2(b, RF_KIND_SHARED_DOWN, L, h, si, "%s%s%s.down_proj.weight", pre, blk, sn);
  }
}

/* DeepSeek-style MTP module head: embedding norm, hidden norm, eh_proj. */
static void add_mtp_head(Builder *b, const RfArch *a, int L, const char *pre) {
  T1(b, RF_KIND_NORM, L, a->hidden, "%senorm.weight", pre);
  T1(b, RF_KIND_NORM, L, a->hidden, "%shnorm.weight", pre);
  T2(b, RF_KIND_MTP_PROJ, L, a->hidden, 2 * a->hidden, "%seh_proj.weight", pre);
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

/* Gated DeltaNet. fused (Qwen3-Next): the checkpoint holds in_proj_qkvz, grouped per key head
 * [q_g | k_g | v_g | z_g], and in_proj_ba, grouped [b_g | a_g]; whole key-head groups go to a
 * rank, so both split by rows. Qwen3.5 keeps in_proj_qkv (q | k | v), in_proj_z, _b and _a. */
static void add_gdn(Builder *b, const RfArch *a, int L, const char *pre, gboolean fused) {
  int64_t nk = a->lin_kv_heads * a->lin_head_dim; /* key heads x key dim */
  int64_t nv = a->lin_heads * a->head_dim;        /* value heads x value dim (head_dim reused) */
  static const char *const tags[] = {"q", "k", "v"};
  int64_t len[] = {nk, nk, nv};
  if (fused) {
    T2(b, RF_KIND_GDN_PROJ, L, 2 * nk + 2 * nv, a->hidden, "%slinear_attn.in_proj_qkvz.weight",
       pre);
    T2(b, RF_KIND_GDN_PROJ, L, 2 * a->lin_heads, a->hidden, "%slinear_attn.in_proj_ba.weight", pre);
  } else {
    add_parts(b,
              add_tensor(b, RF_KIND_GDN_PROJ, L, 0, 2, (int64_t[]){2 * nk + nv, a->hidden},
                         "%slinear_attn.in_proj_qkv.weight", pre),
              3, len, tags);
    T2(b, RF_KIND_GDN_PROJ, L, nv, a->hidden, "%slinear_attn.in_proj_z.weight", pre);
    T2(b, RF_KIND_GDN_PROJ, L, a->lin_heads, a->hidden, "%slinear_attn.in_proj_b.weight", pre);
    T2(b, RF_KIND_GDN_PROJ, L, a->lin_heads, a->hidden, "%slinear_attn.in_proj_a.weight", pre);
  }
  add_parts(b,
            add_tensor(b, RF_KIND_GDN_CONV, L, 0, 3, (int64_t[]){2 * nk + nv, 1, a->conv_kernel},
                       "%slinear_attn.conv1d.weight", pre),
            3, len, tags);
  T1(b, RF_KIND_GDN_HEAD, L, a->lin_heads, "%slinear_attn.dt_bias", pre);
  T1(b, RF_KIND_GDN_HEAD, L, a->lin_heads, "%slinear_attn.A_log", pre);
  T1(b, RF_KIND_NORM, L, a->head_dim, "%slinear_attn.norm.weight", pre);
  T2(b, RF_KIND_GDN_O, L, a->hidden, nv, "%slinear_attn.out_proj.weight", pre);
}

/* ---- families -------------------------------------------------------------------------- */

/* Llama, Mistral, Qwen3 (dense and MoE), Mixtral, MiniMax-M2, GLM-4.5: GQA decoders. */
typedef struct {
  gboolean qk_norm;      /* per-head q_norm / k_norm (Qwen3) */
  gboolean qk_norm_full; /* q_norm over all q rows, k_norm over all k rows (MiniMax-M2) */
  gboolean attn_bias;    /* q, k, v biases (GLM-4.5) */
  MoeNames moe;
} GqaFamily;

static void build_gqa(Builder *b, Cfg *c, RfArch *a, int *nlayers, const GqaFamily *f) {
  read_common(c, a, 0);
  /* Mixtral and MiniMax-M2 name the expert width intermediate_size */
  if (a->experts && !a->expert_inter) a->expert_inter = a->dense_inter;
  int64_t step = cfg_int_or(c, "decoder_sparse_step", 1);
  int64_t first_dense = cfg_int_or(c, "first_k_dense_replace", 0);
  gboolean tie = cfg_bool_or(c, "tie_word_embeddings", FALSE);
  gboolean *dense = NULL;
  if (!arch_check(c, a)) return;
  if (step < 1)
    cfg_fail(c, RF_ERROR_INPUT, "'decoder_sparse_step' is %lld (want >= 1)", (long long)step);
  else if (a->experts && a->expert_inter < 1)
    cfg_fail(c, RF_ERROR_INPUT, "'moe_intermediate_size' missing (needed with experts)");
  else if (!a->experts && a->dense_inter < 1)
    cfg_fail(c, RF_ERROR_INPUT, "'intermediate_size' missing (needed without experts)");
  dense = cfg_layer_set(c, "mlp_only_layers", a->layers, 0);
  if (c->failed) goto out;
  *nlayers = (int)a->layers;
  T2(b, RF_KIND_EMBEDDING, -1, a->vocab, a->hidden, "model.embed_tokens.weight");
  for (int L = 0; L < a->layers + a->mtp_layers; L++) {
    gboolean mtp = L >= a->layers;
    b->mtp = mtp;
    char *pre = g_strdup_printf("model.layers.%d.", L);
    if (mtp) add_mtp_head(b, a, L, pre);
    T1(b, RF_KIND_NORM, L, a->hidden, "%sinput_layernorm.weight", pre);
    add_gqa(b, a, L, pre, "self_attn.", FALSE, f->attn_bias);
    if (f->qk_norm) {
      T1(b, RF_KIND_NORM, L, a->head_dim, "%sself_attn.q_norm.weight", pre);
      T1(b, RF_KIND_NORM, L, a->head_dim, "%sself_attn.k_norm.weight", pre);
    }
    if (f->qk_norm_full) {
      T1(b, RF_KIND_ATTN_Q_NORM, L, a->heads * a->head_dim, "%sself_attn.q_norm.weight", pre);
      T1(b, RF_KIND_ATTN_K_NORM, L, a->kv_heads * a->head_dim, "%sself_attn.k_norm.weight", pre);
    }
    T1(b, RF_KIND_NORM, L, a->hidden, "%spost_attention_layernorm.weight", pre);
    if (!mtp && (dense[L] || a->experts == 0 || (L + 1) % step != 0 || L < first_dense))
      add_dense_mlp(b, a->hidden, a->dense_inter, L, pre, TRUE);
    else
      add_moe(b, a, L, pre, &f->moe);
    if (mtp) T1(b, RF_KIND_NORM, L, a->hidden, "%sshared_head.norm.weight", pre);
    g_free(pre);
  }
  b->mtp = FALSE;
  T1(b, RF_KIND_NORM, -1, a->hidden, "model.norm.weight");
  if (!tie) T2(b, RF_KIND_LM_HEAD, -1, a->vocab, a->hidden, "lm_head.weight");
out:
  g_free(dense);
}

static const MoeNames QWEN_MOE = {
    "mlp.", "gate.weight", NULL, "shared_expert", {"gate_proj", "up_proj", "down_proj"}, TRUE};
static const MoeNames DEEPSEEK_MOE = {"mlp.",
                                      "gate.weight",
                                      "gate.e_score_correction_bias",
                                      "shared_experts",
                                      {"gate_proj", "up_proj", "down_proj"},
                                      TRUE};
static const MoeNames MIXTRAL_MOE = {"block_sparse_moe.", "gate.weight", NULL, NULL,
                                     {"w1", "w3", "w2"},  TRUE};
static const MoeNames MINIMAX_MOE = {
    "block_sparse_moe.", "gate.weight", "e_score_correction_bias", NULL, {"w1", "w3", "w2"}, TRUE};

static void build_qwen3(Builder *b, Cfg *c, RfArch *a, int *nl) {
  GqaFamily f = {.qk_norm = TRUE, .moe = QWEN_MOE};
  a->shared_experts = 0; /* Qwen3 MoE has none */
  build_gqa(b, c, a, nl, &f);
}

static void build_llama(Builder *b, Cfg *c, RfArch *a, int *nl) {
  GqaFamily f = {.moe = QWEN_MOE};
  build_gqa(b, c, a, nl, &f);
}

static void build_mixtral(Builder *b, Cfg *c, RfArch *a, int *nl) {
  GqaFamily f = {.moe = MIXTRAL_MOE};
  build_gqa(b, c, a, nl, &f);
}

static void build_minimax_m2(Builder *b, Cfg *c, RfArch *a, int *nl) {
  /* The published checkpoint holds no MTP modules (use_mtp describes training). */
  GqaFamily f = {.qk_norm_full = cfg_bool_or(c, "use_qk_norm", TRUE),
                 .moe = cfg_bool_or(c, "use_routing_bias", TRUE) ? MINIMAX_MOE : MIXTRAL_MOE};
  build_gqa(b, c, a, nl, &f);
  a->mtp_layers = 0;
}

static void build_glm4_moe(Builder *b, Cfg *c, RfArch *a, int *nl) {
  GqaFamily f = {.qk_norm = cfg_bool_or(c, "use_qk_norm", FALSE),
                 .attn_bias = cfg_bool_or(c, "attention_bias", TRUE),
                 .moe = DEEPSEEK_MOE};
  build_gqa(b, c, a, nl, &f);
}

/* DeepSeek-V3 / V3.2, Kimi K2, Kimi Linear, GLM-5: MLA (with the DSA indexer: V3.2, GLM-5). */
static void build_deepseek(Builder *b, Cfg *c, RfArch *a, int *nlayers, gboolean kimi,
                           gboolean indexer) {
  read_common(c, a, COMMON_MOE | COMMON_DENSE);
  a->q_lora = cfg_int_or(c, "q_lora_rank", 0);
  a->kv_lora = cfg_int(c, "kv_lora_rank");
  a->qk_nope = cfg_int(c, "qk_nope_head_dim");
  a->qk_rope = cfg_int(c, "qk_rope_head_dim");
  cfg_positive(c, K_NOPE, a->qk_nope, "the q / k head width without RoPE");
  cfg_positive(c, K_ROPE, a->qk_rope, "the q / k head width with RoPE");
  a->v_head = cfg_int(c, "v_head_dim");
  int64_t first_dense = cfg_int_or(c, "first_k_dense_replace", 0);
  int64_t idx_heads = indexer ? cfg_int(c, "index_n_heads") : 0;
  int64_t idx_dim = indexer ? cfg_int(c, "index_head_dim") : 0;
  gboolean gated_attn = cfg_bool_or(c, "gated_attention", FALSE);
  gboolean *kda = NULL;
  if (!arch_check(c, a)) return;
  if (a->expert_inter < 1) cfg_fail(c, RF_ERROR_INPUT, "'moe_intermediate_size' missing");
  if (indexer && !a->q_lora) cfg_fail(c, RF_ERROR_INPUT, "the DSA indexer needs 'q_lora_rank'");
  if (kimi) {
    JsonObject *lin = rf_json_object(c->o, "linear_attn_config");
    if (!lin) cfg_fail(c, RF_ERROR_INPUT, "'linear_attn_config' missing");
    if (c->failed) return;
    Cfg lc = {lin, c->file, c->error, FALSE, NULL};
    a->lin_heads = cfg_int(&lc, "num_heads");
    a->lin_head_dim = cfg_int(&lc, "head_dim");
    a->conv_kernel = cfg_int(&lc, "short_conv_kernel_size");
    kda = cfg_layer_set(&lc, "kda_layers", a->layers, 1); /* 1-based, as Kimi Linear writes it */
    if (lc.failed) c->failed = TRUE;
  }
  if (c->failed) goto out;
  *nlayers = (int)a->layers;
  T2(b, RF_KIND_EMBEDDING, -1, a->vocab, a->hidden, "model.embed_tokens.weight");
  for (int L = 0; L < a->layers + a->mtp_layers; L++) {
    gboolean mtp = L >= a->layers;
    b->mtp = mtp;
    char *pre = g_strdup_printf("model.layers.%d.", L);
    if (mtp) add_mtp_head(b, a, L, pre);
    T1(b, RF_KIND_NORM, L, a->hidden, "%sinput_layernorm.weight", pre);
    if (kda && !mtp && kda[L]) {
      add_kda(b, a, L, pre);
    } else {
      add_mla(b, a, L, pre, gated_attn);
      if (indexer) {
        /* DSA lightning indexer: small and replicated in vLLM and Megatron */
        T2(b, RF_KIND_OTHER, L, idx_heads * idx_dim, a->q_lora, "%sself_attn.indexer.wq_b.weight",
           pre);
        T2(b, RF_KIND_OTHER, L, idx_dim, a->hidden, "%sself_attn.indexer.wk.weight", pre);
        T1(b, RF_KIND_NORM, L, idx_dim, "%sself_attn.indexer.k_norm.weight", pre);
        T1(b, RF_KIND_NORM, L, idx_dim, "%sself_attn.indexer.k_norm.bias", pre);
        T2(b, RF_KIND_OTHER, L, idx_heads, a->hidden, "%sself_attn.indexer.weights_proj.weight",
           pre);
      }
    }
    T1(b, RF_KIND_NORM, L, a->hidden, "%spost_attention_layernorm.weight", pre);
    if (L < first_dense) {
      add_dense_mlp(b, a->hidden, a->dense_inter, L, pre, TRUE);
    } else {
      RfArch m = *a;
      m.dense_inter = 0; /* shared experts are n_shared x expert width */
      add_moe(b, &m, L, pre, &DEEPSEEK_MOE);
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

/* Nemotron-H: hybrid_override_pattern (M * - E per layer), or layers_block_type (newer). */
static char *nemotron_pattern(Cfg *c, const char *key, int64_t *n) {
  static const char *const names[] = {"mamba", "attention", "mlp", "moe", NULL};
  static const char sym[] = "M*-E";
  int *k = cfg_name_list(c, key, names, n);
  if (!k) return NULL;
  char *p = g_malloc(*n + 1);
  for (int64_t i = 0; i < *n; i++)
    p[i] = sym[k[i]];
  p[*n] = 0;
  g_free(k);
  return p;
}

static void add_nemotron_layer(Builder *b, Cfg *c, const RfArch *a, int L, const char *pre,
                               char kind, int64_t shared_inter) {
  T1(b, RF_KIND_NORM, L, a->hidden, "%snorm.weight", pre);
  switch (kind) {
  case 'M':
    add_mamba(b, a, L, pre);
    break;
  case '*':
    add_gqa(b, a, L, pre, "mixer.", FALSE, FALSE);
    break;
  case '-':
    T2(b, RF_KIND_DENSE_UP, L, a->dense_inter, a->hidden, "%smixer.up_proj.weight", pre);
    T2(b, RF_KIND_DENSE_DOWN, L, a->hidden, a->dense_inter, "%smixer.down_proj.weight", pre);
    break;
  case 'E': {
    /* relu2 experts: up + down only; shared expert likewise. */
    static const MoeNames nm = {"mixer.",
                                "gate.weight",
                                "gate.e_score_correction_bias",
                                "shared_experts",
                                {"gate_proj", "up_proj", "down_proj"},
                                FALSE};
    RfArch m = *a;
    m.shared_experts = shared_inter ? 1 : 0;
    m.dense_inter = shared_inter;
    add_moe(b, &m, L, pre, &nm);
    break;
  }
  default:
    cfg_fail(c, RF_ERROR_INPUT, "hybrid_override_pattern has '%c' (want M * - E)", kind);
  }
}

static void build_nemotron_h(Builder *b, Cfg *c, RfArch *a, int *nlayers) {
  gboolean listed = cfg_has(c, "layers_block_type");
  read_common(c, a, listed ? COMMON_NO_LAYERS : 0);
  a->mamba_heads = cfg_int(c, "mamba_num_heads");
  a->mamba_head_dim = cfg_int(c, "mamba_head_dim");
  a->mamba_groups = cfg_int(c, "n_groups");
  a->mamba_state = cfg_int(c, "ssm_state_size");
  a->conv_kernel = cfg_int(c, "conv_kernel");
  int64_t shared_inter = cfg_int_or(c, "moe_shared_expert_intermediate_size", 0);
  int64_t npat = 0, nmtp = 0;
  char *pat = NULL, *mtp = NULL;
  if (listed) {
    pat = nemotron_pattern(c, "layers_block_type", &npat);
    a->layers = npat;
  } else if (!c->failed) {
    const char *p = rf_json_string(c->o, "hybrid_override_pattern");
    if (!p)
      cfg_fail(c, RF_ERROR_INPUT, "'hybrid_override_pattern' or 'layers_block_type' missing");
    else if ((int64_t)strlen(p) != a->layers)
      cfg_fail(c, RF_ERROR_INPUT, "'hybrid_override_pattern' is %zu long, not num_hidden_layers",
               strlen(p));
    pat = g_strdup(p);
  }
  if (a->mtp_layers && cfg_has(c, "mtp_layers_block_type"))
    mtp = nemotron_pattern(c, "mtp_layers_block_type", &nmtp);
  else
    a->mtp_layers = 0; /* no MTP block structure given: none in the checkpoint */
  if (!arch_check(c, a)) goto out;
  if (strchr(pat, 'E') && (a->experts < 1 || a->expert_inter < 1))
    cfg_fail(c, RF_ERROR_INPUT, "MoE layers need 'n_routed_experts' and 'moe_intermediate_size'");
  if (strchr(pat, '-') && a->dense_inter < 1)
    cfg_fail(c, RF_ERROR_INPUT, "MLP layers need 'intermediate_size'");
  if (c->failed) goto out;
  *nlayers = (int)a->layers;
  T2(b, RF_KIND_EMBEDDING, -1, a->vocab, a->hidden, "backbone.embeddings.weight");
  for (int L = 0; L < a->layers && !c->failed; L++) {
    char *pre = g_strdup_printf("backbone.layers.%d.", L);
    add_nemotron_layer(b, c, a, L, pre, pat[L], shared_inter);
    g_free(pre);
  }
  /* MTP: each of num_nextn_predict_layers modules runs the mtp_layers_block_type blocks; the
   * first block takes enorm / hnorm / eh_proj, the last ends in final_layernorm. */
  b->mtp = TRUE;
  for (int64_t mod = 0; mod < a->mtp_layers && !c->failed; mod++)
    for (int64_t j = 0; j < nmtp; j++) {
      int L = (int)(a->layers + mod);
      char *pre = g_strdup_printf("mtp.layers.%lld.", (long long)(mod * nmtp + j));
      if (j == 0) add_mtp_head(b, a, L, pre);
      add_nemotron_layer(b, c, a, L, pre, mtp[j], shared_inter);
      if (j == nmtp - 1) T1(b, RF_KIND_NORM, L, a->hidden, "%sfinal_layernorm.weight", pre);
      g_free(pre);
    }
  b->mtp = FALSE;
  T1(b, RF_KIND_NORM, -1, a->hidden, "backbone.norm_f.weight");
  T2(b, RF_KIND_LM_HEAD, -1, a->vocab, a->hidden, "lm_head.weight");
out:
  g_free(pat);
  g_free(mtp);
}

/* Qwen3-Next and Qwen3.5: Gated DeltaNet layers between gated full-attention layers. */
static void build_qwen_gdn(Builder *b, Cfg *c, RfArch *a, int *nlayers, gboolean qwen35) {
  read_common(c, a, 0);
  a->lin_kv_heads = cfg_int(c, "linear_num_key_heads");
  a->lin_head_dim = cfg_int(c, "linear_key_head_dim");
  a->lin_heads = cfg_int(c, "linear_num_value_heads");
  int64_t lin_vdim = cfg_int(c, "linear_value_head_dim");
  a->conv_kernel = cfg_int(c, "linear_conv_kernel_dim");
  int64_t shared_inter = cfg_int_or(c, "shared_expert_intermediate_size", 0);
  gboolean tie = cfg_bool_or(c, "tie_word_embeddings", FALSE);
  gboolean gate = cfg_bool_or(c, "attn_output_gate", TRUE);
  int64_t interval = 0, ntypes = 0;
  int *types = NULL;
  if (cfg_has(c, "layer_types")) {
    static const char *const names[] = {"linear_attention", "full_attention", NULL};
    types = cfg_name_list(c, "layer_types", names, &ntypes);
  } else {
    interval = cfg_int(c, "full_attention_interval");
  }
  if (!arch_check(c, a)) goto out;
  if (types && ntypes != a->layers)
    cfg_fail(c, RF_ERROR_INPUT, "'layer_types' has %lld entries for %lld layers", (long long)ntypes,
             (long long)a->layers);
  else if (!types && interval < 1)
    cfg_fail(c, RF_ERROR_INPUT, "'full_attention_interval' must be >= 1");
  else if (a->experts && a->expert_inter < 1)
    cfg_fail(c, RF_ERROR_INPUT, "'moe_intermediate_size' missing");
  else if (!a->experts && a->dense_inter < 1)
    cfg_fail(c, RF_ERROR_INPUT, "'intermediate_size' missing (a dense model)");
  if (c->failed) goto out;
  *nlayers = (int)a->layers;
  RfArch moe = *a;
  moe.shared_experts = shared_inter ? 1 : 0;
  moe.dense_inter = shared_inter;
  RfArch gdn = *a;
  gdn.head_dim = lin_vdim;
  /* Qwen3.5 is a vision-language checkpoint: the text model sits under model.language_model */
  const char *root = qwen35 ? "model.language_model." : "model.";
  T2(b, RF_KIND_EMBEDDING, -1, a->vocab, a->hidden, "%sembed_tokens.weight", root);
  for (int L = 0; L < a->layers + a->mtp_layers; L++) {
    gboolean mtp = L >= a->layers;
    b->mtp = mtp;
    char *pre = mtp ? g_strdup_printf("mtp.layers.%d.", (int)(L - a->layers))
                    : g_strdup_printf("%slayers.%d.", root, L);
    T1(b, RF_KIND_NORM, L, a->hidden, "%sinput_layernorm.weight", pre);
    gboolean full = mtp || (types ? types[L] == 1 : (L + 1) % interval == 0);
    if (full) {
      add_gqa(b, a, L, pre, "self_attn.", gate, FALSE);
      T1(b, RF_KIND_NORM, L, a->head_dim, "%sself_attn.q_norm.weight", pre);
      T1(b, RF_KIND_NORM, L, a->head_dim, "%sself_attn.k_norm.weight", pre);
    } else {
      add_gdn(b, &gdn, L, pre, !qwen35);
    }
    T1(b, RF_KIND_NORM, L, a->hidden, "%spost_attention_layernorm.weight", pre);
    if (a->experts) {
      add_moe(b, &moe, L, pre, &QWEN_MOE);
      if (shared_inter)
        T2(b, RF_KIND_ROUTER, L, 1, a->hidden, "%smlp.shared_expert_gate.weight", pre);
    } else {
      add_dense_mlp(b, a->hidden, a->dense_inter, L, pre, TRUE);
    }
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
  T1(b, RF_KIND_NORM, -1, a->hidden, "%snorm.weight", root);
  if (!tie) T2(b, RF_KIND_LM_HEAD, -1, a->vocab, a->hidden, "lm_head.weight");
out:
  g_free(types);
}

/* gpt-oss: GQA with q/k/v/o biases and per-head attention sinks; experts with biases. The
 * training tensors are per-expert gate / up / down (as Megatron and vLLM hold them); the
 * published checkpoint fuses each layer's experts into gate_up / down tensors, MXFP4 or BF16. */
static void build_gpt_oss(Builder *b, Cfg *c, RfArch *a, int *nlayers, gboolean mxfp4) {
  read_common(c, a, COMMON_MOE | COMMON_DENSE);
  a->expert_inter = a->dense_inter;
  if (!arch_check(c, a)) return;
  *nlayers = (int)a->layers;
  int64_t E = a->experts, I = a->expert_inter, H = a->hidden;
  T2(b, RF_KIND_EMBEDDING, -1, a->vocab, H, "model.embed_tokens.weight");
  for (int L = 0; L < a->layers; L++) {
    char *pre = g_strdup_printf("model.layers.%d.", L);
    T1(b, RF_KIND_NORM, L, H, "%sinput_layernorm.weight", pre);
    add_gqa(b, a, L, pre, "self_attn.", FALSE, TRUE);
    T1(b, RF_KIND_OTHER, L, H, "%sself_attn.o_proj.bias", pre);
    T1(b, RF_KIND_ATTN_SINK, L, a->heads, "%sself_attn.sinks", pre);
    T1(b, RF_KIND_NORM, L, H, "%spost_attention_layernorm.weight", pre);
    T2(b, RF_KIND_ROUTER, L, E, H, "%smlp.router.weight", pre);
    T1(b, RF_KIND_ROUTER, L, E, "%smlp.router.bias", pre);
    uint32_t first = b->tensors->len;
    TE(b, RF_KIND_EXPERT_GATE, L, E, I, H, "%smlp.experts.{e}.gate_proj.weight", pre);
    TE(b, RF_KIND_EXPERT_UP, L, E, I, H, "%smlp.experts.{e}.up_proj.weight", pre);
    TE(b, RF_KIND_EXPERT_DOWN, L, E, H, I, "%smlp.experts.{e}.down_proj.weight", pre);
    /* gate_up bias: taken as [gate | up] along dim 1, as the per-expert weights are (the
     * checkpoint interleaves them, gate at even, up at odd columns); two parts, so that each
     * framework can shard and fuse them like the gate / up rows */
    add_parts_dim(b,
                  add_tensor(b, RF_KIND_EXPERT_GATE_UP_BIAS, L, 0, 2, (int64_t[]){E, 2 * I},
                             "%smlp.experts.gate_up_proj_bias", pre),
                  1, 2, (int64_t[]){I, I}, (const char *const[]){"gate", "up"});
    T2(b, RF_KIND_EXPERT_DOWN_BIAS, L, E, H, "%smlp.experts.down_proj_bias", pre);
    /* the checkpoint's own expert tensors */
    for (uint32_t i = first; i < first + 3; i++)
      g_array_index(b->own_ckpt, guint8, i) = 1;
    if (mxfp4) {
      CK(b, RF_DT_U8, L, 4, ((int64_t[]){E, 2 * I, H / 32, 16}),
         "%smlp.experts.gate_up_proj_blocks", pre);
      CK(b, RF_DT_U8, L, 3, ((int64_t[]){E, 2 * I, H / 32}), "%smlp.experts.gate_up_proj_scales",
         pre);
      CK(b, RF_DT_U8, L, 4, ((int64_t[]){E, H, I / 32, 16}), "%smlp.experts.down_proj_blocks", pre);
      CK(b, RF_DT_U8, L, 3, ((int64_t[]){E, H, I / 32}), "%smlp.experts.down_proj_scales", pre);
    } else {
      CK(b, b->dtype, L, 3, ((int64_t[]){E, H, 2 * I}), "%smlp.experts.gate_up_proj", pre);
      CK(b, b->dtype, L, 3, ((int64_t[]){E, I, H}), "%smlp.experts.down_proj", pre);
    }
    g_free(pre);
  }
  if (mxfp4 && (H % 32 || I % 32))
    cfg_fail(c, RF_ERROR_INPUT, "MXFP4 needs hidden_size and intermediate_size in 32-blocks");
  T1(b, RF_KIND_NORM, -1, H, "model.norm.weight");
  T2(b, RF_KIND_LM_HEAD, -1, a->vocab, H, "lm_head.weight");
}

/* ---- published quantization ------------------------------------------------------------- */

typedef enum {
  Q_NONE,
  Q_FP8_BLOCK,     /* quant_method fp8: e4m3 weights, F32 weight_scale_inv per block */
  Q_MXFP4_GPT_OSS, /* quant_method mxfp4: gpt-oss experts (written by its builder) */
  Q_MXFP4_PACKED,  /* compressed-tensors mxfp4-pack-quantized: weight_packed + weight_scale */
  Q_NVFP4,         /* modelopt NVFP4: packed weight, fp8 block scales, two F32 scalars */
} QMethod;

typedef struct {
  QMethod method;
  int64_t bo, bi;  /* block rows, cols (FP8); group size along the input (FP4) */
  JsonArray *skip; /* modules left unquantized, as the config names them */
  gboolean regex;  /* skip entries may be "re:..." (compressed-tensors) */
  char *words;     /* description for RfModel.quant */
} Quant;

static gboolean quant_read(Cfg *c, JsonObject *qc, Quant *q) {
  memset(q, 0, sizeof *q);
  if (!qc) return TRUE;
  const char *m = rf_json_string(qc, "quant_method");
  Cfg qcfg = {qc, c->file, c->error, FALSE, NULL};
  if (!g_strcmp0(m, "fp8")) {
    JsonArray *bs = rf_json_array(qc, "weight_block_size");
    if (!bs || !rf_json_array_int(bs, 0, 1, CFG_MAX, &q->bo) ||
        !rf_json_array_int(bs, 1, 1, CFG_MAX, &q->bi) || json_array_get_length(bs) != 2) {
      cfg_fail(c, RF_ERROR_INPUT,
               "quantization_config: fp8 without a 'weight_block_size' [rows, cols] is not "
               "modelled (per-tensor scales)");
      return FALSE;
    }
    q->method = Q_FP8_BLOCK;
    q->skip = rf_json_array(qc, "modules_to_not_convert");
    q->words = g_strdup_printf("fp8 e4m3, %lldx%lld blocks", (long long)q->bo, (long long)q->bi);
  } else if (!g_strcmp0(m, "mxfp4")) {
    q->method = Q_MXFP4_GPT_OSS;
    q->skip = rf_json_array(qc, "modules_to_not_convert");
    q->words = g_strdup("mxfp4 experts (e2m1, e8m0 scales per 32)");
  } else if (!g_strcmp0(m, "compressed-tensors") &&
             !g_strcmp0(rf_json_string(qc, "format"), "mxfp4-pack-quantized")) {
    q->method = Q_MXFP4_PACKED;
    q->bi = 32;
    q->skip = rf_json_array(qc, "ignore");
    q->regex = TRUE;
    q->words = g_strdup("mxfp4 pack-quantized (e2m1, e8m0 scales per 32)");
  } else if (!g_strcmp0(m, "modelopt") && !g_strcmp0(rf_json_string(qc, "quant_algo"), "NVFP4")) {
    q->method = Q_NVFP4;
    q->bi = cfg_int_or(&qcfg, "group_size", 16);
    if (qcfg.failed) c->failed = TRUE;
    if (q->bi < 1) cfg_fail(c, RF_ERROR_INPUT, "quantization_config: group_size must be >= 1");
    q->skip = rf_json_array(qc, "exclude_modules");
    q->words = g_strdup_printf("nvfp4 (e2m1, fp8 scales per %lld)", (long long)q->bi);
  } else {
    cfg_fail(c, RF_ERROR_INPUT,
             "quantization_config: quant_method '%s' is not modelled (fp8 with blocks, mxfp4, "
             "compressed-tensors mxfp4-pack-quantized, modelopt NVFP4)",
             m ? m : "?");
  }
  return !c->failed;
}

/* Does a skip entry name the module of tensor name (module = name less its last part)? */
static gboolean quant_skipped(const Quant *q, const char *name) {
  if (!q->skip) return FALSE;
  char *mod = g_strdup(name);
  char *dot = strrchr(mod, '.');
  if (dot) *dot = 0;
  gboolean hit = FALSE;
  for (guint i = 0; i < json_array_get_length(q->skip) && !hit; i++) {
    const char *s = NULL;
    if (!rf_json_node_string(json_array_get_element(q->skip, i), &s)) continue;
    if (q->regex && g_str_has_prefix(s, "re:")) {
      hit = g_regex_match_simple(s + 3, mod, 0, G_REGEX_MATCH_ANCHORED);
    } else if (strchr(s, '*')) {
      char *pat = g_strdup_printf("%s*", s);
      hit = g_pattern_match_simple(pat, mod);
      g_free(pat);
    } else {
      /* a module path, or one component of it ("gate", "lm_head") */
      size_t n = strlen(s), m = strlen(mod);
      const char *p = mod;
      while (!hit && (p = strstr(p, s))) {
        gboolean start = p == mod || p[-1] == '.';
        gboolean end = p[n] == 0 || p[n] == '.';
        hit = start && end;
        p++;
      }
      /* a parameter named directly (e_score_correction_bias) */
      if (!hit && g_str_has_suffix(name, s) && strlen(name) > n &&
          name[strlen(name) - n - 1] == '.')
        hit = TRUE;
      (void)m;
    }
  }
  g_free(mod);
  return hit;
}

/* Tensors a Linear-weight quantization converts: the published checkpoints' rule
 * (rf_quant_target, tensor.c), less the modules the checkpoint's config skips. */
static gboolean quant_target(const Quant *q, const RfTensor *t) {
  return rf_quant_target(t) && !quant_skipped(q, t->name);
}

static void ckpt_push(GArray *out, const RfTensor *t, const char *suffix, RfDtype dt, int ndim,
                      const int64_t *shape) {
  RfTensor c = *t;
  size_t n = strlen(t->name) - strlen("weight");
  c.name = g_strdup_printf("%.*s%s", (int)n, t->name, suffix);
  c.dtype = dt;
  c.ndim = ndim;
  memcpy(c.shape, shape, sizeof(int64_t) * ndim);
  g_array_append_val(out, c);
}

/* The published checkpoint: each tensor in its stored form, scales after their weight. */
static GArray *ckpt_build(Builder *b, const Quant *q) {
  GArray *out = g_array_new(FALSE, FALSE, sizeof(RfTensor));
  for (guint i = 0; i < b->tensors->len; i++) {
    const RfTensor *t = &g_array_index(b->tensors, RfTensor, i);
    if (g_array_index(b->own_ckpt, guint8, i)) continue;
    int s = t->nexperts ? 1 : 0; /* stacked: [E, out, in] */
    int64_t o = t->shape[s], in = t->shape[s + 1], sh[RF_MAX_DIMS];
    if (q->method == Q_NONE || q->method == Q_MXFP4_GPT_OSS || !quant_target(q, t)) {
      RfTensor c = *t;
      c.name = g_strdup(t->name);
      g_array_append_val(out, c);
      continue;
    }
    memcpy(sh, t->shape, sizeof sh);
    switch (q->method) {
    case Q_FP8_BLOCK:
      ckpt_push(out, t, "weight", RF_DT_FP8, t->ndim, sh);
      sh[s] = (o + q->bo - 1) / q->bo;
      sh[s + 1] = (in + q->bi - 1) / q->bi;
      ckpt_push(out, t, "weight_scale_inv", RF_DT_FP32, t->ndim, sh);
      break;
    case Q_MXFP4_PACKED:
    case Q_NVFP4: {
      gboolean nv = q->method == Q_NVFP4;
      sh[s + 1] = (in + 1) / 2; /* two e2m1 values a byte */
      ckpt_push(out, t, nv ? "weight" : "weight_packed", RF_DT_U8, t->ndim, sh);
      sh[s + 1] = (in + q->bi - 1) / q->bi;
      ckpt_push(out, t, "weight_scale", nv ? RF_DT_FP8 : RF_DT_U8, t->ndim, sh);
      if (nv) {
        int64_t one[RF_MAX_DIMS] = {t->nexperts};
        ckpt_push(out, t, "weight_scale_2", RF_DT_FP32, s, one);
        ckpt_push(out, t, "input_scale", RF_DT_FP32, s, one);
      }
      break;
    }
    default:
      break;
    }
  }
  for (guint i = 0; i < b->ckpt->len; i++)
    g_array_append_val(out, g_array_index(b->ckpt, RfTensor, i));
  g_array_set_size(b->ckpt, 0);
  return out;
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
      /* check before multiplying: vol x sh[d] stays within 2^56 */
      if (!rf_json_array_int(shape, d, 1, RF_MAX_ELEMS, &sh[d])) {
        g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                    "%s: tensor '%s' dim %u must be an integer in 1..2^56", file, n, d);
        g_list_free(names);
        return FALSE;
      }
      if (vol > RF_MAX_ELEMS / sh[d]) {
        g_set_error(error, RF_ERROR, RF_ERROR_LIMIT, "%s: tensor '%s' has more than 2^56 elements",
                    file, n);
        g_list_free(names);
        return FALSE;
      }
      vol *= sh[d];
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
    /* a routed-expert tensor of 3 dims is the layer's experts stacked: [E, out, in] */
    RfKind kind = rf_kind_from_name(n, (int)nd);
    gboolean stacked = nd == 3 && (kind == RF_KIND_EXPERT_GATE || kind == RF_KIND_EXPERT_UP ||
                                   kind == RF_KIND_EXPERT_DOWN);
    add_parts(b, add_tensor(b, kind, layer, stacked ? (int)sh[0] : 0, (int)nd, sh, "%s", n), 0,
              NULL, NULL);
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
  for (uint32_t i = 0; i < m->nckpt; i++)
    g_free(m->ckpt[i].name);
  g_free(m->ckpt);
  g_free(m->quant);
  g_free(m->ckpt_dir);
  g_free(m->ckpt_note);
  g_free(m->name);
  g_free(m->family);
  g_free(m);
}

typedef void (*BuildFn)(Builder *b, Cfg *c, RfArch *a, int *nlayers);

static void build_ds(Builder *b, Cfg *c, RfArch *a, int *n) {
  build_deepseek(b, c, a, n, FALSE, FALSE);
}
static void build_dsa(Builder *b, Cfg *c, RfArch *a, int *n) {
  build_deepseek(b, c, a, n, FALSE, TRUE);
}
static void build_kimi(Builder *b, Cfg *c, RfArch *a, int *n) {
  build_deepseek(b, c, a, n, TRUE, FALSE);
}
static void build_qwen3_next(Builder *b, Cfg *c, RfArch *a, int *n) {
  build_qwen_gdn(b, c, a, n, FALSE);
}
static void build_qwen35(Builder *b, Cfg *c, RfArch *a, int *n) {
  build_qwen_gdn(b, c, a, n, TRUE);
}
static void build_gpt_oss_cfg(Builder *b, Cfg *c, RfArch *a, int *n) {
  build_gpt_oss(b, c, a, n, b->mxfp4);
}

/* model_type -> family and builder; a NULL builder is a family refit knows but does not model,
 * and why says what is missing. */
static const struct {
  const char *model_type, *family;
  BuildFn build;
  const char *why;
  gboolean moe; /* routed experts required (read_common) */
} families[] = {
    {"qwen3_moe", "qwen3_moe", build_qwen3, NULL, TRUE},
    {"qwen3", "qwen3_moe", build_qwen3, NULL, FALSE},
    {"llama", "llama", build_llama, NULL, FALSE},
    {"mistral", "llama", build_llama, NULL, FALSE},
    {"mixtral", "mixtral", build_mixtral, NULL, TRUE},
    {"minimax_m2", "minimax_m2", build_minimax_m2, NULL, TRUE},
    {"glm4_moe", "glm4_moe", build_glm4_moe, NULL, TRUE},
    {"deepseek_v3", "deepseek_v3", build_ds, NULL, TRUE},
    {"kimi_k2", "deepseek_v3", build_ds, NULL, TRUE},
    {"deepseek_v32", "deepseek_v32", build_dsa, NULL, TRUE},
    {"glm_moe_dsa", "glm_moe_dsa", build_dsa, NULL, TRUE},
    {"kimi_linear", "kimi", build_kimi, NULL, TRUE},
    {"kimi", "kimi", build_kimi, NULL, TRUE},
    {"nemotron_h", "nemotron_h", build_nemotron_h, NULL, FALSE},
    {"qwen3_next", "qwen3_next", build_qwen3_next, NULL, TRUE},
    {"qwen3_5_moe_text", "qwen3_5", build_qwen35, NULL, TRUE},
    {"qwen3_5_text", "qwen3_5", build_qwen35, NULL, FALSE},
    {"gpt_oss", "gpt_oss", build_gpt_oss_cfg, NULL, TRUE},
    {"llama4", NULL, NULL,
     "Llama 4 is not modelled: its interleaved MoE / dense layers, fused expert tensors and "
     "vision tower have no builder",
     TRUE},
    {"llama4_text", NULL, NULL,
     "Llama 4 is not modelled: its interleaved MoE / dense layers and fused expert tensors have "
     "no builder",
     TRUE},
};

const char *const *rf_zoo_families(void) {
  static const char *names[G_N_ELEMENTS(families) + 1];
  int n = 0;
  for (size_t i = 0; i < G_N_ELEMENTS(families); i++)
    if (families[i].build) names[n++] = families[i].model_type;
  names[n] = NULL;
  return names;
}

/* The config's model (inside a text_config wrapper for vision-language checkpoints), its
 * training dtype and its published quantization. */
static gboolean config_read(Cfg *c, JsonObject *top, Builder *b, Quant *q) {
  JsonObject *o = rf_json_object(top, "text_config");
  if (!o) o = top;
  c->o = o;
  const char *dt = NULL;
  const char *keys[] = {"dtype", "torch_dtype"};
  for (int i = 0; i < 2 && !dt; i++)
    for (JsonObject *x = o; x && !dt; x = x == top ? NULL : top) {
      JsonNode *n = json_object_get_member(x, keys[i]);
      if (n && !JSON_NODE_HOLDS_NULL(n) && !rf_json_node_string(n, &dt)) {
        cfg_fail(c, RF_ERROR_INPUT, "'%s' must be a string", keys[i]);
        return FALSE;
      }
    }
  if (dt && !rf_dtype_parse(dt, &b->dtype, c->error)) {
    g_prefix_error(c->error, "%s: ", c->file);
    c->failed = TRUE;
    return FALSE;
  }
  JsonObject *qc = rf_json_object(o, "quantization_config");
  if (!qc) qc = rf_json_object(top, "quantization_config");
  if (!quant_read(c, qc, q)) return FALSE;
  b->mxfp4 = q->method == Q_MXFP4_GPT_OSS;
  return TRUE;
}

static gboolean config_build(Builder *b, JsonObject *top, const char *name, RfModel *m, Quant *q,
                             GError **error) {
  Cfg c = {top, name, error, FALSE, NULL};
  if (!config_read(&c, top, b, q)) return FALSE;
  const char *mt = rf_json_string(c.o, "model_type");
  if (!mt) mt = rf_json_string(top, "model_type");
  for (size_t i = 0; i < G_N_ELEMENTS(families); i++) {
    if (g_strcmp0(mt, families[i].model_type)) continue;
    if (!families[i].build) {
      cfg_fail(&c, RF_ERROR_INPUT, "%s", families[i].why);
      return FALSE;
    }
    if (q->method == Q_MXFP4_GPT_OSS && families[i].build != build_gpt_oss_cfg) {
      cfg_fail(&c, RF_ERROR_INPUT, "quant_method mxfp4 is modelled for gpt_oss only");
      return FALSE;
    }
    m->family = g_strdup(families[i].family);
    c.moe_type = families[i].moe ? mt : NULL;
    families[i].build(b, &c, &m->arch, &m->nlayers);
    return !c.failed;
  }
  GString *known = g_string_new(NULL);
  for (const char *const *f = rf_zoo_families(); *f; f++)
    g_string_append_printf(known, "%s%s", known->len ? ", " : "", *f);
  cfg_fail(&c, RF_ERROR_INPUT, "unsupported model_type '%s' (%s)", mt ? mt : "?", known->str);
  g_string_free(known, TRUE);
  return FALSE;
}

gboolean rf_model_check(const RfModel *m, GError **error) {
  const char *name = m->name;
  for (int list = 0; list < 2; list++) {
    const RfTensor *ts = list ? m->ckpt : m->tensors;
    uint32_t n = list ? m->nckpt : m->ntensors;
    int64_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
      const RfTensor *t = &ts[i];
      int64_t vol = 1;
      for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] < 1) {
          g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                      "%s: tensor %s has an empty dim (check the config)", name, t->name);
          return FALSE;
        }
        if (vol > RF_MAX_ELEMS / t->shape[d]) {
          g_set_error(error, RF_ERROR, RF_ERROR_LIMIT,
                      "%s: tensor %s has more than 2^56 elements (check the config)", name,
                      t->name);
          return FALSE;
        }
        vol *= t->shape[d];
      }
      int64_t by = vol * rf_dtype_size(t->dtype); /* < 2^59 */
      if (total > RF_MAX_MODEL_BYTES - by) {
        g_set_error(error, RF_ERROR, RF_ERROR_LIMIT,
                    "%s: the model is more than " RF_MAX_MODEL_BYTES_TEXT
                    ", the most refit plans (200x the largest published model)",
                    name);
        return FALSE;
      }
      total += by;
    }
  }
  for (uint32_t i = 0; i < m->nparts; i++) {
    const RfPart *p = &m->parts[i];
    if (p->shape[p->seg_dim] < 1) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                  "%s: %s has an empty segment '%s' (check the config)", name,
                  m->tensors[p->tensor].name, p->tag);
      return FALSE;
    }
  }
  return TRUE;
}

RfModel *rf_model_from_json(const char *name, const char *json, gssize len, GError **error) {
  gsize n = len < 0 ? strlen(json) : (gsize)len;
  /* Python's Infinity / NaN pass here (config.json); a listing is re-checked strictly. */
  JsonNode *root = rf_json_parse(json, n, RF_JSON_PYTHON, error);
  if (!root) {
    g_prefix_error(error, "%s: ", name);
    return NULL;
  }
  RfModel *m = NULL;
  JsonObject *o = JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
  if (!o) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "%s: expected a JSON object", name);
    goto out;
  }
  gboolean config =
      json_object_has_member(o, "model_type") || json_object_has_member(o, "text_config");
  if (!config && !rf_json_check(json, n, RF_JSON_STRICT, error)) {
    g_prefix_error(error, "%s: ", name);
    goto out;
  }
  Builder b = {g_array_new(FALSE, FALSE, sizeof(RfTensor)),
               g_array_new(FALSE, FALSE, sizeof(RfPart)),
               g_array_new(FALSE, FALSE, sizeof(RfTensor)),
               g_array_new(FALSE, FALSE, sizeof(guint8)),
               RF_DT_BF16,
               FALSE,
               FALSE};
  Quant q = {0};
  m = g_new0(RfModel, 1);
  m->name = g_strdup(name);
  gboolean ok;
  if (config) {
    ok = config_build(&b, o, name, m, &q, error);
  } else {
    m->family = g_strdup("listing");
    ok = build_listing(&b, o, name, &m->nlayers, error);
  }
  if (ok && b.tensors->len == 0) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "%s: no tensors", name);
    ok = FALSE;
  }
  if (ok && (q.method != Q_NONE || b.ckpt->len)) {
    GArray *ck = ckpt_build(&b, &q);
    m->nckpt = ck->len;
    m->ckpt = (RfTensor *)g_array_free(ck, FALSE);
    m->quant = g_strdup(q.words);
  }
  for (guint i = 0; i < b.ckpt->len; i++)
    g_free(g_array_index(b.ckpt, RfTensor, i).name);
  g_array_free(b.ckpt, TRUE);
  g_array_free(b.own_ckpt, TRUE);
  g_free(q.words);
  m->ntensors = b.tensors->len;
  m->tensors = (RfTensor *)g_array_free(b.tensors, FALSE);
  m->nparts = b.parts->len;
  m->parts = (RfPart *)g_array_free(b.parts, FALSE);
  if (ok) ok = rf_model_check(m, error);
  if (!ok) {
    rf_model_free(m);
    m = NULL;
  }
out:
  json_node_unref(root);
  return m;
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
  const RfTensor *ts = m->ckpt ? m->ckpt : m->tensors;
  uint32_t nt = m->ckpt ? m->nckpt : m->ntensors;
  int64_t n = 0;
  for (uint32_t i = 0; i < nt; i++)
    n += rf_tensor_count(&ts[i]);
  return n;
}

int64_t rf_model_checkpoint_bytes(const RfModel *m) {
  if (!m->ckpt) return rf_model_bytes(m);
  int64_t n = 0;
  for (uint32_t i = 0; i < m->nckpt; i++)
    n += rf_tensor_elems(&m->ckpt[i]) * rf_dtype_size(m->ckpt[i].dtype);
  return n;
}
