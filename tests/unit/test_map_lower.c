/* The decomposition pass (map_lower): for each recipe of docs/rules-notes.md
 * section 4, a one-node model (tests/fixtures/make_map_models.py) is run through
 * the reference interpreter before and after lowering on a few random inputs:
 * the outputs must agree (exactly for integers and bools, within 1e-6 relative
 * for floats), the lowered graph must hold only the ops the rule lists (the ops
 * those decompose into in turn included), and every node must then map to a
 * direct call for the target. Env: MIGC_MAP_FIXTURES, MIGC_RULES_DIR. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interp.h"
#include "map_test_fixtures.h"

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static uint64_t next_random(void) {
  g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
  return g_rng;
}

/* Random data for graph input v: floats in [-3, 3), integers in [0, 3) (so that
 * Equal sees equal pairs) with the dtype's extremes at the first two positions
 * (Sub wraps there), bools 0/1; a shape input ("s") gets dims in [1, 4]. */
static void random_input(const mg_value *v, mg_array *a) {
  memset(a, 0, sizeof *a);
  a->dtype = v->dtype, a->rank = v->shape.rank;
  int64_t n = 1;
  for (int r = 0; r < a->rank; r++) a->dims[r] = v->shape.d[r].v, n *= a->dims[r];
  size_t es = mg_dtype_size(v->dtype);
  a->nbytes = (size_t)n * es;
  a->data = calloc((size_t)n + 1, es);
  a->name = strdup(v->name);
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = next_random();
    if (v->dtype == MG_F32) ((float *)a->data)[i] = (float)((double)(r % 60000) / 10000.0 - 3.0);
    else if (v->dtype == MG_BOOL) ((unsigned char *)a->data)[i] = r & 1;
    else if (v->dtype == MG_I64 && !strcmp(v->name, "s")) ((int64_t *)a->data)[i] = 1 + (int64_t)(r % 4);
    else if (v->dtype == MG_I64) ((int64_t *)a->data)[i] = i == 0 ? INT64_MIN : i == 1 ? INT64_MAX : (int64_t)(r % 3);
    else if (v->dtype == MG_I32) ((int32_t *)a->data)[i] = i == 0 ? INT32_MIN : i == 1 ? INT32_MAX : (int32_t)(r % 3);
    else fail_msg("no random data for dtype %s", mg_dtype_name(v->dtype));
  }
}

/* Runs m on inputs; the outputs (one) go to out. */
static void run(mg_model *m, const mg_array *inputs, int n_in, mg_array *out) {
  mg_array *outs = NULL;
  mg_diags d;
  mg_diags_init(&d);
  if (interp_run(m, inputs, n_in, NULL, &outs, &d)) print_diags("interp", &d), fail();
  mg_diags_free(&d);
  assert_int_equal(m->graph->n_outputs, 1);
  *out = outs[0];
  mg_free(outs);
}

static void expect_same(const mg_array *want, const mg_array *got) {
  assert_int_equal(want->dtype, got->dtype);
  assert_int_equal(want->rank, got->rank);
  for (int r = 0; r < want->rank; r++) assert_int_equal(want->dims[r], got->dims[r]);
  assert_int_equal(want->nbytes, got->nbytes);
  if (want->dtype != MG_F32) {
    assert_memory_equal(want->data, got->data, want->nbytes);
    return;
  }
  for (size_t i = 0; i < want->nbytes / 4; i++) {
    double w = ((const float *)want->data)[i], g = ((const float *)got->data)[i];
    if (fabs(w - g) > 1e-6 * fmax(fabs(w), 1e-30) && fabs(w - g) > 1e-12)
      fail_msg("element %zu: %.9g, lowered %.9g", i, w, g);
  }
}

/* Whether op is one of allowed[0..n). */
static int listed(mg_op op, const mg_op *allowed, int n) {
  for (int i = 0; i < n; i++)
    if (allowed[i] == op) return 1;
  return 0;
}

