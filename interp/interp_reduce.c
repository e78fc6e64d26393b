/* Reductions and one-axis normalisations: Reduce*, ArgMax/ArgMin, CumSum,
 * Softmax/LogSoftmax/Hardmax, LpNormalization, LRN and MeanVarianceNormalization.
 *
 * Floating-point results accumulate in double and round once when stored. Integer
 * Sum/Prod/Max/Min/L1/SumSquare/CumSum accumulate in int64 (wrapping like C, via
 * uint64 arithmetic) so that int64 data keeps every bit, as numpy does; the
 * inherently real-valued ones (Mean, L2, LogSum, LogSumExp) go through double and
 * truncate back to the integer dtype, as the ONNX reference's astype does. */
#include "interp_internal.h"
#include <math.h>
#include <string.h>

/* For every element of x, the flat index of its group when the axes flagged in red
 * are reduced away (groups are numbered in row-major order of the kept axes, which
 * is the output order with or without keepdims). Returns a new array or NULL after
 * a diagnostic; *groups gets the group count. */
static int64_t *group_map(interp_ctx *c, const mg_node *n, const mg_array *x, const int *red,
                          int64_t *groups) {
  int r = x->rank;
  int64_t kdims[MG_ARRAY_MAX_RANK] = {0}, kstr[MG_ARRAY_MAX_RANK], coord[MG_ARRAY_MAX_RANK] = {0};
  int64_t g = 1;
  for (int d = 0; d < r; d++) {
    kdims[d] = red[d] ? 1 : x->dims[d];
    g *= kdims[d];
  }
  it_strides(r, kdims, kstr);
  for (int d = 0; d < r; d++)
    if (red[d]) kstr[d] = 0;
  int64_t k = it_numel(x);
  int64_t *map = mg_malloc(sizeof(int64_t) * (size_t)(k ? k : 1));
  if (!map) {
    mg_error(c->d, OOM, n->name, n->op_type, "out of memory");
    return NULL;
  }
  int64_t off = 0;
  for (int64_t i = 0; i < k; i++) {
    map[i] = off;
    for (int d = r - 1; d >= 0; d--) { /* advance the coordinate odometer */
      coord[d]++;
      off += kstr[d];
      if (coord[d] < x->dims[d]) break;
      off -= kstr[d] * x->dims[d];
      coord[d] = 0;
    }
  }
  *groups = g;
  return map;
}

/* Smallest and largest value of an integer dtype as int64 (uint64's largest is the
 * all-ones pattern, -1): the results of ReduceMax/ReduceMin over an empty set. */
static int64_t int_lowest(mg_dtype t) {
  switch (t) {
  case MG_I8: return INT8_MIN;
  case MG_I16: return INT16_MIN;
  case MG_I32: return INT32_MIN;
  case MG_I64: return INT64_MIN;
  default: return 0; /* unsigned and bool */
  }
}

static int64_t int_highest(mg_dtype t) {
  switch (t) {
  case MG_I8: return INT8_MAX;
  case MG_U8: return UINT8_MAX;
  case MG_I16: return INT16_MAX;
  case MG_U16: return UINT16_MAX;
  case MG_I32: return INT32_MAX;
  case MG_U32: return UINT32_MAX;
  case MG_I64: return INT64_MAX;
  case MG_BOOL: return 1;
  default: return -1; /* uint64 max */
  }
}

/* a > b in the integer semantics of dtype t (uint64 compares unsigned). */
static int int_gt(mg_dtype t, int64_t a, int64_t b) {
  return t == MG_U64 ? (uint64_t)a > (uint64_t)b : a > b;
}

/* The axes an op reduces, from input 1 (Reduce*) into red[]: all axes when it is
 * omitted or empty unless noop_with_empty_axes, in which case none (each element
 * is then "reduced" on its own: ReduceSumSquare gives x*x, ReduceL1 |x|...).
 * Duplicate or out-of-range axes are errors. */
static int reduce_axes(interp_ctx *c, const mg_node *n, const mg_array *x, const mg_array *ax,
                       int *red) {
  int64_t axes[MG_ARRAY_MAX_RANK];
  int na = 0;
  memset(red, 0, sizeof(int) * MG_ARRAY_MAX_RANK);
  if (ax) {
    if (ax->rank > 1) return it_fail(c, n, "axes must be a 1-D tensor");
    if (it_numel(ax) > x->rank) return it_fail(c, n, "more axes than the input's rank %d", x->rank);
    na = it_ints(ax, axes, MG_ARRAY_MAX_RANK);
    if (na < 0) return it_fail(c, n, "cannot read axes");
  }
  if (na == 0) {
    if (!mg_attr_int(n, "noop_with_empty_axes", 0))
      for (int d = 0; d < x->rank; d++) red[d] = 1;
    return 0;
  }
  for (int i = 0; i < na; i++) {
    int a = 0;
    if (it_norm_axis(c, n, axes[i], x->rank, &a)) return -1;
    if (red[a]) return it_fail(c, n, "axis %lld is repeated", (long long)axes[i]);
    red[a] = 1;
  }
  return 0;
}

