/* Framework presets: Megatron training and vLLM / SGLang / Megatron inference placements of
 * every part of a model, and where each global rank sits (which GPU, so which NVLink domain). */
#include "error.h"
#include "layout_private.h"

#include <string.h>

/* ---- placement helpers for presets ---------------------------------------------------- */

typedef struct {
  RfProblem *pb;
  RfSide *side;
  GHashTable *bufs; /* name -> index + 1 */
  GPtrArray *buf_names;
  GArray *buf_part;
  GError **error;
  gboolean failed;
  /* Megatron */
  int nstages;
  RfMesh **dense;  /* per PP stage: [DP, CP, TP] */
  RfMesh **expert; /* per PP stage: [EDP, EP, ETP] */
  /* vLLM */
  RfMesh *inf;           /* [DP, TP] */
  GHashTable *kv_meshes; /* base mesh -> mesh with TP split as [kv, TP / kv] */
  RfMesh *inf_ep;        /* [EP] when expert parallel over the whole side (EP = TP x DP) */
  GHashTable *gated;     /* gate_key of every expert block with a gate projection (w13) */
} Ctx;

static RfMesh *mesh_add(Ctx *c, int ndim, const int *dims, const int *ranks, int n) {
  RfMesh *m = rf_mesh_new(ndim, dims, ranks, n, c->error);
  if (m)
    g_ptr_array_add(c->side->meshes, m);
  else
    c->failed = TRUE;
  return m;
}

/* The dense mesh with its last (TP) dim split into [kv, TP / kv], cached per base mesh. */
static const RfMesh *kv_mesh(Ctx *c, const RfMesh *base, int kv) {
  RfMesh *m = g_hash_table_lookup(c->kv_meshes, base);
  if (m) return m;
  int dims[RF_MAX_DIMS + 1], nd = base->ndim;
  memcpy(dims, base->dims, sizeof(int) * nd);
  dims[nd - 1] = kv;
  dims[nd] = base->dims[nd - 1] / kv;
  m = mesh_add(c, nd + 1, dims, base->ranks, base->nranks);
  if (m) g_hash_table_insert(c->kv_meshes, (gpointer)base, m);
  return m;
}

/* Buffer index by name, created on first use; first part stored in it becomes its witness. */
static int buffer(Ctx *c, const char *name, uint32_t part) {
  gpointer v = g_hash_table_lookup(c->bufs, name);
  if (v) return GPOINTER_TO_INT(v) - 1;
  int i = (int)c->buf_names->len;
  g_ptr_array_add(c->buf_names, g_strdup(name));
  g_array_append_val(c->buf_part, part);
  g_hash_table_insert(c->bufs, g_strdup(name), GINT_TO_POINTER(i + 1));
  return i;
}

static void set_own(Ctx *c, uint32_t pi) {
  const RfTensor *t = &c->pb->model->tensors[c->pb->model->parts[pi].tensor];
  const RfPart *part = &c->pb->model->parts[pi];
  char *name = part->tag[0] ? g_strdup_printf("%s#%s", t->name, part->tag) : g_strdup(t->name);
  RfLocal l = {buffer(c, name, pi), 0, 0, 0, 0};
  c->side->local[pi] = l;
  g_free(name);
}

static void set_fused(Ctx *c, uint32_t pi, const char *bufname, int fuse_dim, int64_t off,
                      int64_t blk, int64_t period) {
  RfLocal l = {buffer(c, bufname, pi), (int8_t)fuse_dim, off, blk, period};
  c->side->local[pi] = l;
}

static void set_place(Ctx *c, uint32_t pi, const RfMesh *m, const int8_t *place) {
  const RfPart *part = &c->pb->model->parts[pi];
  RfPlacement *p = &c->side->place[pi];
  p->mesh = m;
  p->ndim = part->ndim;
  memcpy(p->shape, part->shape, sizeof(int64_t) * part->ndim);
  memcpy(p->pad_shape, part->shape, sizeof(int64_t) * part->ndim);
  for (int i = 0; i < RF_MAX_DIMS; i++)
    p->place[i] = RF_REPLICATE;
  memcpy(p->place, place, m->ndim);
}

/* n-way split of part dim d must be even (the frameworks assert it). */
static gboolean need_div(Ctx *c, uint32_t pi, int d, int64_t n, const char *what) {
  const RfPart *part = &c->pb->model->parts[pi];
  if (n <= 1 || part->shape[d] % n == 0) return TRUE;
  if (c->failed) return FALSE; /* the first failure is the one reported */
  const RfTensor *t = &c->pb->model->tensors[part->tensor];
  g_set_error(c->error, RF_ERROR, RF_ERROR_INPUT, "%s: %s%lld does not divide %s%s%s dim %d (%lld)",
              c->side->framework, what, (long long)n, t->name, part->tag[0] ? "#" : "", part->tag,
              d, (long long)part->shape[d]);
  c->failed = TRUE;
  return FALSE;
}

