/* The migc command line: one file per subcommand, each with one entry point. Only
 * cli/ prints; library code records diagnostics that cli_report() prints. */
#ifndef MG_CLI_H
#define MG_CLI_H
#include "diag.h"

enum { EXIT_OK = 0, EXIT_PARITY = 1, EXIT_BAD_INPUT = 2, EXIT_INTERNAL = 3 };

int cmd_inspect(int argc, char **argv);
int cmd_conformance(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_ckpt(int argc, char **argv);
int cmd_coverage(int argc, char **argv);
int cmd_weights(int argc, char **argv);

/* Prints every recorded diagnostic to stderr, one line each. */
void cli_report(const mg_diags *d);
/* True if argv has -h/--help. */
int cli_wants_help(int argc, char **argv);
#endif
