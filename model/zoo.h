/* Model zoo: every weight tensor of a model, generated from a Hugging Face style config.json
 * (families: see rf_zoo_families) or read from a plain tensor listing {name: {shape, dtype}}.
 *
 * Two lists: `tensors` is the model in its training precision (what the reshard moves; BF16
 * unless the config's dtype says otherwise), `ckpt` the checkpoint as published when it is
 * quantized (stored dtypes, packed FP4 blocks, scale tensors; NULL when it equals `tensors`).
 *
 * Routed experts of one layer and projection are kept as one stacked entry: name holds "{e}"
 * where the expert index goes, shape[0] is the expert count, and the entry stands for that many
 * checkpoint tensors. A tensor is split into parts where a framework shards segments of it
 * separately (Mamba in_proj = z|x|B|C|dt); parts are the units the plan engine works on. */
#ifndef RF_ZOO_H
#define RF_ZOO_H

#include "dtensor.h"
#include <glib.h>
#include <stdint.h>

/* FP8 is e4m3 or e5m2; U8 holds packed FP4 pairs and e8m0 block scales. The integer, F64 and
 * BOOL types appear only in checkpoints read from safetensors headers. */
typedef enum {
  RF_DT_BF16,
  RF_DT_FP16,
  RF_DT_FP32,
  RF_DT_FP8,
  RF_DT_U8,
  RF_DT_I8,
  RF_DT_I16,
  RF_DT_U16,
  RF_DT_I32,
  RF_DT_U32,
  RF_DT_I64,
  RF_DT_U64,
  RF_DT_FP64,
  RF_DT_BOOL,
  RF_DT_COUNT
} RfDtype;

typedef enum {
  RF_KIND_EMBEDDING,
  RF_KIND_LM_HEAD,
  RF_KIND_NORM,
  RF_KIND_ATTN_QKV,
  RF_KIND_ATTN_Q,
  RF_KIND_ATTN_K,
  RF_KIND_ATTN_V,
  RF_KIND_ATTN_O,
  RF_KIND_ATTN_GATE, /* per-head output gate (gated attention) */
  RF_KIND_MLA_Q_A,   /* replicated low-rank down projections */
  RF_KIND_MLA_KV_A,
  RF_KIND_MLA_Q_B, /* column-parallel up projections */
  RF_KIND_MLA_KV_B,
  RF_KIND_MAMBA_IN,   /* in_proj parts z | x | B | C | dt */
  RF_KIND_MAMBA_CONV, /* conv1d parts x | B | C */
  RF_KIND_MAMBA_HEAD, /* A_log, D, dt_bias: per head */
  RF_KIND_MAMBA_NORM, /* grouped RMSNorm over d_inner */
  RF_KIND_MAMBA_OUT,
  RF_KIND_KDA_PROJ, /* KDA / GDN column-parallel projections (q, k, v, gates) */
  RF_KIND_KDA_CONV,
  RF_KIND_KDA_HEAD, /* per-head A_log, dt_bias */
  RF_KIND_KDA_REPL, /* low-rank or tiny projections kept whole on every rank */
  RF_KIND_KDA_O,
  RF_KIND_GDN_PROJ,
  RF_KIND_GDN_CONV,
  RF_KIND_GDN_HEAD,
  RF_KIND_GDN_O,
  RF_KIND_ROUTER,
  RF_KIND_MOE_LATENT, /* latent MoE down / up projections around the experts */
  RF_KIND_DENSE_GATE,
  RF_KIND_DENSE_UP,
  RF_KIND_DENSE_DOWN,
  RF_KIND_EXPERT_GATE,
  RF_KIND_EXPERT_UP,
  RF_KIND_EXPERT_DOWN,
  RF_KIND_SHARED_GATE,
  RF_KIND_SHARED_UP,
  RF_KIND_SHARED_DOWN,
  RF_KIND_MTP_PROJ, /* MTP eh_proj */
  /* 1-D attention vectors sharded with their projection's rows */
  RF_KIND_ATTN_Q_BIAS, /* q / k / v biases: consecutive, fused per rank like the qkv rows */
  RF_KIND_ATTN_K_BIAS,
  RF_KIND_ATTN_V_BIAS,
  RF_KIND_ATTN_SINK,   /* per-head attention sinks [heads] (gpt-oss) */
  RF_KIND_ATTN_Q_NORM, /* RMSNorm over all q rows [heads x head_dim] (MiniMax-M2) */
  RF_KIND_ATTN_K_NORM, /* ... over all k rows [kv_heads x head_dim] */
  /* per-layer expert biases (gpt-oss), one checkpoint tensor each, experts on dim 0 */
  RF_KIND_EXPERT_GATE_UP_BIAS, /* [E, 2I]: parts "gate" and "up" along dim 1 */
  RF_KIND_EXPERT_DOWN_BIAS,    /* [E, H] */
  RF_KIND_OTHER,               /* unknown: replicated everywhere */
  RF_KIND_COUNT
} RfKind;

