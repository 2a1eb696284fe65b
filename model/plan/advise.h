/* The library side of `refit advise`: which vLLM inference layouts to try, where to place the
 * two sides, and a lower bound of a plan that sees the fabric. The search itself (simulation in
 * forked workers, pruning, ranking) lives in sim/advise/advise_search.c, beside the simulator. */
#ifndef RF_ADVISE_H
#define RF_ADVISE_H

#include "layout.h"
#include "plan.h"
#include <glib.h>

typedef enum {
  RF_PLACE_SPLIT,       /* training from domain 0, inference from the next fresh domain */
  RF_PLACE_INTERLEAVED, /* training and inference domains alternate (shares leaf switches) */
  RF_PLACE_COUNT
} RfPlacementKind;

const char *rf_placement_kind_name(RfPlacementKind k);
/* "split" or "interleaved"; FALSE + one-line error otherwise. */
gboolean rf_placement_kind_parse(const char *s, RfPlacementKind *out, GError **error);

/* Move the domains of pb so that training and inference domains alternate (T I T I ..., the
 * side with more domains finishing alone). Ranks keep their slot inside a domain, so a vLLM
 * replica stays in its domain. Appends the placement to pb->placement_note. */
void rf_problem_interleave(RfProblem *pb);

/* vLLM layout strings for ngpus inference GPUs: "TP{t}xDP{ngpus/t}" for every t of tps[ntps]
 * (tps NULL: every divisor of ngpus) that divides ngpus, and, for a model with routed experts
 * and with_ep, the same with "xEP{ngpus}". Returns a new array of owned strings. */
GPtrArray *rf_advise_layouts(const RfModel *m, int ngpus, const int *tps, int ntps,
                             gboolean with_ep, gboolean without_ep);

/* SGLang layout strings for ngpus inference GPUs: DP engines of TP t each (t from tps[ntps] as
 * above), with data-parallel attention ADP of 1 or t and expert parallel EP of 1 or t (the
 * settings SGLang's docs show: --enable-dp-attention --dp t, --ep-size t), EP only for a model
 * with routed experts, with_ep / without_ep as above. "TP{t}xDP{d}[xEP{t}][xADP{t}]". Without
 * plain (vLLM searched too) the layouts vLLM's place alike are left out: neither ADP nor EP
 * (vLLM's TPxDP), and EP without ADP on one engine (vLLM's EP = TP x DP = TP): their plans are
 * the same bytes. Returns a new array of owned strings. */
GPtrArray *rf_advise_sglang_layouts(const RfModel *m, int ngpus, const int *tps, int ntps,
                                    gboolean with_ep, gboolean without_ep, gboolean plain);

/* The divisibility vLLM needs of a layout, from the model's numbers alone (no problem built):
 * TP divides the attention heads and the linear-attention (KDA / GDN) and Mamba heads, EP (=
 * ngpus) divides the routed experts. FALSE + a one-line reason. rf_problem_new_preset checks
 * everything (this is a cheap first cut). */
gboolean rf_advise_layout_check(const RfModel *m, int tp, int ngpus, gboolean ep, GError **error);

/* The same for a parsed layout p of framework fw on ngpus GPUs: vLLM as above; SGLang's
 * attention TP (TP / ADP) divides the heads, its EP the routed experts. */
gboolean rf_advise_layout_check_fw(const RfModel *m, RfInferFramework fw, const RfParallel *p,
                                   int ngpus, GError **error);

/* How many NVLink domains of domain_gpus GPUs one TP group of tp ranks spans (the presets place
 * a replica of TP <= domain_gpus inside one domain, a larger one over whole domains); 1 when
 * domain_gpus < 1 (unknown). Serving keeps TP's all-reduces on NVLink: advise tries TP > domain
 * only when asked (--allow-cross-domain-tp). */
int rf_advise_tp_domains(int tp, int domain_gpus);

/* The rates a bound assumes, as fractions of the topology's peaks. The simulator runs its links
 * at peak x efficiency (docs/sim.md) and scales the network bytes of the export and broadcast
 * phases by NIC efficiency / collective efficiency: a bound at those rates, with factors capped
 * at 1, stays below every prediction made with that calibration. */
typedef struct {
  double nic, nvlink;               /* achieved / line rate (1: peak) */
  double phase_net[RF_PHASE_COUNT]; /* factor on a phase's network bytes, <= 1 */
  double fixed_s;                   /* per refit, in series before any byte moves */
} RfBoundRates;

/* Peak rates, factors 1, no fixed time: a bound of any calibration. */
void rf_bound_rates_peak(RfBoundRates *r);

/* Lower bound of a plan that sees the fabric as the simulator builds it (docs/sim.md), at the
 * rates r (NULL: peak): the busiest of every GPU's NICs (per_gpu x min(line rate x r->nic,
 * PCIe)) and NVLink (tx and rx per GPU, peak x r->nvlink), and with oversubscription > 1 every
 * leaf's uplink and downlink; plus r->fixed_s. With hybrid_sequential (the simulator runs a
 * hybrid's m2n part, then its gather-broadcast part: calibration [hybrid] overlap=0), a hybrid
 * plan's bound is also at least the sum of the two parts' busiest-NIC times. Never below the
 * plan's own lower_bound_s (NICs at line rate). *what gets a static name of the binding resource
 * ("NIC", "NVLink", "leaf", "NIC, m2n then gather-broadcast"). Cost: messages + GPUs. */
double rf_plan_fabric_bound(const RfPlan *plan, const RfBoundRates *r, gboolean hybrid_sequential,
                            const char **what);

#endif