/* Reduce* over the axes of input 1 (see reduce_axes), keepdims. Empty groups give
 * the identity of the reduction: 0 for sums, 1 for Prod, -inf for Max/LogSum/
 * LogSumExp and +inf for Min (the dtype's lowest/highest value for integers), NaN
 * for Mean (0/0, as numpy). */
static int reduce(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *x = it_in(in, n, 0);
  if (!x) return it_fail(c, n, "missing input");
  int red[MG_ARRAY_MAX_RANK];
  if (reduce_axes(c, n, x, it_in(in, n, 1), red)) return -1;
  int keep = mg_attr_int(n, "keepdims", 1) != 0, orank = 0;
  int64_t odims[MG_ARRAY_MAX_RANK], nred = 1;
  for (int d = 0; d < x->rank; d++) {
    if (red[d]) nred *= x->dims[d];
    if (!red[d]) odims[orank++] = x->dims[d];
    else if (keep) odims[orank++] = 1;
  }
  mg_array *y = it_out(c, n, out, 0, x->dtype, orank, odims);
  if (!y) return -1;
  int64_t groups, k = it_numel(x);
  int64_t *map = group_map(c, n, x, red, &groups);
  if (!map) return -1;
  mg_op op = n->op;
  int flt = it_is_float(x->dtype) || op == MG_OP_ReduceMean || op == MG_OP_ReduceL2 ||
            op == MG_OP_ReduceLogSum || op == MG_OP_ReduceLogSumExp;
  size_t gsz = (size_t)(groups ? groups : 1);
  if (!flt) {
    int64_t *acc = mg_malloc(sizeof(int64_t) * gsz);
    if (!acc) {
      mg_free(map);
      return it_fail(c, n, "out of memory");
    }
    int64_t init = op == MG_OP_ReduceProd ? 1
                   : op == MG_OP_ReduceMax ? int_lowest(x->dtype)
                   : op == MG_OP_ReduceMin ? int_highest(x->dtype)
                                           : 0;
    for (int64_t g = 0; g < groups; g++) acc[g] = init;
    for (int64_t i = 0; i < k; i++) {
      int64_t v = it_get_i64(x, i), *a = &acc[map[i]];
      uint64_t ua = (uint64_t)*a, uv = (uint64_t)v;
      switch (op) {
      case MG_OP_ReduceSum: *a = (int64_t)(ua + uv); break;
      case MG_OP_ReduceL1: *a = (int64_t)(ua + (v < 0 && x->dtype != MG_U64 ? 0 - uv : uv)); break;
      case MG_OP_ReduceSumSquare: *a = (int64_t)(ua + uv * uv); break;
      case MG_OP_ReduceProd: *a = (int64_t)(ua * uv); break;
      case MG_OP_ReduceMax: if (int_gt(x->dtype, v, *a)) *a = v; break;
      case MG_OP_ReduceMin: if (int_gt(x->dtype, *a, v)) *a = v; break;
      default: break;
      }
    }
    it_store_i64(y, acc);
    mg_free(acc);
    mg_free(map);
    return 0;
  }
  double *acc = mg_malloc(sizeof(double) * gsz), *mx = mg_malloc(sizeof(double) * gsz);
  if (!acc || !mx) {
    mg_free(acc), mg_free(mx), mg_free(map);
    return it_fail(c, n, "out of memory");
  }
  double init = op == MG_OP_ReduceProd ? 1 : op == MG_OP_ReduceMax ? -INFINITY
                                          : op == MG_OP_ReduceMin ? INFINITY : 0;
  for (int64_t g = 0; g < groups; g++) acc[g] = init, mx[g] = -INFINITY;
  if (op == MG_OP_ReduceLogSumExp) /* first pass: the group maxima, for stability */
    for (int64_t i = 0; i < k; i++) {
      double v = it_get_f64(x, i), *m = &mx[map[i]];
      if (v > *m || isnan(v)) *m = v;
    }
  for (int64_t i = 0; i < k; i++) {
    double v = it_get_f64(x, i), *a = &acc[map[i]];
    switch (op) {
    case MG_OP_ReduceSum: case MG_OP_ReduceMean: case MG_OP_ReduceLogSum: *a += v; break;
    case MG_OP_ReduceL1: *a += fabs(v); break;
    case MG_OP_ReduceL2: case MG_OP_ReduceSumSquare: *a += v * v; break;
    case MG_OP_ReduceProd: *a *= v; break;
    case MG_OP_ReduceMax: if (v > *a || isnan(v)) *a = v; break; /* NaN propagates */
    case MG_OP_ReduceMin: if (v < *a || isnan(v)) *a = v; break;
    case MG_OP_ReduceLogSumExp: {
      double m = mx[map[i]];
      *a += exp(v - (isfinite(m) ? m : 0));
      break;
    }
    default: break;
    }
  }
  for (int64_t g = 0; g < groups; g++) {
    switch (op) {
    case MG_OP_ReduceMean: acc[g] /= (double)nred; break;
    case MG_OP_ReduceL2: acc[g] = sqrt(acc[g]); break;
    case MG_OP_ReduceLogSum: acc[g] = log(acc[g]); break;
    case MG_OP_ReduceLogSumExp:
      /* an infinite or NaN maximum is the answer itself; exp(x - 0) summed above */
      acc[g] = isfinite(mx[g]) ? mx[g] + log(acc[g]) : isnan(mx[g]) || mx[g] > 0 ? mx[g] : log(acc[g]);
      break;
    default: break;
    }
  }
  it_store_f64(y, acc);
  mg_free(acc), mg_free(mx), mg_free(map);
  return 0;
}

