/* Lowering of Gradient (ai.onnx.preview.training) into explicit backward ops.
 *
 * Gradient's outputs are d sum(y) / d xs[i], y being computed by the graph from
 * the xs. Generated C has no autodiff, so the node is replaced, at its place in
 * the graph, by the reverse-mode expansion of the forward slice between the xs
 * and y: a seed of ones shaped like y, then each slice node's vector-Jacobian
 * product written as ordinary ops (Mul, Div, Neg, Where, MatMul, Transpose,
 * ReduceSum + Reshape to undo broadcasting, Add to accumulate fan-out). Only
 * the gradients that reach an xs are built. A Gradient whose slice holds an op
 * without a rule here, a non-float or non-static value, or whose inputs are not
 * the xs values themselves is left alone, and the driver reports it. */
#include "lower.h"
#include "rewrite.h"
#include "infer.h"
#include "passes.h"
#include <string.h>

typedef struct {
  mg_rw *w;
  const mg_node *g;  /* the Gradient node, for names */
  mg_value **grad;   /* by forward value id: its accumulated cotangent, or NULL */
  char *reaches;     /* by forward value id: an xs depends on it... i.e. it depends on an xs */
} grad_ctx;

static int is_float(mg_dtype t) { return t == MG_F32 || t == MG_F64 || t == MG_F16 || t == MG_BF16; }

/* A new node value of the given shape, named after the Gradient node. */
static mg_value *val(grad_ctx *c, mg_dtype t, const mg_shape *s) {
  return mg_rw_value(c->w, c->g->out[0] ? c->g->out[0]->name : "grad", t, s);
}

/* op(a, b) (b NULL for unary ops) as a new value of shape s. */
static mg_value *apply(grad_ctx *c, mg_op op, mg_value *a, mg_value *b, const mg_shape *s) {
  mg_value *out = val(c, a ? a->dtype : MG_F32, s), *in[2] = {a, b};
  mg_rw_node(c->w, op, c->g->name, b ? 2 : 1, in, 1, &out);
  return out;
}

/* gv (shaped like a broadcast of target) summed back to target's shape. */
static mg_value *unbroadcast(grad_ctx *c, mg_value *gv, const mg_value *target) {
  if (!gv || mg_rw_same_shape(&gv->shape, &target->shape)) return gv;
  int r = gv->shape.rank, t = target->shape.rank, lead = r - t, n_axes = 0;
  if (lead < 0) return NULL;
  int64_t axes[MG_MAX_RANK], tdims[MG_MAX_RANK];
  mg_shape kept = gv->shape;
  for (int i = 0; i < r; i++)
    if (i < lead || (target->shape.d[i - lead].v == 1 && gv->shape.d[i].v != 1)) {
      axes[n_axes++] = i;
      kept.d[i].v = 1;
    }
  for (int i = 0; i < t; i++) tdims[i] = target->shape.d[i].v;
  mg_value *ax = mg_rw_const_i64(c->w, "grad_axes", axes, n_axes, 1);
  mg_value *sum = val(c, gv->dtype, &kept), *sum_in[2] = {gv, ax};
  mg_node *rs = mg_rw_node(c->w, MG_OP_ReduceSum, c->g->name, 2, sum_in, 1, &sum);
  mg_rw_attr_int(c->w, rs, "keepdims", 1);
  mg_value *shape = mg_rw_const_i64(c->w, "grad_shape", tdims, t, 1);
  return apply(c, MG_OP_Reshape, sum, shape, &target->shape);
}

/* Adds contribution gv (already shaped like v) to v's cotangent. */
static void accumulate(grad_ctx *c, const mg_value *v, mg_value *gv) {
  if (!gv) return;
  mg_value **slot = &c->grad[v->id];
  *slot = *slot ? apply(c, MG_OP_Add, *slot, gv, &v->shape) : gv;
}

static mg_value *transpose2(grad_ctx *c, mg_value *a) {
  mg_shape s = a->shape;
  s.d[0] = a->shape.d[1];
  s.d[1] = a->shape.d[0];
  mg_value *out = val(c, a->dtype, &s);
  mg_node *t = mg_rw_node(c->w, MG_OP_Transpose, c->g->name, 1, &a, 1, &out);
  int64_t perm[2] = {1, 0};
  mg_rw_attr_ints(c->w, t, "perm", perm, 2);
  return out;
}

/* Whether node m has a backward rule here. */
static int has_rule(const mg_node *m) {
  switch (m->op) {
  case MG_OP_Add: case MG_OP_Sub: case MG_OP_Mul: case MG_OP_Div: case MG_OP_Neg: case MG_OP_Identity:
  case MG_OP_Relu:
    return 1;
  case MG_OP_MatMul:
    return m->in[0]->shape.rank == 2 && m->in[1]->shape.rank == 2;
  default:
    return 0;
  }
}

