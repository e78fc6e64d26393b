/* Autodiff: every VJP against central finite differences, in float64.
 *
 * The single-node models come from tests/fixtures/make_vjp_models.py (directory
 * in MIGC_VJP_FIXTURES, listed in manifest.txt with the range each model's float
 * inputs are drawn from). For each model, grad_run's gradient of
 * f = sum_o <y_o, cot_o> with respect to every float input is compared, element
 * by element (at most SAMPLES per input), with (f(x + h e) - f(x - h e)) / 2h
 * computed through the interpreter. A point is skipped as lying near a kink
 * (Relu at 0, Clip bounds, pool ties, Floor's steps...) when the differences at
 * h and h/4 disagree: there the function is not differentiable on that scale and
 * the finite difference is no reference. Skips are counted and bounded. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff.h"
#include "onnx_import.h"
#include "passes.h"

enum { SAMPLES = 24 };
static const double STEP = 1e-4, TOL = 1e-6;

static const char *fixtures(void) {
  const char *p = getenv("MIGC_VJP_FIXTURES");
  return p ? p : "fixtures/vjp";
}

static uint64_t rng_state;
static double uniform(double lo, double hi) {
  rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
  return lo + (hi - lo) * (double)(rng_state >> 11) / 9007199254740992.0;
}

static mg_model *load(const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.onnx", fixtures(), name);
  mg_diags d;
  mg_diags_init(&d);
  mg_model *m = NULL;
  if (onnx_import(path, &d, &m)) {
    for (size_t i = 0; i < d.count; i++) fprintf(stderr, "%s: %s\n", name, d.items[i].message);
    mg_diags_free(&d);
    return NULL;
  }
  m->keep_param_paths = 1;
  int rc = mg_prepare(m, NULL, 0, &d);
  for (size_t i = 0; rc && i < d.count; i++) fprintf(stderr, "%s: %s\n", name, d.items[i].message);
  mg_diags_free(&d);
  if (rc) {
    mg_model_free(m);
    return NULL;
  }
  return m;
}

/* A float64 array named after v, with v's (static) shape. */
static void make_array(mg_array *a, const mg_value *v) {
  memset(a, 0, sizeof *a);
  a->dtype = MG_F64;
  a->rank = v->shape.rank;
  int64_t k = 1;
  for (int i = 0; i < a->rank; i++) k *= (a->dims[i] = v->shape.d[i].v);
  a->nbytes = sizeof(double) * (size_t)k;
  a->data = calloc((size_t)k + 1, sizeof(double));
  a->name = strdup(v->name);
}

static int64_t numel(const mg_array *a) { return (int64_t)(a->nbytes / sizeof(double)); }

/* f = sum_o <y_o, cot_o> through the interpreter. */
static double objective(mg_model *m, mg_array *in, int n_in, mg_array *cot, int n_cot) {
  mg_diags d;
  mg_diags_init(&d);
  mg_array *outs = NULL;
  int rc = interp_run(m, in, n_in, NULL, &outs, &d);
  mg_diags_free(&d);
  assert_int_equal(rc, 0);
  double f = 0;
  for (int o = 0; o < m->graph->n_outputs; o++)
    for (int c = 0; c < n_cot; c++)
      if (!strcmp(cot[c].name, outs[o].name))
        for (int64_t e = 0; e < numel(&cot[c]); e++) f += ((double *)outs[o].data)[e] * ((double *)cot[c].data)[e];
  mg_arrays_free(outs, m->graph->n_outputs);
  return f;
}

