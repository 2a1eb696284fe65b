/* The raw DTensor spec reader (docs/formats.md): tensors with a shape, a dtype and a source and
 * destination mesh, ranks and placements each. */
#include "error.h"
#include "layout_private.h"

#include <json-glib/json-glib.h>
#include <stdlib.h>
#include <string.h>

#include "datafile.h"
#include "jsonutil.h"

/* ---- raw DTensor spec ----------------------------------------------------------------- */

static gboolean parse_side(JsonObject *o, const char *what, const char *tname, int ndim,
                           RfMesh **mesh, int8_t *place, GError **error) {
  JsonArray *md = rf_json_array(o, "mesh"), *rk = rf_json_array(o, "ranks");
  JsonArray *pl = rf_json_array(o, "placements");
  if (!md || !rk || !pl) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "tensor '%s' %s: needs \"mesh\", \"ranks\" and \"placements\" lists", tname, what);
    return FALSE;
  }
  int nd = (int)json_array_get_length(md);
  if (nd < 1 || nd > RF_MAX_DIMS || (int)json_array_get_length(pl) != nd) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "tensor '%s' %s: mesh has %d dims and %u placements (want 1-%d, equal)", tname,
                what, nd, json_array_get_length(pl), RF_MAX_DIMS);
    return FALSE;
  }
  int dims[RF_MAX_DIMS];
  for (int i = 0; i < nd; i++) {
    int64_t v;
    if (!rf_json_array_int(md, i, 1, RF_MAX_RANKS, &v)) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                  "tensor '%s' %s: mesh[%d] must be an integer in 1..%d", tname, what, i,
                  RF_MAX_RANKS);
      return FALSE;
    }
    dims[i] = (int)v;
  }
  guint n = json_array_get_length(rk);
  if (n > RF_MAX_RANKS) {
    g_set_error(error, RF_ERROR, RF_ERROR_LIMIT, "tensor '%s' %s: more than %d ranks", tname, what,
                RF_MAX_RANKS);
    return FALSE;
  }
  g_autofree int *ranks = g_new(int, n > 0 ? n : 1);
  for (guint i = 0; i < n; i++) {
    int64_t v;
    if (!rf_json_array_int(rk, i, 0, RF_MAX_RANKS - 1, &v)) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                  "tensor '%s' %s: ranks[%u] must be an integer in 0..%d", tname, what, i,
                  RF_MAX_RANKS - 1);
      return FALSE;
    }
    ranks[i] = (int)v;
  }
  GError *e = NULL;
  *mesh = rf_mesh_new(nd, dims, ranks, (int)n, &e);
  if (!*mesh) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "tensor '%s' %s: %s", tname, what, e->message);
    g_error_free(e);
    return FALSE;
  }
  for (int i = 0; i < nd; i++) {
    const char *s = NULL;
    if (!rf_json_node_string(json_array_get_element(pl, i), &s) ||
        !rf_placement_parse(s, &place[i], &e)) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "tensor '%s' %s: %s", tname, what,
                  e ? e->message : "placement must be a string");
      g_clear_error(&e);
      return FALSE;
    }
    if (place[i] >= ndim) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                  "tensor '%s' %s: Shard(%d) on a tensor of rank %d", tname, what, place[i], ndim);
      return FALSE;
    }
  }
  return TRUE;
}

static int cmp_int(const void *a, const void *b) {
  return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

static void side_ranks_from_meshes(RfSide *s) {
  GHashTable *set = g_hash_table_new(g_direct_hash, g_direct_equal);
  for (guint i = 0; i < s->meshes->len; i++) {
    RfMesh *m = g_ptr_array_index(s->meshes, i);
    for (int k = 0; k < m->nranks; k++)
      g_hash_table_add(set, GINT_TO_POINTER(m->ranks[k] + 1));
  }
  s->nranks = (int)g_hash_table_size(set);
  s->ranks = g_new(int, s->nranks > 0 ? s->nranks : 1);
  GHashTableIter it;
  gpointer k;
  int i = 0;
  g_hash_table_iter_init(&it, set);
  while (g_hash_table_iter_next(&it, &k, NULL))
    s->ranks[i++] = GPOINTER_TO_INT(k) - 1;
  qsort(s->ranks, s->nranks, sizeof(int), cmp_int);
  g_hash_table_destroy(set);
}

/* Shape of tensor name from a JSON list: every dim 1..2^56, the product checked before each
 * multiply. */
static gboolean parse_shape(JsonArray *sh, const char *name, RfTensor *t, GError **error) {
  t->ndim = (int)json_array_get_length(sh);
  if (t->ndim < 1 || t->ndim > RF_MAX_DIMS) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "spec: tensor '%s' has rank %d (want 1-%d)", name,
                t->ndim, RF_MAX_DIMS);
    return FALSE;
  }
  int64_t vol = 1;
  for (int d = 0; d < t->ndim; d++) {
    if (!rf_json_array_int(sh, d, 1, RF_MAX_ELEMS, &t->shape[d])) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                  "spec: tensor '%s' dim %d must be an integer in 1..2^56", name, d);
      return FALSE;
    }
    if (vol > RF_MAX_ELEMS / t->shape[d]) {
      g_set_error(error, RF_ERROR, RF_ERROR_LIMIT,
                  "spec: tensor '%s' has more than 2^56 elements, the limit", name);
      return FALSE;
    }
    vol *= t->shape[d];
  }
  return TRUE;
}

