/* Subcommands implemented in cli/ (sim/ and real/ export their own). argv[0] is the command. */
#ifndef RF_COMMANDS_H
#define RF_COMMANDS_H

int rf_cmd_model(int argc, char **argv);
int rf_cmd_plan(int argc, char **argv);

#endif
