/* Elementwise kernels: unary maths and activations, broadcasting binary ops,
 * comparisons, logical and bitwise ops, variadic Max/Min/Sum/Mean, Where, Clip,
 * PRelu, Cast, Identity and inference-mode Dropout. */
#include "interp_internal.h"
#include <math.h>
#include <string.h>

/* Walks the flat index of a broadcast output, keeping one offset per input. */
typedef struct {
  int rank;
  int64_t dims[MG_ARRAY_MAX_RANK], coord[MG_ARRAY_MAX_RANK];
  int64_t strides[4][MG_ARRAY_MAX_RANK], off[4];
  int n;
} bcast_iter;

static void iter_init(bcast_iter *it, const mg_array *const *ts, int n, int rank, const int64_t *dims) {
  memset(it, 0, sizeof *it);
  it->rank = rank;
  it->n = n;
  memcpy(it->dims, dims, sizeof(int64_t) * (size_t)rank);
  for (int i = 0; i < n; i++)
    if (ts[i]) it_bcast_strides(ts[i], rank, dims, it->strides[i]);
}

static void iter_next(bcast_iter *it) {
  for (int d = it->rank - 1; d >= 0; d--) {
    it->coord[d]++;
    for (int i = 0; i < it->n; i++) it->off[i] += it->strides[i][d];
    if (it->coord[d] < it->dims[d]) return;
    for (int i = 0; i < it->n; i++) it->off[i] -= it->strides[i][d] * it->dims[d];
    it->coord[d] = 0;
  }
}

/* Sets *known to 0 for an op with no case (a bug test_completeness finds). */
static double unary_f(const mg_node *n, double x, int *known) {
  switch (n->op) {
  case MG_OP_Abs: return fabs(x);
  case MG_OP_Acos: return acos(x);
  case MG_OP_Acosh: return acosh(x);
  case MG_OP_Asin: return asin(x);
  case MG_OP_Asinh: return asinh(x);
  case MG_OP_Atan: return atan(x);
  case MG_OP_Atanh: return atanh(x);
  case MG_OP_Ceil: return ceil(x);
  case MG_OP_Cos: return cos(x);
  case MG_OP_Cosh: return cosh(x);
  case MG_OP_Erf: return erf(x);
  case MG_OP_Exp: return exp(x);
  case MG_OP_Floor: return floor(x);
  case MG_OP_Log: return log(x);
  case MG_OP_Neg: return -x;
  case MG_OP_Reciprocal: return 1.0 / x;
  case MG_OP_Relu: return x > 0 ? x : 0 * x;
  case MG_OP_Round: return nearbyint(x); /* half to even in the default rounding mode */
  case MG_OP_Sigmoid: return x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x));
  case MG_OP_Sign: return isnan(x) ? x : (x > 0) - (x < 0);
  case MG_OP_Sin: return sin(x);
  case MG_OP_Sinh: return sinh(x);
  case MG_OP_Softplus: return (x > 0 ? x : 0) + log1p(exp(-fabs(x)));
  case MG_OP_Softsign: return x / (1 + fabs(x));
  case MG_OP_Sqrt: return sqrt(x);
  case MG_OP_Tan: return tan(x);
  case MG_OP_Tanh: return tanh(x);
  case MG_OP_Celu: {
    double a = mg_attr_float(n, "alpha", 1);
    return (x > 0 ? x : 0) + fmin(0, a * (exp(x / a) - 1));
  }
  case MG_OP_Elu: return x >= 0 ? x : mg_attr_float(n, "alpha", 1) * (exp(x) - 1);
  case MG_OP_Gelu:
    if (!strcmp(mg_attr_str(n, "approximate", "none"), "tanh"))
      return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    return 0.5 * x * (1 + erf(x / sqrt(2)));
  case MG_OP_HardSigmoid:
    return fmax(0, fmin(1, mg_attr_float(n, "alpha", 0.2f) * x + mg_attr_float(n, "beta", 0.5f)));
  case MG_OP_HardSwish: return x * fmax(0, fmin(1, x / 6 + 0.5));
  case MG_OP_LeakyRelu: return x >= 0 ? x : mg_attr_float(n, "alpha", 0.01f) * x;
  case MG_OP_Mish: return x * tanh((x > 0 ? x : 0) + log1p(exp(-fabs(x))));
  case MG_OP_Selu:
    return mg_attr_float(n, "gamma", 1.05070102214813232421875f) *
           (x > 0 ? x : mg_attr_float(n, "alpha", 1.67326319217681884765625f) * (exp(x) - 1));
  case MG_OP_Shrink: {
    double l = mg_attr_float(n, "lambd", 0.5f), b = mg_attr_float(n, "bias", 0);
    return x < -l ? x + b : x > l ? x - b : 0;
  }
  case MG_OP_ThresholdedRelu: return x > mg_attr_float(n, "alpha", 1) ? x : 0;
  default: *known = 0; return NAN;
  }
}

