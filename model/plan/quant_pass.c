/* The quantize pass of a quantized problem under a plan: which shards each rank quantizes (at
 * the sender only those the plan sends from) and the HBM bytes that takes. */
#include "plan.h"
#include "quant.h"

#include <string.h>

uint64_t rf_quant_pass_bytes(const RfProblem *pb, const RfPlan *plan, uint64_t *bytes, int *rank) {
  const RfProblemQuant *q = pb->quant;
  uint64_t *by = g_new0(uint64_t, pb->nranks);
  gboolean sender = q && q->at == RF_QUANT_AT_SENDER;
  /* at the sender: which (rank, part) pairs send a piece of a quantized part */
  GHashTable *sends = g_hash_table_new(g_int64_hash, g_int64_equal);
  g_autoptr(GArray) keys = g_array_new(FALSE, FALSE, sizeof(gint64));
  if (sender)
    for (uint64_t i = 0; i < plan->nxfers; i++) {
      uint32_t part = plan->pieces[plan->xfers[i].piece].part;
      if (q->weight_part[part] >= 0) part = (uint32_t)q->weight_part[part];
      if (!q->target[part]) continue;
      gint64 k = (gint64)plan->xfers[i].src * (gint64)pb->model->nparts + part;
      g_array_append_val(keys, k);
    }
  for (guint i = 0; i < keys->len; i++)
    g_hash_table_add(sends, &g_array_index(keys, gint64, i));
  const RfSide *side = sender ? &pb->src : &pb->dst;
  for (uint32_t pi = 0; q && pi < q->nparts; pi++) {
    if (!q->target[pi] || !side->place[pi].mesh) continue;
    for (int i = 0; i < side->nranks; i++) {
      int r = side->ranks[i];
      RfBox box;
      if (!rf_side_rank_shard(side, pi, r, &box, NULL)) continue;
      gint64 k = (gint64)r * (gint64)pb->model->nparts + pi;
      if (sender && !g_hash_table_contains(sends, &k)) continue;
      by[r] += rf_quant_box_bytes(pb, pi, &box);
    }
  }
  g_hash_table_destroy(sends);
  uint64_t mx = 0;
  int at = -1;
  for (int r = 0; r < pb->nranks; r++)
    if (by[r] > mx) {
      mx = by[r];
      at = r;
    }
  if (bytes) memcpy(bytes, by, sizeof *by * (size_t)pb->nranks);
  if (rank) *rank = at;
  g_free(by);
  return mx;
}
