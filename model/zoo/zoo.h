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
#include "tensor.h"
#include <glib.h>
#include <stdint.h>

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
  char *ckpt_note; /* one line: where the checkpoint and config.json disagree, or NULL; such a
                    * model is shown (model show: the checkpoint's list) but never planned */
} RfModel;

/* Config families refit builds (model_type values, NULL-terminated, static). */
const char *const *rf_zoo_families(void);
/* Shipped model names (NULL-terminated, static). */
const char *const *rf_zoo_names(void);
/* (model_load.c) Load a shipped model by name, a path to a config.json / tensor listing, or a
 * checkpoint directory (config.json + safetensors; checkpoint.h): its tensors are the config's, its
 * ckpt the tensors its safetensors headers list (only headers are read), with ckpt_note set
 * where they disagree. NULL + one-line error for an unknown name, unsupported family or
 * malformed file or header. */
RfModel *rf_model_load(const char *name_or_path, GError **error);
/* (model_load.c) Whether m can be planned: FALSE + one line (RF_ERROR_INPUT: the directory and
 * ckpt_note) for a checkpoint directory that disagrees with its config.json, as the plan engine
 * moves the config's tensors and that plan would not be the checkpoint's; TRUE otherwise. */
gboolean rf_model_check_plannable(const RfModel *m, GError **error);
/* Build from JSON text: a config.json (Python's Infinity/NaN accepted, as Hugging Face writes
 * them) or a tensor listing (strict RFC 8259). name labels it. Errors: RF_ERROR_INPUT for a
 * malformed or unsupported file, RF_ERROR_LIMIT for sizes past refit's limits. */
RfModel *rf_model_from_json(const char *name, const char *json, gssize len, GError **error);
void rf_model_free(RfModel *m);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(RfModel, rf_model_free)

int64_t rf_part_elems(const RfPart *p);
int64_t rf_model_params(const RfModel *m);
int64_t rf_model_bytes(const RfModel *m);
/* The published checkpoint: tensors (scales included) and bytes as stored. */
int64_t rf_model_checkpoint_tensors(const RfModel *m);
int64_t rf_model_checkpoint_bytes(const RfModel *m);
/* Largest model total in bytes (both lists); a model past it is refused at load. 200x the
 * largest model of the zoo (Kimi K3, 5.5 TB), and small enough that a sum of the model's bytes
 * over 2^13 copies (replicas, destinations) stays within int64. */
#define RF_MAX_MODEL_BYTES (INT64_C(1) << 50)
#define RF_MAX_MODEL_BYTES_TEXT "2^50 bytes (1.1 PB)"
/* Check a model built outside rf_model_from_json (a DTensor spec): every dim >= 1, every
 * tensor within 2^56 elements, every part's segment non-empty, each list's bytes summed with
 * the limit checked before each add, within RF_MAX_MODEL_BYTES. FALSE + one line naming
 * m->name and the tensor or limit (RF_ERROR_INPUT for an empty dim, RF_ERROR_LIMIT past a
 * limit); after TRUE, the rf_model_* sums cannot overflow. */
gboolean rf_model_check(const RfModel *m, GError **error);

#endif