/* Tensor i of the spec: its tensor, part, and placement on both sides. */
static gboolean parse_tensor(JsonObject *to, guint i, RfProblem *pb, GHashTable *names,
                             GError **error) {
  RfModel *m = pb->model;
  const char *name = rf_json_string(to, "name");
  JsonArray *sh = rf_json_array(to, "shape");
  if (!name || !sh) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "spec: tensor %u needs a \"name\" string and a \"shape\" list", i);
    return FALSE;
  }
  if (g_hash_table_contains(names, name)) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "spec: tensor '%s' appears twice", name);
    return FALSE;
  }
  g_hash_table_add(names, (gpointer)name);
  RfTensor *t = &m->tensors[i];
  t->name = g_strdup(name);
  t->kind = RF_KIND_OTHER;
  t->layer = -1;
  if (!parse_shape(sh, name, t, error)) return FALSE;
  JsonNode *dtn = rf_json_member(to, "dtype");
  const char *dt = "bf16";
  if (dtn && !rf_json_node_string(dtn, &dt)) dt = "?";
  GError *e = NULL;
  if (!rf_dtype_parse(dt, &t->dtype, &e)) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "spec: tensor '%s': %s", name, e->message);
    g_error_free(e);
    return FALSE;
  }
  RfPart *p = &m->parts[i];
  p->tensor = i;
  p->ndim = t->ndim;
  memcpy(p->shape, t->shape, sizeof t->shape);
  p->tag = "";
  for (int s = 0; s < 2; s++) {
    const char *what = s ? "dst" : "src";
    RfSide *side = s ? &pb->dst : &pb->src;
    JsonObject *so = rf_json_object(to, what);
    RfMesh *mesh = NULL;
    int8_t pl[RF_MAX_DIMS];
    if (!so) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "spec: tensor '%s' has no \"%s\"", name, what);
      return FALSE;
    }
    if (!parse_side(so, what, name, t->ndim, &mesh, pl, error)) {
      rf_mesh_free(mesh);
      return FALSE;
    }
    g_ptr_array_add(side->meshes, mesh);
    RfPlacement *P = &side->place[i];
    P->mesh = mesh;
    P->ndim = t->ndim;
    memcpy(P->shape, t->shape, sizeof t->shape);
    memcpy(P->pad_shape, t->shape, sizeof t->shape);
    for (int k = 0; k < RF_MAX_DIMS; k++)
      P->place[k] = RF_REPLICATE;
    memcpy(P->place, pl, mesh->ndim);
    RfLocal l = {(int32_t)i, 0, 0, 0, 0};
    side->local[i] = l;
  }
  return TRUE;
}

/* One buffer per tensor on both sides, the side rank lists, rank r on GPU r. */
static void spec_finish(RfProblem *pb) {
  const RfModel *m = pb->model;
  for (int s = 0; s < 2; s++) {
    RfSide *side = s ? &pb->dst : &pb->src;
    side->nbufs = (int)m->ntensors;
    side->buf_names = g_new0(char *, m->ntensors + 1);
    side->buf_part = g_new(uint32_t, m->ntensors);
    for (guint i = 0; i < m->ntensors; i++) {
      side->buf_names[i] = g_strdup(m->tensors[i].name);
      side->buf_part[i] = i;
    }
    side_ranks_from_meshes(side);
  }
  int maxr = 0;
  for (int i = 0; i < pb->src.nranks; i++)
    maxr = MAX(maxr, pb->src.ranks[i]);
  for (int i = 0; i < pb->dst.nranks; i++)
    maxr = MAX(maxr, pb->dst.ranks[i]);
  pb->nranks = maxr + 1;
  pb->gpu = g_new(int, pb->nranks);
  for (int r = 0; r < pb->nranks; r++)
    pb->gpu[r] = r;
  pb->placement_note = g_strdup_printf("spec: rank r on GPU r, %d GPUs per domain (%s)",
                                       pb->topo->gpus_per_domain, pb->topo->name);
}

RfProblem *rf_problem_new_spec(const char *json, gssize len, RfTopology *topo, GError **error) {
  g_autoptr(RfProblem) pb = g_new0(RfProblem, 1);
  pb->topo = topo;
  GError *e = NULL;
  g_autoptr(JsonNode) root =
      rf_json_parse(json, len < 0 ? strlen(json) : (gsize)len, RF_JSON_STRICT, &e);
  if (!root) {
    g_set_error(error, RF_ERROR, e->code, "spec: %s", e->message);
    g_error_free(e);
    return NULL;
  }
  JsonObject *ro = JSON_NODE_HOLDS_OBJECT(root) ? json_node_get_object(root) : NULL;
  JsonArray *ta = rf_json_array(ro, "tensors");
  if (!ta || json_array_get_length(ta) == 0) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "spec: expected {\"tensors\": [ ... ]} with at least one tensor");
    return NULL;
  }
  guint nt = json_array_get_length(ta);
  /* The tensors become a model of kind-less tensors, one part each, in spec order. */
  RfModel *m = g_new0(RfModel, 1);
  pb->model = m;
  m->name = g_strdup("spec");
  m->family = g_strdup("spec");
  m->ntensors = nt;
  m->tensors = g_new0(RfTensor, nt);
  m->nparts = nt;
  m->parts = g_new0(RfPart, nt);
  rf_side_init(&pb->src, "spec", nt);
  rf_side_init(&pb->dst, "spec", nt);
  g_autoptr(GHashTable) names = g_hash_table_new(g_str_hash, g_str_equal);
  for (guint i = 0; i < nt; i++) {
    JsonNode *tn = json_array_get_element(ta, i);
    JsonObject *to = JSON_NODE_HOLDS_OBJECT(tn) ? json_node_get_object(tn) : NULL;
    if (!parse_tensor(to, i, pb, names, error)) return NULL;
  }
  if (!rf_model_check(m, error)) return NULL; /* the byte total the plan sums */
  spec_finish(pb);
  return g_steal_pointer(&pb);
}
