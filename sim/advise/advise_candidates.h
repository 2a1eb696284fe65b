/* What `refit advise` knows of the simulator: which candidates to try (model/plan/advise.h's
 * layouts x placements x strategies), which the model or the memory cannot take, and how one
 * candidate is judged: its plan, that plan's bound at the link rates the calibration gives the
 * simulator, its memory, and its simulated time. advise_search.h orders and prunes them. */
#ifndef RF_ADVISE_CANDIDATES_H
#define RF_ADVISE_CANDIDATES_H

#include "advise.h"
#include "advise_search.h"
#include "sim.h"
#include <glib.h>

/* What every candidate of one search shares. Everything borrowed must outlive the search. */
typedef struct {
  const char *model;        /* borrowed: zoo name, config or checkpoint dir (rf_model_load) */
  const char *train;        /* borrowed: Megatron training layout */
  const char *topology;     /* borrowed: name or .topo file (rf_topology_load) */
  const RfModel *arch;      /* borrowed: the model loaded once, for the cheap layout check */
  const RfCalibration *cal; /* borrowed: what the simulator runs at */
  double mem_bytes;         /* GPU memory (B; 0: unknown, no memory check) */
  double reserve_bytes;     /* KV-cache reserve per GPU (B), kept from the weights */
  RfBoundRates rates;       /* rf_advise_bound_rates(cal) */
  uint64_t max_segments;    /* the bound step counts refit run's schedule up to this many
                             * segments, the plan's stages above (0: RF_MEMORY_MAX_SEGMENTS) */
} RfAdviseSetup;

/* The rates the simulator gives its links under cal (sim/program.c): NIC and NVLink at
 * efficiency x peak, the export and broadcast phases' network bytes scaled by NIC efficiency /
 * collective efficiency, cal's fixed time per refit. A bound at these stays below every
 * prediction made with cal (model/plan/advise.h). */
void rf_advise_bound_rates(const RfCalibration *cal, RfBoundRates *out);

/* The space searched: every count of gpus[] x engine of fw[] x its layouts (rf_advise_layouts,
 * rf_advise_sglang_layouts) x place[] x strategy[]. Arrays borrowed. A zero field keeps the
 * older meaning: nfw 0 is vLLM alone, domain_gpus 0 no NVLink-domain rule. */
typedef struct {
  const int *gpus; /* inference GPU counts */
  int ngpus;
  const int *tps; /* allowed TP values; NULL: every divisor */
  int ntps;
  gboolean with_ep, without_ep; /* vLLM expert parallel on, off (both: both) */
  const RfPlacementKind *place;
  int nplace;
  const RfStrategy *strategy;
  int nstrategy;
  const RfInferFramework *fw; /* engines: RF_INFER_VLLM, RF_INFER_SGLANG */
  int nfw;
  int domain_gpus;          /* GPUs per NVLink domain (0: unknown) */
  gboolean cross_domain_tp; /* also TP groups larger than a domain (flagged by tp_domains) */
} RfAdviseSpace;

/* Append the candidates of space for model m to out (an array of RfAdviseCandidate), each with
 * an owned layout string, its parsed layout, engine and tp_domains, in the order gpus x engines
 * x layouts x placements x strategies; nothing judged yet. Without cross_domain_tp a layout
 * whose TP exceeds domain_gpus is not a candidate. SGLang's plain TP layouts are left to vLLM
 * when both are searched (rf_advise_sglang_layouts). FALSE + one-line error when a layout does not
 * parse (out then holds the candidates before it). */
gboolean rf_advise_candidates(const RfModel *m, const RfAdviseSpace *space, GArray *out,
                              GError **error);

/* Mark dropped, with the reason in bound.error (code RF_ERROR_INPUT), the candidates whose
 * layout the model cannot take (rf_advise_layout_check_fw, then the engine's preset) or whose
 * weights do not fit memory - reserve; one problem per GPU count x engine x layout x placement,
 * not per strategy. Returns how many of the n are dropped. Cost: one problem built per distinct
 * key. */
int rf_advise_drop_unfit(const RfAdviseSetup *setup, RfAdviseCandidate *cands, int n);

/* An RfAdviseEvalFn (advise_search.h) with ud an RfAdviseSetup: build k's problem and plan, take
 * its fabric bound at setup->rates and its memory (failing when weights + refit extra exceed the
 * GPU memory) and, with simulate, run the simulator at setup->cal. The memory is the one model's
 * (model/plan/memory.h): in the bound step rf_memory_of_run, by the plan's stages above
 * max_segments; in the simulation of refit's executor the count of the schedule it simulated
 * (refit run's, as refit sim takes it), else the bound step's (k->bound). A bound step whose
 * estimate by the plan's stages exceeds the GPU memory does not fail where refit's executor will
 * be simulated: that estimate is an over-estimate for pipelined schedules, and the simulation
 * counts the schedule and fails there if it does not fit. Never fails: out->ok 0, code and error
 * say why. Cost: one plan, and with simulate one simulation. */
void rf_advise_evaluate(int i, const RfAdviseCandidate *k, gboolean simulate, RfAdviseOutcome *out,
                        void *setup);

#endif
