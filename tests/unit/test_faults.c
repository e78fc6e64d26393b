/* Allocation-failure sweeps (issue 16, acceptance 4) over the stages the import
 * and codegen sweeps do not reach: the interpreter, autodiff, verify (metrics,
 * policies, JUnit), binding, renaming, mapping (rules, plans, decompositions) and
 * coverage. Each sweep fails allocation n (and every later one) for n = 1, 2, ...
 * until the stage succeeds: every failure must be an error return with an error
 * diagnostic (coverage: cm->error), and under ASan it must neither leak nor
 * crash. Models are the repository's samples (MIGC_SOURCE_DIR), the IR fixtures
 * (MIGC_IR_FIXTURES), some 40 single-op conformance tests (MIGC_CONFORMANCE) and
 * every single-op VJP model (MIGC_VJP_FIXTURES). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arena.h"
#include "autodiff.h"
#include "bind.h"
#include "codegen.h"
#include "coverage.h"
#include "interp.h"
#include "junit.h"
#include "mapping.h"
#include "npy.h"
#include "onnx_import.h"
#include "parity.h"
#include "passes.h"
#include "policy.h"
#include "rename.h"
#include "weights.h"

static const char *src_dir, *fixtures, *conformance, *vjp_fixtures;

/* dir/name in a buffer of its own (k picks one of four). */
static const char *at(int k, const char *dir, const char *name) {
  static char buf[4][8192 + 64];
  snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
  return buf[k];
}

/* One try of a stage with allocation n failing (sticky): it sets up what it needs
 * without faults, calls mg_fault_fail_at(n, 1) right before the stage and
 * mg_fault_fail_at(0, 0) right after, frees everything, and returns the stage's
 * status. Errors go to d. */
typedef int (*stage_fn)(void *ctx, long n, mg_diags *d);

/* Runs f for n = 1, 2, ... until it succeeds; each failure must have recorded an
 * error. Returns how many injected failures there were (at least one: a stage
 * that allocates nothing is not swept). */
static long sweep(const char *what, stage_fn f, void *ctx) {
  long failures = 0;
  mg_diags d0; /* without a fault it must succeed, or the sweep would never end */
  mg_diags_init(&d0);
  if (f(ctx, 0, &d0)) fail_msg("%s fails without an injected fault (%zu errors)", what, d0.errors);
  mg_diags_free(&d0);
  for (long n = 1;; n++) {
    mg_diags d;
    mg_diags_init(&d);
    int rc = f(ctx, n, &d);
    if (rc == 0) {
      assert_int_equal(d.errors, 0);
      mg_diags_free(&d);
      break;
    }
    if (!d.errors) fail_msg("%s: allocation %ld failed without an error diagnostic", what, n);
    failures++;
    mg_diags_free(&d);
    assert_true(n < 200000);
  }
  print_message("%s: %ld injected allocation failures, each reported and clean\n", what, failures);
  assert_true(failures > 0);
  return failures;
}

/* The model at path, imported and prepared with input `input` fixed to dims
 * (NULL: as declared), keep_param_paths as asked; fails the test otherwise. */
static mg_model *prepared(const char *path, const char *input, const char *dims, int keep_param_paths) {
  mg_diags d;
  mg_diags_init(&d);
  mg_model *m = NULL;
  mg_shape_override ov = {input, {0}};
  assert_int_equal(onnx_import(path, &d, &m), 0);
  m->keep_param_paths = keep_param_paths;
  if (input) assert_int_equal(mg_shape_parse(dims, &ov.shape), 0);
  assert_int_equal(mg_prepare(m, &ov, input ? 1 : 0, &d), 0);
  mg_diags_free(&d);
  return m;
}

/* ---- the interpreter and autodiff ---- */

/* A prepared model and the inputs of one run (not owned). */
typedef struct {
  mg_model *m;
  mg_array in[16];
  int n_in;
} run_ctx;

static int interp_stage(void *p, long n, mg_diags *d) {
  run_ctx *c = p;
  mg_array *outs = NULL;
  interp_options o = {0};
  mg_fault_fail_at(n, 1);
  int rc = interp_run(c->m, c->in, c->n_in, &o, &outs, d);
  mg_fault_fail_at(0, 0);
  if (!rc) mg_arrays_free(outs, c->m->graph->n_outputs);
  else assert_null(outs);
  return rc;
}