/* Checks one model; returns the number of mismatches (printed). */
static int check_model(const char *name, double lo, double hi, int *checked, int *skipped) {
  mg_model *m = load(name);
  if (!m) {
    fprintf(stderr, "FAIL %s: does not load\n", name);
    return 1;
  }
  mg_graph *g = m->graph;
  rng_state = 0x9E3779B97F4A7C15ull ^ (uint64_t)strlen(name) * 0x100000001B3ull ^ (uint64_t)name[0];
  mg_array *in = calloc((size_t)g->n_inputs + 1, sizeof *in), *cot = calloc((size_t)g->n_outputs + 1, sizeof *cot);
  for (int i = 0; i < g->n_inputs; i++) {
    make_array(&in[i], g->inputs[i]);
    for (int64_t e = 0; e < numel(&in[i]); e++) ((double *)in[i].data)[e] = uniform(lo, hi);
  }
  for (int o = 0; o < g->n_outputs; o++) {
    make_array(&cot[o], g->outputs[o]);
    for (int64_t e = 0; e < numel(&cot[o]); e++) ((double *)cot[o].data)[e] = uniform(-1, 1);
  }
  mg_diags d;
  mg_diags_init(&d);
  grad_result r;
  int bad = 0;
  if (grad_run(m, in, g->n_inputs, cot, g->n_outputs, &r, &d)) {
    for (size_t i = 0; i < d.count; i++) fprintf(stderr, "FAIL %s: %s\n", name, d.items[i].message);
    bad = 1;
  }
  mg_diags_free(&d);
  for (int i = 0; i < g->n_inputs && !bad; i++) {
    assert_int_equal(numel(&r.inputs[i]), numel(&in[i]));
    int64_t k = numel(&in[i]), stride = k > SAMPLES ? k / SAMPLES : 1;
    double *x = in[i].data, *gr = r.inputs[i].data;
    for (int64_t e = 0; e < k; e += stride) {
      double x0 = x[e], fd[2];
      for (int s = 0; s < 2; s++) {
        double h = s ? STEP / 4 : STEP;
        x[e] = x0 + h;
        double fp = objective(m, in, g->n_inputs, cot, g->n_outputs);
        x[e] = x0 - h;
        double fm = objective(m, in, g->n_inputs, cot, g->n_outputs);
        x[e] = x0;
        fd[s] = (fp - fm) / (2 * h);
      }
      if (fabs(fd[0] - fd[1]) > 1e-4 * (1 + fabs(fd[1]))) { /* a kink within h of x */
        (*skipped)++;
        continue;
      }
      (*checked)++;
      if (fabs(gr[e] - fd[1]) > TOL * (1 + fabs(fd[1])) || !isfinite(gr[e])) {
        if (bad < 3)
          fprintf(stderr, "FAIL %s: d/d%s[%lld] vjp %.10g, finite difference %.10g\n", name, in[i].name,
                  (long long)e, gr[e], fd[1]);
        bad++;
      }
    }
  }
  if (!bad) grad_result_free(&r);
  mg_arrays_free(in, g->n_inputs);
  mg_arrays_free(cot, g->n_outputs);
  mg_model_free(m);
  return bad;
}

/* Every model of the manifest: VJP = finite differences wherever smooth. */
static void test_vjp_matches_finite_differences(void **state) {
  (void)state;
  char path[1024], name[256];
  snprintf(path, sizeof path, "%s/manifest.txt", fixtures());
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  double lo, hi;
  int models = 0, failed = 0, total_checked = 0, total_skipped = 0;
  while (fscanf(f, "%255s %lf %lf", name, &lo, &hi) == 3) {
    int checked = 0, skipped = 0;
    int bad = check_model(name, lo, hi, &checked, &skipped);
    models++;
    failed += bad != 0;
    total_checked += checked, total_skipped += skipped;
    /* kinks are rare at random points, except for the piecewise-constant ops */
    int stepwise = !strcmp(name, "Floor") || !strcmp(name, "Ceil") || !strcmp(name, "Round") || !strcmp(name, "Sign");
    if (!bad && !stepwise && skipped > checked / 4) {
      fprintf(stderr, "FAIL %s: %d points skipped as kinks, %d checked\n", name, skipped, checked);
      failed++;
    }
  }
  fclose(f);
  printf("%d models, %d points checked, %d skipped near kinks, %d models failed\n", models, total_checked,
         total_skipped, failed);
  assert_true(models >= 100);
  assert_int_equal(failed, 0);
}

/* Every op with a VJP (a row of vjp_families.def) has a finite-difference model
 * in the manifest: one named after the op, or the op then "_" and a variant. */
static const char *const VJP_OPS[] = {
#define OP(name) #name,
#define FAMILY(fn)
#include "vjp_families.def"
#undef OP
#undef FAMILY
};

