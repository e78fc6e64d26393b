/* Shape inference driver and the shape classes shared by many ops; the ops with
 * rules of their own are in infer_ops.c. */
#include "infer.h"
#include "fold.h"
#include "infer_internal.h"
#include <stdio.h>
#include <string.h>

int infer_elems(const mg_value *v, mg_dim *out, int cap) {
  if (!v || v->vtype != MG_VT_TENSOR) return -1;
  if (v->data) {
    if (!mg_dtype_is_int(v->dtype) || v->shape.rank > 1) return -1;
    int64_t tmp[MG_SMALL];
    int64_t n = mg_value_ints(v, tmp, cap < MG_SMALL ? cap : MG_SMALL);
    if (n < 0) return -1;
    for (int64_t i = 0; i < n; i++) out[i] = (mg_dim){tmp[i], NULL};
    return (int)n;
  }
  if (v->elems && v->n_elems <= cap) {
    memcpy(out, v->elems, sizeof(mg_dim) * (size_t)v->n_elems);
    return v->n_elems;
  }
  return -1;
}

int infer_const_ints(const mg_value *v, int64_t *out, int cap) {
  mg_dim d[MG_SMALL];
  int n = infer_elems(v, d, cap < MG_SMALL ? cap : MG_SMALL);
  for (int i = 0; i < n; i++) {
    if (d[i].v == MG_UNKNOWN_ELEM) return -1;
    out[i] = d[i].v;
  }
  return n;
}

mg_dim infer_dim_to_elem(mg_dim d) { return d.v >= 0 ? d : (mg_dim){MG_UNKNOWN_ELEM, d.sym}; }
mg_dim infer_elem_to_dim(mg_dim e) {
  return e.v == MG_UNKNOWN_ELEM ? (mg_dim){-1, e.sym} : e;
}

int infer_set_elems(infer_ctx *c, mg_value *v, const mg_dim *e, int n) {
  if (n < 0 || n > MG_SMALL) return 0;
  v->elems = mg_arena_alloc(&c->m->arena, sizeof(mg_dim) * (size_t)(n ? n : 1));
  if (!v->elems) return c->oom = 1, -1;
  memcpy(v->elems, e, sizeof(mg_dim) * (size_t)n);
  v->n_elems = n;
  return 0;
}

void infer_out(mg_node *n, int i, mg_dtype dt, const mg_shape *s) {
  if (i >= n->n_out || !n->out[i]) return;
  mg_value *v = n->out[i];
  v->dtype = dt;
  v->vtype = MG_VT_TENSOR;
  if (s) v->shape = *s;
  else v->shape.rank = -1;
  /* A dim computed beyond MG_DIM_MAX (hostile attributes or constants) becomes
   * unknown, so later shape arithmetic stays bounded; the run-time check rejects it. */
  for (int k = 0; k < v->shape.rank; k++)
    if (v->shape.d[k].v > MG_DIM_MAX) v->shape.d[k] = (mg_dim){-1, NULL};
}

mg_dim infer_dim_unknown(void) { return (mg_dim){-1, NULL}; }

int infer_dim_eq(mg_dim a, mg_dim b) {
  if (a.v >= 0 || b.v >= 0) return a.v == b.v;
  return a.sym && b.sym && !strcmp(a.sym, b.sym);
}

/* numpy broadcasting of two shapes. Returns -1 on a definite conflict. */
int infer_broadcast(const mg_shape *a, const mg_shape *b, mg_shape *out) {
  if (a->rank < 0 || b->rank < 0) {
    out->rank = -1;
    return 0;
  }
  int r = a->rank > b->rank ? a->rank : b->rank;
  out->rank = r;
  for (int i = 0; i < r; i++) {
    int ia = a->rank - r + i, ib = b->rank - r + i;
    mg_dim da = ia >= 0 ? a->d[ia] : (mg_dim){1, NULL};
    mg_dim db = ib >= 0 ? b->d[ib] : (mg_dim){1, NULL};
    mg_dim o;
    if (da.v == 1) o = db;
    else if (db.v == 1) o = da;
    else if (da.v >= 0 && db.v >= 0) {
      if (da.v != db.v) return -1;
      o = da;
    } else if (da.v >= 0) o = da;
    else if (db.v >= 0) o = db;
    else if (infer_dim_eq(da, db)) o = da;
    else o = infer_dim_unknown();
    out->d[i] = o;
  }
  return 0;
}

int64_t infer_norm_axis(int64_t axis, int rank) { return axis < 0 ? axis + rank : axis; }

