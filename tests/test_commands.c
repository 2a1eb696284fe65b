/* The commands behind `refit` (cli/), run in a subprocess each: `refit sim` and `refit calibrate`
 * on the tiny models, their JSON and their one-line refusals. The executors' own tests link their
 * library only (test_sim, test_real); the shell tests (test_cli.sh and others) run the binary. */
#include <glib.h>
#include <stdlib.h>

#include "commands.h"
#include "golden.h"

/* `refit sim --json` prints at least predicted_s and the stages; bad input is one line, rc != 0. */
static void test_command_json(void) {
  if (g_test_subprocess()) {
    char *argv[] = {"sim", "-q",      "--json", "-m",       "tiny-moe", "-t",     "TP2xPP2xEP6",
                    "-i",  "TP2xDP6", "-T",     "dgx-h100", "-s",       "hybrid", NULL};
    exit(rf_cmd_sim(13, argv));
  }
  g_test_trap_subprocess(NULL, 60000000, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed();
  g_test_trap_assert_stdout("*\"predicted_s\"*\"stages\"*\"name\"*\"start_s\"*\"end_s\"*");
}

static void test_command_bad_input(void) {
  if (g_test_subprocess()) {
    char *argv[] = {"sim",     "-m", "tiny-moe",        "-t", "TP2xPP2xEP6", "-i",
                    "TP2xDP6", "-T", "no-such-cluster", NULL};
    exit(rf_cmd_sim(9, argv));
  }
  g_test_trap_subprocess(NULL, 60000000, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_failed();
  g_test_trap_assert_stderr("refit sim: *no-such-cluster*");
}

/* `refit calibrate` fits and reports the leave-one-out error beside the in-sample one. */
static void test_calibrate_loo(void) {
  if (g_test_subprocess()) {
    char *csv = data_path("measured-tiny.csv");
    char *argv[] = {"calibrate", "--measurements", csv, "--param", "refit.fixed_s", NULL};
    int rc = rf_cmd_calibrate(5, argv);
    g_free(csv);
    exit(rc);
  }
  g_test_trap_subprocess(NULL, 120000000, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed();
  g_test_trap_assert_stdout("*fitted on all rows: refit.fixed_s=*leave-one-out*");
}

/* --software on a strategy the published code does not run, or an unknown variant: one line,
 * exit status 2. */
static void test_sw_command_refuses(gconstpointer data) {
  const char *const *extra = data;
  if (g_test_subprocess()) {
    char *argv[] = {"sim",
                    "-m",
                    "tiny-moe",
                    "-t",
                    "TP2xPP2xEP6",
                    "-i",
                    "TP2xDP6",
                    "-T",
                    "dgx-h100",
                    "-s",
                    (char *)extra[0],
                    (char *)extra[1],
                    (char *)extra[2],
                    NULL};
    exit(rf_cmd_sim(13, argv));
  }
  g_test_trap_subprocess(NULL, 60000000, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_failed();
  g_test_trap_assert_stderr(extra[3]);
}

static const char *const sw_refusals[][4] = {
    {"m2n", "--software", "nemo-rl", "refit sim: --software nemo-rl models hybrid*not m2n*"},
    {"hybrid", "--software", "nccl-m2n", "refit sim: --software nccl-m2n models the m2n*"},
    {"m2n", "--software-variant", "pack", "refit sim: unknown variant 'pack' of software refit*"},
    {"m2n", "--software", "foo", "refit sim: unknown software 'foo'*"},
};

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/commands/sim/json", test_command_json);
  g_test_add_func("/commands/sim/bad_input", test_command_bad_input);
  g_test_add_func("/commands/calibrate/loo", test_calibrate_loo);
  for (unsigned i = 0; i < G_N_ELEMENTS(sw_refusals); i++) {
    g_autofree char *path = g_strdup_printf("/commands/sim/software_refuses/%u", i);
    g_test_add_data_func(path, sw_refusals[i], test_sw_command_refuses);
  }
  return g_test_run();
}