static int grad_stage(void *p, long n, mg_diags *d) {
  run_ctx *c = p;
  grad_result r;
  memset(&r, 0, sizeof r);
  mg_fault_fail_at(n, 1);
  int rc = grad_run(c->m, c->in, c->n_in, NULL, 0, &r, d);
  mg_fault_fail_at(0, 0);
  if (!rc) grad_result_free(&r);
  return rc;
}

static void test_interpreter(void **state) {
  (void)state;
  mg_diags d;
  mg_diags_init(&d);
  run_ctx c = {prepared(at(0, src_dir, "samples/tiny_cnn.onnx"), "input", "1x3x32x32", 0), {{0}}, 1};
  assert_int_equal(npy_read_file(at(0, src_dir, "samples/tiny_cnn_input.npy"), &c.in[0], &d), 0);
  c.in[0].name = strdup("input");
  sweep("interp_run tiny_cnn", interp_stage, &c);
  mg_model_free(c.m);
  /* a Loop: frames of subgraphs, values read from the enclosing scope */
  static float x[2] = {1.5f, -2.0f};
  run_ctx l = {prepared(at(0, fixtures, "loop.onnx"), NULL, NULL, 0),
               {{.dtype = MG_F32, .rank = 1, .dims = {2}, .data = x, .nbytes = sizeof x, .name = "x"}}, 1};
  sweep("interp_run loop", interp_stage, &l);
  mg_model_free(l.m);
  /* autodiff over the export that keeps every parameter by name */
  c.m = prepared(at(0, src_dir, "samples/tiny_cnn_preserve.onnx"), "input", "1x3x32x32", 1);
  sweep("grad_run tiny_cnn (preserve)", grad_stage, &c);
  mg_model_free(c.m);
  mg_array_free(&c.in[0]);
  mg_diags_free(&d);
}

/* Conformance tests of node/: one per op family and control-flow form, each run
 * by the interpreter on its test_data_set_0 inputs. */
static const char *const node_tests[] = {
    /* (inputs that are sequences are SequenceProtos, which the TensorProto reader
     * does not take: the loop's sequence ops stand for them) */
    "test_if", "test_loop11", "test_scan9_sum", "test_resize_upsample_scales_linear",
    "test_nonzero_example", "test_top_k", "test_lstm_defaults", "test_gru_defaults", "test_einsum_batch_matmul",
    "test_gather_elements_0", "test_gathernd_example_int32", "test_scatter_elements_with_axis",
    "test_roialign_aligned_false", "test_conv_with_strides_padding", "test_convtranspose", "test_maxpool_2d_default",
    "test_averagepool_2d_default", "test_softmax_axis_0", "test_reduce_mean_default_axes_keepdims_example",
    "test_cumsum_1d", "test_unique_sorted_with_axis", "test_nonmaxsuppression_center_point_box_format",
    "test_where_example", "test_range_float_type_positive_delta", "test_batchnorm_example",
    "test_layer_normalization_2d_axis0", "test_instancenorm_example", "test_concat_1d_axis_0",
    "test_transpose_default", "test_slice", "test_expand_dim_changed", "test_tile", "test_argmax_default_axis_example",
    "test_cast_FLOAT_to_FLOAT16", "test_dequantizelinear", "test_qlinearconv", "test_det_2d", "test_dft",
};

static void test_interpreter_ops(void **state) {
  (void)state;
  long total = 0;
  for (size_t t = 0; t < sizeof node_tests / sizeof node_tests[0]; t++) {
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/node/%s", conformance, node_tests[t]);
    run_ctx c = {prepared(at(0, dir, "model.onnx"), NULL, NULL, 0), {{0}}, 0};
    mg_diags d;
    mg_diags_init(&d);
    /* input_K.pb is graph input K; the values live in the model's arena */
    for (int k = 0; k < c.m->graph->n_inputs && k < 16; k++) {
      snprintf(path, sizeof path, "%s/test_data_set_0/input_%d.pb", dir, k);
      mg_value *v;
      if (access(path, R_OK)) break; /* an optional input the test leaves out */
      assert_int_equal(onnx_read_tensor(path, c.m, &v, &d), 0);
      mg_array *a = &c.in[c.n_in++];
      a->dtype = v->dtype, a->rank = v->shape.rank, a->data = (void *)v->data, a->nbytes = v->nbytes;
      for (int r = 0; r < v->shape.rank; r++) a->dims[r] = v->shape.d[r].v;
      a->name = (char *)c.m->graph->inputs[k]->name;
    }
    total += sweep(node_tests[t], interp_stage, &c);
    mg_model_free(c.m);
    mg_diags_free(&d);
  }
  print_message("interpreter over %zu op tests: %ld injected failures\n", sizeof node_tests / sizeof node_tests[0],
                total);
}