/* Integer unary ops (the float-only ones never reach here: ONNX types them). */
static int unary_i(const mg_node *n, int64_t x, int64_t *r) {
  switch (n->op) {
  case MG_OP_Abs: *r = x < 0 ? (int64_t)(0 - (uint64_t)x) : x; return 1;
  case MG_OP_Neg: *r = (int64_t)(0 - (uint64_t)x); return 1;
  case MG_OP_Sign: *r = (x > 0) - (x < 0); return 1;
  case MG_OP_Relu: *r = x > 0 ? x : 0; return 1;
  case MG_OP_BitwiseNot: *r = ~x; return 1;
  case MG_OP_Not: *r = !x; return 1;
  case MG_OP_Ceil: case MG_OP_Floor: case MG_OP_Round: *r = x; return 1;
  default: return 0;
  }
}

static int unary(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *x = it_in(in, n, 0);
  if (!x) return it_fail(c, n, "input is not a tensor");
  mg_array *y = it_out(c, n, out, 0, x->dtype, x->rank, x->dims);
  if (!y) return -1;
  int64_t k = it_numel(x);
  int unsigned_src = x->dtype == MG_U8 || x->dtype == MG_U16 || x->dtype == MG_U32 || x->dtype == MG_U64;
  if (it_is_float(x->dtype)) {
    int known = 1;
    for (int64_t i = 0; i < k && known; i++) it_set_f64(y, i, unary_f(n, it_get_f64(x, i), &known));
    if (!known) mg_error(c->d, UNKNOWN_OP, n->name, n->op_type, "%s has no elementwise case", n->op_type);
    return known ? 0 : -1;
  }
  for (int64_t i = 0; i < k; i++) {
    int64_t r, v = it_get_i64(x, i);
    if (unsigned_src && n->op == MG_OP_Sign) v = v != 0;
    if (!unary_i(n, v, &r)) return it_fail(c, n, "%s is not defined for %s", n->op_type, mg_dtype_name(x->dtype));
    it_set_i64(y, i, r);
  }
  return 0;
}

static int is_unsigned(mg_dtype t) { return t == MG_U8 || t == MG_U16 || t == MG_U32 || t == MG_U64; }

/* Integer binary op on int64 (signed) or uint64 (unsigned) semantics. */
static int binary_i(interp_ctx *c, const mg_node *n, int64_t a, int64_t b, int uns, int64_t *r) {
  uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
  switch (n->op) {
  case MG_OP_Add: case MG_OP_Sum: *r = (int64_t)(ua + ub); return 0;
  case MG_OP_Sub: *r = (int64_t)(ua - ub); return 0;
  case MG_OP_Mul: *r = (int64_t)(ua * ub); return 0;
  case MG_OP_Div:
    if (b == 0) return it_fail(c, n, "integer division by zero");
    if (uns) *r = (int64_t)(ua / ub);
    else *r = a == INT64_MIN && b == -1 ? a : a / b;
    return 0;
  case MG_OP_Mod:
    if (b == 0) return it_fail(c, n, "integer modulo by zero");
    if (uns) { *r = (int64_t)(ua % ub); return 0; }
    *r = a == INT64_MIN && b == -1 ? 0 : a % b;
    if (!mg_attr_int(n, "fmod", 0) && *r != 0 && ((*r < 0) != (b < 0))) *r += b;
    return 0;
  case MG_OP_Pow: {
    int64_t res = 1;
    if (b < 0) { *r = a == 1 ? 1 : a == -1 ? (b & 1 ? -1 : 1) : 0; return 0; }
    uint64_t base = ua, acc = 1, e = ub;
    while (e) { if (e & 1) acc *= base; base *= base; e >>= 1; }
    res = (int64_t)acc;
    *r = res;
    return 0;
  }
  case MG_OP_BitShift: {
    int left = !strcmp(mg_attr_str(n, "direction", "LEFT"), "LEFT");
    *r = ub >= 64 ? 0 : (int64_t)(left ? ua << ub : ua >> ub);
    return 0;
  }
  case MG_OP_BitwiseAnd: *r = a & b; return 0;
  case MG_OP_BitwiseOr: *r = a | b; return 0;
  case MG_OP_BitwiseXor: *r = a ^ b; return 0;
  case MG_OP_And: *r = a && b; return 0;
  case MG_OP_Or: *r = a || b; return 0;
  case MG_OP_Xor: *r = !a != !b; return 0;
  case MG_OP_Max: *r = uns ? (int64_t)(ua > ub ? ua : ub) : (a > b ? a : b); return 0;
  case MG_OP_Min: *r = uns ? (int64_t)(ua < ub ? ua : ub) : (a < b ? a : b); return 0;
  case MG_OP_Equal: *r = a == b; return 0;
  case MG_OP_Greater: *r = uns ? ua > ub : a > b; return 0;
  case MG_OP_GreaterOrEqual: *r = uns ? ua >= ub : a >= b; return 0;
  case MG_OP_Less: *r = uns ? ua < ub : a < b; return 0;
  case MG_OP_LessOrEqual: *r = uns ? ua <= ub : a <= b; return 0;
  case MG_OP_PRelu: *r = a < 0 ? (int64_t)(ua * ub) : a; return 0;
  default: return it_fail(c, n, "%s is not defined for integers", n->op_type);
  }
}