/* Emits the VJP of forward node m, given its output's cotangent gy. */
static void backward(grad_ctx *c, const mg_node *m, mg_value *gy) {
  mg_value *a = m->in[0], *b = m->n_in > 1 ? m->in[1] : NULL, *y = m->out[0];
  int need_a = c->reaches[a->id], need_b = b && c->reaches[b->id];
  const mg_shape *ys = &y->shape;
  switch (m->op) {
  case MG_OP_Add:
    if (need_a) accumulate(c, a, unbroadcast(c, gy, a));
    if (need_b) accumulate(c, b, unbroadcast(c, gy, b));
    break;
  case MG_OP_Sub:
    if (need_a) accumulate(c, a, unbroadcast(c, gy, a));
    if (need_b) accumulate(c, b, unbroadcast(c, apply(c, MG_OP_Neg, gy, NULL, ys), b));
    break;
  case MG_OP_Mul:
    if (need_a) accumulate(c, a, unbroadcast(c, apply(c, MG_OP_Mul, gy, b, ys), a));
    if (need_b) accumulate(c, b, unbroadcast(c, apply(c, MG_OP_Mul, gy, a, ys), b));
    break;
  case MG_OP_Div: /* y = a / b: dy/da = 1 / b, dy/db = -y / b */
    if (need_a) accumulate(c, a, unbroadcast(c, apply(c, MG_OP_Div, gy, b, ys), a));
    if (need_b) {
      mg_value *q = apply(c, MG_OP_Div, apply(c, MG_OP_Mul, gy, y, ys), b, ys);
      accumulate(c, b, unbroadcast(c, apply(c, MG_OP_Neg, q, NULL, ys), b));
    }
    break;
  case MG_OP_Neg:
    if (need_a) accumulate(c, a, apply(c, MG_OP_Neg, gy, NULL, ys));
    break;
  case MG_OP_Identity:
    if (need_a) accumulate(c, a, gy);
    break;
  case MG_OP_Relu: { /* the kink at 0 takes the subgradient 0, as the interpreter and torch do */
    if (!need_a) break;
    mg_shape scalar = {.rank = 0};
    mg_value *zero = mg_rw_const_fill(c->w, "grad_zero", a->dtype, &scalar, 0.0);
    mg_value *pos = mg_rw_value(c->w, "grad_mask", MG_BOOL, &a->shape), *cmp_in[2] = {a, zero};
    mg_rw_node(c->w, MG_OP_Greater, c->g->name, 2, cmp_in, 1, &pos);
    mg_value *out = val(c, a->dtype, ys), *where_in[3] = {pos, gy, zero};
    mg_rw_node(c->w, MG_OP_Where, c->g->name, 3, where_in, 1, &out);
    accumulate(c, a, out);
    break;
  }
  case MG_OP_MatMul: /* 2-D: dA = dY B^T, dB = A^T dY */
    if (need_a) accumulate(c, a, apply(c, MG_OP_MatMul, gy, transpose2(c, b), &a->shape));
    if (need_b) accumulate(c, b, apply(c, MG_OP_MatMul, transpose2(c, a), gy, &b->shape));
    break;
  default:
    break;
  }
}

/* Marks G's forward slice (mark[node id]) and which values depend on an xs;
 * 0 when G can be lowered, -1 when not. */
static int plan_slice(const mg_graph *g, const mg_node *G, const mg_value *y, char *mark, char *reaches) {
  const mg_attr *xs = mg_node_attr(G, "xs");
  if (!xs || xs->kind != MG_ATTR_STRINGS || (int)xs->n != G->n_out || G->n_in != G->n_out) return -1;
  for (int i = 0; i < G->n_in; i++) {
    const mg_value *x = mg_graph_find_local(g, xs->strings[i]);
    if (!x || G->in[i] != x || x->vtype != MG_VT_TENSOR || !is_float(x->dtype)) return -1;
    reaches[x->id] = 1;
  }
  if (!y->producer || y->producer->graph != g || y->producer->id >= G->id) return -1;
  mark[y->producer->id] = 1;
  for (int i = y->producer->id; i >= 0; i--) {
    if (!mark[i]) continue;
    const mg_node *m = g->nodes[i];
    for (int k = 0; k < m->n_in; k++) {
      const mg_value *v = m->in[k];
      if (v && !reaches[v->id] && v->producer && v->producer->graph == g) mark[v->producer->id] = 1;
    }
  }
  for (int i = 0; i <= y->producer->id; i++) {
    if (!mark[i]) continue;
    const mg_node *m = g->nodes[i];
    if (m->n_out != 1 || !m->out[0]) return -1;
    int any = 0;
    for (int k = 0; k < m->n_in; k++) any |= m->in[k] && reaches[m->in[k]->id];
    if (!any) continue; /* constant with respect to the xs */
    if (!has_rule(m)) return -1;
    for (int k = 0; k < m->n_in; k++)
      if (!m->in[k] || !mg_shape_is_static(&m->in[k]->shape) || !is_float(m->in[k]->dtype)) return -1;
    if (!mg_shape_is_static(&m->out[0]->shape)) return -1;
    reaches[m->out[0]->id] = 1;
  }
  return 0; /* y not depending on any xs gives zero gradients */
}

