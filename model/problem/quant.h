/* Quantized inference targets: the training weights are BF16, the rollout engine serves FP8.
 *
 * Two formats (docs/quant.md):
 *   fp8-block  e4m3 weights in 128 x 128 blocks of the last two dims [out, in], one fp32
 *              `weight_scale_inv` per block (amax / 448), shape ceil(out/128) x ceil(in/128):
 *              the DeepSeek-V3 / Qwen FP8 checkpoint layout;
 *   mxfp8      e4m3 weights in blocks of 32 along the reduction (input, last) dim, one e8m0
 *              (1 byte, power of two) `weight_scale` per block, shape out x ceil(in/32): the
 *              OCP Microscaling (MX) v1.0 format.
 * Only the matrices of attention / MLP / expert projections are quantized (rf_quant_target in
 * tensor.h); norms, the router, embeddings, lm_head, biases and per-head vectors stay in their
 * dtype.
 *
 * Where: at the sender (each source rank quantizes its shards before the network: FP8 and the
 * scales move, about half the bytes) or at the receiver (BF16 moves, each destination rank
 * quantizes its shards after the last byte arrived). Blocks are global (tensor coordinates, as
 * in the checkpoint), so a shard boundary that cuts a block is refused, as vLLM refuses it
 * (validate_fp8_block_shape in vllm/model_executor/layers/quantization/utils/fp8_utils.py). */
#ifndef RF_QUANT_H
#define RF_QUANT_H

#include "layout.h"
#include "zoo.h"
#include <glib.h>
#include <stdint.h>

typedef enum { RF_QUANT_NONE, RF_QUANT_FP8_BLOCK, RF_QUANT_MXFP8, RF_QUANT_COUNT } RfQuantFormat;
typedef enum { RF_QUANT_AT_SENDER, RF_QUANT_AT_RECEIVER, RF_QUANT_AT_COUNT } RfQuantAt;

/* "none", "fp8-block", "mxfp8" / "sender", "receiver"; FALSE + one-line error (RF_ERROR_INPUT)
 * for anything else. */
const char *rf_quant_format_name(RfQuantFormat f);
gboolean rf_quant_format_parse(const char *s, RfQuantFormat *out, GError **error);
const char *rf_quant_at_name(RfQuantAt a);
gboolean rf_quant_at_parse(const char *s, RfQuantAt *out, GError **error);

/* Block extent along the output (rows, dim ndim-2) and input (cols, dim ndim-1) dims:
 * 128 x 128 for fp8-block, 1 x 32 for mxfp8. */
void rf_quant_block(RfQuantFormat f, int64_t *rows, int64_t *cols);
/* Scale element: RF_DT_FP32 (fp8-block weight_scale_inv) or RF_DT_U8 (mxfp8 e8m0). */
RfDtype rf_quant_scale_dtype(RfQuantFormat f);
/* Suffix that replaces "weight" in a scale tensor's name. */
const char *rf_quant_scale_suffix(RfQuantFormat f);

/* ---- the quantizer (production path) -------------------------------------------------- */

float rf_bf16_to_float(uint16_t b);
/* float -> e4m3fn, round to nearest even, saturating to +-448 (0x7E / 0xFE); NaN -> 0x7F. */
uint8_t rf_e4m3_from_float(float x);
float rf_e4m3_to_float(uint8_t b);
/* OCP MX v1.0 shared scale of a block with max |x| amax: 2^(floor(log2 amax) - 8) as a biased
 * e8m0 byte, clamped to 0..254; 0 (2^-127) for amax 0. */
uint8_t rf_e8m0_from_amax(float amax);
float rf_e8m0_to_float(uint8_t b);

/* Quantize a row-major BF16 matrix w[rows][cols] whose element (0, 0) is at global position
 * (row0, col0) of its tensor; row0 and col0 are multiples of the block, so every block starts
 * inside the matrix and ends at a block boundary or the matrix edge. Writes q[rows][cols] and the
 * block scales row-major: fp8-block, scale_inv[ceil(rows/128)][ceil(cols/128)] (fp32); mxfp8,
 * scale[rows][ceil(cols/32)] (e8m0). q = e4m3(fl32(x / s)) with s = fl32(amax / 448) (1 when
 * amax is 0), or s the e8m0 power of two. */
void rf_quant_matrix(RfQuantFormat f, const uint16_t *w, int64_t rows, int64_t cols, uint8_t *q,
                     void *scales);

/* ---- the reference quantizer (verification) ------------------------------------------ */
/* Written apart from the production path, sharing none of its code: e4m3 by nearest value in a
 * table of every code decoded in double (ties to the even code), e8m0 by frexp. Same contract as
 * rf_quant_matrix. */
uint8_t rf_quant_ref_e4m3(double x);
uint8_t rf_quant_ref_e8m0(double amax);
void rf_quant_ref_matrix(RfQuantFormat f, const uint16_t *w, int64_t rows, int64_t cols, uint8_t *q,
                         void *scales);
/* Elements of the scale matrix of a rows x cols block-aligned matrix. */
int64_t rf_quant_scale_elems(RfQuantFormat f, int64_t rows, int64_t cols);

/* ---- quantized problems ----------------------------------------------------------------- */

/* What a problem quantizes (RfProblem.quant). With quantization at the sender, each target
 * part's tensor says RF_DT_FP8 (what moves) and a scale part follows the model's parts, placed
 * like its weight part on both sides (each in a buffer of its own). */
struct RfProblemQuant {
  RfQuantFormat format;
  RfQuantAt at;
  int64_t block_rows, block_cols;
  uint32_t nparts;      /* parts of the model before scale parts were appended */
  uint32_t ntargets;    /* quantized weight parts */
  int32_t *scale_part;  /* per part: its scale part (sender), or -1 */
  int32_t *weight_part; /* per part: the weight part of a scale part, or -1 */
  uint8_t *target;      /* per part: 1 for a quantized weight part */
  RfDtype *train_dtype; /* per part: the dtype of the training weights (before the FP8 switch) */
};
typedef struct RfProblemQuant RfProblemQuant;

/* Quantize the inference weights of pb in format f at a (f NONE: no change). Call after
 * rf_problem_set_lost and before planning, at most once. FALSE + one-line error (RF_ERROR_INPUT)
 * when a destination shard boundary (or, at the sender, a training shard boundary) cuts a block
 * of a target tensor: the message names the tensor, the dim and the boundary. */
gboolean rf_problem_set_quant(RfProblem *pb, RfQuantFormat f, RfQuantAt a, GError **error);
void rf_problem_quant_free(RfProblemQuant *q);
/* TRUE for a quantized weight part or a scale part. */
gboolean rf_quant_part_quantized(const RfProblem *pb, uint32_t part);

/* "fp8-block at the sender: 9 of 25 tensors (e4m3, 128x128 blocks, fp32 weight_scale_inv)";
 * NULL when not quantized. Caller frees. */
char *rf_quant_describe(const RfProblem *pb);

/* HBM bytes (read + written) of the quantize pass over box (global coordinates of the part) of
 * quantized weight part pi: the training dtype read, one e4m3 byte per element and the block
 * scales the box starts written. pb must be quantized (pb->quant set). */
uint64_t rf_quant_box_bytes(const RfProblem *pb, uint32_t pi, const RfBox *box);

#endif