/* Sets *known to 0 for an op with no case (a bug test_completeness finds). */
static double binary_f(const mg_node *n, double a, double b, int *known) {
  switch (n->op) {
  case MG_OP_Add: case MG_OP_Sum: return a + b;
  case MG_OP_Sub: return a - b;
  case MG_OP_Mul: return a * b;
  case MG_OP_Div: return a / b;
  case MG_OP_Pow: return pow(a, b);
  case MG_OP_Mod: return fmod(a, b);
  case MG_OP_Max: return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
  case MG_OP_Min: return isnan(a) || isnan(b) ? NAN : a < b ? a : b;
  case MG_OP_Equal: return a == b;
  case MG_OP_Greater: return a > b;
  case MG_OP_GreaterOrEqual: return a >= b;
  case MG_OP_Less: return a < b;
  case MG_OP_LessOrEqual: return a <= b;
  case MG_OP_PRelu: return a < 0 ? a * b : a;
  default: *known = 0; return NAN;
  }
}

/* Folds inputs left to right with numpy broadcasting (Add..., Max/Min/Sum/Mean). */
static int binary(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  int cnt = 0;
  const mg_array *ts[64];
  for (int i = 0; i < n->n_in && cnt < 64; i++)
    if ((ts[cnt] = it_in(in, n, i))) cnt++;
  if (cnt == 0) return it_fail(c, n, "no inputs");
  int rank;
  int64_t dims[MG_ARRAY_MAX_RANK];
  if (it_broadcast(ts, cnt, &rank, dims)) return it_fail(c, n, "inputs do not broadcast");
  const mg_op_info *info = mg_op_get(n->op);
  int cmp = info->shape_rule == MG_SH_COMPARE;
  mg_dtype src = ts[0]->dtype;
  /* Pow's result has the base's type even with an exponent of another type. */
  int flt = it_is_float(src) || (n->op != MG_OP_Pow && cnt > 1 && it_is_float(ts[1]->dtype));
  mg_array *y = it_out(c, n, out, 0, cmp ? MG_BOOL : src, rank, dims);
  if (!y) return -1;
  int64_t k = it_numel(y);
  int uns = is_unsigned(src);
  if (cnt == 1) {
    for (int64_t i = 0; i < k; i++) {
      if (flt) it_set_f64(y, i, it_get_f64(ts[0], i));
      else it_set_i64(y, i, it_get_i64(ts[0], i));
    }
    return 0;
  }
  if (n->op == MG_OP_Pow && !it_is_float(src) && it_is_float(ts[1]->dtype)) flt = 1;
  bcast_iter it;
  double *acc_f = NULL;
  int64_t *acc_i = NULL;
  if (flt) acc_f = mg_malloc(sizeof(double) * (size_t)(k ? k : 1));
  else acc_i = mg_malloc(sizeof(int64_t) * (size_t)(k ? k : 1));
  if (!acc_f && !acc_i) return it_fail(c, n, "out of memory");
  /* Start from input 0 broadcast to the output shape. */
  iter_init(&it, ts, 1, rank, dims);
  for (int64_t i = 0; i < k; i++, iter_next(&it)) {
    if (flt) acc_f[i] = it_get_f64(ts[0], it.off[0]);
    else acc_i[i] = it_get_i64(ts[0], it.off[0]);
  }
  int rc = 0;
  for (int j = 1; j < cnt && !rc; j++) {
    iter_init(&it, &ts[j], 1, rank, dims);
    for (int64_t i = 0; i < k && !rc; i++, iter_next(&it)) {
      if (flt) {
        double b = it_get_f64(ts[j], it.off[0]);
        int known = 1;
        acc_f[i] = n->op == MG_OP_Mean ? acc_f[i] + b : binary_f(n, acc_f[i], b, &known);
        if (!known) {
          mg_error(c->d, UNKNOWN_OP, n->name, n->op_type, "%s has no elementwise case", n->op_type);
          rc = -1;
        }
        if (n->op == MG_OP_Pow && !it_is_float(src)) acc_f[i] = trunc(acc_f[i]);
      } else {
        int64_t b = it_get_i64(ts[j], it.off[0]);
        rc = binary_i(c, n, acc_i[i], b, uns, &acc_i[i]);
      }
    }
  }
  if (!rc && n->op == MG_OP_Mean)
    for (int64_t i = 0; i < k; i++) acc_f[i] /= cnt;
  if (!rc) {
    if (flt) it_store_f64(y, acc_f);
    else it_store_i64(y, acc_i);
  }
  mg_free(acc_f);
  mg_free(acc_i);
  return rc;
}

