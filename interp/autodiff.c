/* grad_run: reverse-mode differentiation of the top graph (autodiff.h).
 *
 * 1. Analysis: a value depends on a source (a float graph input or a float
 *    initializer) when a node computes it from one; it is needed when it is float,
 *    depends on a source and reaches a graph output through float values. A node
 *    with a needed output is active; an active node whose op has no VJP is an
 *    error naming it (all such nodes are reported before anything runs). Integer
 *    and bool outputs (Shape, ArgMax, Equal) are never needed, so those ops stop
 *    gradient flow by type alone.
 * 2. Forward: interp_run with an observer that copies the outputs of the top
 *    graph's nodes that an active node reads or writes.
 * 3. Reverse sweep in double: outputs are seeded with their cotangents; each active
 *    node's VJP adds into its inputs' accumulators; a node's kept outputs and
 *    their cotangents are freed once it has been processed. */
#include "autodiff.h"
#include "vjp.h"
#include <string.h>

typedef struct {
  mg_model *m;
  mg_graph *g;
  char *need;       /* per value id */
  char *keep;       /* per value id: copy the forward value */
  char *active;     /* per node id */
  mg_array *kept;   /* per value id: forward copies */
  double **grad;    /* per value id: cotangent accumulators */
  mg_diags *d;
  int oom;
} ad_state;

static int is_float_tensor(const mg_value *v) { return v && v->vtype == MG_VT_TENSOR && mg_dtype_is_float(v->dtype); }

static int owned_by(const mg_graph *g, const mg_value *v) {
  return v->id >= 0 && v->id < g->n_values && g->values[v->id] == v;
}

/* Whether subgraph s (or its subgraphs) reads a value of top graph g flagged in dep. */
static int captures_dep(const mg_graph *g, const mg_graph *s, const char *dep) {
  for (int i = 0; i < s->n_nodes; i++) {
    const mg_node *n = s->nodes[i];
    for (int k = 0; k < n->n_in; k++)
      if (n->in[k] && owned_by(g, n->in[k]) && dep[n->in[k]->id]) return 1;
    for (int k = 0; k < n->n_attr; k++)
      if (n->attr[k].kind == MG_ATTR_GRAPH && captures_dep(g, n->attr[k].g, dep)) return 1;
  }
  return 0;
}

/* Marks need/keep/active; reports every active node without a VJP. */
static int analyse(ad_state *s) {
  mg_graph *g = s->g;
  char *dep = mg_calloc((size_t)g->n_values + 1, 1), *reach = mg_calloc((size_t)g->n_values + 1, 1);
  if (!dep || !reach) {
    mg_free(dep), mg_free(reach);
    mg_error(s->d, OOM, NULL, NULL, "out of memory");
    return -1;
  }
  for (int i = 0; i < g->n_values; i++) {
    const mg_value *v = g->values[i];
    dep[i] = is_float_tensor(v) && (v->kind == MG_V_INPUT || v->kind == MG_V_INIT);
  }
  for (int i = 0; i < g->n_nodes; i++) {
    const mg_node *n = g->nodes[i];
    int any = 0;
    for (int k = 0; k < n->n_in; k++) any |= n->in[k] && owned_by(g, n->in[k]) && dep[n->in[k]->id];
    for (int k = 0; k < n->n_attr && !any; k++)
      if (n->attr[k].kind == MG_ATTR_GRAPH) any = captures_dep(g, n->attr[k].g, dep);
    for (int k = 0; k < n->n_out; k++)
      if (n->out[k] && is_float_tensor(n->out[k])) dep[n->out[k]->id] = (char)any;
  }
  for (int i = 0; i < g->n_outputs; i++)
    if (is_float_tensor(g->outputs[i])) reach[g->outputs[i]->id] = 1;
  int rc = 0;
  for (int i = g->n_nodes - 1; i >= 0; i--) {
    const mg_node *n = g->nodes[i];
    int act = 0;
    for (int k = 0; k < n->n_out; k++)
      if (n->out[k] && reach[n->out[k]->id] && dep[n->out[k]->id]) act = 1;
    if (!act) continue;
    s->active[i] = 1;
    if (!vjp_for(n->op)) {
      mg_error(s->d, UNSUPPORTED, n->name, n->op_type,
               "no vector-Jacobian product for %s%s%s: node '%s' lies on a path from a parameter or "
               "input to an output",
               *n->domain ? n->domain : "", *n->domain ? "::" : "", n->op_type, n->name);
      rc = -1;
    }
    for (int k = 0; k < n->n_in; k++)
      if (n->in[k] && owned_by(g, n->in[k]) && is_float_tensor(n->in[k])) reach[n->in[k]->id] = 1;
  }
  for (int i = 0; i < g->n_values; i++) s->need[i] = (char)(dep[i] && reach[i]);
  for (int i = 0; i < g->n_nodes; i++) {
    if (!s->active[i]) continue;
    const mg_node *n = g->nodes[i];
    for (int k = 0; k < n->n_in; k++)
      if (n->in[k] && owned_by(g, n->in[k]) && n->in[k]->kind == MG_V_NODE) s->keep[n->in[k]->id] = 1;
    for (int k = 0; k < n->n_out; k++)
      if (n->out[k]) s->keep[n->out[k]->id] = 1;
  }
  mg_free(dep), mg_free(reach);
  return rc;
}