/* ArgMax/ArgMin along `axis` (int64 output, keepdims). Ties go to the first index,
 * or the last with select_last_index; a NaN beats every number and the first NaN
 * met in scan order wins, as numpy's argmax does. An empty axis is an error. */
static int arg_extreme(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *x = it_in(in, n, 0);
  if (!x) return it_fail(c, n, "missing input");
  int axis = 0, r = x->rank ? x->rank : 1;
  if (it_norm_axis(c, n, mg_attr_int(n, "axis", 0), r, &axis)) return -1;
  int64_t outer, len, inner;
  it_split_dims(x, axis, &outer, &len, &inner);
  if (len == 0 && outer * inner > 0) return it_fail(c, n, "%s of an empty axis", n->op_type);
  int keep = mg_attr_int(n, "keepdims", 1) != 0, last = mg_attr_int(n, "select_last_index", 0) != 0;
  int orank = 0;
  int64_t odims[MG_ARRAY_MAX_RANK];
  for (int d = 0; d < x->rank; d++)
    if (d != axis) odims[orank++] = x->dims[d];
    else if (keep) odims[orank++] = 1;
  mg_array *y = it_out(c, n, out, 0, MG_I64, orank, odims);
  if (!y) return -1;
  int want_max = n->op == MG_OP_ArgMax, flt = it_is_float(x->dtype);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      int64_t best = -1, bi = 0;
      double bf = 0;
      for (int64_t t = 0; t < len; t++) {
        int64_t j = last ? len - 1 - t : t, idx = (o * len + j) * inner + i;
        if (flt) {
          double v = it_get_f64(x, idx);
          if (isnan(v)) { best = j; break; }
          if (best < 0 || (want_max ? v > bf : v < bf)) best = j, bf = v;
        } else {
          int64_t v = it_get_i64(x, idx);
          if (best < 0 || (want_max ? int_gt(x->dtype, v, bi) : int_gt(x->dtype, bi, v))) best = j, bi = v;
        }
      }
      it_set_i64(y, o * inner + i, best);
    }
  return 0;
}

/* CumSum along the axis given by input 1 (a scalar or one-element tensor);
 * exclusive leaves out the element itself, reverse runs from the end. */
