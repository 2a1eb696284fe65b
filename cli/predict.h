/* What every prediction states beside its figure, shared by `refit plan`, `sim`, `advise` and
 * `step`: which calibration it used (and where that came from), and whether the inference GPUs
 * hold the weights plus the refit's extra memory. */
#ifndef RF_PREDICT_H
#define RF_PREDICT_H

#include "memory.h"
#include "sim.h"
#include "topology.h"
#include <glib.h>

/* Fill c (cleared first) with, in order of precedence: the file at path (--calibration) when
 * path is not NULL; the topology's [calibration] base plus its overrides; the file named after
 * the topology (sim/calibration/NAME.cal); else the neutral defaults. *source gets a one-line
 * description (caller frees), *neutral TRUE for the last case. FALSE + one-line error for a
 * malformed file, an unknown override key or a value out of the key's range. */
gboolean rf_calibration_select(RfCalibration *c, const char *path, const RfTopology *t,
                               char **source, gboolean *neutral, GError **error);

/* Memory verdict of a plan: when m exceeds the topology's GPU memory, a warning on stderr
 * ("WHO: warning: ...", unless quiet) or, with strict, FALSE + RF_ERROR_INPUT (exit 2). */
gboolean rf_memory_check(const RfMemory *m, const char *who, gboolean strict, gboolean quiet,
                         GError **error);

/* Which model produced a prediction: "executor" (the schedule refit run executes; refit's
 * default), "flows" (refit's strategies as flows at calibrated rates: an ideal estimate), or
 * "SOFTWARE/PATH" for a model of the published software: PATH its variant, or
 * "gather-broadcast" for NeMo RL's collective path, to which no variant applies (strategy: an
 * RfStrategy, or -1 for none in particular). Static string or one the caller frees: always
 * g_free. */
char *rf_predict_model_key(RfSoftware sw, RfSwVariant v, int strategy);

/* PATH above: the variant's name, or the strategy's where the software's variants do not apply
 * to it (rf_variant_applies: NeMo RL's gather-broadcast). */
const char *rf_predict_path_name(RfSoftware sw, RfSwVariant v, int strategy);

/* The same in words, for a report's "# model:" line: what the model is; for refit's executor,
 * its error against refit run itself on an emulated network as experiments/emulated.py last
 * measured it (experiments/results/emulated.csv), or that it was not; for a model of the
 * published software, its out-of-sample error on the published runs of that path as
 * experiments/validate-public and experiments/main.sh (the reported table) last measured it
 * (experiments/results/validate-public-variants.csv and reproduce-models.csv under the data
 * dir), or that it has none. Caller frees. *oos_pct gets the mean |error| in percent
 * (validate-public's where it has one, else the reported table's), or -1 when not measured. */
char *rf_predict_model_line(RfSoftware sw, RfSwVariant v, int strategy, double *oos_pct);

/* For a prediction of refit's executor simulated on a coarse platform (group GPUs per simulated
 * host, one actor per host: above 1,024 ranks, or --group): how far that platform came from the
 * exact one where both run, as experiments/executor_scale.py last measured it at this group
 * (experiments/results/executor-scale.csv under the data dir), or that it did not. Caller
 * frees. */
char *rf_predict_coarse_line(int group);

/* Where a prediction's memory figure comes from, in words: rf_memory_from_name(m), and for a
 * model of the published software whose figure is refit run's schedule for the plan (not its
 * own buffers; NeMo RL's gather-broadcast buckets are its own), that it is refit's memory for
 * this plan, not modelled for that software. Caller frees. */
char *rf_predict_memory_source(RfSoftware sw, const RfMemory *m);

#endif