static gboolean need(Ctx *c, gboolean cond, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
static gboolean need(Ctx *c, gboolean cond, const char *fmt, ...) {
  if (cond || c->failed) return cond;
  va_list ap;
  va_start(ap, fmt);
  char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error(c->error, RF_ERROR, RF_ERROR_INPUT, "%s: %s", c->side->framework, msg);
  g_free(msg);
  c->failed = TRUE;
  return FALSE;
}

static int64_t round_up(int64_t x, int64_t m) {
  return (x + m - 1) / m * m;
}

/* Layer prefix of a tensor name up to and including the block ("model.layers.3.self_attn."). */
static char *block_of(const char *name) {
  const char *dot = strrchr(name, '.');
  if (!dot) return g_strdup(name);
  /* drop ".weight" then the projection name */
  char *s = g_strndup(name, dot - name);
  char *d2 = strrchr(s, '.');
  if (d2) d2[1] = 0;
  return s;
}

/* Shared layout rules of both frameworks; tp = tensor-parallel size of the mesh's last dim. */
typedef struct {
  const RfMesh *mesh; /* dense mesh, tensor-parallel dim last */
  int tp;
  gboolean megatron;
} Dense;

static void place_tp(Ctx *c, uint32_t pi, const Dense *D, int tdim) {
  int8_t pl[RF_MAX_DIMS];
  for (int i = 0; i < D->mesh->ndim; i++)
    pl[i] = RF_REPLICATE;
  if (tdim >= 0) pl[D->mesh->ndim - 1] = (int8_t)tdim;
  set_place(c, pi, D->mesh, pl);
  if (tdim >= 0) need_div(c, pi, tdim, D->tp, "TP");
}

/* Embedding and LM head: rows split TP ways over a padded vocabulary. Megatron pads the
 * vocab to a multiple of 128 x TP; vLLM to a multiple of 64, then / TP. */
static void place_vocab(Ctx *c, uint32_t pi, const Dense *D) {
  const RfPart *part = &c->pb->model->parts[pi];
  const RfTensor *t = &c->pb->model->tensors[part->tensor];
  int tp = D->tp;
  place_tp(c, pi, D, -1);
  RfPlacement *p = &c->side->place[pi];
  p->place[D->mesh->ndim - 1] = 0;
  int64_t padded =
      D->megatron ? round_up(part->shape[0], 128LL * tp) : round_up(part->shape[0], 64);
  need(c, padded % tp == 0, "TP%d does not divide the padded vocabulary of %s (%lld)", tp, t->name,
       (long long)padded);
  p->pad_shape[0] = padded;
  set_own(c, pi);
}

/* Which of q (0), k (1), v (2) a weight or bias kind is. */
static int qkv_role(RfKind k) {
  return k == RF_KIND_ATTN_K || k == RF_KIND_ATTN_K_BIAS   ? 1
         : k == RF_KIND_ATTN_V || k == RF_KIND_ATTN_V_BIAS ? 2
                                                           : 0;
}

/* Local rows of q, k or v (weight or bias) in the fused qkv (qkv_bias) buffer of its layer. */
static void qkv_local(Ctx *c, uint32_t pi, const Dense *D) {
  const RfModel *m = c->pb->model;
  const RfPart *part = &m->parts[pi];
  const RfTensor *t = &m->tensors[part->tensor];
  int64_t hd = m->arch.head_dim, kv = m->arch.kv_heads;
  int tp = D->tp;
  int role = qkv_role(t->kind);
  gboolean bias = t->kind >= RF_KIND_ATTN_Q_BIAS && t->kind <= RF_KIND_ATTN_V_BIAS;
  /* q_proj rows (with a per-head output gate, 2 x heads x hd): q, k, v (and their biases) are
   * consecutive tensors of one layer in every family. */
  uint32_t qi = part->tensor - (uint32_t)role;
  int64_t qk_rows_total = m->tensors[qi].shape[0];
  int64_t qpg = qk_rows_total / kv; /* q rows per KV group */
  g_autofree char *blk = block_of(t->name);
  g_autofree char *bname = g_strdup_printf("%s%s", blk, bias ? "qkv_bias" : "qkv");
  if (D->megatron) {
    /* Megatron fuses per KV group: [q_g | k_g | v_g] for each local group; with replicated
     * KV heads a rank holds part of one group: [q_local | k | v]. The linear_qkv bias is
     * laid out the same way. */
    int64_t qb = tp <= kv ? qpg : qk_rows_total / tp;
    int64_t period = qb + 2 * hd;
    int64_t off = role == 0 ? 0 : role == 1 ? qb : qb + hd;
    int64_t b = role == 0 ? qb : hd;
    set_fused(c, pi, bname, 0, off, tp <= kv ? b : 0, period);
  } else {
    /* vLLM: [q_local | k_local | v_local]; a replicated KV head is one head per rank. */
    int64_t q_loc_rows = qk_rows_total / tp;
    int64_t kv_loc_rows = tp <= kv ? kv * hd / tp : hd;
    int64_t off = role == 0 ? 0 : role == 1 ? q_loc_rows : q_loc_rows + kv_loc_rows;
    set_fused(c, pi, bname, 0, off, 0, q_loc_rows + 2 * kv_loc_rows);
  }
}

/* Rows of q (q = TRUE) or k / v: split by heads, KV heads replicated when TP exceeds them.
 * FALSE when the placement failed. */
static gboolean place_head_rows(Ctx *c, uint32_t pi, const Dense *D, gboolean q) {
  const RfArch *a = &c->pb->model->arch;
  int64_t kv = a->kv_heads;
  int tp = D->tp;
  need(c, a->heads % tp == 0, "TP%d does not divide %lld attention heads", tp, (long long)a->heads);
  need(c, a->heads % kv == 0, "%lld KV heads do not divide %lld attention heads", (long long)kv,
       (long long)a->heads);
  if (q) {
    place_tp(c, pi, D, 0);
  } else if (tp <= kv) {
    need(c, kv % tp == 0, "TP%d does not divide %lld KV heads", tp, (long long)kv);
    place_tp(c, pi, D, 0);
  } else {
    /* More ranks than KV heads: each KV head is replicated on TP / kv ranks (vLLM does this;
     * for Megatron we assume the same, as the reported Nemotron-3 Ultra TP8 run needs). */
    need(c, tp % kv == 0, "TP%d is not a multiple of %lld KV heads", tp, (long long)kv);
    if (c->failed) return FALSE;
    const RfMesh *km = kv_mesh(c, D->mesh, (int)kv);
    if (!km) return FALSE;
    int8_t pl[RF_MAX_DIMS];
    for (int i = 0; i < km->ndim; i++)
      pl[i] = RF_REPLICATE;
    pl[km->ndim - 2] = 0;
    set_place(c, pi, km, pl);
  }
  return !c->failed;
}

/* q, k, v projections and their biases (vLLM QKVParallelLinear shards the bias with the
 * output rows; Megatron's linear_qkv bias is interleaved per query group like the weight). */
static void place_qkv(Ctx *c, uint32_t pi, const Dense *D) {
  const RfModel *m = c->pb->model;
  const RfTensor *t = &m->tensors[m->parts[pi].tensor];
  const RfArch *a = &m->arch;
  if (a->kv_heads <= 0 || a->head_dim <= 0 || a->heads <= 0) {
    /* a tensor listing: no head structure known, a plain row split in its own buffer */
    place_tp(c, pi, D, 0);
    set_own(c, pi);
    return;
  }
  if (!place_head_rows(c, pi, D, qkv_role(t->kind) == 0)) return;
  qkv_local(c, pi, D);
}

/* RMSNorm over all q (or k) rows (MiniMax-M2). vLLM and SGLang (MiniMaxText01RMSNormTP) keep
 * an even 1 / TP chunk per rank, also when TP exceeds the KV heads; Megatron: split like the
 * projection's rows (assumed; Megatron-core has no such norm). */
static void place_qk_norm(Ctx *c, uint32_t pi, const Dense *D) {
  const RfModel *m = c->pb->model;
  const RfTensor *t = &m->tensors[m->parts[pi].tensor];
  if (D->megatron && m->arch.kv_heads > 0 && m->arch.heads > 0) {
    if (!place_head_rows(c, pi, D, t->kind == RF_KIND_ATTN_Q_NORM)) return;
  } else {
    place_tp(c, pi, D, 0);
  }
  set_own(c, pi);
}

/* Gate and up projections: gated MLPs keep [gate_r; up_r] in one buffer per rank; relu2 MLPs
 * have only up. */
static void place_gate_up(Ctx *c, uint32_t pi, const Dense *D) {
  const RfModel *m = c->pb->model;
  const RfPart *part = &m->parts[pi];
  const RfTensor *t = &m->tensors[part->tensor];
  place_tp(c, pi, D, 0);
  gboolean gate = t->kind == RF_KIND_DENSE_GATE || t->kind == RF_KIND_SHARED_GATE;
  uint32_t other = gate ? part->tensor + 1 : part->tensor - 1;
  gboolean fused = other < m->ntensors &&
                   (m->tensors[other].kind == (gate ? t->kind + 1 : t->kind - 1)) &&
                   m->tensors[other].layer == t->layer && m->tensors[other].shape[0] == t->shape[0];
  if (!fused) {
    set_own(c, pi);
    return;
  }
  int64_t loc = part->shape[0] / D->tp;
  g_autofree char *blk = block_of(t->name);
  g_autofree char *bname = g_strdup_printf("%sgate_up", blk);
  set_fused(c, pi, bname, 0, gate ? 0 : loc, 0, 2 * loc);
}

/* Mamba and GDN input projections and convolutions: per rank [z_r | x_r | B_r | C_r | dt_r]
 * (and x | B | C for conv), the tensor's parts each split TP ways, laid side by side. */
static void place_mixer_in(Ctx *c, uint32_t pi, const Dense *D) {
  const RfModel *m = c->pb->model;
  const RfPart *part = &m->parts[pi];
  const RfTensor *t = &m->tensors[part->tensor];
  const RfArch *a = &m->arch;
  int tp = D->tp;
  place_tp(c, pi, D, 0);
  if (t->kind == RF_KIND_MAMBA_IN || t->kind == RF_KIND_MAMBA_CONV)
    need(c, a->mamba_groups % tp == 0 && a->mamba_heads % tp == 0,
         "TP%d does not divide Mamba groups (%lld) and heads (%lld)", tp,
         (long long)a->mamba_groups, (long long)a->mamba_heads);
  else
    need(c, a->lin_heads % tp == 0 && a->lin_kv_heads % tp == 0,
         "TP%d does not divide GDN heads (%lld key, %lld value)", tp, (long long)a->lin_kv_heads,
         (long long)a->lin_heads);
  if (!part->tag[0]) {
    set_own(c, pi);
    return;
  }
  if (c->failed) return;
  /* the parts of one tensor are consecutive (zoo.h) */
  uint32_t first = pi, end = pi + 1;
  while (first > 0 && m->parts[first - 1].tensor == part->tensor)
    first--;
  while (end < m->nparts && m->parts[end].tensor == part->tensor)
    end++;
  int64_t off = 0, total = 0;
  for (uint32_t j = first; j < end; j++) {
    if (j < pi) off += m->parts[j].shape[0] / tp;
    total += m->parts[j].shape[0] / tp;
  }
  set_fused(c, pi, t->name, 0, off, 0, total);
}

/* Row splits by heads: the head count must divide, not only the rows. */
static void place_heads(Ctx *c, uint32_t pi, const Dense *D) {
  const RfModel *m = c->pb->model;
  const RfTensor *t = &m->tensors[m->parts[pi].tensor];
  const RfArch *a = &m->arch;
  int tp = D->tp;
  if (t->kind == RF_KIND_MLA_Q_B || t->kind == RF_KIND_MLA_KV_B || t->kind == RF_KIND_ATTN_GATE ||
      t->kind == RF_KIND_ATTN_SINK)
    need(c, a->heads % tp == 0, "TP%d does not divide %lld attention heads", tp,
         (long long)a->heads);
  else if (t->kind >= RF_KIND_KDA_PROJ && t->kind <= RF_KIND_KDA_HEAD)
    need(c, a->lin_heads % tp == 0, "TP%d does not divide %lld KDA heads", tp,
         (long long)a->lin_heads);
  else if (t->kind == RF_KIND_GDN_HEAD)
    need(c, a->lin_heads % tp == 0 && a->lin_kv_heads % tp == 0,
         "TP%d does not divide GDN heads (%lld key, %lld value)", tp, (long long)a->lin_kv_heads,
         (long long)a->lin_heads);
  place_tp(c, pi, D, 0);
  set_own(c, pi);
}

/* MLA q_a and kv_a: replicated; vLLM fuses them into one fused_qkv_a_proj. */
static void place_mla_a(Ctx *c, uint32_t pi, const Dense *D) {
  const RfModel *m = c->pb->model;
  const RfPart *part = &m->parts[pi];
  const RfTensor *t = &m->tensors[part->tensor];
  place_tp(c, pi, D, -1);
  if (D->megatron || !m->arch.q_lora) {
    set_own(c, pi);
    return;
  }
  int64_t qa = t->kind == RF_KIND_MLA_Q_A ? part->shape[0] : m->arch.q_lora;
  int64_t kva = m->arch.kv_lora + m->arch.qk_rope;
  g_autofree char *blk = block_of(t->name);
  g_autofree char *bname = g_strdup_printf("%sfused_qkv_a_proj", blk);
  set_fused(c, pi, bname, 0, t->kind == RF_KIND_MLA_Q_A ? 0 : qa, 0, qa + kva);
}

/* Everything but routed experts. */
static void place_dense(Ctx *c, uint32_t pi, const Dense *D) {
  switch (c->pb->model->tensors[c->pb->model->parts[pi].tensor].kind) {
  case RF_KIND_EMBEDDING:
  case RF_KIND_LM_HEAD:
    place_vocab(c, pi, D);
    return;
  case RF_KIND_ATTN_Q:
  case RF_KIND_ATTN_K:
  case RF_KIND_ATTN_V:
  case RF_KIND_ATTN_Q_BIAS:
  case RF_KIND_ATTN_K_BIAS:
  case RF_KIND_ATTN_V_BIAS:
    place_qkv(c, pi, D);
    return;
  case RF_KIND_ATTN_Q_NORM:
  case RF_KIND_ATTN_K_NORM:
    place_qk_norm(c, pi, D);
    return;
  case RF_KIND_ATTN_O:
  case RF_KIND_MAMBA_OUT:
  case RF_KIND_KDA_O:
  case RF_KIND_GDN_O:
  case RF_KIND_DENSE_DOWN:
  case RF_KIND_SHARED_DOWN:
    place_tp(c, pi, D, 1);
    set_own(c, pi);
    return;
  case RF_KIND_DENSE_GATE:
  case RF_KIND_DENSE_UP:
  case RF_KIND_SHARED_GATE:
  case RF_KIND_SHARED_UP:
    place_gate_up(c, pi, D);
    return;
  case RF_KIND_MAMBA_IN:
  case RF_KIND_MAMBA_CONV:
  case RF_KIND_GDN_PROJ:
  case RF_KIND_GDN_CONV:
    place_mixer_in(c, pi, D);
    return;
  case RF_KIND_MAMBA_HEAD:
  case RF_KIND_MAMBA_NORM:
  case RF_KIND_KDA_PROJ:
  case RF_KIND_KDA_CONV:
  case RF_KIND_KDA_HEAD:
  case RF_KIND_GDN_HEAD:
  case RF_KIND_MLA_Q_B:
  case RF_KIND_MLA_KV_B:
  case RF_KIND_ATTN_GATE:
  case RF_KIND_ATTN_SINK:
    place_heads(c, pi, D);
    return;
  case RF_KIND_MLA_Q_A:
  case RF_KIND_MLA_KV_A:
    place_mla_a(c, pi, D);
    return;
  default: /* norms, router, latent projections, MTP eh_proj, low-rank KDA, unknown */
    place_tp(c, pi, D, -1);
    set_own(c, pi);
    return;
  }
}

/* Key of a tensor's expert block (layer, MTP or not) in Ctx.gated. */
static gpointer gate_key(const RfTensor *t) {
  return GINT_TO_POINTER((int)((t->layer + 2) * 2 + !!t->mtp));
}

/* Routed experts, stacked [E, I, H] (gate/up) or [E, H, I] (down). */
static void place_expert(Ctx *c, uint32_t pi, const RfMesh *m, const int8_t *pl, int split_dim,
                         int64_t split, int64_t ep) {
  const RfModel *mod = c->pb->model;
  const RfPart *part = &mod->parts[pi];
  const RfTensor *t = &mod->tensors[part->tensor];
  set_place(c, pi, m, pl);
  need_div(c, pi, 0, ep, "EP");
  need_div(c, pi, split_dim, split, c->side->framework[0] == 'm' ? "ETP" : "TP");
  if (c->failed) return;
  if (t->kind == RF_KIND_EXPERT_DOWN) {
    set_own(c, pi);
    return;
  }
  if (!g_hash_table_contains(c->gated, gate_key(t))) {
    set_own(c, pi);
    return;
  }
  int64_t loc = part->shape[1] / split;
  g_autofree char *blk = block_of(t->name);
  /* blk ends in "experts.{e}."; w13 is per layer */
  g_autofree char *bname = g_strdup_printf("%sw13", blk);
  set_fused(c, pi, bname, 1, t->kind == RF_KIND_EXPERT_GATE ? 0 : loc, 0, 2 * loc);
}

static gboolean expert_bias(RfKind k) {
  return k == RF_KIND_EXPERT_GATE_UP_BIAS || k == RF_KIND_EXPERT_DOWN_BIAS;
}

/* Expert biases (gpt-oss), one tensor per layer: experts on dim 0 by EP. The gate_up bias
 * parts ("gate", "up", each [E, I]) split I by the expert TP like the gate / up rows; the
 * down bias [E, H] is replicated over the expert TP. pl places dim 0 on the EP mesh dim and
 * dim 1 on the expert-TP mesh dim (for the gate_up parts; callers pass it replicated for
 * down). Local: Megatron's linear_fc1 bias [gate_r | up_r] per expert (w13_bias);
 * vLLM and SGLang (gpt_oss.py load_weights) narrow the checkpoint's interleaved gate_up bias
 * to [2 tp_start, 2 tp_end), so gate and up alternate in the local w13_bias. */
static void place_expert_bias(Ctx *c, uint32_t pi, const RfMesh *m, const int8_t *pl, int64_t split,
                              int64_t ep, gboolean interleaved) {
  const RfModel *mod = c->pb->model;
  const RfPart *part = &mod->parts[pi];
  const RfTensor *t = &mod->tensors[part->tensor];
  set_place(c, pi, m, pl);
  need_div(c, pi, 0, ep, "EP");
  if (t->kind == RF_KIND_EXPERT_DOWN_BIAS) {
    set_own(c, pi);
    return;
  }
  need_div(c, pi, 1, split, c->side->framework[0] == 'm' ? "ETP" : "TP");
  if (c->failed) return;
  gboolean gate = !strcmp(part->tag, "gate");
  g_autofree char *blk = block_of(t->name);
  g_autofree char *bname = g_strdup_printf("%sw13_bias", blk);
  int64_t loc = part->shape[1] / split;
  if (interleaved)
    set_fused(c, pi, bname, 1, gate ? 0 : 1, 1, 2);
  else
    set_fused(c, pi, bname, 1, gate ? 0 : loc, 0, 2 * loc);
}

static int pp_stage(const RfModel *m, const RfTensor *t, int pp) {
  if (t->mtp) return pp - 1;
  if (t->layer < 0) return t->kind == RF_KIND_EMBEDDING ? 0 : pp - 1;
  if (t->layer >= m->nlayers) return pp - 1;
  /* Balanced split: stage p holds layers [floor(p L / PP), floor((p+1) L / PP)). */
  for (int p = 0; p < pp; p++)
    if (t->layer < (int64_t)(p + 1) * m->nlayers / pp) return p;
  return pp - 1;
}

static void ctx_init(Ctx *c, RfProblem *pb, RfSide *side, GError **error) {
  memset(c, 0, sizeof *c);
  c->pb = pb;
  c->side = side;
  c->error = error;
  c->bufs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  c->buf_names = g_ptr_array_new();
  c->buf_part = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  c->kv_meshes = g_hash_table_new(g_direct_hash, g_direct_equal);
  c->gated = g_hash_table_new(g_direct_hash, g_direct_equal);
  const RfModel *m = pb->model;
  for (uint32_t j = 0; j < m->ntensors; j++)
    if (m->tensors[j].kind == RF_KIND_EXPERT_GATE)
      g_hash_table_add(c->gated, gate_key(&m->tensors[j]));
}

static void ctx_finish(Ctx *c) {
  g_ptr_array_add(c->buf_names, NULL);
  c->side->nbufs = (int)c->buf_part->len;
  c->side->buf_names = (char **)g_ptr_array_free(c->buf_names, FALSE);
  c->side->buf_part = (uint32_t *)g_array_free(c->buf_part, FALSE);
  g_hash_table_destroy(c->bufs);
  g_hash_table_destroy(c->kv_meshes);
  g_hash_table_destroy(c->gated);
  g_free(c->dense);
  g_free(c->expert);
}

static void side_ranks(RfSide *s, int first, int n) {
  s->nranks = n;
  s->ranks = g_new(int, n);
  for (int i = 0; i < n; i++)
    s->ranks[i] = first + i;
}

/* A Megatron side (training, or the generation backend): global ranks [first, first + world),
 * order tp-cp-ep-dp-pp (TP fastest). */
static gboolean build_megatron(RfProblem *pb, RfSide *side, RfParallel *P, int first,
                               GError **error) {
  const RfModel *m = pb->model;
  rf_side_init(side, "megatron", m->nparts);
  side->par = *P;
  Ctx c;
  ctx_init(&c, pb, side, error);
  int stage = P->tp * P->cp * P->dp;
  int world = stage * P->pp;
  side_ranks(side, first, world);
  int edp = stage / (P->ep * P->etp);
  need(&c, P->pp <= m->nlayers || m->nlayers == 0, "PP%d exceeds the %d layers", P->pp, m->nlayers);
  c.nstages = P->pp;
  c.dense = g_new0(RfMesh *, P->pp);
  c.expert = g_new0(RfMesh *, P->pp);
  for (int p = 0; p < P->pp && !c.failed; p++) {
    int dd[3] = {P->dp, P->cp, P->tp}, ed[3] = {edp, P->ep, P->etp};
    c.dense[p] = mesh_add(&c, 3, dd, side->ranks + p * stage, stage);
    if (!c.failed) c.expert[p] = mesh_add(&c, 3, ed, side->ranks + p * stage, stage);
  }
  for (uint32_t pi = 0; pi < m->nparts && !c.failed; pi++) {
    const RfTensor *t = &m->tensors[m->parts[pi].tensor];
    int s = pp_stage(m, t, P->pp);
    if (t->nexperts > 0) {
      int sd = t->kind == RF_KIND_EXPERT_DOWN ? 2 : 1;
      int8_t pl[3] = {RF_REPLICATE, 0, (int8_t)sd};
      place_expert(&c, pi, c.expert[s], pl, sd, P->etp, P->ep);
    } else if (expert_bias(t->kind)) {
      int8_t pl[3] = {RF_REPLICATE, 0, t->kind == RF_KIND_EXPERT_DOWN_BIAS ? RF_REPLICATE : 1};
      place_expert_bias(&c, pi, c.expert[s], pl, P->etp, P->ep, FALSE);
    } else {
      Dense D = {c.dense[s], P->tp, TRUE};
      place_dense(&c, pi, &D);
    }
  }
  ctx_finish(&c);
  return !c.failed;
}

/* Attention-side mixers: what SGLang's data-parallel attention splits over the attention TP
 * group (attn_tp_size = TP / ADP) instead of the whole TP group. */
static gboolean attn_kind(RfKind k) {
  switch (k) {
  case RF_KIND_ATTN_QKV:
  case RF_KIND_ATTN_Q:
  case RF_KIND_ATTN_K:
  case RF_KIND_ATTN_V:
  case RF_KIND_ATTN_O:
  case RF_KIND_ATTN_GATE:
  case RF_KIND_ATTN_Q_BIAS:
  case RF_KIND_ATTN_K_BIAS:
  case RF_KIND_ATTN_V_BIAS:
  case RF_KIND_ATTN_SINK:
  case RF_KIND_ATTN_Q_NORM:
  case RF_KIND_ATTN_K_NORM:
  case RF_KIND_MLA_Q_A:
  case RF_KIND_MLA_KV_A:
  case RF_KIND_MLA_Q_B:
  case RF_KIND_MLA_KV_B:
  case RF_KIND_MAMBA_IN:
  case RF_KIND_MAMBA_CONV:
  case RF_KIND_MAMBA_HEAD:
  case RF_KIND_MAMBA_NORM:
  case RF_KIND_MAMBA_OUT:
  case RF_KIND_KDA_PROJ:
  case RF_KIND_KDA_CONV:
  case RF_KIND_KDA_HEAD:
  case RF_KIND_KDA_REPL:
  case RF_KIND_KDA_O:
  case RF_KIND_GDN_PROJ:
  case RF_KIND_GDN_CONV:
  case RF_KIND_GDN_HEAD:
  case RF_KIND_GDN_O:
    return TRUE;
  default:
    return FALSE;
  }
}

/* The start every engine-style inference side shares: ranks [first, first + TP x DP), rank =
 * first + dp * TP + tp, and the [DP, TP] mesh in c->inf. Returns the side's world. */
static int inference_begin(RfProblem *pb, const RfParallel *P, int first, const char *framework,
                           Ctx *c, GError **error) {
  RfSide *side = &pb->dst;
  rf_side_init(side, framework, pb->model->nparts);
  side->par = *P;
  ctx_init(c, pb, side, error);
  int world = P->tp * P->dp;
  side_ranks(side, first, world);
  int dd[2] = {P->dp, P->tp};
  c->inf = mesh_add(c, 2, dd, side->ranks, world);
  return world;
}

/* Routed experts and expert biases of an engine-style inference side (SGLang, and vLLM with
 * expert parallel inside each engine). moe is the mesh [DP, EP, TP / EP] over the side's
 * ranks: each engine's experts in EP contiguous blocks of E / EP whole experts (Shard(0) over
 * EP), I split over the TP / EP ranks of an EP rank, the DP engines independent replicas;
 * NULL without EP: every expert on every rank of an engine, I split over TP (c->inf). FALSE
 * when part pi is neither. */
static gboolean place_engine_expert(Ctx *c, uint32_t pi, const RfMesh *moe, const RfParallel *P) {
  const RfTensor *t = &c->pb->model->tensors[c->pb->model->parts[pi].tensor];
  if (t->nexperts > 0) {
    int sd = t->kind == RF_KIND_EXPERT_DOWN ? 2 : 1;
    if (moe) {
      int8_t pl[3] = {RF_REPLICATE, 0, (int8_t)sd};
      place_expert(c, pi, moe, pl, sd, P->tp / P->ep, P->ep);
    } else {
      int8_t pl[2] = {RF_REPLICATE, (int8_t)sd};
      place_expert(c, pi, c->inf, pl, sd, P->tp, 1);
    }
    return TRUE;
  }
  if (!expert_bias(t->kind)) return FALSE;
  /* w2_bias: whole on every TP rank without EP (vLLM zeroes it on tp_rank != 0 at load) */
  int8_t d1 = t->kind == RF_KIND_EXPERT_DOWN_BIAS ? RF_REPLICATE : 1;
  if (moe) {
    int8_t pl[3] = {RF_REPLICATE, 0, d1};
    place_expert_bias(c, pi, moe, pl, P->tp / P->ep, P->ep, TRUE);
  } else {
    int8_t pl[2] = {RF_REPLICATE, d1};
    place_expert_bias(c, pi, c->inf, pl, P->tp, 1, TRUE);
  }
  return TRUE;
}

/* The [DP, EP, TP / EP] expert mesh of an engine-style side (EP > 1 divides TP), NULL if EP is 1
 * or on failure (c->failed says which). */
static const RfMesh *engine_moe_mesh(Ctx *c, const RfParallel *P, int world) {
  if (c->failed || P->ep <= 1) return NULL;
  int ed[3] = {P->dp, P->ep, P->tp / P->ep};
  return mesh_add(c, 3, ed, c->side->ranks, world);
}

/* SGLang inference side: global ranks [first, first + TP x DP), rank = first + dp * TP + tp;
 * DP engines of TP ranks each. Inside an engine (python/sglang/srt/layers/dp_attention.py):
 * attention over [ADP, TP / ADP] (attn_tp_rank = tp % (TP / ADP)), the embedding replicated
 * when ADP > 1; experts over [EP, TP / EP] (moe_tp_size = TP / EP, EP ranks strided by it). */
static gboolean build_sglang(RfProblem *pb, RfParallel *P, int first, GError **error) {
  RfSide *side = &pb->dst;
  const RfModel *m = pb->model;
  Ctx c;
  int world = inference_begin(pb, P, first, "sglang", &c, error);
  RfMesh *attn = c.inf;
  if (!c.failed && P->adp > 1) {
    int ad[3] = {P->dp, P->adp, P->tp / P->adp};
    attn = mesh_add(&c, 3, ad, side->ranks, world);
  }
  const RfMesh *moe = engine_moe_mesh(&c, P, world);
  for (uint32_t pi = 0; pi < m->nparts && !c.failed; pi++) {
    const RfTensor *t = &m->tensors[m->parts[pi].tensor];
    if (place_engine_expert(&c, pi, moe, P)) {
      continue;
    } else if (t->kind == RF_KIND_EMBEDDING && P->adp > 1) {
      /* VocabParallelEmbedding(enable_tp=not is_dp_attention_enabled()): whole on every rank */
      Dense D = {c.inf, P->tp, FALSE};
      place_tp(&c, pi, &D, -1);
      set_own(&c, pi);
    } else if (attn_kind(t->kind)) {
      Dense D = {attn, P->tp / P->adp, FALSE};
      place_dense(&c, pi, &D);
    } else {
      Dense D = {c.inf, P->tp, FALSE};
      place_dense(&c, pi, &D);
    }
  }
  ctx_finish(&c);
  return !c.failed;
}

/* vLLM inference side: global ranks [first, first + TP x DP), rank = first + dp * TP + tp.
 * Expert parallel (vllm/model_executor/layers/fused_moe/config.py FusedMoEParallelConfig.make:
 * ep_size = DP x TP of vLLM's own data-parallel group, MoE TP 1; layer.py determine_expert_map:
 * contiguous blocks of E / EP experts) comes in two forms. EP = TP x DP: one vLLM engine with
 * vLLM-internal DP (data-parallel attention), experts over every rank of the side ([EP]).
 * EP = TP with DP > 1: DP independent engines, each with enable_expert_parallel and vLLM DP 1
 * (NeMo RL's expert_parallel_size == tensor_parallel_size: vllm_generation.py sets
 * VLLM_DP_SIZE only when EP > TP), so each engine splits its experts over its own TP ranks:
 * SGLang's [DP, EP, TP / EP] expert mesh with TP / EP = 1. */
static gboolean build_vllm(RfProblem *pb, RfParallel *P, int first, GError **error) {
  RfSide *side = &pb->dst;
  const RfModel *m = pb->model;
  Ctx c;
  int world = inference_begin(pb, P, first, "vllm", &c, error);
  gboolean engine_ep = P->ep_given && P->ep > 1 && P->ep == P->tp && P->dp > 1;
  const RfMesh *moe = engine_ep ? engine_moe_mesh(&c, P, world) : NULL;
  if (!c.failed && P->ep_given && P->ep == world) {
    int ed[1] = {world};
    c.inf_ep = mesh_add(&c, 1, ed, side->ranks, world);
  }
  for (uint32_t pi = 0; pi < m->nparts && !c.failed; pi++) {
    const RfTensor *t = &m->tensors[m->parts[pi].tensor];
    if (c.inf_ep && t->nexperts > 0) {
      int8_t pl[1] = {0};
      place_expert(&c, pi, c.inf_ep, pl, 0, 1, world);
    } else if (c.inf_ep && expert_bias(t->kind)) {
      int8_t pl[1] = {0};
      place_expert_bias(&c, pi, c.inf_ep, pl, 1, world, TRUE);
    } else if (!place_engine_expert(&c, pi, moe, P)) {
      Dense D = {c.inf, P->tp, FALSE};
      place_dense(&c, pi, &D);
    }
  }
  ctx_finish(&c);
  return !c.failed;
}

static int64_t gcd64(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* Rank counts are compared in double before any integer product is formed: a product of at
 * most six layout numbers (each below 2^21) is exact there up to 2^53, and above the rank
 * limit it cannot round back below it. */
static gboolean check_layouts(RfParallel *T, RfParallel *I, RfInferFramework fw, const char *train,
                              const char *infer, GError **error) {
  /* Training: EP x ETP folds into the TP x CP x DP ranks of a PP stage. */
  double fold = (double)T->ep * T->etp, base = (double)T->tp * T->cp;
  if (fold * base >= RF_MAX_RANKS) {
    g_set_error(error, RF_ERROR, RF_ERROR_LIMIT,
                "training layout %s: EP x ETP x TP x CP = %.4g ranks, more than the limit of %d",
                train, fold * base, RF_MAX_RANKS - 1);
    return FALSE;
  }
  if (!T->dp_given) T->dp = (int)((int64_t)fold / gcd64((int64_t)fold, (int64_t)base));
  double wt = base * T->dp * T->pp, wi = (double)I->tp * I->dp;
  if (wt + wi >= RF_MAX_RANKS) {
    g_set_error(error, RF_ERROR, RF_ERROR_LIMIT,
                "layouts %s -> %s need %.4g ranks, more than the limit of %d", train, infer,
                wt + wi, RF_MAX_RANKS - 1);
    return FALSE;
  }
  /* From here every product is below 2^24. */
  int64_t stage = (int64_t)base * T->dp;
  if (stage % (int64_t)fold) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "training layout %s: EP%d x ETP%d does not divide TP%d x CP%d x DP%d = %lld ranks",
                train, T->ep, T->etp, T->tp, T->cp, T->dp, (long long)stage);
    return FALSE;
  }
  if (T->adp > 1) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "training layout %s: ADP (data-parallel attention) is an SGLang inference dim",
                train);
    return FALSE;
  }
  if (I->pp > 1 || I->cp > 1) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "inference layout %s: the %s preset has generation PP = 1 and CP = 1", infer,
                rf_infer_framework_name(fw));
    return FALSE;
  }
  if (fw != RF_INFER_MEGATRON && I->etp > 1) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "inference layout %s: the %s preset splits experts over TP, not ETP (ETP is for "
                "--infer-framework megatron)",
                infer, rf_infer_framework_name(fw));
    return FALSE;
  }
  if (fw != RF_INFER_SGLANG && I->adp > 1) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "inference layout %s: ADP (data-parallel attention) is for --infer-framework "
                "sglang",
                infer);
    return FALSE;
  }
  if (fw == RF_INFER_VLLM && I->ep_given && I->ep != I->tp * I->dp && I->ep != I->tp) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "inference layout %s: vLLM expert parallel has EP = TP x DP = %d (one engine, "
                "vLLM data parallel) or EP = TP = %d (each engine on its own TP ranks), not %d",
                infer, I->tp * I->dp, I->tp, I->ep);
    return FALSE;
  }
  if (fw == RF_INFER_SGLANG && (I->tp % I->ep || I->tp % I->adp)) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "inference layout %s: SGLang splits each TP%d engine into EP%d x MoE-TP and "
                "ADP%d x attention-TP groups: EP and ADP must divide TP",
                infer, I->tp, I->ep, I->adp);
    return FALSE;
  }
  if (fw == RF_INFER_MEGATRON) {
    /* Megatron generation: EP x ETP folds into the TP x DP ranks, as in training. */
    int64_t fold = (int64_t)I->ep * I->etp, base = I->tp;
    if (!I->dp_given) I->dp = (int)(fold / gcd64(fold, base));
    if (((double)I->tp * I->dp) + wt >= RF_MAX_RANKS) {
      g_set_error(error, RF_ERROR, RF_ERROR_LIMIT,
                  "layouts %s -> %s need more ranks than the limit of %d", train, infer,
                  RF_MAX_RANKS - 1);
      return FALSE;
    }
    if (((int64_t)I->tp * I->dp) % fold) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                  "inference layout %s: EP%d x ETP%d does not divide TP%d x DP%d = %d ranks", infer,
                  I->ep, I->etp, I->tp, I->dp, I->tp * I->dp);
      return FALSE;
    }
  }
  return TRUE;
}

