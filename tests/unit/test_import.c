/* Import, normalisation, inference and passes on small models written by
 * tests/fixtures/make_ir_models.py (MIGC_IR_FIXTURES), plus allocation-failure
 * sweeps over conformance models (MIGC_CONFORMANCE). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_import.h"
#include "passes.h"

static const char *fixtures, *conformance;

static char *path_of(const char *dir, const char *name) {
  static char buf[4096];
  snprintf(buf, sizeof buf, "%s/%s", dir, name);
  return buf;
}

/* Imports and prepares a fixture; fails the test on any error. */
static mg_model *load(const char *name, mg_diags *d) {
  mg_diags_init(d);
  mg_model *m = NULL;
  int rc = onnx_import(path_of(fixtures, name), d, &m);
  if (rc == 0) rc = mg_prepare(m, NULL, 0, d);
  for (size_t i = 0; i < d->count; i++) {
    char line[1024];
    mg_diag_format(&d->items[i], line, sizeof line);
    print_message("%s\n", line);
  }
  assert_int_equal(rc, 0);
  return m;
}

static void expect_output_is_declared(const mg_model *m) {
  for (int i = 0; i < m->graph->n_outputs; i++) {
    const mg_value *v = m->graph->outputs[i];
    assert_true(v->has_decl);
    assert_int_equal(v->dtype, v->decl_dtype);
    assert_int_equal(v->shape.rank, v->decl_shape.rank);
    for (int k = 0; k < v->shape.rank; k++) {
      if (v->decl_shape.d[k].v >= 0) assert_int_equal(v->shape.d[k].v, v->decl_shape.d[k].v);
      else if (v->decl_shape.d[k].sym) assert_string_equal(v->shape.d[k].sym, v->decl_shape.d[k].sym);
    }
  }
}

static int count_op(const mg_graph *g, mg_op op) {
  int n = 0;
  for (int i = 0; i < g->n_nodes; i++) n += g->nodes[i]->op == op;
  return n;
}

static void test_legacy_slice(void **state) {
  (void)state;
  mg_diags d;
  mg_model *m = load("legacy_slice.onnx", &d);
  expect_output_is_declared(m);
  mg_node *n = m->graph->nodes[0];
  assert_int_equal(n->op, MG_OP_Slice);
  assert_true(n->n_in >= 4); /* starts, ends, axes became inputs */
  assert_null(mg_node_attr(n, "starts"));
  int64_t v[4];
  assert_int_equal(mg_value_ints(n->in[2], v, 4), 2);
  assert_int_equal(v[0], 3);
  assert_int_equal(v[1], -1);
  mg_model_free(m);
  mg_diags_free(&d);
}

static void test_shape_chain_folds(void **state) {
  (void)state;
  mg_diags d;
  mg_model *m = load("shape_chain_static.onnx", &d);
  expect_output_is_declared(m);
  assert_int_equal(m->graph->n_nodes, 1); /* only the Reshape is left */
  assert_int_equal(m->graph->nodes[0]->op, MG_OP_Reshape);
  const mg_value *target = m->graph->nodes[0]->in[1];
  assert_int_equal(target->kind, MG_V_CONST);
  int64_t v[2];
  assert_int_equal(mg_value_ints(target, v, 2), 2);
  assert_int_equal(v[0], 2);
  assert_int_equal(v[1], -1);
  mg_model_free(m);
  mg_diags_free(&d);
}

static void test_shape_chain_symbolic(void **state) {
  (void)state;
  mg_diags d;
  mg_model *m = load("shape_chain_sym.onnx", &d);
  expect_output_is_declared(m); /* batch x 60, with the symbol kept */
  mg_model_free(m);
  mg_diags_free(&d);
  /* --input-shape makes the same chain static and foldable */
  mg_diags_init(&d);
  mg_model *m2 = NULL;
  assert_int_equal(onnx_import(path_of(fixtures, "shape_chain_sym.onnx"), &d, &m2), 0);
  mg_shape_override ov = {"x", {4, {{8, NULL}, {3, NULL}, {4, NULL}, {5, NULL}}}};
  assert_int_equal(mg_prepare(m2, &ov, 1, &d), 0);
  assert_int_equal(m2->graph->n_nodes, 1);
  assert_int_equal(m2->graph->outputs[0]->shape.d[0].v, 8);
  assert_int_equal(m2->graph->outputs[0]->shape.d[1].v, 60);
  mg_model_free(m2);
  mg_diags_free(&d);
}

