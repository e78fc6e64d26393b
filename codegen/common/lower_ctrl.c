/* Lowering of static control flow: If and Scan become straight-line tensor ops.
 *
 *  - If with a constant condition is replaced by the taken branch, inlined.
 *  - If with a run-time condition, when both branches give tensors of the same
 *    dtype and static shape, inlines both and selects with Where (branches have
 *    no side effects, so computing both is only a cost); when their shapes differ
 *    or are known only at run time, it selects with MigcSelect (ops.def).
 *  - Scan (opset >= 9) with a static scan length is unrolled: each scan input is
 *    split into slices, the body inlined once per iteration with the state
 *    threaded through, and the per-iteration outputs stacked with Concat.
 * Bodies holding nested subgraphs or unknown ops are left alone, and the driver
 * reports the node. */
#include "lower.h"
#include "rewrite.h"
#include "infer.h"
#include "passes.h"
#include <string.h>

typedef struct inliner {
  mg_rw *w;
  const mg_graph *body;
  mg_value **map; /* by body value id: its value in the outer graph */
  struct inliner *parent; /* the body this one is nested in (a nested If), or NULL */
} inliner;

static int inlinable(const mg_graph *body);

/* Whether n is an If whose two branches can be inlined (nested Ifs included). */
static int inlinable_if(const mg_node *n) {
  const mg_attr *ta = mg_node_attr(n, "then_branch"), *ea = mg_node_attr(n, "else_branch");
  return n->op == MG_OP_If && ta && ea && ta->g && ea->g && inlinable(ta->g) && inlinable(ea->g);
}

/* Whether body can be inlined: no nested graphs but Ifs that can be, no unknown
 * ops, typed outputs. */
static int inlinable(const mg_graph *body) {
  for (int i = 0; i < body->n_nodes; i++) {
    const mg_node *n = body->nodes[i];
    if (n->op == MG_OP_UNKNOWN) return 0;
    if (n->op == MG_OP_If && inlinable_if(n)) continue;
    for (int a = 0; a < n->n_attr; a++)
      if (n->attr[a].kind == MG_ATTR_GRAPH) return 0;
    for (int k = 0; k < n->n_out; k++)
      if (n->out[k] && n->out[k]->vtype != MG_VT_TENSOR) return 0;
  }
  for (int k = 0; k < body->n_outputs; k++)
    if (body->outputs[k]->vtype != MG_VT_TENSOR) return 0;
  return 1;
}

/* v's value in the outer graph: body values through the map (body constants are
 * copied out), values of an enclosing body through its inliner, outer values as
 * they are. */
static mg_value *outer(inliner *c, mg_value *v) {
  if (!v) return NULL;
  if (v->id < 0 || v->id >= c->body->n_values || c->body->values[v->id] != v)
    return c->parent ? outer(c->parent, v) : v;
  if (!c->map[v->id] && v->data)
    c->map[v->id] = mg_rw_const(c->w, v->name, v->dtype, &v->shape, v->data, v->nbytes);
  if (!c->map[v->id]) c->w->failed = 1;
  return c->map[v->id];
}

static int lower_if_in(mg_rw *w, mg_node *n, inliner *parent, mg_value *cond, mg_value **outs);

/* Inlines body with its inputs bound to in[]; fills res[] with the values of its
 * outputs. parent: the inliner of the body this one is nested in, or NULL. 0, or
 * -1 (w->failed set). */
