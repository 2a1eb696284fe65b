/* Span algebra of the real engine: runs of a box inside another box, merging two segmentations
 * of one element sequence, covering a box with the boxes a rank holds, and cutting copy and run
 * lists into chunks. Pure host code, no backend. */
#include "engine_int.h"

#include <string.h>

/* Runs of sub (inside outer) in outer's row-major order, in row-major order of sub. */
void rf_box_spans(const RfBox *outer, const RfBox *sub, int ndim, GArray *out) {
  int64_t ext[RF_MAX_DIMS], oext[RF_MAX_DIMS];
  if (ndim <= 0) { /* a scalar: one element */
    Span s = {0, 1};
    g_array_append_val(out, s);
    return;
  }
  for (int d = 0; d < ndim; d++) {
    ext[d] = sub->hi[d] - sub->lo[d];
    oext[d] = outer->hi[d] - outer->lo[d];
    if (ext[d] <= 0) return;
  }
  /* Dims after j are covered whole: a run spans sub's extent along j times those dims. */
  int j = ndim - 1;
  int64_t inner = 1;
  while (j > 0 && ext[j] == oext[j])
    inner *= ext[j--];
  int64_t len = ext[j] * inner;
  int64_t idx[RF_MAX_DIMS] = {0};
  for (;;) {
    int64_t off = 0;
    for (int d = 0; d < ndim; d++) {
      int64_t c = sub->lo[d] - outer->lo[d] + (d < j ? idx[d] : 0);
      off = off * oext[d] + c;
    }
    Span s = {off, len};
    if (out->len &&
        g_array_index(out, Span, out->len - 1).off + g_array_index(out, Span, out->len - 1).len ==
            off)
      g_array_index(out, Span, out->len - 1).len += len;
    else
      g_array_append_val(out, s);
    int d = j - 1;
    while (d >= 0 && ++idx[d] == ext[d])
      idx[d--] = 0;
    if (d < 0) break;
  }
}

void rf_span_cb(int64_t off, int64_t len, void *ud) {
  GArray *a = ud;
  Span s = {off, len};
  g_array_append_val(a, s);
}

gboolean rf_merge_spans(const GArray *A, const GArray *B, RfMergeFn fn, void *ud) {
  guint i = 0, k = 0;
  int64_t ai = 0, bk = 0; /* consumed in current spans */
  while (i < A->len && k < B->len) {
    const Span *a = &g_array_index(A, Span, i), *b = &g_array_index(B, Span, k);
    int64_t n = MIN(a->len - ai, b->len - bk);
    if (n > 0) fn(a->off + ai, b->off + bk, n, ud);
    ai += n;
    bk += n;
    if (ai == a->len) i++, ai = 0;
    if (bk == b->len) k++, bk = 0;
  }
  return i == A->len && k == B->len;
}

/* Cover want with the held boxes from..: FALSE when some of it is held by none. */
gboolean rf_cover(const RfBox *want, int ndim, const CoverSrc *c, int nc, int from, uint64_t xfer,
                  GArray *out) {
  for (int i = from; i < nc; i++) {
    RfBox in;
    if (!rf_box_intersect(want, &c[i].box, ndim, &in)) continue;
    Decomp d = {xfer, in, c[i].origin};
    g_array_append_val(out, d);
    RfBox rest[2 * RF_MAX_DIMS];
    int n = rf_box_subtract(want, &in, ndim, rest);
    for (int k = 0; k < n; k++)
      if (!rf_cover(&rest[k], ndim, c, nc, i + 1, xfer, out)) return FALSE;
    return TRUE;
  }
  return FALSE;
}

void rf_real_chunk_copies(GArray *copies, uint64_t chunk_bytes) {
  g_return_if_fail(chunk_bytes >= 16 && chunk_bytes % 16 == 0);
  guint n = copies->len;
  uint64_t extra = 0;
  for (guint i = 0; i < n; i++) {
    uint64_t b = g_array_index(copies, RfCopy, i).bytes;
    extra += b > chunk_bytes ? (b - 1) / chunk_bytes : 0;
  }
  if (!extra) return;
  /* Back to front, in place: each copy's chunks take the slots from its new index on. */
  guint w = n + (guint)extra;
  g_array_set_size(copies, w);
  for (guint i = n; i-- > 0;) {
    RfCopy c = g_array_index(copies, RfCopy, i);
    uint64_t k = c.bytes > chunk_bytes ? (c.bytes - 1) / chunk_bytes + 1 : 1;
    w -= (guint)k;
    for (uint64_t j = 0; j < k; j++) {
      RfCopy *o = &g_array_index(copies, RfCopy, w + j);
      *o = c;
      /* The same advance on both sides keeps src_off - dst_off, hence their alignment. */
      o->src_off = c.src_off + j * chunk_bytes;
      o->dst_off = c.dst_off + j * chunk_bytes;
      o->bytes = MIN(chunk_bytes, c.bytes - j * chunk_bytes);
    }
  }
}

void rf_real_chunk_runs(GArray *runs, const RfBoxDesc *boxes, uint64_t chunk_bytes) {
  g_return_if_fail(chunk_bytes >= 16 && chunk_bytes % 16 == 0);
  GArray *out = g_array_sized_new(FALSE, FALSE, sizeof(RfRun), runs->len);
  for (guint i = 0; i < runs->len; i++) {
    RfRun r = g_array_index(runs, RfRun, i);
    uint64_t es = (uint64_t)MAX(1, boxes[r.box].esize);
    uint64_t per = MAX(1, chunk_bytes / es);
    for (uint64_t j = 0; j < r.elems; j += per) {
      RfRun o = r;
      o.off = r.off + j;
      o.seq0 = r.seq0 + j;
      o.elems = MIN(per, r.elems - j);
      g_array_append_val(out, o);
    }
    if (!r.elems) g_array_append_val(out, r);
  }
  g_array_set_size(runs, 0);
  g_array_append_vals(runs, out->data, out->len);
  g_array_free(out, TRUE);
}

uint64_t rf_real_order_copies(GArray *copies, uint64_t small_bytes) {
  const guint n = copies->len;
  if (!n) return 0;
  g_autofree RfCopy *large = g_new(RfCopy, n);
  guint ns = 0, nl = 0;
  for (guint i = 0; i < n; i++) {
    const RfCopy c = g_array_index(copies, RfCopy, i);
    if (c.bytes <= small_bytes)
      g_array_index(copies, RfCopy, ns++) = c; /* ns <= i: never ahead of the reading */
    else
      large[nl++] = c;
  }
  memcpy(&g_array_index(copies, RfCopy, ns), large, sizeof(RfCopy) * nl);
  return ns;
}
