/* The commands of `refit`, one per file in cli/ (cmd_NAME.c). argv[0] is the command name;
 * each returns the process exit status: 0 ok, 1 runtime failure, 2 bad input or usage,
 * 3 verification failed (rf_error_exit_status of the error that stopped it). */
#ifndef RF_COMMANDS_H
#define RF_COMMANDS_H

int rf_cmd_model(int argc, char **argv);     /* refit model list | show NAME */
int rf_cmd_plan(int argc, char **argv);      /* refit plan: exact plans, no executor */
int rf_cmd_sim(int argc, char **argv);       /* refit sim: the SimGrid executor (sim/) */
int rf_cmd_calibrate(int argc, char **argv); /* refit calibrate: fit sim/ calibration keys */
int rf_cmd_run(int argc, char **argv);       /* refit run: the MPI executor (real/) */
int rf_cmd_topology(int argc, char **argv);  /* refit topology show|check NAME|FILE */
int rf_cmd_advise(int argc, char **argv);    /* refit advise: search layouts and strategies */
int rf_cmd_step(int argc, char **argv);      /* refit step: refit's share of one RL step */

#endif