static int infer_reduce(infer_ctx *c, mg_node *n) {
  const mg_value *x = n->in[0];
  int keep = (int)mg_attr_int(n, "keepdims", 1);
  int noop = (int)mg_attr_int(n, "noop_with_empty_axes", 0);
  if (x->shape.rank < 0) {
    infer_out(n, 0, x->dtype, NULL);
    return 0;
  }
  int64_t axes[MG_MAX_RANK];
  int na = 0;
  if (n->n_in > 1 && n->in[1]) {
    na = infer_const_ints(n->in[1], axes, MG_MAX_RANK);
    if (na < 0) { /* axes known only at run time */
      mg_shape s = {.rank = keep ? x->shape.rank : -1};
      for (int i = 0; i < s.rank; i++) s.d[i] = infer_dim_unknown();
      infer_out(n, 0, x->dtype, &s);
      return 0;
    }
  }
  int reduce[MG_MAX_RANK] = {0};
  if (na == 0 && !noop)
    for (int i = 0; i < x->shape.rank; i++) reduce[i] = 1;
  for (int i = 0; i < na; i++) {
    int64_t a = infer_norm_axis(axes[i], x->shape.rank);
    if (a < 0 || a >= x->shape.rank) {
      mg_error(c->d, SHAPE, n->name, n->op_type, "axis %lld out of range for rank %d",
               (long long)axes[i], x->shape.rank);
      return -1;
    }
    reduce[a] = 1;
  }
  mg_shape s = {0};
  for (int i = 0; i < x->shape.rank; i++) {
    if (!reduce[i]) s.d[s.rank++] = x->shape.d[i];
    else if (keep) s.d[s.rank++] = (mg_dim){1, NULL};
  }
  infer_out(n, 0, x->dtype, &s);
  return 0;
}

static int infer_class(infer_ctx *c, mg_node *n) {
  const mg_op_info *info = mg_op_get(n->op);
  mg_value *x = n->in[0];
  switch (info->shape_rule) {
  case MG_SH_UNARY:
    infer_out(n, 0, x->dtype, &x->shape);
    if (n->op == MG_OP_Identity && x->elems) return infer_set_elems(c, n->out[0], x->elems, x->n_elems);
    return 0;
  case MG_SH_PREDICATE:
    infer_out(n, 0, MG_BOOL, &x->shape);
    return 0;
  case MG_SH_BINARY:
  case MG_SH_COMPARE: {
    mg_shape s = x->shape;
    for (int i = 1; i < n->n_in; i++) {
      if (!n->in[i]) continue;
      mg_shape t;
      if (infer_broadcast(&s, &n->in[i]->shape, &t)) {
        char a[128], b[128];
        mg_error(c->d, SHAPE, n->name, n->op_type, "cannot broadcast %s with %s",
                 mg_shape_str(&s, a, sizeof a), mg_shape_str(&n->in[i]->shape, b, sizeof b));
        return -1;
      }
      s = t;
    }
    infer_out(n, 0, info->shape_rule == MG_SH_COMPARE ? MG_BOOL : x->dtype, &s);
    return infer_binary_elems(c, n);
  }
  case MG_SH_REDUCE:
    return infer_reduce(c, n);
  case MG_SH_GLOBAL_POOL: {
    mg_shape s = x->shape;
    for (int i = 2; i < s.rank; i++) s.d[i] = (mg_dim){1, NULL};
    infer_out(n, 0, x->dtype, &s);
    return 0;
  }
  case MG_SH_OWN:
    return infer_own(c, n);
  }
  return 0;
}

static int all_inputs_constant(const mg_node *n) {
  if (n->op == MG_OP_Shape || n->op == MG_OP_Size)
    return n->in[0] && mg_shape_is_static(&n->in[0]->shape);
  int any = 0, float_param = 0, float_out = 0;
  for (int i = 0; i < n->n_in; i++) {
    if (!n->in[i]) continue;
    if (!n->in[i]->data || n->in[i]->vtype != MG_VT_TENSOR) return 0;
    float_param |= n->in[i]->kind == MG_V_INIT && mg_dtype_is_float(n->in[i]->dtype);
    any = 1;
  }
  for (int i = 0; i < n->n_out; i++) float_out |= n->out[i] && mg_dtype_is_float(n->out[i]->dtype);
  /* A parameter's float path must stay a node when gradients are wanted. */
  if (float_param && float_out && n->graph->model->keep_param_paths) return 0;
  return any || n->op == MG_OP_Range;
}

/* Where inference leaves dims unknown because they depend on run-time values (a
 * shape fed as a graph input, a data-dependent size) and the model declares a
 * static shape that agrees with everything inferred, the declared dims are
 * taken, and the value is marked shape_declared: consumers that must not rely on
 * a promise (code generation for shape operands) check the mark. */
static void adopt_declared_dims(mg_value *v) {
  if (!v || !v->has_decl || v->vtype != MG_VT_TENSOR || v->decl_shape.rank < 0 ||
      !mg_shape_is_static(&v->decl_shape) || mg_shape_is_static(&v->shape))
    return;
  if (v->shape.rank >= 0 && v->shape.rank != v->decl_shape.rank) return;
  for (int d = 0; v->shape.rank >= 0 && d < v->shape.rank; d++)
    if (v->shape.d[d].v >= 0 && v->shape.d[d].v != v->decl_shape.d[d].v) return;
  if (v->decl_dtype != MG_UNDEFINED && v->dtype != MG_UNDEFINED && v->decl_dtype != v->dtype) return;
  v->shape = v->decl_shape;
  v->shape_declared = 1;
}