typedef struct {
  char *name; /* checkpoint name; "{e}" marks the expert index of a stacked entry */
  int ndim;
  int64_t shape[RF_MAX_DIMS];
  RfDtype dtype;
  RfKind kind;
  int layer;    /* decoder layer, -1 for embedding / final norm / lm_head */
  int nexperts; /* > 0: stacked routed experts, shape[0] == nexperts */
  gboolean mtp; /* part of the multi-token-prediction block */
} RfTensor;

typedef struct {
  uint32_t tensor; /* index into RfModel.tensors */
  int ndim;
  int64_t shape[RF_MAX_DIMS]; /* the part's own shape */
  int seg_dim;                /* the part covers [seg_off, seg_off + shape[seg_dim]) ... */
  int64_t seg_off;            /* ... of its tensor along seg_dim; other dims whole */
  const char *tag;            /* static: "z", "x", "B", "C", "dt", or "" for a whole tensor */
} RfPart;

/* Architecture numbers the presets need. 0 where a family has no such thing. */
typedef struct {
  int64_t hidden, layers, vocab;
  int64_t heads, kv_heads, head_dim;
  int64_t experts, top_k, shared_experts, expert_inter, dense_inter, moe_latent;
  int64_t q_lora, kv_lora, qk_nope, qk_rope, v_head;
  int64_t mamba_heads, mamba_head_dim, mamba_groups, mamba_state, conv_kernel;
  int64_t lin_heads, lin_head_dim, lin_kv_heads; /* KDA / GDN */
  int64_t mtp_layers;
} RfArch;

typedef struct {
  char *name;
  char *family;
  RfArch arch;
  RfTensor *tensors;
  uint32_t ntensors;
  RfPart *parts;
  uint32_t nparts;
  int nlayers;    /* decoder layers (not counting MTP); the PP split runs over these */
  RfTensor *ckpt; /* the published checkpoint when it differs from tensors (quantized), or NULL */
  uint32_t nckpt;
  char *quant;     /* published quantization in words ("fp8 e4m3, 128x128 blocks"), or NULL */
  char *ckpt_dir;  /* loaded from a checkpoint directory: its path (ckpt read from its headers) */
  char *ckpt_note; /* one line: where the checkpoint and config.json disagree, or NULL */
} RfModel;

const char *rf_dtype_name(RfDtype d);
int rf_dtype_size(RfDtype d);
gboolean rf_dtype_parse(const char *s, RfDtype *out, GError **error);
const char *rf_kind_name(RfKind k);
/* Kind of a tensor from its checkpoint name alone (listings, checkpoint tensors no config names).
 */
RfKind rf_kind_from_name(const char *name, int ndim);
gboolean rf_kind_is_ffn(RfKind k); /* dense + routed expert gate/up/down: the hybrid reshard set */

/* Config families refit builds (model_type values, NULL-terminated, static). */
const char *const *rf_zoo_families(void);
/* Shipped model names (NULL-terminated, static). */
const char *const *rf_zoo_names(void);
/* Load a shipped model by name, a path to a config.json / tensor listing, or a checkpoint
 * directory (config.json + safetensors; model/checkpoint.h): its tensors are the config's, its
 * ckpt the tensors its safetensors headers list (only headers are read), with ckpt_note set
 * where they disagree. NULL + one-line error for an unknown name, unsupported family or
 * malformed file or header. */
RfModel *rf_model_load(const char *name_or_path, GError **error);
/* Build from JSON text: a config.json (Python's Infinity/NaN accepted, as Hugging Face writes
 * them) or a tensor listing (strict RFC 8259). name labels it. Errors: RF_ERROR_INPUT for a
 * malformed or unsupported file, RF_ERROR_LIMIT for sizes past refit's limits. */
RfModel *rf_model_from_json(const char *name, const char *json, gssize len, GError **error);
void rf_model_free(RfModel *m);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(RfModel, rf_model_free)

/* Checkpoint tensors an entry stands for (nexperts for stacked, else 1). */
int64_t rf_tensor_count(const RfTensor *t);
int64_t rf_tensor_elems(const RfTensor *t);
int64_t rf_part_elems(const RfPart *p);
int64_t rf_model_params(const RfModel *m);
int64_t rf_model_bytes(const RfModel *m);
/* The published checkpoint: tensors (scales included) and bytes as stored. */
int64_t rf_model_checkpoint_tensors(const RfModel *m);
int64_t rf_model_checkpoint_bytes(const RfModel *m);
/* Largest model total in bytes (both lists); a model past it is refused at load. */
#define RF_MAX_MODEL_BYTES (INT64_C(1) << 60)

/* Checkpoint name of expert e of a stacked entry (or the name itself); caller frees. */
char *rf_tensor_name(const RfTensor *t, int64_t expert);

#endif
