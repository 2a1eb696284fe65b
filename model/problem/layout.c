/* Layout strings ("TP4xPP8xEP16"), sides, and the local memory map of a rank's shards. */
#include "error.h"
#include "layout_private.h"

#include <stdlib.h>
#include <string.h>

/* ---- layout strings -------------------------------------------------------------------- */

gboolean rf_parallel_parse(const char *s, RfParallel *out, GError **error) {
  RfParallel p = {1, 1, 1, 1, 1, 1, 1, FALSE, FALSE};
  gboolean seen[7] = {0};
  if (!s || !*s) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "empty layout string (want e.g. TP4xPP8xEP16)");
    return FALSE;
  }
  char **tok = g_strsplit_set(s, "xX*", -1);
  gboolean ok = TRUE;
  for (int i = 0; ok && tok[i]; i++) {
    static const char *const names[] = {"TP", "PP", "EP", "ETP", "CP", "DP", "ADP"};
    const char *t = tok[i];
    size_t n = 0;
    while (g_ascii_isalpha(t[n]))
      n++;
    int which = -1;
    for (int k = 0; k < 7; k++)
      if (strlen(names[k]) == n && !g_ascii_strncasecmp(t, names[k], n)) which = k;
    /* digits only, no sign, space or leading zero: "TP+2", "TP 2" and "TP02" are not layouts */
    size_t nd = strspn(t + n, "0123456789");
    if (which < 0 || nd == 0 || t[n + nd] || t[n] == '0') {
      g_autofree char *es = g_strescape(s, NULL), *et = g_strescape(t, NULL);
      g_set_error(
          error, RF_ERROR, RF_ERROR_INPUT,
          "bad layout '%s': '%s' is not TP<n>, PP<n>, EP<n>, ETP<n>, CP<n>, DP<n> or ADP<n> "
          "(n a whole number from 1, no sign, space or leading zero)",
          es, et);
      ok = FALSE;
      break;
    }
    if (nd > 7 || strtol(t + n, NULL, 10) > RF_MAX_LAYOUT) {
      g_set_error(error, RF_ERROR, RF_ERROR_LIMIT, "bad layout '%s': %s is above the limit of %d",
                  s, t, RF_MAX_LAYOUT);
      ok = FALSE;
      break;
    }
    long v = strtol(t + n, NULL, 10);
    if (seen[which]) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "bad layout '%s': %s given twice", s,
                  names[which]);
      ok = FALSE;
      break;
    }
    seen[which] = TRUE;
    int *f[] = {&p.tp, &p.pp, &p.ep, &p.etp, &p.cp, &p.dp, &p.adp};
    *f[which] = (int)v;
  }
  g_strfreev(tok);
  if (!ok) return FALSE;
  p.dp_given = seen[5];
  p.ep_given = seen[2];
  *out = p;
  return TRUE;
}

char *rf_parallel_format(const RfParallel *p) {
  GString *s = g_string_new(NULL);
  const int v[] = {p->tp, p->cp, p->pp, p->ep, p->etp, p->dp, p->adp};
  const char *n[] = {"TP", "CP", "PP", "EP", "ETP", "DP", "ADP"};
  for (int i = 0; i < 7; i++)
    if (v[i] > 1 || (i == 0)) g_string_append_printf(s, "%s%s%d", s->len ? "x" : "", n[i], v[i]);
  return g_string_free(s, FALSE);
}

static const char *const infer_names[RF_INFER_COUNT] = {"vllm", "sglang", "megatron"};

const char *rf_infer_framework_name(RfInferFramework f) {
  return (unsigned)f < RF_INFER_COUNT ? infer_names[f] : "?";
}

gboolean rf_infer_framework_parse(const char *s, RfInferFramework *out, GError **error) {
  for (int i = 0; i < RF_INFER_COUNT; i++)
    if (!g_strcmp0(s, infer_names[i])) {
      *out = (RfInferFramework)i;
      return TRUE;
    }
  g_autofree char *es = g_strescape(s ? s : "", NULL);
  g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
              "unknown inference framework '%s' (vllm, sglang or megatron)", es);
  return FALSE;
}

/* ---- sides ----------------------------------------------------------------------------- */

void rf_side_init(RfSide *s, const char *framework, uint32_t nparts) {
  memset(s, 0, sizeof *s);
  s->framework = g_strdup(framework);
  s->place = g_new0(RfPlacement, nparts);
  s->local = g_new0(RfLocal, nparts);
  s->meshes = g_ptr_array_new_with_free_func((GDestroyNotify)rf_mesh_free);
}

