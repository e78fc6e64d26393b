/* VJPs of the data-movement ops, the reductions and the softmaxes.
 *
 * Every data-movement op (Reshape, Transpose, Slice, Gather, Pad, Concat, Split,
 * Expand, Tile, Where, ...) only routes elements: each output element is a copy of
 * one input element or a fill value. Its VJP runs the interpreter's own kernel
 * once more on float64 inputs that hold each element's position (1-based, inputs
 * numbered one after another; indices, shapes and conditions are passed
 * unchanged, fill values become 0), reads back where every output element came
 * from, and scatter-adds the cotangent there. So the routing is exactly the
 * forward kernel's, with no second implementation of any of these ops. Positions
 * are exact in double up to 2^53 elements. */
#include "vjp.h"
#include <math.h>
#include <string.h>

/* Whether input i of n is routed data (rather than indices, shape or condition). */
static int is_data_input(const mg_node *n, int i) {
  switch (n->op) {
  case MG_OP_Concat: return 1;
  case MG_OP_Where: return i == 1 || i == 2;
  case MG_OP_Pad: return i == 0 || i == 2; /* 2: the constant fill value */
  default: return i == 0;
  }
}

/* A float64 tensor of t's shape whose element i holds base + i + 1. */
static int positions(const vjp_args *a, const mg_array *t, int64_t base, mg_array *out) {
  memset(out, 0, sizeof *out);
  int64_t k = it_numel(t);
  double *p = vjp_zeros(a, k);
  if (!p) return -1;
  for (int64_t i = 0; i < k; i++) p[i] = (double)(base + i + 1);
  out->dtype = MG_F64;
  out->rank = t->rank;
  memcpy(out->dims, t->dims, sizeof out->dims);
  out->data = p;
  out->nbytes = sizeof(double) * (size_t)k;
  return 0;
}

static int routed(const vjp_args *a) {
  const mg_node *n = a->n;
  if (!vjp_any_gy(a)) return 0;
  if (n->n_in > 64 || n->n_out > 64) return vjp_unsupported(a, "more than 64 inputs or outputs");
  interp_kernel *k = interp_kernel_for(n->op);
  if (!k) return vjp_fail(a, "no forward kernel");
  mg_rvalue inv[64], outv[64], *in[64], *out[64];
  mg_array pos[64];
  int64_t base[65] = {0};
  int fill_input = -1, rc = 0;
  memset(inv, 0, sizeof inv), memset(outv, 0, sizeof outv), memset(pos, 0, sizeof pos);
  for (int i = 0; i < n->n_in; i++) {
    base[i + 1] = base[i];
    in[i] = NULL;
    if (!a->x[i]) continue;
    inv[i].kind = MG_RV_TENSOR;
    inv[i].borrowed = 1;
    inv[i].t = *a->x[i];
    in[i] = &inv[i];
    if (!is_data_input(n, i)) continue;
    if (n->op == MG_OP_Pad && i == 2) { /* the fill value: its positions read 0 */
      fill_input = 2;
      mg_array zero = {.dtype = MG_F64, .rank = 0};
      if (positions(a, &zero, -1, &pos[i])) { rc = -1; break; }
      inv[i].t = pos[i];
      continue;
    }
    if (positions(a, a->x[i], base[i], &pos[i])) { rc = -1; break; }
    inv[i].t = pos[i];
    base[i + 1] = base[i] + it_numel(a->x[i]);
  }
  for (int i = 0; i < n->n_out; i++) out[i] = n->out[i] ? &outv[i] : NULL;
  interp_options opt = {0};
  interp_ctx c = {.m = a->m, .d = a->d, .opt = &opt, .rng = 1};
  if (!rc) rc = k(&c, n, in, out, NULL);
  for (int j = 0; j < n->n_out && !rc; j++) {
    if (!a->gy[j] || !out[j]) continue;
    if (outv[j].kind != MG_RV_TENSOR || outv[j].t.dtype != MG_F64) {
      rc = vjp_fail(a, "routing run gave no float64 output %d", j);
      break;
    }
    const double *src = outv[j].t.data;
    int64_t cnt = it_numel(&outv[j].t);
    for (int64_t e = 0; e < cnt; e++) {
      double v = src[e];
      if (v < 1) { /* a fill element */
        if (fill_input >= 0 && a->gx[fill_input]) a->gx[fill_input][0] += a->gy[j][e];
        continue;
      }
      int64_t p = (int64_t)v - 1;
      int i = 0;
      while (i < n->n_in && !(is_data_input(n, i) && i != fill_input && p < base[i + 1])) i++;
      if (i < n->n_in && a->gx[i]) a->gx[i][p - base[i]] += a->gy[j][e];
    }
  }
  for (int i = 0; i < n->n_in; i++) mg_free(pos[i].data);
  for (int j = 0; j < n->n_out; j++) mg_rvalue_free(&outv[j]);
  return rc;
}

