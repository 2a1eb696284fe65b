/* refit: plan, simulate and run the weight refit of disaggregated RL. */
#include <glib.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#ifdef REFIT_HAVE_SIM
#include "sim.h"
#endif
#ifdef REFIT_HAVE_REAL
#include "real.h"
#endif

static void usage(FILE *f) {
  fprintf(
      f,
      "usage: refit COMMAND [OPTIONS]\n"
      "\n"
      "commands:\n"
      "  model list                 models in the zoo\n"
      "  model show NAME [--json]   parameters, bytes, tensors and byte share per kind\n"
      "  plan ARGS                  exact transfer plan of each strategy: bytes, messages, bound\n"
#ifdef REFIT_HAVE_SIM
      "  sim ARGS                   predicted refit time on a SimGrid model of the cluster\n"
      "  calibrate ARGS             fit calibration parameters to measurements\n"
#endif
#ifdef REFIT_HAVE_REAL
      "  run ARGS                   run the plan under MPI (host memory or CUDA/NCCL), verified\n"
#endif
      "\n"
      "ARGS: --model NAME --train LAYOUT --infer LAYOUT | --spec FILE, [--topology NAME]\n"
      "      [--domain-size N] [--strategy gather-broadcast|p2p|m2n|hybrid|all] [--json]\n"
      "'refit COMMAND --help' lists every option of a command.\n");
}

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
      !strcmp(argv[1], "help")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "model")) return rf_cmd_model(argc - 1, argv + 1);
  if (!strcmp(cmd, "plan")) return rf_cmd_plan(argc - 1, argv + 1);
#ifdef REFIT_HAVE_SIM
  if (!strcmp(cmd, "sim")) return rf_sim_command(argc - 1, argv + 1);
  if (!strcmp(cmd, "calibrate")) return rf_calibrate_command(argc - 1, argv + 1);
#else
  if (!strcmp(cmd, "sim") || !strcmp(cmd, "calibrate")) {
    fprintf(stderr, "refit: error: this build has no SimGrid executor (libsimgrid-dev missing)\n");
    return 2;
  }
#endif
#ifdef REFIT_HAVE_REAL
  if (!strcmp(cmd, "run")) return rf_run_command(argc - 1, argv + 1);
#else
  if (!strcmp(cmd, "run")) {
    fprintf(stderr, "refit: error: this build has no real executor (MPI missing)\n");
    return 2;
  }
#endif
  fprintf(stderr, "refit: error: unknown command '%s' (refit --help)\n", cmd);
  return 2;
}