/* The interpreter's observer: copies kept outputs of top-graph nodes. */
static int observe(void *ctx, const mg_node *n, mg_rvalue *const *outs) {
  ad_state *s = ctx;
  if (n->graph != s->g) return 0;
  for (int k = 0; k < n->n_out && k < 64; k++) {
    const mg_value *v = n->out[k];
    if (!v || !s->keep[v->id] || !outs[k] || outs[k]->kind != MG_RV_TENSOR) continue;
    const mg_array *t = &outs[k]->t;
    mg_array *c = &s->kept[v->id];
    *c = *t;
    c->name = NULL;
    c->data = mg_malloc(t->nbytes + 1);
    if (!c->data) {
      memset(c, 0, sizeof *c);
      s->oom = 1;
      return 1;
    }
    memcpy(c->data, t->data, t->nbytes);
  }
  return 0;
}

/* The forward value of v as an array view (graph inputs from the caller, constants
 * from the IR, node outputs from the kept copies); NULL when it has none. */
static const mg_array *value_of(ad_state *s, const mg_value *v, const mg_array *inputs, int n_inputs,
                                mg_array *scratch) {
  if (v->kind == MG_V_INPUT) {
    for (int i = 0; i < n_inputs; i++)
      if (inputs[i].name && !strcmp(inputs[i].name, v->name)) return &inputs[i];
    return NULL;
  }
  if (v->kind == MG_V_NODE) return s->kept[v->id].data || !s->kept[v->id].nbytes ? &s->kept[v->id] : NULL;
  if (!v->data) return NULL;
  memset(scratch, 0, sizeof *scratch);
  scratch->dtype = v->dtype;
  scratch->rank = v->shape.rank;
  for (int i = 0; i < v->shape.rank; i++) scratch->dims[i] = v->shape.d[i].v;
  scratch->data = (void *)v->data;
  scratch->nbytes = v->nbytes;
  return scratch;
}

/* The accumulator of value v (numel elements), allocated zeroed on first use. */
static double *grad_slot(ad_state *s, const mg_value *v, int64_t numel) {
  if (!s->grad[v->id]) {
    s->grad[v->id] = mg_calloc((size_t)numel + 1, sizeof(double));
    if (!s->grad[v->id]) {
      mg_error(s->d, OOM, v->name, NULL, "out of memory");
      return NULL;
    }
  }
  return s->grad[v->id];
}

