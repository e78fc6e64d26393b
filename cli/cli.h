/* The migc command line: one file per subcommand, each with one entry point. Only
 * cli/ prints; library code records diagnostics that cli_report() prints. */
#ifndef MG_CLI_H
#define MG_CLI_H
#include "diag.h"
#include <stddef.h>

enum { EXIT_OK = 0, EXIT_PARITY = 1, EXIT_BAD_INPUT = 2, EXIT_INTERNAL = 3 };

int cmd_inspect(int argc, char **argv);
int cmd_conformance(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_ckpt(int argc, char **argv);
int cmd_coverage(int argc, char **argv);
int cmd_weights(int argc, char **argv);
int cmd_convert(int argc, char **argv);

/* Prints every recorded diagnostic to stderr, one line each. */
void cli_report(const mg_diags *d);
/* The file name (without .npy) an output named `in` is written to by `migc run`
 * and by generated runners: '/', '\\', ':' and control characters become '_'. */
void cli_safe_name(const char *in, char *out, size_t n);
/* True if argv has -h/--help. */
int cli_wants_help(int argc, char **argv);
#endif
