#include "dtensor.h"
#include "error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rf_chunk(int64_t n, int m, int i, int64_t *lo, int64_t *hi) {
  int64_t c = (n + m - 1) / m;
  int64_t a = (int64_t)i * c;
  if (a > n) a = n;
  int64_t b = a + c;
  if (b > n) b = n;
  *lo = a;
  *hi = b;
}

int64_t rf_box_volume(const RfBox *b, int ndim) {
  int64_t v = 1;
  for (int d = 0; d < ndim; d++) {
    int64_t e = b->hi[d] - b->lo[d];
    if (e <= 0) return 0;
    v *= e;
  }
  return v;
}

gboolean rf_box_empty(const RfBox *b, int ndim) {
  for (int d = 0; d < ndim; d++)
    if (b->hi[d] <= b->lo[d]) return TRUE;
  return FALSE;
}

gboolean rf_box_intersect(const RfBox *a, const RfBox *b, int ndim, RfBox *out) {
  for (int d = 0; d < ndim; d++) {
    int64_t lo = MAX(a->lo[d], b->lo[d]);
    int64_t hi = MIN(a->hi[d], b->hi[d]);
    if (hi <= lo) return FALSE;
    out->lo[d] = lo;
    out->hi[d] = hi;
  }
  return TRUE;
}

int rf_box_subtract(const RfBox *a, const RfBox *cut, int ndim, RfBox *out) {
  RfBox x;
  if (!rf_box_intersect(a, cut, ndim, &x)) {
    out[0] = *a;
    return 1;
  }
  /* peel the slabs below and above the cut along each dim */
  RfBox rem = *a;
  int n = 0;
  for (int d = 0; d < ndim; d++) {
    if (rem.lo[d] < x.lo[d]) {
      out[n] = rem;
      out[n++].hi[d] = x.lo[d];
    }
    if (x.hi[d] < rem.hi[d]) {
      out[n] = rem;
      out[n++].lo[d] = x.hi[d];
    }
    rem.lo[d] = x.lo[d];
    rem.hi[d] = x.hi[d];
  }
  return n;
}

gboolean rf_box_contains(const RfBox *outer, const RfBox *inner, int ndim) {
  for (int d = 0; d < ndim; d++)
    if (inner->lo[d] < outer->lo[d] || inner->hi[d] > outer->hi[d]) return FALSE;
  return TRUE;
}

void rf_box_full(RfBox *b, const int64_t *shape, int ndim) {
  memset(b, 0, sizeof *b);
  for (int d = 0; d < ndim; d++)
    b->hi[d] = shape[d];
}

char *rf_box_format(const RfBox *b, int ndim, char *buf, size_t len) {
  size_t o = 0;
  o += (size_t)snprintf(buf + o, len - o, "[");
  for (int d = 0; d < ndim && o < len; d++)
    o += (size_t)snprintf(buf + o, len - o, "%s%lld:%lld", d ? "," : "", (long long)b->lo[d],
                          (long long)b->hi[d]);
  if (o < len) snprintf(buf + o, len - o, "]");
  return buf;
}

static int cmp_pos_by_rank(const void *a, const void *b, void *ud) {
  const int *ranks = ud;
  int ra = ranks[*(const int *)a], rb = ranks[*(const int *)b];
  return (ra > rb) - (ra < rb);
}

RfMesh *rf_mesh_new(int ndim, const int *dims, const int *ranks, int nranks, GError **error) {
  if (ndim < 1 || ndim > RF_MAX_DIMS) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "mesh must have 1 to %d dims, got %d", RF_MAX_DIMS,
                ndim);
    return NULL;
  }
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) {
    if (dims[i] < 1) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "mesh dim %d is %d, must be >= 1", i, dims[i]);
      return NULL;
    }
    n *= dims[i];
    if (n > RF_MAX_RANKS) {
      g_set_error(error, RF_ERROR, RF_ERROR_LIMIT, "mesh has more than %d positions", RF_MAX_RANKS);
      return NULL;
    }
  }
  if (n != nranks) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "mesh of %lld positions has %d ranks",
                (long long)n, nranks);
    return NULL;
  }
  RfMesh *m = g_new0(RfMesh, 1);
  m->ndim = ndim;
  memcpy(m->dims, dims, sizeof(int) * ndim);
  m->nranks = nranks;
  m->ranks = g_memdup2(ranks, sizeof(int) * nranks);
  m->by_rank = g_new(int, nranks);
  for (int i = 0; i < nranks; i++) {
    if (ranks[i] < 0 || ranks[i] >= RF_MAX_RANKS) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "rank id %d outside 0..%d", ranks[i],
                  RF_MAX_RANKS - 1);
      rf_mesh_free(m);
      return NULL;
    }
    m->by_rank[i] = i;
  }
  g_qsort_with_data(m->by_rank, nranks, sizeof(int), cmp_pos_by_rank, m->ranks);
  for (int i = 1; i < nranks; i++)
    if (m->ranks[m->by_rank[i]] == m->ranks[m->by_rank[i - 1]]) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "rank %d appears twice in one mesh",
                  m->ranks[m->by_rank[i]]);
      rf_mesh_free(m);
      return NULL;
    }
  return m;
}

void rf_mesh_free(RfMesh *m) {
  if (!m) return;
  g_free(m->ranks);
  g_free(m->by_rank);
  g_free(m);
}

typedef struct {
  const int *ranks;
  int rank;
} PosKey;

