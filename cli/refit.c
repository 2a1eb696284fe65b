/* refit: plan, simulate and run the weight refit of disaggregated RL. */
#include <glib.h>
#include <locale.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "real.h"

static void usage(FILE *f) {
  fprintf(
      f, "usage: refit COMMAND [OPTIONS]\n"
         "\n"
         "commands:\n"
         "  model list                 models in the zoo\n"
         "  model show NAME [--json]   parameters, bytes, tensors and byte share per kind\n"
         "  plan ARGS                  exact transfer plan of each strategy: bytes, messages, "
         "bound\n"
         "  sim ARGS                   predicted refit time on a SimGrid model of the cluster\n"
         "  calibrate ARGS             fit calibration parameters to measurements\n"
         "  run ARGS                   run the plan under MPI (host memory or CUDA/NCCL), "
         "verified\n"
         "  topology show|check NAME   every key of a topology file; check it and its calibration\n"
         "  advise ARGS                search inference layouts, placements and strategies\n"
         "  step ARGS                  refit's share of one RL step, end-to-end speedup\n"
         "\n"
         "ARGS: --model NAME --train LAYOUT --infer LAYOUT | --spec FILE, [--topology NAME]\n"
         "      [--domain-size N] [--strategy gather-broadcast|p2p|m2n|hybrid|all] [--json]\n"
         "'refit COMMAND --help' lists every option of a command; 'refit --version' the version\n"
         "and the backends built.\n"
         "\n"
         "--json prints {\"strategies\": [...]}, one object per strategy; with one strategy its\n"
         "fields are also at the top level.\n"
         "\n"
         "exit status: 0 success, 1 runtime failure (I/O, a peer, a timeout), 2 bad input or\n"
         "usage, 3 verification failed (a plan broke an invariant or wrong elements arrived).\n");
}

int main(int argc, char **argv) {
  /* Options are converted from the locale's encoding, and GLib quotes in its messages. */
  setlocale(LC_ALL, "");
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
      !strcmp(argv[1], "help")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!strcmp(argv[1], "--version")) {
    printf("refit %s (backends of refit run: host%s)\n", REFIT_VERSION,
           rf_real_backend_built("cuda") ? ", cuda" : "; cuda not built");
    return 0;
  }
  static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
  } commands[] = {{"model", rf_cmd_model},   {"plan", rf_cmd_plan},
                  {"sim", rf_cmd_sim},       {"calibrate", rf_cmd_calibrate},
                  {"run", rf_cmd_run},       {"topology", rf_cmd_topology},
                  {"advise", rf_cmd_advise}, {"step", rf_cmd_step}};
  for (unsigned i = 0; i < G_N_ELEMENTS(commands); i++)
    if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
  fprintf(stderr, "refit: error: unknown command '%s' (refit --help)\n", argv[1]);
  return 2;
}
