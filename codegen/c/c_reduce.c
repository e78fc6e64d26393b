/* Emitters for the reductions and one-axis normalisations of the tensor family
 * (runtime/reduce.c): Reduce*, ArgMax/ArgMin, CumSum, Softmax/LogSoftmax/Hardmax,
 * LpNormalization, MeanVarianceNormalization.
 *
 * The emitter views the input as [outer, n, inner] whenever the reduced axes are
 * contiguous once size-1 dims are ignored (float32 then takes the fast kernels);
 * otherwise it passes kept and reduced dims with their strides to the generic
 * kernels. Axes inputs must be constants. */
#include "cg.h"

#include <string.h>

/* Normalises axis against rank into *out; -1 after cg_unsupported. */
static int norm_axis(cg_ctx *c, const mg_node *n, int64_t axis, int rank, int *out) {
  if (axis < -rank || axis >= rank)
    return cg_unsupported(c, n, "axis %lld out of range for rank %d", (long long)axis, rank);
  *out = (int)(axis < 0 ? axis + rank : axis);
  return 0;
}

static int64_t prod(const int64_t *d, int from, int to) {
  int64_t p = 1;
  for (int i = from; i < to; i++) p *= d[i];
  return p;
}

/* x = input 0 and y = output 0 with a runtime dtype; their dims into xd/yd. */
static int io_check(cg_ctx *c, const mg_node *n, int64_t *xd, int *xr) {
  const mg_value *x = n->in[0], *y = n->out[0];
  if (!x || !y) return cg_unsupported(c, n, "missing input or output");
  if (!cg_rt_dtype(x->dtype)) return cg_unsupported(c, n, "dtype %s", mg_dtype_name(x->dtype));
  *xr = cg_dims(x, xd);
  return 0;
}

/* The layout of a reduction over the axes flagged in red: either contiguous
 * [outer, n, inner] (returns 1) or kept/reduced dims with strides (returns 0),
 * size-1 dims dropped and neighbours merged. */
typedef struct {
  int64_t outer, n, inner;
  int nk, nr;
  int64_t ks[MG_MAX_RANK], kst[MG_MAX_RANK], rs[MG_MAX_RANK], rst[MG_MAX_RANK];
} layout;

static int plan(int rank, const int64_t *xd, const int *red, layout *l) {
  int64_t st[MG_MAX_RANK], s = 1;
  int first = -1, last = -1, contiguous = 1;
  for (int d = rank - 1; d >= 0; d--) st[d] = s, s *= xd[d];
  memset(l, 0, sizeof *l);
  for (int d = 0; d < rank; d++)
    if (red[d] && xd[d] != 1) {
      if (first < 0) first = d;
      last = d;
    }
  for (int d = first; first >= 0 && d <= last; d++)
    if (!red[d] && xd[d] != 1) contiguous = 0;
  if (first < 0) first = last = rank; /* nothing (but size-1 dims) reduced: n = 1 */
  l->outer = prod(xd, 0, first);
  l->n = first < rank ? prod(xd, first, last + 1) : 1;
  l->inner = prod(xd, last + 1, rank);
  for (int d = 0; d < rank; d++) {
    if (xd[d] == 1) continue;
    int64_t *sh = red[d] ? l->rs : l->ks, *sd = red[d] ? l->rst : l->kst;
    int *cnt = red[d] ? &l->nr : &l->nk;
    if (*cnt > 0 && sd[*cnt - 1] == st[d] * xd[d]) { /* merge with the previous kept/reduced dim */
      sh[*cnt - 1] *= xd[d], sd[*cnt - 1] = st[d];
      continue;
    }
    sh[*cnt] = xd[d], sd[*cnt] = st[d];
    (*cnt)++;
  }
  return contiguous;
}

/* A static int64 array expression for n dims (n may be 0). */
static const char *dims_expr(cg_ctx *c, const int64_t *v, int n) { return cg_i64s(c, v, n); }

/* Reduce*: axes from the optional constant input 1, keepdims (layout only) and
 * noop_with_empty_axes. */
