/* Gradient (ai.onnx.preview.training): the gradient of sum(y) with respect to each
 * of xs, where y is computed by the node's own graph.
 *
 * The kernel re-runs the forward slice (the nodes y depends on) with xs taken from
 * the node's inputs, then walks it backwards applying each op's vector-Jacobian
 * product. An op on the path without a VJP is an error naming it, never a zero
 * gradient. Cotangents are float64 arrays. */
#include "interp_internal.h"
#include <math.h>
#include <string.h>

typedef struct {
  mg_array *val;   /* forward value (borrowed or owned) */
  int own_val;
  double *grad;    /* cotangent, numel(val) doubles, or NULL */
} slot;

static int64_t numel_of(const mg_array *t) { return it_numel(t); }

/* Adds g (of shape `from`, a broadcast of `to`) into acc (of shape `to`),
 * summing over the broadcast dimensions. */
static void unbroadcast_add(double *acc, const mg_array *to, const double *g, const mg_array *from) {
  int64_t strides[MG_ARRAY_MAX_RANK], coord[MG_ARRAY_MAX_RANK] = {0};
  it_bcast_strides(to, from->rank, from->dims, strides);
  int64_t k = numel_of(from), off = 0;
  for (int64_t i = 0; i < k; i++) {
    acc[off] += g[i];
    for (int d = from->rank - 1; d >= 0; d--) {
      coord[d]++;
      off += strides[d];
      if (coord[d] < from->dims[d]) break;
      off -= strides[d] * from->dims[d];
      coord[d] = 0;
    }
  }
}

/* Broadcast read of t at the flat index k of shape `of`. */
static double bget(const mg_array *t, const mg_array *of, int64_t k) {
  int64_t strides[MG_ARRAY_MAX_RANK], off = 0;
  it_bcast_strides(t, of->rank, of->dims, strides);
  for (int d = of->rank - 1; d >= 0; d--) {
    off += (k % of->dims[d]) * strides[d];
    k /= of->dims[d];
  }
  return it_get_f64(t, off);
}

static double *grad_of(interp_ctx *c, const mg_node *n, slot *s) {
  if (!s->grad) {
    s->grad = mg_calloc((size_t)numel_of(s->val) + 1, sizeof(double));
    if (!s->grad) it_fail(c, n, "out of memory");
  }
  return s->grad;
}

/* Accumulates the cotangents of node m's inputs from the cotangent of its output. */
static int vjp(interp_ctx *c, const mg_node *g, const mg_node *m, slot **ins, slot *out) {
  const double *gy = out->grad;
  const mg_array *y = out->val;
  int64_t k = numel_of(y);
  switch (m->op) {
  case MG_OP_Add: case MG_OP_Sub: case MG_OP_Mul: case MG_OP_Div: {
    double *tmp = mg_malloc(sizeof(double) * (size_t)(k + 1));
    if (!tmp) return it_fail(c, g, "out of memory");
    for (int side = 0; side < 2; side++) {
      if (!ins[side]) continue;
      const mg_array *a = ins[0]->val, *b = ins[1]->val;
      for (int64_t i = 0; i < k; i++) {
        double av = bget(a, y, i), bv = bget(b, y, i), d;
        switch (m->op) {
        case MG_OP_Add: d = 1; break;
        case MG_OP_Sub: d = side ? -1 : 1; break;
        case MG_OP_Mul: d = side ? av : bv; break;
        default: d = side ? -av / (bv * bv) : 1 / bv; break;
        }
        tmp[i] = gy[i] * d;
      }
      double *acc = grad_of(c, g, ins[side]);
      if (!acc) { mg_free(tmp); return -1; }
      unbroadcast_add(acc, ins[side]->val, tmp, y);
    }
    mg_free(tmp);
    return 0;
  }
  case MG_OP_Identity: case MG_OP_Neg: case MG_OP_Relu: case MG_OP_Sigmoid: case MG_OP_Tanh:
  case MG_OP_Exp: case MG_OP_Log: case MG_OP_Sqrt: {
    if (!ins[0]) return 0;
    double *acc = grad_of(c, g, ins[0]);
    if (!acc) return -1;
    for (int64_t i = 0; i < k; i++) {
      double x = it_get_f64(ins[0]->val, i), yv = it_get_f64(y, i), d;
      switch (m->op) {
      case MG_OP_Identity: d = 1; break;
      case MG_OP_Neg: d = -1; break;
      case MG_OP_Relu: d = x > 0; break; /* the kink at 0 takes the subgradient 0, as torch */
      case MG_OP_Sigmoid: d = yv * (1 - yv); break;
      case MG_OP_Tanh: d = 1 - yv * yv; break;
      case MG_OP_Exp: d = yv; break;
      case MG_OP_Log: d = 1 / x; break;
      default: d = 0.5 / yv; break;
      }
      acc[i] += gy[i] * d;
    }
    return 0;
  }
  case MG_OP_MatMul: {
    const mg_array *a = ins[0]->val, *b = ins[1]->val;
    if (a->rank != 2 || b->rank != 2) break;
    int64_t M = a->dims[0], K = a->dims[1], N = b->dims[1];
    double *ga = grad_of(c, g, ins[0]), *gb = grad_of(c, g, ins[1]);
    if (!ga || !gb) return -1;
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++)
        for (int64_t p = 0; p < K; p++) {
          ga[i * K + p] += gy[i * N + j] * it_get_f64(b, p * N + j);
          gb[p * N + j] += gy[i * N + j] * it_get_f64(a, i * K + p);
        }
    return 0;
  }
  default:
    break;
  }
  mg_error(c->d, UNKNOWN_OP, g->name, g->op_type,
           "no vector-Jacobian product for %s (node '%s') on the path to y", m->op_type, m->name);
  return -1;
}