/* Applies the VJP of active node n. */
static int backward_node(ad_state *s, mg_node *n, const mg_array *inputs, int n_inputs) {
  int ni = n->n_in, no = n->n_out, any = 0;
  for (int k = 0; k < no; k++) any |= n->out[k] && s->grad[n->out[k]->id] != NULL;
  if (!any) return 0;
  const mg_array **x = mg_calloc((size_t)ni + 1, sizeof *x), **y = mg_calloc((size_t)no + 1, sizeof *y);
  const double **gy = mg_calloc((size_t)no + 1, sizeof *gy);
  double **gx = mg_calloc((size_t)ni + 1, sizeof *gx);
  mg_array *scratch = mg_calloc((size_t)ni + 1, sizeof *scratch);
  int rc = 0;
  if (!x || !y || !gy || !gx || !scratch) {
    mg_error(s->d, OOM, n->name, n->op_type, "out of memory");
    rc = -1;
  }
  for (int k = 0; k < ni && !rc; k++) {
    const mg_value *v = n->in[k];
    if (!v) continue;
    x[k] = value_of(s, v, inputs, n_inputs, &scratch[k]);
    if (!x[k]) {
      mg_error(s->d, GRAPH, n->name, n->op_type, "input '%s' has no forward value", v->name);
      rc = -1;
    } else if (owned_by(s->g, v) && s->need[v->id] && !(gx[k] = grad_slot(s, v, it_numel(x[k])))) {
      rc = -1;
    }
  }
  for (int k = 0; k < no && !rc; k++) {
    if (!n->out[k]) continue;
    y[k] = s->kept[n->out[k]->id].data || s->keep[n->out[k]->id] ? &s->kept[n->out[k]->id] : NULL;
    gy[k] = s->grad[n->out[k]->id];
  }
  if (!rc) {
    vjp_args a = {.m = s->m, .n = n, .x = x, .y = y, .gy = gy, .gx = gx, .d = s->d};
    rc = vjp_for(n->op)(&a);
  }
  mg_free(x), mg_free(y), mg_free(gy), mg_free(gx), mg_free(scratch);
  return rc;
}

/* A float64 array named `name` of v's shape, holding g (or zeros when g is NULL). */
static int result_array(mg_array *out, const char *name, const mg_array *shape, const double *g) {
  memset(out, 0, sizeof *out);
  out->dtype = MG_F64;
  out->rank = shape->rank;
  memcpy(out->dims, shape->dims, sizeof out->dims);
  int64_t k = it_numel(shape);
  out->nbytes = sizeof(double) * (size_t)k;
  out->data = mg_calloc((size_t)k + 1, sizeof(double));
  out->name = mg_malloc(strlen(name) + 1);
  if (!out->data || !out->name) return -1;
  strcpy(out->name, name);
  if (g) memcpy(out->data, g, out->nbytes);
  return 0;
}

static void state_free(ad_state *s) {
  for (int i = 0; s->kept && i < s->g->n_values; i++) mg_free(s->kept[i].data);
  for (int i = 0; s->grad && i < s->g->n_values; i++) mg_free(s->grad[i]);
  mg_free(s->kept), mg_free(s->grad), mg_free(s->need), mg_free(s->keep), mg_free(s->active);
}

/* Seeds graph output cotangents (matched by name). */
static int seed(ad_state *s, const mg_array *outs, const mg_array *cot, int n_cot) {
  mg_graph *g = s->g;
  for (int c = 0; c < n_cot; c++) {
    int found = 0;
    for (int i = 0; i < g->n_outputs; i++) {
      const mg_value *v = g->outputs[i];
      if (!cot[c].name || strcmp(cot[c].name, v->name)) continue;
      found = 1;
      int same = cot[c].rank == outs[i].rank;
      for (int d = 0; same && d < outs[i].rank; d++) same = cot[c].dims[d] == outs[i].dims[d];
      if (!same || !mg_dtype_is_float(cot[c].dtype)) {
        mg_error(s->d, USAGE, v->name, NULL, "the cotangent must be float with the output's shape");
        return -1;
      }
      if (!owned_by(g, v) || !s->need[v->id]) break; /* no parameter or input reaches it */
      int64_t k = it_numel(&outs[i]);
      double *acc = grad_slot(s, v, k);
      if (!acc) return -1;
      for (int64_t e = 0; e < k; e++) acc[e] += it_get_f64(&cot[c], e);
      break;
    }
    if (!found) {
      mg_error(s->d, USAGE, cot[c].name ? cot[c].name : "?", NULL, "a cotangent names no graph output");
      return -1;
    }
  }
  return 0;
}

