/* Completeness of the per-op tables: every op of ops.def reaches a case of its
 * own in the stages that dispatch on it, never a family's catch-all.
 *
 * - Shape inference: an op whose shape_rule is OWN has a case in infer_ops.c (the
 *   last family's default records "no shape rule").
 * - The interpreter: each op that interp_families.def gives to a family is taken
 *   by that family's switch (its default records an unknown-op diagnostic).
 *
 * Each op is tried on a one-node model whose inputs are float32 [2, 3] (constants
 * for the interpreter). Most such nodes are wrong for their op, and the stage may
 * reject them; what is checked is only that the rejection is not the catch-all. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "infer.h"
#include "interp.h"
#include "interp_internal.h"

static const int64_t ONES[6] = {1, 1, 1, 1, 1, 1};
static const float ONES_F32[6] = {1, 1, 1, 1, 1, 1};
static const unsigned char ONES_BOOL[6] = {1, 1, 1, 1, 1, 1};

static mg_value *numbered_value(mg_graph *g, char prefix, int i) {
  char name[16];
  snprintf(name, sizeof name, "%c%d", prefix, i);
  mg_value *v = mg_value_new(g, name, NULL);
  assert_non_null(v);
  return v;
}

/* A model holding one node of op: min_in inputs of dtype t (graph inputs, or
 * constants when constant is set) and max(min_out, 1) outputs, capped at 8 each. */
static mg_model *one_node(mg_op op, mg_dtype t, int constant, mg_node **node) {
  const mg_op_info *info = mg_op_get(op);
  mg_model *m = mg_model_new();
  assert_non_null(m);
  m->opset = 21;
  mg_graph *g = mg_graph_new(m, NULL);
  assert_non_null(g);
  m->graph = g;
  int n_in = info->min_in > 8 ? 8 : info->min_in, n_out = info->min_out < 1 ? 1 : info->min_out;
  if (n_out > 8) n_out = 8;
  mg_node *n = mg_node_new(g, op, "n", n_in, n_out);
  assert_non_null(n);
  n->opset = 21;
  for (int i = 0; i < n_in; i++) {
    mg_value *v = numbered_value(g, 'x', i);
    v->dtype = t;
    v->shape.rank = 2;
    v->shape.d[0].v = 2, v->shape.d[1].v = 3;
    if (constant) {
      v->kind = MG_V_CONST;
      v->data = t == MG_F32 ? (const void *)ONES_F32 : t == MG_BOOL ? (const void *)ONES_BOOL : (const void *)ONES;
      v->nbytes = (size_t)6 * mg_dtype_size(t);
    } else {
      v->kind = MG_V_INPUT;
      assert_int_equal(mg_graph_push_list(g, &g->inputs, &g->n_inputs, v), 0);
    }
    v->n_uses = 1;
    n->in[i] = v;
  }
  for (int k = 0; k < n_out; k++) {
    mg_value *v = numbered_value(g, 'y', k);
    v->kind = MG_V_NODE;
    v->producer = n, v->producer_slot = k;
    v->shape.rank = -1;
    n->out[k] = v;
  }
  assert_int_equal(mg_graph_push_node(g, n), 0);
  *node = n;
  return m;
}

static int diag_says(const mg_diags *d, const char *needle) {
  for (size_t i = 0; i < d->count; i++)
    if (strstr(d->items[i].message, needle)) return 1;
  return 0;
}

static void test_every_own_shape_rule_has_a_case(void **state) {
  (void)state;
  int own = 0, missing = 0;
  for (int op = 1; op < MG_OP_COUNT; op++) {
    if (mg_op_get((mg_op)op)->shape_rule != MG_SH_OWN) continue;
    own++;
    mg_node *n;
    mg_model *m = one_node((mg_op)op, MG_F32, 0, &n);
    mg_diags d;
    mg_diags_init(&d);
    (void)ir_infer_shapes(m, NULL, 0, &d);
    if (diag_says(&d, "no shape rule")) fprintf(stderr, "FAIL %s: no shape rule\n", mg_op_name((mg_op)op)), missing++;
    mg_diags_free(&d);
    mg_model_free(m);
  }
  assert_true(own >= 50);
  assert_int_equal(missing, 0);
}

/* The catch-alls of the family switches, and only they, record unknown-op. */
static int is_catch_all(const mg_diags *d) {
  for (size_t i = 0; i < d->count; i++)
    if (d->items[i].code == MG_D_UNKNOWN_OP) return 1;
  return 0;
}

/* Whether the family takes op on inputs of dtype t (an op defined only for
 * integers or bools may reach the catch-all on floats). */
static int family_takes(mg_op op, mg_dtype t) {
  mg_node *n;
  mg_model *m = one_node(op, t, 1, &n);
  mg_array outs[8];
  mg_diags d;
  mg_diags_init(&d);
  if (interp_eval_node(m, n, outs, &d) == 0)
    for (int k = 0; k < n->n_out; k++) mg_array_free(&outs[k]);
  int takes = !is_catch_all(&d);
  mg_diags_free(&d);
  mg_model_free(m);
  return takes;
}

static void test_every_interpreter_family_takes_its_ops(void **state) {
  (void)state;
  int tried = 0, missing = 0;
  for (int op = 1; op < MG_OP_COUNT; op++) {
    if (!interp_kernel_for((mg_op)op)) continue;
    tried++;
    if (!family_takes((mg_op)op, MG_F32) && !family_takes((mg_op)op, MG_I64) && !family_takes((mg_op)op, MG_BOOL))
      fprintf(stderr, "FAIL %s reached its family's default\n", mg_op_name((mg_op)op)), missing++;
  }
  assert_true(tried >= 180);
  assert_int_equal(missing, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_own_shape_rule_has_a_case),
      cmocka_unit_test(test_every_interpreter_family_takes_its_ops),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