static int pos_cmp(const void *key, const void *elem) {
  const PosKey *k = key;
  int r = k->ranks[*(const int *)elem];
  return (k->rank > r) - (k->rank < r);
}

int rf_mesh_position(const RfMesh *m, int rank) {
  PosKey k = {m->ranks, rank};
  const int *p = bsearch(&k, m->by_rank, (size_t)m->nranks, sizeof *m->by_rank, pos_cmp);
  return p ? *p : -1;
}

gboolean rf_placement_check(const RfPlacement *p, GError **error) {
  if (p->ndim < 1 || p->ndim > RF_MAX_DIMS) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "tensor rank must be 1 to %d, got %d", RF_MAX_DIMS,
                p->ndim);
    return FALSE;
  }
  for (int d = 0; d < p->ndim; d++) {
    if (p->shape[d] < 1) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "tensor dim %d is %lld, must be >= 1", d,
                  (long long)p->shape[d]);
      return FALSE;
    }
    if (p->pad_shape[d] < p->shape[d]) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                  "padded dim %d (%lld) is smaller than the tensor (%lld)", d,
                  (long long)p->pad_shape[d], (long long)p->shape[d]);
      return FALSE;
    }
  }
  for (int i = 0; i < p->mesh->ndim; i++) {
    int pl = p->place[i];
    if (pl != RF_REPLICATE && (pl < 0 || pl >= p->ndim)) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "placement Shard(%d) on a tensor of rank %d", pl,
                  p->ndim);
      return FALSE;
    }
  }
  return TRUE;
}

int rf_placement_nshards(const RfPlacement *p) {
  int n = 1;
  for (int i = 0; i < p->mesh->ndim; i++)
    if (p->place[i] != RF_REPLICATE) n *= p->mesh->dims[i];
  return n;
}

int rf_placement_nreplicas(const RfPlacement *p) {
  return p->mesh->nranks / rf_placement_nshards(p);
}

gboolean rf_placement_shard_box(const RfPlacement *p, int s, RfBox *box, RfBox *chunk) {
  RfBox c;
  rf_box_full(&c, p->pad_shape, p->ndim);
  /* Shard index is row-major over the sharding mesh dims: peel coordinates from the last. */
  int coord[RF_MAX_DIMS];
  for (int i = p->mesh->ndim - 1; i >= 0; i--) {
    if (p->place[i] == RF_REPLICATE) continue;
    coord[i] = s % p->mesh->dims[i];
    s /= p->mesh->dims[i];
  }
  /* Nest left to right: each sharding mesh dim chunks the current range of its tensor dim. */
  for (int i = 0; i < p->mesh->ndim; i++) {
    int d = p->place[i];
    if (d == RF_REPLICATE) continue;
    int64_t lo, hi;
    rf_chunk(c.hi[d] - c.lo[d], p->mesh->dims[i], coord[i], &lo, &hi);
    c.hi[d] = c.lo[d] + hi;
    c.lo[d] += lo;
  }
  if (chunk) *chunk = c;
  RfBox b = c;
  gboolean nonempty = TRUE;
  for (int d = 0; d < p->ndim; d++) {
    if (b.hi[d] > p->shape[d]) b.hi[d] = p->shape[d];
    if (b.lo[d] > b.hi[d]) b.lo[d] = b.hi[d];
    if (b.hi[d] <= b.lo[d]) nonempty = FALSE;
  }
  if (box) *box = b;
  return nonempty;
}

/* Mesh position of (shard s, replica r): interleave the two row-major indices. */
int rf_placement_rank(const RfPlacement *p, int s, int r) {
  int pos = 0, stride = 1;
  for (int i = p->mesh->ndim - 1; i >= 0; i--) {
    int c;
    if (p->place[i] == RF_REPLICATE) {
      c = r % p->mesh->dims[i];
      r /= p->mesh->dims[i];
    } else {
      c = s % p->mesh->dims[i];
      s /= p->mesh->dims[i];
    }
    pos += c * stride;
    stride *= p->mesh->dims[i];
  }
  return p->mesh->ranks[pos];
}

void rf_placement_locate(const RfPlacement *p, int pos, int *shard, int *replica) {
  int coord[RF_MAX_DIMS];
  for (int i = p->mesh->ndim - 1; i >= 0; i--) {
    coord[i] = pos % p->mesh->dims[i];
    pos /= p->mesh->dims[i];
  }
  int s = 0, r = 0;
  for (int i = 0; i < p->mesh->ndim; i++) {
    if (p->place[i] == RF_REPLICATE)
      r = r * p->mesh->dims[i] + coord[i];
    else
      s = s * p->mesh->dims[i] + coord[i];
  }
  if (shard) *shard = s;
  if (replica) *replica = r;
}

gboolean rf_placement_parse(const char *s, int8_t *out, GError **error) {
  char *end = NULL;
  if (!strcmp(s, "R") || !strcmp(s, "Replicate()") || !strcmp(s, "Replicate")) {
    *out = RF_REPLICATE;
    return TRUE;
  }
  long d = -1;
  if (s[0] == 'S' && g_ascii_isdigit(s[1])) {
    d = strtol(s + 1, &end, 10);
    if (*end) d = -1;
  } else if (g_str_has_prefix(s, "Shard(")) {
    d = strtol(s + 6, &end, 10);
    if (end == s + 6 || strcmp(end, ")")) d = -1;
  }
  if (d < 0 || d >= RF_MAX_DIMS) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "bad placement '%s' (want S<d>, Shard(d), R or Replicate())", s);
    return FALSE;
  }
  *out = (int8_t)d;
  return TRUE;
}
