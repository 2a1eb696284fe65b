/* Quantized inference targets in the host executor: the quantize pass and its verification.
 *
 * Target weights are filled with a finite BF16 pattern (rf_pattern squeezed into 2^-8 .. 2^8,
 * so that blocks hold normals and e4m3 subnormals); the engine's own fill and verify lists leave
 * quantized parts out (lists.c). At the sender each source rank quantizes its shards with the
 * production quantizer (model/problem/quant.c) before the refit; at the receiver the BF16 arrives
 * and the receiver quantizes it after the last stage. Either way the destination's e4m3 bytes and
 * scales are compared with the reference quantizer run on the pattern itself. */
#include "quant.h"
#include "engine_int.h"
#include "pattern.h"

#include <string.h>

/* Element gidx of weight tensor t at a step, as a finite BF16: sign and 7 mantissa bits from
 * the pattern, the exponent in 2^-8 .. 2^7. */
static uint16_t pattern_bf16(uint32_t t, uint64_t gidx, uint64_t step) {
  uint64_t v = rf_pattern(t, gidx, step);
  return (uint16_t)((v & 0x807f) | ((119 + (v >> 16) % 16) << 7));
}

typedef struct {
  const RfProblem *pb;
  uint32_t wp, sp;    /* weight part, scale part (sender) or (uint32_t)-1 */
  RfBox box, chunk;   /* the rank's weight shard */
  RfBox sbox, schunk; /* its scale shard (sender) */
  int nd;             /* part dims: leading..., rows, cols */
  int64_t rows, cols, lead;
  int64_t srows, scols; /* scale matrix of one leading index */
  int64_t br, bc;
} Shard;

static gboolean shard_of(const RfProblem *pb, const RfSide *side, uint32_t wp, int rank, Shard *s) {
  const RfProblemQuant *q = pb->quant;
  memset(s, 0, sizeof *s);
  if (!q->target[wp] || !rf_side_rank_shard(side, wp, rank, &s->box, &s->chunk)) return FALSE;
  s->pb = pb;
  s->wp = wp;
  s->nd = pb->model->parts[wp].ndim;
  s->rows = s->box.hi[s->nd - 2] - s->box.lo[s->nd - 2];
  s->cols = s->box.hi[s->nd - 1] - s->box.lo[s->nd - 1];
  s->lead = 1;
  for (int d = 0; d < s->nd - 2; d++)
    s->lead *= s->box.hi[d] - s->box.lo[d];
  s->br = q->block_rows;
  s->bc = q->block_cols;
  s->srows = (s->rows + s->br - 1) / s->br;
  s->scols = (s->cols + s->bc - 1) / s->bc;
  s->sp = (uint32_t)-1;
  if (q->scale_part[wp] >= 0) {
    s->sp = (uint32_t)q->scale_part[wp];
    rf_side_rank_shard(side, s->sp, rank, &s->sbox, &s->schunk);
  }
  return TRUE;
}

/* Global part coordinates of element (l, r, c) of the shard (l: index over the leading dims). */
static void coords(const Shard *s, int64_t l, int64_t r, int64_t c, int64_t *g) {
  for (int d = s->nd - 3; d >= 0; d--) {
    int64_t ext = s->box.hi[d] - s->box.lo[d];
    g[d] = s->box.lo[d] + l % ext;
    l /= ext;
  }
  g[s->nd - 2] = s->box.lo[s->nd - 2] + r;
  g[s->nd - 1] = s->box.lo[s->nd - 1] + c;
}

/* The BF16 pattern of one leading index of the shard, row-major. */
static void shard_pattern(const Shard *s, int64_t l, uint64_t step, uint16_t *w) {
  const RfPart *p = &s->pb->model->parts[s->wp];
  const RfTensor *t = &s->pb->model->tensors[p->tensor];
  int64_t g[RF_MAX_DIMS];
  for (int64_t r = 0; r < s->rows; r++)
    for (int64_t c = 0; c < s->cols; c++) {
      coords(s, l, r, c, g);
      uint64_t gi = 0;
      for (int d = 0; d < t->ndim; d++)
        gi = gi * (uint64_t)t->shape[d] + (uint64_t)(g[d] + (d == p->seg_dim ? p->seg_off : 0));
      w[r * s->cols + c] = pattern_bf16(p->tensor, gi, step);
    }
}

/* Byte address of element (l, r, c) of the weight shard, or of block (l, br, bc) of its scale. */
static uint8_t *weight_at(const Shard *s, const RfSide *side, void *const *buf, int64_t l,
                          int64_t r, int64_t c, int esize) {
  int64_t g[RF_MAX_DIMS];
  coords(s, l, r, c, g);
  return (uint8_t *)buf[side->local[s->wp].buf] +
         rf_local_offset(side, s->wp, &s->chunk, g) * esize;
}