typedef struct {
  const char *model;
  int ascend;
  mg_op op;          /* the node that decomposes */
  mg_op allowed[10];  /* what the lowered graph may hold */
  int n_allowed;
  int dynamic;       /* the lowered nodes may need run-time shapes: their plan may say dynamic-shape */
} lower_case;

/* Lowers one model, checks ops, re-mapping and the interpreter's outputs. */
static void check_case(const lower_case *k) {
  const rule_set *rs = k->ascend ? g_acl : g_ms;
  mg_model *m = load(k->model);
  assert_int_equal(m->graph->n_nodes, 1);
  assert_int_equal(m->graph->nodes[0]->op, k->op);
  node_map before = map_node(m->graph->nodes[0], rs);
  assert_int_equal(before.status, MAP_DECOMPOSED);
  node_map_free(&before);

  enum { TRIALS = 3 };
  int n_in = m->graph->n_inputs;
  mg_array inputs[TRIALS][4], want[TRIALS];
  assert_true(n_in <= 4);
  for (int t = 0; t < TRIALS; t++) {
    for (int i = 0; i < n_in; i++) random_input(m->graph->inputs[i], &inputs[t][i]);
    run(m, inputs[t], n_in, &want[t]);
  }

  mg_diags d;
  mg_diags_init(&d);
  int lowered = map_lower(m, rs, &d);
  if (lowered < 1 || d.count) print_diags(k->model, &d);
  assert_true(lowered >= 1);
  assert_int_equal(d.count, 0);
  assert_int_equal(ir_verify(m, &d), 0);
  mg_diags_free(&d);

  assert_true(m->graph->n_nodes >= 1);
  for (int i = 0; i < m->graph->n_nodes; i++) {
    const mg_node *n = m->graph->nodes[i];
    if (!listed(n->op, k->allowed, k->n_allowed)) fail_msg("%s: the lowered graph holds %s", k->model, n->op_type);
    mg_arena a;
    mg_arena_init(&a, 4096);
    map_plan *p = map_node_plan(n, rs, &a);
    assert_non_null(p);
    int dynamic_ok = k->dynamic && p->status == MAP_DYNAMIC_SHAPE;
    if (p->status != MAP_SUPPORTED && !dynamic_ok) fail_msg("%s: lowered %s maps as %s: %s", k->model, n->op_type,
                                             map_status_name(p->status), p->detail);
    assert_non_null(rule_call(p->rule));
    mg_arena_destroy(&a);
  }
  for (int t = 0; t < TRIALS; t++) {
    mg_array got;
    run(m, inputs[t], n_in, &got);
    expect_same(&want[t], &got);
    mg_array_free(&got);
    mg_array_free(&want[t]);
    for (int i = 0; i < n_in; i++) mg_array_free(&inputs[t][i]);
  }
  mg_model_free(m);
}

static void run_cases(const lower_case *cases, size_t n) {
  for (size_t i = 0; i < n; i++) check_case(&cases[i]);
}

/* aclnn Einsum -> Transpose MatMul: plain, either operand or the result swapped,
 * and maxvit's spaced upper-case equation. */
static void test_lower_einsum(void **state) {
  (void)state;
  static const lower_case cases[] = {
      {"einsum_mm", 1, MG_OP_Einsum, {MG_OP_Transpose, MG_OP_MatMul}, 2},
      {"einsum_ta", 1, MG_OP_Einsum, {MG_OP_Transpose, MG_OP_MatMul}, 2},
      {"einsum_tb", 1, MG_OP_Einsum, {MG_OP_Transpose, MG_OP_MatMul}, 2},
      {"einsum_to", 1, MG_OP_Einsum, {MG_OP_Transpose, MG_OP_MatMul}, 2},
      {"einsum_maxvit", 1, MG_OP_Einsum, {MG_OP_Transpose, MG_OP_MatMul}, 2}};
  run_cases(cases, sizeof cases / sizeof cases[0]);
}

/* aclnn HardSigmoid alpha 0.3, beta 0.4 -> Mul Add Clip. */
static void test_lower_hardsigmoid(void **state) {
  (void)state;
  static const lower_case c = {"hardsigmoid", 1, MG_OP_HardSigmoid, {MG_OP_Mul, MG_OP_Add, MG_OP_Clip}, 3};
  check_case(&c);
}