static int where(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *ts[3] = {it_in(in, n, 0), it_in(in, n, 1), it_in(in, n, 2)};
  if (!ts[0] || !ts[1] || !ts[2]) return it_fail(c, n, "missing input");
  int rank;
  int64_t dims[MG_ARRAY_MAX_RANK];
  if (it_broadcast(ts, 3, &rank, dims)) return it_fail(c, n, "inputs do not broadcast");
  mg_array *y = it_out(c, n, out, 0, ts[1]->dtype, rank, dims);
  if (!y) return -1;
  bcast_iter it;
  iter_init(&it, ts, 3, rank, dims);
  size_t es = mg_dtype_size(y->dtype);
  int64_t k = it_numel(y);
  for (int64_t i = 0; i < k; i++, iter_next(&it)) {
    const mg_array *src = it_get_i64(ts[0], it.off[0]) ? ts[1] : ts[2];
    int64_t off = src == ts[1] ? it.off[1] : it.off[2];
    memcpy((unsigned char *)y->data + (size_t)i * es, (const unsigned char *)src->data + (size_t)off * es, es);
  }
  return 0;
}

static int clip(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *x = it_in(in, n, 0), *lo = it_in(in, n, 1), *hi = it_in(in, n, 2);
  if (!x) return it_fail(c, n, "missing input");
  if ((lo && it_numel(lo) != 1) || (hi && it_numel(hi) != 1)) return it_fail(c, n, "min and max must be scalars");
  mg_array *y = it_out(c, n, out, 0, x->dtype, x->rank, x->dims);
  if (!y) return -1;
  int64_t k = it_numel(x);
  if (it_is_float(x->dtype)) {
    double a = lo ? it_get_f64(lo, 0) : -INFINITY, b = hi ? it_get_f64(hi, 0) : INFINITY;
    for (int64_t i = 0; i < k; i++) {
      double v = it_get_f64(x, i);
      it_set_f64(y, i, isnan(v) ? v : v < a ? a : v > b ? b : v);
    }
  } else {
    int uns = is_unsigned(x->dtype);
    for (int64_t i = 0; i < k; i++) {
      int64_t v = it_get_i64(x, i);
      if (lo && (uns ? (uint64_t)v < (uint64_t)it_get_i64(lo, 0) : v < it_get_i64(lo, 0))) v = it_get_i64(lo, 0);
      if (hi && (uns ? (uint64_t)v > (uint64_t)it_get_i64(hi, 0) : v > it_get_i64(hi, 0))) v = it_get_i64(hi, 0);
      it_set_i64(y, i, v);
    }
  }
  return 0;
}