/* grad_run over every single-op VJP model of tests/fixtures/make_vjp_models.py
 * (MIGC_VJP_FIXTURES, manifest.txt: name and the range of its float inputs), so
 * that each VJP's own allocations fail once. */
typedef struct {
  mg_model *m;
  mg_array in[8], cot[8];
} vjp_ctx;

static int vjp_stage(void *p, long n, mg_diags *d) {
  vjp_ctx *c = p;
  grad_result r;
  memset(&r, 0, sizeof r);
  mg_fault_fail_at(n, 1);
  int rc = grad_run(c->m, c->in, c->m->graph->n_inputs, c->cot, c->m->graph->n_outputs, &r, d);
  mg_fault_fail_at(0, 0);
  if (!rc) grad_result_free(&r);
  return rc;
}

/* a := float64 values in [lo, hi] (a fixed pattern), named and shaped after v. */
static void f64_array(mg_array *a, const mg_value *v, double lo, double hi) {
  memset(a, 0, sizeof *a);
  a->dtype = MG_F64, a->rank = v->shape.rank, a->name = (char *)v->name;
  size_t k = 1;
  for (int i = 0; i < a->rank; i++) k *= (size_t)(a->dims[i] = v->shape.d[i].v);
  a->nbytes = k * sizeof(double);
  a->data = malloc(a->nbytes + 1);
  for (size_t e = 0; e < k; e++) ((double *)a->data)[e] = lo + (hi - lo) * (double)((e * 7919 + 13) % 101) / 100.0;
}

static void test_autodiff_ops(void **state) {
  (void)state;
  FILE *f = fopen(at(0, vjp_fixtures, "manifest.txt"), "r");
  assert_non_null(f);
  char name[256];
  double lo, hi;
  long total = 0;
  int models = 0;
  while (fscanf(f, "%255s %lf %lf", name, &lo, &hi) == 3) {
    char file[300];
    snprintf(file, sizeof file, "%s.onnx", name);
    vjp_ctx c = {prepared(at(0, vjp_fixtures, file), NULL, NULL, 1), {{0}}, {{0}}};
    const mg_graph *g = c.m->graph;
    assert_true(g->n_inputs <= 8 && g->n_outputs <= 8);
    for (int i = 0; i < g->n_inputs; i++) f64_array(&c.in[i], g->inputs[i], lo, hi);
    for (int o = 0; o < g->n_outputs; o++) f64_array(&c.cot[o], g->outputs[o], -1, 1);
    total += sweep(name, vjp_stage, &c);
    for (int i = 0; i < g->n_inputs; i++) free(c.in[i].data);
    for (int o = 0; o < g->n_outputs; o++) free(c.cot[o].data);
    mg_model_free(c.m);
    models++;
  }
  fclose(f);
  print_message("grad_run over %d VJP models: %ld injected failures\n", models, total);
  assert_true(models > 100);
}

/* ---- verify: metrics, policies, JUnit ---- */

typedef struct {
  mg_array got, ref;
  const char *policy, *junit;
} verify_ctx;

static int verify_stage(void *p, long n, mg_diags *d) {
  verify_ctx *c = p;
  parity_tol tol = parity_default_forward();
  parity_metrics m;
  parity_policy *pol = NULL;
  junit_case cases[2] = {{"output y", "verify.outputs", JUNIT_PASS, NULL, NULL, NULL, 0.1},
                         {"output z", "verify.outputs", JUNIT_FAILURE, "cosine 0.5", "parity", "details", 0.2}};
  mg_fault_fail_at(n, 1);
  int rc = parity_compare(&c->got, &c->ref, &tol, &m, "y", d);
  if (!rc) rc = policy_load(c->policy, &pol, d);
  if (!rc) rc = junit_write(c->junit, "verify", cases, 2, 0.3, d);
  mg_fault_fail_at(0, 0);
  policy_free(pol);
  return rc;
}

