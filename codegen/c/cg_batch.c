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
 * - A value is batch-carrying when exactly one of its axes is CG_BATCH_PROBE
 *   times longer in the probe, the others agreeing; a graph input with the symbol
 *   is one, along axis 0. Its layout says where the batch sits in that axis (a
 *   layout: the batch may be merged with other factors, as attention merges it
 *   with the heads), such that one element's values keep their order and the
 *   batch-1 program computes exactly them.
 * - A node reading a batch-carrying value must be an op that keeps batch
 *   elements apart given that layout (separable(): elementwise ops and views
 *   anywhere, Transpose moving it, convolutions and pools with it in axis 0,
 *   Softmax/LayerNorm/Concat/... not along it, MatMul not summing over it, ...),
 *   and the probe must agree with the layout it gives each output.
 * - A value that differs between the two graphs without carrying the batch (a
 *   constant folded from Shape, as every torch flatten or view exports it) may
 *   only be the target shape of a Reshape or an Expand of a batch-carrying value:
 *   per element, the batch-1 target is the right one.
 * - Graph outputs must hold one element after another (batch leading).
 * - Any other node is not converted, and is reported: model_run stops there.
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
      if (quiet.items[i].code == MG_D_OOM) { /* not the model's fault: a failed conversion */
        mg_diags_free(&quiet);
        return -1;
      }
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

/* The axis of a (batch 1) that is CG_BATCH_PROBE times longer in b (the probe)
 * while every other agrees; -1 when they all agree, -2 for any other change. */
static int probe_axis(const mg_value *a, const mg_value *b) {
  if (a->shape.rank != b->shape.rank || a->shape.rank < 0) return -2;
  int k = -1;
  for (int j = 0; j < a->shape.rank; j++) {
    int64_t x = a->shape.d[j].v, y = b->shape.d[j].v;
    if (x == y) continue;
    if (k >= 0 || x < 1 || y != x * CG_BATCH_PROBE) return -2;
    k = j;
  }
  return k;
}

/* Where the batch sits in a batch-carrying value: along axis k, whose index is
 * o * (B * q) + b * q + i for batch element b (o < d[k] / q, i < q), d[k] its
 * batch-1 length. So one element's values keep their order, and the batch-1
 * program computes exactly them. k < 0: the value does not carry the batch. */
typedef struct {
  int k;
  int64_t q;
} layout;

static int64_t prefix(const mg_value *v, int k) {
  int64_t p = 1;
  for (int j = 0; j < k; j++) p *= v->shape.d[j].v;
  return p;
}

/* The norm of attribute name (default dflt) of a rank-rank input. */
static int axis_of(const mg_node *n, const char *name, int64_t dflt, int rank) {
  int64_t a = mg_attr_int(n, name, dflt);
  return (int)(a < 0 ? a + rank : a);
}

/* For node n, whose batch-carrying inputs have layouts in[j] (k < 0 for the rest):
 * NULL when it computes each batch element from that element alone, with *q the
 * inner factor of its outputs' batch axis (which the probe's shapes give) and
 * *k_out that axis where the op fixes it (-1: the probe's); else why not. */
