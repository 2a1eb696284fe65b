/* Tensor vocabulary: the dtypes and kinds of weight tensors, one checkpoint entry (RfTensor),
 * and the rules that read a single entry: its kind from its name, whether the inference side
 * quantizes it, how many checkpoint tensors it stands for and their names. Nothing here knows
 * a model, a layout or a plan (zoo.h builds models from these entries). */
#ifndef RF_TENSOR_H
#define RF_TENSOR_H

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

const char *rf_dtype_name(RfDtype d);
int rf_dtype_size(RfDtype d);
gboolean rf_dtype_parse(const char *s, RfDtype *out, GError **error);
const char *rf_kind_name(RfKind k);
/* Kind of a tensor from its checkpoint name alone (listings, checkpoint tensors no config names).
 */
RfKind rf_kind_from_name(const char *name, int ndim);
gboolean rf_kind_is_ffn(RfKind k); /* dense + routed expert gate/up/down */
/* The hybrid's reshard set (NeMo RL's bulk path, nemo_rl/weight_sync/nccl_reshard_utils.py
 * is_nccl_reshard_param at e40aa046e): FFN projection weights outside the MTP block; a
 * `*_scale_inv` sibling of one (FP8 blockwise) takes the gather-broadcast (misc) path, as
 * megatron_policy_worker.py _task_is_misc sends it. */
gboolean rf_tensor_in_reshard_set(const RfTensor *t);

/* TRUE for a tensor the inference side stores quantized: a 2-D projection weight (3-D for
 * stacked experts) named "*.weight" whose kind is an attention / MLP / expert / MTP projection.
 * Everything else stays in its dtype (the table in docs/quant.md). */
gboolean rf_quant_target(const RfTensor *t);

/* Checkpoint tensors an entry stands for (nexperts for stacked, else 1). */
int64_t rf_tensor_count(const RfTensor *t);
int64_t rf_tensor_elems(const RfTensor *t);
/* Checkpoint name of expert e of a stacked entry (or the name itself); caller frees. */
char *rf_tensor_name(const RfTensor *t, int64_t expert);

#endif
