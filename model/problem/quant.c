/* Quantized inference targets: formats, the quantizer, its reference, and the
 * quantized problem (scale parts placed like their weights). */
#include "quant.h"
#include "error.h"

#include <math.h>
#include <string.h>

static const char *const FORMAT_NAMES[RF_QUANT_COUNT] = {"none", "fp8-block", "mxfp8"};
static const char *const AT_NAMES[RF_QUANT_AT_COUNT] = {"sender", "receiver"};

const char *rf_quant_format_name(RfQuantFormat f) {
  return FORMAT_NAMES[f];
}

gboolean rf_quant_format_parse(const char *s, RfQuantFormat *out, GError **error) {
  for (int i = 0; i < RF_QUANT_COUNT; i++)
    if (s && !strcmp(s, FORMAT_NAMES[i])) {
      *out = (RfQuantFormat)i;
      return TRUE;
    }
  g_autofree char *es = g_strescape(s ? s : "", NULL);
  g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
              "unknown inference quantization '%s' (none, fp8-block, mxfp8)", es);
  return FALSE;
}

const char *rf_quant_at_name(RfQuantAt a) {
  return AT_NAMES[a];
}

gboolean rf_quant_at_parse(const char *s, RfQuantAt *out, GError **error) {
  for (int i = 0; i < RF_QUANT_AT_COUNT; i++)
    if (s && !strcmp(s, AT_NAMES[i])) {
      *out = (RfQuantAt)i;
      return TRUE;
    }
  g_autofree char *es = g_strescape(s ? s : "", NULL);
  g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "unknown quantization place '%s' (sender, receiver)",
              es);
  return FALSE;
}

void rf_quant_block(RfQuantFormat f, int64_t *rows, int64_t *cols) {
  *rows = f == RF_QUANT_FP8_BLOCK ? 128 : 1;
  *cols = f == RF_QUANT_FP8_BLOCK ? 128 : 32;
}

RfDtype rf_quant_scale_dtype(RfQuantFormat f) {
  return f == RF_QUANT_FP8_BLOCK ? RF_DT_FP32 : RF_DT_U8;
}

const char *rf_quant_scale_suffix(RfQuantFormat f) {
  return f == RF_QUANT_FP8_BLOCK ? "weight_scale_inv" : "weight_scale";
}

/* ---- the quantizer ---------------------------------------------------------------------- */

static uint32_t f2u(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  return u;
}

float rf_bf16_to_float(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float x;
  memcpy(&x, &u, 4);
  return x;
}

uint8_t rf_e4m3_from_float(float x) {
  uint32_t u = f2u(x);
  uint8_t sign = (uint8_t)((u >> 24) & 0x80);
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) return sign | 0x7f;  /* NaN */
  if (u >= 0x43e00000u) return sign | 0x7e; /* >= 448: saturate (satfinite) */
  if (u < 0x3c800000u) {                    /* below 2^-6: subnormal, steps of 2^-9 */
    float m = rintf(fabsf(x) * 512.0f);     /* exact scaling; rintf rounds to even */
    return sign | (uint8_t)m;               /* 8 -> 0x08, the smallest normal */
  }
  /* normal: keep exponent and 3 mantissa bits, round the 20 dropped bits to nearest even */
  uint32_t r = u >> 20, rem = u & 0xfffffu;
  if (rem > 0x80000u || (rem == 0x80000u && (r & 1))) r++;
  r -= 120u << 3; /* rebias 127 -> 7 */
  return sign | (uint8_t)(r > 0x7e ? 0x7e : r);
}

float rf_e4m3_to_float(uint8_t b) {
  int e = (b >> 3) & 0xf, m = b & 7;
  float v = e == 15 && m == 7 ? NAN : e ? ldexpf(1.0f + m / 8.0f, e - 7) : ldexpf((float)m, -9);
  return b & 0x80 ? -v : v;
}

uint8_t rf_e8m0_from_amax(float amax) {
  if (!(amax > 0)) return 0;
  uint32_t u = f2u(amax);
  int ex = (int)((u >> 23) & 0xff), fl;
  if (ex) {
    fl = ex - 127;
  } else { /* subnormal: the highest set mantissa bit */
    uint32_t m = u & 0x7fffffu;
    fl = -150;
    while (m) {
      m >>= 1;
      fl++;
    }
  }
  int code = fl - 8 + 127; /* emax of e4m3 is 8 */
  return (uint8_t)(code < 0 ? 0 : code > 254 ? 254 : code);
}