static int reduce(cg_ctx *c, const mg_node *n, const char *op) {
  int64_t xd[MG_MAX_RANK], axes[MG_MAX_RANK];
  int xr, na = 0, red[MG_MAX_RANK] = {0};
  if (io_check(c, n, xd, &xr)) return -1;
  const mg_value *x = n->in[0], *y = n->out[0], *ax = n->n_in > 1 ? n->in[1] : NULL;
  if (y->dtype != x->dtype) return cg_unsupported(c, n, "output dtype differs");
  if (ax) {
    int64_t k = cg_const_ints(ax, axes, MG_MAX_RANK);
    if (k < 0) return cg_unsupported(c, n, "axes must be a constant");
    na = (int)k;
  }
  if (na == 0 && !mg_attr_int(n, "noop_with_empty_axes", 0))
    for (int d = 0; d < xr; d++) red[d] = 1;
  for (int i = 0; i < na; i++) {
    int a = 0;
    if (norm_axis(c, n, axes[i], xr, &a)) return -1;
    if (red[a]++) return cg_unsupported(c, n, "axis %lld repeated", (long long)axes[i]);
  }
  /* keepdims changes only the output's dims, not its element order: check them */
  int keep = mg_attr_int(n, "keepdims", 1) != 0, orank = 0;
  int64_t od[MG_MAX_RANK], yd[MG_MAX_RANK];
  for (int d = 0; d < xr; d++)
    if (!red[d]) od[orank++] = xd[d];
    else if (keep) od[orank++] = 1;
  if (cg_dims(y, yd) != orank || memcmp(od, yd, sizeof(int64_t) * (size_t)orank))
    return cg_unsupported(c, n, "output shape disagrees with axes/keepdims");
  if (cg_numel(y) == 0) return 0;
  layout l;
  int contiguous = plan(xr, xd, red, &l);
  cg_need(c, "reduce.c");
  cg_need(c, "tensor.c");
  if (x->dtype == MG_F32 && contiguous) {
    cg_kernel(c, 0, "mg_reduce_f32", "%s, %lld, %lld, %lld, %s, %s", op, (long long)l.outer, (long long)l.n,
            (long long)l.inner, cg_in(c, x), cg_out(c, y));
    return 0;
  }
  cg_line(c, "mg_reduce(%s, %s, %d, %s, %s, %d, %s, %s, %s, %s);", cg_rt_dtype(x->dtype), op, l.nk,
          dims_expr(c, l.ks, l.nk), dims_expr(c, l.kst, l.nk), l.nr, dims_expr(c, l.rs, l.nr),
          dims_expr(c, l.rst, l.nr), cg_vin(c, x), cg_vout(c, y));
  return 0;
}

int cg_emit_ReduceL1(cg_ctx *c, const mg_node *n) { return reduce(c, n, "MG_REDUCE_L1"); }
int cg_emit_ReduceL2(cg_ctx *c, const mg_node *n) { return reduce(c, n, "MG_REDUCE_L2"); }
int cg_emit_ReduceLogSum(cg_ctx *c, const mg_node *n) { return reduce(c, n, "MG_REDUCE_LOG_SUM"); }
int cg_emit_ReduceLogSumExp(cg_ctx *c, const mg_node *n) { return reduce(c, n, "MG_REDUCE_LOG_SUM_EXP"); }
int cg_emit_ReduceMax(cg_ctx *c, const mg_node *n) { return reduce(c, n, "MG_REDUCE_MAX"); }
int cg_emit_ReduceMean(cg_ctx *c, const mg_node *n) { return reduce(c, n, "MG_REDUCE_MEAN"); }
int cg_emit_ReduceMin(cg_ctx *c, const mg_node *n) { return reduce(c, n, "MG_REDUCE_MIN"); }
int cg_emit_ReduceProd(cg_ctx *c, const mg_node *n) { return reduce(c, n, "MG_REDUCE_PROD"); }
int cg_emit_ReduceSum(cg_ctx *c, const mg_node *n) { return reduce(c, n, "MG_REDUCE_SUM"); }
int cg_emit_ReduceSumSquare(cg_ctx *c, const mg_node *n) { return reduce(c, n, "MG_REDUCE_SUM_SQUARE"); }

