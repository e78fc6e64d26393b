/* A symbolic batch in the C backend: one binary for every batch size.
 *
 * When the graph inputs' only unknown dims are their leading ones, all named by
 * the same symbol (an ONNX dim_param such as "batch", as torch's dynamic_axes
 * writes it), the model is generated for one batch element and model_run loops
 * over the actual batch, each element's inputs and outputs at its stride. That
 * is right exactly when every node computes each batch element from that
 * element alone, which is checked, never assumed: the model is prepared and
 * lowered twice, at batch 1 (the one emitted) and at batch CG_BATCH_PROBE (the
 * probe), and the two graphs are compared node by node.
 *
 * - A value is batch-carrying when its leading dim is the batch in both graphs
 *   and its other dims agree; a graph input with the symbol is one.
 * - A node reading a batch-carrying value must be an op that keeps batch
 *   elements apart (separable(): elementwise, convolutions, pools, norms over
 *   non-batch axes, Gemm rows, ...), and each of its outputs must carry the batch.
 * - A value that differs between the two graphs without carrying the batch (a
 *   constant folded from Shape, as every torch flatten or view exports it) may
 *   only be the target shape of a Reshape or an Expand of a batch-carrying value:
 *   per element, the batch-1 target is the right one.
 * - Any other node whose outputs differ is not converted, and is reported.
 *
 * Each batch element reuses the same arena, so the plan is the static batch-1
 * plan whatever the caller's maximum: arena(B) = arena(1). */
#include "cg_internal.h"
#include "passes.h"
#include <stdlib.h>

enum { CG_BATCH_PROBE = 7 };

/* 0: not a per-sample model (static, or other unknown dims); 1: it is, *sym set. */
static int find_symbol(const mg_graph *g, const char **sym) {
  int found = 0;
  *sym = NULL;
  for (int i = 0; i < g->n_inputs; i++) {
    const mg_value *v = g->inputs[i];
    if (v->shape.rank < 0) return 0;
    for (int k = 0; k < v->shape.rank; k++) {
      const mg_dim *dm = &v->shape.d[k];
      if (dm->v >= 0) continue;
      if (k != 0 || !dm->sym) return 0;
      if (found && strcmp(*sym, dm->sym)) return 0;
      *sym = dm->sym, found = 1;
    }
  }
  return found;
}

/* Prepares m again with its batch inputs' leading dim set to b. */
static int prepare_at(mg_model *m, const char *sym, int64_t b, mg_diags *d) {
  mg_graph *g = m->graph;
  mg_shape_override *ov = mg_calloc((size_t)(g->n_inputs ? g->n_inputs : 1), sizeof *ov);
  if (!ov) return -1;
  int n = 0;
  for (int i = 0; i < g->n_inputs; i++) {
    const mg_value *v = g->inputs[i];
    if (v->shape.rank < 1 || v->shape.d[0].v >= 0 || !v->shape.d[0].sym || strcmp(v->shape.d[0].sym, sym)) continue;
    ov[n].name = v->name;
    ov[n].shape = v->shape;
    ov[n].shape.d[0].v = b;
    ov[n].shape.d[0].sym = NULL;
    n++;
  }
  int rc = mg_prepare(m, ov, n, d);
  mg_free(ov);
  return rc;
}