float rf_e8m0_to_float(uint8_t b) {
  return b == 255 ? NAN : ldexpf(1.0f, (int)b - 127);
}

int64_t rf_quant_scale_elems(RfQuantFormat f, int64_t rows, int64_t cols) {
  int64_t br, bc;
  rf_quant_block(f, &br, &bc);
  return ((rows + br - 1) / br) * ((cols + bc - 1) / bc);
}

void rf_quant_matrix(RfQuantFormat f, const uint16_t *w, int64_t rows, int64_t cols, uint8_t *q,
                     void *scales) {
  int64_t br, bc;
  rf_quant_block(f, &br, &bc);
  int64_t nbc = (cols + bc - 1) / bc;
  for (int64_t r0 = 0; r0 < rows; r0 += br)
    for (int64_t c0 = 0; c0 < cols; c0 += bc) {
      int64_t r1 = MIN(rows, r0 + br), c1 = MIN(cols, c0 + bc);
      float amax = 0;
      for (int64_t r = r0; r < r1; r++)
        for (int64_t c = c0; c < c1; c++)
          amax = fmaxf(amax, fabsf(rf_bf16_to_float(w[r * cols + c])));
      float s;
      int64_t si = (r0 / br) * nbc + c0 / bc;
      if (f == RF_QUANT_FP8_BLOCK) {
        s = amax > 0 ? amax / 448.0f : 1.0f;
        ((float *)scales)[si] = s;
      } else {
        uint8_t e = rf_e8m0_from_amax(amax);
        ((uint8_t *)scales)[si] = e;
        s = rf_e8m0_to_float(e);
      }
      for (int64_t r = r0; r < r1; r++)
        for (int64_t c = c0; c < c1; c++)
          q[r * cols + c] = rf_e4m3_from_float(rf_bf16_to_float(w[r * cols + c]) / s);
    }
}

/* ---- the reference quantizer ------------------------------------------------------------ */

/* Every non-negative finite e4m3 value, by code 0 .. 0x7e, increasing. */
static double ref_value(int code) {
  int e = code >> 3, m = code & 7;
  return e ? ldexp(1.0 + m / 8.0, e - 7) : ldexp(m / 8.0, -6);
}

uint8_t rf_quant_ref_e4m3(double x) {
  if (isnan(x)) return 0x7f;
  uint8_t sign = signbit(x) ? 0x80 : 0;
  double a = fabs(x);
  if (a >= ref_value(0x7e)) return sign | 0x7e;
  int lo = 0, hi = 0x7e; /* ref_value(lo) <= a < ref_value(hi) */
  while (hi - lo > 1) {
    int mid = (lo + hi) / 2;
    if (ref_value(mid) <= a)
      lo = mid;
    else
      hi = mid;
  }
  double dl = a - ref_value(lo), dh = ref_value(hi) - a;
  int code = dl < dh ? lo : dh < dl ? hi : (lo % 2 == 0 ? lo : hi);
  return sign | (uint8_t)code;
}

uint8_t rf_quant_ref_e8m0(double amax) {
  if (!(amax > 0)) return 0;
  int e;
  frexp(amax, &e); /* amax = f 2^e, f in [0.5, 1): floor(log2 amax) = e - 1 */
  int code = (e - 1) - 8 + 127;
  return (uint8_t)(code < 0 ? 0 : code > 254 ? 254 : code);
}

