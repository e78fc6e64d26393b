/* migc precision MODEL.onnx --precision fp16|bf16 [--samples N | --inputs DIR]
 *                [--budget TOL] [--top K] [--json FILE]
 *
 * What a lower precision costs the model and which layers are to blame
 * (verify/precision.h): the error with every layer at P, each layer's own share,
 * and with --budget the fewest layers to keep float32. */
#include "cli.h"
#include "export.h"
#include "onnx_import.h"
#include "outfile.h"
#include "passes.h"
#include "precision.h"
#include "arena.h"
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void help(FILE *f) {
  fprintf(f,
          "usage: migc precision MODEL.onnx --precision fp16|bf16|int8 [--samples N] [--scale S]\n"
          "                      [--seed S] [--inputs DIR] [--budget TOL] [--top K]\n"
          "                      [--keep-top K] [--calibrate DIR | --calib-samples N]\n"
          "                      [--weights-only]\n"
          "                      [--input-shape N=DIMS]... [--json FILE] [--force]\n"
          "\n"
          "Runs the model with the reference interpreter at float32 and again with its\n"
          "layers at the given precision (each float32 tensor a layer reads or writes\n"
          "rounded to it, arithmetic in float32: what fp32-accumulating fp16 and bf16\n"
          "kernels do), and reports, over the samples:\n"
          "  - the error with every layer at the precision;\n"
          "  - the per-layer profile: the error of the model with that one layer at the\n"
          "    precision and the rest float32, worst first (the top K, default 10);\n"
          "  - with --budget TOL: the layers kept float32 so that the error is at most\n"
          "    TOL, chosen greedily from the profile and then pruned;\n"
          "  - with --keep-top K: the error with the profile's K worst layers float32,\n"
          "    which checks what the profile predicts.\n"
          "int8 is static post-training quantisation, emulated as QuantizeLinear/\n"
          "DequantizeLinear pairs on each Conv, Gemm and MatMul: weights per output\n"
          "channel, int8 symmetric; activations and outputs per tensor, uint8 over the\n"
          "min-max range seen on calibration inputs (--calibrate DIR: its .npy files;\n"
          "else --calib-samples N seeded inputs, default 16, drawn apart from the\n"
          "measured ones).\n"
          "--weights-only puts only the weights at the precision, activations float32:\n"
          "what the cpu target's --precision fp16|bf16 does.\n"
          "Error: max |out - ref| / max |ref| per output, the largest over samples and\n"
          "outputs; the cosine is the smallest.\n"
          "\n"
          "  --samples N    seeded inputs, normal(0, S) (--scale, default 1), seed --seed\n"
          "                 (default 0); default 8\n"
          "  --inputs DIR   the .npy files of DIR, in name order, one sample each, for a\n"
          "                 model with one input (instead of --samples)\n"
          "  --input-shape N=DIMS  input N's shape (e.g. input=1x3x224x224); a symbolic\n"
          "                 dim of an input not named here is taken as 1\n"
          "  --json FILE    everything, all layers, as JSON (written atomically)\n"
          "\n"
          "Exit status: 0; 2 bad input or usage.\n");
}

typedef struct {
  const char *model, *inputs_dir, *calib_dir, *json, *budget_text;
  prec_kind p;
  int have_p, samples, calib_samples, top, keep_top, force, weights_only;
  double scale, budget;
  uint64_t seed;
  mg_shape_override ov[32]; /* --input-shape, then the symbolic inputs at 1 */
  int n_ov;
} precision_job;

