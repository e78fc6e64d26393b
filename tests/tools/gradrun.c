/* gradrun MODEL.onnx INPUTS.npz COTANGENTS.npz OUT.npz
 *
 * Test helper for the autodiff end-to-end checks: imports and prepares the model
 * keeping the parameters' paths (keep_param_paths), runs grad_run with the inputs
 * and cotangents (npz members named after the graph inputs and outputs), and
 * writes OUT.npz with members inputs/<name>, params/<initializer name> and
 * outputs/<name>. Prints "grad_run_s X" (forward + backward wall time). Exit 0 ok,
 * 2 on bad input or a gradient that cannot be computed (diagnostics on stderr). */
#include "autodiff.h"
#include "onnx_import.h"
#include "passes.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int fail(mg_diags *d) {
  for (size_t i = 0; i < d->count; i++) {
    char buf[1024];
    mg_diag_format(&d->items[i], buf, sizeof buf);
    fprintf(stderr, "%s\n", buf);
  }
  return 2;
}

/* Moves r's arrays into one list, renaming each to prefix/name. */
static int collect(mg_array *all, int *n, mg_array *src, int cnt, const char *prefix) {
  for (int i = 0; i < cnt; i++) {
    if (!src[i].data) continue;
    size_t len = strlen(prefix) + strlen(src[i].name) + 2;
    char *name = malloc(len);
    if (!name) return -1;
    snprintf(name, len, "%s/%s", prefix, src[i].name);
    all[*n] = src[i];
    all[*n].name = name;
    (*n)++;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: gradrun MODEL.onnx INPUTS.npz COTANGENTS.npz OUT.npz\n");
    return 2;
  }
  mg_diags d;
  mg_diags_init(&d);
  mg_model *m = NULL;
  if (onnx_import(argv[1], &d, &m)) return fail(&d);
  m->keep_param_paths = 1;
  if (mg_prepare(m, NULL, 0, &d)) return fail(&d);
  mg_array *in = NULL, *cot = NULL;
  int n_in = 0, n_cot = 0;
  if (npz_read_file(argv[2], &in, &n_in, &d) || npz_read_file(argv[3], &cot, &n_cot, &d)) return fail(&d);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  grad_result r;
  if (grad_run(m, in, n_in, cot, n_cot, &r, &d)) return fail(&d);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf("grad_run_s %.3f\n", (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
  mg_array *all = calloc((size_t)(r.n_inputs + r.n_params + r.n_outputs + 1), sizeof *all);
  int n = 0;
  if (!all || collect(all, &n, r.inputs, r.n_inputs, "inputs") || collect(all, &n, r.params, r.n_params, "params") ||
      collect(all, &n, r.outputs, r.n_outputs, "outputs")) {
    fprintf(stderr, "out of memory\n");
    return 2;
  }
  int rc = npz_write_file(argv[4], all, n, 0, &d) ? fail(&d) : 0;
  for (int i = 0; i < n; i++) free(all[i].name), all[i].name = NULL;
  free(all);
  grad_result_free(&r); /* the data moved into all is freed here, names above */
  mg_arrays_free(in, n_in);
  mg_arrays_free(cot, n_cot);
  mg_model_free(m);
  mg_diags_free(&d);
  return rc;
}
