/* VJPs of the elementwise ops: unary functions (a derivative formula per op, in
 * terms of x, y and the attributes), Clip, PRelu, the broadcasting binary and
 * variadic ops, Cast and inference-mode Dropout.
 *
 * At a kink the subgradient is the one torch's autograd takes (Relu at 0 gives 0,
 * Clip passes the gradient at its bounds, Max/Min split it evenly between tied
 * inputs), so that verify --grad compares like with like. */
#include "vjp.h"
#include <math.h>
#include <string.h>

/* Input t read at every element of `of` (a numpy broadcast of t) as doubles. */
static double *expanded(const vjp_args *a, const mg_array *t, const mg_array *of) {
  int64_t k = it_numel(of), strides[MG_ARRAY_MAX_RANK], coord[MG_ARRAY_MAX_RANK] = {0}, off = 0;
  double *src = vjp_f64(a, t), *p = src ? vjp_zeros(a, k) : NULL;
  if (!p) {
    mg_free(src);
    return NULL;
  }
  it_bcast_strides(t, of->rank, of->dims, strides);
  for (int64_t i = 0; i < k; i++) {
    p[i] = src[off];
    for (int d = of->rank - 1; d >= 0; d--) {
      coord[d]++;
      off += strides[d];
      if (coord[d] < of->dims[d]) break;
      off -= strides[d] * of->dims[d];
      coord[d] = 0;
    }
  }
  mg_free(src);
  return p;
}

static double sigmoid(double x) { return x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x)); }

/* dy/dx of a unary op at x (y = f(x)); sets *ok = 0 for an attribute value it does
 * not handle. */
static double unary_derivative(const mg_node *n, double x, double y, int *ok) {
  switch (n->op) {
  case MG_OP_Identity: return 1;
  case MG_OP_Neg: return -1;
  case MG_OP_Abs: return x > 0 ? 1 : x < 0 ? -1 : 0;
  case MG_OP_Relu: return x > 0;
  case MG_OP_LeakyRelu: return x > 0 ? 1 : mg_attr_float(n, "alpha", 0.01f);
  case MG_OP_ThresholdedRelu: return x > mg_attr_float(n, "alpha", 1.0f);
  case MG_OP_Elu: return x > 0 ? 1 : mg_attr_float(n, "alpha", 1.0f) * exp(x);
  case MG_OP_Selu:
    return mg_attr_float(n, "gamma", 1.05070102214813232421875f) *
           (x > 0 ? 1 : mg_attr_float(n, "alpha", 1.67326319217681884765625f) * exp(x));
  case MG_OP_Celu: return x > 0 ? 1 : exp(x / mg_attr_float(n, "alpha", 1.0f));
  case MG_OP_Shrink: {
    double l = mg_attr_float(n, "lambd", 0.5f);
    return x < -l || x > l;
  }
  case MG_OP_Sigmoid: return y * (1 - y);
  case MG_OP_HardSigmoid: {
    double v = mg_attr_float(n, "alpha", 0.2f) * x + mg_attr_float(n, "beta", 0.5f);
    return v > 0 && v < 1 ? mg_attr_float(n, "alpha", 0.2f) : 0;
  }
  case MG_OP_HardSwish: return x < -3 ? 0 : x > 3 ? 1 : x / 3 + 0.5;
  case MG_OP_Tanh: return 1 - y * y;
  case MG_OP_Softplus: return sigmoid(x);
  case MG_OP_Softsign: return 1 / ((1 + fabs(x)) * (1 + fabs(x)));
  case MG_OP_Mish: {
    double sp = x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)), t = tanh(sp);
    return t + x * sigmoid(x) * (1 - t * t);
  }
  case MG_OP_Erf: return 2 / sqrt(M_PI) * exp(-x * x);
  case MG_OP_Gelu: {
    const char *ap = mg_attr_str(n, "approximate", "none");
    if (!strcmp(ap, "tanh")) {
      double k = sqrt(2 / M_PI), u = k * (x + 0.044715 * x * x * x), t = tanh(u);
      return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
    }
    if (strcmp(ap, "none")) *ok = 0;
    return 0.5 * (1 + erf(x / sqrt(2))) + x * exp(-x * x / 2) / sqrt(2 * M_PI);
  }
  case MG_OP_Exp: return y;
  case MG_OP_Log: return 1 / x;
  case MG_OP_Sqrt: return 0.5 / y;
  case MG_OP_Reciprocal: return -y * y;
  case MG_OP_Sin: return cos(x);
  case MG_OP_Cos: return -sin(x);
  case MG_OP_Tan: return 1 + y * y;
  case MG_OP_Sinh: return cosh(x);
  case MG_OP_Cosh: return sinh(x);
  case MG_OP_Asin: return 1 / sqrt(1 - x * x);
  case MG_OP_Acos: return -1 / sqrt(1 - x * x);
  case MG_OP_Atan: return 1 / (1 + x * x);
  case MG_OP_Asinh: return 1 / sqrt(x * x + 1);
  case MG_OP_Acosh: return 1 / sqrt(x * x - 1);
  case MG_OP_Atanh: return 1 / (1 - x * x);
  /* piecewise constant: zero almost everywhere, as torch's autograd gives */
  case MG_OP_Floor: case MG_OP_Ceil: case MG_OP_Round: case MG_OP_Sign: return 0;
  default: *ok = 0; return 0;
  }
}