int cg_batch_begin(cg_batch *bt, mg_model *m, int fold_bn, mg_diags *d) {
  memset(bt, 0, sizeof *bt);
  const char *sym;
  if (!find_symbol(m->graph, &sym)) return 0;
  mg_graph *g = m->graph;
  bt->n_inputs = g->n_inputs;
  bt->in_batch = mg_calloc((size_t)(g->n_inputs ? g->n_inputs : 1), 1);
  if (!bt->in_batch) return -1;
  for (int i = 0; i < g->n_inputs; i++)
    bt->in_batch[i] = g->inputs[i]->shape.rank >= 1 && g->inputs[i]->shape.d[0].v < 0;
  /* the symbol's text lives in m's arena, which outlives the context */
  bt->sym = sym;
  bt->probe = mg_model_clone(m);
  if (!bt->probe) return -1;
  mg_diags quiet;
  mg_diags_init(&quiet);
  int folded = 0, bn = 0;
  if (prepare_at(bt->probe, sym, CG_BATCH_PROBE, &quiet) ||
      cg_lower(bt->probe, fold_bn, &folded, &bn, &quiet)) {
    /* the graph takes batch 1 only (its shapes fix it): say why, with the first error */
    const char *why = "it cannot be prepared at another batch size";
    for (size_t i = 0; i < quiet.count; i++)
      if (quiet.items[i].severity == MG_SEV_ERROR) {
        why = mg_arena_strdup(&m->arena, quiet.items[i].message);
        bt->fail_node = quiet.items[i].node ? mg_arena_strdup(&m->arena, quiet.items[i].node) : NULL;
        break;
      }
    bt->whole_why = why ? why : "out of memory";
    mg_model_free(bt->probe);
    bt->probe = NULL;
  }
  mg_diags_free(&quiet);
  return prepare_at(m, sym, 1, d);
}

static int same_shape(const mg_value *a, const mg_value *b) {
  if (a->shape.rank != b->shape.rank) return 0;
  for (int k = 0; k < a->shape.rank; k++)
    if (a->shape.d[k].v != b->shape.d[k].v) return 0;
  return 1;
}

/* Whether a (batch 1) and b (the probe) are the same value: shape, dtype, and
 * the data of a constant. */
static int same_value(const mg_value *a, const mg_value *b) {
  if (a->dtype != b->dtype || !same_shape(a, b) || !a->data != !b->data) return 0;
  return !a->data || (a->nbytes == b->nbytes && !memcmp(a->data, b->data, a->nbytes));
}

/* Whether a carries the batch on its leading axis: 1 there, the probe's batch in b. */
static int carries(const mg_value *a, const mg_value *b) {
  if (a->shape.rank < 1 || a->shape.rank != b->shape.rank) return 0;
  if (a->shape.d[0].v != 1 || b->shape.d[0].v != CG_BATCH_PROBE) return 0;
  for (int k = 1; k < a->shape.rank; k++)
    if (a->shape.d[k].v != b->shape.d[k].v) return 0;
  return 1;
}

static int axis_of(const mg_node *n, const char *name, int64_t dflt, int rank) {
  int64_t a = mg_attr_int(n, name, dflt);
  return (int)(a < 0 ? a + rank : a);
}

/* NULL when n (whose batch-carrying inputs are flagged in carry_in) computes each
 * batch element from that element alone; else why not. The probe's shapes then
 * confirm that every output carries the batch. */
