/* The quantize pass of a quantized problem under a plan: which shards each rank quantizes (at
 * the sender only those the plan sends from) and the HBM bytes that takes. */
#include "plan.h"
#include "quant.h"

#include <string.h>

uint64_t rf_quant_pass_bytes(const RfProblem *pb, const RfPlan *plan, uint64_t *bytes, int *rank) {
  const RfProblemQuant *q = pb->quant;
  uint64_t *by = g_new0(uint64_t, pb->nranks);
  gboolean sender = q && q->at == RF_QUANT_AT_SENDER;
  /* at the sender: which (rank, part) pairs send a piece of a quantized part, one bit each (a
   * hash set of a key per transfer cost a node per distinct key and a lookup per transfer) */
  const uint64_t nparts = pb->model->nparts;
  guint8 *sends = sender ? g_new0(guint8, ((uint64_t)pb->nranks * nparts + 7) / 8) : NULL;
  for (uint64_t m = 0; sender && m < plan->nmsgs; m++) {
    const RfMessage *msg = &plan->msgs[m];
    for (uint64_t i = msg->first; i < (uint64_t)msg->first + msg->count; i++) {
      uint32_t part = plan->pieces[plan->xfers[i].piece].part;
      if (q->weight_part[part] >= 0) part = (uint32_t)q->weight_part[part];
      if (!q->target[part]) continue;
      const uint64_t k = (uint64_t)msg->src * nparts + part;
      sends[k >> 3] |= (guint8)(1u << (k & 7));
    }
  }
  const RfSide *side = sender ? &pb->src : &pb->dst;
  for (uint32_t pi = 0; q && pi < q->nparts; pi++) {
    if (!q->target[pi] || !side->place[pi].mesh) continue;
    for (int i = 0; i < side->nranks; i++) {
      int r = side->ranks[i];
      RfBox box;
      if (!rf_side_rank_shard(side, pi, r, &box, NULL)) continue;
      const uint64_t k = (uint64_t)r * nparts + pi;
      if (sender && !(sends[k >> 3] >> (k & 7) & 1)) continue;
      by[r] += rf_quant_box_bytes(pb, pi, &box);
    }
  }
  g_free(sends);
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