static int parse_args(int argc, char **argv, precision_job *j) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const int more = i + 1 < argc;
    char *end = NULL;
    if (!strcmp(a, "--precision") && more) {
      if (prec_parse(argv[++i], &j->p) || j->p == PREC_FP32) {
        fprintf(stderr, "migc precision: --precision wants fp16, bf16 or int8, got '%s'\n", argv[i]);
        return -1;
      }
      j->have_p = 1;
    } else if ((!strcmp(a, "--samples") || !strcmp(a, "--calib-samples")) && more) {
      long v = strtol(argv[++i], &end, 10);
      if (*end || end == argv[i] || v < 1 || v > 100000) {
        fprintf(stderr, "migc precision: %s wants a count from 1 to 100000, got '%s'\n", a, argv[i]);
        return -1;
      }
      *(a[2] == 's' ? &j->samples : &j->calib_samples) = (int)v;
    } else if (!strcmp(a, "--calibrate") && more) {
      j->calib_dir = argv[++i];
    } else if ((!strcmp(a, "--top") || !strcmp(a, "--keep-top")) && more) {
      long v = strtol(argv[++i], &end, 10);
      if (*end || end == argv[i] || v < 0 || v > 1000000) {
        fprintf(stderr, "migc precision: %s wants a count, got '%s'\n", a, argv[i]);
        return -1;
      }
      *(a[2] == 't' ? &j->top : &j->keep_top) = (int)v;
    } else if ((!strcmp(a, "--scale") || !strcmp(a, "--budget")) && more) {
      double v = strtod(argv[++i], &end);
      if (*end || end == argv[i] || !isfinite(v) || v <= 0) {
        fprintf(stderr, "migc precision: %s wants a positive number, got '%s'\n", a, argv[i]);
        return -1;
      }
      if (a[2] == 's') j->scale = v;
      else j->budget = v, j->budget_text = argv[i];
    } else if (!strcmp(a, "--seed") && more) {
      j->seed = strtoull(argv[++i], &end, 10);
      if (*end) {
        fprintf(stderr, "migc precision: --seed wants an integer, got '%s'\n", argv[i]);
        return -1;
      }
    } else if (!strcmp(a, "--input-shape") && more) {
      char *eq = strchr(argv[++i], '=');
      if (!eq || eq == argv[i] || j->n_ov >= 16 || mg_shape_parse(eq + 1, &j->ov[j->n_ov].shape)) {
        fprintf(stderr, "migc precision: --input-shape wants NAME=1x3x224x224, got '%s'\n", argv[i]);
        return -1;
      }
      *eq = 0;
      j->ov[j->n_ov++].name = argv[i];
    } else if (!strcmp(a, "--inputs") && more) {
      j->inputs_dir = argv[++i];
    } else if (!strcmp(a, "--json") && more) {
      j->json = argv[++i];
    } else if (!strcmp(a, "--weights-only")) {
      j->weights_only = 1;
    } else if (!strcmp(a, "--force")) {
      j->force = 1;
    } else if (a[0] == '-') {
      fprintf(stderr, "migc precision: unknown option or missing value: '%s'\n", a);
      return -1;
    } else if (!j->model) {
      j->model = a;
    } else {
      fprintf(stderr, "migc precision: one model at a time\n");
      return -1;
    }
  }
  if (!j->model || !j->have_p) {
    fprintf(stderr, "migc precision: %s\n", !j->model ? "no model given" : "--precision fp16|bf16|int8 is required");
    return -1;
  }
  return 0;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The samples of --inputs DIR: each .npy one sample of the model's only input. */
static int read_inputs_dir(const mg_model *m, const char *dir, prec_set *s, mg_diags *d) {
  memset(s, 0, sizeof *s);
  if (m->graph->n_inputs != 1) {
    mg_error(d, USAGE, NULL, NULL, "--inputs DIR takes models with one input; this one has %d", m->graph->n_inputs);
    return -1;
  }
  DIR *dp = opendir(dir);
  if (!dp) {
    mg_error(d, IO, NULL, NULL, "cannot open %s: %s", dir, strerror(errno));
    return -1;
  }
  char **names = NULL;
  int n = 0, cap = 0, rc = 0;
  struct dirent *e;
  while ((e = readdir(dp))) {
    const size_t len = strlen(e->d_name);
    if (len < 5 || strcmp(e->d_name + len - 4, ".npy")) continue;
    if (n == cap) {
      char **grown = mg_realloc(names, sizeof *names * (size_t)(cap = cap ? 2 * cap : 16));
      if (!grown) { rc = -1; break; }
      names = grown;
    }
    if (!(names[n] = mg_strdup(e->d_name))) { rc = -1; break; }
    n++;
  }
  closedir(dp);
  if (!rc && !n) {
    mg_error(d, USAGE, NULL, NULL, "%s holds no .npy file", dir);
    rc = -1;
  }
  if (!rc) {
    qsort(names, (size_t)n, sizeof *names, by_name);
    s->n_inputs = 1;
    s->inputs = mg_calloc((size_t)n, sizeof *s->inputs);
    if (!s->inputs) rc = -1;
  }
  for (int i = 0; !rc && i < n; i++) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    if (npy_read_file(path, &s->inputs[i], d)) {
      rc = -1;
      break;
    }
    s->n_samples = i + 1;
    s->inputs[i].name = mg_strdup(m->graph->inputs[0]->name);
    if (!s->inputs[i].name) rc = -1;
  }
  if (rc && !d->errors) mg_error(d, OOM, NULL, NULL, "out of memory reading %s", dir);
  for (int i = 0; i < n; i++) mg_free(names[i]);
  mg_free(names);
  if (rc) prec_set_free(s);
  return rc;
}