static void test_verify(void **state) {
  (void)state;
  verify_ctx c = {{0}, {0}, NULL, NULL};
  enum { N = 5000 };
  for (int k = 0; k < 2; k++) {
    mg_array *a = k ? &c.ref : &c.got;
    a->dtype = MG_F32, a->rank = 1, a->dims[0] = N, a->nbytes = N * sizeof(float);
    a->data = malloc(a->nbytes);
    for (int i = 0; i < N; i++) ((float *)a->data)[i] = (float)i * (k ? 1.0f : 1.0001f) - 7.0f;
  }
  char dir[] = "/tmp/migc-faults-XXXXXX";
  assert_non_null(mkdtemp(dir));
  c.policy = strdup(at(0, dir, "policy.xml"));
  c.junit = strdup(at(1, dir, "report.xml"));
  FILE *f = fopen(c.policy, "w");
  fputs("<parity-policy>\n  <forward rtol=\"1e-3\"/>\n  <grad cosine=\"0.999\"/>\n  <op type=\"Softmax\" atol=\"1e-6\"/>\n"
        "  <model match=\"resnet*\">\n    <output name=\"logits\" cosine=\"0.9\"/>\n"
        "    <param match=\"fc.*\" rel-norm=\"5e-3\"/>\n  </model>\n</parity-policy>\n", f);
  fclose(f);
  sweep("verify: parity_compare, policy_load, junit_write", verify_stage, &c);
  unlink(c.policy), unlink(c.junit), rmdir(dir);
  free((char *)c.policy), free((char *)c.junit);
  free(c.got.data), free(c.ref.data);
}

/* ---- binding and renaming ---- */

typedef struct {
  const char *onnx, *pth, *naming;
} weights_ctx;

/* wt_bind and wt_bind_apply on a fresh model: the default export folds its
 * BatchNorms, so binding goes through the folded-BatchNorm search. */
static int bind_stage(void *p, long n, mg_diags *d) {
  weights_ctx *c = p;
  mg_model *m = prepared(c->onnx, "input", "1x3x32x32", 0);
  wt_source *s = NULL;
  assert_int_equal(weights_open(c->pth, NULL, &s, d), 0);
  wt_binding *b = NULL;
  int nb = 0;
  mg_fault_fail_at(n, 1);
  int rc = wt_bind(s, m, &b, &nb, d);
  if (!rc) rc = wt_bind_apply(s, m, b, nb, d);
  mg_fault_fail_at(0, 0);
  mg_free(b);
  wt_close(s);
  mg_model_free(m);
  return rc;
}

/* The naming rules loaded and the MindSpore names planned for the .pth. */
static int rename_stage(void *p, long n, mg_diags *d) {
  weights_ctx *c = p;
  wt_source *s = NULL;
  assert_int_equal(weights_open(c->pth, NULL, &s, d), 0);
  wt_plan_entry *plan = NULL;
  int np = 0;
  mg_fault_fail_at(n, 1);
  wt_rules *r = wt_rules_new();
  int rc = r ? wt_rules_load(r, c->naming, d) : -1;
  if (!r) mg_error(d, OOM, NULL, NULL, "out of memory"); /* wt_rules_new says nothing itself */
  if (!rc) rc = wt_plan(s, r, NULL, 0, &plan, &np, d);
  mg_fault_fail_at(0, 0);
  if (!rc) wt_plan_free(plan, np);
  wt_rules_free(r);
  wt_close(s);
  return rc;
}

static void test_binding_and_renaming(void **state) {
  (void)state;
  weights_ctx c = {strdup(at(0, src_dir, "samples/tiny_cnn.onnx")), strdup(at(1, src_dir, "samples/tiny_cnn.pth")),
                   strdup(at(2, src_dir, "rules/torch_mindspore.xml"))};
  sweep("wt_bind + wt_bind_apply tiny_cnn (folded BatchNorms)", bind_stage, &c);
  sweep("wt_rules_load + wt_plan tiny_cnn.pth", rename_stage, &c);
  free((char *)c.onnx), free((char *)c.pth), free((char *)c.naming);
}

/* ---- mapping and coverage ---- */

typedef struct {
  const char *onnx, *rules[MAP_TARGET_COUNT];
  mg_model *m;
} map_ctx;

/* Both rule sets loaded, every node's plan for each, and the decompositions
 * applied to a copy of the model. */