/* The [outer, n, inner] split of input 0 at attribute `axis` (default dflt); rank 0
 * counts as rank 1. */
static int axis_split(cg_ctx *c, const mg_node *n, int64_t axis, int64_t *outer, int64_t *len,
                      int64_t *inner) {
  int64_t xd[MG_MAX_RANK];
  int xr, a = 0;
  if (io_check(c, n, xd, &xr)) return -1;
  if (xr == 0) xd[0] = 1, xr = 1;
  if (norm_axis(c, n, axis, xr, &a)) return -1;
  *outer = prod(xd, 0, a), *len = xd[a], *inner = prod(xd, a + 1, xr);
  return 0;
}

/* ArgMax / ArgMin: axis, keepdims (layout only), select_last_index. */
static int arg_extreme(cg_ctx *c, const mg_node *n, int is_min) {
  int64_t outer, len, inner;
  if (axis_split(c, n, mg_attr_int(n, "axis", 0), &outer, &len, &inner)) return -1;
  const mg_value *y = n->out[0];
  if (y->dtype != MG_I64) return cg_unsupported(c, n, "output dtype %s", mg_dtype_name(y->dtype));
  if (cg_numel(y) != outer * inner) return cg_unsupported(c, n, "output size disagrees");
  if (cg_numel(y) == 0) return 0;
  if (len == 0) return cg_unsupported(c, n, "%s of an empty axis", n->op_type);
  (void)mg_attr_int(n, "keepdims", 1); /* only the output's dims, checked by size above */
  cg_need(c, "reduce.c");
  cg_need(c, "tensor.c");
  cg_line(c, "mg_argextreme(%s, %d, %d, %lld, %lld, %lld, %s, %s);", cg_rt_dtype(n->in[0]->dtype),
          is_min, mg_attr_int(n, "select_last_index", 0) != 0, (long long)outer, (long long)len,
          (long long)inner, cg_vin(c, n->in[0]), cg_out(c, y));
  return 0;
}

int cg_emit_ArgMax(cg_ctx *c, const mg_node *n) { return arg_extreme(c, n, 0); }
int cg_emit_ArgMin(cg_ctx *c, const mg_node *n) { return arg_extreme(c, n, 1); }

/* CumSum: exclusive, reverse; axis (input 1) a constant, or read at run time
 * (then the kernel splits the static dims itself). In place. */
int cg_emit_CumSum(cg_ctx *c, const mg_node *n) {
  int64_t axis = 0, outer, len, inner, xd[MG_MAX_RANK];
  const mg_value *av = n->in[1];
  if (!n->in[0] || cg_dims(n->in[0], xd) == 0) return cg_unsupported(c, n, "input must have rank >= 1");
  if (!av || cg_numel(av) != 1 || (av->dtype != MG_I32 && av->dtype != MG_I64))
    return cg_unsupported(c, n, "axis must be one int32/int64 value");
  int ex = mg_attr_int(n, "exclusive", 0) != 0, rev = mg_attr_int(n, "reverse", 0) != 0;
  if (!cg_is_const(av)) {
    int xr;
    if (io_check(c, n, xd, &xr)) return -1;
    if (cg_numel(n->in[0]) == 0) return 0;
    cg_need(c, "reduce.c");
    cg_need(c, "tensor.c");
    cg_line(c, "mg_cumsum_axis(%s, %d, %d, %d, %s, mg_tensor_load_i64(%s, %s, 0), %s, %s);",
            cg_rt_dtype(n->in[0]->dtype), ex, rev, xr, cg_i64s(c, xd, xr), cg_rt_dtype(av->dtype),
            cg_vin(c, av), cg_vin(c, n->in[0]), cg_vout(c, n->out[0]));
    return 0;
  }
  if (cg_const_ints(av, &axis, 1) != 1) return cg_unsupported(c, n, "cannot read axis");
  if (axis_split(c, n, axis, &outer, &len, &inner)) return -1;
  if (outer * len * inner == 0) return 0;
  cg_need(c, "reduce.c");
  cg_need(c, "tensor.c");
  cg_line(c, "mg_cumsum(%s, %d, %d, %lld, %lld, %lld, %s, %s);", cg_rt_dtype(n->in[0]->dtype), ex, rev,
          (long long)outer, (long long)len, (long long)inner, cg_vin(c, n->in[0]), cg_vout(c, n->out[0]));
  return 0;
}