static int inline_body(mg_rw *w, const mg_graph *body, mg_value *const *in, mg_value **res, inliner *parent) {
  inliner c = {w, body, mg_calloc((size_t)body->n_values + 1, sizeof(mg_value *)), parent};
  if (!c.map) {
    w->failed = 1;
    return -1;
  }
  int nested_failed = 0; /* a nested If that could not be lowered: the whole body is left alone */
  for (int i = 0; i < body->n_inputs; i++) c.map[body->inputs[i]->id] = in[i];
  for (int i = 0; i < body->n_nodes && !w->failed; i++) {
    const mg_node *n = body->nodes[i];
    mg_value *ins[64], *outs[64];
    if (n->n_in > 64 || n->n_out > 64) {
      w->failed = 1;
      break;
    }
    for (int k = 0; k < n->n_in; k++) ins[k] = outer(&c, n->in[k]);
    int n_out = 0;
    for (int k = 0; k < n->n_out; k++) {
      mg_value *o = n->out[k];
      outs[k] = o ? mg_rw_value(w, o->name, o->dtype, &o->shape) : NULL;
      if (o && outs[k]) c.map[o->id] = outs[k];
      n_out++;
    }
    if (n->op == MG_OP_If && inlinable_if(n)) { /* a nested If, lowered in place */
      if (!lower_if_in(w, (mg_node *)n, &c, ins[0], outs)) nested_failed = 1;
      if (nested_failed) break;
      continue;
    }
    /* mg_rw_node rejects NULL entries, so omitted inputs/outputs are patched in after */
    mg_value *dummy_in[64], *dummy_out[64], *any = NULL;
    for (int k = 0; k < n_out && !any; k++) any = outs[k];
    if (!any) continue; /* no outputs: nothing can read it */
    for (int k = 0; k < n->n_in; k++) dummy_in[k] = ins[k] ? ins[k] : any;
    for (int k = 0; k < n_out; k++) dummy_out[k] = outs[k] ? outs[k] : any;
    mg_node *m = mg_rw_node(w, n->op, n->name, n->n_in, dummy_in, n_out, dummy_out);
    if (!m) break;
    for (int k = 0; k < n->n_in; k++) m->in[k] = ins[k];
    for (int k = 0; k < n_out; k++) {
      m->out[k] = outs[k];
      if (outs[k]) outs[k]->producer_slot = k;
    }
    m->op_type = n->op_type;
    m->domain = n->domain;
    m->opset = n->opset;
    m->synthetic = n->synthetic;
    m->attr = n->attr;
    m->n_attr = n->n_attr;
  }
  for (int k = 0; k < body->n_outputs && !w->failed && !nested_failed; k++) res[k] = outer(&c, body->outputs[k]);
  mg_free(c.map);
  return w->failed || nested_failed ? -1 : 0;
}

/* If: 1 lowered, 0 left alone. */
static int lower_if(mg_rw *w, mg_node *n) { return lower_if_in(w, n, NULL, n->in[0], n->out); }

/* If n (nested in parent's body when parent is not NULL) with its condition and
 * outputs as values of the graph being rewritten: 1 lowered, 0 left alone. */
static int lower_if_in(mg_rw *w, mg_node *n, inliner *parent, mg_value *cond, mg_value **outs) {
  const mg_attr *ta = mg_node_attr(n, "then_branch"), *ea = mg_node_attr(n, "else_branch");
  if (!ta || !ea || !ta->g || !ea->g || !cond || cond->vtype != MG_VT_TENSOR) return 0;
  const mg_graph *tb = ta->g, *eb = ea->g;
  if (tb->n_inputs || eb->n_inputs || tb->n_outputs != n->n_out || eb->n_outputs != n->n_out) return 0;
  if (!inlinable(tb) || !inlinable(eb) || n->n_out > 64) return 0;
  mg_value *tr[64], *er[64];
  int64_t c;
  if (cond->data && mg_value_ints(cond, &c, 1) == 1) {
    if (inline_body(w, c ? tb : eb, NULL, tr, parent)) return 0;
    for (int k = 0; k < n->n_out; k++)
      if (outs[k]) mg_rw_node(w, MG_OP_Identity, n->name, 1, &tr[k], 1, &outs[k]);
    return 1;
  }
  if (cond->dtype != MG_BOOL || mg_shape_numel(&cond->shape) != 1) return 0;
  int same = 1;
  for (int k = 0; k < n->n_out; k++) {
    const mg_value *t = tb->outputs[k], *e = eb->outputs[k];
    if (t->dtype != e->dtype || t->vtype != MG_VT_TENSOR || e->vtype != MG_VT_TENSOR) return 0;
    if (!mg_rw_same_shape(&t->shape, &e->shape) || !mg_shape_is_static(&t->shape) ||
        cond->shape.rank > t->shape.rank)
      same = 0;
    if (!outs[k]) return 0;
  }
  if (inline_body(w, tb, NULL, tr, parent) || inline_body(w, eb, NULL, er, parent)) return 0;
  if (!same) {
    /* branches of different (or run-time) shapes: a MigcSelect, whose output has a
     * run-time length that codegen/c/cg_dynamic.c plans at the larger branch */
    mg_value *in[129];
    if (n->n_out > 64) return 0;
    in[0] = cond;
    for (int k = 0; k < n->n_out; k++) in[1 + k] = tr[k], in[1 + n->n_out + k] = er[k];
    mg_rw_node(w, MG_OP_MigcSelect, n->name, 1 + 2 * n->n_out, in, n->n_out, outs);
    return 1;
  }
  for (int k = 0; k < n->n_out; k++) {
    if (!outs[k]) continue;
    mg_value *in[3] = {cond, tr[k], er[k]};
    mg_rw_node(w, MG_OP_Where, n->name, 3, in, 1, &outs[k]);
  }
  return 1;
}

