/* SPDX-License-Identifier: MIT */
/* tools/commands.h - the subcommands of the `tandem` program.
 *
 * Each command is `int tdm_cmd_<name>(int argc, char **argv)` with argv[0]
 * the command name; it returns the process exit status (0 success, 1 a
 * runtime failure, 2 a usage error). tandem.c dispatches on a table of them,
 * so a new command is one prototype here and one row there.
 */
#ifndef TDM_TOOLS_COMMANDS_H
#define TDM_TOOLS_COMMANDS_H

/* cmd-inspect.c: list plugins, features and load failures, or show one. */
int tdm_cmd_inspect(int argc, char **argv);
/* cmd-inspect-devices.c: `tandem inspect devices`. */
int tdm_inspect_devices(void);

/* cmd-train.c: train a model / evaluate a checkpoint. */
int tdm_cmd_train(int argc, char **argv);
int tdm_cmd_eval(int argc, char **argv);

/* cmd-run.c: start and watch the processes of a distributed job. */
int tdm_cmd_run(int argc, char **argv);

/* cmd-data.c: `tandem data preview`, a PNG grid of augmented samples. */
int tdm_cmd_data(int argc, char **argv);

/* cmd-export.c: `tandem export SRC DST`, weights back to PyTorch. */
int tdm_cmd_export(int argc, char **argv);

/* cmd-compare.c: `tandem compare A B`, two weight files within a tolerance. */
int tdm_cmd_compare(int argc, char **argv);

/* cmd-plot.c: `tandem plot`, training curves from JSON-lines logs. */
int tdm_cmd_plot(int argc, char **argv);

/* cmd-check-plugin.c: `tandem check-plugin FILE`, a plugin's conformance. */
int tdm_cmd_check_plugin(int argc, char **argv);

#endif /* TDM_TOOLS_COMMANDS_H */