/* Training fills domains from GPU 0; inference starts on a fresh domain and a replica that
 * fits in a domain never straddles two. Sets pb->nranks, pb->gpu and the placement note. */
static gboolean place_ranks(RfProblem *pb, const RfParallel *T, const RfParallel *I,
                            GError **error) {
  const RfTopology *topo = pb->topo;
  int wt = T->tp * T->cp * T->dp * T->pp, wi = I->tp * I->dp;
  int64_t D = topo->gpus_per_domain;
  pb->nranks = wt + wi;
  pb->gpu = g_new(int, pb->nranks);
  for (int r = 0; r < wt; r++)
    pb->gpu[r] = r;
  int64_t first_dom = (wt + D - 1) / D;
  int64_t per = I->tp <= D ? D / I->tp : 0;
  int64_t span = I->tp <= D ? 1 : (I->tp + D - 1) / D;
  int64_t last_dom = first_dom;
  for (int k = 0; k < I->dp; k++) {
    int64_t dom = per ? first_dom + k / per : first_dom + k * span;
    int64_t slot = per ? (k % per) * I->tp : 0;
    if ((dom + span) * D > INT32_MAX) {
      g_set_error(error, RF_ERROR, RF_ERROR_LIMIT,
                  "placement needs GPU ids beyond %d (domain size %lld)", INT32_MAX, (long long)D);
      return FALSE;
    }
    for (int t = 0; t < I->tp; t++)
      pb->gpu[wt + k * I->tp + t] = (int)(dom * D + slot + t);
    last_dom = dom + span - 1;
  }
  g_autofree char *ts = rf_parallel_format(T);
  g_autofree char *is = rf_parallel_format(I);
  /* GPUs of the first inference domain that no replica uses */
  int64_t idle = per ? D - MIN(per, (int64_t)I->dp) * I->tp : span * D - I->tp;
  g_autofree char *fit = per ? g_strdup_printf("up to %lld per domain", (long long)per)
                             : g_strdup_printf("each spanning %lld whole domains", (long long)span);
  GString *note = g_string_new(NULL);
  g_string_printf(note,
                  "training %s = %d GPUs on domains 0-%lld; inference %s = %d GPUs (%d replica%s "
                  "of TP%d, %s) on domains %lld-%lld; %lld GPUs per domain (%s)",
                  ts, wt, (long long)first_dom - 1, is, wi, I->dp, I->dp == 1 ? "" : "s", I->tp,
                  fit, (long long)first_dom, (long long)last_dom, (long long)D, topo->name);
  if (idle > 0)
    g_string_append_printf(note, "; idle GPUs in each inference domain: %lld", (long long)idle);
  if (!T->dp_given && T->ep * T->etp > 1)
    g_string_append_printf(note, "; training DP%d chosen as the smallest consistent with EP%d",
                           T->dp, T->ep);
  if (strcmp(pb->dst.framework, "vllm"))
    g_string_append_printf(note, "; inference framework: %s", pb->dst.framework);
  if (!strcmp(pb->dst.framework, "megatron") && !I->dp_given && I->ep * I->etp > 1)
    g_string_append_printf(note, "; inference DP%d chosen as the smallest consistent with EP%d",
                           I->dp, I->ep);
  pb->placement_note = g_string_free(note, FALSE);
  return TRUE;
}