/* shape s without axis ax */
static mg_shape drop_axis(const mg_shape *s, int ax) {
  mg_shape r = *s;
  for (int i = ax; i + 1 < s->rank; i++) r.d[i] = s->d[i + 1];
  r.rank--;
  return r;
}

/* Scan (opset >= 9): 1 lowered, 0 left alone. */
static int lower_scan(mg_rw *w, mg_node *n) {
  const mg_attr *ba = mg_node_attr(n, "body");
  if (!ba || !ba->g || n->opset < 9) return 0;
  const mg_graph *body = ba->g;
  int M = (int)mg_attr_int(n, "num_scan_inputs", 0), N = n->n_in - M, K = n->n_out - N;
  if (M < 1 || N < 0 || K < 0 || body->n_inputs != N + M || body->n_outputs != N + K || n->n_in > 64 ||
      n->n_out > 64 || !inlinable(body))
    return 0;
  const int64_t *in_axes = NULL, *in_dirs = NULL, *out_axes = NULL, *out_dirs = NULL;
  size_t n_ia = mg_attr_ints(n, "scan_input_axes", &in_axes), n_id = mg_attr_ints(n, "scan_input_directions", &in_dirs);
  size_t n_oa = mg_attr_ints(n, "scan_output_axes", &out_axes), n_od = mg_attr_ints(n, "scan_output_directions", &out_dirs);
  if ((n_ia && (int)n_ia != M) || (n_id && (int)n_id != M) || (n_oa && (int)n_oa != K) || (n_od && (int)n_od != K)) return 0;
  int64_t T = -1;
  int axis_of[64];
  for (int j = 0; j < M; j++) {
    const mg_value *x = n->in[N + j];
    if (!x || !mg_shape_is_static(&x->shape) || x->shape.rank < 1) return 0;
    int64_t ax = n_ia ? in_axes[j] : 0;
    if (ax < 0) ax += x->shape.rank;
    if (ax < 0 || ax >= x->shape.rank) return 0;
    axis_of[j] = (int)ax;
    if (T >= 0 && x->shape.d[ax].v != T) return 0;
    T = x->shape.d[ax].v;
  }
  for (int k = 0; k < K; k++) {
    const mg_value *o = n->out[N + k];
    if (!o || !mg_shape_is_static(&o->shape)) return 0;
  }
  if (T < 1 || T > 1024) return 0;
  for (int i = 0; i < N; i++)
    if (!n->in[i]) return 0;
  /* slices[j][t]: scan input j at position t, scan axis removed */
  mg_value **slices = mg_arena_alloc(&w->m->arena, sizeof(mg_value *) * (size_t)(M * T + K * T + 1));
  if (!slices) {
    w->failed = 1;
    return 0;
  }
  mg_value **outs_t = slices + M * T; /* [k * T + t] */
  for (int j = 0; j < M; j++) {
    mg_value *x = n->in[N + j];
    int ax = axis_of[j];
    int64_t *ones = mg_arena_alloc(&w->m->arena, sizeof(int64_t) * (size_t)T), ax64 = ax;
    if (!ones) {
      w->failed = 1;
      return 0;
    }
    mg_value *pieces[1024];
    mg_shape ps = x->shape;
    ps.d[ax].v = 1;
    for (int64_t t = 0; t < T; t++) {
      ones[t] = 1;
      pieces[t] = mg_rw_value(w, x->name, x->dtype, &ps);
    }
    mg_value *split_in[2] = {x, mg_rw_const_i64(w, "scan_split", ones, (int)T, 1)};
    mg_node *sp = mg_rw_node(w, MG_OP_Split, n->name, 2, split_in, (int)T, pieces);
    mg_rw_attr_int(w, sp, "axis", ax);
    mg_value *axv = mg_rw_const_i64(w, "scan_axes", &ax64, 1, 1);
    mg_shape ss = drop_axis(&x->shape, ax);
    for (int64_t t = 0; t < T; t++) {
      mg_value *sq = mg_rw_value(w, x->name, x->dtype, &ss), *sq_in[2] = {pieces[t], axv};
      mg_rw_node(w, MG_OP_Squeeze, n->name, 2, sq_in, 1, &sq);
      int64_t pos = n_id && in_dirs[j] ? T - 1 - t : t;
      slices[j * T + pos] = sq;
    }
  }
  mg_value *state[64], *bin[64], *res[64];
  for (int i = 0; i < N; i++) state[i] = n->in[i];
  for (int64_t t = 0; t < T && !w->failed; t++) {
    for (int i = 0; i < N; i++) bin[i] = state[i];
    for (int j = 0; j < M; j++) bin[N + j] = slices[j * T + t];
    if (inline_body(w, body, bin, res, NULL)) return 0;
    for (int i = 0; i < N; i++) state[i] = res[i];
    for (int k = 0; k < K; k++) outs_t[k * T + t] = res[N + k];
  }
  for (int i = 0; i < N; i++)
    if (n->out[i]) mg_rw_node(w, MG_OP_Identity, n->name, 1, &state[i], 1, &n->out[i]);
  for (int k = 0; k < K; k++) {
    mg_value *o = n->out[N + k];
    int64_t ax = n_oa ? out_axes[k] : 0;
    if (ax < 0) ax += o->shape.rank;
    mg_value *axv = mg_rw_const_i64(w, "scan_axes", &ax, 1, 1), *parts[1024];
    for (int64_t t = 0; t < T; t++) {
      mg_value *e = outs_t[k * T + (n_od && out_dirs[k] ? T - 1 - t : t)];
      mg_shape us = o->shape;
      us.d[ax].v = 1;
      mg_value *u = mg_rw_value(w, o->name, e->dtype, &us), *u_in[2] = {e, axv};
      mg_rw_node(w, MG_OP_Unsqueeze, n->name, 2, u_in, 1, &u);
      parts[t] = u;
    }
    mg_node *cat = mg_rw_node(w, MG_OP_Concat, n->name, (int)T, parts, 1, &n->out[N + k]);
    mg_rw_attr_int(w, cat, "axis", ax);
  }
  return !w->failed;
}