void rf_side_clear(RfSide *s) {
  g_free(s->framework);
  g_free(s->ranks);
  g_free(s->place);
  g_free(s->local);
  if (s->buf_names) g_strfreev(s->buf_names);
  g_free(s->buf_part);
  if (s->meshes) g_ptr_array_unref(s->meshes);
  memset(s, 0, sizeof *s);
}

static int int_cmp(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

int rf_side_index(const RfSide *side, int rank) {
  const int *p = bsearch(&rank, side->ranks, (size_t)side->nranks, sizeof *side->ranks, int_cmp);
  return p ? (int)(p - side->ranks) : -1;
}

gboolean rf_side_rank_shard(const RfSide *side, uint32_t part, int rank, RfBox *box, RfBox *chunk) {
  const RfPlacement *p = &side->place[part];
  if (!p->mesh || rf_side_rank_lost(side, rank)) return FALSE;
  int pos = rf_mesh_position(p->mesh, rank);
  if (pos < 0) return FALSE;
  int s;
  rf_placement_locate(p, pos, &s, NULL);
  return rf_placement_shard_box(p, s, box, chunk);
}

/* Local buffer extents of a part's shard: the chunk, widened along the fuse dim. */
static void local_extents(const RfLocal *l, const RfPlacement *p, const RfBox *chunk,
                          int64_t *ext) {
  for (int d = 0; d < p->ndim; d++)
    ext[d] = chunk->hi[d] - chunk->lo[d];
  if (l->period > 0) {
    int f = l->fuse_dim;
    int64_t nblk = l->blk > 0 ? (ext[f] + l->blk - 1) / l->blk : 1;
    ext[f] = l->period * nblk;
  }
}

int64_t rf_side_buffer_elems(const RfSide *side, int buf, int rank) {
  uint32_t part = side->buf_part[buf];
  RfBox chunk;
  const RfPlacement *p = &side->place[part];
  if (!p->mesh || rf_side_rank_lost(side, rank)) return 0;
  int pos = rf_mesh_position(p->mesh, rank);
  if (pos < 0) return 0;
  int s;
  rf_placement_locate(p, pos, &s, NULL);
  rf_placement_shard_box(p, s, NULL, &chunk);
  int64_t ext[RF_MAX_DIMS], v = 1;
  local_extents(&side->local[part], p, &chunk, ext);
  for (int d = 0; d < p->ndim; d++)
    v *= ext[d];
  return v;
}

static int64_t fused_index(const RfLocal *l, int d, int64_t x) {
  if (l->period <= 0 || d != l->fuse_dim) return x;
  if (l->blk > 0) return (x / l->blk) * l->period + l->off + x % l->blk;
  return l->off + x;
}

int64_t rf_local_offset(const RfSide *side, uint32_t part, const RfBox *chunk, const int64_t *g) {
  const RfLocal *l = &side->local[part];
  const RfPlacement *p = &side->place[part];
  int64_t ext[RF_MAX_DIMS];
  local_extents(l, p, chunk, ext);
  int64_t off = 0;
  for (int d = 0; d < p->ndim; d++)
    off = off * ext[d] + fused_index(l, d, g[d] - chunk->lo[d]);
  return off;
}

int64_t rf_local_runs(const RfSide *side, uint32_t part, const RfBox *chunk, const RfBox *sub,
                      RfRunFn fn, void *ud) {
  const RfLocal *l = &side->local[part];
  const RfPlacement *p = &side->place[part];
  int nd = p->ndim, last = nd - 1;
  if (rf_box_empty(sub, nd)) return 0;
  int64_t g[RF_MAX_DIMS];
  for (int d = 0; d < nd; d++)
    g[d] = sub->lo[d];
  int64_t runs = 0, pend_off = -1, pend_len = 0;
  /* Along the last dim a run breaks only at fused block boundaries. */
  int64_t brk = (l->period > 0 && l->fuse_dim == last && l->blk > 0) ? l->blk : 0;
  for (;;) {
    int64_t x = g[last];
    while (x < sub->hi[last]) {
      int64_t len = sub->hi[last] - x;
      if (brk) {
        int64_t in = (x - chunk->lo[last]) % brk;
        if (len > brk - in) len = brk - in;
      }
      g[last] = x;
      int64_t off = rf_local_offset(side, part, chunk, g);
      if (pend_len && pend_off + pend_len == off) {
        pend_len += len;
      } else {
        if (pend_len) {
          fn(pend_off, pend_len, ud);
          runs++;
        }
        pend_off = off;
        pend_len = len;
      }
      x += len;
    }
    g[last] = sub->lo[last];
    int d = last - 1;
    while (d >= 0 && ++g[d] >= sub->hi[d]) {
      g[d] = sub->lo[d];
      d--;
    }
    if (d < 0) break;
  }
  if (pend_len) {
    fn(pend_off, pend_len, ud);
    runs++;
  }
  return runs;
}