/* aclnn Equal (int64, int32, broadcast, wrap-around at the extremes) -> Sub Cast
 * Not, and Not in turn -> Cast Sub. */
static void test_lower_equal(void **state) {
  (void)state;
  static const lower_case cases[] = {{"equal_i64", 1, MG_OP_Equal, {MG_OP_Sub, MG_OP_Cast}, 2},
                                     {"equal_i32", 1, MG_OP_Equal, {MG_OP_Sub, MG_OP_Cast}, 2}};
  run_cases(cases, sizeof cases / sizeof cases[0]);
}

/* aclnn Not -> Cast Sub. */
static void test_lower_not(void **state) {
  (void)state;
  static const lower_case c = {"not", 1, MG_OP_Not, {MG_OP_Cast, MG_OP_Sub}, 2};
  check_case(&c);
}

/* Flatten (axis 2: a decomposition on both targets) and Unsqueeze -> Reshape. */
static void test_lower_reshapes(void **state) {
  (void)state;
  static const lower_case cases[] = {{"flatten2", 1, MG_OP_Flatten, {MG_OP_Reshape}, 1},
                                     {"flatten2", 0, MG_OP_Flatten, {MG_OP_Reshape}, 1},
                                     {"unsqueeze", 1, MG_OP_Unsqueeze, {MG_OP_Reshape}, 1},
                                     {"unsqueeze", 0, MG_OP_Unsqueeze, {MG_OP_Reshape}, 1}};
  run_cases(cases, sizeof cases / sizeof cases[0]);
}

/* ConstantOfShape -> Expand, both targets: a float value 2.5 over a constant
 * shape, and an int32 value 7 over a shape given at run time (the Expand then
 * maps, but its size argument is only known at run time: dynamic-shape). */
static void test_lower_constant_of_shape(void **state) {
  (void)state;
  static const lower_case cases[] = {
      {"constantofshape_big", 1, MG_OP_ConstantOfShape, {MG_OP_Expand}, 1, 0},
      {"constantofshape_big", 0, MG_OP_ConstantOfShape, {MG_OP_Expand}, 1, 0},
      {"constantofshape", 1, MG_OP_ConstantOfShape, {MG_OP_Expand}, 1, 1},
      {"constantofshape", 0, MG_OP_ConstantOfShape, {MG_OP_Expand}, 1, 1}};
  run_cases(cases, sizeof cases / sizeof cases[0]);
}

/* MindSpore grouped Conv (group 2, symmetric pads, strides) -> Split Conv Concat; the
 * pieces' weights are constants, so each is an ops.conv2d call (a layer holds only
 * checkpoint parameters). */
static void test_lower_grouped_conv(void **state) {
  (void)state;
  static const lower_case c = {"conv_grouped", 0, MG_OP_Conv, {MG_OP_Split, MG_OP_Conv, MG_OP_Concat}, 3};
  check_case(&c);
}

/* MindSpore Slice -> Range Gather: two axes with a step 2 and a negative step and
 * clamped ends, and one axis with the default axes/steps. */
static void test_lower_slice(void **state) {
  (void)state;
  static const lower_case cases[] = {{"slice_steps", 0, MG_OP_Slice, {MG_OP_Range, MG_OP_Gather}, 2},
                                     {"slice_plain", 0, MG_OP_Slice, {MG_OP_Range, MG_OP_Gather}, 2}};
  run_cases(cases, sizeof cases / sizeof cases[0]);
}

/* A node whose recipe needs a static shape it lacks stays, with one diagnostic. */
/* The MindSpore decompositions the node tests need: each against the interpreter
 * before lowering, only the listed ops left, each a direct call. */