void rf_quant_ref_matrix(RfQuantFormat f, const uint16_t *w, int64_t rows, int64_t cols, uint8_t *q,
                         void *scales) {
  int64_t br = f == RF_QUANT_FP8_BLOCK ? 128 : 1, bc = f == RF_QUANT_FP8_BLOCK ? 128 : 32;
  int64_t nbr = (rows + br - 1) / br, nbc = (cols + bc - 1) / bc;
  double *amax = g_new0(double, nbr *nbc);
  for (int64_t i = 0; i < rows * cols; i++) {
    uint32_t u = (uint32_t)w[i] << 16;
    float x;
    memcpy(&x, &u, 4);
    int64_t b = (i / cols / br) * nbc + (i % cols) / bc;
    amax[b] = fmax(amax[b], fabs((double)x));
  }
  for (int64_t i = 0; i < rows * cols; i++) {
    uint32_t u = (uint32_t)w[i] << 16;
    float x, s;
    memcpy(&x, &u, 4);
    int64_t b = (i / cols / br) * nbc + (i % cols) / bc;
    if (f == RF_QUANT_FP8_BLOCK) {
      s = amax[b] > 0 ? (float)amax[b] / 448.0f : 1.0f; /* the rule: fp32 amax / 448 */
      ((float *)scales)[b] = s;
    } else {
      uint8_t e = rf_quant_ref_e8m0(amax[b]);
      ((uint8_t *)scales)[b] = e;
      s = (float)ldexp(1.0, e - 127);
    }
    q[i] = rf_quant_ref_e4m3((double)(x / s)); /* the rule: the fp32 quotient, then rounded */
  }
  g_free(amax);
}

/* ---- quantized problems ----------------------------------------------------------------- */

void rf_problem_quant_free(RfProblemQuant *q) {
  if (!q) return;
  g_free(q->scale_part);
  g_free(q->weight_part);
  g_free(q->target);
  g_free(q->train_dtype);
  g_free(q);
}

gboolean rf_quant_part_quantized(const RfProblem *pb, uint32_t part) {
  const RfProblemQuant *q = pb->quant;
  return q && (q->target[part] || q->weight_part[part] >= 0);
}

/* Dims blocked along (the last two; for mxfp8 only the last), and the block along each. */
static int64_t block_along(const RfProblemQuant *q, const RfTensor *t, int d) {
  if (d == t->ndim - 1) return q->block_cols;
  if (d == t->ndim - 2) return q->block_rows;
  return 1;
}

/* Every shard of part pi on side starts at a block boundary and ends at one or at the tensor's
 * edge, in tensor coordinates. */
static gboolean check_side(const RfProblem *pb, const RfProblemQuant *q, uint32_t pi,
                           const RfSide *side, const char *which, GError **error) {
  const RfPart *part = &pb->model->parts[pi];
  const RfTensor *t = &pb->model->tensors[part->tensor];
  const RfPlacement *p = &side->place[pi];
  if (!p->mesh) return TRUE;
  int ns = rf_placement_nshards(p);
  for (int s = 0; s < ns; s++) {
    RfBox box;
    if (!rf_placement_shard_box(p, s, &box, NULL)) continue;
    for (int d = 0; d < part->ndim; d++) {
      int64_t b = block_along(q, t, d);
      int64_t off = d == part->seg_dim ? part->seg_off : 0;
      int64_t lo = box.lo[d] + off, hi = box.hi[d] + off;
      int64_t cut = lo % b ? lo : hi % b && hi != t->shape[d] ? hi : -1;
      if (cut < 0) continue;
      g_set_error(
          error, RF_ERROR, RF_ERROR_INPUT,
          "%s: %s shard of '%s' has a boundary at %lld on dim %d, inside a %lld-wide block (the "
          "%s split must be a multiple of %lld there%s)",
          rf_quant_format_name(q->format), which, t->name, (long long)cut, d, (long long)b, which,
          (long long)b, !strcmp(which, "training") ? "; or quantize at the receiver" : "");
      return FALSE;
    }
  }
  return TRUE;
}

/* Shape of the scale of box extents [lo, hi) along a blocked dim: the blocks they start. */
static int64_t blocks_of(int64_t lo, int64_t hi, int64_t b) {
  return (hi + b - 1) / b - lo / b;
}

/* Append the scale part of weight part pi (sender): a tensor, a part, and on each side a
 * placement (the weight's, shapes in blocks) and a buffer of its own. */