static const char *separable(const mg_node *n, const char *carry_in) {
  int rank = n->in[0] ? n->in[0]->shape.rank : 0;
  int others = 0;
  for (int j = 1; j < n->n_in; j++) others |= carry_in[j];
  if (cg_elementwise_op(n->op)) return NULL;
  switch (n->op) {
  case MG_OP_Conv: case MG_OP_ConvTranspose: case MG_OP_MaxPool: case MG_OP_AveragePool: case MG_OP_LpPool:
  case MG_OP_GlobalAveragePool: case MG_OP_GlobalMaxPool: case MG_OP_GlobalLpPool: case MG_OP_BatchNormalization:
  case MG_OP_InstanceNormalization: case MG_OP_LRN: case MG_OP_GroupNormalization: case MG_OP_Resize:
  case MG_OP_Pad: case MG_OP_DepthToSpace: case MG_OP_SpaceToDepth: case MG_OP_Reshape: case MG_OP_Flatten:
  case MG_OP_Squeeze: case MG_OP_Unsqueeze: case MG_OP_Expand: case MG_OP_ReduceSum: case MG_OP_ReduceMean:
  case MG_OP_ReduceMax: case MG_OP_ReduceMin: case MG_OP_ReduceProd: case MG_OP_ReduceL1: case MG_OP_ReduceL2:
  case MG_OP_ReduceLogSumExp: case MG_OP_ReduceSumSquare: case MG_OP_ReduceLogSum:
    /* the probe's shapes catch a reduction, pad or reshape across the batch */
    if (!carry_in[0] || others) return "it reads the batch in an operand other than its data";
    if (n->op == MG_OP_BatchNormalization && n->n_out > 1) return "training-mode BatchNormalization (batch statistics)";
    return NULL;
  case MG_OP_Transpose: {
    const mg_attr *p = mg_node_attr(n, "perm");
    return p && p->n && p->ints[0] == 0 ? NULL : "it moves the batch axis";
  }
  case MG_OP_Softmax: case MG_OP_LogSoftmax: case MG_OP_Hardmax: case MG_OP_CumSum: case MG_OP_ArgMax:
  case MG_OP_ArgMin: case MG_OP_TopK: case MG_OP_Concat: case MG_OP_Split: case MG_OP_LayerNormalization:
    if (n->op == MG_OP_CumSum || n->op == MG_OP_TopK) {
      int64_t ax = 0;
      if (n->n_in < 2 || !n->in[1] || cg_const_ints(n->in[1], &ax, 1) != 1 || n->op == MG_OP_TopK) {
        if (n->op == MG_OP_CumSum) return "its axis is computed at run time";
        ax = mg_attr_int(n, "axis", -1);
      }
      if (ax < 0) ax += rank;
      return ax == 0 ? "it runs along the batch axis" : NULL;
    }
    if (others && n->op != MG_OP_Concat) return "it reads the batch in an operand other than its data";
    return axis_of(n, "axis", n->op == MG_OP_Concat || n->op == MG_OP_Split || n->op == MG_OP_ArgMax ||
                                      n->op == MG_OP_ArgMin ? 0 : -1, rank) == 0
               ? "it runs along the batch axis"
               : NULL;
  case MG_OP_Gather:
    if (carry_in[0]) return axis_of(n, "axis", 0, rank) == 0 ? "it gathers along the batch axis" : carry_in[1] ? "its indices carry the batch too" : NULL;
    return NULL; /* a table looked up by each element's indices */
  case MG_OP_Slice: {
    if (others) return "its bounds are computed from the batch";
    int64_t st[MG_MAX_RANK], ax[MG_MAX_RANK], sp[MG_MAX_RANK];
    int64_t ns = cg_const_ints(n->in[1], st, MG_MAX_RANK), na = rank, nsp = 0;
    if (ns < 0) return "its starts are computed at run time";
    for (int k = 0; k < MG_MAX_RANK; k++) ax[k] = k, sp[k] = 1;
    if (n->n_in > 3 && n->in[3] && (na = cg_const_ints(n->in[3], ax, MG_MAX_RANK)) < 0) return "its axes are computed at run time";
    if (n->n_in > 4 && n->in[4] && (nsp = cg_const_ints(n->in[4], sp, MG_MAX_RANK)) < 0) return "its steps are computed at run time";
    (void)nsp;
    for (int64_t k = 0; k < ns && k < na; k++)
      if ((ax[k] < 0 ? ax[k] + rank : ax[k]) == 0 && (st[k] != 0 || sp[k] != 1)) return "it slices the batch axis";
    return NULL;
  }
  case MG_OP_Gemm:
    if (mg_attr_int(n, "transA", 0)) return "its A operand is transposed (the batch is not its rows)";
    return others ? "its B or C operand carries the batch" : NULL;
  case MG_OP_MatMul:
    if (carry_in[1] && (rank < 3 || n->in[1]->shape.rank < 3)) return "its B operand carries the batch";
    if (!carry_in[0]) return "its A operand does not carry the batch, B does";
    return NULL;
  default:
    return "it is not known to compute each batch element on its own";
  }
}

static int is_graph_output(const mg_graph *g, const mg_value *v) {
  for (int j = 0; j < g->n_outputs; j++)
    if (g->outputs[j] == v) return 1;
  return 0;
}

