/* Gradient (ai.onnx.preview.training): the gradient of sum(y) with respect to each
 * of xs, where y is computed by the node's own graph.
 *
 * The kernel re-runs the forward slice (the nodes y depends on) with xs taken from
 * the node's inputs, then walks it backwards applying each op's vector-Jacobian
 * product from the table grad_run shares (vjp.h). An op on the path without a VJP is an error naming it, never a zero
 * gradient. Cotangents are float64 arrays. */
#include "vjp.h"
#include <math.h>
#include <string.h>

typedef struct {
  mg_array *val;   /* forward value (borrowed or owned) */
  int own_val;
  double *grad;    /* cotangent, numel(val) doubles, or NULL */
} slot;

static int64_t numel_of(const mg_array *t) { return it_numel(t); }

static double *grad_of(interp_ctx *c, const mg_node *n, slot *s) {
  if (!s->grad) {
    s->grad = mg_calloc((size_t)numel_of(s->val) + 1, sizeof(double));
    if (!s->grad) it_fail(c, n, "out of memory");
  }
  return s->grad;
}

/* Accumulates the cotangents of node m's inputs from those of its outputs through
 * the shared VJP table (vjp.h). */
static int vjp(interp_ctx *c, const mg_node *g, const mg_node *m, slot *slots) {
  vjp_fn *fn = vjp_for(m->op);
  if (!fn) {
    mg_error(c->d, UNKNOWN_OP, g->name, g->op_type,
             "no vector-Jacobian product for %s (node '%s') on the path to y", m->op_type, m->name);
    return -1;
  }
  if (m->n_in > 16 || m->n_out > 16) return it_fail(c, g, "node too wide");
  const mg_array *x[16] = {0}, *y[16] = {0};
  const double *gy[16] = {0};
  double *gx[16] = {0};
  for (int q = 0; q < m->n_in; q++) {
    slot *s = m->in[q] ? &slots[m->in[q]->id] : NULL;
    if (!s || !s->val) continue;
    x[q] = s->val;
    if (mg_dtype_is_float(s->val->dtype) && !(gx[q] = grad_of(c, g, s))) return -1;
  }
  for (int q = 0; q < m->n_out; q++) {
    if (!m->out[q]) continue;
    y[q] = slots[m->out[q]->id].val;
    gy[q] = slots[m->out[q]->id].grad;
  }
  vjp_args a = {.m = c->m, .n = m, .x = x, .y = y, .gy = gy, .gx = gx, .d = c->d};
  return fn(&a);
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
    int any = 0;
    for (int q = 0; q < m->n_out; q++) any |= m->out[q] && slots[m->out[q]->id].grad != NULL;
    if (any) rc = vjp(c, n, m, slots);
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