/* Every input with a symbolic dim that --input-shape did not fix, at 1 there. */
static void fix_symbolic_inputs(const mg_model *m, precision_job *j) {
  for (int i = 0; i < m->graph->n_inputs && j->n_ov < 32; i++) {
    const mg_value *v = m->graph->inputs[i];
    int named = 0, symbolic = 0;
    for (int k = 0; k < j->n_ov; k++) named |= !strcmp(j->ov[k].name, v->name);
    for (int k = 0; k < v->shape.rank; k++) symbolic |= v->shape.d[k].v < 0;
    if (named || !symbolic) continue;
    mg_shape_override *o = &j->ov[j->n_ov++];
    o->name = v->name;
    o->shape = v->shape;
    for (int k = 0; k < o->shape.rank; k++)
      if (o->shape.d[k].v < 0) o->shape.d[k].v = 1, o->shape.d[k].sym = NULL;
    char buf[256];
    fprintf(stderr, "precision: input '%s' runs at %s (its symbolic dims at 1; --input-shape to choose)\n", v->name,
            mg_shape_str(&o->shape, buf, sizeof buf));
  }
}

static void progress(void *ctx, int done, int total) {
  const int step = total >= 20 ? total / 10 : 1;
  if (done % step == 0 || done == total)
    fprintf(stderr, "precision: %s profile, %d of %d layers\n", (const char *)ctx, done, total);
}

static json_t *error_json(const prec_error *e) {
  return json_pack("{s:f,s:f}", "max_rel", isfinite(e->max_rel) ? e->max_rel : 1e308, "min_cosine", e->min_cos);
}

static void print_error(const char *what, const prec_error *e) {
  printf("%s: max rel error %.3g, min cosine %.7f\n", what, e->max_rel, e->min_cos);
}