static uint8_t *scale_at(const Shard *s, const RfSide *side, void *const *buf, int64_t l,
                         int64_t br, int64_t bc, int esize) {
  int64_t g[RF_MAX_DIMS];
  coords(s, l, 0, 0, g);
  g[s->nd - 2] = s->sbox.lo[s->nd - 2] + br;
  g[s->nd - 1] = s->sbox.lo[s->nd - 1] + bc;
  return (uint8_t *)buf[side->local[s->sp].buf] +
         rf_local_offset(side, s->sp, &s->schunk, g) * esize;
}

void rf_real_quant_fill(const RfProblem *pb, int rank, void *const *src_buf, uint64_t step) {
  const RfProblemQuant *q = pb->quant;
  int ss = rf_dtype_size(rf_quant_scale_dtype(q->format));
  for (uint32_t wp = 0; wp < q->nparts; wp++) {
    Shard s;
    if (!shard_of(pb, &pb->src, wp, rank, &s)) continue;
    uint16_t *w = g_new(uint16_t, s.rows * s.cols);
    uint8_t *qv = g_new(uint8_t, s.rows * s.cols);
    uint8_t *sc = g_new(uint8_t, s.srows * s.scols * ss);
    for (int64_t l = 0; l < s.lead; l++) {
      shard_pattern(&s, l, step, w);
      if (q->at == RF_QUANT_AT_SENDER) rf_quant_matrix(q->format, w, s.rows, s.cols, qv, sc);
      for (int64_t r = 0; r < s.rows; r++)
        for (int64_t c = 0; c < s.cols; c++)
          if (q->at == RF_QUANT_AT_SENDER)
            *weight_at(&s, &pb->src, src_buf, l, r, c, 1) = qv[r * s.cols + c];
          else
            memcpy(weight_at(&s, &pb->src, src_buf, l, r, c, 2), &w[r * s.cols + c], 2);
      for (int64_t b = 0; q->at == RF_QUANT_AT_SENDER && b < s.srows * s.scols; b++)
        memcpy(scale_at(&s, &pb->src, src_buf, l, b / s.scols, b % s.scols, ss), sc + b * ss,
               (size_t)ss);
    }
    g_free(w);
    g_free(qv);
    g_free(sc);
  }
}

uint64_t rf_real_quant_verify(const RfProblem *pb, int rank, void *const *dst_buf, uint64_t step) {
  const RfProblemQuant *q = pb->quant;
  int ss = rf_dtype_size(rf_quant_scale_dtype(q->format));
  uint64_t wrong = 0;
  for (uint32_t wp = 0; wp < q->nparts; wp++) {
    Shard s;
    if (!shard_of(pb, &pb->dst, wp, rank, &s)) continue;
    int64_t n = s.rows * s.cols, ns = s.srows * s.scols;
    uint16_t *w = g_new(uint16_t, n), *got = g_new(uint16_t, n);
    uint8_t *qr = g_new(uint8_t, n), *qv = g_new(uint8_t, n);
    uint8_t *sr = g_new(uint8_t, ns * ss), *sv = g_new(uint8_t, ns * ss);
    for (int64_t l = 0; l < s.lead; l++) {
      shard_pattern(&s, l, step, w);
      rf_quant_ref_matrix(q->format, w, s.rows, s.cols, qr, sr);
      if (q->at == RF_QUANT_AT_SENDER) {
        for (int64_t i = 0; i < n; i++)
          qv[i] = *weight_at(&s, &pb->dst, dst_buf, l, i / s.cols, i % s.cols, 1);
        for (int64_t b = 0; b < ns; b++)
          memcpy(sv + b * ss, scale_at(&s, &pb->dst, dst_buf, l, b / s.scols, b % s.scols, ss),
                 (size_t)ss);
      } else { /* the BF16 that arrived, then the receiver's quantize pass */
        for (int64_t i = 0; i < n; i++) {
          memcpy(&got[i], weight_at(&s, &pb->dst, dst_buf, l, i / s.cols, i % s.cols, 2), 2);
          wrong += got[i] != w[i];
        }
        rf_quant_matrix(q->format, got, s.rows, s.cols, qv, sv);
      }
      for (int64_t i = 0; i < n; i++)
        wrong += qv[i] != qr[i];
      for (int64_t b = 0; b < ns; b++)
        wrong += memcmp(sv + b * ss, sr + b * ss, (size_t)ss) != 0;
    }
    g_free(w);
    g_free(got);
    g_free(qr);
    g_free(qv);
    g_free(sr);
    g_free(sv);
  }
  return wrong;
}