int cg_lower_control(mg_model *m, mg_diags *d, int *changed) {
  mg_graph *g = m->graph;
  int any = 0;
  for (int i = 0; i < g->n_nodes; i++) any |= g->nodes[i]->op == MG_OP_If || g->nodes[i]->op == MG_OP_Scan;
  if (!any) return 0;
  mg_rw w;
  mg_rw_begin(&w, m, g);
  int n_nodes = g->n_nodes;
  mg_node **orig = mg_malloc(sizeof *orig * (size_t)(n_nodes + 1));
  if (!orig) goto oom;
  memcpy(orig, g->nodes, sizeof *orig * (size_t)n_nodes);
  for (int i = 0; i < n_nodes && !w.failed; i++) {
    mg_node *n = orig[i];
    int done = 0, before = w.n, changed_before = w.changed;
    if (n->op == MG_OP_If) done = lower_if(&w, n);
    else if (n->op == MG_OP_Scan) done = lower_scan(&w, n);
    if (!done && !w.failed) { /* drop anything a failed attempt appended */
      w.n = before;
      w.changed = changed_before;
      mg_rw_keep(&w, n);
    }
  }
  mg_free(orig);
  if (mg_rw_end(&w)) goto oom;
  *changed += w.changed;
  if (!w.changed) return 0;
  if (pass_dce(m) < 0) goto oom;
  if (ir_infer_shapes(m, NULL, 0, d)) return -1;
  if (pass_fold_constants(m) < 0 || pass_dce(m) < 0) goto oom;
  return 0;
oom:
  mg_error(d, OOM, NULL, NULL, "out of memory lowering control flow");
  return -1;
}