/* One-input ops (and Cast, CastLike's first input, inference Dropout). */
static int unary(const vjp_args *a) {
  if (!a->gx[0] || !a->gy[0]) return 0;
  const mg_array *x = a->x[0], *y = a->y[0];
  int64_t k = it_numel(x);
  if (a->n->op == MG_OP_Identity || a->n->op == MG_OP_Cast || a->n->op == MG_OP_CastLike ||
      a->n->op == MG_OP_Dropout) {
    for (int64_t i = 0; i < k; i++) a->gx[0][i] += a->gy[0][i];
    return 0;
  }
  double *xv = vjp_f64(a, x), *yv = xv ? vjp_f64(a, y) : NULL;
  if (!yv) {
    mg_free(xv);
    return -1;
  }
  int ok = 1;
  for (int64_t i = 0; i < k; i++) a->gx[0][i] += a->gy[0][i] * unary_derivative(a->n, xv[i], yv[i], &ok);
  mg_free(xv), mg_free(yv);
  if (!ok) return vjp_unsupported(a, "attribute value not handled");
  return 0;
}

/* Clip: the gradient passes where min <= x <= max (torch's clamp); a bound that
 * wants one gets the gradient of the elements it clipped. */
static int clip(const vjp_args *a) {
  if (!a->gy[0]) return 0;
  const mg_array *x = a->x[0];
  const mg_array *lo = a->n->n_in > 1 ? a->x[1] : NULL, *hi = a->n->n_in > 2 ? a->x[2] : NULL;
  int64_t k = it_numel(x);
  double mn = lo && it_numel(lo) ? it_get_f64(lo, 0) : -INFINITY;
  double mx = hi && it_numel(hi) ? it_get_f64(hi, 0) : INFINITY;
  double *xv = vjp_f64(a, x);
  if (!xv) return -1;
  for (int64_t i = 0; i < k; i++) {
    double g = a->gy[0][i];
    if (xv[i] < mn) {
      if (a->n->n_in > 1 && a->gx[1]) a->gx[1][0] += g;
    } else if (xv[i] > mx) {
      if (a->n->n_in > 2 && a->gx[2]) a->gx[2][0] += g;
    } else if (a->gx[0]) {
      a->gx[0][i] += g;
    }
  }
  mg_free(xv);
  return 0;
}

/* Binary and variadic broadcasting ops: per input, the local derivative at every
 * output element, then summed back over the broadcast dims. */
static int nary(const vjp_args *a) {
  if (!a->gy[0]) return 0;
  const mg_node *n = a->n;
  const mg_array *y = a->y[0];
  int ni = n->n_in;
  int64_t k = it_numel(y);
  double *xs[64] = {0}, *tmp = vjp_zeros(a, k), *yv = tmp ? vjp_f64(a, y) : NULL;
  int rc = yv ? 0 : -1;
  if (ni > 64) rc = vjp_unsupported(a, "more than 64 inputs");
  for (int i = 0; i < ni && !rc; i++)
    if (!(xs[i] = expanded(a, a->x[i], y))) rc = -1;
  for (int side = 0; side < ni && !rc; side++) {
    if (!a->gx[side]) continue;
    const double *g = a->gy[0], *p = xs[0], *q = ni > 1 ? xs[1] : NULL;
    for (int64_t i = 0; i < k; i++) {
      double d;
      switch (n->op) {
      case MG_OP_Add: case MG_OP_Sum: d = 1; break;
      case MG_OP_Mean: d = 1.0 / ni; break;
      case MG_OP_Sub: d = side ? -1 : 1; break;
      case MG_OP_Mul: d = side ? p[i] : q[i]; break;
      case MG_OP_Div: d = side ? -p[i] / (q[i] * q[i]) : 1 / q[i]; break;
      case MG_OP_Pow:
        if (!side) d = q[i] == 0 ? 0 : q[i] * pow(p[i], q[i] - 1);
        else d = p[i] > 0 ? yv[i] * log(p[i]) : p[i] == 0 && q[i] >= 0 ? 0 : NAN;
        break;
      case MG_OP_PRelu: d = side ? (p[i] > 0 ? 0 : p[i]) : (p[i] > 0 ? 1 : q[i]); break;
      default: { /* Max, Min: split evenly between the inputs equal to the result */
        int ties = 0;
        for (int j = 0; j < ni; j++) ties += xs[j][i] == yv[i];
        d = xs[side][i] == yv[i] && ties ? 1.0 / ties : 0;
        break;
      }
      }
      tmp[i] = g[i] * d;
    }
    vjp_unbroadcast_add(a->gx[side], a->x[side], tmp, y);
  }
  for (int i = 0; i < ni && i < 64; i++) mg_free(xs[i]);
  mg_free(tmp), mg_free(yv);
  return rc;
}

/* The elementwise family's entry point (vjp.h). */
int vjp_elementwise(const vjp_args *a) {
  switch (a->n->op) {
  case MG_OP_Add: case MG_OP_Sub: case MG_OP_Mul: case MG_OP_Div: case MG_OP_Pow:
  case MG_OP_Max: case MG_OP_Min: case MG_OP_Sum: case MG_OP_Mean: case MG_OP_PRelu:
    return nary(a);
  case MG_OP_Clip:
    return clip(a);
  case MG_OP_Cast: case MG_OP_CastLike:
    if (!mg_dtype_is_float(a->x[0]->dtype) || !mg_dtype_is_float(a->y[0]->dtype)) return 0;
    return unary(a);
  case MG_OP_Dropout: {
    const mg_array *train = a->n->n_in > 2 ? a->x[2] : NULL;
    if (train && it_numel(train) && it_get_f64(train, 0) != 0)
      return vjp_unsupported(a, "training-mode Dropout is random; its gradient is not reproducible");
    return unary(a);
  }
  default:
    return unary(a);
  }
}