/* Softmax / LogSoftmax / Hardmax over one axis (the import rewrote opset < 13's
 * flattening form into this). In place. */
static int softmax(cg_ctx *c, const mg_node *n, const char *kind) {
  int64_t outer, len, inner;
  if (axis_split(c, n, mg_attr_int(n, "axis", -1), &outer, &len, &inner)) return -1;
  const mg_value *x = n->in[0];
  if (outer * len * inner == 0) return 0;
  cg_need(c, "reduce.c");
  cg_need(c, "tensor.c");
  if (x->dtype == MG_F32)
    cg_kernel(c, 0, "mg_softmax_f32", "%s, %lld, %lld, %lld, %s, %s", kind, (long long)outer, (long long)len,
            (long long)inner, cg_in(c, x), cg_out(c, n->out[0]));
  else
    cg_line(c, "mg_softmax(%s, %s, %lld, %lld, %lld, %s, %s);", cg_rt_dtype(x->dtype), kind,
            (long long)outer, (long long)len, (long long)inner, cg_vin(c, x), cg_vout(c, n->out[0]));
  return 0;
}

int cg_emit_Softmax(cg_ctx *c, const mg_node *n) { return softmax(c, n, "MG_SOFTMAX"); }
int cg_emit_LogSoftmax(cg_ctx *c, const mg_node *n) { return softmax(c, n, "MG_LOG_SOFTMAX"); }
int cg_emit_Hardmax(cg_ctx *c, const mg_node *n) { return softmax(c, n, "MG_HARDMAX"); }

/* LpNormalization: p 1 or 2 along axis. In place. */
int cg_emit_LpNormalization(cg_ctx *c, const mg_node *n) {
  int64_t outer, len, inner, p = mg_attr_int(n, "p", 2);
  if (p != 1 && p != 2) return cg_unsupported(c, n, "p=%lld (1 or 2 only)", (long long)p);
  if (axis_split(c, n, mg_attr_int(n, "axis", -1), &outer, &len, &inner)) return -1;
  if (outer * len * inner == 0) return 0;
  cg_need(c, "reduce.c");
  cg_need(c, "tensor.c");
  cg_line(c, "mg_lp_normalize(%s, %d, %lld, %lld, %lld, %s, %s);", cg_rt_dtype(n->in[0]->dtype), (int)p,
          (long long)outer, (long long)len, (long long)inner, cg_vin(c, n->in[0]), cg_vout(c, n->out[0]));
  return 0;
}

/* MeanVarianceNormalization over `axes` (default [0, 2, 3]). In place. */
int cg_emit_MeanVarianceNormalization(cg_ctx *c, const mg_node *n) {
  int64_t xd[MG_MAX_RANK];
  int xr, red[MG_MAX_RANK] = {0};
  if (io_check(c, n, xd, &xr)) return -1;
  static const int64_t dflt[] = {0, 2, 3};
  const int64_t *axes = dflt;
  size_t na = 3;
  if (mg_node_attr(n, "axes")) na = mg_attr_ints(n, "axes", &axes);
  for (size_t i = 0; i < na; i++) {
    int a = 0;
    if (norm_axis(c, n, axes[i], xr, &a)) return -1;
    red[a] = 1;
  }
  if (cg_numel(n->in[0]) == 0) return 0;
  layout l;
  plan(xr, xd, red, &l);
  cg_need(c, "reduce.c");
  cg_need(c, "tensor.c");
  cg_line(c, "mg_mvn(%s, %d, %s, %s, %d, %s, %s, %s, %s);", cg_rt_dtype(n->in[0]->dtype), l.nk,
          dims_expr(c, l.ks, l.nk), dims_expr(c, l.kst, l.nk), l.nr, dims_expr(c, l.rs, l.nr),
          dims_expr(c, l.rst, l.nr), cg_vin(c, n->in[0]), cg_vout(c, n->out[0]));
  return 0;
}