static int cumsum(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *x = it_in(in, n, 0), *ax = it_in(in, n, 1);
  if (!x || !ax) return it_fail(c, n, "missing input");
  if (it_numel(ax) != 1) return it_fail(c, n, "axis must hold one value");
  if (x->rank == 0) return it_fail(c, n, "input must have rank >= 1");
  int axis = 0;
  if (it_norm_axis(c, n, it_get_i64(ax, 0), x->rank, &axis)) return -1;
  mg_array *y = it_out(c, n, out, 0, x->dtype, x->rank, x->dims);
  if (!y) return -1;
  int excl = mg_attr_int(n, "exclusive", 0) != 0, rev = mg_attr_int(n, "reverse", 0) != 0;
  int flt = it_is_float(x->dtype);
  int64_t outer, len, inner;
  it_split_dims(x, axis, &outer, &len, &inner);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      double af = 0;
      uint64_t ai = 0;
      for (int64_t t = 0; t < len; t++) {
        int64_t j = rev ? len - 1 - t : t, idx = (o * len + j) * inner + i;
        if (flt) {
          double v = it_get_f64(x, idx);
          if (!excl) af += v;
          it_set_f64(y, idx, af);
          if (excl) af += v;
        } else {
          uint64_t v = (uint64_t)it_get_i64(x, idx);
          if (!excl) ai += v;
          it_set_i64(y, idx, (int64_t)ai);
          if (excl) ai += v;
        }
      }
    }
  return 0;
}

/* Softmax, LogSoftmax and Hardmax over one axis (opset-13 form; older opsets were
 * rewritten to it at import). The maximum is subtracted before exp for stability;
 * Hardmax puts its 1 at the first maximum. */
static int softmax(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *x = it_in(in, n, 0);
  if (!x) return it_fail(c, n, "missing input");
  int axis = 0, r = x->rank ? x->rank : 1;
  if (it_norm_axis(c, n, mg_attr_int(n, "axis", -1), r, &axis)) return -1;
  mg_array *y = it_out(c, n, out, 0, x->dtype, x->rank, x->dims);
  if (!y) return -1;
  int64_t outer, len, inner;
  it_split_dims(x, axis, &outer, &len, &inner);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      int64_t base = o * len * inner + i, arg = -1;
      double m = -INFINITY, s = 0;
      for (int64_t j = 0; j < len; j++) {
        double v = it_get_f64(x, base + j * inner);
        if (arg < 0 || v > m || (isnan(v) && !isnan(m))) m = v, arg = j;
      }
      if (n->op == MG_OP_Hardmax) {
        for (int64_t j = 0; j < len; j++) it_set_f64(y, base + j * inner, j == arg);
        continue;
      }
      for (int64_t j = 0; j < len; j++) s += exp(it_get_f64(x, base + j * inner) - m);
      for (int64_t j = 0; j < len; j++) {
        double v = it_get_f64(x, base + j * inner) - m;
        it_set_f64(y, base + j * inner, n->op == MG_OP_Softmax ? exp(v) / s : v - log(s));
      }
    }
  return 0;
}

/* LpNormalization: x divided by its L1 (p=1) or L2 (p=2) norm along `axis`. A zero
 * norm gives NaN/inf, as the ONNX reference does (it does not guard). */
static int lp_norm(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *x = it_in(in, n, 0);
  if (!x) return it_fail(c, n, "missing input");
  int64_t p = mg_attr_int(n, "p", 2);
  if (p != 1 && p != 2) {
    mg_error(c->d, UNSUPPORTED_ATTR, n->name, n->op_type, "p must be 1 or 2, not %lld", (long long)p);
    return -1;
  }
  int axis = 0, r = x->rank ? x->rank : 1;
  if (it_norm_axis(c, n, mg_attr_int(n, "axis", -1), r, &axis)) return -1;
  mg_array *y = it_out(c, n, out, 0, x->dtype, x->rank, x->dims);
  if (!y) return -1;
  int64_t outer, len, inner;
  it_split_dims(x, axis, &outer, &len, &inner);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      int64_t base = o * len * inner + i;
      double s = 0;
      for (int64_t j = 0; j < len; j++) {
        double v = it_get_f64(x, base + j * inner);
        s += p == 1 ? fabs(v) : v * v;
      }
      if (p == 2) s = sqrt(s);
      for (int64_t j = 0; j < len; j++) it_set_f64(y, base + j * inner, it_get_f64(x, base + j * inner) / s);
    }
  return 0;
}

/* LRN across channels (axis 1): y = x / (bias + alpha/size * sum)^beta, the sum of
 * squares running over channels [c - floor((size-1)/2), c + ceil((size-1)/2)]
 * clipped to the valid range. */