/* Whether the known dims of v's shape multiply to at most MG_NUMEL_MAX elements;
 * records a LIMIT error naming v and the node that made it otherwise. Every later
 * product of dims (planners, emitters, kernels) relies on this bound. */
static int numel_fits(infer_ctx *c, const mg_value *v, const mg_node *n) {
  int64_t p = 1;
  if (!v || v->shape.rank < 0) return 1;
  for (int i = 0; i < v->shape.rank; i++)
    if (v->shape.d[i].v >= 0 && (!mg_mul_i64(p, v->shape.d[i].v, &p) || p > MG_NUMEL_MAX)) {
      char buf[256];
      mg_error(c->d, LIMIT, n ? n->name : v->name, n ? n->op_type : NULL,
               "%s%s has shape %s: more than 2^59 elements", n ? "output " : "", v->name,
               mg_shape_str(&v->shape, buf, sizeof buf));
      return 0;
    }
  return 1;
}

int infer_node(infer_ctx *c, mg_node *n) {
  if (n->op == MG_OP_UNKNOWN) {
    for (int i = 0; i < n->n_out; i++)
      if (n->out[i] && n->out[i]->has_decl) {
        n->out[i]->dtype = n->out[i]->decl_dtype;
        n->out[i]->shape = n->out[i]->decl_shape;
      }
    return 0;
  }
  /* Loop's M and cond are the only required-position inputs ONNX lets be empty. */
  for (int i = 0; i < mg_op_get(n->op)->min_in && i < n->n_in; i++)
    if (!n->in[i] && n->op != MG_OP_Loop) {
      mg_error(c->d, INVALID, n->name, n->op_type, "required input %d is missing", i);
      return -1;
    }
  if (infer_class(c, n)) return -1;
  if (!n->graph->model->derive_shapes_only)
    for (int i = 0; i < n->n_out; i++) adopt_declared_dims(n->out[i]);
  if (c->oom) return -1;
  for (int i = 0; i < n->n_out; i++)
    if (!numel_fits(c, n->out[i], n)) return -1;
  if (n->n_out >= 1 && n->out[0] && !n->out[0]->data && fold_supports(n->op) &&
      all_inputs_constant(n)) {
    int r = fold_node(n);
    if (r < 0) return c->oom = 1, -1;
  }
  return 0;
}

int infer_graph(infer_ctx *c, mg_graph *g) {
  int rc = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    if (infer_node(c, g->nodes[i])) rc = -1;
    if (c->oom) return -1;
  }
  return rc;
}

static int infer_shapes(mg_model *m, const mg_shape_override *ov, int n_ov, mg_diags *d);

/* Shape inference's problems are the model's: recorded against its file unless the
 * caller named another. */
int ir_infer_shapes(mg_model *m, const mg_shape_override *ov, int n_ov, mg_diags *d) {
  const char *saved = d->file;
  if (!d->file && m->path) d->file = m->path;
  int rc = infer_shapes(m, ov, n_ov, d);
  d->file = saved;
  return rc;
}

static int infer_shapes(mg_model *m, const mg_shape_override *ov, int n_ov, mg_diags *d) {
  infer_ctx c = {.m = m, .d = d};
  mg_graph *g = m->graph;
  for (int i = 0; i < n_ov; i++) {
    mg_value *v = mg_graph_find_local(g, ov[i].name);
    if (!v || v->kind != MG_V_INPUT) {
      mg_error(d, USAGE, ov[i].name, NULL, "--input-shape names no graph input");
      return -1;
    }
    if (v->shape.rank >= 0 && v->shape.rank != ov[i].shape.rank) {
      char a[128], b[128];
      mg_error(d, USAGE, ov[i].name, NULL, "--input-shape %s has another rank than the model's %s",
               mg_shape_str(&ov[i].shape, a, sizeof a), mg_shape_str(&v->shape, b, sizeof b));
      return -1;
    }
    for (int k = 0; k < v->shape.rank; k++)
      if (v->shape.d[k].v >= 0 && v->shape.d[k].v != ov[i].shape.d[k].v)
        mg_warn(d, SHAPE, ov[i].name, NULL, "--input-shape changes fixed dim %d from %lld to %lld",
                k, (long long)v->shape.d[k].v, (long long)ov[i].shape.d[k].v);
    v->shape = ov[i].shape;
  }
  for (int i = 0; i < g->n_inputs; i++)
    if (!numel_fits(&c, g->inputs[i], NULL)) return -1;
  int rc = infer_graph(&c, g);
  if (c.oom) {
    mg_error(d, OOM, NULL, NULL, "out of memory during shape inference");
    return -1;
  }
  return rc;
}