static int mapping_stage(void *p, long n, mg_diags *d) {
  map_ctx *c = p;
  mg_model *copy = mg_model_clone(c->m);
  assert_non_null(copy);
  rule_set *rs[MAP_TARGET_COUNT] = {NULL};
  mg_arena arena;
  mg_arena_init(&arena, 4096);
  mg_fault_fail_at(n, 1);
  int rc = 0;
  for (int t = MAP_TARGET_ASCEND; t < MAP_TARGET_COUNT && !rc; t++) {
    rs[t] = rules_new(map_target_name(t));
    if (!rs[t]) mg_error(d, OOM, NULL, NULL, "out of memory"), rc = -1;
    else rc = rules_load(rs[t], c->rules[t], d);
  }
  for (int t = MAP_TARGET_ASCEND; t < MAP_TARGET_COUNT && !rc; t++)
    for (int i = 0; i < c->m->graph->n_nodes && !rc; i++)
      if (!map_node_plan(c->m->graph->nodes[i], rs[t], &arena)) mg_error(d, OOM, NULL, NULL, "out of memory"), rc = -1;
  if (!rc && map_lower(copy, rs[MAP_TARGET_ASCEND], d) < 0) rc = -1;
  mg_fault_fail_at(0, 0);
  mg_arena_destroy(&arena);
  for (int t = 0; t < MAP_TARGET_COUNT; t++) rules_free(rs[t]);
  mg_model_free(copy);
  return rc;
}

/* The analysis of `migc coverage`: import, preparation, both rules targets'
 * statuses, the C emitter's check for the CPU column, the summary. (The MindSpore
 * and Ascend emitters' checks live in cli/.) */
static int coverage_stage(void *p, long n, mg_diags *d) {
  map_ctx *c = p;
  rule_set *rs[MAP_TARGET_COUNT] = {NULL};
  for (int t = MAP_TARGET_ASCEND; t < MAP_TARGET_COUNT; t++) {
    rs[t] = rules_new(map_target_name(t));
    assert_int_equal(rules_load(rs[t], c->rules[t], d), 0);
  }
  cov_model cm;
  memset(&cm, 0, sizeof cm);
  mg_shape_override ov = {"input", {0}};
  assert_int_equal(mg_shape_parse("1x3x32x32", &ov.shape), 0);
  mg_fault_fail_at(n, 1);
  int rc = coverage_analyze(c->onnx, &ov, 1, rs, cg_check_model, NULL, NULL, &cm, d);
  mg_fault_fail_at(0, 0);
  /* coverage's contract: a failure sets cm.error (the first diagnostic) */
  if (rc && !cm.error) fail_msg("coverage_analyze failed at allocation %ld with no cm.error", n);
  if (rc && !d->errors) mg_error(d, OOM, NULL, NULL, "coverage: %s", cm.error);
  coverage_free(&cm);
  for (int t = 0; t < MAP_TARGET_COUNT; t++) rules_free(rs[t]);
  return rc;
}

static void test_mapping_and_coverage(void **state) {
  (void)state;
  map_ctx c = {strdup(at(0, src_dir, "samples/tiny_cnn.onnx")), {NULL}, NULL};
  c.rules[MAP_TARGET_ASCEND] = strdup(at(1, src_dir, "rules/aclnn.xml"));
  c.rules[MAP_TARGET_MINDSPORE] = strdup(at(2, src_dir, "rules/mindspore.xml"));
  c.m = prepared(c.onnx, "input", "1x3x32x32", 0);
  sweep("rules_load + map_node_plan + map_lower tiny_cnn", mapping_stage, &c);
  sweep("coverage_analyze tiny_cnn", coverage_stage, &c);
  mg_model_free(c.m);
  free((char *)c.onnx), free((char *)c.rules[MAP_TARGET_ASCEND]), free((char *)c.rules[MAP_TARGET_MINDSPORE]);
}

int main(void) {
  struct {
    const char **dir, *env;
  } where[] = {{&src_dir, "MIGC_SOURCE_DIR"}, {&fixtures, "MIGC_IR_FIXTURES"}, {&conformance, "MIGC_CONFORMANCE"},
               {&vjp_fixtures, "MIGC_VJP_FIXTURES"}};
  for (size_t i = 0; i < sizeof where / sizeof where[0]; i++)
    if (!(*where[i].dir = getenv(where[i].env))) {
      fprintf(stderr, "test_faults: set %s (ctest does)\n", where[i].env);
      return 1;
    }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_interpreter), cmocka_unit_test(test_interpreter_ops), cmocka_unit_test(test_autodiff_ops),
      cmocka_unit_test(test_verify),      cmocka_unit_test(test_binding_and_renaming),
      cmocka_unit_test(test_mapping_and_coverage),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