static void test_upsample_becomes_resize(void **state) {
  (void)state;
  mg_diags d;
  mg_model *m = load("upsample9.onnx", &d);
  expect_output_is_declared(m);
  mg_node *n = m->graph->nodes[0];
  assert_int_equal(n->op, MG_OP_Resize);
  assert_string_equal(mg_attr_str(n, "coordinate_transformation_mode", ""), "asymmetric");
  assert_string_equal(mg_attr_str(n, "nearest_mode", ""), "floor");
  assert_string_equal(mg_attr_str(n, "mode", ""), "nearest");
  assert_null(n->in[1]); /* roi omitted */
  mg_model_free(m);
  mg_diags_free(&d);
}

static void test_legacy_softmax(void **state) {
  (void)state;
  mg_diags d;
  mg_model *m = load("legacy_softmax.onnx", &d);
  expect_output_is_declared(m);
  assert_int_equal(count_op(m->graph, MG_OP_Flatten), 1);
  assert_int_equal(count_op(m->graph, MG_OP_Softmax), 1);
  for (int i = 0; i < m->graph->n_nodes; i++)
    if (m->graph->nodes[i]->op == MG_OP_Softmax)
      assert_int_equal(mg_attr_int(m->graph->nodes[i], "axis", 0), -1);
  mg_model_free(m);
  mg_diags_free(&d);
}

static void test_legacy_broadcast(void **state) {
  (void)state;
  mg_diags d;
  mg_model *m = load("legacy_broadcast.onnx", &d);
  expect_output_is_declared(m);
  for (int i = 0; i < m->graph->n_nodes; i++)
    if (m->graph->nodes[i]->op == MG_OP_Add) {
      const mg_value *b = m->graph->nodes[i]->in[1];
      assert_int_equal(b->shape.rank, 3); /* 3 -> 3x1x1 */
      assert_int_equal(b->shape.d[0].v, 3);
      assert_null(mg_node_attr(m->graph->nodes[i], "broadcast"));
    }
  mg_model_free(m);
  mg_diags_free(&d);
}

static void test_function_inlined(void **state) {
  (void)state;
  mg_diags d;
  mg_model *m = load("function.onnx", &d);
  expect_output_is_declared(m);
  assert_int_equal(count_op(m->graph, MG_OP_Clip), 2);
  assert_int_equal(count_op(m->graph, MG_OP_UNKNOWN), 0);
  mg_model_free(m);
  mg_diags_free(&d);
}

static void test_loop_subgraph(void **state) {
  (void)state;
  mg_diags d;
  mg_model *m = load("loop.onnx", &d);
  mg_node *loop = m->graph->nodes[0];
  assert_int_equal(loop->op, MG_OP_Loop);
  const mg_attr *body = mg_node_attr(loop, "body");
  assert_non_null(body);
  assert_ptr_equal(body->g->parent, m->graph);
  assert_int_equal(body->g->n_inputs, 2);
  /* body reads the outer 'x' */
  int reads_outer = 0;
  for (int i = 0; i < body->g->n_nodes; i++)
    for (int k = 0; k < body->g->nodes[i]->n_in; k++)
      if (body->g->nodes[i]->in[k] == mg_graph_find_local(m->graph, "x")) reads_outer = 1;
  assert_true(reads_outer);
  const mg_value *y = m->graph->outputs[0];
  assert_int_equal(y->shape.rank, 2);
  assert_int_equal(y->shape.d[1].v, 2);
  mg_model_free(m);
  mg_diags_free(&d);
}

static void test_conv_auto_pad(void **state) {
  (void)state;
  mg_diags d;
  mg_model *m = load("conv_same.onnx", &d);
  expect_output_is_declared(m);
  mg_model_free(m);
  mg_diags_free(&d);
}