static void test_lower_node_test_recipes(void **state) {
  (void)state;
  static const lower_case cases[] = {
      {"trilu_lower", 0, MG_OP_Trilu, {MG_OP_Where}, 1},
      {"reducesumsquare", 0, MG_OP_ReduceSumSquare, {MG_OP_Mul, MG_OP_ReduceSum}, 2},
      {"reducel2_all", 0, MG_OP_ReduceL2, {MG_OP_Mul, MG_OP_ReduceSum, MG_OP_Sqrt}, 3},
      {"nll_weight_ii", 0, MG_OP_NegativeLogLikelihoodLoss,
       {MG_OP_Equal, MG_OP_Where, MG_OP_Reshape, MG_OP_GatherElements, MG_OP_Neg, MG_OP_Gather, MG_OP_Mul,
        MG_OP_ReduceSum, MG_OP_Div}, 9},
      {"sce_sum", 0, MG_OP_SoftmaxCrossEntropyLoss,
       {MG_OP_LogSoftmax, MG_OP_Reshape, MG_OP_GatherElements, MG_OP_Neg, MG_OP_ReduceSum}, 5},
      {"argmax_last", 0, MG_OP_ArgMax, {MG_OP_Range, MG_OP_Gather, MG_OP_ArgMax, MG_OP_Sub}, 4},
      {"gemm_scaled", 0, MG_OP_Gemm, {MG_OP_Transpose, MG_OP_MatMul, MG_OP_Mul, MG_OP_Add}, 4},
      {"max3", 0, MG_OP_Max, {MG_OP_Max}, 1},
      {"mean3", 0, MG_OP_Mean, {MG_OP_Add, MG_OP_Div}, 2},
      {"shrink", 0, MG_OP_Shrink, {MG_OP_Greater, MG_OP_Less, MG_OP_Sub, MG_OP_Add, MG_OP_Where}, 5},
      {"thresholdedrelu", 0, MG_OP_ThresholdedRelu, {MG_OP_Greater, MG_OP_Where}, 2},
      {"elu2", 0, MG_OP_Elu, {MG_OP_Exp, MG_OP_Sub, MG_OP_Mul, MG_OP_Less, MG_OP_Where}, 5},
      {"selu_custom", 0, MG_OP_Selu, {MG_OP_Exp, MG_OP_Sub, MG_OP_Mul, MG_OP_Greater, MG_OP_Where}, 5},
      {"prelu_bcast", 0, MG_OP_PRelu, {MG_OP_Less, MG_OP_Mul, MG_OP_Where}, 3},
      {"isinf_neg", 0, MG_OP_IsInf, {MG_OP_Abs, MG_OP_Equal}, 2}};
  run_cases(cases, sizeof cases / sizeof cases[0]);
}

static void test_lower_refuses_with_reason(void **state) {
  (void)state;
  mg_model *m = load("flatten_dyn"); /* N x 3 x 4 -> N x 12: one unknown dim is fine */
  mg_diags d;
  mg_diags_init(&d);
  assert_int_equal(map_lower(m, g_acl, &d), 1);
  assert_int_equal(d.count, 0);
  assert_int_equal(m->graph->nodes[0]->op, MG_OP_Reshape);
  mg_model_free(m);
  m = load("flatten_dyn2"); /* N x M x 4 -> N x (M*4): two unknown dims */
  assert_int_equal(map_lower(m, g_acl, &d), 0);
  assert_int_equal(m->graph->nodes[0]->op, MG_OP_Flatten);
  assert_int_equal(d.count, 1);
  assert_int_equal(d.items[0].code, MG_D_UNSUPPORTED);
  assert_non_null(strstr(d.items[0].message, "not static"));
  mg_diags_free(&d);
  mg_model_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lower_einsum),           cmocka_unit_test(test_lower_hardsigmoid),
      cmocka_unit_test(test_lower_equal),            cmocka_unit_test(test_lower_not),
      cmocka_unit_test(test_lower_reshapes),         cmocka_unit_test(test_lower_constant_of_shape),
      cmocka_unit_test(test_lower_grouped_conv),     cmocka_unit_test(test_lower_slice),
      cmocka_unit_test(test_lower_node_test_recipes),
      cmocka_unit_test(test_lower_refuses_with_reason),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
