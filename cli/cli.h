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
int cmd_verify(int argc, char **argv);
int cmd_batch(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_precision(int argc, char **argv);

/* Prints every recorded diagnostic to stderr, one line each. */
void cli_report(const mg_diags *d);
/* The file name (without .npy) an output named `in` is written to by `migc run`
 * and by generated runners: '/', '\\', ':' and control characters become '_'. */
void cli_safe_name(const char *in, char *out, size_t n);
/* The .npy file (name and extension) output i of names[0..n) is written to, by
 * `migc run` and by generated runners alike: cli_safe_name's, unless an earlier
 * output's safe name is the same ("a/b" and "a_b"), then "NAME-i.npy", i its
 * position among the outputs. */
void cli_output_file(const char *const *names, int n, int i, char *out, size_t size);
/* Whether two of names[0..n) have the same safe name: the writers then also write
 * output_names.json, which maps each output's name to its file. */
int cli_output_files_collide(const char *const *names, int n);
/* migc coverage's pieces, which convert uses on its one model: the built-in rule
 * sets by target (rs[MAP_TARGET_CPU] stays NULL; 0, or -1 with a diagnostic), and
 * the report of n analysed models in format md/json/html, written atomically to
 * out (stdout when NULL; 0, or -1 after printing why). */
struct rule_set;
int cli_coverage_rules(struct rule_set **rs, mg_diags *d);

int cli_coverage_write(void *models, int n, const int *on, const char *format, const char *out);
/* The script of the HTML reports (coverage, batch): clicking a header of a
 * table.sortable sorts its rows by that column (numbers as numbers), again to reverse. */
#define CLI_SORTABLE_JS                                                                                      \
  "<script>\n"                                                                                               \
  "document.querySelectorAll('table.sortable th').forEach(function(th, col) {\n"                             \
  "  th.addEventListener('click', function() {\n"                                                            \
  "    var body = th.closest('table').tBodies[0], rows = Array.from(body.rows);\n"                           \
  "    var asc = th.dataset.dir !== 'asc'; th.dataset.dir = asc ? 'asc' : 'desc';\n"                         \
  "    rows.sort(function(a, b) {\n"                                                                         \
  "      var x = a.cells[col].textContent, y = b.cells[col].textContent, nx = parseFloat(x), ny = parseFloat(y);\n" \
  "      var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);\n"                               \
  "      return asc ? c : -c; });\n"                                                                         \
  "    rows.forEach(function(r) { body.appendChild(r); }); }); });\n"                                        \
  "</script>\n"
/* Whether p is a directory / a regular file (following links). */
int cli_is_dir(const char *p);
int cli_is_file(const char *p);
/* True if argv has -h/--help. */
int cli_wants_help(int argc, char **argv);
/* The first of inputs[0..n) (NULL entries skipped) that is the same file as `out`
 * (same device and inode, so another spelling or a link of the same file counts),
 * or NULL when out is none of them or does not exist. */
const char *cli_input_named(const char *out, const char *const *inputs, int n);
/* Starts the command's outputs under the output rule (core/outfile.h) with its
 * --force, the files of inputs[0..n) (NULL entries skipped) known as inputs
 * before anything is read, so that no output replaces one. */
void cli_output_rule(int force, const char *const *inputs, int n);
/* A byte count: digits with an optional K, M, G or T (powers of 1024); 0 with *out
 * set, or -1 for anything else (empty, zero, negative, a fraction, trailing text). */
int cli_parse_bytes(const char *s, double *out);
#endif
