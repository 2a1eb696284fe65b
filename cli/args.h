/* Command-line arguments shared by `refit plan`, `refit sim` and `refit run`: which model and
 * layouts (or which DTensor spec), on which topology, with which strategies. */
#ifndef RF_ARGS_H
#define RF_ARGS_H

#include "layout.h"
#include "plan.h"
#include <glib.h>
#include <stdio.h>

typedef struct {
  char *model;     /* --model NAME|FILE */
  char *train;     /* --train LAYOUT (Megatron) */
  char *infer;     /* --infer LAYOUT */
  char *infer_fw;  /* --infer-framework vllm|sglang|megatron (default vllm) */
  char *lost;      /* --lost GPU,... (elastic recovery) */
  char *lost_dom;  /* --lost-domain D,... */
  char *quant;     /* --infer-quant none|fp8-block|mxfp8 */
  char *quant_at;  /* --quant-at sender|receiver (default sender) */
  char *spec;      /* --spec FILE */
  char *topology;  /* --topology NAME|FILE */
  int domain_size; /* --domain-size N; 0 when not given */
  char *strategy;  /* --strategy NAME|all */
  gboolean json;   /* --json */
  gboolean quiet;  /* --quiet: no placement notes on stderr */
  char *placement; /* --placement split|interleaved (default split) */
  int node_map;    /* --node-map N: GPUs per node of the printed map; 0: none */
} RfArgs;

/* The exit statuses, for the --help of every command (the README's usage section says the same). */
#define RF_EXIT_STATUS_HELP                                                                        \
  "Exit status: 0 success, 1 runtime failure (I/O, a peer, a timeout), 2 bad input or usage,\n"    \
  "3 verification failed (a plan broke an invariant or wrong elements arrived)."

/* g_option_context_parse, then: an argument it does not convert names its option, and with
 * positional FALSE an argument left over is an error. FALSE + one-line error. */
gboolean rf_args_parse(GOptionContext *ctx, int *argc, char ***argv, gboolean positional,
                       GError **error);

/* The cluster of the commands that need bandwidths (refit sim, step and advise) when --topology is
 * not given; refit plan and run place on NVLink domains of --domain-size GPUs instead. */
#define RF_DEFAULT_SIM_TOPOLOGY "dgx-h100"

#define RF_ARGS_NENTRIES 17 /* the shared entries, with the terminator */

/* Option group with the entries above; args must outlive the context. */
GOptionGroup *rf_args_group(RfArgs *args);
/* One shared entry ("model", "train", ...), bound to args, for a command that takes a few of
 * them among its own options: its flag and help are the shared ones. args must outlive the
 * context. FALSE for a name no shared entry has, or for --domain-size (its callback needs the
 * group). */
gboolean rf_args_entry(RfArgs *args, const char *long_name, GOptionEntry *out);
void rf_args_clear(RfArgs *args);

/* Build the problem the arguments describe, on the GPUs of --placement (interleaved:
 * rf_problem_interleave), with the lost GPUs of --lost / --lost-domain marked
 * (rf_problem_set_lost, GPU indices of that placement) and the inference quantization of
 * --infer-quant / --quant-at (rf_problem_set_quant). NULL + one-line error on bad input. */
RfProblem *rf_args_problem(const RfArgs *args, GError **error);

/* With --node-map N: print to f which node (N consecutive GPUs) and NVLink domain hold which
 * training and inference ranks (refit run's MPI rank = global rank), one line per node that
 * holds a rank of the refit: what a host file for the launcher must follow. No-op without it. */
void rf_args_print_node_map(FILE *f, const RfArgs *args, const RfProblem *pb);

/* Strategies selected by --strategy (default: all for plan). Returns the count written to out. */
int rf_args_strategies(const RfArgs *args, RfStrategy out[RF_STRATEGY_COUNT], GError **error);

/* Options of the commands that build plans (`refit plan`, `refit sim`): dump, verify, rings. */
typedef struct {
  char *dump;           /* --dump FILE */
  gboolean verify;      /* --verify */
  int bcast_channels;   /* --bcast-channels N (0: the topology's) */
  gboolean strict;      /* --strict: refuse a plan whose inference GPUs run out of memory */
  gboolean double_bank; /* --double-bank: count refit run --double-bank's second weight bank */
} RfPlanArgs;

#define RF_PLAN_ARGS_NENTRIES 6 /* with the terminator */
/* Fill entries[RF_PLAN_ARGS_NENTRIES] (terminated) for g_option_context_add_main_entries. */
void rf_plan_args_entries(RfPlanArgs *p, GOptionEntry *entries);
void rf_plan_args_clear(RfPlanArgs *p);
/* Check the values once parsed: FALSE + one-line error when out of range. */
gboolean rf_plan_args_check(const RfPlanArgs *p, GError **error);

/* The plan of one strategy, verified and dumped as the options ask (several: the dump file gets
 * the strategy in its name). NULL + one-line error when it cannot be built, fails
 * verification, or cannot be written. */
RfPlan *rf_plan_args_build(const RfPlanArgs *p, const RfProblem *pb, RfStrategy s, gboolean several,
                           GError **error);

#endif