int interp_grad(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out,
                interp_frame *frame) {
  mg_graph *g = n->graph;
  const mg_attr *xs = mg_node_attr(n, "xs");
  const char *yname = mg_attr_str(n, "y", NULL);
  if (!xs || xs->kind != MG_ATTR_STRINGS || !yname) return it_fail(c, n, "Gradient needs xs and y");
  if ((int)xs->n != n->n_out) return it_fail(c, n, "one output per entry of xs is needed");
  mg_value *y = mg_graph_find(g, yname);
  if (!y || !y->producer || y->producer->graph != g) return it_fail(c, n, "y names no node output of this graph");
  slot *slots = mg_calloc((size_t)g->n_values + 1, sizeof(slot));
  char *mark = mg_calloc((size_t)g->n_nodes + 1, 1);
  int rc = 0;
  if (!slots || !mark) {
    mg_free(slots);
    mg_free(mark);
    return it_fail(c, n, "out of memory");
  }
  /* xs come from the node's inputs; they cut the slice */
  for (size_t i = 0; i < xs->n && !rc; i++) {
    mg_value *x = mg_graph_find_local(g, xs->strings[i]);
    const mg_array *t = it_in(in, n, (int)i);
    if (!x || !t) rc = it_fail(c, n, "xs entry '%s' is not an input of the node", xs->strings[i]);
    else slots[x->id].val = (mg_array *)t;
  }
  /* mark the forward slice: producers reachable backwards from y, stopping at xs */
  mark[y->producer->id] = 1;
  for (int i = y->producer->id; i >= 0 && !rc; i--) {
    if (!mark[i]) continue;
    mg_node *m = g->nodes[i];
    for (int k = 0; k < m->n_in; k++) {
      mg_value *v = m->in[k];
      if (v && !slots[v->id].val && v->producer && v->producer->graph == g) mark[v->producer->id] = 1;
    }
  }
  /* forward: re-run the slice */
  for (int i = 0; i < g->n_nodes && !rc; i++) {
    if (!mark[i]) continue;
    mg_node *m = g->nodes[i];
    if (m == n) { rc = it_fail(c, n, "y depends on the Gradient node itself"); break; }
    interp_kernel *k = interp_kernel_for(m->op);
    if (!k) { rc = it_fail(c, n, "no kernel for %s on the path to y", m->op_type); break; }
    mg_rvalue ib[16], ob[16], *ip[16], *op[16];
    if (m->n_in > 16 || m->n_out > 16) { rc = it_fail(c, n, "node too wide"); break; }
    for (int q = 0; q < m->n_in && !rc; q++) {
      ip[q] = NULL;
      mg_value *v = m->in[q];
      if (!v) continue;
      if (slots[v->id].val) {
        memset(&ib[q], 0, sizeof ib[q]);
        ib[q].kind = MG_RV_TENSOR;
        ib[q].borrowed = 1;
        ib[q].t = *slots[v->id].val;
        ip[q] = &ib[q];
      } else {
        ip[q] = interp_lookup(c, frame, v);
        if (!ip[q] || ip[q]->kind != MG_RV_TENSOR) rc = it_fail(c, n, "'%s' has no value", v->name);
        else slots[v->id].val = &ip[q]->t;
      }
    }
    for (int q = 0; q < m->n_out; q++) {
      memset(&ob[q], 0, sizeof ob[q]);
      op[q] = m->out[q] ? &ob[q] : NULL;
    }
    if (!rc) rc = k(c, m, ip, op, frame);
    for (int q = 0; q < m->n_out; q++) {
      if (!m->out[q]) continue;
      if (rc || ob[q].kind != MG_RV_TENSOR) { mg_rvalue_free(&ob[q]); continue; }
      slot *s = &slots[m->out[q]->id];
      s->val = mg_malloc(sizeof(mg_array));
      if (!s->val) { mg_rvalue_free(&ob[q]); rc = it_fail(c, n, "out of memory"); continue; }
      *s->val = ob[q].t;
      s->own_val = 1;
    }
  }
  /* backward */
  if (!rc) {
    double *gy = grad_of(c, n, &slots[y->id]);
    if (!gy) rc = -1;
    for (int64_t i = 0; !rc && i < numel_of(slots[y->id].val); i++) gy[i] = 1;
  }
  for (int i = g->n_nodes - 1; i >= 0 && !rc; i--) {
    if (!mark[i]) continue;
    mg_node *m = g->nodes[i];
    if (m->n_out < 1 || !m->out[0] || !slots[m->out[0]->id].grad) continue;
    slot *ins[16] = {0};
    for (int q = 0; q < m->n_in && q < 16; q++)
      ins[q] = m->in[q] && mg_dtype_is_float(slots[m->in[q]->id].val ? slots[m->in[q]->id].val->dtype : MG_UNDEFINED)
                   ? &slots[m->in[q]->id] : NULL;
    rc = vjp(c, n, m, ins, &slots[m->out[0]->id]);
  }
  for (size_t i = 0; i < xs->n && !rc; i++) {
    mg_value *x = mg_graph_find_local(g, xs->strings[i]);
    const mg_array *t = slots[x->id].val;
    mg_array *o = it_out(c, n, out, (int)i, t->dtype, t->rank, t->dims);
    if (!o) { rc = -1; break; }
    if (slots[x->id].grad) it_store_f64(o, slots[x->id].grad);
  }
  for (int i = 0; i < g->n_values; i++) {
    if (slots[i].own_val) {
      mg_array_free(slots[i].val);
      mg_free(slots[i].val);
    }
    mg_free(slots[i].grad);
  }
  mg_free(slots);
  mg_free(mark);
  return rc;
}
