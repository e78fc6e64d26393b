/* The one-node model of a node, which both the MindSpore target's ops.Custom
 * kernels and the Ascend target's host fallbacks hand to the C emitter. */
#include "codegen.h"
#include "ir.h"
#include "passes.h"
#include <string.h>

/* A value of sub's graph standing for src (same name, type and data). */
static mg_value *twin(mg_graph *g, const mg_value *src, mg_value_kind kind) {
  mg_value *v = mg_value_new(g, src->name, NULL);
  if (!v) return NULL;
  v->kind = kind;
  v->vtype = src->vtype;
  v->dtype = src->dtype;
  v->shape = src->shape;
  if (kind == MG_V_CONST) v->data = src->data, v->nbytes = src->nbytes;
  return v;
}

/* The one-node model of n: its run-time inputs ins[0..n_ins) as graph inputs, its
 * constant inputs as constants (sharing src's data, which must outlive it), its
 * outputs as graph outputs. Attributes are copied, since the C lowering may
 * rewrite them. NULL on OOM. */
mg_model *cg_one_node_model(const mg_model *src, const mg_node *n, const mg_value *const *ins, int n_ins) {
  mg_model *m = mg_model_new();
  if (!m) return NULL;
  m->path = src->path;
  m->ir_version = src->ir_version;
  m->opsets = src->opsets, m->n_opsets = src->n_opsets, m->opset = src->opset;
  m->derive_shapes_only = 1;
  mg_graph *g = m->graph = mg_graph_new(m, NULL);
  mg_node *k = g ? mg_node_new(g, n->op, n->name, n->n_in, n->n_out) : NULL;
  mg_attr *attr = k ? mg_arena_alloc(&m->arena, sizeof(mg_attr) * (size_t)(n->n_attr ? n->n_attr : 1)) : NULL;
  int bad = !attr;
  for (int i = 0; i < n_ins && !bad; i++) {
    mg_value *v = twin(g, ins[i], MG_V_INPUT);
    bad = !v || mg_graph_push_list(g, &g->inputs, &g->n_inputs, v);
  }
  for (int i = 0; i < n->n_in && !bad; i++) {
    const mg_value *x = n->in[i];
    if (!x) continue;
    mg_value *v = mg_graph_find_local(g, x->name);
    if (!v) bad = !(v = twin(g, x, MG_V_CONST));
    k->in[i] = v;
  }
  for (int i = 0; i < n->n_out && !bad; i++) {
    if (!n->out[i]) continue;
    mg_value *v = twin(g, n->out[i], MG_V_NODE);
    bad = !v || mg_graph_push_list(g, &g->outputs, &g->n_outputs, v);
    if (!bad) v->producer = k, v->producer_slot = i, k->out[i] = v;
  }
  if (!bad) {
    if (n->n_attr) memcpy(attr, n->attr, sizeof(mg_attr) * (size_t)n->n_attr); /* n->attr may be NULL */
    k->attr = attr, k->n_attr = n->n_attr;
    k->op_type = n->op_type, k->domain = n->domain, k->opset = n->opset;
    bad = mg_graph_push_node(g, k);
  }
  if (bad) {
    mg_model_free(m);
    return NULL;
  }
  ir_count_uses(m);
  return m;
}