static void test_every_vjp_has_a_model(void **state) {
  (void)state;
  char path[1024], name[256];
  snprintf(path, sizeof path, "%s/manifest.txt", fixtures());
  int missing = 0;
  for (size_t k = 0; k < sizeof VJP_OPS / sizeof VJP_OPS[0]; k++) {
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    double lo, hi;
    int found = 0;
    size_t len = strlen(VJP_OPS[k]);
    while (!found && fscanf(f, "%255s %lf %lf", name, &lo, &hi) == 3)
      found = !strncmp(name, VJP_OPS[k], len) && (name[len] == 0 || name[len] == '_');
    fclose(f);
    if (!found) fprintf(stderr, "FAIL %s has a VJP but no finite-difference model\n", VJP_OPS[k]), missing++;
  }
  assert_true(sizeof VJP_OPS / sizeof VJP_OPS[0] >= 90);
  assert_int_equal(missing, 0);
}

/* An op without a VJP on the path is an error naming the node and op. */
static void test_missing_vjp_is_named(void **state) {
  (void)state;
  mg_model *m = load("no_vjp");
  assert_non_null(m);
  mg_array in, cot;
  make_array(&in, m->graph->inputs[0]);
  make_array(&cot, m->graph->outputs[0]);
  mg_diags d;
  mg_diags_init(&d);
  grad_result r;
  assert_int_equal(grad_run(m, &in, 1, &cot, 1, &r, &d), -1);
  assert_true(d.count >= 1);
  assert_string_equal(d.items[0].op, "CumSum");
  assert_non_null(strstr(d.items[0].message, "CumSum"));
  assert_null(r.inputs);
  assert_false(grad_supports(MG_OP_CumSum));
  assert_true(grad_supports(MG_OP_Conv));
  mg_diags_free(&d);
  mg_array_free(&in), mg_array_free(&cot);
  mg_model_free(m);
}

/* Integer outputs (Shape, ArgMax) stop the flow silently: only Relu's path counts. */
static void test_integer_paths_stop_silently(void **state) {
  (void)state;
  mg_model *m = load("int_paths");
  assert_non_null(m);
  mg_array in, cot[2];
  make_array(&in, m->graph->inputs[0]);
  double xv[6] = {1, -1, 2, -2, 3, -3}, ones[6] = {1, 1, 1, 1, 1, 1};
  memcpy(in.data, xv, sizeof xv);
  make_array(&cot[0], m->graph->outputs[2]); /* y */
  memcpy(cot[0].data, ones, sizeof ones);
  make_array(&cot[1], m->graph->outputs[0]); /* n: float, but computed from a shape */
  mg_diags d;
  mg_diags_init(&d);
  grad_result r;
  assert_int_equal(grad_run(m, &in, 1, cot, 2, &r, &d), 0);
  assert_int_equal(d.errors, 0);
  assert_int_equal(r.n_inputs, 1);
  for (int i = 0; i < 6; i++) assert_true(((double *)r.inputs[0].data)[i] == (xv[i] > 0 ? 1.0 : 0.0));
  grad_result_free(&r);
  mg_diags_free(&d);
  mg_array_free(&in), mg_array_free(&cot[0]), mg_array_free(&cot[1]);
  mg_model_free(m);
}

/* The Gradient op shares the table: d/da sum(tanh(a b)) = b (1 - tanh^2(a b)). */
static void test_gradient_op_uses_the_table(void **state) {
  (void)state;
  mg_model *m = load("gradient_op");
  assert_non_null(m);
  mg_array in[2];
  double a[3] = {0.5, -1, 2}, b[3] = {1.5, 0.25, -0.75};
  make_array(&in[0], m->graph->inputs[0]);
  make_array(&in[1], m->graph->inputs[1]);
  memcpy(in[0].data, a, sizeof a), memcpy(in[1].data, b, sizeof b);
  mg_diags d;
  mg_diags_init(&d);
  mg_array *outs = NULL;
  assert_int_equal(interp_run(m, in, 2, NULL, &outs, &d), 0);
  for (int i = 0; i < 3; i++) {
    double t = tanh(a[i] * b[i]);
    assert_true(fabs(((double *)outs[0].data)[i] - b[i] * (1 - t * t)) < 1e-12);
    assert_true(fabs(((double *)outs[1].data)[i] - a[i] * (1 - t * t)) < 1e-12);
  }
  mg_arrays_free(outs, 2);
  mg_diags_free(&d);
  mg_array_free(&in[0]), mg_array_free(&in[1]);
  mg_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_vjp_matches_finite_differences),
      cmocka_unit_test(test_every_vjp_has_a_model),
      cmocka_unit_test(test_missing_vjp_is_named),
      cmocka_unit_test(test_integer_paths_stop_silently),
      cmocka_unit_test(test_gradient_op_uses_the_table),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
