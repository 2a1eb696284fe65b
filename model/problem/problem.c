/* The problem's lifecycle past its construction (preset.c, spec.c build it): freeing what it
 * owns (model, topology, sides, quantization state) and marking lost GPUs for elastic
 * recovery. */
#include "error.h"
#include "layout_private.h"
#include "quant.h"

void rf_problem_free(RfProblem *p) {
  if (!p) return;
  rf_side_clear(&p->src);
  rf_side_clear(&p->dst);
  rf_model_free(p->model);
  rf_topology_free(p->topo);
  g_free(p->gpu);
  g_free(p->placement_note);
  g_free(p->lost);
  rf_problem_quant_free(p->quant);
  g_free(p);
}

/* ---- elastic recovery: lost GPUs ---------------------------------------------------------- */

/* Does any surviving replica hold source shard s of placement p? */
static gboolean shard_survives(const RfPlacement *p, const uint8_t *lost, int s) {
  int nrep = rf_placement_nreplicas(p);
  for (int r = 0; r < nrep; r++)
    if (!lost[rf_placement_rank(p, s, r)]) return TRUE;
  return FALSE;
}

gboolean rf_problem_set_lost(RfProblem *p, const int *gpus, int ngpus, GError **error) {
  if (p->lost) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "lost GPUs already set");
    return FALSE;
  }
  g_autofree uint8_t *lost = g_new0(uint8_t, p->nranks);
  int nlost = 0;
  for (int i = 0; i < ngpus; i++) {
    gboolean any = FALSE;
    for (int r = 0; r < p->nranks; r++)
      if (p->gpu[r] >= 0 && p->gpu[r] == gpus[i]) {
        any = TRUE;
        nlost += !lost[r];
        lost[r] = 1;
      }
    if (!any) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                  "lost GPU %d holds no rank of this refit (GPUs in use: see the placement note)",
                  gpus[i]);
      return FALSE;
    }
  }
  int alive_dst = 0;
  for (int i = 0; i < p->dst.nranks; i++)
    alive_dst += !lost[p->dst.ranks[i]];
  if (alive_dst == 0) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "every inference GPU is lost: nothing to refit");
    return FALSE;
  }
  /* Tensors whose source shard (needed on the destination side) lost every replica. */
  const RfModel *m = p->model;
  g_autofree uint8_t *bad = g_new0(uint8_t, m->ntensors);
  for (uint32_t pi = 0; pi < m->nparts; pi++) {
    const RfPlacement *sp = &p->src.place[pi];
    uint32_t t = m->parts[pi].tensor;
    if (bad[t] || !p->dst.place[pi].mesh || !sp->mesh) continue; /* no source: the planner says */
    int ns = rf_placement_nshards(sp);
    for (int s = 0; s < ns && !bad[t]; s++)
      bad[t] = rf_placement_shard_box(sp, s, NULL, NULL) && !shard_survives(sp, lost, s);
  }
  GString *names = g_string_new(NULL);
  int nbad = 0;
  for (uint32_t t = 0; t < m->ntensors; t++) {
    if (!bad[t]) continue;
    if (nbad < 3) g_string_append_printf(names, "%s%s", nbad ? ", " : "", m->tensors[t].name);
    nbad++;
  }
  if (nbad) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "cannot refit %d tensor%s: a lost GPU held the only copy of a source shard of "
                "%s%s",
                nbad, nbad == 1 ? "" : "s", names->str, nbad > 3 ? ", ..." : "");
    g_string_free(names, TRUE);
    return FALSE;
  }
  g_string_free(names, TRUE);
  GString *note = g_string_new(p->placement_note);
  g_string_append_printf(note, "%slost GPUs:", p->placement_note ? "; " : "");
  for (int i = 0; i < ngpus; i++)
    g_string_append_printf(note, "%s%d", i ? "," : " ", gpus[i]);
  g_string_append_printf(note, " (%d rank%s excluded: they neither send nor receive)", nlost,
                         nlost == 1 ? "" : "s");
  g_free(p->placement_note);
  p->placement_note = g_string_free(note, FALSE);
  p->lost = g_steal_pointer(&lost);
  p->nlost = nlost;
  p->src.lost = p->lost;
  p->dst.lost = p->lost;
  return TRUE;
}