/* Marks node i as not convertible for the batch, with why. */
static void fail_node(cg_ctx *c, int i, const char *why) {
  if (!c->batch_why[i]) c->batch_why[i] = why;
}

int cg_batch_check(cg_ctx *c) {
  cg_batch *bt = &c->batch;
  if (!bt->sym) return 0;
  mg_graph *g = c->g;
  c->batch_why = mg_calloc((size_t)g->n_nodes + 1, sizeof *c->batch_why);
  bt->out_batch = mg_calloc((size_t)g->n_outputs + 1, 1);
  char *carry = mg_calloc((size_t)g->n_values + 1, 1);
  if (!c->batch_why || !bt->out_batch || !carry) {
    mg_free(carry);
    return -1;
  }
  int rc = 0;
  if (!bt->probe) {
    int at = 0;
    for (int i = 0; bt->fail_node && i < g->n_nodes; i++)
      if (g->nodes[i]->name && !strcmp(g->nodes[i]->name, bt->fail_node)) at = i;
    if (g->n_nodes) fail_node(c, at, bt->whole_why);
    goto done;
  }
  mg_graph *p = bt->probe->graph;
  if (p->n_inputs != g->n_inputs || p->n_outputs != g->n_outputs) {
    if (g->n_nodes) fail_node(c, 0, "the graph is lowered differently at another batch size");
    goto done;
  }
  for (int i = 0; i < g->n_inputs; i++)
    if (bt->in_batch[i]) carry[g->inputs[i]->id] = 1;
  for (int i = 0; i < g->n_nodes; i++) {
    const mg_node *a = g->nodes[i], *b = i < p->n_nodes ? p->nodes[i] : NULL;
    if (!b || a->op != b->op || a->n_in != b->n_in || a->n_out != b->n_out) {
      fail_node(c, i, "the graph is lowered differently at another batch size");
      break; /* the rest cannot be paired */
    }
    char carry_in[64] = {0};
    int any = 0;
    for (int j = 0; j < a->n_in && j < 64; j++) {
      if (!a->in[j] != !b->in[j]) fail_node(c, i, "the graph is lowered differently at another batch size");
      if (!a->in[j] || !b->in[j]) continue;
      carry_in[j] = carry[a->in[j]->id];
      any |= carry_in[j];
    }
    for (int j = 0; j < a->n_in && j < 64; j++) {
      if (!a->in[j] || !b->in[j] || carry_in[j] || same_value(a->in[j], b->in[j])) continue;
      int target = (a->op == MG_OP_Reshape || a->op == MG_OP_Expand) && j == 1 && carry_in[0];
      if (!target)
        fail_node(c, i, str(c, "it reads '%s', which is computed from the batch size", a->in[j]->name));
    }
    const char *why = any ? separable(a, carry_in) : NULL;
    if (why) fail_node(c, i, why);
    for (int k = 0; k < a->n_out; k++) {
      const mg_value *o = a->out[k], *q = b->out[k];
      if (!o || !q || (!o->n_uses && !is_graph_output(g, o))) continue;
      if (any && carries(o, q)) carry[o->id] = 1;
      else if (!same_value(o, q) || any) {
        char s1[96], s2[96];
        fail_node(c, i, str(c, "output '%s' has shape %s at batch 1 and %s at batch %d: the batch is not its leading axis",
                            o->name, mg_shape_str(&o->shape, s1, sizeof s1), mg_shape_str(&q->shape, s2, sizeof s2),
                            CG_BATCH_PROBE));
        carry[o->id] = any; /* its readers are not the ones to blame */
      }
    }
  }
  for (int j = 0; j < g->n_outputs; j++) bt->out_batch[j] = carry[g->outputs[j]->id];
done:
  mg_free(carry);
  mg_model_free(bt->probe);
  bt->probe = NULL;
  return rc;
}

void cg_batch_free(cg_batch *bt) {
  mg_model_free(bt->probe);
  mg_free(bt->in_batch);
  mg_free(bt->out_batch);
  memset(bt, 0, sizeof *bt);
}