/* Emits G's replacement into w; 1 when lowered, 0 when G is to be kept. */
static int lower_gradient(mg_rw *w, mg_graph *g, mg_node *G) {
  const char *yname = mg_attr_str(G, "y", NULL);
  mg_value *y = yname ? mg_graph_find_local(g, yname) : NULL;
  if (!y || y->vtype != MG_VT_TENSOR || !is_float(y->dtype) || !mg_shape_is_static(&y->shape)) return 0;
  int nv = g->n_values;
  char *mark = mg_calloc((size_t)g->n_nodes + 1, 1), *reaches = mg_calloc((size_t)nv + 1, 1);
  mg_value **grad = mg_calloc((size_t)nv + 1, sizeof *grad);
  int ok = mark && reaches && grad && !plan_slice(g, G, y, mark, reaches);
  if (!mark || !reaches || !grad) w->failed = 1;
  if (ok) {
    grad_ctx c = {w, G, grad, reaches};
    if (reaches[y->id]) grad[y->id] = mg_rw_const_fill(w, "grad_seed", y->dtype, &y->shape, 1.0);
    for (int i = y->producer->id; i >= 0 && !w->failed; i--) {
      const mg_node *m = g->nodes[i];
      if (mark[i] && reaches[m->out[0]->id] && grad[m->out[0]->id]) backward(&c, m, grad[m->out[0]->id]);
    }
    for (int i = 0; i < G->n_out && !w->failed; i++) {
      mg_value *x = G->in[i], *gx = grad[x->id];
      if (!G->out[i]) continue;
      if (!gx) gx = mg_rw_const_fill(w, "grad_zero", x->dtype, &x->shape, 0.0);
      mg_rw_node(w, MG_OP_Identity, G->name, 1, &gx, 1, &G->out[i]);
    }
  }
  mg_free(mark);
  mg_free(reaches);
  mg_free(grad);
  return ok;
}

/* Reorders g's nodes stably so that each Gradient comes after the producer of
 * its y (the importer sorts by inputs only, and y is an attribute). Nodes stay
 * put when that would need a cycle. 0, or -1 out of memory. */
static int order_after_y(mg_graph *g) {
  int n = g->n_nodes, k = 0;
  mg_node **out = mg_malloc(sizeof *out * (size_t)(n + 1));
  char *done = mg_calloc((size_t)n + 1, 1);
  if (!out || !done) {
    mg_free(out);
    mg_free(done);
    return -1;
  }
  while (k < n) {
    int pick = -1;
    for (int i = 0; i < n && pick < 0; i++) {
      const mg_node *m = g->nodes[i];
      if (done[i]) continue;
      int ok = 1;
      for (int q = 0; q < m->n_in && ok; q++) {
        const mg_value *v = m->in[q];
        ok = !v || !v->producer || v->producer->graph != g || done[v->producer->id];
      }
      if (ok && m->op == MG_OP_Gradient) {
        const char *yname = mg_attr_str(m, "y", NULL);
        const mg_value *y = yname ? mg_graph_find_local(g, yname) : NULL;
        ok = !y || !y->producer || y->producer->graph != g || done[y->producer->id];
      }
      if (ok) pick = i;
    }
    if (pick < 0) break; /* a cycle through some y: keep the original order */
    done[pick] = 1;
    out[k++] = g->nodes[pick];
  }
  if (k == n)
    for (int i = 0; i < n; i++) {
      g->nodes[i] = out[i];
      g->nodes[i]->id = i;
    }
  mg_free(out);
  mg_free(done);
  return 0;
}

int cg_lower_gradients(mg_model *m, mg_diags *d, int *changed) {
  mg_graph *g = m->graph;
  int any = 0;
  for (int i = 0; i < g->n_nodes; i++) any |= g->nodes[i]->op == MG_OP_Gradient;
  if (!any) return 0;
  if (order_after_y(g)) goto oom;
  mg_rw w;
  mg_rw_begin(&w, m, g);
  int n_nodes = g->n_nodes;
  mg_node **orig = mg_malloc(sizeof *orig * (size_t)(n_nodes + 1));
  if (!orig) goto oom;
  memcpy(orig, g->nodes, sizeof *orig * (size_t)n_nodes);
  for (int i = 0; i < n_nodes && !w.failed; i++)
    if (orig[i]->op != MG_OP_Gradient || !lower_gradient(&w, g, orig[i])) mg_rw_keep(&w, orig[i]);
  mg_free(orig);
  if (mg_rw_end(&w)) goto oom;
  *changed += w.changed;
  if (!w.changed) return 0;
  if (ir_infer_shapes(m, NULL, 0, d)) return -1;
  if (pass_dce(m) < 0) goto oom;
  return 0;
oom:
  mg_error(d, OOM, NULL, NULL, "out of memory lowering Gradient");
  return -1;
}