static const char *separable(const mg_node *n, const layout *in, int64_t *q, int *k_out) {
  int rank = n->in[0] ? n->in[0]->shape.rank : 0, k = in[0].k, others = 0, first = -1;
  for (int j = 0; j < n->n_in && j < 64; j++)
    if (in[j].k >= 0) {
      if (first < 0) first = j;
      others |= j > 0;
    }
  *q = in[first].q;
  *k_out = -1;
  if (cg_elementwise_op(n->op) || n->op == MG_OP_Expand) {
    /* a broadcast: the batch axes of the inputs meet at one output axis */
    int R = n->out[0]->shape.rank;
    for (int j = 0; j < n->n_in && j < 64; j++) {
      if (in[j].k < 0) continue;
      int at = in[j].k + R - n->in[j]->shape.rank;
      if ((*k_out >= 0 && at != *k_out) || in[j].q != *q) return "its operands carry the batch along different axes";
      *k_out = at;
    }
    return NULL;
  }
  switch (n->op) {
  case MG_OP_Reshape: case MG_OP_Flatten: case MG_OP_Squeeze: case MG_OP_Unsqueeze:
    /* element order is kept: the elements before the batch stay before it */
    if (others) return "its target shape is computed from the batch";
    *q = -prefix(n->in[0], k) * (n->in[0]->shape.d[k].v / in[0].q); /* the caller divides it out */
    return NULL;
  case MG_OP_Transpose: {
    const mg_attr *p = mg_node_attr(n, "perm");
    if (!p || (int)p->n != rank) return "it has no explicit perm";
    for (int j = 0; j < rank; j++)
      if (p->ints[j] == k) *k_out = j;
    return NULL;
  }
  case MG_OP_Conv: case MG_OP_ConvTranspose: case MG_OP_MaxPool: case MG_OP_AveragePool: case MG_OP_LpPool:
  case MG_OP_GlobalAveragePool: case MG_OP_GlobalMaxPool: case MG_OP_GlobalLpPool: case MG_OP_BatchNormalization:
  case MG_OP_InstanceNormalization: case MG_OP_LRN: case MG_OP_GroupNormalization: case MG_OP_Resize:
  case MG_OP_Pad: case MG_OP_DepthToSpace: case MG_OP_SpaceToDepth:
    /* images along axis 0: the batch (merged with other images or not) must be there */
    if (first != 0 || others) return "it reads the batch in an operand other than its data";
    if (k != 0) return "the batch is not its image axis (0)";
    if (n->op == MG_OP_BatchNormalization && n->n_out > 1) return "training-mode BatchNormalization (batch statistics)";
    *k_out = 0;
    return NULL;
  case MG_OP_ReduceSum: case MG_OP_ReduceMean: case MG_OP_ReduceMax: case MG_OP_ReduceMin: case MG_OP_ReduceProd:
  case MG_OP_ReduceL1: case MG_OP_ReduceL2: case MG_OP_ReduceLogSumExp: case MG_OP_ReduceSumSquare:
  case MG_OP_ReduceLogSum:
    /* a reduction over the batch axis leaves no axis B times longer: the probe says */
    return first != 0 || others ? "its axes are computed from the batch" : NULL;
  case MG_OP_Softmax: case MG_OP_LogSoftmax: case MG_OP_Hardmax: case MG_OP_LayerNormalization:
    /* before opset 13, Softmax normalises every axis from `axis` on: the batch must be before it */
    if (others) return "it reads the batch in an operand other than its data";
    return k >= axis_of(n, "axis", -1, rank) ? "it normalises along the batch axis" : NULL;
  case MG_OP_Concat: case MG_OP_Split: case MG_OP_CumSum: case MG_OP_ArgMax: case MG_OP_ArgMin: case MG_OP_TopK: {
    int64_t ax = 0;
    if (n->op == MG_OP_CumSum) {
      if (others || cg_const_ints(n->in[1], &ax, 1) != 1) return "its axis is computed at run time";
      ax = ax < 0 ? ax + rank : ax;
    } else {
      if (others && n->op != MG_OP_Concat) return "it reads the batch in an operand other than its data";
      ax = axis_of(n, "axis", n->op == MG_OP_TopK ? -1 : 0, rank);
    }
    for (int j = 0; j < n->n_in && n->op == MG_OP_Concat; j++)
      if (in[j].k < 0 || in[j].k != k || in[j].q != *q) return "its inputs do not all carry the batch alike";
    return ax == k ? "it runs along the batch axis" : NULL;
  }
  case MG_OP_Gather:
    if (first == 0) return others ? "its indices carry the batch too" : axis_of(n, "axis", 0, rank) == k ? "it gathers along the batch axis" : NULL;
    return NULL; /* a table looked up by each element's indices */
  case MG_OP_Slice: {
    if (others) return "its bounds are computed from the batch";
    int64_t st[MG_MAX_RANK], ax[MG_MAX_RANK], sp[MG_MAX_RANK];
    int64_t ns = cg_const_ints(n->in[1], st, MG_MAX_RANK), na = rank;
    if (ns < 0) return "its starts are computed at run time";
    for (int j = 0; j < MG_MAX_RANK; j++) ax[j] = j, sp[j] = 1;
    if (n->n_in > 3 && n->in[3] && (na = cg_const_ints(n->in[3], ax, MG_MAX_RANK)) < 0) return "its axes are computed at run time";
    if (n->n_in > 4 && n->in[4] && cg_const_ints(n->in[4], sp, MG_MAX_RANK) < 0) return "its steps are computed at run time";
    for (int64_t j = 0; j < ns && j < na; j++)
      if ((ax[j] < 0 ? ax[j] + rank : ax[j]) == k && (st[j] != 0 || sp[j] != 1)) return "it slices the batch axis";
    return NULL;
  }
  case MG_OP_Gemm:
    if (first != 0 || others) return "its B or C operand carries the batch";
    if (mg_attr_int(n, "transA", 0)) return "its A operand is transposed (the batch is not its rows)";
    *k_out = 0;
    return NULL;
  case MG_OP_MatMul: {
    /* the batch may be in A's rows, B's columns or a batch axis, never the summed one */
    int ra = n->in[0]->shape.rank, rb = n->in[1]->shape.rank, R = n->out[0]->shape.rank;
    if (ra < 2 || rb < 2) return "a vector operand";
    for (int j = 0; j < 2; j++) {
      int r = j ? rb : ra, kk = in[j].k;
      if (kk < 0) continue;
      if (kk == (j ? r - 2 : r - 1)) return "it sums along the batch axis";
      int at = kk + R - r;
      if ((*k_out >= 0 && at != *k_out) || in[j].q != *q) return "its operands carry the batch along different axes";
      *k_out = at;
    }
    return NULL;
  }
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

/* Checks node i of c's graph (a) against its probe twin b, with the layouts of
 * the values so far; gives its outputs theirs. */
static void check_pair(cg_ctx *c, int i, const mg_node *a, const mg_node *b, layout *lay) {
  layout in[64];
  int any = 0;
  for (int j = 0; j < 64; j++) in[j] = (layout){-1, 1};
  for (int j = 0; j < a->n_in && j < 64; j++) {
    if (!a->in[j] != !b->in[j]) fail_node(c, i, "the graph is lowered differently at another batch size");
    if (!a->in[j] || !b->in[j]) continue;
    in[j] = lay[a->in[j]->id];
    any |= in[j].k >= 0;
  }
  for (int j = 0; j < a->n_in && j < 64; j++) {
    if (!a->in[j] || !b->in[j] || in[j].k >= 0 || same_value(a->in[j], b->in[j])) continue;
    int target = (a->op == MG_OP_Reshape || a->op == MG_OP_Expand) && j == 1 && in[0].k >= 0;
    if (!target) fail_node(c, i, str(c, "it reads '%s', which is computed from the batch size", a->in[j]->name));
    else in[j] = (layout){-1, 1}; /* the batch-1 target is each element's */
  }
  int64_t q = 1;
  int k_out = -1;
  const char *why = any ? separable(a, in, &q, &k_out) : NULL;
  if (why) fail_node(c, i, why);
  for (int k = 0; k < a->n_out; k++) {
    const mg_value *o = a->out[k], *p = b->out[k];
    if (!o || !p) continue;
    int at = probe_axis(o, p);
    int64_t qo = q;
    if (any && at >= 0 && qo < 0) { /* a view: the elements before the batch, -qo of them, stay before it */
      int64_t pre = prefix(o, at), d = o->shape.d[at].v;
      qo = pre > 0 && -qo % pre == 0 && d % (-qo / pre) == 0 ? d / (-qo / pre) : 0;
    }
    int ok = any ? at >= 0 && (k_out < 0 || at == k_out) && qo > 0 && o->shape.d[at].v % qo == 0 : at == -1 && same_value(o, p);
    if (!ok && (o->n_uses || is_graph_output(c->g, o))) {
      char s1[96], s2[96];
      fail_node(c, i, str(c, "output '%s' has shape %s at batch 1 and %s at batch %d: the batch does not stay one "
                             "element's block",
                          o->name, mg_shape_str(&o->shape, s1, sizeof s1), mg_shape_str(&p->shape, s2, sizeof s2),
                          CG_BATCH_PROBE));
    }
    /* a failed node's readers are judged as if it had done right, so the report
     * names the nodes that mix batch elements, not everything after them */
    lay[o->id] = at >= 0 ? (layout){at, ok ? qo : 1} : (layout){-1, 1};
  }
}

int cg_batch_check(cg_ctx *c) {
  cg_batch *bt = &c->batch;
  if (!bt->sym) return 0;
  mg_graph *g = c->g;
  c->batch_why = mg_calloc((size_t)g->n_nodes + 1, sizeof *c->batch_why);
  bt->out_batch = mg_calloc((size_t)g->n_outputs + 1, 1);
  layout *lay = mg_malloc(sizeof *lay * ((size_t)g->n_values + 1));
  if (!c->batch_why || !bt->out_batch || !lay) {
    mg_free(lay);
    return -1;
  }
  for (int v = 0; v <= g->n_values; v++) lay[v] = (layout){-1, 1};
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
    if (bt->in_batch[i]) lay[g->inputs[i]->id] = (layout){0, 1};
  for (int i = 0; i < g->n_nodes; i++) {
    const mg_node *a = g->nodes[i], *b = i < p->n_nodes ? p->nodes[i] : NULL;
    if (!b || a->op != b->op || a->n_in != b->n_in || a->n_out != b->n_out) {
      fail_node(c, i, "the graph is lowered differently at another batch size");
      break; /* the rest cannot be paired */
    }
    check_pair(c, i, a, b, lay);
  }
  /* the caller's buffers hold one element after another: the batch must lead them */
  for (int j = 0; j < g->n_outputs; j++) {
    const mg_value *v = g->outputs[j];
    layout l = lay[v->id];
    bt->out_batch[j] = l.k >= 0;
    if (l.k >= 0 && prefix(v, l.k) * (v->shape.d[l.k].v / l.q) != 1 && v->producer)
      for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i] == v->producer)
          fail_node(c, i, str(c, "graph output '%s' does not hold one batch element after another", v->name));
  }
done:
  mg_free(lay);
  mg_model_free(bt->probe);
  bt->probe = NULL;
  return 0;
}

void cg_batch_check_lengths(cg_ctx *c) {
  mg_graph *g = c->g;
  if (!c->batch.sym || !c->batch_why) return;
  for (int j = 0; j < g->n_outputs; j++) {
    const mg_value *v = g->outputs[j];
    if (!c->batch.out_batch[j] || (!c->bounded[v->id] && c->rd_off[v->id] < 0)) continue;
    for (int i = 0; i < g->n_nodes; i++)
      if (g->nodes[i] == v->producer)
        fail_node(c, i, str(c, "graph output '%s' has a run-time length in each batch element", v->name));
  }
}

void cg_batch_free(cg_batch *bt) {
  mg_model_free(bt->probe);
  mg_free(bt->in_batch);
  mg_free(bt->out_batch);
  memset(bt, 0, sizeof *bt);
}
