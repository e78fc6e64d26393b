/* migc report OUTDIR... [-o DIR] [--junit F] [--force]
 *
 * Merges the result.json files of one or more `migc batch` folders (the shards of a
 * manifest) into one report: report.json, report.md, report.html and junit.xml in
 * DIR (default: the first OUTDIR). Exit 0 when every model passed on every target,
 * 1 when some failed, 2 when a folder holds no results or two hold the same model. */
#include "batch.h"
#include "cli.h"
#include <stdio.h>
#include "outfile.h"
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>

static void help(FILE *f) {
  fprintf(f,
          "usage: migc report OUTDIR... [-o DIR] [--junit F] [--force]\n"
          "\n"
          "Merges `migc batch` folders (one per shard, or one) into one report, written to\n"
          "DIR (default: the first OUTDIR):\n"
          "  report.json   every model's result per target, the summary per target and the\n"
          "                ops that block the most models (docs/batch-report.schema.json)\n"
          "  report.md     the same for a pull request\n"
          "  report.html   one self-contained page: a sortable model x target matrix, the\n"
          "                blocking ops per target, time and size per model, a plot of the\n"
          "                converted rate per target\n"
          "  junit.xml     one testcase per model and target, the reason of each failure\n"
          "A model a folder's batch.json lists but which has no result.json (a shard that\n"
          "was killed) is reported as failed, \"missing\".\n"
          "\n"
          "  -o DIR      where the report goes\n"
          "  --junit F   the JUnit report also to F\n"
          "  --force     replace existing report files in a DIR that is not one of the\n"
          "              OUTDIRs (a batch folder's own report is always rewritten)\n"
          "\n"
          "Exit status: 0 every model passed, 1 some failed, 2 bad input.\n");
}

/* Whether a and b name one existing folder. */
static int same_folder(const char *a, const char *b) {
  struct stat x, y;
  return !stat(a, &x) && !stat(b, &y) && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

int cmd_report(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    help(stdout);
    return EXIT_OK;
  }
  const char *out = NULL, *junit = NULL;
  int force = 0;
  const char **dirs = calloc((size_t)argc, sizeof *dirs);
  int n = 0;
  if (!dirs) return EXIT_INTERNAL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-o") && i + 1 < argc) out = argv[++i];
    else if (!strcmp(argv[i], "--junit") && i + 1 < argc) junit = argv[++i];
    else if (!strcmp(argv[i], "--force")) force = 1;
    else if (argv[i][0] == '-') {
      fprintf(stderr, "migc report: unknown option or missing value: '%s'\n", argv[i]);
      help(stderr);
      free(dirs);
      return EXIT_BAD_INPUT;
    } else dirs[n++] = argv[i];
  }
  if (!n) {
    fprintf(stderr, "migc report: no batch folder given\n");
    help(stderr);
    free(dirs);
    return EXIT_BAD_INPUT;
  }
  /* A batch folder's report files are its own, remade from its results: writing
   * them again is no loss. Any other existing file needs --force. */
  int own = !out;
  for (int i = 0; i < n && !own; i++) own = same_folder(out, dirs[i]);
  mg_out_run(force || own);
  mg_diags d;
  mg_diags_init(&d);
  json_t *rep = report_build(dirs, n, &d);
  int rc = !rep ? EXIT_BAD_INPUT : report_write_all(rep, out ? out : dirs[0], junit, &d) ? EXIT_BAD_INPUT
                                                                                          : report_exit_status(rep);
  cli_report(&d);
  if (rep) {
    json_t *s = json_object_get(rep, "summary");
    fprintf(stderr, "report: %lld models, %lld passed, %lld failed; %s/report.html\n",
            json_integer_value(json_object_get(s, "models")), json_integer_value(json_object_get(s, "passed")),
            json_integer_value(json_object_get(s, "failed")), out ? out : dirs[0]);
  }
  json_decref(rep);
  mg_diags_free(&d);
  free(dirs);
  return rc;
}