static int lrn(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *x = it_in(in, n, 0);
  if (!x) return it_fail(c, n, "missing input");
  if (x->rank < 2) return it_fail(c, n, "input must have rank >= 2");
  int64_t size = mg_attr_int(n, "size", 0);
  if (size <= 0) return it_fail(c, n, "size must be positive");
  double alpha = mg_attr_float(n, "alpha", 0.0001f), beta = mg_attr_float(n, "beta", 0.75f),
         bias = mg_attr_float(n, "bias", 1);
  mg_array *y = it_out(c, n, out, 0, x->dtype, x->rank, x->dims);
  if (!y) return -1;
  int64_t outer, ch, inner;
  it_split_dims(x, 1, &outer, &ch, &inner);
  int64_t lo = (size - 1) / 2, hi = size / 2; /* floor and ceil of (size-1)/2 */
  for (int64_t o = 0; o < outer; o++)
    for (int64_t cc = 0; cc < ch; cc++)
      for (int64_t i = 0; i < inner; i++) {
        double s = 0;
        for (int64_t k = cc - lo < 0 ? 0 : cc - lo; k <= cc + hi && k < ch; k++) {
          double v = it_get_f64(x, (o * ch + k) * inner + i);
          s += v * v;
        }
        int64_t idx = (o * ch + cc) * inner + i;
        it_set_f64(y, idx, it_get_f64(x, idx) / pow(bias + alpha / (double)size * s, beta));
      }
  return 0;
}

/* MeanVarianceNormalization over `axes` (default [0, 2, 3]): (x - mean) /
 * (sqrt(var) + 1e-9), the epsilon placement of ONNX's function definition. The
 * variance is computed centred (E[(x-mean)^2]), equal to the definition's
 * E[x^2] - mean^2 but without its cancellation. */
static int mvn(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *x = it_in(in, n, 0);
  if (!x) return it_fail(c, n, "missing input");
  static const int64_t dflt[] = {0, 2, 3};
  const int64_t *axes = dflt;
  size_t na = mg_attr_ints(n, "axes", &axes);
  if (!mg_node_attr(n, "axes")) axes = dflt, na = 3;
  int red[MG_ARRAY_MAX_RANK] = {0};
  for (size_t i = 0; i < na; i++) {
    int a = 0;
    if (it_norm_axis(c, n, axes[i], x->rank, &a)) return -1;
    red[a] = 1;
  }
  mg_array *y = it_out(c, n, out, 0, x->dtype, x->rank, x->dims);
  if (!y) return -1;
  int64_t groups, k = it_numel(x), cnt = 1;
  for (int d = 0; d < x->rank; d++)
    if (red[d]) cnt *= x->dims[d];
  int64_t *map = group_map(c, n, x, red, &groups);
  if (!map) return -1;
  double *mean = mg_calloc((size_t)(groups ? groups : 1), sizeof(double));
  double *var = mg_calloc((size_t)(groups ? groups : 1), sizeof(double));
  if (!mean || !var) {
    mg_free(mean), mg_free(var), mg_free(map);
    return it_fail(c, n, "out of memory");
  }
  for (int64_t i = 0; i < k; i++) mean[map[i]] += it_get_f64(x, i);
  for (int64_t g = 0; g < groups; g++) mean[g] /= (double)cnt;
  for (int64_t i = 0; i < k; i++) {
    double d = it_get_f64(x, i) - mean[map[i]];
    var[map[i]] += d * d;
  }
  for (int64_t g = 0; g < groups; g++) var[g] = sqrt(var[g] / (double)cnt) + 1e-9;
  for (int64_t i = 0; i < k; i++) it_set_f64(y, i, (it_get_f64(x, i) - mean[map[i]]) / var[map[i]]);
  mg_free(mean), mg_free(var), mg_free(map);
  return 0;
}

int interp_reduce(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out,
                  interp_frame *frame) {
  (void)frame;
  /* Every op here computes with the values: strings and complex numbers (which
   * the element readers cannot convert) are not supported. */
  for (int i = 0; i < n->n_in; i++) {
    const mg_array *t = it_in(in, n, i);
    if (t && (!mg_dtype_size(t->dtype) || t->dtype == MG_C64 || t->dtype == MG_C128)) {
      mg_error(c->d, UNSUPPORTED_DTYPE, n->name, n->op_type, "%s with a %s input is not supported",
               n->op_type, mg_dtype_name(t->dtype));
      return -1;
    }
  }
  switch (n->op) {
  case MG_OP_ArgMax: case MG_OP_ArgMin: return arg_extreme(c, n, in, out);
  case MG_OP_CumSum: return cumsum(c, n, in, out);
  case MG_OP_Softmax: case MG_OP_LogSoftmax: case MG_OP_Hardmax: return softmax(c, n, in, out);
  case MG_OP_LpNormalization: return lp_norm(c, n, in, out);
  case MG_OP_LRN: return lrn(c, n, in, out);
  case MG_OP_MeanVarianceNormalization: return mvn(c, n, in, out);
  default: return reduce(c, n, in, out);
  }
}