/* The axes input 1 reduces (see the interpreter's reduce_axes): red[d] set. */
static int reduce_axes(const vjp_args *a, int *red) {
  const mg_array *x = a->x[0], *ax = a->n->n_in > 1 ? a->x[1] : NULL;
  int64_t axes[MG_ARRAY_MAX_RANK];
  int na = ax ? it_ints(ax, axes, MG_ARRAY_MAX_RANK) : 0;
  memset(red, 0, sizeof(int) * MG_ARRAY_MAX_RANK);
  if (na < 0) return vjp_fail(a, "cannot read axes");
  if (na == 0) {
    if (!mg_attr_int(a->n, "noop_with_empty_axes", 0))
      for (int d = 0; d < x->rank; d++) red[d] = 1;
    return 0;
  }
  for (int i = 0; i < na; i++) {
    int64_t d = axes[i] < 0 ? axes[i] + x->rank : axes[i];
    if (d < 0 || d >= x->rank) return vjp_fail(a, "axis out of range");
    red[d] = 1;
  }
  return 0;
}

/* Reduce*: each input element's cotangent is its group's output cotangent times
 * the local derivative; the group is found through the keepdims shape. */
static int reduce(const vjp_args *a) {
  if (!a->gx[0] || !a->gy[0]) return 0;
  const mg_array *x = a->x[0];
  int red[MG_ARRAY_MAX_RANK];
  if (reduce_axes(a, red)) return -1;
  mg_array kept = {.rank = x->rank};
  int64_t cnt = 1, strides[MG_ARRAY_MAX_RANK], coord[MG_ARRAY_MAX_RANK] = {0};
  for (int d = 0; d < x->rank; d++) {
    kept.dims[d] = red[d] ? 1 : x->dims[d];
    if (red[d]) cnt *= x->dims[d];
  }
  it_bcast_strides(&kept, x->rank, x->dims, strides);
  int64_t k = it_numel(x), ny = it_numel(a->y[0]);
  double *xv = vjp_f64(a, x), *yv = xv ? vjp_f64(a, a->y[0]) : NULL, *ties = yv ? vjp_zeros(a, ny) : NULL;
  if (!ties) {
    mg_free(xv), mg_free(yv);
    return -1;
  }
  mg_op op = a->n->op;
  for (int pass = op == MG_OP_ReduceMax || op == MG_OP_ReduceMin ? 0 : 1; pass < 2; pass++) {
    int64_t off = 0;
    memset(coord, 0, sizeof coord);
    for (int64_t i = 0; i < k; i++) {
      double g = a->gy[0][off], yo = yv[off], d;
      switch (op) {
      case MG_OP_ReduceSum: d = 1; break;
      case MG_OP_ReduceMean: d = 1.0 / (double)cnt; break;
      case MG_OP_ReduceSumSquare: d = 2 * xv[i]; break;
      case MG_OP_ReduceL2: d = yo != 0 ? xv[i] / yo : 0; break;
      case MG_OP_ReduceLogSumExp: d = exp(xv[i] - yo); break;
      default: /* Max, Min: split evenly between the tied elements, as torch's amax */
        d = xv[i] == yo;
        if (pass == 0) ties[off] += d;
        else d = d ? 1 / ties[off] : 0;
        break;
      }
      if (pass == 1) a->gx[0][i] += g * d;
      for (int dd = x->rank - 1; dd >= 0; dd--) {
        coord[dd]++;
        off += strides[dd];
        if (coord[dd] < x->dims[dd]) break;
        off -= strides[dd] * x->dims[dd];
        coord[dd] = 0;
      }
    }
  }
  mg_free(xv), mg_free(yv), mg_free(ties);
  return 0;
}

/* Softmax: gx = y (g - sum(g y)); LogSoftmax: gx = g - exp(y) sum(g); per row
 * along the axis. */
static int softmax(const vjp_args *a) {
  if (!a->gx[0] || !a->gy[0]) return 0;
  const mg_array *x = a->x[0];
  int r = x->rank ? x->rank : 1;
  int64_t axis = mg_attr_int(a->n, "axis", -1);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return vjp_fail(a, "axis out of range");
  int64_t outer = 1, len = x->rank ? x->dims[axis] : 1, inner = 1;
  for (int d = 0; d < axis && d < x->rank; d++) outer *= x->dims[d];
  for (int d = (int)axis + 1; d < x->rank; d++) inner *= x->dims[d];
  double *yv = vjp_f64(a, a->y[0]);
  if (!yv) return -1;
  const double *g = a->gy[0];
  int log_form = a->n->op == MG_OP_LogSoftmax;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      int64_t b = o * len * inner + i;
      double s = 0;
      for (int64_t j = 0; j < len; j++) s += log_form ? g[b + j * inner] : g[b + j * inner] * yv[b + j * inner];
      for (int64_t j = 0; j < len; j++) {
        int64_t e = b + j * inner;
        a->gx[0][e] += log_form ? g[e] - exp(yv[e]) * s : yv[e] * (g[e] - s);
      }
    }
  mg_free(yv);
  return 0;
}

/* The tensor family's entry point (vjp.h). */
int vjp_tensor(const vjp_args *a) {
  switch (a->n->op) {
  case MG_OP_ReduceSum: case MG_OP_ReduceMean: case MG_OP_ReduceSumSquare: case MG_OP_ReduceL2:
  case MG_OP_ReduceMax: case MG_OP_ReduceMin: case MG_OP_ReduceLogSumExp:
    return reduce(a);
  case MG_OP_Softmax: case MG_OP_LogSoftmax:
    return softmax(a);
  default:
    return routed(a);
  }
}
