/* migc run MODEL.onnx --input NAME=x.npy... [--output-dir D] */
#include "cli.h"
#include "export.h"
#include "outfile.h"
#include "interp.h"
#include "onnx_import.h"
#include "passes.h"
#include <jansson.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void help(FILE *f) {
  fprintf(f,
          "usage: migc run MODEL.onnx --input NAME=x.npy... [--output-dir D] [--seed S]\n"
          "\n"
          "Runs the model with the reference interpreter and writes each graph output\n"
          "to D/<output name>.npy ('/' and other unsafe characters in the name become\n"
          "'_'). D defaults to the current directory and is created if missing. Every\n"
          "graph input must be given, with the model's dtype and a shape that matches\n"
          "its fixed dimensions; anything else is an error (exit status 2).\n"
          "An existing output file is replaced only with --force; an input never is.\n");
}


int cmd_run(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    help(stdout);
    return EXIT_OK;
  }
  const char *model = NULL, *outdir = ".";
  const char *in_names[64], *in_paths[64];
  int n_in = 0, force = 0;
  uint64_t seed = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--input") && i + 1 < argc) {
      char *eq = strchr(argv[++i], '=');
      if (!eq || eq == argv[i] || n_in >= 64) {
        fprintf(stderr, "migc run: --input wants NAME=FILE.npy, got '%s'\n", argv[i]);
        return EXIT_BAD_INPUT;
      }
      *eq = 0;
      in_names[n_in] = argv[i];
      in_paths[n_in++] = eq + 1;
    } else if (!strcmp(argv[i], "--output-dir") && i + 1 < argc) {
      outdir = argv[++i];
    } else if (!strcmp(argv[i], "--force")) {
      force = 1;
    } else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
      seed = strtoull(argv[++i], NULL, 10);
    } else if (argv[i][0] == '-') {
      fprintf(stderr, "migc run: unknown option '%s'\n", argv[i]);
      help(stderr);
      return EXIT_BAD_INPUT;
    } else if (!model) {
      model = argv[i];
    } else {
      fprintf(stderr, "migc run: one model at a time\n");
      return EXIT_BAD_INPUT;
    }
  }
  if (!model) {
    help(stderr);
    return EXIT_BAD_INPUT;
  }
  cli_output_rule(force, in_paths, n_in);
  mg_diags d;
  mg_diags_init(&d);
  mg_model *m = NULL;
  mg_array inputs[64], *outs = NULL;
  const char **out_names = NULL;
  int loaded = 0, rc = EXIT_OK;
  if (onnx_import(model, &d, &m) || mg_prepare(m, NULL, 0, &d)) {
    rc = EXIT_BAD_INPUT;
    goto done;
  }
  const int n_out = m->graph->n_outputs;
  out_names = calloc((size_t)n_out + 1, sizeof *out_names);
  if (!out_names) {
    rc = EXIT_INTERNAL;
    goto done;
  }
  for (int i = 0; i < n_out; i++) out_names[i] = m->graph->outputs[i]->name;
  /* every output file by the output rule, before the model runs: a refusal
   * writes nothing */
  for (int i = 0; i < n_out; i++) {
    char file[600], path[PATH_MAX];
    cli_output_file(out_names, n_out, i, file, sizeof file);
    snprintf(path, sizeof path, "%s/%s", outdir, file);
    if (mg_out_check(path, 1, &d)) rc = EXIT_BAD_INPUT;
  }
  char names_json[PATH_MAX];
  snprintf(names_json, sizeof names_json, "%s/output_names.json", outdir);
  if (cli_output_files_collide(out_names, n_out) && mg_out_check(names_json, 1, &d)) rc = EXIT_BAD_INPUT;
  if (rc) goto done;
  for (int i = 0; i < n_in; i++, loaded++) {
    if (npy_read_file(in_paths[i], &inputs[i], &d)) {
      rc = EXIT_BAD_INPUT;
      goto done;
    }
    inputs[i].name = strdup(in_names[i]);
  }
  interp_options opt = {.seed = seed};
  if (interp_run(m, inputs, n_in, &opt, &outs, &d)) {
    int usage = 0;
    for (size_t k = 0; k < d.count; k++) usage |= d.items[k].code == MG_D_USAGE;
    rc = usage || d.count ? EXIT_BAD_INPUT : EXIT_INTERNAL;
    goto done;
  }
  if (mkdir(outdir, 0777) && errno != EEXIST) {
    fprintf(stderr, "migc run: cannot create %s: %s\n", outdir, strerror(errno));
    rc = EXIT_BAD_INPUT;
    goto done;
  }
  if (cli_output_files_collide(out_names, n_out)) { /* say which file holds which output */
    json_t *map = json_object();
    char file[600];
    for (int i = 0; i < n_out; i++) {
      cli_output_file(out_names, n_out, i, file, sizeof file);
      json_object_set_new(map, out_names[i], json_string(file));
    }
    if (wt_write_json(names_json, map, JSON_INDENT(2) | JSON_SORT_KEYS, &d)) rc = EXIT_BAD_INPUT;
    json_decref(map);
  }
  for (int i = 0; i < n_out; i++) {
    char name[600], path[PATH_MAX];
    cli_output_file(out_names, n_out, i, name, sizeof name);
    snprintf(path, sizeof path, "%s/%s", outdir, name);
    if (npy_write_file(path, &outs[i], &d)) {
      rc = EXIT_BAD_INPUT;
      continue;
    }
    printf("%s: %s", path, mg_dtype_name(outs[i].dtype));
    for (int k = 0; k < outs[i].rank; k++) printf("%s%lld", k ? "x" : " ", (long long)outs[i].dims[k]);
    printf("\n");
  }
done:
  free(out_names);
  cli_report(&d);
  for (int i = 0; i < loaded; i++) mg_array_free(&inputs[i]);
  if (outs) mg_arrays_free(outs, m->graph->n_outputs);
  mg_model_free(m);
  mg_diags_free(&d);
  return rc;
}