static int cast(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *x = it_in(in, n, 0);
  if (!x) return it_fail(c, n, "missing input");
  mg_dtype to;
  if (n->op == MG_OP_CastLike) {
    const mg_array *like = it_in(in, n, 1);
    if (!like) return it_fail(c, n, "missing target_type input");
    to = like->dtype;
  } else {
    to = (mg_dtype)mg_attr_int(n, "to", 0);
  }
  if (to == MG_STRING || x->dtype == MG_STRING) {
    mg_error(c->d, UNSUPPORTED_DTYPE, n->name, n->op_type, "casts to or from string are not supported");
    return -1;
  }
  mg_array *y = it_out(c, n, out, 0, to, x->rank, x->dims);
  if (!y) return -1;
  int64_t k = it_numel(x);
  for (int64_t i = 0; i < k; i++) {
    if (it_is_float(x->dtype) || it_is_float(to)) {
      if (x->dtype == MG_U64 && it_is_float(to)) it_set_f64(y, i, (double)(uint64_t)it_get_i64(x, i));
      else if (it_is_float(x->dtype) && to == MG_BOOL) it_set_i64(y, i, it_get_f64(x, i) != 0);
      else it_set_f64(y, i, it_get_f64(x, i));
    } else {
      it_set_i64(y, i, it_get_i64(x, i));
    }
  }
  return 0;
}

static int copy_value(interp_ctx *c, const mg_node *n, const mg_rvalue *src, mg_rvalue *dst) {
  dst->kind = src->kind;
  if (src->kind == MG_RV_TENSOR) return it_copy(c, n, &dst->t, &src->t);
  if (src->kind == MG_RV_SEQUENCE) {
    dst->items = mg_calloc((size_t)src->n_items + 1, sizeof(mg_array));
    if (!dst->items) return it_fail(c, n, "out of memory");
    for (int i = 0; i < src->n_items; i++) {
      if (it_copy(c, n, &dst->items[i], &src->items[i])) return -1;
      dst->n_items++;
    }
  }
  return 0;
}

static int dropout(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *x = it_in(in, n, 0), *ratio = it_in(in, n, 1), *train = it_in(in, n, 2);
  if (!x) return it_fail(c, n, "missing input");
  double r = ratio ? it_get_f64(ratio, 0) : 0.5;
  int training = train && it_get_i64(train, 0);
  mg_array *y = it_out(c, n, out, 0, x->dtype, x->rank, x->dims);
  if (!y) return -1;
  mg_array *mask = n->n_out > 1 && out[1] ? it_out(c, n, out, 1, MG_BOOL, x->rank, x->dims) : NULL;
  if (n->n_out > 1 && out[1] && !mask) return -1;
  int64_t k = it_numel(x);
  for (int64_t i = 0; i < k; i++) {
    int keep = 1;
    if (training && r > 0) {
      c->rng ^= c->rng << 13, c->rng ^= c->rng >> 7, c->rng ^= c->rng << 17;
      keep = (double)(c->rng >> 11) / 9007199254740992.0 >= r;
    }
    double scale = training && r > 0 && r < 1 ? 1 / (1 - r) : 1;
    it_set_f64(y, i, keep ? it_get_f64(x, i) * scale : 0);
    if (mask) it_set_i64(mask, i, keep);
  }
  return 0;
}

static int predicate(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *x = it_in(in, n, 0);
  if (!x) return it_fail(c, n, "missing input");
  mg_array *y = it_out(c, n, out, 0, MG_BOOL, x->rank, x->dims);
  if (!y) return -1;
  int is_inf = n->op == MG_OP_IsInf; /* IsNaN has no detect_* attributes */
  int neg = is_inf ? (int)mg_attr_int(n, "detect_negative", 1) : 1;
  int pos = is_inf ? (int)mg_attr_int(n, "detect_positive", 1) : 1;
  int64_t k = it_numel(x);
  for (int64_t i = 0; i < k; i++) {
    double v = it_get_f64(x, i);
    int r = n->op == MG_OP_IsNaN ? isnan(v) != 0 : isinf(v) && ((v > 0 && pos) || (v < 0 && neg));
    it_set_i64(y, i, r);
  }
  return 0;
}

int interp_elementwise(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out,
                       interp_frame *frame) {
  (void)frame;
  switch (n->op) {
  case MG_OP_Identity:
    if (!in[0]) return it_fail(c, n, "missing input");
    return copy_value(c, n, in[0], out[0]);
  case MG_OP_Where: return where(c, n, in, out);
  case MG_OP_Clip: return clip(c, n, in, out);
  case MG_OP_Cast: case MG_OP_CastLike: return cast(c, n, in, out);
  case MG_OP_Dropout: return dropout(c, n, in, out);
  case MG_OP_IsNaN: case MG_OP_IsInf: return predicate(c, n, in, out);
  default:
    break;
  }
  const mg_op_info *info = mg_op_get(n->op);
  if (info->shape_rule == MG_SH_BINARY || info->shape_rule == MG_SH_COMPARE) return binary(c, n, in, out);
  return unary(c, n, in, out);
}
