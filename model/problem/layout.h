/* Layouts: where every part of a model lives on the training (source) and inference
 * (destination) side, both as DTensor placements over global ranks, and how each rank stores
 * its shard in local memory (fused QKV, fused gate/up, w13 / w2 stacking, vocab padding).
 *
 * Built from framework presets (Megatron training, vLLM inference) and layout strings such as
 * "TP4xPP8xEP16" -> "TP8xDP16", or from a raw DTensor spec file. Also fixes which GPU each
 * global rank sits on, and so its NVLink domain. */
#ifndef RF_LAYOUT_H
#define RF_LAYOUT_H

#include "dtensor.h"
#include "topology.h"
#include "zoo.h"
#include <glib.h>

/* Largest number a layout string may give one dim (TP, PP, ...). */
#define RF_MAX_LAYOUT (1 << 20)

/* Parsed layout string. Missing dims are 1. adp: SGLang's data-parallel attention (ADP
 * attention groups inside each TP engine). */
typedef struct {
  int tp, pp, ep, etp, cp, dp, adp;
  gboolean dp_given, ep_given;
} RfParallel;

/* Inference frameworks of the presets (--infer-framework). */
typedef enum { RF_INFER_VLLM, RF_INFER_SGLANG, RF_INFER_MEGATRON, RF_INFER_COUNT } RfInferFramework;
const char *rf_infer_framework_name(RfInferFramework f);
/* "vllm", "sglang" or "megatron"; FALSE + one-line error (RF_ERROR_INPUT) otherwise. */
gboolean rf_infer_framework_parse(const char *s, RfInferFramework *out, GError **error);

/* "TP4xPP8xEP16" (x, X or * between dims, names TP PP EP ETP CP DP ADP in any case, each once,
 * numbers 1 to
 * RF_MAX_LAYOUT in plain decimal). FALSE + one-line error (RF_ERROR_INPUT, or RF_ERROR_LIMIT
 * for a number above the limit) otherwise. */
gboolean rf_parallel_parse(const char *s, RfParallel *out, GError **error);
char *rf_parallel_format(const RfParallel *p); /* "TP4xPP8xEP16xDP4"; caller frees */

/* How a rank stores its shard of one part. The local buffer has the part's unclipped shard
 * extents (RfPlacement pad) except along fuse_dim, where parts sharing one buffer are
 * interleaved: a shard index x along fuse_dim goes to (x / blk) * period + off + x % blk.
 * blk == 0 means one block (x goes to off + x). Parts with the same buf share memory. */
typedef struct {
  int32_t buf; /* buffer index into RfSide.buf_names */
  int8_t fuse_dim;
  int64_t off;    /* rows (indices along fuse_dim) before this part in a block */
  int64_t blk;    /* rows of this part per block, 0 = one block */
  int64_t period; /* rows per block of the whole buffer (>= off + blk) */
} RfLocal;

typedef struct {
  char *framework;    /* "megatron", "vllm", "sglang" or "spec" */
  RfParallel par;     /* zero for spec */
  int nranks;         /* ranks of this side */
  int *ranks;         /* global rank ids, ascending */
  RfPlacement *place; /* per part; place[i].mesh == NULL: the part is absent on this side */
  RfLocal *local;     /* per part */
  char **buf_names;   /* local buffer names, nbufs */
  uint32_t *buf_part; /* one part stored in each buffer (they share its shape rules) */
  int nbufs;
  GPtrArray *meshes;   /* owned RfMesh */
  const uint8_t *lost; /* per global rank, borrowed from RfProblem.lost; NULL: none lost */
} RfSide;

struct RfProblemQuant;

typedef struct {
  RfModel *model;   /* owned */
  RfTopology *topo; /* owned */
  RfSide src, dst;
  int nranks;           /* global ranks: max rank id + 1 */
  int *gpu;             /* per global rank: GPU index in the cluster, -1 for unused ids */
  char *placement_note; /* human-readable: how ranks were put on domains */
  uint8_t *lost;        /* per global rank: 1 when its GPU is lost (rf_problem_set_lost); or NULL */
  int nlost;            /* lost ranks */
  struct RfProblemQuant *quant; /* owned: inference quantization (quant.h), or NULL */
} RfProblem;

/* Model + Megatron training layout + vLLM inference layout on a topology.
 * Takes ownership of model and topo (also on failure). NULL + one-line error when a layout
 * cannot hold (EP not dividing, a dim not divisible where the framework requires it). */
RfProblem *rf_problem_new_preset(RfModel *model, const char *train, const char *infer,
                                 RfTopology *topo, GError **error);
/* The same with the inference side in the layout of framework fw (vLLM, SGLang, or Megatron as
 * the generation backend); docs/layouts.md lists what each takes. */
RfProblem *rf_problem_new_preset_fw(RfModel *model, const char *train, const char *infer,
                                    RfInferFramework fw, RfTopology *topo, GError **error);
/* Raw DTensor spec (JSON text, see docs/formats.md); rank r sits on GPU r. Owns topo. */
RfProblem *rf_problem_new_spec(const char *json, gssize len, RfTopology *topo, GError **error);
/* Free everything the problem owns, quantization state included (problem.c); NULL: no-op. */
void rf_problem_free(RfProblem *p);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(RfProblem, rf_problem_free)

static inline int rf_problem_domain(const RfProblem *p, int rank) {
  return p->gpu[rank] / p->topo->gpus_per_domain;
}

/* Elastic recovery (problem.c): mark the ranks on the given GPUs (global GPU indices) as lost. A
 * lost source rank holds nothing (its shards must come from another replica), a lost destination
 * rank receives nothing; rf_side_rank_shard and rf_side_buffer_elems answer so, and plans are
 * built and verified over the survivors. FALSE + one-line error: RF_ERROR_INPUT for a GPU that
 * holds no rank, or when a lost GPU held the only copy of a source shard (the message names the
 * first tensors that cannot be refit), or when no destination survives. Call at most once. */
gboolean rf_problem_set_lost(RfProblem *p, const int *gpus, int ngpus, GError **error);

static inline gboolean rf_side_rank_lost(const RfSide *side, int rank) {
  return side->lost && side->lost[rank];
}

/* Elements of local buffer buf on a global rank of this side (0 when the rank holds none of it). */
int64_t rf_side_buffer_elems(const RfSide *side, int buf, int rank);

/* Shard held by a global rank for a part: FALSE when the rank holds nothing of it. box is the
 * clipped global box, chunk the unclipped one (local buffer extents). Either may be NULL. */
gboolean rf_side_rank_shard(const RfSide *side, uint32_t part, int rank, RfBox *box, RfBox *chunk);

/* Elements offset of global element coordinate g (inside the rank's shard) in its local buffer. */
int64_t rf_local_offset(const RfSide *side, uint32_t part, const RfBox *chunk, const int64_t *g);

/* Contiguous runs of sub (a box inside the rank's shard) in the local buffer, in row-major order
 * of sub: calls fn(off, len, ud) with element offsets; returns the run count. */
typedef void (*RfRunFn)(int64_t off, int64_t len, void *ud);
int64_t rf_local_runs(const RfSide *side, uint32_t part, const RfBox *chunk, const RfBox *sub,
                      RfRunFn fn, void *ud);

/* Side index of a global rank on a side, or -1. */
int rf_side_index(const RfSide *side, int rank);

#endif