int grad_run(mg_model *m, const mg_array *inputs, int n_inputs, const mg_array *cotangents, int n_cot,
             grad_result *r, mg_diags *d) {
  memset(r, 0, sizeof *r);
  mg_graph *g = m->graph;
  ad_state s = {.m = m, .g = g, .d = d};
  size_t nv = (size_t)g->n_values + 1;
  s.need = mg_calloc(nv, 1), s.keep = mg_calloc(nv, 1), s.active = mg_calloc((size_t)g->n_nodes + 1, 1);
  s.kept = mg_calloc(nv, sizeof *s.kept), s.grad = mg_calloc(nv, sizeof *s.grad);
  if (!s.need || !s.keep || !s.active || !s.kept || !s.grad) {
    state_free(&s);
    mg_error(d, OOM, NULL, NULL, "out of memory");
    return -1;
  }
  int rc = analyse(&s);
  interp_options opt = {.observe = observe, .observe_ctx = &s};
  mg_array *outs = NULL;
  if (!rc && interp_run(m, inputs, n_inputs, &opt, &outs, d)) rc = -1;
  if (s.oom) {
    mg_error(d, OOM, NULL, NULL, "out of memory keeping forward values for the gradient");
    rc = -1;
  }
  if (!rc) rc = seed(&s, outs, cotangents, n_cot);
  for (int i = g->n_nodes - 1; i >= 0 && !rc; i--) {
    if (!s.active[i]) continue;
    mg_node *n = g->nodes[i];
    rc = backward_node(&s, n, inputs, n_inputs);
    for (int k = 0; k < n->n_out; k++) { /* complete: no earlier node reads them */
      if (!n->out[k]) continue;
      mg_free(s.grad[n->out[k]->id]), mg_free(s.kept[n->out[k]->id].data);
      s.grad[n->out[k]->id] = NULL;
      memset(&s.kept[n->out[k]->id], 0, sizeof(mg_array));
    }
  }
  if (!rc) {
    r->outputs = outs, r->n_outputs = g->n_outputs;
    outs = NULL;
    r->inputs = mg_calloc((size_t)g->n_inputs + 1, sizeof(mg_array));
    int np = 0;
    for (int i = 0; i < g->n_inits; i++) np += is_float_tensor(g->inits[i]) && s.need[g->inits[i]->id];
    r->params = mg_calloc((size_t)np + 1, sizeof(mg_array));
    if (!r->inputs || !r->params) rc = -1;
    for (int i = 0; i < g->n_inputs && !rc; i++) {
      const mg_value *v = g->inputs[i];
      r->n_inputs++;
      const mg_array *x = value_of(&s, v, inputs, n_inputs, NULL);
      if (!is_float_tensor(v) || !x) {
        r->inputs[i].name = mg_malloc(strlen(v->name) + 1);
        if (!r->inputs[i].name) rc = -1;
        else strcpy(r->inputs[i].name, v->name);
        continue;
      }
      if (result_array(&r->inputs[i], v->name, x, s.grad[v->id])) rc = -1;
    }
    for (int i = 0; i < g->n_inits && !rc; i++) {
      const mg_value *v = g->inits[i];
      if (!is_float_tensor(v) || !s.need[v->id]) continue;
      mg_array shape = {.rank = v->shape.rank};
      for (int k = 0; k < v->shape.rank; k++) shape.dims[k] = v->shape.d[k].v;
      if (result_array(&r->params[r->n_params++], v->name, &shape, s.grad[v->id])) rc = -1;
    }
    if (rc) {
      mg_error(d, OOM, NULL, NULL, "out of memory");
      grad_result_free(r);
    }
  }
  if (outs) mg_arrays_free(outs, g->n_outputs);
  state_free(&s);
  return rc ? -1 : 0;
}

void grad_result_free(grad_result *r) {
  if (r->inputs) mg_arrays_free(r->inputs, r->n_inputs);
  if (r->params) mg_arrays_free(r->params, r->n_params);
  if (r->outputs) mg_arrays_free(r->outputs, r->n_outputs);
  memset(r, 0, sizeof *r);
}

int grad_supports(mg_op op) { return vjp_for(op) != NULL; }