int cmd_precision(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    help(stdout);
    return EXIT_OK;
  }
  precision_job j = {.samples = 8, .calib_samples = 16, .top = 10, .scale = 1.0};
  if (parse_args(argc, argv, &j)) {
    help(stderr);
    return EXIT_BAD_INPUT;
  }
  const char *ins[3] = {j.model, j.inputs_dir, j.calib_dir};
  cli_output_rule(j.force, ins, 3);
  mg_diags d;
  mg_diags_init(&d);
  mg_model *m = NULL;
  prec_set s = {0};
  prec_layer *layers = NULL;
  unsigned char *keep = NULL;
  json_t *doc = NULL;
  int n_layers = 0, rc = EXIT_OK;
  if ((j.json && mg_out_check(j.json, 1, &d)) || onnx_import(j.model, &d, &m) ||
      (fix_symbolic_inputs(m, &j), mg_prepare(m, j.ov, j.n_ov, &d))) {
    rc = EXIT_BAD_INPUT;
    goto done;
  }
  if (j.inputs_dir ? read_inputs_dir(m, j.inputs_dir, &s, &d)
                   : prec_set_random(m, j.samples, j.scale, j.seed, &s, &d)) {
    rc = EXIT_BAD_INPUT;
    goto done;
  }
  s.weights_only = j.weights_only;
  if (j.p == PREC_INT8 && !j.weights_only) {
    prec_set calib = {0};
    /* the calibration inputs are not the measured ones: their seed is apart */
    const int bad = j.calib_dir ? read_inputs_dir(m, j.calib_dir, &calib, &d)
                                : prec_set_random(m, j.calib_samples, j.scale, j.seed ^ 0xca1b5eedull, &calib, &d);
    const int failed = bad || prec_calibrate(m, &calib, &s, &d);
    prec_set_free(&calib);
    if (failed) {
      rc = EXIT_BAD_INPUT;
      goto done;
    }
  }
  if (prec_set_reference(m, &s, &d) ||
      prec_profile(m, j.p, &s, progress, (void *)prec_name(j.p), &layers, &n_layers, &d)) {
    rc = EXIT_BAD_INPUT;
    goto done;
  }
  keep = mg_calloc((size_t)m->graph->n_nodes + 1, 1);
  prec_error all_low, mixed;
  int n_kept = -1;
  if (!keep) {
    rc = EXIT_INTERNAL;
    goto done;
  }
  if (j.budget_text) {
    n_kept = prec_budget(m, j.p, &s, layers, n_layers, j.budget, keep, &all_low, &mixed, &d);
    if (n_kept == -1) {
      rc = EXIT_BAD_INPUT;
      goto done;
    }
  } else if (prec_measure_kept(m, j.p, &s, layers, n_layers, 0, &all_low, &d)) {
    rc = EXIT_BAD_INPUT;
    goto done;
  }
  prec_error top_kept = all_low;
  if (j.keep_top > 0 && prec_measure_kept(m, j.p, &s, layers, n_layers, j.keep_top, &top_kept, &d)) {
    rc = EXIT_BAD_INPUT;
    goto done;
  }
  printf("%s at %s, %d samples, %d layers\n", j.model, prec_name(j.p), s.n_samples, n_layers);
  print_error("every layer at the precision", &all_low);
  printf("profile (the model's error with only that layer at %s), worst first:\n", prec_name(j.p));
  for (int k = 0; k < n_layers && k < j.top; k++) {
    const mg_node *n = m->graph->nodes[layers[k].node];
    printf("  %3d  %-10.3g %.7f  %-18s %s\n", k + 1, layers[k].err.max_rel, layers[k].err.min_cos, n->op_type,
           n->name);
  }
  if (j.keep_top > 0) {
    char what[64];
    snprintf(what, sizeof what, "the top %d kept float32", j.keep_top);
    print_error(what, &top_kept);
  }
  if (n_kept >= 0) {
    printf("budget %s: %d layer%s kept float32:", j.budget_text, n_kept, n_kept == 1 ? "" : "s");
    for (int i = 0; i < m->graph->n_nodes; i++)
      if (keep[i]) printf(" %s", m->graph->nodes[i]->name);
    printf("\n");
    print_error("mixed assignment", &mixed);
  }
  if (j.json) {
    doc = json_pack("{s:s,s:s,s:i,s:b,s:o}", "model", j.model, "precision", prec_name(j.p), "samples", s.n_samples,
                    "weights_only", j.weights_only, "all_low", error_json(&all_low));
    json_t *arr = json_array();
    for (int k = 0; doc && arr && k < n_layers; k++) {
      const mg_node *n = m->graph->nodes[layers[k].node];
      json_t *e = error_json(&layers[k].err);
      json_object_set_new(e, "node", json_string(n->name));
      json_object_set_new(e, "op", json_string(n->op_type));
      json_array_append_new(arr, e);
    }
    json_object_set_new(doc, "layers", arr);
    if (j.keep_top > 0)
      json_object_set_new(doc, "keep_top", json_pack("{s:i,s:o}", "count", j.keep_top, "error", error_json(&top_kept)));
    if (j.budget_text) {
      json_t *kept = json_array();
      for (int i = 0; i < m->graph->n_nodes; i++)
        if (keep[i]) json_array_append_new(kept, json_string(m->graph->nodes[i]->name));
      json_object_set_new(doc, "budget",
                          json_pack("{s:f,s:b,s:o,s:o}", "tolerance", j.budget, "met", mixed.max_rel <= j.budget, "kept_fp32", kept,
                                    "error", error_json(&mixed)));
    }
    if (!doc || wt_write_json(j.json, doc, JSON_INDENT(2), &d)) rc = rc ? rc : EXIT_BAD_INPUT;
  }
done:
  cli_report(&d);
  json_decref(doc);
  mg_free(layers);
  mg_free(keep);
  prec_set_free(&s);
  mg_model_free(m);
  mg_diags_free(&d);
  return rc;
}