RfProblem *rf_problem_new_preset(RfModel *model, const char *train, const char *infer,
                                 RfTopology *topo, GError **error) {
  return rf_problem_new_preset_fw(model, train, infer, RF_INFER_VLLM, topo, error);
}

/* EP must divide the routed experts: checked on the counts before any mesh of the world is built
 * (the placement would refuse it too, after building meshes of up to 2^20 ranks). */
static gboolean check_experts(const RfModel *m, const RfParallel *P, const char *layout,
                              GError **error) {
  int64_t e = m->arch.experts;
  if (e <= 0 || P->ep <= 1 || e % P->ep == 0) return TRUE;
  g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "layout %s: EP%d does not divide the %lld experts",
              layout, P->ep, (long long)e);
  return FALSE;
}

RfProblem *rf_problem_new_preset_fw(RfModel *model, const char *train, const char *infer,
                                    RfInferFramework fw, RfTopology *topo, GError **error) {
  g_autoptr(RfProblem) pb = g_new0(RfProblem, 1);
  pb->model = model;
  pb->topo = topo;
  RfParallel T, I;
  if (!rf_parallel_parse(train, &T, error) || !rf_parallel_parse(infer, &I, error)) return NULL;
  if ((unsigned)fw >= RF_INFER_COUNT) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "unknown inference framework %d", (int)fw);
    return NULL;
  }
  if (!check_layouts(&T, &I, fw, train, infer, error)) return NULL;
  if (!check_experts(model, &T, train, error) || !check_experts(model, &I, infer, error))
    return NULL;
  if (topo->gpus_per_domain < 1 || topo->gpus_per_domain >= RF_MAX_RANKS) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "GPUs per domain must be 1..%d, got %d",
                RF_MAX_RANKS - 1, topo->gpus_per_domain);
    return NULL;
  }
  int first = T.tp * T.cp * T.dp * T.pp;
  if (!build_megatron(pb, &pb->src, &T, 0, error)) return NULL;
  gboolean ok = fw == RF_INFER_SGLANG     ? build_sglang(pb, &I, first, error)
                : fw == RF_INFER_MEGATRON ? build_megatron(pb, &pb->dst, &I, first, error)
                                          : build_vllm(pb, &I, first, error);
  if (!ok) return NULL;
  if (!place_ranks(pb, &T, &I, error)) return NULL;
  return g_steal_pointer(&pb);
}
