/* migc weights SRC -o OUT.ckpt [--graph MODEL.onnx] [--rules R.xml] [--dtype D]
 *              [--map-out MAP.json] [--key K] [--crc] [--force] */
#include "export.h"
#include "cli.h"
#include "onnx_import.h"
#include "passes.h"
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef MIGC_RULES_DIR
#define MIGC_RULES_DIR "rules"
#endif

static void help(FILE *f) {
  fprintf(f,
          "usage: migc weights SRC.pth|SRC.safetensors|MODEL.onnx -o OUT.ckpt [options]\n"
          "\n"
          "Writes a MindSpore checkpoint whose parameters carry MindSpore names (the torch\n"
          "module tree kept; BatchNorm -> gamma/beta/moving_mean/moving_variance, LayerNorm\n"
          "and GroupNorm -> gamma/beta, Embedding -> embedding_table, PReLU -> w, Conv1d\n"
          "weights -> (out, in, 1, k); see rules/torch_mindspore.xml).\n"
          "\n"
          "  --graph MODEL.onnx   bind every graph initializer to a source tensor (by name,\n"
          "                       by value, through folded BatchNorm) and take module types\n"
          "                       from the ops that consume them\n"
          "  --rules R.xml        extra rules: module types, <rename match= replace=>,\n"
          "                       <override torch= ms=> (override the built-in ones)\n"
          "  --dtype D            keep (default), fp32, fp16 or bf16 for floating tensors\n"
          "  --map-out MAP.json   what was done to every tensor\n"
          "  --key K              the dict inside the .pth that holds the tensors\n"
          "  --crc                append MindSpore's CRC trailer (MindSpore >= 2.3)\n"
          "  --max-output-bytes N refuse a checkpoint larger than N bytes (K, M, G, T\n"
          "                       suffixes; default 64x the source, at least 256M, at\n"
          "                       most 64G: a small file of stride-0 views expands)\n"
          "  --force              replace an existing OUT.ckpt (and MAP.json)\n");
}

int cmd_weights(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    help(stdout);
    return EXIT_OK;
  }
  const char *src = NULL, *out = NULL, *graph = NULL, *user_rules = NULL, *map_out = NULL, *key = NULL;
  const char *dtype = "keep";
  int crc = 0, force = 0;
  double max_out = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int more = i + 1 < argc;
    if (!strcmp(a, "-o") && more) out = argv[++i];
    else if (!strcmp(a, "--graph") && more) graph = argv[++i];
    else if (!strcmp(a, "--rules") && more) user_rules = argv[++i];
    else if (!strcmp(a, "--dtype") && more) dtype = argv[++i];
    else if (!strcmp(a, "--map-out") && more) map_out = argv[++i];
    else if (!strcmp(a, "--key") && more) key = argv[++i];
    else if (!strcmp(a, "--crc")) crc = 1;
    else if (!strcmp(a, "--force")) force = 1;
    else if (!strcmp(a, "--max-output-bytes") && more) {
      if (cli_parse_bytes(argv[++i], &max_out)) {
        fprintf(stderr, "migc weights: --max-output-bytes takes a positive byte count (e.g. 8G), not '%s'\n", argv[i]);
        return EXIT_BAD_INPUT;
      }
    }
    else if (a[0] == '-') {
      fprintf(stderr, "migc weights: unknown option or missing value: '%s'\n", a);
      help(stderr);
      return EXIT_BAD_INPUT;
    } else if (!src) src = a;
    else {
      fprintf(stderr, "migc weights: one source at a time\n");
      return EXIT_BAD_INPUT;
    }
  }
  mg_dtype to_float = MG_UNDEFINED;
  if (!strcmp(dtype, "fp32")) to_float = MG_F32;
  else if (!strcmp(dtype, "fp16")) to_float = MG_F16;
  else if (!strcmp(dtype, "bf16")) to_float = MG_BF16;
  else if (strcmp(dtype, "keep")) {
    fprintf(stderr, "migc weights: --dtype must be keep, fp32, fp16 or bf16\n");
    return EXIT_BAD_INPUT;
  }
  if (!src || !out) {
    help(stderr);
    return EXIT_BAD_INPUT;
  }
  const char *inputs[] = {src, graph, user_rules, out};
  cli_output_rule(force, inputs, 3);
  const char *clash = map_out && out && !strcmp(map_out, out) ? out : cli_input_named(map_out, inputs, 4);
  if (clash || (map_out && !force && !access(map_out, F_OK))) {
    if (clash) fprintf(stderr, "migc weights: --map-out %s is %s; refusing to overwrite it\n", map_out,
                       clash == out ? "the checkpoint's own path" : clash);
    else fprintf(stderr, "migc weights: --map-out %s exists; --force replaces it\n", map_out);
    return EXIT_BAD_INPUT;
  }
  char rs[PATH_MAX], ro[PATH_MAX];
  if (realpath(src, rs) && realpath(out, ro) && !strcmp(rs, ro)) {
    fprintf(stderr, "migc weights: refusing to overwrite the input %s\n", src);
    return EXIT_BAD_INPUT;
  }
  mg_diags d;
  mg_diags_init(&d);
  int rc = EXIT_OK;
  wt_rules *rules = wt_rules_new();
  wt_source *s = NULL;
  mg_model *m = NULL;
  wt_binding *binds = NULL;
  int n_binds = 0;
  char builtin[PATH_MAX];
  const char *dir = getenv("MIGC_RULES_DIR") ? getenv("MIGC_RULES_DIR") : MIGC_RULES_DIR;
  snprintf(builtin, sizeof builtin, "%s/torch_mindspore.xml", dir);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  if (!rules) mg_error(&d, OOM, NULL, NULL, "out of memory loading the naming rules");
  if (!rules || wt_rules_load(rules, builtin, &d) || (user_rules && wt_rules_load(rules, user_rules, &d)) ||
      weights_open(src, key, &s, &d)) {
    rc = EXIT_BAD_INPUT;
    goto done;
  }
  if (graph && (onnx_import(graph, &d, &m) || mg_prepare(m, NULL, 0, &d) || wt_bind(s, m, &binds, &n_binds, &d))) {
    rc = EXIT_BAD_INPUT;
    goto done;
  }
  wt_export_opts eo = {to_float, crc, force, src, graph, 0, max_out};
  wt_export_stats st;
  int erc = wt_export_ckpt(s, rules, m, binds, n_binds, out, map_out, &eo, &st, &d);
  if (erc == 1) {
    mg_error(&d, INVALID, src, NULL, "no tensors to write: MindSpore cannot load an empty checkpoint");
    rc = EXIT_BAD_INPUT;
    goto done;
  }
  if (erc) {
    rc = EXIT_BAD_INPUT;
    goto done;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (graph)
    printf("binding: %d of %d graph initializers bound (%d constants, %d unbound)\n", st.bound,
           n_binds - st.constants, st.constants, st.unbound);
  double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  printf("wrote %s: %d tensors (%d renamed, %d dropped), %.1f MB in %.2f s\n", out, st.written, st.renamed,
         st.dropped, st.bytes / 1e6, secs);
done:
  cli_report(&d);
  mg_free(binds);
  mg_model_free(m);
  wt_close(s);
  wt_rules_free(rules);
  mg_diags_free(&d);
  return rc;
}