static void test_identity_alias_removed(void **state) {
  (void)state;
  mg_diags d;
  mg_model *m = load("identity_alias.onnx", &d);
  assert_int_equal(count_op(m->graph, MG_OP_Identity), 0);
  /* the alias has a torch parameter's name: an initializer of its own, sharing
   * the data, so that a weights binding can tell torch's parameters apart */
  const mg_value *w = mg_graph_find_local(m->graph, "weight");
  const mg_value *alias = mg_graph_find_local(m->graph, "weight_alias");
  assert_non_null(alias);
  assert_int_equal(alias->kind, MG_V_INIT);
  assert_ptr_equal(alias->data, w->data);
  assert_ptr_equal(m->graph->nodes[0]->in[1], w);
  assert_ptr_equal(m->graph->nodes[1]->in[1], alias);
  mg_model_free(m);
  mg_diags_free(&d);
}

static void test_unknown_attribute_is_an_error(void **state) {
  (void)state;
  mg_diags d;
  mg_diags_init(&d);
  mg_model *m = NULL;
  assert_int_equal(onnx_import(path_of(fixtures, "unknown_attr.onnx"), &d, &m), -1);
  assert_null(m);
  assert_true(d.count >= 1);
  assert_int_equal(d.items[0].code, MG_D_UNSUPPORTED_ATTR);
  assert_non_null(strstr(d.items[0].message, "foo"));
  mg_diags_free(&d);
}

/* Makes the Nth allocation fail for N = 1, 2, ... until import and preparation
 * succeed; every failing run must fail cleanly (ASan checks for leaks). */
static void sweep(const char *path) {
  int failures = 0;
  for (long n = 1;; n++) {
    mg_diags d;
    mg_diags_init(&d);
    mg_model *m = NULL;
    mg_fault_fail_at(n, 1);
    int rc = onnx_import(path, &d, &m);
    if (rc == 0) rc = mg_prepare(m, NULL, 0, &d);
    mg_fault_fail_at(0, 0);
    mg_model_free(m);
    if (rc == 0) {
      assert_int_equal(d.errors, 0);
      mg_diags_free(&d);
      break;
    }
    assert_true(d.errors > 0); /* a failure is always reported */
    failures++;
    mg_diags_free(&d);
    assert_true(n < 1000000);
  }
  print_message("%s: %d injected failures, all clean\n", path, failures);
  assert_true(failures > 0);
}

static void test_allocation_failures(void **state) {
  (void)state;
  const char *fx[] = {"function.onnx", "loop.onnx", "legacy_softmax.onnx",
                      "legacy_broadcast.onnx", "shape_chain_sym.onnx", "upsample9.onnx"};
  for (size_t i = 0; i < sizeof fx / sizeof fx[0]; i++) sweep(path_of(fixtures, fx[i]));
  const char *conf[] = {"node/test_if/model.onnx", "node/test_scan9_sum/model.onnx",
                        "node/test_sequence_map_identity_1_sequence/model.onnx",
                        "pytorch-converted/test_PixelShuffle/model.onnx",
                        "light/light_squeezenet.onnx"};
  for (size_t i = 0; i < sizeof conf / sizeof conf[0]; i++) {
    char *p = path_of(conformance, conf[i]);
    FILE *f = fopen(p, "rb");
    if (!f) { /* a missing file is a failure, never a sweep silently not run */
      fail_msg("%s is missing: the sweep cannot run (MIGC_CONFORMANCE names the data)", p);
      continue;
    }
    fclose(f);
    sweep(p);
  }
}

int main(void) {
  fixtures = getenv("MIGC_IR_FIXTURES");
  conformance = getenv("MIGC_CONFORMANCE");
  if (!fixtures || !conformance) {
    fprintf(stderr, "test_import: set MIGC_IR_FIXTURES and MIGC_CONFORMANCE\n");
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_legacy_slice),
      cmocka_unit_test(test_shape_chain_folds),
      cmocka_unit_test(test_shape_chain_symbolic),
      cmocka_unit_test(test_upsample_becomes_resize),
      cmocka_unit_test(test_legacy_softmax),
      cmocka_unit_test(test_legacy_broadcast),
      cmocka_unit_test(test_function_inlined),
      cmocka_unit_test(test_loop_subgraph),
      cmocka_unit_test(test_conv_auto_pad),
      cmocka_unit_test(test_identity_alias_removed),
      cmocka_unit_test(test_unknown_attribute_is_an_error),
      cmocka_unit_test(test_allocation_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