static gboolean add_scale_part(RfProblem *pb, RfProblemQuant *q, uint32_t pi, GError **error) {
  RfModel *m = pb->model;
  const RfPart wp = m->parts[pi];
  RfTensor t = m->tensors[wp.tensor];
  size_t n = strlen(t.name) - strlen("weight");
  t.name = g_strdup_printf("%.*s%s", (int)n, m->tensors[wp.tensor].name,
                           rf_quant_scale_suffix(q->format));
  t.dtype = rf_quant_scale_dtype(q->format);
  for (int d = 0; d < t.ndim; d++)
    t.shape[d] = blocks_of(0, t.shape[d], block_along(q, &m->tensors[wp.tensor], d));
  /* a tensor split in parts gets one scale tensor: reuse it for the later parts */
  uint32_t ti = m->ntensors;
  for (uint32_t k = 0; k < m->ntensors; k++)
    if (!strcmp(m->tensors[k].name, t.name)) ti = k;
  if (ti == m->ntensors) {
    m->tensors = g_renew(RfTensor, m->tensors, m->ntensors + 1);
    m->tensors[m->ntensors++] = t;
  } else {
    g_free(t.name);
  }
  const RfTensor *wt = &m->tensors[wp.tensor];
  RfPart sp = wp;
  sp.tensor = ti;
  for (int d = 0; d < sp.ndim; d++) {
    int64_t b = block_along(q, wt, d), off = d == wp.seg_dim ? wp.seg_off : 0;
    sp.shape[d] = blocks_of(off, off + wp.shape[d], b);
  }
  sp.seg_off = wp.seg_off / block_along(q, wt, wp.seg_dim);
  uint32_t si = m->nparts;
  m->parts = g_renew(RfPart, m->parts, m->nparts + 1);
  m->parts[m->nparts++] = sp;
  RfSide *sides[2] = {&pb->src, &pb->dst};
  for (int k = 0; k < 2; k++) {
    RfSide *s = sides[k];
    s->place = g_renew(RfPlacement, s->place, si + 1);
    s->local = g_renew(RfLocal, s->local, si + 1);
    RfPlacement p = s->place[pi];
    for (int d = 0; d < p.ndim && p.mesh; d++) {
      int64_t b = block_along(q, wt, d), off = d == wp.seg_dim ? wp.seg_off : 0;
      p.shape[d] = sp.shape[d];
      p.pad_shape[d] = blocks_of(off, off + p.pad_shape[d], b);
    }
    s->place[si] = p;
    s->local[si] = (RfLocal){s->nbufs, 0, 0, 0, 0};
    s->buf_names = g_renew(char *, s->buf_names, s->nbufs + 2);
    s->buf_names[s->nbufs] =
        g_strdup_printf("%s%s%s", m->tensors[ti].name, sp.tag[0] ? "#" : "", sp.tag);
    s->buf_names[s->nbufs + 1] = NULL;
    s->buf_part = g_renew(uint32_t, s->buf_part, s->nbufs + 1);
    s->buf_part[s->nbufs++] = si;
    /* the shards must be the weight's, in blocks (checked, not assumed: nested chunks) */
    if (!p.mesh) continue;
    for (int sh = 0; sh < rf_placement_nshards(&p); sh++) {
      RfBox wb, sb;
      gboolean we = rf_placement_shard_box(&s->place[pi], sh, &wb, NULL);
      gboolean se = rf_placement_shard_box(&p, sh, &sb, NULL);
      gboolean same = we == se;
      for (int d = 0; same && we && d < p.ndim; d++) {
        int64_t b = block_along(q, wt, d), off = d == wp.seg_dim ? wp.seg_off : 0;
        same = sb.lo[d] == (wb.lo[d] + off) / b - off / b &&
               sb.hi[d] == blocks_of(0, wb.hi[d] + off, b) - off / b;
      }
      if (!same) {
        g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                    "%s: the shards of '%s' do not map onto whole blocks of its scale",
                    rf_quant_format_name(q->format), wt->name);
        return FALSE;
      }
    }
  }
  q->scale_part[pi] = (int32_t)si;
  return TRUE;
}

gboolean rf_problem_set_quant(RfProblem *pb, RfQuantFormat f, RfQuantAt a, GError **error) {
  if (f == RF_QUANT_NONE) return TRUE;
  g_return_val_if_fail(!pb->quant, FALSE);
  RfModel *m = pb->model;
  uint32_t np = m->nparts;
  RfProblemQuant *q = g_new0(RfProblemQuant, 1);
  q->format = f;
  q->at = a;
  q->nparts = np;
  rf_quant_block(f, &q->block_rows, &q->block_cols);
  q->target = g_new0(uint8_t, 2 * (size_t)np);
  q->scale_part = g_new(int32_t, 2 * (size_t)np);
  q->weight_part = g_new(int32_t, 2 * (size_t)np);
  q->train_dtype = g_new(RfDtype, 2 * (size_t)np);
  for (uint32_t i = 0; i < 2 * np; i++)
    q->scale_part[i] = q->weight_part[i] = -1;
  for (uint32_t i = 0; i < np; i++) {
    const RfTensor *t = &m->tensors[m->parts[i].tensor];
    q->train_dtype[i] = t->dtype;
    q->target[i] = rf_quant_target(t) &&
                   (t->dtype == RF_DT_BF16 || t->dtype == RF_DT_FP16 || t->dtype == RF_DT_FP32);
    if (!q->target[i]) continue;
    q->ntargets++;
    if (!check_side(pb, q, i, &pb->dst, "inference", error) ||
        (a == RF_QUANT_AT_SENDER && !check_side(pb, q, i, &pb->src, "training", error)))
      goto fail;
  }
  if (a == RF_QUANT_AT_SENDER) {
    /* a buffer holding quantized and unquantized parts would mix element sizes */
    const RfSide *sides[2] = {&pb->src, &pb->dst};
    for (int k = 0; k < 2; k++)
      for (uint32_t i = 0; i < np; i++) {
        const RfSide *s = sides[k];
        if (s->place[i].mesh && q->target[i] != q->target[s->buf_part[s->local[i].buf]]) {
          g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                      "%s at the sender: buffer '%s' holds quantized and unquantized parts; "
                      "quantize at the receiver",
                      rf_quant_format_name(f), s->buf_names[s->local[i].buf]);
          goto fail;
        }
      }
    for (uint32_t i = 0; i < np; i++)
      if (q->target[i] && !add_scale_part(pb, q, i, error)) goto fail;
    for (uint32_t i = np; i < m->nparts; i++) {
      q->weight_part[i] = -1;
      q->train_dtype[i] = rf_quant_scale_dtype(f);
    }
    for (uint32_t i = 0; i < np; i++)
      if (q->target[i]) {
        q->weight_part[q->scale_part[i]] = (int32_t)i;
        m->tensors[m->parts[i].tensor].dtype = RF_DT_FP8;
      }
  }
  pb->quant = q;
  return TRUE;
fail:
  rf_problem_quant_free(q);
  return FALSE;
}

char *rf_quant_describe(const RfProblem *pb) {
  const RfProblemQuant *q = pb->quant;
  if (!q) return NULL;
  g_autoptr(GHashTable) all = g_hash_table_new(NULL, NULL), hit = g_hash_table_new(NULL, NULL);
  for (uint32_t i = 0; i < q->nparts; i++) {
    gpointer t = GUINT_TO_POINTER(pb->model->parts[i].tensor + 1);
    g_hash_table_add(all, t);
    if (q->target[i]) g_hash_table_add(hit, t);
  }
  return g_strdup_printf("%s at the %s: %u of %u tensors (%s)", rf_quant_format_name(q->format),
                         rf_quant_at_name(q->at), g_hash_table_size(hit), g_hash_table_size(all),
                         q->format == RF_QUANT_FP8_BLOCK
                             ? "e4m3, 128x128 blocks, fp32 weight_scale_inv"
                             : "e4m3, 32 along the input, e8m0 weight_scale");
}

uint64_t rf_quant_box_bytes(const RfProblem *pb, uint32_t pi, const RfBox *box) {
  const RfProblemQuant *q = pb->quant;
  const RfPart *part = &pb->model->parts[pi];
  const RfTensor *t = &pb->model->tensors[part->tensor];
  uint64_t elems = (uint64_t)rf_box_volume(box, part->ndim), scales = 1;
  for (int d = 0; d < part->ndim; d++) {
    int64_t off = d == part->seg_dim ? part->seg_off : 0;
    scales *= (uint64_t)blocks_of(box->lo[d] + off, box->hi[d] + off, block_along(q, t, d));
  }
  return elems * (uint64_t)(rf_dtype_size(q->train_dtype[pi]) + 1) +
         scales * (uint64_t)rf_dtype_size(rf_quant_scale_dtype(q->format));
}
